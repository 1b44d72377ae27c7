#!/bin/sh
# As root (a container's user), the README's commands work as written: the
# runner lets Open MPI's mpirun run as root itself and says so once. And a
# job that fails without a result gets the line of its log that names the
# cause (the worker's own error, mpirun's reason), not the log's last line.
. "${top_srcdir:-.}/tests/lib.sh"
[ -n "${MPIRUN:-}" ] || { echo "built without MPI: nothing launches under mpirun"; exit 77; }

cfg="$scratch/root.cfg"
cat > "$cfg" <<'CFG'
name = "root";
kind = "selftest";
run = { timeout_s = 60.0; };
selftest = { sleep_s = 0.0; value = 2.5; };
sweep = { action = ["ok", "crash"]; world_size = [2]; };
CFG
out="$scratch/out"

if [ "$(id -u)" -eq 0 ]; then
  # What a root user's shell has: none of Open MPI's root variables.
  env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
    "$RUNNER" --out-dir "$out" "$cfg" 2> "$scratch/run.err"
  check "runner exits 1 (one job crashes as asked)" [ $? -eq 1 ]
  check "the ok job ran as root" [ "$(column "$out/root.csv" status | head -n 1)" = ok ]
  check "the runner says once that it lets mpirun run as root" \
    [ "$(grep -c "running as root: jobs get OMPI_ALLOW_RUN_AS_ROOT=1" "$scratch/run.err")" -eq 1 ]
  check "a crash row quotes mpirun's reason" \
    grep -q "crash,.*,error,exit status [0-9]* without a result: mpirun noticed that process rank [01] .*signal 11" "$out/root.csv"
else
  echo "not root: the root case needs root"
fi

# The worker's own error comes first in the log; Open MPI's noise after it.
rm -rf "$out"
"$RUNNER" --launcher "" --out-dir "$out" --only action=ok "$cfg" 2> /dev/null
check "world size mismatch is an error row" [ "$(column "$out/root.csv" status)" = error ]
check "the row quotes the worker's error" \
  grep -q ",error,exit status 2 without a result: worker: world_size=2 but the launcher started 1," "$out/root.csv"
finish
