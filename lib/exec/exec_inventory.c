/* exec_inventory.c: what the local executor can run on. This machine's
 * NVIDIA GPUs through NVML (exec_nvml.c: loaded at run time, so no library
 * or no GPU is an empty inventory, not an error); or virtual GPUs from a
 * Cluster spec, for demos and tests on a machine without GPUs; plus CPU
 * slots for CPU-only jobs. */
#include "exec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void gpu_push(exec_inventory *inv, const exec_gpu *g)
{
    inv->gpus = xrealloc(inv->gpus, (inv->n_gpus + 1) * sizeof *inv->gpus);
    inv->gpus[inv->n_gpus++] = *g;
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void exec_inventory_local(exec_inventory *inv)
{
    memset(inv, 0, sizeof *inv);
    snprintf(inv->source, sizeof inv->source, "none");
    inv->cpu_slots = online_cpus();
    exec_nvml *a = exec_nvml_open(inv->note, sizeof inv->note);
    if (!a) return;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    for (unsigned int i = 0; i < exec_nvml_count(a); i++) {
        exec_gpu g;
        if (!exec_nvml_describe(a, i, host, &g, inv->note, sizeof inv->note)) break;
        gpu_push(inv, &g);
    }
    if (inv->n_gpus) snprintf(inv->source, sizeof inv->source, "nvml");
    exec_nvml_close(a);
}

void exec_inventory_from_cluster(const spec_cluster *c, exec_inventory *inv)
{
    memset(inv, 0, sizeof *inv);
    snprintf(inv->source, sizeof inv->source, "cluster");
    double cpus = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const spec_node *n = &c->nodes[i];
        cpus += n->cpus;
        const spec_gpu_type *t = n->gpu_type ? spec_cluster_gpu_type(c, n->gpu_type) : NULL;
        for (int k = 0; k < n->gpus; k++) {
            exec_gpu g = {xstrdup(n->name), k, xasprintf("%d", k), NULL,
                          xstrdup(n->gpu_type ? n->gpu_type : "GPU"), t ? t->memory : 0, true};
            gpu_push(inv, &g);
        }
    }
    inv->cpu_slots = cpus >= 1 ? (int)cpus : online_cpus();
    snprintf(inv->note, sizeof inv->note, "%zu virtual GPUs on %zu nodes of %s; the work runs on "
                                          "this machine's CPUs",
             inv->n_gpus, c->n_nodes, c->name ? c->name : c->file ? c->file : "the cluster");
}

void exec_inventory_free(exec_inventory *inv)
{
    for (size_t i = 0; i < inv->n_gpus; i++) {
        free(inv->gpus[i].node);
        free(inv->gpus[i].id);
        free(inv->gpus[i].uuid);
        free(inv->gpus[i].name);
    }
    free(inv->gpus);
    memset(inv, 0, sizeof *inv);
}
