/* store_attempts.c: the attempts of a job: adding the next one, recording
 * the executor's handle (to re-attach after a restart), its usage (GPUs,
 * price, what it cost) and the end, and reading them back, including every
 * attempt still open. */
#include "store_internal.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

#define ATTEMPT_COLS                                                                           \
    "job_id, number, started_at, ended_at, node, gpus_json, executor, handle_json, work_dir,"  \
    " log_path, exit_code, exit_signal, reason, gpus, price, gpu_seconds, cost"

static void attempt_from_row(sqlite3_stmt *s, store_attempt *a)
{
    memset(a, 0, sizeof *a);
    a->job_id = st_col_int(s, 0, 0);
    a->number = (int)st_col_int(s, 1, 0);
    a->started_at = st_col_time(s, 2);
    a->ended_at = st_col_time(s, 3);
    a->node = st_col_text(s, 4);
    a->gpus_json = st_col_text(s, 5);
    a->executor = st_col_text(s, 6);
    a->handle_json = st_col_text(s, 7);
    a->work_dir = st_col_text(s, 8);
    a->log_path = st_col_text(s, 9);
    a->exit_code = (int)st_col_int(s, 10, -1);
    a->exit_signal = (int)st_col_int(s, 11, 0);
    a->reason = st_col_text(s, 12);
    a->gpus = st_col_double(s, 13);
    a->price = st_col_double(s, 14);
    a->gpu_seconds = st_col_double(s, 15);
    a->cost = st_col_double(s, 16);
}

void store_attempt_clear(store_attempt *a)
{
    if (!a) return;
    free(a->node);
    free(a->gpus_json);
    free(a->executor);
    free(a->handle_json);
    free(a->work_dir);
    free(a->log_path);
    free(a->reason);
    memset(a, 0, sizeof *a);
}

void store_attempt_list_free(store_attempt_list *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) store_attempt_clear(&l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

/* ---- adding ---- */

static store_rc add_attempt(store *st, int64_t job_id, const char *node, const char *gpus_json,
                            int *number)
{
    static const char next_sql[] = "UPDATE jobs SET attempts = attempts + 1, updated_at = ?2"
                                   " WHERE id = ?1 RETURNING attempts";
    sqlite3_stmt *s = st_stmt(st, next_sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_double(s, 2, store_now(st));
    int rc = sqlite3_step(s);
    int n = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    if (rc == SQLITE_ROW) rc = sqlite3_step(s); /* finish the statement */
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) return st_fail(st, rc, "counting attempts");
    if (n == 0) return st_failf(st, STORE_NOT_FOUND, "no job with id %lld", (long long)job_id);

    static const char sql[] = "INSERT INTO attempts (job_id, number, started_at, node, gpus_json)"
                              " VALUES (?1, ?2, ?3, ?4, ?5)";
    s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_int64(s, 2, n);
    st_bind_double(s, 3, store_now(st));
    st_bind_text(s, 4, node);
    st_bind_text(s, 5, gpus_json);
    store_rc r = st_exec_stmt(st, s, "adding an attempt");
    if (r == STORE_OK && number) *number = n;
    return r;
}

store_rc store_attempt_add(store *st, int64_t job_id, const char *node, const char *gpus_json,
                           int *number)
{
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    return st_op_end(st, add_attempt(st, job_id, node, gpus_json, number));
}

/* Runs an UPDATE of one attempt; STORE_NOT_FOUND when it does not exist. */
static store_rc update_one(store *st, sqlite3_stmt *s, const char *what)
{
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) {
        sqlite3_reset(s);
        return rc;
    }
    rc = st_exec_stmt(st, s, what);
    if (rc == STORE_OK && sqlite3_changes(st->db) != 1)
        rc = st_failf(st, STORE_NOT_FOUND, "no such attempt");
    return st_op_end(st, rc);
}

store_rc store_attempt_set_handle(store *st, int64_t job_id, int number, const char *executor,
                                  const char *handle_json, const char *work_dir,
                                  const char *log_path)
{
    static const char sql[] = "UPDATE attempts SET executor = ?3, handle_json = ?4,"
                              " work_dir = ?5, log_path = ?6 WHERE job_id = ?1 AND number = ?2";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_int64(s, 2, number);
    st_bind_text(s, 3, executor);
    st_bind_text(s, 4, handle_json);
    st_bind_text(s, 5, work_dir);
    st_bind_text(s, 6, log_path);
    return update_one(st, s, "recording an attempt's handle");
}

store_rc store_attempt_finish(store *st, int64_t job_id, int number, int exit_code,
                              int exit_signal, const char *reason)
{
    static const char sql[] = "UPDATE attempts SET ended_at = ?3, exit_code = ?4,"
                              " exit_signal = ?5, reason = ?6 WHERE job_id = ?1 AND number = ?2";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_int64(s, 2, number);
    st_bind_double(s, 3, store_now(st));
    st_bind_opt_int(s, 4, exit_code, -1);
    st_bind_opt_int(s, 5, exit_signal, 0);
    st_bind_text(s, 6, reason);
    return update_one(st, s, "ending an attempt");
}

store_rc store_attempt_set_usage(store *st, int64_t job_id, int number,
                                 const store_attempt_usage *u)
{
    static const char sql[] = "UPDATE attempts SET gpus = coalesce(?3, gpus),"
                              " price = coalesce(?4, price),"
                              " gpu_seconds = coalesce(?5, gpu_seconds),"
                              " cost = coalesce(?6, cost) WHERE job_id = ?1 AND number = ?2";
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_int64(s, 2, number);
    st_bind_double(s, 3, u->gpus);
    st_bind_double(s, 4, u->price);
    st_bind_double(s, 5, u->gpu_seconds);
    st_bind_double(s, 6, u->cost);
    return update_one(st, s, "recording an attempt's usage");
}

/* ---- reading ---- */

store_rc store_attempt_get(store *st, int64_t job_id, int number, store_attempt *out)
{
    static const char sql[] = "SELECT " ATTEMPT_COLS " FROM attempts"
                              " WHERE job_id = ?1 AND number = ?2";
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    st_bind_int64(s, 2, number);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) attempt_from_row(s, out);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW) return STORE_OK;
    if (rc == SQLITE_DONE) return st_failf(st, STORE_NOT_FOUND, "no such attempt");
    return st_fail(st, rc, "reading an attempt");
}

static store_rc read_list(store *st, sqlite3_stmt *s, store_attempt_list *out)
{
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (out->n == cap) {
            cap = cap ? cap * 2 : 8;
            out->items = xrealloc(out->items, cap * sizeof *out->items);
        }
        attempt_from_row(s, &out->items[out->n++]);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        store_attempt_list_free(out);
        return st_fail(st, rc, "reading attempts");
    }
    return STORE_OK;
}

store_rc store_attempts_list(store *st, int64_t job_id, store_attempt_list *out)
{
    static const char sql[] = "SELECT " ATTEMPT_COLS " FROM attempts WHERE job_id = ?1"
                              " ORDER BY number";
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    return read_list(st, s, out);
}

store_rc store_attempts_open(store *st, store_attempt_list *out)
{
    static const char sql[] = "SELECT " ATTEMPT_COLS " FROM attempts WHERE ended_at IS NULL"
                              " ORDER BY started_at, job_id, number";
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    return read_list(st, s, out);
}
