/* backend_cpu.c: the CPU backend. Matrix products go to OpenBLAS sgemm;
 * weights stored as BF16 or F16 are converted to fp32 one tile of rows at a
 * time into a reusable workspace (about 4 MiB), so the frozen base model
 * never exists as a full fp32 copy. F32 weights are used in place.
 *
 * Batch invariance (serving): linear_fwd_fixed runs lathe's own product in
 * a fixed order (matmul_fixed.c), since OpenBLAS's kernels sum a row
 * differently by where it falls in the product; linear_fwd and gemm are
 * OpenBLAS's, for training, where only speed matters. */
#include "nn/nn.h"
#include "nn_internal.h"

#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct cpu_impl {
    float *tile;
    size_t cap; /* floats */
} cpu_impl;

#define TILE_FLOATS ((size_t)1 << 20)

/* Rows of a tile of a weight with `in` columns. */
static int tile_rows(int in)
{
    size_t r = TILE_FLOATS / (size_t)in;
    return r < 16 ? 16 : (int)r;
}

static float *cpu_workspace(tr_backend *self, size_t floats)
{
    cpu_impl *c = self->impl;
    if (floats > c->cap) {
        free(c->tile);
        c->tile = xmalloc(floats * sizeof(float));
        c->cap = floats;
    }
    return c->tile;
}

/* buf[rows,in] = rows r0.. of W[out,in] (dtype wt) as fp32 */
static void convert_rows(float *buf, const void *w, tr_dtype wt, int r0, int rows, int in)
{
    const char *base = (const char *)w + (size_t)r0 * in * tr_dtype_size(wt);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        tr_to_f32(buf + (size_t)r * in, base + (size_t)r * in * tr_dtype_size(wt), wt, (size_t)in);
}

/* y[n,out] = alpha x[n,in] . W^T + beta y, W rows at w with leading
 * dimension ldw */
static void sgemm_nt(int n, int out, int in, float alpha, const float *x, int ldx, const float *w,
                     int ldw, float beta, float *y, int ldy)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, alpha, x, ldx, w, ldw, beta,
                y, ldy);
}

/* y[i,o] += bias[o] */
static void add_bias(float *y, const float *bias, int n, int out)
{
#pragma omp parallel for schedule(static) if ((size_t)n * out >= ((size_t)1 << 15))
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) y[(size_t)i * out + o] += bias[o];
}

/* y[n, out] = x[n, in] . w[out, in]^T (+ beta y): sgemm, or lathe's
 * fixed-order product (nn_sgemm_fixed, beta 0); weights of other dtypes are
 * converted to F32 tile by tile, which changes no bits */
static void linear_product(tr_backend *self, float *y, const float *x, const void *w, tr_dtype wt, int n,
                           int in, int out, float beta, bool fixed)
{
    int tr = wt == TR_F32 ? out : tile_rows(in);
    float *buf = wt == TR_F32 ? NULL : cpu_workspace(self, (size_t)tr * in);
    for (int r0 = 0; r0 < out; r0 += tr) {
        int rows = out - r0 < tr ? out - r0 : tr;
        const float *wr = (const float *)w + (size_t)r0 * in;
        if (buf) {
            convert_rows(buf, w, wt, r0, rows, in);
            wr = buf;
        }
        if (fixed)
            nn_sgemm_fixed(n, rows, in, x, in, wr, 0.0f, y + r0, out);
        else
            sgemm_nt(n, rows, in, 1.0f, x, in, wr, in, beta, y + r0, out);
    }
}

static void cpu_linear_fwd(tr_backend *self, float *y, const float *x, const void *w,
                           tr_dtype wt, const float *bias, int n, int in, int out, float beta)
{
    linear_product(self, y, x, w, wt, n, in, out, beta, false);
    if (bias) add_bias(y, bias, n, out);
}

/* linear_fwd in a fixed order, for batch-invariant serving */
static void cpu_linear_fwd_fixed(tr_backend *self, float *y, const float *x, const void *w,
                                 tr_dtype wt, const float *bias, int n, int in, int out)
{
    linear_product(self, y, x, w, wt, n, in, out, 0.0f, true);
    if (bias) add_bias(y, bias, n, out);
}

static void cpu_linear_bwd_x(tr_backend *self, float *dx, const float *dy, const void *w,
                             tr_dtype wt, int n, int in, int out, float beta)
{
    if (wt == TR_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
                    beta, dx, in);
        return;
    }
    int tr = tile_rows(in);
    float *buf = cpu_workspace(self, (size_t)tr * in);
    for (int r0 = 0; r0 < out; r0 += tr) {
        int rows = out - r0 < tr ? out - r0 : tr;
        convert_rows(buf, w, wt, r0, rows, in);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, rows, 1.0f, dy + r0, out,
                    buf, in, r0 == 0 ? beta : 1.0f, dx, in);
    }
}

static void cpu_linear_bwd_w(tr_backend *self, float *dw, const float *dy, const float *x,
                             int n, int in, int out)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f,
                dw, in);
}

static void cpu_gemm(tr_backend *self, bool ta, bool tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_destroy(tr_backend *self)
{
    cpu_impl *c = self->impl;
    free(c->tile);
    free(c);
    free(self);
}

void tr_set_threads(int threads)
{
    if (threads <= 0) return;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
}

void tr_reexec_with_passive_wait(char **argv)
{
    if (getenv("OMP_WAIT_POLICY")) return; /* the user's choice, or already done */
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
}

tr_backend *tr_backend_cpu_create(int threads)
{
    tr_backend *b = xcalloc(1, sizeof *b);
    b->name = "cpu";
    b->linear_fwd = cpu_linear_fwd;
    b->linear_fwd_fixed = cpu_linear_fwd_fixed;
    b->linear_bwd_x = cpu_linear_bwd_x;
    b->linear_bwd_w = cpu_linear_bwd_w;
    b->gemm = cpu_gemm;
    b->destroy = cpu_destroy;
    b->impl = xcalloc(1, sizeof(cpu_impl));
    tr_set_threads(threads);
    b->threads = threads > 0 ? threads : omp_get_max_threads();
    return b;
}
