/* Elementwise operations on the CUDA engine, n elements each.
 *
 *   add    out = a + b            (out may alias a or b)
 *   scale  x *= s
 *   cast   dst (dtype dt) = src (dtype st)
 *
 * add and scale: grid-stride loops, 16-byte vectors (float4) when every
 * pointer is 16-byte aligned, the n % 4 tail element by element.
 *
 * Casts give exactly the CPU engine's bits (kernels/cpu/elementwise.c):
 * narrowing rounds to nearest, ties to even, through the hardware's
 * conversions (__float2bfloat16_rn, __float2half_rn: cvt.rn, subnormals
 * kept, overflow to Inf); NaN is handled by hand as the CPU engine does it
 * (sign and top payload bits kept, made quiet), because the hardware
 * returns one canonical NaN. Widening is exact: bf16 -> f32 is a shift;
 * f16 -> f32 is __half2float except for NaN, whose payload is kept as the
 * CPU engine keeps it. bf16 <-> f16 goes through f32 (exact), rounding once.
 * fp32 -> bf16 / f16 moves four elements a thread when the pointers allow
 * (the gathers of FSDP cast each chunk, every step). st == dt is a
 * device-to-device copy.
 *
 * Also here, for the matrix products (matmul.c): packing fp32 operands into
 * bf16 / f16, and C = beta*C for k = 0. */
#include "kernels/cuda/common.cuh"
#include "kernels/init_normal.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

enum { THREADS = 256 };

/* ---- add, scale ----------------------------------------------------------- */

template <bool VEC>
__global__ void add_k(const float *a, const float *b, float *out, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nv = VEC ? n / 4 : 0;
  if (VEC) {
    const float4 *a4 = (const float4 *)a, *b4 = (const float4 *)b;
    float4 *o4 = (float4 *)out;
    for (size_t i = i0; i < nv; i += stride) {
      float4 x = a4[i], y = b4[i];
      o4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
  }
  for (size_t i = nv * 4 + i0; i < n; i += stride) out[i] = a[i] + b[i];
}

template <bool VEC>
__global__ void scale_k(float *x, float s, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nv = VEC ? n / 4 : 0;
  if (VEC) {
    float4 *x4 = (float4 *)x;
    for (size_t i = i0; i < nv; i += stride) {
      float4 v = x4[i];
      x4[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
    }
  }
  for (size_t i = nv * 4 + i0; i < n; i += stride) x[i] *= s;
}

/* Every .cu file is built with the same -gencode flags: one kernel's code
 * answers for all. */
cudaError_t cuda_code_runs_here(void) {
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, scale_k<false>);
}

int cuda_add(engine *e, const float *a, const float *b, float *out,
             size_t n) {
  bool vec = aligned16(a) && aligned16(b) && aligned16(out);
  unsigned grid = cuda_grid(e, vec ? (n + 3) / 4 : n, THREADS);
  if (vec) add_k<true><<<grid, THREADS, 0, cuda_stream(e)>>>(a, b, out, n);
  else add_k<false><<<grid, THREADS, 0, cuda_stream(e)>>>(a, b, out, n);
  CHECK_LAUNCH();
  return 0;
}

/* One thread an element; init_value is the CPU engine's arithmetic. */
__global__ void init_normal_k(float *x, size_t n, uint64_t key, float fill,
                              float std, const int32_t *t) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += stride)
    x[i] = init_value(key, i, fill, std, t);
}

int cuda_init_normal(engine *e, float *x, size_t n, uint64_t key, float fill,
                     float std, const int32_t *table) {
  unsigned grid = cuda_grid(e, n, THREADS);
  init_normal_k<<<grid, THREADS, 0, cuda_stream(e)>>>(x, n, key, fill, std,
                                                     table);
  CHECK_LAUNCH();
  return 0;
}

int cuda_scale(engine *e, float *x, float s, size_t n) {
  bool vec = aligned16(x);
  unsigned grid = cuda_grid(e, vec ? (n + 3) / 4 : n, THREADS);
  if (vec) scale_k<true><<<grid, THREADS, 0, cuda_stream(e)>>>(x, s, n);
  else scale_k<false><<<grid, THREADS, 0, cuda_stream(e)>>>(x, s, n);
  CHECK_LAUNCH();
  return 0;
}

/* ---- one value, bit for bit as the CPU engine -------------------------- */

__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)        /* NaN: keep sign, set quiet */
    return (uint16_t)((u >> 16) | 0x0040u);
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) {
  return __uint_as_float((uint32_t)h << 16);
}

__device__ __forceinline__ uint16_t f32_to_f16(float f) {
  uint32_t u = __float_as_uint(f);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)                                       /* NaN */
    return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u | ((a >> 13) & 0x3ffu));
  return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu))             /* NaN */
    return __uint_as_float(((uint32_t)(h & 0x8000u) << 16) | 0x7f800000u |
                           ((uint32_t)(h & 0x3ffu) << 13));
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ float load_as_f32(const void *src, int t,
                                             size_t i) {
  switch (t) {
  case DT_BF16: return bf16_to_f32(((const uint16_t *)src)[i]);
  case DT_F16: return f16_to_f32(((const uint16_t *)src)[i]);
  default: return ((const float *)src)[i];
  }
}

__device__ __forceinline__ void store_from_f32(void *dst, int t, size_t i,
                                               float f) {
  switch (t) {
  case DT_BF16: ((uint16_t *)dst)[i] = f32_to_bf16(f); break;
  case DT_F16: ((uint16_t *)dst)[i] = f32_to_f16(f); break;
  default: ((float *)dst)[i] = f; break;
  }
}

/* The dtypes are template parameters so each pair compiles to a straight
 * load-convert-store loop. */
template <int ST, int DT>
__global__ void cast_k(const void *src, void *dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride)
    store_from_f32(dst, DT, i, load_as_f32(src, ST, i));
}

/* fp32 -> 16-bit, four elements a thread: one 16-byte load, one 8-byte
 * store (src 16-byte, dst 8-byte aligned); the n % 4 tail one by one. */
template <int DT>
__global__ void narrow4_k(const float *src, uint16_t *dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nv = n / 4;
  const float4 *s4 = (const float4 *)src;
  uint2 *d4 = (uint2 *)dst;
  for (size_t i = i0; i < nv; i += stride) {
    float4 x = s4[i];
    uint32_t lo, hi;
    if (DT == DT_BF16) {
      lo = f32_to_bf16(x.x) | (uint32_t)f32_to_bf16(x.y) << 16;
      hi = f32_to_bf16(x.z) | (uint32_t)f32_to_bf16(x.w) << 16;
    } else {
      lo = f32_to_f16(x.x) | (uint32_t)f32_to_f16(x.y) << 16;
      hi = f32_to_f16(x.z) | (uint32_t)f32_to_f16(x.w) << 16;
    }
    d4[i] = make_uint2(lo, hi);
  }
  for (size_t i = nv * 4 + i0; i < n; i += stride)
    dst[i] = DT == DT_BF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
}

int cuda_cast(engine *e, const void *src, dtype st, void *dst, dtype dt,
              size_t n) {
  if (st == dt) {
    size_t bytes = n * dtype_size(st);
    if (src == dst) return 0;
    uintptr_t s = (uintptr_t)src, d = (uintptr_t)dst;
    if (s < d + bytes && d < s + bytes)
      FAIL(ERR_FAIL, "k_cast: src and dst overlap without being equal "
           "(the CUDA engine copies, it does not move)");
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                               cuda_stream(e)));
    return 0;
  }
  cudaStream_t s = cuda_stream(e);
  if (st == DT_F32 && (dt == DT_BF16 || dt == DT_F16) && aligned16(src) &&
      (uintptr_t)dst % 8 == 0) {
    unsigned grid = cuda_grid(e, (n + 3) / 4, THREADS);
    if (dt == DT_BF16)
      narrow4_k<DT_BF16><<<grid, THREADS, 0, s>>>((const float *)src,
                                                  (uint16_t *)dst, n);
    else
      narrow4_k<DT_F16><<<grid, THREADS, 0, s>>>((const float *)src,
                                                 (uint16_t *)dst, n);
    CHECK_LAUNCH();
    return 0;
  }
  unsigned grid = cuda_grid(e, n, THREADS);
#define CAST(S, D)                                                           \
  if (st == S && dt == D) cast_k<S, D><<<grid, THREADS, 0, s>>>(src, dst, n)
  CAST(DT_F32, DT_BF16);
  else CAST(DT_F32, DT_F16);
  else CAST(DT_BF16, DT_F32);
  else CAST(DT_F16, DT_F32);
  else CAST(DT_BF16, DT_F16);
  else CAST(DT_F16, DT_BF16);
  else FAIL(ERR_FAIL, "k_cast: %s -> %s not handled", dtype_name(st),
            dtype_name(dt));
#undef CAST
  CHECK_LAUNCH();
  return 0;
}

/* ---- helpers of the matrix products ---------------------------------------- */

/* The bits of f rounded to bf16 (DT_BF16) or f16 (DT_F16), nearest even. */
template <int DT> __device__ __forceinline__ uint16_t lowp_bits(float f) {
  return DT == DT_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(f))
                       : __half_as_ushort(__float2half_rn(f));
}

/* One block per (batch, row): blockIdx.x = b * rows + r; threads walk the
 * columns, four at a time when VEC (cols, ld, stride and src all multiples
 * of 4 floats / 16 bytes; dst_ld a multiple of 4, so 8-byte stores). */
template <int DT, bool VEC>
__global__ void pack_k(const float *src, int rows, int cols, int ld,
                       long long stride, uint16_t *dst, int dst_ld) {
  long long b = blockIdx.x / rows, r = blockIdx.x % rows;
  const float *s = src + b * stride + r * ld;
  uint16_t *d = dst + (b * rows + r) * dst_ld;
  if (VEC) {
    for (int j = threadIdx.x; j < cols / 4; j += blockDim.x) {
      float4 v = ((const float4 *)s)[j];
      uint2 o;
      o.x = (uint32_t)lowp_bits<DT>(v.x) | ((uint32_t)lowp_bits<DT>(v.y) << 16);
      o.y = (uint32_t)lowp_bits<DT>(v.z) | ((uint32_t)lowp_bits<DT>(v.w) << 16);
      ((uint2 *)d)[j] = o;
    }
  } else {
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
      d[j] = lowp_bits<DT>(s[j]);
  }
}

int cuda_pack_lowp(engine *e, const float *src, int rows, int cols, int ld,
                   long long stride, int batch, dtype dt, void *dst,
                   int dst_ld) {
  long long blocks = (long long)batch * rows;
  if (blocks > 0x7fffffffLL)
    FAIL(ERR_FAIL, "k_matmul: %lld operand rows are too many to pack", blocks);
  bool vec = aligned16(src) && cols % 4 == 0 && ld % 4 == 0 &&
             (batch == 1 || stride % 4 == 0) && dst_ld % 4 == 0 &&
             ((uintptr_t)dst & 7u) == 0;
  int threads = cols / (vec ? 4 : 1) >= 256 ? 256 : 128;
  unsigned grid = (unsigned)blocks;
  cudaStream_t s = cuda_stream(e);
  uint16_t *d = (uint16_t *)dst;
  if (dt == DT_BF16) {
    if (vec) pack_k<DT_BF16, true><<<grid, threads, 0, s>>>(src, rows, cols, ld, stride, d, dst_ld);
    else pack_k<DT_BF16, false><<<grid, threads, 0, s>>>(src, rows, cols, ld, stride, d, dst_ld);
  } else {
    if (vec) pack_k<DT_F16, true><<<grid, threads, 0, s>>>(src, rows, cols, ld, stride, d, dst_ld);
    else pack_k<DT_F16, false><<<grid, threads, 0, s>>>(src, rows, cols, ld, stride, d, dst_ld);
  }
  CHECK_LAUNCH();
  return 0;
}

__global__ void scale_matrix_k(float *C, int m, int n, int ldc,
                               long long stride_c, float beta) {
  long long b = blockIdx.x / m, i = blockIdx.x % m;
  float *c = C + b * stride_c + i * ldc;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    c[j] = beta == 0.0f ? 0.0f : beta * c[j];
}

int cuda_scale_matrix(engine *e, float *C, int m, int n, int ldc,
                      long long stride_c, int batch, float beta) {
  long long blocks = (long long)batch * m;
  if (blocks > 0x7fffffffLL)
    FAIL(ERR_FAIL, "k_matmul: %lld rows of C are too many", blocks);
  scale_matrix_k<<<(unsigned)blocks, 128, 0, cuda_stream(e)>>>(
      C, m, n, ldc, stride_c, beta);
  CHECK_LAUNCH();
  return 0;
}

/* ---- loss-scale unscaling ------------------------------------------------------ */

/* g *= s; any non-finite result clears *ok (a plain store: every writer
 * writes the same 0, so no atomic is needed). */
__global__ void unscale_k(float *g, size_t n, float s, int *ok) {
  bool bad = false;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float v = g[i] * s;
    g[i] = v;
    bad |= !isfinite(v);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *ok = 0;
}

int cuda_grad_unscale(engine *e, float *g, size_t n, float inv_scale,
                      int *finite) {
  int *flag;
  TRY(cuda_workspace(e, sizeof(int), (void **)&flag));
  cudaStream_t s = cuda_stream(e);
  int one = 1;
  CHECK_CUDA(cudaMemcpyAsync(flag, &one, sizeof one, cudaMemcpyHostToDevice,
                             s));
  unscale_k<<<cuda_grid(e, n, THREADS), THREADS, 0, s>>>(g, n, inv_scale,
                                                          flag);
  CHECK_LAUNCH();
  CHECK_CUDA(cudaMemcpyAsync(finite, flag, sizeof *finite,
                             cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  return 0;
}
