/* op_sync.c: objects -> the store, and the store -> the objects' status
 * (op.h). Runs on the operator's thread, with its own store handle.
 *
 *   a new object       submitted through the server's own steps
 *                      (srv_submit_text: the same checks as POST /v1/jobs);
 *                      its errors become the Invalid condition, with the
 *                      messages of `lathe validate`; an Invalid object whose
 *                      generation moves (the user fixed it) is tried again
 *   a deleted object   its jobs are cancelled; once they ended they are
 *                      dropped from the store (an object applied again under
 *                      the same name is a new job)
 *   rebuilding         each job is stored again as the API shows it: the
 *                      object's status (phase, attempts, checkpoint, usage)
 *                      and its newest attempt's Job (admitted: running, with
 *                      the placement of its annotation; suspended: queued)
 *   the status         written through the status subresource when it
 *                      changed, at most once per statusInterval per object
 *
 * A user's own Job has no status of lathe's: its state shows in the Job
 * itself (suspended or not) and in `lathe get`; a refused one gets the
 * annotation lathe.dev/invalid.
 */
#include "op_internal.h"

#include "ctl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ANNOT_INVALID "lathe.dev/invalid"


static const char *meta_str(const json_t *obj, const char *key)
{
    return op_jstr(json_object_get(obj, "metadata"), key);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "2026-12-01T21:00:00Z" (or with fractions) as seconds; 0 when unreadable. */
static double parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                     &tm.tm_min, &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm);
}

/* ---- the records ---- */
op_obj *op_obj_get(struct op *o, const char *key)
{
    json_t *v = json_object_get(o->objs, key);
    return v ? (op_obj *)(intptr_t)json_integer_value(v) : NULL;
}

void op_obj_free(op_obj *r)
{
    if (!r) return;
    free(r->key);
    free(r->ns);
    free(r->name);
    free(r->uid);
    free(r->ids);
    free(r->invalid);
    free(r->invalid_reason);
    free(r->last_status);
    free(r);
}

static void put_obj(struct op *o, op_obj *r)
{
    json_object_set_new(o->objs, r->key, json_integer((json_int_t)(intptr_t)r));
}

/* Splits "W|ns/name". */
static op_watch *split_key(struct op *o, const char *key, char **ns, char **name)
{
    int wi = atoi(key);
    const char *bar = strchr(key, '|');
    const char *slash = bar ? strchr(bar + 1, '/') : NULL;
    if (!slash || wi < 0 || (size_t)wi >= o->n_watches) return NULL;
    *ns = xstrndup(bar + 1, (size_t)(slash - bar - 1));
    *name = xstrdup(slash + 1);
    return &o->watches[wi];
}

typedef struct restore_in {
    struct op *o;
    op_watch *w;
    const json_t *obj;
    bool restoring;
} restore_in;

/* One store write on the operator's handle, in its own transaction (ctx:
 * the submission's restore_in). */
static store_rc op_write(void *ctx, store_write_fn fn, void *arg)
{
    struct op *o = ((restore_in *)ctx)->o;
    store_rc rc = store_tx_begin(o->st);
    if (rc != STORE_OK) return rc;
    rc = fn(o->st, arg);
    if (rc == STORE_OK || rc == STORE_EXISTS) {
        store_rc c = store_tx_commit(o->st);
        if (c != STORE_OK) rc = c;
    } else {
        store_tx_rollback(o->st);
    }
    return rc;
}

/* ---- restoring a job from the API ---- */

static json_int_t label_int(const json_t *obj, const char *label)
{
    const char *v = op_jstr(json_object_get(json_object_get(obj, "metadata"), "labels"), label);
    return v ? strtoll(v, NULL, 10) : 0;
}

/* The status lathe last wrote for job `name` of the object. */
static const json_t *job_status(const restore_in *in, const char *name)
{
    const json_t *st = json_object_get(in->obj, "status");
    if (in->w->kind != OP_LORAEXP) return st;
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(st, "items"), i, it)
        if (op_jstr(it, "name") && strcmp(op_jstr(it, "name"), name) == 0) return it;
    return NULL;
}

/* The newest attempt's Job of job `name` (a user's Job is itself). */
static const json_t *newest_job(const restore_in *in, const char *name, int *attempt)
{
    *attempt = 0;
    if (in->w->kind == OP_USERJOB) {
        *attempt = 1;
        return in->obj;
    }
    char *key = xasprintf("%s/%s", meta_str(in->obj, "uid"), name);
    const json_t *job = json_object_get(in->o->owned, key);
    free(key);
    if (job) *attempt = (int)label_int(job, K8S_LABEL_ATTEMPT);
    return job;
}

static store_rc finished_attempts(store *st, int64_t id, int n)
{
    for (int k = 0; k < n; k++) {
        int number;
        store_rc rc = store_attempt_add(st, id, NULL, NULL, &number);
        if (rc == STORE_OK) rc = store_attempt_finish(st, id, number, -1, 0, "restored");
        if (rc != STORE_OK) return rc;
    }
    return STORE_OK;
}

/* A running attempt `a` whose Job was admitted at `placement`. */
static store_rc running_attempt(const restore_in *in, store *st, const store_job *j, int a,
                                const json_t *kjob, const char *placement)
{
    json_t *p = json_loads(placement, 0, NULL);
    if (!p) return STORE_INVALID;
    char *gpus = json_dumps(json_object_get(p, "gpus"), JSON_COMPACT);
    int number = 0;
    store_rc rc = store_attempt_add(st, j->id, op_jstr(p, "node"), gpus, &number);
    free(gpus);
    json_decref(p);
    if (rc != STORE_OK) return rc;
    exec_request q;
    memset(&q, 0, sizeof q);
    q.attempt = number;
    char *dir = srv_job_dir(&in->o->s->cfg, j->id);
    q.job_dir = dir;
    q.cluster.job_id = j->id;
    q.cluster.team = j->team;
    q.cluster.name = j->name;
    if (in->w->kind == OP_USERJOB) q.cluster.adopt = meta_str(in->obj, "name");
    const json_t *status = json_object_get(kjob, "status");
    double started = parse_time(op_jstr(status, "startTime"));
    char *handle = exec_k8s_adopt_handle(in->o->s->be, &q, started > 0 ? started : wall_now());
    char att[32];
    snprintf(att, sizeof att, "attempt-%d", number);
    char *work = path_join(dir, att);
    char *log = path_join(work, "output.log");
    rc = store_attempt_set_handle(st, j->id, number, "k8s", handle, work, log);
    free(handle);
    free(work);
    free(log);
    free(dir);
    char msg[200];
    snprintf(msg, sizeof msg, "attempt %d restored from the Kubernetes API: its Job runs", number);
    store_event ev = {.actor = "operator", .type = "restored", .message = msg,
                      .data_json = placement};
    store_job_update upd = {.set = STORE_SET_PLACEMENT | STORE_SET_WAIT_REASON,
                            .placement_json = placement};
    if (rc == STORE_OK)
        rc = store_job_transition(st, j->id, STORE_QUEUED, STORE_STARTING, &upd, &ev, NULL);
    if (rc == STORE_OK)
        rc = store_job_transition(st, j->id, STORE_STARTING, STORE_RUNNING, NULL, &ev, NULL);
    return rc;
}

/* Usage and the newest checkpoint, from the status. */
static store_rc restore_fields(store *st, int64_t id, const json_t *status)
{
    store_job_update upd = {0};
    const json_t *ck = json_object_get(status, "checkpoint");
    if (json_is_integer(json_object_get(ck, "step"))) {
        upd.set |= STORE_SET_CHECKPOINT;
        upd.checkpoint_step = json_integer_value(json_object_get(ck, "step"));
        upd.checkpoint_path = op_jstr(ck, "path");
        upd.checkpoint_at = parse_time(op_jstr(ck, "time"));
    }
    if (json_is_number(json_object_get(status, "gpuHours"))) {
        upd.set |= STORE_SET_USAGE;
        upd.gpu_seconds = json_number_value(json_object_get(status, "gpuHours")) * 3600.0;
        upd.cost = json_number_value(json_object_get(status, "cost"));
    }
    return upd.set ? store_job_update_fields(st, id, 0, &upd, NULL) : STORE_OK;
}

/* Job id (just stored queued) brought to what the API says of it. */
static store_rc restore_job(const restore_in *in, store *st, int64_t id)
{
    store_job j;
    store_rc rc = store_job_get(st, id, &j);
    if (rc != STORE_OK) return rc;
    const json_t *status = job_status(in, j.name);
    int done = (int)json_integer_value(json_object_get(status, "attempts"));
    int a = 0;
    const json_t *kjob = newest_job(in, j.name, &a);
    const json_t *kmeta = json_object_get(kjob, "metadata");
    const char *placement = op_jstr(json_object_get(kmeta, "annotations"), K8S_ANNOT_PLACEMENT);
    bool admitted = kjob && placement && !json_is_true(json_object_get(json_object_get(kjob, "spec"), "suspend"));
    store_state final;
    bool is_final = op_phase_parse(op_jstr(status, "phase"), &final) && store_state_final(final);
    rc = restore_fields(st, id, status);
    if (rc == STORE_OK && admitted && a > 0 && !(is_final && done >= a)) {
        rc = finished_attempts(st, id, a - 1);
        if (rc == STORE_OK) rc = running_attempt(in, st, &j, a, kjob, placement);
    } else if (rc == STORE_OK && is_final) {
        rc = finished_attempts(st, id, done);
        char msg[200];
        snprintf(msg, sizeof msg, "restored from the Kubernetes API: %s",
                 op_phase_name(final));
        store_event ev = {.actor = "operator", .type = "restored", .message = msg};
        const char *why = op_jstr(status, "exitReason");
        store_job_update upd = {.set = STORE_SET_EXIT | STORE_SET_WAIT_REASON, .exit_code = -1,
                                .exit_reason = why ? why : "restored"};
        if (rc == STORE_OK) rc = store_job_transition(st, id, STORE_QUEUED, final, &upd, &ev, NULL);
    } else if (rc == STORE_OK) {
        /* A suspended Job that was never admitted is the next attempt,
         * prepared. One that was (its placement annotation) was being
         * stopped (a cancel, a preemption) when the leader went: that
         * attempt is over, and its Job goes as lathe's stop would have
         * removed it; a user's own Job stays, to be admitted again. */
        int prior = done > a - 1 ? done : a - 1;
        if (kjob && placement && in->w->kind != OP_USERJOB) {
            prior = done > a ? done : a;
            k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = meta_str(kjob, "namespace"),
                           .name = meta_str(kjob, "name")};
            k8s_error e;
            if (k8s_delete(in->o->cl, &ref, "Background", -1, &e) != K8S_OK)
                srv_log(in->o->s, "operator: deleting the stopped Job %s/%s: %s", ref.ns, ref.name,
                        e.message);
        }
        rc = finished_attempts(st, id, prior);
    }
    store_job_clear(&j);
    return rc;
}

/* ---- submitting ---- */
/* Inside the submission's transaction: each job's object record, and when
 * rebuilding, its state. A job of that name stored for another object
 * (another group's object of the same name) is a conflict. */
static store_rc after_submit(store *st, void *ctx, const int64_t *ids, size_t n, bool existed)
{
    restore_in *in = ctx;
    const json_t *obj = in->obj;
    for (size_t i = 0; i < n; i++) {
        op_owner have;
        if (existed && op_owner_read(st, ids[i], &have)) {
            bool same = strcmp(have.uid, meta_str(obj, "uid")) == 0;
            op_owner_free(&have);
            if (!same) return STORE_CONFLICT;
            continue;
        }
        json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "apiVersion", in->w->api, "kind",
                                in->w->kind_name, "namespace", meta_str(obj, "namespace"), "name",
                                meta_str(obj, "name"), "uid", meta_str(obj, "uid"), "adopt",
                                in->w->kind == OP_USERJOB);
        char *text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(rec);
        char key[40];
        op_owner_key(ids[i], key);
        store_rc rc = store_kv_set(st, key, text);
        free(text);
        if (rc == STORE_OK && in->restoring && !existed) rc = restore_job(in, st, ids[i]);
        if (rc != STORE_OK) return rc;
    }
    return STORE_OK;
}

static void refuse(struct op *o, op_obj *r, const json_t *obj, const char *reason, const char *msg)
{
    bool same = r->invalid && strcmp(r->invalid, msg) == 0;
    free(r->invalid);
    free(r->invalid_reason);
    r->invalid = xstrdup(msg);
    r->invalid_reason = xstrdup(reason);
    r->dirty = true;
    if (!same) {
        r->invalid_at = wall_now();
        srv_log(o->s, "operator: %s %s/%s refused (%s): %s", r->w->kind_name, r->ns, r->name, reason,
                msg);
    }
    if (r->w->kind == OP_USERJOB && !same) { /* a Job has no status of lathe's: an annotation */
        json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", ANNOT_INVALID, msg);
        k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = r->ns, .name = r->name};
        k8s_error e;
        if (k8s_merge_patch(o->cl, &ref, patch, NULL, &e) != K8S_OK)
            srv_log(o->s, "operator: annotating Job %s/%s: %s", r->ns, r->name, e.message);
        json_decref(patch);
    }
    (void)obj;
}

/* Whether a user's Job is one lathe admits: suspended by its author, or
 * admitted by lathe before (its placement annotation) when rebuilding. */
static bool userjob_queued(const json_t *job, bool restoring)
{
    const json_t *annot = json_object_get(json_object_get(job, "metadata"), "annotations");
    if (json_object_get(annot, ANNOT_INVALID)) return false; /* refused before: leave it be */
    if (json_is_true(json_object_get(json_object_get(job, "spec"), "suspend"))) return true;
    return restoring && op_jstr(annot, K8S_ANNOT_PLACEMENT);
}

static void submit(struct op *o, op_obj *r, const json_t *obj, bool restoring)
{
    srv *s = o->s;
    char *plan = NULL, *yaml, why[512] = "", summary[160] = "";
    if (r->w->kind == OP_USERJOB) {
        yaml = op_userjob_yaml(obj, &s->cluster, o->k, &plan, why, sizeof why);
        if (!yaml) {
            refuse(o, r, obj, "Invalid", why);
            return;
        }
        snprintf(summary, sizeof summary, "the user's own Job %s, admitted as it is", r->name);
    } else {
        yaml = op_object_yaml(obj);
    }
    char file[300];
    snprintf(file, sizeof file, "%s/%s", r->ns, r->name);
    restore_in in = {.o = o, .w = r->w, .obj = obj, .restoring = restoring};
    srv_submit_src src = {.body = yaml, .len = strlen(yaml), .file_name = file, .team = r->ns,
                          .team_why = "the object's namespace",
                          .team_fix = "leave spec.team out: in operator mode a job's namespace is "
                                      "its team",
                          .actor = "operator", .plan_json = plan, .plan_summary = summary,
                          .write = op_write, .after = after_submit, .ctx = &in};
    diag_list d;
    diag_list_init(&d);
    srv_submitted res;
    store_rc rc = srv_submit_text(s, &src, &res, &d);
    if (d.errors) {
        char *msg = op_diags_message(&d);
        refuse(o, r, obj, "Invalid", msg);
        free(msg);
    } else if (rc == STORE_CONFLICT) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "namespace %s already has a job named %s from another object (another group's "
                 "%s of that name, or an experiment's job): rename this one",
                 r->ns, res.conflict_name ? res.conflict_name : r->name, r->w->kind_name);
        refuse(o, r, obj, "NameTaken", msg);
    } else if (rc == STORE_OK || rc == STORE_EXISTS) {
        free(r->ids);
        r->ids = xcalloc(res.n ? res.n : 1, sizeof *r->ids);
        memcpy(r->ids, res.ids, res.n * sizeof *r->ids);
        r->n_ids = res.n;
        r->dirty = true;
        for (size_t i = 0; i < res.n; i++) {
            char id[24];
            snprintf(id, sizeof id, "%lld", (long long)res.ids[i]);
            json_object_set_new(o->by_job, id, json_integer((json_int_t)(intptr_t)r));
        }
        free(r->invalid);
        r->invalid = NULL;
        if (rc == STORE_OK && !restoring)
            srv_log(s, "operator: %s %s/%s queued (%zu job%s)", r->w->kind_name, r->ns, r->name,
                    res.n, res.n == 1 ? "" : "s");
    } else {
        srv_log(s, "operator: storing %s %s/%s: %s", r->w->kind_name, r->ns, r->name,
                store_error(o->st));
    }
    srv_submitted_free(&res);
    diag_list_free(&d);
    free(yaml);
    free(plan);
}

/* ---- objects that went ---- */
/* Cancels the jobs of a deleted (or replaced) object; the record stays,
 * under a key of its own, until they ended (op_status_pass drops it). */
static void obj_gone(struct op *o, op_obj *r)
{
    r->gone = true;
    for (size_t i = 0; i < r->n_ids; i++) {
        srv_cancel w = {.id = r->ids[i], .actor = "operator"};
        restore_in in = {.o = o};
        store_rc rc = op_write(&in, srv_cancel_write, &w);
        if (rc == STORE_OK) ctl_job_changed(o->s->ctl, r->ids[i]);
    }
    if (r->n_ids)
        srv_log(o->s, "operator: %s %s/%s deleted: its job%s cancelled", r->w->kind_name, r->ns,
                r->name, r->n_ids == 1 ? " is" : "s are");
    char *key = xasprintf("%s#%s", r->key, r->uid);
    json_object_del(o->objs, r->key); /* frees nothing: r is the integer's */
    free(r->key);
    r->key = key;
    put_obj(o, r);
}

/* True when every job of a gone object ended; then they and their records
 * leave the store. */
static bool drop_if_ended(struct op *o, op_obj *r)
{
    for (size_t i = 0; i < r->n_ids; i++) {
        store_job j;
        store_rc rc = store_job_get(o->st, r->ids[i], &j);
        bool ended = rc == STORE_NOT_FOUND || (rc == STORE_OK && store_state_final(j.state));
        store_job_clear(&j);
        if (!ended) return false;
    }
    for (size_t i = 0; i < r->n_ids; i++) {
        char key[40], id[24];
        op_owner_key(r->ids[i], key);
        snprintf(id, sizeof id, "%lld", (long long)r->ids[i]);
        json_object_del(o->by_job, id);
        store_kv_delete(o->st, key);
        store_job_delete(o->st, r->ids[i]);
        char *dir = srv_job_dir(&o->s->cfg, r->ids[i]);
        char err[256];
        if (dir_exists(dir)) file_remove_tree(dir, err, sizeof err);
        free(dir);
    }
    return true;
}

void op_reconcile(struct op *o, const char *key, bool restoring)
{
    char *ns = NULL, *name = NULL;
    op_watch *w = split_key(o, key, &ns, &name);
    if (!w) return;
    json_t *obj = k8s_informer_get(w->inf, ns, name);
    op_obj *r = op_obj_get(o, key);
    const char *uid = obj ? meta_str(obj, "uid") : NULL;
    if (r && (!obj || !uid || strcmp(r->uid, uid) != 0)) {
        obj_gone(o, r);
        r = NULL;
    }
    int64_t gen = obj ? json_integer_value(json_object_get(json_object_get(obj, "metadata"), "generation")) : 0;
    if (obj && uid && !r) {
        if (w->kind != OP_USERJOB || userjob_queued(obj, restoring)) {
            r = xcalloc(1, sizeof *r);
            r->w = w;
            r->key = xstrdup(key);
            r->ns = xstrdup(ns);
            r->name = xstrdup(name);
            r->uid = xstrdup(uid);
            r->generation = gen;
            /* the status the API holds: what a rebuilt record compares with,
             * so nothing is written (and no event repeated) that is already there */
            const json_t *had = json_object_get(obj, "status");
            if (json_object_size(had)) r->last_status = json_dumps(had, JSON_COMPACT | JSON_SORT_KEYS);
            put_obj(o, r);
            submit(o, r, obj, restoring);
        }
    } else if (obj && r && r->invalid && gen != r->generation) {
        r->generation = gen; /* edited: check it again */
        submit(o, r, obj, false);
    }
    json_decref(obj);
    free(ns);
    free(name);
}

/* ---- the status ---- */
/* A core/v1 Event on the object for each new phase, so `kubectl describe`
 * and `kubectl get events` tell its story; a failure to write one is
 * logged, never retried (events are best effort in Kubernetes too). */
static void phase_event(struct op *o, op_obj *r, const json_t *st)
{
    const char *phase = op_jstr(st, "phase");
    /* Starting and Stopping last seconds: their events would double the
     * API writes of a burst for little a reader learns */
    if (!phase || strcmp(phase, "Starting") == 0 || strcmp(phase, "Stopping") == 0) return;
    const char *msg = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
        if (strcmp(op_jstr(c, "status") ? op_jstr(c, "status") : "", "True") == 0 && op_jstr(c, "message") &&
            *op_jstr(c, "message"))
            msg = op_jstr(c, "message");
    bool bad = strcmp(phase, "Invalid") == 0 || strcmp(phase, "Failed") == 0 ||
               strcmp(phase, "TimedOut") == 0;
    char text[1024];
    snprintf(text, sizeof text, "%s", msg ? msg : phase);
    json_t *when_j = srv_json_time(wall_now());
    const char *when = json_string_value(when_j);
    char gen[300];
    snprintf(gen, sizeof gen, "%s.", r->name);
    json_t *ev = json_pack(
        "{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:i, "
        "s:s, s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "generateName", gen, "namespace", r->ns,
        "involvedObject", "apiVersion", r->w->api, "kind", r->w->kind_name, "name", r->name,
        "namespace", r->ns, "uid", r->uid, "reason", phase, "message", text, "type",
        bad ? "Warning" : "Normal", "source", "component", "lathe", "firstTimestamp", when,
        "lastTimestamp", when, "count", 1, "reportingComponent", "lathe", "reportingInstance",
        o->identity);
    json_decref(when_j);
    k8s_ref ref = {.api = "v1", .resource = "events", .ns = r->ns, .name = r->name};
    k8s_error e;
    if (k8s_create(o->cl, &ref, ev, NULL, &e) != K8S_OK)
        srv_log(o->s, "operator: an event for %s %s/%s: %s", r->w->kind_name, r->ns, r->name,
                e.message);
    json_decref(ev);
}

/* Writes status st of r's object when it differs from the last written:
 * a merge patch of the status subresource, with null for each field the
 * last status had and this one lacks. */
static bool write_status(struct op *o, op_obj *r, json_t *st, double now)
{
    char *text = json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS);
    if (r->last_status && strcmp(text, r->last_status) == 0) {
        free(text);
        return true;
    }
    if (r->status_at > 0 && now - r->status_at < o->k->op.status_interval) {
        free(text); /* soon: a later pass writes the newest */
        return false;
    }
    json_t *body = json_deep_copy(st);
    json_t *old = r->last_status ? json_loads(r->last_status, 0, NULL) : NULL;
    const char *k;
    json_t *v;
    json_object_foreach(old, k, v) if (!json_object_get(body, k)) json_object_set_new(body, k, json_null());
    json_decref(old);
    json_t *patch = json_pack("{s:o}", "status", body);
    k8s_ref ref = {.api = r->w->api, .resource = r->w->resource, .ns = r->ns, .name = r->name,
                   .sub = "status"};
    k8s_error e;
    k8s_rc rc = k8s_merge_patch(o->cl, &ref, patch, NULL, &e);
    json_decref(patch);
    if (rc == K8S_OK || rc == K8S_E_NOT_FOUND) {
        json_t *was = r->last_status ? json_loads(r->last_status, 0, NULL) : NULL;
        const char *before = op_jstr(was, "phase"), *now_phase = op_jstr(st, "phase");
        if (rc == K8S_OK && now_phase && (!before || strcmp(before, now_phase) != 0))
            phase_event(o, r, st);
        json_decref(was);
        free(r->last_status);
        r->last_status = text;
        r->status_at = now;
        return true;
    }
    srv_log(o->s, "operator: writing the status of %s %s/%s: %s", r->w->kind_name, r->ns, r->name,
            e.message);
    free(text);
    return false;
}

static json_t *status_of(struct op *o, op_obj *r)
{
    if (r->invalid)
        return op_invalid_status(r->invalid_reason, r->invalid, r->generation, r->invalid_at);
    if (!r->n_ids) return NULL;
    store_job *jobs = xcalloc(r->n_ids, sizeof *jobs);
    size_t n = 0;
    for (size_t i = 0; i < r->n_ids; i++)
        if (store_job_get(o->st, r->ids[i], &jobs[n]) == STORE_OK) n++;
    json_t *st = NULL;
    if (n == r->n_ids)
        st = r->w->kind == OP_LORAEXP ? op_experiment_status(jobs, n, r->generation)
                                      : op_job_status(&jobs[0], r->generation);
    for (size_t i = 0; i < n; i++) store_job_clear(&jobs[i]);
    free(jobs);
    return st;
}

/* Marks dirty the objects whose jobs the store changed since the last
 * pass asked (with a margin for transactions that committed late). */
#define STATUS_OVERLAP 5.0
static void mark_changed(struct op *o, double wall)
{
    store_job_filter f = {.summary = true, .updated_after = o->status_mark - STATUS_OVERLAP};
    store_job_list l;
    if (store_jobs_list(o->st, &f, &l) != STORE_OK) {
        o->next_full = 0; /* look at everything next time */
        return;
    }
    for (size_t i = 0; i < l.n; i++) {
        char id[24];
        snprintf(id, sizeof id, "%lld", (long long)l.items[i].id);
        json_t *v = json_object_get(o->by_job, id);
        if (v) ((op_obj *)(intptr_t)json_integer_value(v))->dirty = true;
    }
    store_job_list_free(&l);
    o->status_mark = wall;
}

/* Each pass reads only the jobs the store changed since the one before
 * (an indexless scan of updated_at, not a read per object), and every
 * FULL_EVERY seconds every object, so a status the API lost (a failed
 * write, an object edited by hand) is written again. */
#define FULL_EVERY 30.0
void op_status_pass(struct op *o, double now)
{
    if (now < o->next_status) return;
    /* one pass per statusInterval (writes are at most that often anyway) */
    double every = o->k->op.status_interval;
    o->next_status = now + (every < 0.05 ? 0.05 : every > 5 ? 5 : every);
    bool full = now >= o->next_full;
    if (full) {
        o->next_full = now + FULL_EVERY;
        o->status_mark = wall_now();
    } else {
        mark_changed(o, wall_now());
    }
    json_t *drop = json_array();
    const char *key;
    json_t *v;
    json_object_foreach(o->objs, key, v) {
        op_obj *r = (op_obj *)(intptr_t)json_integer_value(v);
        if (r->gone) {
            if (drop_if_ended(o, r)) json_array_append_new(drop, json_string(key));
            continue;
        }
        if (r->w->kind == OP_USERJOB || !(full || r->dirty || !r->last_status)) continue;
        json_t *st = status_of(o, r);
        r->dirty = st && !write_status(o, r, st, now);
        json_decref(st);
    }
    size_t i;
    json_array_foreach(drop, i, v) {
        op_obj *r = op_obj_get(o, json_string_value(v));
        json_object_del(o->objs, json_string_value(v));
        op_obj_free(r);
    }
    json_decref(drop);
}

bool op_list_owned(struct op *o, char *err, size_t errsz)
{
    json_decref(o->owned);
    o->owned = json_object();
    for (size_t n = 0; n < o->k->op.n_namespaces; n++) {
        k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = o->k->op.namespaces[n]};
        json_t *items = NULL;
        k8s_error e;
        if (k8s_list(o->cl, &ref, K8S_LABEL_OWNER_UID, NULL, 0, &items, NULL, &e) != K8S_OK) {
            snprintf(err, errsz, "listing the Jobs of namespace %s: %s", ref.ns, e.message);
            return false;
        }
        size_t i;
        json_t *job;
        json_array_foreach(items, i, job) {
            const json_t *labels = json_object_get(json_object_get(job, "metadata"), "labels");
            const char *uid = op_jstr(labels, K8S_LABEL_OWNER_UID), *name = op_jstr(labels, K8S_LABEL_JOB);
            if (!uid || !name) continue;
            char *key = xasprintf("%s/%s", uid, name);
            const json_t *have = json_object_get(o->owned, key);
            if (!have || label_int(have, K8S_LABEL_ATTEMPT) < label_int(job, K8S_LABEL_ATTEMPT))
                json_object_set(o->owned, key, job);
            free(key);
        }
        json_decref(items);
    }
    return true;
}
