/* FlashAttention-2 forward on the GPU: O [BH, Tq, Dh] and the logsumexp
 * L [BH, Tq] (fp32) from Q [BH, Tq, Dh], K and V [BH, Tk, Dh].
 *
 * One block per (query tile of BQ rows, head). It walks the key tiles with
 * the online softmax (m = running max, l = running sum, in the log2
 * domain: s = scale * log2(e) * q.k):
 *   m' = max(m, rowmax s);  p = 2^(s - m');  l = 2^(m - m') l + rowsum p
 *   O = 2^(m - m') O + p V;     at the end O /= l, L = (m + log2 l) ln 2
 * Causal: the walk stops after the tile holding the block's last query
 * (tiles wholly above the diagonal are never loaded); only tiles that cross
 * the diagonal, or run past Tk, compare indices. Any Tq, Tk: rows past the
 * end load as zeros and are masked (keys) or not stored (queries).
 *
 * bf16 / f16: tensor cores (mma.sync m16n8k16, fp32 accumulators), 4 warps
 * of 16 or 32 query rows, key tiles of 64 or 32 (mma_cfg) double-buffered with cp.async; P goes
 * from the S accumulators to the PV product in registers (flash_common.cuh).
 * fp32 with TF32 or 3xTF32 products (the engine's setting, kernels.h): the
 * same kernel on mma.sync m16n8k8 from TF32 parts of each operand, split
 * in registers as they are read (flash_common.cuh), V's rows padded by 4
 * floats so its column reads are conflict-free; what 3xTF32 does is what
 * PyTorch's fp32 SDPA (CUTLASS's memory-efficient kernel) does on Ampere
 * and later. True fp32 (the default): the same algorithm on CUDA cores,
 * 32 x 32 tiles in shared memory, 4 threads per query row. Head dims 16,
 * 32, 64, 80, 128. */
#include "kernels/cuda/flash_common.cuh"
#include "kernels/cuda/flash_cut.cuh"

namespace {

/* Tile shapes of the tensor-core kernel: 4 warps of MT m-tiles (16 query
 * rows each), key tiles of BK, Q in registers (QREG, 16-bit only) or
 * re-read from shared memory per key tile. MT 2 halves the shared-memory
 * reads per product but halves the blocks too, which short sequences
 * feel. Chosen per head dim from timings of each variant on the H100
 * (bf16, causal; README, Attention): MT 2 takes Dh 64 at 16 heads x 16384
 * from 2.68 to 2.36 ms and Dh 128 at 65536 from 5.7 to 3.8 ms; at Dh 80 on
 * 128 heads x 512 (the 2.7B model) MT 1 is as fast and keeps more blocks;
 * Dh 16 / 32 stay at MT 1 (within 4% at 65536, twice the blocks at short
 * lengths). BK 64 spills registers at Dh 128 with MT 2. fp32 on TF32
 * parts: one m-tile (an fp32 operand takes twice the registers and shared
 * memory); key tiles of 32 at Dh 128, where S's registers give way to
 * O's, shared memory staying near 100 KB, two blocks an SM. */
constexpr int MMA_WARPS = 4;
template <typename T, int DH> struct mma_cfg {
  static constexpr int MT = DH == 64 || DH == 128 ? 2 : 1;
  static constexpr int BK = DH >= 128 ? 32 : 64;
  static constexpr bool QREG = MT == 2 && DH <= 80;
};
template <int DH> struct mma_cfg<float, DH> {
  static constexpr int MT = 1;
  static constexpr int BK = DH >= 128 ? 32 : 64;
  static constexpr bool QREG = false;
};

/* X3 (fp32 only): 3xTF32 products, else TF32's (flash_common.cuh). CUT:
 * compiled for a cut launch (flash_cut.cuh; cut.us > 0): unit blockIdx.x
 * walks one chunk of its query tile's key tiles, and a cut tile's chunks
 * write O (fp32, normalised over the chunk) and the logsumexp (log2 units)
 * to the partials, which flash_fwd_merge combines; the uncut instance
 * folds that away. */
template <typename T, int DH, int MT, int MMA_BK, bool QREG, bool X3, bool CUT>
__global__ void __launch_bounds__(MMA_WARPS * 32)
    flash_fwd_mma(const T *__restrict__ q, const T *__restrict__ k,
                  const T *__restrict__ v, T *__restrict__ o,
                  float *__restrict__ lse, float *__restrict__ part_o,
                  float *__restrict__ part_l, walk_cut cut,
                  fwd_walks_t<MMA_BK> fw, int tq, int tk, int causal,
                  float scale_log2) {
  typedef warp_mma<T, X3> M;
  constexpr int LD = DH + 8, LDV = DH + M::VPAD, NT = MMA_WARPS * 32,
                BQ = 16 * MT * MMA_WARPS, NS = MMA_BK / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *sq = reinterpret_cast<T *>(smem_raw);
  T *sk = sq + BQ * LD;            /* two buffers of MMA_BK rows */
  T *sv = sk + 2 * MMA_BK * LD;    /* two buffers of MMA_BK rows, stride LDV */

  /* Causal: the last query tiles have the most key tiles; start them
   * first, so the short ones fill the tail. Unit u: chunk kc of walk x,
   * query tile nq - 1 - x (uncut: u = x, the grid's extent nq). */
  int b = blockIdx.y, u = blockIdx.x, x = u, kc = 0, slot = 0;
  if constexpr (CUT) cut_unit(cut, fw, u, &x, &kc, &slot);
  int q0 = CUT ? (fw.nq - 1 - x) * BQ : (int)((gridDim.x - 1 - blockIdx.x) * BQ);
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  int wq0 = q0 + w * 16 * MT;     /* this warp's first query row */
  q += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;

  int kend = causal ? min(tk, q0 + BQ) : tk;
  int walk = (kend + MMA_BK - 1) / MMA_BK;   /* fw.walk(x) */
  /* this unit's key tiles: jb .. jb + ntiles - 1 */
  int jb = CUT ? kc * cut.C : 0;
  int ntiles = CUT ? min(walk, jb + cut.C) - jb : walk;
  /* a cut tile: this unit's partial goes to its slot */
  bool partial = CUT && walk > cut.C;
  size_t pslot = (size_t)b * cut.us + slot;

  load_tile<T, DH, NT>(sq, q, q0, BQ, tq);
  load_tile<T, DH, NT>(sk, k, jb * MMA_BK, MMA_BK, tk);
  load_tile<T, DH, NT, LDV>(sv, v, jb * MMA_BK, MMA_BK, tk);
  cp_async_commit();

  float acc[MT][DH / 8][4];
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int n = 0; n < DH / 8; n++)
      acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;
  float mrow[MT][2], lsum[MT][2];
#pragma unroll
  for (int m = 0; m < MT; m++)
    mrow[m][0] = mrow[m][1] = -INFINITY, lsum[m][0] = lsum[m][1] = 0.f;
  uint32_t qa[QREG ? MT : 1][QREG ? DH / 16 : 1][4];

  for (int j = 0; j < ntiles; j++) {
    int buf = j & 1, k0 = (jb + j) * MMA_BK;
    if (j + 1 < ntiles) {   /* the next tile streams in while this one runs */
      load_tile<T, DH, NT>(sk + (buf ^ 1) * MMA_BK * LD, k, k0 + MMA_BK, MMA_BK, tk);
      load_tile<T, DH, NT, LDV>(sv + (buf ^ 1) * MMA_BK * LDV, v, k0 + MMA_BK, MMA_BK, tk);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if constexpr (QREG)
      if (j == 0) load_a<T, MT, DH>(qa, sq + w * 16 * MT * LD, LD);
    const T *kt = sk + buf * MMA_BK * LD, *vt = sv + buf * MMA_BK * LDV;

    /* Causal: a key tile wholly after this warp's last row adds nothing
     * (the block's other warps may still need it; with key tiles as long
     * as the block's query tile, that never happens). */
    if (MMA_BK >= BQ || !(causal && k0 > wq0 + 16 * MT - 1)) {
      float s[MT][NS][4];
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NS; n++)
          s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.f;
      if constexpr (QREG)
        warp_abt_r<T, MT, NS, DH>(s, qa, kt, LD);
      else
        M::template abt<MT, NS, DH>(s, sq + w * 16 * MT * LD, kt, LD);

#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) s[m][n][e] *= scale_log2;
      /* Only tiles that cross the diagonal or the end compare indices (a
       * branch of its own: most tiles skip it). */
      if (k0 + MMA_BK > tk || (causal && k0 + MMA_BK - 1 > wq0)) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
          for (int n = 0; n < NS; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
              int col = k0 + n * 8 + 2 * t + (e & 1),
                  r = wq0 + m * 16 + g + 8 * (e >> 1);
              if (col >= tk || (causal && col > r)) s[m][n][e] = -INFINITY;
            }
      }
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          float mx = mrow[m][h];
#pragma unroll
          for (int n = 0; n < NS; n++)
            mx = fmaxf(mx, fmaxf(s[m][n][2 * h], s[m][n][2 * h + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
          /* A row that has seen only masked keys so far keeps max -inf;
           * use 0 as its reference so exp2 gives 0, not NaN. */
          float ref = mx == -INFINITY ? 0.f : mx;
          float alpha = exp2f(mrow[m][h] - ref), sum = 0.f;
#pragma unroll
          for (int n = 0; n < NS; n++) {
            s[m][n][2 * h] = exp2f(s[m][n][2 * h] - ref);
            s[m][n][2 * h + 1] = exp2f(s[m][n][2 * h + 1] - ref);
            sum += s[m][n][2 * h] + s[m][n][2 * h + 1];
          }
          lsum[m][h] = lsum[m][h] * alpha + sum;   /* per thread; summed at the end */
          mrow[m][h] = mx;
#pragma unroll
          for (int n = 0; n < DH / 8; n++) {
            acc[m][n][2 * h] *= alpha;
            acc[m][n][2 * h + 1] *= alpha;
          }
        }
      M::template cb<MT, NS, DH>(acc, s, vt, LDV);
    }
    __syncthreads();   /* the buffer is refilled next iteration */
  }

#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float sum = lsum[m][h];
      sum += __shfl_xor_sync(FULL_MASK, sum, 1);
      sum += __shfl_xor_sync(FULL_MASK, sum, 2);
      float inv = 1.f / sum;
      int r = wq0 + m * 16 + g + 8 * h;
      if (partial) {
        if (r < tq)
          fwd_partial_row<DH, BQ>(part_o, part_l, pslot, r - q0, t, sum, mrow[m][h],
                                  [&](int n) {
                                    return make_float2(acc[m][n][2 * h], acc[m][n][2 * h + 1]);
                                  });
      } else if (r < tq) {
        T *orow = o + ((size_t)b * tq + r) * DH;
#pragma unroll
        for (int n = 0; n < DH / 8; n++)
          M::store2(orow + n * 8 + 2 * t, acc[m][n][2 * h] * inv,
                    acc[m][n][2 * h + 1] * inv);
        if (t == 0) lse[(size_t)b * tq + r] = (mrow[m][h] + log2f(sum)) * FLASH_LN2;
      }
    }
}

/* ---- fp32 on CUDA cores ------------------------------------------------------- */

constexpr int SIMT_B = 32, SIMT_THREADS = 128;

/* Thread (r = tid / 4, u = tid % 4) owns query row r of the tile and the
 * output columns u, u+4, ...; scores are computed BK/4 per thread (keys
 * u, u+4, ...) and shared through sp. Key tiles of 16 at Dh 128 keep the
 * static shared memory under 48 KB. */
template <typename T, int DH, int BK = (DH >= 128 ? 16 : SIMT_B)>
__global__ void __launch_bounds__(SIMT_THREADS)
    flash_fwd_simt(const T *__restrict__ q, const T *__restrict__ k,
                   const T *__restrict__ v, T *__restrict__ o,
                   float *__restrict__ lse, int tq, int tk, int causal,
                   float scale_log2) {
  __shared__ float sq[SIMT_B][DH + 1], sk[BK][DH + 1], sv[BK][DH];
  __shared__ float sp[SIMT_B][BK + 1];
  int b = blockIdx.y, q0 = blockIdx.x * SIMT_B;
  int r = threadIdx.x >> 2, u = threadIdx.x & 3, row = q0 + r;
  q += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;
  for (int x = threadIdx.x; x < SIMT_B * DH; x += SIMT_THREADS) {
    int rr = x / DH, d = x % DH;
    sq[rr][d] = q0 + rr < tq ? elt<T>::load(q[(size_t)(q0 + rr) * DH + d]) : 0.f;
  }
  float acc[DH / 4];
#pragma unroll
  for (int d = 0; d < DH / 4; d++) acc[d] = 0.f;
  float m = -INFINITY, lsum = 0.f;
  int kend = causal ? min(tk, q0 + SIMT_B) : tk;
  for (int k0 = 0; k0 < kend; k0 += BK) {
    __syncthreads();
    simt_load2<T, BK, DH, SIMT_THREADS>(sk, sv, k, v, k0, tk);
    __syncthreads();
    float s[BK / 4], mx = m;
#pragma unroll
    for (int i = 0; i < BK / 4; i++) {
      int c = u + 4 * i, col = k0 + c;
      float dot = 0.f;
#pragma unroll 8
      for (int d = 0; d < DH; d++) dot = fmaf(sq[r][d], sk[c][d], dot);
      s[i] = col >= tk || (causal && col > row) ? -INFINITY : dot * scale_log2;
      mx = fmaxf(mx, s[i]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
    float ref = mx == -INFINITY ? 0.f : mx;
    float alpha = exp2f(m - ref), sum = 0.f;
#pragma unroll
    for (int i = 0; i < BK / 4; i++) {
      float p = exp2f(s[i] - ref);
      sum += p;
      sp[r][u + 4 * i] = p;
    }
    lsum = lsum * alpha + sum;
    m = mx;
    __syncwarp();   /* a row's 4 threads share a warp: sp row is ready */
#pragma unroll
    for (int d = 0; d < DH / 4; d++) {
      float a = acc[d] * alpha;
      for (int c = 0; c < BK; c++) a = fmaf(sp[r][c], sv[c][u + 4 * d], a);
      acc[d] = a;
    }
  }
  lsum += __shfl_xor_sync(FULL_MASK, lsum, 1);
  lsum += __shfl_xor_sync(FULL_MASK, lsum, 2);
  if (row < tq) {
    float inv = 1.f / lsum;
    T *orow = o + ((size_t)b * tq + row) * DH;
#pragma unroll
    for (int d = 0; d < DH / 4; d++) orow[u + 4 * d] = elt<T>::store(acc[d] * inv);
    if (u == 0) lse[(size_t)b * tq + row] = (m + log2f(lsum)) * FLASH_LN2;
  }
}

/* The walks and the cut of the tensor-core forward at these sizes (the
 * tests count its chunks through cuda_flash_fwd_mma_chunks). */
template <typename T, int DH, bool X3>
int fwd_mma_plan(engine *e, int bh, int tq, int tk, int causal,
                 fwd_walks_t<mma_cfg<T, DH>::BK> *fw, size_t *smem,
                 walk_cut *cut) {
  typedef mma_cfg<T, DH> C;
  constexpr int BQ = 16 * C::MT * MMA_WARPS, BK = C::BK;
  *smem = ((size_t)(BQ + 2 * BK) * (DH + 8) +
           (size_t)2 * BK * (DH + warp_mma<T, X3>::VPAD)) * sizeof(T);
  *fw = {(tq + BQ - 1) / BQ, BQ, tk, causal};
  const int key[] = {mma_cut_key<T, X3>(2), bh, tq, tk, DH * 2 + !!causal};
  return plan_cut_blocks(e, flash_fwd_mma<T, DH, C::MT, BK, C::QREG, X3, false>,
                         MMA_WARPS * 32, *smem, key, *fw, fw->nq, bh,
                         (long long)BQ * (DH + 1) * 4, cut);
}

template <typename T, int DH, bool X3 = false>
int launch_mma(engine *e, const void *q, const void *k, const void *v,
               void *o, float *lse, int bh, int tq, int tk, int causal,
               float scale_log2) {
  typedef mma_cfg<T, DH> C;
  constexpr int BQ = 16 * C::MT * MMA_WARPS;
  fwd_walks_t<C::BK> fw;
  size_t smem;
  walk_cut cut;
  TRY((fwd_mma_plan<T, DH, X3>(e, bh, tq, tk, causal, &fw, &smem, &cut)));
  auto kernel = cut.us > 0 ? flash_fwd_mma<T, DH, C::MT, C::BK, C::QREG, X3, true>
                           : flash_fwd_mma<T, DH, C::MT, C::BK, C::QREG, X3, false>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  float *part_o, *part_l;
  TRY(fwd_cut_partials(e, cut, bh, BQ, DH, &part_o, &part_l));
  kernel<<<dim3(cut.units, bh), MMA_WARPS * 32, smem, cuda_stream(e)>>>(
      (const T *)q, (const T *)k, (const T *)v, (T *)o, lse, part_o, part_l, cut,
      fw, tq, tk, causal, scale_log2);
  CHECK_LAUNCH();
  return fwd_cut_merge<T, DH, BQ>(e, cut, fw, part_o, part_l, o, lse, bh, tq);
}

template <typename T, int DH>
int launch_simt(engine *e, const void *q, const void *k, const void *v,
                void *o, float *lse, int bh, int tq, int tk, int causal,
                float scale_log2) {
  dim3 grid((tq + SIMT_B - 1) / SIMT_B, bh);
  flash_fwd_simt<T, DH><<<grid, SIMT_THREADS, 0, cuda_stream(e)>>>(
      (const T *)q, (const T *)k, (const T *)v, (T *)o, lse, tq, tk, causal,
      scale_log2);
  CHECK_LAUNCH();
  return 0;
}

/* flash_dispatch's ops: the launch, and its cut's chunks (1: CUDA cores, never cut) */
struct fwd_launch {
  template <typename T, int D, bool X3>
  static int mma(engine *e, const void *q, const void *k, const void *v,
                 void *o, float *lse, int bh, int tq, int tk, int causal,
                 float sl2) {
    return launch_mma<T, D, X3>(e, q, k, v, o, lse, bh, tq, tk, causal, sl2);
  }
  template <typename T, int D>
  static int simt(engine *e, const void *q, const void *k, const void *v,
                  void *o, float *lse, int bh, int tq, int tk, int causal,
                  float sl2) {
    return launch_simt<T, D>(e, q, k, v, o, lse, bh, tq, tk, causal, sl2);
  }
};
struct fwd_chunks {
  template <typename T, int D, bool X3>
  static int mma(engine *e, int bh, int tq, int tk, int causal) {
    fwd_walks_t<mma_cfg<T, D>::BK> fw;
    size_t smem;
    walk_cut cut;
    TRY((fwd_mma_plan<T, D, X3>(e, bh, tq, tk, causal, &fw, &smem, &cut)));
    return cut.nc;
  }
  template <typename T, int D>
  static int simt(engine *, int, int, int, int) { return 1; }
};

}  // namespace

int cuda_flash_fwd(engine *e, const void *q, const void *k, const void *v,
                   void *o, float *lse, int bh, int tq, int tk, int dh,
                   int causal, float scale, dtype dt) {
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(o))
    FAIL(ERR_FAIL, "k_attention_fwd: flash on the GPU needs 16-byte aligned "
         "q, k, v, o");
  if (bh > 65535)
    FAIL(ERR_FAIL, "k_attention_fwd: bh=%d heads (allowed: <= 65535)", bh);
  float sl2 = scale * FLASH_LOG2E;
  if (cuda_impl(e)->wgmma && dt != DT_F32 &&
      (dh == 64 || dh == 80 || dh == 128))
    return cuda_flash_fwd_wgmma(e, q, k, v, o, lse, bh, tq, tk, dh, causal,
                                sl2, dt);
  return flash_dispatch<fwd_launch>(e, "k_attention_fwd", dt, dh, q, k, v, o, lse,
                                    bh, tq, tk, causal, sl2);
}

int cuda_flash_fwd_mma_chunks(engine *e, int bh, int tq, int tk, int dh,
                              int causal, dtype dt) {
  return flash_dispatch<fwd_chunks>(e, "cuda_flash_fwd_mma_chunks", dt, dh, bh, tq,
                                    tk, causal);
}
