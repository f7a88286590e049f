/* estimate_replay.c: the training step as the caching allocator sees it.
 *
 * Every term of estimate.c is allocated here tensor by tensor, in the order
 * the step allocates and frees them, through the model of PyTorch's CUDA
 * caching allocator (cachealloc.h): loading (weights, the quantisation's
 * temporaries, PEFT's casts, adapters, DDP buckets), then micro steps:
 *   forward    the batch, the embedding, each decoder layer (est_layer:
 *              saved tensors kept, transients freed at the end of their
 *              half; with checkpointing every layer keeps only its input),
 *              the final norm, the lm_head and the loss's forward
 *              (est_loss_plan), with FSDP / ZeRO-3 gathering each layer and
 *              prefetching the next
 *   backward   the loss's backward, the lm_head's, then each layer from the
 *              last: recomputed (checkpointing), its gradients, the
 *              trainable parameters' gradients as they are produced
 *   step       every grad_accum micro steps: the optimizer's states (made
 *              at its first step), its temporaries, zero_grad(set_to_none)
 * The allocator's counters give allocated (max_memory_allocated) and
 * reserved (max_memory_reserved); at each counter's peak the bytes alive
 * per term are recorded for the breakdown.
 *
 * Sample lengths: with seq_sd = 0 every micro batch has seq tokens, and
 * two optimizer steps repeat what every later one does (the first makes
 * the optimizer's states; micro steps after the second of a step repeat
 * it), so that is what is replayed. With varying lengths each micro batch
 * is padded to its longest sample, lengths drawn from a log-normal with the
 * input's mean and standard deviation cut at seq, for EST_VARIED_STEPS
 * micro steps: the cache the allocator keeps from short batches is what a
 * long one cannot use (docs/estimator.md). The counters are the mean of
 * EST_VARIED_RUNS such replays from fixed seeds. */
#include "plan/estimate_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* cuBLAS workspace, one per (handle, stream), allocated through the
 * caching allocator (ATen CublasHandlePool.cpp): getChosenWorkspaceSize's
 * default CUBLAS_WORKSPACE_CONFIG ":4096:2:16:8" is 4096 KiB x 2 + 16 KiB
 * x 8 (Hopper's ":4096:8" is 32 MiB). The forward runs on the Python
 * thread, the backward on the autograd engine's device thread: two
 * handles. */
#define CUBLAS_WORKSPACE (4096.0 * 1024 * 2 + 16.0 * 1024 * 8)
/* DDP's gradient buckets (bucket_cap_mb default 25). */
#define DDP_BUCKET (25.0 * 1024 * 1024)
/* Micro steps replayed when sample lengths vary. */
#define EST_VARIED_STEPS 48
/* Replays averaged when lengths vary: which lengths come first decides
 * which cached blocks a long batch cannot use, so one run is one draw;
 * the estimate is the mean of EST_VARIED_RUNS draws from fixed seeds. */
#define EST_VARIED_RUNS 96
#define EST_SEED 0x6c61746865ull

/* One trainable parameter tensor (elements on this GPU). */
typedef struct rp_param {
    double elems;
    int layer;  /* -1: the embedding, layers: the lm_head, layers + 1: final norm */
    int half;   /* 0 attention, 1 MLP (decoder layers) */
    bool head;  /* the lm_head's weight (its gradient is the lm_head_gradient term) */
    int grad;   /* handle of its gradient, -1 when none */
    int state[2];
} rp_param;

typedef struct rp {
    const est_ctx *x;
    const est_result *r;
    ca_allocator *ca;
    int phase;
    double live[EST_T_COUNT];
    int *tag_of;
    size_t cap_tag;
    long event, snap_event;
    ca_snapshot *snap;
    /* peaks */
    double alloc_peak, at_alloc[EST_T_COUNT];
    int alloc_phase;
    long alloc_event;
    double res_peak, res_alloc, at_res[EST_T_COUNT];
    int res_phase;
    long res_event;
    unsigned long res_segments;
    double phase_peak[3];
    /* the model */
    est_layer layer;
    rp_param *params;
    size_t n_params;
    size_t *layer_first;  /* per decoder layer: its first parameter (they come layer by layer) */
    bool states_made;
    int ws_fwd, ws_bwd;
    /* DeepSpeed ZeRO: the flat gradient partition of this GPU (ZeRO-2: made
     * at the first reduction of an accumulation cycle; ZeRO-3: when the
     * engine starts, held), ZeRO-2's partition of the latest micro step
     * when accumulating, whether this micro step made its partition yet,
     * and the trainable elements on this GPU */
    int ds_part, ds_new, ds_ipg[2];
    bool ds_reduced, ds_cycle_started;
    double ds_local;
    est_parts parts;
    int steps;
    uint64_t seed;
} rp;

/* ---- allocations ---- */

static void note_peaks(rp *p)
{
    const ca_stats *st = ca_get_stats(p->ca);
    double al = (double)st->allocated, res = (double)st->reserved;
    if (al > p->alloc_peak) {
        p->alloc_peak = al;
        memcpy(p->at_alloc, p->live, sizeof p->live);
        p->alloc_phase = p->phase;
        p->alloc_event = p->event;
    }
    if (al > p->phase_peak[p->phase]) p->phase_peak[p->phase] = al;
    if (res > p->res_peak || (res == p->res_peak && al > p->res_alloc)) {
        p->res_peak = res;
        p->res_alloc = al;
        memcpy(p->at_res, p->live, sizeof p->live);
        p->res_phase = p->phase;
        p->res_event = p->event;
        p->res_segments = st->n_segments;
    }
}

/* torch.cuda.reset_peak_memory_stats(): the peaks restart from what is
 * allocated and reserved now. */
static void reset_peaks(rp *p)
{
    ca_reset_peaks(p->ca);
    p->alloc_peak = p->res_peak = p->res_alloc = 0;
    memset(p->phase_peak, 0, sizeof p->phase_peak);
    note_peaks(p);
}

/* 1 TiB: far beyond any device; keeps the sums of absurd inputs (a
 * fuzzer's) inside uint64_t. */
#define RP_MAX_TENSOR 1099511627776.0

static int rp_alloc(rp *p, double bytes, est_term_tag tag)
{
    if (!(bytes >= 1)) return -1;
    if (bytes > RP_MAX_TENSOR) bytes = RP_MAX_TENSOR;
    int h = ca_malloc(p->ca, (uint64_t)ceil(bytes), (int)tag);
    if ((size_t)h >= p->cap_tag) {
        size_t cap = p->cap_tag ? p->cap_tag : 1024;
        while (cap <= (size_t)h) cap *= 2;
        p->tag_of = xrealloc(p->tag_of, cap * sizeof *p->tag_of);
        p->cap_tag = cap;
    }
    p->tag_of[h] = (int)tag;
    p->live[tag] += (double)ca_block_size(p->ca, h);
    p->event++;
    note_peaks(p);
    if (p->snap && p->event == p->snap_event) ca_snapshot_take(p->ca, p->snap);
    return h;
}

static void rp_free(rp *p, int *h)
{
    if (*h < 0) return;
    p->live[p->tag_of[*h]] -= (double)ca_block_size(p->ca, *h);
    ca_free(p->ca, *h);
    *h = -1;
}

/* ---- the parameters ---- */

static void add_param(rp *p, double elems, int layer, int half, bool head)
{
    if (elems <= 0) return;
    p->params = xrealloc(p->params, (p->n_params + 1) * sizeof *p->params);
    p->params[p->n_params++] = (rp_param){elems, layer, half, head, -1, {-1, -1}};
}

/* The trainable tensors on this GPU, in the model's order: LoRA A, B (and
 * DoRA's magnitude) per adapted module, or every weight of a full
 * fine-tune. Sharded (FSDP, ZeRO) gradients and states are 1/dp of them. */
static void collect_params(rp *p)
{
    const est_ctx *x = p->x;
    double tp = x->tp, shard = x->shard_grads ? x->dp : 1;
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(x->m, mods);
    int r = x->in->rank;
    bool dora = x->in->method == METHOD_DORA;
    if (x->full && x->first_stage) add_param(p, (double)x->p.embedding / tp / shard, -1, 0, false);
    p->layer_first = xmalloc(((size_t)x->layers + 1) * sizeof *p->layer_first);
    for (int l = 0; l < x->layers; l++) {
        p->layer_first[l] = p->n_params;
        for (size_t i = 0; i < n; i++) {
            if (!mods[i].per_layer) continue;
            int half = mods[i].roles & MODEL_ROLES_MLP ? 1 : 0;
            double in = (double)mods[i].in, out = (double)mods[i].out;
            if (x->full) {
                add_param(p, in * out / tp / shard, l, half, false);
            } else if (mods[i].roles & x->in->targets) { /* as model_lora_params counts them */
                add_param(p, r * in / tp / shard, l, half, false);
                add_param(p, r * out / tp / shard, l, half, false);
                if (dora) add_param(p, out / tp / shard, l, half, false);
            }
        }
        if (x->full) /* norms and biases of the layer */
            add_param(p, (double)(x->p.per_layer - x->p.per_layer_linear) / tp / shard, l, 1, false);
    }
    p->layer_first[x->layers] = p->n_params;
    if (x->full) {
        add_param(p, (double)x->p.final_norm / shard, x->layers + 1, 0, false);
        if (x->last_stage && x->p.lm_head) add_param(p, (double)x->p.lm_head / tp / shard, x->layers, 0, true);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (mods[i].per_layer || !(mods[i].roles & x->in->targets)) continue;
        bool emb = mods[i].roles & MODEL_ROLE_EMBED;
        if (emb ? !x->first_stage : !x->last_stage) continue;
        int where = emb ? -1 : x->layers;
        add_param(p, r * ((double)mods[i].in + (double)mods[i].out) / tp / shard, where, 0, false);
        if (dora) add_param(p, (double)mods[i].out / tp / shard, where, 0, false);
    }
}

/* Bytes of one element of a trainable tensor (its gradient, a state). */
static double train_elt(const est_ctx *x)
{
    return x->full ? x->gb : x->ab;
}

/* The gradient of param i is produced: allocated the first time in an
 * accumulation cycle, else a temporary added into it (AccumulateGrad). */
static void produce_grad(rp *p, rp_param *q)
{
    const est_ctx *x = p->x;
    if (x->deepspeed) {
        /* autograd makes the whole gradient (ZeRO-2 does not shard the
         * parameters; ZeRO-3 gathers them for the backward); the hook
         * copies it into the ipg bucket and frees it. ZeRO-2 then copies
         * this GPU's part into grads_in_partition, one flat buffer made at
         * the first reduction of a backward (copy_grads_in_partition) and
         * dropped with the bucket (_release_ipg_buffers): with
         * accumulation the first stays as averaged_gradients, the later
         * ones are added into it and live until the next micro step's
         * replaces them. ZeRO-3 reduces into its held partition buffer. */
        int whole = rp_alloc(p, q->elems * x->dp * train_elt(x), EST_T_LAYER_BWD);
        rp_free(p, &whole);
        if (x->in->strategy == STRAT_ZERO2 && !p->ds_reduced) {
            int h = rp_alloc(p, p->ds_local * train_elt(x), EST_T_GRADS);
            if (!p->ds_cycle_started) {
                p->ds_part = h;
            } else {
                rp_free(p, &p->ds_new);
                p->ds_new = h;
            }
            p->ds_reduced = true;
            p->ds_cycle_started = true;
        }
        return;
    }
    double bytes = q->elems * train_elt(p->x);
    est_term_tag tag = q->head ? EST_T_HEAD_GRAD : EST_T_GRADS;
    if (q->grad < 0) {
        q->grad = rp_alloc(p, bytes, tag);
    } else {
        int t = rp_alloc(p, bytes, EST_T_LAYER_BWD);
        rp_free(p, &t);
    }
}

static void layer_grads(rp *p, int layer, int half)
{
    size_t lo = 0, hi = p->n_params;
    if (layer >= 0 && layer < p->x->layers) { /* a decoder layer's own range */
        lo = p->layer_first[layer];
        hi = p->layer_first[layer + 1];
    }
    for (size_t i = lo; i < hi; i++)
        if (p->params[i].layer == layer && p->params[i].half == half) produce_grad(p, &p->params[i]);
}

/* ---- loading ---- */

static bool bnb_quant(const est_input *in)
{
    return in->quant == QUANT_NF4 || in->quant == QUANT_NF4_DQ || in->quant == QUANT_INT8;
}

/* A growable list of handles and their sizes. */
typedef struct rp_list {
    int *h;
    double *bytes;
    size_t n, cap;
} rp_list;

static void list_add(rp_list *l, int h, double bytes)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->h = xrealloc(l->h, l->cap * sizeof *l->h);
        l->bytes = xrealloc(l->bytes, l->cap * sizeof *l->bytes);
    }
    l->h[l->n] = h;
    l->bytes[l->n++] = bytes;
}

static void list_free(rp_list *l)
{
    free(l->h);
    free(l->bytes);
    memset(l, 0, sizeof *l);
}

/* torchao 0.1's NF4Tensor.from_tensor on a bf16 matrix of w elements, in
 * one piece (torchao/dtypes/nf4tensor.py at v0.1; chunks of 2^20 elements
 * from 0.2, PR 196): get_block_absmax's blocks.abs() (2w, freed), the
 * scaled blocks (2w), quantize_tensor_nearest's `value - nf4` over the 16
 * NF4 values (32w, bf16) and its .abs() (32w) alive together, then
 * diff.min's values (2w) and int64 indices (8w), and the packing
 * `quantized[::2] << 4 | quantized[1::2]` (two int64 halves, 4w each).
 * Returns the packed int64 handle, freed once the uint8 copy exists. */
static int nf4_whole_quantise(rp *p, double w)
{
    int absd = rp_alloc(p, 2.0 * w, EST_T_WEIGHT_TEMP);
    rp_free(p, &absd);
    int scaled = rp_alloc(p, 2.0 * w, EST_T_WEIGHT_TEMP);
    int sub = rp_alloc(p, 32.0 * w, EST_T_WEIGHT_TEMP);
    int diff = rp_alloc(p, 32.0 * w, EST_T_WEIGHT_TEMP);
    rp_free(p, &sub);
    int vals = rp_alloc(p, 2.0 * w, EST_T_WEIGHT_TEMP);
    int idx = rp_alloc(p, 8.0 * w, EST_T_WEIGHT_TEMP);
    rp_free(p, &vals);
    rp_free(p, &diff);
    rp_free(p, &scaled);
    int shifted = rp_alloc(p, 4.0 * w, EST_T_WEIGHT_TEMP);
    int packed = rp_alloc(p, 4.0 * w, EST_T_WEIGHT_TEMP);
    rp_free(p, &shifted);
    rp_free(p, &idx);
    return packed;
}

/* Weights in the model's order (sharded by FSDP / ZeRO-3). A
 * bitsandbytes base quantises each matrix as it reaches the GPU: its
 * 16-bit copy comes first (Params4bit.cuda / Int8Params.cuda) and goes once
 * quantised. PEFT's prepare_model_for_kbit_training then casts the
 * unquantised weights to fp32, a new tensor each; the 16-bit ones stay
 * cached. */
static void load_weights(rp *p)
{
    const est_ctx *x = p->x;
    const est_input *in = x->in;
    bool quant = in->quant != QUANT_NONE;
    bool recast = quant && p->r->dense_fp32 && in->precision != PREC_FP32;
    double tp = x->tp, dp = x->shard_params ? x->dp : 1;
    double dense_b = quant ? (in->precision == PREC_FP32 ? 4 : 2) : x->wb;
    model_module mods[MODEL_MAX_MODULES];
    size_t n = model_modules(x->m, mods);
    rp_list dense = {0};
    if (x->first_stage) {
        double e = (double)x->p.embedding / tp / dp;
        list_add(&dense, rp_alloc(p, e * dense_b, EST_T_WEIGHTS), e);
    }
    for (int l = 0; l < x->layers; l++) {
        for (size_t i = 0; i < n; i++) {
            if (!mods[i].per_layer) continue;
            double w = (double)mods[i].in * (double)mods[i].out / tp / dp;
            if (!quant) {
                rp_alloc(p, w * x->wb, EST_T_WEIGHTS);
                continue;
            }
            int tmp = bnb_quant(in) ? rp_alloc(p, 2.0 * w, EST_T_WEIGHT_TEMP) : -1;
            int packed = in->nf4_whole && tmp >= 0 ? nf4_whole_quantise(p, w) : -1;
            rp_alloc(p, w * est_quant_bits(in, mods[i].in, mods[i].out) / 8.0, EST_T_WEIGHTS_Q);
            rp_free(p, &packed);
            rp_free(p, &tmp);
        }
        double rest = (double)(x->p.per_layer - x->p.per_layer_linear) / tp / dp;
        list_add(&dense, rp_alloc(p, rest * dense_b, EST_T_WEIGHTS), rest);
    }
    double fn = (double)x->p.final_norm / dp;
    list_add(&dense, rp_alloc(p, fn * dense_b, EST_T_WEIGHTS), fn);
    if (x->last_stage) {
        uint64_t head = x->p.lm_head ? x->p.lm_head : (x->first_stage ? 0 : x->p.embedding);
        double e = (double)head / tp / dp;
        if (head) list_add(&dense, rp_alloc(p, e * dense_b, EST_T_WEIGHTS), e);
    }
    if (recast)
        for (size_t i = 0; i < dense.n; i++) {
            rp_alloc(p, dense.bytes[i] * 4.0, EST_T_WEIGHTS);
            rp_free(p, &dense.h[i]);
        }
    list_free(&dense);
}

/* Adapters (PEFT builds them on the base layer's device; FSDP shards
 * them), DeepSpeed's fp32 master weights and states (made when the engine
 * starts), DDP's buckets, DeepSpeed's reduction bucket, and what a fit
 * adds. */
static void load_training_state(rp *p)
{
    const est_ctx *x = p->x;
    double unshard = x->shard_grads && !x->shard_params ? x->dp : 1; /* ZeRO-2: full adapters */
    if (x->lora)
        for (size_t i = 0; i < p->n_params; i++)
            rp_alloc(p, p->params[i].elems * unshard * x->ab, EST_T_ADAPTER);
    if (x->deepspeed_amp && x->in->optimizer != OPT_SGD) { /* fp32 master, then m and v */
        for (size_t i = 0; i < p->n_params; i++) rp_alloc(p, p->params[i].elems * 4.0, EST_T_STATES);
        for (size_t i = 0; i < p->n_params; i++)
            for (int k = 0; k < 2; k++) p->params[i].state[k] = rp_alloc(p, p->params[i].elems * 4.0, EST_T_STATES);
        p->states_made = true;
    }
    for (double left = p->parts.ddp_buckets; left >= 1; left -= DDP_BUCKET)
        rp_alloc(p, left < DDP_BUCKET ? left : DDP_BUCKET, EST_T_SHARDING);
    p->ds_part = p->ds_new = -1;
    p->ds_local = 0;
    for (size_t i = 0; i < p->n_params; i++) p->ds_local += p->params[i].elems;
    if (x->in->strategy == STRAT_ZERO3) {
        /* stage3.py: initialize_optimizer_states' fp32 gradient_buffer
         * (sub_group_size 1e9: the whole partition), then the held ipg
         * bucket and grad_partitions_flat_buffer */
        int gb = rp_alloc(p, p->ds_local * 4.0, EST_T_OPT_TEMP);
        rp_free(p, &gb);
        rp_alloc(p, p->parts.ds_bucket, EST_T_SHARDING);
        p->ds_part = rp_alloc(p, p->ds_local * train_elt(x), EST_T_GRADS);
    }
    rp_alloc(p, p->r->framework, EST_T_FRAMEWORK);
}

/* ---- one micro step ---- */

typedef struct rp_step {
    double n;       /* tokens in the micro batch */
    double samples; /* sequences in it */
    double scale;   /* its padded length / seq: the attention scores' per-token bytes */
    int *ckpt;      /* per layer: its input, kept as the checkpoint */
    int *saved;     /* per layer: EST_LAYER_MAX handles of its saved tensors */
    int *gather;    /* per layer: FSDP / ZeRO-3 gathered parameters */
    int *wcopy;     /* per layer: amp's 16-bit weight copies */
    int *ctxin;     /* per layer: MODEL_MAX_MODULES inputs bitsandbytes keeps on ctx (est_ctx_inputs) */
} rp_step;

static void gather(rp *p, rp_step *s, int l, int dir)
{
    if (p->parts.gather_layer <= 0) return;
    if (s->gather[l] < 0) s->gather[l] = rp_alloc(p, p->parts.gather_layer, EST_T_SHARDING);
    int nx = l + dir;
    if (nx >= 0 && nx < p->x->layers && s->gather[nx] < 0)
        s->gather[nx] = rp_alloc(p, p->parts.gather_layer, EST_T_SHARDING);
}

/* The temporary weights of one half of a layer while it computes: the
 * dequantised matrix (QLoRA), DoRA's norm temporaries. */
static void half_temps(rp *p)
{
    int a = rp_alloc(p, p->parts.dequant, EST_T_WEIGHT_TEMP);
    int b = rp_alloc(p, p->parts.dora, EST_T_WEIGHT_TEMP);
    rp_free(p, &b);
    rp_free(p, &a);
}

/* The inputs a bitsandbytes 4-bit layer keeps on ctx in the layer's first
 * forward under non-reentrant checkpointing (est_ctx_inputs): those of
 * one half made at its start (late false) or its end (late true); they
 * stay until the layer's backward. */
static void ctx_inputs(rp *p, rp_step *s, int l, bool mlp, bool late)
{
    double b[MODEL_MAX_MODULES];
    bool m[MODEL_MAX_MODULES], lt[MODEL_MAX_MODULES];
    size_t n = est_ctx_inputs(p->x, b, m, lt);
    int *h = &s->ctxin[(size_t)l * MODEL_MAX_MODULES];
    for (size_t i = 0; i < n; i++)
        if (m[i] == mlp && lt[i] == late && h[i] < 0) h[i] = rp_alloc(p, b[i] * s->n, EST_T_ACTS);
}

/* One layer's forward. keep: autograd records it, and its saved tensors
 * stay until the layer's backward; else (a checkpointed forward, under
 * no_grad) every tensor dies with its half. */
static void layer_forward(rp *p, rp_step *s, int l, bool keep, est_term_tag tag)
{
    const est_layer *L = &p->layer;
    int *saved = &s->saved[(size_t)l * EST_LAYER_MAX];
    int temp[EST_LAYER_MAX];
    bool in_mlp = false, first = !keep && tag == EST_T_ACTS; /* the checkpointed first forward */
    if (s->wcopy[l] < 0) s->wcopy[l] = rp_alloc(p, p->parts.amp_copy_layer, EST_T_WEIGHT_TEMP);
    half_temps(p);
    if (first) ctx_inputs(p, s, l, false, false);
    for (int i = 0; i < L->n; i++) {
        const est_ltensor *t = &L->t[i];
        if (t->mlp && !in_mlp) { /* the attention half ends with its residual add */
            in_mlp = true;
            if (first) ctx_inputs(p, s, l, false, true);
            for (int k = 0; k < i; k++)
                if (L->t[k].dies == EST_DIES_ATTN || (!keep && L->t[k].dies == EST_DIES_BACKWARD && !L->t[k].mlp))
                    rp_free(p, &temp[k]);
            half_temps(p);
            if (first) ctx_inputs(p, s, l, true, false);
        }
        int h = rp_alloc(p, t->bytes * s->n * (t->eager ? s->scale : 1.0), tag);
        temp[i] = -1;
        saved[i] = -1;
        if (keep && t->dies == EST_DIES_BACKWARD)
            saved[i] = h;
        else
            temp[i] = h;
    }
    if (first) ctx_inputs(p, s, l, true, true);
    for (int k = 0; k < L->n; k++) rp_free(p, &temp[k]);
    if (!keep) rp_free(p, &s->wcopy[l]);
}

/* Frees the layer's saved tensors of one half. */
static void free_saved(rp *p, rp_step *s, int l, bool mlp)
{
    int *saved = &s->saved[(size_t)l * EST_LAYER_MAX];
    for (int i = 0; i < p->layer.n; i++)
        if (p->layer.t[i].mlp == mlp) rp_free(p, &saved[i]);
}

/* The forward through every layer; returns the final hidden state. */
static int forward(rp *p, rp_step *s)
{
    const est_ctx *x = p->x;
    double ah = x->a * (double)x->m->hidden * s->n;
    int hidden = rp_alloc(p, ah, EST_T_ACTS); /* the embedding's output (or the previous stage's) */
    for (int l = 0; l < x->layers; l++) {
        gather(p, s, l, 1);
        bool ckpt = x->in->grad_ckpt;
        layer_forward(p, s, l, !ckpt, EST_T_ACTS);
        int out = rp_alloc(p, ah, EST_T_ACTS);
        if (ckpt && !x->in->offload_checkpoints)
            s->ckpt[l] = hidden; /* checkpoint(layer, hidden) keeps its input */
        else
            rp_free(p, &hidden); /* or it waits in CPU memory */
        hidden = out;
        rp_free(p, &s->gather[l]);
    }
    return hidden;
}

/* The cross entropy's backward over `elems` entries (rows x vocabulary):
 * nll_loss's gradient (a dense zeros_like) and log_softmax's meet the
 * saved log-softmax, then the gradient goes back through the cast to the
 * input's dtype (in_b). Returns that gradient. */
static int ce_backward(rp *p, const est_loss_plan *lp, double elems, double in_b, int *lsm)
{
    int g1 = rp_alloc(p, lp->ce * elems, EST_T_LOGITS);
    int g2 = rp_alloc(p, lp->ce * elems, EST_T_LOGITS);
    rp_free(p, lsm);
    rp_free(p, &g1);
    if (lp->ce > in_b) {
        int g3 = rp_alloc(p, in_b * elems, EST_T_LOGITS);
        rp_free(p, &g2);
        g2 = g3;
    }
    return g2;
}

/* loss.backward() starts: under ZeRO-2 the engine's backward() first
 * makes the ipg bucket(s) of reduce_bucket_size elements
 * (DeepSpeedZeroOptimizer.backward), freed after the reduction
 * (backward_ends). */
static void backward_starts(rp *p)
{
    p->ds_reduced = false;
    p->ds_ipg[0] = p->ds_ipg[1] = -1;
    if (p->x->in->strategy == STRAT_ZERO2)
        for (int k = 0; k < (int)p->parts.ds_buckets && k < 2; k++)
            p->ds_ipg[k] = rp_alloc(p, p->parts.ds_bucket, EST_T_SHARDING);
}

static void backward_ends(rp *p)
{
    for (int k = 0; k < 2; k++) rp_free(p, &p->ds_ipg[k]);
}

/* The lm_head's forward and the loss's, then their backward: the loss plan
 * of the stack (estimate_loss.c) tensor by tensor. Returns the gradient of
 * the final hidden state. */
static int loss_and_head(rp *p, rp_step *s, int hidden)
{
    const est_ctx *x = p->x;
    est_loss_plan lp;
    est_loss_plan_of(x, &lp);
    double h = (double)x->m->hidden, V = (double)x->m->vocab / x->tp, a = x->a;
    double N = s->n, Ns = s->n - s->samples; /* the shifted logits lose one token per sample */
    /* the final norm keeps its fp32 input, the lm_head its input */
    int nf = rp_alloc(p, 4.0 * h * N, EST_T_ACTS);
    int nh = rp_alloc(p, a * h * N, EST_T_ACTS);
    rp_free(p, &hidden);
    int head = rp_alloc(p, p->parts.gather_head, EST_T_SHARDING);
    int cap = rp_alloc(p, lp.softcap * V * N, EST_T_LOGITS);
    if (lp.fused) { /* the gradient is written into the logits */
        int logits = rp_alloc(p, lp.logits * V * N, EST_T_LOGITS);
        int lse = rp_alloc(p, 4.0 * N, EST_T_LOGITS);
        backward_starts(p);
        rp_free(p, &lse);
        rp_free(p, &logits);
    } else if (lp.chunks > 1 || lp.chunk_tokens > 0) {
        int nc = lp.chunks > 1 ? lp.chunks : (int)ceil(N / s->samples / lp.chunk_tokens);
        if (nc < 1) nc = 1;
        if (nc > 1024) nc = 1024; /* a replay of longer sequences groups their chunks */
        int *chunk = xmalloc((size_t)nc * sizeof *chunk), *lsm = xmalloc((size_t)nc * sizeof *lsm);
        double cn = N / nc;
        int whole = lp.grad_whole ? rp_alloc(p, lp.logits * V * N, EST_T_LOGITS) : -1;
        for (int k = 0; k < nc; k++) chunk[k] = whole >= 0 ? -1 : rp_alloc(p, lp.logits * V * cn, EST_T_LOGITS);
        for (int k = 0; k < nc; k++) {
            int up = lp.cast_in_loss ? rp_alloc(p, 4.0 * V * cn, EST_T_LOGITS) : -1;
            lsm[k] = rp_alloc(p, lp.ce * V * cn, EST_T_LOGITS);
            rp_free(p, &up);
            if (!lp.save_lsm) rp_free(p, &lsm[k]);
        }
        if (!lp.keep_logits)
            for (int k = 0; k < nc; k++) rp_free(p, &chunk[k]);
        /* backward, one chunk at a time */
        backward_starts(p);
        int gwhole = lp.grad_whole ? rp_alloc(p, lp.logits * V * N, EST_T_LOGITS) : -1;
        for (int k = nc - 1; k >= 0; k--) {
            int g = ce_backward(p, &lp, V * cn, lp.logits, &lsm[k]);
            rp_free(p, &g);
        }
        rp_free(p, &gwhole);
        rp_free(p, &whole);
        for (int k = 0; k < nc; k++) rp_free(p, &chunk[k]);
        free(chunk);
        free(lsm);
    } else {
        int logits = rp_alloc(p, lp.logits * V * N, EST_T_LOGITS);
        double cur_b = lp.logits, rows = N, out_b = lp.logits;
        int local = -1; /* the loss function's own fp32 upcast (transformers 4.46-4.48) */
        if (lp.upcast_in_model) { /* logits.float() */
            int up = rp_alloc(p, 4.0 * V * N, EST_T_LOGITS);
            if (lp.upcast_in_loss) {
                local = up; /* the 16-bit output stays the model's */
            } else {
                rp_free(p, &logits);
                logits = up;
                out_b = 4.0;
            }
            cur_b = 4.0;
        }
        int shifted = -1;
        if (lp.shift_copy) {
            shifted = rp_alloc(p, cur_b * V * Ns, EST_T_LOGITS);
            rows = Ns;
        }
        int cast = lp.cast_in_loss && cur_b < 4 ? rp_alloc(p, 4.0 * V * rows, EST_T_LOGITS) : -1;
        int lsm = rp_alloc(p, lp.ce * V * rows, EST_T_LOGITS);
        rp_free(p, &cast);
        int kept = -1;
        if (lp.shift_in_loop) { /* the loop's `logits` is now the shifted copy */
            rp_free(p, &logits);
            kept = shifted;
            shifted = -1;
        } else {
            rp_free(p, &shifted);
        }
        rp_free(p, &local); /* the loss function returns */
        int converted = lp.convert_outputs && out_b < 4 ? rp_alloc(p, 4.0 * V * N, EST_T_LOGITS) : -1;
        rp_free(p, &converted); /* compute_loss returns: the outputs go */
        if (lp.keep_logits && kept < 0) { /* the outputs, and their logits, live through backward */
            kept = logits;
            logits = -1;
        }
        rp_free(p, &logits);
        if (!lp.keep_logits) rp_free(p, &kept);
        /* backward */
        backward_starts(p);
        int g2 = ce_backward(p, &lp, V * rows, cur_b, &lsm);
        if (lp.shift_copy) { /* slice backward: a zero-filled gradient of the whole logits */
            int g4 = rp_alloc(p, cur_b * V * N, EST_T_LOGITS);
            rp_free(p, &g2);
            g2 = g4;
        }
        if (lp.upcast_in_model) {
            int g5 = rp_alloc(p, lp.logits * V * N, EST_T_LOGITS);
            rp_free(p, &g2);
            g2 = g5;
        }
        rp_free(p, &g2);
        rp_free(p, &kept);
    }
    rp_free(p, &cap);
    /* the lm_head's backward: the gradient of its input, its weight's */
    int gh = rp_alloc(p, a * h * N, EST_T_LAYER_BWD);
    layer_grads(p, x->layers, 0);
    rp_free(p, &head);
    rp_free(p, &nh);
    int g = rp_alloc(p, a * h * N, EST_T_LAYER_BWD); /* through the final norm */
    layer_grads(p, x->layers + 1, 0);
    rp_free(p, &gh);
    rp_free(p, &nf);
    return g;
}

/* One layer's backward: recomputed first with checkpointing; then the MLP
 * half (the gradients of its three intermediates and of its input), then
 * the attention half; the trainable parameters' gradients as produced.
 * g (the gradient of the layer's output) becomes that of its input. */
static void layer_backward(rp *p, rp_step *s, int l, int *g)
{
    const est_ctx *x = p->x;
    const model_shape *m = x->m;
    double a = x->a, N = s->n, h = (double)m->hidden, I = (double)m->intermediate / x->tp;
    double qd = (double)(m->heads * m->head_dim) / x->tp, heads = (double)m->heads / x->tp;
    gather(p, s, l, -1);
    int out = -1;
    if (x->in->grad_ckpt && x->in->offload_checkpoints) /* the checkpoint comes back */
        s->ckpt[l] = rp_alloc(p, a * h * N, EST_T_LAYER_BWD);
    if (x->in->grad_ckpt) {
        layer_forward(p, s, l, true, EST_T_LAYER_BWD);
        out = rp_alloc(p, a * h * N, EST_T_LAYER_BWD); /* the recomputed output */
    }
    /* MLP half */
    int gp = rp_alloc(p, a * I * N, EST_T_LAYER_BWD);
    int gg = rp_alloc(p, a * I * N, EST_T_LAYER_BWD), gu = rp_alloc(p, a * I * N, EST_T_LAYER_BWD);
    layer_grads(p, l, 1);
    rp_free(p, &gp);
    int gn = rp_alloc(p, a * h * N, EST_T_LAYER_BWD);
    rp_free(p, &gg);
    rp_free(p, &gu);
    free_saved(p, s, l, true);
    int gmid = rp_alloc(p, a * h * N, EST_T_LAYER_BWD); /* through the norm, plus the residual */
    rp_free(p, &gn);
    rp_free(p, g);
    rp_free(p, &out);
    /* attention half */
    int go = rp_alloc(p, a * qd * N, EST_T_LAYER_BWD);
    int dq = rp_alloc(p, a * qd * N, EST_T_LAYER_BWD), dk = rp_alloc(p, a * qd * N, EST_T_LAYER_BWD),
        dv = rp_alloc(p, a * qd * N, EST_T_LAYER_BWD);
    int e1 = -1, e2 = -1, e3 = -1;
    if (!x->in->flash_attn) { /* softmax backward: fp32 buffers and a cast */
        double sc = heads * (double)x->in->seq * s->scale * N;
        e1 = rp_alloc(p, 4.0 * sc, EST_T_LAYER_BWD);
        e2 = rp_alloc(p, 4.0 * sc, EST_T_LAYER_BWD);
        e3 = rp_alloc(p, a * sc, EST_T_LAYER_BWD);
        rp_free(p, &e1);
        rp_free(p, &e2);
        rp_free(p, &e3);
    }
    rp_free(p, &go);
    layer_grads(p, l, 0);
    int gn1 = rp_alloc(p, a * h * N, EST_T_LAYER_BWD);
    rp_free(p, &dq);
    rp_free(p, &dk);
    rp_free(p, &dv);
    free_saved(p, s, l, false);
    int gin = rp_alloc(p, a * h * N, EST_T_LAYER_BWD);
    rp_free(p, &gn1);
    rp_free(p, &gmid);
    rp_free(p, &s->ckpt[l]);
    for (int k = 0; k < MODEL_MAX_MODULES; k++) rp_free(p, &s->ctxin[(size_t)l * MODEL_MAX_MODULES + (size_t)k]);
    rp_free(p, &s->wcopy[l]);
    rp_free(p, &s->gather[l]);
    *g = gin;
}

static void micro_step(rp *p, rp_step *s)
{
    const est_ctx *x = p->x;
    for (int l = 0; l < x->layers; l++) s->ckpt[l] = s->gather[l] = s->wcopy[l] = -1;
    for (size_t i = 0; i < (size_t)x->layers * EST_LAYER_MAX; i++) s->saved[i] = -1;
    for (size_t i = 0; i < (size_t)x->layers * MODEL_MAX_MODULES; i++) s->ctxin[i] = -1;
    p->phase = EST_PHASE_LOSS;
    int batch[3]; /* input_ids, labels, attention_mask: int64 */
    for (int k = 0; k < 3; k++) batch[k] = rp_alloc(p, 8.0 * s->n, EST_T_FRAMEWORK);
    if (p->ws_fwd < 0) p->ws_fwd = rp_alloc(p, CUBLAS_WORKSPACE, EST_T_FRAMEWORK);
    int hidden = forward(p, s);
    if (p->ws_bwd < 0) p->ws_bwd = rp_alloc(p, CUBLAS_WORKSPACE, EST_T_FRAMEWORK);
    int g = x->last_stage ? loss_and_head(p, s, hidden) : hidden;
    if (!x->last_stage) backward_starts(p);
    p->phase = EST_PHASE_BACKWARD;
    for (int l = x->layers - 1; l >= 0; l--) layer_backward(p, s, l, &g);
    rp_free(p, &g);
    layer_grads(p, -1, 0); /* the embedding's */
    backward_ends(p);
    for (int k = 0; k < 3; k++) rp_free(p, &batch[k]);
}

/* ---- the optimizer step ---- */

/* Bytes of each optimizer state tensor per element (two per parameter):
 * AdamW's exp_avg and exp_avg_sq in the parameter's dtype, 8-bit AdamW's
 * uint8 states with their fp32 absmax per 2048; SGD (momentum 0) none;
 * paged states live in CUDA managed memory, outside the allocator. */
static double state_elt(const rp *p)
{
    switch (p->x->in->optimizer) {
    case OPT_ADAMW8BIT: return 1.0 + 4.0 / 2048.0;
    case OPT_PAGED_ADAMW:
    case OPT_PAGED_ADAMW8BIT:
    case OPT_SGD: return 0;
    default: return train_elt(p->x);
    }
}

static void optimizer_step(rp *p)
{
    const est_ctx *x = p->x;
    p->phase = EST_PHASE_STEP;
    if (!p->states_made) { /* torch optimizers make their states at the first step */
        double se = state_elt(p);
        for (size_t i = 0; i < p->n_params; i++)
            for (int k = 0; k < 2; k++) p->params[i].state[k] = rp_alloc(p, p->params[i].elems * se, EST_T_STATES);
        p->states_made = true;
    }
    if (x->deepspeed) {
        /* ZeRO-2's step flattens the averaged gradients in their dtype and
         * converts them to an fp32 gradient of the fp32 master partition,
         * then frees the 16-bit ones (stage_1_and_2.py step); ZeRO-3 builds
         * the fp32 gradient of its partition from the held buffer (stage3.py
         * _prepare_fp32_grad_for_sub_group). The fp32 gradient goes after
         * the optimizer's step. */
        int flat = x->in->strategy == STRAT_ZERO2 ? rp_alloc(p, p->ds_local * train_elt(x), EST_T_OPT_TEMP) : -1;
        int g32 = rp_alloc(p, p->ds_local * 4.0, EST_T_OPT_TEMP);
        rp_free(p, &flat);
        if (x->in->strategy == STRAT_ZERO2) {
            rp_free(p, &p->ds_part);
            rp_free(p, &p->ds_new);
            p->ds_cycle_started = false;
        }
        rp_free(p, &g32);
        return;
    }
    /* the temporaries: foreach AdamW's sqrt(exp_avg_sq) list */
    double tb = p->r->optimizer_temp / (p->r->gradients > 0 ? p->r->gradients : 1) * train_elt(x);
    int *tmp = xmalloc((p->n_params ? p->n_params : 1) * sizeof *tmp);
    for (size_t i = 0; i < p->n_params; i++) tmp[i] = rp_alloc(p, p->params[i].elems * tb, EST_T_OPT_TEMP);
    for (size_t i = 0; i < p->n_params; i++) rp_free(p, &tmp[i]);
    free(tmp);
    for (size_t i = 0; i < p->n_params; i++) rp_free(p, &p->params[i].grad); /* zero_grad(set_to_none) */
}

/* ---- sample lengths ---- */

/* A standard normal from two uniforms (Box-Muller). */
static double normal(rng_state *g)
{
    double u = ((double)(rng_next(g) >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(rng_next(g) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* A standard normal below z (z > -1e6). Above z = -1 plain rejection
 * keeps at least 16 % of the draws; further down, -Z is a normal above
 * a = -z, drawn by Robert's exponential rejection (Robert 1995, "Simulation
 * of truncated normal variables", Statistics and Computing 5: proposal
 * a + Exp(1)/alpha, alpha = (a + sqrt(a^2 + 4)) / 2, accepted with
 * probability exp(-(x - alpha)^2 / 2)). */
static double normal_below(rng_state *g, double z)
{
    if (z >= -1.0) {
        for (;;) {
            double n = normal(g);
            if (n <= z) return n;
        }
    }
    double a = -z, alpha = (a + sqrt(a * a + 4.0)) / 2.0;
    for (;;) {
        double u = ((double)(rng_next(g) >> 11) + 0.5) / 9007199254740992.0;
        double v = ((double)(rng_next(g) >> 11) + 0.5) / 9007199254740992.0;
        double xv = a - log(u) / alpha;
        if (v <= exp(-(xv - alpha) * (xv - alpha) / 2.0)) return -xv;
    }
}

/* The regularised lower incomplete gamma P(a, x), from its two classical
 * expansions: below x = a + 1 the series
 *   P = x^a e^-x / Gamma(a + 1) * (1 + x/(a+1) + x^2/((a+1)(a+2)) + ...),
 * above it the continued fraction of the upper function
 *   Q = x^a e^-x / Gamma(a) * 1/(x+1-a - 1(1-a)/(x+3-a - 2(2-a)/(x+5-a - ...))),
 * evaluated by the modified Lentz method (Abramowitz & Stegun 6.5.29 and
 * 6.5.31; Lentz 1976). */
double est_gamma_p(double a, double x)
{
    if (!(x > 0)) return 0;
    double front = exp(a * log(x) - x - lgamma(a));
    if (x < a + 1) {
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 10000; n++) {
            term *= x / (a + n);
            sum += term;
            if (term < sum * 1e-16) break;
        }
        double p = front * sum;
        return p < 1 ? p : 1;
    }
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int n = 1; n < 10000; n++) {
        double an = -n * (n - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double delta = d * c;
        h *= delta;
        if (fabs(delta - 1) < 1e-16) break;
    }
    double q = front * h;
    return q < 1 ? 1 - q : 0;
}

/* A Gamma(k, 1) variable below gmax (gmax < 0: unbounded) by inversion:
 * u uniform in (0, P(k, gmax)), then P(k, g) = u solved by bisection. One
 * uniform per draw, so the draws stay reproducible from the seed. */
static double gamma_below(rng_state *g, double k, double gmax)
{
    double u = ((double)(rng_next(g) >> 11) + 0.5) / 9007199254740992.0;
    if (gmax >= 0) u *= est_gamma_p(k, gmax);
    double lo = 0, hi = gmax >= 0 ? gmax : k + 10.0 * sqrt(k) + 10.0;
    while (gmax < 0 && est_gamma_p(k, hi) < u) hi *= 2;
    for (int i = 0; i < 64 && hi - lo > 1e-9 * (hi > 1 ? hi : 1); i++) {
        double mid = (lo + hi) / 2;
        if (est_gamma_p(k, mid) < u)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

/* One sample's length from the shifted gamma: seq_min + theta * G, G ~
 * Gamma(k, 1), with k theta = seq_mean - seq_min and k theta^2 = seq_sd^2;
 * below the cap when longer samples were dropped. */
static double shifted_gamma_length(const est_input *in, rng_state *g)
{
    double m = in->seq_mean - in->seq_min;
    double k = m * m / (in->seq_sd * in->seq_sd), theta = m / k;
    double gmax = in->drop_long ? (in->seq - in->seq_min) / theta : -1;
    return ceil(in->seq_min + theta * gamma_below(g, k, gmax));
}

/* The padded length of one micro batch: its longest sample, drawn from a
 * log-normal of the input's mean and standard deviation (or from the gamma
 * shifted by seq_min, when the input gives the shortest sample), cut at seq; when
 * longer samples were dropped from the dataset (drop_long: ms-swift's
 * truncation_strategy 'delete', whose template returns no sample past
 * max_length and whose dataset_map leaves it out), drawn below seq. */
double est_batch_length(const est_input *in, rng_state *g)
{
    double cv2 = (in->seq_sd / in->seq_mean) * (in->seq_sd / in->seq_mean);
    double sigma = sqrt(log1p(cv2)), mu = log(in->seq_mean) - sigma * sigma / 2.0;
    double zcap = sigma > 0 ? (log((double)in->seq) - mu) / sigma : 1e6;
    if (zcap < -1e6) zcap = -1e6;
    double longest = 1;
    for (int b = 0; b < in->batch; b++) {
        double len;
        if (in->seq_min > 0) {
            len = shifted_gamma_length(in, g);
        } else {
            double z = in->drop_long && zcap < 1e6 ? normal_below(g, zcap) : normal(g);
            len = ceil(exp(mu + sigma * z));
        }
        if (len > longest) longest = len;
    }
    return longest < in->seq ? longest : in->seq;
}

/* ---- the run ---- */

static void run(rp *p)
{
    const est_ctx *x = p->x;
    const est_input *in = x->in;
    load_weights(p);
    collect_params(p);
    load_training_state(p);
    if (in->reset_after_load) {
        if (in->stack == EST_STACK_TORCHTUNE && in->gpus > 1) ca_empty_cache(p->ca); /* cleanup_before_training */
        reset_peaks(p);
    }
    rp_step s = {0};
    s.ckpt = xmalloc((size_t)x->layers * sizeof *s.ckpt);
    s.gather = xmalloc((size_t)x->layers * sizeof *s.gather);
    s.wcopy = xmalloc((size_t)x->layers * sizeof *s.wcopy);
    s.saved = xmalloc((size_t)x->layers * EST_LAYER_MAX * sizeof *s.saved);
    s.ctxin = xmalloc((size_t)x->layers * MODEL_MAX_MODULES * sizeof *s.ctxin);
    s.samples = x->tokens / in->seq;
    bool varied = in->seq_sd > 0 && in->seq_mean > 0;
    int accum = in->grad_accum > 0 ? in->grad_accum : 1;
    int steps = varied ? EST_VARIED_STEPS : 2 * (accum < 2 ? accum : 2);
    int per_step = varied ? accum : (accum < 2 ? accum : 2);
    rng_state g;
    rng_seed(&g, p->seed);
    for (int k = 0; k < steps; k++) {
        double len = varied ? est_batch_length(in, &g) : in->seq;
        s.n = s.samples * len;
        s.scale = len / in->seq;
        micro_step(p, &s);
        if ((k + 1) % per_step == 0 || k == steps - 1) optimizer_step(p);
    }
    p->steps = steps;
    free(s.ckpt);
    free(s.gather);
    free(s.wcopy);
    free(s.saved);
    free(s.ctxin);
}

/* What one replay measured. */
typedef struct rp_out {
    double allocated, reserved, at_alloc[EST_T_COUNT], at_res[EST_T_COUNT], res_alloc;
    double phase[3];
    int alloc_phase, res_phase;
    long alloc_event, res_event;
    unsigned long segments, retries, ooms;
} rp_out;

static void replay_once(const est_ctx *x, const est_calib *c, const est_result *r, uint64_t seed, long snap_event,
                        ca_snapshot *snap, rp_out *o)
{
    rp p;
    memset(&p, 0, sizeof p);
    p.x = x;
    p.r = r;
    p.seed = seed;
    p.ws_fwd = p.ws_bwd = -1;
    p.snap_event = snap_event;
    p.snap = snap;
    est_parts_of(x, r, &p.parts);
    est_layer_tensors(x, &p.layer);
    ca_config cfg = x->in->alloc;
    double room = x->in->gpu_memory - (c->cuda_context_gib + (x->in->gpus > 1 ? c->nccl_gib : 0)) * GIB;
    cfg.capacity = x->in->gpu_memory > 0 ? (uint64_t)(room > 0 ? room : 1) : 0;
    p.ca = ca_new(&cfg);
    run(&p);
    const ca_stats *st = ca_get_stats(p.ca);
    o->allocated = p.alloc_peak;
    o->reserved = p.res_peak;
    o->res_alloc = p.res_alloc;
    memcpy(o->at_alloc, p.at_alloc, sizeof o->at_alloc);
    memcpy(o->at_res, p.at_res, sizeof o->at_res);
    memcpy(o->phase, p.phase_peak, sizeof o->phase);
    o->alloc_phase = p.alloc_phase;
    o->res_phase = p.res_phase;
    o->alloc_event = p.alloc_event;
    o->res_event = p.res_event;
    o->segments = p.res_segments;
    o->retries = st->num_alloc_retries;
    o->ooms = st->num_ooms;
    ca_destroy(p.ca);
    free(p.tag_of);
    free(p.params);
    free(p.layer_first);
}

/* The counters from the replays, capped by the GPU: paged optimizer
 * states are evicted to host memory when the device is full. */
static void counters(const est_ctx *x, const est_calib *c, const rp_out *o, int runs, int steps, est_result *r)
{
    memset(r->at_peak, 0, sizeof r->at_peak);
    r->allocated = r->reserved = 0;
    double res_alloc = 0;
    bool alloc_counter = x->in->counter == EST_COUNTER_ALLOCATED;
    for (int k = 0; k < runs; k++) {
        r->allocated += o[k].allocated / runs;
        r->reserved += o[k].reserved / runs;
        res_alloc += o[k].res_alloc / runs;
        for (int i = 0; i < 3; i++) r->replay_phase[i] += o[k].phase[i] / runs;
        for (int i = 0; i < EST_T_COUNT; i++) r->at_peak[i] += (alloc_counter ? o[k].at_alloc[i] : o[k].at_res[i]) / runs;
        r->alloc_retries += o[k].retries;
        r->oom = r->oom || o[k].ooms > 0;
    }
    r->allocator = r->reserved - r->allocated;
    r->replay_steps = steps;
    r->segments_at_peak = o[0].segments;
    r->cuda_context = (c->cuda_context_gib + (x->in->gpus > 1 ? c->nccl_gib : 0)) * GIB;
    r->device = r->reserved + r->cuda_context + r->optimizer_paged;
    double gpu = x->in->gpu_memory;
    if (gpu > 0 && r->device > gpu && r->optimizer_paged > 0) {
        double over = r->device - gpu;
        r->device -= over < r->optimizer_paged ? over : r->optimizer_paged;
    }
    r->cached_at_peak = alloc_counter ? 0 : r->reserved - res_alloc;
    r->peak_phase = (est_phase)(alloc_counter ? o[0].alloc_phase : o[0].res_phase);
    switch (x->in->counter) {
    case EST_COUNTER_ALLOCATED: r->peak = r->allocated; break;
    case EST_COUNTER_RESERVED: r->peak = r->reserved; break;
    default: r->peak = r->device; break;
    }
}

void est_replay(const est_ctx *x, const est_calib *c, est_result *r, ca_snapshot *snap)
{
    bool varied = x->in->seq_sd > 0 && x->in->seq_mean > 0;
    int runs = varied ? EST_VARIED_RUNS : 1;
    rp_out o[EST_VARIED_RUNS];
    uint64_t seed = x->in->replay_seed ? x->in->replay_seed : EST_SEED;
    for (int k = 0; k < runs; k++) replay_once(x, c, r, seed + (uint64_t)k, -1, NULL, &o[k]);
    int accum = x->in->grad_accum > 0 ? x->in->grad_accum : 1;
    counters(x, c, o, runs, varied ? EST_VARIED_STEPS : 2 * (accum < 2 ? accum : 2), r);
    if (!snap) return;
    /* the replay is deterministic: the first one again, stopped at its peak */
    memset(snap, 0, sizeof *snap);
    rp_out again;
    replay_once(x, c, r, seed, x->in->counter == EST_COUNTER_ALLOCATED ? o[0].alloc_event : o[0].res_event, snap,
                &again);
}

