/* exec_k8s.c: the Kubernetes backend (docs/kubernetes.md, "The executor").
 *
 * One attempt is one batch/v1 Job, named k8s_job_name(job, attempt) in the
 * team's namespace:
 *
 *   prepare  creates it suspended while the job waits in lathe's queue (a
 *            409 AlreadyExists adopts it when its labels say it is the same
 *            job and attempt, so no attempt runs twice, even across
 *            restarts);
 *   start    admits it, the way Kueue does: one merge patch writes the
 *            placement lathe's scheduler chose into the pod template
 *            (nodeSelector, affinity: mutable while it is suspended and has
 *            not started) and sets suspend false;
 *   cancel   suspends it again: the Job controller deletes its pods
 *            gracefully (SIGTERM, the grace period: the trainer saves a
 *            checkpoint); past the deadline the pods are deleted at once;
 *            once they are gone the Job is deleted (foreground).
 *
 * A user's own Job (exec_cluster_req.adopt: created suspended, labelled
 * lathe.dev/queue) goes the same way except that lathe never creates or
 * deletes it: prepare checks that it is there, start admits it (the
 * placement only while it never ran), cancel suspends it and leaves it,
 * and a later attempt admits the same Job again.
 *
 * Four informers (lathe's Jobs by label, users' Jobs by lathe.dev/queue,
 * every Pod, every Node) keep tables that polls read: no poll sends a
 * request, so the steady state costs watches only. Pods of other owners
 * count for the GPUs they hold; those of a user's Job while an attempt of
 * lathe runs it are lathe's (the store counts them).
 */
#include "exec_k8s_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HANDLE_VERSION 1

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- small JSON readers ---- */
const char *k8s_jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

const char *k8s_meta_str(const json_t *o, const char *key)
{
    return k8s_jstr(json_object_get(o, "metadata"), key);
}

const char *k8s_label_of(const json_t *o, const char *key)
{
    return k8s_jstr(json_object_get(json_object_get(o, "metadata"), "labels"), key);
}

/* A quantity as an integer count ("4"), or 0. */
static int quantity_int(const json_t *v)
{
    if (json_is_integer(v)) return (int)json_integer_value(v);
    const char *s = json_string_value(v);
    if (!s) return 0;
    char *end;
    long n = strtol(s, &end, 10);
    return *end || n < 0 || n > 1 << 20 ? 0 : (int)n;
}

/* GPUs a pod holds: the sum over its containers of the GPU resource's
 * limits (requests where no limit is given). */
static int pod_gpus(const json_t *pod, const char *resource)
{
    int n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        json_t *r = json_object_get(c, "resources");
        json_t *v = json_object_get(json_object_get(r, "limits"), resource);
        if (!v) v = json_object_get(json_object_get(r, "requests"), resource);
        n += quantity_int(v);
    }
    return n;
}

static bool pod_terminal(const json_t *pod)
{
    const char *ph = k8s_jstr(json_object_get(pod, "status"), "phase");
    return ph && (strcmp(ph, "Succeeded") == 0 || strcmp(ph, "Failed") == 0);
}

static char *key_of(const char *ns, const char *name)
{
    return xasprintf("%s/%s", ns ? ns : "", name ? name : "");
}

/* ---- the tables, fed by the informers ---- */
static void track_free(void *p)
{
    k8s_track *t = p;
    if (!t) return;
    json_decref(t->job);
    for (size_t i = 0; i < t->pods.cap; i++)
        if (t->pods.e[i].key) json_decref(t->pods.e[i].val);
    kmap_free(&t->pods, NULL);
    kmap_free(&t->pods_gone, NULL);
    free(t);
}

static k8s_track *track_get(k8s_backend *kb, const char *key)
{
    k8s_track *t = kmap_get(&kb->tracks, key);
    if (!t) {
        t = xcalloc(1, sizeof *t);
        kmap_init(&t->pods);
        kmap_init(&t->pods_gone);
        kmap_put(&kb->tracks, key, t);
    }
    return t;
}

static void use_free(void *p)
{
    k8s_pod_use *u = p;
    if (!u) return;
    free(u->node);
    free(u->job);
    free(u);
}

/* Drops the tracks of Jobs deleted more than TRACK_KEEP seconds ago: no
 * attempt looks at them any more (an ended attempt's handle is released
 * long before), and a server that runs for months must not keep them all. */
#define TRACK_KEEP 600.0
static void sweep_tracks(k8s_backend *kb, double now)
{
    for (size_t i = 0; i < kb->tracks.cap;) {
        k8s_track *t = kb->tracks.e[i].key ? kb->tracks.e[i].val : NULL;
        if (t && t->gone && now - t->gone_at > TRACK_KEEP) {
            char *key = xstrdup(kb->tracks.e[i].key);
            track_free(kmap_del(&kb->tracks, key));
            free(key);
            continue; /* the slot now holds the next entry of its run */
        }
        i++;
    }
}

/* A Job's transition, from either Jobs informer (user: the one of users'
 * Jobs labelled lathe.dev/queue). */
static void job_event(k8s_backend *kb, k8s_event_type type, const json_t *obj, bool user)
{
    char *key = key_of(k8s_meta_str(obj, "namespace"), k8s_meta_str(obj, "name"));
    pthread_mutex_lock(&kb->mu);
    k8s_track *t = track_get(kb, key);
    json_decref(t->job);
    t->job = NULL;
    if (type == K8S_DELETED) {
        t->gone = true;
        t->gone_at = now_s();
        if (++kb->deletions % 256 == 0) sweep_tracks(kb, t->gone_at);
    } else {
        t->job = json_incref((json_t *)obj); /* shared with the informer: never changed */
        t->seen = true;
        t->gone = false;
        if (user) t->user = true;
    }
    pthread_mutex_unlock(&kb->mu);
    free(key);
}

static void on_job(void *ud, k8s_event_type type, const json_t *obj)
{
    job_event(ud, type, obj, false);
}

static void on_user_job(void *ud, k8s_event_type type, const json_t *obj)
{
    job_event(ud, type, obj, true);
}

/* The pod's hold on GPUs changed: the inventory moves. job: "ns/job" of
 * the Job that made it, or NULL. */
static void pod_use(k8s_backend *kb, const char *key, const char *job, k8s_event_type type,
                    const json_t *pod)
{
    const char *node = k8s_jstr(json_object_get(pod, "spec"), "nodeName");
    int gpus = pod_gpus(pod, kb->k->gpu_resource);
    bool holds = type != K8S_DELETED && node && *node && gpus > 0 && !pod_terminal(pod);
    k8s_pod_use *u = kmap_get(&kb->uses, key);
    if (!holds) {
        if (u) {
            use_free(kmap_del(&kb->uses, key));
            kb->nodes_version++;
        }
        return;
    }
    if (u && u->gpus == gpus && strcmp(u->node, node) == 0) return;
    if (!u) {
        u = xcalloc(1, sizeof *u);
        kmap_put(&kb->uses, key, u);
    }
    free(u->node);
    u->node = xstrdup(node);
    u->gpus = gpus;
    free(u->job);
    u->job = job ? xstrdup(job) : NULL;
    /* an attempt's pod (the store's id, or operator mode's owner), not one
     * of `lathe render`'s Jobs applied by hand, which the store knows nothing of */
    const char *m = k8s_label_of(pod, K8S_LABEL_MANAGED);
    u->ours = m && strcmp(m, "lathe") == 0 &&
              (k8s_label_of(pod, K8S_LABEL_JOB_ID) || k8s_label_of(pod, K8S_LABEL_OWNER_UID));
    kb->nodes_version++;
}

/* The pod's controller is the Job named job (the Job controller's labels
 * alone could be copied onto any pod). */
static bool owned_by_job(const json_t *pod, const char *job)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(pod, "metadata"), "ownerReferences"), i, r)
    {
        const char *kind = k8s_jstr(r, "kind"), *name = k8s_jstr(r, "name");
        if (json_is_true(json_object_get(r, "controller")) && kind && strcmp(kind, "Job") == 0 &&
            name && strcmp(name, job) == 0)
            return true;
    }
    return false;
}

static void on_pod(void *ud, k8s_event_type type, const json_t *obj)
{
    k8s_backend *kb = ud;
    const char *ns = k8s_meta_str(obj, "namespace"), *name = k8s_meta_str(obj, "name");
    if (!name) return;
    char *key = key_of(ns, name);
    const char *job = k8s_label_of(obj, "batch.kubernetes.io/job-name");
    if (!job) job = k8s_label_of(obj, "job-name");
    const char *managed = k8s_label_of(obj, K8S_LABEL_MANAGED);
    bool lathes = managed && strcmp(managed, "lathe") == 0;
    char *jkey = job ? key_of(ns, job) : NULL;
    pthread_mutex_lock(&kb->mu);
    pod_use(kb, key, jkey, type, obj);
    /* lathe's pods by its labels; a user's Job's by its controller, and
     * only once its Job is known (the Pods' list starts after the Jobs'),
     * so the pods of every other Job of the cluster are not kept */
    k8s_track *t = NULL;
    if (jkey && lathes) t = track_get(kb, jkey);
    else if (jkey && owned_by_job(obj, job)) t = kmap_get(&kb->tracks, jkey);
    if (t && (lathes || t->user)) {
        json_decref(kmap_put(&t->pods, name, json_incref((json_t *)obj)));
        if (type == K8S_DELETED) kmap_put(&t->pods_gone, name, (void *)1);
        else kmap_del(&t->pods_gone, name);
    }
    pthread_mutex_unlock(&kb->mu);
    free(jkey);
    free(key);
}

static void on_node(void *ud, k8s_event_type type, const json_t *obj)
{
    k8s_backend *kb = ud;
    const char *name = k8s_meta_str(obj, "name");
    if (!name) return;
    pthread_mutex_lock(&kb->mu);
    if (type == K8S_DELETED) json_decref(kmap_del(&kb->node_objs, name));
    else json_decref(kmap_put(&kb->node_objs, name, json_incref((json_t *)obj)));
    kb->nodes_version++;
    pthread_mutex_unlock(&kb->mu);
}

static void set_sync(k8s_backend *kb, int which, bool synced, const char *why)
{
    /* the label's name spelled out: clang warns on a concatenated literal in an array */
    static const char *const names[] = {"Jobs", "Pods", "Nodes", "Jobs labelled lathe.dev/queue"};
    pthread_mutex_lock(&kb->mu);
    kb->synced[which] = synced;
    if (!synced)
        snprintf(kb->why, sizeof kb->why, "the watch of %s is not current: %s", names[which],
                 why && *why ? why : "no answer yet");
    pthread_mutex_unlock(&kb->mu);
}
static void sync_jobs(void *ud, bool s, const char *why) { set_sync(ud, 0, s, why); }
static void sync_pods(void *ud, bool s, const char *why) { set_sync(ud, 1, s, why); }
static void sync_nodes(void *ud, bool s, const char *why) { set_sync(ud, 2, s, why); }
static void sync_user_jobs(void *ud, bool s, const char *why) { set_sync(ud, 3, s, why); }

void k8s_backend_view(k8s_backend *kb, const char *ns, const char *name, k8s_view *v)
{
    memset(v, 0, sizeof *v);
    char *key = key_of(ns, name);
    pthread_mutex_lock(&kb->mu);
    v->synced = kb->synced[0] && kb->synced[1] && kb->synced[3];
    k8s_track *t = kmap_get(&kb->tracks, key);
    if (t) {
        v->job = t->job ? json_incref(t->job) : NULL;
        v->seen = t->seen;
        v->gone = t->gone;
        v->pods = xcalloc(t->pods.n + 1, sizeof *v->pods);
        v->pod_gone = xcalloc(t->pods.n + 1, sizeof *v->pod_gone);
        for (size_t i = 0; i < t->pods.cap; i++) {
            if (!t->pods.e[i].key) continue;
            v->pods[v->n_pods] = json_incref(t->pods.e[i].val);
            v->pod_gone[v->n_pods] = kmap_get(&t->pods_gone, t->pods.e[i].key) != NULL;
            v->n_pods++;
        }
    }
    pthread_mutex_unlock(&kb->mu);
    free(key);
}

void k8s_view_free(k8s_view *v)
{
    json_decref(v->job);
    for (size_t i = 0; i < v->n_pods; i++) json_decref(v->pods[i]);
    free(v->pods);
    free(v->pod_gone);
    memset(v, 0, sizeof *v);
}

void k8s_handle_view(k8s_handle *kh, k8s_view *v)
{
    k8s_backend_view(kh->kb, kh->ns, kh->name, v);
    size_t m = 0;
    for (size_t i = 0; i < v->n_pods; i++) {
        const char *name = k8s_meta_str(v->pods[i], "name");
        bool stale = false;
        for (size_t k = 0; k < kh->n_stale && !stale; k++) stale = name && strcmp(kh->stale[k], name) == 0;
        if (stale) {
            json_decref(v->pods[i]);
            continue;
        }
        v->pods[m] = v->pods[i];
        v->pod_gone[m] = v->pod_gone[i];
        m++;
    }
    v->n_pods = m;
}

void k8s_backend_admitted(k8s_backend *kb, const char *ns, const char *name, bool admitted)
{
    char *key = key_of(ns, name);
    pthread_mutex_lock(&kb->mu);
    k8s_track *t = admitted ? track_get(kb, key) : kmap_get(&kb->tracks, key);
    if (t && t->admitted != admitted) {
        t->admitted = admitted;
        /* lathe checked its label: its pods are tracked even before the
         * informer of users' Jobs shows it */
        if (admitted) t->user = true;
        kb->nodes_version++; /* its pods' GPUs move between lathe's and foreign */
    }
    pthread_mutex_unlock(&kb->mu);
    free(key);
}

/* ---- readiness and inventory ---- */
bool exec_k8s_ready(exec_backend *be, char *why, size_t whysz)
{
    k8s_backend *kb = (k8s_backend *)be;
    pthread_mutex_lock(&kb->mu);
    bool ok = kb->synced[0] && kb->synced[1] && kb->synced[2] && kb->synced[3];
    if (why) snprintf(why, whysz, "%s", ok ? "" : kb->why);
    pthread_mutex_unlock(&kb->mu);
    return ok;
}

uint64_t exec_k8s_nodes_version(exec_backend *be)
{
    k8s_backend *kb = (k8s_backend *)be;
    pthread_mutex_lock(&kb->mu);
    uint64_t v = kb->nodes_version;
    pthread_mutex_unlock(&kb->mu);
    return v;
}

/* Whether a taint keeps lathe's GPU pods off the node (they tolerate only
 * the GPU resource's own NoSchedule taint). */
static bool taint_blocks(const json_t *taint, const char *gpu_resource)
{
    const char *effect = k8s_jstr(taint, "effect"), *key = k8s_jstr(taint, "key");
    if (!effect || strcmp(effect, "PreferNoSchedule") == 0) return false;
    return !(key && strcmp(key, gpu_resource) == 0 && strcmp(effect, "NoSchedule") == 0);
}

static void node_fill(const k8s_backend *kb, const json_t *obj, exec_k8s_node *n)
{
    const spec_k8s *k = kb->k;
    memset(n, 0, sizeof *n);
    n->name = xstrdup(k8s_meta_str(obj, "name"));
    const json_t *st = json_object_get(obj, "status");
    const json_t *alloc = json_object_get(st, "allocatable");
    n->gpus = quantity_int(json_object_get(alloc, k->gpu_resource));
    double v;
    const char *cpu = k8s_jstr(alloc, "cpu"), *mem = k8s_jstr(alloc, "memory");
    if (cpu && units_parse_count(cpu, &v)) n->cpu = v;
    if (cpu && str_ends_with(cpu, "m")) n->cpu = strtod(cpu, NULL) / 1000.0;
    if (mem && units_parse_bytes(mem, &v)) n->memory = v;
    const char *s;
    if ((s = k8s_label_of(obj, k->gpu_product_label))) n->product = xstrdup(s);
    if ((s = k8s_label_of(obj, k->rack_label))) n->rack = xstrdup(s);
    if ((s = k8s_label_of(obj, k->zone_label))) n->zone = xstrdup(s);
    if ((s = k8s_label_of(obj, k->nvlink_label))) n->nvlink = xstrdup(s);
    if ((s = k8s_label_of(obj, k->gpu_memory_label))) n->gpu_memory = strtod(s, NULL) * 1024.0 * 1024.0;
    n->schedulable = true;
    bool ready = false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        const char *t = k8s_jstr(c, "type"), *cs = k8s_jstr(c, "status");
        if (t && strcmp(t, "Ready") == 0) ready = cs && strcmp(cs, "True") == 0;
    }
    if (!ready) {
        n->schedulable = false;
        snprintf(n->why, sizeof n->why, "NotReady");
        return;
    }
    if (json_is_true(json_object_get(json_object_get(obj, "spec"), "unschedulable"))) {
        n->schedulable = false;
        snprintf(n->why, sizeof n->why, "cordoned");
        return;
    }
    json_array_foreach(json_object_get(json_object_get(obj, "spec"), "taints"), i, c)
    {
        if (!taint_blocks(c, k->gpu_resource)) continue;
        n->schedulable = false;
        snprintf(n->why, sizeof n->why, "taint %s%s%s:%s", k8s_jstr(c, "key") ? k8s_jstr(c, "key") : "",
                 k8s_jstr(c, "value") ? "=" : "", k8s_jstr(c, "value") ? k8s_jstr(c, "value") : "",
                 k8s_jstr(c, "effect"));
        return;
    }
}

static int cmp_node(const void *a, const void *b)
{
    return strcmp(((const exec_k8s_node *)a)->name, ((const exec_k8s_node *)b)->name);
}

void exec_k8s_nodes(exec_backend *be, exec_k8s_node **out, size_t *n)
{
    k8s_backend *kb = (k8s_backend *)be;
    pthread_mutex_lock(&kb->mu);
    exec_k8s_node *v = xcalloc(kb->node_objs.n + 1, sizeof *v);
    size_t m = 0;
    for (size_t i = 0; i < kb->node_objs.cap; i++) {
        if (!kb->node_objs.e[i].key) continue;
        node_fill(kb, kb->node_objs.e[i].val, &v[m]);
        if (v[m].gpus <= 0) {
            free(v[m].name);
            free(v[m].product);
            free(v[m].rack);
            free(v[m].zone);
            free(v[m].nvlink);
            continue;
        }
        m++;
    }
    qsort(v, m, sizeof *v, cmp_node);
    for (size_t i = 0; i < kb->uses.cap; i++) {
        const k8s_pod_use *u = kb->uses.e[i].key ? kb->uses.e[i].val : NULL;
        if (!u || u->ours) continue;
        const k8s_track *t = u->job ? kmap_get(&kb->tracks, u->job) : NULL;
        if (t && t->admitted) continue; /* a user's Job lathe runs: counted by the store */
        exec_k8s_node *hit = exec_k8s_node_find(v, m, u->node);
        if (hit) hit->foreign += u->gpus;
    }
    pthread_mutex_unlock(&kb->mu);
    *out = v;
    *n = m;
}

exec_k8s_node *exec_k8s_node_find(exec_k8s_node *nodes, size_t n, const char *name)
{
    exec_k8s_node key = {.name = (char *)name};
    return n ? bsearch(&key, nodes, n, sizeof *nodes, cmp_node) : NULL;
}

void exec_k8s_nodes_free(exec_k8s_node *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(nodes[i].name);
        free(nodes[i].product);
        free(nodes[i].rack);
        free(nodes[i].zone);
        free(nodes[i].nvlink);
    }
    if (n) free(nodes);
}

/* ---- handles ---- */
/* The handle as JSON; an adopted Job's also says so ("adopt": true) and
 * names the pods of its earlier admissions ("stale"). */
static json_t *handle_obj(const k8s_handle *kh)
{
    json_t *codes = json_array();
    for (size_t i = 0; i < kh->n_no_retry; i++) json_array_append_new(codes, json_integer(kh->no_retry[i]));
    json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:I, s:i, s:s, s:i, s:s, s:s, s:f, s:f, s:f, s:f, s:b, "
                     "s:b, s:o}",
                     "backend", "k8s", "version", HANDLE_VERSION, "namespace", kh->ns, "job",
                     kh->name, "job_id", (json_int_t)kh->job_id, "nnodes", kh->nnodes, "job_dir",
                     kh->h.job_dir, "attempt", kh->h.attempt, "work_dir", kh->h.work_dir,
                     "log_path", kh->h.log_path, "started_at", kh->h.started_at, "created_at",
                     kh->created_at, "term_at", kh->term_at, "kill_at", kh->kill_at, "kill_sent",
                     kh->kill_sent, "cancel", kh->cancel, "no_retry", codes);
    if (kh->adopt) {
        json_t *stale = json_array();
        for (size_t i = 0; i < kh->n_stale; i++) json_array_append_new(stale, json_string(kh->stale[i]));
        json_object_set_new(o, "adopt", json_true());
        json_object_set_new(o, "stale", stale);
    }
    return o;
}

static char *k8s_handle_json(const exec_handle *h)
{
    json_t *o = handle_obj((const k8s_handle *)h);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

/* current.json in the job's folder (exec_find; the attempt's row holds the
 * same once the start is recorded). One file: each costs an fsync. */
void k8s_handle_save(k8s_handle *kh)
{
    char *s = k8s_handle_json(&kh->h);
    char *p = path_join(kh->h.job_dir, "current.json");
    file_write_atomic(p, s, strlen(s));
    free(p);
    free(s);
}

static k8s_handle *handle_new(k8s_backend *kb, const char *ns, const char *name,
                              const char *job_dir, int attempt)
{
    k8s_handle *kh = xcalloc(1, sizeof *kh);
    kh->kb = kb;
    kh->h.backend = &kb->be;
    kh->ns = xstrdup(ns);
    kh->name = xstrdup(name);
    kh->h.job_dir = xstrdup(job_dir);
    kh->h.attempt = attempt;
    char dir[64];
    snprintf(dir, sizeof dir, "attempt-%d", attempt);
    kh->h.work_dir = path_join(job_dir, dir);
    kh->h.log_path = path_join(kh->h.work_dir, "output.log");
    exec_tally_init(&kh->tally);
    pthread_mutex_init(&kh->log_mu, NULL);
    kh->log_fd = -1;
    return kh;
}

/* Creates the attempt's folder and opens its log for the followers. */
static exec_rc handle_open(k8s_handle *kh, char *err, size_t errsz)
{
    if ((mkdir(kh->h.job_dir, 0755) != 0 && errno != EEXIST) ||
        (mkdir(kh->h.work_dir, 0755) != 0 && errno != EEXIST)) {
        snprintf(err, errsz, "%s: %s", kh->h.work_dir, strerror(errno));
        return EXEC_E_SYSTEM;
    }
    kh->log_fd = open(kh->h.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (kh->log_fd < 0) {
        snprintf(err, errsz, "%s: %s", kh->h.log_path, strerror(errno));
        return EXEC_E_SYSTEM;
    }
    exec_log_reader_init(&kh->log, kh->h.log_path);
    return EXEC_OK;
}

static void k8s_release(exec_handle *h)
{
    k8s_handle *kh = (k8s_handle *)h;
    if (!kh) return;
    k8s_handle_stop_followers(kh);
    if (kh->log_fd >= 0) close(kh->log_fd);
    if (kh->log.path) exec_log_reader_free(&kh->log);
    exec_tally_free(&kh->tally);
    json_decref(kh->resume);
    pthread_mutex_destroy(&kh->log_mu);
    free(kh->ns);
    free(kh->name);
    free(kh->no_retry);
    str_list_free(kh->stale, kh->n_stale);
    free(kh->h.job_dir);
    free(kh->h.work_dir);
    free(kh->h.log_path);
    free(kh);
}

/* ---- prepare and start ---- */
static const k8s_ref jobs_ref = {.api = "batch/v1", .resource = "jobs"};

/* The Job is this attempt's: lathe's labels with its attempt and its job's
 * identity: the owner's uid in operator mode (a server that rebuilds its
 * cache from the API numbers its jobs anew), else the store's job id. */
static bool same_attempt(const json_t *job, const exec_request *req)
{
    const char *uid = req->cluster.owner.uid;
    const char *id = k8s_label_of(job, uid ? K8S_LABEL_OWNER_UID : K8S_LABEL_JOB_ID);
    const char *a = k8s_label_of(job, K8S_LABEL_ATTEMPT);
    char want_id[32], want_a[16];
    snprintf(want_id, sizeof want_id, "%lld", (long long)req->cluster.job_id);
    snprintf(want_a, sizeof want_a, "%d", req->attempt);
    return id && a && strcmp(id, uid ? uid : want_id) == 0 && strcmp(a, want_a) == 0;
}

/* "job 12" or "LoRATrainingJob qwen (uid ...)": the job as its Job's labels name it. */
static void job_words(const exec_request *req, char *out, size_t outsz)
{
    const exec_cluster_req *c = &req->cluster;
    if (c->owner.uid)
        snprintf(out, outsz, "%s %s (uid %s)", c->owner.kind ? c->owner.kind : "owner",
                 c->owner.name ? c->owner.name : "?", c->owner.uid);
    else
        snprintf(out, outsz, "job %lld", (long long)c->job_id);
}

static exec_rc from_k8s(const k8s_error *e)
{
    switch (e->rc) {
    case K8S_E_INVALID:
    case K8S_E_NOT_FOUND:
    case K8S_E_FORBIDDEN:
    case K8S_E_UNAUTHORIZED: return EXEC_E_INVALID;
    case K8S_E_UNREACHABLE:
    case K8S_E_SERVER: return EXEC_E_UNAVAILABLE;
    default: return EXEC_E_SYSTEM;
    }
}

/* The headless Service of a multi-node attempt, owned by its Job (so it
 * goes with it); one that exists already is kept. */
static exec_rc ensure_service(k8s_backend *kb, exec_k8s_params *kp, const json_t *job, char *err,
                              size_t errsz)
{
    json_t *svc = k8s_render_service(&kp->p);
    if (!svc) return EXEC_OK;
    const char *uid = k8s_meta_str(job, "uid");
    if (uid) {
        json_t *owner = json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion", "batch/v1", "kind", "Job",
                                  "name", kp->name, "uid", uid, "controller", 0);
        json_object_set_new(json_object_get(svc, "metadata"), "ownerReferences", owner);
    }
    k8s_ref sref = {.api = "v1", .resource = "services", .ns = kp->ns};
    k8s_error e;
    k8s_rc rc = k8s_create(kb->cl, &sref, svc, NULL, &e);
    json_decref(svc);
    if (rc == K8S_OK || rc == K8S_E_EXISTS) return EXEC_OK;
    snprintf(err, errsz, "%s", e.message);
    return from_k8s(&e);
}

/* Makes sure the attempt's Job exists (created suspended, or adopted).
 * *job receives its state when known (NULL when only just created). */
static exec_rc ensure_job(k8s_backend *kb, const exec_request *req, exec_k8s_params *kp,
                          json_t **job, char *err, size_t errsz)
{
    *job = NULL;
    k8s_view v;
    k8s_backend_view(kb, kp->ns, kp->name, &v);
    if (v.job && same_attempt(v.job, req)) {
        *job = json_incref(v.job);
        k8s_view_free(&v);
        return EXEC_OK;
    }
    k8s_view_free(&v);
    k8s_ref ref = jobs_ref;
    ref.ns = kp->ns;
    json_t *obj = k8s_render_job(&kp->p);
    k8s_error e;
    json_t *created = NULL;
    k8s_rc rc = k8s_create(kb->cl, &ref, obj, &created, &e);
    json_decref(obj);
    if (rc == K8S_OK) {
        *job = created;
        return ensure_service(kb, kp, created, err, errsz);
    }
    if (rc != K8S_E_EXISTS) {
        snprintf(err, errsz, "%s", e.message);
        return from_k8s(&e);
    }
/* 409: ours (a create whose answer was lost, another server) or not */
    ref.name = kp->name;
    json_t *have = NULL;
    rc = k8s_get(kb->cl, &ref, &have, &e);
    if (rc != K8S_OK) {
        snprintf(err, errsz, "%s", e.message);
        return from_k8s(&e);
    }
    if (!same_attempt(have, req)) {
        char who[256];
        job_words(req, who, sizeof who);
        snprintf(err, errsz,
                 "a Job named %s exists in namespace %s and is not attempt %d of %s: "
                 "delete it (kubectl delete job %s -n %s) or rename the job",
                 kp->name, kp->ns, req->attempt, who, kp->name, kp->ns);
        json_decref(have);
        return EXEC_E_INVALID;
    }
    *job = have;
    return ensure_service(kb, kp, have, err, errsz);
}

/* Suspended and never started: the placement may still be written. */
static bool admissible(const json_t *job)
{
    const json_t *spec = json_object_get(job, "spec");
    const json_t *st = json_object_get(job, "status");
    return json_is_true(json_object_get(spec, "suspend")) && !json_object_get(st, "startTime");
}

/* ---- a user's own Job (exec_cluster_req.adopt) ---- */

/* "Complete" or "Failed" when the Job has finished (it cannot run again), else NULL. */
static const char *finished_as(const json_t *job)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(job, "status"), "conditions"), i, c)
    {
        const char *t = k8s_jstr(c, "type"), *st = k8s_jstr(c, "status");
        if (t && st && strcmp(st, "True") == 0 && (strcmp(t, "Complete") == 0 || strcmp(t, "Failed") == 0))
            return t;
    }
    return NULL;
}

/* The user's Job the request names, from the informers or else read (a
 * Job created a moment ago may not be in the watch yet); refused with what
 * to do when it is not there or does not carry lathe's queue label (the
 * informer of users' Jobs would not see it, so no poll could follow it). */
static exec_rc user_job(k8s_backend *kb, const exec_request *req, const exec_k8s_params *kp,
                        json_t **job, char *err, size_t errsz)
{
    *job = NULL;
    const char *team = req->cluster.team ? req->cluster.team : "default";
    if (strlen(req->cluster.adopt) >= sizeof kp->name) {
        snprintf(err, errsz, "\"%.80s...\" is not the name of a Job: at most 63 characters",
                 req->cluster.adopt);
        return EXEC_E_INVALID;
    }
    k8s_view v;
    k8s_backend_view(kb, kp->ns, kp->name, &v);
    json_t *have = v.job ? json_incref(v.job) : NULL;
    k8s_view_free(&v);
    if (!have) {
        k8s_ref ref = jobs_ref;
        ref.ns = kp->ns;
        ref.name = kp->name;
        k8s_error e;
        k8s_rc rc = k8s_get(kb->cl, &ref, &have, &e);
        if (rc == K8S_E_NOT_FOUND) {
            snprintf(err, errsz,
                     "there is no Job %s in namespace %s (team %s's) for lathe to admit: create it "
                     "there with spec.suspend: true and the label %s",
                     kp->name, kp->ns, team, K8S_LABEL_QUEUE);
            return EXEC_E_INVALID;
        }
        if (rc != K8S_OK) {
            snprintf(err, errsz, "%s", e.message);
            return from_k8s(&e);
        }
    }
    if (!k8s_label_of(have, K8S_LABEL_QUEUE)) {
        snprintf(err, errsz,
                 "the Job %s in namespace %s has no label %s: lathe admits only Jobs that carry it "
                 "(kubectl label job %s -n %s %s=default)",
                 kp->name, kp->ns, K8S_LABEL_QUEUE, kp->name, kp->ns, K8S_LABEL_QUEUE);
        json_decref(have);
        return EXEC_E_INVALID;
    }
    *job = have;
    return EXEC_OK;
}

/* Removes the members of o that are null. */
static void drop_nulls(json_t *o)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(o, tmp, k, v)
    {
        if (json_is_null(v)) json_object_del(o, k);
    }
}

/* Admits the user's Job with one merge patch: suspend false and the
 * placement annotation always; the placement itself only while the pod
 * template may still change (suspended and never started: a Job admitted
 * again for a later attempt keeps the first placement's), and without
 * clearing the user's own nodeSelector or affinity where lathe's placement
 * wants none. *stale receives the names of the pods the Job has from
 * earlier admissions (not this attempt's). */
static exec_rc admit_user_job(k8s_backend *kb, const exec_request *req, exec_k8s_params *kp,
                              char ***stale, size_t *n_stale, char *err, size_t errsz)
{
    *stale = NULL;
    *n_stale = 0;
    json_t *job;
    exec_rc rc = user_job(kb, req, kp, &job, err, errsz);
    if (rc != EXEC_OK) return rc;
    const char *done = finished_as(job);
    if (done) {
        snprintf(err, errsz,
                 "the Job %s in namespace %s has finished (%s) and cannot run again: delete it and "
                 "create it again (suspended) to run it once more",
                 kp->name, kp->ns, done);
        json_decref(job);
        return EXEC_E_INVALID;
    }
    json_t *patch = k8s_render_admit_patch(&kp->p);
    json_t *spec = json_object_get(patch, "spec");
    if (admissible(job)) drop_nulls(json_object_get(json_object_get(spec, "template"), "spec"));
    else json_object_del(spec, "template");
    json_decref(job);
    /* read before the patch: every pod there now is of an earlier admission */
    k8s_view v;
    k8s_backend_view(kb, kp->ns, kp->name, &v);
    *stale = xcalloc(v.n_pods + 1, sizeof **stale);
    for (size_t i = 0; i < v.n_pods; i++) {
        const char *name = k8s_meta_str(v.pods[i], "name");
        if (name) (*stale)[(*n_stale)++] = xstrdup(name);
    }
    k8s_view_free(&v);
    k8s_ref ref = jobs_ref;
    ref.ns = kp->ns;
    ref.name = kp->name;
    k8s_error e;
    k8s_rc krc = k8s_merge_patch(kb->cl, &ref, patch, NULL, &e);
    json_decref(patch);
    if (krc != K8S_OK) {
        str_list_free(*stale, *n_stale);
        *stale = NULL;
        *n_stale = 0;
        snprintf(err, errsz, "%s", e.message);
        return from_k8s(&e);
    }
    k8s_backend_admitted(kb, kp->ns, kp->name, true);
    return EXEC_OK;
}

static exec_rc k8s_prepare(exec_backend *be, const exec_request *req, char *err, size_t errsz)
{
    k8s_backend *kb = (k8s_backend *)be;
    exec_k8s_params kp;
    exec_k8s_params_init(&kp, req, kb->k, true);
    json_t *job = NULL;
    /* a user's Job is the user's to create: it only has to be there */
    exec_rc rc = req->cluster.adopt ? user_job(kb, req, &kp, &job, err, errsz)
                                    : ensure_job(kb, req, &kp, &job, err, errsz);
    json_decref(job);
    exec_k8s_params_free(&kp);
    return rc;
}

static exec_rc k8s_unprepare(exec_backend *be, const exec_request *req, char *err, size_t errsz)
{
    k8s_backend *kb = (k8s_backend *)be;
    if (req->cluster.adopt) return EXEC_OK; /* never delete the user's Job */
    exec_k8s_params kp;
    exec_k8s_params_init(&kp, req, kb->k, true);
    k8s_view v;
    k8s_backend_view(kb, kp.ns, kp.name, &v);
    exec_rc rc = EXEC_OK;
    if (v.job && same_attempt(v.job, req)) {
        k8s_ref ref = jobs_ref;
        ref.ns = kp.ns;
        ref.name = kp.name;
        k8s_error e;
        k8s_rc r = k8s_delete(kb->cl, &ref, "Background", -1, &e);
        if (r != K8S_OK && r != K8S_E_NOT_FOUND) {
            snprintf(err, errsz, "%s", e.message);
            rc = EXEC_E_SYSTEM;
        }
    }
    k8s_view_free(&v);
    exec_k8s_params_free(&kp);
    return rc;
}

/* Admits lathe's own Job of the attempt (created first when prepare did
 * not): the placement and suspend false, unless it was admitted already. */
static exec_rc admit_own_job(k8s_backend *kb, const exec_request *req, exec_k8s_params *kp,
                             char *err, size_t errsz)
{
    json_t *job = NULL;
    exec_rc rc = ensure_job(kb, req, kp, &job, err, errsz);
    if (rc == EXEC_OK && (!job || admissible(job))) {
        json_t *patch = k8s_render_admit_patch(&kp->p);
        k8s_ref ref = jobs_ref;
        ref.ns = kp->ns;
        ref.name = kp->name;
        k8s_error e;
        if (k8s_merge_patch(kb->cl, &ref, patch, NULL, &e) != K8S_OK) {
            snprintf(err, errsz, "%s", e.message);
            rc = from_k8s(&e);
        }
        json_decref(patch);
    }
    json_decref(job);
    return rc;
}

/* What a handle takes from its request (start, and exec_k8s_adopt_handle). */
static void handle_from_request(k8s_handle *kh, const exec_request *req, const exec_k8s_params *kp)
{
    kh->job_id = req->cluster.job_id;
    kh->nnodes = kp->p.nnodes;
    kh->adopt = req->cluster.adopt != NULL;
    kh->no_retry = xcalloc(req->n_no_retry_codes + 1, sizeof *kh->no_retry);
    if (req->n_no_retry_codes)
        memcpy(kh->no_retry, req->no_retry_codes, req->n_no_retry_codes * sizeof *kh->no_retry);
    kh->n_no_retry = req->n_no_retry_codes;
}

static exec_rc k8s_start(exec_backend *be, const exec_request *req, exec_handle **out, char *err,
                         size_t errsz)
{
    k8s_backend *kb = (k8s_backend *)be;
    *out = NULL;
    exec_k8s_params kp;
    exec_k8s_params_init(&kp, req, kb->k, true);
    char **stale = NULL;
    size_t n_stale = 0;
    exec_rc rc = req->cluster.adopt ? admit_user_job(kb, req, &kp, &stale, &n_stale, err, errsz)
                                    : admit_own_job(kb, req, &kp, err, errsz);
    if (rc != EXEC_OK) {
        exec_k8s_params_free(&kp);
        return rc;
    }
    k8s_handle *kh = handle_new(kb, kp.ns, kp.name, req->job_dir, req->attempt);
    handle_from_request(kh, req, &kp);
    kh->stale = stale;
    kh->n_stale = n_stale;
    kh->created_at = kh->h.started_at = now_s();
    exec_k8s_params_free(&kp);
    rc = handle_open(kh, err, errsz);
    if (rc != EXEC_OK) {
        /* no attempt of lathe's runs it: its pods are not lathe's to count */
        if (kh->adopt) k8s_backend_admitted(kb, kh->ns, kh->name, false);
        k8s_release(&kh->h);
        return rc;
    }
    k8s_handle_save(kh);
    *out = &kh->h;
    return EXEC_OK;
}

/* ---- attach and find ---- */
static exec_rc k8s_attach(exec_backend *be, const char *text, exec_handle **out, char *err,
                          size_t errsz)
{
    k8s_backend *kb = (k8s_backend *)be;
    *out = NULL;
    json_error_t je;
    json_t *o = json_loads(text ? text : "", 0, &je);
    const char *backend = k8s_jstr(o, "backend");
    if (!o || !backend || strcmp(backend, "k8s") != 0 ||
        json_integer_value(json_object_get(o, "version")) != HANDLE_VERSION || !k8s_jstr(o, "namespace") ||
        !k8s_jstr(o, "job") || !k8s_jstr(o, "job_dir")) {
        snprintf(err, errsz, "not a handle of the Kubernetes backend (version %d)", HANDLE_VERSION);
        json_decref(o);
        return EXEC_E_INVALID;
    }
    k8s_handle *kh = handle_new(kb, k8s_jstr(o, "namespace"), k8s_jstr(o, "job"), k8s_jstr(o, "job_dir"),
                                (int)json_integer_value(json_object_get(o, "attempt")));
    kh->job_id = json_integer_value(json_object_get(o, "job_id"));
    kh->nnodes = (int)json_integer_value(json_object_get(o, "nnodes"));
    kh->h.started_at = json_number_value(json_object_get(o, "started_at"));
    kh->created_at = json_number_value(json_object_get(o, "created_at"));
    kh->term_at = json_number_value(json_object_get(o, "term_at"));
    kh->kill_at = json_number_value(json_object_get(o, "kill_at"));
    kh->kill_sent = json_is_true(json_object_get(o, "kill_sent"));
    kh->cancel = json_is_true(json_object_get(o, "cancel"));
    json_t *codes = json_object_get(o, "no_retry");
    kh->n_no_retry = json_array_size(codes);
    kh->no_retry = xcalloc(kh->n_no_retry + 1, sizeof *kh->no_retry);
    for (size_t i = 0; i < kh->n_no_retry; i++)
        kh->no_retry[i] = (int)json_integer_value(json_array_get(codes, i));
    kh->adopt = json_is_true(json_object_get(o, "adopt"));
    json_t *stale = json_object_get(o, "stale");
    kh->stale = xcalloc(json_array_size(stale) + 1, sizeof *kh->stale);
    for (size_t i = 0; i < json_array_size(stale); i++) {
        const char *name = json_string_value(json_array_get(stale, i));
        if (name) kh->stale[kh->n_stale++] = xstrdup(name);
    }
    json_decref(o);
    exec_rc rc = handle_open(kh, err, errsz);
    if (rc != EXEC_OK) {
        k8s_release(&kh->h);
        return rc;
    }
    char *p = path_join(kh->h.work_dir, "logpos.json");
    kh->resume = json_load_file(p, 0, &je);
    free(p);
    /* a user's Job this attempt runs: its pods' GPUs are lathe's until its end */
    if (kh->adopt) k8s_backend_admitted(kb, kh->ns, kh->name, true);
    *out = &kh->h;
    return EXEC_OK;
}

static exec_rc k8s_find(exec_backend *be, const char *job_dir, exec_handle **out, char *err,
                        size_t errsz)
{
    *out = NULL;
    char *p = path_join(job_dir, "current.json");
    size_t len;
    char e2[256];
    char *text = file_read_all(p, 1 << 20, &len, e2, sizeof e2);
    free(p);
    if (!text) {
        snprintf(err, errsz, "no attempt was started in %s", job_dir);
        return EXEC_E_GONE;
    }
    exec_rc rc = k8s_attach(be, text, out, err, errsz);
    free(text);
    return rc;
}

/* ---- signals and cancel ---- */
/* Suspends the Job: the Job controller deletes its pods gracefully. */
bool exec_k8s_suspend(k8s_handle *kh, char *err, size_t errsz)
{
    k8s_ref ref = jobs_ref;
    ref.ns = kh->ns;
    ref.name = kh->name;
    json_t *patch = json_pack("{s:{s:b}}", "spec", "suspend", 1);
    k8s_error e;
    k8s_rc rc = k8s_merge_patch(kh->kb->cl, &ref, patch, NULL, &e);
    json_decref(patch);
    if (rc == K8S_OK || rc == K8S_E_NOT_FOUND) return true;
    snprintf(err, errsz, "%s", e.message);
    return false;
}

/* Deletes the attempt's pods now (grace 0): the SIGKILL of Kubernetes. */
bool exec_k8s_kill_pods(k8s_handle *kh, char *err, size_t errsz)
{
    k8s_view v;
    k8s_handle_view(kh, &v);
    bool ok = true;
    for (size_t i = 0; i < v.n_pods; i++) {
        if (v.pod_gone[i]) continue;
        k8s_ref ref = {.api = "v1", .resource = "pods", .ns = kh->ns, .name = k8s_meta_str(v.pods[i], "name")};
        k8s_error e;
        k8s_rc rc = k8s_delete(kh->kb->cl, &ref, NULL, 0, &e);
        if (rc != K8S_OK && rc != K8S_E_NOT_FOUND) {
            snprintf(err, errsz, "%s", e.message);
            ok = false;
        }
    }
    k8s_view_free(&v);
    return ok;
}

static exec_rc k8s_signal(exec_handle *h, int sig, char *err, size_t errsz)
{
    k8s_handle *kh = (k8s_handle *)h;
    if (kh->ended) {
        snprintf(err, errsz, "attempt %d has ended", h->attempt);
        return EXEC_E_GONE;
    }
    if (sig == SIGTERM || sig == SIGINT) {
        if (!kh->term_at) kh->term_at = now_s();
        k8s_handle_save(kh);
        return exec_k8s_suspend(kh, err, errsz) ? EXEC_OK : EXEC_E_SYSTEM;
    }
    if (sig == SIGKILL) {
        kh->kill_sent = true;
        if (!kh->term_at) kh->term_at = now_s();
        k8s_handle_save(kh);
        if (!exec_k8s_suspend(kh, err, errsz)) return EXEC_E_SYSTEM;
        return exec_k8s_kill_pods(kh, err, errsz) ? EXEC_OK : EXEC_E_SYSTEM;
    }
    snprintf(err, errsz, "signal %d cannot be sent to a Kubernetes pod: SIGTERM (suspend, with the "
                         "grace period) and SIGKILL (delete the pods now) can",
             sig);
    return EXEC_E_INVALID;
}

static exec_rc k8s_cancel(exec_handle *h, double now, double grace, char *err, size_t errsz)
{
    k8s_handle *kh = (k8s_handle *)h;
    if (kh->ended) {
        snprintf(err, errsz, "attempt %d has ended", h->attempt);
        return EXEC_E_GONE;
    }
    if (!kh->term_at) {
        kh->term_at = now;
        kh->kill_at = now + (grace > 0 ? grace : 0);
    }
    kh->cancel = true;
    k8s_handle_save(kh);
    /* a suspension that does not get through is sent again by the polls */
    char e2[512];
    if (!exec_k8s_suspend(kh, e2, sizeof e2)) snprintf(err, errsz, "%s (sent again at the next poll)", e2);
    return EXEC_OK;
}

/* ---- the backend ---- */
/* Waits until every informer started so far has delivered its first list,
 * until `until`; false with a message naming what did not answer. */
static bool wait_synced(k8s_backend *kb, double until, char *err, size_t errsz)
{
    k8s_informer *const all[] = {kb->jobs, kb->user_jobs, kb->pods, kb->nodes};
    for (;;) {
        bool synced = true;
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            synced = synced && (!all[i] || k8s_informer_synced(all[i]));
        if (synced) return true;
        if (now_s() > until) {
            char why[320];
            exec_k8s_ready(&kb->be, why, sizeof why);
            snprintf(err, errsz, "the Kubernetes API at %s did not answer in time: %s",
                     k8s_client_config(kb->cl)->server, why);
            return false;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void k8s_destroy(exec_backend *be)
{
    k8s_backend *kb = (k8s_backend *)be;
    k8s_informer_free(kb->jobs);
    k8s_informer_free(kb->user_jobs);
    k8s_informer_free(kb->pods);
    k8s_informer_free(kb->nodes);
    kmap_free(&kb->tracks, track_free);
    kmap_free(&kb->uses, use_free);
    for (size_t i = 0; i < kb->node_objs.cap; i++)
        if (kb->node_objs.e[i].key) json_decref(kb->node_objs.e[i].val);
    kmap_free(&kb->node_objs, NULL);
    if (kb->own_client) {
        k8s_client_free(kb->cl);
        k8s_config_free(&kb->cfg);
    }
    pthread_mutex_destroy(&kb->mu);
    free(kb);
}

exec_backend *exec_k8s_new(const spec_k8s *settings, struct k8s_client *client, double sync_timeout,
                           char *err, size_t errsz)
{
    k8s_backend *kb = xcalloc(1, sizeof *kb);
    kb->be.name = "k8s";
    kb->be.prepare = k8s_prepare;
    kb->be.unprepare = k8s_unprepare;
    kb->be.ready = exec_k8s_ready;
    kb->be.start = k8s_start;
    kb->be.attach = k8s_attach;
    kb->be.find = k8s_find;
    kb->be.poll = exec_k8s_poll;
    kb->be.signal = k8s_signal;
    kb->be.cancel = k8s_cancel;
    kb->be.handle_json = k8s_handle_json;
    kb->be.release = k8s_release;
    kb->be.destroy = k8s_destroy;
    kb->k = settings;
    pthread_mutex_init(&kb->mu, NULL);
    kmap_init(&kb->tracks);
    kmap_init(&kb->uses);
    kmap_init(&kb->node_objs);
    snprintf(kb->why, sizeof kb->why, "the first lists have not come yet");
    if (client) {
        kb->cl = client;
    } else {
        if (!k8s_config_load(&kb->cfg, settings->kubeconfig, settings->context, err, errsz)) {
            k8s_destroy(&kb->be);
            return NULL;
        }
        kb->cfg.qps = settings->qps;
        kb->cfg.burst = settings->burst;
        kb->cl = k8s_client_new(&kb->cfg, err, errsz);
        if (!kb->cl) {
            k8s_destroy(&kb->be);
            return NULL;
        }
        kb->own_client = true;
    }
    char sel[64];
    snprintf(sel, sizeof sel, "%s=lathe", K8S_LABEL_MANAGED);
    k8s_ref jobs = jobs_ref, pods = {.api = "v1", .resource = "pods"},
            nodes = {.api = "v1", .resource = "nodes"};
    double until = now_s() + (sync_timeout > 0 ? sync_timeout : 30);
    kb->jobs = k8s_informer_start(kb->cl, &jobs, sel, on_job, sync_jobs, kb, err, errsz);
    kb->user_jobs = kb->jobs ? k8s_informer_start(kb->cl, &jobs, K8S_LABEL_QUEUE, on_user_job,
                                                  sync_user_jobs, kb, err, errsz)
                             : NULL;
    /* the Pods' list after the Jobs': a pod of a user's Job is kept only
     * when its Job is known, and a restarted server must find the pods of
     * the users' Jobs that run */
    bool ok = kb->user_jobs && wait_synced(kb, until, err, errsz);
    kb->pods = ok ? k8s_informer_start(kb->cl, &pods, NULL, on_pod, sync_pods, kb, err, errsz) : NULL;
    kb->nodes = kb->pods ? k8s_informer_start(kb->cl, &nodes, NULL, on_node, sync_nodes, kb, err,
                                              errsz)
                         : NULL;
    if (!kb->nodes || !wait_synced(kb, until, err, errsz)) {
        k8s_destroy(&kb->be);
        return NULL;
    }
    return &kb->be;
}

char *exec_k8s_adopt_handle(exec_backend *be, const exec_request *req, double started_at)
{
    k8s_backend *kb = (k8s_backend *)be;
    exec_k8s_params kp;
    exec_k8s_params_init(&kp, req, kb->k, true);
    k8s_handle *kh = handle_new(kb, kp.ns, kp.name, req->job_dir, req->attempt);
    handle_from_request(kh, req, &kp);
    kh->h.started_at = started_at;
    /* the Job is there already: a poll that does not find it may say so at once */
    kh->created_at = started_at > 0 ? started_at : now_s();
    char *text = k8s_handle_json(&kh->h);
    k8s_release(&kh->h); /* never opened: nothing but memory to free */
    exec_k8s_params_free(&kp);
    return text;
}

struct k8s_client *exec_k8s_client(exec_backend *be)
{
    return ((k8s_backend *)be)->cl;
}
