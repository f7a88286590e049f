/* exec_slurm_internal.h: the pure parts of the Slurm backend
 * (exec_slurm_map.c): Slurm's job states and how they map onto an
 * exec_status, squeue / sacct --json output, `scontrol -o show nodes`
 * lines, host lists, time limits. Tests and fuzz targets include it;
 * nothing outside lib/exec, tests and fuzz does. */
#ifndef LATHE_EXEC_SLURM_INTERNAL_H
#define LATHE_EXEC_SLURM_INTERNAL_H

#include "exec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    SLURM_ST_UNKNOWN,
    SLURM_ST_PENDING,     /* PENDING, CONFIGURING, REQUEUE_HOLD, REQUEUE_FED, RESIZING */
    SLURM_ST_RUNNING,     /* RUNNING, COMPLETING, STAGE_OUT, SIGNALING */
    SLURM_ST_SUSPENDED,   /* SUSPENDED, STOPPED */
    SLURM_ST_REQUEUED,    /* REQUEUED (on its way back to PENDING) */
    SLURM_ST_COMPLETED,
    SLURM_ST_FAILED,      /* FAILED, BOOT_FAIL */
    SLURM_ST_CANCELLED,
    SLURM_ST_TIMEOUT,     /* TIMEOUT, DEADLINE */
    SLURM_ST_OOM,         /* OUT_OF_MEMORY */
    SLURM_ST_NODE_FAIL,
    SLURM_ST_PREEMPTED
} slurm_state;

/* The state of a name such as "RUNNING" or "CANCELLED by 0" (sacct adds
 * who cancelled); UNKNOWN for anything else. */
slurm_state slurm_state_parse(const char *name);
const char *slurm_state_name(slurm_state s);
/* True for the states a job does not leave (it has ended). */
bool slurm_state_final(slurm_state s);

/* One Slurm job as squeue or sacct shows it. */
typedef struct slurm_job {
    uint64_t id;
    char *name, *comment, *reason, *nodes;
    char state_name[32];
    slurm_state state;
    int exit_code;    /* -1 when killed by a signal or unknown */
    int signal;       /* 0 = none */
    int restarts;     /* restart_cnt: how often Slurm requeued it */
    double start, end; /* seconds since the epoch; 0 = not yet */
    double time_limit; /* seconds (--time); 0 = none or unknown */
    int gpus_per_node; /* from tres_per_node; 0 = none */
    uint64_t array_id; /* a job array's task: the array's job id; 0 = not one */
    int array_task;    /* its task id; -1 = none, or the record of pending tasks: */
    char *array_tasks; /* their range ("2-3%2", "4,6-9%2"); NULL = none */
} slurm_job;

void slurm_jobs_free(slurm_job *jobs, size_t n);
/* squeue --json: every job (name, comment, state, state_reason, nodes,
 * exit_code as a wait status, restart_cnt, times). false with err when
 * the text is not squeue's JSON. */
bool slurm_parse_squeue_json(const char *text, size_t len, slurm_job **jobs, size_t *n, char *err,
                             size_t errsz);
/* sacct --json: the jobs (state.current, exit_code.return_code / signal). */
bool slurm_parse_sacct_json(const char *text, size_t len, slurm_job **jobs, size_t *n, char *err,
                            size_t errsz);

/* The exec_status of an attempt whose Slurm job is j: running (with
 * waiting set from a pending reason), or ended and classified. term_sent
 * / kill_sent: lathe's cancel. oom_line: the log showed an out-of-memory
 * message. requeued: Slurm requeued it since the attempt started (its
 * restart count grew): the attempt is over (lost or evicted). A job
 * stopped by the --signal of its time limit (slurm_signalled_by_limit:
 * the caller passes grace >= 0 in the job's time_limit sense) is timed out. */
void slurm_map_status(const slurm_job *j, bool term_sent, bool kill_sent, bool oom_line,
                      bool requeued, const int *no_retry, size_t n_no_retry, exec_status *st);
/* True when a job that lathe did not signal stopped on SIGTERM (exit 143,
 * or the signal) near its time limit: Slurm's --signal=B:TERM@grace, sent
 * up to 60 s early, a grace period before the limit. */
bool slurm_signalled_by_limit(const slurm_job *j, double grace);

/* `scontrol -o show nodes`: one node a line of KEY=VALUE words (a word
 * without '=' belongs to the value before it: Reason=... holds spaces).
 * Returns false with err when no line names a node. */
bool slurm_parse_nodes(const char *text, size_t len, exec_slurm_node **out, size_t *n, char *err,
                       size_t errsz);

/* The first host of a Slurm host list ("n[1-3,7],m2" -> "n1"); false when
 * it is not one. */
bool slurm_first_host(const char *list, char *out, size_t outsz);
/* Every host of a Slurm host list ("n[1-3,7],m2" -> n1 n2 n3 n7 m2), at
 * most max (a range of more is cut); the caller frees with str_list_free.
 * false (nothing in *out) when it is not one. */
bool slurm_hosts(const char *list, size_t max, char ***out, size_t *n);
/* GPUs per node of a job from squeue's tres_per_node ("gres:gpu:4",
 * "gres:gpu:a100:2", "gres/gpu=2"); 0 when none. */
int slurm_tres_gpus(const char *tres);
/* seconds as Slurm's --time D-HH:MM:SS (rounded up to the minute, at least 1). */
void slurm_format_time(double seconds, char *out, size_t outsz);
/* The key of a job's folder in the comment ("dir=%08x"): FNV-1a of its path. */
uint32_t slurm_dir_key(const char *dir);
/* From a comment lathe wrote ("lathe job=T/N attempt=A id=I dir=K"): the
 * attempt, when its key is key; 0 otherwise. */
int slurm_comment_attempt(const char *comment, uint32_t key);
/* True for a string Slurm takes as a name: letters, digits, . _ - + and
 * at most 200 characters. */
bool slurm_name_ok(const char *s);

/* ---- job arrays (docs/slurm.md, "Experiments as job arrays") ---- */
/* True when task is in a range as squeue shows an array's pending tasks
 * ("2-3%2", "1,4-7:3%2", "5"); false for anything else. */
bool slurm_array_range_has(const char *range, int task);
/* The record of task `task` of array array_id: its own, or the record of
 * the array's pending tasks whose range holds it; NULL when none. */
slurm_job *slurm_find_task(slurm_job *jobs, size_t n, uint64_t array_id, int task);


#endif
