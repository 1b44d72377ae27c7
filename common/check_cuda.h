/* CHECK_CUDA / CHECK_NCCL / CHECK_CUBLAS: a CUDA-family call's status with
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

/* cuBLAS comes with every CUDA build (configure requires it). */
#include <cublas_v2.h>
#define CHECK_CUBLAS(call)                                                   \
  do {                                                                       \
    cublasStatus_t cublas_rc_ = (call);                                      \
    if (cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                 \
      return err_set(cublas_rc_ == CUBLAS_STATUS_ALLOC_FAILED ? ERR_OOM      \
                                                              : ERR_FAIL,    \
                     __FILE__, __LINE__, "%s: %s (%s)", #call,              \
                     cublasGetStatusString(cublas_rc_),                      \
                     cublasGetStatusName(cublas_rc_));                       \
  } while (0)

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
