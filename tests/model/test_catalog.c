/* test_catalog.c: the committed catalogue table against
 * shared/data/model_configs.json (field by field), the extra shapes against
 * the arch of every memory-calibration.jsonl row, name lookups, the generic
 * shape and model_resolve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model/model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* The generated table holds exactly the JSON's entries, in order. */
static void test_generated_matches_json(void **state)
{
    (void)state;
    json_error_t err;
    json_t *root = json_load_file(LATHE_SOURCE_DIR "/tests/ref/data/model_configs.json", 0, &err);
    assert_non_null(root);
    assert_int_equal(json_array_size(root), model_catalog_generated_len);
    size_t i;
    json_t *e;
    json_array_foreach(root, i, e)
    {
        const model_catalog_entry *c = &model_catalog_generated[i];
        const char *id = json_string_value(json_object_get(e, "model"));
        if (strcmp(c->id, id) != 0) fail_msg("entry %zu: table %s, JSON %s (regenerate)", i, c->id, id);
        model_arch a;
        assert_true(model_arch_from_hf(json_string_value(json_object_get(e, "architecture")), &a));
        assert_int_equal(c->arch, a);
        assert_int_equal(c->hidden, jint(e, "hidden_size"));
        assert_int_equal(c->intermediate, jint(e, "intermediate_size"));
        assert_int_equal(c->layers, jint(e, "num_hidden_layers"));
        assert_int_equal(c->heads, jint(e, "num_attention_heads"));
        assert_int_equal(c->kv_heads, jint(e, "num_key_value_heads"));
        assert_int_equal(c->head_dim, jint(e, "head_dim"));
        assert_int_equal(c->vocab, jint(e, "vocab_size"));
        assert_int_equal(c->max_positions, jint(e, "max_position_embeddings"));
        assert_true(fabs(c->rope_theta - json_number_value(json_object_get(e, "rope_theta"))) < 1e-6);
        assert_int_equal(c->tied_embeddings, json_is_true(json_object_get(e, "tie_word_embeddings")));
        assert_int_equal(c->param_count, (uint64_t)jint(e, "derived_param_count"));
        assert_string_equal(c->source, json_string_value(json_object_get(e, "source")));
    }
    json_decref(root);
}

/* Every model of the calibration file resolves to the dimensions its row
 * states (this pins the extra table and the name matching together). */
static void test_calibration_models(void **state)
{
    (void)state;
    FILE *f = fopen(LATHE_SOURCE_DIR "/share/calibration/memory-calibration.jsonl", "r");
    assert_non_null(f);
    char line[65536];
    int checked = 0;
    while (fgets(line, sizeof line, f)) {
        json_error_t err;
        json_t *row = json_loads(line, 0, &err);
        assert_non_null(row);
        json_t *arch = json_object_get(row, "arch");
        const char *name = json_string_value(json_object_get(row, "model"));
        if (json_is_object(arch) && json_is_true(json_object_get(row, "usable"))) {
            const model_catalog_entry *e = model_catalog_find(name);
            if (!e) fail_msg("calibration model %s not in the catalogue", name);
            model_shape m;
            model_shape_from_catalog(e, &m);
            model_params p;
            model_count_params(&m, &p);
            assert_int_equal(m.hidden, jint(arch, "hidden_size"));
            assert_int_equal(m.intermediate, jint(arch, "intermediate_size"));
            assert_int_equal(m.layers, jint(arch, "num_hidden_layers"));
            assert_int_equal(m.kv_heads, jint(arch, "num_key_value_heads"));
            assert_int_equal(m.head_dim, jint(arch, "head_dim"));
            assert_int_equal(m.vocab, jint(arch, "vocab_size"));
            if (p.total != (uint64_t)jint(row, "param_count"))
                fail_msg("%s: %llu vs row %lld", name, (unsigned long long)p.total,
                         (long long)jint(row, "param_count"));
            model_shape_free(&m);
            checked++;
        }
        json_decref(row);
    }
    fclose(f);
    assert_int_equal(checked, 79);
}

static void expect_find(const char *query, const char *id)
{
    const model_catalog_entry *e = model_catalog_find(query);
    if (!e) fail_msg("%s: not found, expected %s", query, id);
    if (strcmp(e->id, id) != 0) fail_msg("%s: found %s, expected %s", query, e->id, id);
}

static void test_lookup(void **state)
{
    (void)state;
    expect_find("Qwen/Qwen2-7B", "Qwen/Qwen2-7B");
    expect_find("qwen/qwen2-7b", "Qwen/Qwen2-7B");
    expect_find("Qwen2-7B", "Qwen/Qwen2-7B");
    expect_find("Qwen2-7B-Instruct", "Qwen/Qwen2-7B"); /* the seed's model */
    expect_find("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B");
    expect_find("Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B");
    expect_find("Llama-3-8B", "meta-llama/Meta-Llama-3-8B");
    expect_find("meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-hf");
    expect_find("Llama-2-7B", "meta-llama/Llama-2-7b-hf");
    expect_find("Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B");
    expect_find("Mistral-7B-Instruct-v0.2", "mistralai/Mistral-7B-v0.1");
    expect_find("Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-v0.3");
    expect_find("mistralai/Mistral-7B-v0.1", "mistralai/Mistral-7B-v0.1");
    expect_find("gemma-2b-it", "google/gemma-2b");
    expect_find("gemma-2-9b-it", "google/gemma-2-9b");
    expect_find("Qwen-1_8B-Chat", "Qwen/Qwen-1_8B");
    expect_find("Qwen-7B-Chat-Int4", "Qwen/Qwen-7B");
    expect_find("Qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B");
    expect_find("Qwen3-4B-Base", "Qwen/Qwen3-4B");
    expect_find("Yi-6B-Chat", "01-ai/Yi-6B");
    expect_find("openbuddy-zephyr-7b-v14.1", "OpenBuddy/openbuddy-zephyr-7b-v14.1");
    expect_find("TinyLlama-1.1B-intermediate-step-1431k-3T", "TinyLlama/TinyLlama-1.1B-Chat-v1.0");
    expect_find("internlm2-chat-7b", "internlm/internlm2-7b");
    expect_find("SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M");
    assert_null(model_catalog_find("Qwen1.5-7B"));
    assert_null(model_catalog_find("llama-9b"));
    assert_null(model_catalog_find(""));
    char key[128];
    model_catalog_key("meta-llama/Meta-Llama-3-8B-Instruct", false, key, sizeof key);
    assert_string_equal(key, "llama-3-8b");
    model_catalog_key("Mistral-7B-Instruct-v0.3", true, key, sizeof key);
    assert_string_equal(key, "mistral-7b-v0.3");
}

static void test_generic(void **state)
{
    (void)state;
    double sizes[] = {1.35e8, 1.1e9, 7e9, 13e9, 70e9, 405e9};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        model_shape m;
        assert_true(model_generic_shape(sizes[i], &m));
        model_params p;
        model_count_params(&m, &p);
        double rel = fabs((double)p.total - sizes[i]) / sizes[i];
        if (rel > 0.08) fail_msg("generic %.3g: %llu parameters (%.1f%% off)", sizes[i],
                                 (unsigned long long)p.total, rel * 100);
        assert_int_equal(m.origin, MODEL_FROM_GENERIC);
        assert_non_null(strstr(m.origin_text, "generic"));
        assert_int_equal(m.hidden % 128, 0);
        diag_list d;
        diag_list_init(&d);
        assert_true(model_shape_check(&m, NULL, &d));
        diag_list_free(&d);
        model_shape_free(&m);
    }
    model_shape m;
    assert_false(model_generic_shape(1e3, &m));
    assert_false(model_generic_shape(1e20, &m));
    double v;
    assert_true(model_size_from_name("Qwen1.5-7B-Chat", &v));
    assert_true(v == 7e9);
    assert_true(model_size_from_name("Qwen-1_8B", &v));
    assert_true(fabs(v - 1.8e9) < 1);
    assert_true(model_size_from_name("SmolLM-135M", &v));
    assert_true(v == 135e6);
    assert_false(model_size_from_name("Mixtral-8x7B", &v));
    assert_false(model_size_from_name("gpt", &v));
}

static void test_resolve(void **state)
{
    (void)state;
    diag_list d;
    model_shape m;

    diag_list_init(&d);
    assert_true(model_resolve(NULL, "Qwen2-7B-Instruct", 0, &m, &d));
    assert_int_equal(m.origin, MODEL_FROM_CATALOGUE);
    assert_non_null(strstr(m.origin_text, "Qwen/Qwen2-7B"));
    assert_int_equal(d.len, 0);
    model_shape_free(&m);
    diag_list_free(&d);

    /* path first when it exists */
    diag_list_init(&d);
    assert_true(model_resolve(LATHE_TEST_DATA "/llama-folder", "Qwen2-7B", 0, &m, &d));
    assert_int_equal(m.origin, MODEL_FROM_CONFIG);
    assert_int_equal(m.vocab, 32000);
    model_shape_free(&m);
    diag_list_free(&d);

    /* a missing path falls back to the name, with a warning */
    diag_list_init(&d);
    assert_true(model_resolve("/no/such/folder", "Qwen2-7B", 0, &m, &d));
    assert_int_equal(m.origin, MODEL_FROM_CATALOGUE);
    assert_int_equal(d.warnings, 1);
    assert_int_equal(d.errors, 0);
    model_shape_free(&m);
    diag_list_free(&d);

    /* unknown name with a count: generic, said so */
    diag_list_init(&d);
    assert_true(model_resolve(NULL, "my-private-model", 7e9, &m, &d));
    assert_int_equal(m.origin, MODEL_FROM_GENERIC);
    assert_string_equal(m.name, "my-private-model");
    assert_int_equal(d.warnings, 1);
    model_shape_free(&m);
    diag_list_free(&d);

    /* unknown name with a size in it */
    diag_list_init(&d);
    assert_true(model_resolve(NULL, "Qwen1.5-14B-Chat", 0, &m, &d));
    assert_int_equal(m.origin, MODEL_FROM_GENERIC);
    model_shape_free(&m);
    diag_list_free(&d);

    /* a bare count */
    diag_list_init(&d);
    assert_true(model_resolve(NULL, NULL, 7e9, &m, &d));
    assert_int_equal(m.origin, MODEL_FROM_GENERIC);
    model_shape_free(&m);
    diag_list_free(&d);

    /* a misspelt name: error with a suggestion */
    diag_list_init(&d);
    assert_false(model_resolve(NULL, "Qwen2-7C", 0, &m, &d));
    assert_int_equal(d.errors, 1);
    assert_non_null(d.items[0].suggestion);
    model_shape_free(&m);
    diag_list_free(&d);

    /* nothing at all */
    diag_list_init(&d);
    assert_false(model_resolve(NULL, NULL, 0, &m, &d));
    assert_int_equal(d.errors, 1);
    model_shape_free(&m);
    diag_list_free(&d);

    /* a count that disagrees with the catalogue is a warning */
    diag_list_init(&d);
    assert_true(model_resolve(NULL, "Qwen2-7B", 70e9, &m, &d));
    assert_int_equal(d.warnings, 1);
    model_shape_free(&m);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generated_matches_json),
        cmocka_unit_test(test_calibration_models),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_generic),
        cmocka_unit_test(test_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
