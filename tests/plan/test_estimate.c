/* test_estimate.c: the memory estimator: every term of a small model
 * against hand-computed values, monotonicity in the settings, input
 * checks, the seed formula, the JSON keys, and the error on the
 * calibration measurements staying under its documented bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan/estimate_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tiny Llama: h 256, MLP 512, 2 layers, 4 heads of 64, 2 kv heads,
 * vocab 1000, untied. 1,692,928 parameters:
 *   layer: q 65,536 + k 32,768 + v 32,768 + o 65,536 + MLP 393,216 + norms 512
 *   = 590,336; x 2 + embedding 256,000 + lm_head 256,000 + final norm 256 */
static void tiny_shape(model_shape *m)
{
    model_shape_init(m, MODEL_ARCH_LLAMA);
    m->hidden = 256;
    m->intermediate = 512;
    m->layers = 2;
    m->heads = 4;
    m->kv_heads = 2;
    m->head_dim = 64;
    m->vocab = 1000;
}

/* Only the physical terms: no calibrated overhead. */
static const est_calib bare = {.framework_gib = 0, .cuda_context_gib = 0,
                               .nccl_gib = 0};

static void tiny_lora(est_input *in, const model_shape *m)
{
    est_input_defaults(in, m);
    in->rank = 8;
    in->targets = MODEL_ROLE_Q | MODEL_ROLE_V;
    in->batch = 2;
    in->seq = 16; /* 32 tokens */
    in->grad_ckpt = false;
    in->counter = EST_COUNTER_ALLOCATED;
    in->adapter_fp32 = false; /* adapters in the model dtype (torchtune, LitGPT, PEFT < 0.12) */
    diag_list d;
    diag_list_init(&d);
    assert_true(est_input_resolve(in, &d));
    diag_list_free(&d);
}

static void test_tiny_lora_terms(void **state)
{
    (void)state;
    model_shape m;
    tiny_shape(&m);
    model_params p;
    model_count_params(&m, &p);
    assert_int_equal(p.total, 1692928);
    est_input in;
    tiny_lora(&in, &m);
    est_result r;
    est_estimate(&in, &bare, &r);
    /* LoRA q: 8 x (256 + 256) = 4,096, v: 8 x (256 + 128) = 3,072; x 2 layers */
    assert_int_equal(r.params_trainable, 14336);
    assert_true(r.weights_dense == 1692928.0 * 2);
    assert_true(r.weights_quantised == 0);
    assert_true(r.adapter == 14336.0 * 2);
    assert_true(r.gradients == 14336.0 * 2);
    assert_true(r.optimizer == 14336.0 * 4);      /* two bf16 moments */
    assert_true(r.optimizer_temp == 14336.0 * 2); /* foreach sqrt(v) */
    /* per token in one layer: norms 2 x 4 x 256 = 2,048; q and v LoRA inputs
     * with dropout 2 x (3 x 256 + 2 x 8) = 1,568; attention 4 x 2 x 256 + 4 x 4
     * = 2,064; MLP 3 x 2 x 512 = 3,072: 8,752 bytes, x 32 tokens */
    assert_true(r.act_per_layer == 8752.0 * 32);
    assert_true(r.act_checkpoint == 2.0 * 256 * 32);
    /* two layers + the final norm's fp32 input and the lm_head's input */
    assert_true(r.activations == 2 * 8752.0 * 32 + 6.0 * 256 * 32);
    assert_true(r.layer_backward == 2.0 * (3 * 512 + 2 * 256) * 32);
    /* the Hugging Face Trainer runs the loss under autocast: three fp32
     * vocabulary buffers, 12 x 1000 bytes per token */
    assert_true(r.loss_vocab_bytes == 12.0);
    assert_true(r.logits == 12000.0 * 32);
    double fixed = 1692928.0 * 2 + 14336.0 * 2 + 14336.0 * 4;
    assert_true(fabs(r.phase[EST_PHASE_LOSS] - (fixed + 609280 + 384000)) < 1e-6);
    assert_true(fabs(r.phase[EST_PHASE_BACKWARD] - (fixed + 609280 + 131072 + 28672)) < 1e-6);
    assert_true(fabs(r.phase[EST_PHASE_STEP] - (fixed + 28672 + 28672)) < 1e-6);
    /* the replay holds every term of the peak phase at once, with the
     * batch and the two cuBLAS workspaces (2 x 8.125 MiB) beside them;
     * every weight is a multiple of 512 bytes, so none is rounded */
    assert_int_equal(r.peak_phase, EST_PHASE_LOSS);
    assert_true(r.peak == r.allocated);
    assert_true(r.allocated >= r.phase[EST_PHASE_LOSS]);
    assert_true(r.at_peak[EST_T_WEIGHTS] == r.weights_dense);
    assert_true(r.at_peak[EST_T_LOGITS] == r.logits);
    assert_true(r.at_peak[EST_T_FRAMEWORK] >= 2 * (4096.0 * 1024 * 2 + 16.0 * 1024 * 8));
    double sum = 0;
    for (int i = 0; i < EST_TERM_SLOTS; i++) sum += r.at_peak[i];
    assert_true(fabs(sum - r.allocated) < 1e-6);

    /* checkpointing keeps only each layer's input; the layer in backward
     * recomputes its activations */
    in.grad_ckpt = true;
    est_estimate(&in, &bare, &r);
    assert_true(r.activations == 2 * 2.0 * 256 * 32 + 6.0 * 256 * 32);
    assert_true(r.layer_backward == 8752.0 * 32 + 4096.0 * 32);

    /* eager attention keeps the fp32 softmax and its cast: 6 x 4 heads x 16 */
    in.flash_attn = false;
    est_estimate(&in, &bare, &r);
    assert_true(r.act_per_layer_eager == 6.0 * 4 * 16 * 32);
    assert_true(r.act_per_layer == (8752.0 + 384) * 32);
    model_shape_free(&m);
}

static void test_tiny_full_and_quant(void **state)
{
    (void)state;
    model_shape m;
    tiny_shape(&m);
    est_input in;
    tiny_lora(&in, &m);
    in.method = METHOD_FULL;
    est_result r;
    est_estimate(&in, &bare, &r);
    assert_int_equal(r.params_trainable, 1692928);
    assert_true(r.adapter == 0);
    assert_true(r.gradients == 1692928.0 * 2);
    assert_true(r.optimizer == 1692928.0 * 4);
    /* full: norms keep fp32 input and bf16 normalised value 2 x 6 x 256;
     * each distinct projection input once: 2 x (256 + 256 + 256 + 512) */
    assert_true(r.act_per_layer == (3072.0 + 2560 + 2064 + 3072) * 32);
    assert_true(r.head_grad == 1000.0 * 256 * 2);
    assert_true(fabs(r.phase[EST_PHASE_STEP] - 1692928.0 * (2 + 4 + 2 + 2)) < 1e-6);

    /* ZeRO-3 over 4 GPUs shards weights, gradients and states */
    in.gpus = 4;
    in.strategy = STRAT_ZERO3;
    est_estimate(&in, &bare, &r);
    assert_true(fabs(r.weights_dense - 1692928.0 * 2 / 4) < 1e-6);
    assert_true(fabs(r.gradients - 1692928.0 * 2 / 4) < 1e-6);
    /* DeepSpeed in bf16: the ZeRO optimizer keeps an fp32 master partition
     * and fp32 m and v, and builds an fp32 gradient of it for the step */
    assert_true(fabs(r.optimizer - 1692928.0 * 12 / 4) < 1e-6);
    assert_true(fabs(r.optimizer_temp - 1692928.0 * 4 / 4) < 1e-6);
    /* DeepSpeed bf16 (amp): the same, 16-bit weights and gradients */
    in.precision = PREC_AMP;
    est_estimate(&in, &bare, &r);
    assert_true(fabs(r.weights_dense - 1692928.0 * 2 / 4) < 1e-6);
    assert_true(fabs(r.optimizer - 1692928.0 * 12 / 4) < 1e-6);
    assert_true(fabs(r.optimizer_temp - 1692928.0 * 4 / 4) < 1e-6);
    /* amp without DeepSpeed: fp32 weights, gradients and moments */
    in.strategy = STRAT_DDP;
    est_estimate(&in, &bare, &r);
    assert_true(r.weights_dense == 1692928.0 * 4);
    assert_true(r.optimizer == 1692928.0 * 8);
    assert_true(r.sharding == r.gradients); /* DDP buckets */

    /* NF4 with double quantisation: 4 + 8/64 + 32/16384 bits per linear weight */
    tiny_lora(&in, &m);
    in.method = METHOD_QLORA;
    in.quant = QUANT_NF4_DQ;
    in.bits = 4;
    est_estimate(&in, &bare, &r);
    double linear = 2.0 * (65536 + 32768 * 2 + 65536 + 393216);
    assert_true(fabs(r.weights_quantised - linear * (4 + 0.125 + 32.0 / 16384) / 8) < 1e-6);
    /* the Hugging Face stack's prepare_model_for_kbit_training keeps the
     * unquantised weights in fp32; a recipe that casts them back, in bf16 */
    assert_true(in.kbit_fp32);
    assert_true(fabs(r.weights_dense - (1692928.0 - linear) * 4) < 1e-6);
    in.kbit_fp32 = false;
    est_estimate(&in, &bare, &r);
    assert_true(fabs(r.weights_dense - (1692928.0 - linear) * 2) < 1e-6);
    /* GPTQ bases are left alone by PEFT */
    in.kbit_fp32 = true;
    in.quant = QUANT_GPTQ4;
    est_estimate(&in, &bare, &r);
    assert_true(fabs(r.weights_dense - (1692928.0 - linear) * 2) < 1e-6);
    /* NF4 without double quantisation: one fp32 absmax per 64 weights */
    in.quant = QUANT_NF4;
    est_estimate(&in, &bare, &r);
    assert_true(fabs(r.weights_quantised - linear * 4.5 / 8) < 1e-6);
    /* the dequantised MLP matrix (256 x 512) in bf16 while it computes */
    assert_true(r.weight_temp == 2.0 * 256 * 512);
    model_shape_free(&m);
}

/* Bytes per token and vocabulary entry at the loss peak, by stack
 * (docs/estimator.md, "Stacks"). */
static double loss_rule(est_stack stack, spec_precision prec, spec_strategy strat, bool compiled,
                        bool qwen_v1)
{
    model_shape m;
    tiny_shape(&m);
    if (qwen_v1) m.arch = MODEL_ARCH_QWEN;
    est_input in;
    tiny_lora(&in, &m);
    est_input_set_stack(&in, stack);
    in.precision = prec;
    in.strategy = strat;
    in.gpus = strat == STRAT_SINGLE ? 1 : 2;
    in.compiled = compiled;
    diag_list d;
    diag_list_init(&d);
    assert_true(est_input_resolve(&in, &d));
    diag_list_free(&d);
    est_result r;
    est_estimate(&in, &bare, &r);
    assert_true(fabs(r.logits - r.loss_vocab_bytes * 1000 * 32) < 1e-6);
    model_shape_free(&m);
    return r.loss_vocab_bytes;
}

static void test_loss_rules(void **state)
{
    (void)state;
    /* Trainer: autocast puts the cross entropy in fp32 for any model code */
    assert_true(loss_rule(EST_STACK_HF, PREC_BF16, STRAT_SINGLE, false, false) == 12);
    assert_true(loss_rule(EST_STACK_HF, PREC_BF16, STRAT_SINGLE, false, true) == 12);
    /* DeepSpeed trains the bf16 model without autocast: Qwen v1's bf16 loss */
    assert_true(loss_rule(EST_STACK_HF, PREC_BF16, STRAT_ZERO2, false, true) == 6);
    assert_true(loss_rule(EST_STACK_HF, PREC_BF16, STRAT_ZERO2, false, false) == 12);
    /* a plain loop keeps the model output's 16-bit logits through backward */
    assert_true(loss_rule(EST_STACK_PLAIN, PREC_BF16, STRAT_SINGLE, false, false) == 14);
    assert_true(loss_rule(EST_STACK_PLAIN, PREC_BF16, STRAT_SINGLE, false, true) == 8);
    /* torchtune's chunked loss at its last chunk: every bf16 chunk, every
     * chunk's fp32 log-softmax, that chunk's fp32 upcast (an eighth) */
    assert_true(loss_rule(EST_STACK_TORCHTUNE, PREC_BF16, STRAT_SINGLE, false, false) == 6.5);
    assert_true(loss_rule(EST_STACK_TORCHTUNE, PREC_BF16, STRAT_SINGLE, true, false) == 3);
    /* LitGPT: chunks and their log-softmax in bf16 (fp32 under
     * bf16-mixed), and a chunk's two gradient buffers: at 16 tokens one
     * chunk of 128 holds them all */
    assert_true(loss_rule(EST_STACK_LITGPT, PREC_BF16, STRAT_SINGLE, false, false) == 8);
    assert_true(loss_rule(EST_STACK_LITGPT, PREC_AMP, STRAT_SINGLE, false, false) == 14);
    /* fp32 training: three fp32 buffers */
    assert_true(loss_rule(EST_STACK_HF, PREC_FP32, STRAT_SINGLE, false, true) == 12);

    /* LitGPT with an unchunked lm_head (full.py): + the logits' gradient;
     * its fused qkv LoRA runs one dropout: q and v share one input copy */
    model_shape m;
    tiny_shape(&m);
    est_input in;
    tiny_lora(&in, &m);
    est_input_set_stack(&in, EST_STACK_LITGPT);
    in.chunked_loss = false;
    est_result r;
    est_estimate(&in, &bare, &r);
    assert_true(r.loss_vocab_bytes == 10);
    assert_true(r.act_per_layer == (8752.0 - 3 * 256) * 32);
    /* Gemma-2's logit softcapping saves its tanh output */
    m.arch = MODEL_ARCH_GEMMA2;
    est_estimate(&in, &bare, &r);
    assert_true(r.loss_vocab_bytes == 12);
    model_shape_free(&m);
}

/* PEFT's fp32 adapters: 4-byte weights, gradients and foreach temporary,
 * 8-byte AdamW moments, and an fp32 copy of each adapted input. */
static void test_adapter_fp32(void **state)
{
    (void)state;
    model_shape m;
    tiny_shape(&m);
    est_input in;
    tiny_lora(&in, &m);
    in.adapter_fp32 = true;
    est_result r;
    est_estimate(&in, &bare, &r);
    assert_true(r.adapter == 14336.0 * 4);
    assert_true(r.gradients == 14336.0 * 4);
    assert_true(r.optimizer == 14336.0 * 8);
    assert_true(r.optimizer_temp == 14336.0 * 4);
    /* q and v inputs: (4 + 1) x 256 each instead of (2 + 1) x 256 */
    assert_true(r.act_per_layer == (8752.0 + 2 * 2 * 256) * 32);
    /* bitsandbytes layers skip the cast under autocast */
    in.method = METHOD_QLORA;
    in.quant = QUANT_NF4;
    in.bits = 4;
    est_estimate(&in, &bare, &r);
    assert_true(r.act_per_layer == 8752.0 * 32);
    assert_true(r.adapter == 14336.0 * 4);
    model_shape_free(&m);
}

/* On a GPU of known size the caching allocator frees its cache when
 * cudaMalloc would fail, so the reserved counter stops at what the GPU
 * holds (never below the live tensors); without a size it is not capped. */
static void test_gpu_cap(void **state)
{
    (void)state;
    model_shape m;
    model_shape_from_catalog(model_catalog_find("Qwen2-0.5B"), &m);
    est_input in;
    est_input_defaults(&in, &m);
    in.seq = 8192;
    in.seq_mean = 3000; /* varying lengths: a cache the long batches cannot use */
    in.seq_sd = 2500;
    diag_list d;
    diag_list_init(&d);
    assert_true(est_input_resolve(&in, &d));
    diag_list_free(&d);
    est_calib c = est_calib_default;
    est_result free_run, r;
    est_estimate(&in, &c, &free_run);
    assert_true(free_run.reserved > free_run.allocated + 0.5 * GIB);
    assert_false(free_run.oom);
    assert_int_equal(free_run.alloc_retries, 0);
    /* a GPU between the live tensors and that cache: the allocator frees
     * its cache and retries instead of growing */
    double ctx = c.cuda_context_gib * GIB;
    in.gpu_memory = ctx + (free_run.allocated + free_run.reserved) / 2;
    est_estimate(&in, &c, &r);
    assert_false(r.oom);
    assert_true(r.alloc_retries > 0);
    assert_true(r.reserved <= in.gpu_memory - ctx);
    assert_true(r.reserved >= r.allocated);
    assert_true(r.device <= in.gpu_memory);
    /* too small for the live tensors: the estimate says so (device > GPU) */
    in.gpu_memory = free_run.allocated / 2;
    est_estimate(&in, &c, &r);
    assert_true(r.oom);
    assert_true(r.device > in.gpu_memory);
    model_shape_free(&m);
}

/* The estimate of a catalogue model with one setting changed, for the
 * counter given. */
static double peak_counter(const char *model, void (*change)(est_input *, int), int v, est_counter counter)
{
    const model_catalog_entry *e = model_catalog_find(model);
    assert_non_null(e);
    model_shape m;
    model_shape_from_catalog(e, &m);
    est_input in;
    est_input_defaults(&in, &m);
    in.counter = counter;
    change(&in, v);
    diag_list d;
    diag_list_init(&d);
    assert_true(est_input_resolve(&in, &d));
    diag_list_free(&d);
    est_result r;
    est_estimate(&in, NULL, &r);
    model_shape_free(&m);
    return r.peak;
}

static double peak_of(const char *model, void (*change)(est_input *, int), int v)
{
    return peak_counter(model, change, v, EST_COUNTER_ALLOCATED);
}

/* The device figure grows with the setting, but for where the allocator
 * happens to place tensors: a larger setting can fragment less (real
 * allocators do the same), by at most 3 %. */
static bool device_grows(const char *model, void (*change)(est_input *, int), int lo, int hi)
{
    return peak_counter(model, change, hi, EST_COUNTER_DEVICE) >=
           0.97 * peak_counter(model, change, lo, EST_COUNTER_DEVICE);
}

static void set_rank(est_input *in, int v) { in->rank = v; }
static void set_batch(est_input *in, int v) { in->batch = v; }
static void set_seq(est_input *in, int v) { in->seq = v; }
static void set_gc(est_input *in, int v) { in->grad_ckpt = v; in->method = METHOD_FULL; }
static void set_gc_lora(est_input *in, int v) { in->grad_ckpt = v; }
static void set_flash(est_input *in, int v) { in->flash_attn = v; }
static void set_flash_nogc(est_input *in, int v) { in->flash_attn = v; in->grad_ckpt = false; }

static void test_monotonic(void **state)
{
    (void)state;
    const char *models[] = {"Qwen2-7B", "Llama-2-7b-hf", "Qwen-1_8B", "gemma-2-2b", "Phi-3-mini-4k-instruct",
                            "Meta-Llama-3-70B", "SmolLM2-135M"};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        const char *m = models[k];
        for (int r = 1; r < 512; r *= 2) assert_true(peak_of(m, set_rank, 2 * r) >= peak_of(m, set_rank, r));
        for (int b = 1; b < 64; b *= 2) assert_true(peak_of(m, set_batch, 2 * b) >= peak_of(m, set_batch, b));
        for (int s = 128; s < 65536; s *= 2) assert_true(peak_of(m, set_seq, 2 * s) >= peak_of(m, set_seq, s));
        if (k % 2 == 0) { /* the device figure on every other model: the replays are slow under ASan */
            for (int r = 1; r < 512; r *= 4) assert_true(device_grows(m, set_rank, r, 4 * r));
            for (int s = 128; s < 65536; s *= 4) assert_true(device_grows(m, set_seq, s, 4 * s));
        }
        assert_true(peak_of(m, set_gc, 1) <= peak_of(m, set_gc, 0));
        assert_true(peak_of(m, set_gc_lora, 1) <= peak_of(m, set_gc_lora, 0));
        assert_true(peak_of(m, set_flash, 1) <= peak_of(m, set_flash, 0));
        assert_true(peak_of(m, set_flash_nogc, 1) <= peak_of(m, set_flash_nogc, 0));
    }
}

/* ZeRO-3 (and FSDP) with more GPUs hold fewer weights per GPU. */
static void test_sharding_scales(void **state)
{
    (void)state;
    const model_catalog_entry *e = model_catalog_find("Meta-Llama-3-70B");
    model_shape m;
    model_shape_from_catalog(e, &m);
    spec_strategy strategies[] = {STRAT_ZERO3, STRAT_FSDP};
    for (size_t s = 0; s < 2; s++) {
        double prev_w = INFINITY, prev_peak = INFINITY;
        for (int g = 2; g <= 64; g *= 2) {
            est_input in;
            est_input_defaults(&in, &m);
            in.method = METHOD_FULL;
            in.gpus = g;
            in.strategy = strategies[s];
            diag_list d;
            diag_list_init(&d);
            assert_true(est_input_resolve(&in, &d));
            diag_list_free(&d);
            est_result r;
            est_estimate(&in, NULL, &r);
            assert_true(r.weights_dense < prev_w);
            assert_true(r.peak < prev_peak);
            prev_w = r.weights_dense;
            prev_peak = r.peak;
        }
    }
    model_shape_free(&m);
}

static void expect_invalid(void (*change)(est_input *), const char *field)
{
    model_shape m;
    tiny_shape(&m);
    est_input in;
    est_input_defaults(&in, &m);
    change(&in);
    diag_list d;
    diag_list_init(&d);
    assert_false(est_input_resolve(&in, &d));
    assert_true(d.errors >= 1);
    if (strcmp(d.items[0].path, field) != 0) fail_msg("error on %s, expected %s", d.items[0].path, field);
    diag_list_free(&d);
    model_shape_free(&m);
}

static void bad_full_quant(est_input *in) { in->method = METHOD_FULL; in->quant = QUANT_NF4; }
static void bad_auto(est_input *in) { in->method = METHOD_AUTO; }
static void bad_single(est_input *in) { in->gpus = 4; in->strategy = STRAT_SINGLE; }
static void bad_rank(est_input *in) { in->rank = 0; }
static void bad_batch(est_input *in) { in->batch = 0; }
static void bad_qlora(est_input *in) { in->method = METHOD_QLORA; in->quant = QUANT_NONE; }
static void bad_nf4_bits(est_input *in) { in->quant = QUANT_NF4; in->bits = 8; }
static void bad_split(est_input *in) { in->gpus = 3; in->tensor_parallel = 2; in->strategy = STRAT_DDP; }

static void test_input_checks(void **state)
{
    (void)state;
    expect_invalid(bad_full_quant, "--quant");
    expect_invalid(bad_auto, "--method");
    expect_invalid(bad_single, "--strategy");
    expect_invalid(bad_rank, "--rank");
    expect_invalid(bad_batch, "--batch");
    expect_invalid(bad_qlora, "--quant");
    expect_invalid(bad_nf4_bits, "--bits");
    expect_invalid(bad_split, "--gpus");

    /* auto values resolve: 4 bits means NF4 with double quantisation */
    model_shape m;
    tiny_shape(&m);
    est_input in;
    est_input_defaults(&in, &m);
    in.method = METHOD_QLORA;
    in.quant = QUANT_AUTO;
    in.bits = 0;
    in.strategy = STRAT_AUTO;
    in.gpus = 2;
    diag_list d;
    diag_list_init(&d);
    assert_true(est_input_resolve(&in, &d));
    assert_int_equal(in.quant, QUANT_NF4_DQ);
    assert_int_equal(in.bits, 4);
    assert_int_equal(in.strategy, STRAT_DDP);
    diag_list_free(&d);
    model_shape_free(&m);
}

static void test_seed_formula(void **state)
{
    (void)state;
    est_seed s;
    /* 7B, r16, 4 targets, hidden 4096, 32 layers, batch 4 x 2048:
     * model 7 x 2 x 1.2 = 16.8; loraParams 7 x 2 x 16 x 4 / 4096 = 0.21875;
     * lora 0.4375; optimizer 2.625; activations 4 x 2048 x 4096 x 32 x 2 B = 2 GiB;
     * total (16.8 + 0.4375 + 2.625 + 2) x 1.2 = 26.235 */
    est_seed_formula(7e9, 16, 4, false, 4, 2048, 4096, 32, &s);
    assert_true(fabs(s.model_gib - 16.8) < 1e-9);
    assert_true(fabs(s.lora_params_b - 0.21875) < 1e-12);
    assert_true(fabs(s.activations_gib - 2.0) < 1e-12);
    assert_true(fabs(s.total_gib - 26.235) < 1e-9);
    assert_int_equal(s.gpus, 1);
    assert_string_equal(s.gpu_type, "A100-40GB");
    est_seed_formula(70e9, 16, 4, false, 4, 2048, 8192, 80, &s);
    assert_true(s.total_gib > 160);
    assert_int_equal(s.gpus, (int)ceil(s.total_gib / 80));
    assert_string_equal(s.gpu_type, "H100-80GB");
}

/* The terms marked in_peak add up to per_gpu_gib. */
static void expect_sum_is_peak(const est_input *in)
{
    est_result r;
    est_estimate(in, NULL, &r);
    char *text = est_to_json(in, &r, NULL);
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    assert_non_null(root);
    json_t *t = json_object_get(root, "terms_gib");
    double sum = 0;
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(root, "in_peak"), i, k)
        sum += json_number_value(json_object_get(t, json_string_value(k)));
    double total = json_number_value(json_object_get(root, "per_gpu_gib"));
    if (fabs(sum - total) > 1e-6)
        fail_msg("%s %s: terms sum to %.4f, total %.4f (%s peak)", spec_method_name(in->method),
                 est_counter_name(in->counter), sum, total, est_phase_name(r.peak_phase));
    json_decref(root);
    free(text);
}

static void test_terms_add_up(void **state)
{
    (void)state;
    const char *models[] = {"Qwen2-7B", "Llama-2-7b-hf", "gemma-2-2b"};
    spec_method methods[] = {METHOD_LORA, METHOD_QLORA, METHOD_DORA, METHOD_FULL};
    est_counter counters[] = {EST_COUNTER_DEVICE, EST_COUNTER_RESERVED, EST_COUNTER_ALLOCATED};
    spec_optimizer opts[] = {OPT_ADAMW, OPT_PAGED_ADAMW8BIT};
    for (size_t mi = 0; mi < 3; mi++) {
        model_shape m;
        model_shape_from_catalog(model_catalog_find(models[mi]), &m);
        for (size_t k = 0; k < 4; k++)
            for (size_t c = 0; c < 3; c++)
                for (size_t o = 0; o < 2; o++)
                    for (int gc = 0; gc < 2; gc++) {
                        est_input in;
                        est_input_defaults(&in, &m);
                        in.method = methods[k];
                        in.quant = methods[k] == METHOD_QLORA ? QUANT_NF4 : QUANT_NONE;
                        in.counter = counters[c];
                        in.optimizer = opts[o];
                        in.grad_ckpt = gc;
                        in.batch = 4;
                        diag_list d;
                        diag_list_init(&d);
                        assert_true(est_input_resolve(&in, &d));
                        diag_list_free(&d);
                        expect_sum_is_peak(&in);
                    }
        model_shape_free(&m);
    }
}

static void test_json_keys(void **state)
{
    (void)state;
    const model_catalog_entry *e = model_catalog_find("Qwen2-7B-Instruct");
    model_shape m;
    model_shape_from_catalog(e, &m);
    est_input in;
    est_input_defaults(&in, &m);
    diag_list d;
    diag_list_init(&d);
    assert_true(est_input_resolve(&in, &d));
    est_result r;
    est_estimate(&in, NULL, &r);
    char *text = est_to_json(&in, &r, &d);
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    assert_non_null(root);
    json_t *total = json_object_get(root, "per_gpu_gib");
    assert_true(json_is_number(total));
    assert_true(fabs(json_number_value(total) - r.peak / GIB) < 1e-9);
    const char *terms[] = {"base_weights", "base_weights_quantised", "adapter_weights", "gradients",
                           "optimizer_states", "optimizer_step_temp", "activations", "layer_backward",
                           "logits_and_loss", "framework", "allocator_slack", "cuda_context"};
    json_t *t = json_object_get(root, "terms_gib");
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++)
        if (!json_is_number(json_object_get(t, terms[i]))) fail_msg("terms_gib.%s missing", terms[i]);
    assert_true(json_is_number(json_object_get(json_object_get(root, "activation_per_layer"), "saved_gib")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "settings"), "method")), "lora");
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "model"), "name")), "Qwen/Qwen2-7B");
    /* the terms alive at the peak add up to it */
    double sum = 0;
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(root, "in_peak"), i, k)
        sum += json_number_value(json_object_get(t, json_string_value(k)));
    assert_true(fabs(sum - r.peak / GIB) < 1e-6);
    json_decref(root);
    free(text);
    diag_list_free(&d);
    model_shape_free(&m);
}

/* The documented bound (docs/estimator.md, "Results"): on the 79 usable
 * rows of share/calibration lathe's MAPE stays under 15 % and its median
 * under 8 % (measured: 13.3 % and 6.2 %). Under the sanitizers (slow)
 * only the rows of fixed sample lengths are estimated, each checked to be
 * finite and positive. */
static void test_calibration_error(void **state)
{
    (void)state;
    est_row *rows;
    size_t n;
    diag_list d;
    diag_list_init(&d);
    assert_true(est_rows_load(LATHE_SOURCE_DIR "/share/calibration/memory-calibration.jsonl", &rows, &n, &d));
    bool quick = getenv("LATHE_SANITIZED") != NULL;
    double ape[256];
    size_t k = 0, usable = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].usable) continue;
        usable++;
        if (quick && rows[i].in.seq_sd > 0) continue;
        double e = est_row_ape(&rows[i], NULL);
        assert_true(isfinite(e) && e >= 0);
        if (k < 256) ape[k++] = e;
    }
    assert_int_equal(usable, 79);
    est_metrics m;
    est_metrics_of(ape, k, &m);
    if (!quick && (m.mape >= 15.0 || m.median_ape >= 8.0))
        fail_msg("calibration MAPE %.1f%% (bound 15%%), median %.1f%% (bound 8%%)", m.mape, m.median_ape);
    est_rows_free(rows, n);
    diag_list_free(&d);
}

static void test_rows_errors(void **state)
{
    (void)state;
    est_row *rows;
    size_t n;
    diag_list d;
    diag_list_init(&d);
    assert_false(est_rows_load(LATHE_TEST_DATA "/rows-bad-line.jsonl", &rows, &n, &d));
    assert_int_equal(d.errors, 1);
    assert_int_equal(d.items[0].line, 2);
    est_rows_free(rows, n);
    diag_list_free(&d);
    diag_list_init(&d);
    assert_false(est_rows_load(LATHE_TEST_DATA "/no-such-file.jsonl", &rows, &n, &d));
    est_rows_free(rows, n);
    diag_list_free(&d);
    diag_list_init(&d);
    assert_true(est_rows_load(LATHE_TEST_DATA "/rows-skips.jsonl", &rows, &n, &d));
    assert_int_equal(n, 3);
    assert_true(rows[0].usable);
    assert_false(rows[1].usable);
    assert_non_null(strstr(rows[1].skip_reason, "offload"));
    assert_false(rows[2].usable);
    assert_non_null(strstr(rows[2].skip_reason, "method"));
    est_rows_free(rows, n);
    diag_list_free(&d);
}

/* The row loader's stack from source_name and source_date, and the GPU's
 * memory from its name (docs/estimator.md, "Calibration rows"). */
static void test_rows_stacks(void **state)
{
    (void)state;
    est_row *rows;
    size_t n;
    diag_list d;
    diag_list_init(&d);
    assert_true(est_rows_load(LATHE_TEST_DATA "/rows-stacks.jsonl", &rows, &n, &d));
    assert_int_equal(n, 10);
    for (size_t i = 0; i < n; i++)
        if (!rows[i].usable) fail_msg("row %d skipped: %s", rows[i].id, rows[i].skip_reason);
    /* torchtune before July 2024: foreach AdamW, shifted logits kept */
    assert_int_equal(rows[0].in.stack, EST_STACK_TORCHTUNE);
    assert_false(rows[0].in.fused_optimizer);
    assert_true(rows[0].in.logits_kept);
    assert_false(rows[0].in.chunked_loss);
    assert_true(rows[0].in.gpu_memory == 24 * GIB);
    assert_true(rows[0].in.nf4_whole); /* torchao 0.1 */
    /* torchtune from July 2024: fused AdamW, chunked_ce from the row */
    assert_int_equal(rows[1].in.stack, EST_STACK_TORCHTUNE);
    assert_true(rows[1].in.fused_optimizer);
    assert_false(rows[1].in.logits_kept);
    assert_true(rows[1].in.chunked_loss);
    assert_true(rows[1].in.gpu_memory == 80 * GIB);
    assert_false(rows[1].in.nf4_whole); /* torchao >= 0.2 works in chunks */
    /* LitGPT */
    assert_int_equal(rows[2].in.stack, EST_STACK_LITGPT);
    assert_false(rows[2].in.adapter_fp32);
    assert_true(rows[2].in.gpu_memory == 0);
    /* GaLore's loop: plain, bf16 loss of its Llama copy */
    assert_int_equal(rows[3].in.stack, EST_STACK_PLAIN);
    assert_true(rows[3].in.bf16_loss);
    /* a Trainer source of 2023: PEFT < 0.12 kept bf16 adapters ... */
    assert_int_equal(rows[4].in.stack, EST_STACK_HF);
    assert_false(rows[4].in.adapter_fp32);
    assert_true(rows[4].in.gpu_memory == 48 * GIB);
    /* ... except on a quantised base */
    assert_int_equal(rows[5].in.stack, EST_STACK_HF);
    assert_true(rows[5].in.adapter_fp32);
    /* PEFT's MetaMathQA benchmark: a plain loop over a transformers model */
    assert_int_equal(rows[6].in.stack, EST_STACK_PLAIN);
    assert_true(rows[6].in.adapter_fp32);
    assert_true(rows[6].in.logits_kept);
    assert_false(rows[6].in.bf16_loss);
    /* ms-swift never calls prepare_model_for_kbit_training: a bitsandbytes
     * base keeps its embedding, lm_head and norms in bf16. Llama-2-7B's:
     * 2 x 32000 x 4096 + (2 x 32 + 1) x 4096 = 262,410,240 parameters, 2
     * bytes each (4 with the fp32 cast). Its samples past the cap were
     * dropped (truncation "drop") */
    assert_int_equal(rows[7].in.stack, EST_STACK_HF);
    assert_false(rows[7].in.kbit_fp32);
    assert_true(rows[7].in.drop_long);
    est_result r;
    est_estimate(&rows[7].in, NULL, &r);
    if (r.weights_dense != 262410240.0 * 2) fail_msg("dense weights %.0f, by hand %.0f", r.weights_dense, 262410240.0 * 2);
    /* transformers 4.46-4.48 (December 2024): the shifted fp32 copy; 4.49 on
     * (March 2025): none */
    assert_false(rows[8].in.legacy_loss);
    assert_true(rows[8].in.loss_shift_copy);
    assert_false(rows[9].in.legacy_loss);
    assert_false(rows[9].in.loss_shift_copy);
    assert_true(rows[4].in.legacy_loss);
    assert_false(rows[4].in.loss_shift_copy);
    est_rows_free(rows, n);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_lora_terms),  cmocka_unit_test(test_tiny_full_and_quant),
        cmocka_unit_test(test_monotonic),        cmocka_unit_test(test_sharding_scales),
        cmocka_unit_test(test_input_checks),     cmocka_unit_test(test_seed_formula),
        cmocka_unit_test(test_json_keys),        cmocka_unit_test(test_terms_add_up),
        cmocka_unit_test(test_calibration_error),
        cmocka_unit_test(test_rows_errors),      cmocka_unit_test(test_loss_rules),
        cmocka_unit_test(test_adapter_fp32),     cmocka_unit_test(test_gpu_cap),
        cmocka_unit_test(test_rows_stacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
