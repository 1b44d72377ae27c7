/* The CPU engine's operations (one file per family, kernels/cpu/<family>.c), the
 * ops table that engine_cpu.c builds from them, and what they share.
 *
 * Each cpu_* function has the signature of the k_* function of the same
 * name (kernels.h) and is called only through engine.c, which has already
 * checked the arguments: sizes >= 0 and not all zero, buffers non-NULL,
 * strides large enough. Parallel loops use OpenMP with the engine's thread
 * count (cpu_threads); each iteration owns what it writes, so results do not
 * depend on the number of threads. */
#ifndef TL_KERNELS_CPU_H
#define TL_KERNELS_CPU_H

#include "kernels/engine_internal.h"

/* Threads for this engine's parallel loops (for num_threads clauses). */
int cpu_threads(const engine *e);

/* The fused path (fused.c). */
extern const fused_ops cpu_fused_ops;

int cpu_matmul(engine *e, int trans_a, int trans_b, int m, int n, int k,
               float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc, dtype compute);
int cpu_matmul_batched(engine *e, int trans_a, int trans_b, int m, int n,
                       int k, float alpha, const float *A, int lda,
                       long long stride_a, const float *B, int ldb,
                       long long stride_b, float beta, float *C, int ldc,
                       long long stride_c, int batch, dtype compute);
int cpu_embedding_fwd(engine *e, const int32_t *ids, const float *table,
                      float *out, int n, int d, int vocab);
int cpu_embedding_bwd(engine *e, const int32_t *ids, const float *dout,
                      float *dtable, int n, int d, int vocab);
int cpu_rmsnorm_fwd(engine *e, const float *x, const float *g, float *y,
                    float *rstd, int n, int d, float eps);
int cpu_rmsnorm_bwd(engine *e, const float *dy, const float *x,
                    const float *g, const float *rstd, float *dx, float *dg,
                    int n, int d);
int cpu_rope(engine *e, float *x, int batch, int heads, int seq, int dh,
             float theta, int inverse);
int cpu_split_heads(engine *e, const float *x, float *y, int batch, int seq,
                    int heads, int dh);
int cpu_merge_heads(engine *e, const float *x, float *y, int batch, int seq,
                    int heads, int dh);
int cpu_softmax_causal_fwd(engine *e, const float *S, float *P, int mats,
                           int seq, float scale);
int cpu_softmax_causal_bwd(engine *e, const float *P, const float *dP,
                           float *dS, int mats, int seq, float scale);
int cpu_swiglu_fwd(engine *e, const float *a, const float *b, float *h,
                   size_t n);
int cpu_swiglu_bwd(engine *e, const float *dh, const float *a,
                   const float *b, float *da, float *db, size_t n);
int cpu_cross_entropy_fwd(engine *e, const float *logits,
                          const int32_t *targets, float *losses, float *lse,
                          int n, int vocab);
int cpu_cross_entropy_bwd(engine *e, const float *logits,
                          const int32_t *targets, const float *lse,
                          float *dlogits, int n, int vocab, float scale);
int cpu_layernorm_fwd(engine *e, const float *x, const float *w,
                      const float *b, float *y, float *mean, float *rstd,
                      int n, int d, float eps);
int cpu_layernorm_bwd(engine *e, const float *dy, const float *x,
                      const float *w, const float *mean, const float *rstd,
                      float *dx, float *dw, float *db, int n, int d);
int cpu_relu_fwd(engine *e, const float *x, float *y, size_t n);
int cpu_relu_bwd(engine *e, const float *dy, const float *x, float *dx,
                 size_t n);
int cpu_adamw(engine *e, float *p, const float *const *g, int ng, float *m, float *v,
              size_t n, float lr, float b1, float b2, float eps, float wd,
              long long t);
int cpu_add(engine *e, const float *a, const float *b, float *out, size_t n);
int cpu_scale(engine *e, float *x, float s, size_t n);
int cpu_cast(engine *e, const void *src, dtype st, void *dst, dtype dt,
             size_t n);
/* Attention (attention.c dispatches; the materialised loops live there, the
 * tiled FlashAttention-2 in attention_flash.c). fp32 only. */
int cpu_attention_fwd(engine *e, attn_impl impl, const void *q, const void *k,
                      const void *v, void *o, float *lse, void *P, int bh,
                      int tq, int tk, int dh, int causal, float scale,
                      dtype dt);
int cpu_attention_bwd(engine *e, attn_impl impl, const void *q, const void *k,
                      const void *v, const void *o, const void *dout,
                      const float *lse, const void *P, void *dq, void *dk,
                      void *dv, int bh, int tq, int tk, int dh, int causal,
                      float scale, dtype dt);
int cpu_flash_fwd(engine *e, const float *q, const float *k, const float *v,
                  float *o, float *lse, int bh, int tq, int tk, int dh,
                  int causal, float scale);
int cpu_flash_bwd(engine *e, const float *q, const float *k, const float *v,
                  const float *o, const float *dout, const float *lse,
                  float *dq, float *dk, float *dv, int bh, int tq, int tk,
                  int dh, int causal, float scale);

#endif
