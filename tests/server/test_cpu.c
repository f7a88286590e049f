/* test_cpu.c: a server with no GPU and no token in its config, as on a
 * laptop: it makes an admin token in DATA/admin-token, runs every job in
 * one of its CPU slots (here one) in priority then submission order, and
 * says why the others wait. Also: a second server on the same data folder
 * is refused while the first runs, and a config error names its line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

static char *read_token(const hs *h)
{
    char *p = xasprintf("%s/data/admin-token", h->dir), err[128];
    char *t = file_read_all(p, 1024, NULL, err, sizeof err);
    free(p);
    assert_non_null(t);
    t[strcspn(t, "\n")] = '\0';
    return t;
}

static void test_cpu_slots(void **state)
{
    (void)state;
    hs h;
    hs_init(&h, 1, NULL);
    char *policy = hs_policy();
    char *cfg = xasprintf("apiVersion: lathe/v1\n"
                          "kind: ServerConfig\n"
                          "spec:\n"
                          "  listen: 127.0.0.1:0\n"
                          "  dataDir: data\n"
                          "  cluster: {gpus: none, cpuSlots: 1}\n"
                          "  limits: {connectionTimeout: 1s}\n"
                          "  pollInterval: 50ms\n"
                          "%s",
                          policy);
    hs_write(&h, "server.yaml", cfg);
    free(cfg);
    free(policy);
    assert_true(hs_start(&h));
    char *admin = read_token(&h);
    assert_int_equal(strlen(admin), 64);
    const char *env = "      - {name: STEPS, value: \"6\"}\n";
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "cpu-%d", i);
        char *job = hs_job(&h, name, env, NULL);
        hs_resp r = hs_http(&h, "POST", "/v1/jobs", admin, job);
        assert_int_equal(r.status, 201);
        assert_string_equal(json_string_value(json_object_get(r.json, "team")), "default");
        hs_resp_free(&r);
        free(job);
    }
    assert_true(hs_wait_field(&h, admin, "cpu-2", "wait_reason", "all 1 CPU slots are in use", 10));
    hs_resp r = hs_http(&h, "GET", "/v1/nodes", admin, NULL);
    assert_true(json_is_true(json_object_get(r.json, "cpu_mode")));
    assert_int_equal(json_integer_value(json_object_get(r.json, "cpu_slots")), 1);
    hs_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "cpu-%d", i);
        assert_true(hs_wait_state(&h, admin, name, "succeeded", 30));
    }
    /* one slot: the runs followed each other, in submission order */
    hs_run *runs;
    size_t n = hs_read_runs(&h, &runs);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        char job[64];
        snprintf(job, sizeof job, "default/cpu-%zu", i);
        assert_string_equal(runs[i].job, job);
        if (i) assert_true(runs[i].start >= runs[i - 1].stop);
    }
    free(runs);
    r = hs_http(&h, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(r.body, "lathe_cpu_slots{state=\"free\"} 1"));
    hs_resp_free(&r);

    /* following a log outlives the idle timeout (1 s) while the trainer is quiet */
    char *job = hs_job(&h, "quiet", "      - {name: STEPS, value: \"2\"}\n      - {name: SLEEP, value: \"1.5\"}\n", NULL);
    r = hs_http(&h, "POST", "/v1/jobs", admin, job);
    assert_int_equal(r.status, 201);
    hs_resp_free(&r);
    free(job);
    assert_true(hs_wait_state(&h, admin, "quiet", "running", 10));
    r = hs_http(&h, "GET", "/v1/jobs/quiet/logs?follow=1", admin, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "[lathe-train] done step=2"));
    hs_resp_free(&r);

    /* a second server on the same data folder is refused */
    char *lathe = xasprintf("%s/lathe", LATHE_BINARY_DIR), *log = path_join(h.dir, "second.log");
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        if (chdir(h.dir) != 0) _exit(127);
        execl(lathe, "lathe", "server", "--config", h.config, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), LT_EXIT_UNAVAILABLE);
    char err[128], *text = file_read_all(log, 1 << 16, NULL, err, sizeof err);
    assert_non_null(strstr(text, "another lathe server"));
    free(text);
    free(log);
    free(lathe);
    free(admin);
    hs_finish(&h);
}

static void test_bad_config(void **state)
{
    (void)state;
    hs h;
    hs_init(&h, 1, NULL);
    hs_write(&h, "server.yaml", "apiVersion: lathe/v1\nkind: ServerConfig\nspec:\n  pollInterval: fast\n");
    char *lathe = xasprintf("%s/lathe", LATHE_BINARY_DIR), *log = path_join(h.dir, "bad.log");
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        execl(lathe, "lathe", "server", "--config", h.config, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_int_equal(WEXITSTATUS(status), LT_EXIT_INVALID);
    char err[128], *text = file_read_all(log, 1 << 16, NULL, err, sizeof err);
    assert_non_null(strstr(text, "server.yaml:4:17: error: spec.pollInterval: not a duration"));
    free(text);
    free(log);
    free(lathe);
    hs_free(&h);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_slots),
        cmocka_unit_test(test_bad_config),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
