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
 * RBAC, ConfigMap, Deployment, Service). Output: YAML documents (default)
 * or a v1 List. */
#include "cli.h"

#include "base/base.h"
#include "exec/exec.h"
#include "k8s/k8s.h"
#include "plan/plan.h"
#include "spec/spec.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char render_help[] =
    "usage: lathe render FILE [--target k8s] [options]\n"
    "       lathe render server --target k8s [-o yaml|json] [--config SERVER.yaml]\n"
    "                           [--namespace NS] [--image IMAGE]\n"
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
    "exit: 0 rendered, 1 usage, 2 invalid file, 3 a job fits no GPU, 4 unreadable file\n"
    "\n"
    "examples:\n"
    "  lathe render examples/jobs/qwen2-7b-lora.yaml --target k8s\n"
    "  lathe render examples/jobs/sweep-rank-lr.yaml -o json --config server.yaml\n"
    "  lathe render examples/demo/cluster.yaml | kubectl apply -f -\n"
    "  lathe render server --target k8s --config server.yaml | kubectl apply -f -\n";

typedef struct render_args {
    const char *file, *config, *cluster, *namespace_, *image;
    bool json;
    int attempt;
} render_args;

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

/* The command line into a; LT_EXIT_USAGE (with a message) when it is wrong. */
static int parse_args(int argc, char **argv, render_args *a)
{
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'}, {"target", required_argument, NULL, 't'},
        {"config", required_argument, NULL, 'C'}, {"attempt", required_argument, NULL, 'a'},
        {"cluster", required_argument, NULL, 'c'}, {"namespace", required_argument, NULL, 'n'},
        {"image", required_argument, NULL, 'i'},   {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof *a);
    a->attempt = 1;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "o:", longs, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'o':
            if (strcmp(optarg, "yaml") == 0) a->json = false;
            else if (strcmp(optarg, "json") == 0) a->json = true;
            else return cli_usage_error("render", "-o takes yaml or json, not '%s'", optarg);
            break;
        case 't':
            if (strcmp(optarg, "k8s") != 0 && strcmp(optarg, "kubernetes") != 0)
                return cli_usage_error("render", "--target takes k8s, not '%s'", optarg);
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
        default: return cli_usage_error("render", "unknown option");
        }
    }
    if (optind < argc - 1) return cli_usage_error("render", "give exactly one file");
    const char *file = optind < argc ? argv[optind] : NULL;
    if (!file) return cli_usage_error("render", "give a job, experiment or cluster file");
    a->file = file;
    bool server = strcmp(file, "server") == 0;
    if (!server && (a->namespace_ || a->image))
        return cli_usage_error("render", "--namespace and --image are for `lathe render server`");
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

/* Plans one job and appends its objects to items; returns its exit code. */
static int render_job(const render_ctx *c, const spec_job *job, json_t *items)
{
    plan_options opt;
    plan_options_defaults(&opt);
    if (c->has_catalog) opt.catalog = &c->catalog;
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_job(job, &opt, &r, &d);
    diag_print_all(&d, stderr);
    if (rc == LT_EXIT_NOFIT)
        fprintf(stderr, "lathe render: %s: job %s fits no GPU (`lathe plan %s%s%s` says why)\n",
                job->file ? job->file : c->a->file, job->name, c->a->file,
                c->a->cluster ? " --cluster " : "", c->a->cluster ? c->a->cluster : "");
    if (rc == LT_EXIT_OK) {
        spec_job *resolved = plan_resolved_job(&r, job);
        exec_job_req req;
        build_request(c, job, resolved, &r, &req);
        json_t *objs = exec_k8s_objects(&req.q, c->k, true);
        json_array_extend(items, objs);
        json_decref(objs);
        exec_job_req_free(&req);
        spec_job_free(resolved);
    }
    plan_result_free(&r);
    diag_list_free(&d);
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
            rc = render_job(c, doc->job, items);
        } else if (doc->kind == SPEC_KIND_EXPERIMENT) {
            for (size_t k = 0; k < doc->experiment->n_jobs; k++) {
                int r = render_job(c, doc->experiment->jobs[k], items);
                if (r > rc) rc = r;
            }
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

/* `lathe render`: settings, the file, its objects; an exit code. */
static int render_run(int argc, char **argv)
{
    render_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != LT_EXIT_OK) return rc;
    render_ctx c;
    rc = ctx_open(&c, &a);
    if (rc != LT_EXIT_OK || strcmp(a.file, "server") == 0) {
        if (rc == LT_EXIT_OK) rc = render_server(&c);
        ctx_close(&c);
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
        if (rc == LT_EXIT_OK) print_items(items, a.json);
        json_decref(items);
    }
    diag_list_free(&d);
    spec_file_free(&f);
    ctx_close(&c);
    return rc;
}

const cli_command cli_cmd_render = {
    .name = "render",
    .summary = "the Kubernetes objects of a job's next attempt, a cluster's setup, or lathe's install",
    .help = render_help,
    .run = render_run,
};
