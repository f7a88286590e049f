/* cmd_describe.c: `lathe describe job NAME` (and `describe experiment
 * NAME`): everything the server knows about one job, for a person: plan,
 * placement, why it waits, attempts, progress, the loss and the eval loss,
 * checkpoints, the final adapter, cost, exit and its events. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char describe_help[] =
    "usage: lathe describe job NAME [--team T] [--server ADDR] [--token TOKEN]\n"
    "       lathe describe experiment NAME\n"
    "\n"
    "Shows one job: state and attempts, priority, the plan (method, GPUs,\n"
    "micro-batch, memory per GPU, estimated GPU-hours and cost), where it runs,\n"
    "why it waits, progress, the loss so far (first, lowest, last), the eval loss\n"
    "(latest and best, with the checkpoint of the best step), checkpoints, the\n"
    "final adapter, GPU-hours and cost so far, how its last attempt ended, and its\n"
    "events in order. For an experiment, its jobs with their best eval loss.\n"
    "\n"
    "options:\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 ok, 1 usage or token refused, 2 no such job, 5 server unreachable\n"
    "\n"
    "examples:\n"
    "  lathe describe job lora-r16\n"
    "  lathe describe experiment demo-lora\n";

/* "2026-11-29T21:54:00Z (3m ago)"; "-" when absent. */
static void when_text(char *out, size_t outsz, const char *t, double now)
{
    double v;
    if (!t) {
        snprintf(out, outsz, "-");
    } else if (client_parse_time(t, &v)) {
        char age[32];
        client_format_age(age, sizeof age, v, now);
        snprintf(out, outsz, "%s (%s ago)", t, age);
    } else {
        snprintf(out, outsz, "%s", t);
    }
}

static void field(const char *name, const char *value)
{
    printf("%-13s %s\n", name, value && *value ? value : "-");
}

static void describe_plan(const json_t *plan)
{
    if (!json_is_object(plan)) {
        field("Plan:", NULL);
        return;
    }
    char line[512];
    snprintf(line, sizeof line, "%s on %lld x %s (%.2f GiB per GPU), %s, micro-batch %lld x %lld "
             "accumulation, gradient checkpointing %s",
             client_str(plan, "method") ? client_str(plan, "method") : "?",
             client_int(plan, "gpus", 0),
             client_str(plan, "gpu_type") ? client_str(plan, "gpu_type") : "?",
             client_num(plan, "per_gpu_gib", 0),
             client_str(plan, "strategy") ? client_str(plan, "strategy") : "?",
             client_int(plan, "micro_batch", 0), client_int(plan, "gradient_accumulation", 0),
             json_is_true(json_object_get(plan, "gradient_checkpointing")) ? "on" : "off");
    field("Plan:", line);
    double gh = client_num(plan, "gpu_hours", NAN), cost = client_num(plan, "cost", NAN);
    if (isfinite(gh)) {
        char money[32];
        client_format_money(money, sizeof money, isfinite(cost) ? cost : 0);
        snprintf(line, sizeof line, "estimated %.4f GPU-hours, cost %s", gh, money);
        field("", line);
    }
}

static void describe_placement(const json_t *job)
{
    const json_t *p = json_object_get(job, "placement");
    if (!json_is_object(p)) {
        field("Placement:", NULL);
        return;
    }
    sb s;
    sb_init(&s);
    sb_printf(&s, "node %s, %s GPUs ", client_str(p, "node") ? client_str(p, "node") : "?",
              client_str(p, "gpu_type") ? client_str(p, "gpu_type") : "?");
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(p, "gpus"), i, g)
        sb_printf(&s, "%s%lld", i ? "," : "", (long long)json_integer_value(g));
    double share = client_num(p, "share", 1);
    if (share > 0 && share < 1) sb_printf(&s, " (%.0f%% of it, shared)", share * 100);
    field("Placement:", sb_str(&s));
    sb_free(&s);
}

static void describe_progress(const json_t *job)
{
    char text[256], bar[32], line[320];
    client_progress_text(text, sizeof text, job);
    if (!*text) {
        field("Progress:", NULL);
        return;
    }
    const json_t *p = json_object_get(job, "progress");
    long long step = client_int(p, "step", 0), total = client_int(p, "total_steps", 0);
    if (total > 0) {
        client_progress_bar(bar, sizeof bar, (double)step / (double)total, 20);
        snprintf(line, sizeof line, "[%s] %s", bar, text);
        field("Progress:", line);
    } else {
        field("Progress:", text);
    }
}

/* "11.8409 at step 1, lowest 10.6461 at step 45, last 11.4705 at step 120
 * (120 points)" from the progress history. */
static void describe_loss(const json_t *progress)
{
    const json_t *items = json_object_get(progress, "items");
    size_t i, n = 0;
    const json_t *p, *first = NULL, *low = NULL, *last = NULL;
    json_array_foreach(items, i, p) {
        double loss = client_num(p, "loss", NAN);
        if (!isfinite(loss)) continue;
        if (!first) first = p;
        if (!low || loss < client_num(low, "loss", NAN)) low = p;
        last = p;
        n++;
    }
    if (!n) {
        field("Loss:", NULL);
        return;
    }
    char line[256];
    snprintf(line, sizeof line, "%.4f at step %lld, lowest %.4f at step %lld, last %.4f at step "
             "%lld (%zu points)",
             client_num(first, "loss", 0), client_int(first, "step", 0), client_num(low, "loss", 0),
             client_int(low, "step", 0), client_num(last, "loss", 0), client_int(last, "step", 0),
             n);
    field("Loss:", line);
}

/* "1.4020 at step 120, best 1.3980 at step 100 (checkpoint PATH)", from the
 * job's eval object; "-" before the first evaluation. */
static void describe_eval(const json_t *job)
{
    const json_t *e = json_object_get(job, "eval");
    if (!json_is_object(e)) {
        field("Eval loss:", NULL);
        return;
    }
    char line[4400];
    int n = snprintf(line, sizeof line, "%.4f at step %lld, best %.4f at step %lld",
                     client_num(e, "loss", NAN), client_int(e, "step", -1),
                     client_num(e, "best_loss", NAN), client_int(e, "best_step", -1));
    const char *ck = client_str(e, "best_checkpoint");
    if (ck && n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " (checkpoint %s)", ck);
    field("Eval loss:", line);
}

static void describe_exit(const json_t *job)
{
    const json_t *e = json_object_get(job, "exit");
    if (!json_is_object(e)) {
        field("Last exit:", NULL);
        return;
    }
    char line[256];
    const json_t *code = json_object_get(e, "code"), *sig = json_object_get(e, "signal");
    if (json_is_integer(sig) && json_integer_value(sig) > 0)
        snprintf(line, sizeof line, "signal %lld (%s)", (long long)json_integer_value(sig),
                 client_str(e, "reason") ? client_str(e, "reason") : "?");
    else
        snprintf(line, sizeof line, "code %lld (%s)",
                 json_is_integer(code) ? (long long)json_integer_value(code) : -1LL,
                 client_str(e, "reason") ? client_str(e, "reason") : "?");
    field("Last exit:", line);
}

static void describe_checkpoints(const json_t *job, double now)
{
    const json_t *cps = json_object_get(job, "checkpoints");
    if (!json_array_size(cps)) {
        field("Checkpoints:", "none yet");
        return;
    }
    printf("Checkpoints:\n");
    client_table t;
    client_table_init(&t, 3, "  STEP", "AGE", "PATH");
    size_t i;
    const json_t *c;
    json_array_foreach(cps, i, c) {
        char step[32], age[32];
        double at = 0;
        snprintf(step, sizeof step, "  %lld", client_int(c, "step", -1));
        client_parse_time(client_str(c, "at"), &at);
        client_format_age(age, sizeof age, at, now);
        client_table_row(&t, step, age, client_str(c, "path"));
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

/* Attempts, from the job's "attempts" list when the server gives one, else
 * counted from the events that start one. */
static void describe_attempts(const json_t *job, const json_t *events)
{
    char line[128];
    long long attempt = client_int(job, "attempt", 0), retries = client_int(job, "max_retries", 0);
    size_t i, starts = 0, preempted = 0, retried = 0;
    const json_t *e;
    json_array_foreach(events, i, e) {
        const char *type = client_str(e, "type");
        if (!type) continue;
        starts += !strcmp(type, "started");
        preempted += !strcmp(type, "preempted");
        retried += !strcmp(type, "retrying");
    }
    snprintf(line, sizeof line, "%lld of at most %lld (%zu started, %zu preempted, %zu retried)",
             attempt, retries + 1, starts, preempted, retried);
    field("Attempts:", line);
}

static void describe_events(const json_t *events, double now)
{
    printf("Events:\n");
    if (!json_array_size(events)) {
        printf("  none\n");
        return;
    }
    client_table t;
    client_table_init(&t, 4, "  AGE", "ACTOR", "TYPE", "MESSAGE");
    size_t i;
    const json_t *e;
    json_array_foreach(events, i, e) {
        char age[40];
        double at = 0;
        client_parse_time(client_str(e, "at"), &at);
        client_format_age(age + 2, sizeof age - 2, at, now);
        age[0] = age[1] = ' ';
        client_table_row(&t, age, client_str(e, "actor"), client_str(e, "type"),
                         client_str(e, "message"));
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

static void describe_job(const json_t *job, const json_t *events, const json_t *progress)
{
    double now = client_now();
    char line[512];
    field("Name:", client_str(job, "name"));
    field("Team:", client_str(job, "team"));
    field("Experiment:", client_str(job, "experiment"));
    field("State:", client_str(job, "state"));
    snprintf(line, sizeof line, "%s (%lld)",
             client_str(job, "priority_class") ? client_str(job, "priority_class") : "default",
             client_int(job, "priority", 0));
    field("Priority:", line);
    when_text(line, sizeof line, client_str(job, "created_at"), now);
    field("Created:", line);
    when_text(line, sizeof line, client_str(job, "started_at"), now);
    field("Started:", line);
    when_text(line, sizeof line, client_str(job, "finished_at"), now);
    field("Finished:", line);
    describe_attempts(job, json_object_get(events, "items"));
    describe_plan(json_object_get(job, "plan"));
    describe_placement(job);
    field("Waiting:", client_str(job, "wait_reason"));
    if (client_str(job, "not_before")) {
        when_text(line, sizeof line, client_str(job, "not_before"), now);
        field("Retry after:", line);
    }
    describe_progress(job);
    describe_loss(progress);
    describe_eval(job);
    char money[32];
    client_format_money(money, sizeof money, client_num(job, "cost", 0));
    snprintf(line, sizeof line, "%.4f GPU-hours, cost %s", client_num(job, "gpu_hours", 0), money);
    field("Used:", line);
    describe_exit(job);
    describe_checkpoints(job, now);
    if (client_str(job, "adapter")) field("Adapter:", client_str(job, "adapter"));
    describe_events(json_object_get(events, "items"), now);
}

static void describe_experiment(const json_t *exp)
{
    field("Name:", client_str(exp, "name"));
    field("Team:", client_str(exp, "team"));
    long long mc = client_int(exp, "max_concurrent", 0);
    char line[64];
    snprintf(line, sizeof line, "%lld", mc);
    field("Max running:", mc > 0 ? line : "no limit");
    printf("Jobs:\n");
    client_table t;
    client_table_init(&t, 6, "  NAME", "STATE", "PROGRESS", "BEST-EVAL", "GPU-HOURS", "WAITING");
    size_t i;
    const json_t *j;
    json_array_foreach(json_object_get(exp, "jobs"), i, j) {
        char name[128], prog[256], gh[32], ev[48] = "-";
        snprintf(name, sizeof name, "  %s", client_str(j, "name") ? client_str(j, "name") : "?");
        client_progress_text(prog, sizeof prog, j);
        snprintf(gh, sizeof gh, "%.4f", client_num(j, "gpu_hours", 0));
        const json_t *e = json_object_get(j, "eval");
        if (json_is_object(e) && isfinite(client_num(e, "best_loss", NAN)))
            snprintf(ev, sizeof ev, "%.4f@%lld", client_num(e, "best_loss", NAN),
                     client_int(e, "best_step", -1));
        client_table_row(&t, name, client_str(j, "state"), prog, ev, gh, client_str(j, "wait_reason"));
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

static int describe_run(int argc, char **argv)
{
    client_flags fl = {0};
    const char *kind = NULL, *name = NULL;
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&fl, "describe", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *a = argv[i++];
        if (a[0] == '-') return cli_usage_error("describe", "unknown option '%s'", a);
        if (!kind) kind = a;
        else if (!name) name = a;
        else return cli_usage_error("describe", "unexpected argument '%s'", a);
    }
    bool is_job = kind && (!strcmp(kind, "job") || !strcmp(kind, "jobs"));
    bool is_exp = kind && (!strcmp(kind, "experiment") || !strcmp(kind, "experiments") ||
                           !strcmp(kind, "exp"));
    if (!is_job && !is_exp)
        return cli_usage_error("describe", "lathe describe job NAME (or experiment NAME)");
    if (!name) return cli_usage_error("describe", "which %s? lathe describe %s NAME", kind, kind);
    client *c;
    int rc = client_open(&fl, "describe", &c);
    if (rc) return rc;
    client_error err;
    client_error_init(&err);
    json_t *obj = NULL, *events = NULL, *progress = NULL;
    if (is_exp) {
        rc = client_experiment_get(c, name, fl.team, &obj, &err);
        if (!rc) describe_experiment(obj);
    } else {
        rc = client_job_get(c, name, fl.team, &obj, &err);
        if (!rc) rc = client_job_events(c, name, fl.team, &events, &err);
        if (!rc) rc = client_job_progress(c, name, fl.team, 0, &progress, &err);
        if (!rc) describe_job(obj, events, progress);
    }
    if (rc) client_error_print(&err, "describe", stderr);
    json_decref(obj);
    json_decref(events);
    json_decref(progress);
    client_error_free(&err);
    client_free(c);
    return rc;
}

const cli_command cli_cmd_describe = {
    .name = "describe",
    .summary = "show one job (plan, placement, waits, attempts, events) in detail",
    .help = describe_help,
    .run = describe_run,
};
