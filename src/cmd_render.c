/* cmd_render.c: `lathe render FILE --target k8s`: the Kubernetes objects
 * lathe would create, without a cluster or a server. A LoRATrainingJob (or
 * every job of a LoRAExperiment) is planned as `lathe plan` plans it and
 * turned into the exec_request the server gives the Kubernetes executor
 * to prepare the job's next attempt; the objects are the executor's own
 * (exec_k8s_objects, the mapping it creates them with): the headless
 * Service of a multi-node job, then the Job, created suspended and not yet
 * placed. A Cluster file becomes its setup
 * (k8s_render_cluster). `lathe render server` (the literal word) prints
 * what installs lathe itself into a cluster (k8s_render_server: CRDs,
 * RBAC, ConfigMap, Deployment, Service). `lathe render serve [FILE]`
 * prints what serves an adapter (k8s_render_serve: Service, Deployment,
 * HorizontalPodAutoscaler, PodDisruptionBudget) for `lathe serve` or
 * vLLM: a job's final adapter, found in the Job the executor would create
 * for it, or an experiment's best job by eval loss (its results from
 * --results or the server, through lib/client; k8s_serve_choose), or the
 * adapters the options name. Output: YAML documents (default) or a v1
 * List. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"
#include "exec/exec.h"
#include "k8s/k8s.h"
#include "plan/plan.h"
#include "spec/spec.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char render_help[] =
    "usage: lathe render FILE [--target k8s] [options]\n"
    "       lathe render JOB.yaml --target slurm [--config SERVER.yaml] [--cluster C.yaml] [-o json]\n"
    "       lathe render server --target k8s [-o yaml|json] [--config SERVER.yaml]\n"
    "                           [--namespace NS] [--image IMAGE]\n"
    "       lathe render serve [FILE] --target k8s [--runtime lathe|vllm]\n"
    "                          [--results FILE | --server ADDR] [serve options]\n"
    "       lathe render grafana [--datasource UID] [--title T] [--uid U] [--refresh D]\n"
    "       lathe render alerts [--no-progress D] [--idle D] [--idle-below PCT]\n"
    "                           [--queue-wait D] [--group NAME] [-o yaml|json]\n"
    "\n"
    "Prints the Kubernetes objects lathe would create, without a cluster:\n"
    "  - for a LoRATrainingJob, or every job of a LoRAExperiment: the objects\n"
    "    of the job's next attempt as the Kubernetes executor creates them\n"
    "    (the headless Service of a multi-node job, then the batch/v1 Job,\n"
    "    suspended and not yet placed: lathe's scheduler admits it with a\n"
    "    patch that adds its GPU type, nodes and rack). The job is planned\n"
    "    first, as `lathe plan` plans it: nodes and GPUs per node.\n"
    "  - for a Cluster: its setup, to apply once: a PriorityClass per\n"
    "    priority class, and per team a Namespace, a ResourceQuota on GPUs,\n"
    "    a LimitRange and the checkpoint, model and data PVCs.\n"
    "  - for the word `server`: what installs lathe into a cluster: the\n"
    "    CustomResourceDefinitions of LoRATrainingJob and LoRAExperiment\n"
    "    (groups training.example.com and lathe.dev; schemas generated from\n"
    "    the spec parser's tables), the Namespace, ServiceAccount lathe,\n"
    "    least-privilege RBAC (a ClusterRole, a Role for the leader-election\n"
    "    Lease), ConfigMap lathe-config with the ServerConfig (executor k8s,\n"
    "    in-cluster credentials, listen 0.0.0.0:8740, the --config settings\n"
    "    and their Cluster file), a Deployment of two replicas with /readyz\n"
    "    and /healthz probes, and a Service on port 8740. (A file named\n"
    "    server is ./server.)\n"
    "  - for the word `serve`: what serves an adapter behind an OpenAI-\n"
    "    compatible API, with `lathe serve` or vLLM: a ClusterIP Service, a\n"
    "    Deployment (startup probe on /health while the model loads,\n"
    "    liveness /health after 60 s every 30 s, readiness after 30 s every\n"
    "    10 s on /ready, vLLM's on /health; the model and adapters PVCs\n"
    "    read-only), an autoscaling/v2 HorizontalPodAutoscaler (CPU and a\n"
    "    requests-per-second Pods metric) and a PodDisruptionBudget when more\n"
    "    than one pod runs. FILE is a job (its final adapter, on the PVC and\n"
    "    in the folder its training pods wrote) or an experiment: the job\n"
    "    with the lowest eval loss (else the lowest final training loss) of\n"
    "    its results, from --results or the server; why is printed as YAML\n"
    "    comments and on stderr. Without FILE: --name, --model-path, --adapter.\n"
    "    (A file named serve is ./serve.)\n"
    "\n"
    "  - for the word `grafana`: a Grafana dashboard (JSON, for Import\n"
    "    dashboard) over `lathe server`'s /metrics: GPUs under DCGM exporter's\n"
    "    names, jobs, the queue, teams and budgets (docs/server.md, Monitoring).\n"
    "    --datasource names the Prometheus data source's uid (default: picked at\n"
    "    import); --refresh (30s).\n"
    "  - for the word `alerts`: Prometheus alert rules: a team at 80 % and 100 %\n"
    "    of its budget, a running job with no progress for --no-progress (30m),\n"
    "    an allocated GPU under --idle-below percent (5) for --idle (15m), a\n"
    "    team's longest queue wait over --queue-wait (2h), a job's GPU memory\n"
    "    10 % over its plan. Check them with `promtool check rules`.\n"
    "\n"
    "Pipe it to `kubectl apply -f -` (a Cluster's setup) or `kubectl\n"
    "create --dry-run=server -f -` to check it against a cluster.\n"
    "\n"
    "options:\n"
    "  --target k8s          what to render for (Kubernetes, the default and the\n"
    "                        only target)\n"
    "  -o, --output FORMAT   yaml (default; documents separated by ---) or json\n"
    "                        (one v1 List with the objects as items)\n"
    "  --config FILE         a ServerConfig whose `kubernetes:` section gives the\n"
    "                        image, namespaces, labels, mounts, PVCs and ports\n"
    "                        (default: the built-in settings, docs/kubernetes.md)\n"
    "  --attempt N           the attempt to render (default 1): names the Job\n"
    "                        lathe-<job>-<N>\n"
    "  --cluster FILE        plan against a Cluster file's GPU types (as `lathe\n"
    "                        plan --cluster`); jobs that name no priority class\n"
    "                        get the cluster's default one\n"
    "  --namespace NS        (server) lathe's namespace (default lathe-system)\n"
    "  --image IMAGE         (server) the server's image (default: the settings'\n"
    "                        kubernetes.image, lathe:latest); the trainers' too\n"
    "                        when the settings leave theirs at the default\n"
    "\n"
    "serve options (docs/kubernetes.md, \"Serving an adapter\"):\n"
    "  --runtime lathe|vllm  `lathe serve` (default) or `vllm serve` (--enable-lora\n"
    "                        --lora-modules NAME=PATH ..., port 8000)\n"
    "  --results FILE        an experiment's jobs as the API's JSON (GET\n"
    "                        /v1/experiments/NAME); default: ask the server\n"
    "  --server ADDR, --token TOKEN, --team TEAM\n"
    "                        the server to ask (default: LATHE_SERVER, the config\n"
    "                        file, then " CLIENT_DEFAULT_SERVER ")\n"
    "  --name NAME           the objects' name (default: the job's or experiment's)\n"
    "  --namespace NS        (default: the team's, as its training Jobs')\n"
    "  --image IMAGE         (default: the settings' image; vLLM " K8S_VLLM_IMAGE ")\n"
    "  --model-path PATH     the base model in the pod (default: the job's baseModel.path;\n"
    "                        vLLM also takes a Hugging Face name)\n"
    "  --model-pvc PVC       (default: the settings' modelPVC, at modelMount)\n"
    "  --adapter NAME=PATH   one more adapter (repeatable); PATH in the pod\n"
    "  --adapters-pvc PVC    (default: the job's checkpoint PVC, at checkpointMount)\n"
    "  --replicas N          exactly N pods, no autoscaler\n"
    "  --min-replicas N, --max-replicas N   the autoscaler's range (1, 4)\n"
    "  --cpu-target PCT      average CPU utilisation to keep (70)\n"
    "  --rps-target N        requests per second per pod (10), the Pods metric\n"
    "  --rps-metric NAME     (default " K8S_SERVE_RPS_METRIC_LATHE ",\n"
    "                        vLLM " K8S_SERVE_RPS_METRIC_VLLM ")\n"
    "  --gpus N              GPUs per pod (lathe 0, vLLM 1; vLLM's tensor parallel)\n"
    "  --cpu CORES, --memory SIZE   per pod (4; weights x 1.25 + 2Gi, else 16Gi)\n"
    "  --port N              (default 8000)\n"
    "  --api-key-secret NAME[:KEY]  the API key from a Secret's KEY (api-key),\n"
    "                        through the environment, never written in the objects\n"
    "  --model-size SIZE     the weights' size for the startup budget (default: from\n"
    "                        the plan, parameters x 2 bytes)\n"
    "  --startup-timeout D   how long loading may take (default: from the size, 900s)\n"
    "  --max-lora-rank R, --max-adapters N, --max-batch N, --threads N\n"
    "                        the runtime's own limits\n"
    "\n"
    "exit: 0 rendered, 1 usage, 2 invalid file (serve: or no job to serve), 3 a job\n"
    "fits no GPU, 4 unreadable file, 5 server unreachable\n"
    "\n"
    "examples:\n"
    "  lathe render examples/jobs/qwen2-7b-lora.yaml --target k8s\n"
    "  lathe render examples/jobs/sweep-rank-lr.yaml -o json --config server.yaml\n"
    "  lathe render examples/demo/cluster.yaml | kubectl apply -f -\n"
    "  lathe render server --target k8s --config server.yaml | kubectl apply -f -\n"
    "  lathe render serve examples/jobs/qwen2-7b-lora.yaml --target k8s\n"
    "  lathe render serve examples/jobs/sweep-rank-lr.yaml --runtime vllm --gpus 1\n"
    "  lathe render serve --name chat --model-path /models/llama-3-8b \\\n"
    "      --adapter chat=/checkpoints/chat-r16/final --api-key-secret chat-key\n";

/* The options of `lathe render serve`; 0 / NULL = not given. */
typedef struct serve_args {
    const char *file; /* a job or experiment file; NULL = only the options */
    const char *name, *model_pvc, *model_path, *adapters_pvc, *rps_metric, *results;
    const char *api_key_secret; /* NAME[:KEY] as given */
    char *api_key_key;          /* KEY, owned; NULL = the default */
    k8s_serve_runtime runtime;
    k8s_serve_adapter *adapters; /* --adapter NAME=PATH, owned */
    size_t n_adapters;
    int replicas, min_replicas, max_replicas, cpu_target, gpus, port;
    int max_lora_rank, max_adapters, max_batch, threads;
    bool gpus_given, autoscale_given;
    double rps_target, cpu, memory, model_size, startup;
    client_flags fl; /* --server, --token, --team */
} serve_args;

typedef struct render_args {
    const char *file, *config, *cluster, *namespace_, *image;
    bool json, json_given;
    int attempt;
    bool slurm; /* --target slurm */
    bool serve; /* the word `serve` */
    serve_args sv;
} render_args;

static void render_args_free(render_args *a)
{
    for (size_t i = 0; i < a->sv.n_adapters; i++) {
        free((char *)a->sv.adapters[i].name);
        free((char *)a->sv.adapters[i].path);
    }
    free(a->sv.adapters);
    free(a->sv.api_key_key);
}

/* A DNS-1123 label, as a Namespace's name must be. */
static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-') return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* A DNS-1035 label, as a Service's name must be: a DNS-1123 label that
 * starts with a letter. */
static bool dns1035_label(const char *s) { return dns_label(s) && s[0] >= 'a' && s[0] <= 'z'; }

/* An adapter's name as clients send it in "model". */
static bool adapter_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 128) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* A path in the pod: absolute, and without '$' (Kubernetes would expand
 * $(NAME) in the container's command). */
static bool pod_path_ok(const char *s) { return s[0] == '/' && !strchr(s, '$'); }

/* A whole number in [lo, hi] from optarg, or a usage error. */
static int int_arg(const char *opt, const char *v, int lo, int hi, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || end == v || x < lo || x > hi)
        return cli_usage_error("render", "%s takes a whole number from %d to %d, not '%s'", opt,
                               lo, hi, v);
    *out = (int)x;
    return LT_EXIT_OK;
}

/* A number above 0 from optarg, or a usage error. */
static int num_arg(const char *opt, const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !(x > 0) || x > 1e9)
        return cli_usage_error("render", "%s takes a number above 0, not '%s'", opt, v);
    *out = x;
    return LT_EXIT_OK;
}

/* --adapter NAME=PATH */
static int adapter_arg(serve_args *sv, const char *v)
{
    const char *eq = strchr(v, '=');
    if (!eq || !adapter_name_ok(v, (size_t)(eq - v)) || !pod_path_ok(eq + 1))
        return cli_usage_error("render", "--adapter takes NAME=PATH: a name of letters, digits, "
                                         "'.', '_' and '-', and the adapter's absolute folder in "
                                         "the pod without '$', not '%s'", v);
    for (size_t i = 0; i < sv->n_adapters; i++)
        if (strlen(sv->adapters[i].name) == (size_t)(eq - v) &&
            strncmp(sv->adapters[i].name, v, (size_t)(eq - v)) == 0)
            return cli_usage_error("render", "--adapter %.*s is given twice", (int)(eq - v), v);
    sv->adapters = xrealloc(sv->adapters, (sv->n_adapters + 1) * sizeof *sv->adapters);
    sv->adapters[sv->n_adapters++] =
        (k8s_serve_adapter){.name = xstrndup(v, (size_t)(eq - v)), .path = xstrdup(eq + 1)};
    return LT_EXIT_OK;
}

/* Long options of `render serve` that have no letter. */
enum {
    OPT_NAME = 256, OPT_RUNTIME, OPT_MODEL_PVC, OPT_MODEL_PATH, OPT_ADAPTER, OPT_ADAPTERS_PVC,
    OPT_REPLICAS, OPT_MIN, OPT_MAX, OPT_CPU_TARGET, OPT_RPS_TARGET, OPT_RPS_METRIC, OPT_GPUS,
    OPT_PORT, OPT_API_KEY_SECRET, OPT_RESULTS, OPT_SERVER, OPT_TOKEN, OPT_TEAM, OPT_CPU,
    OPT_MEMORY, OPT_MODEL_SIZE, OPT_STARTUP, OPT_MAX_LORA_RANK, OPT_MAX_ADAPTERS, OPT_MAX_BATCH,
    OPT_THREADS
};

/* One option of `render serve` into sv; LT_EXIT_USAGE when its value is wrong. */
static int serve_option(serve_args *sv, int ch, const char *v)
{
    switch (ch) {
    case OPT_NAME:
        if (!dns1035_label(v))
            return cli_usage_error("render",
                                   "--name takes a DNS-1035 label (a lowercase letter, "
                                   "then letters, digits and '-', at most 63), not '%s'",
                                   v);
        sv->name = v;
        return LT_EXIT_OK;
    case OPT_RUNTIME:
        if (strcmp(v, "lathe") == 0) sv->runtime = K8S_SERVE_LATHE;
        else if (strcmp(v, "vllm") == 0) sv->runtime = K8S_SERVE_VLLM;
        else return cli_usage_error("render", "--runtime takes lathe or vllm, not '%s'", v);
        return LT_EXIT_OK;
    case OPT_MODEL_PVC:
    case OPT_ADAPTERS_PVC:
        if (!dns_label(v))
            return cli_usage_error("render", "%s takes a PVC's name (a DNS-1123 label), not '%s'",
                                   ch == OPT_MODEL_PVC ? "--model-pvc" : "--adapters-pvc", v);
        *(ch == OPT_MODEL_PVC ? &sv->model_pvc : &sv->adapters_pvc) = v;
        return LT_EXIT_OK;
    case OPT_MODEL_PATH:
        /* vLLM also takes a Hugging Face name, found in HF_HOME */
        if (!*v || strchr(v, '$'))
            return cli_usage_error("render", "--model-path takes the model's folder in the pod "
                                             "(without '$'), not '%s'", v);
        sv->model_path = v;
        return LT_EXIT_OK;
    case OPT_ADAPTER: return adapter_arg(sv, v);
    case OPT_REPLICAS: return int_arg("--replicas", v, 1, 1000, &sv->replicas);
    case OPT_MIN:
        sv->autoscale_given = true;
        return int_arg("--min-replicas", v, 1, 1000, &sv->min_replicas);
    case OPT_MAX:
        sv->autoscale_given = true;
        return int_arg("--max-replicas", v, 1, 1000, &sv->max_replicas);
    case OPT_CPU_TARGET:
        sv->autoscale_given = true;
        return int_arg("--cpu-target", v, 1, 100, &sv->cpu_target);
    case OPT_RPS_TARGET:
        sv->autoscale_given = true;
        return num_arg("--rps-target", v, &sv->rps_target);
    case OPT_RPS_METRIC:
        sv->autoscale_given = true;
        if (!adapter_name_ok(v, strlen(v)))
            return cli_usage_error("render", "--rps-metric takes a metric's name, not '%s'", v);
        sv->rps_metric = v;
        return LT_EXIT_OK;
    case OPT_GPUS: sv->gpus_given = true; return int_arg("--gpus", v, 0, 64, &sv->gpus);
    case OPT_PORT: return int_arg("--port", v, 1, 65535, &sv->port);
    case OPT_API_KEY_SECRET: {
        const char *colon = strchr(v, ':');
        size_t n = colon ? (size_t)(colon - v) : strlen(v);
        char *name = xstrndup(v, n);
        bool ok = dns_label(name) && (!colon || adapter_name_ok(colon + 1, strlen(colon + 1)));
        free(name);
        if (!ok)
            return cli_usage_error("render", "--api-key-secret takes a Secret's name, then "
                                             "optionally ':' and its key, not '%s'", v);
        sv->api_key_secret = v;
        free(sv->api_key_key);
        sv->api_key_key = colon ? xstrdup(colon + 1) : NULL;
        return LT_EXIT_OK;
    }
    case OPT_RESULTS: sv->results = v; return LT_EXIT_OK;
    case OPT_SERVER: sv->fl.server = v; return LT_EXIT_OK;
    case OPT_TOKEN: sv->fl.token = v; return LT_EXIT_OK;
    case OPT_TEAM: sv->fl.team = v; return LT_EXIT_OK;
    case OPT_CPU: return num_arg("--cpu", v, &sv->cpu);
    case OPT_MEMORY:
    case OPT_MODEL_SIZE: {
        double b;
        if (!units_parse_bytes(v, &b) || !(b > 0))
            return cli_usage_error("render", "%s takes a size (16Gi, 15GB), not '%s'",
                                   ch == OPT_MEMORY ? "--memory" : "--model-size", v);
        *(ch == OPT_MEMORY ? &sv->memory : &sv->model_size) = b;
        return LT_EXIT_OK;
    }
    case OPT_STARTUP:
        if (!units_parse_duration(v, &sv->startup))
            return cli_usage_error("render", "--startup-timeout takes a duration (10m, 900s), "
                                             "not '%s'", v);
        return LT_EXIT_OK;
    case OPT_MAX_LORA_RANK: return int_arg("--max-lora-rank", v, 1, 1024, &sv->max_lora_rank);
    case OPT_MAX_ADAPTERS: return int_arg("--max-adapters", v, 1, 1024, &sv->max_adapters);
    case OPT_MAX_BATCH: return int_arg("--max-batch", v, 1, 65536, &sv->max_batch);
    case OPT_THREADS: return int_arg("--threads", v, 1, 1024, &sv->threads);
    default: return cli_usage_error("render", "unknown option");
    }
}

/* What `render serve` may not be given together; LT_EXIT_USAGE when so. */
static int serve_check(const render_args *a)
{
    const serve_args *sv = &a->sv;
    if (a->attempt != 1) return cli_usage_error("render", "--attempt is for jobs' attempts, not "
                                                          "for `lathe render serve`");
    if (sv->replicas && sv->autoscale_given)
        return cli_usage_error("render", "--replicas fixes the pods' count; --min-replicas, "
                                         "--max-replicas, --cpu-target, --rps-target and "
                                         "--rps-metric are for the autoscaler it leaves out");
    if (sv->min_replicas && sv->max_replicas && sv->min_replicas > sv->max_replicas)
        return cli_usage_error("render", "--min-replicas %d is above --max-replicas %d",
                               sv->min_replicas, sv->max_replicas);
    if (sv->results && !sv->file)
        return cli_usage_error("render", "--results needs the experiment's file: it says where "
                                         "each job left its adapter");
    if (!sv->file && (!sv->model_path || sv->n_adapters == 0 || !sv->name))
        return cli_usage_error("render", "give a job or experiment file, or --name, --model-path "
                                         "and --adapter NAME=PATH");
    if (sv->runtime == K8S_SERVE_LATHE && sv->model_path && sv->model_path[0] != '/')
        return cli_usage_error("render", "lathe serve --model takes a folder: --model-path must "
                                         "be absolute, not '%s'", sv->model_path);
    return LT_EXIT_OK;
}

/* The command line into a; LT_EXIT_USAGE (with a message) when it is wrong. */
static int parse_args(int argc, char **argv, render_args *a)
{
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'}, {"target", required_argument, NULL, 't'},
        {"config", required_argument, NULL, 'C'}, {"attempt", required_argument, NULL, 'a'},
        {"cluster", required_argument, NULL, 'c'}, {"namespace", required_argument, NULL, 'n'},
        {"image", required_argument, NULL, 'i'},
        {"name", required_argument, NULL, OPT_NAME},
        {"runtime", required_argument, NULL, OPT_RUNTIME},
        {"model-pvc", required_argument, NULL, OPT_MODEL_PVC},
        {"model-path", required_argument, NULL, OPT_MODEL_PATH},
        {"adapter", required_argument, NULL, OPT_ADAPTER},
        {"adapters-pvc", required_argument, NULL, OPT_ADAPTERS_PVC},
        {"replicas", required_argument, NULL, OPT_REPLICAS},
        {"min-replicas", required_argument, NULL, OPT_MIN},
        {"max-replicas", required_argument, NULL, OPT_MAX},
        {"cpu-target", required_argument, NULL, OPT_CPU_TARGET},
        {"rps-target", required_argument, NULL, OPT_RPS_TARGET},
        {"rps-metric", required_argument, NULL, OPT_RPS_METRIC},
        {"gpus", required_argument, NULL, OPT_GPUS},
        {"port", required_argument, NULL, OPT_PORT},
        {"api-key-secret", required_argument, NULL, OPT_API_KEY_SECRET},
        {"results", required_argument, NULL, OPT_RESULTS},
        {"server", required_argument, NULL, OPT_SERVER},
        {"token", required_argument, NULL, OPT_TOKEN},
        {"team", required_argument, NULL, OPT_TEAM},
        {"cpu", required_argument, NULL, OPT_CPU},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"model-size", required_argument, NULL, OPT_MODEL_SIZE},
        {"startup-timeout", required_argument, NULL, OPT_STARTUP},
        {"max-lora-rank", required_argument, NULL, OPT_MAX_LORA_RANK},
        {"max-adapters", required_argument, NULL, OPT_MAX_ADAPTERS},
        {"max-batch", required_argument, NULL, OPT_MAX_BATCH},
        {"threads", required_argument, NULL, OPT_THREADS},
        {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof *a);
    a->attempt = 1;
    optind = 1;
    int ch;
    bool serve_only = false; /* an option only `render serve` takes was given */
    while ((ch = getopt_long(argc, argv, "o:", longs, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'o':
            a->json_given = true;
            if (strcmp(optarg, "yaml") == 0) a->json = false;
            else if (strcmp(optarg, "json") == 0) a->json = true;
            else return cli_usage_error("render", "-o takes yaml or json, not '%s'", optarg);
            break;
        case 't':
            if (strcmp(optarg, "slurm") == 0) a->slurm = true;
            else if (strcmp(optarg, "k8s") != 0 && strcmp(optarg, "kubernetes") != 0)
                return cli_usage_error("render", "--target takes k8s or slurm, not '%s'", optarg);
            else a->slurm = false;
            break;
        case 'C': a->config = optarg; break;
        case 'c': a->cluster = optarg; break;
        case 'n': a->namespace_ = optarg; break;
        case 'i': a->image = optarg; break;
        case 'a':
            a->attempt = (int)strtol(optarg, &end, 10);
            if (*end || end == optarg || a->attempt < 1 || a->attempt > 1000000)
                return cli_usage_error("render", "--attempt takes a whole number from 1, not '%s'",
                                       optarg);
            break;
        default:
            if (ch < OPT_NAME) return cli_usage_error("render", "unknown option");
            serve_only = true;
            int rc = serve_option(&a->sv, ch, optarg);
            if (rc != LT_EXIT_OK) return rc;
        }
    }
    const char *file = optind < argc ? argv[optind] : NULL;
    a->serve = file && strcmp(file, "serve") == 0;
    if (a->serve) {
        if (optind < argc - 2)
            return cli_usage_error("render", "`lathe render serve` takes one file");
        a->file = file;
        a->sv.file = optind + 1 < argc ? argv[optind + 1] : NULL;
        if (!a->sv.gpus_given) a->sv.gpus = a->sv.runtime == K8S_SERVE_VLLM ? 1 : 0;
        int rc = serve_check(a);
        if (rc != LT_EXIT_OK) return rc;
    } else {
        if (optind < argc - 1) return cli_usage_error("render", "give exactly one file");
        if (!file) return cli_usage_error("render", "give a job, experiment or cluster file");
        a->file = file;
        if (serve_only)
            return cli_usage_error("render", "that option is for `lathe render serve`");
    }
    bool server = strcmp(file, "server") == 0;
    if (!server && !a->serve && (a->namespace_ || a->image))
        return cli_usage_error("render", "--namespace and --image are for `lathe render server` "
                                         "and `lathe render serve`");
    if (server && (a->cluster || a->attempt != 1))
        return cli_usage_error("render", "--cluster and --attempt are for jobs; `lathe render "
                                         "server` takes the Cluster file of --config");
    if (a->namespace_ && !dns_label(a->namespace_))
        return cli_usage_error("render", "--namespace takes a DNS-1123 label (lowercase letters, "
                                         "digits and '-', at most 63), not '%s'", a->namespace_);
    if (a->image && !*a->image) return cli_usage_error("render", "--image is empty");
    return LT_EXIT_OK;
}

/* Exit code of a load: 4 when unreadable, 2 when invalid. */
static int load_rc(bool io_error, size_t errors)
{
    return io_error ? LT_EXIT_IO : errors ? LT_EXIT_INVALID : LT_EXIT_OK;
}

/* What render works with: the settings, and the Cluster of --cluster. */
typedef struct render_ctx {
    const render_args *a;
    spec_server *server;      /* --config, or the defaults */
    const spec_k8s *k;        /* server->k8s */
    spec_file cluster_file;   /* --cluster */
    const spec_cluster *cluster;
    plan_catalog catalog;
    bool has_catalog;
} render_ctx;

/* Loads --config (or the default settings) and --cluster with its GPU
 * catalogue; problems are printed with file:line:col. Returns an exit code. */
static int ctx_open(render_ctx *c, const render_args *a)
{
    memset(c, 0, sizeof *c);
    c->a = a;
    diag_list d;
    diag_list_init(&d);
    int rc = LT_EXIT_OK;
    if (a->config) {
        bool io = false;
        spec_server_load_file(a->config, &c->server, &d, &io);
        rc = load_rc(io, d.errors);
    } else {
        c->server = spec_server_new_default();
    }
    if (rc == LT_EXIT_OK && a->cluster) {
        spec_load_file(a->cluster, &c->cluster_file, &d);
        rc = load_rc(c->cluster_file.io_error, d.errors);
        c->cluster = rc == LT_EXIT_OK ? spec_file_cluster(&c->cluster_file) : NULL;
        if (rc == LT_EXIT_OK && !c->cluster) {
            diag_add(&d, DIAG_ERROR, a->cluster, 1, 1, NULL, "the file holds no Cluster");
            rc = LT_EXIT_INVALID;
        }
        if (c->cluster) {
            c->has_catalog = true;
            if (!plan_catalog_from_cluster(c->cluster, &c->catalog, &d)) rc = LT_EXIT_INVALID;
        }
    }
    diag_print_all(&d, stderr);
    diag_list_free(&d);
    if (c->server) c->k = &c->server->k8s;
    return rc;
}

/* Frees what ctx_open loaded. */
static void ctx_close(render_ctx *c)
{
    if (c->a->cluster) spec_file_free(&c->cluster_file);
    if (c->has_catalog) plan_catalog_free(&c->catalog);
    spec_server_free(c->server);
}

/* ---- one job: its plan, the server's request, the executor's objects ---- */

/* The request the server makes to prepare a queued job's next attempt
 * for a cluster engine (exec_job_req_init, as lib/server/ctl_run.c calls
 * it): the resolved spec, the plan's shape (nodes, GPUs per node), no
 * placement yet (the GPU type, nodes and rack come with the admission
 * patch), paths as the spec writes them. */
static void build_request(const render_ctx *c, const spec_job *job, const spec_job *resolved,
                          const plan_result *plan, exec_job_req *r)
{
    const plan_config *cfg = plan->found ? &plan->chosen : NULL;
    exec_job_desc d = {.spec = resolved, .team = job->team, .name = job->name,
                       .experiment = job->experiment, .priority_class = job->priority_class,
                       .attempt = c->a->attempt, .program = c->k->lathe_path,
                       .nnodes = cfg && cfg->nodes > 0 ? cfg->nodes : 1,
                       .gpus_per_node = cfg ? (cfg->gpus_per_node > 0 ? cfg->gpus_per_node : cfg->gpus) : 0};
    if (!d.priority_class && c->cluster) { /* as the server: the cluster's default class */
        const spec_priority_class *pc = spec_cluster_default_priority(c->cluster);
        d.priority_class = pc ? pc->name : NULL;
    }
    exec_job_req_init(r, &d);
}

/* Plans job as `lathe plan` does (the defaults, the file's catalogue),
 * printing the planner's diagnostics; returns plan_job's exit code and
 * leaves r to plan_result_free. */
static int plan_one(const render_ctx *c, const spec_job *job, plan_result *r)
{
    plan_options opt;
    plan_options_defaults(&opt);
    if (c->has_catalog) opt.catalog = &c->catalog;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_job(job, &opt, r, &d);
    diag_print_all(&d, stderr);
    diag_list_free(&d);
    return rc;
}

/* The objects the cluster engine makes of the job resolved by plan
 * (build_request, exec_k8s_objects); a new reference. */
static json_t *job_objects(const render_ctx *c, const spec_job *job, const spec_job *resolved,
                           const plan_result *plan)
{
    exec_job_req req;
    build_request(c, job, resolved, plan, &req);
    json_t *objs = exec_k8s_objects(&req.q, c->k, true);
    exec_job_req_free(&req);
    return objs;
}

/* --target slurm: what the Slurm executor submits for the job (the sbatch
 * argv, the batch script, the step file; exec_slurm_render), as one JSON
 * object appended to items. The job's folder is the server's dataDir (of
 * --config) + /jobs/TEAM/NAME here; the server names it by the job's id. */
static void slurm_item(const render_ctx *c, const spec_job *job, const spec_job *resolved,
                       const plan_result *plan, json_t *items, exec_slurm_submit *keep)
{
    exec_job_req req;
    build_request(c, job, resolved, plan, &req);
    const spec_slurm *sl = &c->server->slurm;
    const char *team = job->team ? job->team : "default";
    char *dir = xasprintf("%s/jobs/%s/%s", c->server->data_dir ? c->server->data_dir : "/var/lib/lathe",
                          team, job->name);
    char *ckpt = xasprintf("%s/checkpoints", dir);
    char *spec_path = xasprintf("%s/spec-%d.yaml", dir, c->a->attempt);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    const char *lathe = sl->lathe_path ? sl->lathe_path : n > 0 ? self : "/usr/local/bin/lathe";
    if (req.q.cluster.builtin) { /* `LATHE train SPEC` with the server's spec file */
        free(req.argv[0]);
        req.argv[0] = xstrdup(lathe);
        free(req.argv[2]);
        req.argv[2] = xstrdup(spec_path);
        req.q.argv = req.argv;
    }
    req.q.job_dir = dir;
    req.q.contract.checkpoint_dir = ckpt;
    req.q.contract.spec_path = spec_path;
    req.q.cluster.team = team;
    req.q.attempt = c->a->attempt > 0 ? c->a->attempt : 1;
    exec_slurm_submit sub;
    char err[300];
    if (exec_slurm_render(&req.q, sl, lathe, &sub, err, sizeof err)) {
        json_t *argv = json_array();
        for (size_t i = 0; i < sub.argc; i++) json_array_append_new(argv, json_string(sub.argv[i]));
        json_t *step = json_loads(sub.step_json, 0, NULL);
        json_array_append_new(items, json_pack("{s:s, s:o, s:s, s:s, s:o, s:s}", "job", job->name,
                                               "sbatch", argv, "script_path", sub.script_path,
                                               "script", sub.script, "step", step ? step : json_null(),
                                               "step_path", sub.step_path));
        if (keep) *keep = sub; /* a task of the experiment's job array */
        else exec_slurm_submit_free(&sub);
    } else {
        fprintf(stderr, "lathe render: job %s: %s\n", job->name, err);
    }
    free(dir);
    free(ckpt);
    free(spec_path);
    exec_job_req_free(&req);
}

/* --target slurm of an experiment when Slurm decides and arrayMax is set
 * (docs/slurm.md, "Experiments as job arrays"): the one sbatch of its job
 * array, whose tasks are the jobs above (when they have the same shape). */
static void slurm_array_item(const render_ctx *c, const spec_experiment *e,
                             const exec_slurm_submit *subs, json_t *items)
{
    const spec_slurm *sl = &c->server->slurm;
    if (e->n_jobs < 2 || sl->array_max <= 0 || !sl->decide || strcmp(sl->decide, "slurm") != 0) return;
    for (size_t k = 0; k < e->n_jobs; k++)
        if (!subs[k].argv || !exec_slurm_array_compatible(&subs[0], &subs[k])) return;
    const char *team = e->jobs[0]->team ? e->jobs[0]->team : "default";
    char *dir = xasprintf("%.*s/slurm-array", (int)(strrchr(subs[0].step_path, '/') - subs[0].step_path),
                          subs[0].step_path);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    const char *lathe = sl->lathe_path ? sl->lathe_path : n > 0 ? self : "/usr/local/bin/lathe";
    exec_slurm_array a;
    exec_slurm_array_render(subs, e->n_jobs, e->max_concurrent > 0 ? e->max_concurrent : sl->array_max,
                       team, e->name, dir, lathe, &a);
    json_t *argv = json_array();
    for (size_t i = 0; i < a.argc; i++) json_array_append_new(argv, json_string(a.argv[i]));
    json_t *map = json_loads(a.map_json, 0, NULL);
    json_array_append_new(items, json_pack("{s:s, s:s, s:o, s:s, s:s, s:o, s:s}", "job", a.name,
                                           "array", e->name, "sbatch", argv, "script_path",
                                           a.argv[a.argc - 2], "script", a.script, "step",
                                           map ? map : json_null(), "step_path", a.map_path));
    exec_slurm_array_free(&a);
    free(dir);
}

/* Plans one job and appends its objects to items; returns its exit code. */
static int render_job(const render_ctx *c, const spec_job *job, json_t *items,
                      exec_slurm_submit *keep)
{
    plan_result r;
    int rc = plan_one(c, job, &r);
    if (rc == LT_EXIT_NOFIT)
        fprintf(stderr, "lathe render: %s: job %s fits no GPU (`lathe plan %s%s%s` says why)\n",
                job->file ? job->file : c->a->file, job->name, c->a->file,
                c->a->cluster ? " --cluster " : "", c->a->cluster ? c->a->cluster : "");
    if (rc == LT_EXIT_OK) {
        spec_job *resolved = plan_resolved_job(&r, job);
        if (c->a->slurm) {
            slurm_item(c, job, resolved, &r, items, keep);
        } else {
            json_t *objs = job_objects(c, job, resolved, &r);
            json_array_extend(items, objs);
            json_decref(objs);
        }
        spec_job_free(resolved);
    }
    plan_result_free(&r);
    return rc;
}

/* Every document of the file; returns the worst exit code. */
static int render_file(const render_ctx *c, const spec_file *f, json_t *items)
{
    int worst = LT_EXIT_OK;
    for (size_t i = 0; i < f->n_docs; i++) {
        const spec_doc *doc = &f->docs[i];
        int rc = LT_EXIT_OK;
        if (doc->kind == SPEC_KIND_JOB) {
            rc = render_job(c, doc->job, items, NULL);
        } else if (doc->kind == SPEC_KIND_EXPERIMENT) {
            const spec_experiment *e = doc->experiment;
            exec_slurm_submit *subs = xcalloc(e->n_jobs + 1, sizeof *subs);
            for (size_t k = 0; k < e->n_jobs; k++) {
                int r = render_job(c, e->jobs[k], items, c->a->slurm ? &subs[k] : NULL);
                if (r > rc) rc = r;
            }
            if (c->a->slurm && rc == LT_EXIT_OK) slurm_array_item(c, e, subs, items);
            for (size_t k = 0; k < e->n_jobs; k++) exec_slurm_submit_free(&subs[k]);
            free(subs);
        } else if (c->a->slurm) {
            fprintf(stderr, "lathe render: %s: a Cluster has no Slurm rendering (--target slurm "
                            "takes jobs and experiments)\n", c->a->file);
            rc = LT_EXIT_USAGE;
        } else {
            json_t *objs = k8s_render_cluster(doc->cluster, c->k);
            json_array_extend(items, objs);
            json_decref(objs);
        }
        if (rc > worst) worst = rc;
    }
    return worst;
}

/* Prints the objects: YAML documents, or {apiVersion: v1, kind: List, items}. */
static void print_items(const json_t *items, bool as_json)
{
    if (as_json) {
        json_t *list = json_pack("{s:s, s:s, s:O}", "apiVersion", "v1", "kind", "List", "items",
                                 items);
        char *s = json_dumps(list, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        printf("%s\n", s);
        free(s);
        json_decref(list);
    } else {
        char *y = spec_json_to_yaml(items, true);
        fputs(y, stdout);
        free(y);
    }
}

/* ---- lathe render server ---- */

/* The text of the settings' Cluster file (relative to the config's
 * folder), checked to be a valid Cluster; *out NULL when it names none. */
static int read_cluster_file(const render_ctx *c, char **out)
{
    *out = NULL;
    const char *file = c->server->cluster.file;
    if (!file || !*file) return LT_EXIT_OK;
    char *path;
    if (file[0] == '/' || !c->a->config) {
        path = xstrdup(file);
    } else {
        char *dir = xstrdup(c->a->config);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        path = slash ? path_join(dir, file) : xstrdup(file);
        free(dir);
    }
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    spec_load_file(path, &f, &d);
    int rc = load_rc(f.io_error, d.errors);
    if (rc == LT_EXIT_OK && !spec_file_cluster(&f)) {
        diag_add(&d, DIAG_ERROR, path, 1, 1, "spec.cluster.file", "the file holds no Cluster");
        rc = LT_EXIT_INVALID;
    }
    diag_print_all(&d, stderr);
    diag_list_free(&d);
    spec_file_free(&f);
    if (rc == LT_EXIT_OK) {
        char err[512];
        size_t len;
        *out = file_read_all(path, SPEC_MAX_FILE_BYTES, &len, err, sizeof err);
        if (!*out) {
            fprintf(stderr, "lathe render: %s\n", err);
            rc = LT_EXIT_IO;
        }
    }
    free(path);
    return rc;
}

/* `lathe render server`: what installs lathe into a cluster. */
static int render_server(const render_ctx *c)
{
    char *cluster = NULL;
    int rc = read_cluster_file(c, &cluster);
    if (rc != LT_EXIT_OK) return rc;
    k8s_server_params p = {.settings = c->server, .namespace_ = c->a->namespace_,
                           .image = c->a->image, .cluster_yaml = cluster};
    json_t *items = k8s_render_server(&p);
    print_items(items, c->a->json);
    json_decref(items);
    free(cluster);
    return LT_EXIT_OK;
}

/* ---- lathe render serve ---- */

/* What a job or experiment file says about the adapter to serve. */
typedef struct serve_from {
    const spec_job *job;      /* the job whose adapter is served */
    const char *adapter_name; /* the experiment's name, else the job's */
    k8s_serve_source src;     /* where its Job leaves the adapter */
    double model_bytes;       /* the base model's weights in bf16; 0 = unknown */
    k8s_serve_choice choice;  /* an experiment's choice */
    bool chose;
} serve_from;

/* Where job's training pods leave its adapter: the job is planned and
 * turned into the executor's request as `lathe render FILE` does
 * (plan_one, job_objects), and the Job read back
 * (k8s_serve_source_of_job), so the serving pod mounts exactly what the
 * training pod wrote. A job that fits no GPU here still has its Job's
 * volumes (serving does not need the training's GPUs). */
static int job_source(const render_ctx *c, const spec_job *job, serve_from *f)
{
    plan_result r;
    int rc = plan_one(c, job, &r);
    if (rc == LT_EXIT_INVALID) {
        plan_result_free(&r);
        return rc;
    }
    f->model_bytes = r.params.total > 0 ? 2.0 * (double)r.params.total : 0;
    spec_job *resolved = r.found ? plan_resolved_job(&r, job) : spec_job_clone(job);
    json_t *objs = job_objects(c, job, resolved, &r);
    rc = LT_EXIT_INVALID;
    char err[512] = "the job renders no Job";
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        if (kind && strcmp(kind, "Job") == 0)
            rc =
                k8s_serve_source_of_job(o, &f->src, err, sizeof err) ? LT_EXIT_OK : LT_EXIT_INVALID;
    }
    if (rc != LT_EXIT_OK) fprintf(stderr, "lathe render: %s: %s\n", c->a->sv.file, err);
    if (rc == LT_EXIT_OK && job->trainer.kind == TRAINER_COMMAND)
        fprintf(stderr, "lathe render: job %s runs its own trainer: its adapter is taken to be in "
                        "%s, where lathe's trainer leaves it; when it writes elsewhere, name "
                        "the folder with --adapter, --model-path and --name instead of the "
                        "file\n", job->name, f->src.adapter_path);
    json_decref(objs);
    spec_job_free(resolved);
    plan_result_free(&r);
    return rc;
}

/* An experiment's jobs as the API gives them: --results FILE, else the
 * server's GET /v1/experiments/NAME (--server, --token, --team, or the
 * client's configuration, as `lathe describe` asks). */
static int experiment_results(const render_ctx *c, const spec_experiment *x, json_t **out)
{
    const serve_args *sv = &c->a->sv;
    *out = NULL;
    if (sv->results) {
        char err[512];
        size_t len;
        char *text = file_read_all(sv->results, 64u << 20, &len, err, sizeof err);
        if (!text) {
            fprintf(stderr, "lathe render: %s\n", err);
            return LT_EXIT_IO;
        }
        json_error_t je;
        *out = json_loadb(text, len, 0, &je);
        free(text);
        if (!*out) {
            fprintf(stderr, "lathe render: %s:%d:%d: not JSON: %s\n", sv->results, je.line,
                    je.column, je.text);
            return LT_EXIT_INVALID;
        }
        return LT_EXIT_OK;
    }
    client *cl;
    int rc = client_open(&sv->fl, "render", &cl);
    if (rc != LT_EXIT_OK) return rc;
    client_error e;
    client_error_init(&e);
    const char *team = sv->fl.team ? sv->fl.team : x->n_jobs ? x->jobs[0]->team : NULL;
    rc = client_experiment_get(cl, x->name, team, out, &e);
    if (rc != LT_EXIT_OK) {
        client_error_print(&e, "render", stderr);
        fprintf(stderr, "lathe render: the experiment's results come from the server "
                        "(--server) or a file of its JSON (--results FILE)\n");
    }
    client_error_free(&e);
    client_free(cl);
    return rc;
}

/* The experiment's job with the best eval loss (k8s_serve_choose), its
 * explanation on stderr. */
static int choose_job(const render_ctx *c, const spec_experiment *x, serve_from *f)
{
    json_t *res;
    int rc = experiment_results(c, x, &res);
    if (rc != LT_EXIT_OK) return rc;
    char err[512];
    size_t n;
    k8s_serve_candidate *cand = k8s_serve_candidates_json(res, &n, err, sizeof err);
    if (!cand) {
        fprintf(stderr, "lathe render: %s: %s\n",
                c->a->sv.results ? c->a->sv.results : "the server", err);
        json_decref(res);
        return LT_EXIT_INVALID;
    }
    bool ok = k8s_serve_choose(x->name, cand, n, &f->choice);
    f->chose = true;
    for (size_t i = 0; i < f->choice.n_lines; i++)
        fprintf(stderr, "lathe render: %s\n", f->choice.lines[i]);
    rc = ok ? LT_EXIT_OK : LT_EXIT_INVALID;
    if (ok) {
        const char *name = cand[f->choice.chosen].job;
        for (size_t k = 0; k < x->n_jobs && !f->job; k++)
            if (strcmp(x->jobs[k]->name, name) == 0) f->job = x->jobs[k];
        if (!f->job) {
            fprintf(stderr, "lathe render: job %s of the results is not one of %s's jobs (are "
                            "they the same experiment?)\n", name, c->a->sv.file);
            rc = LT_EXIT_INVALID;
        }
    }
    free(cand);
    json_decref(res);
    return rc;
}

/* The job (or the experiment's best job) of the file, and where its
 * adapter is. */
static int serve_source(const render_ctx *c, const spec_file *file, serve_from *f)
{
    const spec_doc *doc = NULL;
    for (size_t i = 0; i < file->n_docs; i++) {
        if (file->docs[i].kind == SPEC_KIND_CLUSTER) continue;
        if (doc) {
            fprintf(stderr, "lathe render: %s holds more than one job or experiment: `lathe "
                            "render serve` serves one\n", c->a->sv.file);
            return LT_EXIT_INVALID;
        }
        doc = &file->docs[i];
    }
    if (!doc) {
        fprintf(stderr, "lathe render: %s holds no LoRATrainingJob or LoRAExperiment\n",
                c->a->sv.file);
        return LT_EXIT_INVALID;
    }
    int rc;
    if (doc->kind == SPEC_KIND_JOB) {
        if (c->a->sv.results)
            return cli_usage_error("render", "--results is for an experiment; %s holds a job",
                                   c->a->sv.file);
        f->job = doc->job;
        f->adapter_name = doc->job->name;
    } else {
        f->adapter_name = doc->experiment->name;
        if ((rc = choose_job(c, doc->experiment, f)) != LT_EXIT_OK) return rc;
    }
    return job_source(c, f->job, f);
}

/* Prints the objects, with the choice's explanation as YAML comments on top. */
static void print_serve(const json_t *items, const serve_from *f, bool as_json)
{
    if (!as_json && f->chose) {
        for (size_t i = 0; i < f->choice.n_lines; i++) printf("# %s\n", f->choice.lines[i]);
    }
    print_items(items, as_json);
}

/* `lathe render serve`: what serves an adapter. */
static int render_serve(const render_ctx *c)
{
    const render_args *a = c->a;
    const serve_args *sv = &a->sv;
    serve_from f;
    memset(&f, 0, sizeof f);
    f.choice.chosen = -1;
    spec_file file;
    memset(&file, 0, sizeof file);
    int rc = LT_EXIT_OK;
    if (sv->file) {
        diag_list d;
        diag_list_init(&d);
        spec_load_file(sv->file, &file, &d);
        diag_print_all(&d, stderr);
        rc = load_rc(file.io_error, d.errors);
        diag_list_free(&d);
        if (rc == LT_EXIT_OK) rc = serve_source(c, &file, &f);
    }
    k8s_serve_adapter *ads = xcalloc(sv->n_adapters + 1, sizeof *ads);
    size_t n = 0;
    if (rc == LT_EXIT_OK && f.job)
        ads[n++] = (k8s_serve_adapter){.name = f.adapter_name, .path = f.src.adapter_path};
    for (size_t i = 0; rc == LT_EXIT_OK && i < sv->n_adapters; i++) {
        if (n > 0 && strcmp(ads[0].name, sv->adapters[i].name) == 0)
            rc = cli_usage_error("render", "--adapter %s: the file's adapter has that name",
                                 ads[0].name);
        ads[n++] = sv->adapters[i];
    }
    bool vllm = sv->runtime == K8S_SERVE_VLLM;
    const char *base_name = f.job ? f.job->base_model.name : NULL;
    const char *model = sv->model_path ? sv->model_path : f.src.model_path;
    if (!model && vllm) model = base_name; /* a Hugging Face name, from HF_HOME */
    const char *name = sv->name ? sv->name : f.adapter_name;
    if (rc == LT_EXIT_OK && !model)
        rc = cli_usage_error("render", "%s names its base model by name only: give --model-path "
                                       "(the model's folder in the pod)", sv->file);
    if (rc == LT_EXIT_OK && !dns1035_label(name))
        rc = cli_usage_error("render", "'%s' is no Service name (a DNS-1035 label): give --name",
                             name);
    if (rc == LT_EXIT_OK && model[0] != '/' && !vllm)
        rc = cli_usage_error("render", "lathe serve --model takes a folder, not '%s': give "
                                       "--model-path", model);
    if (rc == LT_EXIT_OK) {
        /* NAME of NAME:KEY */
        char *secret = sv->api_key_secret ? xstrndup(sv->api_key_secret,
                                                     strcspn(sv->api_key_secret, ":"))
                                          : NULL;
        k8s_serve_params p = {
            .name = name,
            .namespace_ = a->namespace_ ? a->namespace_ : f.src.namespace_,
            .runtime = sv->runtime,
            .image = a->image,
            .model_path = model,
            .served_model_name = base_name,
            .model_pvc = sv->model_pvc ? sv->model_pvc : f.src.model_pvc,
            .model_bytes = sv->model_size > 0 ? sv->model_size : f.model_bytes,
            .adapters = ads,
            .n_adapters = n,
            .adapters_pvc = sv->adapters_pvc ? sv->adapters_pvc : f.src.adapters_pvc,
            .max_lora_rank = sv->max_lora_rank ? sv->max_lora_rank : f.job ? f.job->lora.rank : 0,
            .max_adapters = sv->max_adapters,
            .max_batch = sv->max_batch,
            .threads = sv->threads,
            .replicas = sv->replicas,
            .min_replicas = sv->min_replicas,
            .max_replicas = sv->max_replicas,
            .cpu_target = sv->cpu_target,
            .rps_target = sv->rps_target,
            .rps_metric = sv->rps_metric,
            .gpus = sv->gpus,
            .cpu = sv->cpu,
            .memory = sv->memory,
            .port = sv->port,
            .api_key_secret = secret,
            .api_key_key = sv->api_key_key,
            .startup_seconds = sv->startup,
            .team = f.src.team,
            .job = f.src.job,
            .experiment = f.src.experiment,
            .selection = f.chose && f.choice.n_lines ? f.choice.lines[0] : NULL,
            .settings = c->k,
        };
        char err[512];
        json_t *items = k8s_render_serve(&p, err, sizeof err);
        if (items) {
            print_serve(items, &f, a->json);
            json_decref(items);
        } else {
            fprintf(stderr, "lathe render: %s\n", err);
            rc = LT_EXIT_INVALID;
        }
        free(secret);
    }
    free(ads);
    k8s_serve_choice_free(&f.choice);
    k8s_serve_source_free(&f.src);
    if (sv->file) spec_file_free(&file);
    return rc;
}

/* `lathe render`: settings, the file, its objects; an exit code. */
/* --target slurm's output: per job, the sbatch argv (one argument a line:
 * lathe runs it without a shell), the batch script and the step file; or
 * with -o json the array of items. */
static void print_slurm(json_t *items, bool as_json)
{
    if (as_json) {
        char *t = json_dumps(items, JSON_INDENT(2));
        printf("%s\n", t);
        free(t);
        return;
    }
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        const char *arr = json_string_value(json_object_get(it, "array"));
        if (arr)
            printf("# experiment %s as ONE job array (slurm.decide: slurm, arrayMax): its sbatch "
                   "instead of the jobs' own above; each task runs its job's step file\n", arr);
        printf("# job %s: the sbatch argv (one argument a line; lathe runs it without a shell)\n",
               json_string_value(json_object_get(it, "job")));
        size_t k;
        json_t *a;
        json_array_foreach(json_object_get(it, "sbatch"), k, a) printf("%s\n", json_string_value(a));
        printf("# the batch script, %s\n%s", json_string_value(json_object_get(it, "script_path")),
               json_string_value(json_object_get(it, "script")));
        char *step = json_dumps(json_object_get(it, "step"), JSON_INDENT(1));
        printf("# the %s, %s\n%s\n", arr ? "mapping file (task id -> step file)" : "step file",
               json_string_value(json_object_get(it, "step_path")), step);
        free(step);
    }
}

static int render_run(int argc, char **argv)
{
    if (argc > 1 && render_monitor_word(argv[1])) return render_monitor(argc, argv);
    render_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != LT_EXIT_OK) {
        render_args_free(&a);
        return rc;
    }
    if (a.slurm && (a.serve || strcmp(a.file, "server") == 0)) {
        render_args_free(&a);
        return cli_usage_error("render", "--target slurm renders jobs and experiments; `render "
                                         "server` and `render serve` take --target k8s");
    }
    render_ctx c;
    rc = ctx_open(&c, &a);
    if (rc != LT_EXIT_OK || a.serve || strcmp(a.file, "server") == 0) {
        if (rc == LT_EXIT_OK) rc = a.serve ? render_serve(&c) : render_server(&c);
        ctx_close(&c);
        render_args_free(&a);
        return rc;
    }
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    spec_load_file(a.file, &f, &d);
    diag_print_all(&d, stderr);
    rc = load_rc(f.io_error, d.errors);
    if (rc == LT_EXIT_OK && f.n_docs == 0) {
        fprintf(stderr, "lathe render: %s holds no LoRATrainingJob, LoRAExperiment or Cluster\n",
                a.file);
        rc = LT_EXIT_INVALID;
    }
    if (rc == LT_EXIT_OK) {
        json_t *items = json_array();
        rc = render_file(&c, &f, items);
        /* nothing half done: the objects only when every job rendered */
        if (rc == LT_EXIT_OK && a.slurm) print_slurm(items, a.json);
        else if (rc == LT_EXIT_OK) print_items(items, a.json);
        json_decref(items);
    }
    diag_list_free(&d);
    spec_file_free(&f);
    ctx_close(&c);
    render_args_free(&a);
    return rc;
}

const cli_command cli_cmd_render = {
    .name = "render",
    .summary = "the Kubernetes objects of a job's next attempt, a cluster's setup, lathe's install or serving",
    .help = render_help,
    .run = render_run,
};
