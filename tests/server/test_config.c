/* test_config.c: the ServerConfig loader (lib/spec/spec_server.c): the
 * defaults, a complete file, and bad files whose errors name the line,
 * column, field and fix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define HASH_B "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"

static spec_server *load_ok(const char *text)
{
    spec_server *s = NULL;
    diag_list d;
    diag_list_init(&d);
    size_t errors = spec_server_load_string("server.yaml", text, strlen(text), &s, &d);
    if (errors) diag_print_all(&d, stderr);
    assert_int_equal(errors, 0);
    assert_non_null(s);
    diag_list_free(&d);
    return s;
}

/* Loads text that must fail; returns every diagnostic formatted, one per line. */
static char *load_bad(const char *text)
{
    spec_server *s = NULL;
    diag_list d;
    diag_list_init(&d);
    size_t errors = spec_server_load_string("server.yaml", text, strlen(text), &s, &d);
    assert_true(errors > 0);
    assert_null(s);
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d.len; i++) {
        diag_format(&d.items[i], &out);
        sb_putc(&out, '\n');
    }
    diag_list_free(&d);
    return sb_take(&out);
}

static void test_defaults(void **state)
{
    (void)state;
    spec_server *s = load_ok("apiVersion: lathe/v1\nkind: ServerConfig\n");
    assert_string_equal(s->listen, "127.0.0.1:8740");
    assert_null(s->data_dir);
    assert_null(s->cluster.file);
    assert_null(s->cluster.gpus);
    assert_int_equal(s->n_tokens, 0);
    assert_string_equal(s->scheduler.policy, "lathe");
    assert_true(s->poll_interval == 2);
    assert_true(s->limits.max_body == 1024.0 * 1024.0);
    assert_int_equal(s->retry.max_retries, 10);
    spec_server_free(s);
}

static void test_full(void **state)
{
    (void)state;
    spec_server *s = load_ok("apiVersion: lathe/v1\n"
                             "kind: ServerConfig\n"
                             "metadata: {name: lab}\n"
                             "spec:\n"
                             "  listen: 0.0.0.0:9000\n"
                             "  dataDir: /var/lib/lathe\n"
                             "  cluster: {file: cluster.yaml, gpus: none, cpuSlots: 2}\n"
                             "  tokens:\n"
                             "    - {name: alice, sha256: " HASH_A ", team: ai-training}\n"
                             "    - sha256: " HASH_B "\n"
                             "      admin: true\n"
                             "  scheduler: {policy: easy, interval: 500ms, minRunTime: 1s}\n"
                             "  retry: {maxRetries: 5, maxBackoff: 10m, jitter: 0}\n"
                             "  pollInterval: 100ms\n"
                             "  limits: {maxBodySize: 64Ki, maxConnections: 16}\n"
                             "  logs: {maxSize: 1Mi, keep: 2}\n"
                             "  trainer: {program: /usr/bin/lathe}\n");
    assert_string_equal(s->name, "lab");
    assert_string_equal(s->listen, "0.0.0.0:9000");
    assert_string_equal(s->data_dir, "/var/lib/lathe");
    assert_string_equal(s->cluster.file, "cluster.yaml");
    assert_string_equal(s->cluster.gpus, "none");
    assert_int_equal(s->cluster.cpu_slots, 2);
    assert_int_equal(s->n_tokens, 2);
    assert_string_equal(s->tokens[0].team, "ai-training");
    assert_string_equal(s->tokens[0].name, "alice");
    assert_false(s->tokens[0].admin);
    assert_true(s->tokens[1].admin);
    assert_null(s->tokens[1].team);
    assert_int_equal(s->tokens[1].pos.line, 10);
    assert_string_equal(s->scheduler.policy, "easy");
    assert_true(s->scheduler.interval == 0.5);
    assert_true(s->scheduler.min_run_time == 1);
    assert_int_equal(s->retry.max_retries, 5);
    assert_true(s->retry.max_backoff == 600);
    assert_true(s->retry.jitter == 0);
    assert_true(s->poll_interval == 0.1);
    assert_true(s->limits.max_body == 65536);
    assert_int_equal(s->limits.max_connections, 16);
    assert_true(s->logs.max_size == 1048576);
    assert_int_equal(s->logs.keep, 2);
    assert_string_equal(s->trainer_program, "/usr/bin/lathe");
    spec_server_free(s);
}

static void test_bad_token(void **state)
{
    (void)state;
    char *msg = load_bad("apiVersion: lathe/v1\n"
                         "kind: ServerConfig\n"
                         "spec:\n"
                         "  tokens:\n"
                         "    - sha256: secret-token\n"
                         "      team: a\n"
                         "    - sha256: " HASH_A "\n"
                         "    - sha256: " HASH_A "\n"
                         "      team: b\n"
                         "      admin: true\n");
    assert_non_null(strstr(msg, "server.yaml:5:15: error: spec.tokens[0].sha256: not a SHA-256 hash"));
    assert_non_null(strstr(msg, "lathe server hash-token"));
    assert_non_null(strstr(msg, "server.yaml:7:7: error: spec.tokens[1]: the token names no team"));
    assert_non_null(strstr(msg, "spec.tokens[2].admin: a token is either a team's or admin"));
    assert_non_null(strstr(msg, "spec.tokens[2].sha256: the same token hash as tokens[1]"));
    free(msg);
}

static void test_bad_fields(void **state)
{
    (void)state;
    char *msg = load_bad("apiVersion: lathe/v1\n"
                         "kind: ServerConfig\n"
                         "spec:\n"
                         "  listen: localhost\n"
                         "  pollIntervall: 1s\n"
                         "  scheduler: {policy: lathee}\n"
                         "  retry: {jitter: 2}\n");
    assert_non_null(strstr(msg, "server.yaml:4:11: error: spec.listen: not an address"));
    assert_non_null(strstr(msg, "spec.pollIntervall"));
    assert_non_null(strstr(msg, "did you mean pollInterval?"));
    assert_non_null(strstr(msg, "spec.scheduler.policy: unknown value"));
    assert_non_null(strstr(msg, "did you mean lathe?"));
    assert_non_null(strstr(msg, "spec.retry.jitter: out of range"));
    free(msg);
}

/* executor: k8s and the kubernetes section: values, defaults of what is
 * not written, the namespace of a team, and errors with their fix. */
static void test_kubernetes(void **state)
{
    (void)state;
    spec_server *d = load_ok("apiVersion: lathe/v1\nkind: ServerConfig\nspec: {}\n");
    assert_int_equal(d->executor, SPEC_EXECUTOR_LOCAL);
    assert_true(d->k8s.qps == 50 && d->k8s.burst == 100);
    assert_string_equal(d->k8s.gpu_product_label, "nvidia.com/gpu.product");
    assert_string_equal(d->k8s.rack_label, "rack-id");
    assert_int_equal(d->k8s.ttl_after_finished, 86400);
    spec_server_free(d);

    spec_server *s = load_ok("apiVersion: lathe/v1\n"
                             "kind: ServerConfig\n"
                             "spec:\n"
                             "  executor: k8s\n"
                             "  kubernetes:\n"
                             "    kubeconfig: kube/config\n"
                             "    context: lab\n"
                             "    qps: 200\n"
                             "    burst: 400\n"
                             "    namespacePrefix: ml-\n"
                             "    namespaces: {research: lab-research}\n"
                             "    image: registry.example.com/lathe:1\n"
                             "    gpuProducts: {H100-80GB: NVIDIA-H100-80GB-HBM3}\n"
                             "    modelPVC: \"\"\n"
                             "    shmSize: 16Gi\n"
                             "    runAsUser: 2000\n"
                             "    ttlSecondsAfterFinished: -1\n");
    assert_int_equal(s->executor, SPEC_EXECUTOR_K8S);
    assert_string_equal(s->k8s.kubeconfig, "kube/config");
    assert_string_equal(s->k8s.context, "lab");
    assert_true(s->k8s.qps == 200 && s->k8s.burst == 400);
    assert_string_equal(s->k8s.image, "registry.example.com/lathe:1");
    assert_int_equal(s->k8s.n_gpu_products, 1);
    assert_string_equal(s->k8s.gpu_products[0].value, "NVIDIA-H100-80GB-HBM3");
    assert_string_equal(s->k8s.model_pvc, "");
    assert_true(s->k8s.shm_size == 16.0 * 1024 * 1024 * 1024);
    assert_int_equal(s->k8s.run_as_user, 2000);
    assert_int_equal(s->k8s.ttl_after_finished, -1);
    assert_string_equal(s->k8s.data_pvc, "lathe-data"); /* not written: the default */
    char *ns = spec_k8s_namespace(&s->k8s, "research");
    assert_string_equal(ns, "lab-research");
    free(ns);
    ns = spec_k8s_namespace(&s->k8s, "product");
    assert_string_equal(ns, "ml-product");
    free(ns);
    spec_server_free(s);

    char *msg = load_bad("apiVersion: lathe/v1\n"
                         "kind: ServerConfig\n"
                         "spec:\n"
                         "  executor: kube\n"
                         "  kubernetes:\n"
                         "    qps: 0\n"
                         "    runAsUser: 0\n"
                         "    gpuProductLabel: \"\"\n"
                         "    imge: x\n");
    assert_non_null(strstr(msg, "spec.executor: unknown value"));
    assert_non_null(strstr(msg, "spec.kubernetes.qps: out of range"));
    assert_non_null(strstr(msg, "spec.kubernetes.runAsUser: out of range"));
    assert_non_null(strstr(msg, "a non-root uid"));
    assert_non_null(strstr(msg, "spec.kubernetes.gpuProductLabel: must not be empty"));
    assert_non_null(strstr(msg, "did you mean image?"));
    free(msg);
}

static void test_wrong_kind(void **state)
{
    (void)state;
    char *msg = load_bad("apiVersion: lathe/v1\nkind: LoRATrainingJob\nmetadata: {name: x}\n");
    assert_non_null(strstr(msg, "server.yaml:2:7: error: kind: not a server config"));
    free(msg);
    msg = load_bad("apiVersion: lathe/v1\nkind: ServerConfig\n---\napiVersion: lathe/v1\n"
                   "kind: ServerConfig\n");
    assert_non_null(strstr(msg, "a server config is one document"));
    free(msg);
    msg = load_bad("kind: ServerConfig\nspec: [1, 2]\n");
    assert_non_null(strstr(msg, "no apiVersion"));
    free(msg);
}

static void test_unreadable(void **state)
{
    (void)state;
    spec_server *s = NULL;
    diag_list d;
    diag_list_init(&d);
    bool io = false;
    assert_int_equal(spec_server_load_file("/nonexistent/server.yaml", &s, &d, &io), 1);
    assert_true(io);
    assert_null(s);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),    cmocka_unit_test(test_full),
        cmocka_unit_test(test_bad_token),   cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_wrong_kind),  cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_kubernetes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
