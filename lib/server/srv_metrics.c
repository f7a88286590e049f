/* srv_metrics.c: /metrics in the Prometheus text exposition format 0.0.4,
 * /healthz and /readyz, and the request counters they read.
 *
 *   lathe_up                                  1
 *   lathe_jobs{state}                         jobs by state (the store's counts)
 *   lathe_queue_length{team,reason}           queued jobs by team and wait reason code
 *   lathe_gpus{state,gpu_type}                allocated / free by type; fragmented ("*")
 *   lathe_cpu_slots{state}                    CPU mode: in use / free
 *   lathe_job_loss{job,team}                  latest loss of each running job
 *   lathe_job_tokens_per_second{job,team}
 *   lathe_job_eval_loss{job,team}             latest eval loss of each running job
 *   lathe_job_best_eval_loss{job,team}        its lowest eval loss so far
 *   lathe_scheduling_pass_seconds             histogram of pass durations
 *   lathe_controller_loop_seconds             histogram of the controller's turns
 *   lathe_controller_active_jobs              jobs in the controller's set
 *   lathe_controller_reload_fixes_total       what its consistency checks had to fix
 *   lathe_http_requests_total{method,code}
 *   lathe_http_rate_limited_total{token}    (srv_ratelimit.c)
 *   lathe_http_write_commits_total            transactions of the HTTP writes (group commit)
 *   lathe_http_writes_total                   writes in them (the ratio: writes per flush)
 *   lathe_http_write_batch_max                the most writes one transaction held
 *   lathe_job_step{job,team}                  latest step of each running job
 *   lathe_job_last_progress_timestamp_seconds{job,team}  its last progress (or start)
 *   lathe_job_gpu_utilization_avg_percent{job,team}  its GPUs' mean utilisation so far
 *   lathe_job_gpu_memory_peak_bytes{job,team}  the most memory one of its GPUs used
 *   lathe_job_gpu_memory_planned_bytes{job,team}  the plan's memory per GPU
 *   lathe_team_gpus_in_use{team,gpu_type}     GPUs held by the team's jobs
 *   lathe_team_gpu_quota{team,gpu_type}       its quota (teams with one)
 *   lathe_team_budget{team}                   money per month (teams with a budget)
 *   lathe_team_spent_this_month{team}         spent this month, running attempts included
 *   lathe_team_budget_used_ratio{team}        spent / budget
 *   lathe_team_budget_threshold{team}         0, 0.8 or 1: the threshold reached this month
 *   lathe_queue_oldest_wait_seconds{team}     how long its longest-waiting job has waited
 *   DCGM_FI_DEV_*{gpu,UUID,device,modelName,Hostname,job,team}  NVML's figures of
 *                                             this machine's GPUs (lib/monitor/monitor.h)
 */
#include "ctl.h"
#include "monitor/monitor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- request counters ---- */
void srv_counters_init(srv_counters *c)
{
    pthread_mutex_init(&c->mu, NULL);
    c->items = NULL;
    c->n = c->cap = 0;
}

void srv_counters_add(srv_counters *c, const char *method, int code)
{
    char m[8];
    snprintf(m, sizeof m, "%s", method && strlen(method) < sizeof m ? method : "OTHER");
    pthread_mutex_lock(&c->mu);
    size_t i = 0;
    while (i < c->n && (c->items[i].code != code || strcmp(c->items[i].method, m) != 0)) i++;
    if (i == c->n) {
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 16;
            c->items = xrealloc(c->items, c->cap * sizeof *c->items);
        }
        memset(&c->items[i], 0, sizeof c->items[i]);
        snprintf(c->items[i].method, sizeof c->items[i].method, "%s", m);
        c->items[i].code = code;
        c->n++;
    }
    c->items[i].n++;
    pthread_mutex_unlock(&c->mu);
}

void srv_counters_free(srv_counters *c)
{
    free(c->items);
    pthread_mutex_destroy(&c->mu);
}

/* ---- exposition ---- */

/* A label value with \, " and newline escaped. */
static void label(sb *out, const char *v)
{
    for (; v && *v; v++) {
        if (*v == '\\' || *v == '"') sb_putc(out, '\\'), sb_putc(out, *v);
        else if (*v == '\n') sb_puts(out, "\\n");
        else sb_putc(out, *v);
    }
}

static void head(sb *out, const char *name, const char *type, const char *help)
{
    sb_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void job_counts(store *st, sb *out)
{
    store_count_list l = {0};
    head(out, "lathe_jobs", "gauge", "Jobs by state.");
    if (store_count_jobs(st, STORE_GROUP_NONE, NULL, &l) == STORE_OK && l.n == 1)
        for (int s = 0; s < STORE_N_STATES; s++)
            sb_printf(out, "lathe_jobs{state=\"%s\"} %lld\n", store_state_name((store_state)s),
                      (long long)l.items[0].by_state[s]);
    store_count_list_free(&l);
}

/* A gauge per job of its latest (or best) eval loss, for the jobs that have
 * one. */
static void job_gauge(sb *out, const store_job_list *l, const char *name, const char *help, bool best)
{
    head(out, name, "gauge", help);
    for (size_t i = 0; i < l->n; i++) {
        double v = best ? l->items[i].best_eval_loss : l->items[i].eval_loss;
        if (!isfinite(v)) continue;
        sb_printf(out, "%s{job=\"", name);
        label(out, l->items[i].name);
        sb_puts(out, "\",team=\"");
        label(out, l->items[i].team);
        sb_printf(out, "\"} %.9g\n", v);
    }
}

/* NAME{job="J",team="T"} (the value follows). */
static void job_labels(sb *out, const char *name, const store_job *j)
{
    sb_printf(out, "%s{job=\"", name);
    label(out, j->name);
    sb_puts(out, "\",team=\"");
    label(out, j->team);
    sb_puts(out, "\"}");
}

static void running_jobs(store *st, sb *out)
{
    store_job_filter f = {.states = STORE_STATE_BIT(STORE_RUNNING), .summary = true};
    store_job_list l = {0};
    if (store_jobs_list(st, &f, &l) != STORE_OK) return;
    head(out, "lathe_job_loss", "gauge", "Latest training loss of each running job.");
    for (size_t i = 0; i < l.n; i++) {
        if (!isfinite(l.items[i].progress.loss)) continue;
        sb_puts(out, "lathe_job_loss{job=\"");
        label(out, l.items[i].name);
        sb_puts(out, "\",team=\"");
        label(out, l.items[i].team);
        sb_printf(out, "\"} %.9g\n", l.items[i].progress.loss);
    }
    head(out, "lathe_job_tokens_per_second", "gauge", "Training throughput of each running job.");
    for (size_t i = 0; i < l.n; i++) {
        if (!isfinite(l.items[i].progress.tokens_per_second)) continue;
        sb_puts(out, "lathe_job_tokens_per_second{job=\"");
        label(out, l.items[i].name);
        sb_puts(out, "\",team=\"");
        label(out, l.items[i].team);
        sb_printf(out, "\"} %.9g\n", l.items[i].progress.tokens_per_second);
    }
    job_gauge(out, &l, "lathe_job_eval_loss", "Latest eval loss of each running job.", false);
    job_gauge(out, &l, "lathe_job_best_eval_loss", "Lowest eval loss so far of each running job.",
              true);
    head(out, MON_JOB_STEP, "gauge", "Latest optimizer step of each running job.");
    for (size_t i = 0; i < l.n; i++) {
        if (l.items[i].progress.step < 0) continue;
        job_labels(out, MON_JOB_STEP, &l.items[i]);
        sb_printf(out, " %lld\n", (long long)l.items[i].progress.step);
    }
    head(out, MON_JOB_LAST_PROGRESS, "gauge",
         "When each running job last reported progress (its start before its first report).");
    for (size_t i = 0; i < l.n; i++) {
        const store_job *j = &l.items[i];
        double at = j->progress.step >= 0 && j->progress.at > 0 ? j->progress.at : j->started_at;
        if (!(at > 0)) continue;
        job_labels(out, MON_JOB_LAST_PROGRESS, j);
        sb_printf(out, " %.3f\n", at);
    }
    store_job_list_free(&l);
}

/* ---- GPUs, jobs' GPU figures, teams and budgets (the controller's view) ---- */

/* gpu, UUID, device, modelName, Hostname, job, team of GPU g (DCGM
 * exporter's labels, plus lathe's job and team). */
static void dcgm_labels(const srv *s, const ctl_view *v, int g, sb *out)
{
    const sched_cluster *c = s->cluster.sched;
    const sched_node *n = &c->nodes[c->gpu_node[g]];
    const srv_gpu *sg = &s->cluster.gpus[g];
    const exec_gpu_sample *x = &v->samples[g];
    sb_printf(out, "{gpu=\"%d\",UUID=\"", g - n->first_gpu);
    label(out, sg->id);
    sb_printf(out, "\",device=\"nvidia%d\",modelName=\"", x->minor >= 0 ? x->minor : g - n->first_gpu);
    label(out, sg->model ? sg->model : c->types[n->type].name);
    sb_puts(out, "\",Hostname=\"");
    label(out, n->name);
    const ctl_view_gpu *vg = g < v->n_gpus ? &v->gpus[g] : NULL;
    for (int pass = 0; pass < 2; pass++) {
        sb_puts(out, pass ? "\",team=\"" : "\",job=\"");
        for (size_t k = 0; vg && k < vg->n; k++) {
            if (k) sb_putc(out, ',');
            label(out, pass ? vg->jobs[k].team : vg->jobs[k].name);
        }
    }
    sb_puts(out, "\"}");
}

static double dcgm_value(const exec_gpu_sample *x, mon_dcgm f)
{
    const double mib = 1024.0 * 1024.0;
    switch (f) {
    case MON_GPU_UTIL: return x->util;
    case MON_MEM_COPY_UTIL: return x->mem_util;
    case MON_FB_USED: return x->mem_used / mib;
    case MON_FB_FREE: return x->mem_total - x->mem_used >= 0 ? (x->mem_total - x->mem_used) / mib : NAN;
    case MON_POWER_USAGE: return x->power;
    case MON_GPU_TEMP: return x->temp;
    case MON_SM_CLOCK: return x->sm_clock;
    case MON_ENERGY: return x->energy * 1000.0;
    case MON_N_DCGM: break;
    }
    return NAN;
}

static void dcgm_metrics(const srv *s, const ctl_view *v, sb *out)
{
    if (!v || !v->samples) return;
    int n = s->cluster.sched->n_gpus;
    sb *labels = xcalloc((size_t)n + 1, sizeof *labels);
    for (int g = 0; g < n; g++) {
        sb_init(&labels[g]);
        if (v->samples[g].ok) dcgm_labels(s, v, g, &labels[g]);
    }
    for (int f = 0; f < MON_N_DCGM; f++) {
        const mon_field *m = &mon_dcgm_fields[f];
        head(out, m->name, m->type, m->help);
        for (int g = 0; g < n; g++) {
            double x = v->samples[g].ok ? dcgm_value(&v->samples[g], (mon_dcgm)f) : NAN;
            if (isfinite(x)) sb_printf(out, "%s%s %.9g\n", m->name, sb_str(&labels[g]), x);
        }
    }
    for (int g = 0; g < n; g++) sb_free(&labels[g]);
    free(labels);
}

static void job_gpu_metric(sb *out, const ctl_view *v, const char *name, const char *help, int which)
{
    head(out, name, "gauge", help);
    for (size_t i = 0; v && i < v->n_job_gpu; i++) {
        const ctl_view_job_gpu *j = &v->job_gpu[i];
        double x = which == 0 ? j->util_avg : which == 1 ? j->mem_peak : j->mem_planned;
        if (!isfinite(x)) continue;
        sb_printf(out, "%s{job=\"", name);
        label(out, j->name);
        sb_puts(out, "\",team=\"");
        label(out, j->team);
        sb_printf(out, "\"} %.9g\n", x);
    }
}

/* A per-team gauge line: NAME{team="T"} value. */
static void team_line(sb *out, const char *name, const char *team, double x)
{
    sb_printf(out, "%s{team=\"", name);
    label(out, team);
    sb_printf(out, "\"} %.9g\n", x);
}

static void team_metrics(const srv *s, const ctl_view *v, sb *out)
{
    const sched_cluster *c = s->cluster.sched;
    bool ok = v && v->n_teams == c->n_teams;
    head(out, MON_TEAM_GPUS_IN_USE, "gauge", "GPUs held by each team's jobs, by type.");
    for (int t = 0; ok && t < c->n_teams; t++)
        for (int y = 0; y < c->n_types && y < v->n_types; y++) {
            sb_printf(out, "%s{team=\"", MON_TEAM_GPUS_IN_USE);
            label(out, c->teams[t].name);
            sb_puts(out, "\",gpu_type=\"");
            label(out, c->types[y].name);
            sb_printf(out, "\"} %d\n", v->in_use[t * v->n_types + y]);
        }
    head(out, MON_TEAM_GPU_QUOTA, "gauge", "Each team's GPU quota by type (teams with one).");
    for (int t = 0; t < c->n_teams; t++) {
        const sched_team *tm = &c->teams[t];
        for (int y = 0; tm->limited && y < c->n_types; y++) {
            int q = tm->quota[y] != SCHED_UNLIMITED ? tm->quota[y] : tm->quota[c->n_types];
            if (q == SCHED_UNLIMITED) continue;
            sb_printf(out, "%s{team=\"", MON_TEAM_GPU_QUOTA);
            label(out, tm->name);
            sb_puts(out, "\",gpu_type=\"");
            label(out, c->types[y].name);
            sb_printf(out, "\"} %d\n", q);
        }
    }
    static const char *const names[] = {MON_TEAM_BUDGET, MON_TEAM_SPENT, MON_TEAM_BUDGET_USED,
                                        MON_TEAM_BUDGET_THRESHOLD};
    static const char *const helps[] = {
        "Each team's budget per month (teams with one).",
        "Money each team spent this month, running attempts included.",
        "Each team's spending this month over its budget.",
        "The budget threshold each team reached this month: 0, 0.8 or 1."};
    for (int k = 0; k < 4; k++) {
        head(out, names[k], "gauge", helps[k]);
        for (int t = 0; t < c->n_teams; t++) {
            double budget = c->teams[t].budget, spent = ok ? v->spent[t] : 0;
            if (k != 1 && !(budget > 0)) continue; /* spending: every team */
            double x = k == 0 ? budget : k == 1 ? spent : k == 2 ? spent / budget
                     : ok ? v->budget_level[t] : 0;
            team_line(out, names[k], c->teams[t].name, x);
        }
    }
    head(out, MON_QUEUE_OLDEST, "gauge",
         "How long each team's longest-waiting queued job has waited (0: none waits).");
    double now = v ? v->loop_at : 0;
    for (int t = 0; ok && t < c->n_teams; t++) {
        double since = v->queued_since[t];
        team_line(out, MON_QUEUE_OLDEST, c->teams[t].name, since > 0 && now > since ? now - since : 0);
    }
}

static void histogram(sb *out, const char *name, const char *help, const ctl_hist *h)
{
    head(out, name, "histogram", help);
    uint64_t cum = 0;
    for (int b = 0; b < SRV_HIST_BUCKETS; b++) {
        cum += h ? h->bucket[b] : 0;
        sb_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, ctl_hist_bounds[b], (unsigned long long)cum);
    }
    cum += h ? h->bucket[SRV_HIST_BUCKETS] : 0;
    sb_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    sb_printf(out, "%s_sum %.9g\n%s_count %llu\n", name, h ? h->sum : 0.0, name,
              (unsigned long long)(h ? h->n : 0));
}

static void view_metrics(const srv *s, const ctl_view *v, sb *out)
{
    const sched_cluster *c = s->cluster.sched;
    head(out, "lathe_queue_length", "gauge", "Queued jobs by team and wait reason.");
    for (size_t i = 0; v && i < v->n_waits; i++) {
        sb_puts(out, "lathe_queue_length{team=\"");
        label(out, v->waits[i].team);
        sb_puts(out, "\",reason=\"");
        label(out, v->waits[i].reason);
        sb_printf(out, "\"} %lld\n", (long long)v->waits[i].n);
    }
    head(out, "lathe_gpus", "gauge", "GPUs allocated, free, and free but fragmented.");
    for (int t = 0; t < c->n_types; t++) {
        int used = v && t < v->n_types ? v->alloc_by_type[t] : 0;
        int free_ = v ? v->free_by_type[t] : c->type_gpus[t];
        sb_puts(out, "lathe_gpus{state=\"allocated\",gpu_type=\"");
        label(out, c->types[t].name);
        sb_printf(out, "\"} %d\nlathe_gpus{state=\"free\",gpu_type=\"", used);
        label(out, c->types[t].name);
        sb_printf(out, "\"} %d\n", free_);
    }
    sb_printf(out, "lathe_gpus{state=\"fragmented\",gpu_type=\"*\"} %d\n", v ? v->frag : 0);
    if (s->cluster.cpu_mode) {
        head(out, "lathe_cpu_slots", "gauge", "CPU slots in use and free (CPU mode).");
        int used = v ? v->cpu_in_use : 0;
        sb_printf(out, "lathe_cpu_slots{state=\"in_use\"} %d\nlathe_cpu_slots{state=\"free\"} %d\n",
                  used, s->cluster.cpu_slots - used);
    }
    histogram(out, "lathe_scheduling_pass_seconds", "Duration of scheduling passes.",
              v ? &v->pass_hist : NULL);
    histogram(out, "lathe_controller_loop_seconds",
              "Duration of the controller's turns (changes, polls, pass, view).",
              v ? &v->loop_hist : NULL);
    head(out, "lathe_controller_active_jobs", "gauge",
         "Queued, starting, running and stopping jobs in the controller's set.");
    sb_printf(out, "lathe_controller_active_jobs %zu\n", v ? v->n_active : 0);
    head(out, "lathe_controller_reload_fixes_total", "counter",
              "Differences between the controller's set and the store that its periodic "
              "check fixed.");
    sb_printf(out, "lathe_controller_reload_fixes_total %llu\n",
              (unsigned long long)(v ? v->reload_fixes : 0));
}

static void http_counters(srv *s, sb *out)
{
    head(out, "lathe_http_requests_total", "counter", "HTTP requests by method and status code.");
    pthread_mutex_lock(&s->counters.mu);
    for (size_t i = 0; i < s->counters.n; i++)
        sb_printf(out, "lathe_http_requests_total{method=\"%s\",code=\"%d\"} %llu\n",
                  s->counters.items[i].method, s->counters.items[i].code,
                  (unsigned long long)s->counters.items[i].n);
    pthread_mutex_unlock(&s->counters.mu);
}

static void write_counters(srv *s, sb *out)
{
    store_batcher_stats b;
    store_batcher_stats_get(s->writes, &b);
    head(out, "lathe_http_write_commits_total", "counter",
         "Transactions (flushes to disk) of the HTTP requests' writes.");
    sb_printf(out, "lathe_http_write_commits_total %llu\n", (unsigned long long)b.commits);
    head(out, "lathe_http_writes_total", "counter",
         "HTTP requests' writes, grouped into those transactions.");
    sb_printf(out, "lathe_http_writes_total %llu\n", (unsigned long long)b.writes);
    head(out, "lathe_http_write_batch_max", "gauge", "The most writes one transaction held.");
    sb_printf(out, "lathe_http_write_batch_max %llu\n", (unsigned long long)b.max_batch);
}

void srv_api_metrics(srv_req *r)
{
    srv *s = srv_req_server(r);
    sb out;
    sb_init(&out);
    head(&out, "lathe_up", "gauge", "1 while the server runs.");
    sb_puts(&out, "lathe_up 1\n");
    job_counts(srv_req_store(r), &out);
    running_jobs(srv_req_store(r), &out);
    const ctl_view *v = ctl_view_acquire(s->ctl);
    view_metrics(s, v, &out);
    team_metrics(s, v, &out);
    job_gpu_metric(&out, v, MON_JOB_GPU_UTIL_AVG,
                   "Mean utilisation of each running job's GPUs over its samples so far.", 0);
    job_gpu_metric(&out, v, MON_JOB_GPU_MEM_PEAK,
                   "The most memory one of each running job's GPUs used so far.", 1);
    job_gpu_metric(&out, v, MON_JOB_GPU_MEM_PLANNED,
                   "The memory per GPU each running job's plan estimated.", 2);
    dcgm_metrics(s, v, &out);
    ctl_view_release(s->ctl);
    http_counters(s, &out);
    srv_ratelimit_metrics(&s->ratelimit, &out);
    write_counters(s, &out);
    srv_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", sb_take(&out));
}

void srv_api_healthz(srv_req *r)
{
    srv_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

void srv_api_readyz(srv_req *r)
{
    srv *s = srv_req_server(r);
    char standby[320];
    if (!srv_active(s, standby, sizeof standby)) { /* the Service sends requests to the leader */
        srv_reply_error(r, 503, "unavailable", "%s", standby);
        return;
    }
    const ctl_view *v = ctl_view_acquire(s->ctl);
    double loop_at = v ? v->loop_at : 0;
    ctl_view_release(s->ctl);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9, age = now - loop_at;
    char why[320] = "";
    bool engine = !s->be || exec_ready(s->be, why, sizeof why);
    if (atomic_load(&s->stopping))
        srv_reply_error(r, 503, "unavailable", "the server is shutting down");
    else if (!engine)
        srv_reply_error(r, 503, "unavailable", "the %s executor is not ready: %s",
                        strcmp(s->be->name, "k8s") == 0 ? "Kubernetes" : s->be->name, why);
    else if (!(loop_at > 0) || age > 10)
        srv_reply_error(r, 503, "unavailable", "the controller's loop has not run for %.0f s",
                        loop_at > 0 ? age : now - s->started_at);
    else
        srv_reply_json(r, 200, json_pack("{s:s, s:f}", "status", "ready", "loop_age_seconds", age));
}
