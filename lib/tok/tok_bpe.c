/* tok_bpe.c: the BPE core: the vocabulary and merge hash maps, the word
 * cache, and the merge loop that turns one pre-tokenized word into ids.
 *
 * A word starts as one symbol per byte (the id of that byte's token). The
 * loop repeatedly merges the adjacent pair with the lowest merge rank, the
 * leftmost one on ties, until no adjacent pair has a merge: exactly the
 * order Hugging Face's BPE applies (its heap orders by rank, then
 * position). Short words use a plain scan over an array of pair ranks;
 * long ones a binary heap over a linked list. */
#include "tok/tok_internal.h"

#include <stdlib.h>
#include <string.h>

uint64_t tok_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    if (n) memcpy(&v, s, n);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

/* ---- bytes -> id ---- */

void tok_strmap_init(tok_strmap *m, size_t expected)
{
    size_t cap = pow2_at_least(expected * 2 + 1);
    m->slots = xmalloc(cap * sizeof *m->slots);
    for (size_t i = 0; i < cap; i++) m->slots[i] = -1;
    m->mask = cap - 1;
    m->count = 0;
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static bool strmap_key_eq(const tok_tokenizer *t, int32_t id, const char *s, size_t len)
{
    return t->blen[id] == len && memcmp(t->bytes.buf + t->boff[id], s, len) == 0;
}

bool tok_strmap_put(tok_strmap *m, const tok_tokenizer *t, int32_t id)
{
    const char *s = t->bytes.buf + t->boff[id];
    size_t len = t->blen[id];
    size_t i = tok_hash_bytes(s, len) & m->mask;
    while (m->slots[i] >= 0) {
        if (strmap_key_eq(t, m->slots[i], s, len)) return false;
        i = (i + 1) & m->mask;
    }
    m->slots[i] = id;
    m->count++;
    return true;
}

int32_t tok_strmap_get(const tok_strmap *m, const tok_tokenizer *t, const char *s, size_t len)
{
    if (!m->slots) return -1;
    size_t i = tok_hash_bytes(s, len) & m->mask;
    while (m->slots[i] >= 0) {
        if (strmap_key_eq(t, m->slots[i], s, len)) return m->slots[i];
        i = (i + 1) & m->mask;
    }
    return -1;
}

/* ---- (left, right) -> merge ---- */

static size_t merge_slot(uint64_t key, size_t mask)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 24) & mask;
}

void tok_mergemap_init(tok_mergemap *m, size_t expected)
{
    size_t cap = pow2_at_least(expected * 2 + 1);
    m->slots = xmalloc(cap * sizeof *m->slots);
    for (size_t i = 0; i < cap; i++) m->slots[i] = (tok_merge){0, 0, -1};
    m->mask = cap - 1;
    m->count = 0;
}

void tok_mergemap_free(tok_mergemap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

void tok_mergemap_put(tok_mergemap *m, int32_t left, int32_t right, uint32_t rank, int32_t id)
{
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    size_t i = merge_slot(key, m->mask);
    while (m->slots[i].id >= 0 && m->slots[i].key != key) i = (i + 1) & m->mask;
    if (m->slots[i].id < 0) m->count++;
    m->slots[i] = (tok_merge){key, rank, id};
}

const tok_merge *tok_mergemap_get(const tok_mergemap *m, int32_t left, int32_t right)
{
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    size_t i = merge_slot(key, m->mask);
    while (m->slots[i].id >= 0) {
        if (m->slots[i].key == key) return &m->slots[i];
        i = (i + 1) & m->mask;
    }
    return NULL;
}

/* ---- word cache ---- */

enum {
    CACHE_SLOTS = 1 << 15,     /* power of two */
    CACHE_MAX_ENTRIES = 1 << 14,
    CACHE_MAX_KEY = 256,       /* longer words are not cached */
    CACHE_MAX_BYTES = 1 << 20, /* key bytes before a reset */
};

struct tok_cache_slot {
    uint64_t hash;
    uint32_t koff, klen; /* koff UINT32_MAX: empty */
    uint32_t voff, vn;
};

void tok_cache_init(tok_cache *c)
{
    memset(c, 0, sizeof *c);
}

void tok_cache_free(tok_cache *c)
{
    free(c->slots);
    sb_free(&c->keys);
    free(c->vals);
    memset(c, 0, sizeof *c);
}

static void cache_reset(tok_cache *c)
{
    if (!c->slots) c->slots = xmalloc(CACHE_SLOTS * sizeof *c->slots);
    for (size_t i = 0; i < CACHE_SLOTS; i++) c->slots[i].koff = UINT32_MAX;
    c->mask = CACHE_SLOTS - 1;
    c->count = 0;
    sb_clear(&c->keys);
    c->nvals = 0;
}

static struct tok_cache_slot *cache_find(tok_cache *c, const char *w, size_t n, uint64_t h)
{
    size_t i = h & c->mask;
    for (;;) {
        struct tok_cache_slot *s = &c->slots[i];
        if (s->koff == UINT32_MAX) return s;
        if (s->hash == h && s->klen == n && memcmp(c->keys.buf + s->koff, w, n) == 0) return s;
        i = (i + 1) & c->mask;
    }
}

static void cache_put(tok_cache *c, struct tok_cache_slot *s, const char *w, size_t n, uint64_t h,
                      const int32_t *ids, size_t nids)
{
    s->hash = h;
    s->koff = (uint32_t)c->keys.len;
    s->klen = (uint32_t)n;
    sb_putn(&c->keys, w, n);
    if (c->nvals + nids > c->capvals) {
        c->capvals = c->capvals ? c->capvals * 2 : 4096;
        while (c->nvals + nids > c->capvals) c->capvals *= 2;
        c->vals = xrealloc(c->vals, c->capvals * sizeof *c->vals);
    }
    if (nids) memcpy(c->vals + c->nvals, ids, nids * sizeof *ids);
    s->voff = (uint32_t)c->nvals;
    s->vn = (uint32_t)nids;
    c->nvals += nids;
    c->count++;
}

/* ---- merge loops ---- */

void tok_bpe_merge_scan(const tok_tokenizer *t, const char *w, size_t n, tok_ids *out)
{
    int32_t small_sym[64];
    uint32_t small_rank[64];
    int32_t *sym = n <= 64 ? small_sym : xmalloc(n * sizeof *sym);
    uint32_t *rank = n <= 64 ? small_rank : xmalloc(n * sizeof *rank);
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(unsigned char)w[i]];
        if (id >= 0) sym[ns++] = id;
    }
    /* rank[i]: the rank of merging sym[i] with sym[i+1] (UINT32_MAX: none) */
    for (size_t i = 0; i + 1 < ns; i++) {
        const tok_merge *m = tok_mergemap_get(&t->merges, sym[i], sym[i + 1]);
        rank[i] = m ? m->rank : UINT32_MAX;
    }
    while (ns > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < ns; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == UINT32_MAX) break;
        sym[best] = tok_mergemap_get(&t->merges, sym[best], sym[best + 1])->id;
        memmove(sym + best + 1, sym + best + 2, (ns - best - 2) * sizeof *sym);
        memmove(rank + best + 1, rank + best + 2, (ns > best + 3 ? ns - best - 3 : 0) * sizeof *rank);
        ns--;
        if (best > 0) {
            const tok_merge *m = tok_mergemap_get(&t->merges, sym[best - 1], sym[best]);
            rank[best - 1] = m ? m->rank : UINT32_MAX;
        }
        if (best + 1 < ns) {
            const tok_merge *m = tok_mergemap_get(&t->merges, sym[best], sym[best + 1]);
            rank[best] = m ? m->rank : UINT32_MAX;
        }
    }
    for (size_t i = 0; i < ns; i++) tok_ids_push(out, sym[i], 0);
    if (sym != small_sym) free(sym);
    if (rank != small_rank) free(rank);
}

void tok_bpe_merge_naive(const tok_tokenizer *t, const char *w, size_t n, tok_ids *out)
{
    int32_t *sym = xmalloc((n ? n : 1) * sizeof *sym);
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        if (t->byte_id[(unsigned char)w[i]] >= 0) sym[ns++] = t->byte_id[(unsigned char)w[i]];
    for (;;) {
        const tok_merge *best = NULL;
        size_t at = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            const tok_merge *m = tok_mergemap_get(&t->merges, sym[i], sym[i + 1]);
            if (m && (!best || m->rank < best->rank)) {
                best = m;
                at = i;
            }
        }
        if (!best) break;
        sym[at] = best->id;
        memmove(sym + at + 1, sym + at + 2, (ns - at - 2) * sizeof *sym);
        ns--;
    }
    for (size_t i = 0; i < ns; i++) tok_ids_push(out, sym[i], 0);
    free(sym);
}

typedef struct heap_item {
    uint32_t rank;
    uint32_t pos;   /* the left symbol */
    int32_t id;     /* the merged token, to spot stale entries */
} heap_item;

static bool heap_less(heap_item a, heap_item b)
{
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

static void heap_push(heap_item *h, size_t *n, heap_item x)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(x, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static heap_item heap_pop(heap_item *h, size_t *n)
{
    heap_item top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(h[c + 1], h[c])) c++;
        if (!heap_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void heap_consider(const tok_tokenizer *t, heap_item *h, size_t *nh, const int32_t *sym,
                          uint32_t left, uint32_t right)
{
    const tok_merge *m = tok_mergemap_get(&t->merges, sym[left], sym[right]);
    if (m) heap_push(h, nh, (heap_item){m->rank, left, m->id});
}

void tok_bpe_merge_heap(const tok_tokenizer *t, const char *w, size_t n, tok_ids *out)
{
    int32_t *sym = xmalloc(n * sizeof *sym);
    uint32_t *next = xmalloc(n * sizeof *next), *prev = xmalloc(n * sizeof *prev);
    heap_item *h = xmalloc((2 * n + 1) * sizeof *h);
    size_t ns = 0, nh = 0;
    const uint32_t NONE = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(unsigned char)w[i]];
        if (id < 0) continue;
        sym[ns] = id;
        prev[ns] = ns ? (uint32_t)ns - 1 : NONE;
        next[ns] = NONE;
        if (ns) next[ns - 1] = (uint32_t)ns;
        ns++;
    }
    for (size_t i = 0; i + 1 < ns; i++) heap_consider(t, h, &nh, sym, (uint32_t)i, (uint32_t)i + 1);
    while (nh) {
        heap_item top = heap_pop(h, &nh);
        uint32_t l = top.pos, r = next[l];
        if (sym[l] < 0 || r == NONE) continue; /* merged away, or now last */
        const tok_merge *m = tok_mergemap_get(&t->merges, sym[l], sym[r]);
        if (!m || m->id != top.id) continue; /* stale */
        sym[l] = m->id;
        sym[r] = -1;
        next[l] = next[r];
        if (next[r] != NONE) prev[next[r]] = l;
        if (prev[l] != NONE) heap_consider(t, h, &nh, sym, prev[l], l);
        if (next[l] != NONE) heap_consider(t, h, &nh, sym, l, next[l]);
    }
    for (uint32_t i = ns ? 0 : NONE; i != NONE; i = next[i]) tok_ids_push(out, sym[i], 0);
    free(sym);
    free(next);
    free(prev);
    free(h);
}

/* ---- one word ---- */

static void push_with_offsets(const tok_tokenizer *t, const int32_t *ids, size_t n, size_t base,
                              tok_ids *out)
{
    size_t pos = base;
    for (size_t i = 0; i < n; i++) {
        tok_ids_push(out, ids[i], pos);
        pos += t->blen[ids[i]];
    }
}

void tok_bpe_word(tok_tokenizer *t, const char *w, size_t n, size_t base, tok_ids *out)
{
    if (n == 0) return;
    if (t->ignore_merges) {
        int32_t id = tok_strmap_get(&t->vocab, t, w, n);
        if (id >= 0) {
            tok_ids_push(out, id, base);
            return;
        }
    }
    tok_cache *c = &t->cache;
    struct tok_cache_slot *slot = NULL;
    uint64_t h = 0;
    if (t->naive) {
        size_t first = out->len;
        tok_bpe_merge_naive(t, w, n, out);
        for (size_t i = first, pos = base; i < out->len; pos += t->blen[out->ids[i]], i++)
            out->offsets[i] = pos;
        return;
    }
    if (n <= CACHE_MAX_KEY && !t->no_cache) {
        if (!c->slots || c->count >= CACHE_MAX_ENTRIES || c->keys.len >= CACHE_MAX_BYTES)
            cache_reset(c);
        h = tok_hash_bytes(w, n);
        slot = cache_find(c, w, n, h);
        if (slot->koff != UINT32_MAX) {
            if (slot->vn) push_with_offsets(t, c->vals + slot->voff, slot->vn, base, out);
            return;
        }
    }
    size_t first = out->len;
    if (n <= 32) tok_bpe_merge_scan(t, w, n, out);
    else tok_bpe_merge_heap(t, w, n, out);
    size_t pos = base;
    for (size_t i = first; i < out->len; i++) {
        out->offsets[i] = pos;
        pos += t->blen[out->ids[i]];
    }
    if (slot) cache_put(c, slot, w, n, h, out->len > first ? out->ids + first : NULL, out->len - first);
}
