/* spec_enum.c: the names of every enumerated value in a spec (method,
 * quantisation, precision, optimizer, strategy, data format, node state, LR
 * scheduler, preemption policy), as constant tables: the first spelling of
 * a value is canonical, later ones are accepted aliases. The public
 * spec_*_name / spec_*_parse functions and the decoder both read them. */
#include "spec_internal.h"

#include <stdio.h>
#include <string.h>

#define ENUM_DEF(var, table) const spec_enum_def var = {table, sizeof table / sizeof table[0]}

static const spec_enum_entry method_tab[] = {
    {"lora", METHOD_LORA, false},  {"qlora", METHOD_QLORA, false}, {"dora", METHOD_DORA, false},
    {"full", METHOD_FULL, false},  {"auto", METHOD_AUTO, false},
};
ENUM_DEF(spec_enum_method, method_tab);

static const spec_enum_entry quant_tab[] = {
    {"auto", QUANT_AUTO, false},   {"none", QUANT_NONE, false},   {"nf4", QUANT_NF4, false},
    {"nf4-dq", QUANT_NF4_DQ, false}, {"int8", QUANT_INT8, false}, {"gptq4", QUANT_GPTQ4, false},
    {"awq4", QUANT_AWQ4, false},   {"nf4dq", QUANT_NF4_DQ, true}, {"nf4_dq", QUANT_NF4_DQ, true},
    {"gptq", QUANT_GPTQ4, true},   {"awq", QUANT_AWQ4, true},     {"llm.int8", QUANT_INT8, true},
};
ENUM_DEF(spec_enum_quant, quant_tab);

static const spec_enum_entry precision_tab[] = {
    {"auto", PREC_AUTO, false}, {"bf16", PREC_BF16, false},     {"fp16", PREC_FP16, false},
    {"amp", PREC_AMP, false},   {"fp32", PREC_FP32, false},     {"bfloat16", PREC_BF16, true},
    {"float16", PREC_FP16, true}, {"float32", PREC_FP32, true},
};
ENUM_DEF(spec_enum_precision, precision_tab);

static const spec_enum_entry optimizer_tab[] = {
    {"auto", OPT_AUTO, false},
    {"adamw", OPT_ADAMW, false},
    {"adamw8bit", OPT_ADAMW8BIT, false},
    {"paged_adamw", OPT_PAGED_ADAMW, false},
    {"paged_adamw8bit", OPT_PAGED_ADAMW8BIT, false},
    {"sgd", OPT_SGD, false},
    {"adamw_torch", OPT_ADAMW, true},         /* Hugging Face spellings */
    {"adamw_8bit", OPT_ADAMW8BIT, true},
    {"adamw_bnb_8bit", OPT_ADAMW8BIT, true},
    {"paged_adamw_32bit", OPT_PAGED_ADAMW, true},
    {"paged_adamw_8bit", OPT_PAGED_ADAMW8BIT, true},
};
ENUM_DEF(spec_enum_optimizer, optimizer_tab);

static const spec_enum_entry strategy_tab[] = {
    {"auto", STRAT_AUTO, false},   {"single", STRAT_SINGLE, false}, {"ddp", STRAT_DDP, false},
    {"fsdp", STRAT_FSDP, false},   {"zero2", STRAT_ZERO2, false},   {"zero3", STRAT_ZERO3, false},
    {"zero-2", STRAT_ZERO2, true}, {"zero-3", STRAT_ZERO3, true},
};
ENUM_DEF(spec_enum_strategy, strategy_tab);

static const spec_enum_entry data_format_tab[] = {
    {"auto", SPEC_DATA_AUTO, false},
    {"alpaca", SPEC_DATA_ALPACA, false},
    {"messages", SPEC_DATA_MESSAGES, false},
    {"text", SPEC_DATA_TEXT, false},
};
ENUM_DEF(spec_enum_data_format, data_format_tab);

static const spec_enum_entry node_state_tab[] = {
    {"ready", NODE_READY, false},
    {"draining", NODE_DRAINING, false},
    {"down", NODE_DOWN, false},
};
ENUM_DEF(spec_enum_node_state, node_state_tab);

/* Stored as text (spec_job.hyperparams.lr_scheduler); the values only
 * number the names. */
static const spec_enum_entry lr_scheduler_tab[] = {
    {"cosine", 0, false},
    {"linear", 1, false},
    {"constant", 2, false},
};
ENUM_DEF(spec_enum_lr_scheduler, lr_scheduler_tab);

/* Kubernetes PriorityClass preemptionPolicy; 1 = preempt lower priority. */
static const spec_enum_entry preemption_tab[] = {
    {"PreemptLowerPriority", 1, false},
    {"Never", 0, false},
};
ENUM_DEF(spec_enum_preemption, preemption_tab);

bool spec_enum_lookup(const spec_enum_def *d, const char *s, int *out)
{
    for (size_t i = 0; i < d->n; i++)
        if (str_ieq(d->e[i].name, s)) {
            *out = d->e[i].value;
            return true;
        }
    return false;
}

const char *spec_enum_name(const spec_enum_def *d, int v)
{
    for (size_t i = 0; i < d->n; i++)
        if (!d->e[i].alias && d->e[i].value == v) return d->e[i].name;
    return "?";
}

void spec_enum_list(const spec_enum_def *d, sb *out)
{
    size_t total = 0, k = 0;
    for (size_t i = 0; i < d->n; i++) total += !d->e[i].alias;
    for (size_t i = 0; i < d->n; i++) {
        if (d->e[i].alias) continue;
        if (k) sb_puts(out, k + 1 == total ? " or " : ", ");
        sb_puts(out, d->e[i].name);
        k++;
    }
}

const char *spec_enum_suggest(const spec_enum_def *d, const char *s)
{
    const char *names[32];
    size_t n = 0;
    for (size_t i = 0; i < d->n && n < 32; i++) names[n++] = d->e[i].name;
    const char *best = str_suggest(s, names, n);
    if (!best) return NULL;
    int v = 0;
    spec_enum_lookup(d, best, &v);
    return spec_enum_name(d, v);
}

/* ---- the public names and parsers of spec.h ---- */
#define ENUM_API(type, prefix, def)                                                             \
    const char *prefix##_name(type v) { return spec_enum_name(&def, (int)v); }                  \
    bool prefix##_parse(const char *s, type *out)                                               \
    {                                                                                           \
        int v;                                                                                  \
        if (!s || !spec_enum_lookup(&def, s, &v)) return false;                                 \
        *out = (type)v;                                                                         \
        return true;                                                                            \
    }

ENUM_API(spec_method, spec_method, spec_enum_method)
ENUM_API(spec_quant, spec_quant, spec_enum_quant)
ENUM_API(spec_precision, spec_precision, spec_enum_precision)
ENUM_API(spec_optimizer, spec_optimizer, spec_enum_optimizer)
ENUM_API(spec_strategy, spec_strategy, spec_enum_strategy)
