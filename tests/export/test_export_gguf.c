/* test_export_gguf.c: `lathe export --to gguf` (lib/export) read back with
 * the tests' own GGUF reader (gguf_reader.c, written from the spec):
 *   - every key, tensor name, shape and dtype of tiny random Llama, Qwen2
 *     and Qwen3 models with the real Llama 3 / Qwen3 tokenizers
 *     (share/tokenizers);
 *   - tensor data equal to the safetensors (F32 exactly, F16 as rounded),
 *     q/k rows of the llama architecture permuted (checked against a
 *     hand-computed case and against llama2.c's own layout of the real
 *     260K model in tests/ref/models), a merged adapter equal to
 *     W + alpha/r * B A computed here from the adapter's files;
 *   - tokens, token types and merges equal to tokenizer.json;
 *   - the writer's key/value types, and the reader refusing malformed files.
 * The reader is compiled into this program (tests/CMakeLists.txt builds one
 * source per test), so it is included here. */
#include "gguf_reader.c"

#include "base/base.h"
#include "export/export.h"
#include "hf/hf.h"
#include "nn/nn.h"
#include "tok/tok.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/tiny_models.h"

#define TOKDIR LATHE_SOURCE_DIR "/share/tokenizers/"
#define LLAMA2C LATHE_SOURCE_DIR "/tests/ref/models/llama2c-260K-plctlab/"

/* ---- helpers ---- */

typedef struct fx {
    char dir[128];
    char *buf;  /* the exported file */
    size_t len;
    gr_file f;
} fx;

static void fx_tmpdir(fx *x)
{
    snprintf(x->dir, sizeof x->dir, "/tmp/lathe-export-XXXXXX");
    assert_non_null(mkdtemp(x->dir));
}

static void fx_free(fx *x)
{
    gr_free(&x->f);
    free(x->buf);
    char err[256];
    file_remove_tree(x->dir, err, sizeof err);
}

static char *fx_path(const fx *x, const char *name)
{
    return path_join(x->dir, name);
}

/* Exports and parses the result with the test reader. */
static void fx_export(fx *x, ex_gguf_opts *o)
{
    char err[1024], *out = fx_path(x, "out.gguf");
    bool ok = ex_export_gguf(o, out, NULL, err, sizeof err);
    if (!ok) fail_msg("export: %s", err);
    x->buf = file_read_all(out, (size_t)1 << 31, &x->len, err, sizeof err);
    assert_non_null(x->buf);
    if (!gr_parse(&x->f, x->buf, x->len, err, sizeof err)) fail_msg("reader: %s", err);
    free(out);
}

static const gr_kv *kv_of(const fx *x, const char *key, uint32_t type)
{
    const gr_kv *kv = gr_find(&x->f, key);
    if (!kv) fail_msg("key %s missing", key);
    if (kv->v.type != type) fail_msg("key %s: type %u, expected %u", key, kv->v.type, type);
    return kv;
}

static void expect_u32(const fx *x, const char *key, uint64_t v)
{
    const gr_kv *kv = kv_of(x, key, GR_UINT32);
    if (kv->v.u != v) fail_msg("%s = %llu, expected %llu", key, (unsigned long long)kv->v.u, (unsigned long long)v);
}

static void expect_f32(const fx *x, const char *key, double v)
{
    assert_float_equal(kv_of(x, key, GR_FLOAT32)->v.f, (float)v, 0);
}

static void expect_str(const fx *x, const char *key, const char *v)
{
    const gr_kv *kv = kv_of(x, key, GR_STRING);
    if (kv->v.len != strlen(v) || memcmp(kv->v.str, v, kv->v.len) != 0)
        fail_msg("%s = \"%.*s\", expected \"%s\"", key, (int)kv->v.len, kv->v.str, v);
}

static void expect_bool(const fx *x, const char *key, bool v)
{
    assert_int_equal(kv_of(x, key, GR_BOOL)->v.u, v ? 1 : 0);
}

static bool str_is(const gr_value *v, const char *s, size_t n)
{
    return v->type == GR_STRING && v->len == n && memcmp(v->str, s, n) == 0;
}

/* The tensor, with its ggml shape (ne[0] innermost) and type checked. */
static const gr_tensor *expect_tensor(const fx *x, const char *name, uint32_t type, int ndim,
                                      uint64_t ne0, uint64_t ne1)
{
    const gr_tensor *t = gr_tensor_find(&x->f, name);
    if (!t) fail_msg("tensor %s missing", name);
    if (t->type != type || (int)t->n_dims != ndim || t->ne[0] != ne0 || (ndim > 1 && t->ne[1] != ne1))
        fail_msg("tensor %s: type %u dims %u ne {%llu, %llu}, expected type %u dims %d ne {%llu, %llu}",
                 name, t->type, t->n_dims, (unsigned long long)t->ne[0],
                 (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 0), type, ndim,
                 (unsigned long long)ne0, (unsigned long long)ne1);
    return t;
}

/* Tensor data against fp32 values: F32 exactly and F16 as rounded to
 * nearest, or, with approx (a merged adapter, whose sums lathe's gemm adds
 * in another order), within 1e-5 relative (F32) / half an F16 step. */
static void expect_near(const gr_tensor *t, const float *want, size_t n, const char *name,
                        bool approx)
{
    for (size_t i = 0; i < n; i++) {
        float got, w = want[i];
        bool bad;
        if (t->type == 0) {
            memcpy(&got, t->data + 4 * i, 4);
            bad = approx ? fabsf(got - w) > 1e-5f * (1 + fabsf(w)) : got != w;
        } else {
            uint16_t h;
            memcpy(&h, t->data + 2 * i, 2);
            got = tr_f16_to_f32(h);
            bad = fabsf(got - w) > fabsf(w) / 1024 + (approx ? 1e-5f : 6e-8f) ||
                  (!approx && h != tr_f32_to_f16(w));
        }
        if (bad) fail_msg("%s[%zu] = %.9g (%s), expected %.9g", name, i, got,
                          t->type == 0 ? "f32" : "f16", w);
    }
}

static void expect_data(const gr_tensor *t, const float *want, size_t n, const char *name)
{
    expect_near(t, want, n, name, false);
}

/* A safetensors tensor as fp32; caller frees. */
static float *st_f32(const st_archive *a, const char *name, size_t *n)
{
    const st_tensor *t = st_find(a, name);
    if (!t) fail_msg("safetensors: %s missing", name);
    float *v = malloc((size_t)t->numel * sizeof *v);
    tr_to_f32(v, t->data, t->dtype, (size_t)t->numel);
    *n = (size_t)t->numel;
    return v;
}

/* The permutation written out by hand from convert_hf_to_gguf's reshape
 * (n_head, 2, hd/2, cols) -> swapaxes(1, 2): dst row h*hd + 2i + j comes
 * from src row h*hd + j*hd/2 + i. */
static float *permuted(const float *src, int n_head, size_t rows, size_t cols)
{
    float *dst = malloc(rows * cols * sizeof *dst);
    size_t hd = rows / (size_t)n_head;
    for (size_t r = 0; r < rows; r++) {
        size_t h = r / hd, k = r % hd, i = k / 2, j = k % 2;
        size_t from = h * hd + j * (hd / 2) + i;
        memcpy(dst + r * cols, src + from * cols, cols * sizeof *dst);
    }
    return dst;
}

/* ---- the tokenizer against tokenizer.json ---- */

/* The id of an added token's content in tokenizer.json, or -1. */
static int64_t added_id(json_t *tok, const char *content)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(tok, "added_tokens"), i, v)
        if (!strcmp(json_string_value(json_object_get(v, "content")), content))
            return json_integer_value(json_object_get(v, "id"));
    return -1;
}

/* eos / pad ids and the chat template against tokenizer_config.json. */
static void expect_tokenizer_config(const fx *x, const char *tokfile)
{
    char *dir = xstrdup(tokfile), *slash = strrchr(dir, '/');
    *slash = 0;
    char *cfgp = path_join(dir, "tokenizer_config.json");
    json_error_t je;
    json_t *cfg = json_load_file(cfgp, 0, &je), *tok = json_load_file(tokfile, 0, &je);
    free(cfgp);
    free(dir);
    if (!cfg) {
        json_decref(tok);
        return;
    }
    const char *eos = json_string_value(json_object_get(cfg, "eos_token"));
    const char *pad = json_string_value(json_object_get(cfg, "pad_token"));
    const char *tmpl = json_string_value(json_object_get(cfg, "chat_template"));
    if (eos) expect_u32(x, "tokenizer.ggml.eos_token_id", (uint64_t)added_id(tok, eos));
    if (pad) expect_u32(x, "tokenizer.ggml.padding_token_id", (uint64_t)added_id(tok, pad));
    else assert_null(gr_find(&x->f, "tokenizer.ggml.padding_token_id"));
    if (tmpl) expect_str(x, "tokenizer.chat_template", tmpl);
    else assert_null(gr_find(&x->f, "tokenizer.chat_template"));
    json_decref(cfg);
    json_decref(tok);
}

/* Every key in the file is one the exporter is meant to write. */
static void expect_only_known_keys(const fx *x, const char *arch)
{
    static const char *const general[] = {
        "general.architecture", "general.name", "general.file_type", "tokenizer.ggml.model",
        "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.add_eos_token", "tokenizer.chat_template"};
    static const char *const per_arch[] = {
        "vocab_size", "context_length", "embedding_length", "block_count",
        "feed_forward_length", "attention.head_count", "attention.head_count_kv",
        "attention.key_length", "attention.value_length", "rope.dimension_count",
        "attention.layer_norm_rms_epsilon", "rope.freq_base", "rope.scaling.type",
        "rope.scaling.factor"};
    for (uint64_t i = 0; i < x->f.n_kv; i++) {
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)x->f.kv[i].key_len, x->f.kv[i].key);
        bool known = false;
        for (size_t k = 0; k < sizeof general / sizeof *general && !known; k++)
            known = !strcmp(key, general[k]);
        size_t al = strlen(arch);
        for (size_t k = 0; k < sizeof per_arch / sizeof *per_arch && !known; k++)
            known = !strncmp(key, arch, al) && key[al] == '.' && !strcmp(key + al + 1, per_arch[k]);
        if (!known) fail_msg("unexpected key %s", key);
    }
}

static void expect_tokenizer(const fx *x, const char *tokfile, int vocab, const char *pre)
{
    expect_str(x, "tokenizer.ggml.model", "gpt2");
    expect_str(x, "tokenizer.ggml.pre", pre);
    json_error_t je;
    json_t *root = json_load_file(tokfile, 0, &je);
    assert_non_null(root);
    const gr_value *toks = &kv_of(x, "tokenizer.ggml.tokens", GR_ARRAY)->v;
    const gr_value *types = &kv_of(x, "tokenizer.ggml.token_type", GR_ARRAY)->v;
    assert_int_equal(toks->arr_type, GR_STRING);
    assert_int_equal(types->arr_type, GR_INT32);
    assert_int_equal(toks->arr_n, (uint64_t)vocab);
    assert_int_equal(types->arr_n, (uint64_t)vocab);
    int32_t *want = calloc((size_t)vocab, sizeof *want); /* expected type; 0 = a hole */
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(root, "model"), "vocab"), k, v) {
        json_int_t id = json_integer_value(v);
        assert_true(str_is(&toks->arr[id], k, strlen(k)));
        want[id] = 1;
    }
    size_t i;
    json_array_foreach(json_object_get(root, "added_tokens"), i, v) {
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        const char *c = json_string_value(json_object_get(v, "content"));
        assert_true(str_is(&toks->arr[id], c, strlen(c)));
        want[id] = json_is_true(json_object_get(v, "special")) ? 3 : 4;
    }
    for (int id = 0; id < vocab; id++) {
        int64_t ty;
        assert_true(gr_arr_int(types, (uint64_t)id, &ty));
        if (want[id] == 0) {
            char pad[32];
            snprintf(pad, sizeof pad, "[PAD%d]", id);
            assert_true(str_is(&toks->arr[id], pad, strlen(pad)));
            assert_int_equal(ty, 5);
        } else if (ty != want[id]) {
            fail_msg("token %d: type %lld, expected %d", id, (long long)ty, want[id]);
        }
    }
    free(want);
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges");
    const gr_value *m = &kv_of(x, "tokenizer.ggml.merges", GR_ARRAY)->v;
    assert_int_equal(m->arr_n, json_array_size(merges));
    sb s;
    sb_init(&s);
    json_array_foreach(merges, i, v) {
        sb_clear(&s);
        if (json_is_string(v)) sb_puts(&s, json_string_value(v));
        else sb_printf(&s, "%s %s", json_string_value(json_array_get(v, 0)),
                       json_string_value(json_array_get(v, 1)));
        if (!str_is(&m->arr[i], s.buf, s.len)) fail_msg("merge %zu differs from %s", i, s.buf);
    }
    sb_free(&s);
    json_decref(root);
    expect_tokenizer_config(x, tokfile);
}

/* ---- models ---- */

static tr_config tiny_config(tr_arch arch, int vocab)
{
    tr_config c;
    assert_true(tr_preset_config("tiny", arch, &c));
    c.vocab = vocab;
    c.dim = 32;
    c.hidden = 48;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.init_std = 0.2;
    return c;
}

static size_t tokenizer_vocab(const char *path)
{
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = tok_load(path, &d);
    diag_list_free(&d);
    assert_non_null(t);
    size_t n = tok_vocab_size(t);
    tok_free(t);
    return n;
}

/* Writes a rank-4 adapter on every projection with random A and B. */
static void write_adapter(const char *model, const char *dir)
{
    tr_backend *be = tr_backend_cpu_create(1);
    tr_model_opts o = {.mode = TR_MODE_LORA, .lora = {.rank = 4, .alpha = 8, .targets = 0x7f}, .seed = 3};
    tm_write_adapter(be, model, dir, &o, 11, 0.3f);
    be->destroy(be);
}

/* W + alpha/r * B A from the adapter's safetensors (alpha 8, r 4). */
static void merge_lora(float *w, const st_archive *ad, const char *hf_name, size_t out, size_t in)
{
    char base[160], an[200], bn[200];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(hf_name) - strlen(".weight")), hf_name);
    snprintf(an, sizeof an, "base_model.model.%s.lora_A.weight", base);
    snprintf(bn, sizeof bn, "base_model.model.%s.lora_B.weight", base);
    size_t na, nb;
    float *A = st_f32(ad, an, &na), *B = st_f32(ad, bn, &nb);
    size_t r = na / in;
    assert_int_equal(r, 4);
    assert_int_equal(nb, out * r);
    for (size_t o = 0; o < out; o++)
        for (size_t i = 0; i < in; i++) {
            double s = 0;
            for (size_t k = 0; k < r; k++) s += (double)B[o * r + k] * A[k * in + i];
            w[o * in + i] += (float)(2.0 * s);
        }
    free(A);
    free(B);
}

static const char *const hf_proj[TR_NPROJ] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
static const char *const gg_proj[TR_NPROJ] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

/* One layer's tensors against the safetensors (and the adapter). */
static void expect_layer(const fx *x, const tr_config *c, const st_archive *st,
                         const st_archive *ad, int l, uint32_t wtype)
{
    bool llama = c->arch == TR_ARCH_LLAMA || c->arch == TR_ARCH_MISTRAL;
    char hf[160], gg[64];
    size_t n;
    for (int p = 0; p < TR_NPROJ; p++) {
        snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", l, hf_proj[p]);
        snprintf(gg, sizeof gg, "blk.%d.%s.weight", l, gg_proj[p]);
        const st_tensor *s = st_find(st, hf);
        assert_non_null(s);
        size_t out = (size_t)s->shape[0], in = (size_t)s->shape[1];
        float *w = st_f32(st, hf, &n);
        if (ad) merge_lora(w, ad, hf, out, in);
        int heads = !llama ? 0 : p == 0 ? c->n_heads : p == 1 ? c->n_kv_heads : 0;
        if (heads) {
            float *q = permuted(w, heads, out, in);
            free(w);
            w = q;
        }
        expect_near(expect_tensor(x, gg, wtype, 2, in, out), w, n, gg, ad != NULL);
        free(w);
        snprintf(hf, sizeof hf, "model.layers.%d.%s.bias", l, hf_proj[p]);
        snprintf(gg, sizeof gg, "blk.%d.%s.bias", l, gg_proj[p]);
        if (!st_find(st, hf)) {
            assert_null(gr_tensor_find(&x->f, gg));
            continue;
        }
        float *b = st_f32(st, hf, &n);
        float *bp = heads ? permuted(b, heads, out, 1) : NULL;
        expect_data(expect_tensor(x, gg, 0, 1, out, 0), bp ? bp : b, n, gg);
        free(b);
        free(bp);
    }
    static const char *const norms[][2] = {
        {"input_layernorm", "attn_norm"}, {"post_attention_layernorm", "ffn_norm"},
        {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"}};
    for (int i = 0; i < 4; i++) {
        snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", l, norms[i][0]);
        snprintf(gg, sizeof gg, "blk.%d.%s.weight", l, norms[i][1]);
        if (i >= 2 && !c->qk_norm) {
            assert_null(gr_tensor_find(&x->f, gg));
            continue;
        }
        float *v = st_f32(st, hf, &n);
        expect_data(expect_tensor(x, gg, 0, 1, n, 0), v, n, gg);
        free(v);
    }
}

static void expect_model_keys(const fx *x, const tr_config *c, const char *arch, bool f16)
{
    char k[128];
    expect_str(x, "general.architecture", arch);
    expect_u32(x, "general.file_type", f16 ? 1 : 0);
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    expect_u32(x, KEY("vocab_size"), (uint64_t)c->vocab);
    expect_u32(x, KEY("context_length"), (uint64_t)c->max_pos);
    expect_u32(x, KEY("embedding_length"), (uint64_t)c->dim);
    expect_u32(x, KEY("block_count"), (uint64_t)c->n_layers);
    expect_u32(x, KEY("feed_forward_length"), (uint64_t)c->hidden);
    expect_u32(x, KEY("attention.head_count"), (uint64_t)c->n_heads);
    expect_u32(x, KEY("attention.head_count_kv"), (uint64_t)c->n_kv_heads);
    expect_u32(x, KEY("attention.key_length"), (uint64_t)c->head_dim);
    expect_u32(x, KEY("attention.value_length"), (uint64_t)c->head_dim);
    expect_u32(x, KEY("rope.dimension_count"), (uint64_t)c->head_dim);
    expect_f32(x, KEY("attention.layer_norm_rms_epsilon"), c->rms_eps);
    expect_f32(x, KEY("rope.freq_base"), c->rope_theta);
#undef KEY
}

/* Exports a model and checks everything in the file. */
static void check_export(tr_config *c, const char *tokfile, const char *pre, bool f16,
                         bool adapter)
{
    fx x = {0};
    fx_tmpdir(&x);
    char err[512], *model = fx_path(&x, "model"), *ad_dir = fx_path(&x, "adapter");
    assert_true(tr_init_model(model, c, TR_F32, 5, err, sizeof err));
    if (adapter) write_adapter(model, ad_dir);
    ex_gguf_opts o = {.model_dir = model, .adapter_dir = adapter ? ad_dir : NULL,
                      .tokenizer = tokfile, .dtype = f16 ? TR_F16 : TR_F32};
    fx_export(&x, &o);
    const char *arch = ex_gguf_arch_name(c->arch);
    expect_model_keys(&x, c, arch, f16);
    expect_tokenizer(&x, tokfile, c->vocab, pre);
    expect_only_known_keys(&x, arch);
    st_archive st, ad;
    assert_true(st_open(&st, model, err, sizeof err));
    char *adf = path_join(ad_dir, "adapter_model.safetensors");
    if (adapter) assert_true(st_open(&ad, adf, err, sizeof err));
    uint32_t wt = f16 ? 1 : 0;
    size_t n;
    float *emb = st_f32(&st, "model.embed_tokens.weight", &n);
    expect_data(expect_tensor(&x, "token_embd.weight", wt, 2, (uint64_t)c->dim, (uint64_t)c->vocab),
                emb, n, "token_embd.weight");
    free(emb);
    if (c->tie_embeddings) {
        assert_null(gr_tensor_find(&x.f, "output.weight"));
    } else {
        float *head = st_f32(&st, "lm_head.weight", &n);
        expect_data(expect_tensor(&x, "output.weight", wt, 2, (uint64_t)c->dim, (uint64_t)c->vocab),
                    head, n, "output.weight");
        free(head);
    }
    float *fn = st_f32(&st, "model.norm.weight", &n);
    expect_data(expect_tensor(&x, "output_norm.weight", 0, 1, n, 0), fn, n, "output_norm.weight");
    free(fn);
    for (int l = 0; l < c->n_layers; l++) expect_layer(&x, c, &st, adapter ? &ad : NULL, l, wt);
    size_t want = 2 + (c->tie_embeddings ? 0 : 1) + (c->rope_kind == TR_ROPE_LLAMA3 ? 1 : 0) +
                  (size_t)c->n_layers * (9 + (c->qkv_bias ? 3 : 0) + (c->qk_norm ? 2 : 0));
    assert_int_equal(x.f.n_tensors, want);
    if (adapter) st_close(&ad);
    st_close(&st);
    free(adf);
    free(model);
    free(ad_dir);
    fx_free(&x);
}

/* ---- tests ---- */

static void test_permute_hand_computed(void **state)
{
    (void)state;
    /* 2 heads of head_dim 4, 2 columns: rows (0 1 2 3 | 4 5 6 7) become
     * (0 2 1 3 | 4 6 5 7): each head's halves (0 1)(2 3) interleaved. */
    float src[16], dst[16];
    for (int i = 0; i < 16; i++) src[i] = (float)i;
    ex_permute_rope_rows(dst, src, 2, 8, 2);
    const float want[16] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
    for (int i = 0; i < 16; i++) assert_float_equal(dst[i], want[i], 0);
    /* a bias (1 column), one head of head_dim 6: (0 1 2 | 3 4 5) -> 0 3 1 4 2 5 */
    float b[6] = {0, 1, 2, 3, 4, 5}, bd[6];
    ex_permute_rope_rows(bd, b, 1, 6, 1);
    const float bw[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++) assert_float_equal(bd[i], bw[i], 0);
}

static void test_pre_names(void **state)
{
    (void)state;
    assert_string_equal(ex_gguf_pre_for_regex(NULL, true), "gpt-2");
    assert_null(ex_gguf_pre_for_regex(NULL, false));
    assert_null(ex_gguf_pre_for_regex("\\p{L}+", false));
    assert_string_equal(ex_gguf_arch_name(TR_ARCH_MISTRAL), "llama");
    assert_string_equal(ex_gguf_arch_name(TR_ARCH_QWEN3), "qwen3");
}

/* Llama 3 tokenizer, untied, Llama 3 rope scaling, F32, adapter merged. */
static void test_llama_f32_adapter(void **state)
{
    (void)state;
    const char *tok = TOKDIR "llama3/tokenizer.json";
    tr_config c = tiny_config(TR_ARCH_LLAMA, (int)tokenizer_vocab(tok));
    c.tie_embeddings = false;
    c.rope_kind = TR_ROPE_LLAMA3;
    c.rope_factor = 8;
    c.rope_low_freq = 1;
    c.rope_high_freq = 4;
    c.rope_orig_max = 64; /* so that the tiny head_dim spans all three bands */
    check_export(&c, tok, "llama-bpe", false, true);
}

/* The rope factors of Llama 3 scaling, and the special-token keys. */
static void test_llama_rope_freqs_and_special(void **state)
{
    (void)state;
    const char *tok = TOKDIR "llama3/tokenizer.json";
    tr_config c = tiny_config(TR_ARCH_LLAMA, (int)tokenizer_vocab(tok));
    c.n_layers = 1;
    c.rope_kind = TR_ROPE_LLAMA3;
    c.rope_factor = 8;
    c.rope_low_freq = 1;
    c.rope_high_freq = 4;
    c.rope_orig_max = 64;
    fx x = {0};
    fx_tmpdir(&x);
    char err[256], *model = fx_path(&x, "m");
    assert_true(tr_init_model(model, &c, TR_F32, 1, err, sizeof err));
    ex_gguf_opts o = {.model_dir = model, .tokenizer = tok, .dtype = TR_F32, .name = "tiny"};
    fx_export(&x, &o);
    expect_str(&x, "general.name", "tiny");
    expect_u32(&x, "tokenizer.ggml.bos_token_id", 128000);
    expect_u32(&x, "tokenizer.ggml.eos_token_id", 128001);
    expect_bool(&x, "tokenizer.ggml.add_bos_token", false); /* this file's post-processor adds none */
    const gr_tensor *t = expect_tensor(&x, "rope_freqs.weight", 0, 1, 4, 0);
    /* head_dim 8, theta 1e4: wavelengths 2 pi 10^(i) for i = 0..3 -> 6.3,
     * 63, 628, 6283 against the bands 64/4 = 16 and 64/1 = 64 */
    float want[4];
    want[0] = 1;
    double wl1 = 2 * M_PI * 10.0, s = (64.0 / wl1 - 1) / 3;
    want[1] = (float)(1 / ((1 - s) / 8 + s));
    want[2] = want[3] = 8;
    for (int i = 0; i < 4; i++) {
        float got;
        memcpy(&got, t->data + 4 * i, 4);
        assert_float_equal(got, want[i], 1e-6);
    }
    free(model);
    fx_free(&x);
}

/* Qwen3 tokenizer on a Qwen2 model: q/k/v biases, tied, F16, no permutation. */
static void test_qwen2_f16(void **state)
{
    (void)state;
    const char *tok = TOKDIR "qwen3/tokenizer.json";
    tr_config c = tiny_config(TR_ARCH_QWEN2, (int)tokenizer_vocab(tok) + 3); /* padded vocabulary */
    check_export(&c, tok, "qwen2", true, true);
}

/* Qwen3: q/k norms, head_dim apart from dim / heads. */
static void test_qwen3_f32(void **state)
{
    (void)state;
    const char *tok = TOKDIR "qwen3/tokenizer.json";
    tr_config c = tiny_config(TR_ARCH_QWEN3, (int)tokenizer_vocab(tok));
    c.head_dim = 16;
    check_export(&c, tok, "qwen2", false, false);
}

/* The real 260K Llama: its q/k rows in GGUF must be llama2.c's original
 * interleaved layout, which stories260K.bin keeps (the README: the HF copy
 * was permuted from it). It has no tokenizer, so none is written. */
static void test_llama2c_real_model(void **state)
{
    (void)state;
    fx x = {0};
    fx_tmpdir(&x);
    ex_gguf_opts o = {.model_dir = LLAMA2C "hf", .no_tokenizer = true, .dtype = TR_F32};
    fx_export(&x, &o);
    assert_null(gr_find(&x.f, "tokenizer.ggml.tokens"));
    expect_str(&x, "general.architecture", "llama");
    expect_u32(&x, "llama.attention.head_count_kv", 4);
    size_t blen;
    char err[256];
    char *bin = file_read_all(LLAMA2C "stories260K.bin", (size_t)1 << 24, &blen, err, sizeof err);
    assert_non_null(bin);
    int32_t h[7];
    memcpy(h, bin, sizeof h);
    int D = h[0], L = h[2], H = h[3], KV = h[4], V = h[5];
    size_t kvd = (size_t)D / (size_t)H * (size_t)KV;
    const float *p = (const float *)(bin + 28);
    const float *wq = p + (size_t)V * D + (size_t)L * D, *wk = wq + (size_t)L * D * D;
    for (int l = 0; l < L; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        expect_data(expect_tensor(&x, name, 0, 2, (uint64_t)D, (uint64_t)D), wq + (size_t)l * D * D,
                    (size_t)D * D, name);
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", l);
        expect_data(expect_tensor(&x, name, 0, 2, (uint64_t)D, kvd), wk + (size_t)l * kvd * D,
                    kvd * (size_t)D, name);
    }
    free(bin);
    fx_free(&x);
}

/* Every key/value type the writer has, read back by the reader. */
static void test_writer_types(void **state)
{
    (void)state;
    fx x = {0};
    fx_tmpdir(&x);
    gguf_writer *w = gguf_writer_new();
    int32_t ia[3] = {-1, 0, 7};
    const char *sa[2] = {"a", "bc"};
    assert_true(gguf_add_u8(w, "t.u8", 200) && gguf_add_i8(w, "t.i8", -5) &&
                gguf_add_u16(w, "t.u16", 60000) && gguf_add_i16(w, "t.i16", -300) &&
                gguf_add_u32(w, "t.u32", 4000000000u) && gguf_add_i32(w, "t.i32", -70000) &&
                gguf_add_u64(w, "t.u64", 1ull << 40) && gguf_add_i64(w, "t.i64", -(1ll << 40)) &&
                gguf_add_f32(w, "t.f32", 1.5f) && gguf_add_f64(w, "t.f64", 0.1) &&
                gguf_add_bool(w, "t.b", true) && gguf_add_str(w, "t.s", "hé") &&
                gguf_add_arr(w, "t.ai", GGUF_TYPE_INT32, ia, 3) &&
                gguf_add_arr_str(w, "t.as", sa, 2) && gguf_add_u32(w, "general.alignment", 64));
    assert_false(gguf_add_u8(w, "t.u8", 1));            /* duplicate key */
    assert_false(gguf_add_u32(w, "general.alignment", 48)); /* not a power of two */
    float v[3] = {1, 2, 3};
    uint64_t ne1[1] = {3}, ne2[2] = {3, 1};
    assert_true(gguf_add_tensor(w, "a", GGUF_GGML_F32, 1, ne1, v));
    assert_true(gguf_add_tensor(w, "b", GGUF_GGML_F32, 2, ne2, v));
    assert_false(gguf_add_tensor(w, "a", GGUF_GGML_F32, 1, ne1, v)); /* duplicate name */
    char *out = fx_path(&x, "t.gguf"), err[256];
    assert_true(gguf_write(w, out, err, sizeof err));
    gguf_writer_free(w);
    x.buf = file_read_all(out, 1 << 20, &x.len, err, sizeof err);
    assert_true(gr_parse(&x.f, x.buf, x.len, err, sizeof err));
    assert_int_equal(x.f.alignment, 64);
    assert_int_equal(kv_of(&x, "t.u8", GR_UINT8)->v.u, 200);
    assert_int_equal(kv_of(&x, "t.i8", GR_INT8)->v.i, -5);
    assert_int_equal(kv_of(&x, "t.u16", GR_UINT16)->v.u, 60000);
    assert_int_equal(kv_of(&x, "t.i16", GR_INT16)->v.i, -300);
    expect_u32(&x, "t.u32", 4000000000u);
    assert_int_equal(kv_of(&x, "t.i32", GR_INT32)->v.i, -70000);
    assert_int_equal(kv_of(&x, "t.u64", GR_UINT64)->v.u, 1ull << 40);
    assert_int_equal(kv_of(&x, "t.i64", GR_INT64)->v.i, -(1ll << 40));
    expect_f32(&x, "t.f32", 1.5);
    assert_true(kv_of(&x, "t.f64", GR_FLOAT64)->v.f == 0.1);
    expect_bool(&x, "t.b", true);
    expect_str(&x, "t.s", "hé");
    const gr_value *ai = &kv_of(&x, "t.ai", GR_ARRAY)->v;
    int64_t e;
    assert_true(gr_arr_int(ai, 2, &e) && e == 7);
    assert_false(gr_arr_int(ai, 3, &e));
    const gr_value *as = &kv_of(&x, "t.as", GR_ARRAY)->v;
    assert_true(str_is(&as->arr[1], "bc", 2));
    const gr_tensor *b = expect_tensor(&x, "b", 0, 2, 3, 1);
    assert_int_equal(b->offset % 64, 0);
    assert_int_equal(x.f.data_offset % 64, 0);
    expect_data(b, v, 3, "b");
    free(out);
    fx_free(&x);
}

/* A small valid file, then damaged copies: each must be refused. */
static void test_reader_rejects_malformed(void **state)
{
    (void)state;
    fx x = {0};
    fx_tmpdir(&x);
    gguf_writer *w = gguf_writer_new();
    float v[8] = {0};
    uint64_t ne[1] = {8};
    assert_true(gguf_add_str(w, "general.architecture", "llama") &&
                gguf_add_tensor(w, "t0", GGUF_GGML_F32, 1, ne, v) &&
                gguf_add_tensor(w, "t1", GGUF_GGML_F32, 1, ne, v));
    char *out = fx_path(&x, "m.gguf"), err[256];
    assert_true(gguf_write(w, out, err, sizeof err));
    gguf_writer_free(w);
    size_t len;
    uint8_t *buf = (uint8_t *)file_read_all(out, 1 << 20, &len, err, sizeof err);
    gr_file f;
    assert_true(gr_parse(&f, buf, len, err, sizeof err));
    size_t need = (size_t)(f.data_offset + f.tensors[1].offset + f.tensors[1].nbytes);
    gr_free(&f);
    for (size_t n = 0; n < need; n++) /* every truncation */
        assert_false(gr_parse(&f, buf, n, err, sizeof err));
    uint8_t *bad = malloc(len);
    struct { size_t at; uint8_t byte; const char *what; } cases[] = {
        {0, 'X', "magic"}, {4, 2, "version"},
        {8, 0xff, "tensor count"}, {16, 0xff, "kv count"},
        {24, 0xff, "key length"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, buf, len);
        bad[cases[i].at] = cases[i].byte;
        if (gr_parse(&f, bad, len, err, sizeof err)) fail_msg("accepted a bad %s", cases[i].what);
    }
    /* the last tensor info's offset (the 8 bytes before the padding) moved
     * off the alignment, then onto the first tensor (overlap) */
    memcpy(bad, buf, len);
    assert_true(gr_parse(&f, bad, len, err, sizeof err));
    size_t info_end = (size_t)((const uint8_t *)f.tensors[1].name - bad) + 2 + 4 + 8 + 4;
    gr_free(&f);
    uint64_t o = 4;
    memcpy(bad + info_end, &o, 8);
    assert_false(gr_parse(&f, bad, len, err, sizeof err));
    assert_non_null(strstr(err, "aligned"));
    o = 0;
    memcpy(bad + info_end, &o, 8);
    assert_false(gr_parse(&f, bad, len, err, sizeof err));
    assert_non_null(strstr(err, "overlap"));
    free(bad);
    free(buf);
    free(out);
    fx_free(&x);
}

/* GPT-2's bytes_to_unicode: the character byte b is spelled with. */
static uint32_t byte_cp(int b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256u + (uint32_t)n;
}

/* A byte-level tokenizer.json of the 256 byte tokens, no merges, with a
 * Split of `regex` (NULL: ByteLevel's own regex). */
static void write_byte_tokenizer(const char *path, const char *regex)
{
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        uint32_t cp = byte_cp(b);
        char s[3] = {0};
        if (cp < 0x80) s[0] = (char)cp;
        else {
            s[0] = (char)(0xC0 | (cp >> 6));
            s[1] = (char)(0x80 | (cp & 0x3F));
        }
        json_object_set_new(vocab, s, json_integer(b));
    }
    json_t *bl = json_pack("{s:s,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                           "use_regex", regex == NULL);
    json_t *pre = regex ? json_pack("{s:s,s:[{s:s,s:{s:s},s:s},o]}", "type", "Sequence",
                                    "pretokenizers", "type", "Split", "pattern", "Regex", regex,
                                    "behavior", "Isolated", bl)
                        : bl;
    json_t *root = json_pack("{s:[],s:o,s:{s:s},s:{s:s,s:o,s:[]}}", "added_tokens",
                             "pre_tokenizer", pre, "decoder", "type", "ByteLevel", "model", "type",
                             "BPE", "vocab", vocab, "merges");
    assert_int_equal(json_dump_file(root, path, 0), 0);
    json_decref(root);
}

/* A pre-tokenizer regex llama.cpp has no name for: refused unless --pre. */
static void test_unknown_pre(void **state)
{
    (void)state;
    fx x = {0};
    fx_tmpdir(&x);
    tr_config c = tiny_config(TR_ARCH_LLAMA, 256);
    c.n_layers = 1;
    c.bos_id = c.eos_id = -1;
    char err[1024], *model = fx_path(&x, "m"), *tok = fx_path(&x, "tokenizer.json");
    char *out = fx_path(&x, "o.gguf");
    assert_true(tr_init_model(model, &c, TR_F32, 1, err, sizeof err));
    write_byte_tokenizer(tok, "\\p{L}+|\\p{N}+|[^\\s\\p{L}\\p{N}]+|\\s+");
    ex_gguf_opts o = {.model_dir = model, .tokenizer = tok, .dtype = TR_F32};
    assert_false(ex_export_gguf(&o, out, NULL, err, sizeof err));
    assert_non_null(strstr(err, "--pre NAME"));
    assert_non_null(strstr(err, "tokenizer.json: pre_tokenizer"));
    o.pre = "default";
    fx_export(&x, &o);
    expect_str(&x, "tokenizer.ggml.pre", "default");
    gr_free(&x.f);
    free(x.buf);
    x.buf = NULL;
    write_byte_tokenizer(tok, NULL); /* ByteLevel alone: GPT-2's regex */
    o.pre = NULL;
    fx_export(&x, &o);
    expect_tokenizer(&x, tok, 256, "gpt-2");
    free(model);
    free(tok);
    free(out);
    fx_free(&x);
}

/* Errors name the file and the fix. */
static void test_errors(void **state)
{
    (void)state;
    fx x = {0};
    fx_tmpdir(&x);
    tr_config c = tiny_config(TR_ARCH_QWEN3, 1000);
    char err[1024], *model = fx_path(&x, "m"), *out = fx_path(&x, "o.gguf");
    assert_true(tr_init_model(model, &c, TR_F32, 1, err, sizeof err));
    ex_gguf_opts o = {.model_dir = model, .dtype = TR_F32};
    assert_false(ex_export_gguf(&o, out, NULL, err, sizeof err)); /* no tokenizer.json */
    assert_non_null(strstr(err, "--tokenizer"));
    o.tokenizer = TOKDIR "qwen3/tokenizer.json"; /* 151669 tokens for a 1000-row model */
    assert_false(ex_export_gguf(&o, out, NULL, err, sizeof err));
    assert_non_null(strstr(err, "vocab_size"));
    o.tokenizer = TOKDIR "llama3/tokenizer.json"; /* another family's tokenizer */
    tr_config q = tiny_config(TR_ARCH_QWEN2, 151669);
    q.eos_id = 151645;
    char *qdir = fx_path(&x, "q");
    assert_true(tr_init_model(qdir, &q, TR_F32, 1, err, sizeof err));
    o.model_dir = qdir;
    assert_false(ex_export_gguf(&o, out, NULL, err, sizeof err));
    assert_non_null(strstr(err, "eos_token_id 151645"));
    free(qdir);
    o.model_dir = "/nonexistent-model";
    assert_false(ex_export_gguf(&o, out, NULL, err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent-model/config.json: not found"));
    o.model_dir = model;
    o.dtype = TR_BF16;
    assert_false(ex_export_gguf(&o, out, NULL, err, sizeof err));
    assert_non_null(strstr(err, "f16"));
    assert_false(file_exists(out));
    free(model);
    free(out);
    fx_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permute_hand_computed),
        cmocka_unit_test(test_pre_names),
        cmocka_unit_test(test_writer_types),
        cmocka_unit_test(test_reader_rejects_malformed),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_unknown_pre),
        cmocka_unit_test(test_llama2c_real_model),
        cmocka_unit_test(test_llama_rope_freqs_and_special),
        cmocka_unit_test(test_llama_f32_adapter),
        cmocka_unit_test(test_qwen2_f16),
        cmocka_unit_test(test_qwen3_f32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
