/* srv_http.c: the HTTP layer on libmicrohttpd. One thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION, bounded by limits.maxConnections), so a
 * handler may block on the store or stream a log without holding up other
 * clients. It owns:
 *
 *   - the request record: method, URL, body (accumulated up to
 *     limits.maxBodySize; a larger body is read and dropped, then refused
 *     with 413), the bearer token, a store handle from the pool;
 *   - routing: the paths of docs/api.md to the handlers of srv_api.c,
 *     srv_submit.c, srv_logs.c, srv_audit.c and srv_metrics.c, with 401
 *     for /v1/ without a known token (or with an expired one), 403 for a
 *     read-only token asking for a change, 429 over the token's rate
 *     limit, 404 for unknown paths, 405 for a known path with another
 *     method, 414 for URLs over 4 KiB, 503 while shutting down;
 *   - the audit row of every request that is not a GET (srv_audit.c),
 *     written once its handler replied and before the reply is sent;
 *   - replies: JSON, text, empty, streamed, and the error object;
 *   - the web console's files (lib/console) at / and beside it, with the
 *     headers that keep its pages to this server (CSP, no framing);
 *   - the request counters behind lathe_http_requests_total;
 *   - TLS (tls.certFile / keyFile) through libmicrohttpd's GnuTLS.
 */
#include "srv_internal.h"

#include "console/console.h"

#include <errno.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SRV_MAX_URL 4096

struct srv_req {
    srv *s;
    struct MHD_Connection *conn;
    const char *method, *url;
    sb body;
    bool too_large;
    const srv_token *token;
    srv_tokens *tokens; /* the table token points into, referenced until the end */
    store *st;
    char actor[96];
    char who[128];      /* the audit log's actor */
    char address[80];   /* the client's IP:PORT */
    char target[256];   /* the job or experiment the request named */
    char detail[256];   /* what the reply said, in short */
    int status;
    struct MHD_Response *resp;
};

/* ---- what handlers read ---- */
const char *srv_req_method(const srv_req *r)
{
    return r->method;
}

const char *srv_req_query(const srv_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

typedef struct query_join {
    const char *key;
    sb *out;
} query_join;

static enum MHD_Result join_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    query_join *q = cls;
    (void)kind;
    if (key && value && strcmp(key, q->key) == 0) {
        if (q->out->len) sb_putc(q->out, ',');
        sb_puts(q->out, value);
    }
    return MHD_YES;
}

char *srv_req_query_all(const srv_req *r, const char *key)
{
    sb out;
    sb_init(&out);
    query_join q = {key, &out};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, join_value, &q);
    if (!out.len) {
        sb_free(&out);
        return srv_req_query(r, key) ? xstrdup("") : NULL;
    }
    return sb_take(&out);
}

const char *srv_req_header(const srv_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

const char *srv_req_body(const srv_req *r, size_t *len)
{
    if (len) *len = r->body.len;
    return sb_str(&r->body);
}

const srv_token *srv_req_token(const srv_req *r)
{
    return r->token;
}

srv *srv_req_server(srv_req *r)
{
    return r->s;
}

store *srv_req_store(srv_req *r)
{
    return r->st;
}

store_rc srv_write(srv_req *r, store_write_fn fn, void *arg)
{
    return store_batcher_write(r->s->writes, r->st, fn, arg);
}

void srv_req_no_timeout(srv_req *r)
{
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
}

const char *srv_req_actor(const srv_req *r)
{
    return r->actor;
}

const char *srv_req_address(const srv_req *r)
{
    return r->address;
}

const char *srv_req_who(const srv_req *r)
{
    return r->who;
}

static bool is(const srv_req *r, const char *m);

bool srv_req_need_scope(srv_req *r, srv_scope need, const char *what)
{
    if (r->token && r->token->scope >= need) return true;
    srv_reply_error(r, 403, "forbidden",
                    "the token %s has scope %s; %s needs a token of scope %s%s", r->who,
                    r->token ? srv_scope_name(r->token->scope) : "none", what,
                    srv_scope_name(need),
                    need == SRV_SCOPE_ADMIN ? "" : " (or admin)");
    snprintf(r->detail, sizeof r->detail, "scope %s, needs %s",
             r->token ? srv_scope_name(r->token->scope) : "none", srv_scope_name(need));
    return false;
}

const char *srv_req_team(const srv_req *r)
{
    if (!r->token) return NULL;
    if (!r->token->admin) return r->token->team;
    const char *t = srv_req_query(r, "team");
    return t && *t ? t : NULL;
}

/* ---- replies ---- */
static void set_response(srv_req *r, int status, struct MHD_Response *resp)
{
    if (r->resp) MHD_destroy_response(r->resp);
    r->resp = resp;
    r->status = status;
}

void srv_reply_text(srv_req *r, int status, const char *content_type, char *text)
{
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    set_response(r, status, resp);
}

void srv_reply_json(srv_req *r, int status, json_t *body)
{
    if (!is(r, "GET") && !is(r, "HEAD") && !r->detail[0])
        srv_audit_describe(body, r->target, sizeof r->target, r->detail, sizeof r->detail);
    char *text = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(body);
    /* jansson's buffer is malloc'd: MHD frees it with free() */
    size_t len = text ? strlen(text) : 0;
    char *buf = xmalloc(len + 2);
    memcpy(buf, text ? text : "", len);
    buf[len] = '\n';
    buf[len + 1] = '\0';
    free(text);
    srv_reply_text(r, status, "application/json", buf);
}

void srv_reply_empty(srv_req *r, int status)
{
    set_response(r, status, MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

static json_t *error_object(const char *code, const char *message)
{
    return json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);
}

void srv_reply_error(srv_req *r, int status, const char *code, const char *fmt, ...)
{
    sb msg;
    sb_init(&msg);
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&msg, fmt, ap);
    va_end(ap);
    srv_reply_json(r, status, error_object(code, sb_str(&msg)));
    sb_free(&msg);
}

void srv_reply_diags(srv_req *r, int status, const char *code, const char *message,
                     const diag_list *d)
{
    json_t *body = error_object(code, message);
    json_t *list = json_array();
    for (size_t i = 0; d && i < d->len; i++) json_array_append_new(list, srv_json_diag(&d->items[i]));
    json_object_set_new(json_object_get(body, "error"), "diagnostics", list);
    srv_reply_json(r, status, body);
}

void srv_reply_store_error(srv_req *r, const char *what)
{
    srv_reply_error(r, 500, "internal", "%s: %s", what, r->st ? store_error(r->st) : "no store");
}

typedef struct stream_ctx {
    long (*read)(void *cls, uint64_t pos, char *buf, size_t max);
    void (*done)(void *cls);
    void *cls;
} stream_ctx;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_ctx *c = cls;
    long n = c->read(c->cls, pos, buf, max);
    return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static void stream_free(void *cls)
{
    stream_ctx *c = cls;
    if (c->done) c->done(c->cls);
    free(c);
}

void srv_reply_stream(srv_req *r, int status, const char *content_type,
                      long (*read)(void *cls, uint64_t pos, char *buf, size_t max), void *cls,
                      void (*done)(void *cls))
{
    stream_ctx *c = xmalloc(sizeof *c);
    *c = (stream_ctx){read, done, cls};
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, c, stream_free);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    set_response(r, status, resp);
}

/* ---- the web console's files ---- */

/* What every page of the console is served with: its scripts, styles and
 * API calls come from this server only (no inline script, nothing from
 * elsewhere), it is never framed, and no Referer leaves it. The token is
 * in the page's sessionStorage and goes in an Authorization header, never
 * a cookie: no request can carry it without the page's own script. */
static void console_headers(struct MHD_Response *resp, const console_asset *a)
{
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_SECURITY_POLICY,
                            "default-src 'none'; script-src 'self'; style-src 'self'; "
                            "img-src 'self' data:; connect-src 'self'; font-src 'self'; "
                            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, a->etag);
}

static void reply_asset(srv_req *r, const console_asset *a)
{
    const char *inm = srv_req_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    bool same = inm && strstr(inm, a->etag);
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        same ? 0 : a->len, same ? (void *)"" : (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!same) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    console_headers(resp, a);
    set_response(r, same ? 304 : 200, resp);
}

/* ---- routing ---- */

/* Splits "/v1/jobs/NAME/cancel" after "/v1/" into at most 4 segments. */
static size_t split_path(const char *path, char seg[4][256])
{
    size_t n = 0;
    while (*path && n < 4) {
        while (*path == '/') path++;
        if (!*path) break;
        size_t len = strcspn(path, "/");
        if (len >= 256) return 0;
        memcpy(seg[n], path, len);
        seg[n++][len] = '\0';
        path += len;
    }
    while (*path == '/') path++;
    return *path ? 0 : n;
}

static void not_allowed(srv_req *r, const char *allow)
{
    srv_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s (allowed: %s)",
                    r->method, r->url, allow);
    MHD_add_response_header(r->resp, MHD_HTTP_HEADER_ALLOW, allow);
}

static bool is(const srv_req *r, const char *m)
{
    return r->method && strcmp(r->method, m) == 0;
}

/* Operator mode: jobs are objects of the Kubernetes API, the store a
 * cache of them, so a change written here would be lost at the next
 * rebuild. True (after replying 409) for the writes that go through
 * kubectl instead. */
static bool operator_write(srv_req *r, const char *what, const char *how)
{
    if (!r->s->op) return false;
    srv_reply_error(r, 409, "operator_mode",
                    "this server is in operator mode: jobs live in the Kubernetes API, so %s "
                    "with kubectl (%s)",
                    what, how);
    return true;
}

/* /v1/jobs/NAME[/ACTION] */
static void route_job(srv_req *r, const char *name, const char *action)
{
    if (!action) {
        if (is(r, "GET")) srv_api_job_get(r, name);
        else if (is(r, "DELETE")) {
            if (!operator_write(r, "delete its object", "kubectl delete lorajob NAME -n NAMESPACE"))
                srv_api_job_delete(r, name);
        } else not_allowed(r, "GET, DELETE");
        return;
    }
    if (strcmp(action, "cancel") == 0) {
        if (!is(r, "POST")) not_allowed(r, "POST");
        else if (!operator_write(r, "cancel it by deleting its object",
                                 "kubectl delete lorajob NAME -n NAMESPACE"))
            srv_api_job_cancel(r, name);
        return;
    }
    static const char *const reads[] = {"events", "logs", "progress", "attempts", "gpu"};
    void (*const fns[])(srv_req *, const char *) = {srv_api_job_events, srv_api_job_logs,
                                                     srv_api_job_progress, srv_api_job_attempts,
                                                     srv_api_job_gpu};
    for (size_t i = 0; i < sizeof reads / sizeof *reads; i++) {
        if (strcmp(action, reads[i]) != 0) continue;
        if (is(r, "GET")) fns[i](r, name);
        else not_allowed(r, "GET");
        return;
    }
    srv_reply_error(r, 404, "not_found", "no such path: %s", r->url);
}

/* A GET-only collection. */
static void route_get(srv_req *r, void (*fn)(srv_req *))
{
    if (is(r, "GET")) fn(r);
    else not_allowed(r, "GET");
}

static void route_v1(srv_req *r)
{
    char seg[4][256];
    size_t n = split_path(r->url + 4, seg);
    if (n == 0) {
        srv_reply_error(r, 404, "not_found", "no such path: %s", r->url);
    } else if (strcmp(seg[0], "jobs") == 0 && n == 1) {
        if (is(r, "GET")) srv_api_jobs_list(r);
        else if (is(r, "POST")) {
            if (!operator_write(r, "submit it as an object", "kubectl apply -f FILE -n NAMESPACE"))
                srv_api_submit(r);
        }
        else not_allowed(r, "GET, POST");
    } else if (strcmp(seg[0], "jobs") == 0 && n <= 3) {
        route_job(r, seg[1], n == 3 ? seg[2] : NULL);
    } else if (strcmp(seg[0], "experiments") == 0 && n <= 2) {
        if (is(r, "GET")) srv_api_experiments(r, n == 2 ? seg[1] : NULL);
        else not_allowed(r, "GET");
    } else if (strcmp(seg[0], "nodes") == 0 && n == 1) {
        route_get(r, srv_api_nodes);
    } else if (strcmp(seg[0], "teams") == 0 && n == 1) {
        route_get(r, srv_api_teams);
    } else if (strcmp(seg[0], "priorityclasses") == 0 && n == 1) {
        route_get(r, srv_api_priority_classes);
    } else if (strcmp(seg[0], "audit") == 0 && n == 1) {
        route_get(r, srv_api_audit);
    } else if (strcmp(seg[0], "cost") == 0 && n == 1) {
        route_get(r, srv_api_cost);
    } else if (strcmp(seg[0], "whoami") == 0 && n == 1) {
        route_get(r, srv_api_whoami);
    } else {
        srv_reply_error(r, 404, "not_found", "no such path: %s", r->url);
    }
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One request from key's bucket; false after replying 429. */
static bool rate_ok(srv_req *r, const unsigned char key[32], const char *label)
{
    int retry = 0;
    if (srv_ratelimit_take(&r->s->ratelimit, key, label, mono_now(), &retry)) return true;
    srv_reply_error(r, 429, "rate_limited",
                    "too many requests for %s: the limit is %g per second (burst %g); retry in "
                    "%d s",
                    label, r->s->ratelimit.rate, r->s->ratelimit.burst, retry);
    char v[16];
    snprintf(v, sizeof v, "%d", retry);
    MHD_add_response_header(r->resp, MHD_HTTP_HEADER_RETRY_AFTER, v);
    snprintf(r->detail, sizeof r->detail, "rate limited (retry after %d s)", retry);
    return false;
}

/* The bucket key of a request without a known token: its client's IP
 * (not the port: a new connection is a new port). */
static void address_key(const srv_req *r, unsigned char key[32])
{
    char ip[96];
    snprintf(ip, sizeof ip, "address %s", r->address);
    char *colon = strrchr(ip, ':');
    if (colon) *colon = '\0';
    srv_sha256(ip, strlen(ip), key);
}

static void format_utc(double t, char *out, size_t outsz)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, outsz, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Checks the token (known, not expired, within its rate, of a scope that
 * may do this) and takes a store handle; false after replying. */
static bool v1_prepare(srv_req *r)
{
    const char *auth = srv_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    r->tokens = srv_token_table_get(&r->s->tokens);
    const srv_token *t = NULL;
    srv_auth_result ar = srv_auth_check(r->tokens, auth, real_now(), &t);
    if (ar != SRV_AUTH_OK) {
        unsigned char key[32];
        address_key(r, key);
        if (ar == SRV_AUTH_EXPIRED) {
            if (t->name) snprintf(r->who, sizeof r->who, "%s", t->name);
            else if (t->admin) snprintf(r->who, sizeof r->who, "admin");
            else snprintf(r->who, sizeof r->who, "user:%s", t->team);
        } else {
            snprintf(r->who, sizeof r->who, "%s", ar == SRV_AUTH_NONE ? "anonymous" : "unknown");
        }
        if (!rate_ok(r, key, ar == SRV_AUTH_EXPIRED ? r->who : "unknown")) return false;
        if (ar == SRV_AUTH_EXPIRED) {
            char when[32];
            format_utc(t->expires_at, when, sizeof when);
            srv_reply_error(r, 401, "unauthenticated",
                            "the token %s expired at %s: ask for a new one (or an operator "
                            "to extend its expires in the tokens list and send SIGHUP)",
                            r->who, when);
            snprintf(r->detail, sizeof r->detail, "token expired at %s", when);
        } else {
            srv_reply_error(r, 401, "unauthenticated",
                            ar == SRV_AUTH_UNKNOWN ? "the token is not known to this server"
                                                   : "no token: send `Authorization: Bearer TOKEN`");
            snprintf(r->detail, sizeof r->detail, "%s",
                     ar == SRV_AUTH_UNKNOWN ? "unknown token" : "no token");
        }
        MHD_add_response_header(r->resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        return false;
    }
    r->token = t;
    if (r->token->admin) snprintf(r->actor, sizeof r->actor, "admin");
    else snprintf(r->actor, sizeof r->actor, "user:%s", r->token->team);
    snprintf(r->who, sizeof r->who, "%s", t->name ? t->name : r->actor);
    if (!rate_ok(r, t->hash, r->who)) return false;
    if (!is(r, "GET") && !is(r, "HEAD")) {
        char what[160];
        snprintf(what, sizeof what, "%s %.100s", r->method, r->url);
        if (!srv_req_need_scope(r, SRV_SCOPE_SUBMIT, what)) return false;
    }
    if (atomic_load(&r->s->stopping)) {
        srv_reply_error(r, 503, "unavailable", "the server is shutting down");
        return false;
    }
    char err[512];
    if (!srv_active(r->s, err, sizeof err)) {
        srv_reply_error(r, 503, "unavailable", "%s", err);
        return false;
    }
    r->st = srv_pool_get(&r->s->pool, err, sizeof err);
    if (!r->st) {
        srv_reply_error(r, 503, "unavailable", "the store cannot be opened: %s", err);
        return false;
    }
    return true;
}

/* The job or experiment a /v1/ path names: /v1/jobs/NAME[/...],
 * /v1/experiments/NAME. */
static void path_target(srv_req *r)
{
    char seg[4][256];
    size_t n = str_starts_with(r->url, "/v1/") ? split_path(r->url + 4, seg) : 0;
    if (n >= 2 && (strcmp(seg[0], "jobs") == 0 || strcmp(seg[0], "experiments") == 0))
        snprintf(r->target, sizeof r->target, "%s", seg[1]);
}

/* Every request that is not a GET (or HEAD) leaves an audit row, through
 * the HTTP write path, before its reply is queued: a change the client
 * hears of is on record. */
static void audit(srv_req *r)
{
    if (is(r, "GET") || is(r, "HEAD")) return;
    char err[512];
    if (!r->st) {
        if (!srv_active(r->s, err, sizeof err)) return; /* standby replica: no store */
        r->st = srv_pool_get(&r->s->pool, err, sizeof err);
        if (!r->st) {
            srv_log(r->s, "audit: %s %s: the store cannot be opened: %s", r->method, r->url, err);
            return;
        }
    }
    if (!r->who[0]) snprintf(r->who, sizeof r->who, "anonymous");
    if (!r->target[0]) path_target(r);
    const char *team = NULL;
    if (r->token) team = r->token->admin ? srv_req_team(r) : r->token->team;
    char path[512];
    snprintf(path, sizeof path, "%s", r->url);
    store_audit a = {.actor = r->who, .team = (char *)team, .address = r->address,
                     .method = (char *)r->method, .path = path,
                     .target = r->target[0] ? r->target : NULL, .status = r->status,
                     .detail = r->detail[0] ? r->detail : NULL};
    if (srv_audit_write(r, &a) != STORE_OK)
        srv_log(r->s, "audit: %s %s (%d): cannot write the audit row: %s", r->method, r->url,
                r->status, store_error(r->st));
}

static void dispatch(srv_req *r)
{
    if (strlen(r->url) > SRV_MAX_URL) {
        srv_reply_error(r, 414, "too_large", "the URL is longer than %d bytes", SRV_MAX_URL);
    } else if (r->too_large) {
        srv_reply_error(r, 413, "too_large", "the request body is larger than %.0f bytes",
                        r->s->cfg.spec->limits.max_body);
    } else if (strcmp(r->url, "/healthz") == 0) {
        route_get(r, srv_api_healthz);
    } else if (strcmp(r->url, "/readyz") == 0) {
        route_get(r, srv_api_readyz);
    } else if (strcmp(r->url, "/metrics") == 0) {
        if (!is(r, "GET")) {
            not_allowed(r, "GET");
        } else {
            char err[512];
            r->st = srv_active(r->s, err, sizeof err) ? srv_pool_get(&r->s->pool, err, sizeof err)
                                                      : NULL;
            if (r->st) srv_api_metrics(r);
            else srv_reply_error(r, 503, "unavailable", "the store cannot be opened: %s", err);
        }
    } else if (str_starts_with(r->url, "/v1/")) {
        if (v1_prepare(r)) route_v1(r);
    } else if (console_find(r->url)) {
        if (is(r, "GET") || is(r, "HEAD")) reply_asset(r, console_find(r->url));
        else not_allowed(r, "GET, HEAD");
    } else {
        srv_reply_error(r, 404, "not_found",
                        "no such path: %s (the API is under /v1/, the console at /)", r->url);
    }
    if (!r->resp) srv_reply_error(r, 500, "internal", "the handler gave no reply");
    audit(r);
}

/* ---- libmicrohttpd callbacks ---- */

/* "IP:PORT" or "[V6]:PORT" of the connection's peer (inet_ntop: every
 * request pays for it, and getnameinfo costs several times more). */
static void client_address(struct MHD_Connection *conn, char *out, size_t outsz)
{
    out[0] = '\0';
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    char host[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)sa;
        if (!inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host)) return;
        snprintf(out, outsz, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)sa;
        if (!inet_ntop(AF_INET, &a->sin_addr, host, sizeof host)) return;
        snprintf(out, outsz, "%s:%u", host, (unsigned)ntohs(a->sin_port));
    }
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version,
                                 const char *upload, size_t *upload_size, void **con_cls)
{
    srv *s = cls;
    srv_req *r = *con_cls;
    (void)version;
    if (!r) {
        r = xcalloc(1, sizeof *r);
        r->s = s;
        r->conn = conn;
        r->method = method;
        r->url = url;
        client_address(conn, r->address, sizeof r->address);
        sb_init(&r->body);
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        double max = s->cfg.spec->limits.max_body;
        if (!r->too_large && (double)(r->body.len + *upload_size) > max) {
            r->too_large = true;
            sb_free(&r->body);
        }
        if (!r->too_large) sb_putn(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    dispatch(r);
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return ok;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    srv *s = cls;
    srv_req *r = *con_cls;
    (void)conn;
    (void)toe;
    if (!r) return;
    if (r->status) srv_counters_add(&s->counters, r->method, r->status);
    if (r->resp) MHD_destroy_response(r->resp);
    srv_pool_put(&s->pool, r->st);
    srv_token_table_put(&s->tokens, r->tokens);
    sb_free(&r->body);
    free(r);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    srv *s = cls;
    if (s->quiet) return;
    fprintf(stderr, "lathe server: http: ");
    vfprintf(stderr, fmt, ap);
}

/* The socket address of host:port (numeric or a name that resolves). */
static bool resolve(const char *host, int port, struct sockaddr_storage *out, socklen_t *len,
                    char *err, size_t errsz)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errsz, "cannot resolve listen address %s: %s", host, gai_strerror(rc));
        return false;
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

/* Reads one PEM file of tls: (relative to the config's folder). */
static char *read_pem(const srv *s, const char *path, const char *key, char *err, size_t errsz)
{
    char *abs = path[0] == '/' ? xstrdup(path) : path_join(s->cfg.config_dir, path);
    char msg[256];
    size_t len = 0;
    char *text = file_read_all(abs, 1 << 20, &len, msg, sizeof msg);
    if (!text) snprintf(err, errsz, "tls.%s %s: %s", key, abs, msg);
    else if (!strstr(text, "-----BEGIN ")) {
        snprintf(err, errsz, "tls.%s %s: not a PEM file (no -----BEGIN line)", key, abs);
        free(text);
        text = NULL;
    }
    free(abs);
    return text;
}

/* tls.certFile and tls.keyFile, both or neither (the spec checks that
 * too), into s->tls_cert / tls_key. */
static int load_tls(srv *s, char *err, size_t errsz)
{
    const spec_tls *t = &s->cfg.spec->tls;
    if (!t->cert_file || !t->key_file) {
        snprintf(err, errsz, "tls: give both certFile and keyFile (a PEM certificate and its key)");
        return LT_EXIT_INVALID;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errsz,
                 "tls: this libmicrohttpd is built without TLS (GnuTLS); install one with it "
                 "(Debian's libmicrohttpd12 has it) or put a TLS proxy in front and remove tls:");
        return LT_EXIT_UNAVAILABLE;
    }
    s->tls_cert = read_pem(s, t->cert_file, "certFile", err, errsz);
    if (!s->tls_cert) return LT_EXIT_IO;
    s->tls_key = read_pem(s, t->key_file, "keyFile", err, errsz);
    if (!s->tls_key) return LT_EXIT_IO;
    s->tls = true;
    return LT_EXIT_OK;
}

int srv_http_start(srv *s, char *err, size_t errsz)
{
    struct sockaddr_storage addr;
    socklen_t alen;
    if (!resolve(s->cfg.listen_host, s->cfg.listen_port, &addr, &alen, err, errsz))
        return LT_EXIT_UNAVAILABLE;
    /* poll(), not select(): a server with thousands of running attempts
     * holds descriptors above FD_SETSIZE (1024), and select() refuses every
     * connection whose socket is numbered above it (tests/server/test_fds.c) */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    const spec_server *c = s->cfg.spec;
    struct MHD_OptionItem tls[3] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL},
                                    {MHD_OPTION_END, 0, NULL}};
    if (c->tls.cert_file || c->tls.key_file) {
        int rc = load_tls(s, err, errsz);
        if (rc != LT_EXIT_OK) return rc;
        flags |= MHD_USE_TLS;
        tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert};
        tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key};
    }
    errno = 0;
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->cfg.listen_port, NULL, NULL, on_access, s,
                              MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)c->limits.max_connections,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->limits.connection_timeout,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    if (!s->mhd) {
        if (s->tls)
            snprintf(err, errsz,
                     "cannot listen with TLS on %s:%d: %s (check that %s and %s are a PEM "
                     "certificate and its private key, without a passphrase)",
                     s->cfg.listen_host, s->cfg.listen_port,
                     errno ? strerror(errno) : "libmicrohttpd refused the certificate or key",
                     c->tls.cert_file, c->tls.key_file);
        else
            snprintf(err, errsz, "cannot listen on %s:%d: %s", s->cfg.listen_host,
                     s->cfg.listen_port, errno ? strerror(errno) : "libmicrohttpd refused to start");
        return LT_EXIT_UNAVAILABLE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? info->port : s->cfg.listen_port;
    bool v6 = addr.ss_family == AF_INET6;
    snprintf(s->address, sizeof s->address, v6 ? "[%s]:%d" : "%s:%d", s->cfg.listen_host, port);
    return LT_EXIT_OK;
}

void srv_http_stop(srv *s)
{
    if (!s->mhd) return;
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
}
