#!/bin/sh
# Builds the writeup: OUT/writeup.md and its figures (OUT/*.svg) from the
# result CSVs, one section per line of the problem list
# (reports/problems.def: NUM NAME PARTS SCRIPTS TESTS).
#
#   mkreport.sh --data DIR --out DIR --csvtool PATH --gnuplot PATH_OR_EMPTY \
#               --problems FILE [--only NAME=EXPERIMENT] [--runner PATH]
#
# For each problem it writes "## NUM NAME", then the output of each of its
# section scripts (reports/sections/SCRIPT.sh, run with PROBLEM=NAME and
# CSV=DATA/EXPERIMENT.csv), then the tests that establish the problem's
# claims, each with what its own header comment says it checks. Before the
# sections: a title, the data files read, a summary (sections/summary.sh)
# and a table of contents. --only renders that one problem alone, reading
# EXPERIMENT's CSV (how `make demo` renders its small run). --runner
# (the runner binary): a sweep's size is counted from its experiment file
# now (the runner's dry run), so a sweep that grew since its last run is
# listed as still to measure; without it, from NAME.json, the last run's.
#
# Paths come in as arguments so that out-of-tree builds work; the scripts it
# runs are found next to this file, the tests in ../tests. A section whose
# CSV is missing says "not yet measured"; a malformed CSV or a failing
# section fails the whole report and leaves any earlier writeup.md as it
# was. Problems render side by side (one a processor) and are joined in
# the list's order; the output carries no date, so the same CSVs give the
# same bytes.
set -eu
LC_ALL=C
export LC_ALL

me=mkreport.sh
here=$(cd "$(dirname "$0")" && pwd)
tests=$(cd "$here/../tests" 2> /dev/null && pwd) || tests=''

die() {
  echo "$me: $*" >&2
  exit 1
}
usage() {
  echo "$me: $*" >&2
  echo "usage: $me --data DIR --out DIR --csvtool PATH --gnuplot PATH_OR_EMPTY --problems FILE [--only NAME=EXPERIMENT] [--runner PATH]" >&2
  exit 2
}

data='' out='' csvtool='' gnuplot='' problems='' only='' gnuplot_given='' runner=''
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage "$1 needs a value"
  case $1 in
    --data) data=$2 ;;
    --out) out=$2 ;;
    --csvtool) csvtool=$2 ;;
    --gnuplot) gnuplot=$2; gnuplot_given=1 ;;
    --problems) problems=$2 ;;
    --only) only=$2 ;;
    --runner) runner=$2 ;;
    *) usage "unknown argument \"$1\"" ;;
  esac
  shift 2
done
[ -n "$data" ] || usage "--data is required"
[ -n "$out" ] || usage "--out is required"
[ -n "$csvtool" ] || usage "--csvtool is required"
[ -n "$gnuplot_given" ] || usage "--gnuplot is required (pass \"\" for no figures)"
[ -n "$problems" ] || usage "--problems is required"
[ -f "$problems" ] || die "no problem list $problems"
case $only in
  '' | *=*) ;;
  *) usage "--only takes NAME=EXPERIMENT, not \"$only\"" ;;
esac

# Section scripts run with their own working directory in mind: hand them
# absolute paths.
absolute() {
  case $1 in
    /*) printf '%s' "$1" ;;
    *) printf '%s/%s' "$PWD" "$1" ;;
  esac
}
case $csvtool in
  */*) csvtool=$(absolute "$csvtool") ;;
  *) csvtool=$(command -v "$csvtool") || die "csvtool \"$csvtool\" not found in PATH" ;;
esac
[ -x "$csvtool" ] || die "csvtool \"$csvtool\" is not an executable file (build it: make csvtool)"
case $gnuplot in
  */*) gnuplot=$(absolute "$gnuplot") ;;
esac
if [ -n "$runner" ]; then
  runner=$(absolute "$runner")
  [ -x "$runner" ] || die "runner \"$runner\" is not an executable file (build it: make runner)"
fi
# what section_lib.sh's unmeasured reads
REPORT_RUNNER=$runner
REPORT_EXPERIMENTS=$(cd "$here/../experiments" 2> /dev/null && pwd) || REPORT_EXPERIMENTS=''
export REPORT_RUNNER REPORT_EXPERIMENTS
data=$(absolute "$data")
problems=$(absolute "$problems")
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The problem list without comments: "NUM NAME PARTS SCRIPTS TESTS" lines,
# checked whole before anything runs. With --only, that problem alone.
list=$(awk -v only="${only%%=*}" '
  /^[ \t]*(#|$)/ { next }
  NF != 5 { printf "%s:%d: %d fields (allowed: NUM NAME PARTS SCRIPTS TESTS)\n", FILENAME, FNR, NF > "/dev/stderr"; bad = 1; next }
  only == "" || $2 == only { print $1, $2, $3, $4, $5; n++ }
  END { if (bad) exit 1; if (only != "" && n == 0) { printf "no problem %s in %s\n", only, FILENAME > "/dev/stderr"; exit 1 } }
' "$problems") || die "bad problem list $problems (above)"

# SCRIPT[:EXPERIMENT] -> script; -> experiment (--only's, else its own).
script_of() { printf '%s' "${1%%:*}"; }
experiment_of() {
  if [ -n "$only" ]; then printf '%s' "${only#*=}"; return; fi
  case $1 in *:*) printf '%s' "${1#*:}" ;; *) printf '%s' "$1" ;; esac
}
# SCRIPTS joined by "+", one a line.
each() { printf '%s\n' "$1" | tr '+' '\n'; }

# Check every input before writing anything: a malformed CSV is a broken
# report, not a section to skip.
names=' ' scripts=' ' owners=''
for pe in $(printf '%s\n' "$list" | awk '{ n = split($4, a, "+"); for (i = 1; i <= n; i++) print $2 "|" a[i] }'); do
  problem=${pe%%|*} entry=${pe#*|}
  s=$(script_of "$entry")
  [ -f "$here/sections/$s.sh" ] || die "no section script $here/sections/$s.sh ($problems)"
  case $scripts in *" $s "*) ;; *) scripts="$scripts$s " ;; esac
  e=$(experiment_of "$entry")
  case $names in *" $e "*) continue ;; esac
  names="$names$e "
  owners="$owners$e|$problem
"
  if [ -f "$data/$e.csv" ]; then
    "$csvtool" check "$data/$e.csv" > /dev/null || die "$data/$e.csv is malformed (above); no report written"
  fi
done
scripts="${scripts}summary "

# The other CSVs of the data folder that these sections read: those a
# section script names as "$DATA/NAME.csv", in name order (LC_ALL=C), each
# with the sections that read it. Lines "NAME|SECTION, SECTION".
# Every script's "$DATA/NAME.csv" at once ("SCRIPT.sh:$DATA/NAME.csv"
# lines; a grep a file and CSV took a second and a half).
refs=$(cd "$here/sections" && for s in $scripts; do printf '%s.sh\n' "$s"; done |
  xargs grep -Ho '\$DATA/[A-Za-z0-9_.-]*\.csv' || true)
others=''
for csv in "$data"/*.csv; do
  [ -f "$csv" ] || continue
  n=${csv##*/}
  n=${n%.csv}
  case $names in *" $n "*) continue ;; esac
  readers=$(printf '%s\n' "$refs" | awk -v want="\$DATA/$n.csv" -v order="$scripts" '
    { i = index($0, ":"); if (substr($0, i + 1) == want) has[substr($0, 1, i - 4)] = 1 }
    END { n = split(order, o, " "); for (k = 1; k <= n; k++) if (o[k] in has) r = r (r == "" ? "" : ", ") o[k]; print r }')
  [ -n "$readers" ] || continue
  "$csvtool" check "$csv" > /dev/null || die "$csv is malformed (above); no report written"
  others="$others$n|$readers
"
done

tmp="$out/.writeup.md.tmp"
body="$out/.writeup.body.tmp"
# the sections' scratch files (section_lib.sh's anchor_rows)
REPORT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mkreport.XXXXXX") || die "cannot make a scratch folder"
# what the sections still lack (section_lib.sh's todo), listed under the
# summary: PROBLEM <tab> TEXT lines
REPORT_TODO="$REPORT_TMP/todo"
: > "$REPORT_TODO"
export REPORT_TMP REPORT_TODO
trap 'rm -f "$tmp" "$body"; rm -rf "$REPORT_TMP"' EXIT
trap 'exit 1' HUP INT TERM

# The data folder as the reader knows it: make report's is reports/data/.
case $data in
  */reports/data | */reports/data/) where="reports/data/" ;;
  *) where="$data/" ;;
esac

# One line of the header's list: FILE's rows, and its torn last line if any.
rows_of() { # NAME
  info=$("$csvtool" check "$data/$1.csv")
  rows=$("$csvtool" count "$data/$1.csv")
  # `check` mentions a torn last line (an interrupted sweep) in words.
  case $info in
    *torn*) torn="; its torn last line, from an interrupted run, is left out" ;;
    *) torn="" ;;
  esac
  case $rows in 1) unit=row ;; *) unit=rows ;; esac
  printf '%s %s%s' "$rows" "$unit" "$torn"
}

# GitHub's anchor of a heading: lower case, punctuation other than - and _
# dropped, spaces as -.
anchor() { printf '%s' "$1" | tr 'A-Z' 'a-z' | tr -cd 'a-z0-9 _-' | tr ' ' '-'; }

# test_file (and what the sections use).
CSVTOOL=$csvtool TESTS_DIR=$tests
. "$here/section_lib.sh"

# The sections, into the body first: the contents list needs the headings.
# Each problem renders into a folder of its own (its section text, its
# todo lines, its scratch files), as many problems at once as there are
# processors: a section is many short csvtool runs, and the problems are
# independent. Then the body is joined in the list's order, so the output
# does not depend on which finished first.
render() { # DIR NUM NAME SCRIPTS TESTS
  for entry in $(each "$4"); do
    s=$(script_of "$entry")
    e=$(experiment_of "$entry")
    DATA=$data CSV="$data/$e.csv" OUT=$out CSVTOOL=$csvtool GNUPLOT=$gnuplot \
      REPORT_LIB="$here/section_lib.sh" PROBLEM=$3 PROBLEMS=$problems \
      TESTS_DIR=$tests REPORT_TMP="$1" REPORT_TODO="$1/todo" \
      sh "$here/sections/$s.sh" || { echo "section $s ($3) failed (above)" > "$1/failed"; return 1; }
  done
  [ "$5" != - ] || return 0
  # names only: appendix C quotes what each test checks, and how closely
  names=''
  for t in $(printf '%s' "$5" | tr ',' ' '); do
    test_file "$t" || { echo "$3: no test $t in $tests" > "$1/failed"; return 1; }
    names="$names${names:+, }\`tests/$t\`"
  done
  echo "**Checked by** $names (\`make check\`; see appendix C)."
  echo
}
nproc=$(getconf _NPROCESSORS_ONLN 2> /dev/null) || nproc=2
case $nproc in '' | *[!0-9]*) nproc=2 ;; esac
# a token a free slot: a job takes one to start and gives it back at its end
mkfifo "$REPORT_TMP/slots"
exec 3<> "$REPORT_TMP/slots"
n=0
while [ $n -lt "$nproc" ]; do echo >&3; n=$((n + 1)); done
nsec=$(printf '%s\n' "$list" | wc -l)
[ "$nsec" -eq 1 ] && unit=section || unit=sections
echo "$me: rendering $nsec $unit from $where, $nproc at a time"
n=0
while read -r num name parts scr tst; do
  n=$((n + 1))
  d="$REPORT_TMP/p$n"
  mkdir "$d"
  read -r _ <&3
  { { echo "## $num $name"; echo; render "$d" "$num" "$name" "$scr" "$tst"; } > "$d/md" ||
      [ -s "$d/failed" ] || echo "problem $name failed (above)" > "$d/failed"
    echo >&3; } &
done <<LIST
$list
LIST
wait
exec 3>&-
: > "$body"
i=1
while [ $i -le $n ]; do
  d="$REPORT_TMP/p$i"
  [ ! -e "$d/failed" ] || die "$(cat "$d/failed"); no report written"
  cat "$d/md" >> "$body"
  [ ! -f "$d/todo" ] || cat "$d/todo" >> "$REPORT_TODO"
  i=$((i + 1))
done

{
  echo "# trainlab: CS336's systems assignment, measured"
  echo
  echo "_Generated by \`make report\` (reports/mkreport.sh) from the result CSVs in"
  echo "$where; every table, figure and quoted measurement below comes from"
  echo "them, or from the PyTorch anchors in reports/anchors/ (each written by a"
  echo "script there) where a section says so. Sections follow the handout's"
  echo "problems in order (reports/problems.def)._"
  echo
  echo "| data file | rows | read by (problem, or section script) |"
  echo "|---|---|---|"
  printf '%s' "$owners" | while IFS='|' read -r e problem; do
    if [ -f "$data/$e.csv" ]; then
      echo "| \`$e.csv\` | $(rows_of "$e") | $problem |"
    elif [ ! -f "$here/../experiments/$e.cfg" ]; then
      continue   # a section of prose (code, correctness): no experiment
    else
      echo "| \`$e.csv\` | not yet measured (run \`./runner experiments/$e.cfg\`) | $problem |"
    fi
  done
  printf '%s' "$others" | while IFS='|' read -r n readers; do
    echo "| \`$n.csv\` | $(rows_of "$n") | $readers |"
  done
  echo
  if [ -z "$only" ]; then
    DATA=$data OUT=$out CSVTOOL=$csvtool GNUPLOT=$gnuplot \
      REPORT_LIB="$here/section_lib.sh" PROBLEM=summary \
      sh "$here/sections/summary.sh" || die "the summary failed (above); no report written"
    # The sections' todo lines, one bullet per problem in the list's order
    # (a line said twice, by two scripts of one section, once).
    if [ -s "$REPORT_TODO" ]; then
      echo "**Still to measure** (each section says more where it stands):"
      echo
      printf '%s\n' "$list" | while read -r num name rest; do
        what=$(awk -F '\t' -v p="$name" '$1 == p && !seen[$2]++ { printf "%s%s", (n++ ? "; " : ""), $2 }' "$REPORT_TODO")
        [ -z "$what" ] || echo "- $num $name: $what."
      done
      echo
    fi
    echo "## Contents"
    echo
    grep '^## ' "$body" | while read -r hashes title; do
      echo "- [$title](#$(anchor "$title"))"
    done
    echo
  fi
  cat "$body"
} > "$tmp"

mv "$tmp" "$out/writeup.md"
echo "$me: wrote $out/writeup.md"
