/* The backend-independent half of the compute interface: dtype names and
 * sizes, engine teardown, the memory accounting (bytes in use and peak, in
 * total and per tag), and the k_* entry points of ops.def's K_OP and
 * K_OP_AS rows (engine_fused.c has the K_FUSED rows'): each op's arguments
 * are checked alike for every engine by its check_NAME, written here in
 * ops.def's order, before the generated entry point calls the engine's ops
 * table (engine_internal.h, ENG_ENTRY).
 *
 * A bad argument is reported with FAIL ("k_matmul: lda=3 < k=5 ...") rather
 * than an abort, so a misconfigured job ends as a failed row with the
 * reason. A call with no work (a zero size) returns 0 without reaching the
 * backend. */
#include "config.h"
#include "kernels/engine_internal.h"
#include "common/check.h"
#include "common/clock.h"
#include "kernels/init_normal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ---------------------------------------------------------------- */

static int dtype_known(dtype t) {
  return t == DT_F32 || t == DT_BF16 || t == DT_F16;
}

/* ---- engines ---------------------------------------------------------------- */

/* The engine that holds e's shared state: e itself, or a view's base. */
static engine *base_of(engine *e) { return e->base ? e->base : e; }
engine *eng_base(engine *e) { return base_of(e); }
static const engine *cbase_of(const engine *e) {
  return e->base ? e->base : e;
}

void engine_destroy(engine *e) {
  if (!e) return;
  if (e->base) {   /* a view owns nothing but itself and a side stream */
    if (e->own_stream) e->ops->stream_destroy(e, e->own_stream);
    free(e);
    return;
  }
  /* Whatever the caller left allocated goes back too. */
  for (int i = 0; i < e->nblocks; i++) e->ops->free(e, e->blocks[i].p);
  e->ops->destroy(e);
  for (int i = 0; i < e->ntags; i++) free(e->tags[i].name);
  if (e->ops->prof_release)
    for (int i = 0; i < e->nprof; i++)
      for (int k = 0; k < 2; k++)
        if (e->prof[i].ev[k]) e->ops->prof_release(e, e->prof[i].ev[k]);
  free(e->prof);
  free(e->log);
  free(e->tags);
  free(e->blocks);
  free(e);
}

const char *engine_name(const engine *e) { return e->ops->name; }

void *eng_stream(engine *e) {
  return e->ops->stream ? e->ops->stream(e) : NULL;
}

/* ---- execution contexts ----------------------------------------------------- */

/* Whether ctx can run on e's engine; the reason when not. */
static int check_ctx(engine *e, const char *what, const eng_ctx *ctx) {
  if (!ctx) FAIL(ERR_FAIL, "%s: NULL context", what);
  if (ctx->sm_reserve < 0)
    FAIL(ERR_FAIL, "%s: sm_reserve = %d (allowed: >= 0)", what,
         ctx->sm_reserve);
  if (ctx->adamw_blocks < 0)
    FAIL(ERR_FAIL, "%s: adamw_blocks = %d (allowed: >= 0)", what,
         ctx->adamw_blocks);
  if (e->ops->check_ctx) {
    TRY(e->ops->check_ctx(e, ctx));
    return 0;
  }
  if (ctx->stream)
    FAIL(ERR_FAIL, "%s: the %s engine runs on no stream (allowed: NULL, or "
         "the cuda engine)", what, e->ops->name);
  if (ctx->sm_reserve > 0)
    FAIL(ERR_FAIL, "%s: the %s engine has no SMs to reserve (allowed: 0, or "
         "the cuda engine)", what, e->ops->name);
  return 0;
}

int eng_view(engine *base, const eng_ctx *ctx, engine **out) {
  *out = NULL;
  base = base_of(base);
  TRY(check_ctx(base, "eng_view", ctx));
  engine *v = calloc(1, sizeof *v);
  CHECK_ALLOC(v, sizeof *v);
  v->ops = base->ops;
  v->impl = base->impl;
  v->base = base;
  v->ctx = *ctx;
  *out = v;
  return 0;
}

int eng_side_view(engine *base, int adamw_blocks, engine **out) {
  *out = NULL;
  base = base_of(base);
  void *s = NULL;
  if (base->ops->stream_create) TRY(base->ops->stream_create(base, &s));
  eng_ctx ctx = {s, 0, adamw_blocks};
  int rc = eng_view(base, &ctx, out);
  if (rc < 0) {
    if (s) base->ops->stream_destroy(base, s);
    return rc;
  }
  (*out)->own_stream = s;
  return 0;
}

struct eng_event {
  engine *base;   /* whose handles may wait for it */
  void *ev;       /* the backend's; NULL on a host engine */
};

int eng_event_record(engine *e, eng_event **ev) {
  *ev = NULL;
  eng_event *x = calloc(1, sizeof *x);
  CHECK_ALLOC(x, sizeof *x);
  x->base = base_of(e);
  if (e->ops->event_record) {
    int rc = e->ops->event_record(e, &x->ev);
    if (rc < 0) {
      free(x);
      return rc;
    }
  }
  *ev = x;
  return 0;
}

int eng_event_wait(engine *e, eng_event *ev) {
  if (!ev) FAIL(ERR_FAIL, "eng_event_wait: no event");
  if (ev->base != base_of(e)) {
    eng_event_free(e, ev);
    FAIL(ERR_FAIL, "eng_event_wait: an event of another engine (allowed: "
         "one recorded through this engine or its views)");
  }
  int rc = ev->ev ? e->ops->event_wait(e, ev->ev) : 0;
  free(ev);
  return rc;
}

void eng_event_free(engine *e, eng_event *ev) {
  (void)e;   /* released by the engine it was recorded on, whichever e is */
  if (!ev) return;
  if (ev->ev) ev->base->ops->event_free(ev->base, ev->ev);
  free(ev);
}

int eng_wait_for(engine *waiter, engine *signaler) {
  if (base_of(waiter) != base_of(signaler))
    FAIL(ERR_FAIL, "eng_wait_for: handles of two engines (allowed: an "
         "engine and its views)");
  eng_event *ev;
  TRY(eng_event_record(signaler, &ev));
  return eng_event_wait(waiter, ev);
}

int eng_f32_products(engine *e, f32_products p) {
  if (e->base)
    FAIL(ERR_FAIL, "eng_f32_products on a view (allowed: the base engine, "
         "whose setting its views share)");
  if (p != F32_EXACT && p != F32_TF32 && p != F32_3XTF32)
    FAIL(ERR_FAIL, "eng_f32_products: %d is not a way to run fp32 products "
         "(allowed: F32_EXACT, F32_TF32, F32_3XTF32)", (int)p);
  if (e->ops->f32_products) return e->ops->f32_products(e, p);
  if (p != F32_EXACT)
    FAIL(ERR_FAIL, "the %s engine has no TF32 tensor cores for %s products "
         "(allowed: fp32, or the cuda engine)", e->ops->name,
         f32_products_name(p));
  return 0;
}

#ifndef HAVE_CUDA
/* Without a CUDA toolkit the CUDA engine is not built (kernels/cuda/). */
int engine_cuda_create(engine **out, int device) {
  *out = NULL;
  FAIL(ERR_FAIL, "engine_cuda_create(device %d): this build has no CUDA "
       "engine (configure found no CUDA toolkit)", device);
}
#endif

/* ---- memory and its accounting -------------------------------------------- */

struct eng_memevent {
  double t_s;
  int tag;
  long long delta;
  size_t in_use;
};

/* Append one event to the timeline; a full host is counted, not fatal. */
static void log_event(engine *e, int tag, long long delta) {
  if (!e->log_on) return;
  if (e->nlog == e->cap_log) {
    int cap = e->cap_log ? 2 * e->cap_log : 64;
    struct eng_memevent *l = realloc(e->log, (size_t)cap * sizeof *l);
    if (!l) {
      e->log_lost++;
      return;
    }
    e->log = l;
    e->cap_log = cap;
  }
  e->log[e->nlog++] = (struct eng_memevent){clock_now_s() - e->log_t0, tag,
                                            delta, e->in_use};
}

void eng_memlog(engine *e, int on) {
  e = base_of(e);
  if (on) {
    e->nlog = 0;
    e->log_lost = 0;
    e->log_t0 = clock_now_s();
  }
  e->log_on = on != 0;
}

int eng_memlog_events(const engine *e, int *lost) {
  e = cbase_of(e);
  if (lost) *lost = e->log_lost;
  return e->nlog;
}

void eng_memlog_event(const engine *e, int i, double *t_s, const char **tag,
                      long long *delta, size_t *in_use) {
  e = cbase_of(e);
  ASSERT(i >= 0 && i < e->nlog);
  const struct eng_memevent *v = &e->log[i];
  if (t_s) *t_s = v->t_s;
  if (tag) *tag = e->tags[v->tag].name;
  if (delta) *delta = v->delta;
  if (in_use) *in_use = v->in_use;
}

/* Index of tag `name`, added if new; -1 when the table cannot grow. */
static int tag_index(engine *e, const char *name) {
  for (int i = 0; i < e->ntags; i++)
    if (strcmp(e->tags[i].name, name) == 0) return i;
  if (e->ntags == e->cap_tags) {
    int cap = e->cap_tags ? 2 * e->cap_tags : 16;
    eng_tag *t = realloc(e->tags, (size_t)cap * sizeof *t);
    if (!t) return -1;
    e->tags = t;
    e->cap_tags = cap;
  }
  char *copy = strdup(name);
  if (!copy) return -1;
  e->tags[e->ntags] = (eng_tag){copy, 0, 0, {NULL, NULL, NULL}};
  return e->ntags++;
}

/* What cannot be recorded into a graph fails while recording. */
#define NOT_RECORDING(e, what)                                               \
  do {                                                                       \
    if (base_of(e)->recording)                                               \
      FAIL(ERR_FAIL, "%s while recording a CUDA graph (a recording holds "   \
           "stream work only: run the work once before recording it, so "   \
           "every buffer it grows has its size)", what);                     \
  } while (0)

int eng_alloc(engine *e, size_t bytes, const char *tag, void **p) {
  *p = NULL;
  if (!tag) tag = "(untagged)";
  NOT_RECORDING(e, "eng_alloc");
  e = base_of(e);   /* the accounting is the base's; alloc has no stream */
  /* Room in the tables first, so a recorded allocation cannot fail. */
  int ti = tag_index(e, tag);
  if (ti < 0)
    FAIL(ERR_OOM, "out of host memory recording an allocation (tag %s)", tag);
  if (e->nblocks == e->cap_blocks) {
    int cap = e->cap_blocks ? 2 * e->cap_blocks : 64;
    eng_block *b = realloc(e->blocks, (size_t)cap * sizeof *b);
    if (!b)
      FAIL(ERR_OOM, "out of host memory recording an allocation (tag %s)",
           tag);
    e->blocks = b;
    e->cap_blocks = cap;
  }
  eng_allocator a = e->tags[ti].a;
  if (a.alloc) {
    TRY(a.alloc(a.ctx, bytes, p));
  } else {
    TRY(e->ops->alloc(e, bytes, tag, p));
  }
  e->blocks[e->nblocks++] = (eng_block){*p, bytes, ti, a};
  eng_tag *t = &e->tags[ti];
  e->in_use += bytes;
  t->in_use += bytes;
  if (e->in_use > e->peak) e->peak = e->in_use;
  if (t->in_use > t->peak) t->peak = t->in_use;
  log_event(e, ti, (long long)bytes);
  return 0;
}

void eng_free(engine *e, void *p) {
  if (!p) return;
  /* The accounting is the base's; the waits below are e's stream's. */
  engine *b = base_of(e);
  int i = b->nblocks - 1;   /* newest first: frees often mirror allocs */
  while (i >= 0 && b->blocks[i].p != p) i--;
  ASSERT(i >= 0 && "eng_free of a pointer eng_alloc did not return");
  /* The backends give back memory only outside recordings (they check);
   * freeing memory a recording is reading would break it silently. */
  ASSERT(!b->recording && "eng_free while recording a CUDA graph");
  b->in_use -= b->blocks[i].bytes;
  b->tags[b->blocks[i].tag].in_use -= b->blocks[i].bytes;
  log_event(b, b->blocks[i].tag, -(long long)b->blocks[i].bytes);
  eng_allocator a = b->blocks[i].a;
  b->blocks[i] = b->blocks[--b->nblocks];
  if (a.alloc) {
    /* the stream may still use the block: wait, as the backends do */
    if (eng_sync(e) < 0) err_trace(__FILE__, __LINE__);
    a.free(a.ctx, p);
  } else {
    e->ops->free(e, p);
  }
}

int eng_set_tag_allocator(engine *e, const char *tag, const eng_allocator *a) {
  if (!tag) FAIL(ERR_FAIL, "eng_set_tag_allocator: NULL tag");
  e = base_of(e);
  if (a && (!a->alloc || !a->free))
    FAIL(ERR_FAIL, "eng_set_tag_allocator: tag %s needs both alloc and free",
         tag);
  int ti = tag_index(e, tag);
  if (ti < 0) FAIL(ERR_OOM, "out of host memory recording tag %s", tag);
  e->tags[ti].a = a ? *a : (eng_allocator){NULL, NULL, NULL};
  return 0;
}

int eng_upload(engine *e, void *dst, const void *host_src, size_t bytes) {
  if (bytes == 0) return 0;
  if (!dst || !host_src) FAIL(ERR_FAIL, "eng_upload: NULL buffer");
  NOT_RECORDING(e, "eng_upload");
  TRY(e->ops->upload(e, dst, host_src, bytes));
  return 0;
}

int eng_download(engine *e, void *host_dst, const void *src, size_t bytes) {
  if (bytes == 0) return 0;
  if (!host_dst || !src) FAIL(ERR_FAIL, "eng_download: NULL buffer");
  NOT_RECORDING(e, "eng_download");
  TRY(e->ops->download(e, host_dst, src, bytes));
  return 0;
}

int eng_memset0(engine *e, void *p, size_t bytes) {
  if (bytes == 0) return 0;
  if (!p) FAIL(ERR_FAIL, "eng_memset0: NULL buffer");
  TRY(e->ops->memset0(e, p, bytes));
  return 0;
}

int eng_copy(engine *e, void *dst, const void *src, size_t bytes) {
  if (bytes == 0) return 0;
  if (!dst || !src) FAIL(ERR_FAIL, "eng_copy: NULL buffer");
  const char *d = dst, *s = src;
  if (d < s + bytes && s < d + bytes)
    FAIL(ERR_FAIL, "eng_copy: the buffers overlap");
  TRY(e->ops->copy(e, dst, src, bytes));
  return 0;
}

int eng_sync(engine *e) {
  NOT_RECORDING(e, "eng_sync");
  TRY(e->ops->sync(e));
  return 0;
}

/* ---- CUDA graphs ------------------------------------------------------------ */

int eng_graphs_supported(const engine *e) {
  return e->ops->graph_begin != NULL;
}
int eng_recording(const engine *e) { return cbase_of(e)->recording; }
int eng_profiling(const engine *e) {
  const engine *b = cbase_of(e);
  return b->prof_on || b->kprof_on;
}

int eng_kprof_begin(engine *e) {
  e = base_of(e);
  if (!e->ops->kprof_begin)
    FAIL(ERR_FAIL, "eng_kprof_begin: the %s engine has no kernel-level "
         "profile (allowed: the cuda engine)", e->ops->name);
  if (e->recording) FAIL(ERR_FAIL, "eng_kprof_begin while recording a graph");
  TRY(e->ops->kprof_begin(e));
  e->kprof_on = 1;
  return 0;
}

int eng_kprof_end(engine *e, eng_kernel_stat **out, int *n,
                  eng_kprof_time *time) {
  e = base_of(e);
  *out = NULL;
  *n = 0;
  eng_kprof_time none;
  if (!time) time = &none;
  time->span_ms = time->busy_ms = 0;
  time->host_api[0] = '\0';
  if (!e->kprof_on) FAIL(ERR_FAIL, "eng_kprof_end: no eng_kprof_begin");
  e->kprof_on = 0;
  return e->ops->kprof_end(e, out, n, time);
}

int eng_monitor_begin(engine *e) {
  e = base_of(e);
  if (!e->ops->monitor_begin)
    FAIL(ERR_FAIL, "eng_monitor_begin: the %s engine has no clock and power "
         "monitor (allowed: the cuda engine)", e->ops->name);
  return e->ops->monitor_begin(e);
}

int eng_monitor_end(engine *e, eng_monitor *out) {
  e = base_of(e);
  memset(out, 0, sizeof *out);
  if (!e->ops->monitor_end)
    FAIL(ERR_FAIL, "eng_monitor_end: the %s engine has no monitor",
         e->ops->name);
  return e->ops->monitor_end(e, out);
}

int eng_range_push(engine *e, const char *name) {
  return e->ops->range_push ? e->ops->range_push(e, name) : 0;
}

int eng_range_pop(engine *e) {
  return e->ops->range_pop ? e->ops->range_pop(e) : 0;
}

int eng_graph_begin(engine *e) {
  if (!e->ops->graph_begin)
    FAIL(ERR_FAIL, "the %s engine cannot record CUDA graphs (allowed: the "
         "cuda engine)", e->ops->name);
  if (e->base)
    FAIL(ERR_FAIL, "eng_graph_begin on a view (allowed: the base engine; a "
         "view may launch a recording)");
  if (e->recording) FAIL(ERR_FAIL, "eng_graph_begin: already recording");
  if (e->prof_on)
    FAIL(ERR_FAIL, "eng_graph_begin while eng_profile collects (its "
         "brackets time each operation as it runs: profile without graphs)");
  TRY(e->ops->graph_begin(e));
  e->recording = 1;
  return 0;
}

int eng_graph_end(engine *e, eng_graph **g) {
  *g = NULL;
  if (e->base)
    FAIL(ERR_FAIL, "eng_graph_end on a view (allowed: the base engine)");
  if (!e->recording) FAIL(ERR_FAIL, "eng_graph_end: not recording");
  e->recording = 0;
  void *h = NULL;
  TRY(e->ops->graph_end(e, &h));
  *g = (eng_graph *)h;
  return 0;
}

int eng_graph_launch(engine *e, eng_graph *g) {
  if (!g) FAIL(ERR_FAIL, "eng_graph_launch: NULL graph");
  NOT_RECORDING(e, "eng_graph_launch");
  TRY(e->ops->graph_launch(e, g));
  return 0;
}

void eng_graph_destroy(engine *e, eng_graph *g) {
  if (g) e->ops->graph_destroy(e, g);
}

size_t eng_bytes_in_use(const engine *e) { return cbase_of(e)->in_use; }

int eng_mem_total(engine *e, size_t *bytes) {
  *bytes = 0;
  e = base_of(e);   /* a view's device is its base's */
  return e->ops->mem_total ? e->ops->mem_total(e, bytes) : 0;
}
size_t eng_peak_bytes(const engine *e) { return cbase_of(e)->peak; }

void eng_reset_peak(engine *e) {
  e = base_of(e);
  e->peak = e->in_use;
  for (int i = 0; i < e->ntags; i++) e->tags[i].peak = e->tags[i].in_use;
}

int eng_tag_bytes(const engine *e, const char *tag, size_t *in_use, size_t *peak) {
  e = cbase_of(e);
  for (int i = 0; i < e->ntags; i++)
    if (strcmp(e->tags[i].name, tag) == 0) {
      if (in_use) *in_use = e->tags[i].in_use;
      if (peak) *peak = e->tags[i].peak;
      return 0;
    }
  return -1;
}

void eng_tags(const engine *e,
              void (*fn)(const char *tag, size_t in_use, size_t peak,
                         void *arg),
              void *arg) {
  e = cbase_of(e);
  for (int i = 0; i < e->ntags; i++)
    fn(e->tags[i].name, e->tags[i].in_use, e->tags[i].peak, arg);
}

/* ---- argument checks -------------------------------------------------------- */

#define NEED(cond, ...)                                                      \
  do {                                                                       \
    if (!(cond)) FAIL(ERR_FAIL, __VA_ARGS__);                                \
  } while (0)
/* Sizes of an op must be >= 0; buffers non-NULL (checked when there is
 * work, after the early return). */
#define NEED_SIZE(op, x) NEED((x) >= 0, op ": " #x "=%lld must be >= 0", \
                              (long long)(x))
#define NEED_BUF(op, p) NEED((p) != NULL, op ": " #p " is NULL")

/* ---- matrix products ---------------------------------------------------------- */

/* Shapes and strides of one product, shared by the plain and batched calls:
 * A is stored [m,k] (ta=0) or [k,m] (ta=1), B [k,n] or [n,k], C [m,n]. */
static int check_product(const char *op, int ta, int tb, int m, int n, int k,
                         int lda, int ldb, int ldc, dtype compute) {
  if (m < 0 || n < 0 || k < 0)
    FAIL(ERR_FAIL, "%s: m=%d n=%d k=%d: sizes must be >= 0", op, m, n, k);
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    FAIL(ERR_FAIL, "%s: trans_a=%d trans_b=%d must be 0 or 1", op, ta, tb);
  int acols = ta ? m : k, bcols = tb ? k : n;
  if (lda < (acols > 1 ? acols : 1))
    FAIL(ERR_FAIL, "%s: lda=%d < %d, the columns of A as stored (%s)", op,
         lda, acols, ta ? "[k,m], trans_a=1" : "[m,k]");
  if (ldb < (bcols > 1 ? bcols : 1))
    FAIL(ERR_FAIL, "%s: ldb=%d < %d, the columns of B as stored (%s)", op,
         ldb, bcols, tb ? "[n,k], trans_b=1" : "[k,n]");
  if (ldc < (n > 1 ? n : 1))
    FAIL(ERR_FAIL, "%s: ldc=%d < n=%d", op, ldc, n);
  if (!dtype_known(compute))
    FAIL(ERR_FAIL, "%s: unknown compute dtype %d", op, (int)compute);
  return 0;
}

static int check_matmul(engine *e, int trans_a, int trans_b, int m, int n,
                        int k, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc,
                        dtype compute) {
  TRY(check_product("k_matmul", trans_a, trans_b, m, n, k, lda, ldb, ldc,
                    compute));
  if (m == 0 || n == 0) return 1;
  NEED_BUF("k_matmul", C);
  if (k > 0) { NEED_BUF("k_matmul", A); NEED_BUF("k_matmul", B); }
  return 0;
}

static int check_matmul_batched(engine *e, int trans_a, int trans_b, int m,
                                int n, int k, float alpha, const float *A,
                                int lda, long long stride_a, const float *B,
                                int ldb, long long stride_b, float beta,
                                float *C, int ldc, long long stride_c,
                                int batch, dtype compute) {
  TRY(check_product("k_matmul_batched", trans_a, trans_b, m, n, k, lda, ldb,
                    ldc, compute));
  NEED_SIZE("k_matmul_batched", batch);
  NEED(stride_a >= 0 && stride_b >= 0 && stride_c >= 0,
       "k_matmul_batched: strides %lld %lld %lld must be >= 0", stride_a,
       stride_b, stride_c);
  /* The outputs of different products must not overlap. */
  NEED(batch <= 1 || stride_c >= (long long)(m - 1) * ldc + n,
       "k_matmul_batched: stride_c=%lld makes outputs overlap (need >= %lld)",
       stride_c, (long long)(m - 1) * ldc + n);
  if (m == 0 || n == 0 || batch == 0) return 1;
  NEED_BUF("k_matmul_batched", C);
  if (k > 0) { NEED_BUF("k_matmul_batched", A); NEED_BUF("k_matmul_batched", B); }
  return 0;
}

/* ---- embedding -------------------------------------------------------------- */

static int check_embedding_fwd(engine *e, const int32_t *ids,
                               const float *table, float *out, int n, int d,
                               int vocab) {
  NEED_SIZE("k_embedding_fwd", n);
  NEED_SIZE("k_embedding_fwd", d);
  NEED(vocab > 0, "k_embedding_fwd: vocab=%d must be > 0", vocab);
  if (n == 0 || d == 0) return 1;
  NEED_BUF("k_embedding_fwd", ids);
  NEED_BUF("k_embedding_fwd", table);
  NEED_BUF("k_embedding_fwd", out);
  return 0;
}

static int check_embedding_bwd(engine *e, const int32_t *ids,
                               const float *dout, float *dtable, int n, int d,
                               int vocab) {
  NEED_SIZE("k_embedding_bwd", n);
  NEED_SIZE("k_embedding_bwd", d);
  NEED(vocab > 0, "k_embedding_bwd: vocab=%d must be > 0", vocab);
  if (n == 0 || d == 0) return 1;
  NEED_BUF("k_embedding_bwd", ids);
  NEED_BUF("k_embedding_bwd", dout);
  NEED_BUF("k_embedding_bwd", dtable);
  return 0;
}

/* ---- RMSNorm ------------------------------------------------------------------ */

static int check_rmsnorm_fwd(engine *e, const float *x, const float *g,
                             float *y, float *rstd, int n, int d, float eps) {
  NEED_SIZE("k_rmsnorm_fwd", n);
  NEED(d > 0, "k_rmsnorm_fwd: d=%d must be > 0", d);
  NEED(eps >= 0, "k_rmsnorm_fwd: eps=%g must be >= 0", (double)eps);
  if (n == 0) return 1;
  NEED_BUF("k_rmsnorm_fwd", x);
  NEED_BUF("k_rmsnorm_fwd", g);
  NEED_BUF("k_rmsnorm_fwd", y);
  NEED_BUF("k_rmsnorm_fwd", rstd);
  NEED(y != x, "k_rmsnorm_fwd: y may not alias x");
  return 0;
}

static int check_rmsnorm_bwd(engine *e, const float *dy, const float *x,
                             const float *g, const float *rstd, float *dx,
                             float *dg, int n, int d) {
  NEED_SIZE("k_rmsnorm_bwd", n);
  NEED(d > 0, "k_rmsnorm_bwd: d=%d must be > 0", d);
  if (n == 0) return 1;
  NEED_BUF("k_rmsnorm_bwd", dy);
  NEED_BUF("k_rmsnorm_bwd", x);
  NEED_BUF("k_rmsnorm_bwd", g);
  NEED_BUF("k_rmsnorm_bwd", rstd);
  NEED_BUF("k_rmsnorm_bwd", dx);
  NEED_BUF("k_rmsnorm_bwd", dg);
  NEED(dx != x, "k_rmsnorm_bwd: dx may not alias x");
  return 0;
}

/* ---- RoPE and head layout ------------------------------------------------------ */

static int check_rope(engine *e, float *x, int batch, int heads, int seq,
                      int dh, float theta, int inverse) {
  NEED_SIZE("k_rope", batch);
  NEED_SIZE("k_rope", heads);
  NEED_SIZE("k_rope", seq);
  NEED(dh > 0 && dh % 2 == 0, "k_rope: dh=%d must be even and > 0", dh);
  NEED(theta > 0, "k_rope: theta=%g must be > 0", (double)theta);
  NEED(inverse == 0 || inverse == 1, "k_rope: inverse=%d must be 0 or 1",
       inverse);
  if (batch == 0 || heads == 0 || seq == 0) return 1;
  NEED_BUF("k_rope", x);
  return 0;
}

/* What split and merge share; 1: no work. */
static int check_heads(const char *op, const float *x, const float *y,
                       int batch, int seq, int heads, int dh) {
  if (batch < 0 || seq < 0 || heads < 0 || dh < 0)
    FAIL(ERR_FAIL, "%s: batch=%d seq=%d heads=%d dh=%d must be >= 0", op,
         batch, seq, heads, dh);
  if ((long long)batch * seq * heads * dh == 0) return 1;
  if (!x || !y) FAIL(ERR_FAIL, "%s: NULL buffer", op);
  if (x == y) FAIL(ERR_FAIL, "%s: y may not alias x", op);
  return 0;
}

static int check_split_heads(engine *e, const float *x, float *y, int batch,
                             int seq, int heads, int dh) {
  return check_heads("k_split_heads", x, y, batch, seq, heads, dh);
}

static int check_merge_heads(engine *e, const float *x, float *y, int batch,
                             int seq, int heads, int dh) {
  return check_heads("k_merge_heads", x, y, batch, seq, heads, dh);
}

/* ---- causal softmax ------------------------------------------------------------- */

static int check_softmax_causal_fwd(engine *e, const float *S, float *P,
                                    int mats, int seq, float scale) {
  NEED_SIZE("k_softmax_causal_fwd", mats);
  NEED_SIZE("k_softmax_causal_fwd", seq);
  if (mats == 0 || seq == 0) return 1;
  NEED_BUF("k_softmax_causal_fwd", S);
  NEED_BUF("k_softmax_causal_fwd", P);
  return 0;
}

static int check_softmax_causal_bwd(engine *e, const float *P, const float *dP,
                                    float *dS, int mats, int seq,
                                    float scale) {
  NEED_SIZE("k_softmax_causal_bwd", mats);
  NEED_SIZE("k_softmax_causal_bwd", seq);
  if (mats == 0 || seq == 0) return 1;
  NEED_BUF("k_softmax_causal_bwd", P);
  NEED_BUF("k_softmax_causal_bwd", dP);
  NEED_BUF("k_softmax_causal_bwd", dS);
  return 0;
}

/* ---- SwiGLU ------------------------------------------------------------------------ */

static int check_swiglu_fwd(engine *e, const float *a, const float *b,
                            float *h, size_t n) {
  if (n == 0) return 1;
  NEED_BUF("k_swiglu_fwd", a);
  NEED_BUF("k_swiglu_fwd", b);
  NEED_BUF("k_swiglu_fwd", h);
  return 0;
}

static int check_swiglu_bwd(engine *e, const float *dh, const float *a,
                            const float *b, float *da, float *db, size_t n) {
  if (n == 0) return 1;
  NEED_BUF("k_swiglu_bwd", dh);
  NEED_BUF("k_swiglu_bwd", a);
  NEED_BUF("k_swiglu_bwd", b);
  NEED_BUF("k_swiglu_bwd", da);
  NEED_BUF("k_swiglu_bwd", db);
  NEED(da != db, "k_swiglu_bwd: da and db may not alias");
  return 0;
}

/* ---- cross-entropy ---------------------------------------------------------------- */

static int check_cross_entropy_fwd(engine *e, const float *logits,
                                   const int32_t *targets, float *losses,
                                   float *lse, int n, int vocab) {
  NEED_SIZE("k_cross_entropy_fwd", n);
  NEED(vocab > 0, "k_cross_entropy_fwd: vocab=%d must be > 0", vocab);
  if (n == 0) return 1;
  NEED_BUF("k_cross_entropy_fwd", logits);
  NEED_BUF("k_cross_entropy_fwd", targets);
  NEED_BUF("k_cross_entropy_fwd", losses);
  NEED_BUF("k_cross_entropy_fwd", lse);
  return 0;
}

static int check_cross_entropy_bwd(engine *e, const float *logits,
                                   const int32_t *targets, const float *lse,
                                   float *dlogits, int n, int vocab,
                                   float scale) {
  NEED_SIZE("k_cross_entropy_bwd", n);
  NEED(vocab > 0, "k_cross_entropy_bwd: vocab=%d must be > 0", vocab);
  if (n == 0) return 1;
  NEED_BUF("k_cross_entropy_bwd", logits);
  NEED_BUF("k_cross_entropy_bwd", targets);
  NEED_BUF("k_cross_entropy_bwd", lse);
  NEED_BUF("k_cross_entropy_bwd", dlogits);
  return 0;
}

/* ---- LayerNorm and ReLU ------------------------------------------------------------ */

static int check_layernorm_fwd(engine *e, const float *x, const float *w,
                               const float *b, float *y, float *mean,
                               float *rstd, int n, int d, float eps) {
  NEED_SIZE("k_layernorm_fwd", n);
  NEED(d > 0, "k_layernorm_fwd: d=%d must be > 0", d);
  NEED(eps >= 0, "k_layernorm_fwd: eps=%g must be >= 0", (double)eps);
  if (n == 0) return 1;
  NEED_BUF("k_layernorm_fwd", x);
  NEED_BUF("k_layernorm_fwd", w);
  NEED_BUF("k_layernorm_fwd", b);
  NEED_BUF("k_layernorm_fwd", y);
  NEED_BUF("k_layernorm_fwd", mean);
  NEED_BUF("k_layernorm_fwd", rstd);
  NEED(y != x, "k_layernorm_fwd: y may not alias x");
  return 0;
}

static int check_layernorm_bwd(engine *e, const float *dy, const float *x,
                               const float *w, const float *mean,
                               const float *rstd, float *dx, float *dw,
                               float *db, int n, int d) {
  NEED_SIZE("k_layernorm_bwd", n);
  NEED(d > 0, "k_layernorm_bwd: d=%d must be > 0", d);
  if (n == 0) return 1;
  NEED_BUF("k_layernorm_bwd", dy);
  NEED_BUF("k_layernorm_bwd", x);
  NEED_BUF("k_layernorm_bwd", w);
  NEED_BUF("k_layernorm_bwd", mean);
  NEED_BUF("k_layernorm_bwd", rstd);
  NEED_BUF("k_layernorm_bwd", dx);
  NEED_BUF("k_layernorm_bwd", dw);
  NEED_BUF("k_layernorm_bwd", db);
  NEED(dx != x, "k_layernorm_bwd: dx may not alias x");
  NEED(dw != db, "k_layernorm_bwd: dw and db may not alias");
  return 0;
}

static int check_relu_fwd(engine *e, const float *x, float *y, size_t n) {
  if (n == 0) return 1;
  NEED_BUF("k_relu_fwd", x);
  NEED_BUF("k_relu_fwd", y);
  return 0;
}

static int check_relu_bwd(engine *e, const float *dy, const float *x,
                          float *dx, size_t n) {
  if (n == 0) return 1;
  NEED_BUF("k_relu_bwd", dy);
  NEED_BUF("k_relu_bwd", x);
  NEED_BUF("k_relu_bwd", dx);
  return 0;
}

/* ---- optimizer ------------------------------------------------------------------------ */

static int check_adamw(engine *e, float *p, const float *g, float *m, float *v,
                       size_t n, float lr, float b1, float b2, float eps,
                       float wd, long long t) {
  NEED(t >= 1, "k_adamw: step t=%lld must be >= 1", t);
  NEED(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1,
       "k_adamw: betas (%g, %g) must be in [0, 1)", (double)b1, (double)b2);
  if (n == 0) return 1;
  NEED_BUF("k_adamw", p);
  NEED_BUF("k_adamw", g);
  NEED_BUF("k_adamw", m);
  NEED_BUF("k_adamw", v);
  return 0;
}

static int check_adamw_mean(engine *e, float *p, const float *const *g, int ng,
                            float *m, float *v, size_t n, float lr, float b1,
                            float b2, float eps, float wd, long long t) {
  NEED(t >= 1, "k_adamw_mean: step t=%lld must be >= 1", t);
  NEED(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1,
       "k_adamw_mean: betas (%g, %g) must be in [0, 1)", (double)b1,
       (double)b2);
  NEED(g != NULL && ng >= 1 && ng <= K_ADAMW_MAX_GRADS,
       "k_adamw_mean: %d gradient arrays (allowed: 1 to %d)", ng,
       (int)K_ADAMW_MAX_GRADS);
  if (n == 0) return 1;
  NEED_BUF("k_adamw_mean", p);
  for (int k = 0; k < ng; k++) NEED_BUF("k_adamw_mean", g[k]);
  NEED_BUF("k_adamw_mean", m);
  NEED_BUF("k_adamw_mean", v);
  return 0;
}

/* ---- elementwise ------------------------------------------------------------------------ */

static int check_add(engine *e, const float *a, const float *b, float *out,
                     size_t n) {
  if (n == 0) return 1;
  NEED_BUF("k_add", a);
  NEED_BUF("k_add", b);
  NEED_BUF("k_add", out);
  return 0;
}

static int check_scale(engine *e, float *x, float s, size_t n) {
  if (n == 0) return 1;
  NEED_BUF("k_scale", x);
  return 0;
}

static int check_init_normal(engine *e, float *x, size_t n, uint64_t key,
                             float fill, float std, const int32_t *table) {
  NEED(isfinite(fill) && isfinite(std) && std >= 0.0f,
       "k_init_normal: fill %g and std %g must be finite, std >= 0", fill,
       std);
  if (n == 0) return 1;
  NEED_BUF("k_init_normal", x);
  NEED_BUF("k_init_normal", table);
  return 0;
}

/* Quantiles of the truncated normal by Newton's method on its CDF, each
 * from the last (they rise smoothly), to double precision, then rounded
 * to fixed point: about 7 ms of erfc and exp, once a process, where a
 * model_init_range per view of a sharded model would pay it each time. */
static int32_t normal_table[INIT_TABLE + 1];
static pthread_once_t normal_table_once = PTHREAD_ONCE_INIT;

static void make_normal_table(void) {
  int32_t *t = normal_table;
  const double c = INIT_CLIP, r2 = sqrt(2.0), one = (double)(1u << INIT_FRAC);
  const double lo = 0.5 * erfc(c / r2), mass = 1.0 - 2.0 * lo;
  double x = -c;
  t[0] = (int32_t)llround(-c * one);
  for (int k = 1; k < INIT_TABLE; k++) {
    double p = lo + mass * k / INIT_TABLE;
    for (int it = 0; it < 50; it++) {
      double cdf = 0.5 * erfc(-x / r2);
      double step = (cdf - p) / (exp(-0.5 * x * x) / sqrt(2.0 * M_PI));
      x -= step;
      if (x < -c) x = -c;
      if (x > c) x = c;
      if (fabs(step) < 1e-15) break;
    }
    t[k] = (int32_t)llround(x * one);
  }
  t[INIT_TABLE] = (int32_t)llround(c * one);
}

const int32_t *k_init_normal_table(void) {
  pthread_once(&normal_table_once, make_normal_table);
  return normal_table;
}

static int check_cast(engine *e, const void *src, dtype st, void *dst,
                      dtype dt, size_t n) {
  NEED(dtype_known(st) && dtype_known(dt), "k_cast: unknown dtype (%d -> %d)",
       (int)st, (int)dt);
  if (n == 0) return 1;
  NEED_BUF("k_cast", src);
  NEED_BUF("k_cast", dst);
  NEED(src != dst || st == dt,
       "k_cast: %s -> %s may not be in place (src == dst)", dtype_name(st),
       dtype_name(dt));
  return 0;
}

/* ---- attention --------------------------------------------------------------------------- */

int attn_impl_parse(const char *s, attn_impl *out) {
  if (s && strcmp(s, "materialized") == 0) { *out = ATTN_MATERIALIZED; return 0; }
  if (s && strcmp(s, "flash") == 0) { *out = ATTN_FLASH; return 0; }
  return -1;
}

/* What forward and backward share: known impl and dtype, sizes, P present
 * exactly for the materialised path. Returns 1 when there is no work. */
static int check_attention(const char *op, attn_impl impl, const void *P,
                           int bh, int tq, int tk, int dh, float scale,
                           dtype dt) {
  NEED(impl == ATTN_MATERIALIZED || impl == ATTN_FLASH,
       "%s: unknown impl %d (allowed: materialized, flash)", op, (int)impl);
  NEED(dtype_known(dt), "%s: unknown dtype %d", op, (int)dt);
  NEED(bh >= 0 && tq >= 0 && tk >= 0,
       "%s: bh=%d tq=%d tk=%d must be >= 0", op, bh, tq, tk);
  NEED(dh > 0, "%s: dh=%d must be > 0", op, dh);
  NEED(scale == scale && scale > -3e38f && scale < 3e38f,
       "%s: scale=%g must be finite", op, (double)scale);
  if (bh == 0 || tq == 0) return 1;
  NEED(tk > 0, "%s: tk=0 keys: the softmax of row 0 has no terms "
       "(allowed: tk >= 1)", op);
  if (impl == ATTN_MATERIALIZED)
    NEED(P != NULL, "%s: impl materialized needs the P buffer [bh, tq, tk]",
         op);
  else
    NEED(P == NULL, "%s: impl flash keeps no P (pass NULL)", op);
  return 0;
}

static int check_attention_fwd(engine *e, attn_impl impl, const void *q,
                               const void *k, const void *v, void *o,
                               float *lse, void *P, int bh, int tq, int tk,
                               int dh, int causal, float scale, dtype dt) {
  int rc = check_attention("k_attention_fwd", impl, P, bh, tq, tk, dh, scale,
                           dt);
  if (rc != 0) return rc;
  NEED_BUF("k_attention_fwd", q);
  NEED_BUF("k_attention_fwd", k);
  NEED_BUF("k_attention_fwd", v);
  NEED_BUF("k_attention_fwd", o);
  NEED_BUF("k_attention_fwd", lse);
  NEED(o != q && o != k && o != v, "k_attention_fwd: o may not alias q, k, v");
  return 0;
}

static int check_attention_bwd(engine *e, attn_impl impl, const void *q,
                               const void *k, const void *v, const void *o,
                               const void *dout, const float *lse,
                               const void *P, void *dq, void *dk, void *dv,
                               int bh, int tq, int tk, int dh, int causal,
                               float scale, dtype dt) {
  int rc = check_attention("k_attention_bwd", impl, P, bh, tq, tk, dh, scale,
                           dt);
  if (rc < 0) return rc;
  if (rc > 0) {
    /* No queries: the loss does not depend on k and v, whose gradients
     * are zeroed here; nothing is left for the backend. */
    if (bh > 0 && tk > 0) {
      size_t bytes = (size_t)bh * tk * dh * dtype_size(dt);
      NEED_BUF("k_attention_bwd", dk);
      NEED_BUF("k_attention_bwd", dv);
      TRY(eng_memset0(e, dk, bytes));
      TRY(eng_memset0(e, dv, bytes));
    }
    return 1;
  }
  NEED_BUF("k_attention_bwd", q);
  NEED_BUF("k_attention_bwd", k);
  NEED_BUF("k_attention_bwd", v);
  NEED_BUF("k_attention_bwd", o);
  NEED_BUF("k_attention_bwd", dout);
  NEED_BUF("k_attention_bwd", lse);
  NEED_BUF("k_attention_bwd", dq);
  NEED_BUF("k_attention_bwd", dk);
  NEED_BUF("k_attention_bwd", dv);
  NEED(dq != dk && dq != dv && dk != dv,
       "k_attention_bwd: dq, dk, dv must be separate buffers");
  return 0;
}

/* ---- the entry points ------------------------------------------------------ */


float k_adamw_step_size(float lr, float b1, float b2, long long t) {
  return (float)((double)lr * sqrt(1.0 - pow(b2, (double)t)) /
                 (1.0 - pow(b1, (double)t)));
}

/* k_NAME for every K_OP and K_OP_AS row of ops.def: check_NAME above, then
 * the backend (engine_internal.h, ENG_ENTRY). */
#define K_OP(name, family, params, args)                                     \
  ENG_ENTRY(name, family, params, args, e->ops, "ops table", name, args)
#define K_OP_AS(name, family, params, args, op, op_args)                     \
  ENG_ENTRY(name, family, params, args, e->ops, "ops table", op, op_args)
#include "kernels/ops.def"

int eng_lacks_(engine *e, const char *op, const char *what) {
  FAIL(ERR_FAIL, "%s: the %s engine has no %s", op, e->ops->name, what);
}

/* ---- profiling ----------------------------------------------------------------- */


/* Open a record under `family`: its start mark. Returns the record's
 * index + 1, or 0 when not profiling (or out of memory: the op just goes
 * unrecorded). */
int eng_prof_start_(engine *e, const char *family) {
  /* The records are the base's; the marks go on e's stream. */
  engine *b = base_of(e);
  if (!b->prof_on) return 0;
  if (b->nprof == b->cap_prof) {
    int cap = b->cap_prof ? 2 * b->cap_prof : 1024;
    eng_prof_rec *r = realloc(b->prof, (size_t)cap * sizeof *r);
    if (!r) return 0;
    b->prof = r;
    b->cap_prof = cap;
  }
  eng_prof_rec *r = &b->prof[b->nprof];
  r->family = family;
  r->ev[0] = r->ev[1] = NULL;
  if (e->ops->prof_record) r->ev[0] = e->ops->prof_record(e);
  else r->host[0] = clock_now_s();
  return ++b->nprof;
}

void eng_prof_stop_(engine *e, int rec) {
  engine *b = base_of(e);
  if (rec == 0) return;
  eng_prof_rec *r = &b->prof[rec - 1];
  if (e->ops->prof_record) r->ev[1] = e->ops->prof_record(e);
  else r->host[1] = clock_now_s();
}

int eng_profile(engine *e, int on) {
  if (on) NOT_RECORDING(e, "eng_profile");
  e = base_of(e);
  if (on && !e->prof_on) e->nprof = 0;
  e->prof_on = on != 0;
  return 0;
}

int eng_profile_report(engine *e, char *buf, size_t n) {
  TRY(eng_sync(e));   /* e's stream; the records are the base's */
  engine *b = base_of(e);
  enum { MAXF = 32 };
  char names[MAXF][32];
  double ms[MAXF];
  int nf = 0;
  for (int i = 0; i < b->nprof; i++) {
    eng_prof_rec *r = &b->prof[i];
    double t = 0;
    if (e->ops->prof_record) {
      if (r->ev[0] && r->ev[1]) t = e->ops->prof_elapsed_ms(e, r->ev[0], r->ev[1]);
      if (r->ev[0]) e->ops->prof_release(e, r->ev[0]);
      if (r->ev[1]) e->ops->prof_release(e, r->ev[1]);
    } else {
      t = (r->host[1] - r->host[0]) * 1e3;
    }
    int k = 0;
    while (k < nf && strcmp(names[k], r->family) != 0) k++;
    if (k == nf && nf < MAXF) {
      snprintf(names[nf], sizeof names[nf], "%s", r->family);
      ms[nf++] = 0;
    }
    if (k < nf) ms[k] += t;
  }
  b->nprof = 0;
  b->prof_on = 0;
  size_t len = 0;
  if (n) buf[0] = 0;
  for (int done = 0; done < nf; done++) {   /* largest first */
    int best = -1;
    for (int k = 0; k < nf; k++)
      if (ms[k] >= 0 && (best < 0 || ms[k] > ms[best])) best = k;
    if (len < n)
      len += (size_t)snprintf(buf + len, n - len, "%s%s %.3f",
                              done ? "; " : "", names[best], ms[best]);
    ms[best] = -1;
  }
  return 0;
}
