/* store.c: the store handle. Opening a database (WAL, synchronous=FULL,
 * foreign keys, busy timeout, migrations), errors, the statement cache, the
 * one-transaction-per-call discipline and explicit transactions, the clock,
 * the integrity check, and the names of states and results. */
#include "store_internal.h"

#include "base/base.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- names ---- */

static const char *const state_names[STORE_N_STATES] = {
    "queued", "starting", "running", "stopping", "succeeded", "failed", "cancelled", "timed_out",
};

const char *store_state_name(store_state s)
{
    return (unsigned)s < STORE_N_STATES ? state_names[s] : "unknown";
}

bool store_state_parse(const char *name, store_state *out)
{
    for (int i = 0; i < STORE_N_STATES; i++)
        if (name && strcmp(name, state_names[i]) == 0) {
            *out = (store_state)i;
            return true;
        }
    return false;
}

bool store_state_final(store_state s)
{
    return s == STORE_SUCCEEDED || s == STORE_FAILED || s == STORE_CANCELLED ||
           s == STORE_TIMED_OUT;
}

const char *store_rc_name(store_rc rc)
{
    switch (rc) {
    case STORE_OK: return "ok";
    case STORE_EXISTS: return "exists";
    case STORE_NOT_FOUND: return "not found";
    case STORE_CONFLICT: return "conflict";
    case STORE_INVALID: return "invalid";
    case STORE_ERROR: return "error";
    }
    return "unknown";
}

/* ---- errors ---- */

store_rc st_fail(store *st, int sqlite_rc, const char *what)
{
    const char *msg = st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(sqlite_rc);
    snprintf(st->err, sizeof st->err, "%s: %s (SQLite code %d)", what, msg, sqlite_rc);
    return (sqlite_rc & 0xff) == SQLITE_CONSTRAINT ? STORE_INVALID : STORE_ERROR;
}

store_rc st_failf(store *st, store_rc rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
    return rc;
}

const char *store_error(const store *st)
{
    return st ? st->err : "no store";
}

/* ---- statements ---- */

sqlite3_stmt *st_stmt(store *st, const char *sql)
{
    for (size_t i = 0; i < st->n_cache; i++)
        if (st->cache[i].sql == sql) {
            sqlite3_stmt *s = st->cache[i].stmt;
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            return s;
        }
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
    if (rc != SQLITE_OK) {
        st_fail(st, rc, "preparing a statement");
        return NULL;
    }
    if (st->n_cache < STORE_STMT_CACHE) {
        st->cache[st->n_cache].sql = sql;
        st->cache[st->n_cache].stmt = s;
        st->n_cache++;
    } else {
        /* The cache is sized for every statement the store has; a full one
         * is a bug in this file, not a user's problem. */
        fprintf(stderr, "lathe store: statement cache full\n");
        abort();
    }
    return s;
}

store_rc st_exec_stmt(store *st, sqlite3_stmt *s, const char *what)
{
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) {
        store_rc r = st_fail(st, rc, what);
        sqlite3_reset(s);
        return r;
    }
    sqlite3_reset(s);
    return STORE_OK;
}

store_rc st_exec(store *st, const char *sql, const char *what)
{
    char *msg = NULL;
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(st->err, sizeof st->err, "%s: %s (SQLite code %d)", what,
                 msg ? msg : sqlite3_errstr(rc), rc);
        sqlite3_free(msg);
        return (rc & 0xff) == SQLITE_CONSTRAINT ? STORE_INVALID : STORE_ERROR;
    }
    return STORE_OK;
}

/* ---- binding and columns ---- */

void st_bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v) sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(s, i);
}

void st_bind_double(sqlite3_stmt *s, int i, double v)
{
    if (isnan(v)) sqlite3_bind_null(s, i);
    else sqlite3_bind_double(s, i, v);
}

void st_bind_time(sqlite3_stmt *s, int i, double v)
{
    if (v == 0) sqlite3_bind_null(s, i);
    else sqlite3_bind_double(s, i, v);
}

void st_bind_int64(sqlite3_stmt *s, int i, int64_t v)
{
    sqlite3_bind_int64(s, i, (sqlite3_int64)v);
}

void st_bind_opt_int(sqlite3_stmt *s, int i, int64_t v, int64_t none)
{
    if (v == none) sqlite3_bind_null(s, i);
    else sqlite3_bind_int64(s, i, (sqlite3_int64)v);
}

char *st_col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? xstrdup((const char *)t) : NULL;
}

double st_col_double(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

double st_col_time(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? 0 : sqlite3_column_double(s, i);
}

int64_t st_col_int(sqlite3_stmt *s, int i, int64_t null_value)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? null_value
                                                    : (int64_t)sqlite3_column_int64(s, i);
}

/* ---- transactions ---- */

/* Transaction control through cached statements (sqlite3_exec would parse
 * them on every call). */
static const char sql_begin[] = "BEGIN IMMEDIATE";
static const char sql_commit[] = "COMMIT";
static const char sql_savepoint[] = "SAVEPOINT op";
static const char sql_release[] = "RELEASE op";

static store_rc run_cached(store *st, const char *sql, const char *what)
{
    sqlite3_stmt *s = st_stmt(st, sql);
    return s ? st_exec_stmt(st, s, what) : STORE_ERROR;
}

/* After a failure SQLite may have rolled the whole transaction back on its
 * own (an I/O error, a full disk). Then the caller's transaction is gone. */
static void note_autorollback(store *st)
{
    if (st->in_tx && sqlite3_get_autocommit(st->db)) st->tx_broken = true;
}

store_rc st_op_begin(store *st)
{
    if (st->op_depth++ > 0) return STORE_OK; /* a call made by another call */
    if (st->in_tx) {
        if (st->tx_broken) {
            st->op_depth--;
            return st_failf(st, STORE_ERROR,
                            "the transaction was rolled back after an earlier error; "
                            "call store_tx_rollback and start again");
        }
        store_rc rc = run_cached(st, sql_savepoint, "starting a savepoint");
        if (rc != STORE_OK) st->op_depth--;
        return rc;
    }
    store_rc rc = run_cached(st, sql_begin, "starting a transaction");
    if (rc != STORE_OK) st->op_depth--;
    return rc;
}

static void rollback_quietly(store *st)
{
    if (!sqlite3_get_autocommit(st->db)) sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

store_rc st_op_end(store *st, store_rc rc)
{
    if (--st->op_depth > 0) return rc;
    if (st->in_tx) {
        if (sqlite3_get_autocommit(st->db)) {
            st->tx_broken = true;
            return rc == STORE_OK ? STORE_ERROR : rc;
        }
        if (rc == STORE_OK) {
            store_rc r = run_cached(st, sql_release, "releasing a savepoint");
            note_autorollback(st);
            return r;
        }
        sqlite3_exec(st->db, "ROLLBACK TO op; RELEASE op", NULL, NULL, NULL);
        note_autorollback(st);
        return rc;
    }
    if (rc != STORE_OK) {
        rollback_quietly(st);
        return rc;
    }
    store_rc r = run_cached(st, sql_commit, "committing");
    if (r != STORE_OK) rollback_quietly(st);
    return r;
}

store_rc store_tx_begin(store *st)
{
    if (st->in_tx) return st_failf(st, STORE_INVALID, "a transaction is already open");
    store_rc rc = st_exec(st, "BEGIN IMMEDIATE", "starting a transaction");
    if (rc != STORE_OK) return rc;
    st->in_tx = true;
    st->tx_broken = false;
    return STORE_OK;
}

store_rc store_tx_commit(store *st)
{
    if (!st->in_tx) return st_failf(st, STORE_INVALID, "no transaction is open");
    st->in_tx = false;
    if (st->tx_broken || sqlite3_get_autocommit(st->db)) {
        st->tx_broken = false;
        return st_failf(st, STORE_ERROR,
                        "the transaction was rolled back after an error; nothing was written");
    }
    store_rc rc = st_exec(st, "COMMIT", "committing");
    if (rc != STORE_OK) rollback_quietly(st);
    return rc;
}

void store_tx_rollback(store *st)
{
    if (!st->in_tx) return;
    st->in_tx = false;
    st->tx_broken = false;
    rollback_quietly(st);
}

/* ---- clock ---- */

static double real_clock(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void store_set_clock(store *st, double (*fn)(void *ctx), void *ctx)
{
    st->clock = fn ? fn : real_clock;
    st->clock_ctx = fn ? ctx : NULL;
}

double store_now(const store *st)
{
    return st->clock(st->clock_ctx);
}

/* ---- open / close ---- */

/* Sets the connection's pragmas. WAL is set before any transaction (it
 * cannot change inside one) and checked: a file system without shared
 * memory support would silently keep a rollback journal. */
static bool set_pragmas(store *st, const store_options *o, char *err, size_t errsz)
{
    sqlite3_busy_timeout(st->db, o && o->busy_timeout_ms > 0 ? o->busy_timeout_ms : 5000);
    if (st_exec(st, "PRAGMA foreign_keys = ON", "enabling foreign keys") != STORE_OK) goto fail;
    if (o && o->read_only) return true;
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        st_fail(st, rc, "setting WAL mode");
        sqlite3_finalize(s);
        goto fail;
    }
    bool wal = str_ieq((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    if (!wal) {
        snprintf(st->err, sizeof st->err,
                 "the database cannot use WAL mode (a file system without shared memory?)");
        goto fail;
    }
    if (st_exec(st, "PRAGMA synchronous = FULL", "setting synchronous=FULL") != STORE_OK)
        goto fail;
    return true;
fail:
    snprintf(err, errsz, "%s: %s", st->path, st->err);
    return false;
}

store *store_open(const char *path, const store_options *opts, char *err, size_t errsz)
{
    store *st = xcalloc(1, sizeof *st);
    st->path = xstrdup(path);
    st->clock = real_clock;
    int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
    flags |= opts && opts->read_only ? SQLITE_OPEN_READONLY
                                     : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(path, &st->db, flags, opts ? opts->vfs : NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, errsz, "cannot open the database %s: %s", path,
                 st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
        store_close(st);
        return NULL;
    }
    if (!set_pragmas(st, opts, err, errsz) || !st_migrate(st, err, errsz)) {
        store_close(st);
        return NULL;
    }
    st->err[0] = '\0';
    return st;
}

void store_close(store *st)
{
    if (!st) return;
    if (st->db) {
        rollback_quietly(st);
        for (size_t i = 0; i < st->n_cache; i++) sqlite3_finalize(st->cache[i].stmt);
        sqlite3_close(st->db);
    }
    free(st->path);
    free(st);
}

/* ---- integrity ---- */

/* Runs a check pragma; its first row is "ok" (integrity) or absent
 * (foreign keys) when the file is sound. */
static store_rc check_pragma(store *st, const char *sql, bool ok_row)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) return st_fail(st, rc, sql);
    rc = sqlite3_step(s);
    store_rc out = STORE_OK;
    if (rc == SQLITE_ROW) {
        const char *first = (const char *)sqlite3_column_text(s, 0);
        if (!ok_row || !first || strcmp(first, "ok") != 0)
            out = st_failf(st, STORE_ERROR, "%s: %s%s", sql, ok_row ? "" : "row in table ",
                           first ? first : "(null)");
    } else if (rc != SQLITE_DONE) {
        out = st_fail(st, rc, sql);
    } else if (ok_row) {
        out = st_failf(st, STORE_ERROR, "%s returned nothing", sql);
    }
    sqlite3_finalize(s);
    return out;
}

store_rc store_check(store *st)
{
    store_rc rc = check_pragma(st, "PRAGMA integrity_check", true);
    if (rc == STORE_OK) rc = check_pragma(st, "PRAGMA foreign_key_check", false);
    return rc;
}

size_t st_thin(void *items, size_t n, size_t size, size_t max)
{
    if (max == 0 || n <= max) return n;
    unsigned char *p = items;
    if (max == 1) {
        memmove(p, p + (n - 1) * size, size);
        return 1;
    }
    for (size_t i = 0; i < max; i++) memmove(p + i * size, p + i * (n - 1) / (max - 1) * size, size);
    return max;
}

void *st_grow(void *items, size_t n, size_t *cap, size_t size)
{
    if (n < *cap) return items;
    *cap = *cap ? *cap * 2 : 64;
    return xrealloc(items, *cap * size);
}
