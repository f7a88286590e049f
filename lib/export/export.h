/* export.h: what the `export` part offers: a lathe model (with a LoRA
 * adapter merged in) written in llama.cpp's GGUF format, so llama.cpp and
 * Ollama run what lathe trained.
 *
 *   - GGUF writer:  metadata key/values of every GGUF type, tensors whose
 *                   bytes are produced when the file is written, alignment,
 *                   an atomic write (temp file, fsync, rename)
 *                   (gguf_write.c), after ggml's docs/gguf.md, version 3
 *   - exporter:     the model read through lib/nn, the adapter merged
 *                   (W + scale * B A in fp32), Hugging Face names mapped to
 *                   llama.cpp's, q/k rows permuted for the `llama`
 *                   architecture, the tokenizer's vocabulary, merges and
 *                   special ids from lib/tok (export_gguf.c)
 *
 * docs/export.md describes the file that is written and the mapping.
 * Errors: functions that can fail return false and write a message naming
 * the file, the field and the fix into err[errsz]. No global state.
 */
#ifndef LATHE_EXPORT_H
#define LATHE_EXPORT_H

#include "hf/hf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ======================================================================
 * GGUF writer
 * ====================================================================== */
#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian uint32 */
#define GGUF_VERSION 3u
#define GGUF_DEFAULT_ALIGNMENT 32u

/* Metadata value types (gguf_metadata_value_type). */
typedef enum {
    GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12, GGUF_TYPE_COUNT
} gguf_type;

/* The tensor types the writer emits (ggml_type values). */
typedef enum { GGUF_GGML_F32 = 0, GGUF_GGML_F16 = 1 } gguf_ggml_type;

/* general.file_type values (llama_ftype) */
enum { GGUF_FILE_ALL_F32 = 0, GGUF_FILE_MOSTLY_F16 = 1 };

/* Produces the bytes of tensor `index` (nbytes of them) into dst. */
typedef void (*gguf_fill_fn)(void *ud, size_t index, void *dst);

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

/* Key/values, written in the order they are added. A key given twice is
 * refused (false); keys are non-empty and at most 65535 bytes. Setting
 * "general.alignment" (u32, a power of two) changes the alignment. */
bool gguf_add_u8(gguf_writer *w, const char *key, uint8_t v);
bool gguf_add_i8(gguf_writer *w, const char *key, int8_t v);
bool gguf_add_u16(gguf_writer *w, const char *key, uint16_t v);
bool gguf_add_i16(gguf_writer *w, const char *key, int16_t v);
bool gguf_add_u32(gguf_writer *w, const char *key, uint32_t v);
bool gguf_add_i32(gguf_writer *w, const char *key, int32_t v);
bool gguf_add_u64(gguf_writer *w, const char *key, uint64_t v);
bool gguf_add_i64(gguf_writer *w, const char *key, int64_t v);
bool gguf_add_f32(gguf_writer *w, const char *key, float v);
bool gguf_add_f64(gguf_writer *w, const char *key, double v);
bool gguf_add_bool(gguf_writer *w, const char *key, bool v);
bool gguf_add_str(gguf_writer *w, const char *key, const char *v);
/* Arrays of scalars: n elements of type t (a scalar type, not STRING or
 * ARRAY), little-endian, as in memory on this machine. */
bool gguf_add_arr(gguf_writer *w, const char *key, gguf_type t, const void *v, size_t n);
/* An array of n strings. */
bool gguf_add_arr_str(gguf_writer *w, const char *key, const char *const *v, size_t n);

/* Tensors: ne[0] is the innermost dimension (a row-major [out, in] matrix
 * has ne = {in, out}); 1..4 dimensions; names at most 63 bytes, unique.
 * gguf_add_tensor copies nbytes of data; gguf_add_tensor_lazy calls fill
 * when the file is written, so a large model never sits in memory whole. */
bool gguf_add_tensor(gguf_writer *w, const char *name, gguf_ggml_type type, int ndim,
                     const uint64_t *ne, const void *data);
bool gguf_add_tensor_lazy(gguf_writer *w, const char *name, gguf_ggml_type type, int ndim,
                          const uint64_t *ne, gguf_fill_fn fill, void *ud);
/* Bytes of a tensor of that type and shape. */
size_t gguf_tensor_nbytes(gguf_ggml_type type, int ndim, const uint64_t *ne);

/* Writes the file: header, key/values, tensor infos, padding, data, each
 * tensor at an aligned offset; through a temp file renamed into place. */
bool gguf_write(const gguf_writer *w, const char *path, char *err, size_t errsz);

/* ======================================================================
 * exporter
 * ====================================================================== */
typedef struct ex_gguf_opts {
    const char *model_dir;   /* config.json + safetensors */
    const char *adapter_dir; /* PEFT adapter folder to merge, or NULL */
    const char *tokenizer;   /* tokenizer.json or its folder; NULL = model_dir's */
    bool no_tokenizer;       /* write no tokenizer keys (llama.cpp needs them) */
    const char *pre;         /* tokenizer.ggml.pre to write; NULL = detect it */
    tr_dtype dtype;          /* TR_F32 or TR_F16 (2-D weights; norms stay F32) */
    const char *name;        /* general.name; NULL = the model folder's name */
} ex_gguf_opts;

/* What was written, for messages and tests. */
typedef struct ex_gguf_summary {
    char arch[16];  /* "llama", "qwen2", "qwen3" */
    char pre[32];   /* tokenizer.ggml.pre ("" without a tokenizer) */
    size_t n_tensors, n_tokens, n_merges;
    bool merged_adapter;
    bool write_failed; /* the inputs were fine; writing out_path failed */
} ex_gguf_summary;

/* Exports o->model_dir to out_path. summary may be NULL. */
bool ex_export_gguf(const ex_gguf_opts *o, const char *out_path, ex_gguf_summary *summary,
                    char *err, size_t errsz);

/* llama.cpp's name of an architecture ("llama" for Llama and Mistral). */
const char *ex_gguf_arch_name(tr_arch a);

/* The row permutation llama.cpp's `llama` graph needs for q_proj / k_proj:
 * Hugging Face keeps each head's rotary pairs as halves (i, i + hd/2),
 * llama.cpp as neighbours (2i, 2i+1). dst row h*hd + 2i + j = src row
 * h*hd + j*hd/2 + i, for rows = n_head * hd rows of cols floats (cols 1
 * for a bias). dst and src do not overlap. */
void ex_permute_rope_rows(float *dst, const float *src, int n_head, int rows, int cols);

/* tokenizer.ggml.pre for a pre-tokenizer: the Split regex of tokenizer.json
 * (NULL when there is none) and ByteLevel's use_regex. NULL when unknown. */
const char *ex_gguf_pre_for_regex(const char *split_regex, bool bytelevel_regex);

#endif
