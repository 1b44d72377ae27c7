#!/bin/sh
# Writeup section 4 (optimizer_state_sharding_accounting): (a) peak memory
# after init, before and after the first optimizer step, by tag, for the
# model's own AdamW, the handout's sharded optimizer and ZeRO-1; (b) step
# time with and without sharding; (c) communication volume of each form;
# and the issue's goals for ZeRO-1.
#
# Environment (mkreport.sh sets it): DATA, CSV (default
# DATA/optimizer_state_sharding_accounting.csv), OUT, CSVTOOL, GNUPLOT
# (unused: tables only). Memory is the CUDA engine's own accounting of
# rank 0 (every allocation, by tag), in GiB = 2^30 bytes.
set -eu
LC_ALL=C
export LC_ALL

csv="${CSV:-$DATA/optimizer_state_sharding_accounting.csv}"
. "$REPORT_LIB"
# v OPT PREC WS COL [BUCKET]: the latest ok row's value at that bucket size
# (default: $bucket, set below), or empty.
v() {
  tool value "$csv" --sort -utc --agg first --default "" --where status=ok \
    --where optimizer="$1" --where precision="$2" --where world_size="$3" \
    --where bucket_mb="${5:-$bucket}" --col "$4"
}
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

echo "## 4 optimizer_state_sharding_accounting: memory, time and communication"
echo
if [ ! -f "$csv" ] || [ "$(tool count "$csv" --where status=ok)" -eq 0 ]; then
  echo "_Not yet measured: run \`./runner experiments/optimizer_state_sharding_accounting.cfg\`"
  echo "on 2 GPUs, then \`make report\`._"
  echo
  exit 0
fi
cfg=$(tool distinct "$csv" --cols size,context,rank_batch,strategy --where status=ok --sep ' ' | head -n 1)
buckets=$(tool distinct "$csv" --cols bucket_mb --where status=ok | sort -g | tr '\n' ' ')
# The bucket size the text and the memory table quote: ZeRO-1's fastest
# (fp32, 2 GPUs); every size has its rows in (b).
bucket=$(tool value "$csv" --sort step_ms_mean --agg first --default "" --where status=ok \
  --where optimizer=zero1 --where precision=fp32 --where world_size=2 --col bucket_mb)
[ -n "$bucket" ] || bucket=$(echo "$buckets" | awk '{ print $1 }')
# Section 3.2's bucketed DDP (ddp_bucketed_benchmarking): the bucket size of
# its fastest 2-GPU row per precision and that size's latest row, as 3.2's
# comparison table picks them (k_row PREC COL), and the NCCL / cuBLAS
# settings its rows ran with, against this section's.
kcsv="$DATA/ddp_bucketed_benchmarking.csv"
k_row() {
  [ -f "$kcsv" ] || return 0
  k_bm=$(tool value "$kcsv" --where status=ok --where precision="$1" --where world_size=2 \
    --sort step_ms_mean --agg first --default "" --col bucket_mb)
  [ -n "$k_bm" ] || return 0
  tool value "$kcsv" --sort -utc --agg first --default "" --where status=ok --where precision="$1" \
    --where world_size=2 --where bucket_mb="$k_bm" --col "$2"
}
# settings CTAS RESERVE: the two settings in words.
settings() {
  if [ "$1" = 0 ]; then printf "NCCL's default thread blocks per collective"; else printf '%s thread blocks per collective' "$1"; fi
  if [ "$2" = 0 ]; then printf ', no SMs reserved'; else printf ', products shaped for the SMs minus %s' "$2"; fi
}
own_set=$(tool distinct "$csv" --cols nccl_max_ctas,gemm_sm_reserve --where status=ok --sep ' ' |
  while read -r c r; do [ -n "$c" ] && settings "$c" "$r" && echo; done | sort -u | awk 'NF { printf "%s%s", (n++ ? "; " : ""), $0 }')
k_set=""
k_c=$(k_row fp32 nccl_max_ctas); k_r=$(k_row fp32 gemm_sm_reserve)
[ -z "$k_c" ] || k_set=$(settings "$k_c" "$k_r")
# shellcheck disable=SC2086 # split the fields
set -- $cfg
machine=$(tool distinct "$csv" --cols machine --where status=ok | head -n 1)
if [ -z "$k_set" ]; then
  same="section 3.2 has no bucketed rows to set beside them"
elif [ "$k_set" = "$own_set" ]; then
  same="the same settings as section 3.2's bucketed rows"
else
  same="section 3.2's fastest bucketed rows ran with $k_set, so
their step times are compared here with this section's own unsharded rows"
fi
cat <<EOF
The model, context and per-GPU batch of section 3.2 ($1, context $2, $3 sequences per GPU,
$4 DDP with buckets of $(echo "$buckets" | sed 's/ *$//; s/ / and /g') MiB, on $machine), with three optimizers:
**AdamW, unsharded** (the model's own, both moments for every parameter on
every rank); **sharded (handout)**, the handout's form: whole tensors
assigned to ranks in contiguous runs balanced by size, each rank keeping
AdamW moments for its own tensors only, gradients all-reduced in full, and
each owner broadcasting its updated tensors after the step; **ZeRO-1**:
each gradient bucket reduce-scattered instead of all-reduced, AdamW on this
rank's 1/W of every bucket, the updated chunks all-gathered. At one GPU
every optimizer is the model's own (parallel/ddp.h), so those rows are the
single-GPU baseline three times. Memory is rank 0's, from the engine's
accounting: peaks after model and optimizer creation, just before and just
after the first optimizer step, and what each tag holds at the end.
Memory does not depend on the bucket size; (a) and (c) show the
$(calc %g "$bucket") MiB rows (ZeRO-1's fastest), (b) every size. These rows ran with
$own_set; $same.

EOF

# ---- (a) memory --------------------------------------------------------------
echo "### (a) Peak memory (GiB)"
echo
echo "| optimizer | precision | GPUs | after init | before step | after step | parameters | gradients | optimizer state | activations |"
echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
for p in fp32 bf16; do
  for o in adamw sharded zero1; do
    for w in 1 2; do
      [ -n "$(v $o $p $w step_ms_mean)" ] || continue
      echo "| $(name $o) | $p | $w | $(gib "$(v $o $p $w mem_init_mib)") | $(gib "$(v $o $p $w mem_before_opt_mib)") | $(gib "$(v $o $p $w mem_after_opt_mib)") | $(gib "$(v $o $p $w params_mib)") | $(gib "$(v $o $p $w grads_mib)") | $(gib "$(v $o $p $w optstate_mib)") | $(gib "$(v $o $p $w activations_mib)") |"
    done
  done
done
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
if [ -n "$a_init" ] && [ -n "$s_init" ] && [ -n "$z_state" ]; then
  for x in "$a_init" "$a_after" "$a_state" "$s_init" "$s_after" "$s_state" "$z_after" "$z_state" "$par" "$gr"; do
    num "a memory figure" "$x"
  done
  cat <<EOF
What the numbers show (fp32, 2 GPUs): parameters ($(gib "$par") GiB) and gradients
($(gib "$gr") GiB) are the same in every form, fp32 and full on every rank (ZeRO-1
reduce-scatters in place, so the full gradient buffer stays). The AdamW
moments go from $(gib "$a_state") GiB unsharded to $(gib "$s_state") GiB (sharded) and $(gib "$z_state") GiB
(ZeRO-1) per rank. "After init" differs for a reason other than sharding:
the sharded optimizers allocate their shard of the moments when they are
created ($(gib "$s_init") GiB after init), while the unsharded AdamW allocates its
moments at the first step ($(gib "$a_init") GiB after init, $(gib "$a_after") GiB after the step). Compare
the peaks after the step: $(gib "$a_after") GiB unsharded against $(gib "$s_after") (sharded) and
$(gib "$z_after") GiB (ZeRO-1), $(gib "$(calc %.3f "$a_after - $z_after")") GiB less, which is the half of the moments
the other rank now holds. Activations are the same throughout
($(gib "$(v adamw $p 2 activations_mib)") GiB at this batch); bf16 moves the peak before the step by
$(calc %.0f "$(v adamw bf16 2 mem_before_opt_mib) - $(v adamw fp32 2 mem_before_opt_mib)") MiB (unsharded).

EOF
fi

# ---- (b) time ----------------------------------------------------------------------
echo "### (b) Time per step (ms)"
echo
echo "| optimizer | precision | bucket (MiB) | 1-GPU step | 2-GPU step | vs unsharded (2 GPUs, same bucket) | backward | grad comm | optimizer | parameter comm |"
echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
for p in fp32 bf16; do
  for bk in $buckets; do
    base=$(v adamw $p 2 step_ms_mean "$bk")
    for o in adamw sharded zero1; do
      s2=$(v $o $p 2 step_ms_mean "$bk")
      [ -n "$s2" ] || continue
      rel="-"
      [ -z "$base" ] || rel=$(calc '%+.1f%%' "100 * ($s2 / $base - 1)")
      echo "| $(name $o) | $p | $(calc %g "$bk") | $(ms "$(v $o $p 1 step_ms_mean "$bk")") | $(ms "$s2") | $rel | $(ms "$(v $o $p 2 bwd_ms_mean "$bk")") | $(ms "$(v $o $p 2 grad_comm_ms_mean "$bk")") | $(ms "$(v $o $p 2 opt_ms_mean "$bk")") | $(ms "$(v $o $p 2 param_comm_ms_mean "$bk")") |"
    done
  done
done
echo
echo "Optimizer is AdamW plus the parameter collectives (from the optimizer's"
echo "start to the last one's end); parameter comm is their summed durations."
echo "ZeRO-1 updates a bucket's chunk and all-gathers it while AdamW runs on"
echo "the next bucket (parallel/ddp_optim.c); with fewer, larger buckets the"
echo "all-gathers run closer to NCCL's full bandwidth, and the reduce-scatters"
echo "during backward hand half the bytes of an all-reduce to the network."
echo

# ---- (c) communication -------------------------------------------------------------
echo "### (c) Communication per step and rank (MiB), and how the handout's form differs from ZeRO-1"
echo
echo "| optimizer | gradient collectives | handed to gradient collectives | handed to parameter collectives | sent per rank (ring algorithms) |"
echo "|---|---|--:|--:|--:|"
for o in adamw sharded zero1; do
  [ -n "$(v $o fp32 2 wire_mib)" ] || continue
  case $o in
    zero1) how="reduce-scatter per bucket; all-gather per bucket" ;;
    sharded) how="all-reduce per bucket; one broadcast per owner" ;;
    *) how="all-reduce per bucket" ;;
  esac
  echo "| $(name $o) | $how | $(calc %.0f "$(v $o fp32 2 grad_comm_mib)") | $(calc %.0f "$(v $o fp32 2 param_comm_mib)") | $(calc %.0f "$(v $o fp32 2 wire_mib)") |"
done
echo
aw=$(v adamw fp32 2 wire_mib)
sw=$(v sharded fp32 2 wire_mib)
zw=$(v zero1 fp32 2 wire_mib)
if [ -n "$aw" ] && [ -n "$sw" ] && [ -n "$zw" ]; then
  # Rank 0's moments under the handout's whole-tensor split against
  # ZeRO-1's even one: the difference, at the CSV's precision.
  bal_s=$(v sharded fp32 2 optstate_mib); bal_z=$(v zero1 fp32 2 optstate_mib)
  balance="the rows do not show rank 0's share"
  if [ -n "$bal_s" ] && [ -n "$bal_z" ]; then
    num "the sharded optimizer state" "$bal_s"; num "ZeRO-1's optimizer state" "$bal_z"
    bal_d=$(calc %.2f "$bal_s - $bal_z")
    if is_true "$bal_d < 0"; then bal_d=$(calc %.2f "-($bal_d)"); bal_dir="less"; else bal_dir="more"; fi
    balance="rank 0 holds $(calc %.2f "$bal_s") MiB of moments against ZeRO-1's even
split of $(calc %.2f "$bal_z") MiB, $bal_d MiB $bal_dir"
    if is_true "$bal_d < 1"; then
      balance="$balance: for this model's tensors the
whole-tensor split is even to within 1 MiB"
    fi
  fi
  cat <<EOF
Sent per rank counts ring algorithms with W ranks and S bytes: all-reduce
2(W-1)/W S, reduce-scatter and all-gather (W-1)/W S each, a broadcast
(W-1)/W S averaged over ranks. The handout's form keeps DDP's full
all-reduce and adds the broadcasts of the updated parameters: $(calc %.2f "$sw / $aw") x plain
DDP's traffic ($(calc %.0f "$sw") against $(calc %.0f "$aw") MiB). ZeRO-1 splits the all-reduce into its
two halves and puts the optimizer between them, so it sends exactly what
DDP sends ($(calc %.0f "$zw") MiB). Both keep full gradients here (ZeRO-1 could free all but
its shard after the reduce-scatter, which ours does not), and both hold
1/W of the AdamW moments; the handout's form shards by whole tensors, so
its balance depends on tensor sizes: $balance.

EOF
fi

# ---- goals ---------------------------------------------------------------------------
echo "### Goals"
echo
# best OPT PREC: the bucket size of that optimizer's fastest 2-GPU step.
best() {
  tool value "$csv" --sort step_ms_mean --agg first --default "" --where status=ok \
    --where optimizer="$1" --where precision="$2" --where world_size=2 --col bucket_mb
}
# best2 CSV PREC: the fastest ok 2-GPU step of that file, or empty.
best2() {
  [ -f "$1" ] || return 0
  tool value "$1" --sort step_ms_mean --agg first --default "" --where status=ok \
    --where precision="$2" --where world_size=2 --col step_ms_mean
}
W=2 # the world size of every row the goals compare
for p in fp32 bf16; do
  ab=$(best adamw $p)
  zb=$(best zero1 $p)
  a=$(v adamw $p 2 step_ms_mean "$ab")
  z=$(v zero1 $p 2 step_ms_mean "$zb")
  as=$(v adamw $p 2 optstate_mib "$ab")
  zs=$(v zero1 $p 2 optstate_mib "$zb")
  if [ -z "$a" ] || [ -z "$z" ] || [ -z "$as" ] || [ -z "$zs" ]; then
    echo "- $p: no unsharded and ZeRO-1 2-GPU rows yet."
    continue
  fi
  for x in "$a" "$z" "$as" "$zs"; do num "a $p measurement" "$x"; done
  pct=$(calc %.1f "100 * ($z / $a - 1)")
  if is_true "$z <= 1.05 * $a"; then
    g1="**met**: $(calc %.1f "$z") ms ($(calc %g "$zb") MiB buckets) against $(calc %.1f "$a") ms, the best of this section's unsharded bucketed DDP rows ($(calc %g "$ab") MiB buckets), $(calc %+.1f "$pct")%."
  else
    zo=$(v zero1 $p 2 opt_ms_mean "$zb")
    ao=$(v adamw $p 2 opt_ms_mean "$ab")
    zp=$(v zero1 $p 2 param_comm_ms_mean "$zb")
    g1="**not met**: $(calc %.1f "$z") ms against $(calc %.1f "$a") ms, the best of this section's unsharded bucketed DDP rows, $pct% slower ($(calc %.1f "$z - 1.05 * $a") ms over the $(calc %.1f "1.05 * $a") ms allowed). The optimizer phase grows from $(calc %.1f "$ao") to $(calc %.1f "$zo") ms: AdamW runs on half the parameters, but the all-gathers of the updated chunks take $(calc %.1f "$zp") ms, each after its bucket's AdamW, so they, not AdamW, bound the phase."
  fi
  ratio=$(calc %.3f "$as / $zs")
  if is_true "$ratio >= $W - 0.01 && $ratio <= $W + 0.01"; then
    g2="**met**: $(gib "$zs") GiB per rank against $(gib "$as") GiB unsharded, divided by $ratio."
  else
    g2="**not met**: $(gib "$zs") GiB per rank against $(gib "$as") GiB unsharded, divided by $ratio."
  fi
  echo "- $p. \"ZeRO-1 step time within 5% of bucketed DDP\": $g1"
  # Section 3.2's fastest bucketed row beside it (other settings: see above).
  k=$(k_row $p step_ms_mean)
  if [ -n "$k" ]; then
    num "a ddp_bucketed_benchmarking step" "$k"
    if is_true "$z <= 1.05 * $k"; then kw="within 5% of it too"; else kw="more than 5% over it"; fi
    echo "  Section 3.2's fastest bucketed DDP step is $(calc %.1f "$k") ms ($(calc %g "$(k_row $p bucket_mb)") MiB buckets, $(settings "$(k_row $p nccl_max_ctas)" "$(k_row $p gemm_sm_reserve)")); ZeRO-1's $(calc %.1f "$z") ms here is $(calc %+.1f "100 * ($z / $k - 1)")%, $kw."
  fi
  echo "  \"Optimizer-state memory per rank divided by the world size\" ($W): $g2"
  # The same comparison between the copy-engine forms of the ddp section
  # (ddp_copy_engine: DDP with gradients all-gathered; zero1_copy_engine).
  cez=$(best2 "$DATA/zero1_copy_engine.csv" $p)
  cea=$(best2 "$DATA/ddp_copy_engine.csv" $p)
  if [ -n "$cez" ] && [ -n "$cea" ]; then
    echo "  With the gradients on the copy engines (the ddp section), ZeRO-1's best 2-GPU step is $(calc %.1f "$cez") ms against DDP's $(calc %.1f "$cea") ms, $(calc %+.1f "100 * ($cez / $cea - 1)")%."
  fi
done
echo

failed_jobs "$csv" optimizer,precision,world_size,status,message \
  "optimizer,precision,GPUs,status,message"
