/* test_config.c: reading Hugging Face config.json files of every supported
 * architecture (tests/model/data), and clean errors for broken ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model/model.h"

#include <stdio.h>
#include <string.h>

/* Reads a config and checks its architecture and exact count. */
static void expect_config(const char *file, model_arch arch, uint64_t params)
{
    model_shape m;
    diag_list d;
    diag_list_init(&d);
    bool ok = model_read_config(file, &m, &d);
    if (!ok) {
        sb s;
        sb_init(&s);
        for (size_t i = 0; i < d.len; i++) diag_format(&d.items[i], &s);
        fail_msg("%s: %s", file, sb_str(&s));
    }
    assert_int_equal(m.arch, arch);
    assert_int_equal(m.origin, MODEL_FROM_CONFIG);
    assert_non_null(strstr(m.origin_text, "config.json"));
    model_params p;
    model_count_params(&m, &p);
    if (p.total != params)
        fail_msg("%s: %llu parameters, expected %llu", file, (unsigned long long)p.total,
                 (unsigned long long)params);
    model_shape_free(&m);
    diag_list_free(&d);
}

static void test_architectures(void **state)
{
    (void)state;
    /* the same counts as the catalogue entries the files copy */
    expect_config(LATHE_TEST_DATA "/llama2-7b.json", MODEL_ARCH_LLAMA, 6738415616ull);
    expect_config(LATHE_TEST_DATA "/mistral-7b.json", MODEL_ARCH_MISTRAL, 7241732096ull);
    expect_config(LATHE_TEST_DATA "/qwen2-7b.json", MODEL_ARCH_QWEN2, 7615616512ull);
    expect_config(LATHE_TEST_DATA "/qwen3-0.6b.json", MODEL_ARCH_QWEN3, 596049920ull);
    expect_config(LATHE_TEST_DATA "/gemma-7b.json", MODEL_ARCH_GEMMA, 8537680896ull);
    expect_config(LATHE_TEST_DATA "/gemma2-2b.json", MODEL_ARCH_GEMMA2, 2614341888ull);
    expect_config(LATHE_TEST_DATA "/phi3-mini.json", MODEL_ARCH_PHI3, 3821079552ull);
    expect_config(LATHE_TEST_DATA "/internlm2-7b.json", MODEL_ARCH_INTERNLM2, 7737708544ull);
    expect_config(LATHE_TEST_DATA "/qwen-7b-v1.json", MODEL_ARCH_QWEN, 7721324544ull);
    expect_config(LATHE_TEST_DATA "/nested-text-config.json", MODEL_ARCH_MISTRAL, 7241732096ull);
    /* a folder holding config.json */
    expect_config(LATHE_TEST_DATA "/llama-folder", MODEL_ARCH_LLAMA, 6738415616ull);
}

static void test_fields(void **state)
{
    (void)state;
    model_shape m;
    diag_list d;
    diag_list_init(&d);
    assert_true(model_read_config(LATHE_TEST_DATA "/qwen-7b-v1.json", &m, &d));
    assert_int_equal(m.intermediate, 11008); /* config says 22016 */
    assert_int_equal(m.head_dim, 128);
    assert_int_equal(m.max_positions, 8192);
    assert_true(m.qkv_bias);
    assert_true(m.rope_theta == 10000.0);
    model_shape_free(&m);

    assert_true(model_read_config(LATHE_TEST_DATA "/qwen3-0.6b.json", &m, &d));
    assert_int_equal(m.head_dim, 128); /* explicit: 16 x 128 != 1024 */
    assert_true(m.qk_norm);
    assert_true(m.tied_embeddings);
    model_shape_free(&m);

    assert_true(model_read_config(LATHE_TEST_DATA "/gemma-7b.json", &m, &d));
    assert_true(m.tied_embeddings); /* Gemma's default */
    model_shape_free(&m);

    assert_true(model_read_config(LATHE_TEST_DATA "/llama-folder", &m, &d));
    assert_string_equal(m.name, "meta-llama/Llama-2-7b-hf");
    assert_int_equal(m.max_positions, 4096);
    model_shape_free(&m);
    assert_int_equal(d.len, 0);

    /* an unknown class is read as a Llama-like decoder, with a warning */
    assert_true(model_read_config(LATHE_TEST_DATA "/unknown-arch.json", &m, &d));
    assert_int_equal(m.arch, MODEL_ARCH_GENERIC);
    assert_int_equal(d.warnings, 1);
    assert_int_equal(d.errors, 0);
    model_params p;
    model_count_params(&m, &p);
    assert_int_equal(p.total, 1100048384ull); /* TinyLlama's shape */
    model_shape_free(&m);
    diag_list_free(&d);
}

/* A broken file fails with an error naming the file and, where one is at
 * fault, the field. */
static void expect_error(const char *name, const char *field, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad/%s", LATHE_TEST_DATA, name);
    model_shape m;
    diag_list d;
    diag_list_init(&d);
    assert_false(model_read_config(path, &m, &d));
    if (d.errors < 1) fail_msg("%s: no error", name);
    diag *x = NULL;
    for (size_t i = 0; i < d.len && !x; i++)
        if (d.items[i].level == DIAG_ERROR) x = &d.items[i];
    assert_non_null(x->file);
    assert_non_null(strstr(x->file, name));
    if (field) {
        if (!x->path || strcmp(x->path, field) != 0)
            fail_msg("%s: error on field %s, expected %s", name, x->path ? x->path : "(none)", field);
    }
    sb s;
    sb_init(&s);
    diag_format(x, &s);
    if (text && !strstr(sb_str(&s), text)) fail_msg("%s: message '%s' lacks '%s'", name, sb_str(&s), text);
    sb_free(&s);
    model_shape_free(&m);
    diag_list_free(&d);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("not-json.json", NULL, "not valid JSON");
    expect_error("missing-hidden.json", "hidden_size", "missing");
    expect_error("string-hidden.json", "hidden_size", "the string \"4096\"");
    expect_error("negative-layers.json", "num_hidden_layers", "-2");
    expect_error("heads-not-dividing.json", "head_dim", "hidden_size 4000");
    expect_error("kv-not-divisor.json", "num_key_value_heads", "divisor");
    expect_error("array.json", NULL, "config.json");
    expect_error("qwen-odd-intermediate.json", "intermediate_size", "even");
    expect_error("huge-hidden.json", "hidden_size", "out of range");
    expect_error("bad-tie.json", "tie_word_embeddings", "true or false");
    expect_error("architectures-string.json", "architectures", "list");
    expect_error("binary.json", NULL, "not valid JSON");
    expect_error("empty.json", NULL, "not valid JSON");
    expect_error("no-such-file.json", NULL, "cannot read");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_architectures),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
