/* What the FlashAttention-2 kernels (flash_fwd.cu, flash_bwd.cu) share:
 * element types, tensor-core fragments (mma.sync m16n8k16 with bf16 / f16
 * inputs and fp32 accumulators, fed by ldmatrix from shared memory;
 * m16n8k8 with TF32 parts of fp32 inputs), tile loads with cp.async that
 * zero-fill rows past the sequence end, and the warp-level products the
 * kernels are built from (warp_mma: one interface for both).
 *
 * Fragments of mma.m16n8k16 (g = lane / 4, t = lane % 4):
 *   A 16x16, 4 regs of 2 halves: (g, 2t) (g+8, 2t) (g, 2t+8) (g+8, 2t+8)
 *   B 16x8, 2 regs: (k = 2t, n = g) (k = 2t+8, n = g)
 *   C 16x8, 4 floats: (g, 2t) (g, 2t+1) (g+8, 2t) (g+8, 2t+1)
 * so the C fragments of two adjacent n-tiles, rounded to 16 bits, are the
 * A fragment of one k-step: P and dS go from one product into the next
 * without touching shared memory.
 *
 * Shared tiles are row-major with rows padded by 8 elements (16 bytes), so
 * the 8 row addresses of an ldmatrix fall in 8 different 16-byte bank
 * groups. */
#ifndef TL_KERNELS_CUDA_FLASH_COMMON_CUH
#define TL_KERNELS_CUDA_FLASH_COMMON_CUH

#include "kernels/cuda/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* exp(x) = exp2(x * log2 e): scores are kept in the log2 domain. */
#define FLASH_LOG2E 1.4426950408889634f
#define FLASH_LN2 0.6931471805599453f

template <typename T> struct elt;
template <> struct elt<float> {
  static __device__ __forceinline__ float load(float x) { return x; }
  static __device__ __forceinline__ float store(float x) { return x; }
};
template <> struct elt<__nv_bfloat16> {
  static __device__ __forceinline__ float load(__nv_bfloat16 x) {
    return __bfloat162float(x);
  }
  static __device__ __forceinline__ __nv_bfloat16 store(float x) {
    return __float2bfloat16_rn(x);
  }
  /* Two floats into one register, lo in the low half (the lower column). */
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
  }
};
template <> struct elt<__half> {
  static __device__ __forceinline__ float load(__half x) {
    return __half2float(x);
  }
  static __device__ __forceinline__ __half store(float x) {
    return __float2half_rn(x);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
  }
};

/* 2^x on the special-function unit with subnormal results flushed to 0:
 * one instruction, where exp2f adds range fix-ups around it. A
 * probability below 2^-126 adds nothing a 16-bit product could keep. */
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* ---- tensor-core primitives ------------------------------------------------ */

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smem_addr(p)));
}

template <typename T> struct mma_op;
template <> struct mma_op<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float c[4], const uint32_t a[4],
                                             uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct mma_op<__half> {
  static __device__ __forceinline__ void run(float c[4], const uint32_t a[4],
                                             uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

/* ---- tile loads ---------------------------------------------------------------- */

__device__ __forceinline__ void cp_async16(void *dst, const void *src,
                                           bool valid) {
  /* src-size 0 writes 16 zero bytes: rows past the end read as zeros. */
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* rows x DH elements from g (row stride DH, rows from row0, valid below
 * nrows) into s (row stride LD, 16-byte multiple), by all NT threads of
 * the block. */
template <typename T, int DH, int NT, int LD = DH + 8>
__device__ __forceinline__ void load_tile(T *s, const T *g, int row0,
                                          int rows, int nrows) {
  constexpr int CH = DH * (int)sizeof(T) / 16;   /* 16-byte chunks per row */
  static_assert(LD * sizeof(T) % 16 == 0, "rows of 16-byte chunks");
  for (int x = threadIdx.x; x < rows * CH; x += NT) {
    int r = x / CH, c = x % CH;
    bool ok = row0 + r < nrows;
    const T *src = g + (size_t)(ok ? row0 + r : 0) * DH + c * (16 / sizeof(T));
    cp_async16(s + r * LD + c * (16 / sizeof(T)), src, ok);
  }
}

/* The CUDA-core kernels' tiles: rows row0 .. row0 + R of a and of b
 * ([.., DH] each, rows valid below n) as floats into sa and sb (row
 * strides LDA, LDB: a column of padding keeps a warp's column reads off
 * one bank), zeros past n, by all NT threads of the block. */
template <typename T, int R, int DH, int NT, int LDA, int LDB>
__device__ __forceinline__ void simt_load2(float (*sa)[LDA], float (*sb)[LDB],
                                           const T *a, const T *b, int row0,
                                           int n) {
  for (int x = threadIdx.x; x < R * DH; x += NT) {
    int rr = x / DH, d = x % DH;
    bool ok = row0 + rr < n;
    sa[rr][d] = ok ? elt<T>::load(a[(size_t)(row0 + rr) * DH + d]) : 0.f;
    sb[rr][d] = ok ? elt<T>::load(b[(size_t)(row0 + rr) * DH + d]) : 0.f;
  }
}

/* ---- warp products ------------------------------------------------------------ */

/* A warp computes MT m-tiles (16 rows each) at once: every B fragment read
 * from shared memory feeds MT products, which is what keeps ldmatrix
 * traffic below the tensor cores' rate (one m-tile per warp is bound by
 * shared memory on Hopper). */

/* The A fragments of MT m-tiles x KD/16 k-steps of a row-major tile (rows
 * contiguous in k, row stride ld), kept in registers across a loop. */
template <typename T, int MT, int KD>
__device__ __forceinline__ void load_a(uint32_t a[][KD / 16][4], const T *A,
                                       int ld) {
  int l = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int k = 0; k < KD; k += 16)
      ldsm_x4(a[m][k / 16], A + (m * 16 + (l & 7) + ((l >> 3) & 1) * 8) * ld +
                                k + (l >> 4) * 8);
}

/* acc[m][n] (MT m-tiles, NTL n-tiles of 8) += A B^T with A's fragments in
 * registers (load_a) and B's NTL*8 rows in shared memory, k contiguous. */
template <typename T, int MT, int NTL, int KD>
__device__ __forceinline__ void warp_abt_r(float acc[][NTL][4],
                                           const uint32_t a[][KD / 16][4],
                                           const T *B, int ld) {
  int l = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < KD; k += 16) {
#pragma unroll
    for (int n = 0; n < NTL; n += 2) {
      uint32_t b[4];
      ldsm_x4(b, B + (n * 8 + (l & 7) + (l >> 4) * 8) * ld + k +
                     ((l >> 3) & 1) * 8);
#pragma unroll
      for (int m = 0; m < MT; m++) {
        mma_op<T>::run(acc[m][n], a[m][k / 16], b[0], b[1]);
        mma_op<T>::run(acc[m][n + 1], a[m][k / 16], b[2], b[3]);
      }
    }
  }
}

/* The same with A's MT*16 rows in shared memory too, loaded per k-step. */
template <typename T, int MT, int NTL, int KD>
__device__ __forceinline__ void warp_abt(float acc[][NTL][4], const T *A,
                                         const T *B, int ld) {
  int l = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < KD; k += 16) {
    uint32_t a[MT][4];
#pragma unroll
    for (int m = 0; m < MT; m++)
      ldsm_x4(a[m], A + (m * 16 + (l & 7) + ((l >> 3) & 1) * 8) * ld + k +
                        (l >> 4) * 8);
#pragma unroll
    for (int n = 0; n < NTL; n += 2) {
      uint32_t b[4];
      ldsm_x4(b, B + (n * 8 + (l & 7) + (l >> 4) * 8) * ld + k +
                     ((l >> 3) & 1) * 8);
#pragma unroll
      for (int m = 0; m < MT; m++) {
        mma_op<T>::run(acc[m][n], a[m], b[0], b[1]);
        mma_op<T>::run(acc[m][n + 1], a[m], b[2], b[3]);
      }
    }
  }
}

/* The A fragments of one k-step from the C fragments of n-tiles 2k, 2k+1. */
template <typename T>
__device__ __forceinline__ void c_to_a(uint32_t a[4], const float c0[4],
                                       const float c1[4]) {
  a[0] = elt<T>::pack(c0[0], c0[1]);
  a[1] = elt<T>::pack(c0[2], c0[3]);
  a[2] = elt<T>::pack(c1[0], c1[1]);
  a[3] = elt<T>::pack(c1[2], c1[3]);
}

/* acc[m][n] (DH/8 n-tiles) += P[m] B, P as C fragments (MT m-tiles of
 * KT*2 n-tiles: a 16 x KT*16 block each), B in shared memory row-major
 * [k][n] (KT*16 x DH, row stride ld). */
template <typename T, int MT, int KT, int DH>
__device__ __forceinline__ void warp_cb(float acc[][DH / 8][4],
                                        const float p[][KT * 2][4],
                                        const T *B, int ld) {
  int l = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < KT; k++) {
    uint32_t a[MT][4];
#pragma unroll
    for (int m = 0; m < MT; m++) c_to_a<T>(a[m], p[m][2 * k], p[m][2 * k + 1]);
#pragma unroll
    for (int n = 0; n < DH / 8; n += 2) {
      uint32_t b[4];
      ldsm_x4_t(b, B + (k * 16 + (l & 7) + ((l >> 3) & 1) * 8) * ld + n * 8 +
                       (l >> 4) * 8);
#pragma unroll
      for (int m = 0; m < MT; m++) {
        mma_op<T>::run(acc[m][n], a[m], b[0], b[1]);
        mma_op<T>::run(acc[m][n + 1], a[m], b[2], b[3]);
      }
    }
  }
}

/* ---- fp32 on TF32 tensor cores ---------------------------------------------------- */

/* Fragments of mma.m16n8k8 with tf32 inputs (one 32-bit register each):
 *   A 16x8: (g, t) (g+8, t) (g, t+4) (g+8, t+4);  B 8x8: (k = t, n = g)
 *   (k = t+4, n = g);  C as m16n8k16's.
 * A product sums over k, so k may be relabelled alike in A and B: the
 * kernels feed physical columns 2t, 2t+1 as k = t, t+4. Then a thread's A
 * operand is two adjacent floats of a row (one 8-byte load), and a C
 * fragment (g, 2t) (g, 2t+1) (g+8, 2t) (g+8, 2t+1), its middle two swapped,
 * is the A fragment of the next product over those 8 columns: P goes from
 * S to PV in registers, as in 16 bits. */

/* x rounded to TF32, nearest (ties away), in a 32-bit register. */
__device__ __forceinline__ uint32_t tf32_of(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/* An fp32 operand as TF32 parts: hi = tf32(x), lo = tf32(x - hi) (x - hi
 * is exact in fp32); X3 false: hi only (TF32's precision). */
template <bool X3, int N> struct tf32_frag {
  uint32_t hi[N], lo[X3 ? N : 1];
  __device__ __forceinline__ void set(int i, float x) {
    hi[i] = tf32_of(x);
    if constexpr (X3) lo[i] = tf32_of(x - __uint_as_float(hi[i]));
  }
};

__device__ __forceinline__ void mma_tf32(float c[4], const uint32_t a[4],
                                         const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* c += a b in fp32 from TF32 parts: 3xTF32 (split_tf32.cu's reasoning), the
 * two small terms first; or hi hi alone. */
template <bool X3>
__device__ __forceinline__ void mma_f32x(float c[4], const tf32_frag<X3, 4> &a,
                                         const tf32_frag<X3, 2> &b) {
  if constexpr (X3) {
    mma_tf32(c, a.lo, b.hi);
    mma_tf32(c, a.hi, b.lo);
  }
  mma_tf32(c, a.hi, b.hi);
}

/* The A parts of MT m-tiles at k-step c from a tile with k contiguous
 * (ar: the thread's first element, row g and column 2t; row stride ld):
 * rows g and g + 8 of each 16, columns c + 2t and c + 2t + 1 as k = t and
 * t + 4, one 8-byte read each. */
template <bool X3, int MT>
__device__ __forceinline__ void a_parts_f32(tf32_frag<X3, 4> a[MT],
                                            const float *ar, int ld, int c) {
#pragma unroll
  for (int m = 0; m < MT; m++) {
    float2 top = *reinterpret_cast<const float2 *>(ar + m * 16 * ld + c),
           bot = *reinterpret_cast<const float2 *>(ar + (m * 16 + 8) * ld + c);
    a[m].set(0, top.x); a[m].set(1, bot.x); a[m].set(2, top.y); a[m].set(3, bot.y);
  }
}

/* acc[m][n] (MT m-tiles, NB n-tiles of 8) += A B in fp32 from TF32 parts:
 * A the warp's MT*16 rows in shared memory with k contiguous (row stride
 * lda), read as a_parts_f32 does; bpart(c, n) the thread's B parts of
 * n-tile n at k-step c (k = t and t + 4 standing for physical columns
 * c + 2t and c + 2t + 1, as in A). Each B part read and split feeds MT
 * products. */
template <bool X3, int MT, int NB, int KD, class BPart>
__device__ __forceinline__ void warp_a_f32(float acc[][NB][4], const float *A,
                                           int lda, BPart bpart) {
  int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  const float *ar = A + g * lda + 2 * t;
#pragma unroll
  for (int c = 0; c < KD; c += 8) {
    tf32_frag<X3, 4> a[MT];
    a_parts_f32<X3, MT>(a, ar, lda, c);
#pragma unroll
    for (int n = 0; n < NB; n++) {
      tf32_frag<X3, 2> b = bpart(c, n);
#pragma unroll
      for (int m = 0; m < MT; m++) mma_f32x<X3>(acc[m][n], a[m], b);
    }
  }
}

/* acc += A B^T: B NTL*8 rows with k contiguous too (row stride ld, 8 or
 * 24 banks mod 32: conflict-free 8-byte reads, as A's). */
template <bool X3, int MT, int NTL, int KD>
__device__ __forceinline__ void warp_abt_f32(float acc[][NTL][4],
                                             const float *A, const float *B,
                                             int ld) {
  int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  const float *br = B + g * ld + 2 * t;
  warp_a_f32<X3, MT, NTL, KD>(acc, A, ld, [&](int c, int n) {
    float2 x = *reinterpret_cast<const float2 *>(br + n * 8 * ld + c);
    tf32_frag<X3, 2> b;
    b.set(0, x.x); b.set(1, x.y);
    return b;
  });
}

/* acc[m][d] (DH/8 n-tiles) += P[m] B in fp32 from TF32 parts: P the C
 * fragments of MT m-tiles x KN n-tiles (16 x KN*8 each), B row-major
 * [k][n] in shared memory (KN*8 x DH, row stride ld). A thread reads rows
 * 2t, 2t+1 at column g: rows 2t ld apart are 8t banks apart when ld is 4
 * or 12 mod 16 (conflict-free); 8 mod 16 (a tile also read by
 * warp_abt_f32) costs two ways. */
template <bool X3, int MT, int KN, int DH>
__device__ __forceinline__ void warp_cb_f32(float acc[][DH / 8][4],
                                            const float p[][KN][4],
                                            const float *B, int ld) {
  int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
#pragma unroll
  for (int n = 0; n < KN; n++) {
    tf32_frag<X3, 4> a[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
      a[m].set(0, p[m][n][0]); a[m].set(1, p[m][n][2]);
      a[m].set(2, p[m][n][1]); a[m].set(3, p[m][n][3]);
    }
    const float *br = B + (n * 8 + 2 * t) * ld + g;
#pragma unroll
    for (int d = 0; d < DH / 8; d++) {
      tf32_frag<X3, 2> b;
      b.set(0, br[d * 8]); b.set(1, br[ld + d * 8]);
#pragma unroll
      for (int m = 0; m < MT; m++) mma_f32x<X3>(acc[m][d], a[m], b);
    }
  }
}

/* acc += A B: B row-major [k][n] (KD x NQ*8, row stride ldb, as
 * warp_cb_f32's B). */
template <bool X3, int MT, int NQ, int KD>
__device__ __forceinline__ void warp_ab_f32(float acc[][NQ][4], const float *A,
                                            int lda, const float *B, int ldb) {
  int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  const float *br = B + 2 * t * ldb + g;
  warp_a_f32<X3, MT, NQ, KD>(acc, A, lda, [&](int c, int n) {
    tf32_frag<X3, 2> b;
    b.set(0, br[c * ldb + n * 8]); b.set(1, br[(c + 1) * ldb + n * 8]);
    return b;
  });
}

/* The tensor-core kernels' warp products by element type, so one kernel
 * body serves both: 16-bit inputs on m16n8k16 (ldmatrix), or fp32 as TF32
 * parts on m16n8k8 (X3: 3xTF32), with V-like tiles (read by cb only)
 * padded by VPAD elements a row. p is MT x NTL C fragments of 8 columns. */
template <typename T, bool X3 = false> struct warp_mma {
  static constexpr int VPAD = 8;
  template <int MT, int NTL, int KD>
  static __device__ __forceinline__ void abt(float acc[][NTL][4], const T *A,
                                             const T *B, int ld) {
    warp_abt<T, MT, NTL, KD>(acc, A, B, ld);
  }
  template <int MT, int NTL, int DH>
  static __device__ __forceinline__ void cb(float acc[][DH / 8][4],
                                            const float p[][NTL][4],
                                            const T *B, int ld) {
    warp_cb<T, MT, NTL / 2, DH>(acc, p, B, ld);
  }
  static __device__ __forceinline__ void store2(T *dst, float lo, float hi) {
    *reinterpret_cast<uint32_t *>(dst) = elt<T>::pack(lo, hi);
  }
};
template <bool X3> struct warp_mma<float, X3> {
  static constexpr int VPAD = 4;
  template <int MT, int NTL, int KD>
  static __device__ __forceinline__ void abt(float acc[][NTL][4],
                                             const float *A, const float *B,
                                             int ld) {
    warp_abt_f32<X3, MT, NTL, KD>(acc, A, B, ld);
  }
  template <int MT, int NTL, int DH>
  static __device__ __forceinline__ void cb(float acc[][DH / 8][4],
                                            const float p[][NTL][4],
                                            const float *B, int ld) {
    warp_cb_f32<X3, MT, NTL, DH>(acc, p, B, ld);
  }
  static __device__ __forceinline__ void store2(float *dst, float lo, float hi) {
    *reinterpret_cast<float2 *>(dst) = make_float2(lo, hi);
  }
};

/* The kernel the engine's settings choose for element type T at head dim
 * dh (op names the caller in the error), as Op sees it: Op::mma<T, D, X3>
 * for the tensor-core kernels (16-bit, or fp32 with TF32 / 3xTF32 products:
 * kernels.h f32_products), Op::simt<T, D> for true fp32 on CUDA cores. */
template <class Op, typename T, typename... A>
int flash_dispatch_dh(engine *e, const char *op, int dh, A... a) {
  f32_products f32 = cuda_impl(e)->f32;
#define FLASH_CASE(D)                                                         \
  case D:                                                                     \
    if constexpr (sizeof(T) != 4) return Op::template mma<T, D, false>(e, a...); \
    else if (f32 == F32_3XTF32) return Op::template mma<T, D, true>(e, a...); \
    else if (f32 == F32_TF32) return Op::template mma<T, D, false>(e, a...);  \
    else return Op::template simt<T, D>(e, a...);
  switch (dh) { ATTN_FLASH_GPU_DHEADS(FLASH_CASE) }
#undef FLASH_CASE
  char dhs[32];
  FAIL(ERR_FAIL, "%s: flash on the GPU takes head dims %s (got dh=%d)", op,
       attn_flash_gpu_dheads_text(dhs), dh);
}

/* The same for element type dt. */
template <class Op, typename... A>
int flash_dispatch(engine *e, const char *op, dtype dt, int dh, A... a) {
  switch (dt) {
  case DT_F32: return flash_dispatch_dh<Op, float>(e, op, dh, a...);
  case DT_BF16: return flash_dispatch_dh<Op, __nv_bfloat16>(e, op, dh, a...);
  case DT_F16: return flash_dispatch_dh<Op, __half>(e, op, dh, a...);
  }
  FAIL(ERR_FAIL, "%s: unknown dtype %d", op, (int)dt);
}

#endif
