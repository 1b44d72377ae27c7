/* RMSNorm on the CUDA engine; x, y, dy, dx [n,d], g, dg [d], rstd [n].
 *
 *   forward   rstd[i] = 1/sqrt(mean_j x[i,j]^2 + eps)
 *             y[i,j]  = x[i,j] * rstd[i] * g[j]          (rstd saved)
 *   backward  dx[i,j] = rstd[i]*g[j]*dy[i,j]
 *                       - x[i,j] * rstd[i]^3 * mean_k(g[k]*dy[i,k]*x[i,k])
 *                                                        (written)
 *             dg[j]  += sum_i dy[i,j] * x[i,j] * rstd[i] (accumulated)
 *
 * All in fp32. Row sums: one block per row, each thread a serial partial
 * sum over its columns (float4 when d % 4 = 0), then a fixed tree over the
 * warp (shuffles) and over the warps; 1/sqrt is the correctly rounded
 * 1.0f / sqrtf, not rsqrtf. Up to 8 float4s a thread (d <= 8192 with 256
 * threads) the row stays in registers between the sum and the write, so
 * forward reads x once and dx reads dy and x once, as do the fused path's
 * residual add + norm (a and b) and its backward (dy and x); wider rows
 * are read twice (the second time mostly from L2).
 *
 * dg is a column sum over all rows, done without atomics in two kernels:
 * blocks of 32 columns x a chunk of rows write partial sums [chunks, d],
 * then one thread per column adds the chunks in order and adds the total to
 * dg. The chunking depends only on n, so results are the same run to run
 * and GPU to GPU. dg runs before dx, so dx may be dy's buffer (as on the
 * CPU engine); dx may not alias x (engine.c refuses it). */
#include "kernels/cuda/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* ---- forward --------------------------------------------------------------- */

template <bool VEC>
__global__ void rmsnorm_fwd_k(const float *x, const float *g, float *y,
                              float *rstd, int d, float eps) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  const float *xr = x + row * d;
  float *yr = y + row * d;
  float ss = 0.0f;
  if (VEC) {
    for (int j = threadIdx.x; j < d / 4; j += blockDim.x) {
      float4 v = ((const float4 *)xr)[j];
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x) ss += xr[j] * xr[j];
  }
  ss = block_sum(ss, sh);
  float r = 1.0f / sqrtf(ss / (float)d + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  if (VEC) {
    for (int j = threadIdx.x; j < d / 4; j += blockDim.x) {
      float4 v = ((const float4 *)xr)[j], w = ((const float4 *)g)[j];
      ((float4 *)yr)[j] = make_float4(v.x * r * w.x, v.y * r * w.y,
                                      v.z * r * w.z, v.w * r * w.w);
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x) yr[j] = xr[j] * r * g[j];
  }
}

/* rmsnorm_fwd_k<true> with the row in registers (row_load4): x read once,
 * the same sums in the same order. */
template <int NV>
__global__ void rmsnorm_fwd_reg_k(const float *x, const float *g, float *y,
                                  float *rstd, int d, float eps) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  int units = d / 4;
  float4 v[NV];
  row_load4<NV>(x + row * d, units, v);
  float ss = row_sum4<NV>(v, units, [](float4 a) {
    return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
  });
  ss = block_sum(ss, sh);
  float r = 1.0f / sqrtf(ss / (float)d + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  float4 *yr = (float4 *)(y + row * d);
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int j = threadIdx.x + k * blockDim.x;
    if (j < units) {
      float4 w = ((const float4 *)g)[j];
      yr[j] = make_float4(v[k].x * r * w.x, v[k].y * r * w.y,
                          v[k].z * r * w.z, v[k].w * r * w.w);
    }
  }
}

int cuda_rmsnorm_fwd(engine *e, const float *x, const float *g, float *y,
                     float *rstd, int n, int d, float eps) {
  bool vec = d % 4 == 0 && aligned16(x) && aligned16(g) && aligned16(y);
  int threads = row_threads(vec ? d / 4 : d);
  cudaStream_t s = cuda_stream(e);
  bool held = vec && with_row_nv(row_nv(d / 4, &threads), [&](auto nv) {
    rmsnorm_fwd_reg_k<decltype(nv)::value>
        <<<n, threads, 0, s>>>(x, g, y, rstd, d, eps);
  });
  if (!held && vec)
    rmsnorm_fwd_k<true><<<n, threads, 0, s>>>(x, g, y, rstd, d, eps);
  else if (!held)
    rmsnorm_fwd_k<false><<<n, threads, 0, s>>>(x, g, y, rstd, d, eps);
  CHECK_LAUNCH();
  return 0;
}

/* ---- backward: dg ------------------------------------------------------------ */

enum { DG_COLS = 32, DG_LANES = 8 };   /* block: 32 columns x 8 row lanes */

/* Block (bx, chunk): columns bx*32 + tx, rows [chunk*rows_per, ...), lane ty
 * takes every 8th row; the 8 lanes are added in order into part[chunk, j]. */
/* dy in fp32 (the plain op) or 16 bits (the fused path's k_rmsnorm_bwd_ex). */
template <typename TY>
__global__ void rmsnorm_dg_part_k(const TY *dy, const float *x,
                                  const float *rstd, float *part, int n,
                                  int d, int rows_per) {
  __shared__ float sh[DG_LANES][DG_COLS];
  int j = blockIdx.x * DG_COLS + threadIdx.x;
  int r0 = blockIdx.y * rows_per;
  int r1 = min(n, r0 + rows_per);
  float acc = 0.0f;
  if (j < d)
    for (int i = r0 + threadIdx.y; i < r1; i += DG_LANES) {
      long long o = (long long)i * d + j;
      acc += ld(dy, (size_t)o) * x[o] * rstd[i];
    }
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < d) {
    float s = 0.0f;
    for (int l = 0; l < DG_LANES; l++) s += sh[l][threadIdx.x];
    part[(long long)blockIdx.y * d + j] = s;
  }
}

__global__ void rmsnorm_dg_sum_k(const float *part, float *dg, int chunks,
                                 int d) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  float s = 0.0f;
  for (int c = 0; c < chunks; c++) s += part[(long long)c * d + j];
  dg[j] += s;
}

/* ---- backward: dx --------------------------------------------------------- */

template <bool VEC>
__global__ void rmsnorm_dx_k(const float *dy, const float *x, const float *g,
                             const float *rstd, float *dx, int d) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  const float *dyr = dy + row * d, *xr = x + row * d;
  float *dxr = dx + row * d;
  float dot = 0.0f;
  if (VEC) {
    for (int j = threadIdx.x; j < d / 4; j += blockDim.x) {
      float4 a = ((const float4 *)g)[j], b = ((const float4 *)dyr)[j],
             c = ((const float4 *)xr)[j];
      dot += a.x * b.x * c.x + a.y * b.y * c.y + a.z * b.z * c.z +
             a.w * b.w * c.w;
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x)
      dot += g[j] * dyr[j] * xr[j];
  }
  dot = block_sum(dot, sh);
  float r = rstd[row];
  float c = r * r * r * (dot / (float)d);
  /* Every thread has read its dy before the block_sum's barriers, but the
   * second pass reads dy again: with dx == dy, each element is read and
   * then written by the same thread, so the alias is safe. */
  if (VEC) {
    for (int j = threadIdx.x; j < d / 4; j += blockDim.x) {
      float4 a = ((const float4 *)g)[j], b = ((const float4 *)dyr)[j],
             v = ((const float4 *)xr)[j];
      ((float4 *)dxr)[j] =
          make_float4(r * a.x * b.x - v.x * c, r * a.y * b.y - v.y * c,
                      r * a.z * b.z - v.z * c, r * a.w * b.w - v.w * c);
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x)
      dxr[j] = r * g[j] * dyr[j] - xr[j] * c;
  }
}

/* rmsnorm_dx_k<true> with dy's and x's share of the row in registers:
 * each read once, the same sums in the same order. dx may be dy: a thread
 * writes only the units it has read. */
template <int NV>
__global__ void rmsnorm_dx_reg_k(const float *dy, const float *x,
                                 const float *g, const float *rstd, float *dx,
                                 int d) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  int units = d / 4;
  float4 b[NV], v[NV];
  row_load4<NV>(dy + row * d, units, b);
  row_load4<NV>(x + row * d, units, v);
  float dot = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int j = threadIdx.x + k * blockDim.x;
    if (j < units) {
      float4 a = ((const float4 *)g)[j];
      dot += a.x * b[k].x * v[k].x + a.y * b[k].y * v[k].y +
             a.z * b[k].z * v[k].z + a.w * b[k].w * v[k].w;
    }
  }
  dot = block_sum(dot, sh);
  float r = rstd[row];
  float c = r * r * r * (dot / (float)d);
  float4 *dxr = (float4 *)(dx + row * d);
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int j = threadIdx.x + k * blockDim.x;
    if (j < units) {
      float4 a = ((const float4 *)g)[j];
      dxr[j] = make_float4(r * a.x * b[k].x - v[k].x * c,
                           r * a.y * b[k].y - v[k].y * c,
                           r * a.z * b[k].z - v[k].z * c,
                           r * a.w * b[k].w - v[k].w * c);
    }
  }
}

/* dg += sum_i dy * x * rstd, deterministic (shared with the fused path,
 * whose dy may be 16-bit: dt). */
int cuda_rmsnorm_dg_t(engine *e, const void *dy, dtype dt, const float *x,
                      const float *rstd, float *dg, int n, int d) {
  cudaStream_t s = cuda_stream(e);
  /* dg: chunks of at least 64 rows, at most 1024 chunks. */
  int rows_per = (n + 1023) / 1024;
  if (rows_per < 64) rows_per = 64;
  int chunks = (n + rows_per - 1) / rows_per;
  float *part;
  TRY(cuda_workspace(e, (size_t)chunks * d * sizeof(float), (void **)&part));
  dim3 grid((d + DG_COLS - 1) / DG_COLS, chunks), block(DG_COLS, DG_LANES);
  if (dt == DT_F32)
    rmsnorm_dg_part_k<<<grid, block, 0, s>>>((const float *)dy, x, rstd, part,
                                             n, d, rows_per);
  else if (dt == DT_BF16)
    rmsnorm_dg_part_k<<<grid, block, 0, s>>>((const __nv_bfloat16 *)dy, x,
                                             rstd, part, n, d, rows_per);
  else
    rmsnorm_dg_part_k<<<grid, block, 0, s>>>((const __half *)dy, x, rstd,
                                             part, n, d, rows_per);
  CHECK_LAUNCH();
  rmsnorm_dg_sum_k<<<(d + 255) / 256, 256, 0, s>>>(part, dg, chunks, d);
  CHECK_LAUNCH();
  return 0;
}

int cuda_rmsnorm_bwd(engine *e, const float *dy, const float *x,
                     const float *g, const float *rstd, float *dx, float *dg,
                     int n, int d) {
  cudaStream_t s = cuda_stream(e);
  TRY(cuda_rmsnorm_dg_t(e, dy, DT_F32, x, rstd, dg, n, d));

  bool vec = d % 4 == 0 && aligned16(dy) && aligned16(x) && aligned16(g) &&
             aligned16(dx);
  int threads = row_threads(vec ? d / 4 : d);
  bool held = vec && with_row_nv(row_nv(d / 4, &threads), [&](auto nv) {
    rmsnorm_dx_reg_k<decltype(nv)::value>
        <<<n, threads, 0, s>>>(dy, x, g, rstd, dx, d);
  });
  if (!held && vec)
    rmsnorm_dx_k<true><<<n, threads, 0, s>>>(dy, x, g, rstd, dx, d);
  else if (!held)
    rmsnorm_dx_k<false><<<n, threads, 0, s>>>(dy, x, g, rstd, dx, d);
  CHECK_LAUNCH();
  return 0;
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
  /* the sum again: from `sum` where written (always, with b), else a; a
   * thread reads back only what it wrote, so sum may be a */
  const float *x0 = sum ? sum : a;
  if (VEC) {
    for (int j = 4 * threadIdx.x; j < d; j += 4 * blockDim.x) {
      float x[4], w[4];
      ld4(x0, o + j, x);
      ld4(g, j, w);
      for (int c = 0; c < 4; c++) x[c] = x[c] * r * w[c];
      st4(y, o + j, x);
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x)
      st(y, o + j, x0[o + j] * r * g[j]);
  }
}

/* add_rmsnorm_k<T, true> with a + b held in registers (row_load4's
 * layout): a and b read once, the same sums in the same order. */
template <typename T, int NV>
__global__ void add_rmsnorm_reg_k(const float *a, const float *b, float *sum,
                                  const float *g, T *y, float *rstd, int d,
                                  float eps) {
  __shared__ float sh[32];
  size_t o = (size_t)blockIdx.x * d;
  int units = d / 4;
  float4 xa[NV], xb[NV];
  row_load4<NV>(a + o, units, xa);
  if (b) row_load4<NV>(b + o, units, xb);
  float ss = 0.0f, x[NV][4];
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int u = threadIdx.x + k * blockDim.x;
    float z[4] = {0, 0, 0, 0};
    if (b) { z[0] = xb[k].x; z[1] = xb[k].y; z[2] = xb[k].z; z[3] = xb[k].w; }
    x[k][0] = xa[k].x + z[0]; x[k][1] = xa[k].y + z[1];
    x[k][2] = xa[k].z + z[2]; x[k][3] = xa[k].w + z[3];
    if (u < units) {
      for (int c = 0; c < 4; c++) ss += x[k][c] * x[k][c];
      if (sum) st4(sum, o + 4 * u, x[k]);
    }
  }
  ss = block_sum(ss, sh);
  float r = 1.0f / sqrtf(ss / (float)d + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int u = threadIdx.x + k * blockDim.x;
    if (u < units) {
      float w[4];
      ld4(g, 4 * u, w);
      for (int c = 0; c < 4; c++) x[k][c] = x[k][c] * r * w[c];
      st4(y, o + 4 * u, x[k]);
    }
  }
}

int cuda_add_rmsnorm_fwd(engine *e, const float *a, const float *b, float *sum,
                         const float *g, void *y, dtype yt, float *rstd, int n,
                         int d, float eps) {
  if (sum == a && !b) sum = NULL;   /* sum is a already */
  bool vec = d % 4 == 0 && vec4_ok({a, b, sum, g, y});
  int threads = row_threads(vec ? d / 4 : d);
  cudaStream_t s = cuda_stream(e);
  bool held = vec && with_row_nv(row_nv(d / 4, &threads), [&](auto nv) {
    WITH_T(yt, (add_rmsnorm_reg_k<T, decltype(nv)::value>
                <<<n, threads, 0, s>>>(a, b, sum, g, (T *)y, rstd, d, eps)));
  });
  if (!held && vec)
    WITH_T(yt, (add_rmsnorm_k<T, true><<<n, threads, 0, s>>>(
                   a, b, sum, g, (T *)y, rstd, d, eps)));
  else if (!held)
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

/* rmsnorm_dx_ex_k<T, true> with dy (widened) and x held in registers:
 * each read once, the same sums in the same order. dx may be dres: a
 * thread writes only the units it has read. */
template <typename T, int NV>
__global__ void rmsnorm_dx_ex_reg_k(const T *dy, const float *x,
                                    const float *g, const float *rstd,
                                    const float *dres, float *dx, T *dx_low,
                                    int d) {
  __shared__ float sh[32];
  size_t o = (size_t)blockIdx.x * d;
  int units = d / 4;
  float yy[NV][4], xx[NV][4];
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int u = threadIdx.x + k * blockDim.x;
    if (u < units) {
      ld4(dy, o + 4 * u, yy[k]);
      ld4(x, o + 4 * u, xx[k]);
    }
  }
  float dot = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int u = threadIdx.x + k * blockDim.x;
    if (u < units) {
      float gg[4];
      ld4(g, 4 * u, gg);
      for (int c = 0; c < 4; c++) dot += gg[c] * yy[k][c] * xx[k][c];
    }
  }
  dot = block_sum(dot, sh);
  float r = rstd[blockIdx.x];
  float c = r * r * r * (dot / (float)d);
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int u = threadIdx.x + k * blockDim.x;
    if (u < units) {
      float gg[4], rr[4] = {0, 0, 0, 0}, v[4];
      ld4(g, 4 * u, gg);
      if (dres) ld4(dres, o + 4 * u, rr);
      for (int q = 0; q < 4; q++)
        v[q] = r * gg[q] * yy[k][q] - xx[k][q] * c + rr[q];
      st4(dx, o + 4 * u, v);
      if (dx_low) st4(dx_low, o + 4 * u, v);
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
  bool held = vec && with_row_nv(row_nv(d / 4, &threads), [&](auto nv) {
    WITH_T(lt, (rmsnorm_dx_ex_reg_k<T, decltype(nv)::value>
                <<<n, threads, 0, s>>>((const T *)dy, x, g, rstd, dres, dx,
                                       (T *)dx_low, d)));
  });
  if (!held && vec)
    WITH_T(lt, (rmsnorm_dx_ex_k<T, true><<<n, threads, 0, s>>>(
                   (const T *)dy, x, g, rstd, dres, dx, (T *)dx_low, d)));
  else if (!held)
    WITH_T(lt, (rmsnorm_dx_ex_k<T, false><<<n, threads, 0, s>>>(
                   (const T *)dy, x, g, rstd, dres, dx, (T *)dx_low, d)));
  CHECK_LAUNCH();
  return 0;
}
