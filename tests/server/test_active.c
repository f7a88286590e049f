/* test_active.c: the controller's set of active jobs in memory. It follows
 * its own moves and what the HTTP side reports (submissions, cancels)
 * without reading the whole queue; a periodic check against the store
 * (every 10 scheduler intervals, here 5 s) fixes and counts anything it
 * missed (lathe_controller_reload_fixes_total in /metrics).
 *
 *   - churn: jobs submitted from several threads at once, cancelled while
 *     queued and while running, run to their end: the set is always in
 *     step (the checks that ran meanwhile fixed nothing), the queue the
 *     controller reports matches the store's, and the set empties;
 *   - changes behind the server's back (another process writing the
 *     store: a job added, a queued job cancelled): the check finds them
 *     (counted as fixes), the added job runs, the cancelled one never does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "store/store.h"

#include <pthread.h>

/* A server whose scheduler interval is 0.5 s: a consistency check every 5 s. */
static void start_fast(hs *h, int gpus)
{
    hs_init(h, gpus, NULL);
    char *p = path_join(h->dir, "server.yaml"), err[256];
    char *text = file_read_all(p, 1 << 16, NULL, err, sizeof err);
    assert_non_null(text);
    char *at = strstr(text, "interval: 1s");
    assert_non_null(at);
    sb out;
    sb_init(&out);
    sb_putn(&out, text, (size_t)(at - text));
    sb_puts(&out, "interval: 500ms");
    sb_puts(&out, at + strlen("interval: 1s"));
    hs_write(h, "server.yaml", sb_str(&out));
    sb_free(&out);
    free(text);
    free(p);
    if (!hs_start(h)) hs_print_log(h);
    assert_true(h->pid > 0);
}


/* The sum of every line of a metric family (all labels). */
static double metric_sum(const hs *h, const char *family)
{
    hs_resp r = hs_http(h, "GET", "/metrics", NULL, NULL);
    double sum = 0;
    char *key = xasprintf("\n%s{", family);
    for (const char *p = r.body; p && (p = strstr(p, key)); p++) {
        const char *sp = strchr(p + 1, ' ');
        if (sp) sum += strtod(sp + 1, NULL);
    }
    free(key);
    hs_resp_free(&r);
    return sum;
}

static void submit(const hs *h, const char *name, const char *env)
{
    char *job = hs_job(h, name, env, NULL);
    hs_resp r = hs_http(h, "POST", "/v1/jobs", "token-a", job);
    if (r.status != 201) fprintf(stderr, "%s: %ld %s\n", name, r.status, r.body);
    assert_int_equal(r.status, 201);
    hs_resp_free(&r);
    free(job);
}

static void cancel(const hs *h, const char *name)
{
    char *path = xasprintf("/v1/jobs/%s/cancel", name);
    hs_resp r = hs_http(h, "POST", path, "token-a", NULL);
    if (r.status != 202) fprintf(stderr, "cancel %s: %ld %s\n", name, r.status, r.body);
    assert_int_equal(r.status, 202);
    hs_resp_free(&r);
    free(path);
}

/* Waits until the controller's queue (lathe_queue_length) and set agree
 * with the store's counts (lathe_jobs); they are read from one /metrics. */
static bool wait_agree(const hs *h, double timeout)
{
    double end = hs_now() + timeout * hs_slow();
    for (;;) {
        double queued = metric_sum(h, "lathe_queue_length");
        double st_queued = hs_metric(h, "lathe_jobs{state=\"queued\"}");
        double active = st_queued + hs_metric(h, "lathe_jobs{state=\"starting\"}") +
                        hs_metric(h, "lathe_jobs{state=\"running\"}") +
                        hs_metric(h, "lathe_jobs{state=\"stopping\"}");
        if (queued == st_queued && hs_metric(h, "lathe_controller_active_jobs") == active) return true;
        if (hs_now() > end) {
            fprintf(stderr, "controller: %g queued, %g active; store: %g queued, %g active\n",
                    queued, hs_metric(h, "lathe_controller_active_jobs"), st_queued, active);
            return false;
        }
        hs_sleep(0.05);
    }
}

/* ---- churn ---- */
#define CHURN_THREADS 4
#define CHURN_JOBS 6 /* per thread */

typedef struct churn {
    const hs *h;
    int t;
} churn;

static void *churn_main(void *p)
{
    churn *c = p;
    for (int k = 0; k < CHURN_JOBS; k++) {
        char name[32];
        snprintf(name, sizeof name, "c%d-%d", c->t, k);
        submit(c->h, name, "      - {name: STEPS, value: \"4\"}\n");
    }
    return NULL;
}

static void test_churn_in_step(void **state)
{
    (void)state;
    hs h;
    start_fast(&h, 2);
    /* two long jobs hold both GPUs: the churn queues behind them */
    char *gate = path_join(h.dir, "gate");
    char *env = xasprintf("      - {name: STEPS, value: \"3\"}\n      - {name: GATE, value: %s}\n", gate);
    submit(&h, "long-1", env);
    submit(&h, "long-2", env);
    free(env);
    assert_true(hs_wait_state(&h, "token-a", "long-1", "running", 20));
    assert_true(hs_wait_state(&h, "token-a", "long-2", "running", 20));
    churn cs[CHURN_THREADS];
    pthread_t th[CHURN_THREADS];
    for (int t = 0; t < CHURN_THREADS; t++) {
        cs[t] = (churn){&h, t};
        pthread_create(&th[t], NULL, churn_main, &cs[t]);
    }
    for (int t = 0; t < CHURN_THREADS; t++) pthread_join(th[t], NULL);
    cancel(&h, "c0-1"); /* queued */
    cancel(&h, "c1-2");
    cancel(&h, "long-2"); /* running */
    assert_true(hs_wait_state(&h, "token-a", "c0-1", "cancelled", 10));
    assert_true(hs_wait_state(&h, "token-a", "long-2", "cancelled", 20));
    assert_true(wait_agree(&h, 10));
    hs_write(&h, "gate", "");
    free(gate);
    for (int t = 0; t < CHURN_THREADS; t++)
        for (int k = 0; k < CHURN_JOBS; k++) {
            char name[32];
            snprintf(name, sizeof name, "c%d-%d", t, k);
            bool gone = (t == 0 && k == 1) || (t == 1 && k == 2);
            assert_true(hs_wait_state(&h, "token-a", name, gone ? "cancelled" : "succeeded", 60));
        }
    assert_true(hs_wait_state(&h, "token-a", "long-1", "succeeded", 20));
    assert_true(wait_agree(&h, 10));
    assert_true(hs_metric(&h, "lathe_controller_active_jobs") == 0);
    /* the checks that ran meanwhile (the churn took several of them) found
     * the set in step: wait for one more to be sure one ran on the result */
    double count0 = hs_metric(&h, "lathe_controller_loop_seconds_count");
    hs_sleep(5.5 * hs_slow());
    assert_true(hs_metric(&h, "lathe_controller_loop_seconds_count") > count0);
    double fixes = hs_metric(&h, "lathe_controller_reload_fixes_total");
    if (fixes != 0) hs_print_log(&h);
    assert_true(fixes == 0);
    hs_finish(&h);
}

/* ---- changes behind the server's back ---- */
static void test_outside_changes_found(void **state)
{
    (void)state;
    hs h;
    start_fast(&h, 1);
    char *gate = path_join(h.dir, "gate");
    char *env = xasprintf("      - {name: STEPS, value: \"3\"}\n      - {name: GATE, value: %s}\n", gate);
    submit(&h, "blocker", env);
    free(env);
    assert_true(hs_wait_state(&h, "token-a", "blocker", "running", 20));
    submit(&h, "queued", "      - {name: STEPS, value: \"2\"}\n");
    assert_true(wait_agree(&h, 10));
    assert_true(hs_metric(&h, "lathe_controller_reload_fixes_total") == 0);

    /* another process writes the store: a copy of "queued" named
     * "outside" appears, "queued" is cancelled */
    char *db = xasprintf("%s/data/lathe.db", h.dir), err[256];
    store *st = store_open(db, NULL, err, sizeof err);
    free(db);
    assert_non_null(st);
    store_job q;
    assert_int_equal(store_job_find(st, "team-a", "queued", &q), STORE_OK);
    store_submit_req req = {.team = q.team, .name = "outside", .spec_text = q.spec_text,
                            .spec_hash = q.spec_hash, .spec_json = q.spec_json,
                            .plan_json = q.plan_json, .max_retries = q.max_retries};
    assert_int_equal(store_submit(st, &req, NULL), STORE_OK);
    store_event ev = {.actor = "admin", .type = "cancelled", .message = "cancelled outside"};
    assert_int_equal(store_job_transition(st, q.id, STORE_QUEUED, STORE_CANCELLED, NULL, &ev, NULL),
                     STORE_OK);
    store_job_clear(&q);
    store_close(st);

    /* the next check (within 5 s) finds both; the queue it reports follows */
    double end = hs_now() + 15 * hs_slow();
    while (hs_metric(&h, "lathe_controller_reload_fixes_total") < 2 && hs_now() < end) hs_sleep(0.1);
    assert_true(hs_metric(&h, "lathe_controller_reload_fixes_total") >= 2);
    assert_true(wait_agree(&h, 5));
    hs_write(&h, "gate", "");
    free(gate);
    assert_true(hs_wait_state(&h, "token-a", "outside", "succeeded", 30));
    assert_true(hs_wait_state(&h, "token-a", "blocker", "succeeded", 10));
    hs_run *runs;
    size_t n = hs_read_runs(&h, &runs);
    for (size_t i = 0; i < n; i++) assert_true(strcmp(runs[i].job, "team-a/queued") != 0);
    free(runs);
    hs_finish(&h);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_churn_in_step),
        cmocka_unit_test(test_outside_changes_found),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
