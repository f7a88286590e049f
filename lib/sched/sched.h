/* sched.h: the scheduler. Which queued fine-tuning jobs start where, and
 * which running ones give way.
 *
 * The scheduler is one pure, deterministic policy function:
 *
 *     (cluster snapshot, pending jobs, running jobs, usage history, now)
 *         -> decisions: START job J on these GPUs, PREEMPT job K,
 *                       WAIT (with a reason a person understands), REJECT
 *
 * No I/O, no clock, no randomness, no global state. The simulator (lib/sim)
 * and the controller (`lathe server`) call the same code.
 *
 * Two ways to call it:
 *
 *   - sched_decide(): give it everything, get decisions back. Simple; it
 *     builds its indexes from scratch on every call.
 *   - a sched_state that the caller owns and keeps up to date as jobs arrive,
 *     start, end and are preempted (sched_state_add_pending, ..._running,
 *     ..._remove_*), then sched_state_pass() whenever something changed. The
 *     state holds only indexes over what the caller told it; a pass never
 *     changes it, and its decisions equal those of sched_decide() on the same
 *     jobs. The caller applies the decisions it accepts by telling the state
 *     (a started job moves to running, a preempted one back to pending).
 *
 * Policies (all in the same engine, so comparisons are side by side):
 *
 *   fifo    strict FIFO per team queue (Kueue StrictFIFO): priority, then
 *           submit time; the first job that cannot start blocks its team's
 *           queue. First-fit placement, no sharing, no preemption.
 *   greedy  anything that fits starts (Kueue BestEffortFIFO): priority, then
 *           submit time, skipping jobs that do not fit. First fit.
 *   easy    priority, then submit time, with EASY backfill (Slurm): the
 *           first job that cannot start gets a reservation at the earliest
 *           time it fits (from running jobs' estimated ends); later jobs may
 *           start only if they do not delay that reservation. First fit.
 *   lathe   priority, then fair share between teams (usage decaying with a
 *           half-life; `fair_share` off: none), then shortest estimated
 *           work first with aging inside each team: a job's key is its
 *           submit time plus `aging` (1 h) per doubling of its estimated
 *           remaining GPU-seconds (log2(1 + work / 1 GPU-hour)), so small,
 *           short jobs go first however long the backlog, and a job is
 *           passed by a later one only while their difference in doublings
 *           is worth more than the time between them; a narrow job that
 *           runs for days goes ahead by the excess (`long_after`). A running
 *           job past its estimate is expected to run as long again as it
 *           has (overrun rule), not to end at any moment. A job that
 *           gives only a time limit is predicted to run its limit x the
 *           largest actual / limit of the last jobs of its team that
 *           finished (learn-limit rule, off by default). Jobs that waited
 *           `head_after` are tried oldest first until one cannot start: it
 *           holds the reservation (EASY's guarantee), also when it waits
 *           for GPUs other teams hold (the lending pool); its GPUs are those
 *           that would idle least before its start. A job whose key is
 *           `starve_after` in the past is due: it may borrow beyond the
 *           pool and holds its team's quota. Placement is topology-aware
 *           (one NVLink group, one node, one rack when possible), by end
 *           time for single-node jobs (nodes empty whole), cheaper GPU types
 *           first; GPU sharing; preemption for priority and to reclaim lent
 *           quota (only borrowed GPUs, victims no larger than the job, after
 *           it waited `reclaim_wait`, backing off for jobs preempted
 *           before, losing no more work than the reclaiming job brings,
 *           nor more wall time than it runs, never restarting a job that
 *           would then end last),
 *           choosing victims that lose least work.
 *
 * Admission is the same for every policy: team quota per GPU type with
 * borrowing and lending limits, monthly budgets, maximum concurrent jobs.
 * A request that can never be met (more GPUs than the team's quota plus its
 * borrowing limit, more GPUs per replica than any node has) is rejected.
 *
 * Units: times in seconds (any epoch, as long as all agree), memory in
 * bytes, money in the cluster's units. GPU shares are in hundredths of a
 * GPU (SCHED_SHARE_WHOLE = 100 = one whole GPU).
 */
#ifndef LATHE_SCHED_H
#define LATHE_SCHED_H

#include "base/base.h"
#include "spec/spec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCHED_MAX_TYPES 64      /* GPU types in one cluster (a job's allowed set is a bit mask) */
#define SCHED_MAX_NODE_GPUS 64  /* GPUs in one node */
#define SCHED_SHARE_WHOLE 100   /* a whole GPU, in share units */
#define SCHED_UNLIMITED (-1)    /* a quota, borrowing or lending limit that is not set */
#define SCHED_WORK_UNIT 3600.0  /* GPU-seconds: the work of lathe's aging scale (one GPU-hour) */

/* ---- policies ---- */
typedef enum { SCHED_FIFO, SCHED_GREEDY, SCHED_EASY, SCHED_LATHE } sched_policy;
#define SCHED_N_POLICIES 4

/* "fifo", "greedy", "easy", "lathe". */
const char *sched_policy_name(sched_policy p);
/* Parses a policy name; false for an unknown one. */
bool sched_policy_parse(const char *s, sched_policy *out);

/* ---- the cluster snapshot ---- */
typedef enum { SCHED_NODE_READY, SCHED_NODE_DRAINING, SCHED_NODE_DOWN } sched_node_state;

typedef struct sched_gpu_type {
    char *name;            /* "A100-80GB" */
    double memory;         /* bytes */
    double price_per_hour; /* money per GPU-hour; 0 = unknown */
} sched_gpu_type;

typedef struct sched_node {
    char *name;
    int type;      /* index into cluster->types */
    int rack;      /* index into cluster->racks */
    int n_gpus;    /* 1..SCHED_MAX_NODE_GPUS */
    int first_gpu; /* its GPUs are first_gpu .. first_gpu + n_gpus - 1 */
    int first_group, n_groups; /* its NVLink groups (at least one) */
    sched_node_state state;    /* only ready nodes take new jobs */
} sched_node;

/* Quotas are per GPU type; index n_types of each array is "any type"
 * ("nvidia.com/gpu", written "*"). SCHED_UNLIMITED where not set. */
typedef struct sched_team {
    char *name;
    bool limited;      /* false: no quota checks at all (a trace's default team) */
    int *quota;        /* [n_types + 1] nominal GPUs; UNLIMITED = no entry */
    int *borrow_limit; /* [n_types + 1] GPUs it may borrow beyond quota; UNLIMITED = any */
    int *lend_limit;   /* [n_types + 1] idle quota GPUs it may lend; UNLIMITED = all */
    double weight;     /* fair-share weight, > 0 */
    double budget;     /* money per budget period (a month); 0 = none */
    int max_jobs;      /* concurrent running jobs; 0 = no limit */
} sched_team;

typedef struct sched_priority_class {
    char *name;
    int64_t value;
    bool preempt_lower; /* PreemptLowerPriority (true) or Never */
} sched_priority_class;

typedef struct sched_cluster {
    sched_gpu_type *types;
    int n_types;
    sched_node *nodes;
    int n_nodes;
    char **racks;
    int n_racks;
    int n_gpus;
    int *gpu_node;  /* [n_gpus] */
    int *gpu_group; /* [n_gpus] global NVLink group index */
    int n_groups;
    int *group_node; /* [n_groups] */
    int *group_size; /* [n_groups] */
    sched_team *teams;
    int n_teams;
    sched_priority_class *prios;
    int n_prios;
    int default_prio; /* index into prios, -1 = none (value 0, preempts lower) */
    int max_node_gpus;
    int type_gpus[SCHED_MAX_TYPES];     /* GPUs of each type, all nodes */
    int type_max_node[SCHED_MAX_TYPES]; /* most GPUs of each type on one node */
    char error[240]; /* why the last add failed */
} sched_cluster;

/* Builder. Add GPU types first, then nodes and teams. Names are copied.
 * Every add returns the new index, or -1 after printing nothing and adding
 * nothing when an argument is out of range (a duplicate name, an unknown
 * type, too many GPUs); sched_cluster_error() says why. */
sched_cluster *sched_cluster_new(void);
void sched_cluster_free(sched_cluster *c);
int sched_cluster_add_type(sched_cluster *c, const char *name, double memory, double price_per_hour);
/* nvlink: per GPU its group id inside the node (0..), or NULL for one group
 * holding all GPUs. rack: NULL puts the node in a rack of its own name. */
int sched_cluster_add_node(sched_cluster *c, const char *name, const char *rack, int type,
                           int n_gpus, const int *nvlink, sched_node_state state);
/* A team without quotas (limited = false) and weight 1. */
int sched_cluster_add_team(sched_cluster *c, const char *name);
/* Sets one quota entry (type = -1 for "any type") and makes the team limited.
 * borrow / lend: SCHED_UNLIMITED or a count. */
void sched_team_set_quota(sched_cluster *c, int team, int type, int quota, int borrow, int lend);
int sched_cluster_add_priority(sched_cluster *c, const char *name, int64_t value,
                               bool preempt_lower, bool is_default);
/* Lookups by name; -1 when absent. */
int sched_cluster_find_type(const sched_cluster *c, const char *name);
int sched_cluster_find_team(const sched_cluster *c, const char *name);
int sched_cluster_find_node(const sched_cluster *c, const char *name);
int sched_cluster_find_priority(const sched_cluster *c, const char *name);
/* The message of the last failed add (static storage inside c). */
const char *sched_cluster_error(const sched_cluster *c);
/* Total GPUs on ready nodes. */
int sched_cluster_ready_gpus(const sched_cluster *c);

/* Builds the cluster part of a snapshot from a loaded Cluster spec. Problems
 * (a node with an unknown GPU type, more than SCHED_MAX_NODE_GPUS GPUs)
 * become diagnostics naming the file and field; returns NULL on errors. */
sched_cluster *sched_cluster_from_spec(const spec_cluster *s, diag_list *d);

/* ---- jobs ---- */
/* One job as the scheduler sees it. Zero-initialise, then fill. Strings are
 * not copied: they must outlive the state or call that holds the job. */
typedef struct sched_job {
    uint64_t id;      /* unique; the last tie-breaker of every ordering */
    const char *name; /* for reasons; NULL prints "job <id>" */
    int team;         /* index into cluster->teams */
    int64_t priority; /* higher runs first */
    bool preempt_lower; /* may preempt lower-priority jobs (PreemptLowerPriority) */
    bool no_preempt;    /* never preempt this job */
    int replicas;       /* >= 1; all start together or none does (a gang) */
    int gpus_per_replica; /* >= 1; each replica on one node */
    uint64_t types;     /* allowed GPU types (bit i = type i); 0 = any */
    double gpu_memory;  /* bytes per GPU the plan needs; 0 = unknown */
    int share;          /* part of one GPU it needs, 1..100; 0 = a whole GPU.
                           Below 100 (or a gpu_memory below the GPU's) the job
                           may share a GPU with others (lathe policy) */
    bool exclusive;     /* never share its GPUs, whatever its size */
    double submit_time;
    double est_duration; /* seconds of work from scratch; 0 = unknown */
    double max_duration; /* seconds; 0 = none (an estimate never exceeds it) */
    double checkpoint_interval; /* seconds; 0 = none */
    double done;        /* seconds of work saved by checkpoints (where it resumes) */
    int preemptions;    /* times it was preempted so far (lathe stops reclaiming a job
                           that was preempted often) */
    /* running jobs only */
    double start_time;       /* when this run started */
    double last_checkpoint;  /* time of its last checkpoint in this run; 0 = derive
                                from start_time and checkpoint_interval */
    const int *gpus;         /* replicas * gpus_per_replica GPU indices */
} sched_job;

/* ---- configuration ---- */
/* lathe's placement and reservation rules, each of which can be turned off
 * (sched_config.rules) to measure what it brings; all on by default. */
typedef enum {
    SCHED_RULE_END_PACK = 1u << 0,     /* a job that fits on one node goes where the running
                                          jobs end latest after it (least extension of the
                                          node's busy time), so nodes empty whole */
    SCHED_RULE_IDLE_RESERVE = 1u << 1, /* the head's reserved GPUs are those that would stand
                                          idle least before its reserved start */
    SCHED_RULE_OLDEST_HEAD = 1u << 2,  /* jobs that waited head_after are tried oldest first
                                          until one cannot start: that one holds the
                                          reservation (EASY's guarantee); the rest follow
                                          fair share and size */
    SCHED_RULE_POOL_HEAD = 1u << 3,    /* a job waiting for GPUs that other teams hold (the
                                          lending pool) may hold the reservation too */
    SCHED_RULE_RECLAIM_BORROWED = 1u << 4, /* a reclaim takes only borrowed GPUs: the victim's
                                          team keeps at least its quota */
    SCHED_RULE_RECLAIM_SMALL = 1u << 5, /* a reclaim victim holds no more GPUs than the job
                                          that reclaims (no gang broken for a small job) */
    SCHED_RULE_RECLAIM_BACKOFF = 1u << 6, /* a job preempted k times is reclaimed only after
                                          running reclaim_min_run x 2^k */
    SCHED_RULE_OVERRUN = 1u << 7,      /* a running job past its estimate is expected to run
                                          as long again as it has run (its remaining time
                                          grows with its age), not to end at any moment */
    SCHED_RULE_RECLAIM_CHEAP = 1u << 8, /* a reclaim loses no more work (GPU-seconds since the
                                          victims' last checkpoints) than the reclaiming job
                                          will do (its estimated GPU-seconds) */
    SCHED_RULE_RECLAIM_TAIL = 1u << 9, /* a reclaim stops no job that would lose more wall
                                          time than the reclaiming job will run, nor one
                                          that would lose more than reclaim_min_run and,
                                          restarted then and redoing it, end after every
                                          running job and the reclaiming one (estimates) */
    SCHED_RULE_LEARN_LIMIT = 1u << 10, /* a job that gives only a time limit (max_duration, no
                                          est_duration) is predicted to run its limit x the
                                          largest actual / limit of the last
                                          SCHED_LEARN_WINDOW such jobs that finished (its
                                          team's once it has SCHED_LEARN_MIN, else all teams'):
                                          users' limits overstate runs, and finished jobs tell
                                          by how much. For order and reservations only, never
                                          to stop a job (sched_state_add_finished) */
    SCHED_RULE_RESERVE_TAIL = 1u << 11, /* a job that would end after every running job
                                          and after the head (estimates), so that each
                                          second it waits moves the end of the busy period,
                                          may start on the head's reserved GPUs when the
                                          head still fits beside it; once per head job */
    SCHED_RULE_RENT_RESERVE = 1u << 12, /* a job that gives an estimate holds the
                                          reservation only once the GPU-seconds it has
                                          waited (its GPUs x its wait) reach the GPU-seconds
                                          the reservation would leave idle (the drain), or
                                          when it is due (ski rental: rent until the rent
                                          paid equals the price of buying); until then it
                                          waits as under greedy and a later job may hold it */
} sched_rule;
#define SCHED_RULES_ALL 0x1fffu
/* The rules on by default: all but learn-limit, which is measured but left
 * off (docs/scheduler.md, "Learning from time limits"). */
#define SCHED_RULES_DEFAULT (SCHED_RULES_ALL & ~SCHED_RULE_LEARN_LIMIT)
#define SCHED_N_RULES 13
#define SCHED_LEARN_WINDOW 32 /* learn-limit: finished jobs remembered per team and overall */
#define SCHED_LEARN_MIN 8     /* learn-limit: a team's own jobs are used from this many on */

/* "end-pack", "idle-reserve", "oldest-head", "pool-head", "reclaim-borrowed",
 * "reclaim-small", "reclaim-backoff", "overrun", "reclaim-cheap", "reclaim-tail", "learn-limit", "reserve-tail" for one rule bit; NULL for anything
 * else. */
const char *sched_rule_name(unsigned rule);
/* Parses a rule name; false for an unknown one. */
bool sched_rule_parse(const char *s, unsigned *rule);

typedef struct sched_config {
    sched_policy policy;
    double half_life;        /* fair-share usage half-life (default 7 days) */
    double min_run_time;     /* a job younger than this is never preempted (10 min) */
    double reclaim_min_run;  /* nor reclaimed (1 h): a borrower keeps what it got a while */
    double reclaim_wait;     /* lathe: a job reclaims lent quota only after waiting this
                                long; GPUs often free up sooner than that (10 min) */
    double aging;            /* lathe: the wait one doubling of a job's estimated work
                                (GPU-seconds) is worth in its order key: key = submit +
                                aging x log2(1 + work / 1 GPU-hour) (1 h); 0 = the older
                                saturating slack of max_slack and slack_factor */
    double max_slack;        /* lathe, aging 0: bound of the size slack in the order key (6 h) */
    double head_after;       /* lathe: a job that waited this long (its age key, see
                                starve_after) is tried oldest first until the head is
                                found (oldest-head rule) (1 h) */
    double starve_after;     /* lathe: a job whose order key is this much in the past is
                                "due": it goes ahead of fair share (oldest key first) and
                                may borrow beyond other teams' idle quota (48 h) */
    bool due_preempt;        /* lathe: a due job may preempt newer jobs when that costs
                                less than draining GPUs for it would idle (off) */
    double slack_factor;     /* lathe: x = factor * estimated GPU-seconds; slack =
                                max_slack * x / (x + max_slack) (0.5) */
    double long_after;       /* lathe: a job estimated to run longer than this goes
                                ahead in the order by the excess, up to long_max: it
                                would set the end of the busy period (72 h) */
    double long_max;         /* lathe: bound of that advance; 0 = none (4 days) */
    int long_gpus;           /* lathe: only jobs of at most this many GPUs get it (16) */
    bool fair_share;         /* lathe: the next job comes from the team with the lowest
                                fair-share key (decayed usage / weight); off: from the
                                lowest order key whatever its team, teams kept to their
                                quotas by admission and reclaim alone (on) */
    unsigned rules;          /* lathe: SCHED_RULE_* bits (SCHED_RULES_DEFAULT) */
    double default_estimate; /* estimate of a job that gives none (4 h) */
    int gpu_share_limit;     /* jobs sharing one GPU at most (4) */
    int max_preempt_attempts; /* jobs that may try preemption in one pass (8) */
    int backfill_depth;      /* jobs of one shape examined for backfill in one pass (500) */
    bool reasons;            /* give every waiting job a reason (the controller);
                                the simulator turns it off for speed */
} sched_config;

/* Fills the defaults above for a policy. */
void sched_config_default(sched_config *cfg, sched_policy policy);

/* ---- decisions ---- */
typedef enum { SCHED_START, SCHED_PREEMPT, SCHED_WAIT, SCHED_REJECT } sched_action;

typedef enum {
    SCHED_WHY_NONE,
    SCHED_WHY_FITS,          /* START: it fits now (started in order) */
    SCHED_WHY_BACKFILL,      /* START: ahead of the head job, without delaying it */
    SCHED_WHY_AFTER_PREEMPT, /* START: on GPUs freed by preempting others */
    SCHED_WHY_QUOTA,         /* WAIT: team at its quota and may not borrow (limit) */
    SCHED_WHY_POOL,          /* WAIT: borrowing allowed but no idle quota to borrow */
    SCHED_WHY_BUDGET,        /* WAIT: team over its budget */
    SCHED_WHY_MAX_JOBS,      /* WAIT: team at its limit of concurrent jobs */
    SCHED_WHY_NO_FIT,        /* WAIT: not enough free GPUs of the right shape */
    SCHED_WHY_RESERVED,      /* WAIT: first in line; GPUs reserved from `when` */
    SCHED_WHY_BEHIND_HEAD,   /* WAIT: would delay the reserved start of `other` */
    SCHED_WHY_FIFO_BLOCKED,  /* WAIT: behind `other` at the head of a strict FIFO queue */
    SCHED_WHY_TEAM_HELD,     /* WAIT: the team's quota is held for `other`, its longest waiter */
    SCHED_WHY_NODES_DOWN,    /* WAIT: the GPUs it needs are on nodes not ready */
    SCHED_WHY_TOO_BIG,       /* REJECT: more GPUs than its allowed types have */
    SCHED_WHY_NODE_TOO_SMALL,/* REJECT: more GPUs per replica than any node has */
    SCHED_WHY_NO_TYPE,       /* REJECT: no allowed GPU type has the memory it needs */
    SCHED_WHY_OVER_QUOTA,    /* REJECT: more than quota + borrowing limit */
    SCHED_WHY_BAD_JOB,       /* REJECT: a field out of range (team, replicas, share) */
    SCHED_WHY_PREEMPT_PRIORITY, /* PREEMPT: for `other`, of higher priority */
    SCHED_WHY_PREEMPT_RECLAIM,  /* PREEMPT: `other`'s team reclaims quota lent to this team */
    SCHED_WHY_PREEMPT_DUE,      /* PREEMPT: for `other`, which waited long; cheaper than draining */
    SCHED_WHY_TAIL              /* START: ahead of the head `other`, whose reserved start moves
                                   to `when`: it would end after every other job (reserve-tail) */
} sched_why;

/* The facts behind a decision; sched_reason_format() turns them into a
 * sentence. Fields that do not apply are -1 (ints) or 0. */
typedef struct sched_reason {
    sched_why code;
    int team, type, node; /* the team, GPU type and node the reason is about */
    int used, limit;      /* QUOTA/POOL: GPUs the team uses / its quota; MAX_JOBS: jobs */
    int need;             /* GPUs the job needs (NO_FIT with replicas > 1: replicas) */
    int per;              /* GPUs per replica */
    int share;            /* NO_FIT of a sharing job: share units of one GPU */
    int free;             /* NO_FIT: free GPUs of the type; QUOTA: borrowing limit;
                             POOL: idle quota others can lend */
    int best;             /* NO_FIT: most free GPUs on one node (on `node`) */
    int groups;           /* NO_FIT: NVLink groups those GPUs are split across */
    int nodes;            /* NO_FIT: free slots for one replica */
    double amount, limit_amount; /* BUDGET: spent / budget; PREEMPT: lost GPU-seconds;
                                    NO_FIT with `when`: the drain's idle GPU-seconds */
    double when;          /* RESERVED / BEHIND_HEAD / BACKFILL: the reserved start;
                             NO_FIT: when its wait will have paid for a reservation
                             (rent-reserve; 0: not that rule's doing) */
    int64_t priority;     /* PREEMPT_PRIORITY: the preemptor's priority */
    uint64_t other;       /* the head job, the preemptor, the blocking job */
    const char *other_name;
} sched_reason;

typedef struct sched_decision {
    sched_action action;
    uint64_t job;
    const char *name; /* the job's name (may be NULL) */
    int type;         /* START: the GPU type chosen */
    int share;        /* START: share units per GPU (100 = whole GPUs) */
    size_t gpu_off;   /* START: its GPUs are result->gpus[gpu_off .. + n_gpus) */
    int n_gpus;
    sched_reason why;
} sched_decision;

typedef struct sched_result {
    sched_decision *d;
    size_t n, cap;
    int *gpus;
    size_t n_gpus, cap_gpus;
    /* after the decisions: */
    int free_gpus;       /* whole GPUs free on ready nodes */
    int frag_gpus;       /* of those, GPUs no waiting job's shape could use */
    int resv_free_gpus;  /* of those, GPUs reserved for the head job (idle while it drains) */
    uint64_t head;       /* the job holding the reservation (0 = none) */
    double head_start;   /* its reserved start time */
    double wake_at;      /* when a waiting job will have paid for the reservation
                            (rent-reserve) with nothing else happening: a pass
                            then may decide otherwise (INFINITY: no such time) */
    size_t n_start, n_preempt, n_wait, n_reject;
} sched_result;

void sched_result_init(sched_result *r);
void sched_result_free(sched_result *r);
/* A decision's GPU list. */
const int *sched_decision_gpus(const sched_result *r, const sched_decision *d);

/* One sentence for a reason, e.g. "team-a uses 32/32 A100-80GB GPUs of its
 * quota and may not borrow more". now: for "in 2h13m". */
void sched_reason_format(const sched_cluster *c, const sched_reason *r, double now, sb *out);
/* "start", "preempt", "wait", "reject". */
const char *sched_action_name(sched_action a);

/* ---- usage history ---- */
/* Advances decayed usage by dt seconds during which a team held `alloc`
 * GPUs: usage = usage * 2^(-dt/h) + alloc * (h/ln 2) * (1 - 2^(-dt/h)).
 * Usage is in GPU-seconds. */
double sched_usage_advance(double usage, double alloc, double dt, double half_life);

/* Checks a job against what the cluster can ever give it (ignoring what is
 * in use now). Returns true when it can run some day; otherwise fills why
 * (a REJECT reason). */
bool sched_check_job(const sched_cluster *c, const sched_job *j, sched_reason *why);

/* ---- the pure function ---- */
/* A job that ended (ran to completion; not a preemption): what a real
 * scheduler learns once a job has finished. limit: its max_duration where it
 * gave no est_duration (only a limit), else 0 (not recorded); ran: seconds of
 * work it did in all. */
typedef struct sched_finished {
    int team;
    double limit;
    double ran;
} sched_finished;

typedef struct sched_input {
    const sched_job *pending;
    size_t n_pending;
    const sched_job *running; /* with start_time and gpus */
    size_t n_running;
    const double *usage; /* per team: decayed GPU-seconds (sched_usage_advance); NULL = none */
    const double *spent; /* per team: money spent this budget period; NULL = none */
    double now;
    const sched_finished *finished; /* jobs that ended, oldest first; NULL = none (learn-limit) */
    size_t n_finished;
} sched_input;

/* Decides. Returns 0, or -1 when the input is inconsistent (two jobs with
 * one id, a running job on a GPU that does not exist or is over-committed);
 * then err says what (errsz bytes) and out holds no decisions. */
int sched_decide(const sched_cluster *c, const sched_config *cfg, const sched_input *in,
                 sched_result *out, char *err, size_t errsz);

/* ---- incremental state ---- */
typedef struct sched_state sched_state;

/* The cluster must outlive the state and not change while it exists. */
sched_state *sched_state_new(const sched_cluster *c, const sched_config *cfg);
void sched_state_free(sched_state *st);
/* Adds a waiting job (copied; its strings are not). Returns 0, or -1 when
 * its id is already present. */
int sched_state_add_pending(sched_state *st, const sched_job *j);
/* Removes a waiting job (it started elsewhere or was cancelled); false when absent. */
bool sched_state_remove_pending(sched_state *st, uint64_t id);
/* Adds a running job with its placement (job->gpus, start_time). Returns 0,
 * or -1 with a message in err when the id is taken, a GPU index is out of
 * range, or the GPUs cannot hold it (over-committed). */
int sched_state_add_running(sched_state *st, const sched_job *j, char *err, size_t errsz);
bool sched_state_remove_running(sched_state *st, uint64_t id);
/* Records a finished job (call it when a job ends, before or after removing
 * it). Only jobs with f->limit > 0 are kept, the last SCHED_LEARN_WINDOW
 * per team and overall; lathe's learn-limit rule predicts from them the run
 * time of jobs that give only a limit. A prediction is made when a job is
 * added (pending: its order; running: its estimated end), so jobs already
 * held keep theirs. */
void sched_state_add_finished(sched_state *st, const sched_finished *f);
/* A GPU goes down (its node is not ready, or something the scheduler does
 * not manage holds it) or comes back: new placements leave a down GPU
 * alone; a job already on it keeps running. */
void sched_state_set_gpu_down(sched_state *st, int gpu, bool down);
size_t sched_state_n_pending(const sched_state *st);
size_t sched_state_n_running(const sched_state *st);
/* A job held by the state (pending or running), or NULL. */
const sched_job *sched_state_job(const sched_state *st, uint64_t id);

/* Turns the reasons for waiting jobs on or off for later passes (the
 * simulator asks for them only when explaining a job). */
void sched_state_set_reasons(sched_state *st, bool on);

/* One scheduling pass at time now. usage / spent as in sched_input. The
 * result is cleared first. The state is left exactly as it was. */
void sched_state_pass(sched_state *st, double now, const double *usage, const double *spent,
                      sched_result *out);

#endif
