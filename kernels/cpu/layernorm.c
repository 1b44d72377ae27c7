/* LayerNorm with weight and bias on the CPU; x, y, dy, dx [n,d], w, b, dw,
 * db [d], mean, rstd [n].
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
 * The reference engine: sums in double, and the variance from a second pass
 * over x - mean (one pass of E[x^2] - mean^2 cancels badly when |mean| is
 * large against the spread). Rows are independent: parallel over rows; dw
 * and db are parallel over blocks of columns, each summing its columns over
 * all rows in order, and run before dx, so dx may be dy's buffer. */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <math.h>

enum { COLS = 64 };   /* columns per parallel block of dw, db */

int cpu_layernorm_fwd(engine *e, const float *x, const float *w,
                      const float *b, float *y, float *mean, float *rstd,
                      int n, int d, float eps) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int i = 0; i < n; i++) {
    const float *xi = x + (size_t)i * d;
    float *yi = y + (size_t)i * d;
    double s = 0.0;
    for (int j = 0; j < d; j++) s += xi[j];
    double mu = s / d, ss = 0.0;
    for (int j = 0; j < d; j++) ss += (xi[j] - mu) * (xi[j] - mu);
    double r = 1.0 / sqrt(ss / d + (double)eps);
    for (int j = 0; j < d; j++) yi[j] = (float)((xi[j] - mu) * r * w[j] + b[j]);
    mean[i] = (float)mu;
    rstd[i] = (float)r;
  }
  return 0;
}

int cpu_layernorm_bwd(engine *e, const float *dy, const float *x,
                      const float *w, const float *mean, const float *rstd,
                      float *dx, float *dw, float *db, int n, int d) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int j0 = 0; j0 < d; j0 += COLS) {
    int nj = j0 + COLS < d ? COLS : d - j0;
    double sw[COLS] = {0}, sb[COLS] = {0};
    for (int i = 0; i < n; i++) {
      const float *dyi = dy + (size_t)i * d + j0, *xi = x + (size_t)i * d + j0;
      double mu = mean[i], r = rstd[i];
      for (int j = 0; j < nj; j++) {
        sw[j] += (double)dyi[j] * ((xi[j] - mu) * r);
        sb[j] += dyi[j];
      }
    }
    for (int j = 0; j < nj; j++) {
      dw[j0 + j] += (float)sw[j];
      db[j0 + j] += (float)sb[j];
    }
  }
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int i = 0; i < n; i++) {
    const float *dyi = dy + (size_t)i * d, *xi = x + (size_t)i * d;
    float *dxi = dx + (size_t)i * d;
    double mu = mean[i], r = rstd[i], sg = 0.0, sgx = 0.0;
    for (int j = 0; j < d; j++) {
      double g = (double)dyi[j] * w[j];
      sg += g;
      sgx += g * ((xi[j] - mu) * r);
    }
    sg /= d;
    sgx /= d;
    /* Every sum of this row is done before its dx is written: dx = dy is
     * safe. */
    for (int j = 0; j < d; j++) {
      double g = (double)dyi[j] * w[j], xh = (xi[j] - mu) * r;
      dxi[j] = (float)(r * (g - sg - xh * sgx));
    }
  }
  return 0;
}
