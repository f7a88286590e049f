/* k8s.h: the Kubernetes part: how lathe talks to a Kubernetes API server,
 * and the objects it creates there.
 *
 *   k8s_config.c   where the cluster is and who lathe is: the in-cluster
 *                  service account, or a kubeconfig (contexts, CA, bearer
 *                  tokens, client certificates, exec credential plugins)
 *   k8s_client.c   calls over libcurl: get, list (label selectors,
 *                  pagination), create, server-side apply, merge patch,
 *                  status updates, delete; client-side rate limit; retries
 *                  with backoff; Kubernetes Status errors as lathe messages
 *   k8s_watch.c    streamed watches and the informer built on them (list,
 *                  then watch from its resourceVersion, bookmarks, relist
 *                  on 410 Gone without losing or repeating a transition);
 *                  pod log followers
 *   k8s_names.c    the names of an attempt's objects
 *   k8s_render_job.c, k8s_render_cluster.c
 *                  the objects of one attempt (a batch/v1 Job, the headless
 *                  Service of a multi-node job) and of a cluster's setup
 *                  (Namespaces, ResourceQuotas, LimitRanges,
 *                  PriorityClasses, PVCs); pure functions of their inputs
 *   k8s_render_crd.c, k8s_render_server.c
 *                  operator mode's CRDs, and what installs lathe into a
 *                  cluster (RBAC, ConfigMap, Deployment, Service)
 *   k8s_render_serve.c
 *                  what serves an adapter (`lathe serve` or vLLM:
 *                  Deployment, Service, HorizontalPodAutoscaler,
 *                  PodDisruptionBudget), where a training Job left its
 *                  adapter, and which job of an experiment to serve
 *
 * JSON is jansson's json_t throughout; YAML is read with libyaml through
 * lib/spec's layer and printed with spec_json_to_yaml. Nothing here knows lathe's store, scheduler or
 * executor: lib/exec/exec_k8s.c builds the Kubernetes executor on this.
 * Depends on base and spec only.
 */
#ifndef LATHE_K8S_H
#define LATHE_K8S_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec/spec.h"

/* ---- configuration (k8s_config.c) ---- */
typedef struct k8s_config {
    char *server;      /* "https://10.0.0.1:6443" (scheme, host, port; no trailing '/') */
    char *ca_file;     /* PEM file of the CA; NULL = none given */
    char *ca_data;     /* PEM text (certificate-authority-data, decoded); NULL = none */
    char *token;       /* bearer token; NULL = none */
    char *token_file;  /* read again whenever it changes (service-account rotation) */
    char *cert_file, *key_file; /* client certificate and key files */
    char *cert_data, *key_data; /* the same as PEM text (decoded *-data fields) */
    bool insecure;     /* insecure-skip-tls-verify: true (a warning is printed) */
    /* exec credential plugin (users[].user.exec): argv, extra environment
     * ("NAME=value"), apiVersion (client.authentication.k8s.io/v1 or v1beta1) */
    char **exec_argv;
    size_t exec_argc;
    char **exec_env;
    size_t n_exec_env;
    char *exec_api_version;
    char *namespace_;  /* the context's namespace (in-cluster: the pod's); "default" */
    char *source;      /* for messages: "in-cluster service account",
                          "kubeconfig /root/.kube/config, context kind-lab" */
    double qps;        /* rate limit; 0 = 50 */
    int burst;         /* 0 = 100 */
    double timeout;    /* seconds for one call that is not a stream; 0 = 30 */
    int max_retries;   /* retries of one call on 429 / 5xx / connection loss; 0 = 5,
                          -1 = none */
} k8s_config;

/* The in-cluster service account: KUBERNETES_SERVICE_HOST / _PORT, and
 * sa_dir's token, ca.crt and namespace files (sa_dir NULL =
 * /var/run/secrets/kubernetes.io/serviceaccount). False with a message when
 * it is not in a cluster or a file is missing. */
bool k8s_config_in_cluster(k8s_config *c, const char *sa_dir, char *err, size_t errsz);
/* A kubeconfig file (path NULL = $KUBECONFIG's first file, else
 * ~/.kube/config), context NULL = its current-context. Relative file names
 * in it are taken from the file's folder. False with a message naming the
 * file, the field and the fix. */
bool k8s_config_kubeconfig(k8s_config *c, const char *path, const char *context, char *err,
                           size_t errsz);
/* The same from text in memory (name for messages, dir for relative files). */
bool k8s_config_parse_kubeconfig(k8s_config *c, const char *name, const char *text, size_t len,
                                 const char *dir, const char *context, char *err, size_t errsz);
/* What lathe uses: an explicit kubeconfig when path is given, else the
 * in-cluster service account when there is one, else $KUBECONFIG or
 * ~/.kube/config. */
bool k8s_config_load(k8s_config *c, const char *path, const char *context, char *err,
                     size_t errsz);
void k8s_config_free(k8s_config *c);

/* ---- errors ---- */
typedef enum {
    K8S_OK = 0,
    K8S_E_NOT_FOUND,    /* 404 */
    K8S_E_EXISTS,       /* 409 AlreadyExists */
    K8S_E_CONFLICT,     /* 409 Conflict (a stale resourceVersion) */
    K8S_E_GONE,         /* 410 Gone / Expired: a watch or continue token too old */
    K8S_E_INVALID,      /* 422 Invalid, 400 BadRequest */
    K8S_E_UNAUTHORIZED, /* 401 */
    K8S_E_FORBIDDEN,    /* 403 */
    K8S_E_UNREACHABLE,  /* no answer (connection refused, TLS, timeout) after the retries */
    K8S_E_SERVER,       /* 429 / 5xx after the retries */
    K8S_E_OTHER         /* anything else (an unreadable answer) */
} k8s_rc;

const char *k8s_rc_name(k8s_rc rc); /* "not found", "already exists", ... */

/* What a call that failed says, from the Status object when there is one. */
typedef struct k8s_error {
    k8s_rc rc;
    long http;          /* the HTTP status; 0 = no answer */
    char reason[48];    /* Status.reason: "NotFound", "AlreadyExists", "Invalid", ... */
    char message[768];  /* lathe's sentence: what was asked, the server's message,
                           each cause (field: message), and the fix */
} k8s_error;

/* ---- the client (k8s_client.c) ---- */
typedef struct k8s_client k8s_client;

/* One client per server; thread-safe (calls may come from several threads;
 * the rate limit is shared). Copies cfg. NULL with a message when libcurl
 * cannot be set up or the CA cannot be read. */
k8s_client *k8s_client_new(const k8s_config *cfg, char *err, size_t errsz);
void k8s_client_free(k8s_client *cl);
const k8s_config *k8s_client_config(const k8s_client *cl);

/* An object or a collection: api "v1" or "batch/v1"; resource plural
 * ("jobs"); ns NULL for cluster-scoped or all namespaces; name NULL for a
 * collection; sub a subresource ("status", "log") or NULL. */
typedef struct k8s_ref {
    const char *api, *resource, *ns, *name, *sub;
} k8s_ref;

/* The URL path of ref ("/apis/batch/v1/namespaces/team-a/jobs/x"); caller frees. */
char *k8s_path(const k8s_ref *ref);

/* Calls. *out (where given) receives the answer's object, the caller's to
 * json_decref. Each returns K8S_OK or fills e (e may be NULL). */
k8s_rc k8s_get(k8s_client *cl, const k8s_ref *ref, json_t **out, k8s_error *e);
/* Every item of a collection, page by page (limit per page; 0 = 500),
 * into *items (a JSON array); *rv receives the list's resourceVersion (may
 * be NULL; caller frees). label / field: selectors or NULL. */
k8s_rc k8s_list(k8s_client *cl, const k8s_ref *ref, const char *label, const char *field,
                int limit, json_t **items, char **rv, k8s_error *e);
/* POST to ref's collection (ref->name is for messages). Retried like every
 * call (429, 5xx, a lost connection): a create the server applied before
 * its answer was lost then answers 409 AlreadyExists, so a caller treats
 * K8S_E_EXISTS from a create as "maybe mine" (compare its labels, or read
 * it). */
k8s_rc k8s_create(k8s_client *cl, const k8s_ref *ref, const json_t *obj, json_t **out,
                  k8s_error *e);
/* Server-side apply (PATCH application/apply-patch+yaml, fieldManager=lathe,
 * force when asked). */
k8s_rc k8s_apply(k8s_client *cl, const k8s_ref *ref, const json_t *obj, bool force, json_t **out,
                 k8s_error *e);
/* JSON merge patch (RFC 7386; application/merge-patch+json). */
k8s_rc k8s_merge_patch(k8s_client *cl, const k8s_ref *ref, const json_t *patch, json_t **out,
                       k8s_error *e);
/* PUT of the whole object (ref->sub "status" for the status subresource). */
k8s_rc k8s_replace(k8s_client *cl, const k8s_ref *ref, const json_t *obj, json_t **out,
                   k8s_error *e);
/* DELETE with propagationPolicy ("Foreground", "Background", "Orphan" or
 * NULL) and gracePeriodSeconds (< 0 = the object's own). */
k8s_rc k8s_delete(k8s_client *cl, const k8s_ref *ref, const char *propagation, int grace,
                  k8s_error *e);
/* A pod's log at once (no follow): since_time an RFC 3339 time or NULL;
 * timestamps prefixes each line with its RFC 3339 time. *text the
 * caller's to free. */
k8s_rc k8s_pod_log(k8s_client *cl, const char *ns, const char *pod, const char *container,
                   const char *since_time, bool timestamps, char **text, size_t *len,
                   k8s_error *e);

/* Requests sent (each HTTP request, retries included; a watch or a
 * followed log counts once when it starts), for the benchmark and tests. */
typedef struct k8s_stats {
    uint64_t requests, gets, lists, creates, patches, updates, deletes, watches, logs;
    uint64_t retries, throttled; /* retried answers; calls the rate limit held back */
} k8s_stats;
void k8s_client_stats(const k8s_client *cl, k8s_stats *out);

/* ---- watches and informers (k8s_watch.c) ---- */
typedef enum { K8S_ADDED, K8S_MODIFIED, K8S_DELETED } k8s_event_type;

/* Called on the informer's thread for every transition of an object, in
 * order: ADDED once, MODIFIED for each new resourceVersion, DELETED once
 * (obj is the last state known). obj is borrowed for the call; the
 * informer never changes it afterwards (a new state is a new object), so a
 * callee may keep it with json_incref (jansson's counts are atomic) instead
 * of copying it. */
typedef void (*k8s_event_fn)(void *ud, k8s_event_type type, const json_t *obj);
/* Called when the informer's view becomes current (after each list) or
 * stops being current (the API is unreachable: why says so). */
typedef void (*k8s_sync_fn)(void *ud, bool synced, const char *why);

typedef struct k8s_informer k8s_informer;

/* Lists ref's collection (with the label selector) and watches it from the
 * list's resourceVersion with allowWatchBookmarks, on a thread of its own.
 * A watch that ends is started again from the newest resourceVersion seen
 * (bookmarks included); 410 Gone (as an HTTP status or an ERROR event)
 * relists, and the difference between the cache and the new list is
 * delivered as events, so no transition is lost or repeated. Connection
 * loss is retried with backoff forever (until k8s_informer_free). */
k8s_informer *k8s_informer_start(k8s_client *cl, const k8s_ref *ref, const char *label,
                                 k8s_event_fn on_event, k8s_sync_fn on_sync, void *ud,
                                 char *err, size_t errsz);
/* True once the first list was delivered. */
bool k8s_informer_synced(k8s_informer *inf);
/* A copy of the cached object ns/name (NULL when absent); caller decrefs. */
json_t *k8s_informer_get(k8s_informer *inf, const char *ns, const char *name);
/* Counters: lists (1 + relists), watches started, events delivered, 410s seen. */
typedef struct k8s_informer_stats {
    uint64_t lists, watches, events, gone, bookmarks;
} k8s_informer_stats;
void k8s_informer_stats_get(k8s_informer *inf, k8s_informer_stats *out);
/* Stops the thread (a watch in progress is aborted) and frees. NULL is fine. */
void k8s_informer_free(k8s_informer *inf);

/* Follows a pod's log (follow=true, timestamps=true) on a thread of its
 * own, handing whole lines (timestamp stripped, no newline) to on_line with
 * their RFC 3339 time ts. When the stream breaks while the pod may still
 * run, it reconnects with sinceTime = the last line's time and skips the
 * lines it already gave, so no line is given twice or lost. A follower
 * started again after a restart resumes the same way from (since_time,
 * skip): the time of the last line already had and how many lines with
 * exactly that time were had (NULL, 0 = from the start). on_end is called
 * once when the log is over (the container ended and the stream closed),
 * or the pod is gone. */
typedef void (*k8s_line_fn)(void *ud, const char *ts, const char *line, size_t len);
typedef void (*k8s_end_fn)(void *ud, const char *why);
typedef struct k8s_log_follower k8s_log_follower;
k8s_log_follower *k8s_log_follow(k8s_client *cl, const char *ns, const char *pod,
                                 const char *container, const char *since_time, long skip,
                                 k8s_line_fn on_line, k8s_end_fn on_end, void *ud);
/* Stops following (the stream is aborted) and frees. NULL is fine. */
void k8s_log_follower_free(k8s_log_follower *f);

/* ---- leader election (k8s_lease.c) ---- */
/* A coordination.k8s.io/v1 Lease held by one replica at a time, the way
 * client-go's leaderelection does it: the holder renews renewTime every
 * retry_period; another replica takes the Lease when its record has not
 * changed for lease_duration seconds of the taker's own clock (no clock is
 * compared across machines), with an update that carries the
 * resourceVersion it read, so of two takers exactly one wins (the other
 * gets 409 Conflict). A holder that could not renew for renew_deadline
 * seconds has lost it and must stop acting at once. */
typedef struct k8s_lease_config {
    const char *namespace_, *name; /* the Lease object */
    const char *identity;          /* holderIdentity: this replica (its pod's name) */
    double duration;               /* leaseDurationSeconds; 0 = 15 */
    double renew_deadline;         /* 0 = 10; below duration */
    double retry_period;           /* 0 = 2 */
} k8s_lease_config;

typedef struct k8s_lease k8s_lease;
/* Strings are copied; cl is borrowed. */
k8s_lease *k8s_lease_new(k8s_client *cl, const k8s_lease_config *c);
/* One try at time now (seconds, CLOCK_MONOTONIC or any steady clock):
 * creates the Lease when absent, renews it when held, takes it when its
 * holder let it expire (or released it). Returns true while this replica
 * holds it: the last successful renewal is less than renew_deadline old.
 * A failed call fills e (may be NULL). Call it every retry_period. */
bool k8s_lease_tick(k8s_lease *l, double now, k8s_error *e);
/* Whether this replica held the Lease at its last tick. */
bool k8s_lease_held(const k8s_lease *l);
/* The holder at the last read ("" when none, NULL before the first). */
const char *k8s_lease_holder(const k8s_lease *l);
/* How many times the Lease changed hands (leaseTransitions) at the last read. */
int k8s_lease_transitions(const k8s_lease *l);
/* Gives the Lease up when held (holderIdentity cleared, so another replica
 * takes it at its next try instead of after lease_duration). */
void k8s_lease_release(k8s_lease *l);
void k8s_lease_free(k8s_lease *l);

/* ---- names and labels (k8s_names.c) ---- */
/* Label keys of every object lathe creates. */
#define K8S_LABEL_MANAGED "app.kubernetes.io/managed-by" /* "lathe" */
#define K8S_LABEL_JOB_ID "lathe.dev/job-id"              /* the store's job id */
#define K8S_LABEL_JOB "lathe.dev/job"                    /* the job's name */
#define K8S_LABEL_TEAM "lathe.dev/team"
#define K8S_LABEL_EXPERIMENT "lathe.dev/experiment"
#define K8S_LABEL_ATTEMPT "lathe.dev/attempt"
#define K8S_LABEL_OWNER_UID "lathe.dev/owner-uid"   /* operator mode: the custom resource's uid */
#define K8S_LABEL_QUEUE "lathe.dev/queue"           /* a user's own Job that lathe admits */
#define K8S_ANNOT_PLACEMENT "lathe.dev/placement"   /* where lathe's scheduler placed it (JSON) */
#define K8S_ANNOT_SPEC "lathe.dev/spec" /* the resolved spec (pod template), for the spec file */
#define K8S_CONTAINER "trainer"         /* the container's name */

/* The Job's name of one attempt: "lathe-<job>-<attempt>", a DNS-1123 label
 * of at most 52 characters (so pod names and the hostnames of an Indexed
 * Job's pods fit); a longer name is cut and keeps its uniqueness with a
 * hash of the whole: "lathe-<first part>-<8 hex>-<attempt>". */
void k8s_job_name(const char *job, int attempt, char *out, size_t outsz);

/* ---- rendering (k8s_render_job.c, k8s_render_cluster.c) ---- */
/* Everything one attempt's Job needs. Strings are borrowed. */
typedef struct k8s_job_params {
    const char *name;       /* k8s_job_name() */
    const char *namespace_; /* the team's (spec_k8s_namespace) */
    int64_t job_id;         /* labels and adoption */
    const char *job, *team, *experiment; /* experiment may be NULL */
    int attempt;
    const char *image;
    char *const *argv;      /* the container's command (never a shell) */
    size_t argc;
    const char *const *env; /* "NAME=value": the trainer contract's variables as the pod
                               sees them, and the spec's trainer.env */
    size_t n_env;
    int nnodes;             /* pods (Indexed Job with a headless Service when > 1) */
    int gpus_per_node;      /* nvidia.com/gpu requests = limits; 0 = a CPU job */
    double cpu;             /* cores per pod (requests); 0 = none */
    double memory;          /* bytes per pod (requests = limits); 0 = none */
    const char *gpu_product;/* value of the GPU-type node label; NULL = any */
    const char *const *nodes; /* required node affinity (kubernetes.io/hostname In);
                                 n_nodes 0 = anywhere */
    size_t n_nodes;
    const char *rack;       /* required rack (settings' rack label); NULL = any */
    const char *priority_class; /* NULL = none */
    const char *service_account; /* the team's (ServerConfig policy); NULL = the settings'
                                    service_account; with neither, the pod mounts no
                                    service account token */
    const char *checkpoint_pvc; /* NULL = no checkpoint volume */
    const char *checkpoint_subpath; /* the job's folder in it (CHECKPOINT_DIR = mount/sub) */
    const char *spec_yaml;  /* the resolved spec, as the file under spec_mount; NULL = none */
    double grace;           /* terminationGracePeriodSeconds */
    double max_duration;    /* activeDeadlineSeconds; 0 = none */
    const int *fail_codes;  /* exit codes that fail the Job at once (podFailurePolicy) */
    size_t n_fail_codes;
    bool suspend;           /* created suspended (lathe's admission) */
    const spec_k8s *settings; /* labels, mounts, security context, ttl, PVCs, ports */
    /* Operator mode: the custom resource the attempt comes from. uid given:
     * the label lathe.dev/owner-uid on every object (what adoption compares,
     * with the attempt); all four given: the Job's ownerReference to it
     * (controller, blockOwnerDeletion), so deleting the resource deletes
     * its Jobs. uid NULL = none. */
    struct {
        const char *api_version, *kind, *name, *uid;
    } owner;
    const char *placement_json; /* the admit patch's annotation lathe.dev/placement; NULL = none */
} k8s_job_params;

/* The batch/v1 Job of one attempt: suspended as asked, restartPolicy Never,
 * backoffLimit 0, podFailurePolicy (FailJob on fail_codes and on the
 * DisruptionTarget condition), podReplacementPolicy Failed, labels (with
 * lathe.dev/owner-uid and an ownerReference when p->owner is given),
 * resources, nodeSelector / affinity, volumes (checkpoint PVC, read-only
 * model and data PVCs, the spec as a downward-API file, memory-backed
 * /dev/shm), non-root securityContext, terminationGracePeriodSeconds,
 * activeDeadlineSeconds, ttlSecondsAfterFinished; Indexed with
 * subdomain when nnodes > 1, with NNODES, NODE_RANK (from the completion
 * index), MASTER_ADDR (pod 0's stable name), MASTER_PORT, NPROC_PER_NODE. */
json_t *k8s_render_job(const k8s_job_params *p);
/* The headless Service of a multi-node attempt (NULL when nnodes <= 1). */
json_t *k8s_render_service(const k8s_job_params *p);
/* The placement part of a suspended Job's update at admission: a merge
 * patch that sets the pod template's nodeSelector / affinity from p (null
 * where the placement wants none), spec.suspend false and, when
 * p->placement_json is given, the Job's annotation lathe.dev/placement. */
json_t *k8s_render_admit_patch(const k8s_job_params *p);

/* A cluster's setup: for each team a Namespace (labelled lathe.dev/team),
 * a ResourceQuota on requests.nvidia.com/gpu (its quota), a LimitRange, and
 * its checkpoint PVC; the shared read-only model and data PVCs; a
 * PriorityClass for each priority class. A JSON array of objects. */
json_t *k8s_render_cluster(const spec_cluster *c, const spec_k8s *k);

/* The CustomResourceDefinitions of operator mode (k8s_render_crd.c):
 * LoRATrainingJob and LoRAExperiment in the groups training.example.com
 * (the seed article's) and lathe.dev, version v1, namespaced: the spec
 * schema from spec_openapi_schema, a status subresource and its schema
 * (phase, conditions, attempts, placement, checkpoint, loss,
 * tokensPerSecond, cost, gpuHours, waitReason, observedGeneration), and
 * printer columns (STATE, GPUS, LOSS, AGE). A JSON array of four objects. */
json_t *k8s_render_crds(void);

/* What installs lathe into a cluster (k8s_render_server.c). Borrowed. */
typedef struct k8s_server_params {
    const spec_server *settings; /* --config; NULL = the defaults */
    const char *namespace_;      /* NULL = "lathe-system" */
    const char *image;           /* the server's image; NULL = settings' kubernetes.image */
    const char *cluster_yaml;    /* the text of the settings' Cluster file (put in the
                                    ConfigMap beside the config); NULL = none */
} k8s_server_params;

/* The CRDs, the Namespace, ServiceAccount `lathe`, least-privilege RBAC (a
 * ClusterRole and its binding; a Role and RoleBinding for the leader
 * election Lease), ConfigMap `lathe-config` with the ServerConfig (executor
 * k8s, in-cluster credentials, listen 0.0.0.0:8740, dataDir on an emptyDir,
 * the settings' other values), a Deployment of two replicas and its
 * Service on port 8740. A JSON array, in an order `kubectl apply -f` takes
 * from the top. */
json_t *k8s_render_server(const k8s_server_params *p);
/* The ServerConfig the ConfigMap holds, as JSON (for tests and render). */
json_t *k8s_server_config(const k8s_server_params *p);

/* ---- serving an adapter (k8s_render_serve.c) ---- */
typedef enum { K8S_SERVE_LATHE, K8S_SERVE_VLLM } k8s_serve_runtime;

/* "lathe" or "vllm". */
const char *k8s_serve_runtime_name(k8s_serve_runtime r);

/* The image of vLLM's OpenAI server when --image names none. */
#define K8S_VLLM_IMAGE "vllm/vllm-openai:latest"
/* The port both runtimes listen on when none is given (vLLM's own). */
#define K8S_SERVE_PORT 8000
/* The Pods metrics the HorizontalPodAutoscaler reads: requests per second
 * per pod, as a prometheus-adapter rule names the rate of each runtime's
 * request counter (lathe_serve_requests_total, vllm:request_success_total;
 * docs/kubernetes.md, "Serving an adapter"). */
#define K8S_SERVE_RPS_METRIC_LATHE "lathe_serve_requests_per_second"
#define K8S_SERVE_RPS_METRIC_VLLM "vllm_requests_per_second"

/* One adapter the server loads: clients name it as the request's "model". */
typedef struct k8s_serve_adapter {
    const char *name; /* [A-Za-z0-9._-] */
    const char *path; /* its folder as the pod sees it */
} k8s_serve_adapter;

/* Everything the serving objects need. Strings are borrowed; 0 / NULL
 * takes the default written beside each field. */
typedef struct k8s_serve_params {
    const char *name;          /* every object's name: a DNS-1035 label */
    const char *namespace_;    /* NULL = "default" */
    k8s_serve_runtime runtime;
    const char *image;         /* NULL = lathe: the settings' image; vLLM: K8S_VLLM_IMAGE */
    const char *model_path;    /* the base model's folder in the pod (vLLM: or a Hugging
                                  Face name, found in HF_HOME); required */
    const char *served_model_name; /* the base model's id in the API (--served-model-name);
                                      NULL = the model path */
    const char *model_pvc;     /* NULL = the settings' modelPVC; "" = no model volume;
                                  mounted read-only at the settings' modelMount */
    double model_bytes;        /* the weights' size: the startup probe and memory; 0 = unknown */
    const k8s_serve_adapter *adapters;
    size_t n_adapters;
    const char *adapters_pvc;  /* NULL = the settings' checkpointPVC; mounted read-only at
                                  checkpointMount (where the training pods wrote them) */
    int max_lora_rank;         /* vLLM's --max-lora-rank (rounded up to one it takes); 0 = 16 */
    int max_adapters;          /* lathe's --max-adapters, vLLM's --max-loras; 0 = the
                                  adapters' count */
    int max_batch;             /* lathe's --max-batch; 0 = lathe's own default */
    int threads;               /* lathe's --threads; 0 = the CPU request, rounded up */
    int replicas;              /* > 0: exactly so many, no HorizontalPodAutoscaler */
    int min_replicas, max_replicas; /* the autoscaler's range; 0 = 1 and 4 */
    int cpu_target;            /* average CPU utilisation, % of the request; 0 = 70 */
    double rps_target;         /* requests per second per pod; 0 = 10 */
    const char *rps_metric;    /* the Pods metric's name; NULL = the runtime's (above) */
    int gpus;                  /* GPUs per pod (the settings' gpuResource); 0 = none */
    double cpu;                /* cores requested per pod; 0 = 4 */
    double memory;             /* bytes per pod (requests = limits); 0 = from model_bytes
                                  (weights x 1.25 + 2 GiB, in whole GiB), else 16 GiB */
    int port;                  /* 0 = K8S_SERVE_PORT */
    const char *api_key_secret; /* a Secret holding the API key; NULL = no key */
    const char *api_key_key;   /* its key; NULL = "api-key" */
    double startup_seconds;    /* how long loading may take; 0 = k8s_serve_startup_seconds */
    const char *team, *job, *experiment; /* labels lathe.dev/team, job, experiment; NULL = none */
    const char *selection;     /* annotation lathe.dev/selection (why this adapter); NULL = none */
    const spec_k8s *settings;  /* mounts, PVCs, image, security context; NULL = defaults */
} k8s_serve_params;

/* Seconds the startup probe lets the server load before the liveness
 * probe may restart it: the runtime's start (lathe 60 s, vLLM 240 s: CUDA
 * graphs, the KV cache's profile) plus the weights read at 100 MiB/s
 * (network storage), at least 120 s; 900 s when the size is unknown. */
double k8s_serve_startup_seconds(const k8s_serve_params *p);

/* The objects that serve the adapters, in an order `kubectl apply -f`
 * takes from the top: a ClusterIP Service, the Deployment (its container
 * runs `lathe serve` or `vllm serve` with the model and the adapters;
 * startup probe on /health for the loading, liveness /health after 60 s
 * every 30 s, readiness after 30 s every 10 s on /ready (lathe) or
 * /health (vLLM, which listens only once loaded); the model and adapters
 * PVCs read-only; the API key from a Secret through the environment
 * variable each server reads, LATHE_API_KEY or VLLM_API_KEY),
 * the autoscaling/v2 HorizontalPodAutoscaler (CPU utilisation and the
 * requests-per-second Pods metric) unless replicas is fixed, and a
 * policy/v1 PodDisruptionBudget when more than one pod runs. A JSON array;
 * NULL with a message in err when p lacks the model path or a name. */
json_t *k8s_render_serve(const k8s_serve_params *p, char *err, size_t errsz);

/* Where a training attempt's Job (k8s_render_job's object) leaves its
 * adapter, read from the Job itself so that the serving pod mounts what
 * the training pod wrote: the namespace, the checkpoints volume's claim
 * and CHECKPOINT_DIR/final, BASE_MODEL_PATH and the models volume's claim,
 * and the lathe.dev labels. Owned strings; NULL where the Job has none. */
typedef struct k8s_serve_source {
    char *namespace_, *team, *job, *experiment;
    char *adapters_pvc, *adapter_path;
    char *model_pvc, *model_path;
} k8s_serve_source;
/* False with a message when the Job has no checkpoints volume or no
 * CHECKPOINT_DIR (nothing to serve). */
bool k8s_serve_source_of_job(const json_t *job, k8s_serve_source *out, char *err, size_t errsz);
void k8s_serve_source_free(k8s_serve_source *s);

/* One finished or unfinished job of an experiment, as a candidate to
 * serve. Strings are borrowed. */
typedef struct k8s_serve_candidate {
    const char *job;     /* its name */
    const char *state;   /* the API's state; only "succeeded" is served; NULL = succeeded */
    double eval_loss;    /* the best eval loss; NAN = none */
    double train_loss;   /* the final training loss; NAN = none */
    const char *adapter; /* its adapter's path; may be NULL */
    /* when known: the step of the best eval loss, and the latest eval (the
     * final adapter's, for a job evaluated at its last step); -1 / NAN = unknown */
    long best_step, last_step;
    double last_eval_loss;
} k8s_serve_candidate;

/* Which job to serve, and why, one sentence a line. */
typedef struct k8s_serve_choice {
    long chosen;  /* index into the candidates; -1 = none can be served */
    bool by_eval; /* chosen by eval loss; false: fell back to the training loss */
    char **lines;
    size_t n_lines;
} k8s_serve_choice;

/* The succeeded job with the lowest eval loss, among those that have one;
 * when none has one, the lowest final training loss (and the explanation
 * says so). Ties go to the lower training loss, then to the name first in
 * byte order, so the choice never depends on the input's order. The
 * explanation names the choice and its loss, up to three runners-up with
 * their distance, the rule, the jobs left out (not succeeded, or no eval
 * loss when others have one), and, when the chosen job's best eval loss
 * came before its last evaluation, that its final adapter scored the
 * latter. Returns false (chosen -1, the reason in lines) when no job can
 * be served. experiment names it in the text (may be NULL). Free with
 * k8s_serve_choice_free. */
bool k8s_serve_choose(const char *experiment, const k8s_serve_candidate *c, size_t n,
                      k8s_serve_choice *out);
void k8s_serve_choice_free(k8s_serve_choice *ch);

/* The candidates of the API's JSON (docs/api.md): an experiment
 * (GET /v1/experiments/NAME, or POST /v1/jobs's {"experiment", "jobs"}),
 * a job list ({"items": [...]}) or an array of jobs. Each job's name,
 * state, final training loss (progress.loss), best eval loss and its step
 * (eval.best_loss, eval.best_step), latest eval (eval.loss, eval.step) and
 * adapter. Strings point into v. NULL with a message in err when v is none
 * of these or a job has no name; *n 0 is a valid answer. */
k8s_serve_candidate *k8s_serve_candidates_json(const json_t *v, size_t *n, char *err,
                                               size_t errsz);

/* Kubernetes quantities: cores as "4", "500m", "1500m" (rounded up to a
 * millicore); bytes as "32Gi" / "512Mi" / "1Ti" / "4Ki" when an exact
 * binary multiple, else the whole number of bytes ("34359738367";
 * rounded up). Negative values are written as 0. */
void k8s_quantity_cpu(double cores, char *out, size_t outsz);
void k8s_quantity_bytes(double bytes, char *out, size_t outsz);


#endif
