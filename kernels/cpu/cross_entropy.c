/* Cross-entropy of logits [n, V] against targets [n] on the CPU.
 *
 *   forward   lse[i]    = logsumexp_j logits[i,j]
 *                       = m_i + log(sum_j exp(logits[i,j] - m_i)),
 *                         m_i = max_j logits[i,j]       (saved for backward)
 *             losses[i] = lse[i] - logits[i, targets[i]]
 *   backward  dlogits[i,j] = scale * (exp(logits[i,j] - lse[i])
 *                                     - [j == targets[i]])   (written)
 *             scale = 1/n for a mean loss; dlogits may alias logits.
 *
 * The max and the sum of exponentials are in double. A target outside
 * [0, V) is an error found before anything is written. Rows run in
 * parallel. */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "common/check.h"

#include <math.h>

static int check_targets(const char *op, const int32_t *targets, int n,
                         int vocab) {
  for (int i = 0; i < n; i++)
    if (targets[i] < 0 || targets[i] >= vocab)
      FAIL(ERR_FAIL, "%s: target %d at position %d is outside [0, %d)", op,
           (int)targets[i], i, vocab);
  return 0;
}

int cpu_cross_entropy_fwd(engine *e, const float *logits,
                          const int32_t *targets, float *losses, float *lse,
                          int n, int vocab) {
  TRY(check_targets("k_cross_entropy_fwd", targets, n, vocab));
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int i = 0; i < n; i++) {
    const float *x = logits + (size_t)i * vocab;
    double mx = x[0];
    for (int j = 1; j < vocab; j++)
      if (x[j] > mx) mx = x[j];
    double sum = 0.0;
    for (int j = 0; j < vocab; j++) sum += exp(x[j] - mx);
    double l = mx + log(sum);
    lse[i] = (float)l;
    losses[i] = (float)(l - x[targets[i]]);
  }
  return 0;
}

int cpu_cross_entropy_bwd(engine *e, const float *logits,
                          const int32_t *targets, const float *lse,
                          float *dlogits, int n, int vocab, float scale) {
  TRY(check_targets("k_cross_entropy_bwd", targets, n, vocab));
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (int i = 0; i < n; i++) {
    const float *x = logits + (size_t)i * vocab;
    float *dx = dlogits + (size_t)i * vocab;
    double l = lse[i];
    for (int j = 0; j < vocab; j++) {
      double p = exp(x[j] - l) - (j == targets[i]);
      dx[j] = (float)(scale * p);
    }
  }
  return 0;
}

int cpu_cross_entropy_bwd_ex(engine *e, const float *logits,
                             const int32_t *targets, const float *lse,
                             void *dlogits, dtype dt, int n, int vocab,
                             float scale) {
  cpu_stage s;   /* a 16-bit dlogits: the fp32 gradient rounded */
  cpu_stage_init(&s, e);
  float *fd = cpu_stage_out(&s, dlogits, dt, (size_t)n * vocab, 0);
  return cpu_stage_end(&s, cpu_stage_ok(&s)
                               ? cpu_cross_entropy_bwd(e, logits, targets, lse,
                                                       fd, n, vocab, scale)
                               : 0);
}
