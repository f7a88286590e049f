/* k8s_watch.c: streamed watches and the informer built on them. The
 * informer lists a collection (paginated), delivers ADDED for each object,
 * then watches from the list's resourceVersion with bookmarks; it keeps a
 * cache keyed ns/name that turns the server's events into transitions
 * (ADDED once, MODIFIED per new resourceVersion, DELETED once), drops
 * stale events, relists on 410 Gone and delivers the difference, and
 * retries a lost connection with backoff, resuming from the newest
 * resourceVersion it saw. Everything runs on the informer's own thread. */
#include "k8s_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_BACKOFF_CAP 3.0

struct k8s_informer {
    k8s_client *cl;
    char *api, *resource, *ns, *label;
    k8s_ref ref;
    k8s_event_fn on_event;
    k8s_sync_fn on_sync;
    void *ud;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    atomic_bool synced;
    pthread_mutex_t mu; /* cache and stats */
    json_t *cache;      /* "ns/name" -> object */
    k8s_informer_stats stats;
    /* the thread's own */
    char *rv;
    int current;        /* the last state told to on_sync: 1, 0, -1 = none yet */
    int fails;          /* connection failures in a row */
    k8s_lines lines;
    bool gone;          /* an ERROR event with 410 in the stream */
    bool broken;        /* an event that could not be read */
    char why[800];
};

static char *obj_key(const char *ns, const char *name)
{
    return ns && ns[0] ? xasprintf("%s/%s", ns, name) : xstrdup(name);
}

static const char *obj_meta(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(json_object_get(obj, "metadata"), key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static void tell_sync(k8s_informer *inf, bool synced, const char *why)
{
    if ((int)synced == inf->current) return;
    inf->current = synced;
    if (inf->on_sync) inf->on_sync(inf->ud, synced, why);
}

static void deliver(k8s_informer *inf, k8s_event_type t, const json_t *obj)
{
    pthread_mutex_lock(&inf->mu);
    inf->stats.events++;
    pthread_mutex_unlock(&inf->mu);
    if (inf->on_event) inf->on_event(inf->ud, t, obj);
}

static void set_rv(k8s_informer *inf, const char *rv)
{
    if (!rv || !rv[0]) return;
    if (inf->rv && k8s_rv_cmp(rv, inf->rv) < 0) return;
    free(inf->rv);
    inf->rv = xstrdup(rv);
}

/* ---- the list and its difference with the cache ---- */
typedef struct pending {
    k8s_event_type type;
    json_t *obj;
} pending;

static void apply_list(k8s_informer *inf, json_t *items)
{
    json_t *fresh = json_object();
    size_t n = json_array_size(items), np = 0;
    pending *out = xcalloc(n + 1, sizeof *out);
    size_t i;
    json_t *it;
    pthread_mutex_lock(&inf->mu);
    json_array_foreach(items, i, it) {
        const char *name = obj_meta(it, "name");
        if (!name) continue;
        char *key = obj_key(obj_meta(it, "namespace"), name);
        json_t *old = json_object_get(inf->cache, key);
        if (!old) {
            out[np++] = (pending){K8S_ADDED, json_incref(it)};
        } else {
            const char *a = obj_meta(old, "resourceVersion"), *b = obj_meta(it, "resourceVersion");
            if (!a || !b || strcmp(a, b) != 0) out[np++] = (pending){K8S_MODIFIED, json_incref(it)};
        }
        json_object_set(fresh, key, it);
        free(key);
    }
    size_t extra = 0;
    const char *key;
    json_t *old;
    json_object_foreach(inf->cache, key, old) if (!json_object_get(fresh, key)) extra++;
    out = xrealloc(out, (np + extra + 1) * sizeof *out);
    json_object_foreach(inf->cache, key, old) if (!json_object_get(fresh, key))
        out[np++] = (pending){K8S_DELETED, json_incref(old)};
    json_decref(inf->cache);
    inf->cache = fresh;
    inf->stats.lists++;
    pthread_mutex_unlock(&inf->mu);
    for (size_t k = 0; k < np; k++) {
        deliver(inf, out[k].type, out[k].obj);
        json_decref(out[k].obj);
    }
    free(out);
}

/* ---- watch events ---- */
static void on_watch_event(k8s_informer *inf, const k8s_wevent *ev)
{
    char *key = obj_key(ev->ns, ev->name);
    pthread_mutex_lock(&inf->mu);
    json_t *cached = json_object_get(inf->cache, key);
    const char *crv = cached ? obj_meta(cached, "resourceVersion") : NULL;
    int cmp = cached ? k8s_rv_cmp(ev->rv, crv) : 1;
    k8s_event_type t;
    bool give = true;
    if (ev->type == K8S_W_DELETED) {
        /* a deletion may carry the last state's own resourceVersion */
        give = cached && cmp != -1;
        if (give) json_object_del(inf->cache, key);
        t = K8S_DELETED;
    } else {
        give = !cached || cmp == 1 || cmp == 2; /* newer, or not comparable and different */
        if (give) json_object_set(inf->cache, key, ev->object);
        t = cached ? K8S_MODIFIED : K8S_ADDED;
    }
    pthread_mutex_unlock(&inf->mu);
    free(key);
    if (give) deliver(inf, t, ev->object);
}

static int watch_line(void *ud, const char *line, size_t len, bool first, bool more)
{
    k8s_informer *inf = ud;
    if (len == 0) return 0;
    k8s_wevent ev;
    char err[256];
    if (!k8s_watch_parse_line(line, len, &ev, err, sizeof err)) {
        snprintf(inf->why, sizeof inf->why, "watching %s: %s", inf->resource, err);
        inf->broken = true;
        return 1;
    }
    int rc = 0;
    switch (ev.type) {
    case K8S_W_BOOKMARK:
        set_rv(inf, ev.rv);
        pthread_mutex_lock(&inf->mu);
        inf->stats.bookmarks++;
        pthread_mutex_unlock(&inf->mu);
        break;
    case K8S_W_ERROR: {
        k8s_status st;
        k8s_status_from_json(ev.object, &st);
        if (st.code == 410 || strcmp(st.reason, "Expired") == 0 || strcmp(st.reason, "Gone") == 0)
            inf->gone = true;
        else {
            snprintf(inf->why, sizeof inf->why, "watching %s: the server sent an error: %s",
                     inf->resource, st.message ? st.message : "(no message)");
            inf->broken = true;
        }
        k8s_status_free(&st);
        rc = 1;
        break;
    }
    default:
        on_watch_event(inf, &ev);
        set_rv(inf, ev.rv);
        break;
    }
    k8s_wevent_free(&ev);
    return rc;
}

static size_t watch_data(void *ud, const char *p, size_t n)
{
    k8s_informer *inf = ud;
    int rc = k8s_lines_feed(&inf->lines, p, n, watch_line, inf);
    if (rc == -1) {
        snprintf(inf->why, sizeof inf->why, "watching %s: an event longer than %u MiB",
                 inf->resource, K8S_WATCH_LINE_MAX >> 20);
        inf->broken = true;
    }
    return rc ? 0 : n;
}

static void watch_open(void *ud)
{
    k8s_informer *inf = ud;
    inf->fails = 0;
    tell_sync(inf, true, NULL);
}

/* One watch from inf->rv: returns true when it should relist. */
static bool watch_once(k8s_informer *inf)
{
    k8s_ref coll = inf->ref;
    char *base = k8s_path(&coll);
    int timeout = 270 + (int)(k8s_client_random(inf->cl) * 60); /* ~300 s with jitter */
    sb q;
    sb_init(&q);
    sb_printf(&q, "%s?watch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=",
              base, timeout);
    k8s_query_escape(&q, inf->rv ? inf->rv : "");
    if (inf->label) {
        sb_puts(&q, "&labelSelector=");
        k8s_query_escape(&q, inf->label);
    }
    free(base);
    k8s_lines_init(&inf->lines, K8S_WATCH_LINE_MAX, false);
    inf->gone = inf->broken = false;
    k8s_call c = {.method = "GET", .kind = K8S_K_WATCH, .ask = {.verb = "watch", .ref = &coll},
                  .path = sb_str(&q), .stream = true, .stream_timeout = timeout + 30.0,
                  .no_retry = true, .on_data = watch_data, .on_open = watch_open, .ud = inf,
                  .stop = &inf->stop};
    pthread_mutex_lock(&inf->mu);
    inf->stats.watches++;
    pthread_mutex_unlock(&inf->mu);
    sb body;
    sb_init(&body);
    long http;
    k8s_error e;
    k8s_rc rc = k8s_call_do(inf->cl, &c, &http, &body, &e);
    if (rc == K8S_OK) k8s_lines_finish(&inf->lines, watch_line, inf);
    k8s_lines_free(&inf->lines);
    sb_free(&body);
    sb_free(&q);
    bool relist = false;
    if (atomic_load(&inf->stop)) return false;
    if (inf->gone || rc == K8S_E_GONE) {
        pthread_mutex_lock(&inf->mu);
        inf->stats.gone++;
        pthread_mutex_unlock(&inf->mu);
        return true;
    }
    if (inf->broken) {
        relist = true; /* an event lost in the middle: only a list is sure */
    } else if (rc == K8S_OK) {
        return false;  /* the server's timeout: watch again at once */
    } else {
        snprintf(inf->why, sizeof inf->why, "%s", e.message);
    }
    tell_sync(inf, false, inf->why);
    double d = k8s_backoff(inf->fails++, 0.2, WATCH_BACKOFF_CAP, k8s_client_random(inf->cl));
    k8s_sleep(d, &inf->stop);
    return relist;
}

static void *informer_main(void *arg)
{
    k8s_informer *inf = arg;
    thread_set_name("k8s-watch");
    bool need_list = true;
    while (!atomic_load(&inf->stop)) {
        if (need_list) {
            json_t *items;
            char *rv;
            k8s_error e;
            k8s_rc rc = k8s_list_stop(inf->cl, &inf->ref, inf->label, NULL, 500, &items, &rv,
                                      &e, &inf->stop);
            if (atomic_load(&inf->stop)) {
                if (rc == K8S_OK) {
                    json_decref(items);
                    free(rv);
                }
                break;
            }
            if (rc != K8S_OK) {
                tell_sync(inf, false, e.message);
                k8s_sleep(k8s_backoff(inf->fails++, 0.2, WATCH_BACKOFF_CAP,
                                      k8s_client_random(inf->cl)),
                          &inf->stop);
                continue;
            }
            apply_list(inf, items);
            json_decref(items);
            free(inf->rv);
            inf->rv = rv;
            inf->fails = 0;
            need_list = false;
            atomic_store(&inf->synced, true);
            inf->current = -1; /* every list is told */
            tell_sync(inf, true, NULL);
        }
        need_list = watch_once(inf);
    }
    return NULL;
}

k8s_informer *k8s_informer_start(k8s_client *cl, const k8s_ref *ref, const char *label,
                                 k8s_event_fn on_event, k8s_sync_fn on_sync, void *ud,
                                 char *err, size_t errsz)
{
    if (!ref || !ref->resource || ref->name) {
        snprintf(err, errsz, "an informer watches a collection: give a resource and no name");
        return NULL;
    }
    k8s_informer *inf = xcalloc(1, sizeof *inf);
    inf->cl = cl;
    inf->api = xstrdup(ref->api ? ref->api : "v1");
    inf->resource = xstrdup(ref->resource);
    inf->ns = ref->ns ? xstrdup(ref->ns) : NULL;
    inf->label = label ? xstrdup(label) : NULL;
    inf->ref = (k8s_ref){.api = inf->api, .resource = inf->resource, .ns = inf->ns};
    inf->on_event = on_event;
    inf->on_sync = on_sync;
    inf->ud = ud;
    inf->cache = json_object();
    inf->current = -1;
    atomic_init(&inf->stop, false);
    atomic_init(&inf->synced, false);
    pthread_mutex_init(&inf->mu, NULL);
    int rc = pthread_create(&inf->thread, NULL, informer_main, inf);
    if (rc != 0) {
        snprintf(err, errsz, "cannot start the informer's thread: %s", strerror(rc));
        k8s_informer_free(inf);
        return NULL;
    }
    inf->started = true;
    return inf;
}

bool k8s_informer_synced(k8s_informer *inf)
{
    return atomic_load(&inf->synced);
}

json_t *k8s_informer_get(k8s_informer *inf, const char *ns, const char *name)
{
    char *key = obj_key(ns, name);
    pthread_mutex_lock(&inf->mu);
    json_t *v = json_object_get(inf->cache, key);
    json_t *copy = v ? json_deep_copy(v) : NULL;
    pthread_mutex_unlock(&inf->mu);
    free(key);
    return copy;
}

void k8s_informer_stats_get(k8s_informer *inf, k8s_informer_stats *out)
{
    pthread_mutex_lock(&inf->mu);
    *out = inf->stats;
    pthread_mutex_unlock(&inf->mu);
}

void k8s_informer_free(k8s_informer *inf)
{
    if (!inf) return;
    atomic_store(&inf->stop, true);
    if (inf->started) pthread_join(inf->thread, NULL);
    pthread_mutex_destroy(&inf->mu);
    json_decref(inf->cache);
    free(inf->rv);
    free(inf->api);
    free(inf->resource);
    free(inf->ns);
    free(inf->label);
    free(inf);
}
