/* What the optimizer forms (optim_adamw.c, optim_sharded.c, optim_zero1.c)
 * share: their AdamW state, AdamW over the views with gradients of a range
 * as a bucket's collective left the gradient, the engine on the optimizer
 * stream, and the parameter collectives.
 * AdamW is elementwise, so updating a slice with its own m, v gives the
 * same numbers as the unsharded step over the whole buffer. */
#include "config.h"
#include "parallel/ddp_internal.h"

#include <stdlib.h>

#include "common/check.h"

int ddp_optim_state_alloc(ddp *d) {
  size_t bytes = d->state_elems * sizeof(float);
  void *p = NULL;
  TRY(eng_alloc(d->e, bytes ? bytes : sizeof(float), "adam_m", &p));
  d->m_state = p;
  TRY(eng_alloc(d->e, bytes ? bytes : sizeof(float), "adam_v", &p));
  d->v_state = p;
  TRY(eng_memset0(d->e, d->m_state, bytes));
  TRY(eng_memset0(d->e, d->v_state, bytes));
  return 0;
}

void ddp_optim_free(ddp *d) {
  if (d->m_state) eng_free(d->e, d->m_state);
  if (d->v_state) eng_free(d->e, d->v_state);
  free(d->owner);
  free(d->own_lo);
  free(d->own_hi);
}

int ddp_adamw(ddp *d, engine *e, size_t lo, size_t n, size_t state_at) {
  const adamw_config *o = &d->hp;
  return k_adamw(e, d->m.params + lo, d->m.grads + lo, d->m_state + state_at,
                 d->v_state + state_at, n, o->lr, o->beta1, o->beta2, o->eps,
                 o->weight_decay, d->step + 1);
}

int ddp_adamw_mean(ddp *d, engine *e, size_t lo, const float *const *g,
                   size_t n, size_t state_at) {
  const adamw_config *o = &d->hp;
  return k_adamw_mean(e, d->m.params + lo, g, d->world,
                      d->m_state + state_at, d->v_state + state_at, n, o->lr,
                      o->beta1, o->beta2, o->eps, o->weight_decay,
                      d->step + 1);
}

/* Each run of [lo, hi) that belongs to views with gradients (adjacent views
 * one run), through the bucket's collective's reader. */
int ddp_adamw_range(ddp *d, engine *e, int i, size_t lo, size_t hi,
                    size_t state_at) {
  const dp_bucket *b = &d->plan.b[i];
  const dp_grad_coll *gc = dp_grad_colls[d->sched.st[i].op[0]];
  size_t run_lo = 0, run_hi = 0;
  for (int v = 0; v <= d->m.nviews; v++) {
    size_t s = hi, t = hi;   /* past the last view: flush */
    if (v < d->m.nviews) {
      if (!d->has_grad[v]) continue;
      s = d->m.views[v].offset;
      t = s + d->m.views[v].numel;
      if (s < lo) s = lo;
      if (t > hi) t = hi;
      if (s >= t) continue;
      if (run_hi > run_lo && s == run_hi) {
        run_hi = t;
        continue;
      }
    }
    if (run_hi > run_lo)
      TRY(gc->adamw(d, e, b, run_lo, run_hi - run_lo,
                    state_at + (run_lo - lo)));
    run_lo = s;
    run_hi = t;
  }
  return 0;
}

/* Queued from backward's hooks or finish: runs while backward goes on, on
 * what backward's kernels leave of the GPU (the stream's priority is the
 * least). Safe because the hook fires only once backward reads the
 * bucket's parameters no more (model_grad_hook). A capped stage takes the
 * whole GPU once the host has seen backward end. */
int ddp_optim_bucket(ddp *d, int i) {
  /* gated: gs.end already complete, so the wait is never pending */
  TRY(dp_stream_wait(d->ostream, &d->gs.end[i]));
  int capped = d->sched.st[i].capped && !d->bwd_ended && d->adamw_sms;
  TRY(d->optim->bucket(d, capped ? d->oe_capped : d->oe, i));
  return 0;
}

int ddp_param_begin(ddp *d, int k, void *stream) {
  TRY(dp_event_record(&d->ps.ready[k], stream));
  TRY(dp_stream_wait(d->pstream, &d->ps.ready[k]));
  TRY(dp_event_record(&d->ps.start[k], d->pstream));
  ASSERT(d->ps.req[k] == NULL);
  return 0;
}

int ddp_param_end(ddp *d, int k) {
  if (d->gpu) TRY(dp_event_record(&d->ps.end[k], d->pstream));
  d->ps.order[d->ps.nissued++] = k;
  return 0;
}

/* In place: this rank's updated chunk to every rank. */
int ddp_optim_gather(ddp *d, int i) {
  size_t W = (size_t)d->world;
  dp_bucket *b = &d->plan.b[i];
  size_t chunk = b->count / W, lo = b->start + (size_t)d->rank * chunk;
  if (!d->sched.st[i].gated)
    TRY(dp_stream_wait(d->pstream, &d->ps.ready[i]));
  TRY(dp_event_record(&d->ps.start[i], d->pstream));
  ASSERT(d->ps.req[i] == NULL);
  TRY(comm_allgather_f32(d->pc, d->m.params + lo, d->m.params + b->start,
                         chunk, &d->ps.req[i]));
  d->param_bytes += (double)b->count * 4;
  d->wire_bytes += (double)b->count * 4 * (W - 1) / W;
  TRY(ddp_param_end(d, i));
  return 0;
}
