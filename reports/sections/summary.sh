#!/bin/sh
# The writeup's opening summary: each headline result next to the strongest
# anchor measured on the same GPU kind, both read from CSVs (ours from
# DATA, PyTorch's from reports/anchors/, each file written by a script
# there). A line whose rows are missing is left out, never guessed.
# Environment as for every section (no CSV of its own).
set -eu
LC_ALL=C
export LC_ALL

. "$REPORT_LIB"
anchors="$(dirname "$REPORT_LIB")/anchors"
lm_anchor="$anchors/torch_lm_h100.csv"
at_anchor="$anchors/torch_attention_h100.csv"
ar_anchor="$anchors/allreduce_torch.csv"

# first value of COL in FILE under the --where filters (rows with a status
# column: ok ones only), or empty
val() {
  f=$1 col=$2
  shift 2
  [ -f "$f" ] || return 0
  case $(head -n 1 "$f") in
    *,status,* | status,* | *,status) set -- --where status=ok "$@" ;;
  esac
  tool value "$f" --col "$col" "$@" --default ''
}

echo "## Summary"
echo
echo "| result | GPU | ours | strongest PyTorch, same GPU kind |"
echo "|---|---|--:|---|"

# Our fastest path (fused, flash, CUDA graphs) with AdamW after backward,
# from the run that measured the in-backward form beside it.
oib=$DATA/optimizer_in_backward.csv
ms=$(val "$oib" step_ms_mean --sort -utc --where size=2.7B --where context=512 --where precision=bf16 --where optimizer=after_backward --where adamw_blocks=0)
mib=$(val "$oib" engine_peak_mib --sort -utc --where size=2.7B --where context=512 --where precision=bf16 --where optimizer=after_backward --where adamw_blocks=0)
pms=$(val "$lm_anchor" step_ms_median --where size=2.7B --where context=512 --where precision=bf16 --where config=compiled)
pgib=$(val "$lm_anchor" peak_gib --where size=2.7B --where context=512 --where precision=bf16 --where config=compiled)
if [ -n "$ms" ] && [ -n "$pms" ]; then
  num ms "$ms"; num pms "$pms"; num mib "$mib"; num pgib "$pgib"
  echo "| 2.7B training step, bf16, context 512, batch 4 | H100 | $(calc '%.1f' "$ms") ms | torch.compile + SDPA + fused AdamW $(calc '%.1f' "$pms") ms: ours $(calc '%.2f' "$pms / $ms")x as fast |"
  echo "| peak memory of that step | H100 | $(calc '%.1f' "$mib / 1024") GiB | $(calc '%.1f' "$pgib") GiB: **we use $(calc '%.2f' "$mib / 1024 / $pgib")x the memory** |"
fi
ims=$(val "$oib" step_ms_mean --sort -utc --where size=2.7B --where context=512 --where precision=bf16 --where optimizer=in_backward --where adamw_blocks=0)
imib=$(val "$oib" engine_peak_mib --sort -utc --where size=2.7B --where context=512 --where precision=bf16 --where optimizer=in_backward --where adamw_blocks=0)
if [ -n "$ims" ] && [ -n "$pms" ]; then
  num ims "$ims"; num imib "$imib"
  echo "| the same step with AdamW in backward (section T) | H100 | $(calc '%.1f' "$ims") ms, $(calc '%.1f' "$imib / 1024") GiB | the same $(calc '%.1f' "$pms") ms, $(calc '%.1f' "$pgib") GiB: ours $(calc '%.2f' "$pms / $ims")x as fast in $(calc '%.2f' "$imib / 1024 / $pgib")x the memory |"
fi
fb=$(val "$DATA/flash_leaderboard.csv" fwd_bwd_ms_per_pass --where impl=flash)
cu=$(val "$at_anchor" fwd_bwd_ms --where impl=sdpa_cudnn --where seq=16384 --where d_head=64 --where heads=16)
sd=$(val "$at_anchor" fwd_bwd_ms --where impl=sdpa --where seq=16384 --where d_head=64 --where heads=16)
if [ -n "$fb" ] && [ -n "$cu" ]; then
  num fb "$fb"; num cu "$cu"; num sd "$sd"
  verdict=$(awk "BEGIN { print ($fb <= $cu) ? \"ours faster\" : \"**we lose by \" sprintf(\"%.0f\", ($fb / $cu - 1) * 100) \"%**\" }")
  echo "| attention fwd+bwd, leaderboard shape (1 x 16 x 16384, d 64, bf16, causal) | H100 | $(calc '%.2f' "$fb") ms | SDPA cuDNN $(calc '%.2f' "$cu") ms (default $(calc '%.2f' "$sd")): $verdict |"
fi
f128=$(val "$DATA/flash_benchmarking.csv" fwd_bwd_ms_per_pass --where impl=flash --where precision=bf16 --where seq=65536 --where d_head=128)
s128=$(val "$at_anchor" fwd_bwd_ms --where impl=sdpa --where seq=65536 --where d_head=128)
if [ -n "$f128" ] && [ -n "$s128" ]; then
  num f128 "$f128"; num s128 "$s128"
  echo "| attention fwd+bwd, 1 x 1 x 65536, d 128, bf16, causal | H100 | $(calc '%.2f' "$f128") ms | SDPA $(calc '%.2f' "$s128") ms: **we lose, $(calc '%.1f' "$f128 / $s128")x its time** |"
fi
bw=$(val "$DATA/allreduce.csv" busbw_gbps --where backend=nccl --where world_size=8 --where size_mib=1024)
pbw=$(val "$ar_anchor" busbw_gbps --where world_size=8 --where size_mib=1024)
mach=$(val "$DATA/allreduce.csv" machine --where backend=nccl --where world_size=8 --where size_mib=1024)
if [ -n "$bw" ] && [ -n "$pbw" ]; then
  num bw "$bw"; num pbw "$pbw"
  echo "| NCCL all-reduce, 1 GiB fp32, 8 GPUs, bus bandwidth | $mach | $(calc '%.1f' "$bw") GB/s | torch.distributed $(calc '%.1f' "$pbw") GB/s, same host |"
fi
echo
echo "Each row's numbers, its machine and the commit it ran are in the"
echo "sections below and their CSVs. We lose on memory unless AdamW runs in"
echo "backward, on long-sequence attention at head dim 128, and to cuDNN's"
echo "attention at the leaderboard shape; the sections say where the time and"
echo "the bytes go."
echo
