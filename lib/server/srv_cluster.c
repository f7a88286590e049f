/* srv_cluster.c: the cluster the server schedules on, built once at start
 * and read-only afterwards:
 *
 *   - a Cluster file (spec.cluster.file): virtual GPUs for demos and tests
 *     (the work runs on the CPU; ids are exported as the trainer contract
 *     says), teams with quotas, priority classes;
 *   - and / or this machine's NVIDIA GPUs through NVML (spec.cluster.gpus:
 *     nvml, the default without a Cluster file): one node named after the
 *     host, its GPU type matched to the planner's catalogue by model and
 *     memory;
 *   - with no GPU at all the server runs in CPU mode: every job takes one
 *     of spec.cluster.cpuSlots CPU slots, in priority then submission
 *     order.
 *
 * Teams named by tokens but absent from the Cluster file are added without
 * a quota. The scheduler's view (sched_cluster) and the planner's catalogue
 * come from the same spec_cluster, so a plan always names a GPU type the
 * scheduler knows.
 */
#include "srv_internal.h"
#include "op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An empty Cluster document, loaded through the spec part like a file. */
static bool empty_cluster(spec_file *f, diag_list *d)
{
    json_t *doc = json_pack("{s:s, s:s, s:{s:s}, s:{}}", "apiVersion", "lathe/v1", "kind",
                            "Cluster", "metadata", "name", "local", "spec");
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    size_t errors = spec_load_string("<local cluster>", text, strlen(text), f, d);
    free(text);
    return errors == 0 && spec_file_cluster(f);
}

/* The built-in catalogue entry an NVML GPU is: its name holds the entry's
 * model ("H100" of "H100-80GB") and the memory is within 15%. NULL when
 * none matches (the NVML name is then used as the type). */
static char *nvml_type_name(const char *nvml_name, double memory)
{
    plan_catalog cat;
    plan_catalog_builtin(&cat);
    char *found = NULL;
    char upper[128];
    size_t n = 0;
    for (; nvml_name[n] && n + 1 < sizeof upper; n++)
        upper[n] = (char)(nvml_name[n] >= 'a' && nvml_name[n] <= 'z' ? nvml_name[n] - 32 : nvml_name[n]);
    upper[n] = '\0';
    for (size_t i = 0; i < cat.n && !found; i++) {
        char model[32];
        snprintf(model, sizeof model, "%.*s", (int)strcspn(cat.gpus[i].name, "-"), cat.gpus[i].name);
        bool mem_ok = memory <= 0 || (memory > cat.gpus[i].memory * 0.85 &&
                                      memory < cat.gpus[i].memory * 1.15);
        if (strstr(upper, model) && mem_ok) found = xstrdup(cat.gpus[i].name);
    }
    plan_catalog_free(&cat);
    return found;
}

static void add_gpu_type(spec_cluster *c, const char *name, double memory)
{
    if (spec_cluster_gpu_type(c, name)) return;
    c->gpu_types = xrealloc(c->gpu_types, (c->n_gpu_types + 1) * sizeof *c->gpu_types);
    spec_gpu_type *t = &c->gpu_types[c->n_gpu_types++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->memory = memory;
}

/* This machine's GPUs as one node of the cluster (every GPU of one NVML
 * inventory is on this host). Returns the node's name, or NULL. */
static char *add_nvml_node(spec_cluster *c, const exec_inventory *inv)
{
    if (inv->n_gpus == 0) return NULL;
    const exec_gpu *g0 = &inv->gpus[0];
    char *type = nvml_type_name(g0->name, g0->memory);
    if (!type) type = xstrdup(g0->name);
    add_gpu_type(c, type, g0->memory);
    c->nodes = xrealloc(c->nodes, (c->n_nodes + 1) * sizeof *c->nodes);
    spec_node *n = &c->nodes[c->n_nodes++];
    memset(n, 0, sizeof *n);
    n->name = xstrdup(g0->node ? g0->node : "localhost");
    n->gpu_type = type;
    n->gpus = (int)inv->n_gpus;
    n->nvlink_group = xcalloc(inv->n_gpus, sizeof *n->nvlink_group); /* one group */
    n->n_nvlink_groups = 1;
    n->state = NODE_READY;
    return xstrdup(n->name);
}

/* The lathe GPU type of a Kubernetes node: the settings' gpuProducts
 * entry whose value is its product label, a type of the Cluster file named
 * as the label, or the planner's catalogue entry the label names (its
 * model and the memory label). NULL when none. */
static char *k8s_type_name(const spec_k8s *k, const spec_cluster *c, const exec_k8s_node *n)
{
    if (!n->product) return NULL;
    for (size_t i = 0; i < k->n_gpu_products; i++)
        if (strcmp(k->gpu_products[i].value, n->product) == 0) return xstrdup(k->gpu_products[i].key);
    if (spec_cluster_gpu_type(c, n->product)) return xstrdup(n->product);
    char spaced[128];
    snprintf(spaced, sizeof spaced, "%s", n->product);
    for (char *p = spaced; *p; p++)
        if (*p == '-' || *p == '_') *p = ' ';
    return nvml_type_name(spaced, n->gpu_memory);
}

/* Kubernetes: every node with GPUs, as its backend lists them; the Cluster
 * file (if any) gives teams, quotas, priority classes and GPU types with
 * their prices, but not the nodes. */
static bool add_k8s_nodes(const srv_config *cfg, exec_backend *be, srv_cluster *sc, diag_list *d)
{
    spec_cluster *c = sc->spec;
    if (c->n_nodes) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "with executor k8s the nodes come from the Kubernetes API: the %zu nodes of the "
                 "Cluster file are not used", c->n_nodes);
        diag_add(d, DIAG_WARNING, cfg->cluster_file, 0, 0, "spec.nodes", msg);
        spec_cluster_clear_nodes(c);
    }
    exec_k8s_node *nodes;
    size_t n;
    exec_k8s_nodes(be, &nodes, &n);
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        const exec_k8s_node *kn = &nodes[i];
        char *type = k8s_type_name(&cfg->spec->k8s, c, kn);
        if (!type) {
            char msg[400];
            snprintf(msg, sizeof msg, "node %s: its GPU product '%s' (label %s) is not a GPU type lathe knows",
                     kn->name, kn->product ? kn->product : "(none)", cfg->spec->k8s.gpu_product_label);
            diag *x = diag_add(d, DIAG_ERROR, cfg->spec->file ? cfg->spec->file : "<config>", 0, 0,
                               "spec.kubernetes.gpuProducts", msg);
            diag_set_suggestion(x, "map it to a type: kubernetes.gpuProducts: {H100-80GB: \"%s\"}, "
                                   "or add the type to the Cluster file",
                                kn->product ? kn->product : "...");
            ok = false;
            continue;
        }
        add_gpu_type(c, type, kn->gpu_memory);
        c->nodes = xrealloc(c->nodes, (c->n_nodes + 1) * sizeof *c->nodes);
        spec_node *sn = &c->nodes[c->n_nodes++];
        memset(sn, 0, sizeof *sn);
        sn->name = xstrdup(kn->name);
        sn->rack = kn->rack ? xstrdup(kn->rack) : NULL;
        sn->gpu_type = type;
        sn->gpus = kn->gpus;
        sn->nvlink_group = xcalloc((size_t)kn->gpus, sizeof *sn->nvlink_group); /* one group */
        sn->n_nvlink_groups = 1;
        sn->state = kn->schedulable ? NODE_READY : NODE_DOWN;
        sn->cpus = kn->cpu;
        sn->memory = kn->memory;
    }
    exec_k8s_nodes_free(nodes, n);
    return ok;
}

/* Slurm: every node `scontrol show nodes` lists with GPUs; its type from
 * the GRES type (slurm.gpuTypes maps it, else a type of that name) or
 * slurm.gpuType for untyped GRES. Drained or down nodes are down. */
static bool add_slurm_nodes(const srv_config *cfg, exec_backend *be, srv_cluster *sc, diag_list *d,
                            char *err, size_t errsz)
{
    spec_cluster *c = sc->spec;
    const spec_slurm *sl = &cfg->spec->slurm;
    if (c->n_nodes) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "with executor slurm the nodes come from `scontrol show nodes`: the %zu nodes of "
                 "the Cluster file are not used", c->n_nodes);
        diag_add(d, DIAG_WARNING, cfg->cluster_file, 0, 0, "spec.nodes", msg);
        spec_cluster_clear_nodes(c);
    }
    exec_slurm_node *nodes;
    size_t n;
    if (!exec_slurm_nodes(be, &nodes, &n, err, errsz)) return false;
    for (size_t i = 0; i < n; i++) {
        const exec_slurm_node *kn = &nodes[i];
        if (kn->gpus <= 0) continue;
        const char *t = kn->gres_type ? spec_kv_find(sl->gpu_types, sl->n_gpu_types, kn->gres_type)
                                      : NULL;
        if (!t) t = kn->gres_type ? kn->gres_type : sl->gpu_type;
        char *type = NULL;
        if (spec_cluster_gpu_type(c, t)) type = xstrdup(t);
        else type = nvml_type_name(t, 0);
        if (!type) {
            char msg[300];
            snprintf(msg, sizeof msg, "node %s: its GPUs' type '%s' is not a GPU type lathe knows",
                     kn->name, t);
            diag *x = diag_add(d, DIAG_ERROR, cfg->spec->file ? cfg->spec->file : "<config>", 0, 0,
                               "spec.slurm.gpuTypes", msg);
            diag_set_suggestion(x, "map it: slurm.gpuTypes: {%s: H100-80GB}, or add the type to "
                                   "the Cluster file", t);
            exec_slurm_nodes_free(nodes, n);
            snprintf(err, errsz, "the Slurm nodes' GPU types are not all known");
            return false;
        }
        add_gpu_type(c, type, 0);
        c->nodes = xrealloc(c->nodes, (c->n_nodes + 1) * sizeof *c->nodes);
        spec_node *sn = &c->nodes[c->n_nodes++];
        memset(sn, 0, sizeof *sn);
        sn->name = xstrdup(kn->name);
        sn->gpu_type = type;
        sn->gpus = kn->gpus;
        sn->nvlink_group = xcalloc((size_t)kn->gpus, sizeof *sn->nvlink_group);
        sn->n_nvlink_groups = 1;
        sn->state = kn->schedulable ? NODE_READY : NODE_DOWN;
        sn->cpus = kn->cpu;
        sn->memory = kn->memory;
    }
    exec_slurm_nodes_free(nodes, n);
    return true;
}

/* Each type's product label value, for the Jobs' nodeSelector. */
static void k8s_products(exec_backend *be, srv_cluster *c)
{
    const sched_cluster *s = c->sched;
    c->type_product = xcalloc((size_t)s->n_types + 1, sizeof *c->type_product);
    exec_k8s_node *nodes;
    size_t n;
    exec_k8s_nodes(be, &nodes, &n);
    for (int i = 0; i < s->n_nodes; i++) {
        const exec_k8s_node *kn = exec_k8s_node_find(nodes, n, s->nodes[i].name);
        int t = s->nodes[i].type;
        if (kn && kn->product && !c->type_product[t]) c->type_product[t] = xstrdup(kn->product);
    }
    exec_k8s_nodes_free(nodes, n);
}

static bool spec_has_gpus(const spec_cluster *c)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].gpus > 0 && c->nodes[i].gpu_type) return true;
    return false;
}

/* CPU mode: teams and priority classes only. */
static sched_cluster *cpu_sched(const spec_cluster *s)
{
    sched_cluster *c = sched_cluster_new();
    for (size_t i = 0; i < s->n_teams; i++) sched_cluster_add_team(c, s->teams[i].name);
    for (size_t i = 0; i < s->n_priority_classes; i++) {
        const spec_priority_class *p = &s->priority_classes[i];
        sched_cluster_add_priority(c, p->name, p->value, p->preempt_lower, p->global_default);
    }
    return c;
}

/* Exported ids: the NVML inventory's for the local node, the index for
 * virtual GPUs. */
static void map_gpus(srv_cluster *c, const exec_inventory *inv, const char *nvml_node)
{
    const sched_cluster *s = c->sched;
    c->gpus = xcalloc(s->n_gpus ? (size_t)s->n_gpus : 1, sizeof *c->gpus);
    c->nvml_node = -1;
    for (int n = 0; n < s->n_nodes; n++) {
        const sched_node *node = &s->nodes[n];
        bool local = nvml_node && strcmp(node->name, nvml_node) == 0;
        if (local) c->nvml_node = n;
        for (int k = 0; k < node->n_gpus; k++) {
            srv_gpu *g = &c->gpus[node->first_gpu + k];
            bool nv = local && (size_t)k < inv->n_gpus;
            g->node = n;
            g->index = k;
            g->is_virtual = !local;
            g->id = nv && inv->gpus[k].id ? xstrdup(inv->gpus[k].id) : xasprintf("%d", k);
            g->model = nv && inv->gpus[k].name ? xstrdup(inv->gpus[k].name) : NULL;
        }
    }
}

static bool want_nvml(const srv_config *cfg)
{
    const char *g = cfg->spec->cluster.gpus;
    if (g) return strcmp(g, "nvml") == 0;
    return cfg->cluster_file == NULL;
}

/* Teams named by tokens, and without a Cluster file the team "default"
 * (what a job that names no team belongs to). */
static void add_token_teams(const srv_config *cfg, srv_cluster *c)
{
    if (!cfg->cluster_file && sched_cluster_find_team(c->sched, "default") < 0)
        sched_cluster_add_team(c->sched, "default");
    for (size_t i = 0; i < cfg->n_tokens; i++) {
        const char *t = cfg->tokens[i].team;
        if (t && sched_cluster_find_team(c->sched, t) < 0) sched_cluster_add_team(c->sched, t);
    }
}

int srv_cluster_build(const srv_config *cfg, exec_backend *be, srv_cluster *c, diag_list *d,
                      char *err, size_t errsz)
{
    bool k8s = be && strcmp(be->name, "k8s") == 0;
    bool slurm = be && strcmp(be->name, "slurm") == 0;
    memset(c, 0, sizeof *c);
    c->nvml_node = -1;
    if (cfg->cluster_file) {
        if (spec_load_file(cfg->cluster_file, &c->file, d) || !spec_file_cluster(&c->file)) {
            if (!spec_file_cluster(&c->file) && d->errors == 0)
                diag_add(d, DIAG_ERROR, cfg->cluster_file, 0, 0, NULL,
                         "the file holds no Cluster document");
            snprintf(err, errsz, "%s: the cluster file is invalid", cfg->cluster_file);
            return c->file.io_error ? LT_EXIT_IO : LT_EXIT_INVALID;
        }
    } else if (!empty_cluster(&c->file, d)) {
        snprintf(err, errsz, "cannot make the local cluster");
        return LT_EXIT_INTERNAL;
    }
    c->spec = spec_file_cluster(&c->file);
    exec_inventory inv;
    memset(&inv, 0, sizeof inv);
    char *nvml_node = NULL;
    if (k8s) {
        if (!add_k8s_nodes(cfg, be, c, d)) {
            snprintf(err, errsz, "the Kubernetes nodes' GPU types are not all known");
            return LT_EXIT_INVALID;
        }
        snprintf(c->note, sizeof c->note, "nodes from the Kubernetes API");
        if (cfg->spec->k8s.op.enabled &&
            !op_cluster_add(cfg->spec, be, c->spec, &c->api_print, err, errsz))
            return LT_EXIT_UNAVAILABLE;
    } else if (slurm) {
        char e2[300];
        if (!add_slurm_nodes(cfg, be, c, d, e2, sizeof e2)) {
            snprintf(err, errsz, "%s", e2);
            return LT_EXIT_UNAVAILABLE;
        }
        snprintf(c->note, sizeof c->note, "nodes from scontrol show nodes");
    } else if (want_nvml(cfg)) {
        exec_inventory_local(&inv);
        snprintf(c->note, sizeof c->note, "%s", inv.note);
        nvml_node = add_nvml_node(c->spec, &inv);
    }
    snprintf(c->source, sizeof c->source, "%s%s%s", cfg->cluster_file ? "cluster" : "",
             cfg->cluster_file && (nvml_node || k8s || slurm) ? "+" : "",
             k8s ? "k8s" : slurm ? "slurm" : nvml_node ? "nvml" : "");
    if (!c->source[0]) snprintf(c->source, sizeof c->source, "none");
    c->cpu_mode = !spec_has_gpus(c->spec);
    c->sched = c->cpu_mode ? cpu_sched(c->spec) : sched_cluster_from_spec(c->spec, d);
    int rc = LT_EXIT_OK;
    if (!c->sched) {
        snprintf(err, errsz, "the cluster cannot be scheduled on");
        rc = LT_EXIT_INVALID;
    } else {
        add_token_teams(cfg, c);
        if (!c->cpu_mode) {
            c->has_catalog = plan_catalog_from_cluster(c->spec, &c->catalog, d);
            if (!c->has_catalog) {
                snprintf(err, errsz, "the cluster's GPU types are not all known to the planner");
                rc = LT_EXIT_INVALID;
            }
        }
        map_gpus(c, &inv, nvml_node);
        if (slurm && !c->cpu_mode)
            for (int i = 0; i < c->sched->n_gpus; i++) c->gpus[i].is_virtual = false;
        if (k8s && !c->cpu_mode) {
            k8s_products(be, c);
            for (int i = 0; i < c->sched->n_gpus; i++) c->gpus[i].is_virtual = false;
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->cpu_slots = cfg->spec->cluster.cpu_slots > 0 ? cfg->spec->cluster.cpu_slots
                   : cpus > 0                       ? (int)cpus
                                                    : 1;
    free(nvml_node);
    exec_inventory_free(&inv);
    return rc;
}

void srv_cluster_free(srv_cluster *c)
{
    if (c->sched)
        for (int i = 0; i < c->sched->n_gpus; i++) {
            free(c->gpus[i].id);
            free(c->gpus[i].model);
        }
    free(c->gpus);
    for (int i = 0; c->type_product && i < c->sched->n_types; i++) free(c->type_product[i]);
    free(c->type_product);
    free(c->api_print);
    sched_cluster_free(c->sched);
    if (c->has_catalog) plan_catalog_free(&c->catalog);
    spec_file_free(&c->file);
    memset(c, 0, sizeof *c);
}

bool srv_cluster_has_team(const srv_cluster *c, const char *team)
{
    return team && sched_cluster_find_team(c->sched, team) >= 0;
}

double srv_cluster_price(const srv_cluster *c, int gpu)
{
    if (gpu < 0 || gpu >= c->sched->n_gpus) return 0;
    const sched_node *n = &c->sched->nodes[c->sched->gpu_node[gpu]];
    return c->sched->types[n->type].price_per_hour;
}

int srv_cluster_gpu(const srv_cluster *c, const char *node_name, int index)
{
    int n = node_name ? sched_cluster_find_node(c->sched, node_name) : -1;
    if (n < 0 || index < 0 || index >= c->sched->nodes[n].n_gpus) return -1;
    return c->sched->nodes[n].first_gpu + index;
}

const char *srv_cluster_product(const srv_cluster *c, int type)
{
    return c->type_product && type >= 0 && type < c->sched->n_types ? c->type_product[type] : NULL;
}

const char *srv_cluster_rack(const srv_cluster *c, int node)
{
    if (node < 0 || node >= c->sched->n_nodes || !c->spec) return NULL;
    const char *name = c->sched->nodes[node].name;
    for (size_t i = 0; i < c->spec->n_nodes; i++) /* the spec node it came from */
        if (strcmp(c->spec->nodes[i].name, name) == 0) return c->spec->nodes[i].rack;
    return NULL;
}
