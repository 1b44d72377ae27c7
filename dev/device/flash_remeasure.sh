#!/bin/bash
# There, after refresh.sh, on a commit that is main's: re-measure the rows
# a flash kernel change moves (flash_benchmarking's bf16 flash rows at
# head dims 64 / 128, the leaderboard's flash row, flash_multihead) into
# .devres/data beside the committed rows, after test_attention_cuda and
# test_model_cuda pass there; returns $OUT/res.tgz. TORCH=1: then, in the
# same call on the same GPU, PyTorch's SDPA (default, cuDNN and
# FlashAttention-2 backends) at the goal shapes, appended to a copy of
# reports/anchors/torch_attention.csv (the report reads the newest row of
# a shape). Here:
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
if [ "${TORCH:-0}" = 1 ]; then
  cp reports/anchors/torch_attention.csv .devres/
  python3 reports/anchors/torch_attention.py .devres/torch_attention.csv \
    --shapes "1,16,16384,64;1,16,16384,128;1,1,65536,64;1,1,65536,128" \
    --precisions bf16 --causal 1 --impls sdpa,sdpa_cudnn,sdpa_flash
  echo "torch_attention.py: rc $?"
  tar czf "$OUT/res.tgz" .devres
fi
