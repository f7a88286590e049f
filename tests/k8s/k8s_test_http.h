/* k8s_test_http.h: a tiny scripted HTTP/1.1 listener on 127.0.0.1 for the
 * client's tests that need no API server: one request per connection
 * (Connection: close); each request gets the first queued answer whose
 * `match` is in its request line (consumed), else the `fallback` answer,
 * else a held-open 200 stream until the listener stops. Every request's
 * head is recorded. Test code only (static functions, one listener per
 * test at a time). */
#ifndef LATHE_K8S_TEST_HTTP_H
#define LATHE_K8S_TEST_HTTP_H

#include "base/base.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TH_MAX 64

typedef struct th_answer {
    const char *match; /* substring of the request line; NULL = any */
    int status;
    const char *headers; /* extra header lines, each ending in \r\n; may be NULL */
    const char *body;    /* may be NULL */
    double pause;        /* seconds to wait after the body before closing */
    bool used;
} th_answer;

typedef struct th_server {
    int fd, port;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    th_answer answers[TH_MAX];
    size_t n_answers;
    th_answer fallback;
    bool has_fallback;
    char *requests[TH_MAX * 4]; /* request heads (and bodies), in order */
    size_t n_requests;
} th_server;

static void th_sleep(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void th_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

/* Reads a request head and its body (Content-Length). */
static char *th_read_request(int fd)
{
    sb s;
    sb_init(&s);
    char buf[4096];
    size_t need = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) <= 0) break;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) break;
        sb_putn(&s, buf, (size_t)r);
        const char *end = strstr(sb_str(&s), "\r\n\r\n");
        if (end) {
            size_t head = (size_t)(end - s.buf) + 4;
            const char *cl = strstr(s.buf, "\r\nContent-Length:");
            need = cl && cl < end ? head + (size_t)atol(cl + 17) : head;
            if (s.len >= need) break;
        }
    }
    return sb_take(&s);
}

static th_answer *th_pick(th_server *t, const char *req)
{
    const char *eol = strstr(req, "\r\n");
    size_t n = eol ? (size_t)(eol - req) : strlen(req);
    char *line = xstrndup(req, n);
    th_answer *a = NULL;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n_answers && !a; i++)
        if (!t->answers[i].used && (!t->answers[i].match || strstr(line, t->answers[i].match))) {
            t->answers[i].used = true;
            a = &t->answers[i];
        }
    if (!a && t->has_fallback) a = &t->fallback;
    pthread_mutex_unlock(&t->mu);
    free(line);
    return a;
}

static void th_serve_one(th_server *t, int c)
{
    char *req = th_read_request(c);
    pthread_mutex_lock(&t->mu);
    if (t->n_requests < sizeof t->requests / sizeof t->requests[0])
        t->requests[t->n_requests++] = xstrdup(req);
    pthread_mutex_unlock(&t->mu);
    th_answer *a = th_pick(t, req);
    free(req);
    if (!a) { /* a stream held open */
        const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        "Connection: close\r\n\r\n";
        th_write_all(c, h, strlen(h));
        while (!atomic_load(&t->stop)) th_sleep(0.02);
        return;
    }
    sb out;
    sb_init(&out);
    sb_printf(&out, "HTTP/1.1 %d X\r\nConnection: close\r\n%s", a->status,
              a->headers ? a->headers : "");
    if (a->pause > 0) sb_puts(&out, "\r\n"); /* close-delimited, so it can pause */
    else sb_printf(&out, "Content-Length: %zu\r\n\r\n", a->body ? strlen(a->body) : 0);
    if (a->body) sb_puts(&out, a->body);
    th_write_all(c, out.buf, out.len);
    sb_free(&out);
    if (a->pause > 0) {
        double left = a->pause;
        while (left > 0 && !atomic_load(&t->stop)) {
            th_sleep(0.02);
            left -= 0.02;
        }
    }
}

static void *th_main(void *arg)
{
    th_server *t = arg;
    while (!atomic_load(&t->stop)) {
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(t->fd, NULL, NULL);
        if (c < 0) continue;
        th_serve_one(t, c);
        shutdown(c, SHUT_RDWR);
        close(c);
    }
    return NULL;
}

static th_server *th_start(void)
{
    th_server *t = xcalloc(1, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    t->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(t->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(t->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(t->fd, 64) != 0) abort();
    socklen_t len = sizeof a;
    getsockname(t->fd, (struct sockaddr *)&a, &len);
    t->port = ntohs(a.sin_port);
    atomic_init(&t->stop, false);
    pthread_create(&t->thread, NULL, th_main, t);
    return t;
}

static void th_add(th_server *t, const char *match, int status, const char *headers,
                   const char *body, double pause)
{
    pthread_mutex_lock(&t->mu);
    t->answers[t->n_answers++] =
        (th_answer){.match = match, .status = status, .headers = headers, .body = body,
                    .pause = pause};
    pthread_mutex_unlock(&t->mu);
}

static void th_fallback(th_server *t, int status, const char *body)
{
    pthread_mutex_lock(&t->mu);
    t->fallback = (th_answer){.status = status, .body = body};
    t->has_fallback = true;
    pthread_mutex_unlock(&t->mu);
}

static size_t th_count(th_server *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->n_requests;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* A copy of request i (caller frees), NULL when there is none yet. */
static char *th_request(th_server *t, size_t i)
{
    pthread_mutex_lock(&t->mu);
    char *r = i < t->n_requests ? xstrdup(t->requests[i]) : NULL;
    pthread_mutex_unlock(&t->mu);
    return r;
}

static void th_stop(th_server *t)
{
    atomic_store(&t->stop, true);
    pthread_join(t->thread, NULL);
    close(t->fd);
    for (size_t i = 0; i < t->n_requests; i++) free(t->requests[i]);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* ---- the API double as a child process ---- */
#include "k8s/k8s.h"

#include <signal.h>
#include <sys/wait.h>

/* Starts tests/k8s/kube-double in a new folder (tmpl for mkdtemp, kept in
 * *dir) with the extra arguments (NULL-ended), its output in double.log
 * there; waits for its ready file and loads its kubeconfig into *cfg.
 * 1: skipped (no double or no /usr/bin/python3), 0: up, -1: it did not
 * start. */
static inline int th_double_start(const char *tmpl, const char *const *extra, pid_t *pid, char **dir,
                                  k8s_config *cfg)
{
    char *exe = path_join(LATHE_SOURCE_DIR, "tests/k8s/kube-double");
    if (!file_exists(exe) || !file_exists("/usr/bin/python3")) {
        free(exe);
        return 1;
    }
    *dir = xstrdup(tmpl);
    if (!mkdtemp(*dir)) abort();
    char ppid[32];
    snprintf(ppid, sizeof ppid, "%d", (int)getpid());
    char *log = path_join(*dir, "double.log");
    *pid = fork();
    if (*pid == 0) {
        FILE *f = fopen(log, "w");
        if (f) {
            dup2(fileno(f), 1);
            dup2(fileno(f), 2);
        }
        const char *argv[32] = {"/usr/bin/python3", exe, "--state", *dir, "--port", "0",
                                "--parent-pid", ppid};
        size_t n = 8;
        for (size_t i = 0; extra && extra[i] && n < 31; i++) argv[n++] = extra[i];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    free(log);
    free(exe);
    char *ready = path_join(*dir, "ready");
    double end = k8s_now_mono() + 60;
    while (!file_exists(ready) && k8s_now_mono() < end) th_sleep(0.05);
    bool up = file_exists(ready);
    free(ready);
    char *kc = path_join(*dir, "kubeconfig");
    char err[1024];
    bool ok = up && k8s_config_kubeconfig(cfg, kc, NULL, err, sizeof err);
    if (!ok) fprintf(stderr, "the double did not start (%s)\n", up ? err : "no ready file");
    free(kc);
    return ok ? 0 : -1;
}

/* Stops the double (SIGTERM, reaped) and removes its folder. */
static inline void th_double_stop(pid_t pid, char *dir)
{
    if (pid > 0) {
        kill(pid, SIGTERM);
        int st;
        waitpid(pid, &st, 0);
    }
    char err[256];
    if (dir) file_remove_tree(dir, err, sizeof err);
    free(dir);
}

#endif
