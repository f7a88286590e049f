/* bench_operator.c: lathe's operator mode (docs/kubernetes.md, "Operator
 * mode") against lathe's own HTTP API, on the API double
 * (tests/k8s/kube-double) over loopback, its kubelet off (pods are bound,
 * never run: admission is what is measured).
 *
 *   1. operator: the double with enough 8-GPU nodes for every object, the
 *      CRDs of `lathe render server --target k8s`, namespaces team-a..d
 *      and lathe-system (the Lease); `lathe server` in operator mode
 *      (identity bench) until its /readyz answers 200 (it leads); then
 *      --objects LoRATrainingJob objects (training.example.com/v1) POSTed
 *      from --threads client threads, round-robin over the namespaces. The
 *      bench watches the objects and the Jobs and notes, per object, when
 *      its status.phase first appears, when its Job (lathe-<name>-1,
 *      labelled lathe.dev/owner-uid) is created and when it is
 *      unsuspended (admitted);
 *   2. failover, on the same double: a second replica (identity bench-2)
 *      started as a standby, the first SIGKILLed; the time until the
 *      second's /readyz answers 200 (the Lease's expiry, then the store
 *      rebuilt from the API), and when its log says "operator: leading; N
 *      objects restored from the API";
 *   3. baseline, in the same run, on a fresh double of the same nodes: the
 *      same jobs submitted through lathe's HTTP API to a server that is
 *      not an operator (as bench_k8s does).
 *
 * /readyz is asked on a connection opened before: see lathe_proc.
 *
 * Figures: p50 / p99 of apply -> status, apply -> Job created, apply ->
 * admitted; API requests per object (the double counts them; the bench's
 * own, counted by its client, are taken off); the server's CPU seconds
 * (and its threads'); the double's CPU (one Python process: when it nears
 * the wall time the double, not lathe, is what limits); wall time; the
 * server's CPU per second once everything is admitted and nothing moves;
 * and the ratios operator / API.
 *
 *   cmake --build build -j4 --target bench_operator lathe && build/bench/bench_operator
 *   build/bench/bench_operator --objects 200 --keep
 */
#include "base/base.h"
#include "client/client.h"
#include "k8s/k8s.h"

#include "bench_k8s_common.h"

#include <curl/curl.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    long objects;
    int threads;  /* client threads that submit */
    double qps;   /* the server's Kubernetes client rate limit */
    int burst;
    double idle;  /* seconds of steady state measured after admission */
    const char *lathe;
    bool keep;
} opts;

static const char *const teams[] = {"team-a", "team-b", "team-c", "team-d"};
enum { N_TEAMS = 4 };
#define CR_API "training.example.com/v1"
#define NAME_PREFIX "op-" /* every object's (and lathe job's) name: op-<index> */

/* How many file descriptors process pid holds open. */
static long open_fds(pid_t pid)
{
    char dirp[64];
    snprintf(dirp, sizeof dirp, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dirp);
    if (!d) return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* GET url (plain HTTP, lathe's own) on handle keep, whose connection
 * stays open between calls, or on a new connection when keep is NULL: the
 * status, 0 when nothing answered. */
static long http_status(CURL *keep, const char *url)
{
    CURL *c = keep ? keep : curl_easy_init();
    sb body;
    sb_init(&body);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    sb_free(&body);
    if (!keep) curl_easy_cleanup(c);
    return code;
}

/* ---- the double's counters ---- */
/* GET /_double/stats of the double in dir (kube/ inside); NULL on failure.
 * Each call is one request the double counts. */
static json_t *dbl_stats(const char *dir)
{
    char *port = path_join(dir, "kube/port"), *tokf = path_join(dir, "kube/token");
    char *ca = path_join(dir, "kube/pki/ca.crt");
    char *p = wait_file(port, 1), *tok = wait_file(tokf, 1);
    json_t *out = NULL;
    if (p && tok) {
        char *url = xasprintf("https://127.0.0.1:%s/_double/stats", p);
        char *auth = xasprintf("Authorization: Bearer %s", tok);
        CURL *c = curl_easy_init();
        struct curl_slist *h = curl_slist_append(NULL, auth);
        sb body;
        sb_init(&body);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CAINFO, ca);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
        if (curl_easy_perform(c) == CURLE_OK) out = json_loads(sb_str(&body), 0, NULL);
        sb_free(&body);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        free(url);
        free(auth);
    }
    free(p);
    free(tok);
    free(port);
    free(tokf);
    free(ca);
    return out;
}

static long stat_requests(const json_t *s)
{
    return s ? (long)json_integer_value(json_object_get(s, "requests")) : -1;
}

/* creates["batch/v1/jobs"] of a stats answer. */
static long stat_job_creates(const json_t *s)
{
    return (long)json_integer_value(json_object_get(json_object_get(s, "creates"), "batch/v1/jobs"));
}

/* What the double answered between two stats, per object and per resource
 * and verb ("jobs create 1.00, loratrainingjobs/status patch 2.03, ..."),
 * the bench's own requests included (its creates of the objects, its
 * watches). */
static void print_by_resource(const json_t *a, const json_t *b, double per)
{
    const json_t *ra = json_object_get(a, "by_resource"), *rb = json_object_get(b, "by_resource");
    const char *res;
    json_t *verbs;
    bool first = true;
    json_object_foreach((json_t *)rb, res, verbs) {
        const char *verb;
        json_t *n;
        json_object_foreach(verbs, verb, n) {
            long d = (long)json_integer_value(n) -
                     (long)json_integer_value(json_object_get(json_object_get(ra, res), verb));
            if (d <= 0) continue;
            printf("%s%s %s %.2f", first ? "" : ", ", res, verb, (double)d / per);
            first = false;
        }
    }
    printf("\n");
}

static uint64_t own_requests(k8s_client *cl)
{
    k8s_stats st;
    k8s_client_stats(cl, &st);
    return st.requests;
}

/* ---- CPU of a process's threads, by thread name ---- */
typedef struct thr {
    long tid;
    char name[24]; /* its comm without a trailing number ("lathe-http-3" -> "lathe-http") */
    double cpu;
} thr;

typedef struct thr_snap {
    thr *t;
    size_t n;
} thr_snap;

/* Every thread of pid now, from /proc/PID/task/TID/stat. */
static void thr_take(pid_t pid, thr_snap *s)
{
    memset(s, 0, sizeof *s);
    char dirp[64];
    snprintf(dirp, sizeof dirp, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dirp);
    if (!d) return;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[400];
        snprintf(path, sizeof path, "%s/%s/stat", dirp, e->d_name);
        char err[64];
        size_t len;
        char *t = file_read_all(path, 1 << 16, &len, err, sizeof err);
        if (!t) continue;
        char *op = strchr(t, '('), *cp = strrchr(t, ')');
        unsigned long ut = 0, st = 0;
        if (op && cp && cp > op &&
            sscanf(cp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2) {
            if (s->n == cap) {
                cap = cap ? 2 * cap : 64;
                s->t = xrealloc(s->t, cap * sizeof *s->t);
            }
            thr *h = &s->t[s->n++];
            h->tid = atol(e->d_name);
            size_t nl = (size_t)(cp - op - 1);
            if (nl >= sizeof h->name) nl = sizeof h->name - 1;
            memcpy(h->name, op + 1, nl);
            h->name[nl] = '\0';
            while (nl > 0 && (isdigit((unsigned char)h->name[nl - 1]) || h->name[nl - 1] == '-'))
                h->name[--nl] = '\0';
            h->cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
        }
        free(t);
    }
    closedir(d);
}

/* The CPU each thread name used between a and b (threads started between
 * them count from zero; ones that ended are lost), largest first, on one
 * line. */
static void thr_print(const char *title, const thr_snap *a, const thr_snap *b)
{
    char names[32][24];
    double cpu[32];
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++) {
        double before = 0;
        for (size_t j = 0; j < a->n; j++)
            if (a->t[j].tid == b->t[i].tid) before = a->t[j].cpu;
        size_t k = 0;
        while (k < n && strcmp(names[k], b->t[i].name) != 0) k++;
        if (k == n) {
            if (n == 32) continue;
            snprintf(names[n], sizeof names[n], "%s", b->t[i].name);
            cpu[n++] = 0;
        }
        cpu[k] += b->t[i].cpu - before;
    }
    for (size_t i = 0; i < n; i++) /* largest first: a few names, insertion sort */
        for (size_t j = i + 1; j < n; j++)
            if (cpu[j] > cpu[i]) {
                char tn[24];
                memcpy(tn, names[i], sizeof tn);
                memcpy(names[i], names[j], sizeof tn);
                memcpy(names[j], tn, sizeof tn);
                double tc = cpu[i];
                cpu[i] = cpu[j];
                cpu[j] = tc;
            }
    printf("    %s:", title);
    for (size_t i = 0; i < n && i < 8; i++)
        if (cpu[i] >= 0.005) printf(" %s %.2f", names[i], cpu[i]);
    printf("\n");
}

static void thr_free(thr_snap *s)
{
    free(s->t);
    memset(s, 0, sizeof *s);
}

/* ---- timing of each object ---- */
typedef struct timing {
    long n;
    double *sub, *status, *created, *admitted;
    pthread_mutex_t mu;
    long n_status, n_created, n_admitted, n_invalid;
    double last; /* the newest status or admission noted */
} timing;

static void timing_init(timing *t, long n)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->sub = xcalloc((size_t)n, sizeof(double));
    t->status = xcalloc((size_t)n, sizeof(double));
    t->created = xcalloc((size_t)n, sizeof(double));
    t->admitted = xcalloc((size_t)n, sizeof(double));
    pthread_mutex_init(&t->mu, NULL);
}

static void timing_free(timing *t)
{
    free(t->sub);
    free(t->status);
    free(t->created);
    free(t->admitted);
    pthread_mutex_destroy(&t->mu);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50 and p99 of (to[k] - sub[k]) over the objects where both are known. */
static void pcts(const timing *t, const double *to, double out[2])
{
    double *d = xcalloc((size_t)t->n + 1, sizeof *d);
    size_t m = 0;
    for (long k = 0; k < t->n; k++)
        if (to[k] > 0 && t->sub[k] > 0) d[m++] = to[k] - t->sub[k];
    qsort(d, m, sizeof *d, cmp_d);
    out[0] = m ? d[m / 2] : NAN;
    out[1] = m ? d[(size_t)((double)(m - 1) * 0.99)] : NAN;
    free(d);
}

/* The index of "op-<k>", -1 for any other name. */
static long name_index(const timing *t, const char *name)
{
    if (!name || !str_starts_with(name, NAME_PREFIX)) return -1;
    char *end;
    long k = strtol(name + strlen(NAME_PREFIX), &end, 10);
    return *end == '\0' && k >= 0 && k < t->n ? k : -1;
}

/* The bench's watch on the objects: the first status.phase of each. */
static void on_object(void *ud, k8s_event_type type, const json_t *obj)
{
    timing *t = ud;
    if (type == K8S_DELETED) return;
    long k = name_index(t, json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")));
    const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
    if (k < 0 || !phase || !*phase) return;
    double now = now_s();
    pthread_mutex_lock(&t->mu);
    if (t->status[k] == 0) {
        t->status[k] = now;
        t->n_status++;
        if (strcmp(phase, "Invalid") == 0) t->n_invalid++;
        if (now > t->last) t->last = now;
    }
    pthread_mutex_unlock(&t->mu);
}

/* The bench's watch on lathe's Jobs: created, then unsuspended. The
 * object's index comes from the Job's lathe.dev/job label (the job's name,
 * the object's). */
static void on_job(void *ud, k8s_event_type type, const json_t *obj)
{
    timing *t = ud;
    if (type == K8S_DELETED) return;
    const json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    long k = name_index(t, json_string_value(json_object_get(labels, K8S_LABEL_JOB)));
    if (k < 0) return;
    bool suspended = json_is_true(json_object_get(json_object_get(obj, "spec"), "suspend"));
    double now = now_s();
    pthread_mutex_lock(&t->mu);
    if (t->created[k] == 0) {
        t->created[k] = now;
        t->n_created++;
    }
    if (!suspended && t->admitted[k] == 0) {
        t->admitted[k] = now;
        t->n_admitted++;
        if (now > t->last) t->last = now;
    }
    pthread_mutex_unlock(&t->mu);
}

/* Waits until want objects are admitted (and, with statuses, have a
 * status), no progress for 120 s, or a deadline that grows with the
 * objects. True when all got there. */
static bool wait_done(timing *t, long want, bool statuses)
{
    double deadline = now_s() + 60 + (double)t->n * 0.2, last_change = now_s();
    long last = -1;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        long a = t->n_admitted, s = statuses ? t->n_status : want;
        pthread_mutex_unlock(&t->mu);
        if (a >= want && s >= want) return true;
        if (now_s() > deadline || now_s() - last_change > 120) return false;
        if (a + s != last) {
            last = a + s;
            last_change = now_s();
        }
        usleep(20000);
    }
}

/* ---- one API double, in a folder of its own ---- */
static bool create_namespace(k8s_client *cl, const char *name)
{
    json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           "name", name);
    k8s_ref ref = {.api = "v1", .resource = "namespaces"};
    k8s_error e;
    k8s_rc rc = k8s_create(cl, &ref, ns, NULL, &e);
    json_decref(ns);
    if (rc != K8S_OK && rc != K8S_E_EXISTS) fprintf(stderr, "bench_operator: %s\n", e.message);
    return rc == K8S_OK || rc == K8S_E_EXISTS;
}

/* The double in parent/name (kube/ inside), the bench's client (no rate
 * limit of its own to speak of), the teams' namespaces and lathe-system. */
static bool dbl_start(const char *parent, const char *name, const char *nodesf, dbl_proc *d)
{
    memset(d, 0, sizeof *d);
    d->dir = path_join(parent, name);
    mkdir(d->dir, 0755);
    char *state = path_join(d->dir, "kube"), *dlog = path_join(d->dir, "double.log");
    char *dbl_path = xasprintf("%s/tests/k8s/kube-double", LATHE_SOURCE_DIR);
    char ppid[32];
    snprintf(ppid, sizeof ppid, "%d", (int)getpid());
    char *dargv[] = {"/usr/bin/python3", dbl_path, "--state", state, "--port", "0", "--nodes",
                     (char *)nodesf, "--kubelet", "none", "--bookmark-interval", "5", "--parent-pid",
                     ppid, NULL};
    d->pid = spawn(dargv, dlog);
    char *ready = path_join(state, "ready"), *kcfg = path_join(state, "kubeconfig");
    char *r = wait_file(ready, 120);
    char err[512] = "";
    bool ok = r && k8s_config_kubeconfig(&d->kc, kcfg, NULL, err, sizeof err);
    if (ok) {
        d->kc.qps = 100000;
        d->kc.burst = 100000;
        d->cl = k8s_client_new(&d->kc, err, sizeof err);
        if (!d->cl) k8s_config_free(&d->kc);
        ok = d->cl != NULL;
    }
    for (int i = 0; ok && i < N_TEAMS; i++) ok = create_namespace(d->cl, teams[i]);
    if (ok) ok = create_namespace(d->cl, "lathe-system");
    if (!ok) fprintf(stderr, "bench_operator: the double did not start (%s); see %s\n", err, dlog);
    free(r);
    free(ready);
    free(kcfg);
    free(state);
    free(dlog);
    free(dbl_path);
    if (!ok) dbl_stop(d);
    return ok;
}

/* The CustomResourceDefinitions of `lathe render server --target k8s -o
 * json`, created on the double; then waits until it serves the objects. */
static bool install_crds(const opts *o, const dbl_proc *d)
{
    char *cmd = xasprintf("'%s' render server --target k8s -o json", o->lathe);
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p) return false;
    sb out;
    sb_init(&out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) sb_putn(&out, buf, n);
    int st = pclose(p);
    json_t *all = st == 0 ? json_loads(sb_str(&out), 0, NULL) : NULL;
    sb_free(&out);
    if (!all) {
        fprintf(stderr, "bench_operator: `lathe render server --target k8s -o json` failed\n");
        return false;
    }
    k8s_ref ref = {.api = "apiextensions.k8s.io/v1", .resource = "customresourcedefinitions"};
    size_t i, made = 0;
    json_t *it;
    bool ok = true;
    json_array_foreach(json_object_get(all, "items"), i, it) {
        const char *kind = json_string_value(json_object_get(it, "kind"));
        if (!kind || strcmp(kind, "CustomResourceDefinition") != 0) continue;
        k8s_error e;
        if (k8s_create(d->cl, &ref, it, NULL, &e) != K8S_OK) {
            fprintf(stderr, "bench_operator: creating a CRD: %s\n", e.message);
            ok = false;
        }
        made++;
    }
    json_decref(all);
    k8s_ref crs = {.api = CR_API, .resource = "loratrainingjobs", .ns = teams[0]};
    double end = now_s() + 30;
    while (ok && made) {
        json_t *items = NULL;
        k8s_error e;
        k8s_rc rc = k8s_list(d->cl, &crs, NULL, NULL, 1, &items, NULL, &e);
        json_decref(items);
        if (rc == K8S_OK) return true;
        if (now_s() > end) break;
        usleep(100000);
    }
    fprintf(stderr, "bench_operator: the double does not serve loratrainingjobs\n");
    return false;
}

/* ---- lathe's files ---- */
static bool write_cluster(const char *dir)
{
    sb c;
    sb_init(&c);
    sb_puts(&c, "apiVersion: lathe/v1\nkind: Cluster\nmetadata:\n  name: bench\nspec:\n"
                "  gpuTypes:\n    - name: L4-24GB\n      memory: 24Gi\n      pricePerHour: 0.8\n"
                "  teams:\n");
    for (int i = 0; i < N_TEAMS; i++) sb_printf(&c, "    - name: %s\n", teams[i]);
    bool ok = write_text(dir, "cluster.yaml", sb_str(&c));
    sb_free(&c);
    return ok;
}

/* A ServerConfig in dir/file, data in dir/data; in operator mode with
 * identity when it is not NULL (the Lease's settings of
 * tests/k8s/harness/lib.sh's op_config, a status each second). */
static bool write_server(const opts *o, const char *dir, const char *file, const char *data,
                         const char *identity)
{
    sb c;
    sb_init(&c);
    sb_printf(&c,
              "apiVersion: lathe/v1\nkind: ServerConfig\nmetadata:\n  name: bench\nspec:\n"
              "  listen: 127.0.0.1:0\n  dataDir: %s/%s\n  executor: k8s\n  cluster:\n"
              "    file: %s/cluster.yaml\n  kubernetes:\n    kubeconfig: %s/kube/kubeconfig\n"
              "    qps: %g\n    burst: %d\n    gpuProducts: {L4-24GB: NVIDIA-L4}\n",
              dir, data, dir, dir, o->qps, o->burst);
    if (identity) {
        sb_puts(&c, "    operator:\n      enabled: true\n      namespaces: [");
        for (int i = 0; i < N_TEAMS; i++) sb_printf(&c, "%s%s", i ? ", " : "", teams[i]);
        sb_printf(&c, "]\n      leaseNamespace: lathe-system\n      identity: %s\n"
                      "      leaseDuration: 4s\n      renewDeadline: 3s\n      retryPeriod: 500ms\n"
                      "      statusInterval: 1s\n",
                  identity);
    }
    sb_puts(&c, "  scheduler:\n    interval: 1s\n  pollInterval: 500ms\n  limits:\n    maxConnections: 64\n");
    bool ok = write_text(dir, file, sb_str(&c));
    sb_free(&c);
    return ok;
}

/* ---- a lathe server ---- */
typedef struct lathe_proc {
    pid_t pid;
    char *addr, *token, *log;
    /* /readyz is asked on one connection kept open from the start: with
     * about 500 running attempts or more the server's descriptors pass
     * FD_SETSIZE and libmicrohttpd refuses new connections (the report
     * says so, on a new connection), while the time to lead is what is
     * timed here */
    CURL *probe;
} lathe_proc;

static void lathe_stop(lathe_proc *l, int sig)
{
    if (l->pid > 0) {
        kill(l->pid, sig);
        waitpid(l->pid, NULL, 0);
    }
    if (l->probe) curl_easy_cleanup(l->probe);
    free(l->addr);
    free(l->token);
    free(l->log);
    memset(l, 0, sizeof *l);
}

/* `lathe server --config dir/cfg` logging to dir/log; waits for its
 * address and admin token in dir/data. */
static bool lathe_start(const opts *o, const char *dir, const char *cfg, const char *data,
                        const char *log, lathe_proc *l)
{
    memset(l, 0, sizeof *l);
    char *cfgp = path_join(dir, cfg);
    l->log = path_join(dir, log);
    char *argv[] = {(char *)o->lathe, "server", "--config", cfgp, NULL};
    l->pid = spawn(argv, l->log);
    char *addrf = xasprintf("%s/%s/server.addr", dir, data), *tokf = xasprintf("%s/%s/admin-token", dir, data);
    l->addr = wait_file(addrf, 120);
    l->token = l->addr ? wait_file(tokf, 10) : NULL;
    free(addrf);
    free(tokf);
    free(cfgp);
    if (!l->addr || !l->token) {
        fprintf(stderr, "bench_operator: lathe server did not start; see %s\n", l->log);
        return false;
    }
    l->probe = curl_easy_init();
    return true;
}

/* /readyz's status on the kept connection, or on a new one (fresh). */
static long readyz(const lathe_proc *l, bool fresh)
{
    char *url = xasprintf("http://%s/readyz", l->addr);
    long code = http_status(fresh ? NULL : l->probe, url);
    free(url);
    return code;
}

/* Polls /readyz until 200: the time it answered, or -1 after secs. */
static double wait_ready(const lathe_proc *l, double secs)
{
    double end = now_s() + secs;
    while (now_s() < end) {
        if (readyz(l, false) == 200) return now_s();
        usleep(10000);
    }
    return -1;
}

/* ---- submitting ---- */
typedef struct submitter {
    k8s_client *cl;      /* operator: the double */
    const client_config *cfg; /* baseline: lathe's API */
    timing *t;
    int first, step;     /* objects first, first + step, ... */
    long errors;
} submitter;

static json_t *cr_object(long k)
{
    char name[32];
    snprintf(name, sizeof name, NAME_PREFIX "%ld", k);
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:{s:s}, s:{s:s, s:i}, s:{s:i}, s:{s:{s:i}}}}",
                     "apiVersion", CR_API, "kind", "LoRATrainingJob", "metadata", "name", name,
                     "namespace", teams[k % N_TEAMS], "spec", "baseModel", "name", "Qwen2.5-0.5B",
                     "trainingData", "datasetPath", "/data/train.jsonl", "samples", 10000,
                     "hyperparams", "maxSteps", 1000, "resources", "gpu", "count", 1);
}

/* Operator: each object POSTed to the double, as kubectl create would. */
static void *submit_objects(void *arg)
{
    submitter *s = arg;
    for (long k = s->first; k < s->t->n; k += s->step) {
        json_t *obj = cr_object(k);
        k8s_ref ref = {.api = CR_API, .resource = "loratrainingjobs", .ns = teams[k % N_TEAMS]};
        k8s_error e;
        s->t->sub[k] = now_s();
        if (k8s_create(s->cl, &ref, obj, NULL, &e) != K8S_OK) {
            if (!s->errors) fprintf(stderr, "bench_operator: %s\n", e.message);
            s->errors++;
        }
        json_decref(obj);
    }
    return NULL;
}

/* Baseline: the same job through lathe's POST /v1/jobs. */
static void *submit_api(void *arg)
{
    submitter *s = arg;
    client *c = client_new(s->cfg);
    for (long k = s->first; k < s->t->n; k += s->step) {
        char *text = xasprintf("apiVersion: lathe/v1\nkind: LoRATrainingJob\nmetadata:\n  name: " NAME_PREFIX
                               "%ld\nspec:\n  team: %s\n  baseModel:\n    name: Qwen2.5-0.5B\n"
                               "  trainingData:\n    datasetPath: /data/train.jsonl\n    samples: 10000\n"
                               "  hyperparams:\n    maxSteps: 1000\n  resources:\n    gpu:\n      count: 1\n",
                               k, teams[k % N_TEAMS]);
        s->t->sub[k] = now_s();
        client_error e;
        client_error_init(&e);
        json_t *out = NULL;
        bool created;
        if (client_submit(c, text, strlen(text), false, "bench.yaml", teams[k % N_TEAMS], &out,
                          &created, &e) != 0) {
            if (!s->errors) fprintf(stderr, "bench_operator: submission failed\n");
            s->errors++;
        }
        json_decref(out);
        client_error_free(&e);
        free(text);
    }
    client_free(c);
    return NULL;
}

/* Runs fn on o->threads threads over every object; the failures. */
static long submit_all(const opts *o, void *(*fn)(void *), submitter proto)
{
    pthread_t *th = xcalloc((size_t)o->threads, sizeof *th);
    submitter *sub = xcalloc((size_t)o->threads, sizeof *sub);
    for (int i = 0; i < o->threads; i++) {
        sub[i] = proto;
        sub[i].first = i;
        sub[i].step = o->threads;
        pthread_create(&th[i], NULL, fn, &sub[i]);
    }
    long errors = 0;
    for (int i = 0; i < o->threads; i++) {
        pthread_join(th[i], NULL);
        errors += sub[i].errors;
    }
    free(th);
    free(sub);
    return errors;
}

static size_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* A log read as it grows: each call reads what was added since the last
 * one (whole lines; a partial last line waits for the next call). */
typedef struct log_scan {
    const char *path;
    size_t pos;
    sb partial;
} log_scan;

/* Calls fn on each new whole line. */
static void log_scan_lines(log_scan *ls, void (*fn)(void *ctx, const char *line), void *ctx)
{
    FILE *f = fopen(ls->path, "r");
    if (!f) return;
    if (fseek(f, (long)ls->pos, SEEK_SET) == 0) {
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
            ls->pos += n;
            for (size_t i = 0; i < n; i++) {
                if (buf[i] != '\n') {
                    sb_putn(&ls->partial, &buf[i], 1);
                    continue;
                }
                fn(ctx, sb_str(&ls->partial));
                sb_free(&ls->partial);
                sb_init(&ls->partial);
            }
        }
    }
    fclose(f);
}

/* Why new connections got no answer, when the server's log says why. */
static const char *refused_note(const lathe_proc *l, long status)
{
    if (status == 200) return "";
    char err[128];
    size_t len;
    char *t = file_read_all(l->log, (size_t)1 << 30, &len, err, sizeof err);
    bool fd = t && strstr(t, "FD_SETSIZE");
    free(t);
    return fd ? " (refused: the log says \"socket descriptor ... is not less than FD_SETSIZE "
                "(1024)\")"
              : " (see its log)";
}

/* ---- one controller's figures ---- */
typedef struct result {
    bool ran, done;
    long errors, with_status, created, admitted, invalid;
    double st[2], cr[2], ad[2]; /* p50, p99 (s) from the submission */
    double submit_s;            /* the clients' time to send every object */
    double wall;                /* the first submission to the last admission or status */
    double rpo;                 /* lathe's API requests per object */
    double cpu, dbl_cpu;        /* the server's and the double's CPU seconds in that time */
    double idle_cpu;            /* the server's CPU per second afterwards, nothing moving */
    long fds, readyz;           /* then: the server's open descriptors, /readyz on a new connection */
} result;

typedef struct failover {
    bool ran;
    long fresh;               /* /readyz on a new connection once it leads */
    double ready, lease, led; /* from the kill: readyz 200, "holds the Lease", "leading;" */
    long restored;            /* N of "N objects restored" */
    double cpu;               /* the new leader's CPU from the kill to ready */
    long fds;                 /* the new leader's open descriptors once it leads */
    long requests, job_creates; /* at the double, from the kill to 2 s after ready */
} failover;

/* The watches, the submission, the wait; fills r. The server is l, the
 * double d; statuses: the objects carry one (operator mode). */
static void measure(const opts *o, const dbl_proc *d, const lathe_proc *l, bool operator_mode,
                    result *r)
{
    timing t;
    timing_init(&t, o->objects);
    char managed[64];
    snprintf(managed, sizeof managed, "%s=lathe", K8S_LABEL_MANAGED);
    k8s_ref jobs = {.api = "batch/v1", .resource = "jobs"};
    k8s_ref crs = {.api = CR_API, .resource = "loratrainingjobs"};
    char err[512];
    k8s_informer *ij = k8s_informer_start(d->cl, &jobs, operator_mode ? K8S_LABEL_OWNER_UID : managed,
                                          on_job, NULL, &t, err, sizeof err);
    k8s_informer *io = operator_mode ? k8s_informer_start(d->cl, &crs, NULL, on_object, NULL, &t, err,
                                                          sizeof err)
                                     : NULL;
    double end = now_s() + 10;
    while (now_s() < end && !(k8s_informer_synced(ij) && (!io || k8s_informer_synced(io)))) usleep(10000);
    json_t *s0 = dbl_stats(d->dir);
    uint64_t own0 = own_requests(d->cl);
    thr_snap th0, th1;
    thr_take(l->pid, &th0);
    double cpu0 = cpu_of(l->pid), dcpu0 = cpu_of(d->pid), t0 = now_s();
    client_config cc;
    memset(&cc, 0, sizeof cc);
    cc.server = xasprintf("http://%s", l->addr);
    cc.token = l->token;
    cc.timeout = 60;
    submitter proto = {.cl = d->cl, .cfg = &cc, .t = &t};
    r->errors = submit_all(o, operator_mode ? submit_objects : submit_api, proto);
    r->submit_s = now_s() - t0;
    r->done = wait_done(&t, o->objects - r->errors, operator_mode);
    double t1 = now_s();
    r->cpu = cpu_of(l->pid) - cpu0;
    r->dbl_cpu = cpu_of(d->pid) - dcpu0;
    thr_take(l->pid, &th1);
    json_t *s1 = dbl_stats(d->dir);
    uint64_t own1 = own_requests(d->cl);
    pthread_mutex_lock(&t.mu);
    r->wall = (r->done && t.last > 0 ? t.last : t1) - t0;
    r->with_status = t.n_status;
    r->created = t.n_created;
    r->admitted = t.n_admitted;
    r->invalid = t.n_invalid;
    pthread_mutex_unlock(&t.mu);
    /* lathe's: the double's count less the bench's own client and its one stats call */
    long lathe_req = stat_requests(s1) - stat_requests(s0) - (long)(own1 - own0) - 1;
    r->rpo = (double)lathe_req / (double)o->objects;
    pcts(&t, t.status, r->st);
    pcts(&t, t.created, r->cr);
    pcts(&t, t.admitted, r->ad);
    printf("%s: %ld objects sent in %.2f s by %d threads (%ld failed); %ld with a status (%ld Invalid), "
           "%ld Jobs created, %ld admitted, in %.2f s%s\n",
           operator_mode ? "operator" : "API", o->objects, r->submit_s, o->threads, r->errors,
           r->with_status, r->invalid, r->created, r->admitted, r->wall,
           r->done ? "" : " (NOT all: stopped waiting)");
    printf("    double's requests per object (the bench's own included): ");
    print_by_resource(s0, s1, (double)o->objects);
    thr_print("server threads' CPU (s)", &th0, &th1);
    thr_free(&th0);
    thr_free(&th1);
    /* steady state: every object admitted, nothing changes */
    thr_take(l->pid, &th0);
    double c0 = cpu_of(l->pid), i0 = now_s();
    usleep((useconds_t)(o->idle * 1e6));
    r->idle_cpu = (cpu_of(l->pid) - c0) / (now_s() - i0);
    thr_take(l->pid, &th1);
    r->fds = open_fds(l->pid);
    r->readyz = readyz(l, true);
    printf("    then, nothing moving: the server uses %.3f CPU seconds per second; it holds %ld open "
           "descriptors; /readyz on a new connection answers %ld%s\n",
           r->idle_cpu, r->fds, r->readyz, refused_note(l, r->readyz));
    thr_print("in those seconds, the server threads' CPU (s)", &th0, &th1);
    thr_free(&th0);
    thr_free(&th1);
    fflush(stdout);
    r->ran = true;
    json_decref(s0);
    json_decref(s1);
    free(cc.server);
    k8s_informer_free(ij);
    k8s_informer_free(io);
    timing_free(&t);
}

/* The failover's log lines, timed as they appear. */
typedef struct failover_scan {
    failover *f;
    double at; /* seconds from the kill */
} failover_scan;

static void failover_line(void *ctx, const char *line)
{
    failover_scan *fs = ctx;
    const char *led = strstr(line, "operator: leading; ");
    if (fs->f->lease < 0 && strstr(line, "holds the Lease")) fs->f->lease = fs->at;
    if (fs->f->led < 0 && led) {
        fs->f->led = fs->at;
        fs->f->restored = strtol(led + strlen("operator: leading; "), NULL, 10);
    }
}

/* A standby (identity bench-2) started, given 2 s after it first answers
 * /readyz (503: its informers list every object meanwhile); the leader l
 * SIGKILLed; then the standby's way to leading, timed from the kill. */
static void measure_failover(const opts *o, const dbl_proc *d, lathe_proc *l, failover *f)
{
    lathe_proc b;
    if (!lathe_start(o, d->dir, "server-2.yaml", "data-2", "server-2.log", &b)) {
        lathe_stop(&b, SIGKILL);
        return;
    }
    double end = now_s() + 30;
    while (now_s() < end && readyz(&b, false) != 503) usleep(20000);
    usleep(2000000);
    failover_scan fs = {.f = f};
    log_scan ls = {.path = b.log, .pos = file_size(b.log)};
    sb_init(&ls.partial);
    json_t *s0 = dbl_stats(d->dir);
    uint64_t own0 = own_requests(d->cl);
    double cpu0 = cpu_of(b.pid), t0 = now_s();
    lathe_stop(l, SIGKILL);
    f->ready = f->lease = f->led = -1;
    double limit = t0 + 60 + (double)o->objects * 0.05;
    /* until both, or 30 s after it leads without /readyz 200 */
    while (now_s() < limit && (f->ready < 0 || f->led < 0) && !(f->led >= 0 && now_s() - t0 > f->led + 30)) {
        fs.at = now_s() - t0;
        log_scan_lines(&ls, failover_line, &fs);
        if (f->ready < 0 && readyz(&b, false) == 200) {
            f->ready = now_s() - t0;
            f->cpu = cpu_of(b.pid) - cpu0;
        }
        usleep(10000);
    }
    sb_free(&ls.partial);
    f->fds = open_fds(b.pid);
    f->fresh = readyz(&b, true);
    usleep(2000000); /* what the new leader does right after: no Job should be made again */
    json_t *s1 = dbl_stats(d->dir);
    f->requests = stat_requests(s1) - stat_requests(s0) - (long)(own_requests(d->cl) - own0) - 1;
    f->job_creates = stat_job_creates(s1) - stat_job_creates(s0);
    json_decref(s0);
    json_decref(s1);
    f->ran = true;
    printf("failover: the leader SIGKILLed; the standby took the Lease after %.2f s, logged "
           "\"leading; %ld objects restored\" at %.2f s, /readyz 200 at %.2f s%s (CPU %.2f s); "
           "%ld API requests, %ld Jobs created again, until 2 s later\n"
           "    the new leader holds %ld open descriptors; /readyz on a new connection answers %ld%s\n",
           f->lease, f->restored, f->led, f->ready, f->ready < 0 ? " (never)" : "", f->cpu,
           f->requests, f->job_creates, f->fds, f->fresh, refused_note(&b, f->fresh));
    fflush(stdout);
    lathe_stop(&b, SIGTERM);
}

/* Step 1 and the failover: the operator on a double of its own. */
static bool run_operator(const opts *o, const char *dir, const char *nodesf, result *r, failover *f)
{
    dbl_proc d;
    if (!dbl_start(dir, "operator", nodesf, &d)) return false;
    bool ok = install_crds(o, &d) && write_cluster(d.dir) &&
              write_server(o, d.dir, "server-1.yaml", "data-1", "bench") &&
              write_server(o, d.dir, "server-2.yaml", "data-2", "bench-2");
    lathe_proc l;
    memset(&l, 0, sizeof l);
    if (ok) ok = lathe_start(o, d.dir, "server-1.yaml", "data-1", "server-1.log", &l);
    double t0 = now_s();
    if (ok && wait_ready(&l, 60) < 0) {
        fprintf(stderr, "bench_operator: the operator never led (/readyz); see %s\n", l.log);
        ok = false;
    }
    if (ok) {
        printf("operator: /readyz 200 %.2f s after its address\n", now_s() - t0);
        measure(o, &d, &l, true, r);
        measure_failover(o, &d, &l, f);
    }
    lathe_stop(&l, SIGKILL);
    dbl_stop(&d);
    return ok;
}

/* Step 3: the same jobs through lathe's HTTP API, on a fresh double. */
static bool run_api(const opts *o, const char *dir, const char *nodesf, result *r)
{
    dbl_proc d;
    if (!dbl_start(dir, "api", nodesf, &d)) return false;
    lathe_proc l;
    memset(&l, 0, sizeof l);
    bool ok = write_cluster(d.dir) && write_server(o, d.dir, "server.yaml", "data", NULL) &&
              lathe_start(o, d.dir, "server.yaml", "data", "server.log", &l);
    if (ok && wait_ready(&l, 60) < 0) {
        fprintf(stderr, "bench_operator: the server is not ready; see %s\n", l.log);
        ok = false;
    }
    if (ok) measure(o, &d, &l, false, r);
    lathe_stop(&l, SIGTERM);
    dbl_stop(&d);
    return ok;
}

static void print_table(const opts *o, const result *op, const result *api, const failover *f)
{
    double n = (double)o->objects;
    printf("\n| %ld objects | status p50 / p99 (s) | Job created p50 / p99 (s) | admitted p50 / p99 (s) "
           "| wall (s) | ms per object | API requests per object | server CPU (s) | CPU ms per object "
           "| double CPU (s) | idle server CPU (s/s) |\n",
           o->objects);
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    if (op->ran)
        printf("| operator: kubectl-style POST of LoRATrainingJob objects | %.2f / %.2f | %.2f / %.2f | "
               "%.2f / %.2f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f |\n",
               op->st[0], op->st[1], op->cr[0], op->cr[1], op->ad[0], op->ad[1], op->wall,
               op->wall / n * 1e3, op->rpo, op->cpu, op->cpu / n * 1e3, op->dbl_cpu, op->idle_cpu);
    if (api->ran)
        printf("| API: POST /v1/jobs to lathe server | - | %.2f / %.2f | %.2f / %.2f | %.1f | %.2f | %.2f "
               "| %.2f | %.2f | %.2f | %.3f |\n",
               api->cr[0], api->cr[1], api->ad[0], api->ad[1], api->wall, api->wall / n * 1e3, api->rpo,
               api->cpu, api->cpu / n * 1e3, api->dbl_cpu, api->idle_cpu);
    if (op->ran && api->ran)
        printf("\noperator / API: time per object %.2f, admitted p50 %.2f, API requests per object "
               "%.2f, server CPU per object %.2f\n",
               op->wall / api->wall, op->ad[0] / api->ad[0], op->rpo / api->rpo, op->cpu / api->cpu);
    if (f->ran)
        printf("failover of %ld objects: the Lease taken %.2f s after the leader's SIGKILL (leaseDuration "
               "4s), the store rebuilt %.2f s later, leading (/readyz 200) %.2f s after the kill\n",
               f->restored, f->lease, f->led - f->lease, f->ready);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_operator [--objects N] [--threads T] [--qps Q] [--burst B] "
                    "[--idle SECONDS] [--lathe PATH] [--keep]\n");
}

int main(int argc, char **argv)
{
    opts o = {.objects = 2000, .threads = 4, .qps = 1000, .burst = 2000, .idle = 5};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--objects") == 0 && i + 1 < argc) o.objects = atol(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) o.threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--qps") == 0 && i + 1 < argc) o.qps = atof(argv[++i]);
        else if (strcmp(argv[i], "--burst") == 0 && i + 1 < argc) o.burst = atoi(argv[++i]);
        else if (strcmp(argv[i], "--idle") == 0 && i + 1 < argc) o.idle = atof(argv[++i]);
        else if (strcmp(argv[i], "--lathe") == 0 && i + 1 < argc) o.lathe = argv[++i];
        else if (strcmp(argv[i], "--keep") == 0) o.keep = true;
        else {
            usage();
            return 1;
        }
    }
    if (o.objects < 1) o.objects = 1;
    if (o.threads < 1) o.threads = 1;
    if (o.idle < 0) o.idle = 0;
    /* lathe next to the bench: build/bench/bench_operator -> build/lathe */
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    char *default_lathe = xasprintf("%s/../lathe", self);
    if (!o.lathe) o.lathe = default_lathe;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);

    char tmpl[] = "/tmp/lathe-bench-operator-XXXXXX";
    if (!mkdtemp(tmpl)) return 4;
    const char *dir = tmpl;
    long nodes = (o.objects + 7) / 8; /* 8 GPUs each: every object admitted at once */
    sb nb;
    sb_init(&nb);
    sb_puts(&nb, "[");
    for (long i = 0; i < nodes; i++)
        sb_printf(&nb, "%s{\"name\":\"node-%ld\",\"gpus\":8,\"product\":\"NVIDIA-L4\",\"memoryMiB\":23034,"
                       "\"cpu\":\"64\",\"memory\":\"512Gi\",\"labels\":{\"rack-id\":\"rack-%ld\"}}",
                  i ? "," : "", i, i / 16);
    sb_puts(&nb, "]");
    write_text(dir, "nodes.json", sb_str(&nb));
    sb_free(&nb);
    char *nodesf = path_join(dir, "nodes.json");
    printf("bench_operator: %ld objects (1 GPU each) over %d namespaces, %ld nodes of 8 GPUs, the "
           "server's client limit %g qps (burst %d), the API double on loopback (a fresh one for "
           "each way in)\n\n",
           o.objects, N_TEAMS, nodes, o.qps, o.burst);
    fflush(stdout);
    result op, api;
    failover f;
    memset(&op, 0, sizeof op);
    memset(&api, 0, sizeof api);
    memset(&f, 0, sizeof f);
    bool ok_op = run_operator(&o, dir, nodesf, &op, &f);
    bool ok_api = run_api(&o, dir, nodesf, &api);
    print_table(&o, &op, &api, &f);
    int rc = ok_op && ok_api && op.done && api.done && f.ran && f.ready >= 0 ? 0 : 5;
    if (!o.keep) {
        char e2[256];
        file_remove_tree(dir, e2, sizeof e2);
    } else {
        printf("files kept in %s\n", dir);
    }
    free(nodesf);
    free(default_lathe);
    curl_global_cleanup();
    return rc;
}
