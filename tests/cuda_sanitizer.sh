#!/bin/sh
# compute-sanitizer over the CUDA tests: memcheck (out-of-bounds and
# misaligned accesses, leaks of device memory at exit) and racecheck
# (shared-memory hazards between threads of a block), each failing on any
# report. Runs where a GPU and compute-sanitizer are present; skips (77)
# elsewhere.
#
# memcheck runs with --report-api-errors no: the tests provoke API errors
# on purpose (allocations of 1 PiB must come back as out of memory) and our
# code checks every CUDA return code itself; a real API failure fails the
# test that made it.
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
  "$cs" --tool racecheck --error-exitcode 9 "$prog" > "$scratch/$t.racecheck" 2>&1
  rc=$?
  check "racecheck $t (exit $rc)" [ $rc -eq 0 ]
  [ $rc -eq 0 ] || grep -m 20 '^=========' "$scratch/$t.racecheck"
done
finish
