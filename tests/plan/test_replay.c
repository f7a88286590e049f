/* test_replay.c: the training step replayed through the caching
 * allocator's model (estimate_replay.c): the loss plan of every stack
 * against its analytic figure, what the counters must satisfy, sample
 * lengths that vary, gradient accumulation, the allocator's settings, the
 * GPU's capacity and the snapshot --explain prints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan/estimate_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* No context, no NCCL, no fitted constant: the replay alone. */
static const est_calib bare = {.framework_gib = 0, .cuda_context_gib = 0, .nccl_gib = 0};

/* A model whose step is all loss: 32,000 tokens of vocabulary over a tiny
 * decoder (h 64, 1 layer), so the logits dominate every other term. */
static void loss_shape(model_shape *m)
{
    model_shape_init(m, MODEL_ARCH_LLAMA);
    m->hidden = 64;
    m->intermediate = 128;
    m->layers = 1;
    m->heads = 2;
    m->kv_heads = 2;
    m->head_dim = 32;
    m->vocab = 32000;
}

static void resolve(est_input *in)
{
    diag_list d;
    diag_list_init(&d);
    if (!est_input_resolve(in, &d)) fail_msg("input does not resolve: %s", d.len ? d.items[0].message : "?");
    diag_list_free(&d);
}

/* Does one of the diagnostics name this option? */
static bool names_path(const diag_list *d, const char *path)
{
    for (size_t i = 0; i < d->len; i++)
        if (d->items[i].path && strcmp(d->items[i].path, path) == 0) return true;
    return false;
}

/* A catalogue model with the estimator's defaults and the counter given. */
static void catalogue_input(const char *name, est_counter counter, model_shape *m, est_input *in)
{
    const model_catalog_entry *e = model_catalog_find(name);
    assert_non_null(e);
    model_shape_from_catalog(e, m);
    est_input_defaults(in, m);
    in->counter = counter;
}

/* A catalogue model as QLoRA on an NF4 (double-quantised) base in a
 * stack, counting the allocated peak. */
static void qlora_input(const char *name, est_stack stack, model_shape *m, est_input *in)
{
    catalogue_input(name, EST_COUNTER_ALLOCATED, m, in);
    est_input_set_stack(in, stack);
    in->method = METHOD_QLORA;
    in->quant = QUANT_NF4_DQ;
    in->bits = 4;
}

static void lora_input(est_input *in, const model_shape *m, est_stack stack)
{
    est_input_defaults(in, m);
    est_input_set_stack(in, stack);
    in->batch = 2;
    in->seq = 512;
    in->counter = EST_COUNTER_ALLOCATED;
    resolve(in);
}

/* The logits term alive at the allocated peak, in bytes per token and
 * vocabulary entry, against the stack's analytic figure. */
static void expect_loss(est_stack stack, void (*change)(est_input *), double tolerance)
{
    model_shape m;
    loss_shape(&m);
    est_input in;
    lora_input(&in, &m, stack);
    if (change) change(&in);
    est_result r;
    est_estimate(&in, &bare, &r);
    double per = r.at_peak[EST_T_LOGITS] / (double)m.vocab / (double)(in.batch * in.seq);
    if (fabs(per - r.loss_vocab_bytes) > tolerance)
        fail_msg("%s: %.3f bytes per token and vocabulary entry at the peak, the plan says %.3f",
                 est_stack_name(stack), per, r.loss_vocab_bytes);
    model_shape_free(&m);
}

static void qwen_v1(est_input *in) { in->bf16_loss = true; }
static void legacy(est_input *in) { in->legacy_loss = true; }
static void shift_copy(est_input *in) { in->loss_shift_copy = true; }
static void compiled(est_input *in) { in->compiled = true; }
static void unchunked_litgpt(est_input *in) { in->chunked_loss = false; }
static void old_torchtune(est_input *in) { in->chunked_loss = false; in->logits_kept = true; in->fused_optimizer = false; }

static void test_loss_plans(void **state)
{
    (void)state;
    /* within 2 %: a block the allocator lends whole when less than 1 MiB
     * would be left (it counts as allocated), and the token per sample a
     * shifted copy loses */
    expect_loss(EST_STACK_HF, NULL, 0.25);
    expect_loss(EST_STACK_HF, qwen_v1, 0.25);
    expect_loss(EST_STACK_HF, legacy, 0.25);
    expect_loss(EST_STACK_PLAIN, NULL, 0.25);
    expect_loss(EST_STACK_PLAIN, legacy, 0.25);
    expect_loss(EST_STACK_HF, shift_copy, 0.25);
    expect_loss(EST_STACK_PLAIN, shift_copy, 0.25);
    expect_loss(EST_STACK_TORCHTUNE, NULL, 0.15);
    expect_loss(EST_STACK_TORCHTUNE, compiled, 0.1);
    expect_loss(EST_STACK_TORCHTUNE, old_torchtune, 0.3);
    /* Unsloth's fused cross entropy: the logits and a log-sum-exp per row */
    expect_loss(EST_STACK_UNSLOTH, NULL, 0.01);
    /* LitGPT's 128-token chunks */
    expect_loss(EST_STACK_LITGPT, NULL, 0.15);
    expect_loss(EST_STACK_LITGPT, unchunked_litgpt, 0.15);
}

/* transformers 4.46-4.48's ForCausalLMLoss, by hand, in bytes per token
 * and vocabulary entry: the model's bf16 logits (2), the function's fp32
 * upcast (4), its shifted fp32 copy (4) and the log-softmax (4) meet in
 * the forward: 14; from 4.49 (labels shifted, no copy) the backward's
 * three fp32 buffers are the peak: 12. A plain loop keeps the bf16 output
 * through backward: 12 + 2 = 14 either way. */
static void test_loss_shift_copy(void **state)
{
    (void)state;
    model_shape m;
    loss_shape(&m);
    const struct {
        est_stack stack;
        bool copy;
        double bytes;
    } cases[] = {{EST_STACK_HF, true, 14}, {EST_STACK_HF, false, 12}, {EST_STACK_PLAIN, true, 14},
                 {EST_STACK_PLAIN, false, 14}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        est_input in;
        lora_input(&in, &m, cases[k].stack);
        in.loss_shift_copy = cases[k].copy;
        est_result r;
        est_estimate(&in, &bare, &r);
        if (r.loss_vocab_bytes != cases[k].bytes)
            fail_msg("%s, shift copy %d: %.2f bytes, by hand %.0f", est_stack_name(cases[k].stack), cases[k].copy,
                     r.loss_vocab_bytes, cases[k].bytes);
    }
    model_shape_free(&m);
}

/* What any replay satisfies: allocated <= reserved <= device, the terms at
 * the peak add up to the counter, the phases never exceed the allocated
 * peak, and the analytic phases are held. */
static void test_counters(void **state)
{
    (void)state;
    const model_catalog_entry *e = model_catalog_find("Qwen2-7B");
    model_shape m;
    model_shape_from_catalog(e, &m);
    spec_method methods[] = {METHOD_LORA, METHOD_QLORA, METHOD_FULL, METHOD_DORA};
    for (size_t k = 0; k < 4; k++)
        for (int gc = 0; gc < 2; gc++) {
            est_input in;
            est_input_defaults(&in, &m);
            in.method = methods[k];
            in.quant = methods[k] == METHOD_QLORA ? QUANT_NF4 : QUANT_NONE;
            in.grad_ckpt = gc;
            in.counter = EST_COUNTER_RESERVED;
            resolve(&in);
            est_result r;
            est_estimate(&in, NULL, &r);
            assert_true(r.allocated > 0 && r.allocated <= r.reserved && r.reserved <= r.device);
            double sum = r.cached_at_peak;
            for (int i = 0; i < EST_TERM_SLOTS; i++) sum += r.at_peak[i];
            assert_true(fabs(sum - r.reserved) < 1.0);
            for (int p = 0; p < 3; p++) {
                assert_true(r.replay_phase[p] <= r.allocated);
                /* the terms of a phase are alive together in the replay, but
                 * for a dequantised matrix, which lives only while its
                 * layer computes, and the saved tensors a backward frees as
                 * it goes (within 2 %) */
                if (r.replay_phase[p] < 0.98 * (r.phase[p] - r.weight_temp))
                    fail_msg("%s gc %d: phase %s replays to %.3f GiB, its terms add up to %.3f",
                             spec_method_name(in.method), gc, est_phase_name((est_phase)p),
                             r.replay_phase[p] / GIB, r.phase[p] / GIB);
            }
        }
    model_shape_free(&m);
}

/* Varying lengths leave blocks of short batches the long ones cannot use:
 * more is reserved than with every batch at the cap, while the allocated
 * peak (the longest batch) stays; expandable segments give most of it back. */
static void test_varying_lengths(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    catalogue_input("Qwen2-1.5B", EST_COUNTER_RESERVED, &m, &in);
    in.seq = 4096;
    resolve(&in);
    est_result fixed, varied, expandable;
    est_estimate(&in, &bare, &fixed);
    in.seq_mean = 2000;
    in.seq_sd = 1500;
    resolve(&in);
    est_estimate(&in, &bare, &varied);
    assert_true(varied.replay_steps > fixed.replay_steps);
    assert_true(varied.reserved > 1.2 * fixed.reserved);
    assert_true(varied.allocated <= fixed.allocated * 1.001);
    in.alloc.expandable_segments = true;
    est_estimate(&in, &bare, &expandable);
    assert_true(expandable.reserved < varied.reserved);
    assert_true(expandable.reserved >= expandable.allocated);
    /* the same input gives the same figure: the draws come from fixed seeds */
    est_result again;
    est_estimate(&in, &bare, &again);
    assert_true(again.reserved == expandable.reserved);
    model_shape_free(&m);
}

/* Draws 40,000 micro-batch lengths per case (cap, dropped or cut) and
 * checks their mean and the share at the cap against the hand figures;
 * every length lies in [shortest, cap]. */
typedef struct len_case {
    int cap;
    bool drop;
    double mean, at_cap;
} len_case;

static void check_lengths(est_input *in, const len_case *cases, size_t ncases, double shortest)
{
    for (size_t c = 0; c < ncases; c++) {
        in->seq = cases[c].cap;
        in->drop_long = cases[c].drop;
        rng_state g;
        rng_seed(&g, 42);
        const int n = 40000;
        double sum = 0, at_cap = 0;
        for (int k = 0; k < n; k++) {
            double len = est_batch_length(in, &g);
            assert_true(len >= shortest && len <= cases[c].cap);
            sum += len;
            if (len >= cases[c].cap) at_cap++;
        }
        double mean = sum / n;
        if (fabs(mean - cases[c].mean) > 0.01 * cases[c].mean)
            fail_msg("cap %d %s: mean length %.1f, by hand %.1f", cases[c].cap, cases[c].drop ? "drop" : "cut", mean,
                     cases[c].mean);
        /* a draw in (cap - 1, cap] rounds up to the cap: at most ~0.1 % */
        if (fabs(at_cap / n - cases[c].at_cap) > 0.01)
            fail_msg("cap %d: %.3f of the batches at the cap, by hand %.3f", cases[c].cap, at_cap / n,
                     cases[c].at_cap);
    }
}

/* The padded lengths of micro batches of one sample against the
 * log-normal by hand. ms-swift's Benchmark doc: 3234.4 +- 2547.5 tokens,
 * so sigma^2 = ln(1 + (2547.5 / 3234.4)^2) = 0.48264 (sigma 0.69473) and
 * mu = ln(3234.4) - sigma^2 / 2 = 7.84028. At a 2048 cap, z = (ln 2048 -
 * mu) / sigma = -0.31042 and P(X <= 2048) = Phi(z) = 0.37812.
 *   cut:  E[min(X, c)] = e^(mu + sigma^2/2) Phi(z - sigma) + c (1 - Phi(z))
 *                      = 1782.7, and 62.2 % of the batches at the cap;
 *   drop: E[X | X <= c] = e^(mu + sigma^2/2) Phi(z - sigma) / Phi(z)
 *                      = 1346.5, and none at the cap.
 * At a 512 cap (z = -2.3059, the tail sampler) E[X | X <= 512] = 412.7.
 * The draws round up to whole tokens: + 0.5 on average. */
static void test_dropped_lengths(void **state)
{
    (void)state;
    est_input in;
    memset(&in, 0, sizeof in);
    in.batch = 1;
    in.seq_mean = 3234.4;
    in.seq_sd = 2547.5;
    const len_case cases[] = {{2048, false, 1782.7 + 0.5 * 0.378, 1 - 0.37812},
                              {2048, true, 1346.5 + 0.5, 0},
                              {512, true, 412.7 + 0.5, 0}};
    check_lengths(&in, cases, sizeof cases / sizeof cases[0], 1);
    /* a batch of 4 is padded to its longest: longer on average, still below the cap */
    in.seq = 2048;
    in.drop_long = true;
    in.batch = 4;
    rng_state g;
    rng_seed(&g, 7);
    double sum = 0;
    for (int k = 0; k < 10000; k++) sum += est_batch_length(&in, &g);
    assert_true(sum / 10000 > 1346.5 * 1.1 && sum / 10000 < 2048);
}

/* The gamma shifted by the shortest sample (--seq-min): P(a, x) against its
 * closed forms, then the draws against the truncated gamma's mean, by hand.
 * ms-swift's dataset: mean 3234.4, sd 2547.5, shortest 91 tokens, so
 * k = (3143.4 / 2547.5)^2 = 1.52255 and theta = 3143.4 / k = 2064.57; at a
 * 2048 cap x = 1957 / theta = 0.94790, P(k, x) = 0.397319 and
 * P(k + 1, x) = 0.132849 (Simpson's rule on the density, by hand), so
 *   dropped: E[X | X <= 2048] = 91 + k theta P(k+1, x) / P(k, x) = 1142.0
 *   cut:     E[min(X, 2048)] = 91 + k theta P(k+1, x) + 1957 (1 - P(k, x))
 *            = 1688.0, with 60.3 % of the batches at the cap;
 * at 512, dropped: 339.2. Each draw is rounded up to whole tokens (+0.5). */
static void near(double got, double want, double tol, const char *what, double a, double x)
{
    if (fabs(got - want) > tol) fail_msg("%s: P(%g, %g) = %.15f, closed form %.15f", what, a, x, got, want);
}

static void test_gamma_lengths(void **state)
{
    (void)state;
    const double xs[] = {0.05, 0.3, 0.9, 1.7, 2.6, 4.0, 9.0, 30.0};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        near(est_gamma_p(1.0, x), 1 - exp(-x), 1e-12, "1 - e^-x", 1.0, x);
        near(est_gamma_p(2.0, x), 1 - exp(-x) * (1 + x), 1e-12, "1 - e^-x (1 + x)", 2.0, x);
        near(est_gamma_p(0.5, x), erf(sqrt(x)), 1e-12, "erf(sqrt(x))", 0.5, x);
    }
    near(est_gamma_p(3.0, 0), 0, 0, "zero", 3.0, 0);
    est_input in;
    memset(&in, 0, sizeof in);
    in.batch = 1;
    in.seq_mean = 3234.4;
    in.seq_sd = 2547.5;
    in.seq_min = 91;
    const len_case cases[] = {{2048, false, 1688.0 + 0.5 * 0.397, 0.6027},
                              {2048, true, 1142.0 + 0.5, 0},
                              {512, true, 339.2 + 0.5, 0}};
    check_lengths(&in, cases, sizeof cases / sizeof cases[0], 92);
    /* the shortest sample must lie below the mean, and dropping needs a cap above it */
    model_shape m;
    est_input bad;
    catalogue_input("Qwen2-1.5B", EST_COUNTER_RESERVED, &m, &bad);
    bad.seq_mean = 3234.4;
    bad.seq_sd = 2547.5;
    const double mins[] = {4000, 91};
    const bool drops[] = {false, true};
    for (int t = 0; t < 2; t++) {
        bad.seq_min = mins[t];
        bad.drop_long = drops[t];
        bad.seq = 64;
        diag_list d;
        diag_list_init(&d);
        assert_false(est_input_resolve(&bad, &d));
        assert_true(names_path(&d, "--seq-min"));
        diag_list_free(&d);
    }
    model_shape_free(&m);
}

/* Dropping needs the statistics; with them the replay runs and no batch is
 * longer than with the same samples cut at the cap. */
static void test_drop_input(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    catalogue_input("Qwen2-1.5B", EST_COUNTER_RESERVED, &m, &in);
    in.drop_long = true;
    diag_list d;
    diag_list_init(&d);
    assert_false(est_input_resolve(&in, &d));
    assert_true(names_path(&d, "--truncation"));
    diag_list_free(&d);
    in.seq_mean = 3234.4;
    in.seq_sd = 2547.5;
    resolve(&in);
    est_result cut, drop;
    est_estimate(&in, &bare, &drop);
    in.drop_long = false;
    est_estimate(&in, &bare, &cut);
    assert_true(drop.allocated <= cut.allocated * 1.001);
    assert_true(drop.reserved >= drop.allocated);
    model_shape_free(&m);
}

/* DeepSpeed ZeRO-2, from its defaults (deepspeed/runtime/zero/config.py,
 * stage_1_and_2.py), on Qwen2-0.5B (P = 494,032,768 parameters, hidden
 * 896) over 2 GPUs, bf16, full fine-tune, allocated counter. By hand:
 *   the engine casts the module to bf16; the optimizer keeps an fp32
 *   master partition and fp32 exp_avg, exp_avg_sq: 12 x P/2 = 6P bytes;
 *   the step flattens the bf16 gradient partition (2 x P/2 = P bytes) and
 *   converts it to fp32 (4 x P/2 = 2P): 3P bytes of temporaries at once;
 *   with accumulation the latest micro step's partition lives beside the
 *   accumulated one until the step: + P bytes at the step's peak;
 *   the ipg bucket, reduce_bucket_size = hidden^2 ("auto") bf16 elements,
 *   one (overlap_comm is off by default below ZeRO-3): 2 x 896^2 bytes.
 * LoRA under the same engine: PEFT's fp32 adapters become bf16. */
static void test_deepspeed_zero2(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    catalogue_input("Qwen2-0.5B", EST_COUNTER_ALLOCATED, &m, &in);
    const double P = 494032768.0;
    in.method = METHOD_FULL;
    in.gpus = 2;
    in.strategy = STRAT_ZERO2;
    in.seq = 512;
    resolve(&in);
    est_result one, two;
    est_estimate(&in, &bare, &one);
    in.grad_accum = 2;
    resolve(&in);
    est_estimate(&in, &bare, &two);
    /* in the allocator a block of 1-10 MiB takes a 20 MiB segment and keeps
     * up to 1 MiB it does not split off: 1 % over the 582 state tensors */
    const double slack = 0.01 * P;
    if (fabs(one.optimizer - 6.0 * P) > 1.0 || fabs(one.at_peak[EST_T_STATES] - 6.0 * P) > 6.0 * slack)
        fail_msg("states %.0f, at the peak %.0f, by hand %.0f", one.optimizer, one.at_peak[EST_T_STATES], 6.0 * P);
    assert_int_equal(one.peak_phase, EST_PHASE_STEP);
    if (fabs(one.at_peak[EST_T_OPT_TEMP] - 3.0 * P) > slack)
        fail_msg("step temporaries %.0f, by hand %.0f", one.at_peak[EST_T_OPT_TEMP], 3.0 * P);
    if (fabs(one.at_peak[EST_T_GRADS] - P) > slack)
        fail_msg("gradient partition %.0f, by hand %.0f", one.at_peak[EST_T_GRADS], P);
    double extra = two.replay_phase[EST_PHASE_STEP] - one.replay_phase[EST_PHASE_STEP];
    if (fabs(extra - P) > slack) fail_msg("accumulation adds %.0f at the step, by hand %.0f", extra, P);
    if (fabs(one.sharding - 2.0 * 896.0 * 896.0) > 1.0)
        fail_msg("ipg bucket %.0f, by hand %.0f", one.sharding, 2.0 * 896.0 * 896.0);
    /* LoRA: the adapters in bf16 whatever PEFT made them */
    in.method = METHOD_LORA;
    in.grad_accum = 1;
    in.adapter_fp32 = true;
    resolve(&in);
    est_result lora;
    est_estimate(&in, &bare, &lora);
    assert_true(lora.params_trainable > 0);
    if (fabs(lora.adapter - 2.0 * (double)lora.params_trainable) > 1.0)
        fail_msg("adapters %.0f bytes, by hand %.0f", lora.adapter, 2.0 * (double)lora.params_trainable);
    model_shape_free(&m);
}

/* torchao 0.1 (torchtune's pin until May 2024) quantises each matrix to
 * NF4 in one piece: at its .abs() the bf16 weight (2w), the scaled blocks
 * (2w), `value - nf4` and its absolute value ((w x 16) bf16 each, 32w)
 * are alive: 68 bytes per element. For Llama-2-7B's MLP matrices, w =
 * 4096 x 11008 = 45,088,768: 3,066,036,224 bytes, more than a 64-token
 * step ever holds, so the loading peak is the allocated peak, unless the
 * stack resets the peaks after loading, as torchtune does: then the
 * allocated peak is the step's, and the reserved one still holds the two
 * 32w segments the quantisation left in the cache (one GPU: no
 * empty_cache). */
static void test_nf4_whole(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    qlora_input("Llama-2-7b-hf", EST_STACK_TORCHTUNE, &m, &in);
    assert_true(in.reset_after_load);
    in.reset_after_load = false;
    in.seq = 64;
    in.nf4_whole = true;
    resolve(&in);
    est_result whole, chunked, reset;
    est_estimate(&in, &bare, &whole);
    const double w = 4096.0 * 11008.0;
    /* each of the four blocks rounds up to 2 MiB */
    if (fabs(whole.at_peak[EST_T_WEIGHT_TEMP] - 68.0 * w) > 4.0 * 2.0 * 1024 * 1024)
        fail_msg("quantisation temporaries at the peak %.0f, by hand %.0f", whole.at_peak[EST_T_WEIGHT_TEMP], 68.0 * w);
    in.nf4_whole = false;
    est_estimate(&in, &bare, &chunked);
    assert_true(chunked.at_peak[EST_T_WEIGHT_TEMP] < 3.0 * w);
    /* the peak beyond the loaded model: 68w less what comes after the last
     * MLP matrix (its NF4 copy 0.52w, the lm_head 32000 x 4096 x 2 bytes =
     * 5.8w) and the 64-token step's own buffers */
    assert_true(whole.allocated - chunked.allocated > 55.0 * w);
    /* torchtune resets the peaks once the model is built */
    in.nf4_whole = true;
    in.reset_after_load = true;
    est_estimate(&in, &bare, &reset);
    assert_true(reset.at_peak[EST_T_WEIGHT_TEMP] < 3.0 * w);
    if (fabs(reset.allocated - chunked.allocated) > 0.01 * chunked.allocated)
        fail_msg("allocated after the reset %.0f, the step's %.0f", reset.allocated, chunked.allocated);
    assert_true(reset.reserved - reset.allocated >= 64.0 * w);
    /* its distributed recipes empty the cache first: nothing of it stays */
    in.gpus = 2;
    in.strategy = STRAT_FSDP;
    resolve(&in);
    est_estimate(&in, &bare, &reset);
    assert_true(reset.reserved - reset.allocated < 32.0 * w);
    model_shape_free(&m);
}

/* bitsandbytes' MatMul4Bit keeps its input on ctx (`ctx.tensors = (A, B)`);
 * under non-reentrant checkpointing that input stays from the layer's
 * forward to its backward: Qwen-7B (v1) at 2,048 tokens, by hand. Its
 * projections c_attn (4096 in), attn.c_proj (4096), w1, w2 (4096) and
 * mlp.c_proj (11008) each cast an fp16 input to bf16 (bnb_input_cast):
 * 2 x (4 x 4096 + 11008) bytes per token per layer; in the compute dtype
 * w1 and w2 share theirs: 2 x (3 x 4096 + 11008). Reentrant checkpointing
 * (no graph in the first forward) and GPTQ bases keep nothing. */
static void test_bnb_ctx_inputs(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    qlora_input("Qwen-7B", EST_STACK_HF, &m, &in);
    in.kbit_fp32 = false;
    in.seq = 2048;
    resolve(&in);
    est_result re, copies, shared, gptq, gptq_nr;
    est_estimate(&in, &bare, &re);
    in.ckpt_nonreentrant = true;
    in.bnb_input_cast = true;
    est_estimate(&in, &bare, &copies);
    in.bnb_input_cast = false;
    est_estimate(&in, &bare, &shared);
    const double L = 32, T = 2048;
    const double by_copies = L * T * 2.0 * (4.0 * 4096 + 11008), by_shared = L * T * 2.0 * (3.0 * 4096 + 11008);
    if (copies.activations - re.activations != by_copies)
        fail_msg("kept inputs (copies) %.0f, by hand %.0f", copies.activations - re.activations, by_copies);
    if (shared.activations - re.activations != by_shared)
        fail_msg("kept inputs (shared) %.0f, by hand %.0f", shared.activations - re.activations, by_shared);
    /* the replay: all of them alive at the loss peak */
    if (fabs(copies.at_peak[EST_T_ACTS] - re.at_peak[EST_T_ACTS] - by_copies) > 0.01 * by_copies)
        fail_msg("replayed kept inputs %.0f, by hand %.0f", copies.at_peak[EST_T_ACTS] - re.at_peak[EST_T_ACTS],
                 by_copies);
    if (fabs(shared.at_peak[EST_T_ACTS] - re.at_peak[EST_T_ACTS] - by_shared) > 0.01 * by_shared)
        fail_msg("replayed kept inputs (shared) %.0f, by hand %.0f",
                 shared.at_peak[EST_T_ACTS] - re.at_peak[EST_T_ACTS], by_shared);
    assert_true(copies.allocated - re.allocated > 0.99 * by_copies);
    /* a GPTQ base saves through autograd: nothing more */
    in.quant = QUANT_GPTQ4;
    in.ckpt_nonreentrant = false;
    resolve(&in);
    est_estimate(&in, &bare, &gptq);
    in.ckpt_nonreentrant = true;
    in.bnb_input_cast = true;
    est_estimate(&in, &bare, &gptq_nr);
    assert_true(gptq_nr.activations == gptq.activations);
    assert_true(gptq_nr.allocated == gptq.allocated);
    model_shape_free(&m);
}

/* Unsloth's checkpoints wait in CPU memory: the GPU keeps none but the
 * one of the layer in backward. */
static void test_offloaded_checkpoints(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    catalogue_input("Qwen2-1.5B", EST_COUNTER_ALLOCATED, &m, &in);
    est_input_set_stack(&in, EST_STACK_UNSLOTH);
    in.seq = 16384;
    resolve(&in);
    est_result r;
    est_estimate(&in, &bare, &r);
    double head_in = (4.0 + 2.0) * (double)m.hidden * 16384;
    assert_true(r.activations == head_in);
    assert_true(r.at_peak[EST_T_ACTS] <= head_in + 2.0 * (double)m.hidden * 16384 + 1.0);
    in.offload_checkpoints = false;
    est_result kept;
    est_estimate(&in, &bare, &kept);
    assert_true(kept.activations == head_in + (double)m.layers * r.act_checkpoint);
    assert_true(kept.allocated > r.allocated);
    model_shape_free(&m);
}

/* Gradient accumulation keeps a full fine-tune's gradients through the
 * next micro step's forward. */
static void test_grad_accum(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    catalogue_input("Qwen2-0.5B", EST_COUNTER_ALLOCATED, &m, &in);
    in.method = METHOD_FULL;
    in.seq = 8192;
    resolve(&in);
    est_result one, many;
    est_estimate(&in, &bare, &one);
    in.grad_accum = 8;
    resolve(&in);
    est_estimate(&in, &bare, &many);
    assert_true(many.replay_phase[EST_PHASE_LOSS] >= one.replay_phase[EST_PHASE_LOSS] + 0.9 * many.gradients);
    model_shape_free(&m);
}

/* max_split_size_mb keeps large blocks whole: never less reserved than the
 * allocated figure, and the setting changes the placement. */
static void test_alloc_conf(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    catalogue_input("Qwen2-7B", EST_COUNTER_RESERVED, &m, &in);
    in.seq = 8192;
    resolve(&in);
    est_result plain, split;
    est_estimate(&in, &bare, &plain);
    in.alloc.max_split_size = (uint64_t)128 << 20;
    est_estimate(&in, &bare, &split);
    assert_true(split.reserved >= split.allocated);
    assert_true(split.allocated >= plain.allocated);
    model_shape_free(&m);
}

/* --explain: the snapshot at the peak holds what the counter says. */
static void test_snapshot_at_peak(void **state)
{
    (void)state;
    model_shape m;
    est_input in;
    catalogue_input("Qwen2-1.5B", EST_COUNTER_RESERVED, &m, &in);
    resolve(&in);
    est_result r;
    ca_snapshot snap;
    est_estimate_explain(&in, &bare, &r, &snap);
    uint64_t total = 0, used = 0;
    for (size_t i = 0; i < snap.n_segments; i++) {
        total += snap.segments[i].size;
        used += snap.segments[i].allocated;
    }
    assert_true(fabs((double)total - r.reserved) < 1.0);
    assert_true(fabs((double)(total - used) - r.cached_at_peak) < 1.0);
    sb s;
    sb_init(&s);
    est_format_explain(&in, &r, &snap, &s);
    assert_non_null(strstr(sb_str(&s), "segments"));
    assert_non_null(strstr(sb_str(&s), "logits and loss"));
    sb_free(&s);
    ca_snapshot_free(&snap);
    model_shape_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_plans),      cmocka_unit_test(test_loss_shift_copy),      cmocka_unit_test(test_counters),
        cmocka_unit_test(test_varying_lengths), cmocka_unit_test(test_grad_accum),
        cmocka_unit_test(test_alloc_conf),      cmocka_unit_test(test_snapshot_at_peak),
        cmocka_unit_test(test_offloaded_checkpoints), cmocka_unit_test(test_dropped_lengths), cmocka_unit_test(test_gamma_lengths),
        cmocka_unit_test(test_drop_input), cmocka_unit_test(test_deepspeed_zero2),
        cmocka_unit_test(test_nf4_whole),
        cmocka_unit_test(test_bnb_ctx_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
