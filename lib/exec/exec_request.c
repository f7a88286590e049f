/* exec_request.c: the start request of one attempt, from the job's
 * resolved spec, as every caller builds it (the server's controller, and
 * `lathe render`, which prints what the server would create): the argv,
 * the spec's environment, the trainer contract's values that come from the
 * spec, and the cluster fields that come from the job itself. What only the
 * caller knows (folders, GPU ids and placement, absolute local paths) it
 * adds afterwards. */
#include "exec.h"

#include <stdlib.h>
#include <string.h>

void exec_job_req_init(exec_job_req *r, const exec_job_desc *d)
{
    memset(r, 0, sizeof *r);
    const spec_job *s = d->spec;
    bool builtin = !(s->trainer.kind == TRAINER_COMMAND && s->trainer.n_command > 0);
    r->spec_yaml = spec_job_to_yaml(s);
    r->job_label = xasprintf("%s/%s", d->team, d->name);
    if (builtin) {
        r->argc = 3;
        r->argv = xcalloc(4, sizeof *r->argv);
        r->argv[0] = xstrdup(d->program ? d->program : "lathe");
        r->argv[1] = xstrdup("train");
        r->argv[2] = xstrdup(d->spec_path ? d->spec_path : "spec.yaml");
    } else {
        r->argc = s->trainer.n_command;
        r->argv = xcalloc(r->argc + 1, sizeof *r->argv);
        for (size_t i = 0; i < r->argc; i++) r->argv[i] = xstrdup(s->trainer.command[i]);
    }
    r->n_env = s->trainer.n_env;
    r->env = xcalloc(r->n_env + 1, sizeof *r->env);
    for (size_t i = 0; i < r->n_env; i++)
        r->env[i] = xasprintf("%s=%s", s->trainer.env[i].key, s->trainer.env[i].value);

    exec_request *q = &r->q;
    q->argv = r->argv;
    q->argc = r->argc;
    q->env = (const char *const *)r->env;
    q->n_env = r->n_env;
    q->attempt = d->attempt;
    q->no_retry_codes = builtin ? EXEC_BUILTIN_NO_RETRY : NULL;
    q->n_no_retry_codes = builtin ? 1 : 0;
    int nnodes = d->nnodes > 0 ? d->nnodes : 1;
    double grace = s->timeout.grace_period > 0 ? s->timeout.grace_period : 120;

    exec_contract *k = &q->contract;
    k->job = r->job_label;
    k->attempt = d->attempt;
    k->spec_path = d->spec_path;
    k->base_model_path = s->base_model.path;
    k->dataset_path = s->training_data.dataset_path;
    k->eval_dataset_path = s->training_data.eval_path;
    k->lora_rank = s->lora.rank;
    k->checkpoint_interval = s->checkpoint.enabled ? s->checkpoint.interval_steps : 0;
    k->nnodes = nnodes;
    k->node_rank = 0;
    k->nproc_per_node = d->gpus_per_node > 0 ? d->gpus_per_node : 1;
    k->master_addr = "127.0.0.1";

    exec_cluster_req *x = &q->cluster;
    x->job_id = d->job_id;
    x->team = d->team;
    x->name = d->name;
    x->experiment = d->experiment;
    x->image = s->trainer.image;
    x->builtin = builtin;
    x->spec_yaml = r->spec_yaml;
    x->nnodes = nnodes;
    x->gpus_per_node = d->gpus_per_node;
    x->cpu = s->resources.cpu;
    x->memory = s->resources.memory;
    x->priority_class = d->priority_class;
    x->checkpoint_pvc = s->checkpoint.pvc_name;
    x->grace = grace;
    /* Kubernetes' own deadline is a backstop behind lathe's maxDuration,
     * which stops the job gracefully (SIGTERM, checkpoint) first. */
    if (s->timeout.max_duration > 0) {
        double left = s->timeout.max_duration - d->prior_run;
        x->max_duration = (left > 0 ? left : 0) + grace + 60;
        x->time_limit = (left > 0 ? left : 0) + grace;
    }
}

void exec_job_req_free(exec_job_req *r)
{
    str_list_free(r->argv, r->argc);
    str_list_free(r->env, r->n_env);
    free(r->job_label);
    free(r->spec_yaml);
    memset(r, 0, sizeof *r);
}
