/* k8s_render_cluster.c: a cluster's setup as Kubernetes objects
 * (k8s_render_cluster, k8s.h): what an administrator applies once so that
 * lathe's Jobs have somewhere to run. A pure function of the Cluster spec
 * and the `kubernetes:` settings. The result is a JSON array, in an order
 * `kubectl apply -f` can take from the top (cluster-scoped objects, then
 * each namespace before what lives in it):
 *
 *   PriorityClass  one per priority class: {apiVersion: scheduling.k8s.io/v1,
 *                  metadata: {name, labels}, value, globalDefault,
 *                  preemptionPolicy, description?}
 *   per team:
 *     Namespace      <namespace of the team> labelled lathe.dev/team, managed-by
 *     ResourceQuota  lathe-gpu-quota: {hard: {requests.<gpu resource>: "<GPUs>"}}
 *                    the most GPUs lathe's rules let the team hold (quota
 *                    plus borrowing limit per type; a type's GPUs where it
 *                    borrows without limit; the cluster's for no quota):
 *                    lathe's scheduler enforces the exact rules, the
 *                    ResourceQuota is the hard outer bound; none when that
 *                    bound needs nodes the Cluster file does not list
 *     LimitRange     lathe-defaults: containers that ask nothing get cpu 1,
 *                    memory 4Gi as requests
 *     PVCs           the checkpoint PVC (ReadWriteMany, checkpointSize) and
 *                    the read-only model pool and datasets (ReadOnlyMany,
 *                    modelSize / dataSize) when the settings name them;
 *                    PVCs are namespaced, so each team's namespace has its own
 */
#include "k8s.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUOTA_NAME "lathe-gpu-quota"
#define LIMITS_NAME "lathe-defaults"

/* A string that is set and not empty. */
static bool given(const char *s) { return s && *s; }

/* {name, namespace?, labels: {managed-by: lathe, lathe.dev/team?}} */
static json_t *meta(const char *name, const char *ns, const char *team)
{
    json_t *labels = json_pack("{s:s}", K8S_LABEL_MANAGED, "lathe");
    if (team) json_object_set_new(labels, K8S_LABEL_TEAM, json_string(team));
    json_t *m = json_object();
    json_object_set_new(m, "name", json_string(name));
    if (ns) json_object_set_new(m, "namespace", json_string(ns));
    json_object_set_new(m, "labels", labels);
    return m;
}

/* {apiVersion, kind, metadata} (metadata is stolen). */
static json_t *object(const char *api, const char *kind, json_t *metadata)
{
    json_t *o = json_object();
    json_object_set_new(o, "apiVersion", json_string(api));
    json_object_set_new(o, "kind", json_string(kind));
    json_object_set_new(o, "metadata", metadata);
    return o;
}

/* {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata, value,
 *  globalDefault, preemptionPolicy, description?} */
static json_t *priority_class(const spec_priority_class *pc)
{
    json_t *o = object("scheduling.k8s.io/v1", "PriorityClass", meta(pc->name, NULL, NULL));
    json_object_set_new(o, "value", json_integer(pc->value));
    json_object_set_new(o, "globalDefault", json_boolean(pc->global_default));
    json_object_set_new(o, "preemptionPolicy",
                        json_string(pc->preempt_lower ? "PreemptLowerPriority" : "Never"));
    if (pc->description) json_object_set_new(o, "description", json_string(pc->description));
    return o;
}

/* GPUs of the cluster's nodes of one type ("*" or NULL: every type). */
static long long cluster_gpus(const spec_cluster *c, const char *type)
{
    long long n = 0;
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].gpus > 0 &&
            (!type || strcmp(type, "*") == 0 || (c->nodes[i].gpu_type && strcmp(c->nodes[i].gpu_type, type) == 0)))
            n += c->nodes[i].gpus;
    return n;
}

/* The most GPUs the team may hold under lathe's rules: per quota entry its
 * quota plus its borrowing limit, or every GPU of that type where it may
 * borrow without limit; every GPU of the cluster for a team without a
 * quota. The ResourceQuota is this outer bound, so it never refuses a pod
 * lathe admitted by its borrowing rules. -1 when the bound needs the
 * cluster's GPUs and the Cluster file lists no nodes (they come from the
 * Kubernetes API): then the team gets no ResourceQuota. */
static long long team_gpus(const spec_cluster *c, const spec_team *t)
{
    long long all = cluster_gpus(c, NULL);
    if (t->n_quota == 0) return all > 0 ? all : -1;
    long long n = 0;
    for (size_t i = 0; i < t->n_quota; i++) {
        const spec_quota *q = &t->quota[i];
        const spec_quota *b = NULL;
        for (size_t k = 0; k < t->n_borrowing_limit && !b; k++)
            if (strcmp(t->borrowing_limit[k].gpu_type, q->gpu_type) == 0) b = &t->borrowing_limit[k];
        long long of_type = cluster_gpus(c, q->gpu_type);
        long long cap;
        if (b) {
            cap = (long long)(q->count > 0 ? q->count : 0) + (b->count > 0 ? b->count : 0);
            if (of_type > 0 && cap > of_type) cap = of_type;
        } else {
            if (of_type <= 0) return -1;
            cap = of_type;
        }
        n += cap;
    }
    return all > 0 && n > all ? all : n;
}

/* {apiVersion: v1, kind: ResourceQuota, metadata: {name: lathe-gpu-quota, ...},
 *  spec: {hard: {requests.<gpu resource>: "<GPUs>"}}} */
static json_t *resource_quota(const spec_cluster *c, const spec_team *t, const char *ns,
                              const spec_k8s *k)
{
    char key[256], count[32];
    snprintf(key, sizeof key, "requests.%s", given(k->gpu_resource) ? k->gpu_resource : "nvidia.com/gpu");
    snprintf(count, sizeof count, "%lld", team_gpus(c, t));
    json_t *o = object("v1", "ResourceQuota", meta(QUOTA_NAME, ns, t->name));
    json_object_set_new(o, "spec", json_pack("{s:{s:s}}", "hard", key, count));
    return o;
}

/* {apiVersion: v1, kind: LimitRange, metadata: {name: lathe-defaults, ...},
 *  spec: {limits: [{type: Container, defaultRequest: {cpu: "1", memory: 4Gi}}]}} */
static json_t *limit_range(const spec_team *t, const char *ns)
{
    json_t *o = object("v1", "LimitRange", meta(LIMITS_NAME, ns, t->name));
    json_object_set_new(o, "spec", json_pack("{s:[{s:s, s:{s:s, s:s}}]}", "limits", "type",
                                             "Container", "defaultRequest", "cpu", "1", "memory",
                                             "4Gi"));
    return o;
}

/* {apiVersion: v1, kind: PersistentVolumeClaim, metadata, spec: {accessModes:
 *  [mode], resources: {requests: {storage}}, storageClassName?}}; size 0 = 1Gi. */
static json_t *pvc(const char *name, const char *ns, const char *team, const char *mode,
                   double size, const spec_k8s *k)
{
    char q[48];
    k8s_quantity_bytes(size > 0 ? size : 1073741824.0, q, sizeof q);
    json_t *spec = json_pack("{s:[s], s:{s:{s:s}}}", "accessModes", mode, "resources", "requests",
                             "storage", q);
    if (given(k->storage_class))
        json_object_set_new(spec, "storageClassName", json_string(k->storage_class));
    json_t *o = object("v1", "PersistentVolumeClaim", meta(name, ns, team));
    json_object_set_new(o, "spec", spec);
    return o;
}

/* Everything of one team, appended to out: Namespace, ResourceQuota,
 * LimitRange, then its PVCs. */
static void team_objects(const spec_cluster *c, const spec_team *t, const spec_k8s *k,
                         json_t *out)
{
    char *ns = spec_k8s_namespace(k, t->name);
    json_array_append_new(out, object("v1", "Namespace", meta(ns, NULL, t->name)));
    if (team_gpus(c, t) >= 0) json_array_append_new(out, resource_quota(c, t, ns, k));
    json_array_append_new(out, limit_range(t, ns));
    if (given(k->checkpoint_pvc))
        json_array_append_new(out, pvc(k->checkpoint_pvc, ns, t->name, "ReadWriteMany",
                                       k->checkpoint_size, k));
    if (given(k->model_pvc))
        json_array_append_new(out, pvc(k->model_pvc, ns, t->name, "ReadOnlyMany", k->model_size, k));
    if (given(k->data_pvc))
        json_array_append_new(out, pvc(k->data_pvc, ns, t->name, "ReadOnlyMany", k->data_size, k));
    free(ns);
}

json_t *k8s_render_cluster(const spec_cluster *c, const spec_k8s *k)
{
    json_t *out = json_array();
    spec_k8s dflt;
    bool own = !k;
    if (own) {
        spec_k8s_defaults(&dflt);
        k = &dflt;
    }
    for (size_t i = 0; i < c->n_priority_classes; i++)
        json_array_append_new(out, priority_class(&c->priority_classes[i]));
    for (size_t i = 0; i < c->n_teams; i++) team_objects(c, &c->teams[i], k, out);
    if (own) spec_k8s_free(&dflt);
    return out;
}
