/* The flash kernels' cut plans by launch shape (flash_cut.cuh,
 * plan_cut_memo), kept in the CUDA engine: planning replays the block
 * scheduler on the host, which at long sequences costs more than a short
 * kernel runs. Plain C: cuda_ops.h holds one. */
#ifndef TRAINLAB_CUT_MEMO_H
#define TRAINLAB_CUT_MEMO_H

/* A key: the caller's five sizes (kernel, batch x heads, tq, tk, head
 * dim with causal folded in) then SMs, forced chunk size, partial bytes. */
#define CUT_MEMO_KEY 8
#define CUT_MEMO_ENTRIES 16

typedef struct cut_memo_entry {
  int key[CUT_MEMO_KEY];
  int C;                        /* the plan's chunk size; 0: empty entry */
} cut_memo_entry;

typedef struct cut_memo {
  cut_memo_entry e[CUT_MEMO_ENTRIES];
  int next;                     /* the entry a miss replaces */
} cut_memo;

#endif
