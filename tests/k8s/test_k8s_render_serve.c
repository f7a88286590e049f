/* test_k8s_render_serve.c: what serves an adapter (k8s_render_serve.c):
 * the objects for `lathe serve` and for vLLM (Service, Deployment, the
 * autoscaling/v2 HorizontalPodAutoscaler, the PodDisruptionBudget of more
 * than one pod), the probes exactly, each runtime's arguments, the model
 * and adapters PVCs read-only, the API key from a Secret and never in the
 * object, the startup probe's budget; where a training Job leaves its
 * adapter (read from k8s_render_job's own object); the choice of an
 * experiment's job by eval loss, its explanation, the fallback to the
 * training loss, ties, and the API's JSON; the errors.
 * tests/k8s/render_serve.sh checks the objects against the v1.32 schemas. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "k8s/k8s.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const json_t *find(const json_t *objs, const char *kind)
{
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o) {
        if (strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0) return o;
    }
    return NULL;
}

/* A dotted path through objects ("spec.template.spec"). */
static const json_t *at(const json_t *v, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_object_get(v, k);
    return v;
}

static const char *str_at(const json_t *v, const char *path)
{
    return json_string_value(at(v, path));
}

static long long int_at(const json_t *v, const char *path)
{
    const json_t *x = at(v, path);
    assert_true(json_is_integer(x));
    return json_integer_value(x);
}

static const json_t *container(const json_t *objs)
{
    const json_t *dep = find(objs, "Deployment");
    assert_non_null(dep);
    return json_array_get(at(dep, "spec.template.spec.containers"), 0);
}

/* The container's command as one string of space-separated words. */
static char *command_text(const json_t *objs)
{
    sb s;
    sb_init(&s);
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(container(objs), "command"), i, a) {
        sb_printf(&s, "%s%s", i ? " " : "", json_string_value(a));
    }
    return sb_take(&s);
}

static bool has_env(const json_t *ctr, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ctr, "env"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0) return true;
    }
    return false;
}

static const k8s_serve_adapter two[] = {{"support", "/checkpoints/sweep-r16/final"},
                                        {"legal", "/checkpoints/legal-r8/final"}};

static json_t *render(const k8s_serve_params *p)
{
    char err[256] = "";
    json_t *objs = k8s_render_serve(p, err, sizeof err);
    assert_non_null(objs);
    return objs;
}

static void test_lathe_objects(void **state)
{
    (void)state;
    k8s_serve_params p = {.name = "support", .namespace_ = "ai-training",
                          .model_path = "/models/qwen2-7b", .adapters = two, .n_adapters = 2,
                          .team = "ai-training", .job = "sweep-r16", .experiment = "sweep"};
    json_t *objs = render(&p);
    /* Service, Deployment, autoscaler; one pod at the least: no budget */
    assert_int_equal(json_array_size(objs), 3);
    assert_string_equal(str_at(json_array_get(objs, 0), "kind"), "Service");
    assert_string_equal(str_at(json_array_get(objs, 1), "kind"), "Deployment");
    assert_string_equal(str_at(json_array_get(objs, 2), "kind"), "HorizontalPodAutoscaler");
    assert_null(find(objs, "PodDisruptionBudget"));

    const json_t *dep = find(objs, "Deployment");
    assert_string_equal(str_at(dep, "apiVersion"), "apps/v1");
    assert_string_equal(str_at(dep, "metadata.namespace"), "ai-training");
    const json_t *l = at(dep, "metadata.labels");
    assert_string_equal(json_string_value(json_object_get(l, "app.kubernetes.io/managed-by")),
                        "lathe");
    assert_string_equal(json_string_value(json_object_get(l, "lathe.dev/team")), "ai-training");
    assert_string_equal(json_string_value(json_object_get(l, "lathe.dev/job")), "sweep-r16");
    assert_string_equal(json_string_value(json_object_get(l, "lathe.dev/experiment")), "sweep");
    assert_string_equal(json_string_value(json_object_get(l, "lathe.dev/runtime")), "lathe");
    assert_string_equal(json_string_value(json_object_get(l, "app.kubernetes.io/name")), "support");
    /* the autoscaler owns the replicas */
    assert_null(at(dep, "spec.replicas"));
    /* the selector is a subset of the pods' labels */
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)at(dep, "spec.selector.matchLabels"), key, v) {
        assert_true(json_equal(v, json_object_get(at(dep, "spec.template.metadata.labels"), key)));
    }

    const json_t *c = container(objs);
    char *cmd = command_text(objs);
    assert_string_equal(cmd, "lathe serve --model /models/qwen2-7b"
                             " --adapter support=/checkpoints/sweep-r16/final"
                             " --adapter legal=/checkpoints/legal-r8/final"
                             " --host 0.0.0.0 --port 8000 --max-adapters 2 --threads 4");
    free(cmd);
    assert_string_equal(str_at(c, "image"), "lathe:latest");
    assert_int_equal(int_at(json_array_get(json_object_get(c, "ports"), 0), "containerPort"), 8000);

    /* the probes, exactly */
    const json_t *live = json_object_get(c, "livenessProbe"),
                 *ready = json_object_get(c, "readinessProbe");
    assert_string_equal(str_at(live, "httpGet.path"), "/health");
    assert_int_equal(int_at(live, "initialDelaySeconds"), 60);
    assert_int_equal(int_at(live, "periodSeconds"), 30);
    assert_string_equal(str_at(ready, "httpGet.path"), "/ready");
    assert_int_equal(int_at(ready, "initialDelaySeconds"), 30);
    assert_int_equal(int_at(ready, "periodSeconds"), 10);
    const json_t *start = json_object_get(c, "startupProbe");
    assert_string_equal(str_at(start, "httpGet.path"), "/health");
    /* no model size: 900 s */
    assert_int_equal(int_at(start, "periodSeconds") * int_at(start, "failureThreshold"), 900);

    /* resources: the CPU request the autoscaler's utilisation is of */
    assert_string_equal(str_at(c, "resources.requests.cpu"), "4");
    assert_string_equal(str_at(c, "resources.requests.memory"), "16Gi");
    assert_string_equal(str_at(c, "resources.limits.memory"), "16Gi");
    assert_null(json_object_get(at(c, "resources.requests"), "nvidia.com/gpu"));

    /* the model and adapters PVCs, read-only, where the training pods had them */
    const json_t *mounts = json_object_get(c, "volumeMounts");
    assert_string_equal(str_at(json_array_get(mounts, 0), "mountPath"), "/models");
    assert_true(json_is_true(at(json_array_get(mounts, 0), "readOnly")));
    assert_string_equal(str_at(json_array_get(mounts, 1), "name"), "adapters");
    assert_string_equal(str_at(json_array_get(mounts, 1), "mountPath"), "/checkpoints");
    assert_true(json_is_true(at(json_array_get(mounts, 1), "readOnly")));
    const json_t *vols = at(dep, "spec.template.spec.volumes");
    assert_string_equal(str_at(json_array_get(vols, 0), "persistentVolumeClaim.claimName"),
                        "lathe-models");
    assert_string_equal(str_at(json_array_get(vols, 1), "persistentVolumeClaim.claimName"),
                        "lathe-checkpoints");
    assert_true(json_is_true(at(json_array_get(vols, 1), "persistentVolumeClaim.readOnly")));
    assert_true(json_is_true(at(dep, "spec.template.spec.securityContext.runAsNonRoot")));
    assert_true(json_is_true(at(c, "securityContext.readOnlyRootFilesystem")));
    const json_t *annot = at(dep, "spec.template.metadata.annotations");
    assert_string_equal(json_string_value(json_object_get(annot, "prometheus.io/scrape")), "true");
    assert_string_equal(json_string_value(json_object_get(annot, "prometheus.io/port")), "8000");

    const json_t *svc = find(objs, "Service");
    assert_string_equal(str_at(svc, "spec.type"), "ClusterIP");
    assert_true(json_equal(at(svc, "spec.selector"), at(dep, "spec.selector.matchLabels")));
    assert_string_equal(str_at(json_array_get(at(svc, "spec.ports"), 0), "targetPort"), "http");

    const json_t *hpa = find(objs, "HorizontalPodAutoscaler");
    assert_string_equal(str_at(hpa, "apiVersion"), "autoscaling/v2");
    assert_string_equal(str_at(hpa, "spec.scaleTargetRef.name"), "support");
    assert_int_equal(int_at(hpa, "spec.minReplicas"), 1);
    assert_int_equal(int_at(hpa, "spec.maxReplicas"), 4);
    const json_t *cpu = json_array_get(at(hpa, "spec.metrics"), 0);
    assert_string_equal(str_at(cpu, "type"), "Resource");
    assert_string_equal(str_at(cpu, "resource.name"), "cpu");
    assert_int_equal(int_at(cpu, "resource.target.averageUtilization"), 70);
    const json_t *rps = json_array_get(at(hpa, "spec.metrics"), 1);
    assert_string_equal(str_at(rps, "type"), "Pods");
    assert_string_equal(str_at(rps, "pods.metric.name"), K8S_SERVE_RPS_METRIC_LATHE);
    assert_string_equal(str_at(rps, "pods.target.type"), "AverageValue");
    assert_string_equal(str_at(rps, "pods.target.averageValue"), "10");
    json_decref(objs);
}

static void test_vllm_args(void **state)
{
    (void)state;
    k8s_serve_params p = {.name = "support", .runtime = K8S_SERVE_VLLM,
                          .model_path = "/models/qwen2-7b", .served_model_name = "Qwen2-7B",
                          .adapters = two, .n_adapters = 2, .max_lora_rank = 20, .gpus = 2,
                          .api_key_secret = "serve-key", .rps_target = 2.5, .cpu_target = 60,
                          .min_replicas = 2, .max_replicas = 6};
    json_t *objs = render(&p);
    char *cmd = command_text(objs);
    assert_string_equal(cmd, "vllm serve /models/qwen2-7b --host 0.0.0.0 --port 8000"
                             " --served-model-name Qwen2-7B --tensor-parallel-size 2"
                             " --enable-lora --lora-modules support=/checkpoints/sweep-r16/final"
                             " legal=/checkpoints/legal-r8/final --max-loras 2 --max-lora-rank 32");
    assert_null(strstr(cmd, "api-key"));
    free(cmd);
    const json_t *c = container(objs);
    assert_string_equal(str_at(c, "image"), K8S_VLLM_IMAGE);
    /* vLLM listens once loaded: readiness on /health */
    assert_string_equal(str_at(c, "readinessProbe.httpGet.path"), "/health");
    assert_int_equal(int_at(c, "readinessProbe.initialDelaySeconds"), 30);
    assert_string_equal(str_at(c, "livenessProbe.httpGet.path"), "/health");
    /* GPUs: requests = limits, the taint tolerated */
    const json_t *req = at(c, "resources.requests"), *lim = at(c, "resources.limits");
    assert_int_equal(json_integer_value(json_object_get(req, "nvidia.com/gpu")), 2);
    assert_int_equal(json_integer_value(json_object_get(lim, "nvidia.com/gpu")), 2);
    const json_t *dep = find(objs, "Deployment");
    assert_string_equal(str_at(json_array_get(at(dep, "spec.template.spec.tolerations"), 0), "key"),
                        "nvidia.com/gpu");
    /* the key from the Secret, through the variable vLLM reads */
    size_t i;
    json_t *e;
    bool key = false;
    json_array_foreach(json_object_get(c, "env"), i, e) {
        if (strcmp(str_at(e, "name"), "VLLM_API_KEY") == 0) {
            key = true;
            assert_string_equal(str_at(e, "valueFrom.secretKeyRef.name"), "serve-key");
            assert_string_equal(str_at(e, "valueFrom.secretKeyRef.key"), "api-key");
            assert_null(json_object_get(e, "value"));
        }
    }
    assert_true(key);
    /* shared memory for the tensor-parallel workers */
    bool shm = false;
    json_array_foreach(at(dep, "spec.template.spec.volumes"), i, e) {
        if (strcmp(str_at(e, "name"), "dshm") == 0)
            shm = strcmp(str_at(e, "emptyDir.medium"), "Memory") == 0;
    }
    assert_true(shm);
    /* the autoscaler's targets; two pods at the least: a budget */
    const json_t *hpa = find(objs, "HorizontalPodAutoscaler");
    assert_int_equal(int_at(hpa, "spec.minReplicas"), 2);
    assert_int_equal(int_at(hpa, "spec.maxReplicas"), 6);
    assert_int_equal(
        int_at(json_array_get(at(hpa, "spec.metrics"), 0), "resource.target.averageUtilization"),
        60);
    const json_t *rps = json_array_get(at(hpa, "spec.metrics"), 1);
    assert_string_equal(str_at(rps, "pods.metric.name"), K8S_SERVE_RPS_METRIC_VLLM);
    assert_string_equal(str_at(rps, "pods.target.averageValue"), "2500m");
    const json_t *pdb = find(objs, "PodDisruptionBudget");
    assert_non_null(pdb);
    assert_string_equal(str_at(pdb, "apiVersion"), "policy/v1");
    assert_int_equal(int_at(pdb, "spec.maxUnavailable"), 1);
    json_decref(objs);

    /* ranks vLLM takes: rounded up; none given: its default 16 */
    k8s_serve_params q = {.name = "x", .runtime = K8S_SERVE_VLLM, .model_path = "Qwen/Qwen2-7B",
                          .adapters = two, .n_adapters = 1, .max_lora_rank = 64};
    objs = render(&q);
    cmd = command_text(objs);
    assert_non_null(strstr(cmd, "--max-lora-rank 64"));
    assert_null(strstr(cmd, "--tensor-parallel-size"));
    free(cmd);
    json_decref(objs);
    q.max_lora_rank = 0;
    q.n_adapters = 0; /* the base model alone: no LoRA flags */
    objs = render(&q);
    cmd = command_text(objs);
    assert_string_equal(cmd, "vllm serve Qwen/Qwen2-7B --host 0.0.0.0 --port 8000");
    free(cmd);
    /* no adapters: no adapters volume */
    const json_t *vols = at(find(objs, "Deployment"), "spec.template.spec.volumes");
    json_array_foreach(vols, i, e) assert_string_not_equal(str_at(e, "name"), "adapters");
    json_decref(objs);
}

static void test_lathe_api_key_and_options(void **state)
{
    (void)state;
    spec_k8s k;
    spec_k8s_defaults(&k);
    free(k.image);
    k.image = xstrdup("registry.example.com/lathe:1.2");
    free(k.model_pvc);
    k.model_pvc = xstrdup("");
    k.run_as_user = 2000;
    k8s_serve_params p = {.name = "support", .model_path = "/models/m", .adapters = two,
                          .n_adapters = 1, .api_key_secret = "keys", .api_key_key = "serve",
                          .port = 9000, .max_batch = 16, .threads = 8, .max_adapters = 3,
                          .cpu = 8, .memory = 32 * GIB, .adapters_pvc = "team-ckpt",
                          .replicas = 3, .settings = &k, .selection = "sweep: serving job x"};
    json_t *objs = render(&p);
    char *cmd = command_text(objs);
    /* the key is no argument: lathe serve reads LATHE_API_KEY */
    assert_string_equal(
        cmd, "lathe serve --model /models/m --adapter support=/checkpoints/sweep-r16/final"
             " --host 0.0.0.0 --port 9000 --max-adapters 3 --max-batch 16 --threads 8");
    free(cmd);
    const json_t *c = container(objs);
    size_t i;
    json_t *e;
    bool key = false;
    json_array_foreach(json_object_get(c, "env"), i, e) {
        if (strcmp(str_at(e, "name"), "LATHE_API_KEY") == 0) {
            key = true;
            assert_string_equal(str_at(e, "valueFrom.secretKeyRef.name"), "keys");
            assert_string_equal(str_at(e, "valueFrom.secretKeyRef.key"), "serve");
            assert_null(json_object_get(e, "value"));
        }
    }
    assert_true(key);
    assert_false(has_env(c, "HF_HOME")); /* no model PVC */
    assert_string_equal(str_at(c, "image"), "registry.example.com/lathe:1.2");
    assert_string_equal(str_at(c, "resources.requests.cpu"), "8");
    assert_string_equal(str_at(c, "resources.limits.memory"), "32Gi");
    const json_t *dep = find(objs, "Deployment");
    assert_int_equal(int_at(dep, "spec.replicas"), 3);
    assert_int_equal(int_at(dep, "spec.template.spec.securityContext.runAsUser"), 2000);
    assert_string_equal(json_string_value(json_object_get(at(dep, "metadata.annotations"),
                                                          "lathe.dev/selection")),
                        "sweep: serving job x");
    const json_t *vols = at(dep, "spec.template.spec.volumes");
    assert_string_equal(str_at(json_array_get(vols, 0), "name"), "adapters");
    assert_string_equal(str_at(json_array_get(vols, 0), "persistentVolumeClaim.claimName"),
                        "team-ckpt");
    assert_int_equal(int_at(json_array_get(at(find(objs, "Service"), "spec.ports"), 0), "port"),
                     9000);
    /* fixed replicas: no autoscaler; three pods: a budget */
    assert_null(find(objs, "HorizontalPodAutoscaler"));
    assert_non_null(find(objs, "PodDisruptionBudget"));
    json_decref(objs);
    spec_k8s_free(&k);
}

static void test_startup_budget(void **state)
{
    (void)state;
    k8s_serve_params p = {.name = "m", .model_path = "/models/m"};
    assert_true(k8s_serve_startup_seconds(&p) == 900);
    /* 15 GiB at 100 MiB/s: 153.6 s, and lathe's 60 s */
    p.model_bytes = 15 * GIB;
    assert_true(fabs(k8s_serve_startup_seconds(&p) - 213.6) < 1e-6);
    p.runtime = K8S_SERVE_VLLM;
    assert_true(fabs(k8s_serve_startup_seconds(&p) - 393.6) < 1e-6);
    /* a tiny model: at least 120 s */
    p.runtime = K8S_SERVE_LATHE;
    p.model_bytes = 1e6;
    assert_true(k8s_serve_startup_seconds(&p) == 120);
    p.startup_seconds = 1800;
    assert_true(k8s_serve_startup_seconds(&p) == 1800);
    p.startup_seconds = 0;
    p.model_bytes = 15 * GIB;
    json_t *objs = render(&p);
    const json_t *c = container(objs);
    /* ceil(213.6 / 10) periods */
    assert_int_equal(int_at(c, "startupProbe.failureThreshold"), 22);
    assert_int_equal(int_at(c, "startupProbe.periodSeconds"), 10);
    /* memory from the weights: 15 x 1.25 + 2 = 20.75, 21 GiB */
    assert_string_equal(str_at(c, "resources.requests.memory"), "21Gi");
    json_decref(objs);
}

static void test_errors(void **state)
{
    (void)state;
    char err[256] = "";
    k8s_serve_params p = {.model_path = "/models/m"};
    assert_null(k8s_render_serve(&p, err, sizeof err));
    assert_non_null(strstr(err, "name"));
    k8s_serve_params q = {.name = "x"};
    assert_null(k8s_render_serve(&q, err, sizeof err));
    assert_non_null(strstr(err, "model"));
}

/* The adapter's place, read from the training attempt's own Job. */
static void test_source_of_job(void **state)
{
    (void)state;
    spec_k8s k;
    spec_k8s_defaults(&k);
    const char *env[] = {"BASE_MODEL_PATH=/models/qwen2-7b",
                         "CHECKPOINT_DIR=/checkpoints/sweep-r16"};
    k8s_job_params jp = {.name = "lathe-sweep-r16-1", .namespace_ = "ai-training",
                         .job = "sweep-r16", .team = "ai-training", .experiment = "sweep",
                         .attempt = 1, .env = env, .n_env = 2, .checkpoint_pvc = "team-ckpt",
                         .checkpoint_subpath = "sweep-r16", .settings = &k};
    json_t *job = k8s_render_job(&jp);
    k8s_serve_source src;
    char err[256];
    assert_true(k8s_serve_source_of_job(job, &src, err, sizeof err));
    assert_string_equal(src.namespace_, "ai-training");
    assert_string_equal(src.team, "ai-training");
    assert_string_equal(src.job, "sweep-r16");
    assert_string_equal(src.experiment, "sweep");
    assert_string_equal(src.adapters_pvc, "team-ckpt");
    assert_string_equal(src.adapter_path, "/checkpoints/sweep-r16/final");
    assert_string_equal(src.model_pvc, "lathe-models");
    assert_string_equal(src.model_path, "/models/qwen2-7b");
    k8s_serve_source_free(&src);
    json_decref(job);

    /* no checkpoint volume: nothing to serve */
    jp.checkpoint_pvc = NULL;
    job = k8s_render_job(&jp);
    assert_false(k8s_serve_source_of_job(job, &src, err, sizeof err));
    assert_non_null(strstr(err, "lathe-sweep-r16-1"));
    k8s_serve_source_free(&src);
    json_decref(job);
    spec_k8s_free(&k);
}

/* Whether one of the explanation's lines holds text. */
static bool said(const k8s_serve_choice *ch, const char *text)
{
    for (size_t i = 0; i < ch->n_lines; i++)
        if (strstr(ch->lines[i], text)) return true;
    return false;
}

static void test_choose_eval(void **state)
{
    (void)state;
    k8s_serve_candidate c[] = {
        {"sweep-r8", "succeeded", 1.3402, 1.2110, NULL, -1, -1, NAN},
        {"sweep-r8-lr2", "failed", 1.1000, 1.9000, NULL, -1, -1, NAN}, /* lowest; unfinished */
        {"sweep-r16", "succeeded", 1.2875, 1.1502, NULL, -1, -1, NAN},
        {"sweep-r16-lr2", "succeeded", 1.2731, 1.1024, NULL, 1000, 1200, 1.2790},
        {"sweep-r32", "succeeded", 1.3050, 1.0533, NULL, -1, -1, NAN}, /* lowest training loss */
        {"sweep-r32-lr2", "running", 1.2500, 1.0100, NULL, -1, -1, NAN},
        {"sweep-r64", "succeeded", NAN, 0.9000, NULL, -1, -1, NAN},    /* no eval loss */
    };
    k8s_serve_choice ch;
    assert_true(k8s_serve_choose("sweep", c, 7, &ch));
    assert_int_equal(ch.chosen, 3);
    assert_true(ch.by_eval);
    assert_string_equal(ch.lines[0], "sweep: serving job sweep-r16-lr2, eval loss 1.2731 "
                                     "(final training loss 1.1024)");
    assert_true(said(&ch, "the lowest eval loss of the 4 succeeded job(s) with one"));
    assert_true(said(&ch, "runner-up 1: sweep-r16, eval loss 1.2875 (+0.0144)"));
    assert_true(said(&ch, "runner-up 2: sweep-r32, eval loss 1.3050 (+0.0319)"));
    assert_true(said(&ch, "runner-up 3: sweep-r8, eval loss 1.3402 (+0.0671)"));
    assert_true(said(&ch, "left out: sweep-r8-lr2 (failed), sweep-r32-lr2 (running), "
                          "sweep-r64 (succeeded, no eval loss)"));
    assert_false(said(&ch, "fallback"));
    /* its best came before its last evaluation: the final adapter's score is said */
    assert_true(said(&ch, "note: sweep-r16-lr2's lowest eval loss was at step 1000; its final "
                          "adapter, served here, had eval loss 1.2790 at step 1200"));
    k8s_serve_choice_free(&ch);
}

static void test_choose_fallback(void **state)
{
    (void)state;
    k8s_serve_candidate c[] = {
        {"a", "succeeded", NAN, 1.21, NULL, -1, -1, NAN},
        {"b", NULL, NAN, 1.05, NULL, -1, -1, NAN}, /* no state: a finished record */
        {"c", "succeeded", NAN, 1.15, NULL, -1, -1, NAN},
        {"d", "cancelled", NAN, 0.90, NULL, -1, -1, NAN},
    };
    k8s_serve_choice ch;
    assert_true(k8s_serve_choose("sweep", c, 4, &ch));
    assert_int_equal(ch.chosen, 1);
    assert_false(ch.by_eval);
    assert_string_equal(ch.lines[0], "sweep: serving job b, final training loss 1.0500");
    assert_true(said(&ch, "fallback: no succeeded job has an eval loss"));
    assert_true(said(&ch, "runner-up 1: c, final training loss 1.1500 (+0.1000)"));
    assert_true(said(&ch, "left out: d (cancelled)"));
    assert_false(said(&ch, "note:"));
    k8s_serve_choice_free(&ch);
}

/* Ties are decided by the training loss, then by the name; the input's
 * order never matters. */
static void test_choose_ties(void **state)
{
    (void)state;
    k8s_serve_candidate c[] = {
        {"zeta", "succeeded", 1.25, 1.10, NULL, -1, -1, NAN},
        {"alpha", "succeeded", 1.25, 1.20, NULL, -1, -1, NAN},
        {"beta", "succeeded", 1.30, 1.00, NULL, -1, -1, NAN},
    };
    k8s_serve_choice ch;
    assert_true(k8s_serve_choose(NULL, c, 3, &ch));
    assert_string_equal(c[ch.chosen].job, "zeta");
    assert_true(said(&ch, "tie: zeta and alpha have the same eval loss; the lower final training "
                          "loss decided"));
    assert_true(said(&ch, "the experiment: serving job zeta"));
    k8s_serve_choice_free(&ch);

    c[0].train_loss = 1.20; /* the same in both: the name */
    for (int rot = 0; rot < 3; rot++) {
        k8s_serve_candidate r[3];
        for (int i = 0; i < 3; i++) r[i] = c[(i + rot) % 3];
        assert_true(k8s_serve_choose("x", r, 3, &ch));
        assert_string_equal(r[ch.chosen].job, "alpha");
        assert_true(said(&ch, "the name first in byte order decided"));
        assert_true(said(&ch, "runner-up 1: zeta, eval loss 1.2500 (+0.0000)"));
        k8s_serve_choice_free(&ch);
    }
}

static void test_choose_none(void **state)
{
    (void)state;
    k8s_serve_candidate c[] = {
        {"a", "running", 1.2, 1.1, NULL, -1, -1, NAN},
        {"b", "failed", NAN, NAN, NULL, -1, -1, NAN},
    };
    k8s_serve_choice ch;
    assert_false(k8s_serve_choose("sweep", c, 2, &ch));
    assert_int_equal(ch.chosen, -1);
    assert_true(said(&ch, "sweep: none of its 2 job(s) has succeeded yet"));
    assert_true(said(&ch, "left out: a (running), b (failed)"));
    k8s_serve_choice_free(&ch);
    /* succeeded, but without any loss */
    k8s_serve_candidate d[] = {{"a", "succeeded", NAN, NAN, NULL, -1, -1, NAN}};
    assert_false(k8s_serve_choose("sweep", d, 1, &ch));
    assert_true(said(&ch, "none of its 1 succeeded job(s) reported a loss"));
    k8s_serve_choice_free(&ch);
    assert_false(k8s_serve_choose("sweep", NULL, 0, &ch));
    k8s_serve_choice_free(&ch);
}

static void test_candidates_json(void **state)
{
    (void)state;
    char err[256];
    size_t n;
    /* GET /v1/experiments/NAME */
    json_t *v = json_loads(
        "{\"name\": \"sweep\", \"team\": \"t\", \"jobs\": ["
        "{\"name\": \"a\", \"state\": \"succeeded\", \"progress\": {\"loss\": 1.5},"
        " \"eval\": {\"loss\": 1.8, \"step\": 120, \"best_loss\": 1.75, \"best_step\": 100},"
        " \"adapter\": \"/data/jobs/1/checkpoints/final\"},"
        "{\"name\": \"b\", \"state\": \"running\", \"progress\": null, \"eval\": null}]}",
        0, NULL);
    k8s_serve_candidate *c = k8s_serve_candidates_json(v, &n, err, sizeof err);
    assert_non_null(c);
    assert_int_equal(n, 2);
    assert_string_equal(c[0].job, "a");
    assert_string_equal(c[0].state, "succeeded");
    assert_true(c[0].train_loss == 1.5 && c[0].eval_loss == 1.75);
    assert_true(c[0].best_step == 100 && c[0].last_step == 120 && c[0].last_eval_loss == 1.8);
    assert_string_equal(c[0].adapter, "/data/jobs/1/checkpoints/final");
    assert_true(isnan(c[1].train_loss) && isnan(c[1].eval_loss) && isnan(c[1].last_eval_loss));
    assert_true(c[1].best_step == -1 && c[1].last_step == -1 && c[1].adapter == NULL);
    free(c);
    json_decref(v);
    /* a job list, and a bare array */
    v = json_loads("{\"items\": [{\"name\": \"a\"}], \"next_page_token\": null}", 0, NULL);
    c = k8s_serve_candidates_json(v, &n, err, sizeof err);
    assert_int_equal(n, 1);
    free(c);
    json_decref(v);
    v = json_loads("[]", 0, NULL);
    c = k8s_serve_candidates_json(v, &n, err, sizeof err);
    assert_non_null(c);
    assert_int_equal(n, 0);
    free(c);
    json_decref(v);
    /* errors */
    v = json_loads("{\"name\": \"sweep\"}", 0, NULL);
    assert_null(k8s_serve_candidates_json(v, &n, err, sizeof err));
    assert_non_null(strstr(err, "expected the API's experiment"));
    json_decref(v);
    v = json_loads("[{\"state\": \"succeeded\"}]", 0, NULL);
    assert_null(k8s_serve_candidates_json(v, &n, err, sizeof err));
    assert_non_null(strstr(err, "job 1 of the list has no name"));
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lathe_objects),
        cmocka_unit_test(test_vllm_args),
        cmocka_unit_test(test_lathe_api_key_and_options),
        cmocka_unit_test(test_startup_budget),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_source_of_job),
        cmocka_unit_test(test_choose_eval),
        cmocka_unit_test(test_choose_fallback),
        cmocka_unit_test(test_choose_ties),
        cmocka_unit_test(test_choose_none),
        cmocka_unit_test(test_candidates_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
