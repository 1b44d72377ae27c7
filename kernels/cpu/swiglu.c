/* The SwiGLU gate on the CPU, elementwise over n elements.
 *
 *   forward   h = silu(a) * b,  silu(z) = z * sigmoid(z)
 *   backward  da = dh * b * silu'(a),  db = dh * silu(a)      (written)
 *             silu'(z) = sigmoid(z) * (1 + z * (1 - sigmoid(z)))
 *
 * Computed in double per element; sigmoid(z) = 1/(1+exp(-z)) is safe at
 * both ends (exp overflows to inf and the sigmoid to 0, never NaN). */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <math.h>

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

/* h = silu(z) * b, the one formula both passes use. */
static float swiglu1(double z, double b) { return (float)(z * sigmoid(z) * b); }

int cpu_swiglu_fwd(engine *e, const float *a, const float *b, float *h,
                   size_t n) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) h[i] = swiglu1(a[i], b[i]);
  return 0;
}

/* One pass, each element's dh, a and b read before its da, db and h (when
 * not NULL) are written: in place is allowed (ops.def). */
static int swiglu_bwd_pass(engine *e, const float *dh, const float *a,
                           const float *b, float *da, float *db, float *h,
                           size_t n) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) {
    double z = a[i], s = sigmoid(z), g = dh[i], bi = b[i];
    da[i] = (float)(g * bi * s * (1.0 + z * (1.0 - s)));
    db[i] = (float)(g * z * s);
    if (h) h[i] = swiglu1(z, bi);
  }
  return 0;
}

int cpu_swiglu_bwd(engine *e, const float *dh, const float *a,
                   const float *b, float *da, float *db, size_t n) {
  return swiglu_bwd_pass(e, dh, a, b, da, db, NULL, n);
}

int cpu_swiglu_fwd_ex(engine *e, const void *a, const void *b, void *h,
                      dtype lt, size_t n) {
  cpu_stage s;
  cpu_stage_init(&s, e);
  const float *fa = cpu_stage_in(&s, a, lt, n), *fb = cpu_stage_in(&s, b, lt, n);
  float *fh = cpu_stage_out(&s, h, lt, n, 0);
  return cpu_stage_end(&s, cpu_stage_ok(&s) ? cpu_swiglu_fwd(e, fa, fb, fh, n) : 0);
}

int cpu_swiglu_bwd_ex(engine *e, const void *dh, const void *a, const void *b,
                      void *da, void *db, void *h, dtype lt, size_t n) {
  cpu_stage s;
  cpu_stage_init(&s, e);
  const float *fdh = cpu_stage_in(&s, dh, lt, n), *fa = cpu_stage_in(&s, a, lt, n),
              *fb = cpu_stage_in(&s, b, lt, n);
  float *fda = cpu_stage_out(&s, da, lt, n, 0), *fdb = cpu_stage_out(&s, db, lt, n, 0),
        *fh = cpu_stage_out(&s, h, lt, n, 0);
  return cpu_stage_end(&s, cpu_stage_ok(&s)
                               ? swiglu_bwd_pass(e, fdh, fa, fb, fda, fdb, fh, n)
                               : 0);
}
