/* ctl_sched.c: the scheduling pass. The cached jobs become the scheduler's
 * input (queued jobs whose backoff is over and whose experiment is below
 * its maxConcurrent are pending; starting, running and stopping jobs hold
 * their GPUs), sched_decide runs the configured policy (the code `lathe
 * simulate` replays traces with), and the decisions are applied:
 *
 *   PREEMPT  the job checkpoints and stops, then returns to the queue
 *   START    an attempt is launched on the chosen GPUs; a start that needs
 *            GPUs still held by jobs being preempted waits for them
 *   WAIT     the scheduler's sentence becomes the job's wait_reason
 *   REJECT   the job can never run here: failed
 *
 * Wait reasons are written only when they change (a sentence with numbers
 * at most every 10 s), all in one transaction. In CPU mode (no GPU) a
 * simple pass gives free CPU slots to queued jobs by priority, then age.
 */
#include "ctl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *why_code(sched_why w)
{
    switch (w) {
    case SCHED_WHY_QUOTA: return "quota";
    case SCHED_WHY_POOL: return "borrowing";
    case SCHED_WHY_BUDGET: return "budget";
    case SCHED_WHY_MAX_JOBS: return "max_jobs";
    case SCHED_WHY_NO_FIT: return "no_fit";
    case SCHED_WHY_RESERVED: return "reserved";
    case SCHED_WHY_BEHIND_HEAD: return "behind_head";
    case SCHED_WHY_FIFO_BLOCKED: return "fifo_blocked";
    case SCHED_WHY_TEAM_HELD: return "team_held";
    case SCHED_WHY_NODES_DOWN: return "nodes_down";
    default: return "other";
    }
}

void ctl_set_reason(ctl *c, ctl_job *j, const char *code, const char *text, double now)
{
    bool same_code = j->reason_code && !strcmp(j->reason_code, code);
    bool same_text = j->reason && !strcmp(j->reason, text);
    if (!same_code) {
        free(j->reason_code);
        j->reason_code = xstrdup(code);
    }
    if (same_text || (same_code && now - j->reason_at < 10)) return;
    store_job_update upd = {.set = STORE_SET_WAIT_REASON, .wait_reason = text};
    if (store_job_update_fields(c->st, j->id, STORE_STATE_BIT(STORE_QUEUED), &upd, NULL) != STORE_OK)
        return;
    free(j->reason);
    j->reason = xstrdup(text);
    j->reason_at = now;
}

/* ---- experiments' running jobs ---- */
typedef struct exp_count {
    const char *team, *exp;
    int n;
} exp_count;

typedef struct exp_counts {
    exp_count *items;
    size_t n;
} exp_counts;

static exp_count *exp_slot(exp_counts *e, const char *team, const char *exp, bool add)
{
    for (size_t i = 0; i < e->n; i++)
        if (!strcmp(e->items[i].team, team) && !strcmp(e->items[i].exp, exp)) return &e->items[i];
    if (!add) return NULL;
    e->items = xrealloc(e->items, (e->n + 1) * sizeof *e->items);
    e->items[e->n] = (exp_count){team, exp, 0};
    return &e->items[e->n++];
}

static void count_experiments(const ctl *c, exp_counts *e)
{
    memset(e, 0, sizeof *e);
    for (size_t i = 0; i < c->n_jobs; i++) {
        const ctl_job *j = c->jobs[i];
        if (ctl_job_holds(j) && j->experiment) exp_slot(e, j->team, j->experiment, true)->n++;
    }
}

/* False (with the job's reason set) when the job may not start now. */
static bool eligible(ctl *c, ctl_job *j, exp_counts *ec, double now)
{
    if (j->state != STORE_QUEUED || !ctl_job_load(c, j) || j->state != STORE_QUEUED) return false;
    char msg[256];
    if (j->not_before > now) {
        char when[32];
        time_t t = (time_t)j->not_before;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%H:%M:%SZ", &tm);
        snprintf(msg, sizeof msg, "retry %d of %d waits for its backoff: not before %s", j->failures,
                 j->max_retries, when);
        if (j->failures == 0) snprintf(msg, sizeof msg, "waits to start again: not before %s", when);
        ctl_set_reason(c, j, "backoff", msg, now);
        return false;
    }
    exp_count *x = j->experiment && j->exp_max > 0 ? exp_slot(ec, j->team, j->experiment, false) : NULL;
    if (x && x->n >= j->exp_max) {
        snprintf(msg, sizeof msg, "experiment %s runs its maximum of %d jobs at once", j->experiment,
                 j->exp_max);
        ctl_set_reason(c, j, "experiment", msg, now);
        return false;
    }
    return true;
}

/* ---- the GPU pass ---- */
typedef struct pass_input {
    sched_job *pending, *running;
    size_t n_pending, n_running;
    double *spent;
} pass_input;

static void add_running(ctl *c, ctl_job *j, pass_input *in)
{
    if (j->n_gpus == 0) return;
    if (!j->loaded) ctl_job_load(c, j);
    srv_shape sh = j->shape;
    if (!j->loaded || sh.replicas * sh.per_replica != j->n_gpus) {
        memset(&sh, 0, sizeof sh);
        sh.replicas = 1;
        sh.per_replica = j->n_gpus;
    }
    sched_job *s = &in->running[in->n_running];
    if (!srv_sched_job(&c->s->cluster, &sh, (uint64_t)j->id, j->name, j->team, j->priority,
                       j->priority_class, s))
        return;
    s->start_time = j->run_started;
    s->done = j->saved_work;
    s->gpus = j->gpus;
    s->no_preempt = j->state != STORE_RUNNING || !j->h;
    s->submit_time = j->created_at;
    in->n_running++;
    int t = s->team;
    if (j->h) in->spent[t] += (ctl_now() - j->run_started) / 3600.0 * j->n_gpus * j->price;
}

static void build_input(ctl *c, exp_counts *ec, pass_input *in, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    in->pending = xcalloc(c->n_jobs + 1, sizeof *in->pending);
    in->running = xcalloc(c->n_jobs + 1, sizeof *in->running);
    in->spent = xcalloc((size_t)sc->n_teams + 1, sizeof *in->spent);
    memcpy(in->spent, c->spent, (size_t)sc->n_teams * sizeof *in->spent);
    in->n_pending = in->n_running = 0;
    for (size_t i = 0; i < c->n_jobs; i++) {
        ctl_job *j = c->jobs[i];
        if (j->state != STORE_QUEUED) {
            add_running(c, j, in);
            continue;
        }
        if (!eligible(c, j, ec, now)) continue;
        sched_job *s = &in->pending[in->n_pending];
        if (!srv_sched_job(&c->s->cluster, &j->shape, (uint64_t)j->id, j->name, j->team,
                           j->priority, j->priority_class, s))
            continue;
        s->submit_time = j->created_at;
        s->done = j->saved_work;
        in->n_pending++;
    }
}

static void observe(ctl *c, double seconds)
{
    int b = 0;
    while (b < SRV_HIST_BUCKETS && seconds > ctl_hist_bounds[b]) b++;
    c->hist[b]++;
    c->hist_sum += seconds;
    c->hist_n++;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void apply_preempts(ctl *c, const sched_result *res, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    for (size_t i = 0; i < res->n; i++) {
        const sched_decision *d = &res->d[i];
        if (d->action != SCHED_PREEMPT) continue;
        ctl_job *j = ctl_find(c, (int64_t)d->job);
        if (!j) continue;
        sb msg;
        sb_init(&msg);
        sb_puts(&msg, "preempted: ");
        sched_reason_format(sc, &d->why, now, &msg);
        sb_puts(&msg, "; it checkpoints, stops and returns to the queue");
        ctl_begin_stop(c, j, CTL_STOP_PREEMPT, sb_str(&msg), now);
        sb_free(&msg);
    }
}

static void apply_starts(ctl *c, const sched_result *res, exp_counts *ec, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    for (size_t i = 0; i < res->n; i++) {
        const sched_decision *d = &res->d[i];
        ctl_job *j = d->action == SCHED_START ? ctl_find(c, (int64_t)d->job) : NULL;
        if (!j) continue;
        if (d->why.code == SCHED_WHY_AFTER_PREEMPT) {
            ctl_set_reason(c, j, "preempting", "GPUs are being freed for it: lower-priority jobs "
                                               "checkpoint and stop", now);
            continue;
        }
        exp_count *x = j->experiment && j->exp_max > 0 ? exp_slot(ec, j->team, j->experiment, true) : NULL;
        if (x && x->n >= j->exp_max) continue; /* the pass started its last slot already */
        sb why;
        sb_init(&why);
        sched_reason_format(sc, &d->why, now, &why);
        ctl_start_job(c, j, sched_decision_gpus(res, d), d->n_gpus, sb_str(&why));
        sb_free(&why);
        if (x && ctl_job_holds(j)) x->n++;
    }
}

static void apply_waits(ctl *c, const sched_result *res, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    bool tx = store_tx_begin(c->st) == STORE_OK;
    for (size_t i = 0; i < res->n; i++) {
        const sched_decision *d = &res->d[i];
        if (d->action != SCHED_WAIT && d->action != SCHED_REJECT) continue;
        ctl_job *j = ctl_find(c, (int64_t)d->job);
        if (!j || j->state != STORE_QUEUED) continue;
        sb msg;
        sb_init(&msg);
        sched_reason_format(sc, &d->why, now, &msg);
        if (d->action == SCHED_WAIT) ctl_set_reason(c, j, why_code(d->why.code), sb_str(&msg), now);
        else ctl_fail_queued(c, j, "rejected", sb_str(&msg));
        sb_free(&msg);
    }
    if (tx && store_tx_commit(c->st) != STORE_OK)
        ctl_log(c, "writing wait reasons: %s", store_error(c->st));
}

static void gpu_pass(ctl *c, double now)
{
    exp_counts ec;
    count_experiments(c, &ec);
    pass_input in;
    build_input(c, &ec, &in, now);
    sched_input si = {.pending = in.pending, .n_pending = in.n_pending, .running = in.running,
                      .n_running = in.n_running, .usage = c->usage, .spent = in.spent, .now = now};
    sched_result res;
    sched_result_init(&res);
    char err[256];
    double t0 = mono();
    int rc = sched_decide(c->s->cluster.sched, &c->s->cfg.sched, &si, &res, err, sizeof err);
    observe(c, mono() - t0);
    if (rc != 0) {
        ctl_log(c, "the scheduler refused its input: %s", err);
    } else {
        c->last_frag = res.frag_gpus;
        c->last_free_total = res.free_gpus;
        apply_preempts(c, &res, now);
        apply_starts(c, &res, &ec, now);
        apply_waits(c, &res, now);
    }
    sched_result_free(&res);
    free(in.pending);
    free(in.running);
    free(in.spent);
    free(ec.items);
}

/* ---- the CPU pass ---- */
static int by_priority_then_id(const void *a, const void *b)
{
    const ctl_job *x = *(ctl_job *const *)a, *y = *(ctl_job *const *)b;
    if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void cpu_pass(ctl *c, double now)
{
    exp_counts ec;
    count_experiments(c, &ec);
    int slots = c->s->cluster.cpu_slots, used = 0;
    ctl_job **queue = xcalloc(c->n_jobs + 1, sizeof *queue);
    size_t nq = 0;
    for (size_t i = 0; i < c->n_jobs; i++) {
        ctl_job *j = c->jobs[i];
        if (ctl_job_holds(j)) used++;
        else if (eligible(c, j, &ec, now)) queue[nq++] = j;
    }
    qsort(queue, nq, sizeof *queue, by_priority_then_id);
    double t0 = mono();
    bool tx = false;
    for (size_t i = 0; i < nq; i++) {
        ctl_job *j = queue[i];
        exp_count *x = j->experiment && j->exp_max > 0 ? exp_slot(&ec, j->team, j->experiment, true) : NULL;
        if (used < slots && !(x && x->n >= j->exp_max)) {
            ctl_start_job(c, j, NULL, 0, "a CPU slot is free");
            if (!ctl_job_holds(j)) continue;
            used++;
            if (x) x->n++;
            continue;
        }
        if (!tx) tx = store_tx_begin(c->st) == STORE_OK;
        char msg[160];
        snprintf(msg, sizeof msg, "all %d CPU slots are in use; %zu job%s ahead of it", slots, i,
                 i == 1 ? " is" : "s are");
        ctl_set_reason(c, j, "cpu_slots", msg, now);
    }
    if (tx && store_tx_commit(c->st) != STORE_OK) ctl_log(c, "writing wait reasons: %s", store_error(c->st));
    observe(c, mono() - t0);
    free(queue);
    free(ec.items);
}

void ctl_pass(ctl *c, double now)
{
    if (c->s->cluster.cpu_mode) cpu_pass(c, now);
    else gpu_pass(c, now);
}
