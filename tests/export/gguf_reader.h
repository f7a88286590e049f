/* gguf_reader.h: a GGUF reader written for the tests (and the fuzzer) from
 * the published specification (ggml's docs/gguf.md, version 3), separately
 * from lib/export's writer, so the writer is checked against the spec and
 * not against itself. It parses a whole file held in memory: every
 * key/value (arrays, nested arrays and strings included), every tensor
 * info, the alignment and the data section, and checks bounds, types,
 * alignment, sizes, duplicate names and overlapping tensors. A malformed
 * file is refused with a message; it never reads outside the buffer. */
#ifndef LATHE_TESTS_GGUF_READER_H
#define LATHE_TESTS_GGUF_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One metadata value. Scalars are in u / i / f (and b); a string in
 * str/len; an array has arr_type, arr_n and its elements in arr (each one
 * a gr_value), or, for a scalar array, its raw little-endian bytes in raw. */
typedef struct gr_value {
    uint32_t type;
    uint64_t u;
    int64_t i;
    double f;
    const char *str; /* not NUL-terminated */
    uint64_t len;
    uint32_t arr_type;
    uint64_t arr_n;
    struct gr_value *arr; /* strings and arrays of arrays: arr_n values */
    const uint8_t *raw;   /* scalar arrays: arr_n elements */
} gr_value;

typedef struct gr_kv {
    const char *key;
    uint64_t key_len;
    gr_value v;
} gr_kv;

typedef struct gr_tensor {
    const char *name;
    uint64_t name_len;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;  /* ggml_type */
    uint64_t offset; /* from the start of the data section */
    uint64_t nbytes;
    const uint8_t *data;
} gr_tensor;

typedef struct gr_file {
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gr_kv *kv;
    gr_tensor *tensors;
    uint32_t alignment;
    uint64_t data_offset; /* where the data section starts */
} gr_file;

/* Parses buf[len] (borrowed: the file points into it). */
bool gr_parse(gr_file *f, const void *buf, size_t len, char *err, size_t errsz);
void gr_free(gr_file *f);

/* Look-ups (NULL when absent). */
const gr_kv *gr_find(const gr_file *f, const char *key);
const gr_tensor *gr_tensor_find(const gr_file *f, const char *name);
/* Element i of a scalar array as an integer / a float (element type as
 * stored); false when it is not a scalar array or i is out of range. */
bool gr_arr_int(const gr_value *v, uint64_t i, int64_t *out);
bool gr_arr_float(const gr_value *v, uint64_t i, double *out);
/* The size in bytes of one element of a scalar type, 0 for others. */
size_t gr_scalar_size(uint32_t type);

#endif
