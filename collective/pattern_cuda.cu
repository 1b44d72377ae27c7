/* Test data for collectives on the GPU (see pattern.h): fill a device buffer
 * with the pattern, and check a reduced device buffer against the table of
 * expected values, counting mismatches on the device and bringing back only
 * the count, the first bad index and the value found there.
 *
 * Kernels then launchers, one template per element type; everything runs in
 * the caller's stream, so a fill is ordered before the collective that reads
 * it and a check after the collective that wrote it. */
#include "config.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common/check.h"
#include "common/check_cuda.h"
#include "collective/pattern.h"

/* ---- element conversions ------------------------------------------------ */

template <typename T> __device__ T from_int(int v);
template <> __device__ float from_int<float>(int v) { return (float)v; }
template <> __device__ double from_int<double>(int v) { return (double)v; }
template <> __device__ int from_int<int>(int v) { return v; }
template <> __device__ __half from_int<__half>(int v) {
  return __int2half_rn(v);
}
template <> __device__ __nv_bfloat16 from_int<__nv_bfloat16>(int v) {
  return __int2bfloat16_rn(v);
}

template <typename T> __device__ double to_double(T x) { return (double)x; }
template <> __device__ double to_double<__half>(__half x) {
  return (double)__half2float(x);
}
template <> __device__ double to_double<__nv_bfloat16>(__nv_bfloat16 x) {
  return (double)__bfloat162float(x);
}

/* ---- kernels -------------------------------------------------------------- */

/* What a check leaves on the device for the host to read back. */
struct check_out {
  unsigned long long count;
  unsigned long long first;   /* smallest bad index; ~0 when none */
  double got;                 /* the element at `first` */
};

template <typename T>
__global__ void fill_kernel(T *buf, size_t n, size_t first, uint32_t seed,
                            int rank) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride)
    buf[i] = from_int<T>(pattern_value(pattern_key(first + i, seed), rank));
}

/* The table travels as a kernel argument (488 bytes, well within limits). */
template <typename T>
__global__ void check_kernel(const T *buf, size_t n, size_t first,
                             uint32_t seed, pattern_table want,
                             check_out *out) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if (to_double(buf[i]) != want.want[pattern_key(first + i, seed)]) {
      atomicAdd(&out->count, 1ULL);
      atomicMin(&out->first, (unsigned long long)i);
    }
  }
}

/* After check_kernel, in the same stream: the value at the first bad index,
 * converted on the device so the host needs no f16 / bf16 decoding. */
template <typename T>
__global__ void read_first_kernel(const T *buf, check_out *out) {
  if (out->count > 0) out->got = to_double(buf[out->first]);
}

/* ---- launchers ------------------------------------------------------------ */

static unsigned grid_for(size_t n) {
  size_t blocks = (n + 255) / 256;
  return (unsigned)(blocks < 4096 ? blocks : 4096);
}

template <typename T>
static int fill_t(void *buf, size_t n, size_t first, uint32_t seed, int rank,
                  cudaStream_t s) {
  fill_kernel<T><<<grid_for(n), 256, 0, s>>>((T *)buf, n, first, seed, rank);
  CHECK_LAUNCH();
  return 0;
}

template <typename T>
static int check_t(const void *buf, size_t n, size_t first, uint32_t seed,
                   const pattern_table *want, check_out *d_out,
                   cudaStream_t s) {
  check_kernel<T><<<grid_for(n), 256, 0, s>>>((const T *)buf, n, first, seed,
                                              *want, d_out);
  CHECK_LAUNCH();
  read_first_kernel<T><<<1, 1, 0, s>>>((const T *)buf, d_out);
  CHECK_LAUNCH();
  return 0;
}

extern "C" int pattern_fill_cuda(void *buf, comm_dtype t, size_t n,
                                 size_t first, uint32_t seed, int rank,
                                 void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (n == 0) return 0;
  switch (t) {
  case COMM_F32: TRY(fill_t<float>(buf, n, first, seed, rank, s)); break;
  case COMM_F64: TRY(fill_t<double>(buf, n, first, seed, rank, s)); break;
  case COMM_I32: TRY(fill_t<int>(buf, n, first, seed, rank, s)); break;
  case COMM_F16: TRY(fill_t<__half>(buf, n, first, seed, rank, s)); break;
  case COMM_BF16:
    TRY(fill_t<__nv_bfloat16>(buf, n, first, seed, rank, s));
    break;
  }
  return 0;
}

static int check_into(const void *buf, comm_dtype t, size_t n, size_t first,
                      uint32_t seed, const pattern_table *want,
                      check_out *d_out, check_out *h_out, cudaStream_t s) {
  CHECK_CUDA(cudaMemsetAsync(&d_out->count, 0, sizeof d_out->count, s));
  CHECK_CUDA(cudaMemsetAsync(&d_out->first, 0xff, sizeof d_out->first, s));
  switch (t) {
  case COMM_F32: TRY(check_t<float>(buf, n, first, seed, want, d_out, s));
    break;
  case COMM_F64: TRY(check_t<double>(buf, n, first, seed, want, d_out, s));
    break;
  case COMM_I32: TRY(check_t<int>(buf, n, first, seed, want, d_out, s));
    break;
  case COMM_F16: TRY(check_t<__half>(buf, n, first, seed, want, d_out, s));
    break;
  case COMM_BF16:
    TRY(check_t<__nv_bfloat16>(buf, n, first, seed, want, d_out, s));
    break;
  }
  CHECK_CUDA(cudaMemcpyAsync(h_out, d_out, sizeof *h_out,
                             cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  return 0;
}

extern "C" int pattern_check_cuda(const void *buf, comm_dtype t, size_t n,
                                  size_t first, uint32_t seed,
                                  const pattern_table *want,
                                  pattern_mismatch *bad, void *stream) {
  *bad = pattern_mismatch{0, 0, 0.0, 0.0};
  if (n == 0) return 0;
  check_out *d_out = NULL, h_out;
  CHECK_CUDA(cudaMalloc((void **)&d_out, sizeof *d_out));
  int rc = check_into(buf, t, n, first, seed, want, d_out, &h_out,
                      (cudaStream_t)stream);
  cudaError_t freed = cudaFree(d_out);
  TRY(rc);
  CHECK_CUDA(freed);
  if (h_out.count > 0) {
    bad->count = (size_t)h_out.count;
    bad->index = (size_t)h_out.first;
    bad->got = h_out.got;
    bad->want = want->want[pattern_key(first + bad->index, seed)];
  }
  return 0;
}
