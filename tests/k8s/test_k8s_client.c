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
    th_stop(t);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_lines_and_events),
        cmocka_unit_test(test_verbs_on_wire),
        cmocka_unit_test(test_retries),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_continue_gone),
        cmocka_unit_test(test_informer_scripted),
        cmocka_unit_test(test_informer_unreachable),
        cmocka_unit_test(test_log_follower_scripted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
