/* hf.h: Hugging Face file formats, what the `hf` part offers.
 *
 *   - dtypes:       F32 / F16 / BF16 and conversion to fp32 (dtype.c)
 *   - safetensors:  memory-mapped reader (one file or shards with an index)
 *                   and an atomic writer (safetensors.c)
 *   - config:       the config.json of Llama 2/3, Mistral, Qwen2/2.5, Qwen3
 *                   as the model (lib/nn) reads it: tr_config, read, written
 *                   back, parameter count (config.c)
 *
 * This part is the bottom of the model's stack: it depends on base only, and
 * lib/nn (the model), lib/train (the trainer) and serving read their files
 * through it. The names keep the tr_ / st_ prefixes they had inside
 * lib/train. (lib/model reads config.json on its own, for the catalogue and
 * the estimator; this reader is the model's and the trainer's.)
 * PEFT adapter folders are the model's (lib/nn: tr_model_load_adapter).
 *
 * Errors: functions that can fail return false (or NULL) and write a message
 * naming the file, the field and the fix into err[errsz].
 * Nothing here keeps global mutable state.
 */
#ifndef LATHE_HF_H
#define LATHE_HF_H

#include "base/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ======================================================================
 * dtypes
 * ====================================================================== */
typedef enum {
    TR_F32, TR_F16, TR_BF16, TR_F64, TR_I64, TR_I32, TR_I16, TR_I8, TR_U8, TR_BOOL,
    TR_DTYPE_COUNT
} tr_dtype;

/* "F32", "BF16", ... as safetensors spells them. */
const char *tr_dtype_name(tr_dtype t);
/* Parses a safetensors dtype name; false when unknown. */
bool tr_dtype_parse(const char *s, tr_dtype *out);
/* Bytes per element. */
size_t tr_dtype_size(tr_dtype t);
/* True for the dtypes a model's weights may have (F32, F16, BF16). */
bool tr_dtype_is_float(tr_dtype t);
/* Scalar conversions (round to nearest even on the way down). */
float tr_bf16_to_f32(uint16_t h);
uint16_t tr_f32_to_bf16(float f);
float tr_f16_to_f32(uint16_t h);
uint16_t tr_f32_to_f16(float f);
/* dst[0..n) = src converted to fp32; src may be unaligned. t is a float dtype. */
void tr_to_f32(float *dst, const void *src, tr_dtype t, size_t n);
/* dst (of dtype t) = src; t is a float dtype. */
void tr_from_f32(void *dst, const float *src, tr_dtype t, size_t n);

/* ======================================================================
 * safetensors
 * ====================================================================== */
#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */

typedef struct st_tensor {
    char *name;
    tr_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    const void *data; /* inside the mapping; aligned to the element size */
    size_t nbytes;
    int file;         /* index into the archive's files */
} st_tensor;

typedef struct st_archive {
    st_tensor *tensors; /* sorted by name */
    size_t n;
    struct st_mapping {
        char *path;
        void *base;   /* mmap'd file, or a heap copy when the data was unaligned */
        void *alloc;  /* the heap block holding the copy (NULL when mapped) */
        size_t len;
        bool mapped;
    } *files;
    size_t n_files;
    char *metadata_json; /* "__metadata__" of the first file as JSON, or NULL */
} st_archive;

/* Opens a .safetensors file, or a model folder (model.safetensors.index.json
 * with its shards, else model.safetensors). Validates every header strictly:
 * JSON object, known dtypes, shapes, contiguous in-bounds offsets without
 * holes or overlaps, no duplicate names. */
bool st_open(st_archive *a, const char *path, char *err, size_t errsz);
/* Parses one safetensors file held in memory (for tests and the fuzzer).
 * The archive borrows buf; st_close does not free it. */
bool st_parse_buffer(st_archive *a, const void *buf, size_t len, const char *label,
                     char *err, size_t errsz);
void st_close(st_archive *a);
/* The tensor of that name, or NULL. */
const st_tensor *st_find(const st_archive *a, const char *name);

/* Writer: collect tensors (data is copied), then write atomically. Tensors
 * are written in name order after "__metadata__" ({"format":"pt"}), compact
 * JSON, header padded with spaces to a multiple of 8, as PEFT writes them. */
typedef struct st_writer {
    struct st_wtensor {
        char *name;
        tr_dtype dtype;
        int ndim;
        int64_t shape[ST_MAX_DIMS];
        void *data;   /* a copy, or NULL when fill produces the bytes at save time */
        size_t nbytes;
        void (*fill)(void *ud, const char *name, void *dst);
        void *fill_ud;
    } *items;
    size_t n, cap;
} st_writer;

void st_writer_init(st_writer *w);
void st_writer_free(st_writer *w);
/* Adds a tensor; data holds numel * dtype size bytes. */
void st_writer_add(st_writer *w, const char *name, tr_dtype dtype, int ndim,
                   const int64_t *shape, const void *data);
/* Adds an fp32 tensor converted to dtype. */
void st_writer_add_f32(st_writer *w, const char *name, tr_dtype dtype, int ndim,
                       const int64_t *shape, const float *data);
/* Adds a tensor whose bytes fill() writes into dst when the file is saved
 * (so a large model never has to sit in memory whole). */
void st_writer_add_lazy(st_writer *w, const char *name, tr_dtype dtype, int ndim,
                        const int64_t *shape, void (*fill)(void *ud, const char *name, void *dst),
                        void *ud);
/* Writes the file tensor by tensor (temp file, fsync, rename, fsync of the
 * folder). Returns 0 or an errno. */
int st_writer_save(const st_writer *w, const char *path);
/* The serialised bytes (header + data); caller frees. */
void *st_writer_serialize(const st_writer *w, size_t *len);

/* ======================================================================
 * model configuration (Hugging Face config.json)
 * ====================================================================== */
typedef enum { TR_ARCH_LLAMA, TR_ARCH_MISTRAL, TR_ARCH_QWEN2, TR_ARCH_QWEN3 } tr_arch;
typedef enum { TR_ROPE_NONE, TR_ROPE_LLAMA3, TR_ROPE_LINEAR } tr_rope_kind;

typedef struct tr_config {
    tr_arch arch;
    char model_type[16];   /* "llama", "mistral", "qwen2", "qwen3" */
    char architecture[48]; /* "LlamaForCausalLM", ... */
    int vocab;             /* vocab_size */
    int dim;               /* hidden_size */
    int hidden;            /* intermediate_size */
    int n_layers, n_heads, n_kv_heads, head_dim;
    int max_pos;           /* max_position_embeddings */
    double rms_eps, rope_theta;
    tr_rope_kind rope_kind;
    double rope_factor, rope_low_freq, rope_high_freq; /* llama3 / linear */
    int rope_orig_max;     /* original_max_position_embeddings (llama3) */
    bool tie_embeddings;
    bool qkv_bias;         /* q/k/v projections have a bias (Qwen2, Llama attention_bias) */
    bool o_bias;           /* o_proj has a bias (Llama attention_bias) */
    bool mlp_bias;         /* gate/up/down have a bias (Llama mlp_bias) */
    bool qk_norm;          /* per-head RMSNorm of q and k before RoPE (Qwen3) */
    int sliding_window;    /* 0 = full causal attention */
    int bos_id, eos_id;    /* -1 when absent */
    tr_dtype dtype;        /* torch_dtype (F32 when absent) */
    double init_std;       /* initializer_range: std of init-model's random weights (0.02) */
} tr_config;

/* Parses config.json text; `file` names it in messages. */
bool tr_config_parse(tr_config *c, const char *json, size_t len, const char *file,
                     char *err, size_t errsz);
/* Reads DIR/config.json (or a config.json path). */
bool tr_config_load(tr_config *c, const char *path, char *err, size_t errsz);
/* config.json text as Hugging Face writes it for this config; caller frees. */
char *tr_config_to_json(const tr_config *c);
/* Number of parameters of the model the config describes. */
int64_t tr_config_param_count(const tr_config *c);

#endif
