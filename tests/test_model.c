/* model/: sizes and parameter counts, the layout, initialisation, the whole
 * model's gradient against finite differences, the loss at initialisation,
 * overfitting one batch, AdamW against hand-computed values, and the
 * memory: one allocation per buffer, nothing allocated during a step.
 * The same for the model with LayerNorm in place of RMSNorm (a weight and
 * a bias per norm, random and away from 1 and 0 in the gradient checks),
 * which the fused path refuses. Runs on the CPU engine. Exit 0 when every check passes, 1 when one fails,
 * 99 when the test cannot run (no engine, no memory). */
#include "config.h"
#include "tests/testlib.h"
#include "tests/model_helpers.h"
#include "model/model.h"
#include "model/rng.h"

#include "common/check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>




static engine *E;

static model *make_norm(const char *size, model_norm norm, int b, int t,
                        uint64_t seed) {
  model_config c;
  model *m;
  if (model_config_by_name(size, &c) != 0) {
    fprintf(stderr, "test_model: no size %s\n", size);
    exit(99);
  }
  c.norm = norm;
  hard(model_create(&m, E, &c, b, t, DT_F32), "model_create");
  hard(model_init(m, seed), "model_init");
  return m;
}

static model *make(const char *size, int b, int t, uint64_t seed) {
  return make_norm(size, NORM_RMS, b, t, seed);
}

static int is_bias(const char *name) {
  size_t n = strlen(name);
  return n >= 5 && strcmp(name + n - 5, ".bias") == 0;
}

static float *get_params(model *m) {
  size_t n = model_nparams(m);
  float *h = tl_malloc(n * sizeof *h);
  hard(eng_download(E, h, model_params(m), n * sizeof *h), "download");
  hard(eng_sync(E), "sync");
  return h;
}

static void set_params(model *m, const float *h) {
  hard(model_set_params(m, 0, h, model_nparams(m)), "model_set_params");
  hard(eng_sync(E), "sync");
}

static float *get_grads(model *m) {
  size_t n = model_nparams(m);
  float *h = tl_malloc(n * sizeof *h);
  hard(eng_download(E, h, model_grads(m), n * sizeof *h), "download");
  hard(eng_sync(E), "sync");
  return h;
}

/* Seeded token ids in [0, vocab), never all the same. */
static void tokens(int32_t *x, int n, int vocab, uint64_t seed) {
  rng r;
  rng_stream(&r, seed, 99);
  for (int i = 0; i < n; i++) x[i] = (int32_t)(rng_next(&r) % (uint64_t)vocab);
}

/* Norm gains away from 1 so that a gain used wrongly (or not at all) shows
 * in the gradients; LayerNorm's biases away from 0 (+-[0.1, 0.5)) for the
 * same reason. */
static void random_gains(model *m, uint64_t seed) {
  float *p = get_params(m);
  int nv;
  const tensor_view *v = model_views(m, &nv);
  rng r;
  rng_stream(&r, seed, 7);
  for (int i = 0; i < nv; i++)
    if (v[i].ndim == 1)
      for (size_t j = 0; j < v[i].numel; j++) {
        if (!is_bias(v[i].name)) {
          p[v[i].offset + j] = (float)(1.0 + 0.3 * rng_normal(&r));
          continue;
        }
        double u = rng_uniform(&r);   /* +-[0.1, 0.5) */
        p[v[i].offset + j] = (float)((u < 0.5 ? -1 : 1) *
                                     (0.1 + 0.8 * fabs(u - 0.5)));
      }
  set_params(m, p);
  free(p);
}

/* ---- sizes and layout --------------------------------------------------- */

static void test_sizes(void) {
  static const struct {
    const char *name;
    size_t params;
  } want[] = {
      {"small", 128625408},   {"medium", 423183360},  {"large", 969411840},
      {"xl", 1998235200},     {"2.7B", 3406809600},
      /* 2026's 10B: 50 * (4 d^2 + 3 d d_ff + 2 d) + 2 V d + d with d 4608,
       * d_ff 12288, V 10000 (not in model.md's table; worked out by hand). */
      {"10B", 12832823808ULL},
      /* tiny: 2*64*32 + 2*(4*32*32 + 3*32*48 + 2*32) + 32 */
      {"tiny", 21664},
      /* nano: 2*16*8 + (4*8*8 + 3*8*12 + 2*8) + 8 */
      {"nano", 824},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    model_config c;
    int found = model_config_by_name(want[i].name, &c) == 0;
    check(found, "size %s exists", want[i].name);
    if (!found) continue;
    char err[256];
    check(model_config_check(&c, err, sizeof err) == 0, "size %s is valid%s%s",
          want[i].name, err[0] ? ": " : "", err);
    tensor_view *v;
    int nv;
    size_t total;
    if (model_layout(&c, &v, &nv, &total) != 0) {
      check(0, "%s: model_layout: %s", want[i].name, err_msg());
      continue;
    }
    size_t off = 0;
    int contiguous = 1;
    for (int k = 0; k < nv; k++) {
      size_t numel = (size_t)v[k].shape[0] *
                     (v[k].ndim == 2 ? (size_t)v[k].shape[1] : 1);
      if (v[k].offset != off || v[k].numel != numel) contiguous = 0;
      off += v[k].numel;
    }
    check(total == want[i].params && off == total && contiguous,
          "%s: layout of %d tensors is contiguous and sums to %zu",
          want[i].name, nv, total);
    check(nv == 3 + 9 * c.layers, "%s: %d tensors == 3 + 9 * %d layers",
          want[i].name, nv, c.layers);
    free(v);
  }
  const char *const *names = model_size_names();
  int n = 0;
  while (names[n]) n++;
  check(n == 8, "model_size_names lists the 8 sizes (%d)", n);
  model_config c;
  check(model_config_by_name("huge", &c) == -1, "unknown size \"huge\" is -1");
}

static void test_layout_names(void) {
  model_config c;
  model_config_by_name("tiny", &c);
  tensor_view *v;
  int nv;
  size_t total;
  if (model_layout(&c, &v, &nv, &total) != 0) {
    check(0, "tiny layout: %s", err_msg());
    return;
  }
  static const struct {
    int index;
    const char *name;
    int ndim, d0, d1;
  } want[] = {
      {0, "token_embeddings.weight", 2, 64, 32},
      {1, "layers.0.ln1.weight", 1, 32, 0},
      {2, "layers.0.attn.q_proj.weight", 2, 32, 32},
      {3, "layers.0.attn.k_proj.weight", 2, 32, 32},
      {4, "layers.0.attn.v_proj.weight", 2, 32, 32},
      {5, "layers.0.attn.output_proj.weight", 2, 32, 32},
      {6, "layers.0.ln2.weight", 1, 32, 0},
      {7, "layers.0.ffn.w1.weight", 2, 48, 32},
      {8, "layers.0.ffn.w2.weight", 2, 32, 48},
      {9, "layers.0.ffn.w3.weight", 2, 48, 32},
      {10, "layers.1.ln1.weight", 1, 32, 0},
      {18, "layers.1.ffn.w3.weight", 2, 48, 32},
      {19, "ln_final.weight", 1, 32, 0},
      {20, "lm_head.weight", 2, 64, 32},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const tensor_view *t = &v[want[i].index];
    char shape[32], have[32];
    if (want[i].ndim == 1) snprintf(shape, sizeof shape, "[%d]", want[i].d0);
    else snprintf(shape, sizeof shape, "[%d, %d]", want[i].d0, want[i].d1);
    if (t->ndim == 1) snprintf(have, sizeof have, "[%d]", t->shape[0]);
    else snprintf(have, sizeof have, "[%d, %d]", t->shape[0], t->shape[1]);
    check(strcmp(t->name, want[i].name) == 0 && strcmp(shape, have) == 0,
          "tiny tensor %d is %s %s (have %s %s)", want[i].index,
          want[i].name, shape, t->name, have);
  }
  free(v);

  struct {
    int d, heads;
    const char *msg;
  } bad[] = {{30, 4, "heads (4) must divide d_model (30)"},
             {36, 4, "d_head = d_model / heads = 9 must be even"},
             {32, 0, "heads must be positive"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    model_config b = c;
    b.d_model = bad[i].d;
    b.heads = bad[i].heads;
    char err[256];
    int rc = model_config_check(&b, err, sizeof err);
    check(rc == -1 && strstr(err, bad[i].msg) != NULL,
          "d_model %d, heads %d rejected: \"%s\"", bad[i].d, bad[i].heads,
          err);
  }
}

/* ---- LayerNorm: sizes, layout, where it runs ----------------------------- */

/* Every norm gains a bias of d_model: 2 per layer and the final one, each
 * right after its weight (torch.nn.LayerNorm's state_dict order). */
static void test_layernorm_layout(void) {
  static const struct {
    const char *name;
    size_t params;
  } want[] = {
      /* small: 128625408 + (2 * 12 + 1) * 768 */
      {"small", 128644608},
      /* 2.7B: 3406809600 + (2 * 32 + 1) * 2560 */
      {"2.7B", 3406976000ULL},
      /* tiny: 21664 + (2 * 2 + 1) * 32 */
      {"tiny", 21824},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    model_config c;
    model_config_by_name(want[i].name, &c);
    c.norm = NORM_LAYER;
    tensor_view *v;
    int nv;
    size_t total;
    if (model_layout(&c, &v, &nv, &total) != 0) {
      check(0, "%s layernorm: model_layout: %s", want[i].name, err_msg());
      continue;
    }
    size_t off = 0;
    int contiguous = 1;
    for (int k = 0; k < nv; k++) {
      if (v[k].offset != off) contiguous = 0;
      off += v[k].numel;
    }
    check(total == want[i].params && off == total && contiguous &&
              nv == 4 + 11 * c.layers,
          "%s layernorm: %d tensors (4 + 11 * %d layers), contiguous, %zu "
          "parameters (want %zu)", want[i].name, nv, c.layers, total,
          want[i].params);
    free(v);
  }

  model_config c;
  model_config_by_name("tiny", &c);
  c.norm = NORM_LAYER;
  tensor_view *v;
  int nv;
  size_t total;
  if (model_layout(&c, &v, &nv, &total) != 0) {
    check(0, "tiny layernorm layout: %s", err_msg());
    return;
  }
  static const struct {
    int index;
    const char *name;
    int d0, d1;
  } names[] = {
      {1, "layers.0.ln1.weight", 32, 0},
      {2, "layers.0.ln1.bias", 32, 0},
      {3, "layers.0.attn.q_proj.weight", 32, 32},
      {6, "layers.0.attn.output_proj.weight", 32, 32},
      {7, "layers.0.ln2.weight", 32, 0},
      {8, "layers.0.ln2.bias", 32, 0},
      {9, "layers.0.ffn.w1.weight", 48, 32},
      {11, "layers.0.ffn.w3.weight", 48, 32},
      {12, "layers.1.ln1.weight", 32, 0},
      {13, "layers.1.ln1.bias", 32, 0},
      {22, "layers.1.ffn.w3.weight", 48, 32},
      {23, "ln_final.weight", 32, 0},
      {24, "ln_final.bias", 32, 0},
      {25, "lm_head.weight", 64, 32},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const tensor_view *t = &v[names[i].index];
    check(strcmp(t->name, names[i].name) == 0 && t->shape[0] == names[i].d0 &&
              (names[i].d1 == 0 ? t->ndim == 1 : t->shape[1] == names[i].d1),
          "tiny layernorm tensor %d is %s (have %s)", names[i].index,
          names[i].name, t->name);
  }
  free(v);

  c.norm = (model_norm)7;
  char err[256];
  check(model_config_check(&c, err, sizeof err) == -1 &&
            strstr(err, "norm must be") != NULL,
        "an unknown norm is rejected: \"%s\"", err);
  model_norm n;
  check(model_norm_parse("layernorm", &n) == 0 && n == NORM_LAYER &&
            model_norm_parse("rmsnorm", &n) == 0 && n == NORM_RMS &&
            model_norm_parse("batchnorm", &n) == -1 &&
            strcmp(model_norm_name(NORM_LAYER), "layernorm") == 0,
        "norm names: rmsnorm, layernorm; others refused");

  /* The fused path fuses RMSNorm: it refuses LayerNorm, naming the path
   * that takes it. */
  c.norm = NORM_LAYER;
  model_options o = {.compute = DT_F32, .fused = 1,
                     .attention = ATTN_MATERIALIZED, .f32 = F32_EXACT};
  model *m = NULL;
  err_clear();
  int rc = model_create_ex(&m, E, &c, 1, 4, &o);
  check(rc == ERR_FAIL && m == NULL &&
            strstr(err_msg(), "fused path fuses RMSNorm only (allowed with "
                              "LayerNorm: the op-by-op path)") != NULL,
        "the fused path refuses LayerNorm: %s", err_msg());
  err_clear();

  /* Backward's SM reserve (model_options.sm_reserve) is refused at
   * creation by an engine without SMs, not at the first backward. */
  c.norm = NORM_RMS;
  o.sm_reserve = 8;
  rc = model_create_ex(&m, E, &c, 1, 4, &o);
  check(rc == ERR_FAIL && m == NULL &&
            strstr(err_msg(), "the cpu engine has no SMs to reserve") != NULL,
        "the CPU engine refuses a model with sm_reserve 8 at creation: %s",
        err_msg());
  err_clear();
}

/* ---- initialisation ----------------------------------------------------- */

/* Weights by model.md's rules; with LayerNorm its weights ones and its
 * biases zeros, as torch.nn.LayerNorm's. */
static void test_init(model_norm norm) {
  model *a = make_norm("tiny", norm, 1, 4, 1234);
  model *b = make_norm("tiny", norm, 1, 4, 1234);
  model *c = make_norm("tiny", norm, 1, 4, 1235);
  const char *nn = model_norm_name(norm);
  float *pa = get_params(a), *pb = get_params(b), *pc = get_params(c);
  size_t n = model_nparams(a);
  check(memcmp(pa, pb, n * sizeof *pa) == 0, "%s: same seed, same "
        "parameters", nn);
  check(memcmp(pa, pc, n * sizeof *pa) != 0, "%s: another seed, other "
        "values", nn);
  int nv;
  const tensor_view *v = model_views(a, &nv);
  for (int i = 0; i < nv; i++) {
    const float *x = pa + v[i].offset;
    if (v[i].ndim == 1) {
      float want = is_bias(v[i].name) ? 0.0f : 1.0f;
      int all = 1;
      for (size_t j = 0; j < v[i].numel; j++) all &= x[j] == want;
      check(all, "%s: %s is all %s", nn, v[i].name, want ? "ones" : "zeros");
      continue;
    }
    double std = strcmp(v[i].name, "token_embeddings.weight") == 0
                     ? 1.0
                     : sqrt(2.0 / (v[i].shape[0] + v[i].shape[1]));
    double s = 0, s2 = 0, most = 0;
    for (size_t j = 0; j < v[i].numel; j++) {
      s += x[j];
      s2 += (double)x[j] * x[j];
      if (fabs(x[j]) > most) most = fabs(x[j]);
    }
    double k = (double)v[i].numel, mean = s / k;
    double sd = sqrt(s2 / k - mean * mean);
    /* A normal truncated at +-3 std has std 0.9866 * std. With >= 1024
     * samples the estimate is within 10% and the mean within 0.15 std with
     * overwhelming probability (5 sigma of the sampling spread). */
    check(most <= 3.0 * std * (1 + 1e-6) &&
              fabs(sd / (0.9866 * std) - 1) < 0.1 && fabs(mean) < 0.15 * std,
          "%s: %s: std %.4f (want %.4f), mean %+.4f, max |x| %.3f <= 3 "
          "std", nn, v[i].name, sd, 0.9866 * std, mean, most);
  }
  free(pa);
  free(pb);
  free(pc);
  model_destroy(a);
  model_destroy(b);
  model_destroy(c);
}

/* ---- gradients against finite differences ------------------------------- */

/* Mean cross-entropy of the last forward, in double from the fp32 logits. */
static double loss_of_logits(model *m, const int32_t *targets, int n,
                             float *buf) {
  int V = model_get_config(m)->vocab;
  hard(eng_download(E, buf, model_logits(m), (size_t)n * V * sizeof *buf),
       "download logits");
  hard(eng_sync(E), "sync");
  double sum = 0;
  for (int i = 0; i < n; i++) {
    const float *z = buf + (size_t)i * V;
    double mx = z[0];
    for (int j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
    double se = 0;
    for (int j = 0; j < V; j++) se += exp(z[j] - mx);
    sum += mx + log(se) - z[targets[i]];
  }
  return sum / n;
}

static double fd_loss(model *m, const int32_t *ids, const int32_t *targets,
                      int b, int t, float *buf) {
  hard(model_forward(m, ids, NULL, b, t, NULL), "forward");
  return loss_of_logits(m, targets, b * t, buf);
}

/* The gradient of every tensor against central differences of the loss,
 * computed in double from the fp32 model: each difference steps one fp32
 * parameter by h = 1e-2 * max(1, |p|), divides by the step actually taken,
 * (float)(p + h) - (float)(p - h), and takes the loss in double from the
 * fp32 logits. Its error is the O(h^2) truncation (about 1e-5 relative
 * here) plus the fp32 noise of the loss (about 1e-7) over h (about 1e-5).
 * An element passes when
 *   |analytic - fd| <= tol_rel * |fd| + tol_abs * max |analytic| of its tensor,
 * the absolute term because elements with a tiny gradient carry the same
 * absolute noise as the others. A wrong term in a backward is off by far
 * more than 1%. `every` = 0 checks every element, else `every` random
 * elements of each tensor. */
static void gradcheck(const char *size, model_norm norm, int b, int t,
                      int every, double tol_rel, double tol_abs) {
  model *m = make_norm(size, norm, b, t, 42);
  const char *nn = model_norm_name(norm);
  random_gains(m, 43);
  const model_config *c = model_get_config(m);
  int n = b * t;
  int32_t *ids = tl_malloc((size_t)n * sizeof *ids);
  int32_t *tg = tl_malloc((size_t)n * sizeof *tg);
  tokens(ids, n, c->vocab, 1);
  tokens(tg, n, c->vocab, 2);
  float *buf = tl_malloc((size_t)n * c->vocab * sizeof *buf);
  float loss;
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, ids, tg, b, t, &loss), "forward");
  double dl = loss_of_logits(m, tg, n, buf);
  check(fabs(dl - loss) < 1e-5 * fabs(dl), "%s %s: forward loss %.7f == "
        "cross-entropy of its logits %.7f", size, nn, loss, dl);
  hard(model_backward(m), "backward");
  float *g = get_grads(m), *p = get_params(m);
  int nv;
  const tensor_view *v = model_views(m, &nv);
  rng r;
  rng_stream(&r, 5, 5);
  for (int i = 0; i < nv; i++) {
    size_t cnt = v[i].numel;
    if (every && (size_t)every < cnt) cnt = (size_t)every;
    double gmax = 0;
    for (size_t j = 0; j < v[i].numel; j++)
      gmax = fmax(gmax, fabs(g[v[i].offset + j]));
    double worst = 0;
    size_t worst_j = 0, bad = 0;
    double worst_g = 0, worst_fd = 0;
    for (size_t s = 0; s < cnt; s++) {
      size_t j = cnt == v[i].numel ? s : (size_t)(rng_next(&r) % v[i].numel);
      size_t at = v[i].offset + j;
      float p0 = p[at];
      double h = 1e-2 * fmax(1.0, fabs(p0));
      float up = (float)(p0 + h), dn = (float)(p0 - h);
      p[at] = up;
      set_params(m, p);
      double lu = fd_loss(m, ids, tg, b, t, buf);
      p[at] = dn;
      set_params(m, p);
      double ld = fd_loss(m, ids, tg, b, t, buf);
      p[at] = p0;
      double fd = (lu - ld) / ((double)up - (double)dn);
      double diff = fabs(fd - g[at]);
      double tol = tol_abs * gmax + tol_rel * fabs(fd);
      if (diff > tol) bad++;
      if (diff / (tol > 0 ? tol : 1) > worst) {
        worst = diff / (tol > 0 ? tol : 1);
        worst_j = j;
        worst_g = g[at];
        worst_fd = fd;
      }
    }
    set_params(m, p);
    check(bad == 0 && gmax > 0,
          "%s %s: grad %s: %zu of %zu elements within %.0e * |fd| + %.0e * "
          "max|g| (max|g| %.3e; worst [%zu] at %.2f of the tolerance: "
          "analytic %.6e fd %.6e)", size, nn, v[i].name, cnt - bad, cnt, tol_rel,
          tol_abs, gmax, worst_j, worst, worst_g, worst_fd);
  }
  free(g);
  free(p);
  free(buf);
  free(ids);
  free(tg);
  model_destroy(m);
}

/* ---- loss at initialisation --------------------------------------------- */

/* At init the final norm's output x has mean square 1 per element (gains
 * are ones), and lm_head's rows are independent of it with variance
 * sigma^2 = 0.9733 * 2 / (d + V) per element (0.9733: the variance of a
 * normal truncated at +-3). So each logit is ~ N(0, s^2), s^2 = d sigma^2,
 * independently across the vocabulary, and the expected loss is
 *   E[logsumexp z] - E[z_target] ~ ln V + s^2/2 - (e^{s^2} - 1) / (2V).
 * For tiny (d 32, V 64) s^2 = 0.649 and the expectation is 4.476, against
 * ln 64 = 4.159. One batch of 8 x 32 = 256 positions averages per-position
 * losses that spread with s ~ 0.8, correlated through the shared weights:
 * over 40 seeds (weights and batch) the loss had mean 4.470 and standard
 * deviation 0.054, so the tolerance 0.25 is about 4.5 standard
 * deviations. */
static void test_init_loss(void) {
  const int b = 8, t = 32;
  model *m = make("tiny", b, t, 7);
  const model_config *c = model_get_config(m);
  int32_t ids[8 * 32], tg[8 * 32];
  tokens(ids, b * t, c->vocab, 11);
  tokens(tg, b * t, c->vocab, 12);
  float loss;
  hard(model_forward(m, ids, tg, b, t, &loss), "forward");
  double V = c->vocab, s2 = 0.97334 * 2.0 * c->d_model / (c->d_model + V);
  double want = log(V) + s2 / 2 - (exp(s2) - 1) / (2 * V);
  check(fabs(loss - want) < 0.25,
        "tiny: loss at init %.4f within 0.25 of ln V + s^2/2 = %.4f "
        "(ln V = %.4f)", loss, want, log(V));
  model_destroy(m);
}

/* ---- overfitting one batch ---------------------------------------------- */

/* Trains tiny (with `norm`) on one batch with AdamW's defaults (lr 1e-3:
 * about 50 steps) until its loss is 10x lower, at most 300 steps; checks
 * that it got there and returns the trained model. */
static model *overfit(model_norm norm, const char *what) {
  const int b = 2, t = 12;
  model *m = make_norm("tiny", norm, b, t, 3);
  const model_config *c = model_get_config(m);
  int32_t ids[2 * 12], tg[2 * 12];
  tokens(ids, b * t, c->vocab, 21);
  tokens(tg, b * t, c->vocab, 22);
  adamw_config o = adamw_defaults();
  float first = 0, loss = 0;
  int step, steps = 300;
  for (step = 0; step < steps; step++) {
    hard(model_zero_grad(m), "zero_grad");
    hard(model_forward(m, ids, tg, b, t, &loss), "forward");
    if (step == 0) first = loss;
    if (loss < first / 10) break;
    hard(model_backward(m), "backward");
    hard(model_adamw_step(m, &o), "adamw");
  }
  check(loss < first / 10,
        "%s overfits one batch: loss %.4f -> %.4f after %d AdamW steps "
        "(defaults, lr 1e-3; at least 10x lower within %d)", what, first,
        loss, step, steps);
  return m;
}

static void test_overfit(void) { model_destroy(overfit(NORM_RMS, "tiny")); }

/* LayerNorm trains: AdamW moves its weights and biases with the rest
 * (one batch overfit as with RMSNorm), and the optimizer in backward
 * updates the biases too, bit for bit as AdamW after backward. */
static void test_layernorm_training(void) {
  const int b = 2, t = 12;
  model *m = overfit(NORM_LAYER, "tiny layernorm");
  const model_config *c = model_get_config(m);
  float *p = get_params(m);
  int nv, moved = 0, nb = 0;
  const tensor_view *v = model_views(m, &nv);
  for (int i = 0; i < nv; i++) {
    if (!is_bias(v[i].name)) continue;
    nb++;
    for (size_t j = 0; j < v[i].numel; j++)
      if (p[v[i].offset + j] != 0.0f) {
        moved++;
        break;
      }
  }
  check(nb == 2 * c->layers + 1 && moved == nb,
        "AdamW moved every one of the %d biases from zero (%d did)", nb,
        moved);
  free(p);
  model_destroy(m);

  model *after = make_norm("tiny", NORM_LAYER, b, t, 17);
  model *in_bwd = make_norm("tiny", NORM_LAYER, b, t, 17);
  random_gains(after, 18);
  random_gains(in_bwd, 18);
  check(adamw_forms_agree(after, in_bwd, b, t, 3),
        "tiny layernorm: the optimizer in backward equals AdamW after "
        "backward, bit for bit, over 3 steps");
  model_destroy(after);
  model_destroy(in_bwd);
}

/* ---- AdamW by hand ------------------------------------------------------ */

static void test_adamw(void) {
  model *m = make("nano", 1, 4, 5);
  size_t n = model_nparams(m);
  float *p = get_params(m);
  float *g = tl_malloc(n * sizeof *g);
  rng r;
  rng_stream(&r, 77, 0);
  for (size_t i = 0; i < n; i++) g[i] = (float)(0.1 * rng_normal(&r));
  hard(eng_upload(E, model_grads(m), g, n * sizeof *g), "upload grads");
  adamw_config o = {0.05f, 0.8f, 0.95f, 1e-6f, 0.1f};
  for (int s = 0; s < 3; s++) hard(model_adamw_step(m, &o), "adamw");
  float *q = get_params(m);
  /* A few elements across the buffer, by the course's formulas, in double
   * with the fp32 hyperparameters. */
  size_t at[] = {0, 1, 200, 257, n / 2, n - 9, n - 1};
  for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
    double x = p[at[k]], gr = g[at[k]], mm = 0, vv = 0;
    double lr = o.lr, b1 = o.beta1, b2 = o.beta2, eps = o.eps,
           wd = o.weight_decay;
    for (int t = 1; t <= 3; t++) {
      x -= lr * wd * x;
      mm = b1 * mm + (1 - b1) * gr;
      vv = b2 * vv + (1 - b2) * gr * gr;
      x -= lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t)) * mm /
           (sqrt(vv) + eps);
    }
    check(fabs(q[at[k]] - x) <= 1e-6 * fmax(1.0, fabs(x)),
          "AdamW 3 steps, element %zu: %.8f -> %.8f (by hand %.8f)", at[k],
          p[at[k]], q[at[k]], x);
  }
  free(p);
  free(q);
  free(g);
  model_destroy(m);
}

/* ---- memory ------------------------------------------------------------- */

typedef struct tag_find {
  const char *tag;
  size_t in_use;
  int found;
} tag_find;

static void on_tag(const char *tag, size_t in_use, size_t peak, void *arg) {
  tag_find *f = arg;
  (void)peak;
  if (strcmp(tag, f->tag) == 0) {
    f->in_use = in_use;
    f->found = 1;
  }
}

static size_t tag_bytes(const char *tag) {
  tag_find f = {tag, 0, 0};
  eng_tags(E, on_tag, &f);
  return f.found ? f.in_use : (size_t)-1;
}

static void test_memory(model_norm norm) {
  const int b = 3, t = 10;
  size_t before = eng_bytes_in_use(E);
  model *m = make_norm("tiny", norm, b, t, 9);
  const char *nn = model_norm_name(norm);
  const model_config *c = model_get_config(m);
  size_t P = model_nparams(m) * sizeof(float);
  const char *tags[] = {"params", "grads"};
  check(tag_bytes("adam_m") == (size_t)-1 || tag_bytes("adam_m") == 0,
        "%s: no AdamW state before the first optimizer step", nn);
  for (int i = 0; i < 2; i++)
    check(tag_bytes(tags[i]) == P, "%s: tag %s holds %zu bytes (%zu "
          "parameters)", nn, tags[i], tag_bytes(tags[i]), model_nparams(m));
  int na;
  const tensor_view *a = model_activations(m, &na);
  size_t sum = 0, off = 0;
  int tiled = 1;
  for (int i = 0; i < na; i++) {
    if (a[i].offset != off) tiled = 0;
    off += a[i].numel;
    sum += a[i].numel * sizeof(float);
  }
  check(tiled && sum == tag_bytes("activations"),
        "%s: %d activation views tile the \"activations\" allocation: %zu == "
        "%zu bytes", nn, na, sum, tag_bytes("activations"));
  const int H = c->heads;
  int found = 0;
  for (int i = 0; i < na; i++)
    if (strcmp(a[i].name, "layers.1.attn.scores") == 0 &&
        a[i].numel == (size_t)b * H * t * t)
      found = 1;
  check(found, "%s: layers.1.attn.scores holds B*H*T*T = %d values", nn,
        b * H * t * t);
  /* LayerNorm keeps each norm's mean for backward beside its rstd. */
  int means = 0;
  for (int i = 0; i < na; i++)
    if (strstr(a[i].name, ".mean") && a[i].numel == (size_t)b * t) means++;
  int want = norm == NORM_LAYER ? 2 * c->layers + 1 : 0;
  check(means == want, "%s: %d norms' means of B*T = %d values kept (%d)",
        nn, want, b * t, means);
  size_t all = eng_bytes_in_use(E) - before;
  check(all == 2 * P + sum + 2 * (size_t)b * t * sizeof(int32_t),
        "%s: the model's memory is its 4 allocations (%zu bytes)", nn, all);

  int32_t ids[3 * 10], tg[3 * 10];
  tokens(ids, b * t, c->vocab, 31);
  tokens(tg, b * t, c->vocab, 32);
  adamw_config o = adamw_defaults();
  float loss;
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, ids, tg, b, t, &loss), "forward");
  hard(model_backward(m), "backward");
  hard(model_adamw_step(m, &o), "adamw");
  check(tag_bytes("adam_m") == P && tag_bytes("adam_v") == P,
        "%s: the first optimizer step allocates both moments (%zu bytes "
        "each)", nn, P);
  size_t in_use = eng_bytes_in_use(E);
  eng_reset_peak(E);
  for (int s = 0; s < 2; s++) {
    hard(model_zero_grad(m), "zero_grad");
    hard(model_forward(m, ids, tg, b, t, &loss), "forward");
    hard(model_backward(m), "backward");
    hard(model_adamw_step(m, &o), "adamw");
  }
  check(eng_bytes_in_use(E) == in_use && eng_peak_bytes(E) == in_use,
        "%s: two more training steps allocate nothing (in use %zu, peak "
        "%zu, before %zu)", nn, eng_bytes_in_use(E), eng_peak_bytes(E),
        in_use);
  model_destroy(m);
  check(eng_bytes_in_use(E) == before, "%s: model_destroy frees everything",
        nn);
}

/* ---- the gradient hook ------------------------------------------------- */

typedef struct hook_log {
  model *m;
  int calls, order_ok, *seen;
  float **snap;     /* each tensor's gradient as it was when announced */
} hook_log;

static int on_grad(int view, void *arg) {
  hook_log *h = arg;
  int nv;
  const tensor_view *v = model_views(h->m, &nv);
  if (view < 0 || view >= nv || h->seen[view]++) {
    h->order_ok = 0;
    return 0;
  }
  /* Reverse order of use: lm_head first, token_embeddings last. */
  if ((h->calls == 0 && view != nv - 1) || (h->calls == nv - 1 && view != 0))
    h->order_ok = 0;
  h->calls++;
  h->snap[view] = malloc(v[view].numel * sizeof(float));
  hard(eng_download(model_engine(h->m), h->snap[view],
                    model_grads(h->m) + v[view].offset,
                    v[view].numel * sizeof(float)), "download");
  return 0;
}

static void test_grad_hook(model_norm norm) {
  const int b = 2, t = 6;
  model *m = make_norm("tiny", norm, b, t, 21);
  const model_config *c = model_get_config(m);
  int nv;
  const tensor_view *v = model_views(m, &nv);
  int32_t ids[2 * 6], tg[2 * 6];
  tokens(ids, b * t, c->vocab, 51);
  tokens(tg, b * t, c->vocab, 52);
  hook_log h = {m, 0, 1, calloc(nv, sizeof(int)), calloc(nv, sizeof(float *))};
  model_set_grad_hook(m, on_grad, &h);
  float loss;
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, ids, tg, b, t, &loss), "forward");
  hard(model_backward(m), "backward");
  check(h.calls == nv && h.order_ok,
        "%s: backward announces each of the %d gradients once, lm_head first "
        "and token_embeddings last (%d calls)", model_norm_name(norm), nv,
        h.calls);
  float *g = malloc(model_nparams(m) * sizeof(float));
  hard(eng_download(E, g, model_grads(m), model_nparams(m) * sizeof(float)),
       "download");
  int final = 1;
  for (int i = 0; i < nv; i++)
    if (!h.snap[i] || memcmp(h.snap[i], g + v[i].offset,
                             v[i].numel * sizeof(float)) != 0)
      final = 0;
  check(final, "every gradient is final when announced");
  model_set_grad_hook(m, NULL, NULL);
  for (int i = 0; i < nv; i++) free(h.snap[i]);
  free(h.snap);
  free(h.seen);
  free(g);
  model_destroy(m);
}

/* ---- weights placed in a caller's buffer -------------------------------- */

/* model_place_params: the values move, training goes on there bit for bit
 * as in the model's own buffer, and they come back when unplaced. */
static void test_place_params(void) {
  const int b = 2, t = 6;
  model *m = make("tiny", b, t, 23), *r = make("tiny", b, t, 23);
  const model_config *c = model_get_config(m);
  size_t n = model_nparams(m), bytes = n * sizeof(float);
  int32_t ids[2 * 6], tg[2 * 6];
  tokens(ids, b * t, c->vocab, 61);
  tokens(tg, b * t, c->vocab, 62);
  float *before = get_params(m);
  size_t own = tag_bytes("params");
  void *buf = NULL;
  hard(eng_alloc(E, bytes, "params", &buf), "eng_alloc");
  hard(model_place_params(m, buf), "place");
  float *placed = get_params(m);
  check(model_params(m) == buf && memcmp(placed, before, bytes) == 0 &&
        tag_bytes("params") == own,
        "model_place_params: the weights read from the new buffer, the "
        "values the same, the old buffer freed");
  adamw_config o = adamw_defaults();
  float lm = 0, lr = 0;
  for (int s = 0; s < 2; s++) {
    model *x[2] = {m, r};
    float *l[2] = {&lm, &lr};
    for (int k = 0; k < 2; k++) {
      hard(model_zero_grad(x[k]), "zero_grad");
      hard(model_forward(x[k], ids, tg, b, t, l[k]), "forward");
      hard(model_backward(x[k]), "backward");
      hard(model_adamw_step(x[k], &o), "adamw");
    }
  }
  float *pm = get_params(m), *pr = get_params(r);
  check(lm == lr && memcmp(pm, pr, bytes) == 0 && memcmp(pm, placed, bytes),
        "two training steps on placed weights equal the model's own, bit "
        "for bit (loss %.6f)", lm);
  hard(model_place_params(m, NULL), "unplace");
  float *back = get_params(m);
  check(model_params(m) != buf && memcmp(back, pm, bytes) == 0 &&
        tag_bytes("params") == own + bytes,
        "model_place_params(NULL): the values back in a buffer of the "
        "model's own");
  eng_free(E, buf);
  free(before);
  free(placed);
  free(pm);
  free(pr);
  free(back);
  model_destroy(m);
  model_destroy(r);
}

/* ---- the step's contract ------------------------------------------------ */

static void test_contract(void) {
  const int b = 2, t = 8;
  model *m = make("tiny", b, t, 13);
  random_gains(m, 14);
  const model_config *c = model_get_config(m);
  int32_t ids[2 * 8], tg[2 * 8];
  tokens(ids, b * t, c->vocab, 41);
  tokens(tg, b * t, c->vocab, 42);
  float loss, loss2;

  check(model_forward(m, ids, tg, b + 1, t, &loss) == ERR_FAIL &&
            strstr(err_msg(), "batch 3 x seq 8 outside") != NULL,
        "forward on a larger batch than created fails: %s", err_msg());
  int32_t bad[2 * 8];
  memcpy(bad, ids, sizeof bad);
  bad[5] = c->vocab;
  check(model_forward(m, bad, tg, b, t, &loss) == ERR_FAIL &&
            strstr(err_msg(), "token id 64 at position 5") != NULL,
        "a token id outside the vocabulary fails: %s", err_msg());
  err_clear();
  check(model_backward(m) == ERR_FAIL &&
            strstr(err_msg(), "no forward with targets") != NULL,
        "backward without a forward fails: %s", err_msg());

  /* Two backwards accumulate: twice one backward's gradient. */
  size_t n = model_nparams(m);
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, ids, tg, b, t, &loss), "forward");
  hard(model_backward(m), "backward");
  float *g1 = get_grads(m);
  hard(model_forward(m, ids, tg, b, t, &loss2), "forward");
  hard(model_backward(m), "backward");
  float *g2 = get_grads(m);
  double worst = 0, gmax = 0;
  for (size_t i = 0; i < n; i++) {
    worst = fmax(worst, fabs(g2[i] - 2 * g1[i]));
    gmax = fmax(gmax, fabs(g1[i]));
  }
  check(loss == loss2 && worst <= 1e-6 * gmax,
        "two backwards accumulate: |g2 - 2 g1| <= %.2e (1e-6 max|g|)", worst);
  free(g1);
  free(g2);

  /* A smaller batch than the model was created for computes what a model
   * of exactly that size computes. */
  float *p = get_params(m);
  model_config cc = *c;
  model *s;
  hard(model_create(&s, E, &cc, 1, 5, DT_F32), "model_create");
  set_params(s, p);
  float ls, lm;
  hard(model_forward(s, ids, tg, 1, 5, &ls), "forward");
  hard(model_forward(m, ids, tg, 1, 5, &lm), "forward");
  check(ls == lm, "forward on 1 x 5 of a 2 x 8 model: loss %.7f == %.7f of "
        "a 1 x 5 model", lm, ls);
  hard(model_zero_grad(m), "zero_grad");
  hard(model_zero_grad(s), "zero_grad");
  hard(model_backward(s), "backward");
  hard(model_backward(m), "backward");
  float *gs = get_grads(s), *gm = get_grads(m);
  check(memcmp(gs, gm, n * sizeof *gs) == 0,
        "and its gradients are the 1 x 5 model's, bit for bit");
  free(gs);
  free(gm);
  free(p);
  model_destroy(s);
  model_destroy(m);
}

int main(void) {
  hard(engine_cpu_create(&E, 0), "engine_cpu_create");
  test_sizes();
  test_layout_names();
  test_layernorm_layout();
  test_init(NORM_RMS);
  test_init(NORM_LAYER);
  test_contract();
  test_memory(NORM_RMS);
  test_memory(NORM_LAYER);
  test_grad_hook(NORM_RMS);
  test_grad_hook(NORM_LAYER);
  test_place_params();
  test_adamw();
  gradcheck("nano", NORM_RMS, 2, 5, 0, 5e-3, 5e-4);
  gradcheck("tiny", NORM_RMS, 2, 6, 6, 5e-3, 5e-4);
  gradcheck("nano", NORM_LAYER, 2, 5, 0, 5e-3, 5e-4);
  gradcheck("tiny", NORM_LAYER, 2, 6, 6, 5e-3, 5e-4);
  test_init_loss();
  test_overfit();
  test_layernorm_training();
  engine_destroy(E);
  return tl_finish();
}
