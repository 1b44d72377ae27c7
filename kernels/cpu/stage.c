/* 16-bit operands of the CPU engine's fused operations, staged as fp32
 * (cpu.h, cpu_stage): the operations compute in fp32 as they do for fp32
 * operands; only their storage is narrower. */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include "common/check.h"

#include <stdlib.h>
#include <string.h>

void cpu_stage_init(cpu_stage *s, engine *e) {
  memset(s, 0, sizeof *s);
  s->e = e;
}

/* A slot's fp32 copy of n elements, or NULL (marking the stage out of
 * memory) when there is none or no slot left. */
static float *slot(cpu_stage *s, void *dst, dtype t, size_t n) {
  if (s->oom || s->n >= CPU_STAGE_MAX) {
    s->oom = 1;
    return NULL;
  }
  float *tmp = malloc((n ? n : 1) * sizeof *tmp);
  if (!tmp) {
    s->oom = 1;
    return NULL;
  }
  s->s[s->n].tmp = tmp;
  s->s[s->n].dst = dst;
  s->s[s->n].t = t;
  s->s[s->n].n = n;
  s->n++;
  return tmp;
}

static void widen(engine *e, float *to, const void *p, dtype t, size_t n) {
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (size_t i = 0; i < n; i++) to[i] = cpu_load(p, t, i);
}

const float *cpu_stage_in(cpu_stage *s, const void *p, dtype t, size_t n) {
  if (t == DT_F32 || !p) return p;
  float *tmp = slot(s, NULL, t, n);
  if (tmp) widen(s->e, tmp, p, t, n);
  return tmp;
}

float *cpu_stage_out(cpu_stage *s, void *p, dtype t, size_t n, int load) {
  if (t == DT_F32 || !p) return p;
  float *tmp = slot(s, p, t, n);
  if (tmp && load) widen(s->e, tmp, p, t, n);
  return tmp;
}

int cpu_stage_ok(const cpu_stage *s) { return !s->oom; }

int cpu_stage_end(cpu_stage *s, int rc) {
  if (s->oom && rc == 0)
    rc = err_set(ERR_OOM, __FILE__, __LINE__,
                 "out of host memory for a 16-bit operand's fp32 copy");
  for (int i = 0; i < s->n; i++) {
    float *tmp = s->s[i].tmp;
    void *dst = s->s[i].dst;
    dtype t = s->s[i].t;
    size_t n = s->s[i].n;
    if (rc == 0 && dst) {
#pragma omp parallel for num_threads(cpu_threads(s->e)) schedule(static)
      for (size_t j = 0; j < n; j++) cpu_store(dst, t, j, tmp[j]);
    }
    free(tmp);
  }
  s->n = 0;
  return rc;
}
