/* op_cluster.c: operator mode's teams and priority classes, read from the
 * API once at start (op.h):
 *
 *   teams              each served namespace is a team; one the Cluster
 *                      file does not name gets its quota from the
 *                      namespace's ResourceQuota objects (the smallest
 *                      hard limit on requests.<gpu resource> or <gpu
 *                      resource>; quotas lathe rendered itself, labelled
 *                      managed-by lathe, hold quota plus borrowing and are
 *                      skipped), with no borrowing: the API server would
 *                      refuse pods beyond a ResourceQuota anyway
 *   priority classes   every PriorityClass object the Cluster file does
 *                      not name (except Kubernetes' own system-*): its
 *                      value, preemptionPolicy (Never = it preempts no one)
 *                      and globalDefault
 *
 * The scheduler's cluster is fixed while the server runs: a change to
 * either (op.c watches them and compares op_cluster_print with what the
 * server started with) makes the server hand over and start again
 * (op.c), which costs a rebuild from the API and loses nothing.
 */
#include "op.h"

#include "k8s/k8s.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The namespace's GPU quota from its ResourceQuotas; -1 = none. */
static int namespace_quota(k8s_client *cl, const spec_k8s *k, const char *ns, char *err,
                           size_t errsz)
{
    k8s_ref ref = {.api = "v1", .resource = "resourcequotas", .ns = ns};
    json_t *items = NULL;
    k8s_error e;
    if (k8s_list(cl, &ref, NULL, NULL, 0, &items, NULL, &e) != K8S_OK) {
        snprintf(err, errsz, "listing the ResourceQuotas of namespace %s: %s", ns, e.message);
        return -2;
    }
    char req[160];
    snprintf(req, sizeof req, "requests.%s", k->gpu_resource);
    int quota = -1;
    size_t i;
    json_t *rq;
    json_array_foreach(items, i, rq) {
        const json_t *labels = json_object_get(json_object_get(rq, "metadata"), "labels");
        const char *by = op_jstr(labels, K8S_LABEL_MANAGED);
        if (by && strcmp(by, "lathe") == 0) continue;
        const json_t *hard = json_object_get(json_object_get(rq, "spec"), "hard");
        const char *keys[] = {req, k->gpu_resource};
        for (size_t j = 0; j < 2; j++) {
            int n = op_quantity(json_object_get(hard, keys[j]), 1 << 20);
            if (n >= 0 && (quota < 0 || n < quota)) quota = n;
        }
    }
    json_decref(items);
    return quota;
}

/* A quota entry for each GPU type (each capped at the whole count) and
 * one for any type: the ResourceQuota caps the namespace's GPUs of every
 * type together. No borrowing. */
static void add_team(spec_cluster *c, const char *name, int quota)
{
    c->teams = xrealloc(c->teams, (c->n_teams + 1) * sizeof *c->teams);
    spec_team *t = &c->teams[c->n_teams++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->weight = 1;
    if (quota < 0) return;
    size_t n = c->n_gpu_types + 1;
    t->quota = xcalloc(n, sizeof *t->quota);
    t->borrowing_limit = xcalloc(n, sizeof *t->borrowing_limit);
    for (size_t i = 0; i < n; i++) {
        const char *type = i < c->n_gpu_types ? c->gpu_types[i].name : "*";
        t->quota[i] = (spec_quota){.gpu_type = xstrdup(type), .count = quota};
        t->borrowing_limit[i] = (spec_quota){.gpu_type = xstrdup(type), .count = 0};
    }
    t->n_quota = t->n_borrowing_limit = n;
}

/* The PriorityClass objects, into c (when not NULL) and the fingerprint. */
static bool add_priority_classes(k8s_client *cl, spec_cluster *c, sb *print, char *err,
                                 size_t errsz)
{
    k8s_ref ref = {.api = "scheduling.k8s.io/v1", .resource = "priorityclasses"};
    json_t *items = NULL;
    k8s_error e;
    if (k8s_list(cl, &ref, NULL, NULL, 0, &items, NULL, &e) != K8S_OK) {
        snprintf(err, errsz, "listing the PriorityClasses: %s", e.message);
        return false;
    }
    bool has_default = c && spec_cluster_default_priority(c) != NULL;
    size_t i;
    json_t *pc;
    json_array_foreach(items, i, pc) {
        const char *name = op_jstr(json_object_get(pc, "metadata"), "name");
        if (!name || str_starts_with(name, "system-")) continue;
        const char *policy = op_jstr(pc, "preemptionPolicy");
        sb_printf(print, "pc %s %lld %s %d\n", name,
                  (long long)json_integer_value(json_object_get(pc, "value")),
                  policy ? policy : "", json_is_true(json_object_get(pc, "globalDefault")));
        if (!c || spec_cluster_priority_class(c, name)) continue;
        c->priority_classes = xrealloc(c->priority_classes,
                                       (c->n_priority_classes + 1) * sizeof *c->priority_classes);
        spec_priority_class *p = &c->priority_classes[c->n_priority_classes++];
        memset(p, 0, sizeof *p);
        p->name = xstrdup(name);
        p->value = json_integer_value(json_object_get(pc, "value"));
        p->preempt_lower = !policy || strcmp(policy, "Never") != 0;
        p->global_default = !has_default && json_is_true(json_object_get(pc, "globalDefault"));
        has_default = has_default || p->global_default;
        if (op_jstr(pc, "description")) p->description = xstrdup(op_jstr(pc, "description"));
    }
    json_decref(items);
    return true;
}

/* What the API says of teams and classes: added to c when it is not NULL
 * (what the Cluster file names is kept), and always written to print, one
 * line per namespace's quota and per class, in the API's order. */
static bool read_api(const spec_server *cfg, exec_backend *be, spec_cluster *c, sb *print,
                     char *err, size_t errsz)
{
    k8s_client *cl = exec_k8s_client(be);
    const spec_k8s *k = &cfg->k8s;
    for (size_t i = 0; i < k->op.n_namespaces; i++) {
        const char *ns = k->op.namespaces[i];
        int quota = namespace_quota(cl, k, ns, err, errsz);
        if (quota == -2) return false;
        sb_printf(print, "ns %s %d\n", ns, quota);
        if (c && !spec_cluster_team(c, ns)) add_team(c, ns, quota); /* else the file says otherwise */
    }
    return add_priority_classes(cl, c, print, err, errsz);
}

bool op_cluster_add(const spec_server *cfg, exec_backend *be, spec_cluster *c, char **print,
                    char *err, size_t errsz)
{
    sb p;
    sb_init(&p);
    bool ok = read_api(cfg, be, c, &p, err, errsz);
    *print = sb_take(&p);
    return ok;
}

char *op_cluster_print(const spec_server *cfg, exec_backend *be, char *err, size_t errsz)
{
    sb p;
    sb_init(&p);
    if (!read_api(cfg, be, NULL, &p, err, errsz)) {
        sb_free(&p);
        return NULL;
    }
    return sb_take(&p);
}
