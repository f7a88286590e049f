/* cmd_demo.c: `lathe demo`, the README's main command. On one machine,
 * CPU only, in a few minutes, it shows the whole product with nothing but
 * public commands and API calls:
 *
 *   1. a folder (temporary unless --dir) with a virtual cluster (three L4
 *      GPUs whose work runs on the CPU, two teams with quotas, an urgent
 *      priority class), a server config, a LoRA experiment and an urgent job
 *      (templates: examples/demo/);
 *   2. the base model of the data folder (share/models/demo-base: a small
 *      Qwen3-shaped model lathe pretrained on tinyshakespeare, with a
 *      tokenizer learned by `lathe init-tokenizer`, scripts/make-demo-base.sh)
 *      copied into the folder, and the eval file: the first tasks of the
 *      Self-Instruct user-oriented evaluation set, never trained on;
 *   3. `lathe server` as a child process on a port the system chooses;
 *   4. the experiment (rank 8 / 16 / 32) submitted for team research: two
 *      GPUs of its quota plus one borrowed from team product;
 *   5. once they run, product's urgent job: the scheduler preempts one of
 *      research's jobs (it checkpoints, returns to the queue, resumes later);
 *   6. the trainer process of another job killed with SIGKILL: the server
 *      retries it from its newest checkpoint;
 *   7. live progress (and each job's eval loss as it falls) until every job
 *      ends, then a table per job (loss,
 *      steps, tokens/s, GPU-hours, cost, checkpoint, its story), how each
 *      rank's loss fell (from the server's progress history), and the
 *      answers of the base model and of the best adapter to the eval
 *      file's first instruction (`lathe generate`);
 *   8. the server stopped; the folder kept (or removed with --clean).
 *
 * The controller, scheduler and trainer do the work; the demo only submits,
 * watches and kills, as a user at a terminal would.
 */
#include "cli.h"

#include "base/base.h"
#include "client/client.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char demo_help[] =
    "usage: lathe demo [--dir DIR] [--clean] [--steps N] [--data-dir DIR] [--plain]\n"
    "                  [--timeout D] [--setup-only]\n"
    "\n"
    "Runs lathe end to end on this machine, CPU only: a server with a virtual\n"
    "cluster of 3 GPUs and two teams with quotas, a small pretrained model, a LoRA\n"
    "experiment (ranks 8, 16, 32) on the shipped instruction data, an urgent job\n"
    "of the other team that preempts one of them, and a trainer killed with\n"
    "SIGKILL that resumes from its checkpoint. Shows progress live and ends with\n"
    "a table per job, how each rank's loss fell, and the answers of the base\n"
    "model and of the best adapter to an instruction none of them trained on.\n"
    "Everything stays in the folder (its path is printed) unless --clean.\n"
    "\n"
    "options:\n"
    "  --dir DIR                work here (created; must be empty) instead of a\n"
    "                           new folder under $TMPDIR or /tmp\n"
    "  --clean                  remove the folder at the end\n"
    "  --steps N                optimizer steps of each experiment job (default 120)\n"
    "  --data-dir DIR           the folder with data/ and models/ (default:\n"
    "                           $LATHE_DATA_DIR, the share/ folder of the source\n"
    "                           tree lathe was built from, or share/ beside the\n"
    "                           binary's folder)\n"
    "  --plain                  plain lines even on a terminal\n"
    "  --timeout D              give up after D (default 10m)\n"
    "  --setup-only             write the files and the model, print the commands\n"
    "                           that run the rest by hand, and stop\n"
    "  --write-templates DIR    write the demo's files as templates (examples/demo)\n"
    "\n"
    "exit: 0 every job ended as the demo expects, 1 usage, 4 a file could not be\n"
    "      written, 5 the server could not be started or reached, 70 a job did\n"
    "      not end as expected (the folder is kept)\n";

/* Set by SIGINT / SIGTERM: the demo stops, cleans up and exits. A signal
 * flag is the one piece of state a handler may share. */
static volatile sig_atomic_t demo_interrupted;

static void demo_on_signal(int sig)
{
    (void)sig;
    demo_interrupted = 1;
}

/* ---- the files (examples/demo holds the same templates) ---- */

static const char demo_cluster_yaml[] =
    "# The demo's cluster: one node with three virtual L4 GPUs (ids are assigned\n"
    "# and exported to the trainers, the work runs on the CPU) and two teams.\n"
    "# research may borrow one GPU beyond its quota while product does not use\n"
    "# its own; product's urgent work may take it back (and preempt).\n"
    "apiVersion: lathe/v1\n"
    "kind: Cluster\n"
    "metadata:\n"
    "  name: demo\n"
    "spec:\n"
    "  gpuTypes:\n"
    "    - name: L4-24GB\n"
    "      memory: 24Gi\n"
    "      pricePerHour: 0.80\n"
    "  nodes:\n"
    "    - name: demo-node-1\n"
    "      gpuType: L4-24GB\n"
    "      gpus: 3\n"
    "  teams:\n"
    "    - name: research\n"
    "      quota: {L4-24GB: 2}\n"
    "      borrowingLimit: {L4-24GB: 1}\n"
    "    - name: product\n"
    "      quota: {L4-24GB: 1}\n"
    "  priorityClasses:\n"
    "    - name: urgent\n"
    "      value: 1000\n"
    "      preemptionPolicy: PreemptLowerPriority\n"
    "      description: \"release fixes that cannot wait\"\n"
    "    - name: default\n"
    "      value: 0\n"
    "      globalDefault: true\n";

static const char demo_server_yaml[] =
    "# The demo's server: the virtual cluster of cluster.yaml, its state under\n"
    "# data/ (next to this file), a port the system chooses (the server writes\n"
    "# it to data/server.addr), no token listed (the server makes an admin token\n"
    "# in data/admin-token), and short intervals so that a demo of a few minutes\n"
    "# shows scheduling, preemption and retries. The policy lets the teams' jobs\n"
    "# read the demo's model (model/, next to this file), its dataset and its eval\n"
    "# file; every trainer runs in the sandbox where this machine can make one\n"
    "# (docs/security.md).\n"
    "apiVersion: lathe/v1\n"
    "kind: ServerConfig\n"
    "metadata:\n"
    "  name: lathe-demo\n"
    "spec:\n"
    "  listen: 127.0.0.1:0\n"
    "  dataDir: data\n"
    "  cluster:\n"
    "    file: cluster.yaml\n"
    "  scheduler:\n"
    "    policy: lathe\n"
    "    interval: 1s\n"
    "    minRunTime: 1s\n"
    "    reclaimMinRun: 1s\n"
    "  pollInterval: 250ms\n"
    "  policy:\n"
    "    paths:\n"
    "      models: [model]\n"
    "      data: [\"@DATA@\", \"@EVAL@\"]\n"
    "    sandbox:\n"
    "      mode: auto\n";

/* The job settings both files share; @NAME@ are filled in by demo_fill. */
#define DEMO_JOB_BODY                                                                           \
    "      method: lora\n"                                                                      \
    "      baseModel:\n"                                                                        \
    "        path: @MODEL@\n"                                                                   \
    "      lora:\n"                                                                             \
    "        targetModules: [all-linear]\n"                                                     \
    "      trainingData:\n"                                                                     \
    "        datasetPath: @DATA@\n"                                                             \
    "        evalDatasetPath: @EVAL@\n"                                                         \
    "        batchSize: 4\n"                                                                    \
    "      hyperparams:\n"                                                                      \
    "        maxSteps: @STEPS@\n"                                                               \
    "        evalSteps: @CHECKPOINT_EVERY@\n"                                                   \
    "        learningRate: 1e-2\n"                                                              \
    "        warmupSteps: 5\n"                                                                  \
    "        maxSeqLength: 256\n"                                                               \
    "      checkpoint:\n"                                                                       \
    "        intervalSteps: @CHECKPOINT_EVERY@\n"                                               \
    "        keepLast: 2\n"                                                                     \
    "      retryPolicy:\n"                                                                      \
    "        maxRetries: 3\n"                                                                   \
    "        backoffSeconds: 1\n"                                                               \
    "        maxBackoffSeconds: 5\n"                                                            \
    "      timeout:\n"                                                                          \
    "        gracePeriod: 30s\n"                                                                \
    "      trainer:\n"                                                                          \
    "        env:\n"                                                                            \
    "          LATHE_THREADS: \"1\"\n"

static const char demo_experiment_yaml[] =
    "# The demo's experiment: one LoRA job trained at ranks 8, 16 and 32 on the\n"
    "# shipped instruction data (the 175 Self-Instruct seed tasks), evaluated on\n"
    "# tasks it never trains on, for team research. `lathe demo` fills in the\n"
    "# @...@ values (the base model, the data, the eval file, the steps).\n"
    "apiVersion: lathe/v1\n"
    "kind: LoRAExperiment\n"
    "metadata:\n"
    "  name: demo-lora\n"
    "spec:\n"
    "  template:\n"
    "    spec:\n"
    "      team: research\n" DEMO_JOB_BODY
    "  matrix:\n"
    "    lora.rank: [8, 16, 32]\n";

/* The urgent job's head; its body is DEMO_JOB_BODY moved four columns left
 * (demo_dedent). */
static const char demo_hotfix_head[] =
    "# The demo's urgent job: team product's fix (rank 16, the default) in the\n"
    "# `urgent` priority class. The cluster is full when it arrives, so the\n"
    "# scheduler preempts one of research's jobs. `lathe demo` fills in the\n"
    "# @...@ values.\n"
    "apiVersion: lathe/v1\n"
    "kind: LoRATrainingJob\n"
    "metadata:\n"
    "  name: hotfix-r16\n"
    "spec:\n"
    "  team: product\n"
    "  priorityClassName: urgent\n";

/* ---- options and state ---- */

typedef struct demo_opts {
    const char *dir;
    bool clean;
    long steps;
    const char *data_dir;
    bool plain;
    double timeout;
    bool setup_only;
    const char *templates_dir;
} demo_opts;

/* What the demo knows of each job while it watches. */
typedef struct demo_job {
    char *name;
    size_t events_seen;
    long long eval_step;  /* the newest evaluation shown (0: none yet) */
    double eval_first;    /* the loss of the first one */
} demo_job;

typedef struct demo {
    demo_opts o;
    char *dir;        /* absolute */
    char *lathe;      /* this binary */
    char *data;       /* the training data */
    char *base;       /* the base model folder of the data folder */
    char *eval_src;   /* the evaluation set the eval file is cut from */
    char *eval;       /* DIR/eval.jsonl */
    pid_t server;     /* 0 when not running */
    client *c;
    client_live live;
    double t0;        /* when the experiment was submitted */
    demo_job jobs[8];
    size_t n_jobs;
    bool hotfix_sent, killed, preempted;
    char killed_job[64];
} demo;

static void demo_say(demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line of narration, printed above the live view. */
static void demo_say(demo *d, const char *fmt, ...)
{
    if (d->live.tty) {
        client_live_frame(&d->live, "");
        client_live_end(&d->live);
    }
    va_list ap;
    va_start(ap, fmt);
    if (d->t0 > 0) printf("[%5.1fs] ", client_now() - d->t0);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* ---- inputs ---- */

/* This binary's absolute path: every step runs the same lathe. */
static char *demo_self(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return NULL;
    buf[n] = '\0';
    return xstrdup(buf);
}

#define DEMO_DATA_REL "data/self-instruct/seed_tasks.alpaca.jsonl"
#define DEMO_EVAL_REL "data/self-instruct/user_oriented_instructions.alpaca.jsonl"
#define DEMO_BASE_REL "models/demo-base"
/* The eval file: this many tasks from the start of the evaluation set, so
 * that an evaluation takes a fraction of a second. */
#define DEMO_EVAL_TASKS 32

/* The data folder: the first candidate that holds the training data
 * (with --data-dir, only that one). */
static char *demo_find_data(const demo_opts *o, const char *self)
{
    char *dir = xstrdup(self);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    enum { N = 5 };
    char *cand[N] = {
        o->data_dir ? xstrdup(o->data_dir) : NULL,
        getenv("LATHE_DATA_DIR") ? xstrdup(getenv("LATHE_DATA_DIR")) : NULL,
        xstrdup(LATHE_BUILT_SHARE), /* the source tree's share/ */
        xasprintf("%s/../share", dir),
        xasprintf("%s/../share/lathe", dir),
    };
    char *found = NULL;
    for (int i = 0; i < N && !found; i++) {
        if (!cand[i] || (i > 0 && o->data_dir)) continue;
        char *data = path_join(cand[i], DEMO_DATA_REL);
        char real[4096];
        if (file_exists(data) && realpath(cand[i], real)) found = xstrdup(real);
        free(data);
    }
    for (int i = 0; i < N; i++) free(cand[i]);
    free(dir);
    return found;
}

/* Finds this binary, the data, the eval set and the base model. */
static int demo_inputs(demo *d)
{
    d->lathe = demo_self();
    if (!d->lathe) {
        fprintf(stderr, "lathe demo: cannot find its own binary through /proc/self/exe\n");
        return LT_EXIT_IO;
    }
    char *share = demo_find_data(&d->o, d->lathe);
    if (!share) {
        fprintf(stderr, "lathe demo: cannot find its data (%s): give --data-dir DIR or set "
                "LATHE_DATA_DIR to the folder that holds data/ and models/ (share/ of lathe's "
                "source tree)\n", DEMO_DATA_REL);
        return LT_EXIT_IO;
    }
    d->data = path_join(share, DEMO_DATA_REL);
    d->eval_src = path_join(share, DEMO_EVAL_REL);
    d->base = path_join(share, DEMO_BASE_REL);
    char *cfg = path_join(d->base, "config.json");
    int rc = LT_EXIT_OK;
    const char *missing = !file_exists(d->eval_src) ? d->eval_src : !file_exists(cfg) ? cfg : NULL;
    if (missing) {
        fprintf(stderr, "lathe demo: %s is missing from the data folder %s (share/ of lathe's "
                "source tree holds it)\n", missing, share);
        rc = LT_EXIT_IO;
    }
    free(cfg);
    free(share);
    return rc;
}

/* Creates the working folder: --dir (new or empty) or a fresh temporary one. */
static int demo_make_dir(demo *d)
{
    if (!d->o.dir) {
        const char *tmp = getenv("TMPDIR");
        char *tmpl = xasprintf("%s/lathe-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(tmpl)) {
            fprintf(stderr, "lathe demo: cannot create %s: %s\n", tmpl, strerror(errno));
            free(tmpl);
            return LT_EXIT_IO;
        }
        d->dir = tmpl;
        return LT_EXIT_OK;
    }
    if (mkdir(d->o.dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "lathe demo: cannot create %s: %s\n", d->o.dir, strerror(errno));
        return LT_EXIT_IO;
    }
    DIR *dh = opendir(d->o.dir);
    size_t entries = 0;
    for (struct dirent *e; dh && (e = readdir(dh));)
        entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (dh) closedir(dh);
    char real[4096];
    if (!dh || entries > 0 || !realpath(d->o.dir, real)) {
        fprintf(stderr, "lathe demo: --dir %s must be a new or empty folder\n", d->o.dir);
        return LT_EXIT_IO;
    }
    d->dir = xstrdup(real);
    return LT_EXIT_OK;
}

/* ---- the files ---- */

/* tmpl with every "@KEY@" replaced by its value. Caller frees. */
static char *demo_fill(const char *tmpl, const char *const keys[], const char *const vals[],
                       size_t n)
{
    sb out;
    sb_init(&out);
    for (const char *p = tmpl; *p;) {
        size_t k = 0;
        size_t klen = 0;
        for (; *p == '@' && k < n; k++) {
            klen = strlen(keys[k]);
            if (!strncmp(p + 1, keys[k], klen) && p[1 + klen] == '@') break;
        }
        if (*p == '@' && k < n) {
            sb_puts(&out, vals[k]);
            bool whole_line = (p == tmpl || p[-1] == '\n') && p[klen + 2] == '\n';
            p += klen + 2;
            if (whole_line && !*vals[k]) p++; /* an empty line goes away */
        } else {
            sb_putc(&out, *p++);
        }
    }
    sb_putc(&out, 0); /* a buffer even when empty */
    out.len--;
    return sb_take(&out);
}

/* text with up to cols leading spaces removed from every line. */
static char *demo_dedent(const char *text, int cols)
{
    sb out;
    sb_init(&out);
    for (const char *p = text; *p;) {
        for (int i = 0; i < cols && *p == ' '; i++) p++;
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);
        sb_putn(&out, p, n);
        p += n;
    }
    return sb_take(&out);
}

/* The urgent job's template: its head, then the shared body moved left. */
static char *demo_hotfix_template(void)
{
    char *body = demo_dedent(DEMO_JOB_BODY, 4);
    char *t = xasprintf("%s%s", demo_hotfix_head, body);
    free(body);
    return t;
}

/* A job file filled in for this run (steps: its optimizer steps). */
static char *demo_job_text(const demo *d, const char *tmpl, long steps)
{
    char model[4200], st[32], every[32];
    snprintf(model, sizeof model, "%s/model", d->dir);
    snprintf(st, sizeof st, "%ld", steps);
    snprintf(every, sizeof every, "%ld", steps / 6 > 2 ? steps / 6 : 2);
    const char *keys[] = {"MODEL", "DATA", "EVAL", "STEPS", "CHECKPOINT_EVERY"};
    const char *vals[] = {model, d->data, d->eval, st, every};
    return demo_fill(tmpl, keys, vals, 5);
}

/* Writes text to DIR/name. */
static int demo_write(const char *dir, const char *name, const char *text)
{
    char *path = path_join(dir, name);
    int e = file_write_atomic(path, text, strlen(text));
    if (e) fprintf(stderr, "lathe demo: cannot write %s: %s\n", path, strerror(e));
    free(path);
    return e ? LT_EXIT_IO : LT_EXIT_OK;
}

/* The hotfix's steps: two thirds of the experiment's, at least 10. */
static long demo_hotfix_steps(long steps)
{
    return steps * 2 / 3 > 10 ? steps * 2 / 3 : 10;
}

/* DIR/eval.jsonl: the first DEMO_EVAL_TASKS lines of the evaluation set. */
static int demo_write_eval(demo *d)
{
    char err[512];
    size_t len;
    char *text = file_read_all(d->eval_src, (size_t)64 << 20, &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "lathe demo: %s\n", err);
        return LT_EXIT_IO;
    }
    size_t end = 0;
    for (int lines = 0; end < len && lines < DEMO_EVAL_TASKS; end++) lines += text[end] == '\n';
    text[end] = '\0';
    d->eval = path_join(d->dir, "eval.jsonl");
    int rc = demo_write(d->dir, "eval.jsonl", text);
    free(text);
    return rc;
}

static int demo_write_files(demo *d)
{
    int rc = demo_write_eval(d);
    if (rc) return rc;
    char *hot_tmpl = demo_hotfix_template();
    char *exp = demo_job_text(d, demo_experiment_yaml, d->o.steps);
    char *hot = demo_job_text(d, hot_tmpl, demo_hotfix_steps(d->o.steps));
    const char *keys[] = {"DATA", "EVAL"};
    const char *vals[] = {d->data, d->eval};
    char *server = demo_fill(demo_server_yaml, keys, vals, 2);
    rc = demo_write(d->dir, "cluster.yaml", demo_cluster_yaml);
    if (!rc) rc = demo_write(d->dir, "server.yaml", server);
    free(server);
    if (!rc) rc = demo_write(d->dir, "experiment.yaml", exp);
    if (!rc) rc = demo_write(d->dir, "hotfix.yaml", hot);
    free(exp);
    free(hot);
    free(hot_tmpl);
    return rc;
}

/* --write-templates DIR: the files as examples/demo holds them. */
static int demo_write_templates(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "lathe demo: cannot create %s: %s\n", dir, strerror(errno));
        return LT_EXIT_IO;
    }
    char *hot = demo_hotfix_template();
    int rc = demo_write(dir, "cluster.yaml", demo_cluster_yaml);
    if (!rc) rc = demo_write(dir, "server.yaml", demo_server_yaml);
    if (!rc) rc = demo_write(dir, "experiment.yaml", demo_experiment_yaml);
    if (!rc) rc = demo_write(dir, "hotfix.yaml", hot);
    free(hot);
    return rc;
}

/* ---- child processes ---- */

/* Starts argv (argv[0] a path) with stdout and stderr appended to log and
 * stdin from /dev/null. Returns its pid, or -1. */
static pid_t demo_spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || in < 0 || dup2(in, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(127);
    execv(argv[0], argv);
    _exit(127);
}

/* Waits for pid at most seconds; returns its exit status, 128 + signal,
 * or -1 when it is still running. */
static int demo_wait_child(pid_t pid, double seconds)
{
    double end = client_now() + seconds;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (r < 0 && errno != EINTR) return 0; /* not our child any more */
        if (client_now() >= end) return -1;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Prints the last lines of a log file on stderr. */
static void demo_print_tail(const char *path, int lines)
{
    char err[256];
    size_t len;
    char *text = file_read_all(path, (size_t)16 << 20, &len, err, sizeof err);
    if (!text) return;
    size_t i = len;
    for (int n = 0; i > 0 && n <= lines; i--) n += text[i - 1] == '\n';
    fprintf(stderr, "--- the end of %s:\n%s", path, text + i);
    free(text);
}

/* DIR/model: a copy of the base model (weights, config and tokenizer), so
 * that the folder holds everything its jobs read. */
static int demo_copy_model(demo *d)
{
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                        "tokenizer_config.json"};
    char *model = path_join(d->dir, "model");
    int rc = mkdir(model, 0755) == 0 || errno == EEXIST ? LT_EXIT_OK : LT_EXIT_IO;
    if (rc) fprintf(stderr, "lathe demo: cannot create %s: %s\n", model, strerror(errno));
    for (size_t i = 0; i < sizeof files / sizeof files[0] && !rc; i++) {
        char *from = path_join(d->base, files[i]), err[512];
        size_t len;
        char *bytes = file_read_all(from, (size_t)1 << 30, &len, err, sizeof err);
        if (!bytes) {
            fprintf(stderr, "lathe demo: %s\n", err);
            rc = LT_EXIT_IO;
        } else {
            char *to = path_join(model, files[i]);
            int e = file_write_atomic(to, bytes, len);
            if (e) fprintf(stderr, "lathe demo: cannot write %s: %s\n", to, strerror(e));
            rc = e ? LT_EXIT_IO : LT_EXIT_OK;
            free(to);
        }
        free(bytes);
        free(from);
    }
    free(model);
    return rc;
}

/* ---- the server ---- */

/* Reads a small file's first line (without the newline). Caller frees. */
static char *demo_read_line(const char *path)
{
    char err[256];
    size_t len;
    char *text = file_read_all(path, 4096, &len, err, sizeof err);
    if (!text) return NULL;
    text[strcspn(text, "\r\n")] = '\0';
    if (!*text) {
        free(text);
        return NULL;
    }
    return text;
}

/* Waits for the server to write its address and token; NULL when it died
 * or took too long. */
static bool demo_server_ready(demo *d, char **addr, char **token)
{
    char *addr_file = xasprintf("%s/data/server.addr", d->dir);
    char *token_file = xasprintf("%s/data/admin-token", d->dir);
    *addr = *token = NULL;
    double end = client_now() + 60;
    while (!demo_interrupted && client_now() < end) {
        if (demo_wait_child(d->server, 0) >= 0) {
            d->server = 0;
            break;
        }
        if (!*addr) *addr = demo_read_line(addr_file);
        if (*addr && !*token) *token = demo_read_line(token_file);
        if (*addr && *token) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    free(addr_file);
    free(token_file);
    return *addr && *token;
}

/* Starts `lathe server --config DIR/server.yaml` and connects to it. */
static int demo_start_server(demo *d)
{
    char *cfg = path_join(d->dir, "server.yaml"), *log = path_join(d->dir, "server.log");
    char *argv[] = {d->lathe, "server", "--config", cfg, NULL};
    d->server = demo_spawn(argv, log);
    char *addr = NULL, *token = NULL;
    bool ok = d->server > 0 && demo_server_ready(d, &addr, &token);
    int rc = LT_EXIT_OK;
    if (ok) {
        client_config cc = {.server = xasprintf("http://%s", addr), .token = token,
                            .timeout = 30, .server_from = "the demo's server",
                            .token_from = "data/admin-token"};
        d->c = client_new(&cc);
        free(cc.server);
        client_error err;
        client_error_init(&err);
        if ((rc = client_healthz(d->c, &err))) client_error_print(&err, "demo", stderr);
        else demo_say(d, "the web console: http://%s/ (sign in with the token in %s/data/admin-token)",
                      addr, d->dir);
        client_error_free(&err);
    } else {
        fprintf(stderr, "lathe demo: the server did not start (see %s)\n", log);
        demo_print_tail(log, 20);
        rc = LT_EXIT_UNAVAILABLE;
    }
    free(addr);
    free(token);
    free(cfg);
    free(log);
    return rc;
}

/* SIGTERM to the server, SIGKILL if it is still there 20 s later. */
static void demo_stop_server(demo *d)
{
    if (d->server <= 0) return;
    kill(d->server, SIGTERM);
    if (demo_wait_child(d->server, 20) < 0) {
        kill(d->server, SIGKILL);
        demo_wait_child(d->server, 5);
    }
    d->server = 0;
}

/* ---- trainers ---- */

/* True when the NUL-separated environment holds the entry exactly. */
static bool env_has(const char *env, size_t len, const char *entry)
{
    size_t n = strlen(entry);
    for (size_t i = 0; i < len;) {
        size_t m = strnlen(env + i, len - i);
        if (m == n && !memcmp(env + i, entry, n)) return true;
        i += m + 1;
    }
    return false;
}

/* True when the environment has a variable whose value starts with prefix
 * (name given as "NAME="). */
static bool env_starts(const char *env, size_t len, const char *name, const char *prefix)
{
    size_t nn = strlen(name), np = strlen(prefix);
    for (size_t i = 0; i < len;) {
        size_t m = strnlen(env + i, len - i);
        if (m >= nn + np && !memcmp(env + i, name, nn) && !memcmp(env + i + nn, prefix, np))
            return true;
        i += m + 1;
    }
    return false;
}

/* Calls fn on every process of this user whose environment matches. */
static size_t demo_each_process(bool (*match)(const char *env, size_t len, void *ctx), void *ctx,
                                pid_t *out, size_t max)
{
    DIR *dh = opendir("/proc");
    size_t n = 0;
    for (struct dirent *e; dh && (e = readdir(dh)) && n < max;) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid == (long)getpid()) continue;
        char path[64], err[128];
        snprintf(path, sizeof path, "/proc/%ld/environ", pid);
        size_t len;
        char *env = file_read_all(path, (size_t)4 << 20, &len, err, sizeof err);
        if (env && match(env, len, ctx)) out[n++] = (pid_t)pid;
        free(env);
    }
    if (dh) closedir(dh);
    return n;
}

typedef struct trainer_key {
    char job[160], attempt[48];
} trainer_key;

static bool match_trainer(const char *env, size_t len, void *ctx)
{
    const trainer_key *k = ctx;
    return env_has(env, len, k->job) && env_has(env, len, k->attempt);
}

/* The trainer of attempt `attempt` of team/name: the process whose
 * environment holds the trainer contract's LATHE_JOB and LATHE_ATTEMPT
 * (exec.h). 0 when there is none on this machine. */
static pid_t demo_find_trainer(const char *team, const char *name, long long attempt)
{
    trainer_key k;
    snprintf(k.job, sizeof k.job, "LATHE_JOB=%s/%s", team, name);
    snprintf(k.attempt, sizeof k.attempt, "LATHE_ATTEMPT=%lld", attempt);
    pid_t pids[8];
    size_t n = demo_each_process(match_trainer, &k, pids, 8);
    pid_t best = 0;
    for (size_t i = 0; i < n; i++) /* the oldest: the trainer, not a helper it started */
        if (!best || pids[i] < best) best = pids[i];
    return best;
}

static bool match_in_dir(const char *env, size_t len, void *ctx)
{
    return env_starts(env, len, "CHECKPOINT_DIR=", ctx) || env_starts(env, len, "LATHE_SPEC=", ctx);
}

/* After a failure: SIGKILL to any trainer still working in the demo's
 * folder (trainers outlive a stopped server by design). */
static void demo_kill_leftovers(const demo *d)
{
    pid_t pids[64];
    char *prefix = xasprintf("%s/", d->dir);
    size_t n = demo_each_process(match_in_dir, prefix, pids, 64);
    for (size_t i = 0; i < n; i++) kill(pids[i], SIGKILL);
    free(prefix);
}

/* ---- watching ---- */

static bool demo_is_final(const char *state)
{
    return state && (!strcmp(state, "succeeded") || !strcmp(state, "failed") ||
                     !strcmp(state, "cancelled") || !strcmp(state, "timed_out"));
}

/* Every job of the demo in full (a list shows no checkpoints), oldest
 * first. */
static int demo_jobs(demo *d, json_t **items)
{
    client_error err;
    client_error_init(&err);
    client_job_filter f = {0};
    json_t *list = NULL;
    int rc = client_jobs_list_all(d->c, &f, 100, &list, &err);
    *items = json_array();
    for (size_t i = json_array_size(list); i-- > 0 && !rc;) { /* the list is newest first */
        const json_t *j = json_array_get(list, i);
        json_t *full = NULL;
        rc = client_job_get(d->c, client_str(j, "name"), client_str(j, "team"), &full, &err);
        if (!rc) json_array_append_new(*items, full);
    }
    if (rc) {
        client_error_print(&err, "demo", stderr);
        json_decref(*items);
        *items = NULL;
    }
    json_decref(list);
    client_error_free(&err);
    return rc;
}

/* The slot that tracks a job's events (created when new). */
static demo_job *demo_slot(demo *d, const char *name)
{
    for (size_t i = 0; i < d->n_jobs; i++)
        if (!strcmp(d->jobs[i].name, name)) return &d->jobs[i];
    if (d->n_jobs == sizeof d->jobs / sizeof d->jobs[0]) return NULL;
    demo_job *j = &d->jobs[d->n_jobs++];
    j->name = xstrdup(name);
    j->events_seen = 0;
    j->eval_step = 0;
    j->eval_first = NAN;
    return j;
}

/* Events worth a line while the demo runs (progress and checkpoints are
 * in the live view). */
static bool demo_event_shown(const char *type)
{
    static const char *const hidden[] = {"progress", "checkpoint", "planned", "submitted"};
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
        if (type && !strcmp(type, hidden[i])) return false;
    return type != NULL;
}

/* A line when a job reports a new evaluation: the eval loss on the eval
 * file, and how far it fell since the job's first one. */
static void demo_eval_line(demo *d, demo_job *slot, const json_t *job)
{
    const json_t *ev = json_object_get(job, "eval");
    long long step = client_int(ev, "step", 0);
    double loss = client_num(ev, "loss", NAN);
    if (step <= slot->eval_step || !isfinite(loss)) return;
    if (!isfinite(slot->eval_first)) {
        slot->eval_first = loss;
        demo_say(d, "%s: eval loss %.3f at step %lld", slot->name, loss, step);
    } else {
        demo_say(d, "%s: eval loss %.3f at step %lld (%+.3f since its first evaluation)",
                 slot->name, loss, step, loss - slot->eval_first);
    }
    slot->eval_step = step;
}

/* Prints the events of every job that arrived since the last look. */
static void demo_events(demo *d, const json_t *items)
{
    size_t i, k;
    const json_t *job, *e;
    json_array_foreach(items, i, job) {
        const char *name = client_str(job, "name");
        demo_job *slot = name ? demo_slot(d, name) : NULL;
        if (!slot) continue;
        client_error err;
        client_error_init(&err);
        json_t *ev = NULL;
        if (!client_job_events(d->c, name, client_str(job, "team"), &ev, &err)) {
            const json_t *list = json_object_get(ev, "items");
            json_array_foreach(list, k, e) {
                if (k < slot->events_seen) continue;
                const char *type = client_str(e, "type");
                if (type && !strcmp(type, "preempted")) d->preempted = true;
                if (demo_event_shown(type))
                    demo_say(d, "%s: %s: %s", name, type, client_str(e, "message")
                                                              ? client_str(e, "message") : "");
            }
            slot->events_seen = json_array_size(list);
        }
        json_decref(ev);
        client_error_free(&err);
        demo_eval_line(d, slot, job);
    }
}

/* The live view: a header and one line per job (a terminal), or a line per
 * change (plain). */
static void demo_show(demo *d, const json_t *items)
{
    sb frame;
    sb_init(&frame);
    size_t i;
    const json_t *job;
    sb_printf(&frame, "  %.0fs  %s  (3 virtual L4-24GB GPUs)\n", client_now() - d->t0,
              client_server(d->c));
    json_array_foreach(items, i, job) {
        if (d->live.tty) {
            sb_puts(&frame, "  ");
            client_job_line(&frame, job, 16, true);
            sb_putc(&frame, '\n');
        } else {
            sb line;
            sb_init(&line);
            if (client_live_changed(&d->live, job, &line)) demo_say(d, "%s", sb_str(&line));
            sb_free(&line);
        }
    }
    if (d->live.tty) client_live_frame(&d->live, sb_str(&frame));
    sb_free(&frame);
}

/* The job called name in items, or NULL. */
static const json_t *demo_find(const json_t *items, const char *name)
{
    size_t i;
    const json_t *job;
    json_array_foreach(items, i, job) {
        const char *n = client_str(job, "name");
        if (n && !strcmp(n, name)) return job;
    }
    return NULL;
}

/* The newest checkpoint's step, or -1. */
static long long demo_checkpoint_step(const json_t *job)
{
    const json_t *cps = json_object_get(job, "checkpoints");
    size_t n = json_array_size(cps);
    return n ? client_int(json_array_get(cps, n - 1), "step", -1) : -1;
}

static bool demo_is_running(const json_t *job)
{
    const char *st = client_str(job, "state");
    return st && !strcmp(st, "running");
}

/* Submits a file of the demo's folder; prints what was created. */
static int demo_submit(demo *d, const char *name)
{
    char *path = path_join(d->dir, name);
    char err_text[512];
    size_t len;
    char *text = file_read_all(path, (size_t)1 << 20, &len, err_text, sizeof err_text);
    int rc = LT_EXIT_IO;
    if (text) {
        client_error err;
        client_error_init(&err);
        json_t *ans = NULL;
        rc = client_submit(d->c, text, len, false, path, NULL, &ans, NULL, &err);
        if (rc) client_error_print(&err, "demo", stderr);
        json_decref(ans);
        client_error_free(&err);
    } else {
        fprintf(stderr, "lathe demo: %s\n", err_text);
    }
    free(text);
    free(path);
    return rc;
}

/* Once every research job runs and has a checkpoint, team product submits
 * its urgent job into the full cluster. */
static int demo_maybe_hotfix(demo *d, const json_t *items)
{
    static const char *const exp[] = {"demo-lora-r8", "demo-lora-r16", "demo-lora-r32"};
    if (d->hotfix_sent) return LT_EXIT_OK;
    for (size_t i = 0; i < 3; i++) {
        const json_t *j = demo_find(items, exp[i]);
        if (!j || !demo_is_running(j) || demo_checkpoint_step(j) < 0) return LT_EXIT_OK;
    }
    demo_say(d, "-> the 3 GPUs are busy with research's experiment (2 of its quota + 1 borrowed "
                "from product); now product submits hotfix-r16 in priority class `urgent`");
    d->hotfix_sent = true;
    return demo_submit(d, "hotfix.yaml");
}

/* Once the hotfix runs, SIGKILL to the trainer of a research job that has
 * done some steps since its last checkpoint. */
static void demo_maybe_kill(demo *d, const json_t *items)
{
    const json_t *hot = demo_find(items, "hotfix-r16");
    if (d->killed || !hot || !demo_is_running(hot)) return;
    size_t i;
    const json_t *j;
    json_array_foreach(items, i, j) {
        const char *name = client_str(j, "name");
        long long step = client_int(json_object_get(j, "progress"), "step", -1);
        long long ckpt = demo_checkpoint_step(j);
        if (!name || j == hot || !demo_is_running(j) || ckpt < 0 || step < ckpt + 2) continue;
        pid_t pid = demo_find_trainer(client_str(j, "team"), name, client_int(j, "attempt", 1));
        if (pid <= 0) continue;
        demo_say(d, "-> SIGKILL to the trainer of %s (pid %d) at step %lld; its newest "
                    "checkpoint is step %lld, so the server retries it from there",
                 name, (int)pid, step, ckpt);
        kill(pid, SIGKILL);
        d->killed = true;
        snprintf(d->killed_job, sizeof d->killed_job, "%s", name);
        return;
    }
}

/* True when the experiment's jobs (and the hotfix, once sent) have all
 * ended: nothing is left to watch. */
static bool demo_done(const demo *d, const json_t *items)
{
    size_t i, n = 0;
    const json_t *j;
    json_array_foreach(items, i, j) {
        if (!demo_is_final(client_str(j, "state"))) return false;
        n++;
    }
    return n >= (d->hotfix_sent ? 4u : 3u);
}

/* Watches until every job ended (or the timeout, or Ctrl-C). */
static int demo_watch(demo *d)
{
    double deadline = d->t0 + d->o.timeout;
    for (;;) {
        if (demo_interrupted) {
            demo_say(d, "interrupted");
            return LT_EXIT_USAGE;
        }
        json_t *items = NULL;
        int rc = demo_jobs(d, &items);
        if (rc) return rc;
        demo_events(d, items);
        demo_show(d, items);
        rc = demo_maybe_hotfix(d, items);
        if (!rc) demo_maybe_kill(d, items);
        bool done = demo_done(d, items);
        json_decref(items);
        if (rc) return rc;
        if (done) break;
        if (client_now() > deadline) {
            demo_say(d, "the jobs did not finish within --timeout");
            return LT_EXIT_INTERNAL;
        }
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (d->live.tty) client_live_end(&d->live);
    return LT_EXIT_OK;
}

/* ---- the end ---- */

/* A duration in a few characters. */
static void demo_secs(char *out, size_t outsz, double s)
{
    if (s < 1) snprintf(out, outsz, "0s");
    else units_format_duration(out, outsz, s);
}

/* Collects log text. */
static bool demo_collect(void *ctx, const char *data, size_t len)
{
    sb_putn(ctx, data, len);
    return true;
}

/* The step attempt k of a job resumed from (its trainer's "[lathe-train]
 * resume step=N" line, docs/trainer.md), or -1 when it started afresh. */
static long demo_resume_step(demo *d, const json_t *job, int k)
{
    sb log;
    sb_init(&log);
    client_error err;
    client_error_init(&err);
    client_logs_opts o = {.attempt = k, .tail = -1};
    long step = -1;
    if (!client_job_logs(d->c, client_str(job, "name"), client_str(job, "team"), &o, demo_collect,
                         &log, &err)) {
        const char *p = strstr(sb_str(&log), "[lathe-train] resume step=");
        if (p) step = strtol(p + strlen("[lathe-train] resume step="), NULL, 10);
    }
    client_error_free(&err);
    sb_free(&log);
    return step;
}

/* One start in the story: "started after 0s", "resumed from step 40 after
 * 31s", "restarted after 2s". */
static void demo_story_start(demo *d, const json_t *job, int k, double waited, sb *out)
{
    char w[32];
    demo_secs(w, sizeof w, waited);
    long from = k > 1 ? demo_resume_step(d, job, k) : -1;
    if (k == 1) sb_printf(out, "started after %s", w);
    else if (from >= 0) sb_printf(out, " -> resumed from step %ld after %s", from, w);
    else sb_printf(out, " -> restarted after %s", w);
}

/* "started after 0s -> preempted -> resumed from step 20 after 6s ->
 * succeeded", from a job's events (and its trainer's logs). */
static void demo_story(demo *d, const json_t *job, const json_t *events, sb *out)
{
    size_t i;
    int starts = 0;
    const json_t *e;
    double wait_from = 0;
    bool killed = !strcmp(d->killed_job, client_str(job, "name") ? client_str(job, "name") : "");
    json_array_foreach(json_object_get(events, "items"), i, e) {
        const char *type = client_str(e, "type");
        double at = 0;
        client_parse_time(client_str(e, "at"), &at);
        if (!type) continue;
        if (!strcmp(type, "submitted") || !strcmp(type, "queued")) {
            if (wait_from == 0) wait_from = at;
        } else if (!strcmp(type, "started")) {
            demo_story_start(d, job, ++starts, wait_from > 0 ? at - wait_from : 0, out);
            wait_from = 0;
        } else if (!strcmp(type, "preempted") || !strcmp(type, "retrying") ||
                   !strcmp(type, "replanned")) {
            sb_printf(out, " -> %s", !strcmp(type, "retrying")
                                         ? (killed ? "killed (SIGKILL), retried" : "failed, retried")
                                         : type);
            if (wait_from == 0) wait_from = at;
        } else if (demo_is_final(type)) {
            sb_printf(out, " -> %s", type);
        }
    }
}

/* One row of the summary table. */
static void demo_summary_row(client_table *t, const json_t *j)
{
    const json_t *p = json_object_get(j, "progress");
    const json_t *cps = json_object_get(j, "checkpoints");
    const json_t *last = json_array_get(cps, json_array_size(cps) ? json_array_size(cps) - 1 : 0);
    const json_t *ev = json_object_get(j, "eval");
    char steps[32], loss[32], best[48] = "-", tps[32], gh[32], cost[32], att[32];
    snprintf(steps, sizeof steps, "%lld", client_int(p, "step", 0));
    snprintf(loss, sizeof loss, "%.4f", client_num(p, "loss", NAN));
    if (json_is_object(ev))
        snprintf(best, sizeof best, "%.4f@%lld", client_num(ev, "best_loss", NAN),
                 client_int(ev, "best_step", -1));
    snprintf(tps, sizeof tps, "%.0f", client_num(p, "tokens_per_second", NAN));
    snprintf(gh, sizeof gh, "%.5f", client_num(j, "gpu_hours", 0));
    snprintf(cost, sizeof cost, "%.4f", client_num(j, "cost", 0));
    snprintf(att, sizeof att, "%lld", client_int(j, "attempt", 0));
    client_table_row(t, client_str(j, "name"), client_str(j, "team"), client_str(j, "state"),
                     steps, loss, best, tps, gh, cost, att, client_str(last, "path"));
}

/* "  NAME  story" and, when the trainer wrote one, its final adapter (the
 * `final` folder beside the checkpoints, docs/trainer.md). */
static void demo_summary_story(demo *d, const json_t *j, sb *stories, sb *adapters)
{
    json_t *ev = NULL;
    client_error err;
    client_error_init(&err);
    if (!client_job_events(d->c, client_str(j, "name"), client_str(j, "team"), &ev, &err)) {
        sb s;
        sb_init(&s);
        demo_story(d, j, ev, &s);
        sb_printf(stories, "  %-14s %s\n", client_str(j, "name"), sb_str(&s));
        sb_free(&s);
    }
    json_decref(ev);
    client_error_free(&err);
    const json_t *cps = json_object_get(j, "checkpoints");
    const char *path = client_str(json_array_get(cps, json_array_size(cps) - 1), "path");
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!slash) return;
    char *final = xasprintf("%.*s/final", (int)(slash - path), path);
    if (dir_exists(final)) sb_printf(adapters, "  %-14s %s\n", client_str(j, "name"), final);
    free(final);
}

/* The experiment's comparison: its job with the lowest eval loss (on the
 * eval file, which no job trains on), or NULL. */
static const json_t *demo_best_eval(const json_t *items)
{
    const json_t *best = NULL, *j;
    size_t i;
    json_array_foreach(items, i, j) {
        const json_t *ev = json_object_get(j, "eval");
        double v = client_num(ev, "best_loss", NAN);
        if (!client_str(j, "experiment") || !isfinite(v)) continue;
        if (!best || v < client_num(json_object_get(best, "eval"), "best_loss", NAN)) best = j;
    }
    if (!best) return NULL;
    const json_t *ev = json_object_get(best, "eval");
    printf("\nBest eval loss of experiment %s: %s, %.4f at step %lld (latest %.4f at step %lld)\n",
           client_str(best, "experiment"), client_str(best, "name"), client_num(ev, "best_loss", NAN),
           client_int(ev, "best_step", -1), client_num(ev, "loss", NAN), client_int(ev, "step", -1));
    return best;
}

/* ---- what the experiment learned ---- */

/* The steps averaged at each end of a loss curve (one step's loss is that
 * of its few sequences, so it jumps). */
#define DEMO_CURVE_ENDS 10

/* A job's loss curve, from the server's progress history. */
typedef struct demo_curve {
    double first_train, last_train; /* mean loss of the first / last DEMO_CURVE_ENDS steps */
    double first_eval, best_eval;   /* at the first evaluation / the lowest */
    long long first_eval_step, best_eval_step;
} demo_curve;

/* Fills c from GET /v1/jobs/NAME/progress. A resumed attempt reports again
 * the steps after its checkpoint: the last report of a step counts. */
static bool demo_curve_of(demo *d, const json_t *job, demo_curve *c)
{
    long long steps = client_int(json_object_get(job, "progress"), "step", 0);
    if (steps < 2 * DEMO_CURVE_ENDS) return false;
    json_t *out = NULL;
    client_error err;
    client_error_init(&err);
    int rc = client_job_progress(d->c, client_str(job, "name"), client_str(job, "team"), 0, &out,
                                 &err);
    client_error_free(&err);
    if (rc) return false;
    double *loss = xmalloc((size_t)(steps + 1) * sizeof *loss);
    double *eval = xmalloc((size_t)(steps + 1) * sizeof *eval);
    for (long long k = 0; k <= steps; k++) loss[k] = eval[k] = NAN;
    size_t i;
    const json_t *p;
    json_array_foreach(json_object_get(out, "items"), i, p) {
        long long k = client_int(p, "step", -1);
        if (k < 1 || k > steps) continue;
        if (isfinite(client_num(p, "loss", NAN))) loss[k] = client_num(p, "loss", NAN);
        if (isfinite(client_num(p, "eval_loss", NAN))) eval[k] = client_num(p, "eval_loss", NAN);
    }
    json_decref(out);
    double a = 0, b = 0;
    int na = 0, nb = 0;
    *c = (demo_curve){.first_eval = NAN, .best_eval = NAN};
    for (long long k = 1; k <= DEMO_CURVE_ENDS; k++)
        if (isfinite(loss[k])) a += loss[k], na++;
    for (long long k = steps - DEMO_CURVE_ENDS + 1; k <= steps; k++)
        if (isfinite(loss[k])) b += loss[k], nb++;
    c->first_train = na ? a / na : NAN;
    c->last_train = nb ? b / nb : NAN;
    for (long long k = 1; k <= steps; k++) {
        if (!isfinite(eval[k])) continue;
        if (!isfinite(c->first_eval)) c->first_eval = eval[k], c->first_eval_step = k;
        if (!isfinite(c->best_eval) || eval[k] < c->best_eval)
            c->best_eval = eval[k], c->best_eval_step = k;
    }
    free(loss);
    free(eval);
    return isfinite(c->first_train) && isfinite(c->last_train);
}

/* Per experiment job: its rank, how its training loss fell and how its
 * eval loss fell; then which rank learned most in the same steps. */
static void demo_learning(demo *d, const json_t *items, const json_t *best)
{
    client_table t;
    client_table_init(&t, 4, "JOB", "RANK", "TRAIN LOSS (FIRST -> LAST 10 STEPS)",
                      "EVAL LOSS (FIRST -> BEST)");
    size_t i, rows = 0;
    const json_t *j;
    demo_curve bc = {0};
    json_array_foreach(items, i, j) {
        demo_curve c;
        if (!client_str(j, "experiment") || !demo_curve_of(d, j, &c)) continue;
        const json_t *spec = json_object_get(j, "spec"); /* the resolved document */
        if (json_object_get(spec, "spec")) spec = json_object_get(spec, "spec");
        const json_t *lora = json_object_get(spec, "lora");
        char rank[16], train[64], ev[64] = "-";
        snprintf(rank, sizeof rank, "%lld", client_int(lora, "rank", 0));
        snprintf(train, sizeof train, "%.3f -> %.3f", c.first_train, c.last_train);
        if (isfinite(c.first_eval))
            snprintf(ev, sizeof ev, "%.3f@%lld -> %.3f@%lld", c.first_eval, c.first_eval_step,
                     c.best_eval, c.best_eval_step);
        client_table_row(&t, client_str(j, "name"), rank, train, ev);
        if (j == best) bc = c;
        rows++;
    }
    if (rows) {
        printf("\nHow each rank learned (mean loss per answer token; eval: the %d tasks of "
               "eval.jsonl, never trained on):\n", DEMO_EVAL_TASKS);
        client_table_print(&t, stdout);
        if (best && isfinite(bc.first_eval))
            printf("Learned most in the same steps: %s (eval loss %.3f -> %.3f, training loss "
                   "%.3f -> %.3f)\n", client_str(best, "name"), bc.first_eval, bc.best_eval,
                   bc.first_train, bc.last_train);
    }
    client_table_free(&t);
}

/* The prompt the comparison asks: the eval file's first task without an
 * input and shorter than 100 bytes (else its first task). Caller frees. */
static char *demo_eval_prompt(const demo *d)
{
    char err[256];
    size_t len;
    char *text = file_read_all(d->eval, (size_t)16 << 20, &len, err, sizeof err);
    char *found = NULL, *first = NULL;
    for (char *line = text, *nl; line && *line && !found; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        json_t *r = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        const char *ins = client_str(r, "instruction"), *in = client_str(r, "input");
        if (ins && !first) first = xstrdup(ins);
        if (ins && (!in || !*in) && strlen(ins) < 100) found = xstrdup(ins);
        json_decref(r);
    }
    free(text);
    if (found) free(first);
    return found ? found : first;
}

/* `lathe generate --model DIR/model [--adapter A] --chat --prompt P`: its
 * answer (NULL when it failed), the newline it ends with removed. */
static char *demo_generate(demo *d, const char *adapter, const char *prompt)
{
    char *model = path_join(d->dir, "model"), *log = path_join(d->dir, "generate.log");
    unlink(log);
    char *argv[] = {d->lathe, "generate", "--model", model, "--chat", "--prompt", (char *)prompt,
                    "--max-new", "48", "--threads", "1", adapter ? "--adapter" : NULL,
                    (char *)adapter, NULL};
    pid_t pid = demo_spawn(argv, log);
    int st = pid > 0 ? demo_wait_child(pid, 120) : -1;
    char err[256];
    size_t len;
    char *out = st == 0 ? file_read_all(log, (size_t)1 << 20, &len, err, sizeof err) : NULL;
    if (st != 0) {
        fprintf(stderr, "lathe demo: `lathe generate` failed (status %d)\n", st);
        demo_print_tail(log, 5);
    }
    if (out && len && out[len - 1] == '\n') out[len - 1] = '\0';
    free(model);
    free(log);
    return out;
}

/* One answer as a table cell: one line, newlines shown as "\n", at most
 * 110 bytes (whole UTF-8 characters). */
static void demo_answer_cell(char *out, size_t outsz, const char *text)
{
    size_t o = 0;
    for (const char *p = text ? text : "(failed)"; *p && o + 8 < outsz && o < 110; p++) {
        if (*p == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else if (*p != '\r' && *p != '\t') {
            out[o++] = *p;
        }
    }
    while (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0x80) o--; /* a cut character */
    if (o > 0 && (unsigned char)out[o - 1] >= 0xC0) o--;
    out[o] = '\0';
    if (text && strlen(text) > o) snprintf(out + o, outsz - o, "...");
}

/* The base model and the best adapter answer the same eval instruction. */
static void demo_answers(demo *d, const json_t *best)
{
    const json_t *ev = json_object_get(best, "eval");
    const char *adapter = client_str(ev, "best_checkpoint");
    if (!adapter || !dir_exists(adapter)) adapter = client_str(best, "adapter");
    char *prompt = demo_eval_prompt(d);
    if (!adapter || !prompt) {
        free(prompt);
        return;
    }
    char *base = demo_generate(d, NULL, prompt), *tuned = demo_generate(d, adapter, prompt);
    char who[96], a[160], b[160];
    snprintf(who, sizeof who, "+ %s (step %lld)", client_str(best, "name"),
             client_int(ev, "best_step", -1));
    demo_answer_cell(a, sizeof a, base);
    demo_answer_cell(b, sizeof b, tuned);
    printf("\nThe eval file's instruction \"%s\", answered by `lathe generate --chat` (greedy, "
           "48 tokens):\n", prompt);
    client_table t;
    client_table_init(&t, 2, "MODEL", "ANSWER");
    client_table_row(&t, "base model", a);
    client_table_row(&t, who, b);
    client_table_print(&t, stdout);
    if (base && tuned && !strcmp(base, tuned))
        printf("note: the adapter answers as the base model does (try more --steps)\n");
    client_table_free(&t);
    free(base);
    free(tuned);
    free(prompt);
}

/* The table per job, then each job's story and its adapter. */
static void demo_summary(demo *d, const json_t *items)
{
    client_table t;
    client_table_init(&t, 11, "JOB", "TEAM", "STATE", "STEPS", "FINAL LOSS", "BEST EVAL", "TOK/S",
                      "GPU-HOURS", "COST", "ATTEMPTS", "CHECKPOINT");
    sb stories, adapters;
    sb_init(&stories);
    sb_init(&adapters);
    size_t i;
    const json_t *j;
    json_array_foreach(items, i, j) {
        demo_summary_row(&t, j);
        demo_summary_story(d, j, &stories, &adapters);
    }
    printf("\n");
    client_table_print(&t, stdout);
    printf("\nHow each job got its GPUs:\n%s", sb_str(&stories));
    const json_t *best = demo_best_eval(items);
    demo_learning(d, items, best);
    if (best) demo_answers(d, best);
    if (adapters.len && !d->o.clean)
        printf("\nFinal adapters (PEFT format; try `lathe generate --model %s/model --adapter "
               "DIR --prompt ...`):\n%s", d->dir, sb_str(&adapters));
    client_table_free(&t);
    sb_free(&stories);
    sb_free(&adapters);
}

/* Whether the run showed what it should: every job succeeded, one was
 * preempted, the killed one was retried. Says what is missing. */
static bool demo_check(const demo *d, const json_t *items)
{
    size_t i;
    const json_t *j;
    bool ok = true;
    json_array_foreach(items, i, j) {
        const char *st = client_str(j, "state");
        if (!st || strcmp(st, "succeeded")) {
            printf("note: %s ended %s (lathe describe job %s tells why)\n", client_str(j, "name"),
                   st ? st : "?", client_str(j, "name"));
            ok = false;
        }
    }
    if (!d->preempted)
        printf("note: no job was preempted (the experiment ended before the urgent job came; "
               "try more --steps)\n");
    if (!d->killed)
        printf("note: no trainer was killed (none ran past a checkpoint in time; try more "
               "--steps)\n");
    return ok;
}

/* Cancels what still runs (after a failure or Ctrl-C) and waits a little
 * for the trainers to checkpoint and stop. */
static void demo_cancel_all(demo *d)
{
    json_t *items = NULL;
    if (!d->c || demo_jobs(d, &items)) return;
    size_t i;
    const json_t *j;
    json_array_foreach(items, i, j) {
        if (demo_is_final(client_str(j, "state"))) continue;
        client_error err;
        client_error_init(&err);
        json_t *ans = NULL;
        client_job_cancel(d->c, client_str(j, "name"), client_str(j, "team"), &ans, &err);
        json_decref(ans);
        client_error_free(&err);
    }
    json_decref(items);
    for (int k = 0; k < 60; k++) {
        items = NULL;
        if (demo_jobs(d, &items)) break;
        bool all = true;
        json_array_foreach(items, i, j) all = all && demo_is_final(client_str(j, "state"));
        json_decref(items);
        if (all) break;
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* rm -rf of the demo's folder (nothing in it is a link we follow). */
static void demo_remove(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *dh = opendir(path);
        for (struct dirent *e; dh && (e = readdir(dh));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *child = path_join(path, e->d_name);
            demo_remove(child);
            free(child);
        }
        if (dh) closedir(dh);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* ---- the run ---- */

static void demo_print_by_hand(const demo *d)
{
    printf("The demo's files are in %s. To run it by hand:\n\n"
           "  %s server --config %s/server.yaml &\n"
           "  export LATHE_SERVER=$(cat %s/data/server.addr) "
           "LATHE_TOKEN=$(cat %s/data/admin-token)\n"
           "  %s submit %s/experiment.yaml\n"
           "  %s top\n"
           "  %s submit %s/hotfix.yaml\n"
           "  %s wait hotfix-r16 && %s get jobs -o wide\n",
           d->dir, d->lathe, d->dir, d->dir, d->dir, d->lathe, d->dir, d->lathe, d->lathe, d->dir,
           d->lathe, d->lathe);
}

/* Folder, inputs, files and model. */
static int demo_setup(demo *d)
{
    int rc = demo_inputs(d);
    if (!rc) rc = demo_make_dir(d);
    if (rc) return rc;
    printf("lathe demo: working in %s\n", d->dir);
    printf("  data: %s\n", d->data);
    fflush(stdout);
    rc = demo_write_files(d);
    if (!rc) rc = demo_copy_model(d);
    if (!rc)
        printf("  eval: %s/eval.jsonl (the first %d tasks of %s, never trained on)\n"
               "  base model: %s/model, copied from %s (a small Qwen3-shaped model lathe\n"
               "              pretrained on tinyshakespeare: scripts/make-demo-base.sh)\n",
               d->dir, DEMO_EVAL_TASKS, d->eval_src, d->dir, d->base);
    return rc;
}

/* Server, experiment, watching, summary. */
static int demo_play(demo *d)
{
    int rc = demo_start_server(d);
    if (rc) return rc;
    printf("  server: %s (pid %d, log %s/server.log)\n\n", client_server(d->c), (int)d->server,
           d->dir);
    d->t0 = client_now();
    demo_say(d, "-> team research submits experiment demo-lora: LoRA ranks 8, 16, 32, %ld steps "
                "each", d->o.steps);
    rc = demo_submit(d, "experiment.yaml");
    if (!rc) rc = demo_watch(d);
    json_t *items = NULL;
    if (!rc && !(rc = demo_jobs(d, &items))) {
        demo_summary(d, items);
        if (!demo_check(d, items)) rc = LT_EXIT_INTERNAL;
    }
    json_decref(items);
    return rc;
}

static void demo_finish(demo *d, int rc)
{
    if (rc && d->c) demo_cancel_all(d);
    demo_stop_server(d);
    if (rc && d->dir) demo_kill_leftovers(d);
    if (!d->dir) return;
    if (d->o.clean) {
        demo_remove(d->dir);
        printf("\nremoved %s\n", d->dir);
    } else if (!d->o.setup_only) {
        printf("\nEverything is in %s: server.log, data/ (the database, each job's folder with "
               "its trainer logs, checkpoints and final adapter). Remove it with rm -rf %s\n",
               d->dir, d->dir);
    }
}

static void demo_free(demo *d)
{
    client_free(d->c);
    client_live_free(&d->live);
    for (size_t i = 0; i < d->n_jobs; i++) free(d->jobs[i].name);
    free(d->dir);
    free(d->lathe);
    free(d->data);
    free(d->base);
    free(d->eval_src);
    free(d->eval);
}

static int demo_parse(int argc, char **argv, demo_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = !strcmp(a, "--dir") || !strcmp(a, "--steps") || !strcmp(a, "--data-dir") ||
                     !strcmp(a, "--timeout") || !strcmp(a, "--write-templates");
        if (takes && !val) return cli_usage_error("demo", "%s needs a value", a);
        if (!strcmp(a, "--dir")) o->dir = val;
        else if (!strcmp(a, "--data-dir")) o->data_dir = val;
        else if (!strcmp(a, "--write-templates")) o->templates_dir = val;
        else if (!strcmp(a, "--steps")) {
            char *end;
            o->steps = strtol(val, &end, 10);
            if (*end || o->steps < 12 || o->steps > 100000)
                return cli_usage_error("demo", "--steps takes a number from 12 to 100000");
        } else if (!strcmp(a, "--timeout")) {
            if (!units_parse_duration(val, &o->timeout))
                return cli_usage_error("demo", "--timeout takes a duration such as 10m");
        } else if (!strcmp(a, "--clean")) o->clean = true;
        else if (!strcmp(a, "--plain")) o->plain = true;
        else if (!strcmp(a, "--setup-only")) o->setup_only = true;
        else return cli_usage_error("demo", "unknown argument '%s'", a);
        if (takes) i++;
    }
    return LT_EXIT_OK;
}

static int demo_run(int argc, char **argv)
{
    demo d;
    memset(&d, 0, sizeof d);
    d.o.steps = 120;
    d.o.timeout = 600;
    int rc = demo_parse(argc, argv, &d.o);
    if (rc) return rc;
    if (d.o.templates_dir) return demo_write_templates(d.o.templates_dir);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = demo_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    client_live_init(&d.live, stdout, d.o.plain);
    rc = demo_setup(&d);
    if (!rc && d.o.setup_only) demo_print_by_hand(&d);
    else if (!rc) rc = demo_play(&d);
    demo_finish(&d, rc);
    demo_free(&d);
    return rc;
}

const cli_command cli_cmd_demo = {
    .name = "demo",
    .summary = "run lathe end to end on this machine (server, experiment, preemption, resume)",
    .help = demo_help,
    .run = demo_run,
};
