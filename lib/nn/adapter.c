/* adapter.c: LoRA adapters held apart from the model (tr_adapter), so one
 * base model serves many of them: a PEFT folder (adapter_config.json +
 * adapter_model.safetensors) read into fp32 A [r, in] and B [out, r] per
 * layer and adapted projection, checked against the base model's shapes.
 * Also the adapter_config.json reader that tr_model_load_adapter uses. */
#include "nn/nn.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tr_adapter_config_read(const char *path, tr_lora_opts *lo, char *err, size_t errsz)
{
    size_t len;
    char *text = file_read_all(path, 1u << 20, &len, err, errsz);
    if (!text) return false;
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    free(text);
    bool ok = json_is_object(o);
    json_t *r = ok ? json_object_get(o, "r") : NULL, *al = ok ? json_object_get(o, "lora_alpha") : NULL;
    json_t *tm = ok ? json_object_get(o, "target_modules") : NULL;
    if (!ok || !json_is_integer(r) || json_integer_value(r) < 1 || json_integer_value(r) > 4096 ||
        !json_is_number(al) || !(json_is_array(tm) || json_is_string(tm))) {
        snprintf(err, errsz, "%s: expected a PEFT adapter_config.json with r (1..4096), "
                 "lora_alpha and target_modules%s%s", path, o ? "" : ": ", o ? "" : je.text);
        json_decref(o);
        return false;
    }
    memset(lo, 0, sizeof *lo);
    lo->rank = (int)json_integer_value(r);
    lo->alpha = (float)json_number_value(al);
    lo->rslora = json_is_true(json_object_get(o, "use_rslora"));
    sb list;
    sb_init(&list);
    if (json_is_string(tm)) sb_puts(&list, json_string_value(tm));
    for (size_t i = 0; json_is_array(tm) && i < json_array_size(tm); i++) {
        const char *s = json_string_value(json_array_get(tm, i));
        sb_printf(&list, "%s%s", i ? "," : "", s ? s : "?");
    }
    char why[384];
    ok = tr_targets_parse(sb_str(&list), &lo->targets, why, sizeof why);
    if (!ok) snprintf(err, errsz, "%s: target_modules: %s", path, why);
    sb_free(&list);
    json_decref(o);
    return ok;
}

/* ---------------------------------------------------------------- tensor names */

/* Parses "...layers.L.<block>.<proj>.lora_A[.default].weight" (PEFT's
 * naming, lathe's too); false for anything else. *is_b: lora_B. */
static bool parse_lora_name(const char *name, int *layer, tr_proj *proj, bool *is_b)
{
    const char *s = strstr(name, "layers.");
    if (!s) return false;
    s += strlen("layers.");
    char *end;
    long l = strtol(s, &end, 10);
    if (end == s || *end != '.' || l < 0 || l > 100000) return false;
    s = end + 1;
    for (int p = 0; p < TR_NPROJ; p++) {
        const char *blk = tr_proj_block((tr_proj)p), *pn = tr_proj_name((tr_proj)p);
        size_t bl = strlen(blk), pl = strlen(pn);
        if (strncmp(s, blk, bl) || s[bl] != '.' || strncmp(s + bl + 1, pn, pl)) continue;
        const char *t = s + bl + 1 + pl;
        if (strncmp(t, ".lora_A", 7) && strncmp(t, ".lora_B", 7)) return false;
        *is_b = t[6] == 'B';
        t += 7;
        if (strncmp(t, ".default", 8) == 0) t += 8;
        if (strcmp(t, ".weight")) return false;
        *layer = (int)l;
        *proj = (tr_proj)p;
        return true;
    }
    return false;
}

static void shape_text(char *out, size_t n, const st_tensor *t)
{
    if (t->ndim == 2) snprintf(out, n, "[%lld, %lld]", (long long)t->shape[0], (long long)t->shape[1]);
    else if (t->ndim == 1) snprintf(out, n, "[%lld]", (long long)t->shape[0]);
    else snprintf(out, n, "of %d dimensions", t->ndim);
}

/* Checks one tensor against the config and the base model; places it. */
static bool check_tensor(tr_adapter *a, const tr_model *m, const char *file, const st_tensor *t,
                         const st_tensor **seen, char *err, size_t errsz)
{
    int l;
    tr_proj p;
    bool is_b;
    char sh[64];
    shape_text(sh, sizeof sh, t);
    if (!parse_lora_name(t->name, &l, &p, &is_b)) {
        snprintf(err, errsz, "%s: tensor %s is not a LoRA A or B weight of a q/k/v/o/gate/up/down "
                 "projection (lathe serves plain LoRA adapters: no modules_to_save, DoRA or "
                 "embeddings)", file, t->name);
        return false;
    }
    if (!(a->lora.targets & (1u << p))) {
        snprintf(err, errsz, "%s: tensor %s adapts %s, which target_modules of "
                 "adapter_config.json does not list", file, t->name, tr_proj_name(p));
        return false;
    }
    if (l >= m->cfg.n_layers) {
        snprintf(err, errsz, "%s: tensor %s is for layer %d; the base model %s has %d layers "
                 "(an adapter of another base model?)", file, t->name, l, m->dir, m->cfg.n_layers);
        return false;
    }
    const tr_linear *lin = &m->layers[l].proj[p];
    int r = a->lora.rank;
    int64_t want0 = is_b ? lin->out : r, want1 = is_b ? r : lin->in;
    if (t->ndim != 2 || !tr_dtype_is_float(t->dtype)) {
        snprintf(err, errsz, "%s: tensor %s is %s %s; expected a 2-d F32, F16 or BF16 matrix",
                 file, t->name, tr_dtype_name(t->dtype), sh);
        return false;
    }
    if ((is_b ? t->shape[1] : t->shape[0]) != r) {
        snprintf(err, errsz, "%s: tensor %s has shape %s, so rank %lld, but adapter_config.json "
                 "says r = %d (expected [%lld, %lld])", file, t->name, sh,
                 (long long)(is_b ? t->shape[1] : t->shape[0]), r, (long long)want0,
                 (long long)want1);
        return false;
    }
    if (t->shape[0] != want0 || t->shape[1] != want1) {
        snprintf(err, errsz, "%s: tensor %s has shape %s; the base model %s's %s of layer %d is "
                 "[%d, %d] (out, in), so it needs [%lld, %lld]: an adapter of another base model?",
                 file, t->name, sh, m->dir, tr_proj_name(p), l, lin->out, lin->in,
                 (long long)want0, (long long)want1);
        return false;
    }
    size_t k = ((size_t)l * TR_NPROJ + p) * 2 + is_b;
    if (seen[k]) {
        snprintf(err, errsz, "%s: tensors %s and %s are the same weight", file, seen[k]->name,
                 t->name);
        return false;
    }
    seen[k] = t;
    return true;
}

/* Every targeted projection of every layer has its A and B. */
static bool check_complete(const tr_adapter *a, const tr_model *m, const char *file,
                           const st_tensor **seen, char *err, size_t errsz)
{
    int last = -1;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int p = 0; p < TR_NPROJ; p++)
            if (seen[((size_t)l * TR_NPROJ + p) * 2] || seen[((size_t)l * TR_NPROJ + p) * 2 + 1]) last = l;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int p = 0; p < TR_NPROJ; p++) {
            if (!(a->lora.targets & (1u << p))) continue;
            for (int b = 0; b < 2; b++) {
                if (seen[((size_t)l * TR_NPROJ + p) * 2 + b]) continue;
                char more[160] = "";
                if (last < m->cfg.n_layers - 1)
                    snprintf(more, sizeof more, " (the adapter has layers 0..%d, the base model %d: "
                             "an adapter of another base model?)", last, m->cfg.n_layers);
                snprintf(err, errsz, "%s: tensor base_model.model.model.layers.%d.%s.%s.lora_%c."
                         "weight is missing%s", file, l, tr_proj_block((tr_proj)p),
                         tr_proj_name((tr_proj)p), b ? 'B' : 'A', more);
                return false;
            }
        }
    return true;
}

/* Copies the checked tensors into one fp32 buffer. */
static void place(tr_adapter *a, const tr_model *m, const st_tensor **seen)
{
    size_t n = 0, nproj = (size_t)m->cfg.n_layers * TR_NPROJ;
    for (size_t k = 0; k < 2 * nproj; k++)
        if (seen[k]) n += (size_t)seen[k]->numel;
    a->data = xmalloc((n + 1) * sizeof(float));
    a->n_floats = n;
    a->proj = xcalloc(nproj, sizeof *a->proj);
    float scale = a->lora.rslora ? a->lora.alpha / sqrtf((float)a->lora.rank)
                                 : a->lora.alpha / (float)a->lora.rank;
    size_t at = 0;
    for (size_t k = 0; k < nproj; k++) {
        const st_tensor *ta = seen[2 * k], *tb = seen[2 * k + 1];
        if (!ta) continue;
        float *A = a->data + at, *B = A + ta->numel;
        tr_to_f32(A, ta->data, ta->dtype, (size_t)ta->numel);
        tr_to_f32(B, tb->data, tb->dtype, (size_t)tb->numel);
        at += (size_t)(ta->numel + tb->numel);
        a->proj[k] = (tr_adapter_proj){A, B, a->lora.rank, scale};
    }
}

bool tr_adapter_load(tr_adapter *a, const tr_model *m, const char *dir, char *err, size_t errsz)
{
    memset(a, 0, sizeof *a);
    char *cfgp = path_join(dir, "adapter_config.json");
    char *stp = path_join(dir, "adapter_model.safetensors");
    st_archive st;
    memset(&st, 0, sizeof st);
    bool opened = false;
    bool ok = tr_adapter_config_read(cfgp, &a->lora, err, errsz);
    if (ok) ok = opened = st_open(&st, stp, err, errsz);
    const st_tensor **seen = xcalloc((size_t)m->cfg.n_layers * TR_NPROJ * 2, sizeof *seen);
    for (size_t i = 0; ok && i < st.n; i++) ok = check_tensor(a, m, stp, &st.tensors[i], seen, err, errsz);
    if (ok) ok = check_complete(a, m, stp, seen, err, errsz);
    if (ok) {
        a->dir = xstrdup(dir);
        a->n_layers = m->cfg.n_layers;
        place(a, m, seen);
    }
    free(seen);
    if (opened) st_close(&st);
    free(cfgp);
    free(stp);
    return ok;
}

void tr_adapter_free(tr_adapter *a)
{
    free(a->dir);
    free(a->proj);
    free(a->data);
    memset(a, 0, sizeof *a);
}

size_t tr_adapter_bytes(const tr_adapter *a)
{
    return a->n_floats * sizeof(float);
}
