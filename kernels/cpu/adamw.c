/* The course's AdamW (shared/spec/model.md) on the CPU, step t >= 1, over n
 * elements of parameters p, gradients g and moments m, v:
 *
 *   p -= lr * wd * p
 *   m  = b1 * m + (1 - b1) * g
 *   v  = b2 * v + (1 - b2) * g^2
 *   p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
 *
 * The bias-corrected step size is computed once in double, each element's
 * update in double and stored in fp32. Elements are independent. With ng
 * gradient arrays (k_adamw_mean) g is their fp32 sum in index order times
 * 1/ng in fp32, as the CUDA engine computes it. */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include "common/check.h"

#include <math.h>
#include <stdlib.h>

int cpu_adamw_mean(engine *e, float *p, const float *const *g, int ng,
                   float *m, float *v, size_t n, float lr, float b1, float b2,
                   float eps, float wd, long long t) {
  double step = (double)lr * sqrt(1.0 - pow(b2, (double)t)) /
                (1.0 - pow(b1, (double)t));
  double decay = 1.0 - (double)lr * wd;
  double b1d = b1, b2d = b2;
  float inv = 1.0f / (float)ng;
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) {
    float s = g[0][i];
    for (int k = 1; k < ng; k++) s += g[k][i];
    double gi = ng == 1 ? s : s * inv;
    double mi = b1d * m[i] + (1.0 - b1d) * gi;
    double vi = b2d * v[i] + (1.0 - b2d) * gi * gi;
    m[i] = (float)mi;
    v[i] = (float)vi;
    p[i] = (float)(p[i] * decay - step * mi / (sqrt(vi) + eps));
  }
  return 0;
}

int cpu_adamw_ex(engine *e, float *p, void *p_low, dtype lt, const void *g,
                 dtype gt, float *m, float *v, size_t n, float lr, float b1,
                 float b2, float eps, float wd, long long t,
                 const float *step_dev) {
  /* no graphs here: t says the step; step_dev must agree with it */
  if (step_dev && *step_dev != k_adamw_step_size(lr, b1, b2, t))
    FAIL(ERR_FAIL, "k_adamw_ex: step_dev holds %.9g, step %lld's size is "
         "%.9g (a stale step size: write k_adamw_step_size for the step "
         "before the update)", (double)*step_dev, t,
         (double)k_adamw_step_size(lr, b1, b2, t));
  cpu_stage st;
  cpu_stage_init(&st, e);
  const float *g32 = cpu_stage_in(&st, g, gt, n);   /* a 16-bit g widened */
  int rc = cpu_stage_ok(&st) ? cpu_adamw_mean(e, p, &g32, 1, m, v, n, lr, b1,
                                              b2, eps, wd, t)
                             : 0;
  if (rc == 0 && cpu_stage_ok(&st) && p_low && p_low != p)
    rc = cpu_cast(e, p, DT_F32, p_low, lt, n);   /* the copy, rounded */
  return cpu_stage_end(&st, rc);
}

/* The product into a buffer of its own, then k_adamw_ex: the reference the
 * CUDA engine's one-pass kernel is checked against. */
int cpu_matmul_adamw(engine *e, int rows, int cols, int k, const void *dy,
                     int ldy, const void *x, int ldx, dtype in_t, float *p,
                     void *p_low, float *m, float *v, float lr, float b1,
                     float b2, float eps, float wd, long long t) {
  size_t n = (size_t)rows * cols;
  float *g = malloc(n * sizeof *g);
  CHECK_ALLOC(g, n * sizeof *g);
  int rc = cpu_matmul_ex(e, 1, 0, rows, cols, k, 1.0f, dy, ldy, x, ldx, in_t,
                         0.0f, g, cols, DT_F32, F32_EXACT);
  if (rc == 0)
    rc = cpu_adamw_ex(e, p, p_low, in_t, g, DT_F32, m, v, n, lr, b1, b2, eps,
                      wd, t, NULL);
  free(g);
  return rc;
}
