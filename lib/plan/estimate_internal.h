/* estimate_internal.h: what the estimator's files share (not part of
 * plan.h's interface):
 *   - est_ctx: the derived facts every term uses (estimate.c)
 *   - the tensors of one decoder layer's forward, per token: the saved ones
 *     add up to the per-layer activation figure, and the replay allocates
 *     each of them (estimate.c)
 *   - the loss's tensors, from the stack's code (estimate_loss.c)
 *   - the replay of training steps through the caching allocator
 *     (estimate_replay.c)
 */
#ifndef LATHE_PLAN_ESTIMATE_INTERNAL_H
#define LATHE_PLAN_ESTIMATE_INTERNAL_H

#include "plan/plan.h"

/* Everything the terms share, computed once. */
typedef struct est_ctx {
    const est_input *in;
    const model_shape *m;
    model_params p;
    bool full, lora;       /* lora: LoRA, QLoRA or DoRA */
    bool deepspeed;        /* ZeRO-2 or ZeRO-3 */
    bool deepspeed_amp;    /* ZeRO in 16 bits (bf16, fp16 or amp): the engine casts the module to
                              16 bits (module.bfloat16(), adapters included) and the ZeRO optimizer
                              keeps an fp32 master partition with fp32 states */
    bool autocast;         /* the forward runs under torch.autocast */
    double a;              /* bytes of an activation element: 2, or 4 in fp32 */
    double pb;             /* bytes of a trainable parameter (and of its AdamW state) */
    double ab;             /* bytes of an adapter parameter: pb, or 4 for fp32 adapters */
    double wb;             /* bytes of a frozen dense weight */
    double gb;             /* bytes of a gradient element */
    int dp, tp, pp;        /* data, tensor and pipeline parallel degrees */
    int layers;            /* decoder layers on this GPU */
    double layer_frac;     /* layers / total layers */
    bool shard_params;     /* FSDP, ZeRO-3 */
    bool shard_grads;      /* FSDP, ZeRO-2, ZeRO-3 */
    bool last_stage;       /* holds the lm_head (always, without pipeline) */
    bool first_stage;      /* holds the embedding */
    double tokens;         /* per GPU per micro step */
} est_ctx;

void est_ctx_init(est_ctx *x, const est_input *in);

/* Stored bits per quantised weight of an in x out matrix, scales included. */
double est_quant_bits(const est_input *in, int64_t in_features, int64_t out_features);

/* The buffers and temporaries beside the model's tensors (estimate.c says
 * where each comes from), in bytes on this GPU. */
typedef struct est_parts {
    double gather_layer, gather_head; /* FSDP / ZeRO-3: one layer's and the lm_head's gathered params */
    double ddp_buckets;    /* DDP's gradient buckets */
    double ds_bucket;      /* DeepSpeed's contiguous-gradients bucket (ipg buffer): ZeRO-2 makes it at
                              each backward and frees it after the reduction, ZeRO-3 holds it */
    double ds_buckets;     /* how many: 2 with overlap_comm (ZeRO-2's double buffer), else 1 */
    double dequant;        /* QLoRA: one dequantised matrix */
    double dora;           /* DoRA: the norm's temporaries of one matrix */
    double amp_copy_layer; /* amp: the 16-bit copies of one layer's weights */
} est_parts;

/* r's trainable terms (gradients, lora) must be filled. */
void est_parts_of(const est_ctx *x, const est_result *r, est_parts *out);

/* ---- one decoder layer's forward ---- */

/* When a tensor of the layer dies (without checkpointing). */
typedef enum {
    EST_DIES_ATTN,     /* at the end of the attention half (after its residual add) */
    EST_DIES_MLP,      /* at the end of the layer */
    EST_DIES_BACKWARD  /* saved for backward: dies in the layer's backward */
} est_dies;

typedef struct est_ltensor {
    double bytes;      /* per token */
    est_dies dies;
    bool mlp;          /* allocated in the MLP half */
    bool eager;        /* part of the seq x seq attention scores (bytes per token at this seq) */
} est_ltensor;

#define EST_LAYER_MAX 64
typedef struct est_layer {
    est_ltensor t[EST_LAYER_MAX]; /* in allocation order */
    int n;
} est_layer;

/* The layer's tensors in the order its forward allocates them (the layer's
 * input and output are the caller's). The saved ones (dies ==
 * EST_DIES_BACKWARD) add up to est_result.act_per_layer / tokens. */
void est_layer_tensors(const est_ctx *x, est_layer *out);

/* The per-token working set of one layer's backward beside its saved
 * tensors (est_result.layer_backward without the recomputed activations):
 * the gradients of the MLP's intermediates, of the layer's input and
 * output, and in eager attention the softmax backward's buffers. */
double est_layer_backward_work(const est_ctx *x);
/* Bytes per token that one layer's bitsandbytes 4-bit projections keep
 * from its forward to its backward under non-reentrant checkpointing (0
 * otherwise); est_ctx_inputs lists them per module (up to
 * MODEL_MAX_MODULES, in the layer's order), with the half each belongs to
 * and whether it is made at the half's end (the o and down projections'
 * inputs), and returns the count. */
double est_ctx_inputs_per_token(const est_ctx *x);
size_t est_ctx_inputs(const est_ctx *x, double bytes[], bool mlp[], bool late[]);

/* ---- the loss ---- */

/* How the step computes the loss from the final hidden states, from the
 * stack's code (docs/estimator.md, "Logits and loss"). Sizes are bytes per
 * token and vocabulary entry. */
typedef struct est_loss_plan {
    double logits;        /* the lm_head output's dtype */
    bool upcast_in_model; /* the model returns logits.float() (transformers < 4.46, torchtune) */
    bool shift_copy;      /* logits[..., :-1, :].contiguous() (transformers < 4.49, Qwen v1, old torchtune) */
    bool upcast_in_loss;  /* the loss function upcasts the model's 16-bit logits (a local fp32 copy,
                             alive until the loss returns) before shifting them (transformers
                             4.46-4.48's ForCausalLMLoss); the 16-bit logits stay the output's */
    double ce;            /* the log-softmax's dtype */
    bool cast_in_loss;    /* the loss casts 16-bit logits to fp32 for the cross entropy (autocast,
                             transformers >= 4.46's loss function) */
    bool convert_outputs; /* accelerate's convert_outputs_to_fp32 copies 16-bit logits to fp32 */
    bool keep_logits;     /* the loop keeps the logits through backward */
    bool shift_in_loop;   /* the loop rebinds its logits to the shifted copy (old torchtune): that
                             copy is the one kept */
    bool save_lsm;        /* the log-softmax is saved (not when a compiled loss recomputes it) */
    double softcap;       /* Gemma-2's saved tanh output (its dtype; 0 without) */
    int chunks;           /* lm_head chunks whose loss is taken one at a time; 1 = unchunked */
    int chunk_tokens;     /* > 0: chunks of this many tokens per sample instead (LitGPT: 128) */
    double chunk_share;   /* the share of the tokens one chunk holds (1 unchunked) */
    bool chunks_kept;     /* every chunk's logits stay alive until the loss is done (torchtune) */
    bool grad_whole;      /* the logits' gradient is assembled whole (LitGPT's unchunked lm_head) */
    bool fused;           /* one kernel: a log-sum-exp per row, the gradient written into the logits */
} est_loss_plan;

/* The loss plan of the input's stack, model code and settings. */
void est_loss_plan_of(const est_ctx *x, est_loss_plan *out);
/* Bytes per token and vocabulary entry alive at the loss's peak under a
 * plan: the analytic figure (est_result.loss_vocab_bytes). */
double est_loss_plan_peak(const est_loss_plan *lp);

/* ---- the replay ---- */

/* Term tags of the replay's tensors (the keys of terms_gib). */
typedef enum {
    EST_T_WEIGHTS_Q,
    EST_T_WEIGHTS,
    EST_T_ADAPTER,
    EST_T_GRADS,
    EST_T_STATES,
    EST_T_OPT_TEMP,
    EST_T_SHARDING,
    EST_T_ACTS,
    EST_T_LAYER_BWD,
    EST_T_LOGITS,
    EST_T_HEAD_GRAD,
    EST_T_WEIGHT_TEMP,
    EST_T_FRAMEWORK,
    EST_T_COUNT
} est_term_tag;

/* Replays the input's training steps through the caching allocator and
 * fills the counters of r (allocated, reserved, the replay's phases and the
 * terms alive at the counter's peak). r's analytic terms must be filled.
 * When snap is not NULL, the allocator's segments at the peak of the
 * input's counter are stored there (free with ca_snapshot_free). */
void est_replay(const est_ctx *x, const est_calib *c, est_result *r, ca_snapshot *snap);
/* The padded length of one micro batch when lengths vary: the longest of
 * in->batch samples, each drawn from the log-normal of in->seq_mean and
 * in->seq_sd (or, with in->seq_min > 0, the gamma shifted by it), cut at
 * in->seq, or (in->drop_long) drawn below in->seq. */
double est_batch_length(const est_input *in, rng_state *g);
/* The regularised lower incomplete gamma function P(a, x) = gamma(a, x) /
 * Gamma(a), a > 0, x >= 0: the share of a Gamma(a, 1) variable below x. */
double est_gamma_p(double a, double x);

#endif
