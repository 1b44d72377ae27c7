/* Forward: model.md's computation as a straight list of kernel calls.
 *
 * The norms are RMSNorm, or LayerNorm (weight and bias) when the config
 * says so (model_config.norm; this path only: the fused one is RMSNorm's).
 *
 *   h0 = token_embeddings[ids]
 *   per layer:  r = h + output_proj(attn(RoPE, causal, ln1(h)))
 *               h = r + w2(silu(w1 ln2(r)) * w3 ln2(r))
 *   logits = lm_head(ln_final(h)); loss = mean_i CE(logits_i, targets_i)
 *
 * Every tensor backward needs is kept in the activation table
 * (model_internal.h); scratch.tmp and scratch.heads hold values that are
 * used once and not kept. Shapes: N = b*t rows, D = H*Dh, F = d_ff,
 * V = vocab; per-head tensors are [b, H, t, Dh], scores [b, H, t, t]. */
#include "config.h"
#include "model/model.h"
#include "model/model_internal.h"

#include "common/check.h"

#include <math.h>

/* y[N, dout] = x[N, din] W^T, W [dout, din]. */
static int linear(model *m, const float *x, const float *W, float *y, int n,
                  int din, int dout) {
  return k_matmul(m->e, 0, 1, n, dout, din, 1.0f, x, din, W, din, 0.0f, y,
                  dout, m->compute);
}

/* y = norm(x) over N rows: RMSNorm with gain w (b, mean unused), or
 * LayerNorm with weight w and bias b (model_config.norm); the statistics
 * backward needs (rstd; LayerNorm's mean) are kept. */
static int norm_fwd(model *m, const float *x, const float *w, const float *b,
                    float *y, float *mean, float *rstd, int n) {
  if (m->c.norm == NORM_LAYER)
    return k_layernorm_fwd(m->e, x, w, b, y, mean, rstd, n, m->c.d_model,
                           m->c.norm_eps);
  return k_rmsnorm_fwd(m->e, x, w, y, rstd, n, m->c.d_model, m->c.norm_eps);
}

/* One attention sublayer: l->resid = x + Wo . attn(ln1(x)). */
static int attention_fwd(model *m, int i, const float *x, int b, int t) {
  engine *e = m->e;
  const layer_ptrs *p = &m->p.layer[i];
  layer_acts *l = &m->a.layer[i];
  const int N = b * t, D = m->c.d_model, H = m->c.heads, Dh = D / H;
  const float scale = 1.0f / sqrtf((float)Dh);
  const long long sh = (long long)t * Dh, ss = (long long)t * t;

  TRY(norm_fwd(m, x, p->ln1, p->ln1_b, l->ln1_out, l->ln1_mean, l->ln1_rstd,
               N));
  /* q, k, v: project into l->o [N, D], split into heads [b, H, t, Dh]. */
  TRY(linear(m, l->ln1_out, p->wq, l->o, N, D, D));
  TRY(k_split_heads(e, l->o, l->q, b, t, H, Dh));
  TRY(k_rope(e, l->q, b, H, t, Dh, m->c.rope_theta, 0));
  TRY(linear(m, l->ln1_out, p->wk, l->o, N, D, D));
  TRY(k_split_heads(e, l->o, l->k, b, t, H, Dh));
  TRY(k_rope(e, l->k, b, H, t, Dh, m->c.rope_theta, 0));
  TRY(linear(m, l->ln1_out, p->wv, l->o, N, D, D));
  TRY(k_split_heads(e, l->o, l->v, b, t, H, Dh));
  /* S = Q K^T per head; P = causal softmax(S / sqrt(Dh)), in place. Each
   * a range: the profile sets the softmax against the two products. */
  IN_RANGE(e, "attention.scores",
           k_matmul_batched(e, 0, 1, t, t, Dh, 1.0f, l->q, Dh, sh, l->k, Dh,
                            sh, 0.0f, l->scores, t, ss, b * H, m->compute));
  IN_RANGE(e, "attention.softmax",
           k_softmax_causal_fwd(e, l->scores, l->scores, b * H, t, scale));
  /* P V per head into scratch.heads, heads merged into l->o [N, D]. */
  IN_RANGE(e, "attention.values",
           k_matmul_batched(e, 0, 0, t, Dh, t, 1.0f, l->scores, t, ss, l->v,
                            Dh, sh, 0.0f, m->a.g_heads, Dh, sh, b * H,
                            m->compute));
  TRY(k_merge_heads(e, m->a.g_heads, l->o, b, t, H, Dh));
  /* Output projection into scratch.tmp, then the residual. */
  TRY(linear(m, l->o, p->wo, m->a.g_tmp, N, D, D));
  TRY(k_add(e, x, m->a.g_tmp, l->resid, (size_t)N * D));
  return 0;
}

/* One SwiGLU sublayer: l->out = r + w2(silu(w1 ln2(r)) * w3 ln2(r)). */
static int ffn_fwd(model *m, int i, int b, int t) {
  engine *e = m->e;
  const layer_ptrs *p = &m->p.layer[i];
  layer_acts *l = &m->a.layer[i];
  const int N = b * t, D = m->c.d_model, F = m->c.d_ff;

  TRY(norm_fwd(m, l->resid, p->ln2, p->ln2_b, l->ln2_out, l->ln2_mean,
               l->ln2_rstd, N));
  TRY(linear(m, l->ln2_out, p->w1, l->a, N, D, F));
  TRY(linear(m, l->ln2_out, p->w3, l->b, N, D, F));
  TRY(k_swiglu_fwd(e, l->a, l->b, l->h, (size_t)N * F));
  TRY(linear(m, l->h, p->w2, m->a.g_tmp, N, F, D));
  TRY(k_add(e, l->resid, m->a.g_tmp, l->out, (size_t)N * D));
  return 0;
}

/* Forward's engine work for the shape of m->fwd_b, fwd_t, from the ids
 * (and targets) already on the engine to the per-position losses: what
 * model_options.graphs records. */
static int forward_work(model *m) {
  engine *e = m->e;
  model_acts *a = &m->a;
  const int b = m->fwd_b, t = m->fwd_t;
  const int N = b * t, D = m->c.d_model, V = m->c.vocab;
  float *logits, *losses, *lse;
  if (m->opt.fused) {
    TRY(model_forward_fused(m));   /* head_chunk: the loss terms too */
    if (m->opt.head_chunk) return 0;
    logits = m->f.logits, losses = m->f.losses, lse = m->f.lse;
  } else {
    TRY(k_embedding_fwd(e, m->ids, m->p.emb, a->embed_out, N, D, V));
    const float *x = a->embed_out;
    for (int i = 0; i < m->c.layers; i++) {
      TRY(attention_fwd(m, i, x, b, t));
      TRY(ffn_fwd(m, i, b, t));
      x = a->layer[i].out;
    }
    TRY(norm_fwd(m, x, m->p.lnf, m->p.lnf_b, a->lnf_out, a->lnf_mean,
                 a->lnf_rstd, N));
    TRY(linear(m, a->lnf_out, m->p.lm, a->logits, N, D, V));
    logits = a->logits, losses = a->losses, lse = a->lse;
  }
  if (m->fwd_targets)
    TRY(k_cross_entropy_fwd(e, logits, m->targets, losses, lse, N, V));
  return 0;
}

static int forward(model *m, const int32_t *ids, const int32_t *targets,
                   int b, int t, float *loss);

/* Each pass is a named range (eng_range_push): Nsight Systems shows it,
 * and the kernel-level profile attributes the pass's kernels to it. */
int model_forward(model *m, const int32_t *ids, const int32_t *targets,
                  int b, int t, float *loss) {
  TRY(eng_range_push(m->e, "forward"));
  int rc = forward(m, ids, targets, b, t, loss);
  int rp = eng_range_pop(m->e);
  return rc < 0 ? rc : rp;
}

static int forward(model *m, const int32_t *ids, const int32_t *targets,
                   int b, int t, float *loss) {
  engine *e = m->e;
  const int N = b * t, V = m->c.vocab;
  if (b < 1 || b > m->B || t < 1 || t > m->T)
    FAIL(ERR_FAIL,
         "model_forward: batch %d x seq %d outside the 1..%d x 1..%d the "
         "model was created for", b, t, m->B, m->T);
  for (int i = 0; i < N; i++) {
    if (ids[i] < 0 || ids[i] >= V)
      FAIL(ERR_FAIL, "model_forward: token id %d at position %d outside "
           "the vocabulary 0..%d", (int)ids[i], i, V - 1);
    if (targets && (targets[i] < 0 || targets[i] >= V))
      FAIL(ERR_FAIL, "model_forward: target %d at position %d outside "
           "the vocabulary 0..%d", (int)targets[i], i, V - 1);
  }
  if (!targets && m->opt.head_chunk)
    FAIL(ERR_FAIL, "model_forward: head_chunk = %d keeps no logits, only "
         "the loss (allowed with head_chunk: targets)", m->opt.head_chunk);
  m->fwd_loss = 0;
  m->fwd_b = b;
  m->fwd_t = t;
  m->fwd_targets = targets != NULL;
  TRY(eng_upload(e, m->ids, ids, (size_t)N * sizeof(int32_t)));
  if (targets)
    TRY(eng_upload(e, m->targets, targets, (size_t)N * sizeof(int32_t)));
  TRY(model_params_low_current(m));
  const int key[3] = {b, t, targets != NULL};
  TRY(model_run_graphed(m, &m->gfwd, key, 1.0f, forward_work));
  if (targets == NULL) {
    TRY(eng_sync(e));
    return 0;
  }
  TRY(eng_download(e, m->host_losses,
                   m->opt.fused ? m->f.losses : m->a.losses,
                   (size_t)N * sizeof(float)));
  TRY(eng_sync(e));
  double sum = 0.0;
  for (int i = 0; i < N; i++) sum += m->host_losses[i];
  if (loss) *loss = (float)(sum / N);
  m->fwd_loss = 1;
  return 0;
}
