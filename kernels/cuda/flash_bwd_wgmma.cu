/* FlashAttention-2 backward on Hopper's warpgroup products (wgmma), bf16 /
 * f16 at head dims 64, 80, 128 on sm_90: the same two passes as
 * flash_bwd.cu (no atomics, results repeat bit for bit), given D =
 * rowsum(dO * O) from flash_bwd.cu's flash_bwd_d.
 *
 *   dK/dV pass, a block owns 128 keys (64 per warpgroup) and streams the
 *   query tiles that can see them (64 rows, with dO):
 *     S^T = K Q^T, dP^T = V dO^T          (A and B both from shared memory)
 *     P^T = exp(scale S^T - L), dS^T = P^T (dP^T - D)   (in registers)
 *     dV += P^T dO, dK += dS^T Q          (A from registers, B = dO, Q
 *                                          read row-major: MN-major B)
 *   dQ pass, a block owns 128 queries and streams key tiles (64, with V):
 *     S = Q K^T, dP = dO V^T, dS = P (dP - D), dQ += dS K.
 *
 * Streamed tiles come by TMA (one issuing thread) into two buffers with
 * full / empty mbarriers, as in flash_fwd_wgmma.cu, NST buffers deep; a buffer is refilled
 * once both warpgroups' products that read it are complete, and the next
 * tile is requested before the current one is worked on. Causal: a
 * warpgroup skips the streamed tiles its rows cannot see (it still
 * releases them). */
#include "kernels/cuda/wgmma.cuh"

constexpr int BWD_THREADS = 256;

/* The streamed tiles' barriers: tile j uses buffer j % NST for the
 * (j / NST)-th time. Four buffers: a 64-row tile is little work, so the
 * loads must start several tiles ahead (two left the products waiting). */
constexpr int NST = 4;
struct stream_bars {
  uint64_t full[NST], empty[NST];
};

__device__ __forceinline__ void init_bars(uint64_t *own, stream_bars *sb) {
  mbar_init(own, 1);
  for (int i = 0; i < NST; i++) {
    mbar_init(&sb->full[i], 1);
    mbar_init(&sb->empty[i], BWD_THREADS);
  }
  mbar_fence_init();
}

namespace {

constexpr int NWG = 2, WG_THREADS = 128 * NWG, OWN = 64 * NWG, BS = 64;
static_assert(WG_THREADS == BWD_THREADS, "barrier counts");

template <int DH> struct wg_tile {   /* swizzled tile sizes in bytes */
  static constexpr int CB = (DH + 63) / 64, OWNB = OWN * CB * 128,
                       SB = BS * CB * 128;
};

/* Two 16-bit boxes (rows x Dh each, as CB column blocks) of two maps onto
 * one barrier. */
template <int DH>
__device__ __forceinline__ void load2(unsigned char *d0, const CUtensorMap *m0,
                                      unsigned char *d1, const CUtensorMap *m1,
                                      uint64_t *bar, int row0, int rows, int b) {
  constexpr int CB = wg_tile<DH>::CB;
  mbar_expect_tx(bar, 2 * rows * CB * 128);
#pragma unroll
  for (int c = 0; c < CB; c++) {
    tma_load_3d(d0 + c * rows * 128, m0, bar, c * 64, row0, b);
    tma_load_3d(d1 + c * rows * 128, m1, bar, c * 64, row0, b);
  }
}

/* acc (64 x N) = A B^T over Dh: A rows of this warpgroup in tile a (rows
 * `arows`), B the streamed tile b (BS rows); both K-major. */
template <typename T, int N, int DH>
__device__ __forceinline__ void product_abt(float *acc, const unsigned char *a,
                                            int arows, int wg,
                                            const unsigned char *b) {
#pragma unroll
  for (int kk = 0; kk < DH / 16; kk++) {
    uint32_t ko = (kk & 3) * 32;
    wgmma<T, N>::ss(acc,
                    wg_desc(a + (kk >> 2) * arows * 128 + wg * 64 * 128 + ko, 16, 1024),
                    wg_desc(b + (kk >> 2) * BS * 128 + ko, 16, 1024), kk > 0);
  }
}

/* acc (64 x DH) += A B, A's fragments in registers (64 x BS), B the
 * streamed tile read row-major (BS rows of Dh: MN-major). */
template <typename T, int DH>
__device__ __forceinline__ void product_rb(float *acc, const uint32_t a[][4],
                                           const unsigned char *b) {
#pragma unroll
  for (int kk = 0; kk < BS / 16; kk++)
    wgmma<T, DH>::rs(acc, a[kk], wg_desc(b + kk * 16 * 128, BS * 128, 1024));
}

/* ---- dK, dV --------------------------------------------------------------- */

template <typename T, int DH>
__global__ void __launch_bounds__(WG_THREADS, 1)
    flash_dkdv_wg(const __grid_constant__ CUtensorMap qmap,
                  const __grid_constant__ CUtensorMap kmap,
                  const __grid_constant__ CUtensorMap vmap,
                  const __grid_constant__ CUtensorMap omap,
                  const float *__restrict__ lse, const float *__restrict__ D,
                  T *__restrict__ dk, T *__restrict__ dv, int tq, int tk,
                  int causal, float scale, float scale_log2) {
#if TL_WGMMA
  typedef wg_tile<DH> Z;
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full_own;
  __shared__ stream_bars sb;
  unsigned char *sk = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char *sv = sk + Z::OWNB;
  unsigned char *sq = sv + Z::OWNB;        /* NST buffers */
  unsigned char *sdo = sq + NST * Z::SB;   /* NST buffers */

  int b = blockIdx.y, k0 = blockIdx.x * OWN;
  int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, l = threadIdx.x & 31,
      g = l >> 2, t = l & 3;
  int wk0 = k0 + wg * 64;
  /* Causal: the first query tile that sees key k0 holds query k0; the
   * first this warpgroup needs holds query wk0 (tiles are BS rows). */
  int i0 = causal ? k0 / BS : 0, nq = (tq + BS - 1) / BS;
  int ntiles = max(nq - i0, 0);
  int first = causal ? min(ntiles, wk0 / BS - i0) : 0;
  bool issuer = threadIdx.x == 0;
  lse += (size_t)b * tq;
  D += (size_t)b * tq;

  if (issuer) init_bars(&full_own, &sb);
  __syncthreads();
  if (issuer) {
    load2<DH>(sk, &kmap, sv, &vmap, &full_own, k0, OWN, b);
    for (int j = 0; j < min(ntiles, NST - 1); j++)
      load2<DH>(sq + j * Z::SB, &qmap, sdo + j * Z::SB, &omap, &sb.full[j],
                (i0 + j) * BS, BS, b);
  }

  float accv[DH / 2], acck[DH / 2];
#pragma unroll
  for (int i = 0; i < DH / 2; i++) accv[i] = acck[i] = 0.f;
  mbar_wait(&full_own, 0);

  for (int j = 0; j < ntiles; j++) {
    int cur = j % NST, qs = (i0 + j) * BS, nx = j + NST - 1;
    if (issuer && nx < ntiles) {   /* into tile j - 1's buffer, once left */
      int bn = nx % NST;
      if (j >= 1) mbar_wait(&sb.empty[bn], ((j - 1) / NST) & 1);
      load2<DH>(sq + bn * Z::SB, &qmap, sdo + bn * Z::SB, &omap, &sb.full[bn],
                (i0 + nx) * BS, BS, b);
    }
    if (j < first) {   /* queries before this warpgroup's keys */
      mbar_arrive(&sb.empty[cur]);
      continue;
    }
    float s[BS / 2], dp[BS / 2];
    mbar_wait(&sb.full[cur], (j / NST) & 1);
    wg_fence();
    product_abt<T, BS, DH>(s, sk, OWN, wg, sq + cur * Z::SB);
    product_abt<T, BS, DH>(dp, sv, OWN, wg, sdo + cur * Z::SB);
    wg_commit();
    wg_wait<0>();
    wg_hold<BS / 2>(s);
    wg_hold<BS / 2>(dp);
    /* s[4i + e]: key wk0 + 16w + g + 8 (e >> 1), query qs + 8i + 2t +
     * (e & 1). P^T and dS^T in place, then as A fragments. */
    uint32_t pa[BS / 16][4], da[BS / 16][4];
#pragma unroll
    for (int n = 0; n < BS / 8; n++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int col = qs + 8 * n + 2 * t + e;
        bool seen = col < tq;
        float lc = seen ? __ldg(lse + col) * FLASH_LOG2E : 0.f,
              dc = seen ? __ldg(D + col) : 0.f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          int i = 4 * n + 2 * h + e, key = wk0 + 16 * w + g + 8 * h;
          bool dead = !seen || (causal && key > col);
          float p = dead ? 0.f : exp2f(fmaf(s[i], scale_log2, -lc));
          s[i] = p;
          dp[i] = p * (dp[i] - dc);
        }
      }
#pragma unroll
    for (int kk = 0; kk < BS / 16; kk++) {
      c_to_a<T>(pa[kk], s + 8 * kk, s + 8 * kk + 4);
      c_to_a<T>(da[kk], dp + 8 * kk, dp + 8 * kk + 4);
    }
    wg_fence();
    product_rb<T, DH>(accv, pa, sdo + cur * Z::SB);
    product_rb<T, DH>(acck, da, sq + cur * Z::SB);
    wg_commit();
    /* Waiting here, not under the next tile's products: accumulators
     * pending across iterations make ptxas serialise every wgmma (C7515). */
    wg_wait<0>();
    wg_hold<DH / 2>(accv);
    wg_hold<DH / 2>(acck);
    mbar_arrive(&sb.empty[cur]);
  }

  /* acc[4n + 2h + e]: key wk0 + 16w + g + 8h, column 8n + 2t + e. */
#pragma unroll
  for (int h = 0; h < 2; h++) {
    int key = wk0 + 16 * w + g + 8 * h;
    if (key < tk) {
      size_t row = ((size_t)b * tk + key) * DH;
#pragma unroll
      for (int n = 0; n < DH / 8; n++) {
        *reinterpret_cast<uint32_t *>(dv + row + n * 8 + 2 * t) =
            elt<T>::pack(accv[4 * n + 2 * h], accv[4 * n + 2 * h + 1]);
        *reinterpret_cast<uint32_t *>(dk + row + n * 8 + 2 * t) = elt<T>::pack(
            acck[4 * n + 2 * h] * scale, acck[4 * n + 2 * h + 1] * scale);
      }
    }
  }
#else
  __trap();
#endif
}

/* ---- dQ ------------------------------------------------------------------- */

template <typename T, int DH>
__global__ void __launch_bounds__(WG_THREADS, 1)
    flash_dq_wg(const __grid_constant__ CUtensorMap qmap,
                const __grid_constant__ CUtensorMap kmap,
                const __grid_constant__ CUtensorMap vmap,
                const __grid_constant__ CUtensorMap omap,
                const float *__restrict__ lse, const float *__restrict__ D,
                T *__restrict__ dq, int tq, int tk, int causal, float scale,
                float scale_log2) {
#if TL_WGMMA
  typedef wg_tile<DH> Z;
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full_own;
  __shared__ stream_bars sb;
  unsigned char *sq = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char *sdo = sq + Z::OWNB;
  unsigned char *sk = sdo + Z::OWNB;       /* NST buffers */
  unsigned char *sv = sk + NST * Z::SB;    /* NST buffers */

  /* Causal: the last query tiles walk the most keys; start them first. */
  int b = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * OWN;
  int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, l = threadIdx.x & 31,
      g = l >> 2, t = l & 3;
  int wq0 = q0 + wg * 64;
  int kend = causal ? min(tk, q0 + OWN) : tk;
  int ntiles = (kend + BS - 1) / BS;
  /* Causal: this warpgroup's rows see keys up to wq0 + 63 only. */
  int mine = causal ? min(ntiles, (wq0 + 63) / BS + 1) : ntiles;
  bool issuer = threadIdx.x == 0;

  if (issuer) init_bars(&full_own, &sb);
  __syncthreads();
  if (issuer) {
    load2<DH>(sq, &qmap, sdo, &omap, &full_own, q0, OWN, b);
    for (int j = 0; j < min(ntiles, NST - 1); j++)
      load2<DH>(sk + j * Z::SB, &kmap, sv + j * Z::SB, &vmap, &sb.full[j],
                j * BS, BS, b);
  }
  float lr[2], dr[2];   /* L (log2 units) and D of this thread's two rows */
#pragma unroll
  for (int h = 0; h < 2; h++) {
    int r = wq0 + 16 * w + g + 8 * h;
    lr[h] = r < tq ? lse[(size_t)b * tq + r] * FLASH_LOG2E : 0.f;
    dr[h] = r < tq ? D[(size_t)b * tq + r] : 0.f;
  }
  float acc[DH / 2];
#pragma unroll
  for (int i = 0; i < DH / 2; i++) acc[i] = 0.f;
  mbar_wait(&full_own, 0);

  for (int j = 0; j < ntiles; j++) {
    int cur = j % NST, k0 = j * BS, nx = j + NST - 1;
    if (issuer && nx < ntiles) {   /* into tile j - 1's buffer, once left */
      int bn = nx % NST;
      if (j >= 1) mbar_wait(&sb.empty[bn], ((j - 1) / NST) & 1);
      load2<DH>(sk + bn * Z::SB, &kmap, sv + bn * Z::SB, &vmap, &sb.full[bn],
                nx * BS, BS, b);
    }
    if (j >= mine) {   /* keys after this warpgroup's rows */
      mbar_arrive(&sb.empty[cur]);
      continue;
    }
    float s[BS / 2], dp[BS / 2];
    mbar_wait(&sb.full[cur], (j / NST) & 1);
    wg_fence();
    product_abt<T, BS, DH>(s, sq, OWN, wg, sk + cur * Z::SB);
    product_abt<T, BS, DH>(dp, sdo, OWN, wg, sv + cur * Z::SB);
    wg_commit();
    wg_wait<0>();
    wg_hold<BS / 2>(s);
    wg_hold<BS / 2>(dp);
    /* s[4i + e]: row wq0 + 16w + g + 8 (e >> 1), key k0 + 8i + 2t + (e & 1). */
    uint32_t da[BS / 16][4];
    bool edge = k0 + BS > tk || (causal && k0 + BS - 1 > wq0);
#pragma unroll
    for (int i = 0; i < BS / 2; i++) {
      int h = (i >> 1) & 1, col = k0 + 8 * (i >> 2) + 2 * t + (i & 1),
          r = wq0 + 16 * w + g + 8 * h;
      float p = exp2f(fmaf(s[i], scale_log2, -lr[h]));
      if (edge && (col >= tk || (causal && col > r))) p = 0.f;
      dp[i] = p * (dp[i] - dr[h]);
    }
#pragma unroll
    for (int kk = 0; kk < BS / 16; kk++)
      c_to_a<T>(da[kk], dp + 8 * kk, dp + 8 * kk + 4);
    wg_fence();
    product_rb<T, DH>(acc, da, sk + cur * Z::SB);
    wg_commit();
    wg_wait<0>();   /* here, not across iterations (flash_dkdv_wg) */
    wg_hold<DH / 2>(acc);
    mbar_arrive(&sb.empty[cur]);
  }

#pragma unroll
  for (int h = 0; h < 2; h++) {
    int r = wq0 + 16 * w + g + 8 * h;
    if (r < tq) {
      T *row = dq + ((size_t)b * tq + r) * DH;
#pragma unroll
      for (int n = 0; n < DH / 8; n++)
        *reinterpret_cast<uint32_t *>(row + n * 8 + 2 * t) = elt<T>::pack(
            acc[4 * n + 2 * h] * scale, acc[4 * n + 2 * h + 1] * scale);
    }
  }
#else
  __trap();
#endif
}

template <typename T, int DH>
int launch(engine *e, const void *q, const void *k, const void *v,
           const void *dout, const float *lse, const float *D, void *dq,
           void *dk, void *dv, int bh, int tq, int tk, int causal, float scale,
           float sl2, dtype dt) {
  static const char *op = "k_attention_bwd";
  typedef wg_tile<DH> Z;
  /* Owned tiles (128 rows) and streamed tiles (64) need their own maps. */
  CUtensorMap qo, ko, vo, oo, qs, ks, vs, os;
  TRY(wg_tensor_map(&ko, k, dt, bh, tk, DH, OWN, op));
  TRY(wg_tensor_map(&vo, v, dt, bh, tk, DH, OWN, op));
  TRY(wg_tensor_map(&qs, q, dt, bh, tq, DH, BS, op));
  TRY(wg_tensor_map(&os, dout, dt, bh, tq, DH, BS, op));
  TRY(wg_tensor_map(&qo, q, dt, bh, tq, DH, OWN, op));
  TRY(wg_tensor_map(&oo, dout, dt, bh, tq, DH, OWN, op));
  TRY(wg_tensor_map(&ks, k, dt, bh, tk, DH, BS, op));
  TRY(wg_tensor_map(&vs, v, dt, bh, tk, DH, BS, op));
  size_t smem = 1024 + 2 * (size_t)Z::OWNB + 2 * NST * (size_t)Z::SB;
  CHECK_CUDA(cudaFuncSetAttribute(flash_dkdv_wg<T, DH>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  CHECK_CUDA(cudaFuncSetAttribute(flash_dq_wg<T, DH>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  dim3 g1((tk + OWN - 1) / OWN, bh), g2((tq + OWN - 1) / OWN, bh);
  flash_dkdv_wg<T, DH><<<g1, WG_THREADS, smem, cuda_stream(e)>>>(
      qs, ko, vo, os, lse, D, (T *)dk, (T *)dv, tq, tk, causal, scale, sl2);
  CHECK_LAUNCH();
  flash_dq_wg<T, DH><<<g2, WG_THREADS, smem, cuda_stream(e)>>>(
      qo, ks, vs, oo, lse, D, (T *)dq, tq, tk, causal, scale, sl2);
  CHECK_LAUNCH();
  return 0;
}

}  // namespace

int cuda_flash_bwd_wgmma(engine *e, const void *q, const void *k,
                         const void *v, const void *dout, const float *lse,
                         const float *D, void *dq, void *dk, void *dv, int bh,
                         int tq, int tk, int dh, int causal, float scale,
                         float scale_log2, dtype dt) {
#define WG_BWD_CASE(DT, T, DH)                                                \
  if (dt == DT && dh == DH)                                                   \
    return launch<T, DH>(e, q, k, v, dout, lse, D, dq, dk, dv, bh, tq, tk,    \
                         causal, scale, scale_log2, dt);
  WG_BWD_CASE(DT_BF16, __nv_bfloat16, 64)
  WG_BWD_CASE(DT_BF16, __nv_bfloat16, 80)
  WG_BWD_CASE(DT_BF16, __nv_bfloat16, 128)
  WG_BWD_CASE(DT_F16, __half, 64)
  WG_BWD_CASE(DT_F16, __half, 80)
  WG_BWD_CASE(DT_F16, __half, 128)
#undef WG_BWD_CASE
  FAIL(ERR_FAIL, "k_attention_bwd: the wgmma kernels take bf16 / f16 at head "
       "dims 64, 80 and 128 (got %s, dh=%d)", dtype_name(dt), dh);
}
