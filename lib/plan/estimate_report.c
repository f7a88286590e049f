/* estimate_report.c: the estimate as text (a table of terms with their
 * derivation) and as JSON (jansson): the total under per_gpu_gib and every
 * term in GiB under terms_gib, as alive at the peak of the counter in the
 * caching allocator's replay; and the allocator's segments at that peak
 * (--explain). */
#include "plan/estimate_internal.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One line of the breakdown. */
typedef struct est_term {
    const char *key;   /* JSON key under terms_gib */
    const char *label; /* text label */
    double bytes;      /* alive at the counter's peak (the replay) */
    double size;       /* the term's size when it is alive (the model) */
    char note[192];    /* how it was computed */
} est_term;

#define EST_MAX_TERMS 18

static const char *precision_dtype(spec_precision p)
{
    switch (p) {
    case PREC_FP16: return "fp16";
    case PREC_FP32: return "fp32";
    case PREC_AMP: return "fp32 (amp)";
    default: return "bf16";
    }
}

/* Appends one term; its note is printf-formatted. */
static void add_term(est_term *t, size_t *n, const char *key, const char *label, double bytes, double size,
                     const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void add_term(est_term *t, size_t *n, const char *key, const char *label, double bytes, double size,
                     const char *fmt, ...)
{
    est_term *x = &t[(*n)++];
    x->key = key;
    x->label = label;
    x->bytes = bytes;
    x->size = size;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->note, sizeof x->note, fmt, ap);
    va_end(ap);
}

static bool deepspeed_amp(const est_input *in)
{
    return in->precision != PREC_FP32 && (in->strategy == STRAT_ZERO2 || in->strategy == STRAT_ZERO3);
}

/* Weights and what training keeps for the trainable parameters. */
static void state_terms(const est_input *in, const est_result *r, est_term *t, size_t *n)
{
    const double *at = r->at_peak;
    bool lora = in->method != METHOD_FULL, ds = deepspeed_amp(in);
    char total[48], trainable[48];
    str_thousands(total, sizeof total, r->params_total);
    str_thousands(trainable, sizeof trainable, r->params_trainable);
    add_term(t, n, "base_weights_quantised", "base weights, quantised", at[EST_T_WEIGHTS_Q], r->weights_quantised,
             "%s linear weights with their scales", spec_quant_name(in->quant));
    add_term(t, n, "base_weights", lora ? "base weights (frozen)" : "weights (trained)", at[EST_T_WEIGHTS],
             r->weights_dense, "%s parameters of the model, %s", total,
             in->quant != QUANT_NONE && r->dense_fp32 ? "the rest in fp32 (prepare_model_for_kbit_training)"
             : in->quant != QUANT_NONE ? "the rest in 16 bits"
             : ds                    ? "bf16 (DeepSpeed: fp32 master in the optimizer)"
                                     : precision_dtype(in->precision));
    add_term(t, n, "adapter_weights", in->method == METHOD_DORA ? "DoRA adapters" : "LoRA adapters",
             at[EST_T_ADAPTER], r->adapter, "%s trainable parameters", trainable);
    add_term(t, n, "gradients", "gradients", at[EST_T_GRADS], r->gradients, "one per trainable parameter%s",
             in->grad_accum > 1 ? ", kept across the accumulation" : "");
    add_term(t, n, "optimizer_states", "optimizer states", at[EST_T_STATES], r->optimizer - r->optimizer_paged,
             "%s", spec_optimizer_name(in->optimizer));
    double paged = in->counter == EST_COUNTER_DEVICE ? r->device - r->reserved - r->cuda_context : 0;
    add_term(t, n, "optimizer_states_paged", "optimizer states, paged", paged, r->optimizer_paged,
             "CUDA managed memory: device counter only");
    add_term(t, n, "optimizer_step_temp", "optimizer step temporaries", at[EST_T_OPT_TEMP], r->optimizer_temp, "%s",
             ds                      ? "fp32 gradient partition"
             : r->optimizer_temp > 0 ? "foreach AdamW: sqrt(v) per parameter"
                                     : "none");
    add_term(t, n, "sharding_buffers", "sharding / DDP buffers", at[EST_T_SHARDING], r->sharding, "%s x %d GPUs",
             spec_strategy_name(in->strategy), in->gpus);
}

/* Activations, logits and the temporaries of the forward and backward. */
static void activation_terms(const est_input *in, const est_result *r, est_term *t, size_t *n)
{
    const double *at = r->at_peak;
    bool ctx_kept = in->grad_ckpt && in->ckpt_nonreentrant && !in->offload_checkpoints &&
                    (in->quant == QUANT_NF4 || in->quant == QUANT_NF4_DQ); /* est_ctx_inputs */
    add_term(t, n, "activations", "activations (all layers)", at[EST_T_ACTS], r->activations, "%d layers x %s",
             r->layers_on_gpu,
             !in->grad_ckpt ? "saved activations"
             : ctx_kept     ? "(checkpoint + 4-bit inputs kept on ctx)"
                            : "checkpoint");
    add_term(t, n, "layer_backward", "layer in backward", at[EST_T_LAYER_BWD], r->layer_backward, "%s",
             in->grad_ckpt ? "recomputed activations + gradients" : "gradients of one layer");
    add_term(t, n, "logits_and_loss", "logits and loss", at[EST_T_LOGITS], r->logits,
             "%d x %d tokens x %lld vocab x %.1f bytes (%s%s)", in->batch, in->seq,
             (long long)in->model->vocab, r->loss_vocab_bytes, est_stack_name(in->stack),
             in->chunked_loss ? ", chunked" : "");
    add_term(t, n, "lm_head_gradient", "lm_head gradient", at[EST_T_HEAD_GRAD], r->head_grad,
             "vocab x hidden, from the loss backward on");
    add_term(t, n, "weight_temporaries", "temporary weight copies", at[EST_T_WEIGHT_TEMP], r->weight_temp,
             "dequantised / autocast / DoRA norm");
}

/* The terms in display order, as alive at the peak of the input's
 * counter; they add up to it. */
static size_t build_terms(const est_input *in, const est_result *r, est_term *t)
{
    size_t n = 0;
    state_terms(in, r, t, &n);
    activation_terms(in, r, t, &n);
    add_term(t, &n, "framework", "framework buffers", r->at_peak[EST_T_FRAMEWORK], r->at_peak[EST_T_FRAMEWORK],
             "the batch, cuBLAS workspaces%s", r->framework > 0 ? ", fitted constant" : "");
    add_term(t, &n, "allocator_slack", "allocator cache (reserved, free)", r->cached_at_peak, r->reserved - r->allocated,
             "caching allocator replay: %d micro steps", r->replay_steps);
    add_term(t, &n, "cuda_context", "CUDA context (+ NCCL)", in->counter == EST_COUNTER_DEVICE ? r->cuda_context : 0,
             r->cuda_context, "device counter only");
    return n;
}

static void text_header(const est_input *in, const est_result *r, sb *out)
{
    const model_shape *m = in->model;
    char count[48];
    str_thousands(count, sizeof count, r->params_total);
    sb_printf(out, "model:    %s (%s, %s parameters)\n", m->name ? m->name : "?", model_arch_name(m->arch), count);
    sb_printf(out, "          from %s\n", m->origin_text ? m->origin_text : "the caller");
    sb_printf(out, "method:   %s", spec_method_name(in->method));
    if (in->quant != QUANT_NONE) sb_printf(out, " on %s (%d-bit)", spec_quant_name(in->quant), in->bits);
    if (in->method != METHOD_FULL) {
        sb_printf(out, ", rank %d on ", in->rank);
        model_targets_format(m, in->targets, out);
    }
    str_thousands(count, sizeof count, r->params_trainable);
    sb_printf(out, " (%s trainable)\n", count);
    sb_printf(out, "settings: batch %d x %d tokens, %s, %s, gradient checkpointing %s, flash attention %s\n",
              in->batch, in->seq, spec_precision_name(in->precision), spec_optimizer_name(in->optimizer),
              in->grad_ckpt ? "on" : "off", in->flash_attn ? "on" : "off");
    sb_printf(out, "          %d GPU%s, %s", in->gpus, in->gpus > 1 ? "s" : "", spec_strategy_name(in->strategy));
    if (in->gpu_memory > 0) sb_printf(out, " of %.0f GiB", in->gpu_memory / GIB);
    sb_printf(out, ", %s stack", est_stack_name(in->stack));
    if (in->compiled) sb_puts(out, ", compiled");
    if (in->fused_optimizer) sb_puts(out, ", fused optimizer");
    if (in->method != METHOD_FULL && in->adapter_fp32) sb_puts(out, ", fp32 adapters");
    if (in->tensor_parallel > 1) sb_printf(out, ", tensor parallel %d", in->tensor_parallel);
    if (in->pipeline_stages > 1) sb_printf(out, ", %d pipeline stages (last stage shown)", in->pipeline_stages);
    sb_puts(out, "\n\n");
}

void est_format_text(const est_input *in, const est_result *r, const diag_list *notes, sb *out)
{
    est_term t[EST_MAX_TERMS];
    size_t n = build_terms(in, r, t);
    text_header(in, r, out);
    sb_printf(out, "per GPU, alive at the peak %22s   (in parentheses: not alive then)\n", "GiB");
    for (size_t i = 0; i < n; i++) {
        if (t[i].bytes <= 0 && t[i].size <= 0) continue;
        char num[24], v[32];
        if (t[i].bytes > 0)
            snprintf(num, sizeof num, "%.2f ", t[i].bytes / GIB);
        else
            snprintf(num, sizeof num, "(%.2f)", t[i].size / GIB);
        snprintf(v, sizeof v, "%9s", num);
        sb_printf(out, "  %-36s %s  %s\n", t[i].label, v, t[i].note);
    }
    char per[32], ckpt[32], eager[32];
    units_format_bytes(per, sizeof per, r->act_per_layer);
    units_format_bytes(ckpt, sizeof ckpt, r->act_checkpoint);
    units_format_bytes(eager, sizeof eager, r->act_per_layer_eager);
    sb_printf(out, "  per layer: %s saved without checkpointing", per);
    if (r->act_per_layer_eager > 0) sb_printf(out, " (%s of it attention scores)", eager);
    sb_printf(out, ", %s as a checkpoint\n", ckpt);
    sb_printf(out, "  %-36s %8.2f   at the %s peak\n", "peak per GPU", r->peak / GIB, est_phase_name(r->peak_phase));
    sb_printf(out, "  counter %s; allocated %.2f, reserved %.2f, device %.2f GiB\n", est_counter_name(in->counter),
              r->allocated / GIB, r->reserved / GIB, r->device / GIB);
    sb_printf(out, "  phases (max allocated): forward+loss %.2f, backward %.2f, optimizer step %.2f GiB\n",
              r->replay_phase[0] / GIB, r->replay_phase[1] / GIB, r->replay_phase[2] / GIB);
    if (in->gpu_memory > 0 && (r->oom || r->device > in->gpu_memory))
        sb_printf(out, "  does not fit: the step needs more than the GPU's %.0f GiB even with the cache freed\n",
                  in->gpu_memory / GIB);
    else if (r->alloc_retries > 0)
        sb_printf(out, "  the GPU filled up %lu time(s): the allocator freed its cache and retried (slow steps)\n",
                  r->alloc_retries);
    for (size_t i = 0; notes && i < notes->len; i++) {
        sb_puts(out, "note: ");
        diag_format(&notes->items[i], out);
        if (out->len && out->buf[out->len - 1] != '\n') sb_putc(out, '\n');
    }
}

static json_t *settings_json(const est_input *in)
{
    sb targets;
    sb_init(&targets);
    if (in->method != METHOD_FULL) model_targets_format(in->model, in->targets, &targets);
    json_t *s = json_pack("{s:s, s:s, s:i, s:i, s:s, s:i, s:i, s:b, s:b, s:s, s:s, s:i, s:s, s:i, s:i, s:s}",
                          "method", spec_method_name(in->method), "quant", spec_quant_name(in->quant),
                          "bits", in->bits, "rank", in->method == METHOD_FULL ? 0 : in->rank,
                          "targets", sb_str(&targets), "batch", in->batch, "seq", in->seq,
                          "grad_ckpt", in->grad_ckpt, "flash_attn", in->flash_attn,
                          "precision", spec_precision_name(in->precision),
                          "optimizer", spec_optimizer_name(in->optimizer), "gpus", in->gpus,
                          "strategy", spec_strategy_name(in->strategy),
                          "tensor_parallel", in->tensor_parallel, "pipeline_stages", in->pipeline_stages,
                          "counter", est_counter_name(in->counter));
    json_object_set_new(s, "stack", json_string(est_stack_name(in->stack)));
    json_object_set_new(s, "compiled", json_boolean(in->compiled));
    json_object_set_new(s, "chunked_loss", json_boolean(in->chunked_loss));
    json_object_set_new(s, "fused_optimizer", json_boolean(in->fused_optimizer));
    json_object_set_new(s, "adapter_fp32", json_boolean(in->adapter_fp32));
    json_object_set_new(s, "gpu_memory_gib", json_real(in->gpu_memory / GIB));
    if (in->seq_sd > 0) {
        json_object_set_new(s, "seq_mean", json_real(in->seq_mean));
        json_object_set_new(s, "seq_sd", json_real(in->seq_sd));
        if (in->seq_min > 0) json_object_set_new(s, "seq_min", json_real(in->seq_min));
        json_object_set_new(s, "truncation", json_string(in->drop_long ? "drop" : "cut"));
    }
    sb_free(&targets);
    return s;
}

static json_t *model_json(const est_input *in, const est_result *r)
{
    const model_shape *m = in->model;
    return json_pack("{s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I}", "name", m->name ? m->name : "",
                     "architecture", model_arch_name(m->arch), "source", m->origin_text ? m->origin_text : "",
                     "generic", m->origin == MODEL_FROM_GENERIC, "parameters", (json_int_t)r->params_total,
                     "trainable_parameters", (json_int_t)r->params_trainable, "hidden", (json_int_t)m->hidden,
                     "layers", (json_int_t)m->layers, "vocab", (json_int_t)m->vocab);
}

char *est_to_json(const est_input *in, const est_result *r, const diag_list *notes)
{
    est_term t[EST_MAX_TERMS];
    size_t n = build_terms(in, r, t);
    json_t *terms = json_object();
    json_t *in_peak = json_array();
    for (size_t i = 0; i < n; i++) {
        json_object_set_new(terms, t[i].key, json_real(t[i].bytes / GIB));
        if (t[i].bytes > 0) json_array_append_new(in_peak, json_string(t[i].key));
    }
    json_t *per_layer = json_pack("{s:f, s:f, s:f, s:i}", "saved_gib", r->act_per_layer / GIB,
                                  "attention_scores_gib", r->act_per_layer_eager / GIB,
                                  "checkpoint_gib", r->act_checkpoint / GIB, "layers_on_gpu", r->layers_on_gpu);
    json_t *phases = json_pack("{s:f, s:f, s:f}", "forward_loss", r->replay_phase[0] / GIB, "backward",
                               r->replay_phase[1] / GIB, "optimizer_step", r->replay_phase[2] / GIB);
    json_t *alloc = json_pack("{s:i, s:f, s:I, s:I, s:b}", "micro_steps", r->replay_steps, "cached_at_peak_gib",
                              r->cached_at_peak / GIB, "segments_at_peak", (json_int_t)r->segments_at_peak,
                              "retries", (json_int_t)r->alloc_retries, "oom", r->oom);
    json_t *msgs = json_array();
    for (size_t i = 0; notes && i < notes->len; i++) {
        sb s;
        sb_init(&s);
        diag_format(&notes->items[i], &s);
        json_array_append_new(msgs, json_string(sb_str(&s)));
        sb_free(&s);
    }
    json_t *root = json_pack("{s:o, s:o, s:f, s:s, s:f, s:f, s:f, s:s, s:o, s:o, s:o, s:o, s:o}",
                             "model", model_json(in, r), "settings", settings_json(in),
                             "per_gpu_gib", r->peak / GIB, "counter", est_counter_name(in->counter),
                             "allocated_gib", r->allocated / GIB, "reserved_gib", r->reserved / GIB,
                             "device_gib", r->device / GIB, "peak_phase", est_phase_name(r->peak_phase),
                             "terms_gib", terms, "in_peak", in_peak, "activation_per_layer", per_layer,
                             "phases_gib", phases, "notes", msgs);
    json_object_set_new(root, "allocator", alloc);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return text;
}

/* ---- the allocator at the peak ---- */

static const char *const TAG_NAMES[EST_T_COUNT] = {
    "quantised weights", "weights", "adapters", "gradients", "optimizer states", "optimizer temporaries",
    "sharding buffers", "activations", "layer backward", "logits and loss", "lm_head gradient",
    "weight temporaries", "framework"};

void est_format_explain(const est_input *in, const est_result *r, const ca_snapshot *snap, sb *out)
{
    uint64_t total = 0, used = 0, small = 0, small_used = 0, free_large_max = 0;
    for (size_t i = 0; i < snap->n_segments; i++) {
        const ca_segment_info *s = &snap->segments[i];
        total += s->size;
        used += s->allocated;
        if (s->small) {
            small += s->size;
            small_used += s->allocated;
        }
    }
    for (size_t i = 0; i < snap->n_blocks; i++)
        if (!snap->blocks[i].allocated && snap->blocks[i].size > free_large_max) free_large_max = snap->blocks[i].size;
    sb_printf(out, "\ncaching allocator at the %s peak (%s, %d micro steps replayed%s%s):\n",
              est_counter_name(in->counter == EST_COUNTER_ALLOCATED ? EST_COUNTER_ALLOCATED : EST_COUNTER_RESERVED),
              est_phase_name(r->peak_phase), r->replay_steps,
              in->alloc.expandable_segments ? ", expandable segments" : "",
              in->seq_sd > 0 ? (in->drop_long ? ", varying sample lengths, longer ones dropped" : ", varying sample lengths") : "");
    sb_printf(out, "  %zu segments, %.2f GiB reserved: %.2f GiB in use, %.2f GiB cached and free (largest free block %.2f GiB)\n",
              snap->n_segments, (double)total / GIB, (double)used / GIB, (double)(total - used) / GIB,
              (double)free_large_max / GIB);
    sb_printf(out, "  small pool (2 MiB segments): %.1f MiB, %.1f MiB in use\n", (double)small / (1 << 20),
              (double)small_used / (1 << 20));
    sb_puts(out, "  large segments (in use by term | cached free):\n");
    size_t shown = 0, rest = 0;
    uint64_t rest_size = 0, rest_free = 0;
    for (size_t i = 0; i < snap->n_segments; i++) {
        const ca_segment_info *s = &snap->segments[i];
        if (s->small) continue;
        if (s->size < (64u << 20) || shown >= 40) { /* small ones are summed up */
            rest++;
            rest_size += s->size;
            rest_free += s->size - s->allocated;
            continue;
        }
        shown++;
        double by_tag[EST_T_COUNT] = {0};
        for (size_t k = 0; k < s->n_blocks; k++) {
            const ca_block_info *b = &snap->blocks[s->first_block + k];
            if (b->allocated && b->tag >= 0 && b->tag < EST_T_COUNT) by_tag[b->tag] += (double)b->size;
        }
        sb_printf(out, "    %9.1f MiB  %3zu block%s  ", (double)s->size / (1 << 20), s->n_blocks, s->n_blocks == 1 ? " " : "s");
        bool any = false;
        for (int k = 0; k < EST_T_COUNT; k++)
            if (by_tag[k] > 0) {
                sb_printf(out, "%s%s %.1f", any ? ", " : "", TAG_NAMES[k], by_tag[k] / (1 << 20));
                any = true;
            }
        if (s->size > s->allocated) sb_printf(out, "%s| free %.1f", any ? " " : "", (double)(s->size - s->allocated) / (1 << 20));
        sb_putc(out, '\n');
    }
    if (rest)
        sb_printf(out, "    %zu more large segment%s: %.1f MiB, %.1f MiB of it free\n", rest, rest == 1 ? "" : "s",
                  (double)rest_size / (1 << 20), (double)rest_free / (1 << 20));
}
