#!/bin/sh
# The lm job kind through the runner on the CPU engine: every mode of three
# tiny models gives an ok row with times, the exact parameter count, a loss
# near ln(vocab) at initialisation, and per-step samples in the sidecar.
. "${top_srcdir:-.}/tests/lib.sh"
slow

out="$scratch/data"
"$RUNNER" --out-dir "$out" "$top_srcdir/experiments/smoke_lm.cfg" 2> "$scratch/run.err"
status=$?
cat "$scratch/run.err"
check "smoke_lm exits 0" [ $status -eq 0 ]
csv="$out/smoke_lm.csv"
check "18 rows" [ "$(rows "$csv")" -eq 18 ]
check "all ok" [ "$(column "$csv" status | sort -u)" = "ok" ]
# vocab 256: nano 4664, tiny 33952, 64/192/2/4 139584 parameters.
check "parameter counts" [ "$(column "$csv" params | sort -un | tr '\n' ' ')" = "4664 33952 139584 " ]
check "loss at init near ln(256) = 5.55" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "loss_first") c = i; next }
           { if ($c < 5.0 || $c > 6.1) bad = 1 } END { exit bad }' "$csv"
check "forward rows have no backward time" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "mode") m = i; if ($i == "bwd_ms_mean") b = i }; next }
           $m == "forward" && $b != "" { bad = 1 } $m == "train_step" && $b == "" { bad = 1 } END { exit bad }' "$csv"
check "step times measured" [ -n "$(column "$csv" step_ms_mean | tail -n 1)" ]
check "samples kept, one line per job" [ "$(wc -l < "$out/smoke_lm.samples.jsonl")" -eq 18 ]
check "fused and op-by-op give the same first loss" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "size") s = i; if ($i == "mode") m = i; if ($i == "fusion") f = i; if ($i == "loss_first") l = i }; next }
           { k = $s "/" $m; if (k in v) { d = v[k] - $l; if (d < 0) d = -d; if (d > 1e-4 * v[k]) bad = 1 } else v[k] = $l } END { exit bad }' "$csv"
"$RUNNER" --out-dir "$out" --set fusion=fused --set attention=flash --set size=tiny \
  "$top_srcdir/experiments/smoke_lm.cfg" 2> "$scratch/flash.err"
check "the fused path with flash attention runs" [ $? -eq 0 ]
check "samples hold 3 timed steps" grep -q '"step_ms": \[[^],]*, [^],]*, [^],]*\]' "$out/smoke_lm.samples.jsonl"
# sweep DIR NAME ARGS...: experiments/NAME.cfg through the runner into
# $scratch/DIR (its stderr shown when it fails); its CSV is DIR/NAME.csv.
sweep() {
  _d=$1 _n=$2
  shift 2
  "$RUNNER" --out-dir "$scratch/$_d" "$@" "$top_srcdir/experiments/$_n.cfg" \
    2> "$scratch/$_d.err" || cat "$scratch/$_d.err"
}
# all_ok CSV N: CSV holds N rows, each ok.
all_ok() { [ "$(column "$1" status | tr '\n' ' ')" = "$(printf 'ok %.0s' $(seq "$2"))" ]; }
# The optimizer's three forms on the CPU engine's fused path: after
# backward, beside it, inside the weight-gradient products. The same
# arithmetic in another order, so the same losses to the last digit.
for o in after_backward in_backward in_products; do
  sweep opt smoke_lm --set fusion=fused --set size=tiny --set mode=train_step \
    --set optimizer=$o
done
ocsv="$scratch/opt/smoke_lm.csv"
check "the three optimizer forms each give an ok row" all_ok "$ocsv" 3
# losses CSV: the distinct (first, last) loss pairs of CSV's rows.
losses() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "loss_first") a = i; if ($i == "loss_last") b = i }; next }
           { print $a, $b }' "$1" | sort -u | wc -l
}
check "the three optimizer forms give the same losses" [ "$(losses "$ocsv")" -eq 1 ]
# AdamW in backward keeping the norms (experiments/optimizer_keep_norms.cfg
# on the CPU engine): both forms, the same losses, and keeping them (here
# fp32: the residual after attention) holds more activation bytes.
sweep keep optimizer_keep_norms --set backend=cpu --set precision=fp32 \
  --set size=tiny --set context=16 --set batch=2 --set cuda_graphs=false \
  --set warmup=1 --set steps=2
kcsv="$scratch/keep/optimizer_keep_norms.csv"
check "keep_norms false and true: two ok rows" all_ok "$kcsv" 2
check "and the same losses" [ "$(losses "$kcsv")" -eq 1 ]
# act_mib SAMPLES PATTERN: the activations' MiB (the last reading) of the
# job whose samples line matches PATTERN
act_mib() {
  grep "$2" "$1" | sed 's/.*"mem_activations_mib": \[[^]]*, \([0-9.]*\)\].*/\1/'
}
ksam="$scratch/keep/optimizer_keep_norms.samples.jsonl"
k0=$(act_mib "$ksam" '"keep_norms": "false"') k1=$(act_mib "$ksam" '"keep_norms": "true"')
check "keeping them holds more activation bytes ($k1 > $k0 MiB)" \
  awk -v a="$k1" -v b="$k0" 'BEGIN { exit !(b > 0 && a > b) }'
# Activation checkpointing through the runner (run.checkpoint_layers):
# experiments/gradient_checkpointing.cfg on the CPU engine, a model of 6
# layers at context 32: every group size, with AdamW after backward and
# in it, gives an ok row with the same losses as none, and groups of 2
# keep less than none.
sweep ckpt gradient_checkpointing --set backend=cpu --set size=64/192/6/4 \
  --set vocab=256 --set context=32 --set batch=2 --only precision=fp32 \
  --only checkpoint_layers=0,1,2,8
ccsv="$scratch/ckpt/gradient_checkpointing.csv"
check "checkpoint groups of 0, 1, 2 and 8 layers, both optimizer forms: 8 ok rows" \
  all_ok "$ccsv" 8
check "and the same losses" [ "$(losses "$ccsv")" -eq 1 ]
acts() { # K: the activations' MiB of group size K's job, AdamW after backward
  act_mib "$scratch/ckpt/gradient_checkpointing.samples.jsonl" \
    "\"optimizer\": \"after_backward\".*\"checkpoint_layers\": \"$1\""
}
a0=$(acts 0) a2=$(acts 2)
check "groups of 2 layers keep fewer activation bytes than none ($a2 < $a0 MiB)" \
  awk -v a="$a2" -v b="$a0" 'BEGIN { exit !(a > 0 && a < b) }'
finish
