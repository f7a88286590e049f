/* planner.c: chooses how a fine-tuning job should run. It resolves the
 * model, enumerates every way to run the job (method, GPU type and count,
 * data / tensor / pipeline parallel degrees, ZeRO stage, micro-batch and
 * accumulation, gradient checkpointing), asks the memory estimator whether
 * each fits, prices the ones that do with a FLOPs-based throughput model,
 * and keeps the cheapest (or fastest) one that finishes within the job's
 * maxDuration. It also checks the resources the spec asks for. Pure: no
 * I/O except counting the dataset's records when the spec does not say. */
#include "plan/plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void plan_options_defaults(plan_options *o)
{
    memset(o, 0, sizeof *o);
    o->margin = 0.10;
    o->objective = PLAN_CHEAPEST;
    o->max_gpus = 512;
}

static void add_reason(plan_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_reason(plan_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    r->reasons = xrealloc(r->reasons, (r->n_reasons + 1) * sizeof *r->reasons);
    r->reasons[r->n_reasons++] = xvasprintf(fmt, ap);
    va_end(ap);
}

/* Moves diagnostics from `from` into `to`, giving those without a place
 * the spec's file and the position pos. */
static void rehome(diag_list *from, diag_list *to, const char *file, spec_pos pos,
                   const char *path)
{
    for (size_t i = 0; i < from->len; i++) {
        const diag *x = &from->items[i];
        bool placed = x->line > 0;
        diag *y = diag_add(to, x->level, x->file && placed ? x->file : file,
                           placed ? x->line : pos.line, placed ? x->col : pos.col,
                           x->path && x->path[0] && x->path[0] != '-' ? x->path : path, x->message);
        if (x->expected) diag_set_expected(y, "%s", x->expected);
        if (x->found) diag_set_found(y, "%s", x->found);
        if (x->suggestion) diag_set_suggestion(y, "%s", x->suggestion);
    }
    diag_list_free(from);
}

unsigned plan_check_targets(const spec_job *job, const model_shape *m, diag_list *d)
{
    unsigned roles = 0;
    for (size_t i = 0; i < job->lora.n_target_modules; i++) {
        diag_list tmp;
        diag_list_init(&tmp);
        const char *name = job->lora.target_modules[i];
        unsigned r = 0;
        char *path = xasprintf("spec.lora.targetModules[%zu]", i);
        if (!model_targets_from_names(m, &name, 1, path, &r, &tmp) && tmp.len == 0) {
            diag *x = diag_add(&tmp, DIAG_ERROR, NULL, 0, 0, path, "the model has no such module");
            diag_set_found(x, "%s", name);
        }
        spec_pos pos = job->lora.pos_target_modules ? job->lora.pos_target_modules[i]
                                                    : (spec_pos){0, 0};
        for (size_t k = 0; k < tmp.len; k++) {
            /* say which model, so the message stands on its own */
            diag *x = &tmp.items[k];
            char *msg = xasprintf("%s (model %s, %s)", x->message, m->name ? m->name : "?",
                                  model_arch_hf_class(m->arch)[0] ? model_arch_hf_class(m->arch)
                                                                  : model_arch_name(m->arch));
            free(x->message);
            x->message = msg;
        }
        rehome(&tmp, d, job->file, pos, path);
        free(path);
        roles |= r;
    }
    return roles;
}

/* ---- the run: samples, steps, tokens ---- */

/* Counts the non-empty lines of a JSONL file; -1 when it cannot be read. */
static long count_records(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long n = 0;
    int c, prev = '\n';
    bool blank = true;
    while ((c = getc(f)) != EOF) {
        if (c == '\n') {
            if (!blank) n++;
            blank = true;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            blank = false;
        }
        prev = c;
    }
    if (!blank && prev != '\n') n++;
    fclose(f);
    return n;
}

static void plan_run_size(const spec_job *job, plan_result *r)
{
    r->effective_batch = job->training_data.batch_size * job->training_data.gradient_accumulation;
    r->seq = job->hyperparams.max_seq_length;
    r->deadline = job->timeout.max_duration;
    if (job->training_data.samples > 0) {
        r->samples = job->training_data.samples;
        r->samples_origin = xstrdup("spec.trainingData.samples");
    } else if (job->training_data.dataset_path && file_exists(job->training_data.dataset_path)) {
        long n = count_records(job->training_data.dataset_path);
        if (n > 0) {
            r->samples = n;
            r->samples_origin = xasprintf("records counted in %s", job->training_data.dataset_path);
        }
    }
    r->fixed_steps = job->hyperparams.max_steps > 0;
    if (r->fixed_steps)
        r->steps = job->hyperparams.max_steps;
    else if (r->samples > 0)
        r->steps = (long)ceil((double)r->samples * job->hyperparams.epochs / r->effective_batch);
    r->tokens = (double)r->steps * r->effective_batch * r->seq;
}

/* ---- throughput ---- */

/* Training FLOPs per token (docs/planner.md): matmuls 2 per weight per
 * token forward; backward computes input gradients (2) and, for trained
 * weights, weight gradients (2 more); attention scores and values add
 * 2 * layers * seq * heads * head_dim forward (causal average) and twice
 * that backward; checkpointing repeats the decoder's forward. */
static double flops_per_token(const plan_result *r, const plan_config *c)
{
    const model_shape *m = &r->model;
    double lm_head = (double)m->vocab * (double)m->hidden;
    double layer_mm = (double)r->params.linear;
    double attn = 2.0 * (double)m->layers * r->seq * (double)(m->heads * m->head_dim);
    double fwd = 2 * (layer_mm + lm_head) + attn;
    double bwd;
    if (c->method == METHOD_FULL) {
        bwd = 4 * (layer_mm + lm_head) + 2 * attn;
    } else {
        bwd = 2 * (layer_mm + lm_head) + 2 * attn + 6.0 * (double)c->mem.params_trainable;
    }
    double recompute = c->grad_ckpt ? 2 * layer_mm + attn : 0;
    return fwd + bwd + recompute;
}

/* The share of peak that survives parallelism, micro-batch size and the
 * method's extra work. */
static double efficiency(const plan_result *r, const plan_config *c)
{
    const plan_gpu *g = c->gpu;
    double tokens_per_gpu = (double)c->micro_batch * r->seq / c->tp;
    double e = tokens_per_gpu / (tokens_per_gpu + 512.0); /* small micro-batches underfill */
    bool multi_node = c->nodes > 1;
    if (c->dp > 1) {
        bool small_grads = c->method != METHOD_FULL;
        double dp_eff = small_grads ? (multi_node ? 0.95 : 0.98)
                                    : (multi_node ? 0.85 : g->nvlink ? 0.95 : 0.90);
        if (c->strategy == STRAT_ZERO3 || c->strategy == STRAT_FSDP)
            dp_eff *= multi_node ? 0.80 : g->nvlink ? 0.92 : 0.85;
        else if (c->strategy == STRAT_ZERO2)
            dp_eff *= 0.98;
        e *= dp_eff;
    }
    if (c->tp > 1) e *= g->nvlink ? 0.88 : 0.60;
    if (c->pp > 1) {
        double m = c->grad_accum;
        e *= m / (m + c->pp - 1) * 0.95;
    }
    if (c->method == METHOD_QLORA) e *= 0.70; /* dequantising every weight in every matmul */
    if (c->method == METHOD_DORA) e *= 0.80;  /* the weight norm each step */
    if (c->in.precision == PREC_FP32) e *= 0.5; /* TF32 tensor cores */
    if (!c->flash_attn) e *= 0.85;
    return e;
}

/* The part of its one GPU a job that may share it is given (the server's
 * scheduler: ceil(100 x planned memory / GPU memory) hundredths), or 1. */
static double gpu_part(const plan_result *r, const plan_config *c)
{
    if (!r->shared || c->gpus != 1 || !(c->mem.peak < c->gpu->memory)) return 1.0;
    return ceil(100.0 * c->mem.peak / c->gpu->memory) / 100.0;
}

/* Time and cost of c; a job that shares its GPU pays for its part of it. */
static void price(const plan_result *r, plan_config *c)
{
    c->flops_per_token = flops_per_token(r, c);
    c->efficiency = efficiency(r, c);
    double job_flops = c->gpus * c->gpu->tflops * 1e12 * c->gpu->mfu * c->efficiency;
    c->tokens_per_second = job_flops / c->flops_per_token;
    /* the spec's own resources may not split its effective batch evenly */
    double batch = (double)c->micro_batch * c->grad_accum * c->dp;
    c->step_seconds = batch * r->seq / c->tokens_per_second;
    long steps = r->steps > 0 ? r->steps : 1000;
    if (r->steps > 0 && !r->fixed_steps && (int)batch != r->effective_batch)
        steps = (long)ceil((double)r->steps * r->effective_batch / batch);
    c->seconds = r->steps > 0 ? steps * c->step_seconds : 0;
    c->gpu_hours = steps * c->step_seconds / 3600.0 * c->gpus * gpu_part(r, c);
    c->cost = c->gpu_hours * c->gpu->price_per_hour;
}

/* ---- candidates ---- */

/* Estimates already made in this plan. The GPU types share most
 * configurations and an estimate does not depend on the type (the planner
 * compares the figure with each type's memory), so each is replayed once.
 * Inputs start from est_input_defaults (zeroed, padding included): equal
 * inputs compare equal byte for byte. */
typedef struct plan_memo {
    est_input *in;
    est_result *out;
    size_t n, cap;
} plan_memo;

static void memo_estimate(plan_memo *m, const est_input *in, const est_calib *calib, est_result *out)
{
    for (size_t i = 0; i < m->n; i++)
        if (memcmp(&m->in[i], in, sizeof *in) == 0) {
            *out = m->out[i];
            return;
        }
    est_estimate(in, calib, out);
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->in = xrealloc(m->in, m->cap * sizeof *m->in);
        m->out = xrealloc(m->out, m->cap * sizeof *m->out);
    }
    m->in[m->n] = *in;
    m->out[m->n++] = *out;
}

typedef struct plan_search {
    const spec_job *job;
    const plan_options *opt;
    plan_result *r;
    const est_calib *calib;
    plan_memo *memo;
    bool gc_forced, gc_value;       /* the spec says on or off */
    bool flash;                     /* flash attention */
    spec_precision precision;
    spec_optimizer optimizer;
} plan_search;

/* Fills c's estimator input from the job and c's choices. */
static void config_input(const plan_search *s, plan_config *c)
{
    const spec_job *job = s->job;
    est_input *in = &c->in;
    est_input_defaults(in, &s->r->model);
    in->method = c->method;
    in->quant = c->quant;
    in->bits = c->bits;
    in->rank = job->lora.rank;
    in->targets = s->r->targets;
    in->lora_dropout = job->lora.dropout;
    in->batch = c->micro_batch;
    in->grad_accum = c->grad_accum > 0 ? c->grad_accum : 1;
    in->seq = s->r->seq;
    in->grad_ckpt = c->grad_ckpt;
    in->flash_attn = c->flash_attn;
    in->precision = s->precision;
    in->optimizer = s->optimizer;
    in->gpus = c->gpus;
    in->strategy = c->strategy;
    in->tensor_parallel = c->tp;
    in->pipeline_stages = c->pp;
    in->counter = EST_COUNTER_DEVICE;
}

/* Estimates c; true when it fits the GPU with the margin. */
static bool config_fits(const plan_search *s, plan_config *c)
{
    config_input(s, c);
    diag_list tmp;
    diag_list_init(&tmp);
    bool ok = est_input_resolve(&c->in, &tmp);
    diag_list_free(&tmp);
    if (!ok) return false;
    c->quant = c->in.quant;
    c->bits = c->in.bits;
    c->usable = c->gpu->memory * (1.0 - s->opt->margin);
    /* the replay holds at least what the terms of its largest phase add
     * up to (tests/plan/test_replay.c, within 2 %): a configuration whose
     * terms alone exceed the GPU is out without replaying it */
    est_terms(&c->in, s->calib, &c->mem);
    double terms = fmax(c->mem.phase[0], fmax(c->mem.phase[1], c->mem.phase[2])) - c->mem.weight_temp;
    if (0.98 * terms > c->usable) {
        c->fits = false;
        return false;
    }
    memo_estimate(s->memo, &c->in, s->calib, &c->mem);
    c->fits = c->mem.peak <= c->usable;
    return c->fits;
}

/* True when c finishes inside timeout.maxDuration (or either is unknown). */
static bool meets_deadline(const plan_result *r, const plan_config *c)
{
    return r->deadline <= 0 || r->steps <= 0 || c->seconds <= r->deadline;
}

/* a better than b under the objective (both fit). */
static bool better(const plan_search *s, const plan_config *a, const plan_config *b)
{
    bool a_in = meets_deadline(s->r, a), b_in = meets_deadline(s->r, b);
    if (a_in != b_in) return a_in;
    double ka = s->opt->objective == PLAN_FASTEST ? a->step_seconds : a->cost;
    double kb = s->opt->objective == PLAN_FASTEST ? b->step_seconds : b->cost;
    if (fabs(ka - kb) > 0.005 * fmax(ka, kb)) return ka < kb;
    if (a->gpus != b->gpus) return a->gpus < b->gpus; /* fewer GPUs to wait for */
    return a->step_seconds < b->step_seconds;
}

/* For fixed method, GPUs and parallel degrees: the fastest micro-batch /
 * checkpointing that fits. Checkpointing is only switched on when needed.
 * A job that shares its one GPU pays for its part of it, so there every
 * split that fits is priced and the best under the objective kept: a
 * smaller footprint (checkpointing, a smaller micro-batch) can cost less
 * although it runs longer. */
static bool best_batch_split(const plan_search *s, plan_config *c)
{
    int per_replica = s->r->effective_batch / c->dp;
    int gc_options[2] = {0, 1};
    int n_gc = 2;
    if (s->gc_forced) {
        gc_options[0] = s->gc_value;
        n_gc = 1;
    }
    bool every = s->r->shared && c->gpus == 1 && s->opt->objective != PLAN_FASTEST;
    plan_config best;
    bool found = false;
    for (int gi = 0; gi < n_gc; gi++) {
        for (int micro = per_replica; micro >= 1; micro--) {
            if (per_replica % micro) continue;
            c->micro_batch = micro;
            c->grad_accum = per_replica / micro;
            c->grad_ckpt = gc_options[gi];
            if (!config_fits(s, c)) continue;
            price(s->r, c);
            if (!every) return true;
            if (!found || better(s, c, &best)) best = *c;
            found = true;
        }
    }
    if (found) *c = best;
    return found;
}

static bool model_parallel_needed(const plan_search *s, spec_method method, const plan_gpu *g)
{
    /* the frozen or trained weights alone exceed one GPU: data parallelism
     * cannot help, ZeRO-3 or tensor / pipeline parallelism must split them */
    plan_config c = {.method = method, .gpu = g, .gpus = 1, .nodes = 1, .gpus_per_node = 1,
                     .strategy = STRAT_SINGLE, .tp = 1, .pp = 1, .dp = 1, .micro_batch = 1,
                     .grad_accum = 1, .grad_ckpt = true, .flash_attn = s->flash,
                     .quant = method == METHOD_QLORA ? QUANT_AUTO : QUANT_NONE,
                     .bits = s->job->quantization.bits};
    if (method == METHOD_QLORA && s->job->quantization.quant != QUANT_AUTO)
        c.quant = s->job->quantization.quant;
    config_input(s, &c);
    diag_list tmp;
    diag_list_init(&tmp);
    bool ok = est_input_resolve(&c.in, &tmp);
    diag_list_free(&tmp);
    if (!ok) return false;
    est_result m;
    est_terms(&c.in, s->calib, &m); /* the weights alone decide */
    return m.weights_quantised + m.weights_dense > g->memory * (1.0 - s->opt->margin) * 0.8;
}

/* Tries every strategy and parallel layout of n GPUs of type g. */
static void try_gpus(const plan_search *s, spec_method method, const plan_gpu *g, int n,
                     plan_config *best, bool *found)
{
    int per_node = g->per_node > 0 ? g->per_node : 8;
    int nodes = n <= per_node ? 1 : n / per_node;
    spec_strategy want = s->job->resources.strategy;
    bool mp = n > 1 && model_parallel_needed(s, method, g);
    static const spec_strategy dp_strats[] = {STRAT_DDP, STRAT_ZERO2, STRAT_ZERO3};
    for (int tp = 1; tp <= (mp ? per_node : 1) && tp <= n; tp *= 2) {
        for (int pp = 1; pp <= (mp ? 16 : 1) && tp * pp <= n; pp *= 2) {
            if (n % (tp * pp)) continue;
            int dp = n / (tp * pp);
            if (s->r->effective_batch % dp) continue;
            for (size_t k = 0; k < (n == 1 ? 1 : 3); k++) {
                spec_strategy st = n == 1 ? STRAT_SINGLE : dp_strats[k];
                if (dp == 1 && n > 1 && st != STRAT_DDP && st != STRAT_ZERO3) continue;
                if (st == STRAT_ZERO2 && method != METHOD_FULL) continue; /* no optimizer to shard */
                if (want != STRAT_AUTO && n > 1 && want != st &&
                    !(want == STRAT_FSDP && st == STRAT_ZERO3))
                    continue;
                plan_config c = {.method = method, .gpu = g, .gpus = n, .nodes = nodes,
                                 .gpus_per_node = n / nodes, .tp = tp, .pp = pp, .dp = dp,
                                 .strategy = want == STRAT_FSDP && st == STRAT_ZERO3 ? STRAT_FSDP : st,
                                 .flash_attn = s->flash, .bits = s->job->quantization.bits,
                                 .quant = method == METHOD_QLORA ? s->job->quantization.quant
                                                                 : QUANT_NONE};
                if (method == METHOD_QLORA && c.bits == 16) c.bits = 4;
                if (!best_batch_split(s, &c)) continue;
                if (!*found || better(s, &c, best)) {
                    *best = c;
                    *found = true;
                }
            }
        }
    }
}

/* The best configuration of one method on one GPU type, over GPU counts
 * 1, 2, 4, ... up to a node, then whole nodes. */
static bool best_on_gpu(const plan_search *s, spec_method method, const plan_gpu *g,
                        plan_config *best)
{
    bool found = false;
    int per_node = g->per_node > 0 ? g->per_node : 8;
    int limit = s->opt->max_gpus;
    if (g->available > 0 && g->available < limit) limit = g->available;
    for (int n = 1; n <= limit; n = n < per_node ? n * 2 : n + per_node * (n / per_node >= 8 ? n / per_node / 2 : 1)) {
        if (n > per_node && n % per_node) continue;
        try_gpus(s, method, g, n, best, &found);
        /* more GPUs only pay while they are needed to fit or to meet the deadline */
        if (found && s->opt->objective == PLAN_CHEAPEST &&
            meets_deadline(s->r, best) && n >= 2 * best->gpus)
            break;
    }
    return found;
}

static int n_methods(const spec_job *job, spec_method out[3])
{
    if (job->method != METHOD_AUTO) {
        out[0] = job->method;
        return 1;
    }
    if (job->quantization.bits == 4 || job->quantization.bits == 8) {
        out[0] = METHOD_QLORA;
        return 1;
    }
    out[0] = METHOD_LORA;
    out[1] = METHOD_QLORA;
    return 2;
}

static void search_all(const plan_search *s)
{
    plan_result *r = s->r;
    const plan_catalog *cat = s->opt->catalog;
    spec_method methods[3];
    int nm = n_methods(s->job, methods);
    r->options = xcalloc(cat->n * (size_t)nm, sizeof *r->options);
    for (int mi = 0; mi < nm; mi++) {
        for (size_t gi = 0; gi < cat->n; gi++) {
            plan_config c;
            if (!best_on_gpu(s, methods[mi], &cat->gpus[gi], &c)) continue;
            r->options[r->n_options++] = c;
            if (!r->found || better(s, &c, &r->chosen)) {
                r->chosen = c;
                r->found = true;
            }
        }
    }
    /* cheapest first */
    for (size_t i = 1; i < r->n_options; i++)
        for (size_t j = i; j > 0 && better(s, &r->options[j], &r->options[j - 1]); j--) {
            plan_config t = r->options[j];
            r->options[j] = r->options[j - 1];
            r->options[j - 1] = t;
        }
}

/* ---- the spec's own resources ---- */

static bool check_requested(const plan_search *s, diag_list *d)
{
    const spec_job *job = s->job;
    plan_result *r = s->r;
    if (!job->resources.given || (!job->resources.gpu_type && !job->resources.gpu_count))
        return true;
    const plan_gpu *g = r->found ? r->chosen.gpu : &s->opt->catalog->gpus[0];
    if (job->resources.gpu_type) {
        g = plan_catalog_find(s->opt->catalog, job->resources.gpu_type);
        if (!g) {
            const char *names[32];
            size_t n = 0;
            for (size_t i = 0; i < s->opt->catalog->n && n < 32; i++)
                names[n++] = s->opt->catalog->gpus[i].name;
            diag *x = diag_add(d, DIAG_ERROR, job->file, job->resources.pos_gpu_type.line,
                               job->resources.pos_gpu_type.col, "spec.resources.gpu.type",
                               "unknown GPU type");
            diag_set_found(x, "%s", job->resources.gpu_type);
            const char *sug = str_suggest(job->resources.gpu_type, names, n);
            sb list;
            sb_init(&list);
            for (size_t i = 0; i < n; i++) sb_printf(&list, "%s%s", i ? ", " : "", names[i]);
            if (sug) diag_set_suggestion(x, "did you mean %s? (known: %s)", sug, sb_str(&list));
            else diag_set_suggestion(x, "use one of %s, or describe it in a Cluster file (--cluster)",
                                     sb_str(&list));
            sb_free(&list);
            return false;
        }
    }
    int per_node = job->resources.gpu_count > 0 ? job->resources.gpu_count : 1;
    int nodes = job->resources.nodes > 0 ? job->resources.nodes : 1;
    int n = per_node * nodes;
    spec_method method = job->method != METHOD_AUTO ? job->method
                         : r->found                ? r->chosen.method
                                                   : METHOD_LORA;
    plan_config c = {.method = method, .gpu = g, .gpus = n, .nodes = nodes,
                     .gpus_per_node = per_node, .tp = 1, .pp = 1, .dp = n,
                     .strategy = n == 1 ? STRAT_SINGLE
                                 : job->resources.strategy != STRAT_AUTO ? job->resources.strategy
                                                                         : STRAT_DDP,
                     .flash_attn = s->flash, .bits = job->quantization.bits,
                     .quant = method == METHOD_QLORA ? job->quantization.quant : QUANT_NONE};
    if (method == METHOD_QLORA && c.bits == 16) c.bits = 4;
    r->has_requested = true;
    /* first as written: micro-batch batchSize (the largest divisor of the
     * per-replica share not above it, so the effective batch stays), the
     * spec's checkpointing (off when auto) */
    int per_replica = r->effective_batch % n == 0 ? r->effective_batch / n : 0;
    c.micro_batch = job->training_data.batch_size;
    c.grad_accum = job->training_data.gradient_accumulation;
    if (per_replica) {
        c.micro_batch = c.micro_batch < per_replica ? c.micro_batch : per_replica;
        while (per_replica % c.micro_batch) c.micro_batch--;
        c.grad_accum = per_replica / c.micro_batch;
    }
    c.grad_ckpt = s->gc_forced ? s->gc_value : false;
    bool as_written = config_fits(s, &c);
    price(r, &c);
    r->requested = c;
    if (as_written) return true;
    /* then with lathe's micro-batch and checkpointing on the same GPUs */
    plan_config adj = c;
    if (per_replica && best_batch_split(s, &adj)) r->requested = adj;
    return true;
}

/* ---- explanations ---- */

static const char *method_words(spec_method m)
{
    switch (m) {
    case METHOD_LORA: return "LoRA (16-bit base)";
    case METHOD_QLORA: return "QLoRA (quantised base)";
    case METHOD_DORA: return "DoRA";
    case METHOD_FULL: return "full fine-tuning";
    default: return "?";
    }
}

static void explain(const plan_search *s)
{
    plan_result *r = s->r;
    const spec_job *job = s->job;
    char pc[32];
    str_thousands(pc, sizeof pc, r->params.total);
    add_reason(r, "model: %s, %s parameters (%s)", r->model.name ? r->model.name : "?", pc,
               r->model.origin_text ? r->model.origin_text : "");
    if (!r->found) return;
    const plan_config *c = &r->chosen;
    char gib[32], use[32];
    units_format_bytes(gib, sizeof gib, c->mem.peak);
    units_format_bytes(use, sizeof use, c->usable);
    if (job->method == METHOD_AUTO) {
        const plan_config *other = NULL;
        for (size_t i = 0; i < r->n_options; i++)
            if (r->options[i].method != c->method) {
                other = &r->options[i];
                break;
            }
        if (other)
            add_reason(r, "method: %s, because the best %s plan costs %.2f against %.2f for %s "
                          "(%d x %s)",
                       method_words(c->method), method_words(c->method), c->cost, other->cost,
                       method_words(other->method), other->gpus, other->gpu->name);
        else
            add_reason(r, "method: %s, the only method that fits", method_words(c->method));
    } else {
        add_reason(r, "method: %s, as the spec says", method_words(c->method));
    }
    add_reason(r, "GPUs: %d x %s, %s per GPU of %s usable (%.0f%% margin kept free)", c->gpus,
               c->gpu->name, gib, use, s->opt->margin * 100);
    for (size_t i = 0; i < r->n_options && i < 3; i++) {
        const plan_config *o = &r->options[i];
        if (o->gpu == c->gpu && o->method == c->method) continue;
        add_reason(r, "instead of %d x %s (%s): %.2f vs %.2f %s", o->gpus, o->gpu->name,
                   method_words(o->method), o->cost, c->cost,
                   s->opt->objective == PLAN_FASTEST ? "(slower)" : "(dearer)");
    }
    if (c->gpus > 1)
        add_reason(r, "parallelism: %s over %d GPUs (data %d x tensor %d x pipeline %d) on %d node%s",
                   spec_strategy_name(c->strategy), c->gpus, c->dp, c->tp, c->pp, c->nodes,
                   c->nodes > 1 ? "s" : "");
    int batch = c->micro_batch * c->grad_accum * c->dp;
    add_reason(r, "batch: micro-batch %d x accumulation %d x %d replica%s = %d, %s "
                  "(batchSize %d x gradientAccumulation %d)",
               c->micro_batch, c->grad_accum, c->dp, c->dp > 1 ? "s" : "", batch,
               batch == r->effective_batch ? "the spec's effective batch" : "NOT the spec's effective batch",
               job->training_data.batch_size, job->training_data.gradient_accumulation);
    if (s->gc_forced)
        add_reason(r, "gradient checkpointing: %s, as the spec says", c->grad_ckpt ? "on" : "off");
    else
        add_reason(r, "gradient checkpointing: %s", c->grad_ckpt
                   ? "on, because the activations of a micro-batch do not fit without it (it costs about a third more compute)"
                   : "off: the activations fit, so no recomputation");
    if (r->steps > 0) {
        char t[32];
        units_format_duration(t, sizeof t, c->seconds);
        add_reason(r, "time: %ld steps x %.1f s = %s at %.0f tokens/s (%.2g FLOPs per token, "
                      "%.0f%% of %.0f TFLOP/s per GPU)",
                   r->steps, c->step_seconds, t, c->tokens_per_second, c->flops_per_token,
                   c->gpu->mfu * c->efficiency * 100, c->gpu->tflops);
    } else {
        add_reason(r, "time: unknown, the spec gives neither trainingData.samples nor maxSteps and "
                      "the dataset is not readable here; cost is shown per 1,000 steps");
    }
    if (r->deadline > 0 && c->seconds > r->deadline) {
        char t[32], need[32];
        units_format_duration(t, sizeof t, r->deadline);
        units_format_duration(need, sizeof need, c->seconds);
        add_reason(r, "deadline: no plan of at most %d GPUs finishes inside timeout.maxDuration %s; "
                      "this one needs %s: raise maxDuration or allow more GPUs (--max-gpus)",
                   s->opt->max_gpus, t, need);
    } else if (r->deadline > 0 && r->steps > 0) {
        char t[32];
        units_format_duration(t, sizeof t, r->deadline);
        add_reason(r, "deadline: finishes inside timeout.maxDuration %s", t);
    }
}

static void explain_requested(const plan_search *s)
{
    plan_result *r = s->r;
    const spec_job *job = s->job;
    if (!r->has_requested) return;
    const plan_config *q = &r->requested;
    char mine[32], use[32];
    units_format_bytes(mine, sizeof mine, q->mem.peak);
    units_format_bytes(use, sizeof use, q->usable);
    sb msg;
    sb_init(&msg);
    sb_printf(&msg, "your resources: %d x %s", q->gpus, q->gpu->name);
    if (job->resources.gpu_memory_estimate > 0) {
        char est[32];
        units_format_bytes(est, sizeof est, job->resources.gpu_memory_estimate);
        sb_printf(&msg, " with memoryEstimate %s", est);
    }
    if (q->fits) {
        sb_printf(&msg, ": fits, lathe estimates %s per GPU of %s usable", mine, use);
        if (q->micro_batch != job->training_data.batch_size || q->grad_ckpt)
            sb_printf(&msg, " with micro-batch %d x accumulation %d%s", q->micro_batch,
                      q->grad_accum, q->grad_ckpt ? " and gradient checkpointing" : "");
        if (!meets_deadline(r, q)) {
            char need[32], t[32];
            units_format_duration(need, sizeof need, q->seconds);
            units_format_duration(t, sizeof t, r->deadline);
            sb_printf(&msg, "; but it needs %s, beyond timeout.maxDuration %s: the job would time out",
                      need, t);
        }
    } else {
        sb_printf(&msg, ": does NOT fit, lathe estimates %s per GPU against %s usable even at "
                        "micro-batch %d with gradient checkpointing",
                  mine, use, q->micro_batch);
    }
    int batch = q->micro_batch * q->grad_accum * q->dp;
    if (batch != r->effective_batch)
        sb_printf(&msg, "; the effective batch becomes %d, since %d does not split over %d GPUs",
                  batch, r->effective_batch, q->dp);
    if (job->resources.gpu_memory_estimate > 0) {
        double ratio = q->mem.peak / job->resources.gpu_memory_estimate;
        sb_printf(&msg, "; the spec's estimate is %.0f%% %s than lathe's", fabs(1 - 1 / ratio) * 100,
                  ratio > 1 ? "lower" : "higher");
    }
    add_reason(r, "%s", sb_str(&msg));
    sb_free(&msg);
}

/* ---- entry ---- */

static bool resolve_model(const spec_job *job, plan_result *r, diag_list *d)
{
    diag_list tmp;
    diag_list_init(&tmp);
    bool ok = model_resolve(job->base_model.path, job->base_model.name, job->base_model.parameters,
                            &r->model, &tmp);
    spec_pos pos = job->base_model.pos_name.line ? job->base_model.pos_name : job->base_model.pos_path;
    rehome(&tmp, d, job->file, pos, "spec.baseModel");
    if (ok) model_count_params(&r->model, &r->params);
    return ok;
}

static void search_settings(plan_search *s)
{
    const spec_job *job = s->job;
    s->gc_forced = job->hyperparams.gradient_checkpointing != TOGGLE_AUTO;
    s->gc_value = job->hyperparams.gradient_checkpointing == TOGGLE_ON;
    s->flash = job->hyperparams.flash_attention != TOGGLE_OFF;
    s->precision = job->hyperparams.precision == PREC_AUTO ? PREC_BF16 : job->hyperparams.precision;
    s->optimizer = job->hyperparams.optimizer == OPT_AUTO ? OPT_ADAMW : job->hyperparams.optimizer;
}

int plan_job(const spec_job *job, const plan_options *opt_in, plan_result *out, diag_list *d)
{
    memset(out, 0, sizeof *out);
    out->job_name = xstrdup(job->name ? job->name : "job");
    out->file = job->file ? xstrdup(job->file) : NULL;
    out->shared = job->resources.gpu_shared;
    plan_options opt = *opt_in;
    plan_catalog builtin = {0};
    if (!opt.catalog) {
        plan_catalog_builtin(&builtin);
        opt.catalog = &builtin;
    }
    plan_memo memo = {0};
    plan_search s = {.job = job, .opt = &opt, .r = out,
                     .calib = opt.calib ? opt.calib : &est_calib_default, .memo = &memo};
    search_settings(&s);
    int rc = LT_EXIT_OK;
    size_t errors = d->errors;
    if (!resolve_model(job, out, d)) {
        rc = LT_EXIT_INVALID;
        goto done;
    }
    out->targets = job->method == METHOD_FULL ? 0 : plan_check_targets(job, &out->model, d);
    if (d->errors > errors) {
        rc = LT_EXIT_INVALID;
        goto done;
    }
    plan_run_size(job, out);
    int n_targets = (int)job->lora.n_target_modules;
    est_seed_formula((double)out->params.total, job->lora.rank, n_targets,
                     job->method == METHOD_FULL, job->training_data.batch_size, out->seq,
                     out->model.hidden, out->model.layers, &out->seed);
    search_all(&s);
    if (!check_requested(&s, d)) {
        rc = LT_EXIT_INVALID;
        goto done;
    }
    if (out->has_requested && out->requested.fits && meets_deadline(out, &out->requested)) {
        /* the spec's own choice runs; lathe's best stays among the options */
        plan_config mine = out->chosen;
        bool had = out->found;
        out->chosen = out->requested;
        out->found = true;
        explain(&s);
        if (had && mine.cost < out->requested.cost * 0.95)
            add_reason(out, "lathe would choose %d x %s (%s) for %.2f instead of %.2f",
                       mine.gpus, mine.gpu->name, method_words(mine.method), mine.cost,
                       out->requested.cost);
    } else {
        explain(&s);
    }
    explain_requested(&s);
    if (!out->found) rc = LT_EXIT_NOFIT;
done:
    free(memo.in);
    free(memo.out);
    /* configs point at catalogue entries: keep the catalogue alive with the result */
    if (builtin.gpus) {
        if (rc == LT_EXIT_OK || rc == LT_EXIT_NOFIT) {
            out->owned_catalog = xmalloc(sizeof *out->owned_catalog);
            *out->owned_catalog = builtin;
        } else {
            plan_catalog_free(&builtin);
        }
    }
    return rc;
}

void plan_result_free(plan_result *r)
{
    free(r->job_name);
    free(r->file);
    model_shape_free(&r->model);
    free(r->samples_origin);
    free(r->options);
    for (size_t i = 0; i < r->n_reasons; i++) free(r->reasons[i]);
    free(r->reasons);
    if (r->owned_catalog) {
        plan_catalog_free(r->owned_catalog);
        free(r->owned_catalog);
    }
    memset(r, 0, sizeof *r);
}
