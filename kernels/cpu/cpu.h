/* The CPU engine's operations (one file per family, kernels/cpu/<family>.c,
 * the fused path's forms included), the ops tables that engine_cpu.c builds
 * from them, and what they share.
 *
 * Each cpu_* operation has the signature of the k_* function of the same
 * name (kernels/ops.def) and is called only through engine.c, which has already
 * checked the arguments: sizes >= 0 and not all zero, buffers non-NULL,
 * strides large enough. Parallel loops use OpenMP with the engine's thread
 * count (cpu_threads); each iteration owns what it writes, so results do not
 * depend on the number of threads. */
#ifndef TL_KERNELS_CPU_H
#define TL_KERNELS_CPU_H

#include "kernels/engine_internal.h"

/* Threads for this engine's parallel loops (for num_threads clauses). */
int cpu_threads(const engine *e);
/* The fused path's operations (K_FUSED rows) live in their family's file,
 * each the composition of the plain operations it replaces, computed in
 * fp32, so the fused model on the CPU computes what the op-by-op model
 * computes and the CUDA engine's fused kernels have a readable reference.
 * Their 16-bit operands (bf16, f16) are storage only: widened exactly on
 * the way in, rounded to nearest even on the way out, where the CUDA
 * kernels round (cpu_stage), so the CPU engine runs the 16-bit model too
 * and CI tests its layouts. */

/* Element i of src (dtype t) as a float, exactly; f stored into dst
 * (dtype t) rounded to nearest even (elementwise.c, k_cast's rules). */
float cpu_load(const void *src, dtype t, size_t i);
void cpu_store(void *dst, dtype t, size_t i, float f);

/* A call's 16-bit operands as fp32 (stage.c): cpu_stage_in gives an fp32
 * view of n elements of p (p itself when t is f32, else a widened copy);
 * cpu_stage_out an fp32 buffer whose n elements go to p (rounded to t) at
 * cpu_stage_end, starting as p's values when `load` (outputs the op adds
 * into); cpu_stage_end(s, rc) writes the outputs back when rc is 0, frees
 * the copies and returns rc, or ERR_OOM if a copy could not be made (then
 * the views returned were NULL and rc is whatever the op returned on
 * them: callers check cpu_stage_ok first). Inputs are copied when staged,
 * so an output may alias an input. */
enum { CPU_STAGE_MAX = 12 };
typedef struct cpu_stage {
  engine *e;
  int n, oom;
  struct { float *tmp; void *dst; dtype t; size_t n; } s[CPU_STAGE_MAX];
} cpu_stage;
void cpu_stage_init(cpu_stage *s, engine *e);
const float *cpu_stage_in(cpu_stage *s, const void *p, dtype t, size_t n);
float *cpu_stage_out(cpu_stage *s, void *p, dtype t, size_t n, int load);
int cpu_stage_ok(const cpu_stage *s);
int cpu_stage_end(cpu_stage *s, int rc);

/* The operations: cpu_NAME for every K_OP and K_FUSED row of
 * kernels/ops.def, with k_NAME's signature; engine_cpu.c's tables list
 * them all. Attention: attention.c dispatches; the materialised loops live
 * there, the tiled FlashAttention-2 in attention_flash.c (on fp32 data). */
#define K_OP(name, family, params, args) int cpu_##name params;
#define K_FUSED(name, family, params, args) int cpu_##name params;
#include "kernels/ops.def"

int cpu_flash_fwd(engine *e, const float *q, const float *k, const float *v,
                  float *o, float *lse, int bh, int tq, int tk, int dh,
                  int causal, float scale);
int cpu_flash_bwd(engine *e, const float *q, const float *k, const float *v,
                  const float *o, const float *dout, const float *lse,
                  float *dq, float *dk, float *dv, int bh, int tq, int tk,
                  int dh, int causal, float scale);

#endif
