#!/bin/sh
# End to end on the CPU: runner + CSV + `make report` on the small MPI
# all-reduce experiment, into a scratch folder.
. "${top_srcdir:-.}/tests/lib.sh"
[ -n "${MPIRUN:-}" ] || { echo "built without MPI: the smoke experiment needs mpirun"; exit 77; }

out="$scratch/data"
"$RUNNER" --out-dir "$out" "$top_srcdir/experiments/smoke_allreduce.cfg" 2> "$scratch/run.err"
status=$?
cat "$scratch/run.err"
check "smoke experiment exits 0" [ $status -eq 0 ]
csv="$out/smoke_allreduce.csv"
check "4 rows" [ "$(rows "$csv")" -eq 4 ]
check "all ok" [ "$(column "$csv" status | sort -u)" = "ok" ]
check "bandwidth measured" [ -n "$(column "$csv" busbw_gbps | tail -n 1)" ]

${MAKE:-make} -s -C "$top_builddir" report REPORT_DATADIR="$out" \
  REPORT_OUT="$scratch/report" REPORT_ONLY=distributed_communication_single_node=smoke_allreduce \
  > "$scratch/report.out" 2>&1
status=$?
cat "$scratch/report.out"
check "make report exits 0" [ $status -eq 0 ]
md="$scratch/report/writeup.md"
check "writeup.md written" [ -s "$md" ]
check "writeup has the all-reduce section" grep -q "distributed_communication_single_node" "$md"
check "writeup has a row per rank count measured" [ "$(grep -c '^| MPI+CPU |' "$md")" -eq 2 ]
check "and no note of jobs without a row" [ "$(grep -c 'no row yet' "$md")" -eq 0 ]
# Rows measured from an uncommitted tree (git_dirty 1; this run's own
# depend on the tree it runs in, so set here): the section counts them.
cp "$csv" "$scratch/whole.csv"
dirty() { # N: row N (1 = the first) dirty, the others clean
  awk -F, -v OFS=, -v n="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "git_dirty") c = i; print; next }
    { $c = (NR - 1 == n) ? 1 : 0; print }' "$scratch/whole.csv" > "$csv"
  ${MAKE:-make} -s -C "$top_builddir" report REPORT_DATADIR="$out" \
    REPORT_OUT="$scratch/report" REPORT_ONLY=distributed_communication_single_node=smoke_allreduce \
    > "$scratch/dirty.out" 2>&1
}
dirty 0
check "rows all from commits: no note of an uncommitted tree" [ "$(grep -c 'uncommitted changes' "$md")" -eq 0 ]
dirty 2
check "rows from an uncommitted tree are counted" grep -q "1 of the 4 rows of smoke_allreduce.csv were measured from a tree with" "$md"
# A sweep cut short (one job's row missing): the section counts it.
head -n 4 "$scratch/whole.csv" > "$csv"
${MAKE:-make} -s -C "$top_builddir" report REPORT_DATADIR="$out" \
  REPORT_OUT="$scratch/report" REPORT_ONLY=distributed_communication_single_node=smoke_allreduce \
  > "$scratch/cut.out" 2>&1
check "a sweep cut short still renders" [ $? -eq 0 ]
check "and says how many of its jobs have no row" grep -q "1 of the sweep's 4 jobs has no row yet" "$md"
cp "$scratch/whole.csv" "$csv"
${MAKE:-make} -s -C "$top_builddir" report REPORT_DATADIR="$out" \
  REPORT_OUT="$scratch/report" REPORT_ONLY=distributed_communication_single_node=smoke_allreduce \
  > "$scratch/report.out" 2>&1
# A malformed CSV fails the report and leaves the last good writeup alone.
cp "$md" "$scratch/good.md"
echo "1,2,3,too,many,fields$(printf ',x%.0s' $(seq 40))" >> "$csv"
${MAKE:-make} -s -C "$top_builddir" report REPORT_DATADIR="$out" \
  REPORT_OUT="$scratch/report" REPORT_ONLY=distributed_communication_single_node=smoke_allreduce \
  > "$scratch/bad.out" 2>&1
check "a malformed CSV fails make report" [ $? -ne 0 ]
check "and says where" grep -q "smoke_allreduce.csv:6:" "$scratch/bad.out"
check "and keeps the last writeup" cmp -s "$md" "$scratch/good.md"
if [ -n "${GNUPLOT:-}" ]; then
  check "figure drawn" grep -q "<svg" "$scratch/report/distributed_communication_single_node.svg"
else
  echo "note: no gnuplot, figure not checked"
fi
finish
