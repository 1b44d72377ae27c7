/* The model's memory: one engine allocation each for parameters, gradients
 * and the two AdamW moments ("params", "grads", "adam_m", "adam_v"), laid
 * out by model_layout; one for the activations ("activations"), laid out by
 * the table below; one for the token ids and targets ("inputs"). All but the
 * AdamW moments are allocated here, by model_create; the moments at the
 * first optimizer step (a model that never steps never holds them), and
 * nothing during a step after that. */
#include "config.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "kernels/init_normal.h"

#include "common/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the activation table ----------------------------------------------- */

/* Views are appended with the address of the pointer that will hold them;
 * once the allocation exists every pointer is set to base + offset. */
typedef struct act_builder {
  tensor_view *views;
  float ***slots;
  int n, cap;
  size_t off;
  int align;      /* start every view on a 256-byte boundary */
} act_builder;

static int act_add_t(act_builder *b, void *slot, const char *name,
                     size_t rows, size_t cols, size_t esz);

static int act_add(act_builder *b, float **slot, const char *name, size_t rows,
                   size_t cols) {
  return act_add_t(b, slot, name, rows, cols, sizeof(float));
}

/* A view of rows x cols elements of esz bytes. Offsets count 4-byte slots;
 * 16-bit tensors (the fused path's) take half as many slots. 16-bit views,
 * and every view of the fused path, start on a 256-byte boundary, which
 * vector loads, tensor cores and the flash kernels want. */
static int act_add_t(act_builder *b, void *slot_, const char *name,
                     size_t rows, size_t cols, size_t esz) {
  float **slot = slot_;
  if (b->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 64;
    tensor_view *v = realloc(b->views, (size_t)cap * sizeof *v);
    CHECK_ALLOC(v, (size_t)cap * sizeof *v);
    b->views = v;
    float ***s = realloc(b->slots, (size_t)cap * sizeof *s);
    CHECK_ALLOC(s, (size_t)cap * sizeof *s);
    b->slots = s;
    b->cap = cap;
  }
  if (b->align || esz != sizeof(float)) b->off = (b->off + 63) / 64 * 64;
  tensor_view *t = &b->views[b->n];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->offset = b->off;
  t->numel = rows * cols;
  t->ndim = cols == 1 ? 1 : 2;
  t->shape[0] = (int)rows;
  t->shape[1] = cols == 1 ? 0 : (int)cols;
  b->slots[b->n] = slot;
  b->n++;
  b->off += (t->numel * esz + sizeof(float) - 1) / sizeof(float);
  if (esz != sizeof(float)) b->off = (b->off + 63) / 64 * 64;
  return 0;
}

/* Every activation of a (B, T) step. Saved for backward: per layer 14
 * tensors (16 with LayerNorm: each norm's mean too), plus the embeddings,
 * the final norm, logits and loss terms.
 * Scratch shared by all layers: the scratch.* views (model_internal.h says
 * what each holds in forward and in backward). Sizes use B, T, H = heads,
 * Dh = D / H, N = B*T. */
static int act_table(model *m, act_builder *b) {
  const size_t B = (size_t)m->B, T = (size_t)m->T, N = B * T;
  const size_t D = (size_t)m->c.d_model, F = (size_t)m->c.d_ff;
  const size_t V = (size_t)m->c.vocab, H = (size_t)m->c.heads, Dh = D / H;
  model_acts *a = &m->a;
  const int ln = m->c.norm == NORM_LAYER;
  char name[64];
  TRY(act_add(b, &a->embed_out, "token_embeddings.out", N, D));
  for (int i = 0; i < m->c.layers; i++) {
    layer_acts *l = &a->layer[i];
#define ACT(field, suffix, rows, cols)                                        \
  do {                                                                       \
    snprintf(name, sizeof name, "layers.%d.%s", i, suffix);                  \
    TRY(act_add(b, &l->field, name, rows, cols));                            \
  } while (0)
    ACT(ln1_out, "ln1.out", N, D);
    ACT(ln1_rstd, "ln1.rstd", N, 1);
    if (ln) ACT(ln1_mean, "ln1.mean", N, 1);
    ACT(q, "attn.q", B * H * T, Dh);
    ACT(k, "attn.k", B * H * T, Dh);
    ACT(v, "attn.v", B * H * T, Dh);
    ACT(scores, "attn.scores", B * H * T, T);
    ACT(o, "attn.o", N, D);
    ACT(resid, "attn.residual", N, D);
    ACT(ln2_out, "ln2.out", N, D);
    ACT(ln2_rstd, "ln2.rstd", N, 1);
    if (ln) ACT(ln2_mean, "ln2.mean", N, 1);
    ACT(a, "ffn.a", N, F);
    ACT(b, "ffn.b", N, F);
    ACT(h, "ffn.h", N, F);
    ACT(out, "output", N, D);
#undef ACT
  }
  TRY(act_add(b, &a->lnf_out, "ln_final.out", N, D));
  TRY(act_add(b, &a->lnf_rstd, "ln_final.rstd", N, 1));
  if (ln) TRY(act_add(b, &a->lnf_mean, "ln_final.mean", N, 1));
  TRY(act_add(b, &a->logits, "lm_head.logits", N, V));
  TRY(act_add(b, &a->losses, "loss.per_token", N, 1));
  TRY(act_add(b, &a->lse, "loss.lse", N, 1));
  TRY(act_add(b, &a->g_resid, "scratch.grad_residual", N, D));
  TRY(act_add(b, &a->g_norm, "scratch.grad_norm", N, D));
  TRY(act_add(b, &a->g_tmp, "scratch.tmp", N, D));
  TRY(act_add(b, &a->g_heads, "scratch.heads", B * H * T, Dh));
  TRY(act_add(b, &a->g_q, "scratch.grad_q", B * H * T, Dh));
  TRY(act_add(b, &a->g_k, "scratch.grad_k", B * H * T, Dh));
  TRY(act_add(b, &a->g_v, "scratch.grad_v", B * H * T, Dh));
  TRY(act_add(b, &a->g_scores, "scratch.grad_scores", B * H * T, T));
  TRY(act_add(b, &a->g_a, "scratch.grad_ffn_a", N, F));
  TRY(act_add(b, &a->g_b, "scratch.grad_ffn_b", N, F));
  TRY(act_add(b, &a->g_h, "scratch.grad_ffn_h", N, F));
  return 0;
}

/* The fused path's table (model_internal.h, fused_acts): saved per layer
 * the input x, resid, the two norms' rstd (and their 16-bit outputs), q, k,
 * v, o, lse, a, b (P too when attention is materialised); scratch shared by
 * all layers. Norm outputs are kept only in 16 bits: in fp32 they would
 * make the fused path keep more than op-by-op, and recomputing them is
 * 0.2% of an fp32 step. With gradient slots (the memory-lean in-backward
 * form) they are recomputed in 16 bits too, and so is the fp32 residual
 * after attention (x + merge(o) Wo^T: one product of d_model^2 a token),
 * each by forward's kernels on the same saved inputs, so the same bits;
 * keep_norms keeps both as without slots. Backward rebuilds what it finds
 * missing (a layer's n1, n2, resid NULL). */
static int fused_act_table(model *m, act_builder *b) {
  const size_t B = (size_t)m->B, T = (size_t)m->T, N = B * T;
  const size_t D = (size_t)m->c.d_model, F = (size_t)m->c.d_ff;
  const size_t V = (size_t)m->c.vocab, H = (size_t)m->c.heads, Dh = D / H;
  const size_t lz = dtype_size(m->lt), fz = sizeof(float);
  fused_acts *a = &m->f;
  char name[64];
  /* With checkpointing (a->group < layers) only the first `group` layers'
   * tensors exist: every group of layers reuses them (create points the
   * rest there), and each later group's first layer has its own input,
   * "checkpoint.G.input". */
  const int L = m->c.layers, G = a->group;
  const int kept = !m->opt.grad_slots || m->opt.keep_norms;
  TRY(act_add(b, &a->embed, "token_embeddings.out", N, D));
  for (int g = 1; G < L && g * G < L; g++) {
    snprintf(name, sizeof name, "checkpoint.%d.input", g);
    TRY(act_add(b, &a->layer[g * G].x, name, N, D));
  }
  /* ckpt_keep_attn: layers past the workspace keep their own o and lse
   * (the workspace's layers keep theirs below) */
  for (int i = G; m->opt.ckpt_keep_attn && i < L; i++) {
    snprintf(name, sizeof name, "layers.%d.attn.o", i);
    TRY(act_add_t(b, &a->layer[i].o, name, B * H * T, Dh, lz));
    snprintf(name, sizeof name, "layers.%d.attn.lse", i);
    TRY(act_add_t(b, &a->layer[i].lse, name, B * H * T, 1, fz));
  }
  for (int i = 0; i < G; i++) {
    fused_layer *l = &a->layer[i];
#define ACT(field, suffix, rows, cols, esz)                                     do {                                                                           snprintf(name, sizeof name, "layers.%d.%s", i, suffix);                      TRY(act_add_t(b, &l->field, name, rows, cols, esz));                       } while (0)
    if (i > 0) ACT(x, "input", N, D, fz);
    ACT(rstd1, "ln1.rstd", N, 1, fz);
    const int keep_norms = m->lt != DT_F32 && kept;
    if (keep_norms) ACT(n1, "ln1.out", N, D, lz);
    ACT(q, "attn.q", B * H * T, Dh, lz);
    ACT(k, "attn.k", B * H * T, Dh, lz);
    ACT(v, "attn.v", B * H * T, Dh, lz);
    ACT(o, "attn.o", B * H * T, Dh, lz);
    ACT(lse, "attn.lse", B * H * T, 1, fz);
    if (m->opt.attention == ATTN_MATERIALIZED)
      ACT(P, "attn.scores", B * H * T, T, lz);
    if (kept) ACT(resid, "attn.residual", N, D, fz);
    ACT(rstd2, "ln2.rstd", N, 1, fz);
    if (keep_norms) ACT(n2, "ln2.out", N, D, lz);
    ACT(a, "ffn.a", N, F, lz);
    ACT(b, "ffn.b", N, F, lz);
#undef ACT
  }
  TRY(act_add(b, &a->xl, "output", N, D));
  TRY(act_add_t(b, &a->lnf, "ln_final.out", N, D, lz));
  TRY(act_add(b, &a->lnf_rstd, "ln_final.rstd", N, 1));
  /* head_chunk: one chunk's rows of logits (and of their gradient) */
  const size_t HR = m->opt.head_chunk > 0 && (size_t)m->opt.head_chunk < N
                        ? (size_t)m->opt.head_chunk : N;
  TRY(act_add(b, &a->logits, "lm_head.logits", HR, V));
  TRY(act_add(b, &a->losses, "loss.per_token", N, 1));
  TRY(act_add(b, &a->lse, "loss.lse", N, 1));
  /* dlogits: the logits in place in fp32; else h's buffer when it fits
   * (fused_acts) */
  if (m->lt != DT_F32 && HR * V > N * F)
    TRY(act_add_t(b, &a->dlogits, "scratch.grad_logits", HR, V, lz));
  TRY(act_add_t(b, &a->qkv, "scratch.qkv", N, 3 * D, lz));
  TRY(act_add(b, &a->tmp, "scratch.tmp", N, D));
  if (!kept) TRY(act_add(b, &a->resid, "scratch.residual", N, D));
  if (m->lt == DT_F32 || !kept)
    TRY(act_add_t(b, &a->norm, "scratch.norm", N, D, lz));
  TRY(act_add_t(b, &a->om, "scratch.attn_merged", N, D, lz));
  TRY(act_add_t(b, &a->h, "scratch.ffn_h", N, F, lz));
  TRY(act_add(b, &a->dres, "scratch.grad_residual", N, D));
  if (m->lt != DT_F32)
    TRY(act_add_t(b, &a->dres_low, "scratch.grad_residual_low", N, D, lz));
  TRY(act_add_t(b, &a->dn, "scratch.grad_norm", N, D, lz));
  TRY(act_add_t(b, &a->dom, "scratch.grad_attn_merged", N, D, lz));
  if (kept)   /* else dv shares the rebuilt residual's scratch (create) */
    TRY(act_add_t(b, &a->dv, "scratch.grad_v", B * H * T, Dh, lz));
  /* dh, dO, dq, dk, dqkv (and dv where the residual is rebuilt, dlogits
   * where it fits) share buffers (fused_acts): set in create */
  return 0;
}

/* ---- parameter pointers ------------------------------------------------- */

/* Per-tensor pointers: view i at base + off[i], or at its own offset in
 * the flat buffer when off is NULL. layer_ptrs serves the gradients too,
 * hence not const: forward and backward only read the weights' pointers
 * (m->p), and writing the weights goes through params_write. */
static void set_ptrs(const model *m, const float *base, const size_t *off,
                     param_ptrs *p) {
#define AT(i) ((float *)base + (off ? off[i] : m->views[i].offset))
  const model_config *c = &m->c;
  int ln = c->norm == NORM_LAYER;
  p->emb = AT(0);
  for (int i = 0; i < c->layers; i++) {
#define L(t) AT(model_layer_view(c, i, (t)))
    layer_ptrs *q = &p->layer[i];
    q->ln1 = L(P_LN1);
    q->wq = L(P_WQ);
    q->wk = L(P_WK);
    q->wv = L(P_WV);
    q->wo = L(P_WO);
    q->ln2 = L(P_LN2);
    q->w1 = L(P_W1);
    q->w2 = L(P_W2);
    q->w3 = L(P_W3);
    q->ln1_b = ln ? L(P_LN1_B) : NULL;
    q->ln2_b = ln ? L(P_LN2_B) : NULL;
#undef L
  }
  p->lnf = AT(model_head_view(c, 0));
  p->lnf_b = ln ? AT(model_head_view(c, 1)) : NULL;
  p->lm = AT(model_head_view(c, 2));
#undef AT
}

/* Every gradient to zero, wherever it lives. */
static int zero_grads(model *m) {
  if (!m->goff) return eng_memset0(m->e, m->grads, m->ngrads * sizeof(float));
  for (int k = 0; k < m->nzrun; k++)
    TRY(eng_memset0(m->e, m->gbase + m->zrun[2 * k],
                    m->zrun[2 * k + 1] * sizeof(float)));
  return 0;
}

static int by_offset(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

/* m->zrun from m->goff: the placed ranges in address order, merged where
 * one ends at the next one's start. */
static int zero_runs(model *m) {
  int n = m->nviews, k = 0;
  size_t *run = malloc((size_t)(n ? n : 1) * 2 * sizeof *run);
  CHECK_ALLOC(run, (size_t)n * 2 * sizeof *run);
  for (int v = 0; v < n; v++) {
    run[2 * v] = m->goff[v];
    run[2 * v + 1] = m->views[v].numel;
  }
  qsort(run, (size_t)n, 2 * sizeof *run, by_offset);
  for (int i = 0; i < n; i++) {
    size_t lo = run[2 * i], cnt = run[2 * i + 1];
    if (cnt == 0) continue;
    if (k > 0 && run[2 * (k - 1)] + run[2 * (k - 1) + 1] == lo) {
      run[2 * (k - 1) + 1] += cnt;
    } else {
      run[2 * k] = lo;
      run[2 * k + 1] = cnt;
      k++;
    }
  }
  free(m->zrun);
  m->zrun = run;
  m->nzrun = k;
  return 0;
}

static int not_bound(const model *m, const char *what) {
  if (m->opt.bound_weights)
    FAIL(ERR_FAIL, "%s: the weight matrices are bound from outside "
         "(model_options.bound_weights); whoever binds them owns, updates "
         "and saves them", what);
  return 0;
}

static int not_placed_slots(const model *m, const char *what) {
  if (m->gmap)
    FAIL(ERR_FAIL, "%s: the model keeps its gradients in slots "
         "(model_options.grad_slots), whose places are its own", what);
  return 0;
}

static int not_placed(const model *m, const char *what) {
  TRY(not_bound(m, what));
  if (m->gmap)
    FAIL(ERR_FAIL, "%s: the model keeps its gradients in slots "
         "(model_options.grad_slots): it trains with model_backward_adamw "
         "only", what);
  if (m->goff)
    FAIL(ERR_FAIL, "%s: the gradients are placed outside the model "
         "(model_place_grads); whoever placed them steps the optimizer",
         what);
  return 0;
}

/* What the products read (layer_low), from params_low: at the views'
 * offsets in the model's own copy. Again whenever params_low moves. */
static void set_low_ptrs(model *m) {
  const size_t es = dtype_size(m->lt);
  const char *base = m->params_low;
#define LO(v) ((const void *)(base + m->views[(v)].offset * es))
  for (int i = 0; i < m->c.layers; i++) {
    layer_low *q = &m->lo[i];
    q->wqkv = LO(model_layer_view(&m->c, i, P_WQ));
    q->wo = LO(model_layer_view(&m->c, i, P_WO));
    q->w1 = LO(model_layer_view(&m->c, i, P_W1));
    q->w2 = LO(model_layer_view(&m->c, i, P_W2));
    q->w3 = LO(model_layer_view(&m->c, i, P_W3));
  }
  m->lo_lm = LO(model_head_view(&m->c, 2));
#undef LO
}

/* ---- create / destroy --------------------------------------------------- */

static int alloc_f32(engine *e, float **p, size_t n, const char *tag) {
  void *q = NULL;
  TRY(eng_alloc(e, n * sizeof(float), tag, &q));
  *p = q;
  return eng_memset0(e, q, n * sizeof(float));
}

/* Where each view's gradient lives (model_internal.h: ngrads, gmap): at
 * its own offset, or with grad_slots in slot grad_slot(grad_group(v),
 * layers) at its offset within its group. A group's views are one run of the table
 * (model_layout: the embedding, the layers end to end, the final norm and
 * the head), checked here. With the optimizer in the products the weight
 * matrices' gradients are never stored: a group's other views (the norms'
 * gains, the embedding) are packed in table order, and a product view's
 * entry is its slot's start, which nothing writes through it. */
static int grad_layout(model *m) {
  m->ngrads = m->nparams;
  if (m->opt.bound_weights) {
    /* two slots, each of the largest packed run of the groups it holds,
     * then the 1-D views' gradients, which live through the whole
     * backward */
    size_t slot[2] = {0, 0};
    for (int g = -1; g <= m->c.layers; g++) {
      size_t w = (size_t)m->opt.bound_weights * model_group_chunk(m, g);
      int s = grad_slot(g, m->c.layers);
      if (w > slot[s]) slot[s] = w;
    }
    m->slot_at[0] = 0;
    m->slot_at[1] = slot[0];
    m->gmap = malloc((size_t)m->nviews * sizeof *m->gmap);
    CHECK_ALLOC(m->gmap, (size_t)m->nviews * sizeof *m->gmap);
    for (int v = 0; v < m->nviews; v++) {
      int g;
      size_t at;
      model_view_place(m, v, &g, &at);
      m->gmap[v] = g == MODEL_NORMS ? slot[0] + slot[1] + at
                                    : m->slot_at[grad_slot(g, m->c.layers)] + at;
    }
    m->ngrads = slot[0] + slot[1] + m->nnorm;
    return 0;
  }
  if (!m->opt.grad_slots) return 0;
  const int L = m->c.layers, nv = m->nviews;
  size_t emb = m->views[0].numel, lay0 = m->views[1].offset;
  size_t tail = m->views[nv - 2].offset, per = tail - lay0;
  if (L < 1 || per % (size_t)L != 0 || lay0 != emb ||
      grad_group(nv - 3, nv, L) != L - 1)
    FAIL(ERR_FAIL, "gradient slots: layers not laid out end to end");
  per /= (size_t)L;
  size_t head = m->nparams - tail, slot[2] = {0, 0}, packed = 0;
  m->gmap = malloc((size_t)nv * sizeof *m->gmap);
  CHECK_ALLOC(m->gmap, (size_t)nv * sizeof *m->gmap);
  for (int v = 0; v < nv; v++) {   /* each view's place in its group's run */
    int g = grad_group(v, nv, L);
    size_t start = g < 0 ? 0 : g == L ? tail : lay0 + (size_t)g * per;
    size_t run = g < 0 ? emb : g == L ? head : per;
    size_t stored = view_in_product(m, v) ? 0 : m->views[v].numel;
    if (v == 0 || g != grad_group(v - 1, nv, L)) packed = 0;
    size_t in = m->opt.adamw_in_products ? packed : m->views[v].offset - start;
    if (m->wgt != DT_F32) {
      /* grad_lt: packed in table order, each view at a 16-byte boundary
       * (AdamW's vector accesses), a 16-bit one in half the floats, so
       * q, k and v's (sizes multiples of 8) stay end to end for their
       * one product */
      size_t bytes = m->views[v].numel * dtype_size(view_grad_type(m, v));
      stored = (bytes + 15) / 16 * 4;
      in = packed;
      run = in + stored;
    }
    if (m->views[v].offset < start || in + stored > run)
      FAIL(ERR_FAIL, "gradient slots: view %d outside its group's run", v);
    packed += stored;
    int s = grad_slot(g, L);
    if (in + stored > slot[s]) slot[s] = in + stored;
    m->gmap[v] = in;
  }
  m->slot_at[0] = 0;
  m->slot_at[1] = slot[0];
  for (int v = 0; v < nv; v++)
    m->gmap[v] += m->slot_at[grad_slot(grad_group(v, nv, L), L)];
  m->ngrads = slot[0] + slot[1];
  return 0;
}

static int create(model *m) {
  engine *e = m->e;
  TRY(model_layout(&m->c, &m->views, &m->nviews, &m->nparams));
  size_t L = (size_t)m->c.layers;
  m->p.layer = calloc(L, sizeof(layer_ptrs));
  CHECK_ALLOC(m->p.layer, L * sizeof(layer_ptrs));
  m->g.layer = calloc(L, sizeof(layer_ptrs));
  CHECK_ALLOC(m->g.layer, L * sizeof(layer_ptrs));
  m->a.layer = calloc(L, sizeof(layer_acts));
  CHECK_ALLOC(m->a.layer, L * sizeof(layer_acts));
  m->f.layer = calloc(L, sizeof(fused_layer));
  CHECK_ALLOC(m->f.layer, L * sizeof(fused_layer));
  m->f.group = m->opt.ckpt_layers > 0 && (size_t)m->opt.ckpt_layers < L
                   ? m->opt.ckpt_layers : (int)L;

  m->lo = calloc(L, sizeof(layer_low));
  CHECK_ALLOC(m->lo, L * sizeof(layer_low));
  float *params;
  if (m->opt.bound_weights) {
    /* the 1-D views only, packed; the matrices' pointers stay NULL until
     * bound (the products read layer_low, the embedding p.emb) */
    m->bound = calloc(L + 2, 1);
    CHECK_ALLOC(m->bound, L + 2);
    m->pack = malloc((size_t)m->nviews * sizeof *m->pack);
    CHECK_ALLOC(m->pack, (size_t)m->nviews * sizeof *m->pack);
    size_t run[2] = {0, 0};   /* 1-D views; 2-D views of the current group */
    int prev = -3;
    for (int v = 0; v < m->nviews; v++) {
      int g = grad_group(v, m->nviews, m->c.layers);
      if (g != prev) run[1] = 0;
      prev = g;
      int one = m->views[v].ndim == 1;
      m->pack[v] = run[!one];
      run[!one] += m->views[v].numel;
    }
    m->nnorm = run[0];
    TRY(alloc_f32(e, &params, m->nnorm, "params"));
    m->params = params;
    set_ptrs(m, m->params, m->pack, &m->p);
    m->p.emb = m->p.lm = NULL;
    for (size_t i = 0; i < L; i++) {
      layer_ptrs *q = &m->p.layer[i];
      q->wq = q->wk = q->wv = q->wo = q->w1 = q->w2 = q->w3 = NULL;
    }
  } else {
    TRY(alloc_f32(e, &params, m->nparams, "params"));
    m->params = params;
    set_ptrs(m, m->params, NULL, &m->p);
  }
  TRY(grad_layout(m));
  TRY(alloc_f32(e, &m->grads, m->ngrads, "grads"));
  set_ptrs(m, m->grads, m->gmap, &m->g);
  m->params_low = (void *)m->params;
  if (m->opt.bound_weights) {
    m->params_low = NULL;
  } else if (m->opt.fused && m->lt != DT_F32) {
    size_t bytes = m->nparams * dtype_size(m->lt);
    TRY(eng_alloc(e, bytes, "params.low", &m->params_low));
    /* zero, as the weights are: the copy of generation 0 */
    TRY(eng_memset0(e, m->params_low, bytes));
  }
  if (!m->opt.bound_weights) set_low_ptrs(m);

  act_builder b = {0};
  b.align = m->opt.fused;   /* vector loads, tensor cores, flash tiles */
  int rc = m->opt.fused ? fused_act_table(m, &b) : act_table(m, &b);
  m->act_views = b.views;
  m->nact_views = b.n;
  m->nacts = b.off;
  if (rc == 0) rc = alloc_f32(e, &m->acts, m->nacts, "activations");
  if (rc == 0)
    for (int i = 0; i < b.n; i++) *b.slots[i] = m->acts + b.views[i].offset;
  if (rc == 0 && m->opt.fused) {
    m->f.layer[0].x = m->f.embed;
    for (size_t i = (size_t)m->f.group; i < L; i++) {
      fused_layer *l = &m->f.layer[i];
      float *x = l->x;   /* a group's first layer: its own input */
      void *o = l->o;    /* ckpt_keep_attn: its own o and lse */
      float *lse = l->lse;
      *l = m->f.layer[i % (size_t)m->f.group];
      if (i % (size_t)m->f.group) x = l->x;
      l->x = x;
      if (m->opt.ckpt_keep_attn) {
        l->o = o;
        l->lse = lse;
      }
    }
    m->f.dh = m->f.h;
    m->f.dO = m->f.om;
    m->f.dq = m->f.dom;
    m->f.dk = m->f.tmp;
    if (m->f.dv == NULL) m->f.dv = m->f.resid;
    m->f.dqkv = m->f.qkv;
    if (m->f.dlogits == NULL)
      m->f.dlogits = m->lt == DT_F32 ? (void *)m->f.logits : m->f.h;
    if (m->f.dres_low == NULL) m->f.dres_low = m->f.dres;
  }
  free(b.slots);
  TRY(rc);

  size_t N = (size_t)m->B * (size_t)m->T;
  void *q = NULL;
  TRY(eng_alloc(e, 2 * N * sizeof(int32_t), "inputs", &q));
  m->ids = q;
  m->targets = m->ids + N;
  m->host_losses = malloc(N * sizeof(float));
  CHECK_ALLOC(m->host_losses, N * sizeof(float));
  return 0;
}

int model_create(model **out, engine *e, const model_config *c, int batch,
                 int seq, dtype compute) {
  model_options o = {.compute = compute, .attention = ATTN_MATERIALIZED,
                     .f32 = F32_EXACT};
  return model_create_ex(out, e, c, batch, seq, &o);
}

int model_create_ex(model **out, engine *e, const model_config *c, int batch,
                    int seq, const model_options *o) {
  char err[256];
  *out = NULL;
  if (model_config_check(c, err, sizeof err) != 0)
    FAIL(ERR_FAIL, "model config: %s", err);
  if (batch <= 0 || seq <= 0)
    FAIL(ERR_FAIL, "model_create: batch %d and seq %d must be positive",
         batch, seq);
  model *m = calloc(1, sizeof *m);
  CHECK_ALLOC(m, sizeof *m);
  m->e = e;
  m->be = e;
  m->c = *c;
  m->B = batch;
  m->T = seq;
  m->compute = o->compute;
  m->loss_scale = o->compute == DT_F16 ? 65536.0f : 1.0f;
  m->opt = *o;
  m->lt = o->fused ? o->compute : DT_F32;
  m->wgt = o->grad_lt ? m->lt : DT_F32;
  if (!o->fused && o->attention != ATTN_MATERIALIZED) {
    free(m);
    FAIL(ERR_FAIL, "model_create: the op-by-op path materialises attention "
         "(allowed with flash attention: the fused path)");
  }
  if (o->adamw_blocks < 0 || o->sm_reserve < 0) {
    free(m);
    FAIL(ERR_FAIL, "model_create: adamw_blocks = %d, sm_reserve = %d "
         "(allowed: >= 0)", o->adamw_blocks, o->sm_reserve);
  }
  if (o->fused && c->norm == NORM_LAYER) {
    free(m);
    FAIL(ERR_FAIL, "model_create: the fused path fuses RMSNorm only "
         "(allowed with LayerNorm: the op-by-op path)");
  }
  if (o->ckpt_layers < 0 || (o->ckpt_layers > 0 && !o->fused)) {
    free(m);
    FAIL(ERR_FAIL, "model_create: ckpt_layers = %d (allowed: 0, or layers "
         "a checkpoint group > 0 on the fused path, whose backward reruns "
         "a group's forward)", o->ckpt_layers);
  }
  if (o->ckpt_keep_attn &&
      (o->ckpt_layers <= 0 || o->attention != ATTN_FLASH)) {
    free(m);
    FAIL(ERR_FAIL, "model_create: ckpt_keep_attn keeps each layer's "
         "attention output through backward's reruns, whose scores "
         "materialised attention would still need (allowed: with "
         "ckpt_layers > 0 and flash attention)");
  }
  if (o->head_chunk < 0 || (o->head_chunk && (!o->fused ||
                                                 o->adamw_in_products))) {
    free(m);
    FAIL(ERR_FAIL, "model_create: head_chunk = %d (allowed: 0, or rows a "
         "chunk > 0 on the fused path without the optimizer in the "
         "products, which would step the head's weights at its first "
         "chunk)", o->head_chunk);
  }
  if (o->grad_slots && !o->fused) {
    free(m);
    FAIL(ERR_FAIL, "model_create: gradient slots need the fused path, whose "
         "products write each gradient once (allowed op by op: the whole "
         "gradient buffer)");
  }
  if (o->bound_weights < 0 || (o->bound_weights &&
      (!o->fused || o->graphs || o->adamw_in_products))) {
    free(m);
    FAIL(ERR_FAIL, "model_create: bound weights are bound group by group "
         "on the fused path, as each pass reaches them (allowed: fused, "
         "without CUDA graphs or the optimizer in the products)");
  }
  if (o->adamw_in_products && !o->grad_slots) {
    free(m);
    FAIL(ERR_FAIL, "model_create: the optimizer in the products steps "
         "backward's weights as it goes, so the model trains with "
         "model_backward_adamw only (allowed: adamw_in_products with "
         "grad_slots)");
  }
  if (o->adamw_serial && (o->adamw_blocks || o->sm_reserve)) {
    free(m);
    FAIL(ERR_FAIL, "model_create: adamw_serial runs the updates on "
         "backward's stream, so there are no SMs to split between them "
         "(allowed: adamw_blocks 0 and sm_reserve 0)");
  }
  if (o->grad_lt && (!o->grad_slots || o->bound_weights ||
                     o->adamw_in_products)) {
    free(m);
    FAIL(ERR_FAIL, "model_create: grad_lt stores the weight gradients "
         "that model_backward_adamw's updates read, private to the model "
         "(allowed: with grad_slots, without bound weights, whose "
         "gradients the caller reduces, or the optimizer in the products, "
         "which stores none)");
  }
  if (o->graphs && !eng_graphs_supported(e)) {
    free(m);
    FAIL(ERR_FAIL, "model_create: the %s engine cannot record CUDA graphs "
         "(allowed: graphs on the cuda engine)", engine_name(e));
  }
  /* The engine's fp32 products follow the model being built (a TF32
   * model must not leave the next model on the same engine in TF32). */
  int rc = eng_f32_products(e, o->f32);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    free(m);
    return rc;
  }
  rc = create(m);
  if (rc == 0 && o->sm_reserve) {   /* refused here by an engine without SMs */
    eng_ctx bc = {NULL, o->sm_reserve, 0};
    rc = eng_view(e, &bc, &m->bview);
  }
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    model_destroy(m);
    return rc;
  }
  *out = m;
  return 0;
}

void model_destroy(model *m) {
  if (m == NULL) return;
  eng_graph_destroy(m->e, m->gfwd.g);
  eng_graph_destroy(m->e, m->gbwd.g);
  eng_graph_destroy(m->e, m->gbwa.g);
  if (m->step_dev) eng_free(m->e, m->step_dev);
  for (int s = 0; s < 2; s++) eng_event_free(m->e, m->slot_ev[s]);
  engine_destroy(m->side);   /* its work: joined by every backward */
  engine_destroy(m->bview);
  free(m->gmap);
  free(m->lo);
  free(m->bound);
  free(m->pack);
  float *bufs[] = {m->params_placed ? NULL : (float *)m->params, m->grads,
                   m->adam_m, m->adam_v, m->acts};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) eng_free(m->e, bufs[i]);
  if (m->ids) eng_free(m->e, m->ids);
  if (m->params_low && m->params_low != (void *)m->params)
    eng_free(m->e, m->params_low);
  free(m->goff);
  free(m->zrun);
  free(m->f.layer);
  free(m->host_losses);
  free(m->views);
  free(m->act_views);
  free(m->p.layer);
  free(m->g.layer);
  free(m->a.layer);
  free(m);
}

/* ---- accessors ---------------------------------------------------------- */

const model_config *model_get_config(const model *m) { return &m->c; }
const float *model_params(const model *m) { return m->params; }
float *model_grads(model *m) {
  if (m->gmap) return NULL;   /* slots: no buffer of every gradient */
  /* A caller may read them now; a failed memset shows at its next sync. */
  if (model_grads_materialize(m) < 0) err_trace(__FILE__, __LINE__);
  return m->grads;
}
size_t model_nparams(const model *m) { return m->nparams; }

const tensor_view *model_views(const model *m, int *nviews) {
  *nviews = m->nviews;
  return m->views;
}

const tensor_view *model_view(const model *m, const char *name) {
  for (int i = 0; i < m->nviews; i++)
    if (strcmp(m->views[i].name, name) == 0) return &m->views[i];
  return NULL;
}

const tensor_view *model_activations(const model *m, int *n) {
  *n = m->nact_views;
  return m->act_views;
}

const float *model_logits(const model *m) {
  if (m->opt.head_chunk) return NULL;   /* a chunk's, not the batch's */
  return m->opt.fused ? m->f.logits : m->a.logits;
}

/* ---- writing the weights ------------------------------------------------ */

/* The one way to a writable pointer to the weights inside the model: the
 * generation advances before anything is written, so a write that fails
 * half way still leaves every derived copy marked behind. */
static float *params_write(model *m) {
  m->params_gen++;
  return (float *)m->params;
}

int model_set_params(model *m, size_t offset, const float *host, size_t n) {
  TRY(not_bound(m, "model_set_params"));
  if (offset > m->nparams || n > m->nparams - offset)
    FAIL(ERR_FAIL, "model_set_params: elements %zu..%zu outside the %zu "
         "weights", offset, offset + n, m->nparams);
  if (n == 0) return 0;
  int low = m->params_low != (const void *)m->params;
  int current = low && !m->params_shared && m->low_gen == m->params_gen;
  float *p = params_write(m);
  TRY(eng_upload(m->e, p + offset, host, n * sizeof(float)));
  /* Only the range written can now differ from the copy: when the rest of
   * it was current, rewriting that range makes all of it current (a load
   * or an init then leaves no cast to the next forward). Otherwise, or if
   * this fails, model_params_low_current rebuilds the whole copy. */
  if (current) {
    TRY(k_cast(m->e, p + offset, DT_F32,
               (char *)m->params_low + offset * dtype_size(m->lt), m->lt,
               n));
    m->low_gen = m->params_gen;
  }
  return 0;
}

float *model_params_writable(model *m) {
  if (m->opt.bound_weights) return params_write(m);   /* the gains alone */
  m->params_shared = 1;
  return params_write(m);
}

int model_params_low_current(model *m) {
  /* no copy of its own: the weights themselves, or bound ones */
  if (m->params_low == (const void *)m->params || m->opt.bound_weights)
    return 0;
  if (!m->params_shared && m->low_gen == m->params_gen) return 0;
  uint64_t gen = m->params_gen;
  TRY(k_cast(m->e, m->params, DT_F32, m->params_low, m->lt, m->nparams));
  m->low_gen = gen;
  return 0;
}
engine *model_engine(model *m) { return m->e; }
long long model_graph_replays(const model *m) { return m->graph_replays; }

/* ---- CUDA graphs ----------------------------------------------------------- */

/* Graphs pay where the host's launch time is not hidden behind the GPU's
 * work: a step of many short kernels. The recording holds pointers and
 * scalars, so it is keyed by everything the work reads from the host that
 * can change between calls (model.h, model_graph_replays); the buffers it
 * touches are the model's, fixed at model_create. */
int model_run_graphed(model *m, graph_slot *s, const int key[3], float scale,
                      int (*work)(model *m)) {
  engine *e = m->e;
  /* A hook or an update in backward acts per call (its own arguments, the
   * step count): run op by op, as a recording would replay stale ones;
   * but updates that read their step size from engine memory
   * (adamw_step_dev) replay right. */
  if (!m->opt.graphs || m->grad_hook || m->weight_hook ||
      (m->adamw_in_bwd && !m->adamw_step_dev) || eng_profiling(e))
    return work(m);
  if (!s->seen || memcmp(s->key, key, sizeof s->key) != 0 ||
      s->scale != scale) {
    eng_graph_destroy(e, s->g);
    s->g = NULL;
    memcpy(s->key, key, sizeof s->key);
    s->scale = scale;
    s->seen = 1;
    return work(m);
  }
  if (!s->g) {
    TRY(eng_graph_begin(e));
    int rc = work(m);
    char why[1024];
    if (rc < 0) snprintf(why, sizeof why, "%s", err_msg());
    eng_graph *g = NULL;
    int end = eng_graph_end(e, &g);
    if (rc < 0) {
      eng_graph_destroy(e, g);
      return err_set(rc, __FILE__, __LINE__, "recording a CUDA graph: %s",
                     why);
    }
    TRY(end);
    s->g = g;
  }
  TRY(eng_graph_launch(e, s->g));
  m->graph_replays++;
  return 0;
}
long long model_step_count(const model *m) { return m->step; }
void model_set_step_count(model *m, long long step) { m->step = step; }

void model_set_grad_hook(model *m, model_grad_hook fn, void *arg) {
  m->grad_hook = fn;
  m->grad_hook_arg = arg;
}

adamw_config adamw_defaults(void) {
  adamw_config o = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f};
  return o;
}

int model_zero_grad(model *m) {
  if (m->opt.fused) {
    m->grads_deferred_zero = 1;
    return 0;
  }
  TRY(zero_grads(m));
  return 0;
}

int model_grads_materialize(model *m) {
  if (!m->grads_deferred_zero) return 0;
  TRY(zero_grads(m));
  m->grads_deferred_zero = 0;
  return 0;
}

int model_place_grads(model *m, float *base, const size_t *off) {
  TRY(not_bound(m, "model_place_grads"));
  TRY(not_placed_slots(m, "model_place_grads"));
  if (base) {
    size_t *copy = malloc((size_t)m->nviews * sizeof *copy);
    CHECK_ALLOC(copy, (size_t)m->nviews * sizeof *copy);
    memcpy(copy, off, (size_t)m->nviews * sizeof *copy);
    free(m->goff);
    m->goff = copy;
    m->gbase = base;
    TRY(zero_runs(m));
    if (m->grads) eng_free(m->e, m->grads);
    m->grads = NULL;
    set_ptrs(m, base, copy, &m->g);
  } else {
    free(m->goff);
    m->goff = NULL;
    m->gbase = NULL;
    free(m->zrun);
    m->zrun = NULL;
    m->nzrun = 0;
    if (!m->grads) TRY(alloc_f32(m->e, &m->grads, m->nparams, "grads"));
    set_ptrs(m, m->grads, NULL, &m->g);
  }
  m->grads_deferred_zero = 0;
  TRY(zero_grads(m));
  return 0;
}

/* Recorded graphs hold the old addresses: record again. */
static void drop_graphs(model *m) {
  graph_slot *s[] = {&m->gfwd, &m->gbwd, &m->gbwa};
  for (int i = 0; i < 3; i++) {
    eng_graph_destroy(m->e, s[i]->g);
    s[i]->g = NULL;
    s[i]->seen = 0;
  }
}

int model_place_params(model *m, float *base) {
  TRY(not_bound(m, "model_place_params"));
  float *own = NULL;
  if (!base) {
    if (!m->params_placed) return 0;
    void *p = NULL;
    TRY(eng_alloc(m->e, m->nparams * sizeof(float), "params", &p));
    base = own = p;
  }
  if (base == m->params) return 0;
  int rc = eng_copy(m->e, base, m->params, m->nparams * sizeof(float));
  if (rc < 0) {
    if (own) eng_free(m->e, own);
    TRY(rc);
  }
  /* the engine waits for the copy before it frees */
  if (!m->params_placed) eng_free(m->e, (void *)m->params);
  if (m->params_low == (const void *)m->params) m->params_low = base;
  m->params = base;
  set_low_ptrs(m);
  m->params_placed = own == NULL;
  /* The values move unchanged; who may write them changes. The caller's
   * buffer is written outside the model (shared). A fresh own buffer has
   * had no pointer handed out, but its values came from one that was
   * written outside after the copy's last rebuild, if it was shared. */
  if (m->params_shared && !m->params_placed) m->params_gen++;
  m->params_shared = m->params_placed;
  set_ptrs(m, base, NULL, &m->p);
  drop_graphs(m);
  return 0;
}

/* The course's AdamW over the whole flat buffer; t counts from 1. The two
 * moments are allocated (zeroed) at the first step, as PyTorch's optimizers
 * do: a model that is only run forward, or whose optimizer state lives
 * elsewhere (sharded, parallel/), never holds them. */
float model_loss_scale(const model *m) { return m->loss_scale; }
long long model_skipped_steps(const model *m) { return m->skipped_steps; }

/* GradScaler's rule: unscale; on overflow halve S; grow S after 2000 good
 * steps. Called once per optimizer step. */
int model_unscale_grads(model *m, int *finite) {
  *finite = 1;
  TRY(not_placed(m, "model_unscale_grads"));
  TRY(model_grads_materialize(m));
  if (m->loss_scale == 1.0f) return 0;
  TRY(k_grad_unscale(m->e, m->grads, m->nparams, 1.0f / m->loss_scale,
                     finite));
  model_loss_scale_step(m, *finite);
  return 0;
}

void model_loss_scale_step(model *m, int finite) {
  if (m->loss_scale == 1.0f) return;
  if (!finite) {
    m->loss_scale *= 0.5f;
    m->scale_good_steps = 0;
    m->skipped_steps++;
  } else if (++m->scale_good_steps == 2000) {
    m->loss_scale *= 2.0f;
    m->scale_good_steps = 0;
  }
}

static int adamw_step(model *m, const adamw_config *o);

int model_adamw_step(model *m, const adamw_config *o) {
  TRY(eng_range_push(m->e, "optimizer"));
  int rc = adamw_step(m, o);
  int rp = eng_range_pop(m->e);
  return rc < 0 ? rc : rp;
}

/* The AdamW moments, zero, at the first step. */
static int adamw_state(model *m) {
  if (m->adam_m) return 0;
  TRY(alloc_f32(m->e, &m->adam_m, m->nparams, "adam_m"));
  TRY(alloc_f32(m->e, &m->adam_v, m->nparams, "adam_v"));
  TRY(eng_memset0(m->e, m->adam_m, m->nparams * sizeof(float)));
  TRY(eng_memset0(m->e, m->adam_v, m->nparams * sizeof(float)));
  return 0;
}

static int adamw_step(model *m, const adamw_config *o) {
  int finite;
  TRY(not_placed(m, "model_adamw_step"));
  TRY(model_unscale_grads(m, &finite));
  if (!finite) return 0;   /* skipped: the next zero_grad clears them */
  TRY(adamw_state(m));
  int low = m->params_low != (const void *)m->params;
  float *p = params_write(m);
  if (m->opt.fused) {
    /* The pass writes every element's 16-bit copy beside its new value:
     * the copy is current after it, whatever it was before, with no
     * second pass over the weights. */
    TRY(k_adamw_ex(m->e, p, low ? m->params_low : NULL, m->lt, m->grads,
                   DT_F32, m->adam_m, m->adam_v, m->nparams, o->lr, o->beta1,
                   o->beta2, o->eps, o->weight_decay, m->step + 1, NULL));
    if (low) m->low_gen = m->params_gen;
  } else {
    TRY(k_adamw(m->e, p, m->grads, m->adam_m, m->adam_v, m->nparams, o->lr,
                o->beta1, o->beta2, o->eps, o->weight_decay, m->step + 1));
  }
  m->step++;
  return 0;
}

/* ---- initialisation ----------------------------------------------------- */

/* model.md's rules: RMSNorm gains are ones (LayerNorm's weights too, its
 * biases zeros, as torch.nn.LayerNorm's); token_embeddings.weight is
 * trunc_normal(std 1, clip +-3); every linear weight [d_out, d_in] is
 * trunc_normal(std sqrt(2/(d_in+d_out)), clip +-3 std). Tensor i's values
 * are k_init_normal's with key init_key(seed, i) (kernels/init_normal.h),
 * so they depend on the seed and the tensor's place in the table only,
 * not on the engine: drawn where the weights live, with no upload. */
static void init_rule(const tensor_view *v, float *fill, float *std) {
  if (v->ndim == 1) {
    size_t len = strlen(v->name);
    *fill = len >= 5 && strcmp(v->name + len - 5, ".bias") == 0 ? 0.0f : 1.0f;
    *std = 0.0f;
    return;
  }
  *fill = 0.0f;
  *std = strcmp(v->name, "token_embeddings.weight") == 0
             ? 1.0f
             : (float)sqrt(2.0 / ((double)v->shape[0] + v->shape[1]));
}

/* One view's update: its weights, gradient and moments at its offset; on
 * the fused path its 16-bit copy too. The weights' generation was
 * advanced once by model_backward_adamw (params_write) before backward. */
int model_adamw_view(model *m, int v) {
  const adamw_config *o = m->adamw_in_bwd;
  size_t at = m->views[v].offset, n = m->views[v].numel;
  float *p = (float *)m->params + at;
  const float *g = m->grads + (m->gmap ? m->gmap[v] : at);
  /* after the tensor's gradient: on the side stream, or (adamw_serial) on
   * backward's own, in its order */
  engine *u = m->opt.adamw_serial ? m->be : m->side;
  if (u != m->be) TRY(eng_wait_for(u, m->be));
  if (m->opt.fused) {
    int low = m->params_low != (const void *)m->params;
    void *pl = low ? (char *)m->params_low + at * dtype_size(m->lt) : NULL;
    TRY(k_adamw_ex(u, p, pl, m->lt, g, view_grad_type(m, v),
                   m->adam_m + at, m->adam_v + at, n, o->lr, o->beta1,
                   o->beta2, o->eps, o->weight_decay, m->step + 1,
                   m->adamw_step_dev));
  } else {
    TRY(k_adamw(u, p, g, m->adam_m + at, m->adam_v + at, n, o->lr,
                o->beta1, o->beta2, o->eps, o->weight_decay, m->step + 1));
  }
  /* A layer's last view (its first norm's gain, backward's last for the
   * layer), any of the head's two, the embedding: the group's slot is free
   * once this update (the side stream runs them in order) is done; on
   * backward's stream the next group's products come after it anyway. */
  int grp = grad_group(v, m->nviews, m->c.layers);
  if (m->gmap && u != m->be && (grp < 0 || grp == m->c.layers ||
                                (v - 1) % PER_LAYER_TENSORS == P_LN1)) {
    int s = grad_slot(grp, m->c.layers);
    eng_event_free(m->side, m->slot_ev[s]);
    TRY(eng_event_record(m->side, &m->slot_ev[s]));
  }
  return 0;
}

int model_adamw_join(model *m) {
  if (!m->side) return 0;
  TRY(eng_wait_for(m->be, m->side));
  for (int s = 0; s < 2; s++) {
    eng_event_free(m->side, m->slot_ev[s]);
    m->slot_ev[s] = NULL;
  }
  return 0;
}

int model_backward_adamw(model *m, const adamw_config *o) {
  TRY(not_bound(m, "model_backward_adamw"));
  if (m->grad_hook)
    FAIL(ERR_FAIL, "model_backward_adamw with a grad hook: data parallelism "
         "averages the gradients first (allowed: model_backward, then the "
         "optimizer)");
  if (m->loss_scale != 1.0f)
    FAIL(ERR_FAIL, "model_backward_adamw with fp16's loss scaling: a step "
         "is skipped when any gradient is not finite, known only after "
         "backward (allowed: fp32, tf32, 3xtf32, bf16)");
  if (m->gbase || m->params_placed)
    FAIL(ERR_FAIL, "model_backward_adamw with placed weights or gradients "
         "(allowed: the model's own buffers)");
  /* slots hold other layers' gradients: every product writes, not adds */
  if (m->gmap) m->grads_deferred_zero = 1;
  TRY(model_params_low_current(m));   /* backward reads the current copy */
  TRY(adamw_state(m));
  if (!m->side && !m->opt.adamw_serial)
    TRY(eng_side_view(m->e, m->opt.adamw_blocks, &m->side));
  /* Views a forward does not reach (none in this model) keep a zero
   * gradient and are still updated, as by model_adamw_step. */
  int low = m->opt.fused && m->params_low != (const void *)m->params;
  params_write(m);                    /* the weights change from here on */
  if (low) m->low_gen = m->params_gen;   /* ...and each view's copy with them */
  /* A graphed backward's updates read this step's size from step_dev;
   * a recording for other hyperparameters is dropped. */
  m->adamw_step_dev = NULL;
  if (adamw_graphable(&m->opt) && m->opt.graphs && !eng_profiling(m->e)) {
    if (!m->step_dev)
      TRY(eng_alloc(m->e, sizeof(float), "adam_step", (void **)&m->step_dev));
    if (memcmp(&m->gbwa_o, o, sizeof *o) != 0) {
      eng_graph_destroy(m->e, m->gbwa.g);
      m->gbwa.g = NULL;
      m->gbwa.seen = 0;
      m->gbwa_o = *o;
    }
    float step = k_adamw_step_size(o->lr, o->beta1, o->beta2, m->step + 1);
    TRY(eng_upload(m->e, m->step_dev, &step, sizeof step));
    m->adamw_step_dev = m->step_dev;
  }
  m->adamw_in_bwd = o;
  int rc = model_backward_on(m, m->bview ? m->bview : m->e);
  m->adamw_in_bwd = NULL;
  m->adamw_step_dev = NULL;
  /* backward's work ended joining the side stream (model_adamw_join), so
   * the next pass reads the weights it wrote; a backward that failed
   * midway is joined here */
  if (rc < 0) {
    if (m->side) (void)eng_wait_for(m->e, m->side);
    return rc;
  }
  m->step++;
  return 0;
}

/* k_init_normal's table in engine memory ("init"); *table NULL on
 * failure. The caller frees it after an eng_sync. */
static int init_table(engine *e, void **table) {
  const size_t bytes = (INIT_TABLE + 1) * sizeof(int32_t);
  *table = NULL;
  int rc = eng_alloc(e, bytes, "init", table);
  if (rc == 0) rc = eng_upload(e, *table, k_init_normal_table(), bytes);
  if (rc < 0 && *table) {
    eng_free(e, *table);
    *table = NULL;
  }
  return rc;
}

int model_init(model *m, uint64_t seed) {
  void *table;
  int rc = init_table(m->e, &table);
  float *p = params_write(m);   /* the 16-bit copy is cast again when read */
  for (int i = 0; i < m->nviews && rc == 0; i++) {
    float fill, std;
    init_rule(&m->views[i], &fill, &std);
    if (m->pack && m->views[i].ndim != 1) continue;   /* bound: not ours */
    rc = k_init_normal(m->e, p + (m->pack ? m->pack[i] : m->views[i].offset),
                       m->views[i].numel, init_key(seed, (uint64_t)i), fill,
                       std, table);
  }
  if (rc == 0) rc = eng_sync(m->e);   /* before the table goes */
  if (table) eng_free(m->e, table);
  TRY(rc);
  TRY(zero_grads(m));
  if (m->adam_m) {
    TRY(eng_memset0(m->e, m->adam_m, m->nparams * sizeof(float)));
    TRY(eng_memset0(m->e, m->adam_v, m->nparams * sizeof(float)));
  }
  m->step = 0;
  m->fwd_loss = 0;
  m->loss_scale = m->compute == DT_F16 ? 65536.0f : 1.0f;
  m->scale_good_steps = 0;
  m->skipped_steps = 0;
  return 0;
}

/* ---- bound weights ------------------------------------------------------ */

void model_view_place(const model *m, int v, int *group, size_t *offset) {
  *group = m->views[v].ndim == 1 ? MODEL_NORMS
                                 : grad_group(v, m->nviews, m->c.layers);
  if (m->pack) {
    *offset = m->pack[v];
    return;
  }
  /* the same packing as create's, for a model without bound weights */
  size_t at = 0;
  for (int u = 0; u < v; u++) {
    int g = m->views[u].ndim == 1 ? MODEL_NORMS
                                  : grad_group(u, m->nviews, m->c.layers);
    if (g == *group) at += m->views[u].numel;
  }
  *offset = at;
}

size_t model_group_numel(const model *m, int g) {
  size_t n = 0;
  for (int v = 0; v < m->nviews; v++) {
    int one = m->views[v].ndim == 1;
    if (g == MODEL_NORMS ? one
                         : !one && grad_group(v, m->nviews, m->c.layers) == g)
      n += m->views[v].numel;
  }
  return n;
}

size_t model_group_chunk(const model *m, int g) {
  size_t W = m->opt.bound_weights > 0 ? (size_t)m->opt.bound_weights : 1;
  size_t k = (model_group_numel(m, g) + W - 1) / W;
  return (k + 1) / 2 * 2;
}

const model_options *model_get_options(const model *m) { return &m->opt; }

void model_set_weight_hook(model *m, model_weight_hook fn, void *arg) {
  m->weight_hook = fn;
  m->weight_hook_arg = arg;
}

int model_bind_group(model *m, int g, const void *w) {
  const int L = m->c.layers;
  if (!m->opt.bound_weights || g < -1 || g > L || !w)
    FAIL(ERR_FAIL, "model_bind_group: group %d (allowed: -1 .. %d, a "
         "buffer, on a model with bound weights)", g, L);
  const size_t es = dtype_size(m->lt);
  const char *b = w;
  if (g < 0) {
    m->p.emb = (float *)w;
  } else if (g == L) {
    m->lo_lm = w;
  } else {
    /* the layer's matrices in table order: q k v o w1 w2 w3 */
    const size_t D = (size_t)m->c.d_model, F = (size_t)m->c.d_ff;
    layer_low *q = &m->lo[g];
    q->wqkv = b;
    q->wo = b + 3 * D * D * es;
    q->w1 = b + 4 * D * D * es;
    q->w2 = b + (4 * D * D + F * D) * es;
    q->w3 = b + (4 * D * D + 2 * F * D) * es;
  }
  m->bound[g + 1] = 1;
  return 0;
}

int model_weights(model *m, int g, int need) {
  if (!m->opt.bound_weights) return 0;
  if (!m->weight_hook)
    FAIL(ERR_FAIL, "a pass over bound weights with no weight hook "
         "(model_set_weight_hook) to bind them");
  if (!need) m->bound[g + 1] = 0;
  int rc = m->weight_hook(g, need, m->weight_hook_arg);
  if (rc < 0) return rc;
  if (need && !m->bound[g + 1])
    FAIL(ERR_FAIL, "the weight hook returned without binding group %d "
         "(model_bind_group)", g);
  return 0;
}

int model_weight_uses(const model *m, int *seq) {
  const int L = m->c.layers, G = m->f.group;
  int n = 0;
  for (int g = -1; g <= L; g++) seq[n++] = g;      /* forward */
  seq[n++] = L;                                    /* backward: the head */
  for (int i = L - 1; i >= 0; i--) {
    /* a rerun needs its group's layers in order (ckpt_rerun_at) */
    if (ckpt_rerun_at(G, L, i)) {
      for (int j = G * (i / G); j <= i; j++) seq[n++] = j;
    } else if (ckpt_in_last_group(G, L, i)) {
      seq[n++] = i;
    }
  }
  return n;
}

int model_hold_slot(model *m, int g, eng_event *ev) {
  if (!m->gmap) {
    eng_event_free(m->e, ev);
    FAIL(ERR_FAIL, "model_hold_slot: the model has no gradient slots");
  }
  int s = grad_slot(g, m->c.layers);
  eng_event_free(m->e, m->slot_ev[s]);
  m->slot_ev[s] = ev;
  return 0;
}

int model_group_slot(const model *m, int g) {
  return grad_slot(g, m->c.layers);
}

const float *model_group_grad(const model *m, int g) {
  if (!m->pack) return NULL;
  return m->grads + m->slot_at[grad_slot(g, m->c.layers)];
}

float *model_norm_grads(model *m) {
  return m->pack ? m->grads + (m->ngrads - m->nnorm) : NULL;
}

int model_init_range(model *m, int v, uint64_t seed, size_t lo, size_t n,
                     float *x) {
  if (v < 0 || v >= m->nviews || lo > m->views[v].numel ||
      n > m->views[v].numel - lo)
    FAIL(ERR_FAIL, "model_init_range: view %d elements %zu..%zu", v, lo,
         lo + n);
  if (n == 0) return 0;
  void *table;
  int rc = init_table(m->e, &table);
  float fill, std;
  init_rule(&m->views[v], &fill, &std);
  /* element j of the view takes the counter key + (j + 1) G
   * (kernels/init_normal.h): element lo + j' of it is element j' of the
   * key advanced by lo G */
  if (rc == 0)
    rc = k_init_normal(m->e, x, n,
                       init_key(seed, (uint64_t)v) +
                           (uint64_t)lo * INIT_STEP,
                       fill, std, table);
  if (rc == 0) rc = eng_sync(m->e);
  if (table) eng_free(m->e, table);
  return rc;
}
