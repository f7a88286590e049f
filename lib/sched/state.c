/* state.c: the scheduler's incremental state: pending jobs grouped into
 * classes (priority band, team, shape) each kept in order, running jobs with
 * their GPUs held in the capacity index and ordered by estimated end, and
 * per-team usage. Also the checks that reject impossible jobs, and
 * sched_decide(), the pure entry point built on a throw-away state. */
#include "sched_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- job facts ---- */

uint64_t st_eligible_types(const sched_cluster *c, const sched_job *j)
{
    uint64_t all = c->n_types >= 64 ? ~0ull : (1ull << c->n_types) - 1;
    uint64_t m = j->types ? (j->types & all) : all;
    if (j->gpu_memory > 0)
        for (int t = 0; t < c->n_types; t++)
            if (c->types[t].memory < j->gpu_memory) m &= ~(1ull << t);
    return m;
}

/* True when the job, under this policy, may share a GPU with others. */
static bool may_share(const sched_config *cfg, const sched_job *j)
{
    if (cfg->policy != SCHED_LATHE || j->exclusive || j->replicas != 1 || j->gpus_per_replica != 1)
        return false;
    return (j->share > 0 && j->share < SCHED_SHARE_WHOLE) || (j->share == 0 && j->gpu_memory > 0);
}

int st_units_on(const sched_state *st, const sched_job *j, int type)
{
    if (!may_share(&st->cfg, j)) return SCHED_SHARE_WHOLE;
    int u = j->share > 0 ? j->share : 0;
    if (j->gpu_memory > 0) {
        int m = (int)ceil(SCHED_SHARE_WHOLE * j->gpu_memory / st->c->types[type].memory);
        if (m > u) u = m;
    }
    return u < 1 ? 1 : u > SCHED_SHARE_WHOLE ? SCHED_SHARE_WHOLE : u;
}

/* learn-limit: the ratio a job's limit is multiplied by, or 1 (no rule, no
 * history, or the job gives an estimate). */
static double limit_ratio(const sched_state *st, const sched_job *j)
{
    if (st->cfg.policy != SCHED_LATHE || !(st->cfg.rules & SCHED_RULE_LEARN_LIMIT) ||
        j->est_duration > 0 || !(j->max_duration > 0))
        return 1;
    const learn_ring *r = j->team >= 0 && j->team < st->c->n_teams ? &st->tlearn[j->team] : NULL;
    if (!r || r->n < SCHED_LEARN_MIN) r = &st->learn;
    if (r->n == 0 || !(r->ratio > 0)) return 1;
    return r->ratio < 1 ? r->ratio : 1;
}

double st_estimate(const sched_state *st, const sched_job *j)
{
    double e = j->est_duration > 0 ? j->est_duration
             : j->max_duration > 0 ? j->max_duration * limit_ratio(st, j)
                                   : st->cfg.default_estimate;
    if (j->max_duration > 0 && e > j->max_duration) e = j->max_duration;
    e -= j->done;
    return e < 1 ? 1 : e;
}

/* GPUs a job holds, as a fraction for sharing jobs (for slack and fair share). */
static double job_gpus(const sched_job *j)
{
    double n = (double)j->replicas * j->gpus_per_replica;
    if (n == 1 && j->share > 0 && j->share < SCHED_SHARE_WHOLE) n = j->share / 100.0;
    return n;
}

/* How long a job has waited, as lathe counts it (what the starvation guard
 * looks at): submit time for the baselines; for lathe, submit time plus a
 * slack that grows with its estimated remaining work w (GPU-seconds):
 * aging x log2(1 + w / one GPU-hour). Each doubling of the work costs the
 * same wait (`aging`, 1 h), so jobs go by their work whatever the length of
 * the backlog (shortest estimated work first), and a job waits behind a job
 * submitted after it only while their difference in doublings is worth
 * more than the time between them (aging bounds the wait). With aging 0,
 * the older slack that saturates below max_slack M: slack = M x / (x + M),
 * x = slack_factor * w, FIFO between jobs larger than a few GPU-hours once
 * the backlog is longer than M. */
static double age_key(const sched_state *st, const sched_job *j, double est)
{
    if (st->cfg.policy != SCHED_LATHE) return j->submit_time;
    if (st->cfg.aging > 0) /* shortest estimated work first, with aging */
        return j->submit_time + st->cfg.aging * log2(1 + est * job_gpus(j) / SCHED_WORK_UNIT);
    double x = st->cfg.slack_factor * est * job_gpus(j), m = st->cfg.max_slack;
    return j->submit_time + (m > 0 ? m * x / (x + m) : 0);
}

/* The order of a job inside its class: its age key, less (lathe) the part
 * of its estimate beyond long_after, at most long_max, for a job of at most
 * long_gpus GPUs. A job that runs for days sets the end of the busy period
 * if it waits behind the queue, while the jobs it passes lose little: it
 * holds few GPUs. (Wide multi-day gangs hold so much of the cluster that
 * letting them pass would delay everyone; they keep their place.) */
static double order_key(const sched_state *st, const sched_job *j, double est)
{
    double key = age_key(st, j, est);
    if (st->cfg.policy != SCHED_LATHE || st->cfg.long_max <= 0 || est <= st->cfg.long_after) return key;
    if (j->replicas * j->gpus_per_replica > st->cfg.long_gpus) return key;
    double advance = est - st->cfg.long_after;
    return key - (advance < st->cfg.long_max ? advance : st->cfg.long_max);
}

/* ---- rejecting what can never run ---- */

static void reason_init(sched_reason *r, sched_why code)
{
    memset(r, 0, sizeof *r);
    r->code = code;
    r->team = r->type = r->node = -1;
}

/* The most GPUs a limited team may ever hold at one quota level. */
static int level_max(const sched_team *t, int level, int capacity)
{
    if (t->quota[level] == SCHED_UNLIMITED) return capacity;
    if (t->borrow_limit[level] == SCHED_UNLIMITED) return capacity;
    int m = t->quota[level] + t->borrow_limit[level];
    return m < capacity ? m : capacity;
}

/* Checks one GPU type for a job; fills why on failure. */
static bool check_type(const sched_cluster *c, const sched_job *j, int t, sched_reason *why)
{
    int g = j->gpus_per_replica, n = g * j->replicas;
    if (g > c->type_max_node[t]) {
        reason_init(why, SCHED_WHY_NODE_TOO_SMALL);
        why->type = t;
        why->per = g;
        why->best = c->type_max_node[t];
        return false;
    }
    if (n > c->type_gpus[t]) {
        reason_init(why, SCHED_WHY_TOO_BIG);
        why->type = t;
        why->need = n;
        why->free = c->type_gpus[t];
        return false;
    }
    const sched_team *tm = &c->teams[j->team];
    if (!tm->limited) return true;
    int any = c->n_types;
    bool specific = tm->quota[t] != SCHED_UNLIMITED || tm->quota[any] == SCHED_UNLIMITED;
    int lim_t = specific ? (tm->quota[t] == SCHED_UNLIMITED ? (tm->borrow_limit[t] == SCHED_UNLIMITED
                                                                   ? c->type_gpus[t]
                                                                   : tm->borrow_limit[t])
                                                            : level_max(tm, t, c->type_gpus[t]))
                         : c->type_gpus[t];
    int lim_any = level_max(tm, any, c->n_gpus);
    int lim = lim_t < lim_any ? lim_t : lim_any;
    if (n > lim) {
        reason_init(why, SCHED_WHY_OVER_QUOTA);
        why->team = j->team;
        why->type = lim_t <= lim_any ? t : -1;
        why->need = n;
        why->limit = lim;
        why->used = lim_t <= lim_any ? (tm->quota[t] == SCHED_UNLIMITED ? 0 : tm->quota[t])
                                     : tm->quota[any];
        return false;
    }
    return true;
}

bool sched_check_job(const sched_cluster *c, const sched_job *j, sched_reason *why)
{
    sched_reason dummy;
    if (!why) why = &dummy;
    if (j->team < 0 || j->team >= c->n_teams || j->replicas < 1 || j->gpus_per_replica < 1 ||
        j->share < 0 || j->share > SCHED_SHARE_WHOLE || !(j->est_duration >= 0) ||
        !(j->max_duration >= 0) || !isfinite(j->submit_time)) {
        reason_init(why, SCHED_WHY_BAD_JOB);
        why->team = j->team >= 0 && j->team < c->n_teams ? j->team : -1;
        return false;
    }
    uint64_t m = st_eligible_types(c, j);
    if (!m) {
        reason_init(why, SCHED_WHY_NO_TYPE);
        why->amount = j->gpu_memory;
        return false;
    }
    bool first = true;
    for (int t = 0; t < c->n_types; t++) {
        if (!(m >> t & 1) || c->type_gpus[t] == 0) continue;
        sched_reason r;
        if (check_type(c, j, t, &r)) return true;
        if (first) *why = r;
        first = false;
    }
    if (first) { /* allowed types exist but have no nodes */
        reason_init(why, SCHED_WHY_TOO_BIG);
        why->need = j->replicas * j->gpus_per_replica;
        why->free = 0;
    }
    return false;
}

/* ---- team usage ---- */

void st_team_add(sched_state *st, int team, int type, int units, int sign)
{
    int T1 = st->c->n_types + 1;
    st->tused[team * T1 + type] += sign * units;
    st->tused[team * T1 + T1 - 1] += sign * units;
}

/* ---- classes ---- */

static int cmp_qent(const qent *a, const qent *b)
{
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int cmp_qent_v(const void *a, const void *b)
{
    return cmp_qent(a, b);
}

bool st_qent_live(const sched_state *st, const qent *e)
{
    const pjob *p = &st->pj[e->slot];
    return p->alive && p->gen == e->gen;
}

typedef bool (*live_fn)(const sched_state *st, const qent *e);

/* Sorts an ordered list's unsorted tail, merges it into the sorted part and
 * drops stale entries: O(n + tail log tail). */
static void list_merge(const sched_state *st, qent **qp, int *n, int *capacity, int tail, live_fn live)
{
    qent *q = *qp;
    int head = *n - tail;
    if (tail > 1) qsort(q + head, (size_t)tail, sizeof *q, cmp_qent_v);
    qent *m = xmalloc((size_t)(*n + 1) * sizeof *m);
    int i = 0, j = head, o = 0;
    while (i < head || j < *n) {
        const qent *e = (j >= *n || (i < head && cmp_qent(&q[i], &q[j]) <= 0)) ? &q[i++] : &q[j++];
        if (live(st, e)) m[o++] = *e;
    }
    free(q);
    *qp = m;
    *n = o;
    *capacity = o + 1;
}

/* Puts a class in order before a pass (new entries, stale ones). */
void st_class_sort(sched_state *st, pclass *pc)
{
    if (pc->tail == 0 && pc->dead * 2 <= pc->n + 32) return;
    list_merge(st, &pc->q, &pc->n, &pc->cap, pc->tail, st_qent_live);
    pc->tail = pc->dead = 0;
}

static void class_append(pclass *pc, qent e)
{
    if (pc->n == pc->cap) {
        pc->cap = pc->cap ? pc->cap * 2 : 8;
        pc->q = xrealloc(pc->q, (size_t)pc->cap * sizeof *pc->q);
    }
    if (pc->tail > 0 || (pc->n > 0 && cmp_qent(&pc->q[pc->n - 1], &e) > 0)) pc->tail++;
    pc->q[pc->n++] = e;
    pc->live++;
}

static int band_of(sched_state *st, int64_t prio)
{
    int lo = 0, hi = st->nbands; /* bands by priority, highest first */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (st->bands[mid].prio > prio)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < st->nbands && st->bands[lo].prio == prio) return lo;
    if (st->nbands == st->capbands) {
        st->capbands = st->capbands ? st->capbands * 2 : 4;
        st->bands = xrealloc(st->bands, (size_t)st->capbands * sizeof *st->bands);
    }
    memmove(&st->bands[lo + 1], &st->bands[lo], (size_t)(st->nbands - lo) * sizeof *st->bands);
    band *b = &st->bands[lo];
    b->prio = prio;
    b->cls = NULL;
    b->ncls = b->capcls = 0;
    st->nbands++;
    for (int i = 0; i < st->ncls; i++)
        if (st->cls[i].band >= lo) st->cls[i].band++;
    return lo;
}

static uint64_t shape_hash(int64_t prio, const sched_job *j, uint64_t types)
{
    uint64_t h = 1469598103934665603ull, mem;
    memcpy(&mem, &j->gpu_memory, sizeof mem);
    uint64_t parts[8] = {(uint64_t)prio, (uint64_t)j->team, types, (uint64_t)j->gpus_per_replica,
                         (uint64_t)j->replicas, (uint64_t)j->share, mem, (uint64_t)j->exclusive};
    for (int i = 0; i < 8; i++) {
        h ^= parts[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static bool same_shape(const sched_state *st, const pclass *pc, const sched_job *j, uint64_t types)
{
    return st->bands[pc->band].prio == j->priority && pc->team == j->team && pc->types == types &&
           pc->g == j->gpus_per_replica && pc->r == j->replicas && pc->share == j->share &&
           pc->mem == j->gpu_memory && pc->excl == j->exclusive;
}

/* The class of a job, created when new. */
static int class_of(sched_state *st, const sched_job *j)
{
    uint64_t types = st_eligible_types(st->c, j);
    uint64_t h = shape_hash(j->priority, j, types);
    int first = idmap_get(&st->shapes, h);
    for (int ci = first; ci >= 0; ci = st->shape_next[ci])
        if (same_shape(st, &st->cls[ci], j, types)) return ci;
    int b = band_of(st, j->priority);
    if (st->ncls == st->capcls) {
        st->capcls = st->capcls ? st->capcls * 2 : 16;
        st->cls = xrealloc(st->cls, (size_t)st->capcls * sizeof *st->cls);
        st->shape_next = xrealloc(st->shape_next, (size_t)st->capcls * sizeof *st->shape_next);
    }
    int ci = st->ncls++;
    pclass *pc = &st->cls[ci];
    memset(pc, 0, sizeof *pc);
    pc->band = b;
    pc->team = j->team;
    pc->types = types;
    pc->g = j->gpus_per_replica;
    pc->r = j->replicas;
    pc->share = j->share;
    pc->mem = j->gpu_memory;
    pc->excl = j->exclusive;
    pc->may_share = may_share(&st->cfg, j);
    pc->units_whole = !pc->may_share;
    st->shape_next[ci] = first;
    idmap_put(&st->shapes, h, ci);
    band *bd = &st->bands[b];
    if (bd->ncls == bd->capcls) {
        bd->capcls = bd->capcls ? bd->capcls * 2 : 8;
        bd->cls = xrealloc(bd->cls, (size_t)bd->capcls * sizeof *bd->cls);
    }
    bd->cls[bd->ncls++] = ci;
    return ci;
}

/* ---- state ---- */

static int cmp_price(const void *a, const void *b, const sched_cluster *c)
{
    const sched_gpu_type *x = &c->types[*(const int *)a], *y = &c->types[*(const int *)b];
    if (x->price_per_hour != y->price_per_hour) return x->price_per_hour < y->price_per_hour ? -1 : 1;
    if (x->memory != y->memory) return x->memory < y->memory ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* Types in the order a policy tries them: lathe by price (then memory),
 * the baselines in cluster order. */
static void type_order(sched_state *st)
{
    int n = st->c->n_types;
    for (int i = 0; i < n; i++) st->torder[i] = i;
    if (st->cfg.policy != SCHED_LATHE) return;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && cmp_price(&st->torder[j], &st->torder[j - 1], st->c) < 0; j--) {
            int t = st->torder[j];
            st->torder[j] = st->torder[j - 1];
            st->torder[j - 1] = t;
        }
}

sched_state *sched_state_new(const sched_cluster *c, const sched_config *cfg)
{
    sched_state *st = xcalloc(1, sizeof *st);
    st->c = c;
    st->cfg = *cfg;
    cap_init(&st->k, c, cfg->gpu_share_limit);
    idmap_init(&st->ids);
    idmap_init(&st->shapes);
    int T1 = c->n_types + 1;
    st->tused = xcalloc((size_t)(c->n_teams * T1) + 1, sizeof(int));
    st->tjobs = xcalloc((size_t)c->n_teams + 1, sizeof(int));
    st->tlearn = xcalloc((size_t)c->n_teams + 1, sizeof *st->tlearn);
    type_order(st);
    return st;
}

void sched_state_free(sched_state *st)
{
    if (!st) return;
    cap_free(&st->k);
    idmap_free(&st->ids);
    idmap_free(&st->shapes);
    for (int i = 0; i < st->ncls; i++) free(st->cls[i].q);
    free(st->cls);
    free(st->shape_next);
    for (int i = 0; i < st->nbands; i++) free(st->bands[i].cls);
    free(st->bands);
    free(st->pj);
    free(st->pfree);
    for (int i = 0; i < st->nrj; i++) free(st->rj[i].gpus);
    free(st->rj);
    free(st->rfree);
    free(st->rorder);
    free(st->rejected);
    free(st->tused);
    free(st->tjobs);
    free(st->tlearn);
    free(st->scratch);
    free(st);
}

/* Slots: pending jobs are 2*slot in the id map, running jobs 2*slot+1. */
static int take_pslot(sched_state *st)
{
    if (st->npfree) return st->pfree[--st->npfree];
    if (st->npj == st->cappj) {
        st->cappj = st->cappj ? st->cappj * 2 : 64;
        st->pj = xrealloc(st->pj, (size_t)st->cappj * sizeof *st->pj);
        st->pfree = xrealloc(st->pfree, (size_t)st->cappj * sizeof *st->pfree);
    }
    st->pj[st->npj].gen = 0;
    return st->npj++;
}

static int take_rslot(sched_state *st)
{
    if (st->nrfree) return st->rfree[--st->nrfree];
    if (st->nrj == st->caprj) {
        st->caprj = st->caprj ? st->caprj * 2 : 64;
        st->rj = xrealloc(st->rj, (size_t)st->caprj * sizeof *st->rj);
        st->rfree = xrealloc(st->rfree, (size_t)st->caprj * sizeof *st->rfree);
    }
    st->rj[st->nrj].gen = 0;
    st->rj[st->nrj].gpus = NULL;
    return st->nrj++;
}

int sched_state_add_pending(sched_state *st, const sched_job *j)
{
    if (idmap_get(&st->ids, j->id) >= 0) return -1;
    int s = take_pslot(st);
    pjob *p = &st->pj[s];
    uint32_t gen = p->gen + 1;
    memset(p, 0, sizeof *p);
    p->j = *j;
    p->j.gpus = NULL;
    p->gen = gen;
    p->alive = true;
    p->cls = -1;
    idmap_put(&st->ids, j->id, 2 * s);
    st->n_pending++;
    if (!sched_check_job(st->c, j, &p->reject_why)) {
        p->rejected = true;
        if (st->nrejected == st->caprejected) {
            st->caprejected = st->caprejected ? st->caprejected * 2 : 8;
            st->rejected = xrealloc(st->rejected, (size_t)st->caprejected * sizeof *st->rejected);
        }
        st->rejected[st->nrejected++] = (qent){0, j->id, s, gen};
        return 0;
    }
    p->est = st_estimate(st, j);
    p->key = order_key(st, j, p->est);
    p->age = age_key(st, j, p->est);
    p->cls = class_of(st, j);
    class_append(&st->cls[p->cls], (qent){p->key, j->id, s, gen});
    return 0;
}

bool sched_state_remove_pending(sched_state *st, uint64_t id)
{
    int v = idmap_get(&st->ids, id);
    if (v < 0 || (v & 1)) return false;
    int s = v / 2;
    pjob *p = &st->pj[s];
    if (p->cls >= 0) {
        pclass *pc = &st->cls[p->cls];
        pc->live--;
        pc->dead++;
    }
    p->alive = false;
    p->gen++;
    idmap_del(&st->ids, id);
    st->pfree[st->npfree++] = s;
    st->n_pending--;
    return true;
}

/* ---- running jobs ---- */


bool st_rent_live(const sched_state *st, const qent *e)
{
    const rjob *r = &st->rj[e->slot];
    return r->alive && r->gen == e->gen;
}

void st_rorder_sort(sched_state *st)
{
    if (st->rtail == 0 && st->rdead * 2 <= st->nrorder + 32) return;
    list_merge(st, &st->rorder, &st->nrorder, &st->caprorder, st->rtail, st_rent_live);
    st->rtail = st->rdead = 0;
}

/* Takes a running job's GPUs in the index; undoes and returns false when
 * they cannot hold it. */
static bool hold_gpus(sched_state *st, const int *gpus, int n, int units, bool excl)
{
    for (int i = 0; i < n; i++)
        if (!cap_take(&st->k, gpus[i], units, excl)) {
            while (i-- > 0) cap_give(&st->k, gpus[i], units, excl);
            return false;
        }
    return true;
}

int sched_state_add_running(sched_state *st, const sched_job *j, char *err, size_t errsz)
{
    const sched_cluster *c = st->c;
    int n = j->replicas * j->gpus_per_replica;
    if (idmap_get(&st->ids, j->id) >= 0) {
        snprintf(err, errsz, "job %llu is given twice", (unsigned long long)j->id);
        return -1;
    }
    if (j->team < 0 || j->team >= c->n_teams || n < 1 || !j->gpus) {
        snprintf(err, errsz, "running job %llu has no team, no GPUs or no placement",
                 (unsigned long long)j->id);
        return -1;
    }
    int type = -1;
    for (int i = 0; i < n; i++) {
        if (j->gpus[i] < 0 || j->gpus[i] >= c->n_gpus) {
            snprintf(err, errsz, "running job %llu is on GPU %d, which does not exist",
                     (unsigned long long)j->id, j->gpus[i]);
            return -1;
        }
        int t = c->nodes[c->gpu_node[j->gpus[i]]].type;
        if (type >= 0 && t != type) {
            snprintf(err, errsz, "running job %llu spans two GPU types", (unsigned long long)j->id);
            return -1;
        }
        type = t;
    }
    int units = st_units_on(st, j, type);
    bool excl = units >= SCHED_SHARE_WHOLE;
    if (!hold_gpus(st, j->gpus, n, units, excl)) {
        snprintf(err, errsz, "running job %llu is on a GPU that is already full",
                 (unsigned long long)j->id);
        return -1;
    }
    for (int i = 0; i < n; i++) cap_set_end(&st->k, j->gpus[i], j->start_time + st_estimate(st, j));
    int s = take_rslot(st);
    rjob *r = &st->rj[s];
    uint32_t gen = r->gen + 1;
    int *gpus = xrealloc(r->gpus, (size_t)n * sizeof *gpus);
    memcpy(gpus, j->gpus, (size_t)n * sizeof *gpus);
    memset(r, 0, sizeof *r);
    r->j = *j;
    r->gpus = gpus;
    r->j.gpus = gpus;
    r->n_gpus = n;
    r->type = type;
    r->units = units;
    r->excl = excl;
    r->alive = true;
    r->gen = gen;
    r->end = j->start_time + st_estimate(st, j);
    r->key = order_key(st, j, st_estimate(st, j));
    r->guarded = st->cfg.policy == SCHED_LATHE &&
                 j->start_time - age_key(st, j, st_estimate(st, j)) >= st->cfg.starve_after;
    idmap_put(&st->ids, j->id, 2 * s + 1);
    st_team_add(st, j->team, type, units * n, +1);
    st->tjobs[j->team]++;
    st->n_running++;
    if (st->nrorder == st->caprorder) {
        st->caprorder = st->caprorder ? st->caprorder * 2 : 64;
        st->rorder = xrealloc(st->rorder, (size_t)st->caprorder * sizeof *st->rorder);
    }
    qent e = {r->end, j->id, s, gen};
    if (st->rtail > 0 || (st->nrorder > 0 && cmp_qent(&st->rorder[st->nrorder - 1], &e) > 0)) st->rtail++;
    st->rorder[st->nrorder++] = e;
    return 0;
}

void sched_state_set_gpu_down(sched_state *st, int gpu, bool down)
{
    if (gpu >= 0 && gpu < st->k.ngpus) cap_set_down(&st->k, gpu, down);
}

bool sched_state_remove_running(sched_state *st, uint64_t id)
{
    int v = idmap_get(&st->ids, id);
    if (v < 0 || !(v & 1)) return false;
    int s = v / 2;
    rjob *r = &st->rj[s];
    for (int i = 0; i < r->n_gpus; i++) cap_give(&st->k, r->gpus[i], r->units, r->excl);
    st_team_add(st, r->j.team, r->type, r->units * r->n_gpus, -1);
    st->tjobs[r->j.team]--;
    r->alive = false;
    r->gen++;
    st->rdead++;
    idmap_del(&st->ids, id);
    st->rfree[st->nrfree++] = s;
    st->n_running--;
    return true;
}

/* learn-limit: the largest actual / limit of the last SCHED_LEARN_WINDOW
 * jobs: the tightest factor that covered every one of them, so a job is
 * predicted to end early only when its limit overstates its run more than
 * every recent job's did (a backfilled job seldom runs past its predicted
 * end and delays the head). */
static void learn_push(learn_ring *r, double v)
{
    r->r[r->head] = v;
    r->head = (r->head + 1) % SCHED_LEARN_WINDOW;
    if (r->n < SCHED_LEARN_WINDOW) r->n++;
    double m = 0;
    for (int i = 0; i < r->n; i++)
        if (r->r[i] > m) m = r->r[i];
    r->ratio = m;
}

void sched_state_add_finished(sched_state *st, const sched_finished *f)
{
    if (!(f->limit > 0) || !(f->ran >= 0) || !isfinite(f->ran) || !isfinite(f->limit)) return;
    double v = f->ran / f->limit;
    if (v > 1) v = 1; /* it ran past its limit: the limit was right */
    learn_push(&st->learn, v);
    if (f->team >= 0 && f->team < st->c->n_teams) learn_push(&st->tlearn[f->team], v);
}

size_t sched_state_n_pending(const sched_state *st)
{
    return st->n_pending;
}

size_t sched_state_n_running(const sched_state *st)
{
    return st->n_running;
}

const sched_job *sched_state_job(const sched_state *st, uint64_t id)
{
    int v = idmap_get(&st->ids, id);
    if (v < 0) return NULL;
    return (v & 1) ? &st->rj[v / 2].j : &st->pj[v / 2].j;
}

void sched_state_set_reasons(sched_state *st, bool on)
{
    st->cfg.reasons = on;
}

void sched_state_pass(sched_state *st, double now, const double *usage, const double *spent,
                      sched_result *out)
{
    pass_run(st, now, usage, spent, out);
}

/* ---- the pure function ---- */

int sched_decide(const sched_cluster *c, const sched_config *cfg, const sched_input *in,
                 sched_result *out, char *err, size_t errsz)
{
    out->n = out->n_gpus = 0;
    sched_state *st = sched_state_new(c, cfg);
    for (size_t i = 0; i < in->n_finished; i++) sched_state_add_finished(st, &in->finished[i]);
    for (size_t i = 0; i < in->n_running; i++)
        if (sched_state_add_running(st, &in->running[i], err, errsz) < 0) {
            sched_state_free(st);
            return -1;
        }
    for (size_t i = 0; i < in->n_pending; i++)
        if (sched_state_add_pending(st, &in->pending[i]) < 0) {
            snprintf(err, errsz, "job %llu is given twice", (unsigned long long)in->pending[i].id);
            sched_state_free(st);
            return -1;
        }
    sched_state_pass(st, in->now, in->usage, in->spent, out);
    sched_state_free(st);
    return 0;
}
