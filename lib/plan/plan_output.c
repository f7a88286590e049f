/* plan_output.c: a plan for people (text), for machines (JSON), as the
 * equivalent ms-swift command line, and as a resolved job spec. */
#include "plan/plan.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *method_short(spec_method m)
{
    return m == METHOD_AUTO ? "auto" : spec_method_name(m);
}

static void format_money(char *out, size_t n, double v)
{
    snprintf(out, n, v >= 100 ? "%.0f" : "%.2f", v);
}

/* "1 x A100-40GB", "16 x H100-80GB on 2 nodes, zero3" */
static void format_gpus(const plan_config *c, sb *out)
{
    sb_printf(out, "%d x %s", c->gpus, c->gpu->name);
    if (c->nodes > 1) sb_printf(out, " on %d nodes", c->nodes);
    if (c->gpus > 1) sb_printf(out, ", %s", spec_strategy_name(c->strategy));
    if (c->tp > 1 || c->pp > 1) sb_printf(out, " (tensor %d x pipeline %d x data %d)", c->tp, c->pp, c->dp);
}

static void format_targets(const plan_result *r, sb *out)
{
    model_targets_format(&r->model, r->targets, out);
}

static void text_summary(const plan_result *r, sb *out)
{
    const plan_config *c = &r->chosen;
    char pc[32], tp[32], gib[32], use[32], mem[32];
    str_thousands(pc, sizeof pc, r->params.total);
    sb_printf(out, "  %-9s %s, %s parameters\n", "model", r->model.name ? r->model.name : "?", pc);
    if (c->method == METHOD_FULL) {
        sb_printf(out, "  %-9s full fine-tuning of every weight\n", "method");
    } else {
        str_thousands(tp, sizeof tp, c->mem.params_trainable);
        sb_printf(out, "  %-9s %s r%d on ", "method", method_short(c->method), c->in.rank);
        format_targets(r, out);
        sb_printf(out, ", %s trainable (%.2f%%)", tp,
                  100.0 * (double)c->mem.params_trainable / (double)r->params.total);
        if (c->method == METHOD_QLORA)
            sb_printf(out, ", base in %s (%d-bit)", spec_quant_name(c->quant), c->bits);
        sb_putc(out, '\n');
    }
    sb_printf(out, "  %-9s ", "run on");
    format_gpus(c, out);
    sb_putc(out, '\n');
    sb_printf(out, "  %-9s micro-batch %d x accumulation %d", "batch", c->micro_batch, c->grad_accum);
    if (c->dp > 1) sb_printf(out, " x %d replicas", c->dp);
    sb_printf(out, " = %d per step of %d tokens; checkpointing %s; flash attention %s\n",
              c->micro_batch * c->grad_accum * c->dp, r->seq, c->grad_ckpt ? "on" : "off", c->flash_attn ? "on" : "off");
    units_format_bytes(gib, sizeof gib, c->mem.peak);
    units_format_bytes(use, sizeof use, c->usable);
    units_format_bytes(mem, sizeof mem, c->gpu->memory);
    sb_printf(out, "  %-9s %s per GPU, %s usable of %s\n", "memory", gib, use, mem);
    if (r->shared && c->gpus == 1 && c->mem.peak < c->gpu->memory) {
        /* what the server's scheduler gives it: ceil(100 x memory / GPU memory) hundredths */
        int part = (int)ceil(100.0 * c->mem.peak / c->gpu->memory);
        sb_printf(out, "  %-9s %d%% of the GPU, beside other shared jobs (%d such jobs fit by memory)\n",
                  "share", part, 100 / part);
    } else if (r->shared) {
        sb_printf(out, "  %-9s none: only a job that needs less than one GPU shares it\n", "share");
    }
    if (r->steps > 0) {
        char t[32];
        units_format_duration(t, sizeof t, c->seconds);
        sb_printf(out, "  %-9s %ld steps x %.1f s = %s", "time", r->steps, c->step_seconds, t);
        if (r->samples > 0) sb_printf(out, " (%ld samples, %s)", r->samples, r->samples_origin);
        sb_putc(out, '\n');
        char money[32];
        format_money(money, sizeof money, c->cost);
        sb_printf(out, "  %-9s %.*f GPU-hours x %.2f = %s\n", "cost", c->gpu_hours < 10 ? 2 : 1, c->gpu_hours,
                  c->gpu->price_per_hour, money);
    } else {
        char money[32];
        format_money(money, sizeof money, c->cost);
        sb_printf(out, "  %-9s %.1f s per step; per 1,000 steps: %.*f GPU-hours, %s\n", "time",
                  c->step_seconds, c->gpu_hours < 10 ? 2 : 1, c->gpu_hours, money);
    }
}

static void text_options(const plan_result *r, sb *out)
{
    sb_printf(out, "\noptions (the best per GPU type and method, best first)\n");
    sb_printf(out, "  %-14s %-6s %-28s %-9s %-4s %8s %9s %9s\n", "GPU", "method", "GPUs",
              "micro x acc", "ckpt", "GiB/GPU", "time", "cost");
    for (size_t i = 0; i < r->n_options; i++) {
        const plan_config *o = &r->options[i];
        sb g;
        sb_init(&g);
        sb_printf(&g, "%d", o->gpus);
        if (o->nodes > 1) sb_printf(&g, " (%d nodes)", o->nodes);
        if (o->gpus > 1) sb_printf(&g, " %s", spec_strategy_name(o->strategy));
        if (o->tp > 1 || o->pp > 1) sb_printf(&g, " tp%d pp%d", o->tp, o->pp);
        char mb[24], t[32], money[32];
        snprintf(mb, sizeof mb, "%d x %d", o->micro_batch, o->grad_accum);
        if (r->steps > 0) units_format_duration(t, sizeof t, o->seconds);
        else snprintf(t, sizeof t, "%.1fs/step", o->step_seconds);
        format_money(money, sizeof money, o->cost);
        sb_printf(out, "  %-14s %-6s %-28s %-11s %-4s %8.1f %9s %9s\n", o->gpu->name,
                  method_short(o->method), sb_str(&g), mb, o->grad_ckpt ? "on" : "off",
                  o->mem.peak / GIB, t, money);
        sb_free(&g);
    }
    if (r->n_options == 0) sb_puts(out, "  (none fits)\n");
}

void plan_format_text(const plan_result *r, sb *out)
{
    sb_printf(out, "plan for %s", r->job_name);
    if (r->file) sb_printf(out, " (%s)", r->file);
    sb_puts(out, "\n\n");
    if (r->found) {
        text_summary(r, out);
    } else {
        sb_puts(out, "  nothing fits: no GPU type and count in the catalogue holds this job\n");
    }
    sb_puts(out, "\nwhy\n");
    for (size_t i = 0; i < r->n_reasons; i++) sb_printf(out, "  - %s\n", r->reasons[i]);
    if (r->found) {
        sb_puts(out, "\nmemory of one GPU\n");
        sb body;
        sb_init(&body);
        est_format_text(&r->chosen.in, &r->chosen.mem, NULL, &body);
        /* indent the estimator's block */
        const char *p = sb_str(&body);
        while (*p) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            sb_puts(out, "  ");
            sb_putn(out, p, len);
            sb_putc(out, '\n');
            p += len + (e ? 1 : 0);
        }
        sb_free(&body);
    }
    text_options(r, out);
    sb_printf(out, "\nthe seed article's formula says %.1f GiB -> %d x %s", r->seed.total_gib,
              r->seed.gpus, r->seed.gpu_type);
    if (r->found) sb_printf(out, " (lathe: %.1f GiB per GPU)", r->chosen.mem.peak / GIB);
    sb_putc(out, '\n');
}

/* ---- JSON ---- */

static json_t *config_json(const plan_result *r, const plan_config *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "method", json_string(method_short(c->method)));
    json_object_set_new(o, "quant", json_string(spec_quant_name(c->quant)));
    json_object_set_new(o, "bits", json_integer(c->bits));
    json_object_set_new(o, "gpu_type", json_string(c->gpu->name));
    json_object_set_new(o, "gpus", json_integer(c->gpus));
    json_object_set_new(o, "nodes", json_integer(c->nodes));
    json_object_set_new(o, "gpus_per_node", json_integer(c->gpus_per_node));
    json_object_set_new(o, "strategy", json_string(spec_strategy_name(c->strategy)));
    json_object_set_new(o, "tensor_parallel", json_integer(c->tp));
    json_object_set_new(o, "pipeline_parallel", json_integer(c->pp));
    json_object_set_new(o, "data_parallel", json_integer(c->dp));
    json_object_set_new(o, "micro_batch", json_integer(c->micro_batch));
    json_object_set_new(o, "gradient_accumulation", json_integer(c->grad_accum));
    json_object_set_new(o, "gradient_checkpointing", json_boolean(c->grad_ckpt));
    json_object_set_new(o, "flash_attention", json_boolean(c->flash_attn));
    json_object_set_new(o, "per_gpu_gib", json_real(c->mem.peak / GIB));
    json_object_set_new(o, "usable_gib", json_real(c->usable / GIB));
    json_object_set_new(o, "gpu_memory_gib", json_real(c->gpu->memory / GIB));
    json_object_set_new(o, "fits", json_boolean(c->fits));
    json_object_set_new(o, "flops_per_token", json_real(c->flops_per_token));
    json_object_set_new(o, "efficiency", json_real(c->gpu->mfu * c->efficiency));
    json_object_set_new(o, "tokens_per_second", json_real(c->tokens_per_second));
    json_object_set_new(o, "step_seconds", json_real(c->step_seconds));
    json_object_set_new(o, "seconds", r->steps > 0 ? json_real(c->seconds) : json_null());
    json_object_set_new(o, "gpu_hours", json_real(c->gpu_hours));
    json_object_set_new(o, "price_per_gpu_hour", json_real(c->gpu->price_per_hour));
    json_object_set_new(o, "cost", json_real(c->cost));
    json_object_set_new(o, "cost_basis", json_string(r->steps > 0 ? "run" : "per 1000 steps"));
    char *mem = est_to_json(&c->in, &c->mem, NULL);
    json_t *m = json_loads(mem, 0, NULL);
    free(mem);
    if (m) json_object_set_new(o, "memory", m);
    return o;
}

char *plan_to_json(const plan_result *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "job", json_string(r->job_name));
    if (r->file) json_object_set_new(o, "file", json_string(r->file));
    json_t *m = json_object();
    json_object_set_new(m, "name", json_string(r->model.name ? r->model.name : ""));
    json_object_set_new(m, "origin", json_string(r->model.origin_text ? r->model.origin_text : ""));
    json_object_set_new(m, "parameters", json_integer((json_int_t)r->params.total));
    json_object_set_new(o, "model", m);
    json_t *run = json_object();
    json_object_set_new(run, "effective_batch", json_integer(r->effective_batch));
    json_object_set_new(run, "seq", json_integer(r->seq));
    json_object_set_new(run, "samples", r->samples > 0 ? json_integer(r->samples) : json_null());
    json_object_set_new(run, "steps", r->steps > 0 ? json_integer(r->steps) : json_null());
    json_object_set_new(run, "tokens", r->steps > 0 ? json_real(r->tokens) : json_null());
    json_object_set_new(o, "run", run);
    json_object_set_new(o, "fits", json_boolean(r->found));
    json_object_set_new(o, "chosen", r->found ? config_json(r, &r->chosen) : json_null());
    json_object_set_new(o, "requested", r->has_requested ? config_json(r, &r->requested) : json_null());
    json_t *opts = json_array();
    for (size_t i = 0; i < r->n_options; i++) json_array_append_new(opts, config_json(r, &r->options[i]));
    json_object_set_new(o, "options", opts);
    json_t *why = json_array();
    for (size_t i = 0; i < r->n_reasons; i++) json_array_append_new(why, json_string(r->reasons[i]));
    json_object_set_new(o, "reasons", why);
    json_t *seed = json_object();
    json_object_set_new(seed, "total_gib", json_real(r->seed.total_gib));
    json_object_set_new(seed, "gpus", json_integer(r->seed.gpus));
    json_object_set_new(seed, "gpu_type", json_string(r->seed.gpu_type));
    json_object_set_new(o, "seed_formula", seed);
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    json_decref(o);
    return s;
}

/* ---- ms-swift ---- */

/* Appends word, quoted for a POSIX shell when it needs it. The text is for
 * a person to paste; lathe never runs it. */
static void shell_word(sb *out, const char *word)
{
    bool plain = word[0] != '\0';
    for (const char *p = word; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%", *p))
            plain = false;
    if (plain) {
        sb_puts(out, word);
        return;
    }
    sb_putc(out, '\'');
    for (const char *p = word; *p; p++) {
        if (*p == '\'') sb_puts(out, "'\\''");
        else sb_putc(out, *p);
    }
    sb_putc(out, '\'');
}

static void opt_line(sb *out, const char *name, const char *value)
{
    sb_printf(out, " \\\n  --%s ", name);
    shell_word(out, value);
}

static void opt_num(sb *out, const char *name, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.10g", v);
    opt_line(out, name, buf);
}

static const char *swift_dtype(spec_precision p)
{
    switch (p) {
    case PREC_FP16: return "float16";
    case PREC_FP32: return "float32";
    default: return "bfloat16";
    }
}

char *plan_emit_swift(const plan_result *r, const spec_job *job)
{
    sb out;
    sb_init(&out);
    const plan_config *c = &r->chosen;
    sb_puts(&out, "# ms-swift equivalent of lathe's plan");
    if (r->found) {
        sb_printf(&out, " (%d x %s)\n", c->gpus, c->gpu->name);
        if (c->nodes > 1)
            sb_printf(&out, "# run on each of the %d nodes with its NODE_RANK; MASTER_ADDR is node 0\n"
                            "NNODES=%d NODE_RANK=${NODE_RANK:-0} MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} "
                            "MASTER_PORT=29500 \\\n",
                      c->nodes, c->nodes);
        if (c->gpus_per_node > 1) {
            sb_printf(&out, "NPROC_PER_NODE=%d CUDA_VISIBLE_DEVICES=", c->gpus_per_node);
            for (int i = 0; i < c->gpus_per_node; i++) sb_printf(&out, "%s%d", i ? "," : "", i);
            sb_puts(&out, " \\\n");
        } else {
            sb_puts(&out, "CUDA_VISIBLE_DEVICES=0 \\\n");
        }
    } else {
        sb_puts(&out, " (nothing fits: options as the spec gives them)\n");
    }
    sb_puts(&out, "swift sft");
    opt_line(&out, "model", job->base_model.path && dir_exists(job->base_model.path)
                                ? job->base_model.path
                                : job->base_model.name ? job->base_model.name : r->model.name);
    spec_method m = r->found ? c->method : job->method;
    opt_line(&out, "train_type", m == METHOD_FULL ? "full" : "lora");
    opt_line(&out, "dataset", job->training_data.dataset_path ? job->training_data.dataset_path : "");
    opt_line(&out, "torch_dtype", swift_dtype(job->hyperparams.precision));
    if (job->hyperparams.max_steps > 0) opt_num(&out, "max_steps", (double)job->hyperparams.max_steps);
    else opt_num(&out, "num_train_epochs", job->hyperparams.epochs);
    opt_num(&out, "per_device_train_batch_size", r->found ? c->micro_batch : job->training_data.batch_size);
    opt_num(&out, "gradient_accumulation_steps",
            r->found ? c->grad_accum : job->training_data.gradient_accumulation);
    opt_num(&out, "learning_rate", job->hyperparams.learning_rate);
    if (m != METHOD_FULL) {
        opt_num(&out, "lora_rank", job->lora.rank);
        opt_num(&out, "lora_alpha", job->lora.alpha);
        opt_num(&out, "lora_dropout", job->lora.dropout);
        sb_puts(&out, " \\\n  --target_modules");
        for (size_t i = 0; i < job->lora.n_target_modules; i++) {
            sb_putc(&out, ' ');
            shell_word(&out, job->lora.target_modules[i]);
        }
        if (job->lora.use_rslora) opt_line(&out, "use_rslora", "true");
        if (m == METHOD_DORA) opt_line(&out, "use_dora", "true");
    }
    if (m == METHOD_QLORA) {
        spec_quant q = r->found ? c->quant : job->quantization.quant;
        int bits = r->found ? c->bits : job->quantization.bits;
        if (q == QUANT_GPTQ4 || q == QUANT_AWQ4) {
            sb_puts(&out, " \\\n  # a GPTQ / AWQ base: point --model at the quantised checkpoint");
        } else {
            opt_line(&out, "quant_method", "bnb");
            opt_num(&out, "quant_bits", bits);
            if (bits == 4) {
                opt_line(&out, "bnb_4bit_quant_type", "nf4");
                opt_line(&out, "bnb_4bit_use_double_quant", q == QUANT_NF4 ? "false" : "true");
                opt_line(&out, "bnb_4bit_compute_dtype", swift_dtype(job->hyperparams.precision));
            }
        }
    }
    opt_num(&out, "max_length", job->hyperparams.max_seq_length);
    if (job->hyperparams.warmup_steps > 0) opt_num(&out, "warmup_steps", job->hyperparams.warmup_steps);
    opt_line(&out, "lr_scheduler_type", job->hyperparams.lr_scheduler);
    if (job->hyperparams.weight_decay > 0) opt_num(&out, "weight_decay", job->hyperparams.weight_decay);
    opt_num(&out, "max_grad_norm", job->hyperparams.max_grad_norm);
    opt_line(&out, "gradient_checkpointing", (r->found ? c->grad_ckpt : true) ? "true" : "false");
    if (!r->found || c->flash_attn) opt_line(&out, "attn_impl", "flash_attn");
    if (r->found && c->gpus > 1) {
        if (c->strategy == STRAT_ZERO2) opt_line(&out, "deepspeed", "zero2");
        if (c->strategy == STRAT_ZERO3 || c->strategy == STRAT_FSDP) opt_line(&out, "deepspeed", "zero3");
    }
    if (job->checkpoint.enabled) {
        opt_num(&out, "save_steps", job->checkpoint.interval_steps);
        opt_num(&out, "save_total_limit", job->checkpoint.keep_last);
    }
    opt_line(&out, "output_dir", job->checkpoint.path ? job->checkpoint.path : "output");
    opt_num(&out, "seed", (double)job->hyperparams.seed);
    sb_putc(&out, '\n');
    if (r->found && (c->tp > 1 || c->pp > 1))
        sb_printf(&out, "# tensor %d x pipeline %d parallelism needs Megatron-SWIFT (`megatron sft` "
                        "with --tensor_model_parallel_size %d --pipeline_model_parallel_size %d)\n",
                  c->tp, c->pp, c->tp, c->pp);
    return sb_take(&out);
}

/* ---- resolved spec ---- */

spec_job *plan_resolved_job(const plan_result *r, const spec_job *job)
{
    spec_job *j = spec_job_clone(job);
    if (!r->found) return j;
    const plan_config *c = &r->chosen;
    free(j->api_version);
    j->api_version = xstrdup("lathe/v1");
    j->method = c->method;
    if (c->method == METHOD_QLORA) {
        j->quantization.bits = c->bits;
        j->quantization.quant = c->quant;
    }
    j->training_data.batch_size = c->micro_batch;
    j->training_data.gradient_accumulation = c->grad_accum;
    j->hyperparams.gradient_checkpointing = c->grad_ckpt ? TOGGLE_ON : TOGGLE_OFF;
    j->hyperparams.flash_attention = c->flash_attn ? TOGGLE_ON : TOGGLE_OFF;
    j->resources.given = true;
    j->resources.gpu_count = c->gpus_per_node;
    j->resources.nodes = c->nodes;
    free(j->resources.gpu_type);
    j->resources.gpu_type = xstrdup(c->gpu->name);
    j->resources.gpu_memory_estimate = ceil(c->mem.peak / GIB * 10) / 10 * GIB;
    j->resources.strategy = c->strategy;
    return j;
}
