/* estimate_input.c: the estimator's input: defaults, resolution of the
 * "auto" values, and the checks of every field and combination. */
#include "plan/plan.h"

#include <string.h>

const char *est_counter_name(est_counter c)
{
    switch (c) {
    case EST_COUNTER_DEVICE: return "device";
    case EST_COUNTER_RESERVED: return "reserved";
    case EST_COUNTER_ALLOCATED: return "allocated";
    }
    return "?";
}

bool est_counter_parse(const char *s, est_counter *out)
{
    static const struct {
        const char *name;
        est_counter c;
    } tab[] = {{"device", EST_COUNTER_DEVICE},       {"nvidia-smi", EST_COUNTER_DEVICE},
               {"reserved", EST_COUNTER_RESERVED},   {"allocated", EST_COUNTER_ALLOCATED}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (str_ieq(s, tab[i].name)) {
            *out = tab[i].c;
            return true;
        }
    return false;
}

static const struct {
    const char *name;
    est_stack stack;
} STACKS[] = {{"hf", EST_STACK_HF},         {"torchtune", EST_STACK_TORCHTUNE},
              {"litgpt", EST_STACK_LITGPT}, {"plain", EST_STACK_PLAIN},
              {"unsloth", EST_STACK_UNSLOTH}};

const char *est_stack_name(est_stack s)
{
    for (size_t i = 0; i < sizeof STACKS / sizeof STACKS[0]; i++)
        if (STACKS[i].stack == s) return STACKS[i].name;
    return "?";
}

bool est_stack_parse(const char *s, est_stack *out)
{
    for (size_t i = 0; i < sizeof STACKS / sizeof STACKS[0]; i++)
        if (str_ieq(s, STACKS[i].name)) {
            *out = STACKS[i].stack;
            return true;
        }
    if (str_ieq(s, "transformers") || str_ieq(s, "peft") || str_ieq(s, "ms-swift") || str_ieq(s, "swift") ||
        str_ieq(s, "axolotl")) {
        *out = EST_STACK_HF; /* all of them train through the Hugging Face Trainer */
        return true;
    }
    return false;
}

void est_input_set_stack(est_input *in, est_stack stack)
{
    in->stack = stack;
    /* PEFT >= 0.12 (July 2024) upcasts 16-bit adapters to fp32
     * (autocast_adapter_dtype=True in get_peft_model); torchtune builds
     * its LoRA layers in the model dtype; LitGPT's bf16-true keeps every
     * parameter in bf16. */
    in->adapter_fp32 = stack == EST_STACK_HF || stack == EST_STACK_PLAIN || stack == EST_STACK_UNSLOTH;
    /* torchtune's configs use CEWithChunkedOutputLoss and AdamW with
     * fused: True since mid-2024; LitGPT's LoRA and QLoRA scripts call
     * model(input_ids, lm_head_chunk_size=128). */
    in->chunked_loss = stack == EST_STACK_TORCHTUNE || stack == EST_STACK_LITGPT;
    in->fused_optimizer = stack == EST_STACK_TORCHTUNE;
    /* `outputs = model(**batch); outputs.loss.backward()` keeps the
     * logits referenced; the Trainer drops the outputs in compute_loss,
     * torchtune deletes them before backward. */
    in->logits_kept = stack == EST_STACK_PLAIN;
    /* Unsloth replaces the norms, RoPE and SwiGLU with Triton kernels that
     * keep their 16-bit inputs (fast_rms_layernorm saves X and the fp32
     * reciprocal per row; swiglu keeps gate and up), as a compiled model
     * does; Fast_CrossEntropyLoss keeps the logits and a log-sum-exp per
     * row and writes the gradient into the logits; its
     * use_gradient_checkpointing="unsloth" moves each layer's checkpoint to
     * CPU memory until the layer's backward needs it. */
    in->compiled = stack == EST_STACK_UNSLOTH;
    in->fused_loss = stack == EST_STACK_UNSLOTH;
    in->offload_checkpoints = stack == EST_STACK_UNSLOTH;
    /* Qwen v1's modeling_qwen.py takes CrossEntropyLoss of the bf16
     * lm_logits; transformers' own models upcast them (logits.float()). */
    in->bf16_loss = in->model && in->model->arch == MODEL_ARCH_QWEN;
    /* PEFT's prepare_model_for_kbit_training, which TRL's SFTTrainer and
     * the PEFT and transformers QLoRA guides call, casts every 16-bit
     * parameter of a bitsandbytes-quantised model to fp32 (GPTQ models
     * are skipped); the QLoRA paper's qlora.py and axolotl cast the
     * embedding and lm_head back (est_rows_load follows the source). */
    in->kbit_fp32 = stack == EST_STACK_HF;
    /* torchtune's recipes log the memory after building the model with
     * memory_stats_log(reset_stats=True), which resets the peaks; the
     * distributed ones call cleanup_before_training (gc, empty_cache,
     * reset_peak_memory_stats) (torchtune/utils/memory.py, 2024) */
    in->reset_after_load = stack == EST_STACK_TORCHTUNE;
}

const char *est_phase_name(est_phase p)
{
    switch (p) {
    case EST_PHASE_LOSS: return "forward+loss";
    case EST_PHASE_BACKWARD: return "backward";
    case EST_PHASE_STEP: return "optimizer step";
    }
    return "?";
}

void est_input_defaults(est_input *in, const model_shape *m)
{
    memset(in, 0, sizeof *in);
    in->model = m;
    in->method = METHOD_LORA;
    in->quant = QUANT_NONE;
    in->bits = 16;
    in->rank = 16;
    in->targets = MODEL_ROLE_Q | MODEL_ROLE_V; /* PEFT's default for Llama-family models */
    in->lora_dropout = 0.05;
    in->batch = 1;
    in->seq = 2048;
    in->grad_accum = 1;
    in->grad_ckpt = true;
    in->flash_attn = true;
    in->precision = PREC_BF16;
    in->optimizer = OPT_ADAMW;
    in->gpus = 1;
    in->strategy = STRAT_SINGLE;
    in->tensor_parallel = 1;
    in->pipeline_stages = 1;
    in->counter = EST_COUNTER_DEVICE;
    ca_config_default(&in->alloc);
    est_input_set_stack(in, EST_STACK_HF);
}

static diag *bad(diag_list *d, const char *field, const char *message)
{
    return diag_add(d, DIAG_ERROR, NULL, 0, 0, field, message);
}

static void check_range(diag_list *d, const char *field, long v, long lo, long hi)
{
    if (v >= lo && v <= hi) return;
    diag *x = bad(d, field, "out of range");
    diag_set_expected(x, "an integer from %ld to %ld", lo, hi);
    diag_set_found(x, "%ld", v);
}

/* Quantisation and bits: fills the defaults and checks they agree. */
static void resolve_quant(est_input *in, diag_list *d)
{
    if (in->quant == QUANT_AUTO) {
        if (in->method == METHOD_QLORA || in->bits == 4 || in->bits == 8)
            in->quant = in->bits == 8 ? QUANT_INT8 : QUANT_NF4_DQ;
        else
            in->quant = QUANT_NONE;
    }
    if (in->method == METHOD_LORA && in->quant != QUANT_NONE) in->method = METHOD_QLORA;
    switch (in->quant) {
    case QUANT_NONE:
        if (in->bits == 0 || in->bits == 4 || in->bits == 8) {
            if (in->bits) {
                diag *x = bad(d, "--bits", "quantised bits without a quantisation");
                diag_set_expected(x, "--quant nf4, nf4-dq, int8, gptq4 or awq4 with --bits %d", in->bits);
            }
            in->bits = in->precision == PREC_FP32 ? 32 : 16;
        }
        if (in->bits != 16 && in->bits != 32) check_range(d, "--bits", in->bits, 16, 16);
        break;
    case QUANT_INT8:
        if (in->bits == 0 || in->bits == 16) in->bits = 8;
        if (in->bits != 8) check_range(d, "--bits", in->bits, 8, 8);
        break;
    case QUANT_GPTQ4: /* GPTQ comes in 4 and 8 bits */
        if (in->bits == 0 || in->bits == 16) in->bits = 4;
        if (in->bits != 4 && in->bits != 8) {
            diag *x = bad(d, "--bits", "GPTQ weights have 4 or 8 bits");
            diag_set_found(x, "%d", in->bits);
        }
        break;
    default: /* nf4, nf4-dq, awq4 */
        if (in->bits == 0 || in->bits == 16) in->bits = 4;
        if (in->bits != 4) {
            diag *x = bad(d, "--bits", "this quantisation stores 4-bit weights");
            diag_set_expected(x, "4");
            diag_set_found(x, "%d", in->bits);
        }
        break;
    }
    if (in->method == METHOD_QLORA && in->quant == QUANT_NONE) {
        diag *x = bad(d, "--quant", "QLoRA needs quantised base weights");
        diag_set_expected(x, "nf4, nf4-dq, int8, gptq4 or awq4");
        diag_set_found(x, "none");
    }
    if (in->method == METHOD_FULL && in->quant != QUANT_NONE) {
        diag *x = bad(d, "--quant", "a full fine-tune trains every weight, which cannot stay quantised");
        diag_set_found(x, "%s", spec_quant_name(in->quant));
        diag_set_suggestion(x, "use --method qlora, or --quant none");
    }
}

/* Strategy, GPU count and parallel degrees. */
static void resolve_parallel(est_input *in, diag_list *d)
{
    check_range(d, "--gpus", in->gpus, 1, 100000);
    check_range(d, "tensor_parallel", in->tensor_parallel, 1, 1024);
    check_range(d, "pipeline_stages", in->pipeline_stages, 1, 1024);
    if (d->errors) return;
    int mp = in->tensor_parallel * in->pipeline_stages;
    if (in->gpus % mp != 0) {
        diag *x = bad(d, "--gpus", "the GPUs must split evenly into tensor x pipeline groups");
        diag_set_expected(x, "a multiple of %d", mp);
        diag_set_found(x, "%d", in->gpus);
        return;
    }
    int dp = in->gpus / mp;
    if (in->strategy == STRAT_AUTO) in->strategy = dp > 1 ? STRAT_DDP : STRAT_SINGLE;
    if (in->strategy == STRAT_SINGLE && dp > 1) {
        diag *x = bad(d, "--strategy", "single means one data-parallel replica");
        diag_set_found(x, "%d GPUs", in->gpus);
        diag_set_suggestion(x, "use ddp, fsdp, zero2 or zero3 with more than one GPU");
    }
}

bool est_input_resolve(est_input *in, diag_list *d)
{
    size_t before = d->errors;
    if (!in->model) {
        bad(d, "--model", "no model");
        return false;
    }
    if (in->method == METHOD_AUTO) {
        diag *x = bad(d, "--method", "the estimator needs a method");
        diag_set_expected(x, "full, lora, qlora or dora");
        diag_set_suggestion(x, "`lathe plan` chooses the method when the spec says auto");
    }
    if (in->precision == PREC_AUTO) in->precision = PREC_BF16;
    if (in->optimizer == OPT_AUTO) in->optimizer = OPT_ADAMW;
    resolve_quant(in, d);
    if (in->method != METHOD_FULL) {
        check_range(d, "--rank", in->rank, 1, 1024);
        if (!in->targets) bad(d, "--targets", "no target modules");
    }
    check_range(d, "--batch", in->batch, 1, 1 << 20);
    check_range(d, "--seq", in->seq, 1, 1 << 24);
    check_range(d, "--grad-accum", in->grad_accum, 1, 1 << 20);
    if (!(in->seq_sd >= 0 && in->seq_mean >= 0) || (in->seq_sd > 0 && !(in->seq_mean >= 1)) ||
        in->seq_mean > 1e9 || in->seq_sd > 1e9) {
        diag *x = bad(d, "--seq-mean", "sample lengths need a mean of at least one token and a standard deviation >= 0");
        diag_set_found(x, "mean %g, standard deviation %g", in->seq_mean, in->seq_sd);
        diag_set_suggestion(x, "give both --seq-mean and --seq-sd, or neither (every batch --seq tokens long)");
    }
    if (!(in->seq_min >= 0) || in->seq_min > 1e9 ||
        (in->seq_min > 0 && !(in->seq_sd > 0 && in->seq_min < in->seq_mean))) {
        diag *x = bad(d, "--seq-min", "the shortest sample must be below the mean length, with --seq-mean and --seq-sd");
        diag_set_found(x, "shortest %g, mean %g, standard deviation %g", in->seq_min, in->seq_mean, in->seq_sd);
        diag_set_suggestion(x, "give the dataset's shortest sample in tokens (below --seq-mean), or leave --seq-min "
                               "out (log-normal lengths)");
    } else if (in->seq_min > 0 && in->drop_long && !(in->seq > in->seq_min)) {
        diag *x = bad(d, "--seq-min", "every sample is longer than --seq, and --truncation drop leaves none");
        diag_set_found(x, "shortest %g tokens, cap %d", in->seq_min, in->seq);
        diag_set_suggestion(x, "raise --seq above the shortest sample, or use --truncation cut");
    }
    if (in->drop_long && !(in->seq_sd > 0)) {
        diag *x = bad(d, "--truncation", "dropping the samples longer than --seq needs their length statistics");
        diag_set_suggestion(x, "give --seq-mean and --seq-sd (the dataset's token statistics before samples were "
                               "dropped), or --truncation cut");
    }
    if (!(in->lora_dropout >= 0 && in->lora_dropout < 1)) {
        diag *x = bad(d, "lora.dropout", "out of range");
        diag_set_expected(x, "a number in [0, 1)");
    }
    resolve_parallel(in, d);
    if (!(in->gpu_memory >= 0) || in->gpu_memory > 1e15) {
        diag *x = bad(d, "--gpu-memory", "out of range");
        diag_set_expected(x, "a memory size such as 80GiB, or 0 for unknown");
    }
    return d->errors == before;
}
