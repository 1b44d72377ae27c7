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
# racecheck runs over every kernel, but only hazards in our own kernels
# fail the test: cuBLAS's Hopper kernels (nvjet...) synchronise shared
# memory through TMA and mbarriers, which racecheck reports as hazards in
# code we neither own nor can change. (Excluding them from instrumentation
# with --kernel-name-exclude makes racecheck die with "failed to handle a
# hardware exception" on the H100, so they are filtered from the report.)
# test_kernels_cuda and test_attention_cuda run their --small cases under
# racecheck (every kernel, small shapes, the wgmma ones included): the whole
# attention test had not finished under racecheck after 100 s on the H100,
# its --small cases take 160 s.
. "${top_srcdir:-.}/tests/lib.sh"

cs=$(command -v compute-sanitizer 2> /dev/null)
[ -z "$cs" ] && [ -n "${NVCC:-}" ] && [ -x "$(dirname "$NVCC")/compute-sanitizer" ] &&
  cs="$(dirname "$NVCC")/compute-sanitizer"
[ -n "$cs" ] || { echo "no compute-sanitizer"; exit 77; }
probe="$top_builddir/tests/test_toy_cuda"
[ -x "$probe" ] || { echo "built without CUDA"; exit 77; }
"$probe" > /dev/null 2>&1
[ $? -eq 77 ] && { echo "no GPU"; exit 77; }

# Clean under racecheck: no hazard outside cuBLAS, the tool did not fail,
# and the test itself passed (its own last line; racecheck's exit status
# counts cuBLAS's hazards too).
race_clean() {
  [ "$1" -eq 0 ] && grep -q ' 0 failed$' "$2" &&
    ! grep -q 'Internal Sanitizer Error' "$2"
}

for t in test_toy_cuda test_model_cuda test_kernels_cuda test_attention_cuda; do
  prog="$top_builddir/tests/$t"
  "$cs" --tool memcheck --report-api-errors no --leak-check full \
    --error-exitcode 9 "$prog" > "$scratch/$t.memcheck" 2>&1
  rc=$?
  check "memcheck $t (exit $rc)" [ $rc -eq 0 ]
  [ $rc -eq 0 ] || grep -m 20 '^=========' "$scratch/$t.memcheck"
  small=
  [ $t = test_kernels_cuda ] || [ $t = test_attention_cuda ] && small=--small
  "$cs" --tool racecheck "$prog" $small > "$scratch/$t.racecheck" 2>&1
  ours=$(grep 'Race reported between' "$scratch/$t.racecheck" | grep -vc ' at nvjet_')
  theirs=$(grep 'Race reported between' "$scratch/$t.racecheck" | grep -c ' at nvjet_')
  check "racecheck $t $small: no hazard in our kernels ($ours; $theirs in cuBLAS's)" \
    race_clean "$ours" "$scratch/$t.racecheck"
  [ "$ours" -eq 0 ] || grep 'Race reported between' "$scratch/$t.racecheck" | grep -v ' at nvjet_' | head -n 10
done
finish
