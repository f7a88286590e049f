/* ctl_internal.h: what the controller's files share (ctl.h says what the
 * controller does).
 *
 *   ctl.c          the thread, the loop, waking, the view, small rules
 *   ctl_jobs.c     the cache of active jobs: refresh from the store, load
 *                  a job's spec and plan once
 *   ctl_run.c      attempts: start, poll, stop, and the end of an attempt
 *                  (success, retry with backoff, OOM re-plan, failure,
 *                  preemption, cancel, timeout)
 *   ctl_sched.c    the scheduling pass and its decisions; CPU slots
 *   ctl_recover.c  re-attaching after a restart
 *
 * Everything here runs on the controller's thread, except the few fields
 * under ctl.mu (wake, quit) and ctl.view_mu (the view).
 */
#ifndef LATHE_CTL_INTERNAL_H
#define LATHE_CTL_INTERNAL_H

#include "ctl.h"

#include "sim/sim.h"

/* One active job (queued, starting, running or stopping) as the controller
 * knows it. */
typedef struct ctl_job {
    int64_t id;
    char *team, *name, *experiment, *priority_class;
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
    double prior_run;    /* run time of earlier attempts (for maxDuration) */

    /* why it waits, as last written to the store */
    char *reason, *reason_code;
    double reason_at;

    /* the current attempt */
    spec_file spec_file; /* holds spec while the job runs (ctl_job_spec) */
    spec_job *spec;      /* the resolved spec; NULL while queued */
    exec_handle *h;
    int attempt;
    double run_started;
    int *gpus;           /* sched GPU indices; NULL for a CPU slot */
    int n_gpus;
    bool cpu_slot;
    double price;        /* per GPU-hour of its GPUs */
    double base_gpu_seconds, base_cost; /* the job's totals before this attempt */
    int64_t last_total;  /* total steps the trainer reported */
    ctl_stop_why stop;
    bool term_sent;
    bool seen;           /* refresh: still active in the store */
} ctl_job;

struct ctl {
    srv *s;
    store *st;
    exec_backend *be;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu; /* wake, quit */
    pthread_cond_t cv;
    bool wake, quit;

    ctl_job **jobs; /* sorted by id */
    size_t n_jobs;

    bool dirty;        /* run a scheduling pass now */
    double next_pass;
    double *usage;     /* per sched team: decayed GPU-seconds */
    double usage_at, usage_saved_at;
    double *spent;     /* per sched team: money this month (ended attempts) */
    char month[16];    /* "2026-11" of spent */
    sim_rng rng;
    char cwd[4096];    /* relative dataset paths start here */

    /* the last pass, for the view */
    int last_free_total, last_frag;
    uint64_t hist[SRV_HIST_BUCKETS + 1];
    double hist_sum;
    uint64_t hist_n;

    pthread_mutex_t view_mu;
    ctl_view *view;
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

/* ---- ctl_jobs.c ---- */
/* Reads the active jobs from the store into the cache. */
bool ctl_refresh(ctl *c);
ctl_job *ctl_find(ctl *c, int64_t id);
/* Adds (or returns) the cache entry of a stored job. */
ctl_job *ctl_adopt(ctl *c, const store_job *j);
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

/* ---- ctl_run.c ---- */
/* Starts an attempt on the given GPUs (n = 0: a CPU slot). */
void ctl_start_job(ctl *c, ctl_job *j, const int *gpus, int n, const char *why);
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
/* Writes a queued job's wait reason when it changed (inside the caller's
 * transaction, if any). */
void ctl_set_reason(ctl *c, ctl_job *j, const char *code, const char *text, double now);

/* ---- ctl_recover.c ---- */
/* Re-attaches to every open attempt (at start, before the loop). */
void ctl_recover(ctl *c);

#endif
