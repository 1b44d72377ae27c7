/* k_matmul_adamw on the CUDA engine: a linear layer's weight gradient
 * g[rows, cols] = dy^T x and the AdamW update of the weights it belongs to,
 * in one kernel; g never reaches global memory.
 *
 * Why: in a bf16 step of the 2.7B model the weight-gradient products and
 * AdamW are bound by memory, not by the tensor cores (k = B*T = 2048 is
 * short). A product that writes g (4 bytes per parameter) and an update
 * that reads it back (4) and reads and writes p, m, v and the 16-bit copy
 * (26) move 34 bytes per parameter; here 26, and the update's traffic runs
 * while the tensor cores compute the next tile's product.
 *
 * Hopper (cuda_engine.wgmma, 16-bit inputs): mm_adamw_wg below, one
 * persistent block per SM whose warps specialise (products, update).
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

enum { BM = 128, BN = 128, BK = 64, STAGES = 4 };
/* warps 0-7: two warpgroups of products (64 rows of the tile each);
 * 8-23: the update's four warpgroups, whose first warp issues the TMA
 * loads instead of updating (PW: the update's warps that update).
 * 768 threads leave 80 registers a thread at entry; the products take 112
 * (setmaxnreg), the update 64: 2 x 128 x 112 + 4 x 128 x 64 = 768 x 80. */
enum { NT = 24 * 32, UPD = 256, NU = 512, PW = NU - 32, REG_MM = 112,
       REG_UPD = 64 };
/* rows an update warp takes at a time (more spill at 64 registers) */
enum { UR = 2 };
static_assert(2 * 128 * REG_MM + 4 * 128 * REG_UPD <= NT * 80, "registers");
constexpr int BOX = 64 * BK * 2;               /* 64 columns x BK rows, 16-bit */
constexpr int STAGE = 4 * BOX;                 /* dy's two boxes, then x's two */
constexpr int LDS = BN + 8;                    /* g's row stride (floats) */
constexpr int GBUF = BM * LDS * 4;
constexpr int SMEM = STAGES * STAGE + GBUF + 1024;

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

/* Rows lr .. lr + R - 1 of a tile at (r0, c0) (those below `rows`), the
 * lane's four columns 4 lane (none when at or past cols): p, m, v load,
 * then (when `bar`) the wait for g, then the update from g in gs. */
template <int R, typename T>
__device__ __forceinline__ void update_rows(const float *gs, int lr, int r0,
                                            int c0, int rows, int cols,
                                            float *p, T *pl, float *mo,
                                            float *v, const adam_s &a,
                                            uint64_t *bar, int parity) {
  const int lc = 4 * (threadIdx.x % 32), c = c0 + lc;
  const bool ok = c < cols;
  float4 P[R], M[R], V[R];
#pragma unroll
  for (int j = 0; j < R; j++) {
    const int r = r0 + lr + j;
    if (ok && lr + j < BM && r < rows) {
      const size_t o = (size_t)r * cols + c;
      P[j] = __ldcs((const float4 *)(p + o));
      M[j] = __ldcs((const float4 *)(mo + o));
      V[j] = __ldcs((const float4 *)(v + o));
    }
  }
  if (bar) mbar_wait(bar, parity);
#pragma unroll
  for (int j = 0; j < R; j++) {
    const int r = r0 + lr + j;
    if (!ok || lr + j >= BM || r >= rows) continue;
    const size_t o = (size_t)r * cols + c;
    const float4 G = *(const float4 *)&gs[(lr + j) * LDS + lc];
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

#if TL_WGMMA
/* The warp's next n rows of a tile from its shared counter (the first row;
 * BM or more once the tile is taken). */
__device__ __forceinline__ int claim(int *cnt, int n) {
  int s = 0;
  if (threadIdx.x % 32 == 0) s = atomicAdd(cnt, n);
  return __shfl_sync(0xffffffffu, s, 0);
}
#endif

/* One block per SM, persistent over 128 x 128 tiles of g, with the
 * product of tile i + 1 running while tile i is updated:
 *  - two warpgroups multiply (wgmma, both operands MN-major: dy's and x's
 *    rows are the k index) from k-slices that one warp brings by TMA
 *    through STAGES stages, refilling a stage once both warpgroups are
 *    done with it (so the next tile's first slices load during this
 *    tile's last products, and the warpgroups never wait for each
 *    other); their accumulators done, they take rows of
 *    the previous tile's update too, then write this tile's g to a buffer
 *    in shared memory (gfull) once the update has left it (gempty);
 *  - four warpgroups update, UR rows at a time from the tile's shared
 *    counter (a lane four columns, so a warp reads and writes 512
 *    contiguous bytes of p, m and v, streamed past L2's keep set), the
 *    first rows' loads issued before g is there.
 * Why: the update is bound by how many loads its warps keep in flight,
 * so it takes every warp the products' registers leave. The products
 * alone run at 70% of cuBLAS's speed, and the update and products each
 * slow the other down (kernels/cuda/NOTES.md has the measurements and the
 * forms tried). */
template <typename T>
__global__ void __launch_bounds__(NT, 1)
    mm_adamw_wg(const __grid_constant__ CUtensorMap ymap,
                const __grid_constant__ CUtensorMap xmap, int rows, int cols,
                int k, float *p, T *pl, float *mo, float *v, adam_s a) {
#if TL_WGMMA
  extern __shared__ unsigned char smem_raw[];
  unsigned char *sm =
      (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  float *gs = (float *)(sm + STAGES * STAGE);
  /* full[s]: stage s's slice is in (TMA); empty[s]: both product
   * warpgroups are done reading it (an arrival per warp) */
  __shared__ uint64_t full[STAGES], empty[STAGES], gfull, gempty;
  __shared__ int cnt[2];     /* rows of tile i's update taken: cnt[i % 2] */
  const int tid = threadIdx.x, lane = tid % 32;
  const int ntc = (cols + BN - 1) / BN;
  const int ntiles = ntc * ((rows + BM - 1) / BM);
  const int nk = (k + BK - 1) / BK;

  const int mine = (ntiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
  const int total = mine * nk;    /* k-slices of this block's tiles */
  /* k-slice `it` of this block's stream into its stage: dy's rows r0.. and
   * r0+64.., x's columns c0.. and c0+64.. (boxes wholly or partly outside
   * read as zeros and still count their full bytes) */
  auto load = [&](int it) {
    const int tile = blockIdx.x + it / nk * gridDim.x, kt = it % nk;
    const int r0 = tile / ntc * BM, c0 = tile % ntc * BN, s = it % STAGES;
    unsigned char *st = sm + s * STAGE;
    mbar_expect_tx(&full[s], STAGE);
    tma_load_3d(st, &ymap, &full[s], r0, kt * BK, 0);
    tma_load_3d(st + BOX, &ymap, &full[s], r0 + 64, kt * BK, 0);
    tma_load_3d(st + 2 * BOX, &xmap, &full[s], c0, kt * BK, 0);
    tma_load_3d(st + 3 * BOX, &xmap, &full[s], c0 + 64, kt * BK, 0);
  };
  if (tid == 0) {
    for (int s = 0; s < STAGES; s++) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], UPD / 32);
    }
    mbar_init(&gfull, UPD);
    mbar_init(&gempty, PW + UPD);
    cnt[0] = cnt[1] = 0;
    mbar_fence_init();
  }
  __syncthreads();

  if (tid < UPD) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"((int)REG_MM));
    const int wg = tid / 128, w = (tid / 32) % 4;
    const int g = lane / 4, t = lane % 4;
    /* this warp is done with slice `it`'s stage (the wgmma wait before
     * this covers the warpgroup's products that read it) */
    auto release = [&](int it) {
      if (lane == 0) mbar_arrive(&empty[it % STAGES]);
    };
    /* rows of tile i's update, one at a time from its counter, beside the
     * update's warps */
    auto help = [&](int i) {
      const int tp = blockIdx.x + i * gridDim.x;
      mbar_wait(&gfull, i & 1);
      for (int lr = claim(&cnt[i & 1], 1); lr < BM; lr = claim(&cnt[i & 1], 1))
        update_rows<1>(gs, lr, tp / ntc * BM, tp % ntc * BN, rows, cols, p,
                       pl, mo, v, a, (uint64_t *)0, 0);
    };
    int it = 0;
    for (int i = 0; i < mine; i++) {
      float d[64];
#pragma unroll
      for (int j = 0; j < 64; j++) d[j] = 0.0f;
      for (int kt = 0; kt < nk; kt++, it++) {
        const int s = it % STAGES;
        mbar_wait(&full[s], (it / STAGES) & 1);
        const unsigned char *st = sm + s * STAGE;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
          /* two m64n64 products, x's two boxes: one m64n128 needs more
           * registers than the entry count, which ptxas requires of a
           * single instruction */
          const uint64_t ad = wg_desc(st + wg * BOX + kk * 2048, BK * 128, 1024);
          wgmma<T, 64>::ss_tt(d, ad, wg_desc(st + 2 * BOX + kk * 2048, BK * 128, 1024), 1);
          wgmma<T, 64>::ss_tt(d + 32, ad, wg_desc(st + 3 * BOX + kk * 2048, BK * 128, 1024), 1);
        }
        wg_commit();
        wg_wait<1>();
        if (kt > 0) release(it - 1);
      }
      wg_wait<0>();
      wg_hold<64>(d);
      release(it - 1);
      if (i > 0) {
        /* while the accumulators wait, take rows of the previous tile's
         * update; all of it done, the counter of the tile after this one
         * (the one before last's) starts again */
        help(i - 1);
        mbar_arrive(&gempty);
        mbar_wait(&gempty, (i - 1) & 1);
        if (tid == 0) cnt[(i + 1) & 1] = 0;
      }
      /* d[4j + 2h + e] is row 64 wg + 16 w + g + 8 h, column 8 j + 2 t + e
       * (the second product's d[32 + 4j' + ...] is column 64 + 8j' + ...) */
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int j = 0; j < 16; j++)
          *(float2 *)&gs[(64 * wg + 16 * w + g + 8 * h) * LDS + 8 * j + 2 * t] =
              make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
      mbar_arrive(&gfull);
    }
    help(mine - 1);   /* the last tile's update */
    return;
  }

  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"((int)REG_UPD));
  if (tid < UPD + 32) {
    /* The loads: each stage refilled as soon as both product warpgroups
     * have left it, so the products never wait for each other and the
     * next tile's first slices load during this tile's last products. */
    if (lane == 0)
      for (int it = 0; it < total; it++) {
        if (it >= STAGES) mbar_wait(&empty[it % STAGES], (it / STAGES - 1) & 1);
        load(it);
      }
    return;
  }
  /* The update's warps: UR rows at a time from the tile's counter, the
   * first ones claimed and loaded before g is there. A thread sees the
   * tile's g (gfull) before it arrives on gempty, so its arrival counts
   * for this tile. */
  for (int i = 0; i < mine; i++) {
    const int tile = blockIdx.x + i * gridDim.x;
    bool seen = false;
    for (int lr = claim(&cnt[i & 1], UR); lr < BM; lr = claim(&cnt[i & 1], UR)) {
      update_rows<UR>(gs, lr, tile / ntc * BM, tile % ntc * BN, rows, cols, p,
                     pl, mo, v, a, seen ? (uint64_t *)0 : &gfull, i & 1);
      seen = true;
    }
    if (!seen) mbar_wait(&gfull, i & 1);
    mbar_arrive(&gempty);
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
      const int tiles = ((cols + BN - 1) / BN) * ((rows + BM - 1) / BM);
      const int sms = cuda_sm_target(e) ? cuda_sm_target(e) : cuda_impl(e)->sms;
      mm_adamw_wg<T><<<min(tiles, sms), NT, SMEM, st>>>(ym, xm, rows, cols,
                                                       k, p, pl, m, v, a);
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
  /* cuda_adamw_ex's scalars */
  adam_s a = {b1, b2, (float)(1.0 - (double)b1), (float)(1.0 - (double)b2),
              eps, k_adamw_step_size(lr, b1, b2, t),
              (float)(1.0 - (double)lr * wd)};
  WITH_T(in_t, return launch<T>(e, rows, cols, k, dy, ldy, x, ldx, in_t, p,
                                p_low, m, v, a));
  return 0;
}
