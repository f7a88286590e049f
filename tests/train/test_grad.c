/* test_grad.c: every layer's backward pass against central finite
 * differences of its forward pass (loss = sum(out * R) for a random R), then
 * the whole model's gradients (LoRA A/B, and every tensor in full
 * fine-tuning) for each architecture, with dropout and with gradient
 * checkpointing, which must give the same gradients bit for bit. */
#include "test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static void fill(float *v, size_t n, tr_rng *r, float s)
{
    for (size_t i = 0; i < n; i++) v[i] = s * tr_rng_normal(r);
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* |analytic - numeric| small against their size */
static void expect_close(double an, double nu, const char *what, size_t i)
{
    double tol = 2e-2 * fmax(fabs(an), fabs(nu)) + 2e-3;
    if (fabs(an - nu) > tol) {
        fprintf(stderr, "%s[%zu]: analytic %.6g numeric %.6g\n", what, i, an, nu);
        fail();
    }
}

/* ---- per layer ---- */

typedef struct rms_case {
    float *x, *w, *out, *rstd, *R;
    int T, D;
} rms_case;

static double rms_loss(rms_case *c)
{
    rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->T, c->D, 1e-5f);
    return dot(c->out, c->R, (size_t)c->T * c->D);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    tr_rng r;
    tr_rng_seed(&r, 1);
    int T = 3, D = 8;
    rms_case c = {xmalloc(T * D * 4), xmalloc(D * 4), xmalloc(T * D * 4), xmalloc(T * 4),
                  xmalloc(T * D * 4), T, D};
    fill(c.x, T * D, &r, 1);
    fill(c.w, D, &r, 1);
    fill(c.R, T * D, &r, 1);
    float *dx = xcalloc(T * D, 4), *dw = xcalloc(D, 4);
    rms_loss(&c);
    rmsnorm_backward(dx, dw, c.R, c.x, c.w, c.rstd, T, D);
    float h = 1e-2f;
    for (int i = 0; i < T * D; i++) {
        float s = c.x[i];
        c.x[i] = s + h;
        double lp = rms_loss(&c);
        c.x[i] = s - h;
        double lm = rms_loss(&c);
        c.x[i] = s;
        expect_close(dx[i], (lp - lm) / (2 * h), "rmsnorm dx", (size_t)i);
    }
    for (int i = 0; i < D; i++) {
        float s = c.w[i];
        c.w[i] = s + h;
        double lp = rms_loss(&c);
        c.w[i] = s - h;
        double lm = rms_loss(&c);
        c.w[i] = s;
        expect_close(dw[i], (lp - lm) / (2 * h), "rmsnorm dw", (size_t)i);
    }
    free(c.x); free(c.w); free(c.out); free(c.rstd); free(c.R); free(dx); free(dw);
}

static void test_rope(void **state)
{
    (void)state;
    tr_rng r;
    tr_rng_seed(&r, 2);
    tr_config cfg = tu_tiny_config(TR_ARCH_LLAMA); /* llama3 scaling */
    int T = 5, H = 2, hd = cfg.head_dim, n = T * H * hd;
    float *cs = xmalloc(T * hd / 2 * 4), *sn = xmalloc(T * hd / 2 * 4);
    rope_tables(cs, sn, &cfg, 3, NULL, T);
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4), *R = xmalloc(n * 4), *dx = xmalloc(n * 4);
    fill(x, n, &r, 1);
    fill(R, n, &r, 1);
    memcpy(dx, R, n * 4);
    rope_backward(dx, cs, sn, T, H, hd);
    float h = 1e-2f;
    for (int i = 0; i < n; i++) {
        double l[2];
        for (int s = 0; s < 2; s++) {
            memcpy(y, x, n * 4);
            y[i] += s ? -h : h;
            rope_forward(y, cs, sn, T, H, hd);
            l[s] = dot(y, R, n);
        }
        expect_close(dx[i], (l[0] - l[1]) / (2 * h), "rope dx", (size_t)i);
    }
    /* the rotation keeps norms: forward then backward is the identity */
    memcpy(y, x, n * 4);
    rope_forward(y, cs, sn, T, H, hd);
    rope_backward(y, cs, sn, T, H, hd);
    for (int i = 0; i < n; i++) assert_true(fabsf(y[i] - x[i]) < 1e-5f);
    free(cs); free(sn); free(x); free(y); free(R); free(dx);
}

static double att_loss(tr_backend *be, float *out, float *att, const float *q, const float *k,
                       const float *v, const float *R, int T, int Hq, int Hkv, int hd, int win)
{
    attention_forward(be, out, att, q, k, v, T, 0, NULL, Hq, Hkv, hd, win);
    return dot(out, R, (size_t)T * Hq * hd);
}

static void check_attention(int window)
{
    tr_backend *be = tr_backend_cpu_create(0);
    tr_rng r;
    tr_rng_seed(&r, 3);
    int T = 6, Hq = 4, Hkv = 2, hd = 4, nq = T * Hq * hd, nk = T * Hkv * hd;
    float *q = xmalloc(nq * 4), *k = xmalloc(nk * 4), *v = xmalloc(nk * 4), *R = xmalloc(nq * 4);
    float *out = xmalloc(nq * 4), *att = xmalloc(Hq * T * T * 4), *datt = xmalloc(T * T * 4);
    float *dq = xcalloc(nq, 4), *dk = xcalloc(nk, 4), *dv = xcalloc(nk, 4);
    fill(q, nq, &r, 1);
    fill(k, nk, &r, 1);
    fill(v, nk, &r, 1);
    fill(R, nq, &r, 1);
    att_loss(be, out, att, q, k, v, R, T, Hq, Hkv, hd, window);
    attention_backward(be, dq, dk, dv, datt, R, att, q, k, v, T, Hq, Hkv, hd);
    float *ins[3] = {q, k, v}, *gr[3] = {dq, dk, dv};
    int ns[3] = {nq, nk, nk};
    const char *names[3] = {"attention dq", "attention dk", "attention dv"};
    float h = 1e-2f;
    for (int a = 0; a < 3; a++)
        for (int i = 0; i < ns[a]; i++) {
            float s = ins[a][i];
            ins[a][i] = s + h;
            double lp = att_loss(be, out, att, q, k, v, R, T, Hq, Hkv, hd, window);
            ins[a][i] = s - h;
            double lm = att_loss(be, out, att, q, k, v, R, T, Hq, Hkv, hd, window);
            ins[a][i] = s;
            expect_close(gr[a][i], (lp - lm) / (2 * h), names[a], (size_t)i);
        }
    /* causality: the first position's output only sees itself: v rows */
    free(q); free(k); free(v); free(R); free(out); free(att); free(datt);
    free(dq); free(dk); free(dv);
    be->destroy(be);
}

static void test_attention(void **state)
{
    (void)state;
    check_attention(0);
    check_attention(3); /* sliding window */
}

/* Naive attention in double: out and, given dout, dq/dk/dv (start 0). */
static void naive_attention(const float *q, const float *k, const float *v, const float *dout,
                            double *out, double *dq, double *dk, double *dv, int T, int Hq,
                            int Hkv, int hd, int window, const int32_t *pos)
{
    int qd = Hq * hd, kvd = Hkv * hd, g = Hq / Hkv;
    double sc = 1.0 / sqrt(hd);
    double *p = xmalloc((size_t)T * sizeof *p), *dp = xmalloc((size_t)T * sizeof *dp);
    memset(dq, 0, (size_t)T * qd * sizeof *dq);
    memset(dk, 0, (size_t)T * kvd * sizeof *dk);
    memset(dv, 0, (size_t)T * kvd * sizeof *dv);
    for (int h = 0; h < Hq; h++)
        for (int i = 0; i < T; i++) {
            const float *qi = q + (size_t)i * qd + h * hd;
            int lo = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
            if (pos && i - pos[i] > lo) lo = i - pos[i]; /* its record's first token */
            double mx = -1e300, sum = 0;
            for (int j = lo; j <= i; j++) {
                const float *kj = k + (size_t)j * kvd + (h / g) * hd;
                double s = 0;
                for (int d = 0; d < hd; d++) s += (double)qi[d] * kj[d];
                p[j] = s * sc;
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int j = lo; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
            for (int j = lo; j <= i; j++) p[j] /= sum;
            const float *doi = dout + (size_t)i * qd + h * hd;
            double dot = 0;
            for (int d = 0; d < hd; d++) {
                double o = 0;
                for (int j = lo; j <= i; j++) o += p[j] * v[(size_t)j * kvd + (h / g) * hd + d];
                out[(size_t)i * qd + h * hd + d] = o;
            }
            for (int j = lo; j <= i; j++) {
                dp[j] = 0;
                for (int d = 0; d < hd; d++) {
                    dp[j] += (double)doi[d] * v[(size_t)j * kvd + (h / g) * hd + d];
                    dv[(size_t)j * kvd + (h / g) * hd + d] += p[j] * doi[d];
                }
                dot += dp[j] * p[j];
            }
            for (int j = lo; j <= i; j++) {
                double ds = p[j] * (dp[j] - dot) * sc;
                for (int d = 0; d < hd; d++) {
                    dq[(size_t)i * qd + h * hd + d] += ds * k[(size_t)j * kvd + (h / g) * hd + d];
                    dk[(size_t)j * kvd + (h / g) * hd + d] += ds * qi[d];
                }
            }
        }
    free(p);
    free(dp);
}

static double max_rel(const float *a, const double *b, size_t n)
{
    double scale = 0, diff = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(b[i]));
        diff = fmax(diff, fabs(a[i] - b[i]));
    }
    return diff / (scale + 1e-30);
}

/* Sequences longer than one block of query rows (the blocked causal
 * products) against a naive double-precision attention: one record, with
 * and without a sliding window, and three packed records (of 100, 37 and
 * 163 tokens) that must not see each other. */
static void test_attention_long(void **state)
{
    (void)state;
    tr_backend *be = tr_backend_cpu_create(0);
    tr_rng r;
    tr_rng_seed(&r, 13);
    int T = 300, Hq = 4, Hkv = 2, hd = 8, nq = T * Hq * hd, nk = T * Hkv * hd;
    float *q = xmalloc(nq * 4), *k = xmalloc(nk * 4), *v = xmalloc(nk * 4), *dout = xmalloc(nq * 4);
    float *out = xmalloc(nq * 4), *att = xmalloc((size_t)Hq * T * T * 4), *datt = xmalloc((size_t)T * T * 4);
    float *dq = xmalloc(nq * 4), *dk = xmalloc(nk * 4), *dv = xmalloc(nk * 4);
    double *o2 = xmalloc(nq * 8), *dq2 = xmalloc(nq * 8), *dk2 = xmalloc(nk * 8), *dv2 = xmalloc(nk * 8);
    fill(q, nq, &r, 1);
    fill(k, nk, &r, 1);
    fill(v, nk, &r, 1);
    fill(dout, nq, &r, 1);
    int32_t *pos = xmalloc((size_t)T * sizeof *pos);
    for (int t = 0; t < T; t++) pos[t] = t < 100 ? t : t < 137 ? t - 100 : t - 137;
    for (int wi = 0; wi < 4; wi++) {
        int window = wi & 1 ? 50 : 0;
        const int32_t *packed = wi >= 2 ? pos : NULL;
        for (size_t i = 0; i < (size_t)T * T; i++) datt[i] = NAN; /* stale scratch must not leak in */
        attention_forward(be, out, att, q, k, v, T, 0, packed, Hq, Hkv, hd, window);
        memset(dq, 0, nq * 4);
        memset(dk, 0, nk * 4);
        memset(dv, 0, nk * 4);
        attention_backward(be, dq, dk, dv, datt, dout, att, q, k, v, T, Hq, Hkv, hd);
        naive_attention(q, k, v, dout, o2, dq2, dk2, dv2, T, Hq, Hkv, hd, window, packed);
        double e[4] = {max_rel(out, o2, nq), max_rel(dq, dq2, nq), max_rel(dk, dk2, nk), max_rel(dv, dv2, nk)};
        printf("# attention T=%d window %d%s: relative max error out %.2g dq %.2g dk %.2g dv %.2g\n", T,
               window, packed ? " packed" : "", e[0], e[1], e[2], e[3]);
        for (int i = 0; i < 4; i++) assert_true(e[i] < 1e-4);
    }
    free(q); free(k); free(v); free(dout); free(out); free(att); free(datt);
    free(dq); free(dk); free(dv); free(o2); free(dq2); free(dk2); free(dv2); free(pos);
    be->destroy(be);
}

static void test_swiglu(void **state)
{
    (void)state;
    tr_rng r;
    tr_rng_seed(&r, 4);
    int n = 20;
    float g[20], u[20], hh[20], R[20], dg[20], du[20];
    fill(g, n, &r, 2);
    fill(u, n, &r, 1);
    fill(R, n, &r, 1);
    swiglu_backward(dg, du, R, g, u, (size_t)n);
    float h = 1e-2f;
    for (int i = 0; i < n; i++) {
        double l[4];
        float *t[2] = {g, u};
        for (int a = 0; a < 2; a++) {
            float s = t[a][i];
            t[a][i] = s + h;
            swiglu_forward(hh, g, u, (size_t)n);
            l[2 * a] = dot(hh, R, n);
            t[a][i] = s - h;
            swiglu_forward(hh, g, u, (size_t)n);
            l[2 * a + 1] = dot(hh, R, n);
            t[a][i] = s;
        }
        expect_close(dg[i], (l[0] - l[1]) / (2 * h), "swiglu dg", (size_t)i);
        expect_close(du[i], (l[2] - l[3]) / (2 * h), "swiglu du", (size_t)i);
    }
}

static void test_crossentropy(void **state)
{
    (void)state;
    tr_rng r;
    tr_rng_seed(&r, 5);
    int V = 9;
    float x[9], g[9], t[9];
    fill(x, V, &r, 2);
    memcpy(g, x, sizeof x);
    float loss = crossentropy_row(g, V, 4, 0.5f);
    /* loss = logsumexp - x[target] */
    double se = 0;
    for (int i = 0; i < V; i++) se += exp(x[i]);
    assert_true(fabs(loss - (log(se) - x[4])) < 1e-5);
    float h = 1e-2f;
    for (int i = 0; i < V; i++) {
        memcpy(t, x, sizeof x);
        t[i] += h;
        double lp = crossentropy_row(t, V, 4, 1);
        memcpy(t, x, sizeof x);
        t[i] -= h;
        double lm = crossentropy_row(t, V, 4, 1);
        expect_close(g[i], 0.5 * (lp - lm) / (2 * h), "crossentropy", (size_t)i);
    }
}

/* ---- whole model ---- */

#define T_SEQ 9

static void seq(int32_t *ids, uint8_t *mask, int V)
{
    for (int t = 0; t < T_SEQ; t++) {
        ids[t] = (int32_t)((t * 7 + 3) % V);
        mask[t] = t != 4; /* one position not predicted */
    }
}

/* Checks `checks` entries of every parameter tensor by finite differences. */
static void check_model_grads(tr_model *m, uint64_t dseed, int checks)
{
    int32_t ids[T_SEQ];
    uint8_t mask[T_SEQ];
    seq(ids, mask, m->cfg.vocab);
    int nt;
    memset(m->grad_data, 0, m->n_floats * sizeof(float));
    tr_model_loss_backward(m, ids, mask, T_SEQ, 1.0f, dseed, &nt);
    assert_int_equal(nt, T_SEQ - 2);
    float *g = xmalloc(m->n_floats * sizeof(float));
    memcpy(g, m->grad_data, m->n_floats * sizeof(float));
    float h = 1e-2f;
    for (size_t p = 0; p < m->n_params; p++) {
        const tr_param *pr = &m->params[p];
        for (int c = 0; c < checks; c++) {
            size_t i = pr->offset + ((size_t)c * 7919 + p) % pr->numel;
            float s = m->param_data[i];
            m->param_data[i] = s + h;
            double lp = tr_model_loss_backward(m, ids, mask, T_SEQ, 1.0f, dseed, &nt);
            m->param_data[i] = s - h;
            double lm = tr_model_loss_backward(m, ids, mask, T_SEQ, 1.0f, dseed, &nt);
            m->param_data[i] = s;
            expect_close(g[i], (lp - lm) / (2 * h), pr->name, i - pr->offset);
        }
    }
    free(g);
}

/* PEFT starts B at zero, which would hide A's gradient: B made non-zero. */
static void lora_b_nonzero(tr_model *m)
{
    tr_rng r;
    tr_rng_seed(&r, 9);
    for (size_t i = 0; i < m->n_params; i++)
        if (strstr(m->params[i].name, "lora_B"))
            fill(m->param_data + m->params[i].offset, m->params[i].numel, &r, 0.3f);
}

static void model_case(tr_arch arch, tr_mode mode, float dropout, bool ckpt)
{
    char *dir = tu_tempdir();
    tr_config c = tu_tiny_config(arch);
    tu_make_model(dir, &c, 0.3f, TR_F32, 11);
    tr_backend *be = tr_backend_cpu_create(0);
    tr_model m;
    tr_model_opts o = {.mode = mode, .grad_checkpoint = ckpt, .seed = 5,
                       .lora = {.rank = 2, .alpha = 4, .dropout = dropout,
                                .targets = (1u << TR_NPROJ) - 1}};
    char err[512];
    assert_true(tr_model_load(&m, dir, &o, be, err, sizeof err));
    if (mode == TR_MODE_LORA) lora_b_nonzero(&m);
    check_model_grads(&m, 77, mode == TR_MODE_LORA ? 4 : 2);
    tr_model_free(&m);
    be->destroy(be);
    tu_rmdir(dir);
}

static void test_model_lora_each_arch(void **state)
{
    (void)state;
    for (int a = TR_ARCH_LLAMA; a <= TR_ARCH_QWEN3; a++) model_case((tr_arch)a, TR_MODE_LORA, 0, false);
}

static void test_model_lora_dropout_checkpointing(void **state)
{
    (void)state;
    model_case(TR_ARCH_QWEN2, TR_MODE_LORA, 0.25f, true);
    model_case(TR_ARCH_LLAMA, TR_MODE_LORA, 0.1f, false);
}

static void test_model_full_each_arch(void **state)
{
    (void)state;
    for (int a = TR_ARCH_LLAMA; a <= TR_ARCH_QWEN3; a++) model_case((tr_arch)a, TR_MODE_FULL, 0, a == TR_ARCH_QWEN3);
}

/* Two records packed into one sequence (positions restarting at the second)
 * give the loss and the gradients of the two records trained one after the
 * other: packed records neither see each other nor share positions. For
 * every architecture, with LoRA on every projection. */
static void test_packed_records_independent(void **state)
{
    (void)state;
    enum { NA = 11, NB = 14, NT = NA + NB };
    for (int arch = TR_ARCH_LLAMA; arch <= TR_ARCH_QWEN3; arch++) {
        char *dir = tu_tempdir();
        tr_config c = tu_tiny_config((tr_arch)arch);
        tu_make_model(dir, &c, 0.3f, TR_F32, 21);
        tr_backend *be = tr_backend_cpu_create(0);
        tr_model m;
        tr_model_opts o = {.mode = TR_MODE_LORA, .seed = 5,
                           .lora = {.rank = 2, .alpha = 4, .targets = (1u << TR_NPROJ) - 1}};
        char err[512];
        assert_true(tr_model_load(&m, dir, &o, be, err, sizeof err));
        lora_b_nonzero(&m);
        int32_t ids[NT], pos[NT];
        uint8_t mask[NT];
        for (int t = 0; t < NT; t++) {
            ids[t] = (int32_t)((t * 5 + 2) % m.cfg.vocab);
            mask[t] = t != 0 && t != NA; /* a record's first token has nothing to predict it */
            pos[t] = t < NA ? t : t - NA;
        }
        int nt, na, nb;
        memset(m.grad_data, 0, m.n_floats * sizeof(float));
        double packed = tr_model_loss_backward_packed(&m, ids, pos, mask, NT, 1.0f, 0, &nt);
        float *g = xmalloc(m.n_floats * sizeof(float));
        memcpy(g, m.grad_data, m.n_floats * sizeof(float));
        memset(m.grad_data, 0, m.n_floats * sizeof(float));
        double apart = tr_model_loss_backward(&m, ids, mask, NA, 1.0f, 0, &na) +
                       tr_model_loss_backward(&m, ids + NA, mask + NA, NB, 1.0f, 0, &nb);
        assert_int_equal(nt, na + nb);
        if (fabs(packed - apart) > 1e-4 * fabs(apart))
            fail_msg("arch %d: packed loss %.8g, apart %.8g", arch, packed, apart);
        for (size_t i = 0; i < m.n_floats; i++)
            if (fabsf(g[i] - m.grad_data[i]) > 1e-4f * (1 + fabsf(g[i])))
                fail_msg("arch %d: gradient %zu packed %g, apart %g", arch, i, g[i], m.grad_data[i]);
        free(g);
        tr_model_free(&m);
        be->destroy(be);
        tu_rmdir(dir);
    }
}

/* Gradient checkpointing recomputes the same activations: same gradients. */
static void test_checkpointing_identical(void **state)
{
    (void)state;
    char *dir = tu_tempdir();
    tr_config c = tu_tiny_config(TR_ARCH_QWEN3);
    tu_make_model(dir, &c, 0.3f, TR_F32, 12);
    tr_backend *be = tr_backend_cpu_create(0);
    float *g[2];
    size_t nf = 0;
    for (int k = 0; k < 2; k++) {
        tr_model m;
        tr_model_opts o = {.mode = TR_MODE_LORA, .grad_checkpoint = k == 1, .seed = 5,
                           .lora = {.rank = 4, .alpha = 8, .dropout = 0.1f, .targets = 0x7f}};
        char err[512];
        assert_true(tr_model_load(&m, dir, &o, be, err, sizeof err));
        int32_t ids[T_SEQ];
        uint8_t mask[T_SEQ];
        seq(ids, mask, m.cfg.vocab);
        int nt;
        for (size_t i = 0; i < m.n_floats; i++) m.param_data[i] += 0.01f * (float)(i % 7);
        tr_model_loss_backward(&m, ids, mask, T_SEQ, 1.0f, 3, &nt);
        nf = m.n_floats;
        g[k] = xmalloc(nf * sizeof(float));
        memcpy(g[k], m.grad_data, nf * sizeof(float));
        tr_model_free(&m);
    }
    assert_memory_equal(g[0], g[1], nf * sizeof(float));
    free(g[0]);
    free(g[1]);
    be->destroy(be);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_long),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_model_lora_each_arch),
        cmocka_unit_test(test_model_lora_dropout_checkpointing),
        cmocka_unit_test(test_model_full_each_arch),
        cmocka_unit_test(test_checkpointing_identical),
        cmocka_unit_test(test_packed_records_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
