#!/bin/sh
# The collective layer on 2 and 4 ranks: tests/test_collectives under the
# launcher, MPI always (oversubscribed, so 2 cores suffice), NCCL only where
# nvidia-smi lists at least as many GPUs as ranks. Skips (77) when built
# without MPI (no launcher); fails if any run fails.
# Environment (automake's AM_TESTS_ENVIRONMENT): top_builddir, MPIRUN.
set -u
if [ -z "${MPIRUN:-}" ]; then
  echo "skip: built without MPI (MPIRUN is empty)"
  exit 77
fi
prog="${top_builddir:-.}/tests/test_collectives"
if [ ! -x "$prog" ]; then
  echo "missing $prog"
  exit 99
fi
# mpirun refuses root unless told; CI containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Containers often forbid the cross-process memory copy Open MPI tries.
export OMPI_MCA_btl_vader_single_copy_mechanism=none

failed=0
run() { # run NP BACKEND
  echo "+ $MPIRUN -np $1 --oversubscribe $prog $2"
  "$MPIRUN" -np "$1" --oversubscribe "$prog" "$2"
  rc=$?
  case $rc in
  0) echo "pass: $2 on $1 ranks" ;;
  77) echo "skipped: $2 on $1 ranks (the program says it cannot run here)" ;;
  *) echo "FAIL: $2 on $1 ranks (exit $rc)"; failed=$((failed + 1)) ;;
  esac
}

run 2 mpi
run 4 mpi

gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
for np in 2 4; do
  if [ "${gpus:-0}" -ge "$np" ]; then
    run "$np" nccl
  else
    echo "skipped: nccl on $np ranks (nvidia-smi lists ${gpus:-0} GPUs)"
  fi
done

[ "$failed" -eq 0 ]
