/* srv_audit.c: the audit log of the API. Every request that is not a GET
 * leaves a row (srv_http.c calls srv_audit_write once its handler replied,
 * before the reply is sent): who (the token's name), its team, from where
 * (the client's address and port), what (method, path, the job or
 * experiment it named), the status and a short detail of the answer, so
 * refused attempts (401 unknown or expired token, 403 scope, 429 rate) are
 * on record beside the changes. Token reloads (SIGHUP) leave one too.
 * GET /v1/audit serves the rows to admin tokens, newest first. */
#include "srv_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static store_rc append_fn(store *st, void *arg)
{
    return store_audit_append(st, arg);
}

store_rc srv_audit_write(srv_req *r, const store_audit *a)
{
    return srv_write(r, append_fn, (void *)a);
}

void srv_audit_server(srv *s, const store_audit *a)
{
    char err[512];
    if (!srv_active(s, err, sizeof err)) return; /* a standby replica has no store */
    store *st = srv_pool_get(&s->pool, err, sizeof err);
    if (!st) {
        srv_log(s, "audit: the store cannot be opened: %s", err);
        return;
    }
    store_rc rc = store_batcher_write(s->writes, st, append_fn, (void *)a);
    if (rc != STORE_OK) srv_log(s, "audit: cannot write the audit row: %s", store_error(st));
    srv_pool_put(&s->pool, st);
}

void srv_audit_describe(const json_t *body, char *target, size_t targetsz, char *detail,
                        size_t detailsz)
{
    const json_t *err = json_object_get(body, "error");
    if (err) {
        const char *m = json_string_value(json_object_get(err, "message"));
        snprintf(detail, detailsz, "%s", m ? m : "error");
        return;
    }
    const json_t *exp = json_object_get(body, "experiment");
    const json_t *jobs = json_object_get(body, "jobs");
    if (json_is_object(exp) && json_is_array(jobs)) {
        const char *name = json_string_value(json_object_get(exp, "name"));
        if (name) snprintf(target, targetsz, "%s", name);
        sb out;
        sb_init(&out);
        sb_puts(&out, json_array_size(jobs) == 1 ? "job" : "jobs");
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            const char *jn = json_string_value(json_object_get(json_array_get(jobs, i), "name"));
            sb_printf(&out, "%s %s", i ? "," : "", jn ? jn : "?");
        }
        snprintf(detail, detailsz, "%s", sb_str(&out));
        sb_free(&out);
        return;
    }
    const char *name = json_string_value(json_object_get(body, "name"));
    const char *state = json_string_value(json_object_get(body, "state"));
    if (name && state) { /* a job */
        snprintf(target, targetsz, "%s", name);
        snprintf(detail, detailsz, "job %s %s", name, state);
    }
}

void srv_api_audit(srv_req *r)
{
    const srv_token *t = srv_req_token(r);
    if (!t->admin) {
        srv_reply_error(r, 403, "forbidden",
                        "the audit log is for admin tokens; the token %s acts for team %s",
                        srv_req_who(r), t->team ? t->team : "?");
        return;
    }
    store_audit_filter f = {.limit = 100, .team = srv_req_query(r, "team")};
    if (f.team && !*f.team) f.team = NULL;
    const char *since = srv_req_query(r, "since");
    if (since && *since && !srv_parse_time(since, &f.since)) {
        srv_reply_error(r, 400, "bad_request",
                        "since=%s: expected a time such as 2026-12-02T04:00:00Z or seconds "
                        "since the epoch",
                        since);
        return;
    }
    const char *limit = srv_req_query(r, "limit");
    if (limit && *limit) {
        char *end;
        long v = strtol(limit, &end, 10);
        if (*end || v < 1 || v > 10000) {
            srv_reply_error(r, 400, "bad_request", "limit=%s: expected a number from 1 to 10000",
                            limit);
            return;
        }
        f.limit = (size_t)v;
    }
    store_audit *rows;
    size_t n;
    if (store_audit_list(srv_req_store(r), &f, &rows, &n) != STORE_OK) {
        srv_reply_store_error(r, "reading the audit log");
        return;
    }
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++) {
        const store_audit *a = &rows[i];
        json_array_append_new(
            items, json_pack("{s:I, s:o, s:s, s:o, s:o, s:s, s:s, s:o, s:i, s:o}", "id",
                             (json_int_t)a->id, "time", srv_json_time(a->at), "actor", a->actor,
                             "team", srv_json_str(a->team), "address", srv_json_str(a->address),
                             "method", a->method, "path", a->path ? a->path : "", "target",
                             srv_json_str(a->target), "status", a->status, "detail",
                             srv_json_str(a->detail)));
    }
    store_audit_free(rows, n);
    srv_reply_json(r, 200, json_pack("{s:o}", "items", items));
}
