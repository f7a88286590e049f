/* ctl.h: the controller, the thread that makes jobs happen.
 *
 * One reconcile loop (ctl.c), woken at once by ctl_wake (a submission, a
 * cancel) and otherwise every poll interval:
 *
 *   1. brings its set of active jobs (queued, starting, running, stopping)
 *      in step: it changes the set itself as it moves jobs, and reads again
 *      only the jobs the HTTP side reports changed (ctl_job_changed: a
 *      submission, a cancel); the whole set is read from the store only at
 *      start and as a periodic consistency check (ctl_jobs.c, which also
 *      keeps what it parsed of each job: spec, plan, scheduler shape);
 *   2. polls every running attempt through the executor (ctl_run.c):
 *      progress points and checkpoints go to the store in batches; an exit
 *      ends the attempt and moves the job (succeeded, retried with backoff,
 *      re-planned after an out-of-memory failure, failed, back to the queue
 *      after a preemption, cancelled, timed out);
 *   3. sends SIGTERM to jobs asked to stop (cancel, preemption, timeout) and
 *      SIGKILL when the grace period is over (the executor does, on poll);
 *   4. runs a scheduling pass (ctl_sched.c) when something changed or the
 *      scheduler's interval passed, on the scheduler's incremental state
 *      (sched_state, the policy code of `lathe simulate`), which it keeps
 *      in step with the set, and applies it: START launches an attempt,
 *      PREEMPT asks a job to checkpoint and stop, WAIT records the reason;
 *   5. publishes a view (GPUs in use, waits, pass times) for the HTTP
 *      threads.
 *
 * On start (ctl_recover.c) it re-attaches to every attempt the store says
 * is open; attempts that died meanwhile are classified and retried or
 * finished by the same rules.
 *
 * Every state change is one store transaction with its event, a
 * compare-and-set on the state the controller expects: an HTTP thread
 * moving the same job (a cancel) makes the controller's change fail, and
 * it reads the job again.
 *
 * Why a job stops is kept in the store's kv table ("stop/<id>" = cancel,
 * preempt or timeout), written in the transaction that enters `stopping`.
 */
#ifndef LATHE_CTL_H
#define LATHE_CTL_H

#include "srv_internal.h"

/* ---- the view the HTTP threads read ---- */
typedef struct ctl_view_job {
    char *name, *team;
    int share; /* hundredths of the GPU */
} ctl_view_job;

typedef struct ctl_view_gpu {
    ctl_view_job *jobs;
    size_t n;
} ctl_view_gpu;

/* Queued jobs of a team waiting for one reason. */
typedef struct ctl_view_wait {
    char *team;
    const char *reason; /* a string constant: "quota", "backoff", "new", ... */
    int team_index;     /* in the sched cluster; -1 when unknown */
    int64_t n;
} ctl_view_wait;

/* A histogram of durations over ctl_hist_bounds. */
typedef struct ctl_hist {
    uint64_t bucket[SRV_HIST_BUCKETS + 1]; /* the last one: +Inf */
    double sum;
    uint64_t n;
} ctl_hist;

/* A job's GPU history so far (ctl_gpu.c), for /metrics. */
typedef struct ctl_view_job_gpu {
    char *name, *team;
    double util_avg;    /* percent; NAN when NVML gave none */
    double mem_peak;    /* bytes, the most one of its GPUs used */
    double mem_planned; /* bytes per GPU the plan said; NAN when unknown */
} ctl_view_job_gpu;

typedef struct ctl_view {
    double loop_at;          /* when the loop last ran (readyz) */
    ctl_view_gpu *gpus;      /* [cluster n_gpus] */
    int n_gpus;
    int *in_use;             /* [n_teams * n_types]: GPUs held by each team's jobs */
    int n_teams, n_types;
    double *spent;           /* [n_teams] money spent this month */
    int *running, *queued;   /* [n_teams] jobs */
    ctl_view_wait *waits;
    size_t n_waits;
    int *free_by_type;       /* [n_types] whole GPUs free on ready nodes */
    int *alloc_by_type;      /* [n_types] GPUs with at least one job (a shared
                                GPU once; in_use counts it for each team) */
    int frag;                /* free GPUs no waiting job's shape can use */
    int cpu_in_use;          /* cpu mode: slots in use */
    ctl_hist pass_hist;      /* scheduling pass durations */
    ctl_hist loop_hist;      /* durations of the loop's turns */
    uint64_t reload_fixes;   /* differences the consistency checks fixed */
    size_t n_active;         /* jobs in the controller's set */
    double *queued_since;    /* [n_teams] when its longest-waiting queued job entered
                                the queue; 0 = none queued */
    double *budget_level;    /* [n_teams] the budget threshold reached this month:
                                0, 0.8 or 1 (ctl.c) */
    bool *frag_gpu;          /* [n_gpus] free, on a node with fewer free GPUs than
                                any waiting job of its type needs (ctl_gpu.c) */
    exec_gpu_sample *samples; /* [n_gpus] NVML's latest figures (ok false: none);
                                NULL when nothing is sampled */
    double sample_at;        /* when they were taken */
    ctl_view_job_gpu *job_gpu; /* the placed jobs with samples */
    size_t n_job_gpu;
} ctl_view;

/* The histogram's upper bounds in seconds (SRV_HIST_BUCKETS of them). */
extern const double ctl_hist_bounds[SRV_HIST_BUCKETS];

/* The share of each GPU a stored placement holds, in hundredths: its
 * "share" (a fraction, present when the job shares its GPU), else 100. */
int ctl_placement_share(const char *placement_json);
/* The same of a parsed placement (NULL: 100). */
int ctl_placement_share_of(const json_t *placement);

/* Creates the controller: its store handle, the local executor, and the
 * re-attachment to open attempts. Returns NULL with a message in err. */
ctl *ctl_new(srv *s, char *err, size_t errsz);
/* Starts the loop thread. */
int ctl_run(ctl *c, char *err, size_t errsz);
/* Something changed: run the loop now (and a scheduling pass). Any thread. */
void ctl_wake(ctl *c);
/* Job id was changed by someone else (submitted, cancelled, deleted): the
 * controller reads it again at its next turn, which starts now. Call it
 * after the change committed. Any thread. */
void ctl_job_changed(ctl *c, int64_t id);
/* The same for several jobs at once (a batch, an experiment): the
 * controller's next turn reads all of them, never only some (so an
 * experiment's jobs are admitted in one pass: Slurm job arrays). */
void ctl_jobs_changed(ctl *c, const int64_t *ids, size_t n);
/* Stops the loop and releases every handle (trainers keep running). */
void ctl_stop(ctl *c);
void ctl_free(ctl *c);

/* The view, under its lock: call ctl_view_release when done. */
const ctl_view *ctl_view_acquire(ctl *c);
void ctl_view_release(ctl *c);

/* ---- shared by the ctl*.c files ---- */
typedef enum { CTL_STOP_NONE, CTL_STOP_CANCEL, CTL_STOP_PREEMPT, CTL_STOP_TIMEOUT } ctl_stop_why;

/* "cancel", "preempt", "timeout" (the kv value); "" for none. */
const char *ctl_stop_name(ctl_stop_why w);
ctl_stop_why ctl_stop_parse(const char *s);
/* The kv key of a job's stop reason: "stop/<id>" (out: 32 bytes). */
void ctl_stop_key(int64_t id, char out[32]);

/* Exponential backoff for retry k (1 = the first retry): base * 2^(k-1),
 * capped, then scaled by a factor in [1 - jitter, 1 + jitter] from u in
 * [0, 1), and capped again. */
double ctl_backoff(double base, double cap, double jitter, int k, double u);

/* The smaller plan tried after an out-of-memory failure: half the
 * micro-batch (accumulation doubled, the effective batch unchanged) and
 * gradient checkpointing on. Returns false when there is nothing left to
 * shrink (micro-batch 1 with checkpointing on); fills `what` (a sentence). */
bool ctl_oom_shrink(int micro, int accum, bool ckpt, int *new_micro, int *new_accum,
                    bool *new_ckpt, char *what, size_t whatsz);

#endif
