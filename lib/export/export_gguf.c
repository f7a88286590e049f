/* export_gguf.c: a lathe model as a llama.cpp GGUF file (export.h).
 *
 * The model is read through lib/nn (config.json, the mapped safetensors,
 * the PEFT adapter), each 2-D weight converted to fp32, the adapter merged
 * (W + scale * B A), q/k rows permuted for llama.cpp's `llama` graph
 * (interleaved rotary pairs; qwen2 / qwen3 use NEOX rope, no permutation),
 * then written as F32 or F16; norms, biases and rope factors stay F32 as
 * llama.cpp's converter keeps them. Tensors are produced one at a time when
 * the file is written. Names, keys and the tokenizer's vocabulary follow
 * llama.cpp's gguf-py constants (docs/export.md lists the mapping). */
#include "export/export.h"

#include "base/base.h"
#include "nn/nn.h"
#include "tok/tok.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GGUF token types (llama_token_type) */
enum { EX_TOK_NORMAL = 1, EX_TOK_CONTROL = 3, EX_TOK_USER_DEFINED = 4, EX_TOK_UNUSED = 5 };

/* What a tensor is made from. */
typedef enum { EX_SRC_WEIGHT, EX_SRC_LINEAR, EX_SRC_F32, EX_SRC_ROPE_FREQS } ex_src_kind;

typedef struct ex_item {
    ex_src_kind kind;
    const tr_weight *w;      /* EX_SRC_WEIGHT: embedding / lm_head [rows, cols] */
    const tr_linear *lin;    /* EX_SRC_LINEAR: weight, adapter merged */
    const float *f32;        /* EX_SRC_F32: a norm or a bias */
    size_t rows, cols;       /* the tensor as [rows, cols] row-major */
    int permute_heads;       /* > 0: permute rows for that many heads */
    gguf_ggml_type type;
} ex_item;

typedef struct ex_ctx {
    tr_model *m;
    tr_backend *be;
    ex_item *items;
    size_t n, cap;
} ex_ctx;

const char *ex_gguf_arch_name(tr_arch a)
{
    switch (a) {
    case TR_ARCH_QWEN2: return "qwen2";
    case TR_ARCH_QWEN3: return "qwen3";
    default: return "llama";
    }
}

void ex_permute_rope_rows(float *dst, const float *src, int n_head, int rows, int cols)
{
    int hd = rows / n_head, half = hd / 2;
    for (int h = 0; h < n_head; h++)
        for (int i = 0; i < half; i++)
            for (int j = 0; j < 2; j++) {
                size_t to = (size_t)h * hd + 2 * i + j, from = (size_t)h * hd + j * half + i;
                memcpy(dst + to * cols, src + from * cols, (size_t)cols * sizeof *dst);
            }
}

/* ---- tensors ---- */

/* The rope factors llama.cpp divides each frequency by (rope_freqs.weight),
 * for Llama 3 scaling: the same wavelength bands as the model's own RoPE. */
static void ex_rope_freqs(const tr_config *c, float *out)
{
    for (int i = 0; i < c->head_dim / 2; i++) {
        double inv = 1.0 / pow(c->rope_theta, (2.0 * i) / c->head_dim);
        double wl = 2.0 * M_PI / inv, old_len = c->rope_orig_max;
        double low_wl = old_len / c->rope_low_freq, high_wl = old_len / c->rope_high_freq;
        double f = 1.0;
        if (wl > low_wl) f = c->rope_factor;
        else if (wl >= high_wl) {
            double s = (old_len / wl - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
            f = 1.0 / ((1.0 - s) / c->rope_factor + s);
        }
        out[i] = (float)f;
    }
}

/* W (+ scale * B A when the layer has an adapter), fp32 [out, in]. */
static void ex_linear_f32(ex_ctx *x, const tr_linear *l, float *dst)
{
    size_t n = (size_t)l->out * l->in;
    tr_to_f32(dst, l->w.data, l->w.dtype, n);
    if (l->lora_a && l->lora_b && l->r > 0)
        x->be->gemm(x->be, false, false, l->out, l->in, l->r, l->scale, l->lora_b, l->r,
                    l->lora_a, l->in, 1.0f, dst, l->in);
}

static void ex_fill(void *ud, size_t index, void *dst)
{
    ex_ctx *x = ud;
    const ex_item *it = &x->items[index];
    size_t n = it->rows * it->cols;
    float *buf = xmalloc(n * sizeof *buf);
    switch (it->kind) {
    case EX_SRC_WEIGHT: tr_to_f32(buf, it->w->data, it->w->dtype, n); break;
    case EX_SRC_LINEAR: ex_linear_f32(x, it->lin, buf); break;
    case EX_SRC_F32: memcpy(buf, it->f32, n * sizeof *buf); break;
    case EX_SRC_ROPE_FREQS: ex_rope_freqs(&x->m->cfg, buf); break;
    }
    if (it->permute_heads > 0) {
        float *p = xmalloc(n * sizeof *p);
        bool vec = it->rows == 1; /* a bias: one value per row of the weight */
        ex_permute_rope_rows(p, buf, it->permute_heads, (int)(vec ? it->cols : it->rows),
                             vec ? 1 : (int)it->cols);
        free(buf);
        buf = p;
    }
    tr_from_f32(dst, buf, it->type == GGUF_GGML_F16 ? TR_F16 : TR_F32, n);
    free(buf);
}

/* Registers one tensor; 2-D ones take the chosen dtype, 1-D ones stay F32. */
static bool ex_add(ex_ctx *x, gguf_writer *w, const char *name, ex_item it, tr_dtype dtype)
{
    it.type = it.rows > 1 && dtype == TR_F16 ? GGUF_GGML_F16 : GGUF_GGML_F32;
    uint64_t ne[2] = {it.cols, it.rows}; /* ggml order: innermost first */
    int ndim = it.rows > 1 ? 2 : 1;
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 64;
        x->items = xrealloc(x->items, x->cap * sizeof *x->items);
    }
    x->items[x->n++] = it;
    return gguf_add_tensor_lazy(w, name, it.type, ndim, ne, ex_fill, x);
}

static ex_item ex_vec(const float *v, size_t n)
{
    return (ex_item){.kind = EX_SRC_F32, .f32 = v, .rows = 1, .cols = n};
}

/* The llama.cpp name of each projection ("attn_q", ..., "ffn_down"). */
static const char *const ex_proj_names[TR_NPROJ] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

static bool ex_add_layer(ex_ctx *x, gguf_writer *w, int l, tr_dtype dtype)
{
    const tr_config *c = &x->m->cfg;
    tr_layer *L = &x->m->layers[l];
    bool permute = strcmp(ex_gguf_arch_name(c->arch), "llama") == 0;
    char name[64];
    bool ok = true;
    snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
    ok = ok && ex_add(x, w, name, ex_vec(L->ln1, (size_t)c->dim), dtype);
    for (int p = 0; p < TR_NPROJ && ok; p++) {
        const tr_linear *lin = &L->proj[p];
        int heads = !permute ? 0 : p == TR_Q ? c->n_heads : p == TR_K ? c->n_kv_heads : 0;
        ex_item it = {.kind = EX_SRC_LINEAR, .lin = lin, .rows = (size_t)lin->out,
                      .cols = (size_t)lin->in, .permute_heads = heads};
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, ex_proj_names[p]);
        ok = ex_add(x, w, name, it, dtype);
        if (ok && lin->bias) {
            ex_item b = ex_vec(lin->bias, (size_t)lin->out);
            b.permute_heads = heads;
            snprintf(name, sizeof name, "blk.%d.%s.bias", l, ex_proj_names[p]);
            ok = ex_add(x, w, name, b, dtype);
        }
    }
    if (ok && L->q_norm) {
        snprintf(name, sizeof name, "blk.%d.attn_q_norm.weight", l);
        ok = ex_add(x, w, name, ex_vec(L->q_norm, (size_t)c->head_dim), dtype);
        snprintf(name, sizeof name, "blk.%d.attn_k_norm.weight", l);
        ok = ok && ex_add(x, w, name, ex_vec(L->k_norm, (size_t)c->head_dim), dtype);
    }
    snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
    return ok && ex_add(x, w, name, ex_vec(L->ln2, (size_t)c->dim), dtype);
}

static bool ex_add_tensors(ex_ctx *x, gguf_writer *w, tr_dtype dtype)
{
    const tr_config *c = &x->m->cfg;
    ex_item emb = {.kind = EX_SRC_WEIGHT, .w = &x->m->embed, .rows = (size_t)c->vocab,
                   .cols = (size_t)c->dim};
    bool ok = ex_add(x, w, "token_embd.weight", emb, dtype);
    if (ok && c->rope_kind == TR_ROPE_LLAMA3) {
        ex_item rf = {.kind = EX_SRC_ROPE_FREQS, .rows = 1, .cols = (size_t)c->head_dim / 2};
        ok = ex_add(x, w, "rope_freqs.weight", rf, dtype);
    }
    for (int l = 0; l < c->n_layers && ok; l++) ok = ex_add_layer(x, w, l, dtype);
    ok = ok && ex_add(x, w, "output_norm.weight", ex_vec(x->m->final_norm, (size_t)c->dim), dtype);
    if (ok && !c->tie_embeddings) {
        ex_item head = emb;
        head.w = &x->m->lm_head;
        ok = ex_add(x, w, "output.weight", head, dtype);
    }
    return ok;
}

/* ---- metadata ---- */

static bool ex_add_model_kvs(gguf_writer *w, const tr_config *c, const char *name, tr_dtype dtype)
{
    const char *a = ex_gguf_arch_name(c->arch);
    char k[96];
    bool ok = gguf_add_str(w, "general.architecture", a) && gguf_add_str(w, "general.name", name) &&
              gguf_add_u32(w, "general.file_type",
                           dtype == TR_F16 ? GGUF_FILE_MOSTLY_F16 : GGUF_FILE_ALL_F32);
#define EX_U32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, a), gguf_add_u32(w, k, (uint32_t)(v)))
#define EX_F32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, a), gguf_add_f32(w, k, (float)(v)))
    ok = ok && EX_U32("vocab_size", c->vocab) && EX_U32("context_length", c->max_pos) &&
         EX_U32("embedding_length", c->dim) && EX_U32("block_count", c->n_layers) &&
         EX_U32("feed_forward_length", c->hidden) && EX_U32("attention.head_count", c->n_heads) &&
         EX_U32("attention.head_count_kv", c->n_kv_heads) &&
         EX_U32("attention.key_length", c->head_dim) &&
         EX_U32("attention.value_length", c->head_dim) &&
         EX_U32("rope.dimension_count", c->head_dim) &&
         EX_F32("attention.layer_norm_rms_epsilon", c->rms_eps) &&
         EX_F32("rope.freq_base", c->rope_theta);
    if (ok && c->rope_kind == TR_ROPE_LINEAR) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", a);
        ok = gguf_add_str(w, k, "linear") && EX_F32("rope.scaling.factor", c->rope_factor);
    }
#undef EX_U32
#undef EX_F32
    return ok;
}

/* Configurations llama.cpp's graphs cannot run, refused with the reason. */
static bool ex_check_config(const tr_config *c, const char *dir, char *err, size_t errsz)
{
    bool qwen = c->arch == TR_ARCH_QWEN2 || c->arch == TR_ARCH_QWEN3;
    const char *why = NULL;
    if (qwen && (c->o_bias || c->mlp_bias))
        why = "o_proj / MLP biases: llama.cpp's qwen graphs have none";
    else if (qwen && c->rope_kind == TR_ROPE_LLAMA3)
        why = "rope_scaling llama3 on a Qwen model: llama.cpp applies rope_freqs only to llama";
    else if (c->head_dim % 2 != 0)
        why = "an odd head_dim: RoPE needs pairs";
    if (!why) return true;
    snprintf(err, errsz, "%s/config.json: %s; export a model without them", dir, why);
    return false;
}

/* ---- tokenizer ---- */

static const struct {
    const char *pre;
    const char *regex;
} ex_known_pre[] = {
    {"llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
              "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"gpt-2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
};

const char *ex_gguf_pre_for_regex(const char *split_regex, bool bytelevel_regex)
{
    if (!split_regex) return bytelevel_regex ? "gpt-2" : NULL;
    if (bytelevel_regex) return NULL; /* two regex passes: no llama.cpp pre-tokenizer does that */
    for (size_t i = 0; i < sizeof ex_known_pre / sizeof ex_known_pre[0]; i++)
        if (strcmp(split_regex, ex_known_pre[i].regex) == 0) return ex_known_pre[i].pre;
    return NULL;
}

/* Finds the Split regex and ByteLevel's use_regex in a pre_tokenizer. */
static void ex_scan_pretok(json_t *p, const char **split, bool *bl_regex, int *n_split)
{
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "pretokenizers");
        for (size_t i = 0; i < json_array_size(list); i++)
            ex_scan_pretok(json_array_get(list, i), split, bl_regex, n_split);
    } else if (strcmp(type, "Split") == 0) {
        (*n_split)++;
        *split = json_string_value(json_object_get(json_object_get(p, "pattern"), "Regex"));
    } else if (strcmp(type, "ByteLevel") == 0) {
        json_t *u = json_object_get(p, "use_regex");
        *bl_regex = !u || json_is_true(u);
    }
}

/* tokenizer.ggml.pre from tokenizer.json's pre_tokenizer. */
static bool ex_detect_pre(const char *file, char *out, size_t outsz, char *err, size_t errsz)
{
    size_t len;
    char *text = file_read_all(file, (size_t)1 << 30, &len, err, errsz);
    if (!text) return false;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    free(text);
    const char *split = NULL;
    bool bl_regex = false;
    int n_split = 0;
    ex_scan_pretok(json_object_get(root, "pre_tokenizer"), &split, &bl_regex, &n_split);
    bool one = n_split == 0 || (n_split == 1 && split); /* a String split has no regex */
    const char *pre = one ? ex_gguf_pre_for_regex(split, bl_regex) : NULL;
    if (pre) snprintf(out, outsz, "%s", pre);
    else
        snprintf(err, errsz,
                 "%s: pre_tokenizer: its regex (%.80s) is not one whose llama.cpp name lathe "
                 "knows (llama-bpe, qwen2, gpt-2); give --pre NAME with llama.cpp's name for it",
                 file, split ? split : "none");
    json_decref(root);
    return pre != NULL;
}

static bool ex_add_tokens(gguf_writer *w, const tok_tokenizer *t, int vocab, size_t *n_tokens)
{
    char **tokens = xcalloc((size_t)vocab, sizeof *tokens);
    int32_t *types = xmalloc((size_t)vocab * sizeof *types);
    for (int id = 0; id < vocab; id++) {
        const char *s = tok_token_str(t, id);
        tokens[id] = s ? xstrdup(s) : xasprintf("[PAD%d]", id);
        types[id] = !s ? EX_TOK_UNUSED
                    : tok_is_special(t, id) ? EX_TOK_CONTROL
                    : tok_is_added(t, id) ? EX_TOK_USER_DEFINED
                                          : EX_TOK_NORMAL;
    }
    bool ok = gguf_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens,
                               (size_t)vocab) &&
              gguf_add_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (size_t)vocab);
    for (int id = 0; id < vocab; id++) free(tokens[id]);
    free(tokens);
    free(types);
    *n_tokens = (size_t)vocab;
    return ok;
}

static bool ex_add_merges(gguf_writer *w, const tok_tokenizer *t, size_t *n_merges)
{
    size_t n = tok_merges(t, NULL, NULL, 0);
    int32_t *l = xmalloc((n + 1) * sizeof *l), *r = xmalloc((n + 1) * sizeof *r);
    tok_merges(t, l, r, n);
    char **m = xmalloc((n + 1) * sizeof *m);
    for (size_t i = 0; i < n; i++)
        m[i] = xasprintf("%s %s", tok_token_str(t, l[i]), tok_token_str(t, r[i]));
    bool ok = gguf_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)m, n);
    for (size_t i = 0; i < n; i++) free(m[i]);
    free(m);
    free(l);
    free(r);
    *n_merges = n;
    return ok;
}

/* Whether the post-processor puts bos in front of a sequence (add_bos_token). */
static bool ex_adds_bos(tok_tokenizer *t, int32_t bos)
{
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    bool adds = bos >= 0 && tok_encode(t, "", 0, TOK_ADD_SPECIAL, &ids, err, sizeof err) &&
                ids.len > 0 && ids.ids[0] == bos;
    tok_ids_free(&ids);
    return adds;
}

static bool ex_add_special(gguf_writer *w, tok_tokenizer *t, const tr_config *c)
{
    int32_t bos = tok_bos_id(t) >= 0 ? tok_bos_id(t) : c->bos_id;
    int32_t eos = tok_eos_id(t) >= 0 ? tok_eos_id(t) : c->eos_id;
    int32_t pad = tok_pad_id(t);
    bool ok = true;
    if (bos >= 0) ok = gguf_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (ok && eos >= 0) ok = gguf_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (ok && pad >= 0) ok = gguf_add_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)pad);
    ok = ok && gguf_add_bool(w, "tokenizer.ggml.add_bos_token", ex_adds_bos(t, bos)) &&
         gguf_add_bool(w, "tokenizer.ggml.add_eos_token", false);
    if (ok && tok_chat_template(t))
        ok = gguf_add_str(w, "tokenizer.chat_template", tok_chat_template(t));
    return ok;
}

/* config.json's bos / eos must be tokens of the tokenizer: a tokenizer of
 * another family (smaller than the model's vocabulary, so it passes the
 * size check) is caught here. */
static bool ex_check_special_ids(const tok_tokenizer *t, const tr_config *c, char *err,
                                 size_t errsz)
{
    const int32_t ids[2] = {c->bos_id, c->eos_id};
    const char *const names[2] = {"bos_token_id", "eos_token_id"};
    for (int i = 0; i < 2; i++)
        if (ids[i] >= 0 && !tok_token_str(t, ids[i])) {
            snprintf(err, errsz, "%s: config.json's %s %d is not a token of this tokenizer; "
                     "give the tokenizer the model was trained with (--tokenizer PATH)",
                     tok_source(t), names[i], (int)ids[i]);
            return false;
        }
    return true;
}

static bool ex_add_tokenizer(gguf_writer *w, const ex_gguf_opts *o, const tr_config *c,
                             ex_gguf_summary *s, char *err, size_t errsz)
{
    char *path = o->tokenizer ? xstrdup(o->tokenizer) : path_join(o->model_dir, "tokenizer.json");
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = tok_load(path, &d);
    if (!t) {
        sb msg;
        sb_init(&msg);
        if (d.len > 0) diag_format(&d.items[0], &msg);
        size_t ml = msg.len;
        while (ml > 0 && (msg.buf[ml - 1] == '\n' || msg.buf[ml - 1] == ' ')) ml--;
        snprintf(err, errsz, "%.*s; give the model's tokenizer with --tokenizer PATH%s", (int)ml, sb_str(&msg),
                 o->tokenizer ? "" : " (or --no-tokenizer)");
        sb_free(&msg);
    }
    diag_list_free(&d);
    free(path);
    if (!t) return false;
    bool ok = true;
    if (tok_vocab_size(t) > (size_t)c->vocab) {
        snprintf(err, errsz, "%s: the tokenizer has %zu tokens but config.json's vocab_size is %d; "
                 "give the tokenizer the model was trained with", tok_source(t), tok_vocab_size(t),
                 c->vocab);
        ok = false;
    }
    ok = ok && ex_check_special_ids(t, c, err, errsz);
    if (ok && o->pre) snprintf(s->pre, sizeof s->pre, "%s", o->pre);
    else if (ok) ok = ex_detect_pre(tok_source(t), s->pre, sizeof s->pre, err, errsz);
    ok = ok && gguf_add_str(w, "tokenizer.ggml.model", "gpt2") &&
         gguf_add_str(w, "tokenizer.ggml.pre", s->pre) &&
         ex_add_tokens(w, t, c->vocab, &s->n_tokens) && ex_add_merges(w, t, &s->n_merges) &&
         ex_add_special(w, t, c);
    if (!ok && !*err) snprintf(err, errsz, "%s: cannot add the tokenizer's keys", tok_source(t));
    tok_free(t);
    return ok;
}

/* ---- the export ---- */

static char *ex_default_name(const char *dir)
{
    char *d = xstrdup(dir);
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/') d[--n] = 0;
    const char *slash = strrchr(d, '/');
    char *name = xstrdup(slash ? slash + 1 : d);
    free(d);
    return name;
}

static bool ex_build_and_write(tr_model *m, tr_backend *be, const ex_gguf_opts *o,
                               const char *out_path, ex_gguf_summary *s, char *err, size_t errsz)
{
    gguf_writer *w = gguf_writer_new();
    ex_ctx x = {.m = m, .be = be};
    char *name = o->name ? xstrdup(o->name) : ex_default_name(o->model_dir);
    bool ok = ex_add_model_kvs(w, &m->cfg, name, o->dtype);
    if (ok && !o->no_tokenizer) ok = ex_add_tokenizer(w, o, &m->cfg, s, err, errsz);
    else if (!ok) snprintf(err, errsz, "%s: cannot add the model's keys", o->model_dir);
    if (ok && !ex_add_tensors(&x, w, o->dtype)) {
        snprintf(err, errsz, "%s: a tensor could not be added (a name over 63 bytes?)", o->model_dir);
        ok = false;
    }
    s->n_tensors = x.n;
    if (ok && !gguf_write(w, out_path, err, errsz)) {
        ok = false;
        s->write_failed = true;
    }
    free(name);
    free(x.items);
    gguf_writer_free(w);
    return ok;
}

bool ex_export_gguf(const ex_gguf_opts *o, const char *out_path, ex_gguf_summary *summary,
                    char *err, size_t errsz)
{
    ex_gguf_summary local;
    ex_gguf_summary *s = summary ? summary : &local;
    memset(s, 0, sizeof *s);
    *err = 0;
    if (o->dtype != TR_F32 && o->dtype != TR_F16) {
        snprintf(err, errsz, "--dtype %s: GGUF export writes f32 or f16", tr_dtype_name(o->dtype));
        return false;
    }
    char *cfg = path_join(o->model_dir, "config.json");
    bool have_cfg = file_exists(cfg);
    free(cfg);
    if (!have_cfg) {
        snprintf(err, errsz, "%s/config.json: not found; give --model a Hugging Face model folder "
                 "(config.json + model.safetensors)", o->model_dir);
        return false;
    }
    tr_backend *be = tr_backend_cpu_create(1);
    tr_model m;
    tr_model_opts mo = {.mode = TR_MODE_LORA};
    if (!tr_model_load(&m, o->model_dir, &mo, be, err, errsz)) {
        be->destroy(be);
        return false;
    }
    bool ok = ex_check_config(&m.cfg, o->model_dir, err, errsz);
    if (ok && o->adapter_dir) ok = tr_model_load_adapter(&m, o->adapter_dir, err, errsz);
    s->merged_adapter = ok && o->adapter_dir;
    snprintf(s->arch, sizeof s->arch, "%s", ex_gguf_arch_name(m.cfg.arch));
    ok = ok && ex_build_and_write(&m, be, o, out_path, s, err, errsz);
    tr_model_free(&m);
    be->destroy(be);
    return ok;
}
