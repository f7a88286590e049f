/* cmd_cancel.c: `lathe cancel NAME...`: asks the server to stop jobs. A
 * running job's trainer gets SIGTERM, saves a checkpoint and stops (the job
 * is `stopping`, then `cancelled`); a queued job is cancelled at once. With
 * --delete it removes jobs that have ended (and their events) instead, and
 * with --purge their folders on the server as well. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <stdio.h>
#include <string.h>

static const char cancel_help[] =
    "usage: lathe cancel NAME... [--delete [--purge]] [--team T] [--server ADDR] [--token TOKEN]\n"
    "\n"
    "Cancels jobs. A queued job is cancelled at once; a running one is asked to\n"
    "save a checkpoint and stop (SIGTERM, then SIGKILL after its grace period)\n"
    "and shows `stopping` until it has. `lathe wait NAME --for finished` waits\n"
    "for that. With --delete, removes jobs that have ended, with their events;\n"
    "their folders on the server (logs, checkpoints, adapters) stay unless\n"
    "--purge is given too.\n"
    "\n"
    "options:\n"
    "  --delete                 remove ended jobs instead (an active job is refused:\n"
    "                           cancel it first)\n"
    "  --purge                  with --delete: remove each job's folder on the server\n"
    "                           too: its logs, checkpoints and adapters are gone\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 every job cancelled or stopping (or deleted), 1 usage or token\n"
    "      refused, 2 a job that does not exist, has already ended (or, with\n"
    "      --delete, has not), 5 server unreachable\n"
    "\n"
    "examples:\n"
    "  lathe cancel lora-r8 lora-r32\n"
    "  lathe cancel --delete lora-r8\n"
    "  lathe cancel --delete --purge lora-r8   # and its files\n";

/* Cancels (or deletes) one job and says what happened. */
static int cancel_one(client *c, const char *name, const char *team, bool del, bool purge)
{
    client_error err;
    client_error_init(&err);
    json_t *job = NULL;
    int r = del ? client_job_delete(c, name, team, purge, &err)
                : client_job_cancel(c, name, team, &job, &err);
    if (r) {
        client_error_print(&err, "cancel", stderr);
    } else if (del) {
        printf("job/%s deleted%s\n", name, purge ? ", with its folder" : "");
    } else {
        const char *st = client_str(job, "state");
        printf("job/%s %s%s\n", name, st ? st : "cancelled",
               st && !strcmp(st, "stopping") ? " (saving a checkpoint, then it stops)" : "");
    }
    json_decref(job);
    client_error_free(&err);
    return r;
}

static int cancel_run(int argc, char **argv)
{
    client_flags fl = {0};
    const char *names[256];
    size_t n = 0;
    bool del = false, purge = false;
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&fl, "cancel", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *a = argv[i++];
        if (!strcmp(a, "--delete")) del = true;
        else if (!strcmp(a, "--purge")) purge = true;
        else if (a[0] == '-') return cli_usage_error("cancel", "unknown option '%s'", a);
        else if (n == sizeof names / sizeof names[0])
            return cli_usage_error("cancel", "at most %zu jobs at a time", n);
        else names[n++] = a;
    }
    if (!n) return cli_usage_error("cancel", "which job? lathe cancel NAME...");
    if (purge && !del) return cli_usage_error("cancel", "--purge goes with --delete");
    client *c;
    int rc = client_open(&fl, "cancel", &c);
    if (rc) return rc;
    for (size_t k = 0; k < n; k++) {
        int r = cancel_one(c, names[k], fl.team, del, purge);
        if (r && (!rc || r == LT_EXIT_UNAVAILABLE)) rc = r;
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
