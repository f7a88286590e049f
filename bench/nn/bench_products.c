/* bench_products.c (bench_nn): the serving path's fixed-order product (nn_sgemm_fixed,
 * lib/nn/matmul_fixed.c) against OpenBLAS's sgemm on the same inputs, in
 * the same process, for the shapes of Qwen2.5-0.5B's projections and the
 * row counts a serving step has (1 decode row to a 512-token prefill).
 * Prints the time of each and the ratio fixed / sgemm (above 1: slower).
 *
 * usage: bench_nn [--threads N] [--reps R] */
#include "nn/nn.h"
#include "nn/nn_internal.h"

#include "../common/bench_clock.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(float *a, size_t n)
{
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        a[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench_nn: unknown option '%s' (try --threads N --reps R)\n",
                    argv[i]);
            return 2;
        }
    }
    if (threads < 1 || reps < 1) {
        fprintf(stderr, "bench_nn: --threads and --reps must be at least 1\n");
        return 2;
    }
    tr_set_threads(threads);
    static const struct { const char *name; int out, in; } shapes[] = {
        {"q/o 896x896", 896, 896},     {"k/v 128x896", 128, 896},
        {"gate/up 4864x896", 4864, 896}, {"down 896x4864", 896, 4864},
        {"lm_head 151936x896", 151936, 896},
    };
    static const int rows[] = {1, 8, 32, 128, 512};
    printf("fixed-order kernel: %s, %d threads, best of %d\n", nn_fixed_kernel_name(), threads,
           reps);
    printf("%-20s %5s %12s %12s %8s\n", "product", "rows", "sgemm ms", "fixed ms", "ratio");
    double sum_log = 0;
    int cells = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int out = shapes[s].out, in = shapes[s].in;
        float *w = malloc(sizeof(float) * (size_t)out * in);
        fill(w, (size_t)out * in);
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            int n = rows[r];
            if ((double)n * out * in > 2e10) continue; /* lm_head over a whole prefill */
            float *x = malloc(sizeof(float) * (size_t)n * in);
            float *y = malloc(sizeof(float) * (size_t)n * out);
            fill(x, (size_t)n * in);
            double best_b = 1e30, best_f = 1e30;
            for (int k = 0; k < reps; k++) {
                double t0 = now_s();
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w,
                            in, 0.0f, y, out);
                double t1 = now_s();
                nn_sgemm_fixed(n, out, in, x, in, w, 0.0f, y, out);
                double t2 = now_s();
                if (t1 - t0 < best_b) best_b = t1 - t0;
                if (t2 - t1 < best_f) best_f = t2 - t1;
            }
            printf("%-20s %5d %12.3f %12.3f %7.2fx\n", shapes[s].name, n, best_b * 1e3,
                   best_f * 1e3, best_f / best_b);
            sum_log += log(best_f / best_b);
            cells++;
            free(x);
            free(y);
        }
        free(w);
    }
    printf("geometric mean of fixed / sgemm: %.2fx over %d products\n", exp(sum_log / cells),
           cells);
    return 0;
}
