/* Device-side helpers shared by the CUDA engine's kernels: reductions over a
 * warp and over a block (fixed trees, so a result depends only on the
 * launch shape, never on timing), the online (max, sum of exponentials)
 * pair of softmax and logsumexp, alignment tests for vector access, and the
 * report of a bad token id or target (cuda_ops.h). */
#ifndef TL_KERNELS_CUDA_COMMON_CUH
#define TL_KERNELS_CUDA_COMMON_CUH

#include "config.h"
#include "kernels/cuda/cuda_ops.h"
#include "common/check.h"
#include "common/check_cuda.h"

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu

/* 16-byte vector access is possible when every pointer is 16-byte aligned
 * (rows must also start aligned: callers check the row length too). */
static inline bool aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

/* Threads for a block that walks one row of `units` items: a multiple of
 * 32, at least 32, at most 256. */
static inline int row_threads(long long units) {
  long long t = (units + 31) / 32 * 32;
  return t < 32 ? 32 : t > 256 ? 256 : (int)t;
}

/* One element of p as fp32, whatever its dtype (fused.cu, rmsnorm.cu). */
__device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, size_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ float ld(const __half *p, size_t i) {
  return __half2float(p[i]);
}

/* ---- reductions ---------------------------------------------------------- */

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. sh: 32 floats of shared memory. The first
 * __syncthreads makes sh safe to reuse across calls. */
__device__ __forceinline__ float block_sum(float v, float *sh) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : 0.0f;
  return warp_sum(v);
}

/* A running max m and sum s of exp(x - m) over some values. */
struct max_sum {
  float m, s;
};

__device__ __forceinline__ max_sum ms_empty() { return {-INFINITY, 0.0f}; }

__device__ __forceinline__ void ms_add(max_sum &a, float x) {
  if (x > a.m) {
    a.s = a.s * expf(a.m - x) + 1.0f;   /* a.m = -inf: 0 * 0 + 1 */
    a.m = x;
  } else {
    a.s += expf(x - a.m);
  }
}

__device__ __forceinline__ max_sum ms_merge(max_sum a, max_sum b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return a;         /* both empty */
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ max_sum warp_ms(max_sum a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    max_sum b = {__shfl_xor_sync(FULL_MASK, a.m, o),
                 __shfl_xor_sync(FULL_MASK, a.s, o)};
    a = ms_merge(a, b);
  }
  return a;
}

/* Over the block, as block_sum; sh: 32 max_sum of shared memory. */
__device__ __forceinline__ max_sum block_ms(max_sum a, max_sum *sh) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  a = warp_ms(a);
  __syncthreads();
  if (lane == 0) sh[w] = a;
  __syncthreads();
  a = lane < nw ? sh[lane] : ms_empty();
  return warp_ms(a);
}

/* ---- bad ids and targets ----------------------------------------------- */

/* Record that element `pos` holds `value`, outside [0, bound), for op `op`
 * (CUDA_CHK_*). The smallest position wins; the host flag says "look". */
__device__ __forceinline__ void report_bad(cuda_status *st, int *flag, int op,
                                           long long pos, int value,
                                           int bound) {
  unsigned long long key =
      ((unsigned long long)pos << 32) | (unsigned long long)(uint32_t)value;
  atomicMin(&st->key[op], key);
  st->bound[op] = bound;
  *(volatile int *)flag = 1;
}

#endif
