/* client_http.c: one HTTP request to the lathe server over libcurl, and the
 * turning of every failure into a client_error: no answer (connection
 * refused, timeout, unknown host: exit 5 with the address tried), or an
 * API error object (401, 404, 409, 422 with diagnostics, ...; the exit
 * codes are in docs/cli.md).
 *
 * A handle keeps one curl easy handle, so consecutive calls reuse the
 * connection (curl_easy_reset keeps it open).
 */
#include "client_internal.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Answers larger than this are refused (a list of 1,000 jobs with their
 * specs and plans stays well below). */
#define CLIENT_MAX_ANSWER ((size_t)256 << 20)

struct client {
    CURL *curl;
    char *server;
    char *server_from;
    char *token;
    char *token_from;
    char *cacert;      /* CURLOPT_CAINFO; NULL = the system's CAs */
    char *cacert_from;
    double timeout;
    char curl_err[CURL_ERROR_SIZE];
};

/* ---- errors ---- */

void client_error_init(client_error *e)
{
    memset(e, 0, sizeof *e);
    diag_list_init(&e->diags);
}

void client_error_free(client_error *e)
{
    free(e->message);
    diag_list_free(&e->diags);
    client_error_init(e);
}

void client_error_set(client_error *e, int exit_code, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb s;
    sb_init(&s);
    sb_vprintf(&s, fmt, ap);
    va_end(ap);
    free(e->message);
    e->message = sb_take(&s);
    e->exit_code = exit_code;
    snprintf(e->code, sizeof e->code, "%s", code);
}

void client_error_print(const client_error *e, const char *cmd, FILE *stream)
{
    if (e->message) fprintf(stream, "lathe %s: %s\n", cmd, e->message);
    diag_print_all(&e->diags, stream);
}

/* ---- handles ---- */

bool client_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

void client_global_cleanup(void)
{
    curl_global_cleanup();
}

client *client_new(const client_config *cfg)
{
    client *c = xcalloc(1, sizeof *c);
    c->curl = curl_easy_init();
    if (!c->curl) {
        fprintf(stderr, "lathe: libcurl could not start (out of memory?)\n");
        abort();
    }
    c->server = xstrdup(cfg->server ? cfg->server : CLIENT_DEFAULT_SERVER);
    c->server_from = xstrdup(cfg->server_from ? cfg->server_from : "the default");
    c->token = cfg->token ? xstrdup(cfg->token) : NULL;
    c->token_from = cfg->token_from ? xstrdup(cfg->token_from) : NULL;
    c->timeout = cfg->timeout > 0 ? cfg->timeout : CLIENT_DEFAULT_TIMEOUT;
    c->cacert = cfg->cacert ? xstrdup(cfg->cacert) : NULL;
    c->cacert_from = cfg->cacert_from ? xstrdup(cfg->cacert_from) : NULL;
    return c;
}

void client_free(client *c)
{
    if (!c) return;
    curl_easy_cleanup(c->curl);
    free(c->cacert);
    free(c->cacert_from);
    free(c->server);
    free(c->server_from);
    free(c->token);
    free(c->token_from);
    free(c);
}

const char *client_server(const client *c)
{
    return c->server;
}

/* ---- transfers ---- */

/* Where the body of an answer goes: into a buffer, or to a callback. */
typedef struct sink {
    sb *buf;
    client_write_fn fn;
    void *ctx;
    bool too_large, stopped;
} sink;

static size_t sink_write(char *data, size_t size, size_t nmemb, void *userp)
{
    sink *s = userp;
    size_t n = size * nmemb;
    if (s->fn) {
        if (!s->fn(s->ctx, data, n)) {
            s->stopped = true;
            return 0; /* aborts the transfer */
        }
        return n;
    }
    if (s->buf->len + n > CLIENT_MAX_ANSWER) {
        s->too_large = true;
        return 0;
    }
    sb_putn(s->buf, data, n);
    return n;
}

/* The message for a transfer that got no answer. */
static void transfer_error(client *c, CURLcode rc, client_error *err)
{
    const char *detail = c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc);
    const char *hint = "";
    if (rc == CURLE_COULDNT_CONNECT)
        hint = "; is `lathe server` running there?";
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        hint = "; the server is busy or stuck (LATHE_TIMEOUT sets the limit)";
    else if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE)
        hint = c->cacert ? "; the server's certificate is not signed by that CA file (check "
                           "--cacert / LATHE_CACERT / the config's cacert)"
                         : "; the server's certificate is not trusted: pass the CA that signed "
                           "it with --cacert FILE, LATHE_CACERT or cacert: in the config file";
    else if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING)
        hint = str_starts_with(c->server, "http://")
                   ? "; if the server listens with TLS, use an https:// address"
                   : "";
    client_error_set(err, LT_EXIT_UNAVAILABLE, "unreachable",
                     "cannot reach the lathe server at %s (from %s): %s%s", c->server,
                     c->server_from, detail, hint);
}

/* Sets the options of one request on the (reset) easy handle. */
static struct curl_slist *request_setup(client *c, const char *method, const char *url,
                                        const char *content_type, const char *body, size_t len,
                                        bool streaming, sink *s)
{
    CURL *h = c->curl;
    curl_easy_reset(h);
    c->curl_err[0] = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_err);
    /* verification stays on (libcurl's default); a CA file only says whom
     * to trust */
    if (c->cacert) curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(1000 * (c->timeout < 10 ? c->timeout : 10)));
    if (!streaming) {
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(1000 * c->timeout));
    } else {
        /* a followed log may be quiet for hours; keepalive probes still
         * notice a server machine that went away */
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
    }
    curl_easy_setopt(h, CURLOPT_USERAGENT, "lathe/" LATHE_VERSION);
    struct curl_slist *hdr = NULL;
    if (c->token) {
        char *a = xasprintf("Authorization: Bearer %s", c->token);
        hdr = curl_slist_append(hdr, a);
        free(a);
    }
    hdr = curl_slist_append(hdr, "Accept: application/json");
    if (!strcmp(method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
        char *ct = xasprintf("Content-Type: %s", content_type ? content_type : "application/json");
        hdr = curl_slist_append(hdr, ct);
        free(ct);
        hdr = curl_slist_append(hdr, "Expect:"); /* no 100-continue round trip */
    } else if (strcmp(method, "GET")) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    return hdr;
}

/* A request whose body goes to s. */
static int request_to(client *c, const char *method, const char *path, const char *content_type,
                      const char *body, size_t len, bool streaming, sink *s, long *status,
                      client_error *err)
{
    char *url = xasprintf("%s%s", c->server, path);
    struct curl_slist *hdr =
        request_setup(c, method, url, content_type, body, len, streaming, s);
    CURLcode rc = curl_easy_perform(c->curl);
    curl_slist_free_all(hdr);
    free(url);
    *status = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, status);
    if (rc == CURLE_WRITE_ERROR && s->stopped) return LT_EXIT_OK; /* the caller stopped */
    if (rc == CURLE_WRITE_ERROR && s->too_large) {
        client_error_set(err, LT_EXIT_UNAVAILABLE, "protocol",
                         "the answer of %s for %s %s is larger than %zu MiB", c->server, method,
                         path, CLIENT_MAX_ANSWER >> 20);
        return err->exit_code;
    }
    if (rc != CURLE_OK) {
        /* a stream cut after an answer began still delivered what it had */
        if (streaming && *status >= 200 && *status < 300 && rc == CURLE_PARTIAL_FILE)
            return LT_EXIT_OK;
        transfer_error(c, rc, err);
        return err->exit_code;
    }
    return LT_EXIT_OK;
}

int client_request(client *c, const char *method, const char *path, const char *content_type,
                   const char *body, size_t len, long *status, sb *out, client_error *err)
{
    sink s = {.buf = out};
    return request_to(c, method, path, content_type, body, len, false, &s, status, err);
}

/* ---- API errors ---- */

/* The exit code for an HTTP error status (docs/cli.md). */
static int status_exit(long status)
{
    switch (status) {
    case 401: case 403: return LT_EXIT_USAGE;
    case 400: case 404: case 409: case 413: case 422: return LT_EXIT_INVALID;
    case 500: return LT_EXIT_INTERNAL;
    default: return status >= 500 ? LT_EXIT_UNAVAILABLE : LT_EXIT_INVALID;
    }
}

/* A JSON string member, or NULL. */
static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The diagnostics of an error object, with file replaced by file when
 * given (the server only saw a request body). */
static void error_diags(const json_t *diags, const char *file, diag_list *d)
{
    size_t i;
    const json_t *x;
    json_array_foreach(diags, i, x) {
        const char *lvl = jstr(x, "level");
        diag_level level = lvl && !strcmp(lvl, "warning") ? DIAG_WARNING
                           : lvl && !strcmp(lvl, "note")  ? DIAG_NOTE
                                                          : DIAG_ERROR;
        const char *f = file ? file : jstr(x, "file");
        diag *y = diag_add(d, level, f, (int)json_integer_value(json_object_get(x, "line")),
                           (int)json_integer_value(json_object_get(x, "column")),
                           jstr(x, "path"), jstr(x, "message"));
        if (jstr(x, "expected")) diag_set_expected(y, "%s", jstr(x, "expected"));
        if (jstr(x, "found")) diag_set_found(y, "%s", jstr(x, "found"));
        if (jstr(x, "suggestion")) diag_set_suggestion(y, "%s", jstr(x, "suggestion"));
    }
}

/* The sentence for a 401. */
static void unauthenticated(client *c, const char *server_msg, client_error *err)
{
    if (!c->token)
        client_error_set(err, LT_EXIT_USAGE, "unauthenticated",
                         "the server at %s wants a token and none was given: pass --token, "
                         "set LATHE_TOKEN, or put 'token: ...' in the config file (%s)",
                         c->server, server_msg ? server_msg : "401");
    else
        client_error_set(err, LT_EXIT_USAGE, "unauthenticated",
                         "the server at %s does not accept the token from %s (%s); ask its "
                         "administrator for a valid one",
                         c->server, c->token_from, server_msg ? server_msg : "401");
}

/* Fills err from an error answer (status >= 300) and its body. */
static void api_error(client *c, long status, const char *body, const char *what,
                      const char *file, client_error *err)
{
    json_t *root = json_loads(body, 0, NULL);
    json_t *e = json_object_get(root, "error");
    const char *code = jstr(e, "code");
    const char *msg = jstr(e, "message");
    int exit_code = status_exit(status);
    if (status == 401) {
        unauthenticated(c, msg, err);
    } else if (status == 404) {
        if (what)
            client_error_set(err, exit_code, "not_found",
                             "%s not found on %s (a team token sees only its own team's "
                             "objects)", what, c->server);
        else
            client_error_set(err, exit_code, "not_found", "%s", msg ? msg : "not found");
    } else if (status == 422 && file && json_array_size(json_object_get(e, "diagnostics"))) {
        /* the server named the body itself; the diagnostics name the file */
        size_t i, errors = 0;
        const json_t *x;
        json_array_foreach(json_object_get(e, "diagnostics"), i, x) {
            const char *lvl = jstr(x, "level");
            errors += !lvl || !strcmp(lvl, "error");
        }
        client_error_set(err, exit_code, code ? code : "invalid",
                         "%s has %zu error%s (checked by the server at %s):", file, errors,
                         errors == 1 ? "" : "s", c->server);
    } else if (msg) {
        /* "job x: ..." unless the server's sentence already names it */
        bool named = !what || strstr(msg, what);
        client_error_set(err, exit_code, code ? code : "error", "%s%s%s", named ? "" : what,
                         named ? "" : ": ", msg);
    } else {
        client_error_set(err, exit_code, "protocol",
                         "%s answered %ld without lathe's error object; is it a lathe server?",
                         c->server, status);
    }
    error_diags(json_object_get(e, "diagnostics"), file, &err->diags);
    err->status = status;
    json_decref(root);
}

/* client_call_json with the file to put into diagnostics. */
static int call_json(client *c, const char *method, const char *path, const char *content_type,
                     const char *body, size_t len, const char *what, const char *file,
                     long *status, json_t **out, client_error *err)
{
    sb buf;
    sb_init(&buf);
    long st = 0;
    if (out) *out = NULL;
    int rc = client_request(c, method, path, content_type, body, len, &st, &buf, err);
    if (status) *status = st;
    if (rc) {
        sb_free(&buf);
        return rc;
    }
    if (st < 200 || st >= 300) {
        api_error(c, st, sb_str(&buf), what, file, err);
        sb_free(&buf);
        return err->exit_code;
    }
    if (buf.len > 0 && out) {
        json_error_t je;
        *out = json_loadb(buf.buf, buf.len, 0, &je);
        if (!*out) {
            client_error_set(err, LT_EXIT_UNAVAILABLE, "protocol",
                             "%s answered %s %s with something that is not JSON (%s)", c->server,
                             method, path, je.text);
            err->status = st;
        }
    }
    sb_free(&buf);
    return err->exit_code;
}

int client_call_json(client *c, const char *method, const char *path, const char *content_type,
                     const char *body, size_t len, const char *what, long *status, json_t **out,
                     client_error *err)
{
    return call_json(c, method, path, content_type, body, len, what, NULL, status, out, err);
}

int client_submit(client *c, const char *text, size_t len, bool is_json, const char *file,
                  const char *team, json_t **out, bool *created, client_error *err)
{
    char *path = team ? xasprintf("/v1/jobs?team=%s", team) : xstrdup("/v1/jobs");
    long status = 0;
    int rc = call_json(c, "POST", path, is_json ? "application/json" : "application/yaml", text,
                       len, file, file, &status, out, err);
    free(path);
    if (created) *created = status == 201;
    return rc;
}

/* Collects an error answer's body in place of the stream. */
typedef struct stream_ctx {
    client_write_fn fn;
    void *ctx;
    CURL *curl;
    sb err_body;
    int ok; /* -1 unknown, 0 error status, 1 streaming */
} stream_ctx;

static bool stream_write(void *p, const char *data, size_t len)
{
    stream_ctx *s = p;
    if (s->ok < 0) {
        long st = 0;
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &st);
        s->ok = st >= 200 && st < 300;
    }
    if (!s->ok) {
        if (s->err_body.len < 65536) sb_putn(&s->err_body, data, len);
        return true;
    }
    return s->fn(s->ctx, data, len);
}

int client_stream_get(client *c, const char *path, bool follow, const char *what,
                      client_write_fn fn, void *ctx, client_error *err)
{
    stream_ctx s = {.fn = fn, .ctx = ctx, .curl = c->curl, .ok = -1};
    sb_init(&s.err_body);
    sink k = {.fn = stream_write, .ctx = &s};
    long st = 0;
    int rc = request_to(c, "GET", path, NULL, NULL, 0, follow, &k, &st, err);
    if (!rc && (st < 200 || st >= 300)) {
        api_error(c, st, sb_str(&s.err_body), what, NULL, err);
        rc = err->exit_code;
    }
    sb_free(&s.err_body);
    return rc;
}
