/* test_controller.c: the controller's rules against a real `lathe server`
 * with fake trainers on a 2-GPU virtual cluster: retry after a crash (and
 * no retry once maxRetries is used up), the out-of-memory re-plan (each
 * retry runs with half the micro-batch and twice the accumulation, and the
 * events say so), maxDuration (SIGTERM, checkpoint, timed_out; and SIGKILL
 * after the grace period for a trainer that ignores SIGTERM), preemption
 * by a higher-priority job and the resume from the newest checkpoint, and
 * the unit rules behind them (backoff, shrink). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "server/ctl.h"

HS_GROUP_SERVER(2)

static void submit_td(const char *name, const char *env, const char *more, const char *td)
{
    char *job = hs_job_td(&H, name, env, more, td);
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", "token-a", job);
    if (r.status != 201) fprintf(stderr, "%s: %ld %s\n", name, r.status, r.body);
    assert_int_equal(r.status, 201);
    hs_resp_free(&r);
    free(job);
}

static void submit_ok(const char *name, const char *env, const char *more)
{
    submit_td(name, env, more, NULL);
}

static json_t *get_job(const char *name)
{
    char *path = xasprintf("/v1/jobs/%s", name);
    hs_resp r = hs_http(&H, "GET", path, "token-a", NULL);
    free(path);
    json_t *j = r.json;
    r.json = NULL;
    hs_resp_free(&r);
    return j;
}

static void expect_events(const char *name, const char *const *texts, size_t n)
{
    char *ev = hs_events(&H, "token-a", name);
    for (size_t i = 0; i < n; i++) {
        if (!strstr(ev, texts[i])) fprintf(stderr, "%s: no \"%s\" in\n%s", name, texts[i], ev);
        assert_non_null(strstr(ev, texts[i]));
    }
    free(ev);
}

/* ---- rules ---- */
static void test_backoff(void **state)
{
    (void)state;
    assert_true(ctl_backoff(60, 3600, 0, 1, 0.5) == 60);
    assert_true(ctl_backoff(60, 3600, 0, 3, 0.5) == 240);
    assert_true(ctl_backoff(60, 3600, 0, 10, 0.5) == 3600); /* capped */
    assert_true(ctl_backoff(60, 3600, 0.2, 1, 0.0) == 48);  /* jitter: -20% */
    assert_true(ctl_backoff(60, 3600, 0.2, 1, 0.999999) > 71.9);
    assert_true(ctl_backoff(60, 3600, 0.2, 7, 0.999999) == 3600); /* the cap holds after jitter */
    assert_true(ctl_backoff(0, 3600, 0.2, 3, 0.5) == 0);
}

static void test_shrink(void **state)
{
    (void)state;
    int m, a;
    bool c;
    char what[256];
    assert_true(ctl_oom_shrink(4, 2, false, &m, &a, &c, what, sizeof what));
    assert_int_equal(m, 2);
    assert_int_equal(a, 4);
    assert_true(c);
    assert_true(ctl_oom_shrink(3, 1, true, &m, &a, &c, what, sizeof what));
    assert_int_equal(m, 1);
    assert_int_equal(a, 3); /* the effective batch (3) stays */
    assert_true(ctl_oom_shrink(1, 8, false, &m, &a, &c, what, sizeof what)); /* checkpointing on */
    assert_int_equal(m, 1);
    assert_true(c);
    assert_false(ctl_oom_shrink(1, 8, true, &m, &a, &c, what, sizeof what));
    assert_non_null(strstr(what, "smallest plan"));
}

static void test_token_hash(void **state)
{
    (void)state;
    char hex[65];
    /* FIPS 180-2, appendix B.1: SHA-256("abc") */
    srv_hash_token("abc", hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* ---- against the server ---- */

/* The default trainer: `lathe train SPEC` on a tiny model made here. */
static void test_builtin_trainer(void **state)
{
    (void)state;
    char *tok = xasprintf("%s/tokenizers/qwen3/tokenizer.json", LATHE_SOURCE_DIR "/share");
    if (!file_exists(tok)) {
        fprintf(stderr, "SKIP: %s is missing\n", tok);
        free(tok);
        skip();
    }
    char *model = path_join(H.dir, "model"), *lathe = xasprintf("%s/lathe", LATHE_BINARY_DIR);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execl(lathe, "lathe", "init-model", model, "--preset", "tiny", "--arch", "qwen3",
              "--tokenizer", tok, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *job = xasprintf("apiVersion: lathe/v1\n"
                          "kind: LoRATrainingJob\n"
                          "metadata: {name: builtin}\n"
                          "spec:\n"
                          "  baseModel: {path: %s}\n"
                          "  lora: {rank: 4, targetModules: [q_proj, v_proj]}\n"
                          "  trainingData: {datasetPath: %s/data/self-instruct/seed_tasks.alpaca.jsonl}\n"
                          "  hyperparams: {maxSteps: 3, maxSeqLength: 64}\n"
                          "  checkpoint: {intervalSteps: 2}\n",
                          model, LATHE_SOURCE_DIR "/share");
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", "token-a", job);
    assert_int_equal(r.status, 201);
    hs_resp_free(&r);
    assert_true(hs_wait_state(&H, "token-a", "builtin", "succeeded", 60));
    json_t *j = get_job("builtin");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "progress"), "step")), 3);
    assert_int_equal(json_array_size(json_object_get(j, "checkpoints")), 2);
    json_decref(j);
    r = hs_http(&H, "GET", "/v1/jobs/builtin/logs", "token-a", NULL);
    assert_non_null(strstr(r.body, "[lathe-train] start step=0/3"));
    const char *adapter = strstr(r.body, "adapter=");
    assert_non_null(adapter);
    char *dir = xstrndup(adapter + 8, strcspn(adapter + 8, "\n"));
    char *file = path_join(dir, "adapter_model.safetensors");
    assert_true(file_exists(file));
    hs_resp_free(&r);
    free(file);
    free(dir);
    free(job);
    free(model);
    free(lathe);
    free(tok);
}
static void test_retry_after_crash(void **state)
{
    (void)state;
    submit_ok("crashy", "      - {name: MODE, value: crash-once}\n", NULL);
    submit_ok("crashy-no-retry", "      - {name: MODE, value: crash-once}\n",
              "  retryPolicy: {maxRetries: 0}\n");
    assert_true(hs_wait_state(&H, "token-a", "crashy", "succeeded", 30));
    assert_true(hs_wait_state(&H, "token-a", "crashy-no-retry", "failed", 30));
    json_t *j = get_job("crashy");
    assert_int_equal(json_integer_value(json_object_get(j, "attempt")), 2);
    json_decref(j);
    const char *ev[] = {"retrying: attempt 1 ended: exit code 1", "retry 1 of 2 in 0.2s",
                        "scheduled: placed on node-1", "succeeded: attempt 2 succeeded"};
    expect_events("crashy", ev, 4);
    const char *ev2[] = {"failed: attempt 1 ended: exit code 1", "no retries left (retryPolicy.maxRetries is 0)"};
    expect_events("crashy-no-retry", ev2, 2);
    j = get_job("crashy-no-retry");
    json_t *x = json_object_get(j, "exit");
    assert_int_equal(json_integer_value(json_object_get(x, "code")), 1);
    assert_string_equal(json_string_value(json_object_get(x, "reason")), "failed");
    json_decref(j);
}

/* Failures that cannot pass are never retried: a dataset that is not
 * there, and the built-in trainer's exit code 2 (here: no such model). */
static void test_no_retry_when_hopeless(void **state)
{
    (void)state;
    char *job = xasprintf("apiVersion: lathe/v1\n"
                          "kind: LoRATrainingJob\n"
                          "metadata: {name: nodata}\n"
                          "spec:\n"
                          "  baseModel: {name: Qwen2.5-0.5B}\n"
                          "  trainingData: {datasetPath: %s/missing.jsonl, samples: 10}\n"
                          "  trainer: {command: [/bin/true]}\n",
                          H.dir);
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", "token-a", job);
    assert_int_equal(r.status, 201);
    hs_resp_free(&r);
    free(job);
    job = xasprintf("apiVersion: lathe/v1\n"
                    "kind: LoRATrainingJob\n"
                    "metadata: {name: nomodel}\n"
                    "spec:\n"
                    "  baseModel: {name: Qwen2.5-0.5B, path: %s/no-such-model}\n"
                    "  trainingData: {datasetPath: %s/data.jsonl, samples: 10}\n",
                    H.dir, H.dir);
    r = hs_http(&H, "POST", "/v1/jobs", "token-a", job);
    assert_int_equal(r.status, 201);
    hs_resp_free(&r);
    free(job);
    assert_true(hs_wait_state(&H, "token-a", "nodata", "failed", 20));
    assert_true(hs_wait_state(&H, "token-a", "nomodel", "failed", 30));
    json_t *j = get_job("nodata");
    assert_int_equal(json_integer_value(json_object_get(j, "attempt")), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "exit"), "reason")), "invalid");
    json_decref(j);
    const char *ev1[] = {"does not exist on this machine (trainingData.datasetPath)"};
    expect_events("nodata", ev1, 1);
    j = get_job("nomodel");
    assert_int_equal(json_integer_value(json_object_get(j, "attempt")), 1);
    json_t *x = json_object_get(j, "exit");
    assert_int_equal(json_integer_value(json_object_get(x, "code")), 2);
    assert_string_equal(json_string_value(json_object_get(x, "reason")), "invalid");
    json_decref(j);
    const char *ev2[] = {"it cannot succeed, so it is not retried"};
    expect_events("nomodel", ev2, 1);
}

static void test_oom_replan(void **state)
{
    (void)state;
    submit_td("oomy", "      - {name: MODE, value: oom}\n",
              "  retryPolicy: {maxRetries: 3, backoffSeconds: 0.1}\n"
              "  resources: {gpu: {count: 1, type: A100-80GB}}\n",
              ", batchSize: 4, gradientAccumulation: 2");
    assert_true(hs_wait_state(&H, "token-a", "oomy", "succeeded", 40));
    const char *ev[] = {
        "replanned: out of memory at micro-batch 4 x 2 accumulation: re-planned to micro-batch 2 x 4 "
        "accumulation with gradient checkpointing",
        "replanned: out of memory at micro-batch 2 x 4 accumulation with gradient checkpointing: "
        "re-planned to micro-batch 1 x 8 accumulation",
        "retrying: attempt 1 ended: out of memory: 'RuntimeError: CUDA out of memory.",
        "succeeded: attempt 3 succeeded"};
    expect_events("oomy", ev, 4);
    json_t *j = get_job("oomy");
    json_t *td = json_object_get(json_object_get(json_object_get(j, "spec"), "spec"), "trainingData");
    assert_int_equal(json_integer_value(json_object_get(td, "batchSize")), 1);
    assert_int_equal(json_integer_value(json_object_get(td, "gradientAccumulation")), 8);
    json_t *plan = json_object_get(j, "plan");
    assert_int_equal(json_integer_value(json_object_get(plan, "micro_batch")), 1);
    assert_true(json_is_true(json_object_get(plan, "gradient_checkpointing")));
    json_decref(j);
    hs_resp r = hs_http(&H, "GET", "/v1/jobs/oomy/logs?attempt=2", "token-a", NULL);
    assert_non_null(strstr(r.body, "batch 2 gpus"));
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs/oomy/logs", "token-a", NULL);
    assert_non_null(strstr(r.body, "batch 1 gpus"));
    hs_resp_free(&r);
}

static void test_timeout(void **state)
{
    (void)state;
    submit_ok("slowpoke", "      - {name: STEPS, value: \"400\"}\n",
              "  timeout: {maxDuration: 1s, gracePeriod: 10s}\n");
    submit_ok("stubborn", "      - {name: STEPS, value: \"400\"}\n      - {name: MODE, value: ignore-term}\n",
              "  timeout: {maxDuration: 1s, gracePeriod: 500ms}\n");
    assert_true(hs_wait_state(&H, "token-a", "slowpoke", "timed_out", 30));
    assert_true(hs_wait_state(&H, "token-a", "stubborn", "timed_out", 30));
    const char *ev[] = {"timing_out: maxDuration 1.0s reached: SIGTERM",
                        "checkpoint: checkpoint at step", "timed_out: timed out: attempt 1 stopped"};
    expect_events("slowpoke", ev, 3);
    json_t *j = get_job("stubborn");
    json_t *x = json_object_get(j, "exit");
    assert_int_equal(json_integer_value(json_object_get(x, "signal")), 9); /* SIGKILL after the grace */
    json_decref(j);
}

static void test_preempt_and_resume(void **state)
{
    (void)state;
    /* both pause after step 10 (a checkpoint) until the urgent job is done */
    char *pause = path_join(H.dir, "pause");
    char *env = xasprintf("      - {name: STEPS, value: \"30\"}\n      - {name: PAUSE_AT, value: \"10\"}\n"
                          "      - {name: PAUSE_FILE, value: %s}\n", pause);
    submit_ok("low-1", env, NULL);
    submit_ok("low-2", env, NULL);
    free(env);
    assert_true(hs_wait_body(&H, "/v1/jobs/low-1/events", "token-a", "checkpoint at step 10", 20));
    assert_true(hs_wait_body(&H, "/v1/jobs/low-2/events", "token-a", "checkpoint at step 10", 20));
    submit_ok("urgent-1", "      - {name: STEPS, value: \"20\"}\n", "  priorityClassName: urgent\n");
    assert_true(hs_wait_state(&H, "token-a", "urgent-1", "succeeded", 30));
    hs_write(&H, "pause", "");
    free(pause);
    assert_true(hs_wait_state(&H, "token-a", "low-1", "succeeded", 60));
    assert_true(hs_wait_state(&H, "token-a", "low-2", "succeeded", 60));
    /* exactly one of the two gave way, and resumed from its checkpoint */
    char *e1 = hs_events(&H, "token-a", "low-1"), *e2 = hs_events(&H, "token-a", "low-2");
    bool p1 = strstr(e1, "preempted: preempted: attempt 1 stopped") != NULL;
    bool p2 = strstr(e2, "preempted: preempted: attempt 1 stopped") != NULL;
    assert_true(p1 != p2);
    const char *victim = p1 ? "low-1" : "low-2";
    const char *ev = p1 ? e1 : e2;
    assert_non_null(strstr(ev, "preempting: preempted: "));
    assert_non_null(strstr(ev, "urgent-1"));
    assert_non_null(strstr(ev, "succeeded: attempt 2 succeeded"));
    const char *at = strstr(ev, "checkpoint at step 10:");
    assert_non_null(at);
    assert_null(strstr(at + 1, "checkpoint at step 10:")); /* recorded once */
    char *path = xasprintf("/v1/jobs/%s/logs?attempt=2", victim);
    hs_resp r = hs_http(&H, "GET", path, "token-a", NULL);
    free(path);
    assert_non_null(strstr(r.body, "[lathe-train] resume step="));
    hs_resp_free(&r);
    json_t *j = get_job(victim);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "progress"), "step")), 30);
    json_decref(j);
    free(e1);
    free(e2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff),           cmocka_unit_test(test_shrink),
        cmocka_unit_test(test_token_hash),        cmocka_unit_test(test_builtin_trainer),
        cmocka_unit_test(test_retry_after_crash), cmocka_unit_test(test_no_retry_when_hopeless),
        cmocka_unit_test(test_oom_replan),
        cmocka_unit_test(test_timeout),           cmocka_unit_test(test_preempt_and_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
