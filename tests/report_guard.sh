#!/bin/sh
# The writeup answers the whole assignment: renders it from the committed
# CSVs (reports/data, the anchors) with mkreport.sh and checks it against
# reports/problems.def: every problem has its "## NUM NAME" section, once
# and in the list's order, and no other section heading stands between
# them; every sub-part the handout asks for has its "### (x)" heading in
# its problem's section, in order, followed by some text; every figure the
# writeup shows was drawn (where gnuplot is present); no section says a
# committed experiment was not yet measured; the main body's prose is
# under 12,000 words; every repository path it names exists; each
# committed CSV's rows come from one GPU; README.md's results table is the
# writeup's summary.
# Then the same rows relabelled as measured on a GPU that has no PyTorch
# anchors: the writeup still renders, and its summary compares with
# nothing measured on another GPU; and from no data at all.
#
# Skipped under the sanitizers and in a quick check (report_test, in
# tests/lib.sh).
. "${top_srcdir:-.}/tests/lib.sh"
report_test
out="$scratch/report"
sh "$top_srcdir/reports/mkreport.sh" --data "$top_srcdir/reports/data" \
  --out "$out" --csvtool "$csvtool" --runner "$top_builddir/runner" --gnuplot "${GNUPLOT:-}" \
  --problems "$list" > "$scratch/mk.out" 2>&1
rc=$?
check "the writeup renders from the committed CSVs (exit $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || { cat "$scratch/mk.out"; finish; }
md="$out/writeup.md"

# The sections in order: Summary, Contents, then the list's problems.
awk '!/^[ \t]*(#|$)/ { print "## " $1 " " $2 }' "$list" > "$scratch/want"
grep '^## ' "$md" | sed '/^## Summary$/d; /^## Contents$/d' > "$scratch/got"
check "one section per problem, in the list's order, and no other" \
  cmp -s "$scratch/want" "$scratch/got"
cmp -s "$scratch/want" "$scratch/got" || diff "$scratch/want" "$scratch/got" | head -n 20

# Each problem's sub-parts, in order, each with text under it.
awk '!/^[ \t]*(#|$)/ { print $1, $2, $3 }' "$list" > "$scratch/parts"
while read -r num name parts; do
  section=$(awk -v h="## $num $name" '$0 == h { on = 1; next } on && /^## / { exit } on' "$md")
  got=$(printf '%s\n' "$section" | sed -n 's/^### (\([a-z]\)).*/\1/p' | tr '\n' ',' | sed 's/,$//')
  [ "$parts" = - ] && parts=''
  check "$num $name: sub-parts ${parts:-none} (found: ${got:-none})" [ "$got" = "$parts" ]
  body=$(printf '%s\n' "$section" | grep -v '^###' | grep -c '[[:alnum:]]')
  check "$num $name: has text" [ "$body" -gt 0 ]
  for p in $(printf '%s' "$parts" | tr ',' ' '); do
    n=$(printf '%s\n' "$section" | awk -v h="### ($p)" 'index($0, h) == 1 { on = 1; next } on && /^#/ { exit } on && /[[:alnum:]]/ { n++ } END { print n + 0 }')
    check "$num $name ($p): answered" [ "$n" -gt 0 ]
  done
  if printf '%s\n' "$section" | grep -q 'Not yet measured'; then
    check "$num $name: measured (its CSV is committed)" false
  fi
done < "$scratch/parts"

# The main body (every section before appendix A; problems.def puts the
# appendices last) stays readable: under about 12,000 words of prose, tables
# left out (their cells are numbers, not reading) and the contents list
# too (a link a section, not reading), as the writeup issue asks; the
# appendices hold the investigation.
words=$(awk '/^## A / { exit } /^## / { toc = $0 == "## Contents" } !toc && !/^\|/' "$md" | wc -w)
check "the main body is under 12,000 words of prose ($words)" [ "$words" -lt 12000 ]

# Every repository path the prose names exists (the writeup's and the
# README's, code and backticks left out: commands may name the files they
# create, and placeholders stand in code): a renamed file, or one outside
# the repository (the team's shared/ notes), is a dangling reference.
dangling=$(awk '/^```/ { c = !c; next } !c && !/^(    |\t)/' "$md" "$top_srcdir/README.md" |
  sed 's/`[^`]*`//g' |
  grep -oE '\b(kernels|model|parallel|jobs|harness|collective|tests|reports|experiments|common|dev|shared|m4)/[A-Za-z0-9_./*-]+' |
  sed 's/[.,:;)]*$//' | grep -v '[*]' | sort -u |
  while read -r p; do
    # a test or program by its name: its source (out-of-tree builds too)
    [ -e "$top_srcdir/$p" ] || [ -e "$top_srcdir/$p.c" ] || printf ' %s' "$p"
  done)
check "every path the writeup and README name exists${dangling:+ (not:$dangling)}" [ -z "$dangling" ]

# Each committed CSV holds one GPU's rows (the runner refuses to resume a
# sweep on another; this catches files merged by hand), so a section's
# table never compares two GPUs.
mixed=""
for f in "$top_srcdir"/reports/data/*.csv; do
  case ",$(head -n 1 "$f")," in *,gpu_name,*) ;; *) continue ;; esac
  n=$("$csvtool" distinct "$f" --cols gpu_name --where status=ok | wc -l)
  [ "$n" -le 1 ] || mixed="$mixed ${f##*/}"
done
check "each committed CSV's ok rows come from one GPU${mixed:+ (not:$mixed)}" [ -z "$mixed" ]

# README's results table is this summary (make report copies it).
check "README.md's results are the writeup's summary" \
  sh "$top_srcdir/reports/readme_summary.sh" "$md" "$top_srcdir/README.md" --check

# Rows from a GPU without anchors: every section says what is missing,
# and no summary line holds a verdict against another GPU's PyTorch.
other="$scratch/other"
mkdir -p "$other"
for f in "$top_srcdir"/reports/data/*.csv; do
  sed 's/,NVIDIA H[0-9][0-9]*[^,]*,/,NVIDIA X900,/g' "$f" > "$other/${f##*/}"
done
sh "$top_srcdir/reports/mkreport.sh" --data "$other" --out "$scratch/report_other" \
  --csvtool "$csvtool" --runner "$top_builddir/runner" --gnuplot "" --problems "$list" > "$scratch/mk_other.out" 2>&1
rc=$?
check "the writeup renders from rows of a GPU without anchors (exit $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || cat "$scratch/mk_other.out"
summ=$(awk '/^## Summary$/ { on = 1; next } on && /^## / { exit } on' "$scratch/report_other/writeup.md" 2> /dev/null)
check "its summary says PyTorch is not yet measured on that GPU" \
  sh -c 'printf "%s\n" "$1" | grep -q "not yet measured on the X900"' - "$summ"
check "its summary holds no verdict against another GPU's PyTorch" \
  sh -c '! printf "%s\n" "$1" | grep -q -e "x as fast" -e "we lose"' - "$summ"
check "and its list of what is still to measure names each section's missing anchor" \
  sh -c 'printf "%s\n" "$1" | grep -q "^- T training_step: PyTorch.s steps on the X900 (reports/anchors/torch_lm.py)"' - "$summ"

# No data at all (a fresh folder): the writeup still renders, and its
# still-to-measure list names each experiment with its command.
mkdir -p "$scratch/empty"
sh "$top_srcdir/reports/mkreport.sh" --data "$scratch/empty" --out "$scratch/report_empty" \
  --csvtool "$csvtool" --runner "$top_builddir/runner" --gnuplot "" --problems "$list" > "$scratch/mk_empty.out" 2>&1
rc=$?
check "the writeup renders from no data (exit $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || cat "$scratch/mk_empty.out"
check "and its list says what to run" grep -q \
  '^- T training_step: optimizer_in_backward.csv (`./runner experiments/optimizer_in_backward.cfg`)' \
  "$scratch/report_empty/writeup.md"

# Figures: each one the writeup shows exists (drawn only with gnuplot).
figs=$(sed -n 's/.*!\[[^]]*\](\([^)]*\)).*/\1/p' "$md" | sort -u)
if [ -n "${GNUPLOT:-}" ]; then
  for f in $figs; do
    check "figure $f drawn" grep -q '<svg' "$out/$f"
  done
else
  echo "note: no gnuplot, figures not checked"
fi
finish
