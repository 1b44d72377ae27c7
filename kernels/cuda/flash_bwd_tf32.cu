/* FlashAttention-2 backward in fp32 on TF32 tensor cores: flash_bwd.cu's
 * two passes (a dK/dV kernel owning key tiles, a dQ kernel owning query
 * tiles; no atomics, bit-for-bit repeatable) with all five products on
 * mma.sync m16n8k8 tf32, 3xTF32 or TF32 as the engine's fp32 product
 * setting says (flash_fwd_tf32.cu explains both; flash_common.cuh the
 * fragments and warp_abt_f32 / warp_cb_f32).
 *
 * 4 warps of 16 owned rows; the streamed tiles double-buffered with
 * cp.async; P^T and dS^T (dS) go from one product's accumulators to the
 * next in registers. Every tile is read as warp_abt_f32's B or A (rows
 * 8 floats longer than Dh: conflict-free), Q and dO in the dK/dV pass and
 * K in the dQ pass also as warp_cb_f32's B (two-way conflicts there). D
 * (rowsum dO * O) comes from flash_bwd.cu, which calls this. */
#include "kernels/cuda/flash_common.cuh"

namespace {

constexpr int TC_WARPS = 4, TC_OWN = 16 * TC_WARPS;

/* Streamed tiles: as many rows as keep two blocks an SM (shared memory
 * (2 x 64 + 4 x BS) x (Dh + 8) floats <= ~110 KB) and the accumulators
 * (dK and dV: Dh floats a thread) with P and dS (BS / 2 each) in
 * registers. */
template <int DH> struct tc_bwd_cfg {
  static constexpr int BS = DH >= 128 ? 16 : DH >= 80 ? 32 : 64;
  static constexpr int LD = DH + 8;
  static constexpr size_t SMEM =
      (size_t)(2 * TC_OWN + 4 * BS) * LD * sizeof(float) + 4 * BS * sizeof(float);
};

/* dK, dV of one key tile of TC_OWN rows; query tiles of BS stream by. */
template <int DH, bool X3>
__global__ void __launch_bounds__(TC_WARPS * 32)
    flash_dkdv_tc(const float *__restrict__ q, const float *__restrict__ k,
                  const float *__restrict__ v, const float *__restrict__ dout,
                  const float *__restrict__ lse, const float *__restrict__ D,
                  float *__restrict__ dk, float *__restrict__ dv, int tq,
                  int tk, int causal, float scale, float scale_log2) {
  constexpr int BQ = tc_bwd_cfg<DH>::BS, LD = tc_bwd_cfg<DH>::LD,
                NT = TC_WARPS * 32, ND = DH / 8, NS = BQ / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float *sk = reinterpret_cast<float *>(smem_raw);
  float *sv = sk + TC_OWN * LD;
  float *sq = sv + TC_OWN * LD;     /* two buffers of BQ rows each */
  float *sdo = sq + 2 * BQ * LD;
  float *sl = sdo + 2 * BQ * LD;    /* 2 x BQ */
  float *sd = sl + 2 * BQ;

  int b = blockIdx.y, k0 = blockIdx.x * TC_OWN;
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  int wk0 = k0 + w * 16;            /* this warp's first key */
  q += (size_t)b * tq * DH;
  dout += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;
  lse += (size_t)b * tq;
  D += (size_t)b * tq;

  int first = causal ? k0 / BQ : 0, last = (tq + BQ - 1) / BQ;
  load_tile<float, DH, NT>(sk, k, k0, TC_OWN, tk);
  load_tile<float, DH, NT>(sv, v, k0, TC_OWN, tk);
  auto stream_in = [&](int it, int buf) {
    int r0 = it * BQ;
    load_tile<float, DH, NT>(sq + buf * BQ * LD, q, r0, BQ, tq);
    load_tile<float, DH, NT>(sdo + buf * BQ * LD, dout, r0, BQ, tq);
    for (int x = threadIdx.x; x < BQ; x += NT) {
      /* Rows past Tq: L = +inf makes their P exactly 0. */
      sl[buf * BQ + x] = r0 + x < tq ? lse[r0 + x] * FLASH_LOG2E : INFINITY;
      sd[buf * BQ + x] = r0 + x < tq ? D[r0 + x] : 0.f;
    }
  };
  if (first < last) stream_in(first, 0);
  cp_async_commit();

  float gk[ND][4], gv[ND][4];
#pragma unroll
  for (int n = 0; n < ND; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) gk[n][e] = gv[n][e] = 0.f;

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
    const float *qt = sq + buf * BQ * LD, *dot = sdo + buf * BQ * LD;
    const float *lt = sl + buf * BQ, *dt = sd + buf * BQ;

    /* Causal: queries wholly before this warp's first key see none of them. */
    if (!(causal && r0 + BQ - 1 < wk0)) {
      float p[NS][4], ds[NS][4];
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) p[n][e] = ds[n][e] = 0.f;
      warp_abt_f32<X3, NS, DH>(p, sk + w * 16 * LD, qt, LD);    /* S^T = K Q^T */
      warp_abt_f32<X3, NS, DH>(ds, sv + w * 16 * LD, dot, LD);  /* dP^T = V dO^T */
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          p[n][e] = exp2f(p[n][e] * scale_log2 - lt[n * 8 + 2 * t + (e & 1)]);
      /* Only tiles that cross the diagonal compare indices. */
      if (causal && r0 < wk0 + 16) {
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            if (r0 + n * 8 + 2 * t + (e & 1) < wk0 + g + 8 * (e >> 1)) p[n][e] = 0.f;
      }
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          ds[n][e] = p[n][e] * (ds[n][e] - dt[n * 8 + 2 * t + (e & 1)]);
      warp_cb_f32<X3, NS, DH>(gv, p, dot, LD);   /* dV += P^T dO */
      warp_cb_f32<X3, NS, DH>(gk, ds, qt, LD);   /* dK += dS^T Q */
    }
    __syncthreads();
  }
  cp_async_wait<0>();   /* no query tile (causal, keys past Tq): K, V loads */

#pragma unroll
  for (int h = 0; h < 2; h++) {
    int r = wk0 + g + 8 * h;
    if (r >= tk) continue;
    float *rk = dk + ((size_t)b * tk + r) * DH, *rv = dv + ((size_t)b * tk + r) * DH;
#pragma unroll
    for (int n = 0; n < ND; n++) {
      *reinterpret_cast<float2 *>(rk + n * 8 + 2 * t) =
          make_float2(gk[n][2 * h] * scale, gk[n][2 * h + 1] * scale);
      *reinterpret_cast<float2 *>(rv + n * 8 + 2 * t) =
          make_float2(gv[n][2 * h], gv[n][2 * h + 1]);
    }
  }
}

/* dQ of one query tile of TC_OWN rows; key tiles of BS stream by. */
template <int DH, bool X3>
__global__ void __launch_bounds__(TC_WARPS * 32)
    flash_dq_tc(const float *__restrict__ q, const float *__restrict__ k,
                const float *__restrict__ v, const float *__restrict__ dout,
                const float *__restrict__ lse, const float *__restrict__ D,
                float *__restrict__ dq, int tq, int tk, int causal,
                float scale, float scale_log2) {
  constexpr int BK = tc_bwd_cfg<DH>::BS, LD = tc_bwd_cfg<DH>::LD,
                NT = TC_WARPS * 32, ND = DH / 8, NS = BK / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float *sq = reinterpret_cast<float *>(smem_raw);
  float *sdo = sq + TC_OWN * LD;
  float *sk = sdo + TC_OWN * LD;    /* two buffers of BK rows each */
  float *sv = sk + 2 * BK * LD;

  /* Causal: the last query tiles have the most key tiles; start them
   * first, so the short ones fill the tail. */
  int b = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * TC_OWN;
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  int wq0 = q0 + w * 16;            /* this warp's first query row */
  q += (size_t)b * tq * DH;
  dout += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;

  int kend = causal ? min(tk, q0 + TC_OWN) : tk;
  int ntiles = (kend + BK - 1) / BK;
  load_tile<float, DH, NT>(sq, q, q0, TC_OWN, tq);
  load_tile<float, DH, NT>(sdo, dout, q0, TC_OWN, tq);
  load_tile<float, DH, NT>(sk, k, 0, BK, tk);
  load_tile<float, DH, NT>(sv, v, 0, BK, tk);
  cp_async_commit();

  float lrow[2], drow[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    int r = wq0 + g + 8 * h;
    bool ok = r < tq;
    lrow[h] = ok ? lse[(size_t)b * tq + r] * FLASH_LOG2E : 0.f;
    drow[h] = ok ? D[(size_t)b * tq + r] : 0.f;
  }
  float gq[ND][4];
#pragma unroll
  for (int n = 0; n < ND; n++) gq[n][0] = gq[n][1] = gq[n][2] = gq[n][3] = 0.f;

  for (int j = 0; j < ntiles; j++) {
    int buf = j & 1, c0 = j * BK;
    if (j + 1 < ntiles) {
      load_tile<float, DH, NT>(sk + (buf ^ 1) * BK * LD, k, c0 + BK, BK, tk);
      load_tile<float, DH, NT>(sv + (buf ^ 1) * BK * LD, v, c0 + BK, BK, tk);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float *kt = sk + buf * BK * LD, *vt = sv + buf * BK * LD;
    /* Causal: keys wholly after this warp's last row add nothing. */
    if (!(causal && c0 > wq0 + 15)) {
      float p[NS][4], ds[NS][4];
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) p[n][e] = ds[n][e] = 0.f;
      warp_abt_f32<X3, NS, DH>(p, sq + w * 16 * LD, kt, LD);    /* S = Q K^T */
      warp_abt_f32<X3, NS, DH>(ds, sdo + w * 16 * LD, vt, LD);  /* dP = dO V^T */
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          p[n][e] = exp2f(p[n][e] * scale_log2 - lrow[e >> 1]);
      /* Only tiles that cross the diagonal or the end compare indices. */
      if (c0 + BK > tk || (causal && c0 + BK - 1 > wq0)) {
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            int col = c0 + n * 8 + 2 * t + (e & 1), r = wq0 + g + 8 * (e >> 1);
            if (col >= tk || (causal && col > r)) p[n][e] = 0.f;
          }
      }
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) ds[n][e] = p[n][e] * (ds[n][e] - drow[e >> 1]);
      warp_cb_f32<X3, NS, DH>(gq, ds, kt, LD);   /* dQ += dS K */
    }
    __syncthreads();
  }

#pragma unroll
  for (int h = 0; h < 2; h++) {
    int r = wq0 + g + 8 * h;
    if (r >= tq) continue;
    float *rq = dq + ((size_t)b * tq + r) * DH;
#pragma unroll
    for (int n = 0; n < ND; n++)
      *reinterpret_cast<float2 *>(rq + n * 8 + 2 * t) =
          make_float2(gq[n][2 * h] * scale, gq[n][2 * h + 1] * scale);
  }
}

template <int DH, bool X3>
int launch(engine *e, const float *q, const float *k, const float *v,
           const float *dout, const float *lse, const float *D, float *dq,
           float *dk, float *dv, int bh, int tq, int tk, int causal,
           float scale) {
  size_t smem = tc_bwd_cfg<DH>::SMEM;
  CHECK_CUDA(cudaFuncSetAttribute(flash_dkdv_tc<DH, X3>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  CHECK_CUDA(cudaFuncSetAttribute(flash_dq_tc<DH, X3>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  float sl2 = scale * FLASH_LOG2E;
  dim3 g1((tk + TC_OWN - 1) / TC_OWN, bh), g2((tq + TC_OWN - 1) / TC_OWN, bh);
  flash_dkdv_tc<DH, X3><<<g1, TC_WARPS * 32, smem, cuda_stream(e)>>>(
      q, k, v, dout, lse, D, dk, dv, tq, tk, causal, scale, sl2);
  CHECK_LAUNCH();
  flash_dq_tc<DH, X3><<<g2, TC_WARPS * 32, smem, cuda_stream(e)>>>(
      q, k, v, dout, lse, D, dq, tq, tk, causal, scale, sl2);
  CHECK_LAUNCH();
  return 0;
}

template <bool X3>
int launch_dh(engine *e, const float *q, const float *k, const float *v,
              const float *dout, const float *lse, const float *D, float *dq,
              float *dk, float *dv, int bh, int tq, int tk, int dh,
              int causal, float scale) {
#define FLASH_BWD_TC_CASE(DH)                                                 \
  case DH:                                                                    \
    return launch<DH, X3>(e, q, k, v, dout, lse, D, dq, dk, dv, bh, tq, tk,   \
                          causal, scale);
  switch (dh) {
    FLASH_BWD_TC_CASE(16)
    FLASH_BWD_TC_CASE(32)
    FLASH_BWD_TC_CASE(64)
    FLASH_BWD_TC_CASE(80)
    FLASH_BWD_TC_CASE(128)
  }
#undef FLASH_BWD_TC_CASE
  FAIL(ERR_FAIL, "k_attention_bwd: flash on the GPU takes head dims 16, 32, "
       "64, 80, 128 (got dh=%d)", dh);
}

}  // namespace

int cuda_flash_bwd_tf32(engine *e, const float *q, const float *k,
                        const float *v, const float *dout, const float *lse,
                        const float *D, float *dq, float *dk, float *dv,
                        int bh, int tq, int tk, int dh, int causal,
                        float scale, f32_products p) {
  if (p == F32_3XTF32)
    return launch_dh<true>(e, q, k, v, dout, lse, D, dq, dk, dv, bh, tq, tk,
                           dh, causal, scale);
  if (p == F32_TF32)
    return launch_dh<false>(e, q, k, v, dout, lse, D, dq, dk, dv, bh, tq, tk,
                            dh, causal, scale);
  FAIL(ERR_FAIL, "k_attention_bwd: the tensor-core fp32 flash backward takes "
       "tf32 or 3xtf32 products (got %s)", f32_products_name(p));
}
