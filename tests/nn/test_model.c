/* test_model.c: the forward pass against the golden outputs of
 * tests/ref/models/llama2c-260K-plctlab (logits of 8 positions to 1e-4, the
 * 64 greedy ids from BOS), in F32 and re-encoded as BF16; the KV-cache decoder
 * against the full forward; config.json parsing of each family. */
#include "nn/nn.h"

#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#define GOLD LATHE_SOURCE_DIR "/tests/ref/models/llama2c-260K-plctlab"

static int32_t *golden_ids(size_t *n)
{
    char err[256];
    size_t len;
    char *text = file_read_all(GOLD "/golden.json", 1 << 20, &len, err, sizeof err);
    assert_non_null(text);
    json_t *o = json_loads(text, 0, NULL);
    free(text);
    json_t *g = json_object_get(o, "greedy_from_bos");
    *n = json_array_size(g);
    int32_t *ids = xmalloc(*n * sizeof *ids);
    for (size_t i = 0; i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(g, i));
    json_decref(o);
    return ids;
}

static tr_model load_model(const char *dir, tr_backend *be)
{
    tr_model m;
    tr_model_opts o = {.mode = TR_MODE_LORA};
    char err[512];
    bool ok = tr_model_load(&m, dir, &o, be, err, sizeof err);
    if (!ok) fprintf(stderr, "%s\n", err);
    assert_true(ok);
    return m;
}

static void check_golden_logits(const char *dir, float tol)
{
    tr_backend *be = tr_backend_cpu_create(0);
    tr_model m = load_model(dir, be);
    size_t n;
    int32_t *ids = golden_ids(&n);
    float *logits = xmalloc(8 * 512 * sizeof(float));
    tr_model_logits(&m, ids, 8, logits);
    size_t glen;
    char err[256];
    float *gold = (float *)file_read_all(GOLD "/golden_logits_pos0-7.f32", 1 << 20, &glen, err,
                                         sizeof err);
    assert_int_equal(glen, 8 * 512 * 4);
    double maxd = 0;
    for (int i = 0; i < 8 * 512; i++) maxd = fmax(maxd, fabs(logits[i] - gold[i]));
    printf("# max |logit - golden| = %.3g (tolerance %.3g)\n", maxd, tol);
    assert_true(maxd < tol);
    free(gold);
    free(logits);
    free(ids);
    tr_model_free(&m);
    be->destroy(be);
}

static void test_golden_logits_f32(void **state)
{
    (void)state;
    check_golden_logits(GOLD "/hf", 1e-4f);
}

/* Greedy decoding with the KV cache reproduces the 64 golden ids. */
static void test_golden_greedy(void **state)
{
    (void)state;
    tr_backend *be = tr_backend_cpu_create(0);
    tr_model m = load_model(GOLD "/hf", be);
    size_t n;
    int32_t *ids = golden_ids(&n);
    tr_sample_opts so = {.temperature = 0, .top_p = 1, .max_new = (int)n - 1, .eos_id = -1};
    int32_t *out = xmalloc(n * sizeof *out);
    int got = tr_generate(&m, ids, 1, &so, out, NULL, NULL);
    assert_int_equal(got, (int)n - 1);
    for (int i = 0; i < got; i++) assert_int_equal(out[i], ids[i + 1]);
    free(out);
    free(ids);
    tr_model_free(&m);
    be->destroy(be);
}

/* The cached decoder gives the same logits as the full forward, position by
 * position and for a prompt run in one piece. */
static void test_kv_cache_matches_forward(void **state)
{
    (void)state;
    tr_backend *be = tr_backend_cpu_create(0);
    tr_model m = load_model(GOLD "/hf", be);
    int T = 160, V = 512, P = 140; /* a prompt longer than one block of query rows */
    int32_t *ids = xmalloc((size_t)T * sizeof *ids);
    for (int t = 0; t < T; t++) ids[t] = (int32_t)((t * 37 + 11) % V);
    float *full = xmalloc((size_t)T * V * sizeof(float)), *one = xmalloc(V * sizeof(float));
    tr_model_logits(&m, ids, T, full);
    tr_kv_cache c;
    tr_kv_cache_init(&c, &m, T);
    assert_true(tr_model_decode(&m, &c, ids, P, one));
    for (int j = 0; j < V; j++) assert_true(fabsf(one[j] - full[(size_t)(P - 1) * V + j]) < 1e-4f);
    for (int t = P; t < T; t++) {
        assert_true(tr_model_decode(&m, &c, ids + t, 1, one));
        for (int j = 0; j < V; j++) assert_true(fabsf(one[j] - full[(size_t)t * V + j]) < 1e-4f);
    }
    assert_false(tr_model_decode(&m, &c, ids, 1, one)); /* the cache is full */
    tr_kv_cache_free(&c);
    free(full);
    free(one);
    free(ids);
    tr_model_free(&m);
    be->destroy(be);
}

/* Writes the golden model's tensors in dtype into a new temporary folder; with
 * round_only, as F32 holding the values rounded to dtype. Returns the folder. */
static char *write_recoded(tr_dtype dtype, bool round_only)
{
    char err[512];
    st_archive a;
    assert_true(st_open(&a, GOLD "/hf/model.safetensors", err, sizeof err));
    st_writer w;
    st_writer_init(&w);
    for (size_t i = 0; i < a.n; i++) {
        size_t n = (size_t)a.tensors[i].numel;
        float *f = xmalloc(n * sizeof(float));
        uint16_t *h = xmalloc(n * sizeof(uint16_t));
        tr_to_f32(f, a.tensors[i].data, a.tensors[i].dtype, n);
        tr_from_f32(h, f, dtype, n);
        tr_to_f32(f, h, dtype, n);
        st_writer_add_f32(&w, a.tensors[i].name, round_only ? TR_F32 : dtype, a.tensors[i].ndim,
                          a.tensors[i].shape, f);
        free(f);
        free(h);
    }
    char *dir = xstrdup("/tmp/lathe-test-recode-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char *p = path_join(dir, "model.safetensors");
    assert_int_equal(st_writer_save(&w, p), 0);
    free(p);
    size_t len;
    char *cfg = file_read_all(GOLD "/hf/config.json", 1 << 20, &len, err, sizeof err);
    p = path_join(dir, "config.json");
    assert_int_equal(file_write_atomic(p, cfg, len), 0);
    free(p);
    free(cfg);
    st_writer_free(&w);
    st_close(&a);
    return dir;
}

static void remove_dir(char *dir)
{
    char err[512];
    assert_int_equal(file_remove_tree(dir, err, sizeof err), 0);
    free(dir);
}

/* BF16 and F16 weights, converted tile by tile inside the matmuls, give the
 * logits of an F32 model holding the same rounded values. */
static void test_half_precision_weights(void **state)
{
    (void)state;
    tr_dtype types[2] = {TR_BF16, TR_F16};
    size_t n;
    int32_t *ids = golden_ids(&n);
    for (int k = 0; k < 2; k++) {
        char *half = write_recoded(types[k], false), *rounded = write_recoded(types[k], true);
        tr_backend *be = tr_backend_cpu_create(0);
        tr_model a = load_model(half, be), b = load_model(rounded, be);
        assert_int_equal(a.embed.dtype, types[k]);
        float *la = xmalloc(16 * 512 * sizeof(float)), *lb = xmalloc(16 * 512 * sizeof(float));
        tr_model_logits(&a, ids, 16, la);
        tr_model_logits(&b, ids, 16, lb);
        double maxd = 0;
        for (int i = 0; i < 16 * 512; i++) maxd = fmax(maxd, fabs(la[i] - lb[i]));
        printf("# %s: max |logit difference| = %.3g\n", tr_dtype_name(types[k]), maxd);
        assert_true(maxd < 1e-4);
        free(la);
        free(lb);
        tr_model_free(&a);
        tr_model_free(&b);
        be->destroy(be);
        remove_dir(half);
        remove_dir(rounded);
    }
    free(ids);
}

static void test_config_families(void **state)
{
    (void)state;
    char err[512];
    tr_config c;
    const char *qwen2 = "{\"model_type\":\"qwen2\",\"vocab_size\":151936,\"hidden_size\":896,"
                        "\"intermediate_size\":4864,\"num_hidden_layers\":24,\"num_attention_heads\":14,"
                        "\"num_key_value_heads\":2,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,"
                        "\"rms_norm_eps\":1e-06,\"torch_dtype\":\"bfloat16\",\"hidden_act\":\"silu\"}";
    assert_true(tr_config_parse(&c, qwen2, strlen(qwen2), "q.json", err, sizeof err));
    assert_int_equal(c.arch, TR_ARCH_QWEN2);
    assert_true(c.qkv_bias && !c.o_bias && c.tie_embeddings && !c.qk_norm);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.dtype, TR_BF16);
    /* Qwen2.5-0.5B has 494,032,768 parameters (its model card says 0.49B) */
    assert_int_equal(tr_config_param_count(&c), 494032768);
    const char *qwen3 = "{\"model_type\":\"qwen3\",\"vocab_size\":1000,\"hidden_size\":64,"
                        "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                        "\"num_key_value_heads\":2,\"head_dim\":32}";
    assert_true(tr_config_parse(&c, qwen3, strlen(qwen3), "q3.json", err, sizeof err));
    assert_true(c.qk_norm && !c.qkv_bias);
    assert_int_equal(c.head_dim, 32);
    const char *llama3 = "{\"model_type\":\"llama\",\"vocab_size\":128256,\"hidden_size\":4096,"
                         "\"intermediate_size\":14336,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
                         "\"num_key_value_heads\":8,\"rope_theta\":500000.0,\"eos_token_id\":[128001,128009],"
                         "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                         "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}}";
    assert_true(tr_config_parse(&c, llama3, strlen(llama3), "l3.json", err, sizeof err));
    assert_int_equal(c.rope_kind, TR_ROPE_LLAMA3);
    assert_int_equal(c.eos_id, 128001);
    /* Llama-3.1-8B: 8,030,261,248 parameters */
    assert_int_equal(tr_config_param_count(&c), 8030261248LL);
    const char *mistral = "{\"model_type\":\"mistral\",\"vocab_size\":32000,\"hidden_size\":4096,"
                          "\"intermediate_size\":14336,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
                          "\"num_key_value_heads\":8,\"sliding_window\":4096}";
    assert_true(tr_config_parse(&c, mistral, strlen(mistral), "m.json", err, sizeof err));
    assert_int_equal(c.sliding_window, 4096);
    /* Mistral-7B-v0.1: 7,241,732,096 parameters */
    assert_int_equal(tr_config_param_count(&c), 7241732096LL);
    /* errors name the file and the field */
    const char *bad = "{\"model_type\":\"gpt2\",\"vocab_size\":10}";
    assert_false(tr_config_parse(&c, bad, strlen(bad), "bad.json", err, sizeof err));
    assert_non_null(strstr(err, "bad.json: field model_type"));
    const char *bad2 = "{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":\"big\"}";
    assert_false(tr_config_parse(&c, bad2, strlen(bad2), "bad2.json", err, sizeof err));
    assert_non_null(strstr(err, "hidden_size"));
    const char *bad3 = "{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,"
                       "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                       "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}";
    assert_false(tr_config_parse(&c, bad3, strlen(bad3), "bad3.json", err, sizeof err));
    assert_non_null(strstr(err, "rope_scaling"));
    /* found by fuzz_hfconfig: a position count beyond an int was cast anyway */
    const char *bad4 = "{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,"
                       "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                       "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,"
                       "\"original_max_position_embeddings\":11111111116}}";
    assert_false(tr_config_parse(&c, bad4, strlen(bad4), "bad4.json", err, sizeof err));
    assert_non_null(strstr(err, "original_max_position_embeddings"));
    /* round trip through the writer */
    assert_true(tr_config_parse(&c, llama3, strlen(llama3), "l3.json", err, sizeof err));
    char *js = tr_config_to_json(&c);
    tr_config c2;
    assert_true(tr_config_parse(&c2, js, strlen(js), "rt.json", err, sizeof err));
    assert_int_equal(c2.rope_kind, TR_ROPE_LLAMA3);
    assert_int_equal(c2.n_kv_heads, 8);
    assert_int_equal(tr_config_param_count(&c2), tr_config_param_count(&c));
    free(js);
}

/* A config.json that does not match the weights: the message names the
 * tensor, both shapes, and the fix. */
static void test_mismatched_config(void **state)
{
    (void)state;
    char dir[] = "/tmp/lathe-test-mismatch-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char err[512];
    size_t len;
    char *cfg = file_read_all(GOLD "/hf/config.json", 1 << 20, &len, err, sizeof err);
    char *at = strstr(cfg, "\"intermediate_size\": 172");
    assert_non_null(at);
    memcpy(at, "\"intermediate_size\": 100", 24);
    char *p = path_join(dir, "config.json");
    assert_int_equal(file_write_atomic(p, cfg, len), 0);
    free(p);
    p = path_join(dir, "model.safetensors");
    assert_int_equal(symlink(GOLD "/hf/model.safetensors", p), 0);
    free(p);
    tr_backend *be = tr_backend_cpu_create(0);
    tr_model m;
    tr_model_opts o = {.mode = TR_MODE_LORA};
    assert_false(tr_model_load(&m, dir, &o, be, err, sizeof err));
    printf("# %s\n", err);
    assert_non_null(strstr(err, "model.layers.0.mlp.gate_proj.weight has shape [172, 64] and dtype "
                                "F32; config.json implies [100, 64]"));
    be->destroy(be);
    free(cfg);
    assert_int_equal(file_remove_tree(dir, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_logits_f32),
        cmocka_unit_test(test_golden_greedy),
        cmocka_unit_test(test_kv_cache_matches_forward),
        cmocka_unit_test(test_half_precision_weights),
        cmocka_unit_test(test_config_families),
        cmocka_unit_test(test_mismatched_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
