/* The CUDA engine: device memory from cudaMalloc, one non-blocking stream on
 * which every operation is queued, a cuBLAS handle bound to that stream,
 * and the scratch workspace of the operations. The operations themselves
 * live one family per file (cuda_ops.h).
 *
 * Memory
 * - alloc is cudaMalloc (256-byte aligned; 0 bytes still gives a real
 *   pointer). Failure is ERR_OOM naming the bytes, the tag, what this engine
 *   already holds and the GPU's free / total memory.
 * - free waits for the stream first: cudaFree of memory a queued kernel
 *   still reads would be a use after free.
 * - upload and download copy on the stream and wait for it, so a host
 *   buffer may be reused (upload) or read (download) as soon as they
 *   return. memset0 and copy are queued like an operation.
 * - The cuBLAS workspace (32 MiB, tag "workspace.cublas") and the ops'
 *   scratch (tag "workspace", grown on demand) are allocated through
 *   eng_alloc, so the accounting shows every byte the engine takes; cuBLAS
 *   is given its workspace and allocates nothing itself.
 *
 * Precision: cuBLAS runs in CUBLAS_DEFAULT_MATH with CUBLAS_COMPUTE_32F, so
 * fp32 products are true fp32 (no TF32), as PyTorch's default.
 *
 * eng_sync and eng_download also report a token id or target that a kernel
 * found outside [0, V) (cuda_ops.h). */
#include "config.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/kprof.h"
#include "common/check.h"
#include "common/check_cuda.h"

#include <stdlib.h>
#include <string.h>

enum { BLAS_WORKSPACE = 32 << 20 };   /* cuBLAS's advice for Hopper */
static const size_t WS_ROUND = (size_t)1 << 20;

/* ---- workspace and grid sizes ------------------------------------------ */

int cuda_workspace(engine *e, size_t bytes, void **p) {
  cuda_engine *c = cuda_impl(e);
  if (bytes > c->ws_bytes) {
    size_t want = (bytes + WS_ROUND - 1) / WS_ROUND * WS_ROUND;
    if (c->ws) {
      TRY(cuda_release(e, c->ws));
      c->ws = NULL;
      c->ws_bytes = 0;
    }
    TRY(eng_alloc(e, want, "workspace", &c->ws));
    c->ws_bytes = want;
  }
  *p = c->ws;
  return 0;
}

int cuda_release(engine *e, void *p) {
  cuda_engine *c = cuda_impl(e);
  if (eng_recording(e))
    FAIL(ERR_FAIL, "an operation outgrew its scratch while recording a "
         "CUDA graph (run the work once before recording it)");
  if (c->graphs == 0) {
    CHECK_CUDA(cudaStreamSynchronize(cuda_stream(e)));
    eng_free(e, p);
    return 0;
  }
  if (c->nretired == c->cap_retired) {
    int cap = c->cap_retired ? 2 * c->cap_retired : 8;
    void **r = realloc(c->retired, (size_t)cap * sizeof *r);
    CHECK_ALLOC(r, (size_t)cap * sizeof *r);
    c->retired = r;
    c->cap_retired = cap;
  }
  c->retired[c->nretired++] = p;
  return 0;
}

unsigned cuda_grid(const engine *e, size_t work, int threads) {
  (void)e;
  size_t blocks = (work + (size_t)threads - 1) / (size_t)threads;
  size_t cap = 0x7fffffff;   /* gridDim.x's limit */
  if (blocks > cap) blocks = cap;
  return blocks ? (unsigned)blocks : 1u;
}

/* ---- device-side checks --------------------------------------------------- */

static int status_reset(engine *e) {
  cuda_engine *c = cuda_impl(e);
  CHECK_CUDA(cudaMemsetAsync(c->status, 0xff, sizeof *c->status,
                             cuda_stream(e)));
  CHECK_CUDA(cudaStreamSynchronize(cuda_stream(e)));
  *(volatile int *)c->bad_flag = 0;
  return 0;
}

/* After the stream is idle: fail if a kernel found a bad id or target. */
static int status_report(engine *e) {
  cuda_engine *c = cuda_impl(e);
  if (!*(volatile int *)c->bad_flag) return 0;
  cuda_status st;
  CHECK_CUDA(cudaMemcpyAsync(&st, c->status, sizeof st, cudaMemcpyDeviceToHost,
                             cuda_stream(e)));
  CHECK_CUDA(cudaStreamSynchronize(cuda_stream(e)));
  TRY(status_reset(e));
  static const char *const op[CUDA_CHK_OPS] = {
    "k_embedding_fwd", "k_embedding_bwd", "k_cross_entropy_fwd",
    "k_cross_entropy_bwd"};
  static const char *const what[CUDA_CHK_OPS] = {
    "token id", "token id", "target", "target"};
  for (int i = 0; i < CUDA_CHK_OPS; i++) {
    if (st.key[i] == ~0ull) continue;
    int more = 0;
    for (int j = i + 1; j < CUDA_CHK_OPS; j++) more |= st.key[j] != ~0ull;
    FAIL(ERR_FAIL,
         "%s: %s %d at position %lld is outside [0, %d) (found on the GPU "
         "and reported at the next sync; that row was not computed)%s",
         op[i], what[i], (int)(uint32_t)(st.key[i] & 0xffffffffu),
         (long long)(st.key[i] >> 32), st.bound[i],
         more ? "; other operations found bad values too" : "");
  }
  return 0;
}

/* ---- memory ------------------------------------------------------------------ */

static int cu_alloc(engine *e, size_t bytes, const char *tag, void **p) {
  cudaError_t rc = cudaMalloc(p, bytes ? bytes : 1);
  if (rc == cudaSuccess) return 0;
  *p = NULL;
  (void)cudaGetLastError();   /* not sticky: keep it from later checks */
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    free_b = total_b = 0;
  }
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (rc == cudaErrorMemoryAllocation)
    FAIL(ERR_OOM,
         "out of GPU memory allocating %zu bytes for %s (GPU %d: %.2f GiB "
         "free of %.2f GiB; this engine holds %.2f GiB)",
         bytes, tag, cuda_impl(e)->device, free_b / gib, total_b / gib,
         eng_bytes_in_use(e) / gib);
  FAIL(ERR_FAIL, "cudaMalloc of %zu bytes for %s: %s (%s)", bytes, tag,
       cudaGetErrorString(rc), cudaGetErrorName(rc));
}

static int cu_mem_total(engine *e, size_t *bytes) {
  size_t free_b = 0;
  CHECK_CUDA(cudaSetDevice(cuda_impl(e)->device));
  CHECK_CUDA(cudaMemGetInfo(&free_b, bytes));
  return 0;
}

static void cu_free(engine *e, void *p) {
  /* free cannot report; a failure here shows at the next checked call. */
  (void)cudaStreamSynchronize(cuda_stream(e));
  (void)cudaFree(p);
}

static int cu_upload(engine *e, void *dst, const void *host_src,
                     size_t bytes) {
  CHECK_CUDA(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice,
                             cuda_stream(e)));
  CHECK_CUDA(cudaStreamSynchronize(cuda_stream(e)));
  return 0;
}

static int cu_download(engine *e, void *host_dst, const void *src,
                       size_t bytes) {
  CHECK_CUDA(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost,
                             cuda_stream(e)));
  CHECK_CUDA(cudaStreamSynchronize(cuda_stream(e)));
  TRY(status_report(e));
  return 0;
}

static int cu_memset0(engine *e, void *p, size_t bytes) {
  CHECK_CUDA(cudaMemsetAsync(p, 0, bytes, cuda_stream(e)));
  return 0;
}

static int cu_copy(engine *e, void *dst, const void *src, size_t bytes) {
  CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                             cuda_stream(e)));
  return 0;
}

static void *cu_stream(engine *e) { return (void *)cuda_stream(e); }

int cuda_blas(engine *e, cublasHandle_t *h) {
  cuda_engine *c = cuda_impl(e);
  cudaStream_t s = cuda_stream(e);
  if (s != c->blas_stream) {
    /* SetStream resets the workspace to cuBLAS's own pool: set it again */
    CHECK_CUBLAS(tl_cublas.cublasSetStream(c->blas, s));
    CHECK_CUBLAS(tl_cublas.cublasSetWorkspace(c->blas, c->blas_ws,
                                              c->blas_ws_bytes));
    c->blas_stream = s;
  }
  int target = cuda_sm_target(e);
  if (target != c->blas_sm_target) {
    CHECK_CUBLAS(tl_cublas.cublasSetSmCountTarget(c->blas, target));
    c->blas_sm_target = target;
  }
  *h = c->blas;
  return 0;
}

/* A context's stream belongs to the caller (any stream of this device);
 * reserving every SM would leave the products none. */
static int cu_check_ctx(engine *e, const eng_ctx *ctx) {
  cuda_engine *c = cuda_impl(e);
  if (ctx->sm_reserve >= c->sms)
    FAIL(ERR_FAIL, "cannot reserve %d of the GPU's %d SMs (allowed: 0 .. %d)",
         ctx->sm_reserve, c->sms, c->sms - 1);
  return 0;
}

/* eng_side_view's stream: the device's lowest priority, so the compute
 * stream's kernels are scheduled first where both wait. */
static int cu_stream_create(engine *e, void **stream) {
  int least, greatest;
  CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, least));
  *stream = (void *)s;
  return 0;
}

static void cu_stream_destroy(engine *e, void *stream) {
  (void)cudaStreamDestroy((cudaStream_t)stream);
}

/* Ordering events: recorded on one handle's stream, waited for by
 * another's, then released (CUDA keeps an event until the waits queued on
 * it are done). */
static int cu_event_record(engine *e, void **ev) {
  cudaEvent_t x;
  CHECK_CUDA(cudaEventCreateWithFlags(&x, cudaEventDisableTiming));
  cudaError_t r = cudaEventRecord(x, cuda_stream(e));
  if (r != cudaSuccess) (void)cudaEventDestroy(x);
  CHECK_CUDA(r);
  *ev = (void *)x;
  return 0;
}

static int cu_event_wait(engine *e, void *ev) {
  cudaError_t r = cudaStreamWaitEvent(cuda_stream(e), (cudaEvent_t)ev, 0);
  cudaError_t d = cudaEventDestroy((cudaEvent_t)ev);
  CHECK_CUDA(r);
  CHECK_CUDA(d);
  return 0;
}

static void cu_event_free(engine *e, void *ev) {
  (void)cudaEventDestroy((cudaEvent_t)ev);
}

/* Profiling events: created and recorded on demand (only while
 * eng_profile is on), destroyed when the report has read them. */
static void *cu_prof_record(engine *e) {
  cudaEvent_t ev;
  if (cudaEventCreate(&ev) != cudaSuccess) return NULL;
  if (cudaEventRecord(ev, cuda_stream(e)) != cudaSuccess) {
    (void)cudaEventDestroy(ev);
    return NULL;
  }
  return (void *)ev;
}

static double cu_prof_elapsed_ms(engine *e, void *a, void *b) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b) != cudaSuccess)
    return 0;
  return ms;
}

static void cu_prof_release(engine *e, void *ev) {
  (void)cudaEventDestroy((cudaEvent_t)ev);
}

/* The kernel-level profile (kprof.cu): every kernel queued before its end
 * has finished once the device is idle. */
static int cu_kprof_begin(engine *e) {
  CHECK_CUDA(cudaDeviceSynchronize());   /* earlier work stays out of it */
  return kprof_begin();
}

static int cu_kprof_end(engine *e, eng_kernel_stat **out, int *n,
                        eng_kprof_time *time) {
  CHECK_CUDA(cudaDeviceSynchronize());
  return kprof_end(out, n, time);
}

static int cu_range_push(engine *e, const char *name) {
  return kprof_range_push(name);
}

static int cu_range_pop(engine *e) { return kprof_range_pop(); }

static int cu_monitor_begin(engine *e) {
  return cuda_monitor_begin(cuda_impl(e)->device);
}

static int cu_monitor_end(engine *e, eng_monitor *out) {
  (void)e;
  return cuda_monitor_end(out);
}

/* TF32 through cuBLAS's math mode; 3xTF32 is matmul.c's own form. */
static int cu_f32_products(engine *e, f32_products p) {
  cuda_engine *c = cuda_impl(e);
  CHECK_CUBLAS(tl_cublas.cublasSetMathMode(
      c->blas,
      p == F32_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  c->f32 = p;
  return 0;
}

/* ---- CUDA graphs ---------------------------------------------------------------- */

/* Thread-local capture: only this thread's unsafe calls (a sync, cudaMalloc)
 * break it, and engine.c refuses those before they reach CUDA. */
static int cu_graph_begin(engine *e) {
  CHECK_CUDA(cudaStreamBeginCapture(cuda_stream(e),
                                    cudaStreamCaptureModeThreadLocal));
  return 0;
}

static int cu_graph_end(engine *e, void **g) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  *g = NULL;
  CHECK_CUDA(cudaStreamEndCapture(cuda_stream(e), &graph));
  /* each kernel at the priority of the stream it was captured from: a
   * side stream's updates (eng_side_view) stay below backward's products */
  cudaError_t rc = cudaGraphInstantiateWithFlags(
      &exec, graph, cudaGraphInstantiateFlagUseNodePriority);
  (void)cudaGraphDestroy(graph);
  CHECK_CUDA(rc);
  cuda_impl(e)->graphs++;
  *g = (void *)exec;
  return 0;
}

static int cu_graph_launch(engine *e, void *g) {
  CHECK_CUDA(cudaGraphLaunch((cudaGraphExec_t)g, cuda_stream(e)));
  return 0;
}

static void cu_graph_destroy(engine *e, void *g) {
  cuda_engine *c = cuda_impl(e);
  /* destroying cannot report; a failure shows at the next checked call */
  (void)cudaStreamSynchronize(cuda_stream(e));
  (void)cudaGraphExecDestroy((cudaGraphExec_t)g);
  if (--c->graphs == 0) {
    for (int i = 0; i < c->nretired; i++) eng_free(e, c->retired[i]);
    c->nretired = 0;
  }
}

static int cu_sync(engine *e) {
  CHECK_CUDA(cudaStreamSynchronize(cuda_stream(e)));
  CHECK_CUDA(cudaGetLastError());
  TRY(status_report(e));
  return 0;
}

/* ---- the engine ---------------------------------------------------------------- */

/* Tolerates a partly built engine (create's failure path). The workspaces
 * were eng_alloc'd, so engine_destroy has already freed them. */
static void cu_destroy(engine *e) {
  cuda_engine *c = cuda_impl(e);
  if (!c) return;
  if (c->own_stream) (void)cudaStreamSynchronize(c->own_stream);
  free(c->retired);   /* the blocks themselves: engine_destroy freed them */
  if (c->blas) (void)tl_cublas.cublasDestroy(c->blas);
  cuda_lt_plans_free(c);
  if (c->lt) (void)tl_cublas.cublasLtDestroy(c->lt);
  if (c->status) (void)cudaFree(c->status);
  if (c->bad_flag) (void)cudaFreeHost(c->bad_flag);
  if (c->own_stream) (void)cudaStreamDestroy(c->own_stream);
  free(c);
  e->impl = NULL;
}

/* Every op of kernels/ops.def (cuda_ops.h). */
static const fused_ops cuda_fused_ops = {
#define K_FUSED(name, family, params, args) .name = cuda_##name,
#include "kernels/ops.def"
};

static const engine_ops cuda_ops = {
  .name = "cuda",
  .destroy = cu_destroy,
  .alloc = cu_alloc,
  .free = cu_free,
  .upload = cu_upload,
  .download = cu_download,
  .memset0 = cu_memset0,
  .copy = cu_copy,
  .sync = cu_sync,
  .mem_total = cu_mem_total,
  .stream = cu_stream,
  .check_ctx = cu_check_ctx,
  .stream_create = cu_stream_create,
  .stream_destroy = cu_stream_destroy,
  .event_record = cu_event_record,
  .event_wait = cu_event_wait,
  .event_free = cu_event_free,
  .f32_products = cu_f32_products,
  .prof_record = cu_prof_record,
  .prof_elapsed_ms = cu_prof_elapsed_ms,
  .prof_release = cu_prof_release,
  .kprof_begin = cu_kprof_begin,
  .kprof_end = cu_kprof_end,
  .monitor_begin = cu_monitor_begin,
  .monitor_end = cu_monitor_end,
  .range_push = cu_range_push,
  .range_pop = cu_range_pop,
  .graph_begin = cu_graph_begin,
  .graph_end = cu_graph_end,
  .graph_launch = cu_graph_launch,
  .graph_destroy = cu_graph_destroy,
#define K_OP(name, family, params, args) .name = cuda_##name,
#include "kernels/ops.def"
  .fused = &cuda_fused_ops,
};

static int cuda_init(engine *e, int device) {
  cuda_engine *c = cuda_impl(e);
  c->device = device;
  CHECK_CUDA(cudaSetDevice(device));
  CHECK_CUDA(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount,
                                    device));
  int major, minor;
  CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                    device));
  CHECK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                    device));
  c->wgmma = major == 9 && minor == 0;   /* the sm_90a code of the build */
  /* Before anything launches: a build without code for this GPU would
   * otherwise fail at its first kernel with a bare "no kernel image". */
  cudaError_t img = cuda_code_runs_here();
  if (img != cudaSuccess) {
    (void)cudaGetLastError();
    char name[256] = "";
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
      snprintf(name, sizeof name, "%s, ", prop.name);
    FAIL(ERR_FAIL, "engine_cuda_create: GPU %d (%scompute capability %d.%d) "
         "cannot run this build's kernels (%s): they were built with \"%s\" "
         "(./configure --with-cuda-arch); they need compute capability 9.0 "
         "or later, which the default flags (sm_90a, compute_90 PTX) cover",
         device, name, major, minor, cudaGetErrorName(img), TL_CUDA_ARCH);
  }
  c->flash_cut_force = 0;
  /* One level above the least priority: CUDA's default stream priority is
   * the least, so without this a stream meant to yield to the model's
   * kernels (data parallelism's optimizer stream, created at the least,
   * parallel/dp_events.c) would compete with them as an equal; the
   * communicator's stream (the greatest) still goes first. Measured on
   * 2 x H200 (xl, bf16, AdamW queued during backward): 62.6 -> 59.6 ms a
   * step (reports/data/ddp_diag.csv, runs k0 and k1). */
  int least, greatest;
  CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK_CUDA(cudaStreamCreateWithPriority(&c->own_stream,
                                          cudaStreamNonBlocking,
                                          greatest < least ? least - 1
                                                           : least));
  TRY(cublas_lib_open());
  CHECK_CUBLAS(tl_cublas.cublasCreate(&c->blas));
  /* SetStream resets the workspace to cuBLAS's own pool: stream first. */
  CHECK_CUBLAS(tl_cublas.cublasSetStream(c->blas, c->own_stream));
  c->blas_stream = c->own_stream;
  CHECK_CUBLAS(tl_cublas.cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
  TRY(eng_alloc(e, BLAS_WORKSPACE, "workspace.cublas", &c->blas_ws));
  c->blas_ws_bytes = BLAS_WORKSPACE;
  CHECK_CUBLAS(tl_cublas.cublasSetWorkspace(c->blas, c->blas_ws,
                                            c->blas_ws_bytes));
  CHECK_CUBLAS(tl_cublas.cublasLtCreate(&c->lt));
  CHECK_CUDA(cudaMalloc((void **)&c->status, sizeof *c->status));
  CHECK_CUDA(cudaHostAlloc((void **)&c->bad_flag, sizeof *c->bad_flag,
                           cudaHostAllocMapped));
  CHECK_CUDA(cudaHostGetDevicePointer((void **)&c->bad_flag_dev, c->bad_flag,
                                      0));
  TRY(status_reset(e));
  return 0;
}

int engine_cuda_create(engine **out, int device) {
  *out = NULL;
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    FAIL(ERR_FAIL, "engine_cuda_create: no usable GPU: cudaGetDeviceCount: "
         "%s (%s)", cudaGetErrorString(rc), cudaGetErrorName(rc));
  }
  if (device < 0 || device >= count)
    FAIL(ERR_FAIL, "engine_cuda_create: no GPU %d (this machine has %d)",
         device, count);
  engine *e = calloc(1, sizeof *e);
  CHECK_ALLOC(e, sizeof *e);
  e->ops = &cuda_ops;
  cuda_engine *c = calloc(1, sizeof *c);
  if (!c) {
    free(e);
    CHECK_ALLOC(c, sizeof *c);
  }
  e->impl = c;
  int irc = cuda_init(e, device);
  if (irc < 0) {
    err_trace(__FILE__, __LINE__);
    engine_destroy(e);   /* frees what init got; keeps the message */
    return irc;
  }
  *out = e;
  return 0;
}
