/* ReLU on the CPU, elementwise over n elements.
 *
 *   forward   y = max(x, 0)        (NaN stays NaN, as PyTorch's relu)
 *   backward  dx = dy where x > 0, else 0                      (written)
 *
 * The backward's x may be the forward's output (> 0 exactly where the input
 * was), and at x = 0 the gradient is 0, as PyTorch's threshold_backward.
 * Each element is read before it is written, so y may alias x and dx dy. */
#include "config.h"
#include "kernels/cpu/cpu.h"

int cpu_relu_fwd(engine *e, const float *x, float *y, size_t n) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
  return 0;
}

int cpu_relu_bwd(engine *e, const float *dy, const float *x, float *dx,
                 size_t n) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
  return 0;
}
