/* exec.h: executors. Where and how a trainer process runs, behind one
 * interface (like SQLite's VFS or Redis's ae_epoll / ae_kqueue).
 *
 * An executor backend (exec_backend) is a struct of function pointers:
 *
 *   start    launch one attempt of a job; returns a handle
 *   poll     what happened since the last poll: still running or ended (with
 *            the exit classified), new progress points, new checkpoints;
 *            also sends SIGKILL when a cancel's grace period has run out
 *   signal   send a signal to the trainer
 *   cancel   SIGTERM now, SIGKILL at the first poll after the grace period
 *            (the caller drives time through poll; nothing sleeps inside)
 *   attach   rebuild a handle from its JSON (stored in the attempt row) in a
 *            new server process: the trainer kept running meanwhile
 *   find     the attempt of a job that runs (or ended) without the caller
 *            knowing its handle: a server killed after the start and before
 *            it stored the handle
 *   release  free a handle (the trainer keeps running)
 *
 * One backend now: local processes (exec_local_new, docs/executors.md). Slurm
 * and Kubernetes come later behind the same interface, so the interface
 * names no pid or engine detail: a job folder and a log file (on shared
 * storage for cluster engines) are all it assumes. The process helpers at
 * the end belong to the local backend.
 *
 * Also here, shared by every backend: the trainer contract's environment,
 * exit classification (out of memory, cannot succeed), the progress formats
 * (the built-in trainer's `[lathe-train]` lines, Hugging Face Trainer's
 * trainer_state.json, ms-swift's logging.jsonl), and the inventory of GPUs
 * (NVML through dlopen, or virtual GPUs from a Cluster spec).
 *
 * Threads: a backend and its handles are used by one thread at a time.
 */
#ifndef LATHE_EXEC_H
#define LATHE_EXEC_H

#include "base/base.h"
#include "spec/spec.h"

#include <jansson.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- results ---- */
typedef enum {
    EXEC_OK = 0,
    EXEC_E_BUSY,    /* start: this job already runs (its lock is held) */
    EXEC_E_INVALID, /* a bad request or handle: no command, command not found,
                       a handle JSON that is not one of this backend's */
    EXEC_E_GONE,    /* signal: the trainer is no longer there */
    EXEC_E_SYSTEM,  /* the system refused: fork, mkdir, a full disk */
    EXEC_E_UNAVAILABLE /* the engine cannot be reached now (the Kubernetes API is
                          down, or answers 429 / 5xx past the retries): nothing
                          started; try again later */
} exec_rc;

/* "ok", "busy", "invalid", "gone", "system", "unavailable". */
const char *exec_rc_name(exec_rc rc);

/* ---- the trainer contract (DESIGN.md 6) ---- */
/* What the trainer's environment says. Strings may be NULL (the variable is
 * then not set); numbers <= 0 are not set, except those noted. */
typedef struct exec_contract {
    const char *job;              /* LATHE_JOB: the job's name, "team/name" */
    int attempt;                  /* LATHE_ATTEMPT (1, 2, ...) */
    const char *spec_path;        /* LATHE_SPEC: the resolved spec (a file) */
    const char *base_model_path;  /* BASE_MODEL_PATH */
    const char *dataset_path;     /* DATASET_PATH */
    const char *eval_dataset_path; /* EVAL_DATASET_PATH: trainingData.evalDatasetPath */
    int lora_rank;                /* LORA_RANK */
    const char *checkpoint_dir;   /* CHECKPOINT_DIR */
    long checkpoint_interval;     /* CHECKPOINT_INTERVAL; set when >= 0 */
    const char *gpus;             /* the placed GPUs as the inventory names
                                     them, "0,1" (or UUIDs): LATHE_GPUS and
                                     CUDA_VISIBLE_DEVICES. NULL or "" = a CPU
                                     job: CUDA_VISIBLE_DEVICES is set empty so
                                     the trainer sees no GPU */
    bool virtual_gpus;            /* LATHE_VIRTUAL_GPUS=1: ids from a Cluster
                                     spec, the work runs on the CPU */
    double gpu_share;             /* LATHE_GPU_SHARE: the part of its GPU a
                                     job that shares one may use ("0.25"; set
                                     when above 0 and below 1), and for CUDA
                                     MPS (effective where its daemon runs):
                                     CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, the
                                     share in percent, and ... */
    double gpu_memory_limit;      /* ... CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
                                     ("0=NNNNM", MiB), bytes; 0 = not set */
    int nnodes, node_rank, nproc_per_node; /* NNODES, NODE_RANK (set when
                                     nnodes > 0, node_rank >= 0), NPROC_PER_NODE */
    const char *master_addr;      /* MASTER_ADDR */
    int master_port;              /* MASTER_PORT */
} exec_contract;

/* Appends the contract's variables as "NAME=value" strings to *env (a
 * growable array of *n strings the caller frees with str_list_free). */
void exec_contract_env(const exec_contract *c, char ***env, size_t *n);

/* What an engine that places work on a cluster (Kubernetes; Slurm later)
 * needs beyond the argv: whose job it is, where lathe's scheduler put it,
 * and what it may use. The local backend ignores it. Strings are borrowed. */
typedef struct exec_cluster_req {
    int64_t job_id;              /* the store's id (labels, adoption after a restart) */
    const char *team, *name;     /* the job's team and its name within the team */
    const char *experiment;      /* NULL when it is not part of one */
    const char *image;           /* trainer.image; NULL = the engine's image of lathe */
    bool builtin;                /* the built-in trainer: the engine runs
                                    `lathe train SPEC` with its own path to SPEC */
    const char *spec_yaml;       /* the resolved spec's text (the file the trainer reads) */
    int nnodes, gpus_per_node;   /* replicas and GPUs per replica; 0 GPUs = a CPU job */
    double cpu, memory;          /* cores and bytes per replica; 0 = not given */
    const char *gpu_type;        /* lathe's GPU type name; NULL = any */
    const char *gpu_product;     /* that type's value of the engine's GPU product label
                                    (Kubernetes: nvidia.com/gpu.product); NULL = the
                                    settings' gpuProducts entry, else the type's name */
    const char *const *nodes;    /* the nodes lathe placed it on, one per replica;
                                    n_nodes 0 = wherever the engine likes */
    size_t n_nodes;
    const char *rack;            /* the rack of those nodes; NULL = any */
    const char *priority_class;  /* NULL = none */
    const char *checkpoint_pvc;  /* checkpoint.storage.pvcName; NULL = the engine's default */
    const char *service_account; /* the team's policy serviceAccount: the pods run as it;
                                    NULL = the engine's setting, else no service account
                                    token is mounted (automountServiceAccountToken false) */
    double grace;                /* timeout.gracePeriod, seconds */
    double max_duration;         /* timeout.maxDuration left for this attempt; 0 = none */
    double time_limit;           /* maxDuration left plus the grace period (Slurm's
                                    --time, whose --signal comes a grace period
                                    before it); 0 = none */
    /* Operator mode (docs/kubernetes.md, "Operator mode"): the custom
     * resource the job comes from (a LoRATrainingJob). The attempt's Job gets
     * an ownerReference to it and the label lathe.dev/owner-uid = uid; an
     * existing Job is this attempt's when that label and the attempt label
     * match, not the store id (a cache rebuilt from the API renumbers its
     * jobs). uid NULL = none (the store id identifies the Job, as before). */
    struct {
        const char *api_version, *kind, *name, *uid;
    } owner;
    /* A user's own Job (batch/v1, created with suspend: true and labelled
     * lathe.dev/queue) that lathe admits instead of making one: prepare
     * makes nothing; start admits that Job (placement, suspend false);
     * cancel and preemption suspend it again and never delete it (it is the
     * user's object). NULL = lathe makes the attempt's Job. */
    const char *adopt;
    /* The placement lathe's scheduler chose, as the store keeps it (JSON);
     * written into the Job's annotation lathe.dev/placement at admission, so
     * a server that rebuilds its cache from the API knows where it runs.
     * NULL = none. */
    const char *placement_json;
    /* Slurm: the team's account and user from the policy (slurmAccount,
     * slurmUser); NULL = the settings' accounts mapping, the server's user. */
    const char *slurm_account, *slurm_user;
    /* Slurm, when Slurm decides: > 0 = this attempt may go in with other
     * attempts of its experiment that start in the same turn as one job
     * array whose tasks run at most array_max at once (--array=0-N%M,
     * through start_many); 0 = its own sbatch. */
    int array_max;
} exec_cluster_req;

/* ---- the sandbox of a local trainer (exec_sandbox.c, docs/security.md) ----
 * The supervisor starts the trainer in its own mount, PID and IPC
 * namespaces (as root; else inside a user namespace of the server's user),
 * on a new root that holds read-only the system's folders (/usr, /bin,
 * /lib*, /etc without its secrets such as /etc/shadow, /sys), a fresh /proc
 * of its own PID namespace, a small /dev (null, zero, random, urandom, tty,
 * shm, the NVIDIA devices), the binds below, and nothing else: not the
 * server's data folder, database or tokens, not other jobs' folders. Then
 * resource limits, its own cgroup where the system delegates one, the
 * team's Unix user and group, PR_SET_NO_NEW_PRIVS, and exec. The
 * environment is lathe's allow-list (exec_env_allowed, exec_internal.h):
 * never a token. */
typedef struct exec_bind {
    const char *path;  /* absolute; visible at the same path inside */
    bool writable;     /* read-write; else read-only */
} exec_bind;

/* A path of the spec checked again right before the trainer starts (a
 * link swapped after submission is caught): it must still resolve under
 * one of roots (or inside the job's folder). */
typedef struct exec_path_check {
    const char *field;             /* "trainingData.datasetPath" */
    const char *path;              /* as the contract passes it (absolute) */
    const char *const *roots;      /* resolved roots of its kind */
    size_t n_roots;
} exec_path_check;

typedef struct exec_sandbox {
    bool required;     /* no start without it; else (the built-in trainer in
                          auto mode) it runs unsandboxed where the system cannot
                          make one, and the handle says why */
    long long uid, gid; /* the trainer's user and group; -1 = the supervisor's own */
    const exec_bind *binds;  /* besides the system folders; the backend itself adds
                                the trainer's work folder and CHECKPOINT_DIR
                                read-write */
    size_t n_binds;
    const char *const *hide; /* folders covered by an empty read-only tmpfs where a
                                bind would show them (the server's data folder
                                inside a root); a bind inside one still shows */
    size_t n_hide;
    const exec_path_check *checks;
    size_t n_checks;
    double memory;     /* bytes: cgroup memory.max, else RLIMIT_AS for a job
                          without GPUs; 0 = no limit */
    long processes;    /* cgroup pids.max and RLIMIT_NPROC; 0 = no limit */
    long open_files;   /* RLIMIT_NOFILE; 0 = 65536 */
    spec_toggle cgroup; /* its own cgroup: auto where delegated, on = required, off */
} exec_sandbox;

/* Whether this process can make the sandbox (mount and PID namespaces:
 * as root, or through a user namespace), tried in a child; false with the
 * reason ("unshare(CLONE_NEWNS): Operation not permitted") in why. */
bool exec_sandbox_probe(char *why, size_t whysz);

/* ---- a start request ---- */
typedef struct exec_request {
    char *const *argv;        /* the trainer: argv[0] is a path or a name found
                                 in PATH; never run through a shell */
    size_t argc;
    const char *const *env;   /* extra "NAME=value" (the spec's trainer.env);
                                 the contract's variables win over these */
    size_t n_env;
    exec_contract contract;
    const char *job_dir;      /* the job's folder, the same for every attempt
                                 (created when absent); holds the job's lock */
    int attempt;              /* its number; the attempt's folder is
                                 job_dir/attempt-N (logs, exit status) */
    const int *no_retry_codes; /* exit codes that mean "cannot succeed":
                                  classified EXEC_END_INVALID, not retried
                                  (EXEC_BUILTIN_NO_RETRY for lathe train) */
    size_t n_no_retry_codes;
    exec_cluster_req cluster;  /* for cluster engines (k8s); ignored locally */
    const exec_sandbox *sandbox; /* local: run the trainer in this sandbox; NULL = none
                                    (ServerConfig policy.sandbox.mode off) */
} exec_request;

/* The request of one attempt from the job's resolved spec, as the server
 * and `lathe render` build it (exec_request.c): argv (the built-in trainer
 * as `PROGRAM train SPEC_PATH`, or trainer.command), trainer.env, the
 * contract's values from the spec (paths as written), and the cluster
 * fields of the job itself (no placement). The caller adds folders, GPU
 * ids, placement and local paths. */
typedef struct exec_job_desc {
    const spec_job *spec;       /* resolved (the plan's choices applied) */
    int64_t job_id;             /* 0 = none (lathe render) */
    const char *team, *name, *experiment, *priority_class;
    int attempt;
    const char *program;        /* the built-in trainer's argv[0]; NULL = "lathe" */
    const char *spec_path;      /* the spec file it reads; NULL = "spec.yaml" */
    int nnodes, gpus_per_node;  /* the plan's shape */
    double prior_run;           /* seconds earlier attempts ran (against maxDuration) */
} exec_job_desc;

typedef struct exec_job_req {
    exec_request q; /* points into the fields below and into the spec */
    char **argv, **env;
    size_t argc, n_env;
    char *job_label, *spec_yaml;
} exec_job_req;

void exec_job_req_init(exec_job_req *r, const exec_job_desc *d);
void exec_job_req_free(exec_job_req *r);

/* The built-in trainer's "cannot succeed" exit codes (docs/trainer.md:
 * 2 = invalid model / data / job). */
extern const int EXEC_BUILTIN_NO_RETRY[1];

/* ---- what poll reports ---- */
typedef enum {
    EXEC_RUNNING,  /* the trainer runs */
    EXEC_EXITED,   /* it ended; the end is classified */
    EXEC_LOST      /* it is gone and how it ended is unknown (its supervisor
                      was killed, the machine restarted) */
} exec_phase;

typedef enum {
    EXEC_END_NONE,      /* still running */
    EXEC_END_SUCCEEDED, /* exit code 0 */
    EXEC_END_FAILED,    /* a non-zero exit: retryable */
    EXEC_END_INVALID,   /* an exit code of no_retry_codes: cannot succeed */
    EXEC_END_OOM,       /* out of memory: a CUDA OOM message in its output, or
                           the kernel's OOM killer; re-plan before a retry */
    EXEC_END_STOPPED,   /* stopped after lathe's SIGTERM (cancel, preemption,
                           timeout): exit 143 or SIGTERM; it saved a checkpoint */
    EXEC_END_KILLED,    /* SIGKILL by lathe after the grace period */
    EXEC_END_SIGNALLED, /* another signal (a crash): retryable */
    EXEC_END_LOST,      /* see EXEC_LOST: retryable */
    EXEC_END_EVICTED,   /* the engine took it away (a Kubernetes eviction or
                           preemption, a drained node): back to the queue
                           without spending a retry */
    EXEC_END_TIMED_OUT  /* the engine's own time limit ended it (Slurm's
                           TIMEOUT, after the signal that let it checkpoint):
                           the job is timed out */
} exec_end;

/* "none", "succeeded", "failed", "invalid", "oom", "stopped", "killed",
 * "signalled", "lost", "evicted", "timed_out": the store's exit_reason. */
const char *exec_end_name(exec_end e);

typedef struct exec_status {
    exec_phase phase;
    exec_end end;
    bool retryable;     /* whether a retry can help (false for SUCCEEDED, INVALID) */
    int exit_code;      /* -1 when it died of a signal or is unknown */
    int signal;         /* 0 = none */
    bool term_sent;     /* lathe sent SIGTERM (cancel) */
    bool kill_sent;     /* lathe sent SIGKILL (grace period over) */
    double started_at, ended_at; /* seconds since the epoch; ended 0 while running */
    char reason[256];   /* one sentence: "exit code 1 after 'CUDA out of
                           memory' on line 812 of the log" */
    char waiting[256];  /* while running: why the trainer has not started yet,
                           in the engine's words ("Unschedulable: 0/3 nodes are
                           available: 3 Insufficient nvidia.com/gpu"); "" = it runs */
} exec_status;

/* Classifies an end. oom_line: the output showed an out-of-memory message;
 * oom_killed: the kernel's OOM killer killed a process of the attempt (or,
 * when that cannot be known, a SIGKILL lathe did not send). Fills end,
 * retryable and a reason (phase, codes and flags are taken from st). */
void exec_classify(exec_status *st, bool oom_line, bool oom_killed, const int *no_retry_codes,
                   size_t n_no_retry_codes);

/* True when a line of trainer output says it ran out of GPU or host memory
 * ("CUDA out of memory", "torch.OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED",
 * ...). */
bool exec_line_is_oom(const char *line, size_t len);

/* ---- progress ---- */
/* One progress point, whatever format it came from. Unknown numbers are NAN
 * (doubles) or -1 (integers). eval_loss is the mean loss over the job's eval
 * set after that step, on the points of the steps that were evaluated; a
 * point may hold only it (an evaluation reported apart from its step). */
typedef struct exec_progress {
    int64_t step, total_steps;
    double epoch, loss, learning_rate, tokens_per_second, eta_seconds, elapsed_seconds;
    double eval_loss;
    double at; /* when lathe read it (seconds since the epoch) */
} exec_progress;

/* A checkpoint the trainer reported or that appeared in CHECKPOINT_DIR. */
typedef struct exec_checkpoint {
    int64_t step;
    char *path;
} exec_checkpoint;

/* What one poll found: new points and checkpoints since the last poll, in
 * order. Owned by the handle; valid until its next poll or release. */
typedef struct exec_update {
    const exec_progress *points;
    size_t n_points;
    const exec_checkpoint *checkpoints;
    size_t n_checkpoints;
    bool done;          /* the trainer said it finished (`done` line) */
    const char *adapter; /* its final adapter folder, when it said so */
} exec_update;

/* Kinds of `[lathe-train]` lines (docs/trainer.md). */
typedef enum {
    EXEC_LINE_NONE,       /* not a [lathe-train] line, or unreadable */
    EXEC_LINE_START,      /* start step=N/TOTAL ... */
    EXEC_LINE_STEP,       /* step=N/TOTAL loss=... */
    EXEC_LINE_CHECKPOINT, /* checkpoint step=N path=P */
    EXEC_LINE_RESUME,     /* resume step=N path=P */
    EXEC_LINE_STOPPED,    /* stopped step=N ... */
    EXEC_LINE_DONE,       /* done step=N loss=... adapter=P */
    EXEC_LINE_OTHER       /* another [lathe-train] line (data ...) */
} exec_line_kind;

/* Parses one line of the built-in trainer's output (without its newline).
 * Fills p (numbers not on the line are unknown) and, for checkpoint /
 * resume / done lines, *path with the path (at most pathsz bytes; may be
 * NULL). */
exec_line_kind exec_parse_train_line(const char *line, size_t len, exec_progress *p, char *path,
                                     size_t pathsz);

/* Reads Hugging Face Trainer's trainer_state.json (a checkpoint folder's):
 * one point per log_history step > after_step that holds a loss or an
 * eval_loss (an evaluation entry joins the training entry of its step),
 * total_steps from max_steps. *pts is the caller's to free. Returns
 * false with a message in err when the file cannot be read or parsed. */
bool exec_read_hf_state(const char *path, int64_t after_step, exec_progress **pts, size_t *n,
                        char *err, size_t errsz);
/* The same from the file's text (len bytes); name is used in messages. */
bool exec_parse_hf_state(const char *text, size_t len, const char *name, int64_t after_step,
                         exec_progress **pts, size_t *n, char *err, size_t errsz);

/* Incremental reader of ms-swift's logging.jsonl: call again with the same
 * state to get the lines added since. Keeps the offset and never re-reads
 * what it already parsed; a line not yet finished waits for the next call.
 * Lines that are not JSON objects are skipped. */
typedef struct exec_jsonl_reader {
    char *path;
    uint64_t offset;
    uint64_t inode;
} exec_jsonl_reader;

void exec_jsonl_reader_init(exec_jsonl_reader *r, const char *path);
void exec_jsonl_reader_free(exec_jsonl_reader *r);
/* Appends new points to *pts / *n (a growable array; *cap its capacity);
 * an evaluation line joins the point before it when that is of its step.
 * Returns false with a message in err only for an I/O error (a missing file
 * is not one: nothing new). */
bool exec_read_swift_log(exec_jsonl_reader *r, exec_progress **pts, size_t *n, size_t *cap,
                         char *err, size_t errsz);
/* Parses one ms-swift logging.jsonl line; false when it holds no step with
 * a loss or an eval_loss (summary lines have none). An evaluation line is
 * a point with eval_loss alone, at its step. */
bool exec_parse_swift_line(const char *line, size_t len, exec_progress *p);

/* ---- inventory ---- */
typedef struct exec_gpu {
    char *node;     /* the node (the host name for NVML) */
    int index;      /* index within its node (NVML's order, or the Cluster's) */
    char *id;       /* what goes into CUDA_VISIBLE_DEVICES and LATHE_GPUS: the
                       UUID for NVML GPUs (CUDA's own index order may differ
                       from NVML's), the index as text for virtual ones */
    char *uuid;     /* "GPU-8f1c..." from NVML; NULL for virtual GPUs */
    char *name;     /* "NVIDIA H100 80GB HBM3", or the Cluster's type name */
    double memory;  /* bytes */
    bool is_virtual;
} exec_gpu;

typedef struct exec_inventory {
    exec_gpu *gpus;
    size_t n_gpus;
    int cpu_slots;        /* CPU-only jobs this machine takes at once */
    char source[16];      /* "nvml", "cluster" or "none" */
    char note[256];       /* why NVML found nothing ("libnvidia-ml.so.1 not
                             found"), driver version when it did */
} exec_inventory;

/* This machine's NVIDIA GPUs through NVML, loaded with dlopen at run time.
 * No library, no driver or no GPU is not an error: the inventory is then
 * empty (source "none") and note says why. cpu_slots = online CPUs. */
void exec_inventory_local(exec_inventory *inv);
/* Virtual GPUs from a Cluster spec: every node's GPUs, ids "0".."n-1"
 * within each node, names from its GPU type; cpu_slots from the nodes'
 * cpus (online CPUs when none is given). */
void exec_inventory_from_cluster(const spec_cluster *c, exec_inventory *inv);
void exec_inventory_free(exec_inventory *inv);

/* ---- NVML (exec_nvml.c) ----
 * The library stays loaded while a handle is open: the server samples its
 * GPUs every monitoring interval. libnvidia-ml.so.1 as the dynamic loader
 * finds it, or the file LATHE_NVML_LIBRARY names. */
typedef struct exec_nvml exec_nvml;

/* Loads and starts NVML; NULL (with why in note) when there is no library,
 * it lacks the functions lathe uses, or it does not start. On success note
 * holds the driver's version (or that it reports no GPU). */
exec_nvml *exec_nvml_open(char *note, size_t notesz);
void exec_nvml_close(exec_nvml *a);
/* The GPUs NVML reports (0 for NULL). */
size_t exec_nvml_count(const exec_nvml *a);
/* GPU i as an inventory entry (not virtual; node = host); false with a
 * note when NVML cannot describe it. */
bool exec_nvml_describe(const exec_nvml *a, unsigned int i, const char *host, exec_gpu *g,
                        char *note, size_t notesz);

/* One GPU at one moment. NAN: the driver does not report it. */
typedef struct exec_gpu_sample {
    int index;         /* NVML's index */
    int minor;         /* N of /dev/nvidiaN; -1 when unknown */
    bool ok;
    double util;       /* percent of the last sample period a kernel ran */
    double mem_util;   /* percent of it the memory was read or written */
    double mem_used, mem_total; /* bytes */
    double power;      /* watts */
    double temp;       /* degrees C */
    double sm_clock;   /* MHz */
    double energy;     /* joules since the driver loaded */
} exec_gpu_sample;

/* Samples every GPU (at most max) into out, in NVML's order; returns how
 * many. */
size_t exec_nvml_sample(const exec_nvml *a, exec_gpu_sample *out, size_t max);

/* ---- handles and backends ---- */
/* One request's outcome of exec_start_many. */
typedef struct exec_start_result {
    struct exec_handle *h; /* set when rc is EXEC_OK */
    int rc;                /* an exec_rc */
    char err[512];
} exec_start_result;

typedef struct exec_backend exec_backend;

/* One started attempt. Backends extend it (their own struct starts with
 * this one); callers only read these fields. */
typedef struct exec_handle {
    exec_backend *backend;
    char *job_dir;
    int attempt;
    char *work_dir;  /* the attempt's folder */
    char *log_path;  /* the trainer's output (stdout and stderr, interleaved
                        by line), the newest file of the rotation */
    double started_at;
} exec_handle;

struct exec_backend {
    const char *name; /* "local", "k8s" */
    /* optional (NULL = nothing to do): makes what a queued job's next
     * attempt will run as, before it is admitted (Kubernetes: the Job,
     * created suspended). Idempotent. */
    exec_rc (*prepare)(exec_backend *be, const exec_request *req, char *err, size_t errsz);
    /* optional: removes what prepare made for attempt `attempt` of the job
     * in job_dir when it will not run (the job was cancelled while queued). */
    exec_rc (*unprepare)(exec_backend *be, const exec_request *req, char *err, size_t errsz);
    /* optional (NULL = always): whether the backend's view of where jobs run
     * is current, and why not (an engine's API unreachable). */
    bool (*ready)(exec_backend *be, char *why, size_t whysz);
    exec_rc (*start)(exec_backend *be, const exec_request *req, exec_handle **out, char *err,
                     size_t errsz);
    /* optional (NULL = start one by one): start several attempts at once
     * (Slurm: the attempts of one experiment as one job array); each
     * result is what start would have returned for its request */
    void (*start_many)(exec_backend *be, const exec_request *const *reqs, size_t n,
                       struct exec_start_result *res);
    exec_rc (*attach)(exec_backend *be, const char *handle_json, exec_handle **out, char *err,
                      size_t errsz);
    exec_rc (*find)(exec_backend *be, const char *job_dir, exec_handle **out, char *err,
                    size_t errsz);
    void (*poll)(exec_handle *h, double now, exec_status *st, exec_update *up);
    exec_rc (*signal)(exec_handle *h, int sig, char *err, size_t errsz);
    exec_rc (*cancel)(exec_handle *h, double now, double grace, char *err, size_t errsz);
    char *(*handle_json)(const exec_handle *h);
    void (*release)(exec_handle *h);
    void (*destroy)(exec_backend *be);
};

/* Calls through the backend (the same as be->start(...) and so on). */

/* Starts the n requests at once where the backend can (start_many), else
 * one by one; res[i] is request i's outcome. */
void exec_start_many(exec_backend *be, const exec_request *const *reqs, size_t n,
                     exec_start_result *res);
/* Starts attempt req->attempt of a job. EXEC_E_BUSY when an attempt of the
 * same job_dir still runs (even one started by another server process);
 * EXEC_E_INVALID for an empty argv or a command that cannot be run (not
 * found, not executable); err says which. */
exec_rc exec_start(exec_backend *be, const exec_request *req, exec_handle **out, char *err,
                   size_t errsz);
/* Rebuilds a handle from exec_handle_json's text. The trainer may have
 * ended meanwhile: poll says. EXEC_E_INVALID for JSON of another backend or
 * version. */
exec_rc exec_attach(exec_backend *be, const char *handle_json, exec_handle **out, char *err,
                    size_t errsz);
/* The newest attempt started in job_dir, running or ended and not yet
 * cleaned, or EXEC_E_GONE when there is none. */
exec_rc exec_find(exec_backend *be, const char *job_dir, exec_handle **out, char *err,
                  size_t errsz);
/* Polls: fills st and up (see exec_update). now drives the grace period of
 * a cancel. Cheap: reads only what the trainer wrote since the last poll. */
void exec_poll(exec_handle *h, double now, exec_status *st, exec_update *up);
/* Sends sig (SIGTERM, SIGINT, SIGKILL, ...) to the trainer and every process
 * it started. EXEC_E_GONE when it already ended. */
exec_rc exec_signal(exec_handle *h, int sig, char *err, size_t errsz);
/* SIGTERM now; SIGKILL at the first poll at or after now + grace.
 * Calling it again keeps the first deadline. */
exec_rc exec_cancel(exec_handle *h, double now, double grace, char *err, size_t errsz);
/* The backend's ready (true where it has none; why is "" then). While it
 * is false the controller starts and prepares nothing. */
bool exec_ready(exec_backend *be, char *why, size_t whysz);
/* The backend's prepare / unprepare (EXEC_OK where it has none). */
exec_rc exec_prepare(exec_backend *be, const exec_request *req, char *err, size_t errsz);
exec_rc exec_unprepare(exec_backend *be, const exec_request *req, char *err, size_t errsz);
/* The handle as JSON text for the attempt row (caller frees). */
char *exec_handle_json(const exec_handle *h);
/* Frees the handle; the trainer is not touched. NULL is fine. */
void exec_release(exec_handle *h);
/* Frees the backend (every handle must be released first). NULL is fine. */
void exec_backend_free(exec_backend *be);

/* ---- the local backend ---- */
typedef struct exec_local_config {
    /* The program run as each attempt's supervisor, with arguments
     * "exec-shim" FD: NULL = /proc/self/exe (the lathe tool itself; a test
     * program handles "exec-shim" with exec_shim_main). */
    const char *shim_program;
    long long log_max_bytes; /* rotate the output log beyond this; 0 = 64 MiB */
    int log_keep;            /* rotated logs kept (output.log.1 ..); 0 = 3 */
    double start_timeout;    /* seconds to wait for the supervisor to report the
                                trainer started; 0 = 10 */
} exec_local_config;

/* The local backend: each attempt runs as its own process group under a
 * supervisor process (`lathe exec-shim`) that is detached from the server,
 * so trainers outlive a killed server. cfg may be NULL. */
exec_backend *exec_local_new(const exec_local_config *cfg);

/* The supervisor's entry point (`lathe exec-shim FD`): argv[0] is
 * "exec-shim", argv[1] the descriptor it reads its config from and answers
 * on (a socket the backend passes). Runs the trainer and returns when it has
 * ended and its exit status is written. Only the local backend runs it. */
int exec_shim_main(int argc, char **argv);

/* ---- the Kubernetes backend (exec_k8s*.c) ---- */
/* Each attempt is one batch/v1 Job (docs/kubernetes.md): created suspended
 * by prepare (or start), admitted by start (the placement written into the
 * pod template, suspend false), stopped by suspending it again (pods get
 * SIGTERM and the grace period), watched through informers on Jobs, Pods
 * and Nodes. Pod logs are followed into the attempt's output.log, so the
 * progress readers and `lathe logs` work as for local attempts. settings is
 * borrowed and must outlive the backend; client NULL = one made from the
 * settings' kubeconfig (k8s_config_load); a given client is borrowed.
 * Waits up to sync_timeout seconds (0 = 30) for the first lists. */
struct k8s_client;
exec_backend *exec_k8s_new(const spec_k8s *settings, struct k8s_client *client,
                           double sync_timeout, char *err, size_t errsz);
/* Whether the backend's view of the cluster is current; why when not
 * ("the API server at https://... is unreachable: ..."). */
bool exec_k8s_ready(exec_backend *be, char *why, size_t whysz);
/* The cluster's GPU nodes as the API shows them now: every node with
 * allocatable GPUs; type from the GPU product label (or the memory label),
 * rack, zone, NVLink group; schedulable = Ready, not cordoned, no NoSchedule
 * / NoExecute taint it does not tolerate; foreign = GPUs requested by pods
 * lathe did not create. */
typedef struct exec_k8s_node {
    char *name, *product, *rack, *zone, *nvlink;
    int gpus;            /* allocatable */
    int foreign;         /* GPUs other pods hold */
    double gpu_memory;   /* bytes per GPU (memory label); 0 = unknown */
    double cpu, memory;  /* allocatable cores, bytes */
    bool schedulable;
    char why[128];       /* why not ("NotReady", "cordoned", "taint x=y:NoSchedule") */
} exec_k8s_node;
void exec_k8s_nodes(exec_backend *be, exec_k8s_node **out, size_t *n);
/* The node of that name in what exec_k8s_nodes gave (sorted by name), or NULL. */
exec_k8s_node *exec_k8s_node_find(exec_k8s_node *nodes, size_t n, const char *name);
void exec_k8s_nodes_free(exec_k8s_node *nodes, size_t n);
/* A counter that changes whenever a node or a foreign pod's GPUs change
 * (the caller reads exec_k8s_nodes again when it moved). */
uint64_t exec_k8s_nodes_version(exec_backend *be);
/* The objects attempt req->attempt runs as, exactly as the backend creates
 * them: a JSON array [the headless Service of a multi-node job,] the Job
 * (suspended as prepare creates it when suspend, else admitted). */
json_t *exec_k8s_objects(const exec_request *req, const spec_k8s *k, bool suspend);
/* The handle (exec_handle_json's text, for exec_attach) of attempt
 * req->attempt whose Job already runs, for a server that rebuilds its cache
 * from the API (operator mode) and so has no handle of its own: the Job's
 * namespace and name as the backend names them (req->cluster.adopt when
 * set), req->job_dir, the attempt, started_at (its Job's status.startTime),
 * the exit codes that cannot succeed. Caller frees. */
char *exec_k8s_adopt_handle(exec_backend *be, const exec_request *req, double started_at);
/* The backend's API client (borrowed; lives as long as the backend), for
 * the operator's own informers and calls: one rate limit for both. */
struct k8s_client *exec_k8s_client(exec_backend *be);

/* ---- the Slurm backend (exec_slurm*.c, docs/slurm.md) ---- */
/* Each attempt is one Slurm batch job submitted with sbatch (an argv; the
 * batch script only execs `lathe slurm-step FILE`, FILE holding the
 * trainer's argv and environment). Its --output is the attempt's
 * output.log (a folder every node sees), read by the same progress
 * readers as a local attempt. One squeue (--json) per stateInterval for
 * every job of the backend, one sacct for those squeue no longer shows.
 * settings is borrowed and must outlive the backend. */
exec_backend *exec_slurm_new(const spec_slurm *settings, char *err, size_t errsz);

/* What one attempt's submission is: the sbatch argv (argv[0] "sbatch",
 * the script's path and FILE last), the batch script's text, the
 * step file's JSON. lathe: the program the script execs. */
typedef struct exec_slurm_submit {
    char **argv;
    size_t argc;
    char *script;     /* the batch script (the same for every job but lathe's path) */
    char *step_json;  /* FILE: argv, env, nodes, master port */
    char *script_path, *step_path, *log_path;
    char *name, *comment; /* --job-name and --comment */
} exec_slurm_submit;
bool exec_slurm_render(const exec_request *req, const spec_slurm *s, const char *lathe,
                       exec_slurm_submit *out, char *err, size_t errsz);
void exec_slurm_submit_free(exec_slurm_submit *s);

/* One job array for several attempts of an experiment (Slurm decides):
 * the attempts' own submissions (exec_slurm_render) become its tasks, in
 * order. argv is subs[0]'s with --job-name, --comment, --output, --error
 * and --chdir of the array and --array=0-(n-1)%max, then the script and
 * the mapping file; map_json is the mapping file (task id -> step file).
 * dir: the folder of the mapping file and of the task-N links to the
 * attempts' folders (--output=dir/task-%a/output.log). */
typedef struct exec_slurm_array {
    char **argv;
    size_t argc;
    char *name, *comment, *script, *map_json, *map_path, *dir;
} exec_slurm_array;
/* True when two submissions may be tasks of one array: the same argv but
 * for the names, comment, output, chdir, the script and the step file. */
bool exec_slurm_array_compatible(const exec_slurm_submit *a, const exec_slurm_submit *b);
void exec_slurm_array_render(const exec_slurm_submit *subs, size_t n, int max, const char *team,
                             const char *experiment, const char *dir, const char *lathe,
                             exec_slurm_array *out);
void exec_slurm_array_free(exec_slurm_array *a);

/* A node as `scontrol show nodes` reports it. */
typedef struct exec_slurm_node {
    char *name;
    char *gres_type;   /* gpu:TYPE:N's TYPE; NULL when untyped */
    int gpus, gpus_used; /* GRES GPUs; allocated now (AllocTRES gres/gpu) */
    int foreign;        /* of those allocated, GPUs of Slurm jobs lathe did not
                           submit (their comment is not lathe's) */
    double cpu, memory; /* cores, bytes */
    bool schedulable;   /* not down, drained, draining, failing, not responding */
    char state[64];
    char why[160];      /* its state and reason when not schedulable */
} exec_slurm_node;
/* Runs `scontrol -o show nodes` now (foreign from the last squeue); false
 * with err when it fails. */
bool exec_slurm_nodes(exec_backend *be, exec_slurm_node **out, size_t *n, char *err,
                      size_t errsz);
void exec_slurm_nodes_free(exec_slurm_node *nodes, size_t n);

/* How many Slurm commands the backend ran (benchmarks, tests). */
typedef struct exec_slurm_counts {
    uint64_t sbatch, squeue, sacct, scancel, scontrol;
} exec_slurm_counts;
void exec_slurm_counts_get(exec_backend *be, exec_slurm_counts *c);

/* `lathe slurm-step FILE` (and `lathe slurm-step --task FILE` under srun):
 * what the batch script execs. */
int exec_slurm_step_main(int argc, char **argv);

/* ---- process identity (Linux /proc) ---- */
/* The start time of process pid in clock ticks since boot (field 22 of
 * /proc/PID/stat); 0 when there is no such process. A pid plus its start
 * time names one process: a recycled pid has another start time. */
uint64_t exec_proc_start_time(int pid);
/* This boot's id (/proc/sys/kernel/random/boot_id) into out; "" when unknown. */
void exec_boot_id(char *out, size_t outsz);

#endif
