// tools/green_ctx_probe.cu: do cuBLAS SGEMMs slow down beside NCCL
// all-reduces, and do CUDA green contexts (separate SM partitions for the
// products and the collectives) remove it? One process drives 2 GPUs
// (ncclCommInitAll); each runs 40 triples of SGEMMs of the xl model's
// backward shapes at 256 tokens (the ddp experiments' 2 x 128 per GPU) on
// one stream while 60 all-reduces of 100 MiB run on another; GPU 0's
// product time is printed for plain streams and for green contexts with
// COMM_SMS SMs (default 16) given to the collectives. Not part of the
// build (it needs the driver API and two GPUs):
//   nvcc -O2 -o green_ctx_probe tools/green_ctx_probe.cu -lcublas -lnccl -lcuda
//   COMM_SMS=16 ./green_ctx_probe
// Results on 2 x H200 are in README.md (data parallelism, what does not
// work yet).
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <nccl.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
#define CD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char *s; cuGetErrorString(e_, &s); printf("%s:%d %s\n", __FILE__, __LINE__, s); exit(1);} } while (0)
#define CB(x) do { cublasStatus_t e_ = (x); if (e_ != CUBLAS_STATUS_SUCCESS) { printf("%s:%d cublas %d\n", __FILE__, __LINE__, (int)e_); exit(1);} } while (0)
#define CN(x) do { ncclResult_t e_ = (x); if (e_ != ncclSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(e_)); exit(1);} } while (0)
enum { G = 2 };
static const int T = 256, D = 1600, F = 6400;
struct gpu { cudaStream_t cs, ks, gcs, gks; cublasHandle_t h; float *x, *w, *y, *dw, *ar; int sms; };
static gpu g[G];
static ncclComm_t comms[G];
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

static void gemms(int i, cudaStream_t s, int iters) {
  const float one = 0.03f, zero = 0;  // keeps the values near unit scale
  CB(cublasSetStream(g[i].h, s));
  for (int k = 0; k < iters; k++) {
    // y[T,F] = x[T,D] w[F,D]^T ; dx[T,D] = y w ; dw[F,D] = y^T x
    CB(cublasSgemm(g[i].h, CUBLAS_OP_T, CUBLAS_OP_N, F, T, D, &one, g[i].w, D, g[i].x, D, &zero, g[i].y, F));
    CB(cublasSgemm(g[i].h, CUBLAS_OP_N, CUBLAS_OP_N, D, T, F, &one, g[i].w, D, g[i].y, F, &zero, g[i].x, D));
    CB(cublasSgemm(g[i].h, CUBLAS_OP_N, CUBLAS_OP_T, D, F, T, &one, g[i].x, D, g[i].y, F, &zero, g[i].dw, D));
  }
}

// ms of `iters` gemm triples on GPU 0 (both GPUs run them), with `ar`
// all-reduces running beside on the comm streams.
static float run(int green, int ar, int target) {
  cudaEvent_t a, b;
  CK(cudaSetDevice(0)); CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CB(cublasSetSmCountTarget(g[i].h, target)); CK(cudaDeviceSynchronize()); }
  if (ar) {
    CN(ncclGroupStart());
    for (int r = 0; r < ar; r++)
      for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CN(ncclAllReduce(g[i].ar, g[i].ar, AR, ncclFloat, ncclSum, comms[i], green ? g[i].gks : g[i].ks)); }
    CN(ncclGroupEnd());
  }
  for (int i = 0; i < G; i++) {
    CK(cudaSetDevice(i));
    cudaStream_t s = green ? g[i].gcs : g[i].cs;
    if (i == 0) CK(cudaEventRecord(a, s));
    gemms(i, s, 40);
    if (i == 0) CK(cudaEventRecord(b, s));
  }
  for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CK(cudaDeviceSynchronize()); }
  float ms; CK(cudaSetDevice(0)); CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  return ms;
}

int main() {
  int devs[G] = {0, 1};
  CN(ncclCommInitAll(comms, G, devs));
  CD(cuInit(0));
  int csms = atoi(getenv("COMM_SMS") ? getenv("COMM_SMS") : "16");
  for (int i = 0; i < G; i++) {
    CK(cudaSetDevice(i));
    CK(cudaDeviceGetAttribute(&g[i].sms, cudaDevAttrMultiProcessorCount, i));
    CK(cudaStreamCreateWithFlags(&g[i].cs, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&g[i].ks, cudaStreamNonBlocking));
    CB(cublasCreate(&g[i].h));
    CK(cudaMalloc(&g[i].x, sizeof(float) * T * D)); CK(cudaMalloc(&g[i].w, sizeof(float) * F * D));
    CK(cudaMalloc(&g[i].y, sizeof(float) * T * F)); CK(cudaMalloc(&g[i].dw, sizeof(float) * F * D));
    CK(cudaMalloc(&g[i].ar, sizeof(float) * AR));
    fill<<<264, 256>>>(g[i].x, (size_t)T * D, 1u + i); fill<<<264, 256>>>(g[i].w, (size_t)F * D, 7u + i);
    fill<<<264, 256>>>(g[i].ar, AR, 13u + i); CK(cudaGetLastError());
    // green contexts: csms SMs for the collectives, the rest for compute
    CUdevice dev; CD(cuDeviceGet(&dev, i));
    CUdevResource all, part[1], rest; unsigned n = 1;
    CD(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
    CD(cuDevSmResourceSplitByCount(part, &n, &all, &rest, 0, csms));
    CUdevResourceDesc dc, dk; CD(cuDevResourceGenerateDesc(&dk, part, 1)); CD(cuDevResourceGenerateDesc(&dc, &rest, 1));
    CUgreenCtx gc, gk; CD(cuGreenCtxCreate(&gc, dc, dev, CU_GREEN_CTX_DEFAULT_STREAM)); CD(cuGreenCtxCreate(&gk, dk, dev, CU_GREEN_CTX_DEFAULT_STREAM));
    CUstream s1, s2; CD(cuGreenCtxStreamCreate(&s1, gc, CU_STREAM_NON_BLOCKING, 0)); CD(cuGreenCtxStreamCreate(&s2, gk, CU_STREAM_NON_BLOCKING, 0));
    g[i].gcs = (cudaStream_t)s1; g[i].gks = (cudaStream_t)s2;
    if (i == 0) printf("GPU %d: %d SMs; green split: compute %u SMs, comm %u SMs (asked %d)\n", i, g[i].sms, rest.sm.smCount, part[0].sm.smCount, csms);
    if (i == 0) g[0].sms = rest.sm.smCount;  // compute partition size
  }
  int cp = g[0].sms;
  run(0, 4, 0); run(1, 4, cp);  // warm up both paths
  for (int rep = 0; rep < 2; rep++) {
    printf("plain, alone, all SMs:           %.2f ms\n", run(0, 0, 0));
    printf("plain, beside 60 all-reduces:     %.2f ms\n", run(0, 60, 0));
    printf("plain, beside, target %d SMs:    %.2f ms\n", cp, run(0, 60, cp));
    printf("green, alone, %d SMs:            %.2f ms\n", cp, run(1, 0, cp));
    printf("green, beside 60 all-reduces:     %.2f ms\n", run(1, 60, cp));
  }
  // all-reduce time alone on each path
  for (int green = 0; green < 2; green++) {
    cudaEvent_t a, b; CK(cudaSetDevice(0)); CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    cudaStream_t s0 = green ? g[0].gks : g[0].ks;
    CK(cudaEventRecord(a, s0));
    CN(ncclGroupStart());
    for (int r = 0; r < 20; r++) for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CN(ncclAllReduce(g[i].ar, g[i].ar, AR, ncclFloat, ncclSum, comms[i], green ? g[i].gks : g[i].ks)); }
    CN(ncclGroupEnd());
    CK(cudaSetDevice(0)); CK(cudaEventRecord(b, s0)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
    printf("%s: 100 MiB all-reduce %.3f ms (alone)\n", green ? "green comm partition" : "plain stream", ms / 20);
  }
  printf("probe done\n");
  return 0;
}
