/* test_share.c: GPU sharing in the server, on one virtual A100-80GB.
 *
 * Two jobs whose spec says `resources.gpu.shared: true` and whose plans
 * need a small part of the GPU run on it at the same time; a job that did
 * not ask to share waits for the whole GPU. The nodes API lists both jobs
 * on the GPU with their parts, /metrics counts the GPU allocated once, the
 * trainers get LATHE_GPU_SHARE and the CUDA MPS limits, GPU-hours count
 * the part only, and a
 * server killed with SIGKILL re-attaches to both sharing jobs with no
 * fix to its books.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

HS_GROUP_SERVER(1)

static void submit(const char *name, const char *gate, bool shared)
{
    char *env = xasprintf("      - {name: STEPS, value: \"4\"}\n      - {name: GATE, value: %s}\n", gate);
    char *job = hs_job(&H, name, env, shared ? "  resources:\n    gpu: {shared: true}\n" : NULL);
    hs_resp r = hs_http(&H, "POST", "/v1/jobs", "token-a", job);
    if (r.status != 201) fail_msg("%s: %ld %s", name, r.status, r.body);
    hs_resp_free(&r);
    free(job);
    free(env);
}


/* The jobs the nodes API lists on the cluster's only GPU. */
static json_t *gpu0_jobs(void)
{
    json_t *nodes = hs_get_json(&H, "/v1/nodes", "token-admin");
    json_t *gpu = json_array_get(json_object_get(json_array_get(json_object_get(nodes, "items"), 0), "gpus"), 0);
    json_t *jobs = json_incref(json_object_get(gpu, "jobs"));
    json_decref(nodes);
    return jobs;
}

/* The output of `lathe ARGS --server ADDR --token token-a` (caller frees). */
static char *lathe_out(const char *a1, const char *a2, const char *a3)
{
    char *lathe = xasprintf("%s/lathe", LATHE_BINARY_DIR), *out = path_join(H.dir, "cli.out");
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(127);
        dup2(fd, 1);
        close(fd);
        execl(lathe, "lathe", a1, a2, a3, "--server", H.addr, "--token", "token-a", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char err[128], *text = file_read_all(out, 1 << 20, NULL, err, sizeof err);
    assert_non_null(text);
    free(lathe);
    free(out);
    return text;
}

static double run_seconds(const char *job)
{
    hs_run *runs;
    size_t n = hs_read_runs(&H, &runs);
    double s = -1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(runs[i].job, job) && runs[i].stop > 0) s = runs[i].stop - runs[i].start;
    free(runs);
    return s;
}

static void test_two_share_one_waits(void **state)
{
    (void)state;
    char *gate = path_join(H.dir, "gate");
    submit("shared-1", gate, true);
    submit("shared-2", gate, true);
    assert_true(hs_wait_state(&H, "token-a", "shared-1", "running", 20));
    assert_true(hs_wait_state(&H, "token-a", "shared-2", "running", 20));
    submit("whole-1", gate, false);
    assert_true(hs_wait_field(&H, "token-a", "whole-1", "wait_reason", "", 20));

    /* both on GPU 0, each with its part */
    json_t *jobs = gpu0_jobs();
    assert_int_equal(json_array_size(jobs), 2);
    for (size_t i = 0; i < 2; i++) {
        double share = json_number_value(json_object_get(json_array_get(jobs, i), "share"));
        assert_true(share > 0 && share <= 0.5);
    }
    json_decref(jobs);
    json_t *job = hs_get_json(&H, "/v1/jobs/shared-1", "token-a");
    double part = json_number_value(json_object_get(json_object_get(job, "placement"), "share"));
    assert_true(part > 0 && part <= 0.5);
    json_decref(job);
    assert_true(hs_metric(&H, "lathe_gpus{state=\"allocated\",gpu_type=\"A100-80GB\"}") == 1);
    assert_true(hs_wait_body(&H, "/v1/jobs/shared-1/logs", "token-a", "cuda 0 attempt 1 share 0.", 10));
    assert_true(hs_wait_body(&H, "/v1/jobs/shared-1/logs", "token-a", " mps 0=", 10));
    assert_true(hs_wait_body(&H, "/v1/jobs/shared-1/events", "token-a", "% of it, shared)", 10));
    /* the client shows each job's part */
    char *text = lathe_out("get", "nodes", "--output=wide");
    if (!strstr(text, "0:shared-1(") || !strstr(text, "%),shared-2(")) fail_msg("get nodes:\n%s", text);
    free(text);
    text = lathe_out("describe", "job", "shared-1");
    if (!strstr(text, "% of it, shared)")) fail_msg("describe:\n%s", text);
    free(text);

    /* a server killed now finds both again, on the same GPU */
    hs_kill(&H, SIGKILL);
    assert_true(hs_start(&H));
    assert_true(hs_wait_body(&H, "/v1/jobs/shared-2/events", "token-a", "reattached", 20));
    jobs = gpu0_jobs();
    assert_int_equal(json_array_size(jobs), 2);
    json_decref(jobs);
    char *whole = hs_job_field(&H, "token-a", "whole-1", "state");
    assert_string_equal(whole, "queued");
    free(whole);

    hs_write(&H, "gate", "");
    free(gate);
    assert_true(hs_wait_state(&H, "token-a", "shared-1", "succeeded", 30));
    assert_true(hs_wait_state(&H, "token-a", "shared-2", "succeeded", 30));
    assert_true(hs_wait_state(&H, "token-a", "whole-1", "succeeded", 30));

    /* who ran beside whom, from the trainers' own record */
    hs_run *runs;
    size_t n = hs_read_runs(&H, &runs);
    const hs_run *a = NULL, *b = NULL, *w = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(runs[i].job, "team-a/shared-1")) a = &runs[i];
        if (!strcmp(runs[i].job, "team-a/shared-2")) b = &runs[i];
        if (!strcmp(runs[i].job, "team-a/whole-1")) w = &runs[i];
    }
    assert_true(a && b && w);
    assert_true(hs_overlap(a, b));
    assert_false(hs_overlap(a, w));
    assert_false(hs_overlap(b, w));
    free(runs);

    /* GPU-hours count the job's part of the GPU, not the whole GPU */
    job = hs_get_json(&H, "/v1/jobs/shared-1", "token-a");
    double gpu_hours = json_number_value(json_object_get(job, "gpu_hours"));
    json_decref(job);
    double wall = run_seconds("team-a/shared-1");
    assert_true(wall > 0);
    if (!(gpu_hours > 0 && gpu_hours * 3600 < 0.6 * wall))
        fail_msg("gpu_hours %g for a run of %g s on half a GPU at most", gpu_hours, wall);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_share_one_waits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
