/* exec_slurm_render.c: what one attempt's submission to Slurm is (pure; the
 * backend and `lathe render --target slurm` both use it): the sbatch argv,
 * the batch script, and the step file the script's program reads.
 *
 * No user string reaches a shell: the batch script is the same text for
 * every job (`exec LATHE slurm-step "$1"`, LATHE the operator's lathePath,
 * checked to hold no shell character), its one argument is the step file's
 * path, and the trainer's argv and environment are in that file (JSON). */
#include "exec_slurm_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void push(exec_slurm_submit *s, size_t *cap, char *arg)
{
    if (s->argc + 2 > *cap) {
        *cap = *cap ? *cap * 2 : 32;
        s->argv = xrealloc(s->argv, *cap * sizeof *s->argv);
    }
    s->argv[s->argc++] = arg;
    s->argv[s->argc] = NULL;
}

void exec_slurm_submit_free(exec_slurm_submit *s)
{
    if (!s) return;
    str_list_free(s->argv, s->argc);
    free(s->script);
    free(s->step_json);
    free(s->script_path);
    free(s->step_path);
    free(s->log_path);
    free(s->name);
    free(s->comment);
    memset(s, 0, sizeof *s);
}

static bool lathe_ok(const char *p)
{
    if (!p || !*p) return false;
    for (; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("/._+-", *p)))
            return false;
    return true;
}

/* The GRES type of lathe's GPU type: the gpuTypes entry whose value it is. */
static const char *gres_type(const spec_slurm *s, const char *lathe_type)
{
    for (size_t i = 0; lathe_type && i < s->n_gpu_types; i++)
        if (strcmp(s->gpu_types[i].value, lathe_type) == 0) return s->gpu_types[i].key;
    return NULL;
}

bool exec_slurm_render(const exec_request *req, const spec_slurm *s, const char *lathe,
                       exec_slurm_submit *out, char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    const exec_cluster_req *k = &req->cluster;
    if (!lathe_ok(lathe)) {
        snprintf(err, errsz, "the lathe program for the batch script '%s' holds characters a "
                             "script cannot take as they are (slurm.lathePath)",
                 lathe ? lathe : "");
        return false;
    }
    if (req->argc == 0 || !req->argv || !req->argv[0]) {
        snprintf(err, errsz, "the request has no command");
        return false;
    }
    const char *team = k->team ? k->team : "default", *name = k->name ? k->name : "job";
    out->name = xasprintf("lathe-%s-%s-%d", team, name, req->attempt);
    if (!slurm_name_ok(out->name)) {
        snprintf(err, errsz, "the Slurm job name '%.100s' is not letters, digits and . _ - +",
                 out->name);
        exec_slurm_submit_free(out);
        return false;
    }
    /* the folder's hash tells apart two servers' jobs of one name (the
     * comment is what the dedupe before sbatch compares) */
    const char *dir = req->job_dir ? req->job_dir : ".";
    uint32_t hsh = slurm_dir_key(dir);
    out->comment = xasprintf("lathe job=%s/%s attempt=%d id=%lld dir=%08x", team, name,
                             req->attempt, (long long)k->job_id, hsh);
    char *work = xasprintf("%s/attempt-%d", dir, req->attempt);
    out->log_path = xasprintf("%s/output.log", work);
    out->script_path = xasprintf("%s/slurm-batch.sh", work);
    out->step_path = xasprintf("%s/slurm-step.json", work);
    out->script = xasprintf("#!/bin/sh\n"
                            "# lathe's batch script (docs/slurm.md): the trainer's argv and\n"
                            "# environment are in the file given as the one argument\n"
                            "exec %s slurm-step \"$1\"\n",
                            lathe);

    size_t cap = 0;
    int nnodes = k->nnodes > 0 ? k->nnodes : 1;
    push(out, &cap, xstrdup("sbatch"));
    push(out, &cap, xstrdup("--parsable"));
    push(out, &cap, xasprintf("--job-name=%s", out->name));
    push(out, &cap, xasprintf("--comment=%s", out->comment));
    push(out, &cap, xasprintf("--output=%s", out->log_path));
    push(out, &cap, xasprintf("--error=%s", out->log_path));
    push(out, &cap, xstrdup("--open-mode=append"));
    push(out, &cap, xasprintf("--chdir=%s", work));
    push(out, &cap, xstrdup("--export=NIL"));
    push(out, &cap, xasprintf("--nodes=%d", nnodes));
    push(out, &cap, xstrdup("--ntasks-per-node=1"));
    if (k->gpus_per_node > 0) {
        const char *gt = gres_type(s, k->gpu_type);
        push(out, &cap, gt ? xasprintf("--gres=gpu:%s:%d", gt, k->gpus_per_node)
                           : xasprintf("--gres=gpu:%d", k->gpus_per_node));
    }
    if (k->cpu > 0) push(out, &cap, xasprintf("--cpus-per-task=%d", (int)ceil(k->cpu)));
    if (k->memory > 0)
        push(out, &cap, xasprintf("--mem=%lldM", (long long)ceil(k->memory / (1024.0 * 1024.0))));
    if (k->time_limit > 0) {
        char t[48];
        slurm_format_time(k->time_limit, t, sizeof t);
        push(out, &cap, xasprintf("--time=%s", t));
    }
    long grace = lround(k->grace > 0 ? k->grace : 120);
    if (grace < 1) grace = 1;
    if (grace > 65535) grace = 65535;
    push(out, &cap, xasprintf("--signal=B:TERM@%ld", grace));
    push(out, &cap, xstrdup("--requeue"));
    if (s->partition) push(out, &cap, xasprintf("--partition=%s", s->partition));
    const char *account = k->slurm_account ? k->slurm_account
                                           : spec_kv_find(s->accounts, s->n_accounts, k->team);
    if (account) push(out, &cap, xasprintf("--account=%s", account));
    const char *qos = spec_kv_find(s->qos, s->n_qos, k->priority_class);
    if (qos) push(out, &cap, xasprintf("--qos=%s", qos));
    if (k->slurm_user) push(out, &cap, xasprintf("--uid=%s", k->slurm_user));
    bool lathe_decides = !s->decide || strcmp(s->decide, "slurm") != 0;
    if (lathe_decides && k->n_nodes > 0) {
        sb nl;
        sb_init(&nl);
        for (size_t i = 0; i < k->n_nodes; i++) {
            if (!slurm_name_ok(k->nodes[i])) continue;
            if (nl.len) sb_putc(&nl, ',');
            sb_puts(&nl, k->nodes[i]);
        }
        if (nl.len) push(out, &cap, xasprintf("--nodelist=%s", sb_str(&nl)));
        sb_free(&nl);
    }
    push(out, &cap, xstrdup(out->script_path));
    push(out, &cap, xstrdup(out->step_path));

    /* the step file */
    json_t *argv = json_array(), *env = json_array();
    for (size_t i = 0; i < req->argc; i++) json_array_append_new(argv, json_string(req->argv[i]));
    for (size_t i = 0; i < req->n_env; i++)
        if (req->env[i] && strchr(req->env[i], '=')) json_array_append_new(env, json_string(req->env[i]));
    char **cenv = NULL;
    size_t n_cenv = 0;
    exec_contract_env(&req->contract, &cenv, &n_cenv);
    for (size_t i = 0; i < n_cenv; i++) json_array_append_new(env, json_string(cenv[i]));
    str_list_free(cenv, n_cenv);
    int port = req->contract.master_port > 0 ? req->contract.master_port : s->master_port;
    char *srun = s->bin_dir ? xasprintf("%s/srun", s->bin_dir) : xstrdup("srun");
    json_t *step = json_pack("{s:i, s:o, s:o, s:i, s:i, s:i, s:b, s:s, s:s}", "version", 1, "argv", argv,
                             "env", env, "nnodes", nnodes, "nproc_per_node",
                             k->gpus_per_node > 0 ? k->gpus_per_node : 1, "master_port", port,
                             "gpus", k->gpus_per_node > 0, "srun", srun, "lathe", lathe);
    free(srun);
    out->step_json = json_dumps(step, JSON_INDENT(1) | JSON_ENSURE_ASCII);
    json_decref(step);
    free(work);
    return true;
}

/* ---- job arrays ---- */
/* The arguments that differ between the tasks of one array (the array
 * gives its own), and the script and step file at the end. */
static bool per_task(const char *a)
{
    static const char *const keys[] = {"--job-name=", "--comment=", "--output=", "--error=",
                                       "--chdir="};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (strncmp(a, keys[i], strlen(keys[i])) == 0) return true;
    return false;
}

bool exec_slurm_array_compatible(const exec_slurm_submit *a, const exec_slurm_submit *b)
{
    if (a->argc < 3 || b->argc < 3) return false;
    size_t i = 0, k = 0, na = a->argc - 2, nb = b->argc - 2;
    for (;;) {
        while (i < na && per_task(a->argv[i])) i++;
        while (k < nb && per_task(b->argv[k])) k++;
        if (i == na || k == nb) return i == na && k == nb;
        if (strcmp(a->argv[i], b->argv[k]) != 0) return false;
        i++;
        k++;
    }
}

void exec_slurm_array_free(exec_slurm_array *a)
{
    if (!a) return;
    str_list_free(a->argv, a->argc);
    free(a->name);
    free(a->comment);
    free(a->script);
    free(a->map_json);
    free(a->map_path);
    free(a->dir);
    memset(a, 0, sizeof *a);
}

void exec_slurm_array_render(const exec_slurm_submit *subs, size_t n, int max, const char *team,
                             const char *experiment, const char *dir, const char *lathe,
                        exec_slurm_array *out)
{
    memset(out, 0, sizeof *out);
    /* the key: the tasks' own comments (job, attempt, folder), so that the
     * same attempts make the same array name and comment (the dedupe) */
    sb all;
    sb_init(&all);
    for (size_t i = 0; i < n; i++) {
        sb_puts(&all, subs[i].comment);
        sb_putc(&all, '\n');
    }
    uint32_t key = slurm_dir_key(sb_str(&all));
    sb_free(&all);
    out->name = xasprintf("lathe-%s-%s-array", team ? team : "default", experiment ? experiment : "exp");
    if (!slurm_name_ok(out->name)) {
        free(out->name);
        out->name = xstrdup("lathe-array");
    }
    out->comment = xasprintf("lathe array=%s/%s tasks=%zu key=%08x", team ? team : "default",
                             experiment ? experiment : "", n, key);
    out->dir = xstrdup(dir);
    out->map_path = xasprintf("%s/slurm-array.json", dir);
    char *script_path = xasprintf("%s/slurm-batch.sh", dir);
    out->script = xasprintf("#!/bin/sh\n"
                            "# lathe's batch script of a job array (docs/slurm.md): the file given\n"
                            "# as the one argument maps SLURM_ARRAY_TASK_ID to the task's step file\n"
                            "exec %s slurm-step --array \"$1\"\n",
                            lathe);
    json_t *steps = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(steps, json_string(subs[i].step_path));
    json_t *map = json_pack("{s:i, s:s, s:o}", "version", 1, "comment", out->comment, "steps", steps);
    out->map_json = json_dumps(map, JSON_INDENT(1) | JSON_ENSURE_ASCII);
    json_decref(map);

    exec_slurm_submit tmp;
    memset(&tmp, 0, sizeof tmp);
    size_t cap = 0;
    const exec_slurm_submit *s0 = &subs[0];
    for (size_t i = 0; i + 2 < s0->argc; i++) {
        if (per_task(s0->argv[i])) continue;
        push(&tmp, &cap, xstrdup(s0->argv[i]));
        if (i == 1) { /* after --parsable */
            push(&tmp, &cap, xasprintf("--job-name=%s", out->name));
            push(&tmp, &cap, xasprintf("--comment=%s", out->comment));
            push(&tmp, &cap, max > 0 ? xasprintf("--array=0-%zu%%%d", n - 1, max)
                                     : xasprintf("--array=0-%zu", n - 1));
            /* task-N is a link to task N's attempt folder: Slurm writes
             * each task's output into that attempt's output.log */
            push(&tmp, &cap, xasprintf("--output=%s/task-%%a/output.log", dir));
            push(&tmp, &cap, xasprintf("--error=%s/task-%%a/output.log", dir));
            push(&tmp, &cap, xasprintf("--chdir=%s", dir));
        }
    }
    push(&tmp, &cap, script_path);
    push(&tmp, &cap, xstrdup(out->map_path));
    out->argv = tmp.argv;
    out->argc = tmp.argc;
}
