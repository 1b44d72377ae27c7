/* The GPU half of job kind `accumulation` (jobs/accumulation.c): the six
 * sequential sums of the handout's mixed_precision_accumulation, in one GPU
 * thread, with the device's own arithmetic:
 *
 *   out[0] fp32 s += fp32 x           out[3] fp32 s += __half2float(x16)
 *   out[1] fp16 s = __hadd(s, x16)    out[4] bf16 s = __hadd(s, xb16)
 *   out[2] fp32 s += float(x16)       out[5] fp32 s += float(xb16)
 *
 * __hadd rounds the exact sum to nearest even, as PyTorch's float16 and
 * bfloat16 additions do. out[2] is the handout's implicit promotion, which
 * in CUDA C++ is a conversion operator (C++ cannot pick among __half's
 * several without being told): the same exact conversion as out[3]'s
 * explicit cast, so the two agree, as the handout's do. One thread on purpose: the handout's loop is
 * sequential, and a parallel sum would round differently. */
#include "config.h"
#include "common/check.h"
#include "common/check_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string.h>

__global__ void accumulate_k(long long n, float x32, __half x16,
                             __nv_bfloat16 xb16, float *out) {
  float s32 = 0.0f, s3 = 0.0f, s4 = 0.0f, s6 = 0.0f;
  __half s16 = __float2half_rn(0.0f);
  __nv_bfloat16 sb = __float2bfloat16_rn(0.0f);
  for (long long i = 0; i < n; i++) {
    s32 += x32;
    s16 = __hadd(s16, x16);
    s3 += static_cast<float>(x16);   /* PyTorch's promotion: a conversion */
    s4 += __half2float(x16);
    sb = __hadd(sb, xb16);
    s6 += static_cast<float>(xb16);
  }
  out[0] = s32;
  out[1] = __half2float(s16);
  out[2] = s3;
  out[3] = s4;
  out[4] = __bfloat162float(sb);
  out[5] = s6;
}

/* Frees what it allocated on every path; the first failure is reported. */
static int run_sums(long long n, float x32, unsigned short x16,
                    unsigned short xb16, float *dev, double out[6]) {
  __half h;
  __nv_bfloat16 b;
  memcpy(&h, &x16, sizeof h);
  memcpy(&b, &xb16, sizeof b);
  accumulate_k<<<1, 1>>>(n, x32, h, b, dev);
  CHECK_LAUNCH();
  float host[6];
  CHECK_CUDA(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 6; i++) out[i] = host[i];
  return 0;
}

extern "C" int accumulation_cuda(long long n, float x32, unsigned short x16,
                                 unsigned short xb16, double out[6]) {
  CHECK_CUDA(cudaSetDevice(0));
  float *dev = NULL;
  CHECK_CUDA(cudaMalloc(&dev, 6 * sizeof(float)));
  int rc = run_sums(n, x32, x16, xb16, dev, out);
  cudaError_t frc = cudaFree(dev);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    return rc;
  }
  CHECK_CUDA(frc);
  return 0;
}
