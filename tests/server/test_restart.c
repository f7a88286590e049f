/* test_restart.c: a server killed with SIGKILL loses nothing.
 *
 *   - restart with running jobs: the trainers keep running while no server
 *     runs; the new server re-attaches to them (and learns how the ones
 *     that ended meanwhile ended); every job completes once, in its first
 *     attempt;
 *   - the kill -9 torture test: a client thread submits jobs without
 *     pause while the server is killed at random instants and restarted.
 *     Afterwards every acknowledged submission exists exactly once and
 *     succeeded, and no job ever ran twice at the same time (the fake
 *     trainers record their start and stop in a file opened with O_APPEND).
 *     The seed is printed; LATHE_TORTURE_SEED=N replays it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <pthread.h>

static void submit_ok(hs *h, const char *name, const char *env)
{
    char *job = hs_job(h, name, env, NULL);
    hs_resp r = hs_http(h, "POST", "/v1/jobs", "token-a", job);
    assert_int_equal(r.status, 201);
    hs_resp_free(&r);
    free(job);
}


static int count_runs(const hs_run *runs, size_t n, const char *job)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) k += strcmp(runs[i].job, job) == 0;
    return k;
}

static void test_restart_running(void **state)
{
    (void)state;
    hs h;
    hs_init(&h, 4, NULL);
    assert_true(hs_start(&h));
    /* gates make the timing certain: the long jobs run on only after the
     * restart, "short" ends while no server runs */
    char *gate = path_join(h.dir, "gate"), *gate2 = path_join(h.dir, "gate2");
    char *env = xasprintf("      - {name: STEPS, value: \"50\"}\n      - {name: GATE, value: %s}\n", gate2);
    submit_ok(&h, "long-a", env);
    submit_ok(&h, "long-b", env);
    free(env);
    env = xasprintf("      - {name: STEPS, value: \"4\"}\n      - {name: GATE, value: %s}\n", gate);
    submit_ok(&h, "short", env);
    free(env);
    assert_true(hs_wait_state(&h, "token-a", "long-a", "running", 20));
    assert_true(hs_wait_state(&h, "token-a", "long-b", "running", 20));
    assert_true(hs_wait_state(&h, "token-a", "short", "running", 20));
    hs_kill(&h, SIGKILL);
    hs_write(&h, "gate", "");
    double end = hs_now() + 10 * hs_slow();
    for (;;) { /* until the short trainer recorded its stop */
        hs_run *rs;
        size_t nr = hs_read_runs(&h, &rs);
        bool stopped = false;
        for (size_t i = 0; i < nr; i++) stopped |= !strcmp(rs[i].job, "team-a/short") && rs[i].stop > 0;
        free(rs);
        if (stopped) break;
        assert_true(hs_now() < end);
        hs_sleep(0.02);
    }
    free(gate);
    assert_true(hs_start(&h));
    hs_write(&h, "gate2", "");
    free(gate2);
    assert_true(hs_wait_state(&h, "token-a", "short", "succeeded", 20));
    assert_true(hs_wait_state(&h, "token-a", "long-a", "succeeded", 30));
    assert_true(hs_wait_state(&h, "token-a", "long-b", "succeeded", 30));
    const char *names[] = {"long-a", "long-b", "short"};
    hs_run *runs;
    size_t n = hs_read_runs(&h, &runs);
    for (int i = 0; i < 3; i++) {
        char *path = xasprintf("/v1/jobs/%s", names[i]);
        hs_resp r = hs_http(&h, "GET", path, "token-a", NULL);
        free(path);
        assert_int_equal(json_integer_value(json_object_get(r.json, "attempt")), 1);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(r.json, "progress"), "step")),
                         i < 2 ? 50 : 4);
        hs_resp_free(&r);
        char *ev = hs_events(&h, "token-a", names[i]);
        if (!strstr(ev, "after a server restart")) fprintf(stderr, "%s", ev);
        assert_non_null(strstr(ev, "reattached: re-attached to attempt 1 after a server restart"));
        /* the output read again after the restart records no checkpoint twice */
        const char *p = ev;
        int five = 0;
        while ((p = strstr(p, "checkpoint at step 5:"))) five++, p++;
        assert_int_equal(five, i < 2 ? 1 : 0);
        free(ev);
        char job[64];
        snprintf(job, sizeof job, "team-a/%s", names[i]);
        assert_int_equal(count_runs(runs, n, job), 1);
    }
    free(runs);
    hs_finish(&h);
}

/* ---- torture ---- */
typedef struct torture {
    hs *h;
    pthread_mutex_t mu; /* h->addr changes at every restart */
    bool stop;
    int max_jobs;
    int acked;          /* names t-000 .. acked-1 are acknowledged */
    int attempts, refused, repeated; /* requests, unanswered, answered 200 (already stored) */
    uint64_t rng;       /* the pause between submissions */
} torture;

static void *submitter(void *arg)
{
    torture *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        bool stop = t->stop || t->acked >= t->max_jobs;
        hs copy = *t->h; /* the address of the server now */
        pthread_mutex_unlock(&t->mu);
        if (stop) break;
        char name[32];
        snprintf(name, sizeof name, "t-%03d", t->acked);
        char *job = hs_job(&copy, name, "      - {name: STEPS, value: \"6\"}\n      - {name: CKPT, value: \"2\"}\n", NULL);
        hs_resp r = hs_http_ex(&copy, "POST", "/v1/jobs", "token-a", job, "application/yaml", 3 * hs_slow());
        free(job);
        t->attempts++;
        if (r.status == 201 || r.status == 200) {
            t->acked++; /* acknowledged: the next name (a retry of a lost answer gets 200) */
            t->repeated += r.status == 200;
            t->rng ^= t->rng << 13;
            t->rng ^= t->rng >> 7;
            t->rng ^= t->rng << 17;
            hs_sleep(0.02 + (double)(t->rng % 60) / 1000.0);
        } else {
            if (r.status != 0) fprintf(stderr, "torture: %s: %ld %s\n", name, r.status, r.body);
            t->refused++;
            hs_sleep(0.02);
        }
        hs_resp_free(&r);
    }
    return NULL;
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Every acknowledged job t-000 .. is listed exactly once (all pages). */
static void check_listed_once(hs *h, int n_jobs)
{
    json_t *names = hs_listed_names(h, 37);
    for (int k = 0; k < n_jobs; k++) {
        char name[32];
        snprintf(name, sizeof name, "t-%03d", k);
        json_int_t seen = json_integer_value(json_object_get(names, name));
        if (seen != 1) fprintf(stderr, "%s is listed %d times\n", name, (int)seen);
        assert_int_equal(seen, 1);
    }
    json_decref(names);
}

/* No job's runs overlap; every acknowledged job ran and succeeded. */
static void check_runs(hs *h, int n_jobs)
{
    hs_run *runs;
    size_t n = hs_read_runs(h, &runs);
    for (size_t i = 0; i < n; i++) {
        if (runs[i].stop <= 0) { /* every trainer ended, and said so */
            fprintf(stderr, "%s attempt %d (pid %ld) started and never recorded its end:\n",
                    runs[i].job, runs[i].attempt, runs[i].pid);
            const char *slash = strchr(runs[i].job, '/');
            char *ev = hs_events(h, "token-a", slash ? slash + 1 : runs[i].job);
            fprintf(stderr, "%s", ev);
            free(ev);
            hs_print_log(h);
        }
        assert_true(runs[i].stop > 0);
        for (size_t k = i + 1; k < n; k++) {
            if (strcmp(runs[i].job, runs[k].job) != 0) continue;
            if (hs_overlap(&runs[i], &runs[k]))
                fprintf(stderr, "%s ran twice at once: attempts %d and %d\n", runs[i].job,
                        runs[i].attempt, runs[k].attempt);
            assert_false(hs_overlap(&runs[i], &runs[k]));
        }
    }
    for (int k = 0; k < n_jobs; k++) {
        char job[64];
        snprintf(job, sizeof job, "team-a/t-%03d", k);
        assert_true(count_runs(runs, n, job) >= 1);
    }
    free(runs);
}

static void test_torture(void **state)
{
    (void)state;
    const char *env = getenv("LATHE_TORTURE_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) * 2654435761u + (uint64_t)getpid();
    if (!seed) seed = 1;
    fprintf(stderr, "torture seed %llu (LATHE_TORTURE_SEED to replay)\n", (unsigned long long)seed);
    uint64_t rng = seed;
    hs h;
    hs_init(&h, 4, NULL);
    assert_true(hs_start(&h));
    torture t = {.h = &h, .max_jobs = 80, .rng = seed * 7 + 1};
    pthread_mutex_init(&t.mu, NULL);
    pthread_t th;
    pthread_create(&th, NULL, submitter, &t);
    int kills = 12;
    for (int k = 0; k < kills; k++) {
        hs_sleep((0.05 + (double)(next_rand(&rng) % 1000) / 1000.0 * 0.45) * hs_slow());
        pthread_mutex_lock(&t.mu);
        hs_kill(&h, SIGKILL);
        pthread_mutex_unlock(&t.mu);
        hs_sleep((double)(next_rand(&rng) % 100) / 1000.0);
        pthread_mutex_lock(&t.mu);
        bool up = hs_start(&h);
        pthread_mutex_unlock(&t.mu);
        if (!up) hs_print_log(&h);
        assert_true(up);
    }
    pthread_mutex_lock(&t.mu);
    t.stop = true;
    pthread_mutex_unlock(&t.mu);
    pthread_join(th, NULL);
    fprintf(stderr, "torture: %d kills; %d submissions acknowledged (%d of them answered 200: stored "
                    "before a kill, acknowledged on the retry) in %d requests, %d unanswered\n",
            kills, t.acked, t.repeated, t.attempts, t.refused);
    assert_true(t.acked >= 10);
    for (int k = 0; k < t.acked; k++) {
        char name[32];
        snprintf(name, sizeof name, "t-%03d", k);
        if (!hs_wait_state(&h, "token-a", name, "succeeded", 60)) {
            char *ev = hs_events(&h, "token-a", name);
            fprintf(stderr, "%s did not succeed:\n%s", name, ev);
            free(ev);
            hs_print_log(&h);
            fail();
        }
    }
    check_listed_once(&h, t.acked);
    check_runs(&h, t.acked);
    /* the last server's set of active jobs never needed a fix */
    assert_true(hs_metric(&h, "lathe_controller_reload_fixes_total") == 0);
    pthread_mutex_destroy(&t.mu);
    hs_finish(&h);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_running),
        cmocka_unit_test(test_torture),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
