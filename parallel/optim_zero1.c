/* optimizer zero1 (ddp.h), ZeRO stage 1: rank r keeps m, v for chunk r of
 * every bucket and for the whole tail (buckets.h: the state layout). Per
 * bucket, after its reduce-scatter (or all-to-all: the chunk's W copies,
 * averaged as AdamW reads them), AdamW on the elements of chunk r that
 * belong to views with gradients; the schedule then all-gathers the
 * updated chunks in place (ddp_optim_gather). The tail was all-reduced and
 * is updated the same way on every rank, with no all-gather. */
#include "config.h"
#include "parallel/ddp_internal.h"

#include "common/check.h"

static int setup(ddp *d) {
  d->state_elems = d->plan.state_elems;
  return ddp_optim_state_alloc(d);
}

static int bucket(ddp *d, engine *e, int i) {
  const dp_bucket *b = &d->plan.b[i];
  if (b->tail)
    return ddp_adamw_range(d, e, i, b->start, b->start + b->count, b->state_off);
  size_t chunk = b->count / (size_t)d->world;
  size_t lo = b->start + (size_t)d->rank * chunk;
  return ddp_adamw_range(d, e, i, lo, lo + chunk, b->state_off);
}

const dp_optim_form dp_optim_zero1 = {.chunked = 1, .per_bucket = 1,
                                      .param_ops = 1, .setup = setup,
                                      .bucket = bucket};
