#include "config.h"
#include "model/rng.h"

#include <math.h>

void rng_stream(rng *r, uint64_t seed, uint64_t stream) {
  r->state = seed + (stream + 1) * 0xD1B54A32D192ED03ULL;
  r->has_spare = 0;
  r->spare = 0.0;
}

uint64_t rng_next(rng *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double rng_uniform(rng *r) {
  return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

double rng_normal(rng *r) {
  if (r->has_spare) {
    r->has_spare = 0;
    return r->spare;
  }
  double u1 = 1.0 - rng_uniform(r);   /* (0, 1]: log is finite */
  double u2 = rng_uniform(r);
  double rad = sqrt(-2.0 * log(u1));
  double ang = 2.0 * M_PI * u2;
  r->spare = rad * sin(ang);
  r->has_spare = 1;
  return rad * cos(ang);
}

double rng_trunc_normal(rng *r, double clip) {
  for (;;) {
    double z = rng_normal(r);
    if (z >= -clip && z <= clip) return z;
  }
}
