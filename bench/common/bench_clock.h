/* bench_clock.h: the benchmarks' wall clock (CLOCK_MONOTONIC, seconds),
 * written once. Header-only. */
#ifndef LATHE_BENCH_CLOCK_H
#define LATHE_BENCH_CLOCK_H

#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
