/* test_store_usage.c: schema 4: an attempt's usage (GPUs, price, what it
 * cost), the attempts that ran in a window of time with their job's plan,
 * attempts written before schema 4 (their GPUs and price derived), and a
 * job's GPU samples (replaced at the same time, thinned, summarised, gone
 * with the job). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store_test_util.h"

#include <sqlite3.h>

typedef su_db fx;

static double fake_now;
static double clock_fn(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    if (!su_db_open(f)) return -1;
    fake_now = 1000;
    store_set_clock(f->st, clock_fn, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    su_db_close(f);
    free(f);
    return 0;
}

static int64_t submit_plan(store *st, const char *team, const char *name, const char *exp,
                           const char *plan)
{
    su_req b;
    su_make_req(&b, team, name, 0);
    b.r.experiment = exp;
    b.r.plan_json = plan;
    int64_t id = 0;
    assert_int_equal(store_submit(st, &b.r, &id), STORE_OK);
    return id;
}

/* An attempt from start to end at the store's clock. */
static void run_attempt(store *st, int64_t id, double start, double end, double gpus,
                        double price)
{
    int n;
    fake_now = start;
    assert_int_equal(store_tx_begin(st), STORE_OK);
    assert_int_equal(store_attempt_add(st, id, "node-1", "[0,1]", &n), STORE_OK);
    store_attempt_usage u = {gpus, price, NAN, NAN};
    assert_int_equal(store_attempt_set_usage(st, id, n, &u), STORE_OK);
    assert_int_equal(store_tx_commit(st), STORE_OK);
    if (end <= 0) return;
    fake_now = end;
    assert_int_equal(store_attempt_finish(st, id, n, 0, 0, "succeeded"), STORE_OK);
    double gs = (end - start) * gpus;
    store_attempt_usage e = {NAN, NAN, gs, gs / 3600 * price};
    assert_int_equal(store_attempt_set_usage(st, id, n, &e), STORE_OK);
}

static const store_usage_row *row_of(const store_usage_row *r, size_t n, const char *name,
                                     int attempt)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(r[i].name, name) && r[i].attempt == attempt) return &r[i];
    return NULL;
}

static void test_attempt_usage_and_window(void **state)
{
    fx *f = *state;
    const char *plan = "{\"gpu_hours\":2.5,\"cost\":5.0,\"cost_basis\":\"run\"}";
    int64_t a = submit_plan(f->st, "t1", "a", "sweep", plan);
    int64_t b = submit_plan(f->st, "t1", "b", NULL, "{\"gpu_hours\":1,\"cost\":2,\"cost_basis\":\"per 1000 steps\"}");
    int64_t c = submit_plan(f->st, "t2", "c", NULL, NULL);
    int64_t d = submit_plan(f->st, "t2", "cpu", NULL, NULL);
    run_attempt(f->st, a, 1000, 4600, 2, 2.0);  /* 2 GPUs for an hour */
    run_attempt(f->st, a, 5000, 0, 0.5, 2.0);   /* half a GPU, running */
    run_attempt(f->st, b, 2000, 2600, 1, 3.0);
    run_attempt(f->st, c, 8000, 9000, 4, 1.0);
    int n;
    assert_int_equal(store_attempt_add(f->st, d, "cpu", NULL, &n), STORE_OK); /* no GPU */
    store_attempt at;
    assert_int_equal(store_attempt_get(f->st, a, 1, &at), STORE_OK);
    assert_true(at.gpus == 2 && at.price == 2.0);
    assert_true(fabs(at.gpu_seconds - 7200) < 1e-9 && fabs(at.cost - 4.0) < 1e-9);
    store_attempt_clear(&at);
    assert_int_equal(store_attempt_get(f->st, a, 2, &at), STORE_OK);
    assert_true(at.gpus == 0.5 && isnan(at.gpu_seconds) && isnan(at.cost));
    store_attempt_clear(&at);
    store_attempt_usage u = {1, 1, NAN, NAN};
    assert_int_equal(store_attempt_set_usage(f->st, a, 9, &u), STORE_NOT_FOUND);

    store_usage_row *r;
    size_t rn;
    assert_int_equal(store_usage_list(f->st, NULL, 0, 0, &r, &rn), STORE_OK);
    assert_int_equal(rn, 4); /* the CPU attempt is left out */
    const store_usage_row *a1 = row_of(r, rn, "a", 1), *a2 = row_of(r, rn, "a", 2);
    assert_non_null(a1);
    assert_non_null(a2);
    assert_string_equal(a1->team, "t1");
    assert_string_equal(a1->experiment, "sweep");
    assert_true(a1->planned_cost == 5.0 && a1->planned_gpu_hours == 2.5);
    assert_true(a2->ended_at == 0 && isnan(a2->cost));
    const store_usage_row *b1 = row_of(r, rn, "b", 1);
    assert_true(isnan(b1->planned_cost)); /* an estimate per 1000 steps is not the run's */
    assert_null(row_of(r, rn, "c", 1)->experiment);
    store_usage_free(r, rn);
    /* a re-plan changes the estimate (a trigger keeps it beside plan_json) */
    store_job_update up = {.set = STORE_SET_PLAN, .spec_json = "{}",
                           .plan_json = "{\"gpu_hours\":4,\"cost\":8,\"cost_basis\":\"run\"}"};
    assert_int_equal(store_job_update_fields(f->st, b, 0, &up, NULL), STORE_OK);
    assert_int_equal(store_usage_list(f->st, "t1", 0, 0, &r, &rn), STORE_OK);
    assert_true(row_of(r, rn, "b", 1)->planned_cost == 8 && row_of(r, rn, "b", 1)->planned_gpu_hours == 4);
    assert_true(row_of(r, rn, "a", 1)->planned_cost == 5.0);
    store_usage_free(r, rn);

    /* A window: attempts that ended before it or started after it are out. */
    assert_int_equal(store_usage_list(f->st, NULL, 4700, 7000, &r, &rn), STORE_OK);
    assert_int_equal(rn, 1);
    assert_string_equal(r[0].name, "a");
    assert_int_equal(r[0].attempt, 2);
    store_usage_free(r, rn);
    assert_int_equal(store_usage_list(f->st, "t2", 0, 0, &r, &rn), STORE_OK);
    assert_int_equal(rn, 1);
    assert_string_equal(r[0].name, "c");
    store_usage_free(r, rn);
}

/* A database of schema 3 with an ended attempt: after the upgrade its
 * usage is derived from gpus_json and the job's totals. */
static void test_upgrade_from_version_3(void **state)
{
    fx *f = *state;
    int64_t id = submit_plan(f->st, "t1", "old", NULL, "{\"gpu_hours\":2,\"cost\":7,\"cost_basis\":\"run\"}");
    int n;
    assert_int_equal(store_attempt_add(f->st, id, "node-1", "[0,1,2]", &n), STORE_OK);
    fake_now = 1000 + 3600;
    assert_int_equal(store_attempt_finish(f->st, id, n, 0, 0, "succeeded"), STORE_OK);
    store_job_update upd = {.set = STORE_SET_USAGE, .gpu_seconds = 3 * 3600, .cost = 6};
    assert_int_equal(store_job_update_fields(f->st, id, 0, &upd, NULL), STORE_OK);
    store_close(f->st);
    f->st = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  SU_UNDO_V4 " PRAGMA user_version = 3",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    char err[512];
    f->st = store_open(f->path, NULL, err, sizeof err);
    assert_non_null(f->st);
    store_usage_row *r;
    size_t rn;
    assert_int_equal(store_usage_list(f->st, NULL, 0, 0, &r, &rn), STORE_OK);
    assert_int_equal(rn, 1);
    assert_true(r[0].gpus == 3);
    assert_true(fabs(r[0].price - 2.0) < 1e-12); /* 6 over 3 GPU-hours */
    assert_true(isnan(r[0].gpu_seconds));
    assert_true(r[0].planned_cost == 7 && r[0].planned_gpu_hours == 2); /* filled in by the migration */
    store_usage_free(r, rn);
}

static void test_gpu_samples(void **state)
{
    fx *f = *state;
    int64_t id = submit_plan(f->st, "t1", "g", NULL, NULL);
    int64_t other = submit_plan(f->st, "t1", "h", NULL, NULL);
    store_gpu_samples_add(f->st, NULL, 0);
    store_gpu_sample s[50];
    for (int i = 0; i < 50; i++)
        s[i] = (store_gpu_sample){id, 1, 100.0 + i, 2, 40.0 + i, 1e9 * (i % 7), 80e9, 300, 60 + i % 5};
    assert_int_equal(store_gpu_samples_add(f->st, s, 50), STORE_OK);
    store_gpu_sample o = {other, 1, 100, 1, 99, 5e9, 80e9, NAN, NAN};
    assert_int_equal(store_gpu_samples_add(f->st, &o, 1), STORE_OK);
    /* the same time again replaces */
    s[49].util = 100;
    assert_int_equal(store_gpu_samples_add(f->st, &s[49], 1), STORE_OK);
    store_gpu_sample bad = {id, 1, 500, 0, 1, 1, 1, 1, 1};
    assert_int_equal(store_gpu_samples_add(f->st, &bad, 1), STORE_INVALID);
    store_gpu_summary sum;
    assert_int_equal(store_gpu_summary_get(f->st, id, &sum), STORE_OK);
    assert_int_equal(sum.samples, 50);
    double util = 0;
    for (int i = 0; i < 49; i++) util += 40.0 + i;
    util = (util + 100) / 50;
    assert_true(fabs(sum.util_avg - util) < 1e-9);
    assert_true(sum.mem_peak == 6e9);
    assert_true(sum.first_at == 100 && sum.last_at == 149);
    store_gpu_sample *l;
    size_t n;
    assert_int_equal(store_gpu_samples_list(f->st, id, 0, &l, &n), STORE_OK);
    assert_int_equal(n, 50);
    assert_true(l[0].at == 100 && l[49].util == 100 && l[0].gpus == 2);
    free(l);
    assert_int_equal(store_gpu_samples_list(f->st, id, 10, &l, &n), STORE_OK);
    assert_int_equal(n, 10);
    assert_true(l[0].at == 100 && l[9].at == 149);
    free(l);
    assert_int_equal(store_gpu_summary_get(f->st, 4242, &sum), STORE_OK);
    assert_int_equal(sum.samples, 0);
    assert_true(isnan(sum.util_avg));
    /* gone with the job */
    store_event ev = {"admin", "cancelled", "x", NULL};
    assert_int_equal(store_job_transition(f->st, id, STORE_QUEUED, STORE_CANCELLED, NULL, &ev, NULL),
                     STORE_OK);
    assert_int_equal(store_job_delete(f->st, id), STORE_OK);
    assert_int_equal(store_gpu_samples_list(f->st, id, 0, &l, &n), STORE_OK);
    assert_int_equal(n, 0);
    free(l);
    assert_int_equal(store_gpu_samples_list(f->st, other, 0, &l, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_true(isnan(l[0].power));
    free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_attempt_usage_and_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_from_version_3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_samples, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
