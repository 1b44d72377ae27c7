/* Hopper's warpgroup products (wgmma.mma_async, sm_90a only) and the shared
 * memory layout they read: what flash_fwd_wgmma.cu and
 * flash_bwd_wgmma.cu are built from (plus the bulk copies, bulk reductions
 * and named barriers the backward uses).
 *
 * A warpgroup (4 consecutive warps, 128 threads) computes D[64 x N] (+)=
 * A[64 x 16] B[16 x N] per instruction, fp32 accumulators, 16-bit inputs.
 * A comes from shared memory (a descriptor) or registers; B always from
 * shared memory. The accumulator fragment of warp w, lane (g = lane / 4,
 * t = lane % 4): d[4i + e] is row 16w + g + 8 (e >> 1), column
 * 8i + 2t + (e & 1), i.e. mma.sync's m16n8 C fragments side by side, and
 * A from registers takes mma.sync's m16n8k16 A fragment of the warp's 16
 * rows. So flash_common.cuh's c_to_a turns S into P without shared memory.
 *
 * Shared tiles use the 128-byte swizzle: a tile of `rows` rows and a
 * multiple of 64 16-bit columns (Dh 80 is padded to 128 with zeros) is
 * stored as column blocks of 64 (one 128-byte line per row, blocks rows *
 * 128 bytes apart); within a block the 16-byte chunk c of row r sits at
 * chunk c ^ (r % 8). Each block must start 1024-byte aligned (the swizzle
 * is a function of address bits). It is the layout the TMA writes with its
 * 128-byte swizzle, and the tensor cores read it without bank conflicts.
 *
 * Descriptors (PTX ISA, "Matrix Descriptor Format"): start address, the
 * leading-dimension byte offset (LBO), the stride byte offset (SBO), all
 * >> 4, swizzle mode 1 (128 B) in bits 62-63.
 *   K-major (rows of the tile are the M or N index, k contiguous): SBO =
 *     1024 (next group of 8 rows); LBO unused; the k-step of 16 elements
 *     moves the start by 32 bytes inside a block, by rows * 128 bytes to
 *     the next block.
 *   MN-major (rows are the k index, n contiguous; B with trans_b = 1):
 *     LBO = rows * 128 (next block of 64 n), SBO = 1024 (next 8 k); the
 *     k-step of 16 moves the start by 16 rows = 2048 bytes. */
#ifndef TL_KERNELS_CUDA_WGMMA_CUH
#define TL_KERNELS_CUDA_WGMMA_CUH

#include "kernels/cuda/flash_common.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

/* Device code that uses wgmma compiles only for sm_90a; the compute_90
 * PTX (for other GPUs) gets a trap, and the host never launches it there
 * (cuda_engine.wgmma). */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TL_WGMMA 1
#else
#define TL_WGMMA 0
#endif

__device__ __forceinline__ uint64_t wg_desc(const void *smem, uint32_t lbo,
                                            uint32_t sbo) {
  uint64_t a = smem_addr(smem);
  return ((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
         ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_fence() {
#if TL_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if TL_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wg_wait() {
#if TL_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
/* Keeps the compiler from moving accumulator reads or writes across an
 * asynchronous product (the registers change under it). */
template <int N> __device__ __forceinline__ void wg_hold(float *d) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* Four 8 x 8 matrices of 16-bit elements from registers into shared
 * memory (stmatrix .x4): lane l holds row l / 4, columns 2 (l % 4) and
 * 2 (l % 4) + 1 of matrix m in r[m] (an accumulator fragment's pair,
 * packed), and gives the address of row l % 8 of matrix l / 8 (16
 * bytes). One instruction where 4-byte stores take four. */
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t r[4]) {
#if TL_WGMMA
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

/* ---- TMA tile loads and their mbarriers -------------------------------------
 * A tensor map (cuTensorMapEncodeTiled on the host, 128-byte swizzle) lets
 * one thread load a whole box into the swizzled layout above; the bytes
 * land asynchronously and complete on an mbarrier that consumers wait on
 * (phase parity alternates with each use of the barrier). */
__device__ __forceinline__ void mbar_init(uint64_t *bar, int count) {
#if TL_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(count));
#endif
}
/* Initialised barriers become visible to the async proxy (then a
 * __syncthreads before use). */
__device__ __forceinline__ void mbar_fence_init() {
#if TL_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
#if TL_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   smem_addr(bar)),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
#if TL_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, int parity) {
#if TL_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}
/* Box at (c0, c1, c2) of a 3-D tensor map into shared memory. */
__device__ __forceinline__ void tma_load_3d(void *dst, const void *tmap,
                                            uint64_t *bar, int c0, int c1,
                                            int c2) {
#if TL_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(tmap), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}

/* `bytes` (a multiple of 16) from global to shared memory, completing on
 * an mbarrier like a tensor load. */
__device__ __forceinline__ void bulk_load(void *dst, const void *src,
                                          uint32_t bytes, uint64_t *bar) {
#if TL_WGMMA
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1], %2, [%3];\n" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
#endif
}
/* dst[i] += src[i] for `bytes` of fp32 (a multiple of 16), performed in
 * L2 by the copy engine; each element's add is atomic. Completes in the
 * issuing thread's bulk group. */
__device__ __forceinline__ void bulk_reduce_add_f32(float *dst, const void *src,
                                                    uint32_t bytes) {
#if TL_WGMMA
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32"
      " [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_addr(src)), "r"(bytes)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
/* The issuing thread's bulk groups have read their shared source (it may
 * be overwritten) / have completed their writes too. */
__device__ __forceinline__ void bulk_wait_read() {
#if TL_WGMMA
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait() {
#if TL_WGMMA
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}
/* Shared-memory writes by ordinary stores become visible to the tensor
 * cores' and the copy engine's reads (the async proxy). */
__device__ __forceinline__ void fence_async_smem() {
#if TL_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
/* A barrier for `n` threads (a multiple of 32) under hardware id `id`
 * (0 is __syncthreads'). */
__device__ __forceinline__ void named_bar(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* Arrives at barrier `id` without waiting (the other side syncs). */
__device__ __forceinline__ void named_bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* Register reallocation between warpgroups (setmaxnreg): every thread of
 * the warpgroup executes it; N is a multiple of 8 in 24..256. A warpgroup
 * that only issues loads gives registers back (dec) for the math
 * warpgroups to take (inc, which waits until the block has them). */
template <int N> __device__ __forceinline__ void wg_regs_dec() {
#if TL_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N> __device__ __forceinline__ void wg_regs_inc() {
#if TL_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

/* ---- host: tensor maps ---------------------------------------------------- */

/* cuTensorMapEncodeTiled from the driver, found through the runtime (no
 * link against libcuda). */
static inline PFN_cuTensorMapEncodeTiled_v12000 wg_encode_fn(void) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn;
  if (!fn) {
    cudaDriverEntryPointQueryResult q;
    void *p = NULL;
#if CUDART_VERSION >= 12050
    cudaError_t rc = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
#else
    cudaError_t rc = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p,
                                             cudaEnableDefault, &q);
#endif
    if (rc == cudaSuccess && q == cudaDriverEntryPointSuccess)
      fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
  }
  return fn;
}

/* [bh][t][dh] 16-bit tensor whose rows are ld elements apart (ld >= dh, a
 * multiple of 8), boxes of `rows` x 64 columns, 128-byte swizzle; zeros
 * are read beyond its edges. */
static inline int wg_tensor_map_ld(CUtensorMap *m, const void *p, dtype dt,
                                   int bh, int t, int dh, int ld, int rows,
                                   const char *op) {
  PFN_cuTensorMapEncodeTiled_v12000 enc = wg_encode_fn();
  if (!enc)
    FAIL(ERR_FAIL, "%s: the driver has no cuTensorMapEncodeTiled", op);
  cuuint64_t dims[3] = {(cuuint64_t)dh, (cuuint64_t)t, (cuuint64_t)bh};
  cuuint64_t strides[2] = {(cuuint64_t)ld * 2, (cuuint64_t)t * ld * 2};
  cuuint32_t box[3] = {64, (cuuint32_t)rows, 1}, estr[3] = {1, 1, 1};
  CUresult rc = enc(m, dt == DT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                     : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                    3, (void *)p, dims, strides, box, estr,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS)
    FAIL(ERR_FAIL, "%s: cuTensorMapEncodeTiled failed (CUresult %d) for "
         "[%d][%d][%d], rows %d apart", op, (int)rc, bh, t, dh, ld);
  return 0;
}
/* The same, rows packed (ld = dh). */
static inline int wg_tensor_map(CUtensorMap *m, const void *p, dtype dt,
                                int bh, int t, int dh, int rows,
                                const char *op) {
  return wg_tensor_map_ld(m, p, dt, bh, t, dh, dh, rows, op);
}

#define WG_REGS32                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "   \
  "%30, %31}"
#define WG_REGS64                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "   \
  "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "   \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "   \
  "%58, %59, %60, %61, %62, %63}"
#define WG_REGS36                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "   \
  "%30, %31, %32, %33, %34, %35}"
#define WG_REGS40                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "   \
  "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39}"
#define WG_D8(i)                                                              \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]),                \
      "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_D32 WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
/* Write-only accumulators: the first k-step of a product that overwrites D
 * (scale_d 0), so the compiler knows D's old value is dead. */
#define WG_O8(i)                                                              \
  "=f"(d[i]), "=f"(d[i + 1]), "=f"(d[i + 2]), "=f"(d[i + 3]),                \
      "=f"(d[i + 4]), "=f"(d[i + 5]), "=f"(d[i + 6]), "=f"(d[i + 7])
#define WG_O32 WG_O8(0), WG_O8(8), WG_O8(16), WG_O8(24)
#define WG_O64 WG_O32, WG_O8(32), WG_O8(40), WG_O8(48), WG_O8(56)
#define WG_D36 WG_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
#define WG_D40 WG_D32, WG_D8(32)
#define WG_D64 WG_D32, WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)

/* D[64 x N] (scale_d ? D : 0) + A B, A and B both K-major in shared memory. */
#define WG_SS(N, TY, REGS, DL, A, B, P)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"               \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY   \
               " " REGS ", " A ", " B ", p, 1, 1, 0, 0;\n}\n"                \
               : DL                                                          \
               : "l"(a), "l"(b), "r"(scale_d))
/* D[64 x N] (scale_d ? D : 0) + A B, A and B both MN-major in shared
 * memory (A stored with its k index along rows, as B is for trans_b). */
#define WG_SS_TT(N, TY, REGS, DL, A, B, P)                                    \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"               \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY   \
               " " REGS ", " A ", " B ", p, 1, 1, 1, 1;\n}\n"                \
               : DL                                                          \
               : "l"(a), "l"(b), "r"(scale_d))
/* D[64 x N] += A B, A K-major and B MN-major in shared memory. */
#define WG_SS_NT(N, TY, REGS, DL, A, B)                                       \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY   \
               " " REGS ", " A ", " B ", 1, 1, 1, 0, 1;\n"                   \
               : DL                                                          \
               : "l"(a), "l"(b))
/* D[64 x N] += A B, A in registers, B MN-major in shared memory. */
#define WG_RS(N, TY, REGS, DL, A, B)                                          \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY   \
               " " REGS ", " A ", " B ", 1, 1, 1, 1;\n"                       \
               : DL                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))

template <typename T, int N> struct wgmma;

#define WG_DEFINE(T, TY)                                                      \
  template <> struct wgmma<T, 64> {                                           \
    static __device__ __forceinline__ void ss(float *d, uint64_t a,           \
                                              uint64_t b, int scale_d) {      \
      if constexpr (TL_WGMMA) WG_SS(64, TY, WG_REGS32, WG_D32, "%32", "%33", "%34");    \
    }                                                                         \
    static __device__ __forceinline__ void ss0(float *d, uint64_t a,          \
                                               uint64_t b) {                  \
      const int scale_d = 0;                                                  \
      if constexpr (TL_WGMMA) WG_SS(64, TY, WG_REGS32, WG_O32, "%32", "%33", "%34");    \
    }                                                                         \
    static __device__ __forceinline__ void ss_tt(float *d, uint64_t a,        \
                                                 uint64_t b, int scale_d) {   \
      if constexpr (TL_WGMMA) WG_SS_TT(64, TY, WG_REGS32, WG_D32, "%32", "%33", "%34"); \
    }                                                                         \
    static __device__ __forceinline__ void ss_nt(float *d, uint64_t a,        \
                                                 uint64_t b) {                \
      if constexpr (TL_WGMMA) WG_SS_NT(64, TY, WG_REGS32, WG_D32, "%32", "%33"); \
    }                                                                         \
    static __device__ __forceinline__ void ss_tt0(float *d, uint64_t a,       \
                                                  uint64_t b) {               \
      const int scale_d = 0;                                                  \
      if constexpr (TL_WGMMA) WG_SS_TT(64, TY, WG_REGS32, WG_O32, "%32", "%33", "%34"); \
    }                                                                         \
    static __device__ __forceinline__ void rs(float *d, const uint32_t a[4],  \
                                              uint64_t b) {                   \
      if constexpr (TL_WGMMA)                                                 \
        WG_RS(64, TY, WG_REGS32, WG_D32, "{%32, %33, %34, %35}", "%36");      \
    }                                                                         \
  };                                                                          \
  template <> struct wgmma<T, 72> {   /* Dh 64's P V with the row sums   \
                                         (flash_fwd_wgmma.cu) */             \
    static __device__ __forceinline__ void rs(float *d, const uint32_t a[4],  \
                                              uint64_t b) {                   \
      if constexpr (TL_WGMMA)                                                 \
        WG_RS(72, TY, WG_REGS36, WG_D36, "{%36, %37, %38, %39}", "%40");      \
    }                                                                         \
  };                                                                          \
  template <> struct wgmma<T, 80> {   /* Dh 80 (the 2.7B model): P V, and  \
                                         the backward's dV and dK */         \
    static __device__ __forceinline__ void rs(float *d, const uint32_t a[4],  \
                                              uint64_t b) {                   \
      if constexpr (TL_WGMMA)                                                 \
        WG_RS(80, TY, WG_REGS40, WG_D40, "{%40, %41, %42, %43}", "%44");      \
    }                                                                         \
    static __device__ __forceinline__ void ss_nt(float *d, uint64_t a,        \
                                                 uint64_t b) {                \
      if constexpr (TL_WGMMA) WG_SS_NT(80, TY, WG_REGS40, WG_D40, "%40", "%41"); \
    }                                                                         \
  };                                                                          \
  template <> struct wgmma<T, 128> {                                          \
    static __device__ __forceinline__ void ss(float *d, uint64_t a,           \
                                              uint64_t b, int scale_d) {      \
      if constexpr (TL_WGMMA) WG_SS(128, TY, WG_REGS64, WG_D64, "%64", "%65", "%66");   \
    }                                                                         \
    static __device__ __forceinline__ void ss0(float *d, uint64_t a,          \
                                               uint64_t b) {                  \
      const int scale_d = 0;                                                  \
      if constexpr (TL_WGMMA) WG_SS(128, TY, WG_REGS64, WG_O64, "%64", "%65", "%66");   \
    }                                                                         \
    static __device__ __forceinline__ void ss_tt(float *d, uint64_t a,        \
                                                 uint64_t b, int scale_d) {   \
      if constexpr (TL_WGMMA) WG_SS_TT(128, TY, WG_REGS64, WG_D64, "%64", "%65", "%66"); \
    }                                                                         \
    static __device__ __forceinline__ void rs(float *d, const uint32_t a[4],  \
                                              uint64_t b) {                   \
      if constexpr (TL_WGMMA)                                                 \
        WG_RS(128, TY, WG_REGS64, WG_D64, "{%64, %65, %66, %67}", "%68");     \
    }                                                                         \
    static __device__ __forceinline__ void ss_nt(float *d, uint64_t a,        \
                                                 uint64_t b) {                \
      if constexpr (TL_WGMMA) WG_SS_NT(128, TY, WG_REGS64, WG_D64, "%64", "%65"); \
    }                                                                         \
  };
WG_DEFINE(__nv_bfloat16, "bf16")
WG_DEFINE(__half, "f16")
#undef WG_DEFINE

#endif
