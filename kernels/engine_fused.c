/* The fused path's k_* entry points (ops.def's K_FUSED rows): check_NAME,
 * the same argument checks for every engine, one per op in ops.def's order,
 * then the generated entry point calls ops->fused (engine_internal.h,
 * ENG_ENTRY). Kept apart from engine.c because these calls carry dtypes per
 * operand: the checks here are mostly about which dtype combinations
 * exist. */
#include "config.h"
#include "kernels/engine_internal.h"
#include "common/check.h"

#define NEED(cond, ...)                                                      \
  do {                                                                       \
    if (!(cond)) FAIL(ERR_FAIL, __VA_ARGS__);                                \
  } while (0)
#define NEED_BUF(op, p) NEED((p) != NULL, "%s: " #p " is NULL", op)
static int known(dtype t) { return t == DT_F32 || t == DT_BF16 || t == DT_F16; }

/* The engine has the fused path and `t` is a dtype it can store. */
static int need_fused(engine *e, const char *op, dtype t) {
  NEED(known(t), "%s: unknown dtype %d", op, (int)t);
  NEED(e->ops->fused != NULL, "%s: the %s engine has no fused path", op,
       e->ops->name);
  return 0;
}

static int check_matmul_ex(engine *e, int trans_a, int trans_b, int m, int n,
                           int k, float alpha, const void *A, int lda,
                           const void *B, int ldb, dtype in_t, float beta,
                           void *C, int ldc, dtype ct, f32_products f32) {
  const char *op = "k_matmul_ex";
  TRY(need_fused(e, op, in_t));
  NEED(known(ct) && (ct == DT_F32 || ct == in_t),
       "%s: output dtype %s with %s inputs (allowed: f32 or the inputs' "
       "dtype)", op, dtype_name(ct), dtype_name(in_t));
  NEED(f32 == F32_EXACT || f32 == F32_TF32 || f32 == F32_3XTF32,
       "%s: f32 = %d (allowed: F32_EXACT, F32_TF32, F32_3XTF32)", op, (int)f32);
  NEED(m >= 0 && n >= 0 && k >= 0, "%s: m=%d n=%d k=%d must be >= 0", op, m,
       n, k);
  NEED((trans_a == 0 || trans_a == 1) && (trans_b == 0 || trans_b == 1),
       "%s: trans_a=%d trans_b=%d must be 0 or 1", op, trans_a, trans_b);
  int acols = trans_a ? m : k, bcols = trans_b ? k : n;
  NEED(lda >= (acols > 1 ? acols : 1), "%s: lda=%d < %d, the columns of A",
       op, lda, acols);
  NEED(ldb >= (bcols > 1 ? bcols : 1), "%s: ldb=%d < %d, the columns of B",
       op, ldb, bcols);
  NEED(ldc >= (n > 1 ? n : 1), "%s: ldc=%d < n=%d", op, ldc, n);
  if (m == 0 || n == 0) return 1;
  NEED_BUF(op, C);
  if (k > 0) { NEED_BUF(op, A); NEED_BUF(op, B); }
  return 0;
}

static int check_add_rmsnorm_fwd(engine *e, const float *a, const float *b,
                                 float *sum, const float *g, void *y, dtype yt,
                                 float *rstd, int n, int d, float eps) {
  const char *op = "k_add_rmsnorm_fwd";
  TRY(need_fused(e, op, yt));
  NEED(n >= 0 && d >= 0, "%s: n=%d d=%d must be >= 0", op, n, d);
  if (n == 0 || d == 0) return 1;
  NEED_BUF(op, a); NEED_BUF(op, g); NEED_BUF(op, y); NEED_BUF(op, rstd);
  NEED(b == NULL || sum != NULL, "%s: with b, sum = a + b needs a buffer", op);
  NEED((void *)y != (void *)a && (void *)y != (void *)b &&
           (sum == NULL || (void *)y != (void *)sum),
       "%s: y may not alias a, b or sum", op);
  return 0;
}

static int check_rmsnorm_bwd_ex(engine *e, const void *dy, const float *x,
                                const float *g, const float *rstd,
                                const float *dres, float *dx, void *dx_low,
                                dtype lt, float *dg, int n, int d) {
  const char *op = "k_rmsnorm_bwd_ex";
  TRY(need_fused(e, op, lt));
  NEED(n >= 0 && d >= 0, "%s: n=%d d=%d must be >= 0", op, n, d);
  if (n == 0 || d == 0) return 1;
  NEED_BUF(op, dy); NEED_BUF(op, x); NEED_BUF(op, g); NEED_BUF(op, rstd);
  NEED_BUF(op, dx); NEED_BUF(op, dg);
  NEED(dx != x && dx != dy, "%s: dx may alias dres only", op);
  return 0;
}

static int check_heads(const char *op, int batch, int seq, int heads, int dh) {
  NEED(batch >= 0 && seq >= 0 && heads >= 0 && dh >= 0,
       "%s: batch=%d seq=%d heads=%d dh=%d must be >= 0", op, batch, seq,
       heads, dh);
  return 0;
}

static int check_qkv_split_rope(engine *e, const void *qkv, void *q, void *k,
                                void *v, dtype lt, int batch, int seq,
                                int heads, int dh, float theta) {
  const char *op = "k_qkv_split_rope";
  TRY(need_fused(e, op, lt));
  TRY(check_heads(op, batch, seq, heads, dh));
  NEED(dh % 2 == 0, "%s: dh=%d must be even (RoPE rotates pairs)", op, dh);
  if ((long long)batch * seq * heads * dh == 0) return 1;
  NEED_BUF(op, qkv); NEED_BUF(op, q); NEED_BUF(op, k); NEED_BUF(op, v);
  return 0;
}

static int check_qkv_merge_rope_bwd(engine *e, const void *dq, const void *dk,
                                    const void *dv, void *dqkv, dtype lt,
                                    int batch, int seq, int heads, int dh,
                                    float theta) {
  const char *op = "k_qkv_merge_rope_bwd";
  TRY(need_fused(e, op, lt));
  TRY(check_heads(op, batch, seq, heads, dh));
  NEED(dh % 2 == 0, "%s: dh=%d must be even (RoPE rotates pairs)", op, dh);
  if ((long long)batch * seq * heads * dh == 0) return 1;
  NEED_BUF(op, dq); NEED_BUF(op, dk); NEED_BUF(op, dv); NEED_BUF(op, dqkv);
  return 0;
}

/* What split and merge share: dtypes, sizes, buffers. 1: no work. */
static int check_heads_ex(engine *e, const char *op, const void *x, dtype xt,
                          const void *y, dtype yt, int batch, int seq,
                          int heads, int dh) {
  TRY(need_fused(e, op, xt));
  TRY(need_fused(e, op, yt));
  TRY(check_heads(op, batch, seq, heads, dh));
  if ((long long)batch * seq * heads * dh == 0) return 1;
  NEED_BUF(op, x); NEED_BUF(op, y);
  NEED(x != y, "%s: y may not alias x", op);
  return 0;
}

static int check_split_heads_ex(engine *e, const void *x, dtype xt, void *y,
                                dtype yt, int batch, int seq, int heads,
                                int dh) {
  return check_heads_ex(e, "k_split_heads_ex", x, xt, y, yt, batch, seq,
                        heads, dh);
}

static int check_merge_heads_ex(engine *e, const void *x, dtype xt, void *y,
                                dtype yt, int batch, int seq, int heads,
                                int dh) {
  return check_heads_ex(e, "k_merge_heads_ex", x, xt, y, yt, batch, seq,
                        heads, dh);
}

static int check_swiglu_fwd_ex(engine *e, const void *a, const void *b,
                               void *h, dtype lt, size_t n) {
  const char *op = "k_swiglu_fwd_ex";
  TRY(need_fused(e, op, lt));
  if (n == 0) return 1;
  NEED_BUF(op, a); NEED_BUF(op, b); NEED_BUF(op, h);
  return 0;
}

static int check_swiglu_bwd_ex(engine *e, const void *dh, const void *a,
                               const void *b, void *da, void *db, void *h,
                               dtype lt, size_t n) {
  const char *op = "k_swiglu_bwd_ex";
  TRY(need_fused(e, op, lt));
  if (n == 0) return 1;
  NEED_BUF(op, dh); NEED_BUF(op, a); NEED_BUF(op, b);
  NEED_BUF(op, da); NEED_BUF(op, db);
  NEED(da != db, "%s: da and db must differ", op);
  /* in place, element by element: da over a, db over b, h over dh */
  NEED(da == a || (da != b && da != dh), "%s: da may alias a only", op);
  NEED(db == b || (db != a && db != dh), "%s: db may alias b only", op);
  NEED(h == NULL || h == dh || (h != da && h != db && h != a && h != b),
       "%s: h may alias dh only", op);
  return 0;
}

static int check_cross_entropy_bwd_ex(engine *e, const float *logits,
                                      const int32_t *targets, const float *lse,
                                      void *dlogits, dtype dt, int n,
                                      int vocab, float scale) {
  const char *op = "k_cross_entropy_bwd_ex";
  TRY(need_fused(e, op, dt));
  NEED(n >= 0 && vocab > 0, "%s: n=%d must be >= 0 and vocab=%d > 0", op, n,
       vocab);
  if (n == 0) return 1;
  NEED_BUF(op, logits); NEED_BUF(op, targets); NEED_BUF(op, lse);
  NEED_BUF(op, dlogits);
  NEED(dt == DT_F32 || (const void *)dlogits != (const void *)logits,
       "%s: %s dlogits cannot overwrite fp32 logits in place", op,
       dtype_name(dt));
  return 0;
}

static int check_adamw_ex(engine *e, float *p, void *p_low, dtype lt,
                          const void *g, dtype gt, float *m, float *v,
                          size_t n, float lr, float b1, float b2, float eps,
                          float wd, long long t, const float *step_dev) {
  const char *op = "k_adamw_ex";
  TRY(need_fused(e, op, lt));
  TRY(need_fused(e, op, gt));
  NEED(t >= 1, "%s: step t=%lld must be >= 1", op, t);
  NEED(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1,
       "%s: betas (%g, %g) must be in [0, 1)", op, (double)b1, (double)b2);
  if (n == 0) return 1;
  NEED_BUF(op, p); NEED_BUF(op, g); NEED_BUF(op, m); NEED_BUF(op, v);
  return 0;
}

static int check_matmul_adamw(engine *e, int rows, int cols, int k,
                              const void *dy, int ldy, const void *x, int ldx,
                              dtype in_t, float *p, void *p_low, float *m,
                              float *v, float lr, float b1, float b2,
                              float eps, float wd, long long t) {
  const char *op = "k_matmul_adamw";
  TRY(need_fused(e, op, in_t));
  NEED(rows >= 0 && cols >= 0 && k >= 0, "%s: rows=%d cols=%d k=%d must be "
       ">= 0", op, rows, cols, k);
  NEED(ldy >= (rows > 1 ? rows : 1), "%s: ldy=%d < rows=%d", op, ldy, rows);
  NEED(ldx >= (cols > 1 ? cols : 1), "%s: ldx=%d < cols=%d", op, ldx, cols);
  NEED(t >= 1, "%s: step t=%lld must be >= 1", op, t);
  NEED(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1,
       "%s: betas (%g, %g) must be in [0, 1)", op, (double)b1, (double)b2);
  if (rows == 0 || cols == 0) return 1;
  NEED_BUF(op, p); NEED_BUF(op, m); NEED_BUF(op, v);
  if (k > 0) { NEED_BUF(op, dy); NEED_BUF(op, x); }
  return 0;
}

static int check_grad_unscale(engine *e, float *g, size_t n, float inv_scale,
                              int *finite) {
  const char *op = "k_grad_unscale";
  TRY(need_fused(e, op, DT_F32));
  NEED_BUF(op, finite);
  *finite = 1;   /* the answer when there is no work */
  if (n == 0) return 1;
  NEED_BUF(op, g);
  NEED(inv_scale > 0 && inv_scale < 3e38f, "%s: inv_scale=%g must be a "
       "positive finite number", op, (double)inv_scale);
  return 0;
}

/* k_NAME for every K_FUSED row of ops.def. */
#define K_FUSED(name, family, params, args)                                  \
  ENG_ENTRY(name, family, params, args, e->ops->fused, "fused path", name,   \
            args)
#include "kernels/ops.def"
