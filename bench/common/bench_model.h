/* bench_model.h: the Qwen2.5-0.5B-shaped model with random weights that the
 * training and serving benchmarks run on, written once to a folder and
 * reused. Header-only (bench/common has no program of its own). */
#ifndef LATHE_BENCH_MODEL_H
#define LATHE_BENCH_MODEL_H

#include "nn/nn.h"

#include <stdio.h>

/* Qwen2.5-0.5B (its config.json): hidden 896, intermediate 4864, 24 layers,
 * 14 heads, 2 kv heads, vocab 151936, tied embeddings, rope_theta 1e6, q/k/v
 * bias. small: 4 layers and a 32k vocabulary of the same width. */
static inline tr_config bench_qwen_config(bool small)
{
    tr_config c;
    tr_preset_config("tiny", TR_ARCH_QWEN2, &c);
    c.vocab = small ? 32000 : 151936;
    c.dim = 896;
    c.hidden = 4864;
    c.n_layers = small ? 4 : 24;
    c.n_heads = 14;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    c.max_pos = 32768;
    c.rope_theta = 1000000.0;
    c.tie_embeddings = true;
    return c;
}

/* Writes the model of config c and dtype into dir unless a model of the same
 * vocabulary, depth and dtype is there already. False with a message. */
static inline bool bench_model_ready(const char *dir, const tr_config *c, tr_dtype dtype,
                                     char *err, size_t errsz)
{
    tr_config have;
    if (tr_config_load(&have, dir, err, errsz) && have.vocab == c->vocab &&
        have.n_layers == c->n_layers && have.dtype == dtype)
        return true;
    printf("writing the random model to %s ...\n", dir);
    fflush(stdout);
    return tr_init_model(dir, c, dtype, 1, err, errsz);
}

#endif
