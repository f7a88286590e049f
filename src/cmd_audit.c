/* cmd_audit.c: `lathe audit`: the server's audit log (GET /v1/audit, admin
 * tokens): every change asked of the API, refused ones included, and every
 * token reload, newest first, as a table or JSON / YAML. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char audit_help[] =
    "usage: lathe audit [--since T] [--limit N] [--team T] [-o text|json|yaml]\n"
    "                   [--server ADDR] [--token TOKEN] [--cacert FILE]\n"
    "\n"
    "Prints the server's audit log, newest first: each request that was not a\n"
    "GET (submissions, cancels, deletes, and the refused ones: unknown or\n"
    "expired tokens, a scope too small, over the rate limit) and each token\n"
    "reload (SIGHUP), with when, who (the token's name), its team, from where\n"
    "(the client's address and port), the request, the answer's status and a\n"
    "short detail. Needs an admin token.\n"
    "\n"
    "options:\n"
    "  --since T                rows at or after T: a time (2026-12-02T04:00:00Z) or a\n"
    "                           duration back from now (30m, 2h, 7d)\n"
    "  --limit N                at most N rows (default 100, at most 10000)\n"
    "  -o, --output FORMAT      text (default), json or yaml\n" CLIENT_FLAGS_HELP
    "                           (--team: only that team's rows)\n"
    "\n"
    "exit: 0 printed, 1 usage or the token is not an admin's, 2 a bad --since,\n"
    "      5 server unreachable\n"
    "\n"
    "examples:\n"
    "  lathe audit --since 1h\n"
    "  lathe audit --team team-a --limit 20\n"
    "  lathe audit -o json\n";

/* --since: a time as given, or "now - duration" as RFC 3339. */
static bool since_value(const char *s, char *out, size_t outsz)
{
    double t, d;
    if (client_parse_time(s, &t)) {
        snprintf(out, outsz, "%s", s);
        return true;
    }
    if (!units_parse_duration(s, &d) || d < 0) return false;
    time_t at = (time_t)(client_now() - d);
    struct tm tm;
    gmtime_r(&at, &tm);
    strftime(out, outsz, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return true;
}

static void print_table(const json_t *items)
{
    client_table t;
    client_table_init(&t, 7, "TIME", "ACTOR", "TEAM", "ADDRESS", "REQUEST", "STATUS", "DETAIL");
    for (size_t i = 0; i < json_array_size(items); i++) {
        const json_t *e = json_array_get(items, i);
        char req[600], status[16], detail[200];
        snprintf(req, sizeof req, "%s %s", client_str(e, "method") ? client_str(e, "method") : "-",
                 client_str(e, "path") ? client_str(e, "path") : "");
        snprintf(status, sizeof status, "%lld", client_int(e, "status", 0));
        const char *d = client_str(e, "detail");
        /* one line per row: a long detail is cut (-o json has it whole) */
        snprintf(detail, sizeof detail, "%s", d ? d : "-");
        for (char *p = detail; *p; p++)
            if (*p == '\n' || *p == '\t') *p = ' ';
        if (strlen(detail) > 80) strcpy(detail + 77, "...");
        client_table_row(&t, client_str(e, "time"), client_str(e, "actor"), client_str(e, "team"),
                         client_str(e, "address"), req, status, detail);
    }
    client_table_print(&t, stdout);
    client_table_free(&t);
}

static int audit_run(int argc, char **argv)
{
    client_flags fl = {0};
    const char *since = NULL;
    int limit = 0;
    cli_output fmt = CLI_OUT_TEXT;
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&fl, "audit", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *a = argv[i++];
        if (!strcmp(a, "--since") || !strcmp(a, "--limit") || !strcmp(a, "-o") ||
            !strcmp(a, "--output")) {
            if (i >= argc) return cli_usage_error("audit", "%s needs a value", a);
            const char *v = argv[i++];
            if (!strcmp(a, "--since")) {
                since = v;
            } else if (!strcmp(a, "--limit")) {
                char *end;
                long n = strtol(v, &end, 10);
                if (*end || n < 1 || n > 10000)
                    return cli_usage_error("audit", "--limit %s: expected a number from 1 to 10000",
                                           v);
                limit = (int)n;
            } else if (!cli_parse_output(v, &fmt) || fmt == CLI_OUT_WIDE) {
                return cli_usage_error("audit", "%s takes text, json or yaml", a);
            }
        } else if (a[0] == '-') {
            return cli_usage_error("audit", "unknown option '%s'", a);
        } else {
            return cli_usage_error("audit", "unexpected argument '%s'", a);
        }
    }
    char since_buf[64] = "";
    if (since && !since_value(since, since_buf, sizeof since_buf)) {
        fprintf(stderr,
                "lathe audit: --since %s: expected a time such as 2026-12-02T04:00:00Z or a "
                "duration such as 2h\n",
                since);
        return LT_EXIT_INVALID;
    }
    client *c;
    int rc = client_open(&fl, "audit", &c);
    if (rc) return rc;
    client_error err;
    client_error_init(&err);
    json_t *v = NULL;
    rc = client_audit_list(c, since ? since_buf : NULL, limit, fl.team, &v, &err);
    if (rc) {
        client_error_print(&err, "audit", stderr);
    } else if (fmt == CLI_OUT_JSON) {
        client_print_json(v, stdout);
    } else if (fmt == CLI_OUT_YAML) {
        client_print_yaml(v, stdout);
    } else {
        json_t *items = json_object_get(v, "items");
        if (json_array_size(items) == 0) printf("no audit rows%s\n", since ? " since then" : "");
        else print_table(items);
    }
    json_decref(v);
    client_error_free(&err);
    client_free(c);
    return rc;
}

const cli_command cli_cmd_audit = {
    .name = "audit",
    .summary = "the server's audit log: who changed what, refusals included (admin)",
    .help = audit_help,
    .run = audit_run,
};
