#!/bin/sh
# compute-sanitizer over the CUDA tests: memcheck (out-of-bounds and
# misaligned accesses, device memory leaked at exit) over all four, and
# racecheck (shared-memory hazards between a block's threads) over our own
# kernels, each failing on any report. Runs where a GPU and
# compute-sanitizer are present; skips (77) elsewhere.
#
# memcheck runs with --report-api-errors no: the tests provoke API errors
# on purpose (an allocation of 1 PiB must come back as out of memory) and
# our code checks every CUDA return code itself.
#
# racecheck leaves out cuBLAS's kernels (nvjet...): they synchronise shared
# memory through TMA and mbarriers, which racecheck reports as hazards of
# code we neither own nor can change, and they make the run last tens of
# minutes. test_kernels_cuda runs its --small cases under racecheck (every
# kernel, small shapes).
. "${top_srcdir:-.}/tests/lib.sh"

cs=$(command -v compute-sanitizer 2> /dev/null)
[ -z "$cs" ] && [ -n "${NVCC:-}" ] && [ -x "$(dirname "$NVCC")/compute-sanitizer" ] &&
  cs="$(dirname "$NVCC")/compute-sanitizer"
[ -n "$cs" ] || { echo "no compute-sanitizer"; exit 77; }
probe="$top_builddir/tests/test_toy_cuda"
[ -x "$probe" ] || { echo "built without CUDA"; exit 77; }
"$probe" > /dev/null 2>&1
[ $? -eq 77 ] && { echo "no GPU"; exit 77; }

for t in test_toy_cuda test_model_cuda test_kernels_cuda test_attention_cuda; do
  prog="$top_builddir/tests/$t"
  "$cs" --tool memcheck --report-api-errors no --leak-check full \
    --error-exitcode 9 "$prog" > "$scratch/$t.memcheck" 2>&1
  rc=$?
  check "memcheck $t (exit $rc)" [ $rc -eq 0 ]
  [ $rc -eq 0 ] || grep -m 20 '^=========' "$scratch/$t.memcheck"
  small=
  [ $t = test_kernels_cuda ] && small=--small
  "$cs" --tool racecheck --kernel-name-exclude kns=nvjet --error-exitcode 9 \
    "$prog" $small > "$scratch/$t.racecheck" 2>&1
  rc=$?
  check "racecheck $t $small(exit $rc)" [ $rc -eq 0 ]
  [ $rc -eq 0 ] || grep -m 20 '^=========' "$scratch/$t.racecheck"
done
finish
