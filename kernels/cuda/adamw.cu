/* The course's AdamW (shared/spec/model.md) on the CUDA engine, step t >= 1,
 * over n elements of parameters p, gradients g and moments m, v:
 *
 *   p -= lr * wd * p
 *   m  = b1 * m + (1 - b1) * g
 *   v  = b2 * v + (1 - b2) * g^2
 *   p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
 *
 * One pass, grid-stride, float4 when all four buffers are 16-byte aligned:
 * 16 bytes read and 12 written per element. The bias-corrected step size
 * and the decay factor 1 - lr*wd are computed once in double on the host
 * (as the CPU engine does) and rounded to fp32; each element's update is in
 * fp32, as PyTorch's fused AdamW does for fp32 parameters.
 *
 * k_adamw_mean: g is the mean of ng arrays (the ranks' gathered gradients),
 * summed in fp32 in index order and times 1/ng: 4 more bytes read per
 * element and array, no pass of its own. Capped (eng_ctx.adamw_blocks):
 * the same arithmetic in the same order, so the same bits. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/wgmma.cuh"

#include <math.h>
#include <type_traits>

enum { THREADS = 256 };

struct adamw_args {
  float b1, b2, one_b1, one_b2, eps, step, decay, inv_ng;
  int ng;
  const float *g[K_ADAMW_MAX_GRADS];
  /* not NULL: the step size, read when the kernel runs (k_adamw_ex's
   * step_dev, for CUDA graphs' replays), in place of step */
  const float *step_dev;
};

/* a.step from a.step_dev where there is one: each kernel's first act */
__device__ __forceinline__ void step_from_dev(adamw_args &a) {
  if (a.step_dev) a.step = *a.step_dev;
}

/* NG is a template argument so a.g[k] is indexed statically: indexed at
 * run time, the argument array goes to local memory (measured: AdamW 60%
 * slower). */
template <int NG>
__device__ __forceinline__ float grad1(const adamw_args &a, size_t i) {
  float s = a.g[0][i];
#pragma unroll
  for (int k = 1; k < NG; k++) s += a.g[k][i];
  return NG == 1 ? s : s * a.inv_ng;
}

/* The mean of NG float4 groups, group i of src[0..NG) (gradient copies in
 * global memory, or a stage's copies in shared memory), summed in index
 * order: every form gives the same bits. */
template <int NG>
__device__ __forceinline__ float4 mean4(const float *const *src, size_t i,
                                        float inv_ng) {
  float4 s = ((const float4 *)src[0])[i];
#pragma unroll
  for (int k = 1; k < NG; k++) {
    float4 t = ((const float4 *)src[k])[i];
    s.x += t.x;
    s.y += t.y;
    s.z += t.z;
    s.w += t.w;
  }
  if (NG > 1) {
    s.x *= inv_ng;
    s.y *= inv_ng;
    s.z *= inv_ng;
    s.w *= inv_ng;
  }
  return s;
}

__device__ __forceinline__ void adamw1(float &p, float g, float &m, float &v,
                                       const adamw_args &a) {
  m = a.b1 * m + a.one_b1 * g;
  v = a.b2 * v + a.one_b2 * (g * g);
  p = p * a.decay - a.step * m / (sqrtf(v) + a.eps);
}

/* Group i of p, m, v updated from (pp, g, mm, vv), their old values;
 * p's new values returned (for a 16-bit copy). */
__device__ __forceinline__ float4 adamw4(float *p, float *m, float *v,
                                         size_t i, float4 pp, float4 g,
                                         float4 mm, float4 vv,
                                         const adamw_args &a) {
  adamw1(pp.x, g.x, mm.x, vv.x, a);
  adamw1(pp.y, g.y, mm.y, vv.y, a);
  adamw1(pp.z, g.z, mm.z, vv.z, a);
  adamw1(pp.w, g.w, mm.w, vv.w, a);
  ((float4 *)p)[i] = pp;
  ((float4 *)m)[i] = mm;
  ((float4 *)v)[i] = vv;
  return pp;
}

/* Elements from, from + stride, ... below n, one at a time. */
template <int NG>
__device__ __forceinline__ void adamw_scalar(float *p, float *m, float *v,
                                             size_t from, size_t n,
                                             size_t stride,
                                             const adamw_args &a) {
  for (size_t i = from; i < n; i += stride) {
    float pi = p[i], mi = m[i], vi = v[i];
    adamw1(pi, grad1<NG>(a, i), mi, vi, a);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

template <bool VEC, int NG>
__global__ void adamw_k(float *p, float *m, float *v, size_t n,
                        adamw_args a) {
  step_from_dev(a);
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nv = VEC ? n / 4 : 0;
  if (VEC)
    for (size_t i = i0; i < nv; i += stride)
      adamw4(p, m, v, i, ((float4 *)p)[i], mean4<NG>(a.g, i, a.inv_ng),
             ((float4 *)m)[i], ((float4 *)v)[i], a);
  adamw_scalar<NG>(p, m, v, nv * 4 + i0, n, stride, a);
}

/* The capped form (eng_ctx.adamw_blocks) on GPUs before Hopper: few
 * blocks, each thread taking U float4 groups a trip with all their loads
 * issued before the first update, so U times the bytes are in flight per
 * thread: few blocks with one group in flight each would wait on memory
 * most of the time. 16-byte aligned buffers only; the tail of n mod 4
 * elements as adamw_k does. */
enum { UNROLL = 4 };

template <int NG>
__global__ void __launch_bounds__(THREADS)
    adamw_capped_k(float *p, float *m, float *v, size_t n, adamw_args a) {
  step_from_dev(a);
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nv = n / 4;
  for (size_t base = i0; base < nv; base += stride * UNROLL) {
    float4 pp[UNROLL], gg[UNROLL], mm[UNROLL], vv[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      size_t i = base + u * stride;
      if (i < nv) {
        gg[u] = mean4<NG>(a.g, i, a.inv_ng);
        pp[u] = ((float4 *)p)[i];
        mm[u] = ((float4 *)m)[i];
        vv[u] = ((float4 *)v)[i];
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      size_t i = base + u * stride;
      if (i < nv) adamw4(p, m, v, i, pp[u], gg[u], mm[u], vv[u], a);
    }
  }
  adamw_scalar<NG>(p, m, v, nv * 4 + i0, n, stride, a);
}

/* The capped form on Hopper: every input arrives by bulk copies. Each of
 * the (few, persistent) blocks walks chunks of C elements, chunk c =
 * block + k * grid; one thread queues the chunk's p, m, v and gradient
 * arrays into one of S shared-memory stages with cp.async.bulk (without
 * holding a thread), all T threads update from shared memory and store p,
 * m, v, and the stage is refilled with the chunk S trips ahead. So a block
 * has S chunks in flight whatever the latency, and its threads never wait
 * on memory themselves. With one gradient array (adamw_ex, a single
 * process's AdamW) the update's arithmetic (IEEE square root and divide),
 * not memory, sets a capped block's pace: 1024 threads there, over chunks
 * of 4096 in three stages. 16-byte aligned buffers; n a multiple of 4 (the
 * caller updates the rest). One block per SM (the stages take most of the
 * shared memory), so the cap is the SMs AdamW holds. L: the type of p's
 * 16-bit copy pl, written beside p (adamw_ex); float: none (pl NULL). */
template <int NG> struct bulk_shape {
  static constexpr int T = NG == 1 ? 1024 : THREADS;   /* threads a block */
  static constexpr int S = NG == 1 ? 3 : 4;            /* stages */
  static constexpr int C = NG == 1 ? 4096 : NG == 2 ? 2048 : 1024;   /* chunk */
  static constexpr int ARRAYS = NG + 3;              /* g[0..NG), p, m, v */
  static constexpr size_t SMEM =
      (size_t)S * ARRAYS * C * sizeof(float) + S * sizeof(uint64_t);
};

template <int NG>
__device__ __forceinline__ void bulk_queue(float *stage, uint64_t *bar,
                                           const float *p, const float *m,
                                           const float *v, const adamw_args &a,
                                           size_t lo, size_t len) {
  constexpr int C = bulk_shape<NG>::C;
  uint32_t bytes = (uint32_t)(len * sizeof(float));
  mbar_expect_tx(bar, bytes * bulk_shape<NG>::ARRAYS);
#pragma unroll
  for (int k = 0; k < NG; k++) bulk_load(stage + k * C, a.g[k] + lo, bytes, bar);
  bulk_load(stage + NG * C, p + lo, bytes, bar);
  bulk_load(stage + (NG + 1) * C, m + lo, bytes, bar);
  bulk_load(stage + (NG + 2) * C, v + lo, bytes, bar);
}

template <int NG, typename L>
__global__ void __launch_bounds__(bulk_shape<NG>::T)
    adamw_bulk_k(float *p, L *pl, float *m, float *v, size_t n,
                 adamw_args a) {
#if TL_WGMMA
  step_from_dev(a);
  constexpr int C = bulk_shape<NG>::C, A = bulk_shape<NG>::ARRAYS,
                NSTAGE = bulk_shape<NG>::S;
  extern __shared__ __align__(128) float sm[];
  uint64_t *bar = (uint64_t *)(sm + (size_t)NSTAGE * A * C);
  size_t nchunks = (n + C - 1) / C;
  size_t G = gridDim.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < NSTAGE; s++) mbar_init(&bar[s], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int s = 0; s < NSTAGE; s++) {
      size_t c = blockIdx.x + s * G;
      if (c < nchunks)
        bulk_queue<NG>(sm + (size_t)s * A * C, &bar[s], p, m, v, a, c * C,
                       (size_t)C < n - c * C ? (size_t)C : n - c * C);
    }
  for (size_t k = 0;; k++) {
    size_t c = blockIdx.x + k * G;
    if (c >= nchunks) break;
    int s = (int)(k % NSTAGE);
    size_t lo = c * C, len = (size_t)C < n - lo ? (size_t)C : n - lo;
    float *st = sm + (size_t)s * A * C;
    mbar_wait(&bar[s], (int)((k / NSTAGE) & 1));
    const float *src[NG];
#pragma unroll
    for (int q = 0; q < NG; q++) src[q] = st + q * C;
    for (size_t i = threadIdx.x; i < len / 4; i += bulk_shape<NG>::T) {
      float4 np = adamw4(p + lo, m + lo, v + lo, i,
                         ((const float4 *)(st + NG * C))[i],
                         mean4<NG>(src, i, a.inv_ng),
                         ((const float4 *)(st + (NG + 1) * C))[i],
                         ((const float4 *)(st + (NG + 2) * C))[i], a);
      if (!std::is_same<L, float>::value) st4(pl + lo, 4 * i, &np.x);
    }
    __syncthreads();   /* every thread is done with stage s */
    size_t next = c + NSTAGE * G;
    if (threadIdx.x == 0 && next < nchunks) {
      size_t nlo = next * C;
      bulk_queue<NG>(st, &bar[s], p, m, v, a, nlo,
                     (size_t)C < n - nlo ? (size_t)C : n - nlo);
    }
  }
#endif
}

template <int NG, typename L>
static int launch_bulk(float *p, L *pl, float *m, float *v, size_t n,
                       const adamw_args &a, unsigned grid, cudaStream_t s) {
  /* per device, so set at every launch (a host call of microseconds) */
  size_t smem = bulk_shape<NG>::SMEM;
  CHECK_CUDA(cudaFuncSetAttribute(adamw_bulk_k<NG, L>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  size_t chunks = (n + bulk_shape<NG>::C - 1) / bulk_shape<NG>::C;
  if (grid > chunks) grid = (unsigned)chunks;
  adamw_bulk_k<NG, L><<<grid, bulk_shape<NG>::T, smem, s>>>(p, pl, m, v, n, a);
  return 0;
}

/* cuda_adamw_mean, the step size from step_dev where it is not NULL */
static int adamw_mean(engine *e, float *p, const float *const *g, int ng,
                      float *m, float *v, size_t n, float lr, float b1,
                      float b2, float eps, float wd, long long t,
                      const float *step_dev) {
  adamw_args a = {b1, b2, (float)(1.0 - (double)b1), (float)(1.0 - (double)b2),
                  eps, k_adamw_step_size(lr, b1, b2, t),
                  (float)(1.0 - (double)lr * wd), 1.0f / (float)ng, ng,
                  {NULL}, step_dev};
  bool vec = aligned16(p) && aligned16(m) && aligned16(v);
  for (int k = 0; k < ng; k++) {
    a.g[k] = g[k];
    vec = vec && aligned16(g[k]);
  }
  unsigned grid = cuda_grid(e, vec ? (n + 3) / 4 : n, THREADS);
  int cap = e->ctx.adamw_blocks;   /* the call's context (eng_ctx) */
  bool capped = vec && cap > 0 && grid > (unsigned)cap;
  if (capped) grid = (unsigned)cap;
  /* Hopper: the bulk-copy form over the first n - n % 4 elements, the
   * plain kernel over the rest */
  bool bulk = capped && cuda_impl(e)->wgmma && n >= 4;
  size_t n4 = n & ~(size_t)3;
  cudaStream_t s = cuda_stream(e);
#define ADAMW_NG(NG)                                                          \
  case NG:                                                                    \
    if (bulk) {                                                               \
      TRY(launch_bulk<NG>(p, (float *)NULL, m, v, n4, a, grid, s));         \
      if (n4 < n) {                                                           \
        adamw_args t = a;                                                     \
        for (int k = 0; k < NG; k++) t.g[k] = a.g[k] + n4;                    \
        adamw_k<false, NG><<<1, THREADS, 0, s>>>(p + n4, m + n4, v + n4,      \
                                                 n - n4, t);                  \
      }                                                                       \
    } else if (capped)                                                        \
      adamw_capped_k<NG><<<grid, THREADS, 0, s>>>(p, m, v, n, a);             \
    else if (vec) adamw_k<true, NG><<<grid, THREADS, 0, s>>>(p, m, v, n, a);  \
    else adamw_k<false, NG><<<grid, THREADS, 0, s>>>(p, m, v, n, a);          \
    break;
  switch (ng) {
    ADAMW_NG(1) ADAMW_NG(2) ADAMW_NG(3) ADAMW_NG(4)
    ADAMW_NG(5) ADAMW_NG(6) ADAMW_NG(7) ADAMW_NG(8)
  default:
    FAIL(ERR_FAIL, "cuda_adamw_mean: %d gradient arrays (allowed: 1 to %d)", ng,
         (int)K_ADAMW_MAX_GRADS);
  }
#undef ADAMW_NG
  CHECK_LAUNCH();
  return 0;
}

int cuda_adamw_mean(engine *e, float *p, const float *const *g, int ng,
                    float *m, float *v, size_t n, float lr, float b1, float b2,
                    float eps, float wd, long long t) {
  return adamw_mean(e, p, g, ng, m, v, n, lr, b1, b2, eps, wd, t, NULL);
}

/* ---- AdamW with the low-precision copy -------------------------------------- */

/* T: the type of p's 16-bit copy pl (float: none, pl NULL); G: the
 * gradient's (float, or 16 bits: widened as read). The first nv groups of
 * four by 16- and 8-byte accesses (the caller checked their alignment),
 * the rest one at a time. */
template <typename T, typename G>
__global__ void adamw_ex_k(float *p, T *pl, const G *g, float *m, float *v,
                           size_t n, size_t nv, float b1, float b2,
                           float one_b1, float one_b2, float eps, float step,
                           float decay, const float *step_dev) {
  /* adamw1's arithmetic, as every other form: the same bits */
  const adamw_args a = {b1, b2, one_b1, one_b2, eps,
                        step_dev ? *step_dev : step, decay, 1.0f, 1, {NULL},
                        NULL};
  constexpr bool copy = !std::is_same<T, float>::value;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t i = i0; i < nv; i += stride) {
    float4 pp = ((float4 *)p)[i], mm = ((float4 *)m)[i],
           vv = ((float4 *)v)[i];
    float G4[4];
    ld4(g, 4 * i, G4);
    float *P = &pp.x, *M = &mm.x, *V = &vv.x;
#pragma unroll
    for (int c = 0; c < 4; c++) adamw1(P[c], G4[c], M[c], V[c], a);
    if (copy) st4(pl, 4 * i, P);   /* one 8-byte store of the four copies */
    ((float4 *)p)[i] = pp;
    ((float4 *)m)[i] = mm;
    ((float4 *)v)[i] = vv;
  }
  for (size_t i = nv * 4 + i0; i < n; i += stride) {
    float pi = p[i], mi = m[i], vi = v[i];
    adamw1(pi, ld(g, i), mi, vi, a);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    if (copy) st(pl, i, pi);
  }
}

/* The capped form on Hopper: the bulk-copy kernel over the first n - n % 4
 * elements, the plain one over the rest. */
template <typename T>
static int ex_bulk(float *p, T *pl, float *m, float *v, size_t n,
                   const adamw_args &a, unsigned grid, cudaStream_t s) {
  size_t n4 = n & ~(size_t)3;
  TRY(launch_bulk<1>(p, pl, m, v, n4, a, grid, s));
  if (n4 < n)
    adamw_ex_k<T, float><<<1, 32, 0, s>>>(
        p + n4, pl + n4, a.g[0] + n4, m + n4, v + n4, n - n4, 0, a.b1, a.b2,
        a.one_b1, a.one_b2, a.eps, a.step, a.decay, a.step_dev);
  return 0;
}

int cuda_adamw_ex(engine *e, float *p, void *p_low, dtype lt, const void *g,
                  dtype gt, float *m, float *v, size_t n, float lr, float b1,
                  float b2, float eps, float wd, long long t,
                  const float *step_dev) {
  bool copy = p_low != NULL && p_low != (void *)p && lt != DT_F32;
  bool vec = aligned16(p) && aligned16(m) && aligned16(v) &&
             (!copy || aligned16(p_low)) &&
             (size_t)g % (4 * dtype_size(gt)) == 0;
  if (gt == DT_F32 && !(copy && vec)) {
    const float *g32 = (const float *)g;
    TRY(adamw_mean(e, p, &g32, 1, m, v, n, lr, b1, b2, eps, wd, t, step_dev));
    if (p_low && p_low != (void *)p)
      TRY(cuda_cast(e, p, DT_F32, p_low, lt, n));
    return 0;
  }
  /* The same scalars as cuda_adamw_mean (adamw.cu), so p's bits are the same. */
  float step = k_adamw_step_size(lr, b1, b2, t);
  /* Capped (eng_ctx.adamw_blocks): on Hopper, with an fp32 gradient, the
   * bulk-copy form of cuda_adamw_mean with the copy written beside p (the
   * plain kernel over the last n % 4 elements); otherwise one block of
   * 1024 threads per SM it may hold, each looping over its share. Both
   * the same element updates as the uncapped kernel, so the same bits. */
  int cap = e->ctx.adamw_blocks;
  int threads = cap > 0 ? 1024 : THREADS;
  size_t nv = vec ? n / 4 : 0;
  unsigned grid = cuda_grid(e, vec ? (n + 3) / 4 : n, threads);
  if (cap > 0 && grid > (unsigned)cap) grid = (unsigned)cap;
  float one_b1 = (float)(1.0 - (double)b1), one_b2 = (float)(1.0 - (double)b2),
        decay = (float)(1.0 - (double)lr * wd);
  cudaStream_t s = cuda_stream(e);
  if (gt == DT_F32 && cap > 0 && cuda_impl(e)->wgmma && n >= 4) {
    adamw_args a = {b1, b2, one_b1, one_b2, eps, step, decay, 1.0f, 1,
                    {(const float *)g}, step_dev};
    WITH_T(lt, TRY(ex_bulk<T>(p, (T *)p_low, m, v, n, a, (unsigned)cap, s)));
  } else if (gt == DT_F32) {
    WITH_T(lt, (adamw_ex_k<T, float><<<grid, threads, 0, s>>>(
                   p, (T *)p_low, (const float *)g, m, v, n, nv, b1, b2,
                   one_b1, one_b2, eps, step, decay, step_dev)));
  } else {
    /* a 16-bit gradient: no copy (T float, pl NULL) or lt's */
    dtype ct = copy ? lt : DT_F32;
#define EX_G(Gt)                                                              \
  WITH_T(ct, (adamw_ex_k<T, Gt><<<grid, threads, 0, s>>>(                     \
                 p, copy ? (T *)p_low : NULL, (const Gt *)g, m, v, n, nv, b1, \
                 b2, one_b1, one_b2, eps, step, decay, step_dev)))
    if (gt == DT_BF16) EX_G(__nv_bfloat16);
    else EX_G(__half);
#undef EX_G
  }
  CHECK_LAUNCH();
  return 0;
}
