/* Attention on the CUDA engine against the CPU engine: both
 * implementations (cuBLAS materialised, FlashAttention-2 kernels) in f32,
 * bf16 and f16, on the course's test shape (batch 4 x 1 head, 128 queries,
 * 128 keys, d 64, causal and not) and on odd shapes (lengths that are not
 * multiples of any tile, Tq < Tk, Tq > Tk, one query, every head dim 16, 32,
 * 64, 128, a long causal sequence that crosses many tiles).
 *
 * Each case draws fresh random inputs (never zero), rounds them to the
 * dtype on the GPU and brings the rounded values back, so the reference
 * (the CPU engine's materialised f32 path, itself checked against double
 * loops and finite differences by test_attention) sees exactly the GPU's
 * inputs. Outputs are poisoned with NaN first: an unwritten element fails.
 *
 * Tolerance per tensor (O, L, dQ, dK, dV): max |gpu - cpu| <= tol * max
 * |cpu|. f32 1e-4 (fp32 sums in another order, exp2 vs exp); f16 5e-3 and
 * bf16 2e-2: P and dS are rounded to 11 / 8 significant bits before their
 * products and the outputs are stored in the dtype (u = 4.9e-4 / 3.9e-3,
 * a few u after accumulation); the course asks for 1e-2 at its shape.
 * On an sm_90 GPU the bf16 / f16 flash forward and backward at dh 64, 80
 * and 128 run on wgmma (flash_fwd_wgmma.cu, flash_bwd_wgmma.cu); every
 * flash case runs with them and again with the mma.sync kernels that other
 * GPUs use, and each of the two once more with the walks cut into chunks
 * of 2 tiles (1 with --small) wherever they are longer (flash_cut.cuh: the
 * wgmma forward and backward, the mma.sync forward and both backward
 * passes), so that short shapes run the cut kernels and their merges too.
 * fp32 runs again with the engine's fp32 products on TF32 and on 3xTF32
 * tensor cores (flash_fwd.cu's and flash_bwd.cu's mma kernels on TF32
 * parts), flash also with its walks cut so: 3xTF32 held to
 * fp32's 1e-4, TF32 (10-bit mantissas on every product's inputs, the
 * reference's fp32 inputs included) to 1e-2.
 * Exit 0 / 1 / 77 (no GPU or no CUDA build) / 99. */
#include "config.h"
#include "tests/testlib.h"
#include "kernels/kernels.h"
#include "common/check.h"
#ifdef HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static engine *CPU, *GPU;
static int WGMMA;   /* the engine's wgmma switch in this pass */
/* Cut walks (flash_cut.cuh): a pass with SPLIT forces chunks of 2 tiles
 * (1 with --small) on every walk longer, so that small shapes run the cut
 * kernels and their merges; CUT[SPLIT] counts the cases whose walks either
 * wgmma kernel cut, MCUT[SPLIT] those any mma.sync kernel (the forward,
 * the backward's passes) cut. */
static int SPLIT, CUT[2], MCUT[2];
/* The GPU engine's fp32 products in this pass (kernels.h f32_products):
 * with TF32 or 3xTF32 the fp32 flash forward and backward run on tensor
 * cores, and the materialised path's products likewise. */
static f32_products F32P = F32_EXACT;

/* The experiment setting's word for impl (attn_impl_parse's inverse), to
 * name the case in messages. */
static const char *impl_name(attn_impl impl) {
  return impl == ATTN_FLASH ? "flash" : "materialized";
}

/* A GPU tensor of dtype dt holding `host` rounded to dt; host gets the
 * rounded values back (what the reference must see). */
static void *to_gpu(float *host, size_t n, dtype dt) {
  void *f, *d;
  hard(eng_alloc(GPU, n * 4, "test", &f), "eng_alloc");
  hard(eng_alloc(GPU, n * dtype_size(dt), "test", &d), "eng_alloc");
  hard(eng_upload(GPU, f, host, n * 4), "eng_upload");
  if (dt == DT_F32) hard(eng_upload(GPU, d, host, n * 4), "eng_upload");
  else hard(k_cast(GPU, f, DT_F32, d, dt, n), "k_cast");
  if (dt != DT_F32) hard(k_cast(GPU, d, dt, f, DT_F32, n), "k_cast");
  hard(eng_download(GPU, host, f, n * 4), "eng_download");
  eng_free(GPU, f);
  return d;
}

static float *to_host(const void *d, size_t n, dtype dt) {
  float *h = tl_malloc(n * 4);
  if (dt == DT_F32) {
    hard(eng_download(GPU, h, d, n * 4), "eng_download");
    return h;
  }
  void *f;
  hard(eng_alloc(GPU, n * 4, "test", &f), "eng_alloc");
  hard(k_cast(GPU, d, dt, f, DT_F32, n), "k_cast");
  hard(eng_download(GPU, h, f, n * 4), "eng_download");
  eng_free(GPU, f);
  return h;
}

static float *random_host(size_t n) {
  float *x = tl_malloc(n * 4);
  for (size_t i = 0; i < n; i++) x[i] = frand(1.0f);
  return x;
}

static void *nan_gpu(size_t n, dtype dt) {
  float *h = tl_malloc(n * 4);
  for (size_t i = 0; i < n; i++) h[i] = NAN;
  void *d = to_gpu(h, n, dt);
  free(h);
  return d;
}

static double rel_err(const float *a, const float *b, size_t n) {
  double m = 0, d = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(a[i] == a[i])) return INFINITY;
    m = fmax(m, fabs(b[i]));
    d = fmax(d, fabs((double)a[i] - b[i]));
  }
  return m > 0 ? d / m : d;
}

/* Scores that grow along the keys: K's row t scaled by 1 + RAMP t / tk,
 * so a row's running max keeps rising, now by little, now by much; the
 * forward's conditional rescaling (flash_fwd_wgmma.cu) then both keeps a
 * stale reference for some tiles and moves it at later ones. 0: off. */
static float RAMP = 0.f;

static void one(attn_impl impl, dtype dt, int bh, int tq, int tk, int dh,
                int causal) {
  size_t nq = (size_t)bh * tq * dh, nk = (size_t)bh * tk * dh, nl = (size_t)bh * tq;
  float scale = 1.0f / sqrtf((float)dh);
  float *hq = random_host(nq), *hk = random_host(nk), *hv = random_host(nk),
        *hg = random_host(nq);
  for (size_t i = 0; i < nq; i++) hq[i] *= 2.0f;   /* a peakier softmax */
  for (size_t r = 0; RAMP > 0 && r < (size_t)bh * tk; r++)
    for (int i = 0; i < dh; i++) hk[r * dh + i] *= 1.f + RAMP * (float)(r % tk) / tk;
  void *q = to_gpu(hq, nq, dt), *k = to_gpu(hk, nk, dt), *v = to_gpu(hv, nk, dt),
       *g = to_gpu(hg, nq, dt);
  void *o = nan_gpu(nq, dt), *dq = nan_gpu(nq, dt), *dk = nan_gpu(nk, dt),
       *dv = nan_gpu(nk, dt), *P = NULL;
  float *lse = nan_gpu(nl, DT_F32);
  if (impl == ATTN_MATERIALIZED) P = nan_gpu((size_t)bh * tq * tk, dt);
  int rc = k_attention_fwd(GPU, impl, q, k, v, o, lse, P, bh, tq, tk, dh,
                           causal, scale, dt);
  if (rc == 0)
    rc = k_attention_bwd(GPU, impl, q, k, v, o, g, lse, P, dq, dk, dv, bh, tq,
                         tk, dh, causal, scale, dt);
  if (rc == 0) rc = eng_sync(GPU);
  char cut[64] = "";
#ifdef HAVE_CUDA
  if (WGMMA && impl == ATTN_FLASH && dt != DT_F32 && (dh == 64 || dh == 80 || dh == 128)) {
    int nf = cuda_flash_fwd_chunks(GPU, bh, tq, tk, dh, causal),
        nb = cuda_flash_bwd_chunks(GPU, bh, tq, tk, dh, causal);
    if (nf > 1 || nb > 1) {
      CUT[SPLIT]++;
      snprintf(cut, sizeof cut, ", walks cut: fwd %d, bwd %d chunks", nf, nb);
    }
  } else if (impl == ATTN_FLASH) {   /* the mma.sync kernels, or CUDA cores (1) */
    int nf = cuda_flash_fwd_mma_chunks(GPU, bh, tq, tk, dh, causal, dt),
        nb = cuda_flash_bwd_mma_chunks(GPU, bh, tq, tk, dh, causal, dt);
    if (nf < 0 || nb < 0) {
      check(0, "cuda_flash_{fwd,bwd}_mma_chunks: %s", err_msg());
    } else if (nf > 1 || nb > 1) {
      MCUT[SPLIT]++;
      snprintf(cut, sizeof cut, " (walks cut: fwd %d, bwd %d chunks)", nf, nb);
    }
  }
#endif
  char what[200];
  snprintf(what, sizeof what, "%s%s%s%s %s%s%s bh=%d tq=%d tk=%d dh=%d causal=%d%s",
           impl_name(impl), WGMMA ? " (wgmma" : "", cut,
           WGMMA ? ")" : "", dtype_name(dt),
           dt == DT_F32 && F32P != F32_EXACT ? " products " : "",
           dt == DT_F32 && F32P != F32_EXACT ? f32_products_name(F32P) : "",
           bh, tq, tk, dh, causal, RAMP > 0 ? " (scores growing along the keys)" : "");
  if (rc < 0) {
    check(0, "%s: %s", what, err_msg());
  } else {
    /* The reference: the CPU engine's materialised path on the same values. */
    float *ro = tl_malloc(nq * 4), *rl = tl_malloc(nl * 4),
          *rp = tl_malloc((size_t)bh * tq * tk * 4), *rq = tl_malloc(nq * 4),
          *rk = tl_malloc(nk * 4), *rv = tl_malloc(nk * 4);
    hard(k_attention_fwd(CPU, ATTN_MATERIALIZED, hq, hk, hv, ro, rl, rp, bh,
                         tq, tk, dh, causal, scale, DT_F32), "cpu fwd");
    /* The GPU's backward saw dO rounded like its O; use its own O for D. */
    hard(k_attention_bwd(CPU, ATTN_MATERIALIZED, hq, hk, hv, ro, hg, rl, rp,
                         rq, rk, rv, bh, tq, tk, dh, causal, scale, DT_F32),
         "cpu bwd");
    float *go = to_host(o, nq, dt), *gl = to_host(lse, nl, DT_F32),
          *gq = to_host(dq, nq, dt), *gk = to_host(dk, nk, dt),
          *gv = to_host(dv, nk, dt);
    /* TF32 rounds every product input to 10-bit mantissas, Q, K, V and
     * dO included (f16's inputs reach the reference rounded alike, TF32's
     * do not): the course's 1e-2, as test_model_cuda's fused TF32; the
     * same kernels under 3xTF32 are held to fp32's 1e-4 */
    double tol = dt == DT_F32 ? (F32P == F32_TF32 ? 1e-2 : 1e-4)
               : dt == DT_F16 ? 5e-3 : 2e-2;
    double e[5] = {rel_err(go, ro, nq), rel_err(gl, rl, nl),
                   rel_err(gq, rq, nq), rel_err(gk, rk, nk),
                   rel_err(gv, rv, nk)};
    static const char *const names[5] = {"O", "L", "dQ", "dK", "dV"};
    double worst = 0;
    int wi = 0;
    for (int t = 0; t < 5; t++)
      if (!(e[t] <= worst)) { worst = e[t]; wi = t; }
    check(worst <= tol, "%s: worst rel err %.2e (%s) <= %.0e [O %.1e L %.1e "
          "dQ %.1e dK %.1e dV %.1e]", what, worst, names[wi], tol, e[0], e[1],
          e[2], e[3], e[4]);
    free(ro); free(rl); free(rp); free(rq); free(rk); free(rv);
    free(go); free(gl); free(gq); free(gk); free(gv);
  }
  void *bufs[] = {q, k, v, g, o, dq, dk, dv, lse, P};
  for (int i = 0; i < 10; i++) eng_free(GPU, bufs[i]);
  free(hq); free(hk); free(hv); free(hg);
}

/* Every shape of a pass: the course's, odd ones, several tiles, rising
 * maxima; wg: the wgmma kernels run, and more of their tiles. */
static void shapes(attn_impl impl, dtype dt, int small, int wg) {
  for (int causal = 0; causal < 2; causal++) {
    one(impl, dt, 4, 128, 128, 64, causal);   /* the course's shape */
    one(impl, dt, 3, 37, 53, 16, causal);
    one(impl, dt, 2, 131, 70, 32, causal);
    one(impl, dt, 2, 200, 259, 64, causal);
    one(impl, dt, 1, 1, 77, 128, causal);
    one(impl, dt, 3, 131, 131, 80, causal);   /* the 2.7B model's */
    one(impl, dt, 2, 190, 190, 128, causal);
    if (small) continue;
    /* Several 128-row tiles and a partial one, Tq != Tk both ways. */
    one(impl, dt, 1, 389, 389, 80, causal);
    one(impl, dt, 1, 300, 333, 128, causal);
    one(impl, dt, 1, 333, 270, 64, causal);
    if (wg) {   /* more wgmma tiles: Tq > Tk, Tq < Tk, many tiles */
      one(impl, dt, 2, 700, 517, 128, causal);
      one(impl, dt, 1, 257, 900, 64, causal);
      one(impl, dt, 1, 1100, 1100, 128, causal);
      one(impl, dt, 2, 600, 555, 80, causal);
      /* walks long enough for the planner to cut (non-causal);
       * in the split pass 1 x 100 x 9000 forward (non-causal) cuts its
       * walk into 36 chunks, more than the merge's 32 lanes */
      one(impl, dt, 1, 100, 9000, 128, causal);
      if (causal) one(impl, dt, 1, 4100, 4100, 64, causal);
    }
    RAMP = 8.f;   /* a running max that rises over many key tiles */
    one(impl, dt, 1, 300, 1100, 128, causal);
    one(impl, dt, 2, 400, 900, 64, causal);
    RAMP = 0.f;
  }
  if (!small) one(impl, dt, 1, 1500, 1500, 64, 1);
}

int main(int argc, char **argv) {
  /* --small: the shapes of at most 200 rows, every kernel and head dim
   * still (what compute-sanitizer's racecheck can get through). */
  int small = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--small") == 0) {
      small = 1;
    } else {
      fprintf(stderr, "usage: %s [--small]\n", argv[0]);
      return 99;
    }
  }
  tl_seed(0xa77e7710ca11ull);
  int rc = engine_cuda_create(&GPU, 0);
  if (rc < 0) {
    printf("SKIP: no GPU: %s\n", err_msg());
    return 77;
  }
  hard(engine_cpu_create(&CPU, 0), "engine_cpu_create");
  static const dtype dts[3] = {DT_F32, DT_BF16, DT_F16};
#ifdef HAVE_CUDA
  int have_wgmma = cuda_impl(GPU)->wgmma;
#else
  int have_wgmma = 0;
#endif
  /* Flash passes: on an sm_90 GPU wgmma, mma.sync, both again with split
   * walks; elsewhere mma.sync, and again split. */
  for (int m = 0; m < 2; m++)
    for (int pass = 0; pass < (m ? (have_wgmma ? 4 : 2) : 1); pass++) {
#ifdef HAVE_CUDA
      WGMMA = have_wgmma && pass % 2 == 0;
      SPLIT = m && pass >= (have_wgmma ? 2 : 1);
      cuda_impl(GPU)->wgmma = WGMMA;
      /* --small's walks are at most 3 tiles: chunks of 1 cut them */
      cuda_impl(GPU)->flash_cut_force = SPLIT ? (small ? 1 : 2) : 0;
#endif
      for (int d = 0; d < 3; d++) {
        attn_impl impl = m ? ATTN_FLASH : ATTN_MATERIALIZED;
        if (SPLIT && dts[d] == DT_F32) continue;   /* CUDA cores: never cut */
        shapes(impl, dts[d], small, WGMMA && dts[d] != DT_F32);
      }
    }
#ifdef HAVE_CUDA
  cuda_impl(GPU)->wgmma = have_wgmma;
  cuda_impl(GPU)->flash_cut_force = 0;
#endif
  /* fp32 with TF32 and 3xTF32 products: both implementations, every shape
   * (fp32 flash on tensor cores), flash again with split walks. */
  static const f32_products f32ps[2] = {F32_TF32, F32_3XTF32};
  for (int p = 0; p < 2; p++) {
    F32P = f32ps[p];
    hard(eng_f32_products(GPU, F32P), "eng_f32_products");
    for (int pass = 0; pass < 3; pass++) {
      SPLIT = pass == 2;
#ifdef HAVE_CUDA
      cuda_impl(GPU)->flash_cut_force = SPLIT ? (small ? 1 : 2) : 0;
#endif
      shapes(pass ? ATTN_FLASH : ATTN_MATERIALIZED, DT_F32, small, 0);
    }
  }
  F32P = F32_EXACT;
  SPLIT = 0;
  hard(eng_f32_products(GPU, F32P), "eng_f32_products");
#ifdef HAVE_CUDA
  cuda_impl(GPU)->flash_cut_force = 0;
#endif
#ifdef HAVE_CUDA
  /* The cut walks ran. Forced, exactly in the cases with a walk longer
   * than the chunk: 27 shapes (--small: 6), each in bf16 and f16. As
   * planned, at least 1 x 100 x 9000 (71 key tiles a walk, chunks of 16
   * on any GPU of 5 SMs or more) in both. */
  if (have_wgmma) {
    check(CUT[1] == (small ? 12 : 54), "the split pass cut the walks of "
          "%d cases (expected %d)", CUT[1], small ? 12 : 54);
    if (!small)
      check(CUT[0] >= 2, "the planner cut the walks of %d cases (at least 2)",
            CUT[0]);
  }
  /* the mma.sync kernels' split passes (bf16, f16; fp32 on TF32 and
   * 3xTF32): how many cases cut depends on their tiles, but some do */
  check(MCUT[1] > 0, "the split passes cut the mma.sync kernels' walks in "
        "%d cases (some)", MCUT[1]);
#endif
  /* Refusals: a head dim the flash kernels do not take. */
  void *x;
  hard(eng_alloc(GPU, 4096 * 4, "test", &x), "eng_alloc");
  rc = k_attention_fwd(GPU, ATTN_FLASH, x, x, x, (char *)x + 2048, (float *)x,
                       NULL, 1, 4, 4, 24, 0, 1.0f, DT_BF16);
  check(rc == ERR_FAIL && strstr(err_msg(), "head dims 16, 32, 64, 80, 128"),
        "flash dh=24 on the GPU is refused with the allowed dims");
  eng_free(GPU, x);
  engine_destroy(GPU);
  engine_destroy(CPU);
  return tl_finish();
}
