/* cmd_logs.c: `lathe logs NAME [-f] [--attempt N] [--tail N]`: a job's
 * trainer output (stdout and stderr) from the server, streamed as it
 * arrives; with -f it keeps following until the attempt ends. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char logs_help[] =
    "usage: lathe logs NAME [-f] [--attempt N] [--tail N] [--team T] [--server ADDR]\n"
    "                  [--token TOKEN]\n"
    "\n"
    "Prints the output (stdout and stderr) of a job's trainer.\n"
    "\n"
    "options:\n"
    "  -f, --follow             keep printing new lines until the attempt ends\n"
    "  --attempt N              that attempt (default: the latest)\n"
    "  --tail N                 only the last N lines\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 ok, 1 usage or token refused, 2 no such job or attempt, 5 server\n"
    "      unreachable\n"
    "\n"
    "examples:\n"
    "  lathe logs lora-r16 --tail 20\n"
    "  lathe logs lora-r16 -f | grep loss\n";

/* Writes a piece of the log to standard output at once. */
static bool logs_write(void *ctx, const char *data, size_t len)
{
    (void)ctx;
    if (fwrite(data, 1, len, stdout) != len) return false; /* a closed pipe */
    fflush(stdout);
    return true;
}

/* A whole number in [lo, hi] or a usage error. */
static bool logs_number(const char *s, long lo, long hi, long *out)
{
    char *end;
    if (!s) return false;
    long v = strtol(s, &end, 10);
    if (*end || end == s || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static int logs_run(int argc, char **argv)
{
    client_flags fl = {0};
    client_logs_opts o = {.attempt = 0, .tail = -1, .follow = false};
    const char *name = NULL;
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&fl, "logs", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *a = argv[i++];
        long n;
        if (!strcmp(a, "-f") || !strcmp(a, "--follow")) {
            o.follow = true;
        } else if (!strcmp(a, "--attempt")) {
            if (!logs_number(i < argc ? argv[i] : NULL, 1, 1000000, &n))
                return cli_usage_error("logs", "--attempt takes a number from 1");
            o.attempt = (int)n;
            i++;
        } else if (!strcmp(a, "--tail")) {
            if (!logs_number(i < argc ? argv[i] : NULL, 0, 1000000000, &n))
                return cli_usage_error("logs", "--tail takes a number of lines");
            o.tail = n;
            i++;
        } else if (a[0] == '-') {
            return cli_usage_error("logs", "unknown option '%s'", a);
        } else if (name) {
            return cli_usage_error("logs", "one job at a time (got '%s' and '%s')", name, a);
        } else {
            name = a;
        }
    }
    if (!name) return cli_usage_error("logs", "which job? lathe logs NAME");
    client *c;
    int rc = client_open(&fl, "logs", &c);
    if (rc) return rc;
    client_error err;
    client_error_init(&err);
    rc = client_job_logs(c, name, fl.team, &o, logs_write, NULL, &err);
    if (rc) client_error_print(&err, "logs", stderr);
    client_error_free(&err);
    client_free(c);
    return rc;
}

const cli_command cli_cmd_logs = {
    .name = "logs",
    .summary = "print (or follow) a job's trainer output",
    .help = logs_help,
    .run = logs_run,
};
