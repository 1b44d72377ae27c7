/* Elementwise operations on the CPU, n elements each.
 *
 *   add    out = a + b            (out may alias a or b)
 *   scale  x *= s
 *   cast   dst (dtype dt) = src (dtype st)
 *
 * Casts: widening (bf16 -> f32, f16 -> f32) is exact. Narrowing rounds to
 * nearest, ties to even; values beyond the target's range become +-Inf
 * (f16: |x| >= 65520, which is a tie between 65504 and 2^16), values below
 * f16's smallest subnormal (2^-24) round to +-0 or to it, keeping the sign;
 * Inf stays Inf and NaN stays NaN (made quiet, sign kept). bf16 <-> f16 goes
 * through f32, which is exact for the first step, so it rounds once. */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "kernels/init_normal.h"

#include <math.h>
#include <string.h>

int cpu_add(engine *e, const float *a, const float *b, float *out, size_t n) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
  return 0;
}

int cpu_scale(engine *e, float *x, float s, size_t n) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) x[i] *= s;
  return 0;
}

int cpu_init_normal(engine *e, float *x, size_t n, uint64_t key, float fill,
                    float std, const int32_t *table) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) x[i] = init_value(key, i, fill, std, table);
  return 0;
}

/* ---- one value ----------------------------------------------------------------- */

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)        /* NaN: keep sign, set quiet */
    return (uint16_t)((u >> 16) | 0x0040u);
  /* Add half an ulp of bf16, less one when the kept bit is even: ties go
   * to even, and a carry out of the top rounds to Inf as it should. */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

static uint16_t f32_to_f16(float f) {
  uint32_t u = bits_of(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)                                     /* NaN */
    return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return sign | 0x7c00u;             /* >= 65520: Inf */
  if (a >= 0x38800000u) {                                  /* >= 2^-14: normal */
    a -= (uint32_t)(127 - 15) << 23;                       /* rebias exponent */
    a += 0xfffu + ((a >> 13) & 1u);                        /* ties to even */
    return sign | (uint16_t)(a >> 13);
  }
  /* Subnormal: the result counts units of 2^-24. a's value is
   * mant * 2^(exp-150), so that count is mant >> (126 - exp), rounded. */
  int shift = 126 - (int)(a >> 23);
  if (shift > 24) return sign;             /* below 2^-25: +-0 */
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) q++;
  return sign | (uint16_t)q;               /* q = 0x400 is the least normal */
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {                                          /* zero, subnormal */
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (mant << 13));
  return float_of(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

float cpu_load(const void *src, dtype t, size_t i) {
  switch (t) {
  case DT_BF16: return bf16_to_f32(((const uint16_t *)src)[i]);
  case DT_F16: return f16_to_f32(((const uint16_t *)src)[i]);
  default: return ((const float *)src)[i];
  }
}

void cpu_store(void *dst, dtype t, size_t i, float f) {
  switch (t) {
  case DT_BF16: ((uint16_t *)dst)[i] = f32_to_bf16(f); break;
  case DT_F16: ((uint16_t *)dst)[i] = f32_to_f16(f); break;
  default: ((float *)dst)[i] = f; break;
  }
}

int cpu_cast(engine *e, const void *src, dtype st, void *dst, dtype dt,
             size_t n) {
  if (st == dt) {
    memmove(dst, src, n * dtype_size(st));
    return 0;
  }
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) cpu_store(dst, dt, i, cpu_load(src, st, i));
  return 0;
}

int cpu_grad_unscale(engine *e, float *g, size_t n, float inv_scale,
                     int *finite) {
  int ok = 1;
#pragma omp parallel for num_threads(cpu_threads(e)) reduction(&& : ok)
  for (size_t i = 0; i < n; i++) {
    g[i] *= inv_scale;
    ok = ok && isfinite(g[i]);
  }
  *finite = ok;
  return 0;
}
