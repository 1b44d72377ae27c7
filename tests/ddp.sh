#!/bin/sh
# Data-parallel strategies and sharded optimizers on 1, 2 and 4 MPI ranks of
# the CPU engine (tests/test_ddp mpi): weights equal single-process
# training. Skips (77) when built without MPI.
. "${top_srcdir:-.}/tests/lib.sh"
# This test starts mpirun itself, not through the runner.
mpi_as_root
need_mpi
prog="$top_builddir/tests/test_ddp"
[ -x "$prog" ] || { echo "missing $prog"; exit 99; }
for np in 1 2 4; do
  echo "+ $MPIRUN -np $np --oversubscribe $prog mpi"
  check "test_ddp on $np MPI ranks" "$MPIRUN" -np "$np" --oversubscribe "$prog" mpi
done
finish
