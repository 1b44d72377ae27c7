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
