/* model.h: what lathe knows about a base model's shape.
 *
 *   - model_shape: architecture, dimensions and where they came from
 *   - reading a Hugging Face config.json (a folder or the file itself)
 *   - the built-in catalogue (generated from tests/ref/data/model_configs.json,
 *     plus a hand-kept table of extra shapes with their sources), looked up
 *     by name with or without the organisation and with -Instruct / -Chat /
 *     -it / -hf / -v0.1 style suffixes
 *   - a generic Llama-like shape solved from a parameter count ("7B")
 *   - model_resolve: path, then catalogue, then generic, saying which
 *   - exact parameter counts
 *   - the adaptable linear modules of each architecture (PEFT names and
 *     aliases) and LoRA / DoRA trainable parameter counts for a target set
 *
 * See docs/models.md for the formulas and sources.
 */
#ifndef LATHE_MODEL_H
#define LATHE_MODEL_H

#include "base/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- architectures ---- */
typedef enum {
    MODEL_ARCH_LLAMA,     /* LlamaForCausalLM (also Yi, TinyLlama, SmolLM) */
    MODEL_ARCH_MISTRAL,   /* MistralForCausalLM */
    MODEL_ARCH_QWEN,      /* QWenLMHeadModel (Qwen v1): fused c_attn with bias, w1/w2 */
    MODEL_ARCH_QWEN2,     /* Qwen2ForCausalLM (Qwen1.5, Qwen2, Qwen2.5): q/k/v bias */
    MODEL_ARCH_QWEN3,     /* Qwen3ForCausalLM: q/k RMSNorm, explicit head_dim */
    MODEL_ARCH_GEMMA,     /* GemmaForCausalLM: GeGLU, tied, head_dim 256 */
    MODEL_ARCH_GEMMA2,    /* Gemma2ForCausalLM: 4 norms per layer */
    MODEL_ARCH_PHI3,      /* Phi3ForCausalLM: fused qkv_proj and gate_up_proj */
    MODEL_ARCH_INTERNLM2, /* InternLM2ForCausalLM: fused wqkv, w1/w2/w3 */
    MODEL_ARCH_GENERIC    /* a Llama-like decoder of unknown class */
} model_arch;
#define MODEL_ARCH_COUNT 10

/* "llama", "qwen2", ... (lathe's short names) */
const char *model_arch_name(model_arch a);
/* The Hugging Face class name ("Qwen2ForCausalLM"); "" for generic. */
const char *model_arch_hf_class(model_arch a);
/* From a Hugging Face class name or model_type ("Qwen2ForCausalLM", "qwen2",
 * "QWenLMHeadModel"). Returns false when the name is not one lathe knows. */
bool model_arch_from_hf(const char *name, model_arch *out);

/* Where a shape came from. */
typedef enum {
    MODEL_FROM_CONFIG,    /* a config.json that was read */
    MODEL_FROM_CATALOGUE, /* the built-in catalogue */
    MODEL_FROM_GENERIC,   /* solved from a parameter count: approximate */
    MODEL_FROM_CALLER     /* filled in by the caller (tests, calibration rows) */
} model_origin;

typedef struct model_shape {
    char *name;   /* "Qwen/Qwen2-7B", or the config's _name_or_path / folder */
    char *origin_text; /* in words: "config.json at ...", "catalogue entry ... (source: ...)" */
    model_origin origin;
    model_arch arch;

    int64_t hidden;       /* hidden_size */
    int64_t intermediate; /* MLP width per projection (Qwen v1 config stores twice this) */
    int64_t layers;       /* num_hidden_layers */
    int64_t heads;        /* num_attention_heads */
    int64_t kv_heads;     /* num_key_value_heads (== heads without GQA) */
    int64_t head_dim;     /* explicit, or hidden / heads */
    int64_t vocab;        /* vocab_size */
    int64_t max_positions; /* max_position_embeddings; 0 when unknown */
    double rope_theta;     /* 0 when unknown */
    bool tied_embeddings;  /* lm_head shares the token embedding */
    bool qkv_bias;         /* q, k, v projections have biases (Qwen v1/2, Llama attention_bias) */
    bool o_bias;           /* o_proj has a bias (Llama attention_bias) */
    bool mlp_bias;         /* gate/up/down have biases (Llama mlp_bias) */
    int norms_per_layer;   /* RMSNorms per decoder layer: 2; Gemma-2: 4 */
    bool qk_norm;          /* per-head q/k RMSNorm (Qwen3) */
} model_shape;

/* Fills the per-architecture defaults (norms, biases, tied) for arch and
 * clears the rest. Names are left NULL. */
void model_shape_init(model_shape *m, model_arch arch);
void model_shape_free(model_shape *m);
/* A deep copy. */
void model_shape_copy(model_shape *dst, const model_shape *src);
/* Checks that the dimensions are positive, consistent and small enough to
 * count without overflow; adds one diag per problem (file may be NULL).
 * Returns true when the shape is usable. */
bool model_shape_check(const model_shape *m, const char *file, diag_list *d);

/* ---- Hugging Face config.json ---- */
/* Reads PATH (a folder holding config.json, or the file). Errors name the
 * file, the field, what was expected and what was found. Returns true and
 * fills out (origin MODEL_FROM_CONFIG) on success; out must be freed with
 * model_shape_free either way. */
bool model_read_config(const char *path, model_shape *out, diag_list *d);
/* The same for JSON text already in memory; name is used in messages. */
bool model_parse_config(const char *name, const char *json, size_t len, model_shape *out,
                        diag_list *d);

/* ---- catalogue ---- */
/* One built-in entry. intermediate is per projection. */
typedef struct model_catalog_entry {
    const char *id;   /* Hugging Face id, "Qwen/Qwen2-7B" */
    model_arch arch;
    int64_t hidden, intermediate, layers, heads, kv_heads;
    int64_t head_dim; /* 0 = hidden / heads */
    int64_t vocab, max_positions;
    double rope_theta;
    bool tied_embeddings;
    uint64_t param_count; /* the exact count the source states or derives */
    const char *source;   /* where the dimensions come from */
} model_catalog_entry;

/* The generated table (model_catalog_gen.c, from tests/ref/data/model_configs.json). */
extern const model_catalog_entry model_catalog_generated[];
extern const size_t model_catalog_generated_len;
/* Shapes not in model_configs.json (memory-calibration.md "Architecture sources"). */
extern const model_catalog_entry model_catalog_extra[];
extern const size_t model_catalog_extra_len;

/* The lookup key of a model name: lower case, no organisation, no "meta-"
 * prefix, '_' read as '.', and without the style words (instruct, chat, it,
 * hf, base, int4, ...) and date tokens ("2507"). With keep_version the
 * version tokens ("v0.1", "v14.1") stay. Writes at most outsz bytes. */
void model_catalog_key(const char *name, bool keep_version, char *out, size_t outsz);
/* Finds name in the catalogue: exact id, then exact name without the
 * organisation, then the key with versions, then the key without. Returns
 * NULL when nothing matches. */
const model_catalog_entry *model_catalog_find(const char *name);
/* The entry's shape (origin MODEL_FROM_CATALOGUE). */
void model_shape_from_catalog(const model_catalog_entry *e, model_shape *out);
/* Every catalogue id (generated then extra), for suggestions and listings. */
size_t model_catalog_count(void);
const model_catalog_entry *model_catalog_at(size_t i);

/* ---- generic shape ---- */
/* A Llama-like shape (head_dim 128, MLP 2.6875 x hidden, 32,000 tokens,
 * about 128 hidden units per layer) whose parameter count is close to
 * params. Fails for counts below 10M or above 10T. */
bool model_generic_shape(double params, model_shape *out);
/* Reads a size token out of a name ("Qwen1.5-7B-Chat" -> 7e9,
 * "SmolLM-135M" -> 1.35e8). Returns false when there is none. */
bool model_size_from_name(const char *name, double *params);

/* ---- resolution ---- */
/* path (a config.json or its folder) when given and present; else name in
 * the catalogue; else a generic shape from params, or from a size in the
 * name. The shape's origin / origin_text say which was used. Problems go to
 * d (a missing path is a warning when a name or count can stand in).
 * Returns false when nothing gave a shape. */
bool model_resolve(const char *path, const char *name, double params, model_shape *out,
                   diag_list *d);

/* ---- parameter counts ---- */
typedef struct model_params {
    uint64_t total;
    uint64_t embedding;      /* vocab x hidden */
    uint64_t lm_head;        /* 0 when tied */
    uint64_t final_norm;
    uint64_t per_layer;      /* everything in one decoder layer */
    uint64_t per_layer_linear; /* weights of the attention and MLP projections */
    uint64_t per_layer_attn; /* q, k, v, o weights and biases */
    uint64_t per_layer_mlp;  /* gate, up, down (+ biases) */
    uint64_t per_layer_norm; /* RMSNorm weights (incl. q/k norms) */
    uint64_t layers;         /* layers x per_layer */
    uint64_t linear;         /* layers x per_layer_linear: what weight quantisation covers */
} model_params;

/* Exact counts from the shape. */
void model_count_params(const model_shape *m, model_params *out);

/* ---- adaptable modules and LoRA ---- */
/* What a linear module computes, in Llama terms. A fused module serves
 * several roles. */
enum {
    MODEL_ROLE_Q = 1u << 0,
    MODEL_ROLE_K = 1u << 1,
    MODEL_ROLE_V = 1u << 2,
    MODEL_ROLE_O = 1u << 3,
    MODEL_ROLE_GATE = 1u << 4,
    MODEL_ROLE_UP = 1u << 5,
    MODEL_ROLE_DOWN = 1u << 6,
    MODEL_ROLE_LM_HEAD = 1u << 7,
    MODEL_ROLE_EMBED = 1u << 8 /* the token embedding (PEFT LoRA on nn.Embedding) */
};
#define MODEL_ROLES_ATTN (MODEL_ROLE_Q | MODEL_ROLE_K | MODEL_ROLE_V | MODEL_ROLE_O)
#define MODEL_ROLES_MLP (MODEL_ROLE_GATE | MODEL_ROLE_UP | MODEL_ROLE_DOWN)
#define MODEL_ROLES_ALL_LINEAR (MODEL_ROLES_ATTN | MODEL_ROLES_MLP) /* PEFT "all-linear" */

typedef struct model_module {
    const char *name; /* PEFT target name: "q_proj", "qkv_proj", "c_attn", "wqkv", "lm_head", "embed_tokens" */
    unsigned roles;   /* MODEL_ROLE_* it computes */
    int64_t in, out;  /* one matrix: out x in */
    bool per_layer;   /* false for the embedding and the lm_head (one per model) */
} model_module;

#define MODEL_MAX_MODULES 9
/* The architecture's adaptable modules: the layers' projections, then the
 * embedding (in = vocab, out = hidden) and the lm_head. Returns the count. */
size_t model_modules(const model_shape *m, model_module out[MODEL_MAX_MODULES]);
/* True when the model has a module of that name (PEFT target spelling, or
 * "all-linear"). The planner rejects targets for which this is false. */
bool model_has_module(const model_shape *m, const char *name);
/* Translates target names ("q_proj", "c_attn", "all-linear", "lm_head",
 * "embed_tokens") into
 * MODEL_ROLE_* bits. Unknown names add an error to d (with field as its path
 * and a suggestion: the nearest name, or the fused module that holds it).
 * Returns false on any error. */
bool model_targets_from_names(const model_shape *m, const char *const *names, size_t n,
                              const char *field, unsigned *roles, diag_list *d);
/* Writes the canonical name list of roles for this model ("q_proj,v_proj",
 * "c_attn", "all-linear", "all-linear,lm_head"). */
void model_targets_format(const model_shape *m, unsigned roles, sb *out);

typedef struct model_lora_count {
    uint64_t total;          /* trainable parameters */
    uint64_t per_layer;      /* in one decoder layer */
    uint64_t lm_head;        /* the lm_head adapter, if adapted */
    uint64_t embedding;      /* the embedding adapter, if adapted: r x (vocab + hidden) */
    uint64_t magnitude;      /* DoRA magnitude vectors (included in total) */
    unsigned matrices_per_layer; /* adapted matrices per layer */
    int64_t max_in, max_out; /* largest adapted matrix, for transient buffers */
} model_lora_count;

/* LoRA: r x (in + out) per adapted matrix per layer (+ lm_head and embedding once); a
 * fused module is adapted as one matrix when any of its roles is asked for.
 * DoRA adds the magnitude vector (out) per adapted matrix. */
void model_lora_params(const model_shape *m, unsigned roles, int rank, bool dora,
                       model_lora_count *out);

#endif
