/* optim.c: AdamW with decoupled weight decay (Loshchilov & Hutter, 2019),
 * as torch.optim.AdamW computes it; the learning-rate schedules of
 * transformers (get_cosine_schedule_with_warmup,
 * get_linear_schedule_with_warmup, constant with warmup); clipping by the
 * global L2 norm (torch.nn.utils.clip_grad_norm_). */
#include "train.h"

#include <math.h>
#include <string.h>

void tr_optim_defaults(tr_optim_opts *o)
{
    memset(o, 0, sizeof *o);
    o->lr = 2e-4;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 0.0;
    o->max_grad_norm = 1.0;
    o->warmup_steps = 0;
    o->schedule = TR_SCHED_COSINE;
}

static const char *const sched_names[] = {"cosine", "linear", "constant"};

bool tr_schedule_parse(const char *s, tr_schedule *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, sched_names[i]) == 0) {
            *out = (tr_schedule)i;
            return true;
        }
    return false;
}

const char *tr_schedule_name(tr_schedule s)
{
    return sched_names[s];
}

double tr_lr_at(const tr_optim_opts *o, long step, long total)
{
    if (step < o->warmup_steps) return o->lr * (double)step / (double)o->warmup_steps;
    if (o->schedule == TR_SCHED_CONSTANT) return o->lr;
    long span = total - o->warmup_steps;
    if (span <= 0) return o->lr;
    double progress = (double)(step - o->warmup_steps) / (double)span;
    if (o->schedule == TR_SCHED_LINEAR) return o->lr * fmax(0.0, 1.0 - progress);
    return o->lr * fmax(0.0, 0.5 * (1.0 + cos(M_PI * progress)));
}

double tr_grad_norm(const float *g, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    return sqrt(s);
}

void tr_adamw_step(const tr_optim_opts *o, const tr_param *params, size_t n_params, float *p,
                   const float *g, float *m, float *v, double lr, long t)
{
    double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    for (size_t k = 0; k < n_params; k++) {
        const tr_param *pr = &params[k];
        float decay = pr->decay ? (float)(1.0 - lr * o->weight_decay) : 1.0f;
        size_t off = pr->offset, n = pr->numel;
#pragma omp parallel for schedule(static)
        for (size_t i = off; i < off + n; i++) {
            p[i] *= decay;
            m[i] = b1 * m[i] + (1.0f - b1) * g[i];
            v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
            float denom = sqrtf(v[i]) / bc2_sqrt + eps;
            p[i] -= step_size * m[i] / denom;
        }
    }
}
