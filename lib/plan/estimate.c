/* estimate.c: the GPU memory estimator's physical model. Every term is
 * derived from the architecture, the settings and the training stack (how
 * it computes the loss, the adapters' dtype, the optimizer step);
 * docs/estimator.md gives each formula with its source.
 *
 * The terms are sizes: what each kind of tensor takes when it is alive.
 * Added up per phase they give the phases below (no allocator), and
 * est_replay (estimate_replay.c) allocates every one of them, tensor by
 * tensor and in the order the step does, through a model of PyTorch's
 * caching allocator: the counters (allocated, reserved, device) come from
 * that replay.
 *
 * A training step has three peaks:
 *   forward+loss   weights, states, saved activations of every layer, the
 *                  logits and the loss buffers (and their backward)
 *   backward       weights, states, saved activations, the layer being
 *                  recomputed and back-propagated, the gradients so far
 *   optimizer step weights, states, every gradient, the step's temporaries
 */
#include "plan/estimate_internal.h"

#include <math.h>
#include <string.h>

/* Nothing here is fitted to the calibration rows (docs/estimator.md,
 * "Calibration"):
 *   framework_gib 0: every allocation the stacks make is a term or a
 *     buffer of the replay; bench_estimator --fit shows what a fit would
 *     add (and its cross-validation what that is worth)
 *   cuda_context_gib 0.5: a CUDA 12 context with lazy module loading
 *     (PyTorch sets CUDA_MODULE_LOADING=LAZY) on A100 / H100: PyTorch's
 *     notes on CUDA memory management say the context takes "several
 *     hundred MiB"; outside the caching allocator, device counter only
 *   nccl_gib 0.5: NCCL's buffers, NCCL_BUFFSIZE (4 MiB) per channel for
 *     each peer's send and receive, allocated by NCCL itself */
const est_calib est_calib_default = {
    .framework_gib = 0.0,
    .cuda_context_gib = 0.5,
    .nccl_gib = 0.5,
};

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

void est_ctx_init(est_ctx *x, const est_input *in)
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
    x->deepspeed = in->strategy == STRAT_ZERO2 || in->strategy == STRAT_ZERO3;
    x->deepspeed_amp = !fp32 && x->deepspeed; /* DeepSpeedEngine._configure_distributed_model */
    x->autocast = autocast_on(in, x->deepspeed_amp);
    x->a = fp32 ? 4 : 2;
    x->pb = (fp32 || amp) && !x->deepspeed_amp ? 4 : 2;
    x->ab = x->lora && in->adapter_fp32 && !x->deepspeed_amp ? 4 : x->pb;
    x->wb = x->pb;
    x->gb = x->pb;
    x->layers = (int)((x->m->layers + x->pp - 1) / x->pp);
    x->layer_frac = (double)x->layers / (double)x->m->layers;
    x->last_stage = true; /* the estimate is for the stage with the lm_head and the logits */
    x->first_stage = x->pp == 1;
    x->tokens = (double)in->batch * (double)in->seq;
}

/* DeepSpeedZeroConfig's overlap_comm default: None, made True for ZeRO-3
 * (stage == weights) and False below (deepspeed/runtime/zero/config.py). */
#define DS_OVERLAP_COMM(strategy) ((strategy) == STRAT_ZERO3)

/* ---- weights ---- */

/* Stored bits per quantised weight, scales included:
 *   NF4 (bitsandbytes): 4 + one fp32 absmax per 64-weight block = 4.5
 *   NF4 double-quantised: 4 + 8-bit absmax per 64 + fp32 per 256 absmax = 4.127
 *   int8 (LLM.int8): 8 + one fp32 scale per output row
 *   GPTQ (group 128): bits + fp16 scale and packed zero per group + int32 g_idx per input
 *   AWQ (group 128): 4 + fp16 scale and 4-bit zero per group
 * (bitsandbytes Params4bit / Int8Params, AutoGPTQ QuantLinear, AutoAWQ WQLinear.) */
double est_quant_bits(const est_input *in, int64_t in_features, int64_t out_features)
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
        bits += w * est_quant_bits(x->in, mods[i].in, mods[i].out);
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

/* The buffers and temporaries that are not tensors of the model:
 *   FSDP / ZeRO-3 gather each layer's 16-bit (or quantised) parameters
 *     before using it and prefetch the next, and gather the lm_head for
 *     the logits: what is gathered beyond the local shard, (1 - 1/dp)
 *   DDP keeps gradient buckets beside the gradients
 *     (gradient_as_bucket_view=False, the default): the gradients' size
 *   DeepSpeed ZeRO-2/3 with contiguous_gradients (DeepSpeedZeroConfig's
 *     default) copy each gradient into a flat bucket (the "ipg buffer") of
 *     reduce_bucket_size elements in the gradients' dtype; the Hugging Face
 *     integration's "auto" sets reduce_bucket_size to hidden x hidden
 *     (transformers integrations/deepspeed.py, trainer_config_finalize;
 *     DeepSpeed's own default is 5e8). ZeRO-2 allocates it in every
 *     backward() (stage_1_and_2.py DeepSpeedZeroOptimizer.backward), two of
 *     them with overlap_comm, and frees it after the reduction
 *     (_release_ipg_buffers); ZeRO-3 allocates one when it starts
 *     (stage3.py __ipg_bucket_flat_buffer) and keeps it. overlap_comm
 *     defaults to on for ZeRO-3 only (DeepSpeedZeroConfig.overlap_comm_valid)
 *   QLoRA dequantises each quantised matrix to the compute dtype for its
 *     matmuls (bitsandbytes dequantize_4bit, one at a time): the largest
 *   DoRA (PEFT's DoraLinearLayer.forward) builds B A from an identity in
 *     the activation dtype, then W + s B A in the adapter dtype to take its
 *     norms: (a + 3 x adapter bytes) x the largest adapted matrix
 *   amp makes 16-bit autocast copies of fp32 weights: one layer's */
void est_parts_of(const est_ctx *x, const est_result *r, est_parts *out)
{
    memset(out, 0, sizeof *out);
    double tp = x->tp;
    if (x->shard_params && x->dp > 1) {
        double layer_bytes = x->in->quant != QUANT_NONE
                                 ? (double)x->p.per_layer_linear * layer_quant_bits(x) / 8.0
                                 : (double)x->p.per_layer * 2.0;
        double head = (double)(x->p.lm_head ? x->p.lm_head : x->p.embedding) * 2.0;
        out->gather_layer = layer_bytes * (1.0 - 1.0 / x->dp) / tp;
        out->gather_head = head * (1.0 - 1.0 / x->dp) / tp;
    } else if (x->in->strategy == STRAT_DDP && x->dp > 1) {
        out->ddp_buckets = r->gradients;
    }
    if (x->deepspeed) {
        out->ds_bucket = (double)x->m->hidden * (double)x->m->hidden * x->gb;
        out->ds_buckets = x->in->strategy == STRAT_ZERO2 && DS_OVERLAP_COMM(x->in->strategy) ? 2 : 1;
    }
    double big = 0;
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(x->m, mods);
    for (size_t i = 0; i < n; i++) {
        double w = (double)mods[i].in * (double)mods[i].out;
        if (mods[i].per_layer && w > big) big = w;
    }
    if (x->in->quant != QUANT_NONE) out->dequant = x->a * big / tp;
    if (x->in->method == METHOD_DORA)
        out->dora = (x->a + 3.0 * x->ab) * (double)r->lora.max_in * (double)r->lora.max_out / tp;
    if (x->in->precision == PREC_AMP && !x->deepspeed_amp && x->in->quant == QUANT_NONE)
        out->amp_copy_layer = (double)x->p.per_layer_linear * 2.0 / tp;
}

static void sharding(const est_ctx *x, est_result *r)
{
    est_parts b;
    est_parts_of(x, r, &b);
    r->sharding = 2.0 * b.gather_layer + b.gather_head + b.ddp_buckets + b.ds_bucket * b.ds_buckets;
}

/* ---- activations ---- */

/* The input each projection reads, by role: 0 the attention input, 1 the
 * attention output (o_proj), 2 the MLP input, 3 the MLP product (down). */
static int input_slot(unsigned roles)
{
    if (roles & (MODEL_ROLE_Q | MODEL_ROLE_K | MODEL_ROLE_V)) return 0;
    if (roles & MODEL_ROLE_O) return 1;
    if (roles & (MODEL_ROLE_GATE | MODEL_ROLE_UP)) return 2;
    return 3;
}

/* Bytes of the input a LoRA branch keeps per element. PEFT's Linear
 * casts x to lora_A's dtype (`x = x.to(lora_A.weight.dtype)`), so fp32
 * adapters keep an fp32 copy; its bitsandbytes layers skip the cast under
 * autocast (`requires_conversion = not torch.is_autocast_enabled()`). */
static double lora_input_bytes(const est_ctx *x)
{
    bool cast = x->ab == 4 && x->a < 4 && (x->in->quant == QUANT_NONE || !x->autocast);
    return cast ? 4.0 : x->a;
}

static void put(est_layer *l, double bytes, est_dies dies, bool mlp)
{
    if (bytes <= 0 || l->n >= EST_LAYER_MAX) return;
    l->t[l->n++] = (est_ltensor){bytes, dies, mlp, false};
}

/* What the layer's projections keep for backward, per slot. A trained
 * weight needs its input (each distinct input is kept once). A LoRA branch
 * keeps its input (a dropout copy plus a one-byte mask per adapted module
 * when dropout > 0, PEFT's lora_dropout) and lora_A's output; DoRA also
 * keeps the base and LoRA results to differentiate the magnitude. The
 * LoRA branch's output (lora_B's) lives until it is added to the base
 * output. saved_input[slot] says whether the shared input itself is kept. */
static void projection_tensors(const est_ctx *x, int slot_lo, int slot_hi, est_layer *l,
                               bool saved_input[4])
{
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(x->m, mods);
    double a = x->a, la = lora_input_bytes(x), tp = x->tp;
    bool kept[4] = {false, false, false, false};
    bool dropout = x->in->lora_dropout > 0;
    /* LitGPT's LoRAQKVLinear runs one dropout over the fused qkv input */
    bool shared_qkv = x->in->stack == EST_STACK_LITGPT, qkv_done = false;
    for (size_t i = 0; i < n; i++) {
        if (!mods[i].per_layer) continue;
        bool adapted = x->lora && (mods[i].roles & x->in->targets);
        if (!x->full && !adapted) continue;
        int slot = input_slot(mods[i].roles);
        bool mine = slot >= slot_lo && slot <= slot_hi, mlp = slot >= 2;
        est_dies half = mlp ? EST_DIES_MLP : EST_DIES_ATTN;
        bool own_copy = adapted && (dropout || la != a) && !(shared_qkv && slot == 0 && qkv_done);
        double in = (double)mods[i].in / tp;
        if (own_copy) {
            if (mine) put(l, la * in, EST_DIES_BACKWARD, mlp);
            if (mine && dropout) put(l, in, EST_DIES_BACKWARD, mlp); /* the dropout mask */
        } else if (!kept[slot]) {
            if (mine) put(l, a * in, EST_DIES_BACKWARD, mlp);
            saved_input[slot] = true;
        }
        if (adapted && slot == 0) qkv_done = true;
        kept[slot] = true;
        if (adapted && mine) {
            put(l, (x->autocast ? a : la) * x->in->rank / tp, EST_DIES_BACKWARD, mlp); /* lora_A's output */
            if (x->in->method == METHOD_DORA) put(l, 2.0 * a * (double)mods[i].out / tp, EST_DIES_BACKWARD, mlp);
            put(l, a * (double)mods[i].out / tp, half, mlp); /* lora_B's output */
        }
    }
}

/* The RMSNorms of one half: its input upcast to fp32 is kept (4h;
 * `hidden_states.to(torch.float32)` is kept by `pow` and the multiply),
 * and the normalised value too when the norm's weight is trained; a
 * compiled (fused) norm keeps only its 16-bit input. Gemma-2's four norms
 * are split between the halves. */
static void norm_tensors(const est_ctx *x, int count, bool mlp, est_layer *l)
{
    double h = (double)x->m->hidden, keep = x->in->compiled ? x->a : 4.0;
    for (int i = 0; i < count; i++) {
        put(l, keep * h, EST_DIES_BACKWARD, mlp);
        if (x->full) put(l, x->a * h, EST_DIES_BACKWARD, mlp);
    }
}

/* One decoder layer's forward (the layer code of transformers' Llama
 * family and torchtune), tensor by tensor:
 *   attention half: the norm; the projections' kept inputs and LoRA
 *     tensors; q, k, v (transient); the per-head q/k norms (Qwen3); q and
 *     k after RoPE, k and v repeated to every query head before SDPA, the
 *     output and the fp32 log-sum-exp; in eager attention the fp32 softmax
 *     and its cast, (4 + a) x heads x seq per token; o_proj's output and
 *     the residual sum
 *   MLP half: the norm; the kept inputs; the gate output (kept by the
 *     activation), the activation's output and the up output (kept by the
 *     product; compiled: the activation is recomputed); the product when
 *     no one keeps it; down's output
 * The saved tensors add up to the per-layer figure of docs/estimator.md. */
void est_layer_tensors(const est_ctx *x, est_layer *l)
{
    const model_shape *m = x->m;
    double a = x->a, h = (double)m->hidden, I = (double)m->intermediate / x->tp, tp = x->tp;
    double qd = (double)(m->heads * m->head_dim), kvd = (double)(m->kv_heads * m->head_dim);
    double heads = (double)m->heads / tp;
    bool saved_input[4] = {false, false, false, false};
    int norms_attn = (m->norms_per_layer + 1) / 2;
    l->n = 0;
    /* attention half */
    norm_tensors(x, 1, false, l);
    int mark = l->n;
    projection_tensors(x, 0, 0, l, saved_input);
    if (!saved_input[0]) { /* the normalised input, read by q, k, v only */
        memmove(&l->t[mark + 1], &l->t[mark], (size_t)(l->n - mark) * sizeof l->t[0]);
        l->t[mark] = (est_ltensor){a * h, EST_DIES_ATTN, false, false};
        l->n++;
    }
    put(l, a * (qd + 2.0 * kvd) / tp, EST_DIES_ATTN, false); /* q, k, v projections */
    if (m->qk_norm) put(l, (x->in->compiled ? a : 4.0) * (qd + kvd), EST_DIES_BACKWARD, false);
    for (int i = 0; i < 4; i++) put(l, a * qd / tp, EST_DIES_BACKWARD, false); /* q, k, v, out */
    put(l, 4.0 * heads, EST_DIES_BACKWARD, false);                             /* log-sum-exp */
    if (!x->in->flash_attn) {
        double s = (double)x->in->seq;
        l->t[l->n] = (est_ltensor){4.0 * heads * s, EST_DIES_BACKWARD, false, true};
        l->n++;
        l->t[l->n] = (est_ltensor){a * heads * s, EST_DIES_BACKWARD, false, true};
        l->n++;
    }
    projection_tensors(x, 1, 1, l, saved_input);
    put(l, a * h, EST_DIES_ATTN, false); /* o_proj's output */
    norm_tensors(x, norms_attn - 1, false, l);
    put(l, a * h, EST_DIES_MLP, false); /* the residual sum, read by the MLP half's add */
    /* MLP half */
    norm_tensors(x, 1, true, l);
    mark = l->n;
    projection_tensors(x, 2, 2, l, saved_input);
    if (!saved_input[2]) {
        memmove(&l->t[mark + 1], &l->t[mark], (size_t)(l->n - mark) * sizeof l->t[0]);
        l->t[mark] = (est_ltensor){a * h, EST_DIES_MLP, true, false};
        l->n++;
    }
    int kept_mlp = x->in->compiled ? 2 : 3;
    for (int i = 0; i < kept_mlp; i++) put(l, a * I, EST_DIES_BACKWARD, true);
    projection_tensors(x, 3, 3, l, saved_input);
    if (!saved_input[3]) put(l, a * I, EST_DIES_MLP, true); /* the product, read by down only */
    norm_tensors(x, m->norms_per_layer - norms_attn - 1, true, l);
    put(l, a * h, EST_DIES_MLP, true); /* down's output */
}

/* Bytes per token one decoder layer keeps for backward without
 * checkpointing: its saved tensors; *eager receives the seq x seq part. */
static double layer_saved_per_token(const est_ctx *x, double *eager)
{
    est_layer l;
    est_layer_tensors(x, &l);
    double saved = 0;
    *eager = 0;
    for (int i = 0; i < l.n; i++) {
        if (l.t[i].dies != EST_DIES_BACKWARD) continue;
        saved += l.t[i].bytes;
        if (l.t[i].eager) *eager += l.t[i].bytes;
    }
    return saved;
}

/* Working memory of one layer's backward per token: the gradients of the
 * MLP's three intermediate tensors and of the layer's input and output; in
 * eager attention also the softmax backward's fp32 buffers and cast. */
double est_layer_backward_work(const est_ctx *x)
{
    const model_shape *m = x->m;
    double a = x->a;
    double work = a * (3.0 * (double)m->intermediate / x->tp + 2.0 * (double)m->hidden);
    if (!x->in->flash_attn) work += (8.0 + a) * (double)m->heads * (double)x->in->seq / x->tp;
    return work;
}

/* bitsandbytes' MatMul4Bit.forward (bitsandbytes/autograd/_functions.py,
 * 0.41.3 @c75b6de and still at 0.43.1) keeps its input as a plain ctx
 * attribute, `ctx.tensors = (A, B)`, not through save_for_backward, where
 * A is Linear4bit.forward's `x.to(self.compute_dtype)` (nn/modules.py).
 * Reentrant checkpointing runs the layer's first forward under no_grad
 * (no graph, nothing kept); non-reentrant checkpointing
 * (torch.utils.checkpoint, use_reentrant=False) records the graph and
 * only replaces the tensors saved through saved_tensors hooks, so A stays
 * with the graph's node until the layer's backward. A is the module's
 * input: one tensor per distinct input (the attention input for q, k, v;
 * the attention output for o; the MLP input for gate and up; the MLP
 * product for down) when the model is in the compute dtype, a copy per
 * module when it is not (bnb_input_cast). Answer.AI's train.py
 * (reentrant_checkpointing: "Setting to True can use less GPU memory with
 * BNB QLoRA") names the effect. */
size_t est_ctx_inputs(const est_ctx *x, double bytes[], bool mlp[], bool late[])
{
    const est_input *in = x->in;
    if (!in->grad_ckpt || !in->ckpt_nonreentrant || in->offload_checkpoints) return 0;
    if (in->quant != QUANT_NF4 && in->quant != QUANT_NF4_DQ) return 0;
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(x->m, mods), k = 0;
    unsigned seen = 0; /* input groups already kept: 1 attention input, 2 MLP input */
    for (size_t i = 0; i < n; i++) {
        if (!mods[i].per_layer) continue;
        unsigned r = mods[i].roles;
        bool sharded_in = (r & (MODEL_ROLE_O | MODEL_ROLE_DOWN)) != 0; /* row-parallel inputs */
        unsigned group = (r & (MODEL_ROLE_Q | MODEL_ROLE_K | MODEL_ROLE_V)) ? 1u
                         : (r & (MODEL_ROLE_GATE | MODEL_ROLE_UP)) ? 2u : 0u;
        if (!in->bnb_input_cast && group) {
            if (seen & group) continue;
            seen |= group;
        }
        bytes[k] = x->a * (double)mods[i].in / (sharded_in ? x->tp : 1);
        mlp[k] = (r & MODEL_ROLES_MLP) != 0;
        late[k] = sharded_in;
        k++;
    }
    return k;
}

double est_ctx_inputs_per_token(const est_ctx *x)
{
    double b[MODEL_MAX_MODULES], sum = 0;
    bool mlp[MODEL_MAX_MODULES], late[MODEL_MAX_MODULES];
    size_t n = est_ctx_inputs(x, b, mlp, late);
    for (size_t i = 0; i < n; i++) sum += b[i];
    return sum;
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
    double work = est_layer_backward_work(x) * x->tokens;
    if (x->in->grad_ckpt) {
        /* checkpoints offloaded to CPU memory: none stays on the GPU but the
         * layer's in backward */
        int kept = x->in->offload_checkpoints ? 0 : x->layers;
        r->activations = kept * (r->act_checkpoint + est_ctx_inputs_per_token(x) * x->tokens) + head_in;
        r->layer_backward = r->act_per_layer + work + (kept ? 0 : r->act_checkpoint);
    } else {
        r->activations = x->layers * r->act_per_layer + head_in;
        r->layer_backward = work;
    }
}

static void logits(const est_ctx *x, est_result *r)
{
    if (!x->last_stage) return;
    est_loss_plan lp;
    est_loss_plan_of(x, &lp);
    double V = (double)x->m->vocab / x->tp;
    r->loss_vocab_bytes = est_loss_plan_peak(&lp);
    r->logits = r->loss_vocab_bytes * V * x->tokens;
    if (x->full) r->head_grad = (double)x->m->vocab * (double)x->m->hidden * x->gb / x->tp /
                                (x->shard_grads ? x->dp : 1);
}

/* Temporary weight copies alive while a layer computes (est_parts_of):
 * the dequantised matrix, DoRA's norm temporaries, and amp's copies of
 * every layer's weights (trained weights are cached for the whole
 * forward, frozen ones kept for backward: every layer without
 * checkpointing, one with it). */
static void weight_temp(const est_ctx *x, est_result *r)
{
    est_parts b;
    est_parts_of(x, r, &b);
    bool all_layers = x->full || !x->in->grad_ckpt;
    r->weight_temp = b.dequant + b.dora + b.amp_copy_layer * (all_layers ? x->layers : 1);
}

/* ---- phases ---- */

/* The terms alive in each phase, added up: the allocated figure an
 * allocator without rounding or transients would show. */
static void phases(const est_ctx *x, est_result *r)
{
    double states_in_counter = r->optimizer - r->optimizer_paged;
    double persistent = r->weights_quantised + r->weights_dense + r->adapter + states_in_counter;
    double fixed = persistent + r->sharding + r->framework;
    double grads_in_backward = x->full ? r->head_grad : r->gradients;
    r->phase[EST_PHASE_LOSS] = fixed + r->activations + r->logits + r->head_grad + r->weight_temp;
    r->phase[EST_PHASE_BACKWARD] = fixed + r->activations + r->layer_backward + grads_in_backward +
                                   r->weight_temp;
    r->phase[EST_PHASE_STEP] = fixed + r->gradients + r->optimizer_temp;
}

static void terms(const est_input *in, const est_calib *c, est_result *out, est_ctx *x)
{
    if (!c) c = &est_calib_default;
    memset(out, 0, sizeof *out);
    est_ctx_init(x, in);
    weights(x, out);
    trainable(x, out);
    sharding(x, out);
    activations(x, out);
    logits(x, out);
    weight_temp(x, out);
    out->framework = c->framework_gib * GIB;
    phases(x, out);
}

void est_terms(const est_input *in, const est_calib *c, est_result *out)
{
    est_ctx x;
    terms(in, c, out, &x);
}

static void estimate(const est_input *in, const est_calib *c, est_result *out, ca_snapshot *snap)
{
    est_ctx x;
    terms(in, c, out, &x);
    est_replay(&x, c ? c : &est_calib_default, out, snap);
}

void est_estimate(const est_input *in, const est_calib *c, est_result *out)
{
    estimate(in, c, out, NULL);
}

void est_estimate_explain(const est_input *in, const est_calib *c, est_result *out, ca_snapshot *snap)
{
    estimate(in, c, out, snap);
}
