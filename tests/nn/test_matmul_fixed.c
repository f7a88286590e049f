/* test_matmul_fixed.c: nn_sgemm_fixed, the serving path's product, gives a
 * row the same bits whatever the number of rows, the row's place among them
 * and the thread count, and is close to OpenBLAS's product. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "nn/nn.h"
#include "nn/nn_internal.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static void fill(float *a, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        a[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* shapes with every remainder: in % 8 != 0, out % 2 != 0, n past a chunk */
static const int shapes[][2] = {{896, 896}, {37, 61}, {130, 7}, {8, 1}, {5, 200}};

static void test_rows_invariant(void **state)
{
    (void)state;
    const int N = 70; /* more than one 64-row chunk */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int out = shapes[s][0], in = shapes[s][1];
        float *x = malloc(sizeof(float) * N * in), *w = malloc(sizeof(float) * out * in);
        float *ref = malloc(sizeof(float) * N * out), *y = malloc(sizeof(float) * N * out);
        fill(x, (size_t)N * in, 1 + (unsigned)s);
        fill(w, (size_t)out * in, 100 + (unsigned)s);
        omp_set_num_threads(1);
        for (int i = 0; i < N; i++) /* each row alone */
            nn_sgemm_fixed(1, out, in, x + (size_t)i * in, in, w, 0.0f, ref + (size_t)i * out, out);
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            for (int n = 1; n <= N; n++) /* rows 0..n-1 together */
                for (int off = 0; off + n <= N; off += n > 9 ? N : 3) {
                    nn_sgemm_fixed(n, out, in, x + (size_t)off * in, in, w, 0.0f, y, out);
                    for (int i = 0; i < n; i++)
                        if (memcmp(y + (size_t)i * out, ref + (size_t)(off + i) * out,
                                   sizeof(float) * out) != 0)
                            fail_msg("out=%d in=%d: row %d among %d (from %d, %d threads) differs",
                                     out, in, off + i, n, off, threads);
                }
        }
        /* close to OpenBLAS */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x, in, w, in, 0.0f,
                    y, out);
        for (size_t i = 0; i < (size_t)N * out; i++)
            if (fabsf(y[i] - ref[i]) > 1e-5f * (1.0f + (float)in))
                fail_msg("out=%d in=%d: element %zu: %g against OpenBLAS's %g", out, in, i,
                         ref[i], y[i]);
        free(x), free(w), free(ref), free(y);
    }
    omp_set_num_threads(2);
}

/* beta and a leading dimension wider than the row */
static void test_beta_and_strides(void **state)
{
    (void)state;
    int n = 9, out = 13, in = 19, ldx = 24, ldy = 20;
    float *x = calloc((size_t)n * ldx, sizeof(float)), *w = malloc(sizeof(float) * out * in);
    float *y = malloc(sizeof(float) * n * ldy), *z = malloc(sizeof(float) * n * ldy);
    fill(x, (size_t)n * ldx, 7);
    fill(w, (size_t)out * in, 8);
    fill(y, (size_t)n * ldy, 9);
    memcpy(z, y, sizeof(float) * n * ldy);
    nn_sgemm_fixed(n, out, in, x, ldx, w, 0.5f, y, ldy);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < ldy; o++) {
            float got = y[(size_t)i * ldy + o];
            if (o >= out) { /* past the product: untouched */
                assert_true(got == z[(size_t)i * ldy + o]);
                continue;
            }
            double want = 0.5 * z[(size_t)i * ldy + o];
            for (int k = 0; k < in; k++) want += (double)x[(size_t)i * ldx + k] * w[(size_t)o * in + k];
            assert_true(fabs(got - want) < 1e-5);
        }
    free(x), free(w), free(y), free(z);
}

int main(void)
{
    fprintf(stderr, "# kernel: %s\n", nn_fixed_kernel_name());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_invariant),
        cmocka_unit_test(test_beta_and_strides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
