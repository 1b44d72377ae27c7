/* k_init_normal's arithmetic, shared by the CPU and CUDA engines so that
 * both give the same bits (kernels/ops.def documents the op).
 *
 * Element j of a tensor with key `key` takes h = mix(key + (j + 1) * G)
 * (splitmix64's output function over its own counter: a stream per key,
 * no state), then the top 32 bits u of h as a probability: u's top 16
 * bits pick an interval of the table, its low 16 the place within it. The
 * table holds the quantiles of the standard normal truncated to
 * [-INIT_CLIP, INIT_CLIP] at the probabilities k / INIT_TABLE, k = 0 ..
 * INIT_TABLE, in fixed point (INIT_FRAC fraction bits; t[0] = -3,
 * t[INIT_TABLE] = 3), made on the host by k_init_normal_table and given to
 * both engines as the same bits. The linear interpolation between
 * quantiles, within 2e-7 of the exact quantile, is integer arithmetic;
 * then one conversion to float and one product, each correctly rounded
 * the same way everywhere and with no sum for a compiler to fuse. */
#ifndef TL_KERNELS_INIT_NORMAL_H
#define TL_KERNELS_INIT_NORMAL_H

#include <stdint.h>

#define INIT_TABLE 65536
#define INIT_CLIP 3.0
#define INIT_FRAC 29   /* 3 * 2^29 < 2^31 */

#ifdef __CUDACC__
#define INIT_FN __host__ __device__ static inline
#else
#define INIT_FN static inline
#endif

INIT_FN uint64_t init_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* The key of tensor `index` of a model initialised with `seed`. */
INIT_FN uint64_t init_key(uint64_t seed, uint64_t index) {
  return init_mix(seed + (index + 1) * 0xD1B54A32D192ED03ULL);
}

/* The counter's step between elements: element j of a tensor with key k
 * is element 0 of key k + j * INIT_STEP, so any range of a tensor can be
 * drawn alone (a shard: model_init_range). */
#define INIT_STEP 0x9E3779B97F4A7C15ULL

/* std * z_j, or `fill` when std is 0. */
INIT_FN float init_value(uint64_t key, uint64_t j, float fill, float std,
                         const int32_t *t) {
  if (std == 0.0f) return fill;
  uint32_t u = (uint32_t)(init_mix(key + (j + 1) * INIT_STEP) >> 32);
  uint32_t i = u >> 16;
  int64_t step = (int64_t)t[i + 1] - t[i];   /* >= 0: quantiles rise */
  int32_t z = t[i] + (int32_t)((step * (int64_t)(u & 0xFFFFu)) >> 16);
  return std * ((float)z * (1.0f / (float)(1u << INIT_FRAC)));
}

#endif
