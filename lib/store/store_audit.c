/* store_audit.c: the audit log, an append-only table of every change
 * asked of the API (refused ones included) and every token reload. The
 * server appends a row inside the same group-commit transaction as the
 * change itself when there is one (srv_write), so an acknowledged change
 * always has its row; rows are read newest first for GET /v1/audit and
 * `lathe audit`. */
#include "store_internal.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

store_rc store_audit_append(store *st, const store_audit *a)
{
    static const char sql[] =
        "INSERT INTO audit (at, actor, team, address, method, path, target, status, detail)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
    if (!a || !a->actor || !*a->actor || !a->method || !*a->method)
        return st_failf(st, STORE_INVALID, "an audit row needs an actor and a method");
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return st_op_end(st, STORE_ERROR);
    st_bind_double(s, 1, a->at > 0 ? a->at : store_now(st));
    st_bind_text(s, 2, a->actor);
    st_bind_text(s, 3, a->team);
    st_bind_text(s, 4, a->address);
    st_bind_text(s, 5, a->method);
    st_bind_text(s, 6, a->path ? a->path : "");
    st_bind_text(s, 7, a->target);
    st_bind_int64(s, 8, a->status);
    st_bind_text(s, 9, a->detail);
    return st_op_end(st, st_exec_stmt(st, s, "writing an audit row"));
}

store_rc store_audit_list(store *st, const store_audit_filter *f, store_audit **out, size_t *n)
{
    /* ?2 IS NULL: one statement for both forms (the cache keys on the text) */
    static const char sql[] =
        "SELECT id, at, actor, team, address, method, path, target, status, detail FROM audit"
        " WHERE at >= ?1 AND (?2 IS NULL OR team = ?2) ORDER BY id DESC LIMIT ?3";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_double(s, 1, f && f->since > 0 ? f->since : 0);
    st_bind_text(s, 2, f ? f->team : NULL);
    st_bind_int64(s, 3, f && f->limit ? (int64_t)f->limit : 100);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            *out = xrealloc(*out, cap * sizeof **out);
        }
        store_audit *a = &(*out)[(*n)++];
        a->id = st_col_int(s, 0, 0);
        a->at = st_col_time(s, 1);
        a->actor = st_col_text(s, 2);
        a->team = st_col_text(s, 3);
        a->address = st_col_text(s, 4);
        a->method = st_col_text(s, 5);
        a->path = st_col_text(s, 6);
        a->target = st_col_text(s, 7);
        a->status = (int)st_col_int(s, 8, 0);
        a->detail = st_col_text(s, 9);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        store_audit_free(*out, *n);
        *out = NULL;
        *n = 0;
        return st_fail(st, rc, "listing the audit log");
    }
    return STORE_OK;
}

void store_audit_clear(store_audit *a)
{
    if (!a) return;
    free(a->actor);
    free(a->team);
    free(a->address);
    free(a->method);
    free(a->path);
    free(a->target);
    free(a->detail);
    memset(a, 0, sizeof *a);
}

void store_audit_free(store_audit *list, size_t n)
{
    for (size_t i = 0; i < n; i++) store_audit_clear(&list[i]);
    free(list);
}
