/* harness.h: what the server's integration tests share. A test folder in
 * /tmp with a virtual cluster, a ServerConfig (three tokens: team-a,
 * team-b, admin; port 0; a 50 ms poll), fake trainers (shell scripts that
 * print [lathe-train] progress lines, checkpoint, honour SIGTERM, and
 * record every start and stop in a file opened with O_APPEND), the real
 * `lathe server` started as a child process (so it can be killed with
 * SIGKILL and restarted), and an HTTP client on libcurl with JSON helpers.
 */
#ifndef LATHE_TEST_SERVER_HARNESS_H
#define LATHE_TEST_SERVER_HARNESS_H

#include "base/base.h"
#include "server/server.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct hs {
    char *dir;       /* the test folder */
    char *config;    /* DIR/server.yaml */
    char *record;    /* DIR/record.log: the fake trainers' start and stop lines */
    pid_t pid;       /* the server; 0 when none runs */
    char addr[128];  /* its address */
} hs;

static inline double hs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void hs_sleep(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ASan builds are several times slower: every wait scales with this. */
static inline double hs_slow(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 4;
#else
    return 1;
#endif
#else
    return 1;
#endif
}

static inline void hs_write(const hs *h, const char *name, const char *text)
{
    char *p = path_join(h->dir, name);
    if (file_write_atomic(p, text, strlen(text)) != 0) abort();
    free(p);
}

/* The fake trainer. STEPS steps of SLEEP seconds, a checkpoint (and an
 * eval loss, 2.STEP) every CKPT steps, resume from the newest checkpoint, SIGTERM: checkpoint and
 * exit 143. MODE=crash-once: exit 1 in attempt 1; MODE=oom: "CUDA out of
 * memory" and exit 1 while the resolved spec's batchSize is above 1;
 * MODE=ignore-term: SIGTERM is ignored (the grace period ends in SIGKILL).
 * GATE=FILE: after the start line, wait until FILE exists; PAUSE_FILE and
 * PAUSE_AT=N: after step N, wait until the file exists (SIGTERM still
 * works while it waits). */
static const char hs_fake_trainer[] =
    "#!/bin/sh\n"
    "steps=${STEPS:-10}; nap=${SLEEP:-0.05}; every=${CKPT:-5}; ck=\"$CHECKPOINT_DIR\"\n"
    "rec() { echo \"$1 $LATHE_JOB $LATHE_ATTEMPT $$ $(date +%s.%N)\" >> \"$RECORD\"; }\n"
    "rec start\n"
    "mkdir -p \"$ck\"\n"
    "batch=$(sed -n 's/^ *batchSize: *//p' \"$LATHE_SPEC\" | head -1)\n"
    "echo \"batch $batch gpus $LATHE_GPUS cuda $CUDA_VISIBLE_DEVICES attempt $LATHE_ATTEMPT share ${LATHE_GPU_SHARE:-1} mps ${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT:-none}\"\n"
    "if [ \"$MODE\" = crash-once ] && [ \"$LATHE_ATTEMPT\" = 1 ]; then echo boom >&2; rec stop; exit 1; fi\n"
    "if [ \"$MODE\" = oom ] && [ \"$batch\" -gt 1 ]; then\n"
    "  echo 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; rec stop; exit 1; fi\n"
    "i=0\n"
    "last=$(ls \"$ck\" | sed -n 's/^checkpoint-//p' | sort -n | tail -1)\n"
    "if [ -n \"$last\" ]; then i=$last; echo \"[lathe-train] resume step=$i path=$ck/checkpoint-$i\"; fi\n"
    "save() { mkdir -p \"$ck/checkpoint-$1\"; echo \"[lathe-train] checkpoint step=$1 path=$ck/checkpoint-$1\"; }\n"
    "if [ \"$MODE\" = ignore-term ]; then trap '' TERM; else\n"
    "  trap 'save $i; echo \"[lathe-train] stopped step=$i (SIGTERM): checkpoint saved\"; rec stop; exit 143' TERM; fi\n"
    "echo \"[lathe-train] start step=$i/$steps\"\n"
    "if [ -n \"$GATE\" ]; then while [ ! -e \"$GATE\" ]; do sleep 0.02; done; fi\n"
    "while [ $i -lt $steps ]; do\n"
    "  sleep $nap & wait $!\n"
    "  i=$((i+1))\n"
    "  ev=''; if [ $((i % every)) -eq 0 ]; then ev=\" eval_loss=2.$i\"; fi\n"
    "  echo \"[lathe-train] step=$i/$steps epoch=0.5 loss=1.$i lr=1.0e-04 tokens_per_s=50.0$ev\"\n"
    "  if [ $((i % every)) -eq 0 ]; then save $i; fi\n"
    "  if [ -n \"$PAUSE_FILE\" ] && [ $i -eq \"${PAUSE_AT:-0}\" ]; then\n"
    "    while [ ! -e \"$PAUSE_FILE\" ]; do sleep 0.02 & wait $!; done; fi\n"
    "done\n"
    "echo \"[lathe-train] done step=$i loss=1.0 adapter=$ck/final\"\n"
    "rec stop\n";

static const char hs_cluster[] =
    "apiVersion: lathe/v1\n"
    "kind: Cluster\n"
    "metadata: {name: test}\n"
    "spec:\n"
    "  gpuTypes:\n"
    "    - {name: A100-80GB, memory: 80Gi, pricePerHour: 2}\n"
    "  nodes:\n"
    "    - {name: node-1, gpuType: A100-80GB, gpus: %d}\n"
    "  teams:\n"
    "    - {name: team-a, quota: {A100-80GB: %d}}\n"
    "    - {name: team-b, quota: {A100-80GB: %d}}\n"
    "  priorityClasses:\n"
    "    - {name: default, value: 0, globalDefault: true}\n"
    "    - {name: urgent, value: 1000}\n";

/* The config's `policy:` for these tests (server.yaml is in h->dir, so
 * "." is the test folder): models, datasets and programs may be read from
 * the test folder (never its data/ folder, which the policy always
 * denies) and share/data (the repository's datasets); the sandbox is
 * off, because the fake trainers record their starts in DIR/record.log,
 * outside their job folders (the sandbox has its own tests:
 * tests/exec/test_exec_sandbox.c, tests/security). A test that needs
 * other rules passes its own section to hs_init_policy. Caller frees. */
static inline char *hs_policy(void)
{
    return xasprintf("  policy:\n"
                     "    paths: {models: [.], data: [., %s/data], programs: [.]}\n"
                     "    sandbox: {mode: off}\n",
                     LATHE_SOURCE_DIR "/share");
}

static inline void hs_init_policy(hs *h, int gpus, const char *extra, const char *policy);

/* A fresh folder with a cluster of `gpus` virtual GPUs (each team's quota
 * is all of them) and the config (with hs_policy); extra is appended to
 * the config's spec. */
static inline void hs_init(hs *h, int gpus, const char *extra)
{
    hs_init_policy(h, gpus, extra, NULL);
}

/* hs_init with another `policy:` section (NULL: hs_policy's). */
static inline void hs_init_policy(hs *h, int gpus, const char *extra, const char *policy)
{
    memset(h, 0, sizeof *h);
    h->dir = xstrdup("/tmp/lathe-server-test-XXXXXX");
    if (!mkdtemp(h->dir)) abort();
    h->config = path_join(h->dir, "server.yaml");
    h->record = path_join(h->dir, "record.log");
    char *cluster = xasprintf(hs_cluster, gpus, gpus, gpus);
    hs_write(h, "cluster.yaml", cluster);
    free(cluster);
    hs_write(h, "fake.sh", hs_fake_trainer);
    hs_write(h, "data.jsonl", "{\"instruction\": \"hi\", \"output\": \"there\"}\n");
    hs_write(h, "record.log", "");
    char ha[65], hb[65], hadm[65];
    srv_hash_token("token-a", ha);
    srv_hash_token("token-b", hb);
    srv_hash_token("token-admin", hadm);
    char *dflt = hs_policy();
    char *cfg = xasprintf(
        "apiVersion: lathe/v1\n"
        "kind: ServerConfig\n"
        "spec:\n"
        "  listen: 127.0.0.1:0\n"
        "  dataDir: data\n"
        "  cluster: {file: cluster.yaml}\n"
        "  tokens:\n"
        "    - {sha256: %s, team: team-a}\n"
        "    - {sha256: %s, team: team-b}\n"
        "    - {sha256: %s, admin: true}\n"
        "  scheduler: {minRunTime: 1s, interval: 1s}\n"
        "  pollInterval: 50ms\n"
        "  retry: {jitter: 0}\n"
        "%s%s",
        ha, hb, hadm, policy ? policy : dflt, extra ? extra : "");
    hs_write(h, "server.yaml", cfg);
    free(cfg);
    free(dflt);
}

static inline void hs_rmdir(hs *h)
{
    char err[512];
    if (file_remove_tree(h->dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
}

/* ---- HTTP ---- */
typedef struct hs_resp {
    long status; /* 0: no answer (connection refused, timeout) */
    char *body;
    json_t *json; /* the body parsed, or NULL */
} hs_resp;

static size_t hs_collect(char *p, size_t size, size_t n, void *cls)
{
    sb_putn(cls, p, size * n);
    return size * n;
}

static inline void hs_resp_free(hs_resp *r)
{
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* An easy handle for method url with the headers hdr, the body (NULL:
 * none) sent and the answer collected into out, no signals, timeout
 * seconds in all: what every HTTP call of the tests sets. */
static inline CURL *hs_curl_new(const char *method, const char *url, struct curl_slist *hdr,
                                const char *body, sb *out, double timeout)
{
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, hs_collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout * 1000));
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    return c;
}

/* method path with token (NULL: none); body (NULL: none) as ctype. */
static inline hs_resp hs_http_ex(const hs *h, const char *method, const char *path,
                                 const char *token, const char *body, const char *ctype,
                                 double timeout)
{
    hs_resp r = {0};
    char *url = xasprintf("http://%s%s", h->addr, path);
    struct curl_slist *hdr = NULL;
    char *auth = token ? xasprintf("Authorization: Bearer %s", token) : NULL;
    char *ct = ctype ? xasprintf("Content-Type: %s", ctype) : NULL;
    if (auth) hdr = curl_slist_append(hdr, auth);
    if (ct) hdr = curl_slist_append(hdr, ct);
    sb out;
    sb_init(&out);
    CURL *c = hs_curl_new(method, url, hdr, body, &out, timeout);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    r.body = out.len ? sb_take(&out) : xstrdup("");
    sb_free(&out);
    r.json = json_loads(r.body, 0, NULL);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    free(url);
    free(auth);
    free(ct);
    return r;
}

static inline hs_resp hs_http(const hs *h, const char *method, const char *path, const char *token,
                              const char *body)
{
    return hs_http_ex(h, method, path, token, body, body ? "application/yaml" : NULL, 30 * hs_slow());
}

/* GET path's JSON (a new reference); fails the test unless it is 200. */
static inline json_t *hs_get_json(const hs *h, const char *path, const char *token)
{
    hs_resp r = hs_http(h, "GET", path, token, NULL);
    if (r.status != 200) fail_msg("GET %s: %ld %s", path, r.status, r.body);
    json_t *j = json_incref(r.json);
    hs_resp_free(&r);
    return j;
}

/* The status of method path (with token; no body). */
static inline long hs_status(const hs *h, const char *method, const char *path, const char *token)
{
    hs_resp r = hs_http(h, method, path, token, NULL);
    long st = r.status;
    hs_resp_free(&r);
    return st;
}

/* ---- the server process ---- */
static inline bool hs_read_addr(hs *h)
{
    char *p = xasprintf("%s/data/server.addr", h->dir), err[128];
    size_t len = 0;
    char *t = file_read_all(p, 1024, &len, err, sizeof err);
    free(p);
    if (!t) return false;
    snprintf(h->addr, sizeof h->addr, "%.*s", (int)strcspn(t, "\n"), t);
    free(t);
    return h->addr[0] != '\0';
}

/* Does the server at h->addr answer /healthz yet? hs_start's probe over
 * plain http; a test whose server speaks otherwise (TLS) brings its own. */
typedef bool (*hs_probe_fn)(const hs *h, void *ctx);

static inline bool hs_probe_healthz(const hs *h, void *ctx)
{
    (void)ctx;
    hs_resp r = hs_http_ex(h, "GET", "/healthz", NULL, NULL, NULL, 2);
    long st = r.status;
    hs_resp_free(&r);
    return st == 200;
}

/* Starts `lathe server --config DIR/server.yaml` and waits until it has
 * written its address and probe(h, ctx) says it answers; false when the
 * server exits first or 30 s (times hs_slow) pass. Its output goes to
 * DIR/server.log. */
static inline bool hs_start_probe(hs *h, hs_probe_fn probe, void *ctx)
{
    char *addr = xasprintf("%s/data/server.addr", h->dir);
    unlink(addr);
    free(addr);
    char *lathe = xasprintf("%s/lathe", LATHE_BINARY_DIR);
    char *log = path_join(h->dir, "server.log");
    h->pid = fork();
    if (h->pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (chdir(h->dir) != 0) _exit(127);
        execl(lathe, "lathe", "server", "--config", h->config, (char *)NULL);
        _exit(127);
    }
    free(lathe);
    free(log);
    double end = hs_now() + 30 * hs_slow();
    while (hs_now() < end) {
        int status;
        if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
            h->pid = 0;
            return false;
        }
        if (hs_read_addr(h) && probe(h, ctx)) return true;
        hs_sleep(0.02);
    }
    return false;
}

/* hs_start_probe with the plain /healthz probe. */
static inline bool hs_start(hs *h)
{
    return hs_start_probe(h, hs_probe_healthz, NULL);
}

/* SIGKILL (or SIGTERM) to the server, and reaps it. Returns its wait
 * status (0 for a clean exit after SIGTERM: no sanitizer report). */
static inline int hs_kill(hs *h, int sig)
{
    if (h->pid <= 0) return 0;
    kill(h->pid, sig);
    int status = 0;
    while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR) {
    }
    h->pid = 0;
    return status;
}

static inline void hs_print_log(const hs *h)
{
    char *p = path_join(h->dir, "server.log"), err[128];
    char *t = file_read_all(p, 1 << 20, NULL, err, sizeof err);
    fprintf(stderr, "---- server.log ----\n%s\n--------------------\n", t ? t : err);
    free(t);
    free(p);
}

/* ---- jobs ---- */

/* A LoRATrainingJob running the fake trainer. env: extra `- {name, value}`
 * lines for trainer.env (NULL: none); more: extra lines under spec; td:
 * extra fields of trainingData (", batchSize: 4"). */
static inline char *hs_job_td(const hs *h, const char *name, const char *env, const char *more,
                              const char *td)
{
    sb out;
    sb_init(&out);
    sb_printf(&out,
              "apiVersion: lathe/v1\n"
              "kind: LoRATrainingJob\n"
              "metadata: {name: %s}\n"
              "spec:\n"
              "  baseModel: {name: Qwen2.5-0.5B}\n"
              "  trainingData: {datasetPath: %s/data.jsonl, samples: 100%s}\n"
              "  trainer:\n"
              "    command: [/bin/sh, %s/fake.sh]\n"
              "    env:\n"
              "      - {name: RECORD, value: %s}\n"
              "%s",
              name, h->dir, td ? td : "", h->dir, h->record, env ? env : "");
    if (!more || !strstr(more, "retryPolicy"))
        sb_puts(&out, "  retryPolicy: {maxRetries: 2, backoffSeconds: 0.2}\n");
    if (more) sb_puts(&out, more);
    return sb_take(&out);
}

static inline char *hs_job(const hs *h, const char *name, const char *env, const char *more)
{
    return hs_job_td(h, name, env, more, NULL);
}

/* A string field of a job (caller frees), or NULL. */
static inline char *hs_job_field(const hs *h, const char *token, const char *name, const char *field)
{
    char *path = xasprintf("/v1/jobs/%s", name);
    hs_resp r = hs_http(h, "GET", path, token, NULL);
    free(path);
    const char *v = r.json ? json_string_value(json_object_get(r.json, field)) : NULL;
    char *out = v ? xstrdup(v) : NULL;
    hs_resp_free(&r);
    return out;
}

/* Waits until a job is in `state` (true) or the timeout passes (false). */
static inline bool hs_wait_state(const hs *h, const char *token, const char *name,
                                 const char *state, double timeout)
{
    double end = hs_now() + timeout * hs_slow();
    for (;;) {
        char *s = hs_job_field(h, token, name, "state");
        bool ok = s && strcmp(s, state) == 0;
        free(s);
        if (ok) return true;
        if (hs_now() > end) return false;
        hs_sleep(0.03);
    }
}

/* Waits until a job's string field holds `text`. */
static inline bool hs_wait_field(const hs *h, const char *token, const char *name,
                                 const char *field, const char *text, double timeout)
{
    double end = hs_now() + timeout * hs_slow();
    for (;;) {
        char *s = hs_job_field(h, token, name, field);
        bool ok = s && strstr(s, text);
        free(s);
        if (ok) return true;
        if (hs_now() > end) return false;
        hs_sleep(0.03);
    }
}

/* Waits until GET path (with token) answers a body holding `text`. */
static inline bool hs_wait_body(const hs *h, const char *path, const char *token, const char *text,
                                double timeout)
{
    double end = hs_now() + timeout * hs_slow();
    for (;;) {
        hs_resp r = hs_http(h, "GET", path, token, NULL);
        bool ok = r.body && strstr(r.body, text);
        hs_resp_free(&r);
        if (ok) return true;
        if (hs_now() > end) return false;
        hs_sleep(0.03);
    }
}

/* The value of the /metrics line that starts with `name ` (labels
 * included in name, as the server writes them), or -1 when absent. */
static inline double hs_metric(const hs *h, const char *name)
{
    hs_resp r = hs_http(h, "GET", "/metrics", NULL, NULL);
    double v = -1;
    char *key = xasprintf("\n%s ", name);
    const char *p = r.body ? strstr(r.body, key) : NULL;
    if (p) v = strtod(p + strlen(key), NULL);
    free(key);
    hs_resp_free(&r);
    return v;
}

/* ---- the fake trainers' record ---- */
typedef struct hs_run {
    char job[128];
    int attempt;
    long pid;
    double start, stop; /* stop 0: no stop line (still running, or killed) */
} hs_run;

/* Reads DIR/record.log: one run per start line, matched with its stop
 * line by pid. Caller frees *runs. */
static inline size_t hs_read_runs(const hs *h, hs_run **runs)
{
    char err[128];
    char *text = file_read_all(h->record, 64 << 20, NULL, err, sizeof err);
    *runs = NULL;
    if (!text) return 0;
    size_t n = 0;
    char **lines;
    size_t nl = str_split(text, '\n', &lines);
    *runs = xcalloc(nl + 1, sizeof **runs);
    for (size_t i = 0; i < nl; i++) {
        char what[16], job[128];
        int attempt;
        long pid;
        double t;
        if (sscanf(lines[i], "%15s %127s %d %ld %lf", what, job, &attempt, &pid, &t) != 5) continue;
        if (!strcmp(what, "start")) {
            hs_run *r = &(*runs)[n++];
            snprintf(r->job, sizeof r->job, "%s", job);
            r->attempt = attempt;
            r->pid = pid;
            r->start = t;
        } else {
            for (size_t k = n; k-- > 0;)
                if ((*runs)[k].pid == pid && (*runs)[k].stop == 0) {
                    (*runs)[k].stop = t;
                    break;
                }
        }
    }
    str_list_free(lines, nl);
    free(text);
    return n;
}

/* True when two runs overlap in time (a run with no stop lasts forever). */
static inline bool hs_overlap(const hs_run *a, const hs_run *b)
{
    double ae = a->stop > 0 ? a->stop : 1e300, be = b->stop > 0 ? b->stop : 1e300;
    return a->start < be && b->start < ae;
}

/* The job's events as one text: "type: message" per line (caller frees). */
static inline char *hs_events(const hs *h, const char *token, const char *name)
{
    char *path = xasprintf("/v1/jobs/%s/events", name);
    hs_resp r = hs_http(h, "GET", path, token, NULL);
    free(path);
    sb out;
    sb_init(&out);
    json_t *items = r.json ? json_object_get(r.json, "items") : NULL;
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *e = json_array_get(items, i);
        sb_printf(&out, "%s: %s\n", json_string_value(json_object_get(e, "type")),
                  json_string_value(json_object_get(e, "message")));
    }
    hs_resp_free(&r);
    if (!out.len) sb_puts(&out, "");
    return sb_take(&out);
}

/* How many of team-a's listed jobs have each name, walking every page of
 * `limit` jobs: a JSON object name -> count (caller decrefs). */
static inline json_t *hs_listed_names(const hs *h, int limit)
{
    json_t *count = json_object();
    char *token = NULL;
    do {
        char *path = token ? xasprintf("/v1/jobs?limit=%d&page_token=%s", limit, token)
                           : xasprintf("/v1/jobs?limit=%d", limit);
        hs_resp r = hs_http(h, "GET", path, "token-a", NULL);
        free(path);
        assert_int_equal(r.status, 200);
        json_t *items = json_object_get(r.json, "items");
        for (size_t i = 0; i < json_array_size(items); i++) {
            const char *name = json_string_value(json_object_get(json_array_get(items, i), "name"));
            json_int_t k = json_integer_value(json_object_get(count, name));
            json_object_set_new(count, name, json_integer(k + 1));
        }
        free(token);
        const char *next = json_string_value(json_object_get(r.json, "next_page_token"));
        token = next ? xstrdup(next) : NULL;
        hs_resp_free(&r);
    } while (token);
    return count;
}

/* Removes the test folder and frees h's strings (no server may run). */
static inline void hs_free(hs *h)
{
    hs_rmdir(h);
    free(h->dir);
    free(h->config);
    free(h->record);
}

/* Stops the server with SIGTERM, which must end it cleanly (status 0: no
 * sanitizer report; its log is printed otherwise), then hs_free. */
static inline void hs_finish(hs *h)
{
    int status = hs_kill(h, SIGTERM);
    if (status != 0) hs_print_log(h);
    assert_int_equal(status, 0);
    hs_free(h);
}

/* A test group's server: `gpus` virtual GPUs, started before the group's
 * tests (cmocka group setup) and stopped with SIGTERM after them; a server
 * whose consistency checks had to fix its set of active jobs, or that does
 * not exit with status 0 (a leak or sanitizer report inside it), fails the
 * group. */
static inline int hs_group_setup(hs *h, int gpus)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    hs_init(h, gpus, NULL);
    if (!hs_start(h)) {
        hs_print_log(h);
        return -1;
    }
    return 0;
}

static inline int hs_group_teardown(hs *h)
{
    /* the controller's set of active jobs never needed a fix */
    double fixes = hs_metric(h, "lathe_controller_reload_fixes_total");
    if (fixes != 0) {
        hs_print_log(h);
        fprintf(stderr, "the controller's consistency checks fixed %g differences\n", fixes);
        hs_kill(h, SIGTERM);
        return -1;
    }
    int status = hs_kill(h, SIGTERM);
    if (status != 0) {
        hs_print_log(h);
        fprintf(stderr, "the server ended with status %d\n", status);
        return -1;
    }
    hs_free(h);
    curl_global_cleanup();
    return 0;
}

/* A test file whose tests share one server of `gpus` virtual GPUs: its
 * `static hs H` and the cmocka group functions `setup` and `teardown` for
 * cmocka_run_group_tests. */
#define HS_GROUP_SERVER(gpus)                                                                      \
    static hs H;                                                                                   \
    static int setup(void **state)                                                                 \
    {                                                                                              \
        (void)state;                                                                               \
        return hs_group_setup(&H, gpus);                                                           \
    }                                                                                              \
    static int teardown(void **state)                                                              \
    {                                                                                              \
        (void)state;                                                                               \
        return hs_group_teardown(&H);                                                              \
    }

#endif
