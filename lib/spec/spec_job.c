/* spec_job.c: the LoRATrainingJob: its schema tables, defaults, the checks
 * that span fields (method vs quantisation, target module names, retry
 * backoff, ...), and the job's memory (new, clone, free).
 *
 * The schema accepts the seed article's file unchanged and adds lathe's
 * extensions; the defaults are those documented in spec.h and docs/spec.md.
 * Whether the chosen model has a target module is the planner's check: here
 * a name is refused only when no supported architecture has it.
 */
#include "spec_internal.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- defaults and memory ---- */
static const char *const default_targets[] = {"q_proj", "k_proj", "v_proj", "o_proj"};

spec_job *spec_job_new_default(void)
{
    spec_job *j = xcalloc(1, sizeof *j);
    j->api_version = xstrdup("lathe/v1");
    j->name = xstrdup("job");
    j->team = xstrdup("default");
    j->method = METHOD_LORA;
    j->lora.rank = 16;
    j->lora.alpha = 32;
    j->lora.n_target_modules = 4;
    j->lora.target_modules = spec_strv_clone((char *const *)default_targets, 4);
    j->lora.pos_target_modules = xcalloc(4, sizeof(spec_pos));
    j->lora.dropout = 0.05;
    j->quantization.bits = 16;
    j->quantization.quant = QUANT_AUTO;
    j->training_data.format = SPEC_DATA_AUTO;
    j->training_data.batch_size = 1;
    j->training_data.gradient_accumulation = 1;
    j->hyperparams.epochs = 1;
    j->hyperparams.learning_rate = 2e-4;
    j->hyperparams.max_seq_length = 2048;
    j->hyperparams.lr_scheduler = xstrdup("cosine");
    j->hyperparams.max_grad_norm = 1.0;
    j->hyperparams.seed = 42;
    j->checkpoint.enabled = true;
    j->checkpoint.interval_steps = 500;
    j->checkpoint.keep_last = 3;
    j->retry_policy.max_retries = 3;
    j->retry_policy.retry_on_failure = true;
    j->retry_policy.backoff_seconds = 60;
    j->retry_policy.max_backoff_seconds = 3600;
    j->timeout.grace_period = 120;
    j->trainer.kind = TRAINER_BUILTIN;
    return j;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

spec_job *spec_job_clone(const spec_job *j)
{
    spec_job *c = xmalloc(sizeof *c);
    *c = *j; /* numbers and positions; every pointer is replaced below */
    c->file = dup_or_null(j->file);
    c->api_version = dup_or_null(j->api_version);
    c->name = dup_or_null(j->name);
    c->namespace_ = dup_or_null(j->namespace_);
    c->labels = spec_kv_clone(j->labels, j->n_labels);
    c->team = dup_or_null(j->team);
    c->priority_class = dup_or_null(j->priority_class);
    c->experiment = dup_or_null(j->experiment);
    c->base_model.name = dup_or_null(j->base_model.name);
    c->base_model.path = dup_or_null(j->base_model.path);
    c->lora.target_modules = spec_strv_clone(j->lora.target_modules, j->lora.n_target_modules);
    c->lora.pos_target_modules = NULL;
    if (j->lora.n_target_modules) {
        size_t sz = j->lora.n_target_modules * sizeof(spec_pos);
        c->lora.pos_target_modules = xmalloc(sz);
        memcpy(c->lora.pos_target_modules, j->lora.pos_target_modules, sz);
    }
    c->training_data.dataset_path = dup_or_null(j->training_data.dataset_path);
    c->training_data.eval_path = dup_or_null(j->training_data.eval_path);
    c->training_data.eval_path_alias = dup_or_null(j->training_data.eval_path_alias);
    c->hyperparams.lr_scheduler = dup_or_null(j->hyperparams.lr_scheduler);
    c->resources.gpu_type = dup_or_null(j->resources.gpu_type);
    c->checkpoint.storage_type = dup_or_null(j->checkpoint.storage_type);
    c->checkpoint.pvc_name = dup_or_null(j->checkpoint.pvc_name);
    c->checkpoint.path = dup_or_null(j->checkpoint.path);
    c->trainer.command = spec_strv_clone(j->trainer.command, j->trainer.n_command);
    c->trainer.image = dup_or_null(j->trainer.image);
    c->trainer.env = spec_kv_clone(j->trainer.env, j->trainer.n_env);
    return c;
}

void spec_job_free(spec_job *j)
{
    if (!j) return;
    free(j->file);
    free(j->api_version);
    free(j->name);
    free(j->namespace_);
    spec_kv_free(j->labels, j->n_labels);
    free(j->team);
    free(j->priority_class);
    free(j->experiment);
    free(j->base_model.name);
    free(j->base_model.path);
    str_list_free(j->lora.target_modules, j->lora.n_target_modules);
    free(j->lora.pos_target_modules);
    free(j->training_data.dataset_path);
    free(j->training_data.eval_path);
    free(j->training_data.eval_path_alias);
    free(j->hyperparams.lr_scheduler);
    free(j->resources.gpu_type);
    free(j->checkpoint.storage_type);
    free(j->checkpoint.pvc_name);
    free(j->checkpoint.path);
    str_list_free(j->trainer.command, j->trainer.n_command);
    free(j->trainer.image);
    spec_kv_free(j->trainer.env, j->trainer.n_env);
    free(j);
}

/* ---- custom decoders ---- */

/* What trainer.command and trainer.env are, as plain fields. */
static const spec_field argv_field = {.key = "command", .type = SF_STRLIST,
                                      .off = offsetof(spec_job, trainer.command),
                                      .off_n = offsetof(spec_job, trainer.n_command)};
static const spec_field env_field = {.key = "env", .type = SF_KV,
                                     .off = offsetof(spec_job, trainer.env),
                                     .off_n = offsetof(spec_job, trainer.n_env)};

/* trainer.command: an argv list, never a shell line. */
static void decode_command(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    spec_job *j = base;
    if (v->kind == SPEC_YSCALAR) {
        diag *x = spec_report(c, DIAG_ERROR, v, "a command is a list of arguments, not a line");
        diag_set_expected(x, "a list such as [python, train.py, --config, c.yaml]");
        diag_set_found(x, "\"%s\"", v->text);
        char **parts;
        size_t n = str_split(v->text, ' ', &parts);
        sb s;
        sb_init(&s);
        for (size_t i = 0; i < n; i++) sb_printf(&s, "%s\"%s\"", i ? ", " : "", parts[i]);
        diag_set_suggestion(x, "write [%s]; lathe never runs a shell", sb_str(&s));
        sb_free(&s);
        str_list_free(parts, n);
        return;
    }
    if (!spec_decode_field(c, &argv_field, v, base)) return;
    if (j->trainer.n_command == 0) {
        diag *x = spec_report(c, DIAG_ERROR, v, "the command is empty");
        diag_set_suggestion(x, "name the program to run, or drop `command` to use the "
                               "built-in trainer");
        return;
    }
    j->trainer.kind = TRAINER_COMMAND;
    (void)f;
}

static bool env_name_ok(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_') return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

/* trainer.env: a mapping or a Kubernetes-style list; names are checked. */
static void decode_env(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    if (!spec_decode_field(c, &env_field, v, base)) return;
    size_t n = v->kind == SPEC_YMAP ? v->n_items / 2 : v->n_items;
    for (size_t i = 0; i < n; i++) {
        const spec_ynode *k = v->kind == SPEC_YMAP ? v->items[2 * i]
                                                   : spec_ymap_get(v->items[i], "name");
        if (!k || k->kind != SPEC_YSCALAR || env_name_ok(k->text)) continue;
        size_t old = v->kind == SPEC_YMAP ? spec_path_push(c, k->text)
                                          : spec_path_push_index(c, i);
        diag *x = spec_report(c, DIAG_ERROR, k, "not a valid environment variable name");
        diag_set_expected(x, "letters, digits and '_', not starting with a digit");
        diag_set_found(x, "\"%s\"", k->text);
        spec_path_pop(c, old);
    }
    (void)f;
}

/* ---- the schema ---- */
#define J(m) offsetof(spec_job, m)
#define RANGE(lo, hi) .flags = SF_MIN | SF_MAX, .min = (lo), .max = (hi)
#define AT_LEAST(lo) .flags = SF_MIN, .min = (lo)
#define ABOVE(lo) .flags = SF_MIN | SF_MIN_EXCL, .min = (lo)
#define SCHEMA(tab) {tab, sizeof tab / sizeof tab[0], 0, NULL, NULL}

static const spec_enum_entry bits_tab[] = {{"4", 4, false}, {"8", 8, false}, {"16", 16, false}};
static const spec_enum_def bits_enum = {bits_tab, 3};

static const spec_field base_model_fields[] = {
    {.key = "name", .type = SF_STR, .off = J(base_model.name), .flags = SF_POS,
     .off_pos = J(base_model.pos_name)},
    {.key = "path", .type = SF_STR, .off = J(base_model.path), .flags = SF_POS,
     .off_pos = J(base_model.pos_path)},
    {.key = "parameters", .type = SF_COUNT, .off = J(base_model.parameters),
     .flags = SF_POS | SF_MIN | SF_MIN_EXCL, .min = 0, .off_pos = J(base_model.pos_parameters)},
};
static const spec_schema base_model_schema = SCHEMA(base_model_fields);

static const spec_field lora_fields[] = {
    {.key = "rank", .type = SF_INT, .off = J(lora.rank), .flags = SF_MIN | SF_MAX | SF_POS,
     .min = 1, .max = 1024, .off_pos = J(lora.pos_rank),
     .hint = "LoRA ranks are usually 8, 16, 32 or 64"},
    {.key = "alpha", .type = SF_DOUBLE, .off = J(lora.alpha), ABOVE(0),
     .hint = "alpha is usually rank or 2 x rank"},
    {.key = "targetModules", .type = SF_STRLIST, .off = J(lora.target_modules),
     .off_n = J(lora.n_target_modules), .flags = SF_POS, .off_pos = J(lora.pos_target_modules)},
    {.key = "dropout", .type = SF_DOUBLE, .off = J(lora.dropout),
     .flags = SF_MIN | SF_MAX | SF_MAX_EXCL, .min = 0, .max = 1,
     .hint = "LoRA dropout is a probability, usually 0.05 or 0.1"},
    {.key = "useRslora", .type = SF_BOOL, .off = J(lora.use_rslora)},
};
static const spec_schema lora_schema = SCHEMA(lora_fields);

static const spec_field quant_fields[] = {
    {.key = "bits", .type = SF_ENUM, .off = J(quantization.bits), .enm = &bits_enum},
    {.key = "type", .type = SF_ENUM, .off = J(quantization.quant), .enm = &spec_enum_quant},
};
static const spec_schema quant_schema = SCHEMA(quant_fields);

static const spec_field data_fields[] = {
    {.key = "datasetPath", .type = SF_STR, .off = J(training_data.dataset_path),
     .flags = SF_REQUIRED | SF_POS, .off_pos = J(training_data.pos_dataset_path)},
    {.key = "evalDatasetPath", .type = SF_STR, .off = J(training_data.eval_path)},
    {.key = "evalPath", .type = SF_STR, .off = J(training_data.eval_path_alias),
     .hint = "evalPath is the older name of evalDatasetPath"},
    {.key = "evalSplit", .type = SF_DOUBLE, .off = J(training_data.eval_split),
     .flags = SF_MIN | SF_MIN_EXCL | SF_MAX | SF_MAX_EXCL, .min = 0, .max = 0.5,
     .hint = "the share of the records held out for evaluation, such as 0.05"},
    {.key = "format", .type = SF_ENUM, .off = J(training_data.format),
     .enm = &spec_enum_data_format},
    {.key = "samples", .type = SF_LONG, .off = J(training_data.samples),
     .flags = SF_MIN | SF_UNITS, .min = 0},
    {.key = "batchSize", .type = SF_INT, .off = J(training_data.batch_size), RANGE(1, 65536),
     .hint = "the per-device micro batch is at least 1"},
    {.key = "gradientAccumulation", .type = SF_INT,
     .off = J(training_data.gradient_accumulation), RANGE(1, 65536),
     .hint = "1 means no accumulation"},
    {.key = "packing", .type = SF_BOOL, .off = J(training_data.packing)},
};
static const spec_schema data_schema = SCHEMA(data_fields);

static const spec_field hyper_fields[] = {
    {.key = "epochs", .type = SF_INT, .off = J(hyperparams.epochs), RANGE(1, 100000)},
    {.key = "maxSteps", .type = SF_LONG, .off = J(hyperparams.max_steps), AT_LEAST(0),
     .hint = "0 means: as many steps as the epochs take"},
    {.key = "learningRate", .type = SF_DOUBLE, .off = J(hyperparams.learning_rate),
     .flags = SF_MIN | SF_MIN_EXCL | SF_MAX, .min = 0, .max = 1,
     .hint = "LoRA learning rates are usually 1e-4 to 3e-4"},
    {.key = "warmupSteps", .type = SF_INT, .off = J(hyperparams.warmup_steps), AT_LEAST(0)},
    {.key = "maxSeqLength", .type = SF_INT, .off = J(hyperparams.max_seq_length),
     RANGE(1, 1048576)},
    {.key = "weightDecay", .type = SF_DOUBLE, .off = J(hyperparams.weight_decay), AT_LEAST(0)},
    {.key = "lrScheduler", .type = SF_ENUM_STR, .off = J(hyperparams.lr_scheduler),
     .enm = &spec_enum_lr_scheduler},
    {.key = "maxGradNorm", .type = SF_DOUBLE, .off = J(hyperparams.max_grad_norm), AT_LEAST(0),
     .hint = "0 turns clipping off"},
    {.key = "seed", .type = SF_U64, .off = J(hyperparams.seed)},
    {.key = "precision", .type = SF_ENUM, .off = J(hyperparams.precision),
     .enm = &spec_enum_precision},
    {.key = "optimizer", .type = SF_ENUM, .off = J(hyperparams.optimizer),
     .enm = &spec_enum_optimizer},
    {.key = "gradientCheckpointing", .type = SF_TOGGLE,
     .off = J(hyperparams.gradient_checkpointing)},
    {.key = "flashAttention", .type = SF_TOGGLE, .off = J(hyperparams.flash_attention)},
    {.key = "evalSteps", .type = SF_LONG, .off = J(hyperparams.eval_steps), AT_LEAST(0),
     .hint = "0 means about 10 evaluations per run; the last step is always evaluated"},
};
static const spec_schema hyper_schema = SCHEMA(hyper_fields);

static const spec_field gpu_fields[] = {
    {.key = "count", .type = SF_INT, .off = J(resources.gpu_count),
     .flags = SF_MIN | SF_MAX | SF_POS, .min = 1, .max = 4096,
     .off_pos = J(resources.pos_gpu_count), .hint = "GPUs per node; leave it out to let lathe choose"},
    {.key = "type", .type = SF_STR, .off = J(resources.gpu_type), .flags = SF_POS,
     .off_pos = J(resources.pos_gpu_type)},
    {.key = "memoryEstimate", .type = SF_BYTES, .off = J(resources.gpu_memory_estimate),
     .flags = SF_POS | SF_MIN | SF_MIN_EXCL, .min = 0,
     .off_pos = J(resources.pos_gpu_memory_estimate)},
    {.key = "shared", .type = SF_BOOL, .off = J(resources.gpu_shared)},
};
static const spec_schema gpu_schema = SCHEMA(gpu_fields);

static const spec_field resources_fields[] = {
    {.key = "gpu", .type = SF_OBJ, .sub = &gpu_schema},
    {.key = "cpu", .type = SF_CPU, .off = J(resources.cpu), ABOVE(0)},
    {.key = "memory", .type = SF_BYTES, .off = J(resources.memory), ABOVE(0)},
    {.key = "nodes", .type = SF_INT, .off = J(resources.nodes), RANGE(1, 4096)},
    {.key = "strategy", .type = SF_ENUM, .off = J(resources.strategy),
     .enm = &spec_enum_strategy},
};
static const spec_schema resources_schema = SCHEMA(resources_fields);

static const spec_field storage_fields[] = {
    {.key = "type", .type = SF_STR, .off = J(checkpoint.storage_type)},
    {.key = "pvcName", .type = SF_STR, .off = J(checkpoint.pvc_name), .flags = SF_DNS},
    {.key = "size", .type = SF_BYTES, .off = J(checkpoint.size), ABOVE(0)},
};
static const spec_schema storage_schema = SCHEMA(storage_fields);

static const spec_field checkpoint_fields[] = {
    {.key = "enabled", .type = SF_BOOL, .off = J(checkpoint.enabled)},
    {.key = "intervalSteps", .type = SF_INT, .off = J(checkpoint.interval_steps), AT_LEAST(1)},
    {.key = "keepLast", .type = SF_INT, .off = J(checkpoint.keep_last), AT_LEAST(1),
     .hint = "keep at least the newest checkpoint"},
    {.key = "path", .type = SF_STR, .off = J(checkpoint.path)},
    {.key = "storage", .type = SF_OBJ, .sub = &storage_schema},
};
static const spec_schema checkpoint_schema = SCHEMA(checkpoint_fields);

static const spec_field retry_fields[] = {
    {.key = "maxRetries", .type = SF_INT, .off = J(retry_policy.max_retries), RANGE(0, 1000)},
    {.key = "retryOnFailure", .type = SF_BOOL, .off = J(retry_policy.retry_on_failure)},
    {.key = "backoffSeconds", .type = SF_DOUBLE, .off = J(retry_policy.backoff_seconds),
     AT_LEAST(0)},
    {.key = "maxBackoffSeconds", .type = SF_DOUBLE, .off = J(retry_policy.max_backoff_seconds),
     AT_LEAST(0)},
};
static const spec_schema retry_schema = SCHEMA(retry_fields);

static const spec_field timeout_fields[] = {
    {.key = "maxDuration", .type = SF_DURATION, .off = J(timeout.max_duration)},
    {.key = "gracePeriod", .type = SF_DURATION, .off = J(timeout.grace_period)},
};
static const spec_schema timeout_schema = SCHEMA(timeout_fields);

static const spec_field trainer_fields[] = {
    {.key = "command", .type = SF_CUSTOM, .fn = decode_command, .like = &argv_field,
     .n_like = 1, .hint = "the trainer's argv; never run through a shell"},
    {.key = "image", .type = SF_STR, .off = J(trainer.image)},
    {.key = "env", .type = SF_CUSTOM, .fn = decode_env, .like = &env_field, .n_like = 1},
};
static const spec_schema trainer_schema = SCHEMA(trainer_fields);

static const spec_field body_fields[] = {
    {.key = "method", .type = SF_ENUM, .off = J(method), .enm = &spec_enum_method},
    {.key = "team", .type = SF_STR, .off = J(team), .flags = SF_DNS},
    {.key = "priorityClassName", .type = SF_STR, .off = J(priority_class)},
    {.key = "experiment", .type = SF_STR, .off = J(experiment), .flags = SF_DNS},
    {.key = "baseModel", .type = SF_OBJ, .sub = &base_model_schema, .flags = SF_REQUIRED},
    {.key = "lora", .type = SF_OBJ, .sub = &lora_schema},
    {.key = "quantization", .type = SF_OBJ, .sub = &quant_schema},
    {.key = "trainingData", .type = SF_OBJ, .sub = &data_schema, .flags = SF_REQUIRED},
    {.key = "hyperparams", .type = SF_OBJ, .sub = &hyper_schema},
    {.key = "resources", .type = SF_OBJ, .sub = &resources_schema},
    {.key = "checkpoint", .type = SF_OBJ, .sub = &checkpoint_schema},
    {.key = "retryPolicy", .type = SF_OBJ, .sub = &retry_schema},
    {.key = "timeout", .type = SF_OBJ, .sub = &timeout_schema},
    {.key = "trainer", .type = SF_OBJ, .sub = &trainer_schema},
};
const spec_schema spec_job_body_schema = SCHEMA(body_fields);

static const spec_field metadata_fields[] = {
    {.key = "name", .type = SF_STR, .off = J(name), .flags = SF_REQUIRED | SF_DNS},
    {.key = "namespace", .type = SF_STR, .off = J(namespace_), .flags = SF_DNS},
    {.key = "labels", .type = SF_KV, .off = J(labels), .off_n = J(n_labels)},
};
static const spec_schema metadata_schema = SCHEMA(metadata_fields);

static const spec_field top_fields[] = {
    {.key = "apiVersion", .type = SF_IGNORE},
    {.key = "kind", .type = SF_IGNORE},
    {.key = "metadata", .type = SF_OBJ, .sub = &metadata_schema, .flags = SF_REQUIRED},
    {.key = "spec", .type = SF_OBJ, .sub = &spec_job_body_schema, .flags = SF_REQUIRED},
};
const spec_schema spec_job_schema = SCHEMA(top_fields);

/* ---- checks across fields ---- */

/* A diagnostic at the node of a dotted path below the body ("lora.alpha"). */
static diag *report_at(spec_dctx *c, diag_level level, const spec_ynode *body, const char *dotted,
                       const char *msg)
{
    const spec_ynode *n = spec_ypath(body, dotted);
    if (!n) n = body;
    size_t old = spec_path_push(c, dotted);
    diag *x = spec_report(c, level, n, "%s", msg);
    spec_path_pop(c, old);
    return x;
}

static bool given(const spec_ynode *body, const char *dotted)
{
    return !spec_yabsent(spec_ypath(body, dotted));
}

/* True when a field at dotted was written but failed to decode: checks
 * across fields skip it rather than pile on. */
static bool bad(const spec_dctx *c, const spec_ynode *body, const char *dotted)
{
    const spec_ynode *n = spec_ypath(body, dotted);
    return n && spec_dctx_bad(c, n);
}

/* Module names some supported architecture has (Llama / Qwen2 / Mistral
 * style, Phi-3's fused ones, InternLM2's, Qwen v1's), plus PEFT's
 * "all-linear" shorthand. */
static const char *const known_modules[] = {
    "q_proj", "k_proj", "v_proj",  "o_proj",       "gate_proj", "up_proj", "down_proj",
    "all-linear", "lm_head", "embed_tokens", "qkv_proj", "gate_up_proj", "wqkv", "wo",
    "w1", "w2", "w3", "c_attn", "c_proj",
};
#define N_KNOWN_MODULES (sizeof known_modules / sizeof known_modules[0])

static void check_target_modules(spec_dctx *c, spec_job *j)
{
    size_t old = spec_path_push(c, "lora.targetModules");
    for (size_t i = 0; i < j->lora.n_target_modules; i++) {
        const char *m = j->lora.target_modules[i];
        spec_ynode at = {.line = j->lora.pos_target_modules[i].line,
                         .col = j->lora.pos_target_modules[i].col};
        size_t o2 = spec_path_push_index(c, i);
        bool known = false;
        for (size_t k = 0; k < N_KNOWN_MODULES && !known; k++) known = !strcmp(known_modules[k], m);
        if (!known) {
            diag *x = spec_report(c, DIAG_ERROR, &at,
                                  "no supported architecture has a module named \"%s\"", m);
            diag_set_expected(x, "a module name such as q_proj, v_proj, down_proj or all-linear");
            diag_set_found(x, "\"%s\"", m);
            const char *s = str_suggest(m, known_modules, N_KNOWN_MODULES);
            if (s) diag_set_suggestion(x, "did you mean %s?", s);
        } else if (!strcmp(m, "all-linear") && j->lora.n_target_modules > 1) {
            diag *x = spec_report(c, DIAG_WARNING, &at,
                                  "all-linear already covers every linear layer");
            diag_set_suggestion(x, "write all-linear alone");
        }
        for (size_t k = 0; k < i; k++)
            if (!strcmp(j->lora.target_modules[k], m)) {
                spec_report(c, DIAG_WARNING, &at, "\"%s\" is listed twice", m);
                break;
            }
        spec_path_pop(c, o2);
    }
    spec_path_pop(c, old);
}

/* Bits a quantisation type implies (0: none implied). */
static int quant_bits(spec_quant q)
{
    switch (q) {
    case QUANT_NF4:
    case QUANT_NF4_DQ:
    case QUANT_GPTQ4:
    case QUANT_AWQ4: return 4;
    case QUANT_INT8: return 8;
    case QUANT_NONE: return 16;
    default: return 0;
    }
}

/* quantization.type vs bits, then bits vs method; fills the defaults. */
static void resolve_quantization(spec_dctx *c, const spec_ynode *body, spec_job *j)
{
    if (bad(c, body, "quantization") || bad(c, body, "quantization.bits") ||
        bad(c, body, "quantization.type") || bad(c, body, "method"))
        return;
    bool bits_given = given(body, "quantization.bits");
    int implied = quant_bits(j->quantization.quant);
    if (implied && !bits_given) {
        j->quantization.bits = implied;
    } else if (implied && j->quantization.bits != implied) {
        diag *x = report_at(c, DIAG_ERROR, body, "quantization.type",
                            "the quantisation type does not match quantization.bits");
        diag_set_expected(x, "%d bits for %s", implied, spec_quant_name(j->quantization.quant));
        diag_set_found(x, "bits: %d", j->quantization.bits);
        diag_set_suggestion(x, "set bits to %d, or drop one of the two", implied);
    }
    bool quantised = j->quantization.bits < 16;
    if (!given(body, "method")) {
        j->method = quantised ? METHOD_QLORA : METHOD_LORA;
        return;
    }
    if (j->method == METHOD_QLORA && !quantised) {
        if (bits_given || implied) {
            diag *x = report_at(c, DIAG_ERROR, body, bits_given ? "quantization.bits"
                                                                 : "quantization.type",
                                "method qlora trains on a quantised base, but this base is "
                                "not quantised");
            diag_set_expected(x, "quantization.bits 4 or 8");
            diag_set_found(x, "%d", j->quantization.bits);
            diag_set_suggestion(x, "use bits: 4 for QLoRA, or method: lora for a 16-bit base");
        } else {
            j->quantization.bits = 4; /* QLoRA's usual 4-bit NF4 base */
        }
    } else if (j->method == METHOD_FULL && quantised) {
        diag *x = report_at(c, DIAG_ERROR, body, "method",
                            "full fine-tuning updates every weight and cannot train a "
                            "quantised base");
        diag_set_found(x, "quantization.bits %d", j->quantization.bits);
        diag_set_suggestion(x, "use method: qlora, or drop the quantization section");
    } else if (j->method == METHOD_LORA && quantised) {
        diag *x = report_at(c, DIAG_WARNING, body, "method",
                            "LoRA on a quantised base is QLoRA");
        diag_set_suggestion(x, "write method: qlora to say so");
    }
}

static void check_base_model(spec_dctx *c, const spec_ynode *body, spec_job *j)
{
    const spec_ynode *bm = spec_ymap_get(body, "baseModel");
    if (spec_yabsent(bm) || bm->kind != SPEC_YMAP || bad(c, body, "baseModel"))
        return; /* reported by the schema */
    if (j->base_model.name || j->base_model.path || j->base_model.parameters > 0) return;
    diag *x = report_at(c, DIAG_ERROR, body, "baseModel", "the base model is not named");
    diag_set_expected(x, "name, path or parameters");
    diag_set_suggestion(x, "add `name: Qwen2-7B-Instruct` or `path: /models/...`");
}

static void check_misc(spec_dctx *c, const spec_ynode *body, spec_job *j)
{
    if (j->method == METHOD_FULL && given(body, "lora")) {
        diag *x = report_at(c, DIAG_WARNING, body, "lora",
                            "method full trains every weight: the lora settings are ignored");
        diag_set_suggestion(x, "drop the lora section, or use method: lora");
    }
    if (bad(c, body, "retryPolicy.backoffSeconds") ||
        bad(c, body, "retryPolicy.maxBackoffSeconds")) {
        /* reported already */
    } else if (j->retry_policy.max_backoff_seconds < j->retry_policy.backoff_seconds &&
               given(body, "retryPolicy.maxBackoffSeconds")) {
        diag *x = report_at(c, DIAG_ERROR, body, "retryPolicy.maxBackoffSeconds",
                            "the longest backoff is shorter than the first one");
        diag_set_expected(x, "at least backoffSeconds (%g)", j->retry_policy.backoff_seconds);
        diag_set_found(x, "%g", j->retry_policy.max_backoff_seconds);
    } else if (j->retry_policy.max_backoff_seconds < j->retry_policy.backoff_seconds) {
        j->retry_policy.max_backoff_seconds = j->retry_policy.backoff_seconds;
    }
    if (j->hyperparams.max_steps > 0 && j->hyperparams.warmup_steps >= j->hyperparams.max_steps) {
        diag *x = report_at(c, DIAG_WARNING, body, "hyperparams.warmupSteps",
                            "warm-up lasts the whole run");
        diag_set_suggestion(x, "use fewer warm-up steps than maxSteps (%ld)",
                            j->hyperparams.max_steps);
    }
    int gpus = j->resources.gpu_count * (j->resources.nodes > 1 ? j->resources.nodes : 1);
    if (j->resources.gpu_shared && gpus > 1) {
        diag *x = report_at(c, DIAG_WARNING, body, "resources.gpu.shared",
                            "only a job on one GPU shares it: the setting has no effect");
        diag_set_found(x, "%d GPUs", gpus);
        diag_set_suggestion(x, "drop shared, or ask for one GPU");
    }
    if (j->timeout.max_duration > 0 && j->timeout.grace_period >= j->timeout.max_duration) {
        diag *x = report_at(c, DIAG_WARNING, body, "timeout.gracePeriod",
                            "the grace period is as long as the whole run may last");
        diag_set_suggestion(x, "a grace period of a few minutes is enough to save a checkpoint");
    }
}

/* The eval set: evalDatasetPath or its older name evalPath (one file), or a
 * held-out share evalSplit, not both; evalSteps wants one of them. */
static void resolve_eval(spec_dctx *c, const spec_ynode *body, spec_job *j)
{
    char **path = &j->training_data.eval_path, **alias = &j->training_data.eval_path_alias;
    if (*alias && *path && strcmp(*alias, *path) != 0) {
        diag *x = report_at(c, DIAG_ERROR, body, "trainingData.evalPath",
                            "trainingData.evalPath and trainingData.evalDatasetPath name "
                            "different eval sets");
        diag_set_expected(x, "one eval set (evalPath is the older name of evalDatasetPath)");
        diag_set_found(x, "evalPath \"%s\", evalDatasetPath \"%s\"", *alias, *path);
        diag_set_suggestion(x, "keep evalDatasetPath and drop evalPath");
    } else if (*alias && !*path) {
        *path = *alias;
        *alias = NULL;
    }
    free(*alias);
    *alias = NULL;
    if (*path && j->training_data.eval_split > 0) {
        diag *x = report_at(c, DIAG_ERROR, body, "trainingData.evalSplit",
                            "the job names an eval file and a held-out share");
        diag_set_expected(x, "evalDatasetPath or evalSplit, not both");
        diag_set_found(x, "evalDatasetPath \"%s\", evalSplit %g", *path,
                       j->training_data.eval_split);
        diag_set_suggestion(x, "drop evalSplit to evaluate on %s, or drop evalDatasetPath to "
                            "hold out a share of the training data", *path);
    }
    if (given(body, "hyperparams.evalSteps") && !*path && j->training_data.eval_split <= 0 &&
        !bad(c, body, "trainingData.evalSplit")) {
        diag *x = report_at(c, DIAG_WARNING, body, "hyperparams.evalSteps",
                            "evalSteps is set but the job has no eval set: nothing is evaluated");
        diag_set_suggestion(x, "add trainingData.evalDatasetPath (a file) or "
                            "trainingData.evalSplit (a held-out share, such as 0.05)");
    }
}

/* Defaults that depend on other fields, and checks across fields. */
static void resolve_job(spec_dctx *c, const spec_ynode *body, spec_job *j)
{
    if (!given(body, "lora.alpha")) j->lora.alpha = 2.0 * j->lora.rank;
    resolve_quantization(c, body, j);
    check_base_model(c, body, j);
    check_target_modules(c, j);
    check_misc(c, body, j);
    resolve_eval(c, body, j);
    j->resources.given = given(body, "resources");
    if (!given(body, "team")) {
        free(j->team);
        j->team = xstrdup(j->namespace_ ? j->namespace_ : "default");
    }
}

void spec_decode_job_body(spec_dctx *c, const spec_ynode *body, const spec_ynode *key_at,
                          spec_job *j)
{
    spec_decode_map(c, body, key_at, &spec_job_body_schema, j);
    if (body->kind == SPEC_YMAP) resolve_job(c, body, j);
}

spec_job *spec_decode_job(spec_dctx *c, const spec_ynode *root, const spec_ydoc *doc)
{
    size_t before = c->d->errors;
    spec_job *j = spec_job_new_default();
    free(j->name);
    j->name = NULL;
    j->file = xstrdup(c->file);
    j->pos = (spec_pos){doc->line, doc->col};
    const spec_ynode *api = spec_ymap_get(root, "apiVersion");
    free(j->api_version);
    j->api_version = xstrdup(api && api->kind == SPEC_YSCALAR ? api->text : "lathe/v1");

    /* metadata first: the team default reads the namespace */
    spec_decode_map(c, root, root, &spec_job_schema, j);
    const spec_ynode *body = spec_ymap_get(root, "spec");
    if (!spec_yabsent(body) && body->kind == SPEC_YMAP) {
        size_t old = spec_path_push(c, "spec");
        resolve_job(c, body, j);
        spec_path_pop(c, old);
    }
    if (c->d->errors != before) {
        spec_job_free(j);
        return NULL;
    }
    return j;
}
