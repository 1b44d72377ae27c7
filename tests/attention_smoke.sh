#!/bin/sh
# The attention job kind through the runner on the CPU engine: both
# implementations, causal and not, an odd and an even length give ok rows
# with times, TFLOP/s and memory; the materialised rows hold P in memory
# before backward (more than flash at the same shape). Each timed loop
# runs exactly `passes`, or with min_loop_ms at least that long.
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
check "min_loop_ms 0: every loop exactly passes (3)" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "fwd_passes") a = i; if ($i == "fwd_bwd_passes") c = i }; next }
           { for (i = a; i <= c; i++) if ($i != 3) bad = 1 } END { exit bad }' "$csv"
"$RUNNER" --out-dir "$scratch/long" --set min_loop_ms=20 --only seq=33 --only causal=true \
  "$top_srcdir/experiments/smoke_attention.cfg" 2> "$scratch/long.err"
status=$?
cat "$scratch/long.err"
check "min_loop_ms 20 exits 0" [ $status -eq 0 ]
long="$scratch/long/smoke_attention.csv"
check "min_loop_ms 20: 2 ok rows" [ "$(column "$long" status | grep -c '^ok$')" -eq 2 ]
# Each loop: passes * ms per pass >= 20 (the CSV's 6 digits aside), and a
# CPU pass at seq 33 is microseconds, so the forward's passes grew.
check "min_loop_ms 20: every loop lasts 20 ms, the forward's passes grew" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
           { n = 0
             split("fwd bwd fwd_bwd", w, " ")
             for (k = 1; k <= 3; k++) { p = $h[w[k] "_passes"]; m = $h[w[k] "_ms_per_pass"]
                                        if (!(p * m >= 20 * (1 - 1e-5))) bad = 1 }
             if (!($h["fwd_passes"] > 3)) bad = 1 }
           END { exit bad }' "$long"
finish
