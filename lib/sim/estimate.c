/* estimate.c: what the scheduler is told about a job's duration when a
 * trace is replayed: the exact duration, a planner-style estimate with
 * lognormal noise, or only a round time limit several times the run (what
 * users write as maxDuration). Every policy sees the same estimates. */
#include "sim.h"

#include <math.h>

static const double limits[] = {
    1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 12 * 3600, 86400, 2 * 86400, 3 * 86400, 5 * 86400,
    7 * 86400, 14 * 86400, 30 * 86400};

double sim_round_limit(double duration)
{
    double want = SIM_LIMIT_FACTOR * duration;
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++)
        if (limits[i] >= want) return limits[i];
    return ceil(want / (30 * 86400.0)) * 30 * 86400.0;
}

void sim_trace_set_estimates(sim_trace *t, sim_est_mode mode, double sigma, uint64_t seed)
{
    if (mode == SIM_EST_TRACE) return;
    sim_rng r;
    sim_rng_seed(&r, seed);
    for (size_t i = 0; i < t->n; i++) {
        sim_job *j = &t->jobs[i];
        double z = sim_rng_normal(&r); /* drawn for every job, so one job's draw never depends on the mode */
        j->estimate_is_limit = mode == SIM_EST_LIMIT;
        if (mode == SIM_EST_EXACT)
            j->estimate = 0;
        else if (mode == SIM_EST_NOISE)
            j->estimate = j->duration * exp(sigma * z);
        else
            j->estimate = sim_round_limit(j->duration);
    }
}
