/* gguf_write.c: the GGUF writer (export.h), after ggml's docs/gguf.md,
 * version 3. Key/values are serialised as they are added; tensor infos are
 * kept and their data produced only when the file is written:
 *
 *   magic u32 "GGUF", version u32 3, tensor_count u64, kv_count u64,
 *   kv_count x (key string, value type u32, value),
 *   tensor_count x (name string, n_dims u32, ne u64[n_dims], type u32,
 *                   offset u64 from the start of the data section),
 *   padding to the alignment, the data section (each tensor aligned).
 *
 * Strings are a u64 length and the bytes, no NUL. Little-endian (the
 * machines lathe runs on). */
#include "export/export.h"

#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_MAX_KEY 65535u
#define GGUF_MAX_NAME 63u

typedef struct gguf_wtensor {
    char *name;
    gguf_ggml_type type;
    int ndim;
    uint64_t ne[4];
    size_t nbytes;
    void *data;        /* a copy, or NULL when fill produces the bytes */
    gguf_fill_fn fill;
    void *ud;
} gguf_wtensor;

struct gguf_writer {
    sb kv;            /* the serialised key/values */
    char **keys;
    size_t n_kv, cap_kv;
    gguf_wtensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
};

gguf_writer *gguf_writer_new(void)
{
    gguf_writer *w = xcalloc(1, sizeof *w);
    sb_init(&w->kv);
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w) return;
    sb_free(&w->kv);
    for (size_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    free(w);
}

/* ---- serialisation ---- */

static void put_bytes(sb *s, const void *p, size_t n)
{
    sb_putn(s, (const char *)p, n);
}

static void put_u32(sb *s, uint32_t v)
{
    put_bytes(s, &v, 4);
}

static void put_u64(sb *s, uint64_t v)
{
    put_bytes(s, &v, 8);
}

static void put_str(sb *s, const char *str, size_t len)
{
    put_u64(s, len);
    put_bytes(s, str, len);
}

static size_t scalar_size(gguf_type t)
{
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* Registers key and writes it with its type; false for a bad or repeated key. */
static bool begin_kv(gguf_writer *w, const char *key, gguf_type t)
{
    size_t len = key ? strlen(key) : 0;
    if (len == 0 || len > GGUF_MAX_KEY) return false;
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return false;
    if (w->n_kv == w->cap_kv) {
        w->cap_kv = w->cap_kv ? w->cap_kv * 2 : 32;
        w->keys = xrealloc(w->keys, w->cap_kv * sizeof *w->keys);
    }
    w->keys[w->n_kv++] = xstrdup(key);
    put_str(&w->kv, key, len);
    put_u32(&w->kv, (uint32_t)t);
    return true;
}

static bool add_scalar(gguf_writer *w, const char *key, gguf_type t, const void *v)
{
    if (!begin_kv(w, key, t)) return false;
    put_bytes(&w->kv, v, scalar_size(t));
    return true;
}

bool gguf_add_u8(gguf_writer *w, const char *key, uint8_t v) { return add_scalar(w, key, GGUF_TYPE_UINT8, &v); }
bool gguf_add_i8(gguf_writer *w, const char *key, int8_t v) { return add_scalar(w, key, GGUF_TYPE_INT8, &v); }
bool gguf_add_u16(gguf_writer *w, const char *key, uint16_t v) { return add_scalar(w, key, GGUF_TYPE_UINT16, &v); }
bool gguf_add_i16(gguf_writer *w, const char *key, int16_t v) { return add_scalar(w, key, GGUF_TYPE_INT16, &v); }
bool gguf_add_i32(gguf_writer *w, const char *key, int32_t v) { return add_scalar(w, key, GGUF_TYPE_INT32, &v); }
bool gguf_add_u64(gguf_writer *w, const char *key, uint64_t v) { return add_scalar(w, key, GGUF_TYPE_UINT64, &v); }
bool gguf_add_i64(gguf_writer *w, const char *key, int64_t v) { return add_scalar(w, key, GGUF_TYPE_INT64, &v); }
bool gguf_add_f32(gguf_writer *w, const char *key, float v) { return add_scalar(w, key, GGUF_TYPE_FLOAT32, &v); }
bool gguf_add_f64(gguf_writer *w, const char *key, double v) { return add_scalar(w, key, GGUF_TYPE_FLOAT64, &v); }

bool gguf_add_u32(gguf_writer *w, const char *key, uint32_t v)
{
    bool align = key && strcmp(key, "general.alignment") == 0;
    if (align && (v == 0 || (v & (v - 1)) != 0)) return false;
    if (!add_scalar(w, key, GGUF_TYPE_UINT32, &v)) return false;
    if (align) w->alignment = v;
    return true;
}

bool gguf_add_bool(gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return add_scalar(w, key, GGUF_TYPE_BOOL, &b);
}

bool gguf_add_str(gguf_writer *w, const char *key, const char *v)
{
    if (!v || !begin_kv(w, key, GGUF_TYPE_STRING)) return false;
    put_str(&w->kv, v, strlen(v));
    return true;
}

bool gguf_add_arr(gguf_writer *w, const char *key, gguf_type t, const void *v, size_t n)
{
    size_t es = scalar_size(t);
    if (es == 0 || (n && !v) || !begin_kv(w, key, GGUF_TYPE_ARRAY)) return false;
    put_u32(&w->kv, (uint32_t)t);
    put_u64(&w->kv, n);
    put_bytes(&w->kv, v, es * n);
    return true;
}

bool gguf_add_arr_str(gguf_writer *w, const char *key, const char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!v[i]) return false;
    if (!begin_kv(w, key, GGUF_TYPE_ARRAY)) return false;
    put_u32(&w->kv, GGUF_TYPE_STRING);
    put_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++) put_str(&w->kv, v[i], strlen(v[i]));
    return true;
}

/* ---- tensors ---- */

size_t gguf_tensor_nbytes(gguf_ggml_type type, int ndim, const uint64_t *ne)
{
    size_t n = type == GGUF_GGML_F32 ? 4 : 2;
    for (int i = 0; i < ndim; i++) n *= (size_t)ne[i];
    return n;
}

static gguf_wtensor *new_tensor(gguf_writer *w, const char *name, gguf_ggml_type type, int ndim,
                                const uint64_t *ne)
{
    if (!name || !*name || strlen(name) > GGUF_MAX_NAME || ndim < 1 || ndim > 4) return NULL;
    if (type != GGUF_GGML_F32 && type != GGUF_GGML_F16) return NULL;
    for (int i = 0; i < ndim; i++)
        if (ne[i] == 0) return NULL;
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return NULL;
    if (w->n_t == w->cap_t) {
        w->cap_t = w->cap_t ? w->cap_t * 2 : 64;
        w->t = xrealloc(w->t, w->cap_t * sizeof *w->t);
    }
    gguf_wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->type = type;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->ne[i] = ne[i];
    t->nbytes = gguf_tensor_nbytes(type, ndim, ne);
    return t;
}

bool gguf_add_tensor(gguf_writer *w, const char *name, gguf_ggml_type type, int ndim,
                     const uint64_t *ne, const void *data)
{
    if (!data) return false;
    gguf_wtensor *t = new_tensor(w, name, type, ndim, ne);
    if (!t) return false;
    t->data = xmalloc(t->nbytes);
    memcpy(t->data, data, t->nbytes);
    return true;
}

bool gguf_add_tensor_lazy(gguf_writer *w, const char *name, gguf_ggml_type type, int ndim,
                          const uint64_t *ne, gguf_fill_fn fill, void *ud)
{
    if (!fill) return false;
    gguf_wtensor *t = new_tensor(w, name, type, ndim, ne);
    if (!t) return false;
    t->fill = fill;
    t->ud = ud;
    return true;
}

/* ---- writing ---- */

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* Everything before the data section, padded to the alignment. */
static void build_header(const gguf_writer *w, sb *h)
{
    put_u32(h, GGUF_MAGIC);
    put_u32(h, GGUF_VERSION);
    put_u64(h, w->n_t);
    put_u64(h, w->n_kv);
    put_bytes(h, w->kv.buf, w->kv.len);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const gguf_wtensor *t = &w->t[i];
        put_str(h, t->name, strlen(t->name));
        put_u32(h, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) put_u64(h, t->ne[d]);
        put_u32(h, (uint32_t)t->type);
        put_u64(h, off);
        off = align_up(off + t->nbytes, w->alignment);
    }
    static const char zeros[256];
    size_t pad = (size_t)(align_up(h->len, w->alignment) - h->len);
    while (pad > 0) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        put_bytes(h, zeros, k);
        pad -= k;
    }
}

static bool write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

/* The data section: each tensor's bytes, then zeros to the next offset. */
static bool write_data(const gguf_writer *w, int fd)
{
    char *zeros = xcalloc(1, w->alignment);
    bool ok = true;
    for (size_t i = 0; i < w->n_t && ok; i++) {
        const gguf_wtensor *t = &w->t[i];
        void *buf = t->data;
        if (!buf) {
            buf = xmalloc(t->nbytes);
            t->fill(t->ud, i, buf);
        }
        ok = write_all(fd, buf, t->nbytes);
        if (buf != t->data) free(buf);
        size_t pad = (size_t)(align_up(t->nbytes, w->alignment) - t->nbytes);
        if (ok && pad) ok = write_all(fd, zeros, pad);
    }
    free(zeros);
    return ok;
}

/* fsync of the folder holding path, so the rename survives a crash. */
static void sync_parent(const char *path)
{
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = 0;
    else strcpy(dir, ".");
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

bool gguf_write(const gguf_writer *w, const char *path, char *err, size_t errsz)
{
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errsz, "%s: cannot create (%s); check that its folder exists and is writable",
                 tmp, strerror(errno));
        free(tmp);
        return false;
    }
    sb h;
    sb_init(&h);
    build_header(w, &h);
    bool ok = write_all(fd, h.buf, h.len) && write_data(w, fd) && fsync(fd) == 0;
    int e = errno;
    sb_free(&h);
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        snprintf(err, errsz, "%s: cannot write (%s); check the free space and permissions", path,
                 strerror(e));
        unlink(tmp);
    } else {
        sync_parent(path);
    }
    free(tmp);
    return ok;
}
