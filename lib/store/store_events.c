/* store_events.c: a job's event log (append, read in order) and its
 * progress history (batched writes, thinned reads). */
#include "store_internal.h"

#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- events ---- */

store_rc st_event_insert(store *st, int64_t job_id, const store_event *ev)
{
    static const char sql[] = "INSERT INTO events (job_id, at, actor, type, message, data_json)"
                              " VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_double(s, 2, store_now(st));
    st_bind_text(s, 3, ev->actor);
    st_bind_text(s, 4, ev->type);
    st_bind_text(s, 5, ev->message ? ev->message : "");
    st_bind_text(s, 6, ev->data_json);
    return st_exec_stmt(st, s, "appending an event");
}

store_rc store_event_append(store *st, int64_t job_id, const store_event *ev)
{
    if (!ev || !ev->actor || !*ev->actor || !ev->type || !*ev->type)
        return st_failf(st, STORE_INVALID, "an event needs an actor and a type");
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    store_state cur;
    rc = st_job_state(st, job_id, &cur);
    if (rc == STORE_OK) rc = st_event_insert(st, job_id, ev);
    return st_op_end(st, rc);
}

store_rc store_events_list(store *st, int64_t job_id, int64_t after_seq, size_t limit,
                           store_event_list *out)
{
    static const char sql[] = "SELECT seq, at, actor, type, message, data_json FROM events"
                              " WHERE job_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3";
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_int64(s, 2, after_seq);
    st_bind_int64(s, 3, limit ? (int64_t)limit : -1);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->items = xrealloc(out->items, cap * sizeof *out->items);
        }
        store_event_row *e = &out->items[out->n++];
        e->seq = sqlite3_column_int64(s, 0);
        e->job_id = job_id;
        e->at = st_col_time(s, 1);
        e->actor = st_col_text(s, 2);
        e->type = st_col_text(s, 3);
        e->message = st_col_text(s, 4);
        e->data_json = st_col_text(s, 5);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        store_event_list_free(out);
        return st_fail(st, rc, "reading events");
    }
    return STORE_OK;
}

void store_event_list_free(store_event_list *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].actor);
        free(l->items[i].type);
        free(l->items[i].message);
        free(l->items[i].data_json);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}

/* ---- progress ---- */

/* A point's numbers, its total steps, epoch, loss, learning rate, tokens
 * per second and ETA, as parameters first .. first + 5 of s (the
 * progress row and the job's latest point). */
static void bind_numbers(sqlite3_stmt *s, int first, const store_progress *p)
{
    st_bind_opt_int(s, first, p->total_steps, -1);
    st_bind_double(s, first + 1, p->epoch);
    st_bind_double(s, first + 2, p->loss);
    st_bind_double(s, first + 3, p->learning_rate);
    st_bind_double(s, first + 4, p->tokens_per_second);
    st_bind_double(s, first + 5, p->eta_seconds);
}

static store_rc insert_point(store *st, int64_t job_id, int attempt, const store_progress *p,
                             double at)
{
    static const char sql[] =
        "INSERT INTO progress (job_id, attempt, step, total, epoch, loss, lr, tokens_per_s,"
        " eta_s, at, eval_loss) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
        " ON CONFLICT (job_id, attempt, step) DO UPDATE SET"
        " total = COALESCE(excluded.total, total), epoch = COALESCE(excluded.epoch, epoch),"
        " loss = COALESCE(excluded.loss, loss), lr = COALESCE(excluded.lr, lr),"
        " tokens_per_s = COALESCE(excluded.tokens_per_s, tokens_per_s),"
        " eta_s = COALESCE(excluded.eta_s, eta_s), at = excluded.at,"
        " eval_loss = COALESCE(excluded.eval_loss, eval_loss)";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_int64(s, 2, attempt);
    st_bind_int64(s, 3, p->step);
    bind_numbers(s, 4, p);
    st_bind_double(s, 10, at);
    st_bind_double(s, 11, p->has_eval ? p->eval_loss : NAN);
    return st_exec_stmt(st, s, "adding a progress point");
}

/* The job's latest and best eval loss after an evaluated point. */
static store_rc set_eval(store *st, int64_t job_id, const store_progress *p)
{
    static const char sql[] =
        "UPDATE jobs SET e_loss = ?2, e_step = ?3,"
        " e_best_step = CASE WHEN e_best IS NULL OR ?2 < e_best THEN ?3 ELSE e_best_step END,"
        " e_best = CASE WHEN e_best IS NULL OR ?2 < e_best THEN ?2 ELSE e_best END"
        " WHERE id = ?1";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_double(s, 2, p->eval_loss);
    st_bind_int64(s, 3, p->step);
    return st_exec_stmt(st, s, "writing the eval loss");
}

static store_rc set_latest(store *st, int64_t job_id, const store_progress *p, double at)
{
    /* a point of the step already latest (its evaluation, reported apart)
     * keeps the numbers it does not know */
    static const char sql[] =
        "UPDATE jobs SET p_total = CASE WHEN p_step = ?2 THEN COALESCE(?3, p_total) ELSE ?3 END,"
        " p_epoch = CASE WHEN p_step = ?2 THEN COALESCE(?4, p_epoch) ELSE ?4 END,"
        " p_loss = CASE WHEN p_step = ?2 THEN COALESCE(?5, p_loss) ELSE ?5 END,"
        " p_lr = CASE WHEN p_step = ?2 THEN COALESCE(?6, p_lr) ELSE ?6 END,"
        " p_tokens_per_s = CASE WHEN p_step = ?2 THEN COALESCE(?7, p_tokens_per_s) ELSE ?7 END,"
        " p_eta_s = CASE WHEN p_step = ?2 THEN COALESCE(?8, p_eta_s) ELSE ?8 END,"
        " p_step = ?2, p_at = ?9, updated_at = ?10 WHERE id = ?1";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_int64(s, 2, p->step);
    bind_numbers(s, 3, p);
    st_bind_double(s, 9, at);
    st_bind_double(s, 10, store_now(st));
    store_rc rc = st_exec_stmt(st, s, "writing the latest progress");
    if (rc == STORE_OK && sqlite3_changes(st->db) != 1)
        return st_failf(st, STORE_NOT_FOUND, "no job with id %lld", (long long)job_id);
    return rc;
}

static store_rc add_points(store *st, int64_t job_id, int attempt, const store_progress *pts,
                           size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pts[i].step < 0) return st_failf(st, STORE_INVALID, "a progress point needs a step");
    double now = store_now(st);
    store_rc rc = set_latest(st, job_id, &pts[n - 1], pts[n - 1].at > 0 ? pts[n - 1].at : now);
    for (size_t i = 0; i < n && rc == STORE_OK; i++) {
        rc = insert_point(st, job_id, attempt, &pts[i], pts[i].at > 0 ? pts[i].at : now);
        if (rc == STORE_OK && pts[i].has_eval && !isnan(pts[i].eval_loss))
            rc = set_eval(st, job_id, &pts[i]);
    }
    return rc;
}

store_rc store_progress_add(store *st, int64_t job_id, int attempt, const store_progress *pts,
                            size_t n)
{
    if (n == 0) return STORE_OK;
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    return st_op_end(st, add_points(st, job_id, attempt, pts, n));
}

store_rc store_progress_list(store *st, int64_t job_id, size_t max_points, store_progress **pts,
                             size_t *n)
{
    static const char sql[] = "SELECT step, total, epoch, loss, lr, tokens_per_s, eta_s, at,"
                              " eval_loss FROM progress WHERE job_id = ?1 ORDER BY attempt, step";
    *pts = NULL;
    *n = 0;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        *pts = st_grow(*pts, *n, &cap, sizeof **pts);
        store_progress *p = &(*pts)[(*n)++];
        p->step = st_col_int(s, 0, -1);
        p->total_steps = st_col_int(s, 1, -1);
        p->epoch = st_col_double(s, 2);
        p->loss = st_col_double(s, 3);
        p->learning_rate = st_col_double(s, 4);
        p->tokens_per_second = st_col_double(s, 5);
        p->eta_seconds = st_col_double(s, 6);
        p->at = st_col_time(s, 7);
        p->eval_loss = st_col_double(s, 8);
        p->has_eval = !isnan(p->eval_loss);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        free(*pts);
        *pts = NULL;
        *n = 0;
        return st_fail(st, rc, "reading progress");
    }
    *n = st_thin(*pts, *n, sizeof **pts, max_points);
    return STORE_OK;
}
