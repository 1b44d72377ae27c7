#!/bin/sh
# Every outcome of a job becomes a row, the sweep goes on, and a timed-out
# job's whole process group is killed. Also: --dry-run runs nothing, and a
# job this machine cannot run is a `skipped` row.
. "${top_srcdir:-.}/tests/lib.sh"
slow
# The sweep has 2-rank jobs: without MPI they would all be skipped rows.
[ -n "${MPIRUN:-}" ] || { echo "built without MPI: multi-rank jobs cannot run"; exit 77; }

cfg="$top_srcdir/experiments/selftest.cfg"
out="$scratch/out"

"$RUNNER" --dry-run --out-dir "$out" "$cfg" > "$scratch/dry" 2> "$scratch/dry.err"
check "dry run exits 0" [ $? -eq 0 ]
check "dry run prints the count first" [ "$(head -n 1 "$scratch/dry")" = "10 jobs (0 already measured in $out/selftest.csv)" ]
check "dry run lists 10 jobs" [ "$(grep -c '^\[[0-9]*/10\]' "$scratch/dry")" -eq 10 ]
check "dry run shows launch commands" grep -q -- "worker --kind selftest --result" "$scratch/dry"
# What the leftover check below looks for in command lines.
check "launch commands carry this run's result paths" grep -qF -- "--result $out/logs/" "$scratch/dry"
check "dry run writes nothing" [ ! -e "$out" ]

"$RUNNER" --out-dir "$out" "$cfg" 2> "$scratch/run.err"
status=$?
check "runner exits 1 when a job failed" [ $status -eq 1 ]
csv="$out/selftest.csv"
check "one row per job" [ "$(rows "$csv")" -eq 10 ]
statuses=$(column "$csv" status | tr '\n' ' ')
check "statuses in sweep order ($statuses)" \
  [ "$statuses" = "ok ok error error error error oom oom timeout timeout " ]
check "fail row keeps the job's message" grep -q "selftest: failing as asked" "$csv"
check "crash row names the signal" grep -q "crash,.*error,.*signal 11" "$csv"
check "oom row keeps the message" grep -q "oom,rank [01]: .*out of memory; as asked" "$csv"
check "timeout row says so" grep -q "timeout,killed after the 15 s limit" "$csv"
check "ok rows carry metrics" [ "$(column "$csv" echoed | head -n 1)" = "1.5" ]
check "rows carry provenance" [ -n "$(column "$csv" host | head -n 1)" ]
check "sidecar JSON written" grep -q '"experiment"' "$out/selftest.json"
check "progress shows i/N" grep -q '^\[10/10\]' "$scratch/run.err"
sleep 1
# This run's processes only (mpirun and the workers carry the result paths
# under the scratch folder): other selftest jobs may run on the machine.
check "no job process left behind" [ "$(procs_with "--result $out/logs/")" -eq 0 ]

# A job needing more GPUs than the machine has: a skipped row, exit 0.
"$RUNNER" --gpus 0 --out-dir "$out" --set backend=nccl --only world_size=2 \
  --only size_mib=1 "$top_srcdir/experiments/allreduce.cfg" 2> "$scratch/skip.err"
check "skipped jobs are not failures" [ $? -eq 0 ]
check "skipped row says why" grep -q "skipped,needs 2 GPUs; this machine has 0\|skipped,needs GPUs but this build has no CUDA" "$out/allreduce.csv"
finish
