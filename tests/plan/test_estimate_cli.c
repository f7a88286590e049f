/* test_estimate_cli.c: `lathe estimate` as a user runs it (the built tool,
 * started without a shell): flags, the seed's job file, -o json, and the
 * exit codes and messages of bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/base.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct run_result {
    int status;
    sb out, err;
} run_result;

/* Reads both pipes until they close. */
static void drain(int fo, int fe, run_result *r)
{
    struct pollfd p[2] = {{fo, POLLIN, 0}, {fe, POLLIN, 0}};
    int open_fds = 2;
    char buf[4096];
    while (open_fds > 0) {
        if (poll(p, 2, 30000) <= 0) break;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP))) continue;
            ssize_t k = read(p[i].fd, buf, sizeof buf);
            if (k <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            } else {
                sb_putn(i == 0 ? &r->out : &r->err, buf, (size_t)k);
            }
        }
    }
}

/* Runs LATHE_BINARY_DIR/lathe with args (NULL-terminated). */
static void run_lathe(run_result *r, const char *const *args)
{
    sb_init(&r->out);
    sb_init(&r->err);
    const char *argv[32] = {LATHE_BINARY_DIR "/lathe"};
    size_t n = 1;
    for (; args[n - 1] && n < 31; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    int po[2], pe[2];
    assert_int_equal(pipe(po), 0);
    assert_int_equal(pipe(pe), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addclose(&fa, po[0]);
    posix_spawn_file_actions_addclose(&fa, pe[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (rc != 0) fail_msg("cannot start %s (build the lathe target first)", argv[0]);
    drain(po[0], pe[0], r);
    int st = 0;
    waitpid(pid, &st, 0);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void run_free(run_result *r)
{
    sb_free(&r->out);
    sb_free(&r->err);
}

static void expect(const char *const *args, int status, const char *in_out, const char *in_err)
{
    run_result r;
    run_lathe(&r, args);
    if (r.status != status)
        fail_msg("%s ...: exit %d, expected %d\nstdout: %s\nstderr: %s", args[1], r.status, status,
                 sb_str(&r.out), sb_str(&r.err));
    if (in_out && !strstr(sb_str(&r.out), in_out)) fail_msg("stdout lacks '%s':\n%s", in_out, sb_str(&r.out));
    if (in_err && !strstr(sb_str(&r.err), in_err)) fail_msg("stderr lacks '%s':\n%s", in_err, sb_str(&r.err));
    run_free(&r);
}

static void test_flags(void **state)
{
    (void)state;
    expect((const char *[]){"estimate", "--model", "Qwen2-7B-Instruct", "--method", "qlora", "--rank", "16",
                            "--targets", "all-linear", NULL},
           0, "peak per GPU", NULL);
    expect((const char *[]){"estimate", "--model", "Llama-2-7b-hf", "--method", "full", "--gpus", "8",
                            "--strategy", "zero3", "--precision", "amp", "--grad-ckpt", "off", NULL},
           0, "zero3", NULL);
    expect((const char *[]){"estimate", "--model=" LATHE_SOURCE_DIR "/tests/model/data/llama-folder",
                            "--method=lora", "--flash-attn=off", "--seq=4096", NULL},
           0, "config.json", NULL);
    expect((const char *[]){"estimate", "--model", "7B", "--method", "lora", NULL}, 0, "generic", NULL);
    expect((const char *[]){"estimate", "--model", "Qwen-7B-Chat", "--method", "dora", "--targets", "c_attn,w1,w2",
                            "--optimizer", "paged_adamw8bit", "--bits", "8", "--quant", "gptq4", NULL},
           0, "gptq4", NULL);
    expect((const char *[]){"estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--stack", "torchtune",
                            "--compile", "on", NULL},
           0, "torchtune stack, compiled, fused optimizer", NULL);
    expect((const char *[]){"estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--stack", "litgpt",
                            "--chunked-loss", "off", "--fused-optimizer", "on", "--gpu-memory", "24GiB", NULL},
           0, "of 24 GiB, litgpt stack, fused optimizer", NULL);
    expect((const char *[]){"estimate", "--model", "Llama-3.1-8B", "--method", "lora", NULL}, 0,
           "hf stack, fp32 adapters", NULL);
}

/* The stack changes the loss term; the GPU size caps the device figure. */
static void test_stack_and_gpu(void **state)
{
    (void)state;
    double loss[2], device[2];
    const char *stacks[2] = {"hf", "litgpt"};
    for (int i = 0; i < 2; i++) {
        run_result r;
        run_lathe(&r, (const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--seq", "16384",
                                       "--stack", stacks[i], "--gpu-memory", i ? "40" : "0", "--counter",
                                       i ? "device" : "allocated", "-o", "json", NULL});
        assert_int_equal(r.status, 0);
        json_error_t err;
        json_t *root = json_loads(sb_str(&r.out), 0, &err);
        assert_non_null(root);
        loss[i] = json_number_value(json_object_get(json_object_get(root, "terms_gib"), "logits_and_loss"));
        device[i] = json_number_value(json_object_get(root, "device_gib"));
        /* the counter asked for is the one given */
        double per = json_number_value(json_object_get(root, "per_gpu_gib"));
        assert_true(per == json_number_value(json_object_get(root, i ? "device_gib" : "allocated_gib")));
        assert_string_equal(json_string_value(json_object_get(json_object_get(root, "settings"), "stack")),
                            stacks[i]);
        json_decref(root);
        run_free(&r);
    }
    /* alive at the peak: 12 bytes per token and vocabulary entry against
     * LitGPT's 4 and one 128-token chunk's gradient buffers (1/128 of 4),
     * within the allocator's rounding */
    assert_true(loss[0] / loss[1] > 2.85 && loss[0] / loss[1] < 3.0);
    assert_true(device[1] <= 40.0 + 1e-9);
    assert_true(device[0] > 40.0);
}

static void test_json(void **state)
{
    (void)state;
    run_result r;
    run_lathe(&r, (const char *[]){"estimate", "--model", "Meta-Llama-3-8B-Instruct", "--method", "lora",
                                   "--batch", "2", "-o", "json", NULL});
    assert_int_equal(r.status, 0);
    json_error_t err;
    json_t *root = json_loads(sb_str(&r.out), 0, &err);
    if (!root) fail_msg("not JSON: %s\n%s", err.text, sb_str(&r.out));
    double total = json_number_value(json_object_get(root, "per_gpu_gib"));
    assert_true(total > 15 && total < 80);
    assert_true(json_is_object(json_object_get(root, "terms_gib")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "settings"), "batch")), 2);
    json_decref(root);
    run_free(&r);
}

static void test_job_file(void **state)
{
    (void)state;
    /* the seed's job: its path does not exist here, its name is in the catalogue */
    expect((const char *[]){"estimate", LATHE_SOURCE_DIR "/examples/seed-lora-job.yaml", NULL}, 0,
           "q_proj,k_proj,v_proj,o_proj", NULL);
    /* flags override the spec */
    expect((const char *[]){"estimate", LATHE_SOURCE_DIR "/examples/seed-lora-job.yaml", "--batch", "1",
                            "--method", "qlora", NULL},
           0, "batch 1 x 2048", NULL);
    /* a target module the model does not have, pointed at in the file */
    expect((const char *[]){"estimate", LATHE_TEST_DATA "/job-bad-target.yaml", NULL}, 2, NULL,
           "job-bad-target.yaml:13");
}

static void test_errors(void **state)
{
    (void)state;
    expect((const char *[]){"estimate", NULL}, 1, NULL, "--model");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", NULL}, 1, NULL, "--method");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--rnk", "8", NULL}, 1, NULL,
           "did you mean --rank");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--rank", NULL}, 1, NULL,
           "needs a value");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "-o", "yaml", NULL}, 1, NULL,
           "-o");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lorra", NULL}, 2, NULL,
           "full, lora, qlora or dora");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--rank", "0", NULL}, 2, NULL,
           "--rank");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--batch", "4x", NULL}, 2,
           NULL, "--batch");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--grad-ckpt", "yes", NULL}, 2,
           NULL, "on or off");
    expect((const char *[]){"estimate", "--model", "Qwen2-7C", "--method", "lora", NULL}, 2, NULL,
           "did you mean");
    expect((const char *[]){"estimate", "--model", "Phi-3-mini-4k-instruct", "--method", "lora", "--targets",
                            "q_proj", NULL},
           2, NULL, "qkv_proj");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "full", "--quant", "nf4", NULL}, 2,
           NULL, "--quant");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--gpus", "4", "--strategy",
                            "single", NULL},
           2, NULL, "--strategy");
    expect((const char *[]){"estimate", "--model", "/no/such/model", "--method", "lora", NULL}, 4, NULL,
           "not found");
    expect((const char *[]){"estimate", "--model", LATHE_SOURCE_DIR "/tests/model/data/bad/not-json.json",
                            "--method", "lora", NULL},
           2, NULL, "not valid JSON");
    expect((const char *[]){"estimate", LATHE_TEST_DATA "/no-such-job.yaml", NULL}, 4, NULL, NULL);
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--stack", "deepspeed", NULL}, 2,
           NULL, "hf, torchtune, litgpt or plain");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--gpu-memory", "lots", NULL}, 2,
           NULL, "--gpu-memory");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--compile", "maybe", NULL}, 2,
           NULL, "on or off");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--truncation", "left", NULL}, 2,
           NULL, "cut or drop");
    /* dropping the long samples needs the dataset's length statistics */
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--truncation", "drop", NULL}, 2,
           NULL, "--seq-mean");
    expect((const char *[]){"estimate", "--model", "Qwen2-1.5B", "--method", "lora", "--seq-mean", "3234",
                            "--seq-sd", "2547", "--truncation", "drop", "--explain", NULL},
           0, "longer ones dropped", NULL);
    /* the shortest sample shapes varying lengths: it needs them, lies below their mean, and is reported */
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--seq-min", "91", NULL}, 2, NULL,
           "--seq-mean");
    expect((const char *[]){"estimate", "--model", "Qwen2-7B", "--method", "lora", "--seq-mean", "3234", "--seq-sd",
                            "2547", "--seq-min", "5000", NULL},
           2, NULL, "--seq-min");
    expect((const char *[]){"estimate", "--model", "Qwen2-1.5B", "--method", "lora", "--seq-mean", "3234",
                            "--seq-sd", "2547", "--seq-min", "91", "--truncation", "drop", "-o", "json", NULL},
           0, "\"seq_min\"", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_job_file),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_stack_and_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
