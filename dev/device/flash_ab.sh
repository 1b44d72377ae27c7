#!/bin/bash
# There, after refresh.sh: the flash kernels' A/B (ab.sh) at the shapes
# the FlashAttention goals name: the leaderboard's flash row, both
# flash_multihead rows and flash_benchmarking's bf16 flash rows at head
# dims 64 / 128 (SEQS, default 4096,16384,65536; the wgmma kernels').
# Tests HEAD and each ALSO candidate first: one that fails
# test_attention_cuda is not timed.
#   BASE=abc1234 ALSO="def5678" bash dev/device/flash_ab.sh
set -u
: "${BASE:?BASE: the commit to compare with}"
make -j"$(nproc)" tests/test_attention_cuda > /tmp/flash_ab_build.log 2>&1 ||
  { tail -n 20 /tmp/flash_ab_build.log; exit 1; }
tests/test_attention_cuda > /tmp/flash_ab_test.log 2>&1
rc=$?
echo "test_attention_cuda at $(git rev-parse --short HEAD): rc $rc, $(tail -n 1 /tmp/flash_ab_test.log)"
[ $rc = 0 ] || { grep -m 5 FAIL /tmp/flash_ab_test.log; exit 1; }
# each ALSO candidate: built where ab.sh would build it (ab.sh keeps a
# worktree at the right commit), tested, dropped from the timing if it fails
also=
for r in ${ALSO:-}; do
  wt=/tmp/ab-$r
  rm -rf "$wt"; git worktree prune
  git worktree add -q -f --detach "$wt" "$r" &&
    (cd "$wt" && autoreconf -fi && ./configure && make -j"$(nproc)" && make tests/test_attention_cuda) \
      > /tmp/flash_ab_build.log 2>&1 ||
    { echo "$r: build failed"; tail -n 20 /tmp/flash_ab_build.log; continue; }
  (cd "$wt" && tests/test_attention_cuda) > /tmp/flash_ab_test.log 2>&1
  rc=$?
  echo "test_attention_cuda at $r: rc $rc, $(tail -n 1 /tmp/flash_ab_test.log)"
  if [ $rc = 0 ]; then also="$also $r"; else grep -m 5 FAIL /tmp/flash_ab_test.log; fi
done
export ALSO=$also
export EXP="flash_leaderboard flash_multihead flash_benchmarking"
export ARGS_flash_leaderboard="--only impl=flash"
export ARGS_flash_benchmarking="--only impl=flash --only precision=bf16 --only d_head=64,128 --only seq=${SEQS:-4096,16384,65536}"
exec bash "$(dirname "$0")/ab.sh"
