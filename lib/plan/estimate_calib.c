/* estimate_calib.c: rows of published GPU-memory measurements (the schema of
 * share/calibration/memory-calibration.jsonl, described in its .md), mapped onto
 * estimator inputs; error metrics; and the fit of est_calib's constants.
 *
 * Mapping decisions (docs/estimator.md, "Calibration rows"):
 *   - the shape comes from the row's arch (every dimension is there); the
 *     catalogue is used only when arch is null
 *   - quant gptq8 is GPTQ with 8 bits; hqq4 (4-bit, group 64, fp16 scale and
 *     zero) stores 4.5 bits per weight, as NF4 does, and is estimated as NF4
 *   - strategy device_map_pipeline is a naive layer split: pipeline stages
 *   - memory_kind unknown is read as allocated: the tables that do not say
 *     which counter they quote mostly come from scripts printing
 *     torch.cuda.max_memory_allocated()
 *   - LoRA dropout is taken as 0.05 (the rows do not record it)
 *   - the training stack is the row's `stack` when present, else derived
 *     from source_name (row_stack); the stack's version from source_date;
 *     the GPU's memory from the gpu text
 *   - optional fields lathe's copy of the file adds (share/calibration/
 *     README.md): stack, adapter_fp32, grad_accum, seq_len_mean and
 *     seq_len_sd (the dataset's token statistics when samples vary),
 *     truncation ("drop": samples longer than seq_len were left out)
 */
#include "plan/plan.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS_MAX_BYTES (256u << 20)

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool jbool(json_t *o, const char *k, bool fallback)
{
    json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : fallback;
}

static long jlong(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long)json_integer_value(v) : 0;
}

/* Whether s contains word, ignoring ASCII case. */
static bool contains_ci(const char *s, const char *word)
{
    size_t n = strlen(word);
    for (; *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && tolower((unsigned char)s[i]) == tolower((unsigned char)word[i])) i++;
        if (i == n) return true;
    }
    return false;
}

static void skip(est_row *r, const char *why)
{
    if (r->skip_reason) return;
    r->usable = false;
    r->skip_reason = xstrdup(why);
}

/* The shape from the row's arch object, else from the catalogue. */
static void row_shape(est_row *r, json_t *row)
{
    json_t *arch = json_object_get(row, "arch");
    if (!json_is_object(arch)) {
        const model_catalog_entry *e = r->model ? model_catalog_find(r->model) : NULL;
        if (e)
            model_shape_from_catalog(e, &r->shape);
        else
            skip(r, "no architecture for the model");
        return;
    }
    model_arch a;
    if (!model_arch_from_hf(jstr(arch, "architecture"), &a)) a = MODEL_ARCH_GENERIC;
    model_shape_init(&r->shape, a);
    r->shape.hidden = jlong(arch, "hidden_size");
    r->shape.intermediate = jlong(arch, "intermediate_size");
    r->shape.layers = jlong(arch, "num_hidden_layers");
    r->shape.heads = jlong(arch, "num_attention_heads");
    r->shape.kv_heads = jlong(arch, "num_key_value_heads");
    r->shape.head_dim = jlong(arch, "head_dim");
    if (!r->shape.head_dim && r->shape.heads) r->shape.head_dim = r->shape.hidden / r->shape.heads;
    r->shape.vocab = jlong(arch, "vocab_size");
    r->shape.tied_embeddings = jbool(arch, "tie_word_embeddings", false);
    r->shape.qkv_bias = jbool(arch, "qkv_bias", r->shape.qkv_bias);
    r->shape.name = xstrdup(r->model ? r->model : "?");
    diag_list d;
    diag_list_init(&d);
    if (!model_shape_check(&r->shape, NULL, &d)) skip(r, "the row's arch is incomplete");
    diag_list_free(&d);
}

static void row_quant(est_row *r, json_t *row)
{
    const char *q = jstr(row, "quant");
    r->in.bits = (int)jlong(row, "bits");
    if (!q || strcmp(q, "none") == 0) {
        r->in.quant = QUANT_NONE;
        if (r->in.method == METHOD_QLORA) skip(r, "quantisation unknown");
    } else if (strcmp(q, "gptq8") == 0) {
        r->in.quant = QUANT_GPTQ4;
        r->in.bits = 8;
    } else if (strcmp(q, "hqq4") == 0) {
        r->in.quant = QUANT_NF4;
    } else if (!spec_quant_parse(q, &r->in.quant)) {
        skip(r, "quantisation lathe does not model");
    }
    if (r->in.quant == QUANT_NONE && r->in.bits != 16 && r->in.bits != 32)
        skip(r, "bits lathe does not model");
}

static void row_targets(est_row *r, json_t *row)
{
    if (r->in.method == METHOD_FULL) return;
    json_t *t = json_object_get(row, "lora_targets");
    r->in.rank = (int)jlong(row, "lora_rank");
    if (!json_is_array(t) || r->in.rank < 1) {
        skip(r, "LoRA rank or targets unknown");
        return;
    }
    static const char *const names[] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                        "gate_proj", "up_proj", "down_proj"};
    size_t i;
    json_t *v;
    r->in.targets = 0;
    json_array_foreach(t, i, v)
    {
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        bool known = false;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (strcmp(s, names[k]) == 0) {
                r->in.targets |= 1u << k; /* MODEL_ROLE_Q ... MODEL_ROLE_DOWN in this order */
                known = true;
            }
        if (!known) skip(r, "a LoRA target lathe does not know");
    }
    r->n_targets = (int)json_array_size(t);
    if (jbool(row, "lora_lm_head", false)) {
        r->in.targets |= MODEL_ROLE_LM_HEAD;
        r->n_targets++;
    }
    if (!r->in.targets) skip(r, "no LoRA targets");
}

static void row_parallel(est_row *r, json_t *row)
{
    const char *s = jstr(row, "strategy");
    r->in.gpus = (int)jlong(row, "num_gpus");
    if (r->in.gpus < 1) r->in.gpus = 1;
    if (s && strcmp(s, "device_map_pipeline") == 0) {
        r->in.strategy = STRAT_SINGLE;
        r->in.pipeline_stages = r->in.gpus;
    } else if (!s || !spec_strategy_parse(s, &r->in.strategy)) {
        skip(r, "strategy lathe does not model");
    }
    const char *off = jstr(row, "offload");
    if (off && strcmp(off, "none") != 0) skip(r, "CPU offload");
}

/* Gradient accumulation and the sample lengths' statistics, when given. */
static void row_steps(est_row *r, json_t *row)
{
    long ga = jlong(row, "grad_accum");
    if (ga > 0) r->in.grad_accum = (int)ga;
    json_t *mean = json_object_get(row, "seq_len_mean"), *sd = json_object_get(row, "seq_len_sd");
    if (json_is_number(mean) && json_is_number(sd)) {
        r->in.seq_mean = json_number_value(mean);
        r->in.seq_sd = json_number_value(sd);
    }
    json_t *min = json_object_get(row, "seq_len_min");
    if (json_is_number(min)) r->in.seq_min = json_number_value(min);
    const char *trunc = jstr(row, "truncation");
    if (trunc && strcmp(trunc, "drop") == 0)
        r->in.drop_long = true;
    else if (trunc && strcmp(trunc, "cut") != 0)
        skip(r, "a truncation lathe does not know (cut or drop)");
    if (r->in.drop_long && !(r->in.seq_sd > 0)) skip(r, "truncation drop without seq_len_mean and seq_len_sd");
}

static void row_counter(est_row *r)
{
    const char *k = r->memory_kind;
    if (strcmp(k, "reserved") == 0)
        r->in.counter = EST_COUNTER_RESERVED;
    else if (strcmp(k, "nvidia-smi") == 0)
        r->in.counter = EST_COUNTER_DEVICE;
    else
        r->in.counter = EST_COUNTER_ALLOCATED; /* allocated, or not stated */
}

/* The stack from source_name (docs/estimator.md, "Calibration rows"):
 * torchtune and LitGPT by name; plain loops: GaLore's torchrun_main.py
 * (whose Llama copy takes the loss of bf16 logits) and PEFT's MetaMathQA
 * method-comparison benchmark (method_comparison/MetaMathQA/run.py: a bf16
 * model, no autocast, `outputs.loss` backward); every other source (ms-swift,
 * LLaMA-Factory, the Qwen README's finetune.py, PEFT docs, axolotl, the QLoRA
 * paper, Hugging Face docs) trains through the Hugging Face Trainer.
 * Dated details: torchtune's configs set AdamW fused: True and its recipes
 * `del logits` before backward from July 2024 (before, the shifted logits
 * stayed alive); PEFT before 0.12 (July 2024) kept 16-bit adapters in the
 * model dtype (quantised bases always get fp32 ones). The chunked loss is
 * the row's chunked_ce. prepare_model_for_kbit_training's fp32 embedding
 * and lm_head (HF stack, bitsandbytes bases): cast back to 16 bits by the
 * QLoRA paper's qlora.py and by axolotl; LLaMA-Factory upcasts only the
 * norms; HQQ bases are skipped by PEFT, as GPTQ ones. */
static void row_stack(est_row *r, json_t *row)
{
    const char *src = r->source, *date = jstr(row, "source_date"), *given = jstr(row, "stack");
    bool recent = date && strcmp(date, "2024-07") >= 0;
    est_stack st = EST_STACK_HF;
    if (given) {
        if (!est_stack_parse(given, &st)) skip(r, "a stack lathe does not know");
    } else if (contains_ci(src, "torchtune"))
        st = EST_STACK_TORCHTUNE;
    else if (contains_ci(src, "litgpt") || contains_ci(src, "lit-gpt"))
        st = EST_STACK_LITGPT;
    else if (contains_ci(src, "unsloth") && !contains_ci(src, "llama-factory"))
        st = EST_STACK_UNSLOTH;
    else if (contains_ci(src, "galore") || contains_ci(src, "metamath") ||
             contains_ci(src, "method comparison") || contains_ci(src, "method_comparison") ||
             (contains_ci(src, "peft") && contains_ci(src, "bench")))
        st = EST_STACK_PLAIN;
    est_input_set_stack(&r->in, st);
    if (contains_ci(src, "galore")) r->in.bf16_loss = true;
    /* Answer.AI's fsdp_qlora train.py calls torch.cuda.reset_peak_memory_stats
     * right before its training loop */
    if (contains_ci(src, "fsdp_qlora")) r->in.reset_after_load = true;
    if (st == EST_STACK_TORCHTUNE) {
        r->in.fused_optimizer = recent;
        r->in.logits_kept = !recent;
        /* torchtune pinned torchao==0.1 until torchao 0.2 (2024-05-20) */
        r->in.nf4_whole = !(date && strcmp(date, "2024-05-20") >= 0);
    }
    if ((st == EST_STACK_HF || st == EST_STACK_PLAIN) && !recent) r->in.adapter_fp32 = r->in.quant != QUANT_NONE;
    r->in.adapter_fp32 = jbool(row, "adapter_fp32", r->in.adapter_fp32);
    /* transformers 4.46 (2024-10-24) moved the logits' upcast into the loss
     * function and shifts the labels instead of the logits */
    r->in.legacy_loss = (st == EST_STACK_HF || st == EST_STACK_PLAIN) && !(date && strcmp(date, "2024-10") >= 0);
    /* until 4.49 (2025-02-17) that function still shifted the fp32 logits
     * with a copy (PR 35646 removed it) */
    r->in.loss_shift_copy = (st == EST_STACK_HF || st == EST_STACK_PLAIN) && !r->in.legacy_loss && date &&
                            strcmp(date, "2025-02-17") < 0;
    const char *q = jstr(row, "quant");
    /* who casts the unquantised weights back, or never calls
     * prepare_model_for_kbit_training: ms-swift (no call in swift/ from
     * 1.x, 2023-12, to 3.x) */
    if (contains_ci(src, "ms-swift") || contains_ci(src, "qlora paper") || contains_ci(src, "dettmers") ||
        contains_ci(src, "axolotl") || contains_ci(src, "llama-factory") ||
        contains_ci(src, "llamafactory") || (q && strcmp(q, "hqq4") == 0))
        r->in.kbit_fp32 = false;
    /* ms-swift's LLM Benchmark runs (97e4d198b): get_model_tokenizer
     * patches torch.utils.checkpoint.checkpoint to use_reentrant=False
     * (fix_gradient_checkpointing_warning, swift/llm/utils/model.py), and
     * get_model_tokenizer_qwen passes torch_dtype=None to from_pretrained
     * (the dtype goes into Qwen v1's config.bf16), so transformers (<
     * 4.37) loads a bitsandbytes Qwen v1 in fp16 while
     * bnb_4bit_compute_dtype is the run's bf16 (select_bnb) */
    if (contains_ci(src, "ms-swift") && contains_ci(src, "benchmark")) {
        r->in.ckpt_nonreentrant = true;
        r->in.bnb_input_cast = r->in.model && r->in.model->arch == MODEL_ARCH_QWEN;
    }
    r->in.ckpt_nonreentrant = jbool(row, "ckpt_nonreentrant", r->in.ckpt_nonreentrant);
    r->in.chunked_loss = jbool(row, "chunked_ce", r->in.chunked_loss);
    r->in.compiled = jbool(row, "compile", r->in.compiled);
}

/* The GPU's memory from the row's gpu text: "A100 80GB" -> 80 GiB (GPU
 * makers' GB are GiB), a few names that come in one size, else 0. */
static double row_gpu_memory(json_t *row)
{
    static const struct {
        const char *name;
        double gib;
    } known[] = {{"A6000", 48}, {"H100", 80}, {"H200", 141}, {"4090", 24}, {"3090", 24},
                 {"A10G", 24},  {"L4", 24},   {"L40", 48},   {"T4", 16}};
    const char *g = jstr(row, "gpu");
    if (!g) return 0;
    for (const char *p = g; *p; p++) {
        char *end;
        double v = strtod(p, &end);
        if (end > p && v >= 4 && v <= 1024 && (strncmp(end, "GB", 2) == 0 || strncmp(end, " GB", 3) == 0))
            return v * GIB;
        if (end > p) p = end - 1;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (contains_ci(g, known[i].name)) return known[i].gib * GIB;
    return 0;
}

/* Fills one row from its JSON object. */
static void row_from_json(est_row *r, json_t *row)
{
    memset(r, 0, sizeof *r);
    r->id = (int)jlong(row, "id");
    r->source = xstrdup(jstr(row, "source_name") ? jstr(row, "source_name") : "?");
    r->model = xstrdup(jstr(row, "model") ? jstr(row, "model") : "?");
    r->method_text = xstrdup(jstr(row, "method") ? jstr(row, "method") : "?");
    r->memory_kind = xstrdup(jstr(row, "memory_kind") ? jstr(row, "memory_kind") : "unknown");
    r->usable = true;
    if (!jbool(row, "usable", false)) {
        const char *why = jstr(row, "unusable_reason");
        skip(r, why ? why : "marked unusable");
    }
    json_t *m = json_object_get(row, "measured_gib");
    r->measured_gib = json_is_number(m) ? json_number_value(m) : 0;
    if (!(r->measured_gib > 0)) skip(r, "no measured value");

    row_shape(r, row);
    est_input_defaults(&r->in, &r->shape);
    if (!spec_method_parse(r->method_text, &r->in.method) || r->in.method == METHOD_AUTO)
        skip(r, "method lathe does not model");
    row_quant(r, row);
    row_targets(r, row);
    r->in.batch = (int)jlong(row, "micro_batch");
    r->in.seq = (int)jlong(row, "seq_len");
    if (r->in.batch < 1 || r->in.seq < 1) skip(r, "batch or sequence length unknown");
    r->in.grad_ckpt = jbool(row, "grad_ckpt", false);
    r->in.flash_attn = jbool(row, "flash_attn", true);
    const char *opt = jstr(row, "optimizer");
    if (!opt || !spec_optimizer_parse(opt, &r->in.optimizer)) skip(r, "optimizer lathe does not model");
    if (jbool(row, "optimizer_in_bwd", false)) skip(r, "optimizer step fused into backward");
    const char *prec = jstr(row, "precision");
    if (!prec || !spec_precision_parse(prec, &r->in.precision)) skip(r, "precision unknown");
    row_parallel(r, row);
    row_steps(r, row);
    row_counter(r);
    r->in.model = &r->shape;
    r->in.gpu_memory = row_gpu_memory(row);
    row_stack(r, row);
    if (r->usable) {
        diag_list d;
        diag_list_init(&d);
        if (!est_input_resolve(&r->in, &d)) skip(r, d.len ? d.items[0].message : "inconsistent settings");
        diag_list_free(&d);
    }
}

bool est_rows_parse(const char *text, size_t len, const char *name, est_row **rows, size_t *n,
                    diag_list *d)
{
    *rows = NULL;
    *n = 0;
    size_t cap = 0;
    int line = 0;
    bool ok = true;
    for (const char *p = text, *next; ok && p < text + len; p = next) {
        const char *nl = memchr(p, '\n', (size_t)(text + len - p));
        next = nl ? nl + 1 : text + len;
        line++;
        size_t ll = (size_t)((nl ? nl : text + len) - p);
        if (ll == 0) continue;
        json_error_t je;
        json_t *obj = json_loadb(p, ll, 0, &je);
        if (!json_is_object(obj)) {
            diag *x = diag_add(d, DIAG_ERROR, name, line, obj ? 1 : je.column, NULL,
                               "each line must be one JSON object");
            diag_set_found(x, "%s", obj ? "another JSON value" : je.text);
            ok = false;
        } else {
            if (*n == cap) {
                cap = cap ? cap * 2 : 256;
                *rows = xrealloc(*rows, cap * sizeof **rows);
            }
            row_from_json(&(*rows)[(*n)++], obj);
        }
        json_decref(obj);
    }
    return ok;
}

bool est_rows_load(const char *path, est_row **rows, size_t *n, diag_list *d)
{
    *rows = NULL;
    *n = 0;
    char err[256];
    size_t len;
    char *text = file_read_all(path, ROWS_MAX_BYTES, &len, err, sizeof err);
    if (!text) {
        diag *x = diag_add(d, DIAG_ERROR, path, 0, 0, NULL, "cannot read the measurements");
        diag_set_found(x, "%s", err);
        return false;
    }
    bool ok = est_rows_parse(text, len, path, rows, n, d);
    free(text);
    return ok;
}

void est_rows_free(est_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rows[i].source);
        free(rows[i].model);
        free(rows[i].method_text);
        free(rows[i].memory_kind);
        free(rows[i].skip_reason);
        model_shape_free(&rows[i].shape);
    }
    free(rows);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void est_metrics_of(const double *ape, size_t n, est_metrics *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n == 0) return;
    double *s = xmalloc(n * sizeof *s);
    double sum = 0;
    size_t w10 = 0, w20 = 0;
    for (size_t i = 0; i < n; i++) {
        s[i] = ape[i];
        sum += ape[i];
        w10 += ape[i] <= 10.0;
        w20 += ape[i] <= 20.0;
    }
    qsort(s, n, sizeof *s, cmp_double);
    out->mape = sum / (double)n;
    out->median_ape = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    out->within10 = (double)w10 / (double)n;
    out->within20 = (double)w20 / (double)n;
    free(s);
}

double est_row_ape(const est_row *row, const est_calib *c)
{
    est_result r;
    est_estimate(&row->in, c, &r);
    return fabs(r.peak / GIB - row->measured_gib) / row->measured_gib * 100.0;
}

/* framework_gib is one allocation made at load and held through the run:
 * it adds itself to every counter (the replay with it is the replay
 * without it, shifted), so the fit estimates each row once and tries the
 * values on those peaks. */
double est_calib_fit_framework(const double *peak_gib, const double *measured_gib, const bool *use, size_t n)
{
    double best = 0, best_obj = INFINITY;
    for (int f = 0; f <= 20; f++) { /* 0 ... 2.5 GiB by 1/8 */
        double fw = 0.125 * f, sum = 0;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (use && !use[i]) continue;
            double e = fabs(peak_gib[i] + fw - measured_gib[i]) / measured_gib[i] * 100.0;
            sum += e < 50.0 ? e : 50.0; /* clipped: rows the schema cannot describe do not pull it */
            k++;
        }
        double o = k ? sum / (double)k : 0;
        if (o < best_obj - 1e-12) {
            best_obj = o;
            best = fw;
        }
    }
    return best;
}

void est_calib_fit(const est_row *rows, size_t n, const bool *use, const est_calib *start,
                   est_calib *out)
{
    /* start only supplies the fields that are not fitted: the search never
     * keeps start's own framework_gib, so a cross-validation fold cannot
     * inherit a value fitted on the rows it leaves out */
    est_calib base = *start;
    base.framework_gib = 0;
    double *peak = xcalloc(n ? n : 1, sizeof *peak), *meas = xcalloc(n ? n : 1, sizeof *meas);
    bool *ok = xcalloc(n ? n : 1, sizeof *ok);
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].usable || (use && !use[i])) continue;
        est_result r;
        est_estimate(&rows[i].in, &base, &r);
        peak[i] = r.peak / GIB;
        meas[i] = rows[i].measured_gib;
        ok[i] = true;
    }
    *out = base;
    out->framework_gib = est_calib_fit_framework(peak, meas, ok, n);
    free(peak);
    free(meas);
    free(ok);
}
