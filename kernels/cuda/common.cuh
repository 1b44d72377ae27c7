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
#include <initializer_list>
#include <type_traits>
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

/* A row held in registers: a block of `threads` threads (row_threads) over
 * a row of `units` float4s gives each thread at most NV of them, unit
 * threadIdx.x + k * blockDim.x in v[k], so a kernel that reduces a row and
 * then writes it reads the row from memory once, all of a thread's loads
 * in flight together. row_nv: the NV for a row, 1, 2, 4 or 8, and
 * *threads lowered to what NV units a thread need; 0, *threads as it was,
 * when the row holds more than 8 units a thread (the caller loops
 * instead). NV is what `threads` need, doubled while the block keeps
 * ROW_MIN_THREADS (2560 columns: 96 threads of 8, not 160 of 4): an SM
 * holds at most 32 blocks and 2048 threads, and a block's loads are in
 * flight only until its reduction, so fewer threads a row with more loads
 * each keep more bytes a SM in flight (1024 columns: blocks of 64 threads
 * of 4 float4s, 128 KB a SM, against 256 threads of one, 32 KB: on an
 * H200 our RMSNorm forward moved 4.09 TB/s there against 3.84 before,
 * LayerNorm's 1.15x faster, 2048 columns and wider within 1%). */
constexpr int ROW_MIN_THREADS = 64;
static inline int row_nv(long long units, int *threads) {
  long long k = (units + *threads - 1) / *threads;
  int nv = k <= 1 ? 1 : k <= 2 ? 2 : k <= 4 ? 4 : k <= 8 ? 8 : 0;
  while (nv && nv < 8 && units / (2 * nv) >= ROW_MIN_THREADS) nv *= 2;
  if (nv) *threads = row_threads((units + nv - 1) / nv);
  return nv;
}

/* Calls f(std::integral_constant<int, nv>()) for nv = 1, 2, 4, 8 (a
 * launch of the kernel instantiated for it); false for any other nv. */
template <typename F>
static bool with_row_nv(int nv, F f) {
  switch (nv) {
    case 1: f(std::integral_constant<int, 1>()); return true;
    case 2: f(std::integral_constant<int, 2>()); return true;
    case 4: f(std::integral_constant<int, 4>()); return true;
    case 8: f(std::integral_constant<int, 8>()); return true;
    default: return false;
  }
}

template <int NV>
__device__ __forceinline__ void row_load4(const float *r, int units,
                                          float4 (&v)[NV]) {
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int j = threadIdx.x + k * blockDim.x;
    v[k] = j < units ? ((const float4 *)r)[j] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

/* This thread's share of a row held by row_load4: the sum of f(v[k]) over
 * the units it holds, in k's order (a row's sums then reduce through
 * block_sum). */
template <int NV, typename F>
__device__ __forceinline__ float row_sum4(const float4 (&v)[NV], int units,
                                          F f) {
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++)
    if (threadIdx.x + k * blockDim.x < units) s += f(v[k]);
  return s;
}

/* One element of p as fp32, whatever its dtype (the fused path's kernels). */
__device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, size_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ float ld(const __half *p, size_t i) {
  return __half2float(p[i]);
}

/* ---- reductions ---------------------------------------------------------- */

/* ---- typed loads and stores (the fused path's kernels) ----------------------- */
/* The fused path's kernels (ops.def's K_FUSED rows, each in its family's
 * file) do in one pass over memory what a chain of the plain operations
 * does, and read / write activations in the products' input dtype T
 * (float, bf16 or f16; math always in fp32). Rounding to bf16 / f16 is to
 * nearest even (cvt.rn), the CPU engine's rounding. Each kernel with
 * T = float gives the plain op's results. */

__device__ __forceinline__ void st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16 *p, size_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void st(__half *p, size_t i, float v) {
  p[i] = __float2half_rn(v);
}

/* Run BODY with T bound to the C++ type of dtype `t`. */
#define WITH_T(t, BODY)                                                      \
  do {                                                                       \
    if ((t) == DT_F32) { typedef float T; BODY; }                            \
    else if ((t) == DT_BF16) { typedef __nv_bfloat16 T; BODY; }              \
    else { typedef __half T; BODY; }                                         \
  } while (0)

/* Four consecutive elements at p + i (i a multiple of 4, the address 4 *
 * sizeof(T) aligned): one 16-byte (float) or 8-byte (16-bit) access. The
 * 16-bit pairs round with __floats2*2_rn: nearest even, as st(). */
__device__ __forceinline__ void ld4(const float *p, size_t i, float v[4]) {
  float4 q = *(const float4 *)(p + i);
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
__device__ __forceinline__ void ld4(const __nv_bfloat16 *p, size_t i,
                                    float v[4]) {
  uint2 q = *(const uint2 *)(p + i);
  float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&q.x);
  float2 b = __bfloat1622float2(*(const __nv_bfloat162 *)&q.y);
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}
__device__ __forceinline__ void ld4(const __half *p, size_t i, float v[4]) {
  uint2 q = *(const uint2 *)(p + i);
  float2 a = __half22float2(*(const __half2 *)&q.x);
  float2 b = __half22float2(*(const __half2 *)&q.y);
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}
__device__ __forceinline__ void st4(float *p, size_t i, const float v[4]) {
  *(float4 *)(p + i) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void st4(__nv_bfloat16 *p, size_t i,
                                    const float v[4]) {
  __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]);
  __nv_bfloat162 b = __floats2bfloat162_rn(v[2], v[3]);
  uint2 q;
  q.x = *(const unsigned *)&a;
  q.y = *(const unsigned *)&b;
  *(uint2 *)(p + i) = q;
}
__device__ __forceinline__ void st4(__half *p, size_t i, const float v[4]) {
  __half2 a = __floats2half2_rn(v[0], v[1]);
  __half2 b = __floats2half2_rn(v[2], v[3]);
  uint2 q;
  q.x = *(const unsigned *)&a;
  q.y = *(const unsigned *)&b;
  *(uint2 *)(p + i) = q;
}

/* Every pointer can take 4-element accesses (16 bytes for float, 8 for
 * 16-bit: aligned to 16 covers both). */
static bool vec4_ok(std::initializer_list<const void *> ps) {
  for (const void *p : ps)
    if (p && ((uintptr_t)p & 15u) != 0) return false;
  return true;
}

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
