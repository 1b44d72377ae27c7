/* Data-parallel training and optimizer sharding against single-process
 * training:
 *
 *   mpirun -np W tests/test_ddp [mpi|nccl]
 *
 * mpi: CPU engine on each rank; nccl: CUDA engine + NCCL, one GPU per rank
 * (exit 77 when there are fewer GPUs than ranks or no CUDA build), in fp32
 * and bf16 (mixed precision: the reference runs in the same precision; on
 * MPI bf16 runs the fused path only, whose 16-bit operands the CPU engine
 * stores narrower).
 *
 * Model: an LM with awkward sizes (vocab 61, d_model 10, d_ff 21, 2 layers,
 * 1 head; 3330 parameters), op by op and on the fused path (flash
 * attention, q, k and v's gradients one product or three where placement
 * parts them), so that tensors of 10 elements straddle ZeRO-1's
 * rounded bucket boundaries and n mod 4 = 2 elements form a tail (the
 * fused path on GPUs: d_model 32, 2 heads, d_ff 48, for its kernels' head
 * dims and alignment). One rank (GPU machines with one GPU) issues no
 * collective and must still train as one process does. Ranks
 * start from DIFFERENT weights (seed + rank): only the broadcast from rank
 * 0 makes them equal. Global batch 4 sequences of 8 tokens, rank r takes
 * sequences [r*4/W, (r+1)*4/W); 3 AdamW steps on fresh random batches
 * (eps 1e-3: adamw_comparable says why).
 *
 * The handout's toy (model/toy.h: fc1 10x10, LayerNorm, fc2 5x10, plus a
 * frozen parameter and a trainable one forward never uses), 8 rows of
 * random floats per step, goes through the same cases: its two parameters
 * without gradient must keep rank 0's initial values everywhere.
 *
 * Cases: naive, flat, overlap, and bucketed with buckets of 0.0002 MiB
 * (210 bytes: smaller than the toy's fc1, 400 bytes), 0.001 MiB (smaller
 * than the LM's largest tensor, the 2440-byte embedding), 0.004 MiB and
 * 100 MiB (larger than the model), each with the model's own AdamW and the
 * handout's sharded optimizer; ZeRO-1 with flat and the four bucket sizes;
 * grad_sync allgather (raw gradients gathered, averaged in AdamW) with
 * every strategy and bucket size; grad_sync alltoall (ZeRO-1 with the raw
 * chunks exchanged, averaged in AdamW) with flat and the four bucket
 * sizes. On NCCL the allgather and alltoall cases run on a zero-CTA
 * communicator with the gradients in symmetric windows (NCCL then moves
 * them with the copy engines).
 *
 * Checks, per case:
 * - every rank's weights are bit-for-bit rank 0's (each rank applies the
 *   same update to the same reduced bytes);
 * - rank 0's weights equal the single-process weights (same seed, whole
 *   batch, the model's own AdamW) to 1e-6 absolute (bf16: 2e-4): the only difference is
 *   the order of the sums behind each gradient (rank slices summed by the
 *   collective instead of one product over all rows), ~1e-7 relative,
 *   which AdamW's normalised update turns into ~lr * 1e-6 per step (measured:
 *   3e-8). Without the broadcast or the averaging the error is ~lr = 1e-3.
 *   bf16: cuBLAS may pick other algorithms for the smaller per-rank
 *   products, and a product input can round to a neighbouring bf16 value.
 * Also: the combinations ddp.h rejects are rejected; bucket plans cover
 * the buffer exactly once; the step's schedule (stages.h) for several
 * settings, CUDA streams or not, is the one ddp.h describes, op by op, and
 * prints as expected; each case's ddp prints one line per bucket. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective/comm.h"
#include "common/check.h"
#include "model/model.h"
#include "model/toy.h"
#include "parallel/buckets.h"
#include "parallel/ddp.h"
#include "parallel/dp_model.h"
#include "parallel/stages.h"
#include "tests/rank_helpers.h"
#include "tests/testlib.h"

#ifdef HAVE_MPI
#include <mpi.h>
#endif

enum { B = 4, T = 8, STEPS = 3 };
/* The toy: 8 rows of 10 features, 10 hidden, 5 outputs. */
enum { TROWS = 8, TIN = 10, THID = 10, TOUT = 5 };
static const uint64_t SEED = 1234;

typedef struct {
  comm *c;
  comm *pc;              /* a second communicator for parameter collectives */
  comm *zc;              /* NCCL: zero-CTA policy, for grad_sync allgather
                            and alltoall */
  comm *zpc;             /* NCCL: zero-CTA too, alltoall's parameters */
  comm_backend backend;
  int rank, world;
  dtype prec;
  model_config cfg;
  int toy;              /* 1: the toy model, 0: the LM */
  int fused;            /* the LM on the fused path (flash attention) */
  int32_t ids[STEPS][B * T], tgt[STEPS][B * T];
  float tx[STEPS][TROWS * TIN], ty[STEPS][TROWS * TOUT];
  float *ref;           /* single-process weights after STEPS */
  size_t n;
} ctx;

/* The LM or the toy, holding `part` of the W parts of the global batch. */
typedef struct net {
  engine *e;
  model *m;
  toy *t;
  dp_model dm;
  int part, parts;
} net;

static void net_create(ctx *x, net *n, int part, int parts, uint64_t seed) {
  memset(n, 0, sizeof *n);
  n->part = part;
  n->parts = parts;
  hard(rank_engine(x->c, &n->e), "engine");
  if (x->toy) {
    hard(toy_create(&n->t, n->e, TIN, THID, TOUT, TROWS / parts, x->prec),
         "toy_create");
    hard(toy_init(n->t, seed), "toy_init");
    dp_model_toy(&n->dm, n->t, n->e);
  } else {
    model_options o = {.compute = x->prec, .fused = x->fused,
                       .attention = x->fused ? ATTN_FLASH : ATTN_MATERIALIZED,
                       .f32 = F32_EXACT};
    hard(model_create_ex(&n->m, n->e, &x->cfg, B / parts, T, &o),
         "model_create_ex");
    hard(model_init(n->m, seed), "model_init");
    dp_model_lm(&n->dm, n->m);
  }
}

/* Forward and backward on this part of step k's batch; d marks backward. */
static void net_fwd_bwd(ctx *x, net *n, int k, ddp *d) {
  float loss;
  if (x->toy) {
    int r = TROWS / n->parts;
    if (d) hard(ddp_mark_backward(d), "mark_backward");
    hard(toy_forward_backward(n->t, x->tx[k] + n->part * r * TIN,
                              x->ty[k] + n->part * r * TOUT, r, &loss),
         "toy forward_backward");
    return;
  }
  int b = B / n->parts, off = n->part * b * T;
  hard(model_forward(n->m, x->ids[k] + off, x->tgt[k] + off, b, T, &loss),
       "forward");
  if (d) hard(ddp_mark_backward(d), "mark_backward");
  /* As the ddp job's gemm_sm_reserve does: products shaped for fewer SMs
   * while the collectives run must give the same training. */
  engine *be = n->e;
  eng_ctx two = {NULL, 2, 0};
  if (d && x->backend == COMM_NCCL) hard(eng_view(n->e, &two, &be), "view");
  hard(model_backward_on(n->m, be), "backward");
  if (be != n->e) engine_destroy(be);
}

/* Where the weights are now (a ddp may have placed them: n->dm.params is
 * where they were at creation). */
static const float *net_params(net *n) {
  return n->m ? model_params(n->m) : toy_params(n->t);
}

static void net_destroy(net *n) {
  if (n->m) model_destroy(n->m);
  if (n->t) toy_destroy(n->t);
  engine_destroy(n->e);
}

static void reference(ctx *x) {
  net n;
  net_create(x, &n, 0, 1, SEED);
  adamw_config o = adamw_comparable();
  for (int s = 0; s < STEPS; s++) {
    hard(n.dm.zero_grad(n.dm.impl), "zero_grad");
    net_fwd_bwd(x, &n, s, NULL);
    hard(n.dm.adamw_step(n.dm.impl, &o), "adamw");
  }
  x->n = n.dm.nparams;
  x->ref = malloc(x->n * sizeof(float));
  if (!x->ref) hard(ERR_OOM, "reference weights");
  hard(eng_download(n.e, x->ref, n.dm.params, x->n * sizeof(float)),
       "download");
  net_destroy(&n);
}

/* Lines of ddp_schedule_print that describe a communicated bucket. */
static int schedule_lines(const ddp *d) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) hard(ERR_FAIL, "open_memstream");
  hard(ddp_schedule_print(d, f), "ddp_schedule_print");
  fclose(f);
  int n = 0;
  for (char *l = buf; l && *l;) {
    char *nl = strchr(l, '\n');
    if (nl) *nl = '\0';
    if (strncmp(l, "  bucket ", 9) == 0 && !strstr(l, "inactive")) n++;
    l = nl ? nl + 1 : NULL;
  }
  free(buf);
  return n;
}

/* ddp_set_adamw_sms for the next cases (grad_sync allgather) */
static int adamw_sms;

/* Train with one configuration; 0 when every check passed on every rank. */
static void one_case(ctx *x, ddp_strategy s, double mib, ddp_optimizer o,
                     ddp_sync y) {
  char name[200];
  snprintf(name, sizeof name, "%s %s: %s bucket %g MiB, optimizer %s, "
           "grad_sync %s, %d ranks",
           x->toy ? "toy" : x->fused ? "LM fused" : "LM",
           x->backend == COMM_NCCL ? "nccl" : "mpi",
           ddp_strategy_names[s], mib, ddp_optimizer_names[o],
           ddp_sync_names[y], x->world);
  if (x->prec != DT_F32)
    snprintf(name + strlen(name), sizeof name - strlen(name), ", %s",
             dtype_name(x->prec));
  if (adamw_sms && y == DDP_SYNC_ALLGATHER)
    snprintf(name + strlen(name), sizeof name - strlen(name),
             ", AdamW on %d SMs", adamw_sms);
  net n;
  ddp *d;
  /* allgather / alltoall on NCCL: a zero-CTA communicator (copy engines) */
  int nccl = x->backend == COMM_NCCL;
  comm *gc = y != DDP_SYNC_ALLREDUCE && nccl ? x->zc : x->c;
  /* alltoall: its parameter all-gathers on the copy engines too */
  comm *pc = o == DDP_OPT_ADAMW            ? NULL
             : y == DDP_SYNC_ALLTOALL && nccl ? x->zpc
                                               : x->pc;
  net_create(x, &n, x->rank, x->world, SEED + 7 * (uint64_t)x->rank);
  engine *e = n.e;
  adamw_config hp = adamw_comparable();
  /* The sharded optimizers' parameter collectives on their own
   * communicator (and, NCCL, stream), as the ddp job runs them. */
  hard(ddp_create(&d, gc, pc, &n.dm, s, mib,
                  o, y, &hp), "ddp_create");
  hard(ddp_set_adamw_sms(d, adamw_sms), "ddp_set_adamw_sms");
  for (int k = 0; k < STEPS; k++) {
    hard(ddp_begin_step(d), "begin_step");
    net_fwd_bwd(x, &n, k, d);
    hard(ddp_finish_gradient_synchronization(d), "finish_gradient_sync");
    hard(ddp_optimizer_step(d), "optimizer_step");
  }
  hard(eng_sync(e), "sync");
  ddp_step_info info;
  hard(ddp_step_info_get(d, &info), "step_info");
  float *w = malloc(x->n * sizeof(float)), *w0 = malloc(x->n * sizeof(float));
  if (!w || !w0) hard(ERR_OOM, "weights");
  hard(eng_download(e, w, net_params(&n), x->n * sizeof(float)),
       "download");
  memcpy(w0, w, x->n * sizeof(float));
#ifdef HAVE_MPI
  MPI_Bcast(w0, (int)x->n, MPI_FLOAT, 0, MPI_COMM_WORLD);
#endif
  double err = 0;
  for (size_t i = 0; i < x->n; i++) {
    double dlt = fabs((double)w[i] - x->ref[i]);
    if (!(dlt <= err)) err = dlt;
  }
  int same = memcmp(w, w0, x->n * sizeof(float)) == 0;
  int ranks_differ = any_rank(!same);
  double tol = x->prec == DT_F32 ? 1e-6 : 2e-4;
  if (x->rank == 0) {
    check(!ranks_differ, "%s: every rank's weights equal rank 0's bit for "
          "bit", name);
    check(err <= tol, "%s: weights match single-process training (max "
          "|diff| %.3g, tolerance %.0e)", name, err, tol);
    if (x->world > 1) {
      check(info.ngrad_ops == info.nbuckets && info.nbuckets > 0,
            "%s: %d gradient collectives per step, one per active bucket "
            "(%d)", name, info.ngrad_ops, info.nbuckets);
      int lines = schedule_lines(d);
      check(lines == info.nbuckets, "%s: the schedule prints one line per "
            "active bucket (%d)", name, lines);
    } else {
      check(info.ngrad_ops == 0 && info.nbuckets == 0, "%s: one rank "
            "issues no gradient collective (%d, %d buckets)", name,
            info.ngrad_ops, info.nbuckets);
    }
  }
  /* ddp_destroy gives placed weights back to the model, values kept */
  ddp_destroy(d);
  hard(eng_download(e, w0, net_params(&n), x->n * sizeof(float)),
       "download");
  int lost = any_rank(memcmp(w, w0, x->n * sizeof(float)) != 0);
  if (x->rank == 0)
    check(!lost, "%s: the model holds the same weights after ddp_destroy",
          name);
  free(w);
  free(w0);
  net_destroy(&n);
}

static void plans(void) {
  /* 3 views of 10, 7, 5 elements; n = 22. */
  tensor_view v[3] = {{"a", 0, 10, 1, {10, 0}}, {"b", 10, 7, 1, {7, 0}},
                      {"c", 17, 5, 1, {5, 0}}};
  int g[3] = {1, 0, 1};
  dp_plan p;
  hard(dp_plan_make(&p, v, 3, g, 22, 0, 1), "plan");
  check(p.nb == 3 && p.b[1].active == 0 && p.b[0].count == 10 &&
            p.b[2].start == 17,
        "per-view plan: 3 buckets, the view without gradient inactive");
  dp_plan_free(&p);
  hard(dp_plan_make(&p, v, 3, g, 22, (size_t)-1, 1), "plan");
  check(p.nb == 1 && p.b[0].start == 0 && p.b[0].count == 22 &&
            p.b[0].pending == 2,
        "flat plan: one bucket, two gradients pending");
  dp_plan_free(&p);
  hard(dp_plan_make(&p, v, 3, g, 22, 12, 4), "plan");
  size_t covered = 0;
  int ok = 1;
  for (int i = 0; i < p.nb; i++) {
    ok &= p.b[i].start == covered;
    ok &= p.b[i].tail || p.b[i].count % 4 == 0;
    covered += p.b[i].count;
  }
  check(ok && covered == 22 && p.b[p.nb - 1].tail &&
            p.b[p.nb - 1].count == 2,
        "ZeRO-1 plan over 4 ranks: buckets of multiples of 4 tile the "
        "buffer, then a tail of 22 mod 4 = 2");
  dp_plan_free(&p);
}

/* Stage t as expected: the fields that mean something for its ops. */
static int stage_is(const dp_stage *t, dp_stage w) {
  if (t->active != w.active) return 0;
  if (!w.active) return t->nops == 0;
  int ok = t->when == w.when && t->gated == w.gated && t->nops == w.nops &&
           t->nlaunch == w.nlaunch && t->capped == w.capped;
  for (int k = 0; ok && k < w.nops; k++)
    ok = t->op[k] == w.op[k] && t->on[k] == w.on[k];
  return ok;
}

static char *schedule_text(const dp_schedule *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) hard(ERR_FAIL, "open_memstream");
  dp_schedule_print(s, f);
  fclose(f);
  return buf;
}

/* The schedules of ddp.h's settings over three views of 10, 7 (no
 * gradient) and 5 elements, buckets of at most 12 elements. */
static void schedules(void) {
  tensor_view v[3] = {{"a", 0, 10, 1, {10, 0}}, {"b", 10, 7, 1, {7, 0}},
                      {"c", 17, 5, 1, {5, 0}}};
  int g[3] = {1, 0, 1};
  const dp_stage off = {0};
  dp_plan p;
  dp_schedule s;
  char *txt;
  int ok;

  /* flat: one all-reduce after backward, the model's own AdamW */
  hard(dp_plan_make(&p, v, 3, g, 22, dp_strategy_cap(DDP_FLAT, 0), 1), "plan");
  hard(dp_schedule_make(&s, DDP_FLAT, DDP_OPT_ADAMW, DDP_SYNC_ALLREDUCE, 2, 1,
                        &p), "schedule");
  dp_stage ar = {.active = 1, .when = DP_AFTER_BACKWARD, .nops = 1,
                 .nlaunch = 1, .op = {DP_OP_ALLREDUCE}, .on = {DP_COMM}};
  check(p.nb == 1 && stage_is(&s.st[0], ar) && s.model_step &&
            s.compute_waits_comm && !s.compute_waits_optim && !s.owned &&
            !s.param_ops,
        "schedule flat + adamw: one all-reduce after backward, the compute "
        "stream waits for it, then the model's own AdamW");
  txt = schedule_text(&s);
  ok = strcmp(txt, "schedule: strategy flat, optimizer adamw, grad_sync "
               "allreduce, 2 ranks, CUDA streams\n"
               "  bucket 0 [0, 22): after backward: all-reduce on comm\n"
               "  finish: compute waits for comm\n"
               "  step: the model's own adamw on compute\n") == 0;
  check(ok, "schedule flat + adamw prints as expected%s%s", ok ? "" : ":\n", ok ? "" : txt);
  free(txt);
  dp_schedule_free(&s);
  /* one rank: nothing communicated */
  hard(dp_schedule_make(&s, DDP_FLAT, DDP_OPT_ADAMW, DDP_SYNC_ALLREDUCE, 1, 0,
                        &p), "schedule");
  check(stage_is(&s.st[0], off) && s.model_step && !s.param_ops,
        "schedule on one rank: no collective, the model's own AdamW");
  dp_schedule_free(&s);
  dp_plan_free(&p);

  /* overlap + sharded: per-view all-reduces from the hooks, the frozen
   * view's bucket never sent; AdamW on owned views, then broadcasts */
  hard(dp_plan_make(&p, v, 3, g, 22, dp_strategy_cap(DDP_OVERLAP, 0), 1),
       "plan");
  hard(dp_schedule_make(&s, DDP_OVERLAP, DDP_OPT_SHARDED, DDP_SYNC_ALLREDUCE,
                        2, 0, &p), "schedule");
  ar.when = DP_AT_HOOK;
  check(p.nb == 3 && stage_is(&s.st[0], ar) && stage_is(&s.st[1], off) &&
            stage_is(&s.st[2], ar) && !s.model_step && !s.ops_in_step &&
            s.owned &&
            s.param_ops && !s.compute_waits_comm,
        "schedule overlap + sharded: an all-reduce at each hook but the "
        "frozen view's, then owned AdamW and broadcasts");
  dp_schedule_free(&s);
  dp_plan_free(&p);

  /* bucketed + zero1: reduce-scatter at each bucket's hook; in the step
   * AdamW on the chunk, then the all-gather of the chunks */
  hard(dp_plan_make(&p, v, 3, g, 22, 12, 2), "plan");
  hard(dp_schedule_make(&s, DDP_BUCKETED, DDP_OPT_ZERO1, DDP_SYNC_ALLREDUCE, 2,
                        1, &p), "schedule");
  dp_stage rs = {.active = 1, .when = DP_AT_HOOK, .nops = 3, .nlaunch = 1,
                 .op = {DP_OP_REDUCE_SCATTER, DP_OP_ADAMW,
                        DP_OP_ALLGATHER_PARAMS},
                 .on = {DP_COMM, DP_COMPUTE, DP_PARAM}};
  check(p.nb == 2 && stage_is(&s.st[0], rs) && stage_is(&s.st[1], rs) &&
            !s.model_step && s.ops_in_step && !s.in_issue_order &&
            s.compute_waits_comm &&
            !s.compute_waits_optim && s.param_ops && !s.owned,
        "schedule bucketed + zero1: reduce-scatter at each hook; AdamW on "
        "the chunk and all-gather in the step, bucket order");
  txt = schedule_text(&s);
  ok = strcmp(txt, "schedule: strategy bucketed, optimizer zero1, "
               "grad_sync allreduce, 2 ranks, CUDA streams\n"
               "  bucket 0 [0, 10): at its hook: reduce-scatter on comm; in "
               "step: adamw on compute -> all-gather params on param\n"
               "  bucket 1 [10, 22): at its hook: reduce-scatter on comm; in "
               "step: adamw on compute -> all-gather params on param\n"
               "  finish: compute waits for comm\n"
               "  step: the buckets' in bucket order; compute waits for "
               "param\n") == 0;
  check(ok, "schedule bucketed + zero1 prints as expected%s%s", ok ? "" : ":\n", ok ? "" : txt);
  free(txt);
  dp_schedule_free(&s);
  dp_plan_free(&p);

  /* bucketed + zero1 + alltoall over 4 ranks: on GPUs every op queued
   * from the hook, gated by the host, the update on the optimizer stream;
   * the tail all-reduced and updated whole; on CPUs the updates in the
   * step, in issue order */
  hard(dp_plan_make(&p, v, 3, g, 22, 12, 4), "plan");
  hard(dp_schedule_make(&s, DDP_BUCKETED, DDP_OPT_ZERO1, DDP_SYNC_ALLTOALL, 4,
                        1, &p), "schedule");
  dp_stage a2a = {.active = 1, .when = DP_AT_HOOK, .gated = 1, .nops = 3,
                  .nlaunch = 3,
                  .op = {DP_OP_ALLTOALL, DP_OP_ADAMW, DP_OP_ALLGATHER_PARAMS},
                  .on = {DP_COMM, DP_OPTIM, DP_PARAM}};
  dp_stage tail = {.active = 1, .when = DP_AT_HOOK, .gated = 1, .nops = 2,
                   .nlaunch = 2, .op = {DP_OP_ALLREDUCE, DP_OP_ADAMW},
                   .on = {DP_COMM, DP_OPTIM}};
  check(p.nb == 3 && p.b[2].tail && stage_is(&s.st[0], a2a) &&
            stage_is(&s.st[1], a2a) && stage_is(&s.st[2], tail) &&
            !s.compute_waits_comm && s.compute_waits_optim && s.param_ops,
        "schedule bucketed + zero1 + alltoall on GPUs: all-to-all, AdamW on "
        "the optimizer stream, all-gather, gated from the hook; the tail "
        "all-reduced");
  txt = schedule_text(&s);
  ok = strcmp(txt, "schedule: strategy bucketed, optimizer zero1, "
               "grad_sync alltoall, 4 ranks, CUDA streams\n"
               "  bucket 0 [0, 8): at its hook, host-gated: all-to-all on "
               "comm -> adamw on optimizer -> all-gather params on param\n"
               "  bucket 1 [8, 20): at its hook, host-gated: all-to-all on "
               "comm -> adamw on optimizer -> all-gather params on param\n"
               "  bucket 2 [20, 22) tail: at its hook, host-gated: all-reduce "
               "on comm -> adamw on optimizer\n"
               "  finish: compute does not wait for comm\n"
               "  step: compute waits for optimizer; compute waits for "
               "param\n") == 0;
  check(ok, "schedule bucketed + zero1 + alltoall prints as expected%s%s", ok ? "" : ":\n", ok ? "" : txt);
  free(txt);
  dp_schedule_free(&s);
  hard(dp_schedule_make(&s, DDP_FLAT, DDP_OPT_ZERO1, DDP_SYNC_ALLTOALL, 4, 0,
                        &p), "schedule");
  a2a = (dp_stage){.active = 1, .when = DP_AFTER_BACKWARD, .nops = 3,
                   .nlaunch = 1,
                   .op = {DP_OP_ALLTOALL, DP_OP_ADAMW, DP_OP_ALLGATHER_PARAMS},
                   .on = {DP_COMM, DP_COMPUTE, DP_PARAM}};
  check(stage_is(&s.st[0], a2a) && s.ops_in_step && s.in_issue_order &&
            !s.compute_waits_optim,
        "schedule flat + zero1 + alltoall on CPUs: after backward, the "
        "update and all-gather in the step, in issue order");
  dp_schedule_free(&s);
  dp_plan_free(&p);

  /* bucketed + allgather: gathered copies averaged by AdamW on the
   * optimizer stream, capped while backward runs */
  hard(dp_plan_make(&p, v, 3, g, 22, 12, 1), "plan");
  hard(dp_schedule_make(&s, DDP_BUCKETED, DDP_OPT_ADAMW, DDP_SYNC_ALLGATHER, 2,
                        1, &p), "schedule");
  dp_stage ag = {.active = 1, .when = DP_AT_HOOK, .gated = 1, .nops = 2,
                 .nlaunch = 2, .capped = 1,
                 .op = {DP_OP_ALLGATHER_GRADS, DP_OP_ADAMW},
                 .on = {DP_COMM, DP_OPTIM}};
  check(p.nb == 2 && p.b[1].start == 17 && stage_is(&s.st[0], ag) &&
            stage_is(&s.st[1], ag) && !s.model_step && s.compute_waits_optim &&
            !s.compute_waits_comm && !s.param_ops,
        "schedule bucketed + adamw + allgather on GPUs: all-gather at the "
        "hook, capped AdamW on the optimizer stream, gated");
  dp_schedule_free(&s);
  dp_plan_free(&p);
}

static void combinations(void) {
  char err[256];
  const ddp_sync R = DDP_SYNC_ALLREDUCE, G = DDP_SYNC_ALLGATHER;
  check(ddp_check_combination(DDP_NAIVE, DDP_OPT_ZERO1, 0, R, err, sizeof err) != 0 &&
            strstr(err, "allowed"),
        "naive + zero1 refused: %s", err);
  check(ddp_check_combination(DDP_FLAT, DDP_OPT_ADAMW, 25, R, err, sizeof err) != 0,
        "bucket_mb with flat refused: %s", err);
  check(ddp_check_combination(DDP_BUCKETED, DDP_OPT_SHARDED, 0, R, err, sizeof err) != 0,
        "bucketed without a bucket size refused: %s", err);
  check(ddp_check_combination(DDP_BUCKETED, DDP_OPT_ZERO1, 25, R, err, sizeof err) == 0 &&
            ddp_check_combination(DDP_OVERLAP, DDP_OPT_SHARDED, 0, R, err, sizeof err) == 0,
        "bucketed + zero1 and overlap + sharded allowed");
  check(ddp_check_combination(DDP_BUCKETED, DDP_OPT_ZERO1, 25, G, err, sizeof err) != 0 &&
            strstr(err, "allowed with allgather: adamw"),
        "grad_sync allgather + zero1 refused: %s", err);
  check(ddp_check_combination(DDP_FLAT, DDP_OPT_SHARDED, 0, G, err, sizeof err) != 0,
        "grad_sync allgather + sharded refused: %s", err);
  check(ddp_check_combination(DDP_NAIVE, DDP_OPT_ADAMW, 0, G, err, sizeof err) == 0 &&
            ddp_check_combination(DDP_BUCKETED, DDP_OPT_ADAMW, 25, G, err, sizeof err) == 0,
        "grad_sync allgather + adamw allowed with every strategy");
  const ddp_sync A = DDP_SYNC_ALLTOALL;
  check(ddp_check_combination(DDP_BUCKETED, DDP_OPT_ADAMW, 25, A, err, sizeof err) != 0 &&
            strstr(err, "allowed with alltoall: zero1"),
        "grad_sync alltoall + adamw refused: %s", err);
  check(ddp_check_combination(DDP_OVERLAP, DDP_OPT_ZERO1, 0, A, err, sizeof err) != 0,
        "grad_sync alltoall + overlap refused (zero1's strategies): %s", err);
  check(ddp_check_combination(DDP_FLAT, DDP_OPT_ZERO1, 0, A, err, sizeof err) == 0 &&
            ddp_check_combination(DDP_BUCKETED, DDP_OPT_ZERO1, 25, A, err, sizeof err) == 0,
        "grad_sync alltoall + zero1 allowed with flat and bucketed");
}

static void batches(ctx *x) {
  tl_seed(99);
  for (int s = 0; s < STEPS; s++)
    for (int i = 0; i < B * T; i++) {
      x->ids[s][i] = (int32_t)(next_u64() % (uint64_t)x->cfg.vocab);
      x->tgt[s][i] = (int32_t)(next_u64() % (uint64_t)x->cfg.vocab);
    }
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < TROWS * TIN; i++) x->tx[s][i] = frand(1.0f);
    for (int i = 0; i < TROWS * TOUT; i++) x->ty[s][i] = frand(1.0f);
  }
}

static void all_cases(ctx *x) {
  const double mibs[] = {0.0002, 0.001, 0.004, 100.0};
  const ddp_sync R = DDP_SYNC_ALLREDUCE, G = DDP_SYNC_ALLGATHER;
  for (int o = DDP_OPT_ADAMW; o <= DDP_OPT_SHARDED; o++) {
    one_case(x, DDP_NAIVE, 0, (ddp_optimizer)o, R);
    one_case(x, DDP_FLAT, 0, (ddp_optimizer)o, R);
    one_case(x, DDP_OVERLAP, 0, (ddp_optimizer)o, R);
    for (int i = 0; i < 4; i++)
      one_case(x, DDP_BUCKETED, mibs[i], (ddp_optimizer)o, R);
  }
  one_case(x, DDP_FLAT, 0, DDP_OPT_ZERO1, R);
  for (int i = 0; i < 4; i++) one_case(x, DDP_BUCKETED, mibs[i], DDP_OPT_ZERO1, R);
  one_case(x, DDP_NAIVE, 0, DDP_OPT_ADAMW, G);
  one_case(x, DDP_FLAT, 0, DDP_OPT_ADAMW, G);
  one_case(x, DDP_OVERLAP, 0, DDP_OPT_ADAMW, G);
  for (int i = 0; i < 4; i++) one_case(x, DDP_BUCKETED, mibs[i], DDP_OPT_ADAMW, G);
  /* AdamW beside backward held to one SM (bulk copies on Hopper), until
   * backward has ended */
  adamw_sms = 1;
  one_case(x, DDP_BUCKETED, mibs[1], DDP_OPT_ADAMW, G);
  one_case(x, DDP_BUCKETED, mibs[3], DDP_OPT_ADAMW, G);
  adamw_sms = 0;
  const ddp_sync A = DDP_SYNC_ALLTOALL;
  one_case(x, DDP_FLAT, 0, DDP_OPT_ZERO1, A);
  for (int i = 0; i < 4; i++) one_case(x, DDP_BUCKETED, mibs[i], DDP_OPT_ZERO1, A);
}

int main(int argc, char **argv) {
#ifdef HAVE_MPI
  MPI_Init(&argc, &argv);
#endif
  ctx x;
  memset(&x, 0, sizeof x);
  x.backend = COMM_MPI;
  if (argc > 1 && comm_backend_parse(argv[1], &x.backend) != 0) {
    fprintf(stderr, "usage: test_ddp [mpi|nccl]\n");
    return 99;
  }
  /* Gradient collectives limited to 2 thread blocks on NCCL (the setting
   * the ddp job's nccl_max_ctas passes); parameter ones at the default. */
  comm_options co = {.max_ctas = x.backend == COMM_NCCL ? 2 : 0};
  comm_options zo = {.zero_cta = 1};
  int rc = comm_open_ex(&x.c, x.backend, &co);
  if (rc == 0) rc = comm_open(&x.pc, x.backend);
  if (rc == 0 && x.backend == COMM_NCCL) rc = comm_open_ex(&x.zc, x.backend, &zo);
  if (rc == 0 && x.backend == COMM_NCCL)
    rc = comm_open_ex(&x.zpc, x.backend, &zo);
  if (rc < 0) {
    fprintf(stderr, "test_ddp: cannot open %s: %s\n", argv[1] ? argv[1] : "mpi",
            err_msg());
#ifdef HAVE_MPI
    MPI_Finalize();
#endif
    return x.backend == COMM_NCCL ? 77 : 99;
  }
  x.rank = comm_rank(x.c);
  x.world = comm_size(x.c);
  if (B % x.world != 0) {
    fprintf(stderr, "test_ddp: %d ranks do not divide the batch of %d\n",
            x.world, B);
    return 99;
  }
  model_config lm;
  model_config_by_name("nano", &lm);
  lm.vocab = 61;
  lm.d_model = 10;
  lm.d_ff = 21;
  lm.layers = 2;
  lm.heads = 1;
  /* the fused path on GPUs: a head dim its kernels take, 16-byte aligned
   * tensors */
  model_config lm_gpu = lm;
  lm_gpu.d_model = 32;
  lm_gpu.heads = 2;
  lm_gpu.d_ff = 48;
  x.cfg = lm;
  batches(&x);
  if (x.rank == 0) {
    plans();
    schedules();
    combinations();
  }
  dtype precs[] = {DT_F32, DT_BF16};
  for (int p = 0; p < 2; p++) {
    x.prec = precs[p];
    for (int net = 0; net < 3; net++) {   /* LM op by op, fused; toy */
      /* MPI: bf16 on the fused path only, whose 16-bit operands the CPU
       * engine stores narrower (kernels/cpu/cpu.h); its op-by-op path and
       * the toy compute in fp32 only */
      if (x.prec != DT_F32 && x.backend != COMM_NCCL && net != 1) continue;
      x.toy = net == 2;
      x.fused = net == 1;
      x.cfg = x.fused && x.backend == COMM_NCCL ? lm_gpu : lm;
      free(x.ref);
      x.ref = NULL;
      reference(&x);
      all_cases(&x);
    }
  }
  free(x.ref);
  comm_close(x.zpc);
  comm_close(x.zc);
  comm_close(x.pc);
  comm_close(x.c);
  int status = x.rank == 0 ? tl_finish() : 0;
#ifdef HAVE_MPI
  status = any_rank(status != 0) ? 1 : 0;
  MPI_Finalize();
#endif
  return status;
}
