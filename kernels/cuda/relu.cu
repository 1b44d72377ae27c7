/* ReLU on the CUDA engine, elementwise over n elements.
 *
 *   forward   y = max(x, 0)        (NaN stays NaN, as PyTorch's relu)
 *   backward  dx = dy where x > 0, else 0                      (written)
 *
 * The same comparisons as the CPU engine, so results are equal bit for bit.
 * Grid-stride loops; each thread reads an element before writing it, so y
 * may alias x and dx dy. No float4 path: ReLU serves the toy model, whose
 * tensors are a few hundred elements. */
#include "kernels/cuda/common.cuh"

enum { THREADS = 256 };

__global__ void relu_fwd_k(const float *x, float *y, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride)
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

__global__ void relu_bwd_k(const float *dy, const float *x, float *dx,
                           size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride)
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

int cuda_relu_fwd(engine *e, const float *x, float *y, size_t n) {
  relu_fwd_k<<<cuda_grid(e, n, THREADS), THREADS, 0, cuda_stream(e)>>>(x, y,
                                                                        n);
  CHECK_LAUNCH();
  return 0;
}

int cuda_relu_bwd(engine *e, const float *dy, const float *x, float *dx,
                  size_t n) {
  relu_bwd_k<<<cuda_grid(e, n, THREADS), THREADS, 0,
               cuda_stream(e)>>>(dy, x, dx, n);
  CHECK_LAUNCH();
  return 0;
}
