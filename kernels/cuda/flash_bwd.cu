/* FlashAttention-2 backward on the GPU: dQ, dK, dV [.., Dh] (dtype of the
 * inputs) from Q, K, V, O, dO and the forward's logsumexp L (fp32).
 *
 *   D_i = rowsum(dO_i * O_i)                            (flash_bwd_d)
 *   P_ij = exp(scale q_i.k_j - L_i)  (recomputed, never stored)
 *   dV_j = sum_i P_ij dO_i;  dP_ij = dO_i.v_j;  dS_ij = P_ij (dP_ij - D_i)
 *   dK_j = scale sum_i dS_ij q_i;  dQ_i = scale sum_j dS_ij k_j
 *
 * Two passes and no atomics, so results repeat bit for bit: a dK/dV kernel
 * where a block owns a key tile and walks the query tiles that can see it
 * (causal: from the tile holding its first key on), and a dQ kernel where a
 * block owns a query tile and walks its key tiles (causal: up to the
 * diagonal). Each recomputes P and dS for its pairs, which costs the
 * products S and dP twice; in exchange nothing is summed across blocks.
 * With few tiles a head either kernel's walks may be cut into chunks
 * (flash_cut.cuh), whose fp32 partials flash_sum_merge sums in chunk
 * order, so the results still repeat bit for bit.
 *
 * bf16 / f16: tensor cores, one warp per 16 or 32 rows of the owned tile
 * (dkdv_cfg, dq_cfg), P^T and dS^T (or dS) passed from accumulators to the
 * next product in registers, the streamed tiles double-buffered with
 * cp.async. fp32 with TF32 or 3xTF32 products (the engine's setting): the
 * dK/dV kernel on TF32 parts (flash_fwd.cu says how), which computes dQ
 * too in the same pass and adds it into dq atomically (dq_fused); every
 * tile's rows padded by 8 floats (conflict-free as the products' A or B;
 * the tiles also read as P^T dO's or dS K's B, Q and dO or K, take
 * two-way conflicts there). True fp32 (the default): CUDA cores, 4 threads per
 * owned row. Head dims 16, 32, 64, 80, 128. D lives in the engine's
 * workspace (bh * Tq floats). */
#include "kernels/cuda/flash_common.cuh"
#include "kernels/cuda/flash_cut.cuh"

namespace {

/* One warp per row: D = sum_d dO * O, in fp32. */
template <typename T>
__global__ void flash_bwd_d(const T *__restrict__ o, const T *__restrict__ dout,
                            float *__restrict__ D, long long rows, int dh) {
  long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const T *a = o + r * dh, *b = dout + r * dh;
  float s = 0.f;
  for (int d = threadIdx.x & 31; d < dh; d += 32)
    s += elt<T>::load(a[d]) * elt<T>::load(b[d]);
  s = warp_sum(s);
  if ((threadIdx.x & 31) == 0) D[r] = s;
}

/* Tile shapes of the tensor-core kernels: 4 warps, each owning MT m-tiles
 * (16 rows) of the owned tile, and streamed tiles of BS rows. The
 * accumulators (dK and dV, or dQ) plus the P and dS fragments of one
 * streamed tile must fit in 255 registers; within that, chosen per head
 * dim from measurements on the H100 (bf16, causal: Dh 64 at 16 heads x
 * 16384, Dh 80 at 128 x 512, Dh 128 at 1 x 65536). */
constexpr int MMA_WARPS = 4;
template <typename T, int DH> struct dkdv_cfg {
  static constexpr int MT = 1;
  static constexpr int BS = DH == 64 ? 128 : DH == 80 ? 32 : 64;
  static constexpr bool FDQ = false;
};
template <typename T, int DH> struct dq_cfg {
  static constexpr int MT = DH == 128 ? 2 : 1;
  static constexpr int BS = DH == 64 || DH == 80 || DH == 128 ? 32 : 64;
};
/* fp32 on TF32 parts: one m-tile, and streamed tiles as long as keep two
 * blocks an SM (shared memory (2 x 64 + 4 x BS) x (Dh + 8) floats <= ~110
 * KB) with the accumulators (dK and dV: Dh floats a thread) in registers. */
template <int DH> struct dkdv_cfg<float, DH> {
  static constexpr int MT = 1;
  static constexpr int BS = DH >= 128 ? 16 : DH >= 64 ? 32 : 64;
  /* dQ in this pass (dq_fused): its dS tile (BS x 72 floats) on top, so
   * Dh 64 streams 32 rows, not 64, to keep two blocks an SM */
  static constexpr bool FDQ = true;
};
template <int DH> struct dq_cfg<float, DH> : dkdv_cfg<float, DH> {};

/* x, y added into p[0], p[1] (global memory) atomically */
__device__ __forceinline__ void atomic_add2(float *p, float x, float y) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2 *>(p), make_float2(x, y));
#else
  atomicAdd(p, x);
  atomicAdd(p + 1, y);
#endif
}

/* dQ in the dK/dV pass (fp32 on TF32 parts): S and dP are computed once
 * for dK, dV and dQ, 5 products per (query, key) pair instead of the two
 * passes' 7. A block's warps hold dS^T of their 16 keys each; a tile's dS,
 * times the scale, goes to shared memory as [BQ queries][OWN keys], and
 * the four warps compute dS K (BQ x DH) between them, adding it into dq
 * (fp32, zeroed before the launch) with atomics. dq's sums arrive in any
 * order, so its last bits may differ from run to run, as the Hopper 16-bit
 * kernel's do (flash_bwd_wgmma.cu); dk and dv still repeat bit for bit. */
template <int BQ, int OWN> struct dq_fused {
  /* rows 8 floats past a multiple of 32: the product's 8-byte A reads are
   * conflict-free (warp_abt_f32's); put's stores take two ways */
  static constexpr int LDS = OWN + 8;
  static constexpr size_t bytes = (size_t)BQ * LDS * sizeof(float);
  /* warp w's dS^T (C fragments: key 16w + g + 8 (e >> 1), query
   * 8n + 2t + (e & 1)) into sds[query][key], times scale; zero: a warp
   * whose keys no query of the tile sees */
  static __device__ __forceinline__ void put(float *sds, const float ds[][BQ / 8][4],
                                             int w, float scale) {
    int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
#pragma unroll
    for (int n = 0; n < BQ / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        sds[(n * 8 + 2 * t + (e & 1)) * LDS + 16 * w + g + 8 * (e >> 1)] = ds[0][n][e] * scale;
  }
  static __device__ __forceinline__ void zero(float *sds, int w) {
    int l = threadIdx.x & 31;
    for (int x = l; x < BQ * 16; x += 32) sds[(x >> 4) * LDS + 16 * w + (x & 15)] = 0.f;
  }
  /* dq rows r0 .. r0 + BQ (those below tq) += sds (BQ x OWN) K (OWN x DH:
   * sk, row stride ld); the warps split the tile's m-tiles of queries,
   * then its n-tiles of DH */
  template <bool X3, int DH>
  static __device__ __forceinline__ void add(float *dq, const float *sds,
                                             const float *sk, int ld, int r0,
                                             int tq) {
    constexpr int MQ = BQ / 16, WM = MQ < MMA_WARPS ? MQ : MMA_WARPS,
                  WN = MMA_WARPS / WM, MTQ = MQ / WM, NQ = DH / 8 / WN;
    static_assert(MQ % WM == 0 && MMA_WARPS % WM == 0 && (DH / 8) % WN == 0,
                  "the warps split the dQ tile evenly");
    int w = threadIdx.x >> 5, wm = w / WN, wn = w % WN, l = threadIdx.x & 31,
        g = l >> 2, t = l & 3;
    float acc[MTQ][NQ][4];
#pragma unroll
    for (int m = 0; m < MTQ; m++)
#pragma unroll
      for (int n = 0; n < NQ; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[m][n][e] = 0.f;
    warp_ab_f32<X3, MTQ, NQ, OWN>(acc, sds + wm * MTQ * 16 * LDS, LDS,
                                  sk + wn * NQ * 8, ld);
#pragma unroll
    for (int m = 0; m < MTQ; m++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        int r = r0 + (wm * MTQ + m) * 16 + g + 8 * h;
        if (r >= tq) continue;
        float *rq = dq + (size_t)r * DH + wn * NQ * 8 + 2 * t;
#pragma unroll
        for (int n = 0; n < NQ; n++) atomic_add2(rq + n * 8, acc[m][n][2 * h], acc[m][n][2 * h + 1]);
      }
  }
};

/* dK, dV of one key tile of OWN rows; query tiles of BS stream by. X3
 * (fp32 only): 3xTF32 products, else TF32's (flash_common.cuh). FDQ
 * (fp32 only): dQ too, in the same pass (dq_fused says why and how). CUT:
 * compiled for a cut launch (flash_cut.cuh; cut.us > 0): unit blockIdx.x
 * walks one chunk of its key tile's query tiles, and a cut walk's chunks
 * write dV and dK (fp32) to the partials, which flash_sum_merge sums; the
 * uncut instance folds that away. */
template <typename T, int DH, int MT, int BQ, bool X3, bool FDQ, bool CUT>
__global__ void __launch_bounds__(MMA_WARPS * 32)
    flash_dkdv_mma(const T *__restrict__ q, const T *__restrict__ k,
                   const T *__restrict__ v, const T *__restrict__ dout,
                   const float *__restrict__ lse, const float *__restrict__ D,
                   T *__restrict__ dk, T *__restrict__ dv,
                   float *__restrict__ dq, float *__restrict__ part,
                   walk_cut cut, bwd_walks_t<16 * MT * MMA_WARPS> bw, int tq,
                   int tk, int causal, float scale, float scale_log2) {
  typedef warp_mma<T, X3> M;
  constexpr int LD = DH + 8, NT = MMA_WARPS * 32, OWN = 16 * MT * MMA_WARPS;
  static_assert(!FDQ || (sizeof(T) == 4 && MT == 1), "fused dQ: fp32, one m-tile");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *sk = reinterpret_cast<T *>(smem_raw);
  T *sv = sk + OWN * LD;
  T *sq = sv + OWN * LD;          /* two buffers of BQ rows each */
  T *sdo = sq + 2 * BQ * LD;
  float *sl = reinterpret_cast<float *>(sdo + 2 * BQ * LD);   /* 2 x BQ */
  float *sd = sl + 2 * BQ;
  float *sds = sd + 2 * BQ;       /* FDQ: the tile's dS, BQ x dq_fused::LDS */

  /* Causal: the first key tiles see the most query tiles; start them
   * first, so the short ones fill the tail. Unit blockIdx.x: chunk kc of
   * walk x, key tile x (uncut: x = blockIdx.x). */
  int b = blockIdx.y, x = blockIdx.x, kc = 0, slot = 0;
  if constexpr (CUT) cut_unit(cut, bw, (int)blockIdx.x, &x, &kc, &slot);
  int k0 = CUT ? x * OWN : (int)(blockIdx.x * OWN);
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  int wk0 = k0 + w * 16 * MT;     /* this warp's first key */
  q += (size_t)b * tq * DH;
  dout += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;
  lse += (size_t)b * tq;
  D += (size_t)b * tq;
  if constexpr (FDQ) dq += (size_t)b * tq * DH;

  int first = causal ? k0 / BQ : 0, last = (tq + BQ - 1) / BQ;
  /* a cut walk (bw.walk(x) tiles, past C): this unit's chunk of it, and
   * its partials to its slot */
  bool partial = false;
  if constexpr (CUT) {
    partial = last - first > cut.C;
    first += kc * cut.C;
    last = min(last, first + cut.C);
  }
  load_tile<T, DH, NT>(sk, k, k0, OWN, tk);
  load_tile<T, DH, NT>(sv, v, k0, OWN, tk);
  auto stream_in = [&](int it, int buf) {
    int r0 = it * BQ;
    load_tile<T, DH, NT>(sq + buf * BQ * LD, q, r0, BQ, tq);
    load_tile<T, DH, NT>(sdo + buf * BQ * LD, dout, r0, BQ, tq);
    for (int x = threadIdx.x; x < BQ; x += NT) {
      /* Rows past Tq: L = +inf makes their P exactly 0. */
      sl[buf * BQ + x] = r0 + x < tq ? lse[r0 + x] * FLASH_LOG2E : INFINITY;
      sd[buf * BQ + x] = r0 + x < tq ? D[r0 + x] : 0.f;
    }
  };
  if (first < last) stream_in(first, 0);
  cp_async_commit();

  float gk[MT][DH / 8][4], gv[MT][DH / 8][4];
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int n = 0; n < DH / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) gk[m][n][e] = gv[m][n][e] = 0.f;

  for (int it = first; it < last; it++) {
    int buf = (it - first) & 1, r0 = it * BQ;
    if (it + 1 < last) {
      stream_in(it + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T *qt = sq + buf * BQ * LD, *dot = sdo + buf * BQ * LD;
    const float *lt = sl + buf * BQ, *dt = sd + buf * BQ;

    /* Causal: queries wholly before this warp's first key see none of them. */
    bool sees = !(causal && r0 + BQ - 1 < wk0);
    if (sees) {
      float p[MT][BQ / 8][4], ds[MT][BQ / 8][4];
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < BQ / 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) p[m][n][e] = ds[m][n][e] = 0.f;
      M::template abt<MT, BQ / 8, DH>(p, sk + w * 16 * MT * LD, qt, LD);    /* S^T = K Q^T */
      M::template abt<MT, BQ / 8, DH>(ds, sv + w * 16 * MT * LD, dot, LD);  /* dP^T = V dO^T */
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < BQ / 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            p[m][n][e] = exp2f(p[m][n][e] * scale_log2 - lt[n * 8 + 2 * t + (e & 1)]);
      /* Only tiles that cross the diagonal compare indices (a branch of
       * its own: most tiles skip it). */
      if (causal && r0 < wk0 + 16 * MT) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
          for (int n = 0; n < BQ / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              if (r0 + n * 8 + 2 * t + (e & 1) < wk0 + m * 16 + g + 8 * (e >> 1))
                p[m][n][e] = 0.f;
      }
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < BQ / 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            ds[m][n][e] = p[m][n][e] * (ds[m][n][e] - dt[n * 8 + 2 * t + (e & 1)]);
      if constexpr (FDQ) dq_fused<BQ, OWN>::put(sds, ds, w, scale);
      M::template cb<MT, BQ / 8, DH>(gv, p, dot, LD);   /* dV += P^T dO */
      M::template cb<MT, BQ / 8, DH>(gk, ds, qt, LD);   /* dK += dS^T Q */
    } else if constexpr (FDQ) {
      dq_fused<BQ, OWN>::zero(sds, w);
    }
    if constexpr (FDQ) {
      __syncthreads();   /* every warp's dS is in */
      dq_fused<BQ, OWN>::template add<X3, DH>(dq, sds, sk, LD, r0, tq);
    }
    __syncthreads();
  }
  cp_async_wait<0>();   /* no query tile (causal, keys past Tq): K, V loads */

#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      int r = wk0 + m * 16 + g + 8 * h;
      if (r >= tk) continue;
      if (partial) {   /* slot: dV's OWN rows, then dK's */
        float *pv = part + (((size_t)b * cut.us + slot) * 2 * OWN + (r - k0)) * DH,
              *pk = pv + (size_t)OWN * DH;
#pragma unroll
        for (int n = 0; n < DH / 8; n++) {
          *reinterpret_cast<float2 *>(pv + n * 8 + 2 * t) =
              make_float2(gv[m][n][2 * h], gv[m][n][2 * h + 1]);
          *reinterpret_cast<float2 *>(pk + n * 8 + 2 * t) =
              make_float2(gk[m][n][2 * h] * scale, gk[m][n][2 * h + 1] * scale);
        }
        continue;
      }
      T *rk = dk + ((size_t)b * tk + r) * DH, *rv = dv + ((size_t)b * tk + r) * DH;
#pragma unroll
      for (int n = 0; n < DH / 8; n++) {
        M::store2(rk + n * 8 + 2 * t, gk[m][n][2 * h] * scale, gk[m][n][2 * h + 1] * scale);
        M::store2(rv + n * 8 + 2 * t, gv[m][n][2 * h], gv[m][n][2 * h + 1]);
      }
    }
}

/* dQ of one query tile of OWN rows; key tiles of BS stream by. CUT: as
 * the forward's (flash_fwd.cu): unit blockIdx.x walks one chunk of its
 * query tile's key tiles, and a cut tile's chunks write dQ (fp32) to the
 * partials, which flash_sum_merge sums. */
template <typename T, int DH, int MT, int BK, bool X3, bool CUT>
__global__ void __launch_bounds__(MMA_WARPS * 32)
    flash_dq_mma(const T *__restrict__ q, const T *__restrict__ k,
                 const T *__restrict__ v, const T *__restrict__ dout,
                 const float *__restrict__ lse, const float *__restrict__ D,
                 T *__restrict__ dq, float *__restrict__ part, walk_cut cut,
                 fwd_walks_t<BK> fw, int tq, int tk, int causal, float scale,
                 float scale_log2) {
  typedef warp_mma<T, X3> M;
  constexpr int LD = DH + 8, NT = MMA_WARPS * 32, OWN = 16 * MT * MMA_WARPS;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *sq = reinterpret_cast<T *>(smem_raw);
  T *sdo = sq + OWN * LD;
  T *sk = sdo + OWN * LD;         /* two buffers of BK rows each */
  T *sv = sk + 2 * BK * LD;

  /* Unit u: chunk kc of walk x, query tile nq - 1 - x (uncut: u = x). */
  int b = blockIdx.y, x = blockIdx.x, kc = 0, slot = 0;
  if constexpr (CUT) cut_unit(cut, fw, (int)blockIdx.x, &x, &kc, &slot);
  int q0 = CUT ? (fw.nq - 1 - x) * OWN : (int)((gridDim.x - 1 - blockIdx.x) * OWN);
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  int wq0 = q0 + w * 16 * MT;     /* this warp's first query row */
  q += (size_t)b * tq * DH;
  dout += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;

  int kend = causal ? min(tk, q0 + OWN) : tk;
  int walk = (kend + BK - 1) / BK;   /* fw.walk(x) */
  int jb = CUT ? kc * cut.C : 0;     /* this unit's key tiles from jb */
  int ntiles = CUT ? min(walk, jb + cut.C) - jb : walk;
  bool partial = CUT && walk > cut.C;
  load_tile<T, DH, NT>(sq, q, q0, OWN, tq);
  load_tile<T, DH, NT>(sdo, dout, q0, OWN, tq);
  load_tile<T, DH, NT>(sk, k, jb * BK, BK, tk);
  load_tile<T, DH, NT>(sv, v, jb * BK, BK, tk);
  cp_async_commit();

  float lrow[MT][2], drow[MT][2];
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      int r = wq0 + m * 16 + g + 8 * h;
      bool ok = r < tq;
      lrow[m][h] = ok ? lse[(size_t)b * tq + r] * FLASH_LOG2E : 0.f;
      drow[m][h] = ok ? D[(size_t)b * tq + r] : 0.f;
    }
  float gq[MT][DH / 8][4];
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int n = 0; n < DH / 8; n++)
      gq[m][n][0] = gq[m][n][1] = gq[m][n][2] = gq[m][n][3] = 0.f;

  for (int j = 0; j < ntiles; j++) {
    int buf = j & 1, c0 = (jb + j) * BK;
    if (j + 1 < ntiles) {
      load_tile<T, DH, NT>(sk + (buf ^ 1) * BK * LD, k, c0 + BK, BK, tk);
      load_tile<T, DH, NT>(sv + (buf ^ 1) * BK * LD, v, c0 + BK, BK, tk);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T *kt = sk + buf * BK * LD, *vt = sv + buf * BK * LD;
    /* Causal: keys wholly after this warp's last row add nothing. */
    if (!(causal && c0 > wq0 + 16 * MT - 1)) {
      float p[MT][BK / 8][4], ds[MT][BK / 8][4];
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) p[m][n][e] = ds[m][n][e] = 0.f;
      M::template abt<MT, BK / 8, DH>(p, sq + w * 16 * MT * LD, kt, LD);    /* S = Q K^T */
      M::template abt<MT, BK / 8, DH>(ds, sdo + w * 16 * MT * LD, vt, LD);  /* dP = dO V^T */
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            p[m][n][e] = exp2f(p[m][n][e] * scale_log2 - lrow[m][e >> 1]);
      /* Only tiles that cross the diagonal or the end compare indices. */
      if (c0 + BK > tk || (causal && c0 + BK - 1 > wq0)) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
          for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
              int col = c0 + n * 8 + 2 * t + (e & 1),
                  r = wq0 + m * 16 + g + 8 * (e >> 1);
              if (col >= tk || (causal && col > r)) p[m][n][e] = 0.f;
            }
      }
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            ds[m][n][e] = p[m][n][e] * (ds[m][n][e] - drow[m][e >> 1]);
      M::template cb<MT, BK / 8, DH>(gq, ds, kt, LD);   /* dQ += dS K */
    }
    __syncthreads();
  }

#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      int r = wq0 + m * 16 + g + 8 * h;
      if (r >= tq) continue;
      if (partial) {
        float *pq = part + (((size_t)b * cut.us + slot) * OWN + (r - q0)) * DH;
#pragma unroll
        for (int n = 0; n < DH / 8; n++)
          *reinterpret_cast<float2 *>(pq + n * 8 + 2 * t) =
              make_float2(gq[m][n][2 * h] * scale, gq[m][n][2 * h + 1] * scale);
        continue;
      }
      T *rq = dq + ((size_t)b * tq + r) * DH;
#pragma unroll
      for (int n = 0; n < DH / 8; n++)
        M::store2(rq + n * 8 + 2 * t, gq[m][n][2 * h] * scale, gq[m][n][2 * h + 1] * scale);
    }
}

/* ---- fp32 on CUDA cores ------------------------------------------------------- */

/* Tiles of B rows (owned) and B rows (streamed), 4 threads per owned row:
 * thread (r = tid / 4, u = tid % 4) owns columns u, u+4, ... of row r and
 * computes the pair values of columns u, u+4, ... of the streamed tile. */
template <int DH> struct simt_tile { static constexpr int B = DH >= 128 ? 16 : 32; };

template <typename T, int DH, int B = simt_tile<DH>::B>
__global__ void __launch_bounds__(4 * B)
    flash_dkdv_simt(const T *__restrict__ q, const T *__restrict__ k,
                    const T *__restrict__ v, const T *__restrict__ dout,
                    const float *__restrict__ lse, const float *__restrict__ D,
                    T *__restrict__ dk, T *__restrict__ dv, int tq, int tk,
                    int causal, float scale, float scale_log2) {
  __shared__ float sk[B][DH + 1], sv[B][DH + 1], sq[B][DH + 1], sdo[B][DH + 1];
  __shared__ float sp[B][B + 1], sds[B][B + 1], sl[B], sd[B];
  int b = blockIdx.y, k0 = (gridDim.x - 1 - blockIdx.x) * B;
  int c = threadIdx.x >> 2, u = threadIdx.x & 3, key = k0 + c;
  q += (size_t)b * tq * DH;
  dout += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;
  simt_load2<T, B, DH, 4 * B>(sk, sv, k, v, k0, tk);
  float gk[DH / 4], gv[DH / 4];
#pragma unroll
  for (int d = 0; d < DH / 4; d++) gk[d] = gv[d] = 0.f;
  for (int r0 = causal ? k0 / B * B : 0; r0 < tq; r0 += B) {
    __syncthreads();
    simt_load2<T, B, DH, 4 * B>(sq, sdo, q, dout, r0, tq);
    for (int x = threadIdx.x; x < B; x += 4 * B) {
      bool ok = r0 + x < tq;
      sl[x] = ok ? lse[(size_t)b * tq + r0 + x] * FLASH_LOG2E : INFINITY;
      sd[x] = ok ? D[(size_t)b * tq + r0 + x] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < B / 4; i++) {
      int r = u + 4 * i;
      float s = 0.f, dp = 0.f;
#pragma unroll 8
      for (int d = 0; d < DH; d++) {
        s = fmaf(sk[c][d], sq[r][d], s);
        dp = fmaf(sv[c][d], sdo[r][d], dp);
      }
      float p = exp2f(s * scale_log2 - sl[r]);
      if (causal && r0 + r < key) p = 0.f;
      sp[c][r] = p;
      sds[c][r] = p * (dp - sd[r]);
    }
    __syncwarp();   /* row c's 4 threads share a warp */
#pragma unroll
    for (int d = 0; d < DH / 4; d++) {
      float a = gv[d], e = gk[d];
      for (int r = 0; r < B; r++) {
        a = fmaf(sp[c][r], sdo[r][u + 4 * d], a);
        e = fmaf(sds[c][r], sq[r][u + 4 * d], e);
      }
      gv[d] = a;
      gk[d] = e;
    }
  }
  if (key < tk) {
    T *rk = dk + ((size_t)b * tk + key) * DH, *rv = dv + ((size_t)b * tk + key) * DH;
#pragma unroll
    for (int d = 0; d < DH / 4; d++) {
      rk[u + 4 * d] = elt<T>::store(gk[d] * scale);
      rv[u + 4 * d] = elt<T>::store(gv[d]);
    }
  }
}

template <typename T, int DH, int B = simt_tile<DH>::B>
__global__ void __launch_bounds__(4 * B)
    flash_dq_simt(const T *__restrict__ q, const T *__restrict__ k,
                  const T *__restrict__ v, const T *__restrict__ dout,
                  const float *__restrict__ lse, const float *__restrict__ D,
                  T *__restrict__ dq, int tq, int tk, int causal, float scale,
                  float scale_log2) {
  __shared__ float sq[B][DH + 1], sdo[B][DH + 1], sk[B][DH + 1], sv[B][DH + 1];
  __shared__ float sds[B][B + 1];
  int b = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * B;
  int r = threadIdx.x >> 2, u = threadIdx.x & 3, row = q0 + r;
  q += (size_t)b * tq * DH;
  dout += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;
  simt_load2<T, B, DH, 4 * B>(sq, sdo, q, dout, q0, tq);
  float lrow = row < tq ? lse[(size_t)b * tq + row] * FLASH_LOG2E : 0.f;
  float drow = row < tq ? D[(size_t)b * tq + row] : 0.f;
  float gq[DH / 4];
#pragma unroll
  for (int d = 0; d < DH / 4; d++) gq[d] = 0.f;
  int kend = causal ? min(tk, q0 + B) : tk;
  for (int c0 = 0; c0 < kend; c0 += B) {
    __syncthreads();
    simt_load2<T, B, DH, 4 * B>(sk, sv, k, v, c0, tk);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < B / 4; i++) {
      int c = u + 4 * i, col = c0 + c;
      float s = 0.f, dp = 0.f;
#pragma unroll 8
      for (int d = 0; d < DH; d++) {
        s = fmaf(sq[r][d], sk[c][d], s);
        dp = fmaf(sdo[r][d], sv[c][d], dp);
      }
      float p = exp2f(s * scale_log2 - lrow);
      if (col >= tk || (causal && col > row)) p = 0.f;
      sds[r][c] = p * (dp - drow);
    }
    __syncwarp();
#pragma unroll
    for (int d = 0; d < DH / 4; d++) {
      float a = gq[d];
      for (int c = 0; c < B; c++) a = fmaf(sds[r][c], sk[c][u + 4 * d], a);
      gq[d] = a;
    }
  }
  if (row < tq) {
    T *rq = dq + ((size_t)b * tq + row) * DH;
#pragma unroll
    for (int d = 0; d < DH / 4; d++) rq[u + 4 * d] = elt<T>::store(gq[d] * scale);
  }
}

typedef struct bwd_args {
  const void *q, *k, *v, *o, *dout;
  const float *lse;
  void *dq, *dk, *dv;
  int bh, tq, tk, causal;
  float scale, sl2;
} bwd_args;

/* D = rowsum(dO * O) into the engine's workspace, `extra` floats after it
 * (a cut's partials, 16-byte aligned: *extra_p), then flash_bwd_d. */
template <typename T>
int bwd_prep(engine *e, const bwd_args &a, int dh, size_t extra, float **D,
             float **extra_p) {
  size_t rows = (size_t)a.bh * a.tq, off = (rows + 3) & ~(size_t)3;
  void *ws;
  TRY(cuda_workspace(e, (off + extra) * sizeof(float), &ws));
  *D = (float *)ws;
  *extra_p = extra ? *D + off : NULL;
  flash_bwd_d<T><<<(unsigned)((rows + 7) / 8), 256, 0, cuda_stream(e)>>>(
      (const T *)a.o, (const T *)a.dout, *D, (long long)rows, dh);
  CHECK_LAUNCH();
  return 0;
}

/* The two tensor-core kernels' launches at these sizes: their walks,
 * cuts (as the forward's, flash_fwd.cu's fwd_mma_plan), shared memory and
 * instances. dK/dV: key tiles of OWN walk query tiles of BQ; dQ (a pass
 * of its own unless FDQ): query tiles of OWN walk key tiles of BK. */
template <typename T, int DH, bool X3>
struct bwd_kernels {
  typedef dkdv_cfg<T, DH> C1;
  typedef dq_cfg<T, DH> C2;
  static constexpr int LD = DH + 8, OWN = 16 * C1::MT * MMA_WARPS, BQ = C1::BS,
                       OWN2 = 16 * C2::MT * MMA_WARPS, BK = C2::BS;
  static constexpr bool F = C1::FDQ;
  typedef bwd_walks_t<OWN> walks1;
  typedef fwd_walks_t<BK> walks2;
  static constexpr size_t smem1 = (size_t)(2 * OWN + 4 * BQ) * LD * sizeof(T) +
                                  4 * BQ * sizeof(float) +
                                  (F ? dq_fused<BQ, OWN>::bytes : 0);
  static constexpr size_t smem2() { return (size_t)(2 * OWN2 + 4 * BK) * LD * sizeof(T); }
  template <bool CUT> static constexpr auto dkdv() {
    return flash_dkdv_mma<T, DH, C1::MT, BQ, X3, F, CUT>;
  }
  template <bool CUT> static constexpr auto dq() {
    return flash_dq_mma<T, DH, C2::MT, BK, X3, CUT>;
  }
  /* the cuts (mma_cut_key: 3 the dK/dV pass, 4 the dQ pass); the dQ
   * pass's none when fused */
  static int plan(engine *e, int bh, int tq, int tk, int causal, walks1 *w1,
                  walk_cut *c1, walks2 *w2, walk_cut *c2) {
    *w1 = {(tq + BQ - 1) / BQ, (tk + OWN - 1) / OWN, BQ, causal};
    *w2 = {(tq + OWN2 - 1) / OWN2, OWN2, tk, causal};
    const int k1[] = {mma_cut_key<T, X3>(3), bh, tq, tk, DH * 2 + !!causal},
              k2[] = {mma_cut_key<T, X3>(4), bh, tq, tk, DH * 2 + !!causal};
    TRY(plan_cut_blocks(e, dkdv<false>(), MMA_WARPS * 32, smem1, k1, *w1, w1->nk,
                        bh, 2LL * OWN * DH * 4, c1));
    *c2 = make_cut(*w2, w2->nq, 1 << 30);   /* uncut */
    if constexpr (!F)
      TRY(plan_cut_blocks(e, dq<false>(), MMA_WARPS * 32, smem2(), k2, *w2, w2->nq,
                          bh, (long long)OWN2 * DH * 4, c2));
    return 0;
  }
};

template <typename T, int DH, bool X3 = false>
int launch_mma(engine *e, const bwd_args &a) {
  typedef bwd_kernels<T, DH, X3> K;
  typename K::walks1 w1;
  typename K::walks2 w2;
  walk_cut c1, c2;
  TRY(K::plan(e, a.bh, a.tq, a.tk, a.causal, &w1, &c1, &w2, &c2));
  /* the partials of both cuts after D, 16-byte aligned */
  size_t n1 = ((size_t)a.bh * c1.us * 2 * K::OWN * DH + 3) & ~(size_t)3,
         n2 = (size_t)a.bh * c2.us * K::OWN2 * DH;
  float *D, *part1;
  TRY(bwd_prep<T>(e, a, DH, n1 + n2, &D, &part1));
  float *part2 = n2 ? part1 + n1 : NULL;
  cudaStream_t st = cuda_stream(e);
  auto k1 = c1.us > 0 ? K::template dkdv<true>() : K::template dkdv<false>();
  CHECK_CUDA(cudaFuncSetAttribute(k1, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)K::smem1));
  /* fused: the pass adds dq's sums into it */
  if (K::F)
    CHECK_CUDA(cudaMemsetAsync(a.dq, 0, (size_t)a.bh * a.tq * DH * sizeof(float), st));
  k1<<<dim3(c1.units, a.bh), MMA_WARPS * 32, K::smem1, st>>>(
      (const T *)a.q, (const T *)a.k, (const T *)a.v, (const T *)a.dout, a.lse,
      D, (T *)a.dk, (T *)a.dv, K::F ? (float *)a.dq : nullptr, part1, c1, w1,
      a.tq, a.tk, a.causal, a.scale, a.sl2);
  CHECK_LAUNCH();
  /* a slot: dV's OWN rows, then dK's */
  TRY((sum_cut_merge<T, DH, K::OWN, 2>(e, c1, w1, part1, a.dv, a.dk, a.bh, a.tk)));
  if constexpr (!K::F) {   /* dQ in a pass of its own */
    auto k2 = c2.us > 0 ? K::template dq<true>() : K::template dq<false>();
    CHECK_CUDA(cudaFuncSetAttribute(k2, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)K::smem2()));
    k2<<<dim3(c2.units, a.bh), MMA_WARPS * 32, K::smem2(), st>>>(
        (const T *)a.q, (const T *)a.k, (const T *)a.v, (const T *)a.dout, a.lse,
        D, (T *)a.dq, part2, c2, w2, a.tq, a.tk, a.causal, a.scale, a.sl2);
    CHECK_LAUNCH();
    TRY((sum_cut_merge<T, DH, K::OWN2, 1>(e, c2, w2, part2, a.dq, NULL, a.bh, a.tq)));
  }
  return 0;
}

template <typename T, int DH>
int launch_simt(engine *e, const bwd_args &a) {
  constexpr int B = simt_tile<DH>::B;
  float *D, *none;
  TRY(bwd_prep<T>(e, a, DH, 0, &D, &none));
  dim3 g1((a.tk + B - 1) / B, a.bh), g2((a.tq + B - 1) / B, a.bh);
  flash_dkdv_simt<T, DH><<<g1, 4 * B, 0, cuda_stream(e)>>>(
      (const T *)a.q, (const T *)a.k, (const T *)a.v, (const T *)a.dout, a.lse,
      D, (T *)a.dk, (T *)a.dv, a.tq, a.tk, a.causal, a.scale, a.sl2);
  CHECK_LAUNCH();
  flash_dq_simt<T, DH><<<g2, 4 * B, 0, cuda_stream(e)>>>(
      (const T *)a.q, (const T *)a.k, (const T *)a.v, (const T *)a.dout, a.lse,
      D, (T *)a.dq, a.tq, a.tk, a.causal, a.scale, a.sl2);
  CHECK_LAUNCH();
  return 0;
}

/* flash_dispatch's ops: the launch, and the most chunks either tensor-core
 * kernel cuts a walk into (1: CUDA cores, never cut) */
struct bwd_launch {
  template <typename T, int D, bool X3>
  static int mma(engine *e, const bwd_args &a) { return launch_mma<T, D, X3>(e, a); }
  template <typename T, int D>
  static int simt(engine *e, const bwd_args &a) { return launch_simt<T, D>(e, a); }
};
struct bwd_chunks {
  template <typename T, int D, bool X3>
  static int mma(engine *e, int bh, int tq, int tk, int causal) {
    typedef bwd_kernels<T, D, X3> K;
    typename K::walks1 w1;
    typename K::walks2 w2;
    walk_cut c1, c2;
    TRY(K::plan(e, bh, tq, tk, causal, &w1, &c1, &w2, &c2));
    return c1.nc > c2.nc ? c1.nc : c2.nc;
  }
  template <typename T, int D>
  static int simt(engine *, int, int, int, int) { return 1; }
};

}  // namespace

int cuda_flash_bwd(engine *e, const void *q, const void *k, const void *v,
                   const void *o, const void *dout, const float *lse,
                   void *dq, void *dk, void *dv, int bh, int tq, int tk,
                   int dh, int causal, float scale, dtype dt) {
  char dhs[32];
  if (!attn_flash_gpu_dhead(dh))
    FAIL(ERR_FAIL, "k_attention_bwd: flash on the GPU takes head dims %s "
         "(got dh=%d)", attn_flash_gpu_dheads_text(dhs), dh);
  const void *p16[] = {q, k, v, o, dout, dq, dk, dv};
  for (int i = 0; i < 8; i++)
    if (!aligned16(p16[i]))
      FAIL(ERR_FAIL, "k_attention_bwd: flash on the GPU needs 16-byte "
           "aligned q, k, v, o, dout, dq, dk, dv");
  if (bh > 65535)
    FAIL(ERR_FAIL, "k_attention_bwd: bh=%d heads (allowed: <= 65535)", bh);
  if (cuda_impl(e)->wgmma && dt != DT_F32 &&
      (dh == 64 || dh == 80 || dh == 128))
    return cuda_flash_bwd_wgmma(e, q, k, v, o, dout, lse, dq, dk, dv, bh, tq,
                                tk, dh, causal, scale, dt);
  bwd_args a = {q, k, v, o, dout, lse, dq, dk, dv, bh, tq, tk, causal, scale,
                scale * FLASH_LOG2E};
  return flash_dispatch<bwd_launch>(e, "k_attention_bwd", dt, dh, a);
}

int cuda_flash_bwd_mma_chunks(engine *e, int bh, int tq, int tk, int dh,
                              int causal, dtype dt) {
  return flash_dispatch<bwd_chunks>(e, "cuda_flash_bwd_mma_chunks", dt, dh, bh, tq,
                                    tk, causal);
}
