/* bench_server.c: the server under test for bench_api: a `lathe server`
 * child process in a temporary folder, on a port the system chooses, with
 * one node of 8 GPUs that is draining, so every job is accepted (validated,
 * planned, checked, stored) and then waits in the queue: nothing trains. */
#include "bench_api.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char bench_cluster[] =
    "apiVersion: lathe/v1\n"
    "kind: Cluster\n"
    "metadata:\n"
    "  name: bench\n"
    "spec:\n"
    "  gpuTypes:\n"
    "    - name: A100-80GB\n"
    "      memory: 80Gi\n"
    "      pricePerHour: 1.79\n"
    "  nodes:\n"
    "    - name: draining-1\n"
    "      gpuType: A100-80GB\n"
    "      gpus: 8\n"
    "      state: draining\n"
    "  teams:\n"
    "    - name: bench\n"
    "      quota: {A100-80GB: 8}\n";

static const char bench_server[] =
    "apiVersion: lathe/v1\n"
    "kind: ServerConfig\n"
    "metadata:\n"
    "  name: bench\n"
    "spec:\n"
    "  listen: 127.0.0.1:0\n"
    "  dataDir: data\n"
    "  cluster:\n"
    "    file: cluster.yaml\n"
    "  limits:\n"
    "    maxConnections: 1024\n"
    /* the benchmark measures the API itself: no per-token rate limit */
    "  rateLimit: {requestsPerSecond: 0}\n"
    /* the jobs' dataset (never read: nothing trains) lies under a data root */
    "  policy:\n"
    "    paths: {data: [/data/bench]}\n";

/* The job of index k, as a user would write it. */
char *bench_job(long k)
{
    return xasprintf("apiVersion: lathe/v1\n"
                     "kind: LoRATrainingJob\n"
                     "metadata:\n"
                     "  name: bench-%ld\n"
                     "spec:\n"
                     "  team: bench\n"
                     "  baseModel:\n"
                     "    name: Qwen2.5-0.5B\n"
                     "  lora:\n"
                     "    rank: %d\n"
                     "  trainingData:\n"
                     "    datasetPath: /data/bench/train.jsonl\n"
                     "    samples: 10000\n"
                     "  hyperparams:\n"
                     "    maxSteps: 1000\n",
                     k, 8 << (k % 3));
}

static char *read_line_file(const char *path)
{
    char err[256];
    size_t len;
    char *t = file_read_all(path, 4096, &len, err, sizeof err);
    if (!t) return NULL;
    t[strcspn(t, "\r\n")] = '\0';
    if (!*t) {
        free(t);
        return NULL;
    }
    return t;
}

static bool write_file(const char *dir, const char *name, const char *text)
{
    char *p = path_join(dir, name);
    int e = file_write_atomic(p, text, strlen(text));
    if (e) fprintf(stderr, "bench_api: cannot write %s: %s\n", p, strerror(e));
    free(p);
    return e == 0;
}

bool server_launch(const bench_opts *o, server_proc *s)
{
    char *cfg = path_join(s->dir, "server.yaml"), *log = path_join(s->dir, "server.log");
    char *addr_file = xasprintf("%s/data/server.addr", s->dir);
    char *tok_file = xasprintf("%s/data/admin-token", s->dir);
    unlink(addr_file); /* the next address is the new server's */
    free(s->addr);
    free(s->token);
    s->addr = s->token = NULL;
    s->pid = fork();
    if (s->pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(127);
        execl(o->lathe, o->lathe, "server", "--config", cfg, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 2400 && (!s->addr || !s->token); i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            break;
        }
        if (!s->addr) s->addr = read_line_file(addr_file);
        if (s->addr && !s->token) s->token = read_line_file(tok_file);
        usleep(50000);
    }
    if (!s->addr || !s->token) fprintf(stderr, "bench_api: the server did not start; see %s\n", log);
    free(addr_file);
    free(tok_file);
    free(cfg);
    free(log);
    return s->addr && s->token;
}

bool server_start(const bench_opts *o, server_proc *s)
{
    char tmpl[] = "/tmp/lathe-bench-api-XXXXXX";
    if (!mkdtemp(tmpl)) return false;
    s->dir = xstrdup(tmpl);
    if (!write_file(s->dir, "cluster.yaml", bench_cluster) ||
        !write_file(s->dir, "server.yaml", bench_server))
        return false;
    return server_launch(o, s);
}

static void remove_tree(const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", "--", path, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
}

void server_halt(server_proc *s)
{
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    int st;
    for (int i = 0; i < 200 && waitpid(s->pid, &st, WNOHANG) == 0; i++) usleep(50000);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    s->pid = 0;
}

void server_stop(server_proc *s, bool keep)
{
    server_halt(s);
    if (s->dir && !keep) remove_tree(s->dir);
    else if (s->dir) printf("kept %s\n", s->dir);
    free(s->dir);
    free(s->addr);
    free(s->token);
    memset(s, 0, sizeof *s);
}

double server_cpu_seconds(const server_proc *s)
{
    char path[64], err[128];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)s->pid);
    char *text = file_read_all(path, 8192, NULL, err, sizeof err);
    if (!text) return -1;
    /* fields after the command name (which may hold spaces): state is
     * field 3; utime and stime are fields 14 and 15 (proc(5)) */
    const char *p = strrchr(text, ')');
    unsigned long long ut = 0, stime = 0;
    int n = p ? sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stime) : 0;
    free(text);
    long hz = sysconf(_SC_CLK_TCK);
    return n == 2 && hz > 0 ? (double)(ut + stime) / (double)hz : -1;
}
