/* Shared by the multi-rank tests (test_ddp, test_fsdp). */
#ifndef TL_TESTS_RANK_HELPERS_H
#define TL_TESTS_RANK_HELPERS_H

#include "collective/comm.h"
#include "kernels/kernels.h"

/* 1 on every rank if bad is non-zero on any (MPI_COMM_WORLD); bad itself
 * without MPI. */
int any_rank(int bad);
/* The engine a rank of c computes on: the CUDA engine of c's device with
 * NCCL, a one-thread CPU engine with MPI. */
int rank_engine(const comm *c, engine **e);

#endif
