/* test_sim.c: the trace simulator: the trace CSV (a good file, bad files
 * with their file:line:column errors, writing and reading back),
 * trace-gen (reproducible, shaped as promised), small simulations whose
 * metrics are worked out by hand, and two properties over many jobs: lathe
 * starves nobody where greedy does, and an EASY reservation is never
 * broken when estimates are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA LATHE_TEST_DATA

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-6 * (1 + fabs(b));
}

/* The first diagnostic at this line whose text contains `text`. */
static bool has_diag(const diag_list *d, int line, const char *path, const char *text)
{
    for (size_t i = 0; i < d->len; i++) {
        const diag *x = &d->items[i];
        sb s;
        sb_init(&s);
        diag_format(x, &s);
        bool ok = x->line == line && (!path || (x->path && strcmp(x->path, path) == 0)) &&
                  strstr(sb_str(&s), text);
        sb_free(&s);
        if (ok) return true;
    }
    return false;
}

static void dump(const diag_list *d)
{
    for (size_t i = 0; i < d->len; i++) {
        sb s;
        sb_init(&s);
        diag_format(&d->items[i], &s);
        print_message("%s\n", sb_str(&s));
        sb_free(&s);
    }
}

/* ---- the trace CSV ---- */

static sched_cluster *one_node(int gpus);
static void simulate(const sched_cluster *c, const sim_bound *b, sched_policy pol, sim_stats *st);

static void test_trace_good(void **state)
{
    (void)state;
    sim_trace t;
    sim_trace_init(&t);
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(sim_trace_load(DATA "/good.csv", &t, &d), 0);
    assert_int_equal(t.n, 3);
    assert_string_equal(t.jobs[0].id, "j1");
    assert_true(t.jobs[0].gpus == 8 && t.jobs[0].duration == 3600 && t.jobs[0].checkpoint == 1800);
    assert_string_equal(t.jobs[0].gpu_type, "A100-80GB");
    assert_string_equal(t.jobs[0].team, "team-a");
    assert_string_equal(t.jobs[0].priority, "high");
    assert_string_equal(t.jobs[1].id, "j,2"); /* quoted */
    assert_true(t.jobs[1].fraction == 0.25 && t.jobs[1].duration == 120.5 && t.jobs[1].estimate == 100);
    assert_null(t.jobs[1].gpu_type);
    assert_true(t.jobs[2].submit == 120 && t.jobs[2].gpus == 16 && t.jobs[2].estimate == 8000);
    assert_null(t.jobs[2].team);
    assert_int_equal(t.jobs[2].line, 6);
    /* written and read back: the same jobs */
    char *csv = sim_trace_to_csv(&t);
    sim_trace u;
    sim_trace_init(&u);
    assert_int_equal(sim_trace_parse("again", csv, strlen(csv), &u, &d), 0);
    assert_int_equal(u.n, t.n);
    for (size_t i = 0; i < t.n; i++) {
        assert_string_equal(u.jobs[i].id, t.jobs[i].id);
        assert_true(u.jobs[i].submit == t.jobs[i].submit && u.jobs[i].duration == t.jobs[i].duration);
        assert_true(u.jobs[i].fraction == t.jobs[i].fraction && u.jobs[i].estimate == t.jobs[i].estimate);
    }
    free(csv);
    sim_trace_free(&u);
    sim_trace_free(&t);
    diag_list_free(&d);
}

typedef struct bad {
    const char *file;
    int line;
    const char *column;
    const char *text;
    bool strict;
} bad;

static void test_trace_bad(void **state)
{
    (void)state;
    static const bad cases[] = {
        {"missing_column.csv", 1, "num_gpus", "required column missing from the header", false},
        {"bad_values.csv", 3, NULL, "wrong number of fields (expected 4, as in the header, found 3)", false},
        {"bad_values.csv", 4, "submit_time_s", "not a valid value (expected a number >= 0, found \"x\")", false},
        {"bad_values.csv", 5, "duration_s", "expected a number >= 0, found \"-1\"", false},
        {"bad_values.csv", 6, "num_gpus", "expected a whole number >= 1, found \"1.5\"", false},
        {"bad_fraction.csv", 3, "gpu_fraction", "a GPU fraction with more than one GPU", false},
        {"bad_fraction.csv", 4, "gpu_fraction", "a GPU fraction above 1", false},
        {"bad_fraction.csv", 5, "job_id", "job id used twice (found \"j1\", first on line 2)", true},
        {"typo_column.csv", 1, "submit_tme_s", "did you mean 'submit_time_s'?", false},
        {"bad_quote.csv", 2, NULL, "a quoted field is not closed on its line", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim_trace t;
        sim_trace_init(&t);
        t.strict = cases[i].strict;
        diag_list d;
        diag_list_init(&d);
        char path[512];
        snprintf(path, sizeof path, "%s/%s", DATA, cases[i].file);
        assert_true(sim_trace_load(path, &t, &d) > 0);
        if (!has_diag(&d, cases[i].line, cases[i].column, cases[i].text)) {
            dump(&d);
            fail_msg("%s: no diagnostic at line %d containing \"%s\"", cases[i].file, cases[i].line, cases[i].text);
        }
        assert_non_null(strstr(d.items[0].file, cases[i].file));
        sim_trace_free(&t);
        diag_list_free(&d);
    }
    /* an empty file and a missing one */
    sim_trace t;
    sim_trace_init(&t);
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(sim_trace_parse("empty.csv", "", 0, &t, &d), 1);
    assert_true(has_diag(&d, 1, NULL, "the trace is empty"));
    assert_int_equal(sim_trace_load(DATA "/no-such-file.csv", &t, &d), 1);
    sim_trace_free(&t);
    diag_list_free(&d);
}

/* Found by fuzz_trace: a NUL byte inside a field cut the id short (and
 * the cut id lost its trailing blank when read back), and an id that starts
 * with '#' was written unquoted, so the line read back as a comment. */
static void test_trace_fuzz_regressions(void **state)
{
    (void)state;
    sim_trace t;
    sim_trace_init(&t);
    diag_list d;
    diag_list_init(&d);
    static const char nul[] = "job_id,submit_time_s,duration_s,num_gpus\nab \0cd,0,10,1\nok,0,10,1\n";
    assert_int_equal(sim_trace_parse("nul.csv", nul, sizeof nul - 1, &t, &d), 1);
    assert_true(has_diag(&d, 2, NULL, "a NUL byte: this is binary data, not CSV text"));
    assert_int_equal(t.n, 1);
    assert_string_equal(t.jobs[0].id, "ok");
    sim_trace_free(&t);
    diag_list_free(&d);

    sim_trace_init(&t);
    diag_list_init(&d);
    const char *hash = "job_id,submit_time_s,duration_s,num_gpus,team\n\"#1\",0,10,1,\"ab\r\"\n";
    assert_int_equal(sim_trace_parse("hash.csv", hash, strlen(hash), &t, &d), 0);
    char *csv = sim_trace_to_csv(&t);
    sim_trace u;
    sim_trace_init(&u);
    assert_int_equal(sim_trace_parse("again", csv, strlen(csv), &u, &d), 0);
    assert_int_equal(u.n, 1);
    assert_string_equal(u.jobs[0].id, "#1");
    assert_string_equal(u.jobs[0].team, "ab\r");
    free(csv);
    sim_trace_free(&u);
    sim_trace_free(&t);
    diag_list_free(&d);
}

/* Real traces are messy (issue 15): each odd kind of row is replayed and
 * counted with the line of its first row; with strict it is an error at
 * file:line:column naming the field. */
static const char odd_csv[] =
    "job_id,submit_time_s,duration_s,num_gpus,gpu_milli,duration_censored\n"
    "a,10,0,1,,0\n"      /* 2: zero duration */
    "b,20,0.5,1,,0\n"    /* 3: very short */
    "c,5,100,1,,0\n"     /* 4: before the row above */
    "a,30,100,1,,0\n"    /* 5: id of line 2 again */
    "e,40,100,1,,1\n"    /* 6: censored */
    "f,50,100,1,460,0\n" /* 7: 0.46 of a GPU */
    "g,60,0,2,1000,\n";  /* 8: zero again */

static void test_trace_odd_rows(void **state)
{
    (void)state;
    sim_trace t;
    sim_trace_init(&t);
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(sim_trace_parse("odd.csv", odd_csv, strlen(odd_csv), &t, &d), 0);
    assert_int_equal(t.n, 7);
    static const size_t want[SIM_N_ODD] = {2, 1, 1, 1, 1, 1};
    static const int line[SIM_N_ODD] = {2, 3, 5, 4, 6, 7};
    for (int k = 0; k < SIM_N_ODD; k++) {
        if (t.odd[k] != want[k] || t.odd_line[k] != line[k])
            fail_msg("%s: %zu rows from line %d, expected %zu from line %d", sim_odd_name((sim_odd)k), t.odd[k],
                     t.odd_line[k], want[k], line[k]);
    }
    assert_true(t.jobs[4].censored && !t.jobs[3].censored);
    assert_true(near(t.jobs[5].fraction, 0.46));
    /* the summary names every kind */
    sb s;
    sb_init(&s);
    sim_trace_summary(&t, NULL, &s);
    assert_non_null(strstr(sb_str(&s), "odd.csv: 2 jobs with duration 0: they start and end at once (first: line 2)"));
    assert_non_null(strstr(sb_str(&s), "1 job with a censored duration"));
    sb_free(&s);
    /* written and read back: the same jobs, censored ones still censored */
    char *csv = sim_trace_to_csv(&t);
    sim_trace u;
    sim_trace_init(&u);
    assert_int_equal(sim_trace_parse("again", csv, strlen(csv), &u, &d), 0);
    assert_int_equal(u.n, 7);
    assert_true(u.jobs[4].censored && u.odd[SIM_ODD_CENSORED] == 1 && near(u.jobs[5].fraction, 0.46));
    free(csv);
    sim_trace_free(&u);
    /* replayed: every job ends, the zero-second ones at their submit time */
    sched_cluster *c = sched_cluster_new();
    sched_cluster_add_type(c, "gpu", 80 * GIB, 0);
    sched_cluster_add_node(c, "n1", "r1", 0, 8, NULL, SCHED_NODE_READY);
    sim_bound b;
    assert_int_equal(sim_bind(&t, c, &b, &d), 0);
    assert_int_equal(b.too_wide, 0);
    for (int p = 0; p < SCHED_N_POLICIES; p++) {
        sim_stats st;
        sched_config cfg;
        sched_config_default(&cfg, (sched_policy)p);
        char err[256];
        assert_int_equal(sim_run(c, &b, &cfg, NULL, &st, err, sizeof err), 0);
        assert_int_equal(st.completed, 7);
        assert_true(st.per_job[0].finish == 10 && st.per_job[6].finish == 60);
        sim_stats_free(&st);
    }
    sim_bound_free(&b);
    sched_cluster_free(c);
    sim_trace_free(&t);
    diag_list_free(&d);

    /* strict: each of them is an error at its line and field */
    sim_trace_init(&t);
    t.strict = true;
    diag_list_init(&d);
    /* (line 5's id is no duplicate then: line 2 was refused) */
    assert_int_equal(sim_trace_parse("odd.csv", odd_csv, strlen(odd_csv), &t, &d), 5);
    assert_true(has_diag(&d, 2, NULL, "odd.csv:2:6: error: duration_s: a zero duration (found \"0\")"));
    assert_true(has_diag(&d, 3, NULL, "duration_s: a duration below one second"));
    assert_true(has_diag(&d, 4, NULL, "odd.csv:4:3: error: submit_time_s: submitted before a row above it"));
    assert_true(has_diag(&d, 6, NULL, "duration_censored: a censored duration"));
    assert_true(has_diag(&d, 8, NULL, "duration_s: a zero duration"));
    assert_true(has_diag(&d, 2, NULL, "without --strict it is replayed and counted"));
    sim_trace_free(&t);
    diag_list_free(&d);
}

/* A job wider than the cluster is refused by the scheduler and counted; with
 * strict it is an error at its line. Bad gpu_milli and duration_censored
 * values are errors either way. */
static void test_trace_too_wide(void **state)
{
    (void)state;
    const char *csv = "job_id,submit_time_s,duration_s,num_gpus\nok,0,10,8\nwide,0,10,16\nwider,1,10,32\n";
    sched_cluster *c = one_node(8);
    sim_trace t;
    sim_trace_init(&t);
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(sim_trace_parse("wide.csv", csv, strlen(csv), &t, &d), 0);
    sim_bound b;
    assert_int_equal(sim_bind(&t, c, &b, &d), 0);
    assert_true(b.too_wide == 2 && b.too_wide_line == 3);
    sb s;
    sb_init(&s);
    sim_trace_summary(&t, &b, &s);
    assert_non_null(strstr(sb_str(&s), "2 jobs ask for more GPUs than the cluster has: refused"));
    sb_free(&s);
    sim_stats st;
    simulate(c, &b, SCHED_LATHE, &st);
    assert_true(st.completed == 1 && st.rejected == 2);
    sim_stats_free(&st);
    sim_bound_free(&b);
    t.strict = true;
    assert_int_equal(sim_bind(&t, c, &b, &d), 2);
    assert_true(has_diag(&d, 3, NULL, "num_gpus: more GPUs than the cluster has (found 16, the cluster has 8)"));
    sim_bound_free(&b);
    sim_trace_free(&t);
    diag_list_free(&d);

    static const char *const bad_rows[][2] = {
        {"job_id,submit_time_s,duration_s,num_gpus,gpu_milli\na,0,1,1,1500\n", "more than one GPU in thousandths"},
        {"job_id,submit_time_s,duration_s,num_gpus,gpu_milli\na,0,1,2,500\n", "a GPU fraction with more than one GPU"},
        {"job_id,submit_time_s,duration_s,num_gpus,gpu_milli,gpu_fraction\na,0,1,1,500,0.5\n", "both gpu_milli and gpu_fraction"},
        {"job_id,submit_time_s,duration_s,num_gpus,duration_censored\na,0,1,1,maybe\n", "duration_censored: not a valid value"},
    };
    for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
        sim_trace_init(&t);
        diag_list_init(&d);
        assert_int_equal(sim_trace_parse("bad.csv", bad_rows[i][0], strlen(bad_rows[i][0]), &t, &d), 1);
        if (!has_diag(&d, 2, NULL, bad_rows[i][1])) {
            dump(&d);
            fail_msg("no error \"%s\"", bad_rows[i][1]);
        }
        sim_trace_free(&t);
        diag_list_free(&d);
    }
    sched_cluster_free(c);
}

/* The estimate modes: exact, noise (seeded, the same for the same seed),
 * limit (a round limit at least 3x the run). */
static void test_estimates(void **state)
{
    (void)state;
    assert_true(sim_round_limit(0) == 1800 && sim_round_limit(600) == 1800 && sim_round_limit(601) == 3600);
    assert_true(sim_round_limit(3 * 3600) == 12 * 3600 && sim_round_limit(20 * 86400) == 60 * 86400);
    const char *csv = "job_id,submit_time_s,duration_s,num_gpus,estimate_s\na,0,100,1,7\nb,0,4000,1,\n";
    sim_trace t;
    sim_trace_init(&t);
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(sim_trace_parse("e.csv", csv, strlen(csv), &t, &d), 0);
    sim_trace_set_estimates(&t, SIM_EST_TRACE, 0, 1);
    assert_true(t.jobs[0].estimate == 7 && t.jobs[1].estimate == 0);
    sim_trace_set_estimates(&t, SIM_EST_LIMIT, 0, 1);
    assert_true(t.jobs[0].estimate == 1800 && t.jobs[1].estimate == 4 * 3600);
    sim_trace_set_estimates(&t, SIM_EST_NOISE, 0.5, 3);
    double e0 = t.jobs[0].estimate, e1 = t.jobs[1].estimate;
    assert_true(e0 > 0 && e0 != 100 && e1 > 0 && e1 != 4000);
    sim_trace_set_estimates(&t, SIM_EST_NOISE, 0.5, 3);
    assert_true(t.jobs[0].estimate == e0 && t.jobs[1].estimate == e1);
    sim_trace_set_estimates(&t, SIM_EST_EXACT, 0, 1);
    assert_true(t.jobs[0].estimate == 0 && t.jobs[1].estimate == 0);
    sim_trace_free(&t);
    diag_list_free(&d);
}

/* The converters (found by fuzz_trace_convert: a GPU count of 5.6e45 was
 * cast to int, undefined behaviour): a count that is not a whole number up
 * to 1,000,000 is an error naming the line and column; part of one GPU is a
 * fraction; 0 GPUs is left out and counted. */
static void test_convert(void **state)
{
    (void)state;
    const char *csv = "job_id,submit_time_s,duration_s,num_gpus\n"
                      "a,100,10,5555555555555555555555555555555555555555555555\n"
                      "b,100,10,2.5\n"
                      "c,200,10,0.25\n"
                      "d,300,10,0\n"
                      "e,150,10,4\n";
    sim_trace t;
    sim_trace_init(&t);
    diag_list d;
    diag_list_init(&d);
    sim_convert_stats st;
    assert_int_equal(sim_convert(SIM_FROM_LINGJUN, "l.csv", csv, strlen(csv), &t, &st, &d), 2);
    assert_true(has_diag(&d, 2, NULL, "l.csv:2:10: error: num_gpus|num_gpu|gpu_num: not a number of GPUs"));
    assert_true(has_diag(&d, 3, NULL, "not a number of GPUs (expected a whole number from 0 to 1,000,000"));
    assert_true(st.rows == 5 && st.kept == 2 && st.no_gpu == 1 && t.n == 2);
    /* sorted, from 0 */
    assert_string_equal(t.jobs[0].id, "e");
    assert_true(t.jobs[0].submit == 0 && t.jobs[0].gpus == 4);
    assert_true(t.jobs[1].submit == 50 && t.jobs[1].gpus == 1 && t.jobs[1].fraction == 0.25);
    sim_trace_free(&t);
    diag_list_free(&d);

    /* a quota table naming a team twice (found by fuzz_trace_convert: the
     * error came with teams) gives an error and no team */
    const char *q = "date,vcA,40,vca,total\n2020-04-02,30,10,5,45\n";
    char **names;
    double *gpus;
    int n;
    diag_list_init(&d);
    assert_int_equal(sim_quota_parse("q.csv", q, strlen(q), &names, &gpus, &n, &d), 1);
    assert_true(has_diag(&d, 1, NULL, "two teams with one lowercase name (found \"vca\")"));
    assert_true(n == 0 && names == NULL && gpus == NULL);
    diag_list_free(&d);
    q = "date,vcA,,total\n2020-04-02,30,10,40\n"; /* and one without a name */
    diag_list_init(&d);
    assert_int_equal(sim_quota_parse("q.csv", q, strlen(q), &names, &gpus, &n, &d), 1);
    assert_true(has_diag(&d, 1, NULL, "q.csv:1:10: error: a column without a team name"));
    assert_true(n == 0 && names == NULL);
    diag_list_free(&d);
    q = "date,vcA,vcB,total\n2020-04-01,30,0,30\n2020-04-02,30,10,40\n";
    diag_list_init(&d);
    assert_int_equal(sim_quota_parse("q.csv", q, strlen(q), &names, &gpus, &n, &d), 0);
    assert_true(n == 2 && strcmp(names[0], "vca") == 0 && gpus[0] == 30 && gpus[1] == 5);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(gpus);
    diag_list_free(&d);
}

/* ---- trace-gen ---- */

static void test_gen_reproducible(void **state)
{
    (void)state;
    sim_gen_opts o;
    sim_gen_defaults(&o);
    o.jobs = 3000;
    o.gpus = 256;
    sim_trace a, b, c;
    sim_gen(&o, &a);
    sim_gen(&o, &b);
    o.seed = 2;
    sim_gen(&o, &c);
    char *x = sim_trace_to_csv(&a), *y = sim_trace_to_csv(&b), *z = sim_trace_to_csv(&c);
    assert_string_equal(x, y);
    assert_true(strcmp(x, z) != 0);
    /* the promised shape: mostly 1-GPU, a tail of 8-64-GPU gangs, sorted,
     * four teams, some GPU fractions, durations from minutes to days */
    size_t one = 0, big = 0, frac = 0, teams[5] = {0};
    double lo = 1e18, hi = 0;
    for (size_t i = 0; i < a.n; i++) {
        const sim_job *j = &a.jobs[i];
        one += j->gpus == 1;
        big += j->gpus >= 8;
        frac += j->fraction < 1;
        if (i) assert_true(j->submit >= a.jobs[i - 1].submit);
        if (j->duration < lo) lo = j->duration;
        if (j->duration > hi) hi = j->duration;
        assert_non_null(j->team);
        teams[j->team[5] - '0']++;
    }
    assert_int_equal(a.n, 3000);
    assert_true(one > a.n * 0.6 && one < a.n * 0.8);
    assert_true(big > a.n * 0.05 && big < a.n * 0.2);
    assert_true(frac > 0);
    assert_true(lo <= 600 && hi >= 86400);
    assert_true(teams[1] > teams[2] && teams[2] > teams[3] && teams[3] > teams[4]);
    /* the cluster it was sized for is valid YAML for the spec part */
    char *yaml = sim_gen_cluster_yaml(&o);
    assert_non_null(strstr(yaml, "kind: Cluster"));
    assert_non_null(strstr(yaml, "A100-80GB: 102")); /* team-1: 4/10 of 256 */
    free(yaml);
    free(x);
    free(y);
    free(z);
    sim_trace_free(&a);
    sim_trace_free(&b);
    sim_trace_free(&c);
}

/* ---- small simulations, worked out by hand ---- */

static sched_cluster *one_node(int gpus)
{
    sched_cluster *c = sched_cluster_new();
    sched_cluster_add_type(c, "A100-80GB", 80 * GIB, 3.6);
    sched_cluster_add_node(c, "n1", "r1", 0, gpus, NULL, SCHED_NODE_READY);
    sched_cluster_add_priority(c, "high", 100, true, false);
    return c;
}

static void load_text(const char *csv, sched_cluster *c, sim_trace *t, sim_bound *b)
{
    diag_list d;
    diag_list_init(&d);
    sim_trace_init(t);
    assert_int_equal(sim_trace_parse("inline.csv", csv, strlen(csv), t, &d), 0);
    assert_int_equal(sim_bind(t, c, b, &d), 0);
    diag_list_free(&d);
}

static void simulate(const sched_cluster *c, const sim_bound *b, sched_policy pol, sim_stats *st)
{
    sched_config cfg;
    sched_config_default(&cfg, pol);
    char err[256];
    assert_int_equal(sim_run(c, b, &cfg, NULL, st, err, sizeof err), 0);
}

static void test_sim_by_hand(void **state)
{
    (void)state;
    /* 4 GPUs. j1: 4 GPUs for 100 s at t=0; j2: 2 GPUs for 50 s at t=0;
     * j3: 2 GPUs for 20 s at t=10.
     * fifo: j1 0-100, then j2 100-150 and j3 100-120.
     * lathe: j2 first (smaller key), j1 reserved at t=50, j3 backfills 10-30,
     *        j1 50-150. */
    const char *csv = "job_id,submit_time_s,duration_s,num_gpus\n"
                      "j1,0,100,4\nj2,0,50,2\nj3,10,20,2\n";
    sched_cluster *c = one_node(4);
    sim_trace t;
    sim_bound b;
    load_text(csv, c, &t, &b);
    sim_stats f, l;
    simulate(c, &b, SCHED_FIFO, &f);
    assert_int_equal(f.completed, 3);
    assert_true(near(f.jct_avg, (100 + 150 + 110) / 3.0));
    assert_true(near(f.jct_median, 110));
    assert_true(near(f.wait_avg, (0 + 100 + 90) / 3.0));
    assert_true(near(f.wait_max, 100));
    assert_true(near(f.makespan, 150));
    assert_true(near(f.busy, 150));
    assert_true(near(f.alloc_rate, (400 + 100 + 40) / (4 * 150.0)));
    /* while jobs wait (0-100): only j1's 4 GPUs */
    assert_true(near(f.waiting, 100) && near(f.alloc_waiting, 1.0));
    /* cost: 540 GPU-seconds at 3.6 per GPU-hour */
    assert_true(near(f.cost, 540 * 3.6 / 3600));
    simulate(c, &b, SCHED_LATHE, &l);
    assert_true(near(l.jct_avg, (150 + 50 + 20) / 3.0));
    assert_true(near(l.wait_avg, 50 / 3.0));
    assert_true(near(l.makespan, 150));
    assert_true(near(l.alloc_rate, 540 / 600.0));
    assert_int_equal(l.preemptions, 0);
    assert_true(l.per_job[0].first_start == 50 && l.per_job[2].first_start == 10);
    sim_stats_free(&f);
    sim_stats_free(&l);
    sim_bound_free(&b);
    sim_trace_free(&t);
    sched_cluster_free(c);
}

static void test_sim_preemption_checkpoint(void **state)
{
    (void)state;
    /* 1 GPU. j1 (1000 s, checkpoint every 100 s) at t=0; at t=650 the
     * high-priority j2 (100 s) arrives: j1 has run 650 s > 10 min, is
     * preempted, keeps 600 s of work and loses 50 s; j2 runs 650-750; j1
     * resumes at 750 with 400 s left and ends at 1150. */
    const char *csv = "job_id,submit_time_s,duration_s,num_gpus,priority,checkpoint_interval_s\n"
                      "j1,0,1000,1,,100\nj2,650,100,1,high,\n";
    sched_cluster *c = one_node(1);
    sim_trace t;
    sim_bound b;
    load_text(csv, c, &t, &b);
    sim_stats s;
    simulate(c, &b, SCHED_LATHE, &s);
    assert_int_equal(s.preemptions, 1);
    assert_true(near(s.lost_gpu_hours, 50 / 3600.0));
    assert_true(near(s.per_job[0].finish, 1150));
    assert_true(near(s.per_job[1].finish, 750));
    assert_true(near(s.per_job[0].wait, 100));
    assert_true(near(s.makespan, 1150));
    assert_true(near(s.alloc_rate, 1.0)); /* always busy, counting the lost 50 s */
    assert_int_equal(s.per_job[0].preemptions, 1);
    sim_stats_free(&s);
    /* fifo never preempts: j2 waits for j1 */
    simulate(c, &b, SCHED_FIFO, &s);
    assert_int_equal(s.preemptions, 0);
    assert_true(near(s.per_job[1].finish, 1100));
    sim_stats_free(&s);
    sim_bound_free(&b);
    sim_trace_free(&t);
    sched_cluster_free(c);
}

static void test_sim_sharing(void **state)
{
    (void)state;
    /* 1 GPU, two jobs asking for half of it: lathe runs them together */
    const char *csv = "job_id,submit_time_s,duration_s,num_gpus,gpu_fraction\n"
                      "a,0,100,1,0.5\nb,0,100,1,0.5\n";
    sched_cluster *c = one_node(1);
    sim_trace t;
    sim_bound b;
    load_text(csv, c, &t, &b);
    sim_stats l, g;
    simulate(c, &b, SCHED_LATHE, &l);
    simulate(c, &b, SCHED_GREEDY, &g);
    assert_true(near(l.makespan, 100) && near(l.jct_avg, 100));
    assert_true(near(l.alloc_rate, 1.0)); /* 0.5 + 0.5 */
    assert_true(near(g.makespan, 200) && near(g.jct_avg, 150));
    /* a whole GPU held, half of it asked for: every policy counts what a job
     * asks for, so greedy's allocation is 0.5 and the other half idles */
    assert_true(near(g.alloc_rate, 0.5));
    sim_stats_free(&l);
    sim_stats_free(&g);
    sim_bound_free(&b);
    sim_trace_free(&t);
    sched_cluster_free(c);
}

/* What the GPUs did while jobs waited: allocated, or idle because reserved
 * for the head, or the unused part of a shared GPU, or no waiting job's
 * shape fits them; the parts add up to one. */
static void test_idle_while_waiting(void **state)
{
    (void)state;
    /* 4 GPUs. j1: 2 GPUs for 100 s, j2: 4 GPUs for 50 s, both at t=0. j2
     * waits 0-100 while 2 GPUs are free: easy reserves them for it at once;
     * greedy leaves them free, and no waiting shape fits them. lathe's
     * rent-reserve rule buys the reservation (2 GPUs idle for 100 s: 200
     * GPU-seconds) once j2 has waited that much on its 4 GPUs, at t=50:
     * free and unusable for 50 s, reserved for the next 50. */
    const char *csv = "job_id,submit_time_s,duration_s,num_gpus\nj1,0,100,2\nj2,0,50,4\n";
    sched_cluster *c = one_node(4);
    sim_trace t;
    sim_bound b;
    load_text(csv, c, &t, &b);
    sim_stats l, e, g, r;
    simulate(c, &b, SCHED_EASY, &e);
    simulate(c, &b, SCHED_GREEDY, &g);
    simulate(c, &b, SCHED_LATHE, &r);
    sched_config eager;
    sched_config_default(&eager, SCHED_LATHE);
    eager.rules &= ~SCHED_RULE_RENT_RESERVE;
    char err[256];
    assert_int_equal(sim_run(c, &b, &eager, NULL, &l, err, sizeof err), 0);
    assert_true(near(l.waiting, 100) && near(g.waiting, 100) && near(e.waiting, 100) && near(r.waiting, 100));
    assert_true(near(l.alloc_waiting, 0.5) && near(l.idle_reserved, 0.5));
    assert_true(near(l.idle_shared, 0) && near(l.idle_fragmented, 0) && near(l.idle_other, 0));
    assert_true(near(e.alloc_waiting, 0.5) && near(e.idle_reserved, 0.5));
    assert_true(near(g.alloc_waiting, 0.5) && near(g.idle_fragmented, 0.5) && near(g.idle_reserved, 0));
    assert_true(near(r.alloc_waiting, 0.5) && near(r.idle_fragmented, 0.25) && near(r.idle_reserved, 0.25));
    sim_stats_free(&l);
    sim_stats_free(&e);
    sim_stats_free(&g);
    sim_stats_free(&r);
    sim_bound_free(&b);
    sim_trace_free(&t);
    sched_cluster_free(c);
    /* 1 GPU: half of it runs a for 100 s; b needs it whole and waits: the
     * other half idles, unusable by b */
    csv = "job_id,submit_time_s,duration_s,num_gpus,gpu_fraction\na,0,100,1,0.5\nb,0,50,1,\n";
    c = one_node(1);
    load_text(csv, c, &t, &b);
    simulate(c, &b, SCHED_LATHE, &l);
    assert_true(near(l.waiting, 100) && near(l.alloc_waiting, 0.5) && near(l.idle_shared, 0.5));
    assert_true(near(l.idle_reserved + l.idle_fragmented + l.idle_other, 0));
    sim_stats_free(&l);
    sim_bound_free(&b);
    sim_trace_free(&t);
    sched_cluster_free(c);
}

/* ---- properties ---- */

/* An 8-GPU job at t=5 and a stream of 1-GPU jobs that always keeps some
 * GPU busy: greedy starts the big job only when the stream ends; lathe
 * once the stream's jobs submitted later than the big job's key minus
 * their own slack are served: aging x (log2(1 + 800/3600) - log2(1 +
 * 50/3600)), about 970 s, plus a drain of 50 s. */
static void test_no_starvation(void **state)
{
    (void)state;
    sb csv;
    sb_init(&csv);
    sb_puts(&csv, "job_id,submit_time_s,duration_s,num_gpus\nbig,5,100,8\n");
    for (int i = 0; i < 2000; i++) sb_printf(&csv, "s%d,%d,50,1\n", i, i * 10);
    sched_cluster *c = one_node(8);
    sim_trace t;
    sim_bound b;
    load_text(sb_str(&csv), c, &t, &b);
    sim_stats g, l;
    simulate(c, &b, SCHED_GREEDY, &g);
    simulate(c, &b, SCHED_LATHE, &l);
    assert_true(g.per_job[0].first_start > 19000);
    sched_config cfg;
    sched_config_default(&cfg, SCHED_LATHE);
    double bound = cfg.aging * (log2(1 + 800 / SCHED_WORK_UNIT) - log2(1 + 50 / SCHED_WORK_UNIT)) + 50 + 10;
    print_message("lathe starts the 8-GPU job at %.0f s (bound %.0f s)\n", l.per_job[0].first_start, 5 + bound);
    assert_true(l.per_job[0].first_start <= 5 + bound);
    assert_true(l.wait_max <= bound + 10);
    assert_int_equal(l.completed, 2001);
    sim_stats_free(&g);
    sim_stats_free(&l);
    sim_bound_free(&b);
    sim_trace_free(&t);
    sched_cluster_free(c);
    sb_free(&csv);
}

/* EASY backfill with exact estimates: the head job starts no later than
 * the start it was first promised. A small event loop over sched_state, on
 * a cluster of 4 nodes x 4 GPUs with 300 random jobs, one in 25 long. With lathe's
 * reserve-tail rule a head's promise may move once, to the reserved start
 * the passing job's decision names, and is kept from then on. Returns how
 * many heads were passed so. */
static int reservation_kept(const sched_config *cfg)
{
    sched_cluster *c = sched_cluster_new();
    sched_cluster_add_type(c, "gpu", 80 * GIB, 1);
    for (int i = 0; i < 4; i++) {
        char n[8];
        snprintf(n, sizeof n, "n%d", i);
        sched_cluster_add_node(c, n, "r", 0, 4, NULL, SCHED_NODE_READY);
    }
    sched_cluster_add_team(c, "default");
    enum { N = 300 };
    sched_job jobs[N];
    double end[N], promised[N];
    bool moved[N];
    int gpus[N][16], passed = 0;
    sim_rng r;
    sim_rng_seed(&r, 42);
    for (int i = 0; i < N; i++) {
        static const int sizes[6] = {1, 1, 2, 3, 4, 8};
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].id = (uint64_t)i + 1;
        int n = sizes[sim_rng_next(&r) % 6];
        jobs[i].replicas = n > 4 ? 2 : 1;
        jobs[i].gpus_per_replica = n > 4 ? 4 : n;
        jobs[i].submit_time = floor(i * 7.0);
        jobs[i].est_duration = 20 + (double)(sim_rng_next(&r) % 400);
        if (i % 25 == 24) jobs[i].est_duration *= 20; /* a few long jobs, which may end last */
        end[i] = -1;
        promised[i] = INFINITY;
        moved[i] = false;
    }
    sched_state *st = sched_state_new(c, cfg);
    sched_result res;
    sched_result_init(&res);
    char err[128];
    int next = 0, done = 0, checked = 0;
    double now = 0;
    while (done < N) {
        double t = next < N ? jobs[next].submit_time : INFINITY;
        for (int i = 0; i < N; i++)
            if (end[i] >= 0 && end[i] < t) t = end[i];
        now = t;
        for (int i = 0; i < N; i++)
            if (end[i] >= 0 && end[i] <= now) {
                sched_state_remove_running(st, jobs[i].id);
                end[i] = -1;
                done++;
            }
        while (next < N && jobs[next].submit_time <= now) sched_state_add_pending(st, &jobs[next++]);
        sched_state_pass(st, now, NULL, NULL, &res);
        if (res.head && res.head_start < promised[res.head - 1]) promised[res.head - 1] = res.head_start;
        for (size_t k = 0; k < res.n; k++) {
            const sched_decision *d = &res.d[k];
            if (d->action != SCHED_START) continue;
            if (d->why.code == SCHED_WHY_TAIL) {
                int h = (int)d->why.other - 1;
                assert_true(cfg->rules & SCHED_RULE_RESERVE_TAIL);
                assert_false(moved[h]); /* once per head */
                assert_true(d->why.when >= now);
                moved[h] = true;
                promised[h] = d->why.when;
                passed++;
            }
        }
        for (size_t k = 0; k < res.n; k++) {
            const sched_decision *d = &res.d[k];
            if (d->action != SCHED_START) continue;
            int i = (int)d->job - 1;
            if (isfinite(promised[i])) {
                assert_true(now <= promised[i] + 1e-9);
                checked++;
            }
            sched_state_remove_pending(st, d->job);
            memcpy(gpus[i], sched_decision_gpus(&res, d), (size_t)d->n_gpus * sizeof(int));
            sched_job j = jobs[i];
            j.start_time = now;
            j.gpus = gpus[i];
            assert_int_equal(sched_state_add_running(st, &j, err, sizeof err), 0);
            end[i] = now + j.est_duration;
        }
    }
    assert_true(checked > 20); /* many heads were promised a start and kept it */
    sched_result_free(&res);
    sched_state_free(st);
    sched_cluster_free(c);
    return passed;
}

static void test_reservation_kept(void **state)
{
    (void)state;
    sched_config cfg;
    sched_config_default(&cfg, SCHED_EASY);
    assert_int_equal(reservation_kept(&cfg), 0);
    /* lathe, with order keys equal to submit times (aging 0, max_slack 0): its rules
     * (end-pack, idle-reserve, oldest-head...) keep the promise too. (With a
     * size slack a later, smaller job may come first in the order and take
     * the reservation over: the slack bounds that, see docs/scheduler.md.) */
    sched_config_default(&cfg, SCHED_LATHE);
    cfg.aging = 0;
    cfg.max_slack = 0;
    int passed = reservation_kept(&cfg);
    printf("reserve-tail moved %d heads' reserved starts, each once\n", passed);
    assert_true(passed > 0); /* the rule was exercised */
    cfg.rules &= ~SCHED_RULE_RESERVE_TAIL; /* without it, no promise ever moves */
    assert_int_equal(reservation_kept(&cfg), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_good),
        cmocka_unit_test(test_trace_bad),
        cmocka_unit_test(test_trace_fuzz_regressions),
        cmocka_unit_test(test_trace_odd_rows),
        cmocka_unit_test(test_trace_too_wide),
        cmocka_unit_test(test_estimates),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_gen_reproducible),
        cmocka_unit_test(test_sim_by_hand),
        cmocka_unit_test(test_sim_preemption_checkpoint),
        cmocka_unit_test(test_sim_sharing),
        cmocka_unit_test(test_idle_while_waiting),
        cmocka_unit_test(test_no_starvation),
        cmocka_unit_test(test_reservation_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
