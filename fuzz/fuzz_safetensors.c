/* fuzz_safetensors.c: libFuzzer target for the safetensors reader. Any
 * input must be rejected with a message or parsed into tensors whose data
 * lies inside the buffer (every float tensor is read back). */
#include "hf/hf.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_archive a;
    char err[512];
    if (!st_parse_buffer(&a, data, size, "fuzz", err, sizeof err)) {
        if (!err[0]) abort(); /* a rejection always says why */
        return 0;
    }
    for (size_t i = 0; i < a.n; i++) {
        const st_tensor *t = &a.tensors[i];
        const uint8_t *p = t->data;
        if (p < data || p + t->nbytes > data + size) abort();
        if (st_find(&a, t->name) != t) abort();
        if (!tr_dtype_is_float(t->dtype) || t->numel > 4096) continue;
        float *f = malloc((size_t)t->numel * sizeof(float) + 1);
        tr_to_f32(f, t->data, t->dtype, (size_t)t->numel);
        free(f);
    }
    st_close(&a);
    return 0;
}
