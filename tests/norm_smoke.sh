#!/bin/sh
# The norm kind end to end on the CPU engine: RMSNorm and LayerNorm at two
# widths through the runner, every row ok with its three measurements
# (times are noise at this size: nothing is asserted about them).
. "${top_srcdir:-.}/tests/lib.sh"
cfg="$scratch/norm.cfg"
cat > "$cfg" <<'CFG'
name = "norm_smoke";
kind = "norm";
run = { backend = "cpu"; passes = 3; warmup = 1; };
norm = { rows = 300; };
sweep = { impl = ["rmsnorm", "layernorm"]; cols = [32, 96]; };
CFG
"$RUNNER" --launcher "" --out-dir "$scratch" "$cfg" 2> "$scratch/run.err"
check "the sweep exits 0" [ $? -eq 0 ]
csv="$scratch/norm_smoke.csv"
check "4 rows, all ok" [ "$(rows "$csv")" -eq 4 ] && [ "$(column "$csv" status | sort -u)" = ok ]
bad=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
  !($c["fwd_ms_per_pass"] > 0 && $c["fwd_bwd_ms_per_pass"] > 0 && $c["fwd_gbps"] > 0) { n++ }
  END { print n + 0 }' "$csv")
check "every row measured ($bad rows not)" [ "$bad" -eq 0 ]
cat "$scratch/run.err"
finish
