# Shared by the shell tests: absolute paths, a scratch folder removed on
# exit, and pass/fail bookkeeping. Open MPI's root variables are not set
# here: the runner handles running as root itself, and the tests run it as
# a user would. Tests that call mpirun directly set them (mpi_as_root).
set -u
top_srcdir=$(cd "${top_srcdir:-.}" && pwd)
top_builddir=$(cd "${top_builddir:-.}" && pwd)
RUNNER="$top_builddir/runner"
mpi_as_root() { export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; }
# Skip (77) when the build has no MPI to launch ranks with.
need_mpi() {
  if [ -z "${MPIRUN:-}" ]; then
    echo "skip: built without MPI (MPIRUN is empty)"
    exit 77
  fi
}
# The tests see this machine, not a SLURM allocation they may run in
# (the runner would count its GPUs and say so); tests/slurm.sh sets its own.
unset SLURM_JOB_ID
# Open MPI on a CI container: no network interfaces worth probing.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
[ -x "$RUNNER" ] || { echo "missing $RUNNER"; exit 99; }
# A test that takes half a minute or more on two cores calls `slow` first:
# with TRAINLAB_QUICK set it skips (77). CI's distcheck sets it (its main
# stage ran every test in the tree; distcheck checks the packaging);
# `TRAINLAB_QUICK=1 make check` is the quick check while editing.
slow() {
  if [ -n "${TRAINLAB_QUICK:-}" ]; then
    echo "skipped: TRAINLAB_QUICK is set and this test is a slow one"
    exit 77
  fi
}
# The writeup's tests (report_guard.sh, report_partial.sh) call
# `report_test` first: skipped under the sanitizers (.ci/sanitize sets
# TRAINLAB_SANITIZE), where a render's thousands of csvtool processes each
# pay a sanitizer's start-up (about half of CI's time, once) while
# tests/csvtool.sh runs csvtool's code there; slow; and csvtool and list
# (reports/problems.def) set.
report_test() {
  if [ -n "${TRAINLAB_SANITIZE:-}" ]; then
    echo "skipped: the sanitizer build (tests/csvtool.sh covers csvtool there)"
    exit 77
  fi
  slow
  csvtool="$top_builddir/csvtool"
  [ -x "$csvtool" ] || { echo "missing $csvtool"; exit 99; }
  list="$top_srcdir/reports/problems.def"
}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/trainlab-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { # check "what" command...
  what=$1; shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
# Number of processes whose command line contains TEXT (a fixed string).
# Tests count only their own processes: TEXT names something unique to the
# test, such as its scratch folder, never a program name that another
# test or user on the machine may be running too.
procs_with() { # procs_with TEXT
  n=0
  for d in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' < "$d/cmdline" 2> /dev/null) || continue
    case "$cmd" in *"$1"*) n=$((n + 1)) ;; esac
  done
  echo "$n"
}
# Number of data rows in a CSV (header excluded).
rows() { if [ -f "$1" ]; then echo $(($(wc -l < "$1") - 1)); else echo 0; fi; }
# Value of column NAME in every data row of a CSV, one per line.
column() { # column FILE NAME
  awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next } { print $c }' "$1"
}
# The GPU runs of a multi-rank test program (test_ddp_cuda.sh,
# test_fsdp_cuda.sh): tests/PROG nccl through $MPIRUN on 1, 2 and 4 ranks,
# as many as there are GPUs, each world size RUNS times; skips (77) when
# built without MPI, with no GPU, or when the program says it cannot run
# (no NCCL in the build).
gpu_mpi_test() { # gpu_mpi_test PROG RUNS
  mpi_as_root
  need_mpi
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
  if [ "${gpus:-0}" -lt 1 ]; then
    echo "skip: nvidia-smi lists no GPU"
    exit 77
  fi
  prog="$top_builddir/tests/$1"
  [ -x "$prog" ] || { echo "missing $prog"; exit 99; }
  for np in 1 2 4; do
    [ "$gpus" -ge "$np" ] || continue
    run=1
    while [ "$run" -le "$2" ]; do
      what="$1 nccl on $np GPUs, run $run of $2"
      echo "+ $MPIRUN -np $np --oversubscribe $prog nccl"
      "$MPIRUN" -np "$np" --oversubscribe "$prog" nccl
      rc=$?
      case $rc in
      0) ok "$what" ;;
      77) echo "$what: skipped by the program"; exit 77 ;;
      *) bad "$what (exit $rc)" ;;
      esac
      run=$((run + 1))
    done
  done
  finish
}
