/* test_k8s_render.c: the objects of an attempt and of a cluster's setup
 * (lib/k8s/k8s_render_*.c), field by field: the Job (suspend, labels,
 * podFailurePolicy, deadlines, Indexed with subdomain, NODE_RANK and
 * MASTER_ADDR for multi-node jobs, volumes present and absent, placement,
 * tolerations, resources as quantities, env order), the headless Service,
 * the admission patch, the quantity formatter, Job names (k8s_job_name),
 * and the cluster's Namespaces, quotas, LimitRanges, PVCs and
 * PriorityClasses. Operator mode's owner (label and ownerReference) and
 * the placement annotation of the admission are also checked against the
 * official strict schemas with LATHE_SHARED_DIR/tools/validate-k8s when it is
 * there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "k8s/k8s.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---- */

/* The value at a dotted path; a part that is a number indexes an array
 * ("spec.template.spec.containers.0.env"). NULL when absent. */
static json_t *at(const json_t *v, const char *path)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = (json_t *)v;
    for (char *save = NULL, *part = strtok_r(buf, ".", &save); part && cur;
         part = strtok_r(NULL, ".", &save)) {
        if (json_is_array(cur)) {
            char *end;
            long i = strtol(part, &end, 10);
            cur = *end ? NULL : json_array_get(cur, (size_t)i);
        } else {
            cur = json_object_get(cur, part);
        }
    }
    return cur;
}

/* The same, but a key with dots in it comes after a '|': "metadata.labels|lathe.dev/job". */
static json_t *at_key(const json_t *v, const char *path, const char *key)
{
    return json_object_get(at(v, path), key);
}

static const char *str_at(const json_t *v, const char *path)
{
    return json_string_value(at(v, path));
}

static long long int_at(const json_t *v, const char *path)
{
    json_t *x = at(v, path);
    assert_non_null(x);
    assert_true(json_is_integer(x));
    return (long long)json_integer_value(x);
}

/* The env entry of a name in the trainer container (NULL when absent);
 * *index receives its position. */
static json_t *env_of(const json_t *job, const char *name, size_t *index)
{
    json_t *env = at(job, "spec.template.spec.containers.0.env");
    size_t i;
    json_t *e;
    json_array_foreach(env, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0) {
            if (index) *index = i;
            return e;
        }
    }
    return NULL;
}

static const char *env_value(const json_t *job, const char *name)
{
    return json_string_value(json_object_get(env_of(job, name, NULL), "value"));
}

static size_t env_count(const json_t *job, const char *name)
{
    json_t *env = at(job, "spec.template.spec.containers.0.env");
    size_t i, n = 0;
    json_t *e;
    json_array_foreach(env, i, e) n += strcmp(json_string_value(json_object_get(e, "name")), name) == 0;
    return n;
}

/* The item of an array of {name: ...} objects with that name. */
static json_t *named(const json_t *arr, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && strcmp(n, name) == 0) return e;
    }
    return NULL;
}

/* RFC 7386: target with patch merged in (a new value; neither is changed). */
static json_t *merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch)) return json_deep_copy(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v)
    {
        if (json_is_null(v)) json_object_del(out, k);
        else json_object_set_new(out, k, merge_patch(json_object_get(out, k), v));
    }
    return out;
}

/* Fails unless validate-k8s (the official v1.32 strict schemas, and the API
 * server's name rules) accepts obj; nothing is checked where the tool or
 * python3 is not there. */
static void assert_valid(const json_t *obj)
{
    static bool said;
    char *tool = xasprintf("%s/tools/validate-k8s", LATHE_SHARED_DIR);
    if (!file_exists(tool) || !file_exists("/usr/bin/python3")) {
        if (!said)
            fprintf(stderr, "SKIP: the validate-k8s checks (%s; give -DLATHE_SHARED_DIR=DIR, the "
                    "folder that holds tools/validate-k8s)\n",
                    !*LATHE_SHARED_DIR ? "LATHE_SHARED_DIR is not set"
                    : file_exists("/usr/bin/python3") ? "tools/validate-k8s is not there"
                                                      : "no /usr/bin/python3");
        said = true;
        free(tool);
        return;
    }
    char path[] = "/tmp/lathe-render-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char *text = json_dumps(obj, JSON_INDENT(1));
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    char *cmd = xasprintf("/usr/bin/python3 '%s' -q '%s'", tool, path);
    int rc = system(cmd);
    unlink(path);
    if (rc != 0) fail_msg("validate-k8s refused:\n%s", text);
    free(cmd);
    free(text);
    free(tool);
}

static char *argv_default[] = {"lathe", "train", "/etc/lathe/spec.yaml"};
static const char *env_default[] = {"LATHE_JOB=team-a/qwen", "CHECKPOINT_DIR=/checkpoints/team-a/qwen"};
static const int codes_default[] = {2};

/* A single-node GPU job with everything given. */
static void params_default(k8s_job_params *p, spec_k8s *k)
{
    spec_k8s_defaults(k);
    memset(p, 0, sizeof *p);
    p->name = "lathe-qwen-1";
    p->namespace_ = "team-a";
    p->job_id = 42;
    p->job = "qwen";
    p->team = "team-a";
    p->attempt = 1;
    p->image = "registry.example.com/lathe:1.0";
    p->argv = argv_default;
    p->argc = 3;
    p->env = env_default;
    p->n_env = 2;
    p->nnodes = 1;
    p->gpus_per_node = 2;
    p->cpu = 4;
    p->memory = 32.0 * 1024 * 1024 * 1024;
    p->gpu_product = "NVIDIA-A100-SXM4-80GB";
    p->priority_class = "high-priority";
    p->checkpoint_pvc = "lathe-checkpoints";
    p->checkpoint_subpath = "team-a/qwen";
    p->spec_yaml = "apiVersion: lathe/v1\nkind: LoRATrainingJob\n";
    p->grace = 119.2;
    p->max_duration = 3600.5;
    p->fail_codes = codes_default;
    p->n_fail_codes = 1;
    p->suspend = true;
    p->settings = k;
}

/* ---- the Job ---- */

static void test_job_top(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    json_t *job = k8s_render_job(&p);
    assert_string_equal(str_at(job, "apiVersion"), "batch/v1");
    assert_string_equal(str_at(job, "kind"), "Job");
    assert_string_equal(str_at(job, "metadata.name"), "lathe-qwen-1");
    assert_string_equal(str_at(job, "metadata.namespace"), "team-a");
    assert_true(json_is_true(at(job, "spec.suspend")));
    assert_int_equal(int_at(job, "spec.backoffLimit"), 0);
    assert_string_equal(str_at(job, "spec.podReplacementPolicy"), "Failed");
    assert_int_equal(int_at(job, "spec.activeDeadlineSeconds"), 3601);
    assert_int_equal(int_at(job, "spec.ttlSecondsAfterFinished"), 86400);
    assert_int_equal(int_at(job, "spec.completions"), 1);
    assert_int_equal(int_at(job, "spec.parallelism"), 1);
    assert_null(at(job, "spec.completionMode"));
    assert_null(at(job, "spec.template.spec.subdomain"));
    assert_string_equal(str_at(job, "spec.template.spec.restartPolicy"), "Never");
    assert_int_equal(int_at(job, "spec.template.spec.terminationGracePeriodSeconds"), 120);
    assert_string_equal(str_at(job, "spec.template.spec.priorityClassName"), "high-priority");
    assert_null(at(job, "spec.template.spec.serviceAccountName"));
    /* no service account chosen: no token of the namespace's default one */
    assert_true(json_is_false(at(job, "spec.template.spec.automountServiceAccountToken")));
    json_decref(job);

    /* admitted, no deadline, finished Jobs kept, a service account */
    p.suspend = false;
    p.max_duration = 0;
    p.priority_class = NULL;
    k.ttl_after_finished = -1;
    k.service_account = xstrdup("lathe-trainer");
    job = k8s_render_job(&p);
    assert_true(json_is_false(at(job, "spec.suspend")));
    assert_null(at(job, "spec.activeDeadlineSeconds"));
    assert_null(at(job, "spec.ttlSecondsAfterFinished"));
    assert_null(at(job, "spec.template.spec.priorityClassName"));
    assert_string_equal(str_at(job, "spec.template.spec.serviceAccountName"), "lathe-trainer");
    assert_true(json_is_true(at(job, "spec.template.spec.automountServiceAccountToken")));
    json_decref(job);

    /* the team's service account (its policy) wins over the settings' */
    p.service_account = "team-a-trainer";
    job = k8s_render_job(&p);
    assert_string_equal(str_at(job, "spec.template.spec.serviceAccountName"), "team-a-trainer");
    assert_true(json_is_true(at(job, "spec.template.spec.automountServiceAccountToken")));
    /* whatever the account, the container stays locked down */
    assert_true(json_is_false(
        at(job, "spec.template.spec.containers.0.securityContext.allowPrivilegeEscalation")));
    assert_true(json_is_true(at(job, "spec.template.spec.securityContext.runAsNonRoot")));
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_job_labels(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    json_t *job = k8s_render_job(&p);
    const char *where[] = {"metadata.labels", "spec.template.metadata.labels"};
    for (int i = 0; i < 2; i++) {
        json_t *l = at(job, where[i]);
        assert_non_null(l);
        assert_string_equal(json_string_value(json_object_get(l, K8S_LABEL_MANAGED)), "lathe");
        assert_string_equal(json_string_value(json_object_get(l, K8S_LABEL_JOB_ID)), "42");
        assert_string_equal(json_string_value(json_object_get(l, K8S_LABEL_JOB)), "qwen");
        assert_string_equal(json_string_value(json_object_get(l, K8S_LABEL_TEAM)), "team-a");
        assert_string_equal(json_string_value(json_object_get(l, K8S_LABEL_ATTEMPT)), "1");
        assert_null(json_object_get(l, K8S_LABEL_EXPERIMENT));
    }
    /* the spec in the pod template's annotations */
    assert_string_equal(json_string_value(at_key(job, "spec.template.metadata.annotations",
                                                 K8S_ANNOT_SPEC)),
                        p.spec_yaml);
    json_decref(job);

    p.experiment = "sweep-rank";
    p.attempt = 3;
    job = k8s_render_job(&p);
    assert_string_equal(json_string_value(at_key(job, "metadata.labels", K8S_LABEL_EXPERIMENT)),
                        "sweep-rank");
    assert_string_equal(
        json_string_value(at_key(job, "spec.template.metadata.labels", K8S_LABEL_EXPERIMENT)),
        "sweep-rank");
    assert_string_equal(json_string_value(at_key(job, "metadata.labels", K8S_LABEL_ATTEMPT)), "3");
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_job_failure_policy(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    static const int codes[] = {3, 2, 0, 3, 1};
    p.fail_codes = codes;
    p.n_fail_codes = 5;
    json_t *job = k8s_render_job(&p);
    json_t *rules = at(job, "spec.podFailurePolicy.rules");
    assert_int_equal(json_array_size(rules), 2);
    assert_string_equal(str_at(rules, "0.action"), "FailJob");
    assert_string_equal(str_at(rules, "0.onExitCodes.containerName"), "trainer");
    assert_string_equal(str_at(rules, "0.onExitCodes.operator"), "In");
    json_t *vals = at(rules, "0.onExitCodes.values");
    assert_int_equal(json_array_size(vals), 3); /* sorted, once each, no 0 */
    assert_int_equal(int_at(vals, "0"), 1);
    assert_int_equal(int_at(vals, "1"), 2);
    assert_int_equal(int_at(vals, "2"), 3);
    assert_string_equal(str_at(rules, "1.action"), "FailJob");
    assert_string_equal(str_at(rules, "1.onPodConditions.0.type"), "DisruptionTarget");
    assert_string_equal(str_at(rules, "1.onPodConditions.0.status"), "True");
    json_decref(job);

    p.n_fail_codes = 0;
    job = k8s_render_job(&p);
    rules = at(job, "spec.podFailurePolicy.rules");
    assert_int_equal(json_array_size(rules), 1);
    assert_string_equal(str_at(rules, "0.onPodConditions.0.type"), "DisruptionTarget");
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_job_pod_security_and_container(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    k.run_as_user = 1234;
    k.run_as_group = 2345;
    k.fs_group = 3456;
    k.image_pull_policy = xstrdup("IfNotPresent");
    json_t *job = k8s_render_job(&p);
    json_t *sc = at(job, "spec.template.spec.securityContext");
    assert_true(json_is_true(json_object_get(sc, "runAsNonRoot")));
    assert_int_equal(int_at(sc, "runAsUser"), 1234);
    assert_int_equal(int_at(sc, "runAsGroup"), 2345);
    assert_int_equal(int_at(sc, "fsGroup"), 3456);
    assert_string_equal(str_at(sc, "seccompProfile.type"), "RuntimeDefault");
    json_t *c = at(job, "spec.template.spec.containers.0");
    assert_int_equal(json_array_size(at(job, "spec.template.spec.containers")), 1);
    assert_string_equal(str_at(c, "name"), K8S_CONTAINER);
    assert_string_equal(str_at(c, "image"), "registry.example.com/lathe:1.0");
    assert_string_equal(str_at(c, "imagePullPolicy"), "IfNotPresent");
    json_t *cmd = at(c, "command");
    assert_int_equal(json_array_size(cmd), 3);
    assert_string_equal(str_at(cmd, "0"), "lathe");
    assert_string_equal(str_at(cmd, "1"), "train");
    assert_string_equal(str_at(cmd, "2"), "/etc/lathe/spec.yaml");
    assert_null(at(c, "args"));
    assert_true(json_is_false(at(c, "securityContext.allowPrivilegeEscalation")));
    assert_string_equal(str_at(c, "securityContext.capabilities.drop.0"), "ALL");
    /* resources */
    assert_int_equal(json_integer_value(at_key(c, "resources.requests", "nvidia.com/gpu")), 2);
    assert_int_equal(json_integer_value(at_key(c, "resources.limits", "nvidia.com/gpu")), 2);
    assert_string_equal(str_at(c, "resources.requests.cpu"), "4");
    assert_string_equal(str_at(c, "resources.requests.memory"), "32Gi");
    assert_string_equal(str_at(c, "resources.limits.memory"), "32Gi");
    assert_null(at(c, "resources.limits.cpu"));
    json_decref(job);

    /* no image in the request: the settings' image; a CPU job: no GPU resources, no toleration */
    p.image = NULL;
    p.gpus_per_node = 0;
    p.cpu = 0.5;
    p.memory = 1000000000;
    job = k8s_render_job(&p);
    c = at(job, "spec.template.spec.containers.0");
    assert_string_equal(str_at(c, "image"), "lathe:latest");
    assert_null(at_key(c, "resources.requests", "nvidia.com/gpu"));
    assert_null(at_key(c, "resources.limits", "nvidia.com/gpu"));
    assert_string_equal(str_at(c, "resources.requests.cpu"), "500m");
    assert_string_equal(str_at(c, "resources.requests.memory"), "1000000000");
    assert_null(at(job, "spec.template.spec.tolerations"));
    assert_string_equal(env_value(job, "NPROC_PER_NODE"), "1");
    json_decref(job);

    /* nothing asked: no resources at all */
    p.cpu = 0;
    p.memory = 0;
    job = k8s_render_job(&p);
    assert_null(at(job, "spec.template.spec.containers.0.resources"));
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_job_env_single_node(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    json_t *job = k8s_render_job(&p);
    size_t i0 = 99, i1 = 99, in = 99;
    assert_non_null(env_of(job, "LATHE_JOB", &i0));
    assert_non_null(env_of(job, "CHECKPOINT_DIR", &i1));
    assert_non_null(env_of(job, "NNODES", &in));
    assert_true(i0 == 0 && i1 == 1 && in == 2); /* p->env first, in order */
    assert_string_equal(env_value(job, "LATHE_JOB"), "team-a/qwen");
    assert_string_equal(env_value(job, "NNODES"), "1");
    assert_string_equal(env_value(job, "NODE_RANK"), "0");
    assert_string_equal(env_value(job, "NPROC_PER_NODE"), "2");
    assert_string_equal(env_value(job, "MASTER_ADDR"), "127.0.0.1");
    assert_string_equal(env_value(job, "MASTER_PORT"), "29500");
    assert_string_equal(env_value(job, "HF_HOME"), "/models");
    assert_string_equal(env_value(job, "MODELSCOPE_CACHE"), "/models");
    json_decref(job);

    /* no model PVC: no cache variables; another port */
    free(k.model_pvc);
    k.model_pvc = xstrdup("");
    k.master_port = 31000;
    job = k8s_render_job(&p);
    assert_null(env_of(job, "HF_HOME", NULL));
    assert_null(env_of(job, "MODELSCOPE_CACHE", NULL));
    assert_string_equal(env_value(job, "MASTER_PORT"), "31000");
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_job_env_override(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    static const char *env[] = {"NNODES=7", "FOO=1", "BAR=x=y", "FOO=2", "EMPTY=", "=bad",
                                "MASTER_PORT=1"};
    p.env = env;
    p.n_env = sizeof env / sizeof env[0];
    json_t *job = k8s_render_job(&p);
    size_t i;
    assert_int_equal(env_count(job, "FOO"), 1);
    assert_string_equal(env_value(job, "FOO"), "2"); /* the last value ... */
    assert_non_null(env_of(job, "FOO", &i));
    assert_int_equal(i, 1); /* ... in the first place */
    assert_string_equal(env_value(job, "BAR"), "x=y");
    assert_string_equal(env_value(job, "EMPTY"), "");
    assert_int_equal(env_count(job, "NNODES"), 1);
    assert_string_equal(env_value(job, "NNODES"), "1"); /* lathe's own win */
    assert_non_null(env_of(job, "NNODES", &i));
    assert_int_equal(i, 0);
    assert_string_equal(env_value(job, "MASTER_PORT"), "29500");
    assert_int_equal(env_count(job, "MASTER_PORT"), 1);
    assert_int_equal(env_count(job, ""), 0);
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_job_multi_node(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    p.nnodes = 2;
    p.gpus_per_node = 8;
    json_t *job = k8s_render_job(&p);
    assert_int_equal(int_at(job, "spec.completions"), 2);
    assert_int_equal(int_at(job, "spec.parallelism"), 2);
    assert_string_equal(str_at(job, "spec.completionMode"), "Indexed");
    assert_string_equal(str_at(job, "spec.template.spec.subdomain"), "lathe-qwen-1");
    assert_string_equal(env_value(job, "NNODES"), "2");
    json_t *rank = env_of(job, "NODE_RANK", NULL);
    assert_non_null(rank);
    assert_null(json_object_get(rank, "value"));
    assert_string_equal(str_at(rank, "valueFrom.fieldRef.fieldPath"),
                        "metadata.annotations['batch.kubernetes.io/job-completion-index']");
    assert_string_equal(env_value(job, "MASTER_ADDR"), "lathe-qwen-1-0.lathe-qwen-1");
    assert_string_equal(env_value(job, "NPROC_PER_NODE"), "8");

    json_t *svc = k8s_render_service(&p);
    assert_non_null(svc);
    assert_string_equal(str_at(svc, "apiVersion"), "v1");
    assert_string_equal(str_at(svc, "kind"), "Service");
    assert_string_equal(str_at(svc, "metadata.name"), "lathe-qwen-1");
    assert_string_equal(str_at(svc, "metadata.namespace"), "team-a");
    assert_true(json_equal(at(svc, "metadata.labels"), at(job, "metadata.labels")));
    assert_string_equal(str_at(svc, "spec.clusterIP"), "None");
    assert_true(json_is_true(at(svc, "spec.publishNotReadyAddresses")));
    assert_string_equal(json_string_value(at_key(svc, "spec.selector",
                                                 "batch.kubernetes.io/job-name")),
                        "lathe-qwen-1");
    assert_string_equal(str_at(svc, "spec.ports.0.name"), "master");
    assert_int_equal(int_at(svc, "spec.ports.0.port"), 29500);
    json_decref(svc);
    json_decref(job);

    /* one node: no Service */
    p.nnodes = 1;
    assert_null(k8s_render_service(&p));
    p.nnodes = 0;
    assert_null(k8s_render_service(&p));
    job = k8s_render_job(&p);
    assert_int_equal(int_at(job, "spec.completions"), 1);
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_job_volumes(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    json_t *job = k8s_render_job(&p);
    json_t *vols = at(job, "spec.template.spec.volumes");
    json_t *mounts = at(job, "spec.template.spec.containers.0.volumeMounts");
    assert_int_equal(json_array_size(vols), 5);
    assert_int_equal(json_array_size(mounts), 5);

    json_t *v = named(vols, "checkpoints"), *m = named(mounts, "checkpoints");
    assert_string_equal(str_at(v, "persistentVolumeClaim.claimName"), "lathe-checkpoints");
    assert_string_equal(str_at(m, "mountPath"), "/checkpoints");
    assert_null(json_object_get(m, "subPath"));
    assert_null(json_object_get(m, "readOnly"));

    v = named(vols, "models");
    m = named(mounts, "models");
    assert_string_equal(str_at(v, "persistentVolumeClaim.claimName"), "lathe-models");
    assert_true(json_is_true(at(v, "persistentVolumeClaim.readOnly")));
    assert_string_equal(str_at(m, "mountPath"), "/models");
    assert_true(json_is_true(json_object_get(m, "readOnly")));

    v = named(vols, "data");
    m = named(mounts, "data");
    assert_string_equal(str_at(v, "persistentVolumeClaim.claimName"), "lathe-data");
    assert_string_equal(str_at(m, "mountPath"), "/data");
    assert_true(json_is_true(json_object_get(m, "readOnly")));

    v = named(vols, "spec");
    m = named(mounts, "spec");
    assert_string_equal(str_at(v, "downwardAPI.items.0.path"), "spec.yaml");
    assert_string_equal(str_at(v, "downwardAPI.items.0.fieldRef.fieldPath"),
                        "metadata.annotations['lathe.dev/spec']");
    assert_string_equal(str_at(m, "mountPath"), "/etc/lathe");
    assert_true(json_is_true(json_object_get(m, "readOnly")));

    v = named(vols, "dshm");
    m = named(mounts, "dshm");
    assert_string_equal(str_at(v, "emptyDir.medium"), "Memory");
    assert_string_equal(str_at(v, "emptyDir.sizeLimit"), "8Gi");
    assert_string_equal(str_at(m, "mountPath"), "/dev/shm");
    json_decref(job);

    /* other mounts */
    free(k.checkpoint_mount);
    k.checkpoint_mount = xstrdup("/ckpt");
    free(k.spec_mount);
    k.spec_mount = xstrdup("/spec");
    job = k8s_render_job(&p);
    mounts = at(job, "spec.template.spec.containers.0.volumeMounts");
    assert_string_equal(str_at(named(mounts, "checkpoints"), "mountPath"), "/ckpt");
    assert_string_equal(str_at(named(mounts, "spec"), "mountPath"), "/spec");
    json_decref(job);

    /* every optional volume absent */
    free(k.model_pvc);
    k.model_pvc = xstrdup("");
    free(k.data_pvc);
    k.data_pvc = NULL;
    k.shm_size = 0;
    p.spec_yaml = NULL;
    job = k8s_render_job(&p);
    vols = at(job, "spec.template.spec.volumes");
    assert_int_equal(json_array_size(vols), 1);
    assert_non_null(named(vols, "checkpoints"));
    assert_null(at(job, "spec.template.metadata.annotations"));
    json_decref(job);

    p.checkpoint_pvc = NULL;
    job = k8s_render_job(&p);
    assert_null(at(job, "spec.template.spec.volumes"));
    assert_null(at(job, "spec.template.spec.containers.0.volumeMounts"));
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_job_placement(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    /* a GPU product, no nodes, no rack */
    json_t *job = k8s_render_job(&p);
    json_t *ps = at(job, "spec.template.spec");
    assert_string_equal(json_string_value(at_key(ps, "nodeSelector", "nvidia.com/gpu.product")),
                        "NVIDIA-A100-SXM4-80GB");
    assert_int_equal(json_object_size(at(ps, "nodeSelector")), 1);
    assert_null(at(ps, "affinity"));
    json_t *tol = at(ps, "tolerations");
    assert_int_equal(json_array_size(tol), 1);
    assert_string_equal(str_at(tol, "0.key"), "nvidia.com/gpu");
    assert_string_equal(str_at(tol, "0.operator"), "Exists");
    assert_string_equal(str_at(tol, "0.effect"), "NoSchedule");
    json_decref(job);

    /* nodes and a rack: one term with both expressions */
    static const char *nodes[] = {"a100-01", "a100-02", "a100-01"};
    p.nodes = nodes;
    p.n_nodes = 3;
    p.rack = "a100-rack-1";
    job = k8s_render_job(&p);
    json_t *terms = at(job, "spec.template.spec.affinity.nodeAffinity."
                            "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
    assert_int_equal(json_array_size(terms), 1);
    json_t *ex = at(terms, "0.matchExpressions");
    assert_int_equal(json_array_size(ex), 2);
    assert_string_equal(str_at(ex, "0.key"), "kubernetes.io/hostname");
    assert_string_equal(str_at(ex, "0.operator"), "In");
    assert_int_equal(json_array_size(at(ex, "0.values")), 2); /* once each */
    assert_string_equal(str_at(ex, "0.values.0"), "a100-01");
    assert_string_equal(str_at(ex, "0.values.1"), "a100-02");
    assert_string_equal(str_at(ex, "1.key"), "rack-id");
    assert_string_equal(str_at(ex, "1.operator"), "In");
    assert_string_equal(str_at(ex, "1.values.0"), "a100-rack-1");
    json_decref(job);

    /* other labels from the settings; no product */
    free(k.rack_label);
    k.rack_label = xstrdup("topology.example.com/rack");
    free(k.gpu_product_label);
    k.gpu_product_label = xstrdup("gpu.example.com/product");
    p.n_nodes = 0;
    job = k8s_render_job(&p);
    ex = at(job, "spec.template.spec.affinity.nodeAffinity."
                 "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.0.matchExpressions");
    assert_int_equal(json_array_size(ex), 1);
    assert_string_equal(str_at(ex, "0.key"), "topology.example.com/rack");
    assert_non_null(at_key(job, "spec.template.spec.nodeSelector", "gpu.example.com/product"));
    json_decref(job);

    p.rack = NULL;
    p.gpu_product = NULL;
    job = k8s_render_job(&p);
    assert_null(at(job, "spec.template.spec.affinity"));
    assert_null(at(job, "spec.template.spec.nodeSelector"));
    json_decref(job);
    spec_k8s_free(&k);
}

static void test_admit_patch(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    static const char *nodes[] = {"a100-03"};
    p.nodes = nodes;
    p.n_nodes = 1;
    p.rack = "rack-2";
    json_t *patch = k8s_render_admit_patch(&p);
    assert_true(json_is_false(at(patch, "spec.suspend")));
    json_t *ts = at(patch, "spec.template.spec");
    assert_int_equal(json_object_size(ts), 2);
    assert_string_equal(json_string_value(at_key(ts, "nodeSelector", "nvidia.com/gpu.product")),
                        "NVIDIA-A100-SXM4-80GB");
    json_t *ex = at(ts, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                        "nodeSelectorTerms.0.matchExpressions");
    assert_int_equal(json_array_size(ex), 2);
    assert_string_equal(str_at(ex, "0.values.0"), "a100-03");
    assert_string_equal(str_at(ex, "1.values.0"), "rack-2");
    /* the patch's placement is the Job's */
    json_t *job = k8s_render_job(&p);
    assert_true(json_equal(at(ts, "affinity"), at(job, "spec.template.spec.affinity")));
    assert_true(json_equal(at(ts, "nodeSelector"), at(job, "spec.template.spec.nodeSelector")));
    json_decref(job);
    json_decref(patch);

    /* nothing wanted: both cleared */
    p.n_nodes = 0;
    p.rack = NULL;
    p.gpu_product = NULL;
    patch = k8s_render_admit_patch(&p);
    ts = at(patch, "spec.template.spec");
    assert_true(json_is_null(json_object_get(ts, "nodeSelector")));
    assert_true(json_is_null(json_object_get(ts, "affinity")));
    assert_int_equal(json_object_size(at(patch, "spec")), 2);
    assert_int_equal(json_object_size(patch), 1);
    json_decref(patch);
    spec_k8s_free(&k);
}

/* Operator mode: the custom resource owns the Job (label and
 * ownerReference); the store's id label stays when there is one. */
static void test_job_owner(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    const char *uid = "3f0e2a9c-6d1b-4c1e-9a7e-0b6f1d2c3e4f";
    p.owner.api_version = "training.example.com/v1";
    p.owner.kind = "LoRATrainingJob";
    p.owner.name = "qwen";
    p.owner.uid = uid;
    json_t *job = k8s_render_job(&p);
    const char *where[] = {"metadata.labels", "spec.template.metadata.labels"};
    for (int i = 0; i < 2; i++) {
        assert_string_equal(json_string_value(at_key(job, where[i], K8S_LABEL_OWNER_UID)), uid);
        assert_string_equal(json_string_value(at_key(job, where[i], K8S_LABEL_JOB_ID)), "42");
    }
    json_t *refs = at(job, "metadata.ownerReferences");
    assert_int_equal(json_array_size(refs), 1);
    assert_string_equal(str_at(refs, "0.apiVersion"), "training.example.com/v1");
    assert_string_equal(str_at(refs, "0.kind"), "LoRATrainingJob");
    assert_string_equal(str_at(refs, "0.name"), "qwen");
    assert_string_equal(str_at(refs, "0.uid"), uid);
    assert_true(json_is_true(at(refs, "0.controller")));
    assert_true(json_is_true(at(refs, "0.blockOwnerDeletion")));
    assert_null(at(job, "spec.template.metadata.ownerReferences"));
    assert_valid(job);
    json_decref(job);

    /* a multi-node attempt's Service has the label; its owner is the Job (set by the executor) */
    p.nnodes = 2;
    json_t *svc = k8s_render_service(&p);
    assert_string_equal(json_string_value(at_key(svc, "metadata.labels", K8S_LABEL_OWNER_UID)), uid);
    assert_null(at(svc, "metadata.ownerReferences"));
    json_decref(svc);
    p.nnodes = 1;

    /* no store id (a cache rebuilt from the API): the owner's uid alone */
    p.job_id = 0;
    job = k8s_render_job(&p);
    assert_null(at_key(job, "metadata.labels", K8S_LABEL_JOB_ID));
    assert_string_equal(json_string_value(at_key(job, "metadata.labels", K8S_LABEL_OWNER_UID)), uid);
    assert_valid(job);
    json_decref(job);

    /* a uid without the rest: the label, no reference (it would be refused) */
    p.owner.api_version = p.owner.kind = p.owner.name = NULL;
    job = k8s_render_job(&p);
    assert_string_equal(json_string_value(at_key(job, "metadata.labels", K8S_LABEL_OWNER_UID)), uid);
    assert_null(at(job, "metadata.ownerReferences"));
    json_decref(job);

    /* no owner: as before */
    p.owner.uid = NULL;
    job = k8s_render_job(&p);
    assert_null(at_key(job, "metadata.labels", K8S_LABEL_OWNER_UID));
    assert_null(at_key(job, "spec.template.metadata.labels", K8S_LABEL_OWNER_UID));
    assert_null(at(job, "metadata.ownerReferences"));
    json_decref(job);
    spec_k8s_free(&k);
}

/* The admission writes the placement into the Job's annotation; the Job
 * it makes of the suspended one is valid. */
static void test_admit_patch_placement(void **state)
{
    (void)state;
    spec_k8s k;
    k8s_job_params p;
    params_default(&p, &k);
    static const char *nodes[] = {"a100-03"};
    const char *placement = "{\"gpuType\":\"A100-80GB\",\"nodes\":[\"a100-03\"],\"rack\":\"rack-2\"}";
    json_t *created = k8s_render_job(&p); /* suspended, unplaced */
    p.nodes = nodes;
    p.n_nodes = 1;
    p.rack = "rack-2";
    p.placement_json = placement;
    json_t *patch = k8s_render_admit_patch(&p);
    assert_int_equal(json_object_size(patch), 2);
    json_t *ann = at(patch, "metadata.annotations");
    assert_int_equal(json_object_size(ann), 1);
    assert_string_equal(json_string_value(json_object_get(ann, K8S_ANNOT_PLACEMENT)), placement);
    assert_null(at(patch, "spec.template.metadata")); /* the Job's, not its pods' */
    assert_true(json_is_false(at(patch, "spec.suspend")));
    json_t *admitted = merge_patch(created, patch);
    assert_string_equal(json_string_value(at_key(admitted, "metadata.annotations", K8S_ANNOT_PLACEMENT)),
                        placement);
    assert_true(json_is_false(at(admitted, "spec.suspend")));
    assert_string_equal(str_at(admitted, "spec.template.spec.affinity.nodeAffinity."
                                         "requiredDuringSchedulingIgnoredDuringExecution."
                                         "nodeSelectorTerms.0.matchExpressions.0.values.0"),
                        "a100-03");
    assert_valid(admitted);
    json_decref(admitted);
    json_decref(patch);
    json_decref(created);

    p.placement_json = NULL;
    patch = k8s_render_admit_patch(&p);
    assert_null(at(patch, "metadata"));
    json_decref(patch);
    spec_k8s_free(&k);
}

/* ---- quantities ---- */

static void test_quantities(void **state)
{
    (void)state;
    char b[48];
    static const struct {
        double v;
        const char *want;
    } cpu[] = {{4, "4"}, {0.5, "500m"}, {1.5, "1500m"}, {0.25, "250m"}, {0.0001, "1m"},
               {0.1 + 0.2, "300m"}, {16, "16"}, {0, "0"}, {-1, "0"}, {2.0004, "2001m"}};
    for (size_t i = 0; i < sizeof cpu / sizeof cpu[0]; i++) {
        k8s_quantity_cpu(cpu[i].v, b, sizeof b);
        assert_string_equal(b, cpu[i].want);
    }
    static const struct {
        double v;
        const char *want;
    } bytes[] = {{34359738368.0, "32Gi"},
                 {34359738367.0, "34359738367"},
                 {28e9, "27343750Ki"}, /* exact in KiB */
                 {28e9 + 1, "28000000001"},
                 {8.0 * 1024 * 1024 * 1024, "8Gi"},
                 {512.0 * 1024 * 1024, "512Mi"},
                 {1536.0 * 1024 * 1024, "1536Mi"},
                 {2048.0 * 1024 * 1024 * 1024, "2Ti"},
                 {4096, "4Ki"},
                 {1000, "1000"},
                 {1.5, "2"},
                 {0, "0"}};
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        k8s_quantity_bytes(bytes[i].v, b, sizeof b);
        assert_string_equal(b, bytes[i].want);
    }
}

/* ---- names ---- */

static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-') return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-')) return false;
    return true;
}

static void test_names(void **state)
{
    (void)state;
    char a[64], b[64];
    k8s_job_name("qwen2-7b-lora", 1, a, sizeof a);
    assert_string_equal(a, "lathe-qwen2-7b-lora-1");
    k8s_job_name("qwen2-7b-lora", 12, a, sizeof a);
    assert_string_equal(a, "lathe-qwen2-7b-lora-12");

    const char *l1 = "a-very-long-experiment-name-for-the-rank-sweep-of-qwen2-7b-r8-lr1e-4";
    const char *l2 = "a-very-long-experiment-name-for-the-rank-sweep-of-qwen2-7b-r8-lr2e-4";
    k8s_job_name(l1, 1, a, sizeof a);
    k8s_job_name(l2, 1, b, sizeof b);
    assert_true(strlen(a) <= 52 && strlen(b) <= 52);
    assert_true(dns_label(a) && dns_label(b));
    assert_true(strncmp(a, "lathe-a-very-long", 17) == 0);
    assert_true(str_ends_with(a, "-1"));
    assert_string_not_equal(a, b); /* same first part: the hash tells them apart */
    /* stable */
    char c[64];
    k8s_job_name(l1, 1, c, sizeof c);
    assert_string_equal(a, c);
    /* the attempt is kept when the name is cut */
    k8s_job_name(l1, 123, c, sizeof c);
    assert_true(str_ends_with(c, "-123") && strlen(c) <= 52);
    /* pod hostnames of an Indexed Job (<job>-<index>) stay labels */
    char host[80];
    snprintf(host, sizeof host, "%s-%d", c, 9999);
    assert_true(dns_label(host));
    /* names that are not DNS labels */
    k8s_job_name("Qwen_2.5 Job", 1, a, sizeof a);
    assert_true(dns_label(a));
    k8s_job_name("qwen_2.5 job", 1, b, sizeof b);
    assert_string_not_equal(a, b);
}

/* ---- the cluster's setup ---- */

/* The objects of a kind, in order. */
static size_t count_kind(const json_t *objs, const char *kind)
{
    size_t i, n = 0;
    json_t *o;
    json_array_foreach(objs, i, o) n += strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0;
    return n;
}

static json_t *find_obj(const json_t *objs, const char *kind, const char *ns, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o) {
        if (strcmp(str_at(o, "kind"), kind) != 0) continue;
        if (strcmp(str_at(o, "metadata.name"), name) != 0) continue;
        const char *ons = str_at(o, "metadata.namespace");
        if ((ns == NULL) != (ons == NULL) || (ns && strcmp(ns, ons) != 0)) continue;
        return o;
    }
    return NULL;
}

static size_t index_of(const json_t *objs, const json_t *o)
{
    size_t i;
    json_t *x;
    json_array_foreach(objs, i, x) if (x == o) return i;
    return (size_t)-1;
}

static void test_cluster(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    spec_load_file(LATHE_SOURCE_DIR "/examples/cluster-example.yaml", &f, &d);
    assert_int_equal(d.errors, 0);
    const spec_cluster *c = spec_file_cluster(&f);
    assert_non_null(c);
    spec_k8s k;
    spec_k8s_defaults(&k);
    json_t *objs = k8s_render_cluster(c, &k);
    assert_int_equal(count_kind(objs, "PriorityClass"), 2);
    assert_int_equal(count_kind(objs, "Namespace"), 2);
    assert_int_equal(count_kind(objs, "ResourceQuota"), 2);
    assert_int_equal(count_kind(objs, "LimitRange"), 2);
    assert_int_equal(count_kind(objs, "PersistentVolumeClaim"), 6);

    json_t *hp = find_obj(objs, "PriorityClass", NULL, "high-priority");
    assert_non_null(hp);
    assert_string_equal(str_at(hp, "apiVersion"), "scheduling.k8s.io/v1");
    assert_int_equal(int_at(hp, "value"), 1000000);
    assert_true(json_is_false(at(hp, "globalDefault")));
    assert_string_equal(str_at(hp, "preemptionPolicy"), "PreemptLowerPriority");
    assert_string_equal(str_at(hp, "description"), "for urgent release work");
    json_t *dp = find_obj(objs, "PriorityClass", NULL, "default");
    assert_true(json_is_true(at(dp, "globalDefault")));
    assert_int_equal(int_at(dp, "value"), 0);
    assert_null(at(dp, "description"));

    json_t *ns = find_obj(objs, "Namespace", NULL, "team-a");
    assert_non_null(ns);
    assert_string_equal(json_string_value(at_key(ns, "metadata.labels", K8S_LABEL_TEAM)), "team-a");
    assert_string_equal(json_string_value(at_key(ns, "metadata.labels", K8S_LABEL_MANAGED)), "lathe");

    json_t *q = find_obj(objs, "ResourceQuota", "team-a", "lathe-gpu-quota");
    assert_non_null(q);
    /* A100-80GB: 64 + L4-24GB: 2 */
    /* A100: quota 64 + borrowing 32; L4: quota 2, borrows without limit: the 4 L4s */
    assert_string_equal(json_string_value(at_key(q, "spec.hard", "requests.nvidia.com/gpu")), "100");
    assert_true(index_of(objs, ns) < index_of(objs, q)); /* the namespace first */

    json_t *lr = find_obj(objs, "LimitRange", "team-b", "lathe-defaults");
    assert_non_null(lr);
    assert_string_equal(str_at(lr, "spec.limits.0.type"), "Container");
    assert_string_equal(str_at(lr, "spec.limits.0.defaultRequest.cpu"), "1");
    assert_string_equal(str_at(lr, "spec.limits.0.defaultRequest.memory"), "4Gi");

    json_t *ck = find_obj(objs, "PersistentVolumeClaim", "team-a", "lathe-checkpoints");
    assert_non_null(ck);
    assert_string_equal(str_at(ck, "spec.accessModes.0"), "ReadWriteMany");
    assert_string_equal(str_at(ck, "spec.resources.requests.storage"), "500Gi");
    assert_null(at(ck, "spec.storageClassName"));
    json_t *mp = find_obj(objs, "PersistentVolumeClaim", "team-b", "lathe-models");
    assert_non_null(mp);
    assert_string_equal(str_at(mp, "spec.accessModes.0"), "ReadOnlyMany");
    assert_string_equal(str_at(mp, "spec.resources.requests.storage"), "2Ti");
    json_t *dpvc = find_obj(objs, "PersistentVolumeClaim", "team-b", "lathe-data");
    assert_non_null(dpvc);
    assert_string_equal(str_at(dpvc, "spec.accessModes.0"), "ReadOnlyMany");
    json_decref(objs);

    /* a prefix, an explicit namespace, a storage class, no model or data PVC,
     * another GPU resource */
    free(k.namespace_prefix);
    k.namespace_prefix = xstrdup("ml-");
    k.namespaces = xcalloc(1, sizeof *k.namespaces);
    k.namespaces[0].key = xstrdup("team-b");
    k.namespaces[0].value = xstrdup("research");
    k.n_namespaces = 1;
    k.storage_class = xstrdup("cephfs");
    free(k.model_pvc);
    k.model_pvc = xstrdup("");
    free(k.data_pvc);
    k.data_pvc = xstrdup("");
    free(k.gpu_resource);
    k.gpu_resource = xstrdup("example.com/gpu");
    objs = k8s_render_cluster(c, &k);
    assert_non_null(find_obj(objs, "Namespace", NULL, "ml-team-a"));
    assert_non_null(find_obj(objs, "Namespace", NULL, "research"));
    assert_int_equal(count_kind(objs, "PersistentVolumeClaim"), 2);
    ck = find_obj(objs, "PersistentVolumeClaim", "research", "lathe-checkpoints");
    assert_non_null(ck);
    assert_string_equal(str_at(ck, "spec.storageClassName"), "cephfs");
    q = find_obj(objs, "ResourceQuota", "ml-team-a", "lathe-gpu-quota");
    assert_string_equal(json_string_value(at_key(q, "spec.hard", "requests.example.com/gpu")), "100");
    json_decref(objs);
    spec_k8s_free(&k);
    spec_file_free(&f);
    diag_list_free(&d);
}

static void test_cluster_no_quota(void **state)
{
    (void)state;
    static const char text[] = "apiVersion: lathe/v1\nkind: Cluster\nmetadata: {name: c}\n"
                               "spec:\n  gpuTypes: [{name: A100-80GB, memory: 80Gi}]\n"
                               "  nodes: [{name: n1, gpuType: A100-80GB, gpus: 8}]\n"
                               "  teams:\n    - name: ml\n    - name: any\n"
                               "      quota: {\"*\": 4, A100-80GB: 2}\n"
                               "  priorityClasses:\n    - {name: batch, value: -10, preemptionPolicy: Never}\n";
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    spec_load_string("c.yaml", text, sizeof text - 1, &f, &d);
    diag_print_all(&d, stderr);
    assert_int_equal(d.errors, 0);
    json_t *objs = k8s_render_cluster(spec_file_cluster(&f), NULL);
    /* no quota: the whole cluster */
    json_t *q0 = find_obj(objs, "ResourceQuota", "ml", "lathe-gpu-quota");
    assert_string_equal(json_string_value(at_key(q0, "spec.hard", "requests.nvidia.com/gpu")), "8");
    json_t *q = find_obj(objs, "ResourceQuota", "any", "lathe-gpu-quota");
    assert_string_equal(json_string_value(at_key(q, "spec.hard", "requests.nvidia.com/gpu")), "8"); /* borrows without limit: every GPU */
    json_t *pc = find_obj(objs, "PriorityClass", NULL, "batch");
    assert_string_equal(str_at(pc, "preemptionPolicy"), "Never");
    assert_int_equal(int_at(pc, "value"), -10);
    json_decref(objs);
    spec_file_free(&f);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_top),
        cmocka_unit_test(test_job_labels),
        cmocka_unit_test(test_job_failure_policy),
        cmocka_unit_test(test_job_pod_security_and_container),
        cmocka_unit_test(test_job_env_single_node),
        cmocka_unit_test(test_job_env_override),
        cmocka_unit_test(test_job_multi_node),
        cmocka_unit_test(test_job_volumes),
        cmocka_unit_test(test_job_placement),
        cmocka_unit_test(test_admit_patch),
        cmocka_unit_test(test_job_owner),
        cmocka_unit_test(test_admit_patch_placement),
        cmocka_unit_test(test_quantities),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_cluster),
        cmocka_unit_test(test_cluster_no_quota),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
