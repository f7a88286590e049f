/* model_lora.c: the adaptable linear modules of each architecture under the
 * names PEFT targets them by, target-list parsing, and LoRA / DoRA
 * trainable parameter counts.
 *
 * Module names come from each architecture's modelling code:
 *   Llama, Mistral, Qwen2/3, Gemma/2  q_proj k_proj v_proj o_proj gate_proj up_proj down_proj
 *   Phi-3      qkv_proj (fused q,k,v), o_proj, gate_up_proj (fused), down_proj
 *   InternLM2  wqkv (fused), wo, w1 (gate), w3 (up), w2 (down); lm_head is "output"
 *   embedding  embed_tokens; Qwen v1 wte; InternLM2 tok_embeddings
 *   Qwen v1    c_attn (fused q,k,v with bias), attn.c_proj, w2 (gate: a1 * silu(w2 x)),
 *              w1 (up), mlp.c_proj (down); "c_proj" names both projections
 * LoRA adds B (out x r) and A (r x in) to each adapted matrix: r x (in + out);
 * on the embedding (PEFT's LoRA Embedding) A is r x vocab and B hidden x r.
 * DoRA adds a magnitude vector of length out per adapted matrix.
 */
#include "model/model.h"

#include <string.h>

/* Appends one module. */
static size_t add(model_module *out, size_t n, const char *name, unsigned roles, int64_t in,
                  int64_t o, bool per_layer)
{
    out[n] = (model_module){name, roles, in, o, per_layer};
    return n + 1;
}

size_t model_modules(const model_shape *m, model_module out[MODEL_MAX_MODULES])
{
    int64_t h = m->hidden, I = m->intermediate;
    int64_t q = m->heads * m->head_dim, kv = m->kv_heads * m->head_dim;
    size_t n = 0;
    switch (m->arch) {
    case MODEL_ARCH_PHI3:
        n = add(out, n, "qkv_proj", MODEL_ROLE_Q | MODEL_ROLE_K | MODEL_ROLE_V, h, q + 2 * kv, true);
        n = add(out, n, "o_proj", MODEL_ROLE_O, q, h, true);
        n = add(out, n, "gate_up_proj", MODEL_ROLE_GATE | MODEL_ROLE_UP, h, 2 * I, true);
        n = add(out, n, "down_proj", MODEL_ROLE_DOWN, I, h, true);
        n = add(out, n, "embed_tokens", MODEL_ROLE_EMBED, m->vocab, h, false);
        n = add(out, n, "lm_head", MODEL_ROLE_LM_HEAD, h, m->vocab, false);
        break;
    case MODEL_ARCH_INTERNLM2:
        n = add(out, n, "wqkv", MODEL_ROLE_Q | MODEL_ROLE_K | MODEL_ROLE_V, h, q + 2 * kv, true);
        n = add(out, n, "wo", MODEL_ROLE_O, q, h, true);
        n = add(out, n, "w1", MODEL_ROLE_GATE, h, I, true);
        n = add(out, n, "w3", MODEL_ROLE_UP, h, I, true);
        n = add(out, n, "w2", MODEL_ROLE_DOWN, I, h, true);
        n = add(out, n, "tok_embeddings", MODEL_ROLE_EMBED, m->vocab, h, false);
        n = add(out, n, "output", MODEL_ROLE_LM_HEAD, h, m->vocab, false);
        break;
    case MODEL_ARCH_QWEN:
        n = add(out, n, "c_attn", MODEL_ROLE_Q | MODEL_ROLE_K | MODEL_ROLE_V, h, q + 2 * kv, true);
        n = add(out, n, "c_proj", MODEL_ROLE_O, q, h, true);
        n = add(out, n, "w2", MODEL_ROLE_GATE, h, I, true);
        n = add(out, n, "w1", MODEL_ROLE_UP, h, I, true);
        n = add(out, n, "c_proj", MODEL_ROLE_DOWN, I, h, true);
        n = add(out, n, "wte", MODEL_ROLE_EMBED, m->vocab, h, false);
        n = add(out, n, "lm_head", MODEL_ROLE_LM_HEAD, h, m->vocab, false);
        break;
    default:
        n = add(out, n, "q_proj", MODEL_ROLE_Q, h, q, true);
        n = add(out, n, "k_proj", MODEL_ROLE_K, h, kv, true);
        n = add(out, n, "v_proj", MODEL_ROLE_V, h, kv, true);
        n = add(out, n, "o_proj", MODEL_ROLE_O, q, h, true);
        n = add(out, n, "gate_proj", MODEL_ROLE_GATE, h, I, true);
        n = add(out, n, "up_proj", MODEL_ROLE_UP, h, I, true);
        n = add(out, n, "down_proj", MODEL_ROLE_DOWN, I, h, true);
        n = add(out, n, "embed_tokens", MODEL_ROLE_EMBED, m->vocab, h, false);
        n = add(out, n, "lm_head", MODEL_ROLE_LM_HEAD, h, m->vocab, false);
        break;
    }
    return n;
}

/* The roles a name selects on this model; 0 when it has no such module. */
static unsigned roles_of_name(const model_shape *m, const char *name)
{
    if (str_ieq(name, "all-linear") || str_ieq(name, "all_linear")) return MODEL_ROLES_ALL_LINEAR;
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(m, mods);
    unsigned roles = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, mods[i].name) == 0) roles |= mods[i].roles;
    return roles;
}

bool model_has_module(const model_shape *m, const char *name)
{
    return roles_of_name(m, name) != 0;
}

/* For a Llama name the model lacks, the fused module that holds it. */
static const char *fused_holder(const model_shape *m, const char *name)
{
    static const struct {
        const char *name;
        unsigned role;
    } llama_names[] = {
        {"q_proj", MODEL_ROLE_Q},       {"k_proj", MODEL_ROLE_K},   {"v_proj", MODEL_ROLE_V},
        {"o_proj", MODEL_ROLE_O},       {"gate_proj", MODEL_ROLE_GATE}, {"up_proj", MODEL_ROLE_UP},
        {"down_proj", MODEL_ROLE_DOWN}, {"lm_head", MODEL_ROLE_LM_HEAD},
        {"embed_tokens", MODEL_ROLE_EMBED},
    };
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(m, mods);
    for (size_t i = 0; i < sizeof llama_names / sizeof llama_names[0]; i++) {
        if (!str_ieq(name, llama_names[i].name)) continue;
        for (size_t j = 0; j < n; j++)
            if (mods[j].roles & llama_names[i].role) return mods[j].name;
    }
    return NULL;
}

static void unknown_target(const model_shape *m, const char *name, const char *field, diag_list *d)
{
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(m, mods);
    const char *cands[MODEL_MAX_MODULES + 1];
    sb list;
    sb_init(&list);
    for (size_t i = 0; i < n; i++) {
        cands[i] = mods[i].name;
        if (i == 0 || strcmp(mods[i].name, mods[i - 1].name) != 0)
            sb_printf(&list, "%s%s", list.len ? ", " : "", mods[i].name);
    }
    cands[n] = "all-linear";
    diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, field, "the model has no module of this name");
    diag_set_expected(x, "one of %s, all-linear (%s)", sb_str(&list), model_arch_name(m->arch));
    diag_set_found(x, "%s", name);
    const char *holder = fused_holder(m, name);
    const char *near = str_suggest(name, cands, n + 1);
    if (holder)
        diag_set_suggestion(x, "%s fuses this projection into %s: target %s", model_arch_name(m->arch),
                            holder, holder);
    else if (near)
        diag_set_suggestion(x, "did you mean %s?", near);
    sb_free(&list);
}

bool model_targets_from_names(const model_shape *m, const char *const *names, size_t n,
                              const char *field, unsigned *roles, diag_list *d)
{
    size_t before = d->errors;
    unsigned r = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned got = roles_of_name(m, names[i]);
        if (!got)
            unknown_target(m, names[i], field, d);
        r |= got;
    }
    if (n == 0) {
        diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, field, "no target modules");
        diag_set_expected(x, "at least one module name, or all-linear");
    }
    *roles = r;
    return d->errors == before;
}

void model_targets_format(const model_shape *m, unsigned roles, sb *out)
{
    bool first = true;
    if ((roles & MODEL_ROLES_ALL_LINEAR) == MODEL_ROLES_ALL_LINEAR) {
        sb_puts(out, "all-linear");
        first = false;
        roles &= ~(unsigned)MODEL_ROLES_ALL_LINEAR;
    }
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(m, mods);
    for (size_t i = 0; i < n; i++) {
        if (!(mods[i].roles & roles)) continue;
        bool seen = false; /* Qwen v1 lists c_proj twice */
        for (size_t j = 0; j < i; j++)
            if (strcmp(mods[j].name, mods[i].name) == 0 && (mods[j].roles & roles)) seen = true;
        if (seen) continue;
        sb_printf(out, "%s%s", first ? "" : ",", mods[i].name);
        first = false;
    }
}

void model_lora_params(const model_shape *m, unsigned roles, int rank, bool dora,
                       model_lora_count *out)
{
    memset(out, 0, sizeof *out);
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(m, mods);
    uint64_t r = rank > 0 ? (uint64_t)rank : 0;
    uint64_t mag_layer = 0, mag_once = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(mods[i].roles & roles)) continue;
        uint64_t p = r * (uint64_t)(mods[i].in + mods[i].out);
        uint64_t mag = dora ? (uint64_t)mods[i].out : 0;
        if (mods[i].per_layer) {
            out->per_layer += p + mag;
            mag_layer += mag;
            out->matrices_per_layer++;
        } else {
            if (mods[i].roles & MODEL_ROLE_EMBED)
                out->embedding += p + mag;
            else
                out->lm_head += p + mag;
            mag_once += mag;
        }
        if (mods[i].in * mods[i].out > out->max_in * out->max_out) {
            out->max_in = mods[i].in;
            out->max_out = mods[i].out;
        }
    }
    out->magnitude = mag_layer * (uint64_t)m->layers + mag_once;
    out->total = out->per_layer * (uint64_t)m->layers + out->lm_head + out->embedding;
}
