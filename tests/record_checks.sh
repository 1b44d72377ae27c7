#!/bin/sh
# reports/record_checks.sh (make check-record): a row a test that ran, its
# automake result and its own "N passed, M failed" count, ending in the
# provenance `runner --provenance` prints (the columns every runner row
# ends with, this build's commit); a second run appends under the same
# header; a test that did not run is left out with a warning; a CSV of
# other columns, bad arguments or no test that ran write nothing.
. "${top_srcdir:-.}/tests/lib.sh"
ct="$top_builddir/csvtool"
[ -x "$ct" ] || { echo "missing $ct"; exit 99; }
rec="$top_srcdir/reports/record_checks.sh"
w="$scratch/build"
mkdir -p "$w/tests"
# four tests as automake leaves them: passed with a count line a run of
# its program then the script's count of runs (summed: 12 + 30, 1 + 0),
# skipped, failed without one, and passed with its one count
printf ':test-result: PASS\n:global-test-result: PASS\n:recheck: no\n' > "$w/tests/a.trs"
printf 'ok   one\n12 passed, 1 failed\nok   two\n30 passed, 0 failed\n2 passed, 0 failed\nPASS tests/a (exit status: 0)\n' > "$w/tests/a.log"
printf ':test-result: SKIP\n:global-test-result: SKIP\n' > "$w/tests/b.sh.trs"
printf 'skip: no GPU\n' > "$w/tests/b.sh.log"
printf ':test-result: FAIL\n:global-test-result: FAIL\n' > "$w/tests/c.trs"
printf 'Segmentation fault\n' > "$w/tests/c.log"
printf ':test-result: PASS\n:global-test-result: PASS\n' > "$w/tests/d.trs"
printf 'ok   one\n7 passed, 0 failed\n' > "$w/tests/d.log"
out="$scratch/checks.csv"

(cd "$w" && sh "$rec" --out "$out" --runner "$RUNNER" tests/a tests/b.sh tests/c tests/gone tests/d) \
  > "$scratch/log" 2>&1
rc=$?
check "records a run (exit $rc)" [ $rc -eq 0 ]
check "says so: 4 tests recorded" grep -q '4 tests recorded' "$scratch/log"
check "a test without a .trs is left out with a warning" \
  grep -q 'warning: tests/gone did not run' "$scratch/log"
check "the CSV reads (csvtool check)" "$ct" check "$out"
check "its columns: the test's four, then runner --provenance's header" \
  [ "$(head -n 1 "$out")" = "test,result,checks_passed,checks_failed,$("$RUNNER" --provenance | head -n 1)" ]
check "one row a test that ran, in order, with its result and its runs' counts summed" \
  [ "$("$ct" select "$out" --cols test,result,checks_passed,checks_failed --sep ' ' | tr '\n' '|')" = \
    "tests/a PASS 42 1|tests/b.sh SKIP  |tests/c FAIL  |tests/d PASS 7 0|" ]
"$RUNNER" --provenance > "$scratch/prov.csv"
check "runner --provenance's columns are those that end a sweep's rows (allreduce.csv's)" \
  [ "$(head -n 1 "$scratch/prov.csv")" = "$(head -n 1 "$top_srcdir/reports/data/allreduce.csv" | sed 's/.*,utc,/utc,/')" ]
commit=$("$ct" value "$scratch/prov.csv" --col git_commit)
check "the rows carry this build's commit ($commit)" \
  [ "$("$ct" distinct "$out" --cols git_commit)" = "$commit" ]
check "and one provenance: one utc, one machine for the run" \
  [ "$("$ct" distinct "$out" --cols utc,machine | wc -l)" -eq 1 ]

(cd "$w" && sh "$rec" --out "$out" --runner "$RUNNER" tests/a) > "$scratch/log" 2>&1
check "a second run appends under the same header" \
  [ "$("$ct" count "$out") $(grep -c '^test,' "$out")" = "5 1" ]

cp "$out" "$scratch/before.csv"
(cd "$w" && sh "$rec" --out "$out" --runner "$RUNNER" tests/gone) > "$scratch/log" 2>&1
rc=$?
check "no test that ran: exit 1, nothing written" \
  sh -c '[ "$1" -eq 1 ] && cmp -s "$2" "$3"' - $rc "$out" "$scratch/before.csv"
printf 'size,ms\n1,2\n' > "$scratch/other.csv"
(cd "$w" && sh "$rec" --out "$scratch/other.csv" --runner "$RUNNER" tests/a) > "$scratch/log" 2>&1
rc=$?
check "a CSV of other columns: exit 2, untouched, the reason said" \
  sh -c '[ "$1" -eq 2 ] && [ "$(cat "$2")" = "$(printf "size,ms\n1,2")" ] && grep -q "columns are not" "$3"' \
  - $rc "$scratch/other.csv" "$scratch/log"
sh "$rec" --out "$out" tests/a > /dev/null 2>&1
rc=$?
check "no --runner: usage, exit 2" [ $rc -eq 2 ]
finish
