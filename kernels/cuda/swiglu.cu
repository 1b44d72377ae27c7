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
