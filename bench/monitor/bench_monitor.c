/* bench_monitor.c: what the console and Prometheus cost a `lathe server`:
 * its endpoints timed against GET /healthz (no store, no token) measured in
 * the same run, by the same client, on the same connection.
 *
 *   1. a store seeded before the server starts: --jobs ended jobs (20,000)
 *      of 10 teams, each with --attempts attempts (2) that record their GPUs,
 *      price and cost, a plan with its estimate, and a GPU history of
 *      --samples samples (200) for one job in ten;
 *   2. the server: a Cluster file of --nodes nodes of 8 virtual GPUs (64,
 *      so 512 GPUs) and this machine's GPUs through NVML: the tests'
 *      stand-in library (build/tests/nvml) describing --nvml GPUs (64),
 *      sampled every 100 ms;
 *   3. each endpoint for --seconds seconds (2) in a loop: GET /healthz (the
 *      baseline), /metrics (the DCGM series of every NVML GPU, the team and
 *      job gauges), /v1/nodes (every GPU with its sample), /v1/teams,
 *      /v1/cost by team, by job, and by team with a daily series over the
 *      month, a job's GPU history, and the console's index.html and
 *      app.js.
 *
 * Prints requests per second, p50 and p99 latency, bytes per answer, and
 * the time per request as a multiple of the baseline's.
 *
 *   cmake --build build -j2 --target bench_monitor lathe nvml_standin
 *   build/bench/bench_monitor [--jobs N] [--nodes N] [--nvml N] [--seconds S]
 */
#include "base/base.h"
#include "client/client.h"
#include "server/server.h"
#include "store/store.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef LATHE_BINARY_DIR
#define LATHE_BINARY_DIR "build"
#endif

typedef struct opts {
    long jobs, attempts, samples, nodes, nvml;
    double seconds;
    const char *lathe;
    bool keep; /* --keep: leave the folder (its store) for a look */
} opts;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static pid_t server_pid; /* stopped by die() too */

static void die(const char *fmt, const char *a)
{
    if (server_pid > 0) kill(server_pid, SIGTERM);
    fprintf(stderr, "bench_monitor: ");
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    exit(LT_EXIT_INTERNAL);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char *p = path_join(dir, name);
    if (file_write_atomic(p, text, strlen(text)) != 0) die("cannot write %s", p);
    free(p);
}

/* ---- the store, seeded ---- */

static double clock_now;
static double fake_clock(void *ctx)
{
    (void)ctx;
    return clock_now;
}

static void seed(const opts *o, const char *db)
{
    char err[512];
    store *st = store_open(db, NULL, err, sizeof err);
    if (!st) die("%s", err);
    store_set_clock(st, fake_clock, NULL);
    double t0 = (double)time(NULL) - 21 * 86400; /* every attempt ends before now */
    const char *plan = "{\"gpu_type\":\"A100-80GB\",\"gpus\":1,\"per_gpu_gib\":20,"
                       "\"gpu_hours\":1.5,\"cost\":3.3,\"cost_basis\":\"run\"}";
    store_gpu_sample *hist = xcalloc((size_t)o->samples + 1, sizeof *hist);
    for (long k = 0; k < o->jobs; k++) {
        char team[16], name[32], hash[32], exp[32];
        snprintf(team, sizeof team, "team-%ld", k % 10);
        snprintf(name, sizeof name, "job-%ld", k);
        snprintf(hash, sizeof hash, "h%ld", k);
        snprintf(exp, sizeof exp, "sweep-%ld", k / 3);
        store_submit_req r = {.team = team, .name = name, .experiment = k % 2 ? exp : NULL,
                              .spec_text = "kind: LoRATrainingJob", .spec_hash = hash,
                              .spec_json = "{}", .plan_json = plan, .max_retries = 3};
        int64_t id;
        clock_now = t0 + (double)k * (20.0 * 86400 / (double)o->jobs);
        if ((k % 500 == 0 && store_tx_begin(st) != STORE_OK) || store_submit(st, &r, &id) != STORE_OK)
            die("seeding: %s", store_error(st));
        double gs = 0;
        for (long a = 0; a < o->attempts; a++) {
            int n;
            clock_now += 60;
            store_attempt_usage u = {1, 2.2, NAN, NAN};
            store_attempt_add(st, id, "node-0", "[0]", &n);
            store_attempt_set_usage(st, id, n, &u);
            clock_now += 3600;
            store_attempt_finish(st, id, n, 0, 0, "succeeded");
            store_attempt_usage e = {NAN, NAN, 3600, 2.2};
            store_attempt_set_usage(st, id, n, &e);
            gs += 3600;
        }
        store_event ev = {"controller", "succeeded", "done", NULL};
        store_job_update upd = {.set = STORE_SET_USAGE, .gpu_seconds = gs, .cost = gs / 3600 * 2.2};
        if (store_job_transition(st, id, STORE_QUEUED, STORE_SUCCEEDED, &upd, &ev, NULL) != STORE_OK)
            die("seeding: %s", store_error(st));
        if (k % 10 == 0) {
            for (long s = 0; s < o->samples; s++)
                hist[s] = (store_gpu_sample){id, 1, clock_now - 3600 + (double)s * 10, 1,
                                             50 + (double)(s % 40), 3e10, 8e10, 300, 60};
            store_gpu_samples_add(st, hist, (size_t)o->samples);
        }
        if ((k % 500 == 499 || k == o->jobs - 1) && store_tx_commit(st) != STORE_OK)
            die("seeding: %s", store_error(st));
    }
    free(hist);
    store_close(st);
}

/* ---- the server ---- */

static void setup_dir(const opts *o, const char *dir)
{
    sb c;
    sb_init(&c);
    sb_puts(&c, "apiVersion: lathe/v1\nkind: Cluster\nmetadata: {name: bench}\nspec:\n"
                "  gpuTypes:\n    - {name: A100-80GB, memory: 80Gi, pricePerHour: 2.2}\n"
                "    - {name: H100-80GB, memory: 80Gi, pricePerHour: 4}\n  nodes:\n");
    for (long n = 0; n < o->nodes; n++)
        sb_printf(&c, "    - {name: node-%ld, gpuType: A100-80GB, gpus: 8, nvlinkGroups: "
                      "[[0, 1, 2, 3], [4, 5, 6, 7]]}\n", n);
    sb_puts(&c, "  teams:\n");
    for (int t = 0; t < 10; t++)
        sb_printf(&c, "    - {name: team-%d, quota: {A100-80GB: 64}, budgetPerMonth: 5000}\n", t);
    write_file(dir, "cluster.yaml", sb_str(&c));
    sb_free(&c);
    sb g;
    sb_init(&g);
    sb_puts(&g, "{\"driver\": \"550.54.15\", \"gpus\": [");
    for (long i = 0; i < o->nvml; i++)
        sb_printf(&g, "%s{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-%08ld-0000\", "
                      "\"memory\": 85520809984, \"used\": %ld, \"util\": %ld, \"mem_util\": 30, "
                      "\"power_mw\": 300000, \"temp\": 60, \"sm_clock\": 1980, \"energy_mj\": 1000, "
                      "\"minor\": %ld}",
                  i ? ", " : "", i, 1000000000L * (i % 60), i % 100, i);
    sb_puts(&g, "]}\n");
    write_file(dir, "gpus.json", sb_str(&g));
    sb_free(&g);
    char hash[65];
    srv_hash_token("bench-token", hash);
    char *cfg = xasprintf("apiVersion: lathe/v1\nkind: ServerConfig\nspec:\n  listen: 127.0.0.1:0\n"
                          "  dataDir: data\n  cluster: {file: cluster.yaml, gpus: nvml}\n"
                          "  tokens: [{sha256: %s, admin: true}]\n"
                          "  rateLimit: {requestsPerSecond: 0}\n"
                          "  monitoring: {sampleInterval: 100ms}\n",
                          hash);
    write_file(dir, "server.yaml", cfg);
    free(cfg);
}

static pid_t start_server(const opts *o, const char *dir, char *addr, size_t addrsz)
{
    char *desc = path_join(dir, "gpus.json");
    setenv("LATHE_NVML_STANDIN", desc, 1);
    setenv("LATHE_NVML_LIBRARY", LATHE_BINARY_DIR "/tests/nvml/libnvidia-ml.so.1", 1);
    free(desc);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(127);
        FILE *f = freopen("server.log", "w", stderr);
        (void)f;
        execl(o->lathe, "lathe", "server", "--config", "server.yaml", (char *)NULL);
        _exit(127);
    }
    char *ap = xasprintf("%s/data/server.addr", dir), err[128];
    for (int i = 0; i < 600; i++) {
        char *t = file_read_all(ap, 256, NULL, err, sizeof err);
        if (t) {
            snprintf(addr, addrsz, "http://%.*s", (int)strcspn(t, "\n"), t);
            free(t);
            free(ap);
            return pid;
        }
        usleep(50000);
    }
    die("the server did not start (see %s/server.log)", dir);
    return -1;
}

/* ---- the measurement ---- */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct result {
    double rps, p50, p99;
    size_t bytes;
} result;

static result measure(client *c, const char *path, bool auth, double seconds)
{
    (void)auth;
    size_t cap = 1024, n = 0;
    double *lat = xmalloc(cap * sizeof *lat);
    sb out;
    sb_init(&out);
    client_error err;
    client_error_init(&err);
    double t0 = now_s();
    size_t bytes = 0;
    while (now_s() - t0 < seconds || n < 20) {
        long status = 0;
        out.len = 0;
        double a = now_s();
        if (client_request(c, "GET", path, NULL, NULL, 0, &status, &out, &err) != LT_EXIT_OK ||
            status != 200)
            die("GET %s failed", path);
        if (n == cap) lat = xrealloc(lat, (cap *= 2) * sizeof *lat);
        lat[n++] = now_s() - a;
        bytes = out.len;
    }
    double wall = now_s() - t0;
    qsort(lat, n, sizeof *lat, cmp_d);
    result r = {(double)n / wall, lat[n / 2], lat[(size_t)((double)n * 0.99)], bytes};
    free(lat);
    sb_free(&out);
    client_error_free(&err);
    return r;
}

static long arg_long(const char *v, const char *flag)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 1) die("%s: expected a positive number", flag);
    return x;
}

int main(int argc, char **argv)
{
    opts o = {20000, 2, 200, 64, 64, 2, LATHE_BINARY_DIR "/lathe", false};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--jobs")) o.jobs = arg_long(argv[i + 1], argv[i]);
        else if (!strcmp(argv[i], "--attempts")) o.attempts = arg_long(argv[i + 1], argv[i]);
        else if (!strcmp(argv[i], "--samples")) o.samples = arg_long(argv[i + 1], argv[i]);
        else if (!strcmp(argv[i], "--nodes")) o.nodes = arg_long(argv[i + 1], argv[i]);
        else if (!strcmp(argv[i], "--nvml")) o.nvml = arg_long(argv[i + 1], argv[i]);
        else if (!strcmp(argv[i], "--seconds")) o.seconds = (double)arg_long(argv[i + 1], argv[i]);
        else if (!strcmp(argv[i], "--lathe")) o.lathe = argv[i + 1];
        else if (!strcmp(argv[i], "--keep")) o.keep = !strcmp(argv[i + 1], "1");
        else die("unknown option %s", argv[i]);
    }
    char dir[] = "/tmp/lathe-bench-monitor-XXXXXX";
    if (!mkdtemp(dir)) die("%s", "mkdtemp");
    setup_dir(&o, dir);
    char *data = path_join(dir, "data"), *db = path_join(data, "lathe.db");
    if (!dir_exists(data) && mkdir(data, 0755) != 0) die("cannot make %s", data);
    double t = now_s();
    seed(&o, db);
    printf("seeded %ld ended jobs x %ld attempts, %ld GPU samples each for %ld jobs in %.1f s\n",
           o.jobs, o.attempts, o.samples, o.jobs / 10 + (o.jobs % 10 != 0), now_s() - t);
    char addr[160];
    pid_t pid = server_pid = start_server(&o, dir, addr, sizeof addr);
    if (!client_global_init()) die("%s", "libcurl");
    client_config cfg = {.server = addr, .token = "bench-token", .timeout = 60};
    client *c = client_new(&cfg);
    usleep(300000); /* a few NVML samples */
    char month[128], hist[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    snprintf(month, sizeof month, "/v1/cost?by=team&since=%04d-%02d-01T00:00:00Z&step=1d",
             (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100);
    snprintf(hist, sizeof hist, "/v1/jobs/job-0/gpu?team=team-0");
    const char *paths[] = {"/healthz", "/metrics", "/v1/nodes", "/v1/teams", "/v1/cost",
                           "/v1/cost?by=job", month, hist, "/", "/app.js"};
    /* the answers are right before they are timed: one group per job, and
     * the sums of all time equal the jobs' own */
    client_error cerr;
    client_error_init(&cerr);
    json_t *v = NULL;
    if (client_cost(c, "job", NULL, NULL, NULL, NULL, &v, &cerr) != LT_EXIT_OK) die("%s", cerr.message);
    const json_t *tot = json_object_get(v, "total");
    double want = (double)o.jobs * (double)o.attempts * 2.2;
    if ((long)json_array_size(json_object_get(v, "items")) != o.jobs ||
        fabs(json_number_value(json_object_get(tot, "cost")) - want) > 1e-6 * want)
        die("%s", "GET /v1/cost?by=job does not add up");
    json_decref(v);
    client_error_free(&cerr);
    printf("%ld nodes x 8 virtual GPUs, %ld NVML GPUs; one client, %.0f s per endpoint\n\n",
           o.nodes, o.nvml, o.seconds);
    printf("%-58s %10s %9s %9s %10s %8s\n", "GET", "req/s", "p50 ms", "p99 ms", "bytes", "x base");
    double base = 0;
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        result r = measure(c, paths[i], i > 0, o.seconds);
        if (i == 0) base = 1 / r.rps;
        printf("%-58s %10.0f %9.2f %9.2f %10zu %8.1f\n", paths[i], r.rps, r.p50 * 1e3, r.p99 * 1e3,
               r.bytes, (1 / r.rps) / base);
        fflush(stdout);
    }
    client_free(c);
    client_global_cleanup();
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    char err[512];
    if (o.keep) printf("\nthe folder stays: %s\n", dir);
    else file_remove_tree(dir, err, sizeof err);
    free(data);
    free(db);
    return 0;
}
