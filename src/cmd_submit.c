/* cmd_submit.c: `lathe submit FILE`: sends a LoRATrainingJob or
 * LoRAExperiment (YAML or JSON) to the server, which validates, plans and
 * stores it; prints what was created, or every diagnostic with the local
 * file's line and column. */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest file sent; the server refuses bodies over 1 MiB. */
#define SUBMIT_MAX_BYTES ((size_t)4 << 20)

static const char submit_help[] =
    "usage: lathe submit FILE [-o text|json|yaml] [--server ADDR] [--token TOKEN] [--team TEAM]\n"
    "\n"
    "Submits a LoRATrainingJob or a LoRAExperiment (YAML, or JSON for a .json\n"
    "file or text starting with '{'; FILE '-' reads standard input) to the\n"
    "server. The server validates it as `lathe validate` does, plans what the\n"
    "file leaves open, checks that it can ever fit, and queues it. Submitting\n"
    "the same file again changes nothing (\"unchanged\"); the same name with a\n"
    "different spec is refused.\n"
    "\n"
    "options:\n"
    "  -o, --output FORMAT      text (default), json or yaml: the created object\n" CLIENT_FLAGS_HELP
    "\n"
    "exit: 0 submitted (or unchanged), 1 usage or token refused, 2 invalid spec\n"
    "      (every problem printed as FILE:LINE:COL), a name already used, 4 FILE\n"
    "      unreadable, 5 server unreachable\n"
    "\n"
    "examples:\n"
    "  lathe submit job.yaml\n"
    "  lathe submit sweep.yaml -o json | jq '.jobs[].name'\n";

/* Reads FILE (or standard input for "-"). */
static char *submit_read(const char *path, size_t *len)
{
    char err[512];
    if (strcmp(path, "-") != 0) {
        char *text = file_read_all(path, SUBMIT_MAX_BYTES, len, err, sizeof err);
        if (!text) fprintf(stderr, "lathe submit: %s\n", err);
        return text;
    }
    sb s;
    sb_init(&s);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
        sb_putn(&s, buf, n);
        if (s.len > SUBMIT_MAX_BYTES) {
            fprintf(stderr, "lathe submit: standard input is larger than %zu MiB\n",
                    SUBMIT_MAX_BYTES >> 20);
            sb_free(&s);
            return NULL;
        }
    }
    *len = s.len;
    sb_putc(&s, 0); /* an empty input still gets a buffer */
    return sb_take(&s);
}

/* True when the text should go as JSON. */
static bool submit_is_json(const char *path, const char *text)
{
    if (str_iends_with(path, ".json")) return true;
    while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r') text++;
    return *text == '{';
}

/* "job/NAME queued, planned: 1 x L4-24GB (lora, micro-batch 4 x 2)" */
static void submit_print_job(const json_t *job, const char *verb)
{
    const json_t *plan = json_object_get(job, "plan");
    printf("job/%s %s (team %s, %s)", client_str(job, "name") ? client_str(job, "name") : "?",
           verb, client_str(job, "team") ? client_str(job, "team") : "?",
           client_str(job, "state") ? client_str(job, "state") : "?");
    if (json_is_object(plan) && client_str(plan, "gpu_type"))
        printf(": %lld x %s, %s, micro-batch %lld x %lld", client_int(plan, "gpus", 0),
               client_str(plan, "gpu_type"),
               client_str(plan, "method") ? client_str(plan, "method") : "?",
               client_int(plan, "micro_batch", 0), client_int(plan, "gradient_accumulation", 0));
    printf("\n");
}

static void submit_print(const json_t *ans, bool created)
{
    const char *verb = created ? "created" : "unchanged";
    const json_t *exp = json_object_get(ans, "experiment");
    const json_t *jobs = json_object_get(ans, "jobs");
    if (json_is_object(exp) || json_is_array(jobs)) {
        printf("experiment/%s %s: %zu jobs\n",
               client_str(exp, "name") ? client_str(exp, "name") : "?", verb,
               json_array_size(jobs));
        size_t i;
        const json_t *j;
        json_array_foreach(jobs, i, j) {
            printf("  ");
            submit_print_job(j, verb);
        }
    } else {
        submit_print_job(ans, verb);
    }
}

static int submit_run(int argc, char **argv)
{
    client_flags fl = {0};
    const char *file = NULL;
    cli_output fmt = CLI_OUT_TEXT;
    for (int i = 1; i < argc;) {
        int t = client_flags_take(&fl, "submit", argc, argv, &i);
        if (t < 0) return LT_EXIT_USAGE;
        if (t > 0) continue;
        const char *a = argv[i++];
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i >= argc || !cli_parse_output(argv[i], &fmt) || fmt == CLI_OUT_WIDE)
                return cli_usage_error("submit", "%s takes text, json or yaml", a);
            i++;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("submit", "unknown option '%s'", a);
        } else if (file) {
            return cli_usage_error("submit", "one file at a time (got '%s' and '%s')", file, a);
        } else {
            file = a;
        }
    }
    if (!file) return cli_usage_error("submit", "no file: lathe submit FILE");

    size_t len;
    char *text = submit_read(file, &len);
    if (!text) return LT_EXIT_IO;
    client *c;
    int rc = client_open(&fl, "submit", &c);
    if (rc) {
        free(text);
        return rc;
    }
    client_error err;
    client_error_init(&err);
    json_t *ans = NULL;
    bool created = false;
    const char *shown = strcmp(file, "-") ? file : "<stdin>";
    rc = client_submit(c, text, len, submit_is_json(file, text), shown, fl.team, &ans, &created,
                       &err);
    if (rc) client_error_print(&err, "submit", stderr);
    else if (fmt == CLI_OUT_JSON) client_print_json(ans, stdout);
    else if (fmt == CLI_OUT_YAML) client_print_yaml(ans, stdout);
    else submit_print(ans, created);
    json_decref(ans);
    client_error_free(&err);
    client_free(c);
    free(text);
    return rc;
}

const cli_command cli_cmd_submit = {
    .name = "submit",
    .summary = "send a job or experiment to a lathe server",
    .help = submit_help,
    .run = submit_run,
};
