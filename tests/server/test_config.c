/* test_config.c: the ServerConfig loader (lib/spec/spec_server.c,
 * spec_policy.c): the defaults, a complete file, the security keys (tls,
 * tokensFile, rateLimit, token scope and expiry, policy) with their round
 * trip, the tokens file, and bad files whose errors name the line, column,
 * field and fix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* tls, tokensFile, rateLimit, token scope and expiry, the policy section:
 * the values, the defaults of what is not written, and the round trip
 * through spec_server_to_json. */
static const char security_yaml[] =
    "apiVersion: lathe/v1\n"
    "kind: ServerConfig\n"
    "spec:\n"
    "  tls: {certFile: server.crt, keyFile: server.key}\n"
    "  tokensFile: tokens.yaml\n"
    "  tokens:\n"
    "    - {name: alice, sha256: " HASH_A ", team: team-a, scope: read,\n"
    "       expires: \"2027-01-31T00:00:00Z\"}\n"
    "    - {sha256: " HASH_B ", scope: admin, expires: \"2027-01-31T01:30:00.5+01:30\"}\n"
    "  rateLimit: {requestsPerSecond: 5.5, burst: 7}\n"
    "  policy:\n"
    "    paths: {models: [/srv/models], data: [/srv/data, shared/data], programs: /opt/t}\n"
    "    commands: false\n"
    "    images: [\"registry.example.com/trainers/*\"]\n"
    "    sandbox:\n"
    "      mode: required\n"
    "      user: nobody\n"
    "      group: nogroup\n"
    "      allowRoot: true\n"
    "      memory: 64Gi\n"
    "      processes: 512\n"
    "      openFiles: 1024\n"
    "      cgroup: false\n"
    "    teams:\n"
    "      - team: team-a\n"
    "        user: lathe-a\n"
    "        group: 1001\n"
    "        paths: {data: [/srv/team-a], adapters: [/srv/adapters/a]}\n"
    "        commands: true\n"
    "        images: [team-a/*]\n"
    "        serviceAccount: team-a-trainer\n"
    "        slurmAccount: acct-a\n"
    "        slurmUser: lathe-a\n"
    "      - team: team-b\n";

static void test_security(void **state)
{
    (void)state;
    spec_server *d = load_ok("apiVersion: lathe/v1\nkind: ServerConfig\n");
    assert_null(d->tls.cert_file);
    assert_null(d->tokens_file);
    assert_true(d->rate_limit.per_second == 50);
    assert_int_equal(d->rate_limit.burst, 100);
    assert_int_equal(d->policy.sandbox.mode, SPEC_SANDBOX_AUTO);
    assert_int_equal(d->policy.sandbox.processes, 4096);
    assert_int_equal(d->policy.sandbox.open_files, 65536);
    assert_int_equal(d->policy.sandbox.cgroup, TOGGLE_AUTO);
    assert_int_equal(d->policy.all.commands, TOGGLE_AUTO);
    assert_false(d->policy.sandbox.allow_root);
    assert_true(d->policy.sandbox.memory == 0);
    assert_int_equal(d->policy.n_teams, 0);
    spec_server_free(d);

    spec_server *s = load_ok(security_yaml);
    assert_string_equal(s->tls.cert_file, "server.crt");
    assert_string_equal(s->tls.key_file, "server.key");
    assert_string_equal(s->tokens_file, "tokens.yaml");
    assert_string_equal(s->tokens[0].scope, "read");
    assert_string_equal(s->tokens[0].expires, "2027-01-31T00:00:00Z");
    assert_true(s->tokens[0].expires_at == 1801353600.0);
    assert_true(s->tokens[1].admin); /* scope: admin is admin: true */
    assert_true(s->tokens[1].expires_at == 1801353600.5);
    assert_true(s->rate_limit.per_second == 5.5);
    assert_int_equal(s->rate_limit.burst, 7);
    const spec_policy *p = &s->policy;
    assert_int_equal(p->all.n_roots[SPEC_ROOT_MODELS], 1);
    assert_int_equal(p->all.n_roots[SPEC_ROOT_DATA], 2);
    assert_string_equal(p->all.roots[SPEC_ROOT_DATA][1], "shared/data");
    assert_int_equal(p->all.n_roots[SPEC_ROOT_PROGRAMS], 1);
    assert_string_equal(p->all.roots[SPEC_ROOT_PROGRAMS][0], "/opt/t");
    assert_int_equal(p->all.n_roots[SPEC_ROOT_ADAPTERS], 0);
    assert_int_equal(p->all.commands, TOGGLE_OFF);
    assert_string_equal(p->all.images[0], "registry.example.com/trainers/*");
    assert_int_equal(p->sandbox.mode, SPEC_SANDBOX_REQUIRED);
    assert_string_equal(p->sandbox.user, "nobody");
    assert_string_equal(p->sandbox.group, "nogroup");
    assert_true(p->sandbox.allow_root);
    assert_true(p->sandbox.memory == 64.0 * 1024 * 1024 * 1024);
    assert_int_equal(p->sandbox.processes, 512);
    assert_int_equal(p->sandbox.open_files, 1024);
    assert_int_equal(p->sandbox.cgroup, TOGGLE_OFF);
    assert_int_equal(p->n_teams, 2);
    const spec_policy_team *a = &p->teams[0];
    assert_string_equal(a->team, "team-a");
    assert_string_equal(a->user, "lathe-a");
    assert_string_equal(a->group, "1001");
    assert_string_equal(a->rules.roots[SPEC_ROOT_DATA][0], "/srv/team-a");
    assert_string_equal(a->rules.roots[SPEC_ROOT_ADAPTERS][0], "/srv/adapters/a");
    assert_int_equal(a->rules.commands, TOGGLE_ON);
    assert_string_equal(a->rules.images[0], "team-a/*");
    assert_string_equal(a->service_account, "team-a-trainer");
    assert_string_equal(a->slurm_account, "acct-a");
    assert_string_equal(a->slurm_user, "lathe-a");
    assert_int_equal(a->pos.line, 25);
    assert_int_equal(p->teams[1].rules.commands, TOGGLE_AUTO);
    assert_null(p->teams[1].user);
    for (int k = 0; k < SPEC_ROOT_KINDS; k++) assert_int_equal(p->teams[1].rules.n_roots[k], 0);
    assert_string_equal(spec_root_kind_name(SPEC_ROOT_PROGRAMS), "programs");
    assert_string_equal(spec_root_kind_name(SPEC_ROOT_ADAPTERS), "adapters");

    /* written back and read again: the same settings, the same JSON */
    json_t *j1 = spec_server_to_json(s);
    char *text = json_dumps(j1, 0);
    spec_server *again = load_ok(text);
    json_t *j2 = spec_server_to_json(again);
    assert_true(json_equal(j1, j2));
    assert_true(again->tokens[0].expires_at == 1801353600.0);
    assert_int_equal(again->policy.teams[0].rules.commands, TOGGLE_ON);
    assert_int_equal(again->policy.teams[1].rules.commands, TOGGLE_AUTO);
    assert_int_equal(again->policy.sandbox.cgroup, TOGGLE_OFF);
    json_t *spec = json_object_get(j1, "spec");
    assert_non_null(json_object_get(spec, "policy"));
    assert_non_null(json_object_get(spec, "rateLimit"));
    assert_non_null(json_object_get(spec, "tls"));
    json_decref(j1);
    json_decref(j2);
    free(text);
    spec_server_free(again);
    spec_server_free(s);
}

static void test_security_errors(void **state)
{
    (void)state;
    char *msg = load_bad("apiVersion: lathe/v1\n"
                         "kind: ServerConfig\n"
                         "spec:\n"
                         "  tls: {certFile: server.crt}\n"
                         "  tokens:\n"
                         "    - {sha256: " HASH_A ", team: a, scope: admin}\n"
                         "    - {sha256: " HASH_B ", admin: true, scope: read}\n"
                         "    - {sha256: " HASH_B "0, team: b, scope: write, expires: 2027-02-30T00:00:00Z}\n"
                         "    - {sha256: " HASH_A "1, team: c, expires: \"2027-01-31 00:00:00\"}\n"
                         "  rateLimit: {requestsPerSecond: -1, burst: 0}\n");
    assert_non_null(strstr(msg, "server.yaml:4:8: error: spec.tls: TLS needs both files; "
                                "keyFile is missing"));
    assert_non_null(strstr(msg, "server.yaml:6:98: error: spec.tokens[0].scope: scope admin is "
                                "for admin tokens"));
    assert_non_null(strstr(msg, "spec.tokens[1].scope: an admin token (admin: true) must have scope "
                                "admin"));
    assert_non_null(strstr(msg, "spec.tokens[2].scope: unknown value"));
    assert_non_null(strstr(msg, "spec.tokens[2].expires: not an RFC 3339 time"));
    assert_non_null(strstr(msg, "server.yaml:9:101: error: spec.tokens[3].expires: not an RFC "
                                "3339 time"));
    assert_non_null(strstr(msg, "then Z for UTC"));
    assert_non_null(strstr(msg, "spec.rateLimit.requestsPerSecond: out of range"));
    assert_non_null(strstr(msg, "spec.rateLimit.burst: out of range"));
    free(msg);

    msg = load_bad("apiVersion: lathe/v1\n"
                   "kind: ServerConfig\n"
                   "spec:\n"
                   "  policy:\n"
                   "    paths: {models: [\"\"], dta: [/x]}\n"
                   "    sandbox: {mode: maybe, processes: 0, openFiles: 1, cgroup: perhaps}\n"
                   "    teams:\n"
                   "      - {team: Team_A}\n"
                   "      - {user: x}\n"
                   "      - {team: b}\n"
                   "      - {team: b, commands: sometimes}\n"
                   "      - {team: c, users: x}\n");
    assert_non_null(strstr(msg, "spec.policy.paths.models[0]: each entry must be a name"));
    assert_non_null(strstr(msg, "did you mean data?"));
    assert_non_null(strstr(msg, "spec.policy.sandbox.mode: unknown value"));
    assert_non_null(strstr(msg, "spec.policy.sandbox.processes: out of range"));
    assert_non_null(strstr(msg, "spec.policy.sandbox.openFiles: out of range"));
    assert_non_null(strstr(msg, "spec.policy.sandbox.cgroup"));
    assert_non_null(strstr(msg, "spec.policy.teams[0].team: not a valid name"));
    assert_non_null(strstr(msg, "use \"team-a\""));
    assert_non_null(strstr(msg, "spec.policy.teams[1].team: missing required field team"));
    assert_non_null(strstr(msg, "server.yaml:11:16: error: spec.policy.teams[3].team: team b "
                                "is listed twice (also teams[2])"));
    assert_non_null(strstr(msg, "spec.policy.teams[3].commands"));
    assert_non_null(strstr(msg, "did you mean user?"));
    free(msg);
}

/* The tokens file: the same entries and checks as the config's list. */
static void test_tokens_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/lathe-tokens-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *path = xasprintf("%s/tokens.yaml", dir);
    char *text = xasprintf("tokens:\n"
                           "  - {name: bob, sha256: %s, team: team-b, scope: submit}\n"
                           "  - {sha256: %s, admin: true, expires: \"2030-01-01T00:00:00Z\"}\n",
                           HASH_A, HASH_B);
    assert_int_equal(file_write_atomic(path, text, strlen(text)), 0);
    spec_server_token *t = NULL;
    size_t n = 9;
    diag_list d;
    diag_list_init(&d);
    bool io = true;
    size_t errors = spec_server_tokens_load_file(path, &t, &n, &d, &io);
    if (errors) diag_print_all(&d, stderr);
    assert_int_equal(errors, 0);
    assert_false(io);
    assert_int_equal(n, 2);
    assert_string_equal(t[0].name, "bob");
    assert_string_equal(t[0].team, "team-b");
    assert_string_equal(t[0].scope, "submit");
    assert_int_equal(t[0].pos.line, 2);
    assert_true(t[1].admin);
    assert_true(t[1].expires_at == 1893456000.0);
    spec_server_tokens_free(t, n);
    diag_list_free(&d);
    free(text);

    /* none is a valid file */
    text = xstrdup("tokens: []\n");
    assert_int_equal(file_write_atomic(path, text, strlen(text)), 0);
    diag_list_init(&d);
    assert_int_equal(spec_server_tokens_load_file(path, &t, &n, &d, NULL), 0);
    assert_int_equal(n, 0);
    spec_server_tokens_free(t, n);
    diag_list_free(&d);
    free(text);

    /* errors name the file, line and field */
    text = xasprintf("tokens:\n"
                     "  - {sha256: %s, team: a}\n"
                     "  - {sha256: %s, team: b, expires: tomorrow}\n"
                     "  - {sha256: nope}\n"
                     "apiVersion: lathe/v1\n",
                     HASH_A, HASH_A);
    assert_int_equal(file_write_atomic(path, text, strlen(text)), 0);
    diag_list_init(&d);
    assert_true(spec_server_tokens_load_file(path, &t, &n, &d, &io) > 0);
    assert_false(io);
    assert_null(t);
    assert_int_equal(n, 0);
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d.len; i++) {
        diag_format(&d.items[i], &out);
        sb_putc(&out, '\n');
    }
    const char *m = sb_str(&out);
    char *want = xasprintf("%s:3:%d: error: tokens[1].expires: not an RFC 3339 time", path,
                           (int)(strlen("  - {sha256: , team: b, expires: ") + 64 + 1));
    assert_non_null(strstr(m, want));
    free(want);
    assert_non_null(strstr(m, "tokens[1].sha256: the same token hash as tokens[0]"));
    assert_non_null(strstr(m, "tokens[2].sha256: not a SHA-256 hash"));
    assert_non_null(strstr(m, "tokens[2]: the token names no team"));
    assert_non_null(strstr(m, "unknown field \"apiVersion\""));
    sb_free(&out);
    diag_list_free(&d);
    free(text);

    /* an empty file, a missing one */
    assert_int_equal(file_write_atomic(path, "", 0), 0);
    diag_list_init(&d);
    assert_int_equal(spec_server_tokens_load_file(path, &t, &n, &d, &io), 1);
    assert_non_null(strstr(d.items[0].message, "no document"));
    diag_list_free(&d);
    unlink(path);
    diag_list_init(&d);
    assert_int_equal(spec_server_tokens_load_file(path, &t, &n, &d, &io), 1);
    assert_true(io);
    diag_list_free(&d);
    rmdir(dir);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),    cmocka_unit_test(test_full),
        cmocka_unit_test(test_bad_token),   cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_wrong_kind),  cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_kubernetes),  cmocka_unit_test(test_security),
        cmocka_unit_test(test_security_errors), cmocka_unit_test(test_tokens_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
