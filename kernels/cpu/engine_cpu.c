/* The CPU engine: host memory, 64-byte aligned; upload and download are
 * memcpy; operations run synchronously, so sync has nothing to wait for.
 * The operations themselves live one family per file (cpu.h). */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "common/check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

enum { CPU_ALIGN = 64 };   /* a cache line; enough for any vector load */

typedef struct cpu_engine {
  int threads;
} cpu_engine;

int cpu_threads(const engine *e) {
  return ((const cpu_engine *)e->impl)->threads;
}

static void cpu_destroy(engine *e) { free(e->impl); }

static int cpu_alloc(engine *e, size_t bytes, const char *tag, void **p) {
  /* Round up to whole lines (at least one, so 0 bytes is a real pointer). */
  size_t rounded = bytes / CPU_ALIGN * CPU_ALIGN;
  if (rounded < bytes || bytes == 0) rounded += CPU_ALIGN;
  int rc = rounded < bytes ? ENOMEM : posix_memalign(p, CPU_ALIGN, rounded);
  if (rc != 0) {
    *p = NULL;
    FAIL(ERR_OOM, "out of host memory allocating %zu bytes for %s", bytes,
         tag);
  }
  return 0;
}

static void cpu_free(engine *e, void *p) { free(p); }

static int cpu_copy(engine *e, void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return 0;
}

static int cpu_memset0(engine *e, void *p, size_t bytes) {
  memset(p, 0, bytes);
  return 0;
}

static int cpu_sync(engine *e) { return 0; }

/* Every op of kernels/ops.def (cpu.h). */
static const fused_ops cpu_fused_ops = {
#define K_FUSED(name, family, params, args) .name = cpu_##name,
#include "kernels/ops.def"
};

static const engine_ops cpu_ops = {
  .name = "cpu",
  .destroy = cpu_destroy,
  .alloc = cpu_alloc,
  .free = cpu_free,
  .upload = cpu_copy,
  .download = cpu_copy,
  .memset0 = cpu_memset0,
  .copy = cpu_copy,
  .sync = cpu_sync,
#define K_OP(name, family, params, args) .name = cpu_##name,
#include "kernels/ops.def"
  .fused = &cpu_fused_ops,
};

int engine_cpu_default_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int engine_cpu_create(engine **out, int threads) {
  *out = NULL;
  engine *e = calloc(1, sizeof *e);
  CHECK_ALLOC(e, sizeof *e);
  e->ops = &cpu_ops;
  cpu_engine *c = calloc(1, sizeof *c);
  if (!c) {
    free(e);
    CHECK_ALLOC(c, sizeof *c);
  }
#ifdef _OPENMP
  c->threads = threads > 0 ? threads : engine_cpu_default_threads();
#else
  c->threads = 1;   /* built without OpenMP: the pragmas are ignored */
#endif
  e->impl = c;
  *out = e;
  return 0;
}
