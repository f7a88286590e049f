/* exec_k8s_objects.c: from an exec request to the Kubernetes objects of
 * its attempt. One mapping, used by the Kubernetes backend when it creates
 * them and by `lathe render` when it prints them, so the two never differ.
 *
 * What changes on the way: paths are the pod's (the spec file under the
 * spec mount, CHECKPOINT_DIR = checkpoint mount / job name); the built-in
 * trainer's argv is the image's lathe; GPUs are the device plugin's, so
 * lathe's own GPU ids (LATHE_GPUS, CUDA_VISIBLE_DEVICES) are left out; the
 * multi-node variables are the renderer's (from the completion index). */
#include "exec_k8s_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Variables the pod does not take from the request's environment. */
static bool dropped(const char *kv)
{
    static const char *const names[] = {"LATHE_GPUS",   "CUDA_VISIBLE_DEVICES", "LATHE_VIRTUAL_GPUS",
                                        "NNODES",       "NODE_RANK",            "NPROC_PER_NODE",
                                        "MASTER_ADDR",  "MASTER_PORT"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(kv, names[i], n) == 0 && kv[n] == '=') return true;
    }
    return false;
}

static const char *product_of(const exec_cluster_req *c, const spec_k8s *k)
{
    if (c->gpu_product) return c->gpu_product;
    if (!c->gpu_type) return NULL;
    for (size_t i = 0; i < k->n_gpu_products; i++)
        if (strcmp(k->gpu_products[i].key, c->gpu_type) == 0) return k->gpu_products[i].value;
    return c->gpu_type;
}

void exec_k8s_params_init(exec_k8s_params *out, const exec_request *req, const spec_k8s *k,
                          bool suspend)
{
    memset(out, 0, sizeof *out);
    const exec_cluster_req *c = &req->cluster;
    k8s_job_params *p = &out->p;
    char job[64];
    snprintf(job, sizeof job, "%s", c->name ? c->name : "job");
    k8s_job_name(job, req->attempt, out->name, sizeof out->name);
    /* a user's own Job is admitted under its own name (the backend refuses
     * one longer than a Job's name may be) */
    if (c->adopt) snprintf(out->name, sizeof out->name, "%s", c->adopt);
    out->ns = spec_k8s_namespace(k, c->team ? c->team : "default");
    out->spec_path = path_join(k->spec_mount, "spec.yaml");
    out->ckpt_dir = path_join(k->checkpoint_mount, job);

    /* argv */
    if (c->builtin || req->argc == 0) {
        out->argc = 3;
        out->argv = xcalloc(4, sizeof *out->argv);
        out->argv[0] = xstrdup(k->lathe_path);
        out->argv[1] = xstrdup("train");
        out->argv[2] = xstrdup(out->spec_path);
    } else {
        out->argc = req->argc;
        out->argv = xcalloc(req->argc + 1, sizeof *out->argv);
        for (size_t i = 0; i < req->argc; i++) out->argv[i] = xstrdup(req->argv[i]);
    }

    /* environment: the spec's, then the contract's with the pod's paths */
    exec_contract kc = req->contract;
    kc.spec_path = out->spec_path;
    kc.checkpoint_dir = out->ckpt_dir;
    kc.gpus = NULL;
    kc.virtual_gpus = false;
    kc.nnodes = 0;
    kc.node_rank = -1;
    kc.nproc_per_node = 0;
    kc.master_addr = NULL;
    kc.master_port = 0;
    char **env = NULL;
    size_t n = 0;
    for (size_t i = 0; i < req->n_env; i++) {
        env = xrealloc(env, (n + 1) * sizeof *env);
        env[n++] = xstrdup(req->env[i]);
    }
    exec_contract_env(&kc, &env, &n);
    out->env = xcalloc(n + 1, sizeof *out->env);
    for (size_t i = 0; i < n; i++) {
        if (dropped(env[i])) free(env[i]);
        else out->env[out->n_env++] = env[i];
    }
    free(env);

    p->name = out->name;
    p->namespace_ = out->ns;
    p->job_id = c->job_id;
    p->job = c->name;
    p->team = c->team;
    p->experiment = c->experiment;
    p->attempt = req->attempt;
    p->image = c->image ? c->image : k->image;
    p->argv = out->argv;
    p->argc = out->argc;
    p->env = (const char *const *)out->env;
    p->n_env = out->n_env;
    p->nnodes = c->nnodes > 0 ? c->nnodes : 1;
    p->gpus_per_node = c->gpus_per_node;
    p->cpu = c->cpu;
    p->memory = c->memory;
    p->gpu_product = c->gpus_per_node > 0 ? product_of(c, k) : NULL;
    p->nodes = c->nodes;
    p->n_nodes = c->n_nodes;
    p->rack = c->rack;
    p->priority_class = c->priority_class;
    p->service_account = c->service_account;
    p->checkpoint_pvc = c->checkpoint_pvc ? c->checkpoint_pvc : k->checkpoint_pvc;
    p->checkpoint_subpath = job;
    p->spec_yaml = c->spec_yaml;
    p->grace = c->grace > 0 ? c->grace : 120;
    p->max_duration = c->max_duration;
    p->fail_codes = req->no_retry_codes;
    p->n_fail_codes = req->n_no_retry_codes;
    p->suspend = suspend;
    p->settings = k;
    p->owner.api_version = c->owner.api_version;
    p->owner.kind = c->owner.kind;
    p->owner.name = c->owner.name;
    p->owner.uid = c->owner.uid;
    p->placement_json = c->placement_json;
    /* checkpoint_subpath points at a local buffer: keep a copy */
    out->subpath = xstrdup(job);
    p->checkpoint_subpath = out->subpath;
    p->job = c->name ? c->name : out->subpath;
}

void exec_k8s_params_free(exec_k8s_params *p)
{
    free(p->ns);
    free(p->spec_path);
    free(p->ckpt_dir);
    free(p->subpath);
    str_list_free(p->argv, p->argc);
    str_list_free(p->env, p->n_env);
    memset(p, 0, sizeof *p);
}

json_t *exec_k8s_objects(const exec_request *req, const spec_k8s *k, bool suspend)
{
    exec_k8s_params kp;
    exec_k8s_params_init(&kp, req, k, suspend);
    json_t *out = json_array();
    json_t *svc = k8s_render_service(&kp.p);
    if (svc) json_array_append_new(out, svc);
    json_array_append_new(out, k8s_render_job(&kp.p));
    exec_k8s_params_free(&kp);
    return out;
}
