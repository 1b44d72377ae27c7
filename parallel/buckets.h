/* Gradient buckets: how the flat gradient buffer of n elements is cut into
 * the ranges one collective each communicates.
 *
 * Views are taken in reverse parameter order (the order backward finishes
 * them, roughly); a bucket grows while it holds at most `cap` elements, and
 * a view larger than cap is a bucket of its own. cap = 0 gives one bucket
 * per view (naive, overlap); cap >= n one bucket for everything (flat).
 * Buckets are views into the flat buffer (start, count): no copies.
 *
 * align > 1 (ZeRO-1 over W ranks, align = W): every bucket boundary is
 * moved down to a multiple of align, so each bucket splits into W equal
 * chunks for an in-place reduce-scatter; the last n mod align elements form
 * a "tail" bucket that is all-reduced instead (and updated on every rank).
 * A view cut by a moved boundary then belongs to two buckets.
 *
 * A bucket is ready when every view with a gradient that overlaps it is
 * final (`pending` of them); a bucket that overlaps no such view is
 * inactive and never communicated. With align 1 an active bucket is trimmed
 * to the span of its views with gradients, so a frozen parameter at the
 * edge of a bucket is not sent.
 *
 * Shapes: bucket i covers grads[start, start + count); for a reduce-scatter
 * bucket rank r owns [start + r*count/W, start + (r+1)*count/W). */
#ifndef TL_BUCKETS_H
#define TL_BUCKETS_H

#include <stddef.h>

#include "model/model.h"

typedef struct dp_bucket {
  size_t start, count;   /* elements of the flat buffer */
  int pending;           /* views with gradients still to finish */
  int active;            /* pending > 0 at plan time */
  int tail;              /* align > 1: the last n mod align elements */
  size_t state_off;      /* ZeRO-1: where this bucket's chunk (or the whole
                            tail) starts in the rank's optimizer state */
} dp_bucket;

typedef struct dp_plan {
  dp_bucket *b;          /* ascending start, disjoint, covering [0, n) */
  int nb;
  int *view_first, *view_last;  /* per view: buckets it overlaps (first >
                                   last: none, the view is empty) */
  size_t state_elems;    /* ZeRO-1: this rank's optimizer-state elements */
} dp_plan;

/* has_grad[v] for each view. Returns 0 or ERR_OOM. */
int dp_plan_make(dp_plan *p, const tensor_view *views, int nviews,
                 const int *has_grad, size_t n, size_t cap, size_t align);
void dp_plan_free(dp_plan *p);
/* Reset every bucket's pending count (start of a step). */
void dp_plan_reset(dp_plan *p, const tensor_view *views, int nviews,
                   const int *has_grad);

#endif
