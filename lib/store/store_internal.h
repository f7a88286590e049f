/* store_internal.h: what the store's files share and nothing outside
 * lib/store sees: the handle, the statement cache, the per-call transaction
 * (a transaction of its own, or a savepoint inside the caller's), error
 * recording and small binding / column helpers. */
#ifndef LATHE_STORE_INTERNAL_H
#define LATHE_STORE_INTERNAL_H

#include "store.h"

#include <sqlite3.h>

#define STORE_STMT_CACHE 64

/* A prepared statement kept for the life of the handle, found by the
 * address of its SQL text (every cached SQL is a string constant). */
typedef struct store_cached {
    const char *sql;
    sqlite3_stmt *stmt;
} store_cached;

struct store {
    sqlite3 *db;
    char *path;
    bool in_tx;      /* inside store_tx_begin .. commit / rollback */
    bool tx_broken;  /* SQLite rolled the caller's transaction back after an error */
    int op_depth;    /* calls in progress (a call may use another) */
    double (*clock)(void *ctx);
    void *clock_ctx;
    store_cached cache[STORE_STMT_CACHE];
    size_t n_cache;
    char err[512];
};

/* ---- errors ---- */
/* Records "what: SQLite's message" and returns the store_rc matching the
 * SQLite code (a constraint failure is STORE_INVALID, the rest STORE_ERROR). */
store_rc st_fail(store *st, int sqlite_rc, const char *what);
/* Records a message for a result that is not an SQLite failure. */
store_rc st_failf(store *st, store_rc rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- statements ---- */
/* The cached statement for sql (a string constant), reset and unbound; NULL
 * after recording the error. */
sqlite3_stmt *st_stmt(store *st, const char *sql);
/* Steps a statement that returns no row (or whose rows are not wanted). */
store_rc st_exec_stmt(store *st, sqlite3_stmt *s, const char *what);
/* Runs SQL text without parameters (not cached). */
store_rc st_exec(store *st, const char *sql, const char *what);

/* ---- one call = one transaction ---- */
/* Starts the call's transaction: BEGIN IMMEDIATE on its own, a savepoint
 * inside the caller's. Pair with st_op_end(st, rc), which commits when rc is
 * STORE_OK and rolls back otherwise (the other results write nothing), and
 * returns the final result (a failed commit is STORE_ERROR). */
store_rc st_op_begin(store *st);
store_rc st_op_end(store *st, store_rc rc);

/* ---- binding (index is 1-based, as in SQLite) ---- */
void st_bind_text(sqlite3_stmt *s, int i, const char *v); /* NULL binds NULL */
void st_bind_double(sqlite3_stmt *s, int i, double v);    /* NAN binds NULL */
void st_bind_time(sqlite3_stmt *s, int i, double v);      /* 0 binds NULL */
void st_bind_int64(sqlite3_stmt *s, int i, int64_t v);
void st_bind_opt_int(sqlite3_stmt *s, int i, int64_t v, int64_t none); /* none binds NULL */

/* ---- columns ---- */
char *st_col_text(sqlite3_stmt *s, int i);   /* NULL for NULL; caller frees */
double st_col_double(sqlite3_stmt *s, int i); /* NAN for NULL */
double st_col_time(sqlite3_stmt *s, int i);   /* 0 for NULL */
int64_t st_col_int(sqlite3_stmt *s, int i, int64_t null_value);

/* items (n of them, room for *cap) with room for one more: grown (and
 * *cap updated) when full. */
void *st_grow(void *items, size_t n, size_t *cap, size_t size);
/* Keeps max of n items (each size bytes) evenly spread, the first and the
 * last among them, in place; returns the new count (n when max is 0 or n
 * is not above it). */
size_t st_thin(void *items, size_t n, size_t size, size_t max);

/* ---- the schema (store_schema.c) ---- */
/* Brings the database to store_schema_version() in one transaction.
 * Returns false with a message in err. */
bool st_migrate(store *st, char *err, size_t errsz);

/* ---- shared by the job files ---- */
/* The columns of a job, in the order st_job_from_row reads them; the
 * summary leaves out the large texts (read back as NULL). */
#define ST_JOB_COLS_TAIL                                                                       \
    "state, priority_class, priority, created_at, updated_at, started_at, finished_at, "     \
    "attempts, max_retries, not_before, wait_reason, placement_json, p_step, p_total, "      \
    "p_epoch, p_loss, p_lr, p_tokens_per_s, p_eta_s, p_at, exit_code, exit_signal, "         \
    "exit_reason, gpu_seconds, cost, ckpt_step, ckpt_path, ckpt_at, saved_work, e_loss, "    \
    "e_step, e_best, e_best_step"
#define ST_JOB_COLS                                                                            \
    "id, team, name, experiment, spec_text, spec_hash, spec_json, plan_json, " ST_JOB_COLS_TAIL
#define ST_JOB_COLS_SUMMARY                                                                    \
    "id, team, name, experiment, NULL, spec_hash, NULL, NULL, " ST_JOB_COLS_TAIL
/* Reads one row of ST_JOB_COLS (or the summary) into j (owned strings). */
void st_job_from_row(sqlite3_stmt *s, store_job *j);
/* Appends an event to job_id (inside the current call). */
store_rc st_event_insert(store *st, int64_t job_id, const store_event *ev);
/* The current state of a job: STORE_OK, STORE_NOT_FOUND or an error. */
store_rc st_job_state(store *st, int64_t id, store_state *out);

#endif
