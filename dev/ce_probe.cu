// dev/ce_probe.cu: do cuBLAS SGEMMs still slow down beside NCCL
// collectives that move their bytes with the copy engines? NCCL 2.28 runs
// all-gather on the copy engines (no thread blocks) when the communicator
// has the zero-CTA policy and both buffers lie in symmetric windows
// (ncclMemAlloc + ncclCommWindowRegister). One process drives 2 GPUs; each
// runs 40 triples of SGEMMs of the xl model's backward shapes at 256 tokens
// on one stream while 60 collectives of 100 MiB per rank run on another:
// SM all-reduces (default policy) and copy-engine all-gathers. GPU 0's
// product time and each collective's time alone are printed. Needs two
// GPUs and NCCL >= 2.28; build with `make -C dev ce_probe` (dev/README.md).
#include "probe_common.cuh"
struct gpu { cudaStream_t cs, ks; mats m; float *ar, *sym, *gath; };
static gpu g[G];
static ncclComm_t sm[G], ce[G];

// kind 0: SM all-reduce; 1: copy-engine all-gather (symmetric buffers);
// 2: the same in place (no copy of a rank's own block); 3: a local
// device-to-device copy of 100 MiB (copy engine, no NVLink)
static void colls(int kind, int n) {
  if (kind == 3) {
    for (int r = 0; r < n; r++)
      for (int i = 0; i < G; i++) {
        CK(cudaSetDevice(i));
        CK(cudaMemcpyAsync(g[i].gath, g[i].sym, sizeof(float) * AR, cudaMemcpyDeviceToDevice, g[i].ks));
      }
    return;
  }
  CN(ncclGroupStart());
  for (int r = 0; r < n; r++)
    for (int i = 0; i < G; i++) {
      CK(cudaSetDevice(i));
      if (kind == 0) CN(ncclAllReduce(g[i].ar, g[i].ar, AR, ncclFloat, ncclSum, sm[i], g[i].ks));
      else if (kind == 1) CN(ncclAllGather(g[i].sym, g[i].gath, AR, ncclFloat, ce[i], g[i].ks));
      else CN(ncclAllGather(g[i].gath + i * AR, g[i].gath, AR, ncclFloat, ce[i], g[i].ks));
    }
  CN(ncclGroupEnd());
}

static float run(int kind, int n) {
  cudaEvent_t a, b;
  CK(cudaSetDevice(0)); CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CK(cudaDeviceSynchronize()); }
  if (n) colls(kind, n);
  for (int i = 0; i < G; i++) {
    CK(cudaSetDevice(i));
    if (i == 0) CK(cudaEventRecord(a, g[i].cs));
    gemms(g[i].m, g[i].cs, 40);
    if (i == 0) CK(cudaEventRecord(b, g[i].cs));
  }
  for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CK(cudaDeviceSynchronize()); }
  float ms; CK(cudaSetDevice(0)); CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  return ms;
}

static float alone(int kind) {
  cudaEvent_t a, b; CK(cudaSetDevice(0)); CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CK(cudaDeviceSynchronize()); }
  CK(cudaSetDevice(0)); CK(cudaEventRecord(a, g[0].ks));
  colls(kind, 20);
  CK(cudaSetDevice(0)); CK(cudaEventRecord(b, g[0].ks)); CK(cudaEventSynchronize(b));
  float ms; CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  return ms / 20;
}

int main() {
  int devs[G] = {0, 1};
  CN(ncclCommInitAll(sm, G, devs));
  ncclUniqueId id; CN(ncclGetUniqueId(&id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.CTAPolicy = NCCL_CTA_POLICY_ZERO;
  CN(ncclGroupStart());
  for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CN(ncclCommInitRankConfig(&ce[i], G, id, i, &cfg)); }
  CN(ncclGroupEnd());
  ncclWindow_t ws[G], wg[G];
  for (int i = 0; i < G; i++) {
    CK(cudaSetDevice(i));
    CK(cudaStreamCreateWithFlags(&g[i].cs, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&g[i].ks, cudaStreamNonBlocking));
    mats_init(g[i].m, i);
    CK(cudaMalloc(&g[i].ar, sizeof(float) * AR));
    CN(ncclMemAlloc((void **)&g[i].sym, sizeof(float) * AR));
    CN(ncclMemAlloc((void **)&g[i].gath, sizeof(float) * AR * G));
    fill<<<264, 256>>>(g[i].ar, AR, 13u + i); fill<<<264, 256>>>(g[i].sym, AR, 17u + i);
    CK(cudaGetLastError());
  }
  CN(ncclGroupStart());
  for (int i = 0; i < G; i++) {
    CK(cudaSetDevice(i));
    CN(ncclCommWindowRegister(ce[i], g[i].sym, sizeof(float) * AR, &ws[i], NCCL_WIN_COLL_SYMMETRIC));
    CN(ncclCommWindowRegister(ce[i], g[i].gath, sizeof(float) * AR * G, &wg[i], NCCL_WIN_COLL_SYMMETRIC));
  }
  CN(ncclGroupEnd());
  // check the gather: GPU 0's block 1 must equal GPU 1's buffer
  colls(1, 1);
  for (int i = 0; i < G; i++) { CK(cudaSetDevice(i)); CK(cudaDeviceSynchronize()); }
  {
    float *h0 = (float *)malloc(sizeof(float) * AR), *h1 = (float *)malloc(sizeof(float) * AR);
    CK(cudaSetDevice(0)); CK(cudaMemcpy(h0, g[0].gath + AR, sizeof(float) * AR, cudaMemcpyDeviceToHost));
    CK(cudaSetDevice(1)); CK(cudaMemcpy(h1, g[1].sym, sizeof(float) * AR, cudaMemcpyDeviceToHost));
    size_t bad = 0; for (size_t k = 0; k < AR; k++) bad += h0[k] != h1[k];
    printf("copy-engine all-gather check: %zu of %zu differ\n", bad, AR);
    free(h0); free(h1);
  }
  run(0, 4); run(1, 4);
  for (int rep = 0; rep < 2; rep++) {
    printf("products alone:                        %.2f ms\n", run(0, 0));
    printf("products beside 60 SM all-reduces:      %.2f ms\n", run(0, 60));
    printf("products beside 60 CE all-gathers:      %.2f ms\n", run(1, 60));
    printf("products beside 60 in-place CE all-gathers: %.2f ms\n", run(2, 60));
    printf("products beside 60 local 100 MiB copies: %.2f ms\n", run(3, 60));
  }
  printf("100 MiB SM all-reduce alone: %.3f ms\n", alone(0));
  printf("100 MiB per rank CE all-gather alone: %.3f ms\n", alone(1));
  printf("100 MiB per rank in-place CE all-gather alone: %.3f ms\n", alone(2));
  printf("100 MiB local copy alone: %.3f ms\n", alone(3));
  printf("probe done\n");
  return 0;
}
