/* plan_gpus.c: the GPU catalogue the planner chooses from: memory, price,
 * throughput and node shape of each GPU type, built in or read from a
 * Cluster file.
 *
 * Sources of the built-in figures:
 *   memory   the total nvidia-smi reports for the device (MiB)
 *   tflops   dense BF16 tensor throughput from NVIDIA's data sheets (the
 *            "with sparsity" figures halved); A10G from AWS / baseten's
 *            A10 vs A10G comparison; RTX 4090 from the Ada whitepaper (FP16
 *            with FP32 accumulate)
 *   price    on-demand list prices per GPU-hour, late 2025: AWS g5 (A10G),
 *            g6 (L4), g6e (L40S); Lambda (A100, H100, H200); community
 *            clouds (RTX 4090). A Cluster file's pricePerHour overrides.
 *   mfu      the share of the data-sheet peak a LoRA / full fine-tuning step
 *            with FlashAttention reaches in PyTorch stacks (docs/planner.md)
 */
#include "plan/plan.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpu_fact {
    const char *name;
    double memory_mib;
    double price;
    double tflops;
    double mfu;
    int per_node;
    bool nvlink;
} gpu_fact;

static const gpu_fact builtin_gpus[] = {
    {"A10G-24GB", 23028, 1.01, 70.0, 0.40, 8, false},
    {"L4-24GB", 23034, 0.80, 121.0, 0.35, 8, false},
    {"RTX4090-24GB", 24564, 0.69, 165.2, 0.40, 8, false},
    {"L40S-48GB", 46068, 1.86, 362.1, 0.38, 8, false},
    {"A100-40GB", 40960, 1.29, 312.0, 0.45, 8, true},
    {"A100-80GB", 81920, 1.79, 312.0, 0.45, 8, true},
    {"H100-80GB", 81559, 2.99, 989.4, 0.40, 8, true},
    {"H200-141GB", 143771, 3.79, 989.4, 0.42, 8, true},
};
#define N_BUILTIN (sizeof builtin_gpus / sizeof builtin_gpus[0])

static void gpu_from_fact(plan_gpu *g, const gpu_fact *f)
{
    memset(g, 0, sizeof *g);
    g->name = xstrdup(f->name);
    g->memory = f->memory_mib * 1048576.0;
    g->price_per_hour = f->price;
    g->tflops = f->tflops;
    g->mfu = f->mfu;
    g->per_node = f->per_node;
    g->nvlink = f->nvlink;
    g->source = xstrdup("built-in catalogue");
}

void plan_catalog_builtin(plan_catalog *out)
{
    out->n = N_BUILTIN;
    out->gpus = xcalloc(N_BUILTIN, sizeof *out->gpus);
    for (size_t i = 0; i < N_BUILTIN; i++) gpu_from_fact(&out->gpus[i], &builtin_gpus[i]);
    out->origin = xstrdup("built-in catalogue");
}

void plan_catalog_free(plan_catalog *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->gpus[i].name);
        free(c->gpus[i].source);
    }
    free(c->gpus);
    free(c->origin);
    memset(c, 0, sizeof *c);
}

/* "NVIDIA A100-SXM4-80GB" -> "a100sxm480": lower case, letters and digits
 * only, without "nvidia" and the "gb"/"g" unit after a number. */
static void gpu_key(const char *name, char *out, size_t outsz)
{
    size_t o = 0;
    if (strncasecmp(name, "nvidia", 6) == 0) name += 6;
    for (const char *p = name; *p && o + 1 < outsz; p++) {
        if (!isalnum((unsigned char)*p)) continue;
        if (tolower((unsigned char)*p) == 'g' && p > name && isdigit((unsigned char)p[-1])) {
            if (tolower((unsigned char)p[1]) == 'b') p++;
            continue;
        }
        out[o++] = (char)tolower((unsigned char)*p);
    }
    out[o] = '\0';
}

const plan_gpu *plan_catalog_find(const plan_catalog *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (str_ieq(c->gpus[i].name, name)) return &c->gpus[i];
    char want[64], have[64];
    gpu_key(name, want, sizeof want);
    const plan_gpu *found = NULL;
    for (size_t i = 0; i < c->n; i++) {
        gpu_key(c->gpus[i].name, have, sizeof have);
        if (strcmp(want, have) == 0) return &c->gpus[i];
        if (want[0] && str_starts_with(have, want)) {
            if (found) return NULL; /* "A100" matches two types */
            found = &c->gpus[i];
        }
    }
    return found;
}

static const gpu_fact *builtin_find(const char *name)
{
    plan_catalog tmp = {0};
    plan_catalog_builtin(&tmp);
    const plan_gpu *g = plan_catalog_find(&tmp, name);
    const gpu_fact *f = g ? &builtin_gpus[g - tmp.gpus] : NULL;
    plan_catalog_free(&tmp);
    return f;
}

/* Counts the cluster's GPUs of type t and its widest node of that type. */
static void count_nodes(const spec_cluster *c, const char *t, int *total, int *widest)
{
    *total = *widest = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const spec_node *n = &c->nodes[i];
        if (!n->gpu_type || strcmp(n->gpu_type, t) != 0 || n->state == NODE_DOWN) continue;
        *total += n->gpus;
        if (n->gpus > *widest) *widest = n->gpus;
    }
}

bool plan_catalog_from_cluster(const spec_cluster *c, plan_catalog *out, diag_list *d)
{
    size_t before = d->errors;
    memset(out, 0, sizeof *out);
    out->gpus = xcalloc(c->n_gpu_types ? c->n_gpu_types : 1, sizeof *out->gpus);
    out->origin = xasprintf("cluster %s", c->file ? c->file : c->name ? c->name : "");
    for (size_t i = 0; i < c->n_gpu_types; i++) {
        const spec_gpu_type *t = &c->gpu_types[i];
        const gpu_fact *f = builtin_find(t->name);
        plan_gpu *g = &out->gpus[out->n++];
        memset(g, 0, sizeof *g);
        g->name = xstrdup(t->name);
        g->memory = t->memory > 0 ? t->memory : f ? f->memory_mib * 1048576.0 : 0;
        g->price_per_hour = t->price_per_hour > 0 ? t->price_per_hour : f ? f->price : 0;
        g->tflops = t->tflops > 0 ? t->tflops : f ? f->tflops : 0;
        g->mfu = f ? f->mfu : 0.40;
        g->nvlink = f ? f->nvlink : false;
        count_nodes(c, t->name, &g->available, &g->per_node);
        if (g->per_node == 0) g->per_node = f ? f->per_node : 8;
        g->source = xasprintf("%s%s", out->origin, f ? " + built-in figures" : "");
        if (g->tflops <= 0) {
            char *path = xasprintf("spec.gpuTypes[%zu].tflops", i);
            diag *x = diag_add(d, DIAG_ERROR, c->file, 0, 0, path,
                               "lathe does not know this GPU type's throughput");
            diag_set_suggestion(x, "add `tflops:` (dense BF16 TFLOP/s from the data sheet) to %s",
                                t->name);
            free(path);
        }
        if (g->memory <= 0) {
            char *path = xasprintf("spec.gpuTypes[%zu].memory", i);
            diag *x = diag_add(d, DIAG_ERROR, c->file, 0, 0, path, "GPU memory is unknown");
            diag_set_suggestion(x, "add `memory:` (for example 80Gi) to %s", t->name);
            free(path);
        }
    }
    return d->errors == before;
}
