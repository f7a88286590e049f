/* estimate.c: the GPU memory estimator's physical model. Every term is
 * derived from the architecture, the settings and the training stack (how
 * it computes the loss, the adapters' dtype, the optimizer step);
 * docs/estimator.md gives each formula with its source. Only
 * est_calib_default's constants were fitted to measurements.
 *
 * A training step has three peaks, and the estimate is the largest:
 *   forward+loss   weights, states, saved activations of every layer, the
 *                  logits and the loss buffers (and their backward)
 *   backward       weights, states, saved activations, the layer being
 *                  recomputed and back-propagated, the gradients so far
 *   optimizer step weights, states, every gradient, the step's temporaries
 * Counters: allocated = the largest phase; reserved adds the caching
 * allocator's slack (fixed, and on the loss buffers and weight copies),
 * capped at the GPU's memory when known; device adds the CUDA context (and
 * NCCL) and the optimizer states in CUDA managed memory.
 */
#include "plan/plan.h"

#include <math.h>
#include <string.h>

/* Fitted by `bench_estimator --fit` on the usable rows of
 * shared/data/memory-calibration.jsonl (docs/estimator.md, "Calibration"):
 * framework 0, reserved base 1.0 GiB, slack 2.35 x the loss buffers.
 * cuda_context_gib and nccl_gib are not fitted (no calibration row uses the
 * device counter): a CUDA 12 context with lazy module loading takes about
 * 0.5 GiB on A100/H100; NCCL's default buffers (NCCL_BUFFSIZE 4 MiB per
 * channel and peer) take a few hundred MiB. */
const est_calib est_calib_default = {
    .framework_gib = 0.0,
    .reserved_frac = 2.35,
    .reserved_base_gib = 1.0,
    .cuda_context_gib = 0.5,
    .nccl_gib = 0.5,
};

/* Everything the terms share, computed once. */
typedef struct est_ctx {
    const est_input *in;
    const model_shape *m;
    model_params p;
    bool full, lora;       /* lora: LoRA, QLoRA or DoRA */
    bool deepspeed_amp;    /* ZeRO with amp: bf16 weights + fp32 master in the optimizer */
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

/* Whether the forward runs under torch.autocast: amp precision outside
 * DeepSpeed (LitGPT bf16-mixed, torch.autocast over fp32 weights), and the
 * Hugging Face Trainer in 16 bits, whose Accelerator wraps the model's
 * forward in autocast (accelerate Accelerator.prepare_model, native_amp)
 * except under DeepSpeed, which trains the 16-bit model itself. */
static bool autocast_on(const est_input *in, bool deepspeed_amp)
{
    bool zero = in->strategy == STRAT_ZERO2 || in->strategy == STRAT_ZERO3;
    if (in->precision == PREC_AMP) return !deepspeed_amp;
    bool half = in->precision == PREC_BF16 || in->precision == PREC_FP16;
    return half && in->stack == EST_STACK_HF && !zero;
}

static void ctx_init(est_ctx *x, const est_input *in)
{
    memset(x, 0, sizeof *x);
    x->in = in;
    x->m = in->model;
    model_count_params(x->m, &x->p);
    x->full = in->method == METHOD_FULL;
    x->lora = !x->full;
    x->tp = in->tensor_parallel;
    x->pp = in->pipeline_stages;
    x->dp = in->gpus / (x->tp * x->pp);
    x->shard_params = in->strategy == STRAT_FSDP || in->strategy == STRAT_ZERO3;
    x->shard_grads = x->shard_params || in->strategy == STRAT_ZERO2;
    bool fp32 = in->precision == PREC_FP32, amp = in->precision == PREC_AMP;
    x->deepspeed_amp = amp && (in->strategy == STRAT_ZERO2 || in->strategy == STRAT_ZERO3);
    x->autocast = autocast_on(in, x->deepspeed_amp);
    x->a = fp32 ? 4 : 2;
    x->pb = (fp32 || amp) && !x->deepspeed_amp ? 4 : 2;
    x->ab = x->lora && in->adapter_fp32 ? 4 : x->pb;
    x->wb = x->pb;
    x->gb = x->pb;
    x->layers = (int)((x->m->layers + x->pp - 1) / x->pp);
    x->layer_frac = (double)x->layers / (double)x->m->layers;
    x->last_stage = true; /* the estimate is for the stage with the lm_head and the logits */
    x->first_stage = x->pp == 1;
    x->tokens = (double)in->batch * (double)in->seq;
}

/* ---- weights ---- */

/* Stored bits per quantised weight, scales included:
 *   NF4 (bitsandbytes): 4 + one fp32 absmax per 64-weight block = 4.5
 *   NF4 double-quantised: 4 + 8-bit absmax per 64 + fp32 per 256 absmax = 4.127
 *   int8 (LLM.int8): 8 + one fp32 scale per output row
 *   GPTQ (group 128): bits + fp16 scale and packed zero per group + int32 g_idx per input
 *   AWQ (group 128): 4 + fp16 scale and 4-bit zero per group
 * (bitsandbytes Params4bit / Int8Params, AutoGPTQ QuantLinear, AutoAWQ WQLinear.) */
static double quant_bits(const est_input *in, int64_t in_features, int64_t out_features)
{
    switch (in->quant) {
    case QUANT_NF4: return 4.0 + 32.0 / 64.0;
    case QUANT_NF4_DQ: return 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0);
    case QUANT_INT8: return 8.0 + 32.0 / (double)in_features;
    case QUANT_GPTQ4:
        return in->bits + (16.0 + in->bits) / 128.0 + 32.0 / (double)out_features;
    case QUANT_AWQ4: return 4.0 + (16.0 + 4.0) / 128.0;
    default: return 16.0;
    }
}

/* Bits per linear weight of one layer, averaged over its projections. */
static double layer_quant_bits(const est_ctx *x)
{
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(x->m, mods);
    double bits = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!mods[i].per_layer) continue;
        double w = (double)mods[i].in * (double)mods[i].out;
        bits += w * quant_bits(x->in, mods[i].in, mods[i].out);
        count += w;
    }
    return count > 0 ? bits / count : 16.0;
}

/* Parameters held on this GPU before data-parallel sharding: this stage's
 * layers (split over tensor-parallel ranks) and the embedding / lm_head. */
static double params_on_gpu(const est_ctx *x, double *linear)
{
    const model_params *p = &x->p;
    double layers = (double)p->layers * x->layer_frac;
    double lin = (double)p->linear * x->layer_frac / x->tp;
    double rest = (layers - (double)p->linear * x->layer_frac) / x->tp;
    double ends = (double)p->final_norm;
    if (x->first_stage) ends += (double)p->embedding / x->tp;
    if (x->last_stage) ends += (double)(p->lm_head ? p->lm_head : (x->first_stage ? 0 : p->embedding)) / x->tp;
    *linear = lin;
    return lin + rest + ends;
}

static void weights(const est_ctx *x, est_result *r)
{
    double lin = 0, all = params_on_gpu(x, &lin);
    if (x->in->quant != QUANT_NONE) {
        bool bnb = x->in->quant == QUANT_NF4 || x->in->quant == QUANT_NF4_DQ || x->in->quant == QUANT_INT8;
        bool fp32 = x->in->precision == PREC_FP32 || (x->in->kbit_fp32 && bnb);
        r->weights_quantised = lin * layer_quant_bits(x) / 8.0;
        r->weights_dense = (all - lin) * (fp32 ? 4 : 2);
        r->dense_fp32 = fp32;
    } else {
        r->weights_dense = all * x->wb;
    }
    if (x->shard_params) {
        r->weights_quantised /= x->dp;
        r->weights_dense /= x->dp;
    }
}

/* ---- trainable parameters, gradients, optimizer ---- */

static double trainable_on_gpu(const est_ctx *x, est_result *r)
{
    if (x->full) {
        double lin;
        return params_on_gpu(x, &lin);
    }
    model_lora_params(x->m, x->in->targets, x->in->rank, x->in->method == METHOD_DORA, &r->lora);
    double t = (double)r->lora.per_layer * x->layers / x->tp;
    if (x->last_stage) t += (double)r->lora.lm_head / x->tp;
    if (x->first_stage) t += (double)r->lora.embedding / x->tp;
    return t;
}

/* Bytes of optimizer state per trainable parameter:
 *   AdamW (torch): exp_avg and exp_avg_sq in the parameter's dtype
 *   DeepSpeed ZeRO with bf16/fp16 training: fp32 exp_avg, exp_avg_sq and
 *     master copy (the model holds the 16-bit weights)
 *   8-bit AdamW (bitsandbytes): two uint8 states + an fp32 absmax per 2048
 *   SGD without momentum (the Hugging Face default): none */
static double state_bytes(const est_ctx *x, double elt)
{
    switch (x->in->optimizer) {
    case OPT_ADAMW8BIT:
    case OPT_PAGED_ADAMW8BIT: return 2.0 + 2.0 * 4.0 / 2048.0;
    case OPT_SGD: return 0;
    default: return x->deepspeed_amp ? 3.0 * 4.0 : 2.0 * elt;
    }
}

/* The optimizer step's temporaries: torch's foreach AdamW computes
 * sqrt(exp_avg_sq) for every parameter at once (one state-sized list);
 * DeepSpeed's fused Adam, bitsandbytes' kernels and fused AdamW work in
 * place. Under DeepSpeed bf16 the fp32 gradient partition is built for
 * the step. */
static double step_temp_bytes(const est_ctx *x, double elt)
{
    if (x->deepspeed_amp) return 4.0;
    bool foreach_adam = x->in->optimizer == OPT_ADAMW && !x->in->fused_optimizer &&
                        x->in->strategy != STRAT_ZERO2 && x->in->strategy != STRAT_ZERO3;
    return foreach_adam ? elt : 0;
}

/* Adapters are held in x->ab bytes (fp32 under PEFT), and so are their
 * gradients, AdamW moments and the foreach temporary; a full fine-tune's
 * in the precision's parameter dtype. */
static void trainable(const est_ctx *x, est_result *r)
{
    double t = trainable_on_gpu(x, r);
    double elt = x->full ? x->gb : x->ab;
    r->params_total = x->p.total;
    r->params_trainable = x->full ? x->p.total : r->lora.total;
    if (x->lora) r->adapter = t * elt / (x->shard_params ? x->dp : 1);
    double shard = x->shard_grads ? x->dp : 1;
    r->gradients = t * elt / shard;
    r->optimizer = t * state_bytes(x, elt) / shard;
    if (x->in->optimizer == OPT_PAGED_ADAMW || x->in->optimizer == OPT_PAGED_ADAMW8BIT)
        r->optimizer_paged = r->optimizer;
    r->optimizer_temp = t * step_temp_bytes(x, elt) / shard;
}

/* FSDP / ZeRO-3 gather each layer's parameters before using it and keep
 * the next one prefetched (two layers), and gather the lm_head for the
 * logits. DDP keeps its gradient buckets beside the gradients
 * (gradient_as_bucket_view=False, the default). */
static void sharding(const est_ctx *x, est_result *r)
{
    if (x->shard_params && x->dp > 1) {
        double layer_bytes = x->in->quant != QUANT_NONE
                                 ? (double)x->p.per_layer_linear * layer_quant_bits(x) / 8.0
                                 : (double)x->p.per_layer * 2.0;
        double head = (double)(x->p.lm_head ? x->p.lm_head : x->p.embedding) * 2.0;
        r->sharding = (2.0 * layer_bytes + head) * (1.0 - 1.0 / x->dp) / x->tp;
    } else if (x->in->strategy == STRAT_DDP && x->dp > 1) {
        r->sharding = r->gradients;
    }
}

/* ---- activations ---- */

/* The input each projection reads, by role. */
static int input_slot(unsigned roles)
{
    if (roles & (MODEL_ROLE_Q | MODEL_ROLE_K | MODEL_ROLE_V)) return 0;
    if (roles & MODEL_ROLE_O) return 1;
    if (roles & (MODEL_ROLE_GATE | MODEL_ROLE_UP)) return 2;
    return 3;
}

/* Bytes per token the layer's projections keep for backward. A trained
 * weight needs its input (each distinct input is kept once). A LoRA branch
 * keeps its input (a dropout copy plus a one-byte mask per adapted module
 * when dropout > 0, PEFT's lora_dropout) and lora_A's output; DoRA also
 * keeps the base and LoRA results to differentiate the magnitude. */
/* Bytes of the input a LoRA branch keeps per element. PEFT's Linear
 * casts x to lora_A's dtype (`x = x.to(lora_A.weight.dtype)`), so fp32
 * adapters keep an fp32 copy; its bitsandbytes layers skip the cast under
 * autocast (`requires_conversion = not torch.is_autocast_enabled()`). */
static double lora_input_bytes(const est_ctx *x)
{
    bool cast = x->ab == 4 && x->a < 4 && (x->in->quant == QUANT_NONE || !x->autocast);
    return cast ? 4.0 : x->a;
}

static double projection_inputs(const est_ctx *x)
{
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(x->m, mods);
    double a = x->a, la = lora_input_bytes(x), bytes = 0;
    bool kept[4] = {false, false, false, false};
    bool dropout = x->in->lora_dropout > 0;
    /* LitGPT's LoRAQKVLinear runs one dropout over the fused qkv input */
    bool shared_qkv = x->in->stack == EST_STACK_LITGPT, qkv_done = false;
    for (size_t i = 0; i < n; i++) {
        if (!mods[i].per_layer) continue;
        bool adapted = x->lora && (mods[i].roles & x->in->targets);
        if (!x->full && !adapted) continue;
        int slot = input_slot(mods[i].roles);
        bool own_copy = adapted && (dropout || la != a) && !(shared_qkv && slot == 0 && qkv_done);
        if (own_copy)
            bytes += (la + (dropout ? 1.0 : 0.0)) * (double)mods[i].in;
        else if (!kept[slot])
            bytes += a * (double)mods[i].in;
        if (adapted && slot == 0) qkv_done = true;
        kept[slot] = true;
        if (adapted) {
            bytes += (x->autocast ? a : la) * x->in->rank;
            if (x->in->method == METHOD_DORA) bytes += 2.0 * a * (double)mods[i].out;
        }
    }
    return bytes;
}

/* Bytes per token one decoder layer keeps for backward, without
 * checkpointing (the layer code of transformers' Llama family and
 * torchtune):
 *   RMSNorm: its input upcast to fp32 (4h); the normalised value too when
 *     its weight is trained; a compiled (fused) norm keeps only its input
 *   projection inputs: projection_inputs()
 *   attention: q, k and v after RoPE (k, v repeated to every query head
 *     before SDPA), the output and the fp32 log-sum-exp; eager attention
 *     also keeps the fp32 softmax and its cast: (4 + a) x heads x seq
 *   MLP: gate output (kept by the activation), activation output and up
 *     output (kept by the product); compiled: the activation is recomputed
 * *eager receives the seq x seq part. */
static double layer_saved_per_token(const est_ctx *x, double *eager)
{
    const model_shape *m = x->m;
    double a = x->a, h = (double)m->hidden, I = (double)m->intermediate;
    double qd = (double)(m->heads * m->head_dim), kvd = (double)(m->kv_heads * m->head_dim);
    double norm_keep = x->in->compiled ? a : 4.0;
    double norms = m->norms_per_layer * (norm_keep * h + (x->full ? a * h : 0));
    if (m->qk_norm) norms += norm_keep * (qd + kvd);
    double attn = 4.0 * a * qd + 4.0 * (double)m->heads;
    *eager = x->in->flash_attn ? 0 : (4.0 + a) * (double)m->heads * (double)x->in->seq / x->tp;
    double mlp = a * I * (x->in->compiled ? 2 : 3);
    return norms + (projection_inputs(x) + attn + mlp) / x->tp + *eager;
}

/* Working memory of one layer's backward per token: the gradients of the
 * MLP's three intermediate tensors and of the layer's input and output; in
 * eager attention also the softmax backward's fp32 buffers and cast. */
static double layer_backward_work(const est_ctx *x)
{
    const model_shape *m = x->m;
    double a = x->a;
    double work = a * (3.0 * (double)m->intermediate / x->tp + 2.0 * (double)m->hidden);
    if (!x->in->flash_attn) work += (8.0 + a) * (double)m->heads * (double)x->in->seq / x->tp;
    return work;
}

static void activations(const est_ctx *x, est_result *r)
{
    double eager = 0, saved = layer_saved_per_token(x, &eager);
    double ckpt = x->a * (double)x->m->hidden;
    r->layers_on_gpu = x->layers;
    r->act_per_layer = saved * x->tokens;
    r->act_per_layer_eager = eager * x->tokens;
    r->act_checkpoint = ckpt * x->tokens;
    /* the final norm keeps its fp32 input, the lm_head its input */
    double head_in = x->last_stage ? (4.0 + x->a) * (double)x->m->hidden * x->tokens : 0;
    double work = layer_backward_work(x) * x->tokens;
    if (x->in->grad_ckpt) {
        r->activations = x->layers * r->act_checkpoint + head_in;
        r->layer_backward = r->act_per_layer + work;
    } else {
        r->activations = x->layers * r->act_per_layer + head_in;
        r->layer_backward = work;
    }
}

/* The dtype the cross entropy is computed in: fp32 when the model is,
 * under autocast (cross_entropy, log_softmax and nll_loss are on its fp32
 * list), in torchtune (TransformerDecoder returns `self.output(h).float()`,
 * CEWithChunkedOutputLoss upcasts each chunk) and in transformers' own
 * models (`logits = logits.float()`); the logits' dtype in LitGPT
 * (chunked_cross_entropy on the lm_head chunks) and in model code that
 * does not upcast (Qwen v1's modeling_qwen.py, GaLore's Llama copy). */
static double ce_bytes(const est_ctx *x)
{
    if (x->a == 4 || x->autocast || x->in->stack == EST_STACK_TORCHTUNE) return 4.0;
    if (x->in->stack == EST_STACK_LITGPT || x->in->bf16_loss) return x->a;
    return 4.0;
}

/* Bytes per token and vocabulary entry alive at the peak of the loss and
 * its backward, from each stack's loss code:
 *   unchunked: three buffers of the cross entropy's dtype meet in its
 *     backward: the log-softmax output it saved, nll_loss's gradient
 *     (a dense zeros_like) and log_softmax's gradient; the forward holds as
 *     many (the upcast logits, the shifted contiguous copy, the
 *     log-softmax). A loop that keeps the model output through backward
 *     (`outputs.loss.backward()`) adds the logits.
 *   torchtune CEWithChunkedOutputLoss (8 chunks): the 16-bit logits of
 *     every chunk, every chunk's saved fp32 log-softmax (none when the loss
 *     is compiled: inductor recomputes it), and one chunk's fp32 buffers.
 *   LitGPT: chunked_cross_entropy works on 128-token chunks, so only the
 *     logits (the loop keeps them through backward) and every chunk's
 *     saved log-softmax are whole; with the lm_head unchunked (its full
 *     fine-tuning script) the logits' gradient is assembled whole too.
 * Gemma-2 caps its logits, tanh(logits / 30) x 30 (transformers
 * Gemma2ForCausalLM, LitGPT do_softcapping), before the loss: the tanh
 * output, in the logits' dtype, is saved for backward. */
static double loss_vocab_bytes(const est_ctx *x)
{
    double a = x->a, ce = ce_bytes(x);
    double softcap = x->m->arch == MODEL_ARCH_GEMMA2 ? a : 0.0;
    if (x->in->stack == EST_STACK_LITGPT) return a + ce + (x->in->chunked_loss ? 0.0 : a) + softcap;
    if (x->in->chunked_loss) return a + (x->in->compiled ? 0.0 : 4.0) + 2.0 * 4.0 / 8.0 + softcap;
    /* the kept logits: torchtune's were the model's fp32 output; a
     * transformers model (>= 4.46) returns 16-bit logits and upcasts them
     * inside its loss function (ForCausalLMLoss) */
    double kept = 0;
    if (x->in->logits_kept) kept = x->in->stack == EST_STACK_TORCHTUNE ? 4.0 : a;
    return 3.0 * ce + kept + softcap;
}

static void logits(const est_ctx *x, est_result *r)
{
    if (!x->last_stage) return;
    double V = (double)x->m->vocab / x->tp;
    r->loss_vocab_bytes = loss_vocab_bytes(x);
    r->logits = r->loss_vocab_bytes * V * x->tokens;
    if (x->full) r->head_grad = (double)x->m->vocab * (double)x->m->hidden * x->gb / x->tp /
                                (x->shard_grads ? x->dp : 1);
}

/* Temporary weight copies alive while a layer computes:
 *   QLoRA: each quantised matrix is dequantised to the compute dtype for its
 *     matmuls (bitsandbytes dequantize_4bit, one at a time)
 *   DoRA: PEFT's DoraLinearLayer.forward builds B A from an identity
 *     (x_eye, in x in, activation dtype), then W + scaling x B A in the
 *     adapter dtype to take its norms: eye + B A + scaled + sum
 *   amp: autocast's bf16 copies of fp32 weights; trained weights are cached
 *     for the whole forward, frozen ones kept per layer for backward */
static void weight_temp(const est_ctx *x, est_result *r)
{
    double big = 0;
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(x->m, mods);
    for (size_t i = 0; i < n; i++) {
        double w = (double)mods[i].in * (double)mods[i].out;
        if (mods[i].per_layer && w > big) big = w;
    }
    if (x->in->quant != QUANT_NONE) r->weight_temp += x->a * big / x->tp;
    if (x->in->method == METHOD_DORA)
        r->weight_temp += (x->a + 3.0 * x->ab) * (double)r->lora.max_in * (double)r->lora.max_out / x->tp;
    if (x->in->precision == PREC_AMP && !x->deepspeed_amp && x->in->quant == QUANT_NONE) {
        double layer = (double)x->p.per_layer_linear * 2.0 / x->tp;
        bool all_layers = x->full || !x->in->grad_ckpt;
        r->weight_temp += layer * (all_layers ? x->layers : 1);
    }
}

/* ---- phases and counters ---- */

/* On a GPU of known size the caching allocator cannot reserve more than
 * the device holds: when cudaMalloc fails it releases its cached free
 * blocks and retries (c10 CUDACachingAllocator, release_cached_blocks), so
 * the slack shrinks to what fits; only the live tensors must fit. Paged
 * optimizer states are evicted to host memory under the same pressure. */
static void cap_to_gpu(double gpu_memory, est_result *r)
{
    double room = gpu_memory - r->cuda_context;
    if (gpu_memory > 0 && r->reserved > room) r->reserved = r->allocated > room ? r->allocated : room;
    r->device = r->reserved + r->cuda_context + r->optimizer_paged;
    if (gpu_memory > 0 && r->device > gpu_memory && r->optimizer_paged > 0) {
        double over = r->device - gpu_memory;
        r->device -= over < r->optimizer_paged ? over : r->optimizer_paged;
    }
}

static void phases(const est_ctx *x, const est_calib *c, est_result *r)
{
    double states_in_counter = r->optimizer - r->optimizer_paged;
    double persistent = r->weights_quantised + r->weights_dense + r->adapter + states_in_counter;
    double fixed = persistent + r->sharding + r->framework;
    double grads_in_backward = x->full ? r->head_grad : r->gradients;
    r->phase[EST_PHASE_LOSS] = fixed + r->activations + r->logits + r->head_grad + r->weight_temp;
    r->phase[EST_PHASE_BACKWARD] = fixed + r->activations + r->layer_backward + grads_in_backward +
                                   r->weight_temp;
    r->phase[EST_PHASE_STEP] = fixed + r->gradients + r->optimizer_temp;
    r->peak_phase = EST_PHASE_LOSS;
    for (int i = 1; i < 3; i++)
        if (r->phase[i] > r->phase[r->peak_phase]) r->peak_phase = (est_phase)i;
    r->allocated = r->phase[r->peak_phase];
    /* The caching allocator keeps the blocks of freed tensors; when a
     * later, differently sized tensor does not fit them it reserves more.
     * The loss buffers (a few huge tensors of three sizes) and the
     * dequantised / copied weights are freed and re-allocated in varying
     * sizes every step; weights, states, gradients, the optimizer's
     * temporaries and the per-layer activations (the same sizes layer after
     * layer) reuse their blocks. So the slack is a fraction of the former,
     * and the reserved peak the largest phase with its slack. */
    double act_like[3] = {
        r->logits + r->head_grad + r->weight_temp,
        r->weight_temp,
        0,
    };
    r->reserved = 0;
    for (int i = 0; i < 3; i++) {
        double res = r->phase[i] + c->reserved_frac * act_like[i];
        if (res > r->reserved) r->reserved = res;
    }
    r->reserved += c->reserved_base_gib * GIB;
    r->cuda_context = (c->cuda_context_gib + (x->in->gpus > 1 ? c->nccl_gib : 0)) * GIB;
    cap_to_gpu(x->in->gpu_memory, r);
    r->allocator = r->reserved - r->allocated;
    switch (x->in->counter) {
    case EST_COUNTER_ALLOCATED: r->peak = r->allocated; break;
    case EST_COUNTER_RESERVED: r->peak = r->reserved; break;
    default: r->peak = r->device; break;
    }
}

void est_estimate(const est_input *in, const est_calib *c, est_result *out)
{
    if (!c) c = &est_calib_default;
    memset(out, 0, sizeof *out);
    est_ctx x;
    ctx_init(&x, in);
    weights(&x, out);
    trainable(&x, out);
    sharding(&x, out);
    activations(&x, out);
    logits(&x, out);
    weight_temp(&x, out);
    out->framework = c->framework_gib * GIB;
    phases(&x, c, out);
}
