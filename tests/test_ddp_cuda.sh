#!/bin/sh
# The GPU version of tests/ddp.sh: tests/test_ddp nccl on 1 rank (every
# kernel and placement path, no collective), 2 and 4 where there are that
# many GPUs, CUDA engine + NCCL, one GPU per rank, fp32 and bf16. One run
# prints every case. Skips (77) without a GPU, MPI or NCCL.
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
prog="$top_builddir/tests/test_ddp"
[ -x "$prog" ] || { echo "missing $prog"; exit 99; }
for np in 1 2 4; do
  [ "$gpus" -ge "$np" ] || continue
  echo "+ $MPIRUN -np $np --oversubscribe $prog nccl"
  "$MPIRUN" -np "$np" --oversubscribe "$prog" nccl
  rc=$?
  case $rc in
  0) ok "test_ddp nccl on $np GPUs" ;;
  77) echo "test_ddp nccl on $np GPUs: skipped by the program"; exit 77 ;;
  *) bad "test_ddp nccl on $np GPUs (exit $rc)" ;;
  esac
done
finish
