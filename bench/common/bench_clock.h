/* bench_clock.h: the benchmarks' clocks (now_s: CLOCK_MONOTONIC; wall_s:
 * CLOCK_REALTIME; seconds), written once. Header-only. */
#ifndef LATHE_BENCH_CLOCK_H
#define LATHE_BENCH_CLOCK_H

#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the wall clock (CLOCK_REALTIME, seconds since the epoch): what lathe's
 * executors pass as "now" */
static inline double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
