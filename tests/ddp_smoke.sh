#!/bin/sh
# The ddp kind through the runner: experiments/ddp_bucketed.cfg (tiny LM,
# CPU ranks over MPI, 1 and 2 ranks, 3 bucket sizes) gives 6 ok rows; the
# 2-rank rows communicate (collectives, bytes, an overlap timeline of both
# ranks in the samples), the 1-rank rows do not; both world sizes start
# from the same loss (rank 0's weights, broadcast). With threads = 0 the
# ranks share the node's cores (OpenMP's default divided by the ranks on
# the node, at least one each). Skips without MPI.
. "${top_srcdir:-.}/tests/lib.sh"
need_mpi
out="$scratch/data"
"$RUNNER" --out-dir "$out" "$top_srcdir/experiments/ddp_bucketed.cfg" 2> "$scratch/run.err"
status=$?
cat "$scratch/run.err"
csv="$out/ddp_bucketed.csv"
check "ddp_bucketed exits 0" [ $status -eq 0 ]
check "6 rows" [ "$(rows "$csv")" -eq 6 ]
check "all ok" [ "$(column "$csv" status | sort -u)" = "ok" ]
field() { # field NAME: "world_size:value" per row
  awk -F, -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == name) c = i; if ($i == "world_size") w = i }; next }
                        { print $w ":" $c }' "$csv"
}
check "2-rank rows issue gradient collectives, 1-rank rows none" \
  sh -c "[ \"\$(printf '%s\n' '$(field grad_collectives)' | awk -F: '(\$1 == 2 && \$2 < 1) || (\$1 == 1 && \$2 != 0) { bad = 1 } END { print bad + 0 }')\" = 0 ]"
check "a smaller bucket means more collectives" \
  [ "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "grad_collectives") c = i; if ($i == "world_size") w = i }; next }
               $w == 2 { print $c }' "$csv" | tr '\n' ' ')" != "1 1 1 " ]
check "2-rank rows all-reduce the whole gradient (4 bytes x params)" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "grad_comm_mib") g = i; if ($i == "params") p = i; if ($i == "world_size") w = i }; next }
           $w == 2 { d = $g * 1048576 - 4 * $p; if (d > 1 || d < -1) bad = 1 } END { exit bad }' "$csv"
check "first loss near ln(256) = 5.55 at both world sizes" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "loss_first") c = i; next }
           { if ($c < 5.0 || $c > 6.1) bad = 1 } END { exit bad }' "$csv"
check "timelines of both ranks kept for the 2-rank rows" \
  [ "$(grep -c '"r1_grad_comm_ms": \[[0-9]' "$out/ddp_bucketed.samples.jsonl")" -eq 3 ]
out3="$scratch/threads"
"$RUNNER" --out-dir "$out3" --set threads=0 --only world_size=2 --only bucket_mb=1.0 \
  "$top_srcdir/experiments/ddp_bucketed.cfg" 2> "$scratch/run3.err"
status=$?
cat "$scratch/run3.err"
cores=${OMP_NUM_THREADS:-$(nproc)}
want=$((cores / 2)); [ $want -ge 1 ] || want=1
check "threads = 0 on 2 ranks: $want CPU threads per rank ($cores cores)" \
  sh -c "[ $status -eq 0 ] && grep -q '(CPU threads per rank: ${want})' '$out3/ddp_bucketed.csv'"
finish
