/* test_k8s_lease.c: leader election through a coordination.k8s.io/v1
 * Lease (lib/k8s/k8s_lease.c).
 *
 * Without an API server: the configuration's checks, and a closed port.
 * Against a scripted listener (k8s_test_http.h): what goes on the wire;
 * the two 409s (AlreadyExists on a create, Conflict on an update) meaning
 * "another replica holds it"; 5xx within and past the deadline; a slow
 * failing tick counted against the deadline. Against the API server
 * double (tests/k8s/kube-double, plain HTTP here so that a small proxy in
 * this file can sit between one replica and it): one replica creates and
 * holds; a second waits while the first renews, then takes it after the
 * lease duration of its own clock (the clocks of the two replicas are far
 * apart, and renewTime plays no part); a release hands it over at the
 * other's next tick; two takers acting on the same expired version: one
 * wins, the other gets the double's 409 and does not hold; an outage: the
 * holder keeps it until renew_deadline and then reports it lost. Every
 * Lease written is checked against the LeaseSpec of Kubernetes v1.32 (the
 * double has no schema for Lease and stores any spec). Time is driven by
 * the `now` passed to each tick, so nothing sleeps for a lease duration. */
#include "k8s/k8s.h"
#include "k8s/k8s_internal.h"

#include "k8s_test_http.h"

#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>

#include <cmocka.h>

static k8s_lease_config lease_cfg(const char *ns, const char *name, const char *id)
{
    return (k8s_lease_config){.namespace_ = ns, .name = name, .identity = id,
                              .duration = 15, .renew_deadline = 10, .retry_period = 2};
}

static k8s_client *plain_client(int port)
{
    k8s_config c = {0};
    c.server = xasprintf("http://127.0.0.1:%d", port);
    c.token = xstrdup("t");
    c.source = xstrdup("test");
    c.max_retries = -1;
    c.timeout = 5;
    char err[512];
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    assert_non_null(cl);
    k8s_config_free(&c);
    return cl;
}

/* A port nothing listens on (bound, then closed). */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) abort();
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

static const char *spec_s(const json_t *lease, const char *key)
{
    return json_string_value(json_object_get(json_object_get(lease, "spec"), key));
}

static json_int_t spec_i(const json_t *lease, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(lease, "spec"), key));
}

static const char *rv_of(const json_t *obj)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

/* A MicroTime as metav1.MicroTime reads it: RFC 3339, six fractional digits. */
static void check_microtime(const char *field, const char *s)
{
    if (!s) fail_msg("spec.%s is missing", field);
    regex_t re;
    assert_int_equal(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                                  "\\.[0-9]{6}(Z|[+-][0-9]{2}:[0-9]{2})$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    int m = regexec(&re, s, 0, NULL, 0);
    regfree(&re);
    if (m != 0) fail_msg("spec.%s %s is not a MicroTime", field, s);
    int64_t sec;
    int32_t ns;
    assert_true(k8s_time_parse(s, strlen(s), &sec, &ns));
}

/* The Lease as coordination.k8s.io/v1 of Kubernetes v1.32 has it: no field
 * the schema lacks (the strict schemas' additionalProperties: false), the
 * LeaseSpec's types (int32 integers, MicroTimes), and the API server's
 * validation (leaseDurationSeconds > 0, leaseTransitions >= 0). */
static void check_lease(const json_t *obj, const char *holder)
{
    assert_string_equal(json_string_value(json_object_get(obj, "apiVersion")),
                        "coordination.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(obj, "kind")), "Lease");
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec"};
    static const char *const fields[] = {"acquireTime", "holderIdentity", "leaseDurationSeconds",
                                         "leaseTransitions", "preferredHolder", "renewTime",
                                         "strategy"};
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool known = false;
        for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) known |= !strcmp(key, top[i]);
        if (!known) fail_msg("the Lease has a field %s", key);
    }
    const json_t *spec = json_object_get(obj, "spec");
    assert_true(json_is_object(spec));
    json_object_foreach((json_t *)spec, key, v) {
        bool known = false;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            known |= !strcmp(key, fields[i]);
        if (!known) fail_msg("spec.%s is not a field of LeaseSpec", key);
    }
    assert_true(json_is_string(json_object_get(spec, "holderIdentity")));
    if (holder) assert_string_equal(spec_s(obj, "holderIdentity"), holder);
    const json_t *d = json_object_get(spec, "leaseDurationSeconds");
    assert_true(json_is_integer(d));
    assert_true(json_integer_value(d) > 0 && json_integer_value(d) <= INT32_MAX);
    const json_t *t = json_object_get(spec, "leaseTransitions");
    assert_true(json_is_integer(t));
    assert_true(json_integer_value(t) >= 0 && json_integer_value(t) <= INT32_MAX);
    check_microtime("acquireTime", spec_s(obj, "acquireTime"));
    check_microtime("renewTime", spec_s(obj, "renewTime"));
}

/* ---- without an API server ---- */
static void test_config(void **state)
{
    (void)state;
    k8s_client *cl = plain_client(closed_port());
    k8s_lease_config c = lease_cfg("ns", "lathe", NULL);
    assert_null(k8s_lease_new(cl, &c));
    c.identity = "";
    assert_null(k8s_lease_new(cl, &c));
    c.identity = "a";
    c.name = NULL;
    assert_null(k8s_lease_new(cl, &c));
    assert_null(k8s_lease_new(NULL, &c));
    k8s_lease_free(NULL);
    /* defaults, and a deadline past the duration cut below it: written
     * leaseDurationSeconds is seen in the scripted test */
    k8s_lease_config d = {.name = "lathe", .identity = "a", .duration = 3};
    k8s_lease *l = k8s_lease_new(cl, &d);
    assert_non_null(l);
    assert_null(k8s_lease_holder(l));
    assert_false(k8s_lease_held(l));
    assert_int_equal(k8s_lease_transitions(l), 0);
    k8s_lease_release(l); /* not held: nothing to do */
    k8s_lease_free(l);
    k8s_client_free(cl);
}

/* An API server that is not there: not held, the error says so, and
 * nothing was read. */
static void test_closed_port(void **state)
{
    (void)state;
    k8s_client *cl = plain_client(closed_port());
    k8s_lease_config c = lease_cfg("ns", "lathe", "a");
    k8s_lease *l = k8s_lease_new(cl, &c);
    k8s_error e;
    assert_false(k8s_lease_tick(l, 100, &e));
    assert_int_equal(e.rc, K8S_E_UNREACHABLE);
    assert_non_null(strstr(e.message, "leases.coordination.k8s.io lathe in ns"));
    assert_false(k8s_lease_held(l));
    assert_null(k8s_lease_holder(l));
    assert_false(k8s_lease_tick(l, 200, NULL));
    k8s_lease_free(l);
    k8s_client_free(cl);
}

/* ---- scripted ---- */
static const char lease_b[] =
    "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
    "\"lathe\",\"namespace\":\"ns\",\"resourceVersion\":\"41\"},\"spec\":{\"holderIdentity\":"
    "\"b\",\"leaseDurationSeconds\":3,\"acquireTime\":\"2026-12-01T21:00:00.000000Z\","
    "\"renewTime\":\"2026-12-01T21:00:00.123456Z\",\"leaseTransitions\":4}}";
static const char lease_a[] =
    "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
    "\"lathe\",\"namespace\":\"ns\",\"resourceVersion\":\"40\"},\"spec\":{\"holderIdentity\":"
    "\"a\",\"leaseDurationSeconds\":3,\"acquireTime\":\"2026-12-01T20:59:00.000000Z\","
    "\"renewTime\":\"2026-12-01T20:59:00.000000Z\",\"leaseTransitions\":4}}";
static const char not_found[] =
    "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\",\"message\":\"leases.coordination."
    "k8s.io \\\"lathe\\\" not found\"}";
static const char exists[] =
    "{\"kind\":\"Status\",\"code\":409,\"reason\":\"AlreadyExists\",\"message\":"
    "\"leases.coordination.k8s.io \\\"lathe\\\" already exists\"}";
static const char conflict[] =
    "{\"kind\":\"Status\",\"code\":409,\"reason\":\"Conflict\",\"message\":\"Operation cannot be "
    "fulfilled on leases.coordination.k8s.io \\\"lathe\\\": the object has been modified\"}";

/* The body of request i as JSON (the caller's to decref). */
static json_t *request_body(th_server *t, size_t i)
{
    char *r = th_request(t, i);
    assert_non_null(r);
    const char *b = strstr(r, "\r\n\r\n");
    json_error_t je;
    json_t *j = b ? json_loads(b + 4, 0, &je) : NULL;
    if (!j) fail_msg("request %zu has no JSON body: %s", i, r);
    free(r);
    return j;
}

static void assert_line(th_server *t, size_t i, const char *line)
{
    char *r = th_request(t, i);
    assert_non_null(r);
    if (!str_starts_with(r, line)) fail_msg("request %zu: %.120s, wanted %s", i, r, line);
    free(r);
}

/* What goes on the wire: a create to the collection when absent; a
 * foreign holder is left alone within its record's leaseDurationSeconds
 * (3 s; this replica's own is 29.5, written rounded up to 30) and taken
 * once 3 s of this replica's clock passed without a change: a PUT with the
 * version read, transitions + 1. */
static void test_wire(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_add(t, "GET ", 404, NULL, not_found, 0);
    th_add(t, "POST ", 201, NULL, lease_a, 0);
    th_add(t, "GET ", 200, NULL, lease_b, 0);
    th_add(t, "GET ", 200, NULL, lease_b, 0);
    th_add(t, "GET ", 200, NULL, lease_b, 0);
    th_add(t, "PUT ", 200, NULL, lease_b, 0);
    k8s_client *cl = plain_client(t->port);
    k8s_lease_config c = {.namespace_ = "ns", .name = "lathe", .identity = "a",
                          .duration = 29.5, .renew_deadline = 7};
    k8s_lease *l = k8s_lease_new(cl, &c);
    k8s_error e;
    assert_true(k8s_lease_tick(l, 10, &e));
    assert_int_equal(e.rc, K8S_OK);
    assert_line(t, 0, "GET /apis/coordination.k8s.io/v1/namespaces/ns/leases/lathe HTTP/1.1");
    assert_line(t, 1, "POST /apis/coordination.k8s.io/v1/namespaces/ns/leases HTTP/1.1");
    json_t *created = request_body(t, 1);
    check_lease(created, "a");
    assert_int_equal(spec_i(created, "leaseDurationSeconds"), 30);
    assert_int_equal(spec_i(created, "leaseTransitions"), 0);
    assert_string_equal(spec_s(created, "acquireTime"), spec_s(created, "renewTime"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(
                            created, "metadata"), "labels"), K8S_LABEL_MANAGED)),
                        "lathe");
    json_decref(created);
    assert_string_equal(k8s_lease_holder(l), "a");
    /* then b holds it (what happened meanwhile does not matter), seen at 11 */
    assert_false(k8s_lease_tick(l, 11, &e));
    assert_int_equal(e.rc, K8S_OK); /* another holder is no failure */
    assert_string_equal(k8s_lease_holder(l), "b");
    assert_false(k8s_lease_tick(l, 13.9, &e)); /* b's record, unchanged, 2.9 s old */
    assert_int_equal(th_count(t), 4);
    assert_true(k8s_lease_tick(l, 14, &e)); /* 3 s: taken */
    assert_line(t, 5, "PUT /apis/coordination.k8s.io/v1/namespaces/ns/leases/lathe HTTP/1.1");
    json_t *put = request_body(t, 5);
    check_lease(put, "a");
    assert_string_equal(rv_of(put), "41");
    assert_int_equal(spec_i(put, "leaseTransitions"), 5);
    assert_int_equal(spec_i(put, "leaseDurationSeconds"), 30);
    assert_string_not_equal(spec_s(put, "acquireTime"), "2026-12-01T21:00:00.000000Z");
    json_decref(put);
    /* the API server failing (503, not a verdict on the Lease): held until
     * renew_deadline (7 s) after the takeover at 14 */
    th_fallback(t, 503, "{\"kind\":\"Status\",\"code\":503,\"reason\":\"ServiceUnavailable\"}");
    assert_true(k8s_lease_tick(l, 20.9, &e));
    assert_int_equal(e.rc, K8S_E_SERVER);
    assert_false(k8s_lease_tick(l, 21, &e));
    assert_int_equal(e.rc, K8S_E_SERVER);
    k8s_lease_free(l);
    k8s_client_free(cl);
    th_stop(t);
}

/* The two 409s: a create that another replica's create beat (the Lease
 * was deleted under its holder), and an update on a version someone else
 * changed. Both: not held at once, though within renew_deadline of the
 * last renewal. */
static void test_conflicts(void **state)
{
    (void)state;
    th_server *t = th_start();
    k8s_client *cl = plain_client(t->port);
    k8s_lease_config c = lease_cfg("ns", "lathe", "b");
    k8s_lease *l = k8s_lease_new(cl, &c);
    k8s_error e;
    /* b holds it (lease_b) and renews at 0 */
    th_add(t, "GET ", 200, NULL, lease_b, 0);
    th_add(t, "PUT ", 200, NULL, lease_b, 0);
    assert_true(k8s_lease_tick(l, 0, &e));
    assert_int_equal(k8s_lease_transitions(l), 4); /* a renewal is no transition */
    json_t *renewal = request_body(t, 1);
    assert_int_equal(spec_i(renewal, "leaseTransitions"), 4);
    assert_string_equal(spec_s(renewal, "acquireTime"), "2026-12-01T21:00:00.000000Z");
    json_decref(renewal);
    /* deleted, and another replica's create came first */
    th_add(t, "GET ", 404, NULL, not_found, 0);
    th_add(t, "POST ", 409, NULL, exists, 0);
    assert_false(k8s_lease_tick(l, 1, &e));
    assert_int_equal(e.rc, K8S_E_EXISTS);
    assert_false(k8s_lease_held(l));
    /* held again at 2; the update at 3 conflicts */
    th_add(t, "GET ", 200, NULL, lease_b, 0);
    th_add(t, "PUT ", 200, NULL, lease_b, 0);
    th_add(t, "GET ", 200, NULL, lease_b, 0);
    th_add(t, "PUT ", 409, NULL, conflict, 0);
    assert_true(k8s_lease_tick(l, 2, &e));
    assert_false(k8s_lease_tick(l, 3, &e));
    assert_int_equal(e.rc, K8S_E_CONFLICT);
    assert_false(k8s_lease_held(l));
    k8s_lease_free(l);
    k8s_client_free(cl);
    th_stop(t);
}

/* A tick that spends long in a failing call counts that time against the
 * deadline: renewed at 0 with renew_deadline 0.5, a tick at 0.1 whose
 * read takes 0.6 s and fails has passed the deadline when it returns. */
static void test_slow_tick(void **state)
{
    (void)state;
    th_server *t = th_start();
    k8s_client *cl = plain_client(t->port);
    k8s_lease_config c = {.namespace_ = "ns", .name = "lathe", .identity = "b",
                          .duration = 1, .renew_deadline = 0.5};
    k8s_lease *l = k8s_lease_new(cl, &c);
    th_add(t, "GET ", 200, NULL, lease_b, 0);
    th_add(t, "PUT ", 200, NULL, lease_b, 0);
    th_add(t, "GET ", 503, NULL, "{\"kind\":\"Status\",\"code\":503}", 0.6);
    k8s_error e;
    assert_true(k8s_lease_tick(l, 0, &e));
    assert_false(k8s_lease_tick(l, 0.1, &e));
    assert_int_equal(e.rc, K8S_E_SERVER);
    k8s_lease_free(l);
    k8s_client_free(cl);
    th_stop(t);
}

/* ---- a proxy between one replica and the double ---- */
/* Forwards each request to the double (one per connection), except that
 * it can answer the next GET itself with a given body: a replica's stale
 * view of the Lease, while its write still goes to the double. */
typedef struct proxy {
    int fd, port, upstream;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    char *canned; /* the next GET's answer; NULL = forward */
} proxy;

/* s with `line` ("Name: value\r\n") inserted after its first line. */
static char *with_header(const char *s, size_t len, const char *line, size_t *out_len)
{
    const char *eol = strstr(s, "\r\n"); /* HTTP heads and JSON: no NUL inside */
    size_t head = eol ? (size_t)(eol - s) + 2 : len;
    sb o;
    sb_init(&o);
    sb_putn(&o, s, head);
    sb_puts(&o, line);
    sb_putn(&o, s + head, len - head);
    *out_len = o.len;
    return sb_take(&o);
}

/* Sends req to the double with Connection: close and relays its answer
 * (read to its end) to the client, saying Connection: close too. */
static void proxy_forward(proxy *p, int c, const char *req)
{
    int u = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->upstream),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(u, (struct sockaddr *)&a, sizeof a) != 0) {
        close(u);
        return; /* the client sees the connection closed */
    }
    size_t n;
    char *fwd = with_header(req, strlen(req), "Connection: close\r\n", &n);
    th_write_all(u, fwd, n);
    free(fwd);
    sb ans;
    sb_init(&ans);
    char buf[4096];
    for (;;) {
        struct pollfd pf = {.fd = u, .events = POLLIN};
        if (poll(&pf, 1, 10000) <= 0) break;
        ssize_t r = recv(u, buf, sizeof buf, 0);
        if (r <= 0) break;
        sb_putn(&ans, buf, (size_t)r);
    }
    close(u);
    char *back = with_header(ans.buf ? ans.buf : "", ans.len, "Connection: close\r\n", &n);
    th_write_all(c, back, n);
    free(back);
    sb_free(&ans);
}

static void *proxy_main(void *arg)
{
    proxy *p = arg;
    while (!atomic_load(&p->stop)) {
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        if (poll(&pf, 1, 50) <= 0) continue;
        int c = accept(p->fd, NULL, NULL);
        if (c < 0) continue;
        char *req = th_read_request(c);
        pthread_mutex_lock(&p->mu);
        char *canned = str_starts_with(req, "GET ") ? p->canned : NULL;
        if (canned) p->canned = NULL;
        pthread_mutex_unlock(&p->mu);
        if (canned) {
            char *a = xasprintf("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: "
                                "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                                strlen(canned), canned);
            th_write_all(c, a, strlen(a));
            free(a);
            free(canned);
        } else {
            proxy_forward(p, c, req);
        }
        free(req);
        shutdown(c, SHUT_RDWR);
        close(c);
    }
    return NULL;
}

static proxy *proxy_start(int upstream)
{
    proxy *p = xcalloc(1, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    p->upstream = upstream;
    p->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(p->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(p->fd, 16) != 0) abort();
    socklen_t len = sizeof a;
    getsockname(p->fd, (struct sockaddr *)&a, &len);
    p->port = ntohs(a.sin_port);
    atomic_init(&p->stop, false);
    pthread_create(&p->thread, NULL, proxy_main, p);
    return p;
}

static void proxy_can(proxy *p, const json_t *obj)
{
    pthread_mutex_lock(&p->mu);
    free(p->canned);
    p->canned = json_dumps(obj, JSON_COMPACT);
    pthread_mutex_unlock(&p->mu);
}

static void proxy_stop(proxy *p)
{
    atomic_store(&p->stop, true);
    pthread_join(p->thread, NULL);
    close(p->fd);
    free(p->canned);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ---- against the double ---- */
typedef struct dbl {
    pid_t pid;
    char *dir;
    int port;
    k8s_config cfg;
    k8s_client *cl;
} dbl;

static int double_setup(void **state)
{
    static const char *const extra[] = {"--no-tls", "--kubelet", "none", NULL};
    dbl *d = xcalloc(1, sizeof *d);
    *state = d;
    int up = th_double_start("/tmp/lathe-k8s-lease-XXXXXX", extra, &d->pid, &d->dir, &d->cfg);
    if (up == 1) { /* no double here: the tests skip */
        free(d);
        *state = NULL;
        return 0;
    }
    if (up != 0) return -1;
    char err[1024];
    d->cfg.max_retries = -1; /* a tick is one try: the outage test counts on it */
    d->cfg.timeout = 5;
    const char *colon = strrchr(d->cfg.server, ':');
    d->port = colon ? atoi(colon + 1) : 0;
    d->cl = k8s_client_new(&d->cfg, err, sizeof err);
    if (!d->cl || d->port <= 0) return -1;
    k8s_ref ns = {.api = "v1", .resource = "namespaces", .name = "lt-lease"};
    json_t *o = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                          "metadata", "name", "lt-lease");
    k8s_error e;
    k8s_rc rc = k8s_create(d->cl, &ns, o, NULL, &e);
    json_decref(o);
    if (rc != K8S_OK && rc != K8S_E_EXISTS) {
        fprintf(stderr, "namespace lt-lease: %s\n", e.message);
        return -1;
    }
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
    return 0;
}

static dbl *need_double(void **state)
{
    dbl *d = *state;
    if (!d) skip();
    return d;
}

/* The Lease on the double, checked (the caller's to decref). */
static json_t *server_lease(dbl *d, const char *name, const char *holder)
{
    k8s_ref ref = {.api = "coordination.k8s.io/v1", .resource = "leases", .ns = "lt-lease",
                   .name = name};
    json_t *out = NULL;
    k8s_error e;
    if (k8s_get(d->cl, &ref, &out, &e) != K8S_OK) fail_msg("lease %s: %s", name, e.message);
    check_lease(out, holder);
    return out;
}

/* A client of the double through the proxy. */
static k8s_client *proxied_client(dbl *d, const proxy *p)
{
    k8s_config c;
    k8s_config_copy(&c, &d->cfg);
    free(c.server);
    c.server = xasprintf("http://127.0.0.1:%d", p->port);
    char err[512];
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    assert_non_null(cl);
    k8s_config_free(&c);
    return cl;
}

/* The first replica creates the Lease and holds it; renewing keeps
 * acquireTime and moves renewTime and the version. */
static void test_create_and_renew(void **state)
{
    dbl *d = need_double(state);
    k8s_lease_config c = lease_cfg("lt-lease", "create", "replica-a");
    k8s_lease *a = k8s_lease_new(d->cl, &c);
    k8s_error e;
    assert_true(k8s_lease_tick(a, 0, &e));
    assert_int_equal(e.rc, K8S_OK);
    assert_true(k8s_lease_held(a));
    assert_string_equal(k8s_lease_holder(a), "replica-a");
    assert_int_equal(k8s_lease_transitions(a), 0);
    json_t *first = server_lease(d, "create", "replica-a");
    assert_int_equal(spec_i(first, "leaseDurationSeconds"), 15);
    assert_int_equal(spec_i(first, "leaseTransitions"), 0);
    th_sleep(0.002); /* renewTime has microseconds: make it move */
    assert_true(k8s_lease_tick(a, 2, &e));
    json_t *second = server_lease(d, "create", "replica-a");
    assert_string_equal(spec_s(second, "acquireTime"), spec_s(first, "acquireTime"));
    assert_string_not_equal(spec_s(second, "renewTime"), spec_s(first, "renewTime"));
    assert_string_not_equal(rv_of(second), rv_of(first));
    assert_int_equal(spec_i(second, "leaseTransitions"), 0);
    json_decref(first);
    json_decref(second);
    k8s_lease_free(a);
}

/* A second replica does not get it while the first renews, however long;
 * once the first stops, the second takes it when lease_duration of its own
 * clock passed since it saw the record change (its clock is 1000 s ahead
 * of the first's, and the renewTime written by the first is ignored). */
static void test_takeover_after_duration(void **state)
{
    dbl *d = need_double(state);
    k8s_lease_config ca = lease_cfg("lt-lease", "takeover", "replica-a");
    k8s_lease_config cb = lease_cfg("lt-lease", "takeover", "replica-b");
    k8s_lease *a = k8s_lease_new(d->cl, &ca), *b = k8s_lease_new(d->cl, &cb);
    k8s_error e;
    for (int s = 0; s <= 40; s += 2) {
        assert_true(k8s_lease_tick(a, s, &e));
        assert_false(k8s_lease_tick(b, 1000 + s, &e));
        assert_int_equal(e.rc, K8S_OK);
        assert_string_equal(k8s_lease_holder(b), "replica-a");
    }
    /* a stops; b last saw a change at 1040 */
    assert_false(k8s_lease_tick(b, 1042, &e));
    assert_false(k8s_lease_tick(b, 1054.9, &e));
    assert_false(k8s_lease_held(b));
    json_t *before = server_lease(d, "takeover", "replica-a");
    assert_true(k8s_lease_tick(b, 1055, &e));
    assert_int_equal(e.rc, K8S_OK);
    assert_true(k8s_lease_held(b));
    assert_string_equal(k8s_lease_holder(b), "replica-b");
    assert_int_equal(k8s_lease_transitions(b), 1);
    json_t *after = server_lease(d, "takeover", "replica-b");
    assert_int_equal(spec_i(after, "leaseTransitions"), 1);
    assert_string_not_equal(spec_s(after, "acquireTime"), spec_s(before, "acquireTime"));
    assert_string_equal(spec_s(after, "acquireTime"), spec_s(after, "renewTime"));
    /* a comes back: it reads b as the holder and does not hold, at once,
     * though its own last renewal is only 1 s old on its clock */
    assert_false(k8s_lease_tick(a, 41, &e));
    assert_int_equal(e.rc, K8S_OK);
    assert_string_equal(k8s_lease_holder(a), "replica-b");
    assert_int_equal(k8s_lease_transitions(a), 1);
    /* b renews: no transition */
    assert_true(k8s_lease_tick(b, 1057, &e));
    json_t *renewed = server_lease(d, "takeover", "replica-b");
    assert_int_equal(spec_i(renewed, "leaseTransitions"), 1);
    assert_string_equal(spec_s(renewed, "acquireTime"), spec_s(after, "acquireTime"));
    json_decref(before);
    json_decref(after);
    json_decref(renewed);
    k8s_lease_free(a);
    k8s_lease_free(b);
}

/* A release hands the Lease over at the other replica's next tick, long
 * before lease_duration. */
static void test_release(void **state)
{
    dbl *d = need_double(state);
    k8s_lease_config ca = lease_cfg("lt-lease", "release", "replica-a");
    k8s_lease_config cb = lease_cfg("lt-lease", "release", "replica-b");
    k8s_lease *a = k8s_lease_new(d->cl, &ca), *b = k8s_lease_new(d->cl, &cb);
    k8s_error e;
    assert_true(k8s_lease_tick(a, 0, &e));
    assert_false(k8s_lease_tick(b, 0, &e));
    k8s_lease_release(a);
    assert_false(k8s_lease_held(a));
    assert_string_equal(k8s_lease_holder(a), "");
    json_t *released = server_lease(d, "release", "");
    assert_int_equal(spec_i(released, "leaseTransitions"), 0);
    json_decref(released);
    assert_true(k8s_lease_tick(b, 0.5, &e));
    assert_string_equal(k8s_lease_holder(b), "replica-b");
    assert_int_equal(k8s_lease_transitions(b), 1);
    json_t *taken = server_lease(d, "release", "replica-b");
    assert_int_equal(spec_i(taken, "leaseTransitions"), 1);
    assert_int_equal(spec_i(taken, "leaseDurationSeconds"), 15);
    json_decref(taken);
    /* a release after someone else changed the object (a label) still
     * releases: the newer version is read and still names b */
    k8s_ref ref = {.api = "coordination.k8s.io/v1", .resource = "leases", .ns = "lt-lease",
                   .name = "release"};
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "touched", "yes");
    assert_int_equal(k8s_merge_patch(d->cl, &ref, patch, NULL, &e), K8S_OK);
    json_decref(patch);
    k8s_lease_release(b);
    json_decref(server_lease(d, "release", ""));
    assert_true(k8s_lease_tick(a, 1, &e));
    assert_int_equal(k8s_lease_transitions(a), 2);
    k8s_lease_free(a);
    k8s_lease_free(b);
}

/* Two takers act on the same expired version: b through the proxy, whose
 * read is the version before c's takeover. c wins; b's PUT reaches the
 * double with the stale resourceVersion and gets 409: b does not hold. */
static void test_race(void **state)
{
    dbl *d = need_double(state);
    proxy *p = proxy_start(d->port);
    k8s_client *bcl = proxied_client(d, p);
    k8s_lease_config ca = lease_cfg("lt-lease", "race", "replica-a");
    k8s_lease_config cb = lease_cfg("lt-lease", "race", "replica-b");
    k8s_lease_config cc = lease_cfg("lt-lease", "race", "replica-c");
    k8s_lease *a = k8s_lease_new(d->cl, &ca), *b = k8s_lease_new(bcl, &cb),
              *c = k8s_lease_new(d->cl, &cc);
    k8s_error e;
    assert_true(k8s_lease_tick(a, 0, &e));
    assert_false(k8s_lease_tick(b, 0, &e)); /* through the proxy, forwarded */
    assert_string_equal(k8s_lease_holder(b), "replica-a");
    assert_false(k8s_lease_tick(c, 0, &e));
    /* a stops renewing; both b and c find it expired at 15 */
    json_t *stale = server_lease(d, "race", "replica-a");
    assert_true(k8s_lease_tick(c, 15, &e));
    assert_int_equal(k8s_lease_transitions(c), 1);
    proxy_can(p, stale);
    assert_false(k8s_lease_tick(b, 15, &e));
    assert_int_equal(e.rc, K8S_E_CONFLICT);
    assert_int_equal(e.http, 409);
    assert_false(k8s_lease_held(b));
    json_t *now = server_lease(d, "race", "replica-c");
    assert_int_equal(spec_i(now, "leaseTransitions"), 1);
    json_decref(now);
    /* b's next tick reads c's record: a change, so it waits again */
    assert_false(k8s_lease_tick(b, 16, &e));
    assert_int_equal(e.rc, K8S_OK);
    assert_string_equal(k8s_lease_holder(b), "replica-c");
    assert_true(k8s_lease_tick(c, 17, &e));
    json_decref(stale);
    k8s_lease_free(a);
    k8s_lease_free(b);
    k8s_lease_free(c);
    k8s_client_free(bcl);
    proxy_stop(p);
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

/* The API unreachable (the double's outage: connections refused): the
 * holder stays held until renew_deadline after its last renewal, then
 * reports it lost; once the API answers again it renews (it is still the
 * holder on record). */
static void test_unreachable(void **state)
{
    dbl *d = need_double(state);
    k8s_lease_config ca = lease_cfg("lt-lease", "outage", "replica-a");
    k8s_lease *a = k8s_lease_new(d->cl, &ca);
    k8s_error e;
    assert_true(k8s_lease_tick(a, 0, &e));
    assert_true(k8s_lease_tick(a, 2, &e));
    control(d->cl, "/_double/outage?seconds=2");
    /* the double starts its outage after answering: wait until it has */
    k8s_ref probe = {.api = "v1", .resource = "namespaces", .name = "lt-lease"};
    double until = k8s_now_mono() + 10;
    while (k8s_get(d->cl, &probe, NULL, &e) == K8S_OK && k8s_now_mono() < until) th_sleep(0.01);
    assert_int_equal(e.rc, K8S_E_UNREACHABLE);
    assert_true(k8s_lease_tick(a, 4, &e));
    assert_int_equal(e.rc, K8S_E_UNREACHABLE);
    assert_true(k8s_lease_tick(a, 11.9, &e));
    assert_true(k8s_lease_held(a));
    assert_false(k8s_lease_tick(a, 12, &e)); /* 10 s after the renewal at 2 */
    assert_int_equal(e.rc, K8S_E_UNREACHABLE);
    assert_false(k8s_lease_held(a));
    assert_false(k8s_lease_tick(a, 13, &e));
    /* back: the first tick that gets through renews */
    double end = k8s_now_mono() + 30;
    bool held = false;
    while (!held && k8s_now_mono() < end) {
        held = k8s_lease_tick(a, 14, &e);
        if (!held) {
            assert_int_equal(e.rc, K8S_E_UNREACHABLE);
            th_sleep(0.1);
        }
    }
    assert_true(held);
    assert_int_equal(k8s_lease_transitions(a), 0);
    json_decref(server_lease(d, "outage", "replica-a"));
    k8s_lease_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_closed_port),
        cmocka_unit_test(test_wire),
        cmocka_unit_test(test_conflicts),
        cmocka_unit_test(test_slow_tick),
    };
    const struct CMUnitTest with_double[] = {
        cmocka_unit_test(test_create_and_renew),
        cmocka_unit_test(test_takeover_after_duration),
        cmocka_unit_test(test_release),
        cmocka_unit_test(test_race),
        cmocka_unit_test(test_unreachable),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    failed += cmocka_run_group_tests(with_double, double_setup, double_teardown);
    return failed;
}
