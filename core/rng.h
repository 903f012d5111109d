/* tests/common/rng.h - the deterministic generator of the tests, the benchmarks and their
 * shared scenes (scenes.h). Its sequence is part of every generated input: changing it changes
 * every scene and every benchmark figure, so it stays as it is. */
#ifndef VC_TEST_RNG_H
#define VC_TEST_RNG_H

#include <stdint.h>

/* xorshift64* generator; deterministic across platforms. */
typedef struct vc_rng {
    uint64_t s;
} vc_rng;

static inline uint64_t vc_rng_next(vc_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
/* Uniform integer in [0, n). */
static inline int64_t vc_rng_int(vc_rng *r, int64_t n) { return (int64_t)(vc_rng_next(r) % (uint64_t)n); }
/* Uniform float in [-1, 1). */
static inline float vc_rng_float(vc_rng *r)
{
    return (float)((double)(vc_rng_next(r) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

#endif
