/* model_shape.c: architectures (names, Hugging Face classes, per-architecture
 * defaults), the shape's lifetime and checks, and exact parameter counts.
 *
 * Parameter count (docs/models.md), per decoder layer:
 *   attention  q: h x (heads x hd), k and v: h x (kv x hd), o: (heads x hd) x h
 *              + q/k/v biases (heads + 2 kv) x hd when qkv_bias, + h when o_bias
 *   MLP        gated (SwiGLU / GeGLU): 3 x h x I, + 2I + h when mlp_bias
 *   norms      norms_per_layer x h, + 2 x hd for Qwen3's q/k norms
 * plus the final norm (h), the embedding (V x h) and an untied lm_head (V x h).
 * This reproduces every derived_param_count of tests/ref/data/model_configs.json.
 */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

typedef struct arch_info {
    model_arch arch;
    const char *name;     /* lathe's short name */
    const char *hf_class; /* architectures[0] in config.json */
    const char *model_type; /* model_type in config.json */
    bool tied;            /* default tie_word_embeddings */
    bool qkv_bias;
    int norms;
    bool qk_norm;
} arch_info;

/* Defaults from each architecture's transformers configuration class
 * (LlamaConfig, Qwen2Config, Gemma2Config, ...) and modelling code. */
static const arch_info ARCHS[MODEL_ARCH_COUNT] = {
    {MODEL_ARCH_LLAMA, "llama", "LlamaForCausalLM", "llama", false, false, 2, false},
    {MODEL_ARCH_MISTRAL, "mistral", "MistralForCausalLM", "mistral", false, false, 2, false},
    {MODEL_ARCH_QWEN, "qwen", "QWenLMHeadModel", "qwen", false, true, 2, false},
    {MODEL_ARCH_QWEN2, "qwen2", "Qwen2ForCausalLM", "qwen2", false, true, 2, false},
    {MODEL_ARCH_QWEN3, "qwen3", "Qwen3ForCausalLM", "qwen3", false, false, 2, true},
    {MODEL_ARCH_GEMMA, "gemma", "GemmaForCausalLM", "gemma", true, false, 2, false},
    {MODEL_ARCH_GEMMA2, "gemma2", "Gemma2ForCausalLM", "gemma2", true, false, 4, false},
    {MODEL_ARCH_PHI3, "phi3", "Phi3ForCausalLM", "phi3", false, false, 2, false},
    {MODEL_ARCH_INTERNLM2, "internlm2", "InternLM2ForCausalLM", "internlm2", false, false, 2, false},
    {MODEL_ARCH_GENERIC, "generic", "", "", false, false, 2, false},
};

const char *model_arch_name(model_arch a)
{
    return (unsigned)a < MODEL_ARCH_COUNT ? ARCHS[a].name : "?";
}

const char *model_arch_hf_class(model_arch a)
{
    return (unsigned)a < MODEL_ARCH_COUNT ? ARCHS[a].hf_class : "";
}

bool model_arch_from_hf(const char *name, model_arch *out)
{
    if (!name || !*name) return false;
    for (size_t i = 0; i < MODEL_ARCH_COUNT; i++) {
        if (!ARCHS[i].hf_class[0]) continue;
        if (str_ieq(name, ARCHS[i].hf_class) || str_ieq(name, ARCHS[i].model_type) ||
            str_ieq(name, ARCHS[i].name)) {
            *out = ARCHS[i].arch;
            return true;
        }
    }
    /* Qwen v1 also appears as "QWenForCausalLM" in some copies. */
    if (str_ieq(name, "QWenForCausalLM")) {
        *out = MODEL_ARCH_QWEN;
        return true;
    }
    return false;
}

void model_shape_init(model_shape *m, model_arch arch)
{
    memset(m, 0, sizeof *m);
    if ((unsigned)arch >= MODEL_ARCH_COUNT) arch = MODEL_ARCH_GENERIC;
    m->arch = arch;
    m->tied_embeddings = ARCHS[arch].tied;
    m->qkv_bias = ARCHS[arch].qkv_bias;
    m->norms_per_layer = ARCHS[arch].norms;
    m->qk_norm = ARCHS[arch].qk_norm;
    m->origin = MODEL_FROM_CALLER;
}

void model_shape_free(model_shape *m)
{
    free(m->name);
    free(m->origin_text);
    m->name = m->origin_text = NULL;
}

void model_shape_copy(model_shape *dst, const model_shape *src)
{
    *dst = *src;
    dst->name = src->name ? xstrdup(src->name) : NULL;
    dst->origin_text = src->origin_text ? xstrdup(src->origin_text) : NULL;
}

/* Largest dimension lathe accepts: well above any real model, small enough
 * that every product in the counts fits in 64 bits. */
#define MODEL_DIM_MAX 1048576
#define MODEL_LAYERS_MAX 4096
#define MODEL_VOCAB_MAX 16777216

static void dim_error(diag_list *d, const char *file, const char *field, int64_t v, int64_t max)
{
    diag *x = diag_add(d, DIAG_ERROR, file, 0, 0, field, "dimension out of range");
    diag_set_expected(x, "an integer from 1 to %lld", (long long)max);
    diag_set_found(x, "%lld", (long long)v);
}

bool model_shape_check(const model_shape *m, const char *file, diag_list *d)
{
    size_t before = d->errors;
    struct {
        const char *field;
        int64_t v, max;
    } dims[] = {
        {"hidden_size", m->hidden, MODEL_DIM_MAX},
        {"intermediate_size", m->intermediate, 4 * (int64_t)MODEL_DIM_MAX},
        {"num_hidden_layers", m->layers, MODEL_LAYERS_MAX},
        {"num_attention_heads", m->heads, 65536},
        {"num_key_value_heads", m->kv_heads, 65536},
        {"head_dim", m->head_dim, 65536},
        {"vocab_size", m->vocab, MODEL_VOCAB_MAX},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v < 1 || dims[i].v > dims[i].max)
            dim_error(d, file, dims[i].field, dims[i].v, dims[i].max);
    if (d->errors == before && m->heads % m->kv_heads != 0) {
        diag *x = diag_add(d, DIAG_ERROR, file, 0, 0, "num_key_value_heads",
                           "the query heads must split evenly over the key/value heads");
        diag_set_expected(x, "a divisor of num_attention_heads (%lld)", (long long)m->heads);
        diag_set_found(x, "%lld", (long long)m->kv_heads);
    }
    if (m->norms_per_layer < 0 || m->norms_per_layer > 8) {
        diag *x = diag_add(d, DIAG_ERROR, file, 0, 0, "norms_per_layer", "out of range");
        diag_set_found(x, "%d", m->norms_per_layer);
    }
    return d->errors == before;
}

void model_count_params(const model_shape *m, model_params *out)
{
    memset(out, 0, sizeof *out);
    uint64_t h = (uint64_t)m->hidden, I = (uint64_t)m->intermediate;
    uint64_t q_out = (uint64_t)(m->heads * m->head_dim), kv_out = (uint64_t)(m->kv_heads * m->head_dim);

    uint64_t attn_w = h * q_out + 2 * h * kv_out + q_out * h;
    uint64_t attn_b = (m->qkv_bias ? q_out + 2 * kv_out : 0) + (m->o_bias ? h : 0);
    uint64_t mlp_w = 3 * h * I;
    uint64_t mlp_b = m->mlp_bias ? 2 * I + h : 0;
    uint64_t norm = (uint64_t)m->norms_per_layer * h + (m->qk_norm ? 2 * (uint64_t)m->head_dim : 0);

    out->per_layer_attn = attn_w + attn_b;
    out->per_layer_mlp = mlp_w + mlp_b;
    out->per_layer_norm = norm;
    out->per_layer_linear = attn_w + mlp_w;
    out->per_layer = out->per_layer_attn + out->per_layer_mlp + norm;
    out->layers = (uint64_t)m->layers * out->per_layer;
    out->linear = (uint64_t)m->layers * out->per_layer_linear;
    out->embedding = (uint64_t)m->vocab * h;
    out->lm_head = m->tied_embeddings ? 0 : (uint64_t)m->vocab * h;
    out->final_norm = h;
    out->total = out->layers + out->embedding + out->lm_head + out->final_norm;
}
