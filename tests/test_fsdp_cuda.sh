#!/bin/sh
# The GPU version of tests/fsdp.sh: tests/test_fsdp nccl on 1 GPU (every
# stream, event and window path, against single-process training), and on
# 2 and 4 where there are that many, fp32, bf16 and fp16. Each world size
# runs FSDP_CUDA_RUNS times (default 5, as the handout advises for its
# FSDP tests): a missing wait between the streams shows up as a race that
# one run can miss. Skips (77) without a GPU, MPI or NCCL.
. "${top_srcdir:-.}/tests/lib.sh"
gpu_mpi_test test_fsdp "${FSDP_CUDA_RUNS:-5}"
