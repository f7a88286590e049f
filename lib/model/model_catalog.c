/* model_catalog.c: finding a model by name in the built-in catalogue, the
 * generic Llama-like shape solved from a parameter count, and model_resolve
 * (config.json path, then catalogue, then generic).
 *
 * Name matching, in order: the exact id ("Qwen/Qwen2-7B", any case); the
 * name without its organisation ("qwen2-7b"); then the lookup key, which
 * drops style words that do not change the shape (Instruct, Chat, it, hf,
 * Base, Int4, ...), dates ("2507") and a leading "Meta-", first keeping
 * version tokens ("v0.3") and then without them. So "Qwen2-7B-Instruct",
 * "Meta-Llama-3-8B-Instruct" and "Llama-3-8B" all find their base entry.
 */
#include "model/model.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Checkpoints that share a catalogue entry's shape under another name. */
static const struct {
    const char *alias, *id;
} ALIASES[] = {
    /* memory-calibration.md: same shapes as the base entry (LitGPT). */
    {"TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "TinyLlama/TinyLlama-1.1B-Chat-v1.0"},
};

/* Words that name a variant of the same weights' shape. */
static const char *const STYLE_WORDS[] = {"instruct", "chat", "it", "hf", "base", "sft", "dpo",
                                          "rlhf", "int4", "int8", "awq", "gptq", "gguf", "fp16",
                                          "bf16", "fp8", "ms"};

size_t model_catalog_count(void)
{
    return model_catalog_generated_len + model_catalog_extra_len;
}

const model_catalog_entry *model_catalog_at(size_t i)
{
    if (i < model_catalog_generated_len) return &model_catalog_generated[i];
    i -= model_catalog_generated_len;
    return i < model_catalog_extra_len ? &model_catalog_extra[i] : NULL;
}

static bool is_style_word(const char *tok)
{
    for (size_t i = 0; i < sizeof STYLE_WORDS / sizeof STYLE_WORDS[0]; i++)
        if (strcmp(tok, STYLE_WORDS[i]) == 0) return true;
    size_t n = strlen(tok);
    bool digits = n == 4;
    for (size_t i = 0; digits && i < n; i++) digits = isdigit((unsigned char)tok[i]);
    return digits; /* a date such as 2507 */
}

/* "v0.1", "v14.1", "v3" */
static bool is_version(const char *tok)
{
    if (tok[0] != 'v' || !isdigit((unsigned char)tok[1])) return false;
    for (const char *p = tok + 1; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.') return false;
    return true;
}

static const char *basename_of(const char *name)
{
    const char *slash = strrchr(name, '/');
    return slash ? slash + 1 : name;
}

void model_catalog_key(const char *name, bool keep_version, char *out, size_t outsz)
{
    if (outsz == 0) return;
    out[0] = '\0';
    char *low = xstrdup(basename_of(name));
    for (char *p = low; *p; p++) {
        *p = (char)tolower((unsigned char)*p);
        if (*p == '_') *p = '.';
    }
    const char *start = str_starts_with(low, "meta-llama") ? low + 5 : low;
    sb key;
    sb_init(&key);
    char *save = NULL;
    char *work = xstrdup(start);
    for (char *tok = strtok_r(work, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
        if (is_style_word(tok) || (!keep_version && is_version(tok))) continue;
        sb_printf(&key, "%s%s", key.len ? "-" : "", tok);
    }
    snprintf(out, outsz, "%s", sb_str(&key));
    sb_free(&key);
    free(work);
    free(low);
}

typedef bool (*name_match_fn)(const char *query, const char *candidate);

static bool match_id(const char *q, const char *c)
{
    return str_ieq(q, c);
}

static bool match_base(const char *q, const char *c)
{
    return str_ieq(basename_of(q), basename_of(c));
}

static bool match_key_versioned(const char *q, const char *c)
{
    char kq[256], kc[256];
    model_catalog_key(q, true, kq, sizeof kq);
    model_catalog_key(c, true, kc, sizeof kc);
    return kq[0] && strcmp(kq, kc) == 0;
}

static bool match_key(const char *q, const char *c)
{
    char kq[256], kc[256];
    model_catalog_key(q, false, kq, sizeof kq);
    model_catalog_key(c, false, kc, sizeof kc);
    return kq[0] && strcmp(kq, kc) == 0;
}

static const model_catalog_entry *find_id(const char *id)
{
    for (size_t i = 0; i < model_catalog_count(); i++)
        if (strcmp(model_catalog_at(i)->id, id) == 0) return model_catalog_at(i);
    return NULL;
}

/* One matching tier over entries, then aliases. */
static const model_catalog_entry *find_with(const char *name, name_match_fn match)
{
    for (size_t i = 0; i < model_catalog_count(); i++)
        if (match(name, model_catalog_at(i)->id)) return model_catalog_at(i);
    for (size_t i = 0; i < sizeof ALIASES / sizeof ALIASES[0]; i++)
        if (match(name, ALIASES[i].alias)) return find_id(ALIASES[i].id);
    return NULL;
}

const model_catalog_entry *model_catalog_find(const char *name)
{
    if (!name || !*name || strlen(name) > 200) return NULL;
    static const name_match_fn tiers[] = {match_id, match_base, match_key_versioned, match_key};
    for (size_t t = 0; t < sizeof tiers / sizeof tiers[0]; t++) {
        const model_catalog_entry *e = find_with(name, tiers[t]);
        if (e) return e;
    }
    return NULL;
}

void model_shape_from_catalog(const model_catalog_entry *e, model_shape *out)
{
    model_shape_init(out, e->arch);
    out->hidden = e->hidden;
    out->intermediate = e->intermediate;
    out->layers = e->layers;
    out->heads = e->heads;
    out->kv_heads = e->kv_heads;
    out->head_dim = e->head_dim ? e->head_dim : e->hidden / e->heads;
    out->vocab = e->vocab;
    out->max_positions = e->max_positions;
    out->rope_theta = e->rope_theta;
    out->tied_embeddings = e->tied_embeddings;
    out->name = xstrdup(e->id);
    out->origin = MODEL_FROM_CATALOGUE;
    out->origin_text = xasprintf("catalogue entry %s (source: %s)", e->id, e->source);
}

/* ---- generic shape ---- */

/* Parameters of the generic shape at hidden size h with h/128 layers,
 * continuous in h (for the solver). */
static double generic_params_at(double h)
{
    const double mlp_ratio = 2.6875, vocab = 32000.0;
    double per_layer = 4.0 * h * h + 3.0 * h * (mlp_ratio * h) + 2.0 * h;
    return (h / 128.0) * per_layer + 2.0 * vocab * h + h;
}

bool model_generic_shape(double params, model_shape *out)
{
    model_shape_init(out, MODEL_ARCH_GENERIC);
    if (!(params >= 1e7 && params <= 1e13)) return false;
    double lo = 16, hi = 131072; /* generic_params_at is increasing in h */
    for (int i = 0; i < 200 && hi - lo > 0.5; i++) {
        double mid = (lo + hi) / 2;
        if (generic_params_at(mid) < params)
            lo = mid;
        else
            hi = mid;
    }
    int64_t h = (int64_t)llround(lo / 128.0) * 128;
    if (h < 128) h = 128;
    int64_t I = (int64_t)llround(2.6875 * (double)h / 256.0) * 256;
    if (I < 256) I = 256;
    out->hidden = h;
    out->intermediate = I;
    out->heads = out->kv_heads = h / 128;
    out->head_dim = 128;
    out->vocab = 32000;
    out->tied_embeddings = false;
    out->layers = 1;
    model_params p;
    model_count_params(out, &p);
    double rest = params - (double)(p.embedding + p.lm_head + p.final_norm);
    int64_t L = (int64_t)llround(rest / (double)p.per_layer);
    out->layers = L < 1 ? 1 : L;
    model_count_params(out, &p);
    char count[64];
    str_thousands(count, sizeof count, p.total);
    out->name = xasprintf("generic-%.3gB", params / 1e9);
    out->origin = MODEL_FROM_GENERIC;
    out->origin_text = xasprintf(
        "generic Llama-like shape for %.3gB parameters (hidden %lld, %lld layers, MLP %lld, "
        "vocab 32000: %s parameters); approximate: give baseModel.path or a catalogue name "
        "for exact figures",
        params / 1e9, (long long)h, (long long)out->layers, (long long)I, count);
    return true;
}

bool model_size_from_name(const char *name, double *params)
{
    if (!name || strlen(name) > 200) return false; /* no model name is that long */
    char key[256];
    model_catalog_key(name, false, key, sizeof key);
    char *save = NULL;
    for (char *tok = strtok_r(key, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
        char *end = NULL;
        if (!isdigit((unsigned char)tok[0])) continue;
        double v = strtod(tok, &end);
        if (!end || end == tok || end[0] == '\0' || end[1] != '\0') continue;
        double scale = end[0] == 'b' ? 1e9 : end[0] == 'm' ? 1e6 : 0;
        if (scale > 0 && v > 0) {
            *params = v * scale;
            return true;
        }
    }
    return false;
}

/* ---- resolution ---- */

static bool resolve_name(const char *name, double params, model_shape *out, diag_list *d)
{
    const model_catalog_entry *e = model_catalog_find(name);
    if (e) {
        model_shape_from_catalog(e, out);
        if (params > 0 && fabs(params - (double)e->param_count) > 0.15 * (double)e->param_count) {
            diag *x = diag_add(d, DIAG_WARNING, NULL, 0, 0, "baseModel.parameters",
                               "differs from the catalogue's exact count; the catalogue is used");
            diag_set_expected(x, "about %.3gB for %s", (double)e->param_count / 1e9, e->id);
            diag_set_found(x, "%.3gB", params / 1e9);
        }
        return true;
    }
    double guess = params;
    bool from_name = !(guess > 0) && model_size_from_name(name, &guess);
    if (guess > 0 && model_generic_shape(guess, out)) {
        diag *x = diag_add(d, DIAG_WARNING, NULL, 0, 0, "baseModel.name",
                           "model not in the catalogue: using a generic Llama-like shape");
        diag_set_found(x, "%s", name);
        diag_set_suggestion(x, "%s; give baseModel.path (a folder with config.json) for exact figures",
                            from_name ? "the size was read from the name" : "sized by baseModel.parameters");
        free(out->name);
        out->name = xstrdup(name);
        return true;
    }
    const char *ids[128];
    size_t n = 0;
    for (size_t i = 0; i < model_catalog_count() && n < 128; i++) ids[n++] = basename_of(model_catalog_at(i)->id);
    diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, "baseModel.name", "unknown model");
    diag_set_found(x, "%s", name);
    diag_set_expected(x, "a catalogue name (`lathe estimate --help` lists where they come from), "
                         "a folder with config.json, or a size such as 7B");
    const char *near = str_suggest(basename_of(name), ids, n);
    if (near)
        diag_set_suggestion(x, "did you mean %s?", near);
    else
        diag_set_suggestion(x, "give baseModel.path or baseModel.parameters");
    return false;
}

bool model_resolve(const char *path, const char *name, double params, model_shape *out,
                   diag_list *d)
{
    model_shape_init(out, MODEL_ARCH_GENERIC);
    bool has_name = name && *name;
    if (path && *path) {
        if (file_exists(path) || dir_exists(path)) return model_read_config(path, out, d);
        diag *x = diag_add(d, (has_name || params > 0) ? DIAG_WARNING : DIAG_ERROR, NULL, 0, 0,
                           "baseModel.path", "not found on this machine");
        diag_set_found(x, "%s", path);
        if (has_name || params > 0)
            diag_set_suggestion(x, "using %s instead", has_name ? "the model name" : "the parameter count");
        if (!has_name && !(params > 0)) return false;
    }
    if (has_name) return resolve_name(name, params, out, d);
    if (params > 0) {
        if (model_generic_shape(params, out)) {
            diag_add(d, DIAG_WARNING, NULL, 0, 0, "baseModel.parameters",
                     "no model name or path: using a generic Llama-like shape");
            return true;
        }
        diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, "baseModel.parameters", "out of range");
        diag_set_expected(x, "from 10M to 10T parameters");
        diag_set_found(x, "%.4g", params);
        return false;
    }
    diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, "baseModel", "no model given");
    diag_set_expected(x, "a name, a path to a folder with config.json, or a parameter count");
    return false;
}
