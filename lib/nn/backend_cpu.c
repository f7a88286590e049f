/* backend_cpu.c: the CPU backend. Matrix products go to OpenBLAS sgemm;
 * weights stored as BF16 or F16 are converted to fp32 one tile of rows at a
 * time into a reusable workspace (about 4 MiB), so the frozen base model
 * never exists as a full fp32 copy. F32 weights are used in place.
 *
 * Batch invariance: a product x[n,in] . W[out,in]^T (linear_fwd, and gemm
 * with B transposed) gives row i of the result the same bits whatever n, so
 * a sequence's numbers do not depend on the batch it runs in (serving,
 * lib/serve/engine.h, relies on it). OpenBLAS's blocked sgemm has that
 * property, but for small products (m*n*k <= 1e6 with out*n <= 1200 and
 * in >= 32, the "small matrix" kernels of the AVX-512 cores) it takes a
 * kernel with another summation order, and newer versions send n = 1 to
 * gemv. Such calls are run on a copy of x padded with zero rows up to a
 * size the blocked kernel takes (pad_rows); measured on Cooperlake 0.3.21
 * over 5,148 shapes, 1 to 7 threads: the blocked kernel's rows are equal
 * bit for bit for every n, the small kernel's are not. */
#include "nn/nn.h"

#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct cpu_impl {
    float *tile;
    size_t cap; /* floats */
    float *pad_x, *pad_y; /* padded copies of x and y (batch invariance) */
    size_t pad_xcap, pad_ycap;
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

/* Rows a product y[n,out] = x[n,in] . W[out,in]^T must have for OpenBLAS to
 * take its blocked kernel: n itself when it does, else the fewest rows past
 * its small-matrix bounds (at least 2: gemv for one row). */
static int pad_rows(int n, int out, int in)
{
    double mnk = (double)n * out * in;
    bool small = mnk <= 1e6 && (double)n * out <= 1200 && in >= 32;
    if (!small) return n >= 2 ? n : 2;
    int by_area = 1200 / out + 1, by_mnk = (int)(1e6 / ((double)out * in)) + 1;
    int p = by_area < by_mnk ? by_area : by_mnk;
    return p > 2 ? p : 2;
}

static float *grow(float **buf, size_t *cap, size_t floats)
{
    if (floats > *cap) {
        free(*buf);
        *buf = xmalloc(floats * sizeof(float));
        *cap = floats;
    }
    return *buf;
}

/* y[n,out] = alpha x[n,in] . W^T + beta y, W rows at w with leading
 * dimension ldw; rows of y equal bit for bit whatever n (see the top). */
static void sgemm_nt(cpu_impl *c, int n, int out, int in, float alpha, const float *x, int ldx,
                     const float *w, int ldw, float beta, float *y, int ldy)
{
    int np = pad_rows(n, out, in);
    if (np == n) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, alpha, x, ldx, w, ldw,
                    beta, y, ldy);
        return;
    }
    float *px = grow(&c->pad_x, &c->pad_xcap, (size_t)np * in);
    float *py = grow(&c->pad_y, &c->pad_ycap, (size_t)np * out);
    for (int i = 0; i < n; i++) memcpy(px + (size_t)i * in, x + (size_t)i * ldx, in * sizeof(float));
    memset(px + (size_t)n * in, 0, (size_t)(np - n) * in * sizeof(float));
    if (beta != 0.0f)
        for (int i = 0; i < n; i++)
            memcpy(py + (size_t)i * out, y + (size_t)i * ldy, out * sizeof(float));
    memset(py + (size_t)n * out, 0, (size_t)(np - n) * out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, np, out, in, alpha, px, in, w, ldw, beta,
                py, out);
    for (int i = 0; i < n; i++) memcpy(y + (size_t)i * ldy, py + (size_t)i * out, out * sizeof(float));
}

static void cpu_linear_fwd(tr_backend *self, float *y, const float *x, const void *w,
                           tr_dtype wt, const float *bias, int n, int in, int out, float beta)
{
    if (wt == TR_F32) {
        sgemm_nt(self->impl, n, out, in, 1.0f, x, in, w, in, beta, y, out);
    } else {
        int tr = tile_rows(in);
        float *buf = cpu_workspace(self, (size_t)tr * in);
        for (int r0 = 0; r0 < out; r0 += tr) {
            int rows = out - r0 < tr ? out - r0 : tr;
            convert_rows(buf, w, wt, r0, rows, in);
            sgemm_nt(self->impl, n, rows, in, 1.0f, x, in, buf, in, beta, y + r0, out);
        }
    }
    if (bias) {
#pragma omp parallel for schedule(static) if ((size_t)n * out >= ((size_t)1 << 15))
        for (int i = 0; i < n; i++)
            for (int o = 0; o < out; o++) y[(size_t)i * out + o] += bias[o];
    }
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
    if (!ta && tb) {
        sgemm_nt(self->impl, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_destroy(tr_backend *self)
{
    cpu_impl *c = self->impl;
    free(c->tile);
    free(c->pad_x);
    free(c->pad_y);
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
    b->linear_bwd_x = cpu_linear_bwd_x;
    b->linear_bwd_w = cpu_linear_bwd_w;
    b->gemm = cpu_gemm;
    b->destroy = cpu_destroy;
    b->impl = xcalloc(1, sizeof(cpu_impl));
    tr_set_threads(threads);
    b->threads = threads > 0 ? threads : omp_get_max_threads();
    return b;
}
