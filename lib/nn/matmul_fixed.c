/* matmul_fixed.c: y[n,out] = beta*y + x[n,in] . W[out,in]^T in a fixed order
 * of additions, so that row i of y has the same bits whatever n, whichever
 * rows share the call, and however many threads run it (the serving path's
 * batch invariance, lib/serve/engine.h).
 *
 * Why not OpenBLAS: its kernels choose how to sum a row by where the row
 * falls in the product. Measured with 0.3.21 on one machine over n = 1..256
 * (out = in = 896, padding n to any multiple of 4 to 64 rows): the Haswell
 * and Zen kernels gave a row other bits in 184 to 3,839 of the calls; only
 * the AVX-512 kernels (SkylakeX, Cooperlake) and Sandybridge's were
 * invariant once the small-matrix kernels were avoided. OpenBLAS picks the
 * kernel from the CPU at run time, so a guarantee cannot rest on it.
 *
 * The order, for every element y[i,o]: eight partial sums s[l] over
 * k = l, l+8, l+16, ... (k < in rounded down to 8), added as
 * ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)), then the last in%8 products one by
 * one, then beta*y. With AVX2 and FMA (checked once, at run time) each
 * partial sum step is one fused multiply-add; without, a multiply then an
 * add (LATHE_NN_KERNEL=plain forces that path). One machine always takes
 * the same path, so its rows agree.
 *
 * Speed: a register tile of 4 rows by 3 outputs (twelve sums: enough to
 * hide the fused multiply-add's latency), rows in chunks that stay
 * in cache, output columns spread over OpenMP threads (each element is
 * computed by one thread from start to end). bench/serve --products
 * compares it with sgemm. */
#include "nn_internal.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FIXED_X86 1
#endif

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));

static inline float hsum8(const float *a)
{
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/* The tile kernels: y[r*ldy + c] = sum over k of x[r*ldx + k] * w[c*in + k]
 * for r < R, c < C, in the order above (no beta: the caller adds it). */
#define ROWS_T 4
#define COLS_T 3

/* ---- portable: v8 multiply then add ---- */
static void tile_plain(float *y, int ldy, const float *x, int ldx, const float *w, int in, int R,
                       int C)
{
    int k8 = in & ~7;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            const float *xr = x + (size_t)r * ldx, *wc = w + (size_t)c * in;
            v8 acc = {0};
            for (int k = 0; k < k8; k += 8) acc += *(const v8u *)(xr + k) * *(const v8u *)(wc + k);
            float s = hsum8((const float *)&acc);
            for (int k = k8; k < in; k++) s += xr[k] * wc[k];
            y[(size_t)r * ldy + c] = s;
        }
}

#ifdef FIXED_X86
/* ---- AVX2 + FMA: the same order, each step fused; a full 4x3 tile keeps
 * its twelve sums in registers, a partial tile goes element by element with
 * the same steps ---- */
__attribute__((target("avx2,fma"))) static inline float fin_fma(__m256 acc, const float *xr,
                                                                const float *wc, int k8, int in)
{
    float a[8];
    _mm256_storeu_ps(a, acc);
    float s = hsum8(a);
    for (int k = k8; k < in; k++) s = __builtin_fmaf(xr[k], wc[k], s);
    return s;
}

__attribute__((target("avx2,fma"))) static void tile_fma(float *y, int ldy, const float *x,
                                                         int ldx, const float *w, int in, int R,
                                                         int C)
{
    int k8 = in & ~7;
    if (R == ROWS_T && C == COLS_T) {
        const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * (size_t)ldx, *x3 = x + 3 * (size_t)ldx;
        const float *w0 = w, *w1 = w + in, *w2 = w + 2 * (size_t)in;
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00,
               a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
        for (int k = 0; k < k8; k += 8) {
            __m256 b0 = _mm256_loadu_ps(w0 + k), b1 = _mm256_loadu_ps(w1 + k),
                   b2 = _mm256_loadu_ps(w2 + k);
            __m256 v = _mm256_loadu_ps(x0 + k);
            a00 = _mm256_fmadd_ps(v, b0, a00);
            a01 = _mm256_fmadd_ps(v, b1, a01);
            a02 = _mm256_fmadd_ps(v, b2, a02);
            v = _mm256_loadu_ps(x1 + k);
            a10 = _mm256_fmadd_ps(v, b0, a10);
            a11 = _mm256_fmadd_ps(v, b1, a11);
            a12 = _mm256_fmadd_ps(v, b2, a12);
            v = _mm256_loadu_ps(x2 + k);
            a20 = _mm256_fmadd_ps(v, b0, a20);
            a21 = _mm256_fmadd_ps(v, b1, a21);
            a22 = _mm256_fmadd_ps(v, b2, a22);
            v = _mm256_loadu_ps(x3 + k);
            a30 = _mm256_fmadd_ps(v, b0, a30);
            a31 = _mm256_fmadd_ps(v, b1, a31);
            a32 = _mm256_fmadd_ps(v, b2, a32);
        }
        const __m256 acc[ROWS_T][COLS_T] = {
            {a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22}, {a30, a31, a32}};
        for (int r = 0; r < ROWS_T; r++)
            for (int c = 0; c < COLS_T; c++)
                y[(size_t)r * ldy + c] = fin_fma(acc[r][c], x + (size_t)r * ldx, w + (size_t)c * in, k8, in);
        return;
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            const float *xr = x + (size_t)r * ldx, *wc = w + (size_t)c * in;
            __m256 acc = _mm256_setzero_ps();
            for (int k = 0; k < k8; k += 8)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(xr + k), _mm256_loadu_ps(wc + k), acc);
            y[(size_t)r * ldy + c] = fin_fma(acc, xr, wc, k8, in);
        }
}
#endif

typedef void (*tile_fn)(float *, int, const float *, int, const float *, int, int, int);

static tile_fn chosen;

/* AVX2 + FMA where the CPU has them, unless LATHE_NN_KERNEL=plain (tests
 * run the portable kernel that way on any machine) */
static void choose_tile(void)
{
    chosen = tile_plain;
#ifdef FIXED_X86
    const char *env = getenv("LATHE_NN_KERNEL");
    __builtin_cpu_init();
    if (!(env && strcmp(env, "plain") == 0) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        chosen = tile_fma;
#endif
}

static tile_fn pick_tile(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, choose_tile);
    return chosen;
}

const char *nn_fixed_kernel_name(void)
{
    return pick_tile() == tile_plain ? "plain" : "avx2+fma";
}

#define ROW_CHUNK 64  /* rows of x kept in cache while W streams past */
#define COL_BLOCK 48  /* output columns of one thread's task (a multiple of COLS_T) */

void nn_sgemm_fixed(int n, int out, int in, const float *x, int ldx, const float *w, float beta,
                    float *y, int ldy)
{
    tile_fn tile = pick_tile();
    int blocks = (out + COL_BLOCK - 1) / COL_BLOCK, chunks = (n + ROW_CHUNK - 1) / ROW_CHUNK;
    /* one thread for a handful of rows of a small matrix */
    bool par = (size_t)n * out * in >= ((size_t)1 << 18);
    /* task t: the rows of chunk t / blocks by the columns of block t % blocks */
#pragma omp parallel for schedule(static) if (par)
    for (int t = 0; t < chunks * blocks; t++) {
        int r0 = t / blocks * ROW_CHUNK, r1 = r0 + ROW_CHUNK < n ? r0 + ROW_CHUNK : n;
        int c0 = t % blocks * COL_BLOCK, c1 = c0 + COL_BLOCK < out ? c0 + COL_BLOCK : out;
        float keep[ROWS_T * COL_BLOCK];
        for (int r = r0; r < r1; r += ROWS_T) {
            int R = r1 - r < ROWS_T ? r1 - r : ROWS_T;
            float *yr = y + (size_t)r * ldy;
            if (beta != 0.0f) /* y's old values, before the tile overwrites them */
                for (int i = 0; i < R; i++)
                    memcpy(keep + i * COL_BLOCK, yr + (size_t)i * ldy + c0,
                           (size_t)(c1 - c0) * sizeof(float));
            for (int c = c0; c < c1; c += COLS_T) {
                int C = c1 - c < COLS_T ? c1 - c : COLS_T;
                tile(yr + c, ldy, x + (size_t)r * ldx, ldx, w + (size_t)c * in, in, R, C);
            }
            if (beta != 0.0f)
                for (int i = 0; i < R; i++)
                    for (int c = c0; c < c1; c++)
                        yr[(size_t)i * ldy + c] += beta * keep[i * COL_BLOCK + (c - c0)];
        }
    }
}
