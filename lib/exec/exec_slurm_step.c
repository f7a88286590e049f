/* exec_slurm_step.c: `lathe slurm-step FILE`, what lathe's batch script
 * execs on the first node of a Slurm job (docs/slurm.md). FILE (JSON,
 * written by the server, exec_slurm_render) holds the trainer's argv and
 * environment. One node: the step starts the trainer in its own process
 * group, forwards SIGTERM / SIGINT / SIGHUP / SIGQUIT / SIGUSR1 / SIGUSR2
 * to it (Slurm's --signal=B:TERM@grace reaches the step, the batch
 * shell's process), and exits as the trainer did (its code, or 128 +
 * signal). Several nodes: the step runs `srun --ntasks-per-node=1 lathe
 * slurm-step --task FILE`, and each task execs the trainer with NNODES,
 * NODE_RANK (SLURM_NODEID), MASTER_ADDR (the first host of
 * SLURM_JOB_NODELIST), MASTER_PORT and NPROC_PER_NODE set.
 *
 * The environment: the step's own (Slurm's variables, CUDA_VISIBLE_DEVICES
 * as Slurm sets it) without names that may hold a secret, then FILE's
 * (trainer.env, then the trainer contract's). A job with GPUs keeps Slurm's
 * CUDA_VISIBLE_DEVICES, and LATHE_GPUS is set to it. Never a shell. */
#include "exec_internal.h"
#include "exec_slurm_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t g_child = 0;

static void forward(int sig)
{
    if (g_child > 0) kill(-g_child, sig);
}

static void env_set(char ***env, size_t *n, const char *entry)
{
    size_t klen = strcspn(entry, "=");
    for (size_t i = 0; i < *n; i++)
        if (strncmp((*env)[i], entry, klen) == 0 && (*env)[i][klen] == '=') {
            free((*env)[i]);
            (*env)[i] = xstrdup(entry);
            return;
        }
    *env = xrealloc(*env, (*n + 2) * sizeof **env);
    (*env)[(*n)++] = xstrdup(entry);
    (*env)[*n] = NULL;
}

static void env_setf(char ***env, size_t *n, const char *name, const char *value)
{
    char *e = xasprintf("%s=%s", name, value);
    env_set(env, n, e);
    free(e);
}

static const char *env_get(char **env, size_t n, const char *name)
{
    size_t l = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (strncmp(env[i], name, l) == 0 && env[i][l] == '=') return env[i] + l + 1;
    return NULL;
}

/* Resident memory of every process of group pgid, bytes (/proc). */
static double group_rss(pid_t pgid)
{
    DIR *d = opendir("/proc");
    if (!d) return 0;
    double total = 0;
    long page = sysconf(_SC_PAGESIZE);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *rp = strrchr(buf, ')');
        long pg = 0, rss = 0;
        /* after ") ": state ppid pgrp ... field 24 rss (pages) */
        if (!rp || sscanf(rp + 2, "%*c %*d %ld %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                                   "%*d %*d %*d %*d %*u %*u %ld",
                          &pg, &rss) != 2)
            continue;
        if (pg == (long)pgid && rss > 0) total += (double)rss * (double)page;
    }
    closedir(d);
    return total;
}

static int usage(void)
{
    fprintf(stderr, "usage: lathe slurm-step [--task | --array] FILE\n"
                    "(internal: what lathe's Slurm batch script runs; docs/slurm.md)\n");
    return 1;
}

/* The step file of task SLURM_ARRAY_TASK_ID in a job array's mapping
 * file ({"version": 1, "steps": [FILE, ...]}, written by the server). */
static char *array_step(const char *map, const char *task, char *err, size_t errsz)
{
    char *end = NULL;
    long t = task ? strtol(task, &end, 10) : -1;
    if (!task || !*task || *end || t < 0) {
        snprintf(err, errsz, "%s: SLURM_ARRAY_TASK_ID is not set to a task number (a job array's task?)", map);
        return NULL;
    }
    size_t len;
    char *text = file_read_all(map, 16u << 20, &len, err, errsz);
    if (!text) return NULL;
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    free(text);
    json_t *steps = o ? json_object_get(o, "steps") : NULL;
    const char *f = json_string_value(json_array_get(steps, (size_t)t));
    char *out = f && *f == '/' ? xstrdup(f) : NULL;
    if (!out)
        snprintf(err, errsz, "%s: %s", map,
                 !o ? je.text : !json_is_array(steps) ? "not a job array's mapping (steps)"
                                                     : "no step file for this task");
    json_decref(o);
    return out;
}

int exec_slurm_step_main(int argc, char **argv)
{
    bool task = false;
    int i = 1;
    if (i < argc && strcmp(argv[i], "--task") == 0) {
        task = true;
        i++;
    }
    bool array = false;
    if (!task && i < argc && strcmp(argv[i], "--array") == 0) {
        array = true;
        i++;
    }
    if (i + 1 != argc) return usage();
    const char *file = argv[i];
    char err[512];
    size_t len;
    static char *picked; /* lives as long as the step (file points at it) */
    if (array) { /* a job array's task: its step file from the mapping */
        picked = array_step(file, getenv("SLURM_ARRAY_TASK_ID"), err, sizeof err);
        if (!picked) {
            fprintf(stderr, "lathe slurm-step: %s\n", err);
            return 4;
        }
        file = picked;
        char *slash = strrchr(picked, '/');
        if (slash && slash != picked) { /* the attempt's folder, as --chdir is for one job */
            *slash = '\0';
            if (chdir(picked) != 0) fprintf(stderr, "lathe slurm-step: chdir %s: %s\n", picked, strerror(errno));
            *slash = '/';
        }
    }
    char *text = file_read_all(file, 16u << 20, &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "lathe slurm-step: %s\n", err);
        return 4;
    }
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    free(text);
    json_t *jargv = o ? json_object_get(o, "argv") : NULL;
    json_t *jenv = o ? json_object_get(o, "env") : NULL;
    if (!o || !json_is_array(jargv) || json_array_size(jargv) == 0 || !json_is_array(jenv)) {
        fprintf(stderr, "lathe slurm-step: %s: not a step file (argv, env)%s%s\n", file,
                o ? "" : ": ", o ? "" : je.text);
        json_decref(o);
        return 2;
    }
    int nnodes = (int)exec_json_num(o, "nnodes", 1);
    bool gpus = json_is_true(json_object_get(o, "gpus"));

    /* the environment */
    char **env = xcalloc(1, sizeof *env);
    size_t n_env = 0;
    for (char **e = environ; *e; e++)
        if (strchr(*e, '=') && !exec_env_secret_name(*e)) env_set(&env, &n_env, *e);
    char *slurm_cuda = NULL;
    const char *cv = env_get(env, n_env, "CUDA_VISIBLE_DEVICES");
    if (cv) slurm_cuda = xstrdup(cv);
    for (size_t k = 0; k < json_array_size(jenv); k++) {
        const char *e = json_string_value(json_array_get(jenv, k));
        if (!e || !strchr(e, '=') || e[0] == '=') continue;
        if (gpus && (strncmp(e, "CUDA_VISIBLE_DEVICES=", 21) == 0 || strncmp(e, "LATHE_GPUS=", 11) == 0))
            continue;
        env_set(&env, &n_env, e);
    }
    if (gpus && slurm_cuda) {
        env_setf(&env, &n_env, "CUDA_VISIBLE_DEVICES", slurm_cuda);
        env_setf(&env, &n_env, "LATHE_GPUS", slurm_cuda);
    }
    free(slurm_cuda);
    const char *sid = getenv("SLURM_JOB_ID");
    if (sid) env_setf(&env, &n_env, "LATHE_SLURM_JOB_ID", sid);

    if (task || nnodes <= 1) {
        if (task) {
            char num[32];
            const char *nodeid = getenv("SLURM_NODEID");
            env_setf(&env, &n_env, "NODE_RANK", nodeid ? nodeid : "0");
            const char *nn = getenv("SLURM_JOB_NUM_NODES");
            if (!nn) nn = getenv("SLURM_NNODES");
            snprintf(num, sizeof num, "%d", nnodes);
            env_setf(&env, &n_env, "NNODES", nn ? nn : num);
            char host[256];
            const char *list = getenv("SLURM_JOB_NODELIST");
            if (list && slurm_first_host(list, host, sizeof host))
                env_setf(&env, &n_env, "MASTER_ADDR", host);
            snprintf(num, sizeof num, "%d", (int)exec_json_num(o, "master_port", 29500));
            env_setf(&env, &n_env, "MASTER_PORT", num);
            snprintf(num, sizeof num, "%d", (int)exec_json_num(o, "nproc_per_node", 1));
            env_setf(&env, &n_env, "NPROC_PER_NODE", num);
        }
    }
    size_t ac = json_array_size(jargv);
    char **targv = xcalloc(ac + 1, sizeof *targv);
    for (size_t k = 0; k < ac; k++) {
        const char *a = json_string_value(json_array_get(jargv, k));
        targv[k] = xstrdup(a ? a : "");
    }
    char **run = targv;
    char *srun_argv[8] = {NULL};
    char *nodes_arg = NULL;
    if (!task && nnodes > 1) {
        const char *srun = exec_json_str(o, "srun");
        const char *lathe = exec_json_str(o, "lathe");
        nodes_arg = xasprintf("--nodes=%d", nnodes);
        srun_argv[0] = (char *)(srun ? srun : "srun");
        srun_argv[1] = nodes_arg;
        srun_argv[2] = "--ntasks-per-node=1";
        srun_argv[3] = "--kill-on-bad-exit=1";
        srun_argv[4] = (char *)(lathe ? lathe : "/proc/self/exe");
        srun_argv[5] = "slurm-step";
        srun_argv[6] = "--task";
        srun_argv[7] = (char *)file;
        /* srun_argv has no room for NULL in 8; rebuild */
        run = xcalloc(9, sizeof *run);
        for (int k = 0; k < 8; k++) run[k] = srun_argv[k];
        env_set(&env, &n_env, "SLURM_EXPORT_ENV=ALL");
    }
    char *prog = exec_find_program(run[0], env);
    if (!prog) {
        fprintf(stderr, "lathe slurm-step: %s: %s\n", run[0], strerror(errno));
        json_decref(o);
        return 127;
    }
    fflush(stdout);
    fflush(stderr);
    if (task) { /* srun runs one of these per node and forwards signals itself */
        execve(prog, run, env);
        fprintf(stderr, "lathe slurm-step: %s: %s\n", prog, strerror(errno));
        return 127;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) sigaction(sigs[k], &sa, NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "lathe slurm-step: fork: %s\n", strerror(errno));
        return 70;
    }
    if (pid == 0) {
        setpgid(0, 0);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) sigaction(sigs[k], &dfl, NULL);
        execve(prog, run, env);
        fprintf(stderr, "lathe slurm-step: %s: %s\n", prog, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    g_child = pid;
    /* --mem where Slurm itself does not hold the job to it (no cgroup
     * task plugin): the trainer's process group is watched and killed
     * over it, with a line the out-of-memory classification knows */
    const char *mem = getenv("SLURM_MEM_PER_NODE");
    double limit = mem ? atof(mem) * 1024 * 1024 : 0;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, limit > 0 ? WNOHANG : 0);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (limit > 0 && w == 0) {
            double rss = group_rss(pid);
            if (rss > limit) {
                printf("lathe: out of memory: the trainer's processes use %.0f MiB, over the job's "
                       "--mem of %.0f MiB; killed\n",
                       rss / (1024 * 1024), limit / (1024 * 1024));
                fflush(stdout);
                kill(-pid, SIGKILL);
                limit = 0;
                continue;
            }
            struct timespec ts = {0, 200 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    g_child = 0;
    free(prog);
    if (run != targv) free(run);
    free(nodes_arg);
    str_list_free(targv, ac);
    str_list_free(env, n_env);
    json_decref(o);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
