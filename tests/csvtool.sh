#!/bin/sh
# csvtool, the report scripts' only reader of result CSVs: numeric
# --where (1 matches 1.0) and its alternatives (a|b), quoted cells with commas, --latest keeping the
# last row of a job measured again (a skipped job rerun), select's
# filtered copy of a whole file and its --sep rows, --first-of keeping
# each group's first row in --sort order, value's
# aggregates, format and default, table's headers, alignment, order and
# formats, distinct's separator, and its two exit statuses (1 for a data
# problem such as a missing column, 2 for a usage mistake). Under the
# sanitizers (.ci/sanitize) this is what runs csvtool's code: the report's
# renders (tests/report_guard.sh) are skipped there.
. "${top_srcdir:-.}/tests/lib.sh"
ct="$top_builddir/csvtool"
[ -x "$ct" ] || { echo "missing $ct"; exit 99; }
f="$scratch/r.csv"
printf '%s\n' 'size,ms,status,message' '1.0,5,skipped,"needs 1 GPU, this machine has 0"' \
  '2,7,failed,oom' '1,4,ok,' '3,9,skipped,no' > "$f"
check "count with a numeric --where: size=1 matches 1.0" [ "$("$ct" count "$f" --where size=1)" = 2 ]
check "count of rows not ok: 3" [ "$("$ct" count "$f" --where status!=ok)" = 3 ]
check "--where alternatives: status=ok|failed holds for 2 rows, status!=ok|failed for 2" \
  [ "$("$ct" count "$f" --where 'status=ok|failed') $("$ct" count "$f" --where 'status!=ok|failed')" = "2 2" ]
check "--where alternatives compare numbers as numbers: size=3|1 matches 1.0" \
  [ "$("$ct" count "$f" --where 'size=3|1')" = 3 ]
check "--latest size: the skipped 1.0 row, measured again, no longer counts" \
  [ "$("$ct" count "$f" --where status!=ok --latest size)" = 2 ]
check "--latest keeps file order and the later row" \
  [ "$("$ct" select "$f" --cols size,status --latest size | tr '\n' ' ')" = "size,status 2,failed 1,ok 3,skipped " ]
"$ct" select "$f" --where status=skipped > "$scratch/sel.csv"
check "select without --cols: the matching rows as a CSV of the same header" \
  [ "$("$ct" select "$scratch/sel.csv" --cols size,message | tr '\n' '|')" = 'size,message|1.0,"needs 1 GPU, this machine has 0"|3,no|' ]
check "a quoted cell with a comma stays one cell" \
  [ "$("$ct" distinct "$f" --cols message --where status=skipped | head -1)" = "needs 1 GPU, this machine has 0" ]
check "value --agg min over the ok and failed rows" \
  [ "$("$ct" value "$f" --col ms --where status!=skipped --agg min)" = 4 ]
check "value --default when no row matches" \
  [ "$("$ct" value "$f" --col ms --where size=8 --default none)" = none ]
check "table: --head names, numeric columns right-aligned, --sort descending, --fmt" \
  [ "$("$ct" table "$f" --cols size,ms --head "Size,Time" --sort -ms --fmt ms=%.1f | tr '\n' '|')" = \
    '| Size | Time |||--:|--:||| 3 | 9.0 ||| 2 | 7.0 ||| 1.0 | 5.0 ||| 1 | 4.0 ||' ]
check "value --agg max, and --sort -ms --agg first: the slowest row's size" \
  [ "$("$ct" value "$f" --col ms --agg max) $("$ct" value "$f" --col size --sort -ms --agg first)" = "9 3" ]
check "value --fmt, distinct --sep with a numeric --sort" \
  [ "$("$ct" value "$f" --col ms --where status=ok --fmt %.2f) $("$ct" distinct "$f" --cols size,status --sep : --sort size | tr '\n' ' ')" = \
    "4.00 1.0:skipped 1:ok 2:failed 3:skipped " ]
check "--first-of size after --sort -ms: each size's slowest row, numbers equal as numbers (1 and 1.0)" \
  [ "$("$ct" select "$f" --cols size,ms --sort -ms --first-of size | tr '\n' ' ')" = "size,ms 3,9 2,7 1.0,5 " ]
check "--first-of after --where: count of sizes among the rows not skipped" \
  [ "$("$ct" count "$f" --where status!=skipped --first-of size)" = 2 ]
check "select --sep: no header, cells joined, --fmt applied" \
  [ "$("$ct" select "$f" --cols size,ms --where status!=skipped --sep '|' --fmt ms=%.1f | tr '\n' ' ')" = "2|7.0 1|4.0 " ]
"$ct" select "$f" --cols message --where status=skipped --sep , > /dev/null 2> "$scratch/e3"
check "select --sep: a cell holding the separator is an error (exit 1)" \
  sh -c "[ $? -eq 1 ] && grep -q 'holds the separator' '$scratch/e3'"
"$ct" count "$f" --where nosuch=1 > /dev/null 2> "$scratch/e1"
check "a missing column: exit 1, naming it" sh -c "[ $? -eq 1 ] && grep -q 'no column \"nosuch\"' '$scratch/e1'"
"$ct" check "$f" --latest size > /dev/null 2> "$scratch/e2"
check "an option the subcommand does not take: exit 2" [ $? -eq 2 ]
finish
