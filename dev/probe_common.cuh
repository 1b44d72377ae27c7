// dev/probe_common.cuh: what the two GPU probes (ce_probe.cu,
// green_ctx_probe.cu) share: their checks, the xl model's backward product
// shapes at 256 tokens, and the products they time beside the collectives.
// Two GPUs, one process; a failed call prints where and exits.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <nccl.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
#define CB(x) do { cublasStatus_t e_ = (x); if (e_ != CUBLAS_STATUS_SUCCESS) { printf("%s:%d cublas %d\n", __FILE__, __LINE__, (int)e_); exit(1);} } while (0)
#define CN(x) do { ncclResult_t e_ = (x); if (e_ != ncclSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(e_)); exit(1);} } while (0)
enum { G = 2 };
static const int T = 256, D = 1600, F = 6400;
static const size_t AR = 25u << 20;  // 100 MiB of floats

// Seeded values in [-1, 1): products of zeros would draw less power.
__global__ void fill(float *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = (float)(h & 0xffffff) / 8388608.0f - 1.0f;
  }
}

// One GPU's products: y[T,F] = x[T,D] w[F,D]^T; dx[T,D] = y w; dw[F,D] = y^T x.
struct mats { cublasHandle_t h; float *x, *w, *y, *dw; };

// On the current device (GPU i): the handle and the operands, x and w seeded.
static void mats_init(mats &m, int i) {
  CB(cublasCreate(&m.h));
  CK(cudaMalloc(&m.x, sizeof(float) * T * D)); CK(cudaMalloc(&m.w, sizeof(float) * F * D));
  CK(cudaMalloc(&m.y, sizeof(float) * T * F)); CK(cudaMalloc(&m.dw, sizeof(float) * F * D));
  fill<<<264, 256>>>(m.x, (size_t)T * D, 1u + i); fill<<<264, 256>>>(m.w, (size_t)F * D, 7u + i);
  CK(cudaGetLastError());
}

static void gemms(const mats &m, cudaStream_t s, int iters) {
  const float one = 0.03f, zero = 0;  // keeps the values near unit scale
  CB(cublasSetStream(m.h, s));
  for (int k = 0; k < iters; k++) {
    CB(cublasSgemm(m.h, CUBLAS_OP_T, CUBLAS_OP_N, F, T, D, &one, m.w, D, m.x, D, &zero, m.y, F));
    CB(cublasSgemm(m.h, CUBLAS_OP_N, CUBLAS_OP_N, D, T, F, &one, m.w, D, m.y, F, &zero, m.x, D));
    CB(cublasSgemm(m.h, CUBLAS_OP_N, CUBLAS_OP_T, D, F, T, &one, m.x, D, m.y, F, &zero, m.dw, D));
  }
}
