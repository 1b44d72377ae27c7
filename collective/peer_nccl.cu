/* The addresses of a registered window's copies on the other ranks.
 *
 * NCCL 2.28 hands them out to device code only (ncclGetPeerPointer, in
 * nccl_device.h): one thread asks for every rank's and the host copies the
 * answers back. They hold while the window stays registered, so the host
 * can pass them to any kernel as plain pointers (DDP's grad_sync peer
 * gives them to AdamW, which then reads the other ranks' gradients itself). */
#include "config.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include "common/check.h"
#include "common/check_cuda.h"
#include "collective/peer_nccl.h"

#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0) && \
    __has_include(<nccl_device.h>)
#include <nccl_device.h>

__global__ void k_window_peers(ncclWindow_t w, int n, void **out) {
  for (int r = threadIdx.x; r < n; r += blockDim.x)
    out[r] = ncclGetPeerPointer(w, 0, r);
}

static int ask(ncclWindow_t w, int n, void **dev, void **peers, cudaStream_t s) {
  k_window_peers<<<1, 32, 0, s>>>(w, n, dev);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpyAsync(peers, dev, (size_t)n * sizeof *dev,
                             cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  return 0;
}

extern "C" int tl_nccl_window_peers(ncclWindow_t w, int n, void **peers,
                                    cudaStream_t s) {
  void **dev = NULL;
  CHECK_CUDA(cudaMalloc((void **)&dev, (size_t)n * sizeof *dev));
  int rc = ask(w, n, dev, peers, s);
  cudaError_t frc = cudaFree(dev);
  TRY(rc);
  CHECK_CUDA(frc);
  return 0;
}
#else
extern "C" int tl_nccl_window_peers(ncclWindow_t w, int n, void **peers,
                                    cudaStream_t s) {
  FAIL(ERR_FAIL, "comm_window_peers: built against an NCCL without its "
       "device API (nccl_device.h and ncclGetPeerPointer, NCCL >= 2.28)");
}
#endif
