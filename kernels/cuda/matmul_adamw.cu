/* k_matmul_adamw on the CUDA engine: a linear layer's weight gradient
 * g[rows, cols] = dy^T x and the AdamW update of the weights it belongs to,
 * in one kernel; g lives in registers only.
 *
 * Why: in a bf16 step of the 2.7B model the weight-gradient products and
 * AdamW are bound by memory, not by the tensor cores (k = B*T = 2048 is
 * short). A product that writes g (4 bytes per parameter) and an update
 * that reads it back (4) and reads and writes p, m, v and the 16-bit copy
 * (26) move 34 bytes per parameter; here the update runs on the
 * accumulators, 26 bytes. Two blocks per SM; they run in step, so one's
 * update does not yet overlap the other's product (NOTES.md).
 *
 * Hopper (cuda_engine.wgmma, 16-bit inputs): a block computes a 128 x 128
 * tile of g with two warpgroups (64 rows each, wgmma m64n128k16, both
 * operands MN-major in shared memory: dy's and x's rows are the k index).
 * The TMA brings k-slices of 64 rows (64-column boxes, 128-byte swizzle,
 * zeros beyond the edges) into 3 stages, issued two slices ahead. Then the
 * tile goes through shared memory so that each warp updates whole rows of
 * it: 512 contiguous bytes of p, m and v per access (the accumulators'
 * own layout, 32 bytes from each of 8 rows, took the 2.7B step's fused
 * products from 45 to 59 ms), streamed past L2's keep set (__ldcs /
 * __stcs: read once, so dy and x keep L2 for the other blocks).
 *
 * Elsewhere (other GPUs, fp32 inputs, unaligned operands or cols not a
 * multiple of 4, k = 0): a plain tiled kernel on the CUDA cores, each g
 * element summed over k in order.
 *
 * Each element's update is adamw_ex_k's (adamw.cu) arithmetic with the same
 * host-rounded scalars, so given the same g the bits are the same; g itself
 * is summed in a different order than cuBLAS's, so the result is within
 * rounding of the product-then-update forms (test_kernels_cuda). */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/wgmma.cuh"

#include <math.h>

namespace {

enum { BM = 128, BN = 128, BK = 64, STAGES = 3, NT = 256 };
constexpr int BOX = 64 * BK * 2;               /* 64 columns x BK rows, 16-bit */
constexpr int STAGE = 4 * BOX;                 /* dy's two boxes, then x's two */
constexpr int SMEM = STAGES * STAGE + 1024;    /* + room to align to 1024 */
constexpr int LDS = BN + 8;                    /* the tile's row stride in the
                                                  epilogue (floats) */
static_assert(BM * LDS * 4 <= STAGES * STAGE, "the tile fits in the stages");

struct adam_s {
  float b1, b2, one_b1, one_b2, eps, step, decay;
};

/* adamw_ex_k's update of one element (adamw.cu). */
__device__ __forceinline__ void upd(float &p, float g, float &m, float &v,
                                    const adam_s &a) {
  m = a.b1 * m + a.one_b1 * g;
  v = a.b2 * v + a.one_b2 * (g * g);
  p = p * a.decay - a.step * m / (sqrtf(v) + a.eps);
}

template <typename T>
__global__ void __launch_bounds__(NT, 2)
    mm_adamw_wg(const __grid_constant__ CUtensorMap ymap,
                const __grid_constant__ CUtensorMap xmap, int rows, int cols,
                int k, float *p, T *pl, float *mo, float *v, adam_s a) {
#if TL_WGMMA
  extern __shared__ unsigned char smem_raw[];
  unsigned char *sm =
      (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  __shared__ uint64_t full[STAGES];
  const int tid = threadIdx.x, wg = tid / 128, w = (tid / 32) % 4;
  const int g = (tid % 32) / 4, t = tid % 4;
  const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
  const int nk = (k + BK - 1) / BK;

  /* k-slice kt into stage s: dy's rows r0.. and r0+64.., x's columns
   * c0.. and c0+64.. (boxes wholly or partly outside read as zeros and
   * still count their full bytes) */
  auto load = [&](int kt, int s) {
    unsigned char *st = sm + s * STAGE;
    mbar_expect_tx(&full[s], STAGE);
    tma_load_3d(st, &ymap, &full[s], r0, kt * BK, 0);
    tma_load_3d(st + BOX, &ymap, &full[s], r0 + 64, kt * BK, 0);
    tma_load_3d(st + 2 * BOX, &xmap, &full[s], c0, kt * BK, 0);
    tma_load_3d(st + 3 * BOX, &xmap, &full[s], c0 + 64, kt * BK, 0);
  };
  if (tid == 0) {
    for (int s = 0; s < STAGES; s++) mbar_init(&full[s], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0)
    for (int s = 0; s < STAGES && s < nk; s++) load(s, s);

  float d[64];
#pragma unroll
  for (int i = 0; i < 64; i++) d[i] = 0.0f;
  for (int kt = 0; kt < nk; kt++) {
    const int s = kt % STAGES;
    mbar_wait(&full[s], (kt / STAGES) & 1);
    const unsigned char *st = sm + s * STAGE;
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++)
      wgmma<T, 128>::ss_tt(d, wg_desc(st + wg * BOX + kk * 2048, BK * 128, 1024),
                           wg_desc(st + 2 * BOX + kk * 2048, BK * 128, 1024), 1);
    wg_commit();
    wg_wait<1>();       /* slice kt - 1's products are done ... */
    __syncthreads();    /* ... in both warpgroups: its stage is free */
    if (tid == 0 && kt >= 1 && kt - 1 + STAGES < nk)
      load(kt - 1 + STAGES, (kt - 1) % STAGES);
  }
  wg_wait<0>();
  wg_hold<64>(d);

  /* The tile through shared memory (the stages are free: every slice
   * loaded was consumed), so that the update reads and writes whole rows:
   * d[4i + 2h + e] is row 64 wg + 16 w + g + 8 h, column 8 i + 2 t + e. */
  __syncthreads();
  float *cs = (float *)sm;
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int i = 0; i < 16; i++)
      *(float2 *)&cs[(64 * wg + 16 * w + g + 8 * h) * LDS + 8 * i + 2 * t] =
          make_float2(d[4 * i + 2 * h], d[4 * i + 2 * h + 1]);
  __syncthreads();
  /* warp q updates rows q, q + 8, ...: each lane four columns, so a warp
   * reads and writes 512 contiguous bytes of p, m and v; four rows' loads
   * are issued before their updates. cols % 4 == 0. */
  const int q = tid / 32, c = c0 + 4 * (tid % 32);
  if (c >= cols) return;
#pragma unroll
  for (int rr = 0; rr < BM / 8; rr += 4) {
    float4 P[4], M[4], V[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int r = r0 + q + 8 * (rr + j);
      if (r < rows) {
        const size_t o = (size_t)r * cols + c;
        P[j] = __ldcs((const float4 *)(p + o));
        M[j] = __ldcs((const float4 *)(mo + o));
        V[j] = __ldcs((const float4 *)(v + o));
      }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int r = r0 + q + 8 * (rr + j);
      if (r >= rows) continue;
      const size_t o = (size_t)r * cols + c;
      const float4 G = *(const float4 *)&cs[(q + 8 * (rr + j)) * LDS + 4 * (tid % 32)];
      upd(P[j].x, G.x, M[j].x, V[j].x, a);
      upd(P[j].y, G.y, M[j].y, V[j].y, a);
      upd(P[j].z, G.z, M[j].z, V[j].z, a);
      upd(P[j].w, G.w, M[j].w, V[j].w, a);
      __stcs((float4 *)(p + o), P[j]);
      __stcs((float4 *)(mo + o), M[j]);
      __stcs((float4 *)(v + o), V[j]);
      if (pl) {
        uint2 lo = {elt<T>::pack(P[j].x, P[j].y), elt<T>::pack(P[j].z, P[j].w)};
        *reinterpret_cast<uint2 *>(pl + o) = lo;
      }
    }
  }
#else
  __trap();
#endif
}

/* Any GPU and dtype: 16 x 16 tiles of g, k in slices of 16 through shared
 * memory, each element summed in k order. */
template <typename T>
__global__ void mm_adamw_plain(const T *dy, int ldy, const T *x, int ldx,
                               int rows, int cols, int k, float *p, T *pl,
                               float *mo, float *v, adam_s a) {
  __shared__ float ys[16][17], xs[16][17];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int rb = blockIdx.y * 16, cb = blockIdx.x * 16;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += 16) {
    const int kr = k0 + ty;
    ys[ty][tx] = kr < k && rb + tx < rows
                     ? elt<T>::load(dy[(size_t)kr * ldy + rb + tx]) : 0.0f;
    xs[ty][tx] = kr < k && cb + tx < cols
                     ? elt<T>::load(x[(size_t)kr * ldx + cb + tx]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; kk++) acc += ys[kk][ty] * xs[kk][tx];
    __syncthreads();
  }
  const int r = rb + ty, c = cb + tx;
  if (r >= rows || c >= cols) return;
  const size_t i = (size_t)r * cols + c;
  float pp = p[i], mm = mo[i], vv = v[i];
  upd(pp, acc, mm, vv, a);
  p[i] = pp;
  mo[i] = mm;
  v[i] = vv;
  if (pl) pl[i] = elt<T>::store(pp);
}

template <typename T>
int launch(engine *e, int rows, int cols, int k, const void *dy, int ldy,
           const void *x, int ldx, dtype in_t, float *p, void *p_low,
           float *m, float *v, const adam_s &a) {
  cudaStream_t st = cuda_stream(e);
  T *pl = p_low && p_low != (void *)p && in_t != DT_F32 ? (T *)p_low : NULL;
  const bool al = aligned16(p) && aligned16(m) && aligned16(v) &&
                  (uintptr_t)pl % 8 == 0;
  if constexpr (sizeof(T) == 2) {
    if (cuda_impl(e)->wgmma && k > 0 && cols % 4 == 0 && ldy % 8 == 0 &&
        ldx % 8 == 0 && aligned16(dy) && aligned16(x) && al) {
      CUtensorMap ym, xm;
      /* dy [k][rows] and x [k][cols]: boxes of 64 columns x BK rows */
      TRY(wg_tensor_map_ld(&ym, dy, in_t, 1, k, rows, ldy, BK, "k_matmul_adamw"));
      TRY(wg_tensor_map_ld(&xm, x, in_t, 1, k, cols, ldx, BK, "k_matmul_adamw"));
      CHECK_CUDA(cudaFuncSetAttribute(
          mm_adamw_wg<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
      dim3 grid((cols + BN - 1) / BN, (rows + BM - 1) / BM);
      mm_adamw_wg<T><<<grid, NT, SMEM, st>>>(ym, xm, rows, cols, k, p, pl, m,
                                             v, a);
      CHECK_LAUNCH();
      return 0;
    }
  }
  dim3 grid((cols + 15) / 16, (rows + 15) / 16), block(16, 16);
  mm_adamw_plain<T><<<grid, block, 0, st>>>((const T *)dy, ldy, (const T *)x,
                                            ldx, rows, cols, k, p, pl, m, v,
                                            a);
  CHECK_LAUNCH();
  return 0;
}

}  // namespace

int cuda_matmul_adamw(engine *e, int rows, int cols, int k, const void *dy,
                      int ldy, const void *x, int ldx, dtype in_t, float *p,
                      void *p_low, float *m, float *v, float lr, float b1,
                      float b2, float eps, float wd, long long t) {
  /* cuda_adamw_ex's scalars, rounded on the host the same way */
  double step = (double)lr * sqrt(1.0 - pow(b2, (double)t)) /
                (1.0 - pow(b1, (double)t));
  adam_s a = {b1, b2, (float)(1.0 - (double)b1), (float)(1.0 - (double)b2),
              eps, (float)step, (float)(1.0 - (double)lr * wd)};
  WITH_T(in_t, return launch<T>(e, rows, cols, k, dy, ldy, x, ldx, in_t, p,
                                p_low, m, v, a));
  return 0;
}
