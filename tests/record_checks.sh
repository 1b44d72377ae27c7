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
# three tests as automake leaves them: passed with a count, skipped, and
# failed without one (a count line earlier in its log is not its last)
printf ':test-result: PASS\n:global-test-result: PASS\n:recheck: no\n' > "$w/tests/a.trs"
printf 'ok   one\n3 passed, 1 failed\nok   two\n12 passed, 0 failed\nPASS tests/a (exit status: 0)\n' > "$w/tests/a.log"
printf ':test-result: SKIP\n:global-test-result: SKIP\n' > "$w/tests/b.sh.trs"
printf 'skip: no GPU\n' > "$w/tests/b.sh.log"
printf ':test-result: FAIL\n:global-test-result: FAIL\n' > "$w/tests/c.trs"
printf 'Segmentation fault\n' > "$w/tests/c.log"
out="$scratch/checks.csv"

(cd "$w" && sh "$rec" --out "$out" --runner "$RUNNER" tests/a tests/b.sh tests/c tests/gone) \
  > "$scratch/log" 2>&1
rc=$?
check "records a run (exit $rc)" [ $rc -eq 0 ]
check "says so: 3 tests recorded" grep -q '3 tests recorded' "$scratch/log"
check "a test without a .trs is left out with a warning" \
  grep -q 'warning: tests/gone did not run' "$scratch/log"
check "the CSV reads (csvtool check)" "$ct" check "$out"
check "its columns: the test's four, then runner --provenance's header" \
  [ "$(head -n 1 "$out")" = "test,result,checks_passed,checks_failed,$("$RUNNER" --provenance | head -n 1)" ]
check "one row a test that ran, in order, with its result and last count" \
  [ "$("$ct" select "$out" --cols test,result,checks_passed,checks_failed --sep ' ' | tr '\n' '|')" = \
    "tests/a PASS 12 0|tests/b.sh SKIP  |tests/c FAIL  |" ]
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
  [ "$("$ct" count "$out") $(grep -c '^test,' "$out")" = "4 1" ]

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
