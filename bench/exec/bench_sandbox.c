/* bench_sandbox.c: what the local sandbox costs an attempt's start
 * (docs/security.md, docs/executors.md "The sandbox"). The same short
 * trainer (`/bin/true`, then a shell that reads its dataset) is started
 * through the local backend N times without a sandbox and N times inside
 * one (namespaces, the new root, the cgroup, the user switch when root),
 * alternating, in this process; each run is timed from exec_start until
 * poll sees its end. Prints the median and mean of both and their ratio.
 * A training run lasts minutes to days: the figure that matters is the
 * milliseconds added per attempt.
 *
 *   build/bench/bench_exec [--runs N]        (default 30; N >= 3)
 *
 * This program is also the supervisor: main hands "exec-shim" to
 * exec_shim_main, as the executor's tests do. */
#include "../common/bench_clock.h"
#include "exec/exec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char self_exe[4096];

typedef struct folders {
    char *dir, *data, *hidden;
} folders;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static char *sub(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench_exec: %s: %s\n", p, strerror(errno));
        exit(1);
    }
    return p;
}

/* One attempt in its own job folder; seconds from start to its end seen,
 * or -1 when it did not start or did not succeed. */
static double one_run(exec_backend *be, const folders *f, int i, bool boxed,
                      const char *const *argv, size_t argc)
{
    char name[32];
    snprintf(name, sizeof name, "job-%d-%c", i, boxed ? 's' : 'p');
    char *dir = sub(f->dir, name);
    char *ckpt = path_join(dir, "checkpoints"), *work = path_join(dir, "attempt-1/work");
    exec_bind binds[] = {{f->data, false}, {self_exe, false}, {dir, false}, {ckpt, true},
                         {work, true}};
    const char *hide[] = {f->hidden};
    exec_sandbox box = {.required = true, .uid = geteuid() == 0 ? 65534 : -1,
                        .gid = geteuid() == 0 ? 65534 : -1, .binds = binds,
                        .n_binds = sizeof binds / sizeof binds[0], .hide = hide, .n_hide = 1,
                        .processes = 256, .cgroup = TOGGLE_AUTO};
    exec_request req;
    memset(&req, 0, sizeof req);
    req.argv = (char *const *)argv;
    req.argc = argc;
    req.job_dir = dir;
    req.attempt = 1;
    req.contract.checkpoint_interval = -1;
    req.contract.checkpoint_dir = ckpt;
    req.contract.dataset_path = f->data;
    req.sandbox = boxed ? &box : NULL;
    char err[1024];
    exec_handle *h = NULL;
    double t0 = now_s();
    exec_rc rc = exec_start(be, &req, &h, err, sizeof err);
    double took = -1;
    if (rc != EXEC_OK) {
        fprintf(stderr, "bench_exec: start (%s): %s: %s\n", boxed ? "sandbox" : "plain",
                exec_rc_name(rc), err);
    } else {
        exec_status st;
        exec_update up;
        for (;;) {
            exec_poll(h, now_s(), &st, &up);
            if (st.phase != EXEC_RUNNING) break;
            if (now_s() - t0 > 30) {
                exec_signal(h, SIGKILL, err, sizeof err);
                fprintf(stderr, "bench_exec: a run took over 30 s\n");
                break;
            }
            usleep(500);
        }
        if (st.end == EXEC_END_SUCCEEDED) took = now_s() - t0;
        else fprintf(stderr, "bench_exec: run ended %s: %s\n", exec_end_name(st.end), st.reason);
        exec_release(h);
    }
    free(dir);
    free(ckpt);
    free(work);
    return took;
}

static void report(const char *what, double *plain, double *boxed, int n)
{
    qsort(plain, (size_t)n, sizeof *plain, cmp_double);
    qsort(boxed, (size_t)n, sizeof *boxed, cmp_double);
    double mp = 0, mb = 0;
    for (int i = 0; i < n; i++) {
        mp += plain[i];
        mb += boxed[i];
    }
    mp /= n;
    mb /= n;
    double p50 = plain[n / 2], b50 = boxed[n / 2];
    printf("%-28s plain  median %7.2f ms  mean %7.2f ms\n", what, p50 * 1e3, mp * 1e3);
    printf("%-28s sandbox median %7.2f ms  mean %7.2f ms\n", "", b50 * 1e3, mb * 1e3);
    printf("%-28s ratio (sandbox / plain, medians) %.2fx, +%.1f ms per attempt\n", "",
           b50 / p50, (b50 - p50) * 1e3);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-shim") == 0) return exec_shim_main(argc - 1, argv + 1);
    int runs = 30;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_exec [--runs N]\n");
            return 2;
        }
    }
    if (runs < 3 || runs > 10000) {
        fprintf(stderr, "bench_exec: --runs must be between 3 and 10000\n");
        return 2;
    }
    char why[256];
    if (!exec_sandbox_probe(why, sizeof why)) {
        printf("bench_exec: this machine cannot make a sandbox (%s): nothing to measure\n", why);
        return 0;
    }
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) return 1;
    self_exe[n] = '\0';
    char tmpl[] = "/tmp/lathe-bench-sandbox-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    chmod(tmpl, 0755);
    folders f = {.dir = xstrdup(tmpl)};
    f.data = sub(f.dir, "data");
    f.hidden = sub(f.dir, "server-data");
    char *ds = path_join(f.data, "train.jsonl");
    file_write_atomic(ds, "{\"text\": \"x\"}\n", 14);
    chmod(ds, 0644);
    exec_local_config cfg = {.shim_program = self_exe};
    exec_backend *be = exec_local_new(&cfg);

    double *plain = xcalloc((size_t)runs, sizeof *plain), *boxed = xcalloc((size_t)runs, sizeof *boxed);
    const char *true_argv[] = {"/bin/true"};
    const char *read_argv[] = {"/bin/sh", "-c", "read line < \"$DATASET_PATH/train.jsonl\""};
    struct {
        const char *what;
        const char *const *argv;
        size_t argc;
    } cases[] = {{"/bin/true", true_argv, 1}, {"sh reading its dataset", read_argv, 3}};
    printf("bench_exec: %d runs of each, alternating; trainer uid %s\n", runs,
           geteuid() == 0 ? "65534 in the sandbox" : "the caller's");
    int rc = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] && rc == 0; c++) {
        for (int i = 0; i < runs && rc == 0; i++) {
            plain[i] = one_run(be, &f, (int)(c * 100000) + i, false, cases[c].argv, cases[c].argc);
            boxed[i] = one_run(be, &f, (int)(c * 100000) + i, true, cases[c].argv, cases[c].argc);
            if (plain[i] < 0 || boxed[i] < 0) rc = 1;
        }
        if (rc == 0) report(cases[c].what, plain, boxed, runs);
    }
    exec_backend_free(be);
    char err[512];
    if (file_remove_tree(f.dir, err, sizeof err) != 0) fprintf(stderr, "bench_exec: %s\n", err);
    free(plain);
    free(boxed);
    free(ds);
    free(f.dir);
    free(f.data);
    free(f.hidden);
    return rc;
}
