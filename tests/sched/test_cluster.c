/* test_cluster.c: the cluster snapshot built from a Cluster spec (the
 * shared example file, loaded by the spec part) and from bad specs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/sched.h"

#include <stdio.h>
#include <string.h>

static sched_cluster *load(const char *name, const char *text, diag_list *d, spec_file *f)
{
    memset(f, 0, sizeof *f);
    size_t e = text ? spec_load_string(name, text, strlen(text), f, d) : spec_load_file(name, f, d);
    if (e) {
        diag_print_all(d, stderr);
        return NULL;
    }
    const spec_cluster *sc = spec_file_cluster(f);
    assert_non_null(sc);
    return sched_cluster_from_spec(sc, d);
}

static void test_example_cluster(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    spec_file f;
    sched_cluster *c = load(LATHE_SOURCE_DIR "/examples/cluster-example.yaml", NULL, &d, &f);
    assert_non_null(c);
    assert_int_equal(c->n_types, 2);
    int a100 = sched_cluster_find_type(c, "A100-80GB"), l4 = sched_cluster_find_type(c, "L4-24GB");
    assert_true(a100 >= 0 && l4 >= 0);
    assert_true(c->types[a100].memory == 80 * GIB && c->types[a100].price_per_hour == 2.5);
    /* 16 A100 nodes of 8 GPUs (2 NVLink groups of 4) in 2 racks, one L4 node of 4 */
    assert_int_equal(c->n_nodes, 17);
    assert_int_equal(c->n_gpus, 16 * 8 + 4);
    assert_int_equal(c->type_gpus[a100], 128);
    assert_int_equal(c->type_max_node[l4], 4);
    int n = sched_cluster_find_node(c, "a100-01");
    assert_true(n >= 0);
    assert_int_equal(c->nodes[n].n_gpus, 8);
    assert_int_equal(c->nodes[n].n_groups, 2);
    int g0 = c->nodes[n].first_gpu;
    assert_int_equal(c->gpu_group[g0 + 3], c->gpu_group[g0]);
    assert_true(c->gpu_group[g0 + 4] != c->gpu_group[g0]);
    assert_int_equal(c->group_size[c->gpu_group[g0]], 4);
    assert_int_equal(c->n_racks, 3); /* a100-rack-1, a100-rack-2, dev-rack */
    assert_true(c->nodes[sched_cluster_find_node(c, "a100-09")].rack !=
                c->nodes[sched_cluster_find_node(c, "a100-08")].rack);
    /* teams: quotas, borrowing and lending limits, budget */
    int ta = sched_cluster_find_team(c, "team-a"), tb = sched_cluster_find_team(c, "team-b");
    assert_true(c->teams[ta].limited && c->teams[ta].quota[a100] == 64 && c->teams[ta].quota[l4] == 2);
    assert_int_equal(c->teams[ta].borrow_limit[a100], 32);
    assert_int_equal(c->teams[ta].borrow_limit[l4], SCHED_UNLIMITED);
    assert_true(c->teams[ta].budget == 50000);
    assert_int_equal(c->teams[tb].lend_limit[a100], 32);
    /* priority classes */
    int hp = sched_cluster_find_priority(c, "high-priority");
    assert_true(hp >= 0 && c->prios[hp].value == 1000000 && c->prios[hp].preempt_lower);
    assert_string_equal(c->prios[c->default_prio].name, "default");
    /* the seed's "64 A100 against a quota of 32" kind of request is refused */
    sched_job j;
    memset(&j, 0, sizeof j);
    j.team = ta;
    j.replicas = 13;
    j.gpus_per_replica = 8;
    sched_reason why;
    assert_false(sched_check_job(c, &j, &why));
    assert_int_equal(why.code, SCHED_WHY_OVER_QUOTA);
    assert_int_equal(why.limit, 96);
    j.replicas = 12;
    assert_true(sched_check_job(c, &j, &why));
    sched_cluster_free(c);
    spec_file_free(&f);
    diag_list_free(&d);
}

static void test_bad_cluster(void **state)
{
    (void)state;
    /* a node on 65 GPUs is more than the scheduler takes on one node */
    const char *text = "apiVersion: lathe/v1\nkind: Cluster\nmetadata: {name: big}\nspec:\n"
                       "  gpuTypes: [{name: X, memory: 80Gi}]\n"
                       "  nodes: [{name: n1, gpuType: X, gpus: 65}]\n";
    diag_list d;
    diag_list_init(&d);
    spec_file f;
    sched_cluster *c = load("big.yaml", text, &d, &f);
    assert_null(c);
    assert_true(d.errors > 0);
    sb s;
    sb_init(&s);
    diag_format(&d.items[d.len - 1], &s);
    assert_non_null(strstr(sb_str(&s), "big.yaml"));
    assert_non_null(strstr(sb_str(&s), "n1"));
    assert_non_null(strstr(sb_str(&s), "1 to 64 GPUs"));
    sb_free(&s);
    spec_file_free(&f);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_cluster),
        cmocka_unit_test(test_bad_cluster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
