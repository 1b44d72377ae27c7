/* The time a set of intervals covers: a kernel profile's busy GPU time,
 * kernels that overlap (streams side by side) counted once. */
#ifndef TL_INTERVALS_H
#define TL_INTERVALS_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline int intervals_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The measure of the union of [start[i], end[i]) over n intervals (each
 * start <= its end; any order), in their unit. The union depends only on
 * how many intervals have begun and ended by each time, so start and end
 * are each sorted in place and swept together. */
static inline uint64_t intervals_covered(uint64_t *start, uint64_t *end,
                                         size_t n) {
  qsort(start, n, sizeof *start, intervals_cmp_u64);
  qsort(end, n, sizeof *end, intervals_cmp_u64);
  uint64_t covered = 0, last = 0;
  size_t i = 0, j = 0, open = 0;
  while (j < n) {
    int begins = i < n && start[i] <= end[j];
    uint64_t t = begins ? start[i] : end[j];
    if (open > 0) covered += t - last;
    last = t;
    if (begins) {
      open++;
      i++;
    } else {
      open--;
      j++;
    }
  }
  return covered;
}
#endif
