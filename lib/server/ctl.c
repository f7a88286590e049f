/* ctl.c: the controller's thread and reconcile loop (ctl.h), the view it
 * publishes for the HTTP threads, fair-share usage and monthly spending
 * kept in the store's kv table, the budget thresholds (80 %, 100 %) each
 * team reaches, and the small rules shared by its files:
 * stop reasons, retry backoff, the out-of-memory shrink. */
#include "ctl_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const double ctl_hist_bounds[SRV_HIST_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                  0.05,   0.1,   0.25,   0.5,   1,    2.5};

/* ---- small rules ---- */
const char *ctl_stop_name(ctl_stop_why w)
{
    switch (w) {
    case CTL_STOP_CANCEL: return "cancel";
    case CTL_STOP_PREEMPT: return "preempt";
    case CTL_STOP_TIMEOUT: return "timeout";
    case CTL_STOP_NONE: break;
    }
    return "";
}

ctl_stop_why ctl_stop_parse(const char *s)
{
    if (!s) return CTL_STOP_NONE;
    if (!strcmp(s, "cancel")) return CTL_STOP_CANCEL;
    if (!strcmp(s, "preempt")) return CTL_STOP_PREEMPT;
    if (!strcmp(s, "timeout")) return CTL_STOP_TIMEOUT;
    return CTL_STOP_NONE;
}

void ctl_stop_key(int64_t id, char out[32])
{
    snprintf(out, 32, "stop/%lld", (long long)id);
}

double ctl_backoff(double base, double cap, double jitter, int k, double u)
{
    if (!(base > 0)) return 0;
    double d = base * pow(2.0, k > 1 ? k - 1 : 0);
    if (cap > 0 && d > cap) d = cap;
    d *= 1.0 + jitter * (2.0 * u - 1.0);
    if (cap > 0 && d > cap) d = cap;
    return d;
}

bool ctl_oom_shrink(int micro, int accum, bool ckpt, int *new_micro, int *new_accum,
                    bool *new_ckpt, char *what, size_t whatsz)
{
    *new_micro = micro;
    *new_accum = accum;
    *new_ckpt = true;
    if (micro > 1) {
        *new_micro = micro / 2;
        /* the effective batch stays: micro x accum sequences per step */
        *new_accum = micro * accum / *new_micro;
        if (*new_micro * *new_accum != micro * accum) *new_accum = accum * 2;
    }
    if (*new_micro == micro && ckpt) {
        snprintf(what, whatsz, "micro-batch 1 with gradient checkpointing is the smallest plan");
        return false;
    }
    snprintf(what, whatsz, "micro-batch %d x %d accumulation%s -> micro-batch %d x %d accumulation, "
             "gradient checkpointing on",
             micro, accum, ckpt ? " with gradient checkpointing" : "", *new_micro, *new_accum);
    return true;
}

void ctl_hist_add(ctl_hist *h, double seconds)
{
    int b = 0;
    while (b < SRV_HIST_BUCKETS && seconds > ctl_hist_bounds[b]) b++;
    h->bucket[b]++;
    h->sum += seconds;
    h->n++;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double ctl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void ctl_log(ctl *c, const char *fmt, ...)
{
    if (c->s->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lathe server: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

char *ctl_job_dir(const ctl *c, int64_t id)
{
    return srv_job_dir(&c->s->cfg, id);
}

/* ---- fair-share usage and spending (kv) ---- */
static void month_of(double t, char out[16])
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(out, 16, "%04d-%02d", (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100);
}

/* Reads {"team": number, ...} from kv key into per-team values. */
static void load_team_values(ctl *c, const char *key, double *out, json_t **whole)
{
    const sched_cluster *sc = c->s->cluster.sched;
    char *text = NULL;
    json_t *o = NULL;
    if (store_kv_get(c->st, key, &text) == STORE_OK) o = json_loads(text, 0, NULL);
    free(text);
    json_t *teams = o ? json_object_get(o, "teams") : NULL;
    for (int t = 0; t < sc->n_teams; t++) {
        json_t *v = teams ? json_object_get(teams, sc->teams[t].name) : NULL;
        out[t] = json_is_number(v) ? json_number_value(v) : 0;
    }
    if (whole) *whole = o;
    else json_decref(o);
}

static void save_team_values(ctl *c, const char *key, const double *v, double at)
{
    const sched_cluster *sc = c->s->cluster.sched;
    json_t *teams = json_object();
    for (int t = 0; t < sc->n_teams; t++) json_object_set_new(teams, sc->teams[t].name, json_real(v[t]));
    json_t *o = json_pack("{s:f, s:o}", "at", at, "teams", teams);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text) store_kv_set(c->st, key, text);
    free(text);
}

static void load_usage(ctl *c, double now)
{
    json_t *o = NULL;
    load_team_values(c, "sched/usage", c->usage, &o);
    double at = o ? json_number_value(json_object_get(o, "at")) : 0;
    json_decref(o);
    double h = c->s->cfg.sched.half_life;
    for (int t = 0; at > 0 && now > at && t < c->s->cluster.sched->n_teams; t++)
        c->usage[t] = sched_usage_advance(c->usage[t], 0, now - at, h);
    c->usage_at = c->usage_saved_at = now;
}

/* Per-team values of a month (kv "PREFIX/YYYY-MM"), read again when the
 * month changes: *month is the month they are of. */
static void load_month(ctl *c, const char *prefix, char month[16], double *values, double now)
{
    char m[16];
    month_of(now, m);
    if (!strcmp(m, month)) return;
    memcpy(month, m, sizeof m);
    char key[40];
    snprintf(key, sizeof key, "%s/%s", prefix, m);
    load_team_values(c, key, values, NULL);
}

/* The month's spending. */
static void load_spent(ctl *c, double now)
{
    load_month(c, "spent", c->month, c->spent, now);
}

void ctl_add_spent(ctl *c, const char *team, double amount, double now)
{
    int t = sched_cluster_find_team(c->s->cluster.sched, team);
    if (t < 0 || !(amount > 0)) return;
    load_spent(c, now);
    c->spent[t] += amount;
    char key[32];
    snprintf(key, sizeof key, "spent/%s", c->month);
    save_team_values(c, key, c->spent, now);
}

/* Advances usage by the GPUs each team holds now. */
static void advance_usage(ctl *c, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    double dt = now - c->usage_at;
    if (dt <= 0) return;
    double *alloc = xcalloc((size_t)sc->n_teams + 1, sizeof *alloc);
    size_t np;
    ctl_job **placed = ctl_placed(c, &np);
    for (size_t i = 0; i < np; i++) {
        int t = placed[i]->team_index;
        if (t >= 0) alloc[t] += ctl_job_gpus_held(placed[i]);
    }
    for (int t = 0; t < sc->n_teams; t++)
        c->usage[t] = sched_usage_advance(c->usage[t], alloc[t], dt, c->s->cfg.sched.half_life);
    free(alloc);
    c->usage_at = now;
    if (now - c->usage_saved_at >= 60) {
        save_team_values(c, "sched/usage", c->usage, now);
        c->usage_saved_at = now;
    }
}

/* ---- the view ---- */
static void view_free(ctl_view *v)
{
    if (!v) return;
    for (int g = 0; g < v->n_gpus; g++) {
        for (size_t k = 0; k < v->gpus[g].n; k++) {
            free(v->gpus[g].jobs[k].name);
            free(v->gpus[g].jobs[k].team);
        }
        free(v->gpus[g].jobs);
    }
    free(v->gpus);
    free(v->in_use);
    free(v->spent);
    free(v->running);
    free(v->queued);
    for (size_t i = 0; i < v->n_waits; i++) {
        free(v->waits[i].team);
    }
    free(v->waits);
    free(v->free_by_type);
    free(v->alloc_by_type);
    free(v->queued_since);
    free(v->budget_level);
    free(v->frag_gpu);
    free(v->samples);
    for (size_t i = 0; i < v->n_job_gpu; i++) {
        free(v->job_gpu[i].name);
        free(v->job_gpu[i].team);
    }
    free(v->job_gpu);
    free(v);
}

/* Counts a queued job under its team and reason code (a string constant:
 * equal codes are almost always the same pointer). */
static void view_add_wait(ctl_view *v, const ctl_job *j)
{
    const char *reason = j->reason_code ? j->reason_code : "new";
    for (size_t i = v->n_waits; i-- > 0;) {
        const ctl_view_wait *w = &v->waits[i];
        if (w->team_index == j->team_index &&
            (w->reason == reason || !strcmp(w->reason, reason)) &&
            (j->team_index >= 0 || !strcmp(w->team, j->team))) {
            v->waits[i].n++;
            return;
        }
    }
    v->waits = xrealloc(v->waits, (v->n_waits + 1) * sizeof *v->waits);
    v->waits[v->n_waits++] = (ctl_view_wait){xstrdup(j->team), reason, j->team_index, 1};
}

static void view_add_run(ctl *c, ctl_view *v, const ctl_job *j, int team, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    if (j->cpu_slot) v->cpu_in_use++;
    for (int k = 0; k < j->n_gpus; k++) {
        int g = j->gpus[k];
        ctl_view_gpu *vg = &v->gpus[g];
        /* a shared GPU is allocated (and no longer free) once, and in use
         * once by each team with a job on it */
        bool first = vg->n == 0, team_new = true;
        for (size_t i = 0; i < vg->n; i++)
            if (!strcmp(vg->jobs[i].team, j->team)) team_new = false;
        vg->jobs = xrealloc(vg->jobs, (vg->n + 1) * sizeof *vg->jobs);
        vg->jobs[vg->n++] = (ctl_view_job){xstrdup(j->name), xstrdup(j->team), j->share};
        const sched_node *node = &sc->nodes[sc->gpu_node[g]];
        if (first && node->state == SCHED_NODE_READY) v->free_by_type[node->type]--;
        if (first) v->alloc_by_type[node->type]++;
        if (team >= 0 && team_new) v->in_use[team * v->n_types + node->type]++;
    }
    if (team >= 0 && j->h && j->n_gpus > 0)
        v->spent[team] += (now - j->run_started) / 3600.0 * ctl_job_gpus_held(j) * j->price;
}

/* The queued jobs by team and reason: counted again only when they
 * changed, else copied from the last view. */
static void view_count_queued(ctl *c, ctl_view *v)
{
    const ctl_view *old = c->view; /* only this thread replaces it */
    if (!c->waits_stale && old && old->n_teams == v->n_teams) {
        memcpy(v->queued, old->queued, (size_t)v->n_teams * sizeof *v->queued);
        memcpy(v->queued_since, old->queued_since, (size_t)v->n_teams * sizeof *v->queued_since);
        v->waits = xcalloc(old->n_waits + 1, sizeof *v->waits);
        for (size_t i = 0; i < old->n_waits; i++) {
            v->waits[i] = old->waits[i];
            v->waits[i].team = xstrdup(old->waits[i].team);
        }
        v->n_waits = old->n_waits;
        return;
    }
    c->waits_stale = false;
    for (size_t i = 0; i < c->n_jobs; i++) {
        const ctl_job *j = c->jobs[i];
        if (j->state != STORE_QUEUED) continue;
        if (j->team_index >= 0) {
            v->queued[j->team_index]++;
            double *since = &v->queued_since[j->team_index];
            if (j->queued_at > 0 && (*since == 0 || j->queued_at < *since)) *since = j->queued_at;
        }
        view_add_wait(v, j);
    }
}

static ctl_view *view_build(ctl *c, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    ctl_view *v = xcalloc(1, sizeof *v);
    v->loop_at = now;
    v->n_gpus = sc->n_gpus;
    v->gpus = xcalloc((size_t)sc->n_gpus + 1, sizeof *v->gpus);
    v->n_teams = sc->n_teams;
    v->n_types = sc->n_types;
    v->in_use = xcalloc((size_t)(sc->n_teams * sc->n_types) + 1, sizeof *v->in_use);
    v->spent = xcalloc((size_t)sc->n_teams + 1, sizeof *v->spent);
    v->running = xcalloc((size_t)sc->n_teams + 1, sizeof *v->running);
    v->queued = xcalloc((size_t)sc->n_teams + 1, sizeof *v->queued);
    v->queued_since = xcalloc((size_t)sc->n_teams + 1, sizeof *v->queued_since);
    v->budget_level = xcalloc((size_t)sc->n_teams + 1, sizeof *v->budget_level);
    v->free_by_type = xcalloc((size_t)sc->n_types + 1, sizeof *v->free_by_type);
    v->alloc_by_type = xcalloc((size_t)sc->n_types + 1, sizeof *v->alloc_by_type);
    for (int n = 0; n < sc->n_nodes; n++)
        if (sc->nodes[n].state == SCHED_NODE_READY) v->free_by_type[sc->nodes[n].type] += sc->nodes[n].n_gpus;
    memcpy(v->spent, c->spent, (size_t)sc->n_teams * sizeof *v->spent);
    view_count_queued(c, v);
    size_t n;
    ctl_job **placed = ctl_placed(c, &n);
    for (size_t i = 0; i < n; i++) {
        const ctl_job *j = placed[i];
        if (!ctl_job_holds(j)) continue;
        if (j->team_index >= 0) v->running[j->team_index]++;
        view_add_run(c, v, j, j->team_index, now);
    }
    ctl_gpu_view(c, v);
    v->frag = c->last_frag;
    v->pass_hist = c->pass_hist;
    v->loop_hist = c->loop_hist;
    v->reload_fixes = c->reload_fixes;
    v->n_active = c->n_jobs;
    return v;
}

/* ---- budgets ---- */

/* The thresholds of a team's monthly budget that make an event (job
 * events, the log, lathe_team_budget_threshold, alerts): 80 % and 100 %. */
static const double budget_thresholds[] = {0.8, 1.0};

/* Team t reached `level` of its budget: a `budget` event on every active
 * job of the team (the running ones spend it; the queued ones will wait
 * for it at 100 %), and the level kept, in one transaction. */
static void budget_reached(ctl *c, int t, double level, double spent, double now)
{
    const sched_team *tm = &c->s->cluster.sched->teams[t];
    char msg[400], key[40];
    snprintf(msg, sizeof msg, "team %s reached %.0f%% of its budget for %s: it spent %.2f of %.2f%s",
             tm->name, level * 100, c->budget_month, spent, tm->budget,
             level >= 1 ? "; its queued jobs wait until the next month or a larger budget" : "");
    json_t *data = json_pack("{s:s, s:f, s:f, s:f, s:s}", "team", tm->name, "threshold", level,
                             "spent", spent, "budget", tm->budget, "month", c->budget_month);
    char *dj = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    snprintf(key, sizeof key, "budget/%s", c->budget_month);
    store_event ev = {.actor = "controller", .type = "budget", .message = msg, .data_json = dj};
    size_t jobs = 0;
    if (store_tx_begin(c->st) == STORE_OK) {
        for (size_t i = 0; i < c->n_jobs; i++)
            if (c->jobs[i]->team_index == t && !store_state_final(c->jobs[i]->state) &&
                store_event_append(c->st, c->jobs[i]->id, &ev) == STORE_OK)
                jobs++;
        save_team_values(c, key, c->budget_level, now);
        if (store_tx_commit(c->st) != STORE_OK)
            ctl_log(c, "recording a budget threshold: %s", store_error(c->st));
    }
    free(dj);
    ctl_log(c, "%s (an event on %zu job%s)", msg, jobs, jobs == 1 ? "" : "s");
}

/* Compares each team's spending this month (the ended attempts' and the
 * running ones' so far, as the view has it) with its budget. */
static void check_budgets(ctl *c, ctl_view *v, double now)
{
    const sched_cluster *sc = c->s->cluster.sched;
    load_month(c, "budget", c->budget_month, c->budget_level, now); /* the thresholds reached */
    for (int t = 0; t < sc->n_teams && t < v->n_teams; t++) {
        double budget = sc->teams[t].budget, level = 0;
        if (!(budget > 0)) continue;
        for (size_t k = 0; k < sizeof budget_thresholds / sizeof *budget_thresholds; k++)
            if (v->spent[t] >= budget * budget_thresholds[k]) level = budget_thresholds[k];
        if (level > c->budget_level[t]) {
            c->budget_level[t] = level;
            budget_reached(c, t, level, v->spent[t], now);
        }
    }
    memcpy(v->budget_level, c->budget_level, (size_t)v->n_teams * sizeof *v->budget_level);
}

static void publish(ctl *c, double now)
{
    ctl_view *v = view_build(c, now), *old;
    check_budgets(c, v, now);
    pthread_mutex_lock(&c->view_mu);
    old = c->view;
    c->view = v;
    pthread_mutex_unlock(&c->view_mu);
    view_free(old);
}

const ctl_view *ctl_view_acquire(ctl *c)
{
    pthread_mutex_lock(&c->view_mu);
    return c->view;
}

void ctl_view_release(ctl *c)
{
    pthread_mutex_unlock(&c->view_mu);
}

/* ---- the loop ---- */

/* How often the set of active jobs is checked against the store. */
static double reload_every(const ctl *c)
{
    double t = 10 * c->s->cfg.spec->scheduler.interval;
    return t < 5 ? 5 : t;
}

static void iterate(ctl *c)
{
    double t0 = mono(), now = ctl_now();
    load_spent(c, now);
    ctl_take_changes(c);
    if (now >= c->next_reload) {
        if (!ctl_reload(c, true))
            ctl_log(c, "cannot read jobs from the store: %s", store_error(c->st));
        c->next_reload = now + reload_every(c);
    }
    ctl_poll_all(c, now);
    ctl_gpu_sample(c, now);
    ctl_reconcile(c, now);
    ctl_prune(c);
    /* an engine whose view is not current (its API unreachable) gets no
     * new work: the pass waits, what runs is polled as before */
    bool ready = exec_ready(c->be, NULL, 0);
    ctl_nodes_sync(c);
    if (ready) ctl_prepare_queued(c, 500);
    now = ctl_now();
    if (c->backoff_at > 0 && now >= c->backoff_at) c->dirty = true; /* a retry may start */
    if (ready && (c->dirty || now >= c->next_pass)) {
        c->dirty = false;
        c->next_pass = now + c->s->cfg.spec->scheduler.interval;
        ctl_pass(c, now);
        ctl_prune(c);
    }
    advance_usage(c, now);
    ctl_hist_add(&c->loop_hist, mono() - t0);
    publish(c, ctl_now());
}

/* When the loop must run next without a wake: the poll interval, the next
 * periodic pass, or the first retry whose backoff ends. */
static double next_deadline(const ctl *c, double now)
{
    double t = now + c->s->cfg.spec->poll_interval;
    if (c->next_pass < t) t = c->next_pass;
    if (c->backoff_at > now && c->backoff_at < t) t = c->backoff_at;
    return t;
}

static void *loop(void *arg)
{
    ctl *c = arg;
    thread_set_name("lathe-ctl");
    for (;;) {
        iterate(c);
        double deadline = next_deadline(c, ctl_now());
        pthread_mutex_lock(&c->mu);
        while (!c->quit && !c->wake && !c->dirty && ctl_now() < deadline) {
            double t = deadline;
            struct timespec ts = {(time_t)t, (long)((t - floor(t)) * 1e9)};
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        }
        if (c->wake) c->dirty = true;
        c->wake = false;
        bool quit = c->quit;
        pthread_mutex_unlock(&c->mu);
        if (quit) break;
    }
    return NULL;
}

void ctl_wake(ctl *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->wake = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void ctl_job_changed(ctl *c, int64_t id)
{
    ctl_jobs_changed(c, &id, 1);
}

void ctl_jobs_changed(ctl *c, const int64_t *ids, size_t n)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < n; i++) ctl_ids_push(&c->changed, &c->n_changed, &c->cap_changed, ids[i]);
    c->wake = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* ---- life ---- */
ctl *ctl_new(srv *s, char *err, size_t errsz)
{
    ctl *c = xcalloc(1, sizeof *c);
    c->s = s;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->view_mu, NULL);
    c->st = store_open(s->cfg.db_path, NULL, err, errsz);
    if (!c->st) {
        ctl_free(c);
        return NULL;
    }
    c->be = s->be; /* the server's; it outlives the controller */
    int nt = s->cluster.sched->n_teams;
    c->usage = xcalloc((size_t)nt + 1, sizeof *c->usage);
    c->spent = xcalloc((size_t)nt + 1, sizeof *c->spent);
    c->budget_level = xcalloc((size_t)nt + 1, sizeof *c->budget_level);
    double now = ctl_now();
    sim_rng_seed(&c->rng, (uint64_t)(now * 1e6) ^ ((uint64_t)getpid() << 32));
    if (!getcwd(c->cwd, sizeof c->cwd)) snprintf(c->cwd, sizeof c->cwd, "/");
    if (!s->cluster.cpu_mode) c->sched = sched_state_new(s->cluster.sched, &s->cfg.sched);
    load_usage(c, now);
    load_spent(c, now);
    ctl_gpu_open(c);
    ctl_recover(c);
    if (!ctl_reload(c, false)) ctl_log(c, "cannot read jobs from the store: %s", store_error(c->st));
    c->next_reload = now + reload_every(c);
    c->dirty = true;
    publish(c, now);
    return c;
}

int ctl_run(ctl *c, char *err, size_t errsz)
{
    int e = pthread_create(&c->thread, NULL, loop, c);
    if (e) {
        snprintf(err, errsz, "cannot start the controller's thread: %s", strerror(e));
        return LT_EXIT_INTERNAL;
    }
    c->thread_started = true;
    return LT_EXIT_OK;
}

void ctl_stop(ctl *c)
{
    if (!c || !c->thread_started) return;
    pthread_mutex_lock(&c->mu);
    c->quit = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    c->thread_started = false;
    if (c->st) save_team_values(c, "sched/usage", c->usage, ctl_now());
}

void ctl_free(ctl *c)
{
    if (!c) return;
    ctl_stop(c);
    for (size_t i = 0; i < c->n_jobs; i++) ctl_job_free(c->jobs[i]);
    free(c->jobs);
    free(c->ids);
    free(c->placed);
    free(c->changed);
    free(c->touched);
    free(c->held);
    sched_state_free(c->sched);
    free(c->node_down);
    store_close(c->st);
    free(c->usage);
    free(c->spent);
    free(c->budget_level);
    free(c->frag_need);
    ctl_gpu_close(c);
    view_free(c->view);
    pthread_mutex_destroy(&c->view_mu);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
