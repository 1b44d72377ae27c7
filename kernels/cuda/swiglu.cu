/* The SwiGLU gate on the CUDA engine, elementwise over n elements.
 *
 *   forward   h = silu(a) * b,  silu(z) = z * sigmoid(z)
 *   backward  da = dh * b * silu'(a),  db = dh * silu(a)      (written)
 *             silu'(z) = sigmoid(z) * (1 + z * (1 - sigmoid(z)))
 *
 * fp32, sigmoid(z) = 1/(1+expf(-z)) (full-precision expf; safe at both
 * ends: exp overflows to inf and the sigmoid to 0, never NaN). Grid-stride
 * loops over float4 when every pointer is 16-byte aligned, the n % 4 tail
 * element by element. Each thread reads all its inputs before writing, so
 * outputs may alias inputs element for element (da != db: engine.c). */
#include "kernels/cuda/common.cuh"

enum { THREADS = 256 };

__device__ __forceinline__ float sigmoidf_(float z) {
  return 1.0f / (1.0f + expf(-z));
}

__device__ __forceinline__ float swiglu1(float a, float b) {
  return a * sigmoidf_(a) * b;
}

__device__ __forceinline__ void swiglu1_bwd(float g, float a, float b,
                                            float &da, float &db) {
  float s = sigmoidf_(a);
  da = g * b * s * (1.0f + a * (1.0f - s));
  db = g * a * s;
}

template <bool VEC>
__global__ void swiglu_fwd_k(const float *a, const float *b, float *h,
                             size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nv = VEC ? n / 4 : 0;
  if (VEC)
    for (size_t i = i0; i < nv; i += stride) {
      float4 x = ((const float4 *)a)[i], y = ((const float4 *)b)[i];
      ((float4 *)h)[i] = make_float4(swiglu1(x.x, y.x), swiglu1(x.y, y.y),
                                     swiglu1(x.z, y.z), swiglu1(x.w, y.w));
    }
  for (size_t i = nv * 4 + i0; i < n; i += stride) h[i] = swiglu1(a[i], b[i]);
}

template <bool VEC>
__global__ void swiglu_bwd_k(const float *dh, const float *a, const float *b,
                             float *da, float *db, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nv = VEC ? n / 4 : 0;
  if (VEC)
    for (size_t i = i0; i < nv; i += stride) {
      float4 g = ((const float4 *)dh)[i], x = ((const float4 *)a)[i],
             y = ((const float4 *)b)[i], oa, ob;
      swiglu1_bwd(g.x, x.x, y.x, oa.x, ob.x);
      swiglu1_bwd(g.y, x.y, y.y, oa.y, ob.y);
      swiglu1_bwd(g.z, x.z, y.z, oa.z, ob.z);
      swiglu1_bwd(g.w, x.w, y.w, oa.w, ob.w);
      ((float4 *)da)[i] = oa;
      ((float4 *)db)[i] = ob;
    }
  for (size_t i = nv * 4 + i0; i < n; i += stride) {
    float oa, ob;
    swiglu1_bwd(dh[i], a[i], b[i], oa, ob);
    da[i] = oa;
    db[i] = ob;
  }
}

int cuda_swiglu_fwd(engine *e, const float *a, const float *b, float *h,
                    size_t n) {
  bool vec = aligned16(a) && aligned16(b) && aligned16(h);
  unsigned grid = cuda_grid(e, vec ? (n + 3) / 4 : n, THREADS);
  if (vec) swiglu_fwd_k<true><<<grid, THREADS, 0, cuda_stream(e)>>>(a, b, h, n);
  else swiglu_fwd_k<false><<<grid, THREADS, 0, cuda_stream(e)>>>(a, b, h, n);
  CHECK_LAUNCH();
  return 0;
}

int cuda_swiglu_bwd(engine *e, const float *dh, const float *a,
                    const float *b, float *da, float *db, size_t n) {
  bool vec = aligned16(dh) && aligned16(a) && aligned16(b) && aligned16(da) &&
             aligned16(db);
  unsigned grid = cuda_grid(e, vec ? (n + 3) / 4 : n, THREADS);
  if (vec) swiglu_bwd_k<true><<<grid, THREADS, 0, cuda_stream(e)>>>(dh, a, b, da, db, n);
  else swiglu_bwd_k<false><<<grid, THREADS, 0, cuda_stream(e)>>>(dh, a, b, da, db, n);
  CHECK_LAUNCH();
  return 0;
}

/* ---- SwiGLU, typed ---------------------------------------------------------- */

/* The typed kernels' own element forms: the same function as swiglu1 and
 * swiglu1_bwd above with the operations in another order, kept so their
 * results stay bit for bit what they were. */
__device__ __forceinline__ void swiglu1_ex(float x, float y, float &h) {
  h = x / (1.0f + expf(-x)) * y;
}
__device__ __forceinline__ void swiglu1_bwd_ex(float g, float x, float y,
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
    for (int c = 0; c < 4; c++) swiglu1_ex(x[c], y[c], o[c]);
    st4(h, 4 * i, o);
  }
  for (size_t i = 4 * nv + i0; i < n; i += stride) {
    float o;
    swiglu1_ex(ld(a, i), ld(b, i), o);
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
    for (int c = 0; c < 4; c++) swiglu1_bwd_ex(g[c], x[c], y[c], p[c], q[c]);
    st4(da, 4 * i, p);
    st4(db, 4 * i, q);
    if (h) {
      for (int c = 0; c < 4; c++) swiglu1_ex(x[c], y[c], o[c]);
      st4(h, 4 * i, o);
    }
  }
  for (size_t i = 4 * nv + i0; i < n; i += stride) {
    float p, q, x = ld(a, i), y = ld(b, i);
    swiglu1_bwd_ex(ld(dh, i), x, y, p, q);
    st(da, i, p);
    st(db, i, q);
    if (h) {
      swiglu1_ex(x, y, p);
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
