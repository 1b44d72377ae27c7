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
/* The CUDA engine on GPU `device`: its own non-blocking stream, cuBLAS
 * handle and device memory; ERR_FAIL with a clear message when the build
 * has no CUDA or the device is absent. */
int engine_cuda_create(engine **out, int device);
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
 * queued, for callers that order other work after it (events); NULL on the
 * CPU engine, whose operations are done when they return. */
void *eng_stream(engine *e);
/* Queue the engine's operations on `stream` (a cudaStream_t of the
 * engine's device) from now on; NULL: back to the engine's own stream.
 * For work meant to run beside the engine's stream (DDP's AdamW of a
 * bucket while backward goes on); ordering between the two is the
 * caller's (events), and eng_sync / upload / download wait for the stream
 * set at the time. The CPU engine has no streams: a stream fails there. */
int eng_set_stream(engine *e, void *stream);
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
/* Leave n SMs to work running beside the engine's stream (NCCL's
 * collectives during backward): matrix products enqueued from now on are
 * shaped for the device's SMs minus n (cuBLAS's SM count target), so a
 * product split into exactly one wave of blocks does not spill a few
 * blocks into a second wave when a collective holds some SMs. 0 restores
 * the whole device. The CPU engine has no SMs: n > 0 fails there. */
int eng_reserve_sms(engine *e, int n);
/* k_adamw / k_adamw_mean launched from now on use at most n thread blocks
 * (0: as many as the work needs), each looping over its share with many
 * bytes in flight (on Hopper one block per SM, fed by bulk copies): AdamW
 * running beside backward (DDP's grad_sync allgather) then holds n SMs,
 * not all of them. The same numbers as uncapped. A GPU hint: the CPU
 * engine has no blocks and ignores it. */
int eng_cap_adamw_blocks(engine *e, int n);
size_t eng_bytes_in_use(const engine *e);
size_t eng_peak_bytes(const engine *e);
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
/* 1 while recording; 1 while eng_profile collects. */
int eng_recording(const engine *e);
int eng_profiling(const engine *e);

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

/* ---- matrix products ---------------------------------------------------- */
/* C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, row-major; op(X) is X or
 * X^T as trans_x says; lda/ldb/ldc are the row strides of A, B, C as stored.
 * Linear layer y = x W^T: k_matmul(e, 0, 1, N, Dout, Din, 1, x, Din, W, Din,
 * 0, y, Dout, DT_F32). */
int k_matmul(engine *e, int trans_a, int trans_b, int m, int n, int k,
             float alpha, const float *A, int lda, const float *B, int ldb,
             float beta, float *C, int ldc, dtype compute);
/* The same for `batch` independent products, operand i at A + i*stride_a,
 * and likewise for B and C (attention over B*H heads). */
int k_matmul_batched(engine *e, int trans_a, int trans_b, int m, int n, int k,
                     float alpha, const float *A, int lda, long long stride_a,
                     const float *B, int ldb, long long stride_b, float beta,
                     float *C, int ldc, long long stride_c, int batch,
                     dtype compute);

/* ---- embedding ---------------------------------------------------------- */
/* out[i,:] = table[ids[i],:] for i < n; table [V, D]. ids are engine memory. */
int k_embedding_fwd(engine *e, const int32_t *ids, const float *table,
                    float *out, int n, int d, int vocab);
/* dtable[ids[i],:] += dout[i,:] (repeated ids accumulate). */
int k_embedding_bwd(engine *e, const int32_t *ids, const float *dout,
                    float *dtable, int n, int d, int vocab);

/* ---- RMSNorm ------------------------------------------------------------ */
/* y[i,:] = x[i,:] * rstd[i] * g, rstd[i] = 1/sqrt(mean_j x[i,j]^2 + eps);
 * rstd [n] is saved for backward. x, y [n, d]; y may not alias x. */
int k_rmsnorm_fwd(engine *e, const float *x, const float *g, float *y,
                  float *rstd, int n, int d, float eps);
/* dx = rstd*(g*dy) - x * rstd^3 * mean_j(g*dy*x) (written);
 * dg += sum_i dy * x * rstd (accumulated). */
int k_rmsnorm_bwd(engine *e, const float *dy, const float *x, const float *g,
                  const float *rstd, float *dx, float *dg, int n, int d);

/* ---- rotary position embedding ------------------------------------------ */
/* In place on x [B, H, T, Dh] (heads already split): for each pair
 * (x[2j], x[2j+1]) at position t, rotate by angle t * theta^(-2j/Dh).
 * inverse = 1 rotates by the negative angle: the backward pass. */
int k_rope(engine *e, float *x, int batch, int heads, int seq, int dh,
           float theta, int inverse);

/* ---- head layout --------------------------------------------------------- */
/* y [B, H, T, Dh] from x [B, T, H*Dh] (split) and back (merge). */
int k_split_heads(engine *e, const float *x, float *y, int batch, int seq,
                  int heads, int dh);
int k_merge_heads(engine *e, const float *x, float *y, int batch, int seq,
                  int heads, int dh);

/* ---- causal softmax (materialised attention) ----------------------------- */
/* For `mats` = B*H matrices S [T, T]: P[i,j] = softmax_j(scale * S[i,j]) over
 * j <= i, and P[i,j] = 0 for j > i. S and P may alias. */
int k_softmax_causal_fwd(engine *e, const float *S, float *P, int mats,
                         int seq, float scale);
/* dS = scale * P * (dP - rowsum(dP * P)) (written); dS may alias dP. */
int k_softmax_causal_bwd(engine *e, const float *P, const float *dP,
                         float *dS, int mats, int seq, float scale);

/* ---- SwiGLU gate ---------------------------------------------------------- */
/* h = silu(a) * b elementwise, silu(z) = z * sigmoid(z); n elements. */
int k_swiglu_fwd(engine *e, const float *a, const float *b, float *h,
                 size_t n);
/* da = dh * b * silu'(a), db = dh * silu(a) (written). */
int k_swiglu_bwd(engine *e, const float *dh, const float *a, const float *b,
                 float *da, float *db, size_t n);

/* ---- cross-entropy --------------------------------------------------------- */
/* losses[i] = logsumexp(logits[i,:]) - logits[i, targets[i]], lse[i] saved;
 * logits [n, V]. The mean is the caller's (download losses, sum). */
int k_cross_entropy_fwd(engine *e, const float *logits,
                        const int32_t *targets, float *losses, float *lse,
                        int n, int vocab);
/* dlogits[i,:] = scale * (softmax(logits[i,:]) - onehot(targets[i]))
 * (written); scale = 1/n for a mean loss. dlogits may alias logits. */
int k_cross_entropy_bwd(engine *e, const float *logits,
                        const int32_t *targets, const float *lse,
                        float *dlogits, int n, int vocab, float scale);

/* ---- LayerNorm and ReLU ------------------------------------------------------ */
/* The handout's ToyModel (model/toy.h). x, y, dy, dx [n, d]; w, b, dw, db
 * [d]; mean, rstd [n]. LayerNorm over the last dim, with weight and bias:
 *   mean[i] = mean_j x[i,j], rstd[i] = 1/sqrt(mean_j (x[i,j]-mean[i])^2 + eps)
 *   y[i,j]  = (x[i,j] - mean[i]) * rstd[i] * w[j] + b[j]   (mean, rstd saved)
 * y may not alias x. */
int k_layernorm_fwd(engine *e, const float *x, const float *w, const float *b,
                    float *y, float *mean, float *rstd, int n, int d,
                    float eps);
/* With xhat = (x - mean) * rstd and g = dy * w:
 *   dx = rstd * (g - mean_j g - xhat * mean_j(g * xhat))   (written)
 *   dw += sum_i dy * xhat,  db += sum_i dy                 (accumulated)
 * dx may be dy's buffer, not x's. */
int k_layernorm_bwd(engine *e, const float *dy, const float *x,
                    const float *w, const float *mean, const float *rstd,
                    float *dx, float *dw, float *db, int n, int d);
/* y = max(x, 0) over n elements; y may alias x. */
int k_relu_fwd(engine *e, const float *x, float *y, size_t n);
/* dx = dy where x > 0, else 0 (written; 0 at x = 0, as PyTorch). x may be
 * the forward's output, which is > 0 exactly where its input was; dx may
 * alias dy. */
int k_relu_bwd(engine *e, const float *dy, const float *x, float *dx,
               size_t n);

/* ---- optimizer -------------------------------------------------------------- */
/* The course's AdamW, step t >= 1, over n elements:
 *   p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   p -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps). */
int k_adamw(engine *e, float *p, const float *g, float *m, float *v,
            size_t n, float lr, float b1, float b2, float eps, float wd,
            long long t);
/* k_adamw whose gradient is the mean of ng arrays (1 <= ng <=
 * K_ADAMW_MAX_GRADS): g = (g[0] + ... + g[ng-1]) / ng, summed in fp32 in
 * that order. Data parallelism that gathers every rank's raw gradients
 * (parallel/ddp.h, grad_sync allgather) averages them here, in the pass
 * AdamW makes anyway, instead of in a reduction. */
enum { K_ADAMW_MAX_GRADS = 8 };
int k_adamw_mean(engine *e, float *p, const float *const *g, int ng,
                 float *m, float *v, size_t n, float lr, float b1, float b2,
                 float eps, float wd, long long t);

/* ---- the fused path --------------------------------------------------------- */
/* What the model's fused path (model/forward_fused.c) runs instead of chains
 * of the ops above: fewer passes over memory, and activations stored in the
 * matrix products' input dtype `lt` (DT_F32 for fp32; DT_BF16 / DT_F16 for
 * mixed precision) so products read them with no cast. Reductions,
 * normalisation statistics and the residual stream stay fp32. Pointers
 * typed void * hold elements of the dtype named next to them. The CPU engine
 * implements every one for DT_F32 only (the reference the CUDA engine is
 * tested against), like its matrix products. */

/* C[m,n] (ct) = alpha * op(A) op(B) (at, bt) + beta * C, fp32 accumulation;
 * as k_matmul otherwise. Inputs must share one dtype: DT_F32 is true fp32
 * (run as `f32` says: F32_EXACT, F32_TF32 or F32_3XTF32), 16-bit inputs use tensor
 * cores; C may be fp32 or the inputs' dtype (rounded once, at the end). */
int k_matmul_ex(engine *e, int trans_a, int trans_b, int m, int n, int k,
                float alpha, const void *A, int lda, const void *B, int ldb,
                dtype in_t, float beta, void *C, int ldc, dtype ct,
                f32_products f32);

/* sum = a + b (fp32, b may be NULL: sum is a, and `sum` may be NULL), then
 * y (yt) = RMSNorm(sum) * g with rstd saved, as k_rmsnorm_fwd: the residual
 * add and the next norm in one pass. a, b, sum, y [n, d]. */
int k_add_rmsnorm_fwd(engine *e, const float *a, const float *b, float *sum,
                      const float *g, void *y, dtype yt, float *rstd, int n,
                      int d, float eps);
/* dx = dres + RMSNorm backward (k_rmsnorm_bwd's dx; dres may be NULL, and
 * dx may be dres), dg accumulated, in fp32; dy is in lt (the product that
 * made it rounded it, as autocast does). When dx_low is not NULL it also
 * gets dx rounded to lt (the next products' input). */
int k_rmsnorm_bwd_ex(engine *e, const void *dy, const float *x,
                     const float *g, const float *rstd, const float *dres,
                     float *dx, void *dx_low, dtype lt, float *dg, int n,
                     int d);

/* qkv [B*T, 3D] (lt; x W_qkv^T: q, k, v side by side) -> q, k, v
 * [B, H, T, Dh] (lt), q and k rotated by RoPE (k_rope's angles; the
 * rotation in fp32). */
int k_qkv_split_rope(engine *e, const void *qkv, void *q, void *k, void *v,
                     dtype lt, int batch, int seq, int heads, int dh,
                     float theta);
/* Its backward: dq, dk, dv [B, H, T, Dh] (lt) -> dqkv [B*T, 3D] (lt), dq
 * and dk rotated back. */
int k_qkv_merge_rope_bwd(engine *e, const void *dq, const void *dk,
                         const void *dv, void *dqkv, dtype lt, int batch,
                         int seq, int heads, int dh, float theta);
/* k_split_heads / k_merge_heads with typed ends (xt -> yt). */
int k_split_heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                     int batch, int seq, int heads, int dh);
int k_merge_heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                     int batch, int seq, int heads, int dh);

/* h = silu(a) * b, all lt, math in fp32. */
int k_swiglu_fwd_ex(engine *e, const void *a, const void *b, void *h,
                    dtype lt, size_t n);
/* da = dh * b * silu'(a), db = dh * silu(a), all lt (written); when h is
 * not NULL it also gets the forward's silu(a) * b, so a backward that
 * recomputes h reads a and b once for both. */
int k_swiglu_bwd_ex(engine *e, const void *dh, const void *a, const void *b,
                    void *da, void *db, void *h, dtype lt, size_t n);

/* k_cross_entropy_bwd writing dlogits in dt (a separate buffer when dt is
 * not fp32, since a narrower row cannot overwrite its source in place). */
int k_cross_entropy_bwd_ex(engine *e, const float *logits,
                           const int32_t *targets, const float *lse,
                           void *dlogits, dtype dt, int n, int vocab,
                           float scale);

/* k_adamw that also writes p_low (lt) = the updated p rounded, when p_low is
 * not NULL: the low-precision copy of the weights the products read, kept
 * in the same pass. */
int k_adamw_ex(engine *e, float *p, void *p_low, dtype lt, const float *g,
               float *m, float *v, size_t n, float lr, float b1, float b2,
               float eps, float wd, long long t);

/* g *= inv_scale over n elements, and *finite (host) = 1 if every result is
 * finite, else 0: fp16 training's dynamic loss scaling (model.c). Waits for
 * the engine (the answer decides whether the optimizer step runs). */
int k_grad_unscale(engine *e, float *g, size_t n, float inv_scale,
                   int *finite);

/* ---- elementwise ---------------------------------------------------------- */
int k_add(engine *e, const float *a, const float *b, float *out, size_t n);
int k_scale(engine *e, float *x, float s, size_t n);          /* x *= s */
/* dst (dtype dt) = src (dtype st), n elements, round to nearest even. */
int k_cast(engine *e, const void *src, dtype st, void *dst, dtype dt,
           size_t n);

/* ---- attention ------------------------------------------------------------- */
/* softmax(scale * Q K^T) V per head, two ways: materialised (scores and
 * probabilities in memory, as the reference model computes it) or
 * FlashAttention-2 (tiled over queries and keys with an online softmax;
 * only O and the logsumexp L reach memory, backward recomputes P from L). */
typedef enum { ATTN_MATERIALIZED, ATTN_FLASH } attn_impl;
/* "materialized" | "flash"; -1 for anything else. */
int attn_impl_parse(const char *s, attn_impl *out);
/* q [BH, Tq, Dh], k and v [BH, Tk, Dh], o [BH, Tq, Dh], all of dtype dt
 * (DT_F32, DT_BF16, DT_F16; row-major, contiguous). lse [BH, Tq] fp32:
 * L_i = log sum_j exp(scale * q_i.k_j) over the keys row i may see.
 * causal: row i sees keys j <= i (query i and key i are one position, the
 * handout's index comparison; key 0 is always visible, so no row is empty).
 * Accumulation always fp32.
 * P: for ATTN_MATERIALIZED the caller's buffer [BH, Tq, Tk] of dtype dt
 * receiving the probabilities (kept for backward, so memory accounting shows
 * it under the caller's tag); must be NULL for ATTN_FLASH. The CPU engine
 * supports DT_F32 only. */
int k_attention_fwd(engine *e, attn_impl impl, const void *q, const void *k,
                    const void *v, void *o, float *lse, void *P, int bh,
                    int tq, int tk, int dh, int causal, float scale, dtype dt);
/* dq, dk, dv (written, dtype dt) from dout [BH, Tq, Dh]; flash recomputes P
 * from q, k and lse; materialized reads P (dS scratch from the engine's
 * workspace). */
int k_attention_bwd(engine *e, attn_impl impl, const void *q, const void *k,
                    const void *v, const void *o, const void *dout,
                    const float *lse, const void *P, void *dq, void *dk,
                    void *dv, int bh, int tq, int tk, int dh, int causal,
                    float scale, dtype dt);

#ifdef __cplusplus
}
#endif
#endif
