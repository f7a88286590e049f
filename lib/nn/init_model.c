/* init_model.c: random-initialised models in the Hugging Face layout
 * (config.json + model.safetensors), so tests, benchmarks and the demo need
 * no download. Weights are normal(0, initializer_range) as transformers'
 * _init_weights draws them (0.02 unless the config says otherwise), norms 1,
 * biases 0; each tensor's values come
 * from (seed, tensor name) so they do not depend on the writing order. The
 * file is written one tensor at a time. */
#include "nn/nn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct preset {
    const char *name;
    int vocab, dim, hidden, layers, heads, kv_heads;
} preset;

/* Sizes with tied embeddings (llama arch): tiny ~0.1M, small ~1.2M,
 * base ~10M, 100m ~101M parameters. */
static const preset presets[] = {
    {"tiny", 512, 64, 176, 2, 4, 2},
    {"small", 2048, 128, 352, 4, 4, 2},
    {"base", 8192, 256, 704, 8, 8, 4},
    {"100m", 32000, 768, 2048, 12, 12, 4},
};
static const char *const preset_list[] = {"tiny", "small", "base", "100m", NULL};

const char *const *tr_preset_names(void)
{
    return preset_list;
}

bool tr_preset_config(const char *name, tr_arch arch, tr_config *c)
{
    static const char *const types[] = {"llama", "mistral", "qwen2", "qwen3"};
    static const char *const archs[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                        "Qwen2ForCausalLM", "Qwen3ForCausalLM"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        if (strcmp(name, p->name)) continue;
        memset(c, 0, sizeof *c);
        c->arch = arch;
        snprintf(c->model_type, sizeof c->model_type, "%s", types[arch]);
        snprintf(c->architecture, sizeof c->architecture, "%s", archs[arch]);
        c->vocab = p->vocab;
        c->dim = p->dim;
        c->hidden = p->hidden;
        c->n_layers = p->layers;
        c->n_heads = p->heads;
        c->n_kv_heads = p->kv_heads;
        c->head_dim = p->dim / p->heads;
        c->max_pos = 2048;
        c->rms_eps = 1e-6;
        c->rope_theta = arch == TR_ARCH_QWEN2 || arch == TR_ARCH_QWEN3 ? 1000000.0 : 10000.0;
        c->tie_embeddings = true;
        c->qkv_bias = arch == TR_ARCH_QWEN2;
        c->qk_norm = arch == TR_ARCH_QWEN3;
        c->bos_id = 1;
        c->eos_id = 2;
        c->dtype = TR_F32;
        c->init_std = 0.02;
        return true;
    }
    return false;
}

typedef struct init_ctx {
    uint64_t seed;
    tr_dtype dtype;
    float std; /* of the random weights */
} init_ctx;

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Fills one tensor: norms 1, biases 0, everything else normal(0, std). */
static void fill_tensor(void *ud, const char *name, void *dst, size_t numel)
{
    const init_ctx *x = ud;
    float *f = xmalloc((numel ? numel : 1) * sizeof(float));
    if (strstr(name, "norm.weight")) {
        for (size_t i = 0; i < numel; i++) f[i] = 1.0f;
    } else if (str_ends_with(name, ".bias")) {
        memset(f, 0, numel * sizeof(float));
    } else {
        tr_rng r;
        tr_rng_seed(&r, tr_hash64(x->seed, name_hash(name)));
        for (size_t i = 0; i < numel; i++) f[i] = x->std * tr_rng_normal(&r);
    }
    tr_from_f32(dst, f, x->dtype, numel);
    free(f);
}

/* st_writer's callback knows only the name; the element count follows from
 * the tensor's byte size, which the writer passes through ud2 below. */
typedef struct fill_ud {
    init_ctx *ctx;
    size_t numel;
} fill_ud;

static void fill_cb(void *ud, const char *name, void *dst)
{
    fill_ud *f = ud;
    fill_tensor(f->ctx, name, dst, f->numel);
}

typedef struct tensor_list {
    st_writer *w;
    init_ctx *ctx;
    fill_ud *uds;
    size_t n;
} tensor_list;

static void add(tensor_list *tl, const char *name, int64_t d0, int64_t d1)
{
    int64_t shape[2] = {d0, d1};
    fill_ud *u = &tl->uds[tl->n++];
    u->ctx = tl->ctx;
    u->numel = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    st_writer_add_lazy(tl->w, name, tl->ctx->dtype, d1 ? 2 : 1, shape, fill_cb, u);
}

static void add_layer(tensor_list *tl, const tr_config *c, int i)
{
    int64_t D = c->dim, F = c->hidden, qd = (int64_t)c->n_heads * c->head_dim;
    int64_t kvd = (int64_t)c->n_kv_heads * c->head_dim;
    const int64_t shapes[TR_NPROJ][2] = {{qd, D}, {kvd, D}, {kvd, D}, {D, qd}, {F, D}, {F, D}, {D, F}};
    char n[160];
    snprintf(n, sizeof n, "model.layers.%d.input_layernorm.weight", i);
    add(tl, n, D, 0);
    snprintf(n, sizeof n, "model.layers.%d.post_attention_layernorm.weight", i);
    add(tl, n, D, 0);
    for (int p = 0; p < TR_NPROJ; p++) {
        const char *blk = tr_proj_block((tr_proj)p), *pn = tr_proj_name((tr_proj)p);
        snprintf(n, sizeof n, "model.layers.%d.%s.%s.weight", i, blk, pn);
        add(tl, n, shapes[p][0], shapes[p][1]);
        bool bias = p <= TR_V ? c->qkv_bias : p == TR_O ? c->o_bias : c->mlp_bias;
        if (!bias) continue;
        snprintf(n, sizeof n, "model.layers.%d.%s.%s.bias", i, blk, pn);
        add(tl, n, shapes[p][0], 0);
    }
    if (c->qk_norm) {
        snprintf(n, sizeof n, "model.layers.%d.self_attn.q_norm.weight", i);
        add(tl, n, c->head_dim, 0);
        snprintf(n, sizeof n, "model.layers.%d.self_attn.k_norm.weight", i);
        add(tl, n, c->head_dim, 0);
    }
}

bool tr_mkdir_p(const char *dir, char *err, size_t errsz)
{
    char *p = xstrdup(dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        mkdir(p, 0755);
        *s = '/';
    }
    bool ok = mkdir(p, 0755) == 0 || errno == EEXIST;
    if (!ok || !dir_exists(p)) {
        snprintf(err, errsz, "cannot create folder %s: %s", dir, strerror(errno));
        ok = false;
    }
    free(p);
    return ok;
}

bool tr_init_model(const char *dir, const tr_config *cfg, tr_dtype dtype, uint64_t seed,
                   char *err, size_t errsz)
{
    if (!tr_mkdir_p(dir, err, errsz)) return false;
    tr_config c = *cfg;
    c.dtype = dtype;
    if (!(c.init_std > 0)) c.init_std = 0.02;
    init_ctx ctx = {seed, dtype, (float)c.init_std};
    st_writer w;
    st_writer_init(&w);
    tensor_list tl = {&w, &ctx, xcalloc((size_t)c.n_layers * 20 + 4, sizeof(fill_ud)), 0};
    add(&tl, "model.embed_tokens.weight", c.vocab, c.dim);
    for (int i = 0; i < c.n_layers; i++) add_layer(&tl, &c, i);
    add(&tl, "model.norm.weight", c.dim, 0);
    if (!c.tie_embeddings) add(&tl, "lm_head.weight", c.vocab, c.dim);
    char *p = path_join(dir, "model.safetensors");
    int rc = st_writer_save(&w, p);
    if (rc) snprintf(err, errsz, "cannot write %s: %s", p, strerror(rc));
    free(p);
    st_writer_free(&w);
    free(tl.uds);
    if (rc) return false;
    char *json = tr_config_to_json(&c);
    p = path_join(dir, "config.json");
    rc = file_write_atomic(p, json, strlen(json));
    if (rc) snprintf(err, errsz, "cannot write %s: %s", p, strerror(rc));
    free(p);
    free(json);
    return rc == 0;
}
