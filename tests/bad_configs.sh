#!/bin/sh
# Every mistake in an experiment file (or in the runner's --set / --only)
# must be reported before any job runs, as exactly one expected line.
#
# For each tests/config/bad/NN-name.cfg: run
#   runner --dry-run [contents of NN-name.args] NN-name.cfg
# from inside tests/config/bad (so messages name files as written) and
# require a non-zero exit (not a signal), empty stdout, and stderr equal to
# NN-name.err byte for byte.
#
# Environment (automake's AM_TESTS_ENVIRONMENT): top_srcdir, top_builddir;
# RUNNER, if set, is the runner program to test instead of
# $top_builddir/runner.
# Exit: 0 all pass, 1 some failed, 99 the runner or the cases are missing.

# Fewer cases than this means the test data went missing, not that all is
# well.
min_cases=12

top_srcdir_abs=$(cd "${top_srcdir:-.}" && pwd) || exit 99
top_builddir_abs=$(cd "${top_builddir:-.}" && pwd) || exit 99
runner="${RUNNER:-$top_builddir_abs/runner}"
bad="$top_srcdir_abs/tests/config/bad"

if [ ! -f "$runner" ] || [ ! -x "$runner" ]; then
  echo "bad_configs.sh: no runner program at $runner (build it first)" >&2
  exit 99
fi
if [ ! -d "$bad" ]; then
  echo "bad_configs.sh: no test cases: $bad is missing" >&2
  exit 99
fi
ncases=0
for cfg in "$bad"/*.cfg; do
  [ -f "$cfg" ] && ncases=$((ncases + 1))
done
if [ "$ncases" -lt "$min_cases" ]; then
  echo "bad_configs.sh: only $ncases cases in $bad (expected at least" \
    "$min_cases)" >&2
  exit 99
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bad_configs.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 99' HUP INT TERM

passed=0
failed=0
for cfg in "$bad"/*.cfg; do
  case_name=$(basename "$cfg" .cfg)
  expected="$bad/$case_name.err"
  if [ ! -f "$expected" ]; then
    echo "FAIL $case_name: $case_name.err is missing"
    failed=$((failed + 1))
    continue
  fi
  args=
  [ -f "$bad/$case_name.args" ] && args=$(cat "$bad/$case_name.args")
  # .args holds extra runner arguments, split on blanks but never globbed.
  set -f
  # shellcheck disable=SC2086
  (cd "$bad" && "$runner" --dry-run $args "$case_name.cfg") \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  set +f
  why=
  if [ "$rc" -eq 0 ]; then
    why="runner exited 0 (expected an error exit)"
  elif [ "$rc" -ge 126 ]; then
    why="runner exited $rc (killed by a signal or not runnable)"
  elif [ -s "$tmp/out" ]; then
    why="runner wrote to stdout"
  elif ! cmp -s "$expected" "$tmp/err"; then
    why="stderr differs from $case_name.err"
  fi
  if [ -z "$why" ]; then
    echo "ok   $case_name"
    passed=$((passed + 1))
  else
    echo "FAIL $case_name: $why"
    echo "  command: cd $bad && $runner --dry-run $args $case_name.cfg"
    if [ -s "$tmp/out" ]; then
      echo "  stdout:"
      sed 's/^/    /' "$tmp/out"
    fi
    echo "  stderr diff (expected, got):"
    diff -u "$expected" "$tmp/err" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
