/* cmd_estimate.c: `lathe estimate`: the per-GPU memory of a fine-tuning
 * step, term by term, from command-line settings or from a job spec
 * (flags given with a spec override its values). */
#include "cli.h"

#include "base/base.h"
#include "model/model.h"
#include "plan/plan.h"
#include "spec/spec.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char estimate_help[] =
    "usage: lathe estimate --model NAME|PATH --method full|lora|qlora|dora [options]\n"
    "       lathe estimate JOB.yaml [options]\n"
    "\n"
    "Estimates the peak GPU memory of one training step, per GPU, term by term:\n"
    "base weights, adapters, gradients, optimizer states, activations (per layer\n"
    "too), logits and loss buffers, framework buffers, the caching allocator's\n"
    "free cache and the CUDA context. The step's tensors are replayed, in the\n"
    "order the step allocates them, through a model of PyTorch's caching\n"
    "allocator. The total is what nvidia-smi would show (docs/estimator.md).\n"
    "\n"
    "options:\n"
    "  --model NAME|PATH     a catalogue name (Qwen2-7B-Instruct, Llama-3-8B, ...),\n"
    "                        a folder with config.json or the file, or a size (7B)\n"
    "  --method M            full, lora, qlora or dora\n"
    "  --bits N              base weight bits: 4, 8 or 16\n"
    "  --quant Q             none, nf4, nf4-dq, int8, gptq4, awq4 (gptq4 --bits 8:\n"
    "                        8-bit GPTQ); default nf4-dq for 4 bits, int8 for 8\n"
    "  --rank R              LoRA rank (default 16)\n"
    "  --targets LIST        module names (q_proj,v_proj), all-linear, lm_head\n"
    "                        (default q_proj,v_proj or the model's fused equivalent)\n"
    "  --batch B             micro batch per GPU (default 1)\n"
    "  --seq S               tokens per sample: the packed or padded length, or the\n"
    "                        cap when samples vary (default 2048)\n"
    "  --seq-mean N --seq-sd N  sample lengths vary (mean and standard deviation in\n"
    "                        tokens, cut at --seq) and each micro batch is padded to\n"
    "                        its longest: the allocator's cache keeps blocks of\n"
    "                        short batches that a long one cannot use (default:\n"
    "                        every batch --seq tokens long)\n"
    "  --truncation cut|drop with --seq-mean: a sample longer than --seq is cut\n"
    "                        to it (cut, default), or left out of the dataset\n"
    "                        (drop: ms-swift's truncation_strategy delete), so\n"
    "                        every batch is shorter than the cap\n"
    "  --seq-min N           with --seq-mean: the dataset's shortest sample; lengths\n"
    "                        are then N plus a gamma (an exponential tail) instead\n"
    "                        of the log-normal (default: log-normal)\n"
    "  --grad-accum N        micro steps per optimizer step (default 1)\n"
    "  --grad-ckpt on|off    gradient checkpointing (default on)\n"
    "  --precision P         bf16 (default), fp16, amp, fp32\n"
    "  --optimizer O         adamw (default), adamw8bit, paged_adamw,\n"
    "                        paged_adamw8bit, sgd\n"
    "  --gpus N              GPUs (default 1)\n"
    "  --strategy S          single, ddp, fsdp, zero2, zero3 (default single,\n"
    "                        ddp with more GPUs)\n"
    "  --flash-attn on|off   fused attention (default on)\n"
    "  --stack S             hf (Hugging Face Trainer + PEFT, also ms-swift and\n"
    "                        axolotl; default), torchtune, litgpt, plain (a\n"
    "                        hand-written loop, no autocast) or unsloth: how the\n"
    "                        loss, the adapters, the checkpoints and the optimizer\n"
    "                        step are computed\n"
    "  --compile on|off      torch.compile (default off)\n"
    "  --chunked-loss on|off loss over chunks of the logits (default: the stack's)\n"
    "  --fused-optimizer on|off  fused AdamW step (default: the stack's)\n"
    "  --kbit-fp32 on|off    a bitsandbytes base's unquantised weights (embedding,\n"
    "                        lm_head, norms) in fp32, as PEFT's\n"
    "                        prepare_model_for_kbit_training leaves them (default:\n"
    "                        on for hf; off where the recipe casts them back:\n"
    "                        axolotl, the QLoRA paper's qlora.py)\n"
    "  --ckpt-reentrant on|off  checkpointing through torch.utils.checkpoint's\n"
    "                        reentrant path (default on, the Hugging Face\n"
    "                        default); off (use_reentrant=False, as ms-swift 1.x\n"
    "                        patches it): a bitsandbytes 4-bit base keeps every\n"
    "                        projection's input until the layer's backward\n"
    "  --gpu-memory SIZE     the GPU's memory (80GiB; a bare number is GiB; an\n"
    "                        \"80GB\" GPU holds 80 GiB): the allocator's cache is\n"
    "                        capped there (default unknown)\n"
    "  --alloc-conf CONF     PYTORCH_CUDA_ALLOC_CONF as the job sets it:\n"
    "                        expandable_segments:True, max_split_size_mb:N,\n"
    "                        roundup_power2_divisions:N, comma-separated\n"
    "  --counter C           the figure to give: device (what nvidia-smi shows;\n"
    "                        default), reserved (max_memory_reserved) or\n"
    "                        allocated (max_memory_allocated)\n"
    "  --explain             also print the caching allocator's segments at the peak\n"
    "  -o, --output FORMAT   text (default) or json (total under per_gpu_gib,\n"
    "                        every term alive at the peak in GiB under terms_gib)\n"
    "\n"
    "exit: 0 ok, 1 bad command line, 2 invalid model or settings, 4 unreadable file\n"
    "\n"
    "examples:\n"
    "  lathe estimate --model Qwen2-7B-Instruct --method qlora --rank 16 --targets all-linear\n"
    "  lathe estimate --model ./Llama-3-8B --method full --gpus 8 --strategy zero3 -o json\n"
    "  lathe estimate job.yaml --batch 4\n"
    "  lathe estimate --model Qwen2-7B --method lora --seq 8192 --seq-mean 3000 \\\n"
    "      --seq-sd 2500 --gpu-memory 80 --explain\n";

/* The command line, kept as text until the model is known. */
typedef struct est_args {
    const char *job, *model, *method, *bits, *quant, *rank, *targets, *batch, *seq;
    const char *grad_ckpt, *precision, *optimizer, *gpus, *strategy, *flash_attn;
    const char *stack, *compile, *chunked_loss, *fused_optimizer, *kbit_fp32, *ckpt_reentrant, *gpu_memory;
    const char *seq_mean, *seq_sd, *seq_min, *truncation, *grad_accum, *alloc_conf, *counter;
    bool explain;
    cli_output out;
} est_args;

static const struct {
    const char *flag;
    size_t offset;
} FLAGS[] = {
    {"--model", offsetof(est_args, model)},         {"--method", offsetof(est_args, method)},
    {"--bits", offsetof(est_args, bits)},           {"--quant", offsetof(est_args, quant)},
    {"--rank", offsetof(est_args, rank)},           {"--targets", offsetof(est_args, targets)},
    {"--batch", offsetof(est_args, batch)},         {"--seq", offsetof(est_args, seq)},
    {"--grad-ckpt", offsetof(est_args, grad_ckpt)}, {"--precision", offsetof(est_args, precision)},
    {"--optimizer", offsetof(est_args, optimizer)}, {"--gpus", offsetof(est_args, gpus)},
    {"--strategy", offsetof(est_args, strategy)},   {"--flash-attn", offsetof(est_args, flash_attn)},
    {"--stack", offsetof(est_args, stack)},         {"--compile", offsetof(est_args, compile)},
    {"--chunked-loss", offsetof(est_args, chunked_loss)},
    {"--fused-optimizer", offsetof(est_args, fused_optimizer)},
    {"--kbit-fp32", offsetof(est_args, kbit_fp32)},
    {"--ckpt-reentrant", offsetof(est_args, ckpt_reentrant)},
    {"--gpu-memory", offsetof(est_args, gpu_memory)},
    {"--seq-mean", offsetof(est_args, seq_mean)},   {"--seq-sd", offsetof(est_args, seq_sd)},
    {"--seq-min", offsetof(est_args, seq_min)},
    {"--grad-accum", offsetof(est_args, grad_accum)}, {"--alloc-conf", offsetof(est_args, alloc_conf)},
    {"--counter", offsetof(est_args, counter)},     {"--truncation", offsetof(est_args, truncation)},
};

static const char **flag_slot(est_args *a, const char *flag)
{
    for (size_t i = 0; i < sizeof FLAGS / sizeof FLAGS[0]; i++)
        if (strcmp(flag, FLAGS[i].flag) == 0) return (const char **)((char *)a + FLAGS[i].offset);
    return NULL;
}

static int parse_args(int argc, char **argv, est_args *a)
{
    memset(a, 0, sizeof *a);
    a->out = CLI_OUT_TEXT;
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i];
        if (arg[0] != '-') {
            if (a->job) return cli_usage_error("estimate", "one job file at most (got %s and %s)", a->job, arg);
            a->job = arg;
            continue;
        }
        const char *flag = arg; /* main.c turned "--flag=value" into two arguments */
        if (strcmp(flag, "--explain") == 0) {
            a->explain = true;
            continue;
        }
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) return cli_usage_error("estimate", "%s needs a value", flag);
        i++;
        if (strcmp(flag, "-o") == 0 || strcmp(flag, "--output") == 0) {
            if (!cli_parse_output(value, &a->out) || (a->out != CLI_OUT_TEXT && a->out != CLI_OUT_JSON))
                return cli_usage_error("estimate", "-o takes text or json, not '%s'", value);
            continue;
        }
        const char **slot = flag_slot(a, flag);
        if (!slot) {
            const char *names[sizeof FLAGS / sizeof FLAGS[0] + 1];
            for (size_t k = 0; k < sizeof FLAGS / sizeof FLAGS[0]; k++) names[k] = FLAGS[k].flag;
            names[sizeof FLAGS / sizeof FLAGS[0]] = "--explain";
            const char *near = str_suggest(flag, names, sizeof FLAGS / sizeof FLAGS[0] + 1);
            return cli_usage_error("estimate", "unknown option %s%s%s%s", flag, near ? " (did you mean " : "",
                                   near ? near : "", near ? "?)" : "");
        }
        *slot = value;
    }
    if (!a->job && !a->model) return cli_usage_error("estimate", "give --model NAME|PATH, or a job file");
    if (!a->job && !a->method) return cli_usage_error("estimate", "give --method full, lora, qlora or dora");
    return LT_EXIT_OK;
}

/* ---- values ---- */

static bool parse_int(const char *flag, const char *s, long lo, long hi, int *out, diag_list *d)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, flag, "not a valid number");
        diag_set_expected(x, "an integer from %ld to %ld", lo, hi);
        diag_set_found(x, "%s", s);
        return false;
    }
    *out = (int)v;
    return true;
}

static bool parse_on_off(const char *flag, const char *s, bool *out, diag_list *d)
{
    if (strcmp(s, "on") == 0 || strcmp(s, "off") == 0) {
        *out = strcmp(s, "on") == 0;
        return true;
    }
    diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, flag, "wrong value");
    diag_set_expected(x, "on or off");
    diag_set_found(x, "%s", s);
    return false;
}

/* A memory size with its unit (80GiB, 24GB, 81920MiB); a bare number is GiB. */
static bool parse_memory(const char *flag, const char *s, double *out, diag_list *d)
{
    double v = 0;
    char *end = NULL;
    errno = 0;
    double bare = strtod(s, &end);
    bool ok = false;
    if (end != s && !errno && *end == '\0' && bare >= 0) {
        v = bare * GIB;
        ok = true;
    } else {
        ok = units_parse_bytes(s, &v) && v >= 0;
    }
    if (!ok || v > 1e15) {
        diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, flag, "not a memory size");
        diag_set_expected(x, "a size with its unit, such as 80GiB, 24GB or 81920MiB");
        diag_set_found(x, "%s", s);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_real(const char *flag, const char *s, double lo, double hi, double *out, diag_list *d)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, flag, "not a valid number");
        diag_set_expected(x, "a number from %g to %g", lo, hi);
        diag_set_found(x, "%s", s);
        return false;
    }
    *out = v;
    return true;
}

/* PYTORCH_CUDA_ALLOC_CONF's syntax: key:value pairs separated by commas.
 * garbage_collection_threshold is accepted and not modelled (it only acts
 * with a memory fraction set); unknown keys are errors. */
static void parse_alloc_conf(const char *s, ca_config *c, diag_list *d)
{
    char **items = NULL;
    size_t n = str_split(s, ',', &items);
    for (size_t i = 0; i < n; i++) {
        char *item = items[i], *colon = strchr(item, ':');
        const char *key = item, *val = colon ? colon + 1 : "";
        if (colon) *colon = '\0';
        double v = 0;
        if (strcmp(key, "expandable_segments") == 0 && (strcmp(val, "True") == 0 || strcmp(val, "False") == 0)) {
            c->expandable_segments = strcmp(val, "True") == 0;
        } else if (strcmp(key, "max_split_size_mb") == 0 && parse_real("--alloc-conf", val, 20, 1e9, &v, d)) {
            c->max_split_size = (uint64_t)(v * 1024 * 1024); /* PyTorch requires more than 20 MiB */
        } else if (strcmp(key, "roundup_power2_divisions") == 0 && parse_real("--alloc-conf", val, 1, 64, &v, d)) {
            c->roundup_power2_divisions = (unsigned)v;
        } else if (strcmp(key, "garbage_collection_threshold") == 0 || strcmp(key, "backend") == 0) {
            /* accepted: no effect on a replay without a memory fraction */
        } else if (strcmp(key, "max_split_size_mb") != 0 && strcmp(key, "roundup_power2_divisions") != 0) {
            diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, "--alloc-conf", "unknown allocator setting");
            diag_set_expected(x, "expandable_segments:True|False, max_split_size_mb:N, roundup_power2_divisions:N");
            diag_set_found(x, "%s%s%s", key, colon ? ":" : "", val);
        }
    }
    str_list_free(items, n);
}

static void enum_error(const char *flag, const char *s, const char *expected, diag_list *d)
{
    diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, flag, "unknown value");
    diag_set_expected(x, "%s", expected);
    diag_set_found(x, "%s", s);
}

/* Applies the enumerated flags that were given. */
static void apply_enums(const est_args *a, est_input *in, diag_list *d)
{
    if (a->method && !spec_method_parse(a->method, &in->method))
        enum_error("--method", a->method, "full, lora, qlora or dora", d);
    if (a->quant && !spec_quant_parse(a->quant, &in->quant))
        enum_error("--quant", a->quant, "none, nf4, nf4-dq, int8, gptq4 or awq4", d);
    if (a->precision && !spec_precision_parse(a->precision, &in->precision))
        enum_error("--precision", a->precision, "bf16, fp16, amp or fp32", d);
    if (a->optimizer && !spec_optimizer_parse(a->optimizer, &in->optimizer))
        enum_error("--optimizer", a->optimizer, "adamw, adamw8bit, paged_adamw, paged_adamw8bit or sgd", d);
    if (a->strategy && !spec_strategy_parse(a->strategy, &in->strategy))
        enum_error("--strategy", a->strategy, "single, ddp, fsdp, zero2 or zero3", d);
    if (a->counter && !est_counter_parse(a->counter, &in->counter))
        enum_error("--counter", a->counter, "device, reserved or allocated", d);
}

/* The stack first: its defaults (chunked loss, fused optimizer, adapter
 * dtype) come before the flags that override them one by one. */
static void apply_stack(const est_args *a, est_input *in, diag_list *d)
{
    est_stack st = EST_STACK_HF;
    if (a->stack && !est_stack_parse(a->stack, &st)) {
        enum_error("--stack", a->stack, "hf, torchtune, litgpt or plain", d);
        return;
    }
    est_input_set_stack(in, st);
}

/* Target names against the model; positions point into the job file. */
static void apply_targets(const char *const *names, size_t n, const char *field, const spec_job *job,
                          est_input *in, diag_list *d)
{
    size_t first = d->len;
    unsigned roles = 0;
    model_targets_from_names(in->model, names, n, field, &roles, d);
    for (size_t i = first; job && i < d->len; i++) {
        free(d->items[i].file);
        d->items[i].file = xstrdup(job->file ? job->file : "");
        size_t k = 0;
        for (size_t j = 0; j < n; j++)
            if (d->items[i].found && strcmp(d->items[i].found, names[j]) == 0) k = j;
        if (job->lora.pos_target_modules && k < job->lora.n_target_modules) {
            d->items[i].line = job->lora.pos_target_modules[k].line;
            d->items[i].col = job->lora.pos_target_modules[k].col;
        }
    }
    if (roles) in->targets = roles;
}

static void apply_flags(const est_args *a, est_input *in, diag_list *d)
{
    apply_enums(a, in, d);
    if (a->bits) parse_int("--bits", a->bits, 4, 32, &in->bits, d);
    if (a->rank) parse_int("--rank", a->rank, 1, 1024, &in->rank, d);
    if (a->batch) parse_int("--batch", a->batch, 1, 1 << 20, &in->batch, d);
    if (a->seq) parse_int("--seq", a->seq, 1, 1 << 24, &in->seq, d);
    if (a->gpus) parse_int("--gpus", a->gpus, 1, 100000, &in->gpus, d);
    if (a->grad_ckpt) parse_on_off("--grad-ckpt", a->grad_ckpt, &in->grad_ckpt, d);
    if (a->flash_attn) parse_on_off("--flash-attn", a->flash_attn, &in->flash_attn, d);
    if (a->compile) parse_on_off("--compile", a->compile, &in->compiled, d);
    if (a->chunked_loss) parse_on_off("--chunked-loss", a->chunked_loss, &in->chunked_loss, d);
    if (a->fused_optimizer) parse_on_off("--fused-optimizer", a->fused_optimizer, &in->fused_optimizer, d);
    if (a->kbit_fp32) parse_on_off("--kbit-fp32", a->kbit_fp32, &in->kbit_fp32, d);
    if (a->ckpt_reentrant) {
        bool reentrant = !in->ckpt_nonreentrant;
        parse_on_off("--ckpt-reentrant", a->ckpt_reentrant, &reentrant, d);
        in->ckpt_nonreentrant = !reentrant;
    }
    if (a->gpu_memory) parse_memory("--gpu-memory", a->gpu_memory, &in->gpu_memory, d);
    if (a->grad_accum) parse_int("--grad-accum", a->grad_accum, 1, 1 << 20, &in->grad_accum, d);
    if (a->seq_mean) parse_real("--seq-mean", a->seq_mean, 1, 1 << 24, &in->seq_mean, d);
    if (a->seq_sd) parse_real("--seq-sd", a->seq_sd, 0, 1 << 24, &in->seq_sd, d);
    if (a->seq_min) parse_real("--seq-min", a->seq_min, 0, 1 << 24, &in->seq_min, d);
    if (a->seq_min && !a->seq_mean) {
        diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, "--seq-min", "without --seq-mean and --seq-sd");
        diag_set_suggestion(x, "the shortest sample shapes varying lengths: give --seq-mean and --seq-sd too");
    }
    if (!a->seq_mean != !a->seq_sd) {
        diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, a->seq_mean ? "--seq-sd" : "--seq-mean", "missing");
        diag_set_suggestion(x, "varying sample lengths need both --seq-mean and --seq-sd");
    }
    if (a->truncation) {
        if (strcmp(a->truncation, "cut") == 0 || strcmp(a->truncation, "drop") == 0) {
            in->drop_long = strcmp(a->truncation, "drop") == 0;
        } else {
            diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, "--truncation", "wrong value");
            diag_set_expected(x, "cut or drop");
            diag_set_found(x, "%s", a->truncation);
        }
    }
    if (a->alloc_conf) parse_alloc_conf(a->alloc_conf, &in->alloc, d);
    if (a->targets) {
        char **names = NULL;
        size_t n = str_split(a->targets, ',', &names);
        apply_targets((const char *const *)names, n, "--targets", NULL, in, d);
        str_list_free(names, n);
    }
}

/* The spec's values; flags override them afterwards. */
static void apply_job(const spec_job *j, est_input *in, diag_list *d)
{
    in->method = j->method;
    if (j->method == METHOD_AUTO)
        in->method = j->quantization.bits == 4 || j->quantization.bits == 8 ? METHOD_QLORA : METHOD_LORA;
    in->quant = j->quantization.quant;
    in->bits = j->quantization.bits;
    in->rank = j->lora.rank;
    in->lora_dropout = j->lora.dropout;
    if (j->lora.n_target_modules)
        apply_targets((const char *const *)j->lora.target_modules, j->lora.n_target_modules,
                      "spec.lora.targetModules", j, in, d);
    in->batch = j->training_data.batch_size;
    if (j->training_data.gradient_accumulation > 0) in->grad_accum = j->training_data.gradient_accumulation;
    in->seq = j->hyperparams.max_seq_length;
    in->precision = j->hyperparams.precision;
    in->optimizer = j->hyperparams.optimizer;
    if (j->hyperparams.gradient_checkpointing != TOGGLE_AUTO)
        in->grad_ckpt = j->hyperparams.gradient_checkpointing == TOGGLE_ON;
    if (j->hyperparams.flash_attention != TOGGLE_AUTO)
        in->flash_attn = j->hyperparams.flash_attention == TOGGLE_ON;
    /* resources.gpu.count is per node, as a Kubernetes pod asks (spec.h) */
    if (j->resources.gpu_count > 0)
        in->gpus = j->resources.gpu_count * (j->resources.nodes > 0 ? j->resources.nodes : 1);
    in->strategy = j->resources.strategy;
}

/* The default targets: q and v, through the fused module where the model has one. */
static unsigned default_targets(void)
{
    return MODEL_ROLE_Q | MODEL_ROLE_V;
}

static bool resolve_model(const est_args *a, const spec_job *job, model_shape *m, diag_list *d)
{
    if (a->model) {
        double count = 0;
        bool is_path = file_exists(a->model) || dir_exists(a->model) || a->model[0] == '/' ||
                       a->model[0] == '~' || str_starts_with(a->model, "./") || str_starts_with(a->model, "../");
        if (is_path) return model_resolve(a->model, NULL, 0, m, d);
        if (units_parse_count(a->model, &count) && count >= 1e7) return model_resolve(NULL, NULL, count, m, d);
        return model_resolve(NULL, a->model, 0, m, d);
    }
    return model_resolve(job->base_model.path, job->base_model.name, job->base_model.parameters, m, d);
}

static int exit_for(const diag_list *d)
{
    for (size_t i = 0; i < d->len; i++)
        if (d->items[i].level == DIAG_ERROR && d->items[i].message &&
            (strstr(d->items[i].message, "cannot read") || strstr(d->items[i].message, "not found")))
            return LT_EXIT_IO;
    return LT_EXIT_INVALID;
}

static void print_result(const est_args *a, const est_input *in, const diag_list *notes)
{
    est_result r;
    ca_snapshot snap;
    est_estimate_explain(in, NULL, &r, a->explain ? &snap : NULL);
    if (a->out == CLI_OUT_JSON) {
        char *text = est_to_json(in, &r, notes);
        printf("%s\n", text);
        free(text);
    } else {
        sb s;
        sb_init(&s);
        est_format_text(in, &r, notes, &s);
        if (a->explain) est_format_explain(in, &r, &snap, &s);
        fputs(sb_str(&s), stdout);
        sb_free(&s);
    }
    if (a->explain) ca_snapshot_free(&snap);
}

static int estimate_run(int argc, char **argv)
{
    est_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != LT_EXIT_OK) return rc;
    diag_list d;
    diag_list_init(&d);
    spec_file f = {0};
    spec_job *job = NULL;
    if (a.job && !file_exists(a.job)) {
        fprintf(stderr, "lathe estimate: cannot read %s: no such file\n", a.job);
        return LT_EXIT_IO;
    }
    if (a.job) {
        bool loaded = spec_load_file(a.job, &f, &d) == 0;
        job = loaded ? spec_file_job(&f) : NULL;
        if (loaded && !job) diag_add(&d, DIAG_ERROR, a.job, 0, 0, NULL, "no LoRATrainingJob in the file");
    }
    model_shape m;
    model_shape_init(&m, MODEL_ARCH_GENERIC);
    est_input in;
    if (d.errors == 0 && resolve_model(&a, job, &m, &d)) {
        est_input_defaults(&in, &m);
        in.quant = QUANT_AUTO;
        in.bits = 0;
        in.strategy = STRAT_AUTO;
        in.targets = default_targets();
        if (job) apply_job(job, &in, &d);
        apply_stack(&a, &in, &d);
        apply_flags(&a, &in, &d);
        if (in.bits == 16 && in.quant == QUANT_AUTO && in.method != METHOD_QLORA) in.quant = QUANT_NONE;
        if (d.errors == 0 && est_input_resolve(&in, &d)) print_result(&a, &in, &d);
    }
    rc = d.errors ? exit_for(&d) : LT_EXIT_OK;
    if (d.errors) diag_print_all(&d, stderr);
    diag_list_free(&d);
    model_shape_free(&m);
    if (a.job) spec_file_free(&f);
    return rc;
}

const cli_command cli_cmd_estimate = {
    .name = "estimate",
    .summary = "estimate the GPU memory of a fine-tuning job, term by term",
    .help = estimate_help,
    .run = estimate_run,
};
