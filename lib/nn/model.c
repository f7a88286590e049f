/* model.c: a Llama-family model in memory. The base weights stay in the
 * memory-mapped safetensors in their own dtype; small frozen tensors (norms,
 * biases) get fp32 copies; the trainable parameters (LoRA A/B, or every
 * tensor in full fine-tuning) live in one fp32 buffer with a parallel
 * gradient buffer, each tensor named as PEFT / Hugging Face name it.
 * Also: target-module names, PEFT initialisation, adapter save / load (the
 * adapter_config.json reader is adapter.c's). */
#include "nn/nn.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const proj_names[TR_NPROJ] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                  "gate_proj", "up_proj", "down_proj"};

const char *tr_proj_name(tr_proj p)
{
    return proj_names[p];
}

const char *tr_proj_block(tr_proj p)
{
    return p <= TR_O ? "self_attn" : "mlp";
}

bool tr_targets_parse(const char *s, unsigned *mask, char *err, size_t errsz)
{
    char **parts;
    size_t n = str_split(s, ',', &parts);
    *mask = 0;
    bool ok = n > 0;
    if (!ok) snprintf(err, errsz, "target modules: empty list (use q_proj,v_proj or all-linear)");
    for (size_t i = 0; ok && i < n; i++) {
        const char *w = parts[i];
        if (strcmp(w, "all-linear") == 0 || strcmp(w, "all") == 0) {
            *mask |= (1u << TR_NPROJ) - 1;
            continue;
        }
        int found = -1;
        for (int p = 0; p < TR_NPROJ; p++) {
            size_t l = strlen(proj_names[p]) - 5; /* "q" of "q_proj" */
            if (strcmp(w, proj_names[p]) == 0 || (strlen(w) == l && strncmp(w, proj_names[p], l) == 0))
                found = p;
        }
        if (found < 0) {
            const char *cands[TR_NPROJ + 1];
            for (int p = 0; p < TR_NPROJ; p++) cands[p] = proj_names[p];
            cands[TR_NPROJ] = "all-linear";
            const char *sug = str_suggest(w, cands, TR_NPROJ + 1);
            snprintf(err, errsz, "target module \"%s\" is not a projection of this model family "
                     "(q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, or all-linear)%s%s%s",
                     w, sug ? "; did you mean \"" : "", sug ? sug : "", sug ? "\"?" : "");
            ok = false;
        } else {
            *mask |= 1u << found;
        }
    }
    str_list_free(parts, n);
    return ok;
}

/* in / out features of projection p */
static void proj_shape(const tr_config *c, tr_proj p, int *in, int *out)
{
    int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    switch (p) {
    case TR_Q: *in = c->dim; *out = qd; break;
    case TR_K: case TR_V: *in = c->dim; *out = kvd; break;
    case TR_O: *in = qd; *out = c->dim; break;
    case TR_GATE: case TR_UP: *in = c->dim; *out = c->hidden; break;
    default: *in = c->hidden; *out = c->dim; break;
    }
}

static bool proj_has_bias(const tr_config *c, tr_proj p)
{
    if (p <= TR_V) return c->qkv_bias;
    if (p == TR_O) return c->o_bias;
    return c->mlp_bias;
}

/* ---- loading ---- */

typedef struct loader {
    tr_model *m;
    char *err;
    size_t errsz;
    bool ok;
    size_t n_floats, frozen_used; /* layout passes */
    size_t n_frozen;
    bool place; /* second pass: assign pointers */
} loader;

/* "[4096, 11008]" */
static void shape_str(char *out, size_t n, int ndim, const int64_t *shape)
{
    size_t at = (size_t)snprintf(out, n, "[");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(out + at, n - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < n) snprintf(out + at, n - at, "]");
}

/* Finds a base tensor and checks its shape. */
static const st_tensor *need(loader *L, const char *name, int64_t d0, int64_t d1)
{
    if (!L->ok) return NULL;
    const st_tensor *t = st_find(&L->m->st, name);
    int nd = d1 ? 2 : 1;
    int64_t want[2] = {d0, d1};
    char ws[64], hs[160];
    shape_str(ws, sizeof ws, nd, want);
    if (!t) {
        snprintf(L->err, L->errsz, "%s: tensor %s is missing (expected shape %s): do config.json "
                 "and the safetensors belong together?", L->m->dir, name, ws);
        L->ok = false;
        return NULL;
    }
    if (t->ndim != nd || t->shape[0] != d0 || (d1 && t->shape[1] != d1) || !tr_dtype_is_float(t->dtype)) {
        shape_str(hs, sizeof hs, t->ndim, t->shape);
        snprintf(L->err, L->errsz, "%s: tensor %s has shape %s and dtype %s; config.json implies %s "
                 "in F32, F16 or BF16", L->m->dir, name, hs, tr_dtype_name(t->dtype), ws);
        L->ok = false;
        return NULL;
    }
    return t;
}

/* Registers a trainable tensor (first pass: counts; second: places). */
static float *add_param(loader *L, const char *name, int ndim, int64_t d0, int64_t d1, bool decay)
{
    tr_model *m = L->m;
    size_t numel = (size_t)d0 * (size_t)(ndim > 1 ? d1 : 1);
    if (!L->place) {
        m->n_params++;
        L->n_floats += numel;
        return NULL;
    }
    tr_param *p = &m->params[m->n_params++];
    p->name = xstrdup(name);
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = ndim > 1 ? d1 : 0;
    p->offset = L->n_floats;
    p->numel = numel;
    p->decay = decay;
    L->n_floats += numel;
    return m->param_data + p->offset;
}

/* A vector (norm or bias): a trainable param in full mode, else a frozen
 * fp32 copy. Returns the fp32 pointer (NULL on the counting pass). */
static float *vector_tensor(loader *L, const char *name, int64_t n, float **grad)
{
    const st_tensor *t = need(L, name, n, 0);
    if (!t) return NULL;
    *grad = NULL;
    if (L->m->opts.mode == TR_MODE_FULL) {
        float *p = add_param(L, name, 1, n, 0, false);
        if (p) {
            tr_to_f32(p, t->data, t->dtype, (size_t)n);
            *grad = L->m->grad_data + (p - L->m->param_data);
        }
        return p;
    }
    if (!L->place) {
        L->n_frozen += (size_t)n;
        return NULL;
    }
    float *p = L->m->frozen + L->frozen_used;
    L->frozen_used += (size_t)n;
    tr_to_f32(p, t->data, t->dtype, (size_t)n);
    return p;
}

/* A matrix weight: a view of the mapping, or a trainable fp32 copy. */
static void matrix_tensor(loader *L, tr_weight *w, const char *name, int64_t rows, int64_t cols)
{
    const st_tensor *t = need(L, name, rows, cols);
    if (!t) return;
    w->data = t->data;
    w->dtype = t->dtype;
    w->grad = NULL;
    if (L->m->opts.mode == TR_MODE_FULL) {
        float *p = add_param(L, name, 2, rows, cols, true);
        if (p) {
            tr_to_f32(p, t->data, t->dtype, (size_t)(rows * cols));
            w->data = p;
            w->dtype = TR_F32;
            w->grad = L->m->grad_data + (p - L->m->param_data);
        }
    }
}

static void lora_params(loader *L, tr_linear *lin, int layer, tr_proj p)
{
    tr_model *m = L->m;
    const tr_lora_opts *lo = &m->opts.lora;
    if (m->opts.mode != TR_MODE_LORA || !(lo->targets & (1u << p)) || lo->rank <= 0) return;
    char *na = xasprintf("base_model.model.model.layers.%d.%s.%s.lora_A.weight", layer,
                         tr_proj_block(p), tr_proj_name(p));
    char *nb = xasprintf("base_model.model.model.layers.%d.%s.%s.lora_B.weight", layer,
                         tr_proj_block(p), tr_proj_name(p));
    float *a = add_param(L, na, 2, lo->rank, lin->in, true);
    float *b = add_param(L, nb, 2, lin->out, lo->rank, true);
    if (a) {
        lin->lora_a = a;
        lin->lora_b = b;
        lin->dlora_a = m->grad_data + (a - m->param_data);
        lin->dlora_b = m->grad_data + (b - m->param_data);
        lin->r = lo->rank;
        lin->scale = lo->rslora ? lo->alpha / sqrtf((float)lo->rank) : lo->alpha / (float)lo->rank;
    }
    free(na);
    free(nb);
}

static void layer_tensors(loader *L, int i)
{
    tr_model *m = L->m;
    const tr_config *c = &m->cfg;
    tr_layer *ly = L->place ? &m->layers[i] : &(tr_layer){0};
    char name[160];
    float *g;
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", i);
    ly->ln1 = vector_tensor(L, name, c->dim, &g);
    ly->dln1 = g;
    snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", i);
    ly->ln2 = vector_tensor(L, name, c->dim, &g);
    ly->dln2 = g;
    if (c->qk_norm) {
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", i);
        ly->q_norm = vector_tensor(L, name, c->head_dim, &g);
        ly->dq_norm = g;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", i);
        ly->k_norm = vector_tensor(L, name, c->head_dim, &g);
        ly->dk_norm = g;
    }
    for (int p = 0; p < TR_NPROJ; p++) {
        tr_linear *lin = &ly->proj[p];
        proj_shape(c, (tr_proj)p, &lin->in, &lin->out);
        snprintf(name, sizeof name, "model.layers.%d.%s.%s.weight", i, tr_proj_block((tr_proj)p),
                 proj_names[p]);
        matrix_tensor(L, &lin->w, name, lin->out, lin->in);
        if (proj_has_bias(c, (tr_proj)p)) {
            snprintf(name, sizeof name, "model.layers.%d.%s.%s.bias", i, tr_proj_block((tr_proj)p),
                     proj_names[p]);
            lin->bias = vector_tensor(L, name, lin->out, &g);
            lin->dbias = g;
        }
        lora_params(L, lin, i, (tr_proj)p);
    }
}

/* One pass over every tensor of the model (count, then place). */
static void walk_tensors(loader *L)
{
    tr_model *m = L->m;
    const tr_config *c = &m->cfg;
    float *g;
    matrix_tensor(L, &m->embed, "model.embed_tokens.weight", c->vocab, c->dim);
    for (int i = 0; i < c->n_layers && L->ok; i++) layer_tensors(L, i);
    float *fn = vector_tensor(L, "model.norm.weight", c->dim, &g);
    if (L->place) {
        m->final_norm = fn;
        m->dfinal_norm = g;
    }
    if (c->tie_embeddings) m->lm_head = m->embed;
    else matrix_tensor(L, &m->lm_head, "lm_head.weight", c->vocab, c->dim);
}

/* PEFT's LoRA initialisation: A ~ kaiming_uniform(a = sqrt(5)), i.e.
 * U(-1/sqrt(in), 1/sqrt(in)); B = 0 (peft/tuners/lora/layer.py,
 * reset_lora_parameters with init_lora_weights=True). */
static void lora_init(tr_model *m)
{
    tr_rng rng;
    tr_rng_seed(&rng, m->opts.seed);
    for (int i = 0; i < m->cfg.n_layers; i++)
        for (int p = 0; p < TR_NPROJ; p++) {
            tr_linear *lin = &m->layers[i].proj[p];
            if (!lin->lora_a) continue;
            float bound = 1.0f / sqrtf((float)lin->in);
            for (size_t k = 0; k < (size_t)lin->r * lin->in; k++)
                lin->lora_a[k] = (2.0f * tr_rng_uniform(&rng) - 1.0f) * bound;
            memset(lin->lora_b, 0, (size_t)lin->out * lin->r * sizeof(float));
        }
}

bool tr_model_load(tr_model *m, const char *dir, const tr_model_opts *o, tr_backend *be,
                   char *err, size_t errsz)
{
    memset(m, 0, sizeof *m);
    m->opts = *o;
    m->be = be;
    m->dir = xstrdup(dir);
    if (!tr_config_load(&m->cfg, dir, err, errsz) || !st_open(&m->st, dir, err, errsz)) {
        tr_model_free(m);
        return false;
    }
    if (o->mode == TR_MODE_LORA && o->lora.rank > 0 && !o->lora.targets) {
        snprintf(err, errsz, "LoRA needs at least one target module");
        tr_model_free(m);
        return false;
    }
    loader L = {.m = m, .err = err, .errsz = errsz, .ok = true};
    walk_tensors(&L); /* count */
    if (!L.ok) {
        tr_model_free(m);
        return false;
    }
    m->n_floats = L.n_floats;
    m->params = xcalloc(m->n_params + 1, sizeof *m->params);
    m->param_data = xcalloc(m->n_floats + 1, sizeof(float));
    m->grad_data = xcalloc(m->n_floats + 1, sizeof(float));
    m->frozen = xcalloc(L.n_frozen + 1, sizeof(float));
    m->layers = xcalloc((size_t)m->cfg.n_layers, sizeof *m->layers);
    m->n_params = 0;
    L.n_floats = 0;
    L.place = true;
    walk_tensors(&L); /* place */
    lora_init(m);
    return true;
}

void tr_model_free(tr_model *m)
{
    for (size_t i = 0; i < m->n_params; i++) free(m->params[i].name);
    free(m->params);
    free(m->param_data);
    free(m->grad_data);
    free(m->frozen);
    free(m->layers);
    free(m->dir);
    tr_model_ws_free(m);
    st_close(&m->st);
    memset(m, 0, sizeof *m);
}

const tr_param *tr_model_param(const tr_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return &m->params[i];
    return NULL;
}

/* ---- saving and loading trainable parameters ---- */

/* Full-mode files use the Hugging Face names; LoRA files the PEFT names. */
int tr_model_save_params(const tr_model *m, const char *path, tr_dtype dtype)
{
    st_writer w;
    st_writer_init(&w);
    for (size_t i = 0; i < m->n_params; i++) {
        const tr_param *p = &m->params[i];
        st_writer_add_f32(&w, p->name, dtype, p->ndim, p->shape, m->param_data + p->offset);
    }
    int rc = st_writer_save(&w, path);
    st_writer_free(&w);
    return rc;
}

bool tr_model_load_params(tr_model *m, const char *path, char *err, size_t errsz)
{
    st_archive a;
    if (!st_open(&a, path, err, errsz)) return false;
    bool ok = true;
    for (size_t i = 0; ok && i < m->n_params; i++) {
        const tr_param *p = &m->params[i];
        const st_tensor *t = st_find(&a, p->name);
        if (!t || t->numel != (int64_t)p->numel || t->shape[0] != p->shape[0] ||
            !tr_dtype_is_float(t->dtype)) {
            snprintf(err, errsz, "%s: tensor %s is %s (expected shape [%lld, %lld]: same rank and "
                     "target modules as this run)", path, p->name, t ? "of another shape" : "missing",
                     (long long)p->shape[0], (long long)p->shape[1]);
            ok = false;
            break;
        }
        tr_to_f32(m->param_data + p->offset, t->data, t->dtype, p->numel);
    }
    if (ok && a.n != m->n_params) {
        snprintf(err, errsz, "%s holds %zu tensors, this run has %zu trainable tensors (another "
                 "rank or other target modules?)", path, a.n, m->n_params);
        ok = false;
    }
    st_close(&a);
    return ok;
}

char *tr_adapter_config_json(const tr_model *m, const char *base_model_path)
{
    const tr_lora_opts *lo = &m->opts.lora;
    json_t *targets = json_array();
    for (int p = 0; p < TR_NPROJ; p++)
        if (lo->targets & (1u << p)) json_array_append_new(targets, json_string(proj_names[p]));
    /* the keys PEFT 0.18 writes (adapter_config.json of
     * tests/ref/models/peft-reference-phi15-r4), sorted, indent 2 */
    json_t *o = json_object();
    json_object_set_new(o, "alora_invocation_tokens", json_null());
    json_object_set_new(o, "alpha_pattern", json_object());
    json_object_set_new(o, "arrow_config", json_null());
    json_object_set_new(o, "auto_mapping", json_null());
    json_object_set_new(o, "base_model_name_or_path", json_string(base_model_path ? base_model_path : ""));
    json_object_set_new(o, "bias", json_string("none"));
    json_object_set_new(o, "corda_config", json_null());
    json_object_set_new(o, "ensure_weight_tying", json_false());
    json_object_set_new(o, "eva_config", json_null());
    json_object_set_new(o, "exclude_modules", json_null());
    json_object_set_new(o, "fan_in_fan_out", json_false());
    json_object_set_new(o, "inference_mode", json_true());
    json_object_set_new(o, "init_lora_weights", json_true());
    json_object_set_new(o, "layer_replication", json_null());
    json_object_set_new(o, "layers_pattern", json_null());
    json_object_set_new(o, "layers_to_transform", json_null());
    json_object_set_new(o, "loftq_config", json_object());
    if (floorf(lo->alpha) == lo->alpha) json_object_set_new(o, "lora_alpha", json_integer((json_int_t)lo->alpha));
    else json_object_set_new(o, "lora_alpha", json_real(lo->alpha));
    json_object_set_new(o, "lora_bias", json_false());
    json_object_set_new(o, "lora_dropout", json_real(lo->dropout));
    json_object_set_new(o, "megatron_config", json_null());
    json_object_set_new(o, "megatron_core", json_string("megatron.core"));
    json_object_set_new(o, "modules_to_save", json_null());
    json_object_set_new(o, "peft_type", json_string("LORA"));
    json_object_set_new(o, "peft_version", json_string("0.18.1"));
    json_object_set_new(o, "qalora_group_size", json_integer(16));
    json_object_set_new(o, "r", json_integer(lo->rank));
    json_object_set_new(o, "rank_pattern", json_object());
    json_object_set_new(o, "revision", json_null());
    json_object_set_new(o, "target_modules", targets);
    json_object_set_new(o, "target_parameters", json_null());
    json_object_set_new(o, "task_type", json_string("CAUSAL_LM"));
    json_object_set_new(o, "trainable_token_indices", json_null());
    json_object_set_new(o, "use_dora", json_false());
    json_object_set_new(o, "use_qalora", json_false());
    json_object_set_new(o, "use_rslora", json_boolean(lo->rslora));
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

bool tr_model_load_adapter(tr_model *m, const char *dir, char *err, size_t errsz)
{
    char *cfgp = path_join(dir, "adapter_config.json");
    char *stp = path_join(dir, "adapter_model.safetensors");
    tr_lora_opts lo;
    bool ok = tr_adapter_config_read(cfgp, &lo, err, errsz);
    if (ok && m->n_params == 0) { /* a model loaded without LoRA: reload with the adapter's */
        tr_model_opts o = m->opts;
        char *mdir = xstrdup(m->dir);
        tr_backend *be = m->be;
        o.mode = TR_MODE_LORA;
        o.lora = lo;
        tr_model_free(m);
        ok = tr_model_load(m, mdir, &o, be, err, errsz);
        free(mdir);
    }
    if (ok) ok = tr_model_load_params(m, stp, err, errsz);
    free(cfgp);
    free(stp);
    return ok;
}
