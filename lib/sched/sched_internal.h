/* sched_internal.h: what the scheduler's files share and nobody else sees:
 *
 *   bset      a two-level bitset with "next set bit" in a few word reads
 *   idmap     an open-addressing map from job id to a slot
 *   cap       the capacity index: free GPUs per node, NVLink group, rack and
 *             GPU type, bucketed by free count, so that "does a job of this
 *             shape fit" and "where does it fit best" cost O(GPUs per node),
 *             not O(GPUs in the cluster)
 *   state     pending jobs grouped in classes (band, team, shape), running
 *             jobs ordered by estimated end, team usage
 *
 * See sched.h for the contract; pass.c for the policy itself.
 */
#ifndef LATHE_SCHED_INTERNAL_H
#define LATHE_SCHED_INTERNAL_H

#include "sched.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- bset: bits over 0..n-1 with a summary word per 64 words ---- */
typedef struct bset {
    uint64_t *w;
    uint64_t *sum;
    int n, nw, nsum;
} bset;

void bset_init(bset *b, int n);
void bset_free(bset *b);
void bset_set(bset *b, int i);
void bset_clear(bset *b, int i);
bool bset_test(const bset *b, int i);
/* The first set bit in [from, to), or -1. */
int bset_next(const bset *b, int from, int to);

/* ---- idmap: uint64 id -> int slot ---- */
typedef struct idmap {
    uint64_t *keys;
    int *vals; /* -1 = empty, -2 = deleted */
    size_t cap, len, used;
} idmap;

void idmap_init(idmap *m);
void idmap_free(idmap *m);
int idmap_get(const idmap *m, uint64_t id); /* -1 when absent */
void idmap_put(idmap *m, uint64_t id, int slot);
void idmap_del(idmap *m, uint64_t id);

/* ---- cap: the capacity index ---- */
/* Two views of free GPUs: view 0 counts every free GPU; view 1 leaves out
 * the GPUs reserved for the head job (EASY backfill). */
#define CAP_ALL 0
#define CAP_UNRESERVED 1

typedef struct cap_view {
    int *nfree;   /* [nodes] whole free GPUs */
    int *gfree;   /* [groups] */
    int *cnt;     /* [types * (K+1)] nodes by free count */
    int *rcnt;    /* [racks slots * (K+1)] */
    int *tfree;   /* [types] */
    int total;    /* whole free GPUs, all types */
    bset *neq;    /* [K+1] nodes (by position) with exactly k free */
    bset *nge;    /* [K+1] nodes with at least k free (k >= 1) */
} cap_view;

typedef struct cap {
    const sched_cluster *c;
    int K; /* most GPUs on one node */
    int ntypes, nnodes, ngroups, ngpus, nrs;
    /* positions: nodes ordered by (type, rack, index), so that each type and
     * each (type, rack) pair (a "rack slot") is a contiguous range */
    int *node_pos, *pos_node;
    int *tlo, *thi;           /* [types] node position range */
    int *rs_lo, *rs_hi, *rs_type, *rs_rack; /* [rack slots] */
    int *node_rs;             /* [nodes] */
    int *trs_lo, *trs_hi;     /* [types] rack slot range */
    int *gpu_pos, *pos_gpu;   /* GPUs in node position order */
    int *tglo, *tghi;         /* [types] GPU position range */
    /* per GPU */
    uint8_t *jobs;  /* jobs on it */
    uint8_t *used;  /* share units used (100 when held whole) */
    uint8_t *flags; /* CAP_F_* */
    double *gend;   /* estimated end of the job holding it whole (0: none) */
    cap_view v[2];
    /* open shared GPUs (some jobs, not exclusive, below the job limit) */
    int *scnt;  /* [types * 101] by free units */
    bset *seq;  /* [101] over GPU positions */
    int nopen;  /* open shared GPUs */
    int share_limit;
} cap;

#define CAP_F_EXCL 1u /* held by a job that does not share */
#define CAP_F_RESV 2u /* reserved for the head job */
#define CAP_F_DOWN 4u /* on a node that is not ready */

void cap_init(cap *k, const sched_cluster *c, int share_limit);
void cap_free(cap *k);
/* Takes / gives back one GPU for a job: units = share units (100 and excl for
 * a whole GPU). Returns false (changing nothing) when the GPU cannot hold it. */
bool cap_take(cap *k, int gpu, int units, bool excl);
void cap_give(cap *k, int gpu, int units, bool excl);
void cap_set_reserved(cap *k, int gpu, bool on);
/* Marks a GPU down (no new placement) or up again. */
void cap_set_down(cap *k, int gpu, bool on);
bool cap_gpu_free(const cap *k, int view, int gpu);

/* Exact fit checks. */
bool cap_fits_whole(const cap *k, int view, int type, int g, int r);
bool cap_fits_share(const cap *k, int view, int type, int units);
/* GPUs of `type` free in a view, replica slots of g GPUs, largest free block. */
int cap_slots(const cap *k, int view, int type, int g);
int cap_largest(const cap *k, int view, int type, int *node);

/* Placement: takes the GPUs and writes them to out (r * g of them, replica
 * by replica). best: lathe's topology-aware best fit; else first fit.
 * Returns false (taking nothing) when it does not fit. */
bool cap_place_whole(cap *k, int view, int type, int g, int r, bool best, int *out);
/* lathe's end-pack placement of a job whose r * g GPUs fit on one node and
 * that ends at `end`: the node whose running jobs keep it busy longest past
 * that end (least extension of its busy time), so that jobs ending together
 * share nodes and nodes empty whole for gangs; among equals, an NVLink
 * group that holds the job, then best fit; an empty node last. Returns
 * false (taking nothing) when it does not fit on one node. */
bool cap_place_end(cap *k, int view, int type, int g, int r, double now, double end, int *out);
/* Records the estimated end of the job holding a GPU whole (kept for
 * cap_place_end; a GPU given back forgets it; shared GPUs keep none). */
void cap_set_end(cap *k, int gpu, double end);
/* One GPU for a sharing job of `units`; best fit among shared GPUs, else a
 * free whole GPU. */
bool cap_place_share(cap *k, int view, int type, int units, int *out);

/* ---- the state ---- */
/* An entry of an ordered list: pending jobs in a class (key = order key),
 * running jobs by estimated end (key = end). Entries go stale when the job
 * leaves (its slot's generation moves on) and are dropped lazily. */
typedef struct qent {
    double key;
    uint64_t id;
    int slot;
    uint32_t gen;
} qent;

typedef struct pjob {
    sched_job j;
    int cls;         /* its class; -1 when rejected */
    uint32_t gen;
    bool alive;
    bool rejected;
    sched_reason reject_why;
    double key;      /* order inside its class */
    double age;      /* its age key: when it is due (starve_after) */
    double est;      /* remaining estimated run time */
    uint32_t start_gen; /* started in pass number start_gen */
    bool tail_passed;   /* as the head, a job started ahead of it (reserve-tail) */
} pjob;

/* Jobs of one band (priority value), team and shape, in order. */
typedef struct pclass {
    int band, team;
    uint64_t types; /* allowed types with enough memory */
    int g, r;       /* GPUs per replica, replicas */
    int share;      /* requested share units (0 = whole) */
    double mem;     /* gpu_memory */
    bool excl;
    bool may_share;   /* sharing job under this policy */
    bool units_whole; /* = !may_share: takes whole GPUs */
    qent *q;
    int n, cap, dead;
    int tail; /* entries [n - tail, n) are not sorted yet */
    int live;
    /* per pass */
    uint32_t pgen;
    int cur;      /* next entry to look at */
    int skipped;  /* jobs skipped as too long to backfill */
    int started;
    bool examined;
    uint32_t late_gen; /* pass number its late reason was worked out in */
    sched_reason why;
} pclass;

typedef struct rjob {
    sched_job j; /* j.gpus points at gpus */
    int *gpus;
    int n_gpus;
    int type;
    int units; /* share units per GPU (100 when whole) */
    bool excl;
    bool alive;
    uint32_t gen;
    double end;       /* estimated end */
    uint32_t pre_gen; /* preempted in pass number pre_gen */
    bool guarded;     /* lathe: started after waiting past starve_after; not reclaimed */
    double key;       /* its order key when it started */
} rjob;

/* learn-limit: actual / limit of the last SCHED_LEARN_WINDOW finished jobs
 * that gave only a limit, and the largest of them. */
typedef struct learn_ring {
    double r[SCHED_LEARN_WINDOW];
    int n, head;
    double ratio;
} learn_ring;

typedef struct band {
    int64_t prio;
    int *cls; /* its classes */
    int ncls, capcls;
} band;

struct sched_state {
    const sched_cluster *c;
    sched_config cfg;
    cap k;
    int torder[SCHED_MAX_TYPES]; /* GPU types in the order the policy tries them */
    idmap ids; /* id -> 2*slot (pending) or 2*slot+1 (running) */
    pjob *pj;
    int npj, cappj;
    int *pfree;
    int npfree;
    size_t n_pending;
    qent *rejected; /* pending jobs that can never run */
    int nrejected, caprejected;
    pclass *cls;
    int ncls, capcls;
    idmap shapes;    /* shape hash -> first class; more chained in shape_next */
    int *shape_next;
    band *bands;     /* by priority, highest first */
    int nbands, capbands;
    rjob *rj;
    int nrj, caprj;
    int *rfree;
    int nrfree;
    size_t n_running;
    qent *rorder;    /* running jobs by estimated end (with stale entries) */
    int nrorder, caprorder, rdead, rtail;
    int *tused;      /* [teams * (types+1)] share units held; index types = all types */
    int *tjobs;      /* [teams] running jobs */
    uint32_t pass_gen;
    int *scratch;
    learn_ring learn;   /* all teams */
    learn_ring *tlearn; /* [teams] */
};

/* state.c */
int st_units_on(const sched_state *st, const sched_job *j, int type);
double st_estimate(const sched_state *st, const sched_job *j);
uint64_t st_eligible_types(const sched_cluster *c, const sched_job *j);
void st_team_add(sched_state *st, int team, int type, int units, int sign);
void st_class_sort(sched_state *st, pclass *pc);
void st_rorder_sort(sched_state *st);
bool st_qent_live(const sched_state *st, const qent *e);
bool st_rent_live(const sched_state *st, const qent *e);

/* pass.c */
void pass_run(sched_state *st, double now, const double *usage, const double *spent,
              sched_result *out);

/* result helpers (reason.c) */
sched_decision *res_add(sched_result *r, sched_action a, uint64_t job, const char *name);
size_t res_add_gpus(sched_result *r, const int *gpus, int n);

#endif
