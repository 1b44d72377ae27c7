#!/bin/bash
# There, after refresh.sh: the whole test suite on the GPU machine (CI has
# no GPU, so its CUDA tests skip there), recorded (make check-record). make
# check's summary, reports/data/checks.csv and the logs of any test that
# failed, to /tmp/res (bg.sh returns it); here, copy checks.csv over the
# tree's and commit it. One H200: 676 s,
# most of it cuda_sanitizer.sh's racecheck over test_model_cuda (659); poll
# (the same command again) with a short WAIT to spend little device time.
#   WAIT=420 bash dev/device/bg.sh dev/device/check.sh
set -u
mkdir -p /tmp/res
start=$SECONDS
make -j"$(nproc)" check-record > /tmp/res/check.log 2>&1
rc=$?
cp reports/data/checks.csv /tmp/res/ 2> /dev/null
echo "make check-record at $(git rev-parse --short HEAD): rc $rc, $((SECONDS - start)) s"
grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|# )' /tmp/res/check.log
for trs in tests/*.trs; do
  grep -q '^:test-result: \(FAIL\|ERROR\|XPASS\)' "$trs" && cp "${trs%.trs}.log" /tmp/res/
done
exit $rc
