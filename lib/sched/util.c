/* util.c: the scheduler's small containers: a two-level bitset (bset) and a
 * map from job ids to slots (idmap). */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- bset ---- */

void bset_init(bset *b, int n)
{
    b->n = n;
    b->nw = (n + 63) / 64;
    b->nsum = (b->nw + 63) / 64;
    b->w = xcalloc((size_t)b->nw + 1, sizeof *b->w);
    b->sum = xcalloc((size_t)b->nsum + 1, sizeof *b->sum);
}

void bset_free(bset *b)
{
    free(b->w);
    free(b->sum);
    memset(b, 0, sizeof *b);
}

void bset_set(bset *b, int i)
{
    int w = i >> 6;
    b->w[w] |= 1ull << (i & 63);
    b->sum[w >> 6] |= 1ull << (w & 63);
}

void bset_clear(bset *b, int i)
{
    int w = i >> 6;
    b->w[w] &= ~(1ull << (i & 63));
    if (!b->w[w]) b->sum[w >> 6] &= ~(1ull << (w & 63));
}

bool bset_test(const bset *b, int i)
{
    return (b->w[i >> 6] >> (i & 63)) & 1u;
}

/* The first non-empty word at or after word index w, or -1. */
static int next_word(const bset *b, int w)
{
    if (w >= b->nw) return -1;
    int s = w >> 6;
    uint64_t m = b->sum[s] & (~0ull << (w & 63));
    while (!m) {
        if (++s >= b->nsum) return -1;
        m = b->sum[s];
    }
    return (s << 6) + __builtin_ctzll(m);
}

int bset_next(const bset *b, int from, int to)
{
    if (to > b->n) to = b->n;
    if (from < 0) from = 0;
    if (from >= to) return -1;
    int w = from >> 6;
    uint64_t m = b->w[w] & (~0ull << (from & 63));
    if (!m) {
        w = next_word(b, w + 1);
        if (w < 0) return -1;
        m = b->w[w];
    }
    int i = (w << 6) + __builtin_ctzll(m);
    return i < to ? i : -1;
}

/* ---- idmap: open addressing with linear probing ---- */

static size_t id_hash(uint64_t x)
{
    /* splitmix64 finaliser: spreads sequential ids over the table */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (size_t)x;
}

void idmap_init(idmap *m)
{
    memset(m, 0, sizeof *m);
}

void idmap_free(idmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static void idmap_grow(idmap *m)
{
    idmap old = *m;
    /* rehash dropping tombstones; double only when live entries need it */
    size_t size = old.cap ? old.cap : 64;
    while ((old.len + 1) * 2 >= size) size *= 2;
    m->cap = size;
    m->keys = xmalloc(m->cap * sizeof *m->keys);
    m->vals = xmalloc(m->cap * sizeof *m->vals);
    for (size_t i = 0; i < m->cap; i++) m->vals[i] = -1;
    m->len = m->used = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.vals[i] >= 0) idmap_put(m, old.keys[i], old.vals[i]);
    free(old.keys);
    free(old.vals);
}

int idmap_get(const idmap *m, uint64_t id)
{
    if (!m->cap) return -1;
    size_t mask = m->cap - 1;
    for (size_t i = id_hash(id) & mask;; i = (i + 1) & mask) {
        if (m->vals[i] == -1) return -1;
        if (m->vals[i] >= 0 && m->keys[i] == id) return m->vals[i];
    }
}

void idmap_put(idmap *m, uint64_t id, int slot)
{
    if ((m->used + 1) * 4 >= m->cap * 3) idmap_grow(m);
    size_t mask = m->cap - 1;
    size_t tomb = (size_t)-1;
    for (size_t i = id_hash(id) & mask;; i = (i + 1) & mask) {
        if (m->vals[i] >= 0 && m->keys[i] == id) {
            m->vals[i] = slot;
            return;
        }
        if (m->vals[i] == -2 && tomb == (size_t)-1) tomb = i;
        if (m->vals[i] == -1) {
            if (tomb != (size_t)-1) {
                i = tomb;
            } else {
                m->used++;
            }
            m->keys[i] = id;
            m->vals[i] = slot;
            m->len++;
            return;
        }
    }
}

void idmap_del(idmap *m, uint64_t id)
{
    if (!m->cap) return;
    size_t mask = m->cap - 1;
    for (size_t i = id_hash(id) & mask;; i = (i + 1) & mask) {
        if (m->vals[i] == -1) return;
        if (m->vals[i] >= 0 && m->keys[i] == id) {
            m->vals[i] = -2;
            m->len--;
            return;
        }
    }
}
