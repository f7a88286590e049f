/* test_exec_sandbox.c: the local executor's sandbox (exec_sandbox.c) with
 * real processes, driven as the server drives it: exec_start with an
 * exec_sandbox. This program is also the supervisor (main hands
 * "exec-shim" to exec_shim_main) and, with "hog", a memory hog.
 *
 * Covered, each as an attack a trainer could try: reading /etc/shadow, a
 * file outside the binds (the server's data folder with its admin token
 * and database), another job's folder, /proc of the supervisor or of this
 * test (its /proc shows only its own PID namespace); writing outside its
 * checkpoints and work folders (its output.log included); a link in its
 * folders into another team's; tokens in the environment; a fork bomb; a
 * memory hog; SIGTERM still reaching it and classified as before; a path
 * swapped after the request was built (the supervisor's re-check). As
 * root the trainer runs as uid and gid 61001, and the test checks so.
 *
 * Every test skips (with the reason) where exec_sandbox_probe says this
 * machine cannot make a sandbox, but the one of that case (an optional
 * sandbox skipped, a required one refused), which tests/security/
 * fallback.sh runs without capabilities. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/exec.h"
#include "exec_test.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_LIMIT 60.0 /* seconds any single wait may take before the test fails */
#define TEAM_UID 61001  /* the trainer's user and group when the test runs as root */
#define BOMB_UID 61009  /* the fork bomb's: no other test's processes to count */

static char self_exe[4096];

typedef struct fx {
    char *dir;      /* everything of the test */
    char *data;     /* a fake server data folder: admin-token, lathe.db, other jobs */
    char *root;     /* a data root the job may read */
    char *other;    /* another team's folder */
    char *outside;  /* a folder outside every root */
    exec_backend *be;
} fx;


static void put_file(const char *dir, const char *name, const char *text)
{
    char *p = path_join(dir, name);
    FILE *f = fopen(p, "w");
    if (!f) fail_msg("%s: %s", p, strerror(errno));
    fputs(text, f);
    fclose(f);
    chmod(p, 0644);
    free(p);
}

static char *sub(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    if (mkdir(p, 0755) != 0 && errno != EEXIST) fail_msg("%s: %s", p, strerror(errno));
    chmod(p, 0755);
    return p;
}

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    f->dir = xstrdup("/tmp/lathe-sandbox-test-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    chmod(f->dir, 0755);
    f->data = sub(f->dir, "data");
    put_file(f->data, "admin-token", "ADMIN-TOKEN-c0ffee\n");
    put_file(f->data, "lathe.db", "SQLITE-DATABASE-c0ffee\n");
    f->root = sub(f->dir, "datasets");
    put_file(f->root, "train.jsonl", "{\"text\": \"DATASET-LINE\"}\n");
    f->other = sub(f->dir, "team-b");
    put_file(f->other, "secret.txt", "TEAM-B-SECRET\n");
    f->outside = sub(f->dir, "outside");
    put_file(f->outside, "lathe.db", "SWAPPED-TARGET\n");
    f->be = exec_local_new(NULL);
    *state = f;
    return 0;
}

/* The supervisors may write to their shim.log the sandbox's line and the
 * poll's warnings, nothing else. */
static const char *const shim_lines[] = {"exec-shim: sandboxed: ", "exec-shim: not sandboxed: ",
                                         "lathe: ignored the trainer's line ", NULL};

static int teardown(void **state)
{
    fx *f = *state;
    et_check_shim_logs(f->dir, shim_lines);
    exec_backend_free(f->be);
    char err[512];
    /* a trainer of another uid made files there; root removes them all.
     * An attempt's end is seen when its trainer is gone; the sandbox's
     * init and the supervisor may still be exiting (a trainer killed by
     * the out-of-memory killer, on a loaded machine) and write their last
     * lines, so a folder not yet empty is tried again for a few seconds. */
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; i++) {
        rc = file_remove_tree(f->dir, err, sizeof err);
        if (rc != 0) et_nap(0.05);
    }
    if (rc != 0) print_error("teardown: %s\n", err);
    free(f->dir);
    free(f->data);
    free(f->root);
    free(f->other);
    free(f->outside);
    free(f);
    return rc == 0 ? 0 : -1;
}

static bool skip_without_sandbox(void)
{
    char why[256];
    if (exec_sandbox_probe(why, sizeof why)) return false;
    print_message("skipped: this machine cannot make a sandbox (%s)\n", why);
    return true;
}

#define NEED_SANDBOX()                                                                             \
    do {                                                                                           \
        if (skip_without_sandbox()) {                                                              \
            skip();                                                                                \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- one attempt ---- */

typedef struct job {
    char *dir, *checkpoints, *work;
    exec_bind binds[8];
    size_t n_binds;
    const char *hide[2];
    exec_path_check checks[2];
    const char *roots[2];
    exec_sandbox box;
    exec_handle *h;
    exec_status st;
    char *ckpts[16]; /* the checkpoints and the adapter polls reported */
    size_t n_ckpts;
    char *adapter;
} job;

/* A job folder under f->dir with the sandbox the server would give it:
 * the data root read-only, this program read-only (the hog), the job's
 * folder read-only, checkpoints and the attempt's work folder read-write;
 * the fake data folder hidden should a root show it. */
static void job_init(fx *f, job *j, const char *name)
{
    memset(j, 0, sizeof *j);
    j->dir = path_join(f->dir, name);
    if (mkdir(j->dir, 0755) != 0) fail_msg("%s: %s", j->dir, strerror(errno));
    put_file(j->dir, "spec.yaml", "kind: LoRATrainingJob\n");
    j->checkpoints = path_join(j->dir, "checkpoints");
    j->work = path_join(j->dir, "attempt-1/work");
    j->binds[j->n_binds++] = (exec_bind){f->root, false};
    j->binds[j->n_binds++] = (exec_bind){self_exe, false};
    j->binds[j->n_binds++] = (exec_bind){j->dir, false};
    j->binds[j->n_binds++] = (exec_bind){j->checkpoints, true};
    j->binds[j->n_binds++] = (exec_bind){j->work, true};
    j->hide[0] = f->data;
    j->roots[0] = f->root;
    j->box.required = true;
    j->box.uid = j->box.gid = geteuid() == 0 ? TEAM_UID : -1;
    j->box.binds = j->binds;
    j->box.n_binds = j->n_binds;
    j->box.hide = j->hide;
    j->box.n_hide = 1;
    j->box.checks = j->checks;
    j->box.processes = 256;
    j->box.cgroup = TOGGLE_AUTO;
}

static void job_free(job *j)
{
    for (size_t i = 0; i < j->n_ckpts; i++) free(j->ckpts[i]);
    free(j->adapter);
    exec_release(j->h);
    free(j->dir);
    free(j->checkpoints);
    free(j->work);
}

static exec_rc job_start(fx *f, job *j, const char *const *argv, size_t argc, char *err)
{
    exec_request req;
    memset(&req, 0, sizeof req);
    req.argv = (char *const *)argv;
    req.argc = argc;
    req.job_dir = j->dir;
    req.attempt = 1;
    req.contract.checkpoint_interval = -1;
    req.contract.checkpoint_dir = j->checkpoints;
    req.contract.dataset_path = j->n_binds ? f->root : NULL;
    req.no_retry_codes = EXEC_BUILTIN_NO_RETRY;
    req.n_no_retry_codes = 1;
    req.sandbox = &j->box;
    return exec_start(f->be, &req, &j->h, err, 1024);
}

static void job_wait(job *j)
{
    double until = et_now() + WAIT_LIMIT;
    for (;;) {
        exec_update up;
        exec_poll(j->h, et_now(), &j->st, &up);
        for (size_t i = 0; i < up.n_checkpoints && j->n_ckpts < 16; i++)
            j->ckpts[j->n_ckpts++] = xstrdup(up.checkpoints[i].path);
        if (up.adapter && !j->adapter) j->adapter = xstrdup(up.adapter);
        if (j->st.phase != EXEC_RUNNING) return;
        if (et_now() > until) {
            char err[256];
            exec_signal(j->h, SIGKILL, err, sizeof err);
            fail_msg("the trainer did not end within %.0f s", WAIT_LIMIT);
        }
        et_nap(0.02);
    }
}

static void job_run(fx *f, job *j, const char *const *argv, size_t argc)
{
    char err[1024];
    exec_rc rc = job_start(f, j, argv, argc, err);
    if (rc != EXEC_OK) fail_msg("start %s: %s: %s", argv[0], exec_rc_name(rc), err);
    job_wait(j);
}

static void assert_absent(const char *log, const char *what)
{
    if (strstr(log, what)) fail_msg("the trainer got \"%s\":\n%s", what, log);
}

static void assert_present(const char *log, const char *what)
{
    if (!strstr(log, what)) fail_msg("no \"%s\" in the trainer's output:\n%s", what, log);
}

/* ---- reading ---- */

static void test_reads_confined(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    job other, j;
    job_init(f, &other, "other-job");
    put_file(other.dir, "secret.yaml", "OTHER-JOB-SPEC\n");
    job_init(f, &j, "job");
    char *script = xasprintf(
        "echo uid=$(id -u) gid=$(id -g) groups=$(id -G); cat /etc/shadow /etc/gshadow; "
        "cat %s/admin-token %s/lathe.db; cat %s/secret.yaml; cat %s/secret.txt; "
        "cat /proc/%d/environ /proc/%d/cmdline; echo procs=$(ls -d /proc/[0-9]* | tr '\\n' ' '); "
        "cat %s/train.jsonl; cat %s/spec.yaml; echo cwd=$(pwd) home=$HOME; "
        "echo fds=$(ls /proc/self/fd | tr '\n' ' '); ls -l /proc/self/fd",
        f->data, f->data, other.dir, f->other, (int)getpid(), (int)getppid(), f->root, j.dir);
    const char *argv[] = {"/bin/sh", "-c", script};
    job_run(f, &j, argv, 3);
    char *log = et_read_log(j.h);
    assert_int_equal(j.st.end, EXEC_END_SUCCEEDED);
    /* what it may read */
    assert_present(log, "DATASET-LINE");
    assert_present(log, "kind: LoRATrainingJob");
    char *cwd = xasprintf("cwd=%s home=%s", j.work, j.work);
    assert_present(log, cwd);
    free(cwd);
    /* what it may not */
    assert_absent(log, "ADMIN-TOKEN");
    assert_absent(log, "SQLITE-DATABASE");
    assert_absent(log, "OTHER-JOB-SPEC");
    assert_absent(log, "TEAM-B-SECRET");
    char err[256];
    size_t len;
    char *shadow = file_read_all("/etc/shadow", 1 << 20, &len, err, sizeof err);
    if (shadow && len) {
        shadow[strcspn(shadow, "\n")] = '\0';
        assert_absent(log, shadow);
    }
    free(shadow);
    assert_absent(log, "LATHE_"); /* this test's environ and cmdline */
    assert_absent(log, "test_exec_sandbox");
    /* its descriptors: stdin, stdout, stderr, the job's lock and ls's own
     * directory; never the supervisor's socket to the server */
    char *fds = strstr(log, "fds=");
    assert_non_null(fds);
    fds[strcspn(fds, "\n")] = '\0';
    int count = 0;
    for (char *p = fds + 4; *p; p++)
        if (*p != ' ' && (p == fds + 4 || p[-1] == ' ')) count++;
    if (count > 5)
        fail_msg("the trainer has more descriptors than it should: %s\n%s", fds,
                 fds + strlen(fds) + 1);
    fds[strlen(fds)] = '\n';
    /* its /proc: the namespace's init (1) and the trainer (2) and what it runs */
    char *procs = strstr(log, "procs=");
    assert_non_null(procs);
    assert_true(str_starts_with(procs, "procs=/proc/1 "));
    assert_non_null(strstr(procs, " /proc/2"));
    for (const char *p = strstr(procs, "/proc/"); p && p < strchr(procs, '\n');
         p = strstr(p + 1, "/proc/"))
        if (atoi(p + strlen("/proc/")) > 64) fail_msg("its /proc shows pid %d", atoi(p + 6));
    if (geteuid() == 0) {
        assert_present(log, "uid=61001 gid=61001 groups=61001");
        struct stat st;
        assert_int_equal(stat(j.checkpoints, &st), 0);
        assert_int_equal(st.st_uid, TEAM_UID);
        char *json = exec_handle_json(j.h);
        assert_non_null(strstr(json, "\"sandbox\":{\"gid\":61001"));
        assert_non_null(strstr(json, "\"on\":true"));
        assert_non_null(strstr(json, "\"uid\":61001"));
        free(json);
    }
    free(log);
    free(script);
    job_free(&j);
    job_free(&other);
}

/* ---- writing ---- */

static void test_writes_confined(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    job j;
    job_init(f, &j, "writer");
    char *script = xasprintf(
        "echo HACKED > %s/attempt-1/output.log; echo HACKED > %s/attempt-1/exit.json; "
        "echo HACKED > %s/current.json; echo HACKED > %s/hacked; echo HACKED > %s/hacked; "
        "echo HACKED > %s/hacked; echo HACKED > /etc/hacked; echo HACKED > /usr/hacked; "
        "echo HACKED > /hacked; rm -f %s/spec.yaml; "
        "echo ok > %s/ck.txt && echo ok > work.txt && echo ok > /tmp/t && echo wrote-allowed",
        j.dir, j.dir, j.dir, j.dir, f->data, f->root, j.dir, j.checkpoints);
    const char *argv[] = {"/bin/sh", "-c", script};
    job_run(f, &j, argv, 3);
    char *log = et_read_log(j.h);
    assert_present(log, "wrote-allowed");
    assert_absent(log, "HACKED");
    const char *never[] = {"hacked", "../data/hacked", "../datasets/hacked"};
    for (size_t i = 0; i < 3; i++) {
        char *p = path_join(j.dir, never[i]);
        if (access(p, F_OK) == 0) fail_msg("the trainer wrote %s", p);
        free(p);
    }
    assert_int_not_equal(access("/etc/hacked", F_OK), 0);
    assert_int_not_equal(access("/hacked", F_OK), 0);
    char *spec = path_join(j.dir, "spec.yaml");
    assert_int_equal(access(spec, F_OK), 0);
    free(spec);
    char *ck = path_join(j.checkpoints, "ck.txt"), *wk = path_join(j.work, "work.txt");
    assert_int_equal(access(ck, F_OK), 0);
    assert_int_equal(access(wk, F_OK), 0);
    free(ck);
    free(wk);
    free(log);
    free(script);
    job_free(&j);
}

/* A link the trainer (or an earlier attempt) left in its folders leads
 * nowhere: the other team's folder is not in its root; the supervisor's
 * chown of the folders never follows it. */
static void test_links_into_other_team(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    job j;
    job_init(f, &j, "linker");
    assert_int_equal(mkdir(j.checkpoints, 0755), 0);
    char *target = path_join(f->other, "secret.txt"), *ln = path_join(j.checkpoints, "planted");
    assert_int_equal(symlink(target, ln), 0);
    char *script = xasprintf("cat %s/planted; ln -s %s mine && cat mine; ln -s %s dir && ls dir; "
                             "cat dir/secret.txt; echo done-linking",
                             j.checkpoints, target, f->other);
    const char *argv[] = {"/bin/sh", "-c", script};
    job_run(f, &j, argv, 3);
    char *log = et_read_log(j.h);
    assert_present(log, "done-linking");
    assert_absent(log, "TEAM-B-SECRET");
    struct stat st;
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_uid, geteuid()); /* not given to the trainer's user */
    free(log);
    free(script);
    free(target);
    free(ln);
    job_free(&j);
}

/* What the trainer reports and writes for the server to read: a path
 * outside its folders is ignored (with a warning in shim.log); a link or a
 * FIFO as trainer_state.json is never read through (the poll would hang
 * on a FIFO). */
static void test_reported_paths_and_files(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    job j;
    job_init(f, &j, "reporter");
    char *script = xasprintf(
        "mkdir -p %s/checkpoint-2 %s/checkpoint-4 && echo '{}' > %s/checkpoint-2/trainer_state.json && "
        "ln -s %s/admin-token %s/checkpoint-4/trainer_state.json && mkfifo %s/checkpoint-6 2>/dev/null; "
        "mkdir -p %s/checkpoint-8 && mkfifo %s/checkpoint-8/trainer_state.json; "
        "echo '[lathe-train] checkpoint step=1 path=%s'; "
        "echo '[lathe-train] checkpoint step=2 path=%s/checkpoint-2'; "
        "echo '[lathe-train] checkpoint step=3 path=%s/../team-b'; "
        "echo '[lathe-train] done step=9 loss=1.0 adapter=%s'",
        j.checkpoints, j.checkpoints, j.checkpoints, f->data, j.checkpoints, j.checkpoints,
        j.checkpoints, j.checkpoints, f->other, j.checkpoints, j.dir, f->other);
    const char *argv[] = {"/bin/sh", "-c", script};
    job_run(f, &j, argv, 3);
    assert_int_equal(j.st.end, EXEC_END_SUCCEEDED);
    char *want = xasprintf("%s/checkpoint-2", j.checkpoints);
    bool seen = false;
    for (size_t i = 0; i < j.n_ckpts; i++) {
        if (strstr(j.ckpts[i], "team-b")) fail_msg("a checkpoint outside the job: %s", j.ckpts[i]);
        if (!strcmp(j.ckpts[i], want)) seen = true;
    }
    assert_true(seen);
    assert_null(j.adapter);
    char *shim_log = path_join(j.dir, "attempt-1/shim.log");
    char err[256];
    size_t len;
    char *text = file_read_all(shim_log, 1 << 20, &len, err, sizeof err);
    assert_non_null(text);
    assert_present(text, "is outside the job's folder");
    free(text);
    free(shim_log);
    free(want);
    free(script);
    job_free(&j);
}

/* The checkpoint folder itself a link (left by an earlier attempt that ran
 * without the sandbox) into another team's folder: refused, never bound
 * read-write nor given to the trainer's user. */
static void test_checkpoints_link_refused(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    job j;
    job_init(f, &j, "ckpt-link");
    assert_int_equal(symlink(f->other, j.checkpoints), 0);
    const char *argv[] = {"/bin/sh", "-c", "echo HACKED > $CHECKPOINT_DIR/x"};
    char err[1024];
    exec_rc rc = job_start(f, &j, argv, 3, err);
    if (rc == EXEC_OK) {
        job_wait(&j);
        fail_msg("a start with checkpoints a link went ahead");
    }
    assert_int_equal(rc, EXEC_E_SYSTEM);
    assert_non_null(strstr(err, j.checkpoints));
    char *x = path_join(f->other, "x");
    assert_int_not_equal(access(x, F_OK), 0);
    struct stat st;
    assert_int_equal(stat(f->other, &st), 0);
    assert_int_equal(st.st_uid, geteuid());
    free(x);
    job_free(&j);
}

/* ---- the environment ---- */

static void test_no_token_in_environment(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    setenv("LATHE_TOKEN", "tok-LATHE-c0ffee", 1);
    setenv("OPENAI_API_KEY", "tok-OPENAI-c0ffee", 1);
    setenv("HF_TOKEN", "tok-HF-c0ffee", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "tok-AWS-c0ffee", 1);
    setenv("SOME_SERVER_SETTING", "server-only-c0ffee", 1);
    setenv("OMP_NUM_THREADS", "3", 1);
    job j;
    job_init(f, &j, "env");
    const char *argv[] = {"/usr/bin/env"};
    job_run(f, &j, argv, 1);
    char *log = et_read_log(j.h);
    assert_absent(log, "c0ffee");
    assert_present(log, "OMP_NUM_THREADS=3");
    assert_present(log, "PATH=");
    char *tmp = xasprintf("TMPDIR=%s\n", j.work);
    assert_present(log, tmp);
    free(tmp);
    free(log);
    job_free(&j);
    /* Without the sandbox the server's environment passes, but no secret. */
    job plain;
    job_init(f, &plain, "env-plain");
    exec_request req;
    memset(&req, 0, sizeof req);
    req.argv = (char *const *)argv;
    req.argc = 1;
    req.job_dir = plain.dir;
    req.attempt = 1;
    req.contract.checkpoint_interval = -1;
    char err[512];
    assert_int_equal(exec_start(f->be, &req, &plain.h, err, sizeof err), EXEC_OK);
    job_wait(&plain);
    log = et_read_log(plain.h);
    assert_present(log, "SOME_SERVER_SETTING=server-only-c0ffee");
    assert_absent(log, "tok-");
    free(log);
    job_free(&plain);
    /* nor, without the sandbox, a descriptor beyond 0-2 and the lock (the
     * supervisor's socket to the server would let it answer in its place) */
    job_init(f, &plain, "fds-plain");
    const char *ls[] = {"/bin/ls", "/proc/self/fd"};
    req.argv = (char *const *)ls;
    req.argc = 2;
    req.job_dir = plain.dir;
    assert_int_equal(exec_start(f->be, &req, &plain.h, err, sizeof err), EXEC_OK);
    job_wait(&plain);
    log = et_read_log(plain.h);
    int lines = 0;
    for (const char *p = log; *p; p++) lines += *p == '\n';
    if (lines > 5) fail_msg("the trainer has more descriptors than it should:\n%s", log);
    free(log);
    job_free(&plain);
    unsetenv("LATHE_TOKEN");
    unsetenv("OPENAI_API_KEY");
    unsetenv("HF_TOKEN");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("SOME_SERVER_SETTING");
}

/* ---- resources ---- */

static int processes_of(long long uid)
{
    int n = 0;
    DIR *d = opendir("/proc");
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char *p = xasprintf("/proc/%s", e->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && (long long)st.st_uid == uid) n++;
        free(p);
    }
    if (d) closedir(d);
    return n;
}

static void test_fork_bomb(void **state)
{
    NEED_SANDBOX();
    if (geteuid() != 0) {
        /* RLIMIT_NPROC would count this user's own processes too */
        print_message("skipped: the fork bomb runs as uid %d only when the test is root\n",
                      BOMB_UID);
        skip();
        return;
    }
    fx *f = *state;
    job j;
    job_init(f, &j, "bomb");
    j.box.processes = 64;
    j.box.uid = j.box.gid = BOMB_UID;
    const char *argv[] = {"/bin/sh", "-c",
                          "i=0; while [ $i -lt 2000 ]; do sleep 30 & i=$((i+1)); done; wait"};
    double t0 = et_now();
    job_run(f, &j, argv, 3);
    assert_true(et_now() - t0 < 30); /* stopped by the limit, not by the sleeps ending */
    assert_int_not_equal(j.st.end, EXEC_END_SUCCEEDED);
    char *log = et_read_log(j.h);
    if (!strstr(log, "fork")) fail_msg("the bomb was not stopped by the limit:\n%.2000s", log);
    free(log);
    /* nothing of it is left, and this machine still forks */
    double until = et_now() + 10;
    while (processes_of(BOMB_UID) > 0 && et_now() < until) et_nap(0.05);
    assert_int_equal(processes_of(BOMB_UID), 0);
    pid_t p = fork();
    if (p == 0) _exit(0);
    assert_true(p > 0);
    waitpid(p, NULL, 0);
    job_free(&j);
}

static void test_memory_hog(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    job j;
    job_init(f, &j, "hog");
    j.box.memory = 64.0 * 1024 * 1024;
    const char *argv[] = {self_exe, "hog"};
    job_run(f, &j, argv, 2);
    char *log = et_read_log(j.h);
    print_message("the hog: %s (%s)\n", exec_end_name(j.st.end), j.st.reason);
    if (j.st.end != EXEC_END_OOM && j.st.end != EXEC_END_FAILED)
        fail_msg("the hog ended %s (%s):\n%s", exec_end_name(j.st.end), j.st.reason, log);
    assert_absent(log, "hog-finished");
    free(log);
    job_free(&j);
}

/* ---- signals ---- */

static void test_sigterm_reaches_trainer(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    const char *scripts[] = {
        "trap 'echo checkpoint saved; exit 143' TERM; echo ready; while :; do sleep 0.02; done",
        "echo ready; exec sleep 60"};
    for (size_t i = 0; i < 2; i++) {
        job j;
        char name[32];
        snprintf(name, sizeof name, "term-%zu", i);
        job_init(f, &j, name);
        const char *argv[] = {"/bin/sh", "-c", scripts[i]};
        char err[1024];
        assert_int_equal(job_start(f, &j, argv, 3, err), EXEC_OK);
        double until = et_now() + WAIT_LIMIT;
        for (;;) {
            char *log = et_read_log(j.h);
            bool ready = strstr(log, "ready") != NULL;
            free(log);
            if (ready) break;
            if (et_now() > until) fail_msg("no ready line");
            et_nap(0.01);
        }
        et_nap(0.1);
        assert_int_equal(exec_cancel(j.h, et_now(), 20, err, sizeof err), EXEC_OK);
        job_wait(&j);
        assert_int_equal(j.st.end, EXEC_END_STOPPED);
        assert_false(j.st.kill_sent);
        if (i == 0) {
            assert_int_equal(j.st.exit_code, 143);
            char *log = et_read_log(j.h);
            assert_present(log, "checkpoint saved");
            free(log);
        } else {
            assert_int_equal(j.st.signal, SIGTERM);
        }
        job_free(&j);
    }
}

/* ---- the re-check ---- */

static void test_swapped_path_refused(void **state)
{
    NEED_SANDBOX();
    fx *f = *state;
    char *link = path_join(f->root, "current.jsonl"), *good = path_join(f->root, "train.jsonl");
    char *bad = path_join(f->data, "lathe.db");
    assert_int_equal(symlink(good, link), 0);
    job j;
    job_init(f, &j, "swap-ok");
    j.checks[0] = (exec_path_check){"trainingData.datasetPath", link, j.roots, 1};
    j.box.n_checks = 1;
    char *script = xasprintf("cat %s", link);
    const char *argv[] = {"/bin/sh", "-c", script};
    job_run(f, &j, argv, 3);
    char *log = et_read_log(j.h);
    assert_present(log, "DATASET-LINE");
    free(log);
    job_free(&j);
    /* the link now leads to the server's database */
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink(bad, link), 0);
    job_init(f, &j, "swap-bad");
    j.checks[0] = (exec_path_check){"trainingData.datasetPath", link, j.roots, 1};
    j.box.n_checks = 1;
    char err[1024];
    assert_int_equal(job_start(f, &j, argv, 3, err), EXEC_E_INVALID);
    assert_non_null(strstr(err, "trainingData.datasetPath"));
    assert_non_null(strstr(err, "now resolves to"));
    assert_non_null(strstr(err, bad));
    assert_non_null(strstr(err, "changed after submission"));
    job_free(&j);
    /* a root that holds the data folder does not make it readable */
    job_init(f, &j, "swap-wide-root");
    j.roots[0] = f->dir;
    j.checks[0] = (exec_path_check){"trainingData.datasetPath", link, j.roots, 1};
    j.box.n_checks = 1;
    assert_int_equal(job_start(f, &j, argv, 3, err), EXEC_E_INVALID);
    assert_non_null(strstr(err, "inside the server's data folder"));
    job_free(&j);
    free(script);
    free(link);
    free(good);
    free(bad);
}

/* Where the machine cannot make a sandbox (tests/security/fallback.sh runs
 * this program without capabilities): an optional one is skipped, said in
 * shim.log and the handle, and the trainer still runs in its work folder;
 * a required one refuses the start with the reason. */
static void test_auto_fallback(void **state)
{
    char why[256];
    if (exec_sandbox_probe(why, sizeof why)) {
        print_message("skipped: this machine makes a sandbox; the fallback is tested where it "
                      "cannot (tests/security/fallback.sh)\n");
        skip();
        return;
    }
    fx *f = *state;
    job j;
    job_init(f, &j, "fallback");
    j.box.required = false;
    j.box.uid = j.box.gid = -1;
    const char *argv[] = {"/bin/sh", "-c", "echo cwd=$(pwd)"};
    job_run(f, &j, argv, 3);
    assert_int_equal(j.st.end, EXEC_END_SUCCEEDED);
    char *log = et_read_log(j.h);
    char *cwd = xasprintf("cwd=%s", j.work);
    assert_present(log, cwd);
    free(cwd);
    free(log);
    char *json = exec_handle_json(j.h);
    assert_non_null(strstr(json, "\"on\":false"));
    assert_non_null(strstr(json, "not sandboxed: this machine cannot make a sandbox"));
    free(json);
    job_free(&j);
    job_init(f, &j, "fallback-required");
    j.box.uid = j.box.gid = -1;
    char err[1024];
    assert_int_equal(job_start(f, &j, argv, 3, err), EXEC_E_SYSTEM);
    assert_non_null(strstr(err, "must run in the sandbox"));
    job_free(&j);
}

/* Allocates and touches memory until 1 GiB, then says so. */
static int hog(void)
{
    size_t chunk = 1 << 20;
    char **blocks = calloc(1024, sizeof *blocks);
    if (!blocks) return 3;
    for (size_t i = 0; i < 1024; i++) {
        blocks[i] = malloc(chunk);
        if (!blocks[i]) {
            fprintf(stderr, "hog: allocation %zu failed\n", i);
            return 3;
        }
        memset(blocks[i], 1, chunk);
    }
    printf("hog-finished\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-shim") == 0) return exec_shim_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "hog") == 0) return hog();
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) return 1;
    self_exe[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_confined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writes_confined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_links_into_other_team, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reported_paths_and_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoints_link_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_token_in_environment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_bomb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_hog, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_reaches_trainer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_swapped_path_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auto_fallback, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
