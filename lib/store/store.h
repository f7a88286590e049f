/* store.h: lathe's durable state, one SQLite 3 database file (WAL).
 *
 * What it holds (docs/store.md has the schema):
 *
 *   jobs         team, name (unique per team), experiment, the submitted spec
 *                text and its hash, the resolved spec and the plan (JSON),
 *                state, priority, times, attempts, retry backoff, why it
 *                waits, placement, latest progress, exit, GPU-seconds and
 *                cost, last checkpoint and the work it saved
 *   attempts     one row per run of a job: node, GPUs, the executor's handle
 *                (JSON, to re-attach after a restart), work folder, log, exit
 *   events       an append-only log per job: time, actor, type, message, JSON
 *   progress     points reported by the trainer (step, loss, lr, tokens/s)
 *   experiments  name, team, max concurrent jobs
 *   kv           small named values (the scheduler's decayed usage per team,
 *                budget spent per month, ...)
 *   audit        every change asked of the API (refused ones too) and every
 *                token reload: when, who, from where, what, the answer
 *
 * Guarantees:
 *
 *   - Every call that changes something is one transaction (or joins the
 *     caller's, see store_tx_begin). When it returns STORE_OK the change is
 *     on disk: synchronous=FULL in WAL mode survives a crash of the process
 *     and of the machine.
 *   - A state change of a job is a compare-and-set on the state the caller
 *     expects, and appends its event in the same transaction: two actors
 *     never both move a job, and no state change exists without its event.
 *   - Submission is idempotent: the same team + name + spec hash returns the
 *     existing job; the same name with another hash is a conflict.
 *   - A failed write (disk full, I/O error) is reported as STORE_ERROR and
 *     the change is not applied. When only the final flush (fsync) of a
 *     commit fails, the change may still be on disk and show up after a
 *     restart: then whole, never in part (tests/store/test_store_fault.c).
 *
 * Threads: a store handle is used by one thread at a time. Open one handle
 * per thread on the same file; WAL lets readers run beside the one writer,
 * and writers wait for each other (busy timeout) instead of failing. Threads
 * that write often at the same time share transactions through a
 * store_batcher (group commit, below): one flush to disk per batch.
 *
 * Times are seconds since the Unix epoch (double), from the store's clock
 * (the real-time clock unless store_set_clock replaced it). 0 means "none".
 *
 * Ownership: strings passed in are copied; results (store_job, lists) are
 * owned by the caller and freed with the matching *_free function.
 */
#ifndef LATHE_STORE_H
#define LATHE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct store store;

/* ---- results ---- */
typedef enum {
    STORE_OK = 0,
    STORE_EXISTS,    /* submit: the same job was already there (idempotent hit) */
    STORE_NOT_FOUND, /* no such job / attempt / experiment / key */
    STORE_CONFLICT,  /* a compare-and-set that did not apply (the job is not in
                        the expected state), a name taken by another spec, a
                        delete of a job that is not final */
    STORE_INVALID,   /* a bad argument: empty name, bad page token, bad JSON */
    STORE_ERROR      /* SQLite or I/O failed; nothing was changed */
} store_rc;

/* "ok", "exists", "not found", "conflict", "invalid", "error". */
const char *store_rc_name(store_rc rc);

/* ---- job states (docs/api.md) ---- */
typedef enum {
    STORE_QUEUED,    /* waiting for the scheduler (also after preemption / before a retry) */
    STORE_STARTING,  /* placed; the executor is launching the trainer */
    STORE_RUNNING,   /* the trainer runs */
    STORE_STOPPING,  /* asked to checkpoint and stop (cancel, preemption, timeout) */
    STORE_SUCCEEDED, /* final */
    STORE_FAILED,    /* final */
    STORE_CANCELLED, /* final */
    STORE_TIMED_OUT  /* final */
} store_state;
#define STORE_N_STATES 8
/* A set of states for filters: STORE_STATE_BIT(STORE_QUEUED) | ... */
#define STORE_STATE_BIT(s) (1u << (unsigned)(s))
#define STORE_STATES_ACTIVE                                                                    \
    (STORE_STATE_BIT(STORE_QUEUED) | STORE_STATE_BIT(STORE_STARTING) |                         \
     STORE_STATE_BIT(STORE_RUNNING) | STORE_STATE_BIT(STORE_STOPPING))

/* "queued", "starting", ... as the API spells them. */
const char *store_state_name(store_state s);
/* Parses an API state name; false for an unknown one. */
bool store_state_parse(const char *name, store_state *out);
/* succeeded, failed, cancelled, timed_out. */
bool store_state_final(store_state s);

/* ---- opening ---- */
typedef struct store_options {
    const char *vfs;      /* SQLite VFS name; NULL = the default (tests pass a
                             fault-injection VFS, see store_fault.h) */
    int busy_timeout_ms;  /* how long a writer waits for another; 0 = 5000 */
    bool read_only;       /* open an existing database for reading only */
} store_options;

/* Opens (creating when absent) the database at path, applies the schema
 * migrations it lacks in one transaction, and sets WAL, synchronous=FULL,
 * foreign keys and the busy timeout. opts may be NULL. Returns NULL on
 * failure with a message in err (errsz bytes): a file that is not a
 * database, a database written by a newer lathe (its schema version is
 * higher than this build knows), a folder that cannot be written. */
store *store_open(const char *path, const store_options *opts, char *err, size_t errsz);
/* Closes the handle (an open transaction is rolled back). NULL is fine. */
void store_close(store *st);
/* The message of the last call that did not return STORE_OK (or ""). */
const char *store_error(const store *st);
/* The schema version this build writes (PRAGMA user_version). */
int store_schema_version(void);
/* Replaces the clock used for every time the store records (tests,
 * simulations). fn returns seconds since the epoch; NULL restores the
 * real-time clock. */
void store_set_clock(store *st, double (*fn)(void *ctx), void *ctx);
/* The store's current time (its clock). */
double store_now(const store *st);
/* PRAGMA integrity_check and foreign_key_check: STORE_OK when the file is
 * sound, STORE_ERROR with the first problem in store_error otherwise. */
store_rc store_check(store *st);

/* ---- explicit transactions ----
 * Several calls that must apply together (move a job to `starting` and add
 * its attempt) go between store_tx_begin and store_tx_commit. Inside, each
 * call still applies all or nothing (a savepoint): a call that fails leaves
 * the transaction as it was before that call, and the caller decides to
 * commit the rest or roll everything back. Transactions do not nest. */
store_rc store_tx_begin(store *st);
store_rc store_tx_commit(store *st);
void store_tx_rollback(store *st);

/* ---- group commit ----
 * Threads that write at the same time, each with its own handle, can share
 * one transaction and so one flush to disk (SQLite's commit with
 * synchronous=FULL). A store_batcher queues their writes; the thread whose
 * write is first in the queue leads: on its own handle it runs every write
 * queued so far (up to max_batch) in one transaction, each write in a
 * savepoint of its own, commits, and hands every thread its result. Writes
 * that arrive while a batch is being committed form the next batch; a
 * thread alone meets no wait.
 *
 *   - A write's result comes back only after the transaction holding it has
 *     committed: STORE_OK still means "on disk".
 *   - A write that fails (a conflict, an invalid argument) is rolled back to
 *     its savepoint; the other writes of the batch are not affected.
 *   - Writes run in the order they arrived, so a write sees what the writes
 *     before it in its batch did (two submissions of one name in one batch:
 *     the second finds the first).
 *   - When the transaction cannot start or commit (I/O error, full disk,
 *     the lock held past the busy timeout), every write of the batch gets
 *     STORE_ERROR and nothing of the batch is acknowledged. */
typedef struct store_batcher store_batcher;

/* One write. It runs on whichever thread leads its batch, with that
 * thread's handle `st` (not necessarily the caller's), inside the group's
 * transaction; arg is the caller's. It may make any store calls (each one
 * still applies all or nothing) but must not open a transaction
 * (store_tx_begin) nor wait for another thread. Its changes are kept when
 * it returns STORE_OK or STORE_EXISTS and rolled back otherwise. */
typedef store_rc (*store_write_fn)(store *st, void *arg);

/* A group; max_batch: writes in one transaction at most (0 = 128). */
store_batcher *store_batcher_new(size_t max_batch);
/* Frees the group; no write may be in progress. NULL is fine. */
void store_batcher_free(store_batcher *g);
/* Runs fn(handle, arg) in the group's next transaction and returns its
 * result once that transaction committed (STORE_ERROR when it did not).
 * st is the caller's handle, not inside a transaction: it is used when the
 * caller leads the batch, and on failure store_error(st) says what went
 * wrong. Safe from any number of threads, each with its own handle. */
store_rc store_batcher_write(store_batcher *g, store *st, store_write_fn fn, void *arg);

typedef struct store_batcher_stats {
    uint64_t commits;   /* transactions committed (or tried) */
    uint64_t writes;    /* writes taken into them */
    uint64_t max_batch; /* the most writes one transaction held */
    uint64_t waiting;   /* writes queued now for the next transaction */
} store_batcher_stats;

/* Counters since the group was made (for metrics and tests). */
void store_batcher_stats_get(store_batcher *g, store_batcher_stats *out);

/* ---- events ---- */
/* An event to append. actor: "scheduler", "controller", "executor",
 * "user:TEAM", "admin". type: "submitted", "started", "preempted", ... (see
 * docs/api.md). message: a sentence. data_json: a JSON object or NULL. */
typedef struct store_event {
    const char *actor;
    const char *type;
    const char *message;
    const char *data_json;
} store_event;

/* An event as read back. */
typedef struct store_event_row {
    int64_t seq; /* increasing over the whole database */
    int64_t job_id;
    double at;
    char *actor, *type, *message;
    char *data_json; /* NULL when none */
} store_event_row;

typedef struct store_event_list {
    store_event_row *items;
    size_t n;
} store_event_list;

/* ---- jobs ---- */

/* Latest progress of a job, or one point of its history. Unknown numbers
 * are NAN (doubles) or -1 (integers). */
typedef struct store_progress {
    int64_t step, total_steps;
    double epoch, loss, learning_rate, tokens_per_second, eta_seconds;
    double at; /* when it was reported (0: the store's clock at the write) */
    bool has_eval;    /* the step was evaluated: */
    double eval_loss; /* the mean loss over the job's eval set after it */
} store_progress;

/* A job as stored. Strings are NULL when absent. */
typedef struct store_job {
    int64_t id;           /* > 0, increasing: newer jobs have larger ids */
    char *team, *name;
    char *experiment;     /* NULL for a lone job */
    char *spec_text;      /* the submitted YAML / JSON, as received */
    char *spec_hash;
    char *spec_json;      /* the resolved spec (spec_job_to_json) */
    char *plan_json;      /* the planner's chosen plan */
    store_state state;
    char *priority_class; /* NULL = the cluster default */
    int64_t priority;
    double created_at, updated_at, started_at, finished_at; /* started: first run; 0 = none */
    int attempts;         /* attempts made so far (the latest attempt's number) */
    int max_retries;
    double not_before;    /* a retry's backoff: not before this time; 0 = none */
    char *wait_reason;    /* why it waits (the scheduler's sentence) */
    char *placement_json; /* {"node":..,"gpu_type":..,"gpus":[..]} while placed */
    store_progress progress; /* latest reported; step -1 when none yet */
    /* evaluations over all attempts: the latest and the lowest eval loss
     * with their steps (NAN and -1 when none yet; ties keep the earlier) */
    double eval_loss, best_eval_loss;
    int64_t eval_step, best_eval_step;
    int exit_code;        /* of the last attempt that ended; -1 = none */
    int exit_signal;      /* 0 = none */
    char *exit_reason;    /* "oom", "invalid", "signal", "timeout", ... */
    double gpu_seconds;   /* GPU-seconds used so far, all attempts */
    double cost;          /* money so far */
    int64_t checkpoint_step; /* newest checkpoint; -1 = none */
    char *checkpoint_path;
    double checkpoint_at;
    double saved_work;    /* seconds of work the newest checkpoint saved
                             (where a resumed run starts; sched_job.done) */
} store_job;

/* Frees the strings of a job (not the struct itself) and zeroes it. */
void store_job_clear(store_job *j);

/* What a submission carries. */
typedef struct store_submit_req {
    const char *team;           /* required */
    const char *name;           /* required; unique within the team */
    const char *experiment;     /* NULL for a lone job */
    const char *spec_text;      /* required: the request body as received */
    const char *spec_hash;      /* required: any stable digest of the spec
                                   (the same spec must give the same hash) */
    const char *spec_json;      /* the resolved spec; may be NULL */
    const char *plan_json;      /* may be NULL */
    const char *priority_class; /* may be NULL */
    int64_t priority;
    int max_retries;
    const char *wait_reason;    /* the initial reason; may be NULL */
    const store_event *event;   /* appended with the job; NULL = a default
                                   "submitted" event by "controller" */
} store_submit_req;

/* Adds a job in state queued with its event, in one transaction.
 * STORE_OK: created, *id set. STORE_EXISTS: the same team + name + hash is
 * already stored, *id is that job (nothing written). STORE_CONFLICT: the
 * name is taken by a different spec (*id is the existing job).
 * STORE_INVALID: a required field is missing. */
store_rc store_submit(store *st, const store_submit_req *req, int64_t *id);

/* Submits n jobs (an experiment's expansion) all or nothing: when any of
 * them conflicts nothing is written, STORE_CONFLICT is returned and
 * *bad_index names it. Otherwise every ids[i] is set and existed[i] (may be
 * NULL) says whether job i was already there; the result is STORE_OK when
 * at least one job was created, STORE_EXISTS when all were already there. */
store_rc store_submit_many(store *st, const store_submit_req *reqs, size_t n, int64_t *ids,
                           bool *existed, size_t *bad_index);

/* Fields a change may write besides the state. Set the STORE_SET_* bits of
 * the fields to write; the others are left as they are. */
enum {
    STORE_SET_PRIORITY = 1u << 0,    /* priority, priority_class */
    STORE_SET_NOT_BEFORE = 1u << 1,  /* not_before (0 clears) */
    STORE_SET_WAIT_REASON = 1u << 2, /* wait_reason (NULL clears) */
    STORE_SET_PLACEMENT = 1u << 3,   /* placement_json (NULL clears) */
    STORE_SET_PLAN = 1u << 4,        /* plan_json and spec_json (a re-plan) */
    STORE_SET_EXIT = 1u << 5,        /* exit_code, exit_signal, exit_reason */
    STORE_SET_USAGE = 1u << 6,       /* gpu_seconds, cost (new totals) */
    STORE_SET_CHECKPOINT = 1u << 7,  /* checkpoint_step, _path, _at, saved_work */
    STORE_SET_MAX_RETRIES = 1u << 8  /* max_retries */
};

typedef struct store_job_update {
    unsigned set; /* STORE_SET_* bits */
    int64_t priority;
    const char *priority_class;
    double not_before;
    const char *wait_reason;
    const char *placement_json;
    const char *plan_json, *spec_json;
    int exit_code, exit_signal;
    const char *exit_reason;
    double gpu_seconds, cost;
    int64_t checkpoint_step;
    const char *checkpoint_path;
    double checkpoint_at; /* 0: the store's clock */
    double saved_work;
    int max_retries;
} store_job_update;

/* Moves job id from state `from` to state `to`, writes the fields of upd
 * (may be NULL) and appends ev (required), in one transaction.
 * STORE_OK: applied. STORE_CONFLICT: the job is not in state `from`
 * (nothing written; *current, may be NULL, says where it is).
 * STORE_NOT_FOUND: no such job. Entering running sets started_at once (the
 * first run); entering a final state sets finished_at. A final state is
 * never left. */
store_rc store_job_transition(store *st, int64_t id, store_state from, store_state to,
                              const store_job_update *upd, const store_event *ev,
                              store_state *current);

/* Writes the fields of upd without changing the state, only when the job
 * is in one of the states of `states` (a STORE_STATE_BIT set; 0 = any), and
 * appends ev when it is not NULL, in one transaction. STORE_CONFLICT when
 * the job is in another state. */
store_rc store_job_update_fields(store *st, int64_t id, unsigned states,
                                 const store_job_update *upd, const store_event *ev);

/* Reads a job by id / by team and name. STORE_NOT_FOUND when absent. */
store_rc store_job_get(store *st, int64_t id, store_job *out);
store_rc store_job_find(store *st, const char *team, const char *name, store_job *out);

/* Removes a final job with its attempts, events and progress.
 * STORE_CONFLICT when the job is not in a final state. */
store_rc store_job_delete(store *st, int64_t id);

/* ---- listing ---- */
typedef struct store_job_filter {
    const char *team;       /* NULL = every team */
    unsigned states;        /* STORE_STATE_BIT set; 0 = every state */
    const char *experiment; /* NULL = any */
    size_t limit;           /* jobs per page; 0 = all */
    const char *page_token; /* from the previous page; NULL = the first */
    bool summary;           /* leave out spec_text, spec_json and plan_json */
    double updated_after;   /* only jobs changed after this time (updated_at); 0 = any */
} store_job_filter;

typedef struct store_job_list {
    store_job *items;
    size_t n;
    char *next_page_token; /* NULL when this is the last page */
} store_job_list;

/* Lists jobs newest first (keyset pagination: a page token stays valid
 * while jobs are added or removed; a page never repeats or skips a job that
 * existed when the first page was read). STORE_INVALID for a token that
 * this function did not make. */
store_rc store_jobs_list(store *st, const store_job_filter *f, store_job_list *out);
void store_job_list_free(store_job_list *l);

/* Job counts grouped by state and by nothing, team or experiment. */
typedef enum { STORE_GROUP_NONE, STORE_GROUP_TEAM, STORE_GROUP_EXPERIMENT } store_group;

typedef struct store_count {
    char *team;  /* the team (STORE_GROUP_TEAM, STORE_GROUP_EXPERIMENT); else NULL */
    char *group; /* the team or the experiment's name; NULL for STORE_GROUP_NONE */
    int64_t by_state[STORE_N_STATES];
    int64_t total;
} store_count;

typedef struct store_count_list {
    store_count *items; /* one per group, sorted by team, then group */
    size_t n;
} store_count_list;

/* team: only that team's jobs (NULL = all). For STORE_GROUP_NONE the list
 * has exactly one item. Jobs without an experiment are not counted under
 * STORE_GROUP_EXPERIMENT. */
store_rc store_count_jobs(store *st, store_group by, const char *team, store_count_list *out);
void store_count_list_free(store_count_list *l);

/* ---- attempts ---- */
typedef struct store_attempt {
    int64_t job_id;
    int number;          /* 1, 2, ... */
    double started_at, ended_at; /* ended 0 = still running (or not known yet) */
    char *node;          /* may be NULL */
    char *gpus_json;     /* e.g. [0,1]; NULL for a CPU job */
    char *executor;      /* backend name, "local" */
    char *handle_json;   /* the executor's handle (exec_handle_to_json); NULL
                            until the executor started it */
    char *work_dir, *log_path;
    int exit_code;       /* -1 = none */
    int exit_signal;     /* 0 = none */
    char *reason;        /* "oom", "lost", "stopped", ... */
    /* usage (schema 4; NAN when not recorded): GPUs held (a shared GPU
     * counts as its part) and their price per GPU-hour from the start, and
     * the GPU-seconds and money the attempt added to its job at its end */
    double gpus, price, gpu_seconds, cost;
} store_attempt;

void store_attempt_clear(store_attempt *a);

typedef struct store_attempt_list {
    store_attempt *items;
    size_t n;
} store_attempt_list;
void store_attempt_list_free(store_attempt_list *l);

/* Adds the job's next attempt (number = attempts + 1, which becomes the
 * job's attempt count) with its node and GPUs. Usually called inside the
 * transaction that moves the job to starting. */
store_rc store_attempt_add(store *st, int64_t job_id, const char *node, const char *gpus_json,
                           int *number);
/* Records how the executor started an attempt (its handle, work folder and
 * log), so a restarted server can re-attach. */
store_rc store_attempt_set_handle(store *st, int64_t job_id, int number, const char *executor,
                                  const char *handle_json, const char *work_dir,
                                  const char *log_path);
/* Records the end of an attempt (ended_at = now). */
store_rc store_attempt_finish(store *st, int64_t job_id, int number, int exit_code,
                              int exit_signal, const char *reason);
store_rc store_attempt_get(store *st, int64_t job_id, int number, store_attempt *out);
/* All attempts of a job, oldest first. */
store_rc store_attempts_list(store *st, int64_t job_id, store_attempt_list *out);
/* Every attempt not ended yet, over all jobs (what a restarted server
 * re-attaches to), oldest first. */
store_rc store_attempts_open(store *st, store_attempt_list *out);

/* ---- events ---- */
/* Appends an event to a job's log (its own transaction, or the caller's). */
store_rc store_event_append(store *st, int64_t job_id, const store_event *ev);
/* A job's events with seq > after_seq, oldest first, at most limit (0 = all). */
store_rc store_events_list(store *st, int64_t job_id, int64_t after_seq, size_t limit,
                           store_event_list *out);
void store_event_list_free(store_event_list *l);

/* ---- progress ---- */
/* Writes n points of one attempt in one transaction (one fsync for the
 * batch) and makes the last one the job's latest progress. A point whose
 * step was already stored for that attempt replaces it (re-reading a log
 * after a restart does not duplicate points), keeping the numbers the new
 * one does not know (an evaluation reported apart from its step joins it).
 * A point with has_eval updates the job's latest and best eval loss. */
store_rc store_progress_add(store *st, int64_t job_id, int attempt, const store_progress *pts,
                            size_t n);
/* A job's points, all attempts, in step order (a resumed attempt's points
 * after the earlier attempt's). With max_points > 0 and more points stored,
 * returns max_points points evenly spread, always keeping the last. */
store_rc store_progress_list(store *st, int64_t job_id, size_t max_points, store_progress **pts,
                             size_t *n);

/* ---- usage and GPU history (store_usage.c) ---- */
/* An attempt's usage; NAN fields are left as they are. */
typedef struct store_attempt_usage {
    double gpus, price;       /* when it starts */
    double gpu_seconds, cost; /* when it ends */
} store_attempt_usage;

/* Records an attempt's usage (STORE_NOT_FOUND when it does not exist).
 * Joins the caller's transaction: the start's and the end's. */
store_rc store_attempt_set_usage(store *st, int64_t job_id, int number,
                                 const store_attempt_usage *u);

/* One attempt that ran in a window, with what `lathe cost` groups it by. */
typedef struct store_usage_row {
    int64_t job_id;
    char *team, *name, *experiment; /* experiment NULL for a lone job */
    store_state state;              /* the job's */
    int attempt;
    double started_at, ended_at;    /* ended 0: still running */
    double gpus, price;             /* as recorded; for attempts of an older
                                       schema: the GPUs of gpus_json and the
                                       job's mean price */
    double gpu_seconds, cost;       /* at its end; NAN while running (or older) */
    double job_gpu_seconds, job_cost; /* the job's totals of ended attempts */
    double planned_gpu_hours, planned_cost; /* the plan's run; NAN when unknown */
} store_usage_row;

/* The attempts that held GPUs at some time in [since, until] (0 = no
 * bound), of one team (NULL = all), ordered by job then attempt. CPU-slot
 * attempts (no GPU) are left out. */
store_rc store_usage_list(store *st, const char *team, double since, double until,
                          store_usage_row **out, size_t *n);
void store_usage_free(store_usage_row *rows, size_t n);

/* A GPU sample of a job: what NVML said of the GPUs it runs on, at once. */
typedef struct store_gpu_sample {
    int64_t job_id;
    int attempt;
    double at;
    int gpus;         /* GPUs sampled */
    double util;      /* mean utilisation over them, percent */
    double mem_used;  /* the most memory used on one of them, bytes */
    double mem_total; /* that GPU's memory, bytes */
    double power;     /* watts, summed */
    double temp;      /* degrees C, the hottest */
} store_gpu_sample;   /* NAN: not reported */

/* Appends n samples (of any jobs) in one transaction; a sample at a time a
 * job already has replaces it. STORE_INVALID for gpus < 1. */
store_rc store_gpu_samples_add(store *st, const store_gpu_sample *s, size_t n);
/* A job's samples in time order, thinned to max_points (0 = all) evenly
 * spread, the last kept. */
store_rc store_gpu_samples_list(store *st, int64_t job_id, size_t max_points,
                                store_gpu_sample **out, size_t *n);

typedef struct store_gpu_summary {
    size_t samples;
    double util_avg;   /* mean utilisation, percent (NAN without samples) */
    double mem_peak;   /* the most memory used on one GPU, bytes */
    double power_avg;  /* watts */
    double first_at, last_at;
} store_gpu_summary;

store_rc store_gpu_summary_get(store *st, int64_t job_id, store_gpu_summary *out);

/* ---- experiments ---- */
typedef struct store_experiment {
    char *team, *name;
    int max_concurrent; /* 0 = no limit */
    double created_at;
} store_experiment;

/* Creates the experiment, or updates max_concurrent of an existing one. */
store_rc store_experiment_put(store *st, const char *team, const char *name, int max_concurrent);
store_rc store_experiment_get(store *st, const char *team, const char *name,
                              store_experiment *out);
/* team NULL = every team; sorted by team, then name. */
store_rc store_experiments_list(store *st, const char *team, store_experiment **out, size_t *n);
void store_experiment_clear(store_experiment *e);
void store_experiments_free(store_experiment *list, size_t n);

/* ---- small named values ---- */
/* value: any text (JSON by convention). */
store_rc store_kv_set(store *st, const char *key, const char *value);
/* *value is the caller's to free; STORE_NOT_FOUND when absent. */
store_rc store_kv_get(store *st, const char *key, char **value);
store_rc store_kv_delete(store *st, const char *key);

/* ---- the audit log (store_audit.c) ---- */
typedef struct store_audit {
    int64_t id;      /* increasing; set by the store */
    double at;       /* 0 on append = the store's clock */
    char *actor;     /* the token's name ("admin", "user:TEAM" when it has none),
                        "operator", "controller" or "sighup"; required */
    char *team;      /* the team it acted for; NULL for admin and the server */
    char *address;   /* the client's "IP:PORT" ("[V6]:PORT"); NULL = none */
    char *method;    /* "POST", "DELETE", "SIGHUP"; required */
    char *path;      /* "/v1/jobs/x/cancel", or a file for a reload */
    char *target;    /* the job or experiment it named; NULL = none */
    int status;      /* the HTTP status of the answer (200 for a reload that applied) */
    char *detail;    /* "created jobs 4, 5", "token expired"; NULL = none */
} store_audit;

/* Appends a row (its own transaction, or the caller's); id and, when 0,
 * at are the store's. STORE_INVALID without actor or method. */
store_rc store_audit_append(store *st, const store_audit *a);

typedef struct store_audit_filter {
    double since;     /* rows at or after this time; 0 = all */
    const char *team; /* only this team's; NULL = every row */
    size_t limit;     /* at most this many; 0 = 100 */
} store_audit_filter;

/* The newest rows first (by id). Caller frees with store_audit_free. */
store_rc store_audit_list(store *st, const store_audit_filter *f, store_audit **out, size_t *n);
void store_audit_clear(store_audit *a);
void store_audit_free(store_audit *list, size_t n);

#endif
