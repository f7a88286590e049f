/* srv_api.c: the /v1 endpoints other than submission and logs (docs/api.md):
 * list, get, cancel and delete jobs, a job's events and progress history,
 * experiments, nodes (who uses which GPU), teams (quota, use, borrowing,
 * budget) and priority classes. A team token sees its own team only; other
 * teams' jobs are 404, exactly as if they did not exist. */
#include "ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- jobs ---- */

/* ?limit=N within [1, max]; def when absent. False after replying 400. */
static bool query_limit(srv_req *r, long def, long max, long *out)
{
    const char *v = srv_req_query(r, "limit");
    *out = def;
    if (!v) return true;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 1 || n > max) {
        srv_reply_error(r, 400, "bad_request", "limit=%s: expected a number from 1 to %ld", v, max);
        return false;
    }
    *out = n;
    return true;
}

/* ?state=running,queued&state=... into a STORE_STATE_BIT set. */
static bool query_states(srv_req *r, unsigned *out)
{
    *out = 0;
    char *all = srv_req_query_all(r, "state");
    if (!all) return true;
    char **parts;
    size_t n = str_split(all, ',', &parts);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        store_state s;
        if (store_state_parse(parts[i], &s)) {
            *out |= STORE_STATE_BIT(s);
        } else {
            srv_reply_error(r, 400, "bad_request",
                            "state=%s: expected queued, starting, running, stopping, succeeded, "
                            "failed, cancelled or timed_out",
                            parts[i]);
            ok = false;
        }
    }
    str_list_free(parts, n);
    free(all);
    return ok;
}

void srv_api_jobs_list(srv_req *r)
{
    long limit;
    unsigned states;
    if (!query_limit(r, 100, 1000, &limit) || !query_states(r, &states)) return;
    store_job_filter f = {.team = srv_req_team(r), .states = states,
                          .experiment = srv_req_query(r, "experiment"), .limit = (size_t)limit,
                          .page_token = srv_req_query(r, "page_token"), .summary = true};
    store_job_list l = {0};
    store *st = srv_req_store(r);
    store_rc rc = store_jobs_list(st, &f, &l);
    if (rc == STORE_INVALID) {
        srv_reply_error(r, 400, "bad_request", "page_token: %s", store_error(st));
        return;
    }
    if (rc != STORE_OK) {
        srv_reply_store_error(r, "listing jobs");
        return;
    }
    json_t *items = json_array();
    for (size_t i = 0; i < l.n; i++) json_array_append_new(items, srv_job_json(srv_req_server(r), st, &l.items[i], false));
    srv_reply_json(r, 200, json_pack("{s:o, s:o}", "items", items, "next_page_token",
                                     srv_json_str(l.next_page_token)));
    store_job_list_free(&l);
}

void srv_api_job_get(srv_req *r, const char *name)
{
    store_job j;
    if (!srv_find_job(r, name, &j)) return;
    srv_reply_json(r, 200, srv_job_json(srv_req_server(r), srv_req_store(r), &j, true));
    store_job_clear(&j);
}

/* Deleting a final job and its stop reason, as one write. */
static store_rc write_delete(store *st, void *arg)
{
    const int64_t *id = arg;
    store_rc rc = store_job_delete(st, *id);
    if (rc != STORE_OK) return rc;
    char key[32];
    ctl_stop_key(*id, key);
    rc = store_kv_delete(st, key);
    return rc == STORE_NOT_FOUND ? STORE_OK : rc;
}

/* ?purge=1 (or true): also remove the job's folder (logs, checkpoints,
 * adapters), after the job left the store. */
static bool query_purge(srv_req *r, bool *out)
{
    const char *v = srv_req_query(r, "purge");
    *out = v && (!strcmp(v, "1") || !strcmp(v, "true"));
    if (!v || *out || !strcmp(v, "0") || !strcmp(v, "false")) return true;
    srv_reply_error(r, 400, "bad_request", "purge=%s: expected 1, true, 0 or false", v);
    return false;
}

void srv_api_job_delete(srv_req *r, const char *name)
{
    bool purge;
    if (!query_purge(r, &purge)) return;
    store_job j;
    if (!srv_find_job(r, name, &j)) return;
    store_rc rc = srv_write(r, write_delete, &j.id);
    char err[512];
    char *dir = purge ? srv_job_dir(&srv_req_server(r)->cfg, j.id) : NULL;
    if (rc == STORE_OK && dir && file_remove_tree(dir, err, sizeof err) != 0) {
        srv_reply_error(r, 500, "internal", "job %s was deleted, but its folder stays: %s", name, err);
    } else if (rc == STORE_OK) {
        srv_reply_empty(r, 204);
    } else if (rc == STORE_CONFLICT) {
        srv_reply_error(r, 409, "conflict", "job %s is %s: cancel it first", name,
                        store_state_name(j.state));
    } else if (rc == STORE_NOT_FOUND) {
        srv_reply_error(r, 404, "not_found", "no job named %s", name);
    } else {
        srv_reply_store_error(r, "deleting the job");
    }
    free(dir);
    store_job_clear(&j);
}

static store_rc cancel_queued(store *st, srv_cancel *w)
{
    char msg[160];
    snprintf(msg, sizeof msg, "cancelled by %s while queued", w->actor);
    store_event ev = {.actor = w->actor, .type = "cancelled", .message = msg};
    store_job_update upd = {.set = STORE_SET_WAIT_REASON | STORE_SET_NOT_BEFORE};
    return store_job_transition(st, w->id, STORE_QUEUED, STORE_CANCELLED, &upd, &ev, NULL);
}

/* A placed job moves to stopping (the controller sends SIGTERM); one that
 * is stopping already (a preemption, a timeout) stops as a cancel. */
static store_rc cancel_placed(store *st, srv_cancel *w)
{
    char msg[160], key[32];
    snprintf(msg, sizeof msg, "cancel requested by %s: SIGTERM, the trainer checkpoints and stops",
             w->actor);
    store_event ev = {.actor = w->actor, .type = "cancelling", .message = msg};
    ctl_stop_key(w->id, key);
    store_rc rc = store_kv_set(st, key, ctl_stop_name(CTL_STOP_CANCEL));
    if (rc != STORE_OK) return rc;
    if (w->found == STORE_STOPPING)
        return store_job_update_fields(st, w->id, STORE_STATE_BIT(STORE_STOPPING), NULL, &ev);
    return store_job_transition(st, w->id, w->found, STORE_STOPPING, NULL, &ev, NULL);
}

store_rc srv_cancel_write(store *st, void *arg)
{
    srv_cancel *w = arg;
    store_job j;
    store_rc rc = store_job_get(st, w->id, &j);
    if (rc != STORE_OK) return rc;
    w->found = j.state;
    store_job_clear(&j);
    if (store_state_final(w->found)) return STORE_CONFLICT;
    return w->found == STORE_QUEUED ? cancel_queued(st, w) : cancel_placed(st, w);
}

void srv_api_job_cancel(srv_req *r, const char *name)
{
    store_job j;
    if (!srv_find_job(r, name, &j)) return;
    store *st = srv_req_store(r);
    srv_cancel w = {.id = j.id, .actor = srv_req_actor(r), .found = j.state};
    store_rc rc = srv_write(r, srv_cancel_write, &w);
    if (rc == STORE_OK) {
        ctl_job_changed(srv_req_server(r)->ctl, w.id);
        store_job_clear(&j);
        if (store_job_get(st, w.id, &j) == STORE_OK)
            srv_reply_json(r, 202, srv_job_json(srv_req_server(r), st, &j, false));
        else
            srv_reply_store_error(r, "reading the job back");
    } else if (rc == STORE_CONFLICT && store_state_final(w.found)) {
        srv_reply_error(r, 409, "conflict", "job %s already ended (%s)", name,
                        store_state_name(w.found));
    } else if (rc == STORE_NOT_FOUND) {
        srv_reply_error(r, 404, "not_found", "no job named %s", name);
    } else {
        srv_reply_store_error(r, "cancelling the job");
    }
    store_job_clear(&j);
}

void srv_api_job_events(srv_req *r, const char *name)
{
    store_job j;
    if (!srv_find_job(r, name, &j)) return;
    store_event_list l = {0};
    if (store_events_list(srv_req_store(r), j.id, 0, 0, &l) == STORE_OK)
        srv_reply_json(r, 200, srv_events_json(&l));
    else
        srv_reply_store_error(r, "reading events");
    store_event_list_free(&l);
    store_job_clear(&j);
}

void srv_api_job_progress(srv_req *r, const char *name)
{
    long limit;
    if (!query_limit(r, 1000, 1000, &limit)) return;
    store_job j;
    if (!srv_find_job(r, name, &j)) return;
    store_progress *pts = NULL;
    size_t n = 0;
    if (store_progress_list(srv_req_store(r), j.id, (size_t)limit, &pts, &n) != STORE_OK) {
        srv_reply_store_error(r, "reading progress");
        store_job_clear(&j);
        return;
    }
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "step", json_integer(pts[i].step));
        json_object_set_new(o, "loss", srv_json_num(pts[i].loss));
        json_object_set_new(o, "learning_rate", srv_json_num(pts[i].learning_rate));
        json_object_set_new(o, "tokens_per_second", srv_json_num(pts[i].tokens_per_second));
        json_object_set_new(o, "eval_loss", pts[i].has_eval ? srv_json_num(pts[i].eval_loss) : json_null());
        json_object_set_new(o, "at", srv_json_time(pts[i].at));
        json_array_append_new(items, o);
    }
    free(pts);
    srv_reply_json(r, 200, json_pack("{s:o}", "items", items));
    store_job_clear(&j);
}

/* ---- experiments ---- */
static json_t *states_json(const store_count *c)
{
    json_t *o = json_object();
    for (int s = 0; s < STORE_N_STATES; s++)
        if (c && c->by_state[s]) json_object_set_new(o, store_state_name((store_state)s),
                                                     json_integer(c->by_state[s]));
    return o;
}

static json_t *experiment_json(const store_experiment *e, const store_count_list *counts)
{
    const store_count *c = NULL;
    for (size_t i = 0; i < counts->n && !c; i++)
        if (!strcmp(counts->items[i].team, e->team) && !strcmp(counts->items[i].group, e->name))
            c = &counts->items[i];
    return json_pack("{s:s, s:s, s:I, s:i, s:o}", "name", e->name, "team", e->team, "jobs",
                     (json_int_t)(c ? c->total : 0), "max_concurrent", e->max_concurrent,
                     "states", states_json(c));
}

static void experiment_detail(srv_req *r, const store_experiment *e, const store_count_list *cl)
{
    store *st = srv_req_store(r);
    store_job_filter f = {.team = e->team, .experiment = e->name, .summary = true};
    store_job_list l = {0};
    if (store_jobs_list(st, &f, &l) != STORE_OK) {
        srv_reply_store_error(r, "listing the experiment's jobs");
        return;
    }
    json_t *o = experiment_json(e, cl), *jobs = json_array();
    for (size_t i = 0; i < l.n; i++) json_array_append_new(jobs, srv_job_json(srv_req_server(r), st, &l.items[i], false));
    json_object_set_new(o, "jobs", jobs);
    store_job_list_free(&l);
    srv_reply_json(r, 200, o);
}

void srv_api_experiments(srv_req *r, const char *name)
{
    store *st = srv_req_store(r);
    const char *team = srv_req_team(r);
    store_experiment *list = NULL;
    size_t n = 0;
    store_count_list counts = {0};
    if (store_experiments_list(st, team, &list, &n) != STORE_OK ||
        store_count_jobs(st, STORE_GROUP_EXPERIMENT, team, &counts) != STORE_OK) {
        srv_reply_store_error(r, "listing experiments");
        store_experiments_free(list, n);
        return;
    }
    if (!name) {
        json_t *items = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(items, experiment_json(&list[i], &counts));
        srv_reply_json(r, 200, json_pack("{s:o}", "items", items));
    } else {
        size_t found = n, matches = 0;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(list[i].name, name)) found = matches++ ? found : i;
        if (matches == 0) srv_reply_error(r, 404, "not_found", "no experiment named %s", name);
        else if (matches > 1) srv_reply_error(r, 409, "conflict", "several teams have an experiment named %s: add ?team=TEAM", name);
        else experiment_detail(r, &list[found], &counts);
    }
    store_count_list_free(&counts);
    store_experiments_free(list, n);
}

/* ---- cluster ---- */
static const char *node_state_name(sched_node_state s)
{
    return s == SCHED_NODE_READY ? "ready" : s == SCHED_NODE_DRAINING ? "draining" : "down";
}

/* NVML's latest figures of GPU g, or null. */
static json_t *sample_json(const ctl_view *v, int g)
{
    if (!v || !v->samples || g >= v->n_gpus || !v->samples[g].ok) return json_null();
    const exec_gpu_sample *x = &v->samples[g];
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "util", srv_json_num(x->util),
                     "memory_util", srv_json_num(x->mem_util), "memory_used",
                     srv_json_num(x->mem_used), "memory_total", srv_json_num(x->mem_total),
                     "power", srv_json_num(x->power), "temperature", srv_json_num(x->temp),
                     "sm_clock", srv_json_num(x->sm_clock), "at", srv_json_time(v->sample_at));
}

static json_t *gpu_json(const srv *s, const ctl_view *v, int g, const char *team)
{
    const sched_cluster *c = s->cluster.sched;
    json_t *jobs = json_array();
    for (size_t k = 0; v && g < v->n_gpus && k < v->gpus[g].n; k++) {
        const ctl_view_job *vj = &v->gpus[g].jobs[k];
        bool visible = !team || !strcmp(team, vj->team);
        json_array_append_new(jobs, json_pack("{s:o, s:s, s:f}", "name",
                                              visible ? json_string(vj->name) : json_null(),
                                              "team", vj->team, "share", vj->share / 100.0));
    }
    const sched_node *n = &c->nodes[c->gpu_node[g]];
    const srv_gpu *sg = &s->cluster.gpus[g];
    return json_pack("{s:i, s:i, s:o, s:b, s:o, s:o, s:o}", "index", g - n->first_gpu,
                     "nvlink_group", c->gpu_group[g] - n->first_group, "jobs", jobs, "fragmented",
                     v && v->frag_gpu && g < v->n_gpus && v->frag_gpu[g], "uuid",
                     sg->is_virtual ? json_null() : json_string(sg->id), "model",
                     srv_json_str(sg->model), "sample", sample_json(v, g));
}

void srv_api_nodes(srv_req *r)
{
    srv *s = srv_req_server(r);
    const sched_cluster *c = s->cluster.sched;
    const srv_token *t = srv_req_token(r);
    const char *team = t->admin ? NULL : t->team;
    const ctl_view *v = ctl_view_acquire(s->ctl);
    json_t *items = json_array();
    for (int i = 0; i < c->n_nodes; i++) {
        const sched_node *n = &c->nodes[i];
        json_t *gpus = json_array();
        for (int k = 0; k < n->n_gpus; k++) json_array_append_new(gpus, gpu_json(s, v, n->first_gpu + k, team));
        json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:s, s:b, s:o}", "name", n->name,
                                               "rack", c->racks[n->rack], "state",
                                               node_state_name(n->state), "gpu_type",
                                               c->types[n->type].name, "virtual",
                                               s->cluster.gpus[n->first_gpu].is_virtual, "gpus", gpus));
    }
    json_t *body = json_pack("{s:o, s:s, s:b, s:i, s:i}", "items", items, "source",
                             s->cluster.source, "cpu_mode", s->cluster.cpu_mode, "cpu_slots",
                             s->cluster.cpu_slots, "cpu_slots_in_use", v ? v->cpu_in_use : 0);
    ctl_view_release(s->ctl);
    srv_reply_json(r, 200, body);
}

/* Per type: quota (when set), GPUs in use, borrowed beyond quota and idle
 * quota lent to borrowers. */
typedef struct team_use {
    int *quota, *in_use, *borrowed, *lent;
} team_use;

static int type_quota(const sched_team *t, int type, int n_types)
{
    if (!t->limited) return SCHED_UNLIMITED;
    if (t->quota[type] != SCHED_UNLIMITED) return t->quota[type];
    return t->quota[n_types]; /* "any type" */
}

static void compute_use(const sched_cluster *c, const ctl_view *v, team_use *u)
{
    int nt = c->n_types, n = c->n_teams * nt;
    u->quota = xcalloc((size_t)n + 1, sizeof(int));
    u->in_use = xcalloc((size_t)n + 1, sizeof(int));
    u->borrowed = xcalloc((size_t)n + 1, sizeof(int));
    u->lent = xcalloc((size_t)n + 1, sizeof(int));
    for (int t = 0; t < c->n_teams; t++)
        for (int y = 0; y < nt; y++) {
            int q = type_quota(&c->teams[t], y, nt), use = v && v->in_use && t < v->n_teams
                                                         ? v->in_use[t * v->n_types + y] : 0;
            u->quota[t * nt + y] = q;
            u->in_use[t * nt + y] = use;
            u->borrowed[t * nt + y] = q != SCHED_UNLIMITED && use > q ? use - q : 0;
        }
    for (int y = 0; y < nt; y++) {
        int owed = 0; /* borrowed GPUs of this type: lent by teams with idle quota */
        for (int t = 0; t < c->n_teams; t++) owed += u->borrowed[t * nt + y];
        for (int t = 0; t < c->n_teams && owed > 0; t++) {
            int q = u->quota[t * nt + y], idle = q == SCHED_UNLIMITED ? 0 : q - u->in_use[t * nt + y];
            int give = idle > 0 ? (idle < owed ? idle : owed) : 0;
            u->lent[t * nt + y] = give;
            owed -= give;
        }
    }
}

static json_t *by_type(const sched_cluster *c, const int *vals, int t, bool skip_unlimited)
{
    json_t *o = json_object();
    for (int y = 0; y < c->n_types; y++) {
        int v = vals[t * c->n_types + y];
        if ((skip_unlimited && v == SCHED_UNLIMITED) || (!skip_unlimited && v == 0)) continue;
        json_object_set_new(o, c->types[y].name, json_integer(v));
    }
    return o;
}

void srv_api_teams(srv_req *r)
{
    srv *s = srv_req_server(r);
    const sched_cluster *c = s->cluster.sched;
    const srv_token *tok = srv_req_token(r);
    const ctl_view *v = ctl_view_acquire(s->ctl);
    team_use u;
    compute_use(c, v, &u);
    json_t *items = json_array();
    for (int t = 0; t < c->n_teams; t++) {
        const sched_team *tm = &c->teams[t];
        if (!tok->admin && strcmp(tok->team, tm->name) != 0) continue;
        bool in_view = v && t < v->n_teams;
        json_array_append_new(
            items, json_pack("{s:s, s:o, s:o, s:o, s:o, s:f, s:f, s:f, s:i, s:i}", "name",
                             tm->name, "quota", by_type(c, u.quota, t, true), "in_use",
                             by_type(c, u.in_use, t, false), "borrowed",
                             by_type(c, u.borrowed, t, false), "lent", by_type(c, u.lent, t, false),
                             "weight", tm->weight, "budget_per_month", tm->budget,
                             "spent_this_month", in_view ? v->spent[t] : 0.0, "running",
                             in_view ? v->running[t] : 0, "queued", in_view ? v->queued[t] : 0));
        json_t *it = json_array_get(items, json_array_size(items) - 1);
        json_object_set_new(it, "budget_used",
                            tm->budget > 0 && in_view ? json_real(v->spent[t] / tm->budget) : json_null());
        json_object_set_new(it, "budget_threshold", json_real(in_view ? v->budget_level[t] : 0));
        json_object_set_new(it, "queued_since", srv_json_time(in_view ? v->queued_since[t] : 0));
    }
    ctl_view_release(s->ctl);
    free(u.quota);
    free(u.in_use);
    free(u.borrowed);
    free(u.lent);
    srv_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

void srv_api_priority_classes(srv_req *r)
{
    const spec_cluster *c = srv_req_server(r)->cluster.spec;
    json_t *items = json_array();
    for (size_t i = 0; i < c->n_priority_classes; i++) {
        const spec_priority_class *p = &c->priority_classes[i];
        json_array_append_new(items, json_pack("{s:s, s:I, s:s, s:b}", "name", p->name, "value",
                                               (json_int_t)p->value, "preemption_policy",
                                               p->preempt_lower ? "PreemptLowerPriority" : "Never",
                                               "global_default", p->global_default));
    }
    srv_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

void srv_api_whoami(srv_req *r)
{
    const srv_token *t = srv_req_token(r);
    srv_reply_json(r, 200,
                   json_pack("{s:o, s:o, s:b, s:s, s:o}", "name", srv_json_str(t->name), "team",
                             srv_json_str(t->team), "admin", t->admin, "scope",
                             srv_scope_name(t->scope), "expires_at",
                             srv_json_time(t->expires_at)));
}
