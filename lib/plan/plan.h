/* plan.h: what a fine-tuning job needs and what it should run on.
 *
 *   - the GPU memory estimator: a physical model of the per-GPU peak of a
 *     LoRA / QLoRA / DoRA / full fine-tuning step, term by term (weights,
 *     adapters, gradients, optimizer states, activations, logits and loss,
 *     framework buffers), and the step's allocations replayed through a
 *     model of PyTorch's caching allocator (cachealloc.h) for the reserved
 *     and device counters (docs/estimator.md)
 *   - the seed article's formula, kept as the baseline to beat
 *   - calibration rows (shared/data/memory-calibration.jsonl schema), error
 *     metrics and the constant fit used by bench/estimator
 *   - the planner (below the planner marker)
 */
#ifndef LATHE_PLAN_H
#define LATHE_PLAN_H

#include "base/base.h"
#include "cachealloc/cachealloc.h"
#include "model/model.h"
#include "spec/spec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ==================================================================== */
/* ---- GPU memory estimator ---- */

/* Which counter the estimate stands for. A job must fit the device figure;
 * published tables quote one of the three. */
typedef enum {
    EST_COUNTER_DEVICE,    /* what nvidia-smi shows: reserved + CUDA context (+ paged states) */
    EST_COUNTER_RESERVED,  /* torch.cuda.max_memory_reserved(): allocated + allocator slack */
    EST_COUNTER_ALLOCATED  /* torch.cuda.max_memory_allocated(): live tensors only */
} est_counter;

const char *est_counter_name(est_counter c); /* "device", "reserved", "allocated" */
bool est_counter_parse(const char *s, est_counter *out);

/* The training stack. Stacks differ in how they compute the loss (the
 * largest term at long sequences and large vocabularies), in the dtype of
 * the adapters and in the optimizer step; docs/estimator.md, "Stacks",
 * gives each rule with the code it comes from. */
typedef enum {
    EST_STACK_HF,        /* Hugging Face Trainer + PEFT (also ms-swift, axolotl, TRL): the default */
    EST_STACK_TORCHTUNE, /* torchtune recipes */
    EST_STACK_LITGPT,    /* LitGPT (Lightning Fabric) */
    EST_STACK_PLAIN,     /* a hand-written PyTorch loop over a transformers model, no autocast */
    EST_STACK_UNSLOTH    /* Unsloth: Triton kernels, a fused cross entropy, checkpoints in CPU memory */
} est_stack;

const char *est_stack_name(est_stack s); /* "hf", "torchtune", "litgpt", "plain", "unsloth" */
bool est_stack_parse(const char *s, est_stack *out);

typedef struct est_input {
    const model_shape *model;
    spec_method method;       /* lora, qlora, dora or full (auto is resolved first) */
    spec_quant quant;         /* base weights: none, nf4, nf4-dq, int8, gptq4, awq4 */
    int bits;                 /* 16 (or 32) for none; 4 or 8 (gptq4 with bits 8 = 8-bit GPTQ) */
    int rank;                 /* LoRA rank */
    unsigned targets;         /* MODEL_ROLE_* adapted */
    double lora_dropout;      /* > 0: each adapted module keeps a dropout copy of its input */
    int batch;                /* micro batch per GPU */
    int seq;                  /* tokens per sample: the padded or packed length, or the cap */
    double seq_mean, seq_sd;  /* > 0: sample lengths vary (mean and standard deviation in tokens,
                                 log-normal, cut at seq) and each micro batch is padded to its
                                 longest sample; 0: every micro batch is seq tokens long (packed,
                                 or padded to the cap) */
    bool drop_long;           /* with varying lengths: samples longer than seq are left out of the
                                 dataset (ms-swift's truncation_strategy 'delete'), not cut to seq,
                                 so the lengths are the log-normal below seq */
    uint64_t replay_seed;     /* with varying lengths: the first replay's seed (0: the fixed default);
                                 the estimate is the mean of the replays from it on */
    double seq_min;           /* with varying lengths, > 0: the dataset's shortest sample (tokens);
                                 the lengths are then seq_min plus a gamma of the remaining mean and
                                 the same standard deviation (a fixed prompt template plus a text
                                 whose length has an exponential tail) instead of the log-normal */
    int grad_accum;           /* micro steps per optimizer step: gradients live across them */
    bool grad_ckpt;           /* activation (gradient) checkpointing per decoder layer */
    bool flash_attn;          /* fused attention (FlashAttention-2 / SDPA): no seq x seq scores */
    spec_precision precision; /* bf16, fp16, amp (fp32 weights + autocast), fp32 */
    spec_optimizer optimizer;
    int gpus;                 /* GPUs in the job */
    spec_strategy strategy;   /* single, ddp, fsdp, zero2, zero3 */
    int tensor_parallel;      /* 1 = none */
    int pipeline_stages;      /* 1 = none; > 1: layers split over GPUs (device_map style) */
    est_counter counter;
    double gpu_memory;        /* bytes the GPU offers (0 = unknown): caps the reserved counter */
    /* The training stack and what it implies; est_input_set_stack sets the
     * stack's defaults, which a caller may then override one by one. */
    est_stack stack;
    bool chunked_loss;        /* loss over chunks of the logits (torchtune CEWithChunkedOutputLoss, LitGPT) */
    bool compiled;            /* torch.compile fuses elementwise ops (norms, activations, the loss) */
    bool fused_optimizer;     /* fused / per-tensor optimizer step: no foreach temporaries */
    bool adapter_fp32;        /* LoRA weights in fp32 under a 16-bit model (PEFT) */
    bool logits_kept;         /* the loop keeps the model's logits alive through the backward */
    bool bf16_loss;           /* the model code takes the loss of 16-bit logits (Qwen v1, GaLore) */
    bool kbit_fp32;           /* PEFT's prepare_model_for_kbit_training: the weights a bitsandbytes
                                 base keeps unquantised (embedding, lm_head, norms) in fp32 */
    bool fused_loss;          /* the cross entropy is one kernel that keeps only a log-sum-exp per
                                 token and writes its gradient into the logits (Unsloth) */
    bool offload_checkpoints; /* the layers' checkpoints wait in CPU memory (Unsloth's
                                 use_gradient_checkpointing="unsloth") */
    bool legacy_loss;         /* transformers < 4.46: the model returns logits.float() and shifts
                                 them with a copy (later versions shift the labels and upcast in
                                 the loss function) */
    bool reset_after_load;    /* the stack calls torch.cuda.reset_peak_memory_stats() once the model
                                 is loaded (torchtune; Answer.AI's train.py before training): the
                                 counters restart from what is alive and reserved then; torchtune's
                                 distributed recipes call empty_cache() first */
    bool nf4_whole;           /* torchao < 0.2 (torchtune's pin until May 2024) quantises a matrix to
                                 NF4 in one piece, through (elements x 16) bf16 differences; 0.2
                                 works in chunks of 2^20 elements */
    bool loss_shift_copy;     /* transformers 4.46-4.48: ForCausalLMLoss upcasts the 16-bit logits
                                 and shifts the fp32 copy with .contiguous() (from 4.49 it shifts
                                 the labels instead) */
    bool ckpt_nonreentrant;   /* checkpointing runs torch.utils.checkpoint with use_reentrant=False
                                 (ms-swift 1.x patches it so): the layer's first forward records
                                 autograd's graph, so what an autograd Function keeps as a plain
                                 ctx attribute lives until the layer's backward; bitsandbytes'
                                 MatMul4Bit (to 0.43 at least) keeps its input so
                                 (`ctx.tensors = (A, B)`) */
    bool bnb_input_cast;      /* the model's 16-bit dtype is not bnb_4bit_compute_dtype (transformers
                                 forces fp16 on a bitsandbytes model loaded without torch_dtype):
                                 Linear4bit.forward's x.to(compute_dtype) makes a copy per module */
    ca_config alloc;          /* PYTORCH_CUDA_ALLOC_CONF: max_split_size, expandable_segments,
                                 roundup_power2_divisions (the capacity comes from gpu_memory) */
} est_input;

/* LoRA r16 on q_proj,v_proj, batch 1, 2048 tokens, gradient checkpointing
 * and flash attention on, bf16, AdamW, one GPU, device counter, the
 * Hugging Face stack (est_input_set_stack). */
void est_input_defaults(est_input *in, const model_shape *m);
/* Sets the stack and the details it implies (docs/estimator.md, "Stacks"):
 *   hf         PEFT >= 0.12 fp32 adapters, foreach AdamW, unchunked loss
 *   torchtune  bf16 adapters, fused AdamW and chunked loss (its configs
 *              since mid-2024)
 *   litgpt     adapters in the model dtype, lm_head and loss in chunks
 *   plain      PEFT fp32 adapters, the model output kept through backward
 *   unsloth    PEFT fp32 adapters, fused kernels (as compiled), a fused
 *              cross entropy, checkpoints offloaded to CPU memory
 * bf16_loss follows the model code: on for Qwen v1 (in->model must be set). */
void est_input_set_stack(est_input *in, est_stack stack);
/* Replaces the auto values (method auto is an error: the planner chooses
 * it), fills bits from the quantisation, and checks every field and the
 * combinations (a full fine-tune of quantised weights, a strategy that does
 * not match the GPU count, ...). Problems go to d with the CLI flag or spec
 * field as path. Returns true when the input can be estimated. */
bool est_input_resolve(est_input *in, diag_list *d);

/* The memory outside the modelled tensors. framework_gib is the only
 * number a fit may set (bench_estimator --fit); the defaults come from
 * documentation, not from the measurements (docs/estimator.md). */
typedef struct est_calib {
    double framework_gib;    /* allocations no term models, held through the run (default 0) */
    double cuda_context_gib; /* CUDA context and kernels: in the device counter only */
    double nccl_gib;         /* NCCL buffers per GPU when gpus > 1: device counter only */
} est_calib;

extern const est_calib est_calib_default;

typedef enum { EST_PHASE_LOSS, EST_PHASE_BACKWARD, EST_PHASE_STEP } est_phase;
const char *est_phase_name(est_phase p); /* "forward+loss", "backward", "optimizer step" */

/* Every term in bytes, per GPU. */
typedef struct est_result {
    uint64_t params_total;      /* the model's parameters */
    uint64_t params_trainable;  /* adapters (LoRA / DoRA) or every weight (full) */
    model_lora_count lora;

    double weights_quantised;   /* quantised linear weights with their scales */
    double weights_dense;       /* weights held in a float dtype */
    bool dense_fp32;            /* ... of a quantised base, in fp32 (prepare_model_for_kbit_training) */
    double adapter;             /* LoRA A/B (+ DoRA magnitudes) */
    double gradients;           /* gradients of the trainable parameters */
    double optimizer;           /* optimizer states (+ fp32 master copy under DeepSpeed) */
    double optimizer_paged;     /* the part of `optimizer` in CUDA managed memory */
    double optimizer_temp;      /* temporaries of the optimizer step */
    double sharding;            /* gathered parameters (FSDP / ZeRO-3) or DDP gradient buckets */
    double framework;           /* est_calib.framework_gib */

    double act_per_layer;       /* saved activations of one layer, no checkpointing */
    double act_per_layer_eager; /* ... of which the seq x seq attention scores (0 with flash) */
    double act_checkpoint;      /* one layer's checkpoint (its input) */
    int layers_on_gpu;
    double activations;         /* saved activations of every layer on this GPU */
    double layer_backward;      /* the layer in backward: recomputed activations + gradients */
    double logits;              /* logits and loss buffers */
    double loss_vocab_bytes;    /* ... per token and vocabulary entry (the stack's loss rule) */
    double head_grad;           /* lm_head gradient alive during the loss backward (full) */
    double weight_temp;         /* dequantised (QLoRA), DoRA W + BA, autocast copies (amp) */

    double phase[3];            /* the terms alive in each phase, added up (no allocator) */

    /* The step replayed through the caching allocator (estimate_replay.c):
     * every figure below comes from there. */
    double replay_phase[3];     /* max_memory_allocated within each phase */
    est_phase peak_phase;       /* where the input's counter peaks */
    double allocated;           /* torch.cuda.max_memory_allocated() */
    double reserved;            /* torch.cuda.max_memory_reserved() (capped by the GPU) */
    double allocator;           /* reserved - allocated */
    double cuda_context;        /* context + NCCL */
    double device;              /* reserved + context + paged optimizer states */
    double peak;                /* the figure of the input's counter */
#define EST_TERM_SLOTS 16
    double at_peak[EST_TERM_SLOTS]; /* bytes of each term alive at the counter's peak, by the
                                       replay's term tags (est_to_json names them) */
    double cached_at_peak;      /* reserved but free at that moment (0 for the allocated counter) */
    int replay_steps;           /* micro steps replayed */
    unsigned long segments_at_peak; /* cudaMalloc'ed segments at the reserved peak */
    unsigned long alloc_retries; /* times the full GPU made the allocator free its cache */
    bool oom;                   /* the replay did not fit the GPU even after freeing the cache */
} est_result;

/* Estimates a resolved input (est_input_resolve) with constants c (NULL =
 * est_calib_default). */
void est_estimate(const est_input *in, const est_calib *c, est_result *out);
/* Only the terms and their phases (est_result.phase), without the
 * replay: a thousand times cheaper, for screening what cannot fit. */
void est_terms(const est_input *in, const est_calib *c, est_result *out);
/* The same as est_estimate, and the caching allocator's segments at the
 * peak of the input's counter (what `lathe estimate --explain` prints). */
void est_estimate_explain(const est_input *in, const est_calib *c, est_result *out, ca_snapshot *snap);

/* The seed article's estimator, all in GiB (model = P*2*1.2, loraParams =
 * P*2*r*targets/hidden, lora = 2*loraParams, optimizer = 12*loraParams,
 * activations = batch*seq*hidden*layers*2 bytes, total = 1.2 x the sum, P
 * in billions); full fine-tuning counts every parameter as trainable. */
typedef struct est_seed {
    double model_gib, lora_params_b, lora_gib, optimizer_gib, activations_gib, total_gib;
    int gpus;            /* <=40 -> 1, <=80 -> 2, <=160 -> 4, else ceil(total/80) */
    const char *gpu_type; /* <=24 L4-24GB, <=40 A100-40GB, <=80 A100-80GB, else H100-80GB */
} est_seed;
/* n_targets: the number of target module names. */
void est_seed_formula(double params, int rank, int n_targets, bool full, int batch, int seq,
                      int64_t hidden, int64_t layers, est_seed *out);

/* ---- output ---- */
/* The breakdown as text: one line per term with its derivation, the
 * per-layer activation figure, the phases and the total. */
void est_format_text(const est_input *in, const est_result *r, const diag_list *notes, sb *out);
/* The allocator's state at the peak: each segment, its blocks in use by
 * term and its cached free bytes. */
void est_format_explain(const est_input *in, const est_result *r, const ca_snapshot *snap, sb *out);
/* The same as a JSON document: the total under "per_gpu_gib", every term in
 * GiB under "terms_gib". Caller frees. */
char *est_to_json(const est_input *in, const est_result *r, const diag_list *notes);

/* ---- calibration rows and metrics ---- */
typedef struct est_row {
    int id;
    char *source;        /* source_name */
    char *model;         /* Hugging Face id */
    char *method_text;   /* method as written ("lora", ...; "?" when null) */
    char *memory_kind;   /* allocated / reserved / nvidia-smi / unknown */
    bool usable;         /* usable in the file, and lathe could map every field */
    char *skip_reason;   /* why not, when !usable */
    double measured_gib;
    model_shape shape;   /* from the row's arch (or the catalogue) */
    est_input in;        /* in.model points at shape */
    int n_targets;       /* target names, for the seed formula */
} est_row;

/* Reads a JSONL file of the memory-calibration schema. Every line becomes a
 * row; rows lathe cannot use carry skip_reason. Returns false (with a diag)
 * when the file cannot be read or a line is not a JSON object. */
bool est_rows_load(const char *path, est_row **rows, size_t *n, diag_list *d);
/* The same from text (len bytes); name is used in messages. */
bool est_rows_parse(const char *text, size_t len, const char *name, est_row **rows, size_t *n,
                    diag_list *d);
void est_rows_free(est_row *rows, size_t n);

typedef struct est_metrics {
    size_t n;
    double mape;       /* mean absolute percentage error, % */
    double median_ape; /* % */
    double within10;   /* share of rows within +-10 %, 0..1 */
    double within20;
} est_metrics;

/* Metrics of absolute percentage errors ape[0..n). */
void est_metrics_of(const double *ape, size_t n, est_metrics *out);
/* lathe's absolute percentage error on one row with constants c. */
double est_row_ape(const est_row *row, const est_calib *c);
/* Fits framework_gib on the rows where use[i] (NULL = every usable row) by
 * grid search on the mean absolute percentage error clipped at 50 % (so
 * that a few rows the schema cannot describe do not pull it); the other
 * fields come from start. */
void est_calib_fit(const est_row *rows, size_t n, const bool *use, const est_calib *start,
                   est_calib *out);
/* The same search on peaks already estimated with framework_gib 0 (it is
 * one allocation held through the run, so it adds itself to every
 * counter): the framework_gib that fits rows where use[i] best. */
double est_calib_fit_framework(const double *peak_gib, const double *measured_gib, const bool *use, size_t n);

/* ==================================================================== */
/* ---- planner ---- */

/* A GPU type as the planner sees it. */
typedef struct plan_gpu {
    char *name;            /* "A100-80GB" */
    double memory;         /* bytes the device offers (nvidia-smi's total) */
    double price_per_hour; /* money per GPU-hour (on-demand list price by default) */
    double tflops;         /* dense bf16 tensor TFLOP/s from the spec sheet */
    double mfu;            /* share of tflops a fine-tuning step reaches (docs/planner.md) */
    int per_node;          /* GPUs in one node of this type */
    bool nvlink;           /* GPUs inside a node talk over NVLink (else PCIe) */
    int available;         /* GPUs of this type in the cluster; 0 = no limit (catalogue) */
    char *source;          /* where the figures come from */
} plan_gpu;

typedef struct plan_catalog {
    plan_gpu *gpus;
    size_t n;
    char *origin; /* "built-in catalogue" or "cluster FILE" */
} plan_catalog;

/* The built-in catalogue: A10G-24GB, L4-24GB, RTX4090-24GB, L40S-48GB,
 * A100-40GB, A100-80GB, H100-80GB, H200-141GB, with default prices. */
void plan_catalog_builtin(plan_catalog *out);
/* The GPU types of a Cluster: its gpuTypes (memory, price, tflops when
 * given), the rest taken from the built-in entry of the same name, and the
 * count and per-node width from its nodes. Unknown throughput is an error
 * naming the field to add. Returns false on errors. */
bool plan_catalog_from_cluster(const spec_cluster *c, plan_catalog *out, diag_list *d);
void plan_catalog_free(plan_catalog *c);
/* Finds a type by name: exact (case-insensitive), then ignoring '-', ' ',
 * "GB"/"G" and a leading "nvidia"; NULL when none or ambiguous. */
const plan_gpu *plan_catalog_find(const plan_catalog *c, const char *name);

typedef enum { PLAN_CHEAPEST, PLAN_FASTEST } plan_objective;

typedef struct plan_options {
    const plan_catalog *catalog; /* NULL = built-in */
    double margin;               /* share of GPU memory kept free; default 0.10 */
    plan_objective objective;    /* default PLAN_CHEAPEST */
    int max_gpus;                /* largest job considered; default 512 */
    const est_calib *calib;      /* NULL = est_calib_default */
} plan_options;

void plan_options_defaults(plan_options *o);

/* One way to run the job: method, GPUs, parallelism, batch split, and what
 * the estimator and the throughput model say of it. */
typedef struct plan_config {
    spec_method method;
    spec_quant quant;
    int bits;
    const plan_gpu *gpu;
    int gpus, nodes, gpus_per_node;
    spec_strategy strategy;
    int tp, pp, dp;               /* tensor, pipeline, data parallel degrees */
    int micro_batch, grad_accum;  /* micro_batch x grad_accum x dp = effective batch */
    bool grad_ckpt, flash_attn;
    est_input in;
    est_result mem;
    double usable;                /* bytes usable on the GPU (memory minus the margin) */
    bool fits;
    double flops_per_token;       /* training FLOPs per token, forward and backward */
    double efficiency;            /* parallel scaling x micro-batch fill x method */
    double tokens_per_second;     /* of the whole job */
    double step_seconds;          /* one optimizer step */
    double seconds;               /* the whole run (0 when the step count is unknown) */
    double gpu_hours, cost;       /* of the whole run (per 1,000 steps when unknown) */
} plan_config;

typedef struct plan_result {
    char *job_name;
    char *file;
    model_shape model;
    model_params params;
    unsigned targets;            /* MODEL_ROLE_* */
    int effective_batch;         /* batchSize x gradientAccumulation */
    int seq;                     /* tokens per sample (maxSeqLength) */
    long samples;                /* 0 = unknown */
    char *samples_origin;        /* "trainingData.samples", "counted in FILE", NULL */
    long steps;                  /* optimizer steps of the run; 0 = unknown */
    bool fixed_steps;            /* the spec's maxSteps: the count does not follow the batch */
    double tokens;               /* tokens of the run (upper bound: samples x seq) */
    double deadline;             /* timeout.maxDuration in seconds; 0 = none */
    bool shared;                 /* resources.gpu.shared: may share its GPU */

    bool found;
    plan_config chosen;
    bool has_requested;          /* the spec gave resources: this is them */
    plan_config requested;
    plan_config *options;        /* the best configuration per (GPU type, method), cheapest first */
    size_t n_options;

    est_seed seed;               /* the seed article's formula, for comparison */
    char **reasons;              /* every choice in plain words, with its numbers */
    size_t n_reasons;
    plan_catalog *owned_catalog; /* the built-in catalogue the configs point into, when used */
} plan_result;

/* Plans a job: resolves the model (path, catalogue, generic), checks the
 * targets against it (errors point at the spec's lines), evaluates every
 * candidate and picks the cheapest (or fastest) that fits, finishing within
 * timeout.maxDuration when one can. Checks the spec's own resources when it
 * gives them. Returns LT_EXIT_OK, LT_EXIT_INVALID (diagnostics in d) or
 * LT_EXIT_NOFIT (nothing fits; out explains the closest). */
int plan_job(const spec_job *job, const plan_options *opt, plan_result *out, diag_list *d);
void plan_result_free(plan_result *r);

/* Checks a job's target modules against a model; each unknown module is
 * an error at its line in the spec. Returns the MODEL_ROLE_* set. */
unsigned plan_check_targets(const spec_job *job, const model_shape *m, diag_list *d);

/* The plan for people: choice, memory breakdown, time, cost, reasons,
 * alternatives. */
void plan_format_text(const plan_result *r, sb *out);
/* The same as JSON. Caller frees. */
char *plan_to_json(const plan_result *r);
/* The equivalent ms-swift command line (`swift sft ...`), one option per
 * line. Caller frees. */
char *plan_emit_swift(const plan_result *r, const spec_job *job);
/* A copy of the job with the plan's choices written into it (method,
 * resources, micro-batch, accumulation, checkpointing, strategy). */
spec_job *plan_resolved_job(const plan_result *r, const spec_job *job);

#endif
