/* ctl_sched.c: the scheduling pass. The scheduler's incremental state
 * (sched_state, the policy code `lathe simulate` replays traces with) is
 * kept in step with the controller's set of jobs: before each pass every
 * job's entry is compared with what the state holds of it, and only the
 * jobs that changed are added, removed or replaced (queued jobs whose
 * backoff is over and whose experiment is below its maxConcurrent are
 * pending; starting, running and stopping jobs hold their GPUs). The pass
 * runs on that state, and its decisions are applied:
 *
 *   PREEMPT  the job checkpoints and stops, then returns to the queue
 *   START    an attempt is launched on the chosen GPUs; a start that needs
 *            GPUs still held by jobs being preempted waits for them
 *   WAIT     the scheduler's sentence becomes the job's wait_reason
 *   REJECT   the job can never run here: failed
 *
 * Wait reasons are written only when they change (a sentence with numbers
 * at most every 10 s; a reason with the same code is not even formatted
 * again within 10 s), all in one transaction. In CPU mode (no GPU) a
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

static bool same_code(const ctl_job *j, const char *code)
{
    return j->reason_code && (j->reason_code == code || !strcmp(j->reason_code, code));
}

bool ctl_reason_recent(const ctl_job *j, const char *code, double now)
{
    if (!same_code(j, code)) return false;
    double seen = j->reason_at > j->reason_checked ? j->reason_at : j->reason_checked;
    return now - seen < 10;
}

void ctl_set_reason(ctl *c, ctl_job *j, const char *code, const char *text, double now,
                    bool *tx)
{
    bool code_kept = same_code(j, code);
    bool same_text = j->reason && !strcmp(j->reason, text);
    j->reason_code = code;
    if (!code_kept) c->waits_stale = true; /* the view counts queued jobs by code */
    if (same_text) j->reason_checked = now;
    if (same_text || (code_kept && now - j->reason_at < 10)) return;
    if (tx && !*tx) *tx = store_tx_begin(c->st) == STORE_OK;
    store_job_update upd = {.set = STORE_SET_WAIT_REASON, .wait_reason = text};
    store_rc rc = store_job_update_fields(c->st, j->id, STORE_STATE_BIT(STORE_QUEUED), &upd, NULL);
    if (rc != STORE_OK) {
        if (rc == STORE_CONFLICT) ctl_job_stale(c, j); /* it moved meanwhile */
        return;
    }
    free(j->reason);
    j->reason = xstrdup(text);
    j->reason_at = now;
}

/* Commits the transaction ctl_set_reason opened, if it did. */
static void commit_reasons(ctl *c, bool tx)
{
    if (tx && store_tx_commit(c->st) != STORE_OK)
        ctl_log(c, "writing wait reasons: %s", store_error(c->st));
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

/* Jobs that hold GPUs or a CPU slot have an attempt under way: the placed
 * jobs are all there is to count. */
static void count_experiments(ctl *c, exp_counts *e)
{
    memset(e, 0, sizeof *e);
    size_t n;
    ctl_job **placed = ctl_placed(c, &n);
    for (size_t i = 0; i < n; i++) {
        const ctl_job *j = placed[i];
        if (ctl_job_holds(j) && j->experiment) exp_slot(e, j->team, j->experiment, true)->n++;
    }
}

/* False (with the job's reason set) when the job may not start now; *held
 * (may be NULL) says it is only held back for a while: a backoff, or its
 * experiment's limit. */
static bool eligible(ctl *c, ctl_job *j, exp_counts *ec, double now, bool *held)
{
    if (held) *held = false;
    if (j->state != STORE_QUEUED || !ctl_job_load(c, j) || j->state != STORE_QUEUED) return false;
    if (held) *held = true;
    char msg[256];
    if (j->not_before > now) {
        if (!(c->backoff_at > now) || j->not_before < c->backoff_at) c->backoff_at = j->not_before;
        if (ctl_reason_recent(j, "backoff", now)) return false;
        char when[32];
        time_t t = (time_t)j->not_before;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%H:%M:%SZ", &tm);
        snprintf(msg, sizeof msg, "retry %d of %d waits for its backoff: not before %s", j->failures,
                 j->max_retries, when);
        if (j->failures == 0) snprintf(msg, sizeof msg, "waits to start again: not before %s", when);
        ctl_set_reason(c, j, "backoff", msg, now, NULL);
        return false;
    }
    exp_count *x = j->experiment && ctl_exp_limit(c, j) > 0 ? exp_slot(ec, j->team, j->experiment, false) : NULL;
    if (x && x->n >= ctl_exp_limit(c, j)) {
        snprintf(msg, sizeof msg, "experiment %s runs its maximum of %d jobs at once", j->experiment,
                 j->exp_max);
        ctl_set_reason(c, j, "experiment", msg, now, NULL);
        return false;
    }
    if (held) *held = false;
    return true;
}

/* ---- the scheduler's state, in step with the set ---- */

/* What the scheduler should hold of job j now: nothing, or the pending or
 * running job written into *out. */
static ctl_sched_as wanted(ctl *c, ctl_job *j, exp_counts *ec, double now, bool *held,
                           sched_job *out)
{
    *held = false;
    if (j->state == STORE_QUEUED) {
        if (!eligible(c, j, ec, now, held) || !j->has_base) return CTL_SCHED_NONE;
        *out = j->base;
        out->submit_time = j->created_at;
        out->done = j->saved_work;
        out->preemptions = j->preemptions;
        return CTL_SCHED_PENDING;
    }
    if (!ctl_job_holds(j) || j->n_gpus == 0) return CTL_SCHED_NONE;
    if (!j->loaded) ctl_job_load(c, j);
    if (j->loaded && j->has_base && j->base.replicas * j->base.gpus_per_replica == j->n_gpus) {
        *out = j->base;
    } else { /* a placement the plan does not explain (after a restart): its GPUs as they are */
        srv_shape sh;
        memset(&sh, 0, sizeof sh);
        sh.replicas = 1;
        sh.per_replica = j->n_gpus;
        if (!srv_sched_job(&c->s->cluster, &sh, (uint64_t)j->id, j->name, j->team, j->priority,
                           j->priority_class, out))
            return CTL_SCHED_NONE;
    }
    out->start_time = j->run_started;
    out->done = j->saved_work;
    out->preemptions = j->preemptions;
    out->gpus = j->gpus;
    out->no_preempt = j->state != STORE_RUNNING || !j->h;
    out->submit_time = j->created_at;
    return CTL_SCHED_RUNNING;
}

/* Every field the controller sets, the GPUs by value. */
static bool same_job(const sched_job *a, const sched_job *b)
{
    int n = a->replicas * a->gpus_per_replica;
    bool same_gpus = (!a->gpus && !b->gpus) ||
                     (a->gpus && b->gpus && !memcmp(a->gpus, b->gpus, (size_t)n * sizeof *a->gpus));
    return a->id == b->id && a->team == b->team && a->priority == b->priority &&
           a->preempt_lower == b->preempt_lower && a->no_preempt == b->no_preempt &&
           a->replicas == b->replicas && a->gpus_per_replica == b->gpus_per_replica &&
           a->types == b->types && a->gpu_memory == b->gpu_memory && a->share == b->share &&
           a->exclusive == b->exclusive && a->submit_time == b->submit_time &&
           a->est_duration == b->est_duration && a->max_duration == b->max_duration &&
           a->checkpoint_interval == b->checkpoint_interval && a->done == b->done &&
           a->start_time == b->start_time && a->last_checkpoint == b->last_checkpoint &&
           a->preemptions == b->preemptions && same_gpus;
}

void ctl_sched_forget(ctl *c, ctl_job *j)
{
    if (j->in_sched == CTL_SCHED_PENDING) sched_state_remove_pending(c->sched, (uint64_t)j->id);
    else if (j->in_sched == CTL_SCHED_RUNNING) sched_state_remove_running(c->sched, (uint64_t)j->id);
    j->in_sched = CTL_SCHED_NONE;
}

/* Brings the state's entry of job j in step; returns false when it
 * already was. A job held back for a while joins ctl.held. */
static bool sync_job(ctl *c, ctl_job *j, exp_counts *ec, double now)
{
    sched_job want;
    bool held;
    ctl_sched_as as = wanted(c, j, ec, now, &held, &want);
    if (held && !j->held) {
        j->held = true;
        ctl_ids_push(&c->held, &c->n_held, &c->cap_held, j->id);
    }
    if (as == j->in_sched) {
        if (as == CTL_SCHED_NONE) return false;
        if (as == CTL_SCHED_PENDING && same_job(&j->given, &want)) return false;
        if (as == CTL_SCHED_RUNNING && same_job(sched_state_job(c->sched, (uint64_t)j->id), &want))
            return false;
    }
    ctl_sched_forget(c, j);
    char err[256];
    if (as == CTL_SCHED_PENDING && sched_state_add_pending(c->sched, &want) == 0) {
        j->in_sched = CTL_SCHED_PENDING;
        j->given = want;
    } else if (as == CTL_SCHED_RUNNING &&
               sched_state_add_running(c->sched, &want, err, sizeof err) == 0) {
        j->in_sched = CTL_SCHED_RUNNING;
    } else if (as == CTL_SCHED_RUNNING) {
        ctl_log(c, "job %s/%s: the scheduler refused its placement: %s", j->team, j->name, err);
    }
    return true;
}

/* Takes a list of ids (it becomes empty) and syncs the jobs still in the
 * set: ctl.held (held is true) or ctl.touched. */
static void sync_list(ctl *c, bool held, exp_counts *ec, double now)
{
    int64_t *list = held ? c->held : c->touched;
    size_t count = held ? c->n_held : c->n_touched;
    if (held) {
        c->held = NULL;
        c->n_held = c->cap_held = 0;
    } else {
        c->touched = NULL;
        c->n_touched = c->cap_touched = 0;
    }
    for (size_t i = 0; i < count; i++) {
        ctl_job *j = ctl_find(c, list[i]);
        if (!j) continue; /* it left the set meanwhile */
        if (held) j->held = false;
        else j->touched = false;
        sync_job(c, j, ec, now);
    }
    free(list);
}

/* Brings the scheduler's state in step before a pass: the jobs touched
 * since the last one, the jobs held back for a while, the queued jobs of an
 * experiment whose running count changed, and after a reload every job (a
 * job found out of step then, touched by no one, is a missed change: it
 * counts as a fix). *spent gets this month's money with the running
 * attempts' share so far. */
static void sync_changed(ctl *c, exp_counts *ec, double now, double *spent)
{
    if (c->exp_stale) {
        c->exp_stale = false;
        for (size_t i = 0; i < c->n_jobs; i++)
            if (c->jobs[i]->experiment && c->jobs[i]->state == STORE_QUEUED)
                ctl_job_touch(c, c->jobs[i]);
    }
    sync_list(c, true, ec, now);
    sync_list(c, false, ec, now);
    if (c->sync_all) {
        c->sync_all = false;
        for (size_t i = 0; i < c->n_jobs; i++) {
            ctl_job *j = c->jobs[i];
            if (j->held || !sync_job(c, j, ec, now)) continue;
            c->reload_fixes++;
            ctl_log(c, "consistency check: job %s/%s was out of step in the scheduler's state; "
                       "fixed", j->team, j->name);
        }
    }
    size_t n;
    ctl_job **placed = ctl_placed(c, &n);
    for (size_t i = 0; i < n; i++) {
        const ctl_job *j = placed[i];
        if (j->in_sched == CTL_SCHED_RUNNING && j->h && j->team_index >= 0)
            spent[j->team_index] += (now - j->run_started) / 3600.0 * ctl_job_gpus_held(j) * j->price;
    }
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
        j->preemptions++;
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
                                               "checkpoint and stop", now, NULL);
            continue;
        }
        exp_count *x = j->experiment && ctl_exp_limit(c, j) > 0 ? exp_slot(ec, j->team, j->experiment, true) : NULL;
        if (x && x->n >= ctl_exp_limit(c, j)) continue; /* the pass started its last slot already */
        sb why;
        sb_init(&why);
        sched_reason_format(sc, &d->why, now, &why);
        ctl_start_job(c, j, sched_decision_gpus(res, d), d->n_gpus, d->share, sb_str(&why));
        sb_free(&why);
        if (x && ctl_job_holds(j)) x->n++;
    }
}

static void apply_waits(ctl *c, const sched_result *res, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    bool tx = false;
    for (size_t i = 0; i < res->n; i++) {
        const sched_decision *d = &res->d[i];
        if (d->action != SCHED_WAIT && d->action != SCHED_REJECT) continue;
        ctl_job *j = ctl_find(c, (int64_t)d->job);
        if (!j || j->state != STORE_QUEUED) continue;
        const char *code = why_code(d->why.code);
        if (d->action == SCHED_WAIT && ctl_reason_recent(j, code, now)) continue;
        sb msg;
        sb_init(&msg);
        sched_reason_format(sc, &d->why, now, &msg);
        if (d->action == SCHED_WAIT) {
            ctl_set_reason(c, j, code, sb_str(&msg), now, &tx);
        } else {
            if (!tx) tx = store_tx_begin(c->st) == STORE_OK;
            ctl_fail_queued(c, j, "rejected", sb_str(&msg));
        }
        sb_free(&msg);
    }
    commit_reasons(c, tx);
}

static void gpu_pass(ctl *c, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    exp_counts ec;
    count_experiments(c, &ec);
    double *spent = xcalloc((size_t)sc->n_teams + 1, sizeof *spent);
    memcpy(spent, c->spent, (size_t)sc->n_teams * sizeof *spent);
    sync_changed(c, &ec, now, spent);
    sched_result res;
    sched_result_init(&res);
    double t0 = mono();
    sched_state_pass(c->sched, now, c->usage, spent, &res);
    ctl_hist_add(&c->pass_hist, mono() - t0);
    c->last_frag = res.frag_gpus;
    c->last_free_total = res.free_gpus;
    ctl_gpu_frag_need(c, &res);
    apply_preempts(c, &res, now);
    apply_starts(c, &res, &ec, now);
    apply_waits(c, &res, now);
    sched_result_free(&res);
    free(spent);
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
        else if (eligible(c, j, &ec, now, NULL)) queue[nq++] = j;
    }
    qsort(queue, nq, sizeof *queue, by_priority_then_id);
    double t0 = mono();
    bool *waits = xcalloc(nq + 1, sizeof *waits);
    for (size_t i = 0; i < nq; i++) {
        ctl_job *j = queue[i];
        exp_count *x = j->experiment && ctl_exp_limit(c, j) > 0 ? exp_slot(&ec, j->team, j->experiment, true) : NULL;
        waits[i] = true;
        if (used >= slots || (x && x->n >= ctl_exp_limit(c, j))) continue;
        ctl_start_job(c, j, NULL, 0, SCHED_SHARE_WHOLE, "a CPU slot is free");
        if (!ctl_job_holds(j)) continue;
        waits[i] = false;
        used++;
        if (x) x->n++;
    }
    bool tx = false; /* the reasons go in one transaction, after the starts */
    for (size_t i = 0; i < nq; i++) {
        if (!waits[i] || queue[i]->state != STORE_QUEUED) continue;
        char msg[160];
        snprintf(msg, sizeof msg, "all %d CPU slots are in use; %zu job%s ahead of it", slots, i,
                 i == 1 ? " is" : "s are");
        ctl_set_reason(c, queue[i], "cpu_slots", msg, now, &tx);
    }
    commit_reasons(c, tx);
    ctl_hist_add(&c->pass_hist, mono() - t0);
    free(waits);
    free(queue);
    free(ec.items);
}

void ctl_pass(ctl *c, double now)
{
    c->backoff_at = 0; /* eligible() finds the first backoff to end again */
    if (c->s->cluster.cpu_mode) cpu_pass(c, now);
    else gpu_pass(c, now);
    ctl_flush_starts(c, now); /* those of one experiment together (Slurm job arrays) */
}

/* ---- a cluster engine's nodes ---- */
/* Slurm: `scontrol show nodes` every 10 seconds; a node that is down,
 * drained or not responding takes all its GPUs out of lathe's view. */
static void slurm_nodes_sync(ctl *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    if (c->slurm_nodes_at > 0 && now - c->slurm_nodes_at < 10) return;
    c->slurm_nodes_at = now;
    exec_slurm_node *nodes;
    size_t n;
    char err[256];
    if (!exec_slurm_nodes(c->be, &nodes, &n, err, sizeof err)) {
        ctl_log(c, "Slurm nodes: %s", err);
        return;
    }
    const sched_cluster *sc = c->s->cluster.sched;
    const char *decide = c->s->cfg.spec->slurm.decide;
    bool slurm_decides = decide && strcmp(decide, "slurm") == 0;
    if (!c->node_down) c->node_down = xcalloc((size_t)sc->n_nodes + 1, sizeof *c->node_down);
    for (int i = 0; i < sc->n_nodes; i++) {
        const sched_node *sn = &sc->nodes[i];
        const exec_slurm_node *kn = NULL;
        for (size_t k = 0; k < n && !kn; k++)
            if (strcmp(nodes[k].name, sn->name) == 0) kn = &nodes[k];
        int down = kn && kn->schedulable ? (sn->n_gpus > kn->gpus ? sn->n_gpus - kn->gpus : 0)
                                         : sn->n_gpus;
        /* lathe decides: GPUs Slurm gave to jobs lathe did not submit are
         * not lathe's to place (Slurm decides: its pending reasons say so) */
        if (kn && kn->schedulable && !slurm_decides) down += kn->foreign;
        if (down > sn->n_gpus) down = sn->n_gpus;
        if (down == c->node_down[i]) continue;
        for (int g = 0; g < sn->n_gpus; g++)
            sched_state_set_gpu_down(c->sched, sn->first_gpu + g, g >= sn->n_gpus - down);
        ctl_log(c, "node %s: %d of its %d GPUs %s (%s)", sn->name, down, sn->n_gpus,
                down ? "not available" : "available again",
                !kn ? "gone from Slurm" : kn->why[0] ? kn->why : kn->foreign && down ? "held by Slurm jobs lathe did not submit" : "ready");
        c->node_down[i] = down;
        c->dirty = true;
    }
    exec_slurm_nodes_free(nodes, n);
}

void ctl_nodes_sync(ctl *c)
{
    if (c->sched && strcmp(c->be->name, "slurm") == 0) {
        slurm_nodes_sync(c);
        return;
    }
    if (!c->sched || strcmp(c->be->name, "k8s") != 0) return;
    uint64_t v = exec_k8s_nodes_version(c->be);
    if (c->node_down && v == c->nodes_version) return;
    c->nodes_version = v;
    const sched_cluster *sc = c->s->cluster.sched;
    if (!c->node_down) c->node_down = xcalloc((size_t)sc->n_nodes + 1, sizeof *c->node_down);
    exec_k8s_node *nodes;
    size_t n;
    exec_k8s_nodes(c->be, &nodes, &n);
    for (int i = 0; i < sc->n_nodes; i++) {
        const sched_node *sn = &sc->nodes[i];
        const exec_k8s_node *kn = exec_k8s_node_find(nodes, n, sn->name);
        int down = sn->n_gpus;
        const char *why = "gone from the cluster";
        if (kn && kn->schedulable) {
            down = kn->foreign + (sn->n_gpus > kn->gpus ? sn->n_gpus - kn->gpus : 0);
            if (down > sn->n_gpus) down = sn->n_gpus;
            why = "held by pods lathe did not create";
        } else if (kn) {
            why = kn->why;
        }
        if (down == c->node_down[i]) continue;
        /* the last `down` GPUs of the node: the device plugin, not lathe,
         * picks the devices, so only their number matters */
        for (int g = 0; g < sn->n_gpus; g++)
            sched_state_set_gpu_down(c->sched, sn->first_gpu + g, g >= sn->n_gpus - down);
        ctl_log(c, "node %s: %d of its %d GPUs %s (%s)", sn->name, down, sn->n_gpus,
                down ? "not available" : "available again", down ? why : "ready");
        c->node_down[i] = down;
        c->dirty = true;
    }
    exec_k8s_nodes_free(nodes, n);
}
