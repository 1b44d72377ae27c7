/* The fused path on the CUDA engine (kernels.h, "the fused path"): each
 * kernel does in one pass over memory what a chain of the plain operations
 * does, and reads / writes activations in the products' input dtype T
 * (float, bf16 or f16; math always in fp32). Shapes: N = B*T rows,
 * D = H*Dh, per-head tensors [B, H, T, Dh].
 *
 *   add_rmsnorm_fwd    sum = a + b; y(T) = sum * rstd * g      one block/row
 *   rmsnorm_bwd_ex     dx = dres + rstd*g*dy - x*rstd^3*mean(g*dy*x), dy
 *                      in T, dx in fp32 and rounded to T; dg by rmsnorm.cu's
 *                      deterministic column sums
 *   qkv_split_rope     [N, 3D] (T) -> q, k, v (T), RoPE on q, k (angles in
 *                      double, as k_rope computes them, once per call into
 *                      a (cos, sin) table; the rotation in fp32)
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
#include <initializer_list>
#include <math.h>
#include <stdint.h>

enum { THREADS = 256 };

/* ---- typed loads and stores ------------------------------------------------ */

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

/* Four consecutive elements at p + i (i a multiple of 4, the address 4 *
 * sizeof(T) aligned): one 16-byte (float) or 8-byte (16-bit) access. The
 * 16-bit pairs round with __floats2*2_rn: nearest even, as st(). */
__device__ __forceinline__ void ld4(const float *p, size_t i, float v[4]) {
  float4 q = *(const float4 *)(p + i);
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
__device__ __forceinline__ void ld4(const __nv_bfloat16 *p, size_t i,
                                    float v[4]) {
  uint2 q = *(const uint2 *)(p + i);
  float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&q.x);
  float2 b = __bfloat1622float2(*(const __nv_bfloat162 *)&q.y);
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}
__device__ __forceinline__ void ld4(const __half *p, size_t i, float v[4]) {
  uint2 q = *(const uint2 *)(p + i);
  float2 a = __half22float2(*(const __half2 *)&q.x);
  float2 b = __half22float2(*(const __half2 *)&q.y);
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}
__device__ __forceinline__ void st4(float *p, size_t i, const float v[4]) {
  *(float4 *)(p + i) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void st4(__nv_bfloat16 *p, size_t i,
                                    const float v[4]) {
  __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]);
  __nv_bfloat162 b = __floats2bfloat162_rn(v[2], v[3]);
  uint2 q;
  q.x = *(const unsigned *)&a;
  q.y = *(const unsigned *)&b;
  *(uint2 *)(p + i) = q;
}
__device__ __forceinline__ void st4(__half *p, size_t i, const float v[4]) {
  __half2 a = __floats2half2_rn(v[0], v[1]);
  __half2 b = __floats2half2_rn(v[2], v[3]);
  uint2 q;
  q.x = *(const unsigned *)&a;
  q.y = *(const unsigned *)&b;
  *(uint2 *)(p + i) = q;
}

/* Every pointer can take 4-element accesses (16 bytes for float, 8 for
 * 16-bit: aligned to 16 covers both). */
static bool vec4_ok(std::initializer_list<const void *> ps) {
  for (const void *p : ps)
    if (p && ((uintptr_t)p & 15u) != 0) return false;
  return true;
}

/* ---- residual add + RMSNorm ------------------------------------------------- */

/* VEC: d % 4 == 0 and every row 16-byte aligned, 4 columns per access. */
template <typename T, bool VEC>
__global__ void add_rmsnorm_k(const float *a, const float *b, float *sum,
                              const float *g, T *y, float *rstd, int d,
                              float eps) {
  __shared__ float sh[32];
  size_t row = blockIdx.x, o = row * d;
  float ss = 0.0f;
  if (VEC) {
    for (int j = 4 * threadIdx.x; j < d; j += 4 * blockDim.x) {
      float x[4], z[4] = {0, 0, 0, 0};
      ld4(a, o + j, x);
      if (b) ld4(b, o + j, z);
      for (int c = 0; c < 4; c++) { x[c] += z[c]; ss += x[c] * x[c]; }
      if (sum) st4(sum, o + j, x);
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
      float x = a[o + j] + (b ? b[o + j] : 0.0f);
      if (sum) sum[o + j] = x;
      ss += x * x;
    }
  }
  ss = block_sum(ss, sh);
  float r = 1.0f / sqrtf(ss / (float)d + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  if (VEC) {
    for (int j = 4 * threadIdx.x; j < d; j += 4 * blockDim.x) {
      float x[4], z[4] = {0, 0, 0, 0}, w[4];
      ld4(a, o + j, x);
      if (b) ld4(b, o + j, z);
      ld4(g, j, w);
      for (int c = 0; c < 4; c++) x[c] = (x[c] + z[c]) * r * w[c];
      st4(y, o + j, x);
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
      float x = a[o + j] + (b ? b[o + j] : 0.0f);
      st(y, o + j, x * r * g[j]);
    }
  }
}

int cuda_add_rmsnorm_fwd(engine *e, const float *a, const float *b, float *sum,
                         const float *g, void *y, dtype yt, float *rstd, int n,
                         int d, float eps) {
  if (sum == a) sum = NULL;
  bool vec = d % 4 == 0 && vec4_ok({a, b, sum, g, y});
  int threads = row_threads(vec ? d / 4 : d);
  cudaStream_t s = cuda_stream(e);
  if (vec)
    WITH_T(yt, (add_rmsnorm_k<T, true><<<n, threads, 0, s>>>(
                   a, b, sum, g, (T *)y, rstd, d, eps)));
  else
    WITH_T(yt, (add_rmsnorm_k<T, false><<<n, threads, 0, s>>>(
                   a, b, sum, g, (T *)y, rstd, d, eps)));
  CHECK_LAUNCH();
  return 0;
}

/* ---- RMSNorm backward with the residual gradient ---------------------------- */

template <typename T, bool VEC>
__global__ void rmsnorm_dx_ex_k(const T *dy, const float *x,
                                const float *g, const float *rstd,
                                const float *dres, float *dx, T *dx_low,
                                int d) {
  __shared__ float sh[32];
  size_t row = blockIdx.x, o = row * d;
  float dot = 0.0f;
  if (VEC) {
    for (int j = 4 * threadIdx.x; j < d; j += 4 * blockDim.x) {
      float gg[4], yy[4], xx[4];
      ld4(g, j, gg);
      ld4(dy, o + j, yy);
      ld4(x, o + j, xx);
      for (int c = 0; c < 4; c++) dot += gg[c] * yy[c] * xx[c];
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x)
      dot += g[j] * ld(dy, o + j) * x[o + j];
  }
  dot = block_sum(dot, sh);
  float r = rstd[row];
  float c = r * r * r * (dot / (float)d);
  if (VEC) {
    for (int j = 4 * threadIdx.x; j < d; j += 4 * blockDim.x) {
      float gg[4], yy[4], xx[4], rr[4] = {0, 0, 0, 0}, v[4];
      ld4(g, j, gg);
      ld4(dy, o + j, yy);
      ld4(x, o + j, xx);
      if (dres) ld4(dres, o + j, rr);
      for (int k = 0; k < 4; k++) v[k] = r * gg[k] * yy[k] - xx[k] * c + rr[k];
      st4(dx, o + j, v);
      if (dx_low) st4(dx_low, o + j, v);
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
      float v = r * g[j] * ld(dy, o + j) - x[o + j] * c;
      if (dres) v += dres[o + j];
      dx[o + j] = v;
      if (dx_low) st(dx_low, o + j, v);
    }
  }
}

int cuda_rmsnorm_bwd_ex(engine *e, const void *dy, const float *x,
                        const float *g, const float *rstd, const float *dres,
                        float *dx, void *dx_low, dtype lt, float *dg, int n,
                        int d) {
  /* dg reads dy before dx may overwrite dres (dx == dres is allowed; dy is
   * never dx, engine_fused.c refuses it). */
  TRY(cuda_rmsnorm_dg_t(e, dy, lt, x, rstd, dg, n, d));
  if (dx_low == (void *)dx) dx_low = NULL;
  bool vec = d % 4 == 0 && vec4_ok({dy, x, g, dres, dx, dx_low});
  int threads = row_threads(vec ? d / 4 : d);
  cudaStream_t s = cuda_stream(e);
  if (vec)
    WITH_T(lt, (rmsnorm_dx_ex_k<T, true><<<n, threads, 0, s>>>(
                   (const T *)dy, x, g, rstd, dres, dx, (T *)dx_low, d)));
  else
    WITH_T(lt, (rmsnorm_dx_ex_k<T, false><<<n, threads, 0, s>>>(
                   (const T *)dy, x, g, rstd, dres, dx, (T *)dx_low, d)));
  CHECK_LAUNCH();
  return 0;
}

/* ---- q, k, v: split heads and RoPE ------------------------------------------- */

/* cs[t * half + j] = (cos, sin)(t * theta^(-2j/Dh)), computed in double as
 * k_rope computes its angles, rounded to float once. */
__global__ void rope_table_k(float2 *cs, int seq, int half, int dh,
                             double theta) {
  int n = seq * half;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    int t = i / half, j = i % half;
    double sn, c;
    sincos(t * pow(theta, -2.0 * j / dh), &sn, &c);
    cs[i] = make_float2((float)c, (float)sn);
  }
}

/* One block per row r = b*T + t; its threads walk the row's (head h,
 * quad q) pairs: elements 4q .. 4q+3 (RoPE pairs 2q and 2q+1) of q, k and
 * v, q and k rotated, v copied. fwd: [N, 3D] -> three [B, H, T, Dh]; bwd
 * (INV): three [B, H, T, Dh] -> [N, 3D], rotating back. dh % 4 == 0 and
 * 16-byte aligned tensors (the host checks). Rows by block and 32-bit
 * index math: a flat 64-bit index split by % and / per quad made these
 * passes instruction-bound (the 2.7B step's rope+heads took 3.1 ms for
 * 2.0 ms of memory traffic on an H100). */
template <typename Tin, typename Tout, bool INV>
__global__ void qkv_rope_k(const Tin *qkv, const Tin *q, const Tin *k,
                           const Tin *v, Tout *oqkv, Tout *oq, Tout *ok,
                           Tout *ov, const float2 *cs, int seq, int heads,
                           int dh) {
  const int nq = dh / 4, D = heads * dh, half = dh / 2;
  const unsigned r = blockIdx.x, t = r % (unsigned)seq, b = r / (unsigned)seq;
  const size_t flat0 = (size_t)r * 3 * D;
  for (int j = threadIdx.x; j < heads * nq; j += blockDim.x) {
    int h = j / nq, qd = j - h * nq;
    float2 c0 = cs[(size_t)t * half + 2 * qd], c1 = cs[(size_t)t * half + 2 * qd + 1];
    if (INV) { c0.y = -c0.y; c1.y = -c1.y; }
    size_t flat = flat0 + 4 * (size_t)j;                               /* [N,3D] */
    size_t head = (((size_t)b * heads + h) * seq + t) * dh + 4 * qd;  /* [B,H,T,Dh] */
#pragma unroll
    for (int p = 0; p < 3; p++) {
      float x[4], y[4];
      if (!INV) ld4(qkv, flat + (size_t)p * D, x);
      else ld4(p == 0 ? q : p == 1 ? k : v, head, x);
      if (p < 2) {
        y[0] = x[0] * c0.x - x[1] * c0.y;
        y[1] = x[0] * c0.y + x[1] * c0.x;
        y[2] = x[2] * c1.x - x[3] * c1.y;
        y[3] = x[2] * c1.y + x[3] * c1.x;
      } else {
        y[0] = x[0]; y[1] = x[1]; y[2] = x[2]; y[3] = x[3];
      }
      if (!INV) st4(p == 0 ? oq : p == 1 ? ok : ov, head, y);
      else st4(oqkv, flat + (size_t)p * D, y);
    }
  }
}

/* The angle table, kept by the engine: a row depends on t, dh and theta
 * only, so one table serves every layer, both directions and every shorter
 * sequence. Remaking it per call cost the 2.7B step 64 launches of double-
 * precision sincos. A different dh or theta, or a longer sequence, remakes
 * it (cuda_release: kernels in flight or recorded graphs may still read the
 * old one). */
static int rope_table(engine *e, int seq, int dh, float theta, float2 **cs) {
  cuda_engine *c = cuda_impl(e);
  int half = dh / 2;
  if (!c->rope_cs || seq > c->rope_seq || dh != c->rope_dh ||
      theta != c->rope_theta) {
    if (c->rope_cs) {
      TRY(cuda_release(e, c->rope_cs));
      c->rope_cs = NULL;
    }
    TRY(eng_alloc(e, (size_t)seq * half * sizeof(float2), "rope_table",
                  &c->rope_cs));
    c->rope_seq = seq;
    c->rope_dh = dh;
    c->rope_theta = theta;
    rope_table_k<<<cuda_grid(e, (size_t)seq * half, THREADS), THREADS, 0,
                   cuda_stream(e)>>>((float2 *)c->rope_cs, seq, half, dh,
                                     (double)theta);
    CHECK_LAUNCH();
  }
  *cs = (float2 *)c->rope_cs;
  return 0;
}

static int need_quads(const char *op, int dh,
                      std::initializer_list<const void *> ps) {
  if (dh % 4 != 0 || !vec4_ok(ps))
    FAIL(ERR_FAIL, "%s: the CUDA engine needs dh %% 4 == 0 (got %d) and "
         "16-byte aligned tensors", op, dh);
  return 0;
}

int cuda_qkv_split_rope(engine *e, const void *qkv, void *q, void *k, void *v,
                        dtype lt, int batch, int seq, int heads, int dh,
                        float theta) {
  TRY(need_quads("k_qkv_split_rope", dh, {qkv, q, k, v}));
  float2 *cs;
  TRY(rope_table(e, seq, dh, theta, &cs));
  unsigned rows = (unsigned)batch * (unsigned)seq;
  int threads = row_threads((long long)heads * (dh / 4));
  WITH_T(lt, (qkv_rope_k<T, T, false><<<rows, threads, 0, cuda_stream(e)>>>(
                 (const T *)qkv, NULL, NULL, NULL, NULL, (T *)q, (T *)k,
                 (T *)v, cs, seq, heads, dh)));
  CHECK_LAUNCH();
  return 0;
}

int cuda_qkv_merge_rope_bwd(engine *e, const void *dq, const void *dk,
                            const void *dv, void *dqkv, dtype lt, int batch,
                            int seq, int heads, int dh, float theta) {
  TRY(need_quads("k_qkv_merge_rope_bwd", dh, {dq, dk, dv, dqkv}));
  float2 *cs;
  TRY(rope_table(e, seq, dh, theta, &cs));
  unsigned rows = (unsigned)batch * (unsigned)seq;
  int threads = row_threads((long long)heads * (dh / 4));
  WITH_T(lt, (qkv_rope_k<T, T, true><<<rows, threads, 0, cuda_stream(e)>>>(
                 NULL, (const T *)dq, (const T *)dk, (const T *)dv, (T *)dqkv,
                 NULL, NULL, NULL, cs, seq, heads, dh)));
  CHECK_LAUNCH();
  return 0;
}

/* ---- head layout, typed --------------------------------------------------- */

/* SPLIT: x [B, T, H*Dh] -> y [B, H, T, Dh]; else the reverse. One block
 * per row r = b*T + t of the [B, T, H*Dh] side, its threads walking the
 * row W = 4 (VEC: dh % 4 == 0, aligned) or 1 elements at a time, with
 * 32-bit index math (see qkv_rope_k). */
template <typename Tx, typename Ty, bool SPLIT, bool VEC>
__global__ void heads_k(const Tx *x, Ty *y, int seq, int heads, int dh) {
  const int W = VEC ? 4 : 1, D = heads * dh;
  const unsigned r = blockIdx.x, t = r % (unsigned)seq, b = r / (unsigned)seq;
  for (int j = threadIdx.x * W; j < D; j += blockDim.x * W) {
    int h = j / dh, c = j - h * dh;
    size_t flat = (size_t)r * D + j;
    size_t e = (((size_t)b * heads + h) * seq + t) * dh + c;
    size_t src = SPLIT ? flat : e, dst = SPLIT ? e : flat;
    if (VEC) {
      float v[4];
      ld4(x, src, v);
      st4(y, dst, v);
    } else {
      st(y, dst, ld(x, src));
    }
  }
}

template <bool SPLIT>
static int heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                    int batch, int seq, int heads, int dh) {
  if ((long long)batch * seq * heads * dh == 0) return 0;
  bool vec = dh % 4 == 0 && vec4_ok({x, y});
  unsigned rows = (unsigned)batch * (unsigned)seq;
  int threads = row_threads((long long)heads * dh / (vec ? 4 : 1));
  cudaStream_t s = cuda_stream(e);
  WITH_T(xt, {
    typedef T TX;
    if (vec)
      WITH_T(yt, (heads_k<TX, T, SPLIT, true><<<rows, threads, 0, s>>>(
                     (const TX *)x, (T *)y, seq, heads, dh)));
    else
      WITH_T(yt, (heads_k<TX, T, SPLIT, false><<<rows, threads, 0, s>>>(
                     (const TX *)x, (T *)y, seq, heads, dh)));
  });
  CHECK_LAUNCH();
  return 0;
}

int cuda_split_heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                        int batch, int seq, int heads, int dh) {
  return heads_ex<true>(e, x, xt, y, yt, batch, seq, heads, dh);
}

int cuda_merge_heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                        int batch, int seq, int heads, int dh) {
  return heads_ex<false>(e, x, xt, y, yt, batch, seq, heads, dh);
}

/* ---- SwiGLU, typed ---------------------------------------------------------- */

__device__ __forceinline__ void swiglu1(float x, float y, float &h) {
  h = x / (1.0f + expf(-x)) * y;
}
__device__ __forceinline__ void swiglu1_bwd(float g, float x, float y,
                                            float &da, float &db) {
  float sg = 1.0f / (1.0f + expf(-x)), silu = x * sg;
  da = g * y * (sg + silu * (1.0f - sg));
  db = g * silu;
}

/* VEC: 4 elements per access (every pointer 16-byte aligned), then the
 * n % 4 tail one by one. */
template <typename T, bool VEC>
__global__ void swiglu_fwd_ex_k(const T *a, const T *b, T *h, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t nv = VEC ? n / 4 : 0;
  for (size_t i = i0; i < nv; i += stride) {
    float x[4], y[4], o[4];
    ld4(a, 4 * i, x);
    ld4(b, 4 * i, y);
    for (int c = 0; c < 4; c++) swiglu1(x[c], y[c], o[c]);
    st4(h, 4 * i, o);
  }
  for (size_t i = 4 * nv + i0; i < n; i += stride) {
    float o;
    swiglu1(ld(a, i), ld(b, i), o);
    st(h, i, o);
  }
}

/* h (optional): the forward's product from the same loads. */
template <typename T, bool VEC>
__global__ void swiglu_bwd_ex_k(const T *dh, const T *a, const T *b, T *da,
                                T *db, T *h, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t nv = VEC ? n / 4 : 0;
  for (size_t i = i0; i < nv; i += stride) {
    float g[4], x[4], y[4], p[4], q[4], o[4];
    ld4(dh, 4 * i, g);
    ld4(a, 4 * i, x);
    ld4(b, 4 * i, y);
    for (int c = 0; c < 4; c++) swiglu1_bwd(g[c], x[c], y[c], p[c], q[c]);
    st4(da, 4 * i, p);
    st4(db, 4 * i, q);
    if (h) {
      for (int c = 0; c < 4; c++) swiglu1(x[c], y[c], o[c]);
      st4(h, 4 * i, o);
    }
  }
  for (size_t i = 4 * nv + i0; i < n; i += stride) {
    float p, q, x = ld(a, i), y = ld(b, i);
    swiglu1_bwd(ld(dh, i), x, y, p, q);
    st(da, i, p);
    st(db, i, q);
    if (h) {
      swiglu1(x, y, p);
      st(h, i, p);
    }
  }
}

int cuda_swiglu_fwd_ex(engine *e, const void *a, const void *b, void *h,
                       dtype lt, size_t n) {
  bool vec = vec4_ok({a, b, h});
  unsigned grid = cuda_grid(e, vec ? (n + 3) / 4 : n, THREADS);
  cudaStream_t s = cuda_stream(e);
  if (vec)
    WITH_T(lt, (swiglu_fwd_ex_k<T, true><<<grid, THREADS, 0, s>>>(
                   (const T *)a, (const T *)b, (T *)h, n)));
  else
    WITH_T(lt, (swiglu_fwd_ex_k<T, false><<<grid, THREADS, 0, s>>>(
                   (const T *)a, (const T *)b, (T *)h, n)));
  CHECK_LAUNCH();
  return 0;
}

int cuda_swiglu_bwd_ex(engine *e, const void *dh, const void *a, const void *b,
                       void *da, void *db, void *h, dtype lt, size_t n) {
  bool vec = vec4_ok({dh, a, b, da, db, h});
  unsigned grid = cuda_grid(e, vec ? (n + 3) / 4 : n, THREADS);
  cudaStream_t s = cuda_stream(e);
  if (vec)
    WITH_T(lt, (swiglu_bwd_ex_k<T, true><<<grid, THREADS, 0, s>>>(
                   (const T *)dh, (const T *)a, (const T *)b, (T *)da,
                   (T *)db, (T *)h, n)));
  else
    WITH_T(lt, (swiglu_bwd_ex_k<T, false><<<grid, THREADS, 0, s>>>(
                   (const T *)dh, (const T *)a, (const T *)b, (T *)da,
                   (T *)db, (T *)h, n)));
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
    }
    st4(pl, 4 * i, P);   /* one 8-byte store of the four 16-bit copies */
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

int cuda_adamw_ex(engine *e, float *p, void *p_low, dtype lt, const float *g,
                  float *m, float *v, size_t n, float lr, float b1, float b2,
                  float eps, float wd, long long t) {
  if (p_low == NULL || p_low == (void *)p || lt == DT_F32 ||
      !(aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v) &&
        aligned16(p_low))) {
    TRY(cuda_adamw_mean(e, p, &g, 1, m, v, n, lr, b1, b2, eps, wd, t));
    if (p_low && p_low != (void *)p)
      TRY(cuda_cast(e, p, DT_F32, p_low, lt, n));
    return 0;
  }
  /* The same scalars as cuda_adamw_mean (adamw.cu), so p's bits are the same. */
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

int cuda_grad_unscale(engine *e, float *g, size_t n, float inv_scale,
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
