#!/bin/sh
# README.md's results table is the writeup's summary (sections/summary.sh),
# copied between README's two marker lines by `make report`, so the two
# cannot disagree; --check only says whether README's copy is current
# (tests/report_guard.sh).
#
#   readme_summary.sh WRITEUP README [--check]
#
# The copy is what stands between the writeup's "## Summary" and
# "## Contents" headings, blank lines at its ends trimmed.
set -eu
me=readme_summary.sh
[ $# -ge 2 ] || { echo "usage: $me WRITEUP README [--check]" >&2; exit 2; }
writeup=$1 readme=$2 mode=${3:-}
begin='<!-- results: written by make report from reports/sections/summary.sh; edit that, not this -->'
end='<!-- results end -->'
[ -f "$writeup" ] || { echo "$me: no $writeup (make report writes it)" >&2; exit 1; }
[ -f "$readme" ] || { echo "$me: no $readme" >&2; exit 1; }
for m in "$begin" "$end"; do
  n=$(grep -cxF -e "$m" "$readme") || true
  [ "$n" -eq 1 ] || { echo "$me: $readme: the line \"$m\" appears $n times (allowed: once)" >&2; exit 1; }
done
# Scratch outside the source tree (read-only under distcheck).
tmp=$(mktemp "${TMPDIR:-/tmp}/readme_summary.XXXXXX")
trap 'rm -f "$tmp" "$tmp.s"' EXIT
awk '$0 == "## Summary" { on = 1; next } on && $0 == "## Contents" { exit } on' "$writeup" |
  awk 'NF { for (; blank > 0; blank--) print ""; started = 1; print; next } started { blank++ }' > "$tmp.s"
[ -s "$tmp.s" ] || { echo "$me: $writeup has no summary between \"## Summary\" and \"## Contents\"" >&2; exit 1; }
awk -v b="$begin" -v e="$end" -v s="$tmp.s" '
  $0 == b { print; while ((getline l < s) > 0) print l; skip = 1; next }
  $0 == e { skip = 0 }
  !skip' "$readme" > "$tmp"
if [ "$mode" = --check ]; then
  cmp -s "$tmp" "$readme" && exit 0
  echo "$me: $readme's results are not the writeup's summary; make report copies them:" >&2
  diff "$readme" "$tmp" | head -n 20 >&2
  exit 1
fi
[ -z "$mode" ] || { echo "usage: $me WRITEUP README [--check]" >&2; exit 2; }
cmp -s "$tmp" "$readme" || cat "$tmp" > "$readme"
