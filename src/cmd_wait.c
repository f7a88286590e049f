/* cmd_wait.c: `lathe wait NAME [--for succeeded|finished] [--timeout D]`:
 * polls a job until it ends (or the timeout passes), showing its progress,
 * and exits with a code that says how it ended. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Exit codes of `lathe wait` beyond the common ones (docs/cli.md). */
enum {
    WAIT_EXIT_FAILED = 10,
    WAIT_EXIT_CANCELLED = 11,
    WAIT_EXIT_TIMED_OUT = 12, /* the job hit its maxDuration */
    WAIT_EXIT_WAITED = 13     /* --timeout passed before the job ended */
};

/* How long a server may stay unreachable in the middle of a wait (a
 * restart) before wait gives up. */
#define WAIT_UNREACHABLE_GRACE 60.0

static const char wait_help[] =
    "usage: lathe wait NAME [--for succeeded|finished] [--timeout D] [--interval D]\n"
    "                  [--quiet] [--team T] [--server ADDR] [--token TOKEN]\n"
    "\n"
    "Waits until a job ends, showing its progress (a bar with loss and ETA on a\n"
    "terminal, a plain line at each state change and each tenth of the steps\n"
    "otherwise), then prints how it ended. A server that goes away in the middle\n"
    "(a restart) is retried for a minute.\n"
    "\n"
    "options:\n"
    "  --for succeeded          (default) exit 0 only if the job succeeds\n"
    "  --for finished           exit 0 whenever the job ends, whatever its state\n"
    "  --timeout D              give up after D (30s, 10m, 2h); default: never\n"
    "  --interval D             poll every D (default 1s)\n"
    "  -q, --quiet              print only the final line\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 succeeded (or ended, with --for finished), 10 failed, 11 cancelled,\n"
    "      12 timed out (its maxDuration), 13 --timeout passed first, 1 usage or\n"
    "      token refused, 2 no such job, 5 server unreachable\n"
    "\n"
    "examples:\n"
    "  lathe wait lora-r16 --timeout 2h && lathe logs lora-r16 --tail 5\n"
    "  lathe cancel lora-r8 && lathe wait lora-r8 --for finished\n";

typedef struct wait_args {
    client_flags fl;
    const char *name;
    bool for_finished;
    double timeout;  /* 0 = none */
    double interval;
    bool quiet;
} wait_args;

static void wait_sleep(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The exit code for a final state. */
static int wait_exit_for(const char *state, bool for_finished)
{
    if (for_finished || !strcmp(state, "succeeded")) return LT_EXIT_OK;
    if (!strcmp(state, "cancelled")) return WAIT_EXIT_CANCELLED;
    if (!strcmp(state, "timed_out")) return WAIT_EXIT_TIMED_OUT;
    return WAIT_EXIT_FAILED;
}

static bool wait_final(const char *state)
{
    static const char *const finals[] = {"succeeded", "failed", "cancelled", "timed_out"};
    for (size_t i = 0; i < 4; i++)
        if (state && !strcmp(state, finals[i])) return true;
    return false;
}

/* "job/x succeeded: 120 steps, loss 2.3100, attempt 1, 0.0040 GPU-hours, cost 0.01" */
static void wait_print_end(const json_t *job)
{
    const json_t *p = json_object_get(job, "progress");
    printf("job/%s %s", client_str(job, "name"), client_str(job, "state"));
    long long step = client_int(p, "step", -1);
    if (step >= 0) printf(": %lld steps", step);
    double loss = client_num(p, "loss", -1);
    if (loss >= 0) printf(", loss %.4f", loss);
    char money[32];
    client_format_money(money, sizeof money, client_num(job, "cost", 0));
    printf(", attempt %lld, %.4f GPU-hours, cost %s", client_int(job, "attempt", 0),
           client_num(job, "gpu_hours", 0), money);
    const json_t *e = json_object_get(job, "exit");
    if (json_is_object(e) && client_str(e, "reason") && strcmp(client_str(job, "state"), "succeeded"))
        printf(" (%s)", client_str(e, "reason"));
    printf("\n");
}

/* Shows one poll's view of the job. */
static void wait_show(client_live *live, const json_t *job)
{
    sb line;
    sb_init(&line);
    if (live->tty) {
        client_job_line(&line, job, 0, true);
        sb_putc(&line, '\n');
        client_live_frame(live, sb_str(&line));
    } else if (client_live_changed(live, job, &line)) {
        printf("%s\n", sb_str(&line));
        fflush(stdout);
    }
    sb_free(&line);
}

static int wait_loop(client *c, const wait_args *a)
{
    client_live live;
    client_live_init(&live, stdout, a->quiet);
    double start = client_now(), unreachable_since = 0;
    bool ever_answered = false;
    int rc;
    for (;;) {
        client_error err;
        client_error_init(&err);
        json_t *job = NULL;
        rc = client_job_get(c, a->name, a->fl.team, &job, &err);
        double now = client_now();
        if (rc == LT_EXIT_UNAVAILABLE && ever_answered &&
            (unreachable_since == 0 || now - unreachable_since < WAIT_UNREACHABLE_GRACE)) {
            if (unreachable_since == 0) unreachable_since = now;
            rc = -1; /* retry */
        } else if (rc) {
            client_live_end(&live);
            client_error_print(&err, "wait", stderr);
        } else {
            ever_answered = true;
            unreachable_since = 0;
            const char *state = client_str(job, "state");
            if (!a->quiet) wait_show(&live, job);
            if (wait_final(state)) {
                client_live_end(&live);
                wait_print_end(job);
                rc = wait_exit_for(state, a->for_finished);
            } else if (a->timeout > 0 && now - start >= a->timeout) {
                client_live_end(&live);
                printf("job/%s still %s after %.0f s (--timeout)\n", a->name, state ? state : "?",
                       now - start);
                rc = WAIT_EXIT_WAITED;
            } else {
                rc = -1;
            }
        }
        json_decref(job);
        client_error_free(&err);
        if (rc >= 0) break;
        wait_sleep(a->interval);
    }
    client_live_free(&live);
    return rc;
}

static int wait_parse(int argc, char **argv, wait_args *a)
{
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&a->fl, "wait", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *o = argv[i++];
        const char *val = i < argc ? argv[i] : NULL;
        if (!strcmp(o, "--for")) {
            if (!val || (strcmp(val, "succeeded") && strcmp(val, "finished")))
                return cli_usage_error("wait", "--for takes succeeded or finished");
            a->for_finished = !strcmp(val, "finished");
            i++;
        } else if (!strcmp(o, "--timeout") || !strcmp(o, "--interval")) {
            double d;
            if (!val || !units_parse_duration(val, &d))
                return cli_usage_error("wait", "%s takes a duration such as 30s or 10m", o);
            *(o[2] == 't' ? &a->timeout : &a->interval) = d;
            i++;
        } else if (!strcmp(o, "-q") || !strcmp(o, "--quiet")) {
            a->quiet = true;
        } else if (o[0] == '-') {
            return cli_usage_error("wait", "unknown option '%s'", o);
        } else if (a->name) {
            return cli_usage_error("wait", "one job at a time (got '%s' and '%s')", a->name, o);
        } else {
            a->name = o;
        }
    }
    if (!a->name) return cli_usage_error("wait", "which job? lathe wait NAME");
    return LT_EXIT_OK;
}

static int wait_run(int argc, char **argv)
{
    wait_args a = {.interval = 1.0};
    int rc = wait_parse(argc, argv, &a);
    if (rc) return rc;
    client *c;
    if ((rc = client_open(&a.fl, "wait", &c))) return rc;
    rc = wait_loop(c, &a);
    client_free(c);
    return rc;
}

const cli_command cli_cmd_wait = {
    .name = "wait",
    .summary = "wait for a job to end; the exit code says how it ended",
    .help = wait_help,
    .run = wait_run,
};
