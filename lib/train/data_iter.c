/* data_iter.c: batches over a data_set in a seeded, per-epoch shuffled
 * order, with a position (seed, epoch, index) that restores the iterator
 * exactly, and the position's JSON form (data.h).
 *
 * The order of epoch e is a Fisher-Yates shuffle driven by splitmix64
 * seeded from (seed, e) alone, so any epoch's order can be rebuilt without
 * replaying earlier ones. */
#include "train/data.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct data_iter {
    const data_set *d;
    data_iter_options o;
    size_t n;
    uint64_t epoch, index;
    size_t *order;
    uint64_t order_epoch;
    bool have_order;
};

/* splitmix64 (Steele, Lea, Flood 2014; the constants are Vigna's). */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0, without modulo bias (rejection). */
static uint64_t below(uint64_t *s, uint64_t n)
{
    uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
    uint64_t x;
    do x = splitmix64(s);
    while (x < threshold);
    return x % n;
}

static void build_order(data_iter *it)
{
    if (it->have_order && it->order_epoch == it->epoch) return;
    for (size_t i = 0; i < it->n; i++) it->order[i] = i;
    if (it->o.shuffle) {
        uint64_t s = it->o.seed ^ (it->epoch * 0xD1B54A32D192ED03ull);
        splitmix64(&s);
        for (size_t i = it->n; i > 1; i--) {
            size_t j = (size_t)below(&s, i);
            size_t t = it->order[i - 1];
            it->order[i - 1] = it->order[j];
            it->order[j] = t;
        }
    }
    it->order_epoch = it->epoch;
    it->have_order = true;
}

/* After index moved: start the next epoch when this one is used up. */
static void normalise(data_iter *it)
{
    size_t left = it->index < it->n ? it->n - (size_t)it->index : 0;
    if (left == 0 || (it->o.drop_last && left < it->o.batch_size)) {
        it->epoch++;
        it->index = 0;
    }
}

data_iter *data_iter_new(const data_set *d, const data_iter_options *o, char *err, size_t errsz)
{
    size_t n = data_count(d);
    if (o->batch_size == 0) {
        snprintf(err, errsz, "batch size must be at least 1");
        return NULL;
    }
    if (n == 0) {
        snprintf(err, errsz, "the data set has no sequences");
        return NULL;
    }
    if (o->drop_last && o->batch_size > n) {
        snprintf(err, errsz, "batch size %zu is larger than the %zu sequences (with drop_last)",
                 o->batch_size, n);
        return NULL;
    }
    data_iter *it = xcalloc(1, sizeof *it);
    it->d = d;
    it->o = *o;
    it->n = n;
    it->order = xmalloc(n * sizeof *it->order);
    return it;
}

void data_iter_free(data_iter *it)
{
    if (!it) return;
    free(it->order);
    free(it);
}

void data_batch_free(data_batch *b)
{
    free(b->ids);
    free(b->mask);
    free(b->lens);
    free(b->seq);
    memset(b, 0, sizeof *b);
}

void data_iter_next(data_iter *it, data_batch *b)
{
    build_order(it);
    size_t rows = it->n - (size_t)it->index;
    if (rows > it->o.batch_size) rows = it->o.batch_size;
    size_t width = 0;
    b->seq = xrealloc(b->seq, rows * sizeof *b->seq);
    b->lens = xrealloc(b->lens, rows * sizeof *b->lens);
    for (size_t r = 0; r < rows; r++) {
        const int32_t *ids;
        const uint8_t *mask;
        b->seq[r] = it->order[it->index + r];
        data_get(it->d, b->seq[r], &ids, &mask, &b->lens[r], NULL);
        if (b->lens[r] > width) width = b->lens[r];
    }
    if (it->o.pad_to_max) width = data_max_seq_len(it->d);
    b->ids = xrealloc(b->ids, rows * width * sizeof *b->ids + 1);
    b->mask = xrealloc(b->mask, rows * width + 1);
    int32_t pad = data_pad_id(it->d);
    for (size_t r = 0; r < rows; r++) {
        const int32_t *ids;
        const uint8_t *mask;
        size_t len;
        data_get(it->d, b->seq[r], &ids, &mask, &len, NULL);
        memcpy(b->ids + r * width, ids, len * sizeof *ids);
        memcpy(b->mask + r * width, mask, len);
        for (size_t k = len; k < width; k++) b->ids[r * width + k] = pad;
        memset(b->mask + r * width + len, 0, width - len);
    }
    b->rows = rows;
    b->seq_len = width;
    b->epoch = it->epoch;
    b->index = it->index;
    it->index += rows;
    normalise(it);
}

data_pos data_iter_tell(const data_iter *it)
{
    return (data_pos){.seed = it->o.seed,
                      .epoch = it->epoch,
                      .index = it->index,
                      .count = it->n,
                      .fingerprint = data_fingerprint(it->d)};
}

bool data_iter_seek(data_iter *it, const data_pos *p, char *err, size_t errsz)
{
    if (p->count != it->n || p->fingerprint != data_fingerprint(it->d)) {
        snprintf(err, errsz,
                 "the saved position belongs to other data (%" PRIu64 " sequences, fingerprint "
                 "%016" PRIx64 "; this data has %zu, %016" PRIx64 "): the dataset, tokenizer or "
                 "data options changed",
                 p->count, p->fingerprint, it->n, data_fingerprint(it->d));
        return false;
    }
    if (it->o.shuffle && p->seed != it->o.seed) {
        snprintf(err, errsz, "the saved position was made with seed %" PRIu64 ", not %" PRIu64,
                 p->seed, it->o.seed);
        return false;
    }
    if (p->index >= it->n) {
        snprintf(err, errsz, "the saved index %" PRIu64 " is past the %zu sequences", p->index, it->n);
        return false;
    }
    it->epoch = p->epoch;
    it->index = p->index;
    normalise(it);
    return true;
}

size_t data_iter_batches_per_epoch(const data_iter *it)
{
    size_t bs = it->o.batch_size;
    return it->o.drop_last ? it->n / bs : (it->n + bs - 1) / bs;
}

/* ---- the position as JSON ---- */

char *data_pos_format(const data_pos *p)
{
    char seed[24], fp[24];
    snprintf(seed, sizeof seed, "0x%016" PRIx64, p->seed);
    snprintf(fp, sizeof fp, "0x%016" PRIx64, p->fingerprint);
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:s}", "seed", seed, "epoch", (json_int_t)p->epoch,
                          "index", (json_int_t)p->index, "count", (json_int_t)p->count,
                          "fingerprint", fp);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

static bool parse_hex64(const char *s, uint64_t *v)
{
    if (!s || strncmp(s, "0x", 2) != 0 || !s[2] || strlen(s) > 18) return false;
    uint64_t x = 0;
    for (const char *p = s + 2; *p; p++) {
        int d = (*p >= '0' && *p <= '9') ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10 : -1;
        if (d < 0) return false;
        x = x * 16 + (uint64_t)d;
    }
    *v = x;
    return true;
}

bool data_pos_parse(const char *text, data_pos *p, char *err, size_t errsz)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!json_is_object(o)) {
        snprintf(err, errsz, "data position: %s", o ? "expected a JSON object" : je.text);
        json_decref(o);
        return false;
    }
    const char *ints[] = {"epoch", "index", "count"};
    uint64_t *dst[] = {&p->epoch, &p->index, &p->count};
    bool ok = parse_hex64(json_string_value(json_object_get(o, "seed")), &p->seed) &&
              parse_hex64(json_string_value(json_object_get(o, "fingerprint")), &p->fingerprint);
    if (!ok) snprintf(err, errsz, "data position: seed and fingerprint must be \"0x\" hex strings");
    for (size_t i = 0; i < 3 && ok; i++) {
        json_t *v = json_object_get(o, ints[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(err, errsz, "data position: %s must be a non-negative integer", ints[i]);
            ok = false;
        } else {
            *dst[i] = (uint64_t)json_integer_value(v);
        }
    }
    json_decref(o);
    return ok;
}
