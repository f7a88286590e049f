/* bench_slurm.c: the Slurm executor against a real Slurm (slurm-local),
 * with N queued jobs (default 1,000; the partition is set down so that
 * they stay pending), measured in one run against a baseline:
 *
 *   lathe      the backend as the server uses it: N sbatch (exec_start),
 *              then controller turns that poll every handle: one squeue
 *              --json per turn, whatever N;
 *   baseline   the same turns done the naive way: one `squeue -j ID` per
 *              job per turn.
 *
 * Figures: sbatch calls per second; slurmctld RPCs per turn (sdiag's
 * counts by message type, summed, before and after each turn); the
 * controller's CPU per turn (this process and its children: squeue's own
 * parsing counts, as the server would pay it); slurmctld's CPU per turn
 * (/proc of its pid). Run it with bench/slurm/run.sh, which starts and
 * stops its own cluster; by hand: SLURM_CONF set, --ctld-pid PID.
 *
 *   bench_slurm [--jobs N] [--turns T] [--baseline-turns B] --ctld-pid PID --dir DIR
 */
#define _GNU_SOURCE
#include "base/base.h"
#include "exec/exec.h"

#include "../common/bench_clock.h"

#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* CPU seconds of this process and its waited-for children. */
static double my_cpu(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
           (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec + b.ru_stime.tv_usec) / 1e6;
}

/* CPU seconds of process pid (utime + stime of /proc/PID/stat). */
static double proc_cpu(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!rp || sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Runs argv, its stdout into out (may be NULL: discarded); exit code. */
static int run(char *const argv[], sb *out)
{
    int p[2];
    if (pipe(p) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        return -1;
    }
    char buf[65536];
    ssize_t r;
    while ((r = read(p[0], buf, sizeof buf)) > 0)
        if (out) sb_putn(out, buf, (size_t)r);
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The sum of sdiag's RPC counts by message type (every RPC slurmctld
 * served), and those of REQUEST_JOB_INFO* (squeue's). */
static void sdiag_counts(long long *all, long long *job_info)
{
    char *argv[] = {"sdiag", NULL};
    sb out;
    sb_init(&out);
    run(argv, &out);
    *all = *job_info = 0;
    const char *t = sb_str(&out);
    const char *sec = strstr(t, "Remote Procedure Call statistics by message type");
    const char *end = sec ? strstr(sec, "Remote Procedure Call statistics by user") : NULL;
    for (const char *p = sec; p && (!end || p < end); p = strchr(p + 1, '\n')) {
        const char *c = strstr(p, "count:");
        const char *nl = strchr(p + 1, '\n');
        if (!c || (nl && c > nl)) continue;
        long long n = atoll(c + 6);
        *all += n;
        const char *q = p + 1;
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, "REQUEST_JOB_INFO", 16) == 0) *job_info += n;
    }
    sb_free(&out);
}

typedef struct turn_stats {
    double secs, cpu, ctld_cpu;
    long long rpcs, job_info;
} turn_stats;

static void before(turn_stats *s, int ctld, double *t0, double *c0, double *k0, long long *r0,
                   long long *j0)
{
    (void)s;
    sdiag_counts(r0, j0);
    *t0 = now_s();
    *c0 = my_cpu();
    *k0 = proc_cpu(ctld);
}

static void after(turn_stats *s, int ctld, double t0, double c0, double k0, long long r0, long long j0)
{
    s->secs += now_s() - t0;
    s->cpu += my_cpu() - c0;
    s->ctld_cpu += proc_cpu(ctld) - k0;
    long long r1, j1;
    sdiag_counts(&r1, &j1);
    s->rpcs += r1 - r0 - 1; /* less sdiag's own RPC */
    s->job_info += j1 - j0;
}

int main(int argc, char **argv)
{
    int jobs = 1000, turns = 5, base_turns = 2, ctld = 0;
    const char *dir = NULL;
    static const struct option longs[] = {{"jobs", required_argument, NULL, 'n'},
                                          {"turns", required_argument, NULL, 't'},
                                          {"baseline-turns", required_argument, NULL, 'b'},
                                          {"ctld-pid", required_argument, NULL, 'p'},
                                          {"dir", required_argument, NULL, 'd'},
                                          {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'n': jobs = atoi(optarg); break;
        case 't': turns = atoi(optarg); break;
        case 'b': base_turns = atoi(optarg); break;
        case 'p': ctld = atoi(optarg); break;
        case 'd': dir = optarg; break;
        default:
            fprintf(stderr, "usage: bench_slurm [--jobs N] [--turns T] [--baseline-turns B] "
                            "--ctld-pid PID --dir DIR (see bench/slurm/run.sh)\n");
            return 1;
        }
    }
    if (jobs < 1 || turns < 1 || base_turns < 1 || !ctld || !dir || !getenv("SLURM_CONF")) {
        fprintf(stderr, "bench_slurm: needs SLURM_CONF, --ctld-pid and --dir (bench/slurm/run.sh "
                        "gives them)\n");
        return 1;
    }
    spec_slurm cfg;
    spec_slurm_defaults(&cfg);
    cfg.state_interval = 1; /* the default: at most one squeue a second, one per turn */
    cfg.lathe_path = xstrdup("/bin/true");
    char err[512];
    exec_backend *be = exec_slurm_new(&cfg, err, sizeof err);
    if (!be) {
        fprintf(stderr, "bench_slurm: %s\n", err);
        return 1;
    }
    char *job_argv[] = {"/bin/true", NULL};
    exec_handle **hs = xcalloc((size_t)jobs, sizeof *hs);
    char **ids = xcalloc((size_t)jobs, sizeof *ids);
    fprintf(stderr, "bench_slurm: submitting %d jobs ...\n", jobs);
    double t0 = now_s(), c0 = my_cpu();
    long long r0, j0, r1, j1;
    sdiag_counts(&r0, &j0);
    for (int i = 0; i < jobs; i++) {
        char name[32], jd[512];
        snprintf(name, sizeof name, "b%d", i);
        snprintf(jd, sizeof jd, "%s/jobs/%d", dir, i);
        exec_request q;
        memset(&q, 0, sizeof q);
        q.argv = job_argv;
        q.argc = 1;
        q.job_dir = jd;
        q.attempt = 1;
        q.cluster.team = "bench";
        q.cluster.name = name;
        q.cluster.job_id = i + 1;
        q.cluster.nnodes = 1;
        q.cluster.gpus_per_node = 1;
        q.cluster.grace = 30;
        if (exec_start(be, &q, &hs[i], err, sizeof err) != EXEC_OK) {
            fprintf(stderr, "bench_slurm: job %d: %s\n", i, err);
            return 1;
        }
        char *hj = exec_handle_json(hs[i]);
        const char *p = strstr(hj, "\"slurm_job_id\":");
        ids[i] = xasprintf("%lld", p ? atoll(p + 15) : 0LL);
        free(hj);
    }
    double sub_secs = now_s() - t0, sub_cpu = my_cpu() - c0;
    sdiag_counts(&r1, &j1);
    exec_slurm_counts cnt;
    exec_slurm_counts_get(be, &cnt);

    /* lathe: a turn polls every handle */
    turn_stats L = {0}, B = {0};
    exec_status st;
    exec_update up;
    size_t running = 0;
    exec_slurm_counts c_before;
    exec_slurm_counts_get(be, &c_before);
    for (int t = 0; t < turns; t++) {
        double a, b, k;
        long long r, j;
        sleep(1); /* the server's turns are pollInterval (2 s) apart */
        before(&L, ctld, &a, &b, &k, &r, &j);
        double now = wall_s();
        for (int i = 0; i < jobs; i++) {
            exec_poll(hs[i], now, &st, &up);
            running += st.phase == EXEC_RUNNING;
        }
        after(&L, ctld, a, b, k, r, j);
    }
    exec_slurm_counts c_after;
    exec_slurm_counts_get(be, &c_after);
    /* baseline: one squeue -j per job per turn */
    for (int t = 0; t < base_turns; t++) {
        double a, b, k;
        long long r, j;
        before(&B, ctld, &a, &b, &k, &r, &j);
        for (int i = 0; i < jobs; i++) {
            char *sq[] = {"squeue", "-h", "-j", ids[i], "-o", "%T", NULL};
            run(sq, NULL);
        }
        after(&B, ctld, a, b, k, r, j);
    }
    double lt = turns, bt = base_turns;
    printf("Slurm executor, %d queued jobs on slurm-local (Slurm 22.05), one run\n\n", jobs);
    printf("submission: %d sbatch in %.2f s = %.1f sbatch/s (lathe's CPU %.2f s); slurmctld RPCs "
           "%lld (%.2f per job); squeue calls during it: %llu\n\n",
           jobs, sub_secs, jobs / sub_secs, sub_cpu, r1 - r0 - 1, (double)(r1 - r0 - 1) / jobs,
           (unsigned long long)cnt.squeue);
    printf("%-34s %14s %14s %10s\n", "per controller turn", "lathe", "baseline", "ratio");
    printf("%-34s %14.1f %14.1f %9.0fx\n", "Slurm commands run", (double)(c_after.squeue - c_before.squeue + c_after.sacct - c_before.sacct) / lt,
           (double)jobs, jobs / ((double)(c_after.squeue - c_before.squeue + c_after.sacct - c_before.sacct) / lt));
    printf("%-34s %14.1f %14.1f %9.0fx\n", "slurmctld RPCs (sdiag)", L.rpcs / lt, B.rpcs / bt,
           (B.rpcs / bt) / (L.rpcs / lt > 0 ? L.rpcs / lt : 1));
    printf("%-34s %14.1f %14.1f %9.0fx\n", "  of which REQUEST_JOB_INFO*", L.job_info / lt,
           B.job_info / bt, (B.job_info / bt) / (L.job_info / lt > 0 ? L.job_info / lt : 1));
    printf("%-34s %14.3f %14.3f %9.1fx\n", "wall seconds", L.secs / lt, B.secs / bt,
           (B.secs / bt) / (L.secs / lt));
    printf("%-34s %14.3f %14.3f %9.1fx\n", "controller CPU s (+ its children)", L.cpu / lt,
           B.cpu / bt, (B.cpu / bt) / (L.cpu / lt > 0 ? L.cpu / lt : 1e-9));
    if (L.ctld_cpu > 0)
        printf("%-34s %14.3f %14.3f %9.1fx\n", "slurmctld CPU s", L.ctld_cpu / lt, B.ctld_cpu / bt,
               (B.ctld_cpu / bt) / (L.ctld_cpu / lt));
    else /* below /proc's resolution of one clock tick over all the turns */
        printf("%-34s %14s %14.3f %9s\n", "slurmctld CPU s", "< 1 tick", B.ctld_cpu / bt, "-");
    printf("\n(%d lathe turns, %d baseline turns; %zu of %d polls said running/pending)\n", turns,
           base_turns, running, jobs * turns);
    for (int i = 0; i < jobs; i++) {
        exec_release(hs[i]);
        free(ids[i]);
    }
    free(hs);
    free(ids);
    exec_backend_free(be);
    spec_slurm_free(&cfg);
    return 0;
}
