#!/bin/sh
# Deciding what is left scales with rows + jobs: a dry run of a 200,000-job
# sweep against a CSV of 100,000 rows finishes (it took hours when every row
# was compared with every job). The limit below only stops a hang: the work
# takes seconds.
. "${top_srcdir:-.}/tests/lib.sh"

cfg="$scratch/scale.cfg"
out="$scratch/out"
{
  echo 'name = "scale"; kind = "selftest";'
  echo 'run = { timeout_s = 60.0; world_size = 1; };'
  echo 'selftest = { action = "ok"; };'
  printf 'sweep = { sleep_s = ['
  awk 'BEGIN { for (i = 0; i < 400; i++) printf "%s%d.0", i ? ", " : "", i }'
  printf ']; value = ['
  awk 'BEGIN { for (i = 0; i < 500; i++) printf "%s%d.0", i ? ", " : "", i }'
  echo ']; };'
} > "$cfg"
# One real row gives the header and a row to copy.
"$RUNNER" --launcher "" --out-dir "$out" --only sleep_s=0 --only value=0 "$cfg" 2> /dev/null
check "one job ran" [ "$(rows "$out/scale.csv")" -eq 1 ]
# Rows for the jobs with sleep_s < 200: half the sweep.
awk -F, 'BEGIN { OFS = "," }
  NR == 1 { print; for (i = 1; i <= NF; i++) { if ($i == "sleep_s") s = i; if ($i == "value") v = i }; next }
  { for (a = 0; a < 200; a++) for (b = 0; b < 500; b++) { $s = a; $v = b; print } }' \
  "$out/scale.csv" > "$scratch/big.csv"
mv "$scratch/big.csv" "$out/scale.csv"
check "100000 rows" [ "$(rows "$out/scale.csv")" -eq 100000 ]
timeout 300 "$RUNNER" --dry-run --out-dir "$out" "$cfg" > "$scratch/dry" 2> "$scratch/dry.err"
check "dry run finishes" [ $? -eq 0 ]
check "and finds the measured half" [ "$(head -n 1 "$scratch/dry")" = "200000 jobs (100000 already measured in $out/scale.csv)" ]
check "and marks them done" [ "$(grep -c '  (done)$' "$scratch/dry")" -eq 100000 ]
finish
