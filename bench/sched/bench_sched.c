/* bench_sched.c: how long one scheduling pass takes, and how it grows.
 *
 * For 1,000 / 10,000 / 50,000 GPUs (8-GPU nodes, two NVLink groups each,
 * 32 nodes per rack, four teams with quotas) and 10,000 / 50,000 pending
 * jobs drawn from `lathe trace-gen`'s workload, it first fills the cluster
 * (one pass over enough jobs, their starts applied), then adds the pending
 * jobs and times:
 *
 *   pass      one sched_state_pass (lathe policy, with a reason for every
 *             waiting job, as the controller runs it)
 *   quiet     the same without reasons (as the simulator runs it)
 *   pure      sched_decide: building the indexes from scratch plus a pass
 *   naive     the baseline, measured in the same run: first fit by scanning
 *             every node for every pending job, O(jobs x nodes), with no
 *             quotas, topology or reasons at all
 *
 * and prints decisions per second and the growth from 10,000 to 50,000
 * pending against n log n.
 *
 * usage: bench_sched [--quick]   (--quick: 1,000 and 10,000 GPUs only)
 */
#include "sched/sched.h"
#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static sched_cluster *make_cluster(int gpus)
{
    sched_cluster *c = sched_cluster_new();
    sched_cluster_add_type(c, "A100-80GB", 80 * GIB, 2.5);
    int nv[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    for (int i = 0; i < gpus / 8; i++) {
        char name[32], rack[32];
        snprintf(name, sizeof name, "node-%d", i);
        snprintf(rack, sizeof rack, "rack-%d", i / 32);
        sched_cluster_add_node(c, name, rack, 0, 8, nv, SCHED_NODE_READY);
    }
    static const double share[4] = {0.4, 0.3, 0.2, 0.1};
    for (int t = 0; t < 4; t++) {
        char name[16];
        snprintf(name, sizeof name, "team-%d", t + 1);
        int k = sched_cluster_add_team(c, name);
        sched_team_set_quota(c, k, 0, (int)(gpus * share[t]), SCHED_UNLIMITED, SCHED_UNLIMITED);
    }
    sched_cluster_add_priority(c, "high", 1000, true, false);
    sched_cluster_add_priority(c, "default", 0, true, true);
    return c;
}

/* n jobs of the synthetic workload, bound to the cluster; ids from first_id. */
static sim_trace make_jobs(size_t n, int gpus, uint64_t seed)
{
    sim_gen_opts o;
    sim_gen_defaults(&o);
    o.jobs = n;
    o.gpus = gpus;
    o.seed = seed;
    sim_trace t;
    sim_gen(&o, &t);
    return t;
}

/* Fills the cluster: one pass over `fill` jobs, their starts applied. */
static void fill(sched_state *st, const sim_bound *b, sched_result *r)
{
    for (size_t i = 0; i < b->n; i++) sched_state_add_pending(st, &b->jobs[i]);
    sched_state_pass(st, 0, NULL, NULL, r);
    char err[256];
    for (size_t i = 0; i < b->n; i++) sched_state_remove_pending(st, b->jobs[i].id);
    for (size_t k = 0; k < r->n; k++) {
        const sched_decision *d = &r->d[k];
        if (d->action != SCHED_START) continue;
        sched_job j = b->jobs[d->job - 1];
        j.start_time = 0;
        j.submit_time = -1;
        j.gpus = sched_decision_gpus(r, d);
        if (sched_state_add_running(st, &j, err, sizeof err) < 0) {
            fprintf(stderr, "bench_sched: %s\n", err);
            exit(70);
        }
    }
}

/* The baseline: first fit over a plain array of free GPUs per node, the
 * running jobs' GPUs taken out first. */
static double naive(const sched_cluster *c, const sched_job *run, size_t nrun, const sim_bound *b,
                    int *starts)
{
    int *nfree = malloc((size_t)c->n_nodes * sizeof *nfree);
    for (int n = 0; n < c->n_nodes; n++) nfree[n] = c->nodes[n].n_gpus;
    for (size_t i = 0; i < nrun; i++)
        for (int g = 0; g < run[i].replicas * run[i].gpus_per_replica; g++) nfree[c->gpu_node[run[i].gpus[g]]]--;
    double t0 = now_s();
    int s = 0;
    for (size_t i = 0; i < b->n; i++) {
        const sched_job *j = &b->jobs[i];
        int need = j->gpus_per_replica, left = j->replicas;
        for (int n = 0; n < c->n_nodes && left > 0; n++)
            while (nfree[n] >= need && left > 0) {
                nfree[n] -= need;
                left--;
            }
        if (left == 0) s++;
    }
    double t = now_s() - t0;
    free(nfree);
    *starts = s;
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of reps timings of one pass. */
static double time_pass(sched_state *st, bool reasons, int reps, sched_result *r)
{
    double t[9];
    sched_state_set_reasons(st, reasons);
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        sched_state_pass(st, 3600, NULL, NULL, r);
        t[i] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    return t[reps / 2];
}

typedef struct row {
    int gpus;
    size_t pending;
    double pass, quiet, pure, naive;
    size_t starts, decisions;
} row;

static row measure(int gpus, size_t pending)
{
    row w = {gpus, pending, 0, 0, 0, 0, 0, 0};
    sched_cluster *c = make_cluster(gpus);
    diag_list d;
    diag_list_init(&d);
    sim_trace ft = make_jobs((size_t)gpus, gpus, 7), pt = make_jobs(pending, gpus, 11);
    sim_bound fb, pb;
    sim_bind(&ft, c, &fb, &d);
    sim_bind(&pt, c, &pb, &d);
    for (size_t i = 0; i < pb.n; i++) pb.jobs[i].id += 1000000000ull; /* distinct from the fill */
    sched_config cfg;
    sched_config_default(&cfg, SCHED_LATHE);
    sched_state *st = sched_state_new(c, &cfg);
    sched_result r;
    sched_result_init(&r);
    fill(st, &fb, &r);
    for (size_t i = 0; i < pb.n; i++) sched_state_add_pending(st, &pb.jobs[i]);
    int reps = pending > 20000 || gpus > 20000 ? 3 : 5;
    w.pass = time_pass(st, true, reps, &r);
    w.starts = r.n_start;
    w.decisions = r.n;
    w.quiet = time_pass(st, false, reps, &r);

    /* the pure function: everything handed over, indexes built from scratch */
    size_t nr = sched_state_n_running(st);
    sched_job *run = malloc((nr + 1) * sizeof *run);
    size_t k = 0;
    for (size_t i = 0; i < fb.n; i++) {
        const sched_job *j = sched_state_job(st, fb.jobs[i].id);
        if (j && j->gpus) run[k++] = *j;
    }
    sched_input in = {pb.jobs, pb.n, run, k, NULL, NULL, 3600, NULL, 0};
    char err[256];
    double t0 = now_s();
    if (sched_decide(c, &cfg, &in, &r, err, sizeof err) < 0) fprintf(stderr, "bench_sched: %s\n", err);
    w.pure = now_s() - t0;
    int ns;
    w.naive = naive(c, run, k, &pb, &ns);
    free(run);
    sched_result_free(&r);
    sched_state_free(st);
    sim_bound_free(&fb);
    sim_bound_free(&pb);
    sim_trace_free(&ft);
    sim_trace_free(&pt);
    diag_list_free(&d);
    sched_cluster_free(c);
    return w;
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    static const int gpus[3] = {1000, 10000, 50000};
    static const size_t pend[2] = {10000, 50000};
    row rows[6];
    int n = 0;
    printf("one scheduling pass, lathe policy, cluster ~full, times in ms (median)\n\n");
    printf("%7s %8s %9s %9s %9s %7s %10s %12s %9s %8s\n", "GPUs", "pending", "pass", "quiet", "pure",
           "starts", "decisions", "decisions/s", "naive", "x naive");
    for (int g = 0; g < (quick ? 2 : 3); g++)
        for (int p = 0; p < 2; p++) {
            row w = measure(gpus[g], pend[p]);
            rows[n++] = w;
            printf("%7d %8zu %9.2f %9.2f %9.2f %7zu %10zu %12.0f %9.2f %8.2f\n", w.gpus, w.pending,
                   w.pass * 1e3, w.quiet * 1e3, w.pure * 1e3, w.starts, w.decisions,
                   (double)w.decisions / w.pass, w.naive * 1e3, w.pass / w.naive);
            fflush(stdout);
        }
    printf("\ngrowth from 10,000 to 50,000 pending (n log n predicts x%.2f, n x%.2f):\n",
           5 * log(50000.0) / log(10000.0), 5.0);
    for (int i = 0; i + 1 < n; i += 2)
        printf("  %6d GPUs: pass x%.2f, pure x%.2f\n", rows[i].gpus, rows[i + 1].pass / rows[i].pass,
               rows[i + 1].pure / rows[i].pure);
    for (int i = 0; i < n; i++)
        if (rows[i].gpus == 10000 && rows[i].pending == 50000)
            printf("\ngoal: one pass over 50,000 pending on 10,000 GPUs under 50 ms: %.2f ms (%s)\n",
                   rows[i].pass * 1e3, rows[i].pass < 0.05 ? "met" : "NOT met");
    printf("for scale: Slurm sustains about 500 jobs/s, kube-scheduler about 50 pods/s\n");
    return 0;
}
