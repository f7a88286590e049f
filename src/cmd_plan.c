/* cmd_plan.c: `lathe plan JOB.yaml`: what a job needs, what it should run
 * on and what it will cost, with the reasons; or the equivalent ms-swift
 * command, or the resolved spec. Experiments are planned job by job. */
#include "cli.h"

#include "base/base.h"
#include "plan/plan.h"
#include "spec/spec.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char plan_help[] =
    "usage: lathe plan JOB.yaml [options]\n"
    "\n"
    "Plans a LoRATrainingJob (or every job of a LoRAExperiment): resolves the\n"
    "model, estimates GPU memory term by term, and chooses the method (when\n"
    "the spec says auto), the GPU type and count, the parallel strategy\n"
    "(DDP, ZeRO-2/3, tensor and pipeline degrees for models no GPU holds),\n"
    "the micro-batch and accumulation that keep the spec's effective batch,\n"
    "and gradient checkpointing, then estimates time and cost. Resources the\n"
    "spec gives are checked: lathe says whether they fit, with its numbers.\n"
    "\n"
    "options:\n"
    "  -o, --output FORMAT   text (default) or json\n"
    "  --emit WHAT           swift: the equivalent `swift sft` command line;\n"
    "                        lathe: the resolved spec as lathe/v1 YAML\n"
    "  --cluster FILE        plan against a Cluster file's GPU types, prices and\n"
    "                        GPU counts instead of the built-in catalogue\n"
    "  --objective WHAT      cost (default): the cheapest plan that finishes within\n"
    "                        timeout.maxDuration; time: the fastest\n"
    "  --margin FRACTION     share of GPU memory kept free (default 0.10)\n"
    "  --max-gpus N          the largest job considered (default 512)\n"
    "\n"
    "built-in GPU types: A10G-24GB L4-24GB RTX4090-24GB L40S-48GB A100-40GB\n"
    "A100-80GB H100-80GB H200-141GB (prices and throughput: docs/planner.md)\n"
    "\n"
    "exit: 0 planned, 2 invalid spec, 3 nothing fits, 4 unreadable file\n"
    "\n"
    "examples:\n"
    "  lathe plan examples/jobs/qwen2-7b-lora.yaml\n"
    "  lathe plan job.yaml --emit swift\n"
    "  lathe plan job.yaml --cluster cluster.yaml -o json\n";

typedef struct plan_args {
    const char *file;
    const char *cluster;
    const char *emit;
    cli_output output;
    plan_options opt;
} plan_args;

static int parse_args(int argc, char **argv, plan_args *a)
{
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'},   {"emit", required_argument, NULL, 'e'},
        {"cluster", required_argument, NULL, 'c'},  {"objective", required_argument, NULL, 'O'},
        {"margin", required_argument, NULL, 'm'},   {"max-gpus", required_argument, NULL, 'g'},
        {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof *a);
    plan_options_defaults(&a->opt);
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "o:", longs, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'o':
            if (!cli_parse_output(optarg, &a->output) ||
                (a->output != CLI_OUT_TEXT && a->output != CLI_OUT_JSON))
                return cli_usage_error("plan", "-o takes text or json, not '%s'", optarg);
            break;
        case 'e':
            if (strcmp(optarg, "swift") != 0 && strcmp(optarg, "lathe") != 0)
                return cli_usage_error("plan", "--emit takes swift or lathe, not '%s'", optarg);
            a->emit = optarg;
            break;
        case 'c': a->cluster = optarg; break;
        case 'O':
            if (strcmp(optarg, "cost") == 0) a->opt.objective = PLAN_CHEAPEST;
            else if (strcmp(optarg, "time") == 0) a->opt.objective = PLAN_FASTEST;
            else return cli_usage_error("plan", "--objective takes cost or time, not '%s'", optarg);
            break;
        case 'm':
            a->opt.margin = strtod(optarg, &end);
            if (*end || !(a->opt.margin >= 0 && a->opt.margin < 0.9))
                return cli_usage_error("plan", "--margin takes a fraction from 0 to 0.9, not '%s'", optarg);
            break;
        case 'g':
            a->opt.max_gpus = (int)strtol(optarg, &end, 10);
            if (*end || a->opt.max_gpus < 1 || a->opt.max_gpus > 100000)
                return cli_usage_error("plan", "--max-gpus takes a whole number from 1 to 100000");
            break;
        default: return cli_usage_error("plan", "unknown option");
        }
    }
    if (optind != argc - 1) return cli_usage_error("plan", "give exactly one job file");
    a->file = argv[optind];
    return LT_EXIT_OK;
}

/* Loads the cluster file into a catalogue. */
static int load_cluster(const char *path, plan_catalog *cat)
{
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    spec_load_file(path, &f, &d);
    int rc = f.io_error ? LT_EXIT_IO : d.errors ? LT_EXIT_INVALID : LT_EXIT_OK;
    const spec_cluster *c = rc == LT_EXIT_OK ? spec_file_cluster(&f) : NULL;
    if (rc == LT_EXIT_OK && !c) {
        fprintf(stderr, "lathe plan: %s holds no Cluster\n", path);
        rc = LT_EXIT_INVALID;
    }
    if (c && !plan_catalog_from_cluster(c, cat, &d)) rc = LT_EXIT_INVALID;
    diag_print_all(&d, stderr);
    diag_list_free(&d);
    spec_file_free(&f);
    return rc;
}

/* Plans one job and prints it; returns its exit code. */
static int plan_one(const spec_job *job, const plan_args *a, json_t *json_out, sb *summary)
{
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_job(job, &a->opt, &r, &d);
    diag_print_all(&d, stderr);
    if (rc == LT_EXIT_INVALID) goto done;
    if (summary) {
        const plan_config *c = &r.chosen;
        char t[32] = "?";
        if (r.steps > 0) units_format_duration(t, sizeof t, c->seconds);
        if (r.found)
            sb_printf(summary, "  %-32s %-6s %2d x %-13s %7.1f GiB %11s %10.2f%s\n", r.job_name,
                      spec_method_name(c->method), c->gpus, c->gpu->name, c->mem.peak / GIB, t,
                      c->cost, r.steps > 0 ? "" : " per 1,000 steps");
        else
            sb_printf(summary, "  %-32s does not fit\n", r.job_name);
    }
    if (a->emit && strcmp(a->emit, "swift") == 0) {
        char *s = plan_emit_swift(&r, job);
        fputs(s, stdout);
        free(s);
    } else if (a->emit) {
        spec_job *res = plan_resolved_job(&r, job);
        char *y = spec_job_to_yaml(res);
        fputs(y, stdout);
        free(y);
        spec_job_free(res);
    } else if (json_out) {
        char *s = plan_to_json(&r);
        json_t *o = json_loads(s, 0, NULL);
        free(s);
        if (o) json_array_append_new(json_out, o);
    } else if (!summary) {
        sb out;
        sb_init(&out);
        plan_format_text(&r, &out);
        fputs(sb_str(&out), stdout);
        sb_free(&out);
    }
done:
    plan_result_free(&r);
    diag_list_free(&d);
    return rc;
}

static int plan_file(const spec_file *f, const plan_args *a)
{
    int worst = LT_EXIT_OK;
    json_t *json_out = a->output == CLI_OUT_JSON && !a->emit ? json_array() : NULL;
    for (size_t i = 0; i < f->n_docs; i++) {
        const spec_doc *doc = &f->docs[i];
        if (doc->kind == SPEC_KIND_JOB) {
            int rc = plan_one(doc->job, a, json_out, NULL);
            if (rc > worst) worst = rc;
        } else if (doc->kind == SPEC_KIND_EXPERIMENT) {
            const spec_experiment *e = doc->experiment;
            bool table = !json_out && !a->emit;
            sb summary;
            sb_init(&summary);
            if (table)
                printf("experiment %s: %zu jobs, at most %d at once\n  %-32s %-6s %-18s %11s %11s %10s\n",
                       e->name, e->n_jobs, e->max_concurrent, "job", "method", "GPUs",
                       "per GPU", "time", "cost");
            for (size_t k = 0; k < e->n_jobs; k++) {
                int rc = plan_one(e->jobs[k], a, json_out, table ? &summary : NULL);
                if (rc > worst) worst = rc;
            }
            fputs(sb_str(&summary), stdout);
            sb_free(&summary);
        }
    }
    if (json_out) {
        /* one job: its object; several: the array */
        json_t *doc = json_array_size(json_out) == 1 ? json_array_get(json_out, 0) : json_out;
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        printf("%s\n", s);
        free(s);
        json_decref(json_out);
    }
    return worst;
}

static int plan_run(int argc, char **argv)
{
    plan_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != LT_EXIT_OK) return rc;
    plan_catalog cat = {0};
    if (a.cluster) {
        rc = load_cluster(a.cluster, &cat);
        if (rc != LT_EXIT_OK) {
            plan_catalog_free(&cat);
            return rc;
        }
        a.opt.catalog = &cat;
    }
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    spec_load_file(a.file, &f, &d);
    diag_print_all(&d, stderr);
    if (f.io_error) rc = LT_EXIT_IO;
    else if (d.errors) rc = LT_EXIT_INVALID;
    else if (!spec_file_job(&f) && !f.n_docs) rc = LT_EXIT_INVALID;
    else rc = plan_file(&f, &a);
    diag_list_free(&d);
    spec_file_free(&f);
    if (a.cluster) plan_catalog_free(&cat);
    return rc;
}

const cli_command cli_cmd_plan = {
    .name = "plan",
    .summary = "choose method, GPUs, batch and strategy for a job; time and cost",
    .help = plan_help,
    .run = plan_run,
};
