/* rng.c: the trainer's randomness. One explicit state of base.h's generator
 * (xoshiro256** seeded by splitmix64, saved in checkpoints) for
 * initialisation and shuffling, and a
 * stateless 64-bit hash for dropout masks, which gradient checkpointing must
 * be able to reproduce. Algorithms: Blackman & Vigna, "Scrambled linear
 * pseudorandom number generators" (2018); splitmix64 from Steele et al. */
#include "nn/nn.h"

#include <math.h>

void tr_rng_seed(tr_rng *r, uint64_t seed)
{
    rng_seed(r, seed);
}

uint64_t tr_rng_next(tr_rng *r)
{
    return rng_next(r);
}

float tr_rng_uniform(tr_rng *r)
{
    return (float)(tr_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float tr_rng_normal(tr_rng *r)
{
    /* Box-Muller with u1 in (0, 1] so the log is finite */
    double u1 = ((double)(tr_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(tr_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t tr_hash64(uint64_t a, uint64_t b)
{
    uint64_t x = a ^ (b * 0xd6e8feb86659fd93ull);
    return rng_splitmix64(&x);
}
