/* sim.h: the trace simulator and synthetic traces, over the scheduler.
 *
 *   trace    a CSV of jobs (docs/simulator.md): required columns
 *            job_id,submit_time_s,duration_s,num_gpus; optional
 *            gpu_type,team,priority,gpu_fraction,gpu_milli,
 *            checkpoint_interval_s,estimate_s,duration_censored. Loading
 *            reports bad input as file:line, column, what is wrong and how
 *            to fix it. Real traces are messy: zero and sub-second
 *            durations, duplicate ids, unsorted arrivals, censored
 *            durations and jobs wider than the cluster are taken and
 *            counted (sim_trace.odd, sim_bound.too_wide); with `strict`
 *            each of them is an error instead.
 *   gen      synthetic traces shaped like published cluster studies:
 *            lognormal durations per size class, mostly 1-GPU jobs with a
 *            heavy tail of 8-64-GPU gangs, bursty arrivals with a daily
 *            cycle, teams with quotas. Seeded and reproducible.
 *   run      event-driven replay of a trace through a policy (the same
 *            sched_state code the server uses), with the metrics that
 *            compare policies: completion time, wait, allocation rate,
 *            makespan, preemptions, fragmentation, fairness, cost.
 *
 * The model of a job: it needs `duration` seconds of work on its GPUs; it
 * saves progress every checkpoint interval of run time; a preempted job
 * loses the work since its last checkpoint and resumes from there.
 */
#ifndef LATHE_SIM_H
#define LATHE_SIM_H

#include "base/base.h"
#include "sched/sched.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_MAX_TRACE_BYTES (1u << 30) /* 1 GiB */
#define SIM_MAX_JOBS 5000000

/* ---- traces ---- */
typedef struct sim_job {
    char *id;            /* job_id as written */
    double submit;       /* submit_time_s */
    double duration;     /* duration_s: seconds of work */
    double estimate;     /* estimate_s; 0 = the duration (a perfect estimate) */
    bool estimate_is_limit; /* the estimate is a time limit (SIM_EST_LIMIT): the scheduler is
                               told it as max_duration, with no est_duration */
    int gpus;            /* num_gpus */
    double fraction;     /* gpu_fraction, (0, 1]; below 1 only with num_gpus 1 */
    double checkpoint;   /* checkpoint_interval_s; 0 = none */
    char *gpu_type;      /* NULL = any type */
    char *team;          /* NULL = the default team */
    char *priority;      /* a priority class name or an integer; NULL = default */
    bool censored;       /* duration_censored: the duration is a lower bound */
    int line;            /* its line in the file (for messages) */
} sim_job;

/* Odd rows of real traces, taken as they are and counted (or errors with
 * sim_trace.strict). */
typedef enum {
    SIM_ODD_ZERO,       /* duration_s 0: the job starts and ends at once */
    SIM_ODD_SHORT,      /* duration_s below SIM_SHORT_DURATION */
    SIM_ODD_DUPLICATE,  /* a job_id used before (the job is kept, under the same id) */
    SIM_ODD_UNSORTED,   /* submitted before a row above it (the replay goes by time) */
    SIM_ODD_CENSORED,   /* duration_censored 1: the run was cut off, its duration is a lower bound */
    SIM_ODD_FRACTIONAL, /* asks for part of one GPU (gpu_fraction or gpu_milli); never an error */
    SIM_N_ODD
} sim_odd;
#define SIM_SHORT_DURATION 1.0 /* seconds: "very short" below this (a start that failed at once) */

/* "zero duration", "very short duration", ... for messages. */
const char *sim_odd_name(sim_odd k);

typedef struct sim_trace {
    char *path;
    sim_job *jobs;
    size_t n, cap;
    bool strict;               /* set before parsing: odd rows are errors */
    size_t odd[SIM_N_ODD];     /* rows of each odd kind */
    int odd_line[SIM_N_ODD];   /* the first such row's line */
} sim_trace;

void sim_trace_init(sim_trace *t);
void sim_trace_free(sim_trace *t);
/* Parses CSV text; name is used in messages. Returns the number of errors
 * added to d; jobs with errors are left out. */
size_t sim_trace_parse(const char *name, const char *text, size_t len, sim_trace *t, diag_list *d);
/* Reads and parses a file; an unreadable file is one error. */
size_t sim_trace_load(const char *path, sim_trace *t, diag_list *d);
/* The trace as CSV (every column), caller frees. */
char *sim_trace_to_csv(const sim_trace *t);

/* ---- synthetic traces ---- */
typedef struct sim_gen_opts {
    size_t jobs;          /* jobs to generate (20000) */
    int gpus;             /* cluster size the load is computed for (512) */
    int gpus_per_node;    /* 8 */
    int nodes_per_rack;   /* 16 */
    double load;          /* offered GPU-time / capacity over the arrival period (0.9) */
    int teams;            /* teams team-1.. with shares 40/30/20/10-like (4); 0 = no team column */
    uint64_t seed;        /* 1 */
    double share_jobs;    /* part of 1-GPU jobs asking for a fraction of a GPU (0.1) */
    double high_priority; /* part of jobs in the "high" priority class (0.02) */
    double estimate_noise;/* sigma of a lognormal error on estimate_s; 0 = no column */
    double checkpoint;    /* checkpoint interval written for every job, s (1800) */
    /* for sim_gen_cluster_yaml only: teams by name with their part of the
     * GPUs (quota = floor(gpus x share)) instead of team-1..N; NULL: those */
    const char *const *team_names;
    const double *team_shares;
    const char *comment; /* the YAML's first line (without "# "); NULL: trace-gen's */
    const char *name;    /* metadata.name; NULL: "synthetic" */
} sim_gen_opts;

void sim_gen_defaults(sim_gen_opts *o);
/* Generates a trace (jobs sorted by submit time). */
void sim_gen(const sim_gen_opts *o, sim_trace *out);
/* A Cluster YAML (lathe/v1) that matches a generated trace: nodes of
 * gpus_per_node A100-80GB GPUs in racks, the teams with quotas in
 * proportion to their share of jobs (borrowing allowed), and the priority
 * classes "high" and "default". Caller frees. */
char *sim_gen_cluster_yaml(const sim_gen_opts *o);

/* ---- public traces in lathe's form (convert.c) ---- */
typedef enum {
    SIM_FROM_PHILLY,   /* Microsoft Philly 2017 cluster_job_log (JSON): jobid, vc (the team),
                          submitted_time, attempts [{start_time, end_time, detail [{gpus}]}] */
    SIM_FROM_LINGJUN,  /* Alibaba Lingjun 2023 jobs as Crux publishes them (CSV: job_id,
                          submit_time[_s], duration[_s], num_gpus) */
    SIM_FROM_PAI_OPENB,/* Alibaba PAI 2023 openb pod list (CSV: name or job_id, creation_time
                          or submit_time_s, scheduled_time[_s], deletion_time or end_time_s,
                          num_gpu[s], gpu_milli, pod_phase or status[, duration_censored]) */
} sim_format;

/* "philly", "lingjun", "pai-openb". */
bool sim_format_parse(const char *s, sim_format *out);

typedef struct sim_convert_stats {
    size_t rows;      /* jobs read */
    size_t kept;      /* written */
    size_t no_gpu;    /* asked for no GPU (CPU-only tasks): left out */
    size_t never_ran; /* never started, or no end and no duration: left out */
    size_t censored;  /* kept with duration_censored 1 (running when the trace ended) */
} sim_convert_stats;

/* Converts a public trace into jobs, sorted by submit time, the first
 * submitted at 0. Returns the number of errors added to d (file:line,
 * field); rows with errors are left out. */
size_t sim_convert(sim_format f, const char *name, const char *text, size_t len, sim_trace *out,
                   sim_convert_stats *st, diag_list *d);

/* ---- teams from real quotas (convert.c) ---- */
/* Reads a per-team quota table by day (Helios' cluster_gpu_number.csv:
 * date,<team>...,total) into each team's average GPUs over the days; teams
 * with none on average are left out; names are lowercased (a Cluster's
 * team names are DNS-1123 labels). Returns the number of errors. */
size_t sim_quota_parse(const char *name, const char *text, size_t len, char ***teams, double **gpus, int *n,
                       diag_list *d);
/* Gives every job a team, drawn with chances in proportion to weights
 * (seeded; the same seed gives the same teams). */
void sim_assign_teams(sim_trace *t, char *const *teams, const double *weights, int n, uint64_t seed);

/* ---- what the scheduler is told: estimate modes ---- */
typedef enum {
    SIM_EST_TRACE, /* the trace's estimate_s, else the exact duration */
    SIM_EST_EXACT, /* the exact duration (estimate_s ignored) */
    SIM_EST_NOISE, /* the duration off by a lognormal factor exp(sigma x N(0,1)): a planner's
                      estimate from its throughput model */
    SIM_EST_LIMIT, /* only a time limit: the smallest round limit (30m, 1h, 2h, 4h, 8h, 12h,
                      1d, 2d, 3d, 5d, 7d, 14d, 30d, then whole 30 days) at least
                      SIM_LIMIT_FACTOR x the duration, as users set maxDuration */
} sim_est_mode;
#define SIM_LIMIT_FACTOR 3.0

/* The round limit for a run of `duration` seconds (SIM_EST_LIMIT). */
double sim_round_limit(double duration);
/* Sets every job's estimate_s by the mode (sigma: SIM_EST_NOISE; seed: its
 * random numbers, one per job in trace order). */
void sim_trace_set_estimates(sim_trace *t, sim_est_mode mode, double sigma, uint64_t seed);

/* ---- deterministic random numbers (xoshiro256**, seeded by splitmix64) ---- */
typedef rng_state sim_rng; /* base.h's generator */

void sim_rng_seed(sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng *r);
double sim_rng_uniform(sim_rng *r); /* [0, 1) */
double sim_rng_normal(sim_rng *r);  /* mean 0, sd 1 */
double sim_rng_exp(sim_rng *r, double mean);

/* ---- replay ---- */
/* A trace resolved against a cluster: names become indexes. Teams named in
 * the trace but not in the cluster are added to it without quotas (with a
 * warning); jobs without a team go to the team "default". */
typedef struct sim_bound {
    sched_job *jobs; /* scheduler view, in trace order */
    double *duration;
    double *checkpoint;
    size_t n;
    size_t too_wide;   /* jobs asking for more GPUs than the cluster (or their type) has:
                          the scheduler refuses them, and they count as rejected */
    int too_wide_line; /* the first one's line */
} sim_bound;

/* Resolves GPU types, teams and priorities. Returns the number of errors
 * added (unknown GPU type or priority class, at file:line; with the
 * trace's strict flag also a job wider than the cluster). */
size_t sim_bind(const sim_trace *t, sched_cluster *c, sim_bound *out, diag_list *d);
void sim_bound_free(sim_bound *b);

typedef struct sim_team_stats {
    double gpu_seconds; /* allocated GPU-seconds */
    double avg_gpus;    /* gpu_seconds / busy period */
    int quota;          /* its quota in GPUs (all types), 0 = none */
    double cost;
    size_t jobs;
    double wait_max;    /* the longest wait of its completed jobs */
} sim_team_stats;

/* What happened to one job. */
typedef struct sim_job_result {
    double first_start; /* -1 when it never started */
    double finish;      /* -1 when it never finished */
    double wait;        /* time spent pending */
    int preemptions;
    int status;         /* 0 done, 1 rejected, 2 unfinished */
} sim_job_result;

typedef struct sim_stats {
    sched_policy policy;
    size_t jobs, completed, rejected, unfinished;
    double jct_avg, jct_median, jct_p99; /* completion time: finish - submit */
    double wait_avg, wait_p99, wait_max; /* time spent waiting in the queue */
    double alloc_rate;  /* allocated GPU-seconds / (GPUs x busy period) */
    double busy;        /* seconds with at least one job in the system */
    double alloc_waiting; /* allocated GPU-seconds / (GPUs x time) while some job waits */
    double waiting;     /* seconds with at least one job waiting */
    /* while some job waits, the part of the GPUs that stood idle because ... */
    double idle_reserved; /* ... they were reserved for the head job (draining for it) */
    double idle_shared;   /* ... they were the unused part of GPUs that jobs share */
    double idle_fragmented; /* ... no waiting job's shape could use them (see frag_avg) */
    double idle_other;    /* ... of anything else: quota, budget, a pass that stopped early */
    double makespan;    /* last finish - first submit */
    size_t preemptions;
    double lost_gpu_hours;
    double frag_avg;    /* time-average of free GPUs no waiting shape could use */
    double frag_pct;    /* the same, as a part of all GPUs (0..1) */
    double cost;
    double jain;        /* Jain's index of teams' allocation over their quota */
    int n_teams;
    sim_team_stats *teams;
    size_t passes;
    double sched_seconds; /* time spent in scheduling passes (not simulated time) */
    sim_job_result *per_job; /* [jobs] in trace order */
    char *explained;         /* with a sim_explain: what the scheduler said, or NULL */
} sim_stats;

void sim_stats_free(sim_stats *s);

/* Optional: explain one job at one simulated time (the first pass at or
 * after `at`). The sentence lands in sim_stats.explained. */
typedef struct sim_explain {
    size_t job; /* index in the trace */
    double at;
} sim_explain;

/* Replays a bound trace on a cluster with one policy configuration.
 * Deterministic. Returns 0, or -1 with a message in err when the scheduler
 * was given something inconsistent (a bug). */
int sim_run(const sched_cluster *c, const sim_bound *b, const sched_config *cfg,
            const sim_explain *explain, sim_stats *out, char *err, size_t errsz);

/* ---- reports ---- */
/* What the replay did with odd rows, one line per kind present ("21 jobs
 * with duration 0 start and end at once (first: line 57)"), nothing when
 * the trace has none. b may be NULL. */
void sim_trace_summary(const sim_trace *t, const sim_bound *b, sb *out);
/* Per-job results as CSV: policy,job_id,submit_s,start_s,finish_s,wait_s,
 * preemptions,status. Caller frees. */
char *sim_report_jobs_csv(const sim_trace *t, const sim_stats *s, size_t n);
/* A text table, one row per policy, then the teams. */
void sim_report_text(const sched_cluster *c, const sim_stats *s, size_t n, sb *out);
/* The same as a JSON document (jansson). Caller frees. */
char *sim_report_json(const sched_cluster *c, const sim_stats *s, size_t n);

#endif
