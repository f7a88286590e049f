/* test_client_cli.c: the `lathe` client commands against a real server.
 *
 * One `lathe server` (the built binary, a child process) runs in a
 * temporary folder on a port the system chooses, with a virtual cluster of
 * two GPUs, teams alpha and beta (a token each) and an admin token, short
 * poll intervals, and jobs whose trainer is a small shell script printing
 * the built-in trainer's progress lines (fake.sh). Each test runs the built
 * `lathe` as a user would and checks exit codes and output: every output
 * format (json parsed with jansson, yaml with libyaml, wide), the error
 * paths (no server -> 5 naming the address; bad or missing token; invalid
 * spec -> diagnostics with file:line:col), `wait` exit codes, `logs -f`
 * ending with the job, describe, cancel, top, team isolation, and the
 * configuration's precedence (flags, environment, config file).
 */
#include "client/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define LATHE LATHE_BINARY_DIR "/lathe"
#define ADMIN_TOKEN "admin-secret"
#define ALPHA_TOKEN "alpha-secret"
#define BETA_TOKEN "beta-secret"

/* The fixture every test shares. */
typedef struct fixture {
    char dir[64];
    char server[128];  /* "http://127.0.0.1:PORT" */
    pid_t server_pid;
} fixture;

/* What one command did. */
typedef struct result {
    int code; /* exit status; 128 + signal; -1 when it was killed for taking too long */
    char *out, *err;
} result;

static void result_free(result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

/* ---- running commands ---- */

/* Reads both pipes until they close or the deadline passes. */
static bool drain(int fo, int fe, sb *out, sb *err, double deadline)
{
    struct pollfd p[2] = {{fo, POLLIN, 0}, {fe, POLLIN, 0}};
    int open_fds = 2;
    char buf[4096];
    while (open_fds > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double left = deadline - (ts.tv_sec + ts.tv_nsec / 1e9);
        if (left <= 0) return false;
        if (poll(p, 2, (int)(left * 1000) + 1) < 0 && errno != EINTR) return false;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(p[i].fd, buf, sizeof buf);
            if (n > 0) sb_putn(i == 0 ? out : err, buf, (size_t)n);
            else if (n == 0 || errno != EINTR) {
                p[i].fd = -1;
                open_fds--;
            }
        }
    }
    return true;
}

/* Runs argv (NULL-terminated; argv[0] a path) with extra environment
 * entries ("NAME=value", or "NAME" to unset), at most `seconds`. */
static result run_env(double seconds, const char *const *env, const char *const *argv)
{
    int po[2], pe[2];
    assert_int_equal(pipe(po), 0);
    assert_int_equal(pipe(pe), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        for (size_t i = 0; env && env[i]; i++) {
            const char *eq = strchr(env[i], '=');
            if (!eq) {
                unsetenv(env[i]);
                continue;
            }
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
            setenv(name, eq + 1, 1);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    sb out, err;
    sb_init(&out);
    sb_init(&err);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    bool in_time = drain(po[0], pe[0], &out, &err, ts.tv_sec + ts.tv_nsec / 1e9 + seconds);
    if (!in_time) kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    close(po[0]);
    close(pe[0]);
    result r = {.code = !in_time ? -1
                        : WIFEXITED(status) ? WEXITSTATUS(status)
                                            : 128 + WTERMSIG(status)};
    sb_putc(&out, 0);
    sb_putc(&err, 0);
    r.out = sb_take(&out);
    r.err = sb_take(&err);
    return r;
}

/* `lathe ARGS...` against the fixture's server with a token (NULL: none). */
static result lathe_as(const fixture *f, const char *token, const char *first, ...)
{
    const char *argv[64];
    size_t n = 0;
    argv[n++] = LATHE;
    argv[n++] = first;
    va_list ap;
    va_start(ap, first);
    for (const char *a; (a = va_arg(ap, const char *)) && n < 58;) argv[n++] = a;
    va_end(ap);
    argv[n++] = "--server";
    argv[n++] = f->server;
    if (token) {
        argv[n++] = "--token";
        argv[n++] = token;
    }
    argv[n] = NULL;
    return run_env(120, NULL, argv);
}

#define LATHE_ADMIN(f, ...) lathe_as(f, ADMIN_TOKEN, __VA_ARGS__, (const char *)NULL)
#define LATHE_ALPHA(f, ...) lathe_as(f, ALPHA_TOKEN, __VA_ARGS__, (const char *)NULL)
#define LATHE_BETA(f, ...) lathe_as(f, BETA_TOKEN, __VA_ARGS__, (const char *)NULL)

/* Prints a result when a check is about to fail. */
static void show(const result *r)
{
    fprintf(stderr, "exit %d\n--- stdout:\n%s--- stderr:\n%s---\n", r->code, r->out, r->err);
}

#define EXPECT_CODE(r, c)                                                                       \
    do {                                                                                        \
        if ((r).code != (c)) show(&(r));                                                        \
        assert_int_equal((r).code, (c));                                                        \
    } while (0)
#define EXPECT_IN(hay, needle)                                                                  \
    do {                                                                                        \
        if (!strstr((hay), (needle))) fprintf(stderr, "missing '%s' in:\n%s\n", (needle), (hay)); \
        assert_non_null(strstr((hay), (needle)));                                               \
    } while (0)

/* ---- the fixture's files ---- */

static void write_text(const char *dir, const char *name, const char *text)
{
    char *p = path_join(dir, name);
    assert_int_equal(file_write_atomic(p, text, strlen(text)), 0);
    free(p);
}

/* The fake trainer: fake.sh STEPS PAUSE EXIT. Prints the built-in trainer's
 * lines (docs/trainer.md), a checkpoint and an eval loss (100 - step + 0.5)
 * every 2 steps, stops on SIGTERM
 * with exit 143 like the real one. */
static const char fake_trainer[] =
    "#!/bin/sh\n"
    "steps=${1:-5}; pause=${2:-0.05}; code=${3:-0}; i=0\n"
    "trap 'echo \"[lathe-train] stopped step=$i (SIGTERM): checkpoint saved\"; exit 143' TERM\n"
    "echo \"[lathe-train] start step=0/$steps model=fake mode=lora\"\n"
    "while [ $i -lt $steps ]; do\n"
    "  i=$((i+1)); sleep $pause\n"
    "  ev=''; if [ $((i % 2)) -eq 0 ]; then ev=\" eval_loss=$((100 - i)).5\"; fi\n"
    "  echo \"[lathe-train] step=$i/$steps epoch=0.1 loss=2.$i lr=1.0e-04 tokens_per_s=100.0 "
    "eta_s=1$ev\"\n"
    "  if [ $((i % 2)) -eq 0 ]; then mkdir -p \"$CHECKPOINT_DIR/checkpoint-$i\"; "
    "echo \"[lathe-train] checkpoint step=$i path=$CHECKPOINT_DIR/checkpoint-$i\"; fi\n"
    "done\n"
    "if [ \"$code\" = 0 ]; then echo \"[lathe-train] done step=$steps loss=2.0 "
    "adapter=$CHECKPOINT_DIR/final\"; fi\n"
    "exit $code\n";

/* A job for team `team` whose trainer runs fake.sh with the given steps,
 * pause per step and exit code; extra is more YAML under spec ("" = a
 * timeout section with a grace period of 5 s; extra replaces it). */
static void write_job(const fixture *f, const char *file, const char *name, const char *team,
                      int steps, const char *pause, int code, const char *extra)
{
    char *text = xasprintf("apiVersion: lathe/v1\n"
                           "kind: LoRATrainingJob\n"
                           "metadata:\n"
                           "  name: %s\n"
                           "spec:\n"
                           "  team: %s\n"
                           "  baseModel:\n"
                           "    name: Qwen2.5-0.5B\n"
                           "  trainingData:\n"
                           "    datasetPath: %s/data.jsonl\n"
                           "    samples: 100\n"
                           "  hyperparams:\n"
                           "    maxSteps: %d\n"
                           "  retryPolicy:\n"
                           "    maxRetries: 0\n"
                           "%s"
                           "  trainer:\n"
                           "    command: [/bin/sh, %s/fake.sh, \"%d\", \"%s\", \"%d\"]\n",
                           name, team, f->dir, steps,
                           *extra ? extra : "  timeout:\n    gracePeriod: 5s\n", f->dir, steps,
                           pause, code);
    write_text(f->dir, file, text);
    free(text);
}

/* A path inside the fixture's folder (caller frees). */
static char *fpath(const fixture *f, const char *name)
{
    return path_join(f->dir, name);
}

/* sha256 of a token through `lathe server hash-token`. */
static char *hash_token(const char *token)
{
    const char *argv[] = {LATHE, "server", "hash-token", token, NULL};
    result r = run_env(30, NULL, argv);
    EXPECT_CODE(r, 0);
    r.out[strcspn(r.out, "\r\n")] = 0;
    char *h = xstrdup(r.out);
    result_free(&r);
    return h;
}

static void write_config(fixture *f)
{
    write_text(f->dir, "cluster.yaml",
               "apiVersion: lathe/v1\nkind: Cluster\nmetadata:\n  name: test\nspec:\n"
               "  gpuTypes:\n    - name: L4-24GB\n      memory: 24Gi\n      pricePerHour: 0.80\n"
               "  nodes:\n    - name: node-1\n      gpuType: L4-24GB\n      gpus: 2\n"
               "  teams:\n    - name: alpha\n      quota: {L4-24GB: 1}\n"
               "    - name: beta\n      quota: {L4-24GB: 1}\n");
    write_text(f->dir, "data.jsonl", "{\"instruction\": \"hi\", \"output\": \"hello\"}\n");
    write_text(f->dir, "fake.sh", fake_trainer);
    char *ha = hash_token(ADMIN_TOKEN), *h1 = hash_token(ALPHA_TOKEN), *h2 = hash_token(BETA_TOKEN);
    char *cfg = xasprintf("apiVersion: lathe/v1\nkind: ServerConfig\nmetadata:\n  name: test\n"
                          "spec:\n  listen: 127.0.0.1:0\n  dataDir: data\n"
                          "  cluster:\n    file: cluster.yaml\n"
                          "  scheduler:\n    interval: 200ms\n    minRunTime: 1s\n"
                          "  pollInterval: 100ms\n"
                          "  tokens:\n"
                          "    - {name: admin, sha256: %s, admin: true}\n"
                          "    - {name: alpha, sha256: %s, team: alpha}\n"
                          "    - {name: beta, sha256: %s, team: beta}\n"
                          /* the fake trainer and its data are in the test folder (the
                           * config's "."); it records outside its job folder, so no
                           * sandbox (tests/security has the sandbox's own tests) */
                          "  policy:\n"
                          "    paths: {data: [.], programs: [.]}\n"
                          "    sandbox: {mode: off}\n",
                          ha, h1, h2);
    write_text(f->dir, "server.yaml", cfg);
    free(cfg);
    free(ha);
    free(h1);
    free(h2);
}

static void start_server(fixture *f)
{
    char *cfg = fpath(f, "server.yaml"), *log = fpath(f, "server.log");
    f->server_pid = fork();
    assert_true(f->server_pid >= 0);
    if (f->server_pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0) _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(LATHE, LATHE, "server", "--config", cfg, (char *)NULL);
        _exit(127);
    }
    char *addr_file = fpath(f, "data/server.addr");
    bool up = false;
    for (int i = 0; i < 600 && !up; i++) {
        char err[128];
        size_t len;
        char *a = file_read_all(addr_file, 256, &len, err, sizeof err);
        if (a && len > 0) {
            a[strcspn(a, "\r\n")] = 0;
            snprintf(f->server, sizeof f->server, "http://%s", a);
            up = true;
        }
        free(a);
        if (!up) usleep(50000);
    }
    if (!up) {
        char err[128];
        size_t len;
        char *t = file_read_all(log, 1 << 20, &len, err, sizeof err);
        fprintf(stderr, "the server did not start:\n%s\n", t ? t : err);
        free(t);
    }
    assert_true(up);
    free(addr_file);
    free(cfg);
    free(log);
}

static int setup(void **state)
{
    unsetenv("LATHE_SERVER");
    unsetenv("LATHE_TOKEN");
    unsetenv("LATHE_TIMEOUT");
    setenv("LATHE_CONFIG", "/nonexistent/lathe-test-config.yaml", 1);
    fixture *f = xcalloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/lathe-cli-test-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    write_config(f);
    start_server(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    /* cancel whatever still runs: trainers outlive the server by design */
    result r = LATHE_ADMIN(f, "get", "jobs", "--state", "queued,starting,running,stopping",
                           "-o", "json");
    json_t *v = json_loads(r.out, 0, NULL);
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(v, "items"), i, j) {
        result c = lathe_as(f, ADMIN_TOKEN, "cancel", client_str(j, "name"), "--team",
                            client_str(j, "team"), (const char *)NULL);
        result_free(&c);
    }
    json_decref(v);
    result_free(&r);
    for (int k = 0; k < 100; k++) { /* until they have stopped */
        r = LATHE_ADMIN(f, "get", "jobs", "--state", "queued,starting,running,stopping", "-o",
                        "json");
        v = json_loads(r.out, 0, NULL);
        size_t n = json_array_size(json_object_get(v, "items"));
        json_decref(v);
        result_free(&r);
        if (n == 0) break;
        usleep(100000);
    }
    kill(f->server_pid, SIGTERM);
    waitpid(f->server_pid, NULL, 0);
    const char *argv[] = {"/bin/rm", "-rf", f->dir, NULL};
    result rm = run_env(60, NULL, argv);
    result_free(&rm);
    free(f);
    return 0;
}

/* ---- helpers for the tests ---- */

/* A port on which nothing listens. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t n = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &n);
    close(fd);
    return ntohs(a.sin_port);
}

/* Submits FILE of the fixture's folder as alpha; expects exit 0. */
static void submit_ok(const fixture *f, const char *file, const char *token)
{
    char *p = fpath(f, file);
    result r = lathe_as(f, token, "submit", p, (const char *)NULL);
    EXPECT_CODE(r, 0);
    result_free(&r);
    free(p);
}

/* The job as JSON (admin view), or NULL. */
static json_t *job_json(const fixture *f, const char *name)
{
    result r = LATHE_ADMIN(f, "get", "job", name, "-o", "json");
    json_t *v = r.code == 0 ? json_loads(r.out, 0, NULL) : NULL;
    result_free(&r);
    return v;
}

/* Waits until the job's state is one of `states` (comma-separated). */
static void wait_state(const fixture *f, const char *name, const char *states)
{
    for (int i = 0; i < 600; i++) {
        json_t *j = job_json(f, name);
        const char *st = client_str(j, "state");
        bool hit = st && strstr(states, st);
        json_decref(j);
        if (hit) return;
        usleep(50000);
    }
    fail_msg("job %s never reached %s", name, states);
}

/* True when a YAML text loads as one document whose root is a mapping
 * with key `key`. */
static bool yaml_has_key(const char *text, const char *key)
{
    yaml_parser_t p;
    yaml_document_t doc;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    bool ok = false;
    if (yaml_parser_load(&p, &doc)) {
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (root && root->type == YAML_MAPPING_NODE)
            for (yaml_node_pair_t *kv = root->data.mapping.pairs.start;
                 kv < root->data.mapping.pairs.top; kv++) {
                yaml_node_t *k = yaml_document_get_node(&doc, kv->key);
                ok |= k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, key);
            }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&p);
    return ok;
}

/* ---- the tests ---- */

static void test_unreachable(void **state)
{
    (void)state;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", closed_port());
    const char *cmds[][4] = {{"get", "jobs", NULL}, {"wait", "x", NULL}, {"logs", "x", NULL},
                             {"top", NULL}, {"cancel", "x", NULL}, {"describe", "job", "x"}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *argv[8] = {LATHE};
        size_t n = 1;
        for (size_t k = 0; k < 3 && cmds[i][k]; k++) argv[n++] = cmds[i][k];
        argv[n++] = "--server";
        argv[n++] = addr;
        argv[n] = NULL;
        result r = run_env(30, NULL, argv);
        EXPECT_CODE(r, LT_EXIT_UNAVAILABLE);
        EXPECT_IN(r.err, addr);
        EXPECT_IN(r.err, "--server");
        result_free(&r);
    }
    /* the address from the environment is named as such */
    const char *env[] = {NULL, NULL};
    char *e = xasprintf("LATHE_SERVER=%s", addr);
    env[0] = e;
    const char *argv[] = {LATHE, "get", "jobs", NULL};
    result r = run_env(30, env, argv);
    EXPECT_CODE(r, LT_EXIT_UNAVAILABLE);
    EXPECT_IN(r.err, "LATHE_SERVER");
    result_free(&r);
    free(e);
}

static void test_tokens(void **state)
{
    fixture *f = *state;
    result r = lathe_as(f, "wrong-token", "get", "jobs", (const char *)NULL);
    EXPECT_CODE(r, LT_EXIT_USAGE);
    EXPECT_IN(r.err, "does not accept the token from --token");
    result_free(&r);
    r = lathe_as(f, NULL, "get", "jobs", (const char *)NULL);
    EXPECT_CODE(r, LT_EXIT_USAGE);
    EXPECT_IN(r.err, "none was given");
    result_free(&r);
}

static void test_invalid_spec(void **state)
{
    fixture *f = *state;
    write_text(f->dir, "bad.yaml",
               "apiVersion: lathe/v1\n"
               "kind: LoRATrainingJob\n"
               "metadata:\n"
               "  name: bad\n"
               "spec:\n"
               "  baseModel:\n"
               "    name: Qwen2.5-0.5B\n"
               "  lora:\n"
               "    rnak: 8\n"
               "  trainingData:\n"
               "    datasetPath: /data/x.jsonl\n");
    char *p = fpath(f, "bad.yaml");
    result r = LATHE_ALPHA(f, "submit", p);
    EXPECT_CODE(r, LT_EXIT_INVALID);
    char *where = xasprintf("%s:9:5: error", p);
    EXPECT_IN(r.err, where);
    EXPECT_IN(r.err, "did you mean rank");
    EXPECT_IN(r.err, "1 error");
    result_free(&r);
    free(where);
    /* an unreadable file is a local error, before any request */
    r = LATHE_ALPHA(f, "submit", "/nonexistent/job.yaml");
    EXPECT_CODE(r, LT_EXIT_IO);
    result_free(&r);
    free(p);
}

static void test_submit_idempotent(void **state)
{
    fixture *f = *state;
    write_job(f, "idem.yaml", "idem", "alpha", 2, "0.01", 0, "");
    char *p = fpath(f, "idem.yaml");
    result r = LATHE_ALPHA(f, "submit", p);
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "job/idem created (team alpha");
    result_free(&r);
    r = LATHE_ALPHA(f, "submit", p);
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "job/idem unchanged");
    result_free(&r);
    write_job(f, "idem.yaml", "idem", "alpha", 3, "0.01", 0, "");
    r = LATHE_ALPHA(f, "submit", p);
    EXPECT_CODE(r, LT_EXIT_INVALID);
    result_free(&r);
    r = LATHE_ALPHA(f, "wait", "idem", "--timeout", "60s");
    EXPECT_CODE(r, 0);
    result_free(&r);
    free(p);
}

/* JSON through standard input ("-"): the client sends it as JSON. */
static void test_submit_json_stdin(void **state)
{
    fixture *f = *state;
    char *json = xasprintf("{\"apiVersion\": \"lathe/v1\", \"kind\": \"LoRATrainingJob\", "
                           "\"metadata\": {\"name\": \"from-json\"}, \"spec\": {\"team\": \"alpha\", "
                           "\"baseModel\": {\"name\": \"Qwen2.5-0.5B\"}, \"trainingData\": "
                           "{\"datasetPath\": \"%s/data.jsonl\", \"samples\": 100}, \"trainer\": "
                           "{\"command\": [\"/bin/sh\", \"%s/fake.sh\", \"2\", \"0.01\", \"0\"]}}}\n",
                           f->dir, f->dir);
    write_text(f->dir, "job.json", json);
    free(json);
    char *cmd = xasprintf("exec %s submit - --server %s --token %s < %s/job.json", LATHE, f->server,
                          ALPHA_TOKEN, f->dir);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    result r = run_env(60, NULL, argv);
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "job/from-json created (team alpha");
    result_free(&r);
    free(cmd);
    r = LATHE_ALPHA(f, "wait", "from-json", "--timeout", "60s", "-q");
    EXPECT_CODE(r, 0);
    result_free(&r);
}

static void test_formats(void **state)
{
    fixture *f = *state;
    write_job(f, "fmt.yaml", "fmt", "alpha", 4, "0.01", 0, "");
    submit_ok(f, "fmt.yaml", ALPHA_TOKEN);
    result w = LATHE_ALPHA(f, "wait", "fmt", "--timeout", "60s", "-q");
    EXPECT_CODE(w, 0);
    result_free(&w);

    result r = LATHE_ALPHA(f, "get", "jobs", "-o", "json");
    EXPECT_CODE(r, 0);
    json_error_t je;
    json_t *v = json_loads(r.out, 0, &je);
    assert_non_null(v);
    bool found = false;
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(v, "items"), i, j) found |= !strcmp(client_str(j, "name"), "fmt");
    assert_true(found);
    json_decref(v);
    result_free(&r);

    r = LATHE_ALPHA(f, "get", "job", "fmt", "-o", "json");
    EXPECT_CODE(r, 0);
    v = json_loads(r.out, 0, &je);
    assert_string_equal(client_str(v, "state"), "succeeded");
    assert_int_equal(client_int(json_object_get(v, "progress"), "step", -1), 4);
    json_decref(v);
    result_free(&r);

    r = LATHE_ALPHA(f, "get", "job", "fmt", "-o", "yaml");
    EXPECT_CODE(r, 0);
    assert_true(yaml_has_key(r.out, "progress"));
    EXPECT_IN(r.out, "name: fmt\n");
    result_free(&r);

    r = LATHE_ALPHA(f, "get", "jobs", "-o", "wide");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "NODE:GPUS");
    EXPECT_IN(r.out, "fmt ");
    EXPECT_IN(r.out, "succeeded");
    result_free(&r);

    r = LATHE_ALPHA(f, "get", "jobs", "--state", "succeeded", "--limit", "1");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "NAME");
    result_free(&r);

    const char *res[] = {"nodes", "teams", "priorityclasses", "experiments"};
    for (size_t k = 0; k < 4; k++) {
        r = LATHE_ADMIN(f, "get", res[k]);
        EXPECT_CODE(r, 0);
        result_free(&r);
        r = LATHE_ADMIN(f, "get", res[k], "-o", "yaml");
        EXPECT_CODE(r, 0);
        assert_true(yaml_has_key(r.out, "items"));
        result_free(&r);
    }
    r = LATHE_ADMIN(f, "get", "nodes", "-o", "wide");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "node-1");
    result_free(&r);
    r = LATHE_ALPHA(f, "get", "gizmos");
    EXPECT_CODE(r, LT_EXIT_USAGE);
    result_free(&r);
}

static void test_wait_codes(void **state)
{
    fixture *f = *state;
    write_job(f, "fails.yaml", "fails", "alpha", 2, "0.01", 1, "");
    submit_ok(f, "fails.yaml", ALPHA_TOKEN);
    result r = LATHE_ALPHA(f, "wait", "fails", "--timeout", "60s");
    EXPECT_CODE(r, 10);
    EXPECT_IN(r.out, "job/fails failed");
    assert_null(strstr(r.out, "\033[")); /* plain lines when piped */
    result_free(&r);

    r = LATHE_ALPHA(f, "wait", "fails", "--for", "finished");
    EXPECT_CODE(r, 0);
    result_free(&r);

    /* a long job: --timeout passes first, then it is cancelled */
    write_job(f, "long.yaml", "long", "beta", 1000, "0.1", 0, "");
    submit_ok(f, "long.yaml", BETA_TOKEN);
    r = LATHE_BETA(f, "wait", "long", "--timeout", "1s");
    EXPECT_CODE(r, 13);
    result_free(&r);
    wait_state(f, "long", "running");
    r = LATHE_BETA(f, "cancel", "long");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "job/long ");
    result_free(&r);
    r = LATHE_BETA(f, "wait", "long", "--timeout", "60s");
    EXPECT_CODE(r, 11);
    EXPECT_IN(r.out, "job/long cancelled");
    result_free(&r);
    /* cancelling a job that ended is refused */
    r = LATHE_BETA(f, "cancel", "long");
    EXPECT_CODE(r, LT_EXIT_INVALID);
    result_free(&r);

    /* maxDuration */
    write_job(f, "slow.yaml", "slow", "beta", 1000, "0.1", 0, "  timeout:\n    maxDuration: 2s\n    gracePeriod: 1s\n");
    submit_ok(f, "slow.yaml", BETA_TOKEN);
    r = LATHE_BETA(f, "wait", "slow", "--timeout", "60s");
    EXPECT_CODE(r, 12);
    result_free(&r);
}

static void test_logs(void **state)
{
    fixture *f = *state;
    write_job(f, "talk.yaml", "talk", "alpha", 30, "0.1", 0, "");
    submit_ok(f, "talk.yaml", ALPHA_TOKEN);
    wait_state(f, "talk", "running,succeeded");
    /* -f streams until the attempt ends: the last line is the trainer's "done" */
    result r = LATHE_ALPHA(f, "logs", "talk", "-f");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "[lathe-train] step=30/30");
    EXPECT_IN(r.out, "[lathe-train] done step=30");
    result_free(&r);
    json_t *j = job_json(f, "talk");
    assert_string_equal(client_str(j, "state"), "succeeded");
    json_decref(j);

    r = LATHE_ALPHA(f, "logs", "talk", "--tail", "2");
    EXPECT_CODE(r, 0);
    size_t lines = 0;
    for (const char *p = r.out; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 2);
    EXPECT_IN(r.out, "done step=30");
    result_free(&r);

    r = LATHE_ALPHA(f, "logs", "talk", "--attempt", "1");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "[lathe-train] start");
    result_free(&r);

    r = LATHE_ALPHA(f, "logs", "no-such-job");
    EXPECT_CODE(r, LT_EXIT_INVALID);
    EXPECT_IN(r.err, "no-such-job not found");
    result_free(&r);
}

static void test_describe(void **state)
{
    fixture *f = *state;
    write_job(f, "desc.yaml", "desc", "alpha", 6, "0.01", 0, "");
    submit_ok(f, "desc.yaml", ALPHA_TOKEN);
    result w = LATHE_ALPHA(f, "wait", "desc", "--timeout", "60s", "-q");
    EXPECT_CODE(w, 0);
    result_free(&w);
    result r = LATHE_ALPHA(f, "describe", "job", "desc");
    EXPECT_CODE(r, 0);
    const char *want[] = {"Name:         desc",
                          "State:        succeeded",
                          "Plan:         lora on 1 x L4-24GB",
                          "Attempts:     1 of at most 1",
                          "Checkpoints:",
                          "checkpoint-6",
                          "Events:",
                          "attempt 1 started",
                          "Loss:         2.1000 at step 1, lowest 2.1000 at step 1, last 2.6000 at step 6 (6 points)",
                          "Eval loss:    94.5000 at step 6, best 94.5000 at step 6 (checkpoint ",
                          "/checkpoint-6)",
                          "Adapter:      ", "/final"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) EXPECT_IN(r.out, want[i]);
    result_free(&r);
    /* the job's JSON names the best eval loss, its step and checkpoint, and the adapter */
    r = LATHE_ALPHA(f, "get", "job", "desc", "-o", "json");
    EXPECT_CODE(r, 0);
    json_t *js = json_loads(r.out, 0, NULL);
    json_t *item = json_is_array(json_object_get(js, "items")) ? json_array_get(json_object_get(js, "items"), 0) : js;
    json_t *ev = json_object_get(item, "eval");
    assert_true(json_real_value(json_object_get(ev, "best_loss")) == 94.5);
    assert_int_equal(json_integer_value(json_object_get(ev, "best_step")), 6);
    assert_int_equal(json_integer_value(json_object_get(ev, "step")), 6);
    json_decref(js);
    result_free(&r);
    r = LATHE_ALPHA(f, "describe", "job", "nope");
    EXPECT_CODE(r, LT_EXIT_INVALID);
    result_free(&r);
    /* an ended job can be deleted; then it is gone */
    r = LATHE_ALPHA(f, "cancel", "--purge", "desc");
    EXPECT_CODE(r, LT_EXIT_USAGE); /* --purge goes with --delete */
    result_free(&r);
    r = LATHE_ALPHA(f, "cancel", "--delete", "--purge", "desc");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "job/desc deleted, with its folder");
    result_free(&r);
    r = LATHE_ALPHA(f, "get", "job", "desc");
    EXPECT_CODE(r, LT_EXIT_INVALID);
    result_free(&r);
}

static void test_experiment(void **state)
{
    fixture *f = *state;
    char *text = xasprintf("apiVersion: lathe/v1\nkind: LoRAExperiment\nmetadata:\n  name: sweep\n"
                           "spec:\n  maxConcurrent: 1\n  template:\n    spec:\n      team: beta\n"
                           "      baseModel: {name: Qwen2.5-0.5B}\n"
                           "      trainingData: {datasetPath: %s/data.jsonl, samples: 100}\n"
                           "      hyperparams: {maxSteps: 3}\n"
                           "      trainer:\n        command: [/bin/sh, %s/fake.sh, \"3\", \"0.01\", \"0\"]\n"
                           "  matrix:\n    lora.rank: [4, 8]\n",
                           f->dir, f->dir);
    write_text(f->dir, "sweep.yaml", text);
    free(text);
    char *p = fpath(f, "sweep.yaml");
    result r = LATHE_BETA(f, "submit", p);
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "experiment/sweep created: 2 jobs");
    EXPECT_IN(r.out, "job/sweep-r4 created");
    EXPECT_IN(r.out, "job/sweep-r8 created");
    result_free(&r);
    free(p);
    r = LATHE_BETA(f, "wait", "sweep-r8", "--timeout", "60s", "-q");
    EXPECT_CODE(r, 0);
    result_free(&r);
    r = LATHE_BETA(f, "wait", "sweep-r4", "--timeout", "60s", "-q");
    EXPECT_CODE(r, 0);
    result_free(&r);
    r = LATHE_BETA(f, "get", "experiments");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "sweep ");
    result_free(&r);
    r = LATHE_BETA(f, "describe", "experiment", "sweep");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "Max running:  1");
    EXPECT_IN(r.out, "sweep-r4");
    EXPECT_IN(r.out, "succeeded");
    result_free(&r);
    r = LATHE_BETA(f, "get", "jobs", "--experiment", "sweep", "-o", "json");
    EXPECT_CODE(r, 0);
    json_t *v = json_loads(r.out, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(v, "items")), 2);
    json_decref(v);
    result_free(&r);
}

static void test_isolation(void **state)
{
    fixture *f = *state;
    write_job(f, "mine.yaml", "mine", "alpha", 2, "0.01", 0, "");
    submit_ok(f, "mine.yaml", ALPHA_TOKEN);
    result r = LATHE_BETA(f, "get", "job", "mine");
    EXPECT_CODE(r, LT_EXIT_INVALID);
    EXPECT_IN(r.err, "job mine not found");
    result_free(&r);
    r = LATHE_BETA(f, "get", "jobs");
    EXPECT_CODE(r, 0);
    assert_null(strstr(r.out, "mine "));
    result_free(&r);
    r = LATHE_BETA(f, "cancel", "mine");
    EXPECT_CODE(r, LT_EXIT_INVALID);
    result_free(&r);
    /* admin acts for the team */
    r = LATHE_ADMIN(f, "get", "job", "mine", "--team", "alpha");
    EXPECT_CODE(r, 0);
    result_free(&r);
}

static void test_top(void **state)
{
    fixture *f = *state;
    write_job(f, "busy.yaml", "busy", "alpha", 1000, "0.1", 0, "");
    submit_ok(f, "busy.yaml", ALPHA_TOKEN);
    wait_state(f, "busy", "running");
    result r = LATHE_ADMIN(f, "top");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "GPUs: 1 of 2 in use");
    EXPECT_IN(r.out, "busy");
    EXPECT_IN(r.out, "Teams:");
    assert_null(strstr(r.out, "\033["));
    result_free(&r);
    r = LATHE_ADMIN(f, "top", "--count", "2", "--interval", "100ms");
    EXPECT_CODE(r, 0);
    result_free(&r);
    r = LATHE_ALPHA(f, "cancel", "busy");
    EXPECT_CODE(r, 0);
    result_free(&r);
    r = LATHE_ALPHA(f, "wait", "busy", "--for", "finished", "-q");
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "job/busy cancelled");
    result_free(&r);
}

static void test_config_precedence(void **state)
{
    fixture *f = *state;
    char *cfg = xasprintf("server: %s\ntoken: %s\n", f->server, ALPHA_TOKEN);
    write_text(f->dir, "client.yaml", cfg);
    free(cfg);
    char *path = fpath(f, "client.yaml");
    char *e_cfg = xasprintf("LATHE_CONFIG=%s", path);
    const char *argv[] = {LATHE, "get", "teams", NULL};
    /* the file alone */
    const char *env1[] = {e_cfg, NULL};
    result r = run_env(30, env1, argv);
    EXPECT_CODE(r, 0);
    EXPECT_IN(r.out, "alpha");
    result_free(&r);
    /* the environment wins over the file */
    char addr[64];
    snprintf(addr, sizeof addr, "LATHE_SERVER=127.0.0.1:%d", closed_port());
    const char *env2[] = {e_cfg, addr, NULL};
    r = run_env(30, env2, argv);
    EXPECT_CODE(r, LT_EXIT_UNAVAILABLE);
    result_free(&r);
    const char *env3[] = {e_cfg, "LATHE_TOKEN=bad", NULL};
    r = run_env(30, env3, argv);
    EXPECT_CODE(r, LT_EXIT_USAGE);
    EXPECT_IN(r.err, "LATHE_TOKEN");
    result_free(&r);
    /* the flag wins over the environment */
    const char *argv2[] = {LATHE, "get", "teams", "--server", f->server, NULL};
    r = run_env(30, env2, argv2);
    EXPECT_CODE(r, 0);
    result_free(&r);
    /* a bad config file is reported with its line */
    write_text(f->dir, "client.yaml", "server: x\ntokne: y\n");
    r = run_env(30, env1, argv);
    EXPECT_CODE(r, LT_EXIT_INVALID);
    EXPECT_IN(r.err, ":2:1: error");
    result_free(&r);
    free(e_cfg);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unreachable),  cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_invalid_spec), cmocka_unit_test(test_submit_idempotent),
        cmocka_unit_test(test_submit_json_stdin),
        cmocka_unit_test(test_formats),      cmocka_unit_test(test_wait_codes),
        cmocka_unit_test(test_logs),         cmocka_unit_test(test_describe),
        cmocka_unit_test(test_isolation),    cmocka_unit_test(test_top),
        cmocka_unit_test(test_config_precedence), cmocka_unit_test(test_experiment),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
