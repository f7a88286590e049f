/* ctl_jobs.c: the controller's cache of active jobs. Each loop reads the
 * queued, starting, running and stopping jobs from the store (without
 * their large texts) and merges them into an array sorted by id; what is
 * costly to work out (the resolved spec, the plan's shape, the attempt
 * history, the experiment's limit) is loaded once per job. Jobs that are
 * no longer active leave the cache. */
#include "ctl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_job_free(ctl_job *j)
{
    if (!j) return;
    free(j->team);
    free(j->name);
    free(j->experiment);
    free(j->priority_class);
    spec_file_free(&j->spec_file);
    free(j->reason);
    free(j->reason_code);
    exec_release(j->h);
    free(j->gpus);
    free(j);
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

void ctl_job_sync(ctl_job *j, const store_job *s)
{
    if (!j->team) {
        j->team = xstrdup(s->team);
        j->name = xstrdup(s->name);
        j->experiment = dup_or_null(s->experiment);
        j->priority_class = dup_or_null(s->priority_class);
        j->reason = dup_or_null(s->wait_reason); /* as a restart found it */
    }
    j->state = s->state;
    j->created_at = s->created_at;
    j->not_before = s->not_before;
    j->saved_work = s->saved_work;
    j->gpu_seconds = s->gpu_seconds;
    j->checkpoint_step = s->checkpoint_step;
    j->cost = s->cost;
    j->attempts = s->attempts;
    j->max_retries = s->max_retries;
    j->priority = s->priority;
}

ctl_job *ctl_find(ctl *c, int64_t id)
{
    size_t lo = 0, hi = c->n_jobs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->jobs[mid]->id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n_jobs && c->jobs[lo]->id == id ? c->jobs[lo] : NULL;
}

ctl_job *ctl_adopt(ctl *c, const store_job *s)
{
    ctl_job *j = ctl_find(c, s->id);
    if (j) {
        ctl_job_sync(j, s);
        return j;
    }
    j = xcalloc(1, sizeof *j);
    j->id = s->id;
    ctl_job_sync(j, s);
    size_t at = c->n_jobs;
    while (at > 0 && c->jobs[at - 1]->id > s->id) at--;
    c->jobs = xrealloc(c->jobs, (c->n_jobs + 1) * sizeof *c->jobs);
    memmove(&c->jobs[at + 1], &c->jobs[at], (c->n_jobs - at) * sizeof *c->jobs);
    c->jobs[at] = j;
    c->n_jobs++;
    return j;
}

bool ctl_refresh(ctl *c)
{
    store_job_filter f = {.states = STORE_STATES_ACTIVE, .summary = true};
    store_job_list l = {0};
    if (store_jobs_list(c->st, &f, &l) != STORE_OK) return false;
    for (size_t i = 0; i < c->n_jobs; i++) c->jobs[i]->seen = false;
    ctl_job **next = xcalloc(l.n + 1, sizeof *next);
    size_t n = 0;
    for (size_t i = l.n; i-- > 0;) { /* the list is newest first: ids ascend backwards */
        ctl_job *j = ctl_find(c, l.items[i].id);
        if (!j) {
            j = xcalloc(1, sizeof *j);
            j->id = l.items[i].id;
        }
        ctl_job_sync(j, &l.items[i]);
        j->seen = true;
        next[n++] = j;
    }
    for (size_t i = 0; i < c->n_jobs; i++)
        if (!c->jobs[i]->seen) ctl_job_free(c->jobs[i]);
    free(c->jobs);
    c->jobs = next;
    c->n_jobs = n;
    store_job_list_free(&l);
    return true;
}

/* Attempts that failed count against maxRetries; preemptions, cancels and
 * starts that never happened do not. */
static bool failure_reason(const char *r)
{
    static const char *const fails[] = {"failed", "signalled", "lost", "oom", "killed",
                                        "stopped", "invalid", "system"};
    for (size_t i = 0; r && i < sizeof fails / sizeof fails[0]; i++)
        if (!strcmp(r, fails[i])) return true;
    return false;
}

static void load_history(ctl *c, ctl_job *j)
{
    store_attempt_list al = {0};
    if (store_attempts_list(c->st, j->id, &al) != STORE_OK) return;
    j->failures = 0;
    j->prior_run = 0;
    for (size_t i = 0; i < al.n; i++) {
        const store_attempt *a = &al.items[i];
        if (!(a->ended_at > 0)) continue;
        if (failure_reason(a->reason)) j->failures++;
        if (a->ended_at > a->started_at) j->prior_run += a->ended_at - a->started_at;
    }
    store_attempt_list_free(&al);
}

/* The stored resolved spec into f; NULL when it does not load. */
static spec_job *load_spec(ctl *c, int64_t id, spec_file *f, char **plan_json)
{
    store_job s;
    memset(f, 0, sizeof *f);
    if (store_job_get(c->st, id, &s) != STORE_OK) return NULL;
    spec_job *job = NULL;
    if (s.spec_json && spec_load_string("stored spec", s.spec_json, strlen(s.spec_json), f, NULL) == 0)
        job = spec_file_job(f);
    if (plan_json) *plan_json = dup_or_null(s.plan_json);
    store_job_clear(&s);
    return job;
}

spec_job *ctl_job_spec(ctl *c, ctl_job *j)
{
    if (!j->spec) {
        spec_file_free(&j->spec_file);
        j->spec = load_spec(c, j->id, &j->spec_file, NULL);
    }
    return j->spec;
}

void ctl_job_drop_spec(ctl_job *j)
{
    spec_file_free(&j->spec_file);
    j->spec = NULL;
}

bool ctl_job_load(ctl *c, ctl_job *j)
{
    if (j->loaded) return true;
    if (j->load_failed) return false;
    spec_file f;
    char *plan = NULL, why[256] = "the stored spec does not load";
    const spec_job *spec = load_spec(c, j->id, &f, &plan);
    bool ok = spec && srv_shape_of(&c->s->cluster, plan, spec, &j->shape, why, sizeof why);
    if (ok) {
        json_t *p = plan ? json_loads(plan, 0, NULL) : NULL;
        j->type_fixed = p && json_is_true(json_object_get(p, "gpu_type_fixed"));
        json_decref(p);
        j->grace = spec->timeout.grace_period > 0 ? spec->timeout.grace_period : 120;
        j->backoff = spec->retry_policy.backoff_seconds;
        j->max_backoff = spec->retry_policy.max_backoff_seconds;
    }
    free(plan);
    spec_file_free(&f);
    if (ok && j->experiment) {
        store_experiment e;
        if (store_experiment_get(c->st, j->team, j->experiment, &e) == STORE_OK) {
            j->exp_max = e.max_concurrent;
            store_experiment_clear(&e);
        }
    }
    if (ok) load_history(c, j);
    j->loaded = ok;
    j->load_failed = !ok;
    if (!ok && j->state == STORE_QUEUED) {
        char msg[400];
        snprintf(msg, sizeof msg, "cannot run on this server: %s", why);
        ctl_fail_queued(c, j, "invalid", msg);
    }
    return ok;
}

bool ctl_placement_gpus(const ctl *c, const char *placement_json, int **gpus, int *n)
{
    *gpus = NULL;
    *n = 0;
    json_t *p = placement_json ? json_loads(placement_json, 0, NULL) : NULL;
    if (!p) return false;
    json_t *nodes = json_object_get(p, "nodes");
    json_t *single = json_array();
    if (!json_is_array(nodes)) {
        json_array_append(single, p);
        nodes = single;
    }
    bool ok = true;
    size_t i;
    json_t *node;
    json_array_foreach(nodes, i, node) {
        const char *name = json_string_value(json_object_get(node, "node"));
        json_t *list = json_object_get(node, "gpus");
        size_t k;
        json_t *g;
        json_array_foreach(list, k, g) {
            int idx = srv_cluster_gpu(&c->s->cluster, name, (int)json_integer_value(g));
            if (idx < 0) ok = false;
            *gpus = xrealloc(*gpus, (size_t)(*n + 1) * sizeof **gpus);
            (*gpus)[(*n)++] = idx;
        }
    }
    json_decref(single);
    json_decref(p);
    if (!ok || *n == 0) {
        free(*gpus);
        *gpus = NULL;
        *n = 0;
        return false;
    }
    return true;
}
