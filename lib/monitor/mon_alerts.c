/* mon_alerts.c: Prometheus alert rules over lathe's metrics (`lathe render
 * alerts`). Each rule's labels carry a severity (warning, critical, info)
 * and its annotations a summary and a description naming the team or job,
 * with what to do. Thresholds come from the options:
 *
 *   LatheBudget80            a team spent 80 % of its monthly budget
 *   LatheBudgetExhausted     ... 100 %: its queued jobs wait
 *   LatheJobNoProgress       a running job reported no step for N
 *   LatheGPUIdle             a GPU with a job under U % for N
 *   LatheQueueWaitLong       a team's longest wait above a bound
 *   LatheJobMemoryOverPlan   a job's GPU memory 10 % above its plan (the
 *                            estimator's miss: the next job like it may
 *                            run out of memory)
 */
#include "monitor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mon_alert_opts_default(mon_alert_opts *o)
{
    o->no_progress = 30 * 60;
    o->idle_for = 15 * 60;
    o->idle_util = 5;
    o->queue_wait = 2 * 3600;
    o->group = "lathe";
}

/* A duration as Prometheus writes one: "30m", "2h", "90s". */
static void prom_duration(double s, char *out, size_t n)
{
    long v = lround(s);
    if (v > 0 && v % 3600 == 0) snprintf(out, n, "%ldh", v / 3600);
    else if (v > 0 && v % 60 == 0) snprintf(out, n, "%ldm", v / 60);
    else snprintf(out, n, "%lds", v > 0 ? v : 1);
}

static json_t *rule(const char *name, const char *expr, const char *for_, const char *severity,
                    const char *summary, const char *description)
{
    json_t *r = json_pack("{s:s, s:s}", "alert", name, "expr", expr);
    if (for_) json_object_set_new(r, "for", json_string(for_));
    json_object_set_new(r, "labels", json_pack("{s:s}", "severity", severity));
    json_object_set_new(r, "annotations",
                        json_pack("{s:s, s:s}", "summary", summary, "description", description));
    return r;
}

json_t *mon_alert_rules(const mon_alert_opts *o)
{
    json_t *rules = json_array();
    char expr[512], desc[600], d1[32], d2[32];
    snprintf(expr, sizeof expr, "%s >= 0.8 and %s < 1", MON_TEAM_BUDGET_USED, MON_TEAM_BUDGET_USED);
    json_array_append_new(
        rules, rule("LatheBudget80", expr, NULL, "warning",
                    "Team {{ $labels.team }} spent 80% of its monthly budget",
                    "Team {{ $labels.team }} has spent {{ $value | humanizePercentage }} of its "
                    "budget this month. At 100% lathe holds its queued jobs until the next "
                    "month: raise budgetPerMonth in the Cluster file or slow its work down."));
    snprintf(expr, sizeof expr, "%s >= 1", MON_TEAM_BUDGET_USED);
    json_array_append_new(
        rules, rule("LatheBudgetExhausted", expr, NULL, "critical",
                    "Team {{ $labels.team }} spent its whole monthly budget",
                    "Team {{ $labels.team }} has spent {{ $value | humanizePercentage }} of its "
                    "budget this month: its queued jobs wait (reason: budget) until the next "
                    "month or a larger budgetPerMonth."));
    prom_duration(o->no_progress, d1, sizeof d1);
    snprintf(expr, sizeof expr, "time() - %s > %.0f", MON_JOB_LAST_PROGRESS, o->no_progress);
    snprintf(desc, sizeof desc,
             "Job {{ $labels.job }} of team {{ $labels.team }} has reported no training step "
             "for over %s (last {{ $value | humanizeDuration }} ago) while holding its GPUs: "
             "look at `lathe logs {{ $labels.job }}` (a stalled data loader, a hung collective, "
             "a deadlock), then cancel it to free the GPUs.",
             d1);
    json_array_append_new(rules, rule("LatheJobNoProgress", expr, "1m", "warning",
                                      "Job {{ $labels.job }} makes no progress", desc));
    prom_duration(o->idle_for, d1, sizeof d1);
    snprintf(expr, sizeof expr, "%s{job!=\"\"} < %g", mon_dcgm_fields[MON_GPU_UTIL].name,
             o->idle_util);
    snprintf(desc, sizeof desc,
             "GPU {{ $labels.gpu }} of {{ $labels.Hostname }} is allocated to job {{ "
             "$labels.job }} (team {{ $labels.team }}) but has been under %g%% busy for %s: "
             "the job may wait on its input, on the CPU or on other nodes. Allocated and idle "
             "GPUs cost as much as busy ones.",
             o->idle_util, d1);
    json_array_append_new(rules, rule("LatheGPUIdle", expr, d1, "warning",
                                      "An allocated GPU is idle", desc));
    prom_duration(o->queue_wait, d2, sizeof d2);
    snprintf(expr, sizeof expr, "%s > %.0f", MON_QUEUE_OLDEST, o->queue_wait);
    snprintf(desc, sizeof desc,
             "A queued job of team {{ $labels.team }} has waited {{ $value | humanizeDuration "
             "}} (over %s). `lathe get jobs --team {{ $labels.team }} --state queued -o wide` "
             "shows why each waits (quota, budget, no GPU of the right shape).",
             d2);
    json_array_append_new(rules, rule("LatheQueueWaitLong", expr, NULL, "warning",
                                      "Jobs of team {{ $labels.team }} wait long", desc));
    snprintf(expr, sizeof expr, "%s > 1.1 * %s", MON_JOB_GPU_MEM_PEAK, MON_JOB_GPU_MEM_PLANNED);
    json_array_append_new(
        rules, rule("LatheJobMemoryOverPlan", expr, "5m", "info",
                    "Job {{ $labels.job }} uses more GPU memory than its plan",
                    "Job {{ $labels.job }} of team {{ $labels.team }} peaked {{ $value | "
                    "humanize1024 }}B on one GPU, over 10% above the planner's estimate: jobs "
                    "like it may run out of memory on smaller GPUs (lathe re-plans a job that "
                    "does)."));
    return json_pack("{s:[{s:s, s:o}]}", "groups", "name", o->group ? o->group : "lathe", "rules",
                     rules);
}
