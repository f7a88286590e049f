/* test_security_api.c: the API's defences on a real `lathe server` (a
 * child process, tests/server/harness.h): token scope (a read token lists
 * but cannot submit, cancel or delete: 403), expiry (401 saying it expired,
 * apart from an unknown token), the tokens file re-read on SIGHUP (a new
 * token works without a restart, a removed one stops, an invalid file
 * keeps the old table), the per-token rate limit (429 with Retry-After,
 * recovery, failed guesses limited by address, the health endpoints
 * exempt, the counter on /metrics), the audit log (every request that is
 * not a GET, refused ones included, with actor, address and status; admin
 * only), and TLS (a self-signed certificate for 127.0.0.1 made with the
 * openssl command: https with the CA works, without it verification fails,
 * plain http to the TLS port gets no answer; the lathe client with
 * --cacert and LATHE_CACERT). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

/* The extra tokens, in tokens.yaml: a read token and an expired one of
 * team-a, and alice (submit, team-a). */
static const char tokens_yaml[] =
    "tokens:\n"
    "  - {name: reader, sha256: %s, team: team-a, scope: read}\n"
    "  - {name: old-laptop, sha256: %s, team: team-a, expires: \"2020-01-31T00:00:00Z\"}\n"
    "  - {name: alice, sha256: %s, team: team-a, scope: submit, "
    "expires: \"2099-01-01T00:00:00Z\"}\n"
    "%s";

static void write_tokens(const hs *h, const char *more)
{
    char r[65], e[65], a[65];
    srv_hash_token("token-read", r);
    srv_hash_token("token-expired", e);
    srv_hash_token("token-alice", a);
    char *text = xasprintf(tokens_yaml, r, e, a, more ? more : "");
    hs_write(h, "tokens.yaml", text);
    free(text);
}

/* ---- HTTP with headers and TLS ---- */
typedef struct sec_resp {
    long status;     /* 0: no answer */
    int curl_code;   /* CURLE_* */
    char *body;
    json_t *json;
    long retry_after; /* the Retry-After header, -1 when absent */
} sec_resp;

static size_t sec_header(char *p, size_t size, size_t n, void *cls)
{
    sec_resp *r = cls;
    size_t len = size * n;
    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) r->retry_after = strtol(p + 12, NULL, 10);
    return len;
}

static void sec_free(sec_resp *r)
{
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* method url (a whole URL) with token; cacert: the CA file (NULL: the
 * system's). */
static sec_resp sec_http(const char *method, const char *url, const char *token, const char *body,
                         const char *cacert)
{
    sec_resp r = {.retry_after = -1};
    struct curl_slist *hdr = NULL;
    char *auth = token ? xasprintf("Authorization: Bearer %s", token) : NULL;
    if (auth) hdr = curl_slist_append(hdr, auth);
    if (body) hdr = curl_slist_append(hdr, "Content-Type: application/yaml");
    sb out;
    sb_init(&out);
    CURL *c = hs_curl_new(method, url, hdr, body, &out, 10 * hs_slow());
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, sec_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    if (cacert) curl_easy_setopt(c, CURLOPT_CAINFO, cacert);
    r.curl_code = (int)curl_easy_perform(c);
    if (r.curl_code == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    r.body = out.len ? sb_take(&out) : xstrdup("");
    sb_free(&out);
    r.json = json_loads(r.body, 0, NULL);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    free(auth);
    return r;
}

static sec_resp sec_req(const hs *h, const char *method, const char *path, const char *token,
                        const char *body)
{
    char *url = xasprintf("http://%s%s", h->addr, path);
    sec_resp r = sec_http(method, url, token, body, NULL);
    free(url);
    return r;
}

static const char *err_code(const sec_resp *r)
{
    return json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
}

static const char *err_message(const sec_resp *r)
{
    const char *m =
        json_string_value(json_object_get(json_object_get(r->json, "error"), "message"));
    return m ? m : "";
}

static long status_of(const hs *h, const char *method, const char *path, const char *token,
                      const char *body)
{
    sec_resp r = sec_req(h, method, path, token, body);
    long st = r.status;
    sec_free(&r);
    return st;
}

static bool log_has(const hs *h, const char *text)
{
    char *p = path_join(h->dir, "server.log"), err[128];
    char *t = file_read_all(p, 1 << 22, NULL, err, sizeof err);
    bool ok = t && strstr(t, text);
    free(t);
    free(p);
    return ok;
}

/* log_has, waiting up to timeout seconds (times hs_slow) for the line: the
 * server logs a reload once it is over, a moment after the new tokens
 * already answer. */
static bool wait_log(const hs *h, const char *text, double timeout)
{
    double end = hs_now() + timeout * hs_slow();
    while (!log_has(h, text)) {
        if (hs_now() > end) return false;
        hs_sleep(0.05);
    }
    return true;
}

/* The audit row (newest first) with this actor, method, path suffix and
 * status, or NULL. Borrowed from items. */
static json_t *find_row(json_t *items, const char *actor, const char *method, const char *path,
                        long status)
{
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *e = json_array_get(items, i);
        const char *a = json_string_value(json_object_get(e, "actor"));
        const char *m = json_string_value(json_object_get(e, "method"));
        const char *p = json_string_value(json_object_get(e, "path"));
        if (a && m && p && !strcmp(a, actor) && !strcmp(m, method) &&
            (!path || strstr(p, path)) &&
            json_integer_value(json_object_get(e, "status")) == status)
            return e;
    }
    return NULL;
}

static int run_argv(char *const argv[], const char *dir, const char *out_file);

/* `lathe audit` against h with token; its output in DIR/audit.out (caller
 * frees *text). Returns the exit status. */
static int lathe_audit(const hs *h, const char *token, const char *extra, char **text)
{
    char *lathe = xasprintf("%s/lathe", LATHE_BINARY_DIR);
    char *out = path_join(h->dir, "audit.out");
    char *const argv[] = {lathe, "audit", "--server", (char *)h->addr, "--token", (char *)token,
                          extra ? (char *)extra : NULL, extra ? "json" : NULL, NULL};
    int rc = run_argv(argv, h->dir, out);
    char err[128];
    *text = file_read_all(out, 1 << 20, NULL, err, sizeof err);
    free(out);
    free(lathe);
    return rc;
}

/* ---- scope, expiry and the audit log ---- */
static void test_scope_expiry_audit(void **state)
{
    (void)state;
    hs h;
    hs_init(&h, 2, "  tokensFile: tokens.yaml\n");
    write_tokens(&h, NULL);
    if (!hs_start(&h)) hs_print_log(&h), fail();

    /* the read token lists */
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-read", NULL), 200);
    assert_int_equal(status_of(&h, "GET", "/v1/teams", "token-read", NULL), 200);
    /* but cannot submit, cancel or delete */
    char *job = hs_job(&h, "sec-job", NULL, NULL);
    sec_resp r = sec_req(&h, "POST", "/v1/jobs", "token-read", job);
    assert_int_equal(r.status, 403);
    assert_string_equal(err_code(&r), "forbidden");
    assert_non_null(strstr(err_message(&r), "scope read"));
    assert_non_null(strstr(err_message(&r), "submit"));
    sec_free(&r);
    /* alice (submit) can */
    r = sec_req(&h, "POST", "/v1/jobs", "token-alice", job);
    assert_int_equal(r.status, 201);
    sec_free(&r);
    assert_int_equal(status_of(&h, "POST", "/v1/jobs/sec-job/cancel", "token-read", NULL), 403);
    assert_int_equal(status_of(&h, "DELETE", "/v1/jobs/sec-job", "token-read", NULL), 403);
    assert_int_equal(status_of(&h, "GET", "/v1/jobs/sec-job", "token-read", NULL), 200);

    /* expired: 401 that says so, and when; unknown: another message */
    r = sec_req(&h, "GET", "/v1/jobs", "token-expired", NULL);
    assert_int_equal(r.status, 401);
    assert_string_equal(err_code(&r), "unauthenticated");
    assert_non_null(strstr(err_message(&r), "expired"));
    assert_non_null(strstr(err_message(&r), "2020-01-31T00:00:00Z"));
    sec_free(&r);
    assert_int_equal(status_of(&h, "POST", "/v1/jobs", "token-expired", job), 401);
    r = sec_req(&h, "POST", "/v1/jobs", "no-such-token", job);
    assert_int_equal(r.status, 401);
    assert_null(strstr(err_message(&r), "expired"));
    sec_free(&r);
    free(job);

    /* the audit log: admin only */
    r = sec_req(&h, "GET", "/v1/audit", "token-a", NULL);
    assert_int_equal(r.status, 403);
    assert_string_equal(err_code(&r), "forbidden");
    sec_free(&r);
    assert_int_equal(status_of(&h, "GET", "/v1/audit", "token-read", NULL), 403);
    r = sec_req(&h, "GET", "/v1/audit?limit=100", "token-admin", NULL);
    assert_int_equal(r.status, 200);
    json_t *items = json_object_get(r.json, "items");
    /* every request that was not a GET, refused ones too; GETs are not */
    assert_int_equal(json_array_size(items), 6);
    json_t *e = find_row(items, "alice", "POST", "/v1/jobs", 201);
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "team")), "team-a");
    assert_string_equal(json_string_value(json_object_get(e, "target")), "sec-job");
    assert_true(str_starts_with(json_string_value(json_object_get(e, "detail")), "job sec-job "));
    const char *addr = json_string_value(json_object_get(e, "address"));
    assert_non_null(addr);
    assert_true(str_starts_with(addr, "127.0.0.1:"));
    assert_true(atoi(addr + 10) > 0);
    assert_non_null(json_string_value(json_object_get(e, "time")));
    e = find_row(items, "reader", "POST", "/v1/jobs", 403);
    assert_non_null(e);
    assert_non_null(strstr(json_string_value(json_object_get(e, "detail")), "scope"));
    e = find_row(items, "reader", "POST", "/v1/jobs/sec-job/cancel", 403);
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "target")), "sec-job");
    assert_non_null(find_row(items, "reader", "DELETE", "/v1/jobs/sec-job", 403));
    e = find_row(items, "old-laptop", "POST", "/v1/jobs", 401);
    assert_non_null(e);
    assert_non_null(strstr(json_string_value(json_object_get(e, "detail")), "expired"));
    e = find_row(items, "unknown", "POST", "/v1/jobs", 401);
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "detail")), "unknown token");
    /* newest first */
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "actor")),
                        "unknown");
    sec_free(&r);
    /* filters: team, limit, a bad since */
    r = sec_req(&h, "GET", "/v1/audit?limit=2", "token-admin", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
    sec_free(&r);
    r = sec_req(&h, "GET", "/v1/audit?team=team-b", "token-admin", NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 0);
    sec_free(&r);
    r = sec_req(&h, "GET", "/v1/audit?since=2099-01-01T00:00:00Z", "token-admin", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 0);
    sec_free(&r);
    r = sec_req(&h, "GET", "/v1/audit?since=yesterday", "token-admin", NULL);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(err_message(&r), "since"));
    sec_free(&r);

    /* lathe audit: a table for an admin, refused for a team token */
    char *text = NULL;
    assert_int_equal(lathe_audit(&h, "token-admin", NULL, &text), 0);
    assert_non_null(text);
    assert_non_null(strstr(text, "ACTOR"));
    assert_non_null(strstr(text, "reader"));
    assert_non_null(strstr(text, "POST /v1/jobs/sec-job/cancel"));
    assert_non_null(strstr(text, "403"));
    free(text);
    assert_int_equal(lathe_audit(&h, "token-admin", "-o", &text), 0);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 6);
    json_decref(j);
    free(text);
    assert_int_not_equal(lathe_audit(&h, "token-a", NULL, &text), 0);
    assert_non_null(strstr(text, "admin"));
    free(text);

    assert_true(hs_wait_state(&h, "token-a", "sec-job", "succeeded", 60));
    hs_finish(&h);
}

/* ---- SIGHUP ---- */
static bool wait_status(const hs *h, const char *token, long want, double timeout)
{
    double end = hs_now() + timeout * hs_slow();
    for (;;) {
        if (status_of(h, "GET", "/v1/jobs", token, NULL) == want) return true;
        if (hs_now() > end) return false;
        hs_sleep(0.05);
    }
}

static void test_sighup_reload(void **state)
{
    (void)state;
    hs h;
    hs_init(&h, 1, "  tokensFile: tokens.yaml\n");
    write_tokens(&h, NULL);
    if (!hs_start(&h)) hs_print_log(&h), fail();
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-new", NULL), 401);
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-alice", NULL), 200);

    /* a token added to the file works after SIGHUP, without a restart */
    char hn[65];
    srv_hash_token("token-new", hn);
    char *more = xasprintf("  - {name: newcomer, sha256: %s, team: team-b}\n", hn);
    write_tokens(&h, more);
    free(more);
    pid_t pid = h.pid;
    assert_int_equal(kill(h.pid, SIGHUP), 0);
    assert_true(wait_status(&h, "token-new", 200, 10));
    assert_int_equal(h.pid, pid);
    assert_true(wait_log(&h, "tokens loaded", 10));
    assert_true(log_has(&h, "need a restart"));

    /* removed from the file: refused after the next reload, sent this
     * time by `lathe server reload` (the pid of DATA/server.lock) */
    hs_write(&h, "tokens.yaml", "tokens: []\n");
    char *lathe = xasprintf("%s/lathe", LATHE_BINARY_DIR);
    char *out = path_join(h.dir, "reload.out");
    char *const reload[] = {lathe, "server", "reload", "--config", h.config, NULL};
    assert_int_equal(run_argv(reload, h.dir, out), 0);
    char err[128];
    char *said = file_read_all(out, 1 << 16, NULL, err, sizeof err);
    assert_non_null(said);
    char want[64];
    snprintf(want, sizeof want, "pid %ld", (long)h.pid);
    assert_non_null(strstr(said, want));
    free(said);
    assert_true(wait_status(&h, "token-new", 401, 10));
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-alice", NULL), 401);
    /* the config's own tokens stay */
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-a", NULL), 200);

    /* an invalid file keeps the table in use, and says where it is wrong */
    write_tokens(&h, NULL);
    assert_int_equal(kill(h.pid, SIGHUP), 0);
    assert_true(wait_status(&h, "token-alice", 200, 10));
    hs_write(&h, "tokens.yaml", "tokens:\n  - {name: bad, sha256: nothex, team: team-a}\n");
    assert_int_equal(kill(h.pid, SIGHUP), 0);
    assert_true(wait_log(&h, "the old ones stay in use", 10));
    assert_true(log_has(&h, "tokens.yaml:2"));
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-alice", NULL), 200);
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-a", NULL), 200);

    /* the reloads are in the audit log, the refused one too */
    sec_resp r = sec_req(&h, "GET", "/v1/audit", "token-admin", NULL);
    assert_int_equal(r.status, 200);
    json_t *items = json_object_get(r.json, "items");
    json_t *e = find_row(items, "sighup", "SIGHUP", "server.yaml", 200);
    assert_non_null(e);
    assert_non_null(strstr(json_string_value(json_object_get(e, "detail")), "tokens loaded"));
    e = find_row(items, "sighup", "SIGHUP", "server.yaml", 422);
    assert_non_null(e);
    const char *detail = json_string_value(json_object_get(e, "detail"));
    assert_non_null(strstr(detail, "kept the old tokens"));
    assert_non_null(strstr(detail, "tokens.yaml:2"));
    sec_free(&r);
    int status = hs_kill(&h, SIGTERM);
    if (status != 0) hs_print_log(&h);
    assert_int_equal(status, 0);
    /* reload checks the files first: the invalid one is reported, with
     * its line, and nothing is sent */
    assert_int_equal(run_argv(reload, "/", out), 2);
    said = file_read_all(out, 1 << 16, NULL, err, sizeof err);
    assert_non_null(said);
    assert_non_null(strstr(said, "tokens.yaml:2"));
    free(said);
    /* no server on the folder now: reload says so */
    write_tokens(&h, NULL);
    assert_int_equal(run_argv(reload, "/", out), 5);
    said = file_read_all(out, 1 << 16, NULL, err, sizeof err);
    assert_non_null(said);
    assert_non_null(strstr(said, "no server runs"));
    free(said);
    free(out);
    free(lathe);
    hs_free(&h);
}

/* ---- the rate limit ---- */
static void test_rate_limit(void **state)
{
    (void)state;
    hs h;
    hs_init(&h, 1, "  rateLimit: {requestsPerSecond: 1, burst: 3}\n");
    if (!hs_start(&h)) hs_print_log(&h), fail();
    /* the burst, then 429 with Retry-After */
    int ok = 0;
    sec_resp r = {0};
    for (int i = 0; i < 10; i++) {
        sec_free(&r);
        r = sec_req(&h, "GET", "/v1/jobs", "token-a", NULL);
        if (r.status != 200) break;
        ok++;
    }
    assert_true(ok >= 3 && ok < 10);
    assert_int_equal(r.status, 429);
    assert_string_equal(err_code(&r), "rate_limited");
    assert_true(r.retry_after >= 1);
    long wait = r.retry_after;
    sec_free(&r);
    /* another token has a bucket of its own */
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-b", NULL), 200);
    /* the health endpoints and /metrics are not limited */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(status_of(&h, "GET", "/healthz", NULL, NULL), 200);
        assert_int_equal(status_of(&h, "GET", "/metrics", NULL, NULL), 200);
    }
    assert_true(hs_metric(&h, "lathe_http_rate_limited_total{token=\"user:team-a\"}") >= 1);
    /* a refused change is audited */
    char *job = hs_job(&h, "rl-job", NULL, NULL);
    long st = 0;
    for (int i = 0; i < 10 && st != 429; i++) st = status_of(&h, "POST", "/v1/jobs", "token-a", job);
    assert_int_equal(st, 429);
    free(job);
    /* it recovers after Retry-After */
    hs_sleep((double)wait + 0.2);
    assert_int_equal(status_of(&h, "GET", "/v1/jobs", "token-a", NULL), 200);
    /* failed guesses are limited by address */
    st = 0;
    for (int i = 0; i < 10 && st != 429; i++) {
        char tok[32];
        snprintf(tok, sizeof tok, "guess-%d", i);
        st = status_of(&h, "GET", "/v1/jobs", tok, NULL);
        assert_true(st == 401 || st == 429);
    }
    assert_int_equal(st, 429);
    assert_true(hs_metric(&h, "lathe_http_rate_limited_total{token=\"unknown\"}") >= 1);
    hs_sleep(1.5);
    r = sec_req(&h, "GET", "/v1/audit", "token-admin", NULL);
    assert_int_equal(r.status, 200);
    json_t *e = find_row(json_object_get(r.json, "items"), "user:team-a", "POST", "/v1/jobs", 429);
    assert_non_null(e);
    assert_non_null(strstr(json_string_value(json_object_get(e, "detail")), "rate limited"));
    sec_free(&r);
    hs_finish(&h);
}

/* ---- TLS ---- */
static int run_argv(char *const argv[], const char *dir, const char *out_file)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (dir && chdir(dir) != 0) _exit(127);
        int fd = open(out_file ? out_file : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* The probe for hs_start_probe: /healthz over https with the CA (ctx). */
static bool probe_tls(const hs *h, void *ca)
{
    char *url = xasprintf("%s/healthz", h->addr);
    sec_resp r = sec_http("GET", url, NULL, NULL, ca);
    free(url);
    long st = r.status;
    sec_free(&r);
    return st == 200;
}

static void test_tls(void **state)
{
    (void)state;
    hs h;
    hs_init(&h, 1, "  tls: {certFile: cert.pem, keyFile: key.pem}\n");
    char *const req[] = {"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                         "key.pem", "-out", "cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
                         "-addext", "subjectAltName=IP:127.0.0.1", NULL};
    char *olog = path_join(h.dir, "openssl.log");
    int rc = run_argv(req, h.dir, olog);
    free(olog);
    if (rc == 127) {
        hs_free(&h);
        skip(); /* scripts/install-deps.sh installs openssl */
    }
    assert_int_equal(rc, 0);
    char *ca = path_join(h.dir, "cert.pem");
    if (!hs_start_probe(&h, probe_tls, ca)) hs_print_log(&h), fail();
    /* server.addr says https */
    assert_true(str_starts_with(h.addr, "https://127.0.0.1:"));
    char *url = xasprintf("%s/v1/jobs", h.addr);
    /* with the CA: works */
    sec_resp r = sec_http("GET", url, "token-a", NULL, ca);
    assert_int_equal(r.curl_code, CURLE_OK);
    assert_int_equal(r.status, 200);
    sec_free(&r);
    /* without it: the certificate is not trusted */
    r = sec_http("GET", url, "token-a", NULL, "/dev/null");
    assert_int_not_equal(r.curl_code, CURLE_OK);
    assert_int_equal(r.status, 0);
    sec_free(&r);
    /* plain http to the TLS port: no HTTP answer */
    char *plain = xasprintf("http://%s/v1/jobs", h.addr + strlen("https://"));
    r = sec_http("GET", plain, "token-a", NULL, NULL);
    assert_true(r.status != 200);
    sec_free(&r);
    free(plain);
    assert_true(log_has(&h, "listening on https://"));

    /* the lathe client: --cacert, LATHE_CACERT */
    char *lathe = xasprintf("%s/lathe", LATHE_BINARY_DIR);
    char *out = path_join(h.dir, "client.out");
    char *const get_ca[] = {lathe, "get", "jobs", "--server", h.addr, "--token", "token-a",
                            "--cacert", ca, NULL};
    assert_int_equal(run_argv(get_ca, h.dir, out), 0);
    char *const get_plain[] = {lathe, "get", "jobs", "--server", h.addr, "--token", "token-a",
                               NULL};
    unsetenv("LATHE_CACERT");
    assert_int_not_equal(run_argv(get_plain, h.dir, out), 0);
    char err[128];
    char *text = file_read_all(out, 1 << 16, NULL, err, sizeof err);
    assert_non_null(text);
    assert_non_null(strstr(text, "certificate"));
    free(text);
    setenv("LATHE_CACERT", ca, 1);
    assert_int_equal(run_argv(get_plain, h.dir, out), 0);
    unsetenv("LATHE_CACERT");
    /* the config file's cacert:, relative to its folder */
    hs_write(&h, "client.yaml", "cacert: cert.pem\n");
    char *cc = path_join(h.dir, "client.yaml");
    setenv("LATHE_CONFIG", cc, 1);
    assert_int_equal(run_argv(get_plain, "/", out), 0);
    /* a CA file that is not there: an error naming it */
    hs_write(&h, "client.yaml", "cacert: missing-ca.pem\n");
    assert_int_not_equal(run_argv(get_plain, "/", out), 0);
    text = file_read_all(out, 1 << 16, NULL, err, sizeof err);
    assert_non_null(text);
    assert_non_null(strstr(text, "missing-ca.pem"));
    free(text);
    unsetenv("LATHE_CONFIG");
    free(cc);
    free(out);
    free(lathe);
    free(url);
    free(ca);
    hs_finish(&h);
}

/* A tls: naming a missing file stops the start with the file's name. */
static void test_tls_missing_file(void **state)
{
    (void)state;
    hs h;
    hs_init(&h, 1, "  tls: {certFile: nowhere.pem, keyFile: key.pem}\n");
    assert_false(hs_start(&h));
    assert_true(log_has(&h, "tls.certFile"));
    assert_true(log_has(&h, "nowhere.pem"));
    hs_free(&h);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scope_expiry_audit),
        cmocka_unit_test(test_sighup_reload),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_tls_missing_file),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
