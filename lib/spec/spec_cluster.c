/* spec_cluster.c: the Cluster: GPU types, nodes (one by one, or node
 * groups expanded into racks of named nodes), NVLink groups inside a node,
 * teams with quotas, and priority classes; the checks across them (unknown
 * GPU types, duplicate names, NVLink indices) and the lookups the scheduler
 * uses.
 *
 * Node groups: {namePrefix: a100, count: 16, nodesPerRack: 8} makes nodes
 * a100-01 .. a100-16 (numbers zero-padded to the width of count, at least
 * two digits) in racks a100-rack-1 and a100-rack-2 (counting from 1).
 * NVLink: nvlinkGroups lists groups of GPU indices; a GPU in no group forms
 * a group of its own (no NVLink peer). Quotas: keys are GPU type names, or
 * "nvidia.com/gpu" / "*" for any type.
 */
#include "spec_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA(tab, type, init, after) {tab, sizeof tab / sizeof tab[0], sizeof(type), init, after}
#define SCHEMA0(tab) {tab, sizeof tab / sizeof tab[0], 0, NULL, NULL}

/* A nodeGroups entry before expansion. */
typedef struct node_group {
    char *name_prefix;
    int count;
    int nodes_per_rack; /* 0: no racks */
    char *gpu_type;
    int gpus_per_node;
    int *nvlink_group;
    int n_nvlink_groups;
    spec_kv *labels;
    size_t n_labels;
    spec_node_state state;
    double cpus, memory;
} node_group;

/* What the decoder fills before groups are expanded into nodes. */
typedef struct cluster_build {
    spec_cluster c;
    node_group *groups;
    size_t n_groups;
    spec_node *nodes; /* the `nodes` list as written */
    size_t n_nodes;
} cluster_build;

/* ---- memory ---- */
static void node_free(spec_node *n)
{
    free(n->name);
    free(n->rack);
    free(n->gpu_type);
    free(n->nvlink_group);
    spec_kv_free(n->labels, n->n_labels);
}

void spec_cluster_clear_nodes(spec_cluster *c)
{
    for (size_t i = 0; i < c->n_nodes; i++) node_free(&c->nodes[i]);
    free(c->nodes);
    c->nodes = NULL;
    c->n_nodes = 0;
}

static void team_free(spec_team *t)
{
    free(t->name);
    for (size_t i = 0; i < t->n_quota; i++) free(t->quota[i].gpu_type);
    for (size_t i = 0; i < t->n_borrowing_limit; i++) free(t->borrowing_limit[i].gpu_type);
    for (size_t i = 0; i < t->n_lending_limit; i++) free(t->lending_limit[i].gpu_type);
    free(t->quota);
    free(t->borrowing_limit);
    free(t->lending_limit);
}

static void cluster_free_parts(spec_cluster *c)
{
    free(c->file);
    free(c->name);
    for (size_t i = 0; i < c->n_gpu_types; i++) free(c->gpu_types[i].name);
    free(c->gpu_types);
    for (size_t i = 0; i < c->n_nodes; i++) node_free(&c->nodes[i]);
    free(c->nodes);
    for (size_t i = 0; i < c->n_teams; i++) team_free(&c->teams[i]);
    free(c->teams);
    for (size_t i = 0; i < c->n_priority_classes; i++) {
        free(c->priority_classes[i].name);
        free(c->priority_classes[i].description);
    }
    free(c->priority_classes);
}

void spec_cluster_free(spec_cluster *c)
{
    if (!c) return;
    cluster_free_parts(c);
    free(c);
}

static void build_free(cluster_build *b)
{
    for (size_t i = 0; i < b->n_groups; i++) {
        node_group *g = &b->groups[i];
        free(g->name_prefix);
        free(g->gpu_type);
        free(g->nvlink_group);
        spec_kv_free(g->labels, g->n_labels);
    }
    free(b->groups);
    for (size_t i = 0; i < b->n_nodes; i++) node_free(&b->nodes[i]);
    free(b->nodes);
}

/* ---- custom decoders ---- */

/* nvlinkGroups: [[0, 1, 2, 3], [4, 5, 6, 7]] over `gpus` GPUs. Fills one
 * group id per GPU; GPUs in no group get a group each. */
static void decode_nvlink(spec_dctx *c, const spec_ynode *m, int gpus, int **out, int *n_out)
{
    int *group = xmalloc((gpus > 0 ? (size_t)gpus : 1) * sizeof *group);
    for (int i = 0; i < gpus; i++) group[i] = -1;
    int next = 0;
    const spec_ynode *v = spec_ymap_get(m, "nvlinkGroups");
    size_t old = spec_path_push(c, "nvlinkGroups");
    if (!spec_yabsent(v) && v->kind != SPEC_YSEQ) {
        diag *x = spec_report(c, DIAG_ERROR, v, "wrong type");
        diag_set_expected(x, "a list of GPU index lists, such as [[0, 1, 2, 3], [4, 5, 6, 7]]");
    }
    for (size_t g = 0; !spec_yabsent(v) && v->kind == SPEC_YSEQ && g < v->n_items; g++) {
        const spec_ynode *grp = v->items[g];
        size_t o2 = spec_path_push_index(c, g);
        if (grp->kind != SPEC_YSEQ) {
            diag *x = spec_report(c, DIAG_ERROR, grp, "a group must be a list of GPU indices");
            diag_set_expected(x, "a list such as [0, 1, 2, 3]");
            spec_path_pop(c, o2);
            continue;
        }
        for (size_t k = 0; k < grp->n_items; k++) {
            const spec_ynode *it = grp->items[k];
            int64_t idx;
            size_t o3 = spec_path_push_index(c, k);
            if (it->kind != SPEC_YSCALAR || !spec_parse_i64(it->text, &idx) || idx < 0 ||
                idx >= gpus) {
                diag *x = spec_report(c, DIAG_ERROR, it, "not a GPU of this node");
                diag_set_expected(x, "a GPU index from 0 to %d", gpus - 1);
                char found[64];
                spec_ydescribe(it, found, sizeof found);
                diag_set_found(x, "%s", found);
                diag_set_suggestion(x, "the node has %d GPUs, numbered from 0", gpus);
            } else if (group[idx] >= 0) {
                diag *x = spec_report(c, DIAG_ERROR, it, "GPU %d is in two NVLink groups",
                                      (int)idx);
                diag_set_suggestion(x, "put each GPU in one group only");
            } else {
                group[idx] = next;
            }
            spec_path_pop(c, o3);
        }
        if (grp->n_items) next++;
        spec_path_pop(c, o2);
    }
    spec_path_pop(c, old);
    for (int i = 0; i < gpus; i++)
        if (group[i] < 0) group[i] = next++;
    *out = group;
    *n_out = next;
}

static void node_after(spec_dctx *c, const spec_ynode *m, void *elem)
{
    spec_node *n = elem;
    decode_nvlink(c, m, n->gpus, &n->nvlink_group, &n->n_nvlink_groups);
}

static void group_after(spec_dctx *c, const spec_ynode *m, void *elem)
{
    node_group *g = elem;
    decode_nvlink(c, m, g->gpus_per_node, &g->nvlink_group, &g->n_nvlink_groups);
}

static bool any_gpu_key(const char *k)
{
    return !strcmp(k, "*") || !strcmp(k, "nvidia.com/gpu") ||
           !strcmp(k, "requests.nvidia.com/gpu") || !strcmp(k, "limits.nvidia.com/gpu");
}

/* A quota map {A100-80GB: 64, nvidia.com/gpu: "32"} into spec_quota. */
static void decode_quota(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    static const spec_field count = {.key = "count", .type = SF_INT, .flags = SF_MIN, .min = 0,
                                     .hint = "a quota counts GPUs: 0 or more"};
    if (v->kind != SPEC_YMAP) {
        diag *x = spec_report(c, DIAG_ERROR, v, "wrong type");
        diag_set_expected(x, "a mapping of GPU types to counts, such as {A100-80GB: 64}");
        return;
    }
    spec_quota *q = xcalloc(v->n_items / 2 + 1, sizeof *q);
    size_t n = 0;
    for (size_t i = 0; i + 1 < v->n_items; i += 2) {
        const spec_ynode *k = v->items[i];
        if (k->kind != SPEC_YSCALAR) continue;
        size_t old = spec_path_push(c, k->text);
        int cnt = 0;
        if (spec_decode_field(c, &count, v->items[i + 1], &cnt)) {
            q[n].gpu_type = xstrdup(any_gpu_key(k->text) ? "*" : k->text);
            q[n++].count = cnt;
        }
        spec_path_pop(c, old);
    }
    *(spec_quota **)(void *)((char *)base + f->off) = q;
    *(size_t *)(void *)((char *)base + f->off_n) = n;
}

static void decode_preemption(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    static const spec_field pol = {.key = "preemptionPolicy", .type = SF_ENUM,
                                   .enm = &spec_enum_preemption};
    int p = 1;
    if (spec_decode_field(c, &pol, v, &p)) ((spec_priority_class *)base)->preempt_lower = p == 1;
    (void)f;
}

/* ---- schemas ---- */
static void gpu_type_init(void *e)
{
    (void)e; /* all zero: price 0 = unknown, tflops 0 = the catalogue's */
}

static void node_init(void *e)
{
    ((spec_node *)e)->state = NODE_READY;
}

static void group_init(void *e)
{
    ((node_group *)e)->state = NODE_READY;
}

static void team_init(void *e)
{
    ((spec_team *)e)->weight = 1;
}

static void class_init(void *e)
{
    ((spec_priority_class *)e)->preempt_lower = true;
}

#define G(m) offsetof(spec_gpu_type, m)
static const spec_field gpu_type_fields[] = {
    {.key = "name", .type = SF_STR, .off = G(name), .flags = SF_REQUIRED},
    {.key = "memory", .type = SF_BYTES, .off = G(memory), .flags = SF_REQUIRED | SF_MIN | SF_MIN_EXCL},
    {.key = "pricePerHour", .type = SF_DOUBLE, .off = G(price_per_hour), .flags = SF_MIN},
    {.key = "tflops", .type = SF_DOUBLE, .off = G(tflops), .flags = SF_MIN},
};
static const spec_schema gpu_type_schema = SCHEMA(gpu_type_fields, spec_gpu_type, gpu_type_init, NULL);

#define NG(m) offsetof(node_group, m)
static const spec_field group_fields[] = {
    {.key = "namePrefix", .type = SF_STR, .off = NG(name_prefix), .flags = SF_REQUIRED | SF_DNS},
    {.key = "count", .type = SF_INT, .off = NG(count), .flags = SF_REQUIRED | SF_MIN | SF_MAX,
     .min = 1, .max = SPEC_MAX_CLUSTER_NODES},
    {.key = "nodesPerRack", .type = SF_INT, .off = NG(nodes_per_rack), .flags = SF_MIN, .min = 1},
    {.key = "gpuType", .type = SF_STR, .off = NG(gpu_type)},
    {.key = "gpusPerNode", .type = SF_INT, .off = NG(gpus_per_node), .flags = SF_MIN | SF_MAX,
     .min = 0, .max = 1024},
    {.key = "nvlinkGroups", .type = SF_IGNORE},
    {.key = "labels", .type = SF_KV, .off = NG(labels), .off_n = NG(n_labels)},
    {.key = "state", .type = SF_ENUM, .off = NG(state), .enm = &spec_enum_node_state},
    {.key = "cpus", .type = SF_CPU, .off = NG(cpus), .flags = SF_MIN | SF_MIN_EXCL},
    {.key = "memory", .type = SF_BYTES, .off = NG(memory), .flags = SF_MIN | SF_MIN_EXCL},
};
static const spec_schema group_schema = SCHEMA(group_fields, node_group, group_init, group_after);

#define N(m) offsetof(spec_node, m)
static const spec_field node_fields[] = {
    {.key = "name", .type = SF_STR, .off = N(name), .flags = SF_REQUIRED},
    {.key = "rack", .type = SF_STR, .off = N(rack)},
    {.key = "gpuType", .type = SF_STR, .off = N(gpu_type)},
    {.key = "gpus", .type = SF_INT, .off = N(gpus), .flags = SF_MIN | SF_MAX, .min = 0, .max = 1024},
    {.key = "nvlinkGroups", .type = SF_IGNORE},
    {.key = "labels", .type = SF_KV, .off = N(labels), .off_n = N(n_labels)},
    {.key = "state", .type = SF_ENUM, .off = N(state), .enm = &spec_enum_node_state},
    {.key = "cpus", .type = SF_CPU, .off = N(cpus), .flags = SF_MIN | SF_MIN_EXCL},
    {.key = "memory", .type = SF_BYTES, .off = N(memory), .flags = SF_MIN | SF_MIN_EXCL},
};
static const spec_schema node_schema = SCHEMA(node_fields, spec_node, node_init, node_after);

#define T(m) offsetof(spec_team, m)
static const spec_field team_fields[] = {
    {.key = "name", .type = SF_STR, .off = T(name), .flags = SF_REQUIRED | SF_DNS},
    {.key = "quota", .type = SF_CUSTOM, .off = T(quota), .off_n = T(n_quota), .fn = decode_quota},
    {.key = "borrowingLimit", .type = SF_CUSTOM, .off = T(borrowing_limit),
     .off_n = T(n_borrowing_limit), .fn = decode_quota},
    {.key = "lendingLimit", .type = SF_CUSTOM, .off = T(lending_limit),
     .off_n = T(n_lending_limit), .fn = decode_quota},
    {.key = "weight", .type = SF_DOUBLE, .off = T(weight), .flags = SF_MIN | SF_MIN_EXCL,
     .hint = "a fair-share weight is above 0; 1 is the usual"},
    {.key = "budgetPerMonth", .type = SF_DOUBLE, .off = T(budget_per_month), .flags = SF_MIN},
    {.key = "maxConcurrentJobs", .type = SF_INT, .off = T(max_concurrent_jobs), .flags = SF_MIN},
};
static const spec_schema team_schema = SCHEMA(team_fields, spec_team, team_init, NULL);

#define P(m) offsetof(spec_priority_class, m)
static const spec_field class_fields[] = {
    {.key = "name", .type = SF_STR, .off = P(name), .flags = SF_REQUIRED | SF_DNS},
    /* Kubernetes: user classes go up to one billion */
    {.key = "value", .type = SF_I64, .off = P(value), .flags = SF_REQUIRED | SF_MIN | SF_MAX,
     .min = -2147483648.0, .max = 1000000000.0},
    {.key = "preemptionPolicy", .type = SF_CUSTOM, .fn = decode_preemption},
    {.key = "globalDefault", .type = SF_BOOL, .off = P(global_default)},
    {.key = "description", .type = SF_STR, .off = P(description), .flags = SF_EMPTY_OK},
};
static const spec_schema class_schema = SCHEMA(class_fields, spec_priority_class, class_init, NULL);

#define B(m) offsetof(cluster_build, m)
static const spec_field cluster_spec_fields[] = {
    {.key = "gpuTypes", .type = SF_LIST, .off = B(c.gpu_types), .off_n = B(c.n_gpu_types),
     .sub = &gpu_type_schema},
    {.key = "nodeGroups", .type = SF_LIST, .off = B(groups), .off_n = B(n_groups),
     .sub = &group_schema},
    {.key = "nodes", .type = SF_LIST, .off = B(nodes), .off_n = B(n_nodes), .sub = &node_schema},
    {.key = "teams", .type = SF_LIST, .off = B(c.teams), .off_n = B(c.n_teams),
     .sub = &team_schema},
    {.key = "priorityClasses", .type = SF_LIST, .off = B(c.priority_classes),
     .off_n = B(c.n_priority_classes), .sub = &class_schema},
};
static const spec_schema cluster_spec_schema = SCHEMA0(cluster_spec_fields);

static const spec_field cluster_meta_fields[] = {
    {.key = "name", .type = SF_STR, .off = B(c.name), .flags = SF_REQUIRED | SF_DNS},
};
static const spec_schema cluster_meta_schema = SCHEMA0(cluster_meta_fields);

static const spec_field cluster_top_fields[] = {
    {.key = "apiVersion", .type = SF_IGNORE},
    {.key = "kind", .type = SF_IGNORE},
    {.key = "metadata", .type = SF_OBJ, .sub = &cluster_meta_schema, .flags = SF_REQUIRED},
    {.key = "spec", .type = SF_OBJ, .sub = &cluster_spec_schema, .flags = SF_REQUIRED},
};
static const spec_schema cluster_top_schema = SCHEMA0(cluster_top_fields);

/* ---- checks across the cluster ---- */

/* The item i of list `key` under spec, and its field `field`, for positions. */
static const spec_ynode *item_field(const spec_ynode *spec, const char *key, size_t i,
                                    const char *field)
{
    const spec_ynode *l = spec_ymap_get(spec, key);
    if (!l || l->kind != SPEC_YSEQ || i >= l->n_items) return NULL;
    const spec_ynode *v = spec_ymap_get(l->items[i], field);
    return v ? v : l->items[i];
}

static diag *report_item(spec_dctx *c, diag_level lvl, const spec_ynode *spec, const char *key,
                         size_t i, const char *field, const char *msg)
{
    char path[160];
    snprintf(path, sizeof path, "%s[%zu].%s", key, i, field);
    size_t old = spec_path_push(c, path);
    diag *x = spec_report(c, lvl, item_field(spec, key, i, field), "%s", msg);
    spec_path_pop(c, old);
    return x;
}

/* The names of the cluster's GPU types (entries whose name failed to
 * decode are left out). Caller frees the array, not the names. */
static const char **gpu_type_names(const spec_cluster *cl, size_t *n)
{
    const char **names = xcalloc(cl->n_gpu_types + 1, sizeof *names);
    *n = 0;
    for (size_t k = 0; k < cl->n_gpu_types; k++)
        if (cl->gpu_types[k].name) names[(*n)++] = cl->gpu_types[k].name;
    return names;
}

/* A GPU type name must be one of gpuTypes. */
static void check_gpu_type(spec_dctx *c, const spec_cluster *cl, const spec_ynode *spec,
                           const char *list, size_t i, const char *field, const char *name)
{
    if (!name || spec_cluster_gpu_type(cl, name)) return;
    diag *x = report_item(c, DIAG_ERROR, spec, list, i, field, "unknown GPU type");
    diag_set_found(x, "\"%s\"", name);
    size_t n;
    const char **names = gpu_type_names(cl, &n);
    sb all;
    sb_init(&all);
    for (size_t k = 0; k < n; k++) sb_printf(&all, "%s%s", k ? ", " : "", names[k]);
    diag_set_expected(x, "a name from gpuTypes (%s)", n ? sb_str(&all) : "none");
    const char *s = str_suggest(name, names, n);
    if (s) diag_set_suggestion(x, "did you mean %s?", s);
    else diag_set_suggestion(x, "add %s to gpuTypes", name);
    sb_free(&all);
    free(names);
}

typedef struct named {
    const char *name;
    size_t index;
} named;

static int named_cmp(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Reports every name that appears twice among n names (sorted, n log n).
 * where(i) gives the list and item to point at. */
typedef void (*dup_report)(spec_dctx *c, const spec_ynode *spec, size_t later, size_t first,
                           const char *name, const void *ctx);

static void check_unique(spec_dctx *c, const spec_ynode *spec, const char *const *names, size_t n,
                         dup_report report, const void *ctx)
{
    named *v = xmalloc((n ? n : 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (names[i]) v[k++] = (named){names[i], i};
    qsort(v, k, sizeof *v, named_cmp);
    size_t first = 0; /* where the current run of equal names starts */
    for (size_t i = 1; i < k; i++) {
        if (strcmp(v[i].name, v[i - 1].name) != 0) {
            first = i;
            continue;
        }
        report(c, spec, v[i].index, v[first].index, v[i].name, ctx);
    }
    free(v);
}

static void dup_simple(spec_dctx *c, const spec_ynode *spec, size_t later, size_t first,
                       const char *name, const void *ctx)
{
    const char *list = ctx;
    char msg[200];
    snprintf(msg, sizeof msg, "the name \"%s\" is used twice (first at %s[%zu])", name, list,
             first);
    diag *x = report_item(c, DIAG_ERROR, spec, list, later, "name", msg);
    diag_set_suggestion(x, "give each entry its own name");
}

static void check_names(spec_dctx *c, const spec_cluster *cl, const spec_ynode *spec)
{
    const char **names = xcalloc(cl->n_gpu_types + cl->n_teams + cl->n_priority_classes + 1,
                                 sizeof *names);
    for (size_t i = 0; i < cl->n_gpu_types; i++) names[i] = cl->gpu_types[i].name;
    check_unique(c, spec, names, cl->n_gpu_types, dup_simple, "gpuTypes");
    for (size_t i = 0; i < cl->n_teams; i++) names[i] = cl->teams[i].name;
    check_unique(c, spec, names, cl->n_teams, dup_simple, "teams");
    for (size_t i = 0; i < cl->n_priority_classes; i++) names[i] = cl->priority_classes[i].name;
    check_unique(c, spec, names, cl->n_priority_classes, dup_simple, "priorityClasses");
    free(names);
    size_t first_default = 0;
    bool seen = false;
    for (size_t i = 0; i < cl->n_priority_classes; i++) {
        if (!cl->priority_classes[i].global_default) continue;
        if (!seen) {
            seen = true;
            first_default = i;
            continue;
        }
        char msg[160];
        snprintf(msg, sizeof msg, "a second global default (the first is %s)",
                 cl->priority_classes[first_default].name ? cl->priority_classes[first_default].name : "?");
        diag *x = report_item(c, DIAG_ERROR, spec, "priorityClasses", i, "globalDefault", msg);
        diag_set_suggestion(x, "mark one priority class globalDefault: true");
    }
}

static void check_quota_types(spec_dctx *c, const spec_cluster *cl, const spec_ynode *spec,
                              size_t t, const char *field, const spec_quota *q, size_t n)
{
    const spec_ynode *m = item_field(spec, "teams", t, field);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(q[i].gpu_type, "*") || spec_cluster_gpu_type(cl, q[i].gpu_type)) continue;
        char path[200];
        snprintf(path, sizeof path, "teams[%zu].%s.%s", t, field, q[i].gpu_type);
        size_t old = spec_path_push(c, path);
        diag *x = spec_report(c, DIAG_ERROR, spec_ymap_key(m, q[i].gpu_type),
                              "unknown GPU type");
        diag_set_found(x, "\"%s\"", q[i].gpu_type);
        diag_set_expected(x, "a name from gpuTypes, or nvidia.com/gpu for any type");
        size_t nn;
        const char **names = gpu_type_names(cl, &nn);
        const char *s = str_suggest(q[i].gpu_type, names, nn);
        if (s) diag_set_suggestion(x, "did you mean %s?", s);
        free(names);
        spec_path_pop(c, old);
    }
}

/* GPUs need a type, and a type needs GPUs. */
static void check_gpus(spec_dctx *c, const spec_ynode *spec, const char *list, size_t i,
                       const char *count_key, int gpus, const char *type)
{
    if (spec_dctx_bad(c, item_field(spec, list, i, count_key)) ||
        spec_dctx_bad(c, item_field(spec, list, i, "gpuType")))
        return; /* reported already */
    if (gpus > 0 && !type) {
        diag *x = report_item(c, DIAG_ERROR, spec, list, i, count_key, "GPUs without a gpuType");
        diag_set_suggestion(x, "add `gpuType:` with a name from gpuTypes");
    } else if (gpus == 0 && type) {
        diag *x = report_item(c, DIAG_ERROR, spec, list, i, "gpuType",
                              "a GPU type on a node without GPUs");
        diag_set_suggestion(x, "set %s to the number of GPUs", count_key);
    }
}

static void check_references(spec_dctx *c, const cluster_build *b, const spec_ynode *spec)
{
    const spec_cluster *cl = &b->c;
    for (size_t i = 0; i < b->n_groups; i++) {
        check_gpu_type(c, cl, spec, "nodeGroups", i, "gpuType", b->groups[i].gpu_type);
        check_gpus(c, spec, "nodeGroups", i, "gpusPerNode", b->groups[i].gpus_per_node,
                   b->groups[i].gpu_type);
    }
    for (size_t i = 0; i < b->n_nodes; i++) {
        check_gpu_type(c, cl, spec, "nodes", i, "gpuType", b->nodes[i].gpu_type);
        check_gpus(c, spec, "nodes", i, "gpus", b->nodes[i].gpus, b->nodes[i].gpu_type);
    }
    for (size_t t = 0; t < cl->n_teams; t++) {
        const spec_team *tm = &cl->teams[t];
        check_quota_types(c, cl, spec, t, "quota", tm->quota, tm->n_quota);
        check_quota_types(c, cl, spec, t, "borrowingLimit", tm->borrowing_limit,
                          tm->n_borrowing_limit);
        check_quota_types(c, cl, spec, t, "lendingLimit", tm->lending_limit, tm->n_lending_limit);
    }
}

/* ---- expansion ---- */
static int digits(int n)
{
    int d = 1;
    while (n >= 10) n /= 10, d++;
    return d;
}

static void group_node(const node_group *g, int k, spec_node *n)
{
    int width = digits(g->count) < 2 ? 2 : digits(g->count);
    memset(n, 0, sizeof *n);
    n->name = xasprintf("%s-%0*d", g->name_prefix, width, k + 1);
    if (g->nodes_per_rack > 0)
        n->rack = xasprintf("%s-rack-%d", g->name_prefix, k / g->nodes_per_rack + 1);
    n->gpu_type = g->gpu_type ? xstrdup(g->gpu_type) : NULL;
    n->gpus = g->gpus_per_node;
    n->nvlink_group = xmalloc((g->gpus_per_node > 0 ? (size_t)g->gpus_per_node : 1) * sizeof(int));
    if (g->gpus_per_node > 0)
        memcpy(n->nvlink_group, g->nvlink_group, (size_t)g->gpus_per_node * sizeof(int));
    n->n_nvlink_groups = g->n_nvlink_groups;
    n->labels = spec_kv_clone(g->labels, g->n_labels);
    n->n_labels = g->n_labels;
    n->state = g->state;
    n->cpus = g->cpus;
    n->memory = g->memory;
}

typedef struct node_origin {
    size_t group; /* index in nodeGroups, or SIZE_MAX for a written node */
    size_t item;  /* index in nodes */
} node_origin;

static void dup_node(spec_dctx *c, const spec_ynode *spec, size_t later, size_t first,
                     const char *name, const void *ctx)
{
    const node_origin *o = ctx;
    char msg[200];
    snprintf(msg, sizeof msg, "two nodes are named \"%s\"", name);
    bool grp = o[later].group != SIZE_MAX;
    diag *x = report_item(c, DIAG_ERROR, spec, grp ? "nodeGroups" : "nodes",
                          grp ? o[later].group : o[later].item, grp ? "namePrefix" : "name", msg);
    (void)first;
    diag_set_suggestion(x, "give every node, and every node group's prefix, its own name");
}

/* nodeGroups expanded, then nodes, into the cluster; then unique names. */
static bool expand_nodes(spec_dctx *c, cluster_build *b, const spec_ynode *spec)
{
    uint64_t total = b->n_nodes, gpus = 0;
    for (size_t i = 0; i < b->n_nodes; i++) gpus += (uint64_t)b->nodes[i].gpus;
    for (size_t i = 0; i < b->n_groups; i++) {
        total += (uint64_t)b->groups[i].count;
        gpus += (uint64_t)b->groups[i].count * (uint64_t)b->groups[i].gpus_per_node;
    }
    if (total > SPEC_MAX_CLUSTER_NODES || gpus > SPEC_MAX_CLUSTER_GPUS) {
        bool many_nodes = total > SPEC_MAX_CLUSTER_NODES;
        diag *x = spec_report(c, DIAG_ERROR, spec, many_nodes ? "the cluster holds too many nodes"
                                                              : "the cluster holds too many GPUs");
        diag_set_expected(x, "at most %d", many_nodes ? SPEC_MAX_CLUSTER_NODES
                                                     : SPEC_MAX_CLUSTER_GPUS);
        diag_set_found(x, "%llu", (unsigned long long)(many_nodes ? total : gpus));
        return false;
    }
    spec_cluster *cl = &b->c;
    cl->nodes = xcalloc(total ? total : 1, sizeof *cl->nodes);
    node_origin *origin = xcalloc(total ? total : 1, sizeof *origin);
    for (size_t i = 0; i < b->n_groups; i++)
        for (int k = 0; k < b->groups[i].count; k++) {
            origin[cl->n_nodes] = (node_origin){i, 0};
            group_node(&b->groups[i], k, &cl->nodes[cl->n_nodes++]);
        }
    for (size_t i = 0; i < b->n_nodes; i++) {
        origin[cl->n_nodes] = (node_origin){SIZE_MAX, i};
        cl->nodes[cl->n_nodes++] = b->nodes[i]; /* moved */
    }
    free(b->nodes);
    b->nodes = NULL;
    b->n_nodes = 0;
    const char **names = xcalloc(cl->n_nodes + 1, sizeof *names);
    for (size_t i = 0; i < cl->n_nodes; i++) names[i] = cl->nodes[i].name;
    check_unique(c, spec, names, cl->n_nodes, dup_node, origin);
    free(names);
    free(origin);
    return true;
}

spec_cluster *spec_decode_cluster(spec_dctx *c, const spec_ynode *root, const spec_ydoc *doc)
{
    size_t before = c->d->errors;
    cluster_build b;
    memset(&b, 0, sizeof b);
    spec_decode_map(c, root, root, &cluster_top_schema, &b);
    const spec_ynode *spec = spec_ymap_get(root, "spec");
    if (spec && spec->kind == SPEC_YMAP) {
        size_t old = spec_path_push(c, "spec");
        check_names(c, &b.c, spec);
        check_references(c, &b, spec);
        if (c->d->errors == before) expand_nodes(c, &b, spec);
        spec_path_pop(c, old);
    }
    (void)doc;
    spec_cluster *out = xmalloc(sizeof *out);
    *out = b.c;
    out->file = xstrdup(c->file);
    build_free(&b);
    if (c->d->errors != before) {
        spec_cluster_free(out);
        return NULL;
    }
    return out;
}

/* ---- lookups ---- */
const spec_gpu_type *spec_cluster_gpu_type(const spec_cluster *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->n_gpu_types; i++)
        if (c->gpu_types[i].name && !strcmp(c->gpu_types[i].name, name)) return &c->gpu_types[i];
    return NULL;
}

const spec_team *spec_cluster_team(const spec_cluster *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->n_teams; i++)
        if (c->teams[i].name && !strcmp(c->teams[i].name, name)) return &c->teams[i];
    return NULL;
}

const spec_priority_class *spec_cluster_priority_class(const spec_cluster *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->n_priority_classes; i++)
        if (c->priority_classes[i].name && !strcmp(c->priority_classes[i].name, name))
            return &c->priority_classes[i];
    return NULL;
}

const spec_priority_class *spec_cluster_default_priority(const spec_cluster *c)
{
    for (size_t i = 0; c && i < c->n_priority_classes; i++)
        if (c->priority_classes[i].global_default) return &c->priority_classes[i];
    return NULL;
}
