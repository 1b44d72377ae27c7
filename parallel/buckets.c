/* Bucket planning (buckets.h): cuts of the flat buffer, in reverse view
 * order, by the size rule; then boundaries rounded down for ZeRO-1, the
 * views each bucket overlaps, and the ZeRO-1 state layout. Pure host code. */
#include "config.h"
#include "parallel/buckets.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"

void dp_plan_free(dp_plan *p) {
  free(p->b);
  free(p->view_first);
  free(p->view_last);
  memset(p, 0, sizeof *p);
}

void dp_plan_reset(dp_plan *p, const tensor_view *views, int nviews,
                   const int *has_grad) {
  for (int i = 0; i < p->nb; i++) p->b[i].pending = 0;
  for (int v = 0; v < nviews; v++) {
    if (!has_grad[v] || views[v].numel == 0) continue;
    for (int i = p->view_first[v]; i <= p->view_last[v]; i++)
      p->b[i].pending++;
  }
}

int dp_plan_make(dp_plan *p, const tensor_view *views, int nviews,
                 const int *has_grad, size_t n, size_t cap, size_t align) {
  memset(p, 0, sizeof *p);
  if (align == 0) align = 1;
  size_t top = n - n % align;   /* below: reduce-scatter buckets; above: tail */
  size_t *cut = malloc((size_t)(nviews + 2) * sizeof *cut);
  CHECK_ALLOC(cut, (size_t)(nviews + 2) * sizeof *cut);
  int ncut = 0;
  cut[ncut++] = top;
  size_t cur = 0;
  for (int v = nviews - 1; v >= 0; v--) {
    size_t k = views[v].numel;
    ASSERT(views[v].offset + k <= n);
    if (k == 0) continue;
    if (cur > 0 && (cur + k > cap || cur + k < cur)) {
      cut[ncut++] = views[v].offset + k;
      cur = 0;
    }
    cur += k;
  }
  cut[ncut++] = 0;
  /* Descending cuts, rounded down and deduplicated: bucket boundaries. */
  int nb = 0;
  for (int i = 0; i < ncut; i++) {
    size_t c = cut[i] - cut[i] % align;
    if (c > top) c = top;
    if (nb == 0 || c < cut[nb - 1]) cut[nb++] = c;
  }
  int nbuckets = nb - 1 + (top < n ? 1 : 0);
  p->b = calloc((size_t)(nbuckets > 0 ? nbuckets : 1), sizeof *p->b);
  p->view_first = malloc((size_t)(nviews > 0 ? nviews : 1) * sizeof(int));
  p->view_last = malloc((size_t)(nviews > 0 ? nviews : 1) * sizeof(int));
  if (!p->b || !p->view_first || !p->view_last) {
    free(cut);
    dp_plan_free(p);
    FAIL(ERR_OOM, "out of host memory for %d buckets", nbuckets);
  }
  for (int i = nb - 1; i > 0; i--) {          /* ascending starts */
    dp_bucket *b = &p->b[p->nb++];
    b->start = cut[i];
    b->count = cut[i - 1] - cut[i];
  }
  if (top < n) {
    dp_bucket *b = &p->b[p->nb++];
    b->start = top;
    b->count = n - top;
    b->tail = 1;
  }
  free(cut);

  for (int v = 0; v < nviews; v++) {
    size_t lo = views[v].offset, hi = lo + views[v].numel;
    p->view_first[v] = p->nb;
    p->view_last[v] = -1;
    for (int i = 0; i < p->nb; i++) {
      size_t s = p->b[i].start, e = s + p->b[i].count;
      if (s < hi && lo < e) {
        if (i < p->view_first[v]) p->view_first[v] = i;
        p->view_last[v] = i;
      }
    }
  }
  dp_plan_reset(p, views, nviews, has_grad);

  /* Trim (align 1) to the views with gradients; lay out ZeRO-1 state. */
  size_t state = 0;
  for (int i = 0; i < p->nb; i++) {
    dp_bucket *b = &p->b[i];
    b->active = b->pending > 0;
    if (!b->active) continue;
    if (align == 1) {
      size_t lo = SIZE_MAX, hi = 0;
      for (int v = 0; v < nviews; v++) {
        if (!has_grad[v] || views[v].numel == 0 || p->view_first[v] > i ||
            p->view_last[v] < i)
          continue;
        size_t s = views[v].offset, e = s + views[v].numel;
        if (s < lo) lo = s;
        if (e > hi) hi = e;
      }
      if (lo < b->start) lo = b->start;
      if (hi > b->start + b->count) hi = b->start + b->count;
      b->start = lo;
      b->count = hi - lo;
    }
    b->state_off = state;
    state += b->tail ? b->count : b->count / align;
  }
  p->state_elems = state;
  return 0;
}
