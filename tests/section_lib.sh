#!/bin/sh
# reports/section_lib.sh's memo and memo_get, the sections' lookups in the shell,
# against what they stand for, `csvtool value --sort -utc --agg first
# --default "" --where status=ok --where KEY=V... --col C`, for every key
# combination and column of a CSV where jobs were measured again (the
# newest ok row wins, whatever the file order; without the filter, the
# file's first row of the key), failed rows come later, cells are empty,
# keys hold spaces, glob characters, quotes, prefixes of one another and
# characters memo's names cannot hold (csvtool answers those), and values
# hold spaces, quotes, $, backslashes and backquotes; an extra --where
# narrows both alike; a column not memoised is asked of csvtool, one the
# CSV lacks fails as csvtool does; memo_fmt formats as value --fmt does.
# gpu_kind finds a device name's kind; test_says quotes a test's header
# and fails for a test that does not exist, and mkreport.sh refuses a
# problem list naming one; calc and the awk cells' pct format numbers as
# printf does, a zero without a sign; factor gives a ratio near 1 a third
# decimal; dirty_rows names the runner's command for just the rows to
# measure again.
. "${top_srcdir:-.}/tests/lib.sh"
CSVTOOL="$top_builddir/csvtool"
[ -x "$CSVTOOL" ] || { echo "missing $CSVTOOL"; exit 99; }
REPORT_LIB="$top_srcdir/reports/section_lib.sh"
. "$REPORT_LIB"
f="$scratch/r.csv"
cat > "$f" <<'CSV'
size,context,gpu,ms,note,status,utc
small,512,A,10.5,first run,ok,2026-01-01T00:00:00Z
small,512,A,9.25,rerun,ok,2026-01-03T00:00:00Z
small,512,A,1.0,oom,failed,2026-01-04T00:00:00Z
small,5120,A,,no time,ok,2026-01-02T00:00:00Z
small,51,B,3e-05,tiny,ok,2026-01-02T00:00:00Z
2.7B,512,B,100,,ok,2026-01-05T00:00:00Z
2.7B,512,A,120,older,ok,2026-01-01T00:00:00Z
x*y,1 2,A,7,glob key,ok,2026-01-01T00:00:00Z
q(1),512,A,11,asked,ok,2026-01-01T00:00:00Z
o'k,512,B,12,quoted,ok,2026-01-01T00:00:00Z
medium,1024,A,8,"it's $HOME \\n `x`",ok,2026-01-01T00:00:00Z
CSV
memo M "$f" size,context ms,note,gpu --where status=ok --sort -utc
memo MA "$f" size,context ms --where status=ok --sort -utc --where gpu=A
memo MF "$f" size,context ms
bad=''
for s in small 2.7B 'x*y' medium 'q(1)' "o'k"; do
  for c in 512 5120 51 '1 2' 1024; do
    for col in ms note gpu; do
      want=$(tool value "$f" --sort -utc --agg first --default "" --where status=ok \
               --where size="$s" --where context="$c" --col "$col")
      memo_get M "$s" "$c" "$col"
      [ "$MV" = "$want" ] || bad="$bad [$s/$c/$col: '$MV' not '$want']"
    done
    want=$(tool value "$f" --sort -utc --agg first --default "" --where status=ok \
             --where gpu=A --where size="$s" --where context="$c" --col ms)
    memo_get MA "$s" "$c" ms
    [ "$MV" = "$want" ] || bad="$bad [gpu A $s/$c: '$MV' not '$want']"
    want=$(tool value "$f" --agg first --default "" --where size="$s" --where context="$c" --col ms)
    memo_get MF "$s" "$c" ms
    [ "$MV" = "$want" ] || bad="$bad [file order $s/$c: '$MV' not '$want']"
  done
done
check "memo_get gives csvtool value's answer for every key and column${bad:+:$bad}" [ -z "$bad" ]
memo_get M small 512 ms
check "the newest ok row wins: small 512 is 9.25 (got $MV)" [ "$MV" = 9.25 ]
memo MS "$f" size,context ms,nope --where status=ok --sort -utc
memo_get MS small 512 note
check "a column the memo was not asked for is asked of csvtool (got $MV)" [ "$MV" = rerun ]
( memo_get MS small 512 nope ) > "$scratch/nope.out" 2>&1 && nope=0 || nope=$?
check "a column the CSV lacks fails as csvtool value does (exit $nope)" \
  sh -c "[ $nope -ne 0 ] && grep -q nope '$scratch/nope.out'"
fmts=''
for v in 9.25 3e-05 100 '' 'first run' -0.5; do
  fmts="$fmts[$(memo_fmt %.2f "$v")|$(printf '%s\n' "x,$v" | sed '1i v,w' | tool value /dev/stdin --col w --fmt %.2f 2> /dev/null)]"
done
check "memo_fmt formats as value --fmt: $fmts" \
  [ "$fmts" = "[9.25|9.25][0.00|0.00][100.00|100.00][|][first run|first run][-0.50|-0.50]" ]
kinds=''
for n in "NVIDIA H100 80GB HBM3" "2 x NVIDIA H100 (NVLink)" "NVIDIA A100-SXM4-80GB" "NVIDIA	L40S" \
         "NVIDIA GeForce RTX 4090" "* GH200 x" ""; do
  kinds="$kinds[$(gpu_kind "$n")]"
done
check "gpu_kind: the kind in a device name ($kinds), no globbing" \
  [ "$kinds" = "[H100][H100][A100][L40S][][GH200][]" ]
TESTS_DIR="$top_srcdir/tests"
says=$(test_says section_lib.sh)
case $says in "reports/section_lib.sh's memo and memo_get, the sections' lookups in the shell, against"*) q=1 ;; *) q=0 ;; esac
check "test_says quotes this test's header (\"$(printf '%s' "$says" | cut -c1-50)...\")" [ $q -eq 1 ]
test_says no_such_test > /dev/null && gone=0 || gone=$?
check "test_says fails for a test that does not exist (exit $gone)" [ "$gone" -ne 0 ]
printf '%s\n' "1.1.3 mixed_precision_accumulation - mixed_precision_accumulation no_such_test" > "$scratch/problems.def"
sh "$top_srcdir/reports/mkreport.sh" --data "$top_srcdir/reports/data" --out "$scratch" \
  --csvtool "$CSVTOOL" --gnuplot "" --problems "$scratch/problems.def" > "$scratch/mk.out" 2>&1 && mk=0 || mk=$?
check "mkreport.sh refuses a problem list naming a test that does not exist (exit $mk)" \
  sh -c "[ $mk -ne 0 ] && grep -q 'no test no_such_test' '$scratch/mk.out' && [ ! -f '$scratch/writeup.md' ]"

# dirty_rows: its todo names the command that re-measures the rows from a
# dirty tree: --force, and --only for each swept setting whose dirty values
# are fewer than the sweep's (failed rows do not count); none for a setting
# with a dirty value the sweep no longer lists
mkdir "$scratch/exp"
cat > "$scratch/exp/d.cfg" <<'CFG'
name = "d";
kind = "allreduce";
run = { timeout_s = 30.0; warmup = 1; iters = 2; };
sweep = { backend = ["mpi", "nccl"]; world_size = [2, 4, 6]; size_mib = [1, 10]; };
CFG
printf '%s\n' backend,world_size,size_mib,status,git_dirty mpi,2,1,ok,0 nccl,6,10,ok,1 \
  nccl,4,1,ok,1 nccl,2,1,failed,1 > "$scratch/d.csv"
dirty_todo() {
  : > "$scratch/todo"
  REPORT_RUNNER=$RUNNER REPORT_EXPERIMENTS="$scratch/exp" REPORT_TODO="$scratch/todo" \
    PROBLEM=p dirty_rows "$scratch/d.csv" > /dev/null
  cut -f2 "$scratch/todo"
}
t=$(dirty_todo)
check "dirty_rows: --only the dirty rows' settings ($t)" \
  [ "$t" = "2 rows of d.csv again from a commit (\`./runner --force --only backend=nccl --only world_size=4,6 experiments/d.cfg\`)" ]
printf '%s\n' nccl,8,1,ok,1 >> "$scratch/d.csv"
t=$(dirty_todo)
check "dirty_rows: no --only for a dirty value the sweep lacks ($t)" \
  [ "$t" = "3 rows of d.csv again from a commit (\`./runner --force --only backend=nccl experiments/d.cfg\`)" ]

# calc: the shell's printf where it is the same conversion, awk's for the
# rest; a result that rounds to zero reads as zero, never "-0.0" or "+0.0%"
got=''
for c in '%.2f|3.14159|3.14' '%.1f|1 / 3|0.3' '%.1f|-1.26|-1.3' '%+.1f|2.5|+2.5' \
    '%+.1f|-0.04|0.0' '%.1f|-0.04|0.0' '%+.1f%%|0.01|0.0%' '%+.2f|-0.001 * 2|0.00' \
    '%d|7 / 2|3' '%.0f|12|12'; do
  f=${c%%|*} r=${c#*|} e=${r#*|} r=${r%|*}
  v=$(calc "$f" "$r")
  [ "$v" = "$e" ] || got="$got calc $f $r = $v (want $e);"
done
p=$(awk "$AWK_CELLS"'BEGIN { printf "%s %s %s", pct(100.01, 100), pct(99.99, 100), pct(90, 100) }')
[ "$p" = "0.0% 0.0% -10.0%" ] || got="$got pct: $p (want 0.0% 0.0% -10.0%);"
check "calc and pct format as printf does, zero unsigned${got:+:$got}" [ -z "$got" ]

# factor (and FACTOR_AWK, its copy for awk programs): two decimals, three
# where two would read 1.00, so a loss or a win never prints as a tie
got=''
for c in '3 / 2|1.50' '1.0049|1.005' '0.9951|0.995' '0.994|0.99' '1.006|1.01' '1|1.000' '12.345|12.35'; do
  r=${c%|*} e=${c#*|}
  v=$(factor "$r") a=$(awk "$FACTOR_AWK"" BEGIN { printf \"%s\", factor($r) }")
  [ "$v" = "$e" ] && [ "$a" = "$e" ] || got="$got factor $r = $v, awk $a (want $e);"
done
check "factor: 1.00 gets a third decimal, in the shell and in awk${got:+:$got}" [ -z "$got" ]

# span_to: a range of one value reads as the value ("51 times", not "51 to
# 51 times")
got="$(span_to 51 51)|$(span_to 42 58)|$(span_to 2% 7.5%)"
check "span_to: one value alone, two as a range ($got)" [ "$got" = "51|42 to 58|2% to 7.5%" ]
finish
