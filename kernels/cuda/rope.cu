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
