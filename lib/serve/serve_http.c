/* serve_http.c: lathe serve's HTTP layer on libmicrohttpd, one thread per
 * connection (MHD_USE_THREAD_PER_CONNECTION with poll()), so a handler may
 * wait for its tokens and a stream may wait on a slow client without
 * holding up anyone else. It owns:
 *
 *   - the request record (sv_conn): method, URL, the body (kept up to
 *     --max-body; a larger one is read, dropped and refused with 413);
 *   - the API key: every path under /v1 asks for `Authorization: Bearer
 *     KEY` when the server has one (compared in constant time), 401 without
 *     it or with another;
 *   - routing: /v1/models, /v1/models/ID, /v1/completions,
 *     /v1/chat/completions, /v1/load_lora_adapter, /v1/unload_lora_adapter,
 *     /health, /ready, /metrics; 404 for other paths, 405 (with Allow) for
 *     another method, 414 for URLs over 4 KiB, 503 under /v1 while the
 *     model loads or the server drains;
 *   - replies: JSON, text, callbacks (streams), errors in OpenAI's shape;
 *   - the request counters and log lines, and the count of requests in
 *     flight that a drain waits for.
 */
#include "serve_internal.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* ---------------------------------------------------------------- replies */

static void set_response(sv_conn *c, int status, struct MHD_Response *resp)
{
    if (c->resp) MHD_destroy_response(c->resp);
    c->resp = resp;
    c->status = status;
}

void sv_reply_text(sv_conn *c, int status, const char *content_type, const char *text)
{
    size_t len = strlen(text);
    char *copy = xmalloc(len + 1);
    memcpy(copy, text, len + 1);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, copy, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    set_response(c, status, r);
}

void sv_reply_json(sv_conn *c, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    sb out;
    sb_init(&out);
    sb_puts(&out, text ? text : "{\"error\":{\"message\":\"the reply could not be written\","
                                "\"type\":\"server_error\",\"param\":null,\"code\":null}}");
    sb_putc(&out, '\n');
    free(text);
    sv_reply_text(c, text || status >= 500 ? status : 500, "application/json", out.buf);
    sb_free(&out);
}

void sv_reply_error(sv_conn *c, const sv_error *e)
{
    sv_reply_json(c, e->status, sv_error_json(e));
    if (e->status == 401) sv_reply_header(c, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
}

void sv_reply_callback(sv_conn *c, int status, const char *content_type,
                       MHD_ContentReaderCallback read, void *cls,
                       MHD_ContentReaderFreeCallback done)
{
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read,
                                                               cls, done);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    set_response(c, status, r);
}

void sv_reply_header(sv_conn *c, const char *name, const char *value)
{
    if (c->resp) MHD_add_response_header(c->resp, name, value);
}

const char *sv_conn_header(const sv_conn *c, const char *name)
{
    return MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, name);
}

void sv_conn_set_model(sv_conn *c, const char *id)
{
    free(c->model_label);
    c->model_label = xstrdup(id);
}

static void reply_status(sv_conn *c, int status, const char *type, const char *code,
                         const char *msg)
{
    sv_error e;
    sv_error_set(&e, status, type, code, NULL, "%s", msg);
    sv_reply_error(c, &e);
}

/* ---------------------------------------------------------------- the key */

/* Compares in time that depends on the key's length only. */
static bool key_equal(const char *given, size_t glen, const char *key)
{
    size_t klen = strlen(key);
    volatile unsigned char diff = glen != klen;
    for (size_t i = 0; i < klen; i++)
        diff |= (unsigned char)key[i] ^ (unsigned char)(i < glen ? given[i] : 0);
    return diff == 0;
}

/* True when the request may use /v1; replies 401 otherwise. */
static bool authorized(sv_conn *c)
{
    const char *key = c->s->o->api_key;
    if (!key) return true;
    const char *h = sv_conn_header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    static const char scheme[] = "Bearer ";
    if (!h || strncasecmp(h, scheme, sizeof scheme - 1) != 0) {
        reply_status(c, 401, "invalid_request_error", "invalid_api_key",
                     "no API key: send the header `Authorization: Bearer KEY` with the key "
                     "lathe serve was started with (--api-key or --api-key-file)");
        return false;
    }
    const char *tok = h + sizeof scheme - 1;
    while (*tok == ' ') tok++;
    size_t len = strlen(tok);
    while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t')) len--;
    if (!key_equal(tok, len, key)) {
        reply_status(c, 401, "invalid_request_error", "invalid_api_key",
                     "the API key is not the one this server was started with");
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- routing */

static bool method_is(const sv_conn *c, const char *m)
{
    return strcmp(c->method, m) == 0;
}

static void not_allowed(sv_conn *c, const char *allow)
{
    sv_error e;
    sv_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
                 "%s is not allowed on %s; use %s", c->method, c->url, allow);
    sv_reply_error(c, &e);
    sv_reply_header(c, MHD_HTTP_HEADER_ALLOW, allow);
}

static void not_found(sv_conn *c)
{
    sv_error e;
    sv_error_set(&e, 404, "invalid_request_error", "not_found", NULL,
                 "no route %s %s; lathe serve has GET /v1/models, POST /v1/completions, POST "
                 "/v1/chat/completions, POST /v1/load_lora_adapter, POST "
                 "/v1/unload_lora_adapter, GET /health, /ready and /metrics",
                 c->method, c->url);
    sv_reply_error(c, &e);
}

/* A route of one method. */
static bool route(sv_conn *c, const char *path, const char *want, const char *method)
{
    if (strcmp(path, want) != 0) return false;
    if (!method_is(c, method)) not_allowed(c, method);
    return method_is(c, method);
}

static bool serving(sv_conn *c)
{
    int st = atomic_load(&c->s->state);
    if (st == SV_READY) return true;
    reply_status(c, 503, "server_error", "unavailable",
                 st == SV_LOADING ? "the model is still loading; retry in a few seconds"
                                  : "the server is shutting down; retry on another replica");
    if (st == SV_LOADING) sv_reply_header(c, "Retry-After", "5");
    return false;
}

/* A completion may wait long for its tokens: no idle timeout until it is
 * sent (on_completed turns it on again for the next request). */
static void no_timeout(sv_conn *c)
{
    MHD_set_connection_option(c->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    c->no_timeout = true;
}

static void route_v1(sv_conn *c)
{
    const char *p = c->url + 3;
    if (!serving(c)) return;
    if (str_starts_with(p, "/models/") && p[8]) {
        if (method_is(c, "GET")) sv_route_models(c, p + 8);
        else not_allowed(c, "GET");
    } else if (route(c, p, "/models", "GET")) {
        sv_route_models(c, NULL);
    } else if (route(c, p, "/completions", "POST")) {
        no_timeout(c);
        sv_route_generate(c, SV_API_COMPLETIONS);
    } else if (route(c, p, "/chat/completions", "POST")) {
        no_timeout(c);
        sv_route_generate(c, SV_API_CHAT);
    } else if (route(c, p, "/load_lora_adapter", "POST")) {
        sv_route_load_adapter(c);
    } else if (route(c, p, "/unload_lora_adapter", "POST")) {
        sv_route_unload_adapter(c);
    } else if (!c->resp) {
        not_found(c);
    }
}

static void dispatch(sv_conn *c)
{
    bool v1 = strcmp(c->url, "/v1") == 0 || str_starts_with(c->url, "/v1/");
    if (strlen(c->url) > SV_MAX_URL) {
        reply_status(c, 414, "invalid_request_error", "uri_too_long",
                     "the URL is longer than 4096 bytes");
    } else if (v1 && !authorized(c)) {
        return;
    } else if (c->too_large) {
        sv_error e;
        sv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                     "the request body is larger than %zu bytes (lathe serve --max-body)",
                     c->s->o->max_body);
        sv_reply_error(c, &e);
    } else if (strcmp(c->url, "/health") == 0 || strcmp(c->url, "/ready") == 0) {
        if (method_is(c, "GET") || method_is(c, "HEAD"))
            sv_route_health(c, strcmp(c->url, "/ready") == 0);
        else not_allowed(c, "GET");
    } else if (strcmp(c->url, "/metrics") == 0) {
        if (method_is(c, "GET")) sv_route_metrics(c);
        else not_allowed(c, "GET");
    } else if (v1) {
        route_v1(c);
    } else {
        not_found(c);
    }
}

/* ---------------------------------------------------------------- MHD */

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    sv_server *s = cls;
    sv_conn *c = *con_cls;
    (void)version;
    if (!c) {
        c = xcalloc(1, sizeof *c);
        c->s = s;
        c->conn = conn;
        c->method = method;
        c->url = url;
        c->t0_ns = sv_now_ns();
        sb_init(&c->body);
        pthread_mutex_lock(&s->mu);
        s->inflight++;
        pthread_mutex_unlock(&s->mu);
        *con_cls = c;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!c->too_large && c->body.len + *upload_size > s->o->max_body) {
            c->too_large = true;
            sb_free(&c->body);
        }
        if (!c->too_large) sb_putn(&c->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    dispatch(c);
    if (!c->resp) reply_status(c, 500, "server_error", NULL, "the handler gave no reply");
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)c->status, c->resp);
    MHD_destroy_response(c->resp);
    c->resp = NULL;
    return ok;
}

/* One line per request; control characters of the URL (decoded from
 * %XX) are shown as '?', so a client cannot forge log lines. */
static void log_request(sv_server *s, const sv_conn *c, double secs)
{
    if (s->o->quiet) return;
    char url[256];
    size_t n = 0;
    for (const char *p = c->url; *p && n + 1 < sizeof url; p++)
        url[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
    url[n] = '\0';
    fprintf(stderr, "lathe serve: %s %s %d%s%s %.3fs\n", c->method, url, c->status,
            c->model_label ? " model=" : "", c->model_label ? c->model_label : "", secs);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    sv_server *s = cls;
    sv_conn *c = *con_cls;
    (void)toe;
    if (!c) return;
    if (c->no_timeout)
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, SV_IDLE_TIMEOUT);
    int64_t ns = sv_now_ns() - c->t0_ns;
    bool v1 = str_starts_with(c->url, "/v1");
    if (c->status && v1) sv_metrics_request(&s->metrics, c->model_label, c->status);
    if (c->generation && c->status == 200) sv_hist_observe(&s->metrics.e2e, ns);
    if (c->status && v1) log_request(s, c, (double)ns / 1e9);
    if (c->resp) MHD_destroy_response(c->resp);
    sb_free(&c->body);
    free(c->model_label);
    free(c);
    *con_cls = NULL;
    pthread_mutex_lock(&s->mu);
    s->inflight--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    sv_server *s = cls;
    if (s->o->quiet) return;
    fprintf(stderr, "lathe serve: http: ");
    vfprintf(stderr, fmt, ap);
}

/* host:port as a socket address (a numeric address or a name). */
static bool listen_address(const char *host, int port, struct sockaddr_storage *out,
                           char *err, size_t errsz)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errsz, "--host %s: cannot resolve it (%s); give an address such as "
                 "127.0.0.1, 0.0.0.0 or ::1", host, gai_strerror(rc));
        return false;
    }
    memset(out, 0, sizeof *out);
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return true;
}

int sv_http_start(sv_server *s, char *err, size_t errsz)
{
    const sv_serve_opts *o = s->o;
    struct sockaddr_storage addr;
    if (!listen_address(o->host, o->port, &addr, err, errsz)) return LT_EXIT_USAGE;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    bool v6 = addr.ss_family == AF_INET6;
    if (v6) flags |= MHD_USE_IPv6;
    errno = 0;
    s->mhd = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_access, s,
                              MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
                              MHD_OPTION_CONNECTION_TIMEOUT, SV_IDLE_TIMEOUT,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    if (!s->mhd) {
        snprintf(err, errsz, "cannot listen on %s port %d: %s; choose another --port (0 lets "
                 "the system pick one)", o->host, o->port,
                 errno ? strerror(errno) : "libmicrohttpd refused to start");
        return LT_EXIT_UNAVAILABLE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    int port = info && info->port ? info->port : o->port;
    snprintf(s->address, sizeof s->address, v6 ? "[%s]:%d" : "%s:%d", o->host, port);
    return LT_EXIT_OK;
}

void sv_http_stop(sv_server *s)
{
    if (!s->mhd) return;
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
}
