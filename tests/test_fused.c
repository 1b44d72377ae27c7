/* The fused path against the op-by-op path, on the CPU engine (and on the
 * CUDA engine too when a GPU is present: test_model_cuda compares the
 * engines). Same weights, same batch: loss, logits, every parameter
 * gradient, the weights after two AdamW steps, for attention materialised
 * and flash, with random norm gains so a gain used wrongly shows.
 *
 * On the CPU both paths compute in fp32 with the same kernels underneath,
 * in a different order (q, k, v as one product; the residual added inside
 * the norm), so they agree to rounding: 1e-5 of each tensor's scale; the
 * fused path in bf16 (16-bit storage on the CPU engine) within 1e-2. The
 * gradient hook must announce every tensor once in both paths. Also here:
 * weights written after the fused path has run (a checkpoint loaded into a
 * model that has trained, and every other way of writing them) are what it
 * computes with; the loss-scale unscaling pass and the per-family profiler
 * (eng_profile), which the fused path's timings rely on. Activation
 * checkpoints (groups of 1, 2, 3, 5, 7 of 5 layers; groups of 2 in bf16
 * too) against none: losses,
 * gradients and weights bit for bit over three steps, also keeping each
 * layer's attention output through the reruns (flash; materialised is
 * refused). The head in chunks (head_chunk) against the whole head: losses
 * to 1e-6, gradients and weights to 1e-5 of the largest, AdamW after and
 * in backward. */
#include "config.h"
#include "tests/testlib.h"
#include "tests/model_helpers.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "model/rng.h"
#include "model/safetensors.h"

#include "common/check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* bf16 against fp32, of each tensor's scale: a few of bf16's roundings
 * (2^-9 each) through the tiny model's layers (measured: 5e-3 for the
 * logits, 1.3e-3 for the weights after two steps). */
#define BF16_TOL 1e-2

typedef struct run_out {
  float loss[2];
  float *logits, *grads, *params_after;
  int hook_calls;
  size_t act_bytes;
} run_out;

static int count_hook(int view, void *arg) {
  (void)view;
  (*(int *)arg)++;
  return 0;
}

/* Two steps (forward, backward, AdamW) from weights w; logits and grads of
 * the first step. */
static void run(engine *e, const model_config *c, const float *w, size_t np,
                const int32_t *ids, const int32_t *tg, int B, int T,
                const model_options *o, run_out *r) {
  model *m;
  hard(model_create_ex(&m, e, c, B, T, o), "model_create_ex");
  size_t in_use;
  hard(eng_tag_bytes(e, "activations", &in_use, NULL) < 0, "activations tag");
  r->act_bytes = in_use;
  hard(model_set_params(m, 0, w, np), "model_set_params");
  r->hook_calls = 0;
  model_set_grad_hook(m, count_hook, &r->hook_calls);
  adamw_config a = adamw_defaults();
  /* Garbage in the gradient buffer: zero_grad must make it irrelevant (the
   * fused path defers the zeroing to backward's first writes). */
  float *junk = malloc(np * sizeof *junk);
  hard(junk ? 0 : ERR_OOM, "junk");
  for (size_t i = 0; i < np; i++) junk[i] = frand(5.0f);
  hard(eng_upload(e, model_grads(m), junk, np * sizeof *junk), "upload junk");
  free(junk);
  for (int s = 0; s < 2; s++) {
    hard(model_zero_grad(m), "zero_grad");
    hard(model_forward(m, ids, tg, B, T, &r->loss[s]), "forward");
    if (s == 0)
      r->logits = host_floats(e, model_logits(m), (size_t)B * T * c->vocab);
    hard(model_backward(m), "backward");
    if (s == 0) r->grads = host_floats(e, model_grads(m), np);
    hard(model_adamw_step(m, &a), "adamw");
  }
  r->params_after = host_floats(e, model_params(m), np);
  model_destroy(m);
}

/* ---- weights written after the fused path has run ------------------------- */

/* Fresh random ids and targets in [0, vocab). */
static void batch(int32_t *ids, int32_t *tg, int n, int vocab) {
  for (int i = 0; i < n; i++) {
    ids[i] = (int32_t)(next_u64() % (uint64_t)vocab);
    tg[i] = (int32_t)(next_u64() % (uint64_t)vocab);
  }
}

/* One training step on a fresh batch. */
static void train_step(model *m, int B, int T) {
  int V = model_get_config(m)->vocab;
  int32_t ids[B * T], tg[B * T];
  batch(ids, tg, B * T, V);
  adamw_config a = adamw_defaults();
  float loss;
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, ids, tg, B, T, &loss), "forward");
  hard(model_backward(m), "backward");
  hard(model_adamw_step(m, &a), "adamw");
}

/* ---- the optimizer in backward --------------------------------------------- */

/* Three training steps on fresh batches, from weights w, each with AdamW
 * after backward (model_adamw_step) or in it (model_backward_adamw): the
 * losses and the weights after every step must be the same bit for bit
 * (the same per-element arithmetic in another order of tensors). */
static void test_adamw_in_backward(engine *e, const model_config *c,
                                   const float *w, size_t np, int B, int T,
                                   const model_options *o, const char *what) {
  model *m[2];
  /* the second model: with gradient slots where the path has them */
  model_options os = *o;
  os.grad_slots = o->fused;
  size_t gb[2];
  for (int k = 0; k < 2; k++) {
    hard(model_create_ex(&m[k], e, c, B, T, k ? &os : o), "model_create_ex");
    hard(model_set_params(m[k], 0, w, np), "model_set_params");
    size_t in_use;
    hard(eng_tag_bytes(e, "grads", &in_use, NULL) < 0, "grads tag");
    gb[k] = in_use - (k ? gb[0] : 0);
  }
  if (os.grad_slots) {
    /* two slots, each the largest group backward finishes together that
     * it holds: slot 0 the head (final norm and lm_head), the embedding
     * and, with two layers or more, every other layer from L - 2 down;
     * slot 1 the other layers */
    int nv;
    const tensor_view *v = model_views(m[1], &nv);
    size_t layer = (v[nv - 2].offset - v[1].offset) / (size_t)c->layers;
    size_t head = v[nv - 2].numel + v[nv - 1].numel;
    size_t s0 = head > v[0].numel ? head : v[0].numel;
    if (c->layers >= 2 && layer > s0) s0 = layer;
    check(gb[1] == (s0 + layer) * sizeof(float) && model_grads(m[1]) == NULL,
          "%s: gradient slots hold %zu of the %zu gradient bytes (%zu floats "
          "for the head %zu, the embedding %zu and even layers, %zu for odd "
          "layers)", what, gb[1], gb[0], s0, head, v[0].numel, layer);
    /* ...and the residual after attention is rebuilt, not saved */
    int kept[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
      int na;
      const tensor_view *acts = model_activations(m[k], &na);
      for (int j = 0; j < na; j++)
        kept[k] += strstr(acts[j].name, "attn.residual") != NULL;
    }
    check(kept[0] == c->layers && kept[1] == 0,
          "%s: residuals after attention saved without slots (%d of %d), "
          "rebuilt with them (%d saved)", what, kept[0], c->layers, kept[1]);
  }
  adamw_config a = adamw_defaults();
  int same = adamw_forms_agree(m[0], m[1], B, T, 3);
  check(same, "%s: AdamW in backward%s gives the weights and "
        "losses of AdamW after it, bit for bit, over 3 steps", what,
        os.grad_slots ? " (gradient slots)" : "");
  if (os.grad_slots) {
    /* keep_norms: forward saves the residuals after attention and (16-bit
     * products) the norms' outputs, as without slots; backward rebuilds
     * none, and the weights are those of the rebuilding form */
    model_options ok = os, oa = *o;   /* without slots: kept anyway */
    ok.keep_norms = oa.keep_norms = 1;
    model *mk[2];
    int saved[2] = {0, 0}, want = c->layers * (o->compute != DT_F32 ? 3 : 1);
    for (int k = 0; k < 2; k++) {
      hard(model_create_ex(&mk[k], e, c, B, T, k ? &ok : &oa), "model_create_ex");
      hard(model_set_params(mk[k], 0, w, np), "model_set_params");
      int na;
      const tensor_view *acts = model_activations(mk[k], &na);
      for (int j = 0; j < na; j++)
        saved[k] += strstr(acts[j].name, "attn.residual") != NULL ||
                    strstr(acts[j].name, "ln1.out") != NULL ||
                    strstr(acts[j].name, "ln2.out") != NULL;
    }
    check(saved[1] == want && saved[0] == want,
          "%s: with keep_norms the slots' form saves the residuals and "
          "16-bit norm outputs (%d of %d; AdamW after backward, where "
          "keep_norms changes nothing, %d)", what,
          saved[1], want, saved[0]);
    check(adamw_forms_agree(mk[0], mk[1], B, T, 3),
          "%s: AdamW in backward keeping the norms gives the weights and "
          "losses of AdamW after it, bit for bit, over 3 steps", what);
    for (int k = 0; k < 2; k++) model_destroy(mk[k]);
  }
  if (os.grad_slots) {
    int32_t i2[B * T], t2[B * T];
    batch(i2, t2, B * T, c->vocab);
    float l2;
    hard(model_forward(m[1], i2, t2, B, T, &l2), "forward");
    check(model_backward(m[1]) == ERR_FAIL &&
              strstr(err_msg(), "slots") != NULL,
          "%s: with gradient slots model_backward is refused", what);
    check(model_adamw_step(m[1], &a) == ERR_FAIL &&
              strstr(err_msg(), "slots") != NULL,
          "%s: with gradient slots model_adamw_step is refused", what);
  }
  if (os.grad_slots) {
    /* the optimizer in the products (k_matmul_adamw): on the CPU engine
     * its product into a buffer and the same update, so bit for bit too */
    model_options op = os;
    op.adamw_in_products = 1;
    model *mp[2];
    size_t gp[2];
    for (int k = 0; k < 2; k++) {
      hard(eng_tag_bytes(e, "grads", &gp[k], NULL) < 0, "grads tag");
      hard(model_create_ex(&mp[k], e, c, B, T, k ? &op : o), "model_create_ex");
      hard(model_set_params(mp[k], 0, w, np), "model_set_params");
    }
    size_t now;
    hard(eng_tag_bytes(e, "grads", &now, NULL) < 0, "grads tag");
    /* its slots hold no weight matrix's gradient: slot 0 the embedding
     * (the final norm's gain and a layer's are smaller), slot 1 a layer's
     * norms' gains */
    int nvp;
    const tensor_view *vp = model_views(mp[1], &nvp);
    size_t gains = 0;
    for (int j = 1; j < 1 + (nvp - 3) / c->layers; j++)
      if (vp[j].ndim == 1) gains += vp[j].numel;
    check(now - gp[1] == (vp[0].numel + gains) * sizeof(float),
          "%s: with AdamW in the products the slots hold %zu gradient bytes: "
          "the embedding's %zu floats and a layer's %zu gains, the largest "
          "groups without weight matrices", what, now - gp[1], vp[0].numel,
          gains);
    check(adamw_forms_agree(mp[0], mp[1], B, T, 3),
          "%s: AdamW in the weight-gradient products gives the weights and "
          "losses of AdamW after backward, bit for bit, over 3 steps", what);
    /* ...and the products did the updates: one more step, profiled */
    int32_t pi[B * T], pt[B * T];
    batch(pi, pt, B * T, c->vocab);
    float pl;
    char rep[1024] = "";
    hard(eng_profile(e, 1), "eng_profile");
    hard(model_forward(mp[1], pi, pt, B, T, &pl), "forward");
    hard(model_backward_adamw(mp[1], &a), "backward_adamw");
    hard(eng_profile_report(e, rep, sizeof rep), "eng_profile_report");
    check(strstr(rep, "matmul+adamw") != NULL,
          "%s: with it the weight matrices are updated by k_matmul_adamw "
          "(%s)", what, rep);
    for (int k = 0; k < 2; k++) model_destroy(mp[k]);
    model *bad = NULL;
    op.grad_slots = 0;
    check(model_create_ex(&bad, e, c, B, T, &op) == ERR_FAIL && !bad &&
              strstr(err_msg(), "adamw_in_products with grad_slots"),
          "%s: the optimizer in the products without gradient slots is "
          "refused (%s)", what, err_msg());
    err_clear();
  }
  /* What needs every gradient first is refused, saying why. */
  int calls = 0;
  model_set_grad_hook(m[1], count_hook, &calls);
  int32_t ids[B * T], tg[B * T];
  batch(ids, tg, B * T, c->vocab);
  float loss;
  hard(model_forward(m[1], ids, tg, B, T, &loss), "forward");
  check(model_backward_adamw(m[1], &a) == ERR_FAIL &&
            strstr(err_msg(), "grad hook") != NULL,
        "%s: AdamW in backward with a grad hook is refused", what);
  for (int k = 0; k < 2; k++) model_destroy(m[k]);
}

/* The weight matrices' gradients in the products' dtype
 * (model_options.grad_lt) with AdamW in backward: three steps give the
 * losses and weights, bit for bit, of AdamW after backward whose
 * gradients are rounded to that dtype (and back) before the update: each
 * product's fp32 sums rounded once, as the 16-bit gradient stores them.
 * With head_chunk the head's gradient, which the chunks add into, stays
 * fp32. The slots then hold fewer bytes; without slots it is refused. */
static void test_grad_lt(engine *e, const model_config *c, const float *w,
                         size_t np, int B, int T, dtype lt, int head_chunk) {
  model_options oa = {.compute = lt, .fused = 1, .attention = ATTN_FLASH,
                      .f32 = F32_EXACT, .head_chunk = head_chunk};
  model_options os = oa, ol = oa;
  os.grad_slots = ol.grad_slots = 1;
  ol.grad_lt = 1;
  const model_options *opts[3] = {&oa, &ol, &os};
  model *m[3];
  size_t gb[3];
  for (int k = 0; k < 3; k++) {
    size_t before;
    hard(eng_tag_bytes(e, "grads", &before, NULL) < 0, "grads tag");
    hard(model_create_ex(&m[k], e, c, B, T, opts[k]), "model_create_ex");
    hard(model_set_params(m[k], 0, w, np), "model_set_params");
    hard(eng_tag_bytes(e, "grads", &gb[k], NULL) < 0, "grads tag");
    gb[k] -= before;
  }
  char what[96];
  snprintf(what, sizeof what, "%s weight gradients, %d layers, vocab %d%s",
           dtype_name(lt), c->layers, c->vocab,
           head_chunk ? ", the head in chunks (its gradient fp32)" : "");
  check(adamw_forms_agree_lt(m[0], m[1], B, T, 3, lt, head_chunk),
        "%s: AdamW in backward gives the weights and losses of AdamW after "
        "backward on gradients rounded to %s, bit for bit, over 3 steps",
        what, dtype_name(lt));
  if (lt != DT_F32)
    check(gb[1] < gb[2], "%s: the slots hold %zu bytes, fewer than the %zu "
          "of fp32 gradients", what, gb[1], gb[2]);
  else
    check(gb[1] == gb[2], "%s: fp32 products: the slots as without it (%zu "
          "bytes, %zu)", what, gb[1], gb[2]);
  for (int k = 0; k < 3; k++) model_destroy(m[k]);
  model *bad = NULL;
  ol.grad_slots = 0;
  check(model_create_ex(&bad, e, c, B, T, &ol) == ERR_FAIL && !bad &&
            strstr(err_msg(), "grad_lt") != NULL,
        "%s: without gradient slots refused (%s)", what, err_msg());
  err_clear();
}

/* A model of c with options o from weights w; *act: the activation
 * bytes it allocated. */
static model *model_from(engine *e, const model_config *c, int B, int T,
                         const model_options *o, const float *w, size_t np,
                         size_t *act) {
  model *m;
  size_t before;
  hard(eng_tag_bytes(e, "activations", &before, NULL) < 0, "tag");
  hard(model_create_ex(&m, e, c, B, T, o), "model_create_ex");
  hard(eng_tag_bytes(e, "activations", act, NULL) < 0, "tag");
  *act -= before;
  hard(model_set_params(m, 0, w, np), "model_set_params");
  return m;
}

/* ---- activation checkpointing ---------------------------------------------- */

/* Checkpoint groups of G layers (model_options.ckpt_layers) against none,
 * from weights w: over three training steps on fresh batches the losses,
 * every gradient and the weights after each AdamW step are the same bit
 * for bit (backward rebuilds each group by forward's kernels on the same
 * inputs); and so are the weights with AdamW in backward and gradient
 * slots on top. The table keeps G layers' tensors and one input for each
 * later group. */
static void test_checkpointing(engine *e, const model_config *c,
                               const float *w, size_t np, int B, int T,
                               attn_impl impl, int G, dtype dt) {
  model_options o = {.compute = dt, .fused = 1, .attention = impl,
                     .f32 = F32_EXACT};
  model_options oc = o;
  oc.ckpt_layers = G;
  char an[32];
  snprintf(an, sizeof an, "%s%s", dt == DT_F32 ? "" : "bf16, ",
           impl == ATTN_FLASH ? "flash" : "materialized");
  const int L = c->layers, kept = G < L ? G : L;
  const int inputs = G < L ? (L + G - 1) / G - 1 : 0;
  model *m[2];
  size_t act[2];
  for (int k = 0; k < 2; k++)
    m[k] = model_from(e, c, B, T, k ? &oc : &o, w, np, &act[k]);
  int na, nq = 0, nin = 0;
  const tensor_view *v = model_activations(m[1], &na);
  for (int j = 0; j < na; j++) {
    nq += strstr(v[j].name, ".attn.q") != NULL;
    nin += strncmp(v[j].name, "checkpoint.", 11) == 0;
  }
  check(nq == kept && nin == inputs &&
            (G < L ? act[1] < act[0] : act[1] == act[0]),
        "checkpoint groups of %d of %d layers (%s): %d layers' tensors "
        "(want %d), %d group inputs (want %d), %zu activation bytes "
        "against %zu without", G, L, an, nq, kept, nin, inputs, act[1],
        act[0]);
  const char *differs;
  int agree = training_agrees(m[0], m[1], B, T, 3, &differs);
  check(agree,
        "checkpoint groups of %d of %d layers (%s): losses, gradients and "
        "weights bit for bit over 3 steps%s%s", G, L, an,
        *differs ? "; differ: " : "", differs);
  /* keeping each layer's attention output (ckpt_keep_attn): flash only,
   * the reruns skip attention, the same bits; every layer then has its
   * own o (one view each), the rest as checkpointing alone */
  model_options ok = oc;
  ok.ckpt_keep_attn = 1;
  model *mk = NULL;
  if (impl != ATTN_FLASH) {
    check(model_create_ex(&mk, e, c, B, T, &ok) == ERR_FAIL && !mk &&
              strstr(err_msg(), "ckpt_keep_attn") != NULL,
          "checkpoint groups of %d (%s): keeping attention's output is "
          "refused with materialised attention", G, an);
  } else {
    size_t kb;
    mk = model_from(e, c, B, T, &ok, w, np, &kb);
    int no = 0, nq2 = 0;
    v = model_activations(mk, &na);
    for (int j = 0; j < na; j++) {
      no += strstr(v[j].name, ".attn.o") != NULL;
      nq2 += strstr(v[j].name, ".attn.q") != NULL;
    }
    check(no == L && nq2 == kept &&
              (G < L ? kb > act[1] && kb < act[0] : kb == act[1]),
          "checkpoint groups of %d of %d layers keeping attention's output: "
          "%d outputs (want %d), %d layers' q (want %d), %zu activation "
          "bytes between %zu (checkpoints alone) and %zu (none)", G, L, no,
          L, nq2, kept, kb, act[1], act[0]);
    for (int k = 0; k < 2; k++) model_destroy(m[k]);
    m[0] = model_from(e, c, B, T, &o, w, np, &act[0]);
    agree = training_agrees(m[0], mk, B, T, 3, &differs);
    check(agree,
          "checkpoint groups of %d of %d layers keeping attention's output: "
          "losses, gradients and weights bit for bit over 3 steps%s%s", G,
          L, *differs ? "; differ: " : "", differs);
    model_destroy(mk);
    m[1] = model_from(e, c, B, T, &oc, w, np, &act[1]);
  }
  /* with AdamW in backward and gradient slots (the memory-lean form),
   * then keeping the norms (the groups' reruns write them again) */
  oc.grad_slots = 1;
  for (int keep = 0; keep < 2; keep++) {
    oc.keep_norms = keep;
    for (int k = 0; k < 2; k++) {
      model_destroy(m[k]);
      hard(model_create_ex(&m[k], e, c, B, T, k ? &oc : &o), "model_create_ex");
      hard(model_set_params(m[k], 0, w, np), "model_set_params");
    }
    check(adamw_forms_agree(m[0], m[1], B, T, 3),
          "checkpoint groups of %d of %d layers (%s) with AdamW in backward "
          "and gradient slots%s: the weights and losses of AdamW after "
          "backward without checkpoints, bit for bit, over 3 steps", G, L, an,
          keep ? ", keeping the norms" : "");
  }
  for (int k = 0; k < 2; k++) model_destroy(m[k]);
}

/* ---- the head in chunks ---------------------------------------------------- */

/* model_options.head_chunk = R (the last chunk shorter) against the whole
 * head, from weights w, two training steps on the batch ids / tg: the
 * losses to 1e-6, the first step's gradients and the weights after the
 * second to 1e-5 of the largest (the head's weight gradient adds its
 * chunks in turn); the same with AdamW in backward on gradient slots.
 * Fewer activation bytes (R below the batch's tokens), no logits to
 * read; a forward without targets and the optimizer in the products are
 * refused. */
static void test_head_chunk(engine *e, const model_config *c, const float *w,
                            size_t np, const int32_t *ids, const int32_t *tg,
                            int B, int T, int R) {
  model_options o = {.compute = DT_F32, .fused = 1, .attention = ATTN_FLASH,
                     .f32 = F32_EXACT};
  model_options oc = o;
  oc.head_chunk = R;
  adamw_config a = adamw_defaults();
  for (int slots = 0; slots < 2; slots++) {
    const char *form = slots ? "AdamW in backward" : "AdamW after backward";
    o.grad_slots = oc.grad_slots = slots;
    model *m[2];
    size_t act[2];
    float loss[2][2], *g[2] = {NULL, NULL}, *p[2];
    for (int k = 0; k < 2; k++)
      m[k] = model_from(e, c, B, T, k ? &oc : &o, w, np, &act[k]);
    check(model_logits(m[1]) == NULL &&
              (R < B * T ? act[1] < act[0] : act[1] == act[0]),
          "head in chunks of %d of %d tokens (%s): no logits to read, %zu "
          "activation bytes against %zu", R, B * T, form, act[1], act[0]);
    for (int s = 0; s < 2; s++)
      for (int k = 0; k < 2; k++) {
        hard(model_zero_grad(m[k]), "zero_grad");
        hard(model_forward(m[k], ids, tg, B, T, &loss[k][s]), "forward");
        if (slots) {
          hard(model_backward_adamw(m[k], &a), "backward_adamw");
          continue;
        }
        hard(model_backward(m[k]), "backward");
        if (s == 0) g[k] = host_floats(e, model_grads(m[k]), np);
        hard(model_adamw_step(m[k], &a), "adamw");
      }
    for (int s = 0; s < 2; s++)
      check(fabsf(loss[1][s] - loss[0][s]) <= 1e-6f * fabsf(loss[0][s]),
            "head in chunks of %d (%s): step %d's loss %.9g, whole %.9g", R,
            form, s + 1, loss[1][s], loss[0][s]);
    char what[160];
    if (!slots) {
      snprintf(what, sizeof what, "head in chunks of %d: the gradients", R);
      tl_compare(what, g[1], g[0], np, 1e-5);
    }
    for (int k = 0; k < 2; k++) p[k] = host_floats(e, model_params(m[k]), np);
    snprintf(what, sizeof what, "head in chunks of %d (%s): the weights "
             "after two steps", R, form);
    tl_compare(what, p[1], p[0], np, 1e-5);
    if (!slots)
      check(model_forward(m[1], ids, NULL, B, T, NULL) == ERR_FAIL &&
                strstr(err_msg(), "head_chunk") != NULL,
            "head in chunks of %d: a forward without targets is refused", R);
    for (int k = 0; k < 2; k++) {
      free(g[k]);
      free(p[k]);
      model_destroy(m[k]);
    }
  }
  model *bad = NULL;
  oc.adamw_in_products = 1;
  check(model_create_ex(&bad, e, c, B, T, &oc) == ERR_FAIL && !bad &&
            strstr(err_msg(), "head_chunk") != NULL,
        "head in chunks with the optimizer in the products is refused");
}

/* Random weights for m: gains (1-d views) near 1, the rest small, of both
 * signs: never zero. */
static float *random_weights(const model *m) {
  size_t np = model_nparams(m);
  float *w = tl_malloc(np * sizeof *w);
  int nv;
  const tensor_view *v = model_views(m, &nv);
  for (int i = 0; i < nv; i++)
    for (size_t j = 0; j < v[i].numel; j++)
      w[v[i].offset + j] = v[i].ndim == 1 ? 1.0f + frand(0.3f) : frand(0.2f);
  return w;
}

/* The fused path's host side on a bf16 model of the CPU engine: forward
 * makes the 16-bit copy current before its first kernel, and runs. */
static void bf16_forward(model *m, int B, int T, const char *after) {
  int32_t ids[B * T], tg[B * T];
  batch(ids, tg, B * T, model_get_config(m)->vocab);
  float loss;
  int rc = model_forward(m, ids, tg, B, T, &loss);
  check(rc == 0, "after %s, bf16 forward on the cpu engine runs: %s", after,
        rc ? err_msg() : "ran");
}

/* What the fused path's products read as weights (the 16-bit copy,
 * model_internal.h) is the fp32 weights rounded to bf16: within half a
 * bf16 ulp, 2^-8 of each value. */
static void check_low_copy(engine *e, model *m, const char *after) {
  size_t n = model_nparams(m);
  float *w = host_floats(e, model_params(m), n);
  uint16_t *low = tl_malloc(n * sizeof *low);
  hard(eng_download(e, low, m->params_low, n * sizeof *low), "download");
  hard(eng_sync(e), "sync");
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    union { uint32_t u; float f; } x = {.u = (uint32_t)low[i] << 16};
    if (!(fabs((double)x.f - w[i]) <= 0x1p-8 * fabs(w[i])) && bad++ == 0)
      first = i;
  }
  check(bad == 0, "after %s, the bf16 weights the fused path reads are the "
        "fp32 weights rounded (%zu of %zu differ, first at %zu)", after, bad,
        n, first);
  free(w);
  free(low);
}

/* A checkpoint of another model (another seed, gains away from 1) loaded
 * into a model that has trained must be what the fused path computes
 * with, as must weights written by any other means; nobody announces a
 * write (model.h).
 *   fp32 (what the CPU engine computes): a fused model trains a step, loads
 *     the checkpoint, and its loss, logits and every gradient on a fresh
 *     batch equal those of an op-by-op model that loaded the same file,
 *     to this file's 1e-5;
 *   bf16: the CPU engine refuses 16-bit kernels, but a bf16 fused model
 *     keeps the 16-bit copy here too, so after each kind of write (init,
 *     load, model_set_params of one tensor, two writes through
 *     model_params_writable as a data-parallel optimizer makes them, a
 *     placed buffer written by its owner, the weights moved back) the copy
 *     a forward reads must be the weights rounded. test_model_cuda runs
 *     the whole bf16 step on the GPU. */
static void test_writes_after_training(engine *e, const model_config *c,
                                       int B, int T) {
  char dir[512], path[600];
  float *w = other_checkpoint(e, c, B, T, "test_fused", dir, sizeof dir, path,
                              sizeof path);
  free(w);

  model_options fo = {.compute = DT_F32, .fused = 1, .attention = ATTN_FLASH,
                      .f32 = F32_EXACT};
  model *f, *o;
  hard(model_create_ex(&f, e, c, B, T, &fo), "model_create_ex");
  int nv;
  const tensor_view *v = model_views(f, &nv);
  size_t np = model_nparams(f);
  hard(model_init(f, 7), "model_init");
  train_step(f, B, T);
  hard(st_load_model(f, path), "st_load_model");
  hard(model_create(&o, e, c, B, T, DT_F32), "model_create");
  hard(st_load_model(o, path), "st_load_model");
  int32_t ids[B * T], tg[B * T];
  batch(ids, tg, B * T, c->vocab);
  float lf, lo;
  const size_t nl = (size_t)B * T * c->vocab;
  hard(model_zero_grad(f), "zero_grad");
  hard(model_zero_grad(o), "zero_grad");
  hard(model_forward(f, ids, tg, B, T, &lf), "forward");
  hard(model_forward(o, ids, tg, B, T, &lo), "forward");
  check(fabs(lf - lo) <= 1e-5 * fabs(lo), "trained, then loaded: fused "
        "loss %.7f vs op-by-op %.7f", lf, lo);
  float *gf = host_floats(e, model_logits(f), nl);
  float *go = host_floats(e, model_logits(o), nl);
  tl_compare("trained, then loaded: fused logits", gf, go, nl, 1e-5);
  free(gf);
  free(go);
  hard(model_backward(f), "backward");
  hard(model_backward(o), "backward");
  gf = host_floats(e, model_grads(f), np);
  go = host_floats(e, model_grads(o), np);
  char what[160];
  for (int i = 0; i < nv; i++) {
    snprintf(what, sizeof what, "trained, then loaded: fused grad %s",
             v[i].name);
    tl_compare(what, gf + v[i].offset, go + v[i].offset, v[i].numel, 1e-5);
  }
  free(gf);
  free(go);
  model_destroy(f);
  model_destroy(o);

  model_options bo = {.compute = DT_BF16, .fused = 1,
                      .attention = ATTN_FLASH, .f32 = F32_EXACT};
  model *m;
  hard(model_create_ex(&m, e, c, B, T, &bo), "model_create_ex");
  hard(model_init(m, 7), "model_init");
  bf16_forward(m, B, T, "model_init");
  check_low_copy(e, m, "model_init");
  hard(st_load_model(m, path), "st_load_model");
  bf16_forward(m, B, T, "st_load_model");
  check_low_copy(e, m, "st_load_model");

  w = random_weights(m);
  const tensor_view *lm = model_view(m, "lm_head.weight");
  hard(model_set_params(m, lm->offset, w + lm->offset, lm->numel),
       "model_set_params");
  bf16_forward(m, B, T, "model_set_params of lm_head");
  check_low_copy(e, m, "model_set_params of lm_head");
  float *alias = model_params_writable(m);
  for (int k = 0; k < 2; k++) {
    free(w);
    w = random_weights(m);
    hard(eng_upload(e, alias, w, np * sizeof *w), "upload");
    snprintf(what, sizeof what, "write %d through model_params_writable",
             k + 1);
    bf16_forward(m, B, T, what);
    check_low_copy(e, m, what);
  }
  void *buf = NULL;
  hard(eng_alloc(e, np * sizeof(float), "test", &buf), "eng_alloc");
  hard(model_place_params(m, buf), "model_place_params");
  free(w);
  w = random_weights(m);
  hard(eng_upload(e, buf, w, np * sizeof *w), "upload");
  bf16_forward(m, B, T, "a write into the placed buffer");
  check_low_copy(e, m, "a write into the placed buffer");
  hard(eng_upload(e, buf, w + 1, (np - 1) * sizeof *w), "upload");
  hard(model_place_params(m, NULL), "model_place_params(NULL)");
  bf16_forward(m, B, T, "moving the weights back");
  check_low_copy(e, m, "moving the weights back");
  eng_free(e, buf);
  free(w);
  model_destroy(m);

  if (unlink(path) != 0 || rmdir(dir) != 0)
    fprintf(stderr, "test_fused: note: could not remove %s: %s\n", dir,
            strerror(errno));
}

int main(void) {
  engine *e;
  hard(engine_cpu_create(&e, 0), "engine_cpu_create");
  tl_seed(2024);
  model_config c;
  model_config_by_name("tiny", &c);
  const int B = 2, T = 13;   /* T not a multiple of any tile */
  float *w;
  model *init = initial_model(e, &c, B, T, 77, &w);
  size_t np = model_nparams(init);
  int nv;
  const tensor_view *v = model_views(init, &nv);
  for (int i = 0; i < nv; i++)     /* gains away from 1 */
    if (v[i].ndim == 1)
      for (size_t j = 0; j < v[i].numel; j++)
        w[v[i].offset + j] = 1.0f + frand(0.3f);
  int32_t ids[B * T], tg[B * T];
  for (int i = 0; i < B * T; i++) {
    ids[i] = (int32_t)(next_u64() % (uint64_t)c.vocab);
    tg[i] = (int32_t)(next_u64() % (uint64_t)c.vocab);
  }

  model_options ob = {.compute = DT_F32, .attention = ATTN_MATERIALIZED,
                      .f32 = F32_EXACT};
  const attn_impl impls_ck[] = {ATTN_MATERIALIZED, ATTN_FLASH};
  test_adamw_in_backward(e, &c, w, np, B, T, &ob, "op by op");
  {
    model_options of = {.compute = DT_F32, .fused = 1,
                        .attention = ATTN_MATERIALIZED, .f32 = F32_EXACT};
    test_adamw_in_backward(e, &c, w, np, B, T, &of, "fused");
    model_options off = {.compute = DT_F32, .fused = 1,
                         .attention = ATTN_FLASH, .f32 = F32_EXACT};
    test_adamw_in_backward(e, &c, w, np, B, T, &off, "fused, flash");
    /* 5 layers: slot 1 serves the head, layers 3 and 1 and the
     * embedding, slot 0 layers 4, 2 and 0 */
    model_config c5 = c;
    c5.layers = 5;
    model *t5;
    hard(model_create(&t5, e, &c5, B, T, DT_F32), "model_create");
    float *w5 = random_weights(t5);
    size_t np5 = model_nparams(t5);
    model_destroy(t5);
    test_adamw_in_backward(e, &c5, w5, np5, B, T, &off, "fused, 5 layers");
    /* a vocabulary large enough that the head and the embedding, not a
     * layer, set the slots' size */
    model_config cv = c;
    cv.vocab = 8 * c.vocab;
    hard(model_create(&t5, e, &cv, B, T, DT_F32), "model_create");
    float *wv = random_weights(t5);
    size_t npv = model_nparams(t5);
    model_destroy(t5);
    test_adamw_in_backward(e, &cv, wv, npv, B, T, &off,
                           "fused, 8x the vocabulary");
    /* the same in bf16 (the CPU engine stores 16-bit operands narrower):
     * the slots and the rebuilt tensors of the 16-bit layout */
    model_options o16 = off;
    o16.compute = DT_BF16;
    test_adamw_in_backward(e, &c5, w5, np5, B, T, &o16, "bf16 fused, 5 layers");
    test_adamw_in_backward(e, &cv, wv, npv, B, T, &o16,
                           "bf16 fused, 8x the vocabulary");
    model_options o16s = o16;   /* the updates on backward's own stream */
    o16s.adamw_serial = 1;
    test_adamw_in_backward(e, &c5, w5, np5, B, T, &o16s,
                           "bf16 fused, 5 layers, updates in backward's order");
    /* weight gradients in bf16 (f16 has no AdamW in backward: its loss
     * scaling), and fp32 where that is the products' dtype; the head in
     * chunks keeps its own fp32 */
    test_grad_lt(e, &c5, w5, np5, B, T, DT_BF16, 0);
    test_grad_lt(e, &cv, wv, npv, B, T, DT_BF16, 0);
    test_grad_lt(e, &c5, w5, np5, B, T, DT_BF16, 7);
    test_grad_lt(e, &c5, w5, np5, B, T, DT_F32, 0);
    free(wv);
    /* checkpoint groups of 1, 2 (the last one shorter) and 3 layers of
     * 5, the whole model (nothing rebuilt) and more than it */
    for (int k = 0; k < 2; k++) {
      static const int groups[] = {1, 2, 3, 5, 7};
      for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
        test_checkpointing(e, &c5, w5, np5, B, T, impls_ck[k], groups[g],
                           DT_F32);
    /* bf16 (16-bit storage on the CPU engine): the reruns rebuild the
     * 16-bit tensors forward saved */
    for (int k = 0; k < 2; k++)
      test_checkpointing(e, &c5, w5, np5, B, T, impls_ck[k], 2, DT_BF16);
    }
    /* the head in chunks: uneven (26 tokens in 5s), and one chunk */
    test_head_chunk(e, &c5, w5, np5, ids, tg, B, T, 5);
    test_head_chunk(e, &c5, w5, np5, ids, tg, B, T, 26);
    free(w5);
    model *bad = NULL;
    model_options ob2 = ob;
    ob2.ckpt_layers = 2;
    check(model_create_ex(&bad, e, &c, B, T, &ob2) == ERR_FAIL && !bad &&
              strstr(err_msg(), "ckpt_layers = 2") &&
              strstr(err_msg(), "fused path"),
          "checkpointing op by op is refused (%s)", err_msg());
    err_clear();
    ob2 = off;
    ob2.ckpt_layers = -1;
    check(model_create_ex(&bad, e, &c, B, T, &ob2) == ERR_FAIL && !bad &&
              strstr(err_msg(), "ckpt_layers = -1"),
          "a negative checkpoint group is refused (%s)", err_msg());
    err_clear();
  }
  run_out ref;
  run(e, &c, w, np, ids, tg, B, T, &ob, &ref);
  check(ref.hook_calls == 2 * nv, "op-by-op: %d gradient announcements "
        "in two backwards (%d tensors)", ref.hook_calls, nv);

  /* fp32 to rounding; bf16 (the CPU engine stores 16-bit operands
   * narrower: kernels/cpu/cpu.h, cpu_stage) within its rounding */
  const attn_impl impls[] = {ATTN_MATERIALIZED, ATTN_FLASH};
  for (int k = 0; k < 4; k++) {
    int half = k >= 2;
    model_options of = {.compute = half ? DT_BF16 : DT_F32, .fused = 1,
                        .attention = impls[k % 2], .f32 = F32_EXACT};
    const double tol = half ? BF16_TOL : 1e-5;
    run_out o;
    run(e, &c, w, np, ids, tg, B, T, &of, &o);
    char an[32];
    snprintf(an, sizeof an, "%s%s", half ? "bf16, " : "",
             impls[k % 2] == ATTN_FLASH ? "flash" : "materialized");
    char what[160];
    for (int s = 0; s < 2; s++)
      check(fabs(o.loss[s] - ref.loss[s]) <= tol * fabs(ref.loss[s]),
            "fused (%s) loss of step %d %.7f vs op-by-op %.7f", an, s + 1,
            o.loss[s], ref.loss[s]);
    snprintf(what, sizeof what, "fused (%s) logits", an);
    tl_compare(what, o.logits, ref.logits, (size_t)B * T * c.vocab, tol);
    for (int i = 0; !half && i < nv; i++) {
      snprintf(what, sizeof what, "fused (%s) grad %s", an, v[i].name);
      tl_compare(what, o.grads + v[i].offset, ref.grads + v[i].offset,
                 v[i].numel, 1e-5);
    }
    snprintf(what, sizeof what, "fused (%s) weights after two AdamW steps",
             an);
    tl_compare(what, o.params_after, ref.params_after, np, tol);
    check(o.hook_calls == 2 * nv, "fused (%s): %d gradient announcements "
          "in two backwards", an, o.hook_calls);
    if (impls[k % 2] == ATTN_FLASH)
      check(o.act_bytes < ref.act_bytes, "fused (%s) keeps fewer "
            "activation bytes than op-by-op (%zu < %zu)", an, o.act_bytes,
            ref.act_bytes);
    free(o.logits); free(o.grads); free(o.params_after);
  }

  /* Loss-scale unscaling: scaled, and an overflow is seen. */
  {
    float g[1000], *d;
    for (int i = 0; i < 1000; i++) g[i] = frand(1000.0f);
    hard(eng_alloc(e, sizeof g, "test", (void **)&d), "alloc");
    hard(eng_upload(e, d, g, sizeof g), "upload");
    int finite = -1;
    hard(k_grad_unscale(e, d, 1000, 0.25f, &finite), "unscale");
    float back[1000];
    hard(eng_download(e, back, d, sizeof back), "download");
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= back[i] == g[i] * 0.25f;
    check(finite == 1 && same, "k_grad_unscale scales and finds all finite");
    g[517] = INFINITY;
    hard(eng_upload(e, d, g, sizeof g), "upload");
    hard(k_grad_unscale(e, d, 1000, 0.25f, &finite), "unscale");
    check(finite == 0, "k_grad_unscale sees one inf among 1000");
    eng_free(e, d);
  }

  /* Profiling: every operation of a training step lands in its family,
   * with a time, and the report stops collecting. */
  {
    model_options of = {.compute = DT_F32, .fused = 1,
                        .attention = ATTN_FLASH, .f32 = F32_EXACT};
    model *pm;
    hard(model_create_ex(&pm, e, &c, B, T, &of), "model_create_ex");
    hard(model_init(pm, 5), "model_init");
    float loss;
    adamw_config a = adamw_defaults();
    hard(eng_profile(e, 1), "eng_profile");
    hard(model_zero_grad(pm), "zero_grad");
    hard(model_forward(pm, ids, tg, B, T, &loss), "forward");
    hard(model_backward(pm), "backward");
    hard(model_adamw_step(pm, &a), "adamw");
    char rep[700];
    hard(eng_profile_report(e, rep, sizeof rep), "eng_profile_report");
    const char *fams[] = {"matmul", "attention", "rmsnorm", "rope+heads",
                          "swiglu", "cross_entropy", "embedding", "adamw"};
    int all = 1;
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
      char key[40];
      snprintf(key, sizeof key, "%s ", fams[i]);
      if (!strstr(rep, key)) all = 0;
    }
    check(all, "a profiled fused step reports every kernel family: %s", rep);
    char rep2[700];
    hard(model_forward(pm, ids, tg, B, T, &loss), "forward");
    hard(eng_profile_report(e, rep2, sizeof rep2), "eng_profile_report");
    check(rep2[0] == '\0', "after the report nothing more is collected "
          "(\"%s\")", rep2);
    model_destroy(pm);
  }

  model *m;
  model_options opflash = {.compute = DT_F32, .attention = ATTN_FLASH,
                           .f32 = F32_EXACT};
  check(model_create_ex(&m, e, &c, B, T, &opflash) == ERR_FAIL &&
            strstr(err_msg(), "op-by-op") != NULL,
        "op-by-op with flash attention is refused: %s", err_msg());
  for (int p = F32_TF32; p <= F32_3XTF32; p++) {
    model_options tf = {.compute = DT_F32, .fused = 1,
                        .attention = ATTN_FLASH, .f32 = (f32_products)p};
    check(model_create_ex(&m, e, &c, B, T, &tf) == ERR_FAIL &&
              strstr(err_msg(), "TF32") != NULL,
          "%s on the cpu engine is refused: %s", f32_products_name(tf.f32),
          err_msg());
  }
  model_options graphs = {.compute = DT_F32, .fused = 1,
                          .attention = ATTN_FLASH, .f32 = F32_EXACT,
                          .graphs = 1};
  check(model_create_ex(&m, e, &c, B, T, &graphs) == ERR_FAIL &&
            strstr(err_msg(), "cannot record CUDA graphs") != NULL,
        "CUDA graphs on the cpu engine are refused: %s", err_msg());
  check(eng_graph_begin(e) == ERR_FAIL && !eng_recording(e),
        "eng_graph_begin on the cpu engine fails and records nothing: %s",
        err_msg());

  test_writes_after_training(e, &c, B, T);

  free(ref.logits); free(ref.grads); free(ref.params_after);
  free(w);
  model_destroy(init);
  engine_destroy(e);
  return tl_finish();
}
