/* test_monitor.c: GPU monitoring, budgets and cost in a real server whose
 * GPUs are this machine's as NVML reports them, NVML being the tests'
 * stand-in library (build/tests/nvml/libnvidia-ml.so.1, found through
 * LD_LIBRARY_PATH exactly as the real one is) describing two H100s:
 *
 *   - /metrics exports each GPU under DCGM exporter's names with the job
 *     and team on it (the free one with none), and follows the figures as
 *     they change; /v1/nodes
 *     shows them; a job's GPU history (GET .../gpu) and its summary
 *     (average utilisation, peak memory beside the plan's estimate);
 *   - a team whose budget runs out while its job runs: a `budget` event at
 *     80 % and at 100 % (once each, on its jobs), lathe_team_budget_*
 *     metrics, and its next job waits for the budget;
 *   - GET /v1/cost and `lathe cost` (table, CSV, JSON): sums equal to the
 *     jobs' own figures, windows, a team token sees its team only, bad
 *     queries refused; attempts with their GPUs and cost;
 *   - `lathe render alerts` passes `promtool check rules` and its unit
 *     tests (tests/server/data/alerts.test.yml), and every metric the
 *     rules and `lathe render grafana`'s panels name is one this server
 *     exports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <ctype.h>
#include <math.h>

static hs H;

/* s with every `from` replaced by `to` (caller frees). */
static char *replace_all(const char *s, const char *from, const char *to)
{
    sb out;
    sb_init(&out);
    size_t n = strlen(from);
    for (const char *p; (p = strstr(s, from)) != NULL; s = p + n) {
        sb_putn(&out, s, (size_t)(p - s));
        sb_puts(&out, to);
    }
    sb_puts(&out, s);
    return sb_take(&out);
}

static const char gpus_json[] =
    "{\"driver\": \"550.54.15\", \"gpus\": ["
    "{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-aaaaaaaa-0000-0000-0000-000000000000\","
    " \"memory\": 85520809984, \"used\": %s, \"util\": %s, \"mem_util\": 40, \"power_mw\": 312500,"
    " \"temp\": 61, \"sm_clock\": 1980, \"energy_mj\": 7200000, \"minor\": 0},"
    "{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-bbbbbbbb-0000-0000-0000-000000000000\","
    " \"memory\": 85520809984, \"used\": %s, \"util\": %s, \"mem_util\": 40, \"power_mw\": 312500,"
    " \"temp\": 61, \"sm_clock\": 1980, \"energy_mj\": 7200000, \"minor\": 1}]}";

/* The GPUs as the stand-in describes them (both alike, so the checks hold
 * whichever the scheduler picks): memory used and utilisation. */
static void describe_gpus(const char *used, const char *util)
{
    char *text = xasprintf(gpus_json, used, util, used, util);
    hs_write(&H, "gpus.json", text);
    free(text);
}

/* team-a: a budget of 3 per month at a price of 3600 per GPU-hour (1 per
 * second): 80 % after 2.4 s on one GPU, 100 % after 3 s. */
static const char cluster[] =
    "apiVersion: lathe/v1\n"
    "kind: Cluster\n"
    "metadata: {name: mon}\n"
    "spec:\n"
    "  gpuTypes:\n"
    "    - {name: H100-80GB, memory: 80Gi, pricePerHour: 3600}\n"
    "  teams:\n"
    "    - {name: team-a, quota: {H100-80GB: 2}, budgetPerMonth: 3}\n"
    "    - {name: team-b, quota: {H100-80GB: 2}}\n";

static int setup(void **state)
{
    (void)state;
    hs_init(&H, 1, NULL);
    hs_write(&H, "cluster.yaml", cluster);
    /* the server's config, with this machine's GPUs (NVML) */
    char *p = path_join(H.dir, "server.yaml"), err[128];
    char *cfg = file_read_all(p, 1 << 20, NULL, err, sizeof err);
    char *c2 = replace_all(cfg, "cluster: {file: cluster.yaml}",
                               "cluster: {file: cluster.yaml, gpus: nvml}\n"
                               "  monitoring: {sampleInterval: 100ms}");
    hs_write(&H, "server.yaml", c2);
    free(c2);
    free(cfg);
    free(p);
    describe_gpus("42949672960", "87");
    char *desc = path_join(H.dir, "gpus.json");
    setenv("LATHE_NVML_STANDIN", desc, 1);
    free(desc);
    setenv("LD_LIBRARY_PATH", LATHE_BINARY_DIR "/tests/nvml", 1);
    unsetenv("LATHE_NVML_LIBRARY");
    if (!hs_start(&H)) {
        hs_print_log(&H);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int st = hs_kill(&H, SIGTERM);
    if (st != 0) hs_print_log(&H);
    hs_rmdir(&H);
    free(H.dir);
    free(H.config);
    free(H.record);
    return st == 0 ? 0 : -1;
}

static void submit(const char *token, const char *name, const char *steps, const char *sleep)
{
    char *env = xasprintf("      - {name: STEPS, value: \"%s\"}\n      - {name: SLEEP, value: \"%s\"}\n",
                          steps, sleep);
    char *job = hs_job(&H, name, env, "  resources: {gpu: {type: H100-80GB, count: 1}}\n");
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", token, job);
    if (r.status != 201) fail_msg("%s: %ld %s", name, r.status, r.body);
    hs_resp_free(&r);
    free(job);
    free(env);
}


/* The /metrics text. */
static char *metrics(void)
{
    hs_resp r = hs_http(&H, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r.status, 200);
    char *t = xstrdup(r.body);
    hs_resp_free(&r);
    return t;
}

static bool metrics_have(const char *text)
{
    char *m = metrics();
    bool ok = strstr(m, text) != NULL;
    free(m);
    return ok;
}

static bool wait_metrics(const char *text, double timeout)
{
    double end = hs_now() + timeout * hs_slow();
    while (!metrics_have(text)) {
        if (hs_now() > end) return false;
        hs_sleep(0.05);
    }
    return true;
}

static void test_gpu_metrics_and_history(void **state)
{
    (void)state;
    submit("token-b", "watched", "400", "0.05");
    assert_true(hs_wait_state(&H, "token-b", "watched", "running", 20));
    assert_true(wait_metrics("job=\"watched\",team=\"team-b\"} 87\n", 10));
    /* the job's own figures come with the first sample after its start */
    assert_true(wait_metrics("lathe_job_gpu_utilization_avg_percent{job=\"watched\",team=\"team-b\"} 87\n", 10));
    char *m = metrics();
    assert_non_null(strstr(m, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-aaaaaaaa-0000-0000-0000-"
                              "000000000000\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB "
                              "HBM3\",Hostname=\""));
    assert_non_null(strstr(m, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter"));
    assert_non_null(strstr(m, "job=\"watched\",team=\"team-b\"} 40960\n")); /* MiB */
    assert_non_null(strstr(m, "job=\"watched\",team=\"team-b\"} 312.5\n"));  /* W */
    assert_non_null(strstr(m, "job=\"watched\",team=\"team-b\"} 7200000\n")); /* mJ */
    /* the other GPU: no job */
    assert_non_null(strstr(m, "job=\"\",team=\"\"} 87\n"));
    assert_non_null(strstr(m, "lathe_job_gpu_memory_peak_bytes{job=\"watched\",team=\"team-b\"} 4.2949673e+10\n"));
    assert_non_null(strstr(m, "lathe_job_gpu_memory_planned_bytes{job=\"watched\",team=\"team-b\"}"));
    assert_non_null(strstr(m, "lathe_job_last_progress_timestamp_seconds{job=\"watched\",team=\"team-b\"}"));
    free(m);
    /* the figures move: the next sample says so */
    describe_gpus("53687091200", "12");
    assert_true(wait_metrics("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"", 1));
    assert_true(wait_metrics("job=\"watched\",team=\"team-b\"} 12\n", 10));
    assert_true(wait_metrics("lathe_job_gpu_memory_peak_bytes{job=\"watched\",team=\"team-b\"} 5.36870912e+10\n", 10));

    json_t *nodes = hs_get_json(&H, "/v1/nodes", "token-b");
    json_t *node = json_array_get(json_object_get(nodes, "items"), 0);
    assert_string_equal(json_string_value(json_object_get(node, "gpu_type")), "H100-80GB");
    assert_false(json_is_true(json_object_get(node, "virtual")));
    json_t *g0 = json_array_get(json_object_get(node, "gpus"), 0);
    assert_string_equal(json_string_value(json_object_get(g0, "uuid")),
                        "GPU-aaaaaaaa-0000-0000-0000-000000000000");
    assert_string_equal(json_string_value(json_object_get(g0, "model")), "NVIDIA H100 80GB HBM3");
    json_t *s0 = json_object_get(g0, "sample");
    assert_true(json_number_value(json_object_get(s0, "util")) == 12);
    assert_true(fabs(json_number_value(json_object_get(s0, "memory_total")) - 85520809984.0) < 100);
    assert_true(json_number_value(json_object_get(s0, "power")) == 312.5);
    json_decref(nodes);

    json_t *hist = hs_get_json(&H, "/v1/jobs/watched/gpu", "token-b");
    json_t *items = json_object_get(hist, "items");
    assert_true(json_array_size(items) >= 2);
    json_t *sum = json_object_get(hist, "summary");
    double avg = json_number_value(json_object_get(sum, "util_avg"));
    assert_true(avg > 12 && avg < 87); /* samples at 87 and at 12 */
    assert_true(fabs(json_number_value(json_object_get(sum, "memory_peak")) - 53687091200.0) < 100);
    double planned = json_number_value(json_object_get(sum, "memory_planned"));
    assert_true(planned > 1e9 && planned < 80e9);
    json_decref(hist);
    json_t *job = hs_get_json(&H, "/v1/jobs/watched", "token-b");
    assert_true(json_is_object(json_object_get(job, "gpu")));
    json_decref(job);
    /* another team's job: 404, as everywhere */
    assert_int_equal(hs_status(&H, "GET", "/v1/jobs/watched/gpu", "token-a"), 404);
    assert_int_equal(hs_status(&H, "GET", "/v1/jobs/watched/gpu?limit=0", "token-b"), 400);
    assert_int_equal(hs_status(&H, "POST", "/v1/jobs/watched/cancel", "token-b"), 202);
    assert_true(hs_wait_state(&H, "token-b", "watched", "cancelled", 20));
    assert_true(wait_metrics("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"", 1));
    assert_true(wait_metrics("job=\"\",team=\"\"} 12\n", 10));
}

/* The events of a job of the given type (caller frees). */
static size_t count_events(const char *token, const char *job, const char *type, json_t **last)
{
    char *path = xasprintf("/v1/jobs/%s/events", job);
    json_t *ev = hs_get_json(&H, path, token);
    free(path);
    size_t n = 0;
    json_t *items = json_object_get(ev, "items");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *e = json_array_get(items, i);
        if (strcmp(json_string_value(json_object_get(e, "type")), type) != 0) continue;
        n++;
        if (last) {
            json_decref(*last);
            *last = json_incref(e);
        }
    }
    json_decref(ev);
    return n;
}

static void test_budget_thresholds(void **state)
{
    (void)state;
    submit("token-a", "spender", "400", "0.05");
    assert_true(hs_wait_state(&H, "token-a", "spender", "running", 20));
    assert_true(wait_metrics("lathe_team_budget_threshold{team=\"team-a\"} 0.8\n", 20));
    json_t *e = NULL;
    double end = hs_now() + 20 * hs_slow();
    while (count_events("token-a", "spender", "budget", NULL) < 2 && hs_now() < end) hs_sleep(0.05);
    assert_int_equal(count_events("token-a", "spender", "budget", &e), 2);
    json_t *data = json_object_get(e, "data");
    assert_true(json_number_value(json_object_get(data, "threshold")) == 1.0);
    assert_string_equal(json_string_value(json_object_get(data, "team")), "team-a");
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")),
                           "team team-a reached 100% of its budget"));
    json_decref(e);
    assert_true(wait_metrics("lathe_team_budget_threshold{team=\"team-a\"} 1\n", 5));
    assert_true(metrics_have("lathe_team_budget{team=\"team-a\"} 3\n"));
    json_t *teams = hs_get_json(&H, "/v1/teams", "token-a");
    json_t *ta = json_array_get(json_object_get(teams, "items"), 0);
    assert_true(json_number_value(json_object_get(ta, "budget_threshold")) == 1.0);
    assert_true(json_number_value(json_object_get(ta, "budget_used")) >= 1.0);
    json_decref(teams);
    /* a new job of the team waits for the budget */
    submit("token-a", "blocked", "5", "0.05");
    assert_true(hs_wait_field(&H, "token-a", "blocked", "wait_reason", "budget", 20));
    assert_true(hs_wait_state(&H, "token-a", "blocked", "queued", 1));
    assert_int_equal(count_events("token-a", "blocked", "budget", NULL), 0); /* reached before it came */
    assert_int_equal(hs_status(&H, "POST", "/v1/jobs/spender/cancel", "token-a"), 202);
    assert_int_equal(hs_status(&H, "POST", "/v1/jobs/blocked/cancel", "token-a"), 202);
    if (!hs_wait_state(&H, "token-a", "spender", "cancelled", 20)) {
        hs_print_log(&H);
        fail_msg("spender did not end cancelled");
    }
    /* the threshold is kept for the month: no third event */
    assert_int_equal(count_events("token-a", "spender", "budget", NULL), 2);
}

/* The output of `lathe ARGS... --server ADDR --token TOKEN` (caller frees). */
static char *lathe_out(const char *token, const char *const *args, int *code)
{
    char *out = path_join(H.dir, "cli.out");
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        const char *argv[16];
        int n = 0;
        argv[n++] = "lathe";
        for (int i = 0; args[i] && n < 11; i++) argv[n++] = args[i];
        argv[n++] = "--server";
        argv[n++] = H.addr;
        argv[n++] = "--token";
        argv[n++] = token;
        argv[n] = NULL;
        execv(LATHE_BINARY_DIR "/lathe", (char *const *)argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    char err[128], *text = file_read_all(out, 1 << 20, NULL, err, sizeof err);
    free(out);
    return text;
}

static double num(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

static void test_cost(void **state)
{
    (void)state;
    /* what the first two tests ran, and one more run of team-b to its end */
    submit("token-b", "short", "4", "0.05");
    assert_true(hs_wait_state(&H, "token-b", "short", "succeeded", 30));
    json_t *jobs = hs_get_json(&H, "/v1/jobs", "token-admin");
    double want_cost = 0, want_gh = 0;
    size_t with_gpu = 0;
    json_t *items = json_object_get(jobs, "items");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *j = json_array_get(items, i);
        want_cost += num(j, "cost");
        want_gh += num(j, "gpu_hours");
        with_gpu += num(j, "gpu_hours") > 0;
    }
    json_decref(jobs);
    json_t *c = hs_get_json(&H, "/v1/cost?by=job", "token-admin");
    json_t *tot = json_object_get(c, "total");
    assert_int_equal((size_t)json_integer_value(json_object_get(tot, "jobs")), with_gpu);
    assert_true(fabs(num(tot, "cost") - want_cost) < 1e-6 * (1 + want_cost));
    assert_true(fabs(num(tot, "gpu_hours") - want_gh) < 1e-9 + 1e-6 * want_gh);
    assert_true(fabs(num(tot, "actual_cost") - want_cost) < 1e-6 * (1 + want_cost));
    json_t *first = json_array_get(json_object_get(c, "items"), 0);
    assert_non_null(json_object_get(first, "job"));
    assert_true(json_is_number(json_object_get(first, "planned_cost")));
    json_decref(c);
    /* a team token: its team only; by team with the budget */
    c = hs_get_json(&H, "/v1/cost", "token-a");
    items = json_object_get(c, "items");
    assert_int_equal(json_array_size(items), 1);
    json_t *ta = json_array_get(items, 0);
    assert_string_equal(json_string_value(json_object_get(ta, "team")), "team-a");
    assert_true(num(ta, "budget_per_month") == 3);
    assert_true(num(ta, "spent_this_month") >= 3);
    json_decref(c);
    /* a window after everything ran holds nothing */
    c = hs_get_json(&H, "/v1/cost?since=4000000000", "token-admin");
    assert_int_equal(json_array_size(json_object_get(c, "items")), 0);
    json_decref(c);
    static const char *const bad[] = {"/v1/cost?by=planet", "/v1/cost?since=yesterday",
                                      "/v1/cost?step=1d", "/v1/cost?since=1&until=1",
                                      "/v1/cost?since=2020-01-01T00:00:00Z&step=1m"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (hs_status(&H, "GET", bad[i], "token-admin") != 400) fail_msg("%s: not refused", bad[i]);
    /* the series: a day's periods over the last two days add up to the total */
    char since[64], path[160];
    time_t t0 = time(NULL) - 2 * 86400 + 600; /* two periods, the last cut short */
    struct tm tm;
    gmtime_r(&t0, &tm);
    strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(path, sizeof path, "/v1/cost?since=%s&step=1d", since);
    c = hs_get_json(&H, path, "token-admin");
    json_t *series = json_object_get(json_object_get(c, "total"), "series");
    assert_int_equal(json_array_size(series), 2);
    double s = 0;
    for (size_t i = 0; i < json_array_size(series); i++) s += num(json_array_get(series, i), "cost");
    assert_true(fabs(s - num(json_object_get(c, "total"), "cost")) < 1e-6 * (1 + s));
    json_decref(c);
    /* attempts with their GPUs and cost */
    json_t *att = hs_get_json(&H, "/v1/jobs/short/attempts", "token-b");
    json_t *a1 = json_array_get(json_object_get(att, "items"), 0);
    assert_true(num(a1, "gpus_held") == 1 && num(a1, "price_per_gpu_hour") == 3600);
    assert_string_equal(json_string_value(json_object_get(a1, "reason")), "succeeded");
    json_t *sj = hs_get_json(&H, "/v1/jobs/short", "token-b");
    assert_true(fabs(num(a1, "cost") - num(sj, "cost")) < 1e-9);
    json_decref(sj);
    json_decref(att);

    /* lathe cost */
    int code;
    const char *a_text[] = {"cost", NULL};
    char *out = lathe_out("token-admin", a_text, &code);
    assert_int_equal(code, 0);
    assert_non_null(strstr(out, "TEAM"));
    assert_non_null(strstr(out, "VS PLAN"));
    assert_non_null(strstr(out, "team-a"));
    assert_non_null(strstr(out, "TOTAL"));
    free(out);
    const char *a_csv[] = {"cost", "--by", "job", "-o", "csv", NULL};
    out = lathe_out("token-b", a_csv, &code);
    assert_int_equal(code, 0);
    assert_true(str_starts_with(out, "team,experiment,job,jobs,planned_jobs,gpu_hours,cost,"));
    assert_non_null(strstr(out, "\nteam-b,,short,1,1,"));
    assert_null(strstr(out, "team-a"));
    assert_non_null(strstr(out, "\nTOTAL,"));
    free(out);
    const char *a_json[] = {"cost", "--by", "experiment", "--since", "month", "-o", "json", NULL};
    out = lathe_out("token-b", a_json, &code);
    assert_int_equal(code, 0);
    json_t *j = json_loads(out, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "by")), "experiment");
    json_decref(j);
    free(out);
    const char *a_bad[] = {"cost", "--since", "soon", NULL};
    out = lathe_out("token-b", a_bad, &code);
    assert_int_equal(code, 2);
    free(out);
    const char *a_by[] = {"cost", "--by", "planet", NULL};
    out = lathe_out("token-b", a_by, &code);
    assert_int_equal(code, 1);
    free(out);
}

/* Every name in expr that looks like one of lathe's or DCGM's metrics. */
static void check_names(const char *expr, const char *exported, const char *where)
{
    for (const char *p = expr; *p;) {
        bool starts = (isalpha((unsigned char)*p) || *p == '_') &&
                      !(p > expr && (isalnum((unsigned char)p[-1]) || p[-1] == '_'));
        if (!starts) {
            p++;
            continue;
        }
        size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:");
        if (!strncmp(p, "lathe_", 6) || !strncmp(p, "DCGM_FI_", 8)) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)n, p);
            char *base = xstrdup(name);
            char *suf = strstr(base, "_bucket");
            if (suf && !suf[7]) *suf = '\0';
            char *key = xasprintf("\n# TYPE %s ", base);
            if (!strstr(exported, key)) fail_msg("%s uses %s, which /metrics does not export", where, name);
            free(key);
            free(base);
        }
        p += n;
    }
}

static char *run_capture(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    sb out;
    sb_init(&out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sb_putn(&out, buf, n);
    int st = pclose(f);
    if (st != 0) fail_msg("%s: exit %d:\n%s", cmd, st, sb_str(&out));
    return sb_take(&out);
}

static void test_render_checks(void **state)
{
    (void)state;
    char *m = metrics();
    char *rules = path_join(H.dir, "rules.yml");
    char *cmd = xasprintf("%s/lathe render alerts > %s", LATHE_BINARY_DIR, rules);
    free(run_capture(cmd));
    free(cmd);
    if (system("command -v promtool >/dev/null 2>&1") != 0)
        fail_msg("promtool is missing: scripts/install-deps.sh installs it (Debian's prometheus)");
    cmd = xasprintf("promtool check rules %s 2>&1", rules);
    char *out = run_capture(cmd);
    assert_non_null(strstr(out, "SUCCESS: 6 rules found"));
    free(out);
    free(cmd);
    /* the rules' unit tests: each alert fires when it should, and not before */
    char *test = path_join(H.dir, "alerts.test.yml");
    char err[128], *t = file_read_all(LATHE_TEST_DATA "/alerts.test.yml", 1 << 20, NULL, err, sizeof err);
    assert_non_null(t);
    hs_write(&H, "alerts.test.yml", t);
    free(t);
    cmd = xasprintf("cd %s && promtool test rules alerts.test.yml 2>&1", H.dir);
    out = run_capture(cmd);
    assert_non_null(strstr(out, "SUCCESS"));
    free(out);
    free(cmd);
    free(test);
    /* the rules' metrics are exported */
    char *rt = file_read_all(rules, 1 << 20, NULL, err, sizeof err);
    for (char *p = rt; (p = strstr(p, "expr: ")) != NULL; p += 6) {
        char *e = xstrndup(p + 6, strcspn(p + 6, "\n"));
        check_names(e, m, "lathe render alerts");
        free(e);
    }
    free(rt);
    free(rules);
    /* the dashboard: JSON, every panel's query parses (promtool, as recording
     * rules) and names exported metrics */
    cmd = xasprintf("%s/lathe render grafana", LATHE_BINARY_DIR);
    out = run_capture(cmd);
    free(cmd);
    json_t *d = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "uid")), "lathe");
    sb rec;
    sb_init(&rec);
    sb_puts(&rec, "groups:\n- name: dashboard\n  rules:\n");
    size_t n_targets = 0;
    json_t *panels = json_object_get(d, "panels");
    for (size_t i = 0; i < json_array_size(panels); i++) {
        json_t *tg = json_object_get(json_array_get(panels, i), "targets");
        for (size_t k = 0; k < json_array_size(tg); k++) {
            const char *e = json_string_value(json_object_get(json_array_get(tg, k), "expr"));
            assert_non_null(e);
            check_names(e, m, "lathe render grafana");
            char *e1 = replace_all(e, "$__rate_interval", "5m");
            char *e2 = replace_all(e1, "$team", ".*");
            char *e3 = replace_all(e2, "$job", ".*");
            char *q = replace_all(e3, "'", "''");
            sb_printf(&rec, "  - record: lathe:dashboard:%zu\n    expr: '%s'\n", n_targets++, q);
            free(e1);
            free(e2);
            free(e3);
            free(q);
        }
    }
    assert_true(n_targets >= 15);
    json_decref(d);
    hs_write(&H, "dashboard-rules.yml", sb_str(&rec));
    sb_free(&rec);
    cmd = xasprintf("promtool check rules %s/dashboard-rules.yml 2>&1", H.dir);
    out = run_capture(cmd);
    assert_non_null(strstr(out, "SUCCESS"));
    free(out);
    free(cmd);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_metrics_and_history),
        cmocka_unit_test(test_budget_thresholds),
        cmocka_unit_test(test_cost),
        cmocka_unit_test(test_render_checks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
