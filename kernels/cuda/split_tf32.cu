/* 3xTF32 operands for fp32-accurate products on TF32 tensor cores
 * (kernels.h F32_3XTF32; matmul.c runs the product).
 *
 *   x = hi + lo,  hi = tf32(x),  lo = tf32(x - hi)   (nearest, ties even)
 *   A B ~= hi(A) hi(B) + hi(A) lo(B) + lo(A) hi(B)
 *
 * x - hi is exact in fp32 and lo keeps 11 of its bits, so what is lost
 * (lo(A) lo(B), and lo's rounding) is ~2^-22 of each product. The three
 * products become one product over an inner dimension 3k: op(A) [m,k]
 * turns into [m,3k] = [lo | hi | hi] and op(B) [k,n] into [3k,n] =
 * [hi ; lo ; hi], so cuBLAS accumulates all of it in one fp32 accumulator
 * (one call, one pass over C), the two small terms first: the tensor
 * cores' accumulation keeps fewer of a small term's bits once the
 * accumulator holds the large one (CUTLASS's 3xTF32 orders them so too).
 *
 * Operands are row-major [rows, cols] with row stride ld, `batch` of them
 * `stride` apart. k_rows says where the product's inner dimension runs: down
 * the rows (the three parts are stacked: [3 rows, cols]) or along the
 * columns (placed side by side: [rows, 3 cols]). lo_slot (0..2) is the part
 * that holds lo: 0 for A, 1 for B. Rounding is done here rather than left
 * to the tensor cores so the split does not depend on how they round. */
#include "kernels/cuda/common.cuh"

/* x rounded to TF32 (10 mantissa bits), nearest, ties to even; Inf and NaN
 * unchanged. */
__device__ __forceinline__ float tf32_rn(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7f800000u) != 0x7f800000u)
    u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  return __uint_as_float(u);
}

/* One block per (batch, row): blockIdx.x = b * rows + r. VEC: four columns
 * at a time (cols, ld, stride, dst_ld multiples of 4 floats, 16-byte aligned
 * pointers). */
template <bool VEC, bool KROWS>
__global__ void split3_k(const float *src, int rows, int cols, int ld,
                         long long stride, float *dst, int dst_ld,
                         long long dst_stride, int lo_slot) {
  long long b = blockIdx.x / rows, r = blockIdx.x % rows;
  const float *s = src + b * stride + r * ld;
  float *d[3];
  for (int j = 0; j < 3; j++)
    d[j] = KROWS ? dst + b * dst_stride + (j * (long long)rows + r) * dst_ld
                 : dst + b * dst_stride + r * dst_ld + (long long)j * cols;
  if (VEC) {
    for (int c = threadIdx.x; c < cols / 4; c += blockDim.x) {
      float4 v = ((const float4 *)s)[c], h, l;
      h.x = tf32_rn(v.x); l.x = tf32_rn(v.x - h.x);
      h.y = tf32_rn(v.y); l.y = tf32_rn(v.y - h.y);
      h.z = tf32_rn(v.z); l.z = tf32_rn(v.z - h.z);
      h.w = tf32_rn(v.w); l.w = tf32_rn(v.w - h.w);
      for (int j = 0; j < 3; j++) ((float4 *)d[j])[c] = j == lo_slot ? l : h;
    }
  } else {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      float h = tf32_rn(s[c]), l = tf32_rn(s[c] - h);
      for (int j = 0; j < 3; j++) d[j][c] = j == lo_slot ? l : h;
    }
  }
}

int cuda_split_3xtf32(engine *e, const float *src, int rows, int cols, int ld,
                      long long stride, int batch, int k_rows, int lo_slot,
                      float *dst, int dst_ld, long long dst_stride) {
  long long blocks = (long long)batch * rows;
  if (blocks > 0x7fffffffLL)
    FAIL(ERR_FAIL, "k_matmul (3xtf32): %lld operand rows are too many to "
         "split", blocks);
  bool vec = aligned16(src) && aligned16(dst) && cols % 4 == 0 &&
             ld % 4 == 0 && (batch == 1 || stride % 4 == 0) &&
             dst_ld % 4 == 0 && (batch == 1 || dst_stride % 4 == 0);
  int threads = cols / (vec ? 4 : 1) >= 256 ? 256 : 128;
  unsigned grid = (unsigned)blocks;
  cudaStream_t s = cuda_stream(e);
#define SPLIT(V, K)                                                       \
  split3_k<V, K><<<grid, threads, 0, s>>>(src, rows, cols, ld, stride, dst, \
                                          dst_ld, dst_stride, lo_slot)
  if (vec) {
    if (k_rows) SPLIT(true, true); else SPLIT(true, false);
  } else {
    if (k_rows) SPLIT(false, true); else SPLIT(false, false);
  }
#undef SPLIT
  CHECK_LAUNCH();
  return 0;
}
