/* op_internal.h: what op.c and op_sync.c share (op.h says what the
 * operator does). Everything here is the operator thread's, except the
 * queue of keys the informers' threads append to (under op.mu). */
#ifndef LATHE_OP_INTERNAL_H
#define LATHE_OP_INTERNAL_H

#include "op.h"

#include "k8s/k8s.h"

/* One watched collection: a kind of one group in one namespace. */
typedef struct op_watch {
    struct op *o;
    op_kind kind;
    const char *api, *resource, *kind_name; /* "lathe.dev/v1", "loratrainingjobs", "LoRATrainingJob" */
    char *ns;
    k8s_informer *inf;
    bool synced;
} op_watch;

/* One object lathe serves, as the operator knows it. */
typedef struct op_obj {
    op_watch *w;
    char *key;              /* "W|ns/name", W the watch's index */
    char *ns, *name, *uid;
    int64_t generation;     /* the generation acted on */
    int64_t *ids;           /* its jobs in the store (none: refused, or not yet) */
    size_t n_ids;
    char *invalid;          /* why lathe refused it (the Invalid condition); NULL = not */
    char *invalid_reason;   /* "Invalid", "NameTaken", ... */
    double invalid_at;
    char *last_status;      /* the status text last written */
    double status_at;       /* when */
    bool gone;              /* deleted: its jobs are cancelled, then dropped once ended */
    bool dirty;             /* its jobs changed since its status was last written */
} op_obj;

struct op {
    srv *s;
    k8s_client *cl;
    const spec_k8s *k;
    op_watch *watches;
    size_t n_watches;
    k8s_lease *lease;
    char *lease_ns, *identity;

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;     /* quit, pending, holder, seen, cfg_changed, cfg_seen */
    pthread_cond_t cv;
    bool quit;
    char **pending;         /* keys whose object changed, to reconcile */
    size_t n_pending, cap_pending;
    char holder[128];       /* the Lease's holder as last read (standby's readyz) */
    k8s_informer **cfg_inf; /* ResourceQuotas of each namespace, PriorityClasses */
    size_t n_cfg_inf;
    bool cfg_changed;       /* one of them changed: compare the fingerprint */
    json_t *cfg_seen;       /* "ns/name" -> what each says (its text without metadata, status) */
    atomic_bool leading;

    /* the operator thread's own */
    json_t *seen;           /* key -> true: every object the informers hold (under mu:
                               their callbacks keep it) */
    json_t *objs;           /* key -> (op_obj *) as an integer */
    store *st;              /* its store handle (once leading) */
    json_t *owned;          /* rebuild only: "uid/job" -> the newest Job of that job */
    json_t *by_job;         /* store id (text) -> (op_obj *): whose job it is */
    double next_status;     /* the next status pass (steady clock) */
    double next_full;       /* the next pass that looks at every object */
    double status_mark;     /* the wall time the last pass asked the store from */
    double next_cfg_check;  /* not before (steady clock): changes come in bursts */
};

/* op_sync.c */
/* Reconciles one object (its key) with the store: submits a new one,
 * cancels the jobs of one that went. restoring: the store is being rebuilt
 * (op->owned holds the attempts' Jobs). */
void op_reconcile(struct op *o, const char *key, bool restoring);
/* Writes the status of every object whose jobs changed; drops the
 * records of deleted objects whose jobs ended. */
void op_status_pass(struct op *o, double now);
/* The Jobs lathe made for objects (labelled with an owner uid), by
 * "uid/job name": the newest attempt of each, into o->owned. */
bool op_list_owned(struct op *o, char *err, size_t errsz);
void op_obj_free(op_obj *r);
op_obj *op_obj_get(struct op *o, const char *key);

#endif
