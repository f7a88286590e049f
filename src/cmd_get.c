/* cmd_get.c: `lathe get jobs|experiments|nodes|teams|priorityclasses
 * [NAME]`: lists objects of the server as a table (kubectl style), a wider
 * table, JSON or YAML. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char get_help[] =
    "usage: lathe get RESOURCE [NAME] [-o wide|json|yaml] [--state S] [--experiment E]\n"
    "                 [--limit N] [--team T] [--server ADDR] [--token TOKEN]\n"
    "\n"
    "Lists objects of a lathe server. RESOURCE is one of\n"
    "  jobs (job)                  training jobs, newest first\n"
    "  experiments (experiment)    experiments and their jobs' states\n"
    "  nodes (node)                nodes, their GPUs and who uses them\n"
    "  teams (team)                quotas, GPUs in use, budget spent\n"
    "  priorityclasses (pc)        priority classes\n"
    "With NAME, only that object (-o json / yaml then print the object itself).\n"
    "\n"
    "options:\n"
    "  -o, --output FORMAT      text (default), wide (more columns), json or yaml\n"
    "  --state S                jobs in these states (queued,starting,running,stopping,\n"
    "                           succeeded,failed,cancelled,timed_out; comma-separated)\n"
    "  --experiment E           jobs of this experiment\n"
    "  --limit N                at most N jobs (default: all, fetched 1,000 a page)\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 ok, 1 usage or token refused, 2 no such object, 5 server unreachable\n"
    "\n"
    "examples:\n"
    "  lathe get jobs\n"
    "  lathe get jobs --state running,queued -o wide\n"
    "  lathe get job lora-r16 -o yaml\n"
    "  lathe get nodes -o json | jq '.items[].gpus'\n";

typedef enum { RES_JOBS, RES_EXPERIMENTS, RES_NODES, RES_TEAMS, RES_CLASSES } get_resource;

typedef struct get_args {
    client_flags fl;
    get_resource res;
    bool have_res;
    const char *name;
    cli_output fmt;
    const char *states;
    const char *experiment;
    long limit;
} get_args;

static bool get_parse_resource(const char *s, get_resource *r)
{
    static const struct { const char *name; get_resource r; } tab[] = {
        {"jobs", RES_JOBS},        {"job", RES_JOBS},
        {"experiments", RES_EXPERIMENTS}, {"experiment", RES_EXPERIMENTS}, {"exp", RES_EXPERIMENTS},
        {"nodes", RES_NODES},      {"node", RES_NODES},
        {"teams", RES_TEAMS},      {"team", RES_TEAMS},
        {"priorityclasses", RES_CLASSES}, {"priorityclass", RES_CLASSES}, {"pc", RES_CLASSES},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(s, tab[i].name)) {
            *r = tab[i].r;
            return true;
        }
    return false;
}

/* ---- cells ---- */

/* "A100-80GB=64 L4=2" from {"A100-80GB": 64, "L4": 2}; "-" when empty. */
static void map_text(char *out, size_t outsz, const json_t *m)
{
    sb s;
    sb_init(&s);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        if (s.len) sb_putc(&s, ' ');
        if (json_is_integer(v)) sb_printf(&s, "%s=%lld", k, (long long)json_integer_value(v));
        else if (json_is_number(v)) sb_printf(&s, "%s=%g", k, json_number_value(v));
    }
    snprintf(out, outsz, "%s", s.len ? sb_str(&s) : "-");
    sb_free(&s);
}

/* A number with the given format, or "-" when it is missing. */
static void num_text(char *out, size_t outsz, const json_t *o, const char *key, const char *fmt)
{
    double v = client_num(o, key, NAN);
    if (isfinite(v)) snprintf(out, outsz, fmt, v);
    else snprintf(out, outsz, "-");
}

/* ---- jobs ---- */

/* "node-1:0,1" from the placement; "node-1:0(18%)" for a job that shares
 * its GPU. */
static void placement_text(char *out, size_t outsz, const json_t *job)
{
    const json_t *p = json_object_get(job, "placement");
    if (!json_is_object(p)) {
        snprintf(out, outsz, "-");
        return;
    }
    sb s;
    sb_init(&s);
    sb_printf(&s, "%s:", client_str(p, "node") ? client_str(p, "node") : "?");
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(p, "gpus"), i, g)
        sb_printf(&s, "%s%lld", i ? "," : "", (long long)json_integer_value(g));
    double share = client_num(p, "share", 1);
    if (share > 0 && share < 1) sb_printf(&s, "(%.0f%%)", share * 100);
    snprintf(out, outsz, "%s", sb_str(&s));
    sb_free(&s);
}

static void get_job_row(client_table *t, const json_t *j, bool wide, double now)
{
    const json_t *p = json_object_get(j, "progress");
    char prog[48] = "-", loss[32], age[32], attempt[32], gh[32], cost[32], place[128],
         prio[48], best[48];
    long long step = client_int(p, "step", -1), total = client_int(p, "total_steps", -1);
    if (step >= 0 && total > 0) snprintf(prog, sizeof prog, "%lld/%lld", step, total);
    else if (step >= 0) snprintf(prog, sizeof prog, "%lld", step);
    num_text(loss, sizeof loss, p, "loss", "%.4f");
    double created = 0;
    client_parse_time(client_str(j, "created_at"), &created);
    client_format_age(age, sizeof age, created, now);
    if (!wide) {
        client_table_row(t, client_str(j, "name"), client_str(j, "team"), client_str(j, "state"),
                         prog, loss, age);
        return;
    }
    snprintf(attempt, sizeof attempt, "%lld/%lld", client_int(j, "attempt", 0),
             client_int(j, "max_retries", 0) + 1);
    num_text(gh, sizeof gh, j, "gpu_hours", "%.3f");
    client_format_money(cost, sizeof cost, client_num(j, "cost", 0));
    placement_text(place, sizeof place, j);
    snprintf(prio, sizeof prio, "%s",
             client_str(j, "priority_class") ? client_str(j, "priority_class") : "-");
    const json_t *ev = json_object_get(j, "eval");
    if (json_is_object(ev) && isfinite(client_num(ev, "best_loss", NAN)))
        snprintf(best, sizeof best, "%.4f@%lld", client_num(ev, "best_loss", NAN),
                 client_int(ev, "best_step", -1));
    else
        snprintf(best, sizeof best, "-");
    client_table_row(t, client_str(j, "name"), client_str(j, "team"), client_str(j, "state"),
                     prog, loss, best, age, client_str(j, "experiment"), prio, attempt, place, gh,
                     cost, client_str(j, "wait_reason"));
}

static void get_jobs_table(const json_t *items, bool wide)
{
    client_table t;
    if (wide)
        client_table_init(&t, 14, "NAME", "TEAM", "STATE", "PROGRESS", "LOSS", "BEST-EVAL", "AGE",
                          "EXPERIMENT", "PRIORITY", "ATTEMPT", "NODE:GPUS", "GPU-HOURS", "COST",
                          "WAITING");
    else
        client_table_init(&t, 6, "NAME", "TEAM", "STATE", "PROGRESS", "LOSS", "AGE");
    double now = client_now();
    size_t i;
    const json_t *j;
    json_array_foreach(items, i, j) get_job_row(&t, j, wide, now);
    client_table_print(&t, stdout);
    client_table_free(&t);
}

/* ---- experiments ---- */

static void get_experiments_table(const json_t *items, bool wide)
{
    client_table t;
    client_table_init(&t, wide ? 8 : 6, "NAME", "TEAM", "JOBS", "RUNNING", "QUEUED",
                      "SUCCEEDED", "FAILED", "MAX-CONCURRENT");
    size_t i;
    const json_t *e;
    json_array_foreach(items, i, e) {
        const json_t *st = json_object_get(e, "states");
        char jobs[24], run[24], queued[24], ok[24], failed[24], maxc[24];
        const json_t *jv = json_object_get(e, "jobs");
        snprintf(jobs, sizeof jobs, "%lld",
                 json_is_array(jv) ? (long long)json_array_size(jv) : client_int(e, "jobs", 0));
        snprintf(run, sizeof run, "%lld", client_int(st, "running", 0));
        snprintf(queued, sizeof queued, "%lld", client_int(st, "queued", 0));
        snprintf(ok, sizeof ok, "%lld", client_int(st, "succeeded", 0));
        snprintf(failed, sizeof failed, "%lld", client_int(st, "failed", 0));
        long long mc = client_int(e, "max_concurrent", 0);
        if (mc > 0) snprintf(maxc, sizeof maxc, "%lld", mc);
        else snprintf(maxc, sizeof maxc, "none");
        client_table_row(&t, client_str(e, "name"), client_str(e, "team"), jobs, run, queued, ok,
                         failed, maxc);
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

/* ---- nodes ---- */

/* "0:r8 1:r16(25%),r32(10%) 2:- 3:-": jobs that share a GPU with their part */
static void node_gpus_text(sb *s, const json_t *node)
{
    size_t i, k;
    const json_t *g, *j;
    json_array_foreach(json_object_get(node, "gpus"), i, g) {
        if (s->len) sb_putc(s, ' ');
        sb_printf(s, "%lld:", client_int(g, "index", (long long)i));
        const json_t *jobs = json_object_get(g, "jobs");
        if (!json_array_size(jobs)) sb_putc(s, '-');
        json_array_foreach(jobs, k, j) {
            const char *job = client_str(j, "name"); /* null: another team's */
            sb_printf(s, "%s%s", k ? "," : "", job ? job : "-");
            double share = json_number_value(json_object_get(j, "share"));
            if (share > 0 && share < 1) sb_printf(s, "(%.0f%%)", share * 100);
        }
    }
}

static void get_nodes_table(const json_t *items, bool wide)
{
    client_table t;
    client_table_init(&t, wide ? 7 : 5, "NAME", "STATE", "GPU-TYPE", "GPUS", "IN-USE", "RACK",
                      "GPU:JOBS");
    size_t i, k;
    const json_t *n, *g;
    json_array_foreach(items, i, n) {
        size_t used = 0;
        const json_t *gpus = json_object_get(n, "gpus");
        json_array_foreach(gpus, k, g) used += json_array_size(json_object_get(g, "jobs")) > 0;
        char total[24], inuse[24];
        snprintf(total, sizeof total, "%zu", json_array_size(gpus));
        snprintf(inuse, sizeof inuse, "%zu", used);
        sb s;
        sb_init(&s);
        node_gpus_text(&s, n);
        client_table_row(&t, client_str(n, "name"), client_str(n, "state"),
                         client_str(n, "gpu_type"), total, inuse, client_str(n, "rack"), sb_str(&s));
        sb_free(&s);
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

/* ---- teams and priority classes ---- */

static void get_teams_table(const json_t *items, bool wide)
{
    client_table t;
    client_table_init(&t, wide ? 10 : 7, "NAME", "QUOTA", "IN-USE", "RUNNING", "QUEUED",
                      "SPENT", "BUDGET", "BORROWED", "LENT", "WEIGHT");
    size_t i;
    const json_t *x;
    json_array_foreach(items, i, x) {
        char quota[256], inuse[256], borrowed[256], lent[256], run[24], queued[24], spent[32],
            budget[32], weight[32];
        map_text(quota, sizeof quota, json_object_get(x, "quota"));
        map_text(inuse, sizeof inuse, json_object_get(x, "in_use"));
        map_text(borrowed, sizeof borrowed, json_object_get(x, "borrowed"));
        map_text(lent, sizeof lent, json_object_get(x, "lent"));
        snprintf(run, sizeof run, "%lld", client_int(x, "running", 0));
        snprintf(queued, sizeof queued, "%lld", client_int(x, "queued", 0));
        client_format_money(spent, sizeof spent, client_num(x, "spent_this_month", 0));
        double b = client_num(x, "budget_per_month", 0);
        if (b > 0) snprintf(budget, sizeof budget, "%.2f", b);
        else snprintf(budget, sizeof budget, "none");
        num_text(weight, sizeof weight, x, "weight", "%g");
        client_table_row(&t, client_str(x, "name"), quota, inuse, run, queued, spent, budget,
                         borrowed, lent, weight);
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

static void get_classes_table(const json_t *items)
{
    client_table t;
    client_table_init(&t, 4, "NAME", "VALUE", "PREEMPTION", "DEFAULT");
    size_t i;
    const json_t *x;
    json_array_foreach(items, i, x) {
        char value[32];
        snprintf(value, sizeof value, "%lld", client_int(x, "value", 0));
        client_table_row(&t, client_str(x, "name"), value, client_str(x, "preemption_policy"),
                         json_is_true(json_object_get(x, "global_default")) ? "yes" : "no");
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

/* ---- fetching ---- */

/* Keeps only the item called name; an error when there is none. */
static int get_pick(json_t **list, const char *what, const char *name, client_error *err)
{
    json_t *items = json_object_get(*list, "items");
    size_t i;
    json_t *x;
    json_array_foreach(items, i, x) {
        const char *n = client_str(x, "name");
        if (n && !strcmp(n, name)) {
            json_incref(x);
            json_decref(*list);
            *list = x;
            return LT_EXIT_OK;
        }
    }
    client_error_set(err, LT_EXIT_INVALID, "not_found", "%s %s not found", what, name);
    return err->exit_code;
}

/* Fetches what the arguments ask for into *out: {"items": [...]} for a
 * list, the object for a NAME. */
static int get_fetch(client *c, const get_args *a, json_t **out, client_error *err)
{
    if (a->res == RES_JOBS && a->name) return client_job_get(c, a->name, a->fl.team, out, err);
    if (a->res == RES_EXPERIMENTS && a->name)
        return client_experiment_get(c, a->name, a->fl.team, out, err);
    int rc;
    const char *what = "node";
    switch (a->res) {
    case RES_JOBS: {
        client_job_filter f = {.team = a->fl.team, .states = a->states,
                               .experiment = a->experiment};
        json_t *items = NULL;
        rc = client_jobs_list_all(c, &f, a->limit > 0 ? (size_t)a->limit : 0, &items, err);
        if (!rc) *out = json_pack("{s:o}", "items", items);
        return rc;
    }
    case RES_EXPERIMENTS: return client_experiments_list(c, a->fl.team, out, err);
    case RES_NODES: rc = client_nodes_list(c, out, err); break;
    case RES_TEAMS: rc = client_teams_list(c, out, err); what = "team"; break;
    default: rc = client_priority_classes_list(c, out, err); what = "priority class"; break;
    }
    if (!rc && a->name) rc = get_pick(out, what, a->name, err);
    return rc;
}

static void get_print_text(const get_args *a, json_t *v)
{
    bool wide = a->fmt == CLI_OUT_WIDE;
    json_t *items = json_object_get(v, "items");
    json_t *one = NULL;
    if (!items) { /* a single object: a table of one row */
        one = json_array();
        json_array_append(one, v);
        items = one;
    }
    switch (a->res) {
    case RES_JOBS: get_jobs_table(items, wide); break;
    case RES_EXPERIMENTS: get_experiments_table(items, wide); break;
    case RES_NODES: get_nodes_table(items, wide); break;
    case RES_TEAMS: get_teams_table(items, wide); break;
    case RES_CLASSES: get_classes_table(items); break;
    }
    if (!json_array_size(items)) fprintf(stderr, "no objects found\n");
    json_decref(one);
}

static int get_parse(int argc, char **argv, get_args *a)
{
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&a->fl, "get", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *o = argv[i++];
        const char *val = i < argc ? argv[i] : NULL;
        if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            if (!val || !cli_parse_output(val, &a->fmt))
                return cli_usage_error("get", "%s takes text, wide, json or yaml", o);
            i++;
        } else if (!strcmp(o, "--state") || !strcmp(o, "--experiment")) {
            if (!val) return cli_usage_error("get", "%s needs a value", o);
            *(o[2] == 's' ? &a->states : &a->experiment) = val;
            i++;
        } else if (!strcmp(o, "--limit")) {
            char *end;
            a->limit = val ? strtol(val, &end, 10) : 0;
            if (!val || *end || a->limit < 1)
                return cli_usage_error("get", "--limit takes a positive number");
            i++;
        } else if (o[0] == '-') {
            return cli_usage_error("get", "unknown option '%s'", o);
        } else if (!a->have_res) {
            if (!get_parse_resource(o, &a->res))
                return cli_usage_error("get", "'%s' is not a resource: jobs, experiments, "
                                       "nodes, teams or priorityclasses", o);
            a->have_res = true;
        } else if (!a->name) {
            a->name = o;
        } else {
            return cli_usage_error("get", "unexpected argument '%s'", o);
        }
    }
    if (!a->have_res)
        return cli_usage_error("get", "what? lathe get jobs|experiments|nodes|teams|priorityclasses");
    if ((a->states || a->experiment || a->limit) && a->res != RES_JOBS)
        return cli_usage_error("get", "--state, --experiment and --limit apply to jobs");
    return LT_EXIT_OK;
}

static int get_run(int argc, char **argv)
{
    get_args a = {.fmt = CLI_OUT_TEXT};
    int rc = get_parse(argc, argv, &a);
    if (rc) return rc;
    client *c;
    if ((rc = client_open(&a.fl, "get", &c))) return rc;
    client_error err;
    client_error_init(&err);
    json_t *v = NULL;
    rc = get_fetch(c, &a, &v, &err);
    if (rc) client_error_print(&err, "get", stderr);
    else if (a.fmt == CLI_OUT_JSON) client_print_json(v, stdout);
    else if (a.fmt == CLI_OUT_YAML) client_print_yaml(v, stdout);
    else get_print_text(&a, v);
    json_decref(v);
    client_error_free(&err);
    client_free(c);
    return rc;
}

const cli_command cli_cmd_get = {
    .name = "get",
    .summary = "list jobs, experiments, nodes or teams of a lathe server",
    .help = get_help,
    .run = get_run,
};
