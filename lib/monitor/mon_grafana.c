/* mon_grafana.c: a Grafana dashboard over lathe's metrics (`lathe render
 * grafana`), as Grafana's JSON model (schemaVersion 39: rows, timeseries,
 * stat and bar gauge panels on a 24-column grid). Four rows: GPUs (NVML's
 * figures by GPU and job), jobs (loss, throughput, GPU memory against the
 * plan), the queue and the cluster (wait reasons, the longest wait, GPUs
 * allocated / free / fragmented, the scheduler's pass), and teams and money
 * (quota use, spending against budgets). Variables: the Prometheus data
 * source, team and job (both multi-valued, "All" by default). */
#include "monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mon_grafana_opts_default(mon_grafana_opts *o)
{
    o->title = "lathe";
    o->uid = "lathe";
    o->datasource = NULL;
    o->refresh = 30;
}

typedef struct dash {
    json_t *panels;
    json_t *ds; /* {"type": "prometheus", "uid": ...} */
    int id, x, y, row_h;
} dash;

static void row(dash *d, const char *title)
{
    if (d->x) d->y += d->row_h, d->x = 0;
    json_array_append_new(d->panels, json_pack("{s:i, s:s, s:s, s:b, s:{s:i, s:i, s:i, s:i}, s:[]}",
                                               "id", ++d->id, "type", "row", "title", title,
                                               "collapsed", 0, "gridPos", "h", 1, "w", 24, "x", 0,
                                               "y", d->y, "panels"));
    d->y += 1;
    d->row_h = 0;
}

/* A target: expr with its legend. */
static json_t *target(const dash *d, const char *ref, const char *expr, const char *legend)
{
    return json_pack("{s:O, s:s, s:s, s:s, s:b}", "datasource", d->ds, "refId", ref, "expr", expr,
                     "legendFormat", legend ? legend : "__auto", "range", 1);
}

/* Adds a panel of width w (of 24) and height h; wraps to the next line. */
static json_t *panel(dash *d, const char *type, const char *title, const char *description,
                     int w, int h, const char *unit)
{
    if (d->x + w > 24) d->y += d->row_h, d->x = 0, d->row_h = 0;
    json_t *p = json_pack("{s:i, s:s, s:s, s:s, s:O, s:{s:i, s:i, s:i, s:i}, s:[]}", "id", ++d->id,
                          "type", type, "title", title, "description", description, "datasource",
                          d->ds, "gridPos", "h", h, "w", w, "x", d->x, "y", d->y, "targets");
    json_t *defaults = json_pack("{s:s}", "unit", unit ? unit : "short");
    json_object_set_new(p, "fieldConfig", json_pack("{s:o, s:[]}", "defaults", defaults, "overrides"));
    d->x += w;
    if (h > d->row_h) d->row_h = h;
    json_array_append_new(d->panels, p);
    return p;
}

static void add_target(const dash *d, json_t *p, const char *expr, const char *legend)
{
    json_t *t = json_object_get(p, "targets");
    char ref[2] = {(char)('A' + json_array_size(t)), 0};
    json_array_append_new(t, target(d, ref, expr, legend));
}

/* Thresholds on a panel: green below, then each (value, colour). */
static void thresholds(json_t *p, double warn, double crit)
{
    json_t *def = json_object_get(json_object_get(p, "fieldConfig"), "defaults");
    json_object_set_new(def, "thresholds",
                        json_pack("{s:s, s:[{s:s, s:n}, {s:s, s:f}, {s:s, s:f}]}", "mode",
                                  "absolute", "steps", "color", "green", "value", "color", "orange",
                                  "value", warn, "color", "red", "value", crit));
    json_object_set_new(def, "min", json_integer(0));
}

static void stacked(json_t *p)
{
    json_t *def = json_object_get(json_object_get(p, "fieldConfig"), "defaults");
    json_object_set_new(def, "custom", json_pack("{s:{s:s}, s:i}", "stacking", "mode", "normal",
                                                 "fillOpacity", 30));
}

#define SEL "{team=~\"$team\",job=~\"$job\"}"
#define TEAM "{team=~\"$team\"}"

static void gpu_row(dash *d)
{
    row(d, "GPUs (NVML, DCGM exporter's names)");
    json_t *p = panel(d, "timeseries", "GPU utilisation",
                      "Time a kernel ran over NVML's last period, by GPU, with the job on it.", 12,
                      8, "percent");
    add_target(d, p, "DCGM_FI_DEV_GPU_UTIL" TEAM, "{{Hostname}} GPU {{gpu}} {{job}}");
    p = panel(d, "timeseries", "GPU memory used", "Framebuffer memory used, by GPU.", 12, 8,
              "bytes");
    add_target(d, p, "DCGM_FI_DEV_FB_USED" TEAM " * 1048576", "{{Hostname}} GPU {{gpu}} {{job}}");
    p = panel(d, "timeseries", "Power", "Power draw by GPU.", 8, 7, "watt");
    add_target(d, p, "DCGM_FI_DEV_POWER_USAGE" TEAM, "{{Hostname}} GPU {{gpu}}");
    p = panel(d, "timeseries", "Temperature", "GPU temperature.", 8, 7, "celsius");
    add_target(d, p, "DCGM_FI_DEV_GPU_TEMP" TEAM, "{{Hostname}} GPU {{gpu}}");
    thresholds(p, 80, 90);
    p = panel(d, "stat", "Allocated GPUs that are idle",
              "GPUs with a job whose utilisation is under 5 % (see the LatheGPUIdle alert).", 8, 7,
              "short");
    add_target(d, p, "count(DCGM_FI_DEV_GPU_UTIL{job!=\"\"} < 5) or vector(0)", "idle");
    thresholds(p, 1, 4);
}

static void job_row(dash *d)
{
    row(d, "Jobs");
    json_t *p = panel(d, "timeseries", "Training loss", "Latest loss of each running job.", 8, 8,
                      "short");
    add_target(d, p, "lathe_job_loss" SEL, "{{job}}");
    p = panel(d, "timeseries", "Eval loss", "Latest and lowest eval loss of each running job.", 8,
              8, "short");
    add_target(d, p, "lathe_job_eval_loss" SEL, "{{job}}");
    add_target(d, p, "lathe_job_best_eval_loss" SEL, "{{job}} (best)");
    p = panel(d, "timeseries", "Throughput", "Tokens per second of each running job.", 8, 8,
              "short");
    add_target(d, p, "lathe_job_tokens_per_second" SEL, "{{job}}");
    p = panel(d, "bargauge", "GPU memory: peak against the plan",
              "The most memory one of a job's GPUs used, and the planner's estimate per GPU.",
              12, 8, "bytes");
    add_target(d, p, MON_JOB_GPU_MEM_PEAK SEL, "{{job}} peak");
    add_target(d, p, MON_JOB_GPU_MEM_PLANNED SEL, "{{job}} plan");
    json_object_set_new(p, "options", json_pack("{s:s, s:s}", "orientation", "horizontal",
                                                "displayMode", "gradient"));
    p = panel(d, "timeseries", "Mean GPU utilisation of each job", "Over its samples so far.", 12,
              8, "percent");
    add_target(d, p, MON_JOB_GPU_UTIL_AVG SEL, "{{job}}");
}

static void queue_row(dash *d)
{
    row(d, "Queue and cluster");
    json_t *p = panel(d, "timeseries", "Queued jobs by reason",
                      "Why jobs wait, in the scheduler's codes (quota, budget, no_fit, ...).", 8,
                      8, "short");
    add_target(d, p, "sum by (reason) (lathe_queue_length" TEAM ")", "{{reason}}");
    stacked(p);
    p = panel(d, "timeseries", "Longest wait", "How long each team's longest-waiting job has waited.",
              8, 8, "s");
    add_target(d, p, MON_QUEUE_OLDEST TEAM, "{{team}}");
    p = panel(d, "timeseries", "GPUs", "Whole GPUs allocated and free on ready nodes, and free "
                                       "GPUs no waiting job's shape can use (fragmented).",
              8, 8, "short");
    add_target(d, p, "sum by (state) (lathe_gpus)", "{{state}}");
    p = panel(d, "stat", "Jobs by state", "Jobs in the store by state.", 12, 6, "short");
    add_target(d, p, "sum by (state) (lathe_jobs)", "{{state}}");
    p = panel(d, "timeseries", "Scheduling pass (p50, p99)",
              "Duration of the scheduler's passes.", 12, 6, "s");
    add_target(d, p,
               "histogram_quantile(0.5, sum by (le) (rate(lathe_scheduling_pass_seconds_bucket"
               "[$__rate_interval])))",
               "p50");
    add_target(d, p,
               "histogram_quantile(0.99, sum by (le) (rate(lathe_scheduling_pass_seconds_bucket"
               "[$__rate_interval])))",
               "p99");
}

static void money_row(dash *d)
{
    row(d, "Teams and money");
    json_t *p = panel(d, "bargauge", "Budget used this month",
                      "Each team's spending this month (running attempts included) over its "
                      "budget; lathe holds a team's queued jobs at 100 %.",
                      8, 8, "percentunit");
    add_target(d, p, MON_TEAM_BUDGET_USED TEAM, "{{team}}");
    thresholds(p, 0.8, 1);
    json_object_set_new(p, "options", json_pack("{s:s, s:s}", "orientation", "horizontal",
                                                "displayMode", "gradient"));
    p = panel(d, "timeseries", "Spent this month", "Money spent this month, and the budget.", 8,
              8, "currencyUSD");
    add_target(d, p, MON_TEAM_SPENT TEAM, "{{team}}");
    add_target(d, p, MON_TEAM_BUDGET TEAM, "{{team}} budget");
    p = panel(d, "bargauge", "GPUs in use against quota", "GPUs each team's jobs hold, by type.", 8,
              8, "short");
    add_target(d, p, MON_TEAM_GPUS_IN_USE TEAM, "{{team}} {{gpu_type}}");
    add_target(d, p, MON_TEAM_GPU_QUOTA TEAM, "{{team}} {{gpu_type}} quota");
    json_object_set_new(p, "options", json_pack("{s:s}", "orientation", "horizontal"));
}

static json_t *variables(const mon_grafana_opts *o, const dash *d)
{
    json_t *list = json_array();
    if (!o->datasource)
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:i}", "name", "datasource", "type",
                                              "datasource", "query", "prometheus", "hide", 0));
    static const char *const names[] = {"team", "job"};
    static const char *const queries[] = {"label_values(" MON_TEAM_SPENT ", team)",
                                          "label_values(lathe_job_loss{team=~\"$team\"}, job)"};
    for (int i = 0; i < 2; i++)
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:O, s:{s:s, s:s}, s:b, s:b, s:s, s:i, s:{s:[s], s:[s]}}",
                            "name", names[i], "type", "query", "datasource", d->ds, "query",
                            "query", queries[i], "refId", names[i], "includeAll", 1, "multi", 1,
                            "allValue", ".*", "refresh", 2, "current", "text", "All", "value",
                            "$__all"));
    return json_pack("{s:o}", "list", list);
}

json_t *mon_grafana_dashboard(const mon_grafana_opts *o)
{
    dash d = {.panels = json_array()};
    d.ds = json_pack("{s:s, s:s}", "type", "prometheus", "uid",
                     o->datasource ? o->datasource : "${datasource}");
    gpu_row(&d);
    job_row(&d);
    queue_row(&d);
    money_row(&d);
    char refresh[32];
    snprintf(refresh, sizeof refresh, "%.0fs", o->refresh > 0 ? o->refresh : 30);
    json_t *dash_json = json_pack(
        "{s:s, s:s, s:s, s:i, s:i, s:b, s:s, s:[s, s], s:{s:s, s:s}, s:s, s:o, s:o, s:[]}", "title",
        o->title ? o->title : "lathe", "uid", o->uid ? o->uid : "lathe", "description",
        "lathe: GPUs, jobs, queue and budgets (lathe render grafana)", "schemaVersion", 39,
        "version", 1, "editable", 1, "timezone", "browser", "tags", "lathe", "gpu", "time", "from",
        "now-6h", "to", "now", "refresh", refresh, "templating", variables(o, &d), "panels",
        d.panels, "links");
    json_decref(d.ds);
    return dash_json;
}
