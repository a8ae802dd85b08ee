/* rng.h: a small deterministic random source for synthetic data (tests,
 * benchmarks, demo models): xorshift64* for uniforms in (0, 1) and
 * Box-Muller for N(0, 1). Not for anything that needs to be unpredictable. */
#ifndef MINFER_RNG_H
#define MINFER_RNG_H

#include <math.h>
#include <stdint.h>

struct rng {
    uint64_t s; /* never 0 */
};

static inline void rng_seed(struct rng *r, uint64_t seed) { r->s = seed * 0x9e3779b97f4a7c15ull + 1; }

static inline double rng_uniform(struct rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return ((double)((r->s * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}

static inline float rng_normal(struct rng *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
