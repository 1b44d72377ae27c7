/* Fully sharded data parallelism (parallel/fsdp.h) against single-process
 * training:
 *
 *   mpirun -np W tests/test_fsdp [mpi|nccl]
 *
 * mpi: CPU engine on each rank, nccl: CUDA engine + NCCL, one GPU per
 * rank (exit 77 without); both in fp32, bf16 and fp16 (the CPU engine
 * stores 16-bit operands narrower: kernels/cpu/cpu.h) (the course's test
 * takes fp16 compute; AdamW after backward only, as its loss scaling
 * needs every gradient first).
 *
 * Model: an LM with awkward sizes (vocab 211, d_model 10, d_ff 21, 3
 * layers, 1 head: groups of 2110 and 1030 elements) so every group's last
 * chunk is padded on 3 and 4 ranks, and the embedding and head are larger
 * than a layer, as with a real vocabulary, so the window mixes slot sizes
 * (on GPUs d_model 32, 2 heads, d_ff 48, for the kernels' head dims and
 * alignment: a bf16 layer is then smaller than the fp32 embedding); fused path, flash and
 * materialised attention, with no checkpoints and with groups of 1 and 2
 * layers (the window then holds 3 and 4 groups; groups of 1 with the head
 * in chunks of 7 tokens, groups of 2 with flash keeping each layer's
 * attention output for the reruns), AdamW after backward and
 * in it; with flash, also every group kept gathered from forward to
 * backward (FSDP2's reshard_after_forward = False: one gather a group a
 * step); on CPU ranks also those kept-gathered cases in bf16 at vocab 61,
 * where the bf16 head fits a layer's slot and the fp32 embedding does not. Global batch 12 sequences of 8 tokens, rank r takes sequences
 * [r*12/W, (r+1)*12/W); 3 AdamW steps on fresh random batches, each
 * rank's weights drawn by fsdp_create from the seed as its own shard.
 *
 * Checks, per case:
 * - the weights fsdp_gather_full_params returns are bit for bit the same
 *   on every rank;
 * - they equal the single-process weights (the model's own buffers and
 *   AdamW, the whole batch, same seed): on one CPU rank bit for bit (the
 *   same kernels on the same bytes), else to 1e-6 absolute (bf16: 2e-4),
 *   as tests/test_ddp.c explains: only the order of the sums behind each
 *   gradient differs. On GPUs each engine times its own choice of
 *   cuBLASLt algorithm per product shape (kernels/cuda/matmul_lt.c), so
 *   two engines' runs differ in the last bits: fp32 there takes 2e-5.
 *   AdamW's eps is 1e-3 (adamw_comparable says why);
 * - the model holds no weight matrix: its "params" tag is the gains alone;
 * - the gains' (replicated) gradients are bit for bit the same on every
 *   rank after each backward (the handout's test_fsdp_gradient_sync);
 * - each step gathers every group at least once;
 * - on CPU ranks, AdamW in backward leaves the weights of AdamW after
 *   backward bit for bit.
 * The model itself refuses what needs its own weights with bound weights
 * (model_set_params, its AdamW), and a pass with no weight hook. On GPUs,
 * fp16's skipped step: a gradient that is not finite on one rank leaves
 * every rank's weights as they were and halves every rank's loss scale. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective/comm.h"
#include "common/check.h"
#include "model/model.h"
#include "parallel/fsdp.h"
#include "tests/rank_helpers.h"
#include "tests/testlib.h"

#ifdef HAVE_MPI
#include <mpi.h>
#endif

enum { B = 12, T = 8, STEPS = 3 };
static const uint64_t SEED = 4321;

typedef struct {
  comm *c;
  comm_backend backend;
  int rank, world;
  model_config cfg;
  int32_t ids[STEPS][B * T], tgt[STEPS][B * T];
  float *after;          /* the last after-backward case's weights */
} ctx;

/* With a checkpoint a layer, the head in chunks of 7 tokens too (the
 * reference's as well: its weights bound around the chunks' products). */
static model_options options(dtype prec, attn_impl a, int ckpt, int bound) {
  model_options o = {.compute = prec, .fused = 1, .attention = a,
                     .f32 = F32_EXACT, .ckpt_layers = ckpt,
                     .head_chunk = ckpt == 1 ? 7 : 0,
                     .bound_weights = bound};
  return o;
}

/* The single-process weights after STEPS on the whole batch. */
static float *reference(ctx *x, const model_options *o, size_t *n) {
  engine *e;
  model *m;
  hard(rank_engine(x->c, &e), "engine");
  hard(model_create_ex(&m, e, &x->cfg, B, T, o), "model_create_ex");
  hard(model_init(m, SEED), "model_init");
  adamw_config hp = adamw_comparable();
  for (int s = 0; s < STEPS; s++) {
    float loss;
    hard(model_zero_grad(m), "zero_grad");
    hard(model_forward(m, x->ids[s], x->tgt[s], B, T, &loss), "forward");
    hard(model_backward(m), "backward");
    hard(model_adamw_step(m, &hp), "adamw");
  }
  *n = model_nparams(m);
  float *w = malloc(*n * sizeof(float));
  if (!w) hard(ERR_OOM, "reference weights");
  hard(eng_download(e, w, model_params(m), *n * sizeof(float)), "download");
  hard(eng_sync(e), "sync");
  model_destroy(m);
  engine_destroy(e);
  return w;
}

static void one_case(ctx *x, dtype prec, attn_impl a, int ckpt, int inb,
                     int keep) {
  char name[200];
  snprintf(name, sizeof name, "fsdp %s, %d ranks, %s, %s attention, %s, "
           "AdamW %s backward%s", x->backend == COMM_NCCL ? "nccl" : "mpi",
           x->world, dtype_name(prec),
           a == ATTN_FLASH ? "flash" : "materialised",
           ckpt ? (ckpt == 1 ? "a checkpoint a layer, the head in chunks"
                   : a == ATTN_FLASH ? "checkpoints every 2 layers keeping "
                                       "attention's output"
                                     : "checkpoints every 2 layers")
                : "no checkpoints", inb ? "in" : "after",
           keep ? ", kept gathered" : "");
  model_options ro = options(prec, a, ckpt, 0);
  size_t n;
  float *ref = reference(x, &ro, &n);

  engine *e;
  model *m;
  fsdp *f;
  const int b = B / x->world, r = x->rank;
  model_options fo = options(prec, a, ckpt, x->world);
  /* the reference reruns attention; the same bits either way */
  fo.ckpt_keep_attn = a == ATTN_FLASH && ckpt == 2;
  hard(rank_engine(x->c, &e), "engine");
  hard(model_create_ex(&m, e, &x->cfg, b, T, &fo), "model_create_ex bound");
  adamw_config hp = adamw_comparable();
  fsdp_options fopt = {.in_backward = inb, .keep_gathered = keep};
  hard(fsdp_create(&f, x->c, m, SEED, &hp, &fopt), "fsdp_create");
  int gathered_all = 1, gathered_once = 1, gains_differ = 0;
  size_t ng = model_group_numel(m, MODEL_NORMS);
  float *gg = malloc(ng * sizeof(float)), *gg0 = malloc(ng * sizeof(float));
  if (!gg || !gg0) hard(ERR_OOM, "gains' gradients");
  for (int s = 0; s < STEPS; s++) {
    float loss;
    hard(fsdp_begin_step(f), "begin_step");
    hard(model_forward(m, x->ids[s] + r * b * T, x->tgt[s] + r * b * T, b, T,
                       &loss), "forward");
    hard(model_backward(m), "backward");
    hard(fsdp_finish_gradient_synchronization(f), "finish");
    /* the handout's test_fsdp_gradient_sync: the replicated parameters'
     * gradients are the same on every rank */
    hard(eng_download(e, gg, model_norm_grads(m), ng * sizeof(float)),
         "download the gains' gradients");
    hard(eng_sync(e), "sync");
    memcpy(gg0, gg, ng * sizeof(float));
#ifdef HAVE_MPI
    MPI_Bcast(gg0, (int)ng, MPI_FLOAT, 0, MPI_COMM_WORLD);
#endif
    gains_differ |= any_rank(memcmp(gg, gg0, ng * sizeof(float)) != 0);
    hard(fsdp_optimizer_step(f), "optimizer_step");
    fsdp_info info;
    fsdp_info_get(f, &info);
    if (info.gathers < x->cfg.layers + 2) gathered_all = 0;
    if (info.gathers != x->cfg.layers + 2) gathered_once = 0;
  }
  hard(eng_sync(e), "sync");
  /* the last step's timeline: one interval per gather, one need per use,
   * in model_weight_uses' order */
  fsdp_timeline tl;
  fsdp_info fi;
  hard(fsdp_timeline_get(f, &tl), "timeline");
  fsdp_info_get(f, &fi);
  int seq[4 * 16], nseq = model_weight_uses(m, seq), tl_ok =
      tl.ngathers == fi.gathers && tl.nuses == nseq && tl.exposed_ms >= 0;
  for (int i = 0; i < tl.ngathers && tl_ok; i++)
    tl_ok = tl.end_ms[i] >= tl.start_ms[i] && tl.start_ms[i] >= 0;
  for (int u = 0; u < tl.nuses && tl_ok; u++)
    tl_ok = tl.use_group[u] == seq[u] && (u == 0 || tl.need_ms[u] >= tl.need_ms[u - 1]);
  float *w = malloc(n * sizeof(float)), *w0 = malloc(n * sizeof(float));
  if (!w || !w0) hard(ERR_OOM, "weights");
  hard(fsdp_gather_full_params(f, w), "gather_full_params");
  memcpy(w0, w, n * sizeof(float));
#ifdef HAVE_MPI
  MPI_Bcast(w0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
#endif
  double err = 0;
  size_t worst = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)w[i] - ref[i]);
    if (!(d <= err)) {
      err = d;
      worst = i;
    }
  }
  /* where the largest difference is, for a failure's message */
  int nv;
  const tensor_view *tv = model_views(m, &nv), *wv = tv;
  for (int k = 0; k < nv; k++)
    if (worst >= tv[k].offset && worst < tv[k].offset + tv[k].numel) wv = &tv[k];
  int ranks_differ = any_rank(memcmp(w, w0, n * sizeof(float)) != 0);
  /* the same case with AdamW after backward ran just before this one */
  int same_as_after = inb && x->after && memcmp(w, x->after, n * sizeof(float)) == 0;
  if (!inb) {
    free(x->after);
    x->after = malloc(n * sizeof(float));
    if (!x->after) hard(ERR_OOM, "weights");
    memcpy(x->after, w, n * sizeof(float));
  }
  double tol = prec != DT_F32 ? 2e-4   /* bf16 and fp16 */
               : x->backend == COMM_NCCL ? 2e-5
               : x->world == 1 ? 0.0 : 1e-6;
  size_t own = 0, gbytes = 0, gshard = 0;
  eng_tag_bytes(e, "params", &own, NULL);
  eng_tag_bytes(e, "grads", &gbytes, NULL);
  eng_tag_bytes(e, "fsdp.grads", &gshard, NULL);
  /* AdamW in backward: gradients in two slots (the model's whole groups,
   * then the shards they reduce-scatter to), the second for layers only,
   * the first for the head, the embedding and (two layers or more) the
   * other layers; the gains' gradients beside them */
  size_t sg[2] = {0, 0}, sc[2] = {0, 0};
  for (int g = -1; g <= x->cfg.layers; g++) {
    size_t c = model_group_chunk(m, g);
    int s = g >= 0 && g < x->cfg.layers && (x->cfg.layers - g) % 2;
    if ((size_t)x->world * c > sg[s]) sg[s] = (size_t)x->world * c;
    if (c > sc[s]) sc[s] = c;
  }
  size_t want_g = (sg[0] + sg[1] + model_group_numel(m, MODEL_NORMS)) * sizeof(float),
         want_s = (sc[0] + sc[1]) * sizeof(float);
  /* the window: two slots fit the largest group, the rest a layer */
  size_t big = 0, lay = 0;
  for (int g = -1; g <= x->cfg.layers; g++) {
    size_t bytes = (size_t)x->world * model_group_chunk(m, g) *
                   (g < 0 ? sizeof(float) : dtype_size(prec));
    if (bytes > big) big = bytes;
    if (g >= 0 && g < x->cfg.layers && bytes > lay) lay = bytes;
  }
  if (x->rank == 0) {
    check(!ranks_differ, "%s: every rank's gathered weights equal rank 0's "
          "bit for bit", name);
    check(err <= tol, "%s: weights match single-process training (max "
          "|diff| %.3g at %s[%zu]: %.7g, single-process %.7g; tolerance "
          "%.0e)", name, err, wv->name, worst - wv->offset, w[worst],
          ref[worst], tol);
    check(own == model_group_numel(m, MODEL_NORMS) * sizeof(float),
          "%s: the model holds the gains alone (%zu bytes)", name, own);
    check(gathered_all, "%s: every step gathers every group", name);
    if (keep)
      check(gathered_once && fi.window_groups == x->cfg.layers + 2,
            "%s: every step gathers each group once, into a window of a "
            "slot per group (%d)", name, fi.window_groups);
    /* one slot fits the embedding and the head in turn; kept gathered,
     * one each where it is larger than a layer (a 16-bit head beside the
     * fp32 embedding may not be) */
    int nbig = 0;
    for (int g = -1; g <= x->cfg.layers; g += x->cfg.layers + 1)
      nbig += (size_t)x->world * model_group_chunk(m, g) *
                  (g < 0 ? sizeof(float) : dtype_size(prec)) > lay;
    if (!keep && nbig > 1) nbig = 1;
    check(fi.window_bytes == nbig * big + (size_t)(fi.window_groups - nbig) * lay,
          "%s: the window is %d slot(s) of the largest group's %zu bytes "
          "and %d of a layer's %zu (%zu bytes)", name, nbig, big,
          fi.window_groups - nbig, lay, fi.window_bytes);
    if (inb)
      check(gbytes == want_g && gshard == want_s,
            "%s: gradients in a slot of %zu floats (the head's, the "
            "embedding's) and one of a layer's %zu, %zu bytes, and shards "
            "of %zu and %zu floats (%zu bytes)", name, sg[0], sg[1], gbytes,
            sc[0], sc[1], gshard);
    /* CPU ranks only: on GPUs two engines' runs of one form differ in
     * the last bits already (their products' algorithms) */
    if (inb && x->backend == COMM_MPI)
      check(same_as_after, "%s: the same weights as AdamW after backward, "
            "bit for bit", name);
    check(tl_ok, "%s: the last step's timeline has each gather's interval "
          "and each use's need in order (%d gathers, %d uses, %.3g ms "
          "waited)", name, tl.ngathers, tl.nuses, tl.exposed_ms);
    check(!gains_differ, "%s: the gains' gradients are the same on every "
          "rank after each backward", name);
  }
  free(gg);
  free(gg0);
  fsdp_destroy(f);
  model_destroy(m);
  engine_destroy(e);
  free(w);
  free(w0);
  free(ref);
}

/* fp16's dynamic loss scale under FSDP (GPUs): a step whose gradients are
 * not all finite is skipped on every rank (no weight moves, the scale
 * halves everywhere, the skip is counted) and the next step trains. The
 * middle one of 3 steps runs with rank 0's first gain at +Inf, so its
 * passes overflow; its gradients reach every rank's shard through the
 * reduce-scatter and the gains' all-reduce. */
static void fp16_skip(ctx *x) {
  engine *e;
  model *m;
  fsdp *f;
  const int b = B / x->world, r = x->rank;
  model_options o = options(DT_F16, ATTN_FLASH, 0, x->world);
  hard(rank_engine(x->c, &e), "engine");
  hard(model_create_ex(&m, e, &x->cfg, b, T, &o), "model_create_ex fp16 bound");
  adamw_config hp = adamw_comparable();
  fsdp_options fo = {0};
  hard(fsdp_create(&f, x->c, m, SEED, &hp, &fo), "fsdp_create fp16");
  size_t n = model_nparams(m);
  float *w[3];
  for (int i = 0; i < 3; i++)
    if (!(w[i] = malloc(n * sizeof(float)))) hard(ERR_OOM, "weights");
  float *gains = model_params_writable(m), gain0 = 0, inf = INFINITY, loss;
  float s0 = model_loss_scale(m);
  int scale_ok = 1, counted = 1;
  for (int s = 0; s < STEPS; s++) {
    if (s == 1) {
      hard(fsdp_gather_full_params(f, w[0]), "gather_full_params");
      if (r == 0) {
        hard(eng_download(e, &gain0, gains, sizeof(float)), "download a gain");
        hard(eng_sync(e), "sync");
        hard(eng_upload(e, gains, &inf, sizeof(float)), "poison the gain");
      }
    }
    hard(fsdp_begin_step(f), "begin_step");
    hard(model_forward(m, x->ids[s] + r * b * T, x->tgt[s] + r * b * T, b, T,
                       &loss), "forward");
    hard(model_backward(m), "backward");
    hard(fsdp_finish_gradient_synchronization(f), "finish");
    hard(fsdp_optimizer_step(f), "optimizer_step");
    if (s == 1) {
      if (r == 0) hard(eng_upload(e, gains, &gain0, sizeof(float)), "restore the gain");
      hard(fsdp_gather_full_params(f, w[1]), "gather_full_params");
      scale_ok = model_loss_scale(m) == s0 / 2;
      counted = model_skipped_steps(m) == 1;
    }
  }
  hard(fsdp_gather_full_params(f, w[2]), "gather_full_params");
  int moved = any_rank(memcmp(w[0], w[1], n * sizeof(float)) != 0);
  int stuck = any_rank(memcmp(w[1], w[2], n * sizeof(float)) == 0);
  int bad_scale = any_rank(!scale_ok), bad_count = any_rank(!counted);
  if (r == 0) {
    check(!moved, "fsdp fp16, %d ranks: the step with a gradient that is not "
          "finite (rank 0's) moves no weight on any rank", x->world);
    check(!bad_scale && !bad_count, "fsdp fp16, %d ranks: every rank halved "
          "its loss scale (%g -> %g) and counted one skipped step", x->world,
          s0, model_loss_scale(m));
    check(!stuck, "fsdp fp16, %d ranks: the next step trains", x->world);
  }
  for (int i = 0; i < 3; i++) free(w[i]);
  fsdp_destroy(f);
  model_destroy(m);
  engine_destroy(e);
}

/* Checkpoint groups longer than the model: the window still holds at
 * most a slot per group. */
static void window_cap(ctx *x) {
  engine *e;
  model *m;
  fsdp *f;
  model_options o = options(DT_F32, ATTN_FLASH, 10, x->world);
  hard(rank_engine(x->c, &e), "engine");
  hard(model_create_ex(&m, e, &x->cfg, B / x->world, T, &o),
       "model_create_ex bound, checkpoints of 10 layers");
  adamw_config hp = adamw_comparable();
  fsdp_options fo = {0};
  hard(fsdp_create(&f, x->c, m, SEED, &hp, &fo), "fsdp_create");
  fsdp_info fi;
  fsdp_info_get(f, &fi);
  if (x->rank == 0)
    check(fi.window_groups == x->cfg.layers + 2, "checkpoints of 10 "
          "layers in a %d-layer model: a window of %d groups (a slot per "
          "group at most)", x->cfg.layers, fi.window_groups);
  fsdp_destroy(f);
  model_destroy(m);
  engine_destroy(e);
}

static void expect_fail(const char *what, int rc) {
  check(rc < 0, "%s is refused (%s)", what, rc < 0 ? err_msg() : "accepted");
}

/* What a model with bound weights refuses. */
static void refusals(ctx *x) {
  engine *e;
  model *m;
  model_options o = options(DT_F32, ATTN_FLASH, 0, 1);
  hard(rank_engine(x->c, &e), "engine");
  hard(model_create_ex(&m, e, &x->cfg, B, T, &o), "model_create_ex bound");
  hard(model_init(m, SEED), "model_init");
  float one = 1.0f, loss;
  adamw_config hp = adamw_comparable();
  expect_fail("model_set_params with bound weights",
              model_set_params(m, 0, &one, 1));
  expect_fail("model_adamw_step with bound weights",
              model_adamw_step(m, &hp));
  expect_fail("a forward over bound weights with no weight hook",
              model_forward(m, x->ids[0], x->tgt[0], B, T, &loss));
  model_destroy(m);
  model_options bad = options(DT_F32, ATTN_FLASH, 0, 1);
  bad.fused = 0;
  bad.attention = ATTN_MATERIALIZED;
  expect_fail("bound weights on the op-by-op path",
              model_create_ex(&m, e, &x->cfg, B, T, &bad));
  {
    model_options h = options(DT_F16, ATTN_FLASH, 0, x->world);
    hard(model_create_ex(&m, e, &x->cfg, B / x->world, T, &h),
         "model_create_ex fp16 bound");
    fsdp *f;
    fsdp_options inb = {.in_backward = 1};
    expect_fail("FSDP with AdamW in backward and fp16's loss scaling",
                fsdp_create(&f, x->c, m, SEED, &hp, &inb));
    fsdp_destroy(f);
    model_destroy(m);
  }
  engine_destroy(e);
}

int main(int argc, char **argv) {
#ifdef HAVE_MPI
  MPI_Init(&argc, &argv);
#endif
  ctx x;
  memset(&x, 0, sizeof x);
  x.backend = COMM_MPI;
  if (argc > 1 && comm_backend_parse(argv[1], &x.backend) != 0) {
    fprintf(stderr, "usage: test_fsdp [mpi|nccl]\n");
    return 99;
  }
  if (comm_open(&x.c, x.backend) < 0) {
    fprintf(stderr, "test_fsdp: cannot open %s: %s\n",
            argc > 1 ? argv[1] : "mpi", err_msg());
#ifdef HAVE_MPI
    MPI_Finalize();
#endif
    return x.backend == COMM_NCCL ? 77 : 99;
  }
  x.rank = comm_rank(x.c);
  x.world = comm_size(x.c);
  if (B % x.world != 0) {
    fprintf(stderr, "test_fsdp: %d ranks do not divide the batch of %d\n",
            x.world, B);
    return 99;
  }
  model_config_by_name("nano", &x.cfg);
  x.cfg.vocab = 211;
  x.cfg.d_model = 10;
  x.cfg.d_ff = 21;
  x.cfg.layers = 3;
  x.cfg.heads = 1;
  if (x.backend == COMM_NCCL) {   /* head dims the GPU kernels take */
    x.cfg.d_model = 32;
    x.cfg.d_ff = 48;
    x.cfg.heads = 2;
  }
  tl_seed(77);
  for (int s = 0; s < STEPS; s++)
    for (int i = 0; i < B * T; i++) {
      x.ids[s][i] = (int32_t)(next_u64() % (uint64_t)x.cfg.vocab);
      x.tgt[s][i] = (int32_t)(next_u64() % (uint64_t)x.cfg.vocab);
    }
  if (x.rank == 0) refusals(&x);
  window_cap(&x);
  fp16_skip(&x);
  dtype precs[] = {DT_F32, DT_BF16, DT_F16};
  /* MPI: the CPU engine stores bf16 operands narrower (kernels/cpu/cpu.h),
   * so the 16-bit window and shard layouts are checked without a GPU */
  int nprec = 3;
  for (int p = 0; p < nprec; p++)
    for (int a = 0; a < 2; a++)
      for (int k = 0; k <= 2; k++)
        for (int keep = 0; keep < (a ? 1 : 2); keep++)   /* flash: both */
          for (int inb = 0; inb < (precs[p] == DT_F16 ? 1 : 2); inb++)
            one_case(&x, precs[p], a ? ATTN_MATERIALIZED : ATTN_FLASH, k,
                     inb, keep);
  /* On CPU ranks, a vocabulary whose bf16 head fits a bf16 layer's slot
   * while the fp32 embedding does not: kept gathered, the window needs a
   * large slot for the embedding alone, and a head that took a layer's
   * slot must not cost a layer a second gather (a layout the window once
   * got wrong). */
  if (x.backend == COMM_MPI) {
    x.cfg.vocab = 61;
    for (int s = 0; s < STEPS; s++)
      for (int i = 0; i < B * T; i++) {
        x.ids[s][i] = (int32_t)(next_u64() % (uint64_t)x.cfg.vocab);
        x.tgt[s][i] = (int32_t)(next_u64() % (uint64_t)x.cfg.vocab);
      }
    for (int k = 0; k <= 2; k++)
      for (int inb = 0; inb < 2; inb++)
        one_case(&x, DT_BF16, ATTN_FLASH, k, inb, 1);
  }
  free(x.after);
  comm_close(x.c);
  int status = x.rank == 0 ? tl_finish() : 0;
#ifdef HAVE_MPI
  status = any_rank(status != 0) ? 1 : 0;
  MPI_Finalize();
#endif
  return status;
}
