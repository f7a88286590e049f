/* test_spec_experiment.c: LoRAExperiment expansion: order (last axis
 * fastest), names (sweep-r8-lr1e-4, the index fallback), values and
 * positions in each job, labels and namespace, the size limit with its
 * count, paths that are not job fields, errors that name the matrix value,
 * template errors reported once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD                                                                                   \
    "apiVersion: lathe/v1\nkind: LoRAExperiment\nmetadata: {name: %s}\nspec:\n"              \
    "  template:\n    baseModel: {name: Qwen2-7B}\n    trainingData: {datasetPath: /d}\n"   \
    "  matrix:\n%s"

static spec_experiment *load_exp(const char *name, const char *matrix, spec_file *f,
                                 diag_list *d)
{
    char *text = xasprintf(HEAD, name, matrix);
    diag_list_init(d);
    size_t e = spec_load_string("e.yaml", text, strlen(text), f, d);
    free(text);
    if (e) diag_print_all(d, stderr);
    assert_int_equal(e, 0);
    assert_int_equal(f->n_docs, 1);
    assert_int_equal(f->docs[0].kind, SPEC_KIND_EXPERIMENT);
    return f->docs[0].experiment;
}

static size_t load_exp_errors(const char *name, const char *matrix, diag_list *d)
{
    char *text = xasprintf(HEAD, name, matrix);
    spec_file f;
    diag_list_init(d);
    size_t e = spec_load_string("e.yaml", text, strlen(text), &f, d);
    assert_int_equal(f.n_docs, 0);
    spec_file_free(&f);
    free(text);
    return e;
}

static bool has_text(const diag_list *d, const char *text)
{
    for (size_t i = 0; i < d->len; i++) {
        sb s;
        sb_init(&s);
        diag_format(&d->items[i], &s);
        bool ok = strstr(sb_str(&s), text) != NULL;
        sb_free(&s);
        if (ok) return true;
    }
    return false;
}

static void test_example_sweep(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_file(LATHE_SOURCE_DIR "/examples/jobs/sweep-rank-lr.yaml", &f, &d),
                     0);
    spec_experiment *e = f.docs[0].experiment;
    assert_string_equal(e->name, "sweep");
    assert_string_equal(e->namespace_, "ai-training");
    assert_int_equal(e->max_concurrent, 2);
    assert_int_equal(e->n_axes, 2);
    assert_string_equal(e->axes[0].path, "lora.rank");
    assert_int_equal(e->axes[0].n_values, 3);
    assert_string_equal(e->axes[0].values[2], "32");
    assert_string_equal(e->axes[1].path, "hyperparams.learningRate");
    assert_string_equal(e->axes[1].values[0], "1e-4");
    assert_int_equal(e->n_jobs, 6);
    static const char *const names[] = {"sweep-r8-lr1e-4",  "sweep-r8-lr2e-4",
                                        "sweep-r16-lr1e-4", "sweep-r16-lr2e-4",
                                        "sweep-r32-lr1e-4", "sweep-r32-lr2e-4"};
    static const int ranks[] = {8, 8, 16, 16, 32, 32};
    for (size_t i = 0; i < 6; i++) {
        const spec_job *j = e->jobs[i];
        assert_string_equal(j->name, names[i]);
        assert_int_equal(j->lora.rank, ranks[i]);
        assert_true(j->lora.alpha == 2.0 * ranks[i]); /* the default follows each rank */
        assert_true(j->hyperparams.learning_rate == (i % 2 ? 2e-4 : 1e-4));
        assert_string_equal(j->experiment, "sweep");
        assert_string_equal(j->namespace_, "ai-training");
        assert_string_equal(j->team, "ai-training");
        assert_string_equal(j->api_version, "lathe/v1");
        assert_int_equal(j->n_labels, 1);
        assert_string_equal(j->labels[0].key, "project");
        assert_string_equal(j->labels[0].value, "support-bot");
        assert_int_equal(j->hyperparams.epochs, 2); /* from the template */
        assert_int_equal(j->training_data.batch_size, 4);
        assert_int_equal(j->lora.pos_rank.line, 27); /* the matrix value's place */
        assert_int_equal(j->lora.pos_target_modules[0].line, 19);
    }
    assert_int_equal(e->jobs[2]->lora.pos_rank.col, 20);
    spec_file_free(&f);
    diag_list_free(&d);
}

static void test_forms_and_labels(void **state)
{
    (void)state;
    static const char text[] =
        "apiVersion: lathe/v1\nkind: LoRAExperiment\n"
        "metadata: {name: t, labels: {a: exp, b: exp}}\n"
        "spec:\n"
        "  template:\n"
        "    metadata: {labels: {b: tmpl, c: tmpl}}\n"
        "    baseModel: {name: Qwen2-7B}\n"
        "    trainingData: {datasetPath: /d}\n"
        "  matrix:\n"
        "    lora.targetModules: [[q_proj, v_proj], all-linear]\n"
        "    quantization.bits: [4, 16]\n";
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_string("e.yaml", text, strlen(text), &f, &d), 0);
    spec_experiment *e = f.docs[0].experiment;
    assert_int_equal(e->n_jobs, 4);
    assert_string_equal(e->jobs[0]->name, "t-tm-q-proj-v-proj-b4");
    assert_string_equal(e->jobs[3]->name, "t-tm-all-linear-b16");
    assert_int_equal(e->jobs[0]->lora.n_target_modules, 2);
    assert_string_equal(e->jobs[0]->lora.target_modules[1], "v_proj");
    assert_int_equal(e->jobs[0]->method, METHOD_QLORA); /* 4 bits */
    assert_int_equal(e->jobs[1]->method, METHOD_LORA);
    const spec_job *j = e->jobs[0];
    assert_int_equal(j->n_labels, 3);
    assert_string_equal(j->labels[0].value, "exp");
    assert_string_equal(j->labels[1].key, "b");
    assert_string_equal(j->labels[1].value, "tmpl"); /* the template's wins */
    assert_string_equal(j->labels[2].key, "c");
    assert_string_equal(j->team, "default");
    spec_file_free(&f);
    diag_list_free(&d);
}

/* Names too long, or not unique: <experiment>-<k>, at most 63 characters. */
static void test_name_fallback(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    const char *long_name = "a-very-long-experiment-name-that-fills-most-of-a-label-xxxxx";
    spec_experiment *e = load_exp(long_name, "    lora.rank: [8, 16]\n", &f, &d);
    assert_int_equal(e->n_jobs, 2);
    assert_int_equal(strlen(e->jobs[0]->name), 62);
    assert_true(str_ends_with(e->jobs[0]->name, "-1"));
    assert_true(str_ends_with(e->jobs[1]->name, "-2"));
    spec_file_free(&f);
    diag_list_free(&d);

    e = load_exp("x", "    hyperparams.learningRate: [1e-4, 1E-4]\n", &f, &d);
    assert_string_equal(e->jobs[0]->name, "x-1");
    assert_string_equal(e->jobs[1]->name, "x-2");
    spec_file_free(&f);
    diag_list_free(&d);

    e = load_exp("x", "    lora.dropout: [0.05, 0.1]\n", &f, &d);
    assert_string_equal(e->jobs[0]->name, "x-d0p05");
    assert_string_equal(e->jobs[1]->name, "x-d0p1");
    spec_file_free(&f);
    diag_list_free(&d);
}

static char *values(int n)
{
    sb s;
    sb_init(&s);
    sb_putc(&s, '[');
    for (int i = 0; i < n; i++) sb_printf(&s, "%s%d", i ? ", " : "", i + 1);
    sb_putc(&s, ']');
    return sb_take(&s);
}

static void test_matrix_limit(void **state)
{
    (void)state;
    char *v100 = values(100), *v73 = values(73), *v137 = values(137);
    /* 100 x 100 = 10000: at the limit, expanded */
    char *m = xasprintf("    hyperparams.seed: %s\n    hyperparams.maxSteps: %s\n", v100, v100);
    spec_file f;
    diag_list d;
    spec_experiment *e = load_exp("big", m, &f, &d);
    assert_int_equal(e->n_jobs, SPEC_MAX_MATRIX_JOBS);
    assert_string_equal(e->jobs[9999]->name, "big-s100-ms100");
    assert_int_equal(e->jobs[9999]->hyperparams.seed, 100);
    spec_file_free(&f);
    diag_list_free(&d);
    free(m);

    /* 73 x 137 = 10001: refused before anything is expanded, with the count */
    m = xasprintf("    hyperparams.seed: %s\n    hyperparams.maxSteps: %s\n", v73, v137);
    assert_int_equal(load_exp_errors("big", m, &d), 1);
    assert_true(has_text(&d, "the matrix expands into too many jobs (expected at most 10000 "
                             "jobs, found 10001 jobs)"));
    diag_list_free(&d);
    free(m);

    /* 20 axes of 10: 1e20 overflows 64 bits */
    static const char *const paths[] = {
        "lora.rank", "lora.alpha", "lora.dropout", "hyperparams.learningRate",
        "hyperparams.seed", "hyperparams.epochs", "hyperparams.maxSteps",
        "hyperparams.warmupSteps", "hyperparams.weightDecay", "hyperparams.maxGradNorm",
        "trainingData.batchSize", "trainingData.gradientAccumulation", "trainingData.samples",
        "checkpoint.intervalSteps", "checkpoint.keepLast", "retryPolicy.maxRetries",
        "retryPolicy.backoffSeconds", "retryPolicy.maxBackoffSeconds",
        "hyperparams.maxSeqLength", "resources.nodes"};
    char *v10 = values(10);
    sb s;
    sb_init(&s);
    for (int i = 0; i < 20; i++) sb_printf(&s, "    %s: %s\n", paths[i], v10);
    assert_int_equal(load_exp_errors("big", sb_str(&s), &d), 1);
    assert_true(has_text(&d, "found more than 18446744073709551615 jobs"));
    diag_list_free(&d);
    sb_free(&s);
    free(v10);
    free(v100);
    free(v73);
    free(v137);
}

static void test_matrix_paths(void **state)
{
    (void)state;
    diag_list d;
    assert_int_equal(load_exp_errors("x", "    lora.rnak: [8]\n"
                                          "    hyperparams.learningrate: [1e-4]\n"
                                          "    trainingdata: [1]\n"
                                          "    hyperparams: [1]\n"
                                          "    lora.rank.x: [1]\n"
                                          "    lora..rank: [1]\n",
                                     &d),
                     6);
    assert_true(has_text(&d, "spec.matrix.lora.rnak: not a field of a job spec"));
    assert_true(has_text(&d, "did you mean lora.rank?"));
    assert_true(has_text(&d, "did you mean hyperparams.learningRate?"));
    assert_true(has_text(&d, "a matrix path must name a value, not a section"));
    diag_list_free(&d);

    /* an empty axis, a scalar axis, an empty matrix */
    assert_int_equal(load_exp_errors("x", "    lora.rank: []\n    lora.alpha: 8\n", &d), 2);
    assert_true(has_text(&d, "an axis needs a value"));
    diag_list_free(&d);
    assert_int_equal(load_exp_errors("x", "    {}\n", &d), 1);
    assert_true(has_text(&d, "the matrix is empty"));
    diag_list_free(&d);
}

/* A bad value is reported where the matrix wrote it, naming the value;
 * a template error shared by every job is reported once. */
static void test_variant_errors(void **state)
{
    (void)state;
    static const char text[] =
        "apiVersion: lathe/v1\nkind: LoRAExperiment\nmetadata: {name: x}\nspec:\n"
        "  template:\n"
        "    baseModel: {name: Qwen2-7B}\n"
        "    trainingData: {datasetPath: /d}\n"
        "    lora: {alpah: 3}\n"
        "  matrix:\n"
        "    lora.rank: [8, 0, 4096]\n"
        "    trainingData.batchSize: [1, 2]\n";
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_string("e.yaml", text, strlen(text), &f, &d), 3);
    assert_int_equal(f.n_docs, 0);
    assert_int_equal(d.items[0].line, 8); /* alpah, once for the six jobs */
    assert_string_equal(d.items[0].path, "spec.template.lora.alpah");
    assert_true(has_text(&d, "e.yaml:10:20: error: spec.template.lora.rank: out of range, from "
                             "matrix value lora.rank = 0"));
    assert_true(has_text(&d, "e.yaml:10:23: error: spec.template.lora.rank: out of range, from "
                             "matrix value lora.rank = 4096"));
    spec_file_free(&f);
    diag_list_free(&d);
}

/* Many bad values: the first hundred problems are shown, then a note. */
static void test_variant_error_cap(void **state)
{
    (void)state;
    sb s;
    sb_init(&s);
    sb_puts(&s, "    lora.rank: [");
    for (int i = 0; i < 150; i++) sb_printf(&s, "%s%d", i ? ", " : "", 2000 + i);
    sb_puts(&s, "]\n");
    diag_list d;
    assert_int_equal(load_exp_errors("x", sb_str(&s), &d), 100);
    assert_true(has_text(&d, "50 more problems in other jobs of the matrix are not shown"));
    diag_list_free(&d);
    sb_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_sweep),   cmocka_unit_test(test_forms_and_labels),
        cmocka_unit_test(test_name_fallback),   cmocka_unit_test(test_matrix_limit),
        cmocka_unit_test(test_matrix_paths),    cmocka_unit_test(test_variant_errors),
        cmocka_unit_test(test_variant_error_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
