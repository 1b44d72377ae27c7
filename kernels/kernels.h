/* The compute interface the model is written against. One engine = one
 * backend instance: the CPU engine (plain C loops, OpenMP; the readable
 * reference) or, later, the CUDA engine (cuBLAS + own kernels on a stream).
 * model/ calls only these functions and never says which engine it has.
 *
 * Conventions
 * - Pointers are engine memory (eng_alloc): host memory on the CPU engine,
 *   device memory on CUDA. Operations are ordered on the engine's stream and
 *   may return before they finish; eng_sync waits. Every call returns 0 or a
 *   negative ERR_* code (common/check.h) with the message in err_msg().
 * - Tensors are row-major and contiguous unless a leading dimension is given.
 *   Shapes use B batch, T sequence, H heads, Dh head dim, D = H*Dh model dim,
 *   F ffn dim, V vocabulary, N = B*T rows.
 * - Precision: activations, gradients, master weights and optimizer state are
 *   fp32 (DT_F32). Matrix products take a `compute` dtype: DT_F32 is true fp32;
 *   DT_BF16 / DT_F16 mean low-precision inputs with fp32 accumulation and
 *   output (the CPU engine supports DT_F32 only and says so for the others).
 * - Backward rule: an operation's input gradient is WRITTEN (=); a parameter
 *   gradient is ACCUMULATED (+=) so gradient buffers can be zeroed once per
 *   step; residual sums are explicit k_add calls in the model. */
#ifndef TL_KERNELS_H
#define TL_KERNELS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DT_F32, DT_BF16, DT_F16 } dtype;
const char *dtype_name(dtype t);
/* The matrix-input dtype an experiment's precision names: "bf16", "fp16";
 * anything else ("fp32", "tf32", "3xtf32") is fp32. */
dtype dtype_of_precision(const char *precision);
size_t dtype_size(dtype t);

typedef struct engine engine;

/* ---- engines ------------------------------------------------------------ */
/* threads <= 0: OpenMP's default. */
int engine_cpu_create(engine **out, int threads);
/* OpenMP's default thread count (OMP_NUM_THREADS, else this process's
 * cores); 1 in a build without OpenMP. */
int engine_cpu_default_threads(void);
/* The CUDA engine on GPU `device`: its own non-blocking stream, cuBLAS
 * handle and device memory; ERR_FAIL with a clear message when the build
 * has no CUDA or the device is absent. */
int engine_cuda_create(engine **out, int device);
/* A view (eng_view) frees only itself. */
void engine_destroy(engine *e);
const char *engine_name(const engine *e);     /* "cpu", "cuda" */

/* Memory. Every allocation carries a tag ("params", "grads", "adam_m",
 * "act.attn_scores", "workspace", ...): the engine keeps bytes in use and the
 * peak, in total and per tag, so memory can be accounted per tensor. */
int eng_alloc(engine *e, size_t bytes, const char *tag, void **p);
void eng_free(engine *e, void *p);
/* Memory of one tag from an outside allocator instead of the backend's:
 * e.g. NCCL's ncclMemAlloc, whose buffers can join the symmetric windows
 * that copy-engine collectives need (collective/comm.h, comm_sym_alloc).
 * Later eng_alloc calls with that tag call a->alloc, and eng_free of those
 * blocks a->free; the accounting is the same. a NULL: the backend's again.
 * The memory must be what the backend's would be (device memory of the
 * engine's GPU for the CUDA engine). */
typedef struct eng_allocator {
  int (*alloc)(void *ctx, size_t bytes, void **p);
  void (*free)(void *ctx, void *p);
  void *ctx;
} eng_allocator;
int eng_set_tag_allocator(engine *e, const char *tag, const eng_allocator *a);
int eng_upload(engine *e, void *dst, const void *host_src, size_t bytes);
int eng_download(engine *e, void *host_dst, const void *src, size_t bytes);
int eng_memset0(engine *e, void *p, size_t bytes);
/* bytes from src to dst, both engine memory, not overlapping; queued on
 * the engine's stream like an operation (moving a buffer into memory of
 * another allocator: model_place_params). */
int eng_copy(engine *e, void *dst, const void *src, size_t bytes);
int eng_sync(engine *e);
/* The CUDA engine's stream (a cudaStream_t) on which every operation is
 * queued (a view's: its context's), for callers that order other work
 * after it (events); NULL on the CPU engine, whose operations are done
 * when they return. */
void *eng_stream(engine *e);
/* Execution contexts. What a call runs with besides its arguments: the
 * stream it is queued on, SMs left to work running beside it, AdamW's
 * block cap. An engine handle carries one; a base engine's is all zeros.
 *   stream        a cudaStream_t of the engine's device; NULL: the
 *                 engine's own. For work meant to run beside the engine's
 *                 stream (DDP's AdamW of a bucket while backward goes on);
 *                 ordering between streams is the caller's (events), and
 *                 eng_sync / upload / download / free wait for this stream.
 *                 The CPU engine has no streams: non-NULL fails there.
 *   sm_reserve    leave this many SMs to work running beside (NCCL's
 *                 collectives during backward): matrix products are shaped
 *                 for the device's SMs minus n (cuBLAS's SM count target),
 *                 so a product split into exactly one wave of blocks does
 *                 not spill a few blocks into a second wave when a
 *                 collective holds some SMs. 0: the whole device. The CPU
 *                 engine has no SMs: n > 0 fails there.
 *   adamw_blocks  k_adamw / k_adamw_mean use at most this many thread
 *                 blocks (0: as many as the work needs), each looping over
 *                 its share with many bytes in flight (on Hopper one block
 *                 per SM, fed by bulk copies): AdamW running beside
 *                 backward (DDP's grad_sync allgather) then holds n SMs,
 *                 not all of them. The same numbers as uncapped. A GPU
 *                 hint: the CPU engine ignores it. */
typedef struct eng_ctx {
  void *stream;
  int sm_reserve;
  int adamw_blocks;
} eng_ctx;
/* A view: a second handle on `base` whose calls run with *ctx. It shares
 * everything else with the base: memory and its accounting (an eng_alloc
 * through the view counts in the base's totals and tags), the cuBLAS
 * handle and plans, scratch, eng_f32_products' setting, profiling and the
 * memory timeline. Invariant: no call on a view changes what calls on the
 * base (or another view) run with, so there is no mode to reset and a
 * failure halfway leaves nothing behind. A view cannot record CUDA graphs
 * (eng_graph_begin fails; record on the base) nor change eng_f32_products;
 * it may launch a recording, on its stream. Views of a view are views of
 * its base. Scratch (the ops' workspace) is shared: work on two streams at
 * once must not both need it, which the caller's events ensure as for any
 * two streams. One host thread at a time drives a base and its views
 * (they share the cuBLAS handle and the accounting), as it drives an
 * engine. engine_destroy(view) frees the view only; destroy views
 * before their base, and use none after. Invalid contexts fail with the
 * reason (a stream or reserved SMs on the CPU engine, n < 0, all the SMs). */
int eng_view(engine *base, const eng_ctx *ctx, engine **out);
/* The engine a view is of; an engine that is no view: itself. */
engine *eng_base(engine *e);
/* A view on a stream of its own, of the lowest priority, so work queued on
 * it runs beside the base's stream on what that leaves of the GPU (the
 * optimizer beside backward); AdamW through it holds at most adamw_blocks
 * blocks (0: no cap). The stream is the view's: engine_destroy(view)
 * releases it. On the CPU engine a view with no stream (its calls are done
 * when they return). Order it against other handles with eng_wait_for. */
int eng_side_view(engine *base, int adamw_blocks, engine **out);
/* A point in a handle's stream: everything queued through it so far.
 * eng_event_wait makes work queued through e from then on start after it,
 * and releases it; eng_event_free releases one never waited for (NULL is
 * fine). On the CPU engine, whose calls are done when they return, both
 * are no-ops on a token. */
typedef struct eng_event eng_event;
int eng_event_record(engine *e, eng_event **ev);
int eng_event_wait(engine *e, eng_event *ev);
void eng_event_free(engine *e, eng_event *ev);
/* Work queued through waiter from now on starts after everything queued
 * through signaler so far (an event recorded and waited for at once). Both
 * handles of one engine. */
int eng_wait_for(engine *waiter, engine *signaler);
/* Time per kernel family ("matmul", "attention", "rmsnorm", ...): with
 * eng_profile(e, 1) every operation is bracketed (CUDA events on the
 * engine's stream; the host clock on the CPU engine, whose operations are
 * synchronous); eng_profile_report waits for the engine, writes
 * "family ms; family ms; ..." (largest first, milliseconds summed over
 * everything since eng_profile(e, 1)) and stops collecting. The brackets
 * cost a little launch time: profile a separate, untimed step. */
int eng_profile(engine *e, int on);
int eng_profile_report(engine *e, char *buf, size_t n);
/* How fp32 matrix products run (k_matmul, k_matmul_batched with DT_F32):
 * F32_EXACT: true fp32 on CUDA cores (PyTorch's default; the engines'
 * default). F32_TF32: TF32 tensor cores (PyTorch's allow_tf32 = True):
 * inputs rounded to 10-bit mantissas, fp32 accumulation, ~1e-3 relative
 * error. F32_3XTF32: fp32-accurate products on TF32 tensor cores, each
 * input split into hi + lo TF32 parts and A B computed as
 * hi(A) hi(B) + hi(A) lo(B) + lo(A) hi(B) with fp32 accumulation (NVIDIA
 * CUTLASS's "3xTF32"): what is dropped (lo lo, lo's own rounding) is
 * ~2^-22 of each product, below the rounding of an fp32 sum over the
 * products' lengths; tests hold it to the same tolerance as true fp32.
 * The CPU engine computes in true fp32 only: anything else fails there. */
typedef enum { F32_EXACT, F32_TF32, F32_3XTF32 } f32_products;
const char *f32_products_name(f32_products p);
/* "tf32": F32_TF32, "3xtf32": F32_3XTF32, anything else F32_EXACT. */
f32_products f32_products_of_precision(const char *precision);
int eng_f32_products(engine *e, f32_products p);
size_t eng_bytes_in_use(const engine *e);
size_t eng_peak_bytes(const engine *e);
/* The device's memory in bytes as its driver counts it (CUDA:
 * cudaMemGetInfo's total, what an out-of-memory message also quotes), so a
 * row can say how close it came to the limit; 0 where the engine has no
 * such limit of its own (the CPU engine). */
int eng_mem_total(engine *e, size_t *bytes);
void eng_reset_peak(engine *e);
/* Bytes in use and peak under one tag: 0, or -1 if the tag was never used
 * (in_use and peak may be NULL). */
int eng_tag_bytes(const engine *e, const char *tag, size_t *in_use, size_t *peak);
/* Calls fn(tag, bytes_in_use, peak_bytes) for each tag seen, in order of
 * first use. */
void eng_tags(const engine *e,
              void (*fn)(const char *tag, size_t in_use, size_t peak, void *arg),
              void *arg);

/* CUDA graphs: between eng_graph_begin and eng_graph_end the engine
 * records the operations queued on its stream instead of running them;
 * eng_graph_launch queues the whole recording again as one launch, which
 * saves the host's per-operation launch cost (what pays when kernels are
 * short: small models, short contexts). A recording keeps every pointer
 * and scalar it was given, so replaying it is right only while they mean
 * the same: the caller keys recordings by what they depend on (model.c).
 * Run the work once before recording it, so buffers the operations grow on
 * demand (workspace, RoPE's table) have their size: while recording,
 * anything that waits for the stream or takes or gives back memory (sync,
 * upload, download, alloc, free, a growing workspace) fails, as does
 * eng_profile. Scratch an operation outgrows after a recording is kept
 * until the last recording is destroyed. eng_graph_end always ends the
 * recording; *g is NULL when it fails. The CPU engine has no graphs:
 * eng_graphs_supported is 0 and eng_graph_begin fails there. */
typedef struct eng_graph eng_graph;
int eng_graphs_supported(const engine *e);
int eng_graph_begin(engine *e);
int eng_graph_end(engine *e, eng_graph **g);
int eng_graph_launch(engine *e, eng_graph *g);
void eng_graph_destroy(engine *e, eng_graph *g);
/* 1 while recording; 1 while eng_profile or eng_kprof collects. */
int eng_recording(const engine *e);
int eng_profiling(const engine *e);

/* Kernel-level profile (the nsys_profile problem): between eng_kprof_begin
 * and eng_kprof_end every GPU kernel that runs is recorded by CUPTI's
 * activity API (the source Nsight Systems reads), with its real name
 * (cuBLAS's too; ours demangled, without parameter lists) and its time on
 * the GPU's clock; eng_kprof_end waits for the device and returns one
 * entry per (innermost range, kernel name), sorted by range then name, in
 * a malloc'd array the caller frees. Ranges: eng_range_push / _pop mark a
 * span of calls with a name (an NVTX range, so Nsight Systems shows the
 * same spans) that the profile attributes kernels to; "" outside any.
 * CUDA engine built with CUPTI only: elsewhere eng_kprof_begin fails
 * saying why; ranges cost nothing on the CPU engine. One profile at a time
 * in a process (CUPTI's state is global). */
typedef struct eng_kernel_stat {
  char range[48];
  char name[160];
  long calls;
  double total_ms;
} eng_kernel_stat;
/* The profile's time line (when `time` is not NULL): span_ms from the
 * first kernel's start to the last one's end, busy_ms the part of it with
 * a kernel running (kernels side by side counted once), so span - busy is
 * the GPU idle between kernels: launch gaps, waits on the host. host_api:
 * where the host's time in CUDA calls went, the four runtime or driver
 * calls with the most ("cudaStreamSynchronize 61.2 ms x3, ..."; waits
 * for the GPU count as the call's time), "" when none was recorded. */
typedef struct eng_kprof_time {
  double span_ms, busy_ms;
  char host_api[200];
} eng_kprof_time;
int eng_kprof_begin(engine *e);
int eng_kprof_end(engine *e, eng_kernel_stat **out, int *n,
                  eng_kprof_time *time);
int eng_range_push(engine *e, const char *name);
int eng_range_pop(engine *e);

/* The GPU's clock and power while work runs: between eng_monitor_begin
 * and eng_monitor_end a thread reads, every 5 ms, the SM clock, the power
 * drawn and whether the power cap holds the clock down (NVML, through the
 * driver). samples: readings taken; sm_mhz, power_w: their means;
 * power_capped: the share of them throttled by the power cap. CUDA engine
 * only, one monitor at a time in a process; eng_monitor_begin fails saying
 * why elsewhere or without NVML. */
typedef struct eng_monitor {
  long samples;
  double sm_mhz, power_w, power_capped;
} eng_monitor;
int eng_monitor_begin(engine *e);
int eng_monitor_end(engine *e, eng_monitor *out);

/* The memory timeline (memory_profiling): with eng_memlog(e, 1) every
 * eng_alloc and eng_free is recorded, with the host clock (seconds since
 * the call), its tag, the bytes it added (negative for a free) and the
 * bytes in use after it; eng_memlog(e, 0) stops recording and keeps the
 * events, a new eng_memlog(e, 1) clears them. eng_memlog_events returns how
 * many are held (events that found no host memory are dropped and counted
 * in *lost, which may be NULL); eng_memlog_event reads event i (tag stays
 * valid for the engine's life). */
void eng_memlog(engine *e, int on);
int eng_memlog_events(const engine *e, int *lost);
void eng_memlog_event(const engine *e, int i, double *t_s, const char **tag,
                      long long *delta, size_t *in_use);

/* ---- operations ----------------------------------------------------------- */
/* One k_* function per row of kernels/ops.def, which documents each op;
 * here are the types they take. */

/* softmax(scale * Q K^T) V per head, two ways: materialised (scores and
 * probabilities in memory, as the reference model computes it) or
 * FlashAttention-2 (tiled over queries and keys with an online softmax;
 * only O and the logsumexp L reach memory, backward recomputes P from L). */
typedef enum { ATTN_MATERIALIZED, ATTN_FLASH } attn_impl;
/* "materialized" | "flash"; -1 for anything else. */
int attn_impl_parse(const char *s, attn_impl *out);
/* The head dims the GPU's flash kernels are built for, X(D) once each:
 * flash_common.cuh instantiates a kernel per D, and the job kinds refuse
 * other head dims for flash on the GPU before any job starts (jobs/
 * attention.c, jobs/common.c). 80: the 2.7B model's 2560 / 32 heads. */
#define ATTN_FLASH_GPU_DHEADS(X) X(16) X(32) X(64) X(80) X(128)
static inline int attn_flash_gpu_dhead(int d) {
#define ATTN_DHEAD_IS(D) d == D ||
  return ATTN_FLASH_GPU_DHEADS(ATTN_DHEAD_IS) 0;
#undef ATTN_DHEAD_IS
}
/* Those head dims as text, "16, 32, ...", in buf (32 bytes). */
static inline const char *attn_flash_gpu_dheads_text(char buf[32]) {
  int k = 0;
#define ATTN_DHEAD_TEXT(D) \
  k += snprintf(buf + k, (size_t)(32 - k), "%s%d", k ? ", " : "", D);
  ATTN_FLASH_GPU_DHEADS(ATTN_DHEAD_TEXT)
#undef ATTN_DHEAD_TEXT
  return buf;
}
/* The most gradient arrays k_adamw_mean averages. */
enum { K_ADAMW_MAX_GRADS = 8 };
/* AdamW's bias-corrected step size at step t >= 1, lr sqrt(1 - b2^t) /
 * (1 - b1^t), computed in double and rounded to fp32: what the CUDA
 * engine's updates use, and what k_adamw_ex's step_dev must hold. */
float k_adamw_step_size(float lr, float b1, float b2, long long t);
/* k_init_normal's table (kernels/init_normal.h): the quantiles of the
 * standard normal truncated to [-3, 3] at k / 65536, k = 0 .. 65536, in
 * fixed point with 29 fraction bits (65537 values, host memory), for the
 * caller to put in engine memory. Made at the first call, then the same
 * array for the life of the process (it depends on constants alone). */
const int32_t *k_init_normal_table(void);

#define K_OP(name, family, params, args) int k_##name params;
#define K_OP_AS(name, family, params, args, op, op_args) int k_##name params;
#define K_FUSED(name, family, params, args) int k_##name params;
#include "kernels/ops.def"

#ifdef __cplusplus
}
#endif
#endif
