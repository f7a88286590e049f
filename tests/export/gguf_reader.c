/* gguf_reader.c: the tests' GGUF reader (gguf_reader.h), from ggml's
 * docs/gguf.md: little-endian; magic "GGUF"; version 3; u64 tensor and
 * key/value counts; each key/value a string key, a u32 type and the value;
 * strings are a u64 length and bytes; arrays a u32 element type, a u64
 * count and the elements; tensor infos a string name, u32 n_dims, u64
 * dims, u32 ggml_type, u64 offset; then padding to general.alignment (32
 * when absent) and the data, every tensor's offset a multiple of it. */
#include "gguf_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    GR_UINT8, GR_INT8, GR_UINT16, GR_INT16, GR_UINT32, GR_INT32, GR_FLOAT32, GR_BOOL,
    GR_STRING, GR_ARRAY, GR_UINT64, GR_INT64, GR_FLOAT64, GR_NTYPES
};

#define GR_MAX_DEPTH 4
#define GR_MAX_KEY 65535u
#define GR_MAX_NAME 64u

typedef struct gr_cur {
    const uint8_t *p;
    size_t len, pos;
    char *err;
    size_t errsz;
    bool failed;
} gr_cur;

static bool gr_fail(gr_cur *c, const char *what)
{
    if (!c->failed) snprintf(c->err, c->errsz, "offset %zu: %s", c->pos, what);
    c->failed = true;
    return false;
}

static bool gr_take(gr_cur *c, void *out, size_t n)
{
    if (c->failed) return false;
    if (n > c->len - c->pos) return gr_fail(c, "truncated");
    memcpy(out, c->p + c->pos, n);
    c->pos += n;
    return true;
}

static bool gr_u32(gr_cur *c, uint32_t *v) { return gr_take(c, v, 4); }
static bool gr_u64(gr_cur *c, uint64_t *v) { return gr_take(c, v, 8); }

static bool gr_string(gr_cur *c, const char **s, uint64_t *len)
{
    if (!gr_u64(c, len)) return false;
    if (*len > c->len - c->pos) return gr_fail(c, "string longer than the file");
    *s = (const char *)c->p + c->pos;
    c->pos += (size_t)*len;
    return true;
}

size_t gr_scalar_size(uint32_t type)
{
    static const size_t sz[GR_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < GR_NTYPES ? sz[type] : 0;
}

static bool gr_scalar(gr_cur *c, uint32_t type, gr_value *v)
{
    uint8_t b[8] = {0};
    size_t n = gr_scalar_size(type);
    if (!gr_take(c, b, n)) return false;
    switch (type) {
    case GR_UINT8: v->u = b[0]; v->i = b[0]; break;
    case GR_INT8: { int8_t x; memcpy(&x, b, 1); v->i = x; v->u = (uint64_t)x; break; }
    case GR_UINT16: { uint16_t x; memcpy(&x, b, 2); v->u = x; v->i = x; break; }
    case GR_INT16: { int16_t x; memcpy(&x, b, 2); v->i = x; v->u = (uint64_t)x; break; }
    case GR_UINT32: { uint32_t x; memcpy(&x, b, 4); v->u = x; v->i = x; break; }
    case GR_INT32: { int32_t x; memcpy(&x, b, 4); v->i = x; v->u = (uint64_t)x; break; }
    case GR_UINT64: memcpy(&v->u, b, 8); v->i = (int64_t)v->u; break;
    case GR_INT64: memcpy(&v->i, b, 8); v->u = (uint64_t)v->i; break;
    case GR_FLOAT32: { float x; memcpy(&x, b, 4); v->f = x; break; }
    case GR_FLOAT64: memcpy(&v->f, b, 8); break;
    case GR_BOOL:
        if (b[0] > 1) return gr_fail(c, "bool that is neither 0 nor 1");
        v->u = b[0];
        break;
    }
    return true;
}

static void gr_value_free(gr_value *v)
{
    if (v->arr)
        for (uint64_t i = 0; i < v->arr_n; i++) gr_value_free(&v->arr[i]);
    free(v->arr);
    v->arr = NULL;
}

static bool gr_value_read(gr_cur *c, uint32_t type, gr_value *v, int depth);

static bool gr_array(gr_cur *c, gr_value *v, int depth)
{
    if (depth >= GR_MAX_DEPTH) return gr_fail(c, "arrays nested too deep");
    if (!gr_u32(c, &v->arr_type) || !gr_u64(c, &v->arr_n)) return false;
    if (v->arr_type >= GR_NTYPES) return gr_fail(c, "unknown array element type");
    size_t es = gr_scalar_size(v->arr_type);
    if (es) {
        if (v->arr_n > (c->len - c->pos) / es) return gr_fail(c, "array longer than the file");
        v->raw = c->p + c->pos;
        for (uint64_t i = 0; i < v->arr_n && v->arr_type == GR_BOOL; i++)
            if (v->raw[i] > 1) return gr_fail(c, "bool that is neither 0 nor 1");
        c->pos += (size_t)(v->arr_n * es);
        return true;
    }
    /* strings take 8 bytes at least, arrays 12 */
    if (v->arr_n > (c->len - c->pos) / 8) return gr_fail(c, "array longer than the file");
    v->arr = calloc((size_t)v->arr_n + 1, sizeof *v->arr);
    if (!v->arr) return gr_fail(c, "out of memory");
    for (uint64_t i = 0; i < v->arr_n; i++)
        if (!gr_value_read(c, v->arr_type, &v->arr[i], depth + 1)) return false;
    return true;
}

static bool gr_value_read(gr_cur *c, uint32_t type, gr_value *v, int depth)
{
    memset(v, 0, sizeof *v);
    v->type = type;
    if (type >= GR_NTYPES) return gr_fail(c, "unknown value type");
    if (type == GR_STRING) return gr_string(c, &v->str, &v->len);
    if (type == GR_ARRAY) return gr_array(c, v, depth);
    return gr_scalar(c, type, v);
}

static bool gr_read_kvs(gr_cur *c, gr_file *f)
{
    /* a key/value takes 8 + 4 + 1 bytes at least */
    if (f->n_kv > (c->len - c->pos) / 13) return gr_fail(c, "more key/values than fit the file");
    f->kv = calloc((size_t)f->n_kv + 1, sizeof *f->kv);
    if (!f->kv) return gr_fail(c, "out of memory");
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gr_kv *kv = &f->kv[i];
        uint32_t type;
        if (!gr_string(c, &kv->key, &kv->key_len) || !gr_u32(c, &type)) return false;
        if (kv->key_len == 0 || kv->key_len > GR_MAX_KEY) return gr_fail(c, "empty or too long key");
        for (uint64_t j = 0; j < i; j++)
            if (f->kv[j].key_len == kv->key_len && !memcmp(f->kv[j].key, kv->key, kv->key_len))
                return gr_fail(c, "duplicate key");
        if (!gr_value_read(c, type, &kv->v, 0)) return false;
    }
    return true;
}

/* Bytes of a tensor of a non-quantized type: 0 when the type is unknown. */
static uint64_t gr_type_size(uint32_t t)
{
    switch (t) {
    case 0: return 4;               /* F32 */
    case 1: case 30: return 2;      /* F16, BF16 */
    case 24: return 1;              /* I8 */
    case 25: return 2;              /* I16 */
    case 26: return 4;              /* I32 */
    case 27: case 28: return 8;     /* I64, F64 */
    default: return 0;
    }
}

static bool gr_read_tensor_info(gr_cur *c, gr_tensor *t)
{
    if (!gr_string(c, &t->name, &t->name_len) || !gr_u32(c, &t->n_dims)) return false;
    if (t->name_len == 0 || t->name_len > GR_MAX_NAME) return gr_fail(c, "tensor name empty or over 64 bytes");
    if (t->n_dims < 1 || t->n_dims > 4) return gr_fail(c, "tensor with other than 1..4 dimensions");
    uint64_t es;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (!gr_u64(c, &t->ne[d])) return false;
    if (!gr_u32(c, &t->type) || !gr_u64(c, &t->offset)) return false;
    if ((es = gr_type_size(t->type)) == 0) return gr_fail(c, "tensor type this reader does not know");
    uint64_t n = es;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] == 0 || n > UINT64_MAX / t->ne[d]) return gr_fail(c, "tensor size 0 or overflowing");
        n *= t->ne[d];
    }
    t->nbytes = n;
    return true;
}

static bool gr_read_tensors(gr_cur *c, gr_file *f)
{
    /* a tensor info takes 8 + 1 + 4 + 8 + 4 + 8 bytes at least */
    if (f->n_tensors > (c->len - c->pos) / 33) return gr_fail(c, "more tensors than fit the file");
    f->tensors = calloc((size_t)f->n_tensors + 1, sizeof *f->tensors);
    if (!f->tensors) return gr_fail(c, "out of memory");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        if (!gr_read_tensor_info(c, &f->tensors[i])) return false;
        for (uint64_t j = 0; j < i; j++)
            if (f->tensors[j].name_len == f->tensors[i].name_len &&
                !memcmp(f->tensors[j].name, f->tensors[i].name, f->tensors[i].name_len))
                return gr_fail(c, "duplicate tensor name");
    }
    return true;
}

static bool gr_set_alignment(gr_cur *c, gr_file *f)
{
    f->alignment = 32;
    const gr_kv *a = gr_find(f, "general.alignment");
    if (!a) return true;
    if (a->v.type != GR_UINT32) return gr_fail(c, "general.alignment is not a uint32");
    if (a->v.u == 0 || (a->v.u & (a->v.u - 1))) return gr_fail(c, "general.alignment is not a power of two");
    f->alignment = (uint32_t)a->v.u;
    return true;
}

static int gr_by_offset(const void *a, const void *b)
{
    const gr_tensor *x = *(const gr_tensor *const *)a, *y = *(const gr_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Offsets aligned, inside the file, no two tensors overlapping. */
static bool gr_check_data(gr_cur *c, gr_file *f)
{
    uint64_t start = (c->pos + f->alignment - 1) / f->alignment * f->alignment;
    if (start > c->len) return gr_fail(c, "no room for the data section");
    f->data_offset = start;
    uint64_t room = c->len - start;
    gr_tensor **order = calloc((size_t)f->n_tensors + 1, sizeof *order);
    if (!order) return gr_fail(c, "out of memory");
    bool ok = true;
    for (uint64_t i = 0; i < f->n_tensors && ok; i++) {
        gr_tensor *t = &f->tensors[i];
        order[i] = t;
        if (t->offset % f->alignment) ok = gr_fail(c, "tensor offset not aligned");
        else if (t->offset > room || t->nbytes > room - t->offset) ok = gr_fail(c, "tensor data past the end");
        else t->data = c->p + start + t->offset;
    }
    if (ok) qsort(order, (size_t)f->n_tensors, sizeof *order, gr_by_offset);
    for (uint64_t i = 1; i < f->n_tensors && ok; i++)
        if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset)
            ok = gr_fail(c, "tensors overlap");
    free(order);
    return ok;
}

bool gr_parse(gr_file *f, const void *buf, size_t len, char *err, size_t errsz)
{
    memset(f, 0, sizeof *f);
    gr_cur c = {.p = buf, .len = len, .err = err, .errsz = errsz};
    uint32_t magic = 0;
    bool ok = gr_u32(&c, &magic) && (magic == 0x46554747u || gr_fail(&c, "not GGUF (magic)")) &&
              gr_u32(&c, &f->version) && (f->version == 3 || gr_fail(&c, "not GGUF version 3")) &&
              gr_u64(&c, &f->n_tensors) && gr_u64(&c, &f->n_kv) && gr_read_kvs(&c, f) &&
              gr_set_alignment(&c, f) && gr_read_tensors(&c, f) && gr_check_data(&c, f);
    if (!ok) gr_free(f);
    return ok;
}

void gr_free(gr_file *f)
{
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++) gr_value_free(&f->kv[i].v);
    free(f->kv);
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

const gr_kv *gr_find(const gr_file *f, const char *key)
{
    size_t n = strlen(key);
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (f->kv[i].key_len == n && !memcmp(f->kv[i].key, key, n)) return &f->kv[i];
    return NULL;
}

const gr_tensor *gr_tensor_find(const gr_file *f, const char *name)
{
    size_t n = strlen(name);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].name_len == n && !memcmp(f->tensors[i].name, name, n)) return &f->tensors[i];
    return NULL;
}

static bool gr_elem(const gr_value *v, uint64_t i, gr_value *out)
{
    if (v->type != GR_ARRAY || !v->raw || i >= v->arr_n) return false;
    size_t es = gr_scalar_size(v->arr_type);
    gr_cur c = {.p = v->raw + i * es, .len = es, .err = NULL, .errsz = 0};
    char e[8];
    c.err = e;
    c.errsz = sizeof e;
    memset(out, 0, sizeof *out);
    return gr_scalar(&c, v->arr_type, out);
}

bool gr_arr_int(const gr_value *v, uint64_t i, int64_t *out)
{
    gr_value e;
    if (!gr_elem(v, i, &e)) return false;
    *out = e.i;
    return true;
}

bool gr_arr_float(const gr_value *v, uint64_t i, double *out)
{
    gr_value e;
    if (!gr_elem(v, i, &e)) return false;
    *out = e.f;
    return true;
}
