/* FlashAttention-2 forward in fp32 on TF32 tensor cores: flash_fwd.cu's
 * algorithm (online softmax in the log2 domain, causal early exit, any
 * Tq, Tk) with both products, S = Q K^T and O += P V, on mma.sync
 * m16n8k8 tf32 (flash_common.cuh). The engine's fp32 product setting
 * (kernels.h f32_products) picks the arithmetic, as for k_matmul:
 *   F32_3XTF32  each operand split into hi + lo TF32 parts, three
 *               products (~2^-22 of each dropped: fp32's accuracy; what
 *               PyTorch's fp32 SDPA, CUTLASS's memory-efficient kernel,
 *               does on Ampere and later)
 *   F32_TF32    hi parts only (TF32's 10-bit mantissas)
 * F32_EXACT stays on CUDA cores (flash_fwd.cu).
 *
 * 4 warps of 16 query rows, key tiles of BK double-buffered with cp.async.
 * Operands are split in registers as they are read from shared memory
 * (three ALU operations an element), which costs less issue time than
 * the products they feed. Shared tiles hold fp32 rows padded so a warp's
 * reads are free of bank conflicts: Q and K rows by 8 floats (8-byte
 * reads of columns 2t, 2t+1 in rows g: a row stride of 8 or 24 banks mod
 * 32, so each half warp covers the 32 banks once), V rows by 4 (4-byte
 * reads of column g in rows 2t, 2t+1: rows 2t apart sit 8t banks apart,
 * 8t + g is 32 distinct banks). */
#include "kernels/cuda/flash_common.cuh"

namespace {

constexpr int TC_WARPS = 4, TC_BQ = 16 * TC_WARPS;

/* Key tiles: 64 keys up to Dh 80; 32 at 128, where S's registers give way
 * to O's (64 floats a thread) and shared memory stays near 100 KB, two
 * blocks an SM. */
template <int DH> struct tc_cfg {
  static constexpr int BK = DH >= 128 ? 32 : 64;
  static constexpr int LDQ = DH + 8, LDV = DH + 4;
  static constexpr size_t SMEM =
      (size_t)(TC_BQ * LDQ + 2 * BK * LDQ + 2 * BK * LDV) * sizeof(float);
};

template <int DH, bool X3>
__global__ void __launch_bounds__(TC_WARPS * 32)
    flash_fwd_tc(const float *__restrict__ q, const float *__restrict__ k,
                 const float *__restrict__ v, float *__restrict__ o,
                 float *__restrict__ lse, int tq, int tk, int causal,
                 float scale_log2) {
  typedef tc_cfg<DH> C;
  constexpr int BK = C::BK, LDQ = C::LDQ, LDV = C::LDV, NT = TC_WARPS * 32,
                NS = BK / 8, ND = DH / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float *sq = reinterpret_cast<float *>(smem_raw);
  float *sk = sq + TC_BQ * LDQ;     /* two buffers of BK rows */
  float *sv = sk + 2 * BK * LDQ;    /* two buffers of BK rows, stride LDV */

  /* Causal: the last query tiles have the most key tiles; start them
   * first, so the short ones fill the tail. */
  int b = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * TC_BQ;
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, g = l >> 2, t = l & 3;
  int wq0 = q0 + w * 16;            /* this warp's first query row */
  q += (size_t)b * tq * DH;
  k += (size_t)b * tk * DH;
  v += (size_t)b * tk * DH;

  int kend = causal ? min(tk, q0 + TC_BQ) : tk;
  int ntiles = (kend + BK - 1) / BK;

  load_tile<float, DH, NT, LDQ>(sq, q, q0, TC_BQ, tq);
  load_tile<float, DH, NT, LDQ>(sk, k, 0, BK, tk);
  load_tile<float, DH, NT, LDV>(sv, v, 0, BK, tk);
  cp_async_commit();

  float acc[ND][4];
#pragma unroll
  for (int n = 0; n < ND; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.f, 0.f};

  for (int j = 0; j < ntiles; j++) {
    int buf = j & 1, k0 = j * BK;
    if (j + 1 < ntiles) {   /* the next tile streams in while this one runs */
      load_tile<float, DH, NT, LDQ>(sk + (buf ^ 1) * BK * LDQ, k, k0 + BK, BK, tk);
      load_tile<float, DH, NT, LDV>(sv + (buf ^ 1) * BK * LDV, v, k0 + BK, BK, tk);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float *kt = sk + buf * BK * LDQ, *vt = sv + buf * BK * LDV;

    /* Causal: a key tile wholly after this warp's last row adds nothing
     * (the block's other warps may still need it). */
    if (!(causal && k0 > wq0 + 15)) {
      float s[NS][4];
#pragma unroll
      for (int n = 0; n < NS; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      warp_abt_f32<X3, NS, DH>(s, sq + w * 16 * LDQ, kt, LDQ);   /* S = Q K^T */
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] *= scale_log2;
      /* Only tiles that cross the diagonal or the end compare indices. */
      if (k0 + BK > tk || (causal && k0 + BK - 1 > wq0)) {
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            int col = k0 + n * 8 + 2 * t + (e & 1), r = wq0 + g + 8 * (e >> 1);
            if (col >= tk || (causal && col > r)) s[n][e] = -INFINITY;
          }
      }
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float mx = mrow[h];
#pragma unroll
        for (int n = 0; n < NS; n++) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
        /* A row that has seen only masked keys so far keeps max -inf;
         * use 0 as its reference so exp2 gives 0, not NaN. */
        float ref = mx == -INFINITY ? 0.f : mx;
        float alpha = exp2f(mrow[h] - ref), sum = 0.f;
#pragma unroll
        for (int n = 0; n < NS; n++) {
          s[n][2 * h] = exp2f(s[n][2 * h] - ref);
          s[n][2 * h + 1] = exp2f(s[n][2 * h + 1] - ref);
          sum += s[n][2 * h] + s[n][2 * h + 1];
        }
        lsum[h] = lsum[h] * alpha + sum;   /* per thread; summed at the end */
        mrow[h] = mx;
#pragma unroll
        for (int n = 0; n < ND; n++) {
          acc[n][2 * h] *= alpha;
          acc[n][2 * h + 1] *= alpha;
        }
      }
      warp_cb_f32<X3, NS, DH>(acc, s, vt, LDV);   /* O += P V */
    }
    __syncthreads();   /* the buffer is refilled next iteration */
  }

#pragma unroll
  for (int h = 0; h < 2; h++) {
    float sum = lsum[h];
    sum += __shfl_xor_sync(FULL_MASK, sum, 1);
    sum += __shfl_xor_sync(FULL_MASK, sum, 2);
    float inv = 1.f / sum;
    int r = wq0 + g + 8 * h;
    if (r < tq) {
      float *orow = o + ((size_t)b * tq + r) * DH;
#pragma unroll
      for (int n = 0; n < ND; n++)
        *reinterpret_cast<float2 *>(orow + n * 8 + 2 * t) =
            make_float2(acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
      if (t == 0) lse[(size_t)b * tq + r] = (mrow[h] + log2f(sum)) * FLASH_LN2;
    }
  }
}

template <int DH, bool X3>
int launch(engine *e, const float *q, const float *k, const float *v,
           float *o, float *lse, int bh, int tq, int tk, int causal,
           float scale_log2) {
  size_t smem = tc_cfg<DH>::SMEM;
  CHECK_CUDA(cudaFuncSetAttribute(flash_fwd_tc<DH, X3>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  dim3 grid((tq + TC_BQ - 1) / TC_BQ, bh);
  flash_fwd_tc<DH, X3><<<grid, TC_WARPS * 32, smem, cuda_stream(e)>>>(
      q, k, v, o, lse, tq, tk, causal, scale_log2);
  CHECK_LAUNCH();
  return 0;
}

template <bool X3>
int launch_dh(engine *e, const float *q, const float *k, const float *v,
              float *o, float *lse, int bh, int tq, int tk, int dh,
              int causal, float sl2) {
  switch (dh) {
  case 16: return launch<16, X3>(e, q, k, v, o, lse, bh, tq, tk, causal, sl2);
  case 32: return launch<32, X3>(e, q, k, v, o, lse, bh, tq, tk, causal, sl2);
  case 64: return launch<64, X3>(e, q, k, v, o, lse, bh, tq, tk, causal, sl2);
  case 80: return launch<80, X3>(e, q, k, v, o, lse, bh, tq, tk, causal, sl2);
  case 128: return launch<128, X3>(e, q, k, v, o, lse, bh, tq, tk, causal, sl2);
  }
  FAIL(ERR_FAIL, "k_attention_fwd: flash on the GPU takes head dims 16, 32, "
       "64, 80, 128 (got dh=%d)", dh);
}

}  // namespace

int cuda_flash_fwd_tf32(engine *e, const float *q, const float *k,
                        const float *v, float *o, float *lse, int bh, int tq,
                        int tk, int dh, int causal, float scale_log2,
                        f32_products p) {
  if (p == F32_3XTF32)
    return launch_dh<true>(e, q, k, v, o, lse, bh, tq, tk, dh, causal, scale_log2);
  if (p == F32_TF32)
    return launch_dh<false>(e, q, k, v, o, lse, bh, tq, tk, dh, causal, scale_log2);
  FAIL(ERR_FAIL, "k_attention_fwd: the tensor-core fp32 flash forward takes "
       "tf32 or 3xtf32 products (got %s)", f32_products_name(p));
}
