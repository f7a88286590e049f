/* sim.c: event-driven replay of a trace through a scheduling policy.
 *
 * Events are arrivals (a job's submit time), completions (start + the work
 * it has left), when a team has a budget the start of each 30-day budget
 * month, and the time a waiting job will have paid for its reservation by
 * waiting (the pass's wake_at: lathe's rent-reserve rule; the server's
 * passes are periodic and need no such event). At each event time the
 * simulator applies every event of that time to a sched_state, runs one
 * scheduling pass (the same code the server runs) and applies its
 * decisions; a pass that preempted is followed by another at the same
 * time, since freed GPUs may serve more jobs.
 * Between events nothing changes, so the metrics are exact integrals.
 */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MONTH (30 * 86400.0)

/* ---- binding a trace to a cluster ---- */

/* The largest divisor of n not above most: GPUs per replica of an n-GPU job. */
static int per_replica(int n, int most)
{
    for (int g = n < most ? n : most; g > 1; g--)
        if (n % g == 0) return g;
    return 1;
}

static bool parse_int64(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end) return false;
    *out = v;
    return true;
}

static int team_index(const sim_trace *t, const sim_job *j, sched_cluster *c, diag_list *d)
{
    const char *name = j->team ? j->team : "default";
    int team = sched_cluster_find_team(c, name);
    if (team >= 0) return team;
    team = sched_cluster_add_team(c, name);
    if (j->team) {
        diag *x = diag_add(d, DIAG_WARNING, t->path, j->line, 0, "team", "team not in the cluster file");
        diag_set_found(x, "\"%s\"", name);
        diag_set_suggestion(x, "it runs without a quota; add it to the Cluster's spec.teams to give it one");
    }
    return team;
}

static bool resolve_priority(const sim_trace *t, const sim_job *j, const sched_cluster *c,
                             sched_job *s, diag_list *d)
{
    int p = -1;
    if (!j->priority) {
        p = c->default_prio;
        if (p < 0) {
            s->priority = 0;
            s->preempt_lower = true; /* PreemptLowerPriority is Kubernetes' default */
            return true;
        }
    } else if (parse_int64(j->priority, &s->priority)) {
        s->preempt_lower = true;
        for (int i = 0; i < c->n_prios; i++)
            if (c->prios[i].value == s->priority) s->preempt_lower = c->prios[i].preempt_lower;
        return true;
    } else {
        p = sched_cluster_find_priority(c, j->priority);
    }
    if (p < 0) {
        diag *x = diag_add(d, DIAG_ERROR, t->path, j->line, 0, "priority", "unknown priority class");
        diag_set_found(x, "\"%s\"", j->priority);
        const char *names[64];
        int n = 0;
        for (int i = 0; i < c->n_prios && n < 64; i++) names[n++] = c->prios[i].name;
        const char *sug = str_suggest(j->priority, names, (size_t)n);
        if (sug)
            diag_set_suggestion(x, "did you mean '%s'?", sug);
        else
            diag_set_suggestion(x, "use a priorityClasses name from the Cluster file, or an integer");
        return false;
    }
    s->priority = c->prios[p].value;
    s->preempt_lower = c->prios[p].preempt_lower;
    return true;
}

static bool resolve_type(const sim_trace *t, const sim_job *j, const sched_cluster *c, sched_job *s,
                         int *most, diag_list *d)
{
    *most = c->max_node_gpus;
    if (!j->gpu_type) return true;
    int type = sched_cluster_find_type(c, j->gpu_type);
    if (type < 0) {
        diag *x = diag_add(d, DIAG_ERROR, t->path, j->line, 0, "gpu_type", "unknown GPU type");
        diag_set_found(x, "\"%s\"", j->gpu_type);
        const char *names[SCHED_MAX_TYPES];
        for (int i = 0; i < c->n_types; i++) names[i] = c->types[i].name;
        const char *sug = str_suggest(j->gpu_type, names, (size_t)c->n_types);
        if (sug)
            diag_set_suggestion(x, "did you mean '%s'?", sug);
        else
            diag_set_suggestion(x, "use a gpuTypes name from the Cluster file, or leave it empty for any type");
        return false;
    }
    s->types = 1ull << type;
    *most = c->type_max_node[type];
    return true;
}

size_t sim_bind(const sim_trace *t, sched_cluster *c, sim_bound *out, diag_list *d)
{
    size_t errors = d->errors;
    memset(out, 0, sizeof *out);
    out->jobs = xcalloc(t->n + 1, sizeof *out->jobs);
    out->duration = xcalloc(t->n + 1, sizeof *out->duration);
    out->checkpoint = xcalloc(t->n + 1, sizeof *out->checkpoint);
    out->n = t->n;
    for (size_t i = 0; i < t->n; i++) {
        const sim_job *j = &t->jobs[i];
        sched_job *s = &out->jobs[i];
        s->id = i + 1;
        s->name = j->id;
        s->team = team_index(t, j, c, d);
        int most = 1;
        if (!resolve_priority(t, j, c, s, d) || !resolve_type(t, j, c, s, &most, d)) continue;
        if (j->fraction < 1) {
            s->replicas = s->gpus_per_replica = 1;
            s->share = (int)ceil(j->fraction * SCHED_SHARE_WHOLE);
            if (s->share < 1) s->share = 1;
        } else {
            s->gpus_per_replica = per_replica(j->gpus, most > 0 ? most : 1);
            s->replicas = j->gpus / s->gpus_per_replica;
        }
        int have = j->gpu_type ? c->type_gpus[sched_cluster_find_type(c, j->gpu_type)] : c->n_gpus;
        if (j->gpus > have) {
            if (!out->too_wide) out->too_wide_line = j->line;
            out->too_wide++;
            if (t->strict) {
                diag *x = diag_add(d, DIAG_ERROR, t->path, j->line, 0, "num_gpus", "more GPUs than the cluster has");
                diag_set_found(x, "%d, the cluster has %d%s%s", j->gpus, have, j->gpu_type ? " of type " : "",
                               j->gpu_type ? j->gpu_type : "");
                diag_set_suggestion(x, "replay on a larger cluster; without --strict it is refused and counted");
            }
        }
        s->submit_time = j->submit;
        /* a zero-second job is told 1 s: an estimate of 0 means "unknown" to the scheduler */
        s->est_duration = j->estimate > 0 ? j->estimate : j->duration > 0 ? j->duration : 1;
        if (j->estimate_is_limit && j->estimate > 0) { /* only a limit, as users write maxDuration */
            s->max_duration = j->estimate;
            s->est_duration = 0;
        }
        s->checkpoint_interval = j->checkpoint;
        out->duration[i] = j->duration;
        out->checkpoint[i] = j->checkpoint;
    }
    return d->errors - errors;
}

void sim_bound_free(sim_bound *b)
{
    free(b->jobs);
    free(b->duration);
    free(b->checkpoint);
    memset(b, 0, sizeof *b);
}

void sim_stats_free(sim_stats *s)
{
    free(s->teams);
    free(s->per_job);
    free(s->explained);
    s->teams = NULL;
    s->per_job = NULL;
    s->explained = NULL;
}

/* ---- completions: a binary heap of (time, job, generation) ---- */

typedef struct ev {
    double t;
    size_t job;
    uint32_t gen;
} ev;

typedef struct heap {
    ev *e;
    size_t n, cap;
} heap;

static bool ev_less(const ev *a, const ev *b)
{
    return a->t < b->t || (a->t == b->t && a->job < b->job);
}

static void heap_push(heap *h, ev x)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 256;
        h->e = xrealloc(h->e, h->cap * sizeof *h->e);
    }
    size_t i = h->n++;
    while (i > 0 && ev_less(&x, &h->e[(i - 1) / 2])) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = x;
}

static ev heap_pop(heap *h)
{
    ev top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const ev *best = &last;
        if (l < h->n && ev_less(&h->e[l], best)) m = l, best = &h->e[l];
        if (l + 1 < h->n && ev_less(&h->e[l + 1], best)) m = l + 1;
        if (m == i) break;
        h->e[i] = h->e[m];
        i = m;
    }
    if (h->n) h->e[i] = last;
    return top;
}

/* ---- the replay ---- */

enum { J_FUTURE, J_PENDING, J_RUNNING, J_DONE, J_REJECTED };

typedef struct jstate {
    int status;
    int preemptions;
    double first_start; /* -1 until it starts */
    uint32_t gen;
    double saved;      /* work saved by checkpoints */
    double start;      /* of the current run */
    double since;      /* pending since */
    double wait;       /* time spent pending */
    double finish;
    double units;      /* GPUs held (share-weighted) while running */
    double price;      /* money per second while running */
    int *gpus;
} jstate;

typedef struct sim {
    const sched_cluster *c;
    const sim_bound *b;
    sched_state *st;
    jstate *js;
    heap done;
    double now;
    size_t in_system;
    size_t n_pending;
    double *usage, *spent, *team_units, *team_price, *team_gs, *team_cost;
    double units, price; /* held now, all teams */
    int gpus;            /* on ready nodes */
    double frag;
    double free_whole, resv_free; /* whole GPUs free, and of those reserved, after the last pass */
    double wake;                  /* the last pass's wake_at: a pass is due then, event or not */
    bool budgets;
    char *err;
    size_t errsz;
    const sim_explain *explain;
    bool failed;
    sim_stats *out;
} sim;

/* Moves simulated time to t, integrating everything that accrues. */
static void advance(sim *s, double t)
{
    double dt = t - s->now;
    if (dt <= 0) return;
    const sched_cluster *c = s->c;
    if (s->in_system > 0) {
        s->out->busy += dt;
        s->out->frag_avg += s->frag * dt; /* divided by busy at the end */
    }
    if (s->n_pending > 0) {
        s->out->waiting += dt;
        s->out->alloc_waiting += s->units * dt; /* divided at the end */
        double shared = s->gpus - s->units - s->free_whole;
        s->out->idle_reserved += s->resv_free * dt;
        s->out->idle_shared += (shared > 0 ? shared : 0) * dt;
        s->out->idle_fragmented += s->frag * dt;
    }
    s->out->alloc_rate += s->units * dt; /* GPU-seconds for now */
    s->out->cost += s->price * dt;
    double m0 = floor(s->now / MONTH), m1 = floor(t / MONTH);
    for (int k = 0; k < c->n_teams; k++) {
        s->usage[k] = sched_usage_advance(s->usage[k], s->team_units[k], dt, 7 * 86400.0);
        s->team_gs[k] += s->team_units[k] * dt;
        s->team_cost[k] += s->team_price[k] * dt;
        s->spent[k] = m1 > m0 ? s->team_price[k] * (t - m1 * MONTH) : s->spent[k] + s->team_price[k] * dt;
    }
    s->now = t;
}

static void hold(sim *s, size_t i, double units, double price, int sign)
{
    int team = s->b->jobs[i].team;
    s->units += sign * units;
    s->price += sign * price;
    s->team_units[team] += sign * units;
    s->team_price[team] += sign * price;
}

static void finish(sim *s, size_t i)
{
    jstate *j = &s->js[i];
    const sched_job *sj = &s->b->jobs[i];
    sched_state_remove_running(s->st, sj->id);
    /* what a real scheduler learns once a job has ended: how long it ran */
    sched_state_add_finished(s->st, &(sched_finished){sj->team, sj->est_duration > 0 ? 0 : sj->max_duration,
                                                      s->b->duration[i]});
    hold(s, i, j->units, j->price, -1);
    j->status = J_DONE;
    j->finish = s->now;
    s->in_system--;
}

static void arrive(sim *s, size_t i)
{
    jstate *j = &s->js[i];
    j->status = J_PENDING;
    j->since = s->now;
    s->in_system++;
    s->n_pending++;
    sched_state_add_pending(s->st, &s->b->jobs[i]);
}

static void start(sim *s, size_t i, const sched_decision *d, const int *gpus)
{
    jstate *j = &s->js[i];
    sched_job job = s->b->jobs[i];
    sched_state_remove_pending(s->st, job.id);
    j->gpus = xrealloc(j->gpus, (size_t)d->n_gpus * sizeof *j->gpus);
    memcpy(j->gpus, gpus, (size_t)d->n_gpus * sizeof *gpus);
    job.start_time = s->now;
    job.done = j->saved;
    job.preemptions = j->preemptions;
    job.gpus = j->gpus;
    if (sched_state_add_running(s->st, &job, s->err, s->errsz) < 0) {
        s->failed = true;
        return;
    }
    s->n_pending--;
    j->status = J_RUNNING;
    j->start = s->now;
    if (j->first_start < 0) j->first_start = s->now;
    j->wait += s->now - j->since;
    /* what the job asked for, whatever it was given: a quarter-GPU job counts 0.25 also where a
     * baseline gave it a whole GPU (the rest of that GPU is idle: idle_shared) */
    int asked = job.share > 0 && job.share < SCHED_SHARE_WHOLE ? job.share : SCHED_SHARE_WHOLE;
    j->units = d->n_gpus * (d->share < asked ? d->share : asked) / 100.0;
    /* a team pays for what it holds: a whole GPU where it was given one */
    double held = d->n_gpus * (d->share < SCHED_SHARE_WHOLE ? d->share / 100.0 : 1.0);
    j->price = held * s->c->types[d->type].price_per_hour / 3600;
    hold(s, i, j->units, j->price, +1);
    heap_push(&s->done, (ev){s->now + s->b->duration[i] - j->saved, i, j->gen});
}

static void preempt(sim *s, size_t i)
{
    jstate *j = &s->js[i];
    sched_job job = s->b->jobs[i];
    double ran = s->now - j->start, ck = s->b->checkpoint[i];
    double kept = ck > 0 ? floor(ran / ck) * ck : 0;
    j->saved += kept;
    s->out->preemptions++;
    j->preemptions++;
    s->out->lost_gpu_hours += (ran - kept) * j->units / 3600;
    sched_state_remove_running(s->st, job.id);
    hold(s, i, j->units, j->price, -1);
    j->gen++; /* its completion event is void */
    j->status = J_PENDING;
    s->n_pending++;
    j->since = s->now;
    job.done = j->saved;
    job.preemptions = j->preemptions;
    sched_state_add_pending(s->st, &job);
}

/* Records what the scheduler says about the job being explained. */
static void explain(sim *s, const sched_result *res)
{
    const sim_explain *x = s->explain;
    const jstate *j = &s->js[x->job];
    sb o;
    sb_init(&o);
    sb_printf(&o, "at %.0f s (%.2f days): %s is ", s->now, s->now / 86400, s->b->jobs[x->job].name);
    for (size_t k = 0; k < res->n; k++)
        if (res->d[k].job == s->b->jobs[x->job].id) {
            static const char *const doing[] = {"starting", "preempted", "waiting", "rejected"};
            sb_printf(&o, "%s: ", doing[res->d[k].action]);
            sched_reason_format(s->c, &res->d[k].why, s->now, &o);
            break;
        }
    if (j->status == J_RUNNING) sb_printf(&o, "running since %.0f s", j->start);
    if (j->status == J_DONE) sb_printf(&o, "done at %.0f s", j->finish);
    if (j->status == J_FUTURE) sb_puts(&o, "not submitted yet");
    if (j->status == J_REJECTED) sb_puts(&o, "rejected");
    s->out->explained = sb_take(&o);
}

/* One pass and its decisions; returns the number of preemptions. */
static size_t pass(sim *s, sched_result *res)
{
    bool explaining = s->explain && !s->out->explained && s->now >= s->explain->at;
    if (explaining) sched_state_set_reasons(s->st, true);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    sched_state_pass(s->st, s->now, s->usage, s->budgets ? s->spent : NULL, res);
    s->wake = res->wake_at;
    if (explaining) {
        sched_state_set_reasons(s->st, false);
        explain(s, res);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    s->out->sched_seconds += (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    s->out->passes++;
    for (size_t k = 0; k < res->n && !s->failed; k++) {
        const sched_decision *d = &res->d[k];
        size_t i = (size_t)(d->job - 1);
        if (d->action == SCHED_START) {
            start(s, i, d, sched_decision_gpus(res, d));
        } else if (d->action == SCHED_PREEMPT) {
            preempt(s, i);
        } else if (d->action == SCHED_REJECT) {
            sched_state_remove_pending(s->st, d->job);
            s->js[i].status = J_REJECTED;
            s->in_system--;
            s->n_pending--;
            s->out->rejected++;
        }
    }
    s->frag = res->frag_gpus;
    s->free_whole = res->free_gpus;
    s->resv_free = res->resv_free_gpus;
    return res->n_preempt;
}

typedef struct arrival {
    double t;
    size_t i;
} arrival;

static int cmp_arrival(const void *a, const void *b)
{
    const arrival *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Jobs in order of arrival: submit time, then trace order. */
static arrival *arrival_order(const sim_bound *b)
{
    arrival *o = xmalloc((b->n + 1) * sizeof *o);
    for (size_t i = 0; i < b->n; i++) o[i] = (arrival){b->jobs[i].submit_time, i};
    qsort(o, b->n, sizeof *o, cmp_arrival);
    return o;
}

static double quantile(double *v, size_t n, double q)
{
    if (!n) return 0;
    size_t k = (size_t)ceil(q * (double)n);
    return v[k ? k - 1 : 0];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Completion time and wait figures, team shares, Jain's index. */
static void summarise(sim *s, double first_submit)
{
    sim_stats *o = s->out;
    const sched_cluster *c = s->c;
    size_t n = s->b->n, done = 0;
    double *jct = xmalloc((n + 1) * sizeof *jct), *wait = xmalloc((n + 1) * sizeof *wait);
    double last = first_submit, jsum = 0, wsum = 0;
    o->per_job = xcalloc(n + 1, sizeof *o->per_job);
    for (size_t i = 0; i < n; i++) {
        const jstate *j = &s->js[i];
        o->per_job[i] = (sim_job_result){j->first_start, j->status == J_DONE ? j->finish : -1, j->wait,
                                         j->preemptions, j->status == J_DONE ? 0 : j->status == J_REJECTED ? 1 : 2};
        if (j->status == J_PENDING || j->status == J_RUNNING) o->unfinished++;
        if (j->status != J_DONE) continue;
        jct[done] = j->finish - s->b->jobs[i].submit_time;
        wait[done] = j->wait;
        jsum += jct[done];
        wsum += j->wait;
        if (j->finish > last) last = j->finish;
        done++;
        sim_team_stats *ts = &o->teams[s->b->jobs[i].team];
        ts->jobs++;
        if (j->wait > ts->wait_max) ts->wait_max = j->wait;
    }
    qsort(jct, done, sizeof *jct, cmp_double);
    qsort(wait, done, sizeof *wait, cmp_double);
    o->completed = done;
    o->jct_avg = done ? jsum / (double)done : 0;
    o->jct_median = quantile(jct, done, 0.5);
    o->jct_p99 = quantile(jct, done, 0.99);
    o->wait_avg = done ? wsum / (double)done : 0;
    o->wait_p99 = quantile(wait, done, 0.99);
    o->wait_max = done ? wait[done - 1] : 0;
    o->makespan = last - first_submit;
    int gpus = sched_cluster_ready_gpus(c);
    o->alloc_rate = o->busy > 0 && gpus > 0 ? o->alloc_rate / (gpus * o->busy) : 0;
    o->alloc_waiting = o->waiting > 0 && gpus > 0 ? o->alloc_waiting / (gpus * o->waiting) : 0;
    double wcap = o->waiting > 0 && gpus > 0 ? gpus * o->waiting : 1;
    o->idle_reserved /= wcap;
    o->idle_shared /= wcap;
    o->idle_fragmented /= wcap;
    o->idle_other = o->waiting > 0 ? 1 - o->alloc_waiting - o->idle_reserved - o->idle_shared - o->idle_fragmented : 0;
    if (o->idle_other < 0) o->idle_other = 0;
    o->frag_avg = o->busy > 0 ? o->frag_avg / o->busy : 0;
    o->frag_pct = gpus > 0 ? o->frag_avg / gpus : 0;
    free(jct);
    free(wait);
    /* teams: share of quota; Jain's index over teams with a quota (else by weight) */
    double sx = 0, sxx = 0;
    int nx = 0;
    bool any_quota = false;
    for (int k = 0; k < c->n_teams; k++) {
        sim_team_stats *t = &o->teams[k];
        t->gpu_seconds = s->team_gs[k];
        t->avg_gpus = o->busy > 0 ? t->gpu_seconds / o->busy : 0;
        t->cost = s->team_cost[k];
        for (int ty = 0; ty <= c->n_types && c->teams[k].limited; ty++)
            if (c->teams[k].quota[ty] > 0) t->quota += c->teams[k].quota[ty];
        any_quota |= t->quota > 0;
    }
    for (int k = 0; k < c->n_teams; k++) {
        const sim_team_stats *t = &o->teams[k];
        if (!t->jobs || (any_quota && t->quota == 0)) continue;
        double x = any_quota ? t->avg_gpus / t->quota : t->avg_gpus / c->teams[k].weight;
        sx += x;
        sxx += x * x;
        nx++;
    }
    o->jain = nx && sxx > 0 ? sx * sx / (nx * sxx) : 1;
}

/* The next event time after now, or INFINITY. */
static double next_event(const sim *s, const arrival *arr, size_t next)
{
    double t = INFINITY;
    if (next < s->b->n) t = arr[next].t;
    if (s->done.n && s->done.e[0].t < t) t = s->done.e[0].t;
    if (s->wake > s->now && s->wake < t) t = s->wake; /* a reservation paid for by waiting */
    /* a budget month starts: blocked teams may go on */
    if (s->budgets && (s->in_system > 0 || next < s->b->n)) {
        double m = (floor(s->now / MONTH) + 1) * MONTH;
        if (m < t && (s->done.n || next < s->b->n || s->in_system > 0)) t = m;
    }
    return t;
}

static void sim_init(sim *s, const sched_cluster *c, const sim_bound *b, const sched_config *cfg,
                     sim_stats *out)
{
    memset(s, 0, sizeof *s);
    sched_config k = *cfg;
    k.reasons = false; /* the simulator reads decisions, not sentences */
    s->c = c;
    s->b = b;
    s->st = sched_state_new(c, &k);
    s->gpus = sched_cluster_ready_gpus(c);
    s->js = xcalloc(b->n + 1, sizeof *s->js);
    for (size_t i = 0; i < b->n; i++) s->js[i].first_start = -1;
    int T = c->n_teams + 1;
    s->usage = xcalloc((size_t)T, sizeof(double));
    s->spent = xcalloc((size_t)T, sizeof(double));
    s->team_units = xcalloc((size_t)T, sizeof(double));
    s->team_price = xcalloc((size_t)T, sizeof(double));
    s->team_gs = xcalloc((size_t)T, sizeof(double));
    s->team_cost = xcalloc((size_t)T, sizeof(double));
    for (int k2 = 0; k2 < c->n_teams; k2++) s->budgets |= c->teams[k2].budget > 0;
    memset(out, 0, sizeof *out);
    out->policy = cfg->policy;
    out->jobs = b->n;
    out->n_teams = c->n_teams;
    out->teams = xcalloc((size_t)T, sizeof *out->teams);
    s->out = out;
}

static void sim_free(sim *s)
{
    sched_state_free(s->st);
    for (size_t i = 0; i < s->b->n; i++) free(s->js[i].gpus);
    free(s->js);
    free(s->done.e);
    free(s->usage);
    free(s->spent);
    free(s->team_units);
    free(s->team_price);
    free(s->team_gs);
    free(s->team_cost);
}

int sim_run(const sched_cluster *c, const sim_bound *b, const sched_config *cfg,
            const sim_explain *explain, sim_stats *out, char *err, size_t errsz)
{
    sim s;
    sim_init(&s, c, b, cfg, out);
    s.err = err;
    s.errsz = errsz;
    s.explain = explain && explain->job < b->n ? explain : NULL;
    arrival *arr = arrival_order(b);
    double first = b->n ? arr[0].t : 0;
    s.now = first;
    size_t next = 0;
    sched_result res;
    sched_result_init(&res);
    for (;;) {
        double t = next_event(&s, arr, next);
        if (!isfinite(t)) break;
        advance(&s, t);
        while (s.done.n && s.done.e[0].t <= s.now) {
            ev e = heap_pop(&s.done);
            if (e.gen == s.js[e.job].gen && s.js[e.job].status == J_RUNNING) finish(&s, e.job);
        }
        while (next < b->n && arr[next].t <= s.now) arrive(&s, arr[next++].i);
        for (int rounds = 0; rounds < 4 && pass(&s, &res) > 0 && !s.failed; rounds++) {
        }
        if (s.failed) break;
        if (next >= b->n && !s.done.n && (!s.budgets || s.now > first + 10 * 365 * 86400.0)) break;
    }
    sched_result_free(&res);
    if (!s.failed) summarise(&s, first);
    free(arr);
    bool failed = s.failed;
    sim_free(&s);
    return failed ? -1 : 0;
}
