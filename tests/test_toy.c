/* The toy model and its kernels on the CPU engine (model/toy.h,
 * kernels.h's LayerNorm and ReLU).
 *
 * - k_layernorm_fwd against a double loop (y, mean, rstd), also on rows
 *   whose mean is large against their spread; k_layernorm_bwd against
 *   central finite differences of that loop for a random linear functional
 *   L = sum(w * y): dx written, dw and db accumulated onto random values;
 *   dx over dy's buffer gives the same bits; y over x is refused.
 * - k_relu_fwd / k_relu_bwd against loops (exact), NaN kept, gradient 0
 *   at 0, in place.
 * - The whole toy (in 5, hidden 10, out 3, 7 rows): loss against a double
 *   reference, every gradient of fc1, ln.weight, ln.bias, fc2 against
 *   central differences of that reference, frozen / unused gradients zero,
 *   the hook's order, accumulation over two backwards, seeded init.
 * - toy_adamw_step: the trainable tensors move exactly as one AdamW step
 *   computed here; frozen and unused keep their bits (PyTorch skips
 *   requires_grad=False and grad None); a few steps lower the loss.
 * - The dtype probes of an fp32 run, and a bf16 toy refused by the CPU
 *   engine.
 * Inputs are seeded random values away from zero (tests/testlib.h). */
#include "config.h"
#include "tests/testlib.h"
#include "kernels/kernels.h"
#include "model/toy.h"

#include "common/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static engine *E;

static float *host_rand(size_t n, float scale, float offset) {
  float *x = tl_malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = offset + frand(scale);
  return x;
}

static float *devf(const float *host, size_t n) {
  float *p;
  hard(eng_alloc(E, n * sizeof *p, "test", (void **)&p), "eng_alloc");
  if (host) hard(eng_upload(E, p, host, n * sizeof *p), "eng_upload");
  return p;
}

static float *hostf(const float *d, size_t n) {
  float *h = tl_malloc(n * sizeof *h);
  hard(eng_download(E, h, d, n * sizeof *h), "eng_download");
  return h;
}

static double *to_double(const float *x, size_t n) {
  double *y = tl_malloc(n * sizeof *y);
  for (size_t i = 0; i < n; i++) y[i] = x[i];
  return y;
}

/* ======================================================================= */
/* LayerNorm                                                                */
/* ======================================================================= */

static void layernorm_ref(const double *x, const double *w, const double *b,
                          int n, int d, double eps, double *y, double *mean,
                          double *rstd) {
  for (int i = 0; i < n; i++) {
    double s = 0, ss = 0;
    for (int j = 0; j < d; j++) s += x[i * d + j];
    double mu = s / d;
    for (int j = 0; j < d; j++) ss += (x[i * d + j] - mu) * (x[i * d + j] - mu);
    double r = 1 / sqrt(ss / d + eps);
    if (mean) mean[i] = mu;
    if (rstd) rstd[i] = r;
    for (int j = 0; j < d; j++) y[i * d + j] = (x[i * d + j] - mu) * r * w[j] + b[j];
  }
}

typedef struct ln_ctx {
  double *x, *w, *b, *lw;   /* lw: the functional's weights */
  int n, d;
} ln_ctx;

static double ln_loss(void *p) {
  ln_ctx *c = p;
  size_t nd = (size_t)c->n * c->d;
  double *y = tl_malloc(nd * sizeof *y), l = 0;
  layernorm_ref(c->x, c->w, c->b, c->n, c->d, 1e-5, y, NULL, NULL);
  for (size_t i = 0; i < nd; i++) l += c->lw[i] * y[i];
  free(y);
  return l;
}

static void test_layernorm_case(int N, int D, float offset) {
  const float eps = 1e-5f;
  size_t nd = (size_t)N * D;
  float *x = host_rand(nd, 1, offset), *w = host_rand(D, 1, 0);
  float *b = host_rand(D, 1, 0), *lw = host_rand(nd, 1, 0);
  float *dw0 = host_rand(D, 1, 0), *db0 = host_rand(D, 1, 0);
  ln_ctx c = {to_double(x, nd), to_double(w, D), to_double(b, D),
              to_double(lw, nd), N, D};
  double *want = tl_malloc(nd * sizeof *want), *wm = tl_malloc(N * sizeof *wm);
  double *wr = tl_malloc(N * sizeof *wr);
  layernorm_ref(c.x, c.w, c.b, N, D, eps, want, wm, wr);

  float *dx_ = devf(x, nd), *dw_ = devf(w, D), *db_ = devf(b, D);
  float *dy_ = devf(NULL, nd), *dmean = devf(NULL, N), *drstd = devf(NULL, N);
  hard(k_layernorm_fwd(E, dx_, dw_, db_, dy_, dmean, drstd, N, D, eps),
       "k_layernorm_fwd");
  float *y = hostf(dy_, nd), *m = hostf(dmean, N), *r = hostf(drstd, N);
  char what[160];
  snprintf(what, sizeof what, "k_layernorm_fwd y (n=%d, d=%d, row means near %g)",
           N, D, offset);
  tl_compare_d(what, y, want, nd, 1e-6);
  tl_compare_d("k_layernorm_fwd mean saved", m, wm, N, 1e-6);
  tl_compare_d("k_layernorm_fwd rstd saved", r, wr, N, 1e-6);

  /* Backward: FD of L = sum(lw * y). */
  double *fx = tl_malloc(nd * sizeof *fx), *fw = tl_malloc(D * sizeof *fw);
  double *fb = tl_malloc(D * sizeof *fb);
  double h = 1e-4 * (1 + fabs(offset));
  tl_fd_grad(ln_loss, &c, c.x, nd, h, fx);
  tl_fd_grad(ln_loss, &c, c.w, D, 1e-4, fw);
  tl_fd_grad(ln_loss, &c, c.b, D, 1e-4, fb);
  float *dly = devf(lw, nd), *ddx = devf(NULL, nd);
  float *gdw = devf(dw0, D), *gdb = devf(db0, D);
  hard(k_layernorm_bwd(E, dly, dx_, dw_, dmean, drstd, ddx, gdw, gdb, N, D),
       "k_layernorm_bwd");
  float *gx = hostf(ddx, nd), *gw = hostf(gdw, D), *gb = hostf(gdb, D);
  for (int j = 0; j < D; j++) { gw[j] -= dw0[j]; gb[j] -= db0[j]; }
  tl_compare_d("k_layernorm_bwd dx vs finite differences", gx, fx, nd, 1e-4);
  tl_compare_d("k_layernorm_bwd dw (accumulated) vs finite differences", gw, fw,
            D, 1e-4);
  tl_compare_d("k_layernorm_bwd db (accumulated) vs finite differences", gb, fb,
            D, 1e-4);

  /* dx over dy's buffer: the same bits. */
  float *gdw2 = devf(dw0, D), *gdb2 = devf(db0, D);
  hard(k_layernorm_bwd(E, dly, dx_, dw_, dmean, drstd, dly, gdw2, gdb2, N, D),
       "k_layernorm_bwd dx = dy");
  float *gx2 = hostf(dly, nd);
  check(memcmp(gx2, gx, nd * sizeof *gx) == 0,
        "k_layernorm_bwd with dx = dy gives the same dx bit for bit");

  int rc = k_layernorm_fwd(E, dx_, dw_, db_, dx_, dmean, drstd, N, D, eps);
  check(rc == ERR_FAIL && strstr(err_msg(), "y may not alias x"),
        "k_layernorm_fwd in place is refused (%s)", err_msg());
  err_clear();
  rc = k_layernorm_fwd(E, dx_, dw_, db_, dy_, dmean, drstd, N, 0, eps);
  check(rc == ERR_FAIL && strstr(err_msg(), "d=0 must be > 0"),
        "k_layernorm_fwd with d = 0 is refused (%s)", err_msg());
  err_clear();

  float *bufs[] = {dx_, dw_, db_, dy_, dmean, drstd, dly, ddx, gdw, gdb, gdw2,
                   gdb2};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) eng_free(E, bufs[i]);
  free(x); free(w); free(b); free(lw); free(dw0); free(db0);
  free(c.x); free(c.w); free(c.b); free(c.lw); free(want); free(wm); free(wr);
  free(y); free(m); free(r); free(fx); free(fw); free(fb); free(gx); free(gw);
  free(gb); free(gx2);
}

static void test_layernorm(void) {
  test_layernorm_case(7, 13, 0);
  test_layernorm_case(5, 10, 0);
  test_layernorm_case(3, 70, 0);     /* more than one block of 64 columns */
  test_layernorm_case(4, 11, 100);   /* mean 100, spread 1 */
}

/* ======================================================================= */
/* ReLU                                                                     */
/* ======================================================================= */

static void test_relu(void) {
  enum { N = 1001 };
  float *x = host_rand(N, 2, 0), *g = host_rand(N, 1, 0);
  x[3] = 0.0f;
  x[5] = NAN;
  float *dx_ = devf(x, N), *dy_ = devf(NULL, N), *dg = devf(g, N);
  float *dd = devf(NULL, N);
  hard(k_relu_fwd(E, dx_, dy_, N), "k_relu_fwd");
  hard(k_relu_bwd(E, dg, dx_, dd, N), "k_relu_bwd");
  float *y = hostf(dy_, N), *d = hostf(dd, N);
  int bad_f = 0, bad_b = 0, pos = 0;
  for (int i = 0; i < N; i++) {
    if (i == 5) continue;
    float want = x[i] > 0 ? x[i] : 0.0f;
    bad_f += memcmp(&y[i], &want, sizeof want) != 0 && !(want == 0 && y[i] == 0);
    float wd = x[i] > 0 ? g[i] : 0.0f;
    bad_b += d[i] != wd;
    pos += x[i] > 0;
  }
  check(bad_f == 0 && pos > N / 4 && pos < 3 * N / 4,
        "k_relu_fwd = max(x, 0) exactly (%d wrong of %d, %d positive)", bad_f,
        N, pos);
  check(isnan(y[5]), "k_relu_fwd keeps NaN (as PyTorch): %g", (double)y[5]);
  check(bad_b == 0, "k_relu_bwd = dy where x > 0, else 0 exactly (%d wrong)",
        bad_b);
  check(d[3] == 0.0f, "k_relu_bwd at x = 0 is 0 (as PyTorch)");
  /* Finite differences away from the kink (|x| >= 0.1 > h). */
  double fdmax = 0;
  for (int i = 0; i < N; i++) {
    if (i == 5 || i == 3) continue;
    double h = 1e-3, xp = x[i] + h, xm = x[i] - h;
    double fd = g[i] * ((xp > 0 ? xp : 0) - (xm > 0 ? xm : 0)) / (2 * h);
    fdmax = fmax(fdmax, fabs(fd - d[i]));
  }
  check(fdmax < 1e-6, "k_relu_bwd vs finite differences: max error %.2e",
        fdmax);
  /* In place: y over x, dx over dy. */
  hard(k_relu_fwd(E, dx_, dx_, N), "k_relu_fwd in place");
  float *y2 = hostf(dx_, N);
  check(memcmp(y2, y, N * sizeof *y) == 0, "k_relu_fwd in place: same bits");
  hard(k_relu_bwd(E, dg, dy_, dg, N), "k_relu_bwd in place");
  float *d2 = hostf(dg, N);
  check(memcmp(d2, d, N * sizeof *d) == 0,
        "k_relu_bwd given the forward's output, in place: same bits");
  eng_free(E, dx_); eng_free(E, dy_); eng_free(E, dg); eng_free(E, dd);
  free(x); free(g); free(y); free(d); free(y2); free(d2);
}

/* ======================================================================= */
/* the whole toy                                                            */
/* ======================================================================= */

enum { IN = 5, HID = 10, OUT = 3, ROWS = 7 };

typedef struct toy_ref {
  double *p;                 /* parameters, toy.h's layout */
  const tensor_view *v;
  const float *x, *t;
  int rows;
} toy_ref;

/* The toy's mean squared error in double; min |fc1 output| in *zmin. */
static double toy_loss_ref(const toy_ref *r, double *zmin) {
  const double *W1 = r->p + r->v[0].offset, *lw = r->p + r->v[1].offset,
               *lb = r->p + r->v[2].offset, *W2 = r->p + r->v[3].offset;
  double loss = 0, zm = INFINITY;
  for (int i = 0; i < r->rows; i++) {
    double a[HID], s = 0, ss = 0;
    for (int j = 0; j < HID; j++) {
      double z = 0;
      for (int k = 0; k < IN; k++) z += r->x[i * IN + k] * W1[j * IN + k];
      zm = fmin(zm, fabs(z));
      a[j] = z > 0 ? z : 0;
      s += a[j];
    }
    double mu = s / HID;
    for (int j = 0; j < HID; j++) ss += (a[j] - mu) * (a[j] - mu);
    double rs = 1 / sqrt(ss / HID + 1e-5);
    for (int o = 0; o < OUT; o++) {
      double y = 0;
      for (int j = 0; j < HID; j++)
        y += ((a[j] - mu) * rs * lw[j] + lb[j]) * W2[o * HID + j];
      double d = y - r->t[i * OUT + o];
      loss += d * d;
    }
  }
  if (zmin) *zmin = zm;
  return loss / (r->rows * OUT);
}

static double toy_loss_cb(void *p) { return toy_loss_ref(p, NULL); }

typedef struct hook_log {
  int order[16], n;
} hook_log;

static int log_hook(int view, void *arg) {
  hook_log *h = arg;
  if (h->n < 16) h->order[h->n] = view;
  h->n++;
  return 0;
}

/* Inputs whose fc1 outputs all stay 1e-2 away from the ReLU kink, so the
 * finite differences (h = 1e-5) never straddle it. */
static void draw_batch(toy_ref *r, float *x, float *t) {
  for (int tries = 0; tries < 100; tries++) {
    for (int i = 0; i < ROWS * IN; i++) x[i] = frand(1);
    for (int i = 0; i < ROWS * OUT; i++) t[i] = frand(1);
    double zmin;
    toy_loss_ref(r, &zmin);
    if (zmin > 1e-2) return;
  }
  fprintf(stderr, "test_toy: no batch away from the ReLU kink\n");
  exit(99);
}

static void test_toy_model(void) {
  toy *t;
  hard(toy_create(&t, E, IN, HID, OUT, ROWS, DT_F32), "toy_create");
  hard(toy_init(t, 1234), "toy_init");
  int nv;
  const tensor_view *v = toy_views(t, &nv);
  size_t np = toy_nparams(t);
  static const char *const names[] = {"fc1.weight", "ln.weight", "ln.bias",
                                      "fc2.weight", "frozen", "unused"};
  int names_ok = nv == 6;
  for (int i = 0; i < nv && names_ok; i++)
    names_ok = strcmp(v[i].name, names[i]) == 0 &&
               (i == 0 || v[i].offset == v[i - 1].offset + v[i - 1].numel);
  check(names_ok && np == (size_t)HID * IN + 2 * HID + OUT * HID + 2 + 3,
        "views in toy.h's order, contiguous, %zu parameters", np);
  check(toy_has_grad(t, 0) && toy_has_grad(t, 1) && toy_has_grad(t, 2) &&
        toy_has_grad(t, 3) && !toy_has_grad(t, 4) && !toy_has_grad(t, 5),
        "gradients for fc1, ln.weight, ln.bias, fc2 only");

  float *p0 = hostf(toy_params(t), np);
  int init_ok = 1;
  for (int j = 0; j < HID; j++)
    init_ok &= p0[v[1].offset + j] == 1.0f && p0[v[2].offset + j] == 0.0f;
  init_ok &= p0[v[4].offset] == 2.0f && p0[v[4].offset + 1] == 2.0f;
  double lim = 3 * sqrt(2.0 / (HID + IN)), ss = 0;
  for (size_t j = 0; j < v[0].numel; j++) {
    init_ok &= fabsf(p0[j]) <= lim && p0[j] != 0;
    ss += (double)p0[j] * p0[j];
  }
  check(init_ok, "init: ln.weight ones, ln.bias zeros, frozen {2, 2}, fc1 "
        "within 3 std (rms %.3f, std %.3f)", sqrt(ss / v[0].numel),
        sqrt(2.0 / (HID + IN)));
  toy *t2;
  hard(toy_create(&t2, E, IN, HID, OUT, ROWS, DT_F32), "toy_create");
  hard(toy_init(t2, 1234), "toy_init");
  float *p2 = hostf(toy_params(t2), np);
  check(memcmp(p0, p2, np * sizeof *p0) == 0, "same seed, same weights");
  hard(toy_init(t2, 1235), "toy_init");
  free(p2);
  p2 = hostf(toy_params(t2), np);
  check(memcmp(p0, p2, v[0].numel * sizeof *p0) != 0,
        "another seed, other weights");
  toy_destroy(t2);

  /* Loss and gradients against the double reference. */
  float x[ROWS * IN], tg[ROWS * OUT];
  toy_ref r = {to_double(p0, np), v, x, tg, ROWS};
  draw_batch(&r, x, tg);
  hook_log hl = {{0}, 0};
  toy_set_grad_hook(t, log_hook, &hl);
  hard(toy_zero_grad(t), "toy_zero_grad");
  float loss;
  hard(toy_forward_backward(t, x, tg, ROWS, &loss), "toy_forward_backward");
  double want = toy_loss_ref(&r, NULL);
  check(fabs(loss - want) <= 1e-6 * want, "toy loss %.8g vs double %.8g",
        (double)loss, want);
  check(hl.n == 4 && hl.order[0] == 3 && hl.order[1] == 2 &&
        hl.order[2] == 1 && hl.order[3] == 0,
        "hook called %d times in the order fc2, ln.bias, ln.weight, fc1 "
        "(views %d %d %d %d)", hl.n, hl.order[0], hl.order[1], hl.order[2],
        hl.order[3]);
  float *g = hostf(toy_grads(t), np);
  double *fd = tl_malloc(np * sizeof *fd);
  tl_fd_grad(toy_loss_cb, &r, r.p, np, 1e-5, fd);
  for (int i = 0; i < 4; i++) {
    char what[96];
    snprintf(what, sizeof what, "toy gradient of %s vs finite differences",
             v[i].name);
    tl_compare_d(what, g + v[i].offset, fd + v[i].offset, v[i].numel, 1e-4);
  }
  int zero = 1;
  for (int i = 4; i < 6; i++)
    for (size_t j = 0; j < v[i].numel; j++) zero &= g[v[i].offset + j] == 0.0f;
  check(zero, "frozen and unused have no gradient (their views stay 0)");

  /* A second backward without zero_grad adds. */
  float loss2;
  hard(toy_forward_backward(t, x, tg, ROWS, &loss2), "toy_forward_backward");
  float *g2 = hostf(toy_grads(t), np);
  double worst = 0;
  for (size_t j = 0; j < np; j++) worst = fmax(worst, fabs(g2[j] - 2.0 * g[j]));
  check(loss2 == loss && worst <= 1e-6, "two backwards accumulate: 2x the "
        "gradient (max error %.2e), same loss", worst);
  int rc = toy_forward_backward(t, x, tg, ROWS + 1, &loss2);
  check(rc == ERR_FAIL && strstr(err_msg(), "allowed: 1 to 7"),
        "more rows than toy_create's are refused (%s)", err_msg());
  err_clear();

  /* Probes of an fp32 run, before and after the optimizer. */
  int all = 1;
  for (int p = 0; p < TOY_MASTER; p++) all &= toy_probe_dtype(t, p) == DT_F32;
  check(all && toy_probe_dtype(t, TOY_MASTER) == -1,
        "fp32 toy: every probe fp32, master weights not yet seen");

  /* AdamW: one step from the gradient g (one backward's). */
  hard(toy_zero_grad(t), "toy_zero_grad");
  hard(toy_forward_backward(t, x, tg, ROWS, &loss), "toy_forward_backward");
  adamw_config o = adamw_defaults();
  hard(toy_adamw_step(t, &o), "toy_adamw_step");
  check(toy_probe_dtype(t, TOY_MASTER) == DT_F32, "master weights fp32");
  float *p1 = hostf(toy_params(t), np);
  double err = 0, moved = 0;
  for (int i = 0; i < 4; i++)
    for (size_t j = 0; j < v[i].numel; j++) {
      size_t k = v[i].offset + j;
      double p = p0[k], gr = g[k];
      p -= o.lr * o.weight_decay * p;
      double m = (1 - o.beta1) * gr, vv = (1 - o.beta2) * gr * gr;
      p -= o.lr * sqrt(1 - o.beta2) / (1 - o.beta1) * m / (sqrt(vv) + o.eps);
      err = fmax(err, fabs(p1[k] - p));
      moved = fmax(moved, fabs(p1[k] - p0[k]));
    }
  check(err <= 1e-6 && moved > 5e-4,
        "AdamW step on the trainable tensors as computed here (max error "
        "%.2e, largest move %.2e)", err, moved);
  size_t fo = v[4].offset, fn = v[4].numel + v[5].numel;
  check(memcmp(p1 + fo, p0 + fo, fn * sizeof *p0) == 0,
        "AdamW leaves frozen and unused bit for bit (no weight decay either)");
  /* Training lowers the loss. */
  float first = loss, last = loss;
  for (int s = 0; s < 50; s++) {
    hard(toy_zero_grad(t), "toy_zero_grad");
    hard(toy_forward_backward(t, x, tg, ROWS, &last), "toy_forward_backward");
    hard(toy_adamw_step(t, &o), "toy_adamw_step");
  }
  float *p3 = hostf(toy_params(t), np);
  check(last < 0.8f * first && memcmp(p3 + fo, p0 + fo, fn * sizeof *p0) == 0,
        "51 AdamW steps: loss %.4f -> %.4f, frozen and unused unchanged",
        (double)first, (double)last);
  toy_destroy(t);
  check(eng_bytes_in_use(E) == 0, "toy_destroy gave back all its memory "
        "(%zu bytes left)", eng_bytes_in_use(E));

  /* The CPU engine computes in fp32 only. */
  hard(toy_create(&t, E, IN, HID, OUT, ROWS, DT_BF16), "toy_create bf16");
  hard(toy_init(t, 1), "toy_init");
  rc = toy_forward_backward(t, x, tg, ROWS, &loss);
  check(rc == ERR_FAIL, "a bf16 toy on the CPU engine is refused (%s)",
        err_msg());
  err_clear();
  toy_destroy(t);
  free(p0); free(p1); free(p2); free(p3); free(g); free(g2); free(fd);
  free(r.p);
}

int main(void) {
  tl_seed(0x70b1a5eedull);
  hard(engine_cpu_create(&E, 3), "engine_cpu_create");
  test_layernorm();
  test_relu();
  test_toy_model();
  engine_destroy(E);
  return tl_finish();
}
