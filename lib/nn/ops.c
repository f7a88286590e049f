/* ops.c: the layers of a Llama-family model as plain forward / backward
 * function pairs (llm.c style). Shapes are in the comments; all tensors are
 * fp32 and row-major, T is the number of tokens. Backward functions add into
 * their gradient outputs unless they say "overwritten". Loops are parallel
 * over independent rows with a static schedule and no reductions across
 * threads, so results do not depend on timing (exact resume needs that). */
#include "nn/nn.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Elements below which a forward loop runs on the calling thread: waking
 * the team costs more than the work (a decode step's few rows; the results
 * are the same either way). */
#define PAR_MIN ((size_t)1 << 15)

/* ---- embedding ---- */

void embedding_forward(float *out, const int32_t *ids, int T, const void *table, tr_dtype dt,
                       int D)
{
    size_t es = tr_dtype_size(dt);
#pragma omp parallel for schedule(static) if ((size_t)T * D >= PAR_MIN)
    for (int t = 0; t < T; t++)
        tr_to_f32(out + (size_t)t * D, (const char *)table + (size_t)ids[t] * D * es, dt, (size_t)D);
}

void embedding_backward(float *dtable, const float *dout, const int32_t *ids, int T, int D)
{
    for (int t = 0; t < T; t++) { /* serial: two tokens may share a row */
        float *row = dtable + (size_t)ids[t] * D;
        const float *g = dout + (size_t)t * D;
        for (int i = 0; i < D; i++) row[i] += g[i];
    }
}

/* ---- RMSNorm: out = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) ---- */

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int D,
                     float eps)
{
#pragma omp parallel for schedule(static) if ((size_t)T * D >= PAR_MIN)
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * D;
        float *ot = out + (size_t)t * D;
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)xt[i] * xt[i];
        float r = (float)(1.0 / sqrt(ss / D + eps));
        for (int i = 0; i < D; i++) ot[i] = xt[i] * r * w[i];
        rstd[t] = r;
    }
}

void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int T, int D)
{
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * D, *gt = dout + (size_t)t * D;
        float *dxt = dx + (size_t)t * D;
        float r = rstd[t];
        double dot = 0; /* sum of dxhat * xhat */
        for (int i = 0; i < D; i++) dot += (double)gt[i] * w[i] * xt[i] * r;
        float mean = (float)(dot / D);
        for (int i = 0; i < D; i++) dxt[i] += r * (gt[i] * w[i] - xt[i] * r * mean);
    }
    if (!dw) return;
    /* parallel over features; each thread sums over t in order */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < D; i++) {
        float s = 0;
        for (int t = 0; t < T; t++) s += dout[(size_t)t * D + i] * x[(size_t)t * D + i] * rstd[t];
        dw[i] += s;
    }
}

/* ---- RoPE (rotate_half layout), with Llama 3 and linear scaling ---- */

/* Inverse frequency of pair i (transformers' _compute_default_rope_parameters
 * and _compute_llama3_parameters, computed here in double). */
static double rope_inv_freq(const tr_config *c, int i)
{
    double inv = 1.0 / pow(c->rope_theta, (2.0 * i) / c->head_dim);
    if (c->rope_kind == TR_ROPE_LINEAR) return inv / c->rope_factor;
    if (c->rope_kind != TR_ROPE_LLAMA3) return inv;
    double old_len = c->rope_orig_max;
    double low_wl = old_len / c->rope_low_freq, high_wl = old_len / c->rope_high_freq;
    double wl = 2.0 * M_PI / inv;
    if (wl < high_wl) return inv;                  /* high frequency: unchanged */
    if (wl > low_wl) return inv / c->rope_factor;  /* low frequency: scaled */
    double smooth = (old_len / wl - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
    return (1.0 - smooth) * inv / c->rope_factor + smooth * inv;
}

void rope_tables(float *cosv, float *sinv, const tr_config *c, int start, const int32_t *pos,
                 int T)
{
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        double inv = rope_inv_freq(c, i);
        for (int t = 0; t < T; t++) {
            double a = (double)(pos ? pos[t] : start + t) * inv;
            cosv[(size_t)t * half + i] = (float)cos(a);
            sinv[(size_t)t * half + i] = (float)sin(a);
        }
    }
}

/* Rotates pairs (i, i + hd/2) of x[T,H,hd] by +angle (dir 1) or -angle (-1). */
static void rope_rotate(float *x, const float *cosv, const float *sinv, int T, int H, int hd,
                        float dir)
{
    int half = hd / 2;
#pragma omp parallel for schedule(static) if ((size_t)T * H * hd >= PAR_MIN)
    for (int t = 0; t < T; t++) {
        const float *c = cosv + (size_t)t * half, *s = sinv + (size_t)t * half;
        for (int h = 0; h < H; h++) {
            float *v = x + ((size_t)t * H + h) * hd;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half], sn = dir * s[i];
                v[i] = a * c[i] - b * sn;
                v[i + half] = b * c[i] + a * sn;
            }
        }
    }
}

void rope_forward(float *x, const float *cosv, const float *sinv, int T, int H, int hd)
{
    rope_rotate(x, cosv, sinv, T, H, hd, 1.0f);
}

void rope_backward(float *dx, const float *cosv, const float *sinv, int T, int H, int hd)
{
    rope_rotate(dx, cosv, sinv, T, H, hd, -1.0f); /* the transpose of a rotation */
}

/* ---- attention ---- */

/* Softmax of row i of scores[T, L] in place, masking keys j outside
 * (pos - window, pos] where pos = start + i, and keys before first (the
 * first key of its record). */
static void softmax_causal_row(float *row, int L, int pos, int window, int first)
{
    int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    if (first > lo) lo = first;
    float mx = -FLT_MAX;
    for (int j = lo; j <= pos; j++) mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int j = lo; j <= pos; j++) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < L; j++) row[j] = j >= lo && j <= pos ? row[j] * inv : 0.0f;
}

/* Query rows are processed in blocks of ATT_BLOCK: a block of rows ending
 * at row i1 only needs keys 0..start+i1-1, so the products skip most of
 * the masked upper triangle (about 3/8 of the work at 512 tokens). */
#define ATT_BLOCK 128

void attention_forward(tr_backend *be, float *out, float *att, const float *q, const float *k,
                       const float *v, int T, int start, const int32_t *pos, int Hq, int Hkv,
                       int hd, int window)
{
    int L = start + T, qd = Hq * hd, kvd = Hkv * hd, group = Hq / Hkv;
    float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < Hq; h++) {
        const float *kh = k + (size_t)(h / group) * hd;
        for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
            int rows = T - i0 < ATT_BLOCK ? T - i0 : ATT_BLOCK, keys = start + i0 + rows;
            /* scores[rows, keys] = scale * q_h[rows, hd] . k_h[keys, hd]^T */
            be->gemm(be, false, true, rows, keys, hd, scale, q + (size_t)i0 * qd + (size_t)h * hd, qd,
                     kh, kvd, 0.0f, att + ((size_t)h * T + i0) * L, L);
        }
    }
#pragma omp parallel for schedule(static)
    for (int r = 0; r < Hq * T; r++) {
        int i = r % T, first = pos ? start + i - pos[i] : 0;
        if (first < 0 || first > start + i) first = 0; /* not a position of its row: no record */
        softmax_causal_row(att + (size_t)r * L, L, start + i, window, first);
    }
    for (int h = 0; h < Hq; h++) {
        const float *vh = v + (size_t)(h / group) * hd;
        for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
            int rows = T - i0 < ATT_BLOCK ? T - i0 : ATT_BLOCK, keys = start + i0 + rows;
            /* out_h[rows, hd] = att_h[rows, keys] . v_h[keys, hd] */
            be->gemm(be, false, false, rows, hd, keys, 1.0f, att + ((size_t)h * T + i0) * L, L, vh,
                     kvd, 0.0f, out + (size_t)i0 * qd + (size_t)h * hd, qd);
        }
    }
}

/* One block of query rows [i0, i0+rows) of head h (start 0, keys 0..i1-1). */
static void attention_backward_block(tr_backend *be, float *dq, float *dk, float *dv, float *datt,
                                     const float *dout, const float *att, const float *q,
                                     const float *k, const float *v, int T, int i0, int rows,
                                     int h, int qd, int kvd, int hd, size_t ko, float scale)
{
    int keys = i0 + rows;
    const float *ah = att + ((size_t)h * T + i0) * T;
    const float *doh = dout + (size_t)i0 * qd + (size_t)h * hd;
    const float *qh = q + (size_t)i0 * qd + (size_t)h * hd;
    /* dv[keys] += att^T . dout ; datt[rows, keys] = dout . v[keys]^T */
    be->gemm(be, true, false, keys, hd, rows, 1.0f, ah, T, doh, qd, 1.0f, dv + ko, kvd);
    be->gemm(be, false, true, rows, keys, hd, 1.0f, doh, qd, v + ko, kvd, 0.0f, datt, T);
    /* softmax backward: ds = p * (dp - sum(dp * p)); zero past the diagonal */
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        int i = i0 + r;
        const float *p = ah + (size_t)r * T;
        float *d = datt + (size_t)r * T;
        double dot = 0;
        for (int j = 0; j <= i; j++) dot += (double)d[j] * p[j];
        for (int j = 0; j <= i; j++) d[j] = p[j] * (d[j] - (float)dot);
        for (int j = i + 1; j < keys; j++) d[j] = 0.0f;
    }
    /* dq[rows] += scale ds . k[keys] ; dk[keys] += scale ds^T . q[rows] */
    be->gemm(be, false, false, rows, hd, keys, scale, datt, T, k + ko, kvd, 1.0f,
             dq + (size_t)i0 * qd + (size_t)h * hd, qd);
    be->gemm(be, true, false, keys, hd, rows, scale, datt, T, qh, qd, 1.0f, dk + ko, kvd);
}

void attention_backward(tr_backend *be, float *dq, float *dk, float *dv, float *datt,
                        const float *dout, const float *att, const float *q, const float *k,
                        const float *v, int T, int Hq, int Hkv, int hd)
{
    int qd = Hq * hd, kvd = Hkv * hd, group = Hq / Hkv;
    float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < Hq; h++)
        for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
            int rows = T - i0 < ATT_BLOCK ? T - i0 : ATT_BLOCK;
            attention_backward_block(be, dq, dk, dv, datt, dout, att, q, k, v, T, i0, rows, h, qd,
                                     kvd, hd, (size_t)(h / group) * hd, scale);
        }
}

/* ---- SwiGLU: h = silu(g) * u ---- */

void swiglu_forward(float *h, const float *g, const float *u, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u,
                     size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + expf(-g[i]));
        float d = dh[i];
        du[i] = d * g[i] * s;
        dg[i] = d * u[i] * s * (1.0f + g[i] * (1.0f - s));
    }
}

/* ---- cross-entropy ---- */

float crossentropy_row(float *logits, int V, int target, float scale)
{
    float mx = -FLT_MAX;
    for (int j = 0; j < V; j++) mx = logits[j] > mx ? logits[j] : mx;
    float xt = logits[target];
    double sum = 0;
    for (int j = 0; j < V; j++) { /* one expf per entry; the sum in double */
        logits[j] = expf(logits[j] - mx);
        sum += logits[j];
    }
    float loss = (float)(mx + log(sum) - xt);
    float k = (float)(scale / sum);
    for (int j = 0; j < V; j++) logits[j] *= k;
    logits[target] -= scale;
    return loss;
}
