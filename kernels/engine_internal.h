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

/* The fused path's operations (kernels.h, "the fused path"), each with the
 * signature of its k_* function; kernels/engine_fused.c checks and
 * dispatches them. */
typedef struct fused_ops {
  int (*matmul_ex)(engine *e, int trans_a, int trans_b, int m, int n, int k,
                   float alpha, const void *A, int lda, const void *B,
                   int ldb, dtype in_t, float beta, void *C, int ldc,
                   dtype ct, f32_products f32);
  int (*add_rmsnorm_fwd)(engine *e, const float *a, const float *b,
                         float *sum, const float *g, void *y, dtype yt,
                         float *rstd, int n, int d, float eps);
  int (*rmsnorm_bwd_ex)(engine *e, const void *dy, const float *x,
                        const float *g, const float *rstd, const float *dres,
                        float *dx, void *dx_low, dtype lt, float *dg, int n,
                        int d);
  int (*qkv_split_rope)(engine *e, const void *qkv, void *q, void *k,
                        void *v, dtype lt, int batch, int seq, int heads,
                        int dh, float theta);
  int (*qkv_merge_rope_bwd)(engine *e, const void *dq, const void *dk,
                            const void *dv, void *dqkv, dtype lt, int batch,
                            int seq, int heads, int dh, float theta);
  int (*split_heads_ex)(engine *e, const void *x, dtype xt, void *y,
                        dtype yt, int batch, int seq, int heads, int dh);
  int (*merge_heads_ex)(engine *e, const void *x, dtype xt, void *y,
                        dtype yt, int batch, int seq, int heads, int dh);
  int (*swiglu_fwd_ex)(engine *e, const void *a, const void *b, void *h,
                       dtype lt, size_t n);
  int (*swiglu_bwd_ex)(engine *e, const void *dh, const void *a,
                       const void *b, void *da, void *db, void *h, dtype lt, size_t n);
  int (*cross_entropy_bwd_ex)(engine *e, const float *logits,
                              const int32_t *targets, const float *lse,
                              void *dlogits, dtype dt, int n, int vocab,
                              float scale);
  int (*adamw_ex)(engine *e, float *p, void *p_low, dtype lt, const float *g,
                  float *m, float *v, size_t n, float lr, float b1, float b2,
                  float eps, float wd, long long t);
  int (*grad_unscale)(engine *e, float *g, size_t n, float inv_scale,
                      int *finite);
} fused_ops;

typedef struct engine_ops {
  const char *name;                         /* "cpu", "cuda" */
  void (*destroy)(engine *e);               /* frees e->impl */

  /* Memory. alloc fails with ERR_OOM naming bytes and tag. */
  int (*alloc)(engine *e, size_t bytes, const char *tag, void **p);
  void (*free)(engine *e, void *p);
  int (*upload)(engine *e, void *dst, const void *host_src, size_t bytes);
  int (*download)(engine *e, void *host_dst, const void *src, size_t bytes);
  int (*memset0)(engine *e, void *p, size_t bytes);
  int (*copy)(engine *e, void *dst, const void *src, size_t bytes);
  int (*sync)(engine *e);
  void *(*stream)(engine *e);               /* NULL: host engine */
  int (*set_stream)(engine *e, void *stream);   /* NULL: host engine */
  int (*f32_products)(engine *e, f32_products p);   /* NULL: F32_EXACT only */
  int (*reserve_sms)(engine *e, int n);     /* NULL: no SMs to reserve */
  int (*cap_adamw_blocks)(engine *e, int n);   /* NULL: no blocks */
  /* Profiling (NULL on a synchronous engine: the host clock is used). An
   * event recorded on the stream now; ms between two; give one back. */
  void *(*prof_record)(engine *e);
  double (*prof_elapsed_ms)(engine *e, void *a, void *b);
  void (*prof_release)(engine *e, void *ev);
  /* CUDA graphs (NULL: none). graph_end ends the recording whatever
   * happens and instantiates it; *g stays NULL on failure. */
  int (*graph_begin)(engine *e);
  int (*graph_end)(engine *e, void **g);
  int (*graph_launch)(engine *e, void *g);
  void (*graph_destroy)(engine *e, void *g);

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
  int (*layernorm_fwd)(engine *e, const float *x, const float *w,
                       const float *b, float *y, float *mean, float *rstd,
                       int n, int d, float eps);
  int (*layernorm_bwd)(engine *e, const float *dy, const float *x,
                       const float *w, const float *mean, const float *rstd,
                       float *dx, float *dw, float *db, int n, int d);
  int (*relu_fwd)(engine *e, const float *x, float *y, size_t n);
  int (*relu_bwd)(engine *e, const float *dy, const float *x, float *dx,
                  size_t n);
  /* the gradient is the mean of g[0..ng-1] (k_adamw_mean; k_adamw: ng 1) */
  int (*adamw)(engine *e, float *p, const float *const *g, int ng, float *m,
               float *v, size_t n, float lr, float b1, float b2, float eps,
               float wd, long long t);
  int (*add)(engine *e, const float *a, const float *b, float *out, size_t n);
  int (*scale)(engine *e, float *x, float s, size_t n);
  int (*cast)(engine *e, const void *src, dtype st, void *dst, dtype dt,
              size_t n);
  const fused_ops *fused;                   /* the fused path */
  int (*attention_fwd)(engine *e, attn_impl impl, const void *q,
                       const void *k, const void *v, void *o, float *lse,
                       void *P, int bh, int tq, int tk, int dh, int causal,
                       float scale, dtype dt);
  int (*attention_bwd)(engine *e, attn_impl impl, const void *q,
                       const void *k, const void *v, const void *o,
                       const void *dout, const float *lse, const void *P,
                       void *dq, void *dk, void *dv, int bh, int tq, int tk,
                       int dh, int causal, float scale, dtype dt);
} engine_ops;

/* Memory accounting, kept by engine.c. One record per live allocation
 * (few: the model makes a handful of large ones, so a list searched from
 * the newest end is enough), one entry per tag ever seen. */
typedef struct eng_block {
  void *p;
  size_t bytes;
  int tag;              /* index into tags */
  eng_allocator a;      /* a.free: freed by it (eng_set_tag_allocator) */
} eng_block;

typedef struct eng_tag {
  char *name;
  size_t in_use, peak;
  eng_allocator a;      /* a.alloc: this tag's memory comes from it */
} eng_tag;

/* engine.c's profiling brackets, for the k_* entry points outside it:
 * start returns a record handle (0 when not profiling). */
struct engine;
int eng_prof_start_(struct engine *e, const char *op);
void eng_prof_stop_(struct engine *e, int rec);

/* One bracketed operation while profiling (engine.c). */
typedef struct eng_prof_rec {
  const char *op;       /* the op's name (a string literal) */
  void *ev[2];          /* device events, or NULL ... */
  double host[2];       /* ... and host clock times (synchronous engines) */
} eng_prof_rec;

struct engine {
  const engine_ops *ops;
  void *impl;           /* the backend's own state */
  int prof_on;
  int recording;        /* between eng_graph_begin and eng_graph_end */
  eng_prof_rec *prof;
  int nprof, cap_prof;

  size_t in_use, peak;
  eng_block *blocks;
  int nblocks, cap_blocks;
  eng_tag *tags;
  int ntags, cap_tags;

  /* eng_memlog's timeline */
  int log_on, nlog, cap_log, log_lost;
  double log_t0;
  struct eng_memevent *log;
};

#endif
