#!/bin/sh
# The norm kind end to end on the CPU engine: RMSNorm and LayerNorm at two
# widths through the runner, every row ok with its three measurements
# (times are noise at this size: nothing is asserted about them); and the
# lm kind's model with each norm (norm_model.cfg, norm_model_fused.cfg) on
# a tiny CPU model, fused + LayerNorm refused.
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

# The model with each norm (experiments/norm_model.cfg and its fused
# RMSNorm beside it, norm_model_fused.cfg), shrunk to a tiny CPU model:
# every row ok, LayerNorm's model 5 biases of d_model 32 larger than
# RMSNorm's (2 layers x 2 norms + the final one), and the fused path
# refusing LayerNorm before any job runs.
small="--set backend=cpu --set size=tiny --set vocab=256 --set context=16 --set batch=2 --set warmup=1 --set steps=2"
# shellcheck disable=SC2086 # $small: several arguments on purpose
"$RUNNER" --launcher "" --out-dir "$scratch" $small \
  "$top_srcdir/experiments/norm_model.cfg" 2> "$scratch/model.err"
check "norm_model on a tiny CPU model exits 0" [ $? -eq 0 ]
csv="$scratch/norm_model.csv"
check "4 rows (2 norms x 2 modes), all ok" \
  [ "$(rows "$csv")" -eq 4 ] && [ "$(column "$csv" status | sort -u)" = ok ]
check "parameters at vocab 256: rmsnorm 33952, layernorm 160 more" \
  [ "$(column "$csv" params | sort -un | tr '\n' ' ')" = "33952 34112 " ]
# shellcheck disable=SC2086
"$RUNNER" --launcher "" --out-dir "$scratch" $small \
  "$top_srcdir/experiments/norm_model_fused.cfg" 2> "$scratch/fused.err"
check "norm_model_fused on a tiny CPU model exits 0, 2 rows ok" \
  [ $? -eq 0 ] && [ "$(rows "$scratch/norm_model_fused.csv")" -eq 2 ] &&
  [ "$(column "$scratch/norm_model_fused.csv" status | sort -u)" = ok ]
# shellcheck disable=SC2086
"$RUNNER" --dry-run --out-dir "$scratch" $small --set fusion=fused \
  "$top_srcdir/experiments/norm_model.cfg" > /dev/null 2> "$scratch/refused.err"
rc=$?
check "fused + layernorm refused before any job (exit $rc, want 2)" [ $rc -eq 2 ]
check "  naming the setting and what is allowed" \
  grep -q 'norm_model.cfg:[0-9]*: norm = "layernorm" runs on the op-by-op path.*(allowed with fusion "fused": rmsnorm)' "$scratch/refused.err"
cat "$scratch/model.err" "$scratch/fused.err" "$scratch/refused.err"
finish
