#!/bin/sh
# Writeup section 3.2 optimizer_state_sharding_accounting (PROBLEM), its body
# only (mkreport.sh prints the heading): (a) peak memory after init, before
# and after the first optimizer step, by tag, for the model's own AdamW,
# the handout's sharded optimizer and ZeRO-1; (b) step time with and
# without sharding; (c) how the handout's form differs from ZeRO-1, with
# the communication volume of each.
#
# Environment (mkreport.sh sets it): PROBLEM, DATA, CSV (default
# DATA/optimizer_state_sharding_accounting.csv), OUT, CSVTOOL, GNUPLOT
# (unused: tables only), REPORT_LIB. Memory is the CUDA engine's own
# accounting of rank 0 (every allocation, by tag), in GiB = 2^30 bytes.
set -eu
. "$REPORT_LIB"
case ${PROBLEM:-} in
  optimizer_state_sharding_accounting) ;;
  *)
    echo "optimizer_state_sharding.sh: unknown PROBLEM \"${PROBLEM:-}\" (optimizer_state_sharding_accounting)" >&2
    exit 1 ;;
esac
csv="${CSV:-$DATA/optimizer_state_sharding_accounting.csv}"
require_rows "$csv" optimizer_state_sharding_accounting "on 2 GPUs"
# v OPT PREC WS COL [BUCKET]: the latest ok row's value at that bucket size
# (default: $bucket, set below), or empty.
memo V "$csv" optimizer,precision,world_size,bucket_mb \
  step_ms_mean,bwd_ms_mean,opt_ms_mean,grad_comm_ms_mean,param_comm_ms_mean,grad_comm_mib,param_comm_mib,wire_mib,params_mib,grads_mib,optstate_mib,activations_mib,mem_init_mib,mem_before_opt_mib,mem_after_opt_mib \
  --where status=ok --sort -utc
v() { memo_get V "$1" "$2" "$3" "${5:-$bucket}" "$4"; printf '%s\n' "$MV"; }
gib() { [ -n "$1" ] && calc %.2f "$1 / 1024" || printf -- '-'; }
ms() { [ -n "$1" ] && calc %.1f "$1" || printf -- '-'; }
name() {
  case $1 in
    adamw) printf 'AdamW, unsharded' ;;
    sharded) printf 'sharded (handout)' ;;
    zero1) printf 'ZeRO-1' ;;
    *) printf '%s' "$1" ;;
  esac
}
# rel A B: A against B as a signed percentage.
rel() { calc '%+.1f%%' "100 * ($1 / $2 - 1)"; }

cfg=$(tool distinct "$csv" --cols size,context,rank_batch,strategy --where status=ok --sep ' ' | head -n 1)
buckets=$(tool distinct "$csv" --cols bucket_mb --where status=ok | sort -g | tr '\n' ' ')
# The bucket size the answers and the memory table quote: ZeRO-1's fastest
# (fp32, 2 GPUs); every size has its rows in (b).
bucket=$(tool value "$csv" --sort step_ms_mean --agg first --default "" --where status=ok \
  --where optimizer=zero1 --where precision=fp32 --where world_size=2 --col bucket_mb)
[ -n "$bucket" ] || bucket=$(echo "$buckets" | awk '{ print $1 }')
machine=$(tool distinct "$csv" --cols machine --where status=ok | head -n 1)
# shellcheck disable=SC2086 # split the fields
set -- $cfg
c_size=$1 c_ctx=$2 c_b=$3

# ---- (a) memory --------------------------------------------------------------
echo "### (a) Peak memory with and without sharding"
echo
p=fp32
a_init=$(v adamw $p 2 mem_init_mib)
a_after=$(v adamw $p 2 mem_after_opt_mib)
a_state=$(v adamw $p 2 optstate_mib)
s_init=$(v sharded $p 2 mem_init_mib)
s_after=$(v sharded $p 2 mem_after_opt_mib)
s_state=$(v sharded $p 2 optstate_mib)
z_after=$(v zero1 $p 2 mem_after_opt_mib)
z_state=$(v zero1 $p 2 optstate_mib)
par=$(v adamw $p 2 params_mib)
gr=$(v adamw $p 2 grads_mib)
act=$(v adamw $p 2 activations_mib)
if [ -n "$a_init" ] && [ -n "$s_init" ] && [ -n "$z_state" ] && [ -n "$z_after" ]; then
  for x in "$a_init" "$a_after" "$a_state" "$s_init" "$s_after" "$s_state" "$z_after" "$z_state" "$par" "$gr" "$act"; do
    num "a memory figure" "$x"
  done
  cat <<EOF
As expected, sharding halves only the AdamW moments on 2 GPUs: $(gib "$a_state") GiB per
rank unsharded against $(gib "$s_state") GiB (sharded) and $(gib "$z_state") GiB (ZeRO-1), so the peak after the
optimizer step falls from $(gib "$a_after") to $(gib "$s_after") and $(gib "$z_after") GiB (fp32), while the
parameters ($(gib "$par") GiB), the gradients ($(gib "$gr") GiB, full on every rank in both
forms) and the activations ($(gib "$act") GiB) stay as they are. "After init" is
higher when sharded ($(gib "$s_init") against $(gib "$a_init") GiB) only because the sharded optimizers
allocate their moments when created, the unsharded AdamW at its first step.

EOF
fi
echo "| optimizer | precision | GPUs | after init | before step | after step | parameters | gradients | optimizer state | activations |"
echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
for p in fp32 bf16; do
  # At one GPU every optimizer is the model's own AdamW: one row.
  if [ -n "$(v adamw $p 1 step_ms_mean)" ]; then
    o=adamw w=1
    echo "| any (one GPU: the model's own AdamW) | $p | 1 | $(gib "$(v $o $p $w mem_init_mib)") | $(gib "$(v $o $p $w mem_before_opt_mib)") | $(gib "$(v $o $p $w mem_after_opt_mib)") | $(gib "$(v $o $p $w params_mib)") | $(gib "$(v $o $p $w grads_mib)") | $(gib "$(v $o $p $w optstate_mib)") | $(gib "$(v $o $p $w activations_mib)") |"
  fi
  for o in adamw sharded zero1; do
    w=2
    [ -n "$(v $o $p $w step_ms_mean)" ] || continue
    echo "| $(name $o) | $p | 2 | $(gib "$(v $o $p $w mem_init_mib)") | $(gib "$(v $o $p $w mem_before_opt_mib)") | $(gib "$(v $o $p $w mem_after_opt_mib)") | $(gib "$(v $o $p $w params_mib)") | $(gib "$(v $o $p $w grads_mib)") | $(gib "$(v $o $p $w optstate_mib)") | $(gib "$(v $o $p $w activations_mib)") |"
  done
done
echo
cat <<EOF
Rank 0's peaks in GiB by allocation tag (the engine's accounting;
"optimizer state": the AdamW moments): $c_size model, context $c_ctx, $c_b sequences per GPU, $4 DDP
with $(calc %g "$bucket") MiB buckets, on $machine.
**Sharded (handout)**: whole tensors owned by ranks, balanced by size;
gradients all-reduced in full, each owner updating and broadcasting its
tensors. **ZeRO-1**: each gradient bucket reduce-scattered, AdamW on the
rank's 1/W of it, the updated chunks all-gathered.

EOF

# ---- (b) time ----------------------------------------------------------------------
echo "### (b) Time per step with and without sharding"
echo
sent=""
for p in fp32 bf16; do
  a=$(v adamw $p 2 step_ms_mean); s=$(v sharded $p 2 step_ms_mean); z=$(v zero1 $p 2 step_ms_mean)
  [ -n "$a" ] && [ -n "$s" ] && [ -n "$z" ] || continue
  for x in "$a" "$s" "$z"; do num "a $p step" "$x"; done
  sent="$sent${sent:+; }$p: $(ms "$a") ms unsharded, $(ms "$s") ms sharded ($(rel "$s" "$a")) and $(ms "$z") ms ZeRO-1 ($(rel "$z" "$a"))"
done
sp=$(v sharded fp32 2 param_comm_ms_mean); so=$(v sharded fp32 2 opt_ms_mean); ao=$(v adamw fp32 2 opt_ms_mean)
zg=$(v zero1 fp32 2 grad_comm_ms_mean); ag=$(v adamw fp32 2 grad_comm_ms_mean)
if [ -n "$sent" ] && [ -n "$sp" ] && [ -n "$so" ] && [ -n "$ao" ] && [ -n "$zg" ] && [ -n "$ag" ]; then
  cat <<EOF
Sharding costs time on 2 GPUs at $(calc %g "$bucket") MiB buckets: $sent.
The handout's form runs AdamW on half the parameters but then broadcasts
them ($(ms "$sp") ms of parameter collectives in fp32), so its optimizer phase grows
from $(ms "$ao") to $(ms "$so") ms; ZeRO-1 pays nearly the same all-gathers but overlaps each
with the next bucket's AdamW, and its reduce-scatters during backward take
$(ms "$zg") ms against the all-reduces' $(ms "$ag") ms.

EOF
fi
echo "| optimizer | precision | bucket (MiB) | 1-GPU step (ms) | 2-GPU step (ms) | vs unsharded (2 GPUs, same bucket) | backward (ms) | grad comm (ms) | optimizer (ms) | parameter comm (ms) |"
echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
for p in fp32 bf16; do
  for bk in $buckets; do
    base=$(v adamw $p 2 step_ms_mean "$bk")
    for o in adamw sharded zero1; do
      s2=$(v $o $p 2 step_ms_mean "$bk")
      [ -n "$s2" ] || continue
      r="-"
      [ -z "$base" ] || r=$(rel "$s2" "$base")
      echo "| $(name $o) | $p | $(calc %g "$bk") | $(ms "$(v $o $p 1 step_ms_mean "$bk")") | $(ms "$s2") | $r | $(ms "$(v $o $p 2 bwd_ms_mean "$bk")") | $(ms "$(v $o $p 2 grad_comm_ms_mean "$bk")") | $(ms "$(v $o $p 2 opt_ms_mean "$bk")") | $(ms "$(v $o $p 2 param_comm_ms_mean "$bk")") |"
    done
  done
done
echo
echo "Optimizer is AdamW plus the parameter collectives (from the optimizer's"
echo "start to the last one's end); parameter comm is their summed durations."
echo "At one GPU every optimizer is the model's own AdamW."
echo

# ---- (c) communication -------------------------------------------------------------
echo "### (c) How the handout's sharding differs from ZeRO stage 1"
echo
aw=$(v adamw fp32 2 wire_mib)
sw=$(v sharded fp32 2 wire_mib)
zw=$(v zero1 fp32 2 wire_mib)
if [ -n "$aw" ] && [ -n "$sw" ] && [ -n "$zw" ]; then
  for x in "$aw" "$sw" "$zw"; do num "a communication volume" "$x"; done
  # Rank 0's moments under the handout's whole-tensor split against
  # ZeRO-1's even one.
  bal_s=$(v sharded fp32 2 optstate_mib); bal_z=$(v zero1 fp32 2 optstate_mib)
  balance=""
  if [ -n "$bal_s" ] && [ -n "$bal_z" ]; then
    num "the sharded optimizer state" "$bal_s"; num "ZeRO-1's optimizer state" "$bal_z"
    bal_d=$(calc %.2f "$bal_s - $bal_z")
    if is_true "$bal_d < 0"; then bal_d=$(calc %.2f "-($bal_d)"); fi
    balance=" (for this model rank 0's share differs from an even split by $bal_d MiB)"
  fi
  cat <<EOF
Communication: the handout's form keeps DDP's full all-reduce of the
gradients and then broadcasts each owner's updated tensors, $(calc %.2f "$sw / $aw") x DDP's
traffic per rank ($(calc %.0f "$sw") against $(calc %.0f "$aw") MiB); ZeRO-1 splits the all-reduce into its
reduce-scatter and all-gather halves with the update between them, so it
sends exactly what DDP sends ($(calc %.0f "$zw") MiB). Memory: both hold 1/W of the AdamW
moments, but the handout shards whole tensors, so its balance depends on
the tensor sizes$balance, and ZeRO-1's reduce-scatter lets a rank keep
only its 1/W of the gradients (ours keeps the full buffer, as the handout's
all-reduce must).

EOF
fi
echo "| optimizer | gradient collectives | parameter collectives | handed to gradient collectives (MiB) | handed to parameter collectives (MiB) | sent per rank, ring algorithms (MiB) |"
echo "|---|---|---|--:|--:|--:|"
for o in adamw sharded zero1; do
  [ -n "$(v $o fp32 2 wire_mib)" ] || continue
  case $o in
    zero1) how="reduce-scatter per bucket | all-gather per bucket" ;;
    sharded) how="all-reduce per bucket | one broadcast per owner" ;;
    *) how="all-reduce per bucket | none" ;;
  esac
  echo "| $(name $o) | $how | $(calc %.0f "$(v $o fp32 2 grad_comm_mib)") | $(calc %.0f "$(v $o fp32 2 param_comm_mib)") | $(calc %.0f "$(v $o fp32 2 wire_mib)") |"
done
echo
echo "Sent per rank counts ring algorithms with W ranks and S bytes: all-reduce"
echo "2(W-1)/W S, reduce-scatter and all-gather (W-1)/W S each, a broadcast"
echo "(W-1)/W S averaged over ranks."
echo

failed_jobs "$csv" optimizer,precision,world_size,status,message \
  "optimizer,precision,GPUs,status,message"
