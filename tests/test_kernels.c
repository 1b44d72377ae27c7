/* kernels/: every operation of kernels.h on the CPU engine.
 *
 * Forwards are compared with direct loops written here in double precision;
 * backwards with central finite differences of those double forwards: for a
 * random linear functional L = sum(w * y), the kernel's backward given
 * dy = w must equal dL/dinput. Inputs are seeded random values away from
 * zero, with odd sizes, so a wrong index or stride shows. Also: AdamW steps
 * against values computed here, casts (exhaustive round trips, ties to even,
 * Inf, NaN, subnormals), the memory accounting, argument checks, and results
 * that do not depend on the thread count.
 *
 * All data goes through eng_alloc / eng_upload / eng_download, so the same
 * checks can run against another engine. Exit 0 when every check passes, 1
 * when one fails, 99 when the test itself cannot run. */
#include "config.h"
#include "tests/testlib.h"
#include "kernels/kernels.h"
#include "kernels/engine_internal.h"   /* a table with a missing op */

#include "common/check.h"
#include "common/intervals.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static engine *E;       /* the engine under test (3 threads: odd on purpose) */

/* A kernel call that must succeed; a failure is a failed check and ends the
 * test function (its results would be garbage). */
#define RUN(call)                                                            \
  do {                                                                       \
    if ((call) < 0) {                                                        \
      check(0, "%s returned an error: %s", #call, err_msg());                \
      return;                                                                \
    }                                                                        \
  } while (0)

/* ---- random inputs ------------------------------------------------------------ */

static double *to_double(const float *x, size_t n) {
  double *y = malloc(n * sizeof *y);
  if (!y) hard_fail("malloc");
  for (size_t i = 0; i < n; i++) y[i] = x[i];
  return y;
}

/* ---- engine memory --------------------------------------------------------------- */

/* Engine copy of host (or uninitialised when host is NULL). */
static void *dev(const void *host, size_t bytes) {
  void *p;
  if (eng_alloc(E, bytes, "test", &p) < 0) hard_fail("eng_alloc");
  if (host && eng_upload(E, p, host, bytes) < 0) hard_fail("eng_upload");
  return p;
}

static float *devf(const float *host, size_t n) {
  return dev(host, n * sizeof(float));
}

/* A fresh host copy of engine memory (caller frees). */
static float *hostf(const float *d, size_t n) {
  float *h = tl_malloc(n * sizeof *h);
  if (eng_sync(E) < 0 || eng_download(E, h, d, n * sizeof *h) < 0)
    hard_fail("eng_download");
  return h;
}

/* ---- comparisons ------------------------------------------------------------------ */

static void same_bits(const char *what, const float *a, const float *b,
                      size_t n) {
  size_t diff = 0;
  for (size_t i = 0; i < n; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
  check(diff == 0, "%s: %zu of %zu elements differ", what, diff, n);
}

/* A call that must fail with ERR_FAIL and a message containing `needle`. */
static void expect_fail(const char *what, int rc, const char *needle) {
  int ok = rc == ERR_FAIL && strstr(err_msg(), needle) != NULL;
  check(ok, "%s is refused (rc %d, message: %s)", what, rc, err_msg());
  err_clear();
}

/* ---- finite differences -------------------------------------------------------- */

/* The step of every central difference here (tl_fd_grad): the losses are
 * smooth and computed in double, so truncation, O(h^2), dominates. */
static const double fd_h = 1e-3;

static double dot(const double *w, const double *y, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += w[i] * y[i];
  return s;
}

/* ======================================================================= */
/* matrix products                                                          */
/* ======================================================================= */

/* want = alpha op(A) op(B) + beta C0 in double; mag = the same sum of
 * absolute values, the scale fp32 rounding is measured against. */
static void matmul_ref(int ta, int tb, int m, int n, int k, double alpha,
                       const float *A, int lda, const float *B, int ldb,
                       double beta, const float *C0, int ldc, double *want,
                       double *mag) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0, a = 0;
      for (int p = 0; p < k; p++) {
        double x = ta ? A[p * lda + i] : A[i * lda + p];
        double y = tb ? B[j * ldb + p] : B[p * ldb + j];
        s += x * y;
        a += fabs(x * y);
      }
      double c = beta == 0 ? 0 : C0[i * ldc + j];
      want[i * n + j] = alpha * s + beta * c;
      mag[i * n + j] = fabs(alpha) * a + fabs(beta * c);
    }
}

/* Every element within tol of its own magnitude; C's padding untouched. */
static void close_matmul(const char *what, const float *C, const float *C0,
                         int m, int n, int ldc, const double *want,
                         const double *mag, double tol) {
  double worst = 0;
  int pad_changed = 0;
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < n; j++) {
      double e = fabs(C[i * ldc + j] - want[i * n + j]) / (mag[i * n + j] + 1e-30);
      if (isnan(e)) e = INFINITY;
      if (e > worst) worst = e;
    }
    for (int j = n; j < ldc; j++)
      pad_changed |= memcmp(&C[i * ldc + j], &C0[i * ldc + j], sizeof *C) != 0;
  }
  check(worst <= tol && !pad_changed,
        "%s: max error %.2e of the element's magnitude (tol %.0e)%s", what,
        worst, tol, pad_changed ? "; WROTE INTO THE PADDING" : "");
}

static void test_matmul_case(int ta, int tb, int m, int n, int k, float alpha,
                             float beta) {
  int pad = 3;                       /* leading dimensions larger than needed */
  int arows = ta ? k : m, acols = ta ? m : k;
  int brows = tb ? n : k, bcols = tb ? k : n;
  int lda = acols + pad, ldb = bcols + pad, ldc = n + pad;
  float *A = tl_rand((size_t)arows * lda, 1);
  float *B = tl_rand((size_t)brows * ldb, 1);
  float *C0 = tl_rand((size_t)m * ldc, 1);
  if (beta == 0)                     /* beta = 0: C must not be read */
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) C0[i * ldc + j] = NAN;
  double *want = tl_malloc((size_t)m * n * sizeof *want);
  double *mag = tl_malloc((size_t)m * n * sizeof *mag);
  matmul_ref(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C0, ldc, want, mag);
  float *dA = devf(A, (size_t)arows * lda), *dB = devf(B, (size_t)brows * ldb);
  float *dC = devf(C0, (size_t)m * ldc);
  char what[128];
  snprintf(what, sizeof what,
           "k_matmul trans_a=%d trans_b=%d m=%d n=%d k=%d alpha=%g beta=%g", ta,
           tb, m, n, k, alpha, beta);
  if (k_matmul(E, ta, tb, m, n, k, alpha, dA, lda, dB, ldb, beta, dC, ldc,
               DT_F32) < 0) {
    check(0, "%s: %s", what, err_msg());
  } else {
    float *C = hostf(dC, (size_t)m * ldc);
    close_matmul(what, C, C0, m, n, ldc, want, mag, 1e-5);
    free(C);
  }
  eng_free(E, dA); eng_free(E, dB); eng_free(E, dC);
  free(A); free(B); free(C0); free(want); free(mag);
}

static void test_matmul(void) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      test_matmul_case(ta, tb, 7, 13, 9, 1.0f, 0.0f);
      test_matmul_case(ta, tb, 7, 13, 9, 0.7f, 0.3f);
      /* Larger than one block in every dimension (MR 4, NB 128, KB 256);
       * its last 22 columns, 13's and 50's take the narrow blocks of 32,
       * 16 and 64 columns. */
      test_matmul_case(ta, tb, 37, 150, 300, -1.3f, 1.0f);
      test_matmul_case(ta, tb, 9, 50, 20, 0.9f, 0.2f);
    }
  test_matmul_case(0, 1, 1, 1, 1, 2.0f, -0.5f);

  /* k = 0: C = beta C. */
  float C0[6], *dC, *C;
  for (int i = 0; i < 6; i++) C0[i] = frand(1);
  dC = devf(C0, 6);
  RUN(k_matmul(E, 0, 0, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 0.5f, dC, 3, DT_F32));
  C = hostf(dC, 6);
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= C[i] == 0.5f * C0[i];
  check(ok, "k_matmul with k=0 leaves C = beta*C");
  free(C);
  eng_free(E, dC);

  /* The CPU engine computes in fp32 only; bad strides are refused. */
  float *dA = devf(C0, 6), *dB = devf(C0, 6);
  dC = devf(C0, 6);
  expect_fail("k_matmul with compute=bf16 on the CPU",
              k_matmul(E, 0, 0, 2, 3, 1, 1, dA, 1, dB, 3, 0, dC, 3, DT_BF16),
              "computes in fp32 only");
  expect_fail("k_matmul with compute=f16 on the CPU",
              k_matmul(E, 0, 0, 2, 3, 1, 1, dA, 1, dB, 3, 0, dC, 3, DT_F16),
              "computes in fp32 only");
  expect_fail("k_matmul with lda < k",
              k_matmul(E, 0, 0, 2, 3, 2, 1, dA, 1, dB, 3, 0, dC, 3, DT_F32),
              "lda=1 < 2");
  expect_fail("k_matmul with ldc < n",
              k_matmul(E, 0, 0, 2, 3, 1, 1, dA, 1, dB, 3, 0, dC, 2, DT_F32),
              "ldc=2 < n=3");
  expect_fail("k_matmul with m < 0",
              k_matmul(E, 0, 0, -1, 3, 1, 1, dA, 1, dB, 3, 0, dC, 3, DT_F32),
              "sizes must be >= 0");
  eng_free(E, dA); eng_free(E, dB); eng_free(E, dC);
}

static void test_matmul_batched_case(int ta, int tb, int m, int n, int k,
                                     int batch, int shared_b, float beta) {
  int arows = ta ? k : m, acols = ta ? m : k;
  int brows = tb ? n : k, bcols = tb ? k : n;
  int lda = acols + 1, ldb = bcols + 2, ldc = n + 1;
  long long sa = (long long)arows * lda + 5;        /* gaps between operands */
  long long sb = shared_b ? 0 : (long long)brows * ldb + 3;
  long long sc = (long long)m * ldc + 7;
  size_t na = (size_t)sa * batch, nb = shared_b ? (size_t)brows * ldb : (size_t)sb * batch;
  size_t nc = (size_t)sc * batch;
  float *A = tl_rand(na, 1), *B = tl_rand(nb, 1), *C0 = tl_rand(nc, 1);
  float alpha = 0.6f;
  double *want = tl_malloc((size_t)m * n * batch * sizeof *want);
  double *mag = tl_malloc((size_t)m * n * batch * sizeof *mag);
  for (int i = 0; i < batch; i++)
    matmul_ref(ta, tb, m, n, k, alpha, A + i * sa, lda, B + i * sb, ldb, beta,
               C0 + i * sc, ldc, want + (size_t)i * m * n, mag + (size_t)i * m * n);
  float *dA = devf(A, na), *dB = devf(B, nb), *dC = devf(C0, nc);
  char what[160];
  snprintf(what, sizeof what,
           "k_matmul_batched trans_a=%d trans_b=%d m=%d n=%d k=%d batch=%d%s "
           "beta=%g",
           ta, tb, m, n, k, batch, shared_b ? " (stride_b=0)" : "", beta);
  if (k_matmul_batched(E, ta, tb, m, n, k, alpha, dA, lda, sa, dB, ldb, sb,
                       beta, dC, ldc, sc, batch, DT_F32) < 0) {
    check(0, "%s: %s", what, err_msg());
  } else {
    float *C = hostf(dC, nc);
    double worst = 0;
    int gaps_changed = 0;
    for (int b = 0; b < batch; b++) {
      const float *Cb = C + b * sc;
      const double *wb = want + (size_t)b * m * n, *mb = mag + (size_t)b * m * n;
      for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
          double e = fabs(Cb[i * ldc + j] - wb[i * n + j]) / (mb[i * n + j] + 1e-30);
          if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
      for (long long q = (long long)m * ldc; q < sc; q++)
        gaps_changed |= C[b * sc + q] != C0[b * sc + q];
    }
    check(worst <= 1e-5 && !gaps_changed,
          "%s: max error %.2e of the element's magnitude%s", what, worst,
          gaps_changed ? "; WROTE BETWEEN OPERANDS" : "");
    free(C);
  }
  eng_free(E, dA); eng_free(E, dB); eng_free(E, dC);
  free(A); free(B); free(C0); free(want); free(mag);
}

static void test_matmul_batched(void) {
  /* Attention's two products: S = Q K^T and O = P V, over B*H = 3 heads. */
  test_matmul_batched_case(0, 1, 9, 9, 6, 3, 0, 0.0f);
  test_matmul_batched_case(0, 0, 9, 6, 9, 3, 0, 0.0f);
  /* Their backward shapes, with beta != 0. */
  test_matmul_batched_case(1, 0, 6, 9, 9, 3, 0, 0.5f);
  test_matmul_batched_case(1, 1, 7, 5, 11, 4, 0, 1.0f);
  test_matmul_batched_case(0, 1, 7, 13, 9, 3, 1, 0.25f);
  float x[64] = {0}, *d = devf(x, 64);
  expect_fail("k_matmul_batched with overlapping outputs",
              k_matmul_batched(E, 0, 0, 2, 2, 2, 1, d, 2, 4, d, 2, 4, 0, d, 2,
                               2, 3, DT_F32),
              "outputs overlap");
  eng_free(E, d);
}

/* ======================================================================= */
/* embedding                                                                */
/* ======================================================================= */

static void test_embedding(void) {
  enum { N = 9, V = 37 };
  const int D = 150;                  /* several column blocks in backward */
  int32_t ids[N] = {5, 36, 0, 5, 17, 5, 36, 2, 11};   /* 5 thrice, 36 twice */
  float *table = tl_rand((size_t)V * D, 1), *dout = tl_rand((size_t)N * D, 1);
  float *dt0 = tl_rand((size_t)V * D, 1);
  int32_t *dids = dev(ids, sizeof ids);
  float *dtable = devf(table, (size_t)V * D), *dpos = devf(NULL, (size_t)N * D);
  RUN(k_embedding_fwd(E, dids, dtable, dpos, N, D, V));
  float *out = hostf(dpos, (size_t)N * D);
  int exact = 1;
  for (int i = 0; i < N; i++)
    exact &= memcmp(out + i * D, table + ids[i] * D, D * sizeof(float)) == 0;
  check(exact, "k_embedding_fwd: out[i,:] = table[ids[i],:] exactly (n=%d, "
        "d=%d, V=%d)", N, D, V);

  /* Backward accumulates into a dtable that already holds values. */
  float *ddout = devf(dout, (size_t)N * D), *ddt = devf(dt0, (size_t)V * D);
  RUN(k_embedding_bwd(E, dids, ddout, ddt, N, D, V));
  double *want = to_double(dt0, (size_t)V * D);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < D; j++) want[ids[i] * D + j] += dout[i * D + j];
  float *dt = hostf(ddt, (size_t)V * D);
  tl_compare_d("k_embedding_bwd accumulates, repeated ids add up", dt, want,
            (size_t)V * D, 1e-6);

  int32_t bad[3] = {1, 37, 2};
  int32_t *dbad = dev(bad, sizeof bad);
  expect_fail("k_embedding_fwd with an id >= V",
              k_embedding_fwd(E, dbad, dtable, dpos, 3, D, V),
              "token id 37 at position 1 is outside [0, 37)");
  bad[1] = -1;
  eng_upload(E, dbad, bad, sizeof bad);
  expect_fail("k_embedding_bwd with an id < 0",
              k_embedding_bwd(E, dbad, ddout, ddt, 3, D, V), "outside [0, 37)");
  eng_free(E, dbad); eng_free(E, dids); eng_free(E, dtable); eng_free(E, dpos);
  eng_free(E, ddout); eng_free(E, ddt);
  free(table); free(dout); free(dt0); free(out); free(want); free(dt);
}

/* ======================================================================= */
/* RMSNorm                                                                  */
/* ======================================================================= */

typedef struct rms_ctx {
  double *x, *g, *w;
  int n, d;
  double eps;
} rms_ctx;

static void rmsnorm_ref(const double *x, const double *g, int n, int d,
                        double eps, double *y, double *rstd) {
  for (int i = 0; i < n; i++) {
    double ss = 0;
    for (int j = 0; j < d; j++) ss += x[i * d + j] * x[i * d + j];
    double r = 1 / sqrt(ss / d + eps);
    if (rstd) rstd[i] = r;
    for (int j = 0; j < d; j++) y[i * d + j] = x[i * d + j] * r * g[j];
  }
}

static double rms_loss(void *p) {
  rms_ctx *c = p;
  double *y = tl_malloc((size_t)c->n * c->d * sizeof *y);
  rmsnorm_ref(c->x, c->g, c->n, c->d, c->eps, y, NULL);
  double l = dot(c->w, y, (size_t)c->n * c->d);
  free(y);
  return l;
}

static void test_rmsnorm(void) {
  enum { N = 7, D = 13 };
  const float eps = 1e-5f;
  float *x = tl_rand(N * D, 2), *g = tl_rand(D, 1), *w = tl_rand(N * D, 1);
  float *dg0 = tl_rand(D, 1);
  rms_ctx c = {to_double(x, N * D), to_double(g, D), to_double(w, N * D), N, D, eps};
  double want_y[N * D], want_r[N];
  rmsnorm_ref(c.x, c.g, N, D, eps, want_y, want_r);

  float *dx_in = devf(x, N * D), *dgain = devf(g, D), *dy_out = devf(NULL, N * D);
  float *drstd = devf(NULL, N);
  RUN(k_rmsnorm_fwd(E, dx_in, dgain, dy_out, drstd, N, D, eps));
  float *y = hostf(dy_out, N * D), *r = hostf(drstd, N);
  tl_compare_d("k_rmsnorm_fwd y (n=7, d=13)", y, want_y, N * D, 1e-6);
  tl_compare_d("k_rmsnorm_fwd rstd", r, want_r, N, 1e-6);

  /* Backward: dx written, dg accumulated onto dg0. */
  double fd_x[N * D], fd_g[D];
  tl_fd_grad(rms_loss, &c, c.x, N * D, fd_h, fd_x);
  tl_fd_grad(rms_loss, &c, c.g, D, fd_h, fd_g);
  float *dw = devf(w, N * D), *ddx = devf(x, N * D), *ddg = devf(dg0, D);
  RUN(k_rmsnorm_bwd(E, dw, dx_in, dgain, drstd, ddx, ddg, N, D));
  float *gx = hostf(ddx, N * D), *gg = hostf(ddg, D);
  tl_compare_d("k_rmsnorm_bwd dx vs finite differences", gx, fd_x, N * D, 1e-4);
  for (int j = 0; j < D; j++) gg[j] -= dg0[j];
  tl_compare_d("k_rmsnorm_bwd dg (accumulated) vs finite differences", gg, fd_g,
            D, 1e-4);

  expect_fail("k_rmsnorm_fwd in place", k_rmsnorm_fwd(E, dx_in, dgain, dx_in,
              drstd, N, D, eps), "y may not alias x");
  eng_free(E, dx_in); eng_free(E, dgain); eng_free(E, dy_out);
  eng_free(E, drstd); eng_free(E, dw); eng_free(E, ddx); eng_free(E, ddg);
  free(x); free(g); free(w); free(dg0); free(y); free(r); free(gx); free(gg);
  free(c.x); free(c.g); free(c.w);
}

/* ======================================================================= */
/* RoPE and head layout                                                     */
/* ======================================================================= */

typedef struct rope_ctx {
  double *x, *w;
  int b, h, t, dh;
  double theta;
} rope_ctx;

/* y = rotation of x [B,H,T,Dh], angle t * theta^(-2j/Dh) for pair j. */
static void rope_ref(const double *x, int b, int h, int t, int dh,
                     double theta, double *y) {
  for (int bh = 0; bh < b * h; bh++)
    for (int pos = 0; pos < t; pos++)
      for (int j = 0; j < dh / 2; j++) {
        double a = pos * pow(theta, -2.0 * j / dh);
        size_t o = ((size_t)bh * t + pos) * dh + 2 * j;
        y[o] = x[o] * cos(a) - x[o + 1] * sin(a);
        y[o + 1] = x[o] * sin(a) + x[o + 1] * cos(a);
      }
}

static double rope_loss(void *p) {
  rope_ctx *c = p;
  size_t n = (size_t)c->b * c->h * c->t * c->dh;
  double *y = tl_malloc(n * sizeof *y);
  rope_ref(c->x, c->b, c->h, c->t, c->dh, c->theta, y);
  double l = dot(c->w, y, n);
  free(y);
  return l;
}

static void test_rope(void) {
  enum { B = 2, H = 3, T = 9, DH = 6, N = B * H * T * DH };
  const float theta = 10000.0f;
  float *x = tl_rand(N, 1), *w = tl_rand(N, 1);
  rope_ctx c = {to_double(x, N), to_double(w, N), B, H, T, DH, theta};
  double want[N];
  rope_ref(c.x, B, H, T, DH, theta, want);
  float *d = devf(x, N);
  RUN(k_rope(E, d, B, H, T, DH, theta, 0));
  float *y = hostf(d, N);
  tl_compare_d("k_rope forward (B=2, H=3, T=9, Dh=6, theta=1e4)", y, want, N, 1e-6);
  RUN(k_rope(E, d, B, H, T, DH, theta, 1));
  float *back = hostf(d, N);
  tl_compare_d("k_rope inverse undoes forward", back, c.x, N, 1e-6);
  /* Position 0 is not rotated at all. */
  int ok = 1;
  for (int bh = 0; bh < B * H; bh++)
    ok &= memcmp(y + (size_t)bh * T * DH, x + (size_t)bh * T * DH,
                 DH * sizeof(float)) == 0;
  check(ok, "k_rope leaves position 0 unchanged");

  /* Backward: dx = inverse rotation of dy. */
  double fd[N];
  tl_fd_grad(rope_loss, &c, c.x, N, fd_h, fd);
  float *dw = devf(w, N);
  RUN(k_rope(E, dw, B, H, T, DH, theta, 1));
  float *gx = hostf(dw, N);
  tl_compare_d("k_rope backward (inverse on dy) vs finite differences", gx, fd, N,
            1e-4);
  expect_fail("k_rope with odd dh", k_rope(E, d, B, H, T, 5, theta, 0),
              "dh=5 must be even");
  eng_free(E, d); eng_free(E, dw);
  free(x); free(w); free(y); free(back); free(gx); free(c.x); free(c.w);
}

static void test_heads(void) {
  enum { B = 2, T = 9, H = 3, DH = 6, N = B * T * H * DH };
  float *x = tl_rand(N, 1);
  float *dx = devf(x, N), *dy = devf(NULL, N), *dz = devf(NULL, N);
  RUN(k_split_heads(E, dx, dy, B, T, H, DH));
  float *y = hostf(dy, N);
  int ok = 1;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++)
        for (int k = 0; k < DH; k++)
          ok &= y[((b * H + h) * T + t) * DH + k] == x[(b * T + t) * H * DH + h * DH + k];
  check(ok, "k_split_heads: y[b,h,t,k] = x[b,t,h*Dh+k] (B=2, T=9, H=3, Dh=6)");
  RUN(k_merge_heads(E, dy, dz, B, T, H, DH));
  float *z = hostf(dz, N);
  check(memcmp(z, x, N * sizeof *z) == 0, "k_merge_heads(k_split_heads(x)) == x");
  expect_fail("k_split_heads in place", k_split_heads(E, dx, dx, B, T, H, DH),
              "may not alias");
  eng_free(E, dx); eng_free(E, dy); eng_free(E, dz);
  free(x); free(y); free(z);
}

/* ======================================================================= */
/* causal softmax                                                           */
/* ======================================================================= */

typedef struct sm_ctx {
  double *s, *w;
  int mats, t;
  double scale;
} sm_ctx;

static void softmax_ref(const double *s, int mats, int t, double scale,
                        double *p) {
  for (int r = 0; r < mats * t; r++) {
    int i = r % t;
    const double *sr = s + (size_t)r * t;
    double *pr = p + (size_t)r * t, mx = -INFINITY, sum = 0;
    for (int j = 0; j <= i; j++) mx = fmax(mx, scale * sr[j]);
    for (int j = 0; j <= i; j++) sum += exp(scale * sr[j] - mx);
    for (int j = 0; j < t; j++)
      pr[j] = j <= i ? exp(scale * sr[j] - mx) / sum : 0;
  }
}

static double sm_loss(void *p) {
  sm_ctx *c = p;
  size_t n = (size_t)c->mats * c->t * c->t;
  double *y = tl_malloc(n * sizeof *y);
  softmax_ref(c->s, c->mats, c->t, c->scale, y);
  double l = dot(c->w, y, n);
  free(y);
  return l;
}

static void test_softmax(void) {
  enum { MATS = 6, T = 9, N = MATS * T * T };
  const float scale = 1.0f / sqrtf(6.0f);
  float *s = tl_rand(N, 4), *w = tl_rand(N, 1);
  /* One row offset by 3000: scale*3000 = 1225 overflows exp even in double
   * unless the row max is subtracted. */
  for (int j = 0; j < T; j++) s[(size_t)(T + 8) * T + j] += 3000.0f;
  sm_ctx c = {to_double(s, N), to_double(w, N), MATS, T, scale};
  double want[N];
  softmax_ref(c.s, MATS, T, scale, want);
  float *ds = devf(s, N), *dp = devf(NULL, N);
  RUN(k_softmax_causal_fwd(E, ds, dp, MATS, T, scale));
  float *p = hostf(dp, N);
  tl_compare_d("k_softmax_causal_fwd (6 x [9,9], one row offset by 3000)", p,
            want, N, 1e-6);
  int zeros = 1;
  for (int r = 0; r < MATS * T; r++)
    for (int j = r % T + 1; j < T; j++) zeros &= p[(size_t)r * T + j] == 0.0f;
  check(zeros, "k_softmax_causal_fwd: P[i,j] = 0 exactly for j > i");
  RUN(k_softmax_causal_fwd(E, ds, ds, MATS, T, scale));   /* in place */
  float *p2 = hostf(ds, N);
  same_bits("k_softmax_causal_fwd in place (S == P)", p2, p, N);

  /* Backward: shift the huge row back down so the FD step is meaningful. */
  for (int j = 0; j < T; j++) {
    s[(size_t)(T + 8) * T + j] -= 3000.0f;
    c.s[(size_t)(T + 8) * T + j] = s[(size_t)(T + 8) * T + j];
  }
  eng_upload(E, ds, s, N * sizeof(float));
  RUN(k_softmax_causal_fwd(E, ds, dp, MATS, T, scale));
  double fd[N];
  tl_fd_grad(sm_loss, &c, c.s, N, fd_h, fd);
  float *dw = devf(w, N), *dS = devf(NULL, N);
  RUN(k_softmax_causal_bwd(E, dp, dw, dS, MATS, T, scale));
  float *g = hostf(dS, N);
  tl_compare_d("k_softmax_causal_bwd vs finite differences", g, fd, N, 1e-4);
  RUN(k_softmax_causal_bwd(E, dp, dw, dw, MATS, T, scale));  /* dS == dP */
  float *g2 = hostf(dw, N);
  same_bits("k_softmax_causal_bwd in place (dS == dP)", g2, g, N);
  eng_free(E, ds); eng_free(E, dp); eng_free(E, dw); eng_free(E, dS);
  free(s); free(w); free(p); free(p2); free(g); free(g2); free(c.s); free(c.w);
}

/* ======================================================================= */
/* SwiGLU                                                                   */
/* ======================================================================= */

typedef struct sw_ctx {
  double *a, *b, *w;
  size_t n;
} sw_ctx;

static double silu(double z) { return z / (1 + exp(-z)); }

static double sw_loss(void *p) {
  sw_ctx *c = p;
  double l = 0;
  for (size_t i = 0; i < c->n; i++) l += c->w[i] * silu(c->a[i]) * c->b[i];
  return l;
}

static void test_swiglu(void) {
  enum { N = 7 * 13 };
  float *a = tl_rand(N, 4), *b = tl_rand(N, 1), *w = tl_rand(N, 1);
  a[0] = 30.0f; a[1] = -30.0f; a[2] = -90.0f;   /* saturated sigmoids */
  sw_ctx c = {to_double(a, N), to_double(b, N), to_double(w, N), N};
  double want[N];
  for (int i = 0; i < N; i++) want[i] = silu(c.a[i]) * c.b[i];
  float *da = devf(a, N), *db = devf(b, N), *dh = devf(NULL, N);
  RUN(k_swiglu_fwd(E, da, db, dh, N));
  float *h = hostf(dh, N);
  tl_compare_d("k_swiglu_fwd (n=91, |a| up to 90)", h, want, N, 1e-6);
  double fa[N], fb[N];
  tl_fd_grad(sw_loss, &c, c.a, N, fd_h, fa);
  tl_fd_grad(sw_loss, &c, c.b, N, fd_h, fb);
  float *dw = devf(w, N), *ga_d = devf(NULL, N), *gb_d = devf(NULL, N);
  RUN(k_swiglu_bwd(E, dw, da, db, ga_d, gb_d, N));
  float *ga = hostf(ga_d, N), *gb = hostf(gb_d, N);
  tl_compare_d("k_swiglu_bwd da vs finite differences", ga, fa, N, 1e-4);
  tl_compare_d("k_swiglu_bwd db vs finite differences", gb, fb, N, 1e-4);
  /* The fused path's form, h recomputed by the same pass, and that pass in
   * place as backward_fused.c calls it (da over a, db over b, h over dh):
   * the same bits as k_swiglu_bwd and k_swiglu_fwd. */
  float *xa = devf(a, N), *xb = devf(b, N), *xg = devf(w, N);
  RUN(k_swiglu_bwd_ex(E, xg, xa, xb, xa, xb, xg, DT_F32, N));
  float *ia = hostf(xa, N), *ib = hostf(xb, N), *ih = hostf(xg, N);
  check(memcmp(ia, ga, sizeof ga[0] * N) == 0 &&
            memcmp(ib, gb, sizeof gb[0] * N) == 0 &&
            memcmp(ih, h, sizeof h[0] * N) == 0,
        "k_swiglu_bwd_ex in place (da = a, db = b, h = dh) gives "
        "k_swiglu_bwd's da, db and k_swiglu_fwd's h bit for bit");
  expect_fail("k_swiglu_bwd_ex with da over b",
              k_swiglu_bwd_ex(E, xg, xa, xb, xb, ga_d, NULL, DT_F32, N),
              "da may alias a only");
  expect_fail("k_swiglu_bwd_ex with h over a",
              k_swiglu_bwd_ex(E, xg, xa, xb, ga_d, gb_d, xa, DT_F32, N),
              "h may alias dh only");
  eng_free(E, xa); eng_free(E, xb); eng_free(E, xg);
  free(ia); free(ib); free(ih);
  eng_free(E, da); eng_free(E, db); eng_free(E, dh); eng_free(E, dw);
  eng_free(E, ga_d); eng_free(E, gb_d);
  free(a); free(b); free(w); free(h); free(ga); free(gb);
  free(c.a); free(c.b); free(c.w);
}

/* ======================================================================= */
/* cross-entropy                                                            */
/* ======================================================================= */

typedef struct ce_ctx {
  double *x;
  const int32_t *t;
  int n, v;
} ce_ctx;

static void ce_ref(const double *x, const int32_t *t, int n, int v,
                   double *loss, double *lse) {
  for (int i = 0; i < n; i++) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < v; j++) mx = fmax(mx, x[i * v + j]);
    for (int j = 0; j < v; j++) s += exp(x[i * v + j] - mx);
    lse[i] = mx + log(s);
    loss[i] = lse[i] - x[i * v + t[i]];
  }
}

static double ce_mean_loss(void *p) {
  ce_ctx *c = p;
  double loss[64], lse[64], s = 0;
  ce_ref(c->x, c->t, c->n, c->v, loss, lse);
  for (int i = 0; i < c->n; i++) s += loss[i];
  return s / c->n;
}

static void test_cross_entropy(void) {
  enum { N = 7, V = 37 };
  int32_t t[N] = {3, 36, 0, 3, 17, 20, 9};
  float *x = tl_rand(N * V, 3);
  /* One row offset by 1000: exp overflows even in double unless the row
   * max is subtracted. */
  for (int j = 0; j < V; j++) x[2 * V + j] += 1000.0f;
  ce_ctx c = {to_double(x, N * V), t, N, V};
  double want_loss[N], want_lse[N];
  ce_ref(c.x, t, N, V, want_loss, want_lse);
  float *dx = devf(x, N * V), *dl = devf(NULL, N), *dlse = devf(NULL, N);
  int32_t *dt = dev(t, sizeof t);
  RUN(k_cross_entropy_fwd(E, dx, dt, dl, dlse, N, V));
  float *loss = hostf(dl, N), *lse = hostf(dlse, N);
  tl_compare_d("k_cross_entropy_fwd losses (n=7, V=37, one row offset by 1000)",
            loss, want_loss, N, 1e-6);
  tl_compare_d("k_cross_entropy_fwd lse", lse, want_lse, N, 1e-6);

  /* Backward on ordinary logits (lse is saved in fp32, whose ulp at 1000
   * would dominate the comparison). */
  for (int j = 0; j < V; j++) {
    x[2 * V + j] -= 1000.0f;
    c.x[2 * V + j] = x[2 * V + j];
  }
  eng_upload(E, dx, x, N * V * sizeof(float));
  RUN(k_cross_entropy_fwd(E, dx, dt, dl, dlse, N, V));
  double fd[N * V];
  tl_fd_grad(ce_mean_loss, &c, c.x, N * V, fd_h, fd);
  float *dg = devf(NULL, N * V);
  RUN(k_cross_entropy_bwd(E, dx, dt, dlse, dg, N, V, 1.0f / N));
  float *g = hostf(dg, N * V);
  tl_compare_d("k_cross_entropy_bwd (scale 1/n) vs finite differences of the "
            "mean loss", g, fd, N * V, 1e-4);
  RUN(k_cross_entropy_bwd(E, dx, dt, dlse, dx, N, V, 1.0f / N)); /* in place */
  float *g2 = hostf(dx, N * V);
  same_bits("k_cross_entropy_bwd in place (dlogits == logits)", g2, g, N * V);

  t[4] = V;
  eng_upload(E, dt, t, sizeof t);
  expect_fail("k_cross_entropy_fwd with a target >= V",
              k_cross_entropy_fwd(E, dx, dt, dl, dlse, N, V),
              "target 37 at position 4 is outside [0, 37)");
  eng_free(E, dx); eng_free(E, dl); eng_free(E, dlse); eng_free(E, dt);
  eng_free(E, dg);
  free(x); free(loss); free(lse); free(g); free(g2); free(c.x);
}

/* ======================================================================= */
/* AdamW                                                                    */
/* ======================================================================= */

static void test_adamw(void) {
  enum { N = 5, STEPS = 3 };
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
  float p0[N], g[STEPS][N];
  for (int i = 0; i < N; i++) p0[i] = frand(1);
  for (int s = 0; s < STEPS; s++)
    for (int i = 0; i < N; i++) g[s][i] = frand(0.5f);
  float zero[N] = {0};
  float *dp = devf(p0, N), *dm = devf(zero, N), *dv = devf(zero, N);
  float *dg = devf(NULL, N);

  /* By hand, in double, following the course's algorithm. */
  double p[N], m[N] = {0}, v[N] = {0};
  for (int i = 0; i < N; i++) p[i] = p0[i];
  for (int s = 0; s < STEPS; s++) {
    long long t = s + 1;
    double bc = sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    for (int i = 0; i < N; i++) {
      p[i] -= (double)lr * wd * p[i];
      m[i] = b1 * m[i] + (1 - (double)b1) * g[s][i];
      v[i] = b2 * v[i] + (1 - (double)b2) * g[s][i] * g[s][i];
      p[i] -= lr * bc * m[i] / (sqrt(v[i]) + eps);
    }
    eng_upload(E, dg, g[s], sizeof g[s]);
    RUN(k_adamw(E, dp, dg, dm, dv, N, lr, b1, b2, eps, wd, t));
    if (s == 0) {
      /* Step 1 by inspection: m/sqrt(v) = sign(g) (1-b1)/sqrt(1-b2), which
       * the bias correction cancels: p1 = p0 (1 - lr wd) - lr sign(g). */
      float *p1 = hostf(dp, N);
      double want1[N];
      for (int i = 0; i < N; i++)
        want1[i] = p0[i] * (1 - (double)lr * wd) - lr * (g[0][i] > 0 ? 1 : -1);
      tl_compare_d("k_adamw step 1: p0 (1 - lr wd) - lr sign(g)", p1, want1, N,
                1e-5);
      free(p1);
    }
  }
  float *pf = hostf(dp, N), *mf = hostf(dm, N), *vf = hostf(dv, N);
  tl_compare_d("k_adamw after 3 steps: p (lr 1e-2, wd 0.1, bias correction)", pf,
            p, N, 1e-6);
  tl_compare_d("k_adamw after 3 steps: m", mf, m, N, 1e-6);
  tl_compare_d("k_adamw after 3 steps: v", vf, v, N, 1e-6);
  expect_fail("k_adamw with t = 0",
              k_adamw(E, dp, dg, dm, dv, N, lr, b1, b2, eps, wd, 0),
              "t=0 must be >= 1");

  /* k_adamw_mean of 3 arrays is k_adamw of their fp32 mean (sum in order,
   * times 1/3 in fp32), bit for bit: fresh p, m, v stepped both ways. */
  float ga[3][N], gm[N];
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < N; i++) ga[k][i] = frand(0.5f);
  for (int i = 0; i < N; i++)
    gm[i] = (ga[0][i] + ga[1][i] + ga[2][i]) * (1.0f / 3.0f);
  float *q1 = devf(p0, N), *m1 = devf(zero, N), *v1 = devf(zero, N);
  float *q2 = devf(p0, N), *m2 = devf(zero, N), *v2 = devf(zero, N);
  float *g0 = devf(ga[0], N), *g1 = devf(ga[1], N), *g2 = devf(ga[2], N);
  float *gmd = devf(gm, N);
  const float *gs[3] = {g0, g1, g2};
  for (long long t = 1; t <= 2; t++) {
    RUN(k_adamw_mean(E, q1, gs, 3, m1, v1, N, lr, b1, b2, eps, wd, t));
    RUN(k_adamw(E, q2, gmd, m2, v2, N, lr, b1, b2, eps, wd, t));
  }
  float *h1 = hostf(q1, N), *h2 = hostf(q2, N);
  check(memcmp(h1, h2, sizeof(float) * N) == 0,
        "k_adamw_mean of 3 arrays == k_adamw of their mean, bit for bit");
  float *hm = hostf(m1, N);
  double want_m[N];   /* step 2's m from the mean of the gradients */
  for (int i = 0; i < N; i++)
    want_m[i] = (b1 * (1 - (double)b1) + (1 - (double)b1)) * gm[i];
  tl_compare_d("k_adamw_mean: m after 2 steps on the same mean", hm, want_m, N,
            1e-6);
  expect_fail("k_adamw_mean of 0 arrays",
              k_adamw_mean(E, q1, gs, 0, m1, v1, N, lr, b1, b2, eps, wd, 1),
              "allowed: 1 to");
  expect_fail("k_adamw_mean of 9 arrays",
              k_adamw_mean(E, q1, gs, 9, m1, v1, N, lr, b1, b2, eps, wd, 1),
              "allowed: 1 to");
  free(h1); free(h2); free(hm);
  eng_free(E, q1); eng_free(E, m1); eng_free(E, v1);
  eng_free(E, q2); eng_free(E, m2); eng_free(E, v2);
  eng_free(E, g0); eng_free(E, g1); eng_free(E, g2); eng_free(E, gmd);
  eng_free(E, dp); eng_free(E, dm); eng_free(E, dv); eng_free(E, dg);
  free(pf); free(mf); free(vf);
}

/* ======================================================================= */
/* elementwise and casts                                                    */
/* ======================================================================= */

static void test_add_scale(void) {
  enum { N = 1001 };
  float *a = tl_rand(N, 1), *b = tl_rand(N, 1);
  float *da = devf(a, N), *db = devf(b, N), *dout = devf(NULL, N);
  RUN(k_add(E, da, db, dout, N));
  float *out = hostf(dout, N);
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= out[i] == a[i] + b[i];
  check(ok, "k_add: out = a + b exactly (n=1001)");
  RUN(k_add(E, da, db, da, N));                   /* out == a */
  float *o2 = hostf(da, N);
  same_bits("k_add in place (out == a)", o2, out, N);
  RUN(k_scale(E, db, -0.375f, N));
  float *sc = hostf(db, N);
  ok = 1;
  for (int i = 0; i < N; i++) ok &= sc[i] == b[i] * -0.375f;
  check(ok, "k_scale: x *= s exactly");
  eng_free(E, da); eng_free(E, db); eng_free(E, dout);
  free(a); free(b); free(out); free(o2); free(sc);
}

static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Casts of n values through the engine: src (st) -> dst (dt). */
static int cast_n(const void *src, dtype st, void *dst, dtype dt, size_t n) {
  void *ds = dev(src, n * dtype_size(st)), *dd = dev(NULL, n * dtype_size(dt));
  int rc = k_cast(E, ds, st, dd, dt, n);
  if (rc == 0 && (eng_sync(E) < 0 ||
                  eng_download(E, dst, dd, n * dtype_size(dt)) < 0))
    hard_fail("eng_download");
  eng_free(E, ds);
  eng_free(E, dd);
  return rc;
}

/* The nearest value with `bits` mantissa bits (and exponents >= emin), ties
 * to even, by double arithmetic: an independent reference for narrowing. */
static double round_ref(double x, int bits, int emin, double overflow) {
  if (fabs(x) >= overflow) return x > 0 ? INFINITY : -INFINITY;
  if (x == 0) return x;
  int ex;
  frexp(x, &ex);                    /* |x| in [2^(ex-1), 2^ex) */
  int e = ex - 1 < emin ? emin : ex - 1;
  double ulp = ldexp(1.0, e - bits);
  return nearbyint(x / ulp) * ulp;  /* default rounding: ties to even */
}

static void test_cast(void) {
  enum { ALL = 65536 };
  uint16_t *h = tl_malloc(ALL * sizeof *h), *h2 = tl_malloc(ALL * sizeof *h2);
  float *f = tl_malloc(ALL * sizeof *f);
  for (int i = 0; i < ALL; i++) h[i] = (uint16_t)i;

  /* Every bf16 and every f16 survives a trip through f32; NaN stays NaN. */
  for (int k = 0; k < 2; k++) {
    dtype t = k ? DT_F16 : DT_BF16;
    if (cast_n(h, t, f, DT_F32, ALL) < 0 || cast_n(f, DT_F32, h2, t, ALL) < 0) {
      check(0, "k_cast %s <-> f32: %s", dtype_name(t), err_msg());
      continue;
    }
    int bad = 0, nan_bad = 0;
    for (int i = 0; i < ALL; i++) {
      int is_nan = k ? ((i & 0x7c00) == 0x7c00 && (i & 0x3ff))
                     : ((i & 0x7f80) == 0x7f80 && (i & 0x7f));
      if (is_nan) nan_bad += !isnan(f[i]) || (h2[i] & 0x8000) != (i & 0x8000);
      else bad += h2[i] != i;
    }
    check(bad == 0 && nan_bad == 0,
          "k_cast: all 65536 %s values -> f32 -> %s are exact (%d differ; "
          "%d NaN lost or changed sign)", dtype_name(t), dtype_name(t), bad,
          nan_bad);
  }
  /* f16 -> f32 values against ldexp (subnormals, normals, Inf). */
  if (cast_n(h, DT_F16, f, DT_F32, ALL) == 0) {
    int bad = 0;
    for (int i = 0; i < ALL; i++) {
      int e = (i >> 10) & 31, mant = i & 0x3ff;
      double v = e == 0 ? ldexp(mant, -24)
                 : e == 31 ? (mant ? NAN : INFINITY)
                 : ldexp(1024 + mant, e - 25);
      if (i & 0x8000) v = -v;
      bad += e == 31 && mant ? !isnan(f[i]) : f[i] != v;
    }
    check(bad == 0, "k_cast f16 -> f32 equals the format's definition for "
          "all 65536 values (%d differ)", bad);
  }

  /* Narrowing of random floats over many binades vs round_ref. */
  enum { R = 20000 };
  float *x = tl_malloc(R * sizeof *x);
  uint16_t *q = tl_malloc(R * sizeof *q);
  float *back = tl_malloc(R * sizeof *back);
  for (int k = 0; k < 2; k++) {
    dtype t = k ? DT_F16 : DT_BF16;
    for (int i = 0; i < R; i++) {
      double mag = k ? ldexp(1 + urand(), (int)(urand() * 44) - 27)   /* 2^-27..2^17 */
                     : ldexp(1 + urand(), (int)(urand() * 200) - 100);
      /* Every 4th value an exact tie: the midpoint of two neighbours. */
      x[i] = (float)(next_u64() & 1 ? mag : -mag);
      if (i % 4 == 0) {
        int bits = k ? 10 : 7, ex;
        frexp(x[i], &ex);
        int e = k && ex - 1 < -14 ? -14 : ex - 1;
        double ulp = ldexp(1.0, e - bits);
        x[i] = (float)((floor(x[i] / ulp) + 0.5) * ulp);
      }
    }
    if (cast_n(x, DT_F32, q, t, R) < 0 || cast_n(q, t, back, DT_F32, R) < 0) {
      check(0, "k_cast f32 -> %s: %s", dtype_name(t), err_msg());
      continue;
    }
    int bad = 0, worst = -1;
    for (int i = 0; i < R; i++) {
      double want = k ? round_ref(x[i], 10, -14, 65520.0)
                      : round_ref(x[i], 7, -126, ldexp(2 - ldexp(1, -8), 127));
      if ((double)back[i] != want) { bad++; if (worst < 0) worst = i; }
    }
    check(bad == 0,
          "k_cast f32 -> %s rounds to nearest even over %d values (a quarter "
          "exact ties; %d differ%s)", dtype_name(t), R, bad,
          bad ? ", e.g. the first printed below" : "");
    if (bad)
      printf("  x = %.9g -> %.9g\n", x[worst], back[worst]);
  }

  /* Named cases: ties, overflow, Inf, NaN, signed zero, subnormals. */
  struct { float x; dtype t; float want; const char *what; } cases[] = {
    {1.0f + 0x1p-8f, DT_BF16, 1.0f, "bf16 tie 1+2^-8 -> 1 (even)"},
    {1.0f + 0x3p-8f, DT_BF16, 1.0f + 0x1p-6f, "bf16 tie 1+3*2^-8 -> 1+2^-6 (even)"},
    {1.0f + 0x1p-8f + 0x1p-20f, DT_BF16, 1.0f + 0x1p-7f, "bf16 above the tie rounds up"},
    {-(1.0f + 0x1p-8f), DT_BF16, -1.0f, "bf16 tie -(1+2^-8) -> -1"},
    {3.4028235e38f, DT_BF16, INFINITY, "bf16 of FLT_MAX -> Inf"},
    {INFINITY, DT_BF16, INFINITY, "bf16 Inf stays Inf"},
    {-INFINITY, DT_BF16, -INFINITY, "bf16 -Inf stays -Inf"},
    {1.0f + 0x1p-11f, DT_F16, 1.0f, "f16 tie 1+2^-11 -> 1 (even)"},
    {1.0f + 0x3p-11f, DT_F16, 1.0f + 0x1p-9f, "f16 tie 1+3*2^-11 -> 1+2^-9 (even)"},
    {65504.0f, DT_F16, 65504.0f, "f16 max 65504 exact"},
    {65519.0f, DT_F16, 65504.0f, "f16 65519 -> 65504"},
    {65520.0f, DT_F16, INFINITY, "f16 65520 (tie) -> Inf"},
    {-1e6f, DT_F16, -INFINITY, "f16 -1e6 -> -Inf"},
    {0x1p-24f, DT_F16, 0x1p-24f, "f16 least subnormal 2^-24 exact"},
    {0x1p-25f, DT_F16, 0.0f, "f16 2^-25 (tie) -> 0 (even)"},
    {0x3p-25f, DT_F16, 0x1p-23f, "f16 3*2^-25 (tie) -> 2^-23 (even)"},
    {0x1.0001p-25f, DT_F16, 0x1p-24f, "f16 just above 2^-25 -> 2^-24"},
    {0x1.ff4p-15f, DT_F16, 0x1.ffp-15f, "f16 subnormal tie 1022.5 * 2^-24 -> 1022 * 2^-24 (even)"},
    {0x1.ffcp-15f, DT_F16, 0x1p-14f, "f16 subnormal tie 1023.5 * 2^-24 -> the least normal (even)"},
    {0x1.ffep-15f, DT_F16, 0x1p-14f, "f16 rounds up into the least normal"},
    {1e-30f, DT_F16, 0.0f, "f16 1e-30 -> 0"},
  };
  int nc = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < nc; i++) {
    uint16_t r;
    float got;
    if (cast_n(&cases[i].x, DT_F32, &r, cases[i].t, 1) < 0 ||
        cast_n(&r, cases[i].t, &got, DT_F32, 1) < 0) {
      check(0, "k_cast %s: %s", cases[i].what, err_msg());
      continue;
    }
    check(u_of(got) == u_of(cases[i].want), "k_cast %s (got %.9g)",
          cases[i].what, got);
  }
  /* Signs of zero and NaN survive. */
  float specials[3] = {-0.0f, NAN, -NAN};
  for (int k = 0; k < 2; k++) {
    dtype t = k ? DT_F16 : DT_BF16;
    uint16_t r[3];
    float got[3];
    if (cast_n(specials, DT_F32, r, t, 3) < 0 || cast_n(r, t, got, DT_F32, 3) < 0) {
      check(0, "k_cast specials: %s", err_msg());
      continue;
    }
    check(u_of(got[0]) == 0x80000000u && isnan(got[1]) && !signbit(got[1]) &&
          isnan(got[2]) && signbit(got[2]),
          "k_cast f32 -> %s -> f32 keeps -0 and the sign of NaN",
          dtype_name(t));
  }
  /* bf16 -> f16 and back for values both represent; f32 -> f32 copies. */
  float src[4] = {1.5f, -0.09375f, 1024.0f, 0x1p-14f}, got[4];
  uint16_t b16[4], f16v[4];
  if (cast_n(src, DT_F32, b16, DT_BF16, 4) == 0 &&
      cast_n(b16, DT_BF16, f16v, DT_F16, 4) == 0 &&
      cast_n(f16v, DT_F16, got, DT_F32, 4) == 0)
    check(memcmp(got, src, sizeof src) == 0, "k_cast f32 -> bf16 -> f16 -> f32 "
          "keeps values both formats hold");
  else
    check(0, "k_cast bf16 -> f16: %s", err_msg());
  if (cast_n(src, DT_F32, got, DT_F32, 4) == 0)
    check(memcmp(got, src, sizeof src) == 0, "k_cast f32 -> f32 copies");
  free(h); free(h2); free(f); free(x); free(q); free(back);
}

/* ======================================================================= */
/* memory accounting                                                        */
/* ======================================================================= */

typedef struct tag_row { char name[32]; size_t in_use, peak; } tag_row;
typedef struct tag_list { tag_row rows[16]; int n; } tag_list;

static void collect_tag(const char *tag, size_t in_use, size_t peak, void *arg) {
  tag_list *l = arg;
  if (l->n < 16) {
    snprintf(l->rows[l->n].name, sizeof l->rows[0].name, "%s", tag);
    l->rows[l->n].in_use = in_use;
    l->rows[l->n].peak = peak;
    l->n++;
  }
}

static int tag_is(const engine *e, const char *name, size_t in_use, size_t peak) {
  size_t u, p;
  return eng_tag_bytes(e, name, &u, &p) == 0 && u == in_use && p == peak;
}

static void test_memory(void) {
  engine *e;
  if (engine_cpu_create(&e, 1) < 0) hard_fail("engine_cpu_create");
  check(strcmp(engine_name(e), "cpu") == 0, "engine_name is \"cpu\"");
  void *a, *b, *c, *d, *z;
  if (eng_alloc(e, 1000, "params", &a) < 0 || eng_alloc(e, 3000, "grads", &b) < 0 ||
      eng_alloc(e, 500, "params", &c) < 0)
    hard_fail("eng_alloc");
  check(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 64 == 0,
        "eng_alloc returns 64-byte aligned memory");
  check(eng_bytes_in_use(e) == 4500 && eng_peak_bytes(e) == 4500,
        "after 1000 params + 3000 grads + 500 params: in use %zu, peak %zu "
        "(want 4500, 4500)", eng_bytes_in_use(e), eng_peak_bytes(e));
  eng_free(e, b);
  if (eng_alloc(e, 200, "act.attn_scores", &d) < 0) hard_fail("eng_alloc");
  check(eng_bytes_in_use(e) == 1700 && eng_peak_bytes(e) == 4500,
        "after freeing grads and 200 act: in use %zu, peak %zu (want 1700, "
        "4500)", eng_bytes_in_use(e), eng_peak_bytes(e));
  check(tag_is(e, "params", 1500, 1500) && tag_is(e, "grads", 0, 3000) &&
        tag_is(e, "act.attn_scores", 200, 200),
        "per tag: params 1500/1500, grads 0/3000, act.attn_scores 200/200 "
        "(in use / peak)");
  eng_free(e, a);
  check(tag_is(e, "params", 500, 1500), "freeing one params block: params "
        "500 in use, peak still 1500");
  eng_reset_peak(e);
  check(eng_peak_bytes(e) == 700 && tag_is(e, "grads", 0, 0) &&
        tag_is(e, "params", 500, 500),
        "eng_reset_peak: peak = in use (700), per tag too");
  tag_list l = {.n = 0};
  eng_tags(e, collect_tag, &l);
  check(l.n == 3 && strcmp(l.rows[0].name, "params") == 0 &&
        strcmp(l.rows[1].name, "grads") == 0 &&
        strcmp(l.rows[2].name, "act.attn_scores") == 0,
        "eng_tags lists each tag once, in order of first use (%d tags)", l.n);
  if (eng_alloc(e, 0, "empty", &z) < 0) hard_fail("eng_alloc 0");
  check(z != NULL && eng_bytes_in_use(e) == 700, "a 0-byte allocation is a "
        "real pointer and counts 0 bytes");
  eng_free(e, z);
  eng_free(e, NULL);
  size_t total = 1;
  int mrc = eng_mem_total(e, &total);
  check(mrc == 0 && total == 0,
        "eng_mem_total: the CPU engine has no device memory of its own (0, "
        "got %zu)", total);

  /* Running out of memory is ERR_OOM, says how much and for what, and
   * leaves the accounting as it was. */
  void *huge = (void *)1;
  int rc = eng_alloc(e, (size_t)1 << 62, "act.huge", &huge);
  check(rc == ERR_OOM && huge == NULL &&
        strstr(err_msg(), "4611686018427387904 bytes") &&
        strstr(err_msg(), "act.huge") && eng_bytes_in_use(e) == 700,
        "eng_alloc of 2^62 bytes: ERR_OOM naming bytes and tag (%s)",
        err_msg());
  err_clear();
  rc = eng_alloc(e, SIZE_MAX, "act.huge", &huge);
  check(rc == ERR_OOM, "eng_alloc of SIZE_MAX bytes: ERR_OOM (no overflow "
        "when rounding up)");
  err_clear();

  /* memset0, upload/download round trip. */
  float hv[5] = {1, 2, 3, 4, 5}, back[5];
  eng_upload(e, c, hv, sizeof hv);
  eng_download(e, back, c, sizeof back);
  int same = memcmp(back, hv, sizeof hv) == 0;
  eng_memset0(e, c, sizeof hv);
  eng_download(e, back, c, sizeof back);
  check(same && back[0] == 0 && back[4] == 0, "eng_upload / eng_download "
        "round trip, eng_memset0 zeroes");
  /* eng_copy: engine memory to engine memory; overlapping buffers refused */
  float cv[5] = {-2.5f, 7, 0.125f, 3e-7f, -1e9f};
  eng_upload(e, c, cv, sizeof cv);
  eng_memset0(e, d, sizeof cv);
  int crc = eng_copy(e, d, c, sizeof cv);
  eng_download(e, back, d, sizeof back);
  check(crc == 0 && memcmp(back, cv, sizeof cv) == 0,
        "eng_copy copies every byte");
  crc = eng_copy(e, (char *)c + 4, c, sizeof cv - 4);
  check(crc == ERR_FAIL && strstr(err_msg(), "overlap"),
        "eng_copy of overlapping buffers: refused (%s)", err_msg());
  err_clear();
  eng_free(e, c);
  eng_free(e, d);
  check(eng_bytes_in_use(e) == 0 && tag_is(e, "params", 0, 500),
        "everything freed: 0 bytes in use");
  /* engine_destroy frees what is left. */
  if (eng_alloc(e, 100, "left", &a) < 0) hard_fail("eng_alloc");
  engine_destroy(e);
  check(1, "engine_destroy with a live allocation");
}

/* ======================================================================= */
/* threads                                                                  */
/* ======================================================================= */

/* The same calls on a 1-thread and on the 3-thread engine give the same
 * bits: every parallel loop owns what it writes and sums in a fixed order. */
static void test_threads(void) {
  engine *one;
  if (engine_cpu_create(&one, 1) < 0) hard_fail("engine_cpu_create");
  enum { M = 67, K = 300, NN = 150, V = 37 };
  float *A = tl_rand(M * K, 1), *B = tl_rand(NN * K, 1);
  float *dy = tl_rand(M * NN, 1), *g = tl_rand(NN, 1);
  int32_t ids[M];
  for (int i = 0; i < M; i++) ids[i] = (int32_t)(next_u64() % 5);  /* many repeats */
  float *out[2][3];
  for (int w = 0; w < 2; w++) {
    engine *e = w ? E : one;
    float *C = tl_malloc(M * NN * sizeof *C), *T = tl_malloc(V * NN * sizeof *T);
    float *dx = tl_malloc(M * NN * sizeof *dx);
    float *dg = tl_malloc(NN * sizeof *dg), r[M];
    memset(T, 0, V * NN * sizeof *T);
    memset(dg, 0, NN * sizeof *dg);
    /* The CPU engine's memory is host memory: plain buffers will do. */
    if (k_matmul(e, 0, 1, M, NN, K, 1, A, K, B, K, 0, C, NN, DT_F32) < 0 ||
        k_embedding_bwd(e, ids, dy, T, M, NN, V) < 0 ||
        k_rmsnorm_fwd(e, dy, g, dx, r, M, NN, 1e-5f) < 0 ||
        k_rmsnorm_bwd(e, dy, C, g, r, dx, dg, M, NN) < 0)
      hard_fail("threads");
    out[w][0] = C; out[w][1] = T; out[w][2] = dx;
    free(dg);
  }
  same_bits("k_matmul with 1 and 3 threads", out[0][0], out[1][0], M * NN);
  same_bits("k_embedding_bwd (repeated ids) with 1 and 3 threads", out[0][1],
            out[1][1], V * NN);
  same_bits("k_rmsnorm_bwd with 1 and 3 threads", out[0][2], out[1][2], M * NN);
  for (int w = 0; w < 2; w++)
    for (int k = 0; k < 3; k++) free(out[w][k]);
  free(A); free(B); free(dy); free(g);
  engine_destroy(one);
}

/* eng_memlog: every allocation and free after it starts, in order, with
 * tag, signed size and bytes in use; stopping keeps them, restarting
 * clears them. */
static void test_memlog(void) {
  engine *e;
  if (engine_cpu_create(&e, 1) < 0) hard_fail("engine_cpu_create");
  void *a, *b, *c;
  if (eng_alloc(e, 100, "before", &a) < 0) hard_fail("eng_alloc");
  eng_memlog(e, 1);
  if (eng_alloc(e, 1000, "params", &b) < 0 ||
      eng_alloc(e, 300, "act", &c) < 0)
    hard_fail("eng_alloc");
  eng_free(e, b);
  eng_memlog(e, 0);
  eng_free(e, a);   /* not recorded */
  int lost = -1, n = eng_memlog_events(e, &lost);
  const struct { const char *tag; long long delta; size_t in_use; } want[] = {
      {"params", 1000, 1100}, {"act", 300, 1400}, {"params", -1000, 400}};
  int ok = n == 3 && lost == 0;
  double last = -1;
  for (int i = 0; ok && i < 3; i++) {
    double t;
    const char *tag;
    long long d;
    size_t u;
    eng_memlog_event(e, i, &t, &tag, &d, &u);
    ok = strcmp(tag, want[i].tag) == 0 && d == want[i].delta &&
         u == want[i].in_use && t >= last && t >= 0 && t < 60;
    last = t;
  }
  check(ok, "eng_memlog records +1000 params, +300 act, -1000 params with "
        "bytes in use 1100, 1400, 400 in time order (%d events, %d lost)",
        n, lost);
  eng_memlog(e, 1);
  check(eng_memlog_events(e, NULL) == 0, "eng_memlog(e, 1) starts a new log");
  eng_memlog(e, 0);
  eng_free(e, c);
  engine_destroy(e);
}

static void test_dtypes(void) {
  check(strcmp(dtype_name(DT_F32), "f32") == 0 &&
        strcmp(dtype_name(DT_BF16), "bf16") == 0 &&
        strcmp(dtype_name(DT_F16), "f16") == 0 && dtype_size(DT_F32) == 4 &&
        dtype_size(DT_BF16) == 2 && dtype_size(DT_F16) == 2,
        "dtype names f32/bf16/f16, sizes 4/2/2");
}

/* ======================================================================= */
/* views (eng_view): one engine, calls with their own context               */
/* ======================================================================= */

/* 16-bit storage of the fused ops (kernels/cpu/cpu.h, cpu_stage): from
 * bf16 operands each gives its fp32 form's results on the widened values,
 * rounded once, bit for bit. k_matmul_ex into columns of a wider bf16 C
 * (ldc > n) adds into them with beta = 1 and leaves the columns between
 * as they were; k_swiglu_fwd_ex, k_split_heads_ex and k_add_rmsnorm_fwd's
 * y are the fp32 results rounded. */
static void test_16bit_storage(void) {
  enum { M = 5, N = 6, K = 7, LDC = 9, B = 2, T = 3, H = 2, DH = 4,
         D = H * DH, NE = B * T * D };
  float *a = tl_rand(M * K, 1.0f), *b = tl_rand(K * N, 1.0f),
        *c = tl_rand(M * LDC, 1.0f);
  uint16_t ab[M * K], bb[K * N], cb[M * LDC], cb0[M * LDC], r[M * LDC];
  if (cast_n(a, DT_F32, ab, DT_BF16, M * K) < 0 ||
      cast_n(ab, DT_BF16, a, DT_F32, M * K) < 0 ||
      cast_n(b, DT_F32, bb, DT_BF16, K * N) < 0 ||
      cast_n(bb, DT_BF16, b, DT_F32, K * N) < 0 ||
      cast_n(c, DT_F32, cb, DT_BF16, M * LDC) < 0 ||
      cast_n(cb, DT_BF16, c, DT_F32, M * LDC) < 0)
    hard_fail("k_cast");
  memcpy(cb0, cb, sizeof cb);
  if (k_matmul_ex(E, 0, 0, M, N, K, 0.5f, a, K, b, N, DT_F32, 1.0f, c, LDC,
                  DT_F32, F32_EXACT) < 0 ||
      k_matmul_ex(E, 0, 0, M, N, K, 0.5f, ab, K, bb, N, DT_BF16, 1.0f, cb, LDC,
                  DT_BF16, F32_EXACT) < 0 ||
      cast_n(c, DT_F32, r, DT_BF16, M * LDC) < 0)
    hard_fail("k_matmul_ex");
  int same = 1, gaps = 1;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < LDC; j++) {
      size_t x = (size_t)i * LDC + j;
      if (j < N) same &= cb[x] == r[x];
      else gaps &= cb[x] == cb0[x];
    }
  check(same && gaps, "k_matmul_ex bf16 into a wider C (beta 1): the fp32 "
        "product rounded (%s), the columns between untouched (%s)",
        same ? "yes" : "no", gaps ? "yes" : "no");

  float *x = tl_rand(NE, 2.0f), *y = tl_rand(NE, 2.0f), h[NE], s[NE];
  uint16_t xb[NE], yb[NE], hb[NE], rb[NE];
  if (cast_n(x, DT_F32, xb, DT_BF16, NE) < 0 || cast_n(xb, DT_BF16, x, DT_F32, NE) < 0 ||
      cast_n(y, DT_F32, yb, DT_BF16, NE) < 0 || cast_n(yb, DT_BF16, y, DT_F32, NE) < 0)
    hard_fail("k_cast");
  if (k_swiglu_fwd_ex(E, x, y, h, DT_F32, NE) < 0 ||
      k_swiglu_fwd_ex(E, xb, yb, hb, DT_BF16, NE) < 0 ||
      cast_n(h, DT_F32, rb, DT_BF16, NE) < 0)
    hard_fail("k_swiglu_fwd_ex");
  check(memcmp(hb, rb, sizeof hb) == 0, "k_swiglu_fwd_ex bf16: the fp32 "
        "result rounded, bit for bit");
  if (k_split_heads_ex(E, x, DT_F32, h, DT_BF16, B, T, H, DH) < 0 ||
      k_split_heads_ex(E, xb, DT_BF16, hb, DT_BF16, B, T, H, DH) < 0)
    hard_fail("k_split_heads_ex");
  check(memcmp(hb, (uint16_t *)h, NE * sizeof(uint16_t)) == 0,
        "k_split_heads_ex bf16 -> bf16 moves the same bits as f32 -> bf16");
  float g[D], rstd[B * T], rstd16[B * T];
  for (int j = 0; j < D; j++) g[j] = 1.0f + 0.1f * (float)j;
  if (k_add_rmsnorm_fwd(E, x, y, s, g, h, DT_F32, rstd, B * T, D, 1e-5f) < 0 ||
      k_add_rmsnorm_fwd(E, x, y, s, g, hb, DT_BF16, rstd16, B * T, D, 1e-5f) < 0 ||
      cast_n(h, DT_F32, rb, DT_BF16, NE) < 0)
    hard_fail("k_add_rmsnorm_fwd");
  check(memcmp(hb, rb, sizeof hb) == 0 && memcmp(rstd, rstd16, sizeof rstd) == 0,
        "k_add_rmsnorm_fwd bf16 y: the fp32 y rounded, rstd the same");
  /* k_adamw_ex with a bf16 gradient (model_options.grad_lt): the update
   * of the fp32 gradient holding the same values, bit for bit, p's bf16
   * copy too */
  float p2[2][NE], m2[2][NE], v2[2][NE];
  uint16_t pl[2][NE];
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < NE; i++) {
      p2[k][i] = x[i];
      m2[k][i] = 0.1f * y[i];
      v2[k][i] = 0.01f * y[i] * y[i];
    }
  for (long long t = 1; t <= 2; t++) {
    /* the second with its step size from "engine memory" (step_dev) */
    float sd = k_adamw_step_size(1e-2f, 0.9f, 0.999f, t);
    if (k_adamw_ex(E, p2[0], pl[0], DT_BF16, x, DT_F32, m2[0], v2[0], NE,
                   1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, t, NULL) < 0 ||
        k_adamw_ex(E, p2[1], pl[1], DT_BF16, xb, DT_BF16, m2[1], v2[1], NE,
                   1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, t, &sd) < 0)
      hard_fail("k_adamw_ex");
  }
  check(memcmp(p2[0], p2[1], sizeof p2[0]) == 0 &&
            memcmp(m2[0], m2[1], sizeof m2[0]) == 0 &&
            memcmp(v2[0], v2[1], sizeof v2[0]) == 0 &&
            memcmp(pl[0], pl[1], sizeof pl[0]) == 0,
        "k_adamw_ex with a bf16 gradient: the fp32 gradient's update (the "
        "same values), bit for bit");
  float stale = k_adamw_step_size(1e-2f, 0.9f, 0.999f, 2);
  expect_fail("k_adamw_ex with step 3 and step 2's size in step_dev",
              k_adamw_ex(E, p2[1], pl[1], DT_BF16, xb, DT_BF16, m2[1], v2[1],
                         NE, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, &stale),
              "stale step size");
  free(a); free(b); free(c); free(x); free(y);
}

static void test_view(void) {
  engine *v = NULL, *vv = NULL;
  eng_ctx ctx = {NULL, 0, 4};   /* adamw_blocks: a GPU hint, ignored here */
  RUN(eng_view(E, &ctx, &v));
  check(strcmp(engine_name(v), "cpu") == 0 && eng_stream(v) == NULL,
        "a view of the CPU engine is a cpu engine with no stream");

  /* Memory through a view is the base's: one accounting. */
  eng_reset_peak(E);
  size_t before = eng_bytes_in_use(E);
  void *p;
  RUN(eng_alloc(v, 4096, "test.view", &p));
  size_t u = 0, pk = 0;
  int known = eng_tag_bytes(E, "test.view", &u, &pk) == 0;
  check(eng_bytes_in_use(E) == before + 4096 &&
        eng_bytes_in_use(v) == eng_bytes_in_use(E) && known && u == 4096,
        "eng_alloc through a view counts in the base (in use %zu, was %zu; "
        "tag test.view %zu)", eng_bytes_in_use(E), before, u);
  RUN(eng_view(v, &ctx, &vv));   /* a view of a view: of the base */
  eng_free(vv, p);
  check(eng_bytes_in_use(E) == before &&
        eng_peak_bytes(E) == before + 4096,
        "eng_free through a view of the view gives it back in the base "
        "(in use %zu, want %zu; peak %zu, want %zu)", eng_bytes_in_use(E),
        before, eng_peak_bytes(E), before + 4096);
  engine_destroy(vv);

  /* The same numbers through the view as through the base. */
  enum { M = 7, K = 5, N = 9, NA = 37 };
  float *ha = tl_rand(M * K, 1), *hb = tl_rand(K * N, 1);
  float *a = devf(ha, M * K), *b = devf(hb, K * N);
  float *c0 = devf(NULL, M * N), *c1 = devf(NULL, M * N);
  RUN(k_matmul(E, 0, 0, M, N, K, 1, a, K, b, N, 0, c0, N, DT_F32));
  RUN(k_matmul(v, 0, 0, M, N, K, 1, a, K, b, N, 0, c1, N, DT_F32));
  float *h0 = hostf(c0, M * N), *h1 = hostf(c1, M * N);
  same_bits("k_matmul through a view == through the base", h0, h1, M * N);
  free(h0); free(h1);
  float *hp = tl_rand(NA, 1), *hg = tl_rand(NA, 0.1f);
  float zero[NA] = {0};
  float *p0 = devf(hp, NA), *m0 = devf(zero, NA), *v0 = devf(zero, NA);
  float *p1 = devf(hp, NA), *m1 = devf(zero, NA), *v1 = devf(zero, NA);
  float *g = devf(hg, NA);
  RUN(k_adamw(E, p0, g, m0, v0, NA, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1));
  RUN(k_adamw(v, p1, g, m1, v1, NA, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1));
  h0 = hostf(p0, NA);
  h1 = hostf(p1, NA);
  same_bits("k_adamw through a view with adamw_blocks 4 == through the base",
            h0, h1, NA);
  free(h0); free(h1);

  /* Profiling is the base's: a view's call is reported by the base. */
  char rep[256];
  RUN(eng_profile(E, 1));
  RUN(k_matmul(v, 0, 0, M, N, K, 1, a, K, b, N, 0, c1, N, DT_F32));
  RUN(eng_profile_report(E, rep, sizeof rep));
  check(strncmp(rep, "matmul ", 7) == 0,
        "a product through a view is profiled by the base (\"%s\")", rep);

  /* Invalid contexts and what a view may not change. */
  engine *out = v;   /* a refused view sets it to NULL */
  eng_ctx s = {(void *)&rep, 0, 0}, r = {NULL, 1, 0};
  eng_ctx nr = {NULL, -1, 0}, nb = {NULL, 0, -2};
  expect_fail("a view of the CPU engine with a stream",
              eng_view(E, &s, &out), "eng_view: the cpu engine runs on no "
              "stream (allowed: NULL");
  check(out == NULL, "a refused view leaves *out NULL");
  expect_fail("a view of the CPU engine reserving SMs",
              eng_view(E, &r, &out), "has no SMs to reserve (allowed: 0");
  expect_fail("a view reserving -1 SMs", eng_view(E, &nr, &out),
              "sm_reserve = -1 (allowed: >= 0)");
  expect_fail("a view capping AdamW at -2 blocks", eng_view(E, &nb, &out),
              "adamw_blocks = -2 (allowed: >= 0)");
  expect_fail("a view with no context", eng_view(E, NULL, &out),
              "NULL context");
  expect_fail("eng_f32_products on a view",
              eng_f32_products(v, F32_EXACT), "on a view");

  /* A backend without an op (a NULL entry) fails naming it. */
  engine_ops lacking = *v->ops;
  lacking.scale = NULL;
  lacking.fused = NULL;
  v->ops = &lacking;
  expect_fail("k_scale on an engine lacking it", k_scale(v, c1, 2, 3),
              "k_scale: the cpu engine has no scale");
  expect_fail("k_swiglu_fwd_ex on an engine with no fused path",
              k_swiglu_fwd_ex(v, a, b, c1, DT_F32, 3),
              "k_swiglu_fwd_ex: the cpu engine has no fused path");
  engine_destroy(v);
  check(eng_bytes_in_use(E) > 0 && k_scale(E, c1, 2, 3) == 0,
        "the base works on after its view is destroyed");
  eng_free(E, a); eng_free(E, b); eng_free(E, c0); eng_free(E, c1);
  eng_free(E, p0); eng_free(E, m0); eng_free(E, v0);
  eng_free(E, p1); eng_free(E, m1); eng_free(E, v1); eng_free(E, g);
  free(ha); free(hb); free(hp); free(hg);
}

/* ---- initial weights --------------------------------------------------------- */

/* The truncated normal's CDF on [-3, 3]. */
static double trunc_cdf(double x) {
  double lo = 0.5 * erfc(3.0 / sqrt(2.0));
  return (0.5 * erfc(-x / sqrt(2.0)) - lo) / (1.0 - 2.0 * lo);
}

/* k_init_normal: the table against the exact quantiles; the values'
 * moments, bounds and tail mass against the truncated normal's (fresh
 * keys, 2^20 values: each bound 5 sigma of the sampling spread or more);
 * a function of key and j alone (another n, one thread: the same bits;
 * another key: others); std scales exactly; std 0 fills. */
static void test_init_normal(void) {
  enum { K = 65536 };
  const double one = (double)(1u << 29);
  const int32_t *t = k_init_normal_table();
  int rising = 1;
  double worst = 0;
  for (int k = 0; k < K; k++) rising &= t[k + 1] >= t[k];
  for (int k = 1; k < K; k += 97) {
    double x = t[k] / one, dens = exp(-0.5 * x * x) / sqrt(2 * M_PI) /
                                  (1.0 - erfc(3.0 / sqrt(2.0)));
    double err = fabs(trunc_cdf(x) - (double)k / K) / dens;   /* in x */
    if (err > worst) worst = err;
  }
  check(t[0] == -3 * (1 << 29) && t[K] == 3 * (1 << 29) && rising &&
            worst < 3e-9,
        "k_init_normal_table: -3 .. 3, rising, each quantile within %.1e "
        "of the exact (< 3e-9)", worst);
  int32_t *dt = NULL;
  RUN(eng_alloc(E, (K + 1) * sizeof *t, "test", (void **)&dt));
  RUN(eng_upload(E, dt, t, (K + 1) * sizeof *t));
  const size_t n = (size_t)1 << 20;
  uint64_t key = next_u64();
  float *d = devf(NULL, n), *d2 = devf(NULL, n), *d3 = devf(NULL, n);
  RUN(k_init_normal(E, d, n, key, 0.0f, 1.0f, dt));
  float *x = hostf(d, n);
  double s = 0, s2 = 0, most = 0, beyond2 = 0;
  for (size_t j = 0; j < n; j++) {
    s += x[j];
    s2 += (double)x[j] * x[j];
    if (fabs(x[j]) > most) most = fabs(x[j]);
    beyond2 += fabs(x[j]) > 2.0;
  }
  double mean = s / n, sd = sqrt(s2 / n - mean * mean), tail = beyond2 / n;
  double want_tail = 1.0 - (trunc_cdf(2.0) - trunc_cdf(-2.0));
  check(fabs(mean) < 0.005 && fabs(sd - 0.98658) < 0.004 && most <= 3.0 &&
            fabs(tail - want_tail) < 0.001,
        "k_init_normal: mean %+.5f, std %.5f (want 0.98658), max |x| %.4f "
        "<= 3, beyond 2: %.5f (want %.5f)", mean, sd, most, tail, want_tail);
  engine *e1;
  if (engine_cpu_create(&e1, 1) < 0) hard_fail("engine_cpu_create");
  int32_t *dt1 = NULL;
  RUN(eng_alloc(e1, (K + 1) * sizeof *t, "test", (void **)&dt1));
  RUN(eng_upload(e1, dt1, t, (K + 1) * sizeof *t));
  float *e1x = NULL;
  RUN(eng_alloc(e1, 1000 * sizeof(float), "test", (void **)&e1x));
  RUN(k_init_normal(e1, e1x, 1000, key, 0.0f, 1.0f, dt1));
  float h1[1000];
  RUN(eng_download(e1, h1, e1x, sizeof h1));
  RUN(eng_sync(e1));
  check(memcmp(h1, x, sizeof h1) == 0,
        "k_init_normal: the first 1000 of 2^20 values again with n 1000 on "
        "one thread, bit for bit");
  eng_free(e1, e1x);
  eng_free(e1, dt1);
  engine_destroy(e1);
  RUN(k_init_normal(E, d2, n, key + 1, 0.0f, 1.0f, dt));
  RUN(k_init_normal(E, d3, n, key, 0.0f, 0.5f, dt));
  float *x2 = hostf(d2, n), *x3 = hostf(d3, n);
  size_t same2 = 0, scaled = 0;
  for (size_t j = 0; j < n; j++) {
    same2 += x2[j] == x[j];
    scaled += x3[j] == 0.5f * x[j];
  }
  check(same2 < 64 && scaled == n, "k_init_normal: another key gives other "
        "values (%zu of %zu equal), std 0.5 halves every value exactly "
        "(%zu)", same2, n, scaled);
  RUN(k_init_normal(E, d2, 1001, key, 1.0f, 0.0f, dt));
  free(x2);
  x2 = hostf(d2, 1001);
  int ones = 1;
  for (int j = 0; j < 1001; j++) ones &= x2[j] == 1.0f;
  check(ones, "k_init_normal with std 0 fills with `fill` (1)");
  expect_fail("k_init_normal with std -1", k_init_normal(E, d2, 4, key, 0.0f,
              -1.0f, dt), "std >= 0");
  eng_free(E, d); eng_free(E, d2); eng_free(E, d3); eng_free(E, dt);
  free(x); free(x2); free(x3);
}

/* intervals_covered (the kernel profile's busy time): hand-made cases,
 * then random sets against counting covered unit steps one by one. */
static void test_intervals(void) {
  static const struct {
    const char *what;
    uint64_t s[4], e[4];
    size_t n;
    uint64_t want;
  } cases[] = {
      {"none", {0}, {0}, 0, 0},
      {"one", {5}, {9}, 1, 4},
      {"two apart, out of order", {20, 5}, {30, 9}, 2, 14},
      {"one inside another", {0, 3}, {10, 4}, 2, 10},
      {"two overlapping", {0, 6}, {8, 12}, 2, 12},
      {"touching", {0, 8}, {8, 12}, 2, 12},
      {"equal, and empty ones", {2, 2, 7, 9}, {6, 6, 7, 9}, 4, 4},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    uint64_t s[4], e[4];
    memcpy(s, cases[c].s, sizeof s);
    memcpy(e, cases[c].e, sizeof e);
    uint64_t got = intervals_covered(s, e, cases[c].n);
    check(got == cases[c].want, "intervals_covered, %s: %llu (want %llu)",
          cases[c].what, (unsigned long long)got,
          (unsigned long long)cases[c].want);
  }
  enum { N = 40, T = 1000 };
  int bad = 0;
  for (int trial = 0; trial < 200; trial++) {
    uint64_t s[N], e[N];
    unsigned char on[T] = {0};
    size_t n = 1 + next_u64() % N;
    for (size_t i = 0; i < n; i++) {
      s[i] = next_u64() % T;
      e[i] = s[i] + next_u64() % (T - s[i] + 1) / (1 + next_u64() % 8);
      for (uint64_t t = s[i]; t < e[i]; t++) on[t] = 1;
    }
    uint64_t want = 0;
    for (int t = 0; t < T; t++) want += on[t];
    bad += intervals_covered(s, e, n) != want;
  }
  check(bad == 0, "intervals_covered of 200 random sets of up to %d "
        "intervals equals the covered steps counted one by one (%d differ)",
        (int)N, bad);
}

int main(void) {
  tl_seed(0x9e3779b97f4a7c15ull);
  if (engine_cpu_create(&E, 3) < 0) hard_fail("engine_cpu_create");
  test_dtypes();
  test_memory();
  test_memlog();
  test_matmul();
  test_matmul_batched();
  test_embedding();
  test_rmsnorm();
  test_rope();
  test_heads();
  test_softmax();
  test_swiglu();
  test_init_normal();
  test_cross_entropy();
  test_adamw();
  test_add_scale();
  test_cast();
  test_16bit_storage();
  test_threads();
  test_view();
  test_intervals();
  /* A side view of the CPU engine has no stream; ordering is a no-op. */
  {
    engine *side = NULL;
    if (eng_side_view(E, 0, &side) < 0) hard_fail("eng_side_view");
    check(eng_stream(side) == NULL && eng_wait_for(side, E) == 0 &&
              eng_wait_for(E, side) == 0,
          "a side view of the CPU engine: no stream, nothing to order");
    engine *other = NULL;
    if (engine_cpu_create(&other, 1) < 0) hard_fail("engine_cpu_create");
    expect_fail("eng_wait_for across two engines", eng_wait_for(side, other),
                "handles of two engines");
    eng_event *ev = NULL;
    if (eng_event_record(side, &ev) < 0) hard_fail("eng_event_record");
    check(ev != NULL, "an event recorded through a side view");
    expect_fail("waiting for another engine's event", eng_event_wait(other, ev),
                "an event of another engine");
    if (eng_event_record(E, &ev) < 0) hard_fail("eng_event_record");
    check(eng_event_wait(side, ev) == 0, "a view waits for its base's event");
    expect_fail("waiting for no event", eng_event_wait(E, NULL), "no event");
    engine_destroy(other);
    engine_destroy(side);
  }
  /* The kernel-level profile is the CUDA engine's; ranges cost nothing. */
  expect_fail("eng_kprof_begin on the CPU engine", eng_kprof_begin(E),
              "no kernel-level profile (allowed: the cuda engine)");
  check(eng_range_push(E, "r") == 0 && eng_range_pop(E) == 0,
        "ranges on the CPU engine are no-ops");
  /* so is the clock and power monitor, which the jobs do without */
  expect_fail("eng_monitor_begin on the CPU engine", eng_monitor_begin(E),
              "no clock and power monitor (allowed: the cuda engine)");
  eng_monitor mon;
  expect_fail("eng_monitor_end on the CPU engine", eng_monitor_end(E, &mon),
              "has no monitor");
  check(mon.samples == 0, "no readings from the CPU engine");
  size_t left = eng_bytes_in_use(E);
  check(left == 0, "the tests freed all engine memory (%zu bytes left)", left);
  engine_destroy(E);
  return tl_finish();
}
