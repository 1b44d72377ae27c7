#!/bin/sh
# One runner per output at a time, and nothing outlives a runner: a second
# runner on the same output is refused (naming the first) or waits with
# --wait; runners with disjoint --only filters take turns and each row
# carries its own job's metrics; a runner killed with SIGKILL takes its
# job's processes with it, and the next run removes what an earlier run
# left (result files, processes of a launcher that ignored the signal).
#
# Processes are found by this test's own output folder (it is in every
# worker's --result argument, mpirun's command and the wrapper's name),
# never by name machine-wide (lib.sh's procs_with).
. "${top_srcdir:-.}/tests/lib.sh"

out="$scratch/out"
csv="$out/conc.csv"
cfg="$scratch/conc.cfg"
cat > "$cfg" <<'CFG'
name = "conc";
kind = "selftest";
run = { timeout_s = 60.0; world_size = 1; };
selftest = { action = "ok"; sleep_s = 0.4; };
sweep = { value = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; };
CFG
# The launcher: the worker directly (world size 1 needs no MPI).
L=""
running() { [ "$(procs_with "$1")" -gt 0 ]; }
none_running() { [ "$(procs_with "$1")" -eq 0 ]; }
wait_for() { # wait_for COMMAND...: up to 30 s
  i=0
  while ! "$@" && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
}

# A second runner on a busy output is refused at once, naming the first.
"$RUNNER" --launcher "$L" --out-dir "$out" "$cfg" 2> "$scratch/a.err" &
a=$!
wait_for test -s "$out/conc.lock"
"$RUNNER" --launcher "$L" --out-dir "$out" "$cfg" 2> "$scratch/b.err"
check "second runner on one output exits 2" [ $? -eq 2 ]
check "and names the first's pid" grep -q "another runner is writing $csv (pid $a on host " "$scratch/b.err"
# --wait: blocks until the first is done, then finds everything measured.
"$RUNNER" --wait --launcher "$L" --out-dir "$out" "$cfg" 2> "$scratch/c.err"
check "--wait exits 0" [ $? -eq 0 ]
check "--wait said whom it waits for" grep -q "waiting for the runner writing this output (pid $a " "$scratch/c.err"
check "--wait found every job measured" grep -q "6 jobs, 6 already measured, 0 to run" "$scratch/c.err"
wait $a
check "first runner exits 0" [ $? -eq 0 ]
check "6 rows for 6 jobs" [ "$(rows "$csv")" -eq 6 ]

# Disjoint --only filters, started together, with --wait: each row's
# metric is its own job's value (no result file shared between runs).
rm -rf "$out"
"$RUNNER" --wait --launcher "$L" --out-dir "$out" --only value=1,2,3 "$cfg" 2> /dev/null &
a=$!
"$RUNNER" --wait --launcher "$L" --out-dir "$out" --only value=4,5,6 "$cfg" 2> /dev/null &
b=$!
wait $a; ra=$?
wait $b; rb=$?
check "both filtered runners exit 0" [ $ra -eq 0 ] && [ $rb -eq 0 ]
check "6 rows, one per job" [ "$(rows "$csv")" -eq 6 ] && [ "$(column "$csv" value | sort -u | wc -l)" -eq 6 ]
check "every row carries its own job's metric" \
  [ -z "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "value") v = i; if ($i == "echoed") e = i }; next }
                   $v != $e { print }' "$csv")" ]

# SIGKILL of the runner: the job's processes go with it (2 MPI ranks).
if [ -n "${MPIRUN:-}" ]; then
  rm -rf "$out"
  "$RUNNER" --out-dir "$out" --set world_size=2 --set sleep_s=30 --only value=1 "$cfg" 2> /dev/null &
  a=$!
  # mpirun's command holds the worker's arguments too: it and two ranks.
  ranks() { [ "$(procs_with "--result $out/")" -ge 3 ]; }
  wait_for ranks
  check "two ranks running" ranks
  kill -9 $a
  wait $a 2> /dev/null
  i=0
  while running "$out/" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
  check "no job process outlives a runner killed by SIGKILL" none_running "$out/"
fi

# A launcher that ignores SIGTERM outlives the runner with its job; the
# next run on this output kills what carries the output's tag and removes
# the earlier run's result files.
rm -rf "$out"
mkdir -p "$out/logs"
wrapper="$out/stubborn-launcher"
printf '#!/bin/sh\ntrap "" TERM\n"$@"\n' > "$wrapper"
chmod +x "$wrapper"
"$RUNNER" --launcher "$wrapper" --out-dir "$out" --set sleep_s=30 --only value=1 "$cfg" 2> /dev/null &
a=$!
wait_for running "--result $out/"
kill -9 $a
wait $a 2> /dev/null
sleep 0.5
check "the stubborn launcher's job survived the runner" running "--result $out/"
: > "$out/logs/conc.job1.1.result"
: > "$out/logs/conc.job1.1.result.rank0"
"$RUNNER" --launcher "$L" --out-dir "$out" --set sleep_s=0 --only value=2 "$cfg" 2> "$scratch/clean.err"
check "rerun exits 0" [ $? -eq 0 ]
check "rerun says it killed the leftovers" grep -q "runner: killed [0-9]* process.* that an earlier run of conc left running" "$scratch/clean.err"
sleep 0.2
check "no leftover process remains" none_running "$out/"
check "stale result files removed" [ -z "$(ls "$out/logs" | grep '\.result')" ]
finish
