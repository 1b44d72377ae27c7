/* Forward on the fused path: forward.c's computation with the residual add
 * folded into the next RMSNorm, q/k/v as one product against the three
 * projection weights side by side (they are adjacent in the flat buffer:
 * [3D, D]), split + RoPE in one kernel, attention through k_attention_fwd
 * (flash or materialised), and activations stored in lt, the products'
 * input dtype, so no product casts (model_internal.h, fused_acts). In 16
 * bits the norms' outputs are kept for backward's weight gradients
 * (recomputing them cost two passes per layer).
 *
 *   x_0 = emb[ids]
 *   layer i:  n1 = RMSNorm(x_i)           (x_i = resid_{i-1} + f_{i-1})
 *             q, k, v = RoPE/split(n1 W_qkv^T);  o = attn(q, k, v)
 *             resid_i = x_i + merge(o) W_o^T;    n2 = RMSNorm(resid_i)
 *             a = n2 W1^T, b = n2 W3^T (lt);  f_i = (silu(a) * b) W2^T
 *   logits = RMSNorm(resid_L + f_L) W_lm^T (fp32)
 *
 * With checkpointing the layers of each group write the same tensors
 * (model_internal.h, fused_acts.group); backward rebuilds them. */
#include "config.h"
#include "model/model.h"
#include "model/model_internal.h"

#include "common/check.h"

#include <math.h>

/* y[n, dout] (yt) = x[n, din] (lt) W^T, W in lt (layer_low). */
static int linear(model *m, engine *e, const void *x, const void *W, void *y,
                  dtype yt, int n, int din, int dout) {
  return k_matmul_ex(e, 0, 1, n, dout, din, 1.0f, x, din, W, din, m->lt,
                     0.0f, y, dout, yt, m->opt.f32);
}

/* Where layer l's norm outputs go: kept per layer, or the fp32 scratch. */
#define N1(l) ((l)->n1 ? (l)->n1 : a->norm)
#define N2(l) ((l)->n2 ? (l)->n2 : a->norm)
/* Where layer l's residual after attention goes: kept, or the scratch. */
#define RESID(l) ((l)->resid ? (l)->resid : a->resid)

int model_fused_layer_fwd(model *m, engine *e, int i, int from_x,
                          int rerun) {
  fused_acts *a = &m->f;
  const int b = m->fwd_b, t = m->fwd_t, N = b * t;
  const int D = m->c.d_model, F = m->c.d_ff;
  const int H = m->c.heads, Dh = D / H;
  const float eps = m->c.norm_eps, scale = 1.0f / sqrtf((float)Dh);
  const dtype lt = m->lt;
  const layer_ptrs *p = &m->p.layer[i];
  const layer_low *w = &m->lo[i];
  fused_layer *l = &a->layer[i];
  /* x_i = resid_{i-1} + f_{i-1} (kept: backward's ln1 input) */
  if (from_x)
    TRY(k_add_rmsnorm_fwd(e, l->x, NULL, NULL, p->ln1, N1(l), lt, l->rstd1,
                          N, D, eps));
  else
    TRY(k_add_rmsnorm_fwd(e, RESID(&a->layer[i - 1]), a->tmp, l->x, p->ln1,
                          N1(l), lt, l->rstd1, N, D, eps));
  TRY(linear(m, e, N1(l), w->wqkv, a->qkv, lt, N, D, 3 * D));
  TRY(k_qkv_split_rope(e, a->qkv, l->q, l->k, l->v, lt, b, t, H, Dh,
                       m->c.rope_theta));
  /* a rerun with ckpt_keep_attn: o and lse are forward's, kept */
  if (!(rerun && m->opt.ckpt_keep_attn))
    TRY(k_attention_fwd(e, m->opt.attention, l->q, l->k, l->v, l->o, l->lse,
                        l->P, b * H, t, t, Dh, 1, scale, lt));
  TRY(k_merge_heads_ex(e, l->o, lt, a->om, lt, b, t, H, Dh));
  TRY(linear(m, e, a->om, w->wo, a->tmp, DT_F32, N, D, D));
  TRY(k_add_rmsnorm_fwd(e, l->x, a->tmp, RESID(l), p->ln2, N2(l), lt,
                        l->rstd2, N, D, eps));
  TRY(linear(m, e, N2(l), w->w1, l->a, lt, N, D, F));
  TRY(linear(m, e, N2(l), w->w3, l->b, lt, N, D, F));
  TRY(k_swiglu_fwd_ex(e, l->a, l->b, a->h, lt, (size_t)N * F));
  TRY(linear(m, e, a->h, w->w2, a->tmp, DT_F32, N, F, D));
  return 0;
}

int model_head_chunk(model *m, engine *e, int r0, int n) {
  const size_t D = (size_t)m->c.d_model;
  const char *x = (const char *)m->f.lnf + (size_t)r0 * D * dtype_size(m->lt);
  return linear(m, e, x, m->lo_lm, m->f.logits, DT_F32, n, (int)D,
                m->c.vocab);
}

int model_forward_fused(model *m) {
  engine *e = m->e;
  fused_acts *a = &m->f;
  const int N = m->fwd_b * m->fwd_t, D = m->c.d_model, V = m->c.vocab;
  const int L = m->c.layers;
  const float eps = m->c.norm_eps;

  /* model_weights: each group bound around its reads (bound weights) */
  TRY(model_weights(m, -1, 1));
  TRY(k_embedding_fwd(e, m->ids, m->p.emb, a->embed, N, D, V));
  TRY(model_weights(m, -1, 0));
  for (int i = 0; i < L; i++) {
    TRY(model_weights(m, i, 1));
    TRY(model_fused_layer_fwd(m, e, i, i == 0, 0));
    TRY(model_weights(m, i, 0));
  }
  TRY(model_weights(m, L, 1));
  TRY(k_add_rmsnorm_fwd(e, RESID(&a->layer[L - 1]), a->tmp, a->xl, m->p.lnf,
                        a->lnf, m->lt, a->lnf_rstd, N, D, eps));
  if (!m->opt.head_chunk) {
    TRY(linear(m, e, a->lnf, m->lo_lm, a->logits, DT_F32, N, D, V));
  } else {   /* each chunk's logits, then its rows' loss terms */
    for (int r0 = 0; r0 < N; r0 += m->opt.head_chunk) {
      int n = N - r0 < m->opt.head_chunk ? N - r0 : m->opt.head_chunk;
      TRY(model_head_chunk(m, e, r0, n));
      TRY(k_cross_entropy_fwd(e, a->logits, m->targets + r0, a->losses + r0,
                              a->lse + r0, n, V));
    }
  }
  TRY(model_weights(m, L, 0));
  return 0;
}
