/* op.c: the operator's thread (op.h).
 *
 * From the start, on every replica: informers on the served kinds of each
 * namespace (a group whose CRD is not installed is skipped, with a log
 * line), and the Lease. A standby keeps its informers current and tries
 * the Lease every retry period; its API answers 503 (so the Service sends
 * requests to the leader) and its /healthz 200.
 *
 * Becoming the leader: wait until every informer has listed, wipe the
 * cache and open it empty (srv_open_cache), list the Jobs of every
 * object's attempts, reconcile every object in restoring mode (each job
 * stored again as the API shows it: its attempts, the running one with a
 * handle the executor attaches to), then start the controller. From then
 * on: keys the informers report are reconciled, statuses written, the
 * Lease renewed. A leader that cannot renew within renewDeadline ends the
 * process at once (_exit), as client-go's leaders do: another replica may
 * already act, and two must never act at once; its pods and Jobs are in
 * the API, so nothing is lost, and Kubernetes starts it again as a standby.
 * A leader that stops normally gives the Lease up first.
 *
 * ResourceQuotas and PriorityClasses are watched too: when what they say
 * differs from what the server started with, the process starts itself
 * again (restart_self), as the scheduler's cluster is fixed while it runs.
 */
#include "op_internal.h"

#include "ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void op_owner_key(int64_t id, char out[40])
{
    snprintf(out, 40, "k8s-owner/%lld", (long long)id);
}

bool op_owner_read(store *st, int64_t id, op_owner *out)
{
    memset(out, 0, sizeof *out);
    char key[40];
    op_owner_key(id, key);
    char *text = NULL;
    if (store_kv_get(st, key, &text) != STORE_OK || !text) return false;
    json_t *v = json_loads(text, 0, NULL);
    free(text);
    if (!v) return false;
    const char *f[] = {"apiVersion", "kind", "namespace", "name", "uid"};
    char **dst[] = {&out->api_version, &out->kind, &out->ns, &out->name, &out->uid};
    for (size_t i = 0; i < 5; i++) {
        const char *s = json_string_value(json_object_get(v, f[i]));
        *dst[i] = s ? xstrdup(s) : NULL;
    }
    out->adopt = json_is_true(json_object_get(v, "adopt"));
    json_decref(v);
    return out->uid != NULL;
}

void op_owner_free(op_owner *w)
{
    free(w->api_version);
    free(w->kind);
    free(w->ns);
    free(w->name);
    free(w->uid);
    memset(w, 0, sizeof *w);
}

/* ---- informers ---- */
static void on_event(void *ud, k8s_event_type type, const json_t *obj)
{
    op_watch *w = ud;
    struct op *o = w->o;
    const json_t *meta = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!name) return;
    char *key = xasprintf("%d|%s/%s", (int)(w - o->watches), ns ? ns : "", name);
    pthread_mutex_lock(&o->mu);
    if (type == K8S_DELETED) json_object_del(o->seen, key);
    else json_object_set_new(o->seen, key, json_true());
    if (o->n_pending == o->cap_pending) {
        o->cap_pending = o->cap_pending ? 2 * o->cap_pending : 64;
        o->pending = xrealloc(o->pending, o->cap_pending * sizeof *o->pending);
    }
    o->pending[o->n_pending++] = key;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static void on_sync(void *ud, bool synced, const char *why)
{
    (void)why;
    op_watch *w = ud;
    pthread_mutex_lock(&w->o->mu);
    w->synced = w->synced || synced; /* first list delivered */
    pthread_cond_signal(&w->o->cv);
    pthread_mutex_unlock(&w->o->mu);
}

typedef struct served_kind {
    op_kind kind;
    const char *api, *resource, *kind_name;
} served_kind;

static const served_kind served[] = {
    {OP_LORAJOB, "training.example.com/v1", "loratrainingjobs", "LoRATrainingJob"},
    {OP_LORAJOB, "lathe.dev/v1", "loratrainingjobs", "LoRATrainingJob"},
    {OP_LORAEXP, "training.example.com/v1", "loraexperiments", "LoRAExperiment"},
    {OP_LORAEXP, "lathe.dev/v1", "loraexperiments", "LoRAExperiment"},
    {OP_USERJOB, "batch/v1", "jobs", "Job"},
};

/* Whether the API serves a kind (its CRD is installed): a list of one. */
static bool kind_served(struct op *o, const served_kind *sk, const char *ns, char *err, size_t errsz)
{
    k8s_ref ref = {.api = sk->api, .resource = sk->resource, .ns = ns};
    json_t *items = NULL;
    k8s_error e;
    k8s_rc rc = k8s_list(o->cl, &ref, NULL, NULL, 1, &items, NULL, &e);
    json_decref(items);
    if (rc == K8S_OK) return true;
    if (rc != K8S_E_NOT_FOUND) snprintf(err, errsz, "%s", e.message);
    return false;
}

static bool start_watches(struct op *o, char *err, size_t errsz)
{
    const spec_k8s *k = o->k;
    size_t n_kinds = sizeof served / sizeof served[0];
    o->watches = xcalloc(n_kinds * k->op.n_namespaces, sizeof *o->watches);
    for (size_t i = 0; i < n_kinds; i++) {
        const served_kind *sk = &served[i];
        for (size_t n = 0; n < k->op.n_namespaces; n++) {
            const char *ns = k->op.namespaces[n];
            char e2[1024] = "";
            if (!kind_served(o, sk, ns, e2, sizeof e2)) {
                if (e2[0]) {
                    snprintf(err, errsz, "listing %s in namespace %s: %s", sk->resource, ns, e2);
                    return false;
                }
                if (n == 0)
                    srv_log(o->s, "operator: the API serves no %s (%s): not watched; `lathe render "
                            "server --target k8s` holds its CustomResourceDefinition",
                            sk->kind_name, sk->api);
                break;
            }
            op_watch *w = &o->watches[o->n_watches++];
            *w = (op_watch){.o = o, .kind = sk->kind, .api = sk->api, .resource = sk->resource,
                            .kind_name = sk->kind_name, .ns = xstrdup(ns)};
            k8s_ref ref = {.api = sk->api, .resource = sk->resource, .ns = ns};
            w->inf = k8s_informer_start(o->cl, &ref, sk->kind == OP_USERJOB ? K8S_LABEL_QUEUE : NULL,
                                        on_event, on_sync, w, err, errsz);
            if (!w->inf) return false;
        }
    }
    return true;
}

/* ---- quotas and priority classes: the server starts again on a change ---- */
/* A quota's status.used moves with every pod: only a change of what it
 * says (everything but metadata and status) counts. */
static void on_cfg_event(void *ud, k8s_event_type type, const json_t *obj)
{
    struct op *o = ud;
    const json_t *meta = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    char *key = xasprintf("%s/%s", ns ? ns : "", json_string_value(json_object_get(meta, "name")));
    json_t *body = json_deep_copy(obj);
    json_object_del(body, "metadata");
    json_object_del(body, "status");
    char *text = type == K8S_DELETED ? NULL : json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(body);
    pthread_mutex_lock(&o->mu);
    const char *had = json_string_value(json_object_get(o->cfg_seen, key));
    if (!had || !text || strcmp(had, text) != 0) o->cfg_changed = true;
    if (text) json_object_set_new(o->cfg_seen, key, json_string(text));
    else json_object_del(o->cfg_seen, key);
    pthread_mutex_unlock(&o->mu);
    free(text);
    free(key);
}

static bool watch_cfg(struct op *o, char *err, size_t errsz)
{
    size_t n = o->k->op.n_namespaces + 1;
    o->cfg_inf = xcalloc(n, sizeof *o->cfg_inf);
    for (size_t i = 0; i < n; i++) {
        k8s_ref ref = i < o->k->op.n_namespaces
                          ? (k8s_ref){.api = "v1", .resource = "resourcequotas",
                                      .ns = o->k->op.namespaces[i]}
                          : (k8s_ref){.api = "scheduling.k8s.io/v1", .resource = "priorityclasses"};
        o->cfg_inf[i] = k8s_informer_start(o->cl, &ref, NULL, on_cfg_event, NULL, o, err, errsz);
        if (!o->cfg_inf[i]) return false;
        o->n_cfg_inf++;
    }
    return true;
}

/* Starts this program again in this process (the same pid, argv and
 * environment): the way a changed quota or priority class reaches the
 * scheduler's cluster, which is fixed while a server runs. The leader
 * gives the Lease up first, so the standby (or this process, a moment
 * later) rebuilds from the API at once. Every descriptor but the standard
 * three is closed: the listener's port is free for the new image. */
static void restart_self(struct op *o, const char *why)
{
    fprintf(stderr, "lathe server: operator: %s: starting again to apply it\n", why);
    if (atomic_load(&o->leading)) k8s_lease_release(o->lease);
    size_t len;
    char err[128];
    char *cmd = file_read_all("/proc/self/cmdline", 1 << 16, &len, err, sizeof err);
    if (!cmd || len == 0) {
        fprintf(stderr, "lathe server: operator: /proc/self/cmdline: %s; exiting\n", err);
        _exit(LT_EXIT_UNAVAILABLE);
    }
    size_t argc = 0;
    for (size_t i = 0; i < len; i++) argc += cmd[i] == '\0';
    char **argv = xcalloc(argc + 1, sizeof *argv);
    size_t k = 0;
    for (size_t i = 0; i < len && k < argc; i += strlen(cmd + i) + 1) argv[k++] = cmd + i;
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++) close((int)fd);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "lathe server: operator: cannot start again: %s\n", strerror(errno));
    _exit(LT_EXIT_UNAVAILABLE);
}

static void check_cfg(struct op *o, double now)
{
    pthread_mutex_lock(&o->mu);
    bool changed = o->cfg_changed && now >= o->next_cfg_check;
    if (changed) o->cfg_changed = false;
    pthread_mutex_unlock(&o->mu);
    if (!changed) return;
    o->next_cfg_check = now + 2;
    char err[512];
    char *print = op_cluster_print(o->s->cfg.spec, o->s->be, err, sizeof err);
    if (!print) {
        srv_log(o->s, "operator: reading quotas and priority classes: %s", err);
        pthread_mutex_lock(&o->mu);
        o->cfg_changed = true; /* try again */
        pthread_mutex_unlock(&o->mu);
        return;
    }
    const char *had = o->s->cluster.api_print ? o->s->cluster.api_print : "";
    bool differs = strcmp(print, had) != 0;
    free(print);
    if (differs) restart_self(o, "a ResourceQuota or PriorityClass changed");
}

static bool all_synced(struct op *o)
{
    pthread_mutex_lock(&o->mu);
    bool ok = true;
    for (size_t i = 0; i < o->n_watches; i++) ok = ok && o->watches[i].synced;
    pthread_mutex_unlock(&o->mu);
    return ok;
}

/* ---- the Lease ---- */
static char *file_line(const char *path)
{
    size_t len;
    char err[128];
    char *text = file_read_all(path, 4096, &len, err, sizeof err);
    if (text) text[strcspn(text, "\r\n")] = '\0';
    if (text && !*text) {
        free(text);
        text = NULL;
    }
    return text;
}

static void lease_names(struct op *o)
{
    const spec_k8s *k = o->k;
    const char *env_ns = getenv("POD_NAMESPACE"), *env_pod = getenv("POD_NAME");
    if (k->op.lease_namespace) o->lease_ns = xstrdup(k->op.lease_namespace);
    else if (env_ns && *env_ns) o->lease_ns = xstrdup(env_ns);
    else if (!(o->lease_ns = file_line("/var/run/secrets/kubernetes.io/serviceaccount/namespace")))
        o->lease_ns = xstrdup("lathe-system");
    if (k->op.identity) {
        o->identity = xstrdup(k->op.identity);
    } else if (env_pod && *env_pod) {
        o->identity = xstrdup(env_pod);
    } else {
        char host[256] = "lathe";
        gethostname(host, sizeof host - 1);
        o->identity = xasprintf("%s-%d", host, (int)getpid());
    }
}

bool op_active(op *o, char *why, size_t whysz)
{
    if (atomic_load(&o->leading) && atomic_load(&o->s->active)) return true;
    pthread_mutex_lock(&o->mu);
    if (atomic_load(&o->leading))
        snprintf(why, whysz, "leader: rebuilding the store from the Kubernetes API");
    else if (o->holder[0])
        snprintf(why, whysz, "standby: the Lease %s/%s is held by %s", o->lease_ns,
                 o->k->op.lease_name, o->holder);
    else
        snprintf(why, whysz, "standby: waiting for the Lease %s/%s", o->lease_ns, o->k->op.lease_name);
    pthread_mutex_unlock(&o->mu);
    return false;
}

/* ---- becoming the leader ---- */
static void take_pending(struct op *o, char ***keys, size_t *n)
{
    pthread_mutex_lock(&o->mu);
    *keys = o->pending;
    *n = o->n_pending;
    o->pending = NULL;
    o->n_pending = o->cap_pending = 0;
    pthread_mutex_unlock(&o->mu);
}

static int become_leader(struct op *o, char *err, size_t errsz)
{
    srv *s = o->s;
    srv_log(s, "operator: %s holds the Lease %s/%s: rebuilding the store from the API", o->identity,
            o->lease_ns, o->k->op.lease_name);
    int rc = srv_open_cache(s, err, errsz);
    if (rc != LT_EXIT_OK) return rc;
    o->st = srv_pool_get(&s->pool, err, errsz);
    if (!o->st) return LT_EXIT_IO;
    if (!op_list_owned(o, err, errsz)) return LT_EXIT_UNAVAILABLE;
    char **keys;
    size_t n;
    take_pending(o, &keys, &n); /* the rebuild reconciles every object anyway */
    str_list_free(keys, n);
    pthread_mutex_lock(&o->mu);
    json_t *all = json_copy(o->seen); /* the informers go on changing seen */
    pthread_mutex_unlock(&o->mu);
    const char *key;
    json_t *v;
    size_t restored = 0;
    json_object_foreach(all, key, v) {
        op_reconcile(o, key, true);
        restored++;
    }
    json_decref(all);
    json_decref(o->owned);
    o->owned = NULL;
    rc = srv_start_controller(s, err, errsz);
    if (rc == LT_EXIT_OK)
        srv_log(s, "operator: leading; %zu objects restored from the API", restored);
    return rc;
}

/* ---- the loop ---- */
static void wait_turn(struct op *o, double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)((seconds - (long)seconds) * 1e9);
    ts.tv_sec += (time_t)seconds + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&o->mu);
    if (!o->quit && o->n_pending == 0) pthread_cond_timedwait(&o->cv, &o->mu, &ts);
    pthread_mutex_unlock(&o->mu);
}

static bool quitting(struct op *o)
{
    pthread_mutex_lock(&o->mu);
    bool q = o->quit;
    pthread_mutex_unlock(&o->mu);
    return q;
}

static void tick_lease(struct op *o, double now)
{
    k8s_error e;
    memset(&e, 0, sizeof e);
    bool held = k8s_lease_tick(o->lease, now, &e);
    pthread_mutex_lock(&o->mu);
    const char *h = k8s_lease_holder(o->lease);
    snprintf(o->holder, sizeof o->holder, "%s", h ? h : "");
    pthread_mutex_unlock(&o->mu);
    if (atomic_load(&o->leading) && !held) {
        /* Another replica may act from now on: stop at once. */
        fprintf(stderr, "lathe server: operator: lost the Lease %s/%s (%s): exiting so that one "
                        "replica acts at a time\n",
                o->lease_ns, o->k->op.lease_name, e.message[0] ? e.message : "not renewed in time");
        _exit(LT_EXIT_UNAVAILABLE);
    }
    if (held && !atomic_load(&o->leading) && all_synced(o)) {
        atomic_store(&o->leading, true);
        char err[512] = "";
        if (become_leader(o, err, sizeof err) != LT_EXIT_OK) {
            fprintf(stderr, "lathe server: operator: cannot lead: %s\n", err);
            k8s_lease_release(o->lease);
            _exit(LT_EXIT_UNAVAILABLE);
        }
    }
}

static void *op_main(void *arg)
{
    struct op *o = arg;
    thread_set_name("lathe-op");
    double next_lease = 0;
    while (!quitting(o)) {
        double now = mono_now();
        if (now >= next_lease) {
            tick_lease(o, now);
            next_lease = now + o->k->op.retry_period;
        }
        char **keys;
        size_t n;
        check_cfg(o, now);
        take_pending(o, &keys, &n);
        if (atomic_load(&o->s->active))
            for (size_t i = 0; i < n; i++) op_reconcile(o, keys[i], false);
        str_list_free(keys, n);
        if (atomic_load(&o->s->active)) op_status_pass(o, now);
        double wait = next_lease - mono_now();
        if (atomic_load(&o->s->active) && wait > 0.25) wait = 0.25; /* statuses follow the store */
        if (wait > 0) wait_turn(o, wait);
    }
    return NULL;
}

op *op_start(srv *s, char *err, size_t errsz)
{
    struct op *o = xcalloc(1, sizeof *o);
    o->s = s;
    o->k = &s->cfg.spec->k8s;
    o->cl = exec_k8s_client(s->be);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    atomic_init(&o->leading, false);
    o->seen = json_object();
    o->objs = json_object();
    o->by_job = json_object();
    o->cfg_seen = json_object();
    lease_names(o);
    if (!start_watches(o, err, errsz) || !watch_cfg(o, err, errsz)) {
        op_stop(o);
        return NULL;
    }
    k8s_lease_config lc = {.namespace_ = o->lease_ns, .name = o->k->op.lease_name,
                           .identity = o->identity, .duration = o->k->op.lease_duration,
                           .renew_deadline = o->k->op.renew_deadline,
                           .retry_period = o->k->op.retry_period};
    o->lease = k8s_lease_new(o->cl, &lc);
    if (pthread_create(&o->thread, NULL, op_main, o) != 0) {
        snprintf(err, errsz, "cannot start the operator's thread: %s", strerror(errno));
        op_stop(o);
        return NULL;
    }
    o->thread_started = true;
    srv_log(s, "operator: serving %zu namespace%s as %s; Lease %s/%s", o->k->op.n_namespaces,
            o->k->op.n_namespaces == 1 ? "" : "s", o->identity, o->lease_ns, o->k->op.lease_name);
    return o;
}

void op_stop(op *o)
{
    if (!o) return;
    pthread_mutex_lock(&o->mu);
    o->quit = true;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
    if (o->thread_started) pthread_join(o->thread, NULL);
    for (size_t i = 0; i < o->n_watches; i++) {
        k8s_informer_free(o->watches[i].inf);
        free(o->watches[i].ns);
    }
    free(o->watches);
    for (size_t i = 0; i < o->n_cfg_inf; i++) k8s_informer_free(o->cfg_inf[i]);
    free(o->cfg_inf);
    if (o->lease) {
        if (atomic_load(&o->leading)) k8s_lease_release(o->lease);
        k8s_lease_free(o->lease);
    }
    const char *key;
    json_t *v;
    json_object_foreach(o->objs, key, v) op_obj_free((op_obj *)(intptr_t)json_integer_value(v));
    json_decref(o->objs);
    json_decref(o->by_job);
    json_decref(o->cfg_seen);
    json_decref(o->seen);
    json_decref(o->owned);
    if (o->st) srv_pool_put(&o->s->pool, o->st);
    str_list_free(o->pending, o->n_pending);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    free(o->lease_ns);
    free(o->identity);
    free(o);
}
