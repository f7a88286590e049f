/* test_cachealloc.c: the caching allocator's model against allocator
 * behaviour computed by hand from the rules of PyTorch's
 * CUDACachingAllocator.cpp: rounding, the two pools and their segment
 * sizes, splitting, best fit and reuse, merging, max_split_size, the
 * release-and-retry on a full device, expandable segments, power-of-2
 * rounding and snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cachealloc/cachealloc.h"

#define KIB ((uint64_t)1 << 10)
#define MIB ((uint64_t)1 << 20)

static ca_allocator *fresh(void)
{
    ca_config c;
    ca_config_default(&c);
    return ca_new(&c);
}

static void expect(const ca_allocator *a, uint64_t allocated, uint64_t reserved)
{
    const ca_stats *s = ca_get_stats(a);
    if (s->allocated != allocated || s->reserved != reserved)
        fail_msg("allocated %llu reserved %llu, expected %llu and %llu", (unsigned long long)s->allocated,
                 (unsigned long long)s->reserved, (unsigned long long)allocated,
                 (unsigned long long)reserved);
}

/* Sizes round up to 512 bytes; small requests share 2 MiB segments. */
static void test_rounding_small_pool(void **state)
{
    (void)state;
    assert_int_equal(ca_round_size(NULL, 0), 512);
    assert_int_equal(ca_round_size(NULL, 1), 512);
    assert_int_equal(ca_round_size(NULL, 513), 1024);
    assert_int_equal(ca_segment_size(1 * MIB), 2 * MIB);
    assert_int_equal(ca_segment_size(1 * MIB + 512), 20 * MIB);
    assert_int_equal(ca_segment_size(10 * MIB - 512), 20 * MIB);
    assert_int_equal(ca_segment_size(10 * MIB), 10 * MIB);
    assert_int_equal(ca_segment_size(10 * MIB + 512), 12 * MIB);
    ca_allocator *a = fresh();
    int h = ca_malloc(a, 1, 0);
    expect(a, 512, 2 * MIB);
    assert_int_equal(ca_block_size(a, h), 512);
    assert_int_equal(ca_get_stats(a)->requested, 1);
    /* beside the 512-byte block, three 512 KiB tensors fit the first 2 MiB
     * segment; the fourth opens a second, which the fifth shares */
    int t[5];
    for (int i = 0; i < 5; i++) t[i] = ca_malloc(a, 512 * KIB, 0);
    expect(a, 512 + 5 * 512 * KIB, 4 * MIB);
    /* 2 MiB is a large request: a 20 MiB segment of the large pool */
    int big = ca_malloc(a, 2 * MIB, 0);
    expect(a, 512 + 5 * 512 * KIB + 2 * MIB, 24 * MIB);
    for (int i = 0; i < 5; i++) ca_free(a, t[i]);
    ca_free(a, h);
    ca_free(a, big);
    expect(a, 0, 24 * MIB); /* cached, not returned */
    assert_int_equal(ca_get_stats(a)->allocated_peak, 512 + 5 * 512 * KIB + 2 * MIB);
    ca_destroy(a);
}

/* 1-10 MiB requests split a 20 MiB segment; larger ones get their own,
 * rounded to 2 MiB, split only when more than 1 MiB would be left. */
static void test_large_pool_segments(void **state)
{
    (void)state;
    ca_allocator *a = fresh();
    int x = ca_malloc(a, 3 * MIB / 2, 0); /* 1.5 MiB: a 20 MiB segment, split */
    expect(a, 3 * MIB / 2, 20 * MIB);
    int y = ca_malloc(a, 5 * MIB, 0); /* fits the remainder */
    expect(a, 13 * MIB / 2, 20 * MIB);
    int v = ca_malloc(a, 11 * MIB, 0); /* the 13.5 MiB remainder fits it too */
    expect(a, 35 * MIB / 2, 20 * MIB);
    ca_free(a, x);
    ca_free(a, y);
    ca_free(a, v);
    ca_destroy(a);

    a = fresh();
    int z = ca_malloc(a, 11 * MIB, 0); /* 12 MiB segment, 1 MiB left: not split */
    expect(a, 12 * MIB, 12 * MIB);
    assert_int_equal(ca_block_size(a, z), 12 * MIB);
    int w = ca_malloc(a, 21 * MIB / 2, 0); /* 10.5 MiB: 12 MiB segment, 1.5 MiB left: split */
    expect(a, 12 * MIB + 21 * MIB / 2, 24 * MIB);
    assert_int_equal(ca_block_size(a, w), 21 * MIB / 2);
    ca_free(a, z);
    ca_free(a, w);
    ca_destroy(a);
}

/* Best fit, splitting, fragmentation and merging. */
static void test_best_fit_and_merge(void **state)
{
    (void)state;
    ca_allocator *a = fresh();
    int p = ca_malloc(a, 100 * MIB, 0), q = ca_malloc(a, 50 * MIB, 0);
    ca_free(a, p);
    ca_free(a, q);
    /* 40 MiB takes the smaller cached block (50) and splits it */
    int r = ca_malloc(a, 40 * MIB, 0);
    expect(a, 40 * MIB, 150 * MIB);
    /* 60 MiB: the 10 MiB remainder is too small, the 100 MiB block fits */
    int s = ca_malloc(a, 60 * MIB, 0);
    expect(a, 100 * MIB, 150 * MIB);
    /* 50 MiB: only 40 + 10 MiB are free, in two segments: a new segment */
    int t = ca_malloc(a, 50 * MIB, 0);
    expect(a, 150 * MIB, 200 * MIB);
    ca_free(a, r);
    ca_free(a, s);
    ca_free(a, t);
    /* freed blocks merged with their remainders: 100 MiB fits whole again */
    int u = ca_malloc(a, 100 * MIB, 0);
    expect(a, 100 * MIB, 200 * MIB);
    assert_int_equal(ca_get_stats(a)->n_segments, 3);
    ca_free(a, u);
    ca_empty_cache(a);
    expect(a, 0, 0);
    assert_int_equal(ca_get_stats(a)->n_segments, 0);
    ca_destroy(a);
}

/* max_split_size_mb:64: blocks of 64 MiB or more are never split, never
 * lent to smaller requests, and lent to larger ones only within 20 MiB. */
static void test_max_split_size(void **state)
{
    (void)state;
    ca_config c;
    ca_config_default(&c);
    c.max_split_size = 64 * MIB;
    ca_allocator *a = ca_new(&c);
    ca_free(a, ca_malloc(a, 100 * MIB, 0));
    int x = ca_malloc(a, 30 * MIB, 0); /* below the limit: a new segment */
    expect(a, 30 * MIB, 130 * MIB);
    int y = ca_malloc(a, 90 * MIB, 0); /* within 20 MiB of the cached 100: whole block */
    expect(a, 130 * MIB, 130 * MIB);
    ca_free(a, y);
    int z = ca_malloc(a, 70 * MIB, 0); /* 100 >= 70 + 20: not lent, a new segment */
    expect(a, 100 * MIB, 200 * MIB);
    ca_free(a, x);
    ca_free(a, z);
    ca_destroy(a);
}

/* A full device: free the cache and retry; an OOM when even that fails. */
static void test_capacity_release_and_oom(void **state)
{
    (void)state;
    ca_config c;
    ca_config_default(&c);
    c.capacity = 200 * MIB;
    ca_allocator *a = ca_new(&c);
    ca_free(a, ca_malloc(a, 150 * MIB, 0));
    int x = ca_malloc(a, 160 * MIB, 0); /* 150 + 160 > 200: the cached 150 is freed first */
    expect(a, 160 * MIB, 160 * MIB);
    assert_int_equal(ca_get_stats(a)->num_alloc_retries, 1);
    assert_int_equal(ca_get_stats(a)->num_ooms, 0);
    int y = ca_malloc(a, 60 * MIB, 0); /* nothing to free: an OOM, made anyway */
    expect(a, 220 * MIB, 220 * MIB);
    assert_int_equal(ca_get_stats(a)->num_ooms, 1);
    assert_int_equal(ca_get_stats(a)->over_capacity_peak, 20 * MIB);
    ca_free(a, x);
    ca_free(a, y);
    ca_destroy(a);

    /* with max_split_size, a cached oversize block is freed on its own */
    c.max_split_size = 64 * MIB;
    a = ca_new(&c);
    int keep = ca_malloc(a, 10 * MIB, 0);
    ca_free(a, ca_malloc(a, 120 * MIB, 0));
    /* the cached 120 is too large to lend to 100 (120 >= 100 + 20) and the
     * device is full: that oversize block alone is freed */
    int z = ca_malloc(a, 100 * MIB, 0);
    expect(a, 110 * MIB, 110 * MIB);
    ca_free(a, z);
    ca_free(a, keep);
    ca_destroy(a);
}

/* expandable_segments:True: one segment per pool growing by 20 MiB pages. */
static void test_expandable_segments(void **state)
{
    (void)state;
    ca_config c;
    ca_config_default(&c);
    c.expandable_segments = true;
    ca_allocator *a = ca_new(&c);
    int x = ca_malloc(a, 30 * MIB, 0); /* two pages mapped, the 10 MiB left is split off */
    expect(a, 30 * MIB, 40 * MIB);
    int y = ca_malloc(a, 15 * MIB, 0); /* the free 10 MiB plus one more page */
    expect(a, 45 * MIB, 60 * MIB);
    ca_free(a, x); /* [0, 30) free, [30, 45) used, [45, 60) free */
    int z = ca_malloc(a, 25 * MIB, 0); /* fits the hole at the start: no new page */
    expect(a, 40 * MIB, 60 * MIB);
    int w = ca_malloc(a, 45 * MIB, 0); /* free 5 + 15 MiB in pieces: the tail grows */
    expect(a, 85 * MIB, 100 * MIB);
    /* the fixed-size allocator holds one segment per large tensor instead */
    ca_free(a, y);
    ca_free(a, z);
    ca_free(a, w);
    ca_empty_cache(a); /* every free page is unmapped */
    expect(a, 0, 0);
    ca_destroy(a);

    ca_allocator *f = fresh();
    int h[4] = {ca_malloc(f, 30 * MIB, 0), ca_malloc(f, 15 * MIB, 0), 0, 0};
    expect(f, 46 * MIB, 46 * MIB); /* 15 MiB in a 16 MiB segment: 1 MiB is not split off */
    ca_free(f, h[0]);
    h[2] = ca_malloc(f, 25 * MIB, 0); /* splits the cached 30 */
    h[3] = ca_malloc(f, 45 * MIB, 0); /* a 46 MiB segment, used whole */
    expect(f, 87 * MIB, 92 * MIB);
    for (int i = 1; i < 4; i++) ca_free(f, h[i]);
    ca_destroy(f);
}

/* roundup_power2_divisions:4 rounds to quarters between powers of two. */
static void test_roundup_power2(void **state)
{
    (void)state;
    ca_config c;
    ca_config_default(&c);
    c.roundup_power2_divisions = 4;
    assert_int_equal(ca_round_size(&c, 3 * MIB + 1), 3 * MIB + MIB / 2);
    assert_int_equal(ca_round_size(&c, 4 * MIB), 4 * MIB);
    assert_int_equal(ca_round_size(&c, 5 * MIB), 5 * MIB);
    assert_int_equal(ca_round_size(&c, 1200), 1536); /* below 512 x 4: plain rounding */
}

/* A snapshot lists the segments and their blocks, used and cached. */
static void test_snapshot(void **state)
{
    (void)state;
    ca_allocator *a = fresh();
    int x = ca_malloc(a, 100 * MIB, 3);
    ca_free(a, x);
    x = ca_malloc(a, 60 * MIB, 5);
    int y = ca_malloc(a, 1000, 7);
    ca_snapshot s;
    ca_snapshot_take(a, &s);
    assert_int_equal(s.n_segments, 2);
    uint64_t total = 0, used = 0;
    for (size_t i = 0; i < s.n_segments; i++) {
        total += s.segments[i].size;
        used += s.segments[i].allocated;
        if (s.segments[i].small) {
            assert_int_equal(s.segments[i].n_blocks, 2);
            assert_int_equal(s.blocks[s.segments[i].first_block].tag, 7);
        } else {
            const ca_block_info *b = &s.blocks[s.segments[i].first_block];
            assert_int_equal(s.segments[i].n_blocks, 2);
            assert_true(b[0].allocated && b[0].size == 60 * MIB && b[0].tag == 5);
            assert_true(!b[1].allocated && b[1].size == 40 * MIB && b[1].offset == 60 * MIB);
        }
    }
    assert_int_equal(total, 102 * MIB);
    assert_int_equal(used, 60 * MIB + 1024);
    ca_snapshot_free(&s);
    ca_free(a, x);
    ca_free(a, y);
    ca_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_small_pool), cmocka_unit_test(test_large_pool_segments),
        cmocka_unit_test(test_best_fit_and_merge),  cmocka_unit_test(test_max_split_size),
        cmocka_unit_test(test_capacity_release_and_oom), cmocka_unit_test(test_expandable_segments),
        cmocka_unit_test(test_roundup_power2),      cmocka_unit_test(test_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
