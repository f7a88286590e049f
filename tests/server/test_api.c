/* test_api.c: the HTTP API of a real `lathe server` (a child process on a
 * loopback port chosen by the system, with a temporary data folder and a
 * 2-GPU virtual cluster): health, metrics, auth and isolation between two
 * teams, submit -> schedule -> run a fake trainer -> succeed with events,
 * logs (whole, tail, follow) and progress, validation errors with the
 * diagnostics of `lathe validate`, idempotent submission and conflicts,
 * size limits, listing with filters and pages, cancel of queued and
 * running jobs, delete, experiments with maxConcurrent, nodes, teams and
 * priority classes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

HS_GROUP_SERVER(2)

/* Submits a job as team-a; returns the status. */
static long submit(const char *token, const char *body)
{
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", token, body);
    long st = r.status;
    if (st >= 300) fprintf(stderr, "submit: %ld %s\n", st, r.body);
    hs_resp_free(&r);
    return st;
}

static void test_health(void **state)
{
    (void)state;
    hs_resp r = hs_http(&H, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r.status, 200);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/readyz", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")), "ready");
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "lathe_up 1\n"));
    assert_non_null(strstr(r.body, "lathe_gpus{state=\"free\",gpu_type=\"A100-80GB\"} 2"));
    assert_non_null(strstr(r.body, "# TYPE lathe_scheduling_pass_seconds histogram"));
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/nowhere", NULL, NULL);
    assert_int_equal(r.status, 404);
    hs_resp_free(&r);
}

static void test_auth(void **state)
{
    (void)state;
    hs_resp r = hs_http(&H, "GET", "/v1/jobs", NULL, NULL);
    assert_int_equal(r.status, 401);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r.json, "error"), "code")),
                        "unauthenticated");
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs", "not-a-token", NULL);
    assert_int_equal(r.status, 401);
    hs_resp_free(&r);
    r = hs_http(&H, "PUT", "/v1/jobs", "token-a", NULL);
    assert_int_equal(r.status, 405);
    hs_resp_free(&r);
}

static void test_submit_run_succeed(void **state)
{
    (void)state;
    char *job = hs_job(&H, "job-ok", NULL, NULL);
    assert_int_equal(submit("token-a", job), 201);
    assert_true(hs_wait_state(&H, "token-a", "job-ok", "succeeded", 30));
    /* the same spec again: the same job (idempotent) */
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", "token-a", job);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "state")), "succeeded");
    hs_resp_free(&r);
    free(job);
    /* another spec under the name: conflict */
    job = hs_job(&H, "job-ok", NULL, "  lora: {rank: 8}\n");
    assert_int_equal(submit("token-a", job), 409);
    free(job);

    char *ev = hs_events(&H, "token-a", "job-ok");
    assert_non_null(strstr(ev, "submitted: submitted by user:team-a"));
    assert_non_null(strstr(ev, "scheduled: placed on node-1 GPUs [0]"));
    assert_non_null(strstr(ev, "started: attempt 1 started"));
    assert_non_null(strstr(ev, "checkpoint: checkpoint at step 5"));
    assert_non_null(strstr(ev, "succeeded: attempt 1 succeeded"));
    free(ev);

    r = hs_http(&H, "GET", "/v1/jobs/job-ok", "token-a", NULL);
    json_t *j = r.json;
    assert_int_equal(json_integer_value(json_object_get(j, "attempt")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "progress"), "step")), 10);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "exit"), "code")), 0);
    assert_int_equal(json_array_size(json_object_get(j, "checkpoints")), 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "plan"), "gpu_type")),
                        "A100-80GB");
    assert_true(json_real_value(json_object_get(j, "gpu_hours")) > 0);
    hs_resp_free(&r);

    r = hs_http(&H, "GET", "/v1/jobs/job-ok/logs", "token-a", NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "batch 1 gpus 0 cuda 0 attempt 1"));
    assert_non_null(strstr(r.body, "[lathe-train] done step=10"));
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs/job-ok/logs?tail=1", "token-a", NULL);
    assert_true(str_starts_with(r.body, "[lathe-train] done step=10 loss=1.0 adapter="));
    assert_null(strchr(r.body, '\n') ? strchr(strchr(r.body, '\n') + 1, '\n') : NULL);
    hs_resp_free(&r);
}

static void test_isolation(void **state)
{
    (void)state;
    hs_resp r = hs_http(&H, "GET", "/v1/jobs/job-ok", "token-b", NULL);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "no job named job-ok"));
    hs_resp_free(&r);
    r = hs_http(&H, "POST", "/v1/jobs/job-ok/cancel", "token-b", NULL);
    assert_int_equal(r.status, 404);
    hs_resp_free(&r);
    r = hs_http(&H, "DELETE", "/v1/jobs/job-ok", "token-b", NULL);
    assert_int_equal(r.status, 404);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs/job-ok/logs", "token-b", NULL);
    assert_int_equal(r.status, 404);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs", "token-b", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 0);
    hs_resp_free(&r);
    /* team-b may use the same name for its own job */
    char *job = hs_job(&H, "job-ok", NULL, "  lora: {rank: 8}\n");
    assert_int_equal(submit("token-b", job), 201);
    free(job);
    /* a team-b token cannot submit for team-a */
    job = hs_job(&H, "sneaky", NULL, "  team: team-a\n");
    hs_resp rr = hs_http(&H, "POST", "/v1/jobs", "token-b", job);
    assert_int_equal(rr.status, 422);
    assert_non_null(strstr(rr.body, "the job names another team"));
    hs_resp_free(&rr);
    free(job);
    /* admin sees both, and must say which */
    r = hs_http(&H, "GET", "/v1/jobs/job-ok", "token-admin", NULL);
    assert_int_equal(r.status, 409);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs/job-ok?team=team-b", "token-admin", NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "team")), "team-b");
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/teams", "token-b", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/teams", "token-admin", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
    hs_resp_free(&r);
    assert_true(hs_wait_state(&H, "token-b", "job-ok", "succeeded", 30));
}

static void test_invalid(void **state)
{
    (void)state;
    const char *bad = "apiVersion: lathe/v1\n"
                      "kind: LoRATrainingJob\n"
                      "metadata: {name: bad-job}\n"
                      "spec:\n"
                      "  baseModel: {name: Qwen2.5-0.5B}\n"
                      "  lora:\n"
                      "    rank: 0\n"
                      "    targetModule: [q_proj]\n"
                      "  trainingData: {datasetPath: /x.jsonl}\n";
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", "token-a", bad);
    assert_int_equal(r.status, 422);
    json_t *e = json_object_get(r.json, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "invalid");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "request.yaml has 2 errors");
    json_t *d = json_object_get(e, "diagnostics");
    assert_int_equal(json_array_size(d), 2);
    bool rank = false, typo = false;
    for (size_t i = 0; i < json_array_size(d); i++) {
        json_t *x = json_array_get(d, i);
        const char *path = json_string_value(json_object_get(x, "path"));
        if (!strcmp(path, "spec.lora.rank")) {
            rank = json_integer_value(json_object_get(x, "line")) == 7 &&
                   json_integer_value(json_object_get(x, "column")) == 11;
        }
        if (!strcmp(path, "spec.lora.targetModule"))
            typo = strstr(json_string_value(json_object_get(x, "suggestion")), "targetModules") != NULL;
    }
    assert_true(rank);
    assert_true(typo);
    hs_resp_free(&r);
    /* the file name the client gives */
    r = hs_http_ex(&H, "POST", "/v1/jobs", "token-a", "kind: Nonsense\n", "application/yaml", 10);
    assert_int_equal(r.status, 422);
    hs_resp_free(&r);
    /* malformed JSON */
    r = hs_http_ex(&H, "POST", "/v1/jobs", "token-a", "{\"kind\": ", "application/json", 10);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "malformed JSON at line 1"));
    hs_resp_free(&r);
    /* JSON is the same structure */
    r = hs_http_ex(&H, "POST", "/v1/jobs", "token-a",
                   "{\"apiVersion\": \"lathe/v1\", \"kind\": \"LoRATrainingJob\", \"metadata\": "
                   "{\"name\": \"json-job\"}, \"spec\": {\"baseModel\": {\"name\": \"Qwen2.5-0.5B\"}, "
                   "\"lora\": {\"rank\": 4096}, \"trainingData\": {\"datasetPath\": \"/x.jsonl\"}}}",
                   "application/json", 10);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "spec.lora.rank"));
    hs_resp_free(&r);
    /* a job the cluster can never hold: 4 GPUs on a 2-GPU cluster */
    char *big = hs_job(&H, "too-big", NULL, "  resources: {gpu: {count: 4, type: A100-80GB}}\n");
    r = hs_http(&H, "POST", "/v1/jobs", "token-a", big);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "the cluster can never run this job"));
    hs_resp_free(&r);
    free(big);
    /* an unknown priority class */
    big = hs_job(&H, "no-class", NULL, "  priorityClassName: urgnt\n");
    r = hs_http(&H, "POST", "/v1/jobs", "token-a", big);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "did you mean urgent?"));
    hs_resp_free(&r);
    free(big);
    /* over the body limit */
    size_t n = 1100 * 1024;
    char *huge = xmalloc(n + 1);
    memset(huge, '#', n);
    huge[n] = '\0';
    r = hs_http(&H, "POST", "/v1/jobs", "token-a", huge);
    assert_int_equal(r.status, 413);
    hs_resp_free(&r);
    free(huge);
}

static void test_cancel_delete_list(void **state)
{
    (void)state;
    const char *slow = "      - {name: STEPS, value: \"400\"}\n";
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "long-%d", i);
        char *job = hs_job(&H, name, slow, NULL);
        assert_int_equal(submit("token-a", job), 201);
        free(job);
    }
    assert_true(hs_wait_state(&H, "token-a", "long-0", "running", 20));
    assert_true(hs_wait_state(&H, "token-a", "long-1", "running", 20));
    /* the third waits, and says why */
    assert_true(hs_wait_field(&H, "token-a", "long-2", "wait_reason", "A100-80GB", 10));
    assert_true(hs_wait_body(&H, "/metrics", NULL, "lathe_queue_length{team=\"team-a\",reason=\"", 10));
    assert_true(hs_wait_body(&H, "/metrics", NULL, "lathe_job_loss{job=\"long-0\",team=\"team-a\"}", 10));
    /* the fake trainer evaluates at its checkpoints (every 5 steps) */
    assert_true(hs_wait_body(&H, "/metrics", NULL, "lathe_job_eval_loss{job=\"long-0\",team=\"team-a\"}", 10));
    assert_true(hs_wait_body(&H, "/metrics", NULL, "lathe_job_best_eval_loss{job=\"long-0\",team=\"team-a\"} 2.", 10));
    assert_true(hs_wait_body(&H, "/metrics", NULL, "lathe_gpus{state=\"allocated\",gpu_type=\"A100-80GB\"} 2\n"
                             "lathe_gpus{state=\"free\",gpu_type=\"A100-80GB\"} 0", 10));
    hs_resp r = hs_http(&H, "GET", "/v1/nodes", "token-b", NULL);
    json_t *gpus = json_object_get(json_array_get(json_object_get(r.json, "items"), 0), "gpus");
    assert_int_equal(json_array_size(gpus), 2);
    json_t *user = json_array_get(json_object_get(json_array_get(gpus, 0), "jobs"), 0);
    assert_string_equal(json_string_value(json_object_get(user, "team")), "team-a");
    assert_true(json_is_null(json_object_get(user, "name"))); /* another team's job */
    hs_resp_free(&r);

    /* listing: pages, filters */
    r = hs_http(&H, "GET", "/v1/jobs?limit=2", "token-a", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
    const char *tok = json_string_value(json_object_get(r.json, "next_page_token"));
    assert_non_null(tok);
    char *path = xasprintf("/v1/jobs?limit=2&page_token=%s", tok);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", path, "token-a", NULL);
    free(path);
    assert_int_equal(r.status, 200);
    assert_true(json_array_size(json_object_get(r.json, "items")) >= 1);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs?state=running&state=queued", "token-a", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 3);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs?state=sleeping", "token-a", NULL);
    assert_int_equal(r.status, 400);
    hs_resp_free(&r);

    /* cancel: queued -> cancelled at once; running -> stopping -> cancelled */
    r = hs_http(&H, "POST", "/v1/jobs/long-2/cancel", "token-a", NULL);
    assert_int_equal(r.status, 202);
    assert_string_equal(json_string_value(json_object_get(r.json, "state")), "cancelled");
    hs_resp_free(&r);
    r = hs_http(&H, "POST", "/v1/jobs/long-0/cancel", "token-a", NULL);
    assert_int_equal(r.status, 202);
    assert_string_equal(json_string_value(json_object_get(r.json, "state")), "stopping");
    hs_resp_free(&r);
    r = hs_http(&H, "DELETE", "/v1/jobs/long-1", "token-a", NULL);
    assert_int_equal(r.status, 409);
    hs_resp_free(&r);
    assert_true(hs_wait_state(&H, "token-a", "long-0", "cancelled", 20));
    char *ev = hs_events(&H, "token-a", "long-0");
    assert_non_null(strstr(ev, "cancelling: cancel requested by user:team-a"));
    assert_non_null(strstr(ev, "checkpoint: checkpoint at step"));
    assert_non_null(strstr(ev, "cancelled: cancelled: attempt 1 stopped"));
    free(ev);
    r = hs_http(&H, "POST", "/v1/jobs/long-0/cancel", "token-a", NULL);
    assert_int_equal(r.status, 409);
    hs_resp_free(&r);
    r = hs_http(&H, "DELETE", "/v1/jobs/long-0", "token-a", NULL);
    assert_int_equal(r.status, 204);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs/long-0", "token-a", NULL);
    assert_int_equal(r.status, 404);
    hs_resp_free(&r);

    /* follow the running job's log until it ends (cancel it meanwhile) */
    r = hs_http(&H, "POST", "/v1/jobs/long-1/cancel", "token-a", NULL);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/jobs/long-1/logs?follow=1", "token-a", NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "(SIGTERM): checkpoint saved"));
    hs_resp_free(&r);
    assert_true(hs_wait_state(&H, "token-a", "long-1", "cancelled", 20));

    /* delete with ?purge=1: the job's folder (DATA/jobs/ID) goes too */
    r = hs_http(&H, "GET", "/v1/jobs/long-1", "token-a", NULL);
    const char *ck = json_string_value(json_object_get(json_array_get(json_object_get(r.json, "checkpoints"), 0), "path"));
    assert_non_null(ck);
    const char *at = strstr(ck, "/data/jobs/");
    assert_non_null(at);
    char *folder = xstrndup(ck, (size_t)(at - ck) + strlen("/data/jobs/") + strcspn(at + strlen("/data/jobs/"), "/"));
    hs_resp_free(&r);
    assert_true(dir_exists(folder));
    r = hs_http(&H, "DELETE", "/v1/jobs/long-1?purge=maybe", "token-a", NULL);
    assert_int_equal(r.status, 400);
    hs_resp_free(&r);
    assert_true(dir_exists(folder));
    r = hs_http(&H, "DELETE", "/v1/jobs/long-1?purge=1", "token-a", NULL);
    assert_int_equal(r.status, 204);
    hs_resp_free(&r);
    assert_false(dir_exists(folder));
    free(folder);
}

static void test_experiment(void **state)
{
    (void)state;
    char *exp = xasprintf("apiVersion: lathe/v1\n"
                          "kind: LoRAExperiment\n"
                          "metadata: {name: sweep}\n"
                          "spec:\n"
                          "  maxConcurrent: 1\n"
                          "  template:\n"
                          "    baseModel: {name: Qwen2.5-0.5B}\n"
                          "    trainingData: {datasetPath: %s/data.jsonl, samples: 100}\n"
                          "    trainer:\n"
                          "      command: [/bin/sh, %s/fake.sh]\n"
                          "      env: [{name: RECORD, value: %s}]\n"
                          "  matrix:\n"
                          "    lora.rank: [4, 8]\n",
                          H.dir, H.dir, H.record);
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", "token-a", exp);
    assert_int_equal(r.status, 201);
    assert_int_equal(json_array_size(json_object_get(r.json, "jobs")), 2);
    const char *first = json_string_value(json_object_get(json_array_get(json_object_get(r.json, "jobs"), 0), "name"));
    const char *second = json_string_value(json_object_get(json_array_get(json_object_get(r.json, "jobs"), 1), "name"));
    char *a = xstrdup(first), *b = xstrdup(second);
    hs_resp_free(&r);
    r = hs_http(&H, "POST", "/v1/jobs", "token-a", exp);
    assert_int_equal(r.status, 200);
    hs_resp_free(&r);
    assert_true(hs_wait_state(&H, "token-a", a, "succeeded", 30));
    assert_true(hs_wait_state(&H, "token-a", b, "succeeded", 30));
    /* maxConcurrent 1: the two never ran at the same time */
    hs_run *runs;
    size_t n = hs_read_runs(&H, &runs), seen = 0;
    char ja[160], jb[160];
    snprintf(ja, sizeof ja, "team-a/%s", a);
    snprintf(jb, sizeof jb, "team-a/%s", b);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < n; k++)
            if (!strcmp(runs[i].job, ja) && !strcmp(runs[k].job, jb)) {
                seen++;
                assert_false(hs_overlap(&runs[i], &runs[k]));
            }
    assert_int_equal(seen, 1);
    free(runs);
    r = hs_http(&H, "GET", "/v1/experiments", "token-a", NULL);
    json_t *it = json_array_get(json_object_get(r.json, "items"), 0);
    assert_string_equal(json_string_value(json_object_get(it, "name")), "sweep");
    assert_int_equal(json_integer_value(json_object_get(it, "jobs")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(it, "states"), "succeeded")), 2);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/experiments/sweep", "token-a", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "jobs")), 2);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/experiments/sweep", "token-b", NULL);
    assert_int_equal(r.status, 404);
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/priorityclasses", "token-b", NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
    hs_resp_free(&r);
    free(a);
    free(b);
    free(exp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health),           cmocka_unit_test(test_auth),
        cmocka_unit_test(test_submit_run_succeed), cmocka_unit_test(test_isolation),
        cmocka_unit_test(test_invalid),          cmocka_unit_test(test_cancel_delete_list),
        cmocka_unit_test(test_experiment),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    return rc;
}
