/* report.c: simulation results as a text table (one row per policy, then
 * each team's allocation against its quota) or as JSON (jansson). */
#include "sim.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A duration in a width of 7: "43.2m", "12.34h", "12.3d". */
static void dur(sb *o, double s)
{
    if (s < 60)
        sb_printf(o, " %7.0fs", s);
    else if (s < 3600)
        sb_printf(o, " %7.1fm", s / 60);
    else if (s < 100 * 3600)
        sb_printf(o, " %7.2fh", s / 3600);
    else
        sb_printf(o, " %7.1fd", s / 86400);
}

static const sim_stats *find_policy(const sim_stats *s, size_t n, sched_policy p)
{
    for (size_t i = 0; i < n; i++)
        if (s[i].policy == p) return &s[i];
    return NULL;
}

/* "lathe vs fifo: avg JCT x0.41, alloc +12.3 points" for each baseline run. */
static void comparisons(const sim_stats *s, size_t n, sb *o)
{
    const sim_stats *l = find_policy(s, n, SCHED_LATHE);
    if (!l) return;
    for (size_t i = 0; i < n; i++) {
        if (s[i].policy == SCHED_LATHE || s[i].jct_avg <= 0) continue;
        sb_printf(o, "lathe vs %-6s avg JCT x%.2f, p99 JCT x%.2f, avg wait x%.2f, allocation %+.1f points "
                  "(%+.1f while jobs wait)\n",
                  sched_policy_name(s[i].policy), l->jct_avg / s[i].jct_avg,
                  s[i].jct_p99 > 0 ? l->jct_p99 / s[i].jct_p99 : 0,
                  s[i].wait_avg > 0 ? l->wait_avg / s[i].wait_avg : 0,
                  100 * (l->alloc_rate - s[i].alloc_rate), 100 * (l->alloc_waiting - s[i].alloc_waiting));
    }
}

void sim_report_text(const sched_cluster *c, const sim_stats *s, size_t n, sb *o)
{
    sb_printf(o, "%-7s %7s %7s %8s %8s %8s %8s %8s %8s %6s %6s %8s %7s %8s %6s %5s %10s\n", "policy",
              "jobs", "done", "avgJCT", "p50JCT", "p99JCT", "avgWait", "p99Wait", "maxWait", "alloc",
              "allocW", "makespan", "preempt", "lostGPUh", "frag", "jain", "cost");
    for (size_t i = 0; i < n; i++) {
        const sim_stats *x = &s[i];
        sb_printf(o, "%-7s %7zu %7zu", sched_policy_name(x->policy), x->jobs, x->completed);
        dur(o, x->jct_avg);
        dur(o, x->jct_median);
        dur(o, x->jct_p99);
        dur(o, x->wait_avg);
        dur(o, x->wait_p99);
        dur(o, x->wait_max);
        sb_printf(o, " %5.1f%% %5.1f%%", 100 * x->alloc_rate, 100 * x->alloc_waiting);
        dur(o, x->makespan);
        sb_printf(o, " %7zu %8.1f %5.1f%% %5.3f %10.0f\n", x->preemptions, x->lost_gpu_hours,
                  100 * x->frag_pct, x->jain, x->cost);
    }
    for (size_t i = 0; i < n; i++)
        if (s[i].rejected || s[i].unfinished)
            sb_printf(o, "%s: %zu jobs rejected (they can never run), %zu never finished\n",
                      sched_policy_name(s[i].policy), s[i].rejected, s[i].unfinished);
    comparisons(s, n, o);
    if (!n || c->n_teams < 2) return;
    sb_puts(o, "\nteam allocation: average GPUs held over the busy period (and / quota)\n");
    sb_printf(o, "%-16s %6s", "team", "quota");
    for (size_t i = 0; i < n; i++) sb_printf(o, " %16s", sched_policy_name(s[i].policy));
    sb_putc(o, '\n');
    for (int k = 0; k < c->n_teams; k++) {
        if (!s[0].teams[k].jobs && !s[0].teams[k].gpu_seconds) continue;
        sb_printf(o, "%-16s %6d", c->teams[k].name, s[0].teams[k].quota);
        for (size_t i = 0; i < n; i++) {
            const sim_team_stats *t = &s[i].teams[k];
            if (t->quota > 0)
                sb_printf(o, " %8.1f (%5.2f)", t->avg_gpus, t->avg_gpus / t->quota);
            else
                sb_printf(o, " %8.1f        ", t->avg_gpus);
        }
        sb_putc(o, '\n');
    }
}

static json_t *stats_json(const sched_cluster *c, const sim_stats *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "policy", json_string(sched_policy_name(x->policy)));
    json_object_set_new(o, "jobs", json_integer((json_int_t)x->jobs));
    json_object_set_new(o, "completed", json_integer((json_int_t)x->completed));
    json_object_set_new(o, "rejected", json_integer((json_int_t)x->rejected));
    json_object_set_new(o, "unfinished", json_integer((json_int_t)x->unfinished));
    json_object_set_new(o, "jct_avg_s", json_real(x->jct_avg));
    json_object_set_new(o, "jct_median_s", json_real(x->jct_median));
    json_object_set_new(o, "jct_p99_s", json_real(x->jct_p99));
    json_object_set_new(o, "wait_avg_s", json_real(x->wait_avg));
    json_object_set_new(o, "wait_p99_s", json_real(x->wait_p99));
    json_object_set_new(o, "wait_max_s", json_real(x->wait_max));
    json_object_set_new(o, "allocation_rate", json_real(x->alloc_rate));
    json_object_set_new(o, "busy_s", json_real(x->busy));
    json_object_set_new(o, "allocation_rate_while_waiting", json_real(x->alloc_waiting));
    json_object_set_new(o, "waiting_s", json_real(x->waiting));
    json_object_set_new(o, "idle_reserved_while_waiting", json_real(x->idle_reserved));
    json_object_set_new(o, "idle_shared_while_waiting", json_real(x->idle_shared));
    json_object_set_new(o, "idle_fragmented_while_waiting", json_real(x->idle_fragmented));
    json_object_set_new(o, "idle_other_while_waiting", json_real(x->idle_other));
    json_object_set_new(o, "makespan_s", json_real(x->makespan));
    json_object_set_new(o, "preemptions", json_integer((json_int_t)x->preemptions));
    json_object_set_new(o, "lost_gpu_hours", json_real(x->lost_gpu_hours));
    json_object_set_new(o, "fragmentation_gpus", json_real(x->frag_avg));
    json_object_set_new(o, "fragmentation", json_real(x->frag_pct));
    json_object_set_new(o, "cost", json_real(x->cost));
    json_object_set_new(o, "jain_index", json_real(x->jain));
    json_object_set_new(o, "passes", json_integer((json_int_t)x->passes));
    json_object_set_new(o, "scheduler_seconds", json_real(x->sched_seconds));
    json_t *teams = json_array();
    for (int k = 0; k < x->n_teams && k < c->n_teams; k++) {
        const sim_team_stats *t = &x->teams[k];
        if (!t->jobs && !t->gpu_seconds) continue;
        json_t *tj = json_object();
        json_object_set_new(tj, "team", json_string(c->teams[k].name));
        json_object_set_new(tj, "jobs", json_integer((json_int_t)t->jobs));
        json_object_set_new(tj, "gpu_hours", json_real(t->gpu_seconds / 3600));
        json_object_set_new(tj, "avg_gpus", json_real(t->avg_gpus));
        json_object_set_new(tj, "quota", json_integer(t->quota));
        json_object_set_new(tj, "share_of_quota", t->quota > 0 ? json_real(t->avg_gpus / t->quota) : json_null());
        json_object_set_new(tj, "cost", json_real(t->cost));
        json_object_set_new(tj, "wait_max_s", json_real(t->wait_max));
        json_array_append_new(teams, tj);
    }
    json_object_set_new(o, "teams", teams);
    return o;
}

char *sim_report_json(const sched_cluster *c, const sim_stats *s, size_t n)
{
    json_t *root = json_object();
    json_object_set_new(root, "gpus", json_integer(sched_cluster_ready_gpus(c)));
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, stats_json(c, &s[i]));
    json_object_set_new(root, "policies", arr);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    char *out = xasprintf("%s\n", text);
    free(text);
    return out;
}

char *sim_report_jobs_csv(const sim_trace *t, const sim_stats *s, size_t n)
{
    static const char *const status[] = {"done", "rejected", "unfinished"};
    sb o;
    sb_init(&o);
    sb_puts(&o, "policy,job_id,submit_s,start_s,finish_s,wait_s,preemptions,status\n");
    for (size_t p = 0; p < n; p++) {
        if (!s[p].per_job) continue;
        for (size_t i = 0; i < t->n && i < s[p].jobs; i++) {
            const sim_job_result *r = &s[p].per_job[i];
            sb_printf(&o, "%s,%s,%.15g,", sched_policy_name(s[p].policy), t->jobs[i].id, t->jobs[i].submit);
            if (r->first_start >= 0) sb_printf(&o, "%.15g", r->first_start);
            sb_putc(&o, ',');
            if (r->finish >= 0) sb_printf(&o, "%.15g", r->finish);
            sb_printf(&o, ",%.15g,%d,%s\n", r->wait, r->preemptions, status[r->status]);
        }
    }
    return sb_take(&o);
}

/* ---- odd rows ---- */

static const char *const odd_done[SIM_N_ODD] = {
    "with duration 0: they start and end at once",
    "shorter than a second: replayed as they are",
    "reuse an id written above: each is replayed as a job of its own",
    "submitted before a row above them: replayed in order of submit time",
    "with a censored duration (cut off when the trace ended): replayed for that duration, a lower bound",
    "ask for part of one GPU: they may share a GPU under lathe",
};

void sim_trace_summary(const sim_trace *t, const sim_bound *b, sb *out)
{
    for (int k = 0; k < SIM_N_ODD; k++)
        if (t->odd[k])
            sb_printf(out, "%s: %zu %s %s (first: line %d)\n", t->path ? t->path : "trace", t->odd[k],
                      t->odd[k] == 1 ? "job" : "jobs", odd_done[k], t->odd_line[k]);
    if (b && b->too_wide)
        sb_printf(out, "%s: %zu %s more GPUs than the cluster has: refused, counted as rejected (first: line %d)\n",
                  t->path ? t->path : "trace", b->too_wide, b->too_wide == 1 ? "job asks for" : "jobs ask for",
                  b->too_wide_line);
}
