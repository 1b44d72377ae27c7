#!/bin/sh
# Inside a SLURM allocation the runner counts the allocation's GPUs from
# SLURM's environment (harness/slurm.c), says so in one line, and a job
# that needs more is skipped naming the allocation; --gpus still decides;
# outside an allocation (no SLURM_JOB_ID) SLURM's variables are ignored;
# a count it cannot read is one warning, and this machine's count stands.
# Where this machine is in a SLURM cluster (sbatch and sinfo answer), the
# batch script experiments/sweep.sbatch runs a CPU sweep there too.
. "${top_srcdir:-.}/tests/lib.sh"
cfg="$top_srcdir/experiments/allreduce.cfg"
unset SLURM_GPUS SLURM_GPUS_ON_NODE SLURM_GPUS_PER_NODE SLURM_JOB_NUM_NODES
dry() { # dry NAME [VAR=VALUE ...]: a dry run of allreduce's NCCL jobs
  name=$1; shift
  env "$@" "$RUNNER" --dry-run --out-dir "$scratch/out" --only backend=nccl \
    --only size_mib=1 "$cfg" > "$scratch/$name.out" 2> "$scratch/$name.err"
}
first_err() { head -n 1 "$scratch/$1.err"; }

dry nodes SLURM_JOB_ID=42 SLURM_GPUS_ON_NODE=4 SLURM_JOB_NUM_NODES=2
check "4 GPUs a node on 2 nodes: exit 0" [ $? -eq 0 ]
check "and one line says 8, from where" [ "$(first_err nodes)" = \
  "runner: 8 GPUs, the allocation's: SLURM job 42: 4 GPUs a node (SLURM_GPUS_ON_NODE) x 2 nodes" ]
dry typed SLURM_JOB_ID=7 SLURM_GPUS_PER_NODE=gpu:h100:8 SLURM_JOB_NUM_NODES=1
check "a typed count a node (salloc's SLURM_GPUS_PER_NODE)" [ "$(first_err typed)" = \
  "runner: 8 GPUs, the allocation's: SLURM job 7: 8 GPUs a node (SLURM_GPUS_PER_NODE) x 1 node" ]
dry total SLURM_JOB_ID=7 SLURM_GPUS=a100:2,v100:1
check "a total in a list of types (SLURM_GPUS) is summed" [ "$(first_err total)" = \
  "runner: 3 GPUs, the allocation's: SLURM job 7: 3 GPUs (SLURM_GPUS)" ]
if grep -q 'no MPI\|no CUDA' "$scratch/total.out"; then
  echo "note: built without MPI or CUDA, NCCL jobs are skipped whatever the GPU count"
else
  check "and the 4-GPU job would be skipped, naming the allocation" \
    grep -qF "(would be skipped: needs 4 GPUs, the SLURM allocation has 3)" "$scratch/total.out"
  check "and the 2-GPU job would run" \
    grep -qx "\[1/4\] backend=nccl world_size=2 size_mib=1" "$scratch/total.out"
  check "with 8 GPUs none would be skipped" sh -c "! grep -q 'would be skipped' '$scratch/nodes.out'"
fi

env SLURM_JOB_ID=42 SLURM_GPUS_ON_NODE=4 SLURM_JOB_NUM_NODES=2 "$RUNNER" --gpus 3 \
  --dry-run --out-dir "$scratch/out" --only backend=nccl --only size_mib=1 "$cfg" \
  > "$scratch/given.out" 2> "$scratch/given.err"
check "--gpus decides inside an allocation: nothing on stderr" [ ! -s "$scratch/given.err" ]
if ! grep -q 'no MPI\|no CUDA' "$scratch/given.out"; then
  check "and the count is --gpus's" \
    grep -qF "(would be skipped: needs 4 GPUs, this machine has 3)" "$scratch/given.out"
fi
dry outside SLURM_GPUS=8 SLURM_GPUS_ON_NODE=8 SLURM_JOB_NUM_NODES=1
check "outside an allocation SLURM's counts are ignored" [ ! -s "$scratch/outside.err" ]

dry bad SLURM_JOB_ID=42 SLURM_GPUS_ON_NODE=four SLURM_JOB_NUM_NODES=2
check "a count that is not one: exit 0" [ $? -eq 0 ]
check "and one warning says what it cannot read" [ "$(cat "$scratch/bad.err")" = \
  "runner: warning: SLURM job 42: cannot count its GPUs from SLURM_GPUS_ON_NODE=four and SLURM_JOB_NUM_NODES=2 (allowed: [type:]N[,...] GPUs a node and a node count of 1 or more; --gpus N gives the count); counting this machine's GPUs" ]
dry nonodes SLURM_JOB_ID=42 SLURM_GPUS_ON_NODE=4
check "a count a node without the node count is one warning" \
  grep -qF "from SLURM_GPUS_ON_NODE=4 and SLURM_JOB_NUM_NODES=(unset)" "$scratch/nonodes.err"
dry badtotal SLURM_JOB_ID=42 SLURM_GPUS=h100:
check "a total without its number is one warning" [ "$(cat "$scratch/badtotal.err")" = \
  "runner: warning: SLURM job 42: cannot count its GPUs from SLURM_GPUS=h100: (allowed: [type:]N[,...]; --gpus N gives the count); counting this machine's GPUs" ]

# The batch script on a real cluster, where there is one.
if command -v sbatch > /dev/null && sinfo -h > /dev/null 2>&1; then
  sub=$scratch/submit
  mkdir -p "$sub" && cd "$top_builddir" || exit 99
  jid=$(sbatch --parsable --ntasks=2 --chdir="$top_builddir" --output="$sub/%j.out" \
    "$top_srcdir/experiments/sweep.sbatch" "$top_srcdir/experiments/ddp_bucketed.cfg" \
    --only bucket_mb=1 --out-dir "$sub/data")
  check "sbatch takes experiments/sweep.sbatch" [ -n "$jid" ]
  n=0
  while [ -n "$(squeue -h -j "$jid" 2> /dev/null)" ] && [ $n -lt 300 ]; do
    sleep 1; n=$((n + 1))
  done
  check "the batch job wrote both jobs' rows" [ "$(rows "$sub/data/ddp_bucketed.csv")" -eq 2 ]
  check "both ok" [ "$(column "$sub/data/ddp_bucketed.csv" status | sort -u)" = ok ]
else
  echo "note: no SLURM cluster answers here (sbatch, sinfo): the batch script is not run"
fi
finish
