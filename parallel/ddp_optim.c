/* The optimizers of ddp.h after the gradients are averaged.
 *
 * adamw:   the model's own step over everything (state on every rank).
 * sharded: views are split into W contiguous runs balanced by the number of
 *          elements with gradients; rank r keeps m, v for the views with
 *          gradients of run r (laid out in view order), updates them, and
 *          broadcasts its run's parameters (root r) to the others.
 * zero1:   rank r keeps m, v for chunk r of every reduce-scatter bucket and
 *          for the whole tail (buckets.h: the state layout), updates those
 *          elements of views with gradients, and all-gathers each bucket's
 *          chunks in place; the tail was all-reduced and is updated the same
 *          way on every rank.
 * zero1 after grad_sync alltoall: the same state and all-gathers; the
 *          gradient of chunk r is the mean of the W received copies
 *          (k_adamw_mean), each bucket started as soon as its exchange is
 *          done: on GPUs queued from backward's hook (ddp_optim_bucket),
 *          AdamW then the chunk's all-gather, on the optimizer's stream.
 * adamw after grad_sync allgather: m, v for every element here (the model's
 *          own step would read only this rank's gradients); per issued
 *          bucket, AdamW over its views with gradients, the gradient being
 *          the mean of the bucket's W gathered copies (k_adamw_mean),
 *          started on GPUs as soon as that bucket's all-gather is done,
 *          while backward still runs (ddp_optim_bucket).
 * AdamW is elementwise, so updating a slice with its own m, v gives the
 * same numbers as the unsharded step over the whole buffer.
 * Ordering (GPU): a bucket's all-gather comes after its AdamW (issued by
 * the host once it sees that AdamW complete when gated, ddp.c's pump; else
 * an event wait), so the all-gather of one bucket overlaps the AdamW of the
 * next; the compute stream waits for the last parameter collective. */
#include "config.h"
#include "parallel/ddp_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/check.h"

int ddp_optim_setup(ddp *d) {
  const dp_model *m = &d->m;
  int nv = m->nviews, W = d->world;
  if (d->opt == DDP_OPT_SHARDED) {
    d->owner = calloc((size_t)(nv ? nv : 1), sizeof(int));
    d->own_lo = calloc((size_t)W, sizeof(size_t));
    d->own_hi = calloc((size_t)W, sizeof(size_t));
    if (!d->owner || !d->own_lo || !d->own_hi)
      FAIL(ERR_OOM, "ddp: out of host memory for the owner table");
    double total = 0, cum = 0;
    for (int v = 0; v < nv; v++)
      if (d->has_grad[v]) total += (double)m->views[v].numel;
    int r = 0;
    for (int v = 0; v < nv; v++) {
      d->owner[v] = r;
      size_t lo = m->views[v].offset, hi = lo + m->views[v].numel;
      if (d->own_hi[r] == d->own_lo[r]) d->own_lo[r] = lo;
      d->own_hi[r] = hi;
      if (d->has_grad[v]) {
        cum += (double)m->views[v].numel;
        if (r == d->rank) d->state_elems += m->views[v].numel;
      }
      if (r < W - 1 && cum >= total * (r + 1) / W) r++;
    }
  } else if (d->opt == DDP_OPT_ZERO1) {
    d->state_elems = d->plan.state_elems;
  } else if (d->sync == DDP_SYNC_ALLGATHER) {
    d->state_elems = m->nparams;
  } else {
    return 0;
  }
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

static int adamw(ddp *d, size_t lo, size_t n, size_t state_at) {
  const adamw_config *o = &d->hp;
  return k_adamw(d->e, d->m.params + lo, d->m.grads + lo, d->m_state + state_at,
                 d->v_state + state_at, n, o->lr, o->beta1, o->beta2, o->eps,
                 o->weight_decay, d->step + 1);
}

/* fn on each run of [lo, hi) that belongs to views with gradients
 * (adjacent views one run). */
typedef int (*run_fn)(ddp *d, size_t run_lo, size_t n, const void *arg);
static int grad_runs(ddp *d, size_t lo, size_t hi, run_fn fn,
                     const void *arg) {
  size_t run_lo = 0, run_hi = 0;
  for (int v = 0; v < d->m.nviews; v++) {
    if (!d->has_grad[v]) continue;
    size_t s = d->m.views[v].offset, e = s + d->m.views[v].numel;
    if (s < lo) s = lo;
    if (e > hi) e = hi;
    if (s >= e) continue;
    if (run_hi > run_lo && s == run_hi) {
      run_hi = e;
      continue;
    }
    if (run_hi > run_lo) TRY(fn(d, run_lo, run_hi - run_lo, arg));
    run_lo = s;
    run_hi = e;
  }
  if (run_hi > run_lo) TRY(fn(d, run_lo, run_hi - run_lo, arg));
  return 0;
}

/* AdamW on the elements of [lo, hi) that belong to views with gradients,
 * whose state starts at state_at for element lo. */
typedef struct { size_t lo, state_at; } state_base;
static int adamw_run(ddp *d, size_t run_lo, size_t n, const void *arg) {
  const state_base *s = arg;
  return adamw(d, run_lo, n, s->state_at + (run_lo - s->lo));
}
static int adamw_range(ddp *d, size_t lo, size_t hi, size_t state_at) {
  state_base s = {lo, state_at};
  return grad_runs(d, lo, hi, adamw_run, &s);
}

/* AdamW over [lo, lo + n) of bucket b, the gradient averaged from its W
 * gathered copies; state indexed like the parameters. */
static int adamw_gathered(ddp *d, size_t lo, size_t n, const void *arg) {
  const dp_bucket *b = arg;
  const adamw_config *o = &d->hp;
  const float *g[K_ADAMW_MAX_GRADS];
  size_t W = (size_t)d->world;
  for (size_t r = 0; r < W; r++)
    g[r] = d->gathered + W * b->start + r * b->count + (lo - b->start);
  return k_adamw_mean(d->e, d->m.params + lo, g, d->world, d->m_state + lo,
                      d->v_state + lo, n, o->lr, o->beta1, o->beta2, o->eps,
                      o->weight_decay, d->step + 1);
}

/* On GPUs each bucket's AdamW is queued once its collective has finished
 * (ddp.c's gated issue, from backward's hooks or finish), on the
 * optimizer's own stream of the least priority (below the compute
 * stream's): it runs while backward goes on,
 * on what backward's kernels leave of the GPU. Safe because the hook
 * fires only once backward reads the bucket's parameters no more
 * (model_grad_hook). The engine's stream is switched for the calls. */
static int zero1_bucket(ddp *d, int i, void *stream);

int ddp_optim_bucket(ddp *d, int i) {
  const dp_bucket *b = &d->plan.b[i];
  /* gated: cend already complete, so the wait is never pending */
  TRY(dp_stream_wait(d->ostream, &d->ev_cend[i]));
  TRY(eng_set_stream(d->e, d->ostream));
  int cap = d->sync == DDP_SYNC_ALLGATHER && !d->bwd_ended ? d->adamw_sms : 0;
  if (cap) TRY(eng_cap_adamw_blocks(d->e, cap));
  int rc = d->sync == DDP_SYNC_ALLTOALL
               ? zero1_bucket(d, i, d->ostream)
               : grad_runs(d, b->start, b->start + b->count, adamw_gathered,
                           b);
  if (cap) TRY(eng_cap_adamw_blocks(d->e, 0));
  TRY(eng_set_stream(d->e, NULL));
  TRY(rc);
  return 0;
}

/* Every issued bucket's views with gradients (adjacent ones one call), in
 * issue order, each after its own all-gather (an event, GPUs), so the
 * first buckets' AdamW overlaps the last buckets' communication; on GPUs
 * they were queued from backward already, and the compute stream waits
 * for the last. */
static int gathered_step(ddp *d) {
  if (d->ostream) {
    TRY(dp_event_record(&d->ev_odone, d->ostream));
    TRY(dp_stream_wait(d->kstream, &d->ev_odone));
    return 0;
  }
  for (int k = 0; k < d->nissued; k++) {
    int i = d->issue_order[k];
    const dp_bucket *b = &d->plan.b[i];
    if (d->gpu) TRY(dp_stream_wait(d->kstream, &d->ev_cend[i]));
    TRY(grad_runs(d, b->start, b->start + b->count, adamw_gathered, b));
  }
  return 0;
}

/* A parameter collective in slot k, after the work queued on `stream`
 * (the compute stream, or the optimizer's). */
static int param_op_begin(ddp *d, int k, void *stream) {
  TRY(dp_event_record(&d->ev_pready[k], stream));
  TRY(dp_stream_wait(d->pstream, &d->ev_pready[k]));
  TRY(dp_event_record(&d->ev_pstart[k], d->pstream));
  ASSERT(d->param_req[k] == NULL);
  return 0;
}

static int param_op_end(ddp *d, int k) {
  if (d->gpu) TRY(dp_event_record(&d->ev_pend[k], d->pstream));
  d->param_order[d->nparam_issued++] = k;
  return 0;
}

static int sharded_step(ddp *d) {
  const dp_model *m = &d->m;
  /* This rank's state is its views with gradients, in view order. */
  size_t at = 0;
  for (int v = 0; v < m->nviews; v++) {
    if (d->owner[v] != d->rank || !d->has_grad[v]) continue;
    TRY(adamw(d, m->views[v].offset, m->views[v].numel, at));
    at += m->views[v].numel;
  }
  for (int r = 0; r < d->world; r++) {
    size_t lo = d->own_lo[r], n = d->own_hi[r] - d->own_lo[r];
    if (n == 0) continue;
    TRY(param_op_begin(d, r, d->kstream));
    TRY(comm_broadcast_f32(d->pc, m->params + lo, n, r, &d->param_req[r]));
    d->param_bytes += (double)n * 4;
    d->wire_bytes += (double)n * 4 * (d->world - 1) / d->world;
    TRY(param_op_end(d, r));
  }
  return 0;
}

/* grad_sync alltoall: AdamW over [run_lo, run_lo + n) of this rank's
 * chunk of bucket b, the gradient averaged from the W received copies. */
static int adamw_received(ddp *d, size_t run_lo, size_t n, const void *arg) {
  const dp_bucket *b = arg;
  const adamw_config *o = &d->hp;
  size_t W = (size_t)d->world, chunk = b->count / W;
  size_t at = run_lo - (b->start + (size_t)d->rank * chunk);
  const float *g[K_ADAMW_MAX_GRADS];
  for (size_t r = 0; r < W; r++) g[r] = d->received + b->start + r * chunk + at;
  return k_adamw_mean(d->e, d->m.params + run_lo, g, d->world,
                      d->m_state + b->state_off + at,
                      d->v_state + b->state_off + at, n, o->lr, o->beta1,
                      o->beta2, o->eps, o->weight_decay, d->step + 1);
}

/* AdamW on this rank's chunk of bucket i (the whole tail, all-reduced,
 * on every rank) and the in-place all-gather of the updated chunks, after
 * the work queued on `stream`. */
static int zero1_bucket(ddp *d, int i, void *stream) {
  size_t W = (size_t)d->world;
  dp_bucket *b = &d->plan.b[i];
  if (b->tail)
    return adamw_range(d, b->start, b->start + b->count, b->state_off);
  size_t chunk = b->count / W, lo = b->start + (size_t)d->rank * chunk;
  if (d->sync == DDP_SYNC_ALLTOALL)
    TRY(grad_runs(d, lo, lo + chunk, adamw_received, b));
  else
    TRY(adamw_range(d, lo, lo + chunk, b->state_off));
  if (d->gated && stream == d->ostream) {
    /* the host issues the all-gather once it sees this complete (ddp.c) */
    TRY(dp_event_record(&d->ev_pready[i], stream));
    d->head_stage = 2;
    return 0;
  }
  TRY(param_op_begin(d, i, stream));
  return ddp_optim_gather(d, i);
}

/* The in-place all-gather of bucket i's updated chunks on the parameter
 * communicator's stream (after param_op_begin, or gated: after the host
 * saw ev_pready[i] complete). */
int ddp_optim_gather(ddp *d, int i) {
  size_t W = (size_t)d->world;
  dp_bucket *b = &d->plan.b[i];
  size_t chunk = b->count / W, lo = b->start + (size_t)d->rank * chunk;
  if (d->gated) {
    TRY(dp_event_record(&d->ev_pstart[i], d->pstream));
    ASSERT(d->param_req[i] == NULL);
  }
  TRY(comm_allgather_f32(d->pc, d->m.params + lo, d->m.params + b->start,
                         chunk, &d->param_req[i]));
  d->param_bytes += (double)b->count * 4;
  d->wire_bytes += (double)b->count * 4 * (W - 1) / W;
  TRY(param_op_end(d, i));
  return 0;
}

/* On GPUs with alltoall all of it was queued from backward already
 * (ddp_optim_bucket): the compute stream waits for it. Otherwise every
 * gradient collective is complete by now (finish), and the buckets go in
 * issue order with alltoall, plan order else. */
static int zero1_step(ddp *d) {
  int a2a = d->sync == DDP_SYNC_ALLTOALL;
  if (d->ostream) {
    TRY(dp_event_record(&d->ev_odone, d->ostream));
    TRY(dp_stream_wait(d->kstream, &d->ev_odone));
    return 0;
  }
  int n = a2a ? d->nissued : d->plan.nb;
  for (int k = 0; k < n; k++) {
    int i = a2a ? d->issue_order[k] : k;
    if (!d->plan.b[i].active) continue;
    TRY(zero1_bucket(d, i, d->kstream));
  }
  return 0;
}

int ddp_optim_step(ddp *d) {
  if (d->sync == DDP_SYNC_ALLGATHER) {
    TRY(gathered_step(d));
    d->step++;
    if (d->m.set_step_count) d->m.set_step_count(d->m.impl, d->step);
    return 0;
  }
  if (d->opt == DDP_OPT_ADAMW) {
    TRY(d->m.adamw_step(d->m.impl, &d->hp));
    d->step++;
    return 0;
  }
  if (d->opt == DDP_OPT_SHARDED)
    TRY(sharded_step(d));
  else
    TRY(zero1_step(d));
  d->step++;
  if (d->m.set_step_count) d->m.set_step_count(d->m.impl, d->step);
  if (d->gpu) {
    TRY(dp_event_record(&d->ev_param_done, d->pstream));
    TRY(dp_stream_wait(d->kstream, &d->ev_param_done));
    return 0;
  }
  for (int k = 0; k < d->nparam_issued; k++) {
    int i = d->param_order[k];
    comm_req *q = d->param_req[i];
    d->param_req[i] = NULL;
    TRY(comm_wait(d->pc, q));
    TRY(dp_event_record(&d->ev_pend[i], NULL));
  }
  TRY(dp_event_record(&d->ev_param_done, NULL));
  return 0;
}
