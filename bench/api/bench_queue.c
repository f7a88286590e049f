/* bench_queue.c: the controller with a long queue (bench_api --queued).
 *
 * For each N of --queued, in a fresh folder:
 *
 *   1. the server takes one job through the API, so its resolved spec and
 *      plan are exactly what a server stores; the server stops;
 *   2. N - 1 copies of that job under other names go straight into its
 *      store, in one transaction (through the API this would take minutes);
 *   3. the server starts again and its controller loads the N jobs (the
 *      time until every job has its first wait reason is printed);
 *   4. idle: the server's CPU use over 5 s while nothing happens (the
 *      controller's loop still runs every poll interval);
 *   5. probes: --probes times (30) a job is submitted, and the time from
 *      the answer until the controller gave it the scheduler's sentence as
 *      its wait reason is measured: one turn of the controller's loop
 *      after a wake-up (learning what changed, the scheduling pass, writing
 *      reasons), plus the polling's round trip (2 ms);
 *   6. from /metrics over the probes: the mean scheduling pass
 *      (lathe_scheduling_pass_seconds) and, where the server reports it,
 *      the mean loop (lathe_controller_loop_seconds).
 *
 * The draining node keeps every job waiting, so each pass gives every job
 * a reason: the most work a pass does for a queue of that length.
 */
#include "bench_api.h"
#include "client/client.h"
#include "store/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char first_reason[] = "waiting for the scheduler's next pass";

/* ---- the server's answers ---- */

/* The value of the metric line starting with `name` (labels included)
 * from a /metrics text; NAN when absent. */
static double metric_of(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, name, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NAN;
}

static char *get_metrics(client *c)
{
    sb out;
    sb_init(&out);
    long status = 0;
    client_error err;
    client_error_init(&err);
    int rc = client_request(c, "GET", "/metrics", NULL, NULL, 0, &status, &out, &err);
    client_error_free(&err);
    if (rc || status != 200) {
        sb_free(&out);
        return NULL;
    }
    return sb_take(&out);
}

/* The job's wait reason (caller frees), or NULL. */
static char *wait_reason(client *c, const char *name)
{
    client_error err;
    client_error_init(&err);
    json_t *j = NULL;
    char *out = NULL;
    if (client_job_get(c, name, NULL, &j, &err) == 0) {
        const char *r = client_str(j, "wait_reason");
        out = r ? xstrdup(r) : NULL;
    }
    json_decref(j);
    client_error_free(&err);
    return out;
}

static bool submit(client *c, long k)
{
    char *text = bench_job(k);
    client_error err;
    client_error_init(&err);
    json_t *ans = NULL;
    int rc = client_submit(c, text, strlen(text), false, "bench.yaml", NULL, &ans, NULL, &err);
    if (rc) client_error_print(&err, "bench_api", stderr);
    json_decref(ans);
    client_error_free(&err);
    free(text);
    return rc == 0;
}

/* ---- filling the store ---- */

/* Adds n - 1 copies of the stored job bench-0 (named q-1 ...) to the
 * stopped server's store, in one transaction. */
static bool fill(const server_proc *s, long n)
{
    char *db = xasprintf("%s/data/lathe.db", s->dir), err[512];
    store *st = store_open(db, NULL, err, sizeof err);
    free(db);
    if (!st) {
        fprintf(stderr, "bench_api: %s\n", err);
        return false;
    }
    store_job t;
    bool ok = store_job_find(st, "bench", "bench-0", &t) == STORE_OK && store_tx_begin(st) == STORE_OK;
    char name[32];
    store_submit_req q = {.team = t.team, .name = name, .spec_text = t.spec_text,
                          .spec_hash = t.spec_hash, .spec_json = t.spec_json,
                          .plan_json = t.plan_json, .priority_class = t.priority_class,
                          .priority = t.priority, .max_retries = t.max_retries,
                          .wait_reason = first_reason};
    for (long k = 1; ok && k < n; k++) {
        snprintf(name, sizeof name, "q-%ld", k);
        ok = store_submit(st, &q, NULL) == STORE_OK;
    }
    if (ok) ok = store_tx_commit(st) == STORE_OK;
    if (!ok) fprintf(stderr, "bench_api: filling the store: %s\n", store_error(st));
    store_tx_rollback(st);
    store_job_clear(&t);
    store_close(st);
    return ok;
}

/* Waits until every queued job has had a scheduling pass (no "new" wait
 * reason in /metrics). Returns the seconds it took, or -1. */
static double wait_loaded(client *c)
{
    double t0 = bench_now();
    while (bench_now() - t0 < 1200) {
        char *m = get_metrics(c);
        bool done = m && metric_of(m, "lathe_scheduling_pass_seconds_count") >= 1 &&
                    !strstr(m, "reason=\"new\"");
        free(m);
        if (done) return bench_now() - t0;
        usleep(100000);
    }
    return -1;
}

/* ---- measuring ---- */

typedef struct queue_row {
    long queued;
    double load_s;
    double idle_cpu;         /* share of one core while idle */
    double probe_p50, probe_p90, probe_max;
    double pass_mean;        /* scheduling pass, seconds; NAN when none */
    double loop_mean;        /* controller loop, seconds; NAN when not reported */
} queue_row;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One probe: the seconds from the answer to the new wait reason; -1. */
static double probe(client *c, long k)
{
    char name[32];
    snprintf(name, sizeof name, "bench-%ld", k);
    if (!submit(c, k)) return -1;
    double t0 = bench_now();
    while (bench_now() - t0 < 600) {
        char *r = wait_reason(c, name);
        bool changed = r && strcmp(r, first_reason) != 0;
        free(r);
        if (changed) return bench_now() - t0;
        usleep(2000);
    }
    return -1;
}

static void metric_pair(client *c, const char *base, double *sum, double *count)
{
    char *m = get_metrics(c);
    char name[96];
    snprintf(name, sizeof name, "%s_sum", base);
    *sum = m ? metric_of(m, name) : NAN;
    snprintf(name, sizeof name, "%s_count", base);
    *count = m ? metric_of(m, name) : NAN;
    free(m);
}

static bool measure(const bench_opts *o, client *c, const server_proc *s, queue_row *row)
{
    double cpu0 = server_cpu_seconds(s), t0 = bench_now();
    sleep(5);
    row->idle_cpu = (server_cpu_seconds(s) - cpu0) / (bench_now() - t0);
    double ps0, pc0, ls0, lc0, ps1, pc1, ls1, lc1;
    metric_pair(c, "lathe_scheduling_pass_seconds", &ps0, &pc0);
    metric_pair(c, "lathe_controller_loop_seconds", &ls0, &lc0);
    double *lat = xcalloc((size_t)o->probes, sizeof *lat);
    bool ok = true;
    for (long i = 0; i < o->probes && ok; i++) {
        lat[i] = probe(c, 1000000 + i);
        ok = lat[i] >= 0;
        usleep(300000); /* the loop goes idle: the next probe's wake-up starts a fresh turn */
    }
    metric_pair(c, "lathe_scheduling_pass_seconds", &ps1, &pc1);
    metric_pair(c, "lathe_controller_loop_seconds", &ls1, &lc1);
    qsort(lat, (size_t)o->probes, sizeof *lat, cmp_double);
    row->probe_p50 = lat[(o->probes - 1) / 2];
    row->probe_p90 = lat[(size_t)ceil(0.9 * (double)o->probes) - 1];
    row->probe_max = lat[o->probes - 1];
    row->pass_mean = pc1 > pc0 ? (ps1 - ps0) / (pc1 - pc0) : NAN;
    row->loop_mean = lc1 > lc0 ? (ls1 - ls0) / (lc1 - lc0) : NAN;
    free(lat);
    return ok;
}

/* Steps 1-6 for one queue length. */
static bool run_one(const bench_opts *o, long n, queue_row *row)
{
    memset(row, 0, sizeof *row);
    row->queued = n;
    server_proc s = {0};
    bool ok = server_start(o, &s);
    client_config cfg = {.timeout = 600, .server_from = "the bench's server",
                         .token_from = "data/admin-token"};
    client *c = NULL;
    if (ok) {
        cfg.server = xasprintf("http://%s", s.addr);
        cfg.token = s.token;
        c = client_new(&cfg);
        ok = submit(c, 0);
        client_free(c);
        free(cfg.server);
    }
    server_halt(&s);
    ok = ok && fill(&s, n) && server_launch(o, &s);
    if (ok) {
        cfg.server = xasprintf("http://%s", s.addr);
        cfg.token = s.token;
        c = client_new(&cfg);
        row->load_s = wait_loaded(c);
        ok = row->load_s >= 0 && measure(o, c, &s, row);
        client_free(c);
        free(cfg.server);
    }
    if (!ok) fprintf(stderr, "bench_api: the run with %ld queued jobs failed; see %s/server.log\n",
                     n, s.dir);
    server_stop(&s, o->keep || !ok);
    return ok;
}

static void print_ms(double s)
{
    if (isnan(s)) printf(" %10s |", "-");
    else printf(" %10.1f |", 1e3 * s);
}

int bench_queue(const bench_opts *o)
{
    char **parts;
    size_t np = str_split(o->queued, ',', &parts);
    queue_row *rows = xcalloc(np + 1, sizeof *rows);
    bool ok = np > 0;
    printf("server %s; %ld probes per queue length\n", o->lathe, o->probes);
    for (size_t i = 0; i < np && ok; i++) {
        long n = strtol(parts[i], NULL, 10);
        ok = n > 0 && run_one(o, n, &rows[i]);
        if (ok) printf("%ld queued: every job had its first reason %.1f s after the start\n", n,
                       rows[i].load_s);
        fflush(stdout);
    }
    printf("\n| %8s | %10s | %10s | %10s | %10s | %10s | %10s |\n", "queued", "probe p50",
           "probe p90", "probe max", "pass mean", "loop mean", "idle CPU");
    printf("|----------|------------|------------|------------|------------|------------|------------|\n");
    for (size_t i = 0; i < np; i++) {
        if (!rows[i].queued) continue;
        printf("| %8ld |", rows[i].queued);
        print_ms(rows[i].probe_p50);
        print_ms(rows[i].probe_p90);
        print_ms(rows[i].probe_max);
        print_ms(rows[i].pass_mean);
        print_ms(rows[i].loop_mean);
        printf(" %9.1f%% |\n", 100 * rows[i].idle_cpu);
    }
    printf("(milliseconds; probe: submission answered -> its wait reason written; pass: "
           "lathe_scheduling_pass_seconds; loop: lathe_controller_loop_seconds; idle CPU: the "
           "server's share of one core over 5 s with nothing to do)\n");
    str_list_free(parts, np);
    free(rows);
    return ok ? LT_EXIT_OK : LT_EXIT_INTERNAL;
}
