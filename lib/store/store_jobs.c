/* store_jobs.c: jobs. Idempotent submission, state changes as a
 * compare-and-set that appends its event in the same transaction, field
 * updates, reads by id or name, and deletion of final jobs. */
#include "store_internal.h"

#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading a row ---- */

void st_job_from_row(sqlite3_stmt *s, store_job *j)
{
    memset(j, 0, sizeof *j);
    j->id = st_col_int(s, 0, 0);
    j->team = st_col_text(s, 1);
    j->name = st_col_text(s, 2);
    j->experiment = st_col_text(s, 3);
    j->spec_text = st_col_text(s, 4);
    j->spec_hash = st_col_text(s, 5);
    j->spec_json = st_col_text(s, 6);
    j->plan_json = st_col_text(s, 7);
    store_state_parse((const char *)sqlite3_column_text(s, 8), &j->state);
    j->priority_class = st_col_text(s, 9);
    j->priority = st_col_int(s, 10, 0);
    j->created_at = st_col_time(s, 11);
    j->updated_at = st_col_time(s, 12);
    j->started_at = st_col_time(s, 13);
    j->finished_at = st_col_time(s, 14);
    j->attempts = (int)st_col_int(s, 15, 0);
    j->max_retries = (int)st_col_int(s, 16, 0);
    j->not_before = st_col_time(s, 17);
    j->wait_reason = st_col_text(s, 18);
    j->placement_json = st_col_text(s, 19);
    j->progress.step = st_col_int(s, 20, -1);
    j->progress.total_steps = st_col_int(s, 21, -1);
    j->progress.epoch = st_col_double(s, 22);
    j->progress.loss = st_col_double(s, 23);
    j->progress.learning_rate = st_col_double(s, 24);
    j->progress.tokens_per_second = st_col_double(s, 25);
    j->progress.eta_seconds = st_col_double(s, 26);
    j->progress.at = st_col_time(s, 27);
    j->exit_code = (int)st_col_int(s, 28, -1);
    j->exit_signal = (int)st_col_int(s, 29, 0);
    j->exit_reason = st_col_text(s, 30);
    j->gpu_seconds = st_col_time(s, 31);
    j->cost = st_col_time(s, 32);
    j->checkpoint_step = st_col_int(s, 33, -1);
    j->checkpoint_path = st_col_text(s, 34);
    j->checkpoint_at = st_col_time(s, 35);
    j->saved_work = st_col_time(s, 36);
    j->eval_loss = st_col_double(s, 37);
    j->eval_step = st_col_int(s, 38, -1);
    j->best_eval_loss = st_col_double(s, 39);
    j->best_eval_step = st_col_int(s, 40, -1);
}

void store_job_clear(store_job *j)
{
    if (!j) return;
    free(j->team);
    free(j->name);
    free(j->experiment);
    free(j->spec_text);
    free(j->spec_hash);
    free(j->spec_json);
    free(j->plan_json);
    free(j->priority_class);
    free(j->wait_reason);
    free(j->placement_json);
    free(j->exit_reason);
    free(j->checkpoint_path);
    memset(j, 0, sizeof *j);
}

/* ---- helpers ---- */

static bool empty(const char *s)
{
    return !s || !*s;
}

store_rc st_job_state(store *st, int64_t id, store_state *out)
{
    static const char sql[] = "SELECT state FROM jobs WHERE id = ?1";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        store_state_parse((const char *)sqlite3_column_text(s, 0), out);
        sqlite3_reset(s);
        return STORE_OK;
    }
    sqlite3_reset(s);
    if (rc == SQLITE_DONE) return st_failf(st, STORE_NOT_FOUND, "no job with id %lld", (long long)id);
    return st_fail(st, rc, "reading a job's state");
}

static bool event_ok(store *st, const store_event *ev)
{
    if (!ev || empty(ev->actor) || empty(ev->type)) {
        st_failf(st, STORE_INVALID, "an event needs an actor and a type");
        return false;
    }
    return true;
}

/* ---- submission ---- */

/* Looks for team + name: STORE_OK (absent), STORE_EXISTS (same hash) or
 * STORE_CONFLICT (another spec); *id is the stored job when present. */
static store_rc lookup_name(store *st, const store_submit_req *r, int64_t *id)
{
    static const char sql[] = "SELECT id, spec_hash FROM jobs WHERE team = ?1 AND name = ?2";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_text(s, 1, r->team);
    st_bind_text(s, 2, r->name);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(s);
        return STORE_OK;
    }
    if (rc != SQLITE_ROW) {
        store_rc e = st_fail(st, rc, "looking up a job name");
        sqlite3_reset(s);
        return e;
    }
    *id = sqlite3_column_int64(s, 0);
    bool same = strcmp((const char *)sqlite3_column_text(s, 1), r->spec_hash) == 0;
    sqlite3_reset(s);
    if (same) return STORE_EXISTS;
    return st_failf(st, STORE_CONFLICT,
                    "team %s already has a job named %s with a different spec (choose another "
                    "name, or delete the old job once it has finished)",
                    r->team, r->name);
}

static store_rc insert_job(store *st, const store_submit_req *r, int64_t *id)
{
    static const char sql[] =
        "INSERT INTO jobs (team, name, experiment, spec_text, spec_hash, spec_json, plan_json,"
        " state, priority_class, priority, created_at, updated_at, max_retries, wait_reason)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?9, ?10, ?10, ?11, ?12)";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_text(s, 1, r->team);
    st_bind_text(s, 2, r->name);
    st_bind_text(s, 3, r->experiment);
    st_bind_text(s, 4, r->spec_text);
    st_bind_text(s, 5, r->spec_hash);
    st_bind_text(s, 6, r->spec_json);
    st_bind_text(s, 7, r->plan_json);
    st_bind_text(s, 8, r->priority_class);
    st_bind_int64(s, 9, r->priority);
    st_bind_double(s, 10, store_now(st));
    st_bind_int64(s, 11, r->max_retries);
    st_bind_text(s, 12, r->wait_reason);
    store_rc rc = st_exec_stmt(st, s, "adding a job");
    if (rc != STORE_OK) return rc;
    *id = sqlite3_last_insert_rowid(st->db);
    return STORE_OK;
}

static store_rc submit_one(store *st, const store_submit_req *r, int64_t *id)
{
    if (empty(r->team) || empty(r->name) || !r->spec_text || empty(r->spec_hash))
        return st_failf(st, STORE_INVALID, "a submission needs a team, a name, the spec text "
                                           "and its hash");
    if (r->event && !event_ok(st, r->event)) return STORE_INVALID;
    store_rc rc = lookup_name(st, r, id);
    if (rc != STORE_OK) return rc;
    rc = insert_job(st, r, id);
    if (rc != STORE_OK) return rc;
    static const store_event submitted = {"controller", "submitted", "submitted", NULL};
    return st_event_insert(st, *id, r->event ? r->event : &submitted);
}

store_rc store_submit(store *st, const store_submit_req *req, int64_t *id)
{
    int64_t tmp = 0;
    if (!id) id = &tmp;
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    return st_op_end(st, submit_one(st, req, id));
}

store_rc store_submit_many(store *st, const store_submit_req *reqs, size_t n, int64_t *ids,
                           bool *existed, size_t *bad_index)
{
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    size_t created = 0;
    for (size_t i = 0; i < n; i++) {
        rc = submit_one(st, &reqs[i], &ids[i]);
        if (existed) existed[i] = rc == STORE_EXISTS;
        if (rc == STORE_OK) created++;
        else if (rc != STORE_EXISTS) {
            if (bad_index) *bad_index = i;
            return st_op_end(st, rc);
        }
    }
    rc = st_op_end(st, STORE_OK);
    if (rc == STORE_OK && created == 0) return STORE_EXISTS;
    return rc;
}

/* ---- changes ---- */

/* One statement writes the state and every field whose STORE_SET_* bit is
 * in ?3, only when the job is in state ?22 (the compare-and-set). */
static const char update_sql[] =
    "UPDATE jobs SET state = ?1, updated_at = ?2,"
    " started_at = CASE WHEN ?1 = 'running' AND started_at IS NULL THEN ?2 ELSE started_at END,"
    " finished_at = CASE WHEN ?1 IN ('succeeded','failed','cancelled','timed_out')"
    "   AND finished_at IS NULL THEN ?2 ELSE finished_at END,"
    " priority = CASE WHEN ?3 & 1 THEN ?4 ELSE priority END,"
    " priority_class = CASE WHEN ?3 & 1 THEN ?5 ELSE priority_class END,"
    " not_before = CASE WHEN ?3 & 2 THEN ?6 ELSE not_before END,"
    " wait_reason = CASE WHEN ?3 & 4 THEN ?7 ELSE wait_reason END,"
    " placement_json = CASE WHEN ?3 & 8 THEN ?8 ELSE placement_json END,"
    " plan_json = CASE WHEN ?3 & 16 THEN ?9 ELSE plan_json END,"
    " spec_json = CASE WHEN ?3 & 16 THEN coalesce(?10, spec_json) ELSE spec_json END,"
    " exit_code = CASE WHEN ?3 & 32 THEN ?11 ELSE exit_code END,"
    " exit_signal = CASE WHEN ?3 & 32 THEN ?12 ELSE exit_signal END,"
    " exit_reason = CASE WHEN ?3 & 32 THEN ?13 ELSE exit_reason END,"
    " gpu_seconds = CASE WHEN ?3 & 64 THEN ?14 ELSE gpu_seconds END,"
    " cost = CASE WHEN ?3 & 64 THEN ?15 ELSE cost END,"
    " ckpt_step = CASE WHEN ?3 & 128 THEN ?16 ELSE ckpt_step END,"
    " ckpt_path = CASE WHEN ?3 & 128 THEN ?17 ELSE ckpt_path END,"
    " ckpt_at = CASE WHEN ?3 & 128 THEN ?18 ELSE ckpt_at END,"
    " saved_work = CASE WHEN ?3 & 128 THEN ?19 ELSE saved_work END,"
    " max_retries = CASE WHEN ?3 & 256 THEN ?20 ELSE max_retries END"
    " WHERE id = ?21 AND state = ?22";

static void bind_update(store *st, sqlite3_stmt *s, const store_job_update *u)
{
    static const store_job_update none;
    if (!u) u = &none;
    double now = store_now(st);
    sqlite3_bind_int(s, 3, (int)u->set);
    st_bind_int64(s, 4, u->priority);
    st_bind_text(s, 5, u->priority_class);
    st_bind_time(s, 6, u->not_before);
    st_bind_text(s, 7, u->wait_reason);
    st_bind_text(s, 8, u->placement_json);
    st_bind_text(s, 9, u->plan_json);
    st_bind_text(s, 10, u->spec_json);
    st_bind_opt_int(s, 11, u->exit_code, -1);
    st_bind_opt_int(s, 12, u->exit_signal, 0);
    st_bind_text(s, 13, u->exit_reason);
    st_bind_double(s, 14, u->gpu_seconds);
    st_bind_double(s, 15, u->cost);
    st_bind_opt_int(s, 16, u->checkpoint_step, -1);
    st_bind_text(s, 17, u->checkpoint_path);
    st_bind_double(s, 18, u->checkpoint_at > 0 ? u->checkpoint_at : now);
    st_bind_double(s, 19, u->saved_work);
    st_bind_int64(s, 20, u->max_retries);
}

/* Runs the update; *applied says whether the job was in state `from`. */
static store_rc run_update(store *st, int64_t id, store_state from, store_state to,
                           const store_job_update *u, bool *applied)
{
    sqlite3_stmt *s = st_stmt(st, update_sql);
    if (!s) return STORE_ERROR;
    st_bind_text(s, 1, store_state_name(to));
    st_bind_double(s, 2, store_now(st));
    bind_update(st, s, u);
    st_bind_int64(s, 21, id);
    st_bind_text(s, 22, store_state_name(from));
    store_rc rc = st_exec_stmt(st, s, "changing a job");
    *applied = rc == STORE_OK && sqlite3_changes(st->db) == 1;
    return rc;
}

static bool state_ok(store_state s)
{
    return (unsigned)s < STORE_N_STATES;
}

static store_rc transition(store *st, int64_t id, store_state from, store_state to,
                           const store_job_update *upd, const store_event *ev,
                           store_state *current)
{
    bool applied;
    store_rc rc = run_update(st, id, from, to, upd, &applied);
    if (rc != STORE_OK) return rc;
    if (!applied) {
        store_state now_in;
        rc = st_job_state(st, id, &now_in);
        if (rc != STORE_OK) return rc;
        if (current) *current = now_in;
        return st_failf(st, STORE_CONFLICT, "job %lld is %s, not %s", (long long)id,
                        store_state_name(now_in), store_state_name(from));
    }
    if (current) *current = to;
    return st_event_insert(st, id, ev);
}

store_rc store_job_transition(store *st, int64_t id, store_state from, store_state to,
                              const store_job_update *upd, const store_event *ev,
                              store_state *current)
{
    if (!state_ok(from) || !state_ok(to))
        return st_failf(st, STORE_INVALID, "a state out of range");
    if (store_state_final(from))
        return st_failf(st, STORE_INVALID, "a job never leaves a final state (%s)",
                        store_state_name(from));
    if (!event_ok(st, ev)) return STORE_INVALID;
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    return st_op_end(st, transition(st, id, from, to, upd, ev, current));
}

static store_rc update_fields(store *st, int64_t id, unsigned states, const store_job_update *upd,
                              const store_event *ev)
{
    store_state cur;
    store_rc rc = st_job_state(st, id, &cur);
    if (rc != STORE_OK) return rc;
    if (states && !(states & STORE_STATE_BIT(cur)))
        return st_failf(st, STORE_CONFLICT, "job %lld is %s", (long long)id,
                        store_state_name(cur));
    bool applied;
    rc = run_update(st, id, cur, cur, upd, &applied);
    if (rc != STORE_OK) return rc;
    return ev ? st_event_insert(st, id, ev) : STORE_OK;
}

store_rc store_job_update_fields(store *st, int64_t id, unsigned states,
                                 const store_job_update *upd, const store_event *ev)
{
    if (ev && !event_ok(st, ev)) return STORE_INVALID;
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    return st_op_end(st, update_fields(st, id, states, upd, ev));
}

/* ---- reads ---- */

static store_rc read_one(store *st, sqlite3_stmt *s, store_job *out, const char *what)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        st_job_from_row(s, out);
        sqlite3_reset(s);
        return STORE_OK;
    }
    sqlite3_reset(s);
    memset(out, 0, sizeof *out);
    if (rc == SQLITE_DONE) return st_failf(st, STORE_NOT_FOUND, "no such job");
    return st_fail(st, rc, what);
}

store_rc store_job_get(store *st, int64_t id, store_job *out)
{
    static const char sql[] = "SELECT " ST_JOB_COLS " FROM jobs WHERE id = ?1";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, id);
    return read_one(st, s, out, "reading a job");
}

store_rc store_job_find(store *st, const char *team, const char *name, store_job *out)
{
    static const char sql[] = "SELECT " ST_JOB_COLS " FROM jobs WHERE team = ?1 AND name = ?2";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_text(s, 1, team);
    st_bind_text(s, 2, name);
    return read_one(st, s, out, "reading a job");
}

/* ---- deletion ---- */

static store_rc delete_job(store *st, int64_t id)
{
    store_state cur;
    store_rc rc = st_job_state(st, id, &cur);
    if (rc != STORE_OK) return rc;
    if (!store_state_final(cur))
        return st_failf(st, STORE_CONFLICT, "job %lld is %s; cancel it before deleting it",
                        (long long)id, store_state_name(cur));
    static const char sql[] = "DELETE FROM jobs WHERE id = ?1";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, id);
    return st_exec_stmt(st, s, "deleting a job");
}

store_rc store_job_delete(store *st, int64_t id)
{
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    return st_op_end(st, delete_job(st, id));
}
