/* test_k8s_client.c: the Kubernetes client's calls. First against a
 * scripted local listener (k8s_test_http.h): what goes on the wire for
 * each verb, retries on 503 and Retry-After, the rate limit's lower bound,
 * a continue token's 410, an informer's transitions across a relist, and
 * the log follower's reconnection. Then against the API server double
 * (tests/k8s/kube-double) when it is there: CRUD, errors, pagination,
 * patches, deletes, retries, a watch across a compaction and an outage,
 * and the log follower across a reconnect. */
#include "k8s/k8s.h"
#include "k8s/k8s_internal.h"

#include "k8s_test_http.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

static k8s_client *plain_client(int port, int retries, double qps, int burst)
{
    k8s_config c = {0};
    c.server = xasprintf("http://127.0.0.1:%d", port);
    c.token = xstrdup("t");
    c.source = xstrdup("test");
    c.max_retries = retries;
    c.qps = qps;
    c.burst = burst;
    c.timeout = 5;
    char err[512];
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    assert_non_null(cl);
    k8s_config_free(&c);
    return cl;
}

static char *header_of(const char *req, const char *name)
{
    char *key = xasprintf("\r\n%s: ", name);
    const char *p = strstr(req, key);
    char *out = NULL;
    if (p) {
        p += strlen(key);
        const char *e = strstr(p, "\r\n");
        out = xstrndup(p, e ? (size_t)(e - p) : strlen(p));
    }
    free(key);
    return out;
}

static void assert_request(th_server *t, size_t i, const char *line, const char *ctype,
                           const char *body_part)
{
    char *r = th_request(t, i);
    assert_non_null(r);
    if (!str_starts_with(r, line)) fail_msg("request %zu: %.200s, wanted %s", i, r, line);
    if (ctype) {
        char *h = header_of(r, "Content-Type");
        assert_non_null(h);
        assert_string_equal(h, ctype);
        free(h);
    }
    if (body_part && !strstr(strstr(r, "\r\n\r\n"), body_part))
        fail_msg("request %zu's body lacks %s: %s", i, body_part, r);
    free(r);
}

/* ---- scripted ---- */
static void test_paths(void **state)
{
    (void)state;
    static const struct {
        k8s_ref ref;
        const char *want;
    } cases[] = {
        {{"batch/v1", "jobs", "team-a", "x", NULL}, "/apis/batch/v1/namespaces/team-a/jobs/x"},
        {{"v1", "pods", "n", "p", "log"}, "/api/v1/namespaces/n/pods/p/log"},
        {{"v1", "nodes", NULL, NULL, NULL}, "/api/v1/nodes"},
        {{"v1", "namespaces", NULL, "team-a", NULL}, "/api/v1/namespaces/team-a"},
        {{"batch/v1", "jobs", "t", "j", "status"}, "/apis/batch/v1/namespaces/t/jobs/j/status"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = k8s_path(&cases[i].ref);
        assert_string_equal(p, cases[i].want);
        free(p);
    }
}

static void test_verbs_on_wire(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_fallback(t, 200, "{\"kind\":\"Job\",\"metadata\":{\"name\":\"x\"}}");
    k8s_client *cl = plain_client(t->port, -1, 0, 0);
    k8s_ref job = {.api = "batch/v1", .resource = "jobs", .ns = "team-a", .name = "x"};
    json_t *obj = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "batch/v1", "kind", "Job",
                            "metadata", "name", "x");
    json_t *out = NULL;
    k8s_error e;
    assert_int_equal(k8s_apply(cl, &job, obj, true, &out, &e), K8S_OK);
    assert_string_equal(json_string_value(json_object_get(out, "kind")), "Job");
    json_decref(out);
    assert_int_equal(k8s_apply(cl, &job, obj, false, NULL, &e), K8S_OK);
    json_t *patch = json_pack("{s:{s:b}}", "spec", "suspend", 0);
    assert_int_equal(k8s_merge_patch(cl, &job, patch, NULL, &e), K8S_OK);
    k8s_ref st = job;
    st.sub = "status";
    assert_int_equal(k8s_replace(cl, &st, obj, NULL, &e), K8S_OK);
    assert_int_equal(k8s_delete(cl, &job, "Foreground", 0, &e), K8S_OK);
    assert_int_equal(k8s_delete(cl, &job, NULL, -1, &e), K8S_OK);
    k8s_ref pods = {.api = "v1", .resource = "pods", .ns = "team-a"};
    json_t *items;
    char *rv;
    th_add(t, "limit=", 200, NULL, "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[]}", 0);
    assert_int_equal(k8s_list(cl, &pods, "lathe.dev/job=a b", "status.phase=Running", 0, &items,
                              &rv, &e),
                     K8S_OK);
    assert_string_equal(rv, "7");
    assert_int_equal(json_array_size(items), 0);
    json_decref(items);
    free(rv);
    th_add(t, "/log", 200, "Content-Type: text/plain\r\n", "line one\nline two\n", 0);
    char *text;
    size_t len;
    assert_int_equal(k8s_pod_log(cl, "team-a", "p", "trainer", "2026-12-01T10:00:00Z", true,
                                 &text, &len, &e),
                     K8S_OK);
    assert_string_equal(text, "line one\nline two\n");
    assert_int_equal(len, 18);
    free(text);

    assert_request(t, 0, "PATCH /apis/batch/v1/namespaces/team-a/jobs/x?fieldManager=lathe&force=true HTTP/1.1",
                   "application/apply-patch+yaml", "\"kind\":\"Job\"");
    assert_request(t, 1, "PATCH /apis/batch/v1/namespaces/team-a/jobs/x?fieldManager=lathe HTTP/1.1",
                   "application/apply-patch+yaml", NULL);
    assert_request(t, 2, "PATCH /apis/batch/v1/namespaces/team-a/jobs/x HTTP/1.1",
                   "application/merge-patch+json", "{\"spec\":{\"suspend\":false}}");
    assert_request(t, 3, "PUT /apis/batch/v1/namespaces/team-a/jobs/x/status HTTP/1.1",
                   "application/json", NULL);
    assert_request(t, 4, "DELETE /apis/batch/v1/namespaces/team-a/jobs/x HTTP/1.1",
                   "application/json", "\"propagationPolicy\":\"Foreground\"");
    assert_request(t, 4, "DELETE", NULL, "\"gracePeriodSeconds\":0");
    assert_request(t, 5, "DELETE", NULL, "\"kind\":\"DeleteOptions\"");
    assert_request(t, 6, "GET /api/v1/namespaces/team-a/pods?limit=500&labelSelector=lathe.dev%2Fjob%3Da%20b&fieldSelector=status.phase%3DRunning HTTP/1.1",
                   NULL, NULL);
    assert_request(t, 7, "GET /api/v1/namespaces/team-a/pods/p/log?container=trainer&sinceTime=2026-12-01T10%3A00%3A00Z&timestamps=true HTTP/1.1",
                   NULL, NULL);
    char *r = th_request(t, 5);
    assert_null(strstr(r, "propagationPolicy"));
    assert_null(strstr(r, "gracePeriodSeconds"));
    free(r);
    k8s_stats s;
    k8s_client_stats(cl, &s);
    assert_int_equal(s.requests, 8);
    assert_int_equal(s.patches, 3);
    assert_int_equal(s.updates, 1);
    assert_int_equal(s.deletes, 2);
    assert_int_equal(s.lists, 1);
    assert_int_equal(s.logs, 1);
    json_decref(patch);
    json_decref(obj);
    k8s_client_free(cl);
    th_stop(t);
}

static const char unavailable[] =
    "{\"kind\":\"Status\",\"code\":503,\"reason\":\"ServiceUnavailable\",\"message\":\"busy\"}";

static void test_retries(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_add(t, NULL, 503, NULL, unavailable, 0);
    th_add(t, NULL, 502, NULL, "bad gateway", 0);
    th_add(t, NULL, 200, NULL, "{\"kind\":\"Pod\"}", 0);
    th_add(t, NULL, 404, NULL, "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\",\"message\":\"pods \\\"p\\\" not found\"}", 0);
    th_fallback(t, 503, unavailable);
    k8s_client *cl = plain_client(t->port, 2, 0, 0);
    k8s_ref pod = {.api = "v1", .resource = "pods", .ns = "n", .name = "p"};
    k8s_error e;
    assert_int_equal(k8s_get(cl, &pod, NULL, &e), K8S_OK);
    k8s_stats s;
    k8s_client_stats(cl, &s);
    assert_int_equal(s.requests, 3);
    assert_int_equal(s.retries, 2);
    /* a 404 is not retried */
    assert_int_equal(k8s_get(cl, &pod, NULL, &e), K8S_E_NOT_FOUND);
    k8s_client_stats(cl, &s);
    assert_int_equal(s.requests, 4);
    /* 503 after the retries: 1 + 2 requests */
    assert_int_equal(k8s_get(cl, &pod, NULL, &e), K8S_E_SERVER);
    assert_int_equal(e.http, 503);
    assert_non_null(strstr(e.message, "busy"));
    assert_non_null(strstr(e.message, "overloaded or failing"));
    k8s_client_stats(cl, &s);
    assert_int_equal(s.requests, 7);
    assert_int_equal(s.retries, 4);
    k8s_client_free(cl);
    /* connection refused: retried, then unreachable */
    int port = t->port;
    th_stop(t);
    cl = plain_client(port, 2, 0, 0);
    assert_int_equal(k8s_get(cl, &pod, NULL, &e), K8S_E_UNREACHABLE);
    k8s_client_stats(cl, &s);
    assert_int_equal(s.requests, 3);
    assert_int_equal(s.retries, 2);
    k8s_client_free(cl);
}

static int count_line(void *ud, const char *line, size_t len, bool first, bool more)
{
    sb *out = ud;
    sb_printf(out, "[%.*s%s%s]", (int)len, line, first ? "" : "<", more ? ">" : "");
    return 0;
}

static void test_line_splitter(void **state)
{
    (void)state;
    k8s_lines l;
    sb out;
    sb_init(&out);
    k8s_lines_init(&l, 8, false);
    assert_int_equal(k8s_lines_feed(&l, "ab\r\ncd", 6, count_line, &out), 0);
    assert_int_equal(k8s_lines_feed(&l, "e\n\n", 3, count_line, &out), 0);
    assert_int_equal(k8s_lines_feed(&l, "123456789\n", 10, count_line, &out), -1);
    assert_true(l.overflow);
    assert_string_equal(sb_str(&out), "[ab][cde][]");
    k8s_lines_free(&l);
    sb_clear(&out);
    k8s_lines_init(&l, 4, true);
    assert_int_equal(k8s_lines_feed(&l, "1234567890\nab", 13, count_line, &out), 0);
    assert_int_equal(k8s_lines_finish(&l, count_line, &out), 0);
    assert_string_equal(sb_str(&out), "[1234>][5678<>][90<][ab]");
    k8s_lines_free(&l);
    sb_free(&out);
}

static void test_retry_after(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_add(t, NULL, 429, "Retry-After: 1\r\n",
           "{\"kind\":\"Status\",\"code\":429,\"reason\":\"TooManyRequests\"}", 0);
    th_fallback(t, 200, "{}");
    k8s_client *cl = plain_client(t->port, 0, 0, 0);
    k8s_ref pod = {.api = "v1", .resource = "pods", .ns = "n", .name = "p"};
    k8s_error e;
    double t0 = k8s_now_mono();
    assert_int_equal(k8s_get(cl, &pod, NULL, &e), K8S_OK);
    assert_true(k8s_now_mono() - t0 >= 0.95);
    k8s_client_free(cl);
    th_stop(t);
}

typedef struct burst_arg {
    k8s_client *cl;
    int n;
} burst_arg;

static void *burst_thread(void *arg)
{
    burst_arg *b = arg;
    k8s_ref pod = {.api = "v1", .resource = "pods", .ns = "n", .name = "p"};
    for (int i = 0; i < b->n; i++) {
        k8s_error e;
        if (k8s_get(b->cl, &pod, NULL, &e) != K8S_OK) abort();
    }
    return NULL;
}

static void test_rate_limit(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_fallback(t, 200, "{}");
    /* qps 20, burst 5: 25 requests from 5 threads take at least (25 - 5) / 20 s */
    k8s_client *cl = plain_client(t->port, -1, 20, 5);
    pthread_t th[5];
    burst_arg b = {cl, 5};
    double t0 = k8s_now_mono();
    for (int i = 0; i < 5; i++) pthread_create(&th[i], NULL, burst_thread, &b);
    for (int i = 0; i < 5; i++) pthread_join(th[i], NULL);
    double took = k8s_now_mono() - t0;
    if (took < 1.0 - 0.02) fail_msg("25 requests at qps 20 burst 5 took %.3f s", took);
    k8s_stats s;
    k8s_client_stats(cl, &s);
    assert_int_equal(s.requests, 25);
    assert_true(s.throttled >= 15);
    k8s_client_free(cl);
    th_stop(t);
}

static void test_continue_gone(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_add(t, "limit=2 ", 200, NULL,
           "{\"metadata\":{\"resourceVersion\":\"5\",\"continue\":\"c1\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}", 0);
    th_add(t, "continue=c1", 410, NULL,
           "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"the continue token is too old\"}", 0);
    th_add(t, "limit=2 ", 200, NULL,
           "{\"metadata\":{\"resourceVersion\":\"9\",\"continue\":\"c2\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}", 0);
    th_add(t, "continue=c2", 200, NULL,
           "{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[{\"metadata\":{\"name\":\"c\"}}]}", 0);
    k8s_client *cl = plain_client(t->port, -1, 0, 0);
    k8s_ref pods = {.api = "v1", .resource = "pods", .ns = "n"};
    json_t *items;
    char *rv;
    k8s_error e;
    assert_int_equal(k8s_list(cl, &pods, NULL, NULL, 2, &items, &rv, &e), K8S_OK);
    assert_int_equal(json_array_size(items), 3);
    assert_string_equal(rv, "9");
    assert_int_equal(th_count(t), 4);
    json_decref(items);
    free(rv);
    /* a second 410 is an error */
    th_add(t, "limit=2 ", 200, NULL, "{\"metadata\":{\"continue\":\"c3\"},\"items\":[]}", 0);
    th_add(t, "continue=c3", 410, NULL, "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}", 0);
    th_add(t, "limit=2 ", 200, NULL, "{\"metadata\":{\"continue\":\"c4\"},\"items\":[]}", 0);
    th_add(t, "continue=c4", 410, NULL, "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}", 0);
    assert_int_equal(k8s_list(cl, &pods, NULL, NULL, 2, &items, &rv, &e), K8S_E_GONE);
    assert_non_null(strstr(e.message, "listing pods in n"));
    k8s_client_free(cl);
    th_stop(t);
}

/* ---- an informer's recorder ---- */
typedef struct recorder {
    pthread_mutex_t mu;
    sb events; /* "ADDED a 5\n" ... */
    size_t n, syncs, unsyncs;
    char why[800];
} recorder;

static void rec_init(recorder *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    sb_init(&r->events);
}

static void rec_free(recorder *r)
{
    sb_free(&r->events);
    pthread_mutex_destroy(&r->mu);
}

static const char *meta(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(json_object_get(o, "metadata"), k);
    return json_is_string(v) ? json_string_value(v) : "?";
}

static void rec_event(void *ud, k8s_event_type type, const json_t *obj)
{
    recorder *r = ud;
    static const char *const names[] = {"ADDED", "MODIFIED", "DELETED"};
    pthread_mutex_lock(&r->mu);
    sb_printf(&r->events, "%s %s %s\n", names[type], meta(obj, "name"),
              meta(obj, "resourceVersion"));
    r->n++;
    pthread_mutex_unlock(&r->mu);
}

static void rec_sync(void *ud, bool synced, const char *why)
{
    recorder *r = ud;
    pthread_mutex_lock(&r->mu);
    if (synced) r->syncs++;
    else {
        r->unsyncs++;
        snprintf(r->why, sizeof r->why, "%s", why ? why : "");
    }
    pthread_mutex_unlock(&r->mu);
}

/* Waits until fn(r) holds, at most `seconds`. */
static bool rec_wait(recorder *r, bool (*fn)(recorder *, void *), void *arg, double seconds)
{
    double end = k8s_now_mono() + seconds;
    while (k8s_now_mono() < end) {
        pthread_mutex_lock(&r->mu);
        bool ok = fn(r, arg);
        pthread_mutex_unlock(&r->mu);
        if (ok) return true;
        th_sleep(0.02);
    }
    return false;
}

static bool has_n(recorder *r, void *arg)
{
    return r->n >= *(size_t *)arg;
}

static char *rec_take(recorder *r)
{
    pthread_mutex_lock(&r->mu);
    char *s = xstrdup(sb_str(&r->events));
    pthread_mutex_unlock(&r->mu);
    return s;
}

#define POD(name, rv) "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"n\",\"resourceVersion\":\"" rv "\"}}"
#define EV(type, name, rv) "{\"type\":\"" type "\",\"object\":" POD(name, rv) "}\n"

static void test_informer_scripted(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_add(t, "limit=", 200, NULL,
           "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[" POD("a", "5") "," POD("b", "6") "]}", 0);
    th_add(t, "watch=1", 200, NULL,
           EV("MODIFIED", "a", "11") EV("MODIFIED", "a", "9") EV("ADDED", "c", "12")
           "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"13\"}}}\n",
           0);
    th_add(t, "watch=1", 200, NULL,
           "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"too old resource version\"}}\n",
           0);
    th_add(t, "limit=", 200, NULL,
           "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[" POD("a", "11") "," POD("c", "14") "," POD("d", "15") "]}", 0);
    th_add(t, "watch=1", 200, NULL, EV("DELETED", "d", "21") EV("MODIFIED", "c", "14"), 0);
    k8s_client *cl = plain_client(t->port, -1, 0, 0);
    k8s_ref pods = {.api = "v1", .resource = "pods", .ns = "n"};
    recorder r;
    rec_init(&r);
    char err[256];
    k8s_informer *inf = k8s_informer_start(cl, &pods, "app=x", rec_event, rec_sync, &r, err,
                                           sizeof err);
    assert_non_null(inf);
    size_t want = 8;
    assert_true(rec_wait(&r, has_n, &want, 20));
    th_sleep(0.2); /* nothing more comes */
    char *ev = rec_take(&r);
    assert_string_equal(ev, "ADDED a 5\nADDED b 6\nMODIFIED a 11\nADDED c 12\n"
                            "MODIFIED c 14\nADDED d 15\nDELETED b 6\nDELETED d 21\n");
    free(ev);
    assert_true(k8s_informer_synced(inf));
    json_t *a = k8s_informer_get(inf, "n", "a");
    assert_non_null(a);
    assert_string_equal(meta(a, "resourceVersion"), "11");
    json_decref(a);
    assert_null(k8s_informer_get(inf, "n", "b"));
    assert_null(k8s_informer_get(inf, "n", "d"));
    k8s_informer_stats s;
    k8s_informer_stats_get(inf, &s);
    assert_int_equal(s.lists, 2);
    assert_int_equal(s.gone, 1);
    assert_int_equal(s.bookmarks, 1);
    assert_int_equal(s.events, 8);
    assert_true(s.watches >= 3);
    /* the watches: from the list's RV, then from the bookmark's */
    char *w1 = th_request(t, 1), *w2 = th_request(t, 2);
    assert_non_null(strstr(w1, "watch=1&allowWatchBookmarks=true&timeoutSeconds="));
    assert_non_null(strstr(w1, "&resourceVersion=10&labelSelector=app%3Dx HTTP"));
    assert_non_null(strstr(w2, "&resourceVersion=13&"));
    free(w1);
    free(w2);
    pthread_mutex_lock(&r.mu);
    assert_int_equal(r.syncs, 2);
    assert_int_equal(r.unsyncs, 0);
    pthread_mutex_unlock(&r.mu);
    double t0 = k8s_now_mono();
    k8s_informer_free(inf);
    assert_true(k8s_now_mono() - t0 < 5);
    k8s_client_free(cl);
    th_stop(t);
    rec_free(&r);
}

static bool has_unsync(recorder *r, void *arg)
{
    return r->unsyncs > 0;
}

static void test_informer_unreachable(void **state)
{
    (void)state;
    th_server *t = th_start();
    int port = t->port;
    th_stop(t);
    k8s_client *cl = plain_client(port, -1, 0, 0);
    k8s_ref pods = {.api = "v1", .resource = "pods", .ns = "n"};
    recorder r;
    rec_init(&r);
    char err[256];
    k8s_informer *inf = k8s_informer_start(cl, &pods, NULL, rec_event, rec_sync, &r, err,
                                           sizeof err);
    assert_true(rec_wait(&r, has_unsync, NULL, 20));
    assert_non_null(strstr(r.why, "is the API server at"));
    assert_false(k8s_informer_synced(inf));
    k8s_informer_free(inf);
    k8s_client_free(cl);
    rec_free(&r);
}

/* ---- the log follower's recorder ---- */
typedef struct lines {
    pthread_mutex_t mu;
    sb text;
    size_t n;
    char *end;
    char last_ts[64];
} lines;

static void on_line(void *ud, const char *ts, const char *line, size_t len)
{
    lines *l = ud;
    pthread_mutex_lock(&l->mu);
    if (len > 100) sb_printf(&l->text, "[%zu bytes]\n", len);
    else sb_printf(&l->text, "%.*s\n", (int)len, line);
    snprintf(l->last_ts, sizeof l->last_ts, "%s", ts ? ts : "");
    l->n++;
    pthread_mutex_unlock(&l->mu);
}

static void on_end(void *ud, const char *why)
{
    lines *l = ud;
    pthread_mutex_lock(&l->mu);
    if (l->end) abort(); /* once */
    l->end = xstrdup(why);
    pthread_mutex_unlock(&l->mu);
}

static bool wait_end(lines *l, double seconds)
{
    double end = k8s_now_mono() + seconds;
    while (k8s_now_mono() < end) {
        pthread_mutex_lock(&l->mu);
        bool ok = l->end != NULL;
        pthread_mutex_unlock(&l->mu);
        if (ok) return true;
        th_sleep(0.02);
    }
    return false;
}

static const char running[] =
    "{\"kind\":\"Pod\",\"status\":{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"trainer\",\"state\":{\"running\":{}}}]}}";
static const char terminated[] =
    "{\"kind\":\"Pod\",\"status\":{\"phase\":\"Succeeded\",\"containerStatuses\":[{\"name\":\"trainer\",\"state\":{\"terminated\":{\"exitCode\":0}}}]}}";

static void test_log_follower_scripted(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_add(t, "follow=true", 200, NULL,
           "2026-12-01T10:00:00.5Z one\n2026-12-01T10:00:01.25Z two\n2026-12-01T10:00:01.25Z three\n",
           0);
    th_add(t, "/pods/p HTTP", 200, NULL, running, 0);
    /* the reconnection gives the second again, and more */
    size_t big = (5u << 20) / 2;
    sb second;
    sb_init(&second);
    sb_puts(&second, "2026-12-01T10:00:01Z zero\n2026-12-01T10:00:01.25Z two\n"
                     "2026-12-01T10:00:01.25Z three\n2026-12-01T10:00:01.250000001Z four\n"
                     "2026-12-01T10:00:03Z ");
    for (size_t i = 0; i < big; i++) sb_putc(&second, 'x');
    sb_puts(&second, "\n2026-12-01T10:00:04Z five\n");
    th_add(t, "sinceTime=2026-12-01T10%3A00%3A01.25Z", 200, NULL, sb_str(&second), 0);
    th_add(t, "/pods/p HTTP", 200, NULL, terminated, 0);
    k8s_client *cl = plain_client(t->port, -1, 0, 0);
    lines l = {0};
    pthread_mutex_init(&l.mu, NULL);
    sb_init(&l.text);
    k8s_log_follower *f = k8s_log_follow(cl, "n", "p", "trainer", NULL, 0, on_line, on_end, &l);
    assert_non_null(f);
    assert_true(wait_end(&l, 20));
    assert_string_equal(l.end, "container ended");
    assert_string_equal(sb_str(&l.text), "one\ntwo\nthree\nfour\n[1048555 bytes]\n"
                                         "[1048576 bytes]\n[524309 bytes]\nfive\n");
    assert_string_equal(l.last_ts, "2026-12-01T10:00:04Z");
    assert_int_equal(k8s_log_follower_skipped(f), 3);
    k8s_log_follower_free(f);
    free(l.end);
    l.end = NULL;
    sb_clear(&l.text);

    /* resumed after a restart from (time, count) */
    th_add(t, "sinceTime=2026-12-01T10%3A00%3A01.25Z", 200, NULL,
           "2026-12-01T10:00:01.25Z two\n2026-12-01T10:00:01.25Z three\n", 0);
    th_add(t, "/pods/p HTTP", 404, NULL, "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}", 0);
    f = k8s_log_follow(cl, "n", "p", "trainer", "2026-12-01T10:00:01.25Z", 1, on_line, on_end, &l);
    assert_true(wait_end(&l, 20));
    assert_string_equal(l.end, "pod gone");
    assert_string_equal(sb_str(&l.text), "three\n");
    k8s_log_follower_free(f);
    free(l.end);
    l.end = NULL;
    sb_clear(&l.text);

    /* a pod that is not there */
    th_add(t, "follow=true", 404, NULL, "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}", 0);
    f = k8s_log_follow(cl, "n", "gone", NULL, NULL, 0, on_line, on_end, &l);
    assert_true(wait_end(&l, 20));
    assert_string_equal(l.end, "pod gone");
    k8s_log_follower_free(f);
    free(l.end);

    sb_free(&second);
    sb_free(&l.text);
    pthread_mutex_destroy(&l.mu);
    k8s_client_free(cl);
    th_stop(t);
}

static void test_lines_and_events(void **state)
{
    (void)state;
    k8s_wevent ev;
    char err[256];
    const char *good = EV("ADDED", "a", "5");
    assert_true(k8s_watch_parse_line(good, strlen(good) - 1, &ev, err, sizeof err));
    assert_int_equal(ev.type, K8S_W_ADDED);
    assert_string_equal(ev.name, "a");
    assert_string_equal(ev.ns, "n");
    assert_string_equal(ev.rv, "5");
    k8s_wevent_free(&ev);
    static const char *const bad[] = {"", "{", "[]", "{\"type\":\"ADDED\"}",
                                      "{\"type\":\"NOPE\",\"object\":{}}",
                                      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(k8s_watch_parse_line(bad[i], strlen(bad[i]), &ev, err, sizeof err));
    assert_int_equal(k8s_rv_cmp("9", "10"), -1);
    assert_int_equal(k8s_rv_cmp("10", "10"), 0);
    assert_int_equal(k8s_rv_cmp("abc", "abd"), 2);
    assert_int_equal(k8s_rv_cmp("abc", "abc"), 0);
    int64_t s;
    int32_t ns;
    assert_true(k8s_time_parse("2026-12-01T10:00:01.25Z", 23, &s, &ns));
    assert_int_equal(s, 1796119201);
    assert_int_equal(ns, 250000000);
    assert_true(k8s_time_parse("2026-12-01T12:00:01+02:00", 25, &s, &ns));
    assert_int_equal(s, 1796119201);
    assert_false(k8s_time_parse("2026-12-01 10:00:01Z", 20, &s, &ns));
    assert_true(k8s_backoff(0, 0.2, 5, 0) >= 0.1 && k8s_backoff(0, 0.2, 5, 0.999) <= 0.2);
    assert_true(k8s_backoff(10, 0.2, 5, 0.999) <= 5.0);
    assert_true(k8s_backoff(10, 0.2, 5, 0) >= 2.5);
}

/* ---- against the double ---- */
typedef struct dbl {
    pid_t pid;
    char *dir;
    k8s_config cfg;
    k8s_client *cl;
} dbl;

static dbl *the_double; /* the double of the group, for the tests (test code) */

static int double_setup(void **state)
{
    static const char *const extra[] = {"--bookmark-interval", "1", NULL};
    dbl *d = xcalloc(1, sizeof *d);
    *state = d;
    int up = th_double_start("/tmp/lathe-k8s-double-XXXXXX", extra, &d->pid, &d->dir, &d->cfg);
    if (up == 1) { /* no double here: the tests skip */
        free(d);
        *state = NULL;
        return 0;
    }
    if (up != 0) return -1;
    char err[1024];
    d->cl = k8s_client_new(&d->cfg, err, sizeof err);
    if (!d->cl) return -1;
    the_double = d;
    *state = d;
    return 0;
}

static int double_teardown(void **state)
{
    dbl *d = *state;
    if (!d) return 0;
    k8s_client_free(d->cl);
    k8s_config_free(&d->cfg);
    th_double_stop(d->pid, d->dir);
    free(d);
    the_double = NULL;
    return 0;
}

static dbl *need_double(void **state)
{
    dbl *d = *state;
    if (!d) skip();
    return d;
}

/* POST /_double/... */
static void control(k8s_client *cl, const char *path)
{
    k8s_call c = {.method = "POST", .kind = K8S_K_CREATE, .ask = {.verb = "create"},
                  .path = path, .ctype = "application/json", .body = "{}", .body_len = 2};
    sb body;
    sb_init(&body);
    long http;
    k8s_error e;
    if (k8s_call_do(cl, &c, &http, &body, &e) != K8S_OK) fail_msg("%s: %s", path, e.message);
    sb_free(&body);
}

static void make_ns(k8s_client *cl, const char *ns)
{
    k8s_ref ref = {.api = "v1", .resource = "namespaces", .name = ns};
    json_t *o = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                          "metadata", "name", ns);
    k8s_error e;
    k8s_rc rc = k8s_create(cl, &ref, o, NULL, &e);
    if (rc != K8S_OK && rc != K8S_E_EXISTS) fail_msg("namespace %s: %s", ns, e.message);
    json_decref(o);
}

static json_t *configmap(const char *ns, const char *name, const char *label, const char *v)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind",
                     "ConfigMap", "metadata", "name", name, "namespace", ns, "labels", "lt",
                     label, "data", "v", v);
}

static k8s_rc put_cm(k8s_client *cl, const char *ns, const char *name, const char *label,
                     const char *v, k8s_error *e)
{
    k8s_ref ref = {.api = "v1", .resource = "configmaps", .ns = ns, .name = name};
    json_t *o = configmap(ns, name, label, v);
    k8s_rc rc = k8s_apply(cl, &ref, o, true, NULL, e);
    json_decref(o);
    return rc;
}

static void test_double_crud(void **state)
{
    dbl *d = need_double(state);
    k8s_client *cl = d->cl;
    make_ns(cl, "lt-crud");
    k8s_ref cm = {.api = "v1", .resource = "configmaps", .ns = "lt-crud", .name = "a"};
    json_t *o = configmap("lt-crud", "a", "crud", "1"), *out = NULL;
    k8s_error e;
    assert_int_equal(k8s_create(cl, &cm, o, &out, &e), K8S_OK);
    assert_string_equal(meta(out, "name"), "a");
    json_decref(out);
    /* again: AlreadyExists, with the sentence */
    assert_int_equal(k8s_create(cl, &cm, o, NULL, &e), K8S_E_EXISTS);
    assert_int_equal(e.http, 409);
    assert_string_equal(e.reason, "AlreadyExists");
    assert_non_null(strstr(e.message, "creating configmaps a in lt-crud"));
    assert_int_equal(k8s_get(cl, &cm, &out, &e), K8S_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "data"), "v")), "1");
    /* replace with the object read */
    json_object_set_new(json_object_get(out, "data"), "v", json_string("2"));
    json_t *rep = NULL;
    assert_int_equal(k8s_replace(cl, &cm, out, &rep, &e), K8S_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(rep, "data"), "v")), "2");
    /* a stale resourceVersion: Conflict */
    assert_int_equal(k8s_replace(cl, &cm, out, NULL, &e), K8S_E_CONFLICT);
    assert_non_null(strstr(e.message, "updating configmaps a in lt-crud"));
    json_decref(out);
    json_decref(rep);
    json_t *patch = json_pack("{s:{s:s}}", "data", "w", "3");
    assert_int_equal(k8s_merge_patch(cl, &cm, patch, &out, &e), K8S_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "data"), "w")), "3");
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "data"), "v")), "2");
    json_decref(out);
    json_decref(patch);
    /* server-side apply creates and updates */
    assert_int_equal(put_cm(cl, "lt-crud", "b", "crud", "x", &e), K8S_OK);
    assert_int_equal(put_cm(cl, "lt-crud", "b", "crud", "y", &e), K8S_OK);
    k8s_ref cmb = cm;
    cmb.name = "b";
    assert_int_equal(k8s_get(cl, &cmb, &out, &e), K8S_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "data"), "v")), "y");
    json_decref(out);
    /* delete, foreground */
    assert_int_equal(k8s_delete(cl, &cm, "Foreground", 0, &e), K8S_OK);
    double end = k8s_now_mono() + 10;
    k8s_rc rc;
    while ((rc = k8s_get(cl, &cm, NULL, &e)) == K8S_OK && k8s_now_mono() < end) th_sleep(0.05);
    assert_int_equal(rc, K8S_E_NOT_FOUND);
    assert_int_equal(e.http, 404);
    assert_non_null(strstr(e.message, "getting configmaps a in lt-crud"));
    assert_non_null(strstr(e.message, "not found"));
    assert_int_equal(k8s_delete(cl, &cm, NULL, -1, &e), K8S_E_NOT_FOUND);
    /* a namespace that does not exist */
    k8s_ref job = {.api = "batch/v1", .resource = "jobs", .ns = "lt-nowhere", .name = "lathe-x-1"};
    json_t *j = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "batch/v1", "kind", "Job",
                          "metadata", "name", "lathe-x-1");
    assert_int_equal(k8s_create(cl, &job, j, NULL, &e), K8S_E_NOT_FOUND);
    assert_non_null(strstr(e.message, "creating jobs.batch lathe-x-1 in lt-nowhere"));
    assert_non_null(strstr(e.message, "create the namespace"));
    /* an invalid Job: 422 with its causes */
    job.ns = "lt-crud";
    assert_int_equal(k8s_create(cl, &job, j, NULL, &e), K8S_E_INVALID);
    assert_int_equal(e.http, 422);
    assert_non_null(strstr(e.message, "causes: spec"));
    assert_non_null(strstr(e.message, "fix: fix the fields named above"));
    json_decref(j);
    json_decref(o);
}

static void test_double_pagination(void **state)
{
    dbl *d = need_double(state);
    k8s_client *cl = d->cl;
    make_ns(cl, "lt-page");
    k8s_error e;
    for (int i = 0; i < 25; i++) {
        char name[16];
        snprintf(name, sizeof name, "cm-%02d", i);
        assert_int_equal(put_cm(cl, "lt-page", name, "page", "v", &e), K8S_OK);
    }
    assert_int_equal(put_cm(cl, "lt-page", "other", "no", "v", &e), K8S_OK);
    k8s_stats s0, s1;
    k8s_client_stats(cl, &s0);
    k8s_ref cms = {.api = "v1", .resource = "configmaps", .ns = "lt-page"};
    json_t *items;
    char *rv;
    assert_int_equal(k8s_list(cl, &cms, "lt=page", NULL, 10, &items, &rv, &e), K8S_OK);
    k8s_client_stats(cl, &s1);
    assert_int_equal(json_array_size(items), 25);
    assert_int_equal(s1.lists - s0.lists, 3);
    assert_true(rv[0] != '\0');
    for (size_t i = 0; i < 25; i++) {
        char name[16];
        snprintf(name, sizeof name, "cm-%02zu", i);
        bool found = false;
        for (size_t k = 0; k < 25; k++)
            if (strcmp(meta(json_array_get(items, k), "name"), name) == 0) found = true;
        assert_true(found);
    }
    json_decref(items);
    free(rv);
    /* a field selector */
    assert_int_equal(k8s_list(cl, &cms, NULL, "metadata.name=other", 0, &items, NULL, &e), K8S_OK);
    assert_int_equal(json_array_size(items), 1);
    json_decref(items);
}

static void test_double_client_cert(void **state)
{
    dbl *d = need_double(state);
    char *kc = path_join(d->dir, "kubeconfig-cert");
    k8s_config c;
    char err[1024];
    assert_true(k8s_config_kubeconfig(&c, kc, NULL, err, sizeof err));
    assert_non_null(c.cert_data);
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    k8s_ref ns = {.api = "v1", .resource = "namespaces", .name = "default"};
    k8s_error e;
    assert_int_equal(k8s_get(cl, &ns, NULL, &e), K8S_OK);
    k8s_client_free(cl);
    /* a wrong CA: verification fails, no retry helps */
    free(c.ca_data);
    c.ca_data = xstrdup(
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ0ZtZXN0LWNhLW5vdC10aGUtcmlnaHQtb25lMAoGCCqGSM49BAMC\n-----END CERTIFICATE-----\n");
    c.max_retries = -1;
    cl = k8s_client_new(&c, err, sizeof err);
    assert_int_equal(k8s_get(cl, &ns, NULL, &e), K8S_E_UNREACHABLE);
    assert_non_null(strstr(e.message, "is the API server at"));
    k8s_client_free(cl);
    k8s_config_free(&c);
    free(kc);
}

static void test_double_retries(void **state)
{
    dbl *d = need_double(state);
    k8s_client *cl = d->cl;
    k8s_ref ns = {.api = "v1", .resource = "namespaces", .name = "default"};
    k8s_error e;
    control(cl, "/_double/fail?status=503&count=3");
    k8s_stats s0, s1;
    k8s_client_stats(cl, &s0);
    assert_int_equal(k8s_get(cl, &ns, NULL, &e), K8S_OK);
    k8s_client_stats(cl, &s1);
    assert_int_equal(s1.retries - s0.retries, 3);
    assert_int_equal(s1.requests - s0.requests, 4);
    /* more failures than retries */
    k8s_config c;
    k8s_config_copy(&c, &d->cfg);
    c.max_retries = 1;
    char err[256];
    k8s_client *few = k8s_client_new(&c, err, sizeof err);
    control(cl, "/_double/fail?status=500&count=2");
    assert_int_equal(k8s_get(few, &ns, NULL, &e), K8S_E_SERVER);
    assert_int_equal(e.http, 500);
    k8s_client_free(few);
    k8s_config_free(&c);
    /* rate limit against the double: 25 requests at qps 20 burst 5 */
    k8s_config_copy(&c, &d->cfg);
    c.qps = 20;
    c.burst = 5;
    k8s_client *slow = k8s_client_new(&c, err, sizeof err);
    double t0 = k8s_now_mono();
    for (int i = 0; i < 25; i++) assert_int_equal(k8s_get(slow, &ns, NULL, &e), K8S_OK);
    assert_true(k8s_now_mono() - t0 >= 1.0 - 0.02);
    k8s_client_free(slow);
    k8s_config_free(&c);
}

/* Every object's transitions in rec's record: "name:TYPE ..." per object. */
static char *per_object(const char *events, const char *name)
{
    sb out;
    sb_init(&out);
    char *copy = xstrdup(events);
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
        char type[16], nm[64], rv[32];
        if (sscanf(line, "%15s %63s %31s", type, nm, rv) == 3 && strcmp(nm, name) == 0)
            sb_printf(&out, "%s%s", out.len ? " " : "", type);
    }
    free(copy);
    return sb_take(&out);
}

typedef struct want_objs {
    const char *name, *seq;
} want_objs;

static bool has_seqs(recorder *r, void *arg)
{
    const want_objs *w = arg;
    for (; w->name; w++) {
        char *got = per_object(sb_str(&r->events), w->name);
        bool ok = strcmp(got, w->seq) == 0;
        free(got);
        if (!ok) return false;
    }
    return true;
}

static void check_seqs(recorder *r, const want_objs *w)
{
    if (!rec_wait(r, has_seqs, (void *)w, 30)) {
        char *ev = rec_take(r);
        fail_msg("events:\n%s", ev);
    }
    th_sleep(0.5); /* and nothing repeated after */
    pthread_mutex_lock(&r->mu);
    bool still = has_seqs(r, (void *)w);
    pthread_mutex_unlock(&r->mu);
    if (!still) {
        char *ev = rec_take(r);
        fail_msg("repeated events:\n%s", ev);
    }
}

static bool synced_again(recorder *r, void *arg)
{
    return r->unsyncs > 0 && r->syncs > *(size_t *)arg;
}

static void test_double_watch_compaction(void **state)
{
    dbl *d = need_double(state);
    k8s_client *cl = d->cl;
    make_ns(cl, "lt-watch");
    k8s_error e;
    assert_int_equal(put_cm(cl, "lt-watch", "a", "w", "1", &e), K8S_OK);
    assert_int_equal(put_cm(cl, "lt-watch", "b", "w", "1", &e), K8S_OK);
    k8s_ref cms = {.api = "v1", .resource = "configmaps", .ns = "lt-watch"};
    recorder r;
    rec_init(&r);
    char err[256];
    k8s_informer *inf = k8s_informer_start(cl, &cms, "lt=w", rec_event, rec_sync, &r, err, sizeof err);
    const want_objs w0[] = {{"a", "ADDED"}, {"b", "ADDED"}, {NULL, NULL}};
    check_seqs(&r, w0);
    assert_int_equal(put_cm(cl, "lt-watch", "a", "w", "2", &e), K8S_OK);
    const want_objs w1[] = {{"a", "ADDED MODIFIED"}, {"b", "ADDED"}, {NULL, NULL}};
    check_seqs(&r, w1);
    /* compaction (a 410 ERROR event), then changes while the informer relists */
    control(cl, "/_double/compact?mode=event");
    assert_int_equal(put_cm(cl, "lt-watch", "b", "w", "2", &e), K8S_OK);
    k8s_ref a = {.api = "v1", .resource = "configmaps", .ns = "lt-watch", .name = "a"};
    assert_int_equal(k8s_delete(cl, &a, NULL, 0, &e), K8S_OK);
    assert_int_equal(put_cm(cl, "lt-watch", "c", "w", "1", &e), K8S_OK);
    const want_objs w2[] = {{"a", "ADDED MODIFIED DELETED"}, {"b", "ADDED MODIFIED"},
                            {"c", "ADDED"}, {NULL, NULL}};
    check_seqs(&r, w2);
    k8s_informer_stats s;
    k8s_informer_stats_get(inf, &s);
    assert_true(s.gone >= 1);
    assert_true(s.lists >= 2);
    /* the other kind: an HTTP 410 when the watch starts again */
    control(cl, "/_double/compact?mode=status");
    assert_int_equal(put_cm(cl, "lt-watch", "c", "w", "2", &e), K8S_OK);
    assert_int_equal(put_cm(cl, "lt-watch", "d", "w", "1", &e), K8S_OK);
    const want_objs w3[] = {{"a", "ADDED MODIFIED DELETED"}, {"b", "ADDED MODIFIED"},
                            {"c", "ADDED MODIFIED"}, {"d", "ADDED"}, {NULL, NULL}};
    check_seqs(&r, w3);
    json_t *c = k8s_informer_get(inf, "lt-watch", "c");
    assert_non_null(c);
    assert_string_equal(json_string_value(json_object_get(json_object_get(c, "data"), "v")), "2");
    json_decref(c);
    assert_null(k8s_informer_get(inf, "lt-watch", "a"));

    /* an outage: unsynced, then synced again, and nothing lost */
    size_t syncs;
    pthread_mutex_lock(&r.mu);
    syncs = r.syncs;
    pthread_mutex_unlock(&r.mu);
    control(cl, "/_double/outage?seconds=2");
    th_sleep(0.3);
    /* the first write after the outage, while the informer may still back off */
    double end = k8s_now_mono() + 30;
    while (put_cm(cl, "lt-watch", "b", "w", "3", &e) != K8S_OK && k8s_now_mono() < end) th_sleep(0.05);
    k8s_ref b = {.api = "v1", .resource = "configmaps", .ns = "lt-watch", .name = "b"};
    assert_int_equal(k8s_delete(cl, &b, NULL, 0, &e), K8S_OK);
    assert_int_equal(put_cm(cl, "lt-watch", "e", "w", "1", &e), K8S_OK);
    const want_objs w4[] = {{"a", "ADDED MODIFIED DELETED"}, {"b", "ADDED MODIFIED MODIFIED DELETED"},
                            {"c", "ADDED MODIFIED"}, {"d", "ADDED"}, {"e", "ADDED"}, {NULL, NULL}};
    check_seqs(&r, w4);
    assert_true(rec_wait(&r, synced_again, &syncs, 30));
    assert_true(strlen(r.why) > 0);
    k8s_informer_free(inf);
    rec_free(&r);
}

static bool has_lines(lines *l, size_t n)
{
    pthread_mutex_lock(&l->mu);
    bool ok = l->n >= n;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

static void test_double_log_follower(void **state)
{
    dbl *d = need_double(state);
    k8s_client *cl = d->cl;
    make_ns(cl, "lt-logs");
    json_error_t je;
    json_t *pod = json_loads(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"lt-logs\"},"
        "\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"trainer\",\"image\":\"busybox\","
        "\"command\":[\"/bin/sh\",\"-c\",\"for i in 1 2 3 4 5 6 7 8 9 10; do echo line-$i; echo same-$i; sleep 0.3; done\"]}]}}",
        0, &je);
    assert_non_null(pod);
    k8s_ref ref = {.api = "v1", .resource = "pods", .ns = "lt-logs", .name = "p"};
    k8s_error e;
    assert_int_equal(k8s_create(cl, &ref, pod, NULL, &e), K8S_OK);
    json_decref(pod);
    lines l = {0};
    pthread_mutex_init(&l.mu, NULL);
    sb_init(&l.text);
    k8s_stats s0, s1;
    k8s_client_stats(cl, &s0);
    k8s_log_follower *f = k8s_log_follow(cl, "lt-logs", "p", "trainer", NULL, 0, on_line, on_end, &l);
    double end = k8s_now_mono() + 30;
    while (!has_lines(&l, 4) && k8s_now_mono() < end) th_sleep(0.02);
    control(cl, "/_double/outage?seconds=1");
    assert_true(wait_end(&l, 60));
    assert_string_equal(l.end, "container ended");
    sb want;
    sb_init(&want);
    for (int i = 1; i <= 10; i++) sb_printf(&want, "line-%d\nsame-%d\n", i, i);
    assert_string_equal(sb_str(&l.text), sb_str(&want));
    k8s_client_stats(cl, &s1);
    assert_true(s1.logs - s0.logs >= 2);            /* it reconnected */
    assert_true(k8s_log_follower_skipped(f) >= 1); /* the last line seen came again */
    k8s_log_follower_free(f);
    sb_free(&want);
    free(l.end);
    sb_free(&l.text);
    pthread_mutex_destroy(&l.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_lines_and_events),
        cmocka_unit_test(test_verbs_on_wire),
        cmocka_unit_test(test_retries),
        cmocka_unit_test(test_line_splitter),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_continue_gone),
        cmocka_unit_test(test_informer_scripted),
        cmocka_unit_test(test_informer_unreachable),
        cmocka_unit_test(test_log_follower_scripted),
    };
    const struct CMUnitTest with_double[] = {
        cmocka_unit_test(test_double_crud),
        cmocka_unit_test(test_double_pagination),
        cmocka_unit_test(test_double_client_cert),
        cmocka_unit_test(test_double_retries),
        cmocka_unit_test(test_double_watch_compaction),
        cmocka_unit_test(test_double_log_follower),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    failed += cmocka_run_group_tests(with_double, double_setup, double_teardown);
    return failed;
}
