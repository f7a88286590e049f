/* pass.c: one scheduling pass, the policy itself.
 *
 * Jobs are looked at band by band (priority, highest first). Inside a band
 * each team has a heap of its classes (jobs of one shape) keyed by the next
 * job's order key; the next job comes from the team with the lowest fair-
 * share key (lathe) or the lowest order key (the baselines). A job either
 *
 *   - starts (admission passes for some GPU type and a placement exists),
 *   - or closes its class for the rest of the pass (nothing of that shape can
 *     start: capacity only shrinks and usage only grows during a pass), or
 *     its team's queue (strict FIFO, budget, job limit),
 *   - or, with a reservation in place, is skipped because it would run past
 *     the reserved start on reserved GPUs (a shorter job of its class may
 *     still backfill).
 *
 * The first admitted job that does not fit becomes the head (easy, lathe):
 * running jobs are released in order of estimated end until it fits, that
 * time is its reserved start, and the GPUs it would get are reserved; later
 * jobs may use reserved GPUs only if they end before the reserved start.
 * lathe tries jobs that waited head_after oldest first until the head is
 * found, lets a job refused by the lending pool hold the reservation too,
 * and picks the reserved GPUs that would idle least (see sched.h, the
 * SCHED_RULE_* bits, and docs/scheduler.md).
 *
 * Every change a pass makes to the capacity index and team usage is
 * recorded and undone at the end, so the state is left as it was.
 */
#include "sched_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { R_STARTED, R_SKIP, R_CLASS_BLOCKED, R_TEAM_BLOCKED };
enum { OP_START, OP_PREEMPT, OP_RELEASE };

typedef struct op {
    int kind;
    int slot;   /* pending slot (start) or running slot (preempt) */
    int type, units, n;
    bool excl;
    size_t off; /* start: its GPUs in out->gpus */
    double end; /* start: estimated end */
} op;

typedef struct pass {
    sched_state *st;
    const sched_cluster *c;
    cap *k;
    const sched_config *cfg;
    sched_result *out;
    double now, tau;
    const double *usage, *spent;
    bool lathe, backfill;
    double *fair;         /* [teams] lathe: fair-share key */
    sched_reason *tblock; /* [teams] why a team's queue is closed (code NONE: open) */
    int *heap, *hlen, *hoff; /* per team heap of classes, for the current band */
    op *ops;
    int nops, capops;
    int *buf; /* one placement */
    /* the head job and its reservation */
    bool head_set;
    int head_slot;
    const pclass *head_pc;
    uint64_t head_types; /* the types its shadow schedule may use */
    bool head_pool;      /* it waits for the lending pool: its shadow checks admission */
    double drain;        /* backlog_drain(); < 0 until computed */
    double S;
    int *resv;
    int nresv;
    double *freed_at; /* [gpus] shadow schedule scratch */
    uint8_t *released; /* [gpus] freed in the shadow schedule (before S) */
    const pjob *shadow_pj; /* set while the shadow schedule also checks this job's admission */
    int attempts;
    bool stop;
    bool reclaim_possible; /* some limited team could reclaim from a borrower */
    int64_t min_running_prio;
} pass;

/* ---- recording ---- */

static void push_op(pass *p, op o)
{
    if (p->nops == p->capops) {
        p->capops = p->capops ? p->capops * 2 : 32;
        p->ops = xrealloc(p->ops, (size_t)p->capops * sizeof *p->ops);
    }
    p->ops[p->nops++] = o;
}

static void reason_init(sched_reason *r, sched_why code)
{
    memset(r, 0, sizeof *r);
    r->code = code;
    r->team = r->type = r->node = -1;
}

static const sched_job *job_at(const pass *p, int slot)
{
    return &p->st->pj[slot].j;
}

/* ---- admission: quota with borrowing, at one quota level ---- */

/* Idle quota that others may lend at level L, and what others borrow now
 * (share units). `me` is left out of both. */
static void pool_at(const pass *p, int L, int type, int me, int *lend, int *borrowed)
{
    const sched_cluster *c = p->c;
    int T1 = c->n_types + 1, any = c->n_types;
    long total = (long)(L == any ? c->n_gpus : c->type_gpus[type]) * SCHED_SHARE_WHOLE;
    long assigned = 0, idle = 0, borrow = 0;
    for (int o = 0; o < c->n_teams; o++) {
        const sched_team *to = &c->teams[o];
        int uo = p->st->tused[o * T1 + L];
        if (!to->limited) {
            if (o != me) borrow += uo;
            continue;
        }
        if (to->quota[L] == SCHED_UNLIMITED && (L == any || to->quota[any] != SCHED_UNLIMITED))
            continue; /* this team is held by its any-type quota only */
        long qo = (long)(to->quota[L] == SCHED_UNLIMITED ? 0 : to->quota[L]) * SCHED_SHARE_WHOLE;
        assigned += qo;
        if (o == me) continue;
        long ll = to->lend_limit[L] == SCHED_UNLIMITED ? qo : (long)to->lend_limit[L] * SCHED_SHARE_WHOLE;
        if (uo > qo) {
            borrow += uo - qo;
        } else {
            long i = qo - uo;
            idle += i < ll ? i : ll;
        }
    }
    long free_cap = total - assigned > 0 ? total - assigned : 0;
    *lend = (int)(free_cap + idle);
    *borrowed = (int)borrow;
}

static int gpus_up(int units)
{
    return (units + SCHED_SHARE_WHOLE - 1) / SCHED_SHARE_WHOLE;
}

static bool level_ok(const pass *p, int team, int L, int type, int need, bool due, sched_reason *why)
{
    const sched_team *tm = &p->c->teams[team];
    int T1 = p->c->n_types + 1, any = p->c->n_types;
    int q = tm->quota[L] == SCHED_UNLIMITED ? 0 : tm->quota[L];
    int q100 = q * SCHED_SHARE_WHOLE, used = p->st->tused[team * T1 + L];
    if (used + need <= q100) return true;
    int bl = tm->borrow_limit[L];
    if (why && why->code != SCHED_WHY_NONE) why = NULL; /* keep the first reason */
    if (bl != SCHED_UNLIMITED && used + need > (q + bl) * SCHED_SHARE_WHOLE) {
        if (why) {
            reason_init(why, SCHED_WHY_QUOTA);
            why->team = team;
            why->type = L == any ? -1 : type;
            why->used = gpus_up(used);
            why->limit = q;
            why->need = gpus_up(need);
            why->free = bl;
        }
        return false;
    }
    if (due) return true; /* a job that waited long may borrow beyond the idle pool */
    int lend, borrowed;
    pool_at(p, L, type, team, &lend, &borrowed);
    int mine_before = used > q100 ? used - q100 : 0, mine_after = used + need - q100;
    if (borrowed + mine_after <= lend) return true;
    if (why) {
        reason_init(why, SCHED_WHY_POOL);
        why->team = team;
        why->type = L == any ? -1 : type;
        why->used = gpus_up(used);
        why->limit = q;
        why->need = gpus_up(need);
        int left = lend - borrowed - mine_before;
        why->free = left > 0 ? left / SCHED_SHARE_WHOLE : 0;
    }
    return false;
}

/* Quota admission of `need` share units of `type` for a team. due: the job
 * has waited long (lathe) and may borrow even when others' idle quota does
 * not cover it; the team's borrowing limit still holds. */
static bool admit(const pass *p, int team, int type, int need, bool due, sched_reason *why)
{
    const sched_team *tm = &p->c->teams[team];
    if (!tm->limited) return true;
    int any = p->c->n_types;
    bool specific = tm->quota[type] != SCHED_UNLIMITED || tm->quota[any] == SCHED_UNLIMITED;
    if (specific && !level_ok(p, team, type, type, need, due, why)) return false;
    if (tm->quota[any] != SCHED_UNLIMITED && !level_ok(p, team, any, type, need, due, why)) return false;
    return true;
}

/* Lathe: has the job waited so long that it goes ahead of fair share? */
static bool is_due(const pass *p, const pjob *pj)
{
    return p->lathe && pj->age <= p->now - p->cfg->starve_after;
}

/* True when the team holds at least its quota share units at the level
 * that governs `type` plus `need` more: used + need <= quota. */
static bool within_quota(const pass *p, int team, int type, int need)
{
    const sched_team *tm = &p->c->teams[team];
    if (!tm->limited) return false;
    int T1 = p->c->n_types + 1, any = p->c->n_types;
    int L = tm->quota[type] != SCHED_UNLIMITED ? type : tm->quota[any] != SCHED_UNLIMITED ? any : type;
    int q = tm->quota[L] == SCHED_UNLIMITED ? 0 : tm->quota[L];
    return p->st->tused[team * T1 + L] + need <= q * SCHED_SHARE_WHOLE;
}

/* Share units of `type` a team holds beyond its quota (all it holds when it
 * has no quota), at the level that governs the type; negative when below. */
static int borrowed_units(const pass *p, int team, int type)
{
    const sched_team *tm = &p->c->teams[team];
    int T1 = p->c->n_types + 1, any = p->c->n_types;
    if (!tm->limited) return p->st->tused[team * T1 + type];
    int L = tm->quota[type] != SCHED_UNLIMITED ? type : tm->quota[any] != SCHED_UNLIMITED ? any : type;
    int q = tm->quota[L] == SCHED_UNLIMITED ? 0 : tm->quota[L];
    return p->st->tused[team * T1 + L] - q * SCHED_SHARE_WHOLE;
}

/* May this running job be reclaimed? Its team must be borrowing; with the
 * reclaim-borrowed rule, by at least the job's GPUs, so that reclaiming it
 * never takes its team below its quota (which would let that team reclaim
 * right back: a ping-pong between two teams). */
static bool reclaimable(const pass *p, const rjob *r)
{
    int b = borrowed_units(p, r->j.team, r->type);
    if (p->lathe && (p->cfg->rules & SCHED_RULE_RECLAIM_BORROWED)) return b >= r->units * r->n_gpus;
    return b > 0;
}

/* True when a team holds more of `type` than its quota (or has no quota). */
static bool borrowing(const pass *p, int team, int type)
{
    const sched_team *tm = &p->c->teams[team];
    int T1 = p->c->n_types + 1, any = p->c->n_types;
    if (!tm->limited) return p->st->tused[team * T1 + type] > 0;
    int L = tm->quota[type] != SCHED_UNLIMITED ? type : tm->quota[any] != SCHED_UNLIMITED ? any : type;
    int q = tm->quota[L] == SCHED_UNLIMITED ? 0 : tm->quota[L];
    return p->st->tused[team * T1 + L] > q * SCHED_SHARE_WHOLE;
}

/* ---- placement with the reservation rule ---- */

/* May this job use GPUs reserved for the head? Only if it ends before the
 * reserved start. */
static bool may_use_reserved(const pass *p, const pjob *pj)
{
    return !p->head_set || p->now + pj->est <= p->S;
}

/* Places one job on one type; takes the GPUs and writes them to p->buf. */
static bool place_on(pass *p, const pclass *pc, const pjob *pj, int type, int units)
{
    bool best = p->lathe;
    bool by_end = best && (p->cfg->rules & SCHED_RULE_END_PACK) && pc->g * pc->r <= p->k->K;
    int views[2] = {p->head_set ? CAP_UNRESERVED : CAP_ALL, CAP_ALL};
    int nv = p->head_set && may_use_reserved(p, pj) ? 2 : 1;
    for (int i = 0; i < nv; i++) {
        bool ok;
        if (units < SCHED_SHARE_WHOLE)
            ok = cap_place_share(p->k, views[i], type, units, p->buf);
        else if (by_end)
            ok = cap_place_end(p->k, views[i], type, pc->g, pc->r, p->now, p->now + pj->est, p->buf);
        else
            ok = cap_place_whole(p->k, views[i], type, pc->g, pc->r, best, p->buf);
        if (ok) {
            if (units >= SCHED_SHARE_WHOLE)
                for (int x = 0; x < pc->g * pc->r; x++) cap_set_end(p->k, p->buf[x], p->now + pj->est);
            return true;
        }
    }
    return false;
}

static bool fits_on(const pass *p, const pclass *pc, const pjob *pj, int type, int units)
{
    int view = p->head_set && !may_use_reserved(p, pj) ? CAP_UNRESERVED : CAP_ALL;
    return units < SCHED_SHARE_WHOLE ? cap_fits_share(p->k, view, type, units)
                                     : cap_fits_whole(p->k, view, type, pc->g, pc->r);
}

static void record_start(pass *p, const pclass *pc, int slot, int type, int units, sched_why code)
{
    sched_state *st = p->st;
    pjob *pj = &st->pj[slot];
    int n = units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r;
    sched_decision *d = res_add(p->out, SCHED_START, pj->j.id, pj->j.name);
    d->type = type;
    d->share = units;
    d->n_gpus = n;
    d->gpu_off = res_add_gpus(p->out, p->buf, n);
    reason_init(&d->why, code);
    d->why.team = pc->team;
    d->why.type = type;
    if (code == SCHED_WHY_BACKFILL || code == SCHED_WHY_TAIL) {
        d->why.other = job_at(p, p->head_slot)->id;
        d->why.other_name = job_at(p, p->head_slot)->name;
        d->why.when = p->S;
    }
    push_op(p, (op){OP_START, slot, type, units, n, units >= SCHED_SHARE_WHOLE, d->gpu_off,
                    p->now + pj->est});
    st_team_add(st, pc->team, type, units * n, +1);
    st->tjobs[pc->team]++;
    p->fair[pc->team] += p->tau * units * n / SCHED_SHARE_WHOLE / p->c->teams[pc->team].weight;
    pj->start_gen = st->pass_gen;
    st->cls[pj->cls].started++;
}

/* ---- reasons for waiting ---- */

static void no_fit_reason(const pass *p, const pclass *pc, int type, int units, sched_reason *r)
{
    const cap *k = p->k;
    reason_init(r, SCHED_WHY_NO_FIT);
    r->team = pc->team;
    r->type = type;
    r->need = pc->r;
    r->per = units < SCHED_SHARE_WHOLE ? 1 : pc->g;
    r->share = units;
    r->free = k->v[CAP_ALL].tfree[type];
    r->best = cap_largest(k, CAP_ALL, type, &r->node);
    r->groups = 0;
    if (r->node >= 0) {
        const sched_node *nd = &p->c->nodes[r->node];
        for (int i = 0; i < nd->n_groups; i++)
            if (k->v[CAP_ALL].gfree[nd->first_group + i] > 0) r->groups++;
    }
    r->nodes = cap_slots(k, CAP_ALL, type, r->per);
    if (p->c->type_gpus[type] > 0 && r->free == 0) {
        /* every GPU of the type busy, or its nodes not ready */
        int ready = 0;
        for (int n = k->tlo[type]; n < k->thi[type]; n++)
            if (p->c->nodes[k->pos_node[n]].state == SCHED_NODE_READY) ready++;
        if (!ready) r->code = SCHED_WHY_NODES_DOWN;
    }
}

/* ---- preemption ---- */

typedef struct cand {
    double cost; /* what stopping it costs, GPU-seconds: its lost work (and,
                    for a due preemption, its wait in the queue again) */
    double lost; /* GPU-seconds of work lost since its last checkpoint */
    int64_t prio;
    double start;
    uint64_t id;
    int slot;
    int why; /* SCHED_WHY_PREEMPT_* */
} cand;

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    if (x->start != y->start) return x->start > y->start ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Since when a running job would have to redo its work if stopped now:
 * its last checkpoint, else its start. */
static double redo_from(const pass *p, const rjob *r)
{
    const sched_job *j = &r->j;
    double ck = j->last_checkpoint;
    if (ck <= 0 && j->checkpoint_interval > 0 && p->now > j->start_time)
        ck = j->start_time + floor((p->now - j->start_time) / j->checkpoint_interval) * j->checkpoint_interval;
    return j->start_time > ck ? j->start_time : ck;
}

/* Work a running job would lose if stopped now, in GPU-seconds. */
static double lost_work(const pass *p, const rjob *r)
{
    double t = p->now - redo_from(p, r);
    return (t > 0 ? t : 0) * r->n_gpus * r->units / SCHED_SHARE_WHOLE;
}

/* The reclaim-tail rule, for a job that reclaims (estimated run time est):
 * a victim loses no more wall time than that job will run (a narrow job
 * days into a multi-day run is not stopped for a job of hours, however
 * wide), and one that loses more than reclaim_min_run (what a borrower is
 * always left to run) must, restarted now and redoing what it lost, end no
 * later than the latest estimated end of the running jobs and of the
 * reclaiming one (horizon): a reclaim that makes its victim the last job
 * to end stretches the busy period by all the victim loses. */
static double running_horizon(const pass *p, const pjob *pj)
{
    double h = p->now + pj->est;
    for (int s = 0; s < p->st->nrj; s++) {
        const rjob *r = &p->st->rj[s];
        if (r->alive && r->end > h) h = r->end;
    }
    return h;
}

static bool restart_within(const pass *p, const rjob *r, double est, double horizon)
{
    if (!(p->cfg->rules & SCHED_RULE_RECLAIM_TAIL)) return true;
    double lost = p->now - redo_from(p, r);
    if (lost > est) return false;
    return lost <= p->cfg->reclaim_min_run || r->end + lost <= horizon;
}

static void rj_release(pass *p, int slot)
{
    sched_state *st = p->st;
    rjob *r = &st->rj[slot];
    for (int i = 0; i < r->n_gpus; i++) cap_give(p->k, r->gpus[i], r->units, r->excl);
    st_team_add(st, r->j.team, r->type, r->units * r->n_gpus, -1);
    st->tjobs[r->j.team]--;
    r->pre_gen = st->pass_gen;
}

static void rj_retake(pass *p, int slot)
{
    sched_state *st = p->st;
    rjob *r = &st->rj[slot];
    for (int i = 0; i < r->n_gpus; i++) {
        cap_take(p->k, r->gpus[i], r->units, r->excl);
        cap_set_end(p->k, r->gpus[i], r->end);
    }
    st_team_add(st, r->j.team, r->type, r->units * r->n_gpus, +1);
    st->tjobs[r->j.team]++;
    r->pre_gen = 0;
}

/* Would the job be admitted and fit on some type now? */
static bool fits_any(const pass *p, const pclass *pc, const pjob *pj)
{
    for (int i = 0; i < p->c->n_types; i++) {
        int t = p->st->torder[i];
        if (!(pc->types >> t & 1)) continue;
        int units = st_units_on(p->st, &pj->j, t);
        int need = units * (units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r);
        if (admit(p, pc->team, t, need, is_due(p, pj), NULL) && fits_on(p, pc, pj, t, units)) return true;
    }
    return false;
}

/* How long a job must have run before it may be reclaimed: reclaim_min_run,
 * doubled for every time it was preempted before (reclaim-backoff rule), so
 * that no job, typically a long one that is always running when someone
 * reclaims, is stopped again and again. */
static double reclaim_min_run(const pass *p, const rjob *r)
{
    double t = p->cfg->reclaim_min_run;
    if (!(p->cfg->rules & SCHED_RULE_RECLAIM_BACKOFF)) return t;
    return t * exp2(r->j.preemptions < 30 ? r->j.preemptions : 30);
}

/* The reclaim-small rule: a victim of a reclaim holds no more share units
 * than the job that reclaims needs on its type. Breaking an 8-GPU gang for
 * a 1-GPU job leaves 7 GPUs to whoever comes and a gang that must wait
 * for a whole node again. */
static bool small_enough(const pass *p, const pclass *pc, const sched_job *j, const rjob *r)
{
    if (!(p->cfg->rules & SCHED_RULE_RECLAIM_SMALL)) return true;
    int units = st_units_on(p->st, j, r->type);
    int need = units * (units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r);
    return r->units * r->n_gpus <= need;
}

/* What stopping a running job for a due job costs beyond its lost work:
 * it goes back to the queue and waits again, at least about as long as
 * the due job would have waited for its reservation (S - now), on all its
 * GPUs. GPU-seconds. */
static double requeue_cost(const pass *p, const rjob *r)
{
    double wait = isfinite(p->S) && p->S > p->now ? p->S - p->now : 0;
    return wait * r->n_gpus * r->units / SCHED_SHARE_WHOLE;
}

/* Collects the running jobs this job may preempt (in no order).
 * budget > 0: the job is due and may also preempt jobs of no higher
 * priority that come after it in the order (never the other way round, so
 * preemption cannot cycle) and did not start as due themselves. */
static int collect_victims(pass *p, const pclass *pc, const pjob *pj, double budget, cand **out)
{
    sched_state *st = p->st;
    const sched_job *j = &pj->j;
    bool reclaim[SCHED_MAX_TYPES] = {false};
    bool any_reclaim = false;
    for (int t = 0; t < p->c->n_types; t++) {
        if (!(pc->types >> t & 1)) continue;
        int units = st_units_on(st, j, t);
        int need = units * (units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r);
        reclaim[t] = within_quota(p, pc->team, t, need) && p->now - j->submit_time >= p->cfg->reclaim_wait;
        any_reclaim |= reclaim[t];
    }
    if (!j->preempt_lower && !any_reclaim && budget <= 0) return 0;
    cand *cs = xmalloc((size_t)(st->nrj + 1) * sizeof *cs);
    int n = 0;
    double horizon = any_reclaim ? running_horizon(p, pj) : 0;
    for (int s = 0; s < st->nrj; s++) {
        const rjob *r = &st->rj[s];
        if (!r->alive || r->pre_gen == st->pass_gen || r->j.no_preempt) continue;
        if (!(pc->types >> r->type & 1)) continue;
        double ran = p->now - r->j.start_time;
        if (ran < p->cfg->min_run_time) continue;
        bool for_prio = j->preempt_lower && r->j.priority < j->priority;
        bool for_due = budget > 0 && !r->guarded && r->j.priority <= j->priority && r->key > pj->key;
        bool for_reclaim = reclaim[r->type] && !r->guarded && ran >= reclaim_min_run(p, r) &&
                           r->j.team != pc->team && reclaimable(p, r) && small_enough(p, pc, j, r) &&
                           restart_within(p, r, pj->est, horizon);
        if (!for_prio && !for_reclaim && !for_due) continue;
        int why = for_prio ? SCHED_WHY_PREEMPT_PRIORITY : for_reclaim ? SCHED_WHY_PREEMPT_RECLAIM
                                                                    : SCHED_WHY_PREEMPT_DUE;
        double lost = lost_work(p, r);
        double cost = lost + (why == SCHED_WHY_PREEMPT_DUE ? requeue_cost(p, r) : 0);
        cs[n++] = (cand){cost, lost, r->j.priority, r->j.start_time, r->j.id, s, why};
    }
    *out = cs;
    return n;
}

static void emit_preempt(pass *p, const cand *v, const pjob *pj)
{
    const rjob *r = &p->st->rj[v->slot];
    sched_decision *d = res_add(p->out, SCHED_PREEMPT, r->j.id, r->j.name);
    d->type = r->type;
    reason_init(&d->why, (sched_why)v->why);
    d->why.team = v->why == SCHED_WHY_PREEMPT_RECLAIM ? pj->j.team : r->j.team;
    d->why.type = r->type;
    d->why.other = pj->j.id;
    d->why.other_name = pj->j.name;
    d->why.amount = v->lost;
    d->why.priority = pj->j.priority;
    push_op(p, (op){OP_PREEMPT, v->slot, r->type, r->units, r->n_gpus, r->excl, 0, 0});
}

/* Tries to start a job by preempting others (lathe). Victims: lower
 * priority (when the job's class preempts) or jobs of teams borrowing the
 * GPU type the job's team is entitled to. Greedy by least lost work, then
 * pruned so that no victim is stopped needlessly. */
/* Sifts a candidate down a min-heap ordered by cmp_cand. */
static void cand_down(cand *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < n && cmp_cand(&h[l], &h[m]) < 0) m = l;
        if (l + 1 < n && cmp_cand(&h[l + 1], &h[m]) < 0) m = l + 1;
        if (m == i) return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static bool try_preempt(pass *p, const pclass *pc, int slot, double budget)
{
    const pjob *pj = &p->st->pj[slot];
    if (p->attempts >= p->cfg->max_preempt_attempts) return false;
    p->attempts++;
    cand *cs = NULL;
    int n = collect_victims(p, pc, pj, budget, &cs);
    for (int i = n / 2 - 1; i >= 0; i--) cand_down(cs, n, i);
    /* cheapest victims first until the job fits; give up after freeing four
     * times what it needs (victims spread too thin to make room) */
    cand *ch = xmalloc((size_t)(n + 1) * sizeof *ch);
    int nch = 0, freed = 0, limit = 4 * pc->g * pc->r + 64;
    bool ok = false;
    while (n > 0 && !ok && freed <= limit) {
        cand v = cs[0];
        cs[0] = cs[--n];
        cand_down(cs, n, 0);
        const rjob *r = &p->st->rj[v.slot];
        if (v.why == SCHED_WHY_PREEMPT_RECLAIM && !reclaimable(p, r)) continue;
        rj_release(p, v.slot);
        ch[nch++] = v;
        freed += r->n_gpus;
        ok = fits_any(p, pc, pj);
    }
    if (ok) /* keep running every victim the job does not need */
        for (int i = nch - 1; i >= 0; i--) {
            rj_retake(p, ch[i].slot);
            if (fits_any(p, pc, pj))
                ch[i].slot = -1;
            else
                rj_release(p, ch[i].slot);
        }
    if (ok && (p->cfg->rules & SCHED_RULE_RECLAIM_CHEAP)) { /* a reclaim destroys less than it brings */
        double lost = 0;
        for (int i = 0; i < nch; i++)
            if (ch[i].slot >= 0 && ch[i].why == SCHED_WHY_PREEMPT_RECLAIM) lost += ch[i].lost;
        ok = lost <= pj->est * (double)pc->g * pc->r;
    }
    if (ok && budget > 0) { /* a due job's preemption must cost less than draining */
        double cost = 0;
        for (int i = 0; i < nch; i++)
            if (ch[i].slot >= 0) cost += ch[i].cost;
        ok = cost < budget;
    }
    int type = -1, units = 0;
    if (ok) {
        ok = false;
        for (int i = 0; i < p->c->n_types && !ok; i++) {
            type = p->st->torder[i];
            if (!(pc->types >> type & 1)) continue;
            units = st_units_on(p->st, &pj->j, type);
            int need = units * (units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r);
            ok = admit(p, pc->team, type, need, is_due(p, pj), NULL) && place_on(p, pc, pj, type, units);
        }
    }
    for (int i = 0; i < nch; i++) {
        if (ch[i].slot < 0) continue;
        if (ok)
            emit_preempt(p, &ch[i], pj);
        else
            rj_retake(p, ch[i].slot);
    }
    if (ok) record_start(p, pc, slot, type, units, SCHED_WHY_AFTER_PREEMPT);
    free(ch);
    free(cs);
    return ok;
}

/* ---- the head job's reservation ---- */

/* May this job hold the reservation? Not on account of the advance a long
 * job gets in the order (long_after): that lets it take free GPUs before
 * others, but the reservation, which makes GPUs stand idle for it, stays
 * with jobs that have waited longest, unless it is due itself. */
static bool may_hold_head(const pass *p, const pjob *pj)
{
    return pj->key >= pj->age || is_due(p, pj);
}

typedef struct rel {
    double end;
    int kind; /* 0: running slot, 1: op index of a start in this pass */
    int idx;
} rel;

static int cmp_rel(const void *a, const void *b)
{
    const rel *x = a, *y = b;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->idx - y->idx;
}

static void release_item(pass *p, const rel *r, int sign)
{
    if (p->shadow_pj) { /* the head's admission is checked as teams' usage drops */
        if (r->kind == 0) {
            const rjob *j = &p->st->rj[r->idx];
            st_team_add(p->st, j->j.team, j->type, j->units * j->n_gpus, sign);
        } else {
            const op *o = &p->ops[r->idx];
            st_team_add(p->st, p->st->pj[o->slot].j.team, o->type, o->units * o->n, sign);
        }
    }
    if (r->kind == 0) {
        const rjob *j = &p->st->rj[r->idx];
        for (int i = 0; i < j->n_gpus; i++) {
            if (sign < 0) {
                cap_give(p->k, j->gpus[i], j->units, j->excl);
            } else {
                cap_take(p->k, j->gpus[i], j->units, j->excl);
                cap_set_end(p->k, j->gpus[i], j->end);
            }
        }
        return;
    }
    const op *o = &p->ops[r->idx];
    const int *g = p->out->gpus + o->off;
    for (int i = 0; i < o->n; i++) {
        if (sign < 0) {
            cap_give(p->k, g[i], o->units, o->excl);
        } else {
            cap_take(p->k, g[i], o->units, o->excl);
            cap_set_end(p->k, g[i], o->end);
        }
    }
}

/* The head's first type (in policy order) that fits whole now; while
 * p->shadow_pj is set, also one its team is admitted to. */
static int head_fit_type(const pass *p, const pclass *pc, uint64_t types)
{
    for (int i = 0; i < p->c->n_types; i++) {
        int t = p->st->torder[i];
        if (!(types >> t & 1)) continue;
        if (!cap_fits_whole(p->k, CAP_ALL, t, pc->units_whole ? pc->g : 1, pc->units_whole ? pc->r : 1))
            continue;
        if (p->shadow_pj) {
            int units = st_units_on(p->st, &p->shadow_pj->j, t);
            int need = units * (units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r);
            if (!admit(p, pc->team, t, need, is_due(p, p->shadow_pj), NULL)) continue;
        }
        return t;
    }
    return -1;
}

/* The running jobs (and jobs started in this pass) in order of estimated
 * end, for the shadow schedule. Caller frees. */
static rel *ending_order(pass *p, int *n)
{
    sched_state *st = p->st;
    int nrel = 0;
    rel *rs = xmalloc((size_t)(st->nrorder + p->nops + 1) * sizeof *rs);
    bool overrun = p->cfg->policy == SCHED_LATHE && (p->cfg->rules & SCHED_RULE_OVERRUN), moved = false;
    for (int i = 0; i < st->nrorder; i++) {
        const qent *e = &st->rorder[i];
        if (!st_rent_live(st, e) || st->rj[e->slot].pre_gen == st->pass_gen) continue;
        double end = e->key > p->now ? e->key : p->now;
        if (overrun && e->key <= p->now) { /* past its estimate: as long again as it ran */
            const sched_job *rj = &st->rj[e->slot].j;
            double ran = p->now - rj->start_time;
            end = p->now + (ran > 1 ? ran : 1);
            /* but not past its limit, while that is ahead */
            double lim = rj->max_duration > 0 ? rj->start_time + rj->max_duration - rj->done : 0;
            if (lim > p->now && end > lim) end = lim;
            moved = true;
        }
        rs[nrel++] = (rel){end, 0, e->slot};
    }
    int nrun = nrel;
    if (moved) qsort(rs, (size_t)nrun, sizeof *rs, cmp_rel);
    for (int i = 0; i < p->nops; i++)
        if (p->ops[i].kind == OP_START) rs[nrel++] = (rel){p->ops[i].end, 1, i};
    if (nrel > nrun) { /* merge the few starts of this pass into the sorted running list */
        qsort(rs + nrun, (size_t)(nrel - nrun), sizeof *rs, cmp_rel);
        rel *m = xmalloc((size_t)(nrel + 1) * sizeof *m);
        int a = 0, b = nrun, o = 0;
        while (a < nrun || b < nrel)
            m[o++] = (b >= nrel || (a < nrun && rs[a].end <= rs[b].end)) ? rs[a++] : rs[b++];
        free(rs);
        rs = m;
    }
    *n = nrel;
    return rs;
}

/* The GPUs of a running job or of a start of this pass; *n of them. */
static const int *item_gpus(const pass *p, const rel *r, int *n)
{
    if (r->kind == 0) {
        *n = p->st->rj[r->idx].n_gpus;
        return p->st->rj[r->idx].gpus;
    }
    *n = p->ops[r->idx].n;
    return p->out->gpus + p->ops[r->idx].off;
}

/* Marks a job's GPUs freed at its end in the shadow schedule (on), or
 * forgets it again (off). */
static void note_freed(pass *p, const rel *r, bool on)
{
    int n;
    const int *g = item_gpus(p, r, &n);
    for (int i = 0; i < n; i++) {
        p->freed_at[g[i]] = r->end;
        p->released[g[i]] = on;
    }
}

/* A replica slot for the head at its reserved start: g free GPUs of one
 * node and what they cost. */
typedef struct rslot {
    double cost; /* GPU-seconds its GPUs stand idle before the reserved start */
    int node;
    int first;   /* its GPUs are gpus[first .. first + g) of the list built */
} rslot;

static int cmp_slot(const void *a, const void *b)
{
    const rslot *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    if (x->node != y->node) return x->node - y->node;
    return x->first - y->first;
}

/* A node's GPUs free at the reserved start, latest freed first, with the
 * time each was freed (now for those free now). Returns how many. */
static int node_free_by_release(const pass *p, int node, int *gpu, double *freed)
{
    const sched_node *nd = &p->c->nodes[node];
    int n = 0;
    for (int i = 0; i < nd->n_gpus; i++) {
        int g = nd->first_gpu + i;
        if (!cap_gpu_free(p->k, CAP_ALL, g)) continue;
        double t = p->released[g] ? p->freed_at[g] : p->now;
        int j = n++;
        for (; j > 0 && freed[j - 1] < t; j--) { /* insertion, latest first */
            gpu[j] = gpu[j - 1];
            freed[j] = freed[j - 1];
        }
        gpu[j] = g;
        freed[j] = t;
    }
    return n;
}

/* The idle-reserve rule: the head's GPUs at its reserved start S, chosen
 * so that they stand idle least before S (a GPU free now idles S - now
 * unless a short job backfills it; one freed at t idles S - t). Per node,
 * its GPUs free at S, latest freed first, cut into replica slots of g; the
 * r cheapest slots. GPUs free now stay out of the reservation when others
 * will do, so that jobs of any length may still use them. Called with the
 * shadow schedule's releases applied; writes r * g GPUs to p->buf. */
static void reserve_least_idle(pass *p, int type, int g, int r)
{
    const cap *k = p->k;
    const cap_view *v = &k->v[CAP_ALL];
    int most = cap_slots(k, CAP_ALL, type, g), nslots = 0, used = 0;
    rslot *sl = xmalloc((size_t)(most + 1) * sizeof *sl);
    int *gpus = xmalloc((size_t)(most * g + 1) * sizeof *gpus);
    for (int pos = bset_next(&v->nge[g], k->tlo[type], k->thi[type]); pos >= 0;
         pos = bset_next(&v->nge[g], pos + 1, k->thi[type])) {
        int node = k->pos_node[pos], idx[SCHED_MAX_NODE_GPUS];
        double freed[SCHED_MAX_NODE_GPUS];
        int nf = node_free_by_release(p, node, idx, freed);
        for (int s0 = 0; s0 + g <= nf; s0 += g) {
            double cost = 0;
            for (int i = 0; i < g; i++) {
                gpus[used + i] = idx[s0 + i];
                cost += p->S - freed[s0 + i];
            }
            sl[nslots++] = (rslot){cost, node, used};
            used += g;
        }
    }
    qsort(sl, (size_t)nslots, sizeof *sl, cmp_slot);
    for (int i = 0; i < r; i++) memcpy(p->buf + i * g, gpus + sl[i].first, (size_t)g * sizeof *gpus);
    free(sl);
    free(gpus);
}

/* The shadow schedule of a head job: releases running jobs in order of
 * estimated end until it fits, and finds the GPUs it would get then (a
 * sharing job counts as a whole GPU). Sets p->S (INFINITY: never) and
 * p->resv, leaves the index as it was, and returns the GPU-seconds the
 * reserved GPUs would stand idle until S if nothing backfilled them. */
static double shadow(pass *p, const pclass *pc, uint64_t admitted)
{
    int nrel, g = pc->units_whole ? pc->g : 1, r = pc->units_whole ? pc->r : 1;
    rel *rs = ending_order(p, &nrel);
    if (!p->freed_at) p->freed_at = xmalloc((size_t)(p->c->n_gpus + 1) * sizeof *p->freed_at);
    if (!p->released) p->released = xcalloc((size_t)(p->c->n_gpus + 1), 1);
    p->S = INFINITY;
    int done = 0, type = head_fit_type(p, pc, admitted);
    while (type < 0 && done < nrel) {
        double t = rs[done].end;
        while (done < nrel && rs[done].end == t) {
            note_freed(p, &rs[done], true);
            release_item(p, &rs[done++], -1);
        }
        type = head_fit_type(p, pc, admitted);
        if (type >= 0) p->S = t;
    }
    double idle = 0;
    if (type >= 0) {
        if (done == 0) p->S = p->now;
        if (p->lathe && (p->cfg->rules & SCHED_RULE_IDLE_RESERVE)) {
            reserve_least_idle(p, type, g, r);
        } else {
            cap_place_whole(p->k, CAP_ALL, type, g, r, p->lathe, p->buf);
            for (int i = 0; i < g * r; i++) cap_give(p->k, p->buf[i], SCHED_SHARE_WHOLE, true);
        }
        free(p->resv);
        p->resv = xmalloc((size_t)(g * r) * sizeof *p->resv);
        memcpy(p->resv, p->buf, (size_t)(g * r) * sizeof *p->resv);
        p->nresv = g * r;
    }
    while (done > 0) {
        release_item(p, &rs[--done], +1);
        note_freed(p, &rs[done], false);
    }
    for (int i = 0; i < p->nresv; i++) {
        int gpu = p->resv[i];
        idle += p->S - (cap_gpu_free(p->k, CAP_ALL, gpu) ? p->now : p->freed_at[gpu]);
    }
    free(rs);
    return idle;
}

/* Forgets the GPUs and start shadow() found, when no job takes them. */
static void drop_shadow(pass *p)
{
    free(p->resv);
    p->resv = NULL;
    p->nresv = 0;
    p->S = INFINITY;
}

/* Makes a job the head, holding the GPUs shadow() found for the types
 * `types`. */
static void set_head(pass *p, const pclass *pc, int slot, uint64_t types, bool pool)
{
    p->head_set = true;
    p->head_slot = slot;
    p->head_pc = pc;
    p->head_types = types;
    p->head_pool = pool;
    for (int i = 0; i < p->nresv; i++) cap_set_reserved(p->k, p->resv[i], true);
}

/* The pool-head rule: a job refused only because other teams do not have
 * enough idle quota to lend (the pool) waits for GPUs that other teams
 * hold, as a job that does not fit waits for GPUs. When no job holds the
 * reservation yet it may: the shadow schedule also releases the teams'
 * usage as their jobs end, and the reserved start is the first time the
 * job is admitted and fits. Without this, a large job of a team that uses
 * its quota waits until it is due while smaller jobs keep taking every GPU
 * that frees up. The caller checked that the rule applies. True when it
 * became the head. */
static bool pool_head(pass *p, const pclass *pc, int slot)
{
    p->shadow_pj = &p->st->pj[slot];
    shadow(p, pc, pc->types);
    p->shadow_pj = NULL;
    if (!isfinite(p->S)) {
        drop_shadow(p);
        return false;
    }
    set_head(p, pc, slot, pc->types, true);
    return true;
}

/* ---- one job ---- */

static int block_team(pass *p, int team, const sched_reason *why)
{
    p->tblock[team] = *why;
    return R_TEAM_BLOCKED;
}

/* Team-wide limits: budget and concurrent jobs. */
static bool team_open(pass *p, int team)
{
    const sched_team *tm = &p->c->teams[team];
    sched_reason r;
    if (p->spent && tm->budget > 0 && p->spent[team] >= tm->budget) {
        reason_init(&r, SCHED_WHY_BUDGET);
        r.team = team;
        r.amount = p->spent[team];
        r.limit_amount = tm->budget;
        block_team(p, team, &r);
        return false;
    }
    if (tm->max_jobs > 0 && p->st->tjobs[team] >= tm->max_jobs) {
        reason_init(&r, SCHED_WHY_MAX_JOBS);
        r.team = team;
        r.used = p->st->tjobs[team];
        r.limit = tm->max_jobs;
        block_team(p, team, &r);
        return false;
    }
    return true;
}

/* Lathe: a job that has waited long but is held back by its team's own
 * borrowing limit keeps the team's later jobs from taking the quota it
 * waits for (as a strict FIFO would, for this job only). */
static int hold_for(pass *p, const pclass *pc, int slot, const sched_reason *adm)
{
    if (adm->code != SCHED_WHY_QUOTA) return R_CLASS_BLOCKED;
    const pjob *pj = &p->st->pj[slot];
    sched_reason r;
    reason_init(&r, SCHED_WHY_TEAM_HELD);
    r.team = pc->team;
    r.other = pj->j.id;
    r.other_name = pj->j.name;
    return block_team(p, pc->team, &r);
}

/* What trying a job's GPU types found. */
typedef struct tried {
    sched_reason adm;  /* the first admission failure */
    uint64_t admitted; /* types its team may take now */
    int type, units;   /* the first admitted type (-1: none) and its share */
    bool fits_all;     /* with a reservation: would fit on reserved GPUs */
} tried;

/* Tries the job's GPU types in the policy's order: admission, then
 * placement. True when it started. */
static bool try_types(pass *p, const pclass *pc, int slot, tried *tr)
{
    const pjob *pj = &p->st->pj[slot];
    reason_init(&tr->adm, SCHED_WHY_NONE);
    tr->admitted = 0;
    tr->type = -1;
    tr->units = SCHED_SHARE_WHOLE;
    tr->fits_all = false;
    for (int i = 0; i < p->c->n_types; i++) {
        int t = p->st->torder[i];
        if (!(pc->types >> t & 1)) continue;
        int units = st_units_on(p->st, &pj->j, t);
        int need = units * (units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r);
        if (!admit(p, pc->team, t, need, is_due(p, pj), &tr->adm)) continue;
        tr->admitted |= 1ull << t;
        if (tr->type < 0) {
            tr->type = t;
            tr->units = units;
        }
        if (place_on(p, pc, pj, t, units)) {
            record_start(p, pc, slot, t, units, p->head_set ? SCHED_WHY_BACKFILL : SCHED_WHY_FITS);
            return true;
        }
        if (p->head_set && (units < SCHED_SHARE_WHOLE ? cap_fits_share(p->k, CAP_ALL, t, units)
                                                      : cap_fits_whole(p->k, CAP_ALL, t, pc->g, pc->r)))
            tr->fits_all = true;
    }
    return false;
}

/* The GPU-seconds of known work per GPU: what the running jobs have left
 * and the pending jobs need (estimates), over the ready GPUs. The busy
 * period cannot end before now plus this, however jobs are ordered.
 * Computed once per pass. */
static double backlog_drain(pass *p)
{
    if (p->drain >= 0) return p->drain;
    const sched_state *st = p->st;
    double work = 0;
    for (int s = 0; s < st->nrj; s++) {
        const rjob *r = &st->rj[s];
        if (r->alive && r->end > p->now)
            work += (r->end - p->now) * r->n_gpus * (double)r->units / SCHED_SHARE_WHOLE;
    }
    for (int s = 0; s < st->npj; s++) {
        const pjob *pj = &st->pj[s];
        if (!pj->alive || pj->rejected || pj->cls < 0) continue;
        double g = (double)pj->j.replicas * pj->j.gpus_per_replica;
        if (pj->j.share > 0 && pj->j.share < SCHED_SHARE_WHOLE) g = pj->j.share / (double)SCHED_SHARE_WHOLE;
        work += pj->est * g;
    }
    int gpus = sched_cluster_ready_gpus(p->c);
    p->drain = gpus > 0 ? work / gpus : 0;
    return p->drain;
}

/* The reserve-tail rule (lathe): a job that would end after every running
 * job, every job started in this pass, the head, and the time all known
 * work needs (estimates) sets the end of the busy period: each second it
 * waits moves that end, while the head, which ends before it whenever
 * both start, loses only the seconds its reserved start moves. Such a job
 * may take the head's reserved GPUs when the head still fits beside it
 * (the shadow schedule with the job running finds a new reserved start
 * S1 before the job's end) and the exchange lowers the two jobs' summed
 * completion times: the head's delay S1 - S is less than the wait the job
 * is spared, S + the head's run - now (it could start at the earliest when
 * the head ends). Otherwise the reservation stays as it was. A head is
 * passed this way once, so its wait stays bounded as without the rule.
 * True when the job started. */
static bool try_tail(pass *p, const pclass *pc, int slot, const tried *tr)
{
    if (!p->lathe || !(p->cfg->rules & SCHED_RULE_RESERVE_TAIL) || !p->head_set || !tr->fits_all)
        return false;
    sched_state *st = p->st;
    pjob *head = &st->pj[p->head_slot];
    const pjob *pj = &st->pj[slot];
    if (head->tail_passed || slot == p->head_slot) return false;
    double end = p->now + pj->est, horizon = p->S + head->est;
    for (int s = 0; s < st->nrj; s++)
        if (st->rj[s].alive && st->rj[s].end > horizon) horizon = st->rj[s].end;
    for (int i = 0; i < p->nops; i++)
        if (p->ops[i].kind == OP_START && p->ops[i].end > horizon) horizon = p->ops[i].end;
    if (!(end > horizon) || !(end > p->now + backlog_drain(p))) return false;

    int type = tr->type, units = tr->units, n = units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r;
    bool excl = units >= SCHED_SHARE_WHOLE;
    bool ok = excl ? cap_place_whole(p->k, CAP_ALL, type, pc->g, pc->r, true, p->buf)
                   : cap_place_share(p->k, CAP_ALL, type, units, p->buf);
    if (!ok) return false;
    int *mine = xmalloc((size_t)n * sizeof *mine), *old = xmalloc((size_t)(p->nresv + 1) * sizeof *old);
    memcpy(mine, p->buf, (size_t)n * sizeof *mine);
    int nold = p->nresv;
    double S0 = p->S;
    memcpy(old, p->resv, (size_t)nold * sizeof *old);
    for (int i = 0; i < nold; i++) cap_set_reserved(p->k, old[i], false);
    /* the job's GPUs are taken but not yet an op: the shadow schedule never
     * releases them, so the head must fit beside the job (and, for a head
     * waiting on the lending pool, be admitted then, as pool_head found it) */
    if (p->head_pool) p->shadow_pj = head;
    shadow(p, p->head_pc, p->head_types);
    p->shadow_pj = NULL;
    bool fits = isfinite(p->S) && p->S < end && p->S - S0 < S0 + head->est - p->now;
    if (fits) {
        memcpy(p->buf, mine, (size_t)n * sizeof *mine);
        if (excl)
            for (int x = 0; x < n; x++) cap_set_end(p->k, mine[x], end);
        record_start(p, pc, slot, type, units, SCHED_WHY_TAIL); /* names the new reserved start */
        head->tail_passed = true;
        set_head(p, p->head_pc, p->head_slot, p->head_types, p->head_pool);
    } else {
        for (int x = 0; x < n; x++) cap_give(p->k, mine[x], units, excl);
        free(p->resv);
        p->resv = old;
        old = NULL;
        p->nresv = nold;
        p->S = S0;
        for (int i = 0; i < nold; i++) cap_set_reserved(p->k, p->resv[i], true);
    }
    free(mine);
    free(old);
    return fits;
}

/* The rent-reserve rule (lathe): a reservation is bought with idle GPUs
 * (its drain: the GPU-seconds its reserved GPUs would stand idle until the
 * reserved start if nothing backfilled them, what shadow() returns), and
 * waiting without one is rented: each second the job waits costs it its
 * GPUs. As in the ski-rental problem, the job buys once the rent it has
 * paid (its GPUs x its wait so far) reaches the price; until then it waits
 * as under greedy, taking GPUs when they happen to be free, and a later
 * job whose drain is cheaper may hold the reservation. Buying at the break
 * even costs at most twice the better of the two choices made knowing the
 * future, so the job's wait before it holds the reservation is bounded by
 * the drain it would cause (idle / GPUs <= reserved start - now). Wide,
 * short jobs (a drain of hundreds of GPUs for a few minutes' run) no
 * longer make every narrow job wait as soon as they arrive. A due job buys
 * at once. Only for a job that gives an estimate: a drain computed from
 * time limits is an upper bound, several times the real one, not a price.
 * True when the job may hold the reservation now; otherwise the time it
 * will have paid goes to the result's wake_at. */
static bool rent_paid(pass *p, pclass *pc, const pjob *pj, int units, double idle)
{
    if (!p->lathe || !(p->cfg->rules & SCHED_RULE_RENT_RESERVE) || !(pj->j.est_duration > 0) || is_due(p, pj))
        return true;
    double gpus = units < SCHED_SHARE_WHOLE ? units / (double)SCHED_SHARE_WHOLE : (double)pc->g * pc->r;
    double waited = p->now - pj->j.submit_time;
    if (gpus * (waited > 0 ? waited : 0) >= idle) return true;
    double paid = pj->j.submit_time + idle / gpus; /* the next pass then may buy */
    if (paid < p->out->wake_at) p->out->wake_at = paid;
    if (pc->why.code == SCHED_WHY_NO_FIT) { /* its reason says when */
        pc->why.when = paid;
        pc->why.amount = idle;
    }
    return false;
}

/* Strict FIFO: the team's queue stops behind this job. */
static int fifo_block(pass *p, const pclass *pc, const pjob *pj, const sched_reason *base)
{
    sched_reason r = *base;
    r.code = SCHED_WHY_FIFO_BLOCKED;
    r.team = pc->team;
    r.other = pj->j.id;
    r.other_name = pj->j.name;
    return block_team(p, pc->team, &r);
}

/* Passes over a job for now (the next of its class is looked at), or
 * closes the class when backfill_depth jobs of it were passed over. */
static int skip(pass *p, pclass *pc)
{
    if (++pc->skipped >= p->cfg->backfill_depth) {
        reason_init(&pc->why, SCHED_WHY_BEHIND_HEAD);
        return R_CLASS_BLOCKED;
    }
    return R_SKIP;
}

/* The job at the head of its class: start it, skip it, or close its class
 * or team for the rest of the pass (see the top of this file). */
static int try_job(pass *p, pclass *pc, int slot)
{
    const pjob *pj = &p->st->pj[slot];
    if (!team_open(p, pc->team)) return R_TEAM_BLOCKED;
    tried tr;
    if (try_types(p, pc, slot, &tr)) return R_STARTED;
    bool fifo = p->cfg->policy == SCHED_FIFO;
    if (!tr.admitted) {
        pc->why = tr.adm;
        if (tr.adm.code == SCHED_WHY_POOL && p->lathe && (p->cfg->rules & SCHED_RULE_POOL_HEAD) &&
            p->backfill && !p->head_set) {
            if (!may_hold_head(p, pj)) return skip(p, pc); /* a later job of its class may */
            if (pool_head(p, pc, slot)) return R_CLASS_BLOCKED;
        }
        if (is_due(p, pj)) return hold_for(p, pc, slot, &tr.adm);
        return fifo ? fifo_block(p, pc, pj, &tr.adm) : R_CLASS_BLOCKED;
    }
    no_fit_reason(p, pc, tr.type, tr.units, &pc->why);
    if (fifo) return fifo_block(p, pc, pj, &pc->why);
    if (try_tail(p, pc, slot, &tr)) return R_STARTED;
    if (tr.fits_all) return skip(p, pc); /* too long for the reserved GPUs; a shorter job may go */
    if (p->lathe && try_preempt(p, pc, slot, 0)) return R_STARTED;
    if (!p->backfill || p->head_set) return R_CLASS_BLOCKED;
    if (!may_hold_head(p, pj)) return skip(p, pc); /* a later job of its class may hold it */
    double idle = shadow(p, pc, tr.admitted);
    if (!rent_paid(p, pc, pj, tr.units, idle)) { /* not yet: a later job may hold it */
        drop_shadow(p);
        return skip(p, pc);
    }
    /* a job that waited long: preempt newer jobs when that costs less (their
     * lost work and their wait in the queue again) than the drain would
     * leave GPUs idle */
    if (p->lathe && p->cfg->due_preempt && is_due(p, pj) && idle > 0 && try_preempt(p, pc, slot, idle)) {
        drop_shadow(p);
        return R_STARTED;
    }
    set_head(p, pc, slot, tr.admitted, false);
    return R_CLASS_BLOCKED;
}

/* ---- team heaps of classes ---- */

static const qent *class_head(const pass *p, int ci)
{
    const pclass *pc = &p->st->cls[ci];
    return &pc->q[pc->cur];
}

static bool heap_less(const pass *p, int a, int b)
{
    const qent *x = class_head(p, a), *y = class_head(p, b);
    if (x->key != y->key) return x->key < y->key;
    return x->id < y->id;
}

static void heap_down(pass *p, int *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < n && heap_less(p, h[l], h[m])) m = l;
        if (l + 1 < n && heap_less(p, h[l + 1], h[m])) m = l + 1;
        if (m == i) return;
        int t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heap_build(pass *p, int *h, int n)
{
    for (int i = n / 2 - 1; i >= 0; i--) heap_down(p, h, n, i);
}

/* Moves a class's cursor to its next live, not yet started entry; false
 * when none is left. */
static bool class_advance(pass *p, pclass *pc)
{
    while (pc->cur < pc->n && !st_qent_live(p->st, &pc->q[pc->cur])) pc->cur++;
    return pc->cur < pc->n;
}

/* The team whose job goes next. The baselines: the team of the lowest
 * order key. lathe: with the oldest-head rule, until a job has become the
 * head, the lowest order key when that job has waited head_after (so the
 * head is the oldest job that cannot start, as in EASY), after that and
 * for younger jobs the lowest fair-share key; without the rule, the lowest
 * order key when that job is due, else the lowest fair-share key. */
static int pick_team(const pass *p)
{
    int first = -1, fair = -1;
    for (int t = 0; t < p->c->n_teams; t++) {
        if (!p->hlen[t] || p->tblock[t].code != SCHED_WHY_NONE) continue;
        if (first < 0 || heap_less(p, p->heap[p->hoff[t]], p->heap[p->hoff[first]])) first = t;
        if (fair < 0 || p->fair[t] < p->fair[fair]) fair = t;
    }
    if (!p->lathe || first < 0 || !p->cfg->fair_share) return first;
    const qent *e = class_head(p, p->heap[p->hoff[first]]);
    if (p->cfg->rules & SCHED_RULE_OLDEST_HEAD)
        return !p->head_set && p->st->pj[e->slot].age <= p->now - p->cfg->head_after ? first : fair;
    return is_due(p, &p->st->pj[e->slot]) ? first : fair;
}

/* Could anything still start? Nothing free and no preemption left to try. */
static bool nothing_left(const pass *p, int64_t band_prio)
{
    if (p->k->v[CAP_ALL].total > 0 || p->k->nopen > 0) return false;
    if (!p->lathe || p->attempts >= p->cfg->max_preempt_attempts) return true;
    return !p->reclaim_possible && p->min_running_prio >= band_prio;
}

static void run_band(pass *p, int b)
{
    sched_state *st = p->st;
    const band *bd = &st->bands[b];
    int T = p->c->n_teams;
    for (int t = 0; t < T; t++) p->hlen[t] = 0;
    /* per-team heap storage: offsets by team */
    for (int t = 0; t <= T; t++) p->hoff[t] = 0;
    for (int i = 0; i < bd->ncls; i++) p->hoff[st->cls[bd->cls[i]].team + 1]++;
    for (int t = 0; t < T; t++) p->hoff[t + 1] += p->hoff[t];
    for (int i = 0; i < bd->ncls; i++) {
        int ci = bd->cls[i];
        pclass *pc = &st->cls[ci];
        pc->pgen = st->pass_gen;
        pc->cur = 0;
        pc->skipped = 0;
        pc->started = 0;
        pc->examined = false;
        reason_init(&pc->why, SCHED_WHY_NONE);
        if (pc->live > 0 && class_advance(p, pc)) p->heap[p->hoff[pc->team] + p->hlen[pc->team]++] = ci;
    }
    for (int t = 0; t < T; t++) heap_build(p, p->heap + p->hoff[t], p->hlen[t]);
    while (!p->stop) {
        if (nothing_left(p, bd->prio)) {
            p->stop = true;
            break;
        }
        int t = pick_team(p);
        if (t < 0) break;
        int *h = p->heap + p->hoff[t];
        pclass *pc = &st->cls[h[0]];
        pc->examined = true;
        int res = try_job(p, pc, pc->q[pc->cur].slot);
        if (res == R_TEAM_BLOCKED) {
            p->hlen[t] = 0;
            continue;
        }
        if (res == R_STARTED || res == R_SKIP) {
            pc->cur++;
            if (class_advance(p, pc)) {
                heap_down(p, h, p->hlen[t], 0);
                continue;
            }
        }
        h[0] = h[--p->hlen[t]];
        heap_down(p, h, p->hlen[t], 0);
    }
}

/* ---- after the decisions ---- */

/* Free whole GPUs, not reserved for the head job, that no waiting job's
 * shape could use: per type, nodes with fewer such GPUs than the smallest
 * replica a waiting job of that type needs (gangs count only when they
 * would fit). */
static int fragmentation(const pass *p)
{
    const sched_state *st = p->st;
    const cap *k = p->k;
    int ming[SCHED_MAX_TYPES];
    bool wanted[SCHED_MAX_TYPES] = {false};
    for (int t = 0; t < p->c->n_types; t++) ming[t] = k->K + 1;
    for (int ci = 0; ci < st->ncls; ci++) {
        const pclass *pc = &st->cls[ci];
        if (pc->live <= (pc->pgen == st->pass_gen ? pc->started : 0)) continue;
        for (int t = 0; t < p->c->n_types; t++) {
            if (!(pc->types >> t & 1)) continue;
            wanted[t] = true;
            int g = pc->units_whole ? pc->g : 1;
            if (pc->units_whole && pc->r > 1 && cap_slots(k, CAP_UNRESERVED, t, g) < pc->r) continue;
            if (g < ming[t]) ming[t] = g;
        }
    }
    int frag = 0;
    for (int t = 0; t < p->c->n_types; t++) {
        if (!wanted[t]) continue;
        const int *cnt = &k->v[CAP_UNRESERVED].cnt[t * (k->K + 1)];
        for (int f = 1; f < ming[t] && f <= k->K; f++) frag += f * cnt[f];
    }
    return frag;
}

/* The reason a class's jobs wait, worked out now for a class the pass did
 * not reach (it stopped early, or the team was closed). */
static void late_reason(pass *p, pclass *pc, const pjob *pj)
{
    sched_reason adm;
    reason_init(&adm, SCHED_WHY_NONE);
    for (int i = 0; i < p->c->n_types; i++) {
        int t = p->st->torder[i];
        if (!(pc->types >> t & 1)) continue;
        int units = st_units_on(p->st, &pj->j, t);
        int need = units * (units < SCHED_SHARE_WHOLE ? 1 : pc->g * pc->r);
        if (!admit(p, pc->team, t, need, is_due(p, pj), &adm)) continue;
        no_fit_reason(p, pc, t, units, &pc->why);
        return;
    }
    pc->why = adm;
}

/* Why one waiting job (entry e of its class) waits. */
static void wait_reason(pass *p, pclass *pc, int e, const pjob *pj, sched_reason *why)
{
    sched_state *st = p->st;
    bool seen = pc->pgen == st->pass_gen && pc->examined;
    const sched_reason *tb = &p->tblock[pc->team];
    if (p->head_set && pc->q[e].slot == p->head_slot) {
        *why = pc->why;
        if (isfinite(p->S)) {
            reason_init(why, SCHED_WHY_RESERVED);
            why->team = pc->team;
            why->when = p->S;
        } else {
            why->code = SCHED_WHY_NODES_DOWN;
        }
        return;
    }
    if (tb->code != SCHED_WHY_NONE &&
        !((tb->code == SCHED_WHY_FIFO_BLOCKED || tb->code == SCHED_WHY_TEAM_HELD) && tb->other == pj->j.id)) {
        *why = *tb;
        return;
    }
    if (seen && e < pc->cur && p->head_set) {
        reason_init(why, SCHED_WHY_BEHIND_HEAD);
    } else {
        if (!seen && pc->late_gen != st->pass_gen) {
            late_reason(p, pc, pj);
            pc->late_gen = st->pass_gen;
        }
        *why = pc->why;
        if (p->head_set && pc->why.code == SCHED_WHY_NONE) reason_init(why, SCHED_WHY_BEHIND_HEAD);
    }
    if (why->code == SCHED_WHY_BEHIND_HEAD) {
        why->team = pc->team;
        why->other = job_at(p, p->head_slot)->id;
        why->other_name = job_at(p, p->head_slot)->name;
        why->when = p->S;
    }
}

typedef struct waiter {
    uint64_t id;
    int cls, e;
} waiter;

static int cmp_waiter(const void *a, const void *b)
{
    const waiter *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* A WAIT decision with its reason for every job that did not start, in
 * order of job id (so that the output does not depend on insertion order). */
static void wait_reasons(pass *p)
{
    sched_state *st = p->st;
    waiter *w = xmalloc((st->n_pending + 1) * sizeof *w);
    size_t n = 0;
    for (int ci = 0; ci < st->ncls; ci++) {
        const pclass *pc = &st->cls[ci];
        for (int e = 0; e < pc->n && pc->live > 0; e++) {
            const qent *q = &pc->q[e];
            if (st_qent_live(st, q) && st->pj[q->slot].start_gen != st->pass_gen)
                w[n++] = (waiter){q->id, ci, e};
        }
    }
    qsort(w, n, sizeof *w, cmp_waiter);
    for (size_t i = 0; i < n; i++) {
        pclass *pc = &st->cls[w[i].cls];
        const pjob *pj = &st->pj[pc->q[w[i].e].slot];
        sched_decision *d = res_add(p->out, SCHED_WAIT, pj->j.id, pj->j.name);
        wait_reason(p, pc, w[i].e, pj, &d->why);
    }
    free(w);
}

/* ---- undo ---- */

static void undo(pass *p)
{
    sched_state *st = p->st;
    for (int i = 0; i < p->nresv; i++) cap_set_reserved(p->k, p->resv[i], false);
    for (int i = p->nops - 1; i >= 0; i--) {
        const op *o = &p->ops[i];
        if (o->kind == OP_PREEMPT) {
            rj_retake(p, o->slot);
            continue;
        }
        const int *g = p->out->gpus + o->off;
        for (int x = 0; x < o->n; x++) cap_give(p->k, g[x], o->units, o->excl);
        int team = st->pj[o->slot].j.team;
        st_team_add(st, team, o->type, o->units * o->n, -1);
        st->tjobs[team]--;
    }
}

/* ---- the pass ---- */

static void pass_setup(pass *p, sched_state *st, double now, const double *usage,
                       const double *spent, sched_result *out)
{
    memset(p, 0, sizeof *p);
    const sched_cluster *c = st->c;
    p->st = st;
    p->c = c;
    p->k = &st->k;
    p->cfg = &st->cfg;
    p->out = out;
    p->now = now;
    p->usage = usage;
    p->spent = spent;
    p->lathe = st->cfg.policy == SCHED_LATHE;
    p->backfill = st->cfg.policy == SCHED_LATHE || st->cfg.policy == SCHED_EASY;
    p->tau = st->cfg.half_life / M_LN2;
    int T = c->n_teams, T1 = c->n_types + 1;
    p->fair = xmalloc((size_t)(T + 1) * sizeof *p->fair);
    p->tblock = xmalloc((size_t)(T + 1) * sizeof *p->tblock);
    p->hlen = xcalloc((size_t)(T + 1), sizeof *p->hlen);
    p->hoff = xcalloc((size_t)(T + 2), sizeof *p->hoff);
    p->heap = xmalloc((size_t)(st->ncls + 1) * sizeof *p->heap);
    int most = c->max_node_gpus * 64;
    for (int i = 0; i < st->ncls; i++)
        if (st->cls[i].g * st->cls[i].r > most) most = st->cls[i].g * st->cls[i].r;
    p->buf = xmalloc((size_t)(most + 1) * sizeof *p->buf);
    bool limited = false, borrowed = false;
    for (int t = 0; t < T; t++) {
        double alloc = (double)st->tused[t * T1 + T1 - 1] / SCHED_SHARE_WHOLE;
        p->fair[t] = ((usage ? usage[t] : 0) + p->tau * alloc) / c->teams[t].weight;
        reason_init(&p->tblock[t], SCHED_WHY_NONE);
        limited |= c->teams[t].limited;
        for (int ty = 0; ty < c->n_types && !borrowed; ty++) borrowed = borrowing(p, t, ty);
    }
    p->reclaim_possible = limited && borrowed;
    p->min_running_prio = INT64_MAX;
    p->drain = -1;
    if (p->lathe)
        for (int s = 0; s < st->nrj; s++)
            if (st->rj[s].alive && !st->rj[s].j.no_preempt && st->rj[s].j.priority < p->min_running_prio)
                p->min_running_prio = st->rj[s].j.priority;
}

static void pass_free(pass *p)
{
    free(p->fair);
    free(p->tblock);
    free(p->hlen);
    free(p->hoff);
    free(p->heap);
    free(p->ops);
    free(p->buf);
    free(p->resv);
    free(p->freed_at);
    free(p->released);
}

static int cmp_decision_id(const void *a, const void *b)
{
    const sched_decision *x = a, *y = b;
    return (x->job > y->job) - (x->job < y->job);
}

/* Sorts decisions [from, out->n) by job id, so that their order does not
 * depend on the order jobs were given in. */
static void sort_tail(sched_result *out, size_t from)
{
    if (out->n > from + 1) qsort(out->d + from, out->n - from, sizeof *out->d, cmp_decision_id);
}

/* Rejections first: jobs that can never run. */
static void emit_rejects(sched_state *st, sched_result *out)
{
    int o = 0;
    for (int i = 0; i < st->nrejected; i++) {
        const qent *e = &st->rejected[i];
        if (!st_qent_live(st, e)) continue;
        st->rejected[o++] = *e;
        const pjob *pj = &st->pj[e->slot];
        sched_decision *d = res_add(out, SCHED_REJECT, pj->j.id, pj->j.name);
        d->why = pj->reject_why;
    }
    st->nrejected = o;
    sort_tail(out, 0);
}

void pass_run(sched_state *st, double now, const double *usage, const double *spent,
              sched_result *out)
{
    out->n = out->n_gpus = 0;
    out->n_start = out->n_preempt = out->n_wait = out->n_reject = 0;
    out->head = 0;
    out->head_start = 0;
    out->wake_at = INFINITY;
    st->pass_gen++;
    for (int i = 0; i < st->ncls; i++) st_class_sort(st, &st->cls[i]);
    st_rorder_sort(st);
    emit_rejects(st, out);

    pass p;
    pass_setup(&p, st, now, usage, spent, out);
    for (int b = 0; b < st->nbands && !p.stop; b++) run_band(&p, b);

    out->free_gpus = p.k->v[CAP_ALL].total;
    out->frag_gpus = out->free_gpus > 0 ? fragmentation(&p) : 0;
    out->resv_free_gpus = 0;
    for (int i = 0; i < p.nresv && p.head_set; i++) out->resv_free_gpus += cap_gpu_free(p.k, CAP_ALL, p.resv[i]);
    if (p.head_set) {
        out->head = job_at(&p, p.head_slot)->id;
        out->head_start = p.S;
    }
    if (st->cfg.reasons) wait_reasons(&p);
    undo(&p);
    pass_free(&p);
    for (size_t i = 0; i < out->n; i++) {
        switch (out->d[i].action) {
        case SCHED_START: out->n_start++; break;
        case SCHED_PREEMPT: out->n_preempt++; break;
        case SCHED_WAIT: out->n_wait++; break;
        case SCHED_REJECT: out->n_reject++; break;
        }
    }
}
