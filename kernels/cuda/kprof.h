/* The CUDA engine's kernel-level profile (eng_kprof_begin / _end) and its
 * named ranges (eng_range_push / _pop), over CUPTI's activity API (what
 * Nsight Systems itself reads) and NVTX. Internal to kernels/cuda. */
#ifndef TL_KPROF_H
#define TL_KPROF_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

int kprof_begin(void);
int kprof_end(eng_kernel_stat **out, int *n, eng_kprof_time *time);
int kprof_active(void);
/* An NVTX range (Nsight Systems shows it) and, while a profile is being
 * taken, the range kernels launched inside it are attributed to. */
int kprof_range_push(const char *name);
int kprof_range_pop(void);

#ifdef __cplusplus
}
#endif
#endif
