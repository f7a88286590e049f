/* cmd_validate.c: `lathe validate FILE... [-o json]`: loads each file with
 * the spec part and says OK, or prints every diagnostic.
 *
 * The passes, per file:
 *   1. spec_load_file: YAML, schema, ranges and the checks inside one
 *      document (spec part);
 *   2. validate_semantics: checks that need more than one document, such as
 *      a job naming a priority class of the cluster in the same file. A
 *      model-aware pass (the planner checking target modules against the
 *      chosen model, using spec_job.lora.pos_target_modules) belongs there
 *      too, so that it runs for every document of every file.
 * Exit: 0 all valid, 2 any invalid, 4 any file unreadable (4 wins).
 */
#include "cli.h"

#include "base/base.h"
#include "plan/plan.h"
#include "spec/spec.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char validate_help[] =
    "usage: lathe validate FILE... [-o text|json]\n"
    "\n"
    "Checks LoRATrainingJob, LoRAExperiment and Cluster files: YAML syntax,\n"
    "fields, types, ranges, units and the consistency of settings. Prints\n"
    "`FILE: OK (...)` per valid file, and every problem (file:line:column,\n"
    "field, expected, found, hint) on stderr.\n"
    "\n"
    "options:\n"
    "  -o, --output FORMAT  text (default) or json: an array of\n"
    "                       {file, valid, documents, diagnostics} on stdout\n"
    "\n"
    "exit: 0 all valid, 2 a file is invalid, 4 a file cannot be read\n"
    "\n"
    "examples:\n"
    "  lathe validate job.yaml\n"
    "  lathe validate examples/jobs/*.yaml -o json\n";

/* ---- checks across documents ---- */

static void report_job(diag_list *d, const spec_job *j, diag_level lvl, const char *path,
                       const char *msg, const char *suggestion)
{
    diag *x = diag_add(d, lvl, j->file, j->pos.line, j->pos.col, path, msg);
    if (suggestion) diag_set_suggestion(x, "%s", suggestion);
}

/* A job against the cluster defined in the same file. */
static void check_job_in_cluster(const spec_job *j, const spec_cluster *c, diag_list *d)
{
    char msg[256];
    if (j->priority_class && !spec_cluster_priority_class(c, j->priority_class)) {
        snprintf(msg, sizeof msg, "cluster %s has no priority class \"%s\"", c->name,
                 j->priority_class);
        report_job(d, j, DIAG_ERROR, "spec.priorityClassName", msg,
                   "name one of the cluster's priorityClasses, or leave it out for the default");
    }
    if (!spec_cluster_team(c, j->team)) {
        snprintf(msg, sizeof msg, "cluster %s has no team \"%s\": the job has no quota and can "
                 "only borrow", c->name, j->team);
        report_job(d, j, DIAG_WARNING, "spec.team", msg, "add the team to the cluster");
    }
    if (j->resources.gpu_type && !spec_cluster_gpu_type(c, j->resources.gpu_type)) {
        snprintf(msg, sizeof msg, "cluster %s has no GPU type \"%s\"", c->name,
                 j->resources.gpu_type);
        report_job(d, j, DIAG_WARNING, "spec.resources.gpu.type", msg,
                   "name one of the cluster's gpuTypes");
    }
}

/* Every job of the file: lone jobs and experiment expansions. */
static size_t file_jobs(const spec_file *f, const spec_job ***out)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_docs; i++)
        n += f->docs[i].kind == SPEC_KIND_JOB ? 1
             : f->docs[i].kind == SPEC_KIND_EXPERIMENT ? f->docs[i].experiment->n_jobs
                                                       : 0;
    const spec_job **jobs = xcalloc(n ? n : 1, sizeof *jobs);
    size_t k = 0;
    for (size_t i = 0; i < f->n_docs; i++) {
        if (f->docs[i].kind == SPEC_KIND_JOB) jobs[k++] = f->docs[i].job;
        if (f->docs[i].kind == SPEC_KIND_EXPERIMENT)
            for (size_t e = 0; e < f->docs[i].experiment->n_jobs; e++)
                jobs[k++] = f->docs[i].experiment->jobs[e];
    }
    *out = jobs;
    return n;
}

static int job_by_name(const void *a, const void *b)
{
    const spec_job *x = *(const spec_job *const *)a, *y = *(const spec_job *const *)b;
    return strcmp(x->name, y->name);
}

/* The model-aware pass: does the job's model have each target module? The
 * model is resolved as the planner does (config.json at baseModel.path,
 * else the catalogue, else a generic shape from the parameter count); a
 * model lathe cannot resolve is the planner's error, not repeated here. Jobs
 * of an experiment that share model and targets are checked once. */
static void check_job_targets(const spec_job *const *jobs, size_t n, diag_list *d)
{
    sb seen;
    sb_init(&seen);
    for (size_t i = 0; i < n; i++) {
        const spec_job *j = jobs[i];
        if (j->method == METHOD_FULL || j->lora.n_target_modules == 0) continue;
        sb key;
        sb_init(&key);
        sb_printf(&key, "\n%s|%s|", j->base_model.name ? j->base_model.name : "",
                  j->base_model.path ? j->base_model.path : "");
        for (size_t t = 0; t < j->lora.n_target_modules; t++)
            sb_printf(&key, "%s,", j->lora.target_modules[t]);
        sb_putc(&key, '\n');
        bool dup = strstr(sb_str(&seen), sb_str(&key)) != NULL;
        if (!dup) sb_puts(&seen, sb_str(&key));
        sb_free(&key);
        if (dup) continue;
        diag_list quiet;
        diag_list_init(&quiet);
        model_shape m;
        memset(&m, 0, sizeof m);
        if (model_resolve(j->base_model.path, j->base_model.name, j->base_model.parameters, &m,
                          &quiet))
            plan_check_targets(j, &m, d);
        model_shape_free(&m);
        diag_list_free(&quiet);
    }
    sb_free(&seen);
}

/* The checks that look beyond one document, and the model-aware pass. */
static void validate_semantics(const spec_file *f, diag_list *d)
{
    const spec_job **jobs;
    size_t n = file_jobs(f, &jobs);
    const spec_cluster *c = spec_file_cluster(f);
    for (size_t i = 0; c && i < n; i++) check_job_in_cluster(jobs[i], c, d);
    if (d->errors == 0) check_job_targets(jobs, n, d);
    qsort(jobs, n, sizeof *jobs, job_by_name);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(jobs[i]->name, jobs[i - 1]->name) != 0) continue;
        char msg[160];
        snprintf(msg, sizeof msg, "two jobs in this file are named \"%s\"", jobs[i]->name);
        report_job(d, jobs[i], DIAG_ERROR, "metadata.name", msg, "give every job its own name");
    }
    free((void *)jobs);
}

/* ---- output ---- */

static const char *doc_name(const spec_doc *doc)
{
    switch (doc->kind) {
    case SPEC_KIND_JOB: return doc->job->name;
    case SPEC_KIND_EXPERIMENT: return doc->experiment->name;
    case SPEC_KIND_CLUSTER: return doc->cluster->name;
    }
    return "?";
}

static void print_ok(const spec_file *f)
{
    printf("%s: OK (", f->path);
    for (size_t i = 0; i < f->n_docs; i++) {
        const spec_doc *doc = &f->docs[i];
        printf("%s%s %s", i ? ", " : "", spec_kind_name(doc->kind), doc_name(doc));
        if (doc->kind == SPEC_KIND_EXPERIMENT)
            printf(": %zu jobs", doc->experiment->n_jobs);
    }
    printf(")\n");
}

static json_t *json_str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *diag_json(const diag *x)
{
    static const char *const levels[] = {"error", "warning", "note"};
    json_t *o = json_object();
    json_object_set_new(o, "level", json_string(levels[x->level]));
    json_object_set_new(o, "file", json_str_or_null(x->file));
    json_object_set_new(o, "line", json_integer(x->line));
    json_object_set_new(o, "column", json_integer(x->col));
    json_object_set_new(o, "path", json_str_or_null(x->path));
    json_object_set_new(o, "message", json_string(x->message));
    json_object_set_new(o, "expected", json_str_or_null(x->expected));
    json_object_set_new(o, "found", json_str_or_null(x->found));
    json_object_set_new(o, "suggestion", json_str_or_null(x->suggestion));
    return o;
}

static json_t *file_json(const spec_file *f, const diag_list *d)
{
    json_t *o = json_object(), *docs = json_array(), *diags = json_array();
    json_object_set_new(o, "file", json_string(f->path));
    json_object_set_new(o, "valid", json_boolean(d->errors == 0));
    for (size_t i = 0; i < f->n_docs; i++) {
        json_t *doc = json_object();
        json_object_set_new(doc, "kind", json_string(spec_kind_name(f->docs[i].kind)));
        json_object_set_new(doc, "name", json_string(doc_name(&f->docs[i])));
        if (f->docs[i].kind == SPEC_KIND_EXPERIMENT)
            json_object_set_new(doc, "jobs", json_integer((json_int_t)f->docs[i].experiment->n_jobs));
        json_array_append_new(docs, doc);
    }
    for (size_t i = 0; i < d->len; i++) json_array_append_new(diags, diag_json(&d->items[i]));
    json_object_set_new(o, "documents", docs);
    json_object_set_new(o, "diagnostics", diags);
    return o;
}

/* Validates one file; returns its exit code. */
static int validate_one(const char *path, cli_output fmt, json_t *all)
{
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    spec_load_file(path, &f, &d);
    if (!f.io_error) validate_semantics(&f, &d);
    int rc = f.io_error ? LT_EXIT_IO : d.errors ? LT_EXIT_INVALID : LT_EXIT_OK;
    if (fmt == CLI_OUT_JSON) {
        json_array_append_new(all, file_json(&f, &d));
    } else {
        diag_print_all(&d, stderr);
        if (rc == LT_EXIT_OK) print_ok(&f);
        else if (rc == LT_EXIT_INVALID)
            fprintf(stderr, "%s: invalid (%zu error%s, %zu warning%s)\n", path, d.errors,
                    d.errors == 1 ? "" : "s", d.warnings, d.warnings == 1 ? "" : "s");
    }
    spec_file_free(&f);
    diag_list_free(&d);
    return rc;
}

static int validate_run(int argc, char **argv)
{
    cli_output fmt = CLI_OUT_TEXT;
    const char **files = xcalloc((size_t)argc, sizeof *files);
    size_t n = 0;
    bool opts = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (opts && strcmp(a, "--") == 0) {
            opts = false;
            continue;
        }
        if (opts && (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0)) {
            if (i + 1 >= argc) {
                free(files);
                return cli_usage_error("validate", "%s needs a format: text or json", a);
            }
            val = argv[++i];
        } else if (opts && a[0] == '-' && a[1]) {
            free(files);
            return cli_usage_error("validate", "unknown option '%s'", a);
        } else {
            files[n++] = a;
            continue;
        }
        if (!cli_parse_output(val, &fmt) || (fmt != CLI_OUT_TEXT && fmt != CLI_OUT_JSON)) {
            free(files);
            return cli_usage_error("validate", "unknown output format '%s' (text or json)", val);
        }
    }
    if (n == 0) {
        free(files);
        return cli_usage_error("validate", "name at least one file");
    }
    json_t *all = json_array();
    int rc = LT_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        int r = validate_one(files[i], fmt, all);
        if (r == LT_EXIT_IO || (r == LT_EXIT_INVALID && rc == LT_EXIT_OK)) rc = r;
    }
    if (fmt == CLI_OUT_JSON) {
        char *text = json_dumps(all, JSON_INDENT(2));
        printf("%s\n", text ? text : "[]");
        free(text);
    }
    json_decref(all);
    free(files);
    return rc;
}

const cli_command cli_cmd_validate = {
    .name = "validate",
    .summary = "check job, experiment and cluster files",
    .help = validate_help,
    .run = validate_run,
};
