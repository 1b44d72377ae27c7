#!/bin/sh
# Resume: a runner killed mid-sweep (SIGKILL: no chance to clean up) keeps
# every row it wrote; rerunning measures only the missing jobs, never
# duplicates a row; --force reruns; rows measured on another machine stop
# a resumed run; SIGTERM stops with exit 130.
. "${top_srcdir:-.}/tests/lib.sh"
slow

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
cp "$out/resume.json" "$scratch/complete.json"
# (--only selecting every job: a sidecar written now would list it)
"$RUNNER" --out-dir "$out" --only value=1,2,3,4,5,6,7,8 "$scratch/resume.cfg" 2> "$scratch/third.err"
check "complete sweep reruns nothing" grep -q "8 jobs, 8 already measured, 0 to run" "$scratch/third.err"
check "complete sweep leaves the CSV alone" cmp -s "$csv" "$scratch/complete.csv"
check "...and NAME.json, which describes the run that wrote the rows" \
  cmp -s "$out/resume.json" "$scratch/complete.json"

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

# A CSV written before a setting existed lacks its column: its rows read as
# having the setting's default, nothing reruns, and the resumed run writes
# the column back in. sleep_s and world_size are left to their defaults
# here, and NAME.json says so.
cat > "$scratch/predates.cfg" <<'CFG'
name = "predates";
kind = "selftest";
run = { timeout_s = 30.0; };
selftest = { action = "ok"; };
sweep = { value = [1.0, 2.0]; };
CFG
pcsv="$out/predates.csv"
"$RUNNER" --launcher "" --out-dir "$out" "$scratch/predates.cfg" 2> "$scratch/predates.err"
check "defaulted settings left out: the run exits 0" [ $? -eq 0 ]
check "defaulted settings are columns with their defaults" \
  [ "$(column "$pcsv" sleep_s | tr '\n' ' ')" = "0 0 " ]
check "NAME.json lists the defaulted settings" \
  grep -qF '"defaulted": ["world_size", "sleep_s"]' "$out/predates.json"
check "NAME.json marks a defaulted value" \
  grep -qF '"sleep_s": {"group": "selftest", "type": "float", "unit": "s", "file": "'"$scratch"'/predates.cfg", "line": 2, "value": 0, "default": 0, "defaulted": true}' "$out/predates.json"
cp "$pcsv" "$scratch/predates_full.csv"
awk -F, 'BEGIN { OFS = "," } NR == 1 { for (i = 1; i <= NF; i++) if ($i == "sleep_s") s = i }
         { out = ""; for (i = 1; i <= NF; i++) if (i != s) out = out (out == "" ? "" : ",") $i; print out }' \
  "$scratch/predates_full.csv" > "$pcsv"
check "the old CSV lacks the sleep_s column" sh -c "! head -n 1 '$pcsv' | grep -q sleep_s"
"$RUNNER" --dry-run --launcher "" --out-dir "$out" "$scratch/predates.cfg" > "$scratch/predates.dry" 2>&1
check "a dry run over the old CSV finds both jobs measured" \
  grep -q "^2 jobs (2 already measured" "$scratch/predates.dry"
"$RUNNER" --launcher "" --out-dir "$out" "$scratch/predates.cfg" 2> "$scratch/predates2.err"
check "resuming the old CSV exits 0" [ $? -eq 0 ]
check "and reruns nothing" grep -q "2 jobs, 2 already measured, 0 to run" "$scratch/predates2.err"
check "and writes the column back with the default" cmp -s "$pcsv" "$scratch/predates_full.csv"
# A CSV written before a metric existed: its rows did not measure it.
awk -F, 'BEGIN { OFS = "," } NR == 1 { for (i = 1; i <= NF; i++) if ($i == "echoed") s = i }
         { out = ""; for (i = 1; i <= NF; i++) if (i != s) out = out (out == "" ? "" : ",") $i; print out }' \
  "$scratch/predates_full.csv" > "$pcsv"
"$RUNNER" --launcher "" --out-dir "$out" "$scratch/predates.cfg" 2> "$scratch/predates3.err"
check "a CSV without a metric's column resumes, rerunning nothing" \
  grep -q "2 jobs, 2 already measured, 0 to run" "$scratch/predates3.err"
check "and gets the column back, empty in the old rows" \
  [ "$(column "$pcsv" echoed | sort -u)" = "" ] && head -n 1 "$pcsv" | grep -q ',echoed,'
# A column this kind never wrote (renamed by hand, or another kind's file):
# the run stops (exit 2) before it touches the file, naming the first
# column where the two part.
sed '1s/,echoed,/,echo_old,/' "$scratch/predates_full.csv" > "$pcsv"
cp "$pcsv" "$scratch/renamed.csv"
n=$(head -n 1 "$pcsv" | tr ',' '\n' | grep -n '^echo_old$' | cut -d: -f1)
"$RUNNER" --launcher "" --out-dir "$out" "$scratch/predates.cfg" 2> "$scratch/renamed.err"
check "a CSV with a column the kind does not write stops the run: exit 2" [ $? -eq 2 ]
check "and names that column, what the experiment writes there and the way out" \
  grep -qF "$pcsv holds other columns than experiment predates writes (column $n is \"echo_old\", where this experiment writes \"echoed\"); move it away or choose another --out-dir" "$scratch/renamed.err"
check "the file is untouched" cmp -s "$pcsv" "$scratch/renamed.csv"
cp "$scratch/predates_full.csv" "$pcsv"

# Rows from another machine: resuming here would mix two machines in one
# table, so the run stops (exit 2) before the file is touched, even one a
# resume would rewrite (a failed row, value 4, dropped before it runs
# again); --force measures everything here.
rm -f "$csv"
"$RUNNER" --out-dir "$out" --only value=1,2,3 "$scratch/resume.cfg" 2> /dev/null
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "cpu_model") c = i
                     if ($i == "value") v = i; if ($i == "status") s = i }
                   print; next }
         { $c = "Other CPU 9000"; print; last = $0 }
         END { $0 = last; $v = 4; $s = "failed"; print }' OFS=, "$csv" > "$scratch/other.csv"
cp "$scratch/other.csv" "$csv"
"$RUNNER" --out-dir "$out" "$scratch/resume.cfg" 2> "$scratch/other.err"
check "rows from another CPU stop the run: exit 2" [ $? -eq 2 ]
check "and say whose rows, this machine's CPU and the way out" \
  grep -q '3 ok rows of .* were measured on the CPU "Other CPU 9000", and this machine.s CPU is .*--force' "$scratch/other.err"
check "the file is untouched" cmp -s "$csv" "$scratch/other.csv"
"$RUNNER" --out-dir "$out" --dry-run "$scratch/resume.cfg" > /dev/null 2> "$scratch/other_dry.err"
check "a dry run says a real run would stop" grep -q "a real run would stop" "$scratch/other_dry.err"
"$RUNNER" --out-dir "$out" --force "$scratch/resume.cfg" 2> /dev/null
check "--force measures all 8 here" [ "$(column "$csv" cpu_model | sort -u | grep -c 'Other CPU')" -eq 0 ] && [ "$(rows "$csv")" -eq 8 ]

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
