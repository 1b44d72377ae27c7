/* The fused path on the CUDA engine (kernels.h, "the fused path"): each
 * kernel does in one pass over memory what a chain of the plain operations
 * does, and reads / writes activations in the products' input dtype T
 * (float, bf16 or f16; math always in fp32). Shapes: N = B*T rows,
 * D = H*Dh, per-head tensors [B, H, T, Dh].
 *
 *   add_rmsnorm_fwd    sum = a + b; y(T) = sum * rstd * g      one block/row
 *   rmsnorm_bwd_ex     dx = dres + rstd*g*dy - x*rstd^3*mean(g*dy*x),
 *                      and dx rounded to T; dg by rmsnorm.cu's
 *                      deterministic column sums
 *   qkv_split_rope     [N, 3D] fp32 -> q, k, v (T), RoPE on q, k (angles in
 *                      double, as k_rope computes them)
 *   qkv_merge_rope_bwd dq, dk, dv (T) -> [N, 3D] (T), RoPE inverse on dq, dk
 *   split/merge_heads_ex, swiglu_fwd/bwd_ex   as the plain ops, typed
 *   cross_entropy_bwd_ex  dlogits(T) = scale * (exp(z - lse) - onehot)
 *   adamw_ex           the plain AdamW pass that also writes p rounded to T
 *
 * Rounding to bf16 / f16 is to nearest even (cvt.rn), the CPU engine's
 * rounding. Each kernel with T = float gives the plain op's results. */
#include "kernels/cuda/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

enum { THREADS = 256 };

/* ---- typed loads and stores ------------------------------------------------ */

__device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, size_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ float ld(const __half *p, size_t i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ void st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16 *p, size_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void st(__half *p, size_t i, float v) {
  p[i] = __float2half_rn(v);
}

/* Run BODY with T bound to the C++ type of dtype `t`. */
#define WITH_T(t, BODY)                                                      \
  do {                                                                       \
    if ((t) == DT_F32) { typedef float T; BODY; }                            \
    else if ((t) == DT_BF16) { typedef __nv_bfloat16 T; BODY; }              \
    else { typedef __half T; BODY; }                                         \
  } while (0)

/* ---- residual add + RMSNorm ------------------------------------------------- */

template <typename T>
__global__ void add_rmsnorm_k(const float *a, const float *b, float *sum,
                              const float *g, T *y, float *rstd, int d,
                              float eps) {
  __shared__ float sh[32];
  size_t row = blockIdx.x, o = row * d;
  float ss = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float x = a[o + j] + (b ? b[o + j] : 0.0f);
    if (sum) sum[o + j] = x;
    ss += x * x;
  }
  ss = block_sum(ss, sh);
  float r = 1.0f / sqrtf(ss / (float)d + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float x = a[o + j] + (b ? b[o + j] : 0.0f);
    st(y, o + j, x * r * g[j]);
  }
}

static int add_rmsnorm_fwd(engine *e, const float *a, const float *b,
                           float *sum, const float *g, void *y, dtype yt,
                           float *rstd, int n, int d, float eps) {
  int threads = row_threads(d);
  WITH_T(yt, (add_rmsnorm_k<T><<<n, threads, 0, cuda_stream(e)>>>(
                 a, b, sum == a ? NULL : sum, g, (T *)y, rstd, d, eps)));
  CHECK_LAUNCH();
  return 0;
}

/* ---- RMSNorm backward with the residual gradient ---------------------------- */

template <typename T>
__global__ void rmsnorm_dx_ex_k(const float *dy, const float *x,
                                const float *g, const float *rstd,
                                const float *dres, float *dx, T *dx_low,
                                int d) {
  __shared__ float sh[32];
  size_t row = blockIdx.x, o = row * d;
  float dot = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    dot += g[j] * dy[o + j] * x[o + j];
  dot = block_sum(dot, sh);
  float r = rstd[row];
  float c = r * r * r * (dot / (float)d);
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float v = r * g[j] * dy[o + j] - x[o + j] * c;
    if (dres) v += dres[o + j];
    dx[o + j] = v;
    if (dx_low) st(dx_low, o + j, v);
  }
}

static int rmsnorm_bwd_ex(engine *e, const float *dy, const float *x,
                          const float *g, const float *rstd,
                          const float *dres, float *dx, void *dx_low,
                          dtype lt, float *dg, int n, int d) {
  /* dg reads dy before dx may overwrite dres (dx == dres is allowed; dy is
   * never dx, engine_fused.c refuses it). */
  TRY(cuda_rmsnorm_dg(e, dy, x, rstd, dg, n, d));
  int threads = row_threads(d);
  if (dx_low == (void *)dx) dx_low = NULL;
  WITH_T(lt, (rmsnorm_dx_ex_k<T><<<n, threads, 0, cuda_stream(e)>>>(
                 dy, x, g, rstd, dres, dx, (T *)dx_low, d)));
  CHECK_LAUNCH();
  return 0;
}

/* ---- q, k, v: split heads and RoPE ------------------------------------------- */

/* One thread per (row r = b*T + t, head h, pair j): the angle once, then
 * q and k rotated and v copied. fwd: [N, 3D] fp32 -> three [B, H, T, Dh];
 * bwd (INV): three [B, H, T, Dh] -> [N, 3D], rotating back. */
template <typename Tin, typename Tout, bool INV>
__global__ void qkv_rope_k(const Tin *qkv, const Tin *q, const Tin *k,
                           const Tin *v, Tout *oqkv, Tout *oq, Tout *ok,
                           Tout *ov, long long pairs, int seq, int heads,
                           int dh, double theta) {
  int half = dh / 2, D = heads * dh;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
       i < pairs; i += (long long)gridDim.x * blockDim.x) {
    int j = (int)(i % half);
    long long rh = i / half;
    int h = (int)(rh % heads);
    long long r = rh / heads;
    int t = (int)(r % seq);
    long long b = r / seq;
    double freq = pow(theta, -2.0 * j / dh), sn, cs;
    sincos(t * freq, &sn, &cs);
    if (INV) sn = -sn;
    size_t flat = (size_t)r * 3 * D + (size_t)h * dh + 2 * j;       /* [N,3D] */
    size_t head = (((size_t)b * heads + h) * seq + t) * dh + 2 * j;  /* [B,H,T,Dh] */
    for (int p = 0; p < 3; p++) {
      double x0, x1;
      if (!INV) {
        x0 = ld(qkv, flat + (size_t)p * D);
        x1 = ld(qkv, flat + (size_t)p * D + 1);
      } else {
        const Tin *src = p == 0 ? q : p == 1 ? k : v;
        x0 = ld(src, head);
        x1 = ld(src, head + 1);
      }
      float y0 = (float)x0, y1 = (float)x1;
      if (p < 2) {
        y0 = (float)(x0 * cs - x1 * sn);
        y1 = (float)(x0 * sn + x1 * cs);
      }
      if (!INV) {
        Tout *dst = p == 0 ? oq : p == 1 ? ok : ov;
        st(dst, head, y0);
        st(dst, head + 1, y1);
      } else {
        st(oqkv, flat + (size_t)p * D, y0);
        st(oqkv, flat + (size_t)p * D + 1, y1);
      }
    }
  }
}

static int qkv_split_rope(engine *e, const float *qkv, void *q, void *k,
                          void *v, dtype lt, int batch, int seq, int heads,
                          int dh, float theta) {
  long long pairs = (long long)batch * seq * heads * (dh / 2);
  unsigned grid = cuda_grid(e, (size_t)pairs, THREADS);
  WITH_T(lt, (qkv_rope_k<float, T, false><<<grid, THREADS, 0,
                                            cuda_stream(e)>>>(
                 qkv, NULL, NULL, NULL, NULL, (T *)q, (T *)k, (T *)v, pairs,
                 seq, heads, dh, (double)theta)));
  CHECK_LAUNCH();
  return 0;
}

static int qkv_merge_rope_bwd(engine *e, const void *dq, const void *dk,
                              const void *dv, void *dqkv, dtype lt, int batch,
                              int seq, int heads, int dh, float theta) {
  long long pairs = (long long)batch * seq * heads * (dh / 2);
  unsigned grid = cuda_grid(e, (size_t)pairs, THREADS);
  WITH_T(lt, (qkv_rope_k<T, T, true><<<grid, THREADS, 0, cuda_stream(e)>>>(
                 NULL, (const T *)dq, (const T *)dk, (const T *)dv, (T *)dqkv,
                 NULL, NULL, NULL, pairs, seq, heads, dh, (double)theta)));
  CHECK_LAUNCH();
  return 0;
}

/* ---- head layout, typed --------------------------------------------------- */

/* SPLIT: x [B, T, H*Dh] -> y [B, H, T, Dh]; else the reverse. One thread per
 * element of the [B, H, T, Dh] side. */
template <typename Tx, typename Ty, bool SPLIT>
__global__ void heads_k(const Tx *x, Ty *y, size_t total, int seq, int heads,
                        int dh) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x) {
    int c = (int)(i % dh);
    size_t r = i / dh;
    int t = (int)(r % seq);
    size_t bh = r / seq;
    int h = (int)(bh % heads);
    size_t b = bh / heads;
    size_t flat = ((b * seq + t) * heads + h) * dh + c;
    if (SPLIT) st(y, i, ld(x, flat));
    else st(y, flat, ld(x, i));
  }
}

template <bool SPLIT>
static int heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                    int batch, int seq, int heads, int dh) {
  size_t total = (size_t)batch * seq * heads * dh;
  unsigned grid = cuda_grid(e, total, THREADS);
  cudaStream_t s = cuda_stream(e);
  WITH_T(xt, {
    typedef T TX;
    WITH_T(yt, (heads_k<TX, T, SPLIT><<<grid, THREADS, 0, s>>>(
                   (const TX *)x, (T *)y, total, seq, heads, dh)));
  });
  CHECK_LAUNCH();
  return 0;
}

static int split_heads_ex(engine *e, const void *x, dtype xt, void *y,
                          dtype yt, int batch, int seq, int heads, int dh) {
  return heads_ex<true>(e, x, xt, y, yt, batch, seq, heads, dh);
}

static int merge_heads_ex(engine *e, const void *x, dtype xt, void *y,
                          dtype yt, int batch, int seq, int heads, int dh) {
  return heads_ex<false>(e, x, xt, y, yt, batch, seq, heads, dh);
}

/* ---- SwiGLU, typed ---------------------------------------------------------- */

template <typename T>
__global__ void swiglu_fwd_ex_k(const T *a, const T *b, T *h, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float x = ld(a, i), sg = 1.0f / (1.0f + expf(-x));
    st(h, i, x * sg * ld(b, i));
  }
}

template <typename T>
__global__ void swiglu_bwd_ex_k(const T *dh, const T *a, const T *b, T *da,
                                T *db, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float x = ld(a, i), y = ld(b, i), g = ld(dh, i);
    float sg = 1.0f / (1.0f + expf(-x));
    float silu = x * sg;
    st(da, i, g * y * (sg + silu * (1.0f - sg)));
    st(db, i, g * silu);
  }
}

static int swiglu_fwd_ex(engine *e, const void *a, const void *b, void *h,
                         dtype lt, size_t n) {
  unsigned grid = cuda_grid(e, n, THREADS);
  WITH_T(lt, (swiglu_fwd_ex_k<T><<<grid, THREADS, 0, cuda_stream(e)>>>(
                 (const T *)a, (const T *)b, (T *)h, n)));
  CHECK_LAUNCH();
  return 0;
}

static int swiglu_bwd_ex(engine *e, const void *dh, const void *a,
                         const void *b, void *da, void *db, dtype lt,
                         size_t n) {
  unsigned grid = cuda_grid(e, n, THREADS);
  WITH_T(lt, (swiglu_bwd_ex_k<T><<<grid, THREADS, 0, cuda_stream(e)>>>(
                 (const T *)dh, (const T *)a, (const T *)b, (T *)da, (T *)db,
                 n)));
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

static int cross_entropy_bwd_ex(engine *e, const float *logits,
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

/* ---- AdamW with the low-precision copy -------------------------------------- */

template <typename T>
__global__ void adamw_ex_k(float *p, T *pl, const float *g, float *m,
                           float *v, size_t n, float b1, float b2,
                           float one_b1, float one_b2, float eps, float step,
                           float decay) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nv = n / 4;
  for (size_t i = i0; i < nv; i += stride) {
    float4 pp = ((float4 *)p)[i], gg = ((const float4 *)g)[i],
           mm = ((float4 *)m)[i], vv = ((float4 *)v)[i];
    float *P = &pp.x, *G = &gg.x, *M = &mm.x, *V = &vv.x;
#pragma unroll
    for (int c = 0; c < 4; c++) {
      M[c] = b1 * M[c] + one_b1 * G[c];
      V[c] = b2 * V[c] + one_b2 * (G[c] * G[c]);
      P[c] = P[c] * decay - step * M[c] / (sqrtf(V[c]) + eps);
      st(pl, 4 * i + c, P[c]);
    }
    ((float4 *)p)[i] = pp;
    ((float4 *)m)[i] = mm;
    ((float4 *)v)[i] = vv;
  }
  for (size_t i = nv * 4 + i0; i < n; i += stride) {
    float mi = b1 * m[i] + one_b1 * g[i];
    float vi = b2 * v[i] + one_b2 * (g[i] * g[i]);
    float pi = p[i] * decay - step * mi / (sqrtf(vi) + eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    st(pl, i, pi);
  }
}

static int adamw_ex(engine *e, float *p, void *p_low, dtype lt,
                    const float *g, float *m, float *v, size_t n, float lr,
                    float b1, float b2, float eps, float wd, long long t) {
  if (p_low == NULL || p_low == (void *)p || lt == DT_F32 ||
      !(aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v))) {
    TRY(cuda_adamw(e, p, g, m, v, n, lr, b1, b2, eps, wd, t));
    if (p_low && p_low != (void *)p)
      TRY(cuda_cast(e, p, DT_F32, p_low, lt, n));
    return 0;
  }
  /* The same scalars as cuda_adamw (adamw.cu), so p's bits are the same. */
  double step = (double)lr * sqrt(1.0 - pow(b2, (double)t)) /
                (1.0 - pow(b1, (double)t));
  unsigned grid = cuda_grid(e, (n + 3) / 4, THREADS);
  WITH_T(lt, (adamw_ex_k<T><<<grid, THREADS, 0, cuda_stream(e)>>>(
                 p, (T *)p_low, g, m, v, n, b1, b2, (float)(1.0 - (double)b1),
                 (float)(1.0 - (double)b2), eps, (float)step,
                 (float)(1.0 - (double)lr * wd))));
  CHECK_LAUNCH();
  return 0;
}

/* ---- loss-scale unscaling ------------------------------------------------------ */

/* g *= s; any non-finite result clears *ok (a plain store: every writer
 * writes the same 0, so no atomic is needed). */
__global__ void unscale_k(float *g, size_t n, float s, int *ok) {
  bool bad = false;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float v = g[i] * s;
    g[i] = v;
    bad |= !isfinite(v);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *ok = 0;
}

static int grad_unscale(engine *e, float *g, size_t n, float inv_scale,
                        int *finite) {
  int *flag;
  TRY(cuda_workspace(e, sizeof(int), (void **)&flag));
  cudaStream_t s = cuda_stream(e);
  int one = 1;
  CHECK_CUDA(cudaMemcpyAsync(flag, &one, sizeof one, cudaMemcpyHostToDevice,
                             s));
  unscale_k<<<cuda_grid(e, n, THREADS), THREADS, 0, s>>>(g, n, inv_scale,
                                                          flag);
  CHECK_LAUNCH();
  CHECK_CUDA(cudaMemcpyAsync(finite, flag, sizeof *finite,
                             cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  return 0;
}

const fused_ops cuda_fused_ops = {
  .matmul_ex = cuda_matmul_ex,
  .add_rmsnorm_fwd = add_rmsnorm_fwd,
  .rmsnorm_bwd_ex = rmsnorm_bwd_ex,
  .qkv_split_rope = qkv_split_rope,
  .qkv_merge_rope_bwd = qkv_merge_rope_bwd,
  .split_heads_ex = split_heads_ex,
  .merge_heads_ex = merge_heads_ex,
  .swiglu_fwd_ex = swiglu_fwd_ex,
  .swiglu_bwd_ex = swiglu_bwd_ex,
  .cross_entropy_bwd_ex = cross_entropy_bwd_ex,
  .adamw_ex = adamw_ex,
  .grad_unscale = grad_unscale,
};
