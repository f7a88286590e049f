/* monitor.h: what watches lathe from outside: the names of the metrics
 * `lathe server` exports for its GPUs (DCGM exporter's, so dashboards and
 * alerts written for NVIDIA's exporter work unchanged) and for jobs, teams
 * and budgets; a Grafana dashboard over them (`lathe render grafana`); and
 * Prometheus alert rules (`lathe render alerts`). Pure functions over
 * options: no server, no I/O. docs/server.md lists every metric. */
#ifndef LATHE_MONITOR_H
#define LATHE_MONITOR_H

#include "base/base.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- the GPU metrics, as DCGM exporter names them ----
 * One series per GPU of the server's own machine (NVML), labelled gpu
 * (NVML's index), UUID, device ("nvidia0"), modelName, Hostname (lathe's
 * node name), and lathe's own job and team (the jobs on the GPU; several
 * are joined with "," on a shared GPU; "" when it is free). */
typedef enum {
    MON_GPU_UTIL,         /* percent */
    MON_MEM_COPY_UTIL,    /* percent */
    MON_FB_USED,          /* MiB */
    MON_FB_FREE,          /* MiB */
    MON_POWER_USAGE,      /* W */
    MON_GPU_TEMP,         /* degrees C */
    MON_SM_CLOCK,         /* MHz */
    MON_ENERGY,           /* mJ since the driver loaded (a counter) */
    MON_N_DCGM
} mon_dcgm;

typedef struct mon_field {
    const char *name; /* "DCGM_FI_DEV_GPU_UTIL" */
    const char *type; /* "gauge", "counter" */
    const char *help;
} mon_field;

extern const mon_field mon_dcgm_fields[MON_N_DCGM];

/* ---- lathe's own metrics that dashboards and alerts use ---- */
#define MON_JOB_GPU_UTIL_AVG "lathe_job_gpu_utilization_avg_percent"
#define MON_JOB_GPU_MEM_PEAK "lathe_job_gpu_memory_peak_bytes"
#define MON_JOB_GPU_MEM_PLANNED "lathe_job_gpu_memory_planned_bytes"
#define MON_JOB_STEP "lathe_job_step"
#define MON_JOB_LAST_PROGRESS "lathe_job_last_progress_timestamp_seconds"
#define MON_TEAM_BUDGET "lathe_team_budget"
#define MON_TEAM_SPENT "lathe_team_spent_this_month"
#define MON_TEAM_BUDGET_USED "lathe_team_budget_used_ratio"
#define MON_TEAM_BUDGET_THRESHOLD "lathe_team_budget_threshold"
#define MON_TEAM_GPUS_IN_USE "lathe_team_gpus_in_use"
#define MON_TEAM_GPU_QUOTA "lathe_team_gpu_quota"
#define MON_QUEUE_OLDEST "lathe_queue_oldest_wait_seconds"

/* ---- alert rules (mon_alerts.c) ---- */
typedef struct mon_alert_opts {
    double no_progress;  /* seconds a running job may go without a progress line; 1800 */
    double idle_for;     /* seconds a GPU with a job may stay idle; 900 */
    double idle_util;    /* percent below which a GPU is idle; 5 */
    double queue_wait;   /* seconds the longest wait of a team may reach; 7200 */
    const char *group;   /* the rule group's name; "lathe" */
} mon_alert_opts;

void mon_alert_opts_default(mon_alert_opts *o);
/* The rules as a Prometheus rule file ({"groups": [{"name", "rules":
 * [...]}]}; print it as YAML for rule_files: and promtool check rules).
 * Caller frees (json_decref). */
json_t *mon_alert_rules(const mon_alert_opts *o);

/* ---- the Grafana dashboard (mon_grafana.c) ---- */
typedef struct mon_grafana_opts {
    const char *title;      /* "lathe" */
    const char *uid;        /* "lathe" */
    const char *datasource; /* the Prometheus data source's uid; NULL = a
                               variable the user picks on import */
    double refresh;         /* seconds; 30 */
} mon_grafana_opts;

void mon_grafana_opts_default(mon_grafana_opts *o);
/* The dashboard's JSON model (Grafana's "Import dashboard" takes it):
 * GPUs (utilisation, memory, power, temperature by GPU with its job),
 * jobs (loss, throughput, GPU memory against the plan), the queue (length
 * by reason, the longest wait), the cluster (GPUs allocated, free and
 * fragmented, teams against their quotas) and money (spent against
 * budgets). Variables: team, job. */
json_t *mon_grafana_dashboard(const mon_grafana_opts *o);

#endif
