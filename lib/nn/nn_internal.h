/* nn_internal.h: what the files of lib/nn share and nothing outside uses. */
#ifndef LATHE_NN_INTERNAL_H
#define LATHE_NN_INTERNAL_H

#include "nn/nn.h"

#include <stddef.h>

/* A workspace block handed out in pieces: nn_take gives n floats, each
 * piece 64-byte aligned; on the sizing pass (base NULL) it only counts
 * (model_fwd.c, model_batch.c). */
typedef struct carver {
    float *base; /* NULL on the sizing pass */
    size_t used;
} carver;

static inline float *nn_take(carver *c, size_t n)
{
    float *p = c->base ? c->base + c->used : NULL;
    c->used += (n + 15) & ~(size_t)15;
    return p;
}

/* Frees the inference workspace of tr_model_forward_batch (model_batch.c);
 * tr_model_ws_free calls it. */
void tr_batch_ws_free(tr_model *m);

/* y[n,out] = beta*y + x[n,in] . W[out,in]^T (W fp32, rows contiguous) in a
 * fixed order of additions: row i's bits do not depend on n, on the other
 * rows or on the thread count (matmul_fixed.c). */
void nn_sgemm_fixed(int n, int out, int in, const float *x, int ldx, const float *w, float beta,
                    float *y, int ldy);
/* Which kernel nn_sgemm_fixed runs on this CPU: "avx2+fma" or "plain". */
const char *nn_fixed_kernel_name(void);

#endif
