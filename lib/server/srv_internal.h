/* srv_internal.h: what the files of lib/server share.
 *
 *   srv_config.c   the resolved configuration: paths, listen address,
 *                  scheduler settings, tokens
 *   srv_cluster.c  the cluster the server schedules on (Cluster file and /
 *                  or NVML GPUs), its planner catalogue and GPU ids;
 *                  immutable once the server runs
 *   srv_auth.c     token hashing, the token table (scope, expiry; swapped
 *                  whole on SIGHUP) and lookup
 *   srv_ratelimit.c  a token bucket per token (per client address for
 *                  requests without a known token)
 *   srv_audit.c    the audit row of every change asked of the API
 *   srv_pool.c     store handles for the HTTP threads
 *   srv_http.c     libmicrohttpd: requests, bodies, routing, replies
 *   srv_json.c     jobs, events and errors as JSON
 *   srv_submit.c   POST /v1/jobs: validate, plan, check, store
 *   srv_api.c      the other /v1 endpoints
 *   srv_logs.c     GET .../logs: whole, tail and follow
 *   srv_metrics.c  /metrics, /healthz, /readyz
 *   srv_usage.c    GET /v1/cost, a job's attempts and its GPU history
 *   srv_server.c   start and stop
 *   ctl*.c         the controller (ctl.h)
 *
 * Threads: the cluster and config are read-only after srv_start; the
 * controller publishes a ctl_view under a mutex and takes the ids of the
 * jobs the HTTP threads changed under another; every other shared thing
 * (store pool, HTTP counters, the queue of HTTP writes) has its own mutex.
 */
#ifndef LATHE_SRV_INTERNAL_H
#define LATHE_SRV_INTERNAL_H

#include "server.h"

#include "exec/exec.h"
#include "plan/plan.h"
#include "sched/sched.h"
#include "spec/spec.h"
#include "store/store.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct ctl ctl;

/* ---- configuration (srv_config.c) ---- */
/* What a token may do: read = GET (and HEAD) only; submit = read, submit,
 * cancel and delete its team's jobs; admin = everything, every team. */
typedef enum { SRV_SCOPE_READ, SRV_SCOPE_SUBMIT, SRV_SCOPE_ADMIN } srv_scope;

typedef struct srv_token {
    unsigned char hash[32];
    char *team; /* NULL for admin */
    bool admin; /* sees and acts for every team (admin: true or scope admin) */
    char *name; /* label; may be NULL */
    srv_scope scope;
    double expires_at; /* seconds since the epoch; 0 = never */
} srv_token;

typedef struct srv_config {
    spec_server *spec;      /* as loaded, or every default */
    char *config_dir;       /* relative paths of the config start here */
    char *listen_host;      /* "127.0.0.1", "::1" */
    int listen_port;        /* 0 = the system chooses */
    char *data_dir;         /* absolute */
    char *db_path;          /* DATA/lathe.db */
    char *jobs_dir;         /* DATA/jobs: one folder per job */
    char *cluster_file;     /* absolute, or NULL */
    char *trainer_program;  /* absolute path of the lathe binary */
    sched_config sched;
    srv_token *tokens;
    size_t n_tokens;
    char *admin_token_file; /* DATA/admin-token when the server made one */
    struct policy *policy;  /* the compiled `policy:` (lib/policy/policy.h); set by
                               srv_config_load, never NULL after it succeeded */
    bool sandbox_ok;        /* the local sandbox can be made here (exec_sandbox_probe at
                               load; false on other executors and in mode off) */
    char sandbox_why[256];  /* why not, when !sandbox_ok */
} srv_config;

/* Resolves o and the config file into cfg. Diagnostics go to d; returns an
 * LT_EXIT_* code (err says what failed for codes other than 2). */
int srv_config_load(const srv_options *o, srv_config *cfg, diag_list *d, char *err, size_t errsz);
/* Creates the data folder; when the config lists no token, makes (once) a
 * random admin token in DATA/admin-token and adds its hash. */
int srv_config_prepare_data(srv_config *cfg, char *err, size_t errsz);
void srv_config_free(srv_config *cfg);
/* A job's folder, DATA/jobs/ID (caller frees). */
char *srv_job_dir(const srv_config *cfg, int64_t id);

/* ---- auth (srv_auth.c) ---- */
void srv_sha256(const void *data, size_t len, unsigned char out[32]);
void srv_hex(const unsigned char *b, size_t n, char *out); /* out: 2n+1 bytes */
bool srv_unhex(const char *hex, unsigned char *out, size_t n);
/* A new random token: 32 random bytes as 64 hex digits (out: 65 bytes). */
bool srv_random_token(char out[65]);
/* "read", "submit", "admin". */
const char *srv_scope_name(srv_scope s);
/* Appends the tokens of a ServerConfig list to *list (n entries): hashes
 * decoded, scope resolved (written, else admin for admin: true, else
 * submit), copies of the strings. */
void srv_tokens_add_spec(srv_token **list, size_t *n, const spec_server_token *t, size_t nt);
void srv_token_list_free(srv_token *list, size_t n);

/* An immutable token table shared by the HTTP threads: a request holds a
 * reference for its whole life (its srv_token pointers stay valid), and a
 * reload swaps in a new table; the old one is freed when its last request
 * ends. */
typedef struct srv_tokens {
    srv_token *items;
    size_t n;
    int refs; /* under srv_token_table.mu */
} srv_tokens;

typedef struct srv_token_table {
    pthread_mutex_t mu;
    srv_tokens *cur;
} srv_token_table;

void srv_token_table_init(srv_token_table *t, const srv_token *items, size_t n); /* copies */
/* The current table, with a reference the caller releases. */
srv_tokens *srv_token_table_get(srv_token_table *t);
void srv_token_table_put(srv_token_table *t, srv_tokens *x);
/* Makes items (taken: the table owns them) the current table. */
void srv_token_table_swap(srv_token_table *t, srv_token *items, size_t n);
void srv_token_table_free(srv_token_table *t);

typedef enum {
    SRV_AUTH_NONE,    /* no Authorization header, or not "Bearer X" */
    SRV_AUTH_UNKNOWN, /* no token has that hash */
    SRV_AUTH_EXPIRED, /* a token's, expired (*out is set) */
    SRV_AUTH_OK
} srv_auth_result;

/* The token an "Authorization: Bearer X" header names. Every token's hash
 * is compared (CRYPTO_memcmp, no early exit), so the time taken does not
 * depend on which token matched or how much of a hash did. */
srv_auth_result srv_auth_check(const srv_tokens *t, const char *authorization, double now,
                               const srv_token **out);
/* The token list from spec's tokens and its tokens file (resolved against
 * cfg's config folder), plus the admin-token file's token when the server
 * made one: what a start and a SIGHUP build (srv_config.c). Returns false
 * with "FILE:LINE: ..." diagnostics in err when the tokens file is
 * unreadable (*io_error set; may be NULL) or invalid (then nothing is made). */
bool srv_tokens_load(const srv_config *cfg, const spec_server *spec, srv_token **out, size_t *n,
                     bool *io_error, char *err, size_t errsz);
/* SIGHUP: re-reads the tokens (srv_tokens_load) and swaps the table; an
 * invalid file keeps the old table. Logged and audited either way. */
bool srv_reload_tokens(srv *s);

/* ---- rate limit (srv_ratelimit.c) ---- */
/* A token bucket: holds up to burst requests, refilled at rate per second.
 * Pure: the time is passed in. */
typedef struct srv_bucket {
    double tokens; /* requests it may take now */
    double at;     /* when tokens was computed */
    bool used;     /* false: never taken from (full) */
} srv_bucket;

/* Takes one request from b at time now: 0 when allowed, else the seconds
 * until one is available (> 0). rate <= 0: always allowed. */
double srv_bucket_take(srv_bucket *b, double rate, double burst, double now);

typedef struct srv_rl_entry {
    unsigned char key[32];
    srv_bucket b;
} srv_rl_entry;

typedef struct srv_rl_count {
    char *label;
    uint64_t n;
} srv_rl_count;

/* The buckets of every token (keyed by the token's hash) and of every
 * client address without a known token, and how often each token was
 * refused. */
typedef struct srv_ratelimit {
    pthread_mutex_t mu;
    double rate, burst; /* rate 0 = no limit */
    srv_rl_entry *items;
    size_t n, cap, max; /* at most max buckets: full ones go first, then the oldest */
    srv_rl_count *counts;
    size_t n_counts;
} srv_ratelimit;

void srv_ratelimit_init(srv_ratelimit *rl, double rate, double burst, size_t max);
/* One request for key at now (monotonic seconds): true when allowed; else
 * *retry_after is whole seconds, at least 1, and label's counter grows. */
bool srv_ratelimit_take(srv_ratelimit *rl, const unsigned char key[32], const char *label,
                        double now, int *retry_after);
/* lathe_http_rate_limited_total{token="..."} lines. */
void srv_ratelimit_metrics(srv_ratelimit *rl, sb *out);
void srv_ratelimit_free(srv_ratelimit *rl);

/* ---- the cluster (srv_cluster.c) ---- */
typedef struct srv_gpu {
    int node;        /* sched node index */
    int index;       /* index within its node: CUDA_VISIBLE_DEVICES */
    char *id;        /* exported id: "0" or an NVML UUID */
    char *model;     /* NVML's name ("NVIDIA H100 80GB HBM3"); NULL for others */
    bool is_virtual; /* from the Cluster file: the work runs on the CPU */
} srv_gpu;

typedef struct srv_cluster {
    spec_file file;         /* holds the spec cluster (from the Cluster file, or made) */
    spec_cluster *spec;     /* teams, priority classes, GPU types */
    sched_cluster *sched;   /* the scheduler's view; teams include token teams */
    plan_catalog catalog;   /* the planner's GPU types (this cluster's) */
    bool has_catalog;
    srv_gpu *gpus;          /* [sched->n_gpus] */
    int cpu_slots;          /* CPU-only jobs at once (cpu mode) */
    bool cpu_mode;          /* no GPU at all: every job runs in a CPU slot */
    char source[32];        /* "cluster", "nvml", "cluster+nvml", "k8s", "cluster+k8s", "none" */
    char note[256];         /* what NVML said */
    int nvml_node;          /* the sched node of this machine's NVML GPUs (NVML index
                               k is its GPU k); -1 when none */
    char **type_product;    /* [sched n_types] a cluster engine's GPU product label value
                               of each type; NULL entries where none */
    char *api_print;        /* operator mode: what the API said of quotas and priority
                               classes when the cluster was built (op_cluster_add) */
} srv_cluster;

/* Builds the cluster from the config (and, for a cluster engine such as
 * Kubernetes, the nodes its backend lists). Problems become diagnostics. */
int srv_cluster_build(const srv_config *cfg, exec_backend *be, srv_cluster *c, diag_list *d,
                      char *err, size_t errsz);
/* A type's GPU product label value (Kubernetes), or NULL. */
const char *srv_cluster_product(const srv_cluster *c, int type);
/* The rack its spec node names (Kubernetes: the rack label's value), or NULL. */
const char *srv_cluster_rack(const srv_cluster *c, int node);
void srv_cluster_free(srv_cluster *c);
/* Known team (in the Cluster file or named by a token)? */
bool srv_cluster_has_team(const srv_cluster *c, const char *team);
/* A sched node's GPU price per hour (its type's); 0 when unknown. */
double srv_cluster_price(const srv_cluster *c, int gpu);
/* The global GPU index of GPU `index` of node `node_name`, or -1. */
int srv_cluster_gpu(const srv_cluster *c, const char *node_name, int index);

/* ---- a job's shape for the scheduler (srv_shape.c) ---- */
typedef struct srv_shape {
    int replicas, per_replica; /* nodes x GPUs per node; 0 in CPU mode */
    uint64_t types;            /* GPU types it may run on (bit i = sched type i) */
    double gpu_memory;         /* bytes per GPU the plan needs */
    double est_duration;       /* seconds of the whole run from the plan; 0 = unknown */
    double step_seconds;       /* one optimizer step; 0 = unknown */
    int64_t steps;             /* optimizer steps of the run; 0 = unknown */
    double checkpoint_every;   /* seconds between checkpoints; 0 = none */
    double max_duration;       /* timeout.maxDuration; 0 = none */
    bool shared;               /* resources.gpu.shared: may share its GPU */
} srv_shape;

/* The stored plan (plan_json: the planner's chosen configuration plus
 * "steps" and "gpu_type_fixed") and the resolved spec as the scheduler
 * sees them. Returns false with a sentence in why when the plan is missing
 * or names a GPU type the cluster lacks. */
bool srv_shape_of(const srv_cluster *c, const char *plan_json, const spec_job *job,
                  srv_shape *out, char *why, size_t whysz);
/* Fills the scheduler's job (id, team, priority, shape) for a job of the
 * cluster; strings are borrowed. Returns false when the team is unknown. */
bool srv_sched_job(const srv_cluster *c, const srv_shape *sh, uint64_t id, const char *name,
                   const char *team, int64_t priority, const char *priority_class,
                   sched_job *out);
/* The stored plan JSON for a plan result (NULL when nothing fits). Caller
 * frees. */
char *srv_plan_json(const plan_result *r, bool gpu_type_fixed);
/* A priority class's value and policy (the cluster default for NULL). */
void srv_priority(const srv_cluster *c, const char *cls, int64_t *value, bool *preempt_lower);

/* ---- store handles for HTTP threads (srv_pool.c) ---- */
typedef struct srv_pool {
    pthread_mutex_t mu;
    char *path;
    store **free;
    size_t n_free, cap;
} srv_pool;

void srv_pool_init(srv_pool *p, const char *db_path);
/* A handle for this thread's request, or NULL with a message in err. */
store *srv_pool_get(srv_pool *p, char *err, size_t errsz);
void srv_pool_put(srv_pool *p, store *st);
void srv_pool_free(srv_pool *p);

/* ---- HTTP counters (srv_metrics.c) ---- */
#define SRV_HIST_BUCKETS 12
typedef struct srv_counter {
    char method[8];
    int code;
    uint64_t n;
} srv_counter;

typedef struct srv_counters {
    pthread_mutex_t mu;
    srv_counter *items;
    size_t n, cap;
} srv_counters;

void srv_counters_init(srv_counters *c);
void srv_counters_add(srv_counters *c, const char *method, int code);
void srv_counters_free(srv_counters *c);

/* ---- the server ---- */
struct srv {
    srv_config cfg;
    exec_backend *be;        /* the executor: local, or k8s (ServerConfig executor) */
    srv_cluster cluster;
    srv_pool pool;
    srv_counters counters;
    store_batcher *writes;   /* HTTP threads' writes: group commit (srv_write) */
    ctl *ctl;
    struct MHD_Daemon *mhd;
    int lock_fd;             /* flock on DATA/server.lock */
    char address[128];
    double started_at;
    atomic_bool stopping;
    bool quiet;
    /* Operator mode (op.h): the store and controller exist only once this
     * replica holds the Lease; until then the API answers 503. */
    struct op *op;
    atomic_bool active;
    /* Tokens: the table requests read (swapped on SIGHUP), the config file
     * a reload reads, and the rate limiter. */
    srv_token_table tokens;
    char *config_path;       /* absolute; NULL = no config file */
    srv_ratelimit ratelimit;
    bool tls;                /* listening with HTTPS */
    char *tls_cert, *tls_key; /* the PEM texts libmicrohttpd was given */
};


/* Whether the store and controller serve (always, outside operator
 * mode); why not when they do not. */
bool srv_active(srv *s, char *why, size_t whysz);
/* Operator mode, on becoming the leader: the cache (the store and the jobs'
 * folders of the data folder) is wiped and opened empty, to be rebuilt from
 * the API before srv_start_controller. */
int srv_open_cache(srv *s, char *err, size_t errsz);
/* Creates and starts the controller (which re-attaches to open attempts),
 * then marks the server active. */
int srv_start_controller(srv *s, char *err, size_t errsz);

/* Prints a log line on stderr ("lathe server: ...") unless quiet. */
void srv_log(const srv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- HTTP (srv_http.c) ---- */
typedef struct srv_req srv_req;

/* Starts libmicrohttpd on the configured address; fills s->address. */
int srv_http_start(srv *s, char *err, size_t errsz);
void srv_http_stop(srv *s);

/* What a handler reads of its request. */
const char *srv_req_method(const srv_req *r);
const char *srv_req_query(const srv_req *r, const char *key);
/* Every value of a repeatable query key, joined with ',' (caller frees);
 * NULL when absent. */
char *srv_req_query_all(const srv_req *r, const char *key);
const char *srv_req_header(const srv_req *r, const char *key);
const char *srv_req_body(const srv_req *r, size_t *len);
const srv_token *srv_req_token(const srv_req *r);
store *srv_req_store(srv_req *r);
/* Every write of an HTTP request goes through here: the writes of
 * concurrent requests share one transaction and one flush to disk (group
 * commit, store_batcher_write), each in a savepoint of its own, and each
 * request learns its result only after that transaction committed, so an
 * acknowledged change is on disk. fn runs on whichever request thread leads
 * the batch, with that thread's store handle (not necessarily r's); it
 * reads and writes only through that handle and the arg it is given. On
 * failure store_error(srv_req_store(r)) says why. Queuing the writes also
 * spares SQLite's sleeping busy handler: the controller's own writes meet
 * at most one HTTP transaction at the lock. */
store_rc srv_write(srv_req *r, store_write_fn fn, void *arg);
srv *srv_req_server(srv_req *r);
/* Keeps the connection open however long it stays quiet (log streams). */
void srv_req_no_timeout(srv_req *r);
/* "user:TEAM" or "admin" for events. */
const char *srv_req_actor(const srv_req *r);
/* The client's address, "IP:PORT" ("[V6]:PORT"), or "" when unknown. */
const char *srv_req_address(const srv_req *r);
/* The token's name for the audit log ("admin" / "user:TEAM" when it has
 * none); "" without a token. */
const char *srv_req_who(const srv_req *r);
/* True when the token has at least scope need; otherwise replies 403
 * forbidden (naming the token's scope and the one needed for what) and
 * returns false. */
bool srv_req_need_scope(srv_req *r, srv_scope need, const char *what);
/* The team a request acts for: the token's team, or for admin ?team= (NULL
 * when admin gave none). */
const char *srv_req_team(const srv_req *r);

/* Replies. Each sets the request's one response. */
void srv_reply_json(srv_req *r, int status, json_t *body); /* steals body */
void srv_reply_text(srv_req *r, int status, const char *content_type, char *text); /* steals */
void srv_reply_empty(srv_req *r, int status);
void srv_reply_error(srv_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 422 (or status) with diagnostics. */
void srv_reply_diags(srv_req *r, int status, const char *code, const char *message,
                     const diag_list *d);
/* A streamed reply: read(cls, buf, max) returns bytes, 0 to be called again
 * later, -1 at the end; done(cls) frees. */
void srv_reply_stream(srv_req *r, int status, const char *content_type,
                      long (*read)(void *cls, uint64_t pos, char *buf, size_t max), void *cls,
                      void (*done)(void *cls));
/* A store failure: 500 with store_error's text, or 503 when busy. */
void srv_reply_store_error(srv_req *r, const char *what);

/* ---- the audit log (srv_audit.c) ---- */
/* Appends a row through srv_write: durable when it returns STORE_OK. */
store_rc srv_audit_write(srv_req *r, const store_audit *a);
/* Appends a row with a store handle of the pool (a reload, outside any
 * request); failures are logged. */
void srv_audit_server(srv *s, const store_audit *a);
/* What a reply body says, for its audit row: the job or experiment it
 * names (target) and a short detail ("job a queued", "jobs a, b", an error's
 * message). Leaves target alone when the body names none. */
void srv_audit_describe(const json_t *body, char *target, size_t targetsz, char *detail,
                        size_t detailsz);

/* ---- JSON (srv_json.c) ---- */
/* A query's time: "2026-12-02T04:00:00Z" (fractions and offsets too) or
 * seconds since the epoch. */
bool srv_parse_time(const char *s, double *out);
/* "2026-11-29T21:54:00Z"; null for 0. */
json_t *srv_json_time(double t);
json_t *srv_json_str(const char *s);   /* null for NULL */
json_t *srv_json_num(double v);        /* null for NaN */
json_t *srv_json_parse(const char *text); /* null for NULL or bad JSON */
json_t *srv_json_diag(const diag *x);
/* A job as docs/api.md shows it. full: with spec, plan and checkpoints
 * (the events are read for them); otherwise those are null. The GPU-hours
 * and cost of a running attempt are added to the stored totals. */
json_t *srv_job_json(const srv *s, store *st, const store_job *j, bool full);
/* The events of a job as {"items": [...]}. */
json_t *srv_events_json(const store_event_list *l);
/* Looks a job up for the request: by the token's team, or for admin by
 * ?team= or, without it, in every team (409 when the name is in several).
 * Replies 404 / 409 / 500 itself and returns false when not found. */
bool srv_find_job(srv_req *r, const char *name, store_job *out);

/* ---- submissions (srv_submit.c) ---- */
/* Where a submission comes from: the HTTP API (POST /v1/jobs) or the
 * operator (a LoRATrainingJob object). */
typedef struct srv_submit_src {
    const char *body;          /* the document's text (YAML or JSON) */
    size_t len;
    const char *file_name;     /* the name diagnostics give it */
    const char *team;          /* the team it belongs to (a team token's, or the
                                  operator's namespace); NULL = the spec's */
    const char *team_why;      /* why ("the team of this token") */
    const char *team_fix;      /* the suggestion when the spec names another team */
    const char *default_team;  /* when team is NULL and the spec names none */
    const char *actor;         /* "user:TEAM", "admin", "operator" */
    const char *plan_json;     /* the plan when the author chose the resources
                                  (no planner); NULL = plan it */
    const char *plan_summary;  /* that plan in a sentence */
    /* How the write reaches the store: fn(st, arg) in one transaction
     * (srv_write for HTTP requests; the operator's own handle). */
    store_rc (*write)(void *ctx, store_write_fn fn, void *arg);
    /* Called inside that transaction once the jobs are stored (or found
     * stored: existed), to write what belongs with them; NULL = nothing. */
    store_rc (*after)(store *st, void *ctx, const int64_t *ids, size_t n, bool existed);
    void *ctx;
} srv_submit_src;

typedef struct srv_submitted {
    int64_t *ids;        /* the jobs, in the experiment's order */
    size_t n;
    char *team;
    char *experiment;    /* NULL for a lone job */
    int max_concurrent;
    char *conflict_name; /* STORE_CONFLICT: the job whose name holds another spec */
} srv_submitted;

/* Validates, plans and checks the document (the steps of srv_submit.c) and
 * stores it: STORE_OK created, STORE_EXISTS stored before (the same spec),
 * STORE_CONFLICT the name holds another spec, STORE_INVALID with errors in
 * d; the controller is told of new jobs. */
store_rc srv_submit_text(srv *s, const srv_submit_src *src, srv_submitted *out, diag_list *d);
void srv_submitted_free(srv_submitted *r);

/* ---- cancels (srv_api.c) ---- */
/* A cancel as one write (fn of a store write; arg a srv_cancel): the job's
 * state is read inside the transaction, so it applies to the state it
 * finds: queued -> cancelled; placed -> stopping with the stop reason
 * "cancel". STORE_CONFLICT when it already ended (found says how). */
typedef struct srv_cancel {
    int64_t id;
    const char *actor;
    store_state found; /* the state the write found the job in */
} srv_cancel;
store_rc srv_cancel_write(store *st, void *arg);

/* ---- handlers ---- */
void srv_api_submit(srv_req *r);                       /* POST /v1/jobs */
void srv_api_jobs_list(srv_req *r);                    /* GET /v1/jobs */
void srv_api_job_get(srv_req *r, const char *name);    /* GET /v1/jobs/N */
void srv_api_job_delete(srv_req *r, const char *name); /* DELETE /v1/jobs/N */
void srv_api_job_cancel(srv_req *r, const char *name); /* POST /v1/jobs/N/cancel */
void srv_api_job_events(srv_req *r, const char *name);
void srv_api_job_progress(srv_req *r, const char *name);
void srv_api_job_logs(srv_req *r, const char *name);
void srv_api_experiments(srv_req *r, const char *name); /* NULL = list */
void srv_api_nodes(srv_req *r);
void srv_api_teams(srv_req *r);
void srv_api_priority_classes(srv_req *r);
void srv_api_metrics(srv_req *r);
void srv_api_audit(srv_req *r);                        /* GET /v1/audit (admin) */
void srv_api_whoami(srv_req *r);                       /* GET /v1/whoami */
void srv_api_cost(srv_req *r);                         /* GET /v1/cost (srv_usage.c) */
void srv_api_job_attempts(srv_req *r, const char *name); /* GET /v1/jobs/N/attempts */
void srv_api_job_gpu(srv_req *r, const char *name);    /* GET /v1/jobs/N/gpu */
/* A job's GPU history in short ({"samples", "util_avg", "memory_peak",
 * "memory_planned", ...}), or null without samples. */
json_t *srv_job_gpu_summary(store *st, const store_job *j);
void srv_api_healthz(srv_req *r);
void srv_api_readyz(srv_req *r);

#endif
