/* test_exec_local.c: the local executor with real processes. Fake trainers
 * are /bin/sh, /bin/echo, /usr/bin/env and the scripts in data/. This test
 * program is also the supervisor: /proc/self/exe exec-shim, as `lathe` is
 * in production (main below hands "exec-shim" to exec_shim_main).
 *
 * Covered: exit codes and their classes, a signal death, the contract's
 * environment and the working folder, no shell anywhere ("$(touch X)" stays
 * literal), a command that cannot run, SIGTERM with a trap, the grace
 * period then SIGKILL, the output log and its rotation followed by the
 * reader without a line lost, progress from `[lathe-train]` lines, Hugging
 * Face and ms-swift files, out of memory, re-attach from a second backend
 * after the first is gone, trainers that outlive a SIGKILLed server, one
 * attempt at a time per job (the lock), a killed supervisor (lost), and a
 * recycled pid that is never taken for ours. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/exec.h"
#include "exec_test.h"

#include <errno.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_LIMIT 30.0 /* seconds any single wait may take before the test fails */

typedef struct fx {
    char *dir;
    exec_backend *be;
} fx;


static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    f->dir = xstrdup("/tmp/lathe-exec-test-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    f->be = exec_local_new(NULL);
    *state = f;
    return 0;
}

/* A test that failed half-way may leave trainers running: kill every
 * attempt a job folder still names, so nothing outlives the test. */
static void kill_leftovers(fx *f)
{
    char *pattern = path_join(f->dir, "*/current.json");
    glob_t g;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char *jd = xstrndup(g.gl_pathv[i], strlen(g.gl_pathv[i]) - strlen("/current.json"));
            exec_handle *h;
            char err[512];
            if (exec_find(f->be, jd, &h, err, sizeof err) == EXEC_OK) {
                exec_signal(h, SIGKILL, err, sizeof err);
                exec_release(h);
            }
            free(jd);
        }
        globfree(&g);
    }
    free(pattern);
}

static int teardown(void **state)
{
    fx *f = *state;
    kill_leftovers(f);
    et_check_shim_logs(f->dir, NULL);
    exec_backend_free(f->be);
    char err[512];
    if (file_remove_tree(f->dir, err, sizeof err) != 0) return -1;
    free(f->dir);
    free(f);
    return 0;
}

/* ---- helpers ---- */

typedef struct run {
    exec_handle *h;
    exec_status st;
    exec_progress pts[256];
    size_t n_pts;
    int64_t ckpt_steps[16];
    char *ckpt_paths[16];
    size_t n_ckpts;
    bool done;
    char *adapter;
} run;

static char *job_dir(fx *f, const char *name)
{
    return path_join(f->dir, name);
}

static exec_rc start(fx *f, const char *job, int attempt, const char *const *argv, size_t argc,
                     const exec_contract *c, exec_handle **h, char *err)
{
    char *jd = job_dir(f, job);
    exec_request req;
    memset(&req, 0, sizeof req);
    req.argv = (char *const *)argv;
    req.argc = argc;
    req.job_dir = jd;
    req.attempt = attempt;
    if (c) req.contract = *c;
    else req.contract.checkpoint_interval = -1;
    req.no_retry_codes = EXEC_BUILTIN_NO_RETRY;
    req.n_no_retry_codes = 1;
    exec_rc rc = exec_start(f->be, &req, h, err, 512);
    free(jd);
    return rc;
}

static void collect(run *r, const exec_update *up)
{
    for (size_t i = 0; i < up->n_points && r->n_pts < 256; i++) r->pts[r->n_pts++] = up->points[i];
    for (size_t i = 0; i < up->n_checkpoints && r->n_ckpts < 16; i++) {
        r->ckpt_steps[r->n_ckpts] = up->checkpoints[i].step;
        r->ckpt_paths[r->n_ckpts++] = xstrdup(up->checkpoints[i].path);
    }
    if (up->done) r->done = true;
    if (up->adapter && !r->adapter) r->adapter = xstrdup(up->adapter);
}

/* Polls until the attempt is no longer running. */
static void wait_end(run *r)
{
    double until = et_now() + WAIT_LIMIT;
    for (;;) {
        exec_update up;
        exec_poll(r->h, et_now(), &r->st, &up);
        collect(r, &up);
        if (r->st.phase != EXEC_RUNNING) return;
        if (et_now() > until) fail_msg("the trainer did not end within %.0f s", WAIT_LIMIT);
        et_nap(0.01);
    }
}

static void run_free(run *r)
{
    exec_release(r->h);
    for (size_t i = 0; i < r->n_ckpts; i++) free(r->ckpt_paths[i]);
    free(r->adapter);
    memset(r, 0, sizeof *r);
}

/* Starts argv as attempt 1 of job and waits for its end. */
static void run_to_end(fx *f, const char *job, const char *const *argv, size_t argc,
                       const exec_contract *c, run *r)
{
    memset(r, 0, sizeof *r);
    char err[512];
    exec_rc rc = start(f, job, 1, argv, argc, c, &r->h, err);
    if (rc != EXEC_OK) fail_msg("start %s: %s: %s", argv[0], exec_rc_name(rc), err);
    wait_end(r);
}

static bool file_at(fx *f, const char *name)
{
    char *p = path_join(f->dir, name);
    bool there = access(p, F_OK) == 0;
    free(p);
    return there;
}

/* ---- exits ---- */

static void test_exit_codes(void **state)
{
    fx *f = *state;
    struct {
        const char *script;
        exec_end end;
        bool retryable;
        int code, sig;
    } cases[] = {
        {"exit 0", EXEC_END_SUCCEEDED, false, 0, 0},
        {"exit 3", EXEC_END_FAILED, true, 3, 0},
        {"echo 'lathe train: no such model' >&2; exit 2", EXEC_END_INVALID, false, 2, 0},
        {"kill -SEGV $$", EXEC_END_SIGNALLED, true, -1, SIGSEGV},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char job[16];
        snprintf(job, sizeof job, "exit-%zu", i);
        const char *argv[] = {"/bin/sh", "-c", cases[i].script};
        run r;
        run_to_end(f, job, argv, 3, NULL, &r);
        assert_int_equal(r.st.phase, EXEC_EXITED);
        if (r.st.end != cases[i].end) fail_msg("%s: %s", cases[i].script, r.st.reason);
        assert_int_equal(r.st.retryable, cases[i].retryable);
        assert_int_equal(r.st.exit_code, cases[i].code);
        assert_int_equal(r.st.signal, cases[i].sig);
        assert_true(r.st.ended_at >= r.st.started_at && r.st.started_at > 1.6e9);
        run_free(&r);
    }
}

static void test_environment_and_folder(void **state)
{
    fx *f = *state;
    setenv("LATHE_SERVER_SECRET", "hunter2", 1);
    setenv("CUDA_VISIBLE_DEVICES", "7", 1);
    const char *extra[] = {"HF_HOME=/cache/hf", "LORA_RANK=999"};
    exec_contract c = {.job = "team-a/env", .attempt = 1, .spec_path = "/w/spec.json",
                       .base_model_path = "/models/tiny", .dataset_path = "/data/d.jsonl",
                       .lora_rank = 8, .checkpoint_dir = "/w/ckpt", .checkpoint_interval = 50,
                       .gpus = "0,1", .nnodes = 1, .node_rank = 0, .nproc_per_node = 2,
                       .master_addr = "127.0.0.1", .master_port = 29500};
    char *jd = job_dir(f, "env");
    exec_request req;
    memset(&req, 0, sizeof req);
    const char *argv[] = {"/bin/sh", "-c", "pwd; /usr/bin/env"};
    req.argv = (char *const *)argv;
    req.argc = 3;
    req.env = extra;
    req.n_env = 2;
    req.contract = c;
    req.job_dir = jd;
    req.attempt = 1;
    run r;
    memset(&r, 0, sizeof r);
    char err[512];
    assert_int_equal(exec_start(f->be, &req, &r.h, err, sizeof err), EXEC_OK);
    wait_end(&r);
    unsetenv("LATHE_SERVER_SECRET");
    unsetenv("CUDA_VISIBLE_DEVICES");
    assert_int_equal(r.st.end, EXEC_END_SUCCEEDED);
    char *log = et_read_log(r.h);
    /* The working folder is the attempt's. */
    char *first = xstrndup(log, strcspn(log, "\n"));
    assert_string_equal(first, r.h->work_dir);
    assert_true(str_ends_with(r.h->work_dir, "/env/attempt-1"));
    const char *want[] = {"\nLATHE_JOB=team-a/env\n", "\nLATHE_ATTEMPT=1\n",
                          "\nLATHE_SPEC=/w/spec.json\n", "\nBASE_MODEL_PATH=/models/tiny\n",
                          "\nDATASET_PATH=/data/d.jsonl\n", "\nLORA_RANK=8\n",
                          "\nCHECKPOINT_DIR=/w/ckpt\n", "\nCHECKPOINT_INTERVAL=50\n",
                          "\nCUDA_VISIBLE_DEVICES=0,1\n", "\nLATHE_GPUS=0,1\n", "\nNNODES=1\n",
                          "\nNODE_RANK=0\n", "\nNPROC_PER_NODE=2\n", "\nMASTER_ADDR=127.0.0.1\n",
                          "\nMASTER_PORT=29500\n", "\nHF_HOME=/cache/hf\n", "\nPATH="};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(log, want[i])) fail_msg("missing %s in:\n%s", want[i] + 1, log);
    /* The server's own settings never reach a trainer; the contract wins. */
    assert_null(strstr(log, "hunter2"));
    assert_null(strstr(log, "LORA_RANK=999"));
    assert_null(strstr(log, "CUDA_VISIBLE_DEVICES=7"));
    free(first);
    free(log);
    free(jd);
    run_free(&r);
}

/* No shell: arguments reach the program as they are. */
static void test_no_shell(void **state)
{
    fx *f = *state;
    char *marker = path_join(f->dir, "pwned");
    char *arg1 = xasprintf("$(touch %s)", marker);
    char *arg2 = xasprintf("`touch %s`; touch %s", marker, marker);
    const char *argv[] = {"/bin/echo", arg1, arg2, "|", "rm", "-rf", "/", "&&", "*"};
    run r;
    run_to_end(f, "noshell", argv, 9, NULL, &r);
    assert_int_equal(r.st.end, EXEC_END_SUCCEEDED);
    char *log = et_read_log(r.h);
    char *want = xasprintf("%s %s | rm -rf / && *\n", arg1, arg2);
    assert_string_equal(log, want);
    assert_false(file_at(f, "pwned"));
    free(want);
    free(log);
    free(arg1);
    free(arg2);
    free(marker);
    run_free(&r);
}

static void test_cannot_run(void **state)
{
    fx *f = *state;
    exec_handle *h = NULL;
    char err[512];
    const char *missing[] = {"no-such-trainer-xyz", "--flag"};
    assert_int_equal(start(f, "missing", 1, missing, 2, NULL, &h, err), EXEC_E_INVALID);
    assert_null(h);
    assert_non_null(strstr(err, "no-such-trainer-xyz"));
    const char *notexec[] = {LATHE_TEST_DATA "/logging.jsonl"};
    assert_int_equal(start(f, "notexec", 1, notexec, 1, NULL, &h, err), EXEC_E_INVALID);
    assert_non_null(strstr(err, "logging.jsonl"));
    assert_int_equal(start(f, "empty", 1, missing, 0, NULL, &h, err), EXEC_E_INVALID);
    /* Found through PATH, never through a shell. */
    const char *by_name[] = {"true"};
    run r;
    run_to_end(f, "byname", by_name, 1, NULL, &r);
    assert_int_equal(r.st.end, EXEC_END_SUCCEEDED);
    run_free(&r);
}

/* ---- signals ---- */

/* Waits until the attempt's output log holds `text`: a script says "ready"
 * once its traps are set, and a signal sent before that would meet the
 * shell's default action instead (seen on a loaded CI machine). */
static void wait_log_text(const exec_handle *h, const char *text, const char *why)
{
    double until = et_now() + WAIT_LIMIT;
    for (;;) {
        char *log = et_read_log(h);
        bool seen = strstr(log, text) != NULL;
        free(log);
        if (seen) return;
        if (et_now() > until) fail_msg("%s", why);
        et_nap(0.01);
    }
}

static void test_cancel_stops_with_trap(void **state)
{
    fx *f = *state;
    const char *argv[] = {"/bin/sh", "-c",
                          "trap 'echo checkpoint saved; exit 143' TERM; echo ready; while :; do sleep 0.02; done"};
    run r;
    memset(&r, 0, sizeof r);
    char err[512];
    assert_int_equal(start(f, "cancel", 1, argv, 3, NULL, &r.h, err), EXEC_OK);
    wait_log_text(r.h, "ready", "no ready line");
    exec_update up;
    exec_poll(r.h, et_now(), &r.st, &up);
    assert_int_equal(r.st.phase, EXEC_RUNNING);
    assert_int_equal(exec_cancel(r.h, et_now(), 20, err, sizeof err), EXEC_OK);
    wait_end(&r);
    assert_int_equal(r.st.end, EXEC_END_STOPPED);
    assert_true(r.st.term_sent);
    assert_false(r.st.kill_sent);
    char *log = et_read_log(r.h);
    assert_non_null(strstr(log, "checkpoint saved"));
    free(log);
    /* An ended attempt takes no more signals. */
    assert_int_equal(exec_signal(r.h, SIGTERM, err, sizeof err), EXEC_E_GONE);
    assert_int_equal(exec_signal(r.h, SIGSEGV, err, sizeof err), EXEC_E_INVALID);
    run_free(&r);
}

/* A trainer that ignores SIGTERM gets SIGKILL at the first poll after the
 * grace period; the library itself never sleeps. */
static void test_grace_then_kill(void **state)
{
    fx *f = *state;
    const char *argv[] = {"/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.02; done"};
    run r;
    memset(&r, 0, sizeof r);
    char err[512];
    assert_int_equal(start(f, "grace", 1, argv, 3, NULL, &r.h, err), EXEC_OK);
    wait_log_text(r.h, "ready", "no ready line");
    double t0 = et_now();
    assert_int_equal(exec_cancel(r.h, t0, 0.3, err, sizeof err), EXEC_OK);
    assert_int_equal(exec_cancel(r.h, t0 + 100, 0.3, err, sizeof err), EXEC_OK); /* kept */
    /* Before the deadline nothing more happens, whatever the wall clock. */
    exec_update up;
    et_nap(0.1);
    exec_poll(r.h, t0 + 0.1, &r.st, &up);
    assert_int_equal(r.st.phase, EXEC_RUNNING);
    assert_true(r.st.term_sent);
    assert_false(r.st.kill_sent);
    /* The handle remembers the deadline across a re-attach. */
    char *json = exec_handle_json(r.h);
    assert_non_null(strstr(json, "kill_at"));
    free(json);
    et_nap(0.3);
    exec_poll(r.h, t0 + 0.31, &r.st, &up);
    assert_true(r.st.kill_sent);
    wait_end(&r);
    assert_int_equal(r.st.end, EXEC_END_KILLED);
    assert_int_equal(r.st.signal, SIGKILL);
    assert_true(r.st.retryable);
    run_free(&r);
}

static void test_signal_kill_and_forward(void **state)
{
    fx *f = *state;
    const char *argv[] = {"/bin/sh", "-c",
                          "trap 'echo got-usr2' USR2; echo ready; while :; do sleep 0.02; done"};
    run r;
    memset(&r, 0, sizeof r);
    char err[512];
    assert_int_equal(start(f, "sig", 1, argv, 3, NULL, &r.h, err), EXEC_OK);
    /* Wait until the trap is set (the script said so), then USR2. */
    wait_log_text(r.h, "ready", "no ready line");
    assert_int_equal(exec_signal(r.h, SIGUSR2, err, sizeof err), EXEC_OK);
    wait_log_text(r.h, "got-usr2", "SIGUSR2 not forwarded");
    assert_int_equal(exec_signal(r.h, SIGKILL, err, sizeof err), EXEC_OK);
    wait_end(&r);
    assert_int_equal(r.st.end, EXEC_END_KILLED);
    run_free(&r);
}

/* ---- logs ---- */

/* The log rotates by size (keep 3); the reader, polled between two phases
 * of output, reports every line once and in order across the rotations. */
static void test_log_rotation_followed(void **state)
{
    fx *f = *state;
    exec_backend_free(f->be);
    exec_local_config cfg = {.log_max_bytes = 1000, .log_keep = 3};
    f->be = exec_local_new(&cfg);
    const char *argv[] = {"/bin/sh", LATHE_TEST_DATA "/phased.sh", "25"};
    run r;
    memset(&r, 0, sizeof r);
    char err[512];
    assert_int_equal(start(f, "rotate", 1, argv, 3, NULL, &r.h, err), EXEC_OK);
    double until = et_now() + WAIT_LIMIT;
    while (r.n_pts < 25) {
        exec_update up;
        exec_poll(r.h, et_now(), &r.st, &up);
        collect(&r, &up);
        if (et_now() > until) fail_msg("only %zu lines read", r.n_pts);
        et_nap(0.01);
    }
    char *go = path_join(r.h->work_dir, "go");
    assert_int_equal(file_write_atomic(go, "", 0), 0);
    free(go);
    wait_end(&r);
    assert_int_equal(r.st.end, EXEC_END_SUCCEEDED);
    assert_int_equal(r.n_pts, 50);
    for (size_t i = 0; i < r.n_pts; i++) {
        assert_int_equal(r.pts[i].step, (int64_t)i + 1);
        assert_int_equal(r.pts[i].total_steps, 50);
    }
    /* Files: output.log and .1 .. .3, none beyond; each within the limit. */
    for (int i = 0; i <= 4; i++) {
        char *p = i ? xasprintf("%s.%d", r.h->log_path, i) : xstrdup(r.h->log_path);
        struct stat st;
        bool there = stat(p, &st) == 0;
        assert_int_equal(there, i <= 3);
        if (there) assert_true(st.st_size <= 1000);
        free(p);
    }
    run_free(&r);
}

/* ---- progress ---- */

static void test_progress_builtin_lines(void **state)
{
    fx *f = *state;
    char *ck = path_join(f->dir, "ckpt-builtin");
    exec_contract c = {.checkpoint_dir = ck, .checkpoint_interval = 3};
    const char *argv[] = {"/bin/sh", LATHE_TEST_DATA "/builtin_like.sh"};
    run r;
    run_to_end(f, "builtin", argv, 2, &c, &r);
    assert_int_equal(r.st.end, EXEC_END_SUCCEEDED);
    assert_int_equal(r.n_pts, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(r.pts[i].step, i + 1);
        assert_int_equal(r.pts[i].total_steps, 6);
        assert_true(r.pts[i].at > 0);
    }
    assert_true(fabs(r.pts[5].loss - 1.6) < 1e-12);
    assert_true(fabs(r.pts[0].learning_rate - 1e-4) < 1e-16);
    assert_true(r.pts[5].tokens_per_second == 120.0);
    /* The checkpoint, once, although both the line and the folder say so. */
    assert_int_equal(r.n_ckpts, 1);
    assert_int_equal(r.ckpt_steps[0], 3);
    assert_true(str_ends_with(r.ckpt_paths[0], "/checkpoint-3"));
    assert_true(r.done);
    assert_true(str_ends_with(r.adapter, "/final"));
    free(ck);
    run_free(&r);
}

static void test_progress_hf_and_swift(void **state)
{
    fx *f = *state;
    const char *modes[] = {"hf", "swift"};
    for (int m = 0; m < 2; m++) {
        char name[32];
        snprintf(name, sizeof name, "ckpt-%s", modes[m]);
        char *ck = path_join(f->dir, name);
        exec_contract c = {.checkpoint_dir = ck, .checkpoint_interval = -1};
        const char *argv[] = {"/bin/sh", LATHE_TEST_DATA "/hf_like.sh", LATHE_TEST_DATA, modes[m]};
        run r;
        memset(&r, 0, sizeof r);
        char err[512];
        assert_int_equal(start(f, modes[m], 1, argv, 4, &c, &r.h, err), EXEC_OK);
        wait_end(&r);
        assert_int_equal(r.st.end, EXEC_END_SUCCEEDED);
        if (m == 0) {
            assert_int_equal(r.n_pts, 4);
            assert_int_equal(r.pts[3].step, 40);
            assert_int_equal(r.pts[3].total_steps, 100);
            assert_int_equal(r.n_ckpts, 1);
            assert_int_equal(r.ckpt_steps[0], 40);
        } else {
            assert_int_equal(r.n_pts, 4);
            assert_int_equal(r.pts[0].step, 1);
            assert_int_equal(r.pts[3].step, 15);
            assert_int_equal(r.pts[2].total_steps, 156);
            assert_int_equal(r.n_ckpts, 0);
        }
        free(ck);
        run_free(&r);
    }
}

static void test_oom_detected(void **state)
{
    fx *f = *state;
    const char *argv[] = {"/bin/sh", "-c",
                          "echo '[lathe-train] step=1/10 loss=2.0'; "
                          "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                          "2.00 GiB. GPU 0 has a total capacity of 79.15 GiB' >&2; exit 1"};
    run r;
    run_to_end(f, "oom", argv, 3, NULL, &r);
    assert_int_equal(r.st.end, EXEC_END_OOM);
    assert_true(r.st.retryable);
    assert_int_equal(r.st.exit_code, 1);
    assert_non_null(strstr(r.st.reason, "CUDA out of memory"));
    assert_non_null(strstr(r.st.reason, "line 2"));
    run_free(&r);
}

/* ---- restarts ---- */

static void test_reattach_from_another_backend(void **state)
{
    fx *f = *state;
    const char *argv[] = {"/bin/sh", "-c",
                          "echo '[lathe-train] step=1/2 loss=2.0'; while :; do sleep 0.02; done"};
    exec_handle *h;
    char err[512];
    assert_int_equal(start(f, "reattach", 1, argv, 3, NULL, &h, err), EXEC_OK);
    char *json = exec_handle_json(h);
    exec_release(h);
    exec_backend_free(f->be); /* the first "server" is gone */
    f->be = exec_local_new(NULL);
    run r;
    memset(&r, 0, sizeof r);
    assert_int_equal(exec_attach(f->be, json, &r.h, err, sizeof err), EXEC_OK);
    exec_update up;
    exec_poll(r.h, et_now(), &r.st, &up);
    assert_int_equal(r.st.phase, EXEC_RUNNING);
    /* find() knows it too, from the job's folder. */
    char *jd = job_dir(f, "reattach");
    exec_handle *found;
    assert_int_equal(exec_find(f->be, jd, &found, err, sizeof err), EXEC_OK);
    char *json2 = exec_handle_json(found);
    assert_string_equal(json, json2);
    free(json2);
    exec_release(found);
    assert_int_equal(exec_attach(f->be, "{\"backend\":\"slurm\"}", &found, err, sizeof err),
                     EXEC_E_INVALID);
    assert_int_equal(exec_cancel(r.h, et_now(), 10, err, sizeof err), EXEC_OK);
    wait_end(&r);
    assert_int_equal(r.st.end, EXEC_END_STOPPED); /* sh dies of SIGTERM */
    free(jd);
    free(json);
    run_free(&r);
}

/* A "server" process starts a trainer and is killed with SIGKILL; the
 * trainer runs on, and a new backend learns how it ended. */
static void test_survives_server_sigkill(void **state)
{
    fx *f = *state;
    char *handle_file = path_join(f->dir, "handle.json");
    int sync_pipe[2];
    assert_int_equal(pipe(sync_pipe), 0);
    pid_t server = fork();
    assert_true(server >= 0);
    if (server == 0) {
        close(sync_pipe[0]);
        exec_backend *be = exec_local_new(NULL);
        const char *argv[] = {"/bin/sh", "-c",
                              "sleep 0.5; echo finished after the server died; exit 7"};
        char *jd = path_join(f->dir, "survivor");
        exec_request req;
        memset(&req, 0, sizeof req);
        req.argv = (char *const *)argv;
        req.argc = 3;
        req.job_dir = jd;
        req.attempt = 1;
        req.contract.checkpoint_interval = -1;
        exec_handle *h;
        char err[512];
        if (exec_start(be, &req, &h, err, sizeof err) != EXEC_OK) _exit(1);
        char *json = exec_handle_json(h);
        if (file_write_atomic(handle_file, json, strlen(json)) != 0) _exit(1);
        if (write(sync_pipe[1], "x", 1) != 1) _exit(1);
        for (;;) pause(); /* until killed */
    }
    close(sync_pipe[1]);
    char c;
    assert_int_equal(read(sync_pipe[0], &c, 1), 1);
    close(sync_pipe[0]);
    kill(server, SIGKILL);
    int status;
    assert_int_equal(waitpid(server, &status, 0), server);
    assert_true(WIFSIGNALED(status));
    char err[512];
    size_t len;
    char *json = file_read_all(handle_file, 1 << 20, &len, err, sizeof err);
    assert_non_null(json);
    run r;
    memset(&r, 0, sizeof r);
    assert_int_equal(exec_attach(f->be, json, &r.h, err, sizeof err), EXEC_OK);
    exec_update up;
    exec_poll(r.h, et_now(), &r.st, &up);
    assert_int_equal(r.st.phase, EXEC_RUNNING);
    wait_end(&r);
    assert_int_equal(r.st.phase, EXEC_EXITED);
    assert_int_equal(r.st.exit_code, 7);
    assert_int_equal(r.st.end, EXEC_END_FAILED);
    char *log = et_read_log(r.h);
    assert_non_null(strstr(log, "finished after the server died"));
    free(log);
    free(json);
    free(handle_file);
    run_free(&r);
}

/* One attempt of a job at a time, even from two backends. */
static void test_never_twice(void **state)
{
    fx *f = *state;
    const char *forever[] = {"/bin/sh", "-c", "while :; do sleep 0.02; done"};
    run r;
    memset(&r, 0, sizeof r);
    char err[512];
    assert_int_equal(start(f, "once", 1, forever, 3, NULL, &r.h, err), EXEC_OK);
    exec_backend *other = exec_local_new(NULL);
    char *jd = job_dir(f, "once");
    exec_request req;
    memset(&req, 0, sizeof req);
    req.argv = (char *const *)forever;
    req.argc = 3;
    req.job_dir = jd;
    req.attempt = 2;
    exec_handle *h2 = NULL;
    assert_int_equal(exec_start(other, &req, &h2, err, sizeof err), EXEC_E_BUSY);
    assert_null(h2);
    assert_non_null(strstr(err, "lock"));
    exec_backend_free(other);
    assert_int_equal(exec_signal(r.h, SIGKILL, err, sizeof err), EXEC_OK);
    wait_end(&r);
    /* Ended: the next attempt starts; the same attempt never again. */
    exec_handle *h3 = NULL;
    assert_int_equal(start(f, "once", 1, forever, 3, NULL, &h3, err), EXEC_E_INVALID);
    const char *quick[] = {"true"};
    run r2;
    memset(&r2, 0, sizeof r2);
    assert_int_equal(start(f, "once", 2, quick, 1, NULL, &r2.h, err), EXEC_OK);
    wait_end(&r2);
    assert_int_equal(r2.st.end, EXEC_END_SUCCEEDED);
    free(jd);
    run_free(&r);
    run_free(&r2);
}

/* The supervisor is killed: the trainer dies with it (PR_SET_PDEATHSIG),
 * the attempt is lost, and the job's lock is free again. */
static void test_supervisor_killed_is_lost(void **state)
{
    fx *f = *state;
    const char *argv[] = {"/bin/sh", "-c", "while :; do sleep 0.02; done"};
    run r;
    memset(&r, 0, sizeof r);
    char err[512];
    assert_int_equal(start(f, "lost", 1, argv, 3, NULL, &r.h, err), EXEC_OK);
    char *json = exec_handle_json(r.h);
    const char *p = strstr(json, "\"shim_pid\":");
    assert_non_null(p);
    int shim = atoi(p + strlen("\"shim_pid\":"));
    p = strstr(json, "\"trainer_pid\":");
    int trainer = atoi(p + strlen("\"trainer_pid\":"));
    assert_int_equal(kill(shim, SIGKILL), 0);
    wait_end(&r);
    if (r.st.phase != EXEC_LOST) fail_msg("%s (shim %d): %s", exec_end_name(r.st.end), shim, r.st.reason);
    assert_int_equal(r.st.end, EXEC_END_LOST);
    assert_true(r.st.retryable);
    double until = et_now() + WAIT_LIMIT;
    while (exec_proc_start_time(trainer) != 0) {
        char path[64], err2[64];
        snprintf(path, sizeof path, "/proc/%d/stat", trainer);
        size_t len;
        char *stat = file_read_all(path, 4096, &len, err2, sizeof err2);
        bool zombie = stat && strstr(stat, ") Z ");
        free(stat);
        if (zombie) break;
        if (et_now() > until) fail_msg("the trainer outlived its supervisor");
        et_nap(0.01);
    }
    /* What the trainer started (its sleep) held the lock; lost() killed
     * it, and the next attempt starts as soon as it is gone. */
    const char *quick[] = {"true"};
    run r2;
    memset(&r2, 0, sizeof r2);
    exec_rc rc;
    until = et_now() + WAIT_LIMIT;
    while ((rc = start(f, "lost", 2, quick, 1, NULL, &r2.h, err)) == EXEC_E_BUSY) {
        if (et_now() > until) fail_msg("the lock stayed held: %s", err);
        et_nap(0.01);
    }
    assert_int_equal(rc, EXEC_OK);
    wait_end(&r2);
    free(json);
    run_free(&r);
    run_free(&r2);
}

/* A handle whose pids are alive but belong to other processes (recycled
 * pids, here this test's own pid with another start time) is never taken
 * for the trainer: it is lost, gets no signal, and nothing is killed. */
static void test_recycled_pid(void **state)
{
    fx *f = *state;
    char *jd = job_dir(f, "recycled");
    char *wd = path_join(jd, "attempt-1");
    assert_int_equal(mkdir(jd, 0755), 0);
    assert_int_equal(mkdir(wd, 0755), 0);
    char boot[40];
    exec_boot_id(boot, sizeof boot);
    uint64_t mine = exec_proc_start_time(getpid());
    char *json = xasprintf("{\"backend\":\"local\",\"version\":1,\"job_dir\":\"%s\","
                           "\"work_dir\":\"%s\",\"log\":\"%s/output.log\",\"attempt\":1,"
                           "\"boot_id\":\"%s\",\"shim_pid\":%d,\"shim_start\":%llu,"
                           "\"trainer_pid\":%d,\"trainer_start\":%llu}",
                           jd, wd, wd, boot, (int)getpid(), (unsigned long long)mine + 1,
                           (int)getpid(), (unsigned long long)mine + 2);
    run r;
    memset(&r, 0, sizeof r);
    char err[512];
    assert_int_equal(exec_attach(f->be, json, &r.h, err, sizeof err), EXEC_OK);
    assert_int_equal(exec_signal(r.h, SIGTERM, err, sizeof err), EXEC_E_GONE);
    assert_int_equal(exec_cancel(r.h, et_now(), 1, err, sizeof err), EXEC_E_GONE);
    wait_end(&r); /* we are still alive to check: */
    assert_int_equal(r.st.phase, EXEC_LOST);
    free(json);
    free(wd);
    free(jd);
    run_free(&r);
}

/* The production path: the supervisor is the built `lathe exec-shim`
 * (skipped when the tool is not built, as in a build of this part alone). */
static void test_lathe_tool_as_supervisor(void **state)
{
    fx *f = *state;
    const char *tool = LATHE_BINARY_DIR "/lathe";
    if (access(tool, X_OK) != 0) skip();
    exec_backend_free(f->be);
    exec_local_config cfg = {.shim_program = tool};
    f->be = exec_local_new(&cfg);
    const char *argv[] = {"/bin/sh", "-c", "echo via the lathe tool; exit 4"};
    run r;
    run_to_end(f, "tool", argv, 3, NULL, &r);
    assert_int_equal(r.st.exit_code, 4);
    char *log = et_read_log(r.h);
    assert_string_equal(log, "via the lathe tool\n");
    free(log);
    run_free(&r);
}

/* A supervisor given no config, or a bad one, says so and runs nothing;
 * one given a descriptor that is not a socket refuses to start at all. */
static void test_supervisor_bad_config(void **state)
{
    (void)state;
    const char *configs[] = {"", "not json", "{\"argv\": []}"};
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(sv[0]);
            char fd[16];
            snprintf(fd, sizeof fd, "%d", sv[1]);
            char *args[] = {(char *)"exec-shim", fd, NULL};
            _exit(exec_shim_main(2, args));
        }
        close(sv[1]);
        assert_int_equal(write(sv[0], configs[i], strlen(configs[i])), (ssize_t)strlen(configs[i]));
        shutdown(sv[0], SHUT_WR);
        char answer[512] = "";
        ssize_t n = read(sv[0], answer, sizeof answer - 1);
        assert_true(n > 0);
        answer[n] = '\0';
        assert_true(str_starts_with(answer, "system "));
        close(sv[0]);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == LT_EXIT_INVALID);
    }
    char *bad[] = {(char *)"exec-shim", (char *)"0", NULL};
    assert_int_equal(exec_shim_main(2, bad), LT_EXIT_USAGE); /* stdin is no socket */
    char *word[] = {(char *)"exec-shim", (char *)"three", NULL};
    assert_int_equal(exec_shim_main(2, word), LT_EXIT_USAGE);
    assert_int_equal(exec_shim_main(1, word), LT_EXIT_USAGE);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-shim") == 0) return exec_shim_main(argc - 1, argv + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exit_codes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_environment_and_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_shell, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cannot_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_stops_with_trap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grace_then_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_kill_and_forward, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_rotation_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_builtin_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_hf_and_swift, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oom_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reattach_from_another_backend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_survives_server_sigkill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_supervisor_killed_is_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recycled_pid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lathe_tool_as_supervisor, setup, teardown),
        cmocka_unit_test(test_supervisor_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
