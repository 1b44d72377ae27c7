/* comm_nccl.c's bridge to NCCL's device API (peer_nccl.cu, nvcc). */
#ifndef TL_PEER_NCCL_H
#define TL_PEER_NCCL_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* peers[r] = where rank r's copy of the registered window w lies in this
 * process, r < n; runs one small kernel on s and waits for it. */
int tl_nccl_window_peers(ncclWindow_t w, int n, void **peers, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
