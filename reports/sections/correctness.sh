#!/bin/sh
# Appendix: what each test of the problem list establishes, quoted from
# the test's own header comment (reports/problems.def's TESTS column, in
# order of first use), so the claims and their tolerances are the test
# suite's, never retyped here. Environment as for every section, plus
# PROBLEMS (the list) and TESTS_DIR.
set -eu
. "$REPORT_LIB"

[ "$PROBLEM" = correctness ] || { echo "correctness.sh: no problem \"$PROBLEM\"" >&2; exit 1; }
# the recorded runs (reports/record_checks.sh, make check-record): a row
# a test a run, the file in the order written
rec="$DATA/checks.csv"
[ -f "$rec" ] || rec=""
# day COMMIT DIRTY UTC: "1a2b3c4, 2026-12-03" ("1a2b3c4 plus uncommitted
# changes, ..." where the tree was dirty)
day() { printf '%.7s%s, %s' "$1" "$([ "$2" != 1 ] || printf ' plus uncommitted changes')" "${3%%T*}"; }
# result_word RESULT: automake's result in words
result_word() {
  case $1 in
    PASS) echo passed ;; FAIL) echo failed ;; ERROR) echo "stopped with a hard error" ;;
    SKIP) echo skipped ;; XFAIL) echo "failed as expected" ;; XPASS) echo "passed unexpectedly" ;;
    *) echo "$1" ;;
  esac
}
echo "Every claim of correctness in the sections above rests on these tests,"
echo "run by \`make check\` (the GPU ones skip without a GPU); \`make"
echo "check-record\` also appends each test's outcome, with the machine and"
echo "commit, to checks.csv, and each test below gives its last recorded run"
echo "(skipped runs left out)."
if [ -n "$rec" ]; then
  # the last run: the rows of the utc written last
  last=$(tool select "$rec" --cols utc --sep ' ' | tail -n 1)
  n=$(tool count "$rec" --where utc="$last")
  counts=$(tool distinct "$rec" --cols result --where utc="$last" | while read -r r; do
      echo "$(tool count "$rec" --where utc="$last" --where result="$r") $(result_word "$r")"
    done | and_list)
  IFS='|' read -r m c g <<EOF
$(tool select "$rec" --where utc="$last" --latest utc --cols machine,git_commit,git_dirty --sep '|')
EOF
  echo "The last recorded run ($m, $(day "$c" "$g" "$last")): $n test$([ "$n" -eq 1 ] || printf s), $counts."
else
  echo "No run is recorded yet (there is no checks.csv): \`make check-record\` on a GPU machine records one."
  todo "a recorded run of the tests on a GPU machine (\`make check-record\`)"
fi
echo "Each test is described by its own source:"
echo
awk '!/^[ \t]*(#|$)/ && $5 != "-" { n = split($5, t, ","); for (i = 1; i <= n; i++) if (!seen[t[i]]++) print t[i], $2 }' "$PROBLEMS" |
while read -r t first; do
  says=$(test_says "$t") || { echo "correctness.sh: no test $t in $TESTS_DIR" >&2; exit 1; }
  users=$(awk -v t="$t" '!/^[ \t]*(#|$)/ { n = split($5, x, ","); for (i = 1; i <= n; i++) if (x[i] == t) printf "%s%s", (k++ ? ", " : ""), $2 }' "$PROBLEMS")
  run=""
  if [ -n "$rec" ]; then
    IFS='|' read -r r p f m c g u <<EOF
$(tool select "$rec" --where test="tests/$t" --where result!=SKIP --latest test \
    --cols result,checks_passed,checks_failed,machine,git_commit,git_dirty,utc --sep '|')
EOF
    case $r in
      "") if [ "$(tool count "$rec" --where test="tests/$t")" -eq 0 ]; then run="; no recorded run"
          else run="; skipped in every recorded run"; fi ;;
      *) w=$(result_word "$r")
         [ "$r" = PASS ] || w="**$w**"
         [ -z "$p" ] || w="$w ($p of $((p + f)) checks)"
         run="; last run: $w, $m, $(day "$c" "$g" "$u")" ;;
    esac
  fi
  echo "- \`tests/$t\` ($users$run): $says"
done
echo
