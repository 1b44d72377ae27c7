#!/bin/sh
# The runner loads no CUDA, cuBLAS, NCCL or MPI library (only the worker
# does): it links libtrainlab_runner.a, the kinds without their run side.
# The worker loads cuBLAS only for a CUDA engine.
# The GPU count and the libraries' versions it needs come from
# `worker --env`, and a worker that cannot answer leaves the host's values
# and one warning line.
. "${top_srcdir:-.}/tests/lib.sh"
WORKER="$top_builddir/worker"
[ -x "$WORKER" ] || { echo "missing $WORKER"; exit 99; }
heavy='lib(cuda|cublas|nccl|mpi|open-rte|open-pal)'

# What the runner's executable needs, transitively, as the loader sees it.
ldd "$RUNNER" > "$scratch/ldd" 2>&1
check "ldd reads the runner" [ $? -eq 0 ]
check "the runner links libconfig" grep -q 'libconfig' "$scratch/ldd"
grep -E "$heavy" "$scratch/ldd"
check "the runner links no CUDA, cuBLAS, NCCL or MPI library" \
  sh -c "! grep -qE '$heavy' '$scratch/ldd'"

# What it loads when it runs, dlopen included (the loader's own log).
LD_DEBUG=files "$RUNNER" --version > "$scratch/version" 2> "$scratch/version.ld"
check "runner --version exits 0" [ $? -eq 0 ]
check "runner --version prints its version" \
  grep -q '^runner (trainlab) [0-9]' "$scratch/version"
check "the loader's log names what it loads" \
  grep -q 'file=libconfig' "$scratch/version.ld"
check "runner --version loads no CUDA, cuBLAS, NCCL or MPI library" \
  sh -c "! grep -E 'file=' '$scratch/version.ld' | grep -qE '$heavy'"
LD_DEBUG=files "$RUNNER" --kinds > "$scratch/kinds" 2> "$scratch/kinds.ld"
check "runner --kinds exits 0" [ $? -eq 0 ]
for k in selftest allreduce lm ddp attention toy_dtypes accumulation; do
  check "runner --kinds lists $k" grep -q "^$k: " "$scratch/kinds"
done
check "runner --kinds loads no CUDA, cuBLAS, NCCL or MPI library" \
  sh -c "! grep -E 'file=' '$scratch/kinds.ld' | grep -qE '$heavy'"
check "runner --kinds norm attention: those two, in the kinds' order" \
  [ "$("$RUNNER" --kinds norm attention | grep -o '^[a-z_]*:' | tr '\n' ' ')" = "attention: norm: " ]
"$RUNNER" --kinds atention > "$scratch/kinds.out" 2> "$scratch/kinds.err"
check "runner --kinds with an unknown kind: exit 2, nothing listed, the nearest named" \
  sh -c "[ $? -eq 2 ] && [ ! -s '$scratch/kinds.out' ] && grep -q 'unknown kind \"atention\" (did you mean attention?' '$scratch/kinds.err'"

# The worker's answer: every provenance column, once, in order.
"$WORKER" --env > "$scratch/env" 2> "$scratch/env.err"
check "worker --env exits 0" [ $? -eq 0 ]
cols="host machine gpu_name gpu_count cpu_model cpu_cores driver_version cuda_runtime_version nccl_version mpi_library"
check "worker --env prints the 10 columns in order" \
  [ "$(sed 's/=.*//' "$scratch/env" | tr '\n' ' ')" = "$(for c in $cols; do printf 'env.%s ' "$c"; done)" ]
"$WORKER" --env --kind selftest > /dev/null 2>&1
check "worker --env with more arguments exits 2" [ $? -eq 2 ]
env_of() { sed -n "s/^env\.$1=//p" "$scratch/env"; }

# The worker opens cuBLAS only when it makes a CUDA engine
# (kernels/cuda/cublas_lib.h): neither its answer above nor a CPU job loads
# it (loading it alone costs ~0.3 s and ~200 MiB, which a CPU job's
# peak_rss_mib would count).
LD_DEBUG=files "$WORKER" --env > /dev/null 2> "$scratch/env.ld"
check "worker --env loads no cuBLAS" \
  sh -c "grep -q 'file=' '$scratch/env.ld' && ! grep -E 'file=' '$scratch/env.ld' | grep -q 'libcublas'"
job=$("$RUNNER" --dry-run --launcher "" --out-dir "$scratch/lmdry" \
  --only size=nano --only mode=forward_backward --only fusion=opbyop \
  "$top_srcdir/experiments/smoke_lm.cfg" | sed -n 's/^    //p' | head -n 1)
case $job in
  *" --kind lm --result "*" backend=cpu "*) ;;
  *) echo "no CPU lm job in smoke_lm.cfg's dry run: $job"; exit 99 ;;
esac
job=$(printf '%s\n' "$job" | sed "s| --result [^ ]*| --result $scratch/lm.result|")
LD_DEBUG=files sh -c "$job" > "$scratch/lm.out" 2> "$scratch/lm.ld"
check "a CPU lm job exits 0" [ $? -eq 0 ]
check "and writes its result" grep -q 'step_ms_mean' "$scratch/lm.result"
check "and loads no cuBLAS" \
  sh -c "grep -q 'file=' '$scratch/lm.ld' && ! grep -E 'file=' '$scratch/lm.ld' | grep -q 'libcublas'"

# The runner's provenance (its NAME.json) is the worker's.
"$RUNNER" --launcher "" --out-dir "$scratch/out" --only action=ok \
  --only world_size=1 "$top_srcdir/experiments/selftest.cfg" \
  > "$scratch/run.out" 2> "$scratch/run.err"
check "a one-job run exits 0" [ $? -eq 0 ]
for c in gpu_count cuda_runtime_version nccl_version mpi_library; do
  check "the runner's $c is the worker's ($(env_of $c))" \
    grep -qF "\"$c\": \"$(env_of $c)\"" "$scratch/out/selftest.json"
done

# Beside a copy of the runner, a worker of our own: what it answers is what
# the runner believes. A cuda job needs one GPU; a worker saying there are
# two makes the dry run keep it, one that cannot answer leaves 0 GPUs.
cfg="$top_srcdir/experiments/smoke_attention.cfg"
dry() { # dry DIR: the copied runner's dry run with backend cuda
  "$1/runner" --dry-run --launcher "" --set backend=cuda \
    --out-dir "$scratch/dry" "$cfg" \
    > "$1/out" 2> "$1/err"
}
fake() { # fake DIR SCRIPT-BODY: DIR/runner and DIR/worker running the body
  mkdir -p "$1" && cp "$RUNNER" "$1/runner" &&
    printf '#!/bin/sh\n%s\n' "$2" > "$1/worker" && chmod +x "$1/worker"
}
sed 's/^env\.gpu_count=.*/env.gpu_count=2/' "$scratch/env" > "$scratch/env2"
fake "$scratch/two" "cat '$scratch/env2'"
dry "$scratch/two"
check "dry run beside a worker saying 2 GPUs exits 0" [ $? -eq 0 ]
check "and prints nothing on stderr" [ ! -s "$scratch/two/err" ]
check "and launches that worker" \
  grep -qF "$scratch/two/worker --kind attention" "$scratch/two/out"
if grep -q 'this build has no CUDA' "$scratch/two/out"; then
  echo "note: built without CUDA, cuda jobs are skipped whatever the GPU count"
else
  check "and keeps the cuda jobs" sh -c "! grep -q 'would be skipped' '$scratch/two/out'"
fi

fake "$scratch/fails" "echo 'worker: broken' >&2; exit 3"
dry "$scratch/fails"
check "dry run beside a failing worker exits 0" [ $? -eq 0 ]
check "the worker's stderr is passed through" \
  grep -qx 'worker: broken' "$scratch/fails/err"
check "and one warning names the worker and its exit status" \
  [ "$(grep -v '^worker: broken$' "$scratch/fails/err")" = \
    "runner: warning: $scratch/fails/worker --env: exit status 3; provenance from this host only: 0 GPUs, no CUDA, NCCL or MPI versions" ]
check "and the cuda jobs would be skipped" \
  [ "$(grep -c 'would be skipped' "$scratch/fails/out")" -eq 8 ]

fake "$scratch/short" "grep -v '^env.mpi_library=' '$scratch/env'"
dry "$scratch/short"
check "dry run beside a worker leaving a column out exits 0" [ $? -eq 0 ]
check "and one warning names the column" \
  [ "$(cat "$scratch/short/err")" = \
    "runner: warning: $scratch/short/worker --env: no env.mpi_library line in its output; provenance from this host only: 0 GPUs, no CUDA, NCCL or MPI versions" ]

sed 's/^env\.gpu_count=.*/env.gpu_count=two/' "$scratch/env" > "$scratch/envbad"
fake "$scratch/notcount" "cat '$scratch/envbad'"
dry "$scratch/notcount"
check "a GPU count that is not a count is refused with one warning" \
  [ "$(cat "$scratch/notcount/err")" = \
    "runner: warning: $scratch/notcount/worker --env: env.gpu_count=two is not a count; provenance from this host only: 0 GPUs, no CUDA, NCCL or MPI versions" ]

# No worker beside the runner: it looks where `make install` puts one.
mkdir -p "$scratch/alone" && cp "$RUNNER" "$scratch/alone/runner"
dry "$scratch/alone"
check "dry run with no worker beside the runner exits 0" [ $? -eq 0 ]
installed=$(sed -n 's/^    \([^ ]*\) --kind .*/\1/p' "$scratch/alone/out" | head -n 1)
if [ -e "$installed" ]; then
  echo "note: a worker is installed at $installed; not checking its absence"
else
  check "and one warning says the worker cannot be run" \
    [ "$(cat "$scratch/alone/err")" = \
      "runner: warning: $installed --env: cannot run it: No such file or directory; provenance from this host only: 0 GPUs, no CUDA, NCCL or MPI versions" ]
fi
finish
