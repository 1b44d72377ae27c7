#!/bin/bash
# There, after refresh.sh, on a machine of several GPUs (run it under
# bg.sh: it outlasts one call): the rows that wait for a multi-GPU loan,
# re-measured into .devres/data beside the committed rows (run_exps.sh,
# RESUME=1), returned as $OUT/res.tgz (under bg.sh, inside r.tgz).
# - 4 GPUs or more: allreduce's NCCL rows at world sizes 4, 6, 8, as
#   many as the GPUs allow (their committed rows come from a dirty tree).
# - 2 GPUs or more: collectives' NCCL sweep at the world sizes the GPUs
#   allow (2, 4, 6, 8; about 5 s a job) and PyTorch's at the same world
#   sizes (reports/anchors/torch_collectives.py, appended to a copy of the
#   committed collectives_torch.csv in .devres, which collect.sh brings
#   back), then leaderboard_2026's rows that keep attention through the
#   reruns (the attention kernels have become faster since they were
#   measured), about 1.5 min a job: first the 6 that gather once a group
#   (the writeup's best time), then the 6 resharded (its best within
#   PyTorch's memory) while BUDGET lasts; LB_ARGS replaces both
#   selections with one. Before those, PyTorch's fp32 DDP with and without
#   CUDA graphs on 1 and 2 GPUs (torch_ddp.py --resume, into a copy of
#   torch_ddp.csv in .devres, as collectives_torch.csv).
# Here: PARTIAL=ok sh dev/device/collect.sh on that res.tgz, then make
# report.
#   WAIT=540 bash dev/device/bg.sh dev/device/multi_gpu.sh
set -u
d=$(dirname "$0")
# under bg.sh each experiment's tarball goes where a poll returns it
[ ! -d /tmp/res ] || export OUT=/tmp/res
n=$(nvidia-smi -L 2> /dev/null | wc -l)
echo "GPUs: $n"
[ "$n" -ge 2 ] || { echo "multi_gpu.sh: needs 2 GPUs or more"; exit 1; }
ws=
for w in 4 6 8; do [ "$n" -lt $w ] || ws=${ws:+$ws,}$w; done
if [ -n "$ws" ]; then
  RESUME=1 EXPS=allreduce BUDGET=300 \
    RUNNER_ARGS="--force --only backend=nccl --only world_size=$ws" bash "$d/run_exps.sh"
fi
cws=2${ws:+,$ws}
RESUME=1 EXPS=collectives BUDGET=400 RUNNER_ARGS="--only world_size=$cws" bash "$d/run_exps.sh"
anchor=.devres/collectives_torch.csv
[ -f "$anchor" ] || cp reports/anchors/collectives_torch.csv "$anchor"
for w in ${cws//,/ }; do
  (cd reports/anchors && timeout -s INT -k 15 300 \
     torchrun --standalone --nproc_per_node="$w" torch_collectives.py --resume "../../$anchor") \
    > ".devres/logs/torch_collectives.$w.log" 2>&1
  echo "torch_collectives ws $w: rc $?, $(($(wc -l < "$anchor") - 1)) rows"
done
# PyTorch's fp32 DDP in both CUDA-graph forms at the writeup's bucket size
# (its 2-GPU fp32 step was measured without graphs only)
ddpa=.devres/torch_ddp.csv
[ -f "$ddpa" ] || cp reports/anchors/torch_ddp.csv "$ddpa"
(cd reports/anchors && NCCL_NVLS_ENABLE=0 timeout -s INT -k 15 600 \
   torchrun --standalone --nproc_per_node=2 torch_ddp.py "../../$ddpa" \
   --configs compiled,compiled_cudagraphs --precisions fp32 --buckets 25 --resume) \
  > .devres/logs/torch_ddp.log 2>&1
echo "torch_ddp fp32: rc $?, $(($(wc -l < "$ddpa") - 1)) rows"
tar czf "$OUT/res.tgz" .devres
end=$((SECONDS + ${BUDGET:-1200}))
keep="--only checkpoint_keep_attention=true"
sels=("$keep --only reshard_after_forward=false" "$keep --only reshard_after_forward=true")
[ -z "${LB_ARGS:-}" ] || sels=("$LB_ARGS")
for sel in "${sels[@]}"; do
  RESUME=1 EXPS=leaderboard_2026 BUDGET=$((end - SECONDS)) \
    RUNNER_ARGS="--force $sel" bash "$d/run_exps.sh"
done
