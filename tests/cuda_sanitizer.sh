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
# test_kernels_cuda, test_attention_cuda and test_model_cuda run their
# --small cases under racecheck (every kernel, small shapes, the wgmma ones
# included): the whole attention test had not finished under racecheck
# after 100 s on the H100, its --small cases take 160 s; the model test's
# take about 570 s on an H200 (the whole: about 900), the longest run.
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

# Why a run failed: the test's own failed checks, the sanitizer's first
# reports (hazards in cuBLAS left out) and how the run ended.
why() {
  grep -m 10 '^FAIL' "$1"
  grep '^=========' "$1" | grep -v ' at nvjet_' | head -n 20
  tail -n 3 "$1"
}

# The eight instrumented runs (four tests under two tools) go at once:
# each is bound by the sanitizer's host-side work on one core; one after
# another they had not finished after seven minutes on an H200, side by
# side they take about as long as the slowest. They share the visible
# GPUs; where CUDA_VISIBLE_DEVICES is unset they are dealt round robin.
# Each run stops at CUDA_SANITIZER_LIMIT seconds (default 1200) and fails
# as unfinished, and each says when it ends, so a run that hangs or a
# log cut short still tells which finished and how long they took.
limit=${CUDA_SANITIZER_LIMIT:-1200}
tests="test_toy_cuda test_model_cuda test_kernels_cuda test_attention_cuda"
# racecheck runs the long tests' --small cases (see the top).
small_of() {
  case $1 in test_kernels_cuda | test_attention_cuda | test_model_cuda) echo --small ;; esac
}
ngpu=1
[ -z "${CUDA_VISIBLE_DEVICES+x}" ] && command -v nvidia-smi > /dev/null 2>&1 &&
  ngpu=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU') && [ "$ngpu" -ge 1 ] || ngpu=1
i=0
for t in $tests; do
  prog="$top_builddir/tests/$t"
  small=$(small_of $t)
  # CUPTI takes one subscriber per process and compute-sanitizer is one, so
  # the kernel profile is tested by the plain run only.
  opts=
  [ $t = test_kernels_cuda ] && opts=--no-kprof
  for tool in memcheck racecheck; do
    if [ $tool = memcheck ]; then
      set -- --tool memcheck --report-api-errors no --leak-check full --error-exitcode 9 "$prog" $opts
    else
      set -- --tool racecheck "$prog" $small $opts
    fi
    (
      [ "$ngpu" -gt 1 ] && export CUDA_VISIBLE_DEVICES=$((i % ngpu))
      s0=$(date +%s)
      timeout -k 10 "$limit" "$cs" "$@" > "$scratch/$t.$tool" 2>&1
      rc=$?
      echo "$rc $(($(date +%s) - s0))" > "$scratch/$t.$tool.rc"
      echo "ended: $tool $t (exit $rc, $(($(date +%s) - s0)) s)"
    ) &
    i=$((i + 1))
  done
done
wait

# exit 124 or 137: stopped at the limit
unfinished() { case $1 in 124 | 137) echo ", unfinished at the ${limit} s limit" ;; esac; }
for t in $tests; do
  read rc secs < "$scratch/$t.memcheck.rc"
  check "memcheck $t (exit $rc, ${secs} s$(unfinished "$rc"))" [ $rc -eq 0 ]
  [ $rc -eq 0 ] || why "$scratch/$t.memcheck"
  small=$(small_of $t)
  read rc secs < "$scratch/$t.racecheck.rc"
  ours=$(grep 'Race reported between' "$scratch/$t.racecheck" | grep -vc ' at nvjet_')
  theirs=$(grep 'Race reported between' "$scratch/$t.racecheck" | grep -c ' at nvjet_')
  check "racecheck $t $small: no hazard in our kernels ($ours; $theirs in cuBLAS's; ${secs} s$(unfinished "$rc"))" \
    race_clean "$ours" "$scratch/$t.racecheck"
  race_clean "$ours" "$scratch/$t.racecheck" || why "$scratch/$t.racecheck"
done
finish
