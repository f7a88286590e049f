/* spec_server.c: the ServerConfig, the configuration file of `lathe server`
 * (apiVersion lathe/v1, kind ServerConfig): listen address, data folder,
 * the cluster it runs on, bearer tokens (stored as SHA-256 hashes, with a
 * scope and an expiry), a tokens file, TLS, the per-token rate limit, the
 * scheduler's policy and settings, retry limits, poll interval, request
 * limits, log rotation. Its schema tables, defaults, the checks across
 * fields (a token is for a team or admin, a hash is 64 hex digits, an
 * expiry is an RFC 3339 time, TLS names both files, the listen address has
 * a port) and its loader, which reads the file through the same YAML layer
 * and decoder as every other spec. The `policy:` section's tables are in
 * spec_policy.c; the tokens file's loader (spec_server_tokens_load_file)
 * shares the token table.
 *
 * The loader is separate from spec_load_file: a ServerConfig is not a job
 * document, and `lathe validate` reports it as an unknown kind.
 */
#include "spec_internal.h"

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA(tab, type, init, after) {tab, sizeof tab / sizeof tab[0], sizeof(type), init, after}
#define SCHEMA0(tab) {tab, sizeof tab / sizeof tab[0], 0, NULL, NULL}
#define ENUM_DEF(var, table) static const spec_enum_def var = {table, sizeof table / sizeof table[0]}

/* ---- defaults and memory ---- */
spec_server *spec_server_new_default(void)
{
    spec_server *s = xcalloc(1, sizeof *s);
    s->listen = xstrdup("127.0.0.1:8740");
    s->scheduler.policy = xstrdup("lathe");
    s->scheduler.interval = 10;
    s->scheduler.due_preemption = TOGGLE_AUTO;
    s->retry.max_retries = 10;
    s->retry.max_backoff = 3600;
    s->retry.jitter = 0.2;
    s->poll_interval = 2;
    s->limits.max_body = 1024.0 * 1024.0;
    s->limits.max_connections = 256;
    s->limits.connection_timeout = 60;
    s->logs.max_size = 64.0 * 1024.0 * 1024.0;
    s->logs.keep = 3;
    s->monitoring.sample_interval = 10;
    s->rate_limit.per_second = 50;
    s->rate_limit.burst = 100;
    spec_policy_defaults(&s->policy);
    s->executor = SPEC_EXECUTOR_LOCAL;
    spec_k8s_defaults(&s->k8s);
    spec_slurm_defaults(&s->slurm);
    return s;
}

void spec_k8s_defaults(spec_k8s *k)
{
    memset(k, 0, sizeof *k);
    k->qps = 50;
    k->burst = 100;
    k->namespace_prefix = xstrdup("");
    k->image = xstrdup("lathe:latest");
    k->lathe_path = xstrdup("lathe");
    k->gpu_resource = xstrdup("nvidia.com/gpu");
    k->gpu_product_label = xstrdup("nvidia.com/gpu.product");
    k->gpu_memory_label = xstrdup("nvidia.com/gpu.memory");
    k->rack_label = xstrdup("rack-id");
    k->zone_label = xstrdup("topology.kubernetes.io/zone");
    k->nvlink_label = xstrdup("lathe.dev/nvlink-group");
    k->checkpoint_pvc = xstrdup("lathe-checkpoints");
    k->model_pvc = xstrdup("lathe-models");
    k->data_pvc = xstrdup("lathe-data");
    k->checkpoint_mount = xstrdup("/checkpoints");
    k->model_mount = xstrdup("/models");
    k->data_mount = xstrdup("/data");
    k->spec_mount = xstrdup("/etc/lathe");
    k->shm_size = 8.0 * 1024 * 1024 * 1024;
    k->run_as_user = k->run_as_group = k->fs_group = 1000;
    k->ttl_after_finished = 86400;
    k->master_port = 29500;
    k->checkpoint_size = 500.0 * 1024 * 1024 * 1024;
    k->model_size = 2048.0 * 1024 * 1024 * 1024;
    k->data_size = 500.0 * 1024 * 1024 * 1024;
    k->op.lease_name = xstrdup("lathe-server");
    k->op.lease_duration = 15;
    k->op.renew_deadline = 10;
    k->op.retry_period = 2;
    k->op.status_interval = 1;
}

static void kv_free(spec_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

void spec_k8s_free(spec_k8s *k)
{
    if (!k) return;
    char **strs[] = {&k->kubeconfig, &k->context, &k->namespace_prefix, &k->image,
                     &k->image_pull_policy, &k->lathe_path, &k->gpu_resource,
                     &k->gpu_product_label, &k->gpu_memory_label, &k->rack_label,
                     &k->zone_label, &k->nvlink_label, &k->checkpoint_pvc, &k->model_pvc,
                     &k->data_pvc, &k->checkpoint_mount, &k->model_mount, &k->data_mount,
                     &k->spec_mount, &k->service_account, &k->storage_class};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    str_list_free(k->op.namespaces, k->op.n_namespaces);
    k->op.namespaces = NULL;
    k->op.n_namespaces = 0;
    free(k->op.lease_name);
    free(k->op.lease_namespace);
    free(k->op.identity);
    k->op.lease_name = k->op.lease_namespace = k->op.identity = NULL;
    kv_free(k->namespaces, k->n_namespaces);
    kv_free(k->gpu_products, k->n_gpu_products);
    k->namespaces = k->gpu_products = NULL;
    k->n_namespaces = k->n_gpu_products = 0;
}

void spec_slurm_defaults(spec_slurm *s)
{
    memset(s, 0, sizeof *s);
    s->gpu_type = xstrdup("L4");
    s->decide = xstrdup("lathe");
    s->master_port = 29500;
    s->state_interval = 1;
    s->command_timeout = 30;
}

void spec_slurm_free(spec_slurm *s)
{
    if (!s) return;
    free(s->partition);
    free(s->gpu_type);
    free(s->lathe_path);
    free(s->bin_dir);
    free(s->decide);
    kv_free(s->accounts, s->n_accounts);
    kv_free(s->qos, s->n_qos);
    kv_free(s->gpu_types, s->n_gpu_types);
    memset(s, 0, sizeof *s);
}

const char *spec_kv_find(const spec_kv *kv, size_t n, const char *key)
{
    for (size_t i = 0; key && i < n; i++)
        if (strcmp(kv[i].key, key) == 0) return kv[i].value;
    return NULL;
}

char *spec_k8s_namespace(const spec_k8s *k, const char *team)
{
    if (k->op.enabled) return xstrdup(team); /* operator mode: a team is its namespace */
    for (size_t i = 0; i < k->n_namespaces; i++)
        if (strcmp(k->namespaces[i].key, team) == 0) return xstrdup(k->namespaces[i].value);
    return xasprintf("%s%s", k->namespace_prefix ? k->namespace_prefix : "", team);
}

void spec_server_tokens_free(spec_server_token *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(t[i].name);
        free(t[i].sha256);
        free(t[i].team);
        free(t[i].scope);
        free(t[i].expires);
    }
    free(t);
}

void spec_server_free(spec_server *s)
{
    if (!s) return;
    free(s->file);
    free(s->name);
    free(s->listen);
    free(s->data_dir);
    free(s->cluster.file);
    free(s->cluster.gpus);
    spec_server_tokens_free(s->tokens, s->n_tokens);
    free(s->tokens_file);
    free(s->tls.cert_file);
    free(s->tls.key_file);
    spec_policy_free(&s->policy);
    free(s->scheduler.policy);
    free(s->trainer_program);
    spec_k8s_free(&s->k8s);
    spec_slurm_free(&s->slurm);
    free(s);
}

/* ---- enums ---- */
static const spec_enum_entry policy_tab[] = {
    {"lathe", 0, false}, {"easy", 1, false}, {"greedy", 2, false}, {"fifo", 3, false},
};
ENUM_DEF(enum_policy, policy_tab);

static const spec_enum_entry gpus_tab[] = {
    {"nvml", 0, false}, {"none", 1, false}, {"local", 0, true},
};
ENUM_DEF(enum_gpus, gpus_tab);

/* ---- checks inside one token ---- */
static bool hex64(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n])) return false;
    return n == 64;
}

static const spec_enum_entry scope_tab[] = {
    {"read", 0, false}, {"submit", 1, false}, {"admin", 2, false},
};
ENUM_DEF(enum_scope, scope_tab);

/* A token entry: a valid hash, exactly one of team / admin, a scope that
 * fits it, an expiry that is a time. Shared by the config's `tokens:` and
 * the tokens file. */
static void token_after(spec_dctx *c, const spec_ynode *m, void *elem)
{
    spec_server_token *t = elem;
    t->pos = (spec_pos){m->line, m->col};
    if (t->expires) {
        if (!units_parse_time(t->expires, &t->expires_at)) {
            size_t old = spec_path_push(c, "expires");
            diag *x = spec_report(c, DIAG_ERROR, spec_ymap_get(m, "expires"),
                                  "not an RFC 3339 time");
            diag_set_expected(x, "a date and time with its zone, such as "
                                 "\"2027-01-31T00:00:00Z\" or \"2027-01-31T09:00:00+01:00\"");
            diag_set_found(x, "\"%s\"", t->expires);
            diag_set_suggestion(x, "write the date as YYYY-MM-DD, then T, the time as "
                                   "HH:MM:SS, then Z for UTC or the offset from UTC");
            spec_path_pop(c, old);
        }
    }
    if (t->scope) {
        bool admin_scope = strcmp(t->scope, "admin") == 0;
        if (admin_scope && t->team) {
            size_t old = spec_path_push(c, "scope");
            diag *x = spec_report(c, DIAG_ERROR, spec_ymap_get(m, "scope"),
                                  "scope admin is for admin tokens, which name no team");
            diag_set_expected(x, "read or submit for a team's token");
            diag_set_suggestion(x, "write `scope: submit` (or read) for team %s's token, or "
                                   "remove `team:` to make an admin token",
                                t->team);
            spec_path_pop(c, old);
        } else if (!admin_scope && t->admin) {
            size_t old = spec_path_push(c, "scope");
            diag *x = spec_report(c, DIAG_ERROR, spec_ymap_get(m, "scope"),
                                  "an admin token (admin: true) must have scope admin");
            diag_set_found(x, "scope %s", t->scope);
            diag_set_suggestion(x, "remove `scope:`, or replace `admin: true` with the "
                                   "team the token acts for");
            spec_path_pop(c, old);
        } else if (admin_scope) {
            t->admin = true; /* scope: admin is admin: true */
        }
    }
    const spec_ynode *h = spec_ymap_get(m, "sha256");
    if (t->sha256 && !hex64(t->sha256)) {
        size_t old = spec_path_push(c, "sha256");
        diag *x = spec_report(c, DIAG_ERROR, h, "not a SHA-256 hash");
        diag_set_expected(x, "64 hexadecimal digits");
        diag_set_found(x, "%zu characters", strlen(t->sha256));
        diag_set_suggestion(x, "write the output of `lathe server hash-token TOKEN`, never "
                               "the token itself");
        spec_path_pop(c, old);
    } else if (t->sha256) {
        for (char *p = t->sha256; *p; p++) *p = (char)tolower((unsigned char)*p);
    }
    if (t->team && t->admin) {
        size_t old = spec_path_push(c, "admin");
        diag *x = spec_report(c, DIAG_ERROR, spec_ymap_get(m, "admin"),
                              "a token is either a team's or admin, not both");
        diag_set_suggestion(x, "remove `team:` for an admin token, or `admin: true` for a "
                               "team's token");
        spec_path_pop(c, old);
    } else if (!t->team && !t->admin && !spec_dctx_bad(c, spec_ymap_get(m, "team"))) {
        diag *x = spec_report(c, DIAG_ERROR, m, "the token names no team");
        diag_set_expected(x, "`team: NAME` or `admin: true`");
        diag_set_suggestion(x, "add the team whose jobs this token may see and change");
    }
}

/* ---- schemas ---- */
#define TK(m) offsetof(spec_server_token, m)
static const spec_field token_fields[] = {
    {.key = "name", .type = SF_STR, .off = TK(name)},
    {.key = "sha256", .type = SF_STR, .off = TK(sha256), .flags = SF_REQUIRED},
    {.key = "team", .type = SF_STR, .off = TK(team), .flags = SF_DNS},
    {.key = "admin", .type = SF_BOOL, .off = TK(admin)},
    {.key = "scope", .type = SF_ENUM_STR, .off = TK(scope), .enm = &enum_scope},
    {.key = "expires", .type = SF_STR, .off = TK(expires)},
};
static const spec_schema token_schema = SCHEMA(token_fields, spec_server_token, NULL, token_after);

#define S(m) offsetof(spec_server, m)
static const spec_field cluster_fields[] = {
    {.key = "file", .type = SF_STR, .off = S(cluster.file)},
    {.key = "gpus", .type = SF_ENUM_STR, .off = S(cluster.gpus), .enm = &enum_gpus},
    {.key = "cpuSlots", .type = SF_INT, .off = S(cluster.cpu_slots), .flags = SF_MIN | SF_MAX,
     .min = 0, .max = 4096, .hint = "0 takes the number of online CPUs"},
};
static const spec_schema cluster_schema = SCHEMA0(cluster_fields);

static const spec_field sched_fields[] = {
    {.key = "policy", .type = SF_ENUM_STR, .off = S(scheduler.policy), .enm = &enum_policy},
    {.key = "interval", .type = SF_DURATION, .off = S(scheduler.interval),
     .flags = SF_MIN | SF_MAX, .min = 0.01, .max = 86400},
    {.key = "halfLife", .type = SF_DURATION, .off = S(scheduler.half_life)},
    {.key = "minRunTime", .type = SF_DURATION, .off = S(scheduler.min_run_time)},
    {.key = "reclaimMinRun", .type = SF_DURATION, .off = S(scheduler.reclaim_min_run)},
    {.key = "maxSlack", .type = SF_DURATION, .off = S(scheduler.max_slack)},
    {.key = "starveAfter", .type = SF_DURATION, .off = S(scheduler.starve_after)},
    {.key = "defaultEstimate", .type = SF_DURATION, .off = S(scheduler.default_estimate)},
    {.key = "gpuShareLimit", .type = SF_INT, .off = S(scheduler.gpu_share_limit),
     .flags = SF_MIN | SF_MAX, .min = 1, .max = 100},
    {.key = "duePreemption", .type = SF_TOGGLE, .off = S(scheduler.due_preemption)},
    {.key = "aging", .type = SF_DURATION, .off = S(scheduler.aging)},
    {.key = "fairShare", .type = SF_TOGGLE, .off = S(scheduler.fair_share)},
};
static const spec_schema sched_schema = SCHEMA0(sched_fields);

static const spec_field retry_fields[] = {
    {.key = "maxRetries", .type = SF_INT, .off = S(retry.max_retries), .flags = SF_MIN | SF_MAX,
     .min = 0, .max = 1000},
    {.key = "maxBackoff", .type = SF_DURATION, .off = S(retry.max_backoff)},
    {.key = "jitter", .type = SF_DOUBLE, .off = S(retry.jitter), .flags = SF_MIN | SF_MAX,
     .min = 0, .max = 1, .hint = "0.2 spreads each backoff over +-20%"},
};
static const spec_schema retry_schema = SCHEMA0(retry_fields);

static const spec_field limit_fields[] = {
    {.key = "maxBodySize", .type = SF_BYTES, .off = S(limits.max_body), .flags = SF_MIN | SF_MAX,
     .min = 1024, .max = 64.0 * 1024 * 1024, .hint = "between 1Ki and 64Mi; 1Mi holds any job"},
    {.key = "maxConnections", .type = SF_INT, .off = S(limits.max_connections),
     .flags = SF_MIN | SF_MAX, .min = 1, .max = 65536},
    {.key = "connectionTimeout", .type = SF_DURATION, .off = S(limits.connection_timeout)},
};
static const spec_schema limit_schema = SCHEMA0(limit_fields);

static const spec_field log_fields[] = {
    {.key = "maxSize", .type = SF_BYTES, .off = S(logs.max_size), .flags = SF_MIN,
     .min = 4096},
    {.key = "keep", .type = SF_INT, .off = S(logs.keep), .flags = SF_MIN | SF_MAX, .min = 0,
     .max = 100},
};
static const spec_schema log_schema = SCHEMA0(log_fields);

static const spec_field monitoring_fields[] = {
    {.key = "sampleInterval", .type = SF_DURATION, .off = S(monitoring.sample_interval),
     .flags = SF_MIN | SF_MAX, .min = 0.05, .max = 3600,
     .hint = "how often NVML is sampled, between 50ms and 1h; 10s is the default"},
};
static const spec_schema monitoring_schema = SCHEMA0(monitoring_fields);

static const spec_field trainer_fields[] = {
    {.key = "program", .type = SF_STR, .off = S(trainer_program)},
};
static const spec_schema trainer_schema = SCHEMA0(trainer_fields);

static const spec_enum_entry executor_tab[] = {
    {"local", SPEC_EXECUTOR_LOCAL, false},
    {"k8s", SPEC_EXECUTOR_K8S, false},
    {"kubernetes", SPEC_EXECUTOR_K8S, true},
    {"slurm", SPEC_EXECUTOR_SLURM, false},
};
ENUM_DEF(enum_executor, executor_tab);

#define K(f) S(k8s.f)
static const spec_field op_fields[] = {
    {.key = "enabled", .type = SF_BOOL, .off = K(op.enabled)},
    {.key = "namespaces", .type = SF_STRLIST, .off = K(op.namespaces), .off_n = K(op.n_namespaces),
     .flags = SF_DNS},
    {.key = "leaseName", .type = SF_STR, .off = K(op.lease_name), .flags = SF_DNS},
    {.key = "leaseNamespace", .type = SF_STR, .off = K(op.lease_namespace), .flags = SF_DNS},
    {.key = "identity", .type = SF_STR, .off = K(op.identity)},
    {.key = "leaseDuration", .type = SF_DURATION, .off = K(op.lease_duration),
     .flags = SF_MIN | SF_MAX, .min = 2, .max = 3600, .hint = "15s is client-go's default"},
    {.key = "renewDeadline", .type = SF_DURATION, .off = K(op.renew_deadline),
     .flags = SF_MIN | SF_MAX, .min = 1, .max = 3600, .hint = "shorter than leaseDuration; 10s"},
    {.key = "retryPeriod", .type = SF_DURATION, .off = K(op.retry_period),
     .flags = SF_MIN | SF_MAX, .min = 0.1, .max = 600, .hint = "shorter than renewDeadline; 2s"},
    {.key = "statusInterval", .type = SF_DURATION, .off = K(op.status_interval),
     .flags = SF_MIN | SF_MAX, .min = 0, .max = 600},
};
static const spec_schema op_schema = SCHEMA0(op_fields);

static const spec_field k8s_fields[] = {
    {.key = "operator", .type = SF_OBJ, .sub = &op_schema},
    {.key = "kubeconfig", .type = SF_STR, .off = K(kubeconfig)},
    {.key = "context", .type = SF_STR, .off = K(context)},
    {.key = "qps", .type = SF_DOUBLE, .off = K(qps), .flags = SF_MIN | SF_MAX, .min = 0.1,
     .max = 100000, .hint = "requests per second to the API server; 50 is the default"},
    {.key = "burst", .type = SF_INT, .off = K(burst), .flags = SF_MIN | SF_MAX, .min = 1,
     .max = 100000},
    {.key = "namespacePrefix", .type = SF_STR, .off = K(namespace_prefix), .flags = SF_EMPTY_OK},
    {.key = "namespaces", .type = SF_KV, .off = K(namespaces), .off_n = K(n_namespaces)},
    {.key = "image", .type = SF_STR, .off = K(image)},
    {.key = "imagePullPolicy", .type = SF_STR, .off = K(image_pull_policy)},
    {.key = "lathePath", .type = SF_STR, .off = K(lathe_path)},
    {.key = "gpuResource", .type = SF_STR, .off = K(gpu_resource)},
    {.key = "gpuProductLabel", .type = SF_STR, .off = K(gpu_product_label)},
    {.key = "gpuProducts", .type = SF_KV, .off = K(gpu_products), .off_n = K(n_gpu_products)},
    {.key = "gpuMemoryLabel", .type = SF_STR, .off = K(gpu_memory_label)},
    {.key = "rackLabel", .type = SF_STR, .off = K(rack_label)},
    {.key = "zoneLabel", .type = SF_STR, .off = K(zone_label)},
    {.key = "nvlinkLabel", .type = SF_STR, .off = K(nvlink_label)},
    {.key = "checkpointPVC", .type = SF_STR, .off = K(checkpoint_pvc)},
    {.key = "modelPVC", .type = SF_STR, .off = K(model_pvc), .flags = SF_EMPTY_OK},
    {.key = "dataPVC", .type = SF_STR, .off = K(data_pvc), .flags = SF_EMPTY_OK},
    {.key = "checkpointMount", .type = SF_STR, .off = K(checkpoint_mount)},
    {.key = "modelMount", .type = SF_STR, .off = K(model_mount)},
    {.key = "dataMount", .type = SF_STR, .off = K(data_mount)},
    {.key = "specMount", .type = SF_STR, .off = K(spec_mount)},
    {.key = "shmSize", .type = SF_BYTES, .off = K(shm_size)},
    {.key = "runAsUser", .type = SF_I64, .off = K(run_as_user), .flags = SF_MIN | SF_MAX,
     .min = 1, .max = 2147483647, .hint = "a non-root uid such as 1000"},
    {.key = "runAsGroup", .type = SF_I64, .off = K(run_as_group), .flags = SF_MIN | SF_MAX,
     .min = 0, .max = 2147483647},
    {.key = "fsGroup", .type = SF_I64, .off = K(fs_group), .flags = SF_MIN | SF_MAX, .min = 0,
     .max = 2147483647},
    {.key = "ttlSecondsAfterFinished", .type = SF_INT, .off = K(ttl_after_finished),
     .flags = SF_MIN | SF_MAX, .min = -1, .max = 31536000, .hint = "-1 keeps finished Jobs"},
    {.key = "serviceAccount", .type = SF_STR, .off = K(service_account)},
    {.key = "masterPort", .type = SF_INT, .off = K(master_port), .flags = SF_MIN | SF_MAX,
     .min = 1, .max = 65535},
    {.key = "storageClass", .type = SF_STR, .off = K(storage_class)},
    {.key = "checkpointSize", .type = SF_BYTES, .off = K(checkpoint_size)},
    {.key = "modelSize", .type = SF_BYTES, .off = K(model_size)},
    {.key = "dataSize", .type = SF_BYTES, .off = K(data_size)},
};
#undef K
static const spec_schema k8s_schema = SCHEMA0(k8s_fields);

#define SL(f) S(slurm.f)
static const spec_field slurm_fields[] = {
    {.key = "partition", .type = SF_STR, .off = SL(partition)},
    {.key = "accounts", .type = SF_KV, .off = SL(accounts), .off_n = SL(n_accounts)},
    {.key = "qos", .type = SF_KV, .off = SL(qos), .off_n = SL(n_qos)},
    {.key = "gpuTypes", .type = SF_KV, .off = SL(gpu_types), .off_n = SL(n_gpu_types)},
    {.key = "gpuType", .type = SF_STR, .off = SL(gpu_type)},
    {.key = "lathePath", .type = SF_STR, .off = SL(lathe_path)},
    {.key = "binDir", .type = SF_STR, .off = SL(bin_dir)},
    {.key = "decide", .type = SF_STR, .off = SL(decide)},
    {.key = "masterPort", .type = SF_INT, .off = SL(master_port), .flags = SF_MIN | SF_MAX,
     .min = 1, .max = 65535},
    {.key = "stateInterval", .type = SF_DURATION, .off = SL(state_interval),
     .flags = SF_MIN | SF_MAX, .min = 0, .max = 600,
     .hint = "at most one squeue per this interval; 1s is the default"},
    {.key = "commandTimeout", .type = SF_DURATION, .off = SL(command_timeout),
     .flags = SF_MIN | SF_MAX, .min = 1, .max = 3600},
    {.key = "arrayMax", .type = SF_INT, .off = SL(array_max), .flags = SF_MIN | SF_MAX,
     .min = 0, .max = 100000},
};
#undef SL
static const spec_schema slurm_schema = SCHEMA0(slurm_fields);

static const spec_field tls_fields[] = {
    {.key = "certFile", .type = SF_STR, .off = S(tls.cert_file)},
    {.key = "keyFile", .type = SF_STR, .off = S(tls.key_file)},
};
static const spec_schema tls_schema = SCHEMA0(tls_fields);

static const spec_field rate_fields[] = {
    {.key = "requestsPerSecond", .type = SF_DOUBLE, .off = S(rate_limit.per_second),
     .flags = SF_MIN | SF_MAX, .min = 0, .max = 1e6,
     .hint = "requests per second per token; 0 sets no limit, 50 is the default"},
    {.key = "burst", .type = SF_INT, .off = S(rate_limit.burst), .flags = SF_MIN | SF_MAX,
     .min = 1, .max = 1000000, .hint = "requests a token may send at once; 100 is the default"},
};
static const spec_schema rate_schema = SCHEMA0(rate_fields);

static const spec_field spec_fields[] = {
    {.key = "executor", .type = SF_ENUM, .off = S(executor), .enm = &enum_executor},
    {.key = "kubernetes", .type = SF_OBJ, .sub = &k8s_schema},
    {.key = "slurm", .type = SF_OBJ, .sub = &slurm_schema},
    {.key = "listen", .type = SF_STR, .off = S(listen)},
    {.key = "dataDir", .type = SF_STR, .off = S(data_dir)},
    {.key = "cluster", .type = SF_OBJ, .sub = &cluster_schema},
    {.key = "tokens", .type = SF_LIST, .off = S(tokens), .off_n = S(n_tokens),
     .sub = &token_schema},
    {.key = "tokensFile", .type = SF_STR, .off = S(tokens_file)},
    {.key = "tls", .type = SF_OBJ, .sub = &tls_schema},
    {.key = "rateLimit", .type = SF_OBJ, .sub = &rate_schema},
    {.key = "policy", .type = SF_OBJ, .sub = &spec_server_policy_schema},
    {.key = "scheduler", .type = SF_OBJ, .sub = &sched_schema},
    {.key = "retry", .type = SF_OBJ, .sub = &retry_schema},
    {.key = "pollInterval", .type = SF_DURATION, .off = S(poll_interval),
     .flags = SF_MIN | SF_MAX, .min = 0.01, .max = 3600,
     .hint = "between 10ms and 1h; 2s is the usual"},
    {.key = "limits", .type = SF_OBJ, .sub = &limit_schema},
    {.key = "logs", .type = SF_OBJ, .sub = &log_schema},
    {.key = "trainer", .type = SF_OBJ, .sub = &trainer_schema},
    {.key = "monitoring", .type = SF_OBJ, .sub = &monitoring_schema},
};
static const spec_schema spec_schema_ = SCHEMA0(spec_fields);

static const spec_field meta_fields[] = {
    {.key = "name", .type = SF_STR, .off = S(name), .flags = SF_DNS},
};
static const spec_schema meta_schema = SCHEMA0(meta_fields);

static const spec_field top_fields[] = {
    {.key = "apiVersion", .type = SF_IGNORE},
    {.key = "kind", .type = SF_IGNORE},
    {.key = "metadata", .type = SF_OBJ, .sub = &meta_schema},
    {.key = "spec", .type = SF_OBJ, .sub = &spec_schema_},
};
static const spec_schema top_schema = SCHEMA0(top_fields);

/* ---- checks across fields ---- */

/* "HOST:PORT" or "[V6]:PORT" with a port 0..65535. */
static bool listen_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1]) return false;
    if (s[0] == '[' && colon[-1] != ']') return false;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    return !*end && port >= 0 && port <= 65535 && isdigit((unsigned char)colon[1]);
}

static void check_listen(spec_dctx *c, const spec_ynode *body, const spec_server *s)
{
    if (!s->listen || listen_ok(s->listen)) return;
    size_t old = spec_path_push(c, "listen");
    diag *x = spec_report(c, DIAG_ERROR, spec_ymap_get(body, "listen"), "not an address");
    diag_set_expected(x, "HOST:PORT such as 127.0.0.1:8740, 0.0.0.0:8740 or [::1]:8740");
    diag_set_found(x, "\"%s\"", s->listen);
    diag_set_suggestion(x, "add the port after a colon; port 0 lets the system choose one");
    spec_path_pop(c, old);
}

/* TLS needs the certificate and its key, or neither (plain HTTP). */
static void check_tls(spec_dctx *c, const spec_ynode *body, const spec_server *s)
{
    if (!s->tls.cert_file == !s->tls.key_file) return;
    const spec_ynode *tn = spec_ymap_get(body, "tls");
    const char *missing = s->tls.cert_file ? "keyFile" : "certFile";
    size_t old = spec_path_push(c, "tls");
    diag *x = spec_report(c, DIAG_ERROR, tn ? tn : body, "TLS needs both files; %s is missing",
                          missing);
    diag_set_expected(x, "certFile (the PEM certificate chain) and keyFile (its private key)");
    diag_set_suggestion(x, "add `%s:`, or remove `tls:` to serve plain HTTP", missing);
    spec_path_pop(c, old);
}

/* Two entries with one hash would make the token's team ambiguous. */
static void check_tokens(spec_dctx *c, const spec_ynode *body, const spec_server_token *tokens,
                         size_t n_tokens)
{
    const spec_ynode *list = spec_ymap_get(body, "tokens");
    for (size_t i = 0; i < n_tokens; i++) {
        for (size_t k = 0; k < i; k++) {
            if (!tokens[i].sha256 || !tokens[k].sha256 ||
                strcmp(tokens[i].sha256, tokens[k].sha256) != 0)
                continue;
            char path[64];
            snprintf(path, sizeof path, "tokens[%zu].sha256", i);
            size_t old = spec_path_push(c, path);
            const spec_ynode *at = spec_yitem_get(list, i, "sha256");
            diag *x = spec_report(c, DIAG_ERROR, at ? at : body,
                                  "the same token hash as tokens[%zu]", k);
            diag_set_suggestion(x, "give every person or machine its own token");
            spec_path_pop(c, old);
            break;
        }
    }
}

/* Operator mode runs on the Kubernetes executor, and its Lease's times
 * must nest the way client-go's do: retryPeriod < renewDeadline <
 * leaseDuration, or a holder loses the Lease while it still renews. */
static void check_operator(spec_dctx *c, const spec_ynode *body, const spec_server *s)
{
    const spec_k8s *k = &s->k8s;
    if (!k->op.enabled) return;
    const spec_ynode *kn = spec_ymap_get(body, "kubernetes");
    const spec_ynode *on = kn && kn->kind == SPEC_YMAP ? spec_ymap_get(kn, "operator") : NULL;
    size_t old = spec_path_push(c, "kubernetes.operator");
    if (k->op.n_namespaces == 0) {
        diag *x = spec_report(c, DIAG_ERROR, on ? on : body, "operator mode serves no namespace");
        diag_set_expected(x, "namespaces: [team-a, team-b], the teams' namespaces");
        diag_set_suggestion(x, "list the namespaces whose LoRATrainingJobs lathe serves");
    }
    if (s->executor != SPEC_EXECUTOR_K8S) {
        diag *x = spec_report(c, DIAG_ERROR, on ? on : body,
                              "operator mode needs the Kubernetes executor");
        diag_set_suggestion(x, "add `executor: k8s` to spec, or set operator.enabled: false");
    }
    if (!(k->op.renew_deadline < k->op.lease_duration)) {
        diag *x = spec_report(c, DIAG_ERROR, on ? on : body,
                              "renewDeadline must be shorter than leaseDuration");
        diag_set_found(x, "renewDeadline %.0fs, leaseDuration %.0fs", k->op.renew_deadline,
                       k->op.lease_duration);
        diag_set_suggestion(x, "the defaults are 10s and 15s");
    }
    if (!(k->op.retry_period < k->op.renew_deadline)) {
        diag *x = spec_report(c, DIAG_ERROR, on ? on : body,
                              "retryPeriod must be shorter than renewDeadline");
        diag_set_found(x, "retryPeriod %gs, renewDeadline %gs", k->op.retry_period,
                       k->op.renew_deadline);
        diag_set_suggestion(x, "the defaults are 2s and 10s");
    }
    spec_path_pop(c, old);
}

/* The Slurm settings: who decides, and a lathePath the batch script can
 * exec as written (it is the one word of the script lathe does not fix). */
static void check_slurm(spec_dctx *c, const spec_ynode *body, const spec_server *s)
{
    const spec_slurm *sl = &s->slurm;
    const spec_ynode *sn = spec_ymap_get(body, "slurm");
    bool is_map = sn && sn->kind == SPEC_YMAP;
    if (sl->decide && strcmp(sl->decide, "lathe") != 0 && strcmp(sl->decide, "slurm") != 0) {
        size_t old = spec_path_push(c, "slurm.decide");
        const spec_ynode *at = is_map ? spec_ymap_get(sn, "decide") : NULL;
        diag *x = spec_report(c, DIAG_ERROR, at ? at : body, "not who places the jobs");
        diag_set_expected(x, "lathe (its scheduler places, --nodelist) or slurm (Slurm places)");
        diag_set_found(x, "\"%s\"", sl->decide);
        spec_path_pop(c, old);
    }
    const char *lp = sl->lathe_path;
    bool lp_ok = !lp || lp[0] == '/';
    for (const char *p = lp; lp_ok && p && *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("/._+-", *p)) lp_ok = false;
    if (!lp_ok) {
        size_t old = spec_path_push(c, "slurm.lathePath");
        const spec_ynode *at = is_map ? spec_ymap_get(sn, "lathePath") : NULL;
        diag *x = spec_report(c, DIAG_ERROR, at ? at : body,
                              "not an absolute path of letters, digits and / . _ + -");
        diag_set_found(x, "\"%s\"", lp);
        diag_set_suggestion(x, "give the path of lathe on the compute nodes, such as "
                               "/opt/lathe/bin/lathe");
        spec_path_pop(c, old);
    }
}

/* The document's kind and apiVersion. */
static bool check_header(spec_dctx *c, const spec_ynode *root)
{
    const spec_ynode *k = spec_ymap_get(root, "kind"), *a = spec_ymap_get(root, "apiVersion");
    bool ok = true;
    if (spec_yabsent(k) || k->kind != SPEC_YSCALAR || strcmp(k->text, "ServerConfig") != 0) {
        size_t old = spec_path_push(c, "kind");
        diag *x = spec_report(c, DIAG_ERROR, spec_yabsent(k) ? root : k,
                              spec_yabsent(k) ? "the document has no kind" : "not a server config");
        diag_set_expected(x, "kind: ServerConfig");
        if (!spec_yabsent(k)) {
            char found[64];
            spec_ydescribe(k, found, sizeof found);
            diag_set_found(x, "%s", found);
        }
        diag_set_suggestion(x, "a server config starts with `apiVersion: lathe/v1` and "
                               "`kind: ServerConfig`; jobs are submitted, not configured");
        spec_path_pop(c, old);
        ok = false;
    }
    if (spec_yabsent(a) || a->kind != SPEC_YSCALAR || strcmp(a->text, "lathe/v1") != 0) {
        size_t old = spec_path_push(c, "apiVersion");
        diag *x = spec_report(c, DIAG_ERROR, spec_yabsent(a) ? root : a,
                              spec_yabsent(a) ? "the document has no apiVersion"
                                              : "unsupported apiVersion");
        diag_set_expected(x, "lathe/v1");
        diag_set_suggestion(x, "write `apiVersion: lathe/v1`");
        spec_path_pop(c, old);
        ok = false;
    }
    return ok;
}

/* Decodes the one document of the file into a new config. */
static spec_server *decode_server(spec_dctx *c, const spec_ynode *root)
{
    size_t before = c->d->errors;
    if (root->kind != SPEC_YMAP) {
        diag *x = spec_report(c, DIAG_ERROR, root, "a document must be a mapping");
        diag_set_expected(x, "apiVersion, kind, metadata and spec");
        return NULL;
    }
    if (!check_header(c, root)) return NULL;
    spec_server *s = spec_server_new_default();
    s->file = xstrdup(c->file);
    spec_decode_map(c, root, root, &top_schema, s);
    const spec_ynode *body = spec_ymap_get(root, "spec");
    if (!spec_yabsent(body) && body->kind == SPEC_YMAP) {
        size_t old = spec_path_push(c, "spec");
        check_listen(c, body, s);
        check_tokens(c, body, s->tokens, s->n_tokens);
        check_tls(c, body, s);
        check_operator(c, body, s);
        check_slurm(c, body, s);
        const spec_ynode *pn = spec_ymap_get(body, "policy");
        if (pn) {
            size_t old2 = spec_path_push(c, "policy");
            spec_policy_check(c, pn, &s->policy);
            spec_path_pop(c, old2);
        }
        spec_path_pop(c, old);
    }
    if (c->d->errors != before) {
        spec_server_free(s);
        return NULL;
    }
    return s;
}

size_t spec_server_load_string(const char *name, const char *text, size_t len, spec_server **out,
                               diag_list *d)
{
    *out = NULL;
    diag_list local;
    diag_list_init(&local);
    if (!d) d = &local;
    size_t before = d->errors;
    const char *file = name ? name : "<config>";
    spec_ystream ys;
    spec_yaml_parse(file, text, len, &ys, d);
    spec_dctx c;
    spec_dctx_init(&c, file, d);
    if (d->errors == before && ys.n_docs != 1) {
        diag *x = diag_add(d, DIAG_ERROR, file, ys.n_docs ? ys.docs[1].line : 0,
                           ys.n_docs ? ys.docs[1].col : 0, NULL,
                           ys.n_docs ? "a server config is one document" : "the file holds no document");
        diag_set_suggestion(x, "write one ServerConfig document (see docs/server.md)");
    } else if (d->errors == before) {
        *out = decode_server(&c, ys.docs[0].root);
        if (ys.docs[0].errors && *out) {
            spec_server_free(*out);
            *out = NULL;
        }
    }
    spec_dctx_free(&c);
    spec_ystream_free(&ys);
    size_t errors = d->errors - before;
    diag_list_free(&local);
    return errors;
}

json_t *spec_server_to_json(const spec_server *s)
{
    spec_server *dflt = spec_server_new_default();
    json_t *o = json_pack("{s:s, s:s}", "apiVersion", "lathe/v1", "kind", "ServerConfig");
    json_t *v = spec_schema_values(&top_schema, s, dflt);
    json_object_update(o, v);
    json_decref(v);
    spec_server_free(dflt);
    return o;
}

size_t spec_server_load_file(const char *path, spec_server **out, diag_list *d, bool *io_error)
{
    char err[512];
    size_t len;
    if (io_error) *io_error = false;
    *out = NULL;
    char *text = file_read_all(path, SPEC_MAX_FILE_BYTES, &len, err, sizeof err);
    if (!text) {
        if (d) diag_add(d, DIAG_ERROR, path, 0, 0, NULL, err);
        if (io_error) *io_error = true;
        return 1;
    }
    size_t n = spec_server_load_string(path, text, len, out, d);
    free(text);
    return n;
}

/* ---- the tokens file (`tokensFile:`) ----
 * A mapping with one key, `tokens:`, holding entries of the config's own
 * `tokens:` table, checked the same way (token_after, no hash twice). */
typedef struct tokens_doc {
    spec_server_token *tokens;
    size_t n_tokens;
} tokens_doc;

static const spec_field tokens_doc_fields[] = {
    {.key = "tokens", .type = SF_LIST, .off = offsetof(tokens_doc, tokens),
     .off_n = offsetof(tokens_doc, n_tokens), .sub = &token_schema, .flags = SF_REQUIRED},
};
static const spec_schema tokens_doc_schema = SCHEMA0(tokens_doc_fields);

static size_t tokens_load_string(const char *file, const char *text, size_t len,
                                 spec_server_token **out, size_t *n, diag_list *d)
{
    size_t before = d->errors;
    spec_ystream ys;
    spec_yaml_parse(file, text, len, &ys, d);
    spec_dctx c;
    spec_dctx_init(&c, file, d);
    tokens_doc doc = {0};
    if (d->errors == before && ys.n_docs != 1) {
        diag *x = diag_add(d, DIAG_ERROR, file, ys.n_docs ? ys.docs[1].line : 0,
                           ys.n_docs ? ys.docs[1].col : 0, NULL,
                           ys.n_docs ? "a tokens file is one document"
                                     : "the file holds no document");
        diag_set_suggestion(x, "write one mapping `tokens:` with a list of entries "
                               "{name, sha256, team, scope, expires}; `tokens: []` for none");
    } else if (d->errors == before) {
        const spec_ynode *root = ys.docs[0].root;
        spec_decode_map(&c, root, root, &tokens_doc_schema, &doc);
        if (root->kind == SPEC_YMAP) check_tokens(&c, root, doc.tokens, doc.n_tokens);
    }
    spec_dctx_free(&c);
    spec_ystream_free(&ys);
    if (d->errors != before) {
        spec_server_tokens_free(doc.tokens, doc.n_tokens);
        return d->errors - before;
    }
    *out = doc.tokens;
    *n = doc.n_tokens;
    return 0;
}

size_t spec_server_tokens_load_file(const char *path, spec_server_token **out, size_t *n,
                                    diag_list *d, bool *io_error)
{
    char err[512];
    size_t len;
    if (io_error) *io_error = false;
    *out = NULL;
    *n = 0;
    diag_list local;
    diag_list_init(&local);
    if (!d) d = &local;
    size_t errors;
    char *text = file_read_all(path, SPEC_MAX_FILE_BYTES, &len, err, sizeof err);
    if (!text) {
        diag *x = diag_add(d, DIAG_ERROR, path, 0, 0, NULL, err);
        diag_set_suggestion(x, "tokensFile names a YAML file with a `tokens:` list, read at "
                               "start and on SIGHUP");
        if (io_error) *io_error = true;
        errors = 1;
    } else {
        errors = tokens_load_string(path, text, len, out, n, d);
        free(text);
    }
    diag_list_free(&local);
    return errors;
}
