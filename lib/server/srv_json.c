/* srv_json.c: what the API shows, as JSON (docs/api.md): a job (with its
 * plan, resolved spec and checkpoints in the full view; its eval losses,
 * with the best one's checkpoint and the final adapter in the full view),
 * events,
 * diagnostics (the same shape as `lathe validate -o json`), times as RFC
 * 3339 UTC, unknown numbers as null. Also finding the job a request names
 * among the teams its token may see. */
#include "srv_internal.h"

#include "ctl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool srv_parse_time(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end != s && *end == '\0' && isfinite(v) && v >= 0) {
        *out = v;
        return true;
    }
    return units_parse_time(s, out);
}

json_t *srv_json_time(double t)
{
    if (!(t > 0)) return json_null();
    time_t secs = (time_t)t;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[40];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

json_t *srv_json_str(const char *s)
{
    return s ? json_string(s) : json_null();
}

json_t *srv_json_num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *srv_json_parse(const char *text)
{
    if (!text) return json_null();
    json_t *v = json_loads(text, 0, NULL);
    return v ? v : json_null();
}

json_t *srv_json_diag(const diag *x)
{
    static const char *const levels[] = {"error", "warning", "note"};
    json_t *o = json_object();
    json_object_set_new(o, "level", json_string(levels[x->level]));
    json_object_set_new(o, "file", srv_json_str(x->file));
    json_object_set_new(o, "line", json_integer(x->line));
    json_object_set_new(o, "column", json_integer(x->col));
    json_object_set_new(o, "path", srv_json_str(x->path));
    json_object_set_new(o, "message", json_string(x->message));
    json_object_set_new(o, "expected", srv_json_str(x->expected));
    json_object_set_new(o, "found", srv_json_str(x->found));
    json_object_set_new(o, "suggestion", srv_json_str(x->suggestion));
    return o;
}

static json_t *int_or_null(int64_t v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

static json_t *progress_json(const store_progress *p)
{
    if (p->step < 0) return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(p->step));
    json_object_set_new(o, "total_steps", int_or_null(p->total_steps));
    json_object_set_new(o, "epoch", srv_json_num(p->epoch));
    json_object_set_new(o, "loss", srv_json_num(p->loss));
    json_object_set_new(o, "learning_rate", srv_json_num(p->learning_rate));
    json_object_set_new(o, "tokens_per_second", srv_json_num(p->tokens_per_second));
    json_object_set_new(o, "eta_seconds", srv_json_num(p->eta_seconds));
    json_object_set_new(o, "at", srv_json_time(p->at));
    return o;
}

static json_t *exit_json(const store_job *j)
{
    if (j->exit_code < 0 && j->exit_signal == 0 && !j->exit_reason) return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "code", int_or_null(j->exit_code));
    json_object_set_new(o, "signal", j->exit_signal ? json_integer(j->exit_signal) : json_null());
    json_object_set_new(o, "reason", srv_json_str(j->exit_reason));
    return o;
}

/* Every checkpoint the job's events recorded, oldest first. */
static json_t *checkpoints_json(store *st, const store_job *j)
{
    json_t *list = json_array();
    store_event_list ev = {0};
    if (store_events_list(st, j->id, 0, 0, &ev) != STORE_OK) return list;
    for (size_t i = 0; i < ev.n; i++) {
        if (strcmp(ev.items[i].type, "checkpoint") != 0 || !ev.items[i].data_json) continue;
        json_t *d = json_loads(ev.items[i].data_json, 0, NULL);
        if (!d) continue;
        json_t *c = json_object();
        json_object_set(c, "step", json_object_get(d, "step"));
        json_object_set(c, "path", json_object_get(d, "path"));
        json_object_set_new(c, "at", srv_json_time(ev.items[i].at));
        json_array_append_new(list, c);
        json_decref(d);
    }
    store_event_list_free(&ev);
    return list;
}

/* The job's eval losses (null before its first evaluation): the latest and
 * the best with their steps; in the full view also the checkpoint saved at
 * the best step (null when none was) from the checkpoint list. */
static json_t *eval_json(const store_job *j, const json_t *checkpoints)
{
    if (j->best_eval_step < 0) return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "loss", srv_json_num(j->eval_loss));
    json_object_set_new(o, "step", int_or_null(j->eval_step));
    json_object_set_new(o, "best_loss", srv_json_num(j->best_eval_loss));
    json_object_set_new(o, "best_step", int_or_null(j->best_eval_step));
    json_t *path = json_null();
    for (size_t i = 0; i < json_array_size(checkpoints); i++) {
        json_t *c = json_array_get(checkpoints, i);
        if (json_integer_value(json_object_get(c, "step")) == j->best_eval_step) {
            json_decref(path);
            path = json_incref(json_object_get(c, "path"));
        }
    }
    json_object_set_new(o, "best_checkpoint", path);
    return o;
}

/* The final adapter folder the trainer reported when the job succeeded
 * (its `succeeded` event), else null. */
static json_t *adapter_json(store *st, const store_job *j)
{
    if (j->state != STORE_SUCCEEDED) return json_null();
    json_t *out = json_null();
    store_event_list ev = {0};
    if (store_events_list(st, j->id, 0, 0, &ev) != STORE_OK) return out;
    for (size_t i = 0; i < ev.n; i++) {
        if (strcmp(ev.items[i].type, "succeeded") != 0 || !ev.items[i].data_json) continue;
        json_t *d = json_loads(ev.items[i].data_json, 0, NULL);
        const char *a = json_string_value(json_object_get(d, "adapter"));
        if (a) {
            json_decref(out);
            out = json_string(a);
        }
        json_decref(d);
    }
    store_event_list_free(&ev);
    return out;
}

/* GPU-seconds and cost of the running attempt (0 when none). */
static void live_usage(const srv *s, store *st, const store_job *j, double *gs, double *cost)
{
    *gs = *cost = 0;
    if (j->state != STORE_STARTING && j->state != STORE_RUNNING && j->state != STORE_STOPPING) return;
    json_t *p = j->placement_json ? json_loads(j->placement_json, 0, NULL) : NULL;
    json_t *nodes = p ? json_object_get(p, "nodes") : NULL;
    size_t n = json_array_size(json_object_get(p, "gpus"));
    if (json_is_array(nodes)) {
        n = 0;
        for (size_t i = 0; i < json_array_size(nodes); i++)
            n += json_array_size(json_object_get(json_array_get(nodes, i), "gpus"));
    }
    const char *type = p ? json_string_value(json_object_get(p, "gpu_type")) : NULL;
    int t = type ? sched_cluster_find_type(s->cluster.sched, type) : -1;
    double price = t >= 0 ? s->cluster.sched->types[t].price_per_hour : 0;
    double held = (double)n * ctl_placement_share_of(p) / SCHED_SHARE_WHOLE;
    json_decref(p);
    store_attempt a;
    if (n == 0 || store_attempt_get(st, j->id, j->attempts, &a) != STORE_OK) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    if (a.started_at > 0 && now > a.started_at) *gs = (now - a.started_at) * held;
    *cost = *gs / 3600.0 * price;
    store_attempt_clear(&a);
}

json_t *srv_job_json(const srv *s, store *st, const store_job *j, bool full)
{
    double live_gs, live_cost;
    live_usage(s, st, j, &live_gs, &live_cost);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(j->name));
    json_object_set_new(o, "team", json_string(j->team));
    json_object_set_new(o, "experiment", srv_json_str(j->experiment));
    json_object_set_new(o, "state", json_string(store_state_name(j->state)));
    json_object_set_new(o, "priority_class", srv_json_str(j->priority_class));
    json_object_set_new(o, "priority", json_integer(j->priority));
    json_object_set_new(o, "created_at", srv_json_time(j->created_at));
    json_object_set_new(o, "started_at", srv_json_time(j->started_at));
    json_object_set_new(o, "finished_at", srv_json_time(j->finished_at));
    json_object_set_new(o, "attempt", json_integer(j->attempts));
    json_object_set_new(o, "max_retries", json_integer(j->max_retries));
    json_object_set_new(o, "not_before", srv_json_time(j->not_before));
    json_object_set_new(o, "wait_reason", srv_json_str(j->wait_reason));
    json_object_set_new(o, "placement", srv_json_parse(j->placement_json));
    json_object_set_new(o, "progress", progress_json(&j->progress));
    json_t *cks = full ? checkpoints_json(st, j) : json_null();
    json_object_set_new(o, "eval", eval_json(j, cks));
    json_object_set_new(o, "checkpoints", cks);
    json_object_set_new(o, "adapter", full ? adapter_json(st, j) : json_null());
    json_object_set_new(o, "gpu_hours", json_real((j->gpu_seconds + live_gs) / 3600.0));
    json_object_set_new(o, "cost", json_real(j->cost + live_cost));
    json_object_set_new(o, "plan", full ? srv_json_parse(j->plan_json) : json_null());
    json_object_set_new(o, "exit", exit_json(j));
    json_object_set_new(o, "spec", full ? srv_json_parse(j->spec_json) : json_null());
    json_object_set_new(o, "gpu", full ? srv_job_gpu_summary(st, j) : json_null());
    return o;
}

json_t *srv_events_json(const store_event_list *l)
{
    json_t *items = json_array();
    for (size_t i = 0; i < l->n; i++) {
        const store_event_row *e = &l->items[i];
        json_t *o = json_object();
        json_object_set_new(o, "at", srv_json_time(e->at));
        json_object_set_new(o, "actor", json_string(e->actor));
        json_object_set_new(o, "type", json_string(e->type));
        json_object_set_new(o, "message", json_string(e->message));
        json_object_set_new(o, "data", e->data_json ? srv_json_parse(e->data_json) : json_object());
        json_array_append_new(items, o);
    }
    return json_pack("{s:o}", "items", items);
}

/* Admin without ?team=: the name in every team. */
static bool find_any_team(srv_req *r, const char *name, store_job *out)
{
    const sched_cluster *c = srv_req_server(r)->cluster.sched;
    store *st = srv_req_store(r);
    int found = 0;
    sb teams;
    sb_init(&teams);
    for (int t = 0; t < c->n_teams; t++) {
        store_job j;
        store_rc rc = store_job_find(st, c->teams[t].name, name, &j);
        if (rc == STORE_NOT_FOUND) continue;
        if (rc != STORE_OK) {
            sb_free(&teams);
            if (found) store_job_clear(out);
            srv_reply_store_error(r, "reading the job");
            return false;
        }
        sb_printf(&teams, "%s%s", found ? ", " : "", c->teams[t].name);
        if (found++) store_job_clear(&j);
        else *out = j;
    }
    bool ok = found == 1;
    if (found == 0) srv_reply_error(r, 404, "not_found", "no job named %s", name);
    if (found > 1) {
        store_job_clear(out);
        srv_reply_error(r, 409, "conflict",
                        "teams %s each have a job named %s: add ?team=TEAM", sb_str(&teams), name);
    }
    sb_free(&teams);
    return ok;
}

bool srv_find_job(srv_req *r, const char *name, store_job *out)
{
    memset(out, 0, sizeof *out);
    const char *team = srv_req_team(r);
    if (!team) return find_any_team(r, name, out);
    store_rc rc = store_job_find(srv_req_store(r), team, name, out);
    if (rc == STORE_OK) return true;
    if (rc == STORE_NOT_FOUND) srv_reply_error(r, 404, "not_found", "no job named %s", name);
    else srv_reply_store_error(r, "reading the job");
    return false;
}
