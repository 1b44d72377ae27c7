/* RMSNorm on the CPU; x, y, dy, dx [n,d], g, dg [d], rstd [n].
 *
 *   forward   rstd[i] = 1/sqrt(mean_j x[i,j]^2 + eps)
 *             y[i,j]  = x[i,j] * rstd[i] * g[j]          (rstd saved)
 *   backward  dx[i,j] = rstd[i]*g[j]*dy[i,j]
 *                       - x[i,j] * rstd[i]^3 * mean_k(g[k]*dy[i,k]*x[i,k])
 *                                                        (written)
 *             dg[j]  += sum_i dy[i,j] * x[i,j] * rstd[i] (accumulated)
 *
 * The row means are summed in double (this is the reference engine), and
 * so are the column sums of dg. Rows are independent: parallel over rows;
 * dg is parallel over columns, each thread summing its columns over all
 * rows in order. */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <string.h>
#include <stdlib.h>

enum { COLS = 64 };   /* columns per parallel block of dg */

int cpu_rmsnorm_fwd(engine *e, const float *x, const float *g, float *y,
                    float *rstd, int n, int d, float eps) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int i = 0; i < n; i++) {
    const float *xi = x + (size_t)i * d;
    float *yi = y + (size_t)i * d;
    double ss = 0.0;
    for (int j = 0; j < d; j++) ss += (double)xi[j] * xi[j];
    double r = 1.0 / sqrt(ss / d + (double)eps);
    for (int j = 0; j < d; j++) yi[j] = (float)(xi[j] * r * g[j]);
    rstd[i] = (float)r;
  }
  return 0;
}

int cpu_rmsnorm_bwd(engine *e, const float *dy, const float *x,
                    const float *g, const float *rstd, float *dx, float *dg,
                    int n, int d) {
  /* dg first (dx may be dy's buffer), by blocks of columns so the rows are
   * read in order. */
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int j0 = 0; j0 < d; j0 += COLS) {
    int nj = j0 + COLS < d ? COLS : d - j0;
    double s[COLS] = {0};
    for (int i = 0; i < n; i++) {
      const float *dyi = dy + (size_t)i * d + j0, *xi = x + (size_t)i * d + j0;
      for (int j = 0; j < nj; j++) s[j] += (double)dyi[j] * xi[j] * rstd[i];
    }
    for (int j = 0; j < nj; j++) dg[j0 + j] += (float)s[j];
  }
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int i = 0; i < n; i++) {
    const float *dyi = dy + (size_t)i * d, *xi = x + (size_t)i * d;
    float *dxi = dx + (size_t)i * d;
    double r = rstd[i], dot = 0.0;
    for (int j = 0; j < d; j++) dot += (double)g[j] * dyi[j] * xi[j];
    double c = r * r * r * (dot / d);
    for (int j = 0; j < d; j++)
      dxi[j] = (float)(r * g[j] * dyi[j] - xi[j] * c);
  }
  return 0;
}

int cpu_add_rmsnorm_fwd(engine *e, const float *a, const float *b, float *sum,
                        const float *g, void *y, dtype yt, float *rstd, int n,
                        int d, float eps) {
  const float *x = a;
  if (b) {
    TRY(cpu_add(e, a, b, sum, (size_t)n * d));
    x = sum;
  } else if (sum && sum != a) {
    memcpy(sum, a, (size_t)n * d * sizeof(float));
  }
  cpu_stage s;   /* a 16-bit y: the fp32 result rounded */
  cpu_stage_init(&s, e);
  float *fy = cpu_stage_out(&s, y, yt, (size_t)n * d, 0);
  return cpu_stage_end(&s, cpu_stage_ok(&s)
                               ? cpu_rmsnorm_fwd(e, x, g, fy, rstd, n, d, eps)
                               : 0);
}

int cpu_rmsnorm_bwd_ex(engine *e, const void *dy_in, const float *x,
                       const float *g, const float *rstd, const float *dres,
                       float *dx, void *dx_low, dtype lt, float *dg, int n,
                       int d) {
  size_t nd = (size_t)n * d;
  cpu_stage s;   /* a 16-bit dy widened, dx_low rounded from dx */
  cpu_stage_init(&s, e);
  const float *dy = cpu_stage_in(&s, dy_in, lt, nd);
  float *t = malloc(nd * sizeof *t);
  int rc = t && cpu_stage_ok(&s) ? cpu_rmsnorm_bwd(e, dy, x, g, rstd, t, dg, n, d) : 0;
  if (rc == 0 && t && cpu_stage_ok(&s)) {
    for (size_t i = 0; i < nd; i++) dx[i] = (dres ? dres[i] : 0.0f) + t[i];
    if (dx_low && dx_low != dx) rc = cpu_cast(e, dx, DT_F32, dx_low, lt, nd);
  }
  if (!t && rc == 0)
    rc = err_set(ERR_OOM, __FILE__, __LINE__, "out of host memory (%zu bytes)",
                 nd * sizeof *t);
  free(t);
  return cpu_stage_end(&s, rc);
}
