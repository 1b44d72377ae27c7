/* grad_sync allgather (ddp.h): every rank's raw bucket is all-gathered in
 * place into `gathered`, W copies of the gradients (bucket b's copies side
 * by side at W*start), and AdamW averages the copies as it reads them
 * (k_adamw_mean). The model's gradients live inside that buffer, each view
 * in this rank's block of its bucket, so nothing is copied locally; on
 * NCCL the buffer is a symmetric window (the copy engines can move it). */
#include "config.h"
#include "parallel/ddp_internal.h"

#include <stdlib.h>

#include "common/check.h"

/* View v (in bucket b) at W*start_b + rank*count_b + (offset_v - start_b).
 * At align 1 buckets hold whole views; a view in none (trimmed off an
 * edge, without a gradient) gets the same layout over its own range. */
static int setup(ddp *d) {
  const dp_model *m = &d->m;
  size_t W = (size_t)d->world, bytes = m->nparams * W * sizeof(float);
  if (!m->place_grads)
    FAIL(ERR_FAIL, "ddp: grad_sync allgather needs a model that can place "
         "its gradients (dp_model.place_grads)");
  void *p = NULL;
  TRY(ddp_window_alloc(d, d->c, bytes, "grads.gathered", &p));
  d->gathered = p;
  size_t *off = malloc((size_t)(m->nviews ? m->nviews : 1) * sizeof *off);
  CHECK_ALLOC(off, (size_t)m->nviews * sizeof *off);
  for (int v = 0; v < m->nviews; v++) {
    size_t lo = m->views[v].offset, hi = lo + m->views[v].numel;
    const dp_bucket *in = NULL;
    int overlaps = 0;
    for (int k = 0; k < d->plan.nb; k++) {
      const dp_bucket *b = &d->plan.b[k];
      if (b->start <= lo && hi <= b->start + b->count) in = b;
      else if (b->start < hi && lo < b->start + b->count) overlaps = 1;
    }
    if (in) {
      off[v] = W * in->start + (size_t)d->rank * in->count + (lo - in->start);
    } else if (!overlaps) {
      /* outside every bucket (a frozen view trimmed off a bucket's edge):
       * [W*lo, W*hi) is no bucket's, and its gradient stays zero */
      off[v] = W * lo + (size_t)d->rank * (hi - lo);
    } else {
      free(off);
      FAIL(ERR_FAIL, "ddp: view %s [%zu, %zu) straddles a bucket boundary",
           m->views[v].name, lo, hi);
    }
  }
  int rc = m->place_grads(m->impl, d->gathered, off);
  free(off);
  TRY(rc);
  d->placed = 1;
  /* Collective, in the same order on every rank. */
  if (comm_get_backend(d->c) == COMM_NCCL) {
    TRY(comm_window_register(d->c, d->gathered, bytes));
    d->windows = 1;
  }
  return 0;
}

static void release(ddp *d) {
  if (d->windows && comm_window_deregister(d->c, d->gathered) < 0)
    err_trace(__FILE__, __LINE__);
  /* the model's gradients back in a buffer of its own */
  if (d->placed && d->m.place_grads(d->m.impl, NULL, NULL) < 0)
    err_trace(__FILE__, __LINE__);
  if (d->gathered) eng_free(d->e, d->gathered);
}

static int allgather(ddp *d, const dp_bucket *b, comm_req **req) {
  float *blocks = d->gathered + (size_t)d->world * b->start;
  TRY(comm_allgather_f32(d->c, blocks + (size_t)d->rank * b->count, blocks,
                         b->count, req));
  d->wire_bytes += (double)b->count * 4 * (d->world - 1);
  return 0;
}

/* The gradient of [lo, lo + n) is the mean of bucket b's W copies. */
static int adamw_gathered(ddp *d, engine *e, const dp_bucket *b, size_t lo,
                          size_t n, size_t state_at) {
  const float *g[K_ADAMW_MAX_GRADS];
  size_t W = (size_t)d->world;
  for (size_t r = 0; r < W; r++)
    g[r] = d->gathered + W * b->start + r * b->count + (lo - b->start);
  return ddp_adamw_mean(d, e, lo, g, n, state_at);
}

const dp_grad_coll dp_coll_allgather = {allgather, adamw_gathered};
const dp_sync_form dp_sync_allgather = {
    .whole = DP_OP_ALLGATHER_GRADS, .chunked = DP_NOPS, .copies = 1,
    .capped = 1, .setup = setup, .release = release};
