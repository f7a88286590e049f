/* engine_kv.c: the serving engine's KV cache in fixed-size blocks: one pool
 * of kv_bytes, [n_blocks, layers, kv_block, kv_dim] floats for k and the same
 * for v (the layout tr_model_forward_batch reads), and a free list of block
 * ids. A request takes ceil((prompt + max_tokens) / kv_block) blocks at
 * admission and gives them back when it ends, so a running request never
 * runs out of cache and nothing is allocated per step. */
#include "serve/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>

size_t sv_kv_block_bytes(const tr_model *m, int block_len)
{
    size_t kvd = (size_t)m->cfg.n_kv_heads * m->cfg.head_dim;
    return 2 * (size_t)m->cfg.n_layers * (size_t)block_len * kvd * sizeof(float);
}

bool sv_kv_init(sv_kv *kv, const tr_model *m, int block_len, size_t bytes, char *err,
                size_t errsz)
{
    size_t per = sv_kv_block_bytes(m, block_len);
    size_t n = bytes / per;
    if (n < 1 || n > INT32_MAX) {
        snprintf(err, errsz, "kv_bytes %zu holds %zu KV blocks of %d tokens (%zu bytes each); "
                 "give at least %zu bytes", bytes, n, block_len, per, per);
        return false;
    }
    size_t half = n * per / 2 / sizeof(float);
    kv->pool.k = xcalloc(half, sizeof(float)); /* zero pages: touched only when used */
    kv->pool.v = xcalloc(half, sizeof(float));
    kv->pool.block_len = block_len;
    kv->n_blocks = kv->n_free = (int)n;
    kv->free_ids = xmalloc(n * sizeof *kv->free_ids);
    for (int i = 0; i < kv->n_blocks; i++) kv->free_ids[i] = kv->n_blocks - 1 - i;
    return true;
}

void sv_kv_free(sv_kv *kv)
{
    free(kv->pool.k);
    free(kv->pool.v);
    free(kv->free_ids);
}

int sv_kv_blocks_for(const sv_kv *kv, int tokens)
{
    return (tokens + kv->pool.block_len - 1) / kv->pool.block_len;
}

bool sv_kv_take(sv_kv *kv, int n, int32_t *ids)
{
    if (n > kv->n_free) return false;
    for (int i = 0; i < n; i++) ids[i] = kv->free_ids[--kv->n_free];
    return true;
}

void sv_kv_give(sv_kv *kv, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++) kv->free_ids[kv->n_free++] = ids[i];
}
