/* k8s_render_serve.c: what serves an adapter on a cluster (k8s.h,
 * "serving an adapter"), as `lathe render serve --target k8s` prints it;
 * docs/kubernetes.md, "Serving an adapter", shows the result. Pure
 * functions of their inputs:
 *
 *   k8s_render_serve         Service, Deployment, HorizontalPodAutoscaler
 *                            (autoscaling/v2), PodDisruptionBudget, for
 *                            `lathe serve` or vLLM's `vllm serve`
 *   k8s_serve_source_of_job  where a training Job (k8s_render_job's object)
 *                            leaves its adapter, read from the Job itself
 *   k8s_serve_choose         which job of an experiment to serve (the
 *                            lowest eval loss, else the lowest training
 *                            loss), and the sentences that say why
 *   k8s_serve_candidates_json  the candidates from the API's job JSON
 */
#include "k8s.h"

#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_PERIOD 10      /* the startup probe's period, seconds */
#define READ_RATE (100.0 * 1048576.0) /* bytes a second from network storage */
#define DEFAULT_STARTUP 900.0
#define DEFAULT_CPU 4.0
#define DEFAULT_MEMORY (16.0 * GIB)
#define DEFAULT_MIN 1
#define DEFAULT_MAX 4
#define DEFAULT_CPU_TARGET 70
#define DEFAULT_RPS 10.0
#define ANNOT_SELECTION "lathe.dev/selection"
#define LABEL_RUNTIME "lathe.dev/runtime"
/* the variables each server reads its key from */
#define SECRET_ENV_LATHE "LATHE_API_KEY"
#define SECRET_ENV_VLLM "VLLM_API_KEY"

static bool given(const char *s) { return s && *s; }

const char *k8s_serve_runtime_name(k8s_serve_runtime r)
{
    return r == K8S_SERVE_VLLM ? "vllm" : "lathe";
}

/* ---- sizes ---- */

double k8s_serve_startup_seconds(const k8s_serve_params *p)
{
    if (p->startup_seconds > 0) return p->startup_seconds;
    if (!(p->model_bytes > 0)) return DEFAULT_STARTUP;
    double start = p->runtime == K8S_SERVE_VLLM ? 240.0 : 60.0;
    double s = start + p->model_bytes / READ_RATE;
    return s < 120.0 ? 120.0 : s;
}

static double memory_of(const k8s_serve_params *p)
{
    if (p->memory > 0) return p->memory;
    if (!(p->model_bytes > 0)) return DEFAULT_MEMORY;
    return ceil((p->model_bytes * 1.25 + 2.0 * GIB) / GIB) * GIB;
}

static double cpu_of(const k8s_serve_params *p) { return p->cpu > 0 ? p->cpu : DEFAULT_CPU; }

static int port_of(const k8s_serve_params *p) { return p->port > 0 ? p->port : K8S_SERVE_PORT; }

/* Whether a HorizontalPodAutoscaler sets the replicas. */
static bool autoscaled(const k8s_serve_params *p) { return p->replicas <= 0; }

static int min_of(const k8s_serve_params *p)
{
    return p->min_replicas > 0 ? p->min_replicas : DEFAULT_MIN;
}

static int max_of(const k8s_serve_params *p)
{
    int mx = p->max_replicas > 0 ? p->max_replicas : DEFAULT_MAX;
    return mx < min_of(p) ? min_of(p) : mx;
}

/* The ranks vLLM's --max-lora-rank takes; a rank between two is rounded up. */
static int vllm_rank(int rank)
{
    static const int ranks[] = {8, 16, 32, 64, 128, 256, 320, 512};
    if (rank <= 0) return 16;
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
        if (rank <= ranks[i]) return ranks[i];
    return ranks[sizeof ranks / sizeof ranks[0] - 1];
}

/* ---- labels ---- */

/* A label value as Kubernetes takes it: at most 63 of [A-Za-z0-9._-],
 * alphanumeric at both ends. */
static bool label_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 63) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && !((i > 0 && i < n - 1) && (c == '.' || c == '_' || c == '-'))) return false;
    }
    return true;
}

/* The pods' selector: name, instance, component. */
static json_t *selector(const k8s_serve_params *p)
{
    return json_pack("{s:s, s:s, s:s}", "app.kubernetes.io/name", p->name,
                     "app.kubernetes.io/instance", p->name, "app.kubernetes.io/component",
                     "serve");
}

/* The selector's labels, then part-of, managed-by, the runtime and the
 * lathe.dev labels of what is served (each when it is a valid value). */
static json_t *labels(const k8s_serve_params *p)
{
    json_t *l = selector(p);
    json_object_set_new(l, "app.kubernetes.io/part-of", json_string("lathe"));
    json_object_set_new(l, K8S_LABEL_MANAGED, json_string("lathe"));
    json_object_set_new(l, LABEL_RUNTIME, json_string(k8s_serve_runtime_name(p->runtime)));
    if (label_ok(p->team)) json_object_set_new(l, K8S_LABEL_TEAM, json_string(p->team));
    if (label_ok(p->experiment))
        json_object_set_new(l, K8S_LABEL_EXPERIMENT, json_string(p->experiment));
    if (label_ok(p->job)) json_object_set_new(l, K8S_LABEL_JOB, json_string(p->job));
    return l;
}

static json_t *object(const k8s_serve_params *p, const char *api, const char *kind)
{
    json_t *meta = json_pack("{s:s, s:s, s:o}", "name", p->name, "namespace",
                             given(p->namespace_) ? p->namespace_ : "default", "labels",
                             labels(p));
    return json_pack("{s:s, s:s, s:o}", "apiVersion", api, "kind", kind, "metadata", meta);
}

/* ---- the container ---- */

static void arg(json_t *argv, const char *s) { json_array_append_new(argv, json_string(s)); }

static void arg_int(json_t *argv, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    arg(argv, buf);
}

static int max_adapters_of(const k8s_serve_params *p)
{
    if (p->max_adapters > 0) return p->max_adapters;
    return p->n_adapters > 0 ? (int)p->n_adapters : 1;
}

/* `lathe serve --model M [--served-model-name N] --adapter N=P ... --host 0.0.0.0 --port P
 * --max-adapters N [--max-batch N] --threads N`: the key is no argument
 * (lathe serve reads LATHE_API_KEY, which the Secret fills), so it is in
 * neither the object nor the process list. */
static json_t *lathe_command(const k8s_serve_params *p, const spec_k8s *k)
{
    json_t *a = json_array();
    arg(a, given(k->lathe_path) ? k->lathe_path : "lathe");
    arg(a, "serve");
    arg(a, "--model");
    arg(a, p->model_path);
    if (given(p->served_model_name)) {
        arg(a, "--served-model-name");
        arg(a, p->served_model_name);
    }
    for (size_t i = 0; i < p->n_adapters; i++) {
        char *kv = xasprintf("%s=%s", p->adapters[i].name, p->adapters[i].path);
        arg(a, "--adapter");
        arg(a, kv);
        free(kv);
    }
    arg(a, "--host");
    arg(a, "0.0.0.0");
    arg(a, "--port");
    arg_int(a, port_of(p));
    arg(a, "--max-adapters");
    arg_int(a, max_adapters_of(p));
    if (p->max_batch > 0) {
        arg(a, "--max-batch");
        arg_int(a, p->max_batch);
    }
    arg(a, "--threads");
    arg_int(a, p->threads > 0 ? p->threads : (long long)ceil(cpu_of(p)));
    return a;
}

/* `vllm serve MODEL --host 0.0.0.0 --port P [--served-model-name N]
 * [--tensor-parallel-size G] [--enable-lora --lora-modules N=P ...
 * --max-loras N --max-lora-rank R]`: vLLM's own flags; its key comes from
 * VLLM_API_KEY. */
static json_t *vllm_command(const k8s_serve_params *p)
{
    json_t *a = json_array();
    arg(a, "vllm");
    arg(a, "serve");
    arg(a, p->model_path);
    arg(a, "--host");
    arg(a, "0.0.0.0");
    arg(a, "--port");
    arg_int(a, port_of(p));
    if (given(p->served_model_name)) {
        arg(a, "--served-model-name");
        arg(a, p->served_model_name);
    }
    if (p->gpus > 1) {
        arg(a, "--tensor-parallel-size");
        arg_int(a, p->gpus);
    }
    if (p->n_adapters > 0) {
        arg(a, "--enable-lora");
        arg(a, "--lora-modules");
        for (size_t i = 0; i < p->n_adapters; i++) {
            char *kv = xasprintf("%s=%s", p->adapters[i].name, p->adapters[i].path);
            arg(a, kv);
            free(kv);
        }
        arg(a, "--max-loras");
        arg_int(a, max_adapters_of(p));
        arg(a, "--max-lora-rank");
        arg_int(a, vllm_rank(p->max_lora_rank));
    }
    return a;
}

static const char *gpu_resource(const spec_k8s *k)
{
    return given(k->gpu_resource) ? k->gpu_resource : "nvidia.com/gpu";
}

/* {requests: {cpu, memory, gpu?}, limits: {memory, gpu?}} */
static json_t *resources(const k8s_serve_params *p, const spec_k8s *k)
{
    char cpu[48], mem[48];
    k8s_quantity_cpu(cpu_of(p), cpu, sizeof cpu);
    k8s_quantity_bytes(memory_of(p), mem, sizeof mem);
    json_t *req = json_pack("{s:s, s:s}", "cpu", cpu, "memory", mem);
    json_t *lim = json_pack("{s:s}", "memory", mem);
    if (p->gpus > 0) {
        json_object_set_new(req, gpu_resource(k), json_integer(p->gpus));
        json_object_set_new(lim, gpu_resource(k), json_integer(p->gpus));
    }
    return json_pack("{s:o, s:o}", "requests", req, "limits", lim);
}

static json_t *probe(const char *path, int delay, int period, int failures)
{
    json_t *pr = json_pack("{s:{s:s, s:s}}", "httpGet", "path", path, "port", "http");
    if (delay > 0) json_object_set_new(pr, "initialDelaySeconds", json_integer(delay));
    json_object_set_new(pr, "periodSeconds", json_integer(period));
    json_object_set_new(pr, "timeoutSeconds", json_integer(5));
    json_object_set_new(pr, "failureThreshold", json_integer(failures));
    return pr;
}

/* Whether each volume is there. */
typedef struct serve_volumes {
    const char *model_pvc, *adapters_pvc; /* NULL = none */
    bool shm;
} serve_volumes;

static serve_volumes which_volumes(const k8s_serve_params *p, const spec_k8s *k)
{
    serve_volumes v = {0};
    const char *m = p->model_pvc ? p->model_pvc : k->model_pvc;
    if (given(m)) v.model_pvc = m;
    const char *a = p->adapters_pvc ? p->adapters_pvc : k->checkpoint_pvc;
    if (p->n_adapters > 0 && given(a)) v.adapters_pvc = a;
    v.shm = p->runtime == K8S_SERVE_VLLM && k->shm_size > 0;
    return v;
}

static const char *mount_or(const char *m, const char *dflt) { return given(m) ? m : dflt; }

static json_t *env_list(const k8s_serve_params *p, const spec_k8s *k, serve_volumes v)
{
    json_t *env = json_array();
    if (v.model_pvc) {
        const char *home = mount_or(k->model_mount, "/models");
        json_array_append_new(env, json_pack("{s:s, s:s}", "name", "HF_HOME", "value", home));
    }
    if (p->runtime == K8S_SERVE_VLLM) /* the image's root-owned home is not the pod user's */
        json_array_append_new(env, json_pack("{s:s, s:s}", "name", "HOME", "value", "/tmp"));
    if (given(p->api_key_secret))
        json_array_append_new(
            env, json_pack("{s:s, s:{s:{s:s, s:s}}}", "name",
                           p->runtime == K8S_SERVE_VLLM ? SECRET_ENV_VLLM : SECRET_ENV_LATHE,
                           "valueFrom", "secretKeyRef", "name", p->api_key_secret, "key",
                           given(p->api_key_key) ? p->api_key_key : "api-key"));
    return env;
}

static json_t *container(const k8s_serve_params *p, const spec_k8s *k, serve_volumes v)
{
    bool vllm = p->runtime == K8S_SERVE_VLLM;
    const char *image = given(p->image)   ? p->image
                        : vllm            ? K8S_VLLM_IMAGE
                        : given(k->image) ? k->image
                                          : "lathe:latest";
    json_t *c = json_pack("{s:s, s:s}", "name", "serve", "image", image);
    if (given(k->image_pull_policy))
        json_object_set_new(c, "imagePullPolicy", json_string(k->image_pull_policy));
    json_object_set_new(c, "command", vllm ? vllm_command(p) : lathe_command(p, k));
    json_object_set_new(c, "ports", json_pack("[{s:s, s:i, s:s}]", "name", "http", "containerPort",
                                              port_of(p), "protocol", "TCP"));
    json_t *env = env_list(p, k, v);
    if (json_array_size(env))
        json_object_set_new(c, "env", env);
    else
        json_decref(env);
    json_object_set_new(c, "resources", resources(p, k));
    int failures = (int)ceil(k8s_serve_startup_seconds(p) / PROBE_PERIOD);
    json_object_set_new(c, "startupProbe", probe("/health", 0, PROBE_PERIOD, failures));
    json_object_set_new(c, "livenessProbe", probe("/health", 60, 30, 3));
    json_object_set_new(c, "readinessProbe", probe(vllm ? "/health" : "/ready", 30, 10, 3));
    /* endpoints drop the pod before the server hears SIGTERM */
    json_object_set_new(c, "lifecycle",
                        json_pack("{s:{s:{s:i}}}", "preStop", "sleep", "seconds", 5));
    json_object_set_new(c, "securityContext",
                        json_pack("{s:b, s:b, s:{s:[s]}}", "allowPrivilegeEscalation", 0,
                                  "readOnlyRootFilesystem", vllm ? 0 : 1, "capabilities", "drop",
                                  "ALL"));
    json_t *mounts = json_array();
    if (v.model_pvc)
        json_array_append_new(mounts,
                              json_pack("{s:s, s:s, s:b}", "name", "models", "mountPath",
                                        mount_or(k->model_mount, "/models"), "readOnly", 1));
    if (v.adapters_pvc)
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "name", "adapters", "mountPath",
                                                mount_or(k->checkpoint_mount, "/checkpoints"),
                                                "readOnly", 1));
    json_array_append_new(mounts, json_pack("{s:s, s:s}", "name", "tmp", "mountPath", "/tmp"));
    if (v.shm)
        json_array_append_new(mounts,
                              json_pack("{s:s, s:s}", "name", "dshm", "mountPath", "/dev/shm"));
    json_object_set_new(c, "volumeMounts", mounts);
    return c;
}

static json_t *volumes(const spec_k8s *k, serve_volumes v)
{
    json_t *vols = json_array();
    if (v.model_pvc)
        json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:b}}", "name", "models",
                                              "persistentVolumeClaim", "claimName", v.model_pvc,
                                              "readOnly", 1));
    if (v.adapters_pvc)
        json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:b}}", "name", "adapters",
                                              "persistentVolumeClaim", "claimName",
                                              v.adapters_pvc, "readOnly", 1));
    json_array_append_new(vols, json_pack("{s:s, s:{}}", "name", "tmp", "emptyDir"));
    if (v.shm) {
        char size[48];
        k8s_quantity_bytes(k->shm_size, size, sizeof size);
        json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:s}}", "name", "dshm", "emptyDir",
                                              "medium", "Memory", "sizeLimit", size));
    }
    return vols;
}

static json_t *pod_spec(const k8s_serve_params *p, const spec_k8s *k)
{
    serve_volumes v = which_volumes(p, k);
    json_t *s = json_object();
    if (given(k->service_account))
        json_object_set_new(s, "serviceAccountName", json_string(k->service_account));
    /* the server never calls the Kubernetes API */
    json_object_set_new(s, "automountServiceAccountToken", json_false());
    json_object_set_new(
        s, "securityContext",
        json_pack("{s:b, s:I, s:I, s:I, s:{s:s}}", "runAsNonRoot", 1, "runAsUser",
                  (json_int_t)k->run_as_user, "runAsGroup", (json_int_t)k->run_as_group,
                  "fsGroup", (json_int_t)k->fs_group, "seccompProfile", "type", "RuntimeDefault"));
    /* the preStop sleep, then lathe serve's drain of the requests in flight (120 s at most) */
    json_object_set_new(s, "terminationGracePeriodSeconds", json_integer(130));
    json_object_set_new(s, "containers", json_pack("[o]", container(p, k, v)));
    json_object_set_new(s, "volumes", volumes(k, v));
    if (p->gpus > 0)
        json_object_set_new(s, "tolerations",
                            json_pack("[{s:s, s:s, s:s}]", "key", gpu_resource(k), "operator",
                                      "Exists", "effect", "NoSchedule"));
    return s;
}

static json_t *deployment(const k8s_serve_params *p, const spec_k8s *k)
{
    json_t *o = object(p, "apps/v1", "Deployment");
    if (given(p->selection))
        json_object_set_new(json_object_get(o, "metadata"), "annotations",
                            json_pack("{s:s}", ANNOT_SELECTION, p->selection));
    json_t *spec = json_object();
    /* with an autoscaler the replicas are its to set: an apply that wrote
     * them would undo its scaling */
    if (!autoscaled(p)) json_object_set_new(spec, "replicas", json_integer(p->replicas));
    json_object_set_new(spec, "selector", json_pack("{s:o}", "matchLabels", selector(p)));
    /* a new pod loads before an old one goes */
    json_object_set_new(spec, "strategy",
                        json_pack("{s:s, s:{s:i, s:i}}", "type", "RollingUpdate", "rollingUpdate",
                                  "maxSurge", 1, "maxUnavailable", 0));
    char port[16];
    snprintf(port, sizeof port, "%d", port_of(p));
    json_t *tmeta = json_pack("{s:o, s:{s:s, s:s, s:s}}", "labels", labels(p), "annotations",
                              "prometheus.io/scrape", "true", "prometheus.io/port", port,
                              "prometheus.io/path", "/metrics");
    json_object_set_new(spec, "template",
                        json_pack("{s:o, s:o}", "metadata", tmeta, "spec", pod_spec(p, k)));
    json_object_set_new(o, "spec", spec);
    return o;
}

static json_t *service(const k8s_serve_params *p)
{
    json_t *o = object(p, "v1", "Service");
    json_object_set_new(o, "spec",
                        json_pack("{s:s, s:o, s:[{s:s, s:i, s:s, s:s}]}", "type", "ClusterIP",
                                  "selector", selector(p), "ports", "name", "http", "port",
                                  port_of(p), "targetPort", "http", "protocol", "TCP"));
    return o;
}

static json_t *autoscaler(const k8s_serve_params *p)
{
    json_t *o = object(p, "autoscaling/v2", "HorizontalPodAutoscaler");
    char rps[48];
    k8s_quantity_cpu(p->rps_target > 0 ? p->rps_target : DEFAULT_RPS, rps, sizeof rps);
    const char *metric = given(p->rps_metric)              ? p->rps_metric
                         : p->runtime == K8S_SERVE_VLLM ? K8S_SERVE_RPS_METRIC_VLLM
                                                           : K8S_SERVE_RPS_METRIC_LATHE;
    json_t *metrics = json_pack(
        "[{s:s, s:{s:s, s:{s:s, s:i}}}, {s:s, s:{s:{s:s}, s:{s:s, s:s}}}]", "type", "Resource",
        "resource", "name", "cpu", "target", "type", "Utilization", "averageUtilization",
        p->cpu_target > 0 ? p->cpu_target : DEFAULT_CPU_TARGET, "type", "Pods", "pods", "metric",
        "name", metric, "target", "type", "AverageValue", "averageValue", rps);
    /* a pod takes minutes to load: scale down one at a time, slowly */
    json_t *behavior = json_pack(
        "{s:{s:i, s:[{s:s, s:i, s:i}]}, s:{s:i, s:[{s:s, s:i, s:i}]}}", "scaleDown",
        "stabilizationWindowSeconds", 300, "policies", "type", "Pods", "value", 1, "periodSeconds",
        120, "scaleUp", "stabilizationWindowSeconds", 60, "policies", "type", "Pods", "value", 2,
        "periodSeconds", 60);
    json_object_set_new(
        o, "spec",
        json_pack("{s:{s:s, s:s, s:s}, s:i, s:i, s:o, s:o}", "scaleTargetRef", "apiVersion",
                  "apps/v1", "kind", "Deployment", "name", p->name, "minReplicas", min_of(p),
                  "maxReplicas", max_of(p), "metrics", metrics, "behavior", behavior));
    return o;
}

static json_t *disruption_budget(const k8s_serve_params *p)
{
    json_t *o = object(p, "policy/v1", "PodDisruptionBudget");
    json_object_set_new(o, "spec", json_pack("{s:i, s:{s:o}}", "maxUnavailable", 1, "selector",
                                             "matchLabels", selector(p)));
    return o;
}

json_t *k8s_render_serve(const k8s_serve_params *p, char *err, size_t errsz)
{
    if (!given(p->name)) {
        snprintf(err, errsz, "the serving objects need a name");
        return NULL;
    }
    if (!given(p->model_path)) {
        snprintf(err, errsz, "the server needs the base model's path");
        return NULL;
    }
    spec_k8s dflt;
    const spec_k8s *k = p->settings;
    if (!k) {
        spec_k8s_defaults(&dflt);
        k = &dflt;
    }
    json_t *out = json_array();
    json_array_append_new(out, service(p));
    json_array_append_new(out, deployment(p, k));
    if (autoscaled(p)) json_array_append_new(out, autoscaler(p));
    int pods = autoscaled(p) ? min_of(p) : p->replicas;
    if (pods > 1) json_array_append_new(out, disruption_budget(p));
    if (!p->settings) spec_k8s_free(&dflt);
    return out;
}

/* ---- where a training Job leaves its adapter ---- */

static char *dup_or_null(const char *s) { return given(s) ? xstrdup(s) : NULL; }

/* The value of env entry name in a container's env; NULL when absent. */
static const char *env_of(const json_t *ctr, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ctr, "env"), i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && strcmp(n, name) == 0) return json_string_value(json_object_get(e, "value"));
    }
    return NULL;
}

/* The claim of the pod's volume called name; NULL when absent. */
static const char *claim_of(const json_t *pod, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(pod, "volumes"), i, v) {
        const char *n = json_string_value(json_object_get(v, "name"));
        if (n && strcmp(n, name) == 0)
            return json_string_value(
                json_object_get(json_object_get(v, "persistentVolumeClaim"), "claimName"));
    }
    return NULL;
}

bool k8s_serve_source_of_job(const json_t *job, k8s_serve_source *out, char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    const json_t *meta = json_object_get(job, "metadata");
    const json_t *labels = json_object_get(meta, "labels");
    const json_t *pod = json_object_get(json_object_get(json_object_get(job, "spec"), "template"),
                                        "spec");
    const json_t *ctr = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(pod, "containers"), i, c) {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (n && strcmp(n, K8S_CONTAINER) == 0) ctr = c;
    }
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *pvc = claim_of(pod, "checkpoints");
    const char *dir = ctr ? env_of(ctr, "CHECKPOINT_DIR") : NULL;
    if (!given(pvc) || !given(dir)) {
        snprintf(err, errsz, "Job %s has no checkpoints volume or no CHECKPOINT_DIR: its adapter "
                             "is nowhere a server can mount", name ? name : "?");
        return false;
    }
    out->namespace_ = dup_or_null(json_string_value(json_object_get(meta, "namespace")));
    out->team = dup_or_null(json_string_value(json_object_get(labels, K8S_LABEL_TEAM)));
    out->job = dup_or_null(json_string_value(json_object_get(labels, K8S_LABEL_JOB)));
    out->experiment = dup_or_null(json_string_value(json_object_get(labels, K8S_LABEL_EXPERIMENT)));
    out->adapters_pvc = xstrdup(pvc);
    /* the built-in trainer's final adapter (docs/checkpoints.md) */
    out->adapter_path = path_join(dir, "final");
    out->model_pvc = dup_or_null(claim_of(pod, "models"));
    out->model_path = dup_or_null(env_of(ctr, "BASE_MODEL_PATH"));
    return true;
}

void k8s_serve_source_free(k8s_serve_source *s)
{
    free(s->namespace_);
    free(s->team);
    free(s->job);
    free(s->experiment);
    free(s->adapters_pvc);
    free(s->adapter_path);
    free(s->model_pvc);
    free(s->model_path);
    memset(s, 0, sizeof *s);
}

/* ---- which job of an experiment ---- */

static bool succeeded(const k8s_serve_candidate *c)
{
    return !c->state || strcmp(c->state, "succeeded") == 0;
}

/* The order of the candidates being compared: by the loss the choice
 * uses, then the training loss (a missing one last), then the name. */
typedef struct ranked {
    const k8s_serve_candidate *c;
    double key;
    long index;
} ranked;

static int cmp_loss(double a, double b)
{
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na - nb;
    return a < b ? -1 : a > b ? 1 : 0;
}

static int cmp_ranked(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    int r = cmp_loss(a->key, b->key);
    if (!r) r = cmp_loss(a->c->train_loss, b->c->train_loss);
    if (!r) r = strcmp(a->c->job ? a->c->job : "", b->c->job ? b->c->job : "");
    return r;
}

static void add_line(k8s_serve_choice *ch, char *line)
{
    ch->lines = xrealloc(ch->lines, (ch->n_lines + 1) * sizeof *ch->lines);
    ch->lines[ch->n_lines++] = line;
}

/* "a (failed), b (running)" of the candidates left out */
static void left_out(k8s_serve_choice *ch, const k8s_serve_candidate *c, size_t n, bool by_eval)
{
    sb s;
    sb_init(&s);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        const char *why = NULL;
        if (!succeeded(&c[i])) why = c[i].state;
        else if (by_eval && isnan(c[i].eval_loss)) why = "succeeded, no eval loss";
        else if (!by_eval && isnan(c[i].train_loss)) why = "succeeded, no training loss";
        if (!why) continue;
        sb_printf(&s, "%s%s (%s)", count++ ? ", " : "", c[i].job ? c[i].job : "?", why);
    }
    if (count) add_line(ch, xasprintf("left out: %s", sb_str(&s)));
    sb_free(&s);
}

bool k8s_serve_choose(const char *experiment, const k8s_serve_candidate *c, size_t n,
                      k8s_serve_choice *out)
{
    memset(out, 0, sizeof *out);
    out->chosen = -1;
    const char *what = given(experiment) ? experiment : "the experiment";
    size_t with_eval = 0, with_train = 0, done = 0;
    for (size_t i = 0; i < n; i++) {
        if (!succeeded(&c[i])) continue;
        done++;
        if (!isnan(c[i].eval_loss)) with_eval++;
        if (!isnan(c[i].train_loss)) with_train++;
    }
    out->by_eval = with_eval > 0;
    size_t m = out->by_eval ? with_eval : with_train;
    if (m == 0) {
        add_line(out, done ? xasprintf("%s: none of its %zu succeeded job(s) reported a loss, so "
                                       "there is nothing to compare", what, done)
                           : xasprintf("%s: none of its %zu job(s) has succeeded yet: only a "
                                       "finished job has a final adapter", what, n));
        left_out(out, c, n, false);
        return false;
    }
    ranked *r = xcalloc(m, sizeof *r);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        double key = out->by_eval ? c[i].eval_loss : c[i].train_loss;
        if (succeeded(&c[i]) && !isnan(key))
            r[k++] = (ranked){.c = &c[i], .key = key, .index = (long)i};
    }
    qsort(r, m, sizeof *r, cmp_ranked);
    out->chosen = r[0].index;
    const char *loss = out->by_eval ? "eval loss" : "final training loss";
    if (out->by_eval && !isnan(r[0].c->train_loss))
        add_line(out, xasprintf("%s: serving job %s, eval loss %.4f (final training loss %.4f)",
                                what, r[0].c->job, r[0].key, r[0].c->train_loss));
    else
        add_line(out, xasprintf("%s: serving job %s, %s %.4f", what, r[0].c->job, loss, r[0].key));
    if (out->by_eval)
        add_line(out, xasprintf("why: the lowest eval loss of the %zu succeeded job(s) with one; "
                                "a loss on held-out data says how the adapter does on text it "
                                "did not learn", m));
    else
        add_line(out, xasprintf("fallback: no succeeded job has an eval loss (give the jobs "
                                "trainingData.evalPath), so this is the lowest final training "
                                "loss of %zu: it says how well the adapter fits its training "
                                "data, not how it does on new text", m));
    if (m > 1 && cmp_loss(r[0].key, r[1].key) == 0) {
        bool by_train = out->by_eval && cmp_loss(r[0].c->train_loss, r[1].c->train_loss) != 0;
        add_line(out, xasprintf("tie: %s and %s have the same %s; %s", r[0].c->job, r[1].c->job,
                                loss, by_train ? "the lower final training loss decided"
                                               : "the name first in byte order decided"));
    }
    for (size_t i = 1; i < m && i <= 3; i++)
        add_line(out, xasprintf("runner-up %zu: %s, %s %.4f (%+.4f)", i, r[i].c->job, loss,
                                r[i].key, r[i].key - r[0].key));
    if (m > 4) add_line(out, xasprintf("and %zu more compared", m - 4));
    const k8s_serve_candidate *w = r[0].c;
    if (out->by_eval && w->best_step >= 0 && w->last_step > w->best_step &&
        !isnan(w->last_eval_loss))
        add_line(out, xasprintf("note: %s's lowest eval loss was at step %ld; its final adapter, "
                                "served here, had eval loss %.4f at step %ld (serve the step's "
                                "checkpoint with --adapter to have the lowest)",
                                w->job, w->best_step, w->last_eval_loss, w->last_step));
    left_out(out, c, n, out->by_eval);
    free(r);
    return true;
}

void k8s_serve_choice_free(k8s_serve_choice *ch)
{
    for (size_t i = 0; i < ch->n_lines; i++) free(ch->lines[i]);
    free(ch->lines);
    memset(ch, 0, sizeof *ch);
    ch->chosen = -1;
}

/* ---- candidates from the API's JSON ---- */

static double num_or_nan(const json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

static long step_or_none(const json_t *v)
{
    return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

k8s_serve_candidate *k8s_serve_candidates_json(const json_t *v, size_t *n, char *err,
                                               size_t errsz)
{
    *n = 0;
    const json_t *jobs = v;
    if (json_is_object(v)) {
        jobs = json_object_get(v, "jobs");
        if (!jobs) jobs = json_object_get(v, "items");
    }
    if (!json_is_array(jobs)) {
        snprintf(err, errsz, "expected the API's experiment ({\"jobs\": [...]}), a job list "
                             "({\"items\": [...]}) or an array of jobs, found %s",
                 jobs ? json_kind(jobs) : json_kind(v));
        return NULL;
    }
    size_t m = json_array_size(jobs);
    k8s_serve_candidate *c = xcalloc(m + 1, sizeof *c);
    for (size_t i = 0; i < m; i++) {
        const json_t *j = json_array_get(jobs, i);
        const char *name = json_string_value(json_object_get(j, "name"));
        if (!given(name)) {
            snprintf(err, errsz, "job %zu of the list has no name", i + 1);
            free(c);
            return NULL;
        }
        const json_t *ev = json_object_get(j, "eval");
        c[i].job = name;
        c[i].state = json_string_value(json_object_get(j, "state"));
        c[i].eval_loss = num_or_nan(json_object_get(ev, "best_loss"));
        c[i].train_loss = num_or_nan(json_object_get(json_object_get(j, "progress"), "loss"));
        c[i].adapter = json_string_value(json_object_get(j, "adapter"));
        c[i].best_step = step_or_none(json_object_get(ev, "best_step"));
        c[i].last_step = step_or_none(json_object_get(ev, "step"));
        c[i].last_eval_loss = num_or_nan(json_object_get(ev, "loss"));
    }
    *n = m;
    return c;
}
