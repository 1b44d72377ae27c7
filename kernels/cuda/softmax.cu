/* Causal softmax over materialised attention scores on the CUDA engine.
 * `mats` = B*H matrices S, P, dP, dS, each [T, T], row i = query i.
 *
 *   forward   P[i,j] = exp(scale*S[i,j] - m_i) / sum_{k<=i} exp(scale*S[i,k] - m_i)
 *                                                     for j <= i,
 *             P[i,j] = 0                              for j > i,
 *             m_i = max_{k<=i} scale*S[i,k] (subtracted for stability)
 *   backward  dS[i,j] = scale * P[i,j] * (dP[i,j] - sum_k dP[i,k] P[i,k])
 *                                                     (written)
 *
 * fp32 throughout. A group of G threads per row: a warp (G = 32, 8 rows per
 * 256-thread block) when T <= 1024, else the whole block (G = 256). Forward
 * is two passes over the row's first i+1 entries: one running (max, sum of
 * exp) per thread, merged over the group by a fixed tree (max subtracted,
 * so no overflow), then the write pass; the upper triangle is written as 0.
 * Only the causal part is read. S and P may be the same buffer, and so may
 * dP and dS: the write pass reads each element and then writes it from the
 * same thread, after the whole group has finished the first pass. */
#include "kernels/cuda/common.cuh"

enum { THREADS = 256, WARP_ROWS_MAX_SEQ = 1024 };

template <int G>
__global__ void softmax_fwd_k(const float *S, float *P, long long rows,
                              int seq, float scale) {
  __shared__ max_sum sh[32];
  long long r = (long long)blockIdx.x * (THREADS / G) + threadIdx.x / G;
  int lane = threadIdx.x % G;
  /* G = 256: the block is one row, r < rows always. G = 32: a whole warp
   * leaves together, and only warp shuffles follow. */
  if (r >= rows) return;
  int i = (int)(r % seq);
  const float *s = S + r * seq;
  float *p = P + r * seq;
  max_sum a = ms_empty();
  for (int j = lane; j <= i; j += G) ms_add(a, scale * s[j]);
  a = G == 32 ? warp_ms(a) : block_ms(a, sh);
  float inv = 1.0f / a.s;
  for (int j = lane; j <= i; j += G) p[j] = expf(scale * s[j] - a.m) * inv;
  for (int j = i + 1 + lane; j < seq; j += G) p[j] = 0.0f;
}

template <int G>
__global__ void softmax_bwd_k(const float *P, const float *dP, float *dS,
                              long long rows, int seq, float scale) {
  __shared__ float sh[32];
  long long r = (long long)blockIdx.x * (THREADS / G) + threadIdx.x / G;
  int lane = threadIdx.x % G;
  if (r >= rows) return;
  int i = (int)(r % seq);
  const float *p = P + r * seq, *dp = dP + r * seq;
  float *ds = dS + r * seq;
  float dot = 0.0f;
  for (int j = lane; j <= i; j += G) dot += dp[j] * p[j];
  dot = G == 32 ? warp_sum(dot) : block_sum(dot, sh);
  for (int j = lane; j <= i; j += G) ds[j] = scale * p[j] * (dp[j] - dot);
  for (int j = i + 1 + lane; j < seq; j += G) ds[j] = 0.0f;
}

static unsigned blocks_for(long long rows, int g) {
  return (unsigned)((rows + THREADS / g - 1) / (THREADS / g));
}

static int check_rows(const char *op, long long rows) {
  if (rows > 0x7fffffffLL)
    FAIL(ERR_FAIL, "%s: %lld rows are too many for one launch", op, rows);
  return 0;
}

int cuda_softmax_causal_fwd(engine *e, const float *S, float *P, int mats,
                            int seq, float scale) {
  long long rows = (long long)mats * seq;
  TRY(check_rows("k_softmax_causal_fwd", rows));
  cudaStream_t s = cuda_stream(e);
  if (seq <= WARP_ROWS_MAX_SEQ)
    softmax_fwd_k<32><<<blocks_for(rows, 32), THREADS, 0, s>>>(S, P, rows, seq, scale);
  else
    softmax_fwd_k<THREADS><<<blocks_for(rows, THREADS), THREADS, 0, s>>>(S, P, rows, seq, scale);
  CHECK_LAUNCH();
  return 0;
}

int cuda_softmax_causal_bwd(engine *e, const float *P, const float *dP,
                            float *dS, int mats, int seq, float scale) {
  long long rows = (long long)mats * seq;
  TRY(check_rows("k_softmax_causal_bwd", rows));
  cudaStream_t s = cuda_stream(e);
  if (seq <= WARP_ROWS_MAX_SEQ)
    softmax_bwd_k<32><<<blocks_for(rows, 32), THREADS, 0, s>>>(P, dP, dS, rows, seq, scale);
  else
    softmax_bwd_k<THREADS><<<blocks_for(rows, THREADS), THREADS, 0, s>>>(P, dP, dS, rows, seq, scale);
  CHECK_LAUNCH();
  return 0;
}
