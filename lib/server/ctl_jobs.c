/* ctl_jobs.c: the controller's set of active jobs (queued, starting,
 * running, stopping), in memory, sorted by id. It changes with the
 * controller's own moves (ctl_run.c, ctl_sched.c set the fields they wrote)
 * and with the jobs the HTTP side reports (ctl_job_changed: a submission,
 * a cancel), which are read again one by one; a job the controller's own
 * compare-and-set found moved is read again the same way. The whole set is
 * read from the store only at start and every few scheduler intervals, as a
 * consistency check that counts and logs what it had to fix. What is costly
 * to work out (the resolved spec, the plan's shape, the attempt history,
 * the experiment's limit) is loaded once per job. Jobs that reach a final
 * state leave the set. */
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
    free(j->pod_wait);
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
        j->team_index = -1;
        j->name = xstrdup(s->name);
        j->experiment = dup_or_null(s->experiment);
        j->priority_class = dup_or_null(s->priority_class);
        j->reason = dup_or_null(s->wait_reason); /* as a restart found it */
    }
    if (s->state == STORE_QUEUED && (j->state != STORE_QUEUED || !j->queued_at))
        j->queued_at = s->attempts == 0 ? s->created_at : ctl_now();
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
        if (c->ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n_jobs && c->ids[lo] == id ? c->jobs[lo] : NULL;
}

/* A new entry for a stored job, inserted in id order. */
static ctl_job *insert(ctl *c, const store_job *s)
{
    ctl_job *j = xcalloc(1, sizeof *j);
    j->id = s->id;
    j->share = SCHED_SHARE_WHOLE;
    ctl_job_sync(j, s);
    j->team_index = sched_cluster_find_team(c->s->cluster.sched, j->team);
    if (c->n_jobs == c->cap_jobs) {
        c->cap_jobs = c->cap_jobs ? 2 * c->cap_jobs : 64;
        c->jobs = xrealloc(c->jobs, c->cap_jobs * sizeof *c->jobs);
        c->ids = xrealloc(c->ids, c->cap_jobs * sizeof *c->ids);
    }
    size_t at = c->n_jobs; /* new jobs have the largest ids: at the end, as a rule */
    while (at > 0 && c->ids[at - 1] > s->id) at--;
    memmove(&c->jobs[at + 1], &c->jobs[at], (c->n_jobs - at) * sizeof *c->jobs);
    memmove(&c->ids[at + 1], &c->ids[at], (c->n_jobs - at) * sizeof *c->ids);
    c->jobs[at] = j;
    c->ids[at] = j->id;
    c->n_jobs++;
    return j;
}

void ctl_ids_push(int64_t **ids, size_t *n, size_t *cap, int64_t id)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *ids = xrealloc(*ids, *cap * sizeof **ids);
    }
    (*ids)[(*n)++] = id;
}

void ctl_job_touch(ctl *c, ctl_job *j)
{
    c->waits_stale = true;
    bool holding = ctl_job_holds(j);
    if (j->experiment && holding != j->counted_holding) c->exp_stale = true;
    j->counted_holding = holding;
    if (!c->sched || j->touched) return; /* CPU mode: its pass looks at every job */
    j->touched = true;
    ctl_ids_push(&c->touched, &c->n_touched, &c->cap_touched, j->id);
}

ctl_job *ctl_adopt(ctl *c, const store_job *s)
{
    ctl_job *j = ctl_find(c, s->id);
    if (j) ctl_job_sync(j, s);
    else j = insert(c, s);
    ctl_job_touch(c, j);
    return j;
}

/* A job leaves the set at the next ctl_prune. */
static void leave(ctl *c, ctl_job *j)
{
    if (j->h) c->placed_stale = true;
    j->seen = false;
    j->state = STORE_FAILED; /* any final state: ctl_prune drops it */
    c->prune = true;
    ctl_job_touch(c, j);
}

void ctl_prune(ctl *c)
{
    if (!c->prune) return;
    c->prune = false;
    size_t n = 0;
    for (size_t i = 0; i < c->n_jobs; i++) {
        ctl_job *j = c->jobs[i];
        if (!store_state_final(j->state)) {
            c->ids[n] = j->id;
            c->jobs[n++] = j;
            continue;
        }
        if (j->h) c->placed_stale = true;
        if (j->prepared > j->attempts) ctl_unprepare(c, j); /* it will not run */
        ctl_sched_forget(c, j);
        ctl_job_free(j);
    }
    c->n_jobs = n;
}

ctl_job **ctl_placed(ctl *c, size_t *n)
{
    if (c->placed_stale) {
        c->placed_stale = false;
        c->n_placed = 0;
        c->placed = xrealloc(c->placed, (c->n_jobs + 1) * sizeof *c->placed);
        for (size_t i = 0; i < c->n_jobs; i++)
            if (c->jobs[i]->h) c->placed[c->n_placed++] = c->jobs[i];
    }
    *n = c->n_placed;
    return c->placed;
}

/* Reads job id again and brings its entry in step (adds, updates or drops
 * it). Returns false when the store cannot be read. */
static bool read_again(ctl *c, int64_t id)
{
    store_job s;
    store_rc rc = store_job_get(c->st, id, &s);
    if (rc != STORE_OK && rc != STORE_NOT_FOUND) return false;
    ctl_job *j = ctl_find(c, id);
    if (rc == STORE_OK && !store_state_final(s.state)) {
        ctl_adopt(c, &s);
        c->dirty = true;
    } else if (j) {
        if (j->h) ctl_log(c, "job %s/%s left while its attempt %d runs (it is %s)", j->team,
                          j->name, j->attempt, rc == STORE_OK ? store_state_name(s.state) : "gone");
        leave(c, j);
        c->dirty = true;
    }
    if (rc == STORE_OK) store_job_clear(&s);
    return true;
}

void ctl_job_stale(ctl *c, const ctl_job *j)
{
    ctl_job_changed(c, j->id);
}

void ctl_take_changes(ctl *c)
{
    pthread_mutex_lock(&c->mu);
    int64_t *ids = c->changed;
    size_t n = c->n_changed;
    c->changed = NULL;
    c->n_changed = c->cap_changed = 0;
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && ids[i] == ids[i - 1]) continue;
        if (read_again(c, ids[i])) continue;
        ctl_log(c, "cannot read job %lld again: %s", (long long)ids[i], store_error(c->st));
        pthread_mutex_lock(&c->mu); /* the next turn tries again (no wake-up: no busy loop) */
        ctl_ids_push(&c->changed, &c->n_changed, &c->cap_changed, ids[i]);
        pthread_mutex_unlock(&c->mu);
    }
    free(ids);
}

/* Whether the stored job differs from its entry in what the controller
 * follows. */
static bool differs(const ctl_job *j, const store_job *s)
{
    return j->state != s->state || j->not_before != s->not_before ||
           j->attempts != s->attempts || j->checkpoint_step != s->checkpoint_step ||
           j->max_retries != s->max_retries || j->priority != s->priority;
}

/* A change the HTTP side committed this recently may still have its
 * notification on the way (ctl_job_changed follows the commit): the check
 * brings such a job in step without counting it as a fix. */
#define CTL_NOTIFY_GRACE 2.0

static void note_fix(ctl *c, bool count, const char *what, int64_t id, const char *name)
{
    if (!count) return;
    c->reload_fixes++;
    ctl_log(c, "consistency check: job %lld (%s) %s; fixed", (long long)id, name ? name : "?", what);
}

/* A job in the set the store no longer lists as active: changed lately
 * (its notification may be on the way) or not. */
static bool left_lately(ctl *c, int64_t id, double since)
{
    store_job s;
    if (store_job_get(c->st, id, &s) != STORE_OK) return false;
    bool lately = s.updated_at >= since;
    store_job_clear(&s);
    return lately;
}

bool ctl_reload(ctl *c, bool count_fixes)
{
    store_job_filter f = {.states = STORE_STATES_ACTIVE, .summary = true};
    store_job_list l = {0};
    double since = store_now(c->st) - CTL_NOTIFY_GRACE;
    if (store_jobs_list(c->st, &f, &l) != STORE_OK) return false;
    for (size_t i = 0; i < c->n_jobs; i++) c->jobs[i]->seen = false;
    for (size_t i = l.n; i-- > 0;) { /* newest first: ids ascend backwards */
        const store_job *s = &l.items[i];
        ctl_job *j = ctl_find(c, s->id);
        bool count = count_fixes && s->updated_at < since;
        if (!j) note_fix(c, count, "was missing from the active set", s->id, s->name);
        else if (differs(j, s)) note_fix(c, count, "differed from the store", s->id, s->name);
        j = ctl_adopt(c, s);
        j->seen = true;
    }
    for (size_t i = 0; i < c->n_jobs; i++) {
        ctl_job *j = c->jobs[i];
        if (j->seen || store_state_final(j->state)) continue;
        bool count = count_fixes && !left_lately(c, j->id, since);
        note_fix(c, count, "is no longer active", j->id, j->name);
        leave(c, j);
    }
    store_job_list_free(&l);
    c->dirty = true;
    c->sync_all = true; /* the next pass checks the scheduler's state against every job */
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
    j->has_base = ok && srv_sched_job(&c->s->cluster, &j->shape, (uint64_t)j->id, j->name, j->team,
                                      j->priority, j->priority_class, &j->base);
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

int ctl_placement_share_of(const json_t *placement)
{
    json_t *share = json_object_get(placement, "share");
    int units = SCHED_SHARE_WHOLE;
    if (json_is_number(share)) {
        double v = json_number_value(share) * SCHED_SHARE_WHOLE;
        if (v >= 1 && v < SCHED_SHARE_WHOLE) units = (int)(v + 0.5);
    }
    return units;
}

int ctl_placement_share(const char *placement_json)
{
    json_t *p = placement_json ? json_loads(placement_json, 0, NULL) : NULL;
    int units = ctl_placement_share_of(p);
    json_decref(p);
    return units;
}

double ctl_job_gpus_held(const ctl_job *j)
{
    return (double)j->n_gpus * j->share / SCHED_SHARE_WHOLE;
}
