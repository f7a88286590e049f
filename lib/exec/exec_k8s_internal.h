/* exec_k8s_internal.h: what the Kubernetes backend's files share.
 *
 *   exec_k8s_objects.c  request -> k8s_job_params -> the Job (and Service)
 *   exec_k8s.c          the backend: informers on Jobs (lathe's, and users'
 *                       Jobs labelled lathe.dev/queue that lathe admits),
 *                       Pods and Nodes and the tables they keep; prepare,
 *                       start (admission), attach, find, signal, cancel,
 *                       inventory
 *   exec_k8s_poll.c     a handle's poll: the Job's and its pods' states
 *                       classified, pod logs followed into output.log
 *   exec_k8s_map.c      a string-keyed hash table for those tables
 */
#ifndef LATHE_EXEC_K8S_INTERNAL_H
#define LATHE_EXEC_K8S_INTERNAL_H

#include "exec_internal.h"
#include "k8s/k8s.h"

#include <pthread.h>

/* ---- reading objects (exec_k8s.c) ---- */
/* A string member of o; its metadata's; one of its labels. NULL when absent. */
const char *k8s_jstr(const json_t *o, const char *key);
const char *k8s_meta_str(const json_t *o, const char *key);
const char *k8s_label_of(const json_t *o, const char *key);

/* ---- the request's objects (exec_k8s_objects.c) ---- */
typedef struct exec_k8s_params {
    k8s_job_params p; /* points into the fields below and the request */
    char name[64];
    char *ns, *spec_path, *ckpt_dir, *subpath;
    char **argv, **env;
    size_t argc, n_env;
} exec_k8s_params;

void exec_k8s_params_init(exec_k8s_params *out, const exec_request *req, const spec_k8s *k,
                          bool suspend);
void exec_k8s_params_free(exec_k8s_params *p);

/* ---- a string-keyed table (exec_k8s_map.c) ---- */
typedef struct kmap_entry {
    char *key; /* NULL = empty slot */
    void *val;
} kmap_entry;

typedef struct kmap {
    kmap_entry *e;
    size_t cap, n; /* cap a power of two */
} kmap;

void kmap_init(kmap *m);
/* Frees the keys (and each value with free_val when given). */
void kmap_free(kmap *m, void (*free_val)(void *));
void *kmap_get(const kmap *m, const char *key);
/* Sets key's value (the key is copied); returns the old value or NULL. */
void *kmap_put(kmap *m, const char *key, void *val);
/* Removes key; returns its value or NULL. */
void *kmap_del(kmap *m, const char *key);

/* ---- the backend (exec_k8s.c) ---- */

/* One Job lathe made or admits, as the informers last showed it. */
typedef struct k8s_track {
    json_t *job;     /* newest state; NULL before it was seen and after deletion */
    bool seen, gone; /* seen once; deleted since */
    bool user;       /* a user's Job (lathe.dev/queue): its pods are tracked by the
                        Job controller's job-name label, not lathe's labels */
    bool admitted;   /* a user's Job an attempt of lathe runs now: its pods'
                        GPUs are lathe's (the store counts them), not foreign */
    double gone_at;  /* when the deletion was seen (the track is dropped a while later) */
    kmap pods;       /* pod name -> json_t * (the last state; kept after deletion) */
    kmap pods_gone;  /* pod name -> (void *)1 once deleted */
} k8s_track;

/* What lathe knows of a pod for the inventory: where it holds GPUs. */
typedef struct k8s_pod_use {
    char *node;
    int gpus;
    bool ours; /* created by lathe (lathe counts those itself) */
    char *job; /* "ns/job" of the Job that made it (NULL = none): a user's Job
                  lathe admitted counts as lathe's while the track says so */
} k8s_pod_use;

typedef struct k8s_backend {
    exec_backend be;
    const spec_k8s *k;
    k8s_client *cl;
    bool own_client;
    k8s_config cfg; /* when own_client */
    k8s_informer *jobs, *pods, *nodes;
    k8s_informer *user_jobs; /* Jobs labelled lathe.dev/queue */
    pthread_mutex_t mu;      /* everything below */
    kmap tracks;             /* "ns/job" -> k8s_track * */
    kmap uses;               /* "ns/pod" -> k8s_pod_use * (non-terminal pods on a node) */
    kmap node_objs;          /* node name -> json_t * */
    uint64_t nodes_version;
    uint64_t deletions;      /* Job deletions seen: every so many, old tracks are dropped */
    bool synced[4];          /* jobs, pods, nodes, users' jobs */
    char why[320];           /* why not synced */
} k8s_backend;

/* A copy of what the informers show of Job ns/name: the Job (NULL when not
 * there), whether it was seen and since deleted, and its pods (last states,
 * with a flag per deleted pod). Free with k8s_view_free. */
typedef struct k8s_view {
    json_t *job;
    bool seen, gone, synced;
    json_t **pods;
    bool *pod_gone;
    size_t n_pods;
} k8s_view;

void k8s_backend_view(k8s_backend *kb, const char *ns, const char *name, k8s_view *v);
void k8s_view_free(k8s_view *v);
/* Marks a user's Job as run by lathe (its pods' GPUs are then lathe's) or
 * not any more. */
void k8s_backend_admitted(k8s_backend *kb, const char *ns, const char *name, bool admitted);

/* ---- handles (exec_k8s.c, exec_k8s_poll.c) ---- */
typedef struct k8s_handle k8s_handle;

/* One followed pod log. */
typedef struct k8s_follow {
    k8s_handle *h;
    char *pod;
    int rank;              /* its completion index; lines of ranks above 0 are prefixed */
    k8s_log_follower *f;
    bool ended;            /* the follower said the log is over */
    char ts[48];           /* the last line's time */
    long same;             /* lines given with exactly that time */
} k8s_follow;

struct k8s_handle {
    exec_handle h; /* first: what callers see */
    k8s_backend *kb;
    char *ns, *name;
    int64_t job_id;
    int nnodes;
    int *no_retry;
    size_t n_no_retry;
    double created_at;
    double term_at, kill_at; /* a stop's SIGTERM (the suspension) and SIGKILL deadline */
    bool kill_sent;
    bool cancel;             /* delete the Job (foreground) once its pods are gone */
    bool cleaned;            /* the Job was deleted or left for its TTL */
    exec_tally tally;
    exec_log_reader log;
    pthread_mutex_t log_mu;  /* log_fd, the followers' positions and flags */
    int log_fd;
    k8s_follow **fol;
    size_t n_fol;
    bool fol_dirty;          /* positions changed since logpos.json was written */
    double poll_now;         /* the current poll's time (points are stamped with it) */
    double end_seen;         /* when the end was first seen (the logs may still drain) */
    bool adopt;              /* a user's Job: never deleted; cancel suspends it */
    char **stale;            /* adopt: pods of earlier admissions of the same Job, not
                                this attempt's (their names; ignored by polls) */
    size_t n_stale;
    bool ended;
    exec_status final;
    json_t *resume;          /* logpos.json of a re-attached handle: where followers resume */
};

/* What the informers show of the handle's Job: k8s_backend_view without
 * the pods of earlier admissions of an adopted Job. */
void k8s_handle_view(k8s_handle *kh, k8s_view *v);
/* Writes the handle to the job's current.json (after a start, and after a
 * change of its deadlines). */
void k8s_handle_save(k8s_handle *kh);
/* Suspends the attempt's Job (its pods get SIGTERM and their grace). */
bool exec_k8s_suspend(k8s_handle *kh, char *err, size_t errsz);
/* Deletes its pods at once (grace 0). */
bool exec_k8s_kill_pods(k8s_handle *kh, char *err, size_t errsz);
void exec_k8s_poll(exec_handle *h, double now, exec_status *st, exec_update *up);
/* Stops every follower (joins their threads). */
void k8s_handle_stop_followers(k8s_handle *kh);

#endif
