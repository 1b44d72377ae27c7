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
 * The op members are generated from kernels/ops.def, each with the
 * signature of the k_* function of the same name. A backend creates an
 * engine with calloc, sets ops (first) and impl; ops->destroy frees impl,
 * never the engine itself. */
#ifndef TL_ENGINE_INTERNAL_H
#define TL_ENGINE_INTERNAL_H

#include "kernels/kernels.h"
#include "common/check.h"   /* ENG_ENTRY's TRY */

/* The fused path's operations: one per K_FUSED row of ops.def, each with
 * the signature of its k_* function; kernels/engine_fused.c checks and
 * dispatches them. */
typedef struct fused_ops {
#define K_FUSED(name, family, params, args) int (*name) params;
#include "kernels/ops.def"
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
  /* The device's memory as its driver counts it. NULL: not known (the
   * host engine, whose allocations the operating system bounds). */
  int (*mem_total)(engine *e, size_t *bytes);
  void *(*stream)(engine *e);               /* NULL: host engine */
  /* Whether a context can run on this engine (eng_view, the setters);
   * engine.c has checked its fields are >= 0. NULL: a host engine, which
   * takes no stream and no reserved SMs and ignores adamw_blocks. */
  int (*check_ctx)(engine *e, const eng_ctx *ctx);
  /* eng_side_view's stream, made and released; events on a handle's
   * stream: recorded now, waited for by another handle's stream and then
   * released, or released unwaited (NULL: a host engine, no streams, no
   * events). */
  int (*stream_create)(engine *e, void **stream);
  void (*stream_destroy)(engine *e, void *stream);
  int (*event_record)(engine *e, void **ev);
  int (*event_wait)(engine *e, void *ev);
  void (*event_free)(engine *e, void *ev);
  int (*f32_products)(engine *e, f32_products p);   /* NULL: F32_EXACT only */
  /* Profiling (NULL on a synchronous engine: the host clock is used). An
   * event recorded on the stream now; ms between two; give one back. */
  void *(*prof_record)(engine *e);
  double (*prof_elapsed_ms)(engine *e, void *a, void *b);
  void (*prof_release)(engine *e, void *ev);
  /* Kernel-level profile and named ranges (kernels.h eng_kprof_begin;
   * NULL: none, and ranges are no-ops). kprof_end waits for the device. */
  int (*kprof_begin)(engine *e);
  int (*kprof_end)(engine *e, eng_kernel_stat **out, int *n,
                   eng_kprof_time *time);
  int (*range_push)(engine *e, const char *name);
  int (*range_pop)(engine *e);
  /* The clock and power monitor (kernels.h eng_monitor_begin; NULL: none) */
  int (*monitor_begin)(engine *e);
  int (*monitor_end)(engine *e, eng_monitor *out);
  /* CUDA graphs (NULL: none). graph_end ends the recording whatever
   * happens and instantiates it; *g stays NULL on failure. */
  int (*graph_begin)(engine *e);
  int (*graph_end)(engine *e, void **g);
  int (*graph_launch)(engine *e, void *g);
  void (*graph_destroy)(engine *e, void *g);

  /* Operations: one per K_OP row of ops.def, each with the signature of
   * its k_* function (K_OP_AS rows reuse another row's entry). NULL: the
   * engine lacks it, and the k_* call fails saying so. */
#define K_OP(name, family, params, args) int (*name) params;
#include "kernels/ops.def"
  const fused_ops *fused;                   /* the fused path; NULL: none */
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

/* engine.c's profiling brackets, for the k_* entry points: start returns
 * a record handle (0 when not profiling); the time is summed under
 * `family` (ops.def's FAMILY). */
struct engine;
int eng_prof_start_(struct engine *e, const char *family);
void eng_prof_stop_(struct engine *e, int rec);
/* The failure of a k_* call whose backend lacks the op: "op: the cpu
 * engine has no what". */
int eng_lacks_(struct engine *e, const char *op, const char *what);

/* The body of every k_* entry point, from its ops.def row (engine.c expands
 * K_OP and K_OP_AS rows, engine_fused.c K_FUSED rows): check_NAME ARGS,
 * the op's hand-written argument check (< 0: the error; 1: nothing for the
 * backend to do, the call succeeds; 0: go on), then `table`'s entry OP
 * with OP_ARGS, bracketed for eng_profile under FAMILY. A NULL table or
 * entry fails naming what is missing. */
#define ENG_ENTRY(name, family, params, args, table, what, op, op_args)     \
  int k_##name params {                                                      \
    int rc_ = check_##name args;                                             \
    if (rc_ != 0) return rc_ < 0 ? rc_ : 0;                                  \
    if (!(table)) return eng_lacks_(e, "k_" #name, what);                    \
    if (!(table)->op) return eng_lacks_(e, "k_" #name, #op);                 \
    int rec_ = eng_prof_start_(e, family);                                   \
    rc_ = (table)->op op_args;                                               \
    eng_prof_stop_(e, rec_);                                                 \
    TRY(rc_);                                                                \
    return 0;                                                                \
  }

/* One bracketed operation while profiling (engine.c). */
typedef struct eng_prof_rec {
  const char *family;   /* ops.def's FAMILY (a string literal) */
  void *ev[2];          /* device events, or NULL ... */
  double host[2];       /* ... and host clock times (synchronous engines) */
} eng_prof_rec;

/* A base engine (engine_*_create) owns everything: the backend's state,
 * the memory accounting, profiling records, the recording flag. A view
 * (eng_view) is a second handle on a base: the same ops and impl, base set,
 * and its own ctx; engine.c keeps all shared state in the base (base_of),
 * and a view's own fields past ctx are unused. Backends read the context
 * only from the handle a call was made with (e->ctx), never from impl, so
 * a call on one handle cannot change what a call on another runs with. */
struct engine {
  const engine_ops *ops;
  void *impl;           /* the backend's own state, shared by views */
  struct engine *base;  /* a view's base; NULL for a base engine */
  eng_ctx ctx;          /* what this handle's calls run with */
  void *own_stream;     /* eng_side_view's: released with the view */
  int prof_on;
  int kprof_on;         /* between eng_kprof_begin and eng_kprof_end */
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
