#!/bin/sh
# Records a test run: one CSV row a test, its automake result (TEST.trs:
# PASS, FAIL, SKIP, ERROR...), its count of checks (its "N passed, M
# failed" line in TEST.log, where it prints one; a script that runs a test
# program several times prints one a run, then its own count of runs: the
# runs' lines are summed) and the provenance every
# runner row ends with (`runner --provenance`: when, which machine and GPU,
# library versions, git commit and dirty flag), all rows of one run sharing
# it. Appended to OUT (created with its header); appendix C of the writeup
# cites each test's last recorded run. `make check-record` runs it after
# make check, on that run's TESTS.
#
#   record_checks.sh --out CSV --runner PATH TEST...
#
# TEST: a test as make check names it (tests/test_kernels_cuda,
# tests/ddp.sh), its TEST.trs and TEST.log relative to the current folder
# (the build folder). A test without a .trs (not run) is left out with a
# warning. Exit 0; 2 for bad arguments or an OUT whose header is not this
# script's (nothing written then); 1 when nothing could be read or written.
set -eu
me=record_checks.sh
die() { echo "$me: $*" >&2; exit "${2:-1}"; }
usage() { echo "usage: $me --out CSV --runner PATH TEST..." >&2; exit 2; }

out='' runner=''
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --runner) [ $# -ge 2 ] || usage; runner=$2; shift 2 ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ -n "$out" ] && [ -n "$runner" ] && [ $# -gt 0 ] || usage

prov=$("$runner" --provenance) || die "$runner --provenance failed"
header="test,result,checks_passed,checks_failed,$(printf '%s\n' "$prov" | sed -n 1p)"
values=$(printf '%s\n' "$prov" | sed -n 2p)
if [ -s "$out" ]; then
  [ "$(head -n 1 "$out")" = "$header" ] ||
    die "$out: its columns are not a test record's ($header); move it aside or choose another --out" 2
fi

rows=''
for t in "$@"; do
  if [ ! -f "$t.trs" ]; then
    echo "$me: warning: $t did not run (no $t.trs); not recorded" >&2
    continue
  fi
  result=$(sed -n 's/^:global-test-result: *//p' "$t.trs" | tail -n 1)
  [ -n "$result" ] || die "$t.trs has no :global-test-result: line"
  # one count line: the test's; several: a wrapper's runs of a program
  # (test_ddp on 1, 2, 4 ranks...), each run's line, then the wrapper's
  # count of runs, left out
  counts=$( { [ ! -f "$t.log" ] || grep -E '^[0-9]+ passed, [0-9]+ failed' "$t.log" || true; } |
    awk '{ p[NR] = $1; f[NR] = $3 + 0 }
      END { if (NR == 0) { print ","; exit } m = NR > 1 ? NR - 1 : 1
            for (i = 1; i <= m; i++) { sp += p[i]; sf += f[i] } print sp "," sf }')
  rows="$rows$t,$result,$counts,$values
"
done
[ -n "$rows" ] || die "no test of the list ran: nothing recorded"
[ -s "$out" ] || printf '%s\n' "$header" > "$out" || die "cannot write $out"
printf '%s' "$rows" >> "$out" || die "cannot write $out"
echo "$me: $(printf '%s' "$rows" | wc -l | tr -d ' ') tests recorded in $out"
