#!/bin/sh
# The collective kind through the runner on CPU ranks over MPI: every
# operation on 1 to 4 ranks gives an ok row (each job checks its output
# exactly after timing); sizes the ranks do not divide are rounded down
# for the block-wise operations; busbw is nccl-tests' factor times algbw;
# the GPU sweep (experiments/collectives.cfg) is a valid experiment.
. "${top_srcdir:-.}/tests/lib.sh"
need_mpi

out="$scratch/data"
"$RUNNER" --out-dir "$out" "$top_srcdir/experiments/smoke_collectives.cfg" 2> "$scratch/run.err"
status=$?
cat "$scratch/run.err"
check "smoke_collectives exits 0" [ $status -eq 0 ]
csv="$out/smoke_collectives.csv"
check "20 rows" [ "$(rows "$csv")" -eq 20 ]
check "all ok" [ "$(column "$csv" status | sort -u)" = "ok" ]
# 0.25 MiB = 65536 fp32 elements: on 3 ranks the block-wise operations
# move 3 x 21845 of them, the others all.
check "bytes: rounded down to whole blocks only where blocks are asked" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "op") o = i; if ($i == "world_size") w = i; if ($i == "bytes") b = i }; next }
           { want = ($w == 3 && $o != "all_reduce" && $o != "broadcast") ? 262140 : 262144
             if ($b != want) { print "bytes", $o, $w, $b; bad = 1 } } END { exit bad }' "$csv"
check "busbw = algbw x 2(n-1)/n, (n-1)/n or 1 (0 on one rank)" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "op") o = i; if ($i == "world_size") w = i; if ($i == "algbw_gbps") a = i; if ($i == "busbw_gbps") u = i }; next }
           { n = $w; f = $o == "all_reduce" ? 2 * (n - 1) / n : $o == "broadcast" ? 1 : (n - 1) / n
             if (n == 1) f = 0
             if (!($a > 0) || ($u - $a * f) ^ 2 > (1e-5 * $a) ^ 2) { print "busbw", $o, n, $a, $u; bad = 1 } } END { exit bad }' "$csv"
"$RUNNER" --dry-run "$top_srcdir/experiments/collectives.cfg" > "$scratch/dry.out" 2> "$scratch/dry.err"
check "experiments/collectives.cfg: a valid sweep of 80 jobs" \
  grep -q "80 jobs" "$scratch/dry.err" "$scratch/dry.out"
finish
