/* Backward on the fused path: forward_fused.c in reverse. Products read lt
 * operands (the weights' lt copy, saved or recomputed activations, and
 * gradients rounded to lt by the kernel that makes them) and accumulate
 * weight gradients into the fp32 gradient buffer (beta = 1). The residual
 * gradient dres stays fp32: each RMSNorm backward adds its dx into it in
 * place and leaves its lt copy for the next products. What forward did not
 * keep (merged heads, the SwiGLU product, the norm outputs in fp32) is
 * recomputed from what it kept; with checkpointing (model_options.
 * ckpt_layers) so is each group of layers but the last, before its
 * backward. The gradient hook runs as in backward.c, in the same order.
 *
 * Linear y = x W^T: dW += dy^T x; dx = dy W. */
#include "config.h"
#include "model/model.h"
#include "model/model_internal.h"

#include "common/check.h"

#include <math.h>

/* dW[dout, din] += dy[n, dout]^T x[n, din], both lt; dW = ... when
 * model_zero_grad deferred the zeroing (beta 0: nothing to add to). With
 * the optimizer in the products (model_options.adamw_in_products) the
 * product updates W (its moments and 16-bit copy) instead, and dW is not
 * written: so it comes after every read of W's copy in backward (each dx
 * product, each forward product rebuilt). */
/* dW[dout, din] = dy^T x (beta 0) or += (beta 1), into fp32, or (beta 0)
 * into m->wgt: model_options.grad_lt's 16-bit gradient, the product's
 * fp32 sums rounded once. */
static int product_dw(model *m, const void *dy, const void *x, void *dW,
                      dtype wt, int n, int din, int dout, float beta) {
  return k_matmul_ex(m->be, 1, 0, dout, din, n, 1.0f, dy, dout, x, din, m->lt,
                     beta, dW, din, wt, m->opt.f32);
}

static int linear_dw(model *m, const void *dy, const void *x, const float *W,
                     const void *Wl, float *dW, int n, int din, int dout) {
  if (m->adamw_in_bwd && m->opt.adamw_in_products) {
    const adamw_config *o = m->adamw_in_bwd;
    size_t at = (size_t)(W - (const float *)m->params);
    int low = m->params_low != (const void *)m->params;
    return k_matmul_adamw(m->be, dout, din, n, dy, dout, x, din, m->lt,
                          (float *)m->params + at,
                          low ? (void *)Wl : NULL, m->adam_m + at,
                          m->adam_v + at, o->lr, o->beta1, o->beta2, o->eps,
                          o->weight_decay, m->step + 1);
  }
  return product_dw(m, dy, x, dW, m->wgt, n, din, dout,
                    m->grads_deferred_zero ? 0.0f : 1.0f);
}

/* q, k and v's weight gradients from the merged product's dy [n, 3D]:
 * one product when the three gradients sit end to end (the model's own
 * buffer, slots), else one each, reading its third of dy's columns
 * (gradients placed by data parallelism may lie apart: a bucket boundary,
 * or each rank's block of a bucket among its peers'). */
static int linear_dw_qkv(model *m, const void *dqkv, const void *x,
                         const layer_ptrs *p, const layer_low *w,
                         const layer_ptrs *g, int n, int D) {
  const size_t DB = (size_t)D * D * dtype_size(m->wgt);   /* bytes each */
  const char *q = (const char *)g->wq;
  if (((const char *)g->wk == q + DB && (const char *)g->wv == q + 2 * DB) ||
      (m->adamw_in_bwd && m->opt.adamw_in_products))
    return linear_dw(m, dqkv, x, p->wq, w->wqkv, g->wq, n, D, 3 * D);
  float *dW[3] = {g->wq, g->wk, g->wv};
  for (int j = 0; j < 3; j++)
    TRY(k_matmul_ex(m->be, 1, 0, D, D, n, 1.0f,
                    (const char *)dqkv + (size_t)j * D * dtype_size(m->lt),
                    3 * D, x, D, m->lt, m->grads_deferred_zero ? 0.0f : 1.0f,
                    dW[j], D, m->wgt, m->opt.f32));
  return 0;
}

/* Deferred zeroing: the gradients backward adds into rather than writes
 * (RMSNorm gains, sums over rows; the embedding, a scatter-add) are
 * cleared; every other view is a product's output, written with beta 0. */
static int clear_accumulated(model *m) {
  const size_t D = (size_t)m->c.d_model * sizeof(float);
  TRY(eng_memset0(m->be, m->g.emb, (size_t)m->c.vocab * D));
  TRY(eng_memset0(m->be, m->g.lnf, D));
  for (int i = 0; i < m->c.layers; i++) {
    TRY(eng_memset0(m->be, m->g.layer[i].ln1, D));
    TRY(eng_memset0(m->be, m->g.layer[i].ln2, D));
  }
  return 0;
}

/* y[n, dout] (yt) = x[n, din] W^T: forward's product (forward_fused.c),
 * on backward's engine, to rebuild what forward did not keep. */
static int linear_fwd(model *m, const void *x, const void *W, void *y,
                      dtype yt, int n, int din, int dout) {
  return k_matmul_ex(m->be, 0, 1, n, dout, din, 1.0f, x, din, W, din,
                     m->lt, 0.0f, y, dout, yt, m->opt.f32);
}

/* dx[n, din] (xt) = dy[n, dout] W (+ beta dx). */
static int linear_dx(model *m, const void *dy, const void *W, void *dx,
                     dtype xt, int n, int din, int dout, float beta) {
  return k_matmul_ex(m->be, 0, 0, n, din, dout, 1.0f, dy, dout, W, din,
                     m->lt, beta, dx, din, xt, m->opt.f32);
}

#define LAYER_VIEW(i, t) (1 + (i) * PER_LAYER_TENSORS + (t))

/* Gradient slots (model_options.grad_slots): group g (grad_group: the
 * head L, layer i, the embedding -1) writes into slot grad_slot(g, L)
 * once the side stream has updated the group that used it before (g + 2,
 * or layer 0 before the embedding where L is even; its last update marked
 * the slot free); the gradients backward adds into (the norms' gains,
 * the embedding's rows) start from zero. Every
 * product writes its gradient (model_backward_adamw defers the zeroing). */
static int slot_take(model *m, int g) {
  int s = grad_slot(g, m->c.layers);
  eng_event *ev = m->slot_ev[s];
  m->slot_ev[s] = NULL;
  if (ev) TRY(eng_event_wait(m->be, ev));
  const size_t D = (size_t)m->c.d_model * sizeof(float);
  if (g < 0) return eng_memset0(m->be, m->g.emb, (size_t)m->c.vocab * D);
  if (m->pack) return 0;   /* bound: the gains' gradients are not slotted */
  if (g == m->c.layers) return eng_memset0(m->be, m->g.lnf, D);
  TRY(eng_memset0(m->be, m->g.layer[g].ln1, D));
  TRY(eng_memset0(m->be, m->g.layer[g].ln2, D));
  return 0;
}

/* Checkpointing (fused_acts.group): the forward of checkpoint group g's
 * layers again, from its first layer's saved input, on backward's engine,
 * so their tensors are there for their backward: the same kernels on the
 * same inputs as forward, so the same bits. */
static int rebuild_group(model *m, int g) {
  const int G = m->f.group, end = G * (g + 1) < m->c.layers
                                      ? G * (g + 1) : m->c.layers;
  for (int j = G * g; j < end; j++) {
    TRY(model_weights(m, j, 1));   /* released after j's backward */
    TRY(model_fused_layer_fwd(m, m->be, j, j == G * g, 1));
  }
  return 0;
}

int model_backward_fused(model *m) {
  engine *e = m->be;
  fused_acts *a = &m->f;
  const int b = m->fwd_b, t = m->fwd_t, N = b * t;
  const int D = m->c.d_model, F = m->c.d_ff, V = m->c.vocab;
  const int H = m->c.heads, Dh = D / H, L = m->c.layers;
  const float eps = m->c.norm_eps, scale = 1.0f / sqrtf((float)Dh);
  const dtype lt = m->lt;
  void *dres_low = a->dres_low == (void *)a->dres ? NULL : a->dres_low;
  if (m->pack)   /* bound: the gains' gradients, added to all along */
    TRY(eng_memset0(e, model_norm_grads(m), m->nnorm * sizeof(float)));
  if (m->gmap) TRY(slot_take(m, L));
  else if (m->grads_deferred_zero) TRY(clear_accumulated(m));

  /* loss = mean CE; logits = lnf W_lm^T */
  if (!m->opt.head_chunk) {
    TRY(k_cross_entropy_bwd_ex(e, a->logits, m->targets, a->lse, a->dlogits,
                               lt, N, V, m->loss_scale / (float)N));
    TRY(model_weights(m, L, 1));
    TRY(linear_dx(m, a->dlogits, m->lo_lm, a->dn, lt, N, D, V, 0.0f));
    TRY(model_weights(m, L, 0));
    TRY(linear_dw(m, a->dlogits, a->lnf, m->p.lm, m->lo_lm, m->g.lm, N, D,
                  V));
  } else {   /* chunk by chunk: the logits again, their gradient, its use */
    const size_t lz = dtype_size(lt);
    TRY(model_weights(m, L, 1));
    for (int r0 = 0; r0 < N; r0 += m->opt.head_chunk) {
      int n = N - r0 < m->opt.head_chunk ? N - r0 : m->opt.head_chunk;
      TRY(model_head_chunk(m, e, r0, n));
      TRY(k_cross_entropy_bwd_ex(e, a->logits, m->targets + r0, a->lse + r0,
                                 a->dlogits, lt, n, V,
                                 m->loss_scale / (float)N));
      TRY(linear_dx(m, a->dlogits, m->lo_lm,
                    (char *)a->dn + (size_t)r0 * D * lz, lt, n, D, V, 0.0f));
      /* dW_lm: the first chunk writes it where zeroing was deferred, the
       * rest add */
      TRY(product_dw(m, a->dlogits, (const char *)a->lnf + (size_t)r0 * D * lz,
                     m->g.lm, DT_F32, n, D, V,
                     r0 == 0 && m->grads_deferred_zero ? 0.0f : 1.0f));
    }
    TRY(model_weights(m, L, 0));
  }
  TRY(model_grad_ready(m, LAYER_VIEW(L, 1)));
  TRY(k_rmsnorm_bwd_ex(e, a->dn, a->xl, m->p.lnf, a->lnf_rstd, NULL, a->dres,
                       dres_low, lt, m->g.lnf, N, D));
  TRY(model_grad_ready(m, LAYER_VIEW(L, 0)));

  for (int i = L - 1; i >= 0; i--) {
    const layer_ptrs *p = &m->p.layer[i], *g = &m->g.layer[i];
    const layer_low *w = &m->lo[i];
    fused_layer *l = &a->layer[i];
    /* a group's last layer, but for the last group's (forward left
     * those tensors): rebuild the group (which needs its weights) */
    const int G = a->group;
    if (ckpt_rerun_at(G, L, i))
      IN_RANGE(e, "recompute", rebuild_group(m, i / G));
    else if (ckpt_in_last_group(G, L, i))
      TRY(model_weights(m, i, 1));
    if (m->gmap) TRY(slot_take(m, i));
    /* FFN: out = resid + h W2^T, h = silu(a) * b, a|b = ln2(resid) W1|3^T */
    /* dh first, so h is recomputed by the pass that reads a and b for
     * da and db anyway; that pass works in place (each element read
     * before it is written): h over dh, da over a, db over b, which
     * backward reads no more. */
    void *da = l->a, *db = l->b;
    TRY(linear_dx(m, a->dres_low, w->w2, a->dh, lt, N, F, D, 0.0f));
    TRY(k_swiglu_bwd_ex(e, a->dh, l->a, l->b, da, db, a->h, lt,
                        (size_t)N * F));
    TRY(linear_dw(m, a->dres_low, a->h, p->w2, w->w2, g->w2, N, F, D));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_W2)));
    const void *n2 = l->n2;
    const float *resid = l->resid;
    if (!resid) {
      /* gradient slots: resid = x + merge(o) Wo^T and n2 = ln2(resid)
       * again, by forward's kernels on the same inputs (the same bits);
       * om stays for Wo's gradient below */
      TRY(k_merge_heads_ex(e, l->o, lt, a->om, lt, b, t, H, Dh));
      TRY(linear_fwd(m, a->om, w->wo, a->tmp, DT_F32, N, D, D));
      TRY(k_add_rmsnorm_fwd(e, l->x, a->tmp, a->resid, p->ln2, a->norm, lt,
                            l->rstd2, N, D, eps));
      resid = a->resid;
      n2 = a->norm;
    } else if (!n2) {
      TRY(k_add_rmsnorm_fwd(e, l->resid, NULL, NULL, p->ln2, a->norm, lt,
                            l->rstd2, N, D, eps));
      n2 = a->norm;
    }
    TRY(linear_dx(m, da, w->w1, a->dn, lt, N, D, F, 0.0f));
    TRY(linear_dx(m, db, w->w3, a->dn, lt, N, D, F, 1.0f));
    TRY(linear_dw(m, da, n2, p->w1, w->w1, g->w1, N, D, F));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_W1)));
    TRY(linear_dw(m, db, n2, p->w3, w->w3, g->w3, N, D, F));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_W3)));
    TRY(k_rmsnorm_bwd_ex(e, a->dn, resid, p->ln2, l->rstd2, a->dres,
                         a->dres, dres_low, lt, g->ln2, N, D));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_LN2)));

    /* attention: resid = x + merge(o) Wo^T */
    if (l->resid) TRY(k_merge_heads_ex(e, l->o, lt, a->om, lt, b, t, H, Dh));
    TRY(linear_dx(m, a->dres_low, w->wo, a->dom, lt, N, D, D, 0.0f));
    TRY(linear_dw(m, a->dres_low, a->om, p->wo, w->wo, g->wo, N, D, D));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_WO)));
    TRY(k_split_heads_ex(e, a->dom, lt, a->dO, lt, b, t, H, Dh));
    TRY(k_attention_bwd(e, m->opt.attention, l->q, l->k, l->v, l->o, a->dO,
                        l->lse, l->P, a->dq, a->dk, a->dv, b * H, t, t, Dh, 1,
                        scale, lt));
    TRY(k_qkv_merge_rope_bwd(e, a->dq, a->dk, a->dv, a->dqkv, lt, b, t, H, Dh,
                             m->c.rope_theta));
    /* q|k|v = ln1(x) W_qkv^T: one product for the three weights */
    const void *n1 = l->n1;
    if (!n1) {
      TRY(k_add_rmsnorm_fwd(e, l->x, NULL, NULL, p->ln1, a->norm, lt,
                            l->rstd1, N, D, eps));
      n1 = a->norm;
    }
    TRY(linear_dx(m, a->dqkv, w->wqkv, a->dn, lt, N, D, 3 * D, 0.0f));
    TRY(model_weights(m, i, 0));   /* its last read of the layer's weights */
    TRY(linear_dw_qkv(m, a->dqkv, n1, p, w, g, N, D));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_WQ)));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_WK)));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_WV)));
    TRY(k_rmsnorm_bwd_ex(e, a->dn, l->x, p->ln1, l->rstd1, a->dres, a->dres,
                         dres_low, lt, g->ln1, N, D));
    TRY(model_grad_ready(m, LAYER_VIEW(i, P_LN1)));
  }
  if (m->gmap) TRY(slot_take(m, -1));
  TRY(k_embedding_bwd(e, m->ids, a->dres, m->g.emb, N, D, V));
  TRY(model_grad_ready(m, 0));   /* model_backward then clears grads_deferred_zero */
  return 0;
}
