// dev/green_ctx_probe.cu: do cuBLAS SGEMMs slow down beside NCCL
// all-reduces, and do CUDA green contexts (separate SM partitions for the
// products and the collectives) remove it? One process drives 2 GPUs
// (ncclCommInitAll); each runs 40 triples of SGEMMs of the xl model's
// backward shapes at 256 tokens (the ddp experiments' 2 x 128 per GPU) on
// one stream while 60 all-reduces of 100 MiB run on another; GPU 0's
// product time is printed for plain streams and for green contexts with
// COMM_SMS SMs (default 16) given to the collectives. Needs the driver
// API (green contexts: CUDA >= 12.4) and two GPUs; build with
// `make -C dev green_ctx_probe`, run as `COMM_SMS=16 dev/green_ctx_probe`.
#include "probe_common.cuh"
#include <cuda.h>
#define CD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char *s; cuGetErrorString(e_, &s); printf("%s:%d %s\n", __FILE__, __LINE__, s); exit(1);} } while (0)
struct gpu { cudaStream_t cs, ks, gcs, gks; mats m; float *ar; int sms; };
static gpu g[G];
static ncclComm_t comms[G];

// ms of `iters` gemm triples on GPU 0 (both GPUs run them), with `ar`
// all-reduces running beside on the comm streams.
static float run(int green, int ar, int target) {
  cudaEvent_t a, b;
  CK(cudaSetDevice(0)); CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CB(cublasSetSmCountTarget(g[i].m.h, target)); CK(cudaDeviceSynchronize()); }
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
    gemms(g[i].m, s, 40);
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
    mats_init(g[i].m, i);
    CK(cudaMalloc(&g[i].ar, sizeof(float) * AR));
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
