/* Head layout on the CUDA engine: D = H*Dh.
 *
 *   split  y[b,h,t,:] = x[b,t,h*Dh:(h+1)*Dh]      x [B,T,D] -> y [B,H,T,Dh]
 *   merge  y[b,t,h*Dh:(h+1)*Dh] = x[b,h,t,:]      x [B,H,T,Dh] -> y [B,T,D]
 *
 * Pure copies. One thread per output element (per float4 when Dh % 4 = 0
 * and both buffers are 16-byte aligned), grid-stride: writes are fully
 * coalesced, reads come in runs of Dh contiguous floats. */
#include "kernels/cuda/common.cuh"

enum { THREADS = 256 };

/* Element counts are in units of U floats (float or float4); dhu = Dh / U. */
template <typename U, bool TO_HEADS>
__global__ void heads_k(const U *x, U *y, int batch, int seq, int heads,
                        int dhu) {
  long long total = (long long)batch * seq * heads * dhu;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
       o < total; o += stride) {
    long long k = o % dhu, r = o / dhu;
    if (TO_HEADS) {              /* o indexes y [B,H,T,Dh] */
      long long t = r % seq, bh = r / seq;
      long long h = bh % heads, b = bh / heads;
      y[o] = x[((b * seq + t) * heads + h) * dhu + k];
    } else {                     /* o indexes y [B,T,H,Dh] */
      long long h = r % heads, bt = r / heads;
      long long t = bt % seq, b = bt / seq;
      y[o] = x[((b * heads + h) * seq + t) * dhu + k];
    }
  }
}

static int permute(engine *e, const float *x, float *y, int batch, int seq,
                   int heads, int dh, bool to_heads) {
  bool vec = dh % 4 == 0 && aligned16(x) && aligned16(y);
  size_t total = (size_t)batch * seq * heads * (vec ? dh / 4 : dh);
  unsigned grid = cuda_grid(e, total, THREADS);
  cudaStream_t s = cuda_stream(e);
  if (vec) {
    const float4 *x4 = (const float4 *)x;
    float4 *y4 = (float4 *)y;
    if (to_heads) heads_k<float4, true><<<grid, THREADS, 0, s>>>(x4, y4, batch, seq, heads, dh / 4);
    else heads_k<float4, false><<<grid, THREADS, 0, s>>>(x4, y4, batch, seq, heads, dh / 4);
  } else {
    if (to_heads) heads_k<float, true><<<grid, THREADS, 0, s>>>(x, y, batch, seq, heads, dh);
    else heads_k<float, false><<<grid, THREADS, 0, s>>>(x, y, batch, seq, heads, dh);
  }
  CHECK_LAUNCH();
  return 0;
}

int cuda_split_heads(engine *e, const float *x, float *y, int batch, int seq,
                     int heads, int dh) {
  TRY(permute(e, x, y, batch, seq, heads, dh, true));
  return 0;
}

int cuda_merge_heads(engine *e, const float *x, float *y, int batch, int seq,
                     int heads, int dh) {
  TRY(permute(e, x, y, batch, seq, heads, dh, false));
  return 0;
}

/* ---- head layout, typed --------------------------------------------------- */

/* SPLIT: x [B, T, H*Dh] -> y [B, H, T, Dh]; else the reverse. One block
 * per row r = b*T + t of the [B, T, H*Dh] side, its threads walking the
 * row W = 4 (VEC: dh % 4 == 0, aligned) or 1 elements at a time, with
 * 32-bit index math (see qkv_rope_k). */
template <typename Tx, typename Ty, bool SPLIT, bool VEC>
__global__ void heads_ex_k(const Tx *x, Ty *y, int seq, int heads, int dh) {
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
      WITH_T(yt, (heads_ex_k<TX, T, SPLIT, true><<<rows, threads, 0, s>>>(
                     (const TX *)x, (T *)y, seq, heads, dh)));
    else
      WITH_T(yt, (heads_ex_k<TX, T, SPLIT, false><<<rows, threads, 0, s>>>(
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
