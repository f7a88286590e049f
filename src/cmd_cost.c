/* cmd_cost.c: `lathe cost`: GPU-hours and money from the server's store
 * (GET /v1/cost), by team, experiment or job, over a window of time; the
 * plans' estimates beside what the jobs cost; each team against its
 * budget. A table, JSON or CSV. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char cost_help[] =
    "usage: lathe cost [--by team|experiment|job] [--since T] [--until T]\n"
    "                  [-o text|json|csv] [--server ADDR] [--token TOKEN] [--team TEAM]\n"
    "\n"
    "What GPUs cost, from the server's store: for each team (or experiment, or\n"
    "job) the GPU-hours and money its jobs used between --since and --until\n"
    "(default: all time until now; an attempt cut by the window counts for the\n"
    "part inside it), then the planner's estimate of those jobs' whole runs\n"
    "beside what they cost so far (PLANNED, ACTUAL and their ratio: retries,\n"
    "preemptions and a slow GPU make it grow), and for a team its budget, what\n"
    "it spent this month (running attempts included) and the share used. A\n"
    "team's token sees its own team; an admin's every team (or --team).\n"
    "\n"
    "options:\n"
    "  --by WHAT                team (default), experiment or job\n"
    "  --since T, --until T     a date (2026-12-01, UTC), a time\n"
    "                           (2026-12-01T08:00:00Z), a duration back from now\n"
    "                           (7d, 12h) or `month` (the 1st of this month, UTC)\n"
    "  -o, --output FORMAT      text (default), json (the API's answer) or csv\n"
    "                           (one row per line, the total last)\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 printed, 1 usage, 2 a bad time, 5 server unreachable\n"
    "\n"
    "examples:\n"
    "  lathe cost                          # every team, all time\n"
    "  lathe cost --by job --since month   # this month's jobs\n"
    "  lathe cost --by experiment -o csv > cost.csv\n";

/* --since / --until: a date, a time, a duration back from now, "month". */
static bool time_value(const char *s, char *out, size_t outsz)
{
    double t, d;
    time_t now = (time_t)client_now();
    struct tm tm;
    gmtime_r(&now, &tm);
    int y, m, day;
    char tail;
    if (!strcmp(s, "month")) {
        snprintf(out, outsz, "%04d-%02d-01T00:00:00Z", (tm.tm_year + 1900) % 10000,
                 (tm.tm_mon + 1) % 100);
        return true;
    }
    if (sscanf(s, "%4d-%2d-%2d%c", &y, &m, &day, &tail) == 3 && strlen(s) == 10) {
        snprintf(out, outsz, "%sT00:00:00Z", s);
        return client_parse_time(out, &t);
    }
    if (client_parse_time(s, &t)) {
        snprintf(out, outsz, "%s", s);
        return true;
    }
    if (!units_parse_duration(s, &d) || d < 0) return false;
    time_t at = (time_t)(client_now() - d);
    gmtime_r(&at, &tm);
    strftime(out, outsz, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return true;
}

static void money(char *out, size_t n, const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_number(v)) client_format_money(out, n, json_number_value(v));
    else snprintf(out, n, "-");
}

/* ACTUAL / PLANNED when every job of the row had an estimate. */
static void ratio(char *out, size_t n, const json_t *o)
{
    double planned = client_num(o, "planned_cost", NAN), actual = client_num(o, "actual_cost", NAN);
    if (client_int(o, "planned_jobs", 0) != client_int(o, "jobs", -1) || !(planned > 0))
        snprintf(out, n, "-");
    else snprintf(out, n, "%.2fx", actual / planned);
}

static void print_table(const json_t *v, const char *by)
{
    bool team = !strcmp(by, "team"), job = !strcmp(by, "job");
    client_table t;
    if (team)
        client_table_init(&t, 10, "TEAM", "JOBS", "GPU-HOURS", "COST", "PLANNED", "ACTUAL",
                          "VS PLAN", "BUDGET", "THIS MONTH", "USED");
    else
        client_table_init(&t, 8, "TEAM", job ? "JOB" : "EXPERIMENT", job ? "EXPERIMENT" : "JOBS",
                          "GPU-HOURS", "COST", "PLANNED", "ACTUAL", "VS PLAN");
    const json_t *items = json_object_get(v, "items");
    for (size_t i = 0; i <= json_array_size(items); i++) {
        bool total = i == json_array_size(items);
        const json_t *o = total ? json_object_get(v, "total") : json_array_get(items, i);
        char jobs[24], gh[32], cost[32], planned[32], actual[32], r[16];
        snprintf(jobs, sizeof jobs, "%lld", client_int(o, "jobs", 0));
        snprintf(gh, sizeof gh, "%.2f", client_num(o, "gpu_hours", 0));
        money(cost, sizeof cost, o, "cost");
        money(planned, sizeof planned, o, "planned_cost");
        money(actual, sizeof actual, o, "actual_cost");
        ratio(r, sizeof r, o);
        const char *name = total ? "TOTAL" : client_str(o, "team");
        if (team) {
            char budget[32] = "-", month[32] = "-", used[16] = "-";
            if (!total) {
                money(budget, sizeof budget, o, "budget_per_month");
                money(month, sizeof month, o, "spent_this_month");
                double u = client_num(o, "budget_used", NAN);
                if (isfinite(u)) snprintf(used, sizeof used, "%.0f%%", u * 100);
            }
            client_table_row(&t, name, jobs, gh, cost, planned, actual, r, budget, month, used);
        } else {
            const char *exp = total ? "" : client_str(o, "experiment");
            if (job)
                client_table_row(&t, name, total ? "" : client_str(o, "job"), exp ? exp : "-", gh,
                                 cost, planned, actual, r);
            else client_table_row(&t, name, exp ? exp : "-", jobs, gh, cost, planned, actual, r);
        }
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

/* A CSV field (RFC 4180): quoted when it holds a comma, quote or newline. */
static void csv_field(const char *s, bool last)
{
    s = s ? s : "";
    if (strpbrk(s, ",\"\n\r")) {
        putchar('"');
        for (; *s; s++) {
            if (*s == '"') putchar('"');
            putchar(*s);
        }
        putchar('"');
    } else {
        fputs(s, stdout);
    }
    putchar(last ? '\n' : ',');
}

static void csv_number(const json_t *o, const char *key, bool last)
{
    const json_t *v = json_object_get(o, key);
    char buf[48] = "";
    if (json_is_number(v)) snprintf(buf, sizeof buf, "%.6f", json_number_value(v));
    csv_field(buf, last);
}

static void print_csv(const json_t *v, const char *by)
{
    static const char *const nums[] = {"gpu_hours", "cost", "planned_gpu_hours", "planned_cost",
                                       "actual_gpu_hours", "actual_cost"};
    static const char *const team_nums[] = {"budget_per_month", "spent_this_month", "budget_used"};
    bool team = !strcmp(by, "team");
    printf("team,%sjobs,planned_jobs,gpu_hours,cost,planned_gpu_hours,planned_cost,"
           "actual_gpu_hours,actual_cost%s\n",
           team ? "" : !strcmp(by, "job") ? "experiment,job," : "experiment,",
           team ? ",budget_per_month,spent_this_month,budget_used" : "");
    const json_t *items = json_object_get(v, "items");
    for (size_t i = 0; i <= json_array_size(items); i++) {
        bool total = i == json_array_size(items);
        const json_t *o = total ? json_object_get(v, "total") : json_array_get(items, i);
        csv_field(total ? "TOTAL" : client_str(o, "team"), false);
        if (!team) csv_field(client_str(o, "experiment"), false);
        if (!strcmp(by, "job")) csv_field(client_str(o, "job"), false);
        char n[24];
        snprintf(n, sizeof n, "%lld", client_int(o, "jobs", 0));
        csv_field(n, false);
        snprintf(n, sizeof n, "%lld", client_int(o, "planned_jobs", 0));
        csv_field(n, false);
        for (size_t k = 0; k < 6; k++) csv_number(o, nums[k], !team && k == 5);
        for (size_t k = 0; team && k < 3; k++) csv_number(o, team_nums[k], k == 2);
    }
}

static int cost_run(int argc, char **argv)
{
    client_flags fl = {0};
    const char *by = "team", *since = NULL, *until = NULL, *fmt = "text";
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&fl, "cost", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *a = argv[i++];
        if (!strcmp(a, "--by") || !strcmp(a, "--since") || !strcmp(a, "--until") ||
            !strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i >= argc) return cli_usage_error("cost", "%s needs a value", a);
            const char *v = argv[i++];
            if (!strcmp(a, "--by")) by = v;
            else if (!strcmp(a, "--since")) since = v;
            else if (!strcmp(a, "--until")) until = v;
            else fmt = v;
        } else if (a[0] == '-') {
            return cli_usage_error("cost", "unknown option '%s'", a);
        } else {
            return cli_usage_error("cost", "unexpected argument '%s'", a);
        }
    }
    if (strcmp(by, "team") && strcmp(by, "experiment") && strcmp(by, "job"))
        return cli_usage_error("cost", "--by %s: expected team, experiment or job", by);
    if (strcmp(fmt, "text") && strcmp(fmt, "json") && strcmp(fmt, "csv"))
        return cli_usage_error("cost", "-o %s: expected text, json or csv", fmt);
    char since_buf[64] = "", until_buf[64] = "";
    const char *bad = since && !time_value(since, since_buf, sizeof since_buf)   ? since
                      : until && !time_value(until, until_buf, sizeof until_buf) ? until
                                                                                 : NULL;
    if (bad) {
        fprintf(stderr,
                "lathe cost: %s: expected a date (2026-12-01), a time (2026-12-01T08:00:00Z), a "
                "duration back from now (7d) or `month`\n",
                bad);
        return LT_EXIT_INVALID;
    }
    client *c;
    int rc = client_open(&fl, "cost", &c);
    if (rc) return rc;
    client_error err;
    client_error_init(&err);
    json_t *v = NULL;
    rc = client_cost(c, by, since ? since_buf : NULL, until ? until_buf : NULL, NULL, fl.team, &v,
                     &err);
    if (rc) client_error_print(&err, "cost", stderr);
    else if (!strcmp(fmt, "json")) client_print_json(v, stdout);
    else if (!strcmp(fmt, "csv")) print_csv(v, by);
    else if (json_array_size(json_object_get(v, "items")) == 0)
        printf("no GPU was used%s\n", since ? " in that time" : " yet");
    else print_table(v, by);
    json_decref(v);
    client_error_free(&err);
    client_free(c);
    return rc;
}

const cli_command cli_cmd_cost = {
    .name = "cost",
    .summary = "GPU-hours and money by team, experiment or job; planned against actual; budgets",
    .help = cost_help,
    .run = cost_run,
};
