/* nn.h: the model, what the `nn` part offers: one Llama-family model for
 * training and serving.
 *
 *   - backend:      the heavy ops (matmuls) behind one struct of function
 *                   pointers, the compute-backend interface; the CPU one uses
 *                   OpenBLAS (backend_cpu.c)
 *   - layers:       *_forward / *_backward pairs in the llm.c style (ops.c)
 *   - rng:          one explicit xoshiro256** state (rng.c)
 *   - model:        a Llama-family model over a memory-mapped base, LoRA
 *                   layers or full fine-tuning parameters, forward, loss +
 *                   backward with optional gradient checkpointing, the KV
 *                   cache and decoding, PEFT adapter folders read (and their
 *                   tensors and adapter_config.json written) (model.c,
 *                   model_fwd.c)
 *   - adapters:     LoRA adapters apart from the model, checked against it,
 *                   for serving many over one base (adapter.c)
 *   - batch:        the inference pass over many sequences at once, paged
 *                   KV cache, rows batch invariant (model_batch.c)
 *   - init-model:   random Hugging Face models (init_model.c)
 *   - generate:     sampling with a KV cache (generate.c)
 *
 * Dependencies: base and hf (the model reads config.json and safetensors,
 * and init-model writes them), never train: the trainer (lib/train) and
 * serving build on this part. It works on token ids and does not need the
 * tokenizer (lib/tok); callers encode and decode. Boundaries, as decided
 * when lib/train was split:
 *   - generate.c is here: sampling needs only logits and the rng, so serving
 *     has it without the trainer.
 *   - init_model.c is here, not in hf: it needs the model's naming of the
 *     projections (tr_proj_name) and the rng; it writes through hf.
 *   - rng.c is here: LoRA initialisation and sampling use it; the trainer's
 *     data order and checkpoints use it from here.
 *   - tr_mkdir_p (init_model.c) stays here with its name; the trainer's
 *     checkpoints use it.
 *   - Writing a whole adapter folder with a checkpoint (tr_save_adapter_dir)
 *     is the trainer's (lib/train/checkpoint.c); loading one
 *     (tr_model_load_adapter) is here, for generate and serving.
 * The tr_ prefix is kept from lib/train, so the names are the same as before.
 *
 * Errors: functions that can fail return false (or NULL) and write a message
 * naming the file, the field and the fix into err[errsz].
 * Nothing here keeps global mutable state; every buffer belongs to a struct
 * its caller owns and frees with the matching *_free.
 */
#ifndef LATHE_NN_H
#define LATHE_NN_H

#include "base/base.h"
#include "hf/hf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ======================================================================
 * backend: the heavy operations
 * ====================================================================== */
/* A backend implements the matrix products of the model. Weights ("w") may be
 * F32, F16 or BF16 and are converted to fp32 tile by tile inside the product;
 * everything else is fp32, row-major. A CUDA backend implements the same
 * struct. `self` is the backend itself (for its workspace). */
typedef struct tr_backend tr_backend;
struct tr_backend {
    const char *name;
    /* y[n,out] = beta*y + x[n,in] . W[out,in]^T (+ bias[out] when not NULL) */
    void (*linear_fwd)(tr_backend *self, float *y, const float *x, const void *w,
                       tr_dtype wt, const float *bias, int n, int in, int out, float beta);
    /* dx[n,in] = beta*dx + dy[n,out] . W[out,in] */
    void (*linear_bwd_x)(tr_backend *self, float *dx, const float *dy, const void *w,
                         tr_dtype wt, int n, int in, int out, float beta);
    /* dw[out,in] += dy[n,out]^T . x[n,in] (fp32 weights only) */
    void (*linear_bwd_w)(tr_backend *self, float *dw, const float *dy, const float *x,
                         int n, int in, int out);
    /* linear_fwd with batch invariance: each row of y has the same bits
     * whatever n and whatever the other rows, so a sequence's numbers do not
     * depend on the batch it runs in (serving: tr_model_forward_batch).
     * linear_fwd itself promises no such thing (BLAS kernels sum a row by
     * where it falls in the product). */
    void (*linear_fwd_fixed)(tr_backend *self, float *y, const float *x, const void *w,
                             tr_dtype wt, const float *bias, int n, int in, int out);
    /* c = alpha op(a) op(b) + beta c, fp32, row-major with leading dimensions */
    void (*gemm)(tr_backend *self, bool trans_a, bool trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);
    void (*destroy)(tr_backend *self);
    int threads;
    void *impl; /* the backend's own state (workspace) */
};

/* A CPU backend using `threads` threads (0 = OpenMP's default). */
tr_backend *tr_backend_cpu_create(int threads);
/* Sets the thread count of OpenMP and OpenBLAS. */
void tr_set_threads(int threads);
/* OpenMP threads that spin between parallel regions (libgomp's default)
 * halve training speed on a loaded machine (measured: docs/trainer.md).
 * libgomp reads OMP_WAIT_POLICY only at start-up, so when it is not set this
 * sets it to "passive" and re-executes the program (/proc/self/exe, same
 * pid) with argv. Returns only when nothing was done or exec failed. */
void tr_reexec_with_passive_wait(char **argv);

/* ======================================================================
 * layers (ops.c): plain functions, shapes in comments, fp32
 * ====================================================================== */
/* out[T,D] = table[ids[t]] (table of any float dtype, [V,D]) */
void embedding_forward(float *out, const int32_t *ids, int T, const void *table,
                       tr_dtype dt, int D);
/* dtable[V,D] += scatter of dout[T,D] */
void embedding_backward(float *dtable, const float *dout, const int32_t *ids, int T, int D);
/* out[T,D] = x / rms(x) * w; rstd[T] saved for backward */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int D,
                     float eps);
/* dx[T,D] += ..., dw[D] += ... (dw may be NULL) */
void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int T, int D);
/* RoPE tables: cos/sin[T, hd/2] for positions start..start+T-1, or for
 * positions pos[T] when pos is not NULL (packed records restart at 0) */
void rope_tables(float *cosv, float *sinv, const tr_config *c, int start, const int32_t *pos,
                 int T);
/* x[T,H,hd] rotated in place (rotate_half layout, as Hugging Face) */
void rope_forward(float *x, const float *cosv, const float *sinv, int T, int H, int hd);
/* dx[T,H,hd] rotated back in place */
void rope_backward(float *dx, const float *cosv, const float *sinv, int T, int H, int hd);
/* Causal attention with grouped-query heads. q[T,Hq*hd] for positions
 * start..start+T-1, k/v[start+T, Hkv*hd] (the whole context), out[T,Hq*hd],
 * att[Hq,T,start+T] the probabilities (kept for backward). window 0 = none.
 * pos (start 0 only; NULL = one record): pos[i] is row i's position in its
 * record, so row i sees keys i - pos[i] .. i only (packed records never
 * attend to each other). The backward needs no pos: masked
 * probabilities are 0. */
void attention_forward(tr_backend *be, float *out, float *att, const float *q, const float *k,
                       const float *v, int T, int start, const int32_t *pos, int Hq, int Hkv,
                       int hd, int window);
/* dq[T,Hq*hd], dk/dv[T,Hkv*hd] += ... (start 0, training); scratch[T*T] */
void attention_backward(tr_backend *be, float *dq, float *dk, float *dv, float *datt,
                        const float *dout, const float *att, const float *q, const float *k,
                        const float *v, int T, int Hq, int Hkv, int hd);
/* h[T,F] = silu(g) * u */
void swiglu_forward(float *h, const float *g, const float *u, size_t n);
/* dg, du [T,F] = ... (overwritten) */
void swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u,
                     size_t n);
/* Cross-entropy of one row of logits[V] against target; returns the loss and
 * overwrites logits with d loss / d logits * scale. */
float crossentropy_row(float *logits, int V, int target, float scale);

/* ======================================================================
 * rng: xoshiro256** with an explicit state
 * ====================================================================== */
typedef rng_state tr_rng; /* base.h's generator; its state is saved in checkpoints */

void tr_rng_seed(tr_rng *r, uint64_t seed);
uint64_t tr_rng_next(tr_rng *r);
/* Uniform in [0, 1) with 24 random bits. */
float tr_rng_uniform(tr_rng *r);
/* Standard normal (Box-Muller). */
float tr_rng_normal(tr_rng *r);
/* A well-mixed 64-bit hash of (a, b) (splitmix64 finaliser): stateless
 * randomness for dropout masks that recomputation must reproduce. */
uint64_t tr_hash64(uint64_t a, uint64_t b);

/* ======================================================================
 * model
 * ====================================================================== */
/* The seven projections LoRA may adapt, in PEFT's naming. */
typedef enum { TR_Q, TR_K, TR_V, TR_O, TR_GATE, TR_UP, TR_DOWN, TR_NPROJ } tr_proj;
/* "q_proj", ..., "down_proj" */
const char *tr_proj_name(tr_proj p);
/* "self_attn" or "mlp" */
const char *tr_proj_block(tr_proj p);
/* Parses "q_proj,v_proj" / "all-linear" / "q,k,v,o" into a bitmask of
 * (1 << tr_proj); false with a message on an unknown name. */
bool tr_targets_parse(const char *s, unsigned *mask, char *err, size_t errsz);

typedef enum { TR_MODE_LORA, TR_MODE_FULL } tr_mode;

typedef struct tr_lora_opts {
    int rank;
    float alpha;
    float dropout;
    bool rslora;     /* scaling alpha/sqrt(r) instead of alpha/r */
    unsigned targets; /* bitmask of 1 << tr_proj */
} tr_lora_opts;

/* A frozen or trainable weight: a view into the mapping (any float dtype) or
 * into the trainable parameter buffer (fp32). */
typedef struct tr_weight {
    const void *data;
    tr_dtype dtype;
    float *grad; /* NULL when frozen */
} tr_weight;

/* One linear layer y = x W^T + b + scale * B A dropout(x). */
typedef struct tr_linear {
    tr_weight w;           /* [out, in] */
    float *bias, *dbias;   /* [out] or NULL */
    int in, out;
    float *lora_a, *lora_b;   /* [r, in], [out, r]; NULL without LoRA */
    float *dlora_a, *dlora_b;
    int r;
    float scale;
} tr_linear;

typedef struct tr_layer {
    tr_linear proj[TR_NPROJ];
    float *ln1, *ln2, *dln1, *dln2; /* [dim] */
    float *q_norm, *k_norm, *dq_norm, *dk_norm; /* [head_dim] (Qwen3) */
} tr_layer;

/* One trainable tensor inside the parameter buffer. */
typedef struct tr_param {
    char *name;   /* PEFT / Hugging Face name */
    int ndim;
    int64_t shape[2];
    size_t offset; /* in floats */
    size_t numel;
    bool decay;    /* weight decay applies (not to norms and biases) */
} tr_param;

typedef struct tr_model_opts {
    tr_mode mode;
    tr_lora_opts lora;
    bool grad_checkpoint; /* recompute each layer in backward */
    uint64_t seed;        /* LoRA initialisation */
} tr_model_opts;

typedef struct tr_model {
    tr_config cfg;
    tr_model_opts opts;
    st_archive st;          /* the memory-mapped base */
    char *dir;
    tr_weight embed;        /* [vocab, dim] */
    tr_weight lm_head;      /* [vocab, dim] (= embed when tied) */
    float *final_norm, *dfinal_norm;
    tr_layer *layers;
    /* small frozen fp32 copies (norms, biases) in LoRA mode */
    float *frozen;
    /* trainable parameters, their gradients */
    tr_param *params;
    size_t n_params;
    float *param_data, *grad_data;
    size_t n_floats;
    tr_backend *be;
    struct tr_ws *ws;       /* activation workspace, grown on demand (model_fwd.c) */
    struct tr_bws *bws;     /* inference workspace, grown on demand (model_batch.c) */
} tr_model;

/* Loads config.json and the safetensors of dir, maps the base weights and
 * creates the trainable parameters (LoRA A Kaiming-uniform a=sqrt(5) and B
 * zero as PEFT does, or fp32 copies of everything in full mode). */
bool tr_model_load(tr_model *m, const char *dir, const tr_model_opts *o, tr_backend *be,
                   char *err, size_t errsz);
void tr_model_free(tr_model *m);
/* Frees the activation workspace (it is regrown when needed). */
void tr_model_ws_free(tr_model *m);
/* Bytes of the activation workspace now allocated. */
size_t tr_model_ws_bytes(const tr_model *m);
/* The parameter of that name, or NULL. */
const tr_param *tr_model_param(const tr_model *m, const char *name);
/* Loads trainable values from a safetensors file written by
 * tr_model_save_params (a PEFT adapter in LoRA mode). */
bool tr_model_load_params(tr_model *m, const char *path, char *err, size_t errsz);
/* Writes the trainable parameters: in LoRA mode adapter_model.safetensors
 * (PEFT names), in full mode model.safetensors (Hugging Face names). */
int tr_model_save_params(const tr_model *m, const char *path, tr_dtype dtype);
/* adapter_config.json as PEFT 0.18 writes it; caller frees. */
char *tr_adapter_config_json(const tr_model *m, const char *base_model_path);
/* Loads an adapter folder (adapter_config.json + adapter_model.safetensors)
 * into a model loaded with the same rank and targets; sets them from the
 * adapter's config when m was loaded without LoRA (for generate). */
bool tr_model_load_adapter(tr_model *m, const char *dir, char *err, size_t errsz);

/* Logits of a whole sequence: logits[T, vocab]. */
void tr_model_logits(tr_model *m, const int32_t *ids, int T, float *logits);

/* Logits of a sequence of packed records: pos[T] is each token's position
 * in its record (0 where a record begins); records do not see each other. */
void tr_model_logits_packed(tr_model *m, const int32_t *ids, const int32_t *pos, int T,
                            float *logits);

/* Loss and gradients of one sequence. The loss is the sum over targets j
 * (mask[j] != 0, j >= 1) of -log p(ids[j] | ids[<j]); gradients of
 * loss * scale are added to grad_data. dropout_seed picks the dropout masks.
 * Returns the summed loss; *n_targets gets the count. */
double tr_model_loss_backward(tr_model *m, const int32_t *ids, const uint8_t *mask, int T,
                              float scale, uint64_t dropout_seed, int *n_targets);
/* The same for a sequence of packed records (pos as for
 * tr_model_logits_packed; NULL = one record). */
double tr_model_loss_backward_packed(tr_model *m, const int32_t *ids, const int32_t *pos,
                                     const uint8_t *mask, int T, float scale,
                                     uint64_t dropout_seed, int *n_targets);
/* The same loss without gradients (evaluation). */
double tr_model_loss(tr_model *m, const int32_t *ids, const uint8_t *mask, int T,
                     int *n_targets);

/* KV cache for decoding (one sequence; tr_model_decode runs it through
 * tr_model_forward_batch as a batch of one, so its numbers are those of a
 * sequence in any batch). */
typedef struct tr_kv_cache {
    float *k, *v;  /* [layers, max_len, kv_dim] */
    int max_len, len;
} tr_kv_cache;

void tr_kv_cache_init(tr_kv_cache *c, const tr_model *m, int max_len);
void tr_kv_cache_free(tr_kv_cache *c);
/* Runs ids[0..T) at positions c->len.. and returns the logits of the last one
 * (logits[vocab]); appends to the cache. False when the cache is full. */
bool tr_model_decode(tr_model *m, tr_kv_cache *c, const int32_t *ids, int T, float *logits);

/* ======================================================================
 * adapters (adapter.c): LoRA adapters apart from the model, for serving
 * ====================================================================== */
/* One projection's LoRA: delta y = scale * (x A^T) B^T. */
typedef struct tr_adapter_proj {
    const float *a; /* [r, in], NULL where the projection is not adapted */
    const float *b; /* [out, r] */
    int r;
    float scale;    /* alpha / r, or alpha / sqrt(r) with rslora */
} tr_adapter_proj;

typedef struct tr_adapter {
    char *dir;
    tr_lora_opts lora;      /* rank, alpha, rslora, targets from adapter_config.json */
    int n_layers;
    tr_adapter_proj *proj;  /* [n_layers * TR_NPROJ]: layer l, projection p at l * TR_NPROJ + p */
    float *data;            /* every A and B, fp32 */
    size_t n_floats;
} tr_adapter;

/* Reads r, lora_alpha, use_rslora and target_modules of an
 * adapter_config.json (PEFT's, or lathe's own tr_adapter_config_json). */
bool tr_adapter_config_read(const char *path, tr_lora_opts *lo, char *err, size_t errsz);
/* Loads a PEFT adapter folder (adapter_config.json +
 * adapter_model.safetensors; tensors named
 * base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight, with or
 * without PEFT's ".default" adapter name) for the base model m. Refused,
 * naming the file, the tensor or field, and why: a rank that is not the
 * config's r, shapes or a layer count of another base model, an unknown or
 * unlisted target, a missing or foreign tensor. */
bool tr_adapter_load(tr_adapter *a, const tr_model *m, const char *dir, char *err, size_t errsz);
void tr_adapter_free(tr_adapter *a);
/* Bytes of its weights in memory. */
size_t tr_adapter_bytes(const tr_adapter *a);

/* ======================================================================
 * batched forward (model_batch.c): many sequences in one step, for serving
 * ====================================================================== */
/* A paged KV cache: k and v hold [n_blocks, n_layers, block_len, kv_dim]
 * floats; key row j of layer l of a sequence with block table blocks[] is at
 *   k + ((size_t)blocks[j / block_len] * n_layers + l) * block_len * kv_dim
 *     + (j % block_len) * kv_dim
 * (a tr_kv_cache is the pool of one block of max_len rows). */
typedef struct tr_kv_pool {
    float *k, *v;
    int block_len;
} tr_kv_pool;

/* One sequence of a step: n new tokens at positions start..start+n-1. */
typedef struct tr_batch_seq {
    const int32_t *ids;        /* [n] */
    int n;
    int start;                 /* tokens already in its KV rows */
    const int32_t *blocks;     /* its blocks, covering positions 0..start+n-1 */
    const tr_adapter *adapter; /* NULL: the model as loaded (with its own LoRA, if any) */
    bool logits;               /* wants the logits of its last row */
} tr_batch_seq;

/* Runs a step: every row of every sequence through the model in one pass.
 * Rows are grouped by adapter; each projection is one product over all rows
 * plus, per group, its adapter's delta on the group's rows; attention is per
 * sequence over its KV rows (written here for the new positions). logits
 * gets [k, vocab], one row per sequence with logits set, in seqs order.
 * A row's numbers equal those of the same sequence run alone
 * (tr_model_decode, tr_generate), whatever the batch and however its prompt
 * was split into steps. */
void tr_model_forward_batch(tr_model *m, const tr_kv_pool *kv, const tr_batch_seq *seqs,
                            int n_seqs, float *logits);
/* Grows the inference workspace to steps of `rows` rows, `seqs` sequences
 * and contexts of max_len tokens, so later steps allocate nothing. */
void tr_model_batch_reserve(tr_model *m, int rows, int seqs, int max_len);

/* ======================================================================
 * init-model
 * ====================================================================== */
/* Preset configs: "tiny" (~0.1M), "small" (~1M), "base" (~10M), "100m".
 * false when unknown. */
bool tr_preset_config(const char *name, tr_arch arch, tr_config *c);
/* Names of the presets, NULL-terminated. */
const char *const *tr_preset_names(void);
/* Creates a folder and its missing parents (mkdir -p). */
bool tr_mkdir_p(const char *dir, char *err, size_t errsz);
/* Writes config.json and model.safetensors with random weights (normal with
 * std c->init_std, 0.02 when unset, as transformers' initializer_range;
 * norms 1, biases 0) of dtype into dir, created if needed. */
bool tr_init_model(const char *dir, const tr_config *c, tr_dtype dtype, uint64_t seed,
                   char *err, size_t errsz);

/* ======================================================================
 * generate
 * ====================================================================== */
typedef struct tr_sample_opts {
    float temperature; /* 0 = greedy */
    float top_p;       /* 1 = off */
    int max_new;
    uint64_t seed;
    int eos_id;        /* stop at it; -1 = never */
} tr_sample_opts;

/* Picks the next token from logits[V] (modified in place). */
int tr_sample(float *logits, int V, const tr_sample_opts *o, tr_rng *rng);
/* Runs the prompt and generates up to o->max_new tokens into out (capacity
 * o->max_new); returns how many. on_token (may be NULL) sees each one. */
int tr_generate(tr_model *m, const int32_t *prompt, int n_prompt, const tr_sample_opts *o,
                int32_t *out, void (*on_token)(int32_t id, void *ud), void *ud);

#endif
