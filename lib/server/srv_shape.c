/* srv_shape.c: a job as the scheduler sees it, from what the store keeps:
 * the planner's chosen configuration (GPUs, nodes, GPU type, per-GPU
 * memory, run time) and the resolved spec (timeout, checkpoint interval,
 * priority class). The submission check and the controller's passes use
 * the same function, so a job accepted at submission is scheduled with
 * the shape it was checked with. */
#include "srv_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *srv_plan_json(const plan_result *r, bool gpu_type_fixed)
{
    if (!r->found) return NULL;
    /* Only the chosen configuration is kept: a view of the result without
     * the alternatives spares writing (and parsing back) each of them with
     * its memory breakdown, most of a submission's work otherwise. */
    plan_result chosen_only = *r;
    chosen_only.n_options = 0;
    chosen_only.has_requested = false;
    char *text = plan_to_json(&chosen_only);
    json_t *all = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    json_t *chosen = all ? json_object_get(all, "chosen") : NULL;
    if (!chosen || !json_is_object(chosen)) {
        json_decref(all);
        return NULL;
    }
    json_incref(chosen);
    json_decref(all);
    json_object_set_new(chosen, "steps", r->steps > 0 ? json_integer(r->steps) : json_null());
    json_object_set_new(chosen, "gpu_type_fixed", json_boolean(gpu_type_fixed));
    char *out = json_dumps(chosen, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(chosen);
    return out;
}

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* Types with room for the plan's per-GPU memory (the chosen one only when
 * the spec named it). */
static uint64_t allowed_types(const sched_cluster *c, int chosen, bool fixed, double need)
{
    if (fixed) return 1ull << chosen;
    uint64_t mask = 0;
    for (int t = 0; t < c->n_types; t++)
        if (t == chosen || c->types[t].memory * 0.9 >= need) mask |= 1ull << t;
    return mask;
}

bool srv_shape_of(const srv_cluster *c, const char *plan_json, const spec_job *job,
                  srv_shape *out, char *why, size_t whysz)
{
    memset(out, 0, sizeof *out);
    out->max_duration = job->timeout.max_duration;
    out->shared = job->resources.gpu_shared;
    if (c->cpu_mode) return true;
    json_t *p = plan_json ? json_loads(plan_json, 0, NULL) : NULL;
    const char *type = p ? json_string_value(json_object_get(p, "gpu_type")) : NULL;
    int t = type ? sched_cluster_find_type(c->sched, type) : -1;
    if (t < 0) {
        snprintf(why, whysz, type ? "the plan's GPU type %s is not in this cluster"
                                  : "the job has no plan",
                 type);
        json_decref(p);
        return false;
    }
    out->replicas = (int)num(p, "nodes");
    out->per_replica = (int)num(p, "gpus_per_node");
    if (out->replicas < 1) out->replicas = 1;
    if (out->per_replica < 1) out->per_replica = 1;
    out->gpu_memory = num(p, "per_gpu_gib") * GIB;
    out->est_duration = num(p, "seconds");
    out->step_seconds = num(p, "step_seconds");
    out->steps = (int64_t)num(p, "steps");
    bool fixed = json_is_true(json_object_get(p, "gpu_type_fixed"));
    out->types = allowed_types(c->sched, t, fixed, out->gpu_memory);
    if (job->checkpoint.enabled && job->checkpoint.interval_steps > 0 && out->step_seconds > 0)
        out->checkpoint_every = out->step_seconds * job->checkpoint.interval_steps;
    json_decref(p);
    return true;
}

void srv_priority(const srv_cluster *c, const char *cls, int64_t *value, bool *preempt_lower)
{
    const spec_priority_class *p =
        cls ? spec_cluster_priority_class(c->spec, cls) : spec_cluster_default_priority(c->spec);
    *value = p ? p->value : 0;
    *preempt_lower = p ? p->preempt_lower : true;
}

bool srv_sched_job(const srv_cluster *c, const srv_shape *sh, uint64_t id, const char *name,
                   const char *team, int64_t priority, const char *priority_class,
                   sched_job *out)
{
    memset(out, 0, sizeof *out);
    int ti = sched_cluster_find_team(c->sched, team);
    if (ti < 0) return false;
    int64_t value;
    bool preempt;
    srv_priority(c, priority_class, &value, &preempt);
    out->id = id;
    out->name = name;
    out->team = ti;
    out->priority = priority;
    out->preempt_lower = preempt;
    out->replicas = sh->replicas;
    out->gpus_per_replica = sh->per_replica;
    out->types = sh->types;
    out->gpu_memory = sh->gpu_memory;
    /* Nothing isolates two trainers on one GPU (time-slicing or MPS), so a
     * job shares only when its spec says it may; the scheduler then gives
     * it the part of a GPU its planned memory needs. */
    out->exclusive = !sh->shared;
    out->est_duration = sh->est_duration;
    out->max_duration = sh->max_duration;
    out->checkpoint_interval = sh->checkpoint_every;
    return true;
}
