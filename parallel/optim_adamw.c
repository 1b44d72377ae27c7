/* optimizer adamw (ddp.h): full AdamW state on every rank. When the
 * gradients are averaged in place, the model's own step over everything.
 * When they come as W copies (grad_sync allgather), the model's own step
 * would read only this rank's: m, v for every element here instead
 * (indexed like the parameters), and per bucket AdamW over its views with
 * gradients, averaging the copies as it reads them. */
#include "config.h"
#include "parallel/ddp_internal.h"

#include "common/check.h"

static int setup(ddp *d) {
  if (d->sched.model_step) return 0;
  d->state_elems = d->m.nparams;
  return ddp_optim_state_alloc(d);
}

static int bucket(ddp *d, engine *e, int i) {
  const dp_bucket *b = &d->plan.b[i];
  return ddp_adamw_range(d, e, i, b->start, b->start + b->count, b->start);
}

const dp_optim_form dp_optim_adamw = {.model_step = 1, .setup = setup,
                                      .bucket = bucket};
