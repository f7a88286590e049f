/* config.c: Hugging Face config.json of the Llama family (LlamaConfig,
 * MistralConfig, Qwen2Config, Qwen3Config in transformers), read into a
 * tr_config and written back. Defaults are those of the transformers config
 * classes; fields lathe does not use are ignored, fields it cannot honour
 * (another activation, another rope scaling) are errors naming the field. */
#include "hf/hf.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cfg_ctx {
    const json_t *root;
    const char *file;
    char *err;
    size_t errsz;
    bool ok;
} cfg_ctx;

static void cfg_fail(cfg_ctx *x, const char *field, const char *fmt, const char *found)
{
    if (!x->ok) return;
    x->ok = false;
    snprintf(x->err, x->errsz, "%s: field %s: expected %s%s%s", x->file, field, fmt,
             found ? ", found " : "", found ? found : "");
}

/* An integer field; def when absent (or fails when def < 0: required). */
static int cfg_int(cfg_ctx *x, const char *field, int def, int min)
{
    const json_t *v = json_object_get(x->root, field);
    if (!v || json_is_null(v)) {
        if (def < 0) cfg_fail(x, field, "an integer (it is required)", "nothing");
        return def;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > (1 << 30)) {
        char buf[64];
        if (json_is_integer(v)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        else snprintf(buf, sizeof buf, "a %s", json_is_string(v) ? "string" : "non-integer");
        char want[64];
        snprintf(want, sizeof want, "an integer >= %d", min);
        cfg_fail(x, field, want, buf);
        return def < 0 ? min : def;
    }
    return (int)json_integer_value(v);
}

static double cfg_num(cfg_ctx *x, const json_t *obj, const char *field, double def)
{
    const json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) return def;
    if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v))) {
        cfg_fail(x, field, "a positive number", json_is_string(v) ? "a string" : "another value");
        return def;
    }
    return json_number_value(v);
}

static bool cfg_bool(cfg_ctx *x, const char *field, bool def)
{
    const json_t *v = json_object_get(x->root, field);
    if (!v || json_is_null(v)) return def;
    if (!json_is_boolean(v)) {
        cfg_fail(x, field, "true or false", "another value");
        return def;
    }
    return json_is_true(v);
}

/* bos/eos ids may be an integer or a list (Llama 3.1): the first is kept. */
static int cfg_token_id(cfg_ctx *x, const char *field)
{
    const json_t *v = json_object_get(x->root, field);
    if (json_is_array(v)) v = json_array_get(v, 0);
    if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < (1 << 30))
        return (int)json_integer_value(v);
    return -1;
}

static void cfg_arch(cfg_ctx *x, tr_config *c)
{
    static const struct {
        const char *type, *archname;
        tr_arch arch;
    } known[] = {{"llama", "LlamaForCausalLM", TR_ARCH_LLAMA},
                 {"mistral", "MistralForCausalLM", TR_ARCH_MISTRAL},
                 {"qwen2", "Qwen2ForCausalLM", TR_ARCH_QWEN2},
                 {"qwen3", "Qwen3ForCausalLM", TR_ARCH_QWEN3}};
    const char *mt = json_string_value(json_object_get(x->root, "model_type"));
    for (size_t i = 0; mt && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(mt, known[i].type) == 0) {
            c->arch = known[i].arch;
            snprintf(c->model_type, sizeof c->model_type, "%s", known[i].type);
            snprintf(c->architecture, sizeof c->architecture, "%s", known[i].archname);
            return;
        }
    cfg_fail(x, "model_type", "one of llama, mistral, qwen2, qwen3 (the Llama family lathe "
             "trains)", mt ? mt : "nothing");
}

static void cfg_rope_scaling(cfg_ctx *x, tr_config *c)
{
    const json_t *rs = json_object_get(x->root, "rope_scaling");
    c->rope_kind = TR_ROPE_NONE;
    if (!rs || json_is_null(rs)) return;
    if (!json_is_object(rs)) {
        cfg_fail(x, "rope_scaling", "null or an object", "another value");
        return;
    }
    const char *type = json_string_value(json_object_get(rs, "rope_type"));
    if (!type) type = json_string_value(json_object_get(rs, "type"));
    if (type && strcmp(type, "default") == 0) return;
    c->rope_factor = cfg_num(x, rs, "factor", 1.0);
    if (type && strcmp(type, "linear") == 0) {
        c->rope_kind = TR_ROPE_LINEAR;
    } else if (type && strcmp(type, "llama3") == 0) {
        c->rope_kind = TR_ROPE_LLAMA3;
        c->rope_low_freq = cfg_num(x, rs, "low_freq_factor", 1.0);
        c->rope_high_freq = cfg_num(x, rs, "high_freq_factor", 4.0);
        double orig = cfg_num(x, rs, "original_max_position_embeddings", 8192);
        if (orig > (1 << 30) || orig != floor(orig)) { /* found by fuzz_hfconfig: cast to int */
            cfg_fail(x, "rope_scaling.original_max_position_embeddings",
                     "a whole number of positions up to 1073741824", "another value");
            orig = 8192;
        }
        c->rope_orig_max = (int)orig;
        if (c->rope_high_freq <= c->rope_low_freq)
            cfg_fail(x, "rope_scaling.high_freq_factor", "a value above low_freq_factor", NULL);
    } else {
        cfg_fail(x, "rope_scaling.rope_type", "\"llama3\", \"linear\" or \"default\" (yarn, "
                 "dynamic and longrope are not supported)", type ? type : "nothing");
    }
}

static void cfg_dtype(cfg_ctx *x, tr_config *c)
{
    const char *d = json_string_value(json_object_get(x->root, "torch_dtype"));
    if (!d) d = json_string_value(json_object_get(x->root, "dtype"));
    c->dtype = TR_F32;
    if (!d || strcmp(d, "float32") == 0) return;
    if (strcmp(d, "bfloat16") == 0) c->dtype = TR_BF16;
    else if (strcmp(d, "float16") == 0) c->dtype = TR_F16;
    else cfg_fail(x, "torch_dtype", "float32, bfloat16 or float16", d);
}

/* Architecture-specific switches and defaults of transformers. */
static void cfg_family(cfg_ctx *x, tr_config *c)
{
    bool attn_bias = cfg_bool(x, "attention_bias", false);
    c->qkv_bias = attn_bias;
    c->o_bias = attn_bias;
    c->mlp_bias = cfg_bool(x, "mlp_bias", false);
    c->qk_norm = false;
    c->sliding_window = 0;
    if (c->arch == TR_ARCH_QWEN2) { /* Qwen2Attention: bias on q/k/v, none on o */
        c->qkv_bias = true;
        c->o_bias = false;
    } else if (c->arch == TR_ARCH_QWEN3) {
        c->qk_norm = true;
    }
    bool sw_used = c->arch == TR_ARCH_MISTRAL || cfg_bool(x, "use_sliding_window", false);
    const json_t *sw = json_object_get(x->root, "sliding_window");
    if (sw_used && json_is_integer(sw) && json_integer_value(sw) > 0)
        c->sliding_window = (int)(json_integer_value(sw) < (1 << 30) ? json_integer_value(sw) : 0);
    const char *act = json_string_value(json_object_get(x->root, "hidden_act"));
    if (act && strcmp(act, "silu") && strcmp(act, "swish"))
        cfg_fail(x, "hidden_act", "\"silu\" (SwiGLU)", act);
}

bool tr_config_parse(tr_config *c, const char *json, size_t len, const char *file,
                     char *err, size_t errsz)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root || !json_is_object(root)) {
        snprintf(err, errsz, "%s:%d:%d: %s", file, root ? 1 : je.line, root ? 1 : je.column,
                 root ? "expected a JSON object" : je.text);
        json_decref(root);
        return false;
    }
    cfg_ctx x = {root, file, err, errsz, true};
    cfg_arch(&x, c);
    c->vocab = cfg_int(&x, "vocab_size", -1, 1);
    c->dim = cfg_int(&x, "hidden_size", -1, 1);
    c->hidden = cfg_int(&x, "intermediate_size", -1, 1);
    c->n_layers = cfg_int(&x, "num_hidden_layers", -1, 1);
    c->n_heads = cfg_int(&x, "num_attention_heads", -1, 1);
    c->n_kv_heads = cfg_int(&x, "num_key_value_heads", c->n_heads, 1);
    int hd_def = c->n_heads > 0 && c->dim % c->n_heads == 0 ? c->dim / c->n_heads : -1;
    c->head_dim = cfg_int(&x, "head_dim", hd_def, 2);
    c->max_pos = cfg_int(&x, "max_position_embeddings", 2048, 1);
    c->rms_eps = cfg_num(&x, root, "rms_norm_eps", 1e-6);
    c->init_std = cfg_num(&x, root, "initializer_range", 0.02);
    c->rope_theta = cfg_num(&x, root, "rope_theta", 10000.0);
    c->tie_embeddings = cfg_bool(&x, "tie_word_embeddings", false);
    c->bos_id = cfg_token_id(&x, "bos_token_id");
    c->eos_id = cfg_token_id(&x, "eos_token_id");
    cfg_rope_scaling(&x, c);
    cfg_dtype(&x, c);
    if (x.ok) cfg_family(&x, c);
    if (x.ok && c->n_heads % c->n_kv_heads != 0)
        cfg_fail(&x, "num_key_value_heads", "a divisor of num_attention_heads", NULL);
    if (x.ok && c->head_dim % 2 != 0) cfg_fail(&x, "head_dim", "an even number (RoPE)", NULL);
    json_decref(root);
    return x.ok;
}

bool tr_config_load(tr_config *c, const char *path, char *err, size_t errsz)
{
    char *p = dir_exists(path) ? path_join(path, "config.json") : xstrdup(path);
    if (dir_exists(path) && !file_exists(p)) {
        snprintf(err, errsz, "%s: no config.json: not a Hugging Face model folder (lathe "
                 "init-model writes one for tests)", path);
        free(p);
        return false;
    }
    size_t len;
    char *text = file_read_all(p, 4u << 20, &len, err, errsz);
    bool ok = text && tr_config_parse(c, text, len, p, err, errsz);
    free(text);
    free(p);
    return ok;
}

static const char *dtype_torch_name(tr_dtype t)
{
    return t == TR_BF16 ? "bfloat16" : t == TR_F16 ? "float16" : "float32";
}

char *tr_config_to_json(const tr_config *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "architectures", json_pack("[s]", c->architecture));
    json_object_set_new(o, "model_type", json_string(c->model_type));
    json_object_set_new(o, "vocab_size", json_integer(c->vocab));
    json_object_set_new(o, "hidden_size", json_integer(c->dim));
    json_object_set_new(o, "intermediate_size", json_integer(c->hidden));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->n_layers));
    json_object_set_new(o, "num_attention_heads", json_integer(c->n_heads));
    json_object_set_new(o, "num_key_value_heads", json_integer(c->n_kv_heads));
    json_object_set_new(o, "head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "max_position_embeddings", json_integer(c->max_pos));
    json_object_set_new(o, "rms_norm_eps", json_real(c->rms_eps));
    json_object_set_new(o, "initializer_range", json_real(c->init_std > 0 ? c->init_std : 0.02));
    json_object_set_new(o, "rope_theta", json_real(c->rope_theta));
    if (c->rope_kind == TR_ROPE_NONE) {
        json_object_set_new(o, "rope_scaling", json_null());
    } else if (c->rope_kind == TR_ROPE_LINEAR) {
        json_object_set_new(o, "rope_scaling", json_pack("{s:s,s:f}", "rope_type", "linear",
                                                         "factor", c->rope_factor));
    } else {
        json_object_set_new(o, "rope_scaling",
                            json_pack("{s:s,s:f,s:f,s:f,s:i}", "rope_type", "llama3", "factor",
                                      c->rope_factor, "low_freq_factor", c->rope_low_freq,
                                      "high_freq_factor", c->rope_high_freq,
                                      "original_max_position_embeddings", c->rope_orig_max));
    }
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_embeddings));
    if (c->arch == TR_ARCH_LLAMA || c->arch == TR_ARCH_QWEN3)
        json_object_set_new(o, "attention_bias", json_boolean(c->qkv_bias));
    if (c->arch == TR_ARCH_LLAMA) json_object_set_new(o, "mlp_bias", json_boolean(c->mlp_bias));
    if (c->arch == TR_ARCH_MISTRAL)
        json_object_set_new(o, "sliding_window",
                            c->sliding_window ? json_integer(c->sliding_window) : json_null());
    if (c->arch == TR_ARCH_QWEN2 || c->arch == TR_ARCH_QWEN3)
        json_object_set_new(o, "use_sliding_window", json_false());
    if (c->bos_id >= 0) json_object_set_new(o, "bos_token_id", json_integer(c->bos_id));
    if (c->eos_id >= 0) json_object_set_new(o, "eos_token_id", json_integer(c->eos_id));
    json_object_set_new(o, "torch_dtype", json_string(dtype_torch_name(c->dtype)));
    json_object_set_new(o, "initializer_range", json_real(0.02));
    json_object_set_new(o, "use_cache", json_true());
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

int64_t tr_config_param_count(const tr_config *c)
{
    int64_t D = c->dim, F = c->hidden, V = c->vocab;
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t layer = 2 * D + D * q + 2 * D * kv + q * D + 3 * D * F;
    if (c->qkv_bias) layer += q + 2 * kv;
    if (c->o_bias) layer += D;
    if (c->mlp_bias) layer += 2 * F + D;
    if (c->qk_norm) layer += 2 * c->head_dim;
    return V * D * (c->tie_embeddings ? 1 : 2) + c->n_layers * layer + D;
}
