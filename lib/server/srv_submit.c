/* srv_submit.c: POST /v1/jobs. A LoRATrainingJob or LoRAExperiment (YAML,
 * or JSON with Content-Type application/json) goes through, in order:
 *
 *   1. the spec part's loader: the same diagnostics as `lathe validate`,
 *      with the file named by the X-Lathe-File header (else request.yaml);
 *   2. the team: a team token's own (a spec naming another team is
 *      refused), or for admin ?team= or the spec's; it must be known;
 *   3. the server's policy (lib/policy, docs/security.md) for that team:
 *      baseModel.path, the datasets and trainer.command's program resolved
 *      (links and "..") and under the team's roots, never in the server's
 *      data folder or another job's; trainer.command only where the team
 *      may run commands and, locally, only where the trainer can be
 *      sandboxed (or the operator turned the sandbox off); trainer.image on
 *      cluster engines among the allowed images (not for a user's own
 *      Job in operator mode). Before the planner, which reads
 *      baseModel.path's config.json: that read is the job's;
 *   4. the cluster's priority classes;
 *   5. the planner (lathe plan, with this cluster's GPU types): resources
 *      the spec leaves open are filled in; target modules the model lacks
 *      and jobs that fit no GPU are refused;
 *   6. the scheduler's admission check (sched_check_job): a request that
 *      can never run (more GPUs than quota plus borrowing) is refused with
 *      the scheduler's sentence;
 *   7. the store, as one write (all jobs of an experiment or none) through
 *      the server's group commit (srv_write): concurrent submissions share
 *      a transaction, each in its own savepoint, and each is answered after
 *      that transaction committed: 201 created, 200 when the same team sent
 *      the same spec under the same name before (idempotent, also when the
 *      first copy is in the same batch), 409 when the name holds another
 *      spec.
 *
 * Only then is the request acknowledged and the controller told which jobs
 * are new (ctl_job_changed: it reads them, not the whole queue).
 */
#include "ctl.h"

#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One job of the submission and what was worked out for it. */
typedef struct sub_job {
    spec_job *job;    /* borrowed from the spec file */
    char *team;
    int64_t priority;
    char *spec_json, *plan_json, *hash, *own_text;
    char *summary;    /* the plan in a sentence */
} sub_job;

typedef struct submission {
    const srv_submit_src *src;
    srv *s;
    spec_file file;
    diag_list d;
    sub_job *jobs;
    size_t n;
    spec_experiment *exp; /* borrowed; NULL for a lone job */
} submission;

static void submission_free(submission *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->jobs[i].team);
        free(m->jobs[i].spec_json);
        free(m->jobs[i].plan_json);
        free(m->jobs[i].hash);
        free(m->jobs[i].own_text);
        free(m->jobs[i].summary);
    }
    free(m->jobs);
    spec_file_free(&m->file);
    diag_list_free(&m->d);
}

static diag *job_error(submission *m, const spec_job *j, const char *path, const char *msg)
{
    return diag_add(&m->d, DIAG_ERROR, j->file, j->pos.line, j->pos.col, path, msg);
}

/* The name diagnostics give the request body. */
static void body_name(srv_req *r, bool json, char *out, size_t outsz)
{
    const char *h = srv_req_header(r, "X-Lathe-File");
    const char *base = h ? strrchr(h, '/') : NULL;
    base = base ? base + 1 : h;
    if (base && *base && strlen(base) < 200) snprintf(out, outsz, "%s", base);
    else snprintf(out, outsz, json ? "request.json" : "request.yaml");
}

/* The jobs of the one document; diagnostics for anything else. */
static void collect_jobs(submission *m)
{
    if (m->d.errors) return;
    const spec_file *f = &m->file;
    if (f->n_docs != 1 || f->docs[0].kind == SPEC_KIND_CLUSTER) {
        diag *x = diag_add(&m->d, DIAG_ERROR, f->path, 0, 0, "kind",
                           f->n_docs > 1 ? "submit one document at a time"
                                         : "only jobs and experiments can be submitted");
        diag_set_expected(x, "one LoRATrainingJob or LoRAExperiment");
        diag_set_suggestion(x, "a Cluster belongs in the server's config (spec.cluster.file)");
        return;
    }
    if (f->docs[0].kind == SPEC_KIND_EXPERIMENT) {
        m->exp = f->docs[0].experiment;
        m->n = m->exp->n_jobs;
    } else {
        m->n = 1;
    }
    m->jobs = xcalloc(m->n ? m->n : 1, sizeof *m->jobs);
    for (size_t i = 0; i < m->n; i++)
        m->jobs[i].job = m->exp ? m->exp->jobs[i] : f->docs[0].job;
}

/* Step 2: whose job it is. */
static void resolve_team(submission *m, sub_job *sj)
{
    spec_job *j = sj->job;
    const srv_submit_src *src = m->src;
    bool named = j->namespace_ || strcmp(j->team, "default") != 0;
    const char *team = j->team;
    if (src->team) {
        if (named && strcmp(j->team, src->team) != 0) {
            diag *x = job_error(m, j, "spec.team", "the job names another team");
            diag_set_expected(x, "%s (%s)", src->team, src->team_why);
            diag_set_found(x, "%s", j->team);
            diag_set_suggestion(x, "%s", src->team_fix);
            return;
        }
        team = src->team;
    } else if (!named && src->default_team) {
        team = src->default_team;
    }
    if (!srv_cluster_has_team(&m->s->cluster, team)) {
        diag *x = job_error(m, j, "spec.team", "this server has no such team");
        diag_set_found(x, "%s", team);
        sb names;
        sb_init(&names);
        const sched_cluster *c = m->s->cluster.sched;
        for (int i = 0; i < c->n_teams; i++) sb_printf(&names, "%s%s", i ? ", " : "", c->teams[i].name);
        diag_set_expected(x, "one of %s", c->n_teams ? sb_str(&names) : "(none: the server knows no team)");
        diag_set_suggestion(x, "set spec.team, or add the team to the server's Cluster file");
        sb_free(&names);
        return;
    }
    sj->team = xstrdup(team); /* team may be j->team itself: copy first */
    free(j->team);
    j->team = xstrdup(sj->team);
}

/* Step 3: what the team's policy allows. The job has no folder yet, so
 * no path may be inside the jobs' folders at all. A user's own Job in
 * operator mode (a source with its own plan) is not lathe's to shape: its
 * pods, paths and image are what the user wrote in their own namespace,
 * and lathe only admits it. */
static void check_policy(submission *m, sub_job *sj)
{
    const srv_config *cfg = &m->s->cfg;
    if (!cfg->policy || m->src->plan_json) return;
    spec_job *j = sj->job;
    policy_check_job(cfg->policy, sj->team, j, j->file, NULL, &m->d);
    bool command = j->trainer.kind == TRAINER_COMMAND || j->trainer.n_command;
    const spec_policy *sp = policy_spec(cfg->policy);
    if (command && cfg->spec->executor == SPEC_EXECUTOR_LOCAL &&
        sp->sandbox.mode != SPEC_SANDBOX_OFF && !cfg->sandbox_ok &&
        policy_team(cfg->policy, sj->team)->commands) {
        char msg[512];
        snprintf(msg, sizeof msg, "this server cannot sandbox trainers here: %s",
                 cfg->sandbox_why);
        diag *x = job_error(m, j, "spec.trainer.command", msg);
        diag_set_expected(x, "the built-in trainer (no trainer.command) on this server");
        diag_set_suggestion(x, "remove trainer.command, or ask the operator to run the server "
                               "where the sandbox works (as root, or with user namespaces)");
    }
}

/* Step 4. */
static void resolve_priority(submission *m, sub_job *sj)
{
    const spec_job *j = sj->job;
    const spec_cluster *c = m->s->cluster.spec;
    if (j->priority_class && !spec_cluster_priority_class(c, j->priority_class)) {
        diag *x = job_error(m, j, "spec.priorityClassName", "this server has no such priority class");
        diag_set_found(x, "%s", j->priority_class);
        const char *names[64];
        size_t n = 0;
        for (size_t i = 0; i < c->n_priority_classes && n < 64; i++)
            names[n++] = c->priority_classes[i].name;
        const char *s = str_suggest(j->priority_class, names, n);
        if (s) diag_set_suggestion(x, "did you mean %s?", s);
        else diag_set_suggestion(x, "leave it out for the default, or add it to the Cluster file");
        return;
    }
    bool preempt;
    srv_priority(&m->s->cluster, j->priority_class, &sj->priority, &preempt);
}

/* Step 5: the plan, the resolved spec and its summary. */
static void plan_one(submission *m, sub_job *sj)
{
    const srv_cluster *c = &m->s->cluster;
    plan_options opt;
    plan_options_defaults(&opt);
    if (c->has_catalog) opt.catalog = &c->catalog;
    plan_result res;
    size_t before = m->d.errors;
    int rc = plan_job(sj->job, &opt, &res, &m->d);
    if (rc == LT_EXIT_NOFIT && !c->cpu_mode) {
        diag *x = job_error(m, sj->job, "spec.resources", "the job fits no GPU of this cluster");
        diag_set_suggestion(x, "%s", res.n_reasons ? res.reasons[res.n_reasons - 1]
                                                   : "try QLoRA, a smaller micro-batch or a "
                                                     "shorter maxSeqLength");
    }
    if (m->d.errors == before) {
        spec_job *rj = plan_resolved_job(&res, sj->job);
        sj->spec_json = spec_job_to_json(rj);
        spec_job_free(rj);
        sj->plan_json = srv_plan_json(&res, sj->job->resources.gpu_type != NULL);
        if (res.found)
            sj->summary = xasprintf("planned %d x %s (%s, micro-batch %d x %d accumulation%s)",
                                    res.chosen.gpus, res.chosen.gpu->name,
                                    spec_method_name(res.chosen.method), res.chosen.micro_batch,
                                    res.chosen.grad_accum,
                                    res.chosen.grad_ckpt ? ", gradient checkpointing" : "");
        else
            sj->summary = xstrdup("runs in a CPU slot");
    }
    plan_result_free(&res);
}

/* Step 6: can the cluster ever run it? */
static void admission(submission *m, sub_job *sj)
{
    const srv_cluster *c = &m->s->cluster;
    if (c->cpu_mode) return;
    srv_shape sh;
    char why[256];
    /* timeout and checkpoints are the same in the resolved spec */
    if (!srv_shape_of(c, sj->plan_json, sj->job, &sh, why, sizeof why)) {
        job_error(m, sj->job, "spec.resources", why);
        return;
    }
    sched_job j;
    srv_sched_job(c, &sh, 1, sj->job->name, sj->team, sj->priority, sj->job->priority_class, &j);
    sched_reason why_not;
    if (!sched_check_job(c->sched, &j, &why_not)) {
        sb msg;
        sb_init(&msg);
        sched_reason_format(c->sched, &why_not, 0, &msg);
        diag *x = job_error(m, sj->job, "spec.resources", "the cluster can never run this job");
        diag_set_found(x, "%s", sb_str(&msg));
        diag_set_suggestion(x, "ask for fewer GPUs, or raise the team's quota or borrowing limit");
        sb_free(&msg);
    }
}

static void hash_job(sub_job *sj)
{
    char *json = spec_job_to_json(sj->job);
    unsigned char h[32];
    srv_sha256(json, strlen(json), h);
    sj->hash = xmalloc(65);
    srv_hex(h, 32, sj->hash);
    sj->own_text = json;
}

/* Step 5 for a job whose resources were chosen by its author (a user's
 * own Job in operator mode): the plan is the source's. */
static void given_plan(submission *m, sub_job *sj)
{
    sj->spec_json = spec_job_to_json(sj->job);
    sj->plan_json = xstrdup(m->src->plan_json);
    sj->summary = xstrdup(m->src->plan_summary ? m->src->plan_summary : "resources as given");
}

static void check_all(submission *m)
{
    for (size_t i = 0; i < m->n && !m->d.errors; i++) resolve_team(m, &m->jobs[i]);
    for (size_t i = 0; i < m->n && !m->d.errors; i++) check_policy(m, &m->jobs[i]);
    for (size_t i = 0; i < m->n && !m->d.errors; i++) resolve_priority(m, &m->jobs[i]);
    for (size_t i = 0; i < m->n && !m->d.errors; i++)
        (m->src->plan_json ? given_plan : plan_one)(m, &m->jobs[i]);
    for (size_t i = 0; i < m->n && !m->d.errors; i++) admission(m, &m->jobs[i]);
    for (size_t i = 0; i < m->n && !m->d.errors; i++) hash_job(&m->jobs[i]);
}

/* ---- step 7: the store ---- */
static void fill_request(submission *m, sub_job *sj, store_submit_req *q, store_event *ev,
                         char **msg)
{
    const spec_job *j = sj->job;
    const srv_config *cfg = &m->s->cfg;
    *msg = xasprintf("submitted by %s; %s", m->src->actor, sj->summary);
    *ev = (store_event){.actor = m->src->actor, .type = "submitted", .message = *msg};
    int retries = j->retry_policy.retry_on_failure ? j->retry_policy.max_retries : 0;
    if (retries > cfg->spec->retry.max_retries) retries = cfg->spec->retry.max_retries;
    *q = (store_submit_req){
        .team = sj->team, .name = j->name, .experiment = j->experiment,
        .spec_text = m->exp ? sj->own_text : m->src->body, .spec_hash = sj->hash,
        .spec_json = sj->spec_json, .plan_json = sj->plan_json,
        .priority_class = j->priority_class, .priority = sj->priority, .max_retries = retries,
        .wait_reason = "waiting for the scheduler's next pass", .event = ev};
}

/* ---- step 7: the store, as one write ---- */
typedef struct submit_write {
    const submission *m;
    const store_submit_req *q;
    int64_t *ids;
    size_t bad;
} submit_write;

/* A lone job, or an experiment and its whole expansion, all or nothing
 * (one savepoint); then the source's own writes (after). */
static store_rc write_submission(store *st, void *arg)
{
    submit_write *w = arg;
    const submission *m = w->m;
    store_rc rc;
    if (m->exp) {
        rc = store_experiment_put(st, m->jobs[0].team, m->exp->name, m->exp->max_concurrent);
        if (rc == STORE_OK) rc = store_submit_many(st, w->q, m->n, w->ids, NULL, &w->bad);
    } else {
        rc = store_submit(st, w->q, &w->ids[0]);
        w->bad = 0;
    }
    if ((rc == STORE_OK || rc == STORE_EXISTS) && m->src->after) {
        store_rc r2 = m->src->after(st, m->src->ctx, w->ids, m->n, rc == STORE_EXISTS);
        if (r2 != STORE_OK) rc = r2;
    }
    return rc;
}

static store_rc store_submission(submission *m, int64_t *ids, size_t *bad)
{
    store_submit_req *q = xcalloc(m->n, sizeof *q);
    store_event *ev = xcalloc(m->n, sizeof *ev);
    char **msgs = xcalloc(m->n, sizeof *msgs);
    for (size_t i = 0; i < m->n; i++) fill_request(m, &m->jobs[i], &q[i], &ev[i], &msgs[i]);
    submit_write w = {.m = m, .q = q, .ids = ids, .bad = m->n};
    store_rc rc = m->src->write(m->src->ctx, write_submission, &w);
    *bad = w.bad;
    for (size_t i = 0; i < m->n; i++) free(msgs[i]);
    free(msgs);
    free(ev);
    free(q);
    if (rc == STORE_OK && m->s->ctl) /* none yet while the operator rebuilds the store */
        ctl_jobs_changed(m->s->ctl, ids, m->n);
    return rc;
}

/* Steps 1-6 for one document's text. */
store_rc srv_submit_text(srv *s, const srv_submit_src *src, srv_submitted *out, diag_list *d)
{
    memset(out, 0, sizeof *out);
    submission m;
    memset(&m, 0, sizeof m);
    m.src = src;
    m.s = s;
    diag_list_init(&m.d);
    spec_load_string(src->file_name, src->body, src->len, &m.file, &m.d);
    collect_jobs(&m);
    check_all(&m);
    store_rc rc = STORE_INVALID;
    if (!m.d.errors) {
        out->ids = xcalloc(m.n ? m.n : 1, sizeof *out->ids);
        out->n = m.n;
        out->experiment = m.exp ? xstrdup(m.exp->name) : NULL;
        out->team = xstrdup(m.jobs[0].team);
        out->max_concurrent = m.exp ? m.exp->max_concurrent : 0;
        size_t bad = 0;
        rc = store_submission(&m, out->ids, &bad);
        if (rc == STORE_CONFLICT)
            out->conflict_name = xstrdup(m.jobs[bad < m.n ? bad : 0].job->name);
    }
    for (size_t i = 0; i < m.d.len; i++) { /* hand the diagnostics over */
        const diag *x = &m.d.items[i];
        diag *y = diag_add(d, x->level, x->file, x->line, x->col, x->path, x->message);
        if (x->expected) diag_set_expected(y, "%s", x->expected);
        if (x->found) diag_set_found(y, "%s", x->found);
        if (x->suggestion) diag_set_suggestion(y, "%s", x->suggestion);
    }
    submission_free(&m);
    return rc;
}

void srv_submitted_free(srv_submitted *r)
{
    free(r->ids);
    free(r->experiment);
    free(r->team);
    free(r->conflict_name);
    memset(r, 0, sizeof *r);
}

/* ---- the HTTP side: POST /v1/jobs ---- */
static store_rc http_write(void *ctx, store_write_fn fn, void *arg)
{
    return srv_write(ctx, fn, arg);
}

static void reply_stored(srv_req *r, const srv_submitted *res, store_rc rc)
{
    srv *s = srv_req_server(r);
    store *st = srv_req_store(r);
    if (rc == STORE_CONFLICT) {
        if (res->experiment)
            srv_reply_error(r, 409, "conflict",
                            "team %s already has a job named %s with a different spec: nothing "
                            "of experiment %s was stored",
                            res->team, res->conflict_name, res->experiment);
        else
            srv_reply_error(r, 409, "conflict",
                            "team %s already has a job named %s with a different spec: rename "
                            "this one, or delete the old job",
                            res->team, res->conflict_name);
        return;
    }
    if (rc != STORE_OK && rc != STORE_EXISTS) {
        srv_reply_store_error(r, res->experiment ? "storing the experiment" : "storing the job");
        return;
    }
    int status = rc == STORE_OK ? 201 : 200;
    if (!res->experiment) {
        store_job j;
        if (store_job_get(st, res->ids[0], &j) != STORE_OK) {
            srv_reply_store_error(r, "reading the job back");
            return;
        }
        srv_reply_json(r, status, srv_job_json(s, st, &j, true));
        store_job_clear(&j);
        return;
    }
    json_t *jobs = json_array();
    for (size_t i = 0; i < res->n; i++) {
        store_job j;
        if (store_job_get(st, res->ids[i], &j) != STORE_OK) continue;
        json_array_append_new(jobs, srv_job_json(s, st, &j, false));
        store_job_clear(&j);
    }
    json_t *exp = json_pack("{s:s, s:s, s:i, s:i}", "name", res->experiment, "team", res->team,
                            "jobs", (int)res->n, "max_concurrent", res->max_concurrent);
    srv_reply_json(r, status, json_pack("{s:o, s:o}", "experiment", exp, "jobs", jobs));
}

void srv_api_submit(srv_req *r)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    if (len == 0) {
        srv_reply_error(r, 400, "bad_request",
                        "empty body: send a LoRATrainingJob or LoRAExperiment as YAML or JSON");
        return;
    }
    const char *ctype = srv_req_header(r, "Content-Type");
    bool json = ctype && strstr(ctype, "json");
    if (json) {
        json_error_t e;
        json_t *v = json_loadb(body, len, 0, &e);
        if (!v) {
            srv_reply_error(r, 400, "bad_request", "malformed JSON at line %d, column %d: %s",
                            e.line, e.column, e.text);
            return;
        }
        json_decref(v);
    }
    char name[256];
    body_name(r, json, name, sizeof name);
    const srv_token *t = srv_req_token(r);
    char fix[160] = "";
    if (!t->admin)
        snprintf(fix, sizeof fix, "leave spec.team out, or submit with a token of that team");
    srv_submit_src src = {.body = body, .len = len, .file_name = name,
                          .team = t->admin ? NULL : t->team, .team_why = "the team of this token",
                          .team_fix = fix, .default_team = srv_req_team(r),
                          .actor = srv_req_actor(r), .write = http_write, .ctx = r};
    diag_list d;
    diag_list_init(&d);
    srv_submitted res;
    store_rc rc = srv_submit_text(srv_req_server(r), &src, &res, &d);
    if (d.errors) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s has %zu error%s", name, d.errors, d.errors == 1 ? "" : "s");
        srv_reply_diags(r, 422, "invalid", msg, &d);
    } else {
        reply_stored(r, &res, rc);
    }
    srv_submitted_free(&res);
    diag_list_free(&d);
}
