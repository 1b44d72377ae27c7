/* grad_sync allreduce (ddp.h): each bucket averaged in place by the
 * collective, COMM_AVG (NCCL's ncclAvg divides inside the reduction; no
 * 1/W pass of its own); for ZeRO-1 a reduce-scatter, so rank r holds the
 * mean of chunk r only. Either way AdamW reads the mean where the
 * gradients are. Also the tail of a chunked plan under every grad_sync. */
#include "config.h"
#include "parallel/ddp_internal.h"

#include "common/check.h"

static int allreduce(ddp *d, const dp_bucket *b, comm_req **req) {
  float *g = d->m.grads + b->start;
  TRY(comm_allreduce_avg_f32(d->c, g, g, b->count, req));
  d->wire_bytes += (double)b->count * 4 * 2 * (d->world - 1) / d->world;
  return 0;
}

static int reduce_scatter(ddp *d, const dp_bucket *b, comm_req **req) {
  float *g = d->m.grads + b->start;
  size_t chunk = b->count / (size_t)d->world;
  TRY(comm_reduce_scatter_avg_f32(d->c, g, g + (size_t)d->rank * chunk,
                                  chunk, req));
  d->wire_bytes += (double)b->count * 4 * (d->world - 1) / d->world;
  return 0;
}

static int adamw_in_place(ddp *d, engine *e, const dp_bucket *b, size_t lo,
                          size_t n, size_t state_at) {
  (void)b;
  return ddp_adamw(d, e, lo, n, state_at);
}

const dp_grad_coll dp_coll_allreduce = {allreduce, adamw_in_place};
const dp_grad_coll dp_coll_reduce_scatter = {reduce_scatter, adamw_in_place};
const dp_sync_form dp_sync_allreduce = {
    .whole = DP_OP_ALLREDUCE, .chunked = DP_OP_REDUCE_SCATTER};
