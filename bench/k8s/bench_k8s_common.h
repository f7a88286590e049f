/* bench_k8s_common.h: what the Kubernetes benches (bench_k8s.c,
 * bench_operator.c) share: a steady clock, a process's CPU seconds,
 * spawning a program with its output in a log, waiting for a file a
 * program writes, writing one, a curl body sink, and one API double
 * process with the bench's own client. Each bench is a program of its
 * own (bench/CMakeLists.txt), so these are static functions of a header. */
#ifndef LATHE_BENCH_K8S_COMMON_H
#define LATHE_BENCH_K8S_COMMON_H

#include "base/base.h"
#include "k8s/k8s.h"

#include "../common/bench_clock.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- small helpers (as bench_k8s.c has them) ---- */
/* CPU seconds (user + system) of process pid, from /proc/PID/stat. */
static double cpu_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char err[128];
    size_t len;
    char *t = file_read_all(path, 1 << 16, &len, err, sizeof err);
    if (!t) return -1;
    char *p = strrchr(t, ')');
    unsigned long ut = 0, st = 0;
    if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    free(t);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static pid_t spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* The file's text without trailing blanks once it is not empty; NULL
 * after secs. */
static char *wait_file(const char *path, double secs)
{
    double end = now_s() + secs;
    for (;;) {
        char err[128];
        size_t len;
        char *t = file_read_all(path, 1 << 20, &len, err, sizeof err);
        if (t && len > 0) {
            while (len > 0 && (t[len - 1] == '\n' || t[len - 1] == ' ')) t[--len] = '\0';
            return t;
        }
        free(t);
        if (now_s() >= end) return NULL;
        usleep(20000);
    }
}

static bool write_text(const char *dir, const char *name, const char *text)
{
    char *p = path_join(dir, name);
    int e = file_write_atomic(p, text, strlen(text));
    free(p);
    return e == 0;
}

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    sb_putn(ud, p, sz * n);
    return sz * n;
}

/* ---- one API double, in a folder of its own ---- */
typedef struct dbl_proc {
    char *dir;
    pid_t pid;
    k8s_config kc;
    k8s_client *cl; /* the bench's own: what it sends is taken off lathe's count */
} dbl_proc;

static void dbl_stop(dbl_proc *d)
{
    k8s_client_free(d->cl);
    if (d->cl) k8s_config_free(&d->kc);
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        waitpid(d->pid, NULL, 0);
    }
    free(d->dir);
    memset(d, 0, sizeof *d);
}

#endif
