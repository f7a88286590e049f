/* test_sched.c: the scheduler's rules, each pinned on a small hand-built
 * snapshot with the exact decisions expected: quota, borrowing and reclaim,
 * budget, job limit, gang, topology, cheaper types, backfill that never
 * delays the head, preemption victims and minimum run time, GPU sharing,
 * fair share, the order key that prevents starvation, rejections, reasons,
 * and the incremental state agreeing with the pure function. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* n nodes of `gpus` GPUs of one type (A100-80GB, 80 GiB, 2.5/h), in racks of
 * per_rack nodes, NVLink groups of `group` GPUs (0 = one group). */
static sched_cluster *make_cluster(int n, int gpus, int per_rack, int group)
{
    sched_cluster *c = sched_cluster_new();
    assert_int_equal(sched_cluster_add_type(c, "A100-80GB", 80 * GIB, 2.5), 0);
    for (int i = 0; i < n; i++) {
        char name[32], rack[32];
        snprintf(name, sizeof name, "node-%d", i);
        snprintf(rack, sizeof rack, "rack-%d", per_rack ? i / per_rack : 0);
        int nv[64];
        for (int g = 0; g < gpus; g++) nv[g] = group ? g / group : 0;
        assert_true(sched_cluster_add_node(c, name, rack, 0, gpus, nv, SCHED_NODE_READY) >= 0);
    }
    sched_cluster_add_team(c, "default");
    return c;
}

static sched_job job(uint64_t id, int team, int replicas, int per, double submit, double est)
{
    sched_job j;
    memset(&j, 0, sizeof j);
    j.id = id;
    j.team = team;
    j.replicas = replicas;
    j.gpus_per_replica = per;
    j.submit_time = submit;
    j.est_duration = est;
    return j;
}

static sched_job running(uint64_t id, int team, int n, const int *gpus, double start, double est)
{
    sched_job j = job(id, team, 1, n, start, est);
    j.start_time = start;
    j.gpus = gpus;
    return j;
}

typedef struct run {
    sched_result r;
    const sched_cluster *c;
    double now;
} run;

/* One pass of the pure function with a given configuration. */
static void decide_cfg(run *x, const sched_cluster *c, const sched_config *cfg, const sched_job *pend,
                       size_t np, const sched_job *runs, size_t nr, double now, const double *usage,
                       const double *spent)
{
    sched_input in = {pend, np, runs, nr, usage, spent, now, NULL, 0};
    char err[256];
    sched_result_init(&x->r);
    x->c = c;
    x->now = now;
    assert_int_equal(sched_decide(c, cfg, &in, &x->r, err, sizeof err), 0);
}

/* One pass with the policy's default configuration. */
static void decide(run *x, const sched_cluster *c, sched_policy pol, const sched_job *pend,
                   size_t np, const sched_job *runs, size_t nr, double now, const double *usage,
                   const double *spent)
{
    sched_config cfg;
    sched_config_default(&cfg, pol);
    decide_cfg(x, c, &cfg, pend, np, runs, nr, now, usage, spent);
}

/* lathe buying every reservation at once (rent-reserve off): the tests of
 * the reservation's own mechanics, whose heads have not waited. */
static void decide_eager(run *x, const sched_cluster *c, const sched_job *pend, size_t np,
                         const sched_job *runs, size_t nr, double now)
{
    sched_config cfg;
    sched_config_default(&cfg, SCHED_LATHE);
    cfg.rules &= ~SCHED_RULE_RENT_RESERVE;
    decide_cfg(x, c, &cfg, pend, np, runs, nr, now, NULL, NULL);
}

/* lathe's default configuration without some of its rules. */
static sched_config lathe_without(unsigned rules)
{
    sched_config cfg;
    sched_config_default(&cfg, SCHED_LATHE);
    cfg.rules &= ~rules;
    return cfg;
}

static const sched_decision *find(const run *x, uint64_t id)
{
    for (size_t i = 0; i < x->r.n; i++)
        if (x->r.d[i].job == id) return &x->r.d[i];
    fail_msg("no decision for job %llu", (unsigned long long)id);
    return NULL;
}

static void expect_start(const run *x, uint64_t id, const int *gpus, int n)
{
    const sched_decision *d = find(x, id);
    if (d->action != SCHED_START) {
        sb s;
        sb_init(&s);
        sched_reason_format(x->c, &d->why, x->now, &s);
        fail_msg("job %llu: %s (%s), expected start", (unsigned long long)id,
                 sched_action_name(d->action), sb_str(&s));
    }
    assert_int_equal(d->n_gpus, n);
    const int *g = sched_decision_gpus(&x->r, d);
    for (int i = 0; i < n; i++)
        if (g[i] != gpus[i]) fail_msg("job %llu: GPU %d is %d, expected %d", (unsigned long long)id, i, g[i], gpus[i]);
}

/* Expects a decision of this action and code whose sentence contains text. */
static void expect(const run *x, uint64_t id, sched_action a, sched_why code, const char *text)
{
    const sched_decision *d = find(x, id);
    sb s;
    sb_init(&s);
    sched_reason_format(x->c, &d->why, x->now, &s);
    if (d->action != a || d->why.code != code || (text && !strstr(sb_str(&s), text)))
        fail_msg("job %llu: %s code %d \"%s\"; expected %s code %d with \"%s\"", (unsigned long long)id,
                 sched_action_name(d->action), d->why.code, sb_str(&s), sched_action_name(a), code,
                 text ? text : "");
    sb_free(&s);
}

static void done(run *x)
{
    sched_result_free(&x->r);
}

/* ---- order and head-of-line blocking ---- */

static void test_fifo_first_fit(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(2, 4, 0, 0);
    sched_job p[3] = {job(1, 0, 1, 2, 10, 100), job(2, 0, 1, 4, 20, 100), job(3, 0, 1, 1, 30, 100)};
    run x;
    decide(&x, c, SCHED_FIFO, p, 3, NULL, 0, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){0, 1}, 2);
    expect_start(&x, 2, (int[]){4, 5, 6, 7}, 4);
    expect_start(&x, 3, (int[]){2}, 1);
    assert_int_equal(x.r.free_gpus, 1);
    done(&x);
    sched_cluster_free(c);
}

static void test_fifo_blocks_greedy_skips(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(1, 4, 0, 0);
    int held[2] = {0, 1};
    sched_job r[1] = {running(9, 0, 2, held, 0, 1000)};
    sched_job p[2] = {job(1, 0, 1, 4, 10, 100), job(2, 0, 1, 1, 20, 100)};
    run x;
    decide(&x, c, SCHED_FIFO, p, 2, r, 1, 100, NULL, NULL);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_NO_FIT, "needs 4 A100-80GB GPUs on one node; 2 are free");
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_FIFO_BLOCKED, "waits behind job 1, the head of default's queue");
    done(&x);
    decide(&x, c, SCHED_GREEDY, p, 2, r, 1, 100, NULL, NULL);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_NO_FIT, NULL);
    expect_start(&x, 2, (int[]){2}, 1);
    done(&x);
    sched_cluster_free(c);
}

/* ---- quota, borrowing, budget, job limit ---- */

static sched_cluster *two_teams(int qa, int borrow_a, int qb, int lend_b)
{
    sched_cluster *c = make_cluster(1, 8, 0, 0);
    int a = sched_cluster_add_team(c, "team-a"), b = sched_cluster_add_team(c, "team-b");
    sched_team_set_quota(c, a, 0, qa, borrow_a, SCHED_UNLIMITED);
    sched_team_set_quota(c, b, 0, qb, SCHED_UNLIMITED, lend_b);
    return c;
}

static void test_quota(void **state)
{
    (void)state;
    sched_cluster *c = two_teams(4, 0, 4, SCHED_UNLIMITED);
    int held[4] = {0, 1, 2, 3};
    sched_job r[1] = {running(9, 1, 4, held, 0, 1000)};
    sched_job p[2] = {job(1, 1, 1, 1, 10, 100), job(2, 2, 1, 2, 20, 100)};
    for (int pol = 0; pol < SCHED_N_POLICIES; pol++) {
        run x;
        decide(&x, c, (sched_policy)pol, p, 2, r, 1, 100, NULL, NULL);
        expect(&x, 1, SCHED_WAIT, SCHED_WHY_QUOTA,
               "team-a uses 4/4 A100-80GB GPUs of its quota and may not borrow; this job needs 1");
        expect(&x, 2, SCHED_START, SCHED_WHY_FITS, NULL);
        done(&x);
    }
    sched_cluster_free(c);
}

static void test_borrow_and_lending_limit(void **state)
{
    (void)state;
    /* team-a quota 2, may borrow any; team-b quota 6 idle */
    sched_cluster *c = two_teams(2, SCHED_UNLIMITED, 6, SCHED_UNLIMITED);
    sched_job p[1] = {job(1, 1, 1, 4, 10, 100)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, NULL, 0, 100, NULL, NULL);
    expect(&x, 1, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    sched_cluster_free(c);
    /* team-b lends at most 1: team-a can borrow 1, needs 2 beyond its quota */
    c = two_teams(2, SCHED_UNLIMITED, 6, 1);
    decide(&x, c, SCHED_LATHE, p, 1, NULL, 0, 100, NULL, NULL);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_POOL,
           "team-a uses 0 A100-80GB GPUs (quota 2); this job needs 4, beyond its quota, but other "
           "teams have only 1 idle GPU of quota to lend");
    done(&x);
    sched_cluster_free(c);
}

static void test_budget_and_job_limit(void **state)
{
    (void)state;
    sched_cluster *c = two_teams(4, SCHED_UNLIMITED, 4, SCHED_UNLIMITED);
    c->teams[1].budget = 1000;
    c->teams[2].max_jobs = 1;
    int held[1] = {0};
    sched_job r[1] = {running(9, 2, 1, held, 0, 1000)};
    sched_job p[2] = {job(1, 1, 1, 1, 10, 100), job(2, 2, 1, 1, 20, 100)};
    double spent[3] = {0, 1200, 0};
    run x;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, 100, NULL, spent);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_BUDGET, "team-a has spent 1200 of its budget of 1000 this month");
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_MAX_JOBS, "team-b already runs 1 job, its limit");
    done(&x);
    spent[1] = 999;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, 100, NULL, spent);
    expect(&x, 1, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    sched_cluster_free(c);
}

static void test_reject(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(16, 8, 8, 4);
    int a = sched_cluster_add_team(c, "team-a");
    sched_team_set_quota(c, a, 0, 32, 0, SCHED_UNLIMITED);
    sched_job p[4] = {job(1, a, 8, 8, 0, 100), job(2, 0, 1, 16, 0, 100), job(3, 0, 1, 1, 0, 100),
                      job(4, 0, 1, 4, 0, 100)};
    p[2].gpu_memory = 120 * GIB;
    p[3].team = 7;
    run x;
    decide(&x, c, SCHED_LATHE, p, 4, NULL, 0, 0, NULL, NULL);
    expect(&x, 1, SCHED_REJECT, SCHED_WHY_OVER_QUOTA,
           "asks for 64 A100-80GB GPUs but team-a may never hold more than 32 (quota 32 plus its borrowing limit)");
    expect(&x, 2, SCHED_REJECT, SCHED_WHY_NODE_TOO_SMALL,
           "asks for 16 GPUs per replica (on one node) but the largest A100-80GB node has 8");
    expect(&x, 3, SCHED_REJECT, SCHED_WHY_NO_TYPE, "no allowed GPU type has the 120.0 GiB");
    expect(&x, 4, SCHED_REJECT, SCHED_WHY_BAD_JOB, NULL);
    assert_int_equal(x.r.n_reject, 4);
    done(&x);
    sched_cluster_free(c);
}

/* ---- gang and topology ---- */

static void test_gang(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(2, 4, 0, 0);
    int h1[2] = {0, 1}, h2[2] = {4, 5};
    sched_job r[2] = {running(8, 0, 2, h1, 0, 1000), running(9, 0, 2, h2, 0, 1000)};
    /* 4 GPUs on one node: 4 free but 2 + 2; 2 replicas x 2: starts across both */
    sched_job p[2] = {job(1, 0, 1, 4, 10, 100), job(2, 0, 2, 2, 20, 100)};
    run x;
    decide(&x, c, SCHED_GREEDY, p, 2, r, 2, 100, NULL, NULL);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_NO_FIT, "needs 4 A100-80GB GPUs on one node; 4 are free but at most 2 on one node");
    expect_start(&x, 2, (int[]){2, 3, 6, 7}, 4);
    done(&x);
    /* 3 replicas x 2 cannot start partly */
    sched_job p2[1] = {job(3, 0, 3, 2, 20, 100)};
    decide_eager(&x, c, p2, 1, r, 2, 100);
    expect(&x, 3, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    assert_int_equal(x.r.n_start, 0);
    done(&x);
    sched_cluster_free(c);
}

static void test_topology_nvlink(void **state)
{
    (void)state;
    /* one node, NVLink groups {0-3} {4-7}; GPUs 2, 3, 4 busy: free 0,1 | 5,6,7 */
    sched_cluster *c = make_cluster(1, 8, 0, 4);
    int h[3] = {2, 3, 4};
    sched_job r[1] = {running(9, 0, 3, h, 0, 1000)};
    sched_job p[1] = {job(1, 0, 1, 3, 10, 100)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, r, 1, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){5, 6, 7}, 3); /* one NVLink group */
    done(&x);
    decide(&x, c, SCHED_FIFO, p, 1, r, 1, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){0, 1, 5}, 3); /* first fit spans groups */
    done(&x);
    /* a 2-GPU job goes to the group it fills exactly (0,1), keeping 5-7 */
    sched_job p2[1] = {job(2, 0, 1, 2, 10, 100)};
    decide(&x, c, SCHED_LATHE, p2, 1, r, 1, 100, NULL, NULL);
    expect_start(&x, 2, (int[]){0, 1}, 2);
    done(&x);
    sched_cluster_free(c);
}

static void test_topology_best_fit_and_rack(void **state)
{
    (void)state;
    /* 4 nodes of 4 GPUs, racks {0,1} {2,3}; node 1 has 1 GPU busy */
    sched_cluster *c = make_cluster(4, 4, 2, 0);
    int h[1] = {4};
    sched_job r[1] = {running(9, 0, 1, h, 0, 1000)};
    /* 1 GPU: best fit on node 1 (3 free) keeps whole nodes; first fit takes node 0 */
    sched_job p[1] = {job(1, 0, 1, 1, 10, 100)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, r, 1, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){5}, 1);
    done(&x);
    decide(&x, c, SCHED_FIFO, p, 1, r, 1, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){0}, 1);
    done(&x);
    /* 2 x 4 GPUs: lathe keeps it in one rack (nodes 2, 3); first fit spans racks (0, 2) */
    sched_job p2[1] = {job(2, 0, 2, 4, 10, 100)};
    decide(&x, c, SCHED_LATHE, p2, 1, r, 1, 100, NULL, NULL);
    expect_start(&x, 2, (int[]){8, 9, 10, 11, 12, 13, 14, 15}, 8);
    done(&x);
    decide(&x, c, SCHED_FIFO, p2, 1, r, 1, 100, NULL, NULL);
    expect_start(&x, 2, (int[]){0, 1, 2, 3, 8, 9, 10, 11}, 8);
    done(&x);
    sched_cluster_free(c);
}

static void test_cheaper_type_first(void **state)
{
    (void)state;
    sched_cluster *c = sched_cluster_new();
    sched_cluster_add_type(c, "A100-80GB", 80 * GIB, 2.5);
    sched_cluster_add_type(c, "L4-24GB", 24 * GIB, 0.8);
    sched_cluster_add_node(c, "a100-1", "r1", 0, 4, NULL, SCHED_NODE_READY);
    sched_cluster_add_node(c, "l4-1", "r2", 1, 4, NULL, SCHED_NODE_READY);
    sched_cluster_add_team(c, "default");
    sched_job p[2] = {job(1, 0, 1, 1, 10, 100), job(2, 0, 1, 1, 20, 100)};
    p[1].gpu_memory = 40 * GIB; /* only the A100 has the memory */
    p[1].exclusive = true;
    run x;
    decide(&x, c, SCHED_LATHE, p, 2, NULL, 0, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){4}, 1); /* L4: cheaper */
    expect_start(&x, 2, (int[]){0}, 1);
    assert_int_equal(find(&x, 1)->type, 1);
    done(&x);
    decide(&x, c, SCHED_FIFO, p, 2, NULL, 0, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){0}, 1); /* cluster order */
    done(&x);
    sched_cluster_free(c);
}

/* ---- backfill ---- */

static void test_backfill_never_delays_head(void **state)
{
    (void)state;
    /* 2 nodes x 4. Node 0: GPUs 0, 1 busy until t=100; node 1: full until t=300.
     * The head (higher priority, 4 GPUs on one node) is reserved node 0 at t=100. */
    sched_cluster *c = make_cluster(2, 4, 0, 0);
    int h0[2] = {0, 1}, h1[4] = {4, 5, 6, 7};
    sched_job r[2] = {running(8, 0, 2, h0, 0, 100), running(9, 0, 4, h1, 0, 300)};
    sched_job p[3] = {job(1, 0, 1, 4, 10, 500), job(2, 0, 1, 1, 20, 30), job(3, 0, 1, 1, 30, 200)};
    p[0].priority = 5;
    for (int pol = SCHED_EASY; pol <= SCHED_LATHE; pol++) {
        run x;
        decide(&x, c, (sched_policy)pol, p, 3, r, 2, 50, NULL, NULL);
        expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, "reserved for it from in 50s");
        assert_int_equal(x.r.head, 1);
        assert_true(x.r.head_start == 100);
        /* ends at 80 < 100: backfills on a reserved GPU */
        expect(&x, 2, SCHED_START, SCHED_WHY_BACKFILL, "without delaying its reserved start");
        expect_start(&x, 2, (int[]){2}, 1);
        /* would end at 250 > 100 on the free GPU 3, which is reserved */
        expect(&x, 3, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, "held for job 1, due to start in 50s");
        assert_int_equal(x.r.resv_free_gpus, 1); /* GPU 3 idles for the head */
        done(&x);
    }
    /* greedy has no reservation: job 3 takes GPU 3 and the head is delayed */
    run x;
    decide(&x, c, SCHED_GREEDY, p, 3, r, 2, 50, NULL, NULL);
    expect_start(&x, 2, (int[]){2}, 1);
    expect_start(&x, 3, (int[]){3}, 1);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_NO_FIT, NULL);
    done(&x);
    sched_cluster_free(c);
}

static void test_backfill_outside_reservation(void **state)
{
    (void)state;
    /* 3 nodes x 4. Node 0: 2 busy until 100; node 1: 4 busy until 300; node 2: 3 busy until 400.
     * Head (4 on one node) reserved on node 0 at 100; a long 1-GPU job may use node 2. */
    sched_cluster *c = make_cluster(3, 4, 0, 0);
    int h0[2] = {0, 1}, h1[4] = {4, 5, 6, 7}, h2[3] = {8, 9, 10};
    sched_job r[3] = {running(7, 0, 2, h0, 0, 100), running(8, 0, 4, h1, 0, 300), running(9, 0, 3, h2, 0, 400)};
    sched_job p[2] = {job(1, 0, 1, 4, 10, 500), job(2, 0, 1, 1, 20, 1000)};
    run x;
    decide(&x, c, SCHED_EASY, p, 2, r, 3, 50, NULL, NULL);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    expect_start(&x, 2, (int[]){11}, 1);
    done(&x);
    sched_cluster_free(c);
}

/* ---- preemption ---- */

static void test_priority_preemption_victims(void **state)
{
    (void)state;
    /* one node of 4, all busy with low-priority 1-GPU jobs */
    sched_cluster *c = make_cluster(1, 4, 0, 0);
    int g[4][1] = {{0}, {1}, {2}, {3}};
    sched_job r[4] = {running(11, 0, 1, g[0], 0, 10000), running(12, 0, 1, g[1], 0, 10000),
                      running(13, 0, 1, g[2], 0, 10000), running(14, 0, 1, g[3], 3000, 10000)};
    r[0].checkpoint_interval = 600;  /* last checkpoint at 3000: loses 300 s */
    r[1].last_checkpoint = 3200;     /* loses 100 s */
    r[2].checkpoint_interval = 0;    /* never checkpoints: loses 3300 s */
    /* r[3] started at 3000 with no checkpoint: loses 300 s, but ran 5 min < 10 min */
    sched_job p[1] = {job(1, 0, 1, 2, 3000, 100)};
    p[0].priority = 1000;
    p[0].preempt_lower = true;
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, r, 4, 3300, NULL, NULL);
    expect(&x, 12, SCHED_PREEMPT, SCHED_WHY_PREEMPT_PRIORITY, "preempted for job 1 (priority 1000); loses 1m40s");
    expect(&x, 11, SCHED_PREEMPT, SCHED_WHY_PREEMPT_PRIORITY, "loses 5m");
    expect_start(&x, 1, (int[]){0, 1}, 2);
    expect(&x, 1, SCHED_START, SCHED_WHY_AFTER_PREEMPT, NULL);
    assert_int_equal(x.r.n_preempt, 2);
    done(&x);
    /* PreemptionPolicy Never: it waits */
    p[0].preempt_lower = false;
    decide(&x, c, SCHED_LATHE, p, 1, r, 4, 3300, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    done(&x);
    /* the baselines never preempt */
    p[0].preempt_lower = true;
    decide(&x, c, SCHED_EASY, p, 1, r, 4, 3300, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    done(&x);
    sched_cluster_free(c);
}

static void test_reclaim(void **state)
{
    (void)state;
    /* 8 GPUs; team-a quota 2 runs 6 (borrowing 4 of team-b's idle quota) plus
     * team-b runs 2; team-b (quota 6) asks for 4: reclaims from team-a only */
    sched_cluster *c = two_teams(2, SCHED_UNLIMITED, 6, SCHED_UNLIMITED);
    int g[5][2] = {{0, 1}, {2, 3}, {4}, {5}, {6, 7}};
    sched_job r[5] = {running(21, 1, 2, g[0], 0, 9000), running(22, 1, 2, g[1], 0, 9000),
                      running(23, 1, 1, g[2], 0, 9000), running(24, 1, 1, g[3], 0, 9000),
                      running(25, 2, 2, g[4], 0, 20000)};
    /* team-b's 25 ends last: restarting a victim never makes it the last job to end
     * (the reclaim-tail rule) */
    for (int i = 0; i < 5; i++) r[i].checkpoint_interval = 1000;
    r[0].last_checkpoint = 3900; /* 2 GPUs x 100 s = 200 */
    r[1].last_checkpoint = 3000; /* 2 x 1000 = 2000 */
    r[2].last_checkpoint = 3950; /* 1 x 50 = 50 */
    r[3].last_checkpoint = 3500; /* 1 x 500 = 500 */
    r[4].last_checkpoint = 3999; /* team-b's own: never a victim */
    /* has waited 1000 s >= reclaim_wait; brings 4 x 1000 GPU-s of work, more than any
     * set of victims below loses (the reclaim-cheap rule) */
    sched_job p[1] = {job(1, 2, 1, 4, 3000, 1000)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, r, 5, 4000, NULL, NULL);
    /* cheapest first: 23 (50), 21 (200), 24 (500); 4 GPUs free after the
     * three; pruning keeps all three (each is needed) */
    expect(&x, 23, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, "team-b reclaims the A100-80GB GPUs it lent");
    expect(&x, 21, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL);
    expect(&x, 24, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL);
    expect_start(&x, 1, (int[]){0, 1, 4, 5}, 4);
    assert_int_equal(x.r.n_preempt, 3); /* 22 (loses 2000) and team-b's 25 keep running */
    done(&x);
    /* a job that has waited less than reclaim_wait (10 min) reclaims nothing:
     * GPUs often free up sooner */
    p[0].submit_time = 3900;
    decide(&x, c, SCHED_LATHE, p, 1, r, 5, 4000, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    done(&x);
    p[0].submit_time = 3000;
    /* a borrower keeps what it got for reclaim_min_run (1 h): 23 started 30 min ago.
     * 21 and 24 free 3 GPUs; 22 would take team-a below its quota (6 - 3 - 2 = 1 < 2),
     * which the reclaim-borrowed rule forbids: job 1 waits */
    r[2].start_time = 2200;
    decide(&x, c, SCHED_LATHE, p, 1, r, 5, 4000, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    done(&x);
    /* without the rule, 21, 24, 22 are taken in order of loss until 4 GPUs
     * are free; pruning then finds 24 unneeded (21 and 22 free 4) */
    sched_config cfg = lathe_without(SCHED_RULE_RECLAIM_BORROWED);
    decide_cfg(&x, c, &cfg, p, 1, r, 5, 4000, NULL, NULL);
    expect(&x, 21, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL);
    expect(&x, 22, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL);
    expect_start(&x, 1, (int[]){0, 1, 2, 3}, 4);
    assert_int_equal(x.r.n_preempt, 2);
    done(&x);
    /* the reclaim-cheap rule: a job of 4 x 100 GPU-s does not destroy the 750
     * GPU-s that 23, 21 and 24 would lose; without the rule it does */
    r[2].start_time = 0;
    p[0].est_duration = 100;
    decide(&x, c, SCHED_LATHE, p, 1, r, 5, 4000, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    done(&x);
    cfg = lathe_without(SCHED_RULE_RECLAIM_CHEAP | SCHED_RULE_RECLAIM_TAIL); /* 24 loses 500 s > 100 */
    decide_cfg(&x, c, &cfg, p, 1, r, 5, 4000, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 3);
    expect_start(&x, 1, (int[]){0, 1, 4, 5}, 4);
    done(&x);
    sched_cluster_free(c);
}

/* The reclaim-small rule: a 1-GPU job does not break a 2-GPU borrower, and
 * the reclaim-backoff rule: a job preempted k times is reclaimed only after
 * running reclaim_min_run x 2^k. */
static void test_reclaim_small_and_backoff(void **state)
{
    (void)state;
    /* team-a (quota 2) runs 2 + 2 + 2 on 6 GPUs, borrowing 4; team-b (quota 6) runs 2 */
    sched_cluster *c = two_teams(2, SCHED_UNLIMITED, 6, SCHED_UNLIMITED);
    int g[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
    sched_job r[4] = {running(21, 1, 2, g[0], 0, 1e5), running(22, 1, 2, g[1], 0, 1e5),
                      running(23, 1, 2, g[2], 0, 1e5), running(25, 2, 2, g[3], 0, 2e5)};
    for (int i = 0; i < 4; i++) r[i].checkpoint_interval = 1000; /* all lose 2 x 500 s at 9500 */
    sched_job p[1] = {job(1, 2, 1, 1, 8000, 2000)}; /* 2000 GPU-s: worth a reclaim of 1000 */
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, r, 4, 9500, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    done(&x);
    sched_config cfg = lathe_without(SCHED_RULE_RECLAIM_SMALL);
    decide_cfg(&x, c, &cfg, p, 1, r, 4, 9500, NULL, NULL);
    expect(&x, 21, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL); /* equal loss: lowest id */
    expect_start(&x, 1, (int[]){0}, 1);
    assert_int_equal(x.r.n_preempt, 1);
    done(&x);
    /* a 2-GPU job may take a 2-GPU borrower; one preempted once before must
     * have run 2 h (it ran 9500 s) and one preempted twice 4 h (it did not) */
    p[0].gpus_per_replica = 2;
    r[0].preemptions = 1;
    r[1].preemptions = 2;
    r[2].preemptions = 2;
    decide(&x, c, SCHED_LATHE, p, 1, r, 4, 9500, NULL, NULL);
    expect(&x, 21, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL);
    expect_start(&x, 1, (int[]){0, 1}, 2);
    assert_int_equal(x.r.n_preempt, 1);
    done(&x);
    r[0].preemptions = 2;
    decide(&x, c, SCHED_LATHE, p, 1, r, 4, 9500, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    done(&x);
    cfg = lathe_without(SCHED_RULE_RECLAIM_BACKOFF);
    decide_cfg(&x, c, &cfg, p, 1, r, 4, 9500, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 1);
    done(&x);
    sched_cluster_free(c);
}

/* The reclaim-tail rule: a reclaim does not make its victim redo more wall
 * time than the reclaiming job will run, nor restart a victim that would
 * then end after every running job and the reclaiming one. */
static void test_reclaim_tail(void **state)
{
    (void)state;
    /* team-a (quota 2) runs 21 and 22 (2 GPUs each, no checkpoints, 100,000 s
     * into runs of 500,000) and 23, borrowing 4; team-b (quota 6) runs 25 until
     * 2e6 and asks for 2 GPUs */
    sched_cluster *c = two_teams(2, SCHED_UNLIMITED, 6, SCHED_UNLIMITED);
    int g[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
    sched_job r[4] = {running(21, 1, 2, g[0], 0, 5e5), running(22, 1, 2, g[1], 0, 5e5),
                      running(23, 1, 2, g[2], 0, 5e5), running(25, 2, 2, g[3], 0, 2e6)};
    /* a job of 200,000 s: each victim loses 100,000 s and, restarted, ends at
     * 600,000, before 25: the reclaim is allowed (lowest id of equal losses) */
    sched_job p[1] = {job(1, 2, 1, 2, 99000, 2e5)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, r, 4, 1e5, NULL, NULL);
    expect(&x, 21, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL);
    expect_start(&x, 1, (int[]){0, 1}, 2);
    assert_int_equal(x.r.n_preempt, 1);
    done(&x);
    /* 25 ends at 400,000: a victim restarted would end last (600,000 > 500,000) */
    r[3].est_duration = 4e5;
    decide(&x, c, SCHED_LATHE, p, 1, r, 4, 1e5, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    done(&x);
    sched_config cfg = lathe_without(SCHED_RULE_RECLAIM_TAIL);
    decide_cfg(&x, c, &cfg, p, 1, r, 4, 1e5, NULL, NULL);
    expect(&x, 21, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL);
    assert_int_equal(x.r.n_preempt, 1);
    done(&x);
    /* 21 checkpointed 30 min ago: losing no more than reclaim_min_run (1 h), it
     * may end last (at 501,800) */
    r[0].last_checkpoint = 98200;
    decide(&x, c, SCHED_LATHE, p, 1, r, 4, 1e5, NULL, NULL);
    expect(&x, 21, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, "loses 1h GPU-time"); /* 2 x 30 min */
    assert_int_equal(x.r.n_preempt, 1);
    done(&x);
    r[0].last_checkpoint = 0;
    /* a job of 1 h (25 ends last again): a victim would lose 100,000 s of wall
     * time for it; reclaim-cheap alone also refuses (200,000 GPU-s > 7,200), so
     * it is off here */
    r[3].est_duration = 2e6;
    p[0].est_duration = 3600;
    cfg = lathe_without(SCHED_RULE_RECLAIM_CHEAP);
    decide_cfg(&x, c, &cfg, p, 1, r, 4, 1e5, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    done(&x);
    cfg = lathe_without(SCHED_RULE_RECLAIM_CHEAP | SCHED_RULE_RECLAIM_TAIL);
    decide_cfg(&x, c, &cfg, p, 1, r, 4, 1e5, NULL, NULL);
    expect(&x, 21, SCHED_PREEMPT, SCHED_WHY_PREEMPT_RECLAIM, NULL);
    assert_int_equal(x.r.n_preempt, 1);
    done(&x);
    sched_cluster_free(c);
}

/* ---- sharing ---- */

static void test_sharing(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(1, 2, 0, 0);
    sched_job p[4] = {job(1, 0, 1, 1, 10, 100), job(2, 0, 1, 1, 110, 100), job(3, 0, 1, 1, 210, 100),
                      job(4, 0, 1, 1, 310, 100)};
    p[0].share = 40;
    p[1].share = 40;
    p[2].share = 30;
    /* job 4 wants a whole GPU: never shares */
    run x;
    decide(&x, c, SCHED_LATHE, p, 4, NULL, 0, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){0}, 1);
    expect_start(&x, 2, (int[]){0}, 1); /* 40 + 40 <= 100 */
    expect_start(&x, 3, (int[]){1}, 1); /* 80 + 30 > 100 */
    expect(&x, 4, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    assert_int_equal(find(&x, 2)->share, 40);
    done(&x);
    /* memory adds up: 30 GiB + 30 GiB on 80 GiB share; a third 30 GiB does not */
    sched_job q[3] = {job(5, 0, 1, 1, 10, 100), job(6, 0, 1, 1, 11, 100), job(7, 0, 1, 1, 12, 100)};
    for (int i = 0; i < 3; i++) q[i].gpu_memory = 30 * GIB;
    decide(&x, c, SCHED_LATHE, q, 3, NULL, 0, 100, NULL, NULL);
    expect_start(&x, 5, (int[]){0}, 1);
    expect_start(&x, 6, (int[]){0}, 1);
    expect_start(&x, 7, (int[]){1}, 1);
    done(&x);
    /* at most 4 jobs per GPU */
    sched_job s[5];
    for (int i = 0; i < 5; i++) {
        s[i] = job(10 + i, 0, 1, 1, i, 100);
        s[i].share = 10;
    }
    decide(&x, c, SCHED_LATHE, s, 5, NULL, 0, 100, NULL, NULL);
    for (int i = 0; i < 4; i++) expect_start(&x, 10 + i, (int[]){0}, 1);
    expect_start(&x, 14, (int[]){1}, 1);
    done(&x);
    /* the baselines give sharing jobs whole GPUs */
    decide(&x, c, SCHED_GREEDY, p, 4, NULL, 0, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){0}, 1);
    expect_start(&x, 2, (int[]){1}, 1);
    expect(&x, 3, SCHED_WAIT, SCHED_WHY_NO_FIT, NULL);
    done(&x);
    /* an exclusive job never lands on a shared GPU */
    int held[1] = {0};
    sched_job r[1] = {running(30, 0, 1, held, 0, 1000)};
    r[0].share = 20;
    sched_job e[2] = {job(31, 0, 1, 1, 10, 100), job(32, 0, 1, 1, 11, 100)};
    e[0].share = 20;
    e[0].exclusive = true;
    e[1].share = 20;
    decide(&x, c, SCHED_LATHE, e, 2, r, 1, 100, NULL, NULL);
    expect_start(&x, 31, (int[]){1}, 1);
    expect_start(&x, 32, (int[]){0}, 1);
    done(&x);
    sched_cluster_free(c);
}

/* ---- fair share and the order key ---- */

static void test_fair_share(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(1, 2, 0, 0);
    sched_cluster_add_team(c, "team-a");
    sched_cluster_add_team(c, "team-b");
    int held[1] = {0};
    sched_job r[1] = {running(9, 1, 1, held, 0, 1000)};
    /* one free GPU; team-a's job came first, team-b has used less */
    sched_job p[2] = {job(1, 1, 1, 1, 10, 100), job(2, 2, 1, 1, 20, 100)};
    double usage[3] = {0, 0, 0};
    run x;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, 100, usage, NULL);
    expect(&x, 2, SCHED_START, SCHED_WHY_FITS, NULL); /* team-a holds a GPU now */
    done(&x);
    decide(&x, c, SCHED_FIFO, p, 2, r, 1, 100, usage, NULL);
    expect(&x, 1, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    /* decayed usage decides when nothing runs: team-b used a lot last week */
    usage[2] = 1e6;
    decide(&x, c, SCHED_LATHE, p, 2, NULL, 0, 100, usage, NULL);
    /* two free GPUs: both start, team-a first */
    assert_int_equal(x.r.d[0].job, 1);
    assert_int_equal(x.r.d[1].job, 2);
    done(&x);
    /* a team with twice the weight gets twice the share: with weight 4,
     * team-b's usage counts a quarter and it goes first */
    c->teams[2].weight = 4;
    usage[1] = 3e5;
    decide(&x, c, SCHED_LATHE, p, 2, NULL, 0, 100, usage, NULL);
    assert_int_equal(x.r.d[0].job, 2);
    done(&x);
    sched_cluster_free(c);
}

static void test_order_short_first_but_bounded(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(1, 4, 0, 0);
    int held[3] = {0, 1, 2};
    sched_job r[1] = {running(9, 0, 3, held, 0, 1e6)};
    /* one free GPU: a 10 h job submitted first, a 10 min job 1 min later */
    sched_job p[2] = {job(1, 0, 1, 1, 0, 36000), job(2, 0, 1, 1, 60, 600)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, 100, NULL, NULL);
    expect(&x, 2, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    decide(&x, c, SCHED_EASY, p, 2, r, 1, 100, NULL, NULL);
    expect(&x, 1, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    /* aging bounds it: the short job passes only while it was submitted less
     * than aging (1 h) x the difference of their doublings of work after the
     * long one: log2(1 + 10 GPU-h) - log2(1 + 1/6 GPU-h), about 3.2 h */
    sched_config cfg;
    sched_config_default(&cfg, SCHED_LATHE);
    double d = cfg.aging * (log2(1 + 36000 / SCHED_WORK_UNIT) - log2(1 + 600 / SCHED_WORK_UNIT));
    p[1].submit_time = d - 10;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, d + 100, NULL, NULL);
    expect(&x, 2, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    p[1].submit_time = d + 10;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, d + 100, NULL, NULL);
    expect(&x, 1, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    /* with aging 0, the older slack: never passed by a job submitted more than max_slack (6 h) later */
    cfg.aging = 0;
    p[1].submit_time = 6 * 3600 + 1;
    decide_cfg(&x, c, &cfg, p, 2, r, 1, 6 * 3600 + 10, NULL, NULL);
    expect(&x, 1, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    p[1].submit_time = 60;
    decide_cfg(&x, c, &cfg, p, 2, r, 1, 100, NULL, NULL);
    expect(&x, 2, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    sched_cluster_free(c);
}

/* The overrun rule: a running job past its estimate is expected to run as
 * long again as it has run. Without it, its end is "now" on every pass, the
 * head's reservation is always about to start, and the free GPUs reserved
 * for it idle while jobs that would end long before wait. */
static void test_overrun(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(1, 8, 0, 0);
    int held[4] = {0, 1, 2, 3};
    sched_job r[1] = {running(9, 0, 4, held, 0, 1000)}; /* estimated 1000 s, has run 3000 */
    /* the head needs all 8 GPUs (and little work: it comes first); job 2 would end at 4000 */
    sched_job p[2] = {job(1, 0, 1, 8, 0, 10), job(2, 0, 1, 1, 100, 1000)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, 3000, NULL, NULL);
    expect(&x, 2, SCHED_START, SCHED_WHY_BACKFILL, NULL);
    assert_true(x.r.head == 1 && x.r.head_start == 6000);
    done(&x);
    sched_config cfg = lathe_without(SCHED_RULE_OVERRUN);
    decide_cfg(&x, c, &cfg, p, 2, r, 1, 3000, NULL, NULL);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    assert_true(x.r.head == 1 && x.r.head_start == 3000);
    done(&x);
    /* easy (Slurm's model: a job never outlives its limit) keeps "now" */
    decide(&x, c, SCHED_EASY, p, 2, r, 1, 3000, NULL, NULL);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    done(&x);
    sched_cluster_free(c);
}

/* The learn-limit rule: a job that gives only a time limit (max_duration)
 * is predicted to run its limit x the largest actual / limit among the last
 * SCHED_LEARN_WINDOW jobs that finished (its team's from SCHED_LEARN_MIN on,
 * else all teams'), for order and reservations; past the prediction, the
 * overrun rule, never past the limit. */
static sched_job limited(sched_job j, double limit)
{
    j.est_duration = 0;
    j.max_duration = limit;
    return j;
}

static void decide_learn(run *x, const sched_cluster *c, const sched_config *cfg, const sched_job *pend,
                         size_t np, const sched_job *runs, size_t nr, double now,
                         const sched_finished *fin, size_t nf)
{
    sched_input in = {pend, np, runs, nr, NULL, NULL, now, fin, nf};
    char err[256];
    sched_result_init(&x->r);
    x->c = c;
    x->now = now;
    assert_int_equal(sched_decide(c, cfg, &in, &x->r, err, sizeof err), 0);
}

static void test_learn_limit(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(1, 8, 0, 0);
    assert_int_equal(sched_cluster_add_team(c, "b"), 1);
    sched_config lathe, easy, off;
    sched_config_default(&off, SCHED_LATHE); /* off by default */
    assert_false(off.rules & SCHED_RULE_LEARN_LIMIT);
    lathe = off;
    lathe.rules |= SCHED_RULE_LEARN_LIMIT;
    sched_config_default(&easy, SCHED_EASY);
    easy.rules |= SCHED_RULE_LEARN_LIMIT; /* a lathe rule: the baselines keep the limit */
    int held[4] = {0, 1, 2, 3};
    /* ten finished jobs of team 0 that ran an eighth of their limits */
    sched_finished fin[40];
    for (int i = 0; i < 10; i++) fin[i] = (sched_finished){0, 1000, 125};
    run x;

    /* 1. A candidate with only a limit backfills when its prediction ends before the
     * head's start. The running job gives an estimate (5000 s): its end is kept. The head
     * needs all 8 GPUs; job 2 (4 GPUs, limit 16000 s) is predicted 2000 s: ends at 3000. */
    sched_job r1[1] = {running(9, 0, 4, held, 0, 5000)};
    sched_job p[2] = {limited(job(1, 0, 1, 8, 0, 0), 1000), limited(job(2, 0, 1, 4, 100, 0), 16000)};
    p[0].priority = 5;
    decide_learn(&x, c, &lathe, p, 2, r1, 1, 1000, fin, 10);
    assert_true(x.r.head == 1 && x.r.head_start == 5000);
    expect(&x, 2, SCHED_START, SCHED_WHY_BACKFILL, NULL);
    done(&x);
    /* no history, the rule off, or easy: the limit, which ends at 17000 > 5000 */
    decide_learn(&x, c, &lathe, p, 2, r1, 1, 1000, NULL, 0);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    done(&x);
    decide_learn(&x, c, &off, p, 2, r1, 1, 1000, fin, 10);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    done(&x);
    decide_learn(&x, c, &easy, p, 2, r1, 1, 1000, fin, 10);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    done(&x);

    /* 2. A running job with only a limit (40000 s) is predicted to end at 5000 */
    sched_job r2[1] = {limited(running(9, 0, 4, held, 0, 0), 40000)};
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 1000, fin, 10);
    assert_true(x.r.head == 1 && x.r.head_start == 5000);
    done(&x);
    decide_learn(&x, c, &off, p, 1, r2, 1, 1000, fin, 10);
    assert_true(x.r.head == 1 && x.r.head_start == 40000);
    done(&x);
    /* past its prediction: as long again as it ran (overrun), at most its limit */
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 6000, fin, 10);
    assert_true(x.r.head_start == 12000);
    done(&x);
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 30000, fin, 10);
    assert_true(x.r.head_start == 40000);
    done(&x);

    /* 3. Its team's jobs once it has SCHED_LEARN_MIN of them, else all teams'. Team 1 ran
     * half its limits; the largest ratio of all is a half. */
    sched_finished mix[SCHED_LEARN_MIN * 2];
    for (int i = 0; i < SCHED_LEARN_MIN; i++) {
        mix[2 * i] = (sched_finished){1, 1000, 500};
        mix[2 * i + 1] = (sched_finished){0, 1000, 125};
    }
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 1000, mix, SCHED_LEARN_MIN * 2);
    assert_true(x.r.head_start == 5000); /* team 0's own: an eighth */
    done(&x);
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 1000, mix, SCHED_LEARN_MIN * 2 - 1);
    assert_true(x.r.head_start == 20000); /* 7 of its own: all teams', a half */
    done(&x);

    /* 4. The window: a ratio of a half is forgotten after SCHED_LEARN_WINDOW newer jobs */
    assert_true(SCHED_LEARN_WINDOW + 1 <= 40);
    fin[0] = (sched_finished){0, 1000, 500};
    for (int i = 1; i <= SCHED_LEARN_WINDOW; i++) fin[i] = (sched_finished){0, 1000, 125};
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 1000, fin, SCHED_LEARN_WINDOW);
    assert_true(x.r.head_start == 20000);
    done(&x);
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 1000, fin, SCHED_LEARN_WINDOW + 1);
    assert_true(x.r.head_start == 5000);
    done(&x);

    /* 5. What is not a finished limit is ignored; a job that ran past its limit counts 1 */
    sched_finished bad[4] = {{0, 0, 100}, {0, 1000, NAN}, {0, 1000, -5}, {0, INFINITY, 10}};
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 1000, bad, 4);
    assert_true(x.r.head_start == 40000);
    done(&x);
    sched_finished over[1] = {{0, 1000, 3000}};
    decide_learn(&x, c, &lathe, p, 1, r2, 1, 1000, over, 1);
    assert_true(x.r.head_start == 40000);
    done(&x);

    /* 6. The incremental state learns the same (sched_state_add_finished) */
    sched_state *st = sched_state_new(c, &lathe);
    for (int i = 0; i < 10; i++) sched_state_add_finished(st, &(sched_finished){0, 1000, 125});
    char err[128];
    assert_int_equal(sched_state_add_running(st, &r1[0], err, sizeof err), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(sched_state_add_pending(st, &p[i]), 0);
    sched_result_init(&x.r);
    x.c = c;
    x.now = 1000;
    sched_state_pass(st, 1000, NULL, NULL, &x.r);
    assert_true(x.r.head == 1 && x.r.head_start == 5000);
    expect(&x, 2, SCHED_START, SCHED_WHY_BACKFILL, NULL);
    done(&x);
    sched_state_free(st);
    sched_cluster_free(c);
}

/* The starvation guard: a job whose order key is starve_after (48 h) in the
 * past goes ahead of fair share, may borrow beyond the idle pool, and holds
 * its team's quota when its own borrowing limit blocks it. */
static void test_due_jobs(void **state)
{
    (void)state;
    const double H = 3600;
    sched_cluster *c = two_teams(2, SCHED_UNLIMITED, 6, 1);
    int held[7] = {0, 1, 2, 3, 4, 5, 6};
    sched_job r[1] = {running(9, 2, 7, held, 0, 1e7)}; /* team-b holds 7 of 8 */
    /* one free GPU; team-a has used far more than team-b */
    sched_job p[2] = {job(1, 1, 1, 1, 0, 600), job(2, 2, 1, 1, 40 * H, 600)};
    double usage[3] = {0, 1e9, 0};
    /* the guard alone (the oldest-head rule would start job 1, see test_oldest_head) */
    sched_config cfg = lathe_without(SCHED_RULE_OLDEST_HEAD);
    run x;
    decide_cfg(&x, c, &cfg, p, 2, r, 1, 41 * H, usage, NULL);
    expect(&x, 2, SCHED_START, SCHED_WHY_FITS, NULL); /* fair share */
    done(&x);
    decide_cfg(&x, c, &cfg, p, 2, r, 1, 49 * H, usage, NULL);
    expect(&x, 1, SCHED_START, SCHED_WHY_FITS, NULL); /* job 1 is due: key 300 s <= 49 h - 48 h */
    done(&x);
    /* borrowing beyond the pool: team-b lends at most 1, job 3 needs 4 (2 beyond quota) */
    sched_job q[1] = {job(3, 1, 1, 4, 0, 600)};
    decide(&x, c, SCHED_LATHE, q, 1, NULL, 0, 10 * H, NULL, NULL);
    expect(&x, 3, SCHED_WAIT, SCHED_WHY_POOL, NULL);
    done(&x);
    decide(&x, c, SCHED_LATHE, q, 1, NULL, 0, 49 * H, NULL, NULL);
    expect(&x, 3, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    sched_cluster_free(c);
    /* a borrowing limit: team-a (quota 4, may not borrow) runs 3; its due
     * 2-GPU job holds the team's quota, so its fresh 1-GPU job waits */
    c = two_teams(4, 0, 4, SCHED_UNLIMITED);
    int h3[3] = {0, 1, 2};
    sched_job r3[1] = {running(9, 1, 3, h3, 0, 1e7)};
    sched_job w[2] = {job(4, 1, 1, 2, 0, 600), job(5, 1, 1, 1, 48 * H, 600)};
    decide(&x, c, SCHED_LATHE, w, 2, r3, 1, 49 * H, NULL, NULL);
    expect(&x, 4, SCHED_WAIT, SCHED_WHY_QUOTA, "team-a uses 3/4");
    expect(&x, 5, SCHED_WAIT, SCHED_WHY_TEAM_HELD, "team-a's quota is held for job 4");
    done(&x);
    decide(&x, c, SCHED_LATHE, w, 2, r3, 1, 48 * H + 100, NULL, NULL);
    expect(&x, 5, SCHED_START, SCHED_WHY_FITS, NULL); /* job 4 not due yet */
    done(&x);
    sched_cluster_free(c);
}

/* The oldest-head rule: a job that waited head_after (1 h) is tried before
 * fair share, oldest first, until one cannot start; that one holds the
 * reservation, so a heavy team's old job is not held back by a light
 * team's stream of new ones. Younger jobs keep fair share. */
static void test_oldest_head(void **state)
{
    (void)state;
    const double H = 3600;
    sched_cluster *c = two_teams(2, SCHED_UNLIMITED, 6, 1);
    int held[7] = {0, 1, 2, 3, 4, 5, 6};
    sched_job r[1] = {running(9, 2, 7, held, 0, 1e7)};
    sched_job p[2] = {job(1, 1, 1, 1, 0, 600), job(2, 2, 1, 1, 40 * H, 600)};
    double usage[3] = {0, 1e9, 0};
    run x;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, 41 * H, usage, NULL);
    expect(&x, 1, SCHED_START, SCHED_WHY_FITS, NULL); /* waited 41 h: before fair share */
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    done(&x);
    /* both younger than an hour: fair share decides */
    p[0].submit_time = 40.5 * H;
    decide(&x, c, SCHED_LATHE, p, 2, r, 1, 41 * H, usage, NULL);
    expect(&x, 2, SCHED_START, SCHED_WHY_FITS, NULL);
    done(&x);
    sched_cluster_free(c);
    /* the reservation: 2 nodes of 4, busy until 100 h (4 GPUs) and 200 h
     * (3 GPUs); team-a's old 4-GPU job and team-b's (light) new one: the
     * old one holds it */
    c = make_cluster(2, 4, 0, 0);
    int a = sched_cluster_add_team(c, "team-a"), b = sched_cluster_add_team(c, "team-b");
    int h0[4] = {0, 1, 2, 3}, h1[3] = {4, 5, 6};
    sched_job rr[2] = {running(8, 0, 4, h0, 0, 100 * H), running(9, 0, 3, h1, 0, 200 * H)};
    sched_job q[2] = {job(3, a, 1, 4, 0, 3600), job(4, b, 1, 4, 29.5 * H, 3600)};
    double u2[4] = {0, 1e9, 0, 0};
    decide(&x, c, SCHED_LATHE, q, 2, rr, 2, 30 * H, u2, NULL);
    assert_int_equal(x.r.head, 3);
    assert_true(x.r.head_start == 100 * H);
    expect(&x, 4, SCHED_WAIT, SCHED_WHY_NO_FIT, NULL);
    done(&x);
    sched_config cfg = lathe_without(SCHED_RULE_OLDEST_HEAD);
    decide_cfg(&x, c, &cfg, q, 2, rr, 2, 30 * H, u2, NULL);
    assert_int_equal(x.r.head, 4); /* fair share (job 3 is not due yet): team-b's job */
    expect(&x, 3, SCHED_WAIT, SCHED_WHY_NO_FIT, NULL);
    done(&x);
    sched_cluster_free(c);
}

/* The pool-head rule: a job refused only because other teams have no idle
 * quota to lend waits for their GPUs, and may hold the reservation: its
 * start is the first time, as their jobs end, that it is both admitted and
 * fits. */
static void test_pool_head(void **state)
{
    (void)state;
    /* team-a quota 2 (may borrow), team-b quota 6 runs 6 until 1000: team-a's
     * 4-GPU job needs 2 beyond its quota and nobody has idle quota */
    sched_cluster *c = two_teams(2, SCHED_UNLIMITED, 6, SCHED_UNLIMITED);
    int h[6] = {0, 1, 2, 3, 4, 5};
    sched_job r[1] = {running(9, 2, 6, h, 0, 1000)};
    sched_job p[1] = {job(1, 1, 1, 4, 0, 600)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, r, 1, 100, NULL, NULL);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, "reserved for it from in 15m");
    assert_int_equal(x.r.head, 1);
    assert_true(x.r.head_start == 1000);
    done(&x);
    sched_config cfg = lathe_without(SCHED_RULE_POOL_HEAD);
    decide_cfg(&x, c, &cfg, p, 1, r, 1, 100, NULL, NULL);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_POOL, "other teams have no idle quota to lend");
    assert_int_equal(x.r.head, 0);
    done(&x);
    sched_cluster_free(c);
}

/* The end-pack rule: a job that fits on one node goes where the running
 * jobs keep the node busy longest past its own end, so that nodes empty
 * whole; an empty node last. */
static void test_end_pack(void **state)
{
    (void)state;
    /* 3 nodes of 4: node 0 busy (2 GPUs) until 1000, node 1 (2 GPUs) until 5000, node 2 empty */
    sched_cluster *c = make_cluster(3, 4, 0, 0);
    int h0[2] = {0, 1}, h1[2] = {4, 5};
    sched_job r[2] = {running(8, 0, 2, h0, 0, 1000), running(9, 0, 2, h1, 0, 5000)};
    sched_job p[1] = {job(1, 0, 1, 1, 0, 2000)}; /* ends at 2100 */
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, r, 2, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){6}, 1); /* node 1 stays busy until 5000 anyway */
    done(&x);
    sched_config cfg = lathe_without(SCHED_RULE_END_PACK);
    decide_cfg(&x, c, &cfg, p, 1, r, 2, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){2}, 1); /* best fit: the first of two nodes with 2 free */
    done(&x);
    /* a job ending before both: equal, then best fit and position (node 0) */
    p[0].est_duration = 500;
    decide(&x, c, SCHED_LATHE, p, 1, r, 2, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){2}, 1);
    done(&x);
    /* 3 GPUs fit only on the empty node */
    p[0].gpus_per_replica = 3;
    decide(&x, c, SCHED_LATHE, p, 1, r, 2, 100, NULL, NULL);
    expect_start(&x, 1, (int[]){8, 9, 10}, 3);
    done(&x);
    sched_cluster_free(c);
}

/* The idle-reserve rule: the head's GPUs at its reserved start are those
 * that would idle least before it, so GPUs free now stay free for jobs of
 * any length. */
static void test_idle_reserve(void **state)
{
    (void)state;
    /* 3 nodes of 4: node 0 free; nodes 1 and 2 busy until 100. The head
     * (2 x 4 GPUs) can start at 100 on any two nodes. */
    sched_cluster *c = make_cluster(3, 4, 0, 0);
    int h1[4] = {4, 5, 6, 7}, h2[4] = {8, 9, 10, 11};
    sched_job r[2] = {running(8, 0, 4, h1, 0, 100), running(9, 0, 4, h2, 0, 100)};
    sched_job p[2] = {job(1, 0, 2, 4, 0, 500), job(2, 0, 1, 4, 5, 1000)};
    p[0].priority = 5; /* the head */
    run x;
    decide_eager(&x, c, p, 2, r, 2, 10);
    assert_int_equal(x.r.head, 1);
    assert_true(x.r.head_start == 100);
    /* nodes 1 and 2 are reserved (idle 0 before 100); the long job takes node 0 */
    expect(&x, 2, SCHED_START, SCHED_WHY_BACKFILL, NULL);
    expect_start(&x, 2, (int[]){0, 1, 2, 3}, 4);
    assert_int_equal(x.r.resv_free_gpus, 0);
    done(&x);
    /* (without reserve-tail, which would let the long job pass once: it ends last) */
    sched_config cfg = lathe_without(SCHED_RULE_IDLE_RESERVE | SCHED_RULE_RESERVE_TAIL | SCHED_RULE_RENT_RESERVE);
    decide_cfg(&x, c, &cfg, p, 2, r, 2, 10, NULL, NULL);
    /* best fit reserves nodes 0 and 1: node 0 idles 90 s x 4 and the long job waits */
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    assert_int_equal(x.r.resv_free_gpus, 4);
    done(&x);
    sched_cluster_free(c);
}

/* reserve-tail: a job that would end after every other job (estimates)
 * may take the head's reserved GPUs once, when the head still fits beside
 * it; the head's reserved start moves to when it does. */
static void test_reserve_tail(void **state)
{
    (void)state;
    /* 4 nodes of 4: nodes 0 and 3 free, node 1 busy until 100, node 2 until
     * 200. The head (3 x 4) is reserved nodes 0, 1 and 3 from 100. */
    sched_cluster *c = make_cluster(4, 4, 0, 0);
    int h1[4] = {4, 5, 6, 7}, h2[4] = {8, 9, 10, 11};
    sched_job r[2] = {running(8, 0, 4, h1, 0, 100), running(9, 0, 4, h2, 0, 200)};
    sched_job p[4] = {job(1, 0, 3, 4, 0, 50), job(2, 0, 1, 4, 5, 1000), job(3, 0, 1, 4, 6, 2000),
                      job(4, 0, 1, 4, 7, 150)};
    p[0].priority = 5; /* the head */
    run x;
    decide_eager(&x, c, p, 4, r, 2, 10);
    assert_int_equal(x.r.head, 1);
    /* job 2 ends at 1010, after everything else (node 2 at 200, the head at
     * 150 or 250): it takes a reserved node, and the head now fits at 200 on
     * nodes 1, 2 and the other free one */
    expect(&x, 2, SCHED_START, SCHED_WHY_TAIL, "would end after every other job");
    expect(&x, 2, SCHED_START, SCHED_WHY_TAIL, "reserved start now in 3m10s");
    assert_true(x.r.head_start == 200);
    /* job 3 would end later still, but the head was passed once already */
    expect(&x, 3, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    /* job 4 (ends at 160) is no tail job: node 2 frees later; it was looked
     * at first (shorter), while it would have delayed the start at 100 */
    expect(&x, 4, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    done(&x);

    /* without the rule the reservation holds: nothing long starts */
    sched_config cfg = lathe_without(SCHED_RULE_RESERVE_TAIL | SCHED_RULE_RENT_RESERVE);
    decide_cfg(&x, c, &cfg, p, 4, r, 2, 10, NULL, NULL);
    assert_true(x.r.head_start == 100);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    expect(&x, 3, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    done(&x);

    /* known work that needs longer than job 2 runs (job 5: 4 GPUs x 5000 s,
     * 2145 s of work per GPU in all): job 2 does not end the busy period,
     * job 5 does and passes instead */
    sched_job p5[5] = {p[0], p[1], p[2], p[3], job(5, 0, 1, 4, 8, 5000)};
    decide_eager(&x, c, p5, 5, r, 2, 10);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    expect(&x, 5, SCHED_START, SCHED_WHY_TAIL, NULL);
    done(&x);

    /* the exchange must pay: with node 2 busy until 1000 the head would
     * wait 900 s more, more than the 140 s job 2 is spared (it could start
     * when the head ends, at 150) */
    sched_job r2[2] = {r[0], running(9, 0, 4, h2, 0, 1000)};
    sched_job p2[2] = {p[0], job(2, 0, 1, 4, 5, 3000)};
    decide_eager(&x, c, p2, 2, r2, 2, 10);
    assert_true(x.r.head_start == 100);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    done(&x);

    /* a head of all 4 nodes cannot fit beside any job: the tail job waits
     * and the reservation is as it was */
    p[0].replicas = 4;
    decide_eager(&x, c, p, 4, r, 2, 10);
    assert_int_equal(x.r.head, 1);
    assert_true(x.r.head_start == 200);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    expect(&x, 4, SCHED_START, SCHED_WHY_BACKFILL, NULL); /* ends at 160, before 200 */
    assert_int_equal(x.r.resv_free_gpus, 4); /* one free node idles for the head */
    done(&x);
    sched_cluster_free(c);
}

/* rent-reserve: a job buys the reservation once the GPU-seconds it has
 * waited (its GPUs x its wait) reach the GPU-seconds the drain would leave
 * idle; until then it waits as under greedy, and the result says when it
 * will have paid. */
static void test_rent_reserve(void **state)
{
    (void)state;
    /* 2 nodes of 4: node 1 busy until 1000, GPUs 0-1 until 100, 2-3 free.
     * W (2 x 4 GPUs, 50 s) cannot start before 1000; N (2 GPUs, 5000 s)
     * fits on 2-3 now. */
    sched_cluster *c = make_cluster(2, 4, 0, 0);
    int h0[2] = {0, 1}, h1[4] = {4, 5, 6, 7};
    sched_job r[2] = {running(8, 0, 2, h0, 0, 100), running(9, 0, 4, h1, 0, 1000)};
    sched_job p[2] = {job(1, 0, 2, 4, 0, 50), job(2, 0, 1, 2, 1, 5000)};
    run x;
    /* at 10 the drain idles 2 x 990 + 2 x 900 = 3780 GPU-seconds; W has
     * paid 8 x 10: no reservation, N starts on the free GPUs */
    decide(&x, c, SCHED_LATHE, p, 2, r, 2, 10, NULL, NULL);
    assert_int_equal(x.r.head, 0);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_NO_FIT, "it takes a reservation in 7m43s, once its wait has paid for the 1.1 GPU-hours");
    expect_start(&x, 2, (int[]){2, 3}, 2);
    assert_true(x.r.wake_at == 3780.0 / 8);
    done(&x);
    /* at 500 the drain idles 4 x 500 = 2000 and W has paid 4000: it holds
     * the reservation and N, which would run past 1000, waits */
    decide(&x, c, SCHED_LATHE, p, 2, r, 2, 500, NULL, NULL);
    assert_int_equal(x.r.head, 1);
    assert_true(x.r.head_start == 1000);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    assert_false(isfinite(x.r.wake_at));
    done(&x);
    /* without the rule, or for a job that gives only a time limit (a drain
     * from limits is a bound, not a price), or a due job: bought at once */
    sched_config cfg = lathe_without(SCHED_RULE_RENT_RESERVE);
    decide_cfg(&x, c, &cfg, p, 2, r, 2, 10, NULL, NULL);
    assert_int_equal(x.r.head, 1);
    expect(&x, 2, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, NULL);
    done(&x);
    sched_job q[2] = {p[0], p[1]};
    q[0].est_duration = 0;
    q[0].max_duration = 50;
    decide(&x, c, SCHED_LATHE, q, 2, r, 2, 10, NULL, NULL);
    assert_int_equal(x.r.head, 1);
    done(&x);
    sched_config_default(&cfg, SCHED_LATHE);
    cfg.starve_after = -3600; /* every job is due */
    decide_cfg(&x, c, &cfg, p, 2, r, 2, 10, NULL, NULL);
    assert_int_equal(x.r.head, 1);
    done(&x);
    sched_cluster_free(c);
}

/* long_after: a job estimated to run longer than 72 h goes ahead by the
 * excess (at most long_max, 4 days) if it uses at most long_gpus (16) GPUs;
 * but it holds the reservation only once it has waited longest. */
static void test_long_first(void **state)
{
    (void)state;
    const double H = 3600;
    sched_cluster *c = make_cluster(2, 8, 0, 0);
    int h0[7] = {0, 1, 2, 3, 4, 5, 6}, h1[8] = {8, 9, 10, 11, 12, 13, 14, 15};
    sched_job r[2] = {running(8, 0, 7, h0, 0, 1e6), running(9, 0, 8, h1, 0, 2e6)};
    /* one free GPU: a 1 h job submitted first, a 5-day job 100 s later */
    sched_job p[2] = {job(1, 0, 1, 1, 0, H), job(2, 0, 1, 1, 100, 120 * H)};
    run x;
    decide_eager(&x, c, p, 2, r, 2, 200);
    expect_start(&x, 2, (int[]){7}, 1);
    done(&x);
    sched_config cfg;
    sched_config_default(&cfg, SCHED_LATHE);
    cfg.long_max = 0;
    cfg.rules &= ~SCHED_RULE_RENT_RESERVE;
    decide_cfg(&x, c, &cfg, p, 2, r, 2, 200, NULL, NULL);
    expect_start(&x, 1, (int[]){7}, 1); /* size order: the short one */
    done(&x);
    /* a 5-day job of 32 GPUs is too wide to pass others */
    sched_cluster *big = make_cluster(5, 8, 0, 0);
    sched_job rb[1] = {running(9, 0, 7, h0, 0, 1e6)};
    sched_job pb[2] = {job(1, 0, 1, 1, 0, H), job(2, 0, 4, 8, 100, 120 * H)};
    decide_eager(&x, big, pb, 2, rb, 1, 200);
    expect_start(&x, 1, (int[]){7}, 1);
    done(&x);
    sched_cluster_free(big);
    /* neither of two 16-GPU jobs fits; the 5-day one comes first in the order
     * but the reservation goes to the other, which waited longer by its age */
    sched_job q[2] = {job(3, 0, 2, 8, 100, 120 * H), job(4, 0, 2, 8, 200, H)};
    decide_eager(&x, c, q, 2, r, 2, 20000);
    assert_int_equal(x.r.head, 4);
    expect(&x, 3, SCHED_WAIT, SCHED_WHY_BEHIND_HEAD, "held for job 4");
    done(&x);
    sched_cluster_free(c);
}

/* due_preempt: a due job may preempt newer jobs when that costs less than
 * draining GPUs for it would leave idle; the cost counts each victim's lost
 * work and its wait in the queue again (at least until the due job's
 * reserved start, on all its GPUs). */
static void test_due_preempt_cost(void **state)
{
    (void)state;
    const double H = 3600;
    sched_cluster *c = make_cluster(1, 8, 0, 0);
    sched_config cfg;
    sched_config_default(&cfg, SCHED_LATHE);
    cfg.due_preempt = true;
    double now = 60 * H;
    /* two 1-GPU jobs until now + 10000 (lose 300 s each), 6 GPUs free: the
     * drain idles 6 x 10000 GPU-s, the preemption costs 2 x (300 + 10000) */
    int g[6][1] = {{0}, {1}, {2}, {3}, {4}, {5}};
    sched_job r[6];
    for (int i = 0; i < 6; i++) {
        r[i] = running(10 + i, 0, 1, g[i], now - 3900, 3900 + 10000);
        r[i].submit_time = now - 4000;
        r[i].checkpoint_interval = 600;
    }
    sched_job p[1] = {job(1, 0, 1, 8, 0, H)}; /* due: waited 60 h */
    run x;
    decide_cfg(&x, c, &cfg, p, 1, r, 2, now, NULL, NULL);
    expect(&x, 10, SCHED_PREEMPT, SCHED_WHY_PREEMPT_DUE, "loses 5m");
    expect(&x, 11, SCHED_PREEMPT, SCHED_WHY_PREEMPT_DUE, NULL);
    expect_start(&x, 1, (int[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
    done(&x);
    /* six such jobs, 2 GPUs free: 6 x 10300 > 2 x 10000, it waits */
    decide_cfg(&x, c, &cfg, p, 1, r, 6, now, NULL, NULL);
    assert_int_equal(x.r.n_preempt, 0);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_RESERVED, NULL);
    done(&x);
    sched_cluster_free(c);
}

static void test_nodes_down(void **state)
{
    (void)state;
    sched_cluster *c = sched_cluster_new();
    sched_cluster_add_type(c, "H100", 80 * GIB, 4);
    sched_cluster_add_node(c, "h-1", NULL, 0, 8, NULL, SCHED_NODE_DOWN);
    sched_cluster_add_node(c, "h-2", NULL, 0, 4, NULL, SCHED_NODE_DRAINING);
    sched_cluster_add_team(c, "default");
    sched_job p[1] = {job(1, 0, 1, 8, 0, 100)};
    run x;
    decide(&x, c, SCHED_LATHE, p, 1, NULL, 0, 10, NULL, NULL);
    expect(&x, 1, SCHED_WAIT, SCHED_WHY_NODES_DOWN, "the H100 GPUs it needs are on nodes that are not ready");
    assert_int_equal(x.r.free_gpus, 0);
    done(&x);
    sched_cluster_free(c);
}

/* ---- the state ---- */

/* A mixed scenario: the incremental state, fed in another order and asked
 * twice, decides exactly what the pure function decides. */
static void test_state_matches_pure(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(6, 8, 3, 4);
    int a = sched_cluster_add_team(c, "team-a"), b = sched_cluster_add_team(c, "team-b");
    sched_team_set_quota(c, a, 0, 24, SCHED_UNLIMITED, SCHED_UNLIMITED);
    sched_team_set_quota(c, b, 0, 24, 8, SCHED_UNLIMITED);
    enum { NP = 60, NR = 6 };
    sched_job p[NP], r[NR];
    int gpus[NR][8];
    for (int i = 0; i < NR; i++) {
        for (int g = 0; g < 5; g++) gpus[i][g] = i * 8 + g;
        r[i] = running(1000 + i, 1 + i % 2, 5, gpus[i], 10 * i, 500 + 300 * i);
    }
    unsigned seed = 7;
    for (int i = 0; i < NP; i++) {
        seed = seed * 1103515245u + 12345u;
        int sizes[6] = {1, 1, 1, 2, 4, 8};
        p[i] = job(1 + i, (int)(seed >> 8) % 3, 1, sizes[(seed >> 12) % 6], i * 7.0, 60 + (seed >> 16) % 5000);
        if (i % 10 == 9) p[i].replicas = 2;
        if (i % 7 == 3) p[i].share = 25;
        if (i % 11 == 5) p[i].priority = 10;
    }
    for (int pol = 0; pol < SCHED_N_POLICIES; pol++) {
        run x;
        decide(&x, c, (sched_policy)pol, p, NP, r, NR, 400, NULL, NULL);
        sched_config cfg;
        sched_config_default(&cfg, (sched_policy)pol);
        sched_state *st = sched_state_new(c, &cfg);
        char err[128];
        for (int i = NP - 1; i >= 0; i--) assert_int_equal(sched_state_add_pending(st, &p[i]), 0);
        for (int i = NR - 1; i >= 0; i--) assert_int_equal(sched_state_add_running(st, &r[i], err, sizeof err), 0);
        /* churn: remove and re-add some jobs */
        for (int i = 0; i < NP; i += 3) {
            assert_true(sched_state_remove_pending(st, p[i].id));
            assert_int_equal(sched_state_add_pending(st, &p[i]), 0);
        }
        assert_int_equal(sched_state_add_pending(st, &p[0]), -1); /* duplicate id */
        for (int rep = 0; rep < 2; rep++) {
            sched_result y;
            sched_result_init(&y);
            sched_state_pass(st, 400, NULL, NULL, &y);
            assert_int_equal(y.n, x.r.n);
            assert_int_equal(y.n_gpus, x.r.n_gpus);
            for (size_t i = 0; i < y.n; i++) {
                assert_int_equal(y.d[i].job, x.r.d[i].job);
                assert_int_equal(y.d[i].action, x.r.d[i].action);
                assert_int_equal(y.d[i].why.code, x.r.d[i].why.code);
            }
            assert_memory_equal(y.gpus, x.r.gpus, y.n_gpus * sizeof(int));
            assert_true(y.n_start > 0);
            sched_result_free(&y);
        }
        sched_state_free(st);
        done(&x);
    }
    sched_cluster_free(c);
}

static void test_state_rejects_bad_running(void **state)
{
    (void)state;
    sched_cluster *c = make_cluster(1, 2, 0, 0);
    sched_config cfg;
    sched_config_default(&cfg, SCHED_LATHE);
    sched_state *st = sched_state_new(c, &cfg);
    char err[128];
    int g0[1] = {0}, g9[1] = {9};
    sched_job a = running(1, 0, 1, g0, 0, 10), b = running(2, 0, 1, g0, 0, 10), d = running(3, 0, 1, g9, 0, 10);
    assert_int_equal(sched_state_add_running(st, &a, err, sizeof err), 0);
    assert_int_equal(sched_state_add_running(st, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "already full"));
    assert_int_equal(sched_state_add_running(st, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not exist"));
    assert_true(sched_state_remove_running(st, 1));
    assert_false(sched_state_remove_running(st, 1));
    assert_int_equal(sched_state_add_running(st, &b, err, sizeof err), 0);
    assert_int_equal(sched_state_n_running(st), 1);
    sched_state_free(st);
    sched_cluster_free(c);
}

static void test_usage_decay(void **state)
{
    (void)state;
    double h = 3600;
    /* no allocation: halves every half-life */
    assert_true(fabs(sched_usage_advance(1000, 0, h, h) - 500) < 1e-9);
    /* a constant allocation converges to alloc * h / ln 2 */
    double u = 0;
    for (int i = 0; i < 100; i++) u = sched_usage_advance(u, 4, h, h);
    assert_true(fabs(u - 4 * h / M_LN2) < 1e-6);
    /* one long step equals many short ones */
    double a = sched_usage_advance(100, 2, 7200, h), b = 100;
    for (int i = 0; i < 72; i++) b = sched_usage_advance(b, 2, 100, h);
    assert_true(fabs(a - b) < 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_first_fit),
        cmocka_unit_test(test_fifo_blocks_greedy_skips),
        cmocka_unit_test(test_quota),
        cmocka_unit_test(test_borrow_and_lending_limit),
        cmocka_unit_test(test_budget_and_job_limit),
        cmocka_unit_test(test_reject),
        cmocka_unit_test(test_gang),
        cmocka_unit_test(test_topology_nvlink),
        cmocka_unit_test(test_topology_best_fit_and_rack),
        cmocka_unit_test(test_cheaper_type_first),
        cmocka_unit_test(test_backfill_never_delays_head),
        cmocka_unit_test(test_backfill_outside_reservation),
        cmocka_unit_test(test_priority_preemption_victims),
        cmocka_unit_test(test_reclaim),
        cmocka_unit_test(test_reclaim_small_and_backoff),
        cmocka_unit_test(test_reclaim_tail),
        cmocka_unit_test(test_reserve_tail),
        cmocka_unit_test(test_rent_reserve),
        cmocka_unit_test(test_sharing),
        cmocka_unit_test(test_fair_share),
        cmocka_unit_test(test_order_short_first_but_bounded),
        cmocka_unit_test(test_overrun),
        cmocka_unit_test(test_learn_limit),
        cmocka_unit_test(test_due_jobs),
        cmocka_unit_test(test_oldest_head),
        cmocka_unit_test(test_pool_head),
        cmocka_unit_test(test_end_pack),
        cmocka_unit_test(test_idle_reserve),
        cmocka_unit_test(test_long_first),
        cmocka_unit_test(test_due_preempt_cost),
        cmocka_unit_test(test_nodes_down),
        cmocka_unit_test(test_state_matches_pure),
        cmocka_unit_test(test_state_rejects_bad_running),
        cmocka_unit_test(test_usage_decay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
