/* What the engines (backends) share with kernels/engine.c: the engine's
 * fields and the table of operations each backend fills in.
 *
 * engine.c checks what every backend would check alike (sizes >= 0, strides
 * large enough, buffers present when there is work, known dtypes, step >= 1)
 * and then calls through e->ops, so a backend sees only calls that make
 * sense; a call with no work (a zero size) returns before reaching it. It
 * also keeps the memory accounting: a backend's alloc/free only get and give
 * back memory.
 *
 * Each op has the signature of the k_* function of the same name
 * (kernels.h). A backend creates an engine with calloc, sets ops (first) and
 * impl; ops->destroy frees impl, never the engine itself. */
#ifndef TL_ENGINE_INTERNAL_H
#define TL_ENGINE_INTERNAL_H

#include "kernels/kernels.h"

typedef struct engine_ops {
  const char *name;                         /* "cpu", "cuda" */
  void (*destroy)(engine *e);               /* frees e->impl */

  /* Memory. alloc fails with ERR_OOM naming bytes and tag. */
  int (*alloc)(engine *e, size_t bytes, const char *tag, void **p);
  void (*free)(engine *e, void *p);
  int (*upload)(engine *e, void *dst, const void *host_src, size_t bytes);
  int (*download)(engine *e, void *host_dst, const void *src, size_t bytes);
  int (*memset0)(engine *e, void *p, size_t bytes);
  int (*sync)(engine *e);
  void *(*stream)(engine *e);               /* NULL: host engine */

  /* Operations, one per k_* function. */
  int (*matmul)(engine *e, int trans_a, int trans_b, int m, int n, int k,
                float alpha, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc, dtype compute);
  int (*matmul_batched)(engine *e, int trans_a, int trans_b, int m, int n,
                        int k, float alpha, const float *A, int lda,
                        long long stride_a, const float *B, int ldb,
                        long long stride_b, float beta, float *C, int ldc,
                        long long stride_c, int batch, dtype compute);
  int (*embedding_fwd)(engine *e, const int32_t *ids, const float *table,
                       float *out, int n, int d, int vocab);
  int (*embedding_bwd)(engine *e, const int32_t *ids, const float *dout,
                       float *dtable, int n, int d, int vocab);
  int (*rmsnorm_fwd)(engine *e, const float *x, const float *g, float *y,
                     float *rstd, int n, int d, float eps);
  int (*rmsnorm_bwd)(engine *e, const float *dy, const float *x,
                     const float *g, const float *rstd, float *dx, float *dg,
                     int n, int d);
  int (*rope)(engine *e, float *x, int batch, int heads, int seq, int dh,
              float theta, int inverse);
  int (*split_heads)(engine *e, const float *x, float *y, int batch, int seq,
                     int heads, int dh);
  int (*merge_heads)(engine *e, const float *x, float *y, int batch, int seq,
                     int heads, int dh);
  int (*softmax_causal_fwd)(engine *e, const float *S, float *P, int mats,
                            int seq, float scale);
  int (*softmax_causal_bwd)(engine *e, const float *P, const float *dP,
                            float *dS, int mats, int seq, float scale);
  int (*swiglu_fwd)(engine *e, const float *a, const float *b, float *h,
                    size_t n);
  int (*swiglu_bwd)(engine *e, const float *dh, const float *a,
                    const float *b, float *da, float *db, size_t n);
  int (*cross_entropy_fwd)(engine *e, const float *logits,
                           const int32_t *targets, float *losses, float *lse,
                           int n, int vocab);
  int (*cross_entropy_bwd)(engine *e, const float *logits,
                           const int32_t *targets, const float *lse,
                           float *dlogits, int n, int vocab, float scale);
  int (*adamw)(engine *e, float *p, const float *g, float *m, float *v,
               size_t n, float lr, float b1, float b2, float eps, float wd,
               long long t);
  int (*add)(engine *e, const float *a, const float *b, float *out, size_t n);
  int (*scale)(engine *e, float *x, float s, size_t n);
  int (*cast)(engine *e, const void *src, dtype st, void *dst, dtype dt,
              size_t n);
} engine_ops;

/* Memory accounting, kept by engine.c. One record per live allocation
 * (few: the model makes a handful of large ones, so a list searched from
 * the newest end is enough), one entry per tag ever seen. */
typedef struct eng_block {
  void *p;
  size_t bytes;
  int tag;              /* index into tags */
} eng_block;

typedef struct eng_tag {
  char *name;
  size_t in_use, peak;
} eng_tag;

struct engine {
  const engine_ops *ops;
  void *impl;           /* the backend's own state */

  size_t in_use, peak;
  eng_block *blocks;
  int nblocks, cap_blocks;
  eng_tag *tags;
  int ntags, cap_tags;
};

#endif
