#!/bin/sh
# The fsdp kind through the runner: experiments/smoke_fsdp.cfg (a 3-layer
# LM on CPU ranks over MPI, 1 and 2 ranks, with and without checkpoints,
# AdamW after and in backward) gives 8 ok rows; on 2 ranks each rank holds half the weight shards and
# half AdamW's moments of the 1-rank rows and moves bytes both ways, on 1
# none; checkpoints change the activations, never the weights' path (the
# same losses); AdamW in backward gives the same losses with less
# gradient memory; reshard_after_forward = false (one more job) gathers
# each group once a step into a larger window, with the same losses.
# Skips without MPI.
. "${top_srcdir:-.}/tests/lib.sh"
need_mpi
out="$scratch/data"
"$RUNNER" --out-dir "$out" "$top_srcdir/experiments/smoke_fsdp.cfg" 2> "$scratch/run.err"
status=$?
cat "$scratch/run.err"
csv="$out/smoke_fsdp.csv"
check "smoke_fsdp exits 0" [ $status -eq 0 ]
check "8 rows" [ "$(rows "$csv")" -eq 8 ]
check "all ok" [ "$(column "$csv" status | sort -u)" = "ok" ]
# value COLUMN WORLD CKPT [OPTIMIZER]
value() {
  awk -F, -v name="$1" -v w="$2" -v k="$3" -v o="${4:-after_backward}" 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == name) c = i; if ($i == "world_size") ws = i; if ($i == "checkpoint_layers") ck = i; if ($i == "optimizer") op = i }; next }
    $ws == w && $ck == k && $op == o { print $c }' "$csv"
}
ratio_near() { # A B WANT: A / B within 5% of WANT
  awk -v a="$1" -v b="$2" -v w="$3" 'BEGIN { r = a / b; exit !(r > w * 0.95 && r < w * 1.05) }'
}
check "2 ranks: half the optimizer state of 1" \
  ratio_near "$(value optstate_mib 2 0)" "$(value optstate_mib 1 0)" 0.5
check "2 ranks: about half the weights of 1 (the gains whole on each)" \
  ratio_near "$(value shards_mib 2 0)" "$(value shards_mib 1 0)" 0.5
check "2 ranks gather and reduce-scatter, 1 rank moves nothing" \
  awk -v g2="$(value gather_mib 2 0)" -v s2="$(value scatter_mib 2 0)" \
      -v g1="$(value gather_mib 1 0)" -v s1="$(value scatter_mib 1 0)" \
      'BEGIN { exit !(g2 > 0 && s2 > 0 && g1 == 0 && s1 == 0) }'
check "checkpoints: the same losses, fewer activations" \
  awk -v a="$(value loss_last 2 0)" -v b="$(value loss_last 2 1)" \
      -v x="$(value activations_mib 2 0)" -v y="$(value activations_mib 2 1)" \
      'BEGIN { exit !(a == b && y < x) }'
check "2 ranks: the gathers timed, the wait for them within the step" \
  awk -v g="$(value gather_ms_mean 2 0)" -v x="$(value exposed_gather_ms_mean 2 0)" \
      -v s="$(value step_ms_mean 2 0)" 'BEGIN { exit !(g > 0 && x >= 0 && x <= s) }'
check "AdamW in backward: the same losses, less gradient memory" \
  awk -v a="$(value loss_last 2 0)" -v b="$(value loss_last 2 0 in_backward)" \
      -v x="$(value grads_mib 2 0)" -v y="$(value grads_mib 2 0 in_backward)" \
      'BEGIN { exit !(a == b && y < x) }'
keep="$scratch/keep"
"$RUNNER" --out-dir "$keep" --set reshard_after_forward=false --only world_size=2 \
  --only checkpoint_layers=0 --only optimizer=after_backward \
  "$top_srcdir/experiments/smoke_fsdp.cfg" 2> "$scratch/keep.err"
check "reshard_after_forward = false: ok" [ "$(column "$keep/smoke_fsdp.csv" status)" = "ok" ]
check "reshard_after_forward = false: the same losses, one gather a group (5), a larger window" \
  awk -v a="$(value loss_last 2 0)" -v b="$(column "$keep/smoke_fsdp.csv" loss_last)" \
      -v g="$(value gathers 2 0)" -v k="$(column "$keep/smoke_fsdp.csv" gathers)" \
      -v x="$(value window_mib 2 0)" -v y="$(column "$keep/smoke_fsdp.csv" window_mib)" \
      'BEGIN { exit !(a == b && k == 5 && g > k && y > x) }'
check "first loss near ln(256) = 5.55" \
  awk -v a="$(value loss_first 1 0)" 'BEGIN { exit !(a > 5.0 && a < 6.1) }'
finish
