/* test_planner.c: the planner's choices on whole job specs: the seed job,
 * method auto, models no GPU holds, the spec's own resources (fitting, not
 * fitting, unknown type), targets the model lacks, the effective batch,
 * deadlines, a cluster's GPU types and counts, and the three outputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan/plan.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* Loads a one-document spec from text. */
static spec_file load(const char *yaml)
{
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    size_t errors = spec_load_string("test.yaml", yaml, strlen(yaml), &f, &d);
    if (errors) diag_print_all(&d, stderr);
    assert_int_equal(errors, 0);
    diag_list_free(&d);
    return f;
}

static const char *job_yaml(const char *model, const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "apiVersion: lathe/v1\n"
             "kind: LoRATrainingJob\n"
             "metadata: {name: t}\n"
             "spec:\n"
             "  baseModel: {name: %s}\n"
             "  trainingData: {datasetPath: /nonexistent/data.jsonl, samples: 10000, batchSize: 4,\n"
             "                 gradientAccumulation: 8}\n"
             "  hyperparams: {epochs: 1, maxSeqLength: 2048}\n"
             "%s",
             model, extra);
    return buf;
}

static int plan_text(const char *yaml, const plan_options *opt, plan_result *r, diag_list *d)
{
    spec_file f = load(yaml);
    plan_options defaults;
    plan_options_defaults(&defaults);
    int rc = plan_job(spec_file_job(&f), opt ? opt : &defaults, r, d);
    spec_file_free(&f);
    return rc;
}

static void assert_batch_kept(const plan_result *r, const plan_config *c)
{
    assert_int_equal(c->micro_batch * c->grad_accum * c->dp, r->effective_batch);
    assert_int_equal(c->tp * c->pp * c->dp, c->gpus);
}

static bool has_reason(const plan_result *r, const char *needle)
{
    for (size_t i = 0; i < r->n_reasons; i++)
        if (strstr(r->reasons[i], needle)) return true;
    return false;
}

static void test_seed_job(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/examples/seed-lora-job.yaml", LATHE_SOURCE_DIR);
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_file(path, &f, &d), 0);
    plan_options opt;
    plan_options_defaults(&opt);
    plan_result r;
    int rc = plan_job(spec_file_job(&f), &opt, &r, &d);
    assert_int_equal(rc, LT_EXIT_OK);
    assert_true(r.found);
    assert_string_equal(r.model.name, "Qwen/Qwen2-7B");
    assert_int_equal(r.effective_batch, 32);
    assert_int_equal(r.steps, 4688); /* ceil(50000 x 3 / 32) */
    /* the spec asks for 1 x A100-40GB: lathe checks it and says what it thinks */
    assert_true(r.has_requested);
    assert_string_equal(r.requested.gpu->name, "A100-40GB");
    assert_int_equal(r.requested.gpus, 1);
    assert_true(r.requested.fits);
    assert_true(has_reason(&r, "your resources: 1 x A100-40GB"));
    /* ... but at 1 GPU it cannot finish inside maxDuration 8h, so lathe picks another plan */
    assert_true(r.requested.seconds > 8 * 3600);
    assert_true(has_reason(&r, "time out"));
    assert_true(r.chosen.seconds <= 8 * 3600);
    assert_true(r.chosen.fits);
    assert_batch_kept(&r, &r.chosen);
    assert_true(r.chosen.mem.peak <= r.chosen.usable);
    for (size_t i = 0; i < r.n_options; i++) assert_batch_kept(&r, &r.options[i]);
    plan_result_free(&r);
    spec_file_free(&f);
    diag_list_free(&d);
}

static void test_auto_small_model(void **state)
{
    (void)state;
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_text(job_yaml("Qwen2.5-0.5B-Instruct", "  method: auto\n"), NULL, &r, &d);
    assert_int_equal(rc, LT_EXIT_OK);
    assert_true(r.chosen.method == METHOD_LORA || r.chosen.method == METHOD_QLORA);
    assert_int_equal(r.chosen.gpus, 1);
    assert_true(has_reason(&r, "method: "));
    /* both methods were weighed */
    bool lora = false, qlora = false;
    for (size_t i = 0; i < r.n_options; i++) {
        lora |= r.options[i].method == METHOD_LORA;
        qlora |= r.options[i].method == METHOD_QLORA;
    }
    assert_true(lora && qlora);
    /* the options are ordered best first */
    for (size_t i = 1; i < r.n_options; i++)
        if (r.options[i].seconds <= 8 * 3600 || r.options[i - 1].seconds > 8 * 3600)
            assert_true(r.options[i - 1].cost <= r.options[i].cost * 1.005 + 1e-9);
    plan_result_free(&r);
    diag_list_free(&d);
}

/* A job that may share its GPU pays for its part of it (ceil(100 x memory
 * / GPU memory) hundredths): its plan costs that part of the GPU-hours, it
 * is never dearer than the same job on a GPU of its own, and its footprint
 * is no larger. */
static void test_shared_pays_its_part(void **state)
{
    (void)state;
    plan_result whole, part;
    diag_list d;
    diag_list_init(&d);
    const char *gpu = "  resources:\n    gpu: {type: A100-80GB, count: 1%s}\n";
    char extra[256];
    snprintf(extra, sizeof extra, gpu, "");
    assert_int_equal(plan_text(job_yaml("Qwen2.5-0.5B-Instruct", extra), NULL, &whole, &d), LT_EXIT_OK);
    snprintf(extra, sizeof extra, gpu, ", shared: true");
    char *yaml = xstrdup(job_yaml("Qwen2.5-0.5B-Instruct", extra));
    assert_int_equal(plan_text(yaml, NULL, &part, &d), LT_EXIT_OK);
    free(yaml);
    const plan_config *w = &whole.chosen, *p = &part.chosen;
    assert_int_equal(p->gpus, 1);
    double share = ceil(100.0 * p->mem.peak / p->gpu->memory) / 100.0;
    assert_true(share < 1);
    double hours = p->seconds / 3600.0;
    if (fabs(p->gpu_hours - hours * share) > 1e-9 * hours)
        fail_msg("gpu_hours %g, expected %g x %g", p->gpu_hours, hours, share);
    assert_true(fabs(p->cost - p->gpu_hours * p->gpu->price_per_hour) < 1e-9);
    assert_true(p->cost < w->cost);
    assert_true(p->mem.peak <= w->mem.peak);
    plan_result_free(&whole);
    plan_result_free(&part);
    /* left to lathe, the split is chosen by what the part costs: at most
     * the cost and the footprint of the same job on a GPU of its own */
    assert_int_equal(plan_text(job_yaml("Qwen2.5-0.5B-Instruct", ""), NULL, &whole, &d), LT_EXIT_OK);
    yaml = xstrdup(job_yaml("Qwen2.5-0.5B-Instruct", "  resources:\n    gpu: {shared: true}\n"));
    assert_int_equal(plan_text(yaml, NULL, &part, &d), LT_EXIT_OK);
    free(yaml);
    assert_false(part.has_requested);
    assert_true(part.chosen.cost < whole.chosen.cost);
    assert_true(part.chosen.mem.peak <= whole.chosen.mem.peak);
    printf("# shared: %.1f GiB, %.3f; on a GPU of its own: %.1f GiB, %.3f\n",
           part.chosen.mem.peak / GIB, part.chosen.cost, whole.chosen.mem.peak / GIB, whole.chosen.cost);
    plan_result_free(&whole);
    plan_result_free(&part);
    diag_list_free(&d);
}

static void test_model_no_gpu_holds(void **state)
{
    (void)state;
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    /* Llama-3.1-405B in 4 bits is ~200 GiB of weights: no single GPU */
    int rc = plan_text(job_yaml("meta-llama/Llama-3.1-405B", "  method: qlora\n"), NULL, &r, &d);
    assert_int_equal(rc, LT_EXIT_OK);
    assert_true(r.chosen.gpus > 1);
    assert_true(r.chosen.strategy == STRAT_ZERO3 || r.chosen.strategy == STRAT_FSDP ||
                r.chosen.tp * r.chosen.pp > 1);
    assert_true(r.chosen.mem.weights_quantised + r.chosen.mem.weights_dense <
                r.chosen.gpu->memory);
    assert_batch_kept(&r, &r.chosen);
    plan_result_free(&r);
    diag_list_free(&d);
}

static void test_requested_does_not_fit(void **state)
{
    (void)state;
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_text(job_yaml("meta-llama/Llama-2-70b-hf",
                                "  method: lora\n"
                                "  resources: {gpu: {count: 1, type: L4-24GB}}\n"),
                       NULL, &r, &d);
    assert_int_equal(rc, LT_EXIT_OK);
    assert_true(r.has_requested);
    assert_false(r.requested.fits);
    assert_true(has_reason(&r, "does NOT fit"));
    assert_true(r.found);
    assert_true(r.chosen.gpus > 1 || r.chosen.gpu->memory > 100 * GIB);
    plan_result_free(&r);
    diag_list_free(&d);
}

static void test_requested_fits_is_kept(void **state)
{
    (void)state;
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_text(job_yaml("Qwen2.5-1.5B",
                                "  method: lora\n"
                                "  resources: {gpu: {count: 2, type: a100-80g}}\n"),
                       NULL, &r, &d);
    assert_int_equal(rc, LT_EXIT_OK);
    assert_true(r.requested.fits);
    assert_string_equal(r.chosen.gpu->name, "A100-80GB"); /* found by a loose name */
    assert_int_equal(r.chosen.gpus, 2);
    assert_int_equal(r.chosen.dp, 2);
    assert_batch_kept(&r, &r.chosen);
    plan_result_free(&r);
    diag_list_free(&d);
}

static void test_unknown_gpu_type(void **state)
{
    (void)state;
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_text(job_yaml("Qwen2.5-7B", "  resources: {gpu: {count: 1, type: A100-80G-XL}}\n"),
                       NULL, &r, &d);
    assert_int_equal(rc, LT_EXIT_INVALID);
    assert_true(d.errors >= 1);
    assert_string_equal(d.items[d.len - 1].path, "spec.resources.gpu.type");
    assert_true(d.items[d.len - 1].line > 0);
    plan_result_free(&r);
    diag_list_free(&d);
}

static void test_target_the_model_lacks(void **state)
{
    (void)state;
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    int rc = plan_text(job_yaml("Qwen2.5-7B", "  lora:\n    rank: 8\n    targetModules: [q_proj, wqkv]\n"),
                       NULL, &r, &d);
    assert_int_equal(rc, LT_EXIT_INVALID);
    assert_int_equal(d.errors, 1);
    const diag *x = &d.items[d.len - 1];
    assert_string_equal(x->file, "test.yaml");
    assert_int_equal(x->line, 11); /* the line of the targetModules list */
    assert_non_null(strstr(x->message, "Qwen"));
    plan_result_free(&r);
    diag_list_free(&d);
}

static void test_deadline_buys_gpus(void **state)
{
    (void)state;
    plan_result slow, fast;
    diag_list d;
    diag_list_init(&d);
    const char *base = "  method: lora\n  timeout: {maxDuration: %s}\n";
    char extra[256];
    snprintf(extra, sizeof extra, base, "30d");
    assert_int_equal(plan_text(job_yaml("Qwen2.5-7B", extra), NULL, &slow, &d), LT_EXIT_OK);
    snprintf(extra, sizeof extra, base, "20m");
    assert_int_equal(plan_text(job_yaml("Qwen2.5-7B", extra), NULL, &fast, &d), LT_EXIT_OK);
    assert_true(fast.chosen.seconds < slow.chosen.seconds);
    assert_true(fast.chosen.gpus * fast.chosen.gpu->tflops > slow.chosen.gpus * slow.chosen.gpu->tflops);
    plan_result_free(&slow);
    plan_result_free(&fast);
    diag_list_free(&d);
}

static void test_cluster_catalogue(void **state)
{
    (void)state;
    const char *cluster =
        "apiVersion: lathe/v1\n"
        "kind: Cluster\n"
        "metadata: {name: small}\n"
        "spec:\n"
        "  gpuTypes:\n"
        "    - {name: L4-24GB, memory: 24Gi, pricePerHour: 0.10}\n"
        "    - {name: H100-80GB, memory: 80Gi, pricePerHour: 100}\n"
        "  nodes:\n"
        "    - {name: n1, gpuType: L4-24GB, gpus: 2}\n"
        "    - {name: n2, gpuType: H100-80GB, gpus: 8}\n";
    spec_file cf = load(cluster);
    plan_catalog cat;
    diag_list d;
    diag_list_init(&d);
    assert_true(plan_catalog_from_cluster(spec_file_cluster(&cf), &cat, &d));
    assert_int_equal(cat.n, 2);
    assert_int_equal(cat.gpus[0].available, 2);
    assert_int_equal(cat.gpus[0].per_node, 2);
    assert_true(cat.gpus[0].price_per_hour == 0.10);
    assert_true(cat.gpus[0].tflops > 100); /* taken from the built-in L4 */
    plan_options opt;
    plan_options_defaults(&opt);
    opt.catalog = &cat;
    plan_result r;
    assert_int_equal(plan_text(job_yaml("Qwen2.5-1.5B", "  method: lora\n"), &opt, &r, &d), LT_EXIT_OK);
    assert_string_equal(r.chosen.gpu->name, "L4-24GB"); /* a thousand times cheaper */
    for (size_t i = 0; i < r.n_options; i++)
        if (strcmp(r.options[i].gpu->name, "L4-24GB") == 0) assert_true(r.options[i].gpus <= 2);
    plan_result_free(&r);
    plan_catalog_free(&cat);
    spec_file_free(&cf);
    diag_list_free(&d);
}

static void test_cluster_unknown_throughput(void **state)
{
    (void)state;
    spec_file cf = load("apiVersion: lathe/v1\nkind: Cluster\nmetadata: {name: c}\nspec:\n"
                        "  gpuTypes: [{name: MI300X, memory: 192Gi, pricePerHour: 3}]\n");
    plan_catalog cat;
    diag_list d;
    diag_list_init(&d);
    assert_false(plan_catalog_from_cluster(spec_file_cluster(&cf), &cat, &d));
    assert_non_null(strstr(d.items[0].suggestion, "tflops"));
    plan_catalog_free(&cat);
    spec_file_free(&cf);
    diag_list_free(&d);
}

static void test_outputs(void **state)
{
    (void)state;
    spec_file f = load(job_yaml("Qwen2.5-7B", "  method: qlora\n  lora: {rank: 32, targetModules: [all-linear]}\n"));
    const spec_job *job = spec_file_job(&f);
    plan_options opt;
    plan_options_defaults(&opt);
    plan_result r;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(plan_job(job, &opt, &r, &d), LT_EXIT_OK);

    char *js = plan_to_json(&r);
    json_t *o = json_loads(js, 0, NULL);
    assert_non_null(o);
    json_t *chosen = json_object_get(o, "chosen");
    assert_true(json_is_real(json_object_get(chosen, "per_gpu_gib")));
    assert_string_equal(json_string_value(json_object_get(chosen, "method")), "qlora");
    assert_true(json_array_size(json_object_get(o, "reasons")) > 3);
    json_decref(o);
    free(js);

    char *sw = plan_emit_swift(&r, job);
    assert_non_null(strstr(sw, "swift sft"));
    assert_non_null(strstr(sw, "--train_type lora"));
    assert_non_null(strstr(sw, "--lora_rank 32"));
    assert_non_null(strstr(sw, "--quant_bits 4"));
    assert_non_null(strstr(sw, "--target_modules all-linear"));
    free(sw);

    spec_job *res = plan_resolved_job(&r, job);
    char *y = spec_job_to_yaml(res);
    spec_file back;
    assert_int_equal(spec_load_string("resolved.yaml", y, strlen(y), &back, &d), 0);
    const spec_job *b = spec_file_job(&back);
    assert_int_equal(b->resources.gpu_count, r.chosen.gpus_per_node);
    assert_string_equal(b->resources.gpu_type, r.chosen.gpu->name);
    assert_int_equal(b->training_data.batch_size, r.chosen.micro_batch);
    assert_int_equal(b->method, METHOD_QLORA);
    spec_file_free(&back);
    free(y);
    spec_job_free(res);

    sb text;
    sb_init(&text);
    plan_format_text(&r, &text);
    assert_non_null(strstr(sb_str(&text), "why"));
    assert_non_null(strstr(sb_str(&text), "seed article's formula"));
    sb_free(&text);
    plan_result_free(&r);
    spec_file_free(&f);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_job),
        cmocka_unit_test(test_auto_small_model),
        cmocka_unit_test(test_model_no_gpu_holds),
        cmocka_unit_test(test_requested_does_not_fit),
        cmocka_unit_test(test_requested_fits_is_kept),
        cmocka_unit_test(test_unknown_gpu_type),
        cmocka_unit_test(test_target_the_model_lacks),
        cmocka_unit_test(test_deadline_buys_gpus),
        cmocka_unit_test(test_cluster_catalogue),
        cmocka_unit_test(test_cluster_unknown_throughput),
        cmocka_unit_test(test_outputs),
        cmocka_unit_test(test_shared_pays_its_part),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
