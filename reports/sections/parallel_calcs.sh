#!/bin/sh
# Writeup sections of the 2026 edition's paper-only parallelism problems
# (its section 8): alternate_ring_all_reduce, data_parallel_calcs,
# fsdp_calcs, tp_calcs, fsdp_tp_calcs, one per PROBLEM. The setting: N
# devices, each with W bytes/s of egress and C FLOP/s; fp16 values (2
# bytes); a product (A, B)(B, C) costs 2ABC FLOPs; communication overlaps
# computation. The FFN: x (B, D); W1, W2 (D, F); W3 (F, D); forward
# x1 = x W1, x2 = x W2, z = f(x1) * x2, y = z W3 (6 B D F FLOPs), backward
# 12 B D F (dz, dx: three products; dW1..3: three).
# Each answer is derived here, then read with numbers: C is the GPU's
# measured dense bf16 rate (reports/anchors/gpu_floors.csv), W the NCCL
# all-reduce bus bandwidth at 1 GiB on the most ranks measured
# (DATA/allreduce.csv: the ring model's W), D and F the 2.7B's.
# Environment as for every section.
set -eu
. "$REPORT_LIB"

csv=$CSV
D=2560 F=10240
have=''
if has_rows "$csv"; then
  on_gpu "$csv"
  n=$(tool value "$csv" --where status=ok --where backend=nccl --where bytes=1073741824 \
        --sort -world_size --agg first --default '' --col world_size)
  if [ -n "$n" ]; then
    nv() { tool value "$csv" --where status=ok --where backend=nccl --where bytes=1073741824 \
             --where world_size="$n" --sort -utc --agg first --col "$1"; }
    W=$(nv busbw_gbps) tms=$(nv time_ms_median) dirty=$(nv git_dirty)
    num busbw "$W"
    num time "$tms"
    floors "$GPU"
    C=$BF16_TFLOPS
    # C and W from one GPU kind, or no numbers
    [ "$FLOORS_GPU" != "$GPU" ] || have=1
  fi
fi
# cw: C / W in FLOPs a byte (C in TFLOP/s, W in GB/s)
cw=''
[ -z "$have" ] || cw=$(calc %.0f "$C * 1e12 / ($W * 1e9)")
# numbers FULL: the numbers each answer is read with: a table (FULL: the
# first of these sections), else a pointer to it.
numbers() {
  [ -n "$have" ] || return 0
  if [ "$1" = 0 ]; then echo "C, W, D and F as in 2026.4."; echo; return 0; fi
  note=''
  [ "$dirty" = 0 ] || note="; from an uncommitted tree, 2.1.1"
  echo "The numbers these answers are read with:"
  echo
  echo "| symbol | value | what it is |"
  echo "|---|--:|---|"
  echo "| C | $C TFLOP/s | the $FLOORS_KIND's dense bf16 products, measured (reports/anchors/gpu_floors.csv) |"
  echo "| W | $W GB/s | NCCL's all-reduce bus bandwidth, 1 GiB on $n ${GPU_KIND}s (allreduce.csv$note) |"
  echo "| C / W | $cw | FLOPs a byte |"
  echo "| D, F | $D, $F | the 2.7B's d_model and d_ff |"
  echo
}
# part LETTER TITLE ANSWER WHY [HERE]: a sub-part, its answer and the
# one-sentence justification, as a table (and its value with the numbers).
part() {
  echo "### ($1) $2"
  echo
  echo "| answer | why |"
  echo "|---|---|"
  echo "| **$3** | $4 |"
  [ -z "${5:-}" ] || [ -z "$have" ] || echo "| here: $5 | |"
  echo
}
x() { calc "$@"; }

case $PROBLEM in
alternate_ring_all_reduce)
  numbers 1
  echo "| | answer | why |"
  echo "|---|---|---|"
  echo "| time | **(N - 1) S / W** | each of the N - 1 steps sends one whole vector of S bytes from every device to the next, S / W a step |"
  echo "| against the ring | N / 2 times slower | reduce-scatter then all-gather send S / N a step for 2 (N - 1) steps: 2 (N - 1) / N x S / W |"
  if [ -n "$have" ]; then
    echo "| 1 GiB, $n devices: ring | $(x %.2f "2 * ($n - 1) / $n * 1073741824 / ($W * 1e9) * 1e3") ms | 2 (N - 1) / N x S / W |"
    echo "| the alternate ring | $(x %.2f "($n - 1) * 1073741824 / ($W * 1e9) * 1e3") ms | (N - 1) S / W |"
    echo "| NCCL, measured | $(x %.2f "$tms") ms | 2.1.1 |"
  fi
  echo
  ;;
data_parallel_calcs)
  numbers 0
  part a "Backward FLOPs" "12 B D F / N_DP a device" \
    "each device runs the whole backward (six products of 2 x rows x D x F) on its B / N_DP rows"
  part b "Backward communication" "12 (N_DP - 1) D F / (N_DP W)" \
    "the three weight gradients (6 D F bytes) are all-reduced: 2 (N - 1) / N x S / W"
  part c "When communication binds" "N_DP <= 1 + B W / C" \
    "(b) <= (a) / C reduces to (N_DP - 1) / W <= B / C: D and F cancel, so each device needs about C / W tokens" \
    "8 devices need B >= 7 x $cw = $([ -z "$have" ] || x %.0f "7 * $cw") tokens"
  ;;
fsdp_calcs)
  numbers 0
  part a "FLOPs" "forward 6 B D F / N_FSDP, backward 12 B D F / N_FSDP" \
    "the weights are gathered whole, so each device computes as data parallelism does on its B / N_FSDP rows"
  part b "Communication" "forward 6 (N_FSDP - 1) D F / (N_FSDP W), backward 12 (N_FSDP - 1) D F / (N_FSDP W)" \
    "forward all-gathers the three matrices (6 D F bytes, (N - 1) / N x S / W); backward gathers them again and reduce-scatters their gradients"
  part c "When communication binds" "backward and forward alike: N_FSDP <= 1 + B W / C" \
    "12 (N - 1) D F / (N W) <= 12 B D F / (N C), and forward halves both sides: data parallelism's bound, at 1 / N of its weight memory and 1.5x its bytes" \
    "at most 1 + B / $cw devices"
  ;;
tp_calcs)
  numbers 0
  echo "### (a) Backward"
  echo
  echo "| on device i | equation |"
  echo "|---|---|"
  echo "| dy | the same on every device: y was all-reduced, so no communication |"
  echo "| dz^(i) (B, F / N_TP) | dy W3^(i)T |"
  echo "| dW3^(i) | z^(i)T dy |"
  echo "| dx2^(i), dx1^(i) | dz^(i) * f(x1^(i)), dz^(i) * f'(x1^(i)) * x2^(i) |"
  echo "| dW2^(i), dW1^(i) | x^T dx2^(i), x^T dx1^(i) |"
  echo "| dx (B, D) | AllReduce over i of dx1^(i) W1^(i)T + dx2^(i) W2^(i)T |"
  echo
  part b "FLOPs" "forward 6 B D F / N_TP, backward 12 B D F / N_TP" \
    "every product has F / N_TP in place of F"
  part c "Communication" "forward and backward 4 (N_TP - 1) B D / (N_TP W) each" \
    "one all-reduce of 2 B D bytes each: y in forward, dx in backward"
  part d "When communication binds" "forward N_TP <= 1 + 3 F W / (2 C), backward N_TP <= 1 + 3 F W / C" \
    "4 (N - 1) B D / (N W) <= 6 B D F / (N C), and <= 12 B D F / (N C): B and D cancel, so no batch helps" \
    "forward N_TP <= $([ -z "$have" ] || x %.1f "1 + 3 * $F / (2 * $cw)"), backward <= $([ -z "$have" ] || x %.1f "1 + 3 * $F / $cw")"
  ;;
fsdp_tp_calcs)
  numbers 0
  part a "Forward FLOPs" "6 B D F / N a device (N = N_TP N_FSDP)" \
    "B / N_FSDP rows against F / N_TP columns"
  part b "Forward communication, the axes overlapped" \
    "max(6 (N_FSDP - 1) D F / (N_FSDP N_TP W), 4 (N_TP - 1) B D / (N_TP N_FSDP W))" \
    "the FSDP axis all-gathers each device's column shard of the three matrices (6 D F / N_TP bytes); the TP axis all-reduces its rows of y (2 B D / N_FSDP bytes)"
  part c "How large N can grow" "N <= (1 + B W / C)(1 + 3 F W / (2 C)), about 3 B F W^2 / (2 C^2)" \
    "against 6 B D F / (N C) the terms give N_FSDP - 1 <= B W / C and N_TP - 1 <= 3 F W / (2 C), bounded apart, so each degree takes its bound" \
    "N <= (1 + B / $cw) x $([ -z "$have" ] || x %.1f "1 + 3 * $F / (2 * $cw)")"
  part d "The axes sharing the network" "N <= (6 B F W / C + 6 F + 4 B)^2 / (96 B F), about 3 B F W^2 / (8 C^2)" \
    "the terms add: 6 (N_FSDP - 1) F + 4 (N_TP - 1) B <= 6 B F W / C, a linear budget; the product N_FSDP N_TP is largest with half to each, N_FSDP = (6 B F W / C + 6 F + 4 B) / (12 F), N_TP = the same over 8 B: a quarter of (c)"
  ;;
*)
  echo "${0##*/}: no problem $PROBLEM" >&2
  exit 1
  ;;
esac
