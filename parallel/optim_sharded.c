/* optimizer sharded (ddp.h), the handout's form: views are split into W
 * contiguous runs balanced by the number of elements with gradients; rank
 * r keeps m, v for the views with gradients of run r (laid out in view
 * order), updates them after the gradients were averaged, and broadcasts
 * its run's parameters (root r) to the others. */
#include "config.h"
#include "parallel/ddp_internal.h"

#include <stdlib.h>

#include "common/check.h"

static int setup(ddp *d) {
  const dp_model *m = &d->m;
  int nv = m->nviews, W = d->world;
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
  return ddp_optim_state_alloc(d);
}

static int step(ddp *d) {
  const dp_model *m = &d->m;
  /* This rank's state is its views with gradients, in view order. */
  size_t at = 0;
  for (int v = 0; v < m->nviews; v++) {
    if (d->owner[v] != d->rank || !d->has_grad[v]) continue;
    TRY(ddp_adamw(d, d->e, m->views[v].offset, m->views[v].numel, at));
    at += m->views[v].numel;
  }
  for (int r = 0; r < d->world; r++) {
    size_t lo = d->own_lo[r], n = d->own_hi[r] - d->own_lo[r];
    if (n == 0) continue;
    TRY(ddp_param_begin(d, r, d->kstream));
    TRY(comm_broadcast_f32(d->pc, m->params + lo, n, r, &d->ps.req[r]));
    d->param_bytes += (double)n * 4;
    d->wire_bytes += (double)n * 4 * (d->world - 1) / d->world;
    TRY(ddp_param_end(d, r));
  }
  return 0;
}

const dp_optim_form dp_optim_sharded = {.param_ops = 1, .setup = setup,
                                        .step = step};
