/* spec_emit.c: a resolved job written back out, as lathe/v1 YAML (libyaml's
 * emitter) or JSON (jansson). One walk over the job's fields (emit_job)
 * drives either writer through a small sink interface, so both carry the
 * same fields in the same order, and both load back into an equal job:
 *   - YAML writes sizes, counts and durations with units (32Gi, 7B, 8h)
 *     whenever that is exact, and quotes strings that YAML would otherwise
 *     read as numbers, booleans or null;
 *   - JSON writes sizes in bytes and durations in seconds, as numbers.
 * Numbers use the shortest text that reads back to the same double.
 */
#include "spec_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- number text ---- */

/* The shortest %g text that reads back as v (whole numbers without an
 * exponent); returns the significant digits it needed. */
static int shortest(char *buf, size_t n, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.0f", v);
        return (int)strlen(buf) - (v < 0);
    }
    for (int p = 1; p < 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return p;
    }
    snprintf(buf, n, "%.17g", v);
    return 17;
}

/* A float as YAML 1.1 readers recognise it too: "1.0e-05", not "1e-05". */
static void yaml_number(char *buf, size_t n, double v)
{
    char tmp[40];
    shortest(tmp, sizeof tmp, v);
    char *e = strchr(tmp, 'e');
    if (e && !memchr(tmp, '.', (size_t)(e - tmp)))
        snprintf(buf, n, "%.*s.0%s", (int)(e - tmp), tmp, e);
    else
        snprintf(buf, n, "%s", tmp);
}

typedef bool (*unit_parser)(const char *, double *);

/* v in the largest unit that writes it exactly and briefly: a whole
 * number ("28GB", "32Gi") or a short decimal ("1.5B"); else the plain
 * number. suffix / mult are ordered largest first. */
static void with_unit(char *buf, size_t n, double v, const char *const *suffix,
                      const double *mult, size_t k, unit_parser parse)
{
    for (size_t i = 0; i < k && v > 0; i++) {
        if (v < mult[i]) continue;
        if (fmod(v, mult[i]) == 0 && v / mult[i] < 1e15) {
            snprintf(buf, n, "%.0f%s", v / mult[i], suffix[i]);
            return;
        }
        char num[40];
        shortest(num, sizeof num, v / mult[i]);
        if (strlen(num) > 4 || strchr(num, 'e')) continue;
        snprintf(buf, n, "%s%s", num, suffix[i]);
        double back;
        if (parse(buf, &back) && back == v) return;
    }
    shortest(buf, n, v);
}

static void bytes_text(char *buf, size_t n, double v)
{
    static const char *const suf[] = {"Ti", "TB", "Gi", "GB", "Mi", "MB", "Ki", "KB"};
    static const double mult[] = {GIB * 1024, 1e12, GIB, 1e9, 1048576.0, 1e6, 1024.0, 1e3};
    with_unit(buf, n, v, suf, mult, 8, units_parse_bytes);
}

static void count_text(char *buf, size_t n, double v)
{
    static const char *const suf[] = {"T", "B", "M", "K"};
    static const double mult[] = {1e12, 1e9, 1e6, 1e3};
    with_unit(buf, n, v, suf, mult, 4, units_parse_count);
}

/* "1d2h3m4s" for whole seconds; plain seconds otherwise. */
static void duration_text(char *buf, size_t n, double v)
{
    if (v != floor(v) || v > 1e15) {
        shortest(buf, n, v);
        return;
    }
    unsigned long long s = (unsigned long long)v, d = s / 86400, h = s % 86400 / 3600,
                       m = s % 3600 / 60, sec = s % 60;
    size_t o = 0;
    buf[0] = '\0';
    if (d) o += (size_t)snprintf(buf + o, n - o, "%llud", d);
    if (h && o < n) o += (size_t)snprintf(buf + o, n - o, "%lluh", h);
    if (m && o < n) o += (size_t)snprintf(buf + o, n - o, "%llum", m);
    if ((sec || !s) && o < n) snprintf(buf + o, n - o, "%llus", sec);
}

/* ---- the sink: what emit_job writes to ---- */
typedef enum { NUM_PLAIN, NUM_BYTES, NUM_COUNT, NUM_DURATION } num_kind;

typedef struct sink sink;
struct sink {
    void (*map_begin)(sink *s, const char *key);
    void (*map_end)(sink *s);
    void (*seq_begin)(sink *s, const char *key);
    void (*seq_end)(sink *s);
    void (*str)(sink *s, const char *key, const char *v);
    void (*num)(sink *s, const char *key, double v, num_kind kind);
    void (*integer)(sink *s, const char *key, long long v);
    void (*boolean)(sink *s, const char *key, bool v);
};

static void put_str(sink *s, const char *key, const char *v)
{
    if (v) s->str(s, key, v);
}

static void put_int(sink *s, const char *key, long long v)
{
    s->integer(s, key, v);
}

static void put_toggle(sink *s, const char *key, spec_toggle t)
{
    if (t == TOGGLE_AUTO) s->str(s, key, "auto");
    else s->boolean(s, key, t == TOGGLE_ON);
}

static void put_kv(sink *s, const char *key, const spec_kv *kv, size_t n)
{
    if (!n) return;
    s->map_begin(s, key);
    for (size_t i = 0; i < n; i++) s->str(s, kv[i].key, kv[i].value);
    s->map_end(s);
}

static void put_list(sink *s, const char *key, char *const *v, size_t n)
{
    s->seq_begin(s, key);
    for (size_t i = 0; i < n; i++) s->str(s, NULL, v[i]);
    s->seq_end(s);
}

/* ---- the walk over a job ---- */
static void emit_model_and_lora(sink *s, const spec_job *j)
{
    s->map_begin(s, "baseModel");
    put_str(s, "name", j->base_model.name);
    put_str(s, "path", j->base_model.path);
    if (j->base_model.parameters > 0)
        s->num(s, "parameters", j->base_model.parameters, NUM_COUNT);
    s->map_end(s);
    if (j->method != METHOD_FULL) { /* full fine-tuning ignores them */
        s->map_begin(s, "lora");
        put_int(s, "rank", j->lora.rank);
        s->num(s, "alpha", j->lora.alpha, NUM_PLAIN);
        put_list(s, "targetModules", j->lora.target_modules, j->lora.n_target_modules);
        s->num(s, "dropout", j->lora.dropout, NUM_PLAIN);
        s->boolean(s, "useRslora", j->lora.use_rslora);
        s->map_end(s);
    }
    s->map_begin(s, "quantization");
    put_int(s, "bits", j->quantization.bits);
    s->str(s, "type", spec_quant_name(j->quantization.quant));
    s->map_end(s);
}

static void emit_data_and_hyper(sink *s, const spec_job *j)
{
    s->map_begin(s, "trainingData");
    put_str(s, "datasetPath", j->training_data.dataset_path);
    put_str(s, "evalDatasetPath", j->training_data.eval_path);
    if (j->training_data.eval_split > 0)
        s->num(s, "evalSplit", j->training_data.eval_split, NUM_PLAIN);
    s->str(s, "format", spec_enum_name(&spec_enum_data_format, (int)j->training_data.format));
    if (j->training_data.samples > 0) put_int(s, "samples", j->training_data.samples);
    put_int(s, "batchSize", j->training_data.batch_size);
    put_int(s, "gradientAccumulation", j->training_data.gradient_accumulation);
    s->boolean(s, "packing", j->training_data.packing);
    s->map_end(s);

    s->map_begin(s, "hyperparams");
    put_int(s, "epochs", j->hyperparams.epochs);
    put_int(s, "maxSteps", j->hyperparams.max_steps);
    s->num(s, "learningRate", j->hyperparams.learning_rate, NUM_PLAIN);
    put_int(s, "warmupSteps", j->hyperparams.warmup_steps);
    put_int(s, "maxSeqLength", j->hyperparams.max_seq_length);
    s->num(s, "weightDecay", j->hyperparams.weight_decay, NUM_PLAIN);
    put_str(s, "lrScheduler", j->hyperparams.lr_scheduler);
    s->num(s, "maxGradNorm", j->hyperparams.max_grad_norm, NUM_PLAIN);
    put_int(s, "seed", (long long)j->hyperparams.seed);
    s->str(s, "precision", spec_precision_name(j->hyperparams.precision));
    s->str(s, "optimizer", spec_optimizer_name(j->hyperparams.optimizer));
    put_toggle(s, "gradientCheckpointing", j->hyperparams.gradient_checkpointing);
    put_toggle(s, "flashAttention", j->hyperparams.flash_attention);
    if (j->hyperparams.eval_steps > 0) put_int(s, "evalSteps", j->hyperparams.eval_steps);
    s->map_end(s);
}

static void emit_resources(sink *s, const spec_job *j)
{
    if (!j->resources.given) return;
    s->map_begin(s, "resources");
    if (j->resources.gpu_count || j->resources.gpu_type || j->resources.gpu_memory_estimate > 0 ||
        j->resources.gpu_shared) {
        s->map_begin(s, "gpu");
        if (j->resources.gpu_count) put_int(s, "count", j->resources.gpu_count);
        put_str(s, "type", j->resources.gpu_type);
        if (j->resources.gpu_memory_estimate > 0)
            s->num(s, "memoryEstimate", j->resources.gpu_memory_estimate, NUM_BYTES);
        if (j->resources.gpu_shared) s->boolean(s, "shared", true);
        s->map_end(s);
    }
    if (j->resources.cpu > 0) s->num(s, "cpu", j->resources.cpu, NUM_PLAIN);
    if (j->resources.memory > 0) s->num(s, "memory", j->resources.memory, NUM_BYTES);
    if (j->resources.nodes) put_int(s, "nodes", j->resources.nodes);
    s->str(s, "strategy", spec_strategy_name(j->resources.strategy));
    s->map_end(s);
}

static void emit_operations(sink *s, const spec_job *j)
{
    s->map_begin(s, "checkpoint");
    s->boolean(s, "enabled", j->checkpoint.enabled);
    put_int(s, "intervalSteps", j->checkpoint.interval_steps);
    put_int(s, "keepLast", j->checkpoint.keep_last);
    put_str(s, "path", j->checkpoint.path);
    if (j->checkpoint.storage_type || j->checkpoint.pvc_name || j->checkpoint.size > 0) {
        s->map_begin(s, "storage");
        put_str(s, "type", j->checkpoint.storage_type);
        put_str(s, "pvcName", j->checkpoint.pvc_name);
        if (j->checkpoint.size > 0) s->num(s, "size", j->checkpoint.size, NUM_BYTES);
        s->map_end(s);
    }
    s->map_end(s);

    s->map_begin(s, "retryPolicy");
    put_int(s, "maxRetries", j->retry_policy.max_retries);
    s->boolean(s, "retryOnFailure", j->retry_policy.retry_on_failure);
    s->num(s, "backoffSeconds", j->retry_policy.backoff_seconds, NUM_PLAIN);
    s->num(s, "maxBackoffSeconds", j->retry_policy.max_backoff_seconds, NUM_PLAIN);
    s->map_end(s);

    s->map_begin(s, "timeout");
    if (j->timeout.max_duration > 0)
        s->num(s, "maxDuration", j->timeout.max_duration, NUM_DURATION);
    s->num(s, "gracePeriod", j->timeout.grace_period, NUM_DURATION);
    s->map_end(s);

    if (j->trainer.kind == TRAINER_COMMAND || j->trainer.image || j->trainer.n_env) {
        s->map_begin(s, "trainer");
        if (j->trainer.kind == TRAINER_COMMAND)
            put_list(s, "command", j->trainer.command, j->trainer.n_command);
        put_str(s, "image", j->trainer.image);
        put_kv(s, "env", j->trainer.env, j->trainer.n_env);
        s->map_end(s);
    }
}

static void emit_job(sink *s, const spec_job *j)
{
    s->map_begin(s, NULL);
    s->str(s, "apiVersion", "lathe/v1");
    s->str(s, "kind", "LoRATrainingJob");
    s->map_begin(s, "metadata");
    put_str(s, "name", j->name);
    put_str(s, "namespace", j->namespace_);
    put_kv(s, "labels", j->labels, j->n_labels);
    s->map_end(s);
    s->map_begin(s, "spec");
    s->str(s, "method", spec_method_name(j->method));
    put_str(s, "team", j->team);
    put_str(s, "priorityClassName", j->priority_class);
    put_str(s, "experiment", j->experiment);
    emit_model_and_lora(s, j);
    emit_data_and_hyper(s, j);
    emit_resources(s, j);
    emit_operations(s, j);
    s->map_end(s);
    s->map_end(s);
}

/* ---- YAML sink (libyaml emitter) ---- */
typedef struct ysink {
    sink base;
    yaml_emitter_t em;
    sb out;
    bool failed;
} ysink;

static int ysink_write(void *data, unsigned char *buffer, size_t size)
{
    sb_putn(data, (const char *)buffer, size);
    return 1;
}

static void ysink_emit(ysink *y, yaml_event_t *ev)
{
    if (!y->failed && !yaml_emitter_emit(&y->em, ev)) y->failed = true;
}

/* Would a YAML reader take this plain text for a number, boolean or null? */
static bool needs_quotes(const char *s)
{
    static const char *const words[] = {"y", "yes", "n", "no", "true", "false", "on", "off",
                                        "null", "~"};
    if (!*s || strchr("0123456789+-.", *s)) return true;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (str_ieq(s, words[i])) return true;
    return false;
}

static void ysink_scalar(ysink *y, const char *v, bool plain)
{
    yaml_event_t ev;
    yaml_scalar_style_t style = plain ? YAML_PLAIN_SCALAR_STYLE
                                      : needs_quotes(v) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE
                                                        : YAML_ANY_SCALAR_STYLE;
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)strlen(v), 1, 1, style);
    ysink_emit(y, &ev);
}

static void ysink_key(ysink *y, const char *key)
{
    if (key) ysink_scalar(y, key, false);
}

static void ysink_map_begin(sink *s, const char *key)
{
    ysink *y = (ysink *)s;
    ysink_key(y, key);
    yaml_event_t ev;
    yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
    ysink_emit(y, &ev);
}

static void ysink_map_end(sink *s)
{
    yaml_event_t ev;
    yaml_mapping_end_event_initialize(&ev);
    ysink_emit((ysink *)s, &ev);
}

static void ysink_seq_begin(sink *s, const char *key)
{
    ysink *y = (ysink *)s;
    ysink_key(y, key);
    yaml_event_t ev;
    yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_FLOW_SEQUENCE_STYLE);
    ysink_emit(y, &ev);
}

static void ysink_seq_end(sink *s)
{
    yaml_event_t ev;
    yaml_sequence_end_event_initialize(&ev);
    ysink_emit((ysink *)s, &ev);
}

static void ysink_str(sink *s, const char *key, const char *v)
{
    ysink_key((ysink *)s, key);
    ysink_scalar((ysink *)s, v, false);
}

static void ysink_num(sink *s, const char *key, double v, num_kind kind)
{
    char buf[64];
    switch (kind) {
    case NUM_BYTES: bytes_text(buf, sizeof buf, v); break;
    case NUM_COUNT: count_text(buf, sizeof buf, v); break;
    case NUM_DURATION: duration_text(buf, sizeof buf, v); break;
    default: yaml_number(buf, sizeof buf, v); break;
    }
    ysink_key((ysink *)s, key);
    ysink_scalar((ysink *)s, buf, true);
}

static void ysink_int(sink *s, const char *key, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    ysink_key((ysink *)s, key);
    ysink_scalar((ysink *)s, buf, true);
}

static void ysink_bool(sink *s, const char *key, bool v)
{
    ysink_key((ysink *)s, key);
    ysink_scalar((ysink *)s, v ? "true" : "false", true);
}

char *spec_job_to_yaml(const spec_job *j)
{
    ysink y = {.base = {ysink_map_begin, ysink_map_end, ysink_seq_begin, ysink_seq_end,
                        ysink_str, ysink_num, ysink_int, ysink_bool}};
    sb_init(&y.out);
    yaml_emitter_initialize(&y.em);
    yaml_emitter_set_output(&y.em, ysink_write, &y.out);
    yaml_emitter_set_unicode(&y.em, 1);
    yaml_emitter_set_width(&y.em, 100);
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    ysink_emit(&y, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    ysink_emit(&y, &ev);
    emit_job(&y.base, j);
    yaml_document_end_event_initialize(&ev, 1);
    ysink_emit(&y, &ev);
    yaml_stream_end_event_initialize(&ev);
    ysink_emit(&y, &ev);
    yaml_emitter_flush(&y.em);
    yaml_emitter_delete(&y.em);
    if (y.failed) {
        sb_free(&y.out);
        return NULL;
    }
    return sb_take(&y.out);
}

/* ---- JSON sink (jansson) ---- */
typedef struct jsink {
    sink base;
    json_t *stack[16]; /* open objects and arrays; the job nests 4 deep */
    int depth;
    json_t *root;
    int precision; /* the most significant digits any double needed */
} jsink;

static void jsink_add(jsink *js, const char *key, json_t *v)
{
    if (js->depth == 0) {
        js->root = v;
        return;
    }
    json_t *top = js->stack[js->depth - 1];
    if (json_is_array(top)) json_array_append_new(top, v);
    else json_object_set_new(top, key, v);
}

static void jsink_open(jsink *js, const char *key, json_t *v)
{
    json_incref(v);
    jsink_add(js, key, v);
    js->stack[js->depth++] = v;
}

static void jsink_close(sink *s)
{
    jsink *js = (jsink *)s;
    json_decref(js->stack[--js->depth]);
}

static void jsink_map_begin(sink *s, const char *key)
{
    jsink_open((jsink *)s, key, json_object());
}

static void jsink_seq_begin(sink *s, const char *key)
{
    jsink_open((jsink *)s, key, json_array());
}

static void jsink_str(sink *s, const char *key, const char *v)
{
    jsink_add((jsink *)s, key, json_string(v));
}

static void jsink_num(sink *s, const char *key, double v, num_kind kind)
{
    jsink *js = (jsink *)s;
    (void)kind; /* sizes in bytes, durations in seconds */
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        jsink_add(js, key, json_integer((json_int_t)v));
        return;
    }
    char buf[40];
    int p = shortest(buf, sizeof buf, v);
    if (p > js->precision) js->precision = p;
    jsink_add(js, key, json_real(v));
}

static void jsink_int(sink *s, const char *key, long long v)
{
    jsink_add((jsink *)s, key, json_integer((json_int_t)v));
}

static void jsink_bool(sink *s, const char *key, bool v)
{
    jsink_add((jsink *)s, key, json_boolean(v));
}

char *spec_job_to_json(const spec_job *j)
{
    jsink js = {.base = {jsink_map_begin, jsink_close, jsink_seq_begin, jsink_close, jsink_str,
                         jsink_num, jsink_int, jsink_bool},
                .precision = 1};
    emit_job(&js.base, j);
    char *text = json_dumps(js.root, JSON_INDENT(2) | JSON_REAL_PRECISION(js.precision));
    json_decref(js.root);
    if (!text) return NULL;
    char *out = xstrdup(text);
    free(text);
    return out;
}
