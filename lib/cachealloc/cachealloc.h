/* cachealloc.h: a model of PyTorch's CUDA caching allocator.
 *
 * Replays a sequence of tensor allocations and frees through the rules of
 * c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator) and reports
 * what torch.cuda.max_memory_allocated() and max_memory_reserved() would
 * say, and the segments behind them. No GPU is touched: addresses are
 * numbers. docs/estimator.md ("The caching allocator") gives each rule with
 * its source; in short:
 *
 *   - every request is rounded up to a multiple of 512 bytes (kMinBlockSize),
 *     or to the next power-of-2 division with roundup_power2_divisions
 *   - requests up to 1 MiB (kSmallSize) come from the small pool, larger
 *     ones from the large pool; a pool never lends to the other
 *   - a request takes the smallest cached free block that fits (best fit,
 *     the lower address on a tie); when none fits, a new segment is
 *     cudaMalloc'ed: 2 MiB (kSmallBuffer) for a small request, 20 MiB
 *     (kLargeBuffer) for one under 10 MiB (kMinLargeAlloc), else the request
 *     rounded up to 2 MiB (kRoundLarge)
 *   - a block larger than the request is split when the remainder is at
 *     least 512 bytes (small pool) or more than 1 MiB (large pool); an
 *     unsplit block counts whole in the allocated figure
 *   - a freed block merges with its free neighbours of the same segment and
 *     stays cached: reserved memory never shrinks by itself
 *   - max_split_size: blocks that large are never split; a request below it
 *     never takes one, a request above it takes one at most 20 MiB larger
 *   - when cudaMalloc would exceed the capacity, the allocator frees cached
 *     oversize blocks (with max_split_size), then every cached segment that
 *     is entirely free, and retries; if that fails too it is an OOM
 *   - expandable_segments: one segment per pool that grows by pages (2 MiB
 *     small, 20 MiB large) at its lowest free address; an OOM unmaps the
 *     free pages instead of freeing segments
 *
 * Not modelled: several streams (every block is on the default stream),
 * CUDA graphs' private pools, garbage_collection_threshold (off by default)
 * and the per-size-interval form of roundup_power2_divisions.
 */
#ifndef LATHE_CACHEALLOC_H
#define LATHE_CACHEALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The allocator's constants (CUDACachingAllocator.cpp). */
#define CA_MIN_BLOCK 512u                  /* kMinBlockSize: every size is a multiple */
#define CA_SMALL_SIZE (1u << 20)           /* kSmallSize: largest small-pool request */
#define CA_SMALL_BUFFER (2u << 20)         /* kSmallBuffer: small-pool segment */
#define CA_LARGE_BUFFER (20u << 20)        /* kLargeBuffer: segment for 1-10 MiB requests */
#define CA_MIN_LARGE_ALLOC (10u << 20)     /* kMinLargeAlloc */
#define CA_ROUND_LARGE (2u << 20)          /* kRoundLarge: large segments round up to this */

/* PYTORCH_CUDA_ALLOC_CONF, as far as it shapes memory. */
typedef struct ca_config {
    uint64_t capacity;           /* bytes cudaMalloc may hand out; 0 = unlimited */
    uint64_t max_split_size;     /* max_split_size_mb in bytes; 0 = unlimited (the default) */
    unsigned roundup_power2_divisions; /* 0 or 1 = off (the default) */
    bool expandable_segments;    /* expandable_segments:True */
} ca_config;

/* Defaults: unlimited capacity, no max_split_size, no power-2 rounding,
 * fixed-size segments. */
void ca_config_default(ca_config *c);

/* The counters of torch.cuda.memory_stats() the estimator uses. */
typedef struct ca_stats {
    uint64_t allocated, allocated_peak; /* allocated_bytes: sizes of blocks in use */
    uint64_t requested, requested_peak; /* requested_bytes: sizes as asked */
    uint64_t reserved, reserved_peak;   /* reserved_bytes: segments (mapped pages) */
    unsigned long n_segments;           /* fixed-size segments now (a snapshot lists expandable ones) */
    unsigned long num_device_alloc;     /* cudaMalloc calls (page maps) */
    unsigned long num_device_free;      /* cudaFree calls (page unmaps) */
    unsigned long num_alloc_retries;    /* mallocs that had to free cache and retry */
    unsigned long num_ooms;             /* mallocs that failed even then */
    uint64_t over_capacity_peak;        /* the most the model had to reserve beyond capacity */
} ca_stats;

typedef struct ca_allocator ca_allocator;

/* A new, empty allocator (nothing reserved). */
ca_allocator *ca_new(const ca_config *cfg);
void ca_destroy(ca_allocator *a);

/* Allocates size bytes (0 is allowed, as torch allows it: one 512-byte
 * block) for a tensor labelled tag (any small integer >= 0, kept with the
 * block for snapshots). Returns the block's handle (>= 0). An allocation
 * that does not fit the capacity even after freeing the cache counts as an
 * OOM and is made anyway beyond the capacity, so a replay can go on and
 * report how far it went over (stats.over_capacity_peak). */
int ca_malloc(ca_allocator *a, uint64_t size, int tag);
/* Frees a handle returned by ca_malloc (a handle is freed once). */
void ca_free(ca_allocator *a, int handle);
/* The bytes the block of a live handle holds (what allocated_bytes counts). */
uint64_t ca_block_size(const ca_allocator *a, int handle);
/* torch.cuda.empty_cache(): frees every cached segment that is entirely
 * free (unmaps free pages of expandable segments). */
void ca_empty_cache(ca_allocator *a);
const ca_stats *ca_get_stats(const ca_allocator *a);
/* torch.cuda.reset_peak_memory_stats(): peaks become the current values. */
void ca_reset_peaks(ca_allocator *a);

/* ---- snapshots (torch.cuda.memory_snapshot()) ---- */
typedef struct ca_block_info {
    uint64_t offset;   /* from the segment's start */
    uint64_t size;
    uint64_t requested; /* 0 when free */
    bool allocated;
    int tag;           /* -1 when free */
} ca_block_info;

typedef struct ca_segment_info {
    uint64_t address;  /* the model's address of its first byte */
    uint64_t size;
    uint64_t allocated; /* bytes of its blocks in use */
    bool small;        /* small pool */
    bool expandable;   /* a mapped range of an expandable segment */
    size_t first_block, n_blocks; /* into ca_snapshot.blocks */
} ca_segment_info;

typedef struct ca_snapshot {
    ca_segment_info *segments; /* by address */
    size_t n_segments;
    ca_block_info *blocks;
    size_t n_blocks;
} ca_snapshot;

/* The segments and their blocks now. Free with ca_snapshot_free. */
void ca_snapshot_take(const ca_allocator *a, ca_snapshot *out);
void ca_snapshot_free(ca_snapshot *s);

/* The size a request is rounded to (round_size) and the segment a new
 * cudaMalloc for it would get (get_allocation_size), under cfg. */
uint64_t ca_round_size(const ca_config *cfg, uint64_t size);
uint64_t ca_segment_size(uint64_t rounded);

#endif
