/* The toy model's kernels (LayerNorm, ReLU) and the whole toy on the CUDA
 * engine, against the CPU engine (itself checked against double loops and
 * finite differences by test_toy). GPU only: exit 77 without a GPU or
 * without a CUDA build.
 *
 * Every check draws fresh seeded random inputs (never zeros), uploads the
 * same bytes to both engines, fills each output with NaN first (an element
 * the GPU never writes then fails), runs both and compares.
 *
 * - LayerNorm at odd sizes, the toy's (d = 10), rows longer than a block
 *   (d = 1000 > 256 threads), the model's (2048 x 768), rows held in
 *   registers (d = 1000 to 8192: 1 to 8 float4s a thread, partial turns)
 *   and a row too wide for that (8200), and many rows (n = 70001, d = 10:
 *   the column sums of dw and db in many chunks).
 *   y, mean, rstd, dx: max |cuda - cpu| <= 1e-5 * max |cpu| (fp32 with a
 *   few roundings per element against the CPU's double sums). dw, db
 *   (accumulated onto random values): per element within 1e-5 of its own
 *   magnitude sum_i |term| + |initial value|, computed here in double, so a
 *   column sum over 70001 rows is judged against what fp32 summation can
 *   do and a cancelling sum cannot hide an error. dx over dy's buffer
 *   gives the same bits as a separate dx; the same call twice gives the
 *   same bits (no atomics).
 * - ReLU: bit for bit against the CPU engine (the same comparisons),
 *   including 0, -0, NaN, in place, over 1001 and 2^20 + 3 elements.
 * - The whole toy (in 5, hidden 10, out 3, 7 rows; and in 64, out 16,
 *   1000 rows) from the same seed: loss, every gradient of both backwards,
 *   CUDA at fp32 / bf16 / fp16 against the CPU at fp32: fp32 within 1e-4
 *   of each tensor's largest value (only the order of summation differs;
 *   LayerNorm's backward divides by the row's spread, which amplifies it a
 *   little), bf16 within 3e-2 and fp16 within 2e-2 of it (8- and 11-bit
 *   mantissas on the inputs of every product), and those must differ from
 *   fp32 by more than 1e-6, so the low-precision products really ran. The
 *   weights after each AdamW step: within 1e-5 of the CPU's AdamW given
 *   the GPU's own gradients (the optimizer is fp32 at every precision);
 *   and at fp32 also within 1e-4 of the CPU's whole run. Not the
 *   low-precision runs against the CPU's whole run: AdamW divides each
 *   gradient by its own size, so a bias whose gradient is 1% of the
 *   tensor's largest moves by a step of lr * (an 8-bit gradient's error /
 *   1%), a large share of a tensor that is itself a few steps of lr. Frozen and unused: gradients 0 and
 *   weights unchanged bit for bit. The hook's order. The dtype probes: with
 *   fp16 the weights are read as fp16 and everything else is fp32.
 *
 * One line per check, then "N passed, M failed". */
#include "config.h"
#include "tests/testlib.h"
#include "kernels/kernels.h"
#include "model/toy.h"

#include "common/check.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static engine *CPU, *GPU;

/* One buffer on both engines: the same bytes (NaN poison when host is
 * NULL). */
typedef struct pair {
  float *c, *g;
  size_t n;
} pair;

static pair pair_new(const float *host, size_t n) {
  pair p = {NULL, NULL, n};
  float *poison = NULL;
  if (!host) {
    poison = tl_malloc(n * sizeof *poison);
    memset(poison, 0xff, n * sizeof *poison);
    host = poison;
  }
  hard(eng_alloc(CPU, n * sizeof(float), "test", (void **)&p.c), "eng_alloc");
  hard(eng_alloc(GPU, n * sizeof(float), "test", (void **)&p.g), "eng_alloc");
  hard(eng_upload(CPU, p.c, host, n * sizeof(float)), "eng_upload");
  hard(eng_upload(GPU, p.g, host, n * sizeof(float)), "eng_upload");
  free(poison);
  return p;
}

static void pair_free(pair *p) {
  eng_free(CPU, p->c);
  eng_free(GPU, p->g);
}

static float *down(engine *e, const float *d, size_t n) {
  float *h = tl_malloc(n * sizeof *h);
  hard(eng_sync(e), "eng_sync");
  hard(eng_download(e, h, d, n * sizeof *h), "eng_download");
  return h;
}

static void same_bits(const char *what, const float *a, const float *b,
                      size_t n) {
  size_t diff = 0;
  for (size_t i = 0; i < n; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
  check(diff == 0, "%s: %zu of %zu elements differ", what, diff, n);
}

/* ======================================================================= */
/* LayerNorm                                                                */
/* ======================================================================= */

static void test_layernorm_case(int N, int D) {
  const float eps = 1e-5f;
  size_t nd = (size_t)N * D;
  float *hx = tl_rand(nd, 2), *hw = tl_rand(D, 1), *hb = tl_rand(D, 1);
  float *hdy = tl_rand(nd, 1), *hdw0 = tl_rand(D, 1), *hdb0 = tl_rand(D, 1);
  pair x = pair_new(hx, nd), w = pair_new(hw, D), b = pair_new(hb, D);
  pair y = pair_new(NULL, nd), mean = pair_new(NULL, N), rstd = pair_new(NULL, N);
  char what[160];
  for (int k = 0; k < 2; k++) {
    engine *e = k ? GPU : CPU;
    pair *P[] = {&x, &w, &b, &y, &mean, &rstd};
    float *p[6];
    for (int i = 0; i < 6; i++) p[i] = k ? P[i]->g : P[i]->c;
    hard(k_layernorm_fwd(e, p[0], p[1], p[2], p[3], p[4], p[5], N, D, eps),
         "k_layernorm_fwd");
  }
  float *yc = down(CPU, y.c, nd), *yg = down(GPU, y.g, nd);
  float *mc = down(CPU, mean.c, N), *mg = down(GPU, mean.g, N);
  float *rc = down(CPU, rstd.c, N), *rg = down(GPU, rstd.g, N);
  snprintf(what, sizeof what, "k_layernorm_fwd y [%d x %d]", N, D);
  tl_compare(what, yg, yc, nd, 1e-5);
  tl_compare("k_layernorm_fwd mean", mg, mc, N, 1e-5);
  tl_compare("k_layernorm_fwd rstd", rg, rc, N, 1e-5);

  /* Backward from the CPU's saved statistics on both engines (the GPU's
   * agree to 1e-5; the same inputs make the comparison of backward alone). */
  hard(eng_upload(GPU, mean.g, mc, N * sizeof(float)), "eng_upload");
  hard(eng_upload(GPU, rstd.g, rc, N * sizeof(float)), "eng_upload");
  pair dy = pair_new(hdy, nd), dx = pair_new(NULL, nd);
  pair dw = pair_new(hdw0, D), db = pair_new(hdb0, D);
  hard(k_layernorm_bwd(CPU, dy.c, x.c, w.c, mean.c, rstd.c, dx.c, dw.c, db.c,
                       N, D), "k_layernorm_bwd cpu");
  hard(k_layernorm_bwd(GPU, dy.g, x.g, w.g, mean.g, rstd.g, dx.g, dw.g, db.g,
                       N, D), "k_layernorm_bwd cuda");
  float *dxc = down(CPU, dx.c, nd), *dxg = down(GPU, dx.g, nd);
  float *dwc = down(CPU, dw.c, D), *dwg = down(GPU, dw.g, D);
  float *dbc = down(CPU, db.c, D), *dbg = down(GPU, db.g, D);
  if (D > 1) {
    tl_compare("k_layernorm_bwd dx", dxg, dxc, nd, 1e-5);
  } else {
    /* One feature: y = b whatever x is, so dx is 0 up to rounding (the CPU
     * engine's happens to be exactly 0; the GPU's a few ulps of dy). */
    double worst = 0;
    for (size_t i = 0; i < nd; i++) worst = fmax(worst, fabs(dxg[i]));
    check(worst <= 1e-5, "k_layernorm_bwd dx of a 1-feature norm is 0 to "
          "rounding (max |dx| %.3e)", worst);
  }
  /* dw, db per element against their magnitude. */
  double ew = 0, eb = 0;
  for (int j = 0; j < D; j++) {
    double mw = fabs(hdw0[j]), mb = fabs(hdb0[j]);
    for (int i = 0; i < N; i++) {
      double g = hdy[(size_t)i * D + j];
      mw += fabs(g * (hx[(size_t)i * D + j] - mc[i]) * rc[i]);
      mb += fabs(g);
    }
    double a = fabs((double)dwg[j] - dwc[j]) / mw, c = fabs((double)dbg[j] - dbc[j]) / mb;
    ew = fmax(ew, isnan(a) ? INFINITY : a);
    eb = fmax(eb, isnan(c) ? INFINITY : c);
  }
  check(ew <= 1e-5, "k_layernorm_bwd dw (accumulated): max error %.2e of the "
        "element's magnitude (tol 1e-05)", ew);
  check(eb <= 1e-5, "k_layernorm_bwd db (accumulated): max error %.2e of the "
        "element's magnitude (tol 1e-05)", eb);

  /* Again, with dx over dy's buffer and fresh dw, db: same bits. */
  pair dy2 = pair_new(hdy, nd), dw2 = pair_new(hdw0, D), db2 = pair_new(hdb0, D);
  hard(k_layernorm_bwd(GPU, dy2.g, x.g, w.g, mean.g, rstd.g, dy2.g, dw2.g,
                       db2.g, N, D), "k_layernorm_bwd cuda dx = dy");
  float *dx2 = down(GPU, dy2.g, nd), *dw2g = down(GPU, dw2.g, D);
  float *db2g = down(GPU, db2.g, D);
  same_bits("k_layernorm_bwd dx = dy: dx as a separate buffer", dx2, dxg, nd);
  same_bits("k_layernorm_bwd: dw, db repeat bit for bit", dw2g, dwg, D);
  same_bits("k_layernorm_bwd: db repeats bit for bit", db2g, dbg, D);

  pair *all[] = {&x, &w, &b, &y, &mean, &rstd, &dy, &dx, &dw, &db, &dy2, &dw2, &db2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
  float *fr[] = {hx, hw, hb, hdy, hdw0, hdb0, yc, yg, mc, mg, rc, rg, dxc, dxg,
                 dwc, dwg, dbc, dbg, dx2, dw2g, db2g};
  for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

static void test_layernorm(void) {
  test_layernorm_case(7, 13);
  test_layernorm_case(5, 10);
  test_layernorm_case(3, 1000);
  test_layernorm_case(2048, 768);
  /* rows in registers: 2, 4 and 8 float4s a thread, partial turns; then
   * rows too wide for them (the loop) */
  test_layernorm_case(64, 2048);
  test_layernorm_case(9, 1540);
  test_layernorm_case(17, 4096);
  test_layernorm_case(5, 4100);
  test_layernorm_case(9, 8192);
  test_layernorm_case(3, 8200);
  test_layernorm_case(70001, 10);
  test_layernorm_case(1, 1);
}

/* ======================================================================= */
/* ReLU                                                                     */
/* ======================================================================= */

static void test_relu_case(size_t n) {
  float *hx = tl_rand(n, 2), *hg = tl_rand(n, 1);
  hx[1] = 0.0f;
  hx[2] = -0.0f;
  hx[3] = NAN;
  pair x = pair_new(hx, n), g = pair_new(hg, n);
  pair y = pair_new(NULL, n), dx = pair_new(NULL, n);
  hard(k_relu_fwd(CPU, x.c, y.c, n), "k_relu_fwd cpu");
  hard(k_relu_fwd(GPU, x.g, y.g, n), "k_relu_fwd cuda");
  hard(k_relu_bwd(CPU, g.c, x.c, dx.c, n), "k_relu_bwd cpu");
  hard(k_relu_bwd(GPU, g.g, x.g, dx.g, n), "k_relu_bwd cuda");
  float *yc = down(CPU, y.c, n), *yg = down(GPU, y.g, n);
  float *dc = down(CPU, dx.c, n), *dg = down(GPU, dx.g, n);
  char what[96];
  snprintf(what, sizeof what, "k_relu_fwd, %zu elements (0, -0, NaN among them)", n);
  same_bits(what, yg, yc, n);
  same_bits("k_relu_bwd", dg, dc, n);
  /* In place on the GPU: y over x, then dx over dy from the output. */
  hard(k_relu_fwd(GPU, x.g, x.g, n), "k_relu_fwd cuda in place");
  hard(k_relu_bwd(GPU, g.g, x.g, g.g, n), "k_relu_bwd cuda in place");
  float *y2 = down(GPU, x.g, n), *d2 = down(GPU, g.g, n);
  same_bits("k_relu_fwd in place", y2, yc, n);
  same_bits("k_relu_bwd in place, given the forward's output", d2, dc, n);
  pair_free(&x); pair_free(&g); pair_free(&y); pair_free(&dx);
  free(hx); free(hg); free(yc); free(yg); free(dc); free(dg); free(y2); free(d2);
}

/* ======================================================================= */
/* the whole toy                                                            */
/* ======================================================================= */

typedef struct hook_log {
  int order[8], n;
} hook_log;

static int log_hook(int view, void *arg) {
  hook_log *h = arg;
  if (h->n < 8) h->order[h->n] = view;
  h->n++;
  return 0;
}

typedef struct toy_out {
  float loss, loss2;
  float *grads, *grads2, *p1, *p2;   /* the two backwards', the two steps' */
  int probe[TOY_NPROBES];
  hook_log hooks;
} toy_out;

/* Init from `seed`, forward + backward + AdamW twice (the second step on a
 * fresh backward), recording what test compares. */
static void toy_run(engine *e, dtype compute, int in, int hid, int out,
                    int rows, const float *x, const float *tg, toy_out *o) {
  toy *t;
  hard(toy_create(&t, e, in, hid, out, rows, compute), "toy_create");
  hard(toy_init(t, 4242), "toy_init");
  memset(&o->hooks, 0, sizeof o->hooks);
  toy_set_grad_hook(t, log_hook, &o->hooks);
  size_t np = toy_nparams(t);
  adamw_config a = adamw_defaults();
  hard(toy_zero_grad(t), "toy_zero_grad");
  hard(toy_forward_backward(t, x, tg, rows, &o->loss), "toy_forward_backward");
  o->grads = down(e, toy_grads(t), np);
  hard(toy_adamw_step(t, &a), "toy_adamw_step");
  o->p1 = down(e, toy_params(t), np);
  hard(toy_zero_grad(t), "toy_zero_grad");
  hard(toy_forward_backward(t, x, tg, rows, &o->loss2), "toy_forward_backward");
  o->grads2 = down(e, toy_grads(t), np);
  hard(toy_adamw_step(t, &a), "toy_adamw_step");
  o->p2 = down(e, toy_params(t), np);
  for (int p = 0; p < TOY_NPROBES; p++) o->probe[p] = toy_probe_dtype(t, p);
  toy_destroy(t);
}

/* The CPU's AdamW from the same init over gradients g1 then g2 (another
 * engine's): the weights after each step into *p1, *p2. */
static void adamw_replay(int in, int hid, int out, int rows, const float *g1,
                         const float *g2, float **p1, float **p2) {
  toy *t;
  hard(toy_create(&t, CPU, in, hid, out, rows, DT_F32), "toy_create");
  hard(toy_init(t, 4242), "toy_init");
  size_t np = toy_nparams(t);
  adamw_config a = adamw_defaults();
  hard(eng_upload(CPU, toy_grads(t), g1, np * sizeof *g1), "eng_upload");
  hard(toy_adamw_step(t, &a), "toy_adamw_step");
  *p1 = down(CPU, toy_params(t), np);
  hard(eng_upload(CPU, toy_grads(t), g2, np * sizeof *g2), "eng_upload");
  hard(toy_adamw_step(t, &a), "toy_adamw_step");
  *p2 = down(CPU, toy_params(t), np);
  toy_destroy(t);
}

static void test_toy_case(int in, int hid, int out, int rows) {
  float *x = tl_rand((size_t)rows * in, 1), *tg = tl_rand((size_t)rows * out, 1);
  toy *t;
  hard(toy_create(&t, CPU, in, hid, out, rows, DT_F32), "toy_create");
  hard(toy_init(t, 4242), "toy_init");
  int nv;
  const tensor_view *v0 = toy_views(t, &nv);
  tensor_view v[8];
  memcpy(v, v0, (size_t)nv * sizeof *v);
  size_t np = toy_nparams(t);
  float *p0 = down(CPU, toy_params(t), np);
  toy_destroy(t);

  toy_out ref, got;
  toy_run(CPU, DT_F32, in, hid, out, rows, x, tg, &ref);
  static const dtype dts[] = {DT_F32, DT_BF16, DT_F16};
  /* fp16 as loose as bf16 here: one 11-bit rounding of the inputs of a
   * 10-wide LayerNorm's backward is already ~1e-2 of fc1's gradient. */
  static const double tol[] = {1e-4, 3e-2, 2e-2};
  for (int k = 0; k < 3; k++) {
    dtype dt = dts[k];
    toy_run(GPU, dt, in, hid, out, rows, x, tg, &got);
    char what[160];
    const char *dn = dtype_name(dt);
    double d, dmax = 0;
    snprintf(what, sizeof what, "toy [%d,%d,%d] x %d rows, %s: loss", in,
             hid, out, rows, dn);
    d = tl_compare(what, &got.loss, &ref.loss, 1, tol[k]);
    dmax = fmax(dmax, d);
    float *r1, *r2;
    adamw_replay(in, hid, out, rows, got.grads, got.grads2, &r1, &r2);
    for (int i = 0; i < 4; i++) {
      const char *vn = v[i].name;
      size_t o = v[i].offset, n = v[i].numel;
      snprintf(what, sizeof what, "toy %s: gradient of %s", dn, vn);
      d = tl_compare(what, got.grads + o, ref.grads + o, n, tol[k]);
      dmax = fmax(dmax, d);
      snprintf(what, sizeof what, "toy %s: gradient of %s after a step", dn, vn);
      tl_compare(what, got.grads2 + o, ref.grads2 + o, n, tol[k]);
      for (int st = 1; st <= 2; st++) {
        const float *g = st == 1 ? got.p1 : got.p2;
        snprintf(what, sizeof what, "toy %s: %s after AdamW step %d, against "
                 "the CPU's AdamW on these gradients", dn, vn, st);
        tl_compare(what, g + o, (st == 1 ? r1 : r2) + o, n, 1e-5);
        if (dt == DT_F32) {
          snprintf(what, sizeof what, "toy %s: %s after AdamW step %d", dn, vn, st);
          tl_compare(what, g + o, (st == 1 ? ref.p1 : ref.p2) + o, n, tol[k]);
        }
      }
    }
    free(r1); free(r2);
    snprintf(what, sizeof what, "toy %s: loss after one step", dn);
    tl_compare(what, &got.loss2, &ref.loss2, 1, tol[k]);
    if (dt != DT_F32)
      check(dmax > 1e-6, "toy %s: differs from fp32 by %.2e of scale (> 1e-6: "
            "the low-precision products ran)", dn, dmax);
    size_t fo = v[4].offset, fn = v[4].numel + v[5].numel;
    int zero = 1;
    for (size_t j = fo; j < fo + fn; j++) zero &= got.grads[j] == 0.0f;
    check(zero && memcmp(got.p2 + fo, p0 + fo, fn * sizeof *p0) == 0,
          "toy %s on the GPU: frozen and unused without gradient, unchanged "
          "after two AdamW steps", dn);
    check(got.hooks.n == 8 && got.hooks.order[0] == 3 &&
          got.hooks.order[1] == 2 && got.hooks.order[2] == 1 &&
          got.hooks.order[3] == 0,
          "toy %s on the GPU: hook order fc2, ln.bias, ln.weight, fc1 (%d "
          "calls over two backwards)", dn, got.hooks.n);
    int probes = got.probe[TOY_PARAM_READ] == (int)dt;
    for (int p = TOY_FC1_OUT; p < TOY_NPROBES; p++)
      probes &= got.probe[p] == DT_F32;
    check(probes, "toy %s on the GPU: weights read as %s by the products, "
          "fc1 / ln / logits / loss / grads / master stored fp32 (probes "
          "%d %d %d %d %d %d %d)", dn, dn, got.probe[0], got.probe[1],
          got.probe[2], got.probe[3], got.probe[4], got.probe[5],
          got.probe[6]);
    free(got.grads); free(got.grads2); free(got.p1); free(got.p2);
  }
  free(ref.grads); free(ref.grads2); free(ref.p1); free(ref.p2);
  free(x); free(tg); free(p0);
}

/* ======================================================================= */

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
    printf("GPU 0: %s\n", prop.name);
  return 1;
#else
  printf("SKIP: this build has no CUDA engine\n");
  return 0;
#endif
}

int main(void) {
  tl_seed(0x70bc0dau);
  if (!gpu_available()) return 77;
  hard(engine_cpu_create(&CPU, 0), "engine_cpu_create");
  hard(engine_cuda_create(&GPU, 0), "engine_cuda_create");
  test_layernorm();
  test_relu_case(1001);
  test_relu_case((1u << 20) + 3);
  test_toy_case(5, 10, 3, 7);
  test_toy_case(64, 10, 16, 1000);
  size_t in_use = 1;
  int tr = eng_tag_bytes(GPU, "test", &in_use, NULL) == 0;
  check(tr && in_use == 0 && eng_bytes_in_use(CPU) == 0,
        "the tests freed all their engine memory");
  engine_destroy(GPU);
  engine_destroy(CPU);
  return tl_finish();
}
