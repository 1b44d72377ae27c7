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
 * the spread when |mean| is large). No float4 path: LayerNorm serves the
 * toy model (d = 10), where a row is a fraction of a warp anyway.
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

int cuda_layernorm_fwd(engine *e, const float *x, const float *w,
                       const float *b, float *y, float *mean, float *rstd,
                       int n, int d, float eps) {
  layernorm_fwd_k<<<n, row_threads(d), 0, cuda_stream(e)>>>(x, w, b, y, mean,
                                                             rstd, d, eps);
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
  layernorm_dx_k<<<n, row_threads(d), 0, s>>>(dy, x, w, mean, rstd, dx, d);
  CHECK_LAUNCH();
  return 0;
}
