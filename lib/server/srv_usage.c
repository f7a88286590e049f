/* srv_usage.c: what jobs used and cost (docs/api.md, "Cost"):
 *
 *   GET /v1/cost                  GPU-hours and money in a window of time,
 *                                 by team, experiment or job, with the
 *                                 plans' estimates beside what the jobs
 *                                 cost, each team against its budget, and
 *                                 a series by period (the console's
 *                                 burn-down)
 *   GET /v1/jobs/NAME/attempts    a job's attempts with their GPUs and cost
 *   GET /v1/jobs/NAME/gpu         a job's GPU history (NVML samples)
 *
 * Usage comes from the attempts (store_usage_list): an ended attempt's
 * recorded GPU-seconds and money, spread evenly over its run when the
 * window cuts it; a running attempt's GPUs times the time so far. Without
 * a window the sums equal the jobs' own gpu_hours and cost.
 */
#include "ctl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- GET /v1/cost ---- */

typedef enum { BY_TEAM, BY_EXPERIMENT, BY_JOB } cost_by;

typedef struct cost_query {
    cost_by by;
    double since, until, now; /* since 0 = all time; until = now when not given */
    double step;              /* seconds per period of the series; 0 = none */
    size_t n_steps;
} cost_query;

typedef struct cost_group {
    const char *team, *experiment, *job; /* borrowed from the rows */
    size_t jobs, planned_jobs;
    int64_t last_job;
    double gpu_seconds, cost;             /* in the window */
    double planned_gpu_hours, planned_cost;
    double actual_gpu_seconds, actual_cost; /* the jobs' whole life */
    double *series_gs, *series_cost;      /* [n_steps] */
} cost_group;

/* The groups, found by their key through an open-addressing hash table
 * (by=job makes one group per job: tens of thousands). */
typedef struct cost_sum {
    cost_group *g;
    size_t n, cap;
    size_t *slot; /* [nslots] group index + 1; 0 = empty */
    size_t nslots;
} cost_sum;

static bool same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static uint64_t key_hash(const char *team, const char *exp, const char *job)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    const char *parts[3] = {team, exp ? exp : "", job ? job : ""};
    for (int k = 0; k < 3; k++) {
        for (const char *p = parts[k]; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h = (h ^ 0x1f) * 1099511628211ull;
    }
    return h;
}

static bool group_is(const cost_group *g, const char *team, const char *exp, const char *job)
{
    return !strcmp(g->team, team) && same(g->experiment, exp) && same(g->job, job);
}

static void rehash(cost_sum *s)
{
    free(s->slot);
    s->nslots = s->nslots ? s->nslots * 2 : 64;
    s->slot = xcalloc(s->nslots, sizeof *s->slot);
    for (size_t i = 0; i < s->n; i++) {
        size_t k = key_hash(s->g[i].team, s->g[i].experiment, s->g[i].job) & (s->nslots - 1);
        while (s->slot[k]) k = (k + 1) & (s->nslots - 1);
        s->slot[k] = i + 1;
    }
}

static cost_group *group_of(cost_sum *s, const cost_query *q, const store_usage_row *r)
{
    const char *exp = q->by == BY_TEAM ? NULL : r->experiment;
    const char *job = q->by == BY_JOB ? r->name : NULL;
    if (2 * (s->n + 1) > s->nslots) rehash(s);
    size_t k = key_hash(r->team, exp, job) & (s->nslots - 1);
    for (; s->slot[k]; k = (k + 1) & (s->nslots - 1))
        if (group_is(&s->g[s->slot[k] - 1], r->team, exp, job)) return &s->g[s->slot[k] - 1];
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->g = xrealloc(s->g, s->cap * sizeof *s->g);
    }
    s->slot[k] = s->n + 1;
    cost_group *g = &s->g[s->n++];
    memset(g, 0, sizeof *g);
    g->team = r->team;
    g->experiment = exp;
    g->job = job;
    g->last_job = -1;
    if (q->n_steps) {
        g->series_gs = xcalloc(q->n_steps, sizeof *g->series_gs);
        g->series_cost = xcalloc(q->n_steps, sizeof *g->series_cost);
    }
    return g;
}

/* Spreads gs and cost evenly over [a, b] into the series' periods. */
static void spread(const cost_query *q, cost_group *g, double a, double b, double gs, double cost)
{
    if (!q->n_steps || !(b > a)) return;
    for (size_t k = 0; k < q->n_steps; k++) {
        double lo = q->since + (double)k * q->step, hi = lo + q->step;
        double o = (b < hi ? b : hi) - (a > lo ? a : lo);
        if (o <= 0) continue;
        g->series_gs[k] += gs * o / (b - a);
        g->series_cost[k] += cost * o / (b - a);
    }
}

static void add_row(cost_sum *s, const cost_query *q, const store_usage_row *r)
{
    cost_group *g = group_of(s, q, r);
    bool open = !(r->ended_at > 0);
    double end = open ? q->now : r->ended_at, a = r->started_at > q->since ? r->started_at : q->since;
    double b = end < q->until ? end : q->until;
    double live_gs = open && q->now > r->started_at ? (q->now - r->started_at) * r->gpus : 0;
    if (g->last_job != r->job_id) { /* the job's first row in this group */
        g->last_job = r->job_id;
        g->jobs++;
        g->actual_gpu_seconds += r->job_gpu_seconds;
        g->actual_cost += r->job_cost;
        if (!isnan(r->planned_cost)) {
            g->planned_jobs++;
            g->planned_cost += r->planned_cost;
            g->planned_gpu_hours += isnan(r->planned_gpu_hours) ? 0 : r->planned_gpu_hours;
        }
    }
    g->actual_gpu_seconds += live_gs;
    g->actual_cost += live_gs / 3600.0 * r->price;
    if (!(b > a)) return;
    double gs, cost;
    if (!open && !isnan(r->gpu_seconds)) { /* what it recorded, cut to the window */
        double dur = end - r->started_at, frac = dur > 0 ? (b - a) / dur : 1;
        gs = r->gpu_seconds * frac;
        cost = (isnan(r->cost) ? r->gpu_seconds / 3600.0 * r->price : r->cost) * frac;
    } else {
        gs = (b - a) * r->gpus;
        cost = gs / 3600.0 * r->price;
    }
    g->gpu_seconds += gs;
    g->cost += cost;
    spread(q, g, a, b, gs, cost);
}

static json_t *num_or_null(double v, bool known)
{
    return known && isfinite(v) ? json_real(v) : json_null();
}

/* The figures of a group (or of the total). */
static json_t *figures(const cost_group *g)
{
    return json_pack("{s:I, s:f, s:f, s:o, s:o, s:I, s:f, s:f}", "jobs", (json_int_t)g->jobs,
                     "gpu_hours", g->gpu_seconds / 3600.0, "cost", g->cost, "planned_gpu_hours",
                     num_or_null(g->planned_gpu_hours, g->planned_jobs > 0), "planned_cost",
                     num_or_null(g->planned_cost, g->planned_jobs > 0), "planned_jobs",
                     (json_int_t)g->planned_jobs, "actual_gpu_hours",
                     g->actual_gpu_seconds / 3600.0, "actual_cost", g->actual_cost);
}

static json_t *series_json(const cost_query *q, const cost_group *g)
{
    json_t *a = json_array();
    for (size_t k = 0; k < q->n_steps; k++)
        json_array_append_new(a, json_pack("{s:o, s:f, s:f}", "at",
                                           srv_json_time(q->since + (double)k * q->step),
                                           "gpu_hours", g->series_gs[k] / 3600.0, "cost",
                                           g->series_cost[k]));
    return a;
}

/* A team's budget figures from the controller's view. */
static void add_budget(srv *s, json_t *item, const char *team)
{
    const sched_cluster *c = s->cluster.sched;
    int t = sched_cluster_find_team(c, team);
    if (t < 0) return;
    const ctl_view *v = ctl_view_acquire(s->ctl);
    double spent = v && t < v->n_teams ? v->spent[t] : 0;
    double level = v && t < v->n_teams ? v->budget_level[t] : 0;
    ctl_view_release(s->ctl);
    double budget = c->teams[t].budget;
    json_object_set_new(item, "budget_per_month", budget > 0 ? json_real(budget) : json_null());
    json_object_set_new(item, "spent_this_month", json_real(spent));
    json_object_set_new(item, "budget_used", budget > 0 ? json_real(spent / budget) : json_null());
    json_object_set_new(item, "budget_threshold", json_real(level));
}

static bool cost_params(srv_req *r, cost_query *q)
{
    memset(q, 0, sizeof *q);
    q->now = wall_now();
    q->until = q->now;
    const char *by = srv_req_query(r, "by"), *since = srv_req_query(r, "since"),
               *until = srv_req_query(r, "until"), *step = srv_req_query(r, "step");
    if (!by || !strcmp(by, "team")) q->by = BY_TEAM;
    else if (!strcmp(by, "experiment")) q->by = BY_EXPERIMENT;
    else if (!strcmp(by, "job")) q->by = BY_JOB;
    else {
        srv_reply_error(r, 400, "bad_request", "by=%s: expected team, experiment or job", by);
        return false;
    }
    if (since && *since && !srv_parse_time(since, &q->since)) {
        srv_reply_error(r, 400, "bad_request",
                        "since=%s: expected a time such as 2026-12-01T00:00:00Z or seconds since "
                        "the epoch", since);
        return false;
    }
    if (until && *until && !srv_parse_time(until, &q->until)) {
        srv_reply_error(r, 400, "bad_request", "until=%s: expected a time", until);
        return false;
    }
    if (until && *until && q->until <= q->since) {
        srv_reply_error(r, 400, "bad_request", "until must come after since");
        return false;
    }
    if (q->until < q->since) q->until = q->since; /* a window that starts later: empty */
    if (step && *step) {
        double d;
        if (!units_parse_duration(step, &d) || d < 60) {
            srv_reply_error(r, 400, "bad_request",
                            "step=%s: expected a duration of at least 1m (1h, 1d)", step);
            return false;
        }
        if (!(q->since > 0)) {
            srv_reply_error(r, 400, "bad_request", "step needs since (where the series starts)");
            return false;
        }
        q->step = d;
        double n = ceil((q->until - q->since) / d);
        if (n > 1000) {
            srv_reply_error(r, 400, "bad_request",
                            "step=%s makes %.0f periods between since and until: at most 1000",
                            step, n);
            return false;
        }
        q->n_steps = (size_t)n;
    }
    return true;
}

static int by_money(const void *a, const void *b)
{
    const cost_group *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    int c = strcmp(x->team, y->team);
    if (c) return c;
    c = strcmp(x->experiment ? x->experiment : "", y->experiment ? y->experiment : "");
    return c ? c : strcmp(x->job ? x->job : "", y->job ? y->job : "");
}

void srv_api_cost(srv_req *r)
{
    srv *s = srv_req_server(r);
    cost_query q;
    if (!cost_params(r, &q)) return;
    const char *team = srv_req_team(r);
    store_usage_row *rows;
    size_t n;
    if (store_usage_list(srv_req_store(r), team, q.since, q.until, &rows, &n) != STORE_OK) {
        srv_reply_store_error(r, "reading usage");
        return;
    }
    cost_sum sum = {0};
    for (size_t i = 0; i < n; i++) add_row(&sum, &q, &rows[i]);
    if (sum.n > 1) qsort(sum.g, sum.n, sizeof *sum.g, by_money);
    cost_group total = {.last_job = -1};
    if (q.n_steps) {
        total.series_gs = xcalloc(q.n_steps, sizeof *total.series_gs);
        total.series_cost = xcalloc(q.n_steps, sizeof *total.series_cost);
    }
    json_t *items = json_array();
    for (size_t i = 0; i < sum.n; i++) {
        cost_group *g = &sum.g[i];
        json_t *o = figures(g);
        json_object_set_new(o, "team", json_string(g->team));
        if (q.by != BY_TEAM) json_object_set_new(o, "experiment", srv_json_str(g->experiment));
        if (q.by == BY_JOB) json_object_set_new(o, "job", json_string(g->job));
        if (q.by == BY_TEAM) add_budget(s, o, g->team);
        if (q.n_steps) json_object_set_new(o, "series", series_json(&q, g));
        json_array_append_new(items, o);
        total.jobs += g->jobs;
        total.planned_jobs += g->planned_jobs;
        total.gpu_seconds += g->gpu_seconds;
        total.cost += g->cost;
        total.planned_gpu_hours += g->planned_gpu_hours;
        total.planned_cost += g->planned_cost;
        total.actual_gpu_seconds += g->actual_gpu_seconds;
        total.actual_cost += g->actual_cost;
        for (size_t k = 0; k < q.n_steps; k++) {
            total.series_gs[k] += g->series_gs[k];
            total.series_cost[k] += g->series_cost[k];
        }
        free(g->series_gs);
        free(g->series_cost);
    }
    json_t *tot = figures(&total);
    if (q.n_steps) json_object_set_new(tot, "series", series_json(&q, &total));
    static const char *const by_names[] = {"team", "experiment", "job"};
    json_t *body = json_pack("{s:s, s:o, s:o, s:o, s:o}", "by", by_names[q.by], "since",
                             q.since > 0 ? srv_json_time(q.since) : json_null(), "until",
                             srv_json_time(q.until), "items", items, "total", tot);
    if (q.n_steps) json_object_set_new(body, "step_seconds", json_real(q.step));
    free(total.series_gs);
    free(total.series_cost);
    free(sum.g);
    free(sum.slot);
    store_usage_free(rows, n);
    srv_reply_json(r, 200, body);
}

/* ---- GET /v1/jobs/NAME/attempts ---- */

void srv_api_job_attempts(srv_req *r, const char *name)
{
    store_job j;
    if (!srv_find_job(r, name, &j)) return;
    store_attempt_list l;
    if (store_attempts_list(srv_req_store(r), j.id, &l) != STORE_OK) {
        store_job_clear(&j);
        srv_reply_store_error(r, "reading attempts");
        return;
    }
    double now = wall_now();
    json_t *items = json_array();
    for (size_t i = 0; i < l.n; i++) {
        const store_attempt *a = &l.items[i];
        bool open = !(a->ended_at > 0);
        double gpus = isnan(a->gpus) ? 0 : a->gpus, gs = a->gpu_seconds, cost = a->cost;
        if (open && a->started_at > 0 && !isnan(a->gpus)) { /* so far */
            gs = (now - a->started_at) * gpus;
            cost = isnan(a->price) ? NAN : gs / 3600.0 * a->price;
        }
        json_t *o = json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "number", a->number,
                              "started_at", srv_json_time(a->started_at), "ended_at",
                              srv_json_time(a->ended_at), "node", srv_json_str(a->node), "gpus",
                              srv_json_parse(a->gpus_json), "gpus_held", srv_json_num(a->gpus),
                              "price_per_gpu_hour", srv_json_num(a->price), "gpu_hours",
                              srv_json_num(gs / 3600.0), "cost", srv_json_num(cost));
        json_object_set_new(o, "exit_code", a->exit_code >= 0 ? json_integer(a->exit_code) : json_null());
        json_object_set_new(o, "signal", a->exit_signal ? json_integer(a->exit_signal) : json_null());
        json_object_set_new(o, "reason", srv_json_str(a->reason));
        json_object_set_new(o, "executor", srv_json_str(a->executor));
        json_array_append_new(items, o);
    }
    store_attempt_list_free(&l);
    store_job_clear(&j);
    srv_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

/* ---- GET /v1/jobs/NAME/gpu ---- */

json_t *srv_job_gpu_summary(store *st, const store_job *j)
{
    store_gpu_summary g;
    if (store_gpu_summary_get(st, j->id, &g) != STORE_OK || g.samples == 0) return json_null();
    json_t *plan = srv_json_parse(j->plan_json);
    json_t *gib = json_object_get(plan, "per_gpu_gib");
    double planned = json_is_number(gib) ? json_number_value(gib) * GIB : NAN;
    json_decref(plan);
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "samples", (json_int_t)g.samples,
                     "util_avg", srv_json_num(g.util_avg), "memory_peak",
                     srv_json_num(g.mem_peak), "memory_planned", srv_json_num(planned),
                     "power_avg", srv_json_num(g.power_avg), "first_at",
                     srv_json_time(g.first_at), "last_at", srv_json_time(g.last_at));
}

void srv_api_job_gpu(srv_req *r, const char *name)
{
    long limit = 1000;
    const char *v = srv_req_query(r, "limit");
    if (v) {
        char *end;
        limit = strtol(v, &end, 10);
        if (*end || end == v || limit < 1 || limit > 10000) {
            srv_reply_error(r, 400, "bad_request", "limit=%s: expected a number from 1 to 10000", v);
            return;
        }
    }
    store_job j;
    if (!srv_find_job(r, name, &j)) return;
    store_gpu_sample *x;
    size_t n;
    if (store_gpu_samples_list(srv_req_store(r), j.id, (size_t)limit, &x, &n) != STORE_OK) {
        store_job_clear(&j);
        srv_reply_store_error(r, "reading GPU samples");
        return;
    }
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(
            items, json_pack("{s:o, s:i, s:i, s:o, s:o, s:o, s:o, s:o}", "at", srv_json_time(x[i].at),
                             "attempt", x[i].attempt, "gpus", x[i].gpus, "util",
                             srv_json_num(x[i].util), "memory_used", srv_json_num(x[i].mem_used),
                             "memory_total", srv_json_num(x[i].mem_total), "power",
                             srv_json_num(x[i].power), "temperature", srv_json_num(x[i].temp)));
    free(x);
    json_t *body = json_pack("{s:o, s:o}", "items", items, "summary",
                             srv_job_gpu_summary(srv_req_store(r), &j));
    store_job_clear(&j);
    srv_reply_json(r, 200, body);
}
