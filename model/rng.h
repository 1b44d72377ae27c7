/* The model's portable random numbers: seeded initialisation must give the
 * same weights on every machine and engine.
 *
 * Generator: splitmix64 (Steele, Lea, Flood 2014; the state advances by the
 * golden-ratio constant 0x9E3779B97F4A7C15 and each output is the state
 * passed through Stafford's "mix13" finaliser). Uniforms take the top 53
 * bits. Normals: Box-Muller, both values of each pair used (cos first).
 * Truncated normals resample every value outside +-clip. The results are
 * the same everywhere up to the last bit of libm's log, sqrt, cos and sin,
 * which the cast to float almost always hides. */
#ifndef TL_MODEL_RNG_H
#define TL_MODEL_RNG_H

#include <stdint.h>

typedef struct rng {
  uint64_t state;
  int has_spare;
  double spare;
} rng;

/* Stream `stream` of `seed`: state = seed + (stream + 1) * 0xD1B54A32D192ED03
 * (mod 2^64), so streams of one seed start far apart. */
void rng_stream(rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(rng *r);
double rng_uniform(rng *r);          /* [0, 1) */
double rng_normal(rng *r);           /* N(0, 1) */
double rng_trunc_normal(rng *r, double clip);  /* N(0, 1) within +-clip */

#endif
