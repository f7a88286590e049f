/* test_exec_formats.c: the executor's pure parts: the `[lathe-train]` line
 * parser (every line kind of docs/trainer.md), Hugging Face
 * trainer_state.json, ms-swift logging.jsonl (incremental, with a line
 * written in two halves), out-of-memory lines, exit classification, the
 * contract's environment, the local handle's JSON, process identity and
 * the inventory (virtual GPUs from a Cluster spec; NVML absent or present). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/exec.h"
#include "exec/exec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static exec_line_kind parse(const char *line, exec_progress *p, char *path)
{
    return exec_parse_train_line(line, strlen(line), p, path, 256);
}

static void test_train_lines(void **state)
{
    (void)state;
    exec_progress p;
    char path[256];
    assert_int_equal(parse("[lathe-train] start step=0/1200 model=/models/qwen mode=lora "
                           "trainable=8798208 threads=2",
                           &p, path),
                     EXEC_LINE_START);
    assert_int_equal(p.step, 0);
    assert_int_equal(p.total_steps, 1200);
    assert_int_equal(parse("[lathe-train] step=12/1200 epoch=0.0100 loss=2.345600 "
                           "lr=1.500000e-04 grad_norm=0.873000 tokens_per_s=1234.5 step_s=0.415 "
                           "elapsed_s=5.0 eta_s=493 eta=8m13s",
                           &p, path),
                     EXEC_LINE_STEP);
    assert_int_equal(p.step, 12);
    assert_int_equal(p.total_steps, 1200);
    assert_true(fabs(p.epoch - 0.01) < 1e-12);
    assert_true(fabs(p.loss - 2.3456) < 1e-12);
    assert_true(fabs(p.learning_rate - 1.5e-4) < 1e-18);
    assert_true(fabs(p.tokens_per_second - 1234.5) < 1e-9);
    assert_true(p.eta_seconds == 493 && p.elapsed_seconds == 5.0);
    assert_int_equal(parse("[lathe-train] checkpoint step=500 path=/ckpt/checkpoint-500", &p, path),
                     EXEC_LINE_CHECKPOINT);
    assert_int_equal(p.step, 500);
    assert_string_equal(path, "/ckpt/checkpoint-500");
    assert_int_equal(parse("[lathe-train] resume step=500 path=/ckpt/checkpoint-500", &p, path),
                     EXEC_LINE_RESUME);
    assert_int_equal(p.step, 500);
    assert_int_equal(parse("[lathe-train] stopped step=512 (SIGTERM): checkpoint saved", &p, path),
                     EXEC_LINE_STOPPED);
    assert_int_equal(p.step, 512);
    assert_int_equal(parse("[lathe-train] done step=1200 loss=1.234500 adapter=/ckpt/final", &p,
                           path),
                     EXEC_LINE_DONE);
    assert_int_equal(p.step, 1200);
    assert_true(fabs(p.loss - 1.2345) < 1e-12);
    assert_string_equal(path, "/ckpt/final");
    assert_int_equal(parse("[lathe-train] data FILE: messages records, 162 sequences", &p, path),
                     EXEC_LINE_OTHER);
    /* Not progress lines, or unreadable values. */
    assert_int_equal(parse("lathe train: cannot read model", &p, path), EXEC_LINE_NONE);
    assert_int_equal(parse("[lathe-train]", &p, path), EXEC_LINE_NONE);
    assert_int_equal(parse("  [lathe-train] step=1/2", &p, path), EXEC_LINE_NONE);
    assert_int_equal(parse("[lathe-train] step=abc loss=1", &p, path), EXEC_LINE_OTHER);
    assert_int_equal(parse("[lathe-train] step=3/9 loss=nope", &p, path), EXEC_LINE_STEP);
    assert_true(isnan(p.loss));
    /* Found by fuzz_progress: a step beyond what an integer holds was cast
     * anyway (undefined behaviour); steps must be whole numbers in range. */
    assert_int_equal(parse("[lathe-train] step=1e300/inf loss=1", &p, path), EXEC_LINE_OTHER);
    assert_int_equal(p.step, -1);
    assert_int_equal(p.total_steps, -1);
    assert_int_equal(parse("[lathe-train] step=2.5/10 loss=1", &p, path), EXEC_LINE_OTHER);
    assert_int_equal(parse("[lathe-train] step=7/1e99 loss=1", &p, path), EXEC_LINE_STEP);
    assert_int_equal(p.step, 7);
    assert_int_equal(p.total_steps, -1);
    /* A path longer than the buffer is cut, never overflowed. */
    char small[8];
    assert_int_equal(exec_parse_train_line("[lathe-train] checkpoint step=1 path=/a/very/long/path",
                                           52, &p, small, sizeof small),
                     EXEC_LINE_CHECKPOINT);
    assert_string_equal(small, "/a/very");
}

static void test_hf_state(void **state)
{
    (void)state;
    exec_progress *pts;
    size_t n;
    char err[256];
    assert_true(exec_read_hf_state(LATHE_TEST_DATA "/trainer_state.json", -1, &pts, &n, err,
                                   sizeof err));
    assert_int_equal(n, 4); /* the eval entry joins the point of its step */
    assert_true(fabs(pts[1].eval_loss - 1.9) < 1e-12 && isnan(pts[0].eval_loss));
    assert_int_equal(pts[0].step, 10);
    assert_int_equal(pts[0].total_steps, 100);
    assert_true(fabs(pts[0].loss - 2.4512) < 1e-12);
    assert_true(fabs(pts[1].learning_rate - 0.00018) < 1e-15);
    assert_true(fabs(pts[3].epoch - 0.64) < 1e-12);
    assert_true(isnan(pts[3].tokens_per_second));
    free(pts);
    assert_true(exec_read_hf_state(LATHE_TEST_DATA "/trainer_state.json", 20, &pts, &n, err,
                                   sizeof err));
    assert_int_equal(n, 2);
    assert_int_equal(pts[0].step, 30);
    free(pts);
    assert_false(exec_read_hf_state(LATHE_TEST_DATA "/logging.jsonl", -1, &pts, &n, err,
                                    sizeof err));
    assert_non_null(strstr(err, "logging.jsonl"));
    assert_false(exec_read_hf_state(LATHE_TEST_DATA "/nope.json", -1, &pts, &n, err, sizeof err));
    /* Negative steps and totals are unknown, not points (fuzz_progress). */
    const char *neg = "{\"max_steps\": -3, \"log_history\": [{\"step\": -1, \"loss\": 2}, "
                      "{\"step\": 4, \"loss\": 1.5}]}";
    assert_true(exec_parse_hf_state(neg, strlen(neg), "neg.json", -2, &pts, &n, err, sizeof err));
    assert_int_equal(n, 1);
    assert_int_equal(pts[0].step, 4);
    assert_int_equal(pts[0].total_steps, -1);
    free(pts);
    assert_false(exec_parse_hf_state("[]", 2, "list.json", -1, &pts, &n, err, sizeof err));
    assert_string_equal(err, "list.json: not a trainer_state.json (no log_history list)");
}

static void test_swift_lines(void **state)
{
    (void)state;
    exec_progress p;
    const char *l = "{\"loss\": 1.42, \"learning_rate\": 9.4e-05, \"epoch\": 0.11, "
                    "\"global_step/max_steps\": \"10/156\", \"elapsed_time\": \"1h 2m 3s\", "
                    "\"remaining_time\": \"1d 2h 3m 4s\"}";
    assert_true(exec_parse_swift_line(l, strlen(l), &p));
    assert_int_equal(p.step, 10);
    assert_int_equal(p.total_steps, 156);
    assert_true(fabs(p.loss - 1.42) < 1e-12);
    assert_true(p.elapsed_seconds == 3723);
    assert_true(p.eta_seconds == 93784);
    const char *old = "{\"loss\": 1.1, \"global_step\": 15}";
    assert_true(exec_parse_swift_line(old, strlen(old), &p));
    assert_int_equal(p.step, 15);
    assert_int_equal(p.total_steps, -1);
    const char *eval = "{\"eval_loss\": 1.6, \"global_step/max_steps\": \"5/156\"}";
    assert_true(exec_parse_swift_line(eval, strlen(eval), &p)); /* an evaluation alone */
    assert_true(p.step == 5 && isnan(p.loss) && fabs(p.eval_loss - 1.6) < 1e-12);
    assert_false(exec_parse_swift_line("not json", 8, &p));
    assert_false(exec_parse_swift_line("[1,2]", 5, &p));
    const char *neg = "{\"loss\": 2.0, \"global_step\": -4}";
    assert_false(exec_parse_swift_line(neg, strlen(neg), &p));
    assert_int_equal(p.step, -1);
}

static void count_line(const char *line, size_t len, void *ctx)
{
    sb *s = ctx;
    sb_printf(s, "%.*s;", (int)len, line);
}

static void put_file(const char *dir, const char *name, const char *text)
{
    char *p = path_join(dir, name);
    assert_int_equal(file_write_atomic(p, text, strlen(text)), 0);
    free(p);
}

/* The log reader follows rotations, also when it looks in the middle of
 * one: the supervisor renames .2 -> .3, then .1 -> .2, then the log -> .1,
 * and a reader that stopped at the first missing name skipped the file
 * between (found under load by the rotation test). */
static void test_log_reader_mid_rotation(void **state)
{
    (void)state;
    char dir[] = "/tmp/lathe-exec-rot-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *log = path_join(dir, "output.log");
    put_file(dir, "output.log.1", "a1\na2\n");
    put_file(dir, "output.log", "b1\n");
    exec_log_reader r;
    exec_log_reader_init(&r, log);
    sb got;
    sb_init(&got);
    exec_log_read(&r, SIZE_MAX, count_line, &got);
    assert_string_equal(sb_str(&got), "a1;a2;b1;");
    /* while the reader sleeps the log rotates twice, and it looks in the
     * middle of a third rotation: ours (b) is at .3, the file after it (c)
     * at .2, .1 missing for a moment, the newest (d) still the log */
    char *p1 = path_join(dir, "output.log.1"), *p2 = path_join(dir, "output.log.2"),
         *p3 = path_join(dir, "output.log.3");
    FILE *f = fopen(log, "a");
    fputs("b2\n", f);
    fclose(f);
    assert_int_equal(rename(p1, p2), 0);  /* a -> .2 */
    assert_int_equal(rename(log, p1), 0); /* b -> .1 */
    put_file(dir, "output.log", "c1\n");
    assert_int_equal(rename(p2, p3), 0);  /* a -> .3 */
    assert_int_equal(rename(p1, p2), 0);  /* b -> .2 */
    assert_int_equal(rename(log, p1), 0); /* c -> .1 */
    put_file(dir, "output.log", "d1\n");
    assert_int_equal(rename(p2, p3), 0);  /* b -> .3 (a is gone) */
    assert_int_equal(rename(p1, p2), 0);  /* c -> .2; .1 missing for now */
    exec_log_read(&r, SIZE_MAX, count_line, &got);
    assert_string_equal(sb_str(&got), "a1;a2;b1;b2;c1;d1;");
    /* the rotation completes (d -> .1, a new log): nothing read twice */
    assert_int_equal(rename(log, p1), 0);
    put_file(dir, "output.log", "e1\n");
    exec_log_read(&r, SIZE_MAX, count_line, &got);
    assert_string_equal(sb_str(&got), "a1;a2;b1;b2;c1;d1;e1;");
    exec_log_reader_free(&r);
    sb_free(&got);
    char err[256];
    assert_int_equal(file_remove_tree(dir, err, sizeof err), 0);
    free(log);
    free(p1);
    free(p2);
    free(p3);
}

/* The reader returns only new whole lines, across appends. */
static void test_swift_incremental(void **state)
{
    (void)state;
    char dir[] = "/tmp/lathe-exec-fmt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *path = path_join(dir, "logging.jsonl");
    char err[256];
    size_t len;
    char *all = file_read_all(LATHE_TEST_DATA "/logging.jsonl", 1 << 20, &len, err, sizeof err);
    assert_non_null(all);
    const char *second_line = strchr(all, '\n') + 1;
    size_t cut = (size_t)(second_line - all) + 40; /* the middle of the second line */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, all, cut), (ssize_t)cut);
    exec_jsonl_reader r;
    exec_jsonl_reader_init(&r, path);
    exec_progress *pts = NULL;
    size_t n = 0, cap = 0;
    assert_true(exec_read_swift_log(&r, &pts, &n, &cap, err, sizeof err));
    assert_int_equal(n, 1);
    assert_true(exec_read_swift_log(&r, &pts, &n, &cap, err, sizeof err));
    assert_int_equal(n, 1); /* nothing new */
    assert_int_equal(write(fd, all + cut, len - cut), (ssize_t)(len - cut));
    close(fd);
    assert_true(exec_read_swift_log(&r, &pts, &n, &cap, err, sizeof err));
    assert_int_equal(n, 4); /* steps 1, 5 (with its eval line), 10, 15; the summary skipped */
    assert_true(fabs(pts[1].eval_loss - 1.61) < 1e-12 && isnan(pts[2].eval_loss));
    assert_int_equal(pts[1].step, 5);
    assert_int_equal(pts[2].step, 10);
    assert_int_equal(pts[3].step, 15);
    assert_true(fabs(pts[1].eta_seconds - 708) < 1e-9);
    free(pts);
    exec_jsonl_reader_free(&r);
    /* A missing file is "nothing yet". */
    exec_jsonl_reader_init(&r, "/tmp/lathe-no-such-dir/logging.jsonl");
    pts = NULL;
    n = cap = 0;
    assert_true(exec_read_swift_log(&r, &pts, &n, &cap, err, sizeof err));
    assert_int_equal(n, 0);
    exec_jsonl_reader_free(&r);
    free(all);
    unlink(path);
    free(path);
    rmdir(dir);
}

static void test_oom_lines(void **state)
{
    (void)state;
    const char *yes[] = {
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB",
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
        "torch.cuda.OutOfMemoryError: CUDA out of memory.",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "CUDA_ERROR_OUT_OF_MEMORY",
        "lathe: out of memory (allocating 123 bytes)",
    };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_true(exec_line_is_oom(yes[i], strlen(yes[i])));
    const char *no[] = {"[lathe-train] step=1/2 loss=1.0", "memory(GiB): 18.4",
                        "out of patience", ""};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        assert_false(exec_line_is_oom(no[i], strlen(no[i])));
}

static exec_status ended(int code, int sig, bool term, bool kill)
{
    exec_status st;
    memset(&st, 0, sizeof st);
    st.phase = EXEC_EXITED;
    st.exit_code = code;
    st.signal = sig;
    st.term_sent = term;
    st.kill_sent = kill;
    return st;
}

static void test_classify(void **state)
{
    (void)state;
    static const int no_retry[] = {2};
    struct {
        exec_status st;
        bool oom_line, oom_killed;
        exec_end end;
        bool retryable;
    } cases[] = {
        {ended(0, 0, false, false), false, false, EXEC_END_SUCCEEDED, false},
        {ended(0, 0, true, false), false, false, EXEC_END_SUCCEEDED, false},
        {ended(1, 0, false, false), false, false, EXEC_END_FAILED, true},
        {ended(2, 0, false, false), false, false, EXEC_END_INVALID, false},
        {ended(1, 0, false, false), true, false, EXEC_END_OOM, true},
        {ended(-1, SIGKILL, false, false), false, true, EXEC_END_OOM, true},
        {ended(-1, SIGKILL, false, false), false, false, EXEC_END_SIGNALLED, true},
        {ended(-1, SIGKILL, true, true), false, true, EXEC_END_KILLED, true},
        {ended(143, 0, true, false), false, false, EXEC_END_STOPPED, true},
        {ended(-1, SIGTERM, true, false), false, false, EXEC_END_STOPPED, true},
        {ended(143, 0, false, false), false, false, EXEC_END_FAILED, true},
        {ended(-1, SIGSEGV, false, false), false, false, EXEC_END_SIGNALLED, true},
        {ended(1, 0, true, false), false, false, EXEC_END_FAILED, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        exec_status st = cases[i].st;
        exec_classify(&st, cases[i].oom_line, cases[i].oom_killed, no_retry, 1);
        if (st.end != cases[i].end || st.retryable != cases[i].retryable)
            fail_msg("case %zu: %s (retryable %d), expected %s: %s", i, exec_end_name(st.end),
                     st.retryable, exec_end_name(cases[i].end), st.reason);
        assert_true(st.reason[0] != '\0');
    }
    exec_status st = ended(-1, SIGSEGV, false, false);
    exec_classify(&st, false, false, NULL, 0);
    assert_non_null(strstr(st.reason, "SIGSEGV"));
    st.phase = EXEC_LOST;
    exec_classify(&st, false, false, NULL, 0);
    assert_int_equal(st.end, EXEC_END_LOST);
    assert_true(st.retryable);
    st.phase = EXEC_RUNNING;
    exec_classify(&st, false, false, NULL, 0);
    assert_int_equal(st.end, EXEC_END_NONE);
    assert_string_equal(exec_end_name(EXEC_END_OOM), "oom");
    assert_string_equal(exec_rc_name(EXEC_E_BUSY), "busy");
}

static bool has(char **env, size_t n, const char *entry)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(env[i], entry) == 0) return true;
    return false;
}

static void test_contract_env(void **state)
{
    (void)state;
    exec_contract c = {.job = "team-a/lora-r16", .attempt = 2, .spec_path = "/w/spec.json",
                       .base_model_path = "/models/qwen", .dataset_path = "/data/a.jsonl",
                       .eval_dataset_path = "/data/e.jsonl", .lora_rank = 16, .checkpoint_dir = "/w/ckpt", .checkpoint_interval = 500,
                       .gpus = "0,1", .nnodes = 2, .node_rank = 1, .nproc_per_node = 2,
                       .master_addr = "10.0.0.1", .master_port = 29500};
    char **env = NULL;
    size_t n = 0;
    exec_contract_env(&c, &env, &n);
    const char *want[] = {"LATHE_JOB=team-a/lora-r16", "LATHE_ATTEMPT=2", "LATHE_SPEC=/w/spec.json",
                          "BASE_MODEL_PATH=/models/qwen", "DATASET_PATH=/data/a.jsonl",
                          "EVAL_DATASET_PATH=/data/e.jsonl", "LORA_RANK=16", "CHECKPOINT_DIR=/w/ckpt", "CHECKPOINT_INTERVAL=500",
                          "LATHE_GPUS=0,1", "CUDA_VISIBLE_DEVICES=0,1", "NNODES=2", "NODE_RANK=1",
                          "NPROC_PER_NODE=2", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!has(env, n, want[i])) fail_msg("missing %s", want[i]);
    assert_int_equal(n, sizeof want / sizeof want[0]);
    str_list_free(env, n);
    /* A CPU job hides every GPU; unset numbers stay unset. */
    exec_contract cpu = {.job = "t/j", .checkpoint_interval = -1, .virtual_gpus = true};
    env = NULL;
    n = 0;
    exec_contract_env(&cpu, &env, &n);
    assert_true(has(env, n, "CUDA_VISIBLE_DEVICES="));
    assert_true(has(env, n, "LATHE_VIRTUAL_GPUS=1"));
    for (size_t i = 0; i < n; i++) {
        assert_false(str_starts_with(env[i], "NNODES="));
        assert_false(str_starts_with(env[i], "CHECKPOINT_INTERVAL="));
        assert_false(str_starts_with(env[i], "LORA_RANK="));
        assert_false(str_starts_with(env[i], "EVAL_DATASET_PATH="));
        assert_false(str_starts_with(env[i], "CUDA_MPS_"));
    }
    str_list_free(env, n);
    /* A job that shares its GPU: its part, for itself and for CUDA MPS */
    exec_contract shared = {.job = "t/s", .checkpoint_interval = -1, .gpus = "GPU-1234",
                            .gpu_share = 0.18, .gpu_memory_limit = 0.18 * 80 * GIB};
    env = NULL;
    n = 0;
    exec_contract_env(&shared, &env, &n);
    assert_true(has(env, n, "LATHE_GPU_SHARE=0.18"));
    assert_true(has(env, n, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=18"));
    assert_true(has(env, n, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=14745M"));
    str_list_free(env, n);
}

static void test_handle_json(void **state)
{
    (void)state;
    int codes[] = {2, 3};
    exec_local_desc d = {.job_dir = "/w/j", .work_dir = "/w/j/attempt-1",
                         .log_path = "/w/j/attempt-1/output.log", .attempt = 1,
                         .started_at = 1.7e9, .no_retry = codes, .n_no_retry = 2,
                         .term_at = 5, .kill_at = 65};
    snprintf(d.ids.boot_id, sizeof d.ids.boot_id, "abc");
    d.ids.shim_pid = 10;
    d.ids.shim_start = 1234567;
    d.ids.trainer_pid = 11;
    d.ids.trainer_start = 1234568;
    char *json = exec_local_desc_json(&d);
    exec_local_desc back;
    char err[256];
    assert_true(exec_local_desc_parse(json, &back, err, sizeof err));
    assert_string_equal(back.work_dir, "/w/j/attempt-1");
    assert_null(back.checkpoint_dir);
    assert_int_equal(back.ids.trainer_start, 1234568);
    assert_string_equal(back.ids.boot_id, "abc");
    assert_int_equal(back.n_no_retry, 2);
    assert_int_equal(back.no_retry[1], 3);
    assert_true(back.kill_at == 65 && back.term_at == 5);
    exec_local_desc_free(&back);
    free(json);
    const char *bad[] = {"", "[]", "{\"backend\":\"slurm\",\"version\":1}",
                         "{\"backend\":\"local\",\"version\":9}",
                         "{\"backend\":\"local\",\"version\":1,\"job_dir\":\"/x\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(exec_local_desc_parse(bad[i], &back, err, sizeof err));
        assert_true(err[0] != '\0');
    }
}

static void test_process_identity(void **state)
{
    (void)state;
    uint64_t me = exec_proc_start_time(getpid());
    assert_true(me > 0);
    assert_int_equal(exec_proc_start_time(0), 0);
    assert_int_equal(exec_proc_start_time(999999999), 0);
    char boot[40];
    exec_boot_id(boot, sizeof boot);
    assert_true(strlen(boot) >= 32);
    assert_true(exec_proc_alive(getpid(), me, boot));
    assert_false(exec_proc_alive(getpid(), me + 1, boot)); /* a recycled pid */
    assert_false(exec_proc_alive(getpid(), me, "another-boot"));
    /* The check comes before the signal: a wrong start time sends nothing. */
    assert_int_equal(exec_proc_signal(getpid(), me + 1, SIGKILL), ESRCH);
    assert_int_equal(exec_proc_signal(getpid(), me, 0), 0);
}

static void test_inventory_cluster(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_file(LATHE_TEST_DATA "/cluster.yaml", &f, &d), 0);
    exec_inventory inv;
    exec_inventory_from_cluster(spec_file_cluster(&f), &inv);
    assert_string_equal(inv.source, "cluster");
    assert_int_equal(inv.n_gpus, 4);
    assert_string_equal(inv.gpus[2].node, "node-2");
    assert_int_equal(inv.gpus[2].index, 0);
    assert_string_equal(inv.gpus[3].id, "1");
    assert_null(inv.gpus[3].uuid);
    assert_string_equal(inv.gpus[3].name, "A100-80GB");
    assert_true(inv.gpus[3].memory == 80.0 * GIB);
    assert_true(inv.gpus[3].is_virtual);
    assert_int_equal(inv.cpu_slots, 16);
    exec_inventory_free(&inv);
    spec_file_free(&f);
    diag_list_free(&d);
}

/* NVML: none here is fine (an empty inventory that says why); on a machine
 * with NVIDIA GPUs, every GPU has a name, memory and a UUID. */
static void test_inventory_local(void **state)
{
    (void)state;
    exec_inventory inv;
    exec_inventory_local(&inv);
    assert_true(inv.cpu_slots >= 1);
    assert_true(inv.note[0] != '\0');
    print_message("inventory: %s, %zu GPUs, %d CPU slots (%s)\n", inv.source, inv.n_gpus,
                  inv.cpu_slots, inv.note);
    if (inv.n_gpus == 0) assert_string_equal(inv.source, "none");
    for (size_t i = 0; i < inv.n_gpus; i++) {
        assert_string_equal(inv.source, "nvml");
        assert_true(str_starts_with(inv.gpus[i].uuid, "GPU-"));
        assert_string_equal(inv.gpus[i].id, inv.gpus[i].uuid);
        assert_true(inv.gpus[i].memory > GIB);
        assert_true(inv.gpus[i].name[0] != '\0');
        assert_false(inv.gpus[i].is_virtual);
        print_message("  GPU %d: %s, %.1f GiB, %s\n", inv.gpus[i].index, inv.gpus[i].name,
                      inv.gpus[i].memory / GIB, inv.gpus[i].uuid);
    }
    exec_inventory_free(&inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_lines),      cmocka_unit_test(test_hf_state),
        cmocka_unit_test(test_swift_lines),      cmocka_unit_test(test_swift_incremental),
        cmocka_unit_test(test_log_reader_mid_rotation),
        cmocka_unit_test(test_oom_lines),        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_contract_env),     cmocka_unit_test(test_handle_json),
        cmocka_unit_test(test_process_identity), cmocka_unit_test(test_inventory_cluster),
        cmocka_unit_test(test_inventory_local),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
