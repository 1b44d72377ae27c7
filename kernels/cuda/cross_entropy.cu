/* Cross-entropy of logits [n, V] against targets [n] on the CUDA engine.
 *
 *   forward   lse[i]    = logsumexp_j logits[i,j]
 *                       = m_i + log(sum_j exp(logits[i,j] - m_i)),
 *                         m_i = max_j logits[i,j]       (saved for backward)
 *             losses[i] = lse[i] - logits[i, targets[i]]
 *   backward  dlogits[i,j] = scale * (exp(logits[i,j] - lse[i])
 *                                     - [j == targets[i]])   (written)
 *             scale = 1/n for a mean loss; dlogits may alias logits.
 *
 * One 256-thread block per row, fp32. Forward is one pass (online
 * logsumexp): each thread keeps a running max and sum of exp(x - max) over
 * its columns (float4 when V % 4 = 0), merged over the block by a fixed
 * tree. Backward reads each logit once and writes its gradient from the
 * same thread, so dlogits may be the logits' buffer.
 *
 * A target outside [0, V) is reported at the next sync (cuda_ops.h);
 * forward then writes that row's loss as NaN (lse is still right), and
 * backward leaves out the one-hot term. */
#include "kernels/cuda/common.cuh"

enum { THREADS = 256 };

template <bool VEC>
__global__ void ce_fwd_k(const float *logits, const int32_t *targets,
                         float *losses, float *lse, int vocab,
                         cuda_status *st, int *flag) {
  __shared__ max_sum sh[32];
  long long i = blockIdx.x;
  const float *x = logits + i * vocab;
  max_sum a = ms_empty();
  if (VEC) {
    for (int j = threadIdx.x; j < vocab / 4; j += blockDim.x) {
      float4 v = ((const float4 *)x)[j];
      ms_add(a, v.x);
      ms_add(a, v.y);
      ms_add(a, v.z);
      ms_add(a, v.w);
    }
  } else {
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) ms_add(a, x[j]);
  }
  a = block_ms(a, sh);
  if (threadIdx.x == 0) {
    float l = a.m + logf(a.s);
    int t = targets[i];
    lse[i] = l;
    if (t >= 0 && t < vocab) {
      losses[i] = l - x[t];
    } else {
      losses[i] = NAN;
      report_bad(st, flag, CUDA_CHK_CROSS_ENTROPY_FWD, i, t, vocab);
    }
  }
}

template <bool VEC>
__global__ void ce_bwd_k(const float *logits, const int32_t *targets,
                         const float *lse, float *dlogits, int vocab,
                         float scale, cuda_status *st, int *flag) {
  long long i = blockIdx.x;
  const float *x = logits + i * vocab;
  float *dx = dlogits + i * vocab;
  float l = lse[i];
  int t = targets[i];
  if (t < 0 || t >= vocab) {
    if (threadIdx.x == 0)
      report_bad(st, flag, CUDA_CHK_CROSS_ENTROPY_BWD, i, t, vocab);
    t = -1;
  }
  if (VEC) {
    for (int j = threadIdx.x; j < vocab / 4; j += blockDim.x) {
      float4 v = ((const float4 *)x)[j];
      int b = 4 * j;
      ((float4 *)dx)[j] =
          make_float4(scale * (expf(v.x - l) - (b == t ? 1.0f : 0.0f)),
                      scale * (expf(v.y - l) - (b + 1 == t ? 1.0f : 0.0f)),
                      scale * (expf(v.z - l) - (b + 2 == t ? 1.0f : 0.0f)),
                      scale * (expf(v.w - l) - (b + 3 == t ? 1.0f : 0.0f)));
    }
  } else {
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
      dx[j] = scale * (expf(x[j] - l) - (j == t ? 1.0f : 0.0f));
  }
}

int cuda_cross_entropy_fwd(engine *e, const float *logits,
                           const int32_t *targets, float *losses, float *lse,
                           int n, int vocab) {
  cuda_engine *c = cuda_impl(e);
  bool vec = vocab % 4 == 0 && aligned16(logits);
  if (vec)
    ce_fwd_k<true><<<n, THREADS, 0, cuda_stream(e)>>>(logits, targets, losses, lse, vocab, c->status, c->bad_flag_dev);
  else
    ce_fwd_k<false><<<n, THREADS, 0, cuda_stream(e)>>>(logits, targets, losses, lse, vocab, c->status, c->bad_flag_dev);
  CHECK_LAUNCH();
  return 0;
}

int cuda_cross_entropy_bwd(engine *e, const float *logits,
                           const int32_t *targets, const float *lse,
                           float *dlogits, int n, int vocab, float scale) {
  cuda_engine *c = cuda_impl(e);
  bool vec = vocab % 4 == 0 && aligned16(logits) && aligned16(dlogits);
  if (vec)
    ce_bwd_k<true><<<n, THREADS, 0, cuda_stream(e)>>>(logits, targets, lse, dlogits, vocab, scale, c->status, c->bad_flag_dev);
  else
    ce_bwd_k<false><<<n, THREADS, 0, cuda_stream(e)>>>(logits, targets, lse, dlogits, vocab, scale, c->status, c->bad_flag_dev);
  CHECK_LAUNCH();
  return 0;
}

/* ---- cross-entropy gradient, typed ------------------------------------------ */

template <typename T>
__global__ void ce_bwd_ex_k(const float *logits, const int32_t *targets,
                            const float *lse, T *dl, int vocab, float scale) {
  size_t row = blockIdx.x, o = row * (size_t)vocab;
  float l = lse[row];
  int tg = targets[row];
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    float p = expf(logits[o + j] - l);
    st(dl, o + j, scale * (p - (j == tg ? 1.0f : 0.0f)));
  }
}

int cuda_cross_entropy_bwd_ex(engine *e, const float *logits,
                              const int32_t *targets, const float *lse,
                              void *dlogits, dtype dt, int n, int vocab,
                              float scale) {
  if (dt == DT_F32)
    return cuda_cross_entropy_bwd(e, logits, targets, lse, (float *)dlogits,
                                  n, vocab, scale);
  /* Targets were checked by the forward (k_cross_entropy_fwd) that made
   * lse; a row whose target is out of range was not computed there. */
  WITH_T(dt, (ce_bwd_ex_k<T><<<n, THREADS, 0, cuda_stream(e)>>>(
                 logits, targets, lse, (T *)dlogits, vocab, scale)));
  CHECK_LAUNCH();
  return 0;
}
