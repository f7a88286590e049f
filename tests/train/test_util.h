/* test_util.h: helpers shared by the trainer's tests: temporary folders and
 * small random models of each architecture with weights large enough that
 * gradients are far from zero. */
#ifndef LATHE_TEST_TRAIN_UTIL_H
#define LATHE_TEST_TRAIN_UTIL_H

#include "train/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *tu_tempdir(void)
{
    char *d = xstrdup("/tmp/lathe-train-test-XXXXXX");
    if (!mkdtemp(d)) abort();
    return d;
}

static inline void tu_rmdir(char *dir)
{
    char err[512];
    if (file_remove_tree(dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    free(dir);
}

/* A tiny config of arch: vocab 48, dim 16, 2 layers, 4 heads, 2 kv heads;
 * llama gets Llama 3 rope scaling, attention and mlp biases and untied
 * embeddings; mistral a sliding window of 3. */
static inline tr_config tu_tiny_config(tr_arch arch)
{
    tr_config c;
    if (!tr_preset_config("tiny", arch, &c)) abort();
    c.vocab = 48;
    c.dim = 16;
    c.hidden = 24;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 4;
    c.rope_theta = 10000;
    if (arch == TR_ARCH_LLAMA) {
        c.rope_kind = TR_ROPE_LLAMA3;
        c.rope_factor = 8;
        c.rope_low_freq = 1;
        c.rope_high_freq = 4;
        c.rope_orig_max = 16;
        c.qkv_bias = c.o_bias = c.mlp_bias = true;
        c.tie_embeddings = false;
    }
    if (arch == TR_ARCH_MISTRAL) c.sliding_window = 3;
    return c;
}

/* Writes a random model of config c into dir with weights of standard
 * deviation `std` (norms 1 +- 0.1, biases +- 0.1). */
static inline void tu_make_model(const char *dir, const tr_config *c, float std, tr_dtype dtype,
                                 uint64_t seed)
{
    char err[512];
    if (!tr_init_model(dir, c, TR_F32, seed, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    tr_backend *be = tr_backend_cpu_create(0);
    tr_model m;
    tr_model_opts o = {.mode = TR_MODE_FULL};
    if (!tr_model_load(&m, dir, &o, be, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    tr_rng r;
    tr_rng_seed(&r, seed + 1);
    for (size_t i = 0; i < m.n_params; i++) {
        const tr_param *p = &m.params[i];
        float *v = m.param_data + p->offset;
        bool norm = strstr(p->name, "norm") != NULL, bias = strstr(p->name, ".bias") != NULL;
        for (size_t k = 0; k < p->numel; k++) {
            float z = tr_rng_normal(&r);
            v[k] = norm ? 1.0f + 0.1f * z : bias ? 0.1f * z : std * z;
        }
    }
    char *path = path_join(dir, "model.safetensors");
    if (tr_model_save_params(&m, path, dtype) != 0) abort();
    free(path);
    tr_model_free(&m);
    be->destroy(be);
    /* the config's dtype follows the file */
    tr_config c2 = *c;
    c2.dtype = dtype;
    char *json = tr_config_to_json(&c2);
    path = path_join(dir, "config.json");
    if (file_write_atomic(path, json, strlen(json)) != 0) abort();
    free(path);
    free(json);
}

#endif
