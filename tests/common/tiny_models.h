/* tiny_models.h: random models and adapters shared by the tests of more
 * than one part (tests/export, tests/serve). Include it after cmocka.h:
 * its helpers fail the test with cmocka's asserts. Only lib/nn and
 * lib/base, no trainer. */
#ifndef LATHE_TEST_TINY_MODELS_H
#define LATHE_TEST_TINY_MODELS_H

#include "base/base.h"
#include "nn/nn.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A random LoRA adapter of the model in model_dir, written into dir as a
 * PEFT folder: the adapter of o (mode TR_MODE_LORA, its rank, alpha,
 * targets and seed), every float std * N(0, 1) from rng_seed. */
static inline void tm_write_adapter(tr_backend *be, const char *model_dir, const char *dir,
                                    const tr_model_opts *o, uint64_t rng_seed, float std)
{
    char err[512];
    tr_model m;
    assert_true(tr_model_load(&m, model_dir, o, be, err, sizeof err));
    tr_rng rng;
    tr_rng_seed(&rng, rng_seed);
    for (size_t i = 0; i < m.n_floats; i++) m.param_data[i] = std * tr_rng_normal(&rng);
    assert_true(tr_mkdir_p(dir, err, sizeof err));
    char *p = path_join(dir, "adapter_model.safetensors");
    assert_int_equal(tr_model_save_params(&m, p, TR_F32), 0);
    free(p);
    char *json = tr_adapter_config_json(&m, model_dir);
    p = path_join(dir, "adapter_config.json");
    assert_int_equal(file_write_atomic(p, json, strlen(json)), 0);
    free(p);
    free(json);
    tr_model_free(&m);
}

#endif
