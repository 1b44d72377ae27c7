/* kernels/: every operation of kernels.h on the CUDA engine, against the CPU
 * engine (the reference, itself checked against double-precision loops and
 * finite differences by test_kernels).
 *
 * Each check draws fresh seeded random inputs (never zeros: +-[0.1, 1)
 * times a scale), uploads the same bytes to both engines, fills every
 * output with NaN first (so an element the GPU never writes fails), runs
 * the operation on both and compares. Sizes: odd ones (a wrong index,
 * stride or vector tail shows) and the model's own (B*T = 512 or 2048 rows,
 * d_model 768, d_ff 3072, 12 heads of 64, vocab 10000).
 *
 * Tolerances, and why:
 * - fp32 operations: max |cuda - cpu| <= 1e-5 * max |cpu| over the tensor.
 *   Both compute in fp32 or better (the CPU engine mostly in double); a few
 *   fp32 roundings per element, or a sum of n terms in a tree, stay near
 *   1e-6 of the largest element. Bitwise where the operation is exact or
 *   sums in the CPU's order: copies (embedding forward, head layout),
 *   embedding backward, add, scale, casts.
 * - matrix products, per element, relative to its own magnitude
 *   |alpha| * |op(A)| |op(B)| + |beta * C| (so cancellation cannot hide an
 *   error): fp32 1e-5 (fp32 summation of k <= 3072 products lands near
 *   1e-7..1e-6; TF32 would land near 1e-3 and fail, so this also proves
 *   TF32 is off); bf16 1e-2 and f16 2e-3: rounding each input to 8 (bf16)
 *   or 11 (f16) significant bits perturbs every product by at most
 *   2u + u^2 of itself, u = 2^-8 (7.8e-3) or 2^-11 (9.8e-4), and the fp32
 *   accumulation adds little. The bf16 / f16 cases also check that the
 *   error is above 1e-5, so the low-precision path really ran.
 *
 * Also: the accumulate rule (dg, dtable pre-filled with random values),
 * the aliasing the CPU engine allows (S = P, dS = dP, dlogits = logits,
 * dx = dy in RMSNorm backward, out = a in add), misaligned pointers (the
 * scalar paths), bad ids and targets (reported at the next sync), an
 * allocation far larger than the GPU (ERR_OOM with a message, no crash),
 * and the tag accounting on the CUDA engine.
 *
 * One line per check, then "N passed, M failed". Exit 0 when every check
 * passes, 1 when one fails, 77 (skip) without a GPU or without a CUDA
 * build, 99 when the test itself cannot run.
 *
 * Options: --small runs only the odd sizes (for compute-sanitizer);
 * --no-kprof leaves out the kernel profile (under compute-sanitizer: CUPTI
 * takes one subscriber per process, and the sanitizer is one);
 * --bench also times the operations at the small model's sizes
 * (B=4, T=512) and prints a table. */
#include "config.h"
#include "tests/testlib.h"
#include "kernels/kernels.h"

#include "common/check.h"
#include "common/clock.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include "kernels/cuda/cuda_ops.h"
#endif

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static engine *CPU, *GPU;
static int small_only, no_kprof;

/* The current error's first line (the message without its trace), so a
 * check stays one line. */
static const char *err1(void) {
  static char buf[512];
  err_first_line(buf, sizeof buf);
  return buf;
}

/* ---- random inputs ------------------------------------------------------------ */

/* ---- one buffer on both engines ------------------------------------------------- */

typedef struct pair {
  void *c, *g;            /* CPU engine, CUDA engine */
  size_t bytes;
} pair;

/* Inside `for (int w = 0; w < 2; w++)`: this engine's copy. */
#define W(p) ((w) ? (p).g : (p).c)

/* The same bytes on both engines; host NULL: NaN (all bits set) poison. */
static pair pair_new(const void *host, size_t bytes) {
  pair p = {NULL, NULL, bytes};
  void *poison = NULL;
  if (!host) {
    poison = tl_malloc(bytes);
    memset(poison, 0xff, bytes);
    host = poison;
  }
  if (eng_alloc(CPU, bytes, "test", &p.c) < 0 ||
      eng_alloc(GPU, bytes, "test", &p.g) < 0)
    hard_fail("eng_alloc");
  if (eng_upload(CPU, p.c, host, bytes) < 0 ||
      eng_upload(GPU, p.g, host, bytes) < 0)
    hard_fail("eng_upload");
  free(poison);
  return p;
}

static pair pair_f(const float *host, size_t n) {
  return pair_new(host, n * sizeof(float));
}

/* Fresh random floats on both engines. */
static pair pair_rand(size_t n, float scale) {
  float *h = tl_rand(n, scale);
  pair p = pair_f(h, n);
  free(h);
  return p;
}

static void pair_set(pair p, const void *host) {
  if (eng_upload(CPU, p.c, host, p.bytes) < 0 ||
      eng_upload(GPU, p.g, host, p.bytes) < 0)
    hard_fail("eng_upload");
}

static void pair_free(pair p) {
  eng_free(CPU, p.c);
  eng_free(GPU, p.g);
}

static void *down(engine *e, const void *p, size_t bytes) {
  void *h = tl_malloc(bytes);
  if (eng_sync(e) < 0 || eng_download(e, h, p, bytes) < 0)
    hard_fail("eng_download");
  return h;
}

/* A call that must succeed on both engines; a failure is a failed check
 * and ends the test function. */
#define BOTH(call)                                                           \
  for (int w = 0; w < 2; w++) {                                              \
    engine *e = w ? GPU : CPU;                                               \
    if ((call) < 0) {                                                        \
      check(0, "%s on the %s engine: %s", #call, engine_name(e), err1()); \
      err_clear();                                                           \
      return;                                                                \
    }                                                                        \
  }

/* ---- comparisons ------------------------------------------------------------------ */

/* max |cuda - cpu| over the first n floats (from float `off`), relative to
 * max |cpu|; NaN anywhere fails. */
static void cmp_range(const char *what, pair p, size_t off, size_t n,
                      double tol) {
  float *c = down(CPU, p.c, p.bytes), *g = down(GPU, p.g, p.bytes);
  double big = 0, err = 0;
  size_t worst = off, nans = 0;
  for (size_t i = off; i < off + n; i++) {
    if (isnan(c[i]) || isnan(g[i])) { nans++; continue; }
    if (fabs(c[i]) > big) big = fabs(c[i]);
    double e = fabs((double)g[i] - c[i]);
    if (e > err) { err = e; worst = i; }
  }
  double rel = err / (big > 0 ? big : 1);
  check(nans == 0 && rel <= tol,
        "%s: max |cuda - cpu| %.2e of max |cpu| %.3g (tol %.0e)%s", what, rel,
        big, tol, nans ? " -- NaN FOUND (unwritten or wrong)" : "");
  if (nans || rel > tol)
    printf("  worst [%zu] cuda %.9g cpu %.9g; %zu NaN\n", worst, g[worst],
           c[worst], nans);
  free(c);
  free(g);
}

static void cmp(const char *what, pair p, double tol) {
  cmp_range(what, p, 0, p.bytes / sizeof(float), tol);
}

/* Bit for bit. */
static void same(const char *what, pair p) {
  unsigned char *c = down(CPU, p.c, p.bytes), *g = down(GPU, p.g, p.bytes);
  size_t diff = 0, first = 0, n = p.bytes / 4;
  for (size_t i = 0; i < n; i++)
    if (memcmp(c + 4 * i, g + 4 * i, 4) != 0 && diff++ == 0) first = i;
  check(diff == 0, "%s: bit for bit equal to the CPU engine (%zu of %zu "
        "words differ)", what, diff, n);
  if (diff) {
    uint32_t a, b;
    memcpy(&a, c + 4 * first, 4);
    memcpy(&b, g + 4 * first, 4);
    printf("  first at [%zu]: cpu %08x cuda %08x\n", first, a, b);
  }
  free(c);
  free(g);
}

/* The next sync on the GPU must fail with `needle` in the message, and the
 * one after it must succeed (the report is cleared). */
static void expect_sync_fail(const char *what, const char *needle) {
  int rc = eng_sync(GPU);
  int ok = rc == ERR_FAIL && strstr(err_msg(), needle) != NULL;
  check(ok, "%s is reported by the next eng_sync (rc %d, message: %s)", what,
        rc, rc ? err1() : "none");
  err_clear();
  rc = eng_sync(GPU);
  check(rc == 0, "%s: the report is cleared afterwards", what);
  err_clear();
}

/* ======================================================================= */
/* matrix products                                                          */
/* ======================================================================= */

static double mm_tol(dtype t) {
  return t == DT_F32 ? 1e-5 : t == DT_BF16 ? 1e-2 : 2e-3;
}

static void fabs_all(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = fabsf(x[i]);
}

/* How the GPU runs fp32 products in mm_case (eng_f32_products), and
 * whether mm_case only measures (no check). */
static f32_products mm_f32 = F32_EXACT;
static int mm_quiet;

/* batch = 0: k_matmul; otherwise k_matmul_batched with gaps between the
 * operands (and stride_b = 0 when shared_b). Leading dimensions exceed the
 * rows by `pad`. beta = 0: C holds NaN, which must not be read. Returns the
 * worst error relative to the element's magnitude. */
static double mm_case(int ta, int tb, int m, int n, int k, float alpha,
                      float beta, dtype ct, int batch, int shared_b, int pad) {
  int nb = batch ? batch : 1;
  int arows = ta ? k : m, acols = ta ? m : k;
  int brows = tb ? n : k, bcols = tb ? k : n;
  int lda = acols + pad, ldb = bcols + pad, ldc = n + pad;
  long long sa = batch ? (long long)arows * lda + 5 : 0;
  long long sb = batch && !shared_b ? (long long)brows * ldb + 3 : 0;
  long long sc = batch ? (long long)m * ldc + 7 : 0;
  size_t na = batch ? (size_t)sa * nb : (size_t)arows * lda;
  size_t nbb = sb ? (size_t)sb * nb : (size_t)brows * ldb;
  size_t nc = batch ? (size_t)sc * nb : (size_t)m * ldc;
  float *A = tl_rand(na, 1), *B = tl_rand(nbb, 1), *C0 = tl_rand(nc, 1);
  for (int b = 0; b < nb && beta == 0; b++)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) C0[b * sc + (size_t)i * ldc + j] = NAN;

  char what[200];
  snprintf(what, sizeof what, "%s %s%s ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g",
           batch ? "k_matmul_batched" : "k_matmul", dtype_name(ct),
           ct == DT_F32 && mm_f32 != F32_EXACT ? (mm_f32 == F32_TF32 ? " (tf32)"
                                                                   : " (3xtf32)")
                                              : "",
           ta, tb, m, n, k, alpha, beta);
  if (batch)
    snprintf(what + strlen(what), sizeof what - strlen(what), " (batch %d%s)",
             batch, shared_b ? ", stride_b=0" : "");

  /* The GPU in `ct`; the CPU reference in fp32, and the magnitudes. */
  float *Cg = NULL, *R = NULL, *M = NULL;
  double worst = INFINITY;
  if (eng_f32_products(GPU, mm_f32) < 0) hard_fail("eng_f32_products");
  for (int pass = 0; pass < 3; pass++) {
    engine *e = pass == 0 ? GPU : CPU;
    if (pass == 2) { fabs_all(A, na); fabs_all(B, nbb); fabs_all(C0, nc); }
    float *dA, *dB, *dC;
    if (eng_alloc(e, na * 4, "test", (void **)&dA) < 0 ||
        eng_alloc(e, nbb * 4, "test", (void **)&dB) < 0 ||
        eng_alloc(e, nc * 4, "test", (void **)&dC) < 0 ||
        eng_upload(e, dA, A, na * 4) < 0 || eng_upload(e, dB, B, nbb * 4) < 0 ||
        eng_upload(e, dC, C0, nc * 4) < 0)
      hard_fail("matmul buffers");
    float al = pass == 2 ? fabsf(alpha) : alpha, be = pass == 2 ? fabsf(beta) : beta;
    dtype t = pass == 0 ? ct : DT_F32;
    int rc = batch ? k_matmul_batched(e, ta, tb, m, n, k, al, dA, lda, sa, dB,
                                      ldb, sb, be, dC, ldc, sc, batch, t)
                   : k_matmul(e, ta, tb, m, n, k, al, dA, lda, dB, ldb, be,
                              dC, ldc, t);
    float *out = NULL;
    if (rc == 0) out = down(e, dC, nc * 4);
    else { check(0, "%s on %s: %s", what, engine_name(e), err1()); err_clear(); }
    eng_free(e, dA); eng_free(e, dB); eng_free(e, dC);
    if (pass == 0) Cg = out; else if (pass == 1) R = out; else M = out;
    if (!out) break;
  }
  if (eng_f32_products(GPU, F32_EXACT) < 0) hard_fail("eng_f32_products");
  if (Cg && R && M) {
    worst = 0;
    size_t bad_pad = 0;
    for (int b = 0; b < nb; b++)
      for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
          size_t o = (size_t)b * sc + (size_t)i * ldc + j;
          double e = fabs((double)Cg[o] - R[o]) / ((double)M[o] + 1e-30);
          if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    /* Padding and gaps: the GPU result there equals the CPU's (both left
     * them alone, and both started from the same C0). */
    for (size_t o = 0; o < nc; o++) {
      size_t r = batch ? o % (size_t)sc : o;
      size_t i = r / ldc, j = r % ldc;
      int inside = i < (size_t)m && j < (size_t)n;
      if (!inside && memcmp(&Cg[o], &R[o], 4) != 0) bad_pad++;
    }
    double tol = mm_tol(ct);
    int lowp_ran = ct == DT_F32 || worst > 1e-5 || (size_t)k * m * n < 64;
    if (bad_pad) worst = INFINITY;
    if (!mm_quiet)
    check(worst <= tol && bad_pad == 0 && lowp_ran,
          "%s: max error %.2e of the element's magnitude (tol %.0e)%s%s", what,
          worst, tol, bad_pad ? "; WROTE OUTSIDE C" : "",
          lowp_ran ? "" : "; error too small: were the inputs really rounded?");
  }
  free(Cg); free(R); free(M);
  free(A); free(B); free(C0);
  return worst;
}

/* Cases t = 0..3: fp32, fp32 by 3xTF32 (held to fp32's tolerance), bf16,
 * f16. */
static dtype mm_type(int t) {
  mm_f32 = t == 1 ? F32_3XTF32 : F32_EXACT;
  return t <= 1 ? DT_F32 : t == 2 ? DT_BF16 : DT_F16;
}

static void test_matmul(void) {
  for (int t = 0; t < 4; t++) {
    dtype ct = mm_type(t);
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        mm_case(ta, tb, 7, 13, 9, 1.0f, 0.0f, ct, 0, 0, 3);
        mm_case(ta, tb, 7, 13, 9, 0.7f, 0.3f, ct, 0, 0, 3);
        mm_case(ta, tb, 37, 150, 300, -1.3f, 1.0f, ct, 0, 0, 1);
      }
    mm_case(0, 1, 1, 1, 1, 2.0f, -0.5f, ct, 0, 0, 0);
    if (small_only) continue;
    /* The model's products at N = 512, d_model 768, d_ff 3072, V 10000:
     * forward y = x W^T, input gradient dx = dy W, weight gradient
     * dW += dy^T x (beta 1), the FFN and the LM head. */
    mm_case(0, 1, 512, 768, 768, 1.0f, 0.0f, ct, 0, 0, 0);
    mm_case(0, 0, 512, 768, 768, 1.0f, 0.0f, ct, 0, 0, 0);
    mm_case(1, 0, 768, 768, 512, 1.0f, 1.0f, ct, 0, 0, 0);
    mm_case(0, 1, 512, 3072, 768, 1.0f, 0.0f, ct, 0, 0, 0);
    mm_case(0, 0, 512, 768, 3072, 1.0f, 0.0f, ct, 0, 0, 0);
    mm_case(0, 1, 512, 10000, 768, 1.0f, 0.0f, ct, 0, 0, 0);
  }
  mm_f32 = F32_EXACT;

  /* The fp32 tolerance tells 3xTF32 from plain TF32: TF32 misses it. */
  mm_f32 = F32_TF32;
  mm_quiet = 1;
  double tf32_err = mm_case(0, 1, 37, 150, 300, 1.0f, 0.0f, DT_F32, 0, 0, 1);
  mm_quiet = 0;
  mm_f32 = F32_EXACT;
  check(tf32_err > mm_tol(DT_F32) && tf32_err < 1e-2,
        "k_matmul in TF32 errs by %.2e, beyond fp32's tolerance %.0e (so "
        "that tolerance holds 3xTF32 to more than TF32)", tf32_err,
        mm_tol(DT_F32));

  /* k = 0: C = beta C (and 0, C not read, when beta = 0). */
  float C0[6], *Cnan = tl_malloc(6 * sizeof *Cnan);
  for (int i = 0; i < 6; i++) { C0[i] = frand(1); Cnan[i] = NAN; }
  pair c = pair_f(C0, 6), z = pair_f(Cnan, 6);
  BOTH(k_matmul(e, 0, 0, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 0.5f, W(c), 3, DT_F32));
  BOTH(k_matmul(e, 0, 0, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 0.0f, W(z), 3, w ? DT_BF16 : DT_F32));
  same("k_matmul with k=0: C = beta*C", c);
  same("k_matmul with k=0, beta=0: C = 0 without reading C", z);
  pair_free(c); pair_free(z); free(Cnan);
}

static void test_matmul_batched(void) {
  for (int t = 0; t < 4; t++) {
    dtype ct = mm_type(t);
    /* Attention's products S = Q K^T, O = P V, their backward shapes with
     * beta != 0, and a shared B. */
    mm_case(0, 1, 9, 9, 6, 1.0f, 0.0f, ct, 3, 0, 1);
    mm_case(0, 0, 9, 6, 9, 0.6f, 0.0f, ct, 3, 0, 2);
    mm_case(1, 0, 6, 9, 9, 0.6f, 0.5f, ct, 3, 0, 1);
    mm_case(1, 1, 7, 5, 11, 0.6f, 1.0f, ct, 4, 0, 2);
    mm_case(0, 1, 7, 13, 9, 0.6f, 0.25f, ct, 3, 1, 1);
    if (small_only) continue;
    /* B*H = 48 heads, T = 512, Dh = 64. */
    mm_case(0, 1, 512, 512, 64, 0.125f, 0.0f, ct, 48, 0, 0);
    mm_case(0, 0, 512, 64, 512, 1.0f, 0.0f, ct, 48, 0, 0);
    mm_case(1, 0, 512, 64, 512, 1.0f, 0.0f, ct, 48, 0, 0);
  }
  mm_f32 = F32_EXACT;
  /* More products than one cuBLAS call takes (65535). */
  mm_case(0, 0, 2, 3, 2, 1.0f, 0.5f, DT_F32, 65537, 0, 0);
  mm_case(0, 1, 2, 3, 4, 1.0f, 0.0f, DT_BF16, 65537, 0, 1);
}

/* ======================================================================= */
/* embedding                                                                */
/* ======================================================================= */

static void emb_case(int n, int d, int vocab, int misalign) {
  int32_t *ids = tl_malloc((size_t)n * sizeof *ids);
  /* Half the positions from 5 ids: many repeats. */
  for (int i = 0; i < n; i++)
    ids[i] = (int32_t)(next_u64() % (next_u64() & 1 ? 5 : (uint64_t)vocab));
  int o = misalign;
  pair pid = pair_new(ids, (size_t)n * 4);
  pair table = pair_rand((size_t)vocab * d + o, 1);
  pair out = pair_f(NULL, (size_t)n * d + o);
  pair dout = pair_rand((size_t)n * d + o, 1);
  pair dt = pair_rand((size_t)vocab * d + o, 1);   /* accumulated into */
  char what[160];
  snprintf(what, sizeof what, "n=%d d=%d V=%d%s", n, d, vocab,
           o ? ", misaligned" : "");
  BOTH(k_embedding_fwd(e, W(pid), (float *)W(table) + o, (float *)W(out) + o,
                       n, d, vocab));
  char line[200];
  snprintf(line, sizeof line, "k_embedding_fwd %s", what);
  same(line, out);
  BOTH(k_embedding_bwd(e, W(pid), (float *)W(dout) + o, (float *)W(dt) + o, n,
                       d, vocab));
  snprintf(line, sizeof line, "k_embedding_bwd %s (accumulated into random "
           "dtable, repeated ids, deterministic)", what);
  same(line, dt);
  pair_free(pid); pair_free(table); pair_free(out); pair_free(dout);
  pair_free(dt);
  free(ids);
}

static void test_embedding(void) {
  emb_case(9, 150, 37, 0);
  emb_case(9, 13, 37, 0);
  emb_case(33, 20, 7, 1);
  if (!small_only) {
    emb_case(2048, 768, 10000, 0);
    emb_case(512, 2560, 10000, 0);
  }
  /* A bad id is reported at the next sync, with the CPU engine's words. */
  enum { D = 16, V = 37 };
  int32_t bad[3] = {1, 37, 2};
  pair pid = pair_new(bad, sizeof bad), table = pair_rand(V * D, 1);
  pair out = pair_f(NULL, 3 * D), dout = pair_rand(3 * D, 1);
  int rc = k_embedding_fwd(GPU, pid.g, table.g, out.g, 3, D, V);
  check(rc == 0, "k_embedding_fwd with a bad id returns 0 at the call (the "
        "ids are on the GPU)");
  expect_sync_fail("k_embedding_fwd with an id >= V",
                   "k_embedding_fwd: token id 37 at position 1 is outside [0, 37)");
  bad[1] = -1;
  pair_set(pid, bad);
  rc = k_embedding_bwd(GPU, pid.g, dout.g, table.g, 3, D, V);
  check(rc == 0, "k_embedding_bwd with a bad id returns 0 at the call");
  expect_sync_fail("k_embedding_bwd with an id < 0",
                   "k_embedding_bwd: token id -1 at position 1 is outside [0, 37)");
  pair_free(pid); pair_free(table); pair_free(out); pair_free(dout);
}

/* ======================================================================= */
/* RMSNorm                                                                  */
/* ======================================================================= */

static void rms_case(int n, int d, int alias_dx_dy) {
  const float eps = 1e-5f;
  pair x = pair_rand((size_t)n * d, 2), g = pair_rand(d, 1);
  pair y = pair_f(NULL, (size_t)n * d), r = pair_f(NULL, n);
  pair dy = pair_rand((size_t)n * d, 1), dg = pair_rand(d, 1);
  pair dx = alias_dx_dy ? dy : pair_f(NULL, (size_t)n * d);
  char line[160];
  BOTH(k_rmsnorm_fwd(e, W(x), W(g), W(y), W(r), n, d, eps));
  snprintf(line, sizeof line, "k_rmsnorm_fwd y n=%d d=%d", n, d);
  cmp(line, y, 1e-5);
  snprintf(line, sizeof line, "k_rmsnorm_fwd rstd n=%d d=%d", n, d);
  cmp(line, r, 1e-5);
  BOTH(k_rmsnorm_bwd(e, W(dy), W(x), W(g), W(r), W(dx), W(dg), n, d));
  snprintf(line, sizeof line, "k_rmsnorm_bwd dx n=%d d=%d%s", n, d,
           alias_dx_dy ? " (dx = dy, in place)" : "");
  cmp(line, dx, 1e-5);
  snprintf(line, sizeof line, "k_rmsnorm_bwd dg n=%d d=%d (accumulated into "
           "random dg)", n, d);
  cmp(line, dg, 1e-5);
  pair_free(x); pair_free(g); pair_free(y); pair_free(r); pair_free(dy);
  pair_free(dg);
  if (!alias_dx_dy) pair_free(dx);
}

/* The dg column sums do not depend on timing: two runs, same bits. */
static void rms_deterministic(int n, int d) {
  pair x = pair_rand((size_t)n * d, 1), g = pair_rand(d, 1), r = pair_rand(n, 1);
  pair dy = pair_rand((size_t)n * d, 1), dx = pair_f(NULL, (size_t)n * d);
  float *z = tl_malloc(d * sizeof *z), *o[2];
  for (int i = 0; i < d; i++) z[i] = 0.5f;
  pair dg = pair_f(z, d);
  for (int k = 0; k < 2; k++) {
    pair_set(dg, z);
    if (k_rmsnorm_bwd(GPU, dy.g, x.g, g.g, r.g, dx.g, dg.g, n, d) < 0)
      hard_fail("k_rmsnorm_bwd");
    o[k] = down(GPU, dg.g, d * sizeof(float));
  }
  check(memcmp(o[0], o[1], d * sizeof(float)) == 0,
        "k_rmsnorm_bwd dg n=%d d=%d: two runs give the same bits", n, d);
  free(o[0]); free(o[1]); free(z);
  pair_free(x); pair_free(g); pair_free(r); pair_free(dy); pair_free(dx);
  pair_free(dg);
}

static void test_rmsnorm(void) {
  rms_case(7, 13, 0);
  rms_case(5, 1001, 0);
  rms_case(9, 20, 1);
  /* rows in registers: 2, 4 and 8 float4s a thread, the last with a
   * partial turn; then one too wide for them (the loop) */
  rms_case(6, 2048, 0);
  rms_case(5, 4096, 1);
  rms_case(4, 4100, 1);
  rms_case(3, 8192, 0);
  rms_case(3, 8200, 1);
  if (!small_only) {
    rms_case(512, 768, 0);
    rms_case(2048, 768, 1);
    rms_case(3001, 2560, 0);
    rms_deterministic(2048, 768);
  }
}

/* The fused path's norm backward (fp32 ends): dx = dres + RMSNorm dx,
 * with dx in place over dres or not, its copy dx_low, dg accumulated;
 * odd and model-sized rows (d 2560 is the 2.7B model's). */
static void rms_ex_case(int n, int d, int with_dres, int in_place) {
  pair x = pair_rand((size_t)n * d, 2), g = pair_rand(d, 1), r = pair_rand(n, 1);
  pair dy = pair_rand((size_t)n * d, 1), dg = pair_rand(d, 1);
  pair dres = pair_rand((size_t)n * d, 1);
  pair dx = in_place ? dres : pair_f(NULL, (size_t)n * d);
  pair low = pair_f(NULL, (size_t)n * d);
  char line[160];
  BOTH(k_rmsnorm_bwd_ex(e, W(dy), W(x), W(g), W(r), with_dres ? W(dres) : NULL,
                        W(dx), W(low), DT_F32, W(dg), n, d));
  snprintf(line, sizeof line, "k_rmsnorm_bwd_ex dx n=%d d=%d%s", n, d,
           !with_dres ? " (no dres)" : in_place ? " (in place over dres)" : "");
  cmp(line, dx, 1e-5);
  snprintf(line, sizeof line, "k_rmsnorm_bwd_ex dx_low n=%d d=%d", n, d);
  cmp(line, low, 1e-5);
  snprintf(line, sizeof line, "k_rmsnorm_bwd_ex dg n=%d d=%d", n, d);
  cmp(line, dg, 1e-5);
  pair_free(x); pair_free(g); pair_free(r); pair_free(dy); pair_free(dg);
  pair_free(dres); pair_free(low);
  if (!in_place) pair_free(dx);
}

/* dy in bf16 (as the fused path's products leave it) on the GPU against
 * the CPU engine's fp32 dy holding the same values: the sums are fp32 on
 * both, so dx and dg agree as closely as with fp32 dy. */
/* x[i] rounded to bf16 (nearest even), kept as fp32: the values a bf16
 * buffer holds, exactly. */
static void round_bf16(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x[i], &u, 4);
  }
}

static void rms_ex_bf16_case(int n, int d) {
  size_t nd = (size_t)n * d;
  float *h = tl_rand(nd, 1);
  round_bf16(h, nd);
  pair dy = pair_f(h, nd);
  free(h);
  void *dyb = NULL;
  if (eng_alloc(GPU, nd * 2, "test", &dyb) < 0 ||
      k_cast(GPU, dy.g, DT_F32, dyb, DT_BF16, nd) < 0)
    hard_fail("bf16 dy");
  pair x = pair_rand(nd, 2), g = pair_rand(d, 1), r = pair_rand(n, 1);
  pair dres = pair_rand(nd, 1), dg = pair_rand(d, 1), dx = pair_f(NULL, nd);
  char line[160];
  if (k_rmsnorm_bwd_ex(CPU, dy.c, x.c, g.c, r.c, dres.c, dx.c, NULL, DT_F32,
                       dg.c, n, d) < 0 ||
      k_rmsnorm_bwd_ex(GPU, dyb, x.g, g.g, r.g, dres.g, dx.g, NULL, DT_BF16,
                       dg.g, n, d) < 0) {
    check(0, "k_rmsnorm_bwd_ex with bf16 dy: %s", err1());
    err_clear();
  } else {
    snprintf(line, sizeof line, "k_rmsnorm_bwd_ex bf16 dy: dx n=%d d=%d", n, d);
    cmp(line, dx, 1e-5);
    snprintf(line, sizeof line, "k_rmsnorm_bwd_ex bf16 dy: dg n=%d d=%d", n, d);
    cmp(line, dg, 1e-5);
  }
  eng_free(GPU, dyb);
  pair_free(dy); pair_free(x); pair_free(g); pair_free(r); pair_free(dres);
  pair_free(dg); pair_free(dx);
}

/* The fused path's residual add and norm: sum = a + b (b may be NULL;
 * sum NULL, separate, or a itself), y in fp32 or bf16 (compared through
 * k_cast to fp32 on each engine: the two may round an fp32 value that
 * differs in its last bits to neighbouring bf16s, one bf16 step). */
static void add_rms_case(int n, int d, int with_b, int sum_mode, dtype yt) {
  size_t nd = (size_t)n * d;
  pair a = pair_rand(nd, 2), b = pair_rand(nd, 1), g = pair_rand(d, 1);
  pair sum = pair_f(NULL, nd), r = pair_f(NULL, n);
  pair y = pair_new(NULL, nd * dtype_size(yt)), y32 = pair_f(NULL, nd);
  char line[200], what[120];
  snprintf(what, sizeof what, "k_add_rmsnorm_fwd n=%d d=%d%s%s, y %s", n, d,
           with_b ? "" : " (no b)",
           sum_mode == 0 ? " (no sum)" : sum_mode == 2 ? " (sum over a)" : "",
           yt == DT_F32 ? "fp32" : "bf16");
  BOTH(k_add_rmsnorm_fwd(e, W(a), with_b ? W(b) : NULL,
                         sum_mode == 0 ? NULL : sum_mode == 2 ? W(a) : W(sum),
                         W(g), W(y), yt, W(r), n, d, 1e-5f));
  BOTH(k_cast(e, W(y), yt, W(y32), DT_F32, nd));
  snprintf(line, sizeof line, "%s: y", what);
  cmp(line, y32, yt == DT_F32 ? 1e-5 : 8e-3);
  snprintf(line, sizeof line, "%s: rstd", what);
  cmp(line, r, 1e-5);
  if (sum_mode) {
    snprintf(line, sizeof line, "%s: sum", what);
    cmp(line, sum_mode == 2 ? a : sum, 1e-6);
  }
  pair_free(a); pair_free(b); pair_free(g); pair_free(sum); pair_free(r);
  pair_free(y); pair_free(y32);
}

static void test_rmsnorm_ex(void) {
  rms_ex_bf16_case(9, 20);
  rms_ex_bf16_case(7, 13);
  rms_ex_case(7, 13, 1, 0);
  rms_ex_case(5, 1001, 0, 0);
  rms_ex_case(9, 20, 1, 1);
  /* rows in registers (1, 2, 4 and 8 float4s a thread, partial turns),
   * then too wide for them */
  rms_ex_case(6, 2048, 1, 0);
  rms_ex_case(4, 4100, 1, 1);
  rms_ex_case(3, 8192, 0, 0);
  rms_ex_case(3, 8200, 1, 1);
  rms_ex_bf16_case(5, 2560);
  rms_ex_bf16_case(3, 8192);
  add_rms_case(7, 13, 1, 1, DT_F32);
  add_rms_case(7, 13, 1, 2, DT_BF16);
  add_rms_case(5, 1001, 0, 2, DT_F32);
  add_rms_case(9, 768, 1, 1, DT_BF16);
  add_rms_case(6, 2048, 1, 2, DT_F32);
  add_rms_case(5, 2560, 1, 1, DT_BF16);
  add_rms_case(4, 4100, 0, 0, DT_F32);
  add_rms_case(3, 8192, 1, 1, DT_BF16);
  add_rms_case(3, 8200, 1, 1, DT_F32);
  add_rms_case(3, 8200, 1, 2, DT_BF16);
  if (!small_only) {
    rms_ex_case(1100, 2560, 1, 1);
    rms_ex_case(2048, 768, 1, 0);
    rms_ex_case(1030, 4096, 0, 0);
    rms_ex_case(600, 4100, 1, 1);
    rms_ex_bf16_case(2048, 2560);
  }
}

/* ======================================================================= */
/* RoPE and head layout                                                     */
/* ======================================================================= */

static void rope_case(int b, int h, int t, int dh, int misalign) {
  size_t n = (size_t)b * h * t * dh;
  int o = misalign;
  pair x = pair_rand(n + o, 1);
  char line[160];
  BOTH(k_rope(e, (float *)W(x) + o, b, h, t, dh, 10000.0f, 0));
  snprintf(line, sizeof line, "k_rope B=%d H=%d T=%d Dh=%d%s", b, h, t, dh,
           o ? " misaligned" : "");
  cmp(line, x, 1e-5);
  BOTH(k_rope(e, (float *)W(x) + o, b, h, t, dh, 10000.0f, 1));
  snprintf(line, sizeof line, "k_rope inverse (backward) B=%d H=%d T=%d Dh=%d",
           b, h, t, dh);
  cmp(line, x, 1e-5);
  pair_free(x);
}

static void heads_case(int b, int t, int h, int dh) {
  size_t n = (size_t)b * t * h * dh;
  pair x = pair_rand(n, 1), y = pair_f(NULL, n), z = pair_f(NULL, n);
  char line[160];
  BOTH(k_split_heads(e, W(x), W(y), b, t, h, dh));
  snprintf(line, sizeof line, "k_split_heads B=%d T=%d H=%d Dh=%d", b, t, h, dh);
  same(line, y);
  BOTH(k_merge_heads(e, W(y), W(z), b, t, h, dh));
  snprintf(line, sizeof line, "k_merge_heads B=%d T=%d H=%d Dh=%d", b, t, h, dh);
  same(line, z);
  pair_free(x); pair_free(y); pair_free(z);
}

/* The fused path's typed forms (fp32 ends): split / merge with the block
 * per row layout, and q|k|v split + RoPE and its backward. */
static void fused_heads_case(int b, int t, int h, int dh) {
  size_t n = (size_t)b * t * h * dh;
  pair x = pair_rand(n, 1), y = pair_f(NULL, n), z = pair_f(NULL, n);
  char line[160];
  BOTH(k_split_heads_ex(e, W(x), DT_F32, W(y), DT_F32, b, t, h, dh));
  snprintf(line, sizeof line, "k_split_heads_ex B=%d T=%d H=%d Dh=%d", b, t, h, dh);
  same(line, y);
  BOTH(k_merge_heads_ex(e, W(y), DT_F32, W(z), DT_F32, b, t, h, dh));
  snprintf(line, sizeof line, "k_merge_heads_ex B=%d T=%d H=%d Dh=%d", b, t, h, dh);
  same(line, z);
  pair_free(x); pair_free(y); pair_free(z);
}

static void qkv_rope_case(int b, int t, int h, int dh, float theta) {
  size_t n = (size_t)b * t * h * dh;
  pair qkv = pair_rand(3 * n, 1), q = pair_f(NULL, n), k = pair_f(NULL, n);
  pair v = pair_f(NULL, n), back = pair_f(NULL, 3 * n);
  char line[160];
  BOTH(k_qkv_split_rope(e, W(qkv), W(q), W(k), W(v), DT_F32, b, t, h, dh,
                        theta));
  snprintf(line, sizeof line, "k_qkv_split_rope q B=%d T=%d H=%d Dh=%d theta=%g", b, t, h, dh, theta);
  cmp(line, q, 1e-5);
  snprintf(line, sizeof line, "k_qkv_split_rope k B=%d T=%d H=%d Dh=%d", b, t, h, dh);
  cmp(line, k, 1e-5);
  snprintf(line, sizeof line, "k_qkv_split_rope v B=%d T=%d H=%d Dh=%d", b, t, h, dh);
  same(line, v);
  BOTH(k_qkv_merge_rope_bwd(e, W(q), W(k), W(v), W(back), DT_F32, b, t, h, dh,
                            theta));
  snprintf(line, sizeof line, "k_qkv_merge_rope_bwd B=%d T=%d H=%d Dh=%d theta=%g", b, t, h, dh, theta);
  cmp(line, back, 1e-5);
  pair_free(qkv); pair_free(q); pair_free(k); pair_free(v); pair_free(back);
}

static void test_rope_heads(void) {
  fused_heads_case(2, 9, 3, 6);
  fused_heads_case(3, 7, 5, 12);
  /* The CUDA engine keeps its angle table between calls: a shorter
   * sequence reuses it; a longer one, another dh or theta remakes it. */
  qkv_rope_case(2, 9, 3, 8, 10000.0f);
  qkv_rope_case(2, 5, 3, 8, 10000.0f);
  qkv_rope_case(2, 9, 3, 8, 500.0f);
  qkv_rope_case(2, 12, 3, 8, 500.0f);
  qkv_rope_case(3, 5, 7, 12, 10000.0f);
  if (!small_only) {
    fused_heads_case(4, 512, 32, 80);
    qkv_rope_case(4, 512, 32, 80, 10000.0f);   /* the 2.7B model's heads */
    qkv_rope_case(1, 30, 100, 12, 10000.0f);   /* 300 quads a row: threads loop */
  }
  rope_case(2, 3, 9, 6, 0);
  rope_case(1, 2, 7, 10, 1);
  heads_case(2, 9, 3, 6);
  heads_case(1, 5, 2, 12);
  if (!small_only) {
    rope_case(4, 12, 512, 64, 0);
    rope_case(1, 2, 8192, 128, 0);   /* large angles: t up to 8191 */
    heads_case(4, 512, 12, 64);
  }
}

/* ======================================================================= */
/* causal softmax                                                           */
/* ======================================================================= */

/* Every entry above the diagonal exactly +0 on the GPU. */
static void upper_zero(const char *what, pair p, int mats, int seq) {
  float *g = down(GPU, p.g, p.bytes);
  size_t bad = 0;
  for (long long mtx = 0; mtx < mats; mtx++)
    for (int i = 0; i < seq; i++)
      for (int j = i + 1; j < seq; j++) {
        uint32_t u;
        memcpy(&u, &g[((size_t)mtx * seq + i) * seq + j], 4);
        bad += u != 0;
      }
  check(bad == 0, "%s: upper triangle written as 0 (%zu not)", what, bad);
  free(g);
}

static void softmax_case(int mats, int seq, float scale, int in_place) {
  size_t n = (size_t)mats * seq * seq;
  pair S = pair_rand(n, 3);
  pair P = in_place ? S : pair_f(NULL, n);
  pair dP = pair_rand(n, 1);
  pair dS = in_place ? dP : pair_f(NULL, n);
  char line[160];
  BOTH(k_softmax_causal_fwd(e, W(S), W(P), mats, seq, scale));
  snprintf(line, sizeof line, "k_softmax_causal_fwd mats=%d T=%d scale=%g%s",
           mats, seq, scale, in_place ? " (P = S)" : "");
  cmp(line, P, 1e-5);
  upper_zero(line, P, mats, seq);
  BOTH(k_softmax_causal_bwd(e, W(P), W(dP), W(dS), mats, seq, scale));
  snprintf(line, sizeof line, "k_softmax_causal_bwd mats=%d T=%d%s", mats, seq,
           in_place ? " (dS = dP)" : "");
  cmp(line, dS, 1e-5);
  upper_zero(line, dS, mats, seq);
  pair_free(S); pair_free(dP);
  if (!in_place) { pair_free(P); pair_free(dS); }
}

static void test_softmax(void) {
  softmax_case(3, 9, 0.4f, 0);
  softmax_case(2, 33, 1.0f, 1);
  softmax_case(1, 1100, 0.125f, 0);   /* a block per row (T > 1024) */
  if (!small_only) {
    softmax_case(48, 512, 0.125f, 0);
    softmax_case(4, 1024, 0.125f, 1);
    softmax_case(2, 1500, 0.125f, 1);
  }
}

/* ======================================================================= */
/* SwiGLU                                                                   */
/* ======================================================================= */

static void swiglu_case(size_t n, int misalign, int alias) {
  int o = misalign;
  pair a = pair_rand(n + o, 4), b = pair_rand(n + o, 1), h = pair_f(NULL, n + o);
  pair dh = pair_rand(n + o, 1);
  pair da = alias ? a : pair_f(NULL, n + o), db = alias ? b : pair_f(NULL, n + o);
  char line[160];
  BOTH(k_swiglu_fwd(e, (float *)W(a) + o, (float *)W(b) + o,
                    (float *)W(h) + o, n));
  snprintf(line, sizeof line, "k_swiglu_fwd n=%zu%s", n, o ? " misaligned" : "");
  cmp_range(line, h, o, n, 1e-5);
  BOTH(k_swiglu_bwd(e, (float *)W(dh) + o, (float *)W(a) + o,
                    (float *)W(b) + o, (float *)W(da) + o, (float *)W(db) + o,
                    n));
  snprintf(line, sizeof line, "k_swiglu_bwd da n=%zu%s", n,
           alias ? " (da = a, db = b)" : "");
  cmp_range(line, da, o, n, 1e-5);
  snprintf(line, sizeof line, "k_swiglu_bwd db n=%zu", n);
  cmp_range(line, db, o, n, 1e-5);
  if (!alias) {
    /* The fused path's form: h recomputed by the backward pass. */
    pair h2 = pair_f(NULL, n + o);
    BOTH(k_swiglu_bwd_ex(e, (float *)W(dh) + o, (float *)W(a) + o,
                         (float *)W(b) + o, (float *)W(da) + o,
                         (float *)W(db) + o, (float *)W(h2) + o, DT_F32, n));
    snprintf(line, sizeof line, "k_swiglu_bwd_ex h n=%zu%s", n,
             o ? " misaligned" : "");
    cmp_range(line, h2, o, n, 1e-5);
    snprintf(line, sizeof line, "k_swiglu_bwd_ex da n=%zu", n);
    cmp_range(line, da, o, n, 1e-5);
    pair_free(h2);
  }
  pair_free(a); pair_free(b); pair_free(h); pair_free(dh);
  if (!alias) { pair_free(da); pair_free(db); }
}

/* Bit for bit, on each engine that ran it: p and q over n elements of
 * esz bytes from element off. */
static void same_pairs(const char *what, pair p, pair q, size_t off, size_t n,
                       size_t esz, int engines) {
  for (int w = 2 - engines; w < 2; w++) {
    engine *e = w ? GPU : CPU;
    unsigned char *x = down(e, W(p), p.bytes), *y = down(e, W(q), q.bytes);
    size_t diff = 0;
    for (size_t i = off; i < off + n; i++)
      diff += memcmp(x + esz * i, y + esz * i, esz) != 0;
    check(diff == 0, "%s on the %s engine: %zu of %zu differ", what,
          engine_name(e), diff, n);
    free(x);
    free(y);
  }
}

/* The fused backward in place, as backward_fused.c calls it (da over a,
 * db over b, h over dh), against the same call into fresh buffers: bit
 * for bit. fp32 on both engines; bf16 on the GPU (the CPU's fused path is
 * fp32 only). */
static void swiglu_ex_in_place_case(size_t n, int misalign, dtype lt) {
  size_t o = (size_t)misalign, z = dtype_size(lt), bytes = (n + o) * z;
  int engines = lt == DT_F32 ? 2 : 1;
  unsigned char *hv[3];
  for (int k = 0; k < 3; k++) {
    float *f = tl_rand(n + o, k ? 1.0f : 4.0f);
    hv[k] = tl_malloc(bytes);
    for (size_t i = 0; i < n + o; i++) {
      if (lt == DT_F32) {
        memcpy(hv[k] + 4 * i, &f[i], 4);
      } else {   /* bf16: the top half, so every value is exact */
        uint32_t u;
        memcpy(&u, &f[i], 4);
        uint16_t t = (uint16_t)(u >> 16);
        memcpy(hv[k] + 2 * i, &t, 2);
      }
    }
    free(f);
  }
  pair a = pair_new(hv[0], bytes), b = pair_new(hv[1], bytes),
       dh = pair_new(hv[2], bytes), da = pair_new(NULL, bytes),
       db = pair_new(NULL, bytes), h = pair_new(NULL, bytes),
       a2 = pair_new(hv[0], bytes), b2 = pair_new(hv[1], bytes),
       dh2 = pair_new(hv[2], bytes);
  for (int k = 0; k < 3; k++) free(hv[k]);
#define AT(p) ((char *)W(p) + o * z)
  for (int w = 2 - engines; w < 2; w++) {
    engine *e = w ? GPU : CPU;
    if (k_swiglu_bwd_ex(e, AT(dh), AT(a), AT(b), AT(da), AT(db), AT(h), lt,
                        n) < 0 ||
        k_swiglu_bwd_ex(e, AT(dh2), AT(a2), AT(b2), AT(a2), AT(b2), AT(dh2),
                        lt, n) < 0) {
      check(0, "k_swiglu_bwd_ex in place on the %s engine: %s",
            engine_name(e), err1());
      err_clear();
      break;
    }
  }
#undef AT
  char line[160];
  const char *tn = lt == DT_F32 ? "fp32" : "bf16";
  snprintf(line, sizeof line, "k_swiglu_bwd_ex in place, %s, n=%zu%s: da", tn,
           n, o ? " misaligned" : "");
  same_pairs(line, da, a2, o, n, z, engines);
  snprintf(line, sizeof line, "k_swiglu_bwd_ex in place, %s, n=%zu: db", tn, n);
  same_pairs(line, db, b2, o, n, z, engines);
  snprintf(line, sizeof line, "k_swiglu_bwd_ex in place, %s, n=%zu: h", tn, n);
  same_pairs(line, h, dh2, o, n, z, engines);
  pair ps[] = {a, b, dh, da, db, h, a2, b2, dh2};
  for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) pair_free(ps[k]);
}

static void test_swiglu(void) {
  swiglu_ex_in_place_case(1001, 0, DT_F32);
  swiglu_ex_in_place_case(1003, 1, DT_F32);
  swiglu_ex_in_place_case(1001, 0, DT_BF16);
  swiglu_ex_in_place_case(1003, 1, DT_BF16);
  swiglu_case(1001, 0, 0);
  swiglu_case(1001, 1, 1);
  swiglu_case(1001, 1, 0);
  swiglu_case(7, 0, 0);
  if (!small_only) swiglu_case((size_t)2048 * 3072, 0, 0);
}

/* ======================================================================= */
/* initial weights                                                          */
/* ======================================================================= */

/* The same key, table and n give the same bits on both engines: model_init
 * draws a model's weights where they live, and a CPU and a GPU run of one
 * seed start from the same model. */
static void test_init_normal(void) {
  pair tab = pair_new(k_init_normal_table(), 65537 * sizeof(int32_t));
  size_t n = ((size_t)1 << 22) + 3;
  uint64_t key = next_u64();
  pair x = pair_f(NULL, n);
  BOTH(k_init_normal(e, (float *)W(x), n, key, 0.0f, 0.0198f,
                     (const int32_t *)W(tab)));
  same("k_init_normal (2^22 + 3 values, std 0.0198)", x);
  BOTH(k_init_normal(e, (float *)W(x) + 1, 1001, key, 1.0f, 0.0f,
                     (const int32_t *)W(tab)));
  same("k_init_normal filling 1001 values with 1 from the second", x);
  pair_free(x);
  pair_free(tab);
}

/* ======================================================================= */
/* cross-entropy                                                            */
/* ======================================================================= */

static void ce_case(int n, int vocab, float scale, float offset, int alias) {
  float *lg = tl_rand((size_t)n * vocab, scale);
  for (size_t i = 0; i < (size_t)n * vocab; i++) lg[i] += offset;
  int32_t *tg = tl_malloc((size_t)n * sizeof *tg);
  for (int i = 0; i < n; i++) tg[i] = (int32_t)(next_u64() % (uint64_t)vocab);
  pair L = pair_f(lg, (size_t)n * vocab), T = pair_new(tg, (size_t)n * 4);
  pair loss = pair_f(NULL, n), lse = pair_f(NULL, n);
  pair dL = alias ? L : pair_f(NULL, (size_t)n * vocab);
  char line[160];
  BOTH(k_cross_entropy_fwd(e, W(L), W(T), W(loss), W(lse), n, vocab));
  snprintf(line, sizeof line, "k_cross_entropy_fwd losses n=%d V=%d "
           "(logits +-%g%+g)", n, vocab, scale, offset);
  cmp(line, loss, 1e-5);
  snprintf(line, sizeof line, "k_cross_entropy_fwd lse n=%d V=%d", n, vocab);
  cmp(line, lse, 1e-5);
  BOTH(k_cross_entropy_bwd(e, W(L), W(T), W(lse), W(dL), n, vocab,
                           1.0f / n));
  snprintf(line, sizeof line, "k_cross_entropy_bwd n=%d V=%d scale=1/n%s", n,
           vocab, alias ? " (dlogits = logits)" : "");
  cmp(line, dL, 1e-5);
  pair_free(L); pair_free(T); pair_free(loss); pair_free(lse);
  if (!alias) pair_free(dL);
  free(lg); free(tg);
}

static void test_cross_entropy(void) {
  ce_case(7, 37, 4, 0, 0);
  ce_case(5, 1001, 4, 0, 1);
  ce_case(3, 40, 3, 100, 0);   /* exp(100) would overflow without the max */
  if (!small_only) {
    ce_case(512, 10000, 4, 0, 0);
    ce_case(2048, 10000, 4, 0, 1);
    ce_case(64, 10001, 4, 0, 0);
    ce_case(4, 151936, 4, 0, 0);
  }
  /* Bad targets, reported at the next sync. */
  int32_t bad[3] = {1, 37, 2};
  pair L = pair_rand(3 * 37, 1), T = pair_new(bad, sizeof bad);
  pair loss = pair_f(NULL, 3), lse = pair_f(NULL, 3), dL = pair_f(NULL, 3 * 37);
  int rc = k_cross_entropy_fwd(GPU, L.g, T.g, loss.g, lse.g, 3, 37);
  check(rc == 0, "k_cross_entropy_fwd with a bad target returns 0 at the call");
  expect_sync_fail("k_cross_entropy_fwd with a target >= V",
                   "k_cross_entropy_fwd: target 37 at position 1 is outside [0, 37)");
  bad[1] = -3;
  pair_set(T, bad);
  rc = k_cross_entropy_bwd(GPU, L.g, T.g, lse.g, dL.g, 3, 37, 1.0f);
  check(rc == 0, "k_cross_entropy_bwd with a bad target returns 0 at the call");
  expect_sync_fail("k_cross_entropy_bwd with a target < 0",
                   "k_cross_entropy_bwd: target -3 at position 1 is outside [0, 37)");
  pair_free(L); pair_free(T); pair_free(loss); pair_free(lse); pair_free(dL);
}

/* ======================================================================= */
/* AdamW, elementwise, casts                                                */
/* ======================================================================= */

static void adamw_case(size_t n, int misalign) {
  int o = misalign;
  float *v0 = tl_rand(n + o, 1);
  for (size_t i = 0; i < n + o; i++) v0[i] *= v0[i] * 0.01f;   /* v >= 0 */
  pair p = pair_rand(n + o, 1), m = pair_rand(n + o, 0.1f), v = pair_f(v0, n + o);
  pair g = pair_f(NULL, n + o);
  for (long long t = 1; t <= 3; t++) {
    float *gh = tl_rand(n + o, 1);
    pair_set(g, gh);
    free(gh);
    BOTH(k_adamw(e, (float *)W(p) + o, (float *)W(g) + o, (float *)W(m) + o,
                 (float *)W(v) + o, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, t));
  }
  char line[160];
  snprintf(line, sizeof line, "k_adamw 3 steps n=%zu%s: p", n,
           o ? " misaligned" : "");
  cmp_range(line, p, o, n, 1e-5);
  snprintf(line, sizeof line, "k_adamw 3 steps n=%zu: m", n);
  cmp_range(line, m, o, n, 1e-5);
  snprintf(line, sizeof line, "k_adamw 3 steps n=%zu: v", n);
  cmp_range(line, v, o, n, 1e-5);
  pair_free(p); pair_free(m); pair_free(v); pair_free(g);
  free(v0);
}

/* k_adamw_mean over ng gradient arrays (a data-parallel step's gathered
 * copies) on both engines. */
static int adamw_mean_both(engine *e, int w, pair p, pair *g, int ng, pair m,
                           pair v, int o, size_t n, long long t) {
  const float *gs[4];
  for (int k = 0; k < ng; k++) gs[k] = (const float *)W(g[k]) + o;
  return k_adamw_mean(e, (float *)W(p) + o, gs, ng, (float *)W(m) + o,
                      (float *)W(v) + o, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f,
                      t);
}

/* which capped AdamW the GPU runs, for the case names */
static const char *adamw_form = "";

static void adamw_mean_case(size_t n, int ng, int misalign, int cap) {
  int o = misalign;
  /* The cap is a context: views of both engines with adamw_blocks = cap. */
  eng_ctx ctx = {NULL, 0, cap};
  engine *view[2] = {NULL, NULL};
  if (eng_view(CPU, &ctx, &view[0]) < 0 || eng_view(GPU, &ctx, &view[1]) < 0) {
    check(0, "eng_view (adamw_blocks %d): %s", cap, err1());
    err_clear();
    engine_destroy(view[0]);
    return;
  }
  float *v0 = tl_rand(n + o, 1);
  for (size_t i = 0; i < n + o; i++) v0[i] *= v0[i] * 0.01f;   /* v >= 0 */
  pair p = pair_rand(n + o, 1), m = pair_rand(n + o, 0.1f), v = pair_f(v0, n + o);
  pair g[4];
  for (int k = 0; k < ng; k++) g[k] = pair_f(NULL, n + o);
  for (long long t = 1; t <= 3; t++) {
    for (int k = 0; k < ng; k++) {
      float *gh = tl_rand(n + o, 1);
      pair_set(g[k], gh);
      free(gh);
    }
    for (int w = 0; w < 2; w++)
      if (adamw_mean_both(view[w], w, p, g, ng, m, v, o, n, t) < 0) {
        check(0, "k_adamw_mean on a view of the %s engine: %s",
              engine_name(view[w]), err1());
        err_clear();
        t = 3;
        break;
      }
  }
  char line[160];
  char capped[64] = "";
  if (cap) snprintf(capped, sizeof capped, ", %d blocks%s", cap, adamw_form);
  snprintf(line, sizeof line, "k_adamw_mean of %d arrays, 3 steps n=%zu%s%s: p",
           ng, n, o ? " misaligned" : "", capped);
  cmp_range(line, p, o, n, 1e-5);
  snprintf(line, sizeof line, "k_adamw_mean of %d arrays n=%zu: m", ng, n);
  cmp_range(line, m, o, n, 1e-5);
  snprintf(line, sizeof line, "k_adamw_mean of %d arrays n=%zu: v", ng, n);
  cmp_range(line, v, o, n, 1e-5);
  pair_free(p); pair_free(m); pair_free(v);
  for (int k = 0; k < ng; k++) pair_free(g[k]);
  free(v0);
  engine_destroy(view[0]);
  engine_destroy(view[1]);
}

/* After AdamW steps on both engines: p, m and v within 1e-5 of max |cpu|,
 * and the GPU's bf16 copy `low` of p equal to its p rounded, bit for bit
 * (refreshed by the same pass). */
static void adamw_low_result(const char *line, const char *steps, pair p,
                             pair m, pair v, const void *low, size_t n) {
  char what[240];
  snprintf(what, sizeof what, "%s%s: p", line, steps);
  cmp(what, p, 1e-5);
  snprintf(what, sizeof what, "%s: m", line);
  cmp(what, m, 1e-5);
  snprintf(what, sizeof what, "%s: v", line);
  cmp(what, v, 1e-5);
  float *pg = down(GPU, p.g, n * 4);
  uint16_t *lo = down(GPU, low, n * 2);
  size_t diff = 0;
  for (size_t i = 0; i < n; i++) {
    float r = pg[i];
    round_bf16(&r, 1);
    uint32_t u;
    memcpy(&u, &r, 4);
    diff += lo[i] != (uint16_t)(u >> 16);
  }
  check(diff == 0, "%s: the bf16 copy is p rounded (%zu of %zu differ)",
        line, diff, n);
  free(pg);
  free(lo);
}

/* k_adamw_ex (the fused path's AdamW writing p's bf16 copy): three steps
 * uncapped against the CPU engine's k_adamw (p, m, v within 1e-5), the
 * copy p rounded bit for bit; the same steps capped at `cap` blocks (on
 * Hopper the bulk-copy form, with an fp32 gradient) from the same start
 * give the same bits in p, m, v and the copy. gt: the gradient's dtype on
 * the GPU (bf16: model_options.grad_lt's; the CPU's fp32 gradient holds
 * the same values); shift 1: the 16-bit gradient one element past an
 * aligned address (the element-wise loop). */
static void adamw_ex_case(size_t n, int cap, dtype gt, int shift) {
  float *v0 = tl_rand(n, 1);
  for (size_t i = 0; i < n; i++) v0[i] *= v0[i] * 0.01f;   /* v >= 0 */
  float *p0 = tl_rand(n, 1), *m0 = tl_rand(n, 0.1f);
  pair p = pair_f(p0, n), m = pair_f(m0, n), v = pair_f(v0, n), g = pair_f(NULL, n);
  eng_ctx ctx = {NULL, 0, cap};
  engine *view = NULL;
  float *bp = NULL, *bm = NULL, *bv = NULL;
  void *la = NULL, *lb = NULL;
  if (eng_view(GPU, &ctx, &view) < 0 ||
      eng_alloc(GPU, n * 4, "test", (void **)&bp) < 0 ||
      eng_alloc(GPU, n * 4, "test", (void **)&bm) < 0 ||
      eng_alloc(GPU, n * 4, "test", (void **)&bv) < 0 ||
      eng_alloc(GPU, n * 2, "test", &la) < 0 ||
      eng_alloc(GPU, n * 2, "test", &lb) < 0 ||
      eng_upload(GPU, bp, p0, n * 4) < 0 || eng_upload(GPU, bm, m0, n * 4) < 0 ||
      eng_upload(GPU, bv, v0, n * 4) < 0)
    hard_fail("adamw_ex buffers");
  void *g16 = NULL;   /* the GPU's 16-bit gradient */
  if (gt != DT_F32 && eng_alloc(GPU, (n + 1) * 2, "test", &g16) < 0)
    hard_fail("adamw_ex 16-bit gradient");
  void *g16s = g16 ? (char *)g16 + 2 * shift : NULL;
  float *sdev = NULL;
  if (eng_alloc(GPU, sizeof *sdev, "test", (void **)&sdev) < 0)
    hard_fail("adamw_ex step size");
  const void *gg = gt == DT_F32 ? g.g : g16s;
  char line[160];
  snprintf(line, sizeof line, "k_adamw_ex bf16 n=%zu, %s gradient%s, %d "
           "blocks%s", n, dtype_name(gt), shift ? " (unaligned)" : "", cap,
           adamw_form);
  int rc = 0;
  for (long long t = 1; t <= 3 && rc == 0; t++) {
    float *gh = tl_rand(n, 1);
    if (gt != DT_F32) round_bf16(gh, n);
    pair_set(g, gh);
    free(gh);
    if (gt != DT_F32) rc = k_cast(GPU, g.g, DT_F32, g16s, gt, n);   /* exact */
    if (rc == 0)
      rc = k_adamw(CPU, p.c, g.c, m.c, v.c, n, 1e-2f, 0.9f, 0.999f, 1e-8f,
                   0.01f, t);
    if (rc == 0)
      rc = k_adamw_ex(GPU, p.g, la, DT_BF16, gg, gt, m.g, v.g, n, 1e-2f,
                      0.9f, 0.999f, 1e-8f, 0.01f, t, NULL);
    /* the capped form reads its step size from engine memory (step_dev),
     * given with step 1's t throughout: the kernels must not use t */
    float sd = k_adamw_step_size(1e-2f, 0.9f, 0.999f, t);
    if (rc == 0) rc = eng_upload(GPU, sdev, &sd, sizeof sd);
    if (rc == 0)
      rc = k_adamw_ex(view, bp, lb, DT_BF16, gg, gt, bm, bv, n, 1e-2f, 0.9f,
                      0.999f, 1e-8f, 0.01f, 1, sdev);
  }
  if (rc < 0) {
    check(0, "%s: %s", line, err1());
    err_clear();
  } else {
    char unc[200];
    snprintf(unc, sizeof unc, "%s uncapped", line);
    adamw_low_result(unc, ", 3 steps", p, m, v, la, n);
    const void *a[4] = {p.g, m.g, v.g, la}, *b[4] = {bp, bm, bv, lb};
    static const char *names[4] = {"p", "m", "v", "the bf16 copy"};
    for (int k = 0; k < 4; k++) {
      size_t bytes = n * (k < 3 ? 4 : 2);
      unsigned char *x = down(GPU, a[k], bytes), *y = down(GPU, b[k], bytes);
      check(memcmp(x, y, bytes) == 0, "%s: %s the same bits as uncapped "
            "(its step size from step_dev)", line, names[k]);
      free(x);
      free(y);
    }
  }
  eng_free(GPU, bp); eng_free(GPU, bm); eng_free(GPU, bv);
  eng_free(GPU, la); eng_free(GPU, lb);
  if (g16) eng_free(GPU, g16);
  eng_free(GPU, sdev);
  engine_destroy(view);
  pair_free(p); pair_free(m); pair_free(v); pair_free(g);
  free(p0); free(m0); free(v0);
}

static void add_scale_case(size_t n, int misalign) {
  int o = misalign;
  pair a = pair_rand(n + o, 1), b = pair_rand(n + o, 1), out = pair_f(NULL, n + o);
  char line[160];
  BOTH(k_add(e, (float *)W(a) + o, (float *)W(b) + o, (float *)W(out) + o, n));
  snprintf(line, sizeof line, "k_add n=%zu%s", n, o ? " misaligned" : "");
  same(line, out);
  BOTH(k_add(e, (float *)W(a) + o, (float *)W(b) + o, (float *)W(a) + o, n));
  snprintf(line, sizeof line, "k_add n=%zu in place (out = a)", n);
  same(line, a);
  BOTH(k_scale(e, (float *)W(b) + o, -0.37f, n));
  snprintf(line, sizeof line, "k_scale n=%zu%s", n, o ? " misaligned" : "");
  same(line, b);
  pair_free(a); pair_free(b); pair_free(out);
}

/* Casting n values of st to dt on both engines: the same bits. From
 * element o of both buffers (o = 1: neither 16-byte aligned, the GPU's
 * element-by-element path; o = 0 and n % 4: the four-a-thread path and its
 * tail). */
static void cast_case(const char *what, const void *src, dtype st, dtype dt,
                      size_t n, size_t o) {
  pair s = pair_new(src, (n + o) * dtype_size(st));
  pair d = pair_new(NULL, ((n + o) * dtype_size(dt) + 3) / 4 * 4);  /* whole words */
  BOTH(k_cast(e, (char *)W(s) + o * dtype_size(st), st,
              (char *)W(d) + o * dtype_size(dt), dt, n));
  char line[200];
  snprintf(line, sizeof line, "k_cast %s -> %s: %s (n=%zu%s)", dtype_name(st),
           dtype_name(dt), what, n, o ? ", misaligned" : "");
  same(line, d);
  pair_free(s); pair_free(d);
}

#ifdef HAVE_CUDA
/* Two GPU buffers bit for bit (the base's and a view's results). */
static void same_gpu(const char *what, const void *x, const void *y,
                     size_t bytes) {
  unsigned char *a = down(GPU, x, bytes), *b = down(GPU, y, bytes);
  check(memcmp(a, b, bytes) == 0, "%s: bit for bit", what);
  free(a);
  free(b);
}

/* eng_side_view and eng_wait_for: a side view runs on a stream of its own;
 * x *= 2 on the base, then (ordered after it) x += ones on the side view,
 * then (ordered after that) x *= 3 on the base give 3 (2 x + 1), as the
 * CPU engine computes it in that order, on 16M elements so an unordered
 * kernel would overlap. */
static void test_side_view(void) {
  const size_t n = (size_t)1 << 24;
  pair x = pair_rand(n, 1), one = pair_rand(n, 1);
  engine *side = NULL;
  if (eng_side_view(GPU, 0, &side) < 0) hard_fail("eng_side_view");
  check(eng_stream(side) != NULL && eng_stream(side) != eng_stream(GPU),
        "a side view has a stream of its own");
  if (k_scale(GPU, x.g, 2.0f, n) < 0 || eng_wait_for(side, GPU) < 0 ||
      k_add(side, x.g, one.g, x.g, n) < 0 || eng_wait_for(GPU, side) < 0 ||
      k_scale(GPU, x.g, 3.0f, n) < 0 || eng_sync(GPU) < 0)
    hard_fail("ordered work on two streams");
  if (k_scale(CPU, x.c, 2.0f, n) < 0 || k_add(CPU, x.c, one.c, x.c, n) < 0 ||
      k_scale(CPU, x.c, 3.0f, n) < 0)
    hard_fail("cpu reference");
  same("x *= 2; x += 1 (side stream, after it); x *= 3 (after that)", x);
  engine_destroy(side);
  pair_free(x);
  pair_free(one);
}

/* eng_monitor (the clock and power monitor, NVML): over ~0.2 s of
 * kernels it takes readings whose clock, power and power-capped share are
 * in range; a second monitor while one runs, an end without a begin and
 * the cpu engine's monitor fail, saying why. */
static void test_monitor(void) {
  eng_monitor mon;
  int rc = eng_monitor_begin(CPU);
  check(rc < 0 && strstr(err_msg(), "no clock and power monitor"),
        "the cpu engine has no monitor, saying so: %s", rc < 0 ? err1() : "no");
  err_clear();
  check(eng_monitor_end(GPU, &mon) < 0 && strstr(err_msg(), "no eng_monitor_begin"),
        "eng_monitor_end without a begin fails");
  err_clear();
  if (eng_monitor_begin(GPU) < 0) {   /* no NVML: a failed check, said */
    check(0, "eng_monitor_begin: %s", err1());
    err_clear();
    return;
  }
  check(eng_monitor_begin(GPU) < 0 && strstr(err_msg(), "a monitor is running"),
        "a second monitor fails while one runs");
  err_clear();
  pair a = pair_rand(1 << 22, 1);
  double t0 = clock_now_s();
  while (clock_now_s() - t0 < 0.2) {
    for (int i = 0; i < 50; i++)
      if (k_scale(GPU, a.g, 1.0f, 1 << 22) < 0) hard_fail("k_scale");
    if (eng_sync(GPU) < 0) hard_fail("eng_sync");
  }
  if (eng_monitor_end(GPU, &mon) < 0) hard_fail("eng_monitor_end");
  check(mon.samples >= 5 && mon.sm_mhz > 100 && mon.sm_mhz < 5000 &&
            mon.power_w > 1 && mon.power_w < 5000 && mon.power_capped >= 0 &&
            mon.power_capped <= 1,
        "%ld readings over 0.2 s of kernels: %.0f MHz, %.0f W, %.2f of them "
        "power-capped", mon.samples, mon.sm_mhz, mon.power_w, mon.power_capped);
  pair_free(a);
}

/* eng_kprof (the kernel-level profile, CUPTI): three scales inside a named
 * range and one more outside it come back as one entry per (range,
 * kernel), with the calls counted and a positive GPU time; the scale's
 * name is demangled to its function, and a kernel in an anonymous
 * namespace (k_matmul_adamw's plain form) keeps its name. The time line:
 * the kernels, one after another on one stream, kept the GPU busy for
 * their summed time, within their span; the host's CUDA calls are named
 * with their time. Skipped (with a note) in a build
 * without CUPTI, where eng_kprof_begin must fail saying so. */
static void test_kprof(void) {
  pair a = pair_rand(4099, 1);
  eng_kernel_stat *st = NULL;
  int n = 0;
  if (no_kprof) {
    printf("kernel profile not tested (--no-kprof)\n");
    pair_free(a);
    return;
  }
  int rc = eng_kprof_begin(GPU);
#ifndef HAVE_CUPTI
  check(rc < 0 && strstr(err_msg(), "without CUPTI"),
        "eng_kprof_begin fails without CUPTI, saying so");
  pair_free(a);
  return;
#endif
  if (rc < 0) {   /* a failed check, not an exit: the later cases still run */
    check(0, "eng_kprof_begin: %s", err1());
    err_clear();
    pair_free(a);
    return;
  }
  if (eng_range_push(GPU, "three.scales") < 0) hard_fail("eng_range_push");
  for (int i = 0; i < 3; i++)
    if (k_scale(GPU, a.g, 1.0f, 4099) < 0) hard_fail("k_scale");
  if (eng_range_pop(GPU) < 0) hard_fail("eng_range_pop");
  if (k_scale(GPU, a.g, 1.0f, 4099) < 0) hard_fail("k_scale");
  /* p, m, v from a's first 3 x 1024 floats (v's NaN after a negative
   * square root does not matter here) */
  if (k_matmul_adamw(GPU, 32, 32, 0, NULL, 32, NULL, 32, DT_BF16, a.g, NULL,
                     (float *)a.g + 1024, (float *)a.g + 2048, 1e-3f, 0.9f,
                     0.999f, 1e-8f, 0.0f, 1) < 0)
    hard_fail("k_matmul_adamw");
  check(eng_profiling(GPU), "eng_profiling is 1 during a kernel profile");
  eng_kprof_time tm;
  if (eng_kprof_end(GPU, &st, &n, &tm) < 0) hard_fail("eng_kprof_end");
  double sum = 0;
  int named = 1, anon = 0;
  for (int i = 0; i < n; i++) {
    sum += st[i].total_ms;
    named &= st[i].name[0] != '\0';
    anon |= strstr(st[i].name, "(anonymous namespace)::mm_adamw") == st[i].name;
  }
  check(named && anon, "every kernel named, one in an anonymous namespace "
        "too (%d entries)", n);
  check(tm.busy_ms > 0 && tm.busy_ms <= tm.span_ms &&
            fabs(tm.busy_ms - sum) <= 1e-6 * sum + 1e-9,
        "one stream: busy %.6f ms = the kernels' %.6f ms, within their span "
        "of %.6f ms", tm.busy_ms, sum, tm.span_ms);
  check(strncmp(tm.host_api, "cu", 2) == 0 && strstr(tm.host_api, " ms x"),
        "the host's CUDA calls named with their time (%s)",
        tm.host_api);
  int in = -1, out = -1;
  for (int i = 0; i < n; i++) {
    if (strstr(st[i].name, "scale_k") && strcmp(st[i].range, "three.scales") == 0) in = i;
    if (strstr(st[i].name, "scale_k") && st[i].range[0] == '\0') out = i;
  }
  check(in >= 0 && st[in].calls == 3 && st[in].total_ms > 0,
        "three scales in their range: %ld calls, %.4f ms", in >= 0 ? st[in].calls : 0L,
        in >= 0 ? st[in].total_ms : 0.0);
  check(out >= 0 && st[out].calls == 1, "one scale outside any range");
  check(in < 0 || strchr(st[in].name, '(') == NULL,
        "kernel names without parameter lists (%s)", in >= 0 ? st[in].name : "-");
  check(!eng_profiling(GPU), "eng_profiling is 0 after it");
  free(st);
  st = NULL;
  check(eng_kprof_end(GPU, &st, &n, NULL) < 0 && st == NULL && n == 0,
        "an end without a begin fails");
  pair_free(a);
}

/* eng_view: a view with its own stream, 2 SMs reserved and AdamW capped at
 * 8 blocks gives the base's numbers (bit for bit where the base is exact
 * or the same kernel runs: scale, AdamW; products within fp32's tolerance
 * of the CPU engine, as the SM target may pick another algorithm), its
 * memory counts in the base, and using it changes nothing the base runs
 * with: its context, its stream, and the shared cuBLAS handle's stream and
 * SM target once the base calls cuBLAS again. */
static void test_view(void) {
  const int m = 37, n = 29, k = 53;
  const size_t na = 4099;
  cudaStream_t side;
  if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess)
    hard_fail("cudaStreamCreate");
  void *own = eng_stream(GPU);
  engine *v = NULL;
  eng_ctx ctx = {(void *)side, 2, 8};
  if (eng_sync(GPU) < 0 || eng_view(GPU, &ctx, &v) < 0) hard_fail("eng_view");
  check(eng_stream(v) == (void *)side && eng_stream(GPU) == own,
        "a view runs on its context's stream; the base on its own");
  size_t total = 0;
  int mrc = eng_mem_total(GPU, &total);
  check(mrc == 0 && total >= ((size_t)1 << 30) &&
            total > eng_bytes_in_use(GPU),
        "eng_mem_total: the GPU's memory, %zu bytes, above 1 GiB and above the "
        "%zu bytes this engine holds", total, eng_bytes_in_use(GPU));
  size_t vtotal = 0;
  mrc = eng_mem_total(v, &vtotal);
  check(mrc == 0 && vtotal == total,
        "eng_mem_total of a view is its base's (%zu, %zu)", vtotal, total);
  size_t before = eng_bytes_in_use(GPU);
  void *blk;
  if (eng_alloc(v, 1 << 20, "test", &blk) < 0) hard_fail("eng_alloc (view)");
  check(eng_bytes_in_use(GPU) == before + (1 << 20),
        "eng_alloc through a view counts in the base");
  eng_free(v, blk);

  float *ha = tl_rand(na, 1), *hg = tl_rand(na, 0.1f);
  pair a0 = pair_f(ha, na), a1 = pair_f(ha, na);          /* scale */
  pair p0 = pair_f(ha, na), p1 = pair_f(ha, na);          /* AdamW */
  pair m0 = pair_f(hg, na), m1 = pair_f(hg, na), g = pair_f(hg, na);
  pair v0 = pair_f(NULL, na), v1 = pair_f(NULL, na);
  for (size_t i = 0; i < na; i++) hg[i] *= hg[i];         /* v >= 0 */
  pair_set(v0, hg);
  pair_set(v1, hg);
  pair A = pair_rand((size_t)m * k, 1), B = pair_rand((size_t)k * n, 1);
  pair C = pair_f(NULL, (size_t)m * n), Cx = pair_f(NULL, (size_t)m * n);
  const float *gg = g.g;
  int rc = k_scale(GPU, a0.g, -1.5f, na);
  if (rc == 0) rc = k_scale(v, a1.g, -1.5f, na);
  if (rc == 0)
    rc = k_adamw_mean(GPU, p0.g, &gg, 1, m0.g, v0.g, na, 1e-2f, 0.9f, 0.999f,
                      1e-8f, 0.01f, 1);
  if (rc == 0)
    rc = k_adamw_mean(v, p1.g, &gg, 1, m1.g, v1.g, na, 1e-2f, 0.9f, 0.999f,
                      1e-8f, 0.01f, 1);
  if (rc == 0)
    rc = k_matmul(v, 0, 0, m, n, k, 1.0f, A.g, k, B.g, n, 0.0f, C.g, n,
                  DT_F32);
  if (rc == 0)
    rc = k_matmul_ex(v, 0, 0, m, n, k, 1.0f, A.g, k, B.g, n, DT_F32, 0.0f,
                     Cx.g, n, DT_F32, F32_EXACT);
  if (rc == 0) rc = eng_sync(v);
  check(rc == 0, "a scale, AdamW capped at 8 blocks, a cuBLAS and a cuBLASLt "
        "product on the view (%s)", rc ? err1() : "ok");
  err_clear();
  if (k_matmul(CPU, 0, 0, m, n, k, 1.0f, A.c, k, B.c, n, 0.0f, C.c, n,
               DT_F32) < 0 ||
      k_matmul(CPU, 0, 0, m, n, k, 1.0f, A.c, k, B.c, n, 0.0f, Cx.c, n,
               DT_F32) < 0)
    hard_fail("cpu reference");
  same_gpu("k_scale on a view == on the base", a0.g, a1.g, na * 4);
  same_gpu("capped k_adamw_mean on a view == uncapped on the base: p", p0.g,
           p1.g, na * 4);
  same_gpu("capped k_adamw_mean on a view == uncapped on the base: v", v0.g,
           v1.g, na * 4);
  cmp("k_matmul f32 on a view (cuBLAS on its stream, 2 SMs reserved)", C,
      1e-5);
  cmp("k_matmul_ex f32 on a view (cuBLASLt, 2 SMs reserved)", Cx, 1e-5);

  /* The base after the view: its context untouched, and its next product
   * binds the shared handle back to its stream and every SM. */
  check(GPU->ctx.stream == NULL && GPU->ctx.sm_reserve == 0 &&
        GPU->ctx.adamw_blocks == 0 && eng_stream(GPU) == own,
        "the base's context is unchanged by its view's calls");
  rc = k_matmul(GPU, 0, 0, m, n, k, 1.0f, A.g, k, B.g, n, 0.0f, C.g, n,
                DT_F32);
  cudaStream_t bound = NULL;
  int target = -1;
  cublasHandle_t h = cuda_impl(GPU)->blas;
  /* Queried before the check: its arguments' order of evaluation is open. */
  int queried =
      rc == 0 &&
      tl_cublas.cublasGetStream(h, &bound) == CUBLAS_STATUS_SUCCESS &&
      tl_cublas.cublasGetSmCountTarget(h, &target) == CUBLAS_STATUS_SUCCESS;
  check(queried && bound == (cudaStream_t)own && target == 0,
        "a product on the base after the view runs on the base's stream "
        "with every SM (cuBLAS SM target %d)", target);
  cmp("k_matmul f32 on the base after the view", C, 1e-5);

  /* The materialised attention's products (cuBLAS, batched over heads)
   * bind the handle to the view's stream and SM target too, rather than
   * run on whatever stream it was last bound to (the base's, just now). */
  const int bh = 3, t = 19, dh = 16;
  const size_t nqkv = (size_t)bh * t * dh;
  pair q = pair_rand(nqkv, 1), kk = pair_rand(nqkv, 1), vv = pair_rand(nqkv, 1);
  pair o = pair_f(NULL, nqkv), lse = pair_f(NULL, (size_t)bh * t),
       P = pair_f(NULL, (size_t)bh * t * t);
  float sc = 0.25f;
  rc = k_attention_fwd(v, ATTN_MATERIALIZED, q.g, kk.g, vv.g, o.g, lse.g, P.g,
                       bh, t, t, dh, 1, sc, DT_F32);
  bound = NULL;
  target = -1;
  queried =
      rc == 0 && eng_sync(v) == 0 &&
      tl_cublas.cublasGetStream(h, &bound) == CUBLAS_STATUS_SUCCESS &&
      tl_cublas.cublasGetSmCountTarget(h, &target) == CUBLAS_STATUS_SUCCESS;
  check(queried && bound == side && target == cuda_impl(GPU)->sms - 2,
        "materialised attention on the view runs its products on the view's "
        "stream with its SMs (cuBLAS SM target %d of %d)", target,
        cuda_impl(GPU)->sms);
  if (k_attention_fwd(CPU, ATTN_MATERIALIZED, q.c, kk.c, vv.c, o.c, lse.c,
                      P.c, bh, t, t, dh, 1, sc, DT_F32) < 0)
    hard_fail("cpu reference (attention)");
  cmp("materialised attention on a view: o", o, 1e-5);
  cmp("materialised attention on a view: P", P, 1e-5);
  cmp("materialised attention on a view: lse", lse, 1e-5);
  pair_free(q); pair_free(kk); pair_free(vv); pair_free(o); pair_free(lse);
  pair_free(P);

  eng_ctx all = {NULL, cuda_impl(GPU)->sms, 0};
  engine *out = v;
  rc = eng_view(GPU, &all, &out);
  check(rc == ERR_FAIL && out == NULL && strstr(err1(), "cannot reserve"),
        "a view reserving every SM is refused (%s)", err1());
  err_clear();
  rc = eng_graph_begin(v);
  check(rc == ERR_FAIL && strstr(err1(), "on a view"),
        "a view cannot record a CUDA graph (%s)", err1());
  err_clear();
  engine_destroy(v);
  pair_free(a0); pair_free(a1); pair_free(p0); pair_free(p1);
  pair_free(m0); pair_free(m1); pair_free(g); pair_free(v0); pair_free(v1);
  pair_free(A); pair_free(B); pair_free(C); pair_free(Cx);
  free(ha); free(hg);
  if (cudaStreamDestroy(side) != cudaSuccess) hard_fail("cudaStreamDestroy");
}
#endif

/* eng_copy on the stream: device to device, every byte. */
static void test_copy(void) {
  size_t n = ((size_t)1 << 20) + 5;
  pair a = pair_rand(n, 3), b = pair_f(NULL, n);
  BOTH(eng_copy(e, w ? b.g : b.c, w ? a.g : a.c, n * sizeof(float)));
  same("eng_copy of 2^20 + 5 floats", b);
  pair_free(a); pair_free(b);
}

/* k_matmul_adamw: dy [k, rows] and x [k, cols] (row strides padded by
 * `pad`) hold bf16 values, as fp32 on the CPU engine (its product then its
 * AdamW, the reference) and as bf16 on the GPU; p, m, v random; two steps.
 * p, m, v within 1e-5 of max |cpu| (g's fp32 sum over k in another order
 * moves it by ~1e-7 of its magnitude); the GPU's bf16 copy equal to its
 * own p rounded, bit for bit (refreshed by the same pass). */
static void matmul_adamw_case(int rows, int cols, int k, int pad) {
  int ldy = rows + pad, ldx = cols + pad;
  size_t ny = (size_t)k * ldy, nx = (size_t)k * ldx, n = (size_t)rows * cols;
  float *hy = tl_rand(ny, 1), *hx = tl_rand(nx, 1);
  round_bf16(hy, ny);
  round_bf16(hx, nx);
  float *v0 = tl_rand(n, 1);
  for (size_t i = 0; i < n; i++) v0[i] *= v0[i];   /* v >= 0 */
  pair y = pair_f(hy, ny), x = pair_f(hx, nx), v = pair_f(v0, n);
  pair p = pair_rand(n, 1), m = pair_rand(n, 1);
  void *yb = NULL, *xb = NULL, *pl = NULL;
  if (eng_alloc(GPU, ny * 2, "test", &yb) < 0 ||
      eng_alloc(GPU, nx * 2, "test", &xb) < 0 ||
      eng_alloc(GPU, n * 2, "test", &pl) < 0 ||
      k_cast(GPU, y.g, DT_F32, yb, DT_BF16, ny) < 0 ||
      k_cast(GPU, x.g, DT_F32, xb, DT_BF16, nx) < 0)
    hard_fail("bf16 operands");
  char line[200];
  snprintf(line, sizeof line, "k_matmul_adamw bf16 rows=%d cols=%d k=%d pad=%d%s",
           rows, cols, k, pad, adamw_form);
  int rc = 0;
  for (long long t = 1; t <= 2 && rc == 0; t++) {
    rc = k_matmul_adamw(CPU, rows, cols, k, y.c, ldy, x.c, ldx, DT_F32, p.c,
                        NULL, m.c, v.c, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
    if (rc == 0)
      rc = k_matmul_adamw(GPU, rows, cols, k, yb, ldy, xb, ldx, DT_BF16, p.g,
                          pl, m.g, v.g, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
  }
  if (rc < 0) {
    check(0, "%s: %s", line, err1());
    err_clear();
  } else {
    adamw_low_result(line, ", 2 steps", p, m, v, pl, n);
  }
  eng_free(GPU, yb); eng_free(GPU, xb); eng_free(GPU, pl);
  pair_free(y); pair_free(x); pair_free(v); pair_free(p); pair_free(m);
  free(hy); free(hx); free(v0);
}

static void test_matmul_adamw(void) {
  /* edges in every direction (partial tiles of 128 and k slices of 64,
   * TMA's zero fill), padded strides; cols not a multiple of 4 and k = 0
   * take the plain kernel */
  matmul_adamw_case(200, 328, 300, 8);
  matmul_adamw_case(64, 64, 64, 0);
  matmul_adamw_case(72, 330, 70, 0);
  matmul_adamw_case(77, 51, 33, 3);
  matmul_adamw_case(40, 24, 0, 0);
  /* several waves of tiles, and a k of one and a half slices */
  matmul_adamw_case(8200, 1024, 96, 8);
  if (!small_only) {
    matmul_adamw_case(768, 3072, 2048, 0);
    matmul_adamw_case(2560, 2560, 2048, 0);
  }
#ifdef HAVE_CUDA
  int hopper = cuda_impl(GPU)->wgmma;
  if (hopper) {
    cuda_impl(GPU)->wgmma = 0;
    adamw_form = " (plain kernel)";
    matmul_adamw_case(200, 328, 300, 8);
    cuda_impl(GPU)->wgmma = hopper;
    adamw_form = "";
  }
#endif
}

static void test_adamw_elementwise(void) {
  adamw_case(1001, 0);
  adamw_case(1003, 1);
  adamw_mean_case(1001, 2, 0, 0);
  adamw_mean_case(1003, 3, 1, 0);
  adamw_mean_case(4099, 4, 0, 0);
  /* capped (DDP's grad_sync peer; bulk copies on Hopper): several chunks
   * per block so every stage is reused, a partial last chunk and a tail of
   * n mod 4; misaligned falls back to the plain kernel */
  adamw_mean_case(((size_t)1 << 18) + 7, 2, 0, 3);
  adamw_mean_case(((size_t)1 << 14) + 1, 2, 0, 1);
  adamw_mean_case(4099, 2, 1, 2);
  adamw_mean_case(4099, 2, 0, 2);
  adamw_mean_case(((size_t)1 << 16) + 5, 3, 0, 4);
  /* adamw_ex capped: several chunks a block, a partial last chunk and a
   * tail of n mod 4; fewer chunks than blocks */
  adamw_ex_case(((size_t)1 << 18) + 7, 3, DT_F32, 0);
  adamw_ex_case(4099, 2, DT_F32, 0);
  adamw_ex_case(1001, 16, DT_F32, 0);
  /* a bf16 gradient (grad_lt): uncapped and capped (the register form on
   * every GPU), a tail of n mod 4 */
  adamw_ex_case(((size_t)1 << 18) + 7, 3, DT_BF16, 0);
  adamw_ex_case(1001, 16, DT_BF16, 0);
  adamw_ex_case(4099, 2, DT_BF16, 1);
#ifdef HAVE_CUDA
  /* on Hopper, once more with the register-unrolled form other GPUs use */
  int hopper = cuda_impl(GPU)->wgmma;
  if (hopper) {
    cuda_impl(GPU)->wgmma = 0;
    adamw_form = " (register form)";
    adamw_mean_case(((size_t)1 << 18) + 7, 2, 0, 3);
    adamw_mean_case(((size_t)1 << 16) + 5, 3, 0, 4);
    adamw_ex_case(((size_t)1 << 18) + 7, 3, DT_F32, 0);
    cuda_impl(GPU)->wgmma = hopper;
    adamw_form = "";
  }
#endif
  add_scale_case(1001, 0);
  add_scale_case(1001, 1);
  if (!small_only) {
    adamw_case(((size_t)1 << 22) + 3, 0);
    add_scale_case(((size_t)1 << 22) + 3, 0);
  }

  enum { ALL = 65536 };
  uint16_t *h = tl_malloc(ALL * sizeof *h);
  for (int i = 0; i < ALL; i++) h[i] = (uint16_t)i;
  cast_case("all 65536 values", h, DT_BF16, DT_F32, ALL, 0);
  cast_case("all 65536 values", h, DT_F16, DT_F32, ALL, 0);
  cast_case("all 65536 values", h, DT_BF16, DT_F16, ALL, 0);
  cast_case("all 65536 values", h, DT_F16, DT_BF16, ALL, 0);
  /* Narrowing: every sign/exponent/top-mantissa pattern with low bits at
   * and around both formats' rounding points (ties included), then random
   * bit patterns (NaN payloads, subnormals, everything). */
  static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001,
                                  0x1fff, 0x2000, 0x7fff, 0x8000, 0x8001,
                                  0xffff};
  size_t nl = sizeof lows / sizeof lows[0], n1 = (size_t)ALL * nl;
  uint32_t *f = tl_malloc(n1 * sizeof *f);
  for (size_t i = 0; i < (size_t)ALL; i++)
    for (size_t l = 0; l < nl; l++) f[i * nl + l] = (uint32_t)(i << 16) | lows[l];
  cast_case("every top 16 bits x 11 low patterns", f, DT_F32, DT_BF16, n1, 0);
  cast_case("every top 16 bits x 11 low patterns", f, DT_F32, DT_F16, n1, 0);
  for (size_t i = 0; i < n1; i++) f[i] = (uint32_t)next_u64();
  cast_case("random bit patterns", f, DT_F32, DT_BF16, n1, 0);
  cast_case("random bit patterns", f, DT_F32, DT_F16, n1, 0);
  cast_case("random bit patterns", f, DT_F32, DT_BF16, n1 - 4, 1);
  cast_case("random bit patterns", f, DT_F32, DT_F16, n1 - 4, 1);
  cast_case("random bit patterns", f, DT_F32, DT_BF16, n1 - 3, 0);
  cast_case("random bit patterns", f, DT_F32, DT_F16, n1 - 3, 0);
  cast_case("copy", f, DT_F32, DT_F32, 1001, 0);
  free(f);
  free(h);
}

/* ======================================================================= */
/* the GPU                                                                  */
/* ======================================================================= */

/* ======================================================================= */
/* CUDA graphs                                                               */
/* ======================================================================= */

static size_t ws_in_use(void) {
  size_t b = 0;
  return eng_tag_bytes(GPU, "workspace", &b, NULL) == 0 ? b : 0;
}

/* k_rmsnorm_fwd then k_rmsnorm_bwd (which uses the workspace): on the CPU
 * engine directly, on the GPU through graph g (NULL: directly). */
static void rms_pair(eng_graph *g, pair x, pair gain, pair y, pair r,
                     pair dy, pair dx, pair dg, int n, int d) {
  for (int w = 0; w < 2; w++) {
    engine *e = w ? GPU : CPU;
    int rc = w && g ? eng_graph_launch(GPU, g)
                    : k_rmsnorm_fwd(e, W(x), W(gain), W(y), W(r), n, d, 1e-5f);
    if (rc == 0 && !(w && g))
      rc = k_rmsnorm_bwd(e, W(dy), W(x), W(gain), W(r), W(dx), W(dg), n, d);
    if (rc < 0) hard_fail("rms_pair");
  }
}

/* A recording replays its work on the inputs' new values; what cannot be
 * recorded fails with a message and leaves the engine usable; scratch an
 * operation outgrows after a recording is kept (and accounted) for it
 * until the recording is destroyed. */
static void test_graphs(void) {
  const int n = 96, d = 768;
  check(eng_graphs_supported(GPU) && !eng_graphs_supported(CPU),
        "the cuda engine records graphs, the cpu engine does not");
  int rc = eng_graph_begin(CPU);
  check(rc == ERR_FAIL && strstr(err_msg(), "cannot record CUDA graphs"),
        "eng_graph_begin on the cpu engine fails: %s", rc ? err1() : "no");
  err_clear();

  pair x = pair_rand((size_t)n * d, 2), gain = pair_rand(d, 1);
  pair y = pair_f(NULL, (size_t)n * d), r = pair_f(NULL, n);
  pair dy = pair_rand((size_t)n * d, 1), dx = pair_f(NULL, (size_t)n * d);
  pair dg = pair_rand(d, 1);
  rms_pair(NULL, x, gain, y, r, dy, dx, dg, n, d);   /* sizes the workspace */

  if (eng_graph_begin(GPU) < 0) hard_fail("eng_graph_begin");
  check(eng_recording(GPU), "eng_recording is 1 while recording");
  if (k_rmsnorm_fwd(GPU, x.g, gain.g, y.g, r.g, n, d, 1e-5f) < 0 ||
      k_rmsnorm_bwd(GPU, dy.g, x.g, gain.g, r.g, dx.g, dg.g, n, d) < 0)
    hard_fail("recording");
  void *p = NULL;
  for (int i = 0; i < 4; i++) {
    static const char *const what[4] = {"eng_sync", "eng_alloc", "eng_upload",
                                        "eng_profile"};
    rc = i == 0   ? eng_sync(GPU)
         : i == 1 ? eng_alloc(GPU, 256, "test", &p)
         : i == 2 ? eng_upload(GPU, x.g, &p, sizeof p)
                  : eng_profile(GPU, 1);
    check(rc == ERR_FAIL && strstr(err_msg(), "while recording"),
          "%s while recording fails: %s", what[i], rc ? err1() : "it did not");
    err_clear();
  }
  eng_graph *g = NULL;
  rc = eng_graph_end(GPU, &g);
  check(rc == 0 && g && !eng_recording(GPU), "eng_graph_end gives a graph "
        "and ends the recording%s%s", rc ? ": " : "", rc ? err1() : "");
  if (!g) hard_fail("eng_graph_end");
  check(eng_sync(GPU) == 0, "the engine syncs again after the recording");
  check(eng_profile(GPU, 1) == 0 && eng_graph_begin(GPU) == ERR_FAIL,
        "eng_graph_begin while profiling fails");
  err_clear();
  char buf[256];
  if (eng_profile_report(GPU, buf, sizeof buf) < 0) hard_fail("profile");

  /* Replays read the new values (the recording ran nothing itself: dg was
   * accumulated once before it, on both engines). */
  for (int rep = 0; rep < 2; rep++) {
    float *hx = tl_rand((size_t)n * d, 2), *hdy = tl_rand((size_t)n * d, 1);
    pair_set(x, hx);
    pair_set(dy, hdy);
    free(hx);
    free(hdy);
    size_t ws0 = ws_in_use();
    if (rep == 1) {
      /* outgrow the workspace (a 3xTF32 product splits its operands into
       * it, 24 m^2 bytes): the recording's buffer must outlive the growth */
      int m = 1024;
      while (24.0 * m * m < 2.0 * ws0) m += 512;
      void *A, *B, *C;
      if (eng_alloc(GPU, (size_t)m * m * 4, "test", &A) < 0 ||
          eng_alloc(GPU, (size_t)m * m * 4, "test", &B) < 0 ||
          eng_alloc(GPU, (size_t)m * m * 4, "test", &C) < 0 ||
          eng_f32_products(GPU, F32_3XTF32) < 0 ||
          eng_upload(GPU, A, x.c, (size_t)n * d * 4) < 0 ||
          k_matmul(GPU, 0, 1, m, m, m, 1, A, m, B, m, 0, C, m, DT_F32) < 0 ||
          eng_f32_products(GPU, F32_EXACT) < 0 || eng_sync(GPU) < 0)
        hard_fail("growing the workspace");
      eng_free(GPU, A);
      eng_free(GPU, B);
      eng_free(GPU, C);
      check(ws_in_use() > ws0 + ws0 / 2,
            "the grown workspace is accounted beside the recorded one "
            "(%zu bytes, %zu before)", ws_in_use(), ws0);
      ws0 = ws_in_use();
    }
    rms_pair(g, x, gain, y, r, dy, dx, dg, n, d);
    snprintf(buf, sizeof buf, "replay %d%s: k_rmsnorm_fwd y", rep + 1,
             rep ? " after the workspace grew" : "");
    cmp(buf, y, 1e-5);
    snprintf(buf, sizeof buf, "replay %d: k_rmsnorm_bwd dx", rep + 1);
    cmp(buf, dx, 1e-5);
    snprintf(buf, sizeof buf, "replay %d: k_rmsnorm_bwd dg (accumulated)",
             rep + 1);
    cmp(buf, dg, 1e-5);
  }
  size_t before = ws_in_use();
  eng_graph_destroy(GPU, g);
  check(ws_in_use() < before, "destroying the last recording frees the "
        "workspace it kept (%zu -> %zu bytes)", before, ws_in_use());
  pair_free(x); pair_free(gain); pair_free(y); pair_free(r);
  pair_free(dy); pair_free(dx); pair_free(dg);
}

static int device_count(void) {
  int count = 0;
#ifdef HAVE_CUDA
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
#endif
  return count;
}

/* 1 when there is a CUDA build and a GPU (named on stdout); otherwise says
 * why not, for the skip. */
static int gpu_available(void) {
#ifdef HAVE_CUDA
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    printf("SKIP: no GPU (cudaGetDeviceCount: %s, %d devices)\n",
           cudaGetErrorString(rc), count);
    return 0;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    printf("GPU 0: %s, %d multiprocessors, %.1f GiB\n", prop.name,
           prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
  return 1;
#else
  engine *e = NULL;
  int rc = engine_cuda_create(&e, 0);
  printf("SKIP: this build has no CUDA engine (engine_cuda_create: rc %d, "
         "%s)\n", rc, err1());
  return 0;
#endif
}

/* ======================================================================= */
/* memory and the engine                                                    */
/* ======================================================================= */

static int tag_is(const engine *e, const char *name, size_t in_use, size_t peak) {
  size_t u, p;
  return eng_tag_bytes(e, name, &u, &p) == 0 && u == in_use && p == peak;
}

static void test_memory(void) {
  engine *e;
  if (engine_cuda_create(&e, 0) < 0) hard_fail("engine_cuda_create");
  check(strcmp(engine_name(e), "cuda") == 0, "engine_name is \"cuda\"");
  size_t ws_in_use = 0;
  int ws = eng_tag_bytes(e, "workspace.cublas", &ws_in_use, NULL) == 0;
  size_t base = eng_bytes_in_use(e);
  check(ws && ws_in_use == base && base >= ((size_t)4 << 20),
        "a new CUDA engine holds only its cuBLAS workspace, accounted under "
        "\"workspace.cublas\" (%zu bytes)", base);

  void *a, *b, *c, *d, *z;
  if (eng_alloc(e, 1000, "params", &a) < 0 || eng_alloc(e, 3000, "grads", &b) < 0 ||
      eng_alloc(e, 500, "params", &c) < 0)
    hard_fail("eng_alloc");
  check(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 256 == 0,
        "eng_alloc returns 256-byte aligned device memory");
  check(eng_bytes_in_use(e) == base + 4500 && eng_peak_bytes(e) == base + 4500,
        "after 1000 params + 3000 grads + 500 params: in use and peak grow by "
        "4500");
  eng_free(e, b);
  if (eng_alloc(e, 200, "act.attn_scores", &d) < 0) hard_fail("eng_alloc");
  check(eng_bytes_in_use(e) == base + 1700 && eng_peak_bytes(e) == base + 4500,
        "after freeing grads and 200 act: in use base+1700, peak base+4500");
  check(tag_is(e, "params", 1500, 1500) && tag_is(e, "grads", 0, 3000) &&
        tag_is(e, "act.attn_scores", 200, 200),
        "per tag: params 1500/1500, grads 0/3000, act.attn_scores 200/200");
  eng_reset_peak(e);
  check(eng_peak_bytes(e) == base + 1700 && tag_is(e, "grads", 0, 0),
        "eng_reset_peak: peak = in use, per tag too");
  if (eng_alloc(e, 0, "empty", &z) < 0) hard_fail("eng_alloc 0");
  check(z != NULL && eng_bytes_in_use(e) == base + 1700,
        "a 0-byte allocation is a real pointer and counts 0 bytes");
  eng_free(e, z);

  /* Far more than the GPU has: ERR_OOM with a message, nothing recorded,
   * and the engine still works afterwards. */
  void *huge = (void *)1;
  int rc = eng_alloc(e, (size_t)1 << 50, "act.huge", &huge);
  check(rc == ERR_OOM && huge == NULL &&
        strstr(err_msg(), "1125899906842624 bytes") &&
        strstr(err_msg(), "act.huge") && strstr(err_msg(), "GiB free of") &&
        eng_bytes_in_use(e) == base + 1700,
        "eng_alloc of 1 PiB: ERR_OOM naming bytes, tag and free memory (%s)",
        err1());
  err_clear();
  rc = eng_alloc(e, SIZE_MAX, "act.huge", &huge);
  check(rc == ERR_OOM, "eng_alloc of SIZE_MAX bytes: ERR_OOM (%s)", err1());
  err_clear();
  float hv[5] = {1, 2, 3, 4, 5}, back[5];
  int ok = eng_upload(e, c, hv, sizeof hv) == 0 && k_scale(e, c, 2.0f, 5) == 0 &&
           eng_sync(e) == 0 && eng_download(e, back, c, sizeof back) == 0 &&
           back[0] == 2 && back[4] == 10;
  check(ok, "after the failed allocations the engine still runs kernels "
        "(upload, k_scale, sync, download)");
  err_clear();
  eng_memset0(e, c, sizeof hv);
  eng_download(e, back, c, sizeof back);
  check(back[0] == 0 && back[4] == 0, "eng_memset0 zeroes");

  /* A bf16 product takes scratch memory, accounted as "workspace". */
  float *A, *C;
  if (eng_alloc(e, 64 * 64 * 4, "test", (void **)&A) < 0 ||
      eng_alloc(e, 64 * 64 * 4, "test", (void **)&C) < 0)
    hard_fail("eng_alloc");
  eng_memset0(e, A, 64 * 64 * 4);
  rc = k_matmul(e, 0, 1, 64, 64, 64, 1, A, 64, A, 64, 0, C, 64, DT_BF16);
  size_t sw_in_use = 0;
  int sw = eng_tag_bytes(e, "workspace", &sw_in_use, NULL) == 0;
  check(rc == 0 && eng_sync(e) == 0 && sw && sw_in_use > 0,
        "a bf16 product's operands are packed in the engine's \"workspace\" "
        "(%zu bytes)", sw_in_use);
  eng_free(e, A);
  eng_free(e, C);
  eng_free(e, c);
  eng_free(e, d);
  /* engine_destroy frees what is left (here a and the workspaces). */
  engine_destroy(e);
  check(1, "engine_destroy with live allocations");

  rc = engine_cuda_create(&e, device_count());
  check(rc == ERR_FAIL && e == NULL && strstr(err_msg(), "no GPU"),
        "engine_cuda_create on a device that does not exist fails (%s)",
        err1());
  err_clear();
}

/* ======================================================================= */
/* timings (--bench)                                                        */
/* ======================================================================= */

/* ms per call of `call` on the GPU: 3 warm-up calls, then reps calls
 * between two syncs. */
#define TIME(ms, reps, call)                                                 \
  do {                                                                       \
    for (int i_ = 0; i_ < 3; i_++) if ((call) < 0) hard_fail(#call);         \
    if (eng_sync(GPU) < 0) hard_fail("sync");                                \
    double t0_ = clock_now_s();                                              \
    for (int i_ = 0; i_ < (reps); i_++) if ((call) < 0) hard_fail(#call);    \
    if (eng_sync(GPU) < 0) hard_fail("sync");                                \
    (ms) = (clock_now_s() - t0_) * 1e3 / (reps);                             \
  } while (0)

static void *gbuf(size_t floats, float scale) {
  float *h = tl_rand(floats, scale);
  void *p;
  if (eng_alloc(GPU, floats * 4, "bench", &p) < 0 ||
      eng_upload(GPU, p, h, floats * 4) < 0)
    hard_fail("bench buffer");
  free(h);
  return p;
}

static void row(const char *op, double ms, double bytes, double flops) {
  printf("| %-44s | %8.3f | %7.0f | %7.1f |\n", op, ms, bytes / ms / 1e6,
         flops / ms / 1e9);   /* per ms: 1e6 B = 1 GB/s, 1e9 FLOP = 1 TFLOP/s */
}

static void bench(void) {
  enum { B = 4, T = 512, D = 768, F = 3072, H = 12, DH = 64, V = 10000 };
  const int N = B * T;
  const size_t ND = (size_t)N * D, NF = (size_t)N * F, NV = (size_t)N * V;
  const size_t SS = (size_t)B * H * T * T;
  float *x = gbuf(ND, 1), *y = gbuf(ND, 1), *g = gbuf(D, 1), *r = gbuf(N, 1);
  float *w1 = gbuf((size_t)F * D, 0.03f), *a = gbuf(NF, 1), *b = gbuf(NF, 1);
  float *hbuf = gbuf(NF, 1), *S = gbuf(SS, 1), *P = gbuf(SS, 1);
  float *logits = gbuf(NV, 3), *dl = gbuf(NV, 1), *loss = gbuf(N, 1);
  float *lse = gbuf(N, 1), *tab = gbuf((size_t)V * D, 1), *dg = gbuf(D, 1);
  size_t np = 128625408;   /* the small model's parameters */
  float *pp = gbuf(np, 1), *pg = gbuf(np, 1), *pm = gbuf(np, 1), *pv = gbuf(np, 1);
  int32_t *ih = tl_malloc(N * sizeof *ih);
  for (int i = 0; i < N; i++) ih[i] = (int32_t)(next_u64() % V);
  int32_t *ids;
  if (eng_alloc(GPU, N * 4, "bench", (void **)&ids) < 0 ||
      eng_upload(GPU, ids, ih, N * 4) < 0)
    hard_fail("ids");
  double ms, f4 = 4.0;
  printf("\nTimings on the GPU, small model sizes (B=4, T=512, d=768, "
         "d_ff=3072, 12 heads, V=10000); host clock over 20 calls\n");
  printf("| %-44s | %8s | %7s | %7s |\n", "operation", "ms", "GB/s", "TFLOP/s");
  printf("|---|--:|--:|--:|\n");
  TIME(ms, 20, k_matmul(GPU, 0, 1, N, F, D, 1, x, D, w1, D, 0, a, F, DT_F32));
  row("matmul f32 [2048x768] x [3072x768]^T", ms, f4 * (ND + F * D + NF), 2.0 * N * F * D);
  TIME(ms, 20, k_matmul(GPU, 0, 1, N, F, D, 1, x, D, w1, D, 0, a, F, DT_BF16));
  row("matmul bf16 (incl. packing) same shape", ms, f4 * (ND + F * D + NF), 2.0 * N * F * D);
  TIME(ms, 20, k_matmul_batched(GPU, 0, 1, T, T, DH, 0.125f, x, DH, (long long)T * DH,
                                y, DH, (long long)T * DH, 0, S, T, (long long)T * T,
                                B * H, DT_F32));
  row("matmul_batched f32 QK^T, 48 heads", ms, f4 * (SS + 2 * ND), 2.0 * B * H * T * T * DH);
  TIME(ms, 20, k_matmul_batched(GPU, 0, 1, T, T, DH, 0.125f, x, DH, (long long)T * DH,
                                y, DH, (long long)T * DH, 0, S, T, (long long)T * T,
                                B * H, DT_BF16));
  row("matmul_batched bf16 QK^T, 48 heads", ms, f4 * (SS + 2 * ND), 2.0 * B * H * T * T * DH);
  TIME(ms, 20, k_embedding_fwd(GPU, ids, tab, x, N, D, V));
  row("embedding_fwd", ms, f4 * 2 * ND, 0);
  TIME(ms, 20, k_embedding_bwd(GPU, ids, y, tab, N, D, V));
  row("embedding_bwd (sort + ordered sums)", ms, f4 * 3 * ND, 0);
  TIME(ms, 20, k_rmsnorm_fwd(GPU, x, g, y, r, N, D, 1e-5f));
  row("rmsnorm_fwd", ms, f4 * 2 * ND, 0);
  TIME(ms, 20, k_rmsnorm_bwd(GPU, y, x, g, r, y, dg, N, D));
  row("rmsnorm_bwd (dx = dy)", ms, f4 * 3 * ND, 0);
  TIME(ms, 20, k_rope(GPU, x, B, H, T, DH, 10000.0f, 0));
  row("rope", ms, f4 * 2 * ND, 0);
  TIME(ms, 20, k_split_heads(GPU, x, y, B, T, H, DH));
  row("split_heads", ms, f4 * 2 * ND, 0);
  TIME(ms, 20, k_softmax_causal_fwd(GPU, S, P, B * H, T, 0.125f));
  row("softmax_causal_fwd [48,512,512]", ms, f4 * 1.5 * SS, 0);
  TIME(ms, 20, k_softmax_causal_bwd(GPU, P, S, S, B * H, T, 0.125f));
  row("softmax_causal_bwd (dS = dP)", ms, f4 * 2 * SS, 0);
  TIME(ms, 20, k_swiglu_fwd(GPU, a, b, hbuf, NF));
  row("swiglu_fwd [2048x3072]", ms, f4 * 3 * NF, 0);
  TIME(ms, 20, k_swiglu_bwd(GPU, hbuf, a, b, hbuf, dl, NF));
  row("swiglu_bwd", ms, f4 * 5 * NF, 0);
  TIME(ms, 20, k_cross_entropy_fwd(GPU, logits, ids, loss, lse, N, V));
  row("cross_entropy_fwd [2048x10000]", ms, f4 * NV, 0);
  TIME(ms, 20, k_cross_entropy_bwd(GPU, logits, ids, lse, dl, N, V, 1.0f / N));
  row("cross_entropy_bwd", ms, f4 * 2 * NV, 0);
  TIME(ms, 20, k_add(GPU, a, b, hbuf, NF));
  row("add [2048x3072]", ms, f4 * 3 * NF, 0);
  TIME(ms, 10, k_adamw(GPU, pp, pg, pm, pv, np, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1));
  row("adamw, 128.6M parameters", ms, f4 * 7 * np, 0);
  void *half;
  if (eng_alloc(GPU, np * 2, "bench", &half) < 0) hard_fail("bench half");
  TIME(ms, 10, k_cast(GPU, pp, DT_F32, half, DT_BF16, np));
  row("cast f32 -> bf16, 128.6M", ms, 6.0 * np, 0);

  /* The 2.7B model's W1 weight gradient (d_ff 10240, d_model 2560, B*T
   * 2048) and its AdamW update: as a product and an update, and as one
   * k_matmul_adamw. */
  enum { K2 = 2048, R2 = 10240, C2 = 2560 };
  const size_t nw = (size_t)R2 * C2;
  float *y32 = gbuf((size_t)K2 * R2, 1), *x32 = gbuf((size_t)K2 * C2, 1);
  void *yb, *xb, *wl;
  if (eng_alloc(GPU, (size_t)K2 * R2 * 2, "bench", &yb) < 0 ||
      eng_alloc(GPU, (size_t)K2 * C2 * 2, "bench", &xb) < 0 ||
      eng_alloc(GPU, nw * 2, "bench", &wl) < 0 ||
      k_cast(GPU, y32, DT_F32, yb, DT_BF16, (size_t)K2 * R2) < 0 ||
      k_cast(GPU, x32, DT_F32, xb, DT_BF16, (size_t)K2 * C2) < 0)
    hard_fail("bench bf16 operands");
  double mm_b = 2.0 * ((size_t)K2 * (R2 + C2)) + 4.0 * nw;
  TIME(ms, 10, k_matmul_ex(GPU, 1, 0, R2, C2, K2, 1.0f, yb, R2, xb, C2,
                           DT_BF16, 0.0f, pg, C2, DT_F32, F32_EXACT));
  row("2.7B W1 grad: matmul_ex bf16 -> f32", ms, mm_b, 2.0 * K2 * nw);
  TIME(ms, 10, k_adamw_ex(GPU, pp, wl, DT_BF16, pg, DT_F32, pm, pv, nw,
                          1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, NULL));
  row("2.7B W1: adamw_ex (+ bf16 copy), 26.2M", ms, 30.0 * nw, 0);
  {   /* the gradient in bf16 (grad_lt): the product writes 2 bytes, not 4 */
    void *gb;
    if (eng_alloc(GPU, nw * 2, "bench", &gb) < 0 ||
        k_cast(GPU, pg, DT_F32, gb, DT_BF16, nw) < 0)
      hard_fail("bench bf16 gradient");
    TIME(ms, 10, k_matmul_ex(GPU, 1, 0, R2, C2, K2, 1.0f, yb, R2, xb, C2,
                             DT_BF16, 0.0f, gb, C2, DT_BF16, F32_EXACT));
    row("2.7B W1 grad: matmul_ex bf16 -> bf16", ms,
        2.0 * ((size_t)K2 * (R2 + C2)) + 2.0 * nw, 2.0 * K2 * nw);
    TIME(ms, 10, k_adamw_ex(GPU, pp, wl, DT_BF16, gb, DT_BF16, pm, pv, nw,
                            1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, NULL));
    row("2.7B W1: adamw_ex, bf16 gradient (+ bf16 copy)", ms, 28.0 * nw, 0);
    eng_free(GPU, gb);
  }
  /* capped: what AdamW beside backward gets from that many SMs */
  for (int cap = 16; cap <= 64; cap *= 2) {
    eng_ctx cx = {NULL, 0, cap};
    engine *cv = NULL;
    if (eng_view(GPU, &cx, &cv) < 0) hard_fail("adamw_ex view");
    TIME(ms, 10, k_adamw_ex(cv, pp, wl, DT_BF16, pg, DT_F32, pm, pv, nw,
                            1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, NULL));
    char name[64];
    snprintf(name, sizeof name, "2.7B W1: adamw_ex capped at %d blocks", cap);
    row(name, ms, 30.0 * nw, 0);
    engine_destroy(cv);
  }
  TIME(ms, 10, k_matmul_adamw(GPU, R2, C2, K2, yb, R2, xb, C2, DT_BF16, pp,
                              wl, pm, pv, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
                              1));
  row("2.7B W1: matmul_adamw (both, one pass)", ms,
      2.0 * ((size_t)K2 * (R2 + C2)) + 26.0 * nw, 2.0 * K2 * nw);
  TIME(ms, 10, k_matmul_adamw(GPU, R2, C2, 64, yb, R2, xb, C2, DT_BF16, pp,
                              wl, pm, pv, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
                              1));
  row("the same with k = 64 (mostly the update)", ms,
      2.0 * (64.0 * (R2 + C2)) + 26.0 * nw, 2.0 * 64 * nw);
  free(ih);
  /* The bench buffers go with the engine. */
}

/* ======================================================================= */

int main(int argc, char **argv) {
  tl_seed(0x2545f4914f6cdd1dull);
  int do_bench = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--small") == 0) small_only = 1;
    else if (strcmp(argv[i], "--no-kprof") == 0) no_kprof = 1;
    else if (strcmp(argv[i], "--bench") == 0) do_bench = 1;
    else {
      fprintf(stderr, "usage: %s [--small] [--no-kprof] [--bench]\n", argv[0]);
      return 99;
    }
  }
  if (!gpu_available()) return 77;
  if (engine_cpu_create(&CPU, 0) < 0) hard_fail("engine_cpu_create");
  if (engine_cuda_create(&GPU, 0) < 0) hard_fail("engine_cuda_create");
  double t0 = clock_now_s();
  size_t gpu_base = eng_bytes_in_use(GPU);
  test_memory();
  test_matmul();
  test_matmul_batched();
  test_embedding();
  test_rmsnorm();
  test_rmsnorm_ex();
  test_rope_heads();
  test_softmax();
  test_swiglu();
  test_init_normal();
  test_cross_entropy();
  test_adamw_elementwise();
  test_matmul_adamw();
#ifdef HAVE_CUDA
  test_view();
  test_kprof();
  test_monitor();
  test_side_view();
#endif
  test_copy();
  test_graphs();
  size_t test_in_use = 1;
  int tr = eng_tag_bytes(GPU, "test", &test_in_use, NULL) == 0;
  check(tr && test_in_use == 0 && eng_bytes_in_use(CPU) == 0,
        "the tests freed all their engine memory (GPU engine holds %zu bytes "
        "of workspace, %zu at the start)", eng_bytes_in_use(GPU), gpu_base);
  printf("checks took %.1f s\n", clock_now_s() - t0);
  if (do_bench) bench();
  engine_destroy(GPU);
  engine_destroy(CPU);
  return tl_finish();
}
