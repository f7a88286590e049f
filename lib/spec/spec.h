/* spec.h: every YAML object lathe reads, as typed C structs.
 *
 *   LoRATrainingJob  (apiVersion lathe/v1, lathe.dev/v1 or training.example.com/v1)
 *   LoRAExperiment   a job template plus a matrix, expanded into jobs
 *   Cluster          GPU types, nodes, NVLink groups, racks, teams, priority classes
 *
 * One parser (libyaml, see spec_yaml.c) owns all YAML. Loading checks types,
 * ranges and unknown keys and reports every problem in the file through a
 * diag_list with file:line:col, the field path, expected / found and a
 * suggestion. Checks that need a model (does the model have this target
 * module?) belong to the planner, which uses the positions kept here.
 *
 * Ownership: every pointer in these structs is owned by the struct; free a
 * file with spec_file_free, a lone job with spec_job_free.
 */
#ifndef LATHE_SPEC_H
#define LATHE_SPEC_H

#include "base/base.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits that keep hostile input from costing more than it should. */
#define SPEC_MAX_FILE_BYTES (4u << 20)   /* 4 MiB per file */
#define SPEC_MAX_NODES 200000            /* YAML nodes after alias expansion */
#define SPEC_MAX_DEPTH 64                /* nesting of mappings / sequences */
#define SPEC_MAX_MATRIX_JOBS 10000       /* jobs one experiment may expand into */
#define SPEC_MAX_CLUSTER_NODES 100000    /* nodes one cluster may hold, groups expanded */
#define SPEC_MAX_CLUSTER_GPUS 1000000    /* GPUs one cluster may hold */

/* ---- enumerations shared with the planner and estimator ---- */
typedef enum { METHOD_AUTO, METHOD_LORA, METHOD_QLORA, METHOD_DORA, METHOD_FULL } spec_method;
typedef enum { QUANT_AUTO, QUANT_NONE, QUANT_NF4, QUANT_NF4_DQ, QUANT_INT8, QUANT_GPTQ4, QUANT_AWQ4 } spec_quant;
typedef enum { PREC_AUTO, PREC_BF16, PREC_FP16, PREC_AMP, PREC_FP32 } spec_precision;
typedef enum { OPT_AUTO, OPT_ADAMW, OPT_ADAMW8BIT, OPT_PAGED_ADAMW, OPT_PAGED_ADAMW8BIT, OPT_SGD } spec_optimizer;
typedef enum { STRAT_AUTO, STRAT_SINGLE, STRAT_DDP, STRAT_FSDP, STRAT_ZERO2, STRAT_ZERO3 } spec_strategy;
typedef enum { TOGGLE_AUTO, TOGGLE_OFF, TOGGLE_ON } spec_toggle;
typedef enum { SPEC_DATA_AUTO, SPEC_DATA_ALPACA, SPEC_DATA_MESSAGES, SPEC_DATA_TEXT } spec_data_format;
typedef enum { TRAINER_BUILTIN, TRAINER_COMMAND } spec_trainer_kind;
typedef enum { NODE_READY, NODE_DRAINING, NODE_DOWN } spec_node_state;

/* Names as written in YAML ("qlora", "nf4-dq", "bf16", "paged_adamw8bit",
 * "zero3", ...). *_name returns the canonical spelling; *_parse returns false
 * for an unknown name. */
const char *spec_method_name(spec_method m);
bool spec_method_parse(const char *s, spec_method *out);
const char *spec_quant_name(spec_quant q);
bool spec_quant_parse(const char *s, spec_quant *out);
const char *spec_precision_name(spec_precision p);
bool spec_precision_parse(const char *s, spec_precision *out);
const char *spec_optimizer_name(spec_optimizer o);
bool spec_optimizer_parse(const char *s, spec_optimizer *out);
const char *spec_strategy_name(spec_strategy s);
bool spec_strategy_parse(const char *s, spec_strategy *out);

/* Where a value stood in its file, so later stages can point at it. */
typedef struct spec_pos {
    int line, col; /* 1-based; 0 when the value was not written (a default) */
} spec_pos;

typedef struct spec_kv {
    char *key, *value;
} spec_kv;

/* ---- LoRATrainingJob ---- */
typedef struct spec_job {
    char *file;        /* the file it came from (for messages); may be NULL */
    char *api_version; /* "lathe/v1" or "training.example.com/v1" */
    spec_pos pos;      /* the document's start */

    /* metadata */
    char *name;      /* DNS-1123 label: [a-z0-9-], at most 63 */
    char *namespace_; /* metadata.namespace; NULL when absent */
    spec_kv *labels;
    size_t n_labels;

    /* who and how urgent */
    char *team;           /* spec.team, else metadata.namespace, else "default" */
    char *priority_class; /* spec.priorityClassName; NULL = the cluster default */
    char *experiment;     /* set on jobs expanded from a LoRAExperiment */

    spec_method method; /* spec.method; default lora (qlora when quantization.bits is 4 or 8) */

    struct {
        char *name;        /* "Qwen2-7B-Instruct"; may be NULL when path is given */
        char *path;        /* a folder with config.json; may be NULL */
        double parameters; /* "7B" -> 7e9; 0 when absent */
        spec_pos pos_name, pos_path, pos_parameters;
    } base_model;

    struct {
        int rank;      /* 1..1024; default 16 */
        double alpha;  /* > 0; default 2 * rank */
        char **target_modules; /* as written: "q_proj", ..., or "all-linear";
                                  default q_proj k_proj v_proj o_proj */
        size_t n_target_modules;
        spec_pos *pos_target_modules; /* one per entry */
        double dropout; /* [0, 1); default 0.05 */
        bool use_rslora; /* scaling alpha / sqrt(r) instead of alpha / r */
        spec_pos pos_rank;
    } lora;

    struct {
        int bits;         /* 4, 8 or 16; 16 = not quantised (default) */
        spec_quant quant; /* QUANT_AUTO: nf4-dq for 4 bits, int8 for 8 */
    } quantization;

    struct {
        char *dataset_path; /* required */
        char *eval_path;    /* evalDatasetPath (or its alias evalPath): a file of
                               evaluation records; may be NULL */
        char *eval_path_alias; /* evalPath as written; merged into eval_path when
                                  the job is resolved (then NULL) */
        double eval_split;  /* evalSplit: the share of the training records held
                               out for evaluation, in (0, 0.5); 0 = none */
        spec_data_format format;
        long samples;             /* 0 = unknown (count the file) */
        int batch_size;           /* the per-device micro batch; default 1 */
        int gradient_accumulation; /* >= 1; default 1 */
        bool packing;
        spec_pos pos_dataset_path;
    } training_data;

    struct {
        int epochs;           /* default 1 */
        long max_steps;       /* 0 = from epochs */
        double learning_rate; /* default 2e-4 */
        int warmup_steps;
        int max_seq_length;   /* default 2048 */
        double weight_decay;
        char *lr_scheduler;   /* "cosine" (default), "linear", "constant"; never NULL */
        double max_grad_norm; /* default 1.0; 0 = no clipping */
        uint64_t seed;        /* default 42 */
        spec_precision precision;
        spec_optimizer optimizer;
        spec_toggle gradient_checkpointing;
        spec_toggle flash_attention;
        long eval_steps;      /* evalSteps: steps between evaluations when the job
                                 has an eval set; 0 = about 10 per run. The last
                                 step is always evaluated */
    } hyperparams;

    struct {
        bool given;          /* the file had a resources section */
        int gpu_count;       /* GPUs per node (as a Kubernetes pod asks); 0 = not given */
        char *gpu_type;      /* NULL = not given */
        double gpu_memory_estimate; /* bytes; 0 = not given */
        bool gpu_shared;     /* may share its GPU with other shared jobs when its
                                plan needs less than a whole one (default false) */
        double cpu;          /* cores; 0 = not given */
        double memory;       /* bytes; 0 = not given */
        int nodes;           /* 0 = not given; GPUs in all = gpu_count x max(nodes, 1) */
        spec_strategy strategy;
        spec_pos pos_gpu_count, pos_gpu_type, pos_gpu_memory_estimate;
    } resources;

    struct {
        bool enabled;       /* default true */
        int interval_steps; /* default 500 */
        int keep_last;      /* default 3 */
        char *storage_type; /* "PVC", "local", "hostPath"...; may be NULL */
        char *pvc_name;
        char *path;
        double size;        /* bytes; 0 = not given */
    } checkpoint;

    struct {
        int max_retries;         /* default 3 */
        bool retry_on_failure;   /* default true */
        double backoff_seconds;  /* default 60 */
        double max_backoff_seconds; /* default 3600 */
    } retry_policy;

    struct {
        double max_duration;  /* seconds; 0 = none */
        double grace_period;  /* seconds; default 120 */
    } timeout;

    struct {
        spec_trainer_kind kind; /* builtin unless command is given */
        char **command;         /* argv; never passed to a shell */
        size_t n_command;
        char *image;            /* container image for cluster executors */
        spec_kv *env;
        size_t n_env;
    } trainer;
} spec_job;

/* ---- LoRAExperiment ---- */
typedef struct spec_matrix_axis {
    char *path;     /* dotted field path inside spec, e.g. "lora.rank" */
    size_t n_values;
    char **values;  /* each value as YAML text, for naming and reports */
} spec_matrix_axis;

typedef struct spec_experiment {
    char *file;
    char *name;
    char *namespace_;
    spec_kv *labels; /* metadata.labels; every job gets them (and the template's) */
    size_t n_labels;
    int max_concurrent; /* 0 = no limit */
    spec_matrix_axis *axes;
    size_t n_axes;
    spec_job **jobs; /* the expansion, in matrix order (last axis fastest) */
    size_t n_jobs;
} spec_experiment;

/* ---- Cluster ---- */
typedef struct spec_gpu_type {
    char *name;            /* "A100-80GB" */
    double memory;         /* bytes */
    double price_per_hour; /* money units per GPU-hour; 0 = free / unknown */
    double tflops;         /* dense bf16 TFLOP/s; 0 = take the catalogue's */
} spec_gpu_type;

typedef struct spec_node {
    char *name;
    char *rack;      /* may be NULL */
    char *gpu_type;  /* a name from gpu_types; NULL for CPU-only nodes */
    int gpus;
    int *nvlink_group; /* per GPU index: its NVLink group id (0..); n = gpus.
                          A GPU in no written group forms a group of its own. */
    int n_nvlink_groups;
    spec_kv *labels;
    size_t n_labels;
    spec_node_state state;
    double cpus;     /* 0 = unknown */
    double memory;   /* bytes; 0 = unknown */
} spec_node;

typedef struct spec_quota {
    char *gpu_type; /* a GPU type name, or "*" for any type ("nvidia.com/gpu") */
    int count;
} spec_quota;

typedef struct spec_team {
    char *name;
    spec_quota *quota;
    size_t n_quota;
    spec_quota *borrowing_limit; /* may borrow this many beyond quota; absent = unlimited */
    size_t n_borrowing_limit;
    spec_quota *lending_limit;   /* may lend at most this many of its idle quota; absent = all */
    size_t n_lending_limit;
    double weight;          /* fair-share weight; default 1 */
    double budget_per_month; /* money; 0 = no budget */
    int max_concurrent_jobs; /* 0 = no limit */
} spec_team;

typedef struct spec_priority_class {
    char *name;
    int64_t value;
    bool preempt_lower; /* preemptionPolicy: PreemptLowerPriority (default) vs Never */
    bool global_default;
    char *description;
} spec_priority_class;

typedef struct spec_cluster {
    char *file;
    char *name;
    spec_gpu_type *gpu_types;
    size_t n_gpu_types;
    spec_node *nodes; /* nodeGroups expanded, then nodes, in file order */
    size_t n_nodes;
    spec_team *teams;
    size_t n_teams;
    spec_priority_class *priority_classes;
    size_t n_priority_classes;
} spec_cluster;

/* ---- files ---- */
typedef enum { SPEC_KIND_JOB, SPEC_KIND_EXPERIMENT, SPEC_KIND_CLUSTER } spec_kind;

typedef struct spec_doc {
    spec_kind kind;
    spec_job *job;               /* kind == SPEC_KIND_JOB */
    spec_experiment *experiment; /* kind == SPEC_KIND_EXPERIMENT */
    spec_cluster *cluster;       /* kind == SPEC_KIND_CLUSTER */
} spec_doc;

typedef struct spec_file {
    char *path;
    spec_doc *docs; /* one per YAML document ("---") */
    size_t n_docs;
    bool io_error;  /* the file could not be read at all (not: it was invalid) */
} spec_file;

/* "LoRATrainingJob", "LoRAExperiment" or "Cluster". */
const char *spec_kind_name(spec_kind k);

/* Loads every document of a file. Returns the number of errors added to d
 * (0 = the file is valid; warnings do not count). On errors, out holds the
 * documents that loaded cleanly. When the file cannot be read, one error
 * is added and out->io_error is set; a file over SPEC_MAX_FILE_BYTES is
 * invalid input instead. d may be NULL. Always free out with
 * spec_file_free. */
size_t spec_load_file(const char *path, spec_file *out, diag_list *d);
/* The same for text in memory; name is used in messages. */
size_t spec_load_string(const char *name, const char *text, size_t len, spec_file *out,
                        diag_list *d);
void spec_file_free(spec_file *f);

/* Convenience: the first document of the given kind, or NULL. */
spec_job *spec_file_job(const spec_file *f);
spec_cluster *spec_file_cluster(const spec_file *f);

/* A job with every default filled in (name "job"). */
spec_job *spec_job_new_default(void);
spec_job *spec_job_clone(const spec_job *j);
void spec_job_free(spec_job *j);

/* Serialisers: the resolved spec as lathe/v1 YAML (libyaml emitter) or JSON
 * (jansson). Caller frees. */
char *spec_job_to_yaml(const spec_job *j);
char *spec_job_to_json(const spec_job *j);

/* Cluster lookups. */
const spec_gpu_type *spec_cluster_gpu_type(const spec_cluster *c, const char *name);
/* A JSON value as YAML (libyaml's emitter; spec_json_yaml.c): keys in the
 * objects' order, strings quoted where a YAML reader would take them for
 * something else, multi-line strings as literal blocks. documents: an array
 * is one document per item, each after "---" (Kubernetes manifests);
 * otherwise the value is one document without a "---". Caller frees. */
char *spec_json_to_yaml(const json_t *v, bool documents);

/* The structural OpenAPI v3 schema of a whole document of kind
 * "LoRATrainingJob" or "LoRAExperiment" (NULL for any other), generated
 * from the decoder's own tables (spec_openapi.c says how each field type
 * maps): what a CustomResourceDefinition's openAPIV3Schema holds, less
 * status. Caller decrefs. */
json_t *spec_openapi_schema(const char *kind);

/* Removes every node (a cluster engine lists its own). */
void spec_cluster_clear_nodes(spec_cluster *c);
const spec_team *spec_cluster_team(const spec_cluster *c, const char *name);
const spec_priority_class *spec_cluster_priority_class(const spec_cluster *c, const char *name);
const spec_priority_class *spec_cluster_default_priority(const spec_cluster *c);

/* ---- ServerConfig: `lathe server --config FILE` (spec_server.c) ----
 * One document, apiVersion lathe/v1, kind ServerConfig. Every field is
 * optional; docs/server.md lists them with their defaults. Paths are kept
 * as written (the server resolves them against the file's folder). */
typedef struct spec_server_token {
    char *name;   /* a label for events and logs ("alice-laptop"); may be NULL */
    char *sha256; /* 64 lowercase hex digits: SHA-256 of the token's text */
    char *team;   /* the team the token acts for; NULL for an admin token */
    bool admin;   /* sees and acts for every team */
    /* scope: "read" (GET only), "submit" (read, submit, cancel, delete its
     * team's jobs) or "admin" (everything, every team; the same as admin:
     * true). NULL as written = "admin" for an admin token, else "submit". */
    char *scope;
    char *expires;     /* RFC 3339 ("2027-01-31T00:00:00Z") as written; NULL = never */
    double expires_at; /* that time in seconds since the epoch; 0 = never */
    spec_pos pos; /* where the entry starts */
} spec_server_token;

/* ---- `policy:` what a team's jobs may read, run and write where they run
 * (docs/security.md; lib/policy applies it). Paths are kept as written;
 * the server makes them absolute against the config file's folder. ---- */
typedef enum {
    SPEC_ROOT_MODELS,   /* baseModel.path */
    SPEC_ROOT_DATA,     /* trainingData.datasetPath, evalDatasetPath */
    SPEC_ROOT_ADAPTERS, /* adapters a job starts from or serves */
    SPEC_ROOT_PROGRAMS, /* trainer.command's program (and what it reads) */
    SPEC_ROOT_KINDS
} spec_root_kind;

/* "models", "data", "adapters", "programs". */
const char *spec_root_kind_name(spec_root_kind k);

typedef struct spec_policy_rules {
    /* `paths: {models: [...], data: [...], adapters: [...], programs: [...]}`:
     * folders (or files) a job may read, by the kind of the field naming
     * them; every one is visible read-only inside the sandbox */
    char **roots[SPEC_ROOT_KINDS];
    size_t n_roots[SPEC_ROOT_KINDS];
    spec_toggle commands;  /* `commands:` may the job run its own trainer.command;
                              auto = the level above (everyone's: true) */
    char **images;         /* `images:` fnmatch patterns of trainer.image allowed on
                              cluster engines; none = the engine's own image only */
    size_t n_images;
} spec_policy_rules;

typedef struct spec_policy_team {
    char *team;              /* required */
    spec_policy_rules rules; /* added to everyone's; commands: off wins */
    char *user, *group;      /* Unix user and group (names or numbers) its local
                                trainers run as; NULL = the sandbox's default */
    char *service_account;   /* Kubernetes: the pods' service account; NULL = none
                                mounted (automountServiceAccountToken: false) */
    char *slurm_account, *slurm_user; /* Slurm: --account, and the user jobs run as */
    spec_pos pos;
} spec_policy_team;

typedef enum {
    SPEC_SANDBOX_AUTO,     /* default: every local trainer in the sandbox where
                              the machine can make one; where it cannot, the
                              built-in trainer runs without it (an event says so)
                              and a trainer.command does not start */
    SPEC_SANDBOX_REQUIRED, /* no trainer starts without the sandbox */
    SPEC_SANDBOX_OFF       /* none (a single-user machine); trainer.command then
                              runs as the server's user */
} spec_sandbox_mode;

typedef struct spec_policy {
    spec_policy_rules all;  /* everyone's: `paths`, `commands`, `images` */
    spec_policy_team *teams;
    size_t n_teams;
    struct {
        spec_sandbox_mode mode;
        char *user, *group;  /* default user and group of trainers when the
                                server runs as root; default "nobody" / "nogroup"
                                (65534 when the names are unknown) */
        bool allow_root;     /* `allowRoot:` a team's user may be root (uid 0); default false */
        double memory;       /* bytes per attempt (cgroup memory.max, else RLIMIT_AS for
                                CPU jobs); 0 = no limit (default) */
        long processes;      /* processes and threads per attempt (cgroup pids.max,
                                and RLIMIT_NPROC of the team's user); default 4096 */
        long open_files;     /* RLIMIT_NOFILE; default 65536 */
        spec_toggle cgroup;  /* its own cgroup: auto (default) where the system
                                delegates one, on = required, off = never */
    } sandbox;
} spec_policy;

/* `tls:` HTTPS for the API (libmicrohttpd with GnuTLS). */
typedef struct spec_tls {
    char *cert_file, *key_file; /* PEM; both or neither; NULL = plain HTTP */
} spec_tls;

/* The ServerConfig's `kubernetes:` section: how lathe reaches a cluster
 * and what the Jobs it creates look like (lib/k8s renders them; defaults in
 * spec_k8s_defaults). Used when `executor: k8s`, and by `lathe render
 * --target k8s`. */
typedef struct spec_k8s {
    char *kubeconfig;     /* a kubeconfig file; NULL = in-cluster service account,
                             then $KUBECONFIG, then ~/.kube/config */
    char *context;        /* a context of it; NULL = its current-context */
    double qps;           /* client-side rate limit; default 50 */
    int burst;            /* default 100 */
    char *namespace_prefix; /* a team's namespace is prefix + team; default "" */
    spec_kv *namespaces;  /* explicit team -> namespace entries (win over the prefix) */
    size_t n_namespaces;
    char *image;          /* the image of the built-in trainer (it holds `lathe`);
                             default "lathe:latest" */
    char *image_pull_policy; /* NULL = the cluster's default */
    char *lathe_path;     /* the lathe binary inside that image; default "lathe" */
    char *gpu_resource;   /* default "nvidia.com/gpu" */
    char *gpu_product_label; /* node label with the GPU type; default "nvidia.com/gpu.product" */
    spec_kv *gpu_products; /* lathe GPU type -> that label's value; default the type's name */
    size_t n_gpu_products;
    char *gpu_memory_label;  /* node label with MiB per GPU; default "nvidia.com/gpu.memory" */
    char *rack_label;     /* default "rack-id" (the seed's) */
    char *zone_label;     /* default "topology.kubernetes.io/zone" */
    char *nvlink_label;   /* node label naming its NVLink domain; default "lathe.dev/nvlink-group" */
    char *checkpoint_pvc; /* PVC for checkpoints when the job names none; default "lathe-checkpoints" */
    char *model_pvc;      /* read-only model pool; default "lathe-models"; "" = none */
    char *data_pvc;       /* read-only datasets; default "lathe-data"; "" = none */
    char *checkpoint_mount; /* default "/checkpoints" (CHECKPOINT_DIR is MOUNT/<job>) */
    char *model_mount;    /* default "/models" (HF_HOME, MODELSCOPE_CACHE) */
    char *data_mount;     /* default "/data" */
    char *spec_mount;     /* folder of the resolved spec (a downward-API file); default "/etc/lathe" */
    double shm_size;      /* memory-backed /dev/shm; bytes, default 8Gi; 0 = none */
    int64_t run_as_user, run_as_group, fs_group; /* default 1000 each */
    int ttl_after_finished; /* seconds; default 86400; -1 = never deleted */
    char *service_account; /* NULL = the namespace's default */
    int master_port;      /* MASTER_PORT of multi-node jobs; default 29500 */
    char *storage_class;  /* for rendered PVCs; NULL = the cluster's default */
    double checkpoint_size, model_size, data_size; /* rendered PVC sizes; 500Gi, 2Ti, 500Gi */
    /* `operator:` (docs/kubernetes.md, "Operator mode"): lathe serves the
     * LoRATrainingJob / LoRAExperiment objects of these namespaces and the
     * suspended Jobs labelled lathe.dev/queue in them; the truth is in the
     * API, the store a cache; one replica acts at a time (a Lease). */
    struct {
        bool enabled;        /* default false */
        char **namespaces;   /* watched namespaces = teams; none = every namespace */
        size_t n_namespaces;
        char *lease_name;    /* default "lathe-server" */
        char *lease_namespace; /* NULL = $POD_NAMESPACE, else the in-cluster
                                  namespace file, else "lathe-system" */
        char *identity;      /* NULL = $POD_NAME, else the host name */
        double lease_duration, renew_deadline, retry_period; /* 15s, 10s, 2s */
        double status_interval; /* at most one status write per object per this; default 1s */
    } op;
} spec_k8s;

/* Fills k with the defaults above (strings allocated). */
void spec_k8s_defaults(spec_k8s *k);
void spec_k8s_free(spec_k8s *k);
/* The namespace of a team's jobs (caller frees). */
char *spec_k8s_namespace(const spec_k8s *k, const char *team);

/* The ServerConfig's `slurm:` section (docs/slurm.md): how the Slurm
 * executor submits, where it looks, and the mappings to Slurm's names.
 * Used when `executor: slurm`, and by `lathe render JOB --target slurm`.
 * The team's account and user come from the policy (slurmAccount,
 * slurmUser) first, then from `accounts:`. */
typedef struct spec_slurm {
    char *partition;      /* --partition; NULL = the cluster's default */
    spec_kv *accounts;    /* team -> --account (the policy's slurmAccount wins) */
    size_t n_accounts;
    spec_kv *qos;         /* priority class -> --qos */
    size_t n_qos;
    spec_kv *gpu_types;   /* GRES type (gpu:TYPE:N) -> lathe GPU type */
    size_t n_gpu_types;
    char *gpu_type;       /* the lathe GPU type of GPUs whose GRES names no type;
                             default "L4" */
    char *lathe_path;     /* lathe on the nodes (the batch script execs it);
                             NULL = the server's own binary */
    char *bin_dir;        /* folder of sbatch, squeue, sacct, scancel, scontrol, srun;
                             NULL = found in PATH */
    char *decide;         /* "lathe" (default: its scheduler places, --nodelist)
                             or "slurm" (Slurm places; pending reasons shown) */
    int master_port;      /* MASTER_PORT of multi-node jobs; default 29500 */
    double state_interval; /* at most one squeue per this many seconds; default 1 */
    double command_timeout; /* seconds a Slurm command may take; default 30 */
    int array_max;        /* experiments as job arrays with %array_max when Slurm
                             decides; 0 = one sbatch per job (default) */
} spec_slurm;

void spec_slurm_defaults(spec_slurm *s);
void spec_slurm_free(spec_slurm *s);
/* The mapping's value for key, or NULL. */
const char *spec_kv_find(const spec_kv *kv, size_t n, const char *key);

typedef enum { SPEC_EXECUTOR_LOCAL, SPEC_EXECUTOR_K8S, SPEC_EXECUTOR_SLURM } spec_executor;

typedef struct spec_server {
    char *file;
    char *name;     /* metadata.name; may be NULL */
    char *listen;   /* "HOST:PORT" (IPv4, or [IPv6]:PORT); default 127.0.0.1:8740;
                       port 0 lets the system choose */
    char *data_dir; /* NULL = not given */
    struct {
        char *file;    /* a Cluster file (virtual GPUs, teams, priority classes); may be NULL */
        char *gpus;    /* "nvml" (this machine's GPUs) or "none"; NULL = nvml unless
                          a Cluster file is given */
        int cpu_slots; /* CPU-only jobs at once; 0 = online CPUs */
    } cluster;
    spec_server_token *tokens;
    size_t n_tokens;
    char *tokens_file;      /* `tokensFile:` a YAML file whose `tokens:` list adds to
                               these; re-read with the config's list on SIGHUP */
    spec_tls tls;
    struct {
        double per_second;  /* `rateLimit.requestsPerSecond` per token; default 50;
                               0 = no limit */
        int burst;          /* `rateLimit.burst`; default 100 */
    } rate_limit;
    spec_policy policy;     /* `policy:` */
    struct {
        char *policy;       /* "fifo", "greedy", "easy" or "lathe" (default) */
        double interval;    /* seconds between periodic passes; default 10 */
        /* 0 = the scheduler's default for the policy (sched_config_default) */
        double half_life, min_run_time, reclaim_min_run, max_slack, starve_after,
            default_estimate, aging;
        int gpu_share_limit;
        spec_toggle due_preemption;
        spec_toggle fair_share; /* `fairShare:` teams take turns by decayed usage (lathe) */
    } scheduler;
    struct {
        int max_retries;    /* upper bound on any job's retryPolicy.maxRetries; default 10 */
        double max_backoff; /* upper bound on any job's backoff, seconds; default 3600 */
        double jitter;      /* each backoff is scaled by a factor in [1 - j, 1 + j]; default 0.2 */
    } retry;
    double poll_interval;   /* seconds between executor polls; default 2 */
    struct {
        double max_body;      /* bytes; default 1 MiB */
        int max_connections;  /* default 256 */
        double connection_timeout; /* idle seconds before a connection is closed; default 60 */
    } limits;
    struct {
        double max_size; /* bytes before a trainer's log rotates; default 64 MiB */
        int keep;        /* rotated logs kept; default 3 */
    } logs;
    char *trainer_program; /* the lathe binary run as `PROGRAM train SPEC`; NULL =
                              /proc/self/exe */
    struct {
        double sample_interval; /* seconds between NVML samples of this machine's
                                   GPUs; default 10 */
    } monitoring;
    spec_executor executor; /* `executor: local` (default), `k8s` or `slurm` */
    spec_k8s k8s;           /* `kubernetes:`; defaults filled in */
    spec_slurm slurm;       /* `slurm:`; defaults filled in */
} spec_server;

/* A config with every default filled in. */
spec_server *spec_server_new_default(void);
void spec_server_free(spec_server *s);
/* Loads a ServerConfig file. Returns the number of errors added to d (0 =
 * valid, *out set; otherwise *out is NULL). An unreadable file is one error
 * and sets *io_error (may be NULL). */
size_t spec_server_load_file(const char *path, spec_server **out, diag_list *d, bool *io_error);
/* Loads a tokens file (`tokensFile:`): one mapping whose only key is
 * `tokens:`, a list of the same entries as the config's `tokens:`, with the
 * same checks (no hash twice within the file). Returns the number of
 * errors added to d (may be NULL); 0 = *out (n entries, possibly none;
 * free with spec_server_tokens_free) set. An unreadable file is one error
 * and sets *io_error (may be NULL). */
size_t spec_server_tokens_load_file(const char *path, spec_server_token **out, size_t *n,
                                    diag_list *d, bool *io_error);
void spec_server_tokens_free(spec_server_token *t, size_t n);
/* The config as a ServerConfig document (apiVersion, kind, metadata,
 * spec) that spec_server_load_string reads back to the same settings:
 * only what differs from the defaults, durations in seconds, sizes in
 * bytes. Caller decrefs. */
json_t *spec_server_to_json(const spec_server *s);
/* The same for text in memory; name is used in messages. */
size_t spec_server_load_string(const char *name, const char *text, size_t len, spec_server **out,
                               diag_list *d);

#endif
