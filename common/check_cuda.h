/* CHECK_CUDA / CHECK_NCCL: a CUDA-family call's status with
 * the library's own message. Allocation failures map to ERR_OOM so the job
 * becomes an "oom" row. Usable from .c files compiled by the C compiler. */
#ifndef TL_CHECK_CUDA_H
#define TL_CHECK_CUDA_H
#include "common/check.h"
#include <cuda_runtime_api.h>

#define CHECK_CUDA(call)                                                     \
  do {                                                                       \
    cudaError_t cuda_rc_ = (call);                                           \
    if (cuda_rc_ != cudaSuccess)                                             \
      return err_set(cuda_rc_ == cudaErrorMemoryAllocation ? ERR_OOM         \
                                                           : ERR_FAIL,       \
                     __FILE__, __LINE__, "%s: %s (%s)", #call,              \
                     cudaGetErrorString(cuda_rc_),                           \
                     cudaGetErrorName(cuda_rc_));                            \
  } while (0)

/* After a kernel launch: catches bad launch configurations at once. */
#define CHECK_LAUNCH() CHECK_CUDA(cudaGetLastError())

#ifdef HAVE_NCCL
#include <nccl.h>
#define CHECK_NCCL(call)                                                     \
  do {                                                                       \
    ncclResult_t nccl_rc_ = (call);                                          \
    if (nccl_rc_ != ncclSuccess)                                             \
      return err_set(ERR_FAIL, __FILE__, __LINE__, "%s: %s", #call,         \
                     ncclGetErrorString(nccl_rc_));                          \
  } while (0)
#endif

#endif
