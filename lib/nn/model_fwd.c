/* model_fwd.c: the model's forward and backward passes.
 *
 * One decoder layer (x: [T, D] residual stream):
 *   ln1 = rmsnorm(x); q,k,v = proj(ln1) [+ LoRA]; (Qwen3: per-head rmsnorm of
 *   q, k); rope(q, k); ao = attention(q, k, v); x2 = x + o_proj(ao);
 *   ln2 = rmsnorm(x2); h = silu(gate(ln2)) * up(ln2); out = x2 + down(h).
 * Then a final rmsnorm and lm_head; the loss is cross-entropy over the masked
 * targets, computed in chunks of rows so the [T, vocab] logits never exist
 * whole during training. Activations live in one workspace (struct tr_ws);
 * with gradient checkpointing only the layer inputs are kept and each layer
 * is recomputed just before its backward pass.
 * Decoding with the KV cache (tr_model_decode) runs model_batch.c's
 * inference pass, the one serving batches, so its numbers are a served
 * sequence's.
 */
#include "nn/nn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows of logits computed at once: as many as fit in CE_BUDGET bytes (at
 * least 64), so the lm_head weight is streamed through the matmul once or a
 * few times per sequence rather than once per 64 rows. */
#define CE_BUDGET ((size_t)320 << 20)
static int ce_chunk(const tr_config *c, int T)
{
    size_t rows = CE_BUDGET / ((size_t)c->vocab * sizeof(float));
    if (rows < 64) rows = 64;
    return (int)(rows < (size_t)T ? rows : (size_t)T);
}

/* One layer's activations, all [T, ...]. */
typedef struct acts {
    float *ln1, *rstd1;        /* [T,D], [T] */
    float *q, *k;              /* projections before norm / rope: [T,qd], [T,kvd] */
    float *qr, *kr, *v;        /* after norm + rope; v: [T,qd], [T,kvd], [T,kvd] */
    float *rstdq, *rstdk;      /* [T*Hq], [T*Hkv] (Qwen3 q/k norm) */
    float *att;                /* [Hq, T, L] probabilities */
    float *ao;                 /* [T,qd] attention output */
    float *x2;                 /* [T,D] residual after attention */
    float *ln2, *rstd2;        /* [T,D], [T] */
    float *g, *u, *h;          /* [T,F] */
    float *lh[TR_NPROJ];       /* [T,r] LoRA hidden */
    float *lx[TR_NPROJ];       /* [T,in] dropped-out LoRA input, or NULL */
} acts;

/* Gradient scratch for one layer's backward. */
typedef struct grads {
    float *dres, *dln, *dh, *dg, *du, *dao, *dqr, *dkr, *dv, *dq, *dk, *datt, *dlh, *dlx;
} grads;

struct tr_ws {
    int Tcap, Lcap, nsets;
    bool backward, dropout;
    float *mem;
    size_t bytes;
    acts *la;          /* nsets layer activation sets */
    float *resid;      /* [(layers + 1), Tcap, D] */
    float *xtmp;       /* [Tcap, D] */
    float *xf, *rstdf, *dxf; /* final norm */
    float *cosv, *sinv;
    float *ce_x, *ce_dx, *ce_logits; /* [chunk, D], [chunk, D], [chunk, V] */
    int ce_rows;
    grads g;
};

/* ---------------------------------------------------------------- workspace */

/* pieces of the block: carver, nn_take (nn_internal.h) */

static void carve_acts(carver *c, acts *a, const tr_model *m, int T, int L, bool dropout)
{
    const tr_config *k = &m->cfg;
    size_t D = k->dim, qd = (size_t)k->n_heads * k->head_dim, kvd = (size_t)k->n_kv_heads * k->head_dim;
    size_t F = k->hidden;
    a->ln1 = nn_take(c, T * D); a->rstd1 = nn_take(c, T);
    a->q = nn_take(c, T * qd); a->k = nn_take(c, T * kvd);
    a->qr = nn_take(c, T * qd); a->kr = nn_take(c, T * kvd); a->v = nn_take(c, T * kvd);
    a->rstdq = nn_take(c, (size_t)T * k->n_heads); a->rstdk = nn_take(c, (size_t)T * k->n_kv_heads);
    a->att = nn_take(c, (size_t)k->n_heads * T * L);
    a->ao = nn_take(c, T * qd); a->x2 = nn_take(c, T * D);
    a->ln2 = nn_take(c, T * D); a->rstd2 = nn_take(c, T);
    a->g = nn_take(c, T * F); a->u = nn_take(c, T * F); a->h = nn_take(c, T * F);
    const tr_linear *pr = m->layers[0].proj;
    for (int p = 0; p < TR_NPROJ; p++) {
        a->lh[p] = pr[p].lora_a ? nn_take(c, (size_t)T * pr[p].r) : NULL;
        a->lx[p] = pr[p].lora_a && dropout ? nn_take(c, (size_t)T * pr[p].in) : NULL;
    }
}

static void carve_all(carver *c, struct tr_ws *w, const tr_model *m)
{
    const tr_config *k = &m->cfg;
    size_t T = w->Tcap, D = k->dim, F = k->hidden, V = k->vocab;
    size_t qd = (size_t)k->n_heads * k->head_dim, kvd = (size_t)k->n_kv_heads * k->head_dim;
    for (int i = 0; i < w->nsets; i++) carve_acts(c, &w->la[i], m, (int)T, w->Lcap, w->dropout);
    w->resid = nn_take(c, (k->n_layers + 1) * T * D);
    w->xtmp = nn_take(c, T * D);
    w->xf = nn_take(c, T * D); w->rstdf = nn_take(c, T); w->dxf = nn_take(c, T * D);
    w->cosv = nn_take(c, (size_t)w->Lcap * k->head_dim / 2);
    w->sinv = nn_take(c, (size_t)w->Lcap * k->head_dim / 2);
    w->ce_rows = ce_chunk(k, (int)T);
    w->ce_x = nn_take(c, w->ce_rows * D); w->ce_dx = nn_take(c, w->ce_rows * D);
    w->ce_logits = nn_take(c, w->ce_rows * V);
    memset(&w->g, 0, sizeof w->g);
    if (!w->backward) return;
    int rmax = 0, inmax = 0;
    for (int p = 0; p < TR_NPROJ; p++) {
        const tr_linear *l = &m->layers[0].proj[p];
        rmax = l->r > rmax ? l->r : rmax;
        inmax = l->in > inmax ? l->in : inmax;
    }
    grads *g = &w->g;
    g->dres = nn_take(c, T * D); g->dln = nn_take(c, T * D);
    g->dh = nn_take(c, T * F); g->dg = nn_take(c, T * F); g->du = nn_take(c, T * F);
    g->dao = nn_take(c, T * qd); g->dqr = nn_take(c, T * qd); g->dkr = nn_take(c, T * kvd);
    g->dv = nn_take(c, T * kvd); g->dq = nn_take(c, T * qd); g->dk = nn_take(c, T * kvd);
    g->datt = nn_take(c, T * T);
    g->dlh = nn_take(c, T * (size_t)(rmax ? rmax : 1));
    g->dlx = nn_take(c, T * (size_t)inmax);
}

void tr_model_ws_free(tr_model *m)
{
    tr_batch_ws_free(m);
    if (!m->ws) return;
    free(m->ws->mem);
    free(m->ws->la);
    free(m->ws);
    m->ws = NULL;
}

size_t tr_model_ws_bytes(const tr_model *m)
{
    return m->ws ? m->ws->bytes : 0;
}

/* A workspace for T tokens attending over L positions. */
static struct tr_ws *ws_get(tr_model *m, int T, int L, bool backward)
{
    int nsets = backward && !m->opts.grad_checkpoint ? m->cfg.n_layers : 1;
    bool dropout = backward && m->opts.mode == TR_MODE_LORA && m->opts.lora.dropout > 0;
    struct tr_ws *w = m->ws;
    if (w && w->Tcap >= T && w->Lcap >= L && w->nsets >= nsets && (w->backward || !backward) &&
        (w->dropout || !dropout))
        return w; /* T*L <= Tcap*Lcap: every region is large enough */
    int Tcap = w && w->Tcap > T ? w->Tcap : T;
    tr_model_ws_free(m);
    w = xcalloc(1, sizeof *w);
    w->Tcap = Tcap;
    w->Lcap = L > Tcap ? L : Tcap;
    w->nsets = nsets;
    w->backward = backward;
    w->dropout = dropout;
    w->la = xcalloc((size_t)nsets, sizeof *w->la);
    carver c = {NULL, 0};
    carve_all(&c, w, m);
    w->mem = xmalloc((c.used + 16) * sizeof(float));
    w->bytes = (c.used + 16) * sizeof(float);
    c = (carver){w->mem, 0};
    carve_all(&c, w, m);
    m->ws = w;
    return w;
}

/* ---------------------------------------------------------------- linear + LoRA */

/* out[i] = in[i] * keep(i) / (1 - p), keep(i) drawn from (seed, i). */
static void dropout_apply(float *out, const float *in, size_t n, float p, uint64_t seed)
{
    float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float u = (float)(tr_hash64(seed, i) >> 40) * (1.0f / 16777216.0f);
        out[i] = u >= p ? in[i] * scale : 0.0f;
    }
}

/* y[T,out] = x W^T + b + scale * (dropout(x) A^T) B^T; lh[T,r] keeps x A^T. */
static void linear_forward(tr_model *m, const tr_linear *L, float *y, const float *x, int T,
                           float *lh, float *lx, uint64_t seed)
{
    tr_backend *be = m->be;
    be->linear_fwd(be, y, x, L->w.data, L->w.dtype, L->bias, T, L->in, L->out, 0.0f);
    if (!L->lora_a) return;
    const float *xin = x;
    if (lx) {
        dropout_apply(lx, x, (size_t)T * L->in, m->opts.lora.dropout, seed);
        xin = lx;
    }
    be->gemm(be, false, true, T, L->r, L->in, 1.0f, xin, L->in, L->lora_a, L->in, 0.0f, lh, L->r);
    be->gemm(be, false, true, T, L->out, L->r, L->scale, lh, L->r, L->lora_b, L->r, 1.0f, y, L->out);
}

/* dx[T,in] = beta*dx + d/dx; parameter gradients accumulated. */
static void linear_backward(tr_model *m, const tr_linear *L, float *dx, float beta,
                            const float *dy, const float *x, int T, const float *lh,
                            const float *lx, uint64_t seed, grads *g)
{
    tr_backend *be = m->be;
    be->linear_bwd_x(be, dx, dy, L->w.data, L->w.dtype, T, L->in, L->out, beta);
    if (L->w.grad) be->linear_bwd_w(be, L->w.grad, dy, x, T, L->in, L->out);
    if (L->dbias) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < L->out; o++) {
            float s = 0;
            for (int t = 0; t < T; t++) s += dy[(size_t)t * L->out + o];
            L->dbias[o] += s;
        }
    }
    if (!L->lora_a) return;
    const float *xin = lx ? lx : x;
    int r = L->r;
    /* dB[out,r] += s dy^T lh ; dlh[T,r] = s dy B ; dA[r,in] += dlh^T xin */
    be->gemm(be, true, false, L->out, r, T, L->scale, dy, L->out, lh, r, 1.0f, L->dlora_b, r);
    be->gemm(be, false, false, T, r, L->out, L->scale, dy, L->out, L->lora_b, r, 0.0f, g->dlh, r);
    be->gemm(be, true, false, r, L->in, T, 1.0f, g->dlh, r, xin, L->in, 1.0f, L->dlora_a, L->in);
    if (!lx) {
        be->gemm(be, false, false, T, L->in, r, 1.0f, g->dlh, r, L->lora_a, L->in, 1.0f, dx, L->in);
        return;
    }
    be->gemm(be, false, false, T, L->in, r, 1.0f, g->dlh, r, L->lora_a, L->in, 0.0f, g->dlx, L->in);
    dropout_apply(g->dlx, g->dlx, (size_t)T * L->in, m->opts.lora.dropout, seed);
    size_t n = (size_t)T * L->in;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] += g->dlx[i];
}

static uint64_t proj_seed(uint64_t seed, int layer, int p)
{
    return tr_hash64(seed, (uint64_t)layer * TR_NPROJ + (uint64_t)p + 1);
}

/* ---------------------------------------------------------------- one layer */

typedef struct lctx {
    int T, start;
    const int32_t *pos; /* positions in packed records (start 0), or NULL */
    float *kc, *vc;   /* key / value rows for positions 0..start+T-1 */
    const float *cosv, *sinv;
    uint64_t seed;
    bool train;
} lctx;

static void add_inplace(float *y, const float *x, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void layer_forward(tr_model *m, int l, acts *a, const float *x, float *xout, const lctx *c)
{
    const tr_config *k = &m->cfg;
    const tr_layer *ly = &m->layers[l];
    int T = c->T, D = k->dim, hd = k->head_dim, Hq = k->n_heads, Hkv = k->n_kv_heads;
    size_t qd = (size_t)Hq * hd, kvd = (size_t)Hkv * hd;
    float eps = (float)k->rms_eps;
    float *kc = c->kc + (size_t)c->start * kvd, *vc = c->vc + (size_t)c->start * kvd;
#define LIN(P, Y, X) linear_forward(m, &ly->proj[P], Y, X, T, a->lh[P], c->train ? a->lx[P] : NULL, \
                                    proj_seed(c->seed, l, P))
    rmsnorm_forward(a->ln1, a->rstd1, x, ly->ln1, T, D, eps);
    LIN(TR_Q, a->q, a->ln1);
    LIN(TR_K, a->k, a->ln1);
    LIN(TR_V, vc, a->ln1);
    if (k->qk_norm) {
        rmsnorm_forward(a->qr, a->rstdq, a->q, ly->q_norm, T * Hq, hd, eps);
        rmsnorm_forward(kc, a->rstdk, a->k, ly->k_norm, T * Hkv, hd, eps);
    } else {
        memcpy(a->qr, a->q, T * qd * sizeof(float));
        memcpy(kc, a->k, T * kvd * sizeof(float));
    }
    rope_forward(a->qr, c->cosv, c->sinv, T, Hq, hd);
    rope_forward(kc, c->cosv, c->sinv, T, Hkv, hd);
    attention_forward(m->be, a->ao, a->att, a->qr, c->kc, c->vc, T, c->start, c->pos, Hq, Hkv, hd,
                      k->sliding_window);
    LIN(TR_O, a->x2, a->ao);
    add_inplace(a->x2, x, (size_t)T * D);
    rmsnorm_forward(a->ln2, a->rstd2, a->x2, ly->ln2, T, D, eps);
    LIN(TR_GATE, a->g, a->ln2);
    LIN(TR_UP, a->u, a->ln2);
    swiglu_forward(a->h, a->g, a->u, (size_t)T * k->hidden);
    LIN(TR_DOWN, xout, a->h);
    add_inplace(xout, a->x2, (size_t)T * D);
#undef LIN
}

/* g->dres holds d loss / d layer output on entry, d loss / d layer input on exit. */
static void layer_backward(tr_model *m, int l, const acts *a, const float *x, const lctx *c,
                           grads *g)
{
    const tr_config *k = &m->cfg;
    const tr_layer *ly = &m->layers[l];
    int T = c->T, D = k->dim, hd = k->head_dim, Hq = k->n_heads, Hkv = k->n_kv_heads;
    size_t qd = (size_t)Hq * hd, kvd = (size_t)Hkv * hd;
#define LINB(P, DX, BETA, DY, X) linear_backward(m, &ly->proj[P], DX, BETA, DY, X, T, a->lh[P], \
                                                 a->lx[P], proj_seed(c->seed, l, P), g)
    /* MLP */
    LINB(TR_DOWN, g->dh, 0.0f, g->dres, a->h);
    swiglu_backward(g->dg, g->du, g->dh, a->g, a->u, (size_t)T * k->hidden);
    LINB(TR_GATE, g->dln, 0.0f, g->dg, a->ln2);
    LINB(TR_UP, g->dln, 1.0f, g->du, a->ln2);
    rmsnorm_backward(g->dres, ly->dln2, g->dln, a->x2, ly->ln2, a->rstd2, T, D);
    /* attention */
    LINB(TR_O, g->dao, 0.0f, g->dres, a->ao);
    memset(g->dqr, 0, T * qd * sizeof(float));
    memset(g->dkr, 0, T * kvd * sizeof(float));
    memset(g->dv, 0, T * kvd * sizeof(float));
    attention_backward(m->be, g->dqr, g->dkr, g->dv, g->datt, g->dao, a->att, a->qr, a->kr, a->v,
                       T, Hq, Hkv, hd);
    rope_backward(g->dqr, c->cosv, c->sinv, T, Hq, hd);
    rope_backward(g->dkr, c->cosv, c->sinv, T, Hkv, hd);
    const float *dq = g->dqr, *dk = g->dkr;
    if (k->qk_norm) {
        memset(g->dq, 0, T * qd * sizeof(float));
        memset(g->dk, 0, T * kvd * sizeof(float));
        rmsnorm_backward(g->dq, ly->dq_norm, g->dqr, a->q, ly->q_norm, a->rstdq, T * Hq, hd);
        rmsnorm_backward(g->dk, ly->dk_norm, g->dkr, a->k, ly->k_norm, a->rstdk, T * Hkv, hd);
        dq = g->dq;
        dk = g->dk;
    }
    LINB(TR_Q, g->dln, 0.0f, dq, a->ln1);
    LINB(TR_K, g->dln, 1.0f, dk, a->ln1);
    LINB(TR_V, g->dln, 1.0f, g->dv, a->ln1);
    rmsnorm_backward(g->dres, ly->dln1, g->dln, x, ly->ln1, a->rstd1, T, D);
#undef LINB
}

/* ---------------------------------------------------------------- whole model */

/* Embedding and every layer; returns the final hidden states [T,D] (resid[L]).
 * pos: positions in packed records, or NULL for one record. */
static float *forward_layers(tr_model *m, struct tr_ws *w, const int32_t *ids, const int32_t *pos,
                             int T, uint64_t seed, bool train)
{
    const tr_config *k = &m->cfg;
    size_t TD = (size_t)T * k->dim;
    embedding_forward(w->resid, ids, T, m->embed.data, m->embed.dtype, k->dim);
    rope_tables(w->cosv, w->sinv, k, 0, pos, T);
    for (int l = 0; l < k->n_layers; l++) {
        acts *a = &w->la[w->nsets > 1 ? l : 0];
        lctx c = {T, 0, pos, a->kr, a->v, w->cosv, w->sinv, seed, train};
        layer_forward(m, l, a, w->resid + l * TD, w->resid + (l + 1) * TD, &c);
    }
    return w->resid + k->n_layers * TD;
}

/* Cross-entropy over the targets, w->ce_rows rows at a time. With backward,
 * fills w->dxf (d loss*scale / d xf). */
static double loss_head(tr_model *m, struct tr_ws *w, const int32_t *ids, const uint8_t *mask,
                        int T, float scale, bool backward, int *n_targets)
{
    const tr_config *k = &m->cfg;
    int D = k->dim, V = k->vocab;
    int *rows = xmalloc((size_t)(T + 1) * sizeof *rows);
    int n = 0;
    for (int j = 1; j < T; j++)
        if (mask[j]) rows[n++] = j - 1;
    if (backward) memset(w->dxf, 0, (size_t)T * D * sizeof(float));
    double total = 0;
    float *losses = xmalloc((size_t)w->ce_rows * sizeof *losses);
    for (int c0 = 0; c0 < n; c0 += w->ce_rows) {
        int cn = n - c0 < w->ce_rows ? n - c0 : w->ce_rows;
        for (int i = 0; i < cn; i++)
            memcpy(w->ce_x + (size_t)i * D, w->xf + (size_t)rows[c0 + i] * D, D * sizeof(float));
        m->be->linear_fwd(m->be, w->ce_logits, w->ce_x, m->lm_head.data, m->lm_head.dtype, NULL,
                          cn, D, V, 0.0f);
#pragma omp parallel for schedule(static)
        for (int i = 0; i < cn; i++)
            losses[i] = crossentropy_row(w->ce_logits + (size_t)i * V, V, ids[rows[c0 + i] + 1], scale);
        for (int i = 0; i < cn; i++) total += losses[i];
        if (!backward) continue;
        m->be->linear_bwd_x(m->be, w->ce_dx, w->ce_logits, m->lm_head.data, m->lm_head.dtype, cn,
                            D, V, 0.0f);
        if (m->lm_head.grad)
            m->be->linear_bwd_w(m->be, m->lm_head.grad, w->ce_logits, w->ce_x, cn, D, V);
        for (int i = 0; i < cn; i++) {
            float *dst = w->dxf + (size_t)rows[c0 + i] * D;
            for (int d = 0; d < D; d++) dst[d] += w->ce_dx[(size_t)i * D + d];
        }
    }
    free(rows);
    free(losses);
    *n_targets = n;
    return total;
}

static void backward_layers(tr_model *m, struct tr_ws *w, const int32_t *ids, const int32_t *pos,
                            int T, uint64_t seed)
{
    const tr_config *k = &m->cfg;
    size_t TD = (size_t)T * k->dim;
    grads *g = &w->g;
    memset(g->dres, 0, TD * sizeof(float));
    rmsnorm_backward(g->dres, m->dfinal_norm, w->dxf, w->resid + k->n_layers * TD, m->final_norm,
                     w->rstdf, T, k->dim);
    for (int l = k->n_layers - 1; l >= 0; l--) {
        acts *a = &w->la[w->nsets > 1 ? l : 0];
        lctx c = {T, 0, pos, a->kr, a->v, w->cosv, w->sinv, seed, true};
        if (w->nsets == 1) layer_forward(m, l, a, w->resid + l * TD, w->xtmp, &c); /* recompute */
        layer_backward(m, l, a, w->resid + l * TD, &c, g);
    }
    if (m->embed.grad) embedding_backward(m->embed.grad, g->dres, ids, T, k->dim);
}

double tr_model_loss_backward_packed(tr_model *m, const int32_t *ids, const int32_t *pos,
                                     const uint8_t *mask, int T, float scale,
                                     uint64_t dropout_seed, int *n_targets)
{
    struct tr_ws *w = ws_get(m, T, T, true);
    float *xL = forward_layers(m, w, ids, pos, T, dropout_seed, true);
    rmsnorm_forward(w->xf, w->rstdf, xL, m->final_norm, T, m->cfg.dim, (float)m->cfg.rms_eps);
    double loss = loss_head(m, w, ids, mask, T, scale, true, n_targets);
    if (*n_targets > 0) backward_layers(m, w, ids, pos, T, dropout_seed);
    return loss;
}

double tr_model_loss_backward(tr_model *m, const int32_t *ids, const uint8_t *mask, int T,
                              float scale, uint64_t dropout_seed, int *n_targets)
{
    return tr_model_loss_backward_packed(m, ids, NULL, mask, T, scale, dropout_seed, n_targets);
}

double tr_model_loss(tr_model *m, const int32_t *ids, const uint8_t *mask, int T, int *n_targets)
{
    struct tr_ws *w = ws_get(m, T, T, false);
    float *xL = forward_layers(m, w, ids, NULL, T, 0, false);
    rmsnorm_forward(w->xf, w->rstdf, xL, m->final_norm, T, m->cfg.dim, (float)m->cfg.rms_eps);
    return loss_head(m, w, ids, mask, T, 1.0f, false, n_targets);
}

void tr_model_logits_packed(tr_model *m, const int32_t *ids, const int32_t *pos, int T,
                            float *logits)
{
    struct tr_ws *w = ws_get(m, T, T, false);
    float *xL = forward_layers(m, w, ids, pos, T, 0, false);
    rmsnorm_forward(w->xf, w->rstdf, xL, m->final_norm, T, m->cfg.dim, (float)m->cfg.rms_eps);
    m->be->linear_fwd(m->be, logits, w->xf, m->lm_head.data, m->lm_head.dtype, NULL, T,
                      m->cfg.dim, m->cfg.vocab, 0.0f);
}

void tr_model_logits(tr_model *m, const int32_t *ids, int T, float *logits)
{
    tr_model_logits_packed(m, ids, NULL, T, logits);
}

/* ---------------------------------------------------------------- decoding */

void tr_kv_cache_init(tr_kv_cache *c, const tr_model *m, int max_len)
{
    size_t kvd = (size_t)m->cfg.n_kv_heads * m->cfg.head_dim;
    c->max_len = max_len;
    c->len = 0;
    c->k = xcalloc((size_t)m->cfg.n_layers * max_len * kvd, sizeof(float));
    c->v = xcalloc((size_t)m->cfg.n_layers * max_len * kvd, sizeof(float));
}

void tr_kv_cache_free(tr_kv_cache *c)
{
    free(c->k);
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* A batch of one: the cache is a pool of one block of max_len rows. */
bool tr_model_decode(tr_model *m, tr_kv_cache *c, const int32_t *ids, int T, float *logits)
{
    if (T <= 0 || c->len + T > c->max_len) return false;
    tr_kv_pool pool = {c->k, c->v, c->max_len};
    int32_t block = 0;
    tr_batch_seq s = {ids, T, c->len, &block, NULL, true};
    tr_model_forward_batch(m, &pool, &s, 1, logits);
    c->len += T;
    return true;
}
