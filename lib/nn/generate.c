/* generate.c: text generation with the KV cache: greedy (temperature 0),
 * temperature sampling and nucleus (top-p) sampling. */
#include "nn/nn.h"

#include <math.h>
#include <stdlib.h>

typedef struct prob_idx {
    float p;
    int i;
} prob_idx;

static int prob_desc(const void *a, const void *b)
{
    const prob_idx *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->i - y->i;
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* The nucleus: the tokens in order of probability (p = weight / sum,
 * ties by id), as many as it takes for their mass (summed in that order)
 * to reach top_p, into pi; returns how many, *mass their mass. Sorting all
 * V tokens costs ~15 ms a row at V = 151,936, so only the tokens with p at
 * or above a threshold are sorted, the threshold divided by 64 until
 * their mass reaches top_p or every token is in: they are the first of the
 * full order, so the count, the mass and the pick are the same. */
static int nucleus(prob_idx *pi, const float *w, double sum, int V, float top_p, double *mass)
{
    float t = (float)(1.0 / sum) * 1e-3f; /* the most likely token's weight is 1 */
    for (;;) {
        int n = 0;
        for (int i = 0; i < V; i++) {
            float p = (float)(w[i] / sum);
            if (p >= t) pi[n++] = (prob_idx){p, i};
        }
        qsort(pi, (size_t)n, sizeof *pi, prob_desc);
        double m = 0;
        int k = 0;
        while (k < n && m < top_p) m += pi[k++].p;
        if (m >= top_p || n == V) {
            *mass = m;
            return k;
        }
        t = t > 1e-30f ? t / 64 : 0.0f; /* 0: every token */
    }
}

int tr_sample(float *logits, int V, const tr_sample_opts *o, tr_rng *rng)
{
    if (o->temperature <= 0) return argmax(logits, V);
    float mx = logits[argmax(logits, V)];
    double sum = 0;
    for (int i = 0; i < V; i++) {
        logits[i] = expf((logits[i] - mx) / o->temperature);
        sum += logits[i];
    }
    double u = (double)(tr_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    if (o->top_p <= 0 || o->top_p >= 1) {
        double acc = 0, target = u * sum;
        for (int i = 0; i < V; i++) {
            acc += logits[i];
            if (acc > target) return i;
        }
        return V - 1;
    }
    /* nucleus: the smallest set of most likely tokens whose mass reaches top_p */
    prob_idx *pi = xmalloc((size_t)V * sizeof *pi);
    double mass;
    int n = nucleus(pi, logits, sum, V, o->top_p, &mass);
    double acc = 0, target = u * mass;
    int pick = pi[n - 1].i;
    for (int i = 0; i < n; i++) {
        acc += pi[i].p;
        if (acc > target) {
            pick = pi[i].i;
            break;
        }
    }
    free(pi);
    return pick;
}

int tr_generate(tr_model *m, const int32_t *prompt, int n_prompt, const tr_sample_opts *o,
                int32_t *out, void (*on_token)(int32_t id, void *ud), void *ud)
{
    if (n_prompt <= 0 || o->max_new <= 0) return 0;
    tr_kv_cache c;
    tr_kv_cache_init(&c, m, n_prompt + o->max_new);
    float *logits = xmalloc((size_t)m->cfg.vocab * sizeof(float));
    tr_rng rng;
    tr_rng_seed(&rng, o->seed);
    int n = 0;
    bool ok = tr_model_decode(m, &c, prompt, n_prompt, logits);
    while (ok && n < o->max_new) {
        int32_t id = tr_sample(logits, m->cfg.vocab, o, &rng);
        out[n++] = id;
        if (on_token) on_token(id, ud);
        if (id == o->eos_id || n == o->max_new) break;
        ok = tr_model_decode(m, &c, &id, 1, logits);
    }
    free(logits);
    tr_kv_cache_free(&c);
    return n;
}
