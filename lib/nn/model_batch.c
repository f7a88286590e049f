/* model_batch.c: the inference forward pass over many sequences at once
 * (tr_model_forward_batch), what serving's steps and tr_model_decode run.
 *
 * A step holds N rows: the new tokens of every sequence, the sequences
 * ordered by adapter so the rows sharing one are contiguous (groups). One
 * layer (x: [N, D] residual stream):
 *   ln = rmsnorm(x); q[N,qd], k[N,kvd], v[N,kvd] = proj(ln), each ONE
 *   product over all N rows plus, on each group's rows, its adapter's
 *   scale * (ln_g A^T) B^T; (Qwen3: per-head rmsnorm); rope at each row's
 *   position; k, v rows stored in the sequence's KV blocks; attention per
 *   row and kv head over the row's sequence's keys 0..pos, read in place
 *   from the blocks; x2 = x + o_proj(ao); h = silu(gate(rmsnorm(x2))) *
 *   up(...); x = x2 + down(h).
 * Then the final norm and lm_head for the rows that want logits, in one
 * product.
 *
 * Exactness: every operation gives a row the same bits whatever the other
 * rows: the base products are batch invariant (the backend's promise,
 * nn.h); norms, rope and the MLP are per row; the LoRA deltas (lora_hidden,
 * lora_out) and attention (attend_heads) are computed here row by row in a
 * fixed order: dot products with eight partial sums, the softmax as ops.c's
 * softmax_causal_row, the values summed key by key. So a sequence gives the
 * same logits alone or in a batch of 32, and whether its prompt ran in one
 * step or in chunks.
 */
#include "nn/nn_internal.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* One group's LoRA of one projection: A [r, in], B [out, r]; a NULL: none. */
typedef struct lora_ref {
    const float *a, *b;
    int r;
    float scale;
} lora_ref;

/* The workspace, carved from one block; its capacities only grow. */
struct tr_bws {
    int rows, seqs, len, threads, rmax; /* capacities */
    float *mem;
    float *x, *ln, *q, *k, *v, *ao, *x2; /* [rows, D / qd / kvd] */
    float *g, *u, *h;                    /* [rows, F] */
    float *rstd;                         /* [rows * Hq] */
    float *lh;                           /* [rows, rmax] LoRA hidden */
    float *cosv, *sinv;                  /* [rows, hd/2] */
    float *xl, *rstdl;                   /* [seqs, D], [seqs] rows for the lm_head */
    float *p;                            /* [threads, group, len + 1] attention scratch */
    int *imem;
    int *row_seq, *row_pos, *row_grp;    /* [rows] */
    int *order, *seq_row0;               /* [seqs] */
    int *grp_row0, *grp_rows;            /* [seqs] */
    const tr_adapter **grp_adapter;      /* [seqs] */
    lora_ref *grp_lora;                  /* [seqs] the groups' LoRA of one projection */
    int ngroups;
};

/* ---------------------------------------------------------------- workspace */

/* Floats of the workspace for its capacities; with base, places the buffers. */
static size_t carve(struct tr_bws *w, const tr_config *c, float *base)
{
    size_t R = (size_t)w->rows, D = c->dim, F = c->hidden, hd = c->head_dim;
    size_t qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd;
    carver cv = {base, 0}, *at = &cv;
    float *x = nn_take(at, R * D), *ln = nn_take(at, R * D), *q = nn_take(at, R * qd);
    float *k = nn_take(at, R * kvd), *v = nn_take(at, R * kvd), *ao = nn_take(at, R * qd);
    float *x2 = nn_take(at, R * D), *g = nn_take(at, R * F), *u = nn_take(at, R * F);
    float *h = nn_take(at, R * F), *rstd = nn_take(at, R * (size_t)c->n_heads);
    float *lh = nn_take(at, R * (size_t)w->rmax), *cosv = nn_take(at, R * (hd / 2));
    float *sinv = nn_take(at, R * (hd / 2)), *xl = nn_take(at, (size_t)w->seqs * D);
    float *rstdl = nn_take(at, (size_t)w->seqs);
    float *p = nn_take(at, (size_t)w->threads * (w->len + 1) * (c->n_heads / c->n_kv_heads));
    if (base) {
        w->x = x; w->ln = ln; w->q = q; w->k = k; w->v = v; w->ao = ao; w->x2 = x2;
        w->g = g; w->u = u; w->h = h; w->rstd = rstd; w->lh = lh; w->cosv = cosv;
        w->sinv = sinv; w->xl = xl; w->rstdl = rstdl; w->p = p;
    }
    return cv.used;
}

void tr_batch_ws_free(tr_model *m)
{
    if (!m->bws) return;
    free(m->bws->mem);
    free(m->bws->imem);
    free(m->bws->grp_adapter);
    free(m->bws->grp_lora);
    free(m->bws);
    m->bws = NULL;
}

static int imax(int a, int b)
{
    return a > b ? a : b;
}

static struct tr_bws *bws_get(tr_model *m, int rows, int seqs, int len, int rmax)
{
    int threads = omp_get_max_threads();
    struct tr_bws *w = m->bws;
    if (w && w->rows >= rows && w->seqs >= seqs && w->len >= len && w->threads >= threads &&
        w->rmax >= rmax)
        return w;
    struct tr_bws nw = {0};
    nw.rows = imax(imax(rows, 1), w ? w->rows : 0);
    nw.seqs = imax(imax(seqs, 1), w ? w->seqs : 0);
    nw.len = imax(imax(len, 1), w ? w->len : 0);
    nw.threads = imax(threads, w ? w->threads : 0);
    nw.rmax = imax(imax(rmax, 1), w ? w->rmax : 0);
    tr_batch_ws_free(m);
    w = xmalloc(sizeof *w);
    *w = nw;
    size_t n = carve(w, &m->cfg, NULL);
    w->mem = xmalloc((n + 16) * sizeof(float));
    carve(w, &m->cfg, w->mem);
    w->imem = xmalloc(((size_t)3 * w->rows + (size_t)4 * w->seqs) * sizeof(int));
    w->row_seq = w->imem;
    w->row_pos = w->row_seq + w->rows;
    w->row_grp = w->row_pos + w->rows;
    w->order = w->row_grp + w->rows;
    w->seq_row0 = w->order + w->seqs;
    w->grp_row0 = w->seq_row0 + w->seqs;
    w->grp_rows = w->grp_row0 + w->seqs;
    w->grp_adapter = xmalloc((size_t)w->seqs * sizeof *w->grp_adapter);
    w->grp_lora = xmalloc((size_t)w->seqs * sizeof *w->grp_lora);
    m->bws = w;
    return w;
}

/* Largest LoRA rank of the model's own layers. */
static int model_rmax(const tr_model *m)
{
    int r = 0;
    for (int p = 0; p < TR_NPROJ && m->layers; p++) r = imax(r, m->layers[0].proj[p].r);
    return r;
}

void tr_model_batch_reserve(tr_model *m, int rows, int seqs, int max_len)
{
    bws_get(m, rows, seqs, max_len, model_rmax(m));
}

/* ---------------------------------------------------------------- vectors */

/* Eight lanes of floats (GCC vector extensions: SSE2 pairs, or one AVX2
 * register in the kernels' avx2 clones on x86-64, SIMD_CLONES; no FMA
 * either way, so every clone gives the same bits). v8u: the same, read from
 * any float address. */
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));
#if defined(__x86_64__)
#define SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SIMD_CLONES
#endif

static inline float hsum8(const v8 *v)
{
    const float *a = (const float *)v;
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/* a . b in a fixed order: eight partial sums, summed pairwise, then the tail. */
static inline float dot(const float *a, const float *b, int n)
{
    v8 acc = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8) acc += *(const v8u *)(a + i) * *(const v8u *)(b + i);
    float s = hsum8(&acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y[n] += w * x[n] */
static inline void axpy(float *y, float w, const float *x, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) *(v8u *)(y + i) += w * *(const v8u *)(x + i);
    for (; i < n; i++) y[i] += w * x[i];
}

/* ---------------------------------------------------------------- projections */

/* lh[r] = A x for one row: r dot products of length in. */
SIMD_CLONES
static void lora_hidden(float *lh, const float *x, const float *A, int r, int in)
{
    for (int k = 0; k < r; k++) lh[k] = dot(x, A + (size_t)k * in, in);
}

/* y[o] += scale (B lh)[o] for o in o0..o1 of one row. */
SIMD_CLONES
static void lora_out(float *y, const float *lh, const float *B, int r, int o0, int o1, float scale)
{
    for (int o = o0; o < o1; o++) y[o] += scale * dot(lh, B + (size_t)o * r, r);
}

#define LORA_COLS 256 /* output columns of one LoRA task */

/* y[N,out] = x W^T + b (one product over every row), then on each group's
 * rows its LoRA delta scale (x A^T) B^T, computed here row by row in a fixed
 * order (a handful of rows times rank r: too small for the backend's
 * products to be worth their call, and their padding) in one parallel
 * region for all groups. */
static void project(tr_model *m, struct tr_bws *w, int l, tr_proj p, float *y, const float *x,
                    int N)
{
    tr_backend *be = m->be;
    const tr_linear *L = &m->layers[l].proj[p];
    be->linear_fwd_fixed(be, y, x, L->w.data, L->w.dtype, L->bias, N, L->in, L->out);
    bool any = false;
    for (int g = 0; g < w->ngroups; g++) {
        const tr_adapter *ad = w->grp_adapter[g];
        const tr_adapter_proj *ap = ad ? &ad->proj[(size_t)l * TR_NPROJ + p] : NULL;
        w->grp_lora[g] = ap ? (lora_ref){ap->a, ap->b, ap->r, ap->scale}
                            : (lora_ref){L->lora_a, L->lora_b, L->r, L->scale};
        any |= w->grp_lora[g].a != NULL;
    }
    if (!any) return;
    int in = L->in, out = L->out, chunks = (out + LORA_COLS - 1) / LORA_COLS, rs = w->rmax;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++) {
            const lora_ref *lr = &w->grp_lora[w->row_grp[i]];
            if (lr->a) lora_hidden(w->lh + (size_t)i * rs, x + (size_t)i * in, lr->a, lr->r, in);
        }
#pragma omp for schedule(static)
        for (int t = 0; t < N * chunks; t++) {
            int i = t / chunks, o0 = t % chunks * LORA_COLS;
            int o1 = o0 + LORA_COLS < out ? o0 + LORA_COLS : out;
            const lora_ref *lr = &w->grp_lora[w->row_grp[i]];
            if (lr->a) lora_out(y + (size_t)i * out, w->lh + (size_t)i * rs, lr->b, lr->r, o0, o1, lr->scale);
        }
    }
}

/* y[n] += x[n]; on one thread when small (a decode step's rows) */
static void add_inplace(float *y, const float *x, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= ((size_t)1 << 15))
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* ---------------------------------------------------------------- attention */

/* Key or value row j of layer l of a sequence with block table blocks. */
static float *kv_row(float *base, const int32_t *blocks, int j, int B, int n_layers, int l,
                     size_t kvd)
{
    return base + (((size_t)blocks[j / B] * n_layers + l) * B + (size_t)(j % B)) * kvd;
}

/* What attend_heads reads: the pool, the row's sequence's blocks, layer l. */
typedef struct att_ctx {
    const tr_kv_pool *kv;
    const int32_t *blocks;
    int l, n_layers, hd, window;
    size_t kvd;
    float scale;
} att_ctx;

/* Keys from j to pos that lie in j's block. */
static int run_len(const att_ctx *a, int j, int pos)
{
    int n = a->kv->block_len - j % a->kv->block_len;
    return n < pos + 1 - j ? n : pos + 1 - j;
}

/* Query heads h0..h0+G-1 of one row at position pos, all of kv head g:
 * out_h = softmax(scale q_h . k_j, j in lo..pos) . v_j, each key and value
 * row read once for them. q, out: the row's [Hq * hd]; p: scratch
 * [G, pos + 2]. Per head, the same operations in the same order whatever
 * the batch and however the heads are split into calls. */
SIMD_CLONES
static void attend_heads(float *out, const float *q, int pos, int h0, int G, int g,
                         const att_ctx *a, float *p)
{
    int hd = a->hd, L = pos + 1;
    int lo = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
    const float *qh = q + (size_t)h0 * hd;
    float *oh = out + (size_t)h0 * hd, *inv = p + (size_t)G * L;
    for (int j = lo; j <= pos;) {
        const float *kr = kv_row(a->kv->k, a->blocks, j, a->kv->block_len, a->n_layers, a->l, a->kvd);
        for (int c = 0, n = run_len(a, j, pos); c < n; c++, j++) {
            const float *kj = kr + (size_t)c * a->kvd + (size_t)g * hd;
            for (int h = 0; h < G; h++) p[(size_t)h * L + j] = dot(qh + (size_t)h * hd, kj, hd) * a->scale;
        }
    }
    for (int h = 0; h < G; h++) { /* ops.c's softmax_causal_row */
        float *ph = p + (size_t)h * L, mx = -FLT_MAX;
        for (int j = lo; j <= pos; j++) mx = ph[j] > mx ? ph[j] : mx;
        double sum = 0;
        for (int j = lo; j <= pos; j++) {
            ph[j] = expf(ph[j] - mx);
            sum += ph[j];
        }
        inv[h] = (float)(1.0 / sum);
        memset(oh + (size_t)h * hd, 0, (size_t)hd * sizeof(float));
    }
    for (int j = lo; j <= pos;) {
        const float *vr = kv_row(a->kv->v, a->blocks, j, a->kv->block_len, a->n_layers, a->l, a->kvd);
        for (int c = 0, n = run_len(a, j, pos); c < n; c++, j++) {
            const float *vj = vr + (size_t)c * a->kvd + (size_t)g * hd;
            for (int h = 0; h < G; h++) axpy(oh + (size_t)h * hd, p[(size_t)h * L + j] * inv[h], vj, hd);
        }
    }
}

/* Stores the rows' k, v in their sequences' blocks, then ao[N,qd] =
 * attention of every row and head, parallel over (row, kv head), each kv
 * head's query heads split in parts when there are too few rows to keep
 * the threads busy (one sequence decoding). */
static void attention(tr_model *m, struct tr_bws *w, const tr_kv_pool *kv,
                      const tr_batch_seq *seqs, int l, int N)
{
    const tr_config *c = &m->cfg;
    int Hq = c->n_heads, Hkv = c->n_kv_heads, hd = c->head_dim, group = Hq / Hkv;
    size_t kvd = (size_t)Hkv * hd, qd = (size_t)Hq * hd;
    int threads = omp_get_max_threads(), parts = 1;
    while (parts < group && N * Hkv * parts < 2 * threads) parts++;
    int per = (group + parts - 1) / parts;
    parts = (group + per - 1) / per;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel
    {
        float *p = w->p + (size_t)omp_get_thread_num() * (w->len + 1) * group;
#pragma omp for schedule(static)
        for (int r = 0; r < N; r++) {
            const int32_t *blocks = seqs[w->row_seq[r]].blocks;
            int B = kv->block_len;
            memcpy(kv_row(kv->k, blocks, w->row_pos[r], B, c->n_layers, l, kvd), w->k + r * kvd,
                   kvd * sizeof(float));
            memcpy(kv_row(kv->v, blocks, w->row_pos[r], B, c->n_layers, l, kvd), w->v + r * kvd,
                   kvd * sizeof(float));
        }
        /* the barrier: every row's keys are stored before any is read */
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < N * Hkv * parts; t++) {
            int r = t / (Hkv * parts), g = t / parts % Hkv, h0 = g * group + t % parts * per;
            int nh = g * group + group - h0 < per ? g * group + group - h0 : per;
            att_ctx a = {kv, seqs[w->row_seq[r]].blocks, l, c->n_layers, hd, c->sliding_window,
                         kvd, scale};
            attend_heads(w->ao + r * qd, w->q + r * qd, w->row_pos[r], h0, nh, g, &a, p);
        }
    }
}

/* ---------------------------------------------------------------- one layer */

static void layer(tr_model *m, struct tr_bws *w, int l, const tr_kv_pool *kv,
                  const tr_batch_seq *seqs, int N)
{
    const tr_config *c = &m->cfg;
    const tr_layer *ly = &m->layers[l];
    int D = c->dim, hd = c->head_dim, Hq = c->n_heads, Hkv = c->n_kv_heads;
    float eps = (float)c->rms_eps;
    rmsnorm_forward(w->ln, w->rstd, w->x, ly->ln1, N, D, eps);
    project(m, w, l, TR_Q, w->q, w->ln, N);
    project(m, w, l, TR_K, w->k, w->ln, N);
    project(m, w, l, TR_V, w->v, w->ln, N);
    if (c->qk_norm) { /* in place: rmsnorm_forward reads a row before writing it */
        rmsnorm_forward(w->q, w->rstd, w->q, ly->q_norm, N * Hq, hd, eps);
        rmsnorm_forward(w->k, w->rstd, w->k, ly->k_norm, N * Hkv, hd, eps);
    }
    rope_forward(w->q, w->cosv, w->sinv, N, Hq, hd);
    rope_forward(w->k, w->cosv, w->sinv, N, Hkv, hd);
    attention(m, w, kv, seqs, l, N);
    project(m, w, l, TR_O, w->x2, w->ao, N);
    add_inplace(w->x2, w->x, (size_t)N * D);
    rmsnorm_forward(w->ln, w->rstd, w->x2, ly->ln2, N, D, eps);
    project(m, w, l, TR_GATE, w->g, w->ln, N);
    project(m, w, l, TR_UP, w->u, w->ln, N);
    swiglu_forward(w->h, w->g, w->u, (size_t)N * c->hidden);
    project(m, w, l, TR_DOWN, w->x, w->h, N);
    add_inplace(w->x, w->x2, (size_t)N * D);
}

/* ---------------------------------------------------------------- the step */

/* w->order: the sequences sorted by adapter (stable); the groups; each
 * row's sequence and position; the embeddings and rope tables. */
static void lay_out_rows(tr_model *m, struct tr_bws *w, const tr_batch_seq *seqs, int ns)
{
    const tr_config *c = &m->cfg;
    int half = c->head_dim / 2;
    for (int i = 0; i < ns; i++) {
        int j = i;
        for (; j > 0 && (uintptr_t)seqs[w->order[j - 1]].adapter > (uintptr_t)seqs[i].adapter; j--)
            w->order[j] = w->order[j - 1];
        w->order[j] = i;
    }
    w->ngroups = 0;
    int r0 = 0;
    for (int k = 0; k < ns; k++) {
        const tr_batch_seq *s = &seqs[w->order[k]];
        if (k == 0 || s->adapter != w->grp_adapter[w->ngroups - 1]) {
            w->grp_adapter[w->ngroups] = s->adapter;
            w->grp_row0[w->ngroups] = r0;
            w->grp_rows[w->ngroups++] = 0;
        }
        w->grp_rows[w->ngroups - 1] += s->n;
        w->seq_row0[w->order[k]] = r0;
        for (int i = 0; i < s->n; i++) {
            w->row_seq[r0 + i] = w->order[k];
            w->row_grp[r0 + i] = w->ngroups - 1;
            w->row_pos[r0 + i] = s->start + i;
        }
        embedding_forward(w->x + (size_t)r0 * c->dim, s->ids, s->n, m->embed.data, m->embed.dtype,
                          c->dim);
        rope_tables(w->cosv + (size_t)r0 * half, w->sinv + (size_t)r0 * half, c, s->start, NULL,
                    s->n);
        r0 += s->n;
    }
}

void tr_model_forward_batch(tr_model *m, const tr_kv_pool *kv, const tr_batch_seq *seqs,
                            int n_seqs, float *logits)
{
    const tr_config *c = &m->cfg;
    int N = 0, len = 0, rmax = model_rmax(m), nl = 0;
    for (int i = 0; i < n_seqs; i++) {
        N += seqs[i].n;
        len = imax(len, seqs[i].start + seqs[i].n);
        if (seqs[i].adapter)
            for (int p = 0; p < TR_NPROJ; p++) rmax = imax(rmax, seqs[i].adapter->proj[p].r);
    }
    if (N == 0) return;
    struct tr_bws *w = bws_get(m, N, n_seqs, len, rmax);
    lay_out_rows(m, w, seqs, n_seqs);
    for (int l = 0; l < c->n_layers; l++) layer(m, w, l, kv, seqs, N);
    for (int i = 0; i < n_seqs; i++) {
        if (!seqs[i].logits) continue;
        const float *last = w->x + (size_t)(w->seq_row0[i] + seqs[i].n - 1) * c->dim;
        memcpy(w->xl + (size_t)nl++ * c->dim, last, (size_t)c->dim * sizeof(float));
    }
    if (nl == 0) return;
    rmsnorm_forward(w->xl, w->rstdl, w->xl, m->final_norm, nl, c->dim, (float)c->rms_eps);
    m->be->linear_fwd_fixed(m->be, logits, w->xl, m->lm_head.data, m->lm_head.dtype, NULL, nl,
                            c->dim, c->vocab);
}
