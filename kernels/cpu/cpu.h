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
 * each the composition of the plain operations it replaces, fp32 only, so
 * the fused model on the CPU computes what the op-by-op model computes and
 * the CUDA engine's fused kernels have a readable reference. Their typed
 * operands must be DT_F32: anything else fails naming `op`. */
int cpu_f32_only(const char *op, dtype t);

/* The operations: cpu_NAME for every K_OP and K_FUSED row of
 * kernels/ops.def, with k_NAME's signature; engine_cpu.c's tables list
 * them all. Attention: attention.c dispatches; the materialised loops live
 * there, the tiled FlashAttention-2 in attention_flash.c (fp32 only). */
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
