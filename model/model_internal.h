/* What the files of model/ share and nobody else sees: the model's struct, the
 * pointers into its flat buffers, and the activation table. */
#ifndef TL_MODEL_INTERNAL_H
#define TL_MODEL_INTERNAL_H

#include "model/model.h"

/* Tensors of one layer in the parameter table (config.c's order) with
 * RMSNorm; LayerNorm adds the two norms' biases (P_LN1_B, P_LN2_B), each
 * after its weight in the table, so their places move: model_layer_view
 * says where each one is. The fused path (RMSNorm only) and its gradient
 * slots index the RMSNorm table directly. */
enum {
  P_LN1, P_WQ, P_WK, P_WV, P_WO, P_LN2, P_W1, P_W2, P_W3,
  PER_LAYER_TENSORS,
  P_LN1_B = PER_LAYER_TENSORS, P_LN2_B
};

/* Tensors per layer: PER_LAYER_TENSORS, 2 more with LayerNorm. */
int model_layer_tensors(const model_config *c);
/* Entries of the parameter table: 1 + model_layer_tensors * layers + 2,
 * one more with LayerNorm (ln_final.bias). */
int model_nparam_tensors(const model_config *c);
/* The table index of layer i's tensor t (a P_* above; P_LN1_B and P_LN2_B
 * with LayerNorm only), i in 0..layers-1. */
int model_layer_view(const model_config *c, int i, int t);
/* The table index of ln_final.weight (which 0), ln_final.bias (1,
 * LayerNorm only; -1 with RMSNorm) and lm_head.weight (2). */
int model_head_view(const model_config *c, int which);

/* Pointers of one layer into a flat buffer laid out by model_layout
 * (parameters or their gradients, same offsets). */
typedef struct layer_ptrs {
  float *ln1, *wq, *wk, *wv, *wo, *ln2, *w1, *w2, *w3;
  float *ln1_b, *ln2_b;   /* LayerNorm's biases [D]; NULL with RMSNorm */
} layer_ptrs;

/* What one layer's products read (the fused path): the lt copy of its
 * weight matrices (the weights themselves when lt is f32), q, k and v
 * side by side as one [3D, D] matrix. Pointers, not offsets into
 * params_low: bound weights (model_options.bound_weights) live wherever
 * the caller gathered them. */
typedef struct layer_low {
  const void *wqkv, *wo, *w1, *w2, *w3;
} layer_low;

typedef struct param_ptrs {
  float *emb;         /* [V, D] */
  layer_ptrs *layer;  /* [layers] */
  float *lnf;         /* [D] */
  float *lnf_b;       /* [D] LayerNorm's bias; NULL with RMSNorm */
  float *lm;          /* [V, D] */
} param_ptrs;

/* Activations one layer saves for backward (views into "activations").
 * N = B*T rows; [B*H*T, Dh] is [B, H, T, Dh] with the heads split. */
typedef struct layer_acts {
  float *ln1_out;     /* [N, D]   RMSNorm_ln1(x), input of q/k/v_proj */
  float *ln1_rstd;    /* [N] */
  float *ln1_mean;    /* [N]      LayerNorm only (else NULL), as ln2_mean */
  float *q, *k;       /* [B*H*T, Dh] after RoPE */
  float *v;           /* [B*H*T, Dh] */
  float *scores;      /* [B*H*T, T] softmax probabilities P (causal) */
  float *o;           /* [N, D]   heads merged, input of output_proj;
                       *          forward also uses it for the q, k, v
                       *          projections before their heads are split */
  float *resid;       /* [N, D]   x + attn(ln1(x)), input of ln2 */
  float *ln2_out;     /* [N, D] */
  float *ln2_rstd;    /* [N] */
  float *ln2_mean;    /* [N] */
  float *a, *b;       /* [N, F]   w1 x, w3 x */
  float *h;           /* [N, F]   silu(a) * b, input of w2 */
  float *out;         /* [N, D]   the layer's output (next layer's input) */
} layer_acts;

typedef struct model_acts {
  float *embed_out;   /* [N, D] token embeddings: layer 0's input */
  layer_acts *layer;  /* [layers] */
  float *lnf_out;     /* [N, D] */
  float *lnf_rstd;    /* [N] */
  float *lnf_mean;    /* [N] LayerNorm only, else NULL */
  float *logits;      /* [N, V]; backward overwrites it with dlogits */
  float *losses;      /* [N] per-position cross-entropy */
  float *lse;         /* [N] logsumexp of each row of logits */
  /* Scratch shared by every layer, forward and backward: */
  float *g_resid;     /* [N, D] d loss / d residual stream */
  float *g_norm;      /* [N, D] d loss / d a norm's output */
  float *g_tmp;       /* [N, D] forward: a sublayer's output before the
                       *        residual add; backward: a norm's dx, the
                       *        merged-heads gradient */
  float *g_heads;     /* [B*H*T, Dh] forward: P V before the heads merge;
                       *             backward: its gradient */
  float *g_q, *g_k, *g_v;  /* [B*H*T, Dh] */
  float *g_scores;    /* [B*H*T, T] dP, then dS in place */
  float *g_a, *g_b, *g_h;  /* [N, F] */
} model_acts;

/* The fused path's activations (forward_fused.c, backward_fused.c). Typed
 * `void *` tensors hold the products' input dtype lt (f32, bf16 or f16);
 * the residual stream, norms' statistics, logits and the gradients that
 * feed norms stay fp32. What backward can recompute cheaply from saved
 * tensors (the norms' outputs, merged heads, the SwiGLU product) is not
 * kept: it is recomputed into scratch. */
typedef struct fused_layer {
  float *x;            /* [N, D] the layer's input (layer 0: the embeddings) */
  float *rstd1, *rstd2;/* [N] */
  void *n1, *n2;       /* [N, D] lt: ln1(x), ln2(resid), the products' input;
                          kept when lt is 16-bit, else NULL (recomputed) */
  void *q, *k, *v;     /* [B*H*T, Dh] q, k after RoPE */
  void *o;             /* [B*H*T, Dh] attention output, heads split */
  float *lse;          /* [B*H*T] the attention's logsumexp */
  void *P;             /* [B*H*T, T] materialised attention only, else NULL */
  float *resid;        /* [N, D] x + attention: input of ln2; NULL with
                          gradient slots (fused_acts.resid, rebuilt) */
  void *a, *b;         /* [N, F] x W1^T, x W3^T */
} fused_layer;

typedef struct fused_acts {
  fused_layer *layer;
  int group;           /* layers a checkpoint group (model_options.
                          ckpt_layers); the model's layers without
                          checkpointing. Layer i's tensors are layer
                          i % group's, but for a group's first layer's
                          input x, its own (and with ckpt_keep_attn
                          every layer's o and lse) */
  float *embed;        /* [N, D] */
  float *xl;           /* [N, D] the last layer's output, input of ln_final */
  void *lnf;           /* [N, D] ln_final output */
  float *lnf_rstd;     /* [N] */
  float *logits;       /* [N, V] fp32 */
  float *losses, *lse; /* [N] */
  void *dlogits;       /* [N, V] lt; the logits buffer itself when lt = f32,
                          else h's when it fits */
  /* Scratch shared by all layers. Backward's gradients reuse what is dead
   * by the time they are written (each name below the buffer it shares):
   * dlogits is h where it fits (16-bit, vocab <= d_ff: dead once the
   * head's products have read it), dh is h (the SwiGLU backward writes h
   * over dh in place), dO is om (Wo's gradient has read om), dq is dom
   * (split into dO), dk is tmp and, with gradient slots, dv is resid
   * (both read for the last time before attention's backward), dqkv is
   * qkv (forward's only); the SwiGLU backward writes da and db over the
   * layer's saved a and b (backward_fused.c). */
  void *qkv;           /* [N, 3D] lt: x W_qkv^T, as autocast rounds it */
  float *tmp;          /* [N, D] a sublayer's output before its residual */
  float *resid;        /* [N, D] with gradient slots: the current layer's
                          x + attention (forward), rebuilt in backward by
                          forward's kernels; else NULL */
  void *norm;          /* [N, D] lt = f32: ln1 / ln2 output (recomputed in
                          backward); else NULL */
  void *om;            /* [N, D] attention output, heads merged */
  void *h;             /* [N, F] SwiGLU output (recomputed in backward) */
  float *dres;         /* [N, D] d loss / d residual stream */
  void *dres_low;      /* [N, D] the same in lt (dres itself when f32) */
  void *dn;            /* [N, D] lt: d loss / d a norm's output */
  void *dh;            /* [N, F] = h */
  void *dom;           /* [N, D] d loss / d merged attention output */
  void *dO, *dq, *dk, *dv;  /* [B*H*T, Dh]; dO = om, dq = dom, dk = tmp,
                               dv = resid (slots) */
  void *dqkv;          /* [N, 3D] = qkv */
} fused_acts;

/* Checkpointing with groups of G of the L layers: backward reaches layer
 * i (from the last) and reruns its group first when i is a group's last
 * layer, in any group but the last (whose tensors forward left);
 * backward_fused.c does it, model_weight_uses lists it. */
static inline int ckpt_rerun_at(int G, int L, int i) {
  return i / G < (L - 1) / G && i % G == G - 1;
}
static inline int ckpt_in_last_group(int G, int L, int i) {
  return !(i / G < (L - 1) / G);
}

/* forward_fused.c, for the shape m->fwd_b x m->fwd_t. */
int model_forward_fused(model *m);
/* Layer i's forward on engine e (forward's, or backward's to rebuild a
 * checkpoint group's tensors: rerun): its input x from the previous
 * layer's residual and output, or, from_x, the input already in layer
 * i's x. */
int model_fused_layer_fwd(model *m, engine *e, int i, int from_x, int rerun);
/* Rows r0 .. r0 + n - 1 of the logits (lnf W_lm^T) into f.logits' first
 * n rows, on engine e (model_options.head_chunk: forward's chunks, and
 * backward's again, the same product of the same rows). */
int model_head_chunk(model *m, engine *e, int r0, int n);
int model_backward_fused(model *m);

/* One recorded piece of a step (model_options.graphs) and the key it was
 * recorded for (model.h, model_graph_replays). */
typedef struct graph_slot {
  eng_graph *g;        /* NULL until recorded */
  int key[3];
  float scale;
  int seen;            /* the key ran once unrecorded since it was set */
} graph_slot;

/* backward.c: backward is done with view v (its gradient final, the
 * parameter read no more): model_backward_adamw's update of it, then the
 * grad hook. Both paths' backwards call it for every view. */
int model_grad_ready(model *m, int view);

/* Gradient slots: the groups of views whose gradients backward finishes
 * together, in its order: the head (final norm and lm_head) as group
 * `layers`, layer i as i, the embedding as -1. Group g lives in slot
 * g & 1 (the embedding in slot 1), so each group writes where the group two
 * before it was. */
static inline int grad_group(int v, int nviews, int layers) {
  if (v == 0) return -1;
  if (v >= nviews - 2) return layers;
  return (v - 1) / PER_LAYER_TENSORS;
}
/* The gradient slot of group g (model_options.grad_slots): backward's
 * groups (the head, layers L - 1 .. 0, the embedding) alternate between
 * the two, the head and the embedding both in slot 0, so that slot 1
 * holds layers only and is sized for a layer: with a large vocabulary the
 * head and the embedding are several layers' size (the 8B model's fp32
 * embedding 3x a layer). Where L is even, layer 0 is in slot 0 too and
 * the embedding waits for its update (slot_ev), once a step. */
static inline int grad_slot(int group, int layers) {
  return group < 0 ? 0 : (layers - group) & 1;
}
/* model.c, bound weights: group g (-1 the embedding, i a layer, layers
 * the head) is about to be read (need 1: the hook binds it, checked) or
 * its last read is queued (need 0). Nothing without bound weights. */
int model_weights(model *m, int g, int need);

/* Backward with its AdamW updates can be a CUDA graph: on the fused path
 * (k_adamw_ex, which reads its step size from engine memory), not inside
 * the products (k_matmul_adamw takes its step size by value), on the
 * whole device (no SM split: products shaped on a view, updates' capped
 * kernels). The side stream's updates are captured with backward: it
 * forks from backward's stream at the first update and joins it at the
 * end of backward's work (model_adamw_join). */
static inline int adamw_graphable(const model_options *o) {
  return o->fused && !o->adamw_in_products && !o->adamw_blocks &&
         !o->sm_reserve;
}

/* model.c: backward's stream waits for the updates queued beside it (the
 * side stream's last), which orders every slot's reuse too, so the slots'
 * pending events are dropped. Nothing without a side stream. */
int model_adamw_join(model *m);

/* model.c: AdamW on view v alone (model_backward_adamw's per-tensor step). */
int model_adamw_view(model *m, int v);

/* model.c: work(m) directly, or through slot s's recording for this key. */
int model_run_graphed(model *m, graph_slot *s, const int key[3], float scale,
                      int (*work)(model *m));

/* call inside a named range (eng_range_push), closed whatever it returns. */
#define IN_RANGE(e, name, call)                                              \
  do {                                                                       \
    TRY(eng_range_push((e), (name)));                                        \
    int rc_ = (call);                                                        \
    TRY(eng_range_pop(e));                                                   \
    TRY(rc_);                                                                \
  } while (0)

struct model {
  engine *e;
  engine *be;   /* backward's calls: e or a view of it, set by every
                   model_backward_on before any call */
  /* model_backward_adamw's update, set for that call only: each view's
   * AdamW runs as its gradient is final (grad_ready). NULL otherwise. */
  const adamw_config *adamw_in_bwd;
  /* Where those updates run: a view of e on a low-priority stream of its
   * own (eng_side_view), made at the first such backward, ordered after
   * each tensor's last backward kernel and joined before backward
   * returns. */
  engine *side;
  /* model_options.sm_reserve > 0: the view of e (products shaped for
   * fewer SMs) that model_backward_adamw's backward runs on, made with
   * side; NULL otherwise. */
  engine *bview;
  /* model_options.grad_slots: grads holds ngrads elements (nparams
   * without slots): two slots, slot s at slot_at[s], each as large as the
   * largest group of views backward finishes together (grad_group: the
   * head's, a layer's, the embedding's) that it holds; gmap[v] is view
   * v's offset in grads, group g's views in slot grad_slot(g, layers).
   * slot_ev[s]: slot s's last group update queued on the side stream,
   * waited for before the next group in slot s writes its gradients
   * (NULL: nothing pending). */
  size_t ngrads;
  size_t *gmap;
  dtype wgt;   /* the weight matrices' gradients: lt with grad_lt, else
                * fp32 (view_grad_type) */
  size_t slot_at[2];
  eng_event *slot_ev[2];
  model_config c;
  int B, T;           /* the largest batch and sequence forward accepts */
  dtype compute;

  tensor_view *views; /* parameter table (model_layout) */
  int nviews;
  size_t nparams;
  /* The fp32 weights, read only through this field: every write goes
   * through params_write (model.c), which advances params_gen first, so
   * whatever is derived from the weights can tell that it is behind. */
  const float *params;
  float *grads, *adam_m, *adam_v;  /* one allocation each; the AdamW
                                      moments from the first
                                      model_adamw_step on */
  param_ptrs p, g;    /* per-tensor pointers into params and grads */
  layer_low *lo;      /* [layers] what the products read (fused path) */
  const void *lo_lm;  /* lm_head's, likewise */
  /* model_options.bound_weights: the weight matrices are not the
   * model's. params holds the 1-D views only (the norms' gains, packed in
   * table order: nnorm elements), params_low is NULL, and each group
   * (model_group) is bound by the weight hook before it is read:
   * bound[g + 1] is set by model_bind_group and cleared when the model
   * says it is done with the group. pack[v]: view v's offset in its
   * group's packed run (2-D views) or in params (1-D). */
  model_weight_hook weight_hook;
  void *weight_hook_arg;
  char *bound;        /* [layers + 2] */
  size_t *pack;       /* [nviews] */
  size_t nnorm;
  /* model_place_grads: view v's gradient at gbase + goff[v] (grads is then
   * NULL); goff NULL: in grads at the view's offset. */
  float *gbase;
  size_t *goff;
  /* zero_grads' memsets when placed: the views' ranges merged where they
   * touch (data parallelism places a bucket's views end to end), pairs of
   * (offset, count) from gbase. One memset per view was ~450 launches and
   * cost the xl step about 1.5 ms on an H200. */
  size_t *zrun;
  int nzrun;
  int params_placed;  /* model_place_params: params is the caller's */

  tensor_view *act_views;  /* activation table over `acts` */
  int nact_views;
  size_t nacts;            /* elements of `acts` */
  float *acts;
  model_acts a;             /* op-by-op path */
  model_options opt;
  dtype lt;                 /* fused path: activations' dtype (= compute) */
  fused_acts f;             /* fused path */
  /* Fused, 16-bit: the weights in lt, what the products read; else
   * params itself. Written only by model_params_low_current,
   * model_set_params and the fused AdamW, each with the weights it
   * rounds. Invariant: params_low is the weights of generation low_gen
   * rounded to lt, so it is current when low_gen == params_gen, unless
   * params_shared (writes outside the model advance no generation). */
  void *params_low;
  uint64_t params_gen;     /* advanced by every write of the weights */
  uint64_t low_gen;        /* the generation params_low was made from */
  /* A writable pointer to the weights is held outside the model
   * (model_params_writable, model_place_params): writes the model cannot
   * see may happen at any time, so the copy is rebuilt before every pass. */
  int params_shared;

  int32_t *ids, *targets;  /* engine memory, [B*T] each ("inputs") */
  float *host_losses;      /* host, [B*T] */

  long long step;          /* AdamW steps taken */
  /* Fused path: model_zero_grad only sets this; the next backward then
   * writes every gradient instead of adding to it (products with beta 0,
   * the few accumulated views cleared first), which saves a pass over the
   * whole gradient buffer per step. Anything that reads the gradients
   * first calls model_grads_materialize. */
  int grads_deferred_zero;
  model_grad_hook grad_hook;  /* model_set_grad_hook */
  float loss_scale;        /* fp16: dynamic loss scale; else 1 */
  int scale_good_steps;    /* steps since the scale last changed */
  long long skipped_steps; /* fp16 steps skipped for non-finite gradients */
  void *grad_hook_arg;
  int fwd_b, fwd_t;        /* shape of the last forward */
  int fwd_targets;         /* it was given targets (computes the loss) */
  int fwd_loss;            /* it had targets and backward has not run */
  graph_slot gfwd, gbwd;   /* model_options.graphs: the two recordings */
  /* ...and backward with its updates (model_backward_adamw, where
   * adamw_graphable), recorded for one adamw_config, gbwa_o; the step
   * size its updates read, step_dev (one float, written before each
   * such backward: the recording holds the pointer, not the value) */
  graph_slot gbwa;
  adamw_config gbwa_o;
  float *step_dev;
  /* set for one model_backward_adamw: step_dev where it is graphed, else
   * NULL (each update then takes its step size from t) */
  const float *adamw_step_dev;
  long long graph_replays;
};

/* With model_options.adamw_in_products: view v is a weight matrix that the
 * product making its gradient updates (every 2-D view but the embedding's),
 * so its gradient is never stored. */
static inline int view_in_product(const model *m, int v) {
  return m->opt.adamw_in_products && v > 0 && m->views[v].ndim == 2;
}

/* The dtype view v's gradient is stored as (model_options.grad_lt):
 * m->wgt for a weight matrix a product writes whole (the head's only
 * without head_chunk, whose chunks add into it), fp32 for the rest. */
static inline dtype view_grad_type(const model *m, int v) {
  if (m->wgt == DT_F32 || v == 0 || m->views[v].ndim != 2) return DT_F32;
  return v == m->nviews - 1 && m->opt.head_chunk ? DT_F32 : m->wgt;
}

/* model.c: if zeroing was deferred, zero the buffer now. */
int model_grads_materialize(model *m);

/* model.c: params_low made current (a cast from the fp32 weights if they
 * may have changed since it was made; nothing if it is current or there is
 * no separate copy). model_forward and model_backward call it on the host
 * side, before the pass and outside any graph recording: whether a cast is
 * needed is decided per call, so it must never be baked into a recording. */
int model_params_low_current(model *m);

#endif
