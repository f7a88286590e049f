/* op.h: operator mode (docs/kubernetes.md, "Operator mode"): lathe serves
 * the LoRATrainingJob and LoRAExperiment objects of the namespaces it is
 * given (both groups, training.example.com/v1 and lathe.dev/v1) and the
 * users' own suspended batch/v1 Jobs labelled lathe.dev/queue, on top of the
 * Kubernetes executor.
 *
 *   op.c          the operator's thread: informers on those objects, the
 *                 Lease (only its holder acts), becoming the leader
 *                 (the store rebuilt from the API, then the controller),
 *                 losing it (the process ends: Kubernetes starts it again
 *                 as a standby)
 *   op_objects.c  pure functions: an object as the spec loader reads it, a
 *                 user's Job as a lathe job (its spec and plan), a job's
 *                 state as the object's status
 *   op_sync.c     objects -> store: submit (or the Invalid condition),
 *                 cancel when the object goes, restore what the API says
 *                 when the cache is rebuilt; store -> the objects' status
 *
 * The truth is in the API: each object's status (phase, attempts,
 * checkpoint, usage) and its attempts' Jobs (labelled with the object's
 * uid and the attempt, annotated with their placement). The store in the
 * data folder is a cache: a new leader wipes it and rebuilds it from the
 * API before its controller starts, so two replicas behind one Lease lose
 * nothing when one dies.
 *
 * A team is its namespace (spec_k8s_namespace is the identity in operator
 * mode); its quota is the namespace's ResourceQuota on GPUs unless the
 * Cluster file gives the team one (srv_cluster.c reads them at start);
 * PriorityClass objects are lathe's priority classes.
 *
 * The store's kv table holds, for each job, "k8s-owner/<id>": its object
 * ({"apiVersion", "kind", "namespace", "name", "uid", "adopt"}), written in
 * the job's own transaction, so the controller reads it with the job.
 */
#ifndef LATHE_OP_H
#define LATHE_OP_H

#include "srv_internal.h"

typedef struct op op;

/* The informers (on the Kubernetes executor's client) and the thread that
 * takes the Lease. NULL with a message when they cannot start. */
op *op_start(srv *s, char *err, size_t errsz);
/* Stops the thread and informers; gives the Lease up when held. NULL is fine. */
void op_stop(op *o);

/* Whether this replica leads (its controller runs); why not when it does
 * not ("standby: the Lease lathe-system/lathe-server is held by pod-b"). */
bool op_active(op *o, char *why, size_t whysz);

/* The kv key of a job's object (out: 40 bytes). */
void op_owner_key(int64_t id, char out[40]);

/* A job's object as its kv record holds it (strings owned by the caller's
 * op_owner, freed with op_owner_free). */
typedef struct op_owner {
    char *api_version, *kind, *ns, *name, *uid;
    bool adopt; /* a user's own Job: lathe admits it and never makes one */
} op_owner;
/* Reads job id's record from st: false when it has none. */
bool op_owner_read(store *st, int64_t id, op_owner *out);
void op_owner_free(op_owner *w);

/* ---- op_cluster.c ---- */
/* Adds to c (before the scheduler's cluster is made of it) a team for each
 * served namespace the Cluster file lacks, its quota from the namespace's
 * ResourceQuotas on GPUs, and the PriorityClass objects it lacks; *print
 * (caller frees) receives a fingerprint of what the API said. False with a
 * message when the API cannot be read. */
bool op_cluster_add(const spec_server *cfg, exec_backend *be, spec_cluster *c, char **print,
                    char *err, size_t errsz);
/* The same fingerprint, read again now (NULL with a message on failure). */
char *op_cluster_print(const spec_server *cfg, exec_backend *be, char *err, size_t errsz);

/* ---- op_objects.c ---- */
/* A string member of a JSON object, or NULL. */
const char *op_jstr(const json_t *o, const char *key);
/* A Kubernetes quantity of whole things (2, "2") in [0, max]; -1 when it
 * is not one. */
int op_quantity(const json_t *v, int max);

typedef enum { OP_LORAJOB, OP_LORAEXP, OP_USERJOB } op_kind;

/* The object as the spec loader reads it: apiVersion, kind, metadata
 * (name, namespace, labels) and spec, as YAML. Caller frees. */
char *op_object_yaml(const json_t *obj);

/* A user's Job (suspended, labelled lathe.dev/queue) as a lathe job: a
 * LoRATrainingJob YAML (trainer.command = the first container's command and
 * args, resources from its GPU limits and the Job's parallelism, the GPU
 * type from the product label in its nodeSelector, timeout from
 * activeDeadlineSeconds, priorityClassName from the pod template) and the
 * plan the scheduler reads (no planner: the user chose the resources).
 * NULL with why when the Job cannot be queued (no container, parallelism
 * and completions that differ, a GPU type the cluster lacks). */
char *op_userjob_yaml(const json_t *job, const srv_cluster *c, const spec_k8s *k,
                      char **plan_json, char *why, size_t whysz);

/* Diagnostics as the Invalid condition's message: each as `lathe validate`
 * words it, without the file's positions (they are of lathe's rendering,
 * not the user's file). Caller frees. */
char *op_diags_message(const diag_list *d);

/* A store state's phase: "Queued", "Starting", "Running", "Stopping",
 * "Succeeded", "Failed", "Cancelled", "TimedOut". */
const char *op_phase_name(store_state s);
/* The inverse (false for "Pending", "Invalid" and unknown names). */
bool op_phase_parse(const char *phase, store_state *out);

/* The status of a job's object from its stored state (j), the object's
 * generation and, for a failed start or a refused object, a message. The
 * caller decrefs. */
json_t *op_job_status(const store_job *j, int64_t generation);
/* An experiment's status from its jobs. */
json_t *op_experiment_status(const store_job *jobs, size_t n, int64_t generation);
/* The status of an object lathe refused: phase Invalid, the condition with
 * message. */
json_t *op_invalid_status(const char *reason, const char *message, int64_t generation,
                          double at);

#endif
