/* cmd_top.c: `lathe top`: live GPUs and jobs of a lathe server: every GPU
 * with the job on it, the active jobs with progress bars, loss and ETA, and
 * each team's GPUs against its quota. Refreshed in place on a terminal; one
 * plain snapshot when the output is not a terminal. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Jobs shown at most (the rest are counted). */
#define TOP_MAX_JOBS 200

static const char top_help[] =
    "usage: lathe top [--interval D] [--once] [--count N] [--all] [--team T]\n"
    "                 [--server ADDR] [--token TOKEN]\n"
    "\n"
    "Shows the cluster live: each GPU and the job on it, the active jobs\n"
    "(queued, starting, running, stopping) with a progress bar, loss and ETA,\n"
    "and each team's GPUs against its quota. On a terminal the view refreshes\n"
    "in place until Ctrl-C; when the output is not a terminal it prints one\n"
    "plain snapshot (or --count snapshots) and exits.\n"
    "\n"
    "options:\n"
    "  --interval D             refresh every D (default 2s)\n"
    "  --once                   one snapshot, then exit\n"
    "  --count N                N snapshots, then exit\n"
    "  --all                    finished jobs too\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 ok, 1 usage or token refused, 5 server unreachable\n"
    "\n"
    "example:\n"
    "  lathe top --interval 1s\n";

typedef struct top_args {
    client_flags fl;
    double interval;
    long count; /* 0 = until interrupted (terminal) */
    bool all;
} top_args;

/* The GPU section: one row per GPU. */
static void top_gpus(sb *out, const json_t *nodes)
{
    size_t total = 0, used = 0, i, k, m;
    const json_t *n, *g, *j;
    client_table t;
    client_table_init(&t, 5, "NODE", "GPU", "TYPE", "JOB", "TEAM");
    json_array_foreach(json_object_get(nodes, "items"), i, n) {
        json_array_foreach(json_object_get(n, "gpus"), k, g) {
            const json_t *jobs = json_object_get(g, "jobs");
            char idx[24];
            snprintf(idx, sizeof idx, "%lld", client_int(g, "index", (long long)k));
            total++;
            used += json_array_size(jobs) > 0;
            if (!json_array_size(jobs))
                client_table_row(&t, client_str(n, "name"), idx, client_str(n, "gpu_type"), "idle",
                                 NULL);
            json_array_foreach(jobs, m, j) {
                char name[160];
                const char *job = client_str(j, "name"); /* null: another team's */
                double share = json_number_value(json_object_get(j, "share"));
                snprintf(name, sizeof name, "%s", job ? job : "-");
                if (share > 0 && share < 1)
                    snprintf(name, sizeof name, "%s (%.0f%% of the GPU)", job ? job : "-", share * 100);
                client_table_row(&t, client_str(n, "name"), idx, client_str(n, "gpu_type"), name,
                                 client_str(j, "team"));
            }
        }
    }
    sb_printf(out, "GPUs: %zu of %zu in use\n", used, total);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    client_table_print(&t, f);
    fclose(f);
    sb_puts(out, buf);
    free(buf);
    client_table_free(&t);
}

/* The jobs section. */
static void top_jobs(sb *out, const json_t *items, bool bars)
{
    size_t i, n = json_array_size(items);
    int width = 4;
    const json_t *j;
    json_array_foreach(items, i, j) {
        const char *name = client_str(j, "name");
        if (name && (int)strlen(name) > width) width = (int)strlen(name);
    }
    sb_printf(out, "\nJobs (%zu):\n", n);
    json_array_foreach(items, i, j) {
        if (i == TOP_MAX_JOBS) {
            sb_printf(out, "  ... and %zu more\n", n - i);
            break;
        }
        sb_puts(out, "  ");
        client_job_line(out, j, width, bars);
        sb_putc(out, '\n');
    }
}

/* The teams section: "research 3/2 GPUs (borrowing 1), 1 queued". */
static void top_teams(sb *out, const json_t *teams)
{
    sb_puts(out, "\nTeams:\n");
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(teams, "items"), i, t) {
        long long in_use = 0, quota = 0, borrowed = 0;
        const char *k;
        const json_t *v;
        json_object_foreach(json_object_get(t, "in_use"), k, v) in_use += json_integer_value(v);
        json_object_foreach(json_object_get(t, "quota"), k, v) quota += json_integer_value(v);
        json_object_foreach(json_object_get(t, "borrowed"), k, v) borrowed += json_integer_value(v);
        sb_printf(out, "  %-16s %lld/%lld GPUs of quota", client_str(t, "name"), in_use, quota);
        if (borrowed) sb_printf(out, " (borrowing %lld)", borrowed);
        char spent[32];
        client_format_money(spent, sizeof spent, client_num(t, "spent_this_month", 0));
        sb_printf(out, ", %lld running, %lld queued, spent %s\n", client_int(t, "running", 0),
                  client_int(t, "queued", 0), spent);
    }
}

/* One snapshot into out. */
static int top_snapshot(client *c, const top_args *a, bool bars, sb *out, client_error *err)
{
    json_t *nodes = NULL, *teams = NULL, *jobs = NULL;
    client_job_filter f = {.team = a->fl.team,
                           .states = a->all ? NULL : "queued,starting,running,stopping"};
    int rc = client_nodes_list(c, &nodes, err);
    if (!rc) rc = client_jobs_list_all(c, &f, TOP_MAX_JOBS + 1000, &jobs, err);
    if (!rc) rc = client_teams_list(c, &teams, err);
    if (!rc) {
        time_t now = time(NULL);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", localtime(&now));
        sb_printf(out, "lathe top: %s at %s\n\n", client_server(c), stamp);
        top_gpus(out, nodes);
        top_jobs(out, jobs, bars);
        top_teams(out, teams);
    }
    json_decref(nodes);
    json_decref(teams);
    json_decref(jobs);
    return rc;
}

static int top_loop(client *c, const top_args *a)
{
    client_live live;
    client_live_init(&live, stdout, false);
    long count = a->count ? a->count : (live.tty ? 0 : 1);
    int rc = LT_EXIT_OK;
    for (long k = 0; count == 0 || k < count; k++) {
        if (k > 0) {
            struct timespec ts = {(time_t)a->interval,
                                  (long)((a->interval - (double)(time_t)a->interval) * 1e9)};
            nanosleep(&ts, NULL);
        }
        client_error err;
        client_error_init(&err);
        sb out;
        sb_init(&out);
        rc = top_snapshot(c, a, live.tty, &out, &err);
        if (rc) {
            client_live_end(&live);
            client_error_print(&err, "top", stderr);
        } else if (live.tty) {
            fputs("\033[H\033[2J", stdout); /* home, clear: a full-screen view */
            fputs(sb_str(&out), stdout);
            fflush(stdout);
        } else {
            if (k > 0) putchar('\n');
            fputs(sb_str(&out), stdout);
            fflush(stdout);
        }
        sb_free(&out);
        client_error_free(&err);
        if (rc) break;
    }
    client_live_free(&live);
    return rc;
}

static int top_run(int argc, char **argv)
{
    top_args a = {.interval = 2.0};
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&a.fl, "top", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *o = argv[i++];
        const char *val = i < argc ? argv[i] : NULL;
        if (!strcmp(o, "--interval")) {
            if (!val || !units_parse_duration(val, &a.interval))
                return cli_usage_error("top", "--interval takes a duration such as 2s");
            i++;
        } else if (!strcmp(o, "--once")) {
            a.count = 1;
        } else if (!strcmp(o, "--count")) {
            char *end;
            a.count = val ? strtol(val, &end, 10) : 0;
            if (!val || *end || a.count < 1)
                return cli_usage_error("top", "--count takes a positive number");
            i++;
        } else if (!strcmp(o, "--all")) {
            a.all = true;
        } else {
            return cli_usage_error("top", "unknown argument '%s'", o);
        }
    }
    client *c;
    int rc = client_open(&a.fl, "top", &c);
    if (rc) return rc;
    rc = top_loop(c, &a);
    client_free(c);
    return rc;
}

const cli_command cli_cmd_top = {
    .name = "top",
    .summary = "live view of GPUs, jobs and teams on a lathe server",
    .help = top_help,
    .run = top_run,
};
