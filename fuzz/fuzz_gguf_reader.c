/* fuzz_gguf_reader.c: libFuzzer target for the tests' GGUF reader
 * (tests/export/gguf_reader.c), the reader that checks `lathe export`'s
 * files against the specification. Any input must be refused with a
 * message, or parsed into key/values and tensors that lie inside the
 * buffer: every string, array element and tensor byte is read back, every
 * tensor is aligned and found again by its name. */
#include "gguf_reader.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t *fz_lo, *fz_hi;
static volatile unsigned fz_sink;

static void fz_inside(const void *p, uint64_t n)
{
    const uint8_t *b = p;
    if (n && (b < fz_lo || b > fz_hi || n > (uint64_t)(fz_hi - b))) abort();
    for (uint64_t i = 0; i < n; i++) fz_sink += b[i];
}

static void fz_value(const gr_value *v)
{
    if (v->type == 8) fz_inside(v->str, v->len);
    if (v->type != 9) return;
    if (v->raw) {
        fz_inside(v->raw, v->arr_n * gr_scalar_size(v->arr_type));
        int64_t i64;
        double f;
        if (v->arr_n && (!gr_arr_int(v, v->arr_n - 1, &i64) || !gr_arr_float(v, 0, &f))) abort();
        if (gr_arr_int(v, v->arr_n, &i64)) abort();
        return;
    }
    for (uint64_t i = 0; i < v->arr_n; i++) fz_value(&v->arr[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gr_file f;
    char err[256];
    err[0] = 0;
    if (!gr_parse(&f, data, size, err, sizeof err)) {
        if (!err[0]) abort(); /* a refusal always says why */
        return 0;
    }
    fz_lo = data;
    fz_hi = data + size;
    for (uint64_t i = 0; i < f.n_kv; i++) {
        fz_inside(f.kv[i].key, f.kv[i].key_len);
        fz_value(&f.kv[i].v);
    }
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gr_tensor *t = &f.tensors[i];
        fz_inside(t->name, t->name_len);
        fz_inside(t->data, t->nbytes);
        if ((uint64_t)(t->data - data) % f.alignment != 0) abort();
        char name[65];
        memcpy(name, t->name, t->name_len);
        name[t->name_len] = 0;
        if (strlen(name) == t->name_len && gr_tensor_find(&f, name) != t) abort();
    }
    gr_free(&f);
    return 0;
}
