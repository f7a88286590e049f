/* client_api.c: one function per call of the HTTP API v1 (docs/api.md):
 * jobs (get, list with filters and pages, cancel, delete, events, progress,
 * logs), experiments, nodes, teams, priority classes, health and metrics.
 * Each builds its path and query, and hands the request to client_http.c.
 */
#include "client_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Appends s to b percent-encoded (RFC 3986: unreserved characters stay). */
static void put_escaped(sb *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            sb_putc(b, (char)*p);
        } else {
            sb_putc(b, '%');
            sb_putc(b, hex[*p >> 4]);
            sb_putc(b, hex[*p & 15]);
        }
    }
}

/* Appends "?key=value" or "&key=value" (value escaped) when value is set. */
static void put_query(sb *b, const char *key, const char *value)
{
    if (!value || !*value) return;
    sb_putc(b, strchr(sb_str(b), '?') ? '&' : '?');
    sb_puts(b, key);
    sb_putc(b, '=');
    put_escaped(b, value);
}

/* "/v1/jobs/NAME" + suffix + "?team=T". Caller frees. */
static char *job_path(const char *name, const char *suffix, const char *team)
{
    sb b;
    sb_init(&b);
    sb_puts(&b, "/v1/jobs/");
    put_escaped(&b, name);
    sb_puts(&b, suffix);
    put_query(&b, "team", team);
    return sb_take(&b);
}

/* GET of a JSON object at path. */
static int get_json(client *c, const char *path, const char *what, json_t **out,
                    client_error *err)
{
    return client_call_json(c, "GET", path, NULL, NULL, 0, what, NULL, out, err);
}

/* A call on one job: method, suffix after /v1/jobs/NAME. */
static int job_call(client *c, const char *method, const char *name, const char *suffix,
                    const char *team, const char *query, json_t **out, client_error *err)
{
    char *path = job_path(name, suffix, team);
    if (query) {
        char *with = xasprintf("%s%c%s", path, strchr(path, '?') ? '&' : '?', query);
        free(path);
        path = with;
    }
    char *what = xasprintf("job %s", name);
    int rc = client_call_json(c, method, path, NULL, NULL, 0, what, NULL, out, err);
    free(what);
    free(path);
    return rc;
}

int client_job_get(client *c, const char *name, const char *team, json_t **out,
                   client_error *err)
{
    return job_call(c, "GET", name, "", team, NULL, out, err);
}

int client_job_cancel(client *c, const char *name, const char *team, json_t **out,
                      client_error *err)
{
    return job_call(c, "POST", name, "/cancel", team, NULL, out, err);
}

int client_job_delete(client *c, const char *name, const char *team, bool purge,
                      client_error *err)
{
    return job_call(c, "DELETE", name, "", team, purge ? "purge=1" : NULL, NULL, err);
}

int client_job_events(client *c, const char *name, const char *team, json_t **out,
                      client_error *err)
{
    return job_call(c, "GET", name, "/events", team, NULL, out, err);
}

int client_job_progress(client *c, const char *name, const char *team, int limit, json_t **out,
                        client_error *err)
{
    char suffix[48];
    if (limit > 0) snprintf(suffix, sizeof suffix, "/progress?limit=%d", limit);
    else snprintf(suffix, sizeof suffix, "/progress");
    char *path = job_path(name, suffix, NULL);
    sb b;
    sb_init(&b);
    sb_puts(&b, path);
    put_query(&b, "team", team);
    char *what = xasprintf("job %s", name);
    int rc = get_json(c, sb_str(&b), what, out, err);
    free(what);
    sb_free(&b);
    free(path);
    return rc;
}

int client_jobs_list(client *c, const client_job_filter *f, json_t **out, client_error *err)
{
    sb b;
    sb_init(&b);
    sb_puts(&b, "/v1/jobs");
    put_query(&b, "team", f->team);
    put_query(&b, "state", f->states);
    put_query(&b, "experiment", f->experiment);
    if (f->limit > 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", f->limit);
        put_query(&b, "limit", n);
    }
    put_query(&b, "page_token", f->page_token);
    int rc = get_json(c, sb_str(&b), NULL, out, err);
    sb_free(&b);
    if (!rc && !json_is_array(json_object_get(*out, "items"))) {
        json_decref(*out);
        *out = NULL;
        client_error_set(err, LT_EXIT_UNAVAILABLE, "protocol",
                         "%s answered GET /v1/jobs without an \"items\" list",
                         client_server(c));
        rc = err->exit_code;
    }
    return rc;
}

int client_jobs_list_all(client *c, const client_job_filter *f, size_t max, json_t **items,
                         client_error *err)
{
    client_job_filter page = *f;
    if (page.limit <= 0) page.limit = 1000;
    if (max > 0 && (size_t)page.limit > max) page.limit = (int)max;
    *items = json_array();
    char *token = NULL;
    int rc = LT_EXIT_OK;
    for (;;) {
        json_t *ans = NULL;
        page.page_token = token;
        rc = client_jobs_list(c, &page, &ans, err);
        free(token);
        token = NULL;
        if (rc) break;
        json_array_extend(*items, json_object_get(ans, "items"));
        const char *next = json_string_value(json_object_get(ans, "next_page_token"));
        if (next && *next) token = xstrdup(next);
        json_decref(ans);
        if (!token || (max > 0 && json_array_size(*items) >= max)) break;
    }
    free(token);
    while (max > 0 && json_array_size(*items) > max)
        json_array_remove(*items, json_array_size(*items) - 1);
    if (rc) {
        json_decref(*items);
        *items = NULL;
    }
    return rc;
}

int client_job_logs(client *c, const char *name, const char *team, const client_logs_opts *o,
                    client_write_fn fn, void *ctx, client_error *err)
{
    char *base = job_path(name, "/logs", NULL);
    sb b;
    sb_init(&b);
    sb_puts(&b, base);
    char n[24];
    if (o->attempt > 0) {
        snprintf(n, sizeof n, "%d", o->attempt);
        put_query(&b, "attempt", n);
    }
    if (o->tail >= 0) {
        snprintf(n, sizeof n, "%ld", o->tail);
        put_query(&b, "tail", n);
    }
    if (o->follow) put_query(&b, "follow", "1");
    put_query(&b, "team", team);
    char *what = xasprintf("job %s", name);
    int rc = client_stream_get(c, sb_str(&b), o->follow, what, fn, ctx, err);
    free(what);
    sb_free(&b);
    free(base);
    return rc;
}

/* A list at path with an optional team filter. */
static int list_call(client *c, const char *path, const char *team, json_t **out,
                     client_error *err)
{
    sb b;
    sb_init(&b);
    sb_puts(&b, path);
    put_query(&b, "team", team);
    int rc = get_json(c, sb_str(&b), NULL, out, err);
    sb_free(&b);
    return rc;
}

int client_experiments_list(client *c, const char *team, json_t **out, client_error *err)
{
    return list_call(c, "/v1/experiments", team, out, err);
}

int client_experiment_get(client *c, const char *name, const char *team, json_t **out,
                          client_error *err)
{
    sb b;
    sb_init(&b);
    sb_puts(&b, "/v1/experiments/");
    put_escaped(&b, name);
    put_query(&b, "team", team);
    char *what = xasprintf("experiment %s", name);
    int rc = get_json(c, sb_str(&b), what, out, err);
    free(what);
    sb_free(&b);
    return rc;
}

int client_nodes_list(client *c, json_t **out, client_error *err)
{
    return list_call(c, "/v1/nodes", NULL, out, err);
}

int client_audit_list(client *c, const char *since, int limit, const char *team, json_t **out,
                      client_error *err)
{
    sb b;
    sb_init(&b);
    sb_puts(&b, "/v1/audit");
    put_query(&b, "since", since);
    if (limit > 0) {
        char n[24];
        snprintf(n, sizeof n, "%d", limit);
        put_query(&b, "limit", n);
    }
    put_query(&b, "team", team);
    int rc = get_json(c, sb_str(&b), "the audit log", out, err);
    sb_free(&b);
    return rc;
}

int client_cost(client *c, const char *by, const char *since, const char *until,
                const char *step, const char *team, json_t **out, client_error *err)
{
    sb b;
    sb_init(&b);
    sb_puts(&b, "/v1/cost");
    put_query(&b, "by", by);
    put_query(&b, "since", since);
    put_query(&b, "until", until);
    put_query(&b, "step", step);
    put_query(&b, "team", team);
    int rc = get_json(c, sb_str(&b), "the cost report", out, err);
    sb_free(&b);
    return rc;
}

int client_teams_list(client *c, json_t **out, client_error *err)
{
    return list_call(c, "/v1/teams", NULL, out, err);
}

int client_priority_classes_list(client *c, json_t **out, client_error *err)
{
    return list_call(c, "/v1/priorityclasses", NULL, out, err);
}

int client_healthz(client *c, client_error *err)
{
    sb b;
    sb_init(&b);
    long st = 0;
    int rc = client_request(c, "GET", "/healthz", NULL, NULL, 0, &st, &b, err);
    sb_free(&b);
    if (!rc && st != 200) {
        client_error_set(err, LT_EXIT_UNAVAILABLE, "unavailable",
                         "%s/healthz answered %ld, not 200", client_server(c), st);
        err->status = st;
        rc = err->exit_code;
    }
    return rc;
}

int client_metrics(client *c, sb *out, client_error *err)
{
    long st = 0;
    int rc = client_request(c, "GET", "/metrics", NULL, NULL, 0, &st, out, err);
    if (!rc && st != 200) {
        client_error_set(err, LT_EXIT_UNAVAILABLE, "unavailable",
                         "%s/metrics answered %ld, not 200", client_server(c), st);
        err->status = st;
        rc = err->exit_code;
    }
    return rc;
}
