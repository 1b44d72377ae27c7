/* grad_sync alltoall (ddp.h): ZeRO-1's reduce-scatter without the
 * reduction. Each bucket's raw gradients go through an all-to-all, so rank
 * r receives chunk r of every rank's bucket ("grads.received": the W
 * copies of bucket b's chunk side by side at its start), and AdamW on
 * chunk r averages them as it reads them (k_adamw_mean). The weights move
 * to a buffer of the parameter communicator's (so the all-gathers of the
 * updated chunks, in place, can take the copy engines), the gradients to
 * one of the gradient communicator's at their own offsets; on NCCL all
 * three become symmetric windows. Both move on MPI too (nothing to
 * register there), so the CPU tests run the placements. */
#include "config.h"
#include "parallel/ddp_internal.h"

#include <stdlib.h>

#include "common/check.h"

static int setup(ddp *d) {
  const dp_model *m = &d->m;
  size_t bytes = m->nparams * sizeof(float);
  int nccl = comm_get_backend(d->c) == COMM_NCCL;
  void *p = NULL;
  if (!m->place_params || !m->place_grads)
    FAIL(ERR_FAIL, "ddp: grad_sync alltoall needs a model that can place "
         "its weights and gradients (dp_model.place_params, place_grads)");
  TRY(ddp_window_alloc(d, d->pc, bytes, "params", &p));
  int rc = m->place_params(m->impl, p);
  if (rc < 0) {
    eng_free(d->e, p);
    TRY(rc);
  }
  d->sym_params = p;
  d->m.params = p;
  TRY(ddp_window_alloc(d, d->c, bytes, "grads.received", &p));
  d->received = p;
  TRY(ddp_window_alloc(d, d->c, bytes, "grads.sym", &p));
  d->sym_grads = p;
  size_t *off = malloc((size_t)(m->nviews ? m->nviews : 1) * sizeof *off);
  CHECK_ALLOC(off, (size_t)m->nviews * sizeof *off);
  for (int v = 0; v < m->nviews; v++) off[v] = m->views[v].offset;
  rc = m->place_grads(m->impl, d->sym_grads, off);
  free(off);
  TRY(rc);
  d->placed = 1;
  d->m.grads = d->sym_grads;
  if (!nccl) return 0;
  /* Collective, in the same order on every rank. */
  TRY(comm_window_register(d->pc, d->sym_params, bytes));
  d->param_window = 1;
  TRY(comm_window_register(d->c, d->sym_grads, bytes));
  TRY(comm_window_register(d->c, d->received, bytes));
  d->recv_windows = 1;
  return 0;
}

static void release(ddp *d) {
  if (d->recv_windows && (comm_window_deregister(d->c, d->sym_grads) < 0 ||
                          comm_window_deregister(d->c, d->received) < 0))
    err_trace(__FILE__, __LINE__);
  if (d->param_window && comm_window_deregister(d->pc, d->sym_params) < 0)
    err_trace(__FILE__, __LINE__);
  /* the model's gradients and weights back in buffers of its own */
  if (d->placed && d->m.place_grads(d->m.impl, NULL, NULL) < 0)
    err_trace(__FILE__, __LINE__);
  if (d->sym_params && d->m.place_params(d->m.impl, NULL) < 0)
    err_trace(__FILE__, __LINE__);
  if (d->sym_params) eng_free(d->e, d->sym_params);
  if (d->sym_grads) eng_free(d->e, d->sym_grads);
  if (d->received) eng_free(d->e, d->received);
}

static int alltoall(ddp *d, const dp_bucket *b, comm_req **req) {
  size_t chunk = b->count / (size_t)d->world;
  TRY(comm_alltoall_f32(d->c, d->m.grads + b->start, d->received + b->start,
                        chunk, req));
  d->wire_bytes += (double)b->count * 4 * (d->world - 1) / d->world;
  return 0;
}

/* The gradient of [lo, lo + n), inside this rank's chunk of bucket b, is
 * the mean of the W received copies. */
static int adamw_received(ddp *d, engine *e, const dp_bucket *b, size_t lo,
                          size_t n, size_t state_at) {
  size_t W = (size_t)d->world, chunk = b->count / W;
  size_t at = lo - (b->start + (size_t)d->rank * chunk);
  const float *g[K_ADAMW_MAX_GRADS];
  for (size_t r = 0; r < W; r++) g[r] = d->received + b->start + r * chunk + at;
  return ddp_adamw_mean(d, e, lo, g, n, state_at);
}

const dp_grad_coll dp_coll_alltoall = {alltoall, adamw_received};
const dp_sync_form dp_sync_alltoall = {
    .whole = DP_NOPS, .chunked = DP_OP_ALLTOALL, .copies = 1,
    .setup = setup, .release = release};
