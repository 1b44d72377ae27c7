/* Backward: forward.c's list of calls in reverse, each op differentiated by
 * hand with the kernels' backward functions.
 *
 * Rule (kernels.h): parameter gradients are ACCUMULATED (+=, beta = 1 in the
 * weight-gradient products, dg in k_rmsnorm_bwd, k_embedding_bwd), so
 * model_zero_grad once per step and several backwards (gradient
 * accumulation) simply add. Gradients of activations are OVERWRITTEN (=):
 * every scratch.* buffer is written before it is read.
 *
 * The gradient of the residual stream lives in one of three [N, D] buffers
 * (scratch.grad_residual, scratch.grad_norm, scratch.tmp) that rotate
 * through the roles dres (d loss / d residual), dnorm (d loss / d a norm's
 * output) and dtmp (a norm's dx, a merged-heads gradient), so no kernel
 * reads and writes the same buffer except where kernels.h allows it:
 * cross-entropy writes dlogits over the logits, and the softmax backward
 * writes dS over dP.
 *
 * Linear layer y = x W^T, W [dout, din]:  dW += dy^T x;  dx = dy W.
 * A norm (RMSNorm, or LayerNorm per model_config.norm): norm_bwd. */
#include "config.h"
#include "model/model.h"
#include "model/model_internal.h"

#include "common/check.h"

#include <math.h>

/* dW[dout, din] += dy[N, dout]^T x[N, din] */
static int linear_dw(model *m, const float *dy, const float *x, float *dW,
                     int n, int din, int dout) {
  return k_matmul(m->be, 1, 0, dout, din, n, 1.0f, dy, dout, x, din, 1.0f, dW,
                  din, m->compute);
}

/* dx[N, din] = dy[N, dout] W (beta 0), or += with beta 1. */
static int linear_dx(model *m, const float *dy, const float *W, float *dx,
                     int n, int din, int dout, float beta) {
  return k_matmul(m->be, 0, 0, n, din, dout, 1.0f, dy, dout, W, din, beta, dx,
                  din, m->compute);
}

/* Backward is done with parameter table entry `view`: its gradient is final
 * and nothing after reads the parameter (so the hook's caller may update
 * it while backward goes on). */
int model_grad_ready(model *m, int view) {
  /* with the optimizer in the products, that product updated it */
  if (m->adamw_in_bwd && !view_in_product(m, view))
    TRY(model_adamw_view(m, view));
  return m->grad_hook ? m->grad_hook(view, m->grad_hook_arg) : 0;
}
#define LAYER_VIEW(i, t) model_layer_view(&m->c, (i), (t))

/* y = norm(x) (forward.c's norm_fwd): dx written from dy; the weight's
 * (and LayerNorm's bias's) gradient accumulated, then announced: views vw
 * and vb (vb unused with RMSNorm). */
static int norm_bwd(model *m, const float *dy, const float *x, const float *w,
                    const float *mean, const float *rstd, float *dx,
                    float *dw, float *db, int n, int vw, int vb) {
  if (m->c.norm == NORM_LAYER) {
    TRY(k_layernorm_bwd(m->be, dy, x, w, mean, rstd, dx, dw, db, n,
                        m->c.d_model));
    TRY(model_grad_ready(m, vw));
    return model_grad_ready(m, vb);
  }
  TRY(k_rmsnorm_bwd(m->be, dy, x, w, rstd, dx, dw, n, m->c.d_model));
  return model_grad_ready(m, vw);
}

typedef struct grad_bufs {
  float *dres, *dnorm, *dtmp;
} grad_bufs;

static void swap(float **x, float **y) {
  float *t = *x;
  *x = *y;
  *y = t;
}

/* In: r->dres = d loss / d l->out. Out: r->dres = d loss / d l->resid. */
static int ffn_bwd(model *m, int i, int b, int t, grad_bufs *r) {
  engine *e = m->be;
  const layer_ptrs *p = &m->p.layer[i];
  const layer_ptrs *g = &m->g.layer[i];
  const layer_acts *l = &m->a.layer[i];
  const model_acts *a = &m->a;
  const int N = b * t, D = m->c.d_model, F = m->c.d_ff;

  /* out = resid + h W2^T */
  TRY(linear_dw(m, r->dres, l->h, g->w2, N, F, D));
  TRY(linear_dx(m, r->dres, p->w2, a->g_h, N, F, D, 0.0f));
  TRY(model_grad_ready(m, LAYER_VIEW(i, P_W2)));
  /* h = silu(a) * b */
  TRY(k_swiglu_bwd(e, a->g_h, l->a, l->b, a->g_a, a->g_b, (size_t)N * F));
  /* a = ln2_out W1^T, b = ln2_out W3^T */
  TRY(linear_dw(m, a->g_a, l->ln2_out, g->w1, N, D, F));
  TRY(linear_dw(m, a->g_b, l->ln2_out, g->w3, N, D, F));
  TRY(linear_dx(m, a->g_a, p->w1, r->dnorm, N, D, F, 0.0f));
  TRY(model_grad_ready(m, LAYER_VIEW(i, P_W1)));
  TRY(linear_dx(m, a->g_b, p->w3, r->dnorm, N, D, F, 1.0f));
  TRY(model_grad_ready(m, LAYER_VIEW(i, P_W3)));
  /* ln2_out = norm(resid); d resid = dres + dx(norm) */
  TRY(norm_bwd(m, r->dnorm, l->resid, p->ln2, l->ln2_mean, l->ln2_rstd,
               r->dtmp, g->ln2, g->ln2_b, N, LAYER_VIEW(i, P_LN2),
               LAYER_VIEW(i, P_LN2_B)));
  TRY(k_add(e, r->dres, r->dtmp, r->dnorm, (size_t)N * D));
  swap(&r->dres, &r->dnorm);
  return 0;
}

/* In: r->dres = d loss / d l->resid. Out: r->dres = d loss / d x, x the
 * layer's input. */
static int attention_bwd(model *m, int i, const float *x, int b, int t,
                         grad_bufs *r) {
  engine *e = m->be;
  const layer_ptrs *p = &m->p.layer[i];
  const layer_ptrs *g = &m->g.layer[i];
  const layer_acts *l = &m->a.layer[i];
  const model_acts *a = &m->a;
  const int N = b * t, D = m->c.d_model, H = m->c.heads, Dh = D / H;
  const float scale = 1.0f / sqrtf((float)Dh);
  const long long sh = (long long)t * Dh, ss = (long long)t * t;

  /* resid = x + o Wo^T */
  TRY(linear_dw(m, r->dres, l->o, g->wo, N, D, D));
  TRY(linear_dx(m, r->dres, p->wo, r->dtmp, N, D, D, 0.0f));
  TRY(model_grad_ready(m, LAYER_VIEW(i, P_WO)));
  /* o = merge(Y): dY = split(do) */
  TRY(k_split_heads(e, r->dtmp, a->g_heads, b, t, H, Dh));
  /* Y = P V: dP = dY V^T, dV = P^T dY */
  TRY(k_matmul_batched(e, 0, 1, t, t, Dh, 1.0f, a->g_heads, Dh, sh, l->v, Dh,
                       sh, 0.0f, a->g_scores, t, ss, b * H, m->compute));
  TRY(k_matmul_batched(e, 1, 0, t, Dh, t, 1.0f, l->scores, t, ss, a->g_heads,
                       Dh, sh, 0.0f, a->g_v, Dh, sh, b * H, m->compute));
  /* P = causal softmax(scale S): dS, in place over dP */
  TRY(k_softmax_causal_bwd(e, l->scores, a->g_scores, a->g_scores, b * H, t,
                           scale));
  /* S = Q K^T: dQ = dS K, dK = dS^T Q (Q, K after RoPE) */
  TRY(k_matmul_batched(e, 0, 0, t, Dh, t, 1.0f, a->g_scores, t, ss, l->k, Dh,
                       sh, 0.0f, a->g_q, Dh, sh, b * H, m->compute));
  TRY(k_matmul_batched(e, 1, 0, t, Dh, t, 1.0f, a->g_scores, t, ss, l->q, Dh,
                       sh, 0.0f, a->g_k, Dh, sh, b * H, m->compute));
  /* RoPE is a rotation: its backward rotates back. */
  TRY(k_rope(e, a->g_q, b, H, t, Dh, m->c.rope_theta, 1));
  TRY(k_rope(e, a->g_k, b, H, t, Dh, m->c.rope_theta, 1));
  /* q/k/v = split(ln1_out W^T): merge each gradient into dtmp, then
   * dW += dtmp^T ln1_out and dnorm (+)= dtmp W. */
  TRY(k_merge_heads(e, a->g_q, r->dtmp, b, t, H, Dh));
  TRY(linear_dw(m, r->dtmp, l->ln1_out, g->wq, N, D, D));
  TRY(linear_dx(m, r->dtmp, p->wq, r->dnorm, N, D, D, 0.0f));
  TRY(model_grad_ready(m, LAYER_VIEW(i, P_WQ)));
  TRY(k_merge_heads(e, a->g_k, r->dtmp, b, t, H, Dh));
  TRY(linear_dw(m, r->dtmp, l->ln1_out, g->wk, N, D, D));
  TRY(linear_dx(m, r->dtmp, p->wk, r->dnorm, N, D, D, 1.0f));
  TRY(model_grad_ready(m, LAYER_VIEW(i, P_WK)));
  TRY(k_merge_heads(e, a->g_v, r->dtmp, b, t, H, Dh));
  TRY(linear_dw(m, r->dtmp, l->ln1_out, g->wv, N, D, D));
  TRY(linear_dx(m, r->dtmp, p->wv, r->dnorm, N, D, D, 1.0f));
  TRY(model_grad_ready(m, LAYER_VIEW(i, P_WV)));
  /* ln1_out = norm(x); d x = dres + dx(norm) */
  TRY(norm_bwd(m, r->dnorm, x, p->ln1, l->ln1_mean, l->ln1_rstd, r->dtmp,
               g->ln1, g->ln1_b, N, LAYER_VIEW(i, P_LN1),
               LAYER_VIEW(i, P_LN1_B)));
  TRY(k_add(e, r->dres, r->dtmp, r->dnorm, (size_t)N * D));
  swap(&r->dres, &r->dnorm);
  return 0;
}

/* Backward's engine work: what model_options.graphs records. */
static int backward_body(model *m);

/* Backward, and with AdamW in backward its updates joined: inside a
 * recording the side stream must rejoin before it ends. */
static int backward_work(model *m) {
  TRY(backward_body(m));
  return m->adamw_in_bwd ? model_adamw_join(m) : 0;
}

static int backward_body(model *m) {
  engine *e = m->be;
  model_acts *a = &m->a;
  if (m->opt.fused) return model_backward_fused(m);
  const int b = m->fwd_b, t = m->fwd_t, N = b * t;
  const int D = m->c.d_model, V = m->c.vocab, L = m->c.layers;
  grad_bufs r = {a->g_resid, a->g_norm, a->g_tmp};

  /* loss = mean CE: dlogits = S (softmax - onehot) / N, over the logits
   * (S the loss scale, 1 but for fp16) */
  TRY(k_cross_entropy_bwd(e, a->logits, m->targets, a->lse, a->logits, N, V,
                          m->loss_scale / (float)N));
  /* logits = lnf_out lm_head^T */
  TRY(linear_dw(m, a->logits, a->lnf_out, m->g.lm, N, D, V));
  TRY(linear_dx(m, a->logits, m->p.lm, r.dnorm, N, D, V, 0.0f));
  TRY(model_grad_ready(m, model_head_view(&m->c, 2)));
  /* lnf_out = norm(h_L) */
  const float *hL = a->layer[L - 1].out;
  TRY(norm_bwd(m, r.dnorm, hL, m->p.lnf, a->lnf_mean, a->lnf_rstd, r.dres,
               m->g.lnf, m->g.lnf_b, N, model_head_view(&m->c, 0),
               model_head_view(&m->c, 1)));
  for (int i = L - 1; i >= 0; i--) {
    const float *x = i == 0 ? a->embed_out : a->layer[i - 1].out;
    TRY(ffn_bwd(m, i, b, t, &r));
    TRY(attention_bwd(m, i, x, b, t, &r));
  }
  /* h0 = token_embeddings[ids] */
  TRY(k_embedding_bwd(e, m->ids, r.dres, m->g.emb, N, D, V));
  TRY(model_grad_ready(m, 0));
  return 0;
}

int model_backward(model *m) { return model_backward_on(m, m->e); }

static int backward_on(model *m, engine *e);

int model_backward_on(model *m, engine *e) {
  TRY(eng_range_push(m->e, "backward"));
  int rc = backward_on(m, e);
  int rp = eng_range_pop(m->e);
  return rc < 0 ? rc : rp;
}

static int backward_on(model *m, engine *e) {
  if (m->gmap && !m->adamw_in_bwd && !m->pack)
    FAIL(ERR_FAIL, "model_backward: the model keeps its gradients in slots "
         "(model_options.grad_slots), each layer's only until its update "
         "(allowed: model_backward_adamw)");
  if (eng_base(e) != m->e)
    FAIL(ERR_FAIL, "model_backward_on: the engine is neither the model's "
         "nor a view of it (allowed: the model's engine or eng_view of it)");
  m->be = e;
  if (!m->fwd_loss)
    FAIL(ERR_FAIL, "model_backward: no forward with targets since the last "
         "backward (backward overwrites the logits with their gradient)");
  m->fwd_loss = 0;
  /* bound: the slots hold other groups' gradients, every product writes */
  if (m->pack) m->grads_deferred_zero = 1;
  TRY(model_params_low_current(m));
  const int key[3] = {m->fwd_b, m->fwd_t, m->grads_deferred_zero};
  if (e == m->e)
    TRY(model_run_graphed(m, m->adamw_in_bwd ? &m->gbwa : &m->gbwd, key,
                          m->loss_scale, backward_work));
  else
    TRY(backward_work(m));   /* a view records no graphs */
  /* the fused path wrote, not added, every gradient (model_zero_grad) */
  m->grads_deferred_zero = 0;
  return 0;
}
