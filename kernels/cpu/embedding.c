/* Token embedding on the CPU.
 *
 *   forward   out[i,:] = table[ids[i],:]          i < n; table [V,D], out [n,D]
 *   backward  dtable[ids[i],:] += dout[i,:]       (accumulated; repeated ids
 *                                                  add up)
 *
 * An id outside [0, V) is an error, found before anything is written. The
 * backward is parallel over blocks of columns: every thread walks all n rows
 * but owns its columns of dtable, so repeated ids never race and the sum
 * order (i ascending) is the same for any thread count. */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "common/check.h"

#include <string.h>

enum { COLS = 64 };   /* columns per parallel block in backward */

static int check_ids(const char *op, const int32_t *ids, int n, int vocab) {
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      FAIL(ERR_FAIL, "%s: token id %d at position %d is outside [0, %d)", op,
           (int)ids[i], i, vocab);
  return 0;
}

int cpu_embedding_fwd(engine *e, const int32_t *ids, const float *table,
                      float *out, int n, int d, int vocab) {
  TRY(check_ids("k_embedding_fwd", ids, n, vocab));
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int i = 0; i < n; i++)
    memcpy(out + (size_t)i * d, table + (size_t)ids[i] * d,
           (size_t)d * sizeof(float));
  return 0;
}

int cpu_embedding_bwd(engine *e, const int32_t *ids, const float *dout,
                      float *dtable, int n, int d, int vocab) {
  TRY(check_ids("k_embedding_bwd", ids, n, vocab));
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int j0 = 0; j0 < d; j0 += COLS) {
    int j1 = j0 + COLS < d ? j0 + COLS : d;
    for (int i = 0; i < n; i++) {
      const float *src = dout + (size_t)i * d;
      float *dst = dtable + (size_t)ids[i] * d;
      for (int j = j0; j < j1; j++) dst[j] += src[j];
    }
  }
  return 0;
}
