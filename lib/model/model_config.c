/* model_config.c: reads a Hugging Face config.json (jansson) into a
 * model_shape. Every problem names the file and the field, with what was
 * expected and what was found.
 *
 * Field names per architecture (transformers configuration classes):
 *   common     hidden_size, intermediate_size, num_hidden_layers,
 *              num_attention_heads, num_key_value_heads (default: heads),
 *              head_dim (default: hidden / heads), vocab_size,
 *              tie_word_embeddings, max_position_embeddings, rope_theta
 *   Llama & co attention_bias (q, k, v, o biases), mlp_bias
 *   Qwen2      q, k, v always have biases
 *   InternLM2  bias (wqkv and wo)
 *   Qwen v1    kv_channels (head_dim), seq_length, rotary_emb_base, and an
 *              intermediate_size twice the width of each MLP projection
 *              (modeling_qwen.py: ff_dim_in = intermediate_size // 2)
 * Multimodal configs that nest the language model under "text_config" are
 * read from there.
 */
#include "model/model.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX_BYTES (4u << 20)

typedef struct cfg_reader {
    const char *file;
    json_t *obj;
    diag_list *d;
} cfg_reader;

static void field_error(cfg_reader *r, const char *field, const char *message, const char *expected,
                        const json_t *found)
{
    diag *x = diag_add(r->d, DIAG_ERROR, r->file, 0, 0, field, message);
    if (expected) diag_set_expected(x, "%s", expected);
    if (found) {
        if (json_is_integer(found))
            diag_set_found(x, "%lld", (long long)json_integer_value(found));
        else if (json_is_string(found))
            diag_set_found(x, "the string \"%s\"", json_string_value(found));
        else
            diag_set_found(x, "%s", json_kind(found));
    }
}

/* A positive integer field. Missing: *out = fallback, error when required. */
static bool get_int(cfg_reader *r, const char *field, bool required, int64_t fallback, int64_t *out)
{
    json_t *v = json_object_get(r->obj, field);
    *out = fallback;
    if (!v || json_is_null(v)) {
        if (required) {
            diag *x = diag_add(r->d, DIAG_ERROR, r->file, 0, 0, field, "required field is missing");
            diag_set_expected(x, "a positive integer");
            diag_set_suggestion(x, "is this a Hugging Face config.json of a decoder-only model?");
        }
        return !required;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        field_error(r, field, "wrong value", "a positive integer", v);
        return false;
    }
    *out = (int64_t)json_integer_value(v);
    return true;
}

static bool get_bool(cfg_reader *r, const char *field, bool fallback, bool *out)
{
    json_t *v = json_object_get(r->obj, field);
    *out = fallback;
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) {
        field_error(r, field, "wrong value", "true or false", v);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

static bool get_number(cfg_reader *r, const char *field, double *out)
{
    json_t *v = json_object_get(r->obj, field);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v) || json_number_value(v) <= 0) {
        field_error(r, field, "wrong value", "a positive number", v);
        return false;
    }
    *out = json_number_value(v);
    return true;
}

/* The architecture from "architectures"[0], else "model_type". */
static model_arch read_arch(cfg_reader *r)
{
    json_t *archs = json_object_get(r->obj, "architectures");
    const char *cls = NULL;
    if (json_is_array(archs) && json_array_size(archs) > 0 && json_is_string(json_array_get(archs, 0)))
        cls = json_string_value(json_array_get(archs, 0));
    else if (archs && !json_is_null(archs) && !json_is_array(archs))
        field_error(r, "architectures", "wrong value", "a list of class names", archs);
    json_t *mt = json_object_get(r->obj, "model_type");
    const char *type = json_is_string(mt) ? json_string_value(mt) : NULL;

    model_arch a;
    if (cls && model_arch_from_hf(cls, &a)) return a;
    if (type && model_arch_from_hf(type, &a)) return a;
    diag *x = diag_add(r->d, DIAG_WARNING, r->file, 0, 0, cls ? "architectures" : "model_type",
                       "architecture not known to lathe: counted as a Llama-like decoder");
    diag_set_found(x, "%s", cls ? cls : type ? type : "neither architectures nor model_type");
    diag_set_expected(x, "Llama, Mistral, Qwen, Qwen2, Qwen3, Gemma, Gemma2, Phi3 or InternLM2");
    return MODEL_ARCH_GENERIC;
}

/* Biases as each architecture's modelling code creates them. */
static bool read_biases(cfg_reader *r, model_shape *m)
{
    bool ok = true, b = false;
    switch (m->arch) {
    case MODEL_ARCH_QWEN2: m->qkv_bias = true; break;
    case MODEL_ARCH_QWEN: m->qkv_bias = true; break; /* c_attn always has one */
    case MODEL_ARCH_PHI3: break;
    case MODEL_ARCH_INTERNLM2:
        ok = get_bool(r, "bias", false, &b);
        m->qkv_bias = m->o_bias = b;
        break;
    default:
        ok = get_bool(r, "attention_bias", false, &b);
        m->qkv_bias = m->o_bias = b;
        ok = get_bool(r, "mlp_bias", false, &m->mlp_bias) && ok;
        break;
    }
    return ok;
}

/* Qwen v1 names some fields differently and doubles intermediate_size. */
static bool read_qwen_v1(cfg_reader *r, model_shape *m)
{
    bool ok = get_int(r, "kv_channels", false, 0, &m->head_dim);
    int64_t seq = 0;
    ok = get_int(r, "seq_length", false, 0, &seq) && ok;
    if (!m->max_positions) m->max_positions = seq;
    ok = get_number(r, "rotary_emb_base", &m->rope_theta) && ok;
    if (m->intermediate % 2 != 0) {
        diag *x = diag_add(r->d, DIAG_ERROR, r->file, 0, 0, "intermediate_size",
                           "Qwen v1 stores twice the MLP width here, so it must be even");
        diag_set_found(x, "%lld", (long long)m->intermediate);
        return false;
    }
    m->intermediate /= 2;
    return ok;
}

static bool read_dims(cfg_reader *r, model_shape *m)
{
    bool ok = true;
    ok = get_int(r, "hidden_size", true, 0, &m->hidden) && ok;
    ok = get_int(r, "intermediate_size", true, 0, &m->intermediate) && ok;
    ok = get_int(r, "num_hidden_layers", true, 0, &m->layers) && ok;
    ok = get_int(r, "num_attention_heads", true, 0, &m->heads) && ok;
    ok = get_int(r, "vocab_size", true, 0, &m->vocab) && ok;
    ok = get_int(r, "num_key_value_heads", false, m->heads, &m->kv_heads) && ok;
    ok = get_int(r, "head_dim", false, 0, &m->head_dim) && ok;
    ok = get_int(r, "max_position_embeddings", false, 0, &m->max_positions) && ok;
    ok = get_number(r, "rope_theta", &m->rope_theta) && ok;
    bool tied = m->tied_embeddings;
    ok = get_bool(r, "tie_word_embeddings", tied, &m->tied_embeddings) && ok;
    if (!ok) return false;
    if (m->arch == MODEL_ARCH_QWEN && !read_qwen_v1(r, m)) return false;
    if (!read_biases(r, m)) return false;
    if (m->head_dim == 0) {
        if (m->hidden % m->heads != 0) {
            diag *x = diag_add(r->d, DIAG_ERROR, r->file, 0, 0, "head_dim",
                               "missing, and hidden_size does not split evenly over the heads");
            diag_set_expected(x, "head_dim, or a hidden_size divisible by num_attention_heads");
            diag_set_found(x, "hidden_size %lld, num_attention_heads %lld", (long long)m->hidden,
                           (long long)m->heads);
            return false;
        }
        m->head_dim = m->hidden / m->heads;
    }
    return true;
}

/* The display name: _name_or_path, else the name given. */
static char *config_model_name(json_t *root, const char *name)
{
    json_t *n = json_object_get(root, "_name_or_path");
    if (json_is_string(n) && json_string_length(n) > 0) return xstrdup(json_string_value(n));
    return xstrdup(name);
}

bool model_parse_config(const char *name, const char *json, size_t len, model_shape *out,
                        diag_list *d)
{
    model_shape_init(out, MODEL_ARCH_GENERIC);
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        diag *x = diag_add(d, DIAG_ERROR, name, err.line, err.column, NULL, "not valid JSON");
        diag_set_found(x, "%s", err.text);
        return false;
    }
    if (!json_is_object(root)) {
        diag *x = diag_add(d, DIAG_ERROR, name, 0, 0, NULL, "wrong value");
        diag_set_expected(x, "a JSON object (a Hugging Face config.json)");
        diag_set_found(x, "%s", json_kind(root));
        json_decref(root);
        return false;
    }
    size_t errors_before = d->errors;
    cfg_reader r = {name, root, d};
    json_t *text = json_object_get(root, "text_config");
    if (!json_object_get(root, "hidden_size") && json_is_object(text)) r.obj = text;

    model_arch arch = read_arch(&r);
    model_shape_init(out, arch);
    bool ok = read_dims(&r, out) && model_shape_check(out, name, d) && d->errors == errors_before;
    if (ok) {
        out->name = config_model_name(root, name);
        out->origin = MODEL_FROM_CONFIG;
        out->origin_text = xasprintf("config.json at %s", name);
    }
    json_decref(root);
    return ok;
}

bool model_read_config(const char *path, model_shape *out, diag_list *d)
{
    model_shape_init(out, MODEL_ARCH_GENERIC);
    char *file = dir_exists(path) ? path_join(path, "config.json") : xstrdup(path);
    char err[256];
    size_t len = 0;
    char *text = file_read_all(file, CONFIG_MAX_BYTES, &len, err, sizeof err);
    if (!text) {
        diag *x = diag_add(d, DIAG_ERROR, file, 0, 0, NULL, "cannot read the model's config.json");
        diag_set_found(x, "%s", err);
        diag_set_suggestion(x, "give a folder that holds config.json, or the file itself");
        free(file);
        return false;
    }
    bool ok = model_parse_config(file, text, len, out, d);
    if (ok && dir_exists(path) && out->name && strcmp(out->name, file) == 0) {
        free(out->name);
        out->name = xstrdup(path);
    }
    free(text);
    free(file);
    return ok;
}
