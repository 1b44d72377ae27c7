#!/bin/sh
# Nsight Compute's kernel list of experiments/nsys_profile_check.cfg's jobs,
# appended to reports/anchors/ncu_kernels.csv (ncu_kernels.py says what a
# row holds). Run from the top of a built tree on the GPU machine, after
# `./runner experiments/nsys_profile_check.cfg` (our profile of the same
# jobs, which the nsys_profile section sets beside these rows):
#   sh reports/anchors/ncu_kernels.sh [SIZE...]     (default: small 2.7B)
# ncu serialises the kernels and adds ~0.1 s a launch: ~4 min for small,
# ~11 min for 2.7B on an H200.
set -eu
cfg=experiments/nsys_profile_check.cfg
out=reports/anchors/ncu_kernels.csv
command -v ncu > /dev/null || { echo "ncu (Nsight Compute) not on the PATH" >&2; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
commit=$(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!reports/anchors' || echo -dirty)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
val() { ./runner --dry-run --only size="$1" "$cfg" | sed -n "s/.* $2=\([^ ]*\).*/\1/p" | head -n 1; }
for size in ${*:-small 2.7B}; do
  # the profile off: CUPTI takes one client, and ncu is one
  ./runner --out-dir "$tmp" --set run.timeout_s=3000 --set run.kernel_profile=false \
    --only size="$size" \
    --launcher "ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --print-kernel-base demangled --log-file $tmp/ncu.csv" \
    "$cfg"
  python3 reports/anchors/ncu_kernels.py "$out" "$tmp/ncu.csv" "$size" "$(val "$size" context)" \
    "$(val "$size" precision)" "$(val "$size" warmup)" "$(val "$size" steps)" "$gpu" "$commit"
  rm -rf "$tmp"/*
done
