/* safetensors.c: the safetensors format, read and written.
 *
 * Format (github.com/huggingface/safetensors, README "Format"): an 8-byte
 * little-endian header length N, N bytes of JSON (an object mapping tensor
 * names to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
 * "__metadata__" object of strings), then the data. Offsets are relative to
 * the end of the header; the tensors must cover the data exactly, without
 * holes or overlaps. The reader checks all of that, memory-maps the file and
 * hands out pointers into the mapping. A model may be split into shards
 * listed by model.safetensors.index.json ({"weight_map": {name: file}}).
 */
#include "hf/hf.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- reader */

static int tensor_cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

typedef struct span {
    uint64_t begin, end;
    size_t idx;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Reads a JSON integer that must be a non-negative int64. */
static bool json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* Parses one tensor entry of the header into t (name set by the caller). */
static bool parse_entry(st_tensor *t, const json_t *e, uint64_t *begin, uint64_t *end,
                        const char *label, char *err, size_t errsz)
{
    if (!json_is_object(e)) {
        snprintf(err, errsz, "%s: header: tensor \"%s\" is not an object", label, t->name);
        return false;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)e, key, val) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets")) {
            snprintf(err, errsz, "%s: header: tensor \"%s\" has an unknown field \"%s\" "
                     "(expected dtype, shape, data_offsets)", label, t->name, key);
            return false;
        }
    }
    json_t *dt = json_object_get(e, "dtype");
    if (!json_is_string(dt) || !tr_dtype_parse(json_string_value(dt), &t->dtype)) {
        snprintf(err, errsz, "%s: header: tensor \"%s\": dtype %s%s%s is not a safetensors "
                 "dtype (F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)", label, t->name,
                 json_is_string(dt) ? "\"" : "", json_is_string(dt) ? json_string_value(dt) : "missing",
                 json_is_string(dt) ? "\"" : "");
        return false;
    }
    json_t *sh = json_object_get(e, "shape");
    if (!json_is_array(sh) || json_array_size(sh) > ST_MAX_DIMS) {
        snprintf(err, errsz, "%s: header: tensor \"%s\": shape must be an array of at most %d "
                 "non-negative integers", label, t->name, ST_MAX_DIMS);
        return false;
    }
    t->ndim = (int)json_array_size(sh);
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (!json_u64(json_array_get(sh, (size_t)i), &d) || d > (1ull << 40) ||
            (d && numel > (1ull << 60) / d)) {
            snprintf(err, errsz, "%s: header: tensor \"%s\": shape[%d] is not a valid size",
                     label, t->name, i);
            return false;
        }
        t->shape[i] = (int64_t)d;
        numel *= d;
    }
    t->numel = (int64_t)numel;
    json_t *off = json_object_get(e, "data_offsets");
    if (!json_is_array(off) || json_array_size(off) != 2 ||
        !json_u64(json_array_get(off, 0), begin) || !json_u64(json_array_get(off, 1), end) ||
        *end < *begin) {
        snprintf(err, errsz, "%s: header: tensor \"%s\": data_offsets must be [begin, end] "
                 "with 0 <= begin <= end", label, t->name);
        return false;
    }
    if (*end - *begin != numel * tr_dtype_size(t->dtype)) {
        snprintf(err, errsz, "%s: header: tensor \"%s\": data_offsets span %llu bytes but shape "
                 "and dtype %s need %llu", label, t->name, (unsigned long long)(*end - *begin),
                 tr_dtype_name(t->dtype), (unsigned long long)(numel * tr_dtype_size(t->dtype)));
        return false;
    }
    return true;
}

/* Checks that the spans cover [0, data_len) exactly, in order. */
static bool check_coverage(span *sp, size_t n, const st_tensor *ts, uint64_t data_len,
                           const char *label, char *err, size_t errsz)
{
    qsort(sp, n, sizeof *sp, span_cmp);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (sp[i].begin != at) {
            snprintf(err, errsz, "%s: header: tensor \"%s\" starts at byte %llu of the data but "
                     "the previous tensor ends at %llu (overlap or hole)", label,
                     ts[sp[i].idx].name, (unsigned long long)sp[i].begin, (unsigned long long)at);
            return false;
        }
        at = sp[i].end;
    }
    if (at != data_len) {
        snprintf(err, errsz, "%s: the tensors cover %llu bytes of data but the file holds %llu "
                 "after the header (truncated or padded file)", label, (unsigned long long)at,
                 (unsigned long long)data_len);
        return false;
    }
    return true;
}

/* Appends the tensors of one file (buf, len) to a; file index fi. */
static bool parse_file(st_archive *a, const unsigned char *buf, size_t len, int fi,
                       const char *label, char *err, size_t errsz)
{
    if (len < 8) {
        snprintf(err, errsz, "%s: too short for a safetensors file (%zu bytes)", label, len);
        return false;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > ST_MAX_HEADER || hlen > len - 8) {
        snprintf(err, errsz, "%s: header length %llu is larger than the file or the %u MiB "
                 "limit: not a safetensors file, or truncated", label, (unsigned long long)hlen,
                 ST_MAX_HEADER >> 20);
        return false;
    }
    if (hlen < 2 || buf[8] != '{') {
        snprintf(err, errsz, "%s: the header does not start with '{': not a safetensors file",
                 label);
        return false;
    }
    json_error_t je;
    json_t *root = json_loadb((const char *)buf + 8, hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        snprintf(err, errsz, "%s: header: invalid JSON at line %d column %d: %s", label,
                 root ? 1 : je.line, root ? 1 : je.column, root ? "not an object" : je.text);
        json_decref(root);
        return false;
    }
    size_t n0 = a->n, nt = json_object_size(root);
    a->tensors = xrealloc(a->tensors, (n0 + nt + 1) * sizeof *a->tensors);
    span *sp = xmalloc((nt + 1) * sizeof *sp);
    size_t ns = 0;
    const char *key;
    json_t *val;
    bool ok = true;
    const unsigned char *data = buf + 8 + hlen;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(val)) ok = false;
            else json_object_foreach(val, mk, mv) if (!json_is_string(mv)) ok = false;
            if (!ok) {
                snprintf(err, errsz, "%s: header: __metadata__ must map strings to strings", label);
                break;
            }
            if (fi == 0 && !a->metadata_json) a->metadata_json = json_dumps(val, JSON_COMPACT);
            continue;
        }
        st_tensor *t = &a->tensors[a->n];
        memset(t, 0, sizeof *t);
        t->name = (char *)key;
        uint64_t b, e;
        if (!parse_entry(t, val, &b, &e, label, err, errsz)) {
            ok = false;
            break;
        }
        t->name = xstrdup(key);
        t->data = data + b;
        t->nbytes = (size_t)(e - b);
        t->file = fi;
        sp[ns++] = (span){b, e, a->n};
        a->n++;
    }
    if (ok) ok = check_coverage(sp, ns, a->tensors, len - 8 - hlen, label, err, errsz);
    free(sp);
    json_decref(root);
    (void)n0;
    return ok;
}

/* Sorts the tensors by name and rejects a name present twice (in shards). */
static bool finish_archive(st_archive *a, const char *label, char *err, size_t errsz)
{
    qsort(a->tensors, a->n, sizeof *a->tensors, tensor_cmp_name);
    for (size_t i = 1; i < a->n; i++)
        if (strcmp(a->tensors[i - 1].name, a->tensors[i].name) == 0) {
            snprintf(err, errsz, "%s: tensor \"%s\" is present twice", label, a->tensors[i].name);
            return false;
        }
    return true;
}

bool st_parse_buffer(st_archive *a, const void *buf, size_t len, const char *label,
                     char *err, size_t errsz)
{
    memset(a, 0, sizeof *a);
    if (!parse_file(a, buf, len, 0, label, err, errsz) ||
        !finish_archive(a, label, err, errsz)) {
        st_close(a);
        return false;
    }
    return true;
}

/* Maps one file; when its data would be misaligned for 4-byte floats the
 * file is read into the heap instead (malloc'd memory is 16-aligned). */
static bool map_file(struct st_mapping *m, const char *path, char *err, size_t errsz)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errsz, "cannot open %s: %s", path, fd < 0 ? strerror(errno) : "not a file");
        if (fd >= 0) close(fd);
        return false;
    }
    m->path = xstrdup(path);
    m->len = (size_t)st.st_size;
    unsigned char head[8] = {0};
    uint64_t hlen = 0;
    if (m->len >= 8 && pread(fd, head, 8, 0) == 8)
        for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | head[i];
    if (m->len > 0 && (8 + hlen) % 8 == 0) {
        void *p = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            m->base = p;
            m->mapped = true;
        }
    }
    if (!m->mapped) {
        /* copy so that the data (at 8 + hlen) lands on a 16-byte boundary */
        size_t n = 0;
        char *raw = file_read_all(path, (size_t)1 << 40, &n, err, errsz);
        close(fd);
        if (!raw) return false;
        size_t shift = (16 - (8 + hlen) % 16) % 16;
        m->alloc = xmalloc(n + 16);
        m->base = (char *)m->alloc + shift;
        memcpy(m->base, raw, n);
        m->len = n;
        free(raw);
        return true;
    }
    close(fd);
    return true;
}

static bool open_one(st_archive *a, const char *path, char *err, size_t errsz)
{
    a->files = xrealloc(a->files, (a->n_files + 1) * sizeof *a->files);
    struct st_mapping *m = &a->files[a->n_files];
    if (!map_file(m, path, err, errsz)) {
        free(m->path);
        return false;
    }
    int fi = (int)a->n_files++;
    return parse_file(a, m->base, m->len, fi, path, err, errsz);
}

/* Opens the shards named by an index and checks that the weight map agrees. */
static bool open_index(st_archive *a, const char *dir, const char *index, char *err, size_t errsz)
{
    size_t len;
    char *text = file_read_all(index, 64u << 20, &len, err, errsz);
    if (!text) return false;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    json_t *wm = root ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(wm)) {
        snprintf(err, errsz, "%s:%d:%d: %s", index, root ? 1 : je.line, root ? 1 : je.column,
                 root ? "field weight_map: expected an object {tensor name: shard file}" : je.text);
        json_decref(root);
        return false;
    }
    bool ok = true;
    const char *key;
    json_t *val;
    json_t *seen = json_object();
    json_object_foreach(wm, key, val) {
        const char *f = json_string_value(val);
        if (!f || strchr(f, '/') || f[0] == '.' || !*f) {
            snprintf(err, errsz, "%s: weight_map.%s: expected a shard file name in the same "
                     "folder", index, key);
            ok = false;
            break;
        }
        if (json_object_get(seen, f)) continue;
        json_object_set_new(seen, f, json_true());
        char *p = path_join(dir, f);
        ok = open_one(a, p, err, errsz);
        free(p);
        if (!ok) break;
    }
    json_decref(seen);
    if (ok) ok = finish_archive(a, index, err, errsz);
    json_object_foreach(ok ? wm : NULL, key, val) {
        const st_tensor *t = st_find(a, key);
        if (!t || strcmp(strrchr(a->files[t->file].path, '/') + 1, json_string_value(val))) {
            snprintf(err, errsz, "%s: weight_map.%s: the tensor is not in %s", index, key,
                     json_string_value(val));
            ok = false;
            break;
        }
    }
    json_decref(root);
    return ok;
}

bool st_open(st_archive *a, const char *path, char *err, size_t errsz)
{
    memset(a, 0, sizeof *a);
    bool ok;
    if (dir_exists(path)) {
        char *index = path_join(path, "model.safetensors.index.json");
        char *single = path_join(path, "model.safetensors");
        if (file_exists(index)) {
            ok = open_index(a, path, index, err, errsz);
        } else if (file_exists(single)) {
            ok = open_one(a, single, err, errsz) && finish_archive(a, single, err, errsz);
        } else {
            snprintf(err, errsz, "%s: no model.safetensors or model.safetensors.index.json in "
                     "this folder (lathe reads Hugging Face safetensors models)", path);
            ok = false;
        }
        free(index);
        free(single);
    } else {
        ok = open_one(a, path, err, errsz) && finish_archive(a, path, err, errsz);
    }
    if (!ok) st_close(a);
    return ok;
}

void st_close(st_archive *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->tensors[i].name);
    free(a->tensors);
    for (size_t i = 0; i < a->n_files; i++) {
        if (a->files[i].mapped) munmap(a->files[i].base, a->files[i].len);
        else free(a->files[i].alloc);
        free(a->files[i].path);
    }
    free(a->files);
    free(a->metadata_json);
    memset(a, 0, sizeof *a);
}

const st_tensor *st_find(const st_archive *a, const char *name)
{
    if (!a->n) return NULL;
    st_tensor key = {.name = (char *)name};
    return bsearch(&key, a->tensors, a->n, sizeof key, tensor_cmp_name);
}

/* ---------------------------------------------------------------- writer */

void st_writer_init(st_writer *w)
{
    memset(w, 0, sizeof *w);
}

void st_writer_free(st_writer *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->items[i].name);
        free(w->items[i].data);
    }
    free(w->items);
    memset(w, 0, sizeof *w);
}

static struct st_wtensor *writer_push(st_writer *w, const char *name, tr_dtype dtype, int ndim,
                                      const int64_t *shape)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        w->items = xrealloc(w->items, w->cap * sizeof *w->items);
    }
    struct st_wtensor *t = &w->items[w->n++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        numel *= (size_t)shape[i];
    }
    t->nbytes = numel * tr_dtype_size(dtype);
    return t;
}

void st_writer_add(st_writer *w, const char *name, tr_dtype dtype, int ndim,
                   const int64_t *shape, const void *data)
{
    struct st_wtensor *t = writer_push(w, name, dtype, ndim, shape);
    t->data = xmalloc(t->nbytes ? t->nbytes : 1);
    memcpy(t->data, data, t->nbytes);
}

void st_writer_add_f32(st_writer *w, const char *name, tr_dtype dtype, int ndim,
                       const int64_t *shape, const float *data)
{
    struct st_wtensor *t = writer_push(w, name, dtype, ndim, shape);
    t->data = xmalloc(t->nbytes ? t->nbytes : 1);
    tr_from_f32(t->data, data, dtype, t->nbytes / tr_dtype_size(dtype));
}

void st_writer_add_lazy(st_writer *w, const char *name, tr_dtype dtype, int ndim,
                        const int64_t *shape, void (*fill)(void *ud, const char *name, void *dst),
                        void *ud)
{
    struct st_wtensor *t = writer_push(w, name, dtype, ndim, shape);
    t->fill = fill;
    t->fill_ud = ud;
}

static int wtensor_cmp(const void *a, const void *b)
{
    return strcmp((*(struct st_wtensor *const *)a)->name, (*(struct st_wtensor *const *)b)->name);
}

/* The header (length prefix + padded JSON) for the tensors in `order`. */
static unsigned char *writer_header(struct st_wtensor *const *order, size_t n, size_t *hlen,
                                    uint64_t *data_len)
{
    json_t *root = json_object();
    json_t *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object(), *sh = json_array();
        json_object_set_new(e, "dtype", json_string(tr_dtype_name(order[i]->dtype)));
        for (int d = 0; d < order[i]->ndim; d++)
            json_array_append_new(sh, json_integer(order[i]->shape[d]));
        json_object_set_new(e, "shape", sh);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)at, (json_int_t)(at + order[i]->nbytes)));
        at += order[i]->nbytes;
        json_object_set_new(root, order[i]->name, e);
    }
    char *hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    unsigned char *out = xmalloc(8 + padded);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, hdr, hl);
    memset(out + 8 + hl, ' ', padded - hl);
    free(hdr);
    *hlen = 8 + padded;
    *data_len = at;
    return out;
}

static struct st_wtensor **writer_order(const st_writer *w)
{
    struct st_wtensor **order = xmalloc((w->n + 1) * sizeof *order);
    for (size_t i = 0; i < w->n; i++) order[i] = &w->items[i];
    qsort(order, w->n, sizeof *order, wtensor_cmp);
    return order;
}

/* The bytes of tensor t: its copy, or filled by its callback into scratch. */
static const void *wtensor_bytes(const struct st_wtensor *t, void **scratch)
{
    if (t->data) return t->data;
    *scratch = xmalloc(t->nbytes ? t->nbytes : 1);
    t->fill(t->fill_ud, t->name, *scratch);
    return *scratch;
}

void *st_writer_serialize(const st_writer *w, size_t *len)
{
    struct st_wtensor **order = writer_order(w);
    size_t hl;
    uint64_t dl;
    unsigned char *hdr = writer_header(order, w->n, &hl, &dl);
    *len = hl + (size_t)dl;
    unsigned char *out = xrealloc(hdr, *len ? *len : 1);
    size_t pos = hl;
    for (size_t i = 0; i < w->n; i++) {
        void *scratch = NULL;
        memcpy(out + pos, wtensor_bytes(order[i], &scratch), order[i]->nbytes);
        free(scratch);
        pos += order[i]->nbytes;
    }
    free(order);
    return out;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t r = write(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Streams the file tensor by tensor into path.tmp, fsync, rename, fsync of
 * the folder: the file is complete or absent, and at most one tensor is in
 * memory at a time. */
int st_writer_save(const st_writer *w, const char *path)
{
    struct st_wtensor **order = writer_order(w);
    size_t hl;
    uint64_t dl;
    unsigned char *hdr = writer_header(order, w->n, &hl, &dl);
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? errno : write_all(fd, hdr, hl);
    for (size_t i = 0; !rc && i < w->n; i++) {
        void *scratch = NULL;
        rc = write_all(fd, wtensor_bytes(order[i], &scratch), order[i]->nbytes);
        free(scratch);
    }
    if (fd >= 0) {
        if (!rc && fsync(fd) != 0) rc = errno;
        if (close(fd) != 0 && !rc) rc = errno;
    }
    if (!rc && rename(tmp, path) != 0) rc = errno;
    if (rc) {
        unlink(tmp);
    } else {
        char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        int dfd = open(slash ? (slash == dir ? "/" : dir) : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            if (fsync(dfd) != 0) rc = errno;
            close(dfd);
        }
        free(dir);
    }
    free(tmp);
    free(hdr);
    free(order);
    return rc;
}
