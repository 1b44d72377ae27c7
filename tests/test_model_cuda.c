/* The whole model on the CUDA engine against the CPU engine (GPU only; exit
 * 77 without one): same initial weights, same batch; loss, logits and every
 * parameter gradient, then one AdamW step, compared per precision:
 *   fp32 (true fp32 matrix products, no TF32): within 1e-4 of each tensor's
 *     largest absolute value — both engines round in fp32, only the order of
 *     summation differs;
 *   bf16 / fp16 matrix inputs (fp32 accumulation): within 3e-2 / 1e-2 of the
 *     tensor's scale — an 8-bit (bf16) or 11-bit (fp16) mantissa on the
 *     inputs of every product, compounded over two layers;
 * and the CUDA engine's fp32 forward and backward against the PyTorch
 * fixture (tests/data/fixture_tiny.safetensors) with test_fixture's 1e-4.
 * Also: the fused 16-bit path after a checkpoint is loaded into a model
 * that has trained (test_load_after_training), the model with LayerNorm
 * in place of RMSNorm against the CPU engine (test_layernorm), one
 * engine's training repeating itself bit for bit (test_repeats),
 * activation checkpoints against none bit for bit (flash output kept
 * through the reruns or not, with CUDA graphs), and the head in chunks
 * against the whole head (loss to 1e-5, gradients to 2e-2 in bf16 and
 * 1e-4 in fp32 of the largest, weights at most 2 lr apart a step).
 *
 * Option: --small (for compute-sanitizer's racecheck) leaves out
 * test_graphs and test_repeats. Their kernels are those the precision and
 * fused runs launch already; what they add (graph replay equal to direct
 * launches, a run equal to itself bit for bit) is the plain run's to
 * check. Under racecheck on an H200 they were about a quarter of the
 * whole test's time; what remains (568 s, run alone) is spread evenly
 * over its steps, 2 to 30 s each. */
#include "config.h"
#include "tests/testlib.h"
#include "tests/model_helpers.h"
#include "model/model.h"
#include "model/safetensors.h"

#include "common/check.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

typedef struct run_out { float loss; float *logits, *grads, *params_after; } run_out;

/* A run against the reference run: loss, logits and every gradient to
 * tol; unless ptol is 0, the weights after one AdamW step to ptol (fp32:
 * the same update from nearly the same gradients, 1e-5). pn names it. */
static void compare_runs(const char *pn, const run_out *o, const run_out *ref,
                         const tensor_view *v, int nv, size_t nlogits,
                         size_t np, double tol, double ptol) {
  check(fabs(o->loss - ref->loss) <= tol * fabs(ref->loss),
        "%s loss %.6f vs cpu %.6f", pn, o->loss, ref->loss);
  char what[200];
  snprintf(what, sizeof what, "%s logits", pn);
  tl_compare(what, o->logits, ref->logits, nlogits, tol);
  for (int i = 0; i < nv; i++) {
    snprintf(what, sizeof what, "%s grad %s", pn, v[i].name);
    tl_compare(what, o->grads + v[i].offset, ref->grads + v[i].offset,
               v[i].numel, tol);
  }
  if (ptol > 0) {
    snprintf(what, sizeof what, "%s params after one AdamW step", pn);
    tl_compare(what, o->params_after, ref->params_after, np, ptol);
  }
}

/* Forward, backward and one AdamW step from the given weights. */
static void run_ex(engine *e, const model_config *c, const float *w,
                   size_t np, const int32_t *ids, const int32_t *tg, int B,
                   int T, const model_options *opt, run_out *o) {
  model *m;
  hard(model_create_ex(&m, e, c, B, T, opt), "model_create_ex");
  hard(model_set_params(m, 0, w, np), "model_set_params");
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, ids, tg, B, T, &o->loss), "forward");
  o->logits = host_floats(e, model_logits(m), (size_t)B * T * c->vocab);
  hard(model_backward(m), "backward");
  o->grads = host_floats(e, model_grads(m), np);
  for (size_t i = 0; i < np; i++) o->grads[i] /= model_loss_scale(m);
  adamw_config a = adamw_defaults();
  hard(model_adamw_step(m, &a), "adamw");
  o->params_after = host_floats(e, model_params(m), np);
  model_destroy(m);
}

static void run(engine *e, const model_config *c, const float *w, size_t np,
                const int32_t *ids, const int32_t *tg, int B, int T,
                dtype compute, run_out *o) {
  model_options opt = {.compute = compute, .attention = ATTN_MATERIALIZED,
                       .f32 = F32_EXACT};
  run_ex(e, c, w, np, ids, tg, B, T, &opt, o);
}

static void free_out(run_out *o) {
  free(o->logits); free(o->grads); free(o->params_after);
}

/* K train steps from weights w, a fresh batch each step (drawn from seed),
 * the batch one sequence shorter from step 3 on (a new shape: the
 * recordings are remade). Losses into loss[K], final weights returned. */
enum { GRAPH_STEPS = 6 };
static float *train(engine *e, const model_config *c, const float *w,
                    size_t np, int B, int T, const model_options *opt,
                    float *loss, long long *replays) {
  model *m;
  hard(model_create_ex(&m, e, c, B, T, opt), "model_create_ex");
  hard(model_set_params(m, 0, w, np), "model_set_params");
  int32_t ids[B * T], tg[B * T];
  unsigned s = 777;
  adamw_config a = adamw_defaults();
  for (int k = 0; k < GRAPH_STEPS; k++) {
    int b = k < 3 ? B : B - 1;
    for (int i = 0; i < b * T; i++) {
      s = s * 1103515245u + 12345u; ids[i] = (int32_t)((s >> 8) % (unsigned)c->vocab);
      s = s * 1103515245u + 12345u; tg[i] = (int32_t)((s >> 8) % (unsigned)c->vocab);
    }
    hard(model_zero_grad(m), "zero_grad");
    hard(model_forward(m, ids, tg, b, T, &loss[k]), "forward");
    hard(model_backward(m), "backward");
    hard(model_adamw_step(m, &a), "adamw");
  }
  float *p = host_floats(e, model_params(m), np);
  *replays = model_graph_replays(m);
  model_destroy(m);
  return p;
}

/* CUDA graphs replay exactly the work they recorded, reading each step's
 * new batch: losses and weights after GRAPH_STEPS steps equal those of the
 * same training run directly, and the recordings were replayed (steps 2,
 * 3, 5, 6 of forward and backward each: step 1 and the new shape at step 4
 * run directly). */
static void test_graphs(engine *gpu, const model_config *c, const float *w,
                        size_t np, int B, int T) {
  const struct { dtype t; int fused; attn_impl a; f32_products f32; } cases[] = {
      {DT_F32, 0, ATTN_MATERIALIZED, F32_EXACT},
      {DT_F32, 1, ATTN_FLASH, F32_EXACT},
      {DT_BF16, 1, ATTN_FLASH, F32_EXACT},
      {DT_BF16, 1, ATTN_MATERIALIZED, F32_EXACT},
      {DT_F16, 1, ATTN_FLASH, F32_EXACT},
      {DT_F32, 1, ATTN_FLASH, F32_3XTF32}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_options opt = {.compute = cases[i].t, .fused = cases[i].fused,
                         .attention = cases[i].a, .f32 = cases[i].f32};
    float l0[GRAPH_STEPS], l1[GRAPH_STEPS];
    long long r0, r1;
    float *p0 = train(gpu, c, w, np, B, T, &opt, l0, &r0);
    opt.graphs = 1;
    float *p1 = train(gpu, c, w, np, B, T, &opt, l1, &r1);
    char pn[96], what[160];
    snprintf(pn, sizeof pn, "graphs, %s %s%s %s",
             cases[i].fused ? "fused" : "op-by-op", dtype_name(cases[i].t),
             cases[i].f32 == F32_3XTF32 ? "+3xtf32" : "",
             cases[i].a == ATTN_FLASH ? "flash" : "materialized");
    double worst = 0;
    for (int k = 0; k < GRAPH_STEPS; k++)
      worst = fmax(worst, fabs((double)l1[k] - l0[k]) / fabs(l0[k]));
    check(worst <= 1e-6 && l0[0] != l0[1] && l0[3] != l0[4],
          "%s: %d steps' losses equal the direct run's (worst relative "
          "difference %.2e <= 1e-6)", pn, GRAPH_STEPS, worst);
    snprintf(what, sizeof what, "%s: weights after %d steps", pn,
             GRAPH_STEPS);
    tl_compare(what, p1, p0, np, 1e-5);
    check(r0 == 0 && r1 == 8, "%s: %lld replays (want 8; without graphs %lld, "
          "want 0)", pn, r1, r0);
    free(p0);
    free(p1);
  }
}

/* One engine repeats itself: the same training run (GRAPH_STEPS steps,
 * a shape change among them), once its products' algorithms are chosen
 * (matmul_lt.c times them on a shape's first product, so a first run may
 * differ from later ones), gives the same losses and weights bit for bit,
 * in every form. A race in a kernel or between streams shows up here as a
 * difference; rounding cannot. (At this head dim, 16, flash's backward is
 * the two-pass kernel without atomics; the Hopper one at 64, 80 and 128
 * adds dq atomically and is not held to this.) */
static void test_repeats(engine *gpu, const model_config *c, const float *w,
                         size_t np, int B, int T) {
  const struct { dtype t; int fused; attn_impl a; int ckpt; } cases[] = {
      {DT_F32, 0, ATTN_MATERIALIZED, 0}, {DT_F32, 1, ATTN_FLASH, 0},
      {DT_BF16, 1, ATTN_FLASH, 0},       {DT_BF16, 1, ATTN_MATERIALIZED, 0},
      {DT_F16, 1, ATTN_FLASH, 0},        {DT_BF16, 1, ATTN_FLASH, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_options opt = {.compute = cases[i].t, .fused = cases[i].fused,
                         .attention = cases[i].a, .f32 = F32_EXACT,
                         .ckpt_layers = cases[i].ckpt};
    float l[3][GRAPH_STEPS];
    long long r;
    float *p[3];
    for (int k = 0; k < 3; k++) p[k] = train(gpu, c, w, np, B, T, &opt, l[k], &r);
    size_t differ = 0;
    for (size_t j = 0; j < np; j++) differ += memcmp(&p[1][j], &p[2][j], sizeof(float)) != 0;
    check(memcmp(l[1], l[2], sizeof l[1]) == 0 && differ == 0,
          "repeats: %s %s %s%s: a second run's %d losses and weights equal "
          "the first's bit for bit (%zu of %zu weights differ)",
          cases[i].fused ? "fused" : "op-by-op", dtype_name(cases[i].t),
          cases[i].a == ATTN_FLASH ? "flash" : "materialized",
          cases[i].ckpt ? ", a checkpoint a layer" : "", GRAPH_STEPS, differ,
          np);
    for (int k = 0; k < 3; k++) free(p[k]);
  }
}

/* Fresh random ids and targets in [0, vocab). */
static void fresh_batch(int32_t *ids, int32_t *tg, int n, int vocab) {
  for (int i = 0; i < n; i++) {
    ids[i] = (int32_t)(next_u64() % (uint64_t)vocab);
    tg[i] = (int32_t)(next_u64() % (uint64_t)vocab);
  }
}

/* Logits and unscaled gradients of one forward and backward. */
typedef struct fb_out { float *logits, *grads; } fb_out;
static void fwd_bwd(model *m, const int32_t *ids, const int32_t *tg, int B,
                    int T, fb_out *o) {
  engine *e = model_engine(m);
  size_t np = model_nparams(m);
  float loss;
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, ids, tg, B, T, &loss), "forward");
  o->logits = host_floats(e, model_logits(m),
                          (size_t)B * T * model_get_config(m)->vocab);
  hard(model_backward(m), "backward");
  o->grads = host_floats(e, model_grads(m), np);
  for (size_t i = 0; i < np; i++) o->grads[i] /= model_loss_scale(m);
}

/* The optimizer in backward on the GPU: three steps with AdamW in
 * backward (model_backward_adamw) against AdamW after it, from the same
 * weights on the same batches, op by op in fp32 and fused in bf16 (whose
 * AdamW also writes each tensor's 16-bit copy, which the next forward
 * reads; with gradient slots, so the side stream's updates and the next
 * layers' gradients are ordered by events): weights and losses equal bit
 * for bit, as the updates are the
 * same per-element arithmetic on the same inputs (materialised attention:
 * Hopper's flash backward sums dq with atomics, in any order; both models
 * share the engine, so cuBLASLt's per-shape choices too). */
static void test_adamw_in_backward(engine *gpu, const model_config *tiny,
                                   int B, int T) {
  /* 5 layers: slot 0 serves layers 4, 2 and 0, slot 1 layers 3 and 1 */
  model_config c5 = *tiny;
  c5.layers = 5;
  const model_config *c = &c5;
  /* cap: model_options.adamw_blocks, the updates held to 3 blocks (each
   * loops over its share); rsv: model_options.sm_reserve, backward's
   * products shaped for 8 fewer SMs, and so AdamW after backward's
   * backward too (a view with the same reserve: the same cuBLASLt plans,
   * which the engine keys on the SM target) */
  /* keep: model_options.keep_norms, forward keeps what the slots' form
   * would rebuild */
  static const struct { dtype t; int fused; attn_impl a; int cap, rsv, serial, keep; const char *n; }
      cases[] = {{DT_F32, 0, ATTN_MATERIALIZED, 0, 0, 0, 0, "fp32 op by op"},
                 {DT_BF16, 1, ATTN_MATERIALIZED, 0, 0, 0, 0, "bf16 fused"},
                 {DT_BF16, 1, ATTN_MATERIALIZED, 3, 0, 0, 0, "bf16 fused, updates on 3 blocks"},
                 {DT_BF16, 1, ATTN_MATERIALIZED, 3, 8, 0, 0,
                  "bf16 fused, updates on 3 blocks, products on 8 SMs fewer"},
                 {DT_BF16, 1, ATTN_MATERIALIZED, 0, 0, 1, 0,
                  "bf16 fused, updates on backward's stream (adamw_serial)"},
                 {DT_BF16, 1, ATTN_MATERIALIZED, 0, 0, 0, 1,
                  "bf16 fused, norms kept (keep_norms)"},
                 {DT_F32, 1, ATTN_MATERIALIZED, 0, 0, 1, 1,
                  "fp32 fused, norms kept, updates on backward's stream"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_options opt = {.compute = cases[i].t, .fused = cases[i].fused,
                         .attention = cases[i].a, .f32 = F32_EXACT};
    model *m[2];
    model_options os = opt;   /* the fused path: with gradient slots */
    os.grad_slots = opt.fused;
    os.adamw_blocks = cases[i].cap;
    os.sm_reserve = cases[i].rsv;
    os.adamw_serial = cases[i].serial;
    os.keep_norms = cases[i].keep;
    for (int k = 0; k < 2; k++) {
      hard(model_create_ex(&m[k], gpu, c, B, T, k ? &os : &opt),
           "model_create_ex");
      hard(model_init(m[k], 7), "model_init");
    }
    if (opt.fused && opt.compute != DT_F32 && cases[i].cap == 0) {
      /* with slots the norms' 16-bit outputs are recomputed, not saved,
       * unless kept */
      int na[2], kept[2] = {0, 0};
      for (int k = 0; k < 2; k++) {
        const tensor_view *acts = model_activations(m[k], &na[k]);
        for (int j = 0; j < na[k]; j++)
          kept[k] += strstr(acts[j].name, "ln1.out") != NULL ||
                     strstr(acts[j].name, "ln2.out") != NULL;
      }
      int want = cases[i].keep ? 2 * c->layers : 0;
      check(kept[0] == 2 * c->layers && kept[1] == want,
            "%s: norm outputs saved without gradient slots (%d, want %d), "
            "with them %d (want %d)", cases[i].n, kept[0], 2 * c->layers,
            kept[1], want);
    }
    engine *after_bwd = NULL;
    eng_ctx bc = {NULL, cases[i].rsv, 0};
    if (cases[i].rsv) hard(eng_view(gpu, &bc, &after_bwd), "eng_view");
    int same = adamw_forms_agree_on(m[0], after_bwd, m[1], B, T, 3);
    check(same, "%s: AdamW in backward gives the weights and losses of AdamW "
          "after it, bit for bit, over 3 steps", cases[i].n);
    if (after_bwd) engine_destroy(after_bwd);
    for (int k = 0; k < 2; k++) model_destroy(m[k]);
  }
}

/* Backward with its updates as a CUDA graph (each update reads its step
 * size from engine memory, written before the replay), the updates on
 * backward's stream (adamw_serial) or beside it on the side stream
 * (forked and joined inside the recording): 4 steps, forward and
 * backward recorded at the second and launched from it, give the weights
 * and losses of AdamW after a graphed backward bit for bit (fp32 and
 * bf16, materialised attention: Hopper's flash backward sums dq in any
 * order); with bf16 weight gradients (grad_lt), those of the same form
 * unrecorded. */
static void test_adamw_graphed(engine *gpu, const model_config *tiny, int B,
                               int T) {
  model_config c = *tiny;
  c.layers = 5;
  adamw_config a = adamw_defaults();
  static const struct { dtype t; int serial, lt_grads; } cases[] = {
      {DT_BF16, 1, 0}, {DT_F32, 1, 0}, {DT_BF16, 1, 1},
      {DT_BF16, 0, 0}, {DT_F32, 0, 0}, {DT_BF16, 0, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    dtype t = cases[k].t;
    int lt_grads = cases[k].lt_grads;
    model_options ref = {.compute = t, .fused = 1,
                         .attention = ATTN_MATERIALIZED, .f32 = F32_EXACT,
                         .graphs = !lt_grads};
    if (lt_grads) {
      ref.grad_slots = ref.grad_lt = 1;
      ref.adamw_serial = cases[k].serial;
    }
    model_options og = ref;
    og.graphs = 1;
    og.grad_slots = 1;
    og.adamw_serial = cases[k].serial;
    model *m[2];
    for (int j = 0; j < 2; j++) {
      hard(model_create_ex(&m[j], gpu, &c, B, T, j ? &og : &ref),
           "model_create_ex");
      hard(model_init(m[j], 13), "model_init");
    }
    char what[160];
    snprintf(what, sizeof what, "%s%s, AdamW %s, graphed", dtype_name(t),
             lt_grads ? ", bf16 weight gradients" : "",
             cases[k].serial ? "in backward's order" : "beside backward");
    int same = 1;
    size_t n = model_nparams(m[0]);
    int32_t *ids = tl_malloc(2 * (size_t)B * T * sizeof *ids);
    int32_t *tg = ids + B * T;
    for (int step = 0; step < 4; step++) {
      fresh_batch(ids, tg, B * T, c.vocab);
      float loss[2];
      for (int j = 0; j < 2; j++) {
        hard(model_zero_grad(m[j]), "zero_grad");
        hard(model_forward(m[j], ids, tg, B, T, &loss[j]), "forward");
        if (j == 0 && !lt_grads) {
          hard(model_backward(m[j]), "backward");
          hard(model_adamw_step(m[j], &a), "adamw");
        } else {
          hard(model_backward_adamw(m[j], &a), "backward_adamw");
        }
      }
      float *w0 = host_floats(gpu, model_params(m[0]), n);
      float *w1 = host_floats(gpu, model_params(m[1]), n);
      same &= memcmp(&loss[0], &loss[1], sizeof *loss) == 0 &&
              memcmp(w0, w1, n * sizeof *w0) == 0;
      free(w0);
      free(w1);
    }
    free(ids);
    long long r0 = model_graph_replays(m[0]), r1 = model_graph_replays(m[1]);
    check(same && r1 == 6, "%s: %s, bit for bit over 4 steps; forward and "
          "backward launched as graphs from the second step, 6 launches "
          "(%lld; %s %lld)", what,
          lt_grads ? "the weights and losses of the same form unrecorded"
                   : "the weights and losses of AdamW after a graphed backward",
          r1, lt_grads ? "unrecorded" : "after backward", r0);
    for (int j = 0; j < 2; j++) model_destroy(m[j]);
  }
}

/* Activation checkpointing (model_options.ckpt_layers) on the GPU, 5
 * layers in groups of 2 (the last group one layer): the same losses,
 * gradients and weights as without it, bit for bit over 3 steps, in bf16
 * and fp32, flash and materialised, keeping attention's output or not
 * (ckpt_keep_attn), with CUDA graphs (backward's rebuild is recorded with
 * it); and with AdamW in backward on gradient slots against AdamW after
 * backward without checkpoints. */
static void test_checkpointing(engine *gpu, const model_config *tiny, int B,
                               int T) {
  model_config c = *tiny;
  c.layers = 5;
  static const struct {
    dtype t; attn_impl a; int graphs, keep; const char *n;
  } cases[] = {{DT_BF16, ATTN_FLASH, 0, 0, "bf16 flash"},
               {DT_BF16, ATTN_FLASH, 1, 0, "bf16 flash, CUDA graphs"},
               {DT_BF16, ATTN_FLASH, 0, 1, "bf16 flash, attention kept"},
               {DT_BF16, ATTN_FLASH, 1, 1,
                "bf16 flash, attention kept, CUDA graphs"},
               {DT_BF16, ATTN_MATERIALIZED, 0, 0, "bf16 materialized"},
               {DT_F32, ATTN_FLASH, 0, 0, "fp32 flash"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_options o = {.compute = cases[i].t, .fused = 1,
                       .attention = cases[i].a, .f32 = F32_EXACT,
                       .graphs = cases[i].graphs};
    model_options oc = o;
    oc.ckpt_layers = 2;
    oc.ckpt_keep_attn = cases[i].keep;
    for (int slots = 0; slots < 2; slots++) {
      oc.grad_slots = slots;
      model *m[2];
      for (int k = 0; k < 2; k++) {
        hard(model_create_ex(&m[k], gpu, &c, B, T, k ? &oc : &o),
             "model_create_ex");
        hard(model_init(m[k], 11), "model_init");
      }
      if (slots) {
        check(adamw_forms_agree(m[0], m[1], B, T, 3),
              "%s, checkpoint groups of 2 of 5 layers, AdamW in backward on "
              "gradient slots: the weights and losses of AdamW after "
              "backward without checkpoints, bit for bit, over 3 steps",
              cases[i].n);
      } else {
        const char *differs;
        int agree = training_agrees(m[0], m[1], B, T, 3, &differs);
        check(agree, "%s, checkpoint groups of 2 of 5 layers: losses, "
              "gradients and weights bit for bit over 3 steps%s%s",
              cases[i].n, *differs ? "; differ: " : "", differs);
      }
      for (int k = 0; k < 2; k++) model_destroy(m[k]);
    }
  }
}

/* The optimizer in the products (model_options.adamw_in_products,
 * k_matmul_adamw) on the GPU, bf16 fused, 5 layers: one step from the same
 * weights on the same batch as AdamW after backward. Forward is the same;
 * each weight gradient is the same sum in another order (~1e-6 of itself),
 * and AdamW's first step moves each weight by lr * g / (|g| + eps), so a
 * weight may differ by up to 2 lr only where g is ~1e-6 of its terms:
 * allowed for at most 1 in 1000 weights, the rest within 1e-3 lr. The
 * next forward (which reads the 16-bit copy the products refreshed) gives
 * the same loss within 1e-4.
 * grad_lt: instead AdamW in backward with bf16 weight gradients
 * (model_options.grad_lt) against AdamW after backward on gradients
 * rounded to bf16: the same test, as cuBLASLt may sum a product with a
 * bf16 output in another order than the fp32 one (the CPU engine's test
 * holds them to the same bits). */
static void test_adamw_in_products(engine *gpu, const model_config *tiny,
                                   int B, int T, int grad_lt) {
  model_config c = *tiny;
  c.layers = 5;
  model_options opt = {.compute = DT_BF16, .fused = 1,
                       .attention = ATTN_MATERIALIZED, .f32 = F32_EXACT};
  model_options op = opt;
  op.grad_slots = 1;
  op.adamw_in_products = !grad_lt;
  op.grad_lt = grad_lt;
  const char *form = grad_lt ? "AdamW in backward on bf16 weight gradients"
                             : "AdamW in the weight-gradient products";
  model *m[2];
  for (int k = 0; k < 2; k++) {
    hard(model_create_ex(&m[k], gpu, &c, B, T, k ? &op : &opt),
         "model_create_ex");
    hard(model_init(m[k], 7), "model_init");
  }
  adamw_config a = adamw_defaults();
  int32_t *ids = tl_malloc(2 * (size_t)B * T * sizeof *ids), *tg = ids + B * T;
  for (int i = 0; i < B * T; i++) {
    ids[i] = (int32_t)(next_u64() % (uint64_t)c.vocab);
    tg[i] = (int32_t)(next_u64() % (uint64_t)c.vocab);
  }
  float loss[2][2];
  for (int k = 0; k < 2; k++) {
    hard(model_zero_grad(m[k]), "zero_grad");
    hard(model_forward(m[k], ids, tg, B, T, &loss[k][0]), "forward");
    if (k == 0) {
      hard(model_backward(m[k]), "backward");
      if (grad_lt) round_weight_grads(m[k], DT_BF16, 0);
      hard(model_adamw_step(m[k], &a), "adamw");
    } else {
      hard(model_backward_adamw(m[k], &a), "backward_adamw");
    }
    hard(model_forward(m[k], ids, tg, B, T, &loss[k][1]), "forward");
  }
  size_t n = model_nparams(m[0]), far = 0, mid = 0;
  float *w[2];
  for (int k = 0; k < 2; k++) {
    w[k] = tl_malloc(n * sizeof *w[k]);
    hard(eng_download(gpu, w[k], model_params(m[k]), n * sizeof *w[k]),
         "eng_download");
  }
  hard(eng_sync(gpu), "eng_sync");
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)w[0][i] - w[1][i]);
    if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
    far += d > 1e-3 * a.lr;
    mid += d > 1e-6 * a.lr;
  }
  check(loss[0][0] == loss[1][0] && far <= n / 1000 && worst <= 2.01 * a.lr,
        "bf16 fused: %s, one step: the same loss (%.6f, %.6f); %zu of %zu "
        "weights differ by more than 1e-3 lr (at most 1 in 1000), %zu by "
        "more than 1e-6 lr; worst %.2e (at most 2 lr)", form, loss[0][0],
        loss[1][0], far, n, mid, worst);
  double rel = fabs((double)loss[0][1] - loss[1][1]) / fabs(loss[0][1]);
  check(rel <= 1e-4 && loss[1][1] != loss[1][0],
        "bf16 fused: %s: after the step, forward reads the refreshed 16-bit "
        "copy: loss %.6f (after backward's form %.6f, before the step "
        "%.6f)", form, loss[1][1], loss[0][1], loss[1][0]);
  for (int k = 0; k < 2; k++) {
    free(w[k]);
    model_destroy(m[k]);
  }
  free(ids);
}

/* The head in chunks (model_options.head_chunk) on the GPU, fused flash,
 * 5 layers, a third of the batch's tokens a chunk (the last shorter),
 * against the whole head from the same weights on the same batch, a
 * step with AdamW after backward, bf16 and fp32, directly and with CUDA
 * graphs (a second step, replayed): the loss to 1e-5, every gradient to tol of the largest (a
 * chunk's products may round differently from the whole batch's, and the
 * head's weight gradient adds the chunks in turn), and the weights as
 * test_adamw_in_products judges them (AdamW's first step moves a weight
 * by about lr whatever its gradient's size: at most 2 lr apart, at most 1
 * in 1000 by more than 1e-3 lr). */
static void test_head_chunk(engine *gpu, const model_config *tiny, int B,
                            int T) {
  model_config c = *tiny;
  c.layers = 5;
  const int N = B * T, R = N / 3 + 1;
  static const struct { dtype t; int graphs; double tol; const char *n; }
      cases[] = {{DT_BF16, 0, 2e-2, "bf16"},
                 {DT_BF16, 1, 2e-2, "bf16, CUDA graphs"},
                 {DT_F32, 0, 1e-4, "fp32"}};
  int32_t *ids = tl_malloc(2 * (size_t)N * sizeof *ids), *tg = ids + N;
  fresh_batch(ids, tg, N, c.vocab);
  adamw_config a = adamw_defaults();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_options o = {.compute = cases[i].t, .fused = 1,
                       .attention = ATTN_FLASH, .f32 = F32_EXACT,
                       .graphs = cases[i].graphs};
    model_options oc = o;
    oc.head_chunk = R;
    model *m[2];
    float loss[2], *g[2], *w[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
      hard(model_create_ex(&m[k], gpu, &c, B, T, k ? &oc : &o),
           "model_create_ex");
      hard(model_init(m[k], 5), "model_init");
      n = model_nparams(m[k]);
      for (int s = 0; s < 1 + cases[i].graphs; s++) {   /* graphs: replayed */
        hard(model_zero_grad(m[k]), "zero_grad");
        hard(model_forward(m[k], ids, tg, B, T, &loss[k]), "forward");
        hard(model_backward(m[k]), "backward");
        if (s == cases[i].graphs) g[k] = host_floats(gpu, model_grads(m[k]), n);
        hard(model_adamw_step(m[k], &a), "adamw");
      }
      w[k] = host_floats(gpu, model_params(m[k]), n);
    }
    check(fabsf(loss[1] - loss[0]) <= 1e-5f * fabsf(loss[0]) &&
              model_logits(m[1]) == NULL,
          "%s, head in chunks of %d of %d tokens: loss %.7f, whole %.7f; no "
          "logits to read", cases[i].n, R, N, loss[1], loss[0]);
    char what[128];
    snprintf(what, sizeof what, "%s, head in chunks of %d: the gradients",
             cases[i].n, R);
    tl_compare(what, g[1], g[0], n, cases[i].tol);
    size_t far = 0;
    double worst = 0;
    for (size_t j = 0; j < n; j++) {
      double d = fabs((double)w[0][j] - w[1][j]);
      if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
      far += d > 1e-3 * a.lr;
    }
    const int steps = 1 + cases[i].graphs;
    check(far <= n / 1000 && worst <= 2.01 * steps * a.lr,
          "%s, head in chunks of %d: the weights after %d step(s), %zu of "
          "%zu more than 1e-3 lr apart (at most 1 in 1000), worst %.2e (at "
          "most 2 lr a step)", cases[i].n, R, steps, far, n, worst);
    for (int k = 0; k < 2; k++) {
      free(g[k]);
      free(w[k]);
      model_destroy(m[k]);
    }
  }
  free(ids);
}

/* The model with LayerNorm (model_config.norm; op by op only) on the GPU
 * against the CPU engine: fresh random weights with the norms' weights
 * away from 1 (1 +- [0.1, 0.5)) and their biases away from 0 (+-[0.1,
 * 0.5)), a fresh batch; loss, logits, every gradient (the biases' too) and
 * the weights after one AdamW step, fp32 and bf16 with the tolerances
 * above. Then on the GPU: the optimizer in backward against AdamW after
 * it, bit for bit, and CUDA graphs against the direct run, as for RMSNorm.
 * The fused path refuses LayerNorm (test_model). */
static void test_layernorm(engine *cpu, engine *gpu, int B, int T) {
  model_config c;
  model_config_by_name("tiny", &c);
  c.heads = 2;
  c.norm = NORM_LAYER;
  float *w;
  model *init = initial_model(cpu, &c, B, T, 2024, &w);
  size_t np = model_nparams(init);
  int nv;
  const tensor_view *v = model_views(init, &nv);
  for (int i = 0; i < nv; i++) {
    if (v[i].ndim != 1) continue;
    size_t len = strlen(v[i].name);
    int bias = len >= 5 && strcmp(v[i].name + len - 5, ".bias") == 0;
    for (size_t j = 0; j < v[i].numel; j++) {
      uint64_t r = next_u64();
      float mag = 0.1f + 0.4f * (float)((r >> 11) & 0xffff) / 65536.0f;
      float x = (r & 1) ? mag : -mag;
      w[v[i].offset + j] = bias ? x : 1.0f + x;
    }
  }
  int32_t ids[B * T], tg[B * T];
  fresh_batch(ids, tg, B * T, c.vocab);

  run_out ref;
  run(cpu, &c, w, np, ids, tg, B, T, DT_F32, &ref);
  const struct { dtype t; double tol; } precisions[] = {{DT_F32, 1e-4},
                                                        {DT_BF16, 3e-2}};
  for (size_t p = 0; p < sizeof precisions / sizeof precisions[0]; p++) {
    run_out o;
    run(gpu, &c, w, np, ids, tg, B, T, precisions[p].t, &o);
    char pn[64];
    snprintf(pn, sizeof pn, "layernorm %s", dtype_name(precisions[p].t));
    compare_runs(pn, &o, &ref, v, nv, (size_t)B * T * c.vocab, np,
                 precisions[p].tol, precisions[p].t == DT_F32 ? 1e-5 : 0);
    free_out(&o);
  }
  free_out(&ref);

  model_options opt = {.compute = DT_F32, .attention = ATTN_MATERIALIZED,
                       .f32 = F32_EXACT};
  model *m[2];
  for (int k = 0; k < 2; k++) {
    hard(model_create_ex(&m[k], gpu, &c, B, T, &opt), "model_create_ex");
    hard(model_set_params(m[k], 0, w, np), "model_set_params");
  }
  check(adamw_forms_agree(m[0], m[1], B, T, 3),
        "layernorm fp32 op by op: AdamW in backward gives the weights and "
        "losses of AdamW after it, bit for bit, over 3 steps");
  for (int k = 0; k < 2; k++) model_destroy(m[k]);

  float l0[GRAPH_STEPS], l1[GRAPH_STEPS];
  long long r0, r1;
  float *p0 = train(gpu, &c, w, np, B, T, &opt, l0, &r0);
  opt.graphs = 1;
  float *p1 = train(gpu, &c, w, np, B, T, &opt, l1, &r1);
  double worst = 0;
  for (int k = 0; k < GRAPH_STEPS; k++)
    worst = fmax(worst, fabs((double)l1[k] - l0[k]) / fabs(l0[k]));
  check(worst <= 1e-6 && r0 == 0 && r1 == 8,
        "layernorm graphs: %d steps' losses equal the direct run's (worst "
        "relative difference %.2e <= 1e-6), %lld replays (want 8)",
        GRAPH_STEPS, worst, r1);
  tl_compare("layernorm graphs: weights after the steps", p1, p0, np, 1e-5);
  free(p0);
  free(p1);
  free(w);
  model_destroy(init);
}

/* A checkpoint of another model (another seed, gains away from 1) loaded
 * into a fused 16-bit model that has trained, so its 16-bit weight copy
 * exists, was read by forward and backward and rewritten by AdamW: on a
 * fresh batch, logits and every gradient must be those of the loaded
 * weights. References: the CPU engine's fp32 op-by-op model and the GPU's
 * op-by-op model in the same precision, each having loaded the same file,
 * to the tolerances above (3e-2 bf16, 1e-2 fp16: against op-by-op too,
 * which rounds the same products' inputs at other points). A stale copy
 * computes with the trained weights instead (relative error about 1).
 * Also with CUDA graphs (the forward replayed after the load: the copy
 * must not be refreshed inside a recording) and with the checkpoint's
 * values written through model_params_writable instead of loaded, as data
 * parallelism writes them. */
static void test_load_after_training(engine *cpu, engine *gpu,
                                     const model_config *c, const float *w0,
                                     size_t np, int B, int T) {
  char dir[512], path[600];
  float *w = other_checkpoint(cpu, c, B, T, "test_model_cuda", dir,
                              sizeof dir, path, sizeof path);

  int32_t ids[B * T], tg[B * T];
  fresh_batch(ids, tg, B * T, c->vocab);
  const size_t nl = (size_t)B * T * c->vocab;
  fb_out ref;
  model *r;
  hard(model_create(&r, cpu, c, B, T, DT_F32), "model_create");
  hard(st_load_model(r, path), "st_load_model");
  fwd_bwd(r, ids, tg, B, T, &ref);
  model_destroy(r);

  enum { LOAD, WRITABLE };
  const struct { dtype t; attn_impl a; int graphs, how; double tol; } cases[] = {
      {DT_BF16, ATTN_FLASH, 0, LOAD, 3e-2},
      {DT_BF16, ATTN_MATERIALIZED, 0, LOAD, 3e-2},
      {DT_BF16, ATTN_FLASH, 1, LOAD, 3e-2},
      {DT_BF16, ATTN_FLASH, 0, WRITABLE, 3e-2},
      {DT_F16, ATTN_FLASH, 0, LOAD, 1e-2}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fb_out op, o;
    model_options oo = {.compute = cases[k].t,
                        .attention = ATTN_MATERIALIZED, .f32 = F32_EXACT};
    model *m;
    hard(model_create_ex(&m, gpu, c, B, T, &oo), "model_create_ex");
    hard(st_load_model(m, path), "st_load_model");
    fwd_bwd(m, ids, tg, B, T, &op);
    model_destroy(m);

    model_options fo = {.compute = cases[k].t, .fused = 1,
                        .attention = cases[k].a, .f32 = F32_EXACT,
                        .graphs = cases[k].graphs};
    hard(model_create_ex(&m, gpu, c, B, T, &fo), "model_create_ex");
    hard(model_set_params(m, 0, w0, np), "model_set_params");
    /* with graphs: steps 2 and 3 replay, so forward after the load does */
    int steps = cases[k].graphs ? 3 : 1;
    adamw_config a = adamw_defaults();
    for (int s = 0; s < steps; s++) {
      int32_t bi[B * T], bt[B * T];
      fresh_batch(bi, bt, B * T, c->vocab);
      float loss;
      hard(model_zero_grad(m), "zero_grad");
      hard(model_forward(m, bi, bt, B, T, &loss), "forward");
      hard(model_backward(m), "backward");
      hard(model_adamw_step(m, &a), "adamw");
    }
    if (cases[k].how == LOAD) {
      hard(st_load_model(m, path), "st_load_model");
    } else {
      hard(eng_upload(gpu, model_params_writable(m), w, np * sizeof *w),
           "upload");
      hard(eng_sync(gpu), "sync");
    }
    long long replays = model_graph_replays(m);
    fwd_bwd(m, ids, tg, B, T, &o);
    int nv;
    const tensor_view *v = model_views(m, &nv);
    char pn[128], what[200];
    snprintf(pn, sizeof pn, "fused %s %s%s, trained then %s",
             dtype_name(cases[k].t),
             cases[k].a == ATTN_FLASH ? "flash" : "materialized",
             cases[k].graphs ? " (graphs)" : "",
             cases[k].how == LOAD ? "loaded"
                                  : "written through model_params_writable");
    if (cases[k].graphs)
      check(model_graph_replays(m) - replays == 2, "%s: forward and "
            "backward replayed (%lld replays, want 2)", pn,
            model_graph_replays(m) - replays);
    double tol = cases[k].tol;
    snprintf(what, sizeof what, "%s: logits vs cpu fp32", pn);
    tl_compare(what, o.logits, ref.logits, nl, tol);
    snprintf(what, sizeof what, "%s: logits vs op-by-op %s", pn,
             dtype_name(cases[k].t));
    tl_compare(what, o.logits, op.logits, nl, tol);
    for (int i = 0; i < nv; i++) {
      snprintf(what, sizeof what, "%s: grad %s vs cpu fp32", pn, v[i].name);
      tl_compare(what, o.grads + v[i].offset, ref.grads + v[i].offset,
                 v[i].numel, tol);
      snprintf(what, sizeof what, "%s: grad %s vs op-by-op %s", pn,
               v[i].name, dtype_name(cases[k].t));
      tl_compare(what, o.grads + v[i].offset, op.grads + v[i].offset,
                 v[i].numel, tol);
    }
    model_destroy(m);
    free(op.logits); free(op.grads); free(o.logits); free(o.grads);
  }
  free(ref.logits); free(ref.grads);
  free(w);
  if (unlink(path) != 0 || rmdir(dir) != 0)
    fprintf(stderr, "test_model_cuda: note: could not remove %s: %s\n", dir,
            strerror(errno));
}
#endif /* HAVE_CUDA */

int main(int argc, char **argv) {
  int small_only = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--small") == 0) small_only = 1;
    else {
      fprintf(stderr, "usage: %s [--small]\n", argv[0]);
      return 99;
    }
  }
#ifndef HAVE_CUDA
  (void)small_only;
  printf("built without CUDA: nothing to test\n");
  return 77;
#else
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    printf("no GPU: skipped\n");
    return 77;
  }
  engine *cpu, *gpu;
  hard(engine_cpu_create(&cpu, 0), "engine_cpu_create");
  hard(engine_cuda_create(&gpu, 0), "engine_cuda_create");

  model_config c;
  model_config_by_name("tiny", &c);
  c.heads = 2;   /* d_head 16: the GPU flash kernels take 16, 32, 64, 80, 128 */
  const int B = 3, T = 17;
  float *w;
  model *init = initial_model(cpu, &c, B, T, 336, &w);
  size_t np = model_nparams(init);
  int nv;
  const tensor_view *v = model_views(init, &nv);
  int32_t ids[B * T], tg[B * T];
  unsigned s = 12345;
  for (int i = 0; i < B * T; i++) {
    s = s * 1103515245u + 12345u; ids[i] = (int32_t)((s >> 8) % (unsigned)c.vocab);
    s = s * 1103515245u + 12345u; tg[i] = (int32_t)((s >> 8) % (unsigned)c.vocab);
  }

  run_out ref;
  run(cpu, &c, w, np, ids, tg, B, T, DT_F32, &ref);
  /* 3xTF32 is held to true fp32's tolerances. */
  const struct { dtype t; f32_products f32; double tol; } precisions[] = {
      {DT_F32, F32_EXACT, 1e-4}, {DT_F32, F32_3XTF32, 1e-4},
      {DT_BF16, F32_EXACT, 3e-2}, {DT_F16, F32_EXACT, 1e-2}};
  for (int p = 0; p < 4; p++) {
    run_out o;
    model_options opt = {.compute = precisions[p].t,
                         .attention = ATTN_MATERIALIZED,
                         .f32 = precisions[p].f32};
    run_ex(gpu, &c, w, np, ids, tg, B, T, &opt, &o);
    const char *pn = precisions[p].f32 == F32_3XTF32
                         ? "f32 (3xtf32)"
                         : dtype_name(precisions[p].t);
    compare_runs(pn, &o, &ref, v, nv, (size_t)B * T * c.vocab, np,
                 precisions[p].tol, precisions[p].t == DT_F32 ? 1e-5 : 0);
    free_out(&o);
  }
  /* The fused path (attention materialised and flash; TF32 too) against
   * the CPU engine's op-by-op reference with the same tolerances, and the
   * fused fp32 path against the op-by-op fp32 path on the GPU. */
  run_out gref;
  run(gpu, &c, w, np, ids, tg, B, T, DT_F32, &gref);
  const struct { dtype t; attn_impl a; f32_products f32; double tol; } fused[] = {
      {DT_F32, ATTN_MATERIALIZED, F32_EXACT, 1e-4},
      {DT_F32, ATTN_FLASH, F32_EXACT, 1e-4},
      {DT_BF16, ATTN_MATERIALIZED, F32_EXACT, 3e-2},
      {DT_BF16, ATTN_FLASH, F32_EXACT, 3e-2},
      {DT_F16, ATTN_FLASH, F32_EXACT, 1e-2},
      {DT_F32, ATTN_FLASH, F32_TF32, 1e-2},
      {DT_F32, ATTN_MATERIALIZED, F32_3XTF32, 1e-4},
      {DT_F32, ATTN_FLASH, F32_3XTF32, 1e-4}};
  for (size_t f = 0; f < sizeof fused / sizeof fused[0]; f++) {
    model_options opt = {.compute = fused[f].t, .fused = 1,
                         .attention = fused[f].a, .f32 = fused[f].f32};
    int exact = fused[f].t == DT_F32 && fused[f].f32 != F32_TF32;
    run_out o;
    run_ex(gpu, &c, w, np, ids, tg, B, T, &opt, &o);
    char pn[64], what[200];
    snprintf(pn, sizeof pn, "fused %s%s %s", dtype_name(fused[f].t),
             fused[f].f32 == F32_TF32     ? "+tf32"
             : fused[f].f32 == F32_3XTF32 ? "+3xtf32"
                                          : "",
             fused[f].a == ATTN_FLASH ? "flash" : "materialized");
    compare_runs(pn, &o, &ref, v, nv, (size_t)B * T * c.vocab, np,
                 fused[f].tol, exact ? 1e-5 : 1e-3);
    if (exact) {
      snprintf(what, sizeof what, "%s grads vs op-by-op fp32 on the GPU", pn);
      tl_compare(what, o.grads, gref.grads, np, 1e-4);
    }
    free_out(&o);
  }
  free_out(&gref);
  if (!small_only) {
    test_graphs(gpu, &c, w, np, B, T);
    test_repeats(gpu, &c, w, np, B, T);
  }
  test_load_after_training(cpu, gpu, &c, w, np, B, T);
  test_adamw_in_backward(gpu, &c, B, T);
  test_adamw_graphed(gpu, &c, B, T);
  test_adamw_in_products(gpu, &c, B, T, 0);
  test_adamw_in_products(gpu, &c, B, T, 1);
  test_checkpointing(gpu, &c, B, T);
  test_head_chunk(gpu, &c, B, T);
  test_layernorm(cpu, gpu, B, T);

  free_out(&ref);
  model_destroy(init);
  free(w);

  /* The PyTorch fixture on the CUDA engine (the fixture's tiny: 4 heads). */
  model_config_by_name("tiny", &c);
  const char *top = getenv("top_srcdir");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/fixture_tiny_state_dict.safetensors",
           top && top[0] ? top : ".");
  char fpath[4096];
  snprintf(fpath, sizeof fpath, "%s/tests/data/fixture_tiny.safetensors",
           top && top[0] ? top : ".");
  if (access(path, R_OK) != 0 || access(fpath, R_OK) != 0) {
    fprintf(stderr, "test_model_cuda: fixture missing under %s/tests/data\n",
            top && top[0] ? top : ".");
    return 99;
  }
  st_file *f;
  hard(st_open(&f, fpath), "open fixture");
  int32_t *fids, *ftg;
  size_t n;
  hard(st_read_i32(f, "input_ids", &fids, &n), "input_ids");
  hard(st_read_i32(f, "targets", &ftg, &n), "targets");
  const st_tensor *ti = st_find(f, "input_ids");
  int fb = (int)ti->shape[0], ft = (int)ti->shape[1];
  model *m;
  hard(model_create(&m, gpu, &c, fb, ft, DT_F32), "model_create");
  hard(st_load_model(m, path), "load the PyTorch state_dict");
  float loss;
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, fids, ftg, fb, ft, &loss), "forward");
  size_t nl = (size_t)fb * ft * c.vocab;
  float *lg = host_floats(gpu, model_logits(m), nl);
  double *ref64;
  hard(st_read_f64(f, "logits", &ref64, &n), "logits");
  float *ref32 = malloc(n * sizeof *ref32);
  for (size_t i = 0; i < n; i++) ref32[i] = (float)ref64[i];
  tl_compare("fixture logits on the CUDA engine", lg, ref32, nl, 1e-4);
  free(ref64); free(ref32); free(lg);
  hard(model_backward(m), "backward");
  float *g = host_floats(gpu, model_grads(m), model_nparams(m));
  const tensor_view *mv = model_views(m, &nv);
  for (int i = 0; i < nv; i++) {
    char name[160];
    snprintf(name, sizeof name, "grad.%s", mv[i].name);
    hard(st_read_f64(f, name, &ref64, &n), "gradient");
    ref32 = malloc(n * sizeof *ref32);
    for (size_t k = 0; k < n; k++) ref32[k] = (float)ref64[k];
    snprintf(name, sizeof name, "fixture grad.%s on the CUDA engine", mv[i].name);
    tl_compare(name, g + mv[i].offset, ref32, n, 1e-4);
    free(ref64); free(ref32);
  }
  free(g); free(fids); free(ftg);
  model_destroy(m);
  st_close(f);
  engine_destroy(gpu);
  engine_destroy(cpu);
  return tl_finish();
#endif
}
