# What every section script (reports/sections/*.sh) uses, sourced by each
# as `. "$REPORT_LIB"` (mkreport.sh sets REPORT_LIB; CSVTOOL too).

# csvtool on the results. Always assign its output to a variable first:
# `set -e` does not see a failure inside "$(...)" used as an argument.
tool() { "$CSVTOOL" "$@"; }

# Arithmetic on numbers already checked by num (awk: sh has integers only).
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
is_true() { awk "BEGIN { exit !($1) }"; }

# Stops the report unless $2 is a number: a quoted measurement that is not
# one would otherwise turn into a wrong verdict rather than an error.
num() {
  case $2 in
    '' | *[!0-9.eE+-]*)
      echo "${0##*/}: ${csv:-}: $1 is \"$2\", not a number" >&2
      exit 1 ;;
  esac
}

# A value, or "-" in a table cell when there is none.
d() { [ -n "$1" ] && printf '%s' "$1" || printf -- '-'; }

# failed_jobs CSV COLS HEAD: the jobs without a measurement (status other
# than ok) as a table of COLS headed HEAD; nothing when every job measured.
failed_jobs() {
  nbad=$(tool count "$1" --where status!=ok)
  [ "$nbad" -gt 0 ] || return 0
  echo "Jobs without a measurement ($nbad):"
  echo
  tool table "$1" --cols "$2" --head "$3" --where status!=ok
  echo
}

# What a test establishes, as one paragraph: its source's first comment
# block (tests/NAME.c) or its leading # lines (tests/NAME.sh), without the
# exit-status sentence tests end with. TESTS_DIR: the tests' folder.
test_says() { # NAME
  case $1 in
    *.sh) f="$TESTS_DIR/$1"
          [ -f "$f" ] || return 1
          awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); printf "%s ", $0; next } { exit }' "$f" ;;
    *) f="$TESTS_DIR/$1.c"
       [ -f "$f" ] || return 1
       awk '!s && /^\/\*/ { s = 1 } s { line = $0; sub(/^\/\* ?/, "", line); sub(/^ \* ?/, "", line);
              e = sub(/ *\*\/.*$/, "", line); printf "%s ", line; if (e) exit }' "$f" ;;
  esac | tr -s ' ' | sed 's/ *Exit [0-9].*$//; s/ *$//'
}

# The first sentence of a paragraph (up to the first ". ").
first_sentence() { sed 's/\([.:]\) .*/\1/'; }
