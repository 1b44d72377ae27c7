#!/bin/sh
# Fully sharded data parallelism on 1, 2, 3 and 4 MPI ranks of the CPU engine
# (tests/test_fsdp mpi): weights equal single-process training, bit for bit
# on one rank. Skips (77) when built without MPI.
. "${top_srcdir:-.}/tests/lib.sh"
slow
# This test starts mpirun itself, not through the runner.
mpi_as_root
need_mpi
prog="$top_builddir/tests/test_fsdp"
[ -x "$prog" ] || { echo "missing $prog"; exit 99; }
for np in 1 2 3 4; do
  echo "+ $MPIRUN -np $np --oversubscribe $prog mpi"
  check "test_fsdp on $np MPI ranks" "$MPIRUN" -np "$np" --oversubscribe "$prog" mpi
done
finish
