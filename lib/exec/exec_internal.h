/* exec_internal.h: what the local backend (exec_local.c, in the server)
 * and its supervisor (exec_shim.c, `lathe exec-shim`) share: the files of
 * a job's folder, the local handle and its JSON, the supervisor's exit
 * record, signals, small process helpers (exec_proc.c), and the sandbox
 * (exec_sandbox.c, exec_sandbox_cfg.c, exec_cgroup.c). Nothing outside
 * lib/exec includes it. */
#ifndef LATHE_EXEC_INTERNAL_H
#define LATHE_EXEC_INTERNAL_H

#include "exec.h"

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- files (docs/executors.md) ----
 *   JOB_DIR/lock                 held (flock) by the supervisor and the
 *                                trainer while an attempt runs
 *   JOB_DIR/current.json         the handle of the newest attempt (find)
 *   JOB_DIR/checkpoints/         CHECKPOINT_DIR (the trainer's)
 *   JOB_DIR/attempt-N/           the attempt's folder, the trainer's cwd
 *                                without a sandbox
 *   JOB_DIR/attempt-N/output.log the trainer's stdout + stderr (.1, .2 ...)
 *   JOB_DIR/attempt-N/handle.json the handle (as current.json)
 *   JOB_DIR/attempt-N/exit.json  written atomically when it has ended
 *   JOB_DIR/attempt-N/shim.log   the supervisor's own messages
 *   JOB_DIR/attempt-N/work/      in the sandbox: the trainer's cwd, HOME, TMPDIR
 *   JOB_DIR/attempt-N/.root/     in the sandbox: the new root's mount point
 * In the sandbox the trainer writes only checkpoints/ and work/: the job's
 * folder and everything above are read-only to it. The server reads what
 * the trainer wrote with O_NOFOLLOW, regular files only.
 */
#define EXEC_LOCK_FILE "lock"
#define EXEC_CURRENT_FILE "current.json"
#define EXEC_LOG_FILE "output.log"
#define EXEC_HANDLE_FILE "handle.json"
#define EXEC_EXIT_FILE "exit.json"
#define EXEC_SHIM_LOG "shim.log"
#define EXEC_HANDLE_VERSION 1
#define EXEC_CONFIG_MAX (16u << 20) /* the supervisor's config, at most */

/* The supervisor forwards these to the trainer's process group, and turns
 * SIGUSR1 into SIGKILL of the group (SIGKILL itself cannot be caught). */
#define EXEC_SHIM_KILL_SIGNAL SIGUSR1
bool exec_signal_forwardable(int sig);

/* ---- the local handle ---- */
typedef struct exec_local_ids {
    char boot_id[40];
    int shim_pid;
    uint64_t shim_start;
    int trainer_pid;
    uint64_t trainer_start;
} exec_local_ids;

/* The parts of a local handle that its JSON holds. */
typedef struct exec_local_desc {
    char *job_dir, *work_dir, *log_path, *checkpoint_dir; /* checkpoint_dir may be NULL */
    int attempt;
    double started_at;
    exec_local_ids ids;
    int *no_retry;
    size_t n_no_retry;
    double term_at, kill_at; /* a cancel: SIGTERM sent at, SIGKILL due at (0 = none) */
    bool kill_sent;
    /* the sandbox ("sandbox" in the JSON; absent in handles of older lathes
     * and of requests without one) */
    bool sandbox_set, sandboxed;
    long long sandbox_uid, sandbox_gid; /* -1 = the supervisor's */
    char *sandbox_note;                 /* what was applied, or why not */
} exec_local_desc;

/* The handle as JSON text (caller frees). */
char *exec_local_desc_json(const exec_local_desc *d);
/* Parses a handle; false with a message for JSON of another backend or
 * version, or a missing field. */
bool exec_local_desc_parse(const char *text, exec_local_desc *d, char *err, size_t errsz);
void exec_local_desc_free(exec_local_desc *d);

/* ---- the server's side of a local handle (exec_local.c, exec_local_poll.c) ---- */

/* Incremental reader of the rotated output log: keeps the file it reads
 * open, and at its end follows the rotation (output.log.K .. .1, output.log)
 * without reading anything twice. */
typedef struct exec_log_reader {
    char *path;
    int fd;
    uint64_t ino;
    sb partial;  /* a line not finished yet */
    long line_no;
} exec_log_reader;

/* What polls of one attempt found, whatever the backend (exec_tally.c):
 * the points and checkpoints of the current poll (exec_update points
 * here), deduplicated across sources and polls. */
typedef struct exec_tally {
    exec_progress *pts;
    size_t n_pts, cap_pts;
    exec_checkpoint *cks;
    size_t n_cks, cap_cks;
    bool done;
    char *adapter;
    int64_t last_step, last_ckpt, total_steps;
    bool oom_line;     /* an out-of-memory line was seen */
    long oom_line_no;  /* its number among the lines given (1-based) */
    char oom_text[160];
    long lines;        /* lines given to exec_tally_line */
} exec_tally;

void exec_tally_init(exec_tally *t);
void exec_tally_free(exec_tally *t);
/* Forgets the current poll's points and checkpoints (not the dedup state). */
void exec_tally_clear(exec_tally *t);
/* A point, kept when its step is past the last one (total filled in); an
 * evaluation alone (eval_loss, no loss) of the last step joins its point,
 * or is a point of that step when that one went out with an earlier poll. */
void exec_tally_point(exec_tally *t, exec_progress p, double now);
/* A checkpoint, kept when its step is past the last one. */
void exec_tally_checkpoint(exec_tally *t, int64_t step, const char *path);
/* One line of trainer output: out-of-memory messages and the built-in
 * trainer's [lathe-train] lines (start, step, checkpoint, resume, done). */
void exec_tally_line(exec_tally *t, const char *line, size_t len, double now);
/* Points up at the current poll's findings. */
void exec_tally_update(const exec_tally *t, exec_update *up);

typedef struct local_handle {
    exec_handle h; /* first: what callers see */
    exec_local_desc d;
    exec_log_reader log;
    exec_tally tally; /* the oom line seen by this reader; the supervisor's record decides */
    /* checkpoint folder */
    double next_scan;
    double hf_mtime; /* of the trainer_state.json last read */
    exec_jsonl_reader swift;
    bool swift_set;
    /* the end, once known */
    bool ended;
    exec_status final;
} local_handle;

void exec_log_reader_init(exec_log_reader *r, const char *path);
void exec_log_reader_free(exec_log_reader *r);
/* Hands each new whole line of the output log to fn, at most limit bytes,
 * following the log across its rotations (output.log.1, .2, ...). */
typedef void (*exec_line_fn)(const char *line, size_t len, void *ctx);
void exec_log_read(exec_log_reader *r, size_t limit, exec_line_fn fn, void *ctx);
/* Polls a local handle (exec_local_poll.c). */
void exec_local_poll(exec_handle *h, double now, exec_status *st, exec_update *up);

/* ---- the exit record (exit.json) ---- */
typedef struct exec_exit_record {
    int exit_code;      /* -1 when killed by a signal */
    int signal;         /* 0 = none */
    bool term_sent;     /* the supervisor forwarded SIGTERM / SIGINT */
    bool kill_sent;     /* it killed the group on lathe's request */
    bool oom_line;      /* an out-of-memory message appeared in the output */
    long oom_line_no;   /* its line number in the output (1-based) */
    char oom_text[160]; /* the start of that line */
    int oom_kills;      /* the cgroup's oom_kill count rose by this much; -1 unknown */
    double started_at, ended_at;
} exec_exit_record;

char *exec_exit_record_json(const exec_exit_record *r);
bool exec_exit_record_parse(const char *text, exec_exit_record *r);

/* ---- processes (exec_proc.c) ---- */
/* True when pid runs and started at `start` on this boot. */
bool exec_proc_alive(int pid, uint64_t start, const char *boot_id);
/* Sends sig to pid only if it is still the process that started at
 * `start` (a pidfd makes the check and the send one step where the kernel
 * has them). 0, or an errno value (ESRCH when it is gone). */
int exec_proc_signal(int pid, uint64_t start, int sig);
/* Sends SIGKILL to every process of group pgid that started with or after
 * its leader (which started at leader_start), unless the id now names a
 * group of another leader. Returns how many were signalled. */
int exec_proc_kill_group(int pgid, uint64_t leader_start);
/* The OOM killer's count for this process's memory cgroup (v2
 * memory.events or v1 memory.oom_control), or -1 when unknown. */
int exec_cgroup_oom_kills(void);
/* Finds prog in the PATH of env (a NULL-terminated "NAME=value" array; the
 * default PATH when it has none). A name with a '/' is taken as it is.
 * Returns a malloc'd path, or NULL with errno (ENOENT, EACCES). */
char *exec_find_program(const char *prog, char *const *env);
/* mkdir -p; 0 or an errno value. */
int exec_mkdirs(const char *path, mode_t mode);

/* ---- the sandbox (exec_sandbox.c; its config exec_sandbox_cfg.c, its
 * cgroup exec_cgroup.c) ---- */
/* Async-signal-safe helpers (the probe and the sandbox's child use them):
 * v in decimal into out (24 bytes are enough), its length; text written to
 * an existing file (a /proc or cgroup file), 0 or errno. */
size_t exec_utoa(unsigned long long v, char *out);
int exec_write_file(const char *path, const char *text);
/* Unshares the mount, PID and IPC namespaces; when that is refused to a
 * process that is not root, first a user namespace mapping its own uid and
 * gid (*userns true: no user switch is possible then). 0, or errno with
 * *what naming the step. */
int exec_sandbox_unshare(bool *userns, const char **what);

/* The environment: true for a name that may carry a secret (TOKEN, SECRET,
 * PASSWORD, KEY, CREDENTIAL in any case), never passed on from the
 * server's environment; true for the names of the sandbox's allow-list
 * (PATH, LANG, LC_*, TZ, TERM, CUDA_*, NVIDIA_*, NCCL_*, OMP_*, OPENBLAS_*,
 * MKL_*, HF_HOME, HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE, PYTHON* but
 * PYTHONSTARTUP, the sanitizers' options), secrets excepted. */
bool exec_env_secret_name(const char *entry);
bool exec_env_allowed(const char *entry);

/* The sandbox as the supervisor's config carries it ("sandbox"); gpus:
 * the job has GPUs (no RLIMIT_AS then). */
json_t *exec_sandbox_json(const exec_sandbox *sb, bool gpus);
/* Parsed back; sb points into the fields below. */
typedef struct exec_sandbox_cfg {
    exec_sandbox sb;
    exec_bind *binds;
    exec_path_check *checks;
    const char **hide;
    const char ***roots;
    json_t *json; /* holds the strings */
    bool gpus;
} exec_sandbox_cfg;
bool exec_sandbox_parse(json_t *o, exec_sandbox_cfg *c, char *err, size_t errsz);
void exec_sandbox_cfg_free(exec_sandbox_cfg *c);

/* Each check's path resolved now (policy_resolve): under one of its roots
 * or inside job_dir, else false with the sentence in err. */
bool exec_sandbox_recheck(const exec_sandbox *sb, const char *job_dir, char *err, size_t errsz);

/* The attempt's own cgroup: a child "name" of the supervisor's cgroup v2
 * where that delegates memory or pids, else of its v1 memory and pids
 * hierarchies where they are writable; limits written where given. note
 * says what was made ("no cgroup: ..." when none). */
typedef struct exec_cgroup {
    char *dirs[2];
    size_t n;
    char *memory_dir; /* the one holding the memory controller */
    bool v2, memory_limited, pids_limited;
    char note[512];
} exec_cgroup;
void exec_cgroup_make(exec_cgroup *cg, const char *name, double memory, long processes);
/* Moves this process into it; 0 or errno. */
int exec_cgroup_join(const exec_cgroup *cg);
/* Its OOM killer count, -1 when unknown. */
int exec_cgroup_oom_count(const exec_cgroup *cg);
/* Removes the folders (waiting briefly for the last processes to go). */
void exec_cgroup_remove(exec_cgroup *cg);

/* lchown of path and everything below it, never following a link (a
 * trainer's link cannot give it the server's files). uid or gid -1 = kept.
 * 0 or errno. */
int exec_chown_tree(const char *path, long long uid, long long gid);

/* What a child that could not run the trainer writes to the error pipe. */
typedef struct exec_spawn_msg {
    int err;
    char what[240];
} exec_spawn_msg;
/* Writes it and _exits 127. path may be NULL. */
void exec_spawn_fail(int fd, int e, const char *what, const char *path) __attribute__((noreturn));

/* What the sandboxed child needs (exec_sandbox_child, in the supervisor's
 * child after its process group, PDEATHSIG and descriptors are set). */
typedef struct exec_sandbox_run {
    const exec_sandbox *sb;
    const char *root_dir;    /* an empty folder: the new root's mount point */
    const char *trainer_dir; /* the trainer's cwd, inside a writable bind */
    const char *prog;
    char *const *argv, *const *env;
    int out_w, err_w, errpipe, lock_fd;
    const exec_cgroup *cgroup; /* NULL = none */
    bool gpus, memory_in_cgroup;
} exec_sandbox_run;
/* Namespaces, the new root, limits, the user, the trainer; ends the way
 * the trainer ended. Never returns. */
void exec_sandbox_child(const exec_sandbox_run *r) __attribute__((noreturn));

/* ---- JSON helpers ---- */
const char *exec_json_str(json_t *o, const char *key);  /* NULL when absent or not a string */
double exec_json_num(json_t *o, const char *key, double dflt);

#endif
