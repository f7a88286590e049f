/* rng.c: the trainer's randomness. One explicit xoshiro256** state (seeded by
 * splitmix64, saved in checkpoints) for initialisation and shuffling, and a
 * stateless 64-bit hash for dropout masks, which gradient checkpointing must
 * be able to reproduce. Algorithms: Blackman & Vigna, "Scrambled linear
 * pseudorandom number generators" (2018); splitmix64 from Steele et al. */
#include "train.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void tr_rng_seed(tr_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t tr_rng_next(tr_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
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
    return splitmix64(&x);
}
