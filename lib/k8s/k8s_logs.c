/* k8s_logs.c: the pod log follower. It streams
 * .../pods/P/log?follow=true&timestamps=true on a thread of its own, splits
 * the lines (a line longer than K8S_LOG_LINE_MAX is handed over in
 * pieces), strips each line's RFC 3339 timestamp, and when the stream ends
 * while the container still runs (or breaks) it reconnects with
 * sinceTime = the last timestamp given, skipping the lines older than it
 * and, of the lines with that very timestamp, as many as were given
 * already; so nothing is given twice. */
#include "k8s_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct k8s_log_follower {
    k8s_client *cl;
    char *ns, *pod, *container;
    k8s_line_fn on_line;
    k8s_end_fn on_end;
    void *ud;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    atomic_uint_fast64_t skipped;
    /* the thread's own */
    char *last_ts;          /* the last given line's timestamp text */
    int64_t last_s;
    int32_t last_ns;
    size_t n_last;          /* lines given with exactly that timestamp */
    bool skipping;          /* a reconnection: skip what was given */
    int64_t skip_s;
    int32_t skip_ns;
    size_t skip_n, seen_eq; /* of the lines at skip time: how many to skip, seen */
    bool skip_cur;          /* the decision for the line being handed in pieces */
    const char *cur_ts;     /* its time (last_ts when given) */
    bool got_line;
    k8s_lines lines;
};

static int ts_cmp(int64_t as, int32_t an, int64_t bs, int32_t bn)
{
    if (as != bs) return as < bs ? -1 : 1;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

static int log_line(void *ud, const char *line, size_t len, bool first, bool more)
{
    k8s_log_follower *f = ud;
    if (!first) {
        if (!f->skip_cur) f->on_line(f->ud, f->cur_ts, line, len);
        return atomic_load(&f->stop) ? 1 : 0;
    }
    f->got_line = true;
    const char *sp = memchr(line, ' ', len);
    int64_t s;
    int32_t ns;
    if (!sp || !k8s_time_parse(line, (size_t)(sp - line), &s, &ns)) {
        f->skip_cur = false; /* no timestamp: given as it is */
        f->cur_ts = f->last_ts;
        f->on_line(f->ud, f->last_ts, line, len);
        return atomic_load(&f->stop) ? 1 : 0;
    }
    bool skip = false;
    if (f->skipping) {
        int c = ts_cmp(s, ns, f->skip_s, f->skip_ns);
        if (c < 0) skip = true;
        else if (c == 0 && f->seen_eq < f->skip_n) {
            f->seen_eq++;
            skip = true;
        } else
            f->skipping = false; /* past what was given: everything from here is new */
    }
    f->skip_cur = skip;
    if (skip) {
        atomic_fetch_add(&f->skipped, 1);
        return 0;
    }
    if (f->last_ts && ts_cmp(s, ns, f->last_s, f->last_ns) == 0) {
        f->n_last++;
    } else {
        free(f->last_ts);
        f->last_ts = xstrndup(line, (size_t)(sp - line));
        f->last_s = s;
        f->last_ns = ns;
        f->n_last = 1;
    }
    const char *text = sp + 1;
    f->cur_ts = f->last_ts;
    f->on_line(f->ud, f->last_ts, text, len - (size_t)(text - line));
    return atomic_load(&f->stop) ? 1 : 0;
}

static size_t log_data(void *ud, const char *p, size_t n)
{
    k8s_log_follower *f = ud;
    return k8s_lines_feed(&f->lines, p, n, log_line, f) ? 0 : n;
}

/* After a clean end of the stream: is the container still running? 1 yes
 * (reconnect), 0 no (the log is over), -1 the pod is gone, -2 unknown. */
static int container_running(k8s_log_follower *f)
{
    k8s_ref ref = {.api = "v1", .resource = "pods", .ns = f->ns, .name = f->pod};
    char *path = k8s_path(&ref);
    k8s_call c = {.method = "GET", .kind = K8S_K_GET, .ask = {.verb = "get", .ref = &ref},
                  .path = path, .stop = &f->stop};
    sb body;
    sb_init(&body);
    long http;
    k8s_error e;
    k8s_rc rc = k8s_call_do(f->cl, &c, &http, &body, &e);
    free(path);
    json_t *pod = rc == K8S_OK ? json_loadb(sb_str(&body), body.len, 0, NULL) : NULL;
    sb_free(&body);
    if (rc == K8S_E_NOT_FOUND) return -1;
    if (!pod) return -2;
    const json_t *st = json_object_get(pod, "status");
    const json_t *cs = json_object_get(st, "containerStatuses");
    int out = -3;
    size_t i;
    json_t *cst;
    json_array_foreach(cs, i, cst) {
        const json_t *name = json_object_get(cst, "name");
        if (f->container && (!json_is_string(name) ||
                             strcmp(json_string_value(name), f->container) != 0))
            continue;
        const json_t *state = json_object_get(cst, "state");
        out = json_object_get(state, "terminated") ? 0 : 1;
        break;
    }
    if (out == -3) {
        const json_t *ph = json_object_get(st, "phase");
        const char *p = json_is_string(ph) ? json_string_value(ph) : "";
        out = strcmp(p, "Succeeded") == 0 || strcmp(p, "Failed") == 0 ? 0 : 1;
    }
    json_decref(pod);
    return out;
}

static char *log_path(k8s_log_follower *f)
{
    k8s_ref ref = {.api = "v1", .resource = "pods", .ns = f->ns, .name = f->pod, .sub = "log"};
    char *p = k8s_path(&ref);
    sb q;
    sb_init(&q);
    sb_printf(&q, "%s?follow=true&timestamps=true", p);
    free(p);
    if (f->container) {
        sb_puts(&q, "&container=");
        k8s_query_escape(&q, f->container);
    }
    if (f->last_ts) {
        sb_puts(&q, "&sinceTime=");
        k8s_query_escape(&q, f->last_ts);
    }
    return sb_take(&q);
}

static void *follow_main(void *arg)
{
    k8s_log_follower *f = arg;
    thread_set_name("k8s-logs");
    int fails = 0;
    const char *end = NULL;
    char why[800];
    k8s_ref ref = {.api = "v1", .resource = "pods", .ns = f->ns, .name = f->pod, .sub = "log"};
    while (!atomic_load(&f->stop)) {
        char *path = log_path(f);
        f->skipping = f->last_ts != NULL;
        f->skip_s = f->last_s;
        f->skip_ns = f->last_ns;
        f->skip_n = f->n_last;
        f->seen_eq = 0;
        f->got_line = false;
        k8s_lines_init(&f->lines, K8S_LOG_LINE_MAX, true);
        k8s_call c = {.method = "GET", .kind = K8S_K_LOG, .ask = {.verb = "log", .ref = &ref},
                      .path = path, .stream = true, .no_retry = true, .on_data = log_data,
                      .ud = f, .stop = &f->stop};
        sb body;
        sb_init(&body);
        long http;
        k8s_error e;
        k8s_rc rc = k8s_call_do(f->cl, &c, &http, &body, &e);
        /* a stream that broke keeps its unfinished line: it comes again, whole */
        if (rc == K8S_OK) k8s_lines_finish(&f->lines, log_line, f);
        k8s_lines_free(&f->lines);
        sb_free(&body);
        free(path);
        if (atomic_load(&f->stop)) break;
        if (f->got_line) fails = 0;
        if (rc == K8S_OK) {
            int run = container_running(f);
            if (run == -1) end = "pod gone";
            else if (run == 0) end = "container ended";
        } else if (rc == K8S_E_NOT_FOUND) {
            end = "pod gone";
        } else if (rc == K8S_E_UNAUTHORIZED || rc == K8S_E_FORBIDDEN) {
            snprintf(why, sizeof why, "%s", e.message);
            end = why;
        }
        if (end) break;
        k8s_sleep(k8s_backoff(fails++, 0.2, 3.0, k8s_client_random(f->cl)), &f->stop);
    }
    if (end && !atomic_load(&f->stop) && f->on_end) f->on_end(f->ud, end);
    return NULL;
}

k8s_log_follower *k8s_log_follow(k8s_client *cl, const char *ns, const char *pod,
                                 const char *container, const char *since_time, long skip,
                                 k8s_line_fn on_line, k8s_end_fn on_end, void *ud)
{
    k8s_log_follower *f = xcalloc(1, sizeof *f);
    f->cl = cl;
    f->ns = xstrdup(ns);
    f->pod = xstrdup(pod);
    f->container = container ? xstrdup(container) : NULL;
    f->on_line = on_line;
    f->on_end = on_end;
    f->ud = ud;
    int64_t sec;
    int32_t nsec;
    if (since_time && k8s_time_parse(since_time, strlen(since_time), &sec, &nsec)) {
        f->last_ts = xstrdup(since_time);
        f->last_s = sec;
        f->last_ns = nsec;
        f->n_last = skip > 0 ? (size_t)skip : 0;
    }
    atomic_init(&f->stop, false);
    atomic_init(&f->skipped, 0);
    if (pthread_create(&f->thread, NULL, follow_main, f) != 0) {
        k8s_log_follower_free(f);
        return NULL;
    }
    f->started = true;
    return f;
}

uint64_t k8s_log_follower_skipped(k8s_log_follower *f)
{
    return atomic_load(&f->skipped);
}

void k8s_log_follower_free(k8s_log_follower *f)
{
    if (!f) return;
    atomic_store(&f->stop, true);
    if (f->started) pthread_join(f->thread, NULL);
    free(f->ns);
    free(f->pod);
    free(f->container);
    free(f->last_ts);
    free(f);
}
