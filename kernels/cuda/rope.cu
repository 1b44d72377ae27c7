/* Rotary position embedding on the CUDA engine, in place on x [B, H, T, Dh].
 *
 * For position t and pair j < Dh/2, with angle a = t * theta^(-2j/Dh):
 *   x'[2j]   = x[2j] cos a - x[2j+1] sin a
 *   x'[2j+1] = x[2j] sin a + x[2j+1] cos a
 * inverse = 1 rotates by -a: the backward pass (dx = R^T dy).
 *
 * One thread per (t, j) pair position; consecutive threads take consecutive
 * pairs, so a warp reads 256 contiguous bytes (8-byte float2 accesses) of
 * one head. The angle and its cos / sin are computed in double, as the CPU
 * engine does (an fp32 angle at t = 32768 would be off by 0.004 rad), once
 * per thread, and applied to every (b, h) the thread owns: grid z splits
 * the B*H heads so that there are enough blocks to fill the GPU. The
 * rotation itself is done in double too and rounded once, as on the CPU. */
#include "kernels/cuda/common.cuh"

enum { THREADS = 256 };

template <bool VEC>
__global__ void rope_k(float *x, int heads_total, int heads_per_z, int seq,
                       int dh, double theta, double sign) {
  int half = dh / 2;
  long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)seq * half) return;
  int t = (int)(idx / half), j = (int)(idx % half);
  double freq = pow(theta, -2.0 * j / dh);
  double sn, cs;
  sincos(t * freq, &sn, &cs);
  sn *= sign;
  int h0 = blockIdx.z * heads_per_z;
  int h1 = min(heads_total, h0 + heads_per_z);
  for (int bh = h0; bh < h1; bh++) {
    long long p = ((long long)bh * seq + t) * half + j;   /* pair index */
    if (VEC) {
      float2 v = ((float2 *)x)[p];
      double x0 = v.x, x1 = v.y;
      ((float2 *)x)[p] = make_float2((float)(x0 * cs - x1 * sn),
                                     (float)(x0 * sn + x1 * cs));
    } else {
      double x0 = x[2 * p], x1 = x[2 * p + 1];
      x[2 * p] = (float)(x0 * cs - x1 * sn);
      x[2 * p + 1] = (float)(x0 * sn + x1 * cs);
    }
  }
}

int cuda_rope(engine *e, float *x, int batch, int heads, int seq, int dh,
              float theta, int inverse) {
  long long pairs = (long long)seq * (dh / 2);
  long long bx = (pairs + THREADS - 1) / THREADS;
  if (bx > 0x7fffffffLL)
    FAIL(ERR_FAIL, "k_rope: seq=%d dh=%d is too large", seq, dh);
  int total = batch * heads;
  /* About 4 blocks per multiprocessor in all, each z slice >= 1 head. */
  long long want_z = ((long long)cuda_impl(e)->sms * 4 + bx - 1) / bx;
  int z = want_z > total ? total : (int)want_z;
  if (z > 65535) z = 65535;
  if (z < 1) z = 1;
  int per_z = (total + z - 1) / z;
  z = (total + per_z - 1) / per_z;
  dim3 grid((unsigned)bx, 1, (unsigned)z);
  bool vec = ((uintptr_t)x & 7u) == 0;
  double sign = inverse ? -1.0 : 1.0;
  cudaStream_t s = cuda_stream(e);
  if (vec) rope_k<true><<<grid, THREADS, 0, s>>>(x, total, per_z, seq, dh, (double)theta, sign);
  else rope_k<false><<<grid, THREADS, 0, s>>>(x, total, per_z, seq, dh, (double)theta, sign);
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
