#!/bin/sh
# Appendix: what each test of the problem list establishes, quoted from
# the test's own header comment (reports/problems.def's TESTS column, in
# order of first use), so the claims and their tolerances are the test
# suite's, never retyped here. Environment as for every section, plus
# PROBLEMS (the list) and TESTS_DIR.
set -eu
. "$REPORT_LIB"

[ "$PROBLEM" = correctness ] || { echo "correctness.sh: no problem \"$PROBLEM\"" >&2; exit 1; }
echo "Every claim of correctness in the sections above rests on these tests,"
echo "run by \`make check\` (the GPU ones on a GPU machine; README's Tests"
echo "section says where and when they last ran). Each is described by its"
echo "own source:"
echo
awk '!/^[ \t]*(#|$)/ && $5 != "-" { n = split($5, t, ","); for (i = 1; i <= n; i++) if (!seen[t[i]]++) print t[i], $2 }' "$PROBLEMS" |
while read -r t first; do
  says=$(test_says "$t") || { echo "correctness.sh: no test $t in $TESTS_DIR" >&2; exit 1; }
  users=$(awk -v t="$t" '!/^[ \t]*(#|$)/ { n = split($5, x, ","); for (i = 1; i <= n; i++) if (x[i] == t) printf "%s%s", (k++ ? ", " : ""), $2 }' "$PROBLEMS")
  echo "- \`tests/$t\` ($users): $says"
done
echo
