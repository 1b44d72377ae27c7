/* Shared by the multi-rank tests (test_ddp, test_fsdp). */
#ifndef TL_TESTS_RANK_HELPERS_H
#define TL_TESTS_RANK_HELPERS_H

#include "collective/comm.h"
#include "kernels/kernels.h"
#include "model/model.h"

/* 1 on every rank if bad is non-zero on any (MPI_COMM_WORLD); bad itself
 * without MPI. */
int any_rank(int bad);
/* The engine a rank of c computes on: the CUDA engine of c's device with
 * NCCL, a one-thread CPU engine with MPI. */
int rank_engine(const comm *c, engine **e);
/* AdamW's defaults with eps 1e-3, for comparing a parallel run's weights
 * with one process's. With eps 1e-8 the first update is lr x sign(g), and
 * a gradient within rounding of zero flips it between two runs whose sums
 * differ in order or whose engines timed different cuBLASLt algorithms
 * (kernels/cuda/matmul_lt.c): test_fsdp on one H200 failed a run in three
 * that way, 2.6e-3 apart after 3 steps. With eps 1e-3 an update moves at
 * most lr / eps = 1 x its gradient's change. */
adamw_config adamw_comparable(void);

#endif
