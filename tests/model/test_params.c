/* test_params.c: exact parameter counts (published sizes and every
 * derived_param_count of shared/data/model_configs.json), adaptable modules
 * per architecture, target-name parsing and LoRA / DoRA counts against
 * hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model/model.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static void shape_of(const char *name, model_shape *m)
{
    const model_catalog_entry *e = model_catalog_find(name);
    assert_non_null(e);
    model_shape_from_catalog(e, m);
}

static uint64_t total_of(const char *name)
{
    model_shape m;
    shape_of(name, &m);
    model_params p;
    model_count_params(&m, &p);
    model_shape_free(&m);
    return p.total;
}

static void test_published_sizes(void **state)
{
    (void)state;
    assert_int_equal(total_of("meta-llama/Llama-2-7b-hf"), 6738415616ull);
    assert_int_equal(total_of("Qwen/Qwen2.5-7B"), 7615616512ull);
    /* Google's published sizes for Gemma (tied embeddings, head_dim 256). */
    assert_int_equal(total_of("google/gemma-2b"), 2506172416ull);
    assert_int_equal(total_of("google/gemma-7b"), 8537680896ull);
}

/* Every entry of model_configs.json: the count lathe derives equals the
 * derived_param_count written next to the dimensions. */
static void test_model_configs_counts(void **state)
{
    (void)state;
    json_error_t err;
    json_t *root = json_load_file(LATHE_SOURCE_DIR "/tests/ref/data/model_configs.json", 0, &err);
    assert_non_null(root);
    assert_int_equal(json_array_size(root), 33);
    size_t i;
    json_t *e;
    json_array_foreach(root, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "model"));
        uint64_t want = (uint64_t)json_integer_value(json_object_get(e, "derived_param_count"));
        uint64_t got = total_of(id);
        if (got != want) fail_msg("%s: lathe counts %llu, model_configs.json %llu", id,
                                  (unsigned long long)got, (unsigned long long)want);
    }
    json_decref(root);
}

/* Every catalogue entry's stored count equals the count from its shape. */
static void test_catalogue_counts_consistent(void **state)
{
    (void)state;
    for (size_t i = 0; i < model_catalog_count(); i++) {
        const model_catalog_entry *e = model_catalog_at(i);
        model_shape m;
        model_shape_from_catalog(e, &m);
        model_params p;
        model_count_params(&m, &p);
        if (p.total != e->param_count)
            fail_msg("%s: shape gives %llu, entry says %llu", e->id, (unsigned long long)p.total,
                     (unsigned long long)e->param_count);
        model_shape_free(&m);
    }
}

static void test_param_breakdown(void **state)
{
    (void)state;
    model_shape m;
    shape_of("Qwen/Qwen2-7B", &m);
    model_params p;
    model_count_params(&m, &p);
    /* q 3584x3584, k/v 3584x512, o 3584x3584, biases 3584 + 2 x 512 */
    assert_int_equal(p.per_layer_attn, 3584ull * 3584 * 2 + 2ull * 3584 * 512 + 3584 + 1024);
    assert_int_equal(p.per_layer_mlp, 3ull * 3584 * 18944);
    assert_int_equal(p.per_layer_norm, 2ull * 3584);
    assert_int_equal(p.embedding, 152064ull * 3584);
    assert_int_equal(p.lm_head, 152064ull * 3584);
    assert_int_equal(p.linear, 28ull * (3584ull * 3584 * 2 + 2ull * 3584 * 512 + 3ull * 3584 * 18944));
    model_shape_free(&m);

    shape_of("Qwen/Qwen3-8B", &m); /* q/k norms: 2 x head_dim per layer */
    model_count_params(&m, &p);
    assert_int_equal(p.per_layer_norm, 2ull * 4096 + 2 * 128);
    model_shape_free(&m);

    shape_of("google/gemma-2-2b", &m); /* four norms per layer, tied */
    model_count_params(&m, &p);
    assert_int_equal(p.per_layer_norm, 4ull * 2304);
    assert_int_equal(p.lm_head, 0);
    model_shape_free(&m);
}

static uint64_t lora_of(const char *name, const char *targets, int rank, bool dora)
{
    model_shape m;
    shape_of(name, &m);
    char **names = NULL;
    size_t n = str_split(targets, ',', &names);
    diag_list d;
    diag_list_init(&d);
    unsigned roles = 0;
    assert_true(model_targets_from_names(&m, (const char *const *)names, n, "targets", &roles, &d));
    model_lora_count c;
    model_lora_params(&m, roles, rank, dora, &c);
    str_list_free(names, n);
    diag_list_free(&d);
    model_shape_free(&m);
    return c.total;
}

static void test_lora_counts(void **state)
{
    (void)state;
    /* r x (in + out) per matrix per layer, by hand: */
    /* Llama-2-7B q,v r8: 2 x 8 x (4096 + 4096) x 32 (PEFT prints 4,194,304) */
    assert_int_equal(lora_of("Llama-2-7b-hf", "q_proj,v_proj", 8, false), 4194304ull);
    /* all-linear r16: attn 4 x 16 x 8192 + gate/up 2 x 16 x 15104 + down 16 x 15104, x 32 */
    assert_int_equal(lora_of("Llama-2-7b-hf", "all-linear", 16, false),
                     32ull * (4 * 16 * 8192 + 3 * 16 * (4096 + 11008)));
    assert_int_equal(lora_of("Llama-2-7b-hf", "all-linear", 16, false), 39976960ull);
    /* lm_head once: 8 x (4096 + 32000) */
    assert_int_equal(lora_of("Llama-2-7b-hf", "q_proj,v_proj,lm_head", 8, false),
                     4194304ull + 8 * (4096 + 32000));
    /* GQA: Qwen2-7B k/v project to 4 x 128 = 512 */
    assert_int_equal(lora_of("Qwen2-7B", "q_proj,k_proj,v_proj,o_proj", 8, false),
                     28ull * 8 * ((3584 + 3584) * 2 + (3584 + 512) * 2));
    /* fused modules adapt as one matrix */
    assert_int_equal(lora_of("Phi-3-mini-4k-instruct", "qkv_proj", 8, false),
                     32ull * 8 * (3072 + 3 * 3072));
    assert_int_equal(lora_of("Phi-3-mini-4k-instruct", "gate_up_proj", 4, false),
                     32ull * 4 * (3072 + 2 * 8192));
    assert_int_equal(lora_of("Qwen-7B-Chat", "c_attn", 8, false), 32ull * 8 * (4096 + 3 * 4096));
    /* Qwen v1 "c_proj" names both the attention output and the MLP down projection */
    assert_int_equal(lora_of("Qwen-7B-Chat", "c_proj", 8, false),
                     32ull * 8 * ((4096 + 4096) + (11008 + 4096)));
    assert_int_equal(lora_of("internlm2-7b", "wqkv,wo", 8, false),
                     32ull * 8 * ((4096 + 4096 + 2 * 1024) + (4096 + 4096)));
    /* the embedding once: A is 8 x 32000, B 4096 x 8 */
    assert_int_equal(lora_of("Llama-2-7b-hf", "embed_tokens", 8, false), 8ull * (32000 + 4096));
    assert_int_equal(lora_of("Qwen-7B-Chat", "wte", 4, false), 4ull * (151936 + 4096));
    /* DoRA adds a magnitude of length out per adapted matrix */
    assert_int_equal(lora_of("Llama-2-7b-hf", "q_proj,v_proj", 8, true), 4194304ull + 32 * 2 * 4096);
}

static void test_modules(void **state)
{
    (void)state;
    model_shape m;
    shape_of("Phi-3-mini-4k-instruct", &m);
    assert_true(model_has_module(&m, "qkv_proj"));
    assert_true(model_has_module(&m, "gate_up_proj"));
    assert_true(model_has_module(&m, "all-linear"));
    assert_false(model_has_module(&m, "q_proj"));
    diag_list d;
    diag_list_init(&d);
    const char *bad[] = {"q_proj"};
    unsigned roles;
    assert_false(model_targets_from_names(&m, bad, 1, "spec.lora.targetModules", &roles, &d));
    assert_int_equal(d.errors, 1);
    assert_non_null(strstr(d.items[0].suggestion, "qkv_proj"));
    assert_string_equal(d.items[0].path, "spec.lora.targetModules");
    diag_list_free(&d);
    model_shape_free(&m);

    shape_of("Qwen/Qwen-7B", &m);
    assert_true(model_has_module(&m, "c_attn"));
    assert_true(model_has_module(&m, "w1"));
    assert_false(model_has_module(&m, "gate_proj"));
    model_shape_free(&m);

    shape_of("internlm/internlm2-7b", &m);
    assert_true(model_has_module(&m, "wqkv"));
    assert_true(model_has_module(&m, "output"));
    assert_false(model_has_module(&m, "lm_head"));
    assert_true(model_has_module(&m, "tok_embeddings"));
    assert_false(model_has_module(&m, "embed_tokens"));
    model_shape_free(&m);

    shape_of("Llama-2-7b-hf", &m);
    const char *typo[] = {"q_prj"};
    diag_list_init(&d);
    assert_false(model_targets_from_names(&m, typo, 1, "targets", &roles, &d));
    assert_non_null(strstr(d.items[0].suggestion, "q_proj"));
    diag_list_free(&d);
    sb s;
    sb_init(&s);
    model_targets_format(&m, MODEL_ROLES_ALL_LINEAR | MODEL_ROLE_LM_HEAD, &s);
    assert_string_equal(sb_str(&s), "all-linear,lm_head");
    sb_clear(&s);
    model_targets_format(&m, MODEL_ROLE_Q | MODEL_ROLE_V, &s);
    assert_string_equal(sb_str(&s), "q_proj,v_proj");
    sb_free(&s);
    model_shape_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_sizes),
        cmocka_unit_test(test_model_configs_counts),
        cmocka_unit_test(test_catalogue_counts_consistent),
        cmocka_unit_test(test_param_breakdown),
        cmocka_unit_test(test_lora_counts),
        cmocka_unit_test(test_modules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
