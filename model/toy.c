/* The handout's ToyModel (model/toy.h) on any engine:
 *
 *   z = x W1^T [rows, hidden]     a = relu(z)
 *   h = LayerNorm(a) (w, b, eps 1e-5)      y = h W2^T [rows, out]
 *   loss = mean over rows and outputs of (y - target)^2
 *
 * Backward, by hand (linear y = x W^T: dW += dy^T x, dx = dy W):
 *   dy = 2 (y - target) / (rows * out)
 *   dW2 += dy^T h;  dh = dy W2;  LayerNorm backward -> da, dw, db;
 *   dz = da * (z > 0);  dW1 += dz^T x          (x needs no gradient)
 *
 * The loss is computed on the engine, in fp32 on either engine: d = y - t
 * (k_scale of t by -1, k_add), then the product d d^T of [1, N] by [N, 1]
 * with alpha 1/N and compute DT_F32 (the policy keeps the loss in fp32
 * whatever the products' precision), and d scaled by 2/N in place becomes
 * dy. N = rows * out is small: one dot product is the cleanest reduction
 * that both engines already have.
 *
 * Parameters, gradients and AdamW moments are one flat buffer each, views
 * in toy.h's order. Activation buffers are allocated once for `rows` rows,
 * each with the dtype it stores (all fp32 under the project's policy), and
 * the dtype probes (toy.h) are read from those buffers and from the
 * precision each product is called with, as the toy runs. */
#include "config.h"
#include "model/toy.h"
#include "model/rng.h"

#include "common/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V_FC1, V_LNW, V_LNB, V_FC2, V_FROZEN, V_UNUSED, NVIEWS };

/* One activation buffer and the dtype it holds. */
typedef struct buf {
  float *p;
  dtype dt;
} buf;

struct toy {
  engine *e;
  int in, hidden, outf, rows;
  dtype compute;
  tensor_view views[NVIEWS];
  size_t nparams;
  float *params, *grads, *adam_m, *adam_v;
  float *gbase;          /* toy_place_grads: view v's gradient at */
  size_t goff[NVIEWS];   /* gbase + goff[v] (grads NULL); else in grads */
  int params_placed;     /* toy_place_params: params is the caller's */
  dtype params_dt, grads_dt;
  long long step;
  /* x [rows, in], z = fc1 out, a = relu out, h = LayerNorm out, dh (its
   * gradient, then da, then dz, in place) [rows, hidden]; mean, rstd [rows];
   * y = logits, d = y - target then dy, tgt [rows, out]; loss [1]. */
  buf x, z, a, h, dh, mean, rstd, y, d, tgt, loss;
  int fwd_rows;          /* rows of the last forward; 0 before one */
  model_grad_hook hook;
  void *hook_arg;
  int probe[TOY_NPROBES];
};

static const float LN_EPS = 1e-5f;

static void set_view(tensor_view *v, const char *name, size_t *off, int d0,
                     int d1) {
  memset(v, 0, sizeof *v);
  strncpy(v->name, name, sizeof v->name - 1);
  v->offset = *off;
  v->ndim = d1 > 0 ? 2 : 1;
  v->shape[0] = d0;
  v->shape[1] = d1 > 0 ? d1 : 0;
  v->numel = (size_t)d0 * (d1 > 0 ? (size_t)d1 : 1);
  *off += v->numel;
}

/* ---- dtype probes ------------------------------------------------------------ */

int toy_probe_dtype(const toy *t, toy_probe p) {
  ASSERT(p >= 0 && p < TOY_NPROBES);
  return t->probe[p];
}

/* Record that probe p was seen in dtype dt; a second, different dtype makes
 * it -2 (the report then says so instead of picking one). */
static void note(toy *t, toy_probe p, dtype dt) {
  if (t->probe[p] == -1) t->probe[p] = (int)dt;
  else if (t->probe[p] != (int)dt) t->probe[p] = -2;
}

/* ---- creation --------------------------------------------------------------------- */

static int act(toy *t, buf *b, size_t n, const char *tag) {
  b->dt = DT_F32;   /* the policy: activations are stored in fp32 */
  TRY(eng_alloc(t->e, n * dtype_size(b->dt), tag, (void **)&b->p));
  return 0;
}

static int create(toy *t) {
  size_t r = (size_t)t->rows, H = (size_t)t->hidden, O = (size_t)t->outf;
  TRY(eng_alloc(t->e, t->nparams * sizeof(float), "params",
                (void **)&t->params));
  TRY(eng_alloc(t->e, t->nparams * sizeof(float), "grads",
                (void **)&t->grads));
  t->params_dt = t->grads_dt = DT_F32;
  TRY(eng_memset0(t->e, t->params, t->nparams * sizeof(float)));
  TRY(eng_memset0(t->e, t->grads, t->nparams * sizeof(float)));
  TRY(act(t, &t->x, r * t->in, "act.toy.x"));
  TRY(act(t, &t->z, r * H, "act.toy.fc1_out"));
  TRY(act(t, &t->a, r * H, "act.toy.relu_out"));
  TRY(act(t, &t->h, r * H, "act.toy.ln_out"));
  TRY(act(t, &t->dh, r * H, "act.toy.grad_hidden"));
  TRY(act(t, &t->mean, r, "act.toy.ln_mean"));
  TRY(act(t, &t->rstd, r, "act.toy.ln_rstd"));
  TRY(act(t, &t->y, r * O, "act.toy.logits"));
  TRY(act(t, &t->d, r * O, "act.toy.grad_logits"));
  TRY(act(t, &t->tgt, r * O, "act.toy.target"));
  TRY(act(t, &t->loss, 1, "act.toy.loss"));
  return 0;
}

int toy_create(toy **out, engine *e, int in, int hidden, int outf, int rows,
               dtype compute) {
  *out = NULL;
  if (in < 1 || hidden < 1 || outf < 1 || rows < 1)
    FAIL(ERR_FAIL, "toy_create: in=%d hidden=%d out=%d rows=%d must all be "
         ">= 1", in, hidden, outf, rows);
  if (compute != DT_F32 && compute != DT_BF16 && compute != DT_F16)
    FAIL(ERR_FAIL, "toy_create: unknown compute dtype %d", (int)compute);
  toy *t = calloc(1, sizeof *t);
  CHECK_ALLOC(t, sizeof *t);
  t->e = e;
  t->in = in;
  t->hidden = hidden;
  t->outf = outf;
  t->rows = rows;
  t->compute = compute;
  size_t off = 0;
  set_view(&t->views[V_FC1], "fc1.weight", &off, hidden, in);
  set_view(&t->views[V_LNW], "ln.weight", &off, hidden, 0);
  set_view(&t->views[V_LNB], "ln.bias", &off, hidden, 0);
  set_view(&t->views[V_FC2], "fc2.weight", &off, outf, hidden);
  set_view(&t->views[V_FROZEN], "frozen", &off, 2, 0);
  set_view(&t->views[V_UNUSED], "unused", &off, 3, 0);
  t->nparams = off;
  for (int p = 0; p < TOY_NPROBES; p++) t->probe[p] = -1;
  int rc = create(t);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    toy_destroy(t);
    return rc;
  }
  *out = t;
  return 0;
}

void toy_destroy(toy *t) {
  if (!t) return;
  buf *bufs[] = {&t->x, &t->z,    &t->a, &t->h, &t->dh,  &t->mean,
                 &t->rstd, &t->y, &t->d, &t->tgt, &t->loss};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    eng_free(t->e, bufs[i]->p);
  if (!t->params_placed) eng_free(t->e, t->params);
  eng_free(t->e, t->grads);
  eng_free(t->e, t->adam_m);
  eng_free(t->e, t->adam_v);
  free(t);
}

/* ---- initialisation ---------------------------------------------------------------- */

/* Tensor i from stream i of the seed, elements in row-major order. */
static void init_tensor(const toy *t, int i, uint64_t seed, float *out) {
  const tensor_view *v = &t->views[i];
  double std = 0;
  switch (i) {
  case V_LNW:
    for (size_t j = 0; j < v->numel; j++) out[j] = 1.0f;
    return;
  case V_LNB:
    for (size_t j = 0; j < v->numel; j++) out[j] = 0.0f;
    return;
  case V_FROZEN:
    for (size_t j = 0; j < v->numel; j++) out[j] = 2.0f;
    return;
  case V_UNUSED:   /* a weight of shape [1, 3] */
    std = sqrt(2.0 / (1.0 + (double)v->numel));
    break;
  default:
    std = sqrt(2.0 / ((double)v->shape[0] + v->shape[1]));
  }
  rng r;
  rng_stream(&r, seed, (uint64_t)i);
  for (size_t j = 0; j < v->numel; j++)
    out[j] = (float)(std * rng_trunc_normal(&r, 3.0));
}

int toy_init(toy *t, uint64_t seed) {
  float *host = malloc(t->nparams * sizeof *host);
  CHECK_ALLOC(host, t->nparams * sizeof *host);
  for (int i = 0; i < NVIEWS; i++)
    init_tensor(t, i, seed, host + t->views[i].offset);
  int rc = eng_upload(t->e, t->params, host, t->nparams * sizeof *host);
  free(host);
  TRY(rc);
  TRY(toy_zero_grad(t));
  if (t->adam_m) {
    TRY(eng_memset0(t->e, t->adam_m, t->nparams * sizeof(float)));
    TRY(eng_memset0(t->e, t->adam_v, t->nparams * sizeof(float)));
  }
  t->step = 0;
  return 0;
}

/* ---- accessors ------------------------------------------------------------------------- */

float *toy_params(toy *t) { return t->params; }
float *toy_grads(toy *t) { return t->grads; }

int toy_place_grads(toy *t, float *base, const size_t *off) {
  if (base) {
    memcpy(t->goff, off, sizeof t->goff);
    t->gbase = base;
    eng_free(t->e, t->grads);
    t->grads = NULL;
  } else {
    t->gbase = NULL;
    if (!t->grads)
      TRY(eng_alloc(t->e, t->nparams * sizeof(float), "grads",
                    (void **)&t->grads));
  }
  return toy_zero_grad(t);
}
int toy_place_params(toy *t, float *base) {
  float *own = NULL;
  if (!base) {
    if (!t->params_placed) return 0;
    TRY(eng_alloc(t->e, t->nparams * sizeof(float), "params", (void **)&own));
    base = own;
  }
  if (base == t->params) return 0;
  int rc = eng_copy(t->e, base, t->params, t->nparams * sizeof(float));
  if (rc < 0) {
    if (own) eng_free(t->e, own);
    TRY(rc);
  }
  if (!t->params_placed) eng_free(t->e, t->params);
  t->params = base;
  t->params_placed = own == NULL;
  return 0;
}
size_t toy_nparams(const toy *t) { return t->nparams; }

const tensor_view *toy_views(const toy *t, int *n) {
  if (n) *n = NVIEWS;
  return t->views;
}

int toy_has_grad(const toy *t, int view) {
  return view == V_FC1 || view == V_LNW || view == V_LNB || view == V_FC2;
}

void toy_set_grad_hook(toy *t, model_grad_hook fn, void *arg) {
  t->hook = fn;
  t->hook_arg = arg;
}

int toy_zero_grad(toy *t) {
  if (!t->gbase) return eng_memset0(t->e, t->grads, t->nparams * sizeof(float));
  for (int v = 0; v < NVIEWS; v++)
    TRY(eng_memset0(t->e, t->gbase + t->goff[v],
                    t->views[v].numel * sizeof(float)));
  return 0;
}

/* ---- forward and backward -------------------------------------------------------------- */

static float *P(toy *t, int v) { return t->params + t->views[v].offset; }
static float *G(toy *t, int v) {
  return t->gbase ? t->gbase + t->goff[v] : t->grads + t->views[v].offset;
}

/* Backward is done with view v (its gradient final, the parameter read no
 * more): record the gradient's dtype and tell the hook. */
static int grad_ready(toy *t, int v) {
  note(t, TOY_GRADS, t->grads_dt);
  return t->hook ? t->hook(v, t->hook_arg) : 0;
}

static int forward(toy *t, const float *x, const float *target, int rows,
                   float *loss) {
  engine *e = t->e;
  int In = t->in, H = t->hidden, O = t->outf;
  size_t N = (size_t)rows * O;
  TRY(eng_upload(e, t->x.p, x, (size_t)rows * In * sizeof(float)));
  TRY(eng_upload(e, t->tgt.p, target, N * sizeof(float)));
  /* fc1, relu, LayerNorm, fc2 */
  TRY(k_matmul(e, 0, 1, rows, H, In, 1.0f, t->x.p, In, P(t, V_FC1), In, 0.0f,
               t->z.p, H, t->compute));
  note(t, TOY_PARAM_READ, t->compute);
  note(t, TOY_FC1_OUT, t->z.dt);
  TRY(k_relu_fwd(e, t->z.p, t->a.p, (size_t)rows * H));
  TRY(k_layernorm_fwd(e, t->a.p, P(t, V_LNW), P(t, V_LNB), t->h.p, t->mean.p,
                      t->rstd.p, rows, H, LN_EPS));
  note(t, TOY_LN_OUT, t->h.dt);
  TRY(k_matmul(e, 0, 1, rows, O, H, 1.0f, t->h.p, H, P(t, V_FC2), H, 0.0f,
               t->y.p, O, t->compute));
  note(t, TOY_PARAM_READ, t->compute);
  note(t, TOY_LOGITS, t->y.dt);
  /* d = y - target; loss = d . d / N in fp32 */
  TRY(k_scale(e, t->tgt.p, -1.0f, N));
  TRY(k_add(e, t->y.p, t->tgt.p, t->d.p, N));
  const dtype loss_compute = DT_F32;
  TRY(k_matmul(e, 0, 1, 1, 1, (int)N, 1.0f / (float)N, t->d.p, (int)N,
               t->d.p, (int)N, 0.0f, t->loss.p, 1, loss_compute));
  note(t, TOY_LOSS, loss_compute);
  note(t, TOY_LOSS, t->loss.dt);
  TRY(eng_download(e, loss, t->loss.p, sizeof *loss));
  t->fwd_rows = rows;
  return 0;
}

static int backward(toy *t) {
  engine *e = t->e;
  int rows = t->fwd_rows, H = t->hidden, O = t->outf, In = t->in;
  size_t N = (size_t)rows * O;
  float *dy = t->d.p;
  TRY(k_scale(e, dy, 2.0f / (float)N, N));
  /* fc2: dW2 += dy^T h; dh = dy W2 */
  TRY(k_matmul(e, 1, 0, O, H, rows, 1.0f, dy, O, t->h.p, H, 1.0f,
               G(t, V_FC2), H, t->compute));
  TRY(k_matmul(e, 0, 0, rows, H, O, 1.0f, dy, O, P(t, V_FC2), H, 0.0f,
               t->dh.p, H, t->compute));
  note(t, TOY_PARAM_READ, t->compute);
  TRY(grad_ready(t, V_FC2));
  /* LayerNorm (dx over dy's buffer), then relu in place: dh becomes dz. */
  TRY(k_layernorm_bwd(e, t->dh.p, t->a.p, P(t, V_LNW), t->mean.p, t->rstd.p,
                      t->dh.p, G(t, V_LNW), G(t, V_LNB), rows, H));
  TRY(grad_ready(t, V_LNB));
  TRY(grad_ready(t, V_LNW));
  TRY(k_relu_bwd(e, t->dh.p, t->z.p, t->dh.p, (size_t)rows * H));
  /* fc1: dW1 += dz^T x */
  TRY(k_matmul(e, 1, 0, H, In, rows, 1.0f, t->dh.p, H, t->x.p, In, 1.0f,
               G(t, V_FC1), In, t->compute));
  TRY(grad_ready(t, V_FC1));
  t->fwd_rows = 0;
  return 0;
}

int toy_forward_backward(toy *t, const float *x, const float *target,
                         int rows, float *loss) {
  if (rows < 1 || rows > t->rows)
    FAIL(ERR_FAIL, "toy_forward_backward: rows=%d (allowed: 1 to %d, the "
         "rows given to toy_create)", rows, t->rows);
  if (!x || !target || !loss)
    FAIL(ERR_FAIL, "toy_forward_backward: NULL x, target or loss");
  TRY(forward(t, x, target, rows, loss));
  TRY(backward(t));
  return 0;
}

/* ---- AdamW ---------------------------------------------------------------------------------- */

int toy_adamw_step(toy *t, const adamw_config *o) {
  size_t bytes = t->nparams * sizeof(float);
  if (t->gbase)
    FAIL(ERR_FAIL, "toy_adamw_step: the gradients are placed outside the "
         "toy (toy_place_grads); whoever placed them steps the optimizer");
  if (!t->adam_m) {
    TRY(eng_alloc(t->e, bytes, "adam_m", (void **)&t->adam_m));
    TRY(eng_memset0(t->e, t->adam_m, bytes));
    TRY(eng_alloc(t->e, bytes, "adam_v", (void **)&t->adam_v));
    TRY(eng_memset0(t->e, t->adam_v, bytes));
  }
  for (int v = 0; v < NVIEWS; v++) {
    if (!toy_has_grad(t, v)) continue;
    size_t off = t->views[v].offset;
    TRY(k_adamw(t->e, t->params + off, t->grads + off, t->adam_m + off,
                t->adam_v + off, t->views[v].numel, o->lr, o->beta1,
                o->beta2, o->eps, o->weight_decay, t->step + 1));
  }
  note(t, TOY_MASTER, t->params_dt);
  t->step++;
  return 0;
}
