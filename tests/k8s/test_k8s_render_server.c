/* test_k8s_render_server.c: what `lathe render server` installs
 * (k8s_render_server) as seen by lathe itself: the ConfigMap's ServerConfig
 * loads with spec_server_load_string (what `lathe server --config` reads)
 * and says executor k8s, in-cluster credentials, listen 0.0.0.0:8740 and
 * the emptyDir data folder, while keeping every other setting of --config
 * (a round trip through spec_server_to_json); the Cluster file travels in
 * the ConfigMap; the image rule; the Deployment and RBAC basics.
 * tests/k8s/render_server.sh checks the objects against the v1.32 schemas. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "k8s/k8s.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char settings_yaml[] =
    "apiVersion: lathe/v1\n"
    "kind: ServerConfig\n"
    "metadata:\n"
    "  name: prod\n"
    "spec:\n"
    "  listen: 127.0.0.1:9000\n"
    "  dataDir: /srv/lathe\n"
    "  pollInterval: 500ms\n"
    "  cluster:\n"
    "    file: cluster.yaml\n"
    "    cpuSlots: 4\n"
    "  tokens:\n"
    "    - name: alice\n"
    "      sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
    "      team: team-a\n"
    "    - sha256: 1123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n"
    "      admin: true\n"
    "  scheduler:\n"
    "    policy: easy\n"
    "    interval: 30s\n"
    "    halfLife: 7d\n"
    "    gpuShareLimit: 3\n"
    "    duePreemption: false\n"
    "  retry:\n"
    "    jitter: 0.1\n"
    "  limits:\n"
    "    maxBodySize: 2Mi\n"
    "  logs:\n"
    "    keep: 0\n"
    "  trainer:\n"
    "    program: /usr/local/bin/lathe\n"
    "  kubernetes:\n"
    "    kubeconfig: /home/me/.kube/config\n"
    "    context: kind-lab\n"
    "    qps: 20.5\n"
    "    image: registry.example.com/lathe:1.2\n"
    "    imagePullPolicy: IfNotPresent\n"
    "    namespaces:\n"
    "      team-a: lathe-team-a\n"
    "    modelPVC: \"\"\n"
    "    shmSize: 16Gi\n"
    "    runAsUser: 2000\n"
    "    ttlSecondsAfterFinished: -1\n";

static spec_server *load(const char *text)
{
    spec_server *s = NULL;
    diag_list d;
    diag_list_init(&d);
    size_t errors = spec_server_load_string("server.yaml", text, strlen(text), &s, &d);
    if (errors) diag_print_all(&d, stderr);
    diag_list_free(&d);
    assert_int_equal(errors, 0);
    assert_non_null(s);
    return s;
}

static const json_t *find(const json_t *objs, const char *kind, const char *name)
{
    size_t i;
    const json_t *o;
    json_array_foreach(objs, i, o) {
        const json_t *meta = json_object_get(o, "metadata");
        if (strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0 &&
            (!name || strcmp(json_string_value(json_object_get(meta, "name")), name) == 0))
            return o;
    }
    return NULL;
}

/* The ServerConfig of the rendered ConfigMap, loaded as lathe loads it. */
static spec_server *config_of(const json_t *objs)
{
    const json_t *cm = find(objs, "ConfigMap", "lathe-config");
    assert_non_null(cm);
    const char *text = json_string_value(json_object_get(json_object_get(cm, "data"),
                                                         "server.yaml"));
    assert_non_null(text);
    return load(text);
}

static void test_default_config_loads(void **state)
{
    (void)state;
    k8s_server_params p = {0};
    json_t *objs = k8s_render_server(&p);
    spec_server *s = config_of(objs);
    assert_int_equal(s->executor, SPEC_EXECUTOR_K8S);
    assert_string_equal(s->listen, "0.0.0.0:8740");
    assert_string_equal(s->data_dir, "/var/lib/lathe");
    assert_null(s->k8s.kubeconfig); /* the pod's service account */
    assert_null(s->cluster.file);
    assert_string_equal(s->k8s.image, "lathe:latest");
    spec_server_free(s);
    const json_t *dep = find(objs, "Deployment", "lathe");
    assert_non_null(dep);
    assert_string_equal(json_string_value(json_object_get(json_object_get(dep, "metadata"),
                                                          "namespace")),
                        "lathe-system");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(dep, "spec"), "replicas")),
                     2);
    json_decref(objs);
}

/* Every setting of --config survives, but for what the pod must differ in. */
static void test_settings_round_trip(void **state)
{
    (void)state;
    spec_server *in = load(settings_yaml);
    k8s_server_params p = {.settings = in, .namespace_ = "ops", .cluster_yaml = "kind: Cluster\n"};
    json_t *objs = k8s_render_server(&p);
    spec_server *out = config_of(objs);

    assert_int_equal(out->executor, SPEC_EXECUTOR_K8S);
    assert_string_equal(out->listen, "0.0.0.0:8740");
    assert_string_equal(out->data_dir, "/var/lib/lathe");
    assert_null(out->k8s.kubeconfig);
    assert_null(out->k8s.context);
    assert_null(out->trainer_program);
    assert_string_equal(out->cluster.file, "/etc/lathe/cluster.yaml");
    const json_t *cm = find(objs, "ConfigMap", "lathe-config");
    assert_string_equal(json_string_value(json_object_get(json_object_get(cm, "data"),
                                                          "cluster.yaml")),
                        "kind: Cluster\n");
    assert_string_equal(json_string_value(json_object_get(json_object_get(cm, "metadata"),
                                                          "namespace")),
                        "ops");

    /* the rest as written */
    assert_string_equal(out->name, "prod");
    assert_true(out->poll_interval == 0.5);
    assert_int_equal(out->cluster.cpu_slots, 4);
    assert_int_equal(out->n_tokens, 2);
    assert_string_equal(out->tokens[0].name, "alice");
    assert_string_equal(out->tokens[0].team, "team-a");
    assert_string_equal(out->tokens[1].sha256, in->tokens[1].sha256);
    assert_true(out->tokens[1].admin);
    assert_string_equal(out->scheduler.policy, "easy");
    assert_true(out->scheduler.interval == 30);
    assert_true(out->scheduler.half_life == 7 * 86400);
    assert_int_equal(out->scheduler.gpu_share_limit, 3);
    assert_int_equal(out->scheduler.due_preemption, TOGGLE_OFF);
    assert_true(out->retry.jitter == 0.1);
    assert_true(out->limits.max_body == 2 * 1024 * 1024);
    assert_int_equal(out->logs.keep, 0);
    assert_true(out->k8s.qps == 20.5);
    assert_string_equal(out->k8s.image, "registry.example.com/lathe:1.2");
    assert_string_equal(out->k8s.image_pull_policy, "IfNotPresent");
    assert_int_equal(out->k8s.n_namespaces, 1);
    assert_string_equal(out->k8s.namespaces[0].value, "lathe-team-a");
    assert_string_equal(out->k8s.model_pvc, "");
    assert_true(out->k8s.shm_size == 16.0 * 1024 * 1024 * 1024);
    assert_int_equal(out->k8s.run_as_user, 2000);
    assert_int_equal(out->k8s.ttl_after_finished, -1);

    /* the settings' image is the server's too; its pod runs as their user */
    const json_t *pod = json_object_get(
        json_object_get(json_object_get(find(objs, "Deployment", "lathe"), "spec"), "template"),
        "spec");
    const json_t *c = json_array_get(json_object_get(pod, "containers"), 0);
    assert_string_equal(json_string_value(json_object_get(c, "image")),
                        "registry.example.com/lathe:1.2");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(pod, "securityContext"),
                                                        "runAsUser")),
                     2000);
    spec_server_free(out);
    json_decref(objs);
    spec_server_free(in);
}

/* spec_server_to_json, loaded again, gives the same JSON (a fixed point). */
static void test_to_json_fixed_point(void **state)
{
    (void)state;
    spec_server *in = load(settings_yaml);
    json_t *a = spec_server_to_json(in);
    char *yaml = spec_json_to_yaml(a, false);
    spec_server *again = load(yaml);
    json_t *b = spec_server_to_json(again);
    if (!json_equal(a, b)) {
        char *x = json_dumps(a, 0), *y = json_dumps(b, 0);
        fprintf(stderr, "first:  %s\nsecond: %s\n", x, y);
        free(x);
        free(y);
        fail();
    }
    /* the defaults are no settings at all */
    spec_server *d = spec_server_new_default();
    json_t *none = spec_server_to_json(d);
    assert_int_equal(json_object_size(none), 2); /* apiVersion, kind */
    json_decref(none);
    spec_server_free(d);
    json_decref(a);
    json_decref(b);
    free(yaml);
    spec_server_free(again);
    spec_server_free(in);
}

/* --image: the server's image; the trainers' too when the settings keep
 * the default one. */
static void test_image(void **state)
{
    (void)state;
    k8s_server_params p = {.image = "me/lathe:2"};
    json_t *objs = k8s_render_server(&p);
    spec_server *s = config_of(objs);
    assert_string_equal(s->k8s.image, "me/lathe:2");
    spec_server_free(s);
    json_decref(objs);

    spec_server *in = load(settings_yaml);
    p.settings = in;
    objs = k8s_render_server(&p);
    s = config_of(objs);
    assert_string_equal(s->k8s.image, "registry.example.com/lathe:1.2");
    const json_t *pod = json_object_get(
        json_object_get(json_object_get(find(objs, "Deployment", "lathe"), "spec"), "template"),
        "spec");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(pod, "containers"), 0), "image")),
                        "me/lathe:2");
    spec_server_free(s);
    json_decref(objs);
    spec_server_free(in);
}

/* The objects in order, the CRDs first, and no wildcard in any rule. */
static void test_objects(void **state)
{
    (void)state;
    k8s_server_params p = {0};
    json_t *objs = k8s_render_server(&p);
    const char *kinds[] = {"CustomResourceDefinition", "CustomResourceDefinition",
                           "CustomResourceDefinition", "CustomResourceDefinition", "Namespace",
                           "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                           "RoleBinding", "ConfigMap", "Deployment", "Service"};
    assert_int_equal(json_array_size(objs), sizeof kinds / sizeof kinds[0]);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(objs, i), "kind")),
                            kinds[i]);
    const char *roles[] = {"ClusterRole", "Role"};
    for (size_t r = 0; r < 2; r++) {
        size_t i;
        const json_t *rule;
        json_array_foreach(json_object_get(find(objs, roles[r], NULL), "rules"), i, rule) {
            const char *lists[] = {"apiGroups", "resources", "verbs"};
            for (size_t l = 0; l < 3; l++) {
                size_t k;
                const json_t *v;
                json_array_foreach(json_object_get(rule, lists[l]), k, v)
                    assert_string_not_equal(json_string_value(v), "*");
            }
        }
    }
    json_decref(objs);
    json_t *crds = k8s_render_crds();
    assert_int_equal(json_array_size(crds), 4);
    json_decref(crds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_config_loads),
        cmocka_unit_test(test_settings_round_trip),
        cmocka_unit_test(test_to_json_fixed_point),
        cmocka_unit_test(test_image),
        cmocka_unit_test(test_objects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
