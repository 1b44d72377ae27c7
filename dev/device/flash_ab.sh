#!/bin/bash
# There, after refresh.sh: the flash kernels' A/B (ab.sh) at the shapes
# the FlashAttention goals name: the leaderboard's flash row, both
# flash_multihead rows and flash_benchmarking's bf16 flash rows at head
# dims 64 / 128 (SEQS, default 4096,16384,65536; the wgmma kernels').
# Tests HEAD and each ALSO candidate first (ab.sh's PRETEST): one that
# fails test_attention_cuda is not timed.
#   BASE=abc1234 ALSO="def5678" bash dev/device/flash_ab.sh
set -u
: "${BASE:?BASE: the commit to compare with}"
# the test built here first: the candidates' trees, copies of this one,
# then rebuild only what differs
make -j"$(nproc)" tests/test_attention_cuda > /tmp/flash_ab_build.log 2>&1 ||
  { tail -n 20 /tmp/flash_ab_build.log; exit 1; }
# shellcheck disable=SC2016 # expanded where it runs (ab.sh, eval)
export PRETEST='make -j"$(nproc)" tests/test_attention_cuda > /dev/null && tests/test_attention_cuda'
export EXP="flash_leaderboard flash_multihead flash_benchmarking"
export ARGS_flash_leaderboard="--only impl=flash"
export ARGS_flash_benchmarking="--only impl=flash --only precision=bf16 --only d_head=64,128 --only seq=${SEQS:-4096,16384,65536}"
exec bash "$(dirname "$0")/ab.sh"
