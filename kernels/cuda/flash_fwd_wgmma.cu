/* FlashAttention-2 forward on Hopper's warpgroup products (wgmma): the
 * same algorithm and outputs as flash_fwd.cu's tensor-core kernel (O and
 * the logsumexp L from Q, K, V; online softmax in the log2 domain; causal
 * walks stop at the diagonal and only crossing tiles compare indices), for
 * bf16 / f16 at head dims 64 and 128 on sm_90.
 *
 * One block of NWG warpgroups per (query tile of 64 * NWG rows, head).
 * Each warpgroup owns 64 query rows: S = Q K^T is one m64nBK product per
 * 16 of Dh with Q and K read by the tensor cores from swizzled shared
 * memory (wgmma.cuh); P stays in the S registers (c_to_a) and O += P V
 * reads V row-major (MN-major B), so nothing is transposed. K and V tiles
 * are double-buffered with cp.async by all threads. Why not mma.sync
 * (flash_fwd.cu): there the warp's ldmatrix reads of K and V cap the
 * tensor cores; a wgmma reads its B operand once for 64 rows. */
#include "kernels/cuda/wgmma.cuh"

namespace {

constexpr int NWG = 2, WG_THREADS = 128 * NWG, BQ = 64 * NWG;

template <typename T, int DH, int BK, int MINB>
__global__ void __launch_bounds__(WG_THREADS, MINB)
    flash_fwd_wg(const T *__restrict__ q, const T *__restrict__ k,
                 const T *__restrict__ v, T *__restrict__ o,
                 float *__restrict__ lse, int tq, int tk, int causal,
                 float scale_log2) {
#if TL_WGMMA
  constexpr int QBYTES = BQ * DH * 2, KBYTES = BK * DH * 2;
  extern __shared__ unsigned char smem_raw[];
  /* The swizzle needs 1024-byte aligned blocks (launch adds the slack). */
  unsigned char *sq =
      smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char *sk = sq + QBYTES;       /* two buffers */
  unsigned char *sv = sk + 2 * KBYTES;   /* two buffers */

  int b = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * BQ;
  int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, l = threadIdx.x & 31,
      g = l >> 2, t = l & 3;
  int wq0 = q0 + wg * 64;               /* this warpgroup's first row */
  q += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;

  int kend = causal ? min(tk, q0 + BQ) : tk;
  int ntiles = (kend + BK - 1) / BK;
  /* Causal: key tiles wholly after this warpgroup's last row add nothing
   * (the other warpgroup may still need them): it stops after `mine`. */
  int mine = causal ? min(ntiles, (wq0 + 63) / BK + 1) : ntiles;

  /* Loads run one tile ahead, V one behind K: iteration j reads K_j and
   * V_{j-1} (the product of P_{j-1}), and fetches K_{j+1} and V_j. */
  load_tile_sw128<T, DH, WG_THREADS>(sq, q, q0, BQ, tq);
  load_tile_sw128<T, DH, WG_THREADS>(sk, k, 0, BK, tk);
  cp_async_commit();

  float acc[DH / 2];
#pragma unroll
  for (int i = 0; i < DH / 2; i++) acc[i] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.f, 0.f};
  uint32_t pa[BK / 16][4];   /* P of the previous tile, product inputs */

  for (int j = 0; j < ntiles; j++) {
    int k0 = j * BK;
    if (j + 1 < ntiles)
      load_tile_sw128<T, DH, WG_THREADS>(sk + ((j + 1) & 1) * KBYTES, k,
                                         k0 + BK, BK, tk);
    load_tile_sw128<T, DH, WG_THREADS>(sv + (j & 1) * KBYTES, v, k0, BK, tk);
    cp_async_commit();
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    const unsigned char *kt = sk + (j & 1) * KBYTES,
                        *vprev = sv + ((j - 1) & 1) * KBYTES;

    if (j < mine) {
      /* S = Q K_j^T, then O += P_{j-1} V_{j-1} behind it: the tensor cores
       * run the second while this warpgroup's softmax works on S. */
      float s[BK / 2];
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < DH / 16; kk++) {
        uint32_t ko = (kk & 3) * 32;   /* 16 elements inside a block */
        uint64_t da = wg_desc(sq + (kk >> 2) * BQ * 128 + wg * 64 * 128 + ko, 16, 1024);
        uint64_t db = wg_desc(kt + (kk >> 2) * BK * 128 + ko, 16, 1024);
        wgmma<T, BK>::ss(s, da, db, kk > 0);
      }
      wg_commit();
      if (j > 0) {
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++)
          wgmma<T, DH>::rs(acc, pa[kk], wg_desc(vprev + kk * 16 * 128, BK * 128, 1024));
        wg_commit();
        wg_wait<1>();
      } else {
        wg_wait<0>();
      }
      wg_hold<BK / 2>(s);

      /* s[4i + e]: row 16w + g + 8 (e >> 1), key k0 + 8i + 2t + (e & 1).
       * Raw dot products; the scale goes into the exponent's FMA. */
      if (k0 + BK > tk || (causal && k0 + BK - 1 > wq0)) {
#pragma unroll
        for (int i = 0; i < BK / 2; i++) {
          int col = k0 + 8 * (i >> 2) + 2 * t + (i & 1),
              r = wq0 + 16 * w + g + 8 * ((i >> 1) & 1);
          if (col >= tk || (causal && col > r)) s[i] = -INFINITY;
        }
      }
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float mx = mrow[h];
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
          mx = fmaxf(mx, fmaxf(s[4 * n + 2 * h], s[4 * n + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
        /* A row that has seen only masked keys keeps max -inf; 0 as its
         * reference gives exp2 = 0, not NaN. */
        float ref = mx == -INFINITY ? 0.f : mx * scale_log2, sum = 0.f;
        alpha[h] = exp2f(mrow[h] * scale_log2 - ref);
#pragma unroll
        for (int n = 0; n < BK / 8; n++) {
          s[4 * n + 2 * h] = exp2f(fmaf(s[4 * n + 2 * h], scale_log2, -ref));
          s[4 * n + 2 * h + 1] = exp2f(fmaf(s[4 * n + 2 * h + 1], scale_log2, -ref));
          sum += s[4 * n + 2 * h] + s[4 * n + 2 * h + 1];
        }
        lsum[h] = lsum[h] * alpha[h] + sum;   /* per thread; summed at the end */
        mrow[h] = mx;
      }
      wg_wait<0>();            /* O += P_{j-1} V_{j-1} is in */
      wg_hold<DH / 2>(acc);
#pragma unroll
      for (int n = 0; n < DH / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[4 * n + e] *= alpha[e >> 1];
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++)
        c_to_a<T>(pa[kk], s + 8 * kk, s + 8 * kk + 4);
    } else if (j == mine) {    /* causal: this warpgroup's last product */
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++)
        wgmma<T, DH>::rs(acc, pa[kk], wg_desc(vprev + kk * 16 * 128, BK * 128, 1024));
      wg_commit();
      wg_wait<0>();
      wg_hold<DH / 2>(acc);
    }
    __syncthreads();   /* buffers are refilled next iteration */
  }
  if (mine == ntiles) {    /* the last tile's P V: its V is the last load */
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    const unsigned char *vlast = sv + ((ntiles - 1) & 1) * KBYTES;
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++)
      wgmma<T, DH>::rs(acc, pa[kk], wg_desc(vlast + kk * 16 * 128, BK * 128, 1024));
    wg_commit();
    wg_wait<0>();
    wg_hold<DH / 2>(acc);
  }

#pragma unroll
  for (int h = 0; h < 2; h++) {
    float sum = lsum[h];
    sum += __shfl_xor_sync(FULL_MASK, sum, 1);
    sum += __shfl_xor_sync(FULL_MASK, sum, 2);
    float inv = 1.f / sum;
    int r = wq0 + 16 * w + g + 8 * h;
    if (r < tq) {
      T *orow = o + ((size_t)b * tq + r) * DH;
#pragma unroll
      for (int n = 0; n < DH / 8; n++)
        *reinterpret_cast<uint32_t *>(orow + n * 8 + 2 * t) =
            elt<T>::pack(acc[4 * n + 2 * h] * inv, acc[4 * n + 2 * h + 1] * inv);
      if (t == 0)
        lse[(size_t)b * tq + r] = (mrow[h] * scale_log2 + log2f(sum)) * FLASH_LN2;
    }
  }
#else
  __trap();
#endif
}

template <typename T, int DH, int BK, int MINB>
int launch_bk(engine *e, const void *q, const void *k, const void *v, void *o,
              float *lse, int bh, int tq, int tk, int causal, float sl2) {
  size_t smem = 1024 + (size_t)(BQ + 4 * BK) * DH * sizeof(T);
  CHECK_CUDA(cudaFuncSetAttribute(flash_fwd_wg<T, DH, BK, MINB>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  dim3 grid((tq + BQ - 1) / BQ, bh);
  flash_fwd_wg<T, DH, BK, MINB><<<grid, WG_THREADS, smem, cuda_stream(e)>>>(
      (const T *)q, (const T *)k, (const T *)v, (T *)o, lse, tq, tk, causal,
      sl2);
  CHECK_LAUNCH();
  return 0;
}

/* Key tiles of 128 at both head dims: measured against 64 (two blocks an
 * SM, H100, bf16 causal, batch 1 x 1 head): 369 vs 332 TFLOP/s at Dh 128
 * and 260 vs 264 at Dh 64 on 65536; 2.13 vs 2.11 ms on the leaderboard. */
template <typename T, int DH>
int launch(engine *e, const void *q, const void *k, const void *v, void *o,
           float *lse, int bh, int tq, int tk, int causal, float sl2) {
  return launch_bk<T, DH, 128, 1>(e, q, k, v, o, lse, bh, tq, tk, causal, sl2);
}

}  // namespace

int cuda_flash_fwd_wgmma(engine *e, const void *q, const void *k,
                         const void *v, void *o, float *lse, int bh, int tq,
                         int tk, int dh, int causal, float scale_log2,
                         dtype dt) {
  if (dt == DT_BF16 && dh == 64)
    return launch<__nv_bfloat16, 64>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2);
  if (dt == DT_BF16 && dh == 128)
    return launch<__nv_bfloat16, 128>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2);
  if (dt == DT_F16 && dh == 64)
    return launch<__half, 64>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2);
  if (dt == DT_F16 && dh == 128)
    return launch<__half, 128>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2);
  FAIL(ERR_FAIL, "k_attention_fwd: the wgmma kernel takes bf16 / f16 at head "
       "dims 64 and 128 (got %s, dh=%d)", dtype_name(dt), dh);
}
