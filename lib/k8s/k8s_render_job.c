/* k8s_render_job.c: the objects of one attempt (k8s.h, "rendering"): the
 * batch/v1 Job, the headless Service of a multi-node attempt, the merge
 * patch that admits a suspended Job, and the quantity formatter. Pure
 * functions of k8s_job_params; docs/kubernetes.md, "The objects of an
 * attempt", shows the result.
 *
 * The Job's shape (keys in this order):
 *   {apiVersion: batch/v1, kind: Job,
 *    metadata: {name, namespace, labels, ownerReferences?},
 *    spec: {suspend, backoffLimit: 0, podReplacementPolicy: Failed,
 *           podFailurePolicy: {rules: [onExitCodes?, onPodConditions]},
 *           activeDeadlineSeconds?, ttlSecondsAfterFinished?,
 *           completions, parallelism, completionMode: Indexed?,
 *           template: {metadata: {labels, annotations?},
 *                      spec: {restartPolicy: Never, terminationGracePeriodSeconds,
 *                             subdomain?, priorityClassName?, serviceAccountName?,
 *                             automountServiceAccountToken,
 *                             securityContext, containers: [trainer],
 *                             volumes?, nodeSelector?, affinity?, tolerations?}}}}
 */
#include "k8s.h"

#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The label the Job controller puts on its pods (Kubernetes >= 1.27). */
#define JOB_NAME_LABEL "batch.kubernetes.io/job-name"
/* The annotation of an Indexed Job's pod with its completion index. */
#define COMPLETION_INDEX_FIELD "metadata.annotations['batch.kubernetes.io/job-completion-index']"
#define HOSTNAME_LABEL "kubernetes.io/hostname"

/* ---- quantities ---- */

void k8s_quantity_cpu(double cores, char *out, size_t outsz)
{
    if (!(cores > 0)) {
        snprintf(out, outsz, "0");
        return;
    }
    /* a millicore is the finest a CPU quantity keeps; 1e-9 absorbs 0.1 + 0.2 */
    double m = ceil(cores * 1000.0 - 1e-6);
    if (m < 1) m = 1;
    if (fmod(m, 1000.0) == 0)
        snprintf(out, outsz, "%.0f", m / 1000.0);
    else
        snprintf(out, outsz, "%.0fm", m);
}

void k8s_quantity_bytes(double bytes, char *out, size_t outsz)
{
    static const char *const suffix[] = {"Ti", "Gi", "Mi", "Ki"};
    static const double mult[] = {1099511627776.0, 1073741824.0, 1048576.0, 1024.0};
    if (!(bytes > 0)) {
        snprintf(out, outsz, "0");
        return;
    }
    double b = ceil(bytes);
    for (size_t i = 0; i < 4; i++)
        if (b >= mult[i] && fmod(b, mult[i]) == 0) {
            snprintf(out, outsz, "%.0f%s", b / mult[i], suffix[i]);
            return;
        }
    snprintf(out, outsz, "%.0f", b);
}

/* A CPU or byte quantity as a JSON string ("500m", "32Gi"). */
static json_t *cpu_q(double cores)
{
    char buf[48];
    k8s_quantity_cpu(cores, buf, sizeof buf);
    return json_string(buf);
}

static json_t *bytes_q(double bytes)
{
    char buf[48];
    k8s_quantity_bytes(bytes, buf, sizeof buf);
    return json_string(buf);
}

/* ---- small helpers ---- */

/* A string that is set and not empty. */
static bool given(const char *s) { return s && *s; }

/* A label value: at most 63 of [A-Za-z0-9._-], starting and ending with an
 * alphanumeric (anything else becomes '-'; "" when nothing is left). */
static json_t *label_value(const char *s)
{
    char buf[64];
    size_t n = 0;
    for (const char *c = s ? s : ""; *c && n < 63; c++) {
        unsigned char ch = (unsigned char)*c;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        buf[n++] = ok ? (char)ch : '-';
    }
    buf[n] = '\0';
    size_t start = 0;
    while (start < n && strchr("._-", buf[start])) start++;
    while (n > start && strchr("._-", buf[n - 1])) buf[--n] = '\0';
    return json_string(buf + start);
}

/* The labels of every object of the attempt:
 *   {app.kubernetes.io/managed-by: lathe, lathe.dev/job-id: "<id>" (when
 *    > 0), lathe.dev/job, lathe.dev/team, lathe.dev/experiment (when
 *    given), lathe.dev/attempt: "<n>", lathe.dev/owner-uid (when given)} */
static json_t *attempt_labels(const k8s_job_params *p)
{
    json_t *l = json_object();
    char buf[32];
    json_object_set_new(l, K8S_LABEL_MANAGED, json_string("lathe"));
    if (p->job_id > 0) {
        snprintf(buf, sizeof buf, "%lld", (long long)p->job_id);
        json_object_set_new(l, K8S_LABEL_JOB_ID, json_string(buf));
    }
    json_object_set_new(l, K8S_LABEL_JOB, label_value(p->job));
    json_object_set_new(l, K8S_LABEL_TEAM, label_value(p->team));
    if (given(p->experiment)) json_object_set_new(l, K8S_LABEL_EXPERIMENT, label_value(p->experiment));
    snprintf(buf, sizeof buf, "%d", p->attempt);
    json_object_set_new(l, K8S_LABEL_ATTEMPT, json_string(buf));
    if (given(p->owner.uid)) json_object_set_new(l, K8S_LABEL_OWNER_UID, label_value(p->owner.uid));
    return l;
}

/* [{apiVersion, kind, name, uid, controller: true, blockOwnerDeletion:
 * true}]: the custom resource controls the Job (the garbage collector
 * deletes the Job with it, and a foreground deletion of the resource waits
 * for the Job), or NULL when the owner is not fully given. */
static json_t *owner_references(const k8s_job_params *p)
{
    if (!given(p->owner.api_version) || !given(p->owner.kind) || !given(p->owner.name) ||
        !given(p->owner.uid))
        return NULL;
    return json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", p->owner.api_version, "kind",
                     p->owner.kind, "name", p->owner.name, "uid", p->owner.uid, "controller", 1,
                     "blockOwnerDeletion", 1);
}

/* {name, namespace, labels} */
static json_t *attempt_metadata(const k8s_job_params *p)
{
    json_t *m = json_object();
    json_object_set_new(m, "name", json_string(p->name ? p->name : ""));
    json_object_set_new(m, "namespace", json_string(p->namespace_ ? p->namespace_ : "default"));
    json_object_set_new(m, "labels", attempt_labels(p));
    return m;
}

/* Pods of the attempt: at least 1. */
static int nnodes_of(const k8s_job_params *p) { return p->nnodes > 1 ? p->nnodes : 1; }

/* {key, operator: In, values: [v...]} with repeated values once. */
static json_t *match_in(const char *key, const char *const *vals, size_t n)
{
    json_t *values = json_array();
    for (size_t i = 0; i < n; i++) {
        if (!given(vals[i])) continue;
        bool dup = false;
        for (size_t k = 0; k < i && !dup; k++) dup = vals[k] && strcmp(vals[k], vals[i]) == 0;
        if (!dup) json_array_append_new(values, json_string(vals[i]));
    }
    return json_pack("{s:s, s:s, s:o}", "key", key, "operator", "In", "values", values);
}

/* ---- placement ---- */

/* {<gpu product label>: <product>}, or NULL when the job names no product. */
static json_t *node_selector(const k8s_job_params *p)
{
    if (!given(p->gpu_product)) return NULL;
    const char *label = p->settings && given(p->settings->gpu_product_label)
                            ? p->settings->gpu_product_label
                            : "nvidia.com/gpu.product";
    return json_pack("{s:s}", label, p->gpu_product);
}

/* {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:
 *   {nodeSelectorTerms: [{matchExpressions: [hostname In nodes, rack In [rack]]}]}}},
 * or NULL when the job may run anywhere. */
static json_t *affinity(const k8s_job_params *p)
{
    json_t *exprs = json_array();
    if (p->n_nodes > 0) {
        json_t *e = match_in(HOSTNAME_LABEL, p->nodes, p->n_nodes);
        if (json_array_size(json_object_get(e, "values")))
            json_array_append_new(exprs, e);
        else
            json_decref(e);
    }
    if (given(p->rack)) {
        const char *label = p->settings && given(p->settings->rack_label) ? p->settings->rack_label
                                                                          : "rack-id";
        json_array_append_new(exprs, match_in(label, &p->rack, 1));
    }
    if (!json_array_size(exprs)) {
        json_decref(exprs);
        return NULL;
    }
    return json_pack("{s:{s:{s:[{s:o}]}}}", "nodeAffinity",
                     "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
                     "matchExpressions", exprs);
}

/* The extended resource of a GPU ("nvidia.com/gpu" unless the settings say). */
static const char *gpu_resource(const k8s_job_params *p)
{
    return p->settings && given(p->settings->gpu_resource) ? p->settings->gpu_resource
                                                            : "nvidia.com/gpu";
}

/* ---- the container ---- */

/* Sets name in env (an array of {name, value} / {name, valueFrom}): an
 * entry of that name is replaced where it stands, else one is appended. */
static void env_set(json_t *env, const char *name, json_t *entry)
{
    size_t i;
    json_t *e;
    json_array_foreach(env, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0) {
            json_array_set_new(env, i, entry);
            return;
        }
    }
    json_array_append_new(env, entry);
}

/* Sets {name, value} (env_set's rule). */
static void env_value(json_t *env, const char *name, const char *v)
{
    env_set(env, name, json_pack("{s:s, s:s}", "name", name, "value", v));
}

/* Sets {name, value: "<v>"}. */
static void env_int(json_t *env, const char *name, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    env_value(env, name, buf);
}

/* p->env ("NAME=value"), then the distributed-training variables and the
 * model caches; a name given twice keeps its first place and its last value. */
static json_t *container_env(const k8s_job_params *p)
{
    json_t *env = json_array();
    const spec_k8s *k = p->settings;
    for (size_t i = 0; i < p->n_env; i++) {
        const char *s = p->env[i];
        if (!s) continue;
        const char *eq = strchr(s, '=');
        size_t nl = eq ? (size_t)(eq - s) : strlen(s);
        if (nl == 0) continue;
        char *name = xstrndup(s, nl);
        env_value(env, name, eq ? eq + 1 : "");
        free(name);
    }
    int nn = nnodes_of(p);
    env_int(env, "NNODES", nn);
    if (nn > 1)
        env_set(env, "NODE_RANK",
                json_pack("{s:s, s:{s:{s:s}}}", "name", "NODE_RANK", "valueFrom", "fieldRef",
                          "fieldPath", COMPLETION_INDEX_FIELD));
    else
        env_value(env, "NODE_RANK", "0");
    env_int(env, "NPROC_PER_NODE", p->gpus_per_node > 1 ? p->gpus_per_node : 1);
    if (nn > 1) {
        /* an Indexed Job's pod i has hostname <job>-<i> in the Service's subdomain */
        char *addr = xasprintf("%s-0.%s", p->name ? p->name : "", p->name ? p->name : "");
        env_value(env, "MASTER_ADDR", addr);
        free(addr);
    } else {
        env_value(env, "MASTER_ADDR", "127.0.0.1");
    }
    env_int(env, "MASTER_PORT", k && k->master_port > 0 ? k->master_port : 29500);
    if (k && given(k->model_pvc) && given(k->model_mount)) {
        env_value(env, "HF_HOME", k->model_mount);
        env_value(env, "MODELSCOPE_CACHE", k->model_mount);
    }
    return env;
}

/* {requests: {gpu, cpu, memory}, limits: {gpu, memory}}, each when given. */
static json_t *container_resources(const k8s_job_params *p)
{
    json_t *req = json_object(), *lim = json_object();
    if (p->gpus_per_node > 0) {
        json_object_set_new(req, gpu_resource(p), json_integer(p->gpus_per_node));
        json_object_set_new(lim, gpu_resource(p), json_integer(p->gpus_per_node));
    }
    if (p->cpu > 0) json_object_set_new(req, "cpu", cpu_q(p->cpu));
    if (p->memory > 0) {
        json_object_set_new(req, "memory", bytes_q(p->memory));
        json_object_set_new(lim, "memory", bytes_q(p->memory));
    }
    json_t *r = json_object();
    if (json_object_size(req)) json_object_set(r, "requests", req);
    if (json_object_size(lim)) json_object_set(r, "limits", lim);
    json_decref(req);
    json_decref(lim);
    return r;
}

/* Whether each optional volume is there. */
typedef struct volumes_on {
    bool checkpoints, models, data, spec, shm;
} volumes_on;

/* Which volumes the pod gets: checkpoints when the job has a PVC, models /
 * data when the settings name PVCs, spec when there is one, dshm when
 * shmSize is above 0. */
static volumes_on which_volumes(const k8s_job_params *p)
{
    const spec_k8s *k = p->settings;
    volumes_on v = {
        .checkpoints = given(p->checkpoint_pvc),
        .models = k && given(k->model_pvc),
        .data = k && given(k->data_pvc),
        .spec = p->spec_yaml != NULL,
        .shm = k && k->shm_size > 0,
    };
    return v;
}

/* A mount path, or its default when the settings give none. */
static const char *mount_of(const char *m, const char *dflt) { return given(m) ? m : dflt; }

/* [{name, mountPath, readOnly?}] of the volumes that are there. */
static json_t *volume_mounts(const k8s_job_params *p, volumes_on v)
{
    const spec_k8s *k = p->settings;
    json_t *m = json_array();
    if (v.checkpoints)
        json_array_append_new(m, json_pack("{s:s, s:s}", "name", "checkpoints", "mountPath",
                                           mount_of(k ? k->checkpoint_mount : NULL, "/checkpoints")));
    if (v.models)
        json_array_append_new(m, json_pack("{s:s, s:s, s:b}", "name", "models", "mountPath",
                                           mount_of(k->model_mount, "/models"), "readOnly", 1));
    if (v.data)
        json_array_append_new(m, json_pack("{s:s, s:s, s:b}", "name", "data", "mountPath",
                                           mount_of(k->data_mount, "/data"), "readOnly", 1));
    if (v.spec)
        json_array_append_new(m, json_pack("{s:s, s:s, s:b}", "name", "spec", "mountPath",
                                           mount_of(k ? k->spec_mount : NULL, "/etc/lathe"),
                                           "readOnly", 1));
    if (v.shm)
        json_array_append_new(m, json_pack("{s:s, s:s}", "name", "dshm", "mountPath", "/dev/shm"));
    return m;
}

/* The pod's volumes:
 *   checkpoints {persistentVolumeClaim: {claimName}}
 *   models, data {persistentVolumeClaim: {claimName, readOnly: true}}
 *   spec {downwardAPI: {items: [{path: spec.yaml, fieldRef: {fieldPath: the annotation}}]}}
 *   dshm {emptyDir: {medium: Memory, sizeLimit}} */
static json_t *pod_volumes(const k8s_job_params *p, volumes_on v)
{
    const spec_k8s *k = p->settings;
    json_t *vols = json_array();
    if (v.checkpoints)
        json_array_append_new(vols, json_pack("{s:s, s:{s:s}}", "name", "checkpoints",
                                              "persistentVolumeClaim", "claimName",
                                              p->checkpoint_pvc));
    if (v.models)
        json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:b}}", "name", "models",
                                              "persistentVolumeClaim", "claimName", k->model_pvc,
                                              "readOnly", 1));
    if (v.data)
        json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:b}}", "name", "data",
                                              "persistentVolumeClaim", "claimName", k->data_pvc,
                                              "readOnly", 1));
    if (v.spec) {
        char *field = xasprintf("metadata.annotations['%s']", K8S_ANNOT_SPEC);
        json_array_append_new(
            vols, json_pack("{s:s, s:{s:[{s:s, s:{s:s}}]}}", "name", "spec", "downwardAPI",
                            "items", "path", "spec.yaml", "fieldRef", "fieldPath", field));
        free(field);
    }
    if (v.shm)
        json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:o}}", "name", "dshm", "emptyDir",
                                              "medium", "Memory", "sizeLimit",
                                              bytes_q(k->shm_size)));
    return vols;
}

/* An argv element exactly as given: Kubernetes expands $(NAME) in command
 * and args to the container's variables and reduces $$ to $, so every $ is
 * written $$ (an argument "$(touch /tmp/x)" or "$HOME" reaches execve as
 * text, as it does locally). */
static json_t *literal_arg(const char *arg)
{
    if (!strchr(arg, '$')) return json_string(arg);
    sb out;
    sb_init(&out);
    for (const char *q = arg; *q; q++) {
        if (*q == '$') sb_putc(&out, '$');
        sb_putc(&out, *q);
    }
    json_t *v = json_string(sb_str(&out));
    sb_free(&out);
    return v;
}

/* The "trainer" container: image, command (argv, never a shell), env,
 * resources, a locked-down securityContext, volume mounts. */
static json_t *trainer_container(const k8s_job_params *p, volumes_on v)
{
    const spec_k8s *k = p->settings;
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(K8S_CONTAINER));
    const char *image = given(p->image) ? p->image : k && given(k->image) ? k->image : "lathe:latest";
    json_object_set_new(c, "image", json_string(image));
    if (k && given(k->image_pull_policy))
        json_object_set_new(c, "imagePullPolicy", json_string(k->image_pull_policy));
    json_t *cmd = json_array();
    for (size_t i = 0; i < p->argc; i++)
        if (p->argv[i]) json_array_append_new(cmd, literal_arg(p->argv[i]));
    if (json_array_size(cmd))
        json_object_set_new(c, "command", cmd);
    else
        json_decref(cmd);
    json_object_set_new(c, "env", container_env(p));
    json_t *res = container_resources(p);
    if (json_object_size(res))
        json_object_set_new(c, "resources", res);
    else
        json_decref(res);
    json_object_set_new(c, "securityContext",
                        json_pack("{s:b, s:{s:[s]}}", "allowPrivilegeEscalation", 0,
                                  "capabilities", "drop", "ALL"));
    json_t *mounts = volume_mounts(p, v);
    if (json_array_size(mounts))
        json_object_set_new(c, "volumeMounts", mounts);
    else
        json_decref(mounts);
    return c;
}

/* ---- the Job ---- */

/* {rules: [{action: FailJob, onExitCodes: {containerName, operator: In,
 *  values}}?, {action: FailJob, onPodConditions: [{type: DisruptionTarget,
 *  status: "True"}]}]}. Values are sorted, once each, without 0 (the API
 * refuses 0 with In). */
static json_t *pod_failure_policy(const k8s_job_params *p)
{
    json_t *rules = json_array();
    int *codes = xcalloc(p->n_fail_codes + 1, sizeof *codes);
    size_t n = 0;
    for (size_t i = 0; i < p->n_fail_codes; i++) {
        int c = p->fail_codes[i];
        if (c == 0) continue;
        size_t at = 0;
        while (at < n && codes[at] < c) at++;
        if (at < n && codes[at] == c) continue;
        memmove(codes + at + 1, codes + at, (n - at) * sizeof *codes);
        codes[at] = c;
        n++;
    }
    if (n > 0) {
        json_t *values = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(values, json_integer(codes[i]));
        json_array_append_new(rules, json_pack("{s:s, s:{s:s, s:s, s:o}}", "action", "FailJob",
                                               "onExitCodes", "containerName", K8S_CONTAINER,
                                               "operator", "In", "values", values));
    }
    free(codes);
    json_array_append_new(rules, json_pack("{s:s, s:[{s:s, s:s}]}", "action", "FailJob",
                                           "onPodConditions", "type", "DisruptionTarget",
                                           "status", "True"));
    return json_pack("{s:o}", "rules", rules);
}

/* The pod template's spec: {restartPolicy, terminationGracePeriodSeconds,
 * subdomain?, priorityClassName?, serviceAccountName?,
 * automountServiceAccountToken (true only with a service account), securityContext:
 * {runAsNonRoot, runAsUser, runAsGroup, fsGroup, seccompProfile},
 * containers: [trainer], volumes?, nodeSelector?, affinity?, tolerations?} */
static json_t *pod_spec(const k8s_job_params *p)
{
    const spec_k8s *k = p->settings;
    volumes_on v = which_volumes(p);
    json_t *s = json_object();
    json_object_set_new(s, "restartPolicy", json_string("Never"));
    double grace = p->grace > 0 ? ceil(p->grace) : 0;
    json_object_set_new(s, "terminationGracePeriodSeconds", json_integer((json_int_t)grace));
    if (nnodes_of(p) > 1) json_object_set_new(s, "subdomain", json_string(p->name ? p->name : ""));
    if (given(p->priority_class))
        json_object_set_new(s, "priorityClassName", json_string(p->priority_class));
    /* The pod reaches the Kubernetes API only as a service account someone
     * chose for it (the team's in the policy, else the settings'): the
     * namespace's default account's token is never mounted, so a trainer
     * holds no credential of the cluster by accident. */
    const char *sa = given(p->service_account)         ? p->service_account
                     : k && given(k->service_account) ? k->service_account
                                                       : NULL;
    if (sa) json_object_set_new(s, "serviceAccountName", json_string(sa));
    json_object_set_new(s, "automountServiceAccountToken", json_boolean(sa != NULL));
    json_t *sc = json_object();
    json_object_set_new(sc, "runAsNonRoot", json_true());
    json_object_set_new(sc, "runAsUser", json_integer(k ? k->run_as_user : 1000));
    json_object_set_new(sc, "runAsGroup", json_integer(k ? k->run_as_group : 1000));
    json_object_set_new(sc, "fsGroup", json_integer(k ? k->fs_group : 1000));
    json_object_set_new(sc, "seccompProfile", json_pack("{s:s}", "type", "RuntimeDefault"));
    json_object_set_new(s, "securityContext", sc);
    json_object_set_new(s, "containers", json_pack("[o]", trainer_container(p, v)));
    json_t *vols = pod_volumes(p, v);
    if (json_array_size(vols))
        json_object_set_new(s, "volumes", vols);
    else
        json_decref(vols);
    json_t *sel = node_selector(p), *aff = affinity(p);
    if (sel) json_object_set_new(s, "nodeSelector", sel);
    if (aff) json_object_set_new(s, "affinity", aff);
    if (p->gpus_per_node > 0)
        json_object_set_new(s, "tolerations",
                            json_pack("[{s:s, s:s, s:s}]", "key", gpu_resource(p), "operator",
                                      "Exists", "effect", "NoSchedule"));
    return s;
}

json_t *k8s_render_job(const k8s_job_params *p)
{
    const spec_k8s *k = p->settings;
    int nn = nnodes_of(p);
    json_t *spec = json_object();
    json_object_set_new(spec, "suspend", json_boolean(p->suspend));
    json_object_set_new(spec, "backoffLimit", json_integer(0));
    json_object_set_new(spec, "podReplacementPolicy", json_string("Failed"));
    json_object_set_new(spec, "podFailurePolicy", pod_failure_policy(p));
    if (p->max_duration > 0)
        json_object_set_new(spec, "activeDeadlineSeconds",
                            json_integer((json_int_t)ceil(p->max_duration)));
    int ttl = k ? k->ttl_after_finished : 86400;
    if (ttl >= 0) json_object_set_new(spec, "ttlSecondsAfterFinished", json_integer(ttl));
    json_object_set_new(spec, "completions", json_integer(nn));
    json_object_set_new(spec, "parallelism", json_integer(nn));
    if (nn > 1) json_object_set_new(spec, "completionMode", json_string("Indexed"));

    json_t *tmeta = json_object();
    json_object_set_new(tmeta, "labels", attempt_labels(p));
    if (p->spec_yaml)
        json_object_set_new(tmeta, "annotations",
                            json_pack("{s:s}", K8S_ANNOT_SPEC, p->spec_yaml));
    json_object_set_new(spec, "template",
                        json_pack("{s:o, s:o}", "metadata", tmeta, "spec", pod_spec(p)));

    json_t *job = json_object();
    json_object_set_new(job, "apiVersion", json_string("batch/v1"));
    json_object_set_new(job, "kind", json_string("Job"));
    json_t *meta = attempt_metadata(p);
    json_t *owners = owner_references(p);
    /* the Job only: its Service is owned by the Job (the executor sets it) */
    if (owners) json_object_set_new(meta, "ownerReferences", owners);
    json_object_set_new(job, "metadata", meta);
    json_object_set_new(job, "spec", spec);
    return job;
}

/* {apiVersion: v1, kind: Service, metadata: {name, namespace, labels},
 *  spec: {clusterIP: None, publishNotReadyAddresses: true,
 *         selector: {batch.kubernetes.io/job-name: <job>},
 *         ports: [{name: master, port, targetPort, protocol: TCP}]}} */
json_t *k8s_render_service(const k8s_job_params *p)
{
    if (nnodes_of(p) <= 1) return NULL;
    int port = p->settings && p->settings->master_port > 0 ? p->settings->master_port : 29500;
    json_t *spec = json_object();
    json_object_set_new(spec, "clusterIP", json_string("None"));
    json_object_set_new(spec, "publishNotReadyAddresses", json_true());
    json_object_set_new(spec, "selector", json_pack("{s:s}", JOB_NAME_LABEL, p->name ? p->name : ""));
    json_object_set_new(spec, "ports", json_pack("[{s:s, s:i, s:i, s:s}]", "name", "master", "port",
                                                 port, "targetPort", port, "protocol", "TCP"));
    json_t *svc = json_object();
    json_object_set_new(svc, "apiVersion", json_string("v1"));
    json_object_set_new(svc, "kind", json_string("Service"));
    json_object_set_new(svc, "metadata", attempt_metadata(p));
    json_object_set_new(svc, "spec", spec);
    return svc;
}

/* {metadata: {annotations: {lathe.dev/placement: <text>}}?, spec: {suspend:
 *  false, template: {spec: {nodeSelector: {...} | null, affinity: {...} |
 *  null}}}}: null removes what the placement does not want; the annotation
 *  lets a server that rebuilds its state from the API read the placement
 *  back from the Job. */
json_t *k8s_render_admit_patch(const k8s_job_params *p)
{
    json_t *sel = node_selector(p), *aff = affinity(p);
    json_t *tspec = json_object();
    json_object_set_new(tspec, "nodeSelector", sel ? sel : json_null());
    json_object_set_new(tspec, "affinity", aff ? aff : json_null());
    json_t *patch = json_pack("{s:{s:b, s:{s:o}}}", "spec", "suspend", 0, "template", "spec", tspec);
    if (p->placement_json)
        json_object_set_new(patch, "metadata",
                            json_pack("{s:{s:s}}", "annotations", K8S_ANNOT_PLACEMENT,
                                      p->placement_json));
    return patch;
}
