/* Attention on the CUDA engine: the dispatch of k_attention_fwd/bwd, and
 * the materialised path, computed as the reference model (and PyTorch
 * eager) computes it, one full [Tq, Tk] matrix per head in memory:
 *
 *   forward:  S = scale Q K^T (fp32, workspace)   -- cuBLAS, batched over heads
 *             P = softmax(S) masked, L = logsumexp (row kernel) -> caller's P
 *             O = P V                               -- cuBLAS
 *   backward: dV = P^T dO;  dP = dO V^T (fp32, workspace)
 *             dS = scale P (dP - rowsum(P dP))     (row kernel)
 *             dQ = dS K;  dK = dS^T Q
 *
 * Products take inputs of dtype dt and accumulate in fp32 (cuBLAS
 * COMPUTE_32F, no TF32, on the engine's handle); S and dP stay fp32, P and
 * dS are stored in dt, as PyTorch's softmax output would be under bf16.
 * Causal masking happens in the row kernels (the products are full, as the
 * reference's). Row-major X [r, c] is column-major X^T, so each product is
 * issued transposed (C^T = B^T A^T). */
#include "kernels/cuda/flash_common.cuh"

namespace {

/* One block per row (bh * Tq rows): P = exp(S - L) over the visible keys,
 * 0 elsewhere; L = log sum exp(S). */
template <typename T>
__global__ void mat_softmax(const float *__restrict__ S, T *__restrict__ P,
                            float *__restrict__ lse, int tq, int tk,
                            int causal) {
  __shared__ max_sum sh[32];
  long long row = blockIdx.x;
  int i = (int)(row % tq), n = causal ? min(i + 1, tk) : tk;
  const float *s = S + row * tk;
  T *p = P + row * tk;
  max_sum a = ms_empty();
  for (int j = threadIdx.x; j < n; j += blockDim.x) ms_add(a, s[j]);
  a = block_ms(a, sh);
  float l = a.m + logf(a.s);
  for (int j = threadIdx.x; j < tk; j += blockDim.x)
    p[j] = elt<T>::store(j < n ? expf(s[j] - l) : 0.f);
  if (threadIdx.x == 0) lse[row] = l;
}

/* One block per row: dS = scale P (dP - D), D = sum_j P dP. dS may alias dP
 * (fp32: same element, read before written by the same thread). */
template <typename T>
__global__ void mat_dsoftmax(const T *__restrict__ P, const float *dP, T *dS,
                             int tk, float scale) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  const T *p = P + row * tk;
  const float *dp = dP + row * tk;
  T *ds = dS + row * tk;
  float d = 0.f;
  for (int j = threadIdx.x; j < tk; j += blockDim.x) d += elt<T>::load(p[j]) * dp[j];
  d = block_sum(d, sh);
  for (int j = threadIdx.x; j < tk; j += blockDim.x) {
    float pj = elt<T>::load(p[j]);
    ds[j] = elt<T>::store(scale * pj * (dp[j] - d));
  }
}

int row_launch_threads(int tk) { return row_threads(tk); }

int mat_fwd(engine *e, const void *q, const void *k, const void *v, void *o,
            float *lse, void *P, int bh, int tq, int tk, int dh, int causal,
            float scale, dtype dt) {
  void *S;
  TRY(cuda_workspace(e, (size_t)bh * tq * tk * sizeof(float), &S));
  long long sq = (long long)tq * dh, sk = (long long)tk * dh, sp = (long long)tq * tk;
  TRY(cuda_bgemm(e, 0, 1, tq, tk, dh, scale, q, dh, sq, k, dh, sk, S,
                 CUDA_R_32F, tk, sp, bh, dt));
  unsigned rows = (unsigned)((long long)bh * tq);
  int th = row_launch_threads(tk);
  switch (dt) {
  case DT_F32:
    mat_softmax<float><<<rows, th, 0, cuda_stream(e)>>>((const float *)S, (float *)P, lse, tq, tk, causal);
    break;
  case DT_BF16:
    mat_softmax<__nv_bfloat16><<<rows, th, 0, cuda_stream(e)>>>((const float *)S, (__nv_bfloat16 *)P, lse, tq, tk, causal);
    break;
  case DT_F16:
    mat_softmax<__half><<<rows, th, 0, cuda_stream(e)>>>((const float *)S, (__half *)P, lse, tq, tk, causal);
    break;
  }
  CHECK_LAUNCH();
  TRY(cuda_bgemm(e, 0, 0, tq, dh, tk, 1.f, P, tk, sp, v, dh, sk, o,
                 cuda_data_type(dt), dh, sq, bh, dt));
  return 0;
}

int mat_bwd(engine *e, const void *q, const void *k, const void *v,
            const void *dout, const void *P, void *dq, void *dk, void *dv,
            int bh, int tq, int tk, int dh, float scale, dtype dt) {
  size_t n = (size_t)bh * tq * tk;
  size_t dp_bytes = n * sizeof(float);
  size_t ds_bytes = dt == DT_F32 ? 0 : n * dtype_size(dt);
  void *ws;
  TRY(cuda_workspace(e, dp_bytes + ds_bytes, &ws));
  float *dP = (float *)ws;
  void *dS = dt == DT_F32 ? ws : (char *)ws + dp_bytes;
  long long sq = (long long)tq * dh, sk = (long long)tk * dh, sp = (long long)tq * tk;
  cudaDataType_t ct = cuda_data_type(dt);
  TRY(cuda_bgemm(e, 1, 0, tk, dh, tq, 1.f, P, tk, sp, dout, dh, sq, dv, ct,
                 dh, sk, bh, dt));                           /* dV = P^T dO */
  TRY(cuda_bgemm(e, 0, 1, tq, tk, dh, 1.f, dout, dh, sq, v, dh, sk, dP,
                 CUDA_R_32F, tk, sp, bh, dt));               /* dP = dO V^T */
  unsigned rows = (unsigned)((long long)bh * tq);
  int th = row_launch_threads(tk);
  switch (dt) {
  case DT_F32:
    mat_dsoftmax<float><<<rows, th, 0, cuda_stream(e)>>>((const float *)P, dP, (float *)dS, tk, scale);
    break;
  case DT_BF16:
    mat_dsoftmax<__nv_bfloat16><<<rows, th, 0, cuda_stream(e)>>>((const __nv_bfloat16 *)P, dP, (__nv_bfloat16 *)dS, tk, scale);
    break;
  case DT_F16:
    mat_dsoftmax<__half><<<rows, th, 0, cuda_stream(e)>>>((const __half *)P, dP, (__half *)dS, tk, scale);
    break;
  }
  CHECK_LAUNCH();
  TRY(cuda_bgemm(e, 0, 0, tq, dh, tk, 1.f, dS, tk, sp, k, dh, sk, dq, ct, dh,
                 sq, bh, dt));                               /* dQ = dS K */
  TRY(cuda_bgemm(e, 1, 0, tk, dh, tq, 1.f, dS, tk, sp, q, dh, sq, dk, ct, dh,
                 sk, bh, dt));                               /* dK = dS^T Q */
  return 0;
}

}  // namespace

int cuda_attention_fwd(engine *e, attn_impl impl, const void *q,
                       const void *k, const void *v, void *o, float *lse,
                       void *P, int bh, int tq, int tk, int dh, int causal,
                       float scale, dtype dt) {
  if (impl == ATTN_FLASH)
    return cuda_flash_fwd(e, q, k, v, o, lse, bh, tq, tk, dh, causal, scale,
                          dt);
  if (bh > 65535)
    FAIL(ERR_FAIL, "k_attention_fwd: bh=%d heads (allowed: <= 65535)", bh);
  return mat_fwd(e, q, k, v, o, lse, P, bh, tq, tk, dh, causal, scale, dt);
}

int cuda_attention_bwd(engine *e, attn_impl impl, const void *q,
                       const void *k, const void *v, const void *o,
                       const void *dout, const float *lse, const void *P,
                       void *dq, void *dk, void *dv, int bh, int tq, int tk,
                       int dh, int causal, float scale, dtype dt) {
  if (impl == ATTN_FLASH)
    return cuda_flash_bwd(e, q, k, v, o, dout, lse, dq, dk, dv, bh, tq, tk,
                          dh, causal, scale, dt);
  if (bh > 65535)
    FAIL(ERR_FAIL, "k_attention_bwd: bh=%d heads (allowed: <= 65535)", bh);
  return mat_bwd(e, q, k, v, dout, P, dq, dk, dv, bh, tq, tk, dh, scale, dt);
}
