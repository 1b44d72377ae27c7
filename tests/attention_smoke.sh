#!/bin/sh
# The attention job kind through the runner on the CPU engine: both
# implementations, causal and not, an odd and an even length give ok rows
# with times, TFLOP/s and memory; the materialised rows hold P in memory
# before backward (more than flash at the same shape).
. "${top_srcdir:-.}/tests/lib.sh"

out="$scratch/data"
"$RUNNER" --out-dir "$out" "$top_srcdir/experiments/smoke_attention.cfg" 2> "$scratch/run.err"
status=$?
cat "$scratch/run.err"
check "smoke_attention exits 0" [ $status -eq 0 ]
csv="$out/smoke_attention.csv"
check "8 rows" [ "$(rows "$csv")" -eq 8 ]
check "all ok" [ "$(column "$csv" status | sort -u)" = "ok" ]
check "times and rates are positive" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "fwd_ms_per_pass") a = i; if ($i == "bwd_tflops") b = i; if ($i == "mem_before_bwd_mib") c = i }; next }
           { if (!($a > 0) || !($b > 0) || !($c > 0)) bad = 1 } END { exit bad }' "$csv"
# seq 64, batch 2 x 2 heads: P is 4 * 64 * 64 * 4 bytes = 64 KiB more.
check "materialized holds P before backward" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "impl") m = i; if ($i == "seq") s = i; if ($i == "causal") c = i; if ($i == "mem_before_bwd_mib") b = i }; next }
           $s == 64 && $c == "false" { v[$m] = $b }
           END { d = (v["materialized"] - v["flash"]) * 1048576; exit !(d == 65536) }' "$csv"
finish
