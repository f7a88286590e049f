/* cachealloc.c: the caching allocator's model (cachealloc.h). Written from
 * the rules of PyTorch's c10/cuda/CUDACachingAllocator.cpp (read at commit
 * 001074d2, and unchanged in these respects since PyTorch 1.10 / 2.1 for
 * expandable segments); the names of the functions below follow its
 * DeviceCachingAllocator so that a reader can compare them.
 *
 * Blocks live in one array; a segment is a doubly linked list of blocks in
 * address order (prev/next). Each pool keeps its cached free blocks in an
 * array sorted by (size, address), the keys inline: best fit is a binary
 * search over one array (faster here than a tree: the sets hold hundreds to
 * a few thousand blocks). Expandable segments also keep their unmapped
 * ranges, sorted by address. */
#include "cachealloc/cachealloc.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

#define NONE (-1)

typedef struct ca_blk {
    uint64_t addr, size, req;
    int32_t prev, next; /* neighbours in the segment, NONE at its ends */
    int32_t tag;
    int32_t pool;       /* 0 small, 1 large */
    bool allocated, mapped, expandable, used;
} ca_blk;

/* A sorted set of blocks, their keys kept inline so that a search reads
 * one array. */
typedef struct ca_key {
    uint64_t size, addr;
    int32_t id;
} ca_key;

typedef struct ca_set {
    ca_key *v;
    size_t n, cap;
} ca_set;

typedef struct ca_pool {
    ca_set free_blocks; /* cached free mapped blocks by (size, address) */
    ca_set unmapped;    /* unmapped ranges of expandable segments by address */
    bool small;
    uint64_t page;      /* an expandable segment's page: 2 MiB small, 20 MiB large */
} ca_pool;

/* An expandable segment's address range (its page boundaries are counted
 * from base). */
typedef struct ca_es {
    uint64_t base, span;
    int32_t pool;
} ca_es;

struct ca_allocator {
    ca_config cfg;
    ca_blk *b;
    size_t nb, capb;
    int32_t *spare; /* unused slots of b */
    size_t n_spare, cap_spare;
    ca_pool pools[2];
    ca_es *es;
    size_t n_es;
    uint64_t next_addr;
    ca_stats st;
};

void ca_config_default(ca_config *c)
{
    memset(c, 0, sizeof *c);
}

static uint64_t max_split(const ca_allocator *a)
{
    return a->cfg.max_split_size ? a->cfg.max_split_size : UINT64_MAX;
}

/* ---- sizes ---- */

/* roundup_power2_next_division: the next of `divisions` equal steps
 * between the powers of two around size. */
static uint64_t roundup_power2(uint64_t size, unsigned divisions)
{
    if ((size & (size - 1)) == 0) return size;
    uint64_t floor2 = 1;
    while (floor2 <= size / 2) floor2 <<= 1;
    unsigned d2 = 1;
    while (d2 * 2 <= divisions) d2 *= 2; /* the C++ code uses the power of two below divisions */
    uint64_t step = floor2 / d2;
    if (step == 0) return floor2 << 1;
    uint64_t down = size & ~(step - 1);
    return down == size ? size : down + step;
}

uint64_t ca_round_size(const ca_config *cfg, uint64_t size)
{
    if (size < CA_MIN_BLOCK) return CA_MIN_BLOCK;
    unsigned div = cfg ? cfg->roundup_power2_divisions : 0;
    if (div > 1 && size > (uint64_t)CA_MIN_BLOCK * div) return roundup_power2(size, div);
    return CA_MIN_BLOCK * ((size + CA_MIN_BLOCK - 1) / CA_MIN_BLOCK);
}

uint64_t ca_segment_size(uint64_t size)
{
    if (size <= CA_SMALL_SIZE) return CA_SMALL_BUFFER;
    if (size < CA_MIN_LARGE_ALLOC) return CA_LARGE_BUFFER;
    return CA_ROUND_LARGE * ((size + CA_ROUND_LARGE - 1) / CA_ROUND_LARGE);
}

/* ---- blocks and sets ---- */

static int32_t blk_new(ca_allocator *a, uint64_t addr, uint64_t size, int32_t pool)
{
    int32_t id;
    if (a->n_spare) {
        id = a->spare[--a->n_spare];
    } else {
        if (a->nb == a->capb) {
            a->capb = a->capb ? a->capb * 2 : 256;
            a->b = xrealloc(a->b, a->capb * sizeof *a->b);
        }
        id = (int32_t)a->nb++;
    }
    ca_blk *k = &a->b[id];
    memset(k, 0, sizeof *k);
    k->addr = addr;
    k->size = size;
    k->prev = k->next = NONE;
    k->tag = -1;
    k->pool = pool;
    k->mapped = true;
    k->used = true;
    return id;
}

static void blk_release(ca_allocator *a, int32_t id)
{
    a->b[id].used = false;
    if (a->n_spare == a->cap_spare) {
        a->cap_spare = a->cap_spare ? a->cap_spare * 2 : 64;
        a->spare = xrealloc(a->spare, a->cap_spare * sizeof *a->spare);
    }
    a->spare[a->n_spare++] = id;
}

/* (size, address) order of the free-block sets; address order of the
 * unmapped sets. */
static size_t set_lower(const ca_set *s, bool by_size, uint64_t size, uint64_t addr)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const ca_key *k = &s->v[mid];
        bool less = by_size ? (k->size < size || (k->size == size && k->addr < addr)) : k->addr < addr;
        if (less)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void set_insert(ca_allocator *a, ca_set *s, bool by_size, int32_t id)
{
    const ca_blk *b = &a->b[id];
    size_t at = set_lower(s, by_size, b->size, b->addr);
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = xrealloc(s->v, s->cap * sizeof *s->v);
    }
    memmove(s->v + at + 1, s->v + at, (s->n - at) * sizeof *s->v);
    s->v[at] = (ca_key){b->size, b->addr, id};
    s->n++;
}

static void set_remove_at(ca_set *s, size_t at)
{
    memmove(s->v + at, s->v + at + 1, (s->n - at - 1) * sizeof *s->v);
    s->n--;
}

static void set_remove(ca_allocator *a, ca_set *s, bool by_size, int32_t id)
{
    size_t at = set_lower(s, by_size, a->b[id].size, a->b[id].addr);
    if (at < s->n && s->v[at].id == id) set_remove_at(s, at);
}

/* The set a cached block belongs to. */
static void cache_insert(ca_allocator *a, int32_t id)
{
    ca_pool *p = &a->pools[a->b[id].pool];
    if (a->b[id].mapped)
        set_insert(a, &p->free_blocks, true, id);
    else
        set_insert(a, &p->unmapped, false, id);
}

static void cache_remove(ca_allocator *a, int32_t id)
{
    ca_pool *p = &a->pools[a->b[id].pool];
    if (a->b[id].mapped)
        set_remove(a, &p->free_blocks, true, id);
    else
        set_remove(a, &p->unmapped, false, id);
}

/* ---- stats ---- */

static void reserve(ca_allocator *a, uint64_t bytes)
{
    a->st.reserved += bytes;
    if (a->st.reserved > a->st.reserved_peak) a->st.reserved_peak = a->st.reserved;
    a->st.num_device_alloc++;
    uint64_t cap = a->cfg.capacity;
    if (cap && a->st.reserved > cap && a->st.reserved - cap > a->st.over_capacity_peak)
        a->st.over_capacity_peak = a->st.reserved - cap;
}

static void unreserve(ca_allocator *a, uint64_t bytes)
{
    a->st.reserved -= bytes;
    a->st.num_device_free++;
}

static bool fits_capacity(const ca_allocator *a, uint64_t bytes)
{
    return !a->cfg.capacity || a->st.reserved + bytes <= a->cfg.capacity;
}

/* try_merge_blocks: src (a free neighbour in the same mapping state) joins
 * dst, which survives. */
static void try_merge(ca_allocator *a, int32_t dst, int32_t src)
{
    if (src == NONE) return;
    ca_blk *s = &a->b[src], *d = &a->b[dst];
    if (s->allocated || s->mapped != d->mapped) return;
    cache_remove(a, src);
    if (d->prev == src) {
        d->addr = s->addr;
        d->prev = s->prev;
        if (d->prev != NONE) a->b[d->prev].next = dst;
    } else {
        d->next = s->next;
        if (d->next != NONE) a->b[d->next].prev = dst;
    }
    d->size += s->size;
    blk_release(a, src);
}

/* ---- expandable segments ---- */

static ca_es *es_of(ca_allocator *a, const ca_blk *k)
{
    for (size_t i = 0; i < a->n_es; i++)
        if (k->addr >= a->es[i].base && k->addr < a->es[i].base + a->es[i].span) return &a->es[i];
    return NULL;
}

/* A new expandable segment: address space for 1 1/8 of the capacity
 * (ExpandableSegment reserves that much of the GPU's memory), all unmapped. */
static void es_new(ca_allocator *a, int32_t pool)
{
    uint64_t page = a->pools[pool].page;
    uint64_t want = a->cfg.capacity ? a->cfg.capacity + a->cfg.capacity / 8 : (uint64_t)1 << 44;
    uint64_t span = (want + page - 1) / page * page;
    uint64_t base = (a->next_addr + page - 1) / page * page;
    a->next_addr = base + span + CA_ROUND_LARGE;
    a->es = xrealloc(a->es, (a->n_es + 1) * sizeof *a->es);
    a->es[a->n_es++] = (ca_es){base, span, pool};
    int32_t id = blk_new(a, base, span, pool);
    a->b[id].mapped = false;
    a->b[id].expandable = true;
    cache_insert(a, id);
}

static bool has_room(const ca_allocator *a, int32_t id, uint64_t size)
{
    uint64_t bytes = 0;
    while (bytes < size && id != NONE && !a->b[id].allocated) {
        bytes += a->b[id].size;
        id = a->b[id].next;
    }
    return bytes >= size;
}

/* find_expandable_block: the lowest address where free and unmapped
 * space together hold size bytes. */
static int32_t find_expandable_block(ca_allocator *a, int32_t pool, uint64_t size)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        ca_set *u = &a->pools[pool].unmapped;
        for (size_t i = 0; i < u->n; i++) {
            int32_t c = u->v[i].id;
            int32_t p = a->b[c].prev;
            if (p != NONE && !a->b[p].allocated) c = p;
            if (has_room(a, c, size)) return c;
        }
        es_new(a, pool);
    }
    return NONE; /* a request larger than the whole address space */
}

/* map_block: backs [start, start + size) of an unmapped range with pages;
 * the new free block merges with its free neighbours. Returns the block
 * that holds the mapped range, or NONE when the capacity refuses. */
static int32_t map_block(ca_allocator *a, int32_t id, uint64_t size, bool force)
{
    ca_blk *k = &a->b[id];
    ca_es *es = es_of(a, k);
    uint64_t page = a->pools[k->pool].page;
    uint64_t off = k->addr - es->base;
    uint64_t end = (off + size + page - 1) / page * page;
    uint64_t mapped = end - off;
    if (mapped > k->size) mapped = k->size;
    if (!force && !fits_capacity(a, mapped)) return NONE;
    cache_remove(a, id);
    if (mapped < k->size) {
        int32_t rest = blk_new(a, k->addr + mapped, k->size - mapped, k->pool);
        k = &a->b[id];
        ca_blk *r = &a->b[rest];
        r->mapped = false;
        r->expandable = true;
        r->prev = id;
        r->next = k->next;
        if (k->next != NONE) a->b[k->next].prev = rest;
        k->next = rest;
        k->size = mapped;
        cache_insert(a, rest);
    }
    a->b[id].mapped = true;
    try_merge(a, id, a->b[id].prev);
    try_merge(a, id, a->b[id].next);
    cache_insert(a, id);
    reserve(a, mapped);
    return id;
}

/* try_allocate_expandable_block */
static int32_t alloc_expandable(ca_allocator *a, int32_t pool, uint64_t size, bool force)
{
    int32_t c = find_expandable_block(a, pool, size);
    if (c == NONE) return NONE;
    if (!a->b[c].mapped) {
        uint64_t want = a->b[c].size < size ? a->b[c].size : size;
        c = map_block(a, c, want, force);
        if (c == NONE) return NONE;
    }
    while (a->b[c].size < size) {
        int32_t nx = a->b[c].next;
        uint64_t rest = size - a->b[c].size;
        c = map_block(a, nx, rest < a->b[nx].size ? rest : a->b[nx].size, force);
        if (c == NONE) return NONE;
    }
    cache_remove(a, c);
    return c;
}

/* unmap_block: returns the whole pages inside a free block. */
static void unmap_block(ca_allocator *a, int32_t id)
{
    ca_blk *k = &a->b[id];
    ca_es *es = es_of(a, k);
    uint64_t page = a->pools[k->pool].page;
    uint64_t off = k->addr - es->base;
    uint64_t first = (off + page - 1) / page * page, last = (off + k->size) / page * page;
    if (first >= last) return;
    cache_remove(a, id);
    uint64_t before = first - off, after = off + k->size - last;
    int32_t pool = k->pool;
    if (before) {
        int32_t f = blk_new(a, a->b[id].addr, before, pool);
        ca_blk *n = &a->b[f], *kk = &a->b[id];
        n->expandable = true;
        n->prev = kk->prev;
        n->next = id;
        if (kk->prev != NONE) a->b[kk->prev].next = f;
        kk->prev = f;
        cache_insert(a, f);
    }
    if (after) {
        int32_t f = blk_new(a, es->base + last, after, pool);
        ca_blk *n = &a->b[f], *kk = &a->b[id];
        n->expandable = true;
        n->prev = id;
        n->next = kk->next;
        if (kk->next != NONE) a->b[kk->next].prev = f;
        kk->next = f;
        cache_insert(a, f);
    }
    k = &a->b[id];
    k->addr = es->base + first;
    k->size = last - first;
    k->mapped = false;
    unreserve(a, last - first);
    try_merge(a, id, k->prev);
    try_merge(a, id, a->b[id].next);
    cache_insert(a, id);
}

/* ---- segments ---- */

/* alloc_block: a new segment of seg bytes (cudaMalloc), or pages of the
 * expandable segment. NONE when the capacity refuses (unless forced). */
static int32_t alloc_block(ca_allocator *a, int32_t pool, uint64_t size, uint64_t seg, bool force)
{
    if (a->cfg.expandable_segments) return alloc_expandable(a, pool, size, force);
    if (!force && !fits_capacity(a, seg)) return NONE;
    int32_t id = blk_new(a, a->next_addr, seg, pool);
    a->next_addr += seg + CA_ROUND_LARGE; /* segments never touch */
    a->st.n_segments++;
    reserve(a, seg);
    return id;
}

/* release_block: cudaFree of a cached segment that is entirely free. */
static void release_block(ca_allocator *a, int32_t id)
{
    cache_remove(a, id);
    unreserve(a, a->b[id].size);
    a->st.n_segments--;
    blk_release(a, id);
}

static bool whole_segment(const ca_blk *k)
{
    return k->prev == NONE && k->next == NONE && !k->expandable;
}

/* release_available_cached_blocks: with max_split_size, frees one cached
 * oversize block that covers the request, else the largest ones until
 * they add up to it. */
static bool release_oversize(ca_allocator *a, int32_t pool, uint64_t size)
{
    uint64_t mss = max_split(a);
    if (mss == UINT64_MAX) return false;
    ca_set *s = &a->pools[pool].free_blocks;
    uint64_t key = size < mss ? mss : size;
    size_t at = set_lower(s, true, key, 0);
    if (at < s->n) {
        if (!whole_segment(&a->b[s->v[at].id])) return false;
        release_block(a, s->v[at].id);
        return true;
    }
    uint64_t released = 0;
    while (released < key && s->n > 0) {
        int32_t id = s->v[s->n - 1].id;
        if (a->b[id].size < mss || !whole_segment(&a->b[id])) break;
        released += a->b[id].size;
        release_block(a, id);
    }
    return released >= key;
}

/* release_cached_blocks: every cached segment that is entirely free goes
 * back to CUDA; expandable segments unmap their free pages. */
static void release_cached(ca_allocator *a)
{
    for (int p = 0; p < 2; p++) {
        ca_set *s = &a->pools[p].free_blocks;
        size_t n = s->n;
        int32_t *ids = xmalloc((n ? n : 1) * sizeof *ids);
        for (size_t i = 0; i < n; i++) ids[i] = s->v[i].id;
        for (size_t i = 0; i < n; i++) {
            ca_blk *k = &a->b[ids[i]];
            if (!k->used || k->allocated || !k->mapped) continue;
            if (k->expandable)
                unmap_block(a, ids[i]);
            else if (whole_segment(k))
                release_block(a, ids[i]);
        }
        free(ids);
    }
}

/* ---- malloc and free ---- */

static uint64_t expandable_size(const ca_allocator *a, int32_t id)
{
    const ca_blk *k = &a->b[id];
    uint64_t s = k->size;
    if (k->next != NONE && !a->b[k->next].mapped) s += a->b[k->next].size;
    return s;
}

/* get_free_block: the smallest cached block that fits, within the
 * max_split_size rules; with expandable segments, the one whose room
 * (itself and the unmapped space after it) is smallest. */
static int32_t get_free_block(ca_allocator *a, int32_t pool, uint64_t size)
{
    ca_set *s = &a->pools[pool].free_blocks;
    size_t at = set_lower(s, true, size, 0);
    if (at == s->n) return NONE;
    if (a->b[s->v[at].id].expandable) {
        while (at + 1 < s->n && a->b[s->v[at].id].expandable &&
               expandable_size(a, s->v[at + 1].id) < expandable_size(a, s->v[at].id))
            at++;
    }
    uint64_t mss = max_split(a), bs = s->v[at].size;
    if (size < mss && bs >= mss) return NONE;
    if (size >= mss && bs >= size + CA_LARGE_BUFFER) return NONE;
    int32_t id = s->v[at].id;
    set_remove_at(s, at);
    return id;
}

static bool should_split(const ca_allocator *a, int32_t id, uint64_t size)
{
    const ca_blk *k = &a->b[id];
    uint64_t rest = k->size - size;
    if (a->pools[k->pool].small || a->cfg.expandable_segments) return rest >= CA_MIN_BLOCK;
    return size < max_split(a) && rest > CA_SMALL_SIZE;
}

/* alloc_found_block: the block (split when worth it) becomes the tensor's. */
static void alloc_found(ca_allocator *a, int32_t id, uint64_t size, uint64_t orig, int tag)
{
    if (should_split(a, id, size)) {
        ca_blk *k = &a->b[id];
        int32_t rest = blk_new(a, k->addr + size, k->size - size, k->pool);
        k = &a->b[id];
        ca_blk *r = &a->b[rest];
        r->expandable = k->expandable;
        r->prev = id;
        r->next = k->next;
        if (k->next != NONE) a->b[k->next].prev = rest;
        k->next = rest;
        k->size = size;
        cache_insert(a, rest);
    }
    ca_blk *k = &a->b[id];
    k->allocated = true;
    k->req = orig;
    k->tag = tag;
    a->st.allocated += k->size;
    a->st.requested += orig;
    if (a->st.allocated > a->st.allocated_peak) a->st.allocated_peak = a->st.allocated;
    if (a->st.requested > a->st.requested_peak) a->st.requested_peak = a->st.requested;
}

int ca_malloc(ca_allocator *a, uint64_t orig, int tag)
{
    uint64_t size = ca_round_size(&a->cfg, orig);
    int32_t pool = size <= CA_SMALL_SIZE ? 0 : 1;
    uint64_t seg = ca_segment_size(size);
    int32_t id = get_free_block(a, pool, size);
    if (id == NONE) {
        id = alloc_block(a, pool, size, seg, false);
        if (id == NONE && release_oversize(a, pool, size)) id = alloc_block(a, pool, size, seg, false);
        if (id == NONE) {
            release_cached(a);
            a->st.num_alloc_retries++;
            id = alloc_block(a, pool, size, seg, false);
        }
        if (id == NONE) {
            a->st.num_ooms++;
            id = alloc_block(a, pool, size, seg, true);
        }
    }
    alloc_found(a, id, size, orig, tag);
    return id;
}

void ca_free(ca_allocator *a, int handle)
{
    ca_blk *k = &a->b[handle];
    k->allocated = false;
    a->st.allocated -= k->size;
    a->st.requested -= k->req;
    k->req = 0;
    k->tag = -1;
    try_merge(a, handle, a->b[handle].prev);
    try_merge(a, handle, a->b[handle].next);
    cache_insert(a, handle);
}

uint64_t ca_block_size(const ca_allocator *a, int handle)
{
    return a->b[handle].size;
}

void ca_empty_cache(ca_allocator *a)
{
    release_cached(a);
}

const ca_stats *ca_get_stats(const ca_allocator *a)
{
    return &a->st;
}

void ca_reset_peaks(ca_allocator *a)
{
    a->st.allocated_peak = a->st.allocated;
    a->st.requested_peak = a->st.requested;
    a->st.reserved_peak = a->st.reserved;
    a->st.over_capacity_peak = 0;
}

ca_allocator *ca_new(const ca_config *cfg)
{
    ca_allocator *a = xcalloc(1, sizeof *a);
    if (cfg) a->cfg = *cfg;
    a->pools[0].small = true;
    a->pools[0].page = CA_SMALL_BUFFER;
    a->pools[1].page = CA_LARGE_BUFFER;
    a->next_addr = (uint64_t)1 << 30;
    return a;
}

void ca_destroy(ca_allocator *a)
{
    if (!a) return;
    for (int p = 0; p < 2; p++) {
        free(a->pools[p].free_blocks.v);
        free(a->pools[p].unmapped.v);
    }
    free(a->b);
    free(a->spare);
    free(a->es);
    free(a);
}

/* ---- snapshots ---- */

static int cmp_addr(const void *x, const void *y)
{
    const ca_segment_info *p = x, *q = y;
    return (p->address > q->address) - (p->address < q->address);
}

void ca_snapshot_take(const ca_allocator *a, ca_snapshot *out)
{
    memset(out, 0, sizeof *out);
    size_t heads = 0;
    for (size_t i = 0; i < a->nb; i++) {
        const ca_blk *k = &a->b[i];
        if (k->used && k->mapped && (k->prev == NONE || !a->b[k->prev].mapped)) heads++;
    }
    out->segments = xcalloc(heads ? heads : 1, sizeof *out->segments);
    size_t cap = 16;
    out->blocks = xmalloc(cap * sizeof *out->blocks);
    for (size_t i = 0; i < a->nb; i++) {
        const ca_blk *k = &a->b[i];
        if (!(k->used && k->mapped && (k->prev == NONE || !a->b[k->prev].mapped))) continue;
        ca_segment_info *s = &out->segments[out->n_segments++];
        s->address = k->addr;
        s->small = a->pools[k->pool].small;
        s->expandable = k->expandable;
        s->first_block = out->n_blocks;
        for (int32_t id = (int32_t)i; id != NONE && a->b[id].mapped; id = a->b[id].next) {
            const ca_blk *x = &a->b[id];
            if (out->n_blocks == cap) {
                cap *= 2;
                out->blocks = xrealloc(out->blocks, cap * sizeof *out->blocks);
            }
            out->blocks[out->n_blocks++] = (ca_block_info){x->addr - s->address, x->size, x->req,
                                                           x->allocated, x->allocated ? x->tag : -1};
            s->size += x->size;
            if (x->allocated) s->allocated += x->size;
            s->n_blocks++;
        }
    }
    /* blocks stay grouped by segment; only the segment list is sorted */
    qsort(out->segments, out->n_segments, sizeof *out->segments, cmp_addr);
}

void ca_snapshot_free(ca_snapshot *s)
{
    free(s->segments);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}
