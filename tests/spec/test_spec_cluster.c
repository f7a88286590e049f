/* test_spec_cluster.c: the Cluster: the shared example with every value
 * asserted, node group expansion (names, zero padding, racks), NVLink
 * groups (GPUs outside any group form their own), quotas for "any GPU",
 * priority classes and the lookups the scheduler uses, the node limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXAMPLE LATHE_SOURCE_DIR "/examples/cluster-example.yaml"

static spec_cluster *load_cluster(const char *spec_body, spec_file *f, diag_list *d)
{
    char *text = xasprintf("apiVersion: lathe/v1\nkind: Cluster\nmetadata: {name: c}\nspec:\n%s",
                           spec_body);
    diag_list_init(d);
    size_t e = spec_load_string("c.yaml", text, strlen(text), f, d);
    free(text);
    if (e) diag_print_all(d, stderr);
    assert_int_equal(e, 0);
    spec_cluster *c = spec_file_cluster(f);
    assert_non_null(c);
    return c;
}

static void test_example(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_file(EXAMPLE, &f, &d), 0);
    assert_int_equal(d.len, 0);
    const spec_cluster *c = spec_file_cluster(&f);
    assert_non_null(c);
    assert_null(spec_file_job(&f));
    assert_string_equal(c->name, "example");
    assert_string_equal(c->file, EXAMPLE);

    assert_int_equal(c->n_gpu_types, 2);
    assert_string_equal(c->gpu_types[0].name, "A100-80GB");
    assert_true(c->gpu_types[0].memory == 80 * GIB);
    assert_true(c->gpu_types[0].price_per_hour == 2.5);
    assert_true(c->gpu_types[0].tflops == 0);
    assert_string_equal(c->gpu_types[1].name, "L4-24GB");
    assert_true(c->gpu_types[1].memory == 24 * GIB);
    assert_true(c->gpu_types[1].price_per_hour == 0.8);

    assert_int_equal(c->n_nodes, 17);
    for (int i = 0; i < 16; i++) {
        const spec_node *n = &c->nodes[i];
        char name[16], rack[16];
        snprintf(name, sizeof name, "a100-%02d", i + 1);
        snprintf(rack, sizeof rack, "a100-rack-%d", i < 8 ? 1 : 2);
        assert_string_equal(n->name, name);
        assert_string_equal(n->rack, rack);
        assert_string_equal(n->gpu_type, "A100-80GB");
        assert_int_equal(n->gpus, 8);
        assert_int_equal(n->n_nvlink_groups, 2);
        for (int g = 0; g < 8; g++) assert_int_equal(n->nvlink_group[g], g < 4 ? 0 : 1);
        assert_int_equal(n->state, NODE_READY);
        assert_int_equal(n->n_labels, 0);
    }
    const spec_node *dev = &c->nodes[16];
    assert_string_equal(dev->name, "dev-l4-1");
    assert_string_equal(dev->rack, "dev-rack");
    assert_string_equal(dev->gpu_type, "L4-24GB");
    assert_int_equal(dev->gpus, 4);
    assert_int_equal(dev->n_nvlink_groups, 4); /* no NVLink: each GPU alone */
    for (int g = 0; g < 4; g++) assert_int_equal(dev->nvlink_group[g], g);
    assert_true(dev->cpus == 0 && dev->memory == 0);

    assert_int_equal(c->n_teams, 2);
    const spec_team *a = spec_cluster_team(c, "team-a"), *b = spec_cluster_team(c, "team-b");
    assert_ptr_equal(a, &c->teams[0]);
    assert_int_equal(a->n_quota, 2);
    assert_string_equal(a->quota[0].gpu_type, "A100-80GB");
    assert_int_equal(a->quota[0].count, 64);
    assert_string_equal(a->quota[1].gpu_type, "L4-24GB");
    assert_int_equal(a->quota[1].count, 2);
    assert_int_equal(a->n_borrowing_limit, 1);
    assert_int_equal(a->borrowing_limit[0].count, 32);
    assert_int_equal(a->n_lending_limit, 0);
    assert_true(a->weight == 1);
    assert_true(a->budget_per_month == 50000);
    assert_int_equal(a->max_concurrent_jobs, 0);
    assert_int_equal(b->n_borrowing_limit, 0);
    assert_int_equal(b->n_lending_limit, 1);
    assert_string_equal(b->lending_limit[0].gpu_type, "A100-80GB");
    assert_int_equal(b->lending_limit[0].count, 32);
    assert_true(b->budget_per_month == 0);

    assert_int_equal(c->n_priority_classes, 2);
    const spec_priority_class *high = spec_cluster_priority_class(c, "high-priority");
    assert_int_equal(high->value, 1000000);
    assert_true(high->preempt_lower);
    assert_false(high->global_default);
    assert_string_equal(high->description, "for urgent release work");
    const spec_priority_class *def = spec_cluster_default_priority(c);
    assert_string_equal(def->name, "default");
    assert_int_equal(def->value, 0);
    assert_true(def->preempt_lower);
    assert_null(def->description);

    assert_ptr_equal(spec_cluster_gpu_type(c, "L4-24GB"), &c->gpu_types[1]);
    assert_null(spec_cluster_gpu_type(c, "H100-80GB"));
    assert_null(spec_cluster_team(c, "team-c"));
    assert_null(spec_cluster_priority_class(c, NULL));
    spec_file_free(&f);
    diag_list_free(&d);
}

/* Node numbers are padded to the width of the count, at least 2 digits. */
static void test_group_names(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    spec_cluster *c = load_cluster("  gpuTypes: [{name: H100, memory: 80Gi}]\n"
                                   "  nodeGroups:\n"
                                   "    - {namePrefix: small, count: 5}\n"
                                   "    - {namePrefix: big, count: 100, nodesPerRack: 32,\n"
                                   "       gpuType: H100, gpusPerNode: 8, labels: {pool: train},\n"
                                   "       state: down, cpus: 96, memory: 1Ti}\n",
                                   &f, &d);
    assert_int_equal(c->n_nodes, 105);
    assert_string_equal(c->nodes[0].name, "small-01");
    assert_string_equal(c->nodes[4].name, "small-05");
    assert_null(c->nodes[0].rack);
    assert_null(c->nodes[0].gpu_type);
    assert_int_equal(c->nodes[0].gpus, 0);
    const spec_node *n = &c->nodes[5];
    assert_string_equal(n->name, "big-001");
    assert_string_equal(n->rack, "big-rack-1");
    assert_string_equal(c->nodes[5 + 31].rack, "big-rack-1");
    assert_string_equal(c->nodes[5 + 32].rack, "big-rack-2");
    assert_string_equal(c->nodes[104].name, "big-100");
    assert_string_equal(c->nodes[104].rack, "big-rack-4");
    assert_int_equal(n->state, NODE_DOWN);
    assert_true(n->cpus == 96);
    assert_true(n->memory == 1024 * GIB);
    assert_int_equal(n->n_labels, 1);
    assert_string_equal(n->labels[0].value, "train");
    assert_int_equal(n->n_nvlink_groups, 8);
    spec_file_free(&f);
    diag_list_free(&d);
}

static void test_nvlink_and_quotas(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    spec_cluster *c = load_cluster("  gpuTypes: [{name: A100, memory: 80Gi, tflops: 312}]\n"
                                   "  nodes:\n"
                                   "    - {name: n1, gpuType: A100, gpus: 8,\n"
                                   "       nvlinkGroups: [[0, 1], [], [4, 5]]}\n"
                                   "  teams:\n"
                                   "    - name: t1\n"
                                   "      quota: {nvidia.com/gpu: \"32\", A100: 8}\n"
                                   "      borrowingLimit: {\"*\": 4}\n"
                                   "      lendingLimit: {requests.nvidia.com/gpu: 0}\n"
                                   "      weight: 2.5\n"
                                   "      maxConcurrentJobs: 3\n"
                                   "  priorityClasses:\n"
                                   "    - {name: batch, value: -5, preemptionPolicy: Never}\n",
                                   &f, &d);
    const spec_node *n = &c->nodes[0];
    static const int want[] = {0, 0, 2, 3, 1, 1, 4, 5};
    for (int g = 0; g < 8; g++) assert_int_equal(n->nvlink_group[g], want[g]);
    assert_int_equal(n->n_nvlink_groups, 6);
    assert_true(c->gpu_types[0].tflops == 312);
    const spec_team *t = &c->teams[0];
    assert_string_equal(t->quota[0].gpu_type, "*");
    assert_int_equal(t->quota[0].count, 32);
    assert_string_equal(t->borrowing_limit[0].gpu_type, "*");
    assert_string_equal(t->lending_limit[0].gpu_type, "*");
    assert_int_equal(t->lending_limit[0].count, 0);
    assert_true(t->weight == 2.5);
    assert_int_equal(t->max_concurrent_jobs, 3);
    assert_false(c->priority_classes[0].preempt_lower);
    assert_int_equal(c->priority_classes[0].value, -5);
    assert_null(spec_cluster_default_priority(c));
    spec_file_free(&f);
    diag_list_free(&d);
}

static void test_limits(void **state)
{
    (void)state;
    static const char text[] =
        "apiVersion: lathe/v1\nkind: Cluster\nmetadata: {name: c}\nspec:\n"
        "  nodeGroups:\n"
        "    - {namePrefix: a, count: 60000}\n"
        "    - {namePrefix: b, count: 60000}\n";
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_string("c.yaml", text, strlen(text), &f, &d), 1);
    assert_non_null(strstr(d.items[0].message, "too many nodes"));
    assert_string_equal(d.items[0].found, "120000");
    spec_file_free(&f);
    diag_list_free(&d);

    static const char gpus[] =
        "apiVersion: lathe/v1\nkind: Cluster\nmetadata: {name: c}\nspec:\n"
        "  gpuTypes: [{name: g, memory: 1Gi}]\n"
        "  nodeGroups:\n"
        "    - {namePrefix: a, count: 2000, gpuType: g, gpusPerNode: 1024}\n";
    diag_list_init(&d);
    assert_int_equal(spec_load_string("c.yaml", gpus, strlen(gpus), &f, &d), 1);
    assert_non_null(strstr(d.items[0].message, "too many GPUs"));
    spec_file_free(&f);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_group_names),
        cmocka_unit_test(test_nvlink_and_quotas),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
