/* ctl_internal.h: what the controller's files share (ctl.h says what the
 * controller does).
 *
 *   ctl.c          the thread, the loop, waking, the view, small rules
 *   ctl_jobs.c     the set of active jobs in memory: changes the HTTP side
 *                  reports, the full reload (at start and as a periodic
 *                  consistency check), loading a job's spec and plan once
 *   ctl_run.c      attempts: start, poll, stop, and the end of an attempt
 *                  (success, retry with backoff, OOM re-plan, failure,
 *                  preemption, cancel, timeout)
 *   ctl_sched.c    the scheduling pass and its decisions; CPU slots
 *   ctl_recover.c  re-attaching after a restart
 *   ctl_gpu.c      NVML samples of this machine's GPUs, each job's GPU
 *                  history, fragmentation by GPU
 *
 * Everything here runs on the controller's thread, except the few fields
 * under ctl.mu (wake, quit, the changed ids) and ctl.view_mu (the view).
 */
#ifndef LATHE_CTL_INTERNAL_H
#define LATHE_CTL_INTERNAL_H

#include "ctl.h"

#include "sim/sim.h"

/* Where a job is in the scheduler's incremental state (ctl.sched). */
typedef enum { CTL_SCHED_NONE, CTL_SCHED_PENDING, CTL_SCHED_RUNNING } ctl_sched_as;

/* One active job (queued, starting, running or stopping) as the controller
 * knows it. */
typedef struct ctl_job {
    int64_t id;
    char *team, *name, *experiment, *priority_class;
    int team_index;           /* in the sched cluster; -1 when unknown */
    store_state state;
    double created_at, not_before, saved_work;
    double gpu_seconds, cost; /* totals stored so far */
    int64_t checkpoint_step;  /* the newest checkpoint recorded; -1 = none */
    int attempts, max_retries;
    int64_t priority;

    /* loaded once (ctl_job_load) */
    bool loaded, load_failed;
    srv_shape shape;
    bool type_fixed;     /* the spec named its GPU type (the plan's gpu_type_fixed) */
    double grace;        /* timeout.gracePeriod */
    double backoff, max_backoff; /* retryPolicy */
    int exp_max;         /* the experiment's max concurrent jobs; 0 = none */
    int failures;        /* attempts that failed (they count against maxRetries) */
    int preemptions;     /* times the scheduler preempted it since this server started
                            (the scheduler's reclaim backoff grows with it) */
    double prior_run;    /* run time of earlier attempts (for maxDuration) */

    /* why it waits, as last written to the store (reason_at), and when the
     * sentence was last found unchanged (reason_checked); the code is a
     * string constant ("quota", "backoff", ...) */
    char *reason;
    const char *reason_code;
    double reason_at, reason_checked;

    /* the scheduler's view of it: built once it is loaded (base), and what
     * the scheduler's state holds (ctl_sched.c keeps it in step; given: the
     * pending job it was given) */
    sched_job base;
    bool has_base;
    ctl_sched_as in_sched;
    sched_job given;
    bool touched;        /* in ctl.touched: to bring in step at the next pass */
    bool held;           /* in ctl.held: queued, but its backoff or experiment holds it */
    bool counted_holding; /* held GPUs when its experiment's jobs were last counted */

    /* the current attempt */
    spec_file spec_file; /* holds spec while the job runs (ctl_job_spec) */
    spec_job *spec;      /* the resolved spec; NULL while queued */
    exec_handle *h;
    int attempt;
    double run_started;
    int *gpus;           /* sched GPU indices; NULL for a CPU slot */
    int n_gpus;
    int share;           /* hundredths of each of its GPUs it holds: 100 = whole
                            GPUs, less for a job that shares its GPU */
    bool cpu_slot;
    double price;        /* per GPU-hour of its GPUs */
    double base_gpu_seconds, base_cost; /* the job's totals before this attempt */
    int64_t last_total;  /* total steps the trainer reported */
    ctl_stop_why stop;
    bool term_sent;
    bool seen;           /* reload: still active in the store */
    char *pod_wait;      /* the engine's words for why the running attempt's trainer has
                            not started (exec_status.waiting), as last recorded; NULL = none */
    int prepared;        /* the attempt number the engine prepared (exec_prepare); 0 = none */
    int prepare_failed;  /* the attempt number whose preparation failed */
    double queued_at;    /* when it last entered the queue (submission, or a requeue
                            this server saw) */

    /* its GPU history (ctl_gpu.c), over all attempts: read from the store at
     * its first sample in this server's life, then kept up */
    bool gpu_loaded;
    size_t gpu_n, gpu_util_n;   /* samples, and those with a utilisation */
    double gpu_util_sum, gpu_mem_peak;
} ctl_job;

struct ctl {
    srv *s;
    store *st;
    exec_backend *be;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu; /* wake, quit, changed */
    pthread_cond_t cv;
    bool wake, quit;
    int64_t *changed;   /* jobs others changed (ctl_job_changed), to read again */
    size_t n_changed, cap_changed;

    ctl_job **jobs; /* the active jobs, sorted by id */
    int64_t *ids;   /* their ids, side by side (lookups touch nothing else) */
    size_t n_jobs, cap_jobs;
    bool prune;     /* some job of the set reached a final state: drop it */
    ctl_job **placed; /* the jobs with an attempt under way (a handle) */
    size_t n_placed;
    bool placed_stale; /* a handle came or went: rebuild placed */
    double backoff_at; /* the first end of a queued job's backoff after the last pass; 0 = none */

    sched_state *sched; /* the scheduler's incremental state (GPU mode) */
    int64_t *touched;  /* jobs changed since the last pass (ctl_job_touch) */
    size_t n_touched, cap_touched;
    int64_t *held;     /* queued jobs held back by a backoff or an experiment's
                          limit: looked at again at every pass */
    size_t n_held, cap_held;
    bool exp_stale;    /* an experiment's job started or stopped holding GPUs */
    bool sync_all;     /* look at every job at the next pass (after a reload) */
    bool waits_stale;  /* the queued jobs' counts by reason changed (the view) */
    bool dirty;        /* run a scheduling pass now */
    double next_pass;
    double next_reload;    /* the next consistency check against the store */
    uint64_t reload_fixes; /* differences those checks found (should stay 0) */
    double *usage;     /* per sched team: decayed GPU-seconds */
    double usage_at, usage_saved_at;
    double *spent;     /* per sched team: money this month (ended attempts) */
    char month[16];    /* "2026-11" of spent */
    sim_rng rng;
    char cwd[4096];    /* relative dataset paths start here */

    /* the last pass, for the view */
    int last_free_total, last_frag;
    ctl_hist pass_hist; /* scheduling passes */
    ctl_hist loop_hist; /* turns of the loop */

    pthread_mutex_t view_mu;
    ctl_view *view;

    /* GPU monitoring (ctl_gpu.c): this machine's GPUs through NVML */
    exec_nvml *nvml;
    exec_gpu_sample *samples; /* [cluster n_gpus]: the latest of each */
    double sample_at, next_sample;
    int *frag_need;      /* [n_types] the fewest GPUs per replica a waiting job
                            needs after the last pass; 0 = none waits */
    /* budgets (ctl.c): the threshold each team reached this month */
    double *budget_level; /* [n_teams] 0, 0.8 or 1 */
    char budget_month[16];

    /* a cluster engine's nodes (ctl_nodes_sync): the inventory's version
     * last applied, and the GPUs of each sched node marked down */
    uint64_t nodes_version;
    int *node_down;
    double slurm_nodes_at; /* monotonic time of the last `scontrol show nodes` */

    /* starts held until the end of the pass (ctl_flush_starts): attempts
     * that may go in with others of their experiment (Slurm job arrays) */
    struct ctl_deferred *deferred;
    size_t n_deferred;
};

/* ---- ctl.c ---- */
/* Starting, running or stopping: the job holds its GPUs or CPU slot. */
static inline bool ctl_job_holds(const ctl_job *j)
{
    return j->state == STORE_STARTING || j->state == STORE_RUNNING || j->state == STORE_STOPPING;
}
double ctl_now(void);
void ctl_log(ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* DATA/jobs/<id> (caller frees). */
char *ctl_job_dir(const ctl *c, int64_t id);
/* Adds money to a team's spending this month (kv "spent/YYYY-MM"; joins
 * the caller's transaction). */
void ctl_add_spent(ctl *c, const char *team, double amount, double now);

/* Adds a duration to a histogram (ctl_hist_bounds). */
void ctl_hist_add(ctl_hist *h, double seconds);

/* ---- ctl_jobs.c ---- */
/* Reads every active job from the store and brings the set in step: at
 * start (count_fixes false) and as the periodic consistency check, which
 * counts and logs every difference it had to fix. False when the store
 * cannot be read. */
bool ctl_reload(ctl *c, bool count_fixes);
/* Reads again the jobs others reported changed (ctl_job_changed), and
 * those the controller's own writes found moved. */
void ctl_take_changes(ctl *c);
/* Asks for a job to be read again at the next turn (a change of the
 * controller's that did not apply: someone moved the job first). */
void ctl_job_stale(ctl *c, const ctl_job *j);
/* Drops the jobs that reached a final state from the set. */
void ctl_prune(ctl *c);
/* The jobs with an attempt under way (rebuilt after a handle came or went:
 * set placed_stale). */
ctl_job **ctl_placed(ctl *c, size_t *n);
ctl_job *ctl_find(ctl *c, int64_t id);
/* Adds (or returns) the set's entry of a stored job. */
ctl_job *ctl_adopt(ctl *c, const store_job *j);
/* Something the scheduler sees of job j changed (its state, placement,
 * checkpoint, or it is new): it is brought in step at the next pass. */
void ctl_job_touch(ctl *c, ctl_job *j);
/* Appends id to a growable list of ids. */
void ctl_ids_push(int64_t **ids, size_t *n, size_t *cap, int64_t id);
/* Loads the plan's shape, the spec's timeout and retry settings, the
 * experiment limit and the attempt history once. False when the job cannot
 * be run (it is then failed in the store). */
bool ctl_job_load(ctl *c, ctl_job *j);
/* The resolved spec, read from the store when a job starts and kept while
 * it runs (queued jobs hold none: thousands of them cost little). */
spec_job *ctl_job_spec(ctl *c, ctl_job *j);
void ctl_job_drop_spec(ctl_job *j);
void ctl_job_free(ctl_job *j);
/* Copies the stored fields the controller follows. */
void ctl_job_sync(ctl_job *j, const store_job *s);
/* GPU indices from a placement JSON; false when it names no known GPU. */
bool ctl_placement_gpus(const ctl *c, const char *placement_json, int **gpus, int *n);
/* GPUs a placed job holds, a shared GPU counting as its part of it (for
 * GPU-hours, cost and fair-share usage). */
double ctl_job_gpus_held(const ctl_job *j);

/* ---- ctl_run.c ---- */
/* Starts an attempt on the given GPUs (n = 0: a CPU slot). */
void ctl_start_job(ctl *c, ctl_job *j, const int *gpus, int n, int share, const char *why);
/* Starts the attempts ctl_start_job held back this pass, those of one
 * experiment together (exec_start_many), and records each. */
void ctl_flush_starts(ctl *c, double now);
/* The experiment limit lathe applies to job j: its exp_max, or 0 where
 * Slurm applies it (job arrays with %maxConcurrent, docs/slurm.md). */
int ctl_exp_limit(const ctl *c, const ctl_job *j);
/* The %M of job j's job array when its attempts go in as one; 0 = none. */
int ctl_array_max(const ctl *c, const ctl_job *j);
/* Brings the scheduler's GPUs in step with a cluster engine's nodes: a
 * node that is NotReady, cordoned or gone has all its GPUs down; GPUs that
 * other pods hold are down too (ctl_sched.c). */
void ctl_nodes_sync(ctl *c);
/* Prepares the next attempt of up to budget queued jobs (exec_prepare). */
void ctl_prepare_queued(ctl *c, int budget);
/* Removes a prepared attempt that will not run (exec_unprepare). */
void ctl_unprepare(ctl *c, ctl_job *j);
/* Stores the executor's handle of the current attempt and moves starting ->
 * running (a job asked to stop meanwhile keeps stopping). */
void ctl_record_start(ctl *c, ctl_job *j, const char *note);
/* Polls every running attempt; handles ends. */
void ctl_poll_all(ctl *c, double now);
/* Stop intents, timeouts and attempts without a process. */
void ctl_reconcile(ctl *c, double now);
/* Asks a running job to checkpoint and stop. */
void ctl_begin_stop(ctl *c, ctl_job *j, ctl_stop_why why, const char *message, double now);
/* How the current attempt ended. */
typedef struct ctl_end {
    exec_status st;      /* classified by the executor */
    const char *adapter; /* the final adapter the trainer reported; may be NULL */
    bool not_started;    /* the trainer never ran (its job's lock was held, or the
                            server died before the start): back to the queue
                            without counting a failure */
    double retry_in;     /* not_started: seconds before the next try */
} ctl_end;

/* Ends the current attempt and moves the job, in one transaction: the job's
 * current state and stop reason are read inside it. */
void ctl_attempt_ended(ctl *c, ctl_job *j, const ctl_end *e, double now);
/* A job that cannot run at all: queued -> failed, no retry. */
void ctl_fail_queued(ctl *c, ctl_job *j, const char *reason, const char *message);

/* ---- ctl_sched.c ---- */
void ctl_pass(ctl *c, double now);
/* Takes a job out of the scheduler's state (before it leaves the set). */
void ctl_sched_forget(ctl *c, ctl_job *j);
/* Writes a queued job's wait reason when it changed: a new code at once,
 * the same code with another sentence at most every 10 s. With tx, the
 * first write opens a transaction (*tx becomes true) that the caller
 * commits; without, each write is its own (or joins the caller's). */
void ctl_set_reason(ctl *c, ctl_job *j, const char *code, const char *text, double now,
                    bool *tx);
/* True when the job's reason has this code and was written or found
 * unchanged less than 10 s ago: no need to format the sentence again. */
bool ctl_reason_recent(const ctl_job *j, const char *code, double now);

/* ---- ctl_gpu.c ---- */
/* Opens NVML when the cluster has this machine's GPUs (a log line says
 * what it found, or why monitoring is off). */
void ctl_gpu_open(ctl *c);
void ctl_gpu_close(ctl *c);
/* Samples the GPUs when the interval is over, and stores each placed
 * job's sample. */
void ctl_gpu_sample(ctl *c, double now);
/* After a pass: the fewest GPUs per replica the waiting jobs need, by type. */
void ctl_gpu_frag_need(ctl *c, const sched_result *res);
/* Fills the view's fragmentation marks, samples and jobs' GPU figures
 * (after its GPUs' jobs are in). */
void ctl_gpu_view(ctl *c, ctl_view *v);

/* ---- ctl_recover.c ---- */
/* Re-attaches to every open attempt (at start, before the loop). */
void ctl_recover(ctl *c);

#endif
