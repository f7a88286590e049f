/* text_source.c: the trainer's built-in data source for plain text: the
 * bytes of a file as token ids (byte + id_offset; llama2.c's tokenizers put
 * byte b at id b + 3), cut into non-overlapping windows of seq_len tokens,
 * every token a target, in a seeded permutation that changes each epoch.
 * It needs no tokenizer, which makes it the source of the tests and of
 * byte-level toy models. An eval set is the windows of another file, or a
 * share of this file's windows held out by a hash of (seed, window): the
 * training order then runs over the others only. */
#include "train.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct text_src {
    unsigned char *bytes;
    size_t len;
    int seq_len, id_offset;
    uint64_t seed;
    size_t count;           /* windows per epoch */
    size_t *win;            /* the windows trained on (all but the held out) */
    size_t *perm;           /* this epoch's order (indexes into win) */
    uint64_t epoch, index;  /* next example */
    int32_t *ids;
    uint8_t *mask;
    uint64_t fingerprint;
} text_src;

/* The order of epoch e: a Fisher-Yates shuffle seeded by (seed, e). */
static void text_shuffle(text_src *t)
{
    tr_rng r;
    tr_rng_seed(&r, tr_hash64(t->seed, t->epoch));
    for (size_t i = 0; i < t->count; i++) t->perm[i] = i;
    for (size_t i = t->count; i > 1; i--) {
        size_t j = (size_t)(tr_rng_next(&r) % i);
        size_t tmp = t->perm[i - 1];
        t->perm[i - 1] = t->perm[j];
        t->perm[j] = tmp;
    }
}

static size_t text_epoch_size(void *ctx)
{
    return ((text_src *)ctx)->count;
}

static bool text_next(void *ctx, tr_example *ex, char *err, size_t errsz)
{
    text_src *t = ctx;
    if (t->index >= t->count) {
        t->epoch++;
        t->index = 0;
        text_shuffle(t);
    }
    size_t w = t->win[t->perm[t->index++]];
    const unsigned char *b = t->bytes + w * (size_t)t->seq_len;
    for (int i = 0; i < t->seq_len; i++) {
        t->ids[i] = (int32_t)b[i] + t->id_offset;
        t->mask[i] = 1;
    }
    ex->ids = t->ids;
    ex->pos = NULL;
    ex->mask = t->mask;
    ex->len = t->seq_len;
    return true;
}

static char *text_save(void *ctx, double *epoch)
{
    text_src *t = ctx;
    if (epoch) *epoch = (double)t->epoch + (double)t->index / (double)t->count;
    char fp[32];
    snprintf(fp, sizeof fp, "0x%016llx", (unsigned long long)t->fingerprint);
    json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:s}", "source", "text", "epoch", (json_int_t)t->epoch,
                          "index", (json_int_t)t->index, "count", (json_int_t)t->count,
                          "fingerprint", fp);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static bool text_restore(void *ctx, const char *json, char *err, size_t errsz)
{
    text_src *t = ctx;
    json_t *o = json_loads(json, 0, NULL);
    json_int_t epoch = -1, index = -1, count = -1;
    const char *fp = NULL;
    bool ok = o && json_unpack(o, "{s:I,s:I,s:I,s:s}", "epoch", &epoch, "index", &index, "count",
                               &count, "fingerprint", &fp) == 0;
    char want[32];
    snprintf(want, sizeof want, "0x%016llx", (unsigned long long)t->fingerprint);
    if (!ok || epoch < 0 || index < 0 || (size_t)count != t->count || (size_t)index > t->count ||
        strcmp(fp, want) != 0) {
        snprintf(err, errsz, "the checkpoint's data position belongs to other data (another "
                 "file, sequence length or offset): start a new run or use the same data");
        json_decref(o);
        return false;
    }
    t->epoch = (uint64_t)epoch;
    t->index = (uint64_t)index;
    text_shuffle(t);
    json_decref(o);
    return true;
}

static void text_destroy(void *ctx)
{
    text_src *t = ctx;
    free(t->bytes);
    free(t->win);
    free(t->perm);
    free(t->ids);
    free(t->mask);
    free(t);
}

/* Whether window w is held out for a share (the trainer's rule for text). */
static bool window_held_out(uint64_t seed, size_t w, double share)
{
    return share > 0 &&
           (double)(tr_hash64(seed ^ 0x686f6c646f7574ull, (uint64_t)w) >> 11) * 0x1p-53 < share;
}

/* The windows of bytes[0..len) as eval sequences of seq_len tokens, in
 * file order: all of them (split 0), or those held out for split. */
static void add_windows(tr_eval_set *e, const unsigned char *bytes, size_t len, int seq_len,
                        int id_offset, uint64_t seed, double split)
{
    int32_t *ids = xmalloc((size_t)seq_len * sizeof *ids);
    uint8_t *mask = xmalloc((size_t)seq_len);
    memset(mask, 1, (size_t)seq_len);
    for (size_t w = 0; w < len / (size_t)seq_len; w++) {
        if (split > 0 && !window_held_out(seed, w, split)) continue;
        for (int i = 0; i < seq_len; i++) ids[i] = (int32_t)bytes[w * (size_t)seq_len + i] + id_offset;
        tr_eval_set_add(e, ids, mask, seq_len);
    }
    free(ids);
    free(mask);
}

bool tr_text_source_open(tr_data *d, const char *path, int seq_len, int id_offset,
                         uint64_t seed, char *err, size_t errsz)
{
    return tr_text_source_open_eval(d, path, seq_len, id_offset, seed, NULL, NULL, err, errsz);
}

bool tr_text_source_open_eval(tr_data *d, const char *path, int seq_len, int id_offset,
                              uint64_t seed, const tr_eval_opts *ev, tr_eval_set *eval,
                              char *err, size_t errsz)
{
    double split = ev ? ev->split : 0;
    if (eval) tr_eval_set_init(eval, NULL);
    text_src *t = xcalloc(1, sizeof *t);
    t->bytes = (unsigned char *)file_read_all(path, (size_t)1 << 32, &t->len, err, errsz);
    if (!t->bytes) {
        free(t);
        return false;
    }
    if (seq_len < 2 || t->len < (size_t)seq_len) {
        snprintf(err, errsz, "%s: %zu bytes, fewer than one sequence of %d tokens (lower "
                 "--seq-len)", path, t->len, seq_len);
        free(t->bytes);
        free(t);
        return false;
    }
    t->seq_len = seq_len;
    t->id_offset = id_offset;
    t->seed = seed;
    size_t windows = t->len / (size_t)seq_len;
    t->win = xmalloc(windows * sizeof *t->win);
    for (size_t w = 0; w < windows; w++)
        if (!window_held_out(seed, w, split)) t->win[t->count++] = w;
    if (t->count == 0 || (split > 0 && t->count == windows)) {
        snprintf(err, errsz, "%s: holding out %g of its %zu windows of %d bytes leaves %s: %s "
                 "(--eval-split, trainingData.evalSplit)", path, split, windows, seq_len,
                 t->count ? "no window for evaluation" : "nothing to train on",
                 t->count ? "raise the share or give an eval file" : "lower the share");
        text_destroy(t);
        return false;
    }
    t->perm = xmalloc(t->count * sizeof *t->perm);
    t->ids = xmalloc((size_t)seq_len * sizeof *t->ids);
    t->mask = xmalloc((size_t)seq_len);
    uint64_t h = tr_hash64((uint64_t)seq_len, (uint64_t)id_offset);
    for (size_t i = 0; i < windows * (size_t)seq_len; i++) h = tr_hash64(h, t->bytes[i]);
    if (split > 0) { /* another split trains on other windows: not the same data */
        uint64_t bits;
        memcpy(&bits, &split, sizeof bits);
        h = tr_hash64(h, bits);
    }
    t->fingerprint = h;
    text_shuffle(t);
    if (eval && split > 0) {
        char src[64];
        snprintf(src, sizeof src, "heldout:%g", split);
        tr_eval_set_free(eval);
        tr_eval_set_init(eval, src);
        add_windows(eval, t->bytes, t->len, seq_len, id_offset, seed, split);
    } else if (eval && ev && ev->path) {
        size_t len;
        unsigned char *bytes = (unsigned char *)file_read_all(ev->path, (size_t)1 << 32, &len, err, errsz);
        if (!bytes || len < (size_t)seq_len) {
            if (bytes) snprintf(err, errsz, "%s: %zu bytes, fewer than one eval sequence of %d "
                                "tokens (lower --seq-len or give a longer eval file)", ev->path, len, seq_len);
            free(bytes);
            text_destroy(t);
            return false;
        }
        tr_eval_set_free(eval);
        tr_eval_set_init(eval, ev->path);
        add_windows(eval, bytes, len, seq_len, id_offset, seed, 0);
        free(bytes);
    }
    *d = (tr_data){t, text_epoch_size, text_next, text_save, text_restore, text_destroy};
    return true;
}
