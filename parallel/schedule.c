/* The stages' tables and the step's schedule built from them (stages.h).
 * Host code only: nothing here calls a communicator or an engine. */
#include "config.h"
#include "parallel/stages.h"

#include <stdlib.h>

#include "common/check.h"

const char *const dp_op_names[] = {"all-reduce", "reduce-scatter",
                                   "all-gather grads", "all-to-all",
                                   "adamw", "all-gather params"};
const char *const dp_stream_names[] = {"compute", "comm", "optimizer",
                                       "param"};

const dp_grad_coll *const dp_grad_colls[DP_NOPS] = {
    [DP_OP_ALLREDUCE] = &dp_coll_allreduce,
    [DP_OP_REDUCE_SCATTER] = &dp_coll_reduce_scatter,
    [DP_OP_ALLGATHER_GRADS] = &dp_coll_allgather,
    [DP_OP_ALLTOALL] = &dp_coll_alltoall,
};
const dp_sync_form *const dp_sync_forms[] = {
    [DDP_SYNC_ALLREDUCE] = &dp_sync_allreduce,
    [DDP_SYNC_ALLGATHER] = &dp_sync_allgather,
    [DDP_SYNC_ALLTOALL] = &dp_sync_alltoall,
};
const dp_optim_form *const dp_optim_forms[] = {
    [DDP_OPT_ADAMW] = &dp_optim_adamw,
    [DDP_OPT_SHARDED] = &dp_optim_sharded,
    [DDP_OPT_ZERO1] = &dp_optim_zero1,
};

/* naive, overlap: one bucket per view; flat: one for everything. */
size_t dp_strategy_cap(ddp_strategy s, double bucket_mib) {
  return s == DDP_FLAT       ? (size_t)-1
         : s == DDP_BUCKETED ? (size_t)(bucket_mib * 1048576.0 / sizeof(float))
                             : 0;
}

void dp_schedule_free(dp_schedule *s) {
  free(s->st);
  s->st = NULL;
}

static void add(dp_stage *t, dp_op op, dp_stream_id on) {
  ASSERT(t->nops < DP_MAX_OPS);
  t->op[t->nops] = op;
  t->on[t->nops++] = on;
}

int dp_schedule_make(dp_schedule *s, ddp_strategy strategy, ddp_optimizer o,
                     ddp_sync y, int world, int gpu, const dp_plan *plan) {
  *s = (dp_schedule){.strategy = strategy, .opt = o, .sync = y,
                     .world = world, .gpu = gpu, .plan = plan};
  s->st = calloc((size_t)(plan->nb > 0 ? plan->nb : 1), sizeof *s->st);
  CHECK_ALLOC(s->st, (size_t)plan->nb * sizeof *s->st);
  if (world == 1) {   /* nothing communicated: the model's own step */
    s->model_step = 1;
    return 0;
  }
  const dp_sync_form *sy = dp_sync_forms[y];
  const dp_optim_form *of = dp_optim_forms[o];
  /* ddp_check_combination allows only these */
  ASSERT((of->chunked ? sy->chunked : sy->whole) != DP_NOPS);
  int per_bucket = of->per_bucket || sy->copies;
  /* on GPUs a bucket's update as soon as its copies arrived: during
   * backward, on the optimizer's stream */
  int early = sy->copies && gpu;
  dp_when when = strategy == DDP_OVERLAP || strategy == DDP_BUCKETED
                     ? DP_AT_HOOK
                     : DP_AFTER_BACKWARD;
  for (int i = 0; i < plan->nb; i++) {
    const dp_bucket *b = &plan->b[i];
    dp_stage *t = &s->st[i];
    if (!b->active) continue;
    t->active = 1;
    t->when = when;
    t->gated = early && when == DP_AT_HOOK;
    add(t, b->tail ? DP_OP_ALLREDUCE : of->chunked ? sy->chunked : sy->whole,
        DP_COMM);
    if (per_bucket) {
      add(t, DP_OP_ADAMW, early ? DP_OPTIM : DP_COMPUTE);
      t->capped = early && sy->capped;
      if (of->chunked && !b->tail) add(t, DP_OP_ALLGATHER_PARAMS, DP_PARAM);
    }
    t->nlaunch = early ? t->nops : 1;
    s->ops_in_step |= t->nlaunch < t->nops;
  }
  s->compute_waits_comm = gpu && !sy->copies;
  s->model_step = of->model_step && !sy->copies;
  s->compute_waits_optim = early;
  s->in_issue_order = sy->copies;
  s->owned = of->step != NULL;
  s->param_ops = of->param_ops;
  return 0;
}

static void ops(const dp_stage *t, int from, int to, FILE *f) {
  for (int k = from; k < to; k++)
    fprintf(f, "%s%s%s on %s", k > from ? " -> " : "", dp_op_names[t->op[k]],
            t->op[k] == DP_OP_ADAMW && t->capped ? " (capped)" : "",
            dp_stream_names[t->on[k]]);
}

void dp_schedule_print(const dp_schedule *s, FILE *f) {
  fprintf(f, "schedule: strategy %s, optimizer %s, grad_sync %s, %d ranks, "
          "%s streams\n", ddp_strategy_names[s->strategy],
          ddp_optimizer_names[s->opt], ddp_sync_names[s->sync], s->world,
          s->gpu ? "CUDA" : "no");
  for (int i = 0; i < s->plan->nb; i++) {
    const dp_bucket *b = &s->plan->b[i];
    const dp_stage *t = &s->st[i];
    fprintf(f, "  bucket %d [%zu, %zu)%s: ", i, b->start, b->start + b->count,
            b->tail ? " tail" : "");
    if (!t->active) {
      fprintf(f, "%s\n", s->world == 1 ? "not communicated" : "inactive");
      continue;
    }
    fprintf(f, "%s%s: ", t->when == DP_AT_HOOK ? "at its hook" : "after backward",
            t->gated ? ", host-gated" : "");
    ops(t, 0, t->nlaunch, f);
    if (t->nlaunch < t->nops) {
      fprintf(f, "; in step: ");
      ops(t, t->nlaunch, t->nops, f);
    }
    fputc('\n', f);
  }
  if (s->world > 1)
    fprintf(f, "  finish: %s\n",
            !s->gpu ? "wait for each gradient collective, in issue order"
            : s->compute_waits_comm ? "compute waits for comm"
                                    : "compute does not wait for comm");
  fprintf(f, "  step:");
  if (s->model_step) fprintf(f, " the model's own adamw on compute");
  if (s->compute_waits_optim) fprintf(f, " compute waits for optimizer;");
  if (s->ops_in_step)
    fprintf(f, " the buckets' in %s order;",
            s->in_issue_order ? "issue" : "bucket");
  if (s->owned)
    fprintf(f, " adamw on this rank's views on compute -> a broadcast of "
            "each owner's run on param;");
  if (s->param_ops)
    fprintf(f, " %s", s->gpu ? "compute waits for param"
                             : "wait for each parameter collective");
  fputc('\n', f);
}
