#!/bin/sh
# The GPU version of tests/ddp.sh: tests/test_ddp nccl on 1 rank (every
# kernel and placement path, no collective), 2 and 4 where there are that
# many GPUs, CUDA engine + NCCL, one GPU per rank, fp32 and bf16. One run
# prints every case. Skips (77) without a GPU, MPI or NCCL.
. "${top_srcdir:-.}/tests/lib.sh"
gpu_mpi_test test_ddp 1
