/* ctl_run.c: attempts, from start to end.
 *
 * Start: queued -> starting with the placement and a new attempt row (one
 * transaction), then the resolved spec is written to the job's folder and
 * the executor launches the trainer (the built-in `lathe train SPEC`, or
 * the spec's trainer.command as argv) with the trainer contract's
 * environment; its handle is stored and the job moves to running.
 *
 * Poll: progress points go to the store in one batch per poll, each
 * checkpoint updates the job and adds a "checkpoint" event.
 *
 * Stop: cancel (an HTTP thread), preemption (the scheduler) and
 * maxDuration (here) move the job to stopping with the reason in kv; the
 * executor sends SIGTERM, then SIGKILL after the spec's grace period.
 *
 * End (ctl_attempt_ended), in one transaction that reads the job's state
 * and stop reason:
 *
 *   exit 0                       -> succeeded
 *   stopping for cancel          -> cancelled
 *   stopping for maxDuration     -> timed_out
 *   stopping for preemption      -> queued; resumes from its checkpoint
 *   cannot succeed (exit code 2 of the built-in trainer, a command that
 *   cannot run, a missing dataset)                  -> failed, no retry
 *   out of memory                -> re-planned (half the micro-batch, twice
 *                                   the accumulation, checkpointing on),
 *                                   then retried like a failure
 *   other failures               -> queued with not_before = now + backoff
 *                                   (exponential, jitter, cap) while
 *                                   retries are left; else failed
 */
#include "ctl_internal.h"
#include "op.h"
#include "policy/policy.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- small helpers ---- */
static double grace_of(const ctl_job *j)
{
    return j->grace > 0 ? j->grace : 120;
}

static void fmt_duration(double s, char *out, size_t n)
{
    if (s < 10) snprintf(out, n, "%.1fs", s);
    else units_format_duration(out, n, s);
}

/* Commits, or rolls back and logs. */
static bool commit(ctl *c, const char *what)
{
    if (store_tx_commit(c->st) == STORE_OK) return true;
    ctl_log(c, "%s: %s", what, store_error(c->st));
    return false;
}

void ctl_fail_queued(ctl *c, ctl_job *j, const char *reason, const char *message)
{
    store_event ev = {.actor = "controller", .type = "failed", .message = message};
    store_job_update upd = {.set = STORE_SET_EXIT | STORE_SET_WAIT_REASON | STORE_SET_NOT_BEFORE,
                            .exit_code = -1, .exit_reason = reason};
    store_rc rc = store_job_transition(c->st, j->id, STORE_QUEUED, STORE_FAILED, &upd, &ev, NULL);
    if (rc == STORE_OK) {
        j->state = STORE_FAILED;
        c->prune = true;
        ctl_job_touch(c, j);
        ctl_log(c, "job %s/%s failed: %s", j->team, j->name, message);
    } else {
        ctl_job_stale(c, j); /* cancelled meanwhile, or the store failed: read it again */
    }
}

/* ---- start ---- */

/* {"node": N, "gpu_type": T, "gpus": [local...]} (+ "nodes" over several). */
static char *placement_json(const ctl *c, const int *gpus, int n, int share)
{
    const sched_cluster *sc = c->s->cluster.sched;
    if (n == 0) return xstrdup("{\"node\":\"cpu\",\"gpu_type\":null,\"gpus\":[]}");
    json_t *nodes = json_array();
    json_t *cur = NULL;
    int cur_node = -1;
    for (int k = 0; k < n; k++) {
        int node = sc->gpu_node[gpus[k]];
        if (node != cur_node) {
            cur = json_pack("{s:s, s:[]}", "node", sc->nodes[node].name, "gpus");
            json_array_append_new(nodes, cur);
            cur_node = node;
        }
        json_array_append_new(json_object_get(cur, "gpus"),
                              json_integer(gpus[k] - sc->nodes[node].first_gpu));
    }
    json_t *first = json_array_get(nodes, 0);
    json_t *p = json_pack("{s:O, s:s, s:O}", "node", json_object_get(first, "node"), "gpu_type",
                          sc->types[sc->nodes[sc->gpu_node[gpus[0]]].type].name, "gpus",
                          json_object_get(first, "gpus"));
    if (json_array_size(nodes) > 1) json_object_set(p, "nodes", nodes);
    if (share < SCHED_SHARE_WHOLE) json_object_set_new(p, "share", json_real(share / 100.0));
    json_decref(nodes);
    char *text = json_dumps(p, JSON_COMPACT);
    json_decref(p);
    return text;
}

/* The GPU list the trainer sees: exported ids ("0,1"), node:id over nodes. */
static char *gpu_list(const ctl *c, const int *gpus, int n, bool *virt)
{
    const sched_cluster *sc = c->s->cluster.sched;
    bool multi = n > 0 && sc->gpu_node[gpus[0]] != sc->gpu_node[gpus[n - 1]];
    sb out;
    sb_init(&out);
    *virt = false;
    for (int k = 0; k < n; k++) {
        const srv_gpu *g = &c->s->cluster.gpus[gpus[k]];
        if (k) sb_putc(&out, ',');
        if (multi) sb_printf(&out, "%s:", sc->nodes[g->node].name);
        sb_puts(&out, g->id);
        *virt |= g->is_virtual;
    }
    return n ? sb_take(&out) : (sb_free(&out), xstrdup(""));
}

static char *absolute_path(const ctl *c, const char *p)
{
    if (!p) return NULL;
    return p[0] == '/' ? xstrdup(p) : path_join(c->cwd, p);
}

/* The executor's request for the job's current attempt, and its launch:
 * what exec_job_req_init makes of the spec, plus this server's folders,
 * the GPUs it placed the job on and, for local trainers, absolute paths. */
typedef struct launch {
    exec_job_req r;
    char *dir, *spec_path, *ckpt_dir, *gpus, *dataset, *eval_dataset, *model;
    const char **nodes; /* the placed nodes, one per replica (cluster engines) */
    size_t n_nodes;
    op_owner owner;     /* operator mode: the job's object */
    char *placement;    /* the placement's JSON (cluster engines) */
    /* the local sandbox (q.sandbox points at box when the policy has one) */
    exec_sandbox box;
    exec_bind *binds;
    exec_path_check checks[3];
    const char *hide[1];
} launch;

static void launch_free(launch *l)
{
    exec_job_req_free(&l->r);
    free(l->dir);
    free(l->spec_path);
    free(l->ckpt_dir);
    free(l->gpus);
    free(l->dataset);
    free(l->eval_dataset);
    free(l->model);
    free(l->nodes);
    op_owner_free(&l->owner);
    free(l->placement);
    free(l->binds);
}

/* Operator mode: the object the job comes from (its kv record), as the
 * engine labels and owns the attempt's Job by it. */
static void fill_owner(ctl *c, int64_t id, op_owner *w, exec_cluster_req *k)
{
    if (!c->s->op || !op_owner_read(c->st, id, w)) return;
    if (w->adopt) {
        k->adopt = w->name;
        return;
    }
    k->owner.api_version = w->api_version;
    k->owner.kind = w->kind;
    k->owner.name = w->name;
    k->owner.uid = w->uid;
}

/* The job's folder (made) and the paths of attempt `attempt` in it. */
static bool launch_paths(ctl *c, ctl_job *j, int attempt, launch *l, char *err, size_t errsz)
{
    l->dir = ctl_job_dir(c, j->id);
    if (mkdir(l->dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errsz, "%s: %s", l->dir, strerror(errno));
        return false;
    }
    char name[48];
    snprintf(name, sizeof name, "spec-%d.yaml", attempt);
    l->spec_path = path_join(l->dir, name);
    l->ckpt_dir = path_join(l->dir, "checkpoints");
    return true;
}

/* The spec file the trainer reads: the request's own text of it. */
static bool write_spec(const launch *l, char *err, size_t errsz)
{
    const char *yaml = l->r.spec_yaml;
    int e = yaml ? file_write_atomic(l->spec_path, yaml, strlen(yaml)) : EINVAL;
    if (e) snprintf(err, errsz, "%s: %s", l->spec_path, strerror(e));
    return e == 0;
}

/* A cluster engine runs the job where paths are its own (the pod's
 * volumes): the spec's paths go as written. */
static bool cluster_engine(const ctl *c)
{
    return strcmp(c->be->name, "local") != 0;
}

/* Slurm's nodes see the server's folders (shared storage): the spec's
 * paths go absolute, as locally. */
static bool shared_paths(const ctl *c)
{
    return !cluster_engine(c) || strcmp(c->be->name, "slurm") == 0;
}

/* Where lathe's scheduler placed the job, for a cluster engine. */
static void fill_placement(ctl *c, ctl_job *j, launch *l, exec_cluster_req *k)
{
    const sched_cluster *sc = c->s->cluster.sched;
    if (!sc || j->n_gpus <= 0) return;
    int t = sc->nodes[sc->gpu_node[j->gpus[0]]].type;
    k->gpu_type = sc->types[t].name;
    k->gpu_product = srv_cluster_product(&c->s->cluster, t);
    l->nodes = xcalloc((size_t)j->n_gpus, sizeof *l->nodes);
    int last = -1;
    for (int i = 0; i < j->n_gpus; i++) {
        int node = sc->gpu_node[j->gpus[i]];
        if (node == last) continue;
        l->nodes[l->n_nodes++] = sc->nodes[node].name;
        last = node;
    }
    k->nodes = l->nodes;
    k->n_nodes = l->n_nodes;
    k->rack = srv_cluster_rack(&c->s->cluster, sc->gpu_node[j->gpus[0]]);
    if (k->gpus_per_node <= 0) k->gpus_per_node = j->n_gpus;
}

/* Fills l->r.q for attempt `attempt` (its paths from launch_paths), on
 * the job's GPUs when placed (a prepared attempt has none yet). */
static void fill_request(ctl *c, ctl_job *j, int attempt, bool placed, launch *l)
{
    const int *gpus = placed ? j->gpus : NULL;
    int n_gpus = placed ? j->n_gpus : 0;
    exec_job_desc d = {.spec = j->spec, .job_id = j->id, .team = j->team, .name = j->name,
                       .experiment = j->experiment, .priority_class = j->priority_class,
                       .attempt = attempt, .program = c->s->cfg.trainer_program,
                       .spec_path = l->spec_path, .nnodes = j->shape.replicas,
                       .gpus_per_node = j->shape.per_replica, .prior_run = j->prior_run};
    if (!d.priority_class && c->s->cluster.spec) { /* the class the scheduler gave it */
        const spec_priority_class *pc = spec_cluster_default_priority(c->s->cluster.spec);
        d.priority_class = pc ? pc->name : NULL;
    }
    exec_job_req_init(&l->r, &d);
    exec_request *q = &l->r.q;
    q->job_dir = l->dir;
    exec_contract *k = &q->contract;
    bool virt = false;
    l->gpus = gpu_list(c, gpus, n_gpus, &virt);
    if (shared_paths(c)) {
        l->dataset = absolute_path(c, j->spec->training_data.dataset_path);
        l->model = absolute_path(c, j->spec->base_model.path);
        k->dataset_path = l->dataset;
        l->eval_dataset = absolute_path(c, j->spec->training_data.eval_path);
        k->eval_dataset_path = l->eval_dataset;
        k->base_model_path = l->model;
    }
    k->checkpoint_dir = l->ckpt_dir;
    k->gpus = l->gpus;
    k->virtual_gpus = virt;
    k->gpu_share = n_gpus > 0 ? (double)j->share / SCHED_SHARE_WHOLE : 0;
    if (n_gpus > 0 && j->share < SCHED_SHARE_WHOLE) {
        const sched_cluster *sc = c->s->cluster.sched;
        k->gpu_memory_limit = k->gpu_share * sc->types[sc->nodes[sc->gpu_node[gpus[0]]].type].memory;
    }
    k->master_port = 29500 + (int)(j->id % 20000);
    fill_owner(c, j->id, &l->owner, &q->cluster);
    q->cluster.array_max = ctl_array_max(c, j);
    if (placed) {
        fill_placement(c, j, l, &q->cluster);
        if (cluster_engine(c)) {
            l->placement = placement_json(c, gpus, n_gpus, j->share);
            q->cluster.placement_json = l->placement;
        }
    }
}

/* True for the folders every sandbox shows already (exec_sandbox.c). */
static bool system_folder(const char *path)
{
    static const char *const sys[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                                      "/libx32", "/etc"};
    for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++)
        if (policy_path_under(path, sys[i])) return true;
    return false;
}

static void add_check(launch *l, const char *field, const char *path, const policy_rules *r,
                      spec_root_kind kind)
{
    if (!path) return;
    l->checks[l->box.n_checks++] = (exec_path_check){
        field, path, (const char *const *)r->roots[kind], r->n_roots[kind]};
}

/* What the policy gives the attempt: on a cluster engine the team's
 * service account; locally the sandbox (none when its mode is off): the
 * team's user and group, every root of the team read-only, the built-in
 * trainer's program read-only (when it is not in a system folder), the
 * job's folder read-only (the backend adds its checkpoints and the
 * attempt's work folder read-write), the server's data folder hidden (a root may hold
 * it), the spec's paths checked again right before the start, the limits.
 * Required in mode required, and for a job's own trainer.command. */
static void fill_sandbox(ctl *c, ctl_job *j, launch *l)
{
    const policy *p = c->s->cfg.policy;
    if (!p) return;
    exec_request *q = &l->r.q;
    const policy_rules *r = policy_team(p, j->team);
    if (cluster_engine(c)) {
        if (r->service_account) q->cluster.service_account = r->service_account;
        q->cluster.slurm_account = r->slurm_account;
        q->cluster.slurm_user = r->slurm_user;
        if (strcmp(c->be->name, "slurm") == 0) {
            /* the spec's paths checked again right before sbatch (the
             * nodes read the same shared folders) */
            add_check(l, "baseModel.path", l->model, r, SPEC_ROOT_MODELS);
            add_check(l, "trainingData.datasetPath", l->dataset, r, SPEC_ROOT_DATA);
            add_check(l, "trainingData.evalDatasetPath", l->eval_dataset, r, SPEC_ROOT_DATA);
            l->box.checks = l->checks;
            q->sandbox = l->box.n_checks ? &l->box : NULL;
        }
        return;
    }
    const spec_policy *sp = policy_spec(p);
    if (sp->sandbox.mode == SPEC_SANDBOX_OFF) return;
    exec_sandbox *b = &l->box;
    b->required = sp->sandbox.mode == SPEC_SANDBOX_REQUIRED ||
                  j->spec->trainer.kind == TRAINER_COMMAND;
    b->uid = r->uid;
    b->gid = r->gid;
    size_t cap = 4;
    for (int k = 0; k < SPEC_ROOT_KINDS; k++) cap += r->n_roots[k];
    l->binds = xcalloc(cap, sizeof *l->binds);
    size_t n = 0;
    for (int k = 0; k < SPEC_ROOT_KINDS; k++)
        for (size_t i = 0; i < r->n_roots[k]; i++) l->binds[n++] = (exec_bind){r->roots[k][i], false};
    const char *prog = c->s->cfg.trainer_program;
    if (j->spec->trainer.kind == TRAINER_BUILTIN && prog && !system_folder(prog))
        l->binds[n++] = (exec_bind){prog, false};
    /* the backend adds the attempt's work folder and checkpoints read-write */
    l->binds[n++] = (exec_bind){l->dir, false};
    b->binds = l->binds;
    b->n_binds = n;
    l->hide[0] = c->s->cfg.data_dir;
    b->hide = l->hide;
    b->n_hide = l->hide[0] ? 1 : 0;
    add_check(l, "baseModel.path", l->model, r, SPEC_ROOT_MODELS);
    add_check(l, "trainingData.datasetPath", l->dataset, r, SPEC_ROOT_DATA);
    add_check(l, "trainingData.evalDatasetPath", l->eval_dataset, r, SPEC_ROOT_DATA);
    b->checks = l->checks;
    b->memory = sp->sandbox.memory;
    b->processes = sp->sandbox.processes;
    b->open_files = sp->sandbox.open_files;
    b->cgroup = sp->sandbox.cgroup;
    q->sandbox = b;
}

/* What the handle says of the sandbox, for the started event. */
static void sandbox_note(const exec_handle *h, char *out, size_t outsz)
{
    out[0] = '\0';
    char *hj = exec_handle_json(h);
    json_t *o = json_loads(hj ? hj : "", 0, NULL);
    json_t *b = json_object_get(o, "sandbox");
    if (json_is_object(b)) {
        json_t *uid = json_object_get(b, "uid");
        const char *note = json_string_value(json_object_get(b, "note"));
        if (json_is_true(json_object_get(b, "on")) && json_integer_value(uid) >= 0)
            snprintf(out, outsz, " (sandboxed as uid %lld)", (long long)json_integer_value(uid));
        else if (json_is_true(json_object_get(b, "on")))
            snprintf(out, outsz, " (sandboxed as the server's user)");
        else
            snprintf(out, outsz, " (%s)", note ? note : "not sandboxed");
    }
    json_t *sid = json_object_get(o, "slurm_job_id"); /* Slurm: its job id, for scontrol / sacct */
    if (json_is_integer(sid)) snprintf(out, outsz, " (Slurm job %lld)", (long long)json_integer_value(sid));
    json_decref(o);
    free(hj);
}

void ctl_record_start(ctl *c, ctl_job *j, const char *pid_note)
{
    char *hj = exec_handle_json(j->h);
    char msg[512];
    snprintf(msg, sizeof msg, "attempt %d started%s", j->attempt, pid_note);
    store_event ev = {.actor = "executor", .type = "started", .message = msg};
    if (store_tx_begin(c->st) != STORE_OK) {
        free(hj);
        return;
    }
    store_attempt_set_handle(c->st, j->id, j->attempt, c->be->name, hj, j->h->work_dir,
                             j->h->log_path);
    bool moved = store_job_transition(c->st, j->id, STORE_STARTING, STORE_RUNNING, NULL, &ev,
                                      NULL) == STORE_OK;
    if (commit(c, "recording a start") && moved) {
        j->state = STORE_RUNNING;
        ctl_job_touch(c, j); /* now it may be preempted */
    } else {
        ctl_job_stale(c, j); /* a cancel moved it to stopping first: read it again */
    }
    free(hj);
}

/* The end of a start that did not happen. */
static void start_failed(ctl *c, ctl_job *j, exec_rc rc, const char *err, double now)
{
    ctl_end e;
    memset(&e, 0, sizeof e);
    e.st.phase = EXEC_EXITED;
    e.st.exit_code = -1;
    e.st.started_at = e.st.ended_at = now;
    snprintf(e.st.reason, sizeof e.st.reason, "%s", err);
    if (rc == EXEC_E_BUSY || rc == EXEC_E_UNAVAILABLE) { /* nothing started: no retry spent */
        e.not_started = true;
        e.retry_in = 5 * c->s->cfg.spec->poll_interval;
        e.st.end = EXEC_END_LOST;
    } else if (rc == EXEC_E_INVALID) {
        e.st.end = EXEC_END_INVALID;
    } else {
        e.st.end = EXEC_END_FAILED;
        e.st.retryable = true;
    }
    ctl_attempt_ended(c, j, &e, now);
}

struct ctl_deferred {
    int64_t id;
    int attempt;
    launch *l;
};
typedef struct ctl_deferred ctl_deferred;

static void launch_done(ctl *c, ctl_job *j, launch *l, exec_rc rc, const char *err, double now);

static void launch_attempt(ctl *c, ctl_job *j, double now)
{
    launch *l = xcalloc(1, sizeof *l); /* heap: a held start outlives this call */
    char err[512] = "";
    bool ok = launch_paths(c, j, j->attempt, l, err, sizeof err);
    if (ok) {
        fill_request(c, j, j->attempt, true, l);
        fill_sandbox(c, j, l);
    }
    if (!ok || !write_spec(l, err, sizeof err)) {
        start_failed(c, j, EXEC_E_SYSTEM, err, now);
        launch_free(l);
        free(l);
        return;
    }
    if (l->r.q.sandbox && l->box.required && !c->s->cfg.sandbox_ok) {
        snprintf(err, sizeof err,
                 "the trainer must run in the sandbox (%s), and this machine cannot make one "
                 "(%s); see docs/security.md",
                 j->spec->trainer.kind == TRAINER_COMMAND ? "a job's own trainer.command"
                                                          : "policy.sandbox.mode: required",
                 c->s->cfg.sandbox_why);
        start_failed(c, j, EXEC_E_INVALID, err, now);
        launch_free(l);
        free(l);
        return;
    }
    if (l->r.q.cluster.array_max > 0 && c->be->start_many) {
        /* it may go in with others of its experiment: at the end of the pass */
        c->deferred = xrealloc(c->deferred, (c->n_deferred + 1) * sizeof *c->deferred);
        c->deferred[c->n_deferred].id = j->id;
        c->deferred[c->n_deferred].attempt = j->attempt;
        c->deferred[c->n_deferred++].l = l;
        return;
    }
    exec_rc rc = exec_start(c->be, &l->r.q, &j->h, err, sizeof err);
    launch_done(c, j, l, rc, err, now);
    launch_free(l);
    free(l);
}

/* What follows a start: the handle recorded, or the start's failure. */
static void launch_done(ctl *c, ctl_job *j, launch *l, exec_rc rc, const char *err, double now)
{
    c->placed_stale = true;
    if (rc == EXEC_OK) {
        j->run_started = j->h->started_at > 0 ? j->h->started_at : now;
        char note[320];
        sandbox_note(j->h, note, sizeof note);
        ctl_record_start(c, j, note);
        ctl_log(c, "job %s/%s: attempt %d started on %s", j->team, j->name, j->attempt,
                j->n_gpus ? l->gpus : "a CPU slot");
    } else {
        j->h = NULL;
        start_failed(c, j, rc, err, now);
    }
}

int ctl_array_max(const ctl *c, const ctl_job *j)
{
    const spec_slurm *s = &c->s->cfg.spec->slurm;
    if (!j->experiment || strcmp(c->be->name, "slurm") != 0 || s->array_max <= 0 || !s->decide ||
        strcmp(s->decide, "slurm") != 0)
        return 0;
    return j->exp_max > 0 ? j->exp_max : s->array_max;
}

int ctl_exp_limit(const ctl *c, const ctl_job *j)
{
    return ctl_array_max(c, j) > 0 ? 0 : j->exp_max;
}

void ctl_flush_starts(ctl *c, double now)
{
    size_t n = c->n_deferred;
    ctl_deferred *d = c->deferred;
    c->deferred = NULL;
    c->n_deferred = 0;
    bool *done = xcalloc(n ? n : 1, sizeof *done);
    const exec_request **reqs = xcalloc(n ? n : 1, sizeof *reqs);
    size_t *idx = xcalloc(n ? n : 1, sizeof *idx);
    exec_start_result *res = xcalloc(n ? n : 1, sizeof *res);
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        const exec_cluster_req *ki = &d[i].l->r.q.cluster;
        size_t m = 0;
        for (size_t k = i; k < n; k++) { /* the attempts of i's experiment */
            const exec_cluster_req *kk = &d[k].l->r.q.cluster;
            if (done[k] || strcmp(kk->team, ki->team) != 0 || strcmp(kk->experiment, ki->experiment) != 0)
                continue;
            done[k] = true;
            idx[m] = k;
            reqs[m++] = &d[k].l->r.q;
        }
        exec_start_many(c->be, reqs, m, res);
        for (size_t r = 0; r < m; r++) {
            ctl_deferred *x = &d[idx[r]];
            ctl_job *j = ctl_find(c, x->id);
            if (!j || j->attempt != x->attempt || j->h) { /* gone meanwhile: keep it running */
                if (res[r].h) exec_release(res[r].h);
                continue;
            }
            j->h = res[r].h;
            launch_done(c, j, x->l, (exec_rc)res[r].rc, res[r].err, now);
        }
    }
    for (size_t i = 0; i < n; i++) {
        launch_free(d[i].l);
        free(d[i].l);
    }
    free(d);
    free(done);
    free(reqs);
    free(idx);
    free(res);
}

/* What the engine makes for a queued job's next attempt before it is
 * admitted (Kubernetes: its Job, suspended). At most `budget` jobs a turn,
 * so a burst of submissions does not hold up the loop. */
void ctl_prepare_queued(ctl *c, int budget)
{
    if (!c->be->prepare) return;
    for (size_t i = 0; i < c->n_jobs && budget > 0; i++) {
        ctl_job *j = c->jobs[i];
        int next = j->attempts + 1;
        if (j->state != STORE_QUEUED || j->prepared == next || j->prepare_failed == next) continue;
        if (!ctl_job_load(c, j) || j->state != STORE_QUEUED || !ctl_job_spec(c, j)) continue;
        budget--;
        launch l;
        memset(&l, 0, sizeof l);
        char err[512] = "";
        bool ok = launch_paths(c, j, next, &l, err, sizeof err); /* the engine holds the spec */
        if (ok) {
            fill_request(c, j, next, false, &l);
            fill_sandbox(c, j, &l);
            ok = exec_prepare(c->be, &l.r.q, err, sizeof err) == EXEC_OK;
        }
        if (ok) j->prepared = next;
        else {
            j->prepare_failed = next; /* the start tries again and reports it */
            ctl_log(c, "job %s/%s: cannot prepare attempt %d: %s", j->team, j->name, next, err);
        }
        launch_free(&l);
        ctl_job_drop_spec(j);
    }
}

/* A queued job left the set (cancelled, deleted) with its next attempt
 * prepared: the engine removes what it made. */
void ctl_unprepare(ctl *c, ctl_job *j)
{
    if (!c->be->unprepare || j->prepared <= 0 || j->h) return;
    exec_request q;
    memset(&q, 0, sizeof q);
    q.attempt = j->prepared;
    q.cluster.job_id = j->id;
    q.cluster.team = j->team;
    q.cluster.name = j->name;
    char *dir = ctl_job_dir(c, j->id);
    q.job_dir = dir;
    op_owner owner;
    memset(&owner, 0, sizeof owner);
    fill_owner(c, j->id, &owner, &q.cluster);
    char err[512];
    if (exec_unprepare(c->be, &q, err, sizeof err) != EXEC_OK)
        ctl_log(c, "job %s/%s: cannot remove its prepared attempt %d: %s", j->team, j->name,
                j->prepared, err);
    free(dir);
    op_owner_free(&owner);
    j->prepared = 0;
}

/* "invalid" when the job's dataset is not on this machine. */
static bool dataset_present(ctl *c, ctl_job *j, char *why, size_t whysz)
{
    const char *p = j->spec->training_data.dataset_path;
    if (!p || cluster_engine(c)) return true; /* a cluster's paths are its volumes' */
    char *abs = absolute_path(c, p);
    bool ok = file_exists(abs) || dir_exists(abs);
    if (!ok) snprintf(why, whysz, "the dataset %s does not exist on this machine (trainingData.datasetPath)", abs);
    free(abs);
    return ok;
}

void ctl_start_job(ctl *c, ctl_job *j, const int *gpus, int n, int share, const char *why)
{
    if (!ctl_job_load(c, j) || j->state != STORE_QUEUED) return;
    char msg[512];
    if (!ctl_job_spec(c, j)) {
        ctl_fail_queued(c, j, "invalid", "cannot run on this server: the stored spec does not load");
        return;
    }
    if (!dataset_present(c, j, msg, sizeof msg)) {
        ctl_fail_queued(c, j, "invalid", msg);
        return;
    }
    if (n == 0 || share < 1 || share > SCHED_SHARE_WHOLE) share = SCHED_SHARE_WHOLE;
    char *placement = placement_json(c, gpus, n, share);
    json_t *pj = json_loads(placement, 0, NULL);
    char *gpus_json = json_dumps(json_object_get(pj, "gpus"), JSON_COMPACT);
    const char *node = json_string_value(json_object_get(pj, "node"));
    char part[48] = "";
    if (share < SCHED_SHARE_WHOLE) snprintf(part, sizeof part, " (%d%% of it, shared)", share);
    snprintf(msg, sizeof msg, "placed on %s%s%s%s: %s", n ? node : "a CPU slot", n ? " GPUs " : "",
             n ? gpus_json : "", part, why);
    store_event ev = {.actor = "scheduler", .type = "scheduled", .message = msg,
                      .data_json = placement};
    store_job_update upd = {.set = STORE_SET_PLACEMENT | STORE_SET_WAIT_REASON | STORE_SET_NOT_BEFORE,
                            .placement_json = placement};
    int number = 0;
    /* what the attempt holds and pays, for `lathe cost` (a shared GPU: its part) */
    double price = n ? srv_cluster_price(&c->s->cluster, gpus[0]) : 0;
    store_attempt_usage use = {(double)n * share / SCHED_SHARE_WHOLE, price, NAN, NAN};
    bool ok = store_tx_begin(c->st) == STORE_OK;
    if (ok && (store_job_transition(c->st, j->id, STORE_QUEUED, STORE_STARTING, &upd, &ev, NULL) != STORE_OK ||
               store_attempt_add(c->st, j->id, n ? node : NULL, n ? gpus_json : NULL, &number) != STORE_OK ||
               (n && store_attempt_set_usage(c->st, j->id, number, &use) != STORE_OK))) {
        store_tx_rollback(c->st);
        ok = false;
    }
    ok = ok && commit(c, "starting a job");
    free(gpus_json);
    json_decref(pj);
    free(placement);
    if (!ok) { /* cancelled meanwhile, or the store failed: read it again */
        ctl_job_stale(c, j);
        return;
    }
    double now = ctl_now();
    j->state = STORE_STARTING;
    j->attempt = number;
    j->attempts = number;
    j->not_before = 0;
    free(j->gpus);
    j->gpus = n ? xmalloc((size_t)n * sizeof *j->gpus) : NULL;
    if (n) memcpy(j->gpus, gpus, (size_t)n * sizeof *gpus);
    j->n_gpus = n;
    j->share = share;
    j->cpu_slot = n == 0;
    j->price = price;
    j->base_gpu_seconds = j->gpu_seconds;
    j->base_cost = j->cost;
    j->run_started = now;
    j->stop = CTL_STOP_NONE;
    j->term_sent = false;
    free(j->reason);
    j->reason = NULL;
    j->reason_code = NULL;
    c->dirty = true;
    ctl_job_touch(c, j);
    launch_attempt(c, j, now);
}

/* ---- poll ---- */
static void write_progress(ctl *c, ctl_job *j, const exec_progress *p, size_t n)
{
    store_progress *pts = xcalloc(n, sizeof *pts);
    for (size_t i = 0; i < n; i++) {
        pts[i] = (store_progress){.step = p[i].step, .total_steps = p[i].total_steps,
                                  .epoch = p[i].epoch, .loss = p[i].loss,
                                  .learning_rate = p[i].learning_rate,
                                  .tokens_per_second = p[i].tokens_per_second,
                                  .eta_seconds = p[i].eta_seconds, .at = p[i].at,
                                  .has_eval = !isnan(p[i].eval_loss), .eval_loss = p[i].eval_loss};
        if (p[i].total_steps > 0) j->last_total = p[i].total_steps;
    }
    if (store_progress_add(c->st, j->id, j->attempt, pts, n) != STORE_OK)
        ctl_log(c, "job %s/%s: progress not stored: %s", j->team, j->name, store_error(c->st));
    free(pts);
}

/* Seconds of work a checkpoint at `step` saved (where a resumed run starts). */
static double work_at(const ctl_job *j, int64_t step, double now)
{
    int64_t total = j->last_total > 0 ? j->last_total : j->shape.steps;
    if (total > 0 && j->shape.est_duration > 0)
        return j->shape.est_duration * (double)step / (double)total;
    return j->prior_run + (now - j->run_started);
}

/* A checkpoint the job does not have yet: past the newest one recorded. A
 * re-attached attempt's output is read again from its start, and a
 * resumed attempt starts at its checkpoint: neither records one twice. */
static void record_checkpoint(ctl *c, ctl_job *j, const exec_checkpoint *k, double now)
{
    if (k->step <= j->checkpoint_step) return;
    json_t *d = json_pack("{s:I, s:s}", "step", (json_int_t)k->step, "path", k->path ? k->path : "");
    char *data = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    char msg[600];
    snprintf(msg, sizeof msg, "checkpoint at step %lld: %s", (long long)k->step, k->path ? k->path : "");
    store_event ev = {.actor = "executor", .type = "checkpoint", .message = msg, .data_json = data};
    store_job_update upd = {.set = STORE_SET_CHECKPOINT, .checkpoint_step = k->step,
                            .checkpoint_path = k->path, .saved_work = work_at(j, k->step, now)};
    unsigned states = STORE_STATE_BIT(STORE_STARTING) | STORE_STATE_BIT(STORE_RUNNING) |
                      STORE_STATE_BIT(STORE_STOPPING);
    if (store_job_update_fields(c->st, j->id, states, &upd, &ev) == STORE_OK) {
        j->saved_work = upd.saved_work;
        j->checkpoint_step = k->step;
        ctl_job_touch(c, j); /* the work a preemption would lose changed */
    }
    free(data);
}

/* The engine says why the attempt's trainer has not started (pods
 * pending: "Unschedulable: 0/3 nodes are available: ..."), or that it has:
 * the job's wait reason and an event, each time the words change. */
static void record_waiting(ctl *c, ctl_job *j, const char *waiting)
{
    const char *now_w = waiting && *waiting ? waiting : NULL;
    if ((!now_w && !j->pod_wait) || (now_w && j->pod_wait && strcmp(now_w, j->pod_wait) == 0)) return;
    char msg[320];
    if (now_w) snprintf(msg, sizeof msg, "attempt %d waits: %s", j->attempt, now_w);
    else snprintf(msg, sizeof msg, "attempt %d: its trainer runs", j->attempt);
    store_event ev = {.actor = "executor", .type = now_w ? "pending" : "running", .message = msg};
    store_job_update upd = {.set = STORE_SET_WAIT_REASON, .wait_reason = now_w};
    unsigned states = STORE_STATE_BIT(STORE_STARTING) | STORE_STATE_BIT(STORE_RUNNING);
    if (store_job_update_fields(c->st, j->id, states, &upd, &ev) != STORE_OK) return;
    free(j->pod_wait);
    j->pod_wait = now_w ? xstrdup(now_w) : NULL;
}

static void poll_one(ctl *c, ctl_job *j, double now)
{
    exec_status stt;
    exec_update up;
    memset(&stt, 0, sizeof stt);
    memset(&up, 0, sizeof up);
    exec_poll(j->h, now, &stt, &up);
    if (up.n_points) write_progress(c, j, up.points, up.n_points);
    for (size_t k = 0; k < up.n_checkpoints; k++) record_checkpoint(c, j, &up.checkpoints[k], now);
    if (stt.phase != EXEC_RUNNING) {
        if (stt.end == EXEC_END_LOST) c->slurm_nodes_at = 0; /* a node may be gone: look now */
        free(j->pod_wait);
        j->pod_wait = NULL;
        ctl_end e = {.st = stt, .adapter = up.adapter};
        ctl_attempt_ended(c, j, &e, now);
        return;
    }
    record_waiting(c, j, stt.waiting);
}

void ctl_poll_all(ctl *c, double now)
{
    size_t n;
    ctl_job **placed = ctl_placed(c, &n);
    for (size_t i = 0; i < n; i++)
        if (placed[i]->h) poll_one(c, placed[i], now); /* an end clears h: placed is rebuilt later */
}

/* ---- stop ---- */
void ctl_begin_stop(ctl *c, ctl_job *j, ctl_stop_why why, const char *message, double now)
{
    if (!j->h || (j->state != STORE_RUNNING && j->state != STORE_STARTING)) return;
    char key[32];
    ctl_stop_key(j->id, key);
    store_event ev = {.actor = why == CTL_STOP_PREEMPT ? "scheduler" : "controller",
                      .type = why == CTL_STOP_PREEMPT ? "preempting" : "timing_out",
                      .message = message};
    if (store_tx_begin(c->st) != STORE_OK) return;
    if (store_kv_set(c->st, key, ctl_stop_name(why)) != STORE_OK ||
        store_job_transition(c->st, j->id, j->state, STORE_STOPPING, NULL, &ev, NULL) != STORE_OK) {
        store_tx_rollback(c->st); /* it moved meanwhile (a cancel): read it again */
        ctl_job_stale(c, j);
        return;
    }
    if (!commit(c, "stopping a job")) {
        ctl_job_stale(c, j);
        return;
    }
    j->state = STORE_STOPPING;
    j->stop = why;
    ctl_job_touch(c, j);
    char err[256];
    if (exec_cancel(j->h, now, grace_of(j), err, sizeof err) != EXEC_OK)
        ctl_log(c, "job %s/%s: SIGTERM: %s", j->team, j->name, err);
    j->term_sent = true;
    ctl_log(c, "job %s/%s: %s", j->team, j->name, message);
}

/* A stopping job whose SIGTERM was not sent yet (a cancel from the API, or
 * a stop that a restarted server inherited). */
static void send_stop(ctl *c, ctl_job *j, double now)
{
    char key[32], err[256], *v = NULL;
    ctl_stop_key(j->id, key);
    if (store_kv_get(c->st, key, &v) == STORE_OK) j->stop = ctl_stop_parse(v);
    free(v);
    if (exec_cancel(j->h, now, grace_of(j), err, sizeof err) != EXEC_OK)
        ctl_log(c, "job %s/%s: SIGTERM: %s", j->team, j->name, err);
    j->term_sent = true;
}

static void check_timeout(ctl *c, ctl_job *j, double now)
{
    double limit = j->shape.max_duration, ran = j->prior_run + (now - j->run_started);
    if (!(limit > 0) || ran < limit) return;
    char a[32], b[32], msg[200];
    fmt_duration(limit, a, sizeof a);
    fmt_duration(grace_of(j), b, sizeof b);
    snprintf(msg, sizeof msg, "maxDuration %s reached: SIGTERM, then SIGKILL after the grace period of %s",
             a, b);
    ctl_begin_stop(c, j, CTL_STOP_TIMEOUT, msg, now);
}

void ctl_reconcile(ctl *c, double now)
{
    size_t n;
    ctl_job **placed = ctl_placed(c, &n);
    for (size_t i = 0; i < n; i++) {
        ctl_job *j = placed[i];
        if (!j->h) continue;
        if (j->state == STORE_STOPPING && !j->term_sent) send_stop(c, j, now);
        else if (j->state == STORE_RUNNING && j->loaded) check_timeout(c, j, now);
    }
}

/* ---- end ---- */
typedef enum { GO_SUCCEEDED, GO_FAILED, GO_RETRY, GO_REQUEUE, GO_CANCELLED, GO_TIMED_OUT } ctl_go;

/* What happens to the job: from the end, its state and stop reason. */
static ctl_go decide(const ctl_job *j, const ctl_end *e, store_state state, ctl_stop_why why,
                     bool replanned)
{
    if (e->st.end == EXEC_END_SUCCEEDED) return GO_SUCCEEDED;
    if (state == STORE_STOPPING) {
        if (why == CTL_STOP_CANCEL) return GO_CANCELLED;
        if (why == CTL_STOP_TIMEOUT) return GO_TIMED_OUT;
        return GO_REQUEUE;
    }
    if (e->st.end == EXEC_END_TIMED_OUT) return GO_TIMED_OUT; /* the engine's own limit (Slurm) */
    if (e->not_started || e->st.end == EXEC_END_EVICTED) return GO_REQUEUE; /* no retry spent */
    if (e->st.end == EXEC_END_INVALID || !e->st.retryable) return GO_FAILED;
    if (e->st.end == EXEC_END_OOM && !replanned) return GO_FAILED;
    return j->failures + 1 <= j->max_retries ? GO_RETRY : GO_FAILED;
}

/* The re-plan after an out-of-memory end. */
typedef struct replan {
    bool ok;
    char *spec_json, *plan_json;
    char what[256];
    char *data;
} replan;

static void do_replan(ctl *c, ctl_job *j, replan *rp)
{
    memset(rp, 0, sizeof *rp);
    if (!j->spec) {
        snprintf(rp->what, sizeof rp->what, "the job's spec is not loaded");
        return;
    }
    int micro = j->spec->training_data.batch_size, accum = j->spec->training_data.gradient_accumulation;
    bool ckpt = j->spec->hyperparams.gradient_checkpointing == TOGGLE_ON;
    int nm, na;
    bool nc;
    if (!ctl_oom_shrink(micro, accum, ckpt, &nm, &na, &nc, rp->what, sizeof rp->what)) return;
    spec_job *sj = spec_job_clone(j->spec);
    sj->training_data.batch_size = nm;
    sj->training_data.gradient_accumulation = na;
    sj->hyperparams.gradient_checkpointing = TOGGLE_ON;
    plan_options opt;
    plan_options_defaults(&opt);
    if (c->s->cluster.has_catalog) opt.catalog = &c->s->cluster.catalog;
    plan_result res;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_job(sj, &opt, &res, &d);
    if (rc == LT_EXIT_INVALID || (rc == LT_EXIT_NOFIT && !c->s->cluster.cpu_mode)) {
        snprintf(rp->what, sizeof rp->what, "the planner found no smaller plan that fits");
    } else {
        spec_job *rj = plan_resolved_job(&res, sj);
        rp->spec_json = spec_job_to_json(rj);
        rp->plan_json = res.found ? srv_plan_json(&res, j->type_fixed) : NULL;
        json_t *data = json_pack("{s:{s:i, s:i, s:b}, s:{s:i, s:i, s:b}}", "from", "micro_batch",
                                 micro, "gradient_accumulation", accum, "gradient_checkpointing",
                                 ckpt, "to", "micro_batch", rj->training_data.batch_size,
                                 "gradient_accumulation", rj->training_data.gradient_accumulation,
                                 "gradient_checkpointing",
                                 rj->hyperparams.gradient_checkpointing == TOGGLE_ON);
        rp->data = json_dumps(data, JSON_COMPACT);
        json_decref(data);
        snprintf(rp->what, sizeof rp->what,
                 "out of memory at micro-batch %d x %d accumulation%s: re-planned to micro-batch "
                 "%d x %d accumulation with gradient checkpointing",
                 micro, accum, ckpt ? " with gradient checkpointing" : "",
                 rj->training_data.batch_size, rj->training_data.gradient_accumulation);
        spec_job_free(rj);
        rp->ok = true;
    }
    plan_result_free(&res);
    diag_list_free(&d);
    spec_job_free(sj);
}

static void replan_free(replan *rp)
{
    free(rp->spec_json);
    free(rp->plan_json);
    free(rp->data);
}

static const char *const go_names[] = {"succeeded", "failed", "retrying", "preempted",
                                       "cancelled", "timed_out"};
static const store_state go_states[] = {STORE_SUCCEEDED, STORE_FAILED, STORE_QUEUED,
                                        STORE_QUEUED, STORE_CANCELLED, STORE_TIMED_OUT};

/* The sentence of the end event. */
static void end_message(const ctl_job *j, const ctl_end *e, ctl_go go, double backoff,
                        const char *replan_what, sb *out)
{
    const char *why = e->st.reason[0] ? e->st.reason : exec_end_name(e->st.end);
    char d[32];
    fmt_duration(backoff, d, sizeof d);
    switch (go) {
    case GO_SUCCEEDED:
        sb_printf(out, "attempt %d succeeded%s%s", j->attempt, e->adapter ? "; adapter at " : "",
                  e->adapter ? e->adapter : "");
        break;
    case GO_FAILED:
        sb_printf(out, "attempt %d ended: %s", j->attempt, why);
        if (e->st.end == EXEC_END_INVALID || !e->st.retryable) sb_puts(out, "; it cannot succeed, so it is not retried");
        else if (e->st.end == EXEC_END_OOM && replan_what) sb_printf(out, "; no retry: %s", replan_what);
        else sb_printf(out, "; no retries left (retryPolicy.maxRetries is %d)", j->max_retries);
        break;
    case GO_RETRY:
        sb_printf(out, "attempt %d ended: %s; retry %d of %d in %s", j->attempt, why, j->failures + 1,
                  j->max_retries, d);
        break;
    case GO_REQUEUE:
        if (e->not_started) sb_printf(out, "attempt %d did not start (%s); back in the queue", j->attempt, why);
        else if (j->stop == CTL_STOP_PREEMPT || j->stop == CTL_STOP_NONE)
            sb_printf(out, "preempted: attempt %d stopped (%s); back in the queue, it resumes "
                           "from its newest checkpoint", j->attempt, why);
        break;
    case GO_CANCELLED: sb_printf(out, "cancelled: attempt %d stopped (%s)", j->attempt, why); break;
    case GO_TIMED_OUT: sb_printf(out, "timed out: attempt %d stopped (%s)", j->attempt, why); break;
    }
}

/* The attempt's reason in the attempts table. */
static const char *attempt_reason(const ctl_end *e, ctl_go go)
{
    if (e->not_started) return "not_started";
    if (go == GO_REQUEUE) return "preempted";
    if (go == GO_CANCELLED) return "cancelled";
    if (go == GO_TIMED_OUT) return "timed_out";
    return exec_end_name(e->st.end);
}

/* The job's state and why it stops, read inside the end's transaction. */
static bool read_stop(ctl *c, ctl_job *j, store_state *state, ctl_stop_why *why)
{
    store_job cur;
    if (store_job_get(c->st, j->id, &cur) != STORE_OK) return false;
    *state = cur.state;
    store_job_clear(&cur);
    char key[32], *v = NULL;
    ctl_stop_key(j->id, key);
    *why = store_kv_get(c->st, key, &v) == STORE_OK ? ctl_stop_parse(v) : CTL_STOP_NONE;
    free(v);
    return true;
}

/* Seconds before the next attempt may start. */
static double end_backoff(ctl *c, const ctl_job *j, const ctl_end *e, ctl_go go)
{
    if (e->not_started) return e->retry_in;
    if (go != GO_RETRY) return 0;
    double cap = j->max_backoff > 0 ? j->max_backoff : 3600;
    if (cap > c->s->cfg.spec->retry.max_backoff) cap = c->s->cfg.spec->retry.max_backoff;
    return ctl_backoff(j->backoff, cap, c->s->cfg.spec->retry.jitter, j->failures + 1,
                       sim_rng_uniform(&c->rng));
}

/* What the end writes into the job (wait: the wait reason's buffer). */
static store_job_update end_update(const ctl_job *j, const ctl_end *e, const replan *rp, ctl_go go,
                                   double gs, double backoff, double now, sb *wait)
{
    store_job_update upd = {.set = STORE_SET_EXIT | STORE_SET_USAGE | STORE_SET_PLACEMENT,
                            .exit_code = e->st.exit_code, .exit_signal = e->st.signal,
                            .exit_reason = attempt_reason(e, go),
                            .gpu_seconds = j->base_gpu_seconds + gs,
                            .cost = j->base_cost + gs / 3600.0 * j->price};
    if (go == GO_RETRY) sb_printf(wait, "retry %d of %d after a backoff", j->failures + 1, j->max_retries);
    else if (go == GO_REQUEUE)
        sb_puts(wait, e->not_started ? "waiting to start again" : "preempted: waiting for GPUs to resume");
    if (go_states[go] == STORE_QUEUED) {
        upd.set |= STORE_SET_NOT_BEFORE | STORE_SET_WAIT_REASON;
        upd.not_before = backoff > 0 ? now + backoff : 0;
        upd.wait_reason = sb_str(wait);
    }
    if (go == GO_RETRY && e->st.end == EXEC_END_OOM && rp->ok) {
        upd.set |= STORE_SET_PLAN;
        upd.spec_json = rp->spec_json;
        upd.plan_json = rp->plan_json;
    }
    return upd;
}

/* What the end wrote into the job that the controller follows. */
typedef struct end_written {
    ctl_go go;
    double not_before, gpu_seconds, cost;
} end_written;

/* Reads the state and stop reason, decides, writes. Inside a transaction. */
static bool write_end(ctl *c, ctl_job *j, const ctl_end *e, const replan *rp, double now,
                      end_written *out)
{
    store_state state;
    ctl_stop_why why;
    if (!read_stop(c, j, &state, &why)) return false;
    j->stop = why;
    ctl_go go = decide(j, e, state, why, rp->ok);
    double backoff = end_backoff(c, j, e, go);
    double ended = e->st.ended_at > 0 ? e->st.ended_at : now;
    double gs = e->not_started ? 0 : (ended - j->run_started) * ctl_job_gpus_held(j);
    sb msg, wait;
    sb_init(&msg);
    sb_init(&wait);
    end_message(j, e, go, backoff, rp->what[0] ? rp->what : NULL, &msg);
    store_job_update upd = end_update(j, e, rp, go, gs, backoff, now, &wait);
    json_t *data = json_pack("{s:i, s:i, s:i, s:s, s:f}", "attempt", j->attempt, "exit_code",
                             e->st.exit_code, "signal", e->st.signal, "reason",
                             exec_end_name(e->st.end), "backoff_seconds", backoff);
    if (go == GO_SUCCEEDED && e->adapter) json_object_set_new(data, "adapter", json_string(e->adapter));
    char *dj = json_dumps(data, JSON_COMPACT), key[32];
    json_decref(data);
    store_event ev = {.actor = "controller", .type = go_names[go], .message = sb_str(&msg), .data_json = dj};
    store_event rev = {.actor = "controller", .type = "replanned", .message = rp->what, .data_json = rp->data};
    store_attempt_usage use = {NAN, NAN, gs, gs / 3600.0 * j->price};
    bool ok = store_attempt_finish(c->st, j->id, j->attempt, e->st.exit_code, e->st.signal,
                                   attempt_reason(e, go)) == STORE_OK &&
              store_attempt_set_usage(c->st, j->id, j->attempt, &use) == STORE_OK &&
              (!(upd.set & STORE_SET_PLAN) || store_event_append(c->st, j->id, &rev) == STORE_OK) &&
              store_job_transition(c->st, j->id, state, go_states[go], &upd, &ev, NULL) == STORE_OK;
    ctl_stop_key(j->id, key);
    if (ok && state == STORE_STOPPING) store_kv_delete(c->st, key);
    if (ok && gs > 0) ctl_add_spent(c, j->team, gs / 3600.0 * j->price, now);
    if (ok) ctl_log(c, "job %s/%s: %s", j->team, j->name, sb_str(&msg));
    free(dj);
    sb_free(&msg);
    sb_free(&wait);
    out->go = go;
    out->not_before = upd.set & STORE_SET_NOT_BEFORE ? upd.not_before : j->not_before;
    out->gpu_seconds = upd.gpu_seconds;
    out->cost = upd.cost;
    return ok;
}

void ctl_attempt_ended(ctl *c, ctl_job *j, const ctl_end *e, double now)
{
    replan rp;
    memset(&rp, 0, sizeof rp);
    if (e->st.end == EXEC_END_OOM && j->state != STORE_STOPPING && ctl_job_spec(c, j)) do_replan(c, j, &rp);
    end_written w = {.go = GO_FAILED};
    bool ok = store_tx_begin(c->st) == STORE_OK;
    if (ok && !write_end(c, j, e, &rp, now, &w)) {
        store_tx_rollback(c->st);
        ctl_log(c, "job %s/%s: the end of attempt %d is not recorded yet: %s", j->team, j->name,
                j->attempt, store_error(c->st));
        ok = false;
    }
    ok = ok && commit(c, "ending an attempt");
    if (!ok) ctl_job_stale(c, j); /* the next poll sees the end again */
    ctl_go go = w.go;
    if (ok) {
        double ended = e->st.ended_at > 0 ? e->st.ended_at : now;
        if (!e->not_started) j->prior_run += ended - j->run_started;
        /* what the scheduler learns from a finished job: how much of its maxDuration it
         * used, when maxDuration was all it was told (the learn-limit rule) */
        if (go == GO_SUCCEEDED && c->sched && j->team_index >= 0 && !(j->shape.est_duration > 0) &&
            j->shape.max_duration > 0)
            sched_state_add_finished(c->sched,
                                     &(sched_finished){j->team_index, j->shape.max_duration, j->prior_run});
        if (go == GO_RETRY || (go == GO_FAILED && e->st.retryable)) j->failures++;
        exec_release(j->h);
        j->h = NULL;
        c->placed_stale = true;
        free(j->gpus);
        j->gpus = NULL;
        j->n_gpus = 0;
        j->share = SCHED_SHARE_WHOLE;
        j->cpu_slot = false;
        j->state = go_states[go];
        if (j->state == STORE_QUEUED) j->queued_at = now;
        j->not_before = w.not_before;
        j->gpu_seconds = w.gpu_seconds;
        j->cost = w.cost;
        if (store_state_final(j->state)) c->prune = true;
        ctl_job_drop_spec(j); /* read again at the next start (a re-plan changed it) */
        if (go == GO_RETRY && e->st.end == EXEC_END_OOM && rp.ok) j->loaded = false; /* a new shape */
        c->dirty = true;
        ctl_job_touch(c, j);
    }
    replan_free(&rp);
}
