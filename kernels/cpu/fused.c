/* The fused path on the CPU engine: each operation is the composition of the
 * plain operations it replaces (kernels.h, "the fused path"), fp32 only, so
 * the fused model on the CPU computes what the op-by-op model computes, and
 * the CUDA engine's fused kernels have a readable reference. */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "common/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int f32_only(const char *op, dtype t) {
  if (t != DT_F32)
    FAIL(ERR_FAIL, "%s: the cpu engine computes in f32 only (asked for %s; "
         "allowed: f32)", op, dtype_name(t));
  return 0;
}

int cpu_matmul_ex(engine *e, int ta, int tb, int m, int n, int k, float alpha,
                  const void *A, int lda, const void *B, int ldb, dtype in_t,
                  float beta, void *C, int ldc, dtype ct, f32_products f32) {
  TRY(f32_only("k_matmul_ex", in_t));
  if (f32 != F32_EXACT)
    FAIL(ERR_FAIL, "k_matmul_ex: the cpu engine has no TF32 tensor cores for "
         "%s products (allowed: fp32)", f32_products_name(f32));
  TRY(f32_only("k_matmul_ex", ct));
  return cpu_matmul(e, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                    DT_F32);
}

int cpu_add_rmsnorm_fwd(engine *e, const float *a, const float *b, float *sum,
                        const float *g, void *y, dtype yt, float *rstd, int n,
                        int d, float eps) {
  TRY(f32_only("k_add_rmsnorm_fwd", yt));
  const float *x = a;
  if (b) {
    TRY(cpu_add(e, a, b, sum, (size_t)n * d));
    x = sum;
  } else if (sum && sum != a) {
    memcpy(sum, a, (size_t)n * d * sizeof(float));
  }
  return cpu_rmsnorm_fwd(e, x, g, y, rstd, n, d, eps);
}

int cpu_rmsnorm_bwd_ex(engine *e, const void *dy_in, const float *x,
                       const float *g, const float *rstd, const float *dres,
                       float *dx, void *dx_low, dtype lt, float *dg, int n,
                       int d) {
  TRY(f32_only("k_rmsnorm_bwd_ex", lt));
  const float *dy = dy_in;
  size_t nd = (size_t)n * d;
  float *t = malloc(nd * sizeof *t);
  CHECK_ALLOC(t, nd * sizeof *t);
  int rc = cpu_rmsnorm_bwd(e, dy, x, g, rstd, t, dg, n, d);
  if (rc == 0) {
    for (size_t i = 0; i < nd; i++) dx[i] = (dres ? dres[i] : 0.0f) + t[i];
    if (dx_low && dx_low != dx) memcpy(dx_low, dx, nd * sizeof(float));
  }
  free(t);
  return rc;
}

/* Row r = (b, t) of qkv [B*T, 3D]; part p (0 q, 1 k, 2 v), head h: its Dh
 * values are qkv[r, p*D + h*Dh ...], and land at [b, h, t, :]. */
int cpu_qkv_split_rope(engine *e, const void *qkv_in, void *q, void *k,
                       void *v, dtype lt, int batch, int seq, int heads,
                       int dh, float theta) {
  TRY(f32_only("k_qkv_split_rope", lt));
  const float *qkv = qkv_in;
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

int cpu_qkv_merge_rope_bwd(engine *e, const void *dq, const void *dk,
                           const void *dv, void *dqkv, dtype lt, int batch,
                           int seq, int heads, int dh, float theta) {
  TRY(f32_only("k_qkv_merge_rope_bwd", lt));
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

int cpu_split_heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                       int batch, int seq, int heads, int dh) {
  TRY(f32_only("k_split_heads_ex", xt));
  TRY(f32_only("k_split_heads_ex", yt));
  return cpu_split_heads(e, x, y, batch, seq, heads, dh);
}

int cpu_merge_heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                       int batch, int seq, int heads, int dh) {
  TRY(f32_only("k_merge_heads_ex", xt));
  TRY(f32_only("k_merge_heads_ex", yt));
  return cpu_merge_heads(e, x, y, batch, seq, heads, dh);
}

int cpu_swiglu_fwd_ex(engine *e, const void *a, const void *b, void *h,
                      dtype lt, size_t n) {
  TRY(f32_only("k_swiglu_fwd_ex", lt));
  return cpu_swiglu_fwd(e, a, b, h, n);
}

int cpu_swiglu_bwd_ex(engine *e, const void *dh, const void *a, const void *b,
                      void *da, void *db, void *h, dtype lt, size_t n) {
  TRY(f32_only("k_swiglu_bwd_ex", lt));
  if (h) TRY(cpu_swiglu_fwd(e, a, b, h, n));
  return cpu_swiglu_bwd(e, dh, a, b, da, db, n);
}

int cpu_cross_entropy_bwd_ex(engine *e, const float *logits,
                             const int32_t *targets, const float *lse,
                             void *dlogits, dtype dt, int n, int vocab,
                             float scale) {
  TRY(f32_only("k_cross_entropy_bwd_ex", dt));
  return cpu_cross_entropy_bwd(e, logits, targets, lse, dlogits, n, vocab,
                               scale);
}

int cpu_adamw_ex(engine *e, float *p, void *p_low, dtype lt, const float *g,
                 float *m, float *v, size_t n, float lr, float b1, float b2,
                 float eps, float wd, long long t) {
  TRY(f32_only("k_adamw_ex", lt));
  TRY(cpu_adamw_mean(e, p, &g, 1, m, v, n, lr, b1, b2, eps, wd, t));
  if (p_low && p_low != p) memcpy(p_low, p, n * sizeof(float));
  return 0;
}

int cpu_grad_unscale(engine *e, float *g, size_t n, float inv_scale,
                     int *finite) {
  int ok = 1;
#pragma omp parallel for num_threads(cpu_threads(e)) reduction(&& : ok)
  for (size_t i = 0; i < n; i++) {
    g[i] *= inv_scale;
    ok = ok && isfinite(g[i]);
  }
  *finite = ok;
  return 0;
}
