/* Rotary position embedding on the CPU, in place on x [B, H, T, Dh].
 *
 * For position t and pair j < Dh/2, with angle a = t * theta^(-2j/Dh):
 *   x'[2j]   = x[2j] cos a - x[2j+1] sin a
 *   x'[2j+1] = x[2j] sin a + x[2j+1] cos a
 * inverse = 1 rotates by -a: the transpose of the rotation, which is the
 * backward pass (dx = R^T dy) as well as the inverse.
 *
 * The cos/sin table [T, Dh/2] is computed once per call in double; rows
 * (b, h, t) are independent and run in parallel. */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "common/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cpu_rope(engine *e, float *x, int batch, int heads, int seq, int dh,
             float theta, int inverse) {
  int half = dh / 2;
  size_t entries = (size_t)seq * half;
  double *cs = malloc(2 * entries * sizeof *cs);   /* [T, Dh/2] cos, sin */
  CHECK_ALLOC(cs, 2 * entries * sizeof *cs);
  double sign = inverse ? -1.0 : 1.0;
  for (int j = 0; j < half; j++) {
    double freq = pow((double)theta, -2.0 * j / dh);
    for (int t = 0; t < seq; t++) {
      double a = t * freq;
      cs[2 * ((size_t)t * half + j)] = cos(a);
      cs[2 * ((size_t)t * half + j) + 1] = sign * sin(a);
    }
  }
  long long rows = (long long)batch * heads * seq;
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (long long r = 0; r < rows; r++) {
    float *xr = x + (size_t)r * dh;
    const double *c = cs + 2 * (size_t)(r % seq) * half;
    for (int j = 0; j < half; j++) {
      double x0 = xr[2 * j], x1 = xr[2 * j + 1];
      double co = c[2 * j], si = c[2 * j + 1];
      xr[2 * j] = (float)(x0 * co - x1 * si);
      xr[2 * j + 1] = (float)(x0 * si + x1 * co);
    }
  }
  free(cs);
  return 0;
}

/* Row r = (b, t) of qkv [B*T, 3D]; part p (0 q, 1 k, 2 v), head h: its Dh
 * values are qkv[r, p*D + h*Dh ...], and land at [b, h, t, :]. */
static int split_rope(engine *e, const float *qkv, float *q, float *k,
                      float *v, int batch, int seq, int heads, int dh,
                      float theta) {
  const int D = heads * dh;
  float *out[3] = {q, k, v};
  for (int p = 0; p < 3; p++)
    for (int b = 0; b < batch; b++)
      for (int t = 0; t < seq; t++)
        for (int h = 0; h < heads; h++)
          memcpy(out[p] + (((size_t)b * heads + h) * seq + t) * dh,
                 qkv + ((size_t)b * seq + t) * 3 * D + (size_t)p * D +
                     (size_t)h * dh,
                 dh * sizeof(float));
  TRY(cpu_rope(e, q, batch, heads, seq, dh, theta, 0));
  TRY(cpu_rope(e, k, batch, heads, seq, dh, theta, 0));
  return 0;
}

/* 16-bit: qkv widened, q, k, v rotated in fp32 and rounded (cpu_stage). */
int cpu_qkv_split_rope(engine *e, const void *qkv, void *q, void *k,
                       void *v, dtype lt, int batch, int seq, int heads,
                       int dh, float theta) {
  size_t n = (size_t)batch * seq * heads * dh;
  cpu_stage s;
  cpu_stage_init(&s, e);
  const float *fqkv = cpu_stage_in(&s, qkv, lt, 3 * n);
  float *fq = cpu_stage_out(&s, q, lt, n, 0), *fk = cpu_stage_out(&s, k, lt, n, 0),
        *fv = cpu_stage_out(&s, v, lt, n, 0);
  return cpu_stage_end(&s, cpu_stage_ok(&s) ? split_rope(e, fqkv, fq, fk, fv, batch,
                                                         seq, heads, dh, theta)
                                            : 0);
}

static int merge_rope_bwd(engine *e, const float *dq, const float *dk,
                          const float *dv, float *dqkv, int batch, int seq,
                          int heads, int dh, float theta) {
  const int D = heads * dh;
  size_t per = (size_t)batch * heads * seq * dh;
  float *rot = malloc(2 * per * sizeof *rot);
  CHECK_ALLOC(rot, 2 * per * sizeof *rot);
  memcpy(rot, dq, per * sizeof(float));
  memcpy(rot + per, dk, per * sizeof(float));
  int rc = cpu_rope(e, rot, batch, heads, seq, dh, theta, 1);
  if (rc == 0) rc = cpu_rope(e, rot + per, batch, heads, seq, dh, theta, 1);
  const float *in[3] = {rot, rot + per, dv};
  float *o = dqkv;
  for (int p = 0; rc == 0 && p < 3; p++)
    for (int b = 0; b < batch; b++)
      for (int t = 0; t < seq; t++)
        for (int h = 0; h < heads; h++)
          memcpy(o + ((size_t)b * seq + t) * 3 * D + (size_t)p * D +
                     (size_t)h * dh,
                 in[p] + (((size_t)b * heads + h) * seq + t) * dh,
                 dh * sizeof(float));
  free(rot);
  return rc;
}

int cpu_qkv_merge_rope_bwd(engine *e, const void *dq, const void *dk,
                           const void *dv, void *dqkv, dtype lt, int batch,
                           int seq, int heads, int dh, float theta) {
  size_t n = (size_t)batch * seq * heads * dh;
  cpu_stage s;
  cpu_stage_init(&s, e);
  const float *fdq = cpu_stage_in(&s, dq, lt, n), *fdk = cpu_stage_in(&s, dk, lt, n),
              *fdv = cpu_stage_in(&s, dv, lt, n);
  float *fo = cpu_stage_out(&s, dqkv, lt, 3 * n, 0);
  return cpu_stage_end(&s, cpu_stage_ok(&s) ? merge_rope_bwd(e, fdq, fdk, fdv, fo, batch,
                                                             seq, heads, dh, theta)
                                            : 0);
}
