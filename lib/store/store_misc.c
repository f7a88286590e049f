/* store_misc.c: experiments (name, team, max concurrent jobs) and small
 * named values (the scheduler's decayed usage, budget spent per month). */
#include "store_internal.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

/* ---- experiments ---- */

store_rc store_experiment_put(store *st, const char *team, const char *name, int max_concurrent)
{
    static const char sql[] =
        "INSERT INTO experiments (team, name, max_concurrent, created_at) VALUES (?1, ?2, ?3, ?4)"
        " ON CONFLICT (team, name) DO UPDATE SET max_concurrent = excluded.max_concurrent";
    if (!team || !*team || !name || !*name || max_concurrent < 0)
        return st_failf(st, STORE_INVALID, "an experiment needs a team, a name and a "
                                           "max_concurrent >= 0");
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return st_op_end(st, STORE_ERROR);
    st_bind_text(s, 1, team);
    st_bind_text(s, 2, name);
    st_bind_int64(s, 3, max_concurrent);
    st_bind_double(s, 4, store_now(st));
    return st_op_end(st, st_exec_stmt(st, s, "writing an experiment"));
}

static void experiment_from_row(sqlite3_stmt *s, store_experiment *e)
{
    e->team = st_col_text(s, 0);
    e->name = st_col_text(s, 1);
    e->max_concurrent = (int)st_col_int(s, 2, 0);
    e->created_at = st_col_time(s, 3);
}

store_rc store_experiment_get(store *st, const char *team, const char *name,
                              store_experiment *out)
{
    static const char sql[] = "SELECT team, name, max_concurrent, created_at FROM experiments"
                              " WHERE team = ?1 AND name = ?2";
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_text(s, 1, team);
    st_bind_text(s, 2, name);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) experiment_from_row(s, out);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW) return STORE_OK;
    if (rc == SQLITE_DONE) return st_failf(st, STORE_NOT_FOUND, "no experiment %s/%s", team, name);
    return st_fail(st, rc, "reading an experiment");
}

store_rc store_experiments_list(store *st, const char *team, store_experiment **out, size_t *n)
{
    static const char all_sql[] = "SELECT team, name, max_concurrent, created_at"
                                  " FROM experiments ORDER BY team, name";
    static const char team_sql[] = "SELECT team, name, max_concurrent, created_at"
                                   " FROM experiments WHERE team = ?1 ORDER BY name";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = st_stmt(st, team ? team_sql : all_sql);
    if (!s) return STORE_ERROR;
    if (team) st_bind_text(s, 1, team);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            *out = xrealloc(*out, cap * sizeof **out);
        }
        experiment_from_row(s, &(*out)[(*n)++]);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        store_experiments_free(*out, *n);
        *out = NULL;
        *n = 0;
        return st_fail(st, rc, "listing experiments");
    }
    return STORE_OK;
}

void store_experiment_clear(store_experiment *e)
{
    if (!e) return;
    free(e->team);
    free(e->name);
    memset(e, 0, sizeof *e);
}

void store_experiments_free(store_experiment *list, size_t n)
{
    for (size_t i = 0; i < n; i++) store_experiment_clear(&list[i]);
    free(list);
}

/* ---- named values ---- */

store_rc store_kv_set(store *st, const char *key, const char *value)
{
    static const char sql[] = "INSERT INTO kv (key, value) VALUES (?1, ?2)"
                              " ON CONFLICT (key) DO UPDATE SET value = excluded.value";
    if (!key || !*key || !value) return st_failf(st, STORE_INVALID, "a value needs a key");
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return st_op_end(st, STORE_ERROR);
    st_bind_text(s, 1, key);
    st_bind_text(s, 2, value);
    return st_op_end(st, st_exec_stmt(st, s, "writing a value"));
}

store_rc store_kv_get(store *st, const char *key, char **value)
{
    static const char sql[] = "SELECT value FROM kv WHERE key = ?1";
    *value = NULL;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_text(s, 1, key);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *value = st_col_text(s, 0);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW) return STORE_OK;
    if (rc == SQLITE_DONE) return st_failf(st, STORE_NOT_FOUND, "no value named %s", key);
    return st_fail(st, rc, "reading a value");
}

store_rc store_kv_delete(store *st, const char *key)
{
    static const char sql[] = "DELETE FROM kv WHERE key = ?1";
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return st_op_end(st, STORE_ERROR);
    st_bind_text(s, 1, key);
    rc = st_exec_stmt(st, s, "deleting a value");
    if (rc == STORE_OK && sqlite3_changes(st->db) == 0)
        rc = st_failf(st, STORE_NOT_FOUND, "no value named %s", key);
    return st_op_end(st, rc);
}
