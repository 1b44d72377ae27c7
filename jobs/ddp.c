/* Job kind `ddp`: data-parallel training of model.md's LM over world_size
 * ranks (parallel/ddp.h), the handout's naive_ddp_benchmarking,
 * minimal_ddp_flat_benchmarking, ddp_overlap_individual_parameters_
 * benchmarking, ddp_bucketed_benchmarking and optimizer_state_sharding_
 * accounting.
 *
 * `rank_batch` is the per-rank batch b, so rows at different world sizes
 * compare at the same per-GPU batch (scaling efficiency reads directly);
 * the global batch is W*b and rank r trains on sequences [r*b, (r+1)*b) of
 * each step's random global batch (seeded, the same on every rank). backend mpi: CPU engine + MPI; nccl: CUDA engine + NCCL,
 * one GPU per rank. At world_size 1 nothing is communicated: the
 * single-GPU row at the same per-GPU batch. The model runs op by op, or
 * on the fused path (`fusion`, `attention`, as the lm kind's).
 *
 * A step: ddp_begin_step, forward, backward (collectives start from the
 * hook), finish_gradient_synchronization, optimizer step, then eng_sync;
 * its time is the wall clock from the step's start to that sync, the
 * maximum over ranks (the step is done when the slowest rank is). From
 * events on the streams (GPU) or the wall clock (CPU), per step: backward
 * time, the summed durations of the gradient collectives, the
 * communication left exposed after backward (last gradient collective's
 * end minus backward's end), optimizer time including the parameter
 * collectives (grad_sync allgather on GPUs: the part left after backward,
 * the rest runs beside it); each a mean over timed steps of the maximum over ranks.
 * Memory (engine accounting, rank 0): peaks after init, just before and
 * just after the first optimizer step, and at the end what each tag holds
 * (parameters, gradients, AdamW moments, activations).
 * The last timed step's timeline (backward hooks, each collective's start
 * and end) of ranks 0 and 1 goes to the samples, as r0_* / r1_* series. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective/comm.h"
#include "common/check.h"
#include "common/clock.h"
#include "harness/kind.h"
#include "jobs/common.h"
#include "model/rng.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "parallel/ddp.h"
#include "parallel/dp_model.h"

#ifdef HAVE_MPI
#include "common/check_mpi.h"
#endif

static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};

typedef struct ddp_settings {
  run_settings run;
  const char *backend;
  const char *precision;
  const char *fusion;
  const char *attention;
  loop_settings loop;
  model_settings model;
  int rank_batch;
  const char *strategy;
  double bucket_mb;
  const char *optimizer;
  const char *grad_sync;
  int nccl_max_ctas;
  int gemm_sm_reserve;
} ddp_settings;

static const param_def params[] = {
    COMMON_PARAMS(ddp_settings),
    RANKS_BACKEND_PARAM(ddp_settings),
    {"run", "precision", STRING_FIELD(ddp_settings, precision), 0, 0,
     precisions, NULL, "fp32",
     "matrix-product inputs: fp32, bf16 or fp16 (fp32 master weights, "
     "gradients and communication; mpi: fp32 only)"},
    PATH_PARAMS(ddp_settings),
    LOOP_PARAMS(ddp_settings, loop),
    MODEL_PARAMS(ddp_settings, model),
    {"model", "rank_batch", INT_FIELD(ddp_settings, rank_batch), 1, 1 << 20,
     NULL, NULL, NULL,
     "sequences per rank per step; the global batch is rank_batch x "
     "world_size, each rank taking its slice"},
    {"ddp", "strategy", STRING_FIELD(ddp_settings, strategy), 0, 0,
     ddp_strategy_names, NULL, NULL,
     "gradient averaging: naive (all-reduce per tensor after backward), "
     "flat (one all-reduce after backward), overlap (per tensor, from "
     "backward), bucketed (buckets of bucket_mb, from backward)"},
    {"ddp", "bucket_mb", FLOAT_FIELD(ddp_settings, bucket_mb), 0, 1048576,
     NULL, "MiB", "0",
     "bucket size in MiB (2^20 bytes of fp32 gradients) for bucketed; 0 "
     "for the other strategies"},
    {"ddp", "optimizer", STRING_FIELD(ddp_settings, optimizer), 0, 0,
     ddp_optimizer_names, NULL, "adamw",
     "adamw (state on every rank), sharded (the handout's: tensors "
     "assigned to ranks, updated ones broadcast), zero1 (reduce-scatter, "
     "AdamW on the shard, all-gather; with flat or bucketed)"},
    {"ddp", "grad_sync", STRING_FIELD(ddp_settings, grad_sync), 0, 0,
     ddp_sync_names, NULL, "allreduce",
     "allreduce (each bucket all-reduced, averaged in the reduction) or "
     "allgather (each bucket's raw gradients all-gathered, averaged in "
     "AdamW; nccl: on the copy engines, no SMs; optimizer adamw only) or "
     "alltoall (ZeRO-1's chunks exchanged raw by an all-to-all, averaged "
     "in AdamW; nccl: on the copy engines; optimizer zero1 only)"},
    {"ddp", "nccl_max_ctas", INT_FIELD(ddp_settings, nccl_max_ctas), 0, 64,
     NULL, NULL, "0",
     "nccl: at most this many thread blocks (so SMs) per gradient "
     "collective, which overlap backward (0: NCCL's default); parameter "
     "collectives use a second communicator at NCCL's default. mpi: 0"},
    {"ddp", "gemm_sm_reserve", INT_FIELD(ddp_settings, gemm_sm_reserve), 0,
     1024, NULL, NULL, "0",
     "nccl: while backward runs, matrix products are shaped for the GPU's "
     "SMs minus this many (cuBLAS's SM count target), the SMs the "
     "overlapping collectives hold; with grad_sync allgather (no SMs "
     "moving bytes) the AdamW running beside backward is held to those "
     "SMs instead; 0: the whole GPU; one rank has no collectives and "
     "keeps the whole GPU. mpi: 0"},
};

static const char *const metrics[] = {
    "params",           "tokens_per_step",     "step_ms_mean",
    "step_ms_std",      "step_ms_median",      "bwd_ms_mean",
    "grad_comm_ms_mean", "exposed_comm_ms_mean", "opt_ms_mean",
    "param_comm_ms_mean", "comm_share",        "grad_collectives",
    "grad_comm_mib",    "param_comm_mib",      "wire_mib",
    "mem_init_mib",     "mem_before_opt_mib",  "mem_after_opt_mib",
    "params_mib",       "grads_mib",           "optstate_mib",
    "activations_mib",  "engine_peak_mib",     "loss_first",
    "loss_last",        MONITOR_METRICS,   /* timed steps, cuda with NVML */
    NULL,
};

/* ddp_check_combination says what is wrong, not which setting to blame:
 * the blame goes to the setting whose standard value would make the
 * combination valid, looked for from the most dependent one (grad_sync,
 * allowed by optimizer) to the least (bucket_mb, allowed by strategy). */
static int combination_blame(ddp_strategy st, ddp_optimizer o, double mib,
                             ddp_sync y) {
  char ignored[512];
  if (ddp_check_combination(st, o, mib, DDP_SYNC_ALLREDUCE, ignored,
                            sizeof ignored) == 0)
    return BLAME(ddp_settings, grad_sync);
  if (ddp_check_combination(st, DDP_OPT_ADAMW, mib, DDP_SYNC_ALLREDUCE,
                            ignored, sizeof ignored) == 0)
    return BLAME(ddp_settings, optimizer);
  return BLAME(ddp_settings, bucket_mb);
}

static int validate(const void *settings, char *err, size_t n) {
  const ddp_settings *s = settings;
  model_config c;
  if (model_settings_parse(&s->model, &c, err, n) != 0)
    return BLAME(ddp_settings, model.size);
  if (cpu_precision_error(s->backend, s->precision, "mpi", "nccl", err, n))
    return BLAME(ddp_settings, precision);
  if (path_error(s->fusion, s->attention, err, n) ||
      flash_dhead_error(strcmp(s->backend, "nccl") == 0, s->attention, &c, err, n))
    return BLAME(ddp_settings, attention);
  ddp_strategy st;
  ddp_optimizer o;
  ddp_sync y;
  /* The table's choices are these names, so each parses. */
  ddp_strategy_parse(s->strategy, &st);
  ddp_optimizer_parse(s->optimizer, &o);
  ddp_sync_parse(s->grad_sync, &y);
  if (ddp_check_combination(st, o, s->bucket_mb, y, err, n) != 0)
    return combination_blame(st, o, s->bucket_mb, y);
  if (y != DDP_SYNC_ALLREDUCE && s->nccl_max_ctas != 0) {
    snprintf(err, n, "nccl_max_ctas = %d with grad_sync %s (allowed "
             "with %s: 0; its communicator takes NCCL's zero-CTA policy)",
             s->nccl_max_ctas, ddp_sync_names[y], ddp_sync_names[y]);
    return BLAME(ddp_settings, nccl_max_ctas);
  }
  if (y != DDP_SYNC_ALLREDUCE && s->run.world_size > K_ADAMW_MAX_GRADS) {
    snprintf(err, n, "grad_sync %s with world_size %d (allowed: at "
             "most %d ranks, whose copies AdamW averages)", ddp_sync_names[y],
             s->run.world_size, (int)K_ADAMW_MAX_GRADS);
    return BLAME(ddp_settings, grad_sync);
  }
  int mpi = strcmp(s->backend, "mpi") == 0;
  if (mpi && s->nccl_max_ctas != 0) {
    snprintf(err, n, "nccl_max_ctas = %d with backend mpi (allowed with "
             "mpi: 0)", s->nccl_max_ctas);
    return BLAME(ddp_settings, nccl_max_ctas);
  }
  if (mpi && s->gemm_sm_reserve != 0) {
    snprintf(err, n, "gemm_sm_reserve = %d with backend mpi (allowed with "
             "mpi: 0)", s->gemm_sm_reserve);
    return BLAME(ddp_settings, gemm_sm_reserve);
  }
  /* fp16's loss scale is unscaled inside the model's own AdamW step; the
   * sharded optimizers step outside it and would update with scaled
   * gradients (and ZeRO-1's ranks would need to agree on an overflow). */
  if (strcmp(s->precision, "fp16") == 0 &&
      (o != DDP_OPT_ADAMW || y != DDP_SYNC_ALLREDUCE)) {
    snprintf(err, n, "precision = \"fp16\" with optimizer \"%s\" and "
             "grad_sync \"%s\": fp16 loss scaling works with the model's own "
             "AdamW only (allowed: optimizer adamw with grad_sync allreduce, "
             "or precision fp32 / bf16)", s->optimizer, s->grad_sync);
    return BLAME(ddp_settings, precision);
  }
  return 0;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

enum { S_STEP, S_BWD, S_GCOMM, S_EXPOSED, S_OPT, S_PCOMM, S_BWD_HOST, S_N };

typedef struct bench {
  dp_rank dp;              /* dp.c: the gradient collectives' communicator */
  comm *pc;                /* the parameter collectives': nccl with a
                              sharded optimizer, else NULL (dp.c's) */
  engine *be;              /* backward's: dp.e, or a view of it whose
                              products leave gemm_sm_reserve SMs to the
                              collectives */
  model *m;
  ddp *d;
  int sm_reserve;          /* gemm_sm_reserve */
  double *v[S_N];          /* per timed step, max over ranks */
  double *loss;
  ddp_step_info last;
} bench;

static int step(bench *x, int k) {
  rank_batch_next(&x->dp.rb);
  float loss = 0;
  TRY(comm_barrier(x->dp.c));
  double t0 = clock_now_s();
  TRY(ddp_begin_step(x->d));
  TRY(model_forward(x->m, x->dp.rb.ids, x->dp.rb.tgt, x->dp.rb.b, x->dp.rb.T, &loss));
  TRY(ddp_mark_backward(x->d));
  /* Only backward overlaps gradient collectives: forward keeps every SM. */
  double th = clock_now_s();
  TRY(model_backward_on(x->m, x->be));
  /* the host's time to queue backward (and its collectives): when it is
   * as long as backward on the GPU, the GPU waits for launches */
  double bwd_host = (clock_now_s() - th) * 1e3;
  TRY(ddp_finish_gradient_synchronization(x->d));
  dp_peak(&x->dp, DP_BEFORE_OPT);
  TRY(ddp_optimizer_step(x->d));
  dp_peak(&x->dp, DP_AFTER_OPT);
  TRY(eng_sync(x->dp.e));
  double t1 = clock_now_s();
  if (k < 0) return 0;
  ddp_step_info s;
  TRY(ddp_step_info_get(x->d, &s));
  double row[S_N] = {(t1 - t0) * 1e3,
                     s.bwd_end_ms - s.bwd_start_ms,
                     s.grad_comm_ms,
                     s.exposed_ms,
                     s.opt_ms,
                     s.param_comm_ms,
                     bwd_host};
  TRY(comm_world_max(row, S_N));
  for (int i = 0; i < S_N; i++) x->v[i][k] = row[i];
  x->loss[k] = loss;
  x->last = s;
  return 0;
}

static double mean_of(const double *v, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += v[i];
  return s / n;
}

/* The timeline of the last step: rank 0's own, rank 1's sent to rank 0.
 * Layout of one rank's doubles: nhooks, bwd_start, hook ends...,
 * ngrad, (start, end)..., nparam, (start, end)...; len counts them:
 * 4 (nhooks, bwd_start, ngrad, nparam), one per hook, two per op. */
static int timeline(bench *x, result *r) {
  const ddp_step_info *s = &x->last;
  int len = 4 + s->nhooks + 2 * (s->ngrad_ops + s->nparam_ops);
  double *buf = malloc((size_t)len * sizeof *buf);
  CHECK_ALLOC(buf, (size_t)len * sizeof *buf);
  int k = 0;
  buf[k++] = s->nhooks;
  buf[k++] = s->bwd_start_ms;
  for (int i = 0; i < s->nhooks; i++) buf[k++] = s->hook_ms[i];
  buf[k++] = s->ngrad_ops;
  for (int i = 0; i < s->ngrad_ops; i++) {
    buf[k++] = s->grad_ops[i].start_ms;
    buf[k++] = s->grad_ops[i].end_ms;
  }
  buf[k++] = s->nparam_ops;
  for (int i = 0; i < s->nparam_ops; i++) {
    buf[k++] = s->param_ops[i].start_ms;
    buf[k++] = s->param_ops[i].end_ms;
  }
  int ranks = x->dp.world < 2 ? 1 : 2;
#ifdef HAVE_MPI
  if (x->dp.rank == 1) {
    CHECK_MPI(MPI_Send(&len, 1, MPI_INT, 0, 7, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Send(buf, len, MPI_DOUBLE, 0, 8, MPI_COMM_WORLD));
  }
#endif
  for (int q = 0; q < ranks && x->dp.rank == 0; q++) {
    double *t = buf;
    int n = len;
#ifdef HAVE_MPI
    if (q == 1) {
      CHECK_MPI(MPI_Recv(&n, 1, MPI_INT, 1, 7, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
      t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
      if (!t) {
        free(buf);
        FAIL(ERR_OOM, "out of host memory for rank 1's timeline");
      }
      CHECK_MPI(MPI_Recv(t, n, MPI_DOUBLE, 1, 8, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
    }
#endif
    /* Each number takes about 9 characters in the samples text. */
    if (strlen(r->samples) + (size_t)n * 10 + 200 >= sizeof r->samples) {
      snprintf(r->message + strlen(r->message),
               sizeof r->message - strlen(r->message),
               "%stimeline of rank %d not kept (%d points: too many for "
               "the samples)", r->message[0] ? "; " : "", q, n);
    } else {
      char name[32];
      int nh = (int)t[0], at = 1;
      snprintf(name, sizeof name, "r%d_bwd_ms", q);
      result_samples(r, name, t + at, nh + 1);  /* start, then each hook */
      at += nh + 1;
      int ng = (int)t[at++];
      snprintf(name, sizeof name, "r%d_grad_comm_ms", q);
      result_samples(r, name, t + at, 2 * ng);  /* start, end pairs */
      at += 2 * ng;
      int np = (int)t[at++];
      snprintf(name, sizeof name, "r%d_param_comm_ms", q);
      result_samples(r, name, t + at, 2 * np);
    }
    if (t != buf) free(t);
  }
  free(buf);
  return 0;
}

static int timed_step(void *x, int k) { return step(x, k); }

static int measure(bench *x, result *r, int warmup, int steps) {
  for (int k = 0; k < warmup; k++) TRY(step(x, -1));
  TRY(monitored_steps(x->dp.e, steps, timed_step, x, r));
  const ddp_step_info *s = &x->last;
  double step_mean = train_step_results(r, x->dp.e, x->m, (double)x->dp.rb.B * x->dp.rb.T,
                                        x->v[S_STEP], x->loss, steps);
  result_set(r, "bwd_ms_mean", mean_of(x->v[S_BWD], steps));
  result_set(r, "grad_comm_ms_mean", mean_of(x->v[S_GCOMM], steps));
  result_set(r, "exposed_comm_ms_mean", mean_of(x->v[S_EXPOSED], steps));
  result_set(r, "opt_ms_mean", mean_of(x->v[S_OPT], steps));
  result_set(r, "param_comm_ms_mean", mean_of(x->v[S_PCOMM], steps));
  result_set(r, "comm_share", mean_of(x->v[S_GCOMM], steps) / step_mean);
  result_set(r, "grad_collectives", s->ngrad_ops);
  result_set(r, "grad_comm_mib", mib(s->grad_bytes));
  result_set(r, "param_comm_mib", mib(s->param_bytes));
  result_set(r, "wire_mib", mib(s->wire_bytes));
  dp_memory_results(r, &x->dp);
  result_set(r, "params_mib", tag_mib(x->dp.e, "params"));
  result_set(r, "grads_mib",
             tag_mib(x->dp.e, "grads") + tag_mib(x->dp.e, "grads.gathered") +
                 tag_mib(x->dp.e, "grads.sym") +
                 tag_mib(x->dp.e, "grads.received"));
  result_set(r, "optstate_mib", tag_mib(x->dp.e, "adam_m") + tag_mib(x->dp.e, "adam_v"));
  result_samples(r, "exposed_comm_ms", x->v[S_EXPOSED], steps);
  result_samples(r, "bwd_ms", x->v[S_BWD], steps);
  result_samples(r, "bwd_host_ms", x->v[S_BWD_HOST], steps);
  TRY(family_message(x->dp.e, timed_step, x, x->dp.rank, x->dp.cpu_threads, "", r));
  TRY(timeline(x, r));
  return 0;
}

static int run(const void *settings, result *r) {
  const ddp_settings *s = settings;
  model_config c;
  char err[512];
  if (model_settings_parse(&s->model, &c, err, sizeof err) != 0)
    FAIL(ERR_FAIL, "%s", err);
  comm_backend cb;
  ddp_strategy st;
  ddp_optimizer op;
  ddp_sync sy;
  if (comm_backend_parse(s->backend, &cb) != 0 ||
      ddp_strategy_parse(s->strategy, &st) != 0 ||
      ddp_optimizer_parse(s->optimizer, &op) != 0 ||
      ddp_sync_parse(s->grad_sync, &sy) != 0)
    FAIL(ERR_FAIL, "ddp: bad backend, strategy, optimizer or grad_sync");
  bench x;
  memset(&x, 0, sizeof x);
  comm *gc = NULL;
  comm_options co = {.max_ctas = s->nccl_max_ctas,
                     .zero_cta = sy != DDP_SYNC_ALLREDUCE && cb == COMM_NCCL};
  int rc = comm_open_ex(&gc, cb, &co);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    return rc;
  }
  /* Parameter collectives on their own communicator: after backward
   * (sharded, zero1 after allreduce) at NCCL's full width with its
   * kernels; with alltoall during backward, on the copy engines too (the
   * weights are then a symmetric window, parallel/ddp.h). */
  comm_options po = {.zero_cta = sy == DDP_SYNC_ALLTOALL && cb == COMM_NCCL};
  if (cb == COMM_NCCL && op != DDP_OPT_ADAMW &&
      (co.max_ctas > 0 || co.zero_cta) &&
      (rc = comm_open_ex(&x.pc, cb, &po)) < 0) {
    err_trace(__FILE__, __LINE__);
    comm_close(gc);
    return rc;
  }
  if ((rc = dp_rank_open(&x.dp, gc, &s->loop, s->rank_batch,
                         s->model.context, c.vocab, S_N + 1)) < 0)
    goto fail;
  for (int i = 0; i < S_N; i++) x.v[i] = dp_series(&x.dp, i);
  x.loss = dp_series(&x.dp, S_N);
  x.sm_reserve = x.dp.world > 1 ? s->gemm_sm_reserve : 0;
  x.be = x.dp.e;
  eng_ctx bc = {NULL, x.sm_reserve, 0};
  if (x.sm_reserve && (rc = eng_view(x.dp.e, &bc, &x.be)) < 0) goto fail;
  model_options mo = {.compute = dtype_of_precision(s->precision),
                      .fused = strcmp(s->fusion, "fused") == 0,
                      .attention = strcmp(s->attention, "flash") == 0
                                       ? ATTN_FLASH : ATTN_MATERIALIZED,
                      .f32 = F32_EXACT};
  if ((rc = model_create_ex(&x.m, x.dp.e, &c, x.dp.rb.b, x.dp.rb.T, &mo)) < 0)
    goto fail;
  if ((rc = model_init(x.m, (uint64_t)s->loop.seed)) < 0) goto fail;
  dp_model dm;
  dp_model_lm(&dm, x.m);
  adamw_config hp = adamw_defaults();
  if ((rc = ddp_create(&x.d, gc, x.pc, &dm, st, s->bucket_mb, op,
                       sy, &hp)) < 0)
    goto fail;
  if (sy == DDP_SYNC_ALLGATHER && (rc = ddp_set_adamw_sms(x.d, x.sm_reserve)) < 0)
    goto fail;
  dp_peak(&x.dp, DP_SET_UP);
  if ((rc = measure(&x, r, s->loop.warmup, s->loop.steps)) < 0) goto fail;
  goto done;
fail:
  err_trace(__FILE__, __LINE__);
done:
  if (x.d) ddp_destroy(x.d);
  if (x.m) model_destroy(x.m);
  if (x.be && x.be != x.dp.e) engine_destroy(x.be);
  dp_rank_close(&x.dp);
  comm_close(x.pc);
  comm_close(gc);
  return rc;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_ddp = {
    .name = "ddp",
    .summary = "data-parallel training of model.md's LM: naive / flat / "
               "overlap / bucketed gradient averaging, sharded optimizers",
    .gpu_backend = "nccl",
    KIND_TABLES(ddp_settings, validate),
};
