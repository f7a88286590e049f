/* cmd_cancel.c: `lathe cancel NAME...`: asks the server to stop jobs. A
 * running job's trainer gets SIGTERM, saves a checkpoint and stops (the job
 * is `stopping`, then `cancelled`); a queued job is cancelled at once. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <stdio.h>
#include <string.h>

static const char cancel_help[] =
    "usage: lathe cancel NAME... [--team T] [--server ADDR] [--token TOKEN]\n"
    "\n"
    "Cancels jobs. A queued job is cancelled at once; a running one is asked to\n"
    "save a checkpoint and stop (SIGTERM, then SIGKILL after its grace period)\n"
    "and shows `stopping` until it has. `lathe wait NAME --for finished` waits\n"
    "for that.\n"
    "\n"
    "options:\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 every job cancelled or stopping, 1 usage or token refused, 2 a job\n"
    "      that does not exist or has already ended, 5 server unreachable\n"
    "\n"
    "example:\n"
    "  lathe cancel lora-r8 lora-r32\n";

static int cancel_run(int argc, char **argv)
{
    client_flags fl = {0};
    const char *names[256];
    size_t n = 0;
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&fl, "cancel", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *a = argv[i++];
        if (a[0] == '-') return cli_usage_error("cancel", "unknown option '%s'", a);
        if (n == sizeof names / sizeof names[0])
            return cli_usage_error("cancel", "at most %zu jobs at a time", n);
        names[n++] = a;
    }
    if (!n) return cli_usage_error("cancel", "which job? lathe cancel NAME...");
    client *c;
    int rc = client_open(&fl, "cancel", &c);
    if (rc) return rc;
    for (size_t k = 0; k < n; k++) {
        client_error err;
        client_error_init(&err);
        json_t *job = NULL;
        int r = client_job_cancel(c, names[k], fl.team, &job, &err);
        if (r) {
            client_error_print(&err, "cancel", stderr);
            if (!rc || r == LT_EXIT_UNAVAILABLE) rc = r;
        } else {
            const char *st = client_str(job, "state");
            printf("job/%s %s%s\n", names[k], st ? st : "cancelled",
                   st && !strcmp(st, "stopping") ? " (saving a checkpoint, then it stops)" : "");
        }
        json_decref(job);
        client_error_free(&err);
        if (r == LT_EXIT_UNAVAILABLE) break;
    }
    client_free(c);
    return rc;
}

const cli_command cli_cmd_cancel = {
    .name = "cancel",
    .summary = "stop jobs (they checkpoint first)",
    .help = cancel_help,
    .run = cancel_run,
};
