#!/bin/sh
# Writeup sections 2.2.2 naive_ddp_benchmarking, 2.3.1
# minimal_ddp_flat_benchmarking, 2.3.3
# ddp_overlap_individual_parameters_benchmarking (a, b), 2.3.5
# ddp_bucketed_benchmarking (a, b) and the appendix ddp_appendix: the body of
# the problem named by PROBLEM only (mkreport.sh prints its heading).
#
#   naive / flat / overlap (a): the strategy's rows, 1 and 2 GPUs, and the
#     answer read from them; overlap (b): the per-rank timeline of one step,
#     naive against overlapped (OUT/ddp_timeline.svg, reports/ddp_timeline.gp),
#     from the runs' samples (NAME.samples.jsonl): r0_bwd_ms / r1_bwd_ms =
#     backward's start, then the moment each gradient was final;
#     r0_grad_comm_ms / r1_... = start, end of each gradient collective
#     (jobs/ddp.c, timeline()).
#   bucketed (a): the rows per bucket size, the answer, PyTorch beside them;
#     (b): the overhead model fitted to DATA/allreduce.csv
#     (OUT/ddp_buckets.svg, reports/ddp_buckets.gp).
#   ddp_appendix: how DDP reached its scaling: the strategies against the
#     strongest PyTorch, why backward slows beside the all-reduces
#     (ddp_nccl_ctas, ddp_sm_reserve, ddp_contention), the copy-engine forms
#     (ddp_copy_engine, zero1_copy_engine, zero1_batch_scaling).
#
# Environment (mkreport.sh sets it): PROBLEM, CSV (the problem's own CSV;
# the others are read from DATA), DATA, OUT, CSVTOOL, GNUPLOT (empty: no
# figures), REPORT_LIB. PyTorch: reports/anchors/torch_ddp.csv's rows from
# our GPU (reports/anchors/torch_ddp.py: DDP + torch.compile + fused AdamW,
# the strongest anchor) where it has them, else the same configuration's numbers
# copied into reports/anchors/ddp_pytorch_compiled.csv; and
# reports/anchors/ddp_pytorch.csv (eager, older).
#
# Scaling efficiency = 1-GPU step / 2-GPU step at the same per-GPU batch
# (weak scaling: 1.00 means the second GPU's batch came for free).
# Overhead model (handout ddp_bucketed_benchmarking (b)), s bytes of
# gradients in n_b buckets, all-reduce time o + x / w for x bytes:
#   overhead = n_b o + s / (n_b w),  n_b* = sqrt(s / (o w)),
#   b* = s / n_b* = sqrt(s o w),     overhead(b*) = 2 sqrt(s o / w).
set -eu
. "$REPORT_LIB"

naive="$DATA/naive_ddp_benchmarking.csv"
flat="$DATA/minimal_ddp_flat_benchmarking.csv"
overlap="$DATA/ddp_overlap_individual_parameters_benchmarking.csv"
csv="$DATA/ddp_bucketed_benchmarking.csv"
case ${PROBLEM:-} in
  naive_ddp_benchmarking) naive=${CSV:-$naive}; own=$naive; exp=$PROBLEM ;;
  minimal_ddp_flat_benchmarking) flat=${CSV:-$flat}; own=$flat; exp=$PROBLEM ;;
  ddp_overlap_individual_parameters_benchmarking) overlap=${CSV:-$overlap}; own=$overlap; exp=$PROBLEM ;;
  ddp_bucketed_benchmarking | ddp_appendix) csv=${CSV:-$csv}; own=$csv; exp=ddp_bucketed_benchmarking ;;
  *)
    echo "ddp.sh: unknown PROBLEM \"${PROBLEM:-}\" (naive_ddp_benchmarking, minimal_ddp_flat_benchmarking, ddp_overlap_individual_parameters_benchmarking, ddp_bucketed_benchmarking or ddp_appendix)" >&2
    exit 1 ;;
esac
ar="$DATA/allreduce.csv"
ce="$DATA/ddp_copy_engine.csv"
z1ce="$DATA/zero1_copy_engine.csv"
# the same two forms on the fused path with flash attention (the training
# step's path; every other DDP run is op by op, like for like)
cef="$DATA/ddp_copy_engine_fused.csv"
z1cef="$DATA/zero1_copy_engine_fused.csv"
ctas="$DATA/ddp_nccl_ctas.csv"
smr="$DATA/ddp_sm_reserve.csv"
con="$DATA/ddp_contention.csv"
zbs="$DATA/zero1_batch_scaling.csv"
pt_csv="$REPORTS/anchors/ddp_pytorch_compiled.csv"
pe_csv="$REPORTS/anchors/ddp_pytorch.csv"

require_rows "$own" $exp "on 2 GPUs"
for f in "$pt_csv" "$REPORTS/ddp_timeline.gp" "$REPORTS/ddp_buckets.gp"; do
  [ -f "$f" ] || { echo "ddp.sh: $f is missing" >&2; exit 1; }
done

# POSIX sh has no local variables: every name below is global, so a helper
# only assigns names of its own prefix (v_, tr_, bb_, ...), never one that
# a caller or the main script uses.
# v FILE PREC WS COL [csvtool args]: the latest ok row's value, or empty.
# From a memo (vmemo) where FILE has one and the args are none or one
# bucket (--where bucket_mb=B), else from csvtool.
v() {
  v_f=$1 v_p=$2 v_w=$3 v_c=$4; shift 4
  [ -f "$v_f" ] || return 0
  for v_m in $vmemos; do
    eval "v_mf=\$vm_file_$v_m"
    [ "$v_mf" = "$v_f" ] || continue
    # the args v's memos answer: one bucket, one format
    v_b='' v_fm='' v_ok=1 v_k=''
    for v_a in "$@"; do
      [ -n "$v_k" ] || { v_k=$v_a; continue; }
      case $v_k:$v_a in
        --where:bucket_mb=*) v_b=${v_a#bucket_mb=} ;;
        --fmt:*) v_fm=$v_a ;;
        *) v_ok='' ;;
      esac
      v_k=''
    done
    [ -z "$v_k" ] && [ -n "$v_ok" ] || break
    if [ -z "$v_b" ]; then memo_get "$v_m" "$v_p" "$v_w" "$v_c"
    else memo_get "${v_m}_b" "$v_p" "$v_w" "$v_b" "$v_c"; fi
    if [ -n "$v_fm" ]; then memo_fmt "$v_fm" "$MV"; echo; else printf '%s\n' "$MV"; fi
    return 0
  done
  tool value "$v_f" --sort -utc --agg first --default "" --where status=ok \
    --where precision="$v_p" --where world_size="$v_w" "$@" --col "$v_c"
}
# vmemo NAME FILE: v's memos of FILE: its ok rows, the latest by
# precision and world size (NAME) and by precision, world size and bucket
# (NAME_b), of vcols (memo_get asks csvtool for what a memo lacks: other
# columns, buckets in a file without them). Made for the files a problem
# reads most (a memo costs a few processes; a lookup in it none).
vcols=step_ms_mean,bwd_ms_mean,exposed_comm_ms_mean,grad_collectives,grad_comm_ms_mean,grad_comm_mib,opt_ms_mean,optstate_mib,engine_peak_mib,comm_share,gemm_sm_reserve
vmemos=""
vmemo() {
  [ -f "$2" ] || return 0
  memo "$1" "$2" precision,world_size "$vcols" --where status=ok --sort -utc
  memo "${1}_b" "$2" precision,world_size,bucket_mb "$vcols" --where status=ok --sort -utc
  eval "vm_file_$1=\$2"
  vmemos="$vmemos $1"
}
case $PROBLEM in
  naive_ddp_benchmarking) vm_list="naive" ;;
  minimal_ddp_flat_benchmarking) vm_list="naive flat" ;;
  ddp_overlap_individual_parameters_benchmarking) vm_list="naive flat overlap" ;;
  ddp_bucketed_benchmarking) vm_list="csv flat overlap" ;;
  *) vm_list="ce cef z1ce z1cef zbs csv" ;;
esac
for vm_n in $vm_list; do eval "vmemo V_$vm_n \"\$$vm_n\""; done
# two / one FILE PREC COL [BUCKET]: the 2- and 1-GPU values.
two() { v "$1" "$2" 2 "$3" ${4:+--where bucket_mb="$4"}; }
one() { v "$1" "$2" 1 "$3" ${4:+--where bucket_mb="$4"}; }
# faster_one PREC OURS THEIRS: who is faster on one GPU in PREC, ours
# against PyTorch's step (ms): "PyTorch is 4.1% faster in fp32 (103.4
# against our 107.6 ms)" or "we are 1.05 x faster in fp32 (...)".
faster_one() {
  if is_true "$2 > $3"; then
    echo "PyTorch is $(calc %.1f "100 * ($2 / $3 - 1)")% faster in $1 ($3 against our $(f1 "$2") ms)"
  else
    echo "we are $(calc %.2f "$3 / $2") x faster in $1 ($(f1 "$2") against $3 ms)"
  fi
}
eff() { [ -n "$1" ] && [ -n "$2" ] && calc "%.2f" "$1 / $2" || printf -- '-'; }
# best_bucket PREC [FILE]: the bucket size with the fastest 2-GPU step.
best_bucket() {
  bb_f=${2:-$csv}
  [ -f "$bb_f" ] || return 0
  tool value "$bb_f" --where status=ok --where precision="$1" --where world_size=2 \
    --sort step_ms_mean --agg first --default "" --col bucket_mb
}
# pt PREC WS: PyTorch DDP compiled's step (ms); pe PREC: eager's 2-GPU step;
# pt_peak min|max: its peak GiB per GPU, the least and the most.
pt() { tool value "$pt_csv" --agg first --default "" --where precision="$1" --where world_size="$2" --col step_ms; }
pe() { [ -f "$pe_csv" ] && tool value "$pe_csv" --agg first --default "" --where precision="$1" --col step_ms_median || true; }
pt_peak() { tool value "$pt_csv" --agg first --default "" --col "peak_gib_$1"; }
pt_bm=$(tool value "$pt_csv" --agg first --default "?" --col bucket_mb)
pt_name="PyTorch DDP + torch.compile + fused AdamW ($pt_bm MB buckets)"
pt_src="reports/anchors/ddp_pytorch_compiled.csv, the team's side-by-side measurement on $(tool value "$pt_csv" --agg first --default "?" --col machine)"
# GPU kinds: a comparison across CSVs is made only where both were measured
# on the same GPU model. gpu_model FILE COL: the models (H100, H200, ...)
# named in column COL of FILE's rows, joined by "/"; empty if no file.
gpu_model() {
  [ -f "$1" ] || return 0
  tool distinct "$1" --cols "$2" | while IFS= read -r _g; do gpu_kind "$_g"; done |
    sort -u | paste -sd/ -
}
ours=$(gpu_model "$own" gpu_name)
# same_kind FILE: FILE's rows come from the GPU model of this section's rows.
same_kind() { [ "$(gpu_model "$1" gpu_name)" = "$ours" ]; }
# kind_tag FILE: ", 2 x H200" where FILE's rows come from another GPU model
# (and a todo: FILE on this section's GPU model).
kind_tag() {
  same_kind "$1" && return 0
  _kt=$(gpu_model "$1" gpu_name)
  todo "${1##*/} on 2 x $ours, as the rows beside it (now 2 x $_kt)"
  printf ', 2 x %s' "$_kt"
}

# The scripted anchor (reports/anchors/torch_ddp.py, its rows from every GPU
# in torch_ddp.csv) replaces those copied numbers once it has rows at our
# shape on our GPU, both precisions on 1 and 2 GPUs: per precision and GPU count its
# fastest bucket size (one GPU: no DDP), mean step, as our step_ms_mean. pt_ok: the anchor in
# use was measured on our GPU model (else it is not compared).
pt_new=""
pt_ok=0
if [ -f "$ANCHORS/torch_ddp.csv" ]; then
  on_gpu "$own"
  pt_new=$(anchor_rows torch_ddp)
  pt_w="--where status=ok --where config=compiled|compiled_cudagraphs"
  for c in size context rank_batch; do
    pt_w="$pt_w --where $c=$(tool value "$own" --agg first --where status=ok --col $c)"
  done
  pt_full=1
  for p in fp32 bf16; do
    for w in 1 2; do
      # shellcheck disable=SC2086 # pt_w is a list of arguments
      [ "$(tool count "$pt_new" $pt_w --where precision=$p --where world_size=$w)" -gt 0 ] || pt_full=0
    done
  done
  if [ $pt_full -eq 1 ]; then
    pt_csv=$pt_new
    pt() { tool value "$pt_csv" --sort step_ms_mean --agg first --default "" $pt_w --where precision="$1" --where world_size="$2" --col step_ms_mean --fmt %.1f; }
    pt_peak() { tool value "$pt_csv" --agg "$1" --default "" $pt_w --where world_size=2 --col peak_gib --fmt %.1f; }
    pt_bm=$(tool distinct "$pt_csv" --cols bucket_mb $pt_w --where world_size=2 --sort bucket_mb | tr '\n' ';' | sed 's/;$//; s/;/, /g')
    pt_name="PyTorch DDP + torch.compile + fused AdamW (the fastest of bucket_cap_mb $pt_bm, with or without CUDA graphs)"
    pt_src="reports/anchors/torch_ddp.csv, measured by reports/anchors/torch_ddp.py on $(tool value "$pt_csv" --agg first $pt_w --col gpu) GPUs"
    pt_ok=1
  fi
fi
pt_kind=""
if [ $pt_ok -eq 0 ]; then
  pt_kind=$(gpu_model "$pt_csv" machine)
  [ "$pt_kind" != "$ours" ] || pt_ok=1
fi
# Said wherever the PyTorch comparison would stand when it cannot.
pt_missing="The strongest PyTorch ($pt_name) has not been measured on 2 x $ours at this shape yet (the copied anchor is from 2 x $pt_kind): run \`NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node=2 reports/anchors/torch_ddp.py reports/anchors/torch_ddp.csv --precisions fp32\` and then \`bf16\` on that machine."

# The table of rows: LEAD is the row's first cells ("| naive |"); FILE,
# PREC, GPUs, bucket (or empty).
table_head() { # FIRST_HEADERS FIRST_ALIGN
  echo "$1 GPUs | step (ms) | backward (ms) | grad comm (ms) | after backward (ms) | collectives | comm share of step | scaling efficiency |"
  echo "$2--:|--:|--:|--:|--:|--:|--:|--:|"
}
trow() {
  tr_l=$1 tr_f=$2 tr_p=$3 tr_w=$4 tr_b=${5:-}
  tr_s=$(v "$tr_f" "$tr_p" "$tr_w" step_ms_mean ${tr_b:+--where bucket_mb="$tr_b"})
  [ -n "$tr_s" ] || return 0
  tr_e="-"
  if [ "$tr_w" -ne 1 ]; then
    tr_e=$(eff "$(v "$tr_f" "$tr_p" 1 step_ms_mean ${tr_b:+--where bucket_mb="$tr_b"})" "$tr_s")
  fi
  tr_q() { v "$tr_f" "$tr_p" "$tr_w" "$1" ${tr_b:+--where bucket_mb="$tr_b"} ${2:+--fmt "$2"}; }
  tr_sh=$(tr_q comm_share)
  echo "$tr_l $tr_w | $(f1 "$tr_s") | $(d "$(tr_q bwd_ms_mean %.1f)") | $(d "$(tr_q grad_comm_ms_mean %.1f)") | $(d "$(tr_q exposed_comm_ms_mean %.2f)") | $(d "$(tr_q grad_collectives)") | $( [ -n "$tr_sh" ] && calc '%.0f%%' "100 * $tr_sh" || printf -- '-') | $tr_e |"
}
# strategies_table NAME... : rows of the named strategies (naive, flat,
# overlap), fp32 then bf16, 1 and 2 GPUs.
sfile() { case $1 in naive) echo "$naive" ;; flat) echo "$flat" ;; overlap) echo "$overlap" ;; esac; }
slabel() {
  case $1 in
    naive) printf 'naive (per tensor, after backward)' ;;
    flat) printf 'flat (one all-reduce, after backward)' ;;
    overlap) printf 'overlap (per tensor, from the hook)' ;;
  esac
}
strategies_table() {
  table_head "| strategy | precision |" "|---|---|"
  for st_p in fp32 bf16; do
    for st_s in "$@"; do
      for st_w in 1 2; do
        trow "| $(slabel "$st_s") | $st_p |" "$(sfile "$st_s")" $st_p $st_w
      done
    done
  done
  echo
}
has_all_rows() { # FILE: both precisions at both world sizes
  for har_p in fp32 bf16; do
    for har_w in 1 2; do
      [ -n "$(v "$1" $har_p $har_w step_ms_mean)" ] || return 1
    done
  done
}
pct() { calc %.0f "100 * $1"; }

# ---- the all-reduce fit: time = o + x / w for x MiB per rank ----------------
# Least squares through the NCCL 2-rank medians; o in ms, w in MiB/ms.
ar_o="" ar_w="" npts=0 sizes="" ar_machine=""
if [ -f "$ar" ] && [ "$(tool count "$ar" --where status=ok --where backend=nccl --where world_size=2)" -ge 2 ]; then
  fit=$(tool select "$ar" --cols size_mib,time_ms_median --where status=ok \
          --where backend=nccl --where world_size=2 --sort size_mib |
        awk -F, 'NR > 1 { n++; x += $1; y += $2; xx += $1 * $1; xy += $1 * $2 }
          END { a = (n * xy - x * y) / (n * xx - x * x); o = (y - a * x) / n
                printf "%.6g %.6g %d", o, 1 / a, n }')
  # shellcheck disable=SC2086 # split "o w n"
  set -- $fit
  ar_o=$1 ar_w=$2 npts=$3
  num "the fitted per-call overhead" "$ar_o"
  num "the fitted bandwidth" "$ar_w"
  if ! is_true "$ar_o > 0"; then
    echo "ddp.sh: $ar: the fit gives a per-call overhead of $ar_o ms (not positive): the model has no optimum" >&2
    exit 1
  fi
  sizes=$(tool distinct "$ar" --cols size_mib --where status=ok --where backend=nccl \
          --where world_size=2 --sort size_mib | awk 'NF { printf "%s%s", (n++ ? ", " : ""), $1 }')
  ar_machine=$(tool distinct "$ar" --cols machine --where status=ok --where backend=nccl \
          --where world_size=2 --sort machine | awk 'NF { printf "%s%s", (n++ ? ", " : ""), $0 }')
fi

# ---- 2.2.2 naive_ddp_benchmarking -------------------------------------------
naive_section() {
  if has_all_rows "$naive"; then
    cat <<EOF
Naive DDP takes $(f1 "$(two "$naive" fp32 step_ms_mean)") ms per step in fp32 on 2 GPUs, of which
$(f1 "$(two "$naive" fp32 grad_comm_ms_mean)") ms ($(pct "$(two "$naive" fp32 comm_share)")%) is spent all-reducing gradients; in bf16 $(f1 "$(two "$naive" bf16 step_ms_mean)") ms, of which $(f1 "$(two "$naive" bf16 grad_comm_ms_mean)") ms
($(pct "$(two "$naive" bf16 comm_share)")%). None of it overlaps compute: the $(two "$naive" fp32 grad_collectives) all-reduces, one per
parameter tensor, start after backward, so the 2-GPU step is one GPU's step
($(f1 "$(one "$naive" fp32 step_ms_mean)") / $(f1 "$(one "$naive" bf16 step_ms_mean)") ms) plus the communication (scaling efficiency $(eff "$(one "$naive" fp32 step_ms_mean)" "$(two "$naive" fp32 step_ms_mean)") / $(eff "$(one "$naive" bf16 step_ms_mean)" "$(two "$naive" bf16 step_ms_mean)")).

EOF
  fi
  strategies_table naive
  failed_jobs "$naive" precision,world_size,status,message "precision,GPUs,status,message"
  cfg=$(tool distinct "$naive" --cols size,context,rank_batch,warmup,steps,vocab --where status=ok --sep ' ' | head -n 1)
  # shellcheck disable=SC2086 # split the fields
  set -- $cfg
  machines=$(tool distinct "$naive" --cols machine,gpu_name,nccl_version --where status=ok --sep '|' |
    awk -F'|' 'NF { printf "%s%s (%s, NCCL %s)", (n++ ? "; " : ""), $1, $2, $3 }')
  cat <<EOF
Setup: job kind \`ddp\` (jobs/ddp.c, parallel/ddp.c) trains the $1 model
(vocabulary $6, context $2), one GPU per rank, on $machines. Each rank
runs forward and backward on its $3 sequences, the gradients are averaged,
then every rank runs AdamW. Gradients travel in fp32 in both precisions,
so bf16 changes the compute, not the $(calc %.0f "$(two "$naive" fp32 grad_comm_mib)") MiB sent per step. The 1-GPU
row has the same per-GPU batch; scaling efficiency = 1-GPU step / 2-GPU
step. $4 untimed and $5 timed steps; columns are means of the maximum over
ranks: backward up to finish_gradient_synchronization; grad comm the
summed durations of the gradient collectives (CUDA events); after backward
the communication left once backward ended; comm share = grad comm / step.

EOF
}

# ---- 2.3.1 minimal_ddp_flat_benchmarking ------------------------------------
flat_section() {
  if has_all_rows "$flat" && has_all_rows "$naive"; then
    fixed=""
    if [ -n "$ar_o" ]; then
      nn=$(two "$naive" fp32 grad_collectives)
      fixed=" (at the all-reduce benchmark's fixed cost of $(calc %.3f "$ar_o") ms a call, $nn calls
come to $(f1 "$nn * $ar_o") ms)"
    fi
    cat <<EOF
With one all-reduce of the flat $(calc %.0f "$(two "$flat" fp32 grad_comm_mib)") MiB gradient buffer the 2-GPU step takes
$(f1 "$(two "$flat" fp32 step_ms_mean)") ms in fp32 ($(f1 "$(two "$flat" fp32 grad_comm_ms_mean)") ms communicating gradients) and $(f1 "$(two "$flat" bf16 step_ms_mean)") ms in bf16
($(f1 "$(two "$flat" bf16 grad_comm_ms_mean)") ms), against $(f1 "$(two "$naive" fp32 step_ms_mean)") and $(f1 "$(two "$naive" bf16 step_ms_mean)") ms for $(two "$naive" fp32 grad_collectives) per-tensor calls: batching
saves $(f1 "$(two "$naive" fp32 grad_comm_ms_mean) - $(two "$flat" fp32 grad_comm_ms_mean)") ms of communication per step (fp32), the fixed cost of the calls$fixed.
The buffer still goes out only after backward, so all of it stays
exposed.

EOF
  fi
  strategies_table naive flat
  failed_jobs "$flat" precision,world_size,status,message "precision,GPUs,status,message"
  echo "Setup and columns as in naive_ddp_benchmarking."
  echo
}

# ---- 2.3.3 ddp_overlap_individual_parameters_benchmarking -------------------
overlap_a() {
  echo "### (a) Step time with each tensor's all-reduce started from its hook"
  echo
  if has_all_rows "$overlap"; then
    cmp=""
    if has_all_rows "$naive" && has_all_rows "$flat"; then
      cmp=", against $(f1 "$(two "$naive" fp32 step_ms_mean)") ms naive and $(f1 "$(two "$flat" fp32 step_ms_mean)") ms flat (bf16: $(f1 "$(two "$overlap" bf16 step_ms_mean)") against $(f1 "$(two "$naive" bf16 step_ms_mean)") and
$(f1 "$(two "$flat" bf16 step_ms_mean)") ms)"
    fi
    cat <<EOF
Overlapping takes the 2-GPU step to $(f1 "$(two "$overlap" fp32 step_ms_mean)") ms in fp32$cmp: only
$(calc %.2f "$(two "$overlap" fp32 exposed_comm_ms_mean)") ms (fp32) and $(calc %.2f "$(two "$overlap" bf16 exposed_comm_ms_mean)") ms (bf16) of communication is left after backward. It is
not free: backward itself grows from $(f1 "$(one "$overlap" fp32 bwd_ms_mean)") to $(f1 "$(two "$overlap" fp32 bwd_ms_mean)") ms (bf16 $(f1 "$(one "$overlap" bf16 bwd_ms_mean)") to $(f1 "$(two "$overlap" bf16 bwd_ms_mean)") ms)
because NCCL's kernels share the GPU's SMs and memory bandwidth with
backward's, so the gain over flat is smaller than the communication hidden.

EOF
  fi
  strategies_table naive flat overlap
  failed_jobs "$overlap" precision,world_size,status,message "precision,GPUs,status,message"
}

# series JSONL STRATEGY PREC NAME EXPECTED [PAIRS]: the values of the last
# matching line's sample NAME, one a line. A series with fewer than
# EXPECTED values was cut short on its way into the samples file; its last
# value may be cut mid-number and its last start may lack an end, so both
# are dropped.
series() {
  awk -v strat="$2" -v prec="$3" -v name="$4" -v want="$5" -v pairs="${6:-0}" '
    index($0, "\"strategy\": \"" strat "\"") && index($0, "\"world_size\": \"2\"") &&
    index($0, "\"precision\": \"" prec "\"") { line = $0 }
    END {
      key = "\"" name "\": ["
      i = index(line, key)
      if (!i) exit
      rest = substr(line, i + length(key))
      rest = substr(rest, 1, index(rest, "]") - 1)
      n = split(rest, a, ", ")
      if (n == 1 && a[1] == "") n = 0
      if (n < want) { n--; if (pairs && n % 2) n-- }
      for (k = 1; k <= n; k++) print a[k]
    }' "$1"
}
overlap_b() {
  echo "### (b) Timeline: overlapped against not overlapped"
  echo
  tl_ok=1 tl_note="" tl_story=""
  tmp="$OUT/ddp_timeline.tmp.csv"
  echo "panel,lane,kind,t0,t1" > "$tmp"
  xmax=0 xmin=1000000 panel=0
  for s in naive overlap; do
    panel=$((panel + 1))
    f=$(sfile $s)
    j=${f%.csv}.samples.jsonl
    hooks=$(two "$f" fp32 grad_collectives)
    if [ ! -f "$j" ] || [ -z "$hooks" ]; then
      tl_ok=0
      continue
    fi
    for r in 0 1; do
      lane_b=$((4 - 2 * r))
      lane_c=$((3 - 2 * r))
      b=$(series "$j" $s fp32 r${r}_bwd_ms $((hooks + 1)))
      g=$(series "$j" $s fp32 r${r}_grad_comm_ms $((2 * hooks)) 1)
      nbv=$(printf '%s\n' "$b" | awk 'NF' | wc -l)
      ngv=$(printf '%s\n' "$g" | awk 'NF' | wc -l)
      if [ "$nbv" -lt 2 ]; then tl_ok=0; continue; fi
      printf '%s\n' "$b" | awk -v p=$panel -v l=$lane_b -F, 'NF {
          if (NR == 1) start = $1; else print p "," l ",ready," $1 ","; last = $1 }
        END { print p "," l ",bwd," start "," last }' >> "$tmp"
      printf '%s\n' "$g" | awk -v p=$panel -v l=$lane_c 'NF {
          if (NR % 2) t0 = $1; else print p "," l ",comm," t0 "," $1 }' >> "$tmp"
      [ $((ngv / 2)) -ge "$hooks" ] ||
        printf '%s\n' "$g" | awk -v p=$panel -v l=$lane_c 'NF { e = $1 }
          END { print p "," l ",cut," e "," }' >> "$tmp"
      xmin=$(printf '%s\n' "$b" | awk -v m="$xmin" 'NR == 1 { print ($1 < m) ? $1 : m }')
      m=$(printf '%s\n%s\n' "$b" "$g" | awk 'NF && $1 > m { m = $1 } END { print m + 0 }')
      xmax=$(awk -v a="$xmax" -v b="$m" 'BEGIN { print (b > a) ? b : a }')
      # Rank 0's story in numbers: backward's end, and how many recorded
      # all-reduces started before it.
      if [ $r -eq 0 ]; then
        be=$(printf '%s\n' "$b" | awk 'NF { e = $1 } END { printf "%.1f", e }')
        under=$(printf '%s\n' "$g" | awk -v e="$be" 'NF && NR % 2 && $1 < e { n++ } END { print n + 0 }')
        f0=$(printf '%s\n' "$g" | awk 'NF { printf "%.1f", $1; exit }')
        tl_story="$tl_story${tl_story:+; }$s: backward ends at $be ms, the first all-reduce starts at ${f0:-?} ms, and $under of the $((ngv / 2)) recorded all-reduces start before backward ends"
      fi
      if [ $((ngv / 2)) -lt "$hooks" ]; then
        tl_note="$tl_note${tl_note:+; }$s rank $r: $((ngv / 2)) of $hooks all-reduces recorded"
      fi
    done
  done
  if [ $tl_ok -eq 0 ]; then
    echo "_No fp32 2-GPU timeline of naive and overlap in the samples yet: run \`./runner experiments/naive_ddp_benchmarking.cfg\` and \`experiments/ddp_overlap_individual_parameters_benchmarking.cfg\`._"
    echo
    todo "the fp32 2-GPU timelines of naive and overlapped DDP (their samples: \`./runner --force\` both experiments)"
  elif [ -z "$GNUPLOT" ]; then
    echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
    echo
  else
    cat <<EOF
In place of Nsight screenshots (Nsight Systems is not on our GPU
machines), the ddp job records each rank's backward and gradient
collectives with CUDA events; the figure draws each run's last timed
fp32 step.
Rank 0: $tl_story.

EOF
    # Room on the right for the "recording cut here" labels, where a lane
    # has one.
    room=0
    ! grep -q '^[0-9]*,[0-9]*,cut,' "$tmp" || room=18
    xmax=$(awk -v m="$xmax" -v r=$room 'BEGIN { printf "%d", (int((m + r) / 10) + 1) * 10 }')
    xmin=$(awk -v m="$xmin" 'BEGIN { printf "%d", int(m / 10) * 10 }')
    "$GNUPLOT" -c "$REPORTS/ddp_timeline.gp" "$tmp" "$OUT/ddp_timeline.svg" \
      "Naive DDP: $(two "$naive" fp32 grad_collectives) all-reduces after backward (fp32, 2 GPUs, one step)" \
      "Overlapped DDP: each tensor's all-reduce started from its backward hook (fp32, 2 GPUs, one step)" \
      "$xmin" "$xmax"
    echo "![Per-rank timeline of backward and the gradient all-reduces, naive DDP above, overlapped DDP below](ddp_timeline.svg)"
    echo
  fi
  rm -f "$tmp"
  if [ -n "$tl_note" ]; then
    echo "The recorded timelines are incomplete ($tl_note); the rows' summed durations are computed in the job and are complete."
    echo
  fi
}

# ---- 2.3.5 ddp_bucketed_benchmarking ----------------------------------------
bucketed_a() {
  echo "### (a) Step time by bucket size"
  echo
  bf=$(best_bucket fp32); bh=$(best_bucket bf16) kf="" kh=""
  [ -z "$bf" ] || kf=$(two "$csv" fp32 step_ms_mean "$bf")
  [ -z "$bh" ] || kh=$(two "$csv" bf16 step_ms_mean "$bh")
  if [ -n "$kf" ] && [ -n "$kh" ] && has_all_rows "$overlap" && has_all_rows "$flat"; then
    verdict="The"
    if same_kind "$overlap" && same_kind "$flat"; then
      if is_true "$kf < $(two "$overlap" fp32 step_ms_mean) && $kf < $(two "$flat" fp32 step_ms_mean)" &&
         is_true "$kh < $(two "$overlap" bf16 step_ms_mean) && $kh < $(two "$flat" bf16 step_ms_mean)"; then
        verdict="In direction they do: the"
      else
        verdict="Not in every precision here: the"
      fi
      vs_f=" against
$(f1 "$(two "$overlap" fp32 step_ms_mean)") ms overlapped per tensor and $(f1 "$(two "$flat" fp32 step_ms_mean)") ms flat"
      vs_h="
against $(f1 "$(two "$overlap" bf16 step_ms_mean)") and $(f1 "$(two "$flat" bf16 step_ms_mean)") ms"
    else
      vs_f="" vs_h=" (the per-tensor and flat rows come from 2 x $(gpu_model "$overlap" gpu_name), so they are not
compared with these 2 x $ours rows)"
    fi
    # the least and the most fp32 2-GPU step over the bucket sizes (each
    # size's latest row, as the table shows them)
    lo="" hi=""
    for bm in $(tool distinct "$csv" --cols bucket_mb --where status=ok --where precision=fp32 --where world_size=2); do
      x=$(two "$csv" fp32 step_ms_mean "$bm")
      if [ -z "$lo" ] || is_true "$x < $lo"; then lo=$x; fi
      if [ -z "$hi" ] || is_true "$x > $hi"; then hi=$x; fi
    done
    blo=$(tool value "$csv" --where status=ok --where world_size=2 --agg min --col bucket_mb)
    b1=$(one "$csv" fp32 bwd_ms_mean "$bf"); b2=$(two "$csv" fp32 bwd_ms_mean "$bf")
    h1=$(one "$csv" bf16 bwd_ms_mean "$bh")
    for x in "$kf" "$kh" "$lo" "$hi" "$b1" "$b2" "$h1"; do num "a bucketed figure" "$x"; done
    cat <<EOF
**Answer.** Buckets keep the overlap and pay the per-call cost fewer
times, so they should beat per-tensor overlap and the flat buffer, best at
a middle size. $verdict best 2-GPU step is $(f1 "$kf") ms in fp32 ($(calc %g "$bf") MiB buckets)$vs_f, and $(f1 "$kh") ms in bf16 ($(calc %g "$bh") MiB)$vs_h.
EOF
    if [ -n "$ar_o" ]; then
      arall=$(calc %.1f "$ar_o + $(two "$csv" fp32 grad_comm_mib "$bf") / $ar_w")
      if is_true "$b1 > $arall"; then
        cat <<EOF
In size they do not in fp32: the step moves only between $(f1 "$lo") and $(f1 "$hi") ms,
because one GPU's backward ($(f1 "$b1") ms) outlasts the whole all-reduce ($arall ms by
the fit in (b)), so even $(calc %g "$blo") MiB buckets' per-call costs hide; the second GPU's
cost is backward slowing from $(f1 "$b1") to $(f1 "$b2") ms beside NCCL's kernels (appendix B).
In bf16 backward ($(f1 "$h1") ms) is $(if is_true "$h1 > $arall"; then printf 'barely longer than'; else printf 'no longer than'; fi) the all-reduce, so $(calc %g "$blo") MiB buckets
leave $(calc %.1f "$(two "$csv" bf16 exposed_comm_ms_mean "$blo")") ms exposed after backward and large ones win.
EOF
      fi
    fi
    cat <<EOF
A slower link, more ranks or less compute per GPU would show the expected
trade-off; collectives on the copy engines, which take no SMs, make the
second GPU free (appendix B: $(f1 "$(two "$ce" fp32 step_ms_mean "$(best_bucket fp32 "$ce")")") ms fp32, $(f1 "$(two "$ce" bf16 step_ms_mean "$(best_bucket bf16 "$ce")")") ms bf16).

EOF
  fi
  table_head "| precision | bucket (MiB) |" "|---|--:|"
  for p in fp32 bf16; do
    for bm in $(tool distinct "$csv" --cols bucket_mb --where status=ok --where precision=$p --sort bucket_mb); do
      for w in 1 2; do
        trow "| $p | $(calc %g "$bm") |" "$csv" $p $w "$bm"
      done
    done
  done
  echo
  failed_jobs "$csv" precision,world_size,bucket_mb,status,message \
    "precision,GPUs,bucket (MiB),status,message"
  if [ -n "$kf" ] && [ -n "$kh" ] && [ $pt_ok -eq 0 ]; then
    echo "$pt_missing"
    echo
    todo "PyTorch's DDP on 2 x $ours (reports/anchors/torch_ddp.py)"
  elif [ -n "$kf" ] && [ -n "$kh" ]; then
    tf2=$(pt fp32 2); th2=$(pt bf16 2); tf1=$(pt fp32 1); th1=$(pt bf16 1)
    for x in "$tf2" "$th2" "$tf1" "$th1"; do num "a PyTorch anchor" "$x"; done
    of1=$(one "$csv" fp32 step_ms_mean "$bf"); oh1=$(one "$csv" bf16 step_ms_mean "$bh")
    w1="$(faster_one fp32 "$of1" "$tf1"), and $(faster_one bf16 "$oh1" "$th1")"
    # our rows' path: the handout's DDP runs op by op with materialised
    # attention, which PyTorch's compiled step outruns on one GPU
    path=$(tool value "$csv" --agg first --where status=ok --col fusion --default '')
    att=$(tool value "$csv" --agg first --where status=ok --col attention --default '')
    [ "$path" != opbyop ] ||
      w1="$w1 (our rows run the op-by-op path with $att attention, PyTorch's a compiled step with SDPA)"
    cat <<EOF
The strongest PyTorch at the same shape, $pt_name
($pt_src), takes $tf2 ms (fp32) and $th2 ms (bf16) on 2 GPUs: the best
bucketed step is $(calc %.2f "$tf2 / $kf") x and $(calc %.2f "$th2 / $kh") x faster, mostly by scaling: on
one GPU $w1.

EOF
  fi
}

bucketed_b() {
  echo "### (b) Overhead model and optimal bucket size"
  echo
  if [ -z "$ar_o" ]; then
    echo "_Needs NCCL all-reduce rows with 2 ranks: run \`./runner experiments/allreduce.cfg\`._"
    echo
    return 0
  fi
  s_mib=$(two "$csv" fp32 grad_comm_mib)
  [ -n "$s_mib" ] || s_mib=$(two "$csv" bf16 grad_comm_mib)
  num "the gradient size" "$s_mib"
  bstar=$(calc %.0f "sqrt($s_mib * $ar_o * $ar_w)")
  nstar=$(calc %.1f "sqrt($s_mib / ($ar_o * $ar_w))")
  ostar=$(calc %.2f "2 * sqrt($s_mib * $ar_o / $ar_w)")
  cat <<EOF
    overhead(n_b) = n_b o + s / (n_b w),     b* = sqrt(s o w)

**Answer.** Split the s bytes of gradients into n_b equal buckets; each
all-reduce costs o + s / (n_b w) and, by the handout's premise, backward
produces a bucket in s / (n_b w). Each call outlasts the compute hiding it
by o, so communication falls o behind per bucket, and when backward ends
n_b o plus the last bucket's s / (n_b w) remain. The derivative
o - s / (n_b^2 w) is zero at n_b* = sqrt(s / (o w)): b* = s / n_b* =
sqrt(s o w), overhead 2 sqrt(s o / w).

A least-squares fit of time = o + x / w to the $npts NCCL 2-rank medians of
allreduce.csv ($sizes MiB per rank, $ar_machine) gives o = $(calc %.4f "$ar_o") ms
per call and w = $(calc %.1f "$ar_w") MiB/ms ($(calc %.0f "$ar_w * 1.048576") GB/s). With s = $(calc %.1f "$s_mib") MiB of fp32
gradients: n_b* = $nstar, **b* = $bstar MiB**, overhead $ostar ms.

EOF
  tmpf="$OUT/ddp_buckets.fp32.tmp.csv"
  tmph="$OUT/ddp_buckets.bf16.tmp.csv"
  for p in fp32 bf16; do
    t=$tmpf; [ $p = fp32 ] || t=$tmph
    echo "bucket_mb,n_b,overhead_ms,exposed_ms,model_ms" > "$t"
    for bm in $(tool distinct "$csv" --cols bucket_mb --where status=ok --where precision=$p --sort bucket_mb); do
      s1=$(one "$csv" $p step_ms_mean "$bm")
      s2=$(two "$csv" $p step_ms_mean "$bm")
      nb=$(two "$csv" $p grad_collectives "$bm")
      ex=$(two "$csv" $p exposed_comm_ms_mean "$bm")
      [ -n "$s1" ] && [ -n "$s2" ] && [ -n "$nb" ] && [ -n "$ex" ] || continue
      echo "$bm,$nb,$(calc %.4f "$s2 - $s1"),$ex,$(calc %.4f "$nb * $ar_o + $s_mib / ($nb * $ar_w)")" >> "$t"
    done
  done
  echo "| bucket (MiB) | buckets n_b | model (ms) | fp32: after backward (ms) | fp32: 2-GPU - 1-GPU step (ms) | bf16: after backward (ms) | bf16: 2-GPU - 1-GPU step (ms) |"
  echo "|--:|--:|--:|--:|--:|--:|--:|"
  for bm in $(tool distinct "$csv" --cols bucket_mb --where status=ok --where world_size=2 --sort bucket_mb); do
    nb=$(awk -F, -v b="$bm" 'NR > 1 && $1 == b { print $2; exit }' "$tmpf" "$tmph")
    [ -n "$nb" ] || continue
    row="| $(calc %g "$bm") | $nb | $(calc %.2f "$nb * $ar_o + $s_mib / ($nb * $ar_w)")"
    for t in "$tmpf" "$tmph"; do
      line=$(awk -F, -v b="$bm" 'NR > 1 && $1 == b { printf "%.2f | %.1f", $4, $3; exit }' "$t")
      row="$row | ${line:-- | -}"
    done
    echo "$row |"
  done
  echo
  echo "n_b: the runs' bucket count (a bucket never splits a tensor)."
  echo
  if [ -n "$GNUPLOT" ]; then
    "$GNUPLOT" -c "$REPORTS/ddp_buckets.gp" "$tmpf" "$tmph" "$OUT/ddp_buckets.svg" "$s_mib" "$ar_o" "$ar_w"
    echo "![DDP overhead per step against the bucket size: the model and the measurements](ddp_buckets.svg)"
    echo
    # The log axis has no place for zero or less: the figure leaves such
    # points out, and says which here.
    unplotted=$(for t in "$tmpf" "$tmph"; do
        p=fp32; [ "$t" = "$tmpf" ] || p=bf16
        awk -F, -v p=$p 'NR > 1 {
            if ($4 <= 0) printf "%s at %g MiB, communication left after backward %.2f ms\n", p, $1, $4
            if ($3 <= 0) printf "%s at %g MiB, 2-GPU step minus 1-GPU step %.1f ms\n", p, $1, $3 }' "$t"
      done | awk 'NF { printf "%s%s", (n++ ? "; " : ""), $0 }')
    if [ -n "$unplotted" ]; then
      echo "_Left out of the figure, whose log axis cannot show zero or less: ${unplotted}._"
      echo
    fi
  else
    echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
    echo
  fi
  rm -f "$tmpf" "$tmph"
  lo=$(tool value "$csv" --where status=ok --where world_size=2 --col bucket_mb --agg min)
  hi=$(tool value "$csv" --where status=ok --where world_size=2 --col bucket_mb --agg max)
  nhi=$(two "$csv" fp32 grad_collectives "$hi")
  nlo=$(two "$csv" fp32 grad_collectives "$lo")
  if [ -n "$nhi" ] && [ -n "$nlo" ] && [ "$hi" != "$lo" ]; then
    mhi=$(calc %.2f "$nhi * $ar_o + $s_mib / ($nhi * $ar_w)")
    mlo=$(calc %.2f "$nlo * $ar_o + $s_mib / ($nlo * $ar_w)")
    xhi=$(calc %.2f "$(two "$csv" fp32 exposed_comm_ms_mean "$hi")")
    xlo=$(calc %.2f "$(two "$csv" fp32 exposed_comm_ms_mean "$lo")")
    b1lo=$(f1 "$(one "$csv" fp32 bwd_ms_mean "$lo")")
    echo "Against the fp32 communication left after backward: at $(calc %g "$hi") MiB ($nhi"
    echo "buckets) the model gives $mhi ms, the run $xhi ms; at $(calc %g "$lo") MiB ($nlo buckets) the"
    echo "model's backlog is $mlo ms, the run's $xlo ms."
    if is_true "$xlo < 0.5 * $mlo"; then
      echo "The premise fails here: one GPU's backward ($b1lo ms) outlasts the whole"
      echo "all-reduce ($(f1 "$ar_o + $s_mib / $ar_w") ms by the fit)."
    fi
    echo "Nor does the model hold the cost that shows: overlapped all-reduces slow"
    echo "backward, so the 2-GPU step stays $(f1 "$(two "$csv" fp32 step_ms_mean "$hi") - $(one "$csv" fp32 step_ms_mean "$hi")") ms above one GPU's (fp32, $(calc %g "$hi") MiB)."
    echo
  fi
}

# ---- ddp_appendix ------------------------------------------------------------
appendix() {
  cat <<EOF
This appendix explains how data-parallel training of the xl model on two
GPUs came to cost no more per step than one GPU: where the second GPU's
time goes while NCCL's all-reduces overlap backward, and the change that
removed it, moving the bytes onto the copy engines. Every number is read
from the runner's CSV named beside it.

#### The strategies against PyTorch

Each form at its fastest bucket size; ratio = 2-GPU step / 1-GPU step at
the same per-GPU batch (1.05 is the project's goal); steps compare only
between rows of the same GPUs, ratios across them. The PyTorch rows:
$pt_name ($pt_src), and eager PyTorch DDP (reports/anchors/ddp_pytorch.csv) for reference.

| strategy | GPUs | fp32 2-GPU step (ms) | fp32 ratio | bf16 2-GPU step (ms) | bf16 ratio |
|---|---|--:|--:|--:|--:|
EOF
  for s in naive flat overlap bucketed copyengine zero1ce copyenginef zero1cef pytorch eager; do
    row="" ok=0
    case $s in
      copyenginef) [ -f "$cef" ] || continue; gk=$(gpu_model "$cef" gpu_name) ;;
      zero1cef) [ -f "$z1cef" ] || continue; gk=$(gpu_model "$z1cef" gpu_name) ;;
      naive) gk=$(gpu_model "$naive" gpu_name) ;;
      flat) gk=$(gpu_model "$flat" gpu_name) ;;
      overlap) gk=$(gpu_model "$overlap" gpu_name) ;;
      bucketed) gk=$(gpu_model "$csv" gpu_name) ;;
      copyengine) gk=$(gpu_model "$ce" gpu_name) ;;
      zero1ce) gk=$(gpu_model "$z1ce" gpu_name) ;;
      pytorch) if [ "$pt_csv" = "$pt_new" ]; then gk=$(gpu_model "$pt_csv" gpu); else gk=$(gpu_model "$pt_csv" machine); fi ;;
      eager) gk=$(gpu_model "$pe_csv" machine) ;;
    esac
    for p in fp32 bf16; do
      case $s in
        naive) f=$naive; bm=""; name="naive, per tensor after backward" ;;
        flat) f=$flat; bm=""; name="flat buffer after backward" ;;
        overlap) f=$overlap; bm=""; name="per tensor from the hook" ;;
        bucketed) f=$csv; bm=$(best_bucket $p); name="bucketed all-reduce (handout)" ;;
        copyengine) f=$ce; bm=$(best_bucket $p "$ce"); name="bucketed, gradients all-gathered on the copy engines" ;;
        zero1ce) f=$z1ce; bm=$(best_bucket $p "$z1ce"); name="ZeRO-1, gradients and weights on the copy engines" ;;
        copyenginef) f=$cef; bm=$(best_bucket $p "$cef"); name="bucketed on the copy engines, fused + flash" ;;
        zero1cef) f=$z1cef; bm=$(best_bucket $p "$z1cef"); name="ZeRO-1 on the copy engines, fused + flash" ;;
        pytorch) name="$pt_name"
          a=$(pt $p 2); b=$(pt $p 1)
          [ -n "$a" ] && [ -n "$b" ] && ok=1
          row="$row | $(d "$a") | $( [ -n "$a" ] && [ -n "$b" ] && calc %.2f "$a / $b" || printf -- '-')"
          continue ;;
        eager) name="PyTorch DDP, eager (older anchor)"
          a=$(pe $p); [ -n "$a" ] && ok=1
          row="$row | $(d "$a") | -"
          continue ;;
      esac
      a=$(two "$f" $p step_ms_mean "$bm"); b=$(one "$f" $p step_ms_mean "$bm")
      if [ -n "$a" ] && [ -n "$b" ]; then
        ok=1
        row="$row | $(f1 "$a")$( [ -z "$bm" ] || printf ' (%g MiB)' "$bm") | $(calc %.3f "$a / $b")"
      else
        row="$row | - | -"
      fi
    done
    [ $ok -eq 0 ] || echo "| $name | 2 x ${gk:-?}$row |"
  done
  echo
  # the claim: the copy-engine form's fastest path in bf16 (fused + flash
  # where measured and faster, as the summary takes it)
  cl=$ce cl_path=""
  if [ -f "$cef" ]; then
    cl16=$(two "$cef" bf16 step_ms_mean "$(best_bucket bf16 "$cef")")
    op16=$(two "$ce" bf16 step_ms_mean "$(best_bucket bf16 "$ce")")
    if [ -n "$cl16" ] && { [ -z "$op16" ] || is_true "$cl16 < $op16"; }; then
      cl=$cef cl_path=", fused + flash"
    fi
  fi
  cf=$(best_bucket fp32 "$cl"); ch=$(best_bucket bf16 "$cl")
  if [ -n "$cf" ] && [ -n "$ch" ] && [ $pt_ok -eq 0 ]; then
    echo "$pt_missing"
    echo
    todo "PyTorch's DDP on 2 x $ours (reports/anchors/torch_ddp.py)"
  elif [ -n "$cf" ] && [ -n "$ch" ]; then
    cf2=$(two "$cl" fp32 step_ms_mean "$cf"); ch2=$(two "$cl" bf16 step_ms_mean "$ch")
    cf1=$(one "$cl" fp32 step_ms_mean "$cf"); ch1=$(one "$cl" bf16 step_ms_mean "$ch")
    tf2=$(pt fp32 2); th2=$(pt bf16 2); tf1=$(pt fp32 1); th1=$(pt bf16 1)
    for x in "$cf2" "$ch2" "$cf1" "$ch1" "$tf2" "$th2" "$tf1" "$th1"; do num "an appendix figure" "$x"; done
    one_gpu="on one GPU $(faster_one fp32 "$cf1" "$tf1"), and $(faster_one bf16 "$ch1" "$th1")"
    # memory like for like: the copy-engine form against the bucketed
    # all-reduce, both op by op
    pk=$(two "$ce" fp32 engine_peak_mib "$(best_bucket fp32 "$ce")")
    pk0=$(two "$csv" fp32 engine_peak_mib "$(best_bucket fp32)")
    pmin=$(pt_peak min)
    pmax=$(pt_peak max)
    mem=""
    if [ -n "$pk" ] && [ -n "$pk0" ] && [ -n "$pmin" ] && [ -n "$pmax" ]; then
      if is_true "$pk / 1024 > $pmax"; then mw="more than"; elif is_true "$pk / 1024 >= $pmin"; then mw="about as much as"; else mw="less than"; fi
      mem=" The price is memory: the copy-engine form keeps both ranks' fp32
gradients, $(calc %.1f "$pk / 1024") GiB peak per GPU in fp32 against $(calc %.1f "$pk0 / 1024") GiB for the bucketed all-reduce,
$mw PyTorch's $pmin-$pmax GiB."
    fi
    cat <<EOF
Our DDP claim, against the strongest PyTorch: $(f1 "$cf2") ms (fp32) and $(f1 "$ch2") ms (bf16)
per 2-GPU step with the gradients on the copy engines ($(calc %g "$cf") / $(calc %g "$ch") MiB buckets,
$(basename "$cl")$cl_path), $(calc %.2f "$tf2 / $cf2") x and $(calc %.2f "$th2 / $ch2") x faster than its $tf2 and $th2 ms. Almost
all of it is scaling: PyTorch's second GPU multiplies its step by $(calc %.2f "$tf2 / $tf1")
(fp32) and $(calc %.2f "$th2 / $th1") (bf16), ours by $(calc %.3f "$cf2 / $cf1") and $(calc %.3f "$ch2 / $ch1"), while $one_gpu.$mem

EOF
  fi

  # -- why backward slows ------------------------------------------------------
  bf=$(best_bucket fp32); bh=$(best_bucket bf16)
  if [ -n "$bf" ] && [ -n "$bh" ]; then
    echo "#### Why backward slows beside the all-reduces"
    echo
    cat <<EOF
With the handout's bucketed all-reduce little communication is left after
backward ($(calc %.2f "$(two "$csv" fp32 exposed_comm_ms_mean "$bf")") ms fp32, $(calc %.2f "$(two "$csv" bf16 exposed_comm_ms_mean "$bh")") ms bf16); the second GPU's cost is backward
itself growing from $(f1 "$(one "$csv" fp32 bwd_ms_mean "$bf")") to $(f1 "$(two "$csv" fp32 bwd_ms_mean "$bf")") ms (fp32) and $(f1 "$(one "$csv" bf16 bwd_ms_mean "$bh")") to $(f1 "$(two "$csv" bf16 bwd_ms_mean "$bh")") ms (bf16)
while NCCL's kernels run beside it.
EOF
    if has_rows "$ctas"; then
      c_n=$(tool value "$ctas" --where status=ok --where precision=fp32 --where nccl_max_ctas!=0 --agg min --default "" --col nccl_max_ctas)
      c_bm=$(tool value "$ctas" --where status=ok --where precision=fp32 --agg max --default "" --col bucket_mb)
      cq() { tool value "$ctas" --where status=ok --where precision=fp32 --where bucket_mb="$c_bm" --where nccl_max_ctas="$1" --agg first --default "" --col "$2"; }
      c1=$(cq "$c_n" grad_comm_ms_mean); gm=$(v "$ctas" fp32 2 grad_comm_mib --where bucket_mb="$c_bm")
      c8=$(cq 8 bwd_ms_mean); c0=$(cq 0 bwd_ms_mean)
      if [ -n "$c1" ] && [ -n "$gm" ] && [ -n "$c8" ] && [ -n "$c0" ]; then
        echo "Capping NCCL's thread blocks per collective (ddp_nccl_ctas.csv, fp32,"
        echo "$(calc %g "$c_bm") MiB$(kind_tag "$ctas")) does not give backward its speed back: a block moves about"
        echo "$(calc %.0f "$gm / 1024 / $c1 * 1000 / $c_n") GiB/s (with $c_n per collective), so a few blocks leave the all-reduce outlasting backward, and with 8 blocks backward"
        echo "takes $(f1 "$c8") ms against $(f1 "$c0") ms with NCCL's default, though it then holds a few SMs, not dozens."
      fi
    fi
    if has_rows "$smr"; then
      sr_best() { tool value "$smr" --where status=ok --where precision=fp32 --where world_size=2 --sort step_ms_mean --agg first --default "" --col "$1"; }
      sr_n=$(sr_best nccl_max_ctas); sr_r=$(sr_best gemm_sm_reserve); sr_ms=$(sr_best step_ms_mean)
      sr_blocks="$sr_n blocks per collective"; [ "$sr_n" = 0 ] && sr_blocks="NCCL's default blocks"
      sr_q() { tool value "$smr" --where status=ok --where precision=fp32 --where world_size=2 --where nccl_max_ctas="$sr_n" --where gemm_sm_reserve!=0 --agg "$1" --default "" --col step_ms_mean; }
      sr_base=$(tool value "$smr" --where status=ok --where precision=fp32 --where world_size=2 \
        --where nccl_max_ctas="$sr_n" --where gemm_sm_reserve=0 --agg first --default "" --col step_ms_mean)
      if [ -n "$sr_base" ] && [ -n "$sr_ms" ]; then
        echo "Shaping backward's cuBLAS products for fewer SMs (ddp_sm_reserve.csv$(kind_tag "$smr")) so that"
        if [ "$sr_r" = 0 ]; then
          echo "a wave does not spill beside a collective's blocks gains nothing: the fastest fp32 step,"
          echo "$(f1 "$sr_ms") ms with $sr_blocks, reserves no SMs, and reserving some takes"
          echo "$(f1 "$(sr_q min)")-$(f1 "$(sr_q max)") ms with the same blocks."
        else
          echo "a wave does not spill beside a collective's blocks gains little: the fastest fp32 step reserves"
          echo "$sr_r SMs with $sr_blocks and takes $(f1 "$sr_ms") ms against $(f1 "$sr_base") ms"
          echo "with none reserved ($(calc %.1f "100 * ($sr_base - $sr_ms) / $sr_base")% less)."
        fi
      fi
    fi
    if has_rows "$con"; then
      # The matrix-product ms of a contention row (rank 0's extra step with
      # every operation bracketed by events), from its message.
      cn_mm() {
        tool value "$con" --agg first --default "" --where status=ok --where precision=fp32 \
          --where nccl_max_ctas="$1" --where world_size="$2" --col message |
          sed 's/^.*kernel family: //' | tr ';' '\n' | awk '{ gsub(/^ +/, ""); split($0, f, " "); if (f[1] == "matmul") print f[2] }'
      }
      caps=$(tool distinct "$con" --cols nccl_max_ctas --where status=ok --sort nccl_max_ctas)
      clo=$(printf '%s\n' "$caps" | awk 'NF { print; exit }')
      chi=$(printf '%s\n' "$caps" | awk 'NF { c = $0 } END { print c }')
      m1lo=$(cn_mm "$clo" 1); m2lo=$(cn_mm "$clo" 2); m1hi=$(cn_mm "$chi" 1); m2hi=$(cn_mm "$chi" 2)
      if [ -n "$m1lo" ] && [ -n "$m2lo" ] && [ -n "$m1hi" ] && [ -n "$m2hi" ] && [ "$clo" != "$chi" ]; then
        echo "Timing every kernel of one step (ddp_contention.csv$(kind_tag "$con")) shows where: the fp32"
        echo "matrix products run $(calc %.1f "100 * ($m2lo / $m1lo - 1)")% slower beside the all-reduces with $clo blocks per"
        echo "collective and $(calc %.1f "100 * ($m2hi / $m1hi - 1)")% with $chi, so not in proportion to the SMs taken; the"
        echo "host queues backward well ahead of the GPU and the clocks did not"
        echo "throttle. What is left, by elimination, is the products sharing SMs and"
        echo "memory bandwidth with the collective's kernels: a wave of blocks waits"
        echo "for its slowest. Hence the next step: move the bytes with engines that"
        echo "hold no SMs."
      fi
    fi
    echo
  fi

  # -- copy engines -------------------------------------------------------------
  if [ -n "$cf" ] && [ -n "$ch" ]; then
    echo "#### Gradients on the copy engines (ddp_copy_engine)"
    echo
    ce_o1=$(one "$ce" fp32 opt_ms_mean "$cf")
    num "the 1-GPU AdamW time" "$ce_o1"
    cat <<EOF
Each bucket's raw fp32 gradients are all-gathered in place, on a NCCL
communicator with the zero-CTA policy over a symmetric memory window,
which NCCL $(tool distinct "$ce" --cols nccl_version --where status=ok | head -n 1) moves with the copy engines rather than with kernels;
for two ranks that is the same bytes on NVLink as a ring all-reduce.
AdamW averages the two copies as it reads them, and each bucket's AdamW
is queued, on a low-priority stream, right after that bucket's
all-gather, so the $(f1 "$ce_o1") ms optimizer runs during backward on the
$(two "$ce" fp32 gemm_sm_reserve "$cf") SMs the products leave free. Backward still grows on two GPUs, but it
now carries AdamW, which no longer follows it:

| precision | bucket (MiB) | 1-GPU step (ms) | 2-GPU step (ms) | ratio | backward 1 -> 2 GPUs (ms) | transfers after backward (ms) | AdamW after backward (ms) |
|---|--:|--:|--:|--:|--:|--:|--:|
EOF
    for p in fp32 bf16; do
      for b in $(tool distinct "$ce" --cols bucket_mb --where status=ok --where precision=$p --sort bucket_mb); do
        s2=$(two "$ce" $p step_ms_mean "$b"); s1=$(one "$ce" $p step_ms_mean "$b")
        [ -n "$s2" ] && [ -n "$s1" ] || continue
        echo "| $p | $(calc %g "$b") | $(f1 "$s1") | $(f1 "$s2") | $(calc %.3f "$s2 / $s1") | $(f1 "$(one "$ce" $p bwd_ms_mean "$b")") -> $(f1 "$(two "$ce" $p bwd_ms_mean "$b")") | $(calc %.2f "$(two "$ce" $p exposed_comm_ms_mean "$b")") | $(f1 "$(two "$ce" $p opt_ms_mean "$b")") |"
      done
    done
    echo
    ce_lo=$(tool value "$ce" --where status=ok --where world_size=2 --where precision=bf16 --agg min --default "" --col bucket_mb)
    ce_hi=$(tool value "$ce" --where status=ok --where world_size=2 --where precision=bf16 --agg max --default "" --col bucket_mb)
    if [ -n "$ce_lo" ] && [ -n "$ce_hi" ] && [ "$ce_lo" != "$ch" ] && [ "$ce_hi" != "$ch" ]; then
      echo "In bf16 the bucket size matters, as the model of 2.3.5 (b) says it"
      echo "should once backward is short: $(calc %g "$ce_lo") MiB buckets leave $(calc %.1f "$(two "$ce" bf16 exposed_comm_ms_mean "$ce_lo")") ms of transfers after"
      echo "backward, $(calc %g "$ch") MiB $(calc %.1f "$(two "$ce" bf16 exposed_comm_ms_mean "$ch")") ms, and $(calc %g "$ce_hi") MiB leaves the last bucket's AdamW"
      echo "($(f1 "$(two "$ce" bf16 opt_ms_mean "$ce_hi")") ms) after it."
      echo
    fi
  fi

  # -- the copy-engine forms on the fused path --------------------------------------
  # FORM: the op-by-op experiment; FORM_fused: the same form fused + flash
  fused_forms=""
  for fm in ddp_copy_engine zero1_copy_engine; do
    has_rows "$DATA/${fm}_fused.csv" && fused_forms="$fused_forms $fm"
  done
  if [ -n "$fused_forms" ]; then
    echo "#### The copy-engine forms on the fused path ($(for fm in $fused_forms; do printf '%s_fused ' "$fm"; done | sed 's/ $//; s/ /, /g'))"
    echo
    cat <<EOF
Every DDP row above runs the model op by op with materialised attention,
so that the forms compare like for like. PyTorch's compiled step fuses,
so here the copy-engine forms run on the path our training step takes
(fused kernels, FlashAttention), each precision at its fastest 2-GPU
bucket:

| form | precision | bucket (MiB) | 1-GPU step (ms) | 2-GPU step (ms) | op by op, 2 GPUs (ms) | PyTorch compiled, 1 / 2 GPUs (ms) | 2 GPUs against PyTorch |
|---|---|--:|--:|--:|--:|--:|---|
EOF
    for fm in $fused_forms; do
      fu="$DATA/${fm}_fused.csv" op="$DATA/$fm.csv"
      case $fm in ddp_copy_engine) fname="DDP (all-gather)" ;; *) fname="ZeRO-1 (all-to-all)" ;; esac
      for p in fp32 bf16; do
        b=$(best_bucket $p "$fu")
        [ -n "$b" ] || continue
        s2=$(two "$fu" $p step_ms_mean "$b"); s1=$(one "$fu" $p step_ms_mean "$b")
        ob=$(best_bucket $p "$op")
        o2=$([ -n "$ob" ] && two "$op" $p step_ms_mean "$ob")
        t1=$(pt $p 1) t2=$(pt $p 2)
        vs=-
        [ -n "$t2" ] && { num "PyTorch's 2-GPU step" "$t2"; vs=$(verdict "$s2" "$t2"); }
        echo "| $fname$(kind_tag "$fu") | $p | $(calc %g "$b") | $(f1 "$s1") | $(f1 "$s2") | $(f1 "$o2") | $(f1 "$t1") / $(f1 "$t2") | $vs |"
      done
    done
    echo
    # Where the fused bf16 step's second GPU goes: backward with the
    # transfers beside it, and what is left of them after it.
    said=""
    for fm in $fused_forms; do
      fu="$DATA/${fm}_fused.csv"
      b=$(best_bucket bf16 "$fu")
      [ -n "$b" ] || continue
      b1=$(one "$fu" bf16 bwd_ms_mean "$b") b2=$(two "$fu" bf16 bwd_ms_mean "$b")
      ex=$(two "$fu" bf16 exposed_comm_ms_mean "$b")
      [ -n "$b1" ] && [ -n "$b2" ] && [ -n "$ex" ] || continue
      case $fm in ddp_copy_engine) fname="DDP's" ;; *) fname="ZeRO-1's" ;; esac
      said="$said${said:+; }$fname backward takes $(f1 "$b1") ms on one GPU and $(f1 "$b2") ms on two, with $(f1 "$ex") ms of transfers left after it at $(calc %g "$b") MiB"
      op="$DATA/$fm.csv" ob=$(best_bucket bf16 "$DATA/$fm.csv")
      [ -z "$ob" ] || said="$said (op by op $(f1 "$(one "$op" bf16 bwd_ms_mean "$ob")") -> $(f1 "$(two "$op" bf16 bwd_ms_mean "$ob")") ms, $(f1 "$(two "$op" bf16 exposed_comm_ms_mean "$ob")") ms left)"
    done
    if [ -n "$said" ]; then
      echo "Where the bf16 step's second GPU goes on the fused path, whose"
      echo "backward is the shorter: $said."
      echo
    fi
    for fm in $fused_forms; do
      failed_jobs "$DATA/${fm}_fused.csv" precision,world_size,bucket_mb,status,message \
        "precision,GPUs,bucket (MiB),status,message"
    done
  fi
  for fm in ddp_copy_engine zero1_copy_engine; do
    has_rows "$DATA/${fm}_fused.csv" ||
      todo "${fm}_fused.csv on 2 GPUs (\`./runner experiments/${fm}_fused.cfg\`)"
  done

  # -- ZeRO-1 on the copy engines, and larger batches ------------------------------
  zf=$(best_bucket fp32 "$z1ce"); zh=$(best_bucket bf16 "$z1ce")
  if [ -n "$zf" ] && [ -n "$zh" ]; then
    echo "#### ZeRO-1 on the copy engines, and larger batches (zero1_copy_engine, zero1_batch_scaling)"
    echo
    z2=$(two "$z1ce" fp32 step_ms_mean "$zf"); z1=$(one "$z1ce" fp32 step_ms_mean "$zf")
    y2=$(two "$z1ce" bf16 step_ms_mean "$zh"); y1=$(one "$z1ce" bf16 step_ms_mean "$zh")
    cat <<EOF
With ZeRO-1 each bucket goes through an all-to-all on the copy engines, so
a rank receives only its own half of the other's bucket; AdamW updates
that half and the updated weights are all-gathered in place on a second
zero-CTA communicator, all queued during backward. The same bytes cross
NVLink as in the all-gather form, but each GPU runs half of AdamW and
holds half its state ($(calc %.0f "$(two "$z1ce" fp32 optstate_mib "$zf")") MiB against $(calc %.0f "$(one "$z1ce" fp32 optstate_mib "$zf")")). Best: $(f1 "$z2") ms fp32 at $(calc %g "$zf") MiB,
$(calc %.3f "$z2 / $z1") x one GPU, and $(f1 "$y2") ms bf16 at $(calc %g "$zh") MiB, $(calc %.3f "$y2 / $y1") x.
EOF
    if has_rows "$zbs"; then
      cat <<EOF
The transfers and the half of AdamW are set by the weights, not by the
tokens, so what the second GPU adds does not grow with the per-GPU batch
while the step does (zero1_batch_scaling.csv$(kind_tag "$zbs"), $(tool distinct "$zbs" --cols bucket_mb --where status=ok | awk 'NF { printf "%s%g", (n++ ? ", " : ""), $1 }') MiB buckets):

| precision | sequences per GPU | 1-GPU step (ms) | 2-GPU step (ms) | ratio |
|---|--:|--:|--:|--:|
EOF
      for p in fp32 bf16; do
        for rb in $(tool distinct "$zbs" --cols rank_batch --where status=ok --where precision=$p --sort rank_batch); do
          s2=$(v "$zbs" $p 2 step_ms_mean --where rank_batch="$rb")
          s1=$(v "$zbs" $p 1 step_ms_mean --where rank_batch="$rb")
          [ -n "$s2" ] && [ -n "$s1" ] || continue
          echo "| $p | $rb | $(f1 "$s1") | $(f1 "$s2") | $(calc %.3f "$s2 / $s1") |"
        done
      done
    fi
    echo
  fi

  # -- settled choices ------------------------------------------------------------
  # Conclusions of runs of patched builds outside the runner (git history
  # keeps the patches and outputs): words only, no numbers.
  [ -n "$cf" ] && [ -n "$ch" ] || return 0
  cat <<'EOF'
#### Choices the copy-engine rows are measured with

Settled by diagnostic runs of patched builds outside the runner (words
only; git history keeps the patches and outputs):

- The host issues a bucket's transfer once it sees the bucket's ready
  event complete, and its AdamW once it sees the transfer's end, one bucket
  at a time in the same order on every rank; making the streams wait on
  those events during backward slowed backward even with no byte moved.
- The compute stream runs one priority level above the optimizer's.
- AdamW during backward runs as `gemm_sm_reserve` persistent blocks:
  fewer left part of it after backward, more slowed backward.
- Gradient views that lie end to end in a bucket are zeroed by one memset.

EOF
}

case $PROBLEM in
  naive_ddp_benchmarking) naive_section ;;
  minimal_ddp_flat_benchmarking) flat_section ;;
  ddp_overlap_individual_parameters_benchmarking) overlap_a; overlap_b ;;
  ddp_bucketed_benchmarking) bucketed_a; bucketed_b ;;
  ddp_appendix) appendix ;;
esac
