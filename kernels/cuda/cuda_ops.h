/* The CUDA engine's operations (one family per file, kernels/cuda/<family>.cu,
 * matrix products in matmul.c), the engine state they share, and the ops
 * table engine_cuda.c builds from them. Included by plain C (engine_cuda.c,
 * matmul.c) and by the .cu files.
 *
 * Each cuda_* operation has the signature of the k_* function of the same
 * name (kernels/ops.def) and is called only through engine.c, which has already
 * checked the arguments. Every operation runs on the engine's stream and
 * returns once its work is queued; eng_sync waits. Launches are checked at
 * once (CHECK_LAUNCH); faults inside a kernel surface at the next sync.
 *
 * Token ids and targets live in device memory, so they are validated on the
 * device: a kernel that finds one outside [0, V) records the smallest such
 * position (cuda_report_bad) and the next eng_sync or eng_download fails
 * with the same message the CPU engine gives at the call. The operation
 * itself still returns 0 (checking at the call would cost a sync per call). */
#ifndef TL_KERNELS_CUDA_OPS_H
#define TL_KERNELS_CUDA_OPS_H

#include "kernels/engine_internal.h"
#include "kernels/cuda/cublas_lib.h"
#include "kernels/cuda/cut_memo.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the device-side checks of ids and targets leave for the host. */
enum {
  CUDA_CHK_EMBEDDING_FWD,
  CUDA_CHK_EMBEDDING_BWD,
  CUDA_CHK_CROSS_ENTROPY_FWD,
  CUDA_CHK_CROSS_ENTROPY_BWD,
  CUDA_CHK_OPS
};
typedef struct cuda_status {
  /* Per checking op: min over bad elements of (position << 32 | value as
   * uint32); ~0 when none. The minimum names the first bad position. */
  unsigned long long key[CUDA_CHK_OPS];
  int bound[CUDA_CHK_OPS];              /* the V that was exceeded */
} cuda_status;

typedef struct cuda_engine {
  int device;
  int sms;                              /* multiprocessors, for grid sizes */
  cudaStream_t own_stream;              /* the engine's, non-blocking: a call
                                           runs here unless its handle's
                                           context names another (cuda_stream) */
  cublasHandle_t blas;                  /* bound per call (cuda_blas) ... */
  cudaStream_t blas_stream;             /* ... to this stream ... */
  int blas_sm_target;                   /* ... and SM count target */
  void *blas_ws;                        /* cuBLAS workspace, "workspace.cublas" */
  size_t blas_ws_bytes;
  void *ws;                             /* scratch of the ops, "workspace" */
  size_t ws_bytes;
  cuda_status *status;                  /* device memory */
  int *bad_flag;                        /* mapped pinned host memory, set by a
                                           kernel that found a bad id ... */
  int *bad_flag_dev;                    /* ... through this device address */
  cublasLtHandle_t lt;                  /* the fused path's products */
  struct lt_plan *lt_plans;             /* their per-shape plans, matmul_lt.c */
  f32_products f32;                     /* how k_matmul runs fp32 products */
  void *rope_cs;                        /* RoPE's (cos, sin) table, "rope_table"
                                           (rope.cu): rows t < rope_seq ... */
  int rope_seq, rope_dh;                /* ... for this head dim ... */
  float rope_theta;                     /* ... and theta */
  int graphs;                           /* live CUDA graph recordings */
  void **retired;                       /* scratch given back while graphs
                                           lived: freed with the last one */
  int nretired, cap_retired;
  int wgmma;                            /* sm_90: flash forward on wgmma
                                           (flash_fwd_wgmma.cu); tests clear
                                           it to check the mma.sync kernel */
  int flash_cut_force;                  /* 0: the flash kernels cut
                                           their walks where the replay says
                                           it pays (flash_cut.cuh); C > 0:
                                           every walk longer than C tiles is
                                           cut into chunks of C (tests, so
                                           that small shapes run the cut
                                           kernels and their merges) */
  cut_memo cuts;                        /* their plans by launch shape */
} cuda_engine;

static inline cuda_engine *cuda_impl(const engine *e) {
  return (cuda_engine *)e->impl;
}
/* The context of a call is its handle's (e->ctx: the base engine's or a
 * view's, kernels.h eng_view), never state in cuda_engine, so calls on
 * different handles do not change each other's stream or SM target. */
static inline cudaStream_t cuda_stream(const engine *e) {
  return e->ctx.stream ? (cudaStream_t)e->ctx.stream
                       : cuda_impl(e)->own_stream;
}
/* SMs the matrix products aim at (cuBLAS's SM count target); 0 = all. */
static inline int cuda_sm_target(const engine *e) {
  return e->ctx.sm_reserve ? cuda_impl(e)->sms - e->ctx.sm_reserve : 0;
}

/* cudaSuccess when the current device can run this build's kernels: a
 * cubin of its architecture or PTX it can compile (TL_CUDA_ARCH, the
 * build's -gencode flags, says which there are); else why not. */
cudaError_t cuda_code_runs_here(void);

/* The cuBLAS handle, bound to e's stream (with its workspace) and SM
 * target: the handle is shared by the base and its views, so each use
 * binds it first; a call on the same context as the last binds nothing. */
int cuda_blas(engine *e, cublasHandle_t *h);

/* At least `bytes` of scratch device memory for the current operation,
 * valid until the next call (all use is stream-ordered, so one buffer
 * serves every op). Grows by eng_alloc under the tag "workspace", after a
 * stream sync so nothing in flight still reads the old one. */
int cuda_workspace(engine *e, size_t bytes, void **p);

/* Give back engine-owned scratch (the workspace, RoPE's table) that is
 * being replaced: freed now, after the stream is idle, or, while CUDA
 * graph recordings live that may read it, kept (still accounted) until the
 * last one is destroyed. Fails while recording. */
int cuda_release(engine *e, void *p);

/* Grid size for a grid-stride loop over `work` items, `threads` per block:
 * one item per thread (up to gridDim.x's limit), so blocks sweep memory in
 * order. Capping the grid at 32 blocks per SM, as this did before, made
 * each thread stride by the whole grid and cost streaming kernels 6% of
 * their bandwidth (AdamW on an H100: 2.83 vs 3.00 TB/s, measured). */
unsigned cuda_grid(const engine *e, size_t work, int threads);

/* The clock and power monitor of GPU `device` (gpu_monitor.c; kernels.h
 * eng_monitor_begin). */
int cuda_monitor_begin(int device);
int cuda_monitor_end(eng_monitor *out);

/* cuBLAS's name of a float dtype. */
cudaDataType_t cuda_data_type(dtype dt);

/* Row-major C [m, n] (ldc) = alpha op(A) op(B), A [m, k] or stored [k, m]
 * (ta), B [k, n] or stored [n, k] (tb), batched over `batch` (strides sa,
 * sb, sc); inputs of dtype dt, fp32 accumulation (CUBLAS_COMPUTE_32F, the
 * handle's math mode), C of type ct, not read (beta 0); on e's stream and
 * SM target (cuda_blas). The materialised attention's products
 * (matmul.c). */
int cuda_bgemm(engine *e, int ta, int tb, int m, int n, int k, float alpha,
               const void *A, int lda, long long sa, const void *B, int ldb,
               long long sb, void *C, cudaDataType_t ct, int ldc,
               long long sc, int batch, dtype dt);

/* The fused path's product through cuBLASLt with a per-shape algorithm
 * chosen by timing (matmul_lt.c); cuda_matmul_ex's arguments, m, n, k > 0.
 * cuda_lt_plans_free releases the plans (engine teardown). */
int cuda_matmul_lt(engine *e, int trans_a, int trans_b, int m, int n, int k,
                   float alpha, const void *A, int lda, const void *B, int ldb,
                   dtype in_t, float beta, void *C, int ldc, dtype ct,
                   int tf32);
void cuda_lt_plans_free(cuda_engine *c);

/* ---- operations ---------------------------------------------------------- */
/* cuda_NAME for every K_OP and K_FUSED row of kernels/ops.def, with
 * k_NAME's signature; engine_cuda.c's tables list them all. Each lives in
 * its family's file, the fused path's typed forms included (rmsnorm.cu has
 * cuda_add_rmsnorm_fwd, matmul.c cuda_matmul_ex, ...); attention
 * dispatches in attention_materialized.cu. */
#define K_OP(name, family, params, args) int cuda_##name params;
#define K_FUSED(name, family, params, args) int cuda_##name params;
#include "kernels/ops.def"

/* dg += sum_i dy[i,:] * x[i,:] * rstd[i], deterministic (rmsnorm.cu); dy
 * in dtype dt. */
int cuda_rmsnorm_dg_t(engine *e, const void *dy, dtype dt, const float *x,
                      const float *rstd, float *dg, int n, int d);
/* FlashAttention-2 (flash_fwd.cu, flash_bwd.cu and their Hopper versions
 * flash_fwd_wgmma.cu, flash_bwd_wgmma.cu), under cuda_attention_fwd/bwd. */
int cuda_flash_fwd(engine *e, const void *q, const void *k, const void *v,
                   void *o, float *lse, int bh, int tq, int tk, int dh,
                   int causal, float scale, dtype dt);
/* bf16 / f16 at dh 64, 80, 128, when cuda_engine.wgmma (flash_fwd_wgmma.cu). */
int cuda_flash_fwd_wgmma(engine *e, const void *q, const void *k,
                         const void *v, void *o, float *lse, int bh, int tq,
                         int tk, int dh, int causal, float scale_log2,
                         dtype dt);
/* The chunks the wgmma forward (backward) cuts its longest walk into at
 * this shape (flash_cut.cuh; 1: uncut), for tests. */
int cuda_flash_fwd_chunks(engine *e, int bh, int tq, int tk, int dh,
                          int causal);
int cuda_flash_bwd_chunks(engine *e, int bh, int tq, int tk, int dh,
                          int causal);
/* The same for flash_fwd.cu's kernel (flash_bwd.cu's two: the more) at
 * dtype dt under the engine's fp32 products (1 where they run on CUDA
 * cores), whether or not the engine would run the wgmma ones there. */
int cuda_flash_fwd_mma_chunks(engine *e, int bh, int tq, int tk, int dh,
                              int causal, dtype dt);
int cuda_flash_bwd_mma_chunks(engine *e, int bh, int tq, int tk, int dh,
                              int causal, dtype dt);
int cuda_flash_bwd(engine *e, const void *q, const void *k, const void *v,
                   const void *o, const void *dout, const float *lse,
                   void *dq, void *dk, void *dv, int bh, int tq, int tk,
                   int dh, int causal, float scale, dtype dt);
/* One pass, bf16 / f16 at dh 64, when cuda_engine.wgmma
 * (flash_bwd_wgmma.cu); cuda_flash_bwd calls it. */
int cuda_flash_bwd_wgmma(engine *e, const void *q, const void *k,
                         const void *v, const void *o, const void *dout,
                         const float *lse, void *dq, void *dk, void *dv,
                         int bh, int tq, int tk, int dh, int causal,
                         float scale, dtype dt);

/* ---- helpers of the matrix products (elementwise.cu) ------------------------ */
/* dst[b][r][c] = (bf16 or f16) src[b*stride + r*ld + c], round to nearest
 * even, for b < batch, r < rows, c < cols; dst rows are dst_ld apart and
 * batches rows*dst_ld apart. */
int cuda_pack_lowp(engine *e, const float *src, int rows, int cols, int ld,
                   long long stride, int batch, dtype dt, void *dst,
                   int dst_ld);
/* The 3xTF32 form of an fp32 operand (split_tf32.cu): its hi and lo TF32
 * parts, three copies along the product's inner dimension (k_rows: down
 * the rows, else along the columns), lo in copy lo_slot; dst_ld apart by
 * row, dst_stride by batch. */
int cuda_split_3xtf32(engine *e, const float *src, int rows, int cols, int ld,
                      long long stride, int batch, int k_rows, int lo_slot,
                      float *dst, int dst_ld, long long dst_stride);
/* C[b][i][j] = beta * C[b][i][j] (0 when beta = 0, C not read), the product
 * with k = 0. */
int cuda_scale_matrix(engine *e, float *C, int m, int n, int ldc,
                      long long stride_c, int batch, float beta);

#ifdef __cplusplus
}
#endif
#endif
