#!/bin/bash
# There, after refresh.sh, on a commit that is main's: re-measure the rows
# a flash kernel change moves (flash_benchmarking's bf16 flash rows at
# head dims 64 / 128, the leaderboard's flash row, flash_multihead) into
# .devres/data beside the committed rows, after test_attention_cuda and
# test_model_cuda pass there; returns $OUT/res.tgz. Here:
#   PARTIAL=ok sh dev/device/collect.sh FILES_AT/res.tgz
set -u
make -j"$(nproc)" tests/test_attention_cuda tests/test_model_cuda > /tmp/flash_rm_build.log 2>&1 ||
  { tail -n 20 /tmp/flash_rm_build.log; exit 1; }
for t in test_attention_cuda test_model_cuda; do
  tests/$t > "/tmp/$t.log" 2>&1
  rc=$?
  echo "$t at $(git rev-parse --short HEAD): rc $rc, $(tail -n 1 "/tmp/$t.log")"
  [ $rc = 0 ] || { grep -m 5 FAIL "/tmp/$t.log"; exit 1; }
done
d=$(dirname "$0")
RESUME=1 EXPS=flash_benchmarking BUDGET=${BUDGET:-200} \
  RUNNER_ARGS="--force --only impl=flash --only precision=bf16 --only d_head=64,128" bash "$d/run_exps.sh"
RESUME=1 EXPS=flash_leaderboard BUDGET=60 RUNNER_ARGS="--force --only impl=flash" bash "$d/run_exps.sh"
RESUME=1 EXPS=flash_multihead BUDGET=60 RUNNER_ARGS="--force" bash "$d/run_exps.sh"
