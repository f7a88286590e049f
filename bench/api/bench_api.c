/* bench_api.c: how many API requests a local `lathe server` answers, and
 * how fast, through the client library (lib/client) as `lathe` uses it.
 *
 *   1. a server (the built `lathe server`, a child process) in a temporary
 *      folder, on a port the system chooses, with one node of 8 GPUs that
 *      is draining: every job is accepted (validated, planned, checked,
 *      stored) and then waits in the queue, so nothing trains;
 *   2. baseline: GET /healthz (no store, no auth) from the same clients;
 *   3. submissions: --jobs jobs (10,000) from --clients threads (50), each
 *      with its own connection; every acknowledged job is then listed with
 *      pagination and must appear exactly once (none lost, none doubled);
 *   4. reads: GET /v1/jobs/NAME of random jobs, and GET /v1/jobs pages of
 *      100, from the same threads.
 *
 * Figures: requests per second, p50 and p99 latency, and the rate as a
 * ratio of the baseline's measured in the same run.
 *
 * With --queued N,... it measures the controller instead (bench_queue.c):
 * how long its loop and its scheduling pass take with N jobs waiting.
 *
 *   cmake --build build -j2 --target bench_api lathe && build/bench/bench_api
 *   build/bench/bench_api --queued 10000,50000
 *   build/bench/bench_api --lathe OTHER/lathe ...     another build's server
 */
#include "bench_api.h"
#include "client/client.h"

#include <errno.h>
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

/* What one phase measures: latencies of every request. */
typedef struct phase {
    double *lat; /* seconds, one per request */
    size_t n, cap;
    size_t errors;
    double wall;
} phase;

typedef enum { OP_HEALTHZ, OP_SUBMIT, OP_GET, OP_LIST } op_kind;

typedef struct worker {
    int id;
    const bench_opts *o;
    const client_config *cfg;
    op_kind op;
    long count;       /* requests this worker makes */
    long total_jobs;  /* for reads: names bench-<k> exist for k < total_jobs */
    unsigned seed;
    double *lat;
    size_t n_lat;
    size_t errors;
    char **acked;     /* OP_SUBMIT: names acknowledged */
    size_t n_acked;
    char first_error[512];
} worker;

/* ---- workers ---- */

static void record(worker *w, double t)
{
    w->lat[w->n_lat++] = t;
}

static void note_error(worker *w, const client_error *err)
{
    if (!w->errors++ && err->message)
        snprintf(w->first_error, sizeof w->first_error, "%s", err->message);
}

/* One request of the worker's kind; k numbers it. */
static void one_request(worker *w, client *c, long k)
{
    client_error err;
    client_error_init(&err);
    json_t *ans = NULL;
    double t = bench_now();
    int rc;
    if (w->op == OP_HEALTHZ) {
        rc = client_healthz(c, &err);
    } else if (w->op == OP_SUBMIT) {
        long idx = k * w->o->clients + w->id;
        char *text = bench_job(idx);
        rc = client_submit(c, text, strlen(text), false, "bench.yaml", NULL, &ans, NULL, &err);
        if (!rc) w->acked[w->n_acked++] = xasprintf("bench-%ld", idx);
        free(text);
    } else if (w->op == OP_GET) {
        char name[32];
        snprintf(name, sizeof name, "bench-%ld", (long)(rand_r(&w->seed) % w->total_jobs));
        rc = client_job_get(c, name, NULL, &ans, &err);
    } else {
        client_job_filter f = {.limit = 100};
        rc = client_jobs_list(c, &f, &ans, &err);
    }
    record(w, bench_now() - t);
    if (rc) note_error(w, &err);
    json_decref(ans);
    client_error_free(&err);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    client *c = client_new(w->cfg);
    for (long k = 0; k < w->count; k++) one_request(w, c, k);
    client_free(c);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs `clients` workers of one kind, total requests in all. */
static void run_phase(const bench_opts *o, const client_config *cfg, op_kind op, long total,
                      phase *ph, char ***acked, size_t *n_acked)
{
    long nw = o->clients;
    worker *ws = xcalloc((size_t)nw, sizeof *ws);
    pthread_t *th = xcalloc((size_t)nw, sizeof *th);
    for (long i = 0; i < nw; i++) {
        worker *w = &ws[i];
        w->id = (int)i;
        w->o = o;
        w->cfg = cfg;
        w->op = op;
        w->count = total / nw + (i < total % nw);
        w->total_jobs = o->jobs;
        w->seed = (unsigned)(i * 7919 + 1);
        w->lat = xmalloc(((size_t)w->count + 1) * sizeof *w->lat);
        if (op == OP_SUBMIT) w->acked = xmalloc(((size_t)w->count + 1) * sizeof *w->acked);
    }
    double t0 = bench_now();
    for (long i = 0; i < nw; i++) pthread_create(&th[i], NULL, worker_main, &ws[i]);
    for (long i = 0; i < nw; i++) pthread_join(th[i], NULL);
    ph->wall = bench_now() - t0;
    for (long i = 0; i < nw; i++) {
        worker *w = &ws[i];
        ph->lat = xrealloc(ph->lat, (ph->n + w->n_lat + 1) * sizeof *ph->lat);
        memcpy(ph->lat + ph->n, w->lat, w->n_lat * sizeof *w->lat);
        ph->n += w->n_lat;
        ph->errors += w->errors;
        if (w->errors) fprintf(stderr, "bench_api: client %d: %zu errors, first: %s\n", w->id,
                               w->errors, w->first_error);
        for (size_t k = 0; acked && k < w->n_acked; k++) {
            *acked = xrealloc(*acked, (*n_acked + 1) * sizeof **acked);
            (*acked)[(*n_acked)++] = w->acked[k];
        }
        free(w->acked);
        free(w->lat);
    }
    qsort(ph->lat, ph->n, sizeof *ph->lat, cmp_double);
    free(ws);
    free(th);
}

static double pct(const phase *ph, double p)
{
    if (!ph->n) return NAN;
    size_t i = (size_t)ceil(p * (double)ph->n) - 1;
    return ph->lat[i < ph->n ? i : ph->n - 1];
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every acknowledged job must be listed exactly once. */
static bool verify(const client_config *cfg, char **acked, size_t n_acked, size_t *listed_out)
{
    client *c = client_new(cfg);
    client_error err;
    client_error_init(&err);
    json_t *items = NULL;
    client_job_filter f = {.limit = 1000};
    bool ok = client_jobs_list_all(c, &f, 0, &items, &err) == 0;
    if (!ok) client_error_print(&err, "bench_api", stderr);
    size_t n = json_array_size(items);
    char **names = xcalloc(n + 1, sizeof *names);
    for (size_t i = 0; i < n; i++) names[i] = (char *)client_str(json_array_get(items, i), "name");
    qsort(names, n, sizeof *names, cmp_str);
    qsort(acked, n_acked, sizeof *acked, cmp_str);
    size_t dup = 0, lost = 0;
    for (size_t i = 1; i < n; i++) dup += names[i] && names[i - 1] && !strcmp(names[i], names[i - 1]);
    for (size_t i = 0; i < n_acked; i++)
        lost += !bsearch(&acked[i], names, n, sizeof *names, cmp_str);
    printf("verify: %zu acknowledged, %zu listed, %zu lost, %zu listed twice\n", n_acked, n, lost,
           dup);
    *listed_out = n;
    ok = ok && lost == 0 && dup == 0 && n == n_acked;
    free(names);
    json_decref(items);
    client_error_free(&err);
    client_free(c);
    return ok;
}

/* How the server grouped the submissions' writes (a server without group
 * commit reports nothing). */
static void print_grouping(const client_config *cfg)
{
    client *c = client_new(cfg);
    sb out;
    sb_init(&out);
    long status = 0;
    client_error err;
    client_error_init(&err);
    if (client_request(c, "GET", "/metrics", NULL, NULL, 0, &status, &out, &err) == 0 &&
        status == 200) {
        const char *w = strstr(sb_str(&out), "\nlathe_http_writes_total ");
        const char *t = strstr(sb_str(&out), "\nlathe_http_write_commits_total ");
        const char *m = strstr(sb_str(&out), "\nlathe_http_write_batch_max ");
        if (w && t && m) {
            double writes = strtod(strchr(w + 1, ' ') + 1, NULL);
            double commits = strtod(strchr(t + 1, ' ') + 1, NULL);
            printf("group commit: %.0f writes in %.0f transactions (%.1f per flush, at most %.0f)\n",
                   writes, commits, commits > 0 ? writes / commits : 0,
                   strtod(strchr(m + 1, ' ') + 1, NULL));
        }
    }
    client_error_free(&err);
    sb_free(&out);
    client_free(c);
}

static void print_row(const char *name, const phase *ph, double base_rate)
{
    double rate = (double)ph->n / ph->wall;
    printf("| %-26s | %7zu | %6zu | %9.0f | %7.2f | %7.2f | %6.3f |\n", name, ph->n, ph->errors,
           rate, 1e3 * pct(ph, 0.5), 1e3 * pct(ph, 0.99), rate / base_rate);
}

static char *default_lathe(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return xstrdup("lathe");
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash) *slash = '\0';
    return xasprintf("%s/../lathe", buf); /* build/bench/bench_api -> build/lathe */
}

static bool parse(int argc, char **argv, bench_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *slot = !strcmp(a, "--jobs") ? &o->jobs
                     : !strcmp(a, "--clients") ? &o->clients
                     : !strcmp(a, "--reads") ? &o->reads
                     : !strcmp(a, "--probes") ? &o->probes : NULL;
        if (slot && v) {
            *slot = strtol(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--lathe") && v) {
            o->lathe = v;
            i++;
        } else if (!strcmp(a, "--queued") && v) {
            o->queued = v;
            i++;
        } else if (!strcmp(a, "--keep")) {
            o->keep = true;
        } else {
            fprintf(stderr, "usage: bench_api [--jobs N] [--clients N] [--reads N] [--lathe PATH] "
                            "[--keep]\n"
                            "       bench_api --queued N[,N...] [--probes N] [--lathe PATH] [--keep]\n");
            return false;
        }
    }
    return o->jobs > 0 && o->clients > 0 && o->reads > 0 && o->probes > 0;
}

int main(int argc, char **argv)
{
    bench_opts o = {.jobs = 10000, .clients = 50, .reads = 20000, .probes = 30};
    if (!parse(argc, argv, &o)) return LT_EXIT_USAGE;
    char *lathe = o.lathe ? NULL : default_lathe();
    if (lathe) o.lathe = lathe;
    if (!client_global_init()) return LT_EXIT_INTERNAL;
    if (o.queued) {
        int qrc = bench_queue(&o);
        free(lathe);
        client_global_cleanup();
        return qrc;
    }
    server_proc s = {0};
    int rc = LT_EXIT_UNAVAILABLE;
    if (server_start(&o, &s)) {
        client_config cfg = {.server = xasprintf("http://%s", s.addr), .token = s.token,
                             .timeout = 120, .server_from = "the bench's server",
                             .token_from = "data/admin-token"};
        phase base = {0}, sub = {0}, get = {0}, list = {0};
        char **acked = NULL;
        size_t n_acked = 0, listed = 0;
        printf("server %s, %ld clients (threads), %ld jobs, %ld reads of each kind\n", cfg.server,
               o.clients, o.jobs, o.reads);
        run_phase(&o, &cfg, OP_HEALTHZ, o.reads, &base, NULL, NULL);
        run_phase(&o, &cfg, OP_SUBMIT, o.jobs, &sub, &acked, &n_acked);
        bool ok = verify(&cfg, acked, n_acked, &listed);
        print_grouping(&cfg);
        run_phase(&o, &cfg, OP_GET, o.reads, &get, NULL, NULL);
        run_phase(&o, &cfg, OP_LIST, o.reads / 10, &list, NULL, NULL);
        double base_rate = (double)base.n / base.wall;
        printf("\n| %-26s | %7s | %6s | %9s | %7s | %7s | %6s |\n", "request", "n", "errors",
               "per s", "p50 ms", "p99 ms", "x base");
        printf("|%s|---------|--------|-----------|---------|---------|--------|\n",
               "----------------------------");
        print_row("GET /healthz (baseline)", &base, base_rate);
        print_row("POST /v1/jobs (submit)", &sub, base_rate);
        print_row("GET /v1/jobs/NAME", &get, base_rate);
        print_row("GET /v1/jobs?limit=100", &list, base_rate);
        printf("\nnone lost: %s (%zu acknowledged of %ld, %zu listed)\n", ok ? "yes" : "NO",
               n_acked, o.jobs, listed);
        rc = ok && sub.errors == 0 ? LT_EXIT_OK : LT_EXIT_INTERNAL;
        for (size_t i = 0; i < n_acked; i++) free(acked[i]);
        free(acked);
        free(base.lat);
        free(sub.lat);
        free(get.lat);
        free(list.lat);
        free(cfg.server);
    }
    server_stop(&s, o.keep);
    free(lathe);
    client_global_cleanup();
    return rc;
}
