/* LayerNorm with weight and bias on the CUDA engine; x, y, dy, dx [n,d], w,
 * b, dw, db [d], mean, rstd [n].
 *
 *   forward   mean[i] = mean_j x[i,j]
 *             rstd[i] = 1/sqrt(mean_j (x[i,j] - mean[i])^2 + eps)
 *             y[i,j]  = (x[i,j] - mean[i]) * rstd[i] * w[j] + b[j]
 *                                                   (mean, rstd saved)
 *   backward  xhat = (x - mean) * rstd, g = dy * w
 *             dx[i,j] = rstd[i] * (g[i,j] - mean_k g[i,k]
 *                                  - xhat[i,j] * mean_k(g[i,k] xhat[i,k]))
 *                                                   (written)
 *             dw[j] += sum_i dy[i,j] xhat[i,j], db[j] += sum_i dy[i,j]
 *                                                   (accumulated)
 *
 * All in fp32. Row sums: one block per row, each thread a serial partial
 * sum over its columns, then block_sum's fixed tree; the variance is a
 * second pass over x - mean, as on the CPU engine (E[x^2] - mean^2 loses
 * the spread when |mean| is large). With d % 4 = 0 and up to 8 float4s a
 * thread (d <= 8192: the 2024 norm benchmark's widths) the row is read
 * once into registers (row_load4) and both passes and the write work
 * from there, as does dx with dy and x; otherwise (the toy's d = 10, where
 * a row is a fraction of a warp anyway) each pass reads the row.
 *
 * dw and db are column sums over all rows, done without atomics as RMSNorm's
 * dg: blocks of 32 columns x a chunk of rows write partial sums [chunks, d]
 * (dw's and db's side by side), then one thread per column adds the chunks
 * in order. The chunking depends only on n, so results repeat bit for bit.
 * They run before dx, so dx may be dy's buffer. */
#include "kernels/cuda/common.cuh"

/* ---- forward --------------------------------------------------------------- */

__global__ void layernorm_fwd_k(const float *x, const float *w,
                                const float *b, float *y, float *mean,
                                float *rstd, int d, float eps) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  const float *xr = x + row * d;
  float *yr = y + row * d;
  float s = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) s += xr[j];
  float mu = block_sum(s, sh) / (float)d;
  float ss = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float c = xr[j] - mu;
    ss += c * c;
  }
  ss = block_sum(ss, sh);
  float r = 1.0f / sqrtf(ss / (float)d + eps);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = r;
  }
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    yr[j] = (xr[j] - mu) * r * w[j] + b[j];
}

template <int NV>
__global__ void layernorm_fwd_reg_k(const float *x, const float *w,
                                    const float *b, float *y, float *mean,
                                    float *rstd, int d, float eps) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  int units = d / 4;
  float4 v[NV];
  row_load4<NV>(x + row * d, units, v);
  float s = row_sum4<NV>(v, units,
                         [](float4 a) { return a.x + a.y + a.z + a.w; });
  float mu = block_sum(s, sh) / (float)d;
  float ss = row_sum4<NV>(v, units, [mu](float4 a) {
    float cx = a.x - mu, cy = a.y - mu, cz = a.z - mu, cw = a.w - mu;
    return cx * cx + cy * cy + cz * cz + cw * cw;
  });
  ss = block_sum(ss, sh);
  float r = 1.0f / sqrtf(ss / (float)d + eps);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = r;
  }
  float4 *yr = (float4 *)(y + row * d);
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int j = threadIdx.x + k * blockDim.x;
    if (j < units) {
      float4 wj = ((const float4 *)w)[j], bj = ((const float4 *)b)[j];
      yr[j] = make_float4((v[k].x - mu) * r * wj.x + bj.x,
                          (v[k].y - mu) * r * wj.y + bj.y,
                          (v[k].z - mu) * r * wj.z + bj.z,
                          (v[k].w - mu) * r * wj.w + bj.w);
    }
  }
}

int cuda_layernorm_fwd(engine *e, const float *x, const float *w,
                       const float *b, float *y, float *mean, float *rstd,
                       int n, int d, float eps) {
  cudaStream_t s = cuda_stream(e);
  bool vec = d % 4 == 0 && aligned16(x) && aligned16(w) && aligned16(b) &&
             aligned16(y);
  int threads = row_threads(vec ? d / 4 : d);
  bool held = vec && with_row_nv(row_nv(d / 4, &threads), [&](auto nv) {
    layernorm_fwd_reg_k<decltype(nv)::value>
        <<<n, threads, 0, s>>>(x, w, b, y, mean, rstd, d, eps);
  });
  if (!held)
    layernorm_fwd_k<<<n, row_threads(d), 0, s>>>(x, w, b, y, mean, rstd, d,
                                                 eps);
  CHECK_LAUNCH();
  return 0;
}

/* ---- backward: dw, db --------------------------------------------------------- */

enum { DW_COLS = 32, DW_LANES = 8 };   /* block: 32 columns x 8 row lanes */

/* Block (bx, chunk): columns bx*32 + tx, rows [chunk*rows_per, ...), lane ty
 * takes every 8th row; the 8 lanes are added in order into
 * part[chunk, j] (dw) and part[chunks + chunk, j] (db). */
__global__ void layernorm_dwdb_part_k(const float *dy, const float *x,
                                      const float *mean, const float *rstd,
                                      float *part, int n, int d,
                                      int rows_per) {
  __shared__ float shw[DW_LANES][DW_COLS], shb[DW_LANES][DW_COLS];
  int j = blockIdx.x * DW_COLS + threadIdx.x;
  int r0 = blockIdx.y * rows_per;
  int r1 = min(n, r0 + rows_per);
  float aw = 0.0f, ab = 0.0f;
  if (j < d)
    for (int i = r0 + threadIdx.y; i < r1; i += DW_LANES) {
      long long o = (long long)i * d + j;
      aw += dy[o] * ((x[o] - mean[i]) * rstd[i]);
      ab += dy[o];
    }
  shw[threadIdx.y][threadIdx.x] = aw;
  shb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && j < d) {
    float sw = 0.0f, sb = 0.0f;
    for (int l = 0; l < DW_LANES; l++) {
      sw += shw[l][threadIdx.x];
      sb += shb[l][threadIdx.x];
    }
    part[(long long)blockIdx.y * d + j] = sw;
    part[(long long)(gridDim.y + blockIdx.y) * d + j] = sb;
  }
}

__global__ void layernorm_dwdb_sum_k(const float *part, float *dw, float *db,
                                     int chunks, int d) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  float sw = 0.0f, sb = 0.0f;
  for (int c = 0; c < chunks; c++) {
    sw += part[(long long)c * d + j];
    sb += part[(long long)(chunks + c) * d + j];
  }
  dw[j] += sw;
  db[j] += sb;
}

/* ---- backward: dx --------------------------------------------------------------- */

__global__ void layernorm_dx_k(const float *dy, const float *x, const float *w,
                               const float *mean, const float *rstd,
                               float *dx, int d) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  const float *dyr = dy + row * d, *xr = x + row * d;
  float *dxr = dx + row * d;
  float mu = mean[row], r = rstd[row];
  float sg = 0.0f, sgx = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float g = dyr[j] * w[j];
    sg += g;
    sgx += g * ((xr[j] - mu) * r);
  }
  sg = block_sum(sg, sh) / (float)d;
  sgx = block_sum(sgx, sh) / (float)d;
  /* With dx == dy each element is read again and then written by the same
   * thread, after every thread's sums are done (block_sum's barriers). */
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float g = dyr[j] * w[j], xh = (xr[j] - mu) * r;
    dxr[j] = r * (g - sg - xh * sgx);
  }
}

/* layernorm_dx_k with dy's and x's share of the row in registers. dx may
 * be dy: a thread writes only the units it has read. */
template <int NV>
__global__ void layernorm_dx_reg_k(const float *dy, const float *x,
                                   const float *w, const float *mean,
                                   const float *rstd, float *dx, int d) {
  __shared__ float sh[32];
  long long row = blockIdx.x;
  int units = d / 4;
  float4 gv[NV], hv[NV];   /* g = dy * w, then xhat = (x - mean) * rstd */
  row_load4<NV>(dy + row * d, units, gv);
  row_load4<NV>(x + row * d, units, hv);
  float mu = mean[row], r = rstd[row];
  float sg = 0.0f, sgx = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int j = threadIdx.x + k * blockDim.x;
    if (j < units) {
      float4 wj = ((const float4 *)w)[j];
      float4 g = make_float4(gv[k].x * wj.x, gv[k].y * wj.y, gv[k].z * wj.z,
                             gv[k].w * wj.w);
      float4 h = make_float4((hv[k].x - mu) * r, (hv[k].y - mu) * r,
                             (hv[k].z - mu) * r, (hv[k].w - mu) * r);
      sg += g.x + g.y + g.z + g.w;
      sgx += g.x * h.x + g.y * h.y + g.z * h.z + g.w * h.w;
      gv[k] = g;
      hv[k] = h;
    }
  }
  sg = block_sum(sg, sh) / (float)d;
  sgx = block_sum(sgx, sh) / (float)d;
  float4 *dxr = (float4 *)(dx + row * d);
#pragma unroll
  for (int k = 0; k < NV; k++) {
    int j = threadIdx.x + k * blockDim.x;
    if (j < units)
      dxr[j] = make_float4(r * (gv[k].x - sg - hv[k].x * sgx),
                           r * (gv[k].y - sg - hv[k].y * sgx),
                           r * (gv[k].z - sg - hv[k].z * sgx),
                           r * (gv[k].w - sg - hv[k].w * sgx));
  }
}

int cuda_layernorm_bwd(engine *e, const float *dy, const float *x,
                       const float *w, const float *mean, const float *rstd,
                       float *dx, float *dw, float *db, int n, int d) {
  cudaStream_t s = cuda_stream(e);
  /* dw, db: chunks of at least 64 rows, at most 1024 chunks. */
  int rows_per = (n + 1023) / 1024;
  if (rows_per < 64) rows_per = 64;
  int chunks = (n + rows_per - 1) / rows_per;
  float *part;
  TRY(cuda_workspace(e, (size_t)2 * chunks * d * sizeof(float),
                     (void **)&part));
  dim3 grid((d + DW_COLS - 1) / DW_COLS, chunks), block(DW_COLS, DW_LANES);
  layernorm_dwdb_part_k<<<grid, block, 0, s>>>(dy, x, mean, rstd, part, n, d,
                                               rows_per);
  CHECK_LAUNCH();
  layernorm_dwdb_sum_k<<<(d + 255) / 256, 256, 0, s>>>(part, dw, db, chunks,
                                                       d);
  CHECK_LAUNCH();
  bool vec = d % 4 == 0 && aligned16(dy) && aligned16(x) && aligned16(w) &&
             aligned16(dx);
  int threads = row_threads(vec ? d / 4 : d);
  bool held = vec && with_row_nv(row_nv(d / 4, &threads), [&](auto nv) {
    layernorm_dx_reg_k<decltype(nv)::value>
        <<<n, threads, 0, s>>>(dy, x, w, mean, rstd, dx, d);
  });
  if (!held)
    layernorm_dx_k<<<n, row_threads(d), 0, s>>>(dy, x, w, mean, rstd, dx, d);
  CHECK_LAUNCH();
  return 0;
}
