#!/bin/sh
# The GPU version of tests/ddp.sh: tests/test_ddp nccl on 2 ranks (and 4
# where there are 4 GPUs), CUDA engine + NCCL, one GPU per rank, fp32 and
# bf16. One run prints every case. Skips (77) without 2 GPUs, MPI or NCCL.
. "${top_srcdir:-.}/tests/lib.sh"
# This test starts mpirun itself, not through the runner.
mpi_as_root
if [ -z "${MPIRUN:-}" ]; then
  echo "skip: built without MPI (MPIRUN is empty)"
  exit 77
fi
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
if [ "${gpus:-0}" -lt 2 ]; then
  echo "skip: nvidia-smi lists ${gpus:-0} GPUs, 2 needed"
  exit 77
fi
prog="$top_builddir/tests/test_ddp"
[ -x "$prog" ] || { echo "missing $prog"; exit 99; }
for np in 2 4; do
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
