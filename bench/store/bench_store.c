/* bench_store.c: how fast the store takes changes, against a baseline
 * measured in the same run on the same disk.
 *
 *   bench_store [N] [--dir DIR]
 *
 * Each change is one durable transaction (WAL, synchronous=FULL: one fsync
 * per commit), so the disk's flush time dominates. Measured:
 *
 *   baseline     N plain INSERTs of a job-sized row into a table with no
 *                event log and no checks, one transaction each, raw SQLite
 *                with the same pragmas (what a bare "insert a row" costs)
 *   submit       N store_submit: the idempotency lookup, the job row and its
 *                "submitted" event in one transaction
 *   transition   N store_job_transition queued -> starting (compare-and-set
 *                plus event)
 *   progress     N points written one per transaction, then N points in
 *                batches of 50 (store_progress_add)
 *   read         N store_job_get and N/100 pages of 100 jobs (store_jobs_list)
 *   threads      8 threads with a handle each submit N jobs in all: one
 *                transaction per submission (writers wait for each other in
 *                SQLite's busy handler), then through one store_batcher
 *                (group commit: the submissions that meet share a commit)
 *
 * Prints operations per second and the ratio to the baseline. DIR (default
 * /tmp) should be on the disk the server will use: tmpfs flushes nothing.
 */
#include "base/base.h"
#include "store/store.h"

#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_store: %s: %s\n", what, msg);
    exit(LT_EXIT_INTERNAL);
}

static const char spec_text[] =
    "apiVersion: lathe/v1\nkind: LoRATrainingJob\nmetadata:\n  name: bench\nspec:\n"
    "  baseModel: {name: Qwen2.5-7B}\n  lora: {rank: 16}\n"
    "  trainingData: {datasetPath: /data/train.jsonl}\n";

/* ---- the baseline: raw SQLite, no event log ---- */

static double baseline(const char *path, int n)
{
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) die("open", sqlite3_errmsg(db));
    const char *setup = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, team TEXT, name TEXT,"
                        " spec_text TEXT, spec_hash TEXT, state TEXT, created_at REAL)";
    if (sqlite3_exec(db, setup, NULL, NULL, NULL) != SQLITE_OK) die("setup", sqlite3_errmsg(db));
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "INSERT INTO jobs (team, name, spec_text, spec_hash, state, created_at)"
                           " VALUES ('team-a', ?1, ?2, 'hash', 'queued', 0)",
                       -1, &s, NULL);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "job-%d", i);
        sqlite3_bind_text(s, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 2, spec_text, -1, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE) die("insert", sqlite3_errmsg(db));
        sqlite3_reset(s);
    }
    double dt = now_s() - t0;
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n / dt;
}

/* ---- the store ---- */

static double submit_all(store *st, int n, int64_t *ids)
{
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        char name[32], hash[32];
        snprintf(name, sizeof name, "job-%d", i);
        snprintf(hash, sizeof hash, "h%d", i);
        store_submit_req r = {.team = i % 2 ? "team-a" : "team-b", .name = name,
                              .spec_text = spec_text, .spec_hash = hash, .max_retries = 3};
        if (store_submit(st, &r, &ids[i]) != STORE_OK) die("submit", store_error(st));
    }
    return n / (now_s() - t0);
}

static double transition_all(store *st, int n, const int64_t *ids)
{
    store_event ev = {"scheduler", "started", "placed on node-1", "{\"gpus\":[0]}"};
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        if (store_job_transition(st, ids[i], STORE_QUEUED, STORE_STARTING, NULL, &ev, NULL) !=
            STORE_OK)
            die("transition", store_error(st));
    return n / (now_s() - t0);
}

/* Points per second, batch points per transaction. */
static double progress(store *st, int64_t id, int attempt, int n, int batch)
{
    store_progress *pts = xcalloc((size_t)batch, sizeof *pts);
    double t0 = now_s();
    for (int done = 0; done < n; done += batch) {
        int k = n - done < batch ? n - done : batch;
        for (int i = 0; i < k; i++)
            pts[i] = (store_progress){done + i + 1, n, NAN, 2.0, 2e-4, 1000, 60, 0, false, 0};
        if (store_progress_add(st, id, attempt, pts, (size_t)k) != STORE_OK)
            die("progress", store_error(st));
    }
    double rate = n / (now_s() - t0);
    free(pts);
    return rate;
}

static void reads(store *st, int n, const int64_t *ids, double *gets, double *pages)
{
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        store_job j;
        if (store_job_get(st, ids[i], &j) != STORE_OK) die("get", store_error(st));
        store_job_clear(&j);
    }
    *gets = n / (now_s() - t0);
    int n_pages = n / 100 > 0 ? n / 100 : 1;
    t0 = now_s();
    for (int p = 0; p < n_pages; p++) {
        store_job_filter f = {.limit = 100, .summary = true, .team = "team-a"};
        store_job_list l;
        if (store_jobs_list(st, &f, &l) != STORE_OK) die("list", store_error(st));
        store_job_list_free(&l);
    }
    *pages = n_pages / (now_s() - t0);
}

/* ---- threads ---- */
#define BENCH_THREADS 8

typedef struct th_arg {
    const char *path;
    store_batcher *g; /* NULL: a transaction per submission */
    int t, n;
    bool failed;
} th_arg;

static store_rc write_submit(store *st, void *arg)
{
    return store_submit(st, arg, NULL);
}

static void *th_submit(void *p)
{
    th_arg *a = p;
    char err[512];
    store *st = store_open(a->path, NULL, err, sizeof err);
    if (!st) die("open", err);
    for (int k = 0; k < a->n && !a->failed; k++) {
        char name[48], hash[48];
        snprintf(name, sizeof name, "%s-%d-%d", a->g ? "g" : "t", a->t, k);
        snprintf(hash, sizeof hash, "h%d-%d", a->t, k);
        store_submit_req r = {.team = "team-c", .name = name, .spec_text = spec_text,
                              .spec_hash = hash, .max_retries = 3};
        store_rc rc = a->g ? store_batcher_write(a->g, st, write_submit, &r)
                           : store_submit(st, &r, NULL);
        a->failed = rc != STORE_OK;
    }
    store_close(st);
    return NULL;
}

/* Submissions per second from BENCH_THREADS threads, n in all. */
static double threaded(const char *path, int n, store_batcher *g)
{
    th_arg args[BENCH_THREADS];
    pthread_t th[BENCH_THREADS];
    double t0 = now_s();
    for (int t = 0; t < BENCH_THREADS; t++) {
        args[t] = (th_arg){path, g, t, n / BENCH_THREADS, false};
        pthread_create(&th[t], NULL, th_submit, &args[t]);
    }
    for (int t = 0; t < BENCH_THREADS; t++) pthread_join(th[t], NULL);
    double rate = (double)(n / BENCH_THREADS * BENCH_THREADS) / (now_s() - t0);
    for (int t = 0; t < BENCH_THREADS; t++)
        if (args[t].failed) die("threads", "a submission failed");
    return rate;
}

int main(int argc, char **argv)
{
    int n = 2000;
    const char *base = "/tmp";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) base = argv[++i];
        else if (atoi(argv[i]) > 0) n = atoi(argv[i]);
        else {
            fprintf(stderr, "usage: bench_store [N] [--dir DIR]\n");
            return LT_EXIT_USAGE;
        }
    }
    char *dir = path_join(base, "lathe-bench-store-XXXXXX");
    if (!mkdtemp(dir)) die("mkdtemp", dir);
    char *raw = path_join(dir, "baseline.db"), *path = path_join(dir, "store.db");

    double b = baseline(raw, n);
    char err[512];
    store *st = store_open(path, NULL, err, sizeof err);
    if (!st) die("open", err);
    int64_t *ids = xcalloc((size_t)n, sizeof *ids);
    double sub = submit_all(st, n, ids);
    double tr = transition_all(st, n, ids);
    double p1 = progress(st, ids[0], 1, n, 1);
    double p50 = progress(st, ids[1], 1, n, 50);
    double gets, pages;
    reads(st, n, ids, &gets, &pages);
    store_close(st);
    double alone = threaded(path, n, NULL);
    store_batcher *g = store_batcher_new(0);
    double grouped = threaded(path, n, g);
    store_batcher_stats gs;
    store_batcher_stats_get(g, &gs);
    store_batcher_free(g);

    printf("bench_store: %d operations each, in %s (WAL, synchronous=FULL)\n", n, dir);
    printf("  %-34s %10.0f /s   1.00x\n", "baseline: plain INSERT, no events", b);
    printf("  %-34s %10.0f /s   %.2fx\n", "store_submit (job + event)", sub, sub / b);
    printf("  %-34s %10.0f /s   %.2fx\n", "store_job_transition (CAS + event)", tr, tr / b);
    printf("  %-34s %10.0f /s   %.2fx\n", "progress, 1 point per transaction", p1, p1 / b);
    printf("  %-34s %10.0f /s   %.2fx  (%.0fx the unbatched rate)\n",
           "progress, 50 points per transaction", p50, p50 / b, p50 / p1);
    printf("  %-34s %10.0f /s\n", "store_job_get", gets);
    printf("  %-34s %10.0f /s\n", "store_jobs_list, pages of 100", pages);
    printf("  %d threads, a transaction per submission %6.0f /s   %.2fx\n", BENCH_THREADS, alone,
           alone / b);
    printf("  %d threads, group commit (store_batcher) %6.0f /s   %.2fx  (%.1f per transaction)\n",
           BENCH_THREADS, grouped, grouped / b,
           gs.commits ? (double)gs.writes / (double)gs.commits : 0.0);

    int rc = file_remove_tree(dir, err, sizeof err);
    if (rc != 0) fprintf(stderr, "bench_store: %s\n", err);
    free(ids);
    free(raw);
    free(path);
    free(dir);
    return rc == 0 ? LT_EXIT_OK : LT_EXIT_IO;
}
