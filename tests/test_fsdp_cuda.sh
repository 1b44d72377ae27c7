#!/bin/sh
# The GPU version of tests/fsdp.sh: tests/test_fsdp nccl on 1 GPU (every
# stream, event and window path, bit for bit against single-process
# training), and on 2 and 4 where there are that many, fp32 and bf16.
# Each world size runs FSDP_CUDA_RUNS times (default 5, as the handout
# advises for its FSDP tests): a missing wait between the streams shows
# up as a race that one run can miss. Skips (77) without a GPU, MPI or
# NCCL.
. "${top_srcdir:-.}/tests/lib.sh"
# This test starts mpirun itself, not through the runner.
mpi_as_root
if [ -z "${MPIRUN:-}" ]; then
  echo "skip: built without MPI (MPIRUN is empty)"
  exit 77
fi
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
if [ "${gpus:-0}" -lt 1 ]; then
  echo "skip: nvidia-smi lists no GPU"
  exit 77
fi
prog="$top_builddir/tests/test_fsdp"
[ -x "$prog" ] || { echo "missing $prog"; exit 99; }
runs=${FSDP_CUDA_RUNS:-5}
for np in 1 2 4; do
  [ "$gpus" -ge "$np" ] || continue
  run=1
  while [ "$run" -le "$runs" ]; do
    echo "+ $MPIRUN -np $np --oversubscribe $prog nccl   # run $run of $runs"
    "$MPIRUN" -np "$np" --oversubscribe "$prog" nccl
    rc=$?
    case $rc in
    0) ok "test_fsdp nccl on $np GPUs, run $run of $runs" ;;
    77) echo "test_fsdp nccl on $np GPUs: skipped by the program"; exit 77 ;;
    *) bad "test_fsdp nccl on $np GPUs, run $run of $runs (exit $rc)" ;;
    esac
    run=$((run + 1))
  done
done
finish
