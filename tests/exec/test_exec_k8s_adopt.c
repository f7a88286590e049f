/* test_exec_k8s_adopt.c: the Kubernetes backend's operator-mode parts,
 * against the API server double (tests/k8s/kube-double, skipped when it or
 * python3 is not there) with one GPU node:
 *
 *   - a user's own Job (suspended, labelled lathe.dev/queue) adopted:
 *     prepare creates nothing and refuses a Job that is absent or not
 *     labelled; start admits it with one merge patch (suspend false, the
 *     placement annotation, lathe's placement merged into the user's own
 *     nodeSelector); the attempt is followed from the user's first
 *     container and ends succeeded; the Job is never deleted, and a
 *     finished one cannot be admitted again;
 *   - cancel suspends the user's Job and leaves it; the attempt ends
 *     stopped once its pod is gone; a second attempt admits the same Job
 *     again and sees only its own pod; while lathe runs it, its pod's GPU
 *     is not foreign, and the pod of a labelled Job its user let run
 *     without lathe is;
 *   - operator mode's owner: the Job has the owner-uid label and an
 *     ownerReference (the garbage collector deletes it with its owner);
 *     a second prepare with another store id and the same owner adopts it,
 *     another owner's is refused;
 *   - exec_k8s_adopt_handle's JSON, attached by a second backend (a server
 *     that rebuilt its cache), follows the running attempt to its end
 *     without a log line twice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/exec.h"
#include "exec_test.h"
#include "k8s/k8s.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS "team-a"      /* the team's namespace (no prefix in the settings) */
#define WAIT_LIMIT 60.0  /* seconds any single wait may take */
#define GPU_NODE "gpu-1"

typedef struct fx {
    pid_t pid;        /* the double */
    char *dir;        /* its state folder and the job folders */
    k8s_config cfg;
    k8s_client *cl;
    spec_k8s k;
    exec_backend *be;
} fx;


/* ---- the double ---- */

/* Starts the double with one GPU node; false when it did not come up. */
static bool double_start(fx *f)
{
    char *nodes = path_join(f->dir, "nodes.json");
    const char *text = "[{\"name\": \"" GPU_NODE "\", \"gpus\": 2, \"product\": \"NVIDIA-L4\", "
                       "\"memoryMiB\": 23034, \"cpu\": \"16\", \"memory\": \"64Gi\"}]";
    char err[512];
    if (file_write_atomic(nodes, text, strlen(text)) != 0) {
        free(nodes);
        return false;
    }
    char *exe = path_join(LATHE_SOURCE_DIR, "tests/k8s/kube-double");
    char *state = path_join(f->dir, "kube");
    char *log = path_join(f->dir, "double.log");
    char ppid[32];
    snprintf(ppid, sizeof ppid, "%d", (int)getpid());
    f->pid = fork();
    if (f->pid == 0) {
        FILE *out = fopen(log, "w");
        if (out) {
            dup2(fileno(out), 1);
            dup2(fileno(out), 2);
        }
        char *argv[] = {"/usr/bin/python3", exe, "--state", state, "--port", "0", "--nodes", nodes,
                        "--parent-pid", ppid, "--bookmark-interval", "1", NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    char *ready = path_join(state, "ready");
    char *kubeconfig = path_join(state, "kubeconfig");
    double end = et_now() + 60;
    while (!file_exists(ready) && et_now() < end) et_nap(0.05);
    bool ok = file_exists(ready) && k8s_config_kubeconfig(&f->cfg, kubeconfig, NULL, err, sizeof err);
    if (ok) f->cl = k8s_client_new(&f->cfg, err, sizeof err);
    if (!ok || !f->cl) fprintf(stderr, "the double did not start: %s (see %s)\n", err, log);
    free(ready);
    free(kubeconfig);
    free(exe);
    free(state);
    free(log);
    free(nodes);
    return ok && f->cl;
}

static int group_setup(void **state)
{
    *state = NULL;
    char *exe = path_join(LATHE_SOURCE_DIR, "tests/k8s/kube-double");
    bool have = file_exists(exe) && file_exists("/usr/bin/python3");
    free(exe);
    if (!have) return 0; /* every test skips */
    fx *f = xcalloc(1, sizeof *f);
    f->dir = xstrdup("/tmp/lathe-k8s-adopt-XXXXXX");
    if (!mkdtemp(f->dir) || !double_start(f)) return -1;
    k8s_ref ref = {.api = "v1", .resource = "namespaces", .name = NS};
    json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           "name", NS);
    k8s_error e;
    k8s_rc rc = k8s_create(f->cl, &ref, ns, NULL, &e);
    json_decref(ns);
    if (rc != K8S_OK) {
        fprintf(stderr, "namespace %s: %s\n", NS, e.message);
        return -1;
    }
    spec_k8s_defaults(&f->k);
    char err[512];
    f->be = exec_k8s_new(&f->k, f->cl, 30, err, sizeof err);
    if (!f->be) {
        fprintf(stderr, "exec_k8s_new: %s\n", err);
        return -1;
    }
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fx *f = *state;
    if (!f) return 0;
    exec_backend_free(f->be);
    k8s_client_free(f->cl);
    k8s_config_free(&f->cfg);
    spec_k8s_free(&f->k);
    kill(f->pid, SIGTERM);
    int st;
    waitpid(f->pid, &st, 0);
    char err[256];
    file_remove_tree(f->dir, err, sizeof err);
    free(f->dir);
    free(f);
    return 0;
}

static fx *need(void **state)
{
    fx *f = *state;
    if (!f) skip();
    return f;
}

/* ---- objects ---- */

/* A user's Job: labelled for lathe's queue (unless queue is NULL),
 * suspended as asked, one container "main" (not "trainer") running
 * /bin/sh -c script, asking for gpus GPUs, with the user's own
 * nodeSelector; a short grace period so stops are quick. */
static void user_job(fx *f, const char *name, const char *queue, bool suspend, int gpus,
                     const char *script)
{
    json_t *labels = json_object();
    if (queue) json_object_set_new(labels, K8S_LABEL_QUEUE, json_string(queue));
    json_t *res = gpus > 0 ? json_pack("{s:{s:i}, s:{s:i}}", "requests", "nvidia.com/gpu", gpus,
                                       "limits", "nvidia.com/gpu", gpus)
                           : json_object();
    json_t *job = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:o}, s:{s:b, s:i, s:{s:{s:s, s:i, s:{s:s}, s:[{s:s, s:s, s:[s,s,s], s:o}]}}}}",
        "apiVersion", "batch/v1", "kind", "Job", "metadata", "name", name, "namespace", NS, "labels",
        labels, "spec", "suspend", suspend, "backoffLimit", 0, "template", "spec", "restartPolicy",
        "Never", "terminationGracePeriodSeconds", 5, "nodeSelector", "kubernetes.io/os", "linux",
        "containers", "name", "main", "image", "busybox:1.36", "command", "/bin/sh", "-c", script,
        "resources", res);
    assert_non_null(job);
    k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = NS, .name = name};
    k8s_error e;
    if (k8s_create(f->cl, &ref, job, NULL, &e) != K8S_OK) fail_msg("create Job %s: %s", name, e.message);
    json_decref(job);
}

/* The Job ns/name as the API has it now (NULL when absent). */
static json_t *get_job(fx *f, const char *name)
{
    k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = NS, .name = name};
    json_t *out = NULL;
    k8s_error e;
    k8s_rc rc = k8s_get(f->cl, &ref, &out, &e);
    if (rc == K8S_E_NOT_FOUND) return NULL;
    if (rc != K8S_OK) fail_msg("get Job %s: %s", name, e.message);
    return out;
}

static const char *str_in(const json_t *o, const char *a, const char *b, const char *c)
{
    const json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    if (c) v = json_object_get(v, c);
    return json_string_value(v);
}

static bool job_suspended(const json_t *job)
{
    return json_is_true(json_object_get(json_object_get(job, "spec"), "suspend"));
}

/* ---- requests and polls ---- */

typedef struct req_buf {
    exec_request q;
    char *job_dir;
} req_buf;

static const char *const placed_nodes[] = {GPU_NODE};
#define PLACEMENT "{\"nodes\":[\"" GPU_NODE "\"],\"gpuType\":\"L4-24GB\"}"

/* Attempt `attempt` of job `name` of team-a, adopting the user's Job adopt
 * (NULL = lathe's own Job), placed on the GPU node with one GPU. */
static void req_init(fx *f, req_buf *r, const char *name, const char *adopt, int attempt)
{
    memset(r, 0, sizeof *r);
    r->job_dir = path_join(f->dir, name);
    r->q.job_dir = r->job_dir;
    r->q.attempt = attempt;
    r->q.no_retry_codes = EXEC_BUILTIN_NO_RETRY;
    r->q.n_no_retry_codes = 1;
    exec_cluster_req *c = &r->q.cluster;
    c->job_id = 1;
    c->team = NS;
    c->name = name;
    c->builtin = true;
    c->nnodes = 1;
    c->gpus_per_node = 1;
    c->gpu_product = "NVIDIA-L4";
    c->nodes = placed_nodes;
    c->n_nodes = 1;
    c->grace = 5;
    c->adopt = adopt;
    c->placement_json = PLACEMENT;
}

static void req_free(req_buf *r) { free(r->job_dir); }

static char *read_log(const exec_handle *h)
{
    size_t len;
    char err[256];
    char *text = file_read_all(h->log_path, 1 << 20, &len, err, sizeof err);
    return text ? text : xstrdup("");
}

static size_t count_of(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* Polls until the attempt runs with its pod up and its log holds text
 * (text NULL: until its pod runs). */
static void wait_running(exec_handle *h, const char *text)
{
    double end = et_now() + WAIT_LIMIT;
    exec_status st;
    exec_update up;
    for (;;) {
        exec_poll(h, et_now(), &st, &up);
        if (st.phase != EXEC_RUNNING) fail_msg("attempt %d ended: %s", h->attempt, st.reason);
        char *log = read_log(h);
        bool there = !text || strstr(log, text);
        free(log);
        if (there && st.waiting[0] == '\0') return;
        if (et_now() > end) fail_msg("attempt %d does not run (%s)", h->attempt, st.waiting);
        et_nap(0.2);
    }
}

/* Polls until the attempt ends; its status in *st. */
static void wait_end(exec_handle *h, exec_status *st)
{
    double end = et_now() + WAIT_LIMIT;
    exec_update up;
    for (;;) {
        exec_poll(h, et_now(), st, &up);
        if (st->phase != EXEC_RUNNING) return;
        if (et_now() > end) fail_msg("attempt %d did not end (%s)", h->attempt, st->waiting);
        et_nap(0.2);
    }
}

/* GPUs of the GPU node that pods lathe does not count hold. */
static int foreign_gpus(fx *f)
{
    exec_k8s_node *nodes;
    size_t n;
    exec_k8s_nodes(f->be, &nodes, &n);
    exec_k8s_node *gpu = exec_k8s_node_find(nodes, n, GPU_NODE);
    int foreign = gpu ? gpu->foreign : -1;
    exec_k8s_nodes_free(nodes, n);
    return foreign;
}

/* ---- a user's Job ---- */

static void test_adopt_runs_to_success(void **state)
{
    fx *f = need(state);
    char err[1024];
    req_buf r;

    /* absent, or without lathe's label: refused at prepare, saying why */
    req_init(f, &r, "ghost", "ghost", 1);
    assert_int_equal(exec_prepare(f->be, &r.q, err, sizeof err), EXEC_E_INVALID);
    assert_non_null(strstr(err, "no Job ghost in namespace " NS));
    req_free(&r);
    user_job(f, "unlabelled", NULL, true, 0, "true");
    req_init(f, &r, "unlabelled", "unlabelled", 1);
    assert_int_equal(exec_prepare(f->be, &r.q, err, sizeof err), EXEC_E_INVALID);
    assert_non_null(strstr(err, "has no label " K8S_LABEL_QUEUE));
    req_free(&r);

    user_job(f, "user-ok", "default", true, 1, "echo hello from the user; sleep 1; echo bye");
    req_init(f, &r, "user-ok", "user-ok", 1);
    assert_int_equal(exec_prepare(f->be, &r.q, err, sizeof err), EXEC_OK);
    json_t *job = get_job(f, "user-ok");
    assert_true(job_suspended(job)); /* prepare made nothing, changed nothing */
    json_decref(job);

    exec_handle *h = NULL;
    if (exec_start(f->be, &r.q, &h, err, sizeof err) != EXEC_OK) fail_msg("start: %s", err);
    job = get_job(f, "user-ok");
    assert_false(job_suspended(job));
    assert_string_equal(str_in(job, "metadata", "annotations", K8S_ANNOT_PLACEMENT), PLACEMENT);
    /* lathe's placement merged into the user's own selector */
    json_t *sel = json_object_get(json_object_get(json_object_get(json_object_get(job, "spec"), "template"),
                                                  "spec"),
                                  "nodeSelector");
    assert_string_equal(json_string_value(json_object_get(sel, "kubernetes.io/os")), "linux");
    assert_string_equal(json_string_value(json_object_get(sel, "nvidia.com/gpu.product")), "NVIDIA-L4");
    json_decref(job);

    exec_status st;
    wait_end(h, &st);
    assert_int_equal(st.phase, EXEC_EXITED);
    assert_int_equal(st.end, EXEC_END_SUCCEEDED);
    char *log = read_log(h);
    assert_int_equal(count_of(log, "hello from the user"), 1); /* container "main", followed */
    assert_int_equal(count_of(log, "bye"), 1);
    free(log);
    exec_release(h);

    /* never deleted; unprepare leaves it too */
    assert_int_equal(exec_unprepare(f->be, &r.q, err, sizeof err), EXEC_OK);
    job = get_job(f, "user-ok");
    assert_non_null(job);
    json_decref(job);
    /* a finished Job cannot run again: a later attempt is refused, saying why */
    r.q.attempt = 2;
    assert_int_equal(exec_start(f->be, &r.q, &h, err, sizeof err), EXEC_E_INVALID);
    assert_non_null(strstr(err, "has finished (Complete)"));
    req_free(&r);
}

static void test_adopt_cancel_and_again(void **state)
{
    fx *f = need(state);
    char err[1024];
    req_buf r;
    /* runs until stopped, or fails at once (exit 3) once the flag file is there */
    char *flag = path_join(f->dir, "fail-now");
    char *script = xasprintf("echo started; [ -e %s ] && exit 3; exec sleep 300", flag);
    user_job(f, "user-long", "default", true, 1, script);
    free(script);
    /* a labelled Job its user let run without lathe: its GPU is foreign */
    user_job(f, "user-rogue", "default", false, 1, "exec sleep 300");
    req_init(f, &r, "user-long", "user-long", 1);
    assert_int_equal(exec_prepare(f->be, &r.q, err, sizeof err), EXEC_OK);
    exec_handle *h = NULL;
    if (exec_start(f->be, &r.q, &h, err, sizeof err) != EXEC_OK) fail_msg("start: %s", err);
    wait_running(h, "started");
    double end = et_now() + WAIT_LIMIT;
    while (foreign_gpus(f) != 1 && et_now() < end) et_nap(0.2);
    assert_int_equal(foreign_gpus(f), 1); /* the rogue's; lathe's attempt is not counted twice */

    assert_int_equal(exec_cancel(h, et_now(), 5, err, sizeof err), EXEC_OK);
    exec_status st;
    wait_end(h, &st);
    assert_int_equal(st.phase, EXEC_EXITED);
    assert_int_equal(st.end, EXEC_END_STOPPED);
    assert_true(st.term_sent);
    exec_release(h);
    json_t *job = get_job(f, "user-long");
    assert_non_null(job); /* suspended, not deleted */
    assert_true(job_suspended(job));
    json_decref(job);

    /* the next attempt admits the same Job again and sees its own pod only */
    req_free(&r);
    req_init(f, &r, "user-long", "user-long", 2);
    assert_int_equal(exec_prepare(f->be, &r.q, err, sizeof err), EXEC_OK);
    if (exec_start(f->be, &r.q, &h, err, sizeof err) != EXEC_OK) fail_msg("start again: %s", err);
    job = get_job(f, "user-long");
    assert_false(job_suspended(job));
    json_decref(job);
    wait_running(h, "started");
    char *log = read_log(h);
    assert_int_equal(count_of(log, "started"), 1);
    free(log);
    char *text = exec_handle_json(h);
    json_t *o = json_loads(text, 0, NULL);
    assert_true(json_is_true(json_object_get(o, "adopt")));
    assert_int_equal(json_array_size(json_object_get(o, "stale")), 1); /* attempt 1's pod */
    json_decref(o);
    free(text);
    assert_int_equal(exec_cancel(h, et_now(), 5, err, sizeof err), EXEC_OK);
    wait_end(h, &st);
    assert_int_equal(st.end, EXEC_END_STOPPED);
    exec_release(h);
    req_free(&r);

    /* a third admission that fails is judged by its own pod, not by the
     * stopped pods (exit 143) of the attempts before */
    assert_int_equal(file_write_atomic(flag, "", 0), 0);
    req_init(f, &r, "user-long", "user-long", 3);
    if (exec_start(f->be, &r.q, &h, err, sizeof err) != EXEC_OK) fail_msg("start 3: %s", err);
    wait_end(h, &st);
    assert_int_equal(st.end, EXEC_END_FAILED);
    assert_int_equal(st.exit_code, 3);
    exec_release(h);
    job = get_job(f, "user-long");
    assert_non_null(job); /* failed, and still there */
    json_decref(job);
    req_free(&r);
    free(flag);

    k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = NS, .name = "user-rogue"};
    k8s_error e;
    assert_int_equal(k8s_delete(f->cl, &ref, "Background", 0, &e), K8S_OK);
}

/* ---- operator mode's owner ---- */

static void test_owner_adoption(void **state)
{
    fx *f = need(state);
    char err[1024];
    /* the custom resource stands in as a ConfigMap: the garbage collector
     * only needs an owner with that uid */
    k8s_ref cm = {.api = "v1", .resource = "configmaps", .ns = NS, .name = "qwen-owner"};
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                            "metadata", "name", "qwen-owner", "namespace", NS);
    json_t *owner = NULL;
    k8s_error e;
    if (k8s_create(f->cl, &cm, obj, &owner, &e) != K8S_OK) fail_msg("owner: %s", e.message);
    json_decref(obj);
    char *uid = xstrdup(str_in(owner, "metadata", "uid", NULL));
    json_decref(owner);

    req_buf r;
    req_init(f, &r, "qwen", NULL, 1);
    r.q.cluster.job_id = 7;
    r.q.cluster.owner.api_version = "v1";
    r.q.cluster.owner.kind = "ConfigMap";
    r.q.cluster.owner.name = "qwen-owner";
    r.q.cluster.owner.uid = uid;
    if (exec_prepare(f->be, &r.q, err, sizeof err) != EXEC_OK) fail_msg("prepare: %s", err);
    json_t *job = get_job(f, "lathe-qwen-1");
    assert_non_null(job);
    assert_string_equal(str_in(job, "metadata", "labels", K8S_LABEL_OWNER_UID), uid);
    assert_string_equal(str_in(job, "metadata", "labels", K8S_LABEL_JOB_ID), "7");
    json_t *ref0 = json_array_get(json_object_get(json_object_get(job, "metadata"), "ownerReferences"), 0);
    assert_string_equal(json_string_value(json_object_get(ref0, "uid")), uid);
    assert_true(json_is_true(json_object_get(ref0, "controller")));
    json_decref(job);

    /* a cache rebuilt from the API numbers the job anew: the owner says it is the same */
    r.q.cluster.job_id = 99;
    if (exec_prepare(f->be, &r.q, err, sizeof err) != EXEC_OK) fail_msg("prepare again: %s", err);
    /* another owner's attempt of the same name is refused (created, 409, read, compared) */
    r.q.cluster.owner.uid = "0b4ac2f7-0000-4000-8000-000000000000";
    assert_int_equal(exec_prepare(f->be, &r.q, err, sizeof err), EXEC_E_INVALID);
    assert_non_null(strstr(err, "is not attempt 1 of ConfigMap qwen-owner"));
    /* unprepare compares the owner too: the right one deletes it */
    assert_int_equal(exec_unprepare(f->be, &r.q, err, sizeof err), EXEC_OK);
    job = get_job(f, "lathe-qwen-1");
    assert_non_null(job);
    json_decref(job);
    r.q.cluster.owner.uid = uid;
    assert_int_equal(exec_unprepare(f->be, &r.q, err, sizeof err), EXEC_OK);
    double end = et_now() + WAIT_LIMIT;
    while ((job = get_job(f, "lathe-qwen-1")) && et_now() < end) {
        json_decref(job);
        et_nap(0.2);
    }
    assert_null(job);

    /* the ownerReference works: the owner's deletion takes its Job with it */
    r.q.attempt = 2;
    if (exec_prepare(f->be, &r.q, err, sizeof err) != EXEC_OK) fail_msg("prepare 2: %s", err);
    assert_int_equal(k8s_delete(f->cl, &cm, "Background", -1, &e), K8S_OK);
    end = et_now() + WAIT_LIMIT;
    while ((job = get_job(f, "lathe-qwen-2")) && et_now() < end) {
        json_decref(job);
        et_nap(0.2);
    }
    assert_null(job);
    req_free(&r);
    free(uid);
}

/* ---- a handle made from what the API shows ---- */

static void test_adopt_handle_attaches(void **state)
{
    fx *f = need(state);
    char err[1024];
    user_job(f, "user-attach", "default", true, 1, "echo one; sleep 6; echo two");
    req_buf r;
    req_init(f, &r, "user-attach", "user-attach", 1);
    exec_handle *h = NULL;
    if (exec_start(f->be, &r.q, &h, err, sizeof err) != EXEC_OK) fail_msg("start: %s", err);
    wait_running(h, "one");
    double started = h->started_at;
    exec_release(h); /* the server goes; the attempt runs on */

    /* a second backend, as a server that rebuilt its state from the API */
    exec_backend *be2 = exec_k8s_new(&f->k, f->cl, 30, err, sizeof err);
    if (!be2) fail_msg("exec_k8s_new: %s", err);
    assert_ptr_equal(exec_k8s_client(be2), f->cl);
    char *text = exec_k8s_adopt_handle(be2, &r.q, started);
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    assert_string_equal(str_in(o, "backend", NULL, NULL), "k8s");
    assert_string_equal(str_in(o, "namespace", NULL, NULL), NS);
    assert_string_equal(str_in(o, "job", NULL, NULL), "user-attach");
    assert_string_equal(str_in(o, "job_dir", NULL, NULL), r.job_dir);
    assert_int_equal(json_integer_value(json_object_get(o, "attempt")), 1);
    assert_true(json_is_true(json_object_get(o, "adopt")));
    assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "no_retry"), 0)),
                     EXEC_BUILTIN_NO_RETRY[0]);
    json_decref(o);
    if (exec_attach(be2, text, &h, err, sizeof err) != EXEC_OK) fail_msg("attach: %s", err);
    free(text);
    assert_true(h->started_at == started);
    exec_status st;
    exec_update up;
    exec_poll(h, et_now(), &st, &up);
    assert_int_equal(st.phase, EXEC_RUNNING); /* it attached to the running attempt */
    wait_end(h, &st);
    assert_int_equal(st.end, EXEC_END_SUCCEEDED);
    char *log = read_log(h);
    assert_int_equal(count_of(log, "one"), 1); /* resumed where the first server was */
    assert_int_equal(count_of(log, "two"), 1);
    free(log);
    exec_release(h);
    exec_backend_free(be2);

    /* lathe's own Job: the name the backend gives it */
    req_buf own;
    req_init(f, &own, "qwen", NULL, 3);
    text = exec_k8s_adopt_handle(f->be, &own.q, 0);
    o = json_loads(text, 0, NULL);
    assert_string_equal(str_in(o, "job", NULL, NULL), "lathe-qwen-3");
    assert_null(json_object_get(o, "adopt"));
    json_decref(o);
    free(text);
    req_free(&own);
    req_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adopt_runs_to_success),
        cmocka_unit_test(test_adopt_cancel_and_again),
        cmocka_unit_test(test_owner_adoption),
        cmocka_unit_test(test_adopt_handle_attaches),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
