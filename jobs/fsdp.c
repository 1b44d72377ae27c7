/* Job kind `fsdp`: fully sharded data-parallel training of model.md's LM
 * over world_size ranks (parallel/fsdp.h), the 2026 handout's fsdp and
 * fsdp_accounting.
 *
 * As the ddp kind: `rank_batch` sequences per rank, the global batch W
 * times that, rank r training on its slice of each step's random global
 * batch (seeded, the same on every rank); backend mpi: CPU engine + MPI;
 * nccl: CUDA engine + NCCL, one GPU per rank. The model runs on the fused
 * path with its weight matrices bound group by group from the gathered
 * window (model_options.bound_weights).
 *
 * A step: fsdp_begin_step, forward (it gathers as it goes; its time is the
 * host's until the loss is read back), backward (gathers again and
 * reduce-scatters each group as its gradient is final),
 * finish_gradient_synchronization, optimizer step, eng_sync; the step's
 * time is the wall clock from its start to that sync, the maximum over
 * ranks. Memory (engine accounting, rank 0): the peak after setup, just
 * before and just after the first optimizer step, and at the end what the
 * shards, the window, the gradients, AdamW's moments and the activations
 * hold. From events on the two streams (GPU) or the wall clock (CPU):
 * each step's gathers summed, and how long compute waited for them (the
 * handout's "does communication finish in time"); rank 0's last step's
 * gathers and uses go to the samples. Then one untimed step with every
 * operation bracketed on the
 * compute stream: rank 0's time by kernel family, in the message. */
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
#include "kernels/kernels.h"
#include "model/model.h"
#include "parallel/fsdp.h"

static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};
static const char *const attentions[] = {"materialized", "flash", NULL};
static const char *const optimizers[] = {"after_backward", "in_backward", NULL};

typedef struct fsdp_settings {
  run_settings run;
  const char *backend;
  const char *precision;
  const char *attention;
  int checkpoint_layers;
  bool checkpoint_keep_attention;
  int head_chunk;
  const char *optimizer;
  bool reshard_after_forward;
  loop_settings loop;
  model_settings model;
  int rank_batch;
} fsdp_settings;

static const param_def params[] = {
    COMMON_PARAMS(fsdp_settings),
    RANKS_BACKEND_PARAM(fsdp_settings),
    {"run", "precision", STRING_FIELD(fsdp_settings, precision), 0, 0,
     precisions, NULL, "fp32",
     "matrix-product inputs: fp32, bf16 or fp16 (fp32 master shards, "
     "gradients and their reduce-scatters; 16-bit weights are gathered in "
     "16 bits, the embedding in fp32; fp16 scales the loss dynamically and "
     "needs AdamW after backward; mpi: fp32 only)"},
    {"run", "attention", STRING_FIELD(fsdp_settings, attention), 0, 0,
     attentions, NULL, "flash",
     "materialized (scores in memory) or flash (FlashAttention-2)"},
    {"run", "checkpoint_layers", INT_FIELD(fsdp_settings, checkpoint_layers),
     0, 1 << 20, NULL, "layers", "0",
     "activation checkpointing as the lm kind's: 0 keeps every layer's "
     "activations; k keeps one group of k layers' and each group's input, "
     "and backward reruns the groups (the window then holds k + 2 "
     "gathered groups)"},
    CKPT_KEEP_ATTENTION_PARAM(fsdp_settings),
    HEAD_CHUNK_PARAM(fsdp_settings),
    {"run", "optimizer", STRING_FIELD(fsdp_settings, optimizer), 0, 0,
     optimizers, NULL, "after_backward",
     "after_backward: AdamW on every shard once backward is done, over a "
     "gradient shard that lives through backward; in_backward: each "
     "group's AdamW right behind its reduce-scatter, with no gradient "
     "shard (the same weights)"},
    {"run", "reshard_after_forward",
     BOOL_FIELD(fsdp_settings, reshard_after_forward), 0, 0, NULL, NULL,
     "true",
     "true: a group's gathered weights are dropped after each use and "
     "gathered again for backward (the handout's FSDP); false: forward's "
     "stay until backward's last use (FSDP2's reshard_after_forward = "
     "False): one gather a group a step, the whole model gathered at the "
     "peak"},
    LOOP_PARAMS(fsdp_settings, loop),
    MODEL_PARAMS(fsdp_settings, model),
    {"model", "rank_batch", INT_FIELD(fsdp_settings, rank_batch), 1, 1 << 20,
     NULL, NULL, NULL,
     "sequences per rank per step; the global batch is rank_batch x "
     "world_size, each rank taking its slice"},
};

static const char *const metrics[] = {
    "params",          "tokens_per_step",    "step_ms_mean",
    "step_ms_std",     "step_ms_median",     "fwd_ms_mean",
    "gathers",         "gather_mib",         "scatter_mib",
    "gather_ms_mean",  "exposed_gather_ms_mean",
    "mem_init_mib",    "mem_before_opt_mib", "mem_after_opt_mib",
    "shards_mib",      "window_mib",         "grads_mib",
    "optstate_mib",    "activations_mib",    "engine_peak_mib",
    "loss_first",      "loss_last",
    MONITOR_METRICS,   NULL,   /* over the timed steps, cuda with NVML */
};

static int validate(const void *settings, char *err, size_t n) {
  const fsdp_settings *s = settings;
  model_config c;
  if (model_settings_parse(&s->model, &c, err, n) != 0)
    return BLAME(fsdp_settings, model.size);
  if (cpu_precision_error(s->backend, s->precision, "mpi", "nccl", err, n))
    return BLAME(fsdp_settings, precision);
  if (flash_dhead_error(strcmp(s->backend, "nccl") == 0, s->attention, &c, err, n))
    return BLAME(fsdp_settings, attention);
  if (ckpt_keep_attention_error(s->checkpoint_keep_attention,
                                s->checkpoint_layers, s->attention, err, n))
    return BLAME(fsdp_settings, checkpoint_keep_attention);
  if (strcmp(s->precision, "fp16") == 0 &&
      strcmp(s->optimizer, "in_backward") == 0) {
    snprintf(err, n, "optimizer = \"in_backward\" with fp16: its loss "
             "scaling skips a step when any gradient is not finite, known "
             "only after backward (allowed with fp16: after_backward)");
    return BLAME(fsdp_settings, optimizer);
  }
  return 0;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

enum { S_STEP, S_FWD, S_GATHER, S_EXPOSED, S_LOSS, S_N };

typedef struct bench {
  dp_rank dp;
  model *m;
  fsdp *f;
  double *step_ms, *fwd_ms, *gather_ms, *exposed_ms, *loss;
} bench;

static int step(bench *x, int k) {
  rank_batch_next(&x->dp.rb);
  float loss = 0;
  TRY(comm_barrier(x->dp.c));
  double t0 = clock_now_s();
  TRY(fsdp_begin_step(x->f));
  TRY(model_forward(x->m, x->dp.rb.ids, x->dp.rb.tgt, x->dp.rb.b, x->dp.rb.T, &loss));
  double tf = clock_now_s();
  TRY(model_backward(x->m));
  TRY(fsdp_finish_gradient_synchronization(x->f));
  dp_peak(&x->dp, DP_BEFORE_OPT);
  TRY(fsdp_optimizer_step(x->f));
  dp_peak(&x->dp, DP_AFTER_OPT);
  TRY(eng_sync(x->dp.e));
  double t1 = clock_now_s();
  if (k < 0) return 0;
  fsdp_timeline tl;
  TRY(fsdp_timeline_get(x->f, &tl));
  double row[4] = {(t1 - t0) * 1e3, (tf - t0) * 1e3, tl.gather_ms,
                   tl.exposed_ms};
  TRY(comm_world_max(row, 4));
  x->step_ms[k] = row[0];
  x->fwd_ms[k] = row[1];
  x->gather_ms[k] = row[2];
  x->exposed_ms[k] = row[3];
  x->loss[k] = loss;
  return 0;
}

static int timed_step(void *x, int k) { return step(x, k); }

static int measure(bench *x, result *r, int warmup, int steps) {
  for (int k = 0; k < warmup; k++) TRY(step(x, -1));
  TRY(monitored_steps(x->dp.e, steps, timed_step, x, r));
  train_step_results(r, x->dp.e, x->m, (double)x->dp.rb.B * x->dp.rb.T, x->step_ms,
                     x->loss, steps);
  fsdp_info fi;
  fsdp_info_get(x->f, &fi);
  double fwd = 0, gat = 0, exp_ = 0;
  for (int k = 0; k < steps; k++) {
    fwd += x->fwd_ms[k] / steps;
    gat += x->gather_ms[k] / steps;
    exp_ += x->exposed_ms[k] / steps;
  }
  result_set(r, "fwd_ms_mean", fwd);
  result_set(r, "gathers", fi.gathers);
  result_set(r, "gather_mib", mib(fi.gather_bytes));
  result_set(r, "scatter_mib", mib(fi.scatter_bytes));
  result_set(r, "gather_ms_mean", gat);
  result_set(r, "exposed_gather_ms_mean", exp_);
  dp_memory_results(r, &x->dp);
  result_set(r, "shards_mib",
             tag_mib(x->dp.e, "fsdp.shard") + tag_mib(x->dp.e, "params"));
  result_set(r, "window_mib", tag_mib(x->dp.e, "fsdp.window"));
  result_set(r, "grads_mib", tag_mib(x->dp.e, "grads") + tag_mib(x->dp.e, "fsdp.grads"));
  result_set(r, "optstate_mib",
             tag_mib(x->dp.e, "fsdp.adam_m") + tag_mib(x->dp.e, "fsdp.adam_v") +
                 tag_mib(x->dp.e, "adam_m") + tag_mib(x->dp.e, "adam_v"));
  result_samples(r, "fwd_ms", x->fwd_ms, steps);
  result_samples(r, "exposed_gather_ms", x->exposed_ms, steps);
  /* rank 0's last timed step: each gather's group and interval on the
   * communicator's stream, each use's group and when compute wanted it */
  fsdp_timeline tl;
  TRY(fsdp_timeline_get(x->f, &tl));
  double *tv = malloc(sizeof *tv * (size_t)(tl.ngathers + tl.nuses + 1));
  CHECK_ALLOC(tv, sizeof *tv * (size_t)(tl.ngathers + tl.nuses + 1));
  for (int i = 0; i < tl.ngathers; i++) tv[i] = tl.group[i];
  result_samples(r, "gather_group", tv, tl.ngathers);
  result_samples(r, "gather_start_ms", tl.start_ms, tl.ngathers);
  result_samples(r, "gather_end_ms", tl.end_ms, tl.ngathers);
  for (int u = 0; u < tl.nuses; u++) tv[u] = tl.use_group[u];
  result_samples(r, "use_group", tv, tl.nuses);
  result_samples(r, "need_ms", tl.need_ms, tl.nuses);
  free(tv);
  char what[48];
  snprintf(what, sizeof what, ", window of %d groups", fi.window_groups);
  TRY(family_message(x->dp.e, timed_step, x, x->dp.rank, x->dp.cpu_threads, what, r));
  return 0;
}

static int run(const void *settings, result *r) {
  const fsdp_settings *s = settings;
  model_config c;
  char err[512];
  if (model_settings_parse(&s->model, &c, err, sizeof err) != 0)
    FAIL(ERR_FAIL, "%s", err);
  comm_backend cb;
  if (comm_backend_parse(s->backend, &cb) != 0)
    FAIL(ERR_FAIL, "fsdp: bad backend %s", s->backend);
  bench x;
  memset(&x, 0, sizeof x);
  comm *c0 = NULL;
  int rc = comm_open(&c0, cb);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    return rc;
  }
  if ((rc = dp_rank_open(&x.dp, c0, &s->loop, s->rank_batch,
                         s->model.context, c.vocab, S_N)) < 0)
    goto fail;
  x.step_ms = dp_series(&x.dp, S_STEP);
  x.fwd_ms = dp_series(&x.dp, S_FWD);
  x.gather_ms = dp_series(&x.dp, S_GATHER);
  x.exposed_ms = dp_series(&x.dp, S_EXPOSED);
  x.loss = dp_series(&x.dp, S_LOSS);
  model_options o = {.compute = dtype_of_precision(s->precision),
                     .fused = 1,
                     .attention = strcmp(s->attention, "flash") == 0
                                      ? ATTN_FLASH : ATTN_MATERIALIZED,
                     .f32 = F32_EXACT,
                     .ckpt_layers = s->checkpoint_layers,
                     .ckpt_keep_attn = s->checkpoint_keep_attention,
                     .head_chunk = s->head_chunk,
                     .bound_weights = x.dp.world};
  if ((rc = model_create_ex(&x.m, x.dp.e, &c, x.dp.rb.b, x.dp.rb.T, &o)) < 0)
    goto fail;
  adamw_config hp = adamw_defaults();
  fsdp_options fo = {.in_backward = strcmp(s->optimizer, "in_backward") == 0,
                     .keep_gathered = !s->reshard_after_forward};
  if ((rc = fsdp_create(&x.f, c0, x.m, (uint64_t)s->loop.seed, &hp, &fo)) < 0)
    goto fail;
  dp_peak(&x.dp, DP_SET_UP);
  if ((rc = measure(&x, r, s->loop.warmup, s->loop.steps)) < 0) goto fail;
  goto done;
fail:
  err_trace(__FILE__, __LINE__);
done:
  if (x.f) fsdp_destroy(x.f);
  if (x.m) model_destroy(x.m);
  dp_rank_close(&x.dp);
  comm_close(c0);
  return rc;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_fsdp = {
    .name = "fsdp",
    .summary = "fully sharded data-parallel training of model.md's LM: each "
               "rank keeps 1/W of every weight matrix, gathered group by "
               "group as forward and backward reach it",
    .gpu_backend = "nccl",
    KIND_TABLES(fsdp_settings, validate),
};
