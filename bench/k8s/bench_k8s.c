/* bench_k8s.c: lathe as the admission controller of Kubernetes Jobs, on
 * the API double (tests/k8s/kube-double) over loopback.
 *
 *   1. the double with enough 8-GPU nodes for every job, its kubelet off
 *      (pods are bound, never run: admission is what is measured);
 *   2. lathe: `lathe server` with executor k8s; --jobs jobs (10,000)
 *      submitted at once through its API from 8 client threads; the bench
 *      watches the Jobs itself and notes when each is created (suspended,
 *      while it waits in lathe's queue) and when it is unsuspended
 *      (admitted with its placement);
 *   3. baseline, in the same run, on a fresh double of the same nodes:
 *      the naive controller, one LIST (does the Job exist?) and one CREATE
 *      (unsuspended) per job, no watch, for --baseline-jobs jobs (2,000 at
 *      most by default: each of its LISTs costs the double a scan of the
 *      namespace, so its wall time grows with the square of the jobs while
 *      its per-job figures do not).
 *
 * Figures: time from submission to Job creation and to unsuspension (p50,
 * p99), API requests per admitted job (the double counts them), and the
 * controller's CPU seconds, lathe's against the baseline's.
 *
 *   cmake --build build -j2 --target bench_k8s lathe && build/bench/bench_k8s
 *   build/bench/bench_k8s --jobs 2000 --qps 500 --burst 1000
 */
#include "base/base.h"
#include "client/client.h"
#include "k8s/k8s.h"

#include "bench_k8s_common.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    long jobs;
    long baseline_jobs; /* the baseline's jobs (its per-job figures do not need all of them) */
    double qps;
    int burst;
    const char *lathe;
    bool keep;
} opts;

static double cpu_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* CPU seconds of the threads of pid whose name starts with one of the
 * prefixes (the controller: "lathe-ctl", and its watches "k8s-"), from
 * /proc/PID/task/TID/stat; threads that ended are not counted. */
static double cpu_threads(pid_t pid, const char *const *prefixes, size_t n)
{
    char dirp[64];
    snprintf(dirp, sizeof dirp, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dirp);
    if (!d) return -1;
    double total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[400];
        snprintf(path, sizeof path, "%s/%s/stat", dirp, e->d_name);
        char err[64];
        size_t len;
        char *t = file_read_all(path, 1 << 16, &len, err, sizeof err);
        if (!t) continue;
        char *open_p = strchr(t, '('), *close_p = strrchr(t, ')');
        bool want = false;
        for (size_t i = 0; open_p && close_p && i < n; i++)
            want |= strncmp(open_p + 1, prefixes[i], strlen(prefixes[i])) == 0;
        unsigned long ut = 0, st = 0;
        if (want && sscanf(close_p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
            total += (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
        free(t);
    }
    closedir(d);
    return total;
}

/* GET or POST a /_double/ path; the answer's JSON (NULL on failure). */
static json_t *dbl(const char *dir, const char *method, const char *path)
{
    char *port = path_join(dir, "kube/port"), *tokf = path_join(dir, "kube/token");
    char *ca = path_join(dir, "kube/pki/ca.crt");
    char *p = wait_file(port, 1), *tok = wait_file(tokf, 1);
    json_t *out = NULL;
    if (p && tok) {
        char *url = xasprintf("https://127.0.0.1:%s%s", p, path);
        char *auth = xasprintf("Authorization: Bearer %s", tok);
        CURL *c = curl_easy_init();
        struct curl_slist *h = curl_slist_append(NULL, auth);
        sb body;
        sb_init(&body);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CAINFO, ca);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
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

static long requests_now(const char *dir)
{
    json_t *s = dbl(dir, "GET", "/_double/stats");
    long n = s ? (long)json_integer_value(json_object_get(s, "requests")) : -1;
    json_decref(s);
    return n;
}

/* ---- timing of each job ---- */
typedef struct timing {
    long n;
    double *sub, *created, *admitted;
    pthread_mutex_t mu;
    long n_admitted;
    const char *prefix; /* "lathe-bench-" or "naive-" */
} timing;

static void timing_init(timing *t, long n, const char *prefix)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->sub = xcalloc((size_t)n, sizeof(double));
    t->created = xcalloc((size_t)n, sizeof(double));
    t->admitted = xcalloc((size_t)n, sizeof(double));
    t->prefix = prefix;
    pthread_mutex_init(&t->mu, NULL);
}

static void timing_free(timing *t)
{
    free(t->sub);
    free(t->created);
    free(t->admitted);
    pthread_mutex_destroy(&t->mu);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50 and p99 of (to[k] - from[k]) over jobs where both are known. */
static void pcts(const timing *t, const double *to, double *p50, double *p99)
{
    double *d = xcalloc((size_t)t->n + 1, sizeof *d);
    size_t m = 0;
    for (long k = 0; k < t->n; k++)
        if (to[k] > 0 && t->sub[k] > 0) d[m++] = to[k] - t->sub[k];
    qsort(d, m, sizeof *d, cmp_d);
    *p50 = m ? d[m / 2] : NAN;
    *p99 = m ? d[(size_t)((double)(m - 1) * 0.99)] : NAN;
    free(d);
}

/* The bench's own watch on lathe's Jobs. */
static void on_job(void *ud, k8s_event_type type, const json_t *obj)
{
    timing *t = ud;
    if (type == K8S_DELETED) return;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!name || !str_starts_with(name, t->prefix)) return;
    long k = strtol(name + strlen(t->prefix), NULL, 10);
    if (k < 0 || k >= t->n) return;
    bool suspended = json_is_true(json_object_get(json_object_get(obj, "spec"), "suspend"));
    double now = now_s();
    pthread_mutex_lock(&t->mu);
    if (t->created[k] == 0) t->created[k] = now;
    if (!suspended && t->admitted[k] == 0) {
        t->admitted[k] = now;
        t->n_admitted++;
    }
    pthread_mutex_unlock(&t->mu);
}

/* ---- the baseline: LIST + CREATE per job, no watch ---- */
static json_t *naive_job(long k)
{
    char name[32], idx[24];
    snprintf(name, sizeof name, "naive-%ld", k);
    snprintf(idx, sizeof idx, "%ld", k);
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}}, s:{s:b, s:i, s:{s:{s:[{s:s, s:s, s:[s], "
                     "s:{s:{s:s}}}], s:s}}}}",
                     "apiVersion", "batch/v1", "kind", "Job", "metadata", "name", name, "namespace",
                     "bench", "labels", "naive-job", "yes", "job-index", idx, "spec", "suspend", 0,
                     "backoffLimit", 0, "template", "spec", "containers", "name", "trainer", "image",
                     "lathe:bench", "command", "lathe", "resources", "limits", "nvidia.com/gpu", "1",
                     "restartPolicy", "Never");
}

static void baseline(const opts *o, k8s_client *cl, const char *dir, double *cpu, double *rpj,
                     double *c50, double *c99, double *wall)
{
    timing t;
    timing_init(&t, o->baseline_jobs, "naive-");
    long r0 = requests_now(dir);
    double cpu0 = cpu_self(), t0 = now_s();
    k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = "bench"};
    for (long k = 0; k < o->baseline_jobs; k++) {
        t.sub[k] = t0; /* all submitted at once */
        char sel[64];
        snprintf(sel, sizeof sel, "naive-job=yes,job-index=%ld", k);
        json_t *items = NULL;
        k8s_error e;
        k8s_list(cl, &ref, sel, NULL, 0, &items, NULL, &e);
        json_t *obj = naive_job(k);
        if (json_array_size(items) == 0 && k8s_create(cl, &ref, obj, NULL, &e) == K8S_OK)
            t.created[k] = t.admitted[k] = now_s();
        json_decref(obj);
        json_decref(items);
    }
    *wall = now_s() - t0;
    *cpu = cpu_self() - cpu0;
    long r1 = requests_now(dir);
    *rpj = (double)(r1 - r0 - 1) / (double)o->baseline_jobs;
    pcts(&t, t.created, c50, c99);
    timing_free(&t);
}

/* ---- lathe ---- */
typedef struct submitter {
    const opts *o;
    const client_config *cfg;
    timing *t;
    long from, to;
    long errors;
} submitter;

static void *submit_range(void *arg)
{
    submitter *s = arg;
    client *c = client_new(s->cfg);
    for (long k = s->from; k < s->to; k++) {
        char *text = xasprintf("apiVersion: lathe/v1\nkind: LoRATrainingJob\nmetadata:\n  name: bench-%ld\n"
                               "spec:\n  team: bench\n  baseModel:\n    name: Qwen2.5-0.5B\n"
                               "  trainingData:\n    datasetPath: /data/train.jsonl\n    samples: 10000\n"
                               "  hyperparams:\n    maxSteps: 1000\n",
                               k);
        s->t->sub[k] = now_s();
        client_error e;
        client_error_init(&e);
        json_t *out = NULL;
        bool created;
        if (client_submit(c, text, strlen(text), false, "bench.yaml", "bench", &out, &created, &e) != 0)
            s->errors++;
        json_decref(out);
        client_error_free(&e);
        free(text);
    }
    client_free(c);
    return NULL;
}

static int run_lathe(const opts *o, k8s_client *cl, const char *dir, double *cpu, double *ctl_cpu,
                     double *rpj, double c[2], double a[2], double *wall, long *admitted)
{
    char *cluster = xasprintf("apiVersion: lathe/v1\nkind: Cluster\nmetadata:\n  name: bench\nspec:\n"
                              "  gpuTypes:\n    - name: L4-24GB\n      memory: 24Gi\n      pricePerHour: 0.8\n"
                              "  teams:\n    - name: bench\n");
    char *server = xasprintf(
        "apiVersion: lathe/v1\nkind: ServerConfig\nmetadata:\n  name: bench\nspec:\n"
        "  listen: 127.0.0.1:0\n  dataDir: %s/data\n  executor: k8s\n  cluster:\n    file: %s/cluster.yaml\n"
        "  kubernetes:\n    kubeconfig: %s/kube/kubeconfig\n    qps: %g\n    burst: %d\n"
        "    gpuProducts: {L4-24GB: NVIDIA-L4}\n  scheduler:\n    interval: 1s\n  pollInterval: 500ms\n"
        "  limits:\n    maxConnections: 64\n",
        dir, dir, dir, o->qps, o->burst);
    bool ok = write_text(dir, "cluster.yaml", cluster) && write_text(dir, "server.yaml", server);
    free(cluster);
    free(server);
    if (!ok) return 1;
    char *cfgp = path_join(dir, "server.yaml"), *log = path_join(dir, "server.log");
    char *argv[] = {(char *)o->lathe, "server", "--config", cfgp, NULL};
    pid_t pid = spawn(argv, log);
    char *addrf = xasprintf("%s/data/server.addr", dir), *tokf = xasprintf("%s/data/admin-token", dir);
    char *addr = wait_file(addrf, 120), *tok = addr ? wait_file(tokf, 10) : NULL;
    free(addrf);
    free(tokf);
    if (!addr || !tok) {
        fprintf(stderr, "bench_k8s: lathe server did not start; see %s\n", log);
        free(addr);
        free(tok);
        free(cfgp);
        free(log);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 1;
    }
    timing t;
    timing_init(&t, o->jobs, "lathe-bench-");
    char selector[64];
    snprintf(selector, sizeof selector, "%s=lathe", K8S_LABEL_MANAGED);
    k8s_ref jobs = {.api = "batch/v1", .resource = "jobs"};
    char err[512];
    k8s_informer *inf = k8s_informer_start(cl, &jobs, selector, on_job, NULL, &t, err, sizeof err);
    long r0 = requests_now(dir);
    static const char *const ctl_threads0[] = {"lathe-ctl", "k8s-"};
    double cpu0 = cpu_of(pid), ctl0 = cpu_threads(pid, ctl_threads0, 2), t0 = now_s();
    client_config cc;
    memset(&cc, 0, sizeof cc);
    cc.server = xasprintf("http://%s", addr);
    cc.token = tok;
    cc.timeout = 60;
    enum { NT = 8 };
    pthread_t th[NT];
    submitter sub[NT];
    for (int i = 0; i < NT; i++) {
        sub[i] = (submitter){.o = o, .cfg = &cc, .t = &t, .from = o->jobs * i / NT,
                             .to = o->jobs * (i + 1) / NT};
        pthread_create(&th[i], NULL, submit_range, &sub[i]);
    }
    long errors = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        errors += sub[i].errors;
    }
    if (errors) fprintf(stderr, "bench_k8s: %ld submissions failed\n", errors);
    double deadline = now_s() + 60 + (double)o->jobs * 0.2;
    long last = -1;
    double last_change = now_s();
    for (;;) {
        pthread_mutex_lock(&t.mu);
        long n = t.n_admitted;
        pthread_mutex_unlock(&t.mu);
        if (n >= o->jobs - errors || now_s() > deadline || now_s() - last_change > 120) break;
        if (n != last) {
            last = n;
            last_change = now_s();
        }
        usleep(100000);
    }
    *wall = now_s() - t0;
    *cpu = cpu_of(pid) - cpu0;
    static const char *const ctl_threads[] = {"lathe-ctl", "k8s-"};
    *ctl_cpu = cpu_threads(pid, ctl_threads, 2) - ctl0;
    long r1 = requests_now(dir);
    k8s_informer_stats is;
    k8s_informer_stats_get(inf, &is);
    long own = (long)(is.lists + is.watches) + 1; /* the bench's own requests */
    *admitted = t.n_admitted;
    *rpj = t.n_admitted ? (double)(r1 - r0 - own) / (double)t.n_admitted : NAN;
    pcts(&t, t.created, &c[0], &c[1]);
    pcts(&t, t.admitted, &a[0], &a[1]);
    k8s_informer_free(inf);
    timing_free(&t);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    free(cc.server);
    free(addr);
    free(tok);
    free(cfgp);
    free(log);
    return 0;
}

/* ---- one API double, in a folder of its own ---- */
/* The double in parent/name (kube/ inside), its client, the namespace. */
static bool dbl_start(const char *parent, const char *name, const char *nodesf, const opts *o,
                      dbl_proc *d)
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
        d->kc.qps = o->qps;
        d->kc.burst = o->burst;
        d->cl = k8s_client_new(&d->kc, err, sizeof err);
        if (!d->cl) k8s_config_free(&d->kc);
        ok = d->cl != NULL;
    }
    if (ok) {
        json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", "bench");
        k8s_ref nsref = {.api = "v1", .resource = "namespaces"};
        k8s_error e;
        k8s_create(d->cl, &nsref, ns, NULL, &e);
        json_decref(ns);
    } else {
        fprintf(stderr, "bench_k8s: the double did not start (%s); see %s\n", err, dlog);
    }
    free(r);
    free(ready);
    free(kcfg);
    free(state);
    free(dlog);
    free(dbl_path);
    if (!ok) dbl_stop(d);
    return ok;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_k8s [--jobs N] [--baseline-jobs N] [--qps Q] [--burst B] [--lathe PATH] "
                    "[--keep]\n");
}

int main(int argc, char **argv)
{
    opts o = {.jobs = 10000, .baseline_jobs = -1, .qps = 1000, .burst = 2000, .lathe = NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) o.jobs = atol(argv[++i]);
        else if (strcmp(argv[i], "--baseline-jobs") == 0 && i + 1 < argc) o.baseline_jobs = atol(argv[++i]);
        else if (strcmp(argv[i], "--qps") == 0 && i + 1 < argc) o.qps = atof(argv[++i]);
        else if (strcmp(argv[i], "--burst") == 0 && i + 1 < argc) o.burst = atoi(argv[++i]);
        else if (strcmp(argv[i], "--lathe") == 0 && i + 1 < argc) o.lathe = argv[++i];
        else if (strcmp(argv[i], "--keep") == 0) o.keep = true;
        else {
            usage();
            return 1;
        }
    }
    if (o.jobs < 1) o.jobs = 1;
    if (o.baseline_jobs < 0) o.baseline_jobs = o.jobs < 2000 ? o.jobs : 2000;
    if (o.baseline_jobs < 1) o.baseline_jobs = 1;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = '\0';
    char *bindir = xstrdup(self);
    char *slash = strrchr(bindir, '/');
    if (slash) *slash = '\0';
    char *default_lathe = xasprintf("%s/../lathe", bindir);
    if (!o.lathe) o.lathe = default_lathe;
    curl_global_init(CURL_GLOBAL_DEFAULT);

    char tmpl[] = "/tmp/lathe-bench-k8s-XXXXXX";
    if (!mkdtemp(tmpl)) return 4;
    const char *dir = tmpl;
    /* nodes: 8 GPUs each, enough for every job at once */
    long nodes = (o.jobs + 7) / 8;
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
    printf("bench_k8s: %ld jobs, %ld nodes of 8 GPUs, client rate limit %g qps (burst %d), the API "
           "double on loopback (a fresh one for each controller)\n\n",
           o.jobs, nodes, o.qps, o.burst);
    int rc = 0;
    double lcpu = 0, lctl = 0, lrpj = NAN, lc[2] = {NAN, NAN}, la[2] = {NAN, NAN}, lwall = 0;
    long admitted = 0;
    int lrc = 5;
    dbl_proc d;
    if (dbl_start(dir, "lathe", nodesf, &o, &d)) {
        lrc = run_lathe(&o, d.cl, d.dir, &lcpu, &lctl, &lrpj, lc, la, &lwall, &admitted);
        if (lrc == 0) { /* now, in case the baseline does not finish */
            printf("lathe: created p50 %.2f s, p99 %.2f s; unsuspended p50 %.2f s, p99 %.2f s; %.2f API "
                   "requests per admitted job; controller CPU %.2f s, process %.2f s; %ld of %ld admitted "
                   "in %.1f s\n",
                   lc[0], lc[1], la[0], la[1], lrpj, lctl, lcpu, admitted, o.jobs, lwall);
            fflush(stdout);
        }
        dbl_stop(&d);
    }
    double bcpu = 0, brpj = NAN, b50 = NAN, b99 = NAN, bwall = 0;
    if (dbl_start(dir, "baseline", nodesf, &o, &d)) {
        baseline(&o, d.cl, d.dir, &bcpu, &brpj, &b50, &b99, &bwall);
        dbl_stop(&d);
    }
    if (lrc != 0) {
        rc = 5;
    } else {
        printf("| controller | created p50 / p99 (s) | unsuspended p50 / p99 (s) | API requests per job | controller CPU (s) | whole process CPU (s) | wall (s) |\n");
        printf("|---|---|---|---|---|---|---|\n");
        printf("| baseline: LIST + CREATE per job, no watch (%ld jobs) | %.2f / %.2f | %.2f / %.2f | %.2f | %.2f | %.2f | %.1f |\n",
               o.baseline_jobs, b50, b99, b50, b99, brpj, bcpu, bcpu, bwall);
        printf("| lathe: created suspended, admitted by one patch, watches (%ld jobs) | %.2f / %.2f | %.2f / %.2f | %.2f | %.2f | %.2f | %.1f |\n",
               o.jobs, lc[0], lc[1], la[0], la[1], lrpj, lctl, lcpu, lwall);
        printf("\nadmitted %ld of %ld; API requests per job, lathe / baseline: %.2f; controller CPU per "
               "job, lathe / baseline: %.2f (lathe's controller thread and its watch threads; the "
               "whole process adds the HTTP API, planning and the store)\n",
               admitted, o.jobs, lrpj / brpj,
               (lctl / (double)(admitted ? admitted : 1)) / (bcpu / (double)o.baseline_jobs));
        if (!(lrpj <= 3.0)) printf("goal missed: more than 3 API requests per admitted job\n");
    }
    if (!o.keep) {
        char e2[256];
        file_remove_tree(dir, e2, sizeof e2);
    } else {
        printf("files kept in %s\n", dir);
    }
    free(nodesf);
    free(bindir);
    free(default_lathe);
    curl_global_cleanup();
    return rc;
}
