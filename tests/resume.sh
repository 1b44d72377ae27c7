#!/bin/sh
# Resume: a runner killed mid-sweep (SIGKILL: no chance to clean up) keeps
# every row it wrote; rerunning measures only the missing jobs, never
# duplicates a row; --force reruns; SIGTERM stops with exit 130.
. "${top_srcdir:-.}/tests/lib.sh"

cat > "$scratch/resume.cfg" <<'CFG'
name = "resume";
kind = "selftest";
run = { timeout_s = 30.0; world_size = 1; };
selftest = { action = "ok"; sleep_s = 0.3; };
sweep = { value = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]; };
CFG
out="$scratch/out"
csv="$out/resume.csv"

"$RUNNER" --out-dir "$out" "$scratch/resume.cfg" 2> "$scratch/first.err" &
pid=$!
i=0
while [ "$(rows "$csv")" -lt 3 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $pid
wait $pid 2> /dev/null
n1=$(rows "$csv")
check "killed runner kept its rows ($n1 of 8)" [ "$n1" -ge 3 ] && [ "$n1" -lt 8 ]
cp "$csv" "$scratch/after_kill.csv"
check "no torn row after SIGKILL" [ "$(tail -c 1 "$csv" | od -An -c | tr -d ' ')" = '\n' ]

"$RUNNER" --out-dir "$out" "$scratch/resume.cfg" 2> "$scratch/second.err"
check "resumed run exits 0" [ $? -eq 0 ]
check "resumed run reports what was done" grep -q "8 jobs, $n1 already measured, $((8 - n1)) to run" "$scratch/second.err"
check "all 8 jobs have exactly one row" [ "$(column "$csv" value | sort -u | wc -l)" -eq 8 ] && [ "$(rows "$csv")" -eq 8 ]
check "rows from before the kill kept verbatim" \
  sh -c "head -n $((n1 + 1)) '$csv' | cmp -s - '$scratch/after_kill.csv'"

cp "$csv" "$scratch/complete.csv"
"$RUNNER" --out-dir "$out" "$scratch/resume.cfg" 2> "$scratch/third.err"
check "complete sweep reruns nothing" grep -q "8 jobs, 8 already measured, 0 to run" "$scratch/third.err"
check "complete sweep leaves the CSV alone" cmp -s "$csv" "$scratch/complete.csv"

"$RUNNER" --out-dir "$out" --force --only value=2,5 "$scratch/resume.cfg" 2> "$scratch/force.err"
check "--force reruns the selected jobs" grep -q "2 jobs, 0 already measured, 2 to run" "$scratch/force.err"
check "--force replaces rows, no duplicates" [ "$(rows "$csv")" -eq 8 ] && [ "$(column "$csv" value | sort -u | wc -l)" -eq 8 ]

# A failed row is retried on resume and replaced, not duplicated.
awk -F, 'BEGIN { OFS = "," } NR == 1 { for (i = 1; i <= NF; i++) if ($i == "status") s = i; print; next }
         $0 ~ /(^|,)3,/ && !done { $s = "error"; done = 1 } { print }' "$csv" > "$scratch/edited.csv"
mv "$scratch/edited.csv" "$csv"
"$RUNNER" --out-dir "$out" "$scratch/resume.cfg" 2> "$scratch/retry.err"
check "an error row is retried" grep -q "8 jobs, 7 already measured, 1 to run" "$scratch/retry.err"
check "and replaced" [ "$(rows "$csv")" -eq 8 ] && [ "$(column "$csv" status | sort -u)" = "ok" ]

# SIGTERM: the job in flight is killed, rows kept, exit 130.
rm -f "$csv"
"$RUNNER" --out-dir "$out" "$scratch/resume.cfg" 2> "$scratch/term.err" &
pid=$!
i=0
while [ "$(rows "$csv")" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
kill -TERM $pid
wait $pid
check "SIGTERM exits 130" [ $? -eq 130 ]
check "SIGTERM keeps rows" [ "$(rows "$csv")" -ge 2 ]
check "SIGTERM says how to resume" grep -q "run again to resume" "$scratch/term.err"
finish
