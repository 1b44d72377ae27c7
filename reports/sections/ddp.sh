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
#     (ddp_copy_engine, zero1_copy_engine, both also _fused,
#     zero1_batch_scaling).
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
# own: the problem's CSV, exp its experiment; memos: the variables naming
# the files the problem reads most (vmemo memoises them).
case ${PROBLEM:-} in
  naive_ddp_benchmarking) naive=${CSV:-$naive}; own=$naive; exp=$PROBLEM; memos="naive" ;;
  minimal_ddp_flat_benchmarking) flat=${CSV:-$flat}; own=$flat; exp=$PROBLEM; memos="naive flat" ;;
  ddp_overlap_individual_parameters_benchmarking) overlap=${CSV:-$overlap}; own=$overlap; exp=$PROBLEM; memos="naive flat overlap" ;;
  ddp_bucketed_benchmarking) csv=${CSV:-$csv}; own=$csv; exp=$PROBLEM; memos="csv flat overlap" ;;
  ddp_appendix) csv=${CSV:-$csv}; own=$csv; exp=ddp_bucketed_benchmarking; memos="ce cef z1ce z1cef csv" ;;
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

require_rows "$own" "$exp" "on 2 GPUs"
for f in "$pt_csv" "$REPORTS/ddp_timeline.gp" "$REPORTS/ddp_buckets.gp"; do
  [ -f "$f" ] || { echo "ddp.sh: $f is missing" >&2; exit 1; }
done

# POSIX sh has no local variables: every name below is global, so a helper
# only assigns names of its own prefix (v_, tr_, bb_, ...), never one that
# a caller or the main script uses.
# v FILE PREC WS COL [csvtool args]: the latest ok row's value, or empty.
# From a memo (vmemo) where FILE has one and the args are at most one
# bucket (--where bucket_mb=B) and one --fmt, else from csvtool.
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
for vm_n in $memos; do eval "vmemo V_$vm_n \"\$$vm_n\""; done
# two / one FILE PREC COL [BUCKET]: the 2- and 1-GPU values.
two() { v "$1" "$2" 2 "$3" ${4:+--where bucket_mb="$4"}; }
one() { v "$1" "$2" 1 "$3" ${4:+--where bucket_mb="$4"}; }
# faster_one PREC OURS THEIRS: who is faster on one GPU in PREC, ours
# against PyTorch's step (ms), as a speed ratio: "in fp32 PyTorch is 1.04x
# as fast (103.4 against our 107.6 ms)" or "in bf16 we are 1.06x as fast
# (36.1 against its 38.0 ms)".
faster_one() {
  if is_true "$2 > $3"; then
    echo "in $1 PyTorch is $(as_fast "$3" "$2") ($3 against our $(f1 "$2") ms)"
  else
    echo "in $1 we are $(as_fast "$2" "$3") ($(f1 "$2") against its $3 ms)"
  fi
}
# join(S, N) in awk (prepend "$AWK_JOIN" to the program): S[1..N] as
# "a", "a and b", "a, b and c".
AWK_JOIN='
function join(s, n,   i, r) { r = ""; for (i = 1; i <= n; i++) r = r (i == 1 ? "" : i == n ? " and " : ", ") s[i]; return r }
'
# quot A B: A / B to two decimals ("-" without either); the scaling
# efficiency is quot ONE_GPU_STEP TWO_GPU_STEP.
quot() { [ -n "$1" ] && [ -n "$2" ] && calc "%.2f" "$1 / $2" || printf -- '-'; }
# best_bucket PREC [FILE]: the bucket size with the fastest 2-GPU step.
best_bucket() {
  bb_f=${2:-$csv}
  [ -f "$bb_f" ] || return 0
  tool value "$bb_f" --where status=ok --where precision="$1" --where world_size=2 \
    --sort step_ms_mean --agg first --default "" --col bucket_mb
}
# ratio21 FILE PREC: 2-GPU step / 1-GPU step at PREC's fastest 2-GPU
# bucket (what the appendix calls the ratio), or nothing.
ratio21() {
  r_b=$(best_bucket "$2" "$1")
  [ -n "$r_b" ] || return 0
  r_2=$(two "$1" "$2" step_ms_mean "$r_b") r_1=$(one "$1" "$2" step_ms_mean "$r_b")
  [ -z "$r_2" ] || [ -z "$r_1" ] || calc %.3f "$r_2 / $r_1"
}
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

# PyTorch's DDP (pt_name), the strongest anchor: pt PREC WS its step (ms);
# pt_peak PREC its 2-GPU peak GiB per GPU ("A-B" where the anchor gives a
# range); pt_how how its rows were configured, said once (appendix B);
# pt_src where they are from; pt_stat its steps' statistic where it is not
# our mean; pt_bm its buckets (MB); pt_only the precisions and GPU counts it
# was measured in one CUDA-graph form only; pt_gcol its column that names
# its GPUs. pt_ok: it was measured on our GPU model (else it is not
# compared; pt_kind names its model). pe PREC: eager PyTorch's 2-GPU step.
pt_name="PyTorch DDP + torch.compile + fused AdamW"
pe() { [ -f "$pe_csv" ] && tool value "$pe_csv" --agg first --default "" --where precision="$1" --col step_ms_median || true; }
pt_stat="" pt_only="" pt_kind="" pt_ok=0
# The scripted anchor (reports/anchors/torch_ddp.py, its rows from every GPU
# in torch_ddp.csv) where it has rows at our shape on our GPU, both
# precisions on 1 and 2 GPUs: per precision and GPU count its fastest row
# (one GPU: no DDP) by median step, the anchors' statistic everywhere in
# the writeup (ours are means; the prose says so).
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
    # its fp32 2-GPU steps vary: their mean stands well above the median
    pt_col() { # PREC WS COL [csvtool args]
      pc_p=$1 pc_w=$2 pc_c=$3; shift 3
      # shellcheck disable=SC2086 # pt_w is a list of arguments
      tool value "$pt_csv" --sort step_ms_median --agg first --default "" $pt_w --where precision="$pc_p" --where world_size="$pc_w" --col "$pc_c" "$@"
    }
    pt() { pt_col "$1" "$2" step_ms_median --fmt %.1f; }
    pt_peak() { pt_col "$1" 2 peak_gib --fmt %.1f; }
    pt_stat=median
    pt_bm=$(tool distinct "$pt_csv" --cols bucket_mb $pt_w --where world_size=2 --sort bucket_mb | tr '\n' ';' | sed 's/;$//; s/;/, /g')
    # which rows had CUDA graphs: the faster of the two where both were
    # measured (cmp), else the only one (only)
    pt_cmp=""
    for p in fp32 bf16; do
      pt_g="" pt_n=""
      for w in 1 2; do
        case $(pt_col $p $w config) in *cudagraphs) pt_g="$pt_g with" ;; *) pt_g="$pt_g without" ;; esac
        # shellcheck disable=SC2086 # pt_w is a list of arguments
        pt_n="$pt_n $(tool count "$pt_csv" $pt_w --where precision=$p --where world_size=$w --first-of config)"
      done
      # shellcheck disable=SC2086 # split "g1 g2 n1 n2"
      set -- $pt_g $pt_n
      if [ "$3" -ge 2 ] && [ "$4" -ge 2 ] && [ "$1" = "$2" ]; then
        pt_cmp="$pt_cmp${pt_cmp:+; }$p on 1 and 2 GPUs: $1"
      elif [ "$3" -lt 2 ] && [ "$4" -lt 2 ]; then
        pt_only="$pt_only${pt_only:+; }$p was measured only $1 them on 1 GPU and only $2 them on 2"
      else
        if [ "$3" -lt 2 ]; then pt_only="$pt_only${pt_only:+; }$p was measured only $1 them on 1 GPU"
        else pt_cmp="$pt_cmp${pt_cmp:+; }$p on 1 GPU: $1"; fi
        if [ "$4" -lt 2 ]; then pt_only="$pt_only${pt_only:+; }$p was measured only $2 them on 2 GPUs"
        else pt_cmp="$pt_cmp${pt_cmp:+; }$p on 2 GPUs: $2"; fi
      fi
    done
    pt_how="bucket_cap_mb $pt_bm${pt_cmp:+, the faster of with and without CUDA graphs where both were measured ($pt_cmp)}${pt_only:+; $pt_only}"
    pt_src="reports/anchors/torch_ddp.csv, measured by reports/anchors/torch_ddp.py on $(tool value "$pt_csv" --agg first $pt_w --col gpu) GPUs"
    pt_gcol=gpu
    pt_ok=1
  fi
fi
# Else the same configuration's numbers copied into
# ddp_pytorch_compiled.csv, compared where they come from our GPU model.
if [ $pt_ok -eq 0 ]; then
  pt() { tool value "$pt_csv" --agg first --default "" --where precision="$1" --where world_size="$2" --col step_ms; }
  pt_peak() { echo "$(tool value "$pt_csv" --agg first --default "" --col peak_gib_min)-$(tool value "$pt_csv" --agg first --default "" --col peak_gib_max)"; }
  pt_bm=$(tool value "$pt_csv" --agg first --default "?" --col bucket_mb)
  pt_how="$pt_bm MB buckets"
  pt_src="reports/anchors/ddp_pytorch_compiled.csv, the team's side-by-side measurement on $(tool value "$pt_csv" --agg first --default "?" --col machine)"
  pt_gcol=machine
  pt_kind=$(gpu_model "$pt_csv" machine)
  [ "$pt_kind" != "$ours" ] || pt_ok=1
fi
# pt_absent: said, with its todo, wherever the PyTorch comparison would
# stand when it cannot (pt_ok 0).
pt_absent() {
  echo "The strongest PyTorch ($pt_name) has not been measured on 2 x $ours at this shape yet (the copied anchor is from 2 x $pt_kind): run \`NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node=2 reports/anchors/torch_ddp.py reports/anchors/torch_ddp.csv --precisions fp32\` and then \`bf16\` on that machine."
  echo
  todo "PyTorch's DDP on 2 x $ours (reports/anchors/torch_ddp.py)"
}

# The table of rows: table_head FIRST_HEADERS FIRST_ALIGN, then a trow
# each.
table_head() {
  echo "$1 GPUs | step (ms) | backward (ms) | grad comm (ms) | after backward (ms) | collectives | collectives busy / step | exposed / step | scaling efficiency |"
  echo "$2--:|--:|--:|--:|--:|--:|--:|--:|--:|"
}
# share X [OF]: X as a whole percentage of OF, of 1 without it ("-"
# without X).
share() { [ -n "$1" ] && calc '%.0f%%' "100 * $1 / ${2:-1}" || printf -- '-'; }
# trow LEAD FILE PREC GPUS [BUCKET]: the row of FILE's latest ok row at
# PREC, GPUS (and BUCKET), nothing where there is none; LEAD is its first
# cells ("| naive | fp32 |").
trow() {
  tr_l=$1 tr_f=$2 tr_p=$3 tr_w=$4 tr_b=${5:-}
  tr_s=$(tr_q step_ms_mean)
  [ -n "$tr_s" ] || return 0
  tr_e="-"
  if [ "$tr_w" -ne 1 ]; then
    tr_e=$(quot "$(v "$tr_f" "$tr_p" 1 step_ms_mean ${tr_b:+--where bucket_mb="$tr_b"})" "$tr_s")
  fi
  echo "$tr_l $tr_w | $(f1 "$tr_s") | $(d "$(tr_q bwd_ms_mean %.1f)") | $(d "$(tr_q grad_comm_ms_mean %.1f)") | $(d "$(tr_q exposed_comm_ms_mean %.2f)") | $(d "$(tr_q grad_collectives)") | $(share "$(tr_q comm_share)") | $(share "$(tr_q exposed_comm_ms_mean)" "$tr_s") | $tr_e |"
}
# tr_q COL [FMT]: COL of trow's row
tr_q() { v "$tr_f" "$tr_p" "$tr_w" "$1" ${tr_b:+--where bucket_mb="$tr_b"} ${2:+--fmt "$2"}; }
# sfile / slabel STRATEGY: the CSV and the table label of naive, flat or
# overlap.
sfile() { case $1 in naive) echo "$naive" ;; flat) echo "$flat" ;; overlap) echo "$overlap" ;; esac; }
slabel() {
  case $1 in
    naive) printf 'naive (per tensor, after backward)' ;;
    flat) printf 'flat (one all-reduce, after backward)' ;;
    overlap) printf 'overlap (per tensor, from the hook)' ;;
  esac
}
# strategies_table STRATEGY...: their rows, fp32 then bf16, 1 and 2 GPUs.
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
# precs FILE...: the precisions, fp32 first, in which every FILE has a
# step on 1 and 2 GPUs ("fp32 bf16", "bf16", ... or nothing): an answer
# speaks of those, so a sweep cut to one precision still gets one.
precs() {
  pr_l=""
  for pr_p in fp32 bf16; do
    pr_ok=1
    for pr_f in "$@"; do
      for pr_w in 1 2; do
        [ -n "$(v "$pr_f" $pr_p $pr_w step_ms_mean)" ] || pr_ok=""
      done
    done
    [ -z "$pr_ok" ] || pr_l="$pr_l${pr_l:+ }$pr_p"
  done
  printf '%s' "$pr_l"
}

# ---- the all-reduce fit: time = o + x / w for x MiB per rank ----------------
# Least squares through the NCCL 2-rank medians, on relative error (each
# point weighted by 1 / t^2): unweighted, the 1 GiB point sets the line and
# o comes out above a whole 1 MiB all-reduce. o in ms, w in MiB/ms; npts
# the points; ar_x1, ar_t1 the smallest size and its time (o must not
# exceed it), ar_xn the largest size; ar_err the fit's largest error,
# percent of a point's time; ar_machine the machines measured.
ar_o="" ar_w="" npts=0 ar_machine="" ar_x1="" ar_t1="" ar_xn="" ar_err=""
# ar2 SUBCOMMAND ARG...: csvtool over the NCCL 2-rank rows that count, each
# size's latest row if ok (a job measured again leaves older rows behind).
ar2() {
  ar2_sub=$1; shift
  tool "$ar2_sub" "$ar" --latest backend,world_size,size_mib --where status=ok \
    --where backend=nccl --where world_size=2 "$@"
}
if [ -f "$ar" ] && [ "$(ar2 count)" -ge 2 ]; then
  fit=$(ar2 select --cols size_mib,time_ms_median --sort size_mib |
        awk -F, 'NR > 1 { k++; xs[k] = $1; ts[k] = $2; q = 1 / ($2 * $2)
                          n += q; x += q * $1; y += q * $2; xx += q * $1 * $1; xy += q * $1 * $2 }
          END { a = (n * xy - x * y) / (n * xx - x * x); o = (y - a * x) / n
                for (i = 1; i <= k; i++) { e = (o + a * xs[i] - ts[i]) / ts[i]; if (e < 0) e = -e; if (e > m) m = e }
                printf "%.6g %.6g %d %s %s %.6g %s", o, 1 / a, k, xs[1], ts[1], 100 * m, xs[k] }')
  # shellcheck disable=SC2086 # split "o w n x1 t1 err xn"
  set -- $fit
  ar_o=$1 ar_w=$2 npts=$3 ar_x1=$4 ar_t1=$5 ar_err=$6 ar_xn=$7
  num "the fitted per-call overhead" "$ar_o"
  num "the fitted bandwidth" "$ar_w"
  num "the smallest all-reduce's time" "$ar_t1"
  if ! is_true "$ar_o > 0"; then
    echo "ddp.sh: $ar: the fit gives a per-call overhead of $ar_o ms (not positive): the model has no optimum" >&2
    exit 1
  fi
  ar_machine=$(ar2 distinct --cols machine --sort machine | awk 'NF { printf "%s%s", (n++ ? ", " : ""), $0 }')
fi

# ---- 2.2.2 naive_ddp_benchmarking -------------------------------------------
naive_section() {
  # shellcheck disable=SC2046 # the precisions, one a word
  set -- $(precs "$naive")
  if [ $# -gt 0 ]; then
    p1=$1 p2=${2:-} t2="" e2=""
    if [ -n "$p2" ]; then
      t2="; in $p2 $(f1 "$(two "$naive" "$p2" step_ms_mean)") ms, of which $(f1 "$(two "$naive" "$p2" grad_comm_ms_mean)") ms
($(share "$(two "$naive" "$p2" comm_share)"))"
      e2=" / $(quot "$(one "$naive" "$p2" step_ms_mean)" "$(two "$naive" "$p2" step_ms_mean)")"
    fi
    cat <<EOF
Naive DDP takes $(f1 "$(two "$naive" "$p1" step_ms_mean)") ms per step in $p1 on 2 GPUs, of which
$(f1 "$(two "$naive" "$p1" grad_comm_ms_mean)") ms ($(share "$(two "$naive" "$p1" comm_share)")) is spent all-reducing gradients$t2. None of it overlaps compute: the $(two "$naive" "$p1" grad_collectives) all-reduces, one per
parameter tensor, start after backward, so the 2-GPU step is one GPU's step
plus the communication (scaling efficiency $(quot "$(one "$naive" "$p1" step_ms_mean)" "$(two "$naive" "$p1" step_ms_mean)")$e2).

EOF
  fi
  strategies_table naive
  failed_jobs "$naive" precision,world_size,status,message "precision,GPUs,status,message"
  cfg=$(tool distinct "$naive" --cols size,context,rank_batch,warmup,steps,vocab --where status=ok --sep ' ' | head -n 1)
  # shellcheck disable=SC2086 # split the fields
  set -- $cfg
  # the GPU model only where the machine's name does not already say it
  machines=$(tool distinct "$naive" --cols machine,gpu_name,nccl_version --where status=ok --sep '|' |
    awk -F'|' 'NF { printf "%s%s (%sNCCL %s)", (n++ ? "; " : ""), $1, (index($1, $2) ? "" : $2 ", "), $3 }')
  cat <<EOF
Setup: job kind \`ddp\` (jobs/ddp.c, parallel/ddp.c) trains the $1 model
(vocabulary $6, context $2), one GPU per rank, on $machines. Each rank
runs forward and backward on its $3 sequences, the gradients are averaged,
then every rank runs AdamW. Gradients travel in fp32 in both precisions,
so bf16 changes the compute, not the $(f0 "$(two "$naive" fp32 grad_comm_mib)") MiB sent per step. The 1-GPU
row has the same per-GPU batch; scaling efficiency = 1-GPU step / 2-GPU
step. $4 untimed and $5 timed steps; columns are means of the maximum over
ranks: backward up to the wait for the gradients; grad comm the
collectives' summed durations (CUDA events); after backward what is left
of them when backward ends. Overlapped collectives run longer but hide,
so they can show the larger busy share and the smaller exposed one.

EOF
}

# ---- 2.3.1 minimal_ddp_flat_benchmarking ------------------------------------
flat_section() {
  # shellcheck disable=SC2046 # the precisions, one a word
  set -- $(precs "$flat" "$naive")
  if [ $# -gt 0 ]; then
    p1=$1 p2=${2:-}
    sv=$(calc %.4f "$(two "$naive" "$p1" grad_comm_ms_mean) - $(two "$flat" "$p1" grad_comm_ms_mean)")
    # the saving against the fit: its fixed cost of the calls dropped, and
    # the one large message's bandwidth against the fit's w
    fixed="."
    if [ -n "$ar_o" ]; then
      nd=$(($(two "$naive" "$p1" grad_collectives) - $(two "$flat" "$p1" grad_collectives)))
      fc=$(calc %.4f "$nd * $ar_o")
      fbw=$(calc %.4f "$(two "$flat" "$p1" grad_comm_mib) / $(two "$flat" "$p1" grad_comm_ms_mean)")
      if is_true "$sv > $fc && $fbw > $ar_w"; then
        fixed=". By the all-reduce fit of 2.3.5 (b), $(f1 "$fc") ms of that is the fixed cost of
the $nd calls it drops ($(calc %.3f "$ar_o") ms a call), the rest the one $(f0 "$(two "$flat" "$p1" grad_comm_mib)") MiB message's higher
bandwidth: $(f0 "$fbw") MiB/ms against the fit's $(f0 "$ar_w")."
      else
        fixed=". By the all-reduce fit of 2.3.5 (b), the $nd calls it drops have a fixed cost of
$(f1 "$fc") ms ($(calc %.3f "$ar_o") ms a call)."
      fi
    fi
    f2="" n2=""
    if [ -n "$p2" ]; then
      f2=" and $(f1 "$(two "$flat" "$p2" step_ms_mean)") ms in $p2
($(f1 "$(two "$flat" "$p2" grad_comm_ms_mean)") ms)"
      n2=" and $(f1 "$(two "$naive" "$p2" step_ms_mean)")"
    fi
    cat <<EOF
With one all-reduce of the flat $(f0 "$(two "$flat" "$p1" grad_comm_mib)") MiB gradient buffer the 2-GPU step takes
$(f1 "$(two "$flat" "$p1" step_ms_mean)") ms in $p1 ($(f1 "$(two "$flat" "$p1" grad_comm_ms_mean)") ms communicating gradients)$f2, against $(f1 "$(two "$naive" "$p1" step_ms_mean)")$n2 ms for $(two "$naive" "$p1" grad_collectives) per-tensor calls: batching
saves $(f1 "$sv") ms of communication per step ($p1)$fixed
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
  # shellcheck disable=SC2046 # the precisions, one a word
  set -- $(precs "$overlap")
  if [ $# -gt 0 ]; then
    p1=$1 p2=${2:-}
    cmp=""
    if [ "$(precs "$overlap" "$naive" "$flat")" = "$*" ]; then
      cmp=", against $(f1 "$(two "$naive" "$p1" step_ms_mean)") ms naive and $(f1 "$(two "$flat" "$p1" step_ms_mean)") ms flat"
      [ -z "$p2" ] || cmp="$cmp ($p2: $(f1 "$(two "$overlap" "$p2" step_ms_mean)") against $(f1 "$(two "$naive" "$p2" step_ms_mean)") and
$(f1 "$(two "$flat" "$p2" step_ms_mean)") ms)"
    fi
    x2="" b2=""
    if [ -n "$p2" ]; then
      x2=" and $(calc %.2f "$(two "$overlap" "$p2" exposed_comm_ms_mean)") ms ($p2)"
      b2=" ($p2 $(f1 "$(one "$overlap" "$p2" bwd_ms_mean)") to $(f1 "$(two "$overlap" "$p2" bwd_ms_mean)") ms)"
    fi
    cat <<EOF
Overlapping takes the 2-GPU step to $(f1 "$(two "$overlap" "$p1" step_ms_mean)") ms in $p1$cmp: only
$(calc %.2f "$(two "$overlap" "$p1" exposed_comm_ms_mean)") ms ($p1)$x2 of communication is left after backward. It is
not free: backward itself grows from $(f1 "$(one "$overlap" "$p1" bwd_ms_mean)") to $(f1 "$(two "$overlap" "$p1" bwd_ms_mean)") ms$b2
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
  # the figure's rows (reports/ddp_timeline.gp says what they are)
  tl_ok=1 tl_note="" tl_story=""
  tmp="$OUT/ddp_timeline.tmp.csv"
  echo "panel,lane,kind,t0,t1" > "$tmp"
  panel=0
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
      if [ $((ngv / 2)) -lt "$hooks" ]; then
        printf '%s\n' "$g" | awk -v p=$panel -v l=$lane_c 'NF { e = $1 }
          END { print p "," l ",cut," e "," }' >> "$tmp"
        tl_note="$tl_note${tl_note:+; }$s rank $r: $((ngv / 2)) of $hooks all-reduces recorded"
      fi
      # Rank 0's story in numbers: backward's end, and how many recorded
      # all-reduces started before it.
      if [ $r -eq 0 ]; then
        be=$(printf '%s\n' "$b" | awk 'NF { e = $1 } END { printf "%.1f", e }')
        under=$(printf '%s\n' "$g" | awk -v e="$be" 'NF && NR % 2 && $1 < e { n++ } END { print n + 0 }')
        f0=$(printf '%s\n' "$g" | awk 'NF { printf "%.1f", $1; exit }')
        tl_story="$tl_story${tl_story:+; }$s: backward ends at $be ms, the first all-reduce starts at ${f0:-?} ms, $under of the $((ngv / 2)) recorded start before backward ends"
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
Rank 0, $tl_story.

EOF
    # Both panels' x range, in whole tens of ms: from the earliest
    # backward start past the latest event, with room on the right for
    # the "recording cut here" labels where a lane has one.
    xr=$(awk -F, 'BEGIN { lo = 1000000; hi = 0; room = 0 }
      NR > 1 { if ($3 == "bwd" && $4 < lo) lo = $4
               if ($3 == "cut") room = 18
               for (i = 4; i <= 5; i++) if ($i != "" && $i > hi) hi = $i }
      END { printf "%d %d", int(lo / 10) * 10, (int((hi + room) / 10) + 1) * 10 }' "$tmp")
    "$GNUPLOT" -c "$REPORTS/ddp_timeline.gp" "$tmp" "$OUT/ddp_timeline.svg" \
      "Naive DDP: $(two "$naive" fp32 grad_collectives) all-reduces after backward (fp32, 2 GPUs, one step)" \
      "Overlapped DDP: each tensor's all-reduce started from its backward hook (fp32, 2 GPUs, one step)" \
      "${xr% *}" "${xr#* }"
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
# mm_gap FILE PREC:GPUS:BUCKET...: the largest gap between a row's mean and
# median step (ms), for the note that sets our means beside PyTorch's
# medians.
mm_gap() {
  mg_f=$1
  shift
  for mg_r in "$@"; do
    mg_p=${mg_r%%:*} mg_r=${mg_r#*:}
    mg_w=${mg_r%%:*} mg_b=${mg_r#*:}
    echo "$(v "$mg_f" "$mg_p" "$mg_w" step_ms_mean --where bucket_mb="$mg_b") $(v "$mg_f" "$mg_p" "$mg_w" step_ms_median --where bucket_mb="$mg_b")"
  done | awk 'NF == 2 { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.2f", m + 0 }'
}
# settings_runs BUCKET: the NCCL block cap (sn_c) and the SMs left free
# (sn_g) that the bucketed rows ran with, and the same fp32 2-GPU step at
# BUCKET in the runs with NCCL's defaults (appendix B's, and optimizer
# state sharding's, which quotes it): sn_d lists them by file, sn_lo and
# sn_hi bound them. They differ by the settings and from run to run.
settings_runs() {
  sn_c=$(tool value "$csv" --where status=ok --agg first --default 0 --col nccl_max_ctas)
  sn_g=$(tool value "$csv" --where status=ok --agg first --default 0 --col gemm_sm_reserve)
  sn_o="$DATA/optimizer_state_sharding_accounting.csv"
  sn_d="" sn_lo="" sn_hi=""
  for sn_f in "$ctas" "$smr" "$sn_o"; do
    [ -f "$sn_f" ] && has_col "$sn_f" gemm_sm_reserve || continue
    sn_x=$(v "$sn_f" fp32 2 step_ms_mean --where bucket_mb="$1" --where strategy=bucketed \
      --where optimizer=adamw --where grad_sync=allreduce --where nccl_max_ctas=0 --where gemm_sm_reserve=0)
    [ -n "$sn_x" ] || continue
    num "a default-settings step" "$sn_x"
    if [ -z "$sn_lo" ] || is_true "$sn_x < $sn_lo"; then sn_lo=$sn_x; fi
    if [ -z "$sn_hi" ] || is_true "$sn_x > $sn_hi"; then sn_hi=$sn_x; fi
    sn_n=${sn_f##*/}
    if [ "$sn_f" = "$sn_o" ]; then
      sn_s=$(awk '$2 == "optimizer_state_sharding_accounting" { print $1; exit }' "${PROBLEMS:-/dev/null}")
      sn_n="${sn_s:+$sn_s, }$sn_n"
    fi
    # the run of these rows' own settings beside its default row
    if [ "$sn_f" = "$smr" ] && { [ "$sn_c" != 0 ] || [ "$sn_g" != 0 ]; }; then
      sn_y=$(v "$smr" fp32 2 step_ms_mean --where bucket_mb="$1" --where nccl_max_ctas="$sn_c" --where gemm_sm_reserve="$sn_g")
      [ -z "$sn_y" ] || sn_n="$sn_n, whose run of 2.3.5's settings took $(f1 "$sn_y") ms"
    fi
    sn_d="$sn_d${sn_d:+|}$(f1 "$sn_x") ms ($sn_n)"
  done
  sn_d=$(printf '%s\n' "$sn_d" | tr '|' '\n' | awk "$AWK_JOIN"'NF { a[++n] = $0 } END { printf "%s", join(a, n) }')
}
# settings_note BUCKET: 2.3.5's settings in a sentence, and the range the
# default-settings runs took (their files: appendix B, settings_detail).
settings_note() {
  settings_runs "$1"
  sn_r=$(f1 "$sn_lo"); [ "$sn_lo" = "$sn_hi" ] || sn_r="$sn_r to $(f1 "$sn_hi")"
  if [ "$sn_c" != 0 ] || [ "$sn_g" != 0 ]; then
    sn_k="cap NCCL at $sn_c blocks per collective"
    [ "$sn_c" != 0 ] || sn_k="keep NCCL's default blocks"
    if [ -n "$sn_d" ]; then
      echo "These rows $sn_k and reserve $sn_g SMs for it; with NCCL's defaults"
      echo "and no reserve, other runs took $sn_r ms at $(calc %g "$1") MiB (fp32; appendix B)."
    else
      echo "These rows $sn_k and reserve $sn_g SMs for it (appendix B)."
    fi
  elif [ -n "$sn_d" ]; then
    echo "Other runs of this step (fp32, 2 GPUs, $(calc %g "$1") MiB) took $sn_r ms (appendix B): compare rows within one table."
  else
    return 0
  fi
  echo
}
# settings_detail BUCKET: for appendix B, the default-settings runs by
# file, against 2.3.5's own row.
settings_detail() {
  settings_runs "$1"
  [ -n "$sn_d" ] || return 0
  sd_own=$(two "$csv" fp32 step_ms_mean "$1")
  if [ "$sn_c" != 0 ] || [ "$sn_g" != 0 ]; then
    sd_cap="capped at $sn_c thread blocks per collective"
    [ "$sn_c" != 0 ] || sd_cap="with its default thread blocks"
    echo "2.3.5's rows run with NCCL $sd_cap and $sn_g SMs"
    echo "left free, $(f1 "$sd_own") ms for the fp32 2-GPU step at $(calc %g "$1") MiB; with NCCL's defaults and"
    echo "none left free, other runs took $sn_d."
  else
    echo "The fp32 2-GPU step at $(calc %g "$1") MiB took $(f1 "$sd_own") ms in 2.3.5 and $sn_d in other runs."
  fi
}
bucketed_a() {
  echo "### (a) Step time by bucket size"
  echo
  bf=$(best_bucket fp32); bh=$(best_bucket bf16) kf="" kh=""
  [ -z "$bf" ] || kf=$(two "$csv" fp32 step_ms_mean "$bf")
  [ -z "$bh" ] || kh=$(two "$csv" bf16 step_ms_mean "$bh")
  # bk / bb PREC: the best 2-GPU step and its bucket; kps the precisions
  # with one, ps those of them the per-tensor and flat rows have too
  bk() { if [ "$1" = fp32 ]; then printf '%s' "$kf"; else printf '%s' "$kh"; fi; }
  bb() { if [ "$1" = fp32 ]; then printf '%s' "$bf"; else printf '%s' "$bh"; fi; }
  kps=""
  for p in fp32 bf16; do [ -z "$(bk "$p")" ] || kps="$kps${kps:+ }$p"; done
  ps=""
  for p in $(precs "$overlap" "$flat"); do [ -z "$(bk "$p")" ] || ps="$ps${ps:+ }$p"; done
  # shellcheck disable=SC2086 # the precisions, one a word
  set -- $ps
  if [ $# -gt 0 ]; then
    p1=$1 p2=${2:-}
    answer="The"
    if same_kind "$overlap" && same_kind "$flat"; then
      answer="In direction they do: the"
      for p in $ps; do
        is_true "$(bk "$p") < $(two "$overlap" "$p" step_ms_mean) && $(bk "$p") < $(two "$flat" "$p" step_ms_mean)" ||
          answer="Not in every precision here: the"
      done
      [ -n "$p2" ] || [ "$answer" = "In direction they do: the" ] || answer="Not here: the"
      vs_1=" against
$(f1 "$(two "$overlap" "$p1" step_ms_mean)") ms overlapped per tensor and $(f1 "$(two "$flat" "$p1" step_ms_mean)") ms flat"
      vs_2=""
      [ -z "$p2" ] || vs_2="
against $(f1 "$(two "$overlap" "$p2" step_ms_mean)") and $(f1 "$(two "$flat" "$p2" step_ms_mean)") ms"
    else
      vs_1="" vs_2=" (the per-tensor and flat rows come from 2 x $(gpu_model "$overlap" gpu_name), so they are not
compared with these 2 x $ours rows)"
    fi
    for p in $ps; do num "a bucketed figure" "$(bk "$p")"; done
    best="$(f1 "$(bk "$p1")") ms in $p1 ($(calc %g "$(bb "$p1")") MiB buckets)$vs_1"
    if [ -n "$p2" ]; then
      best="$best, and $(f1 "$(bk "$p2")") ms in $p2 ($(calc %g "$(bb "$p2")") MiB)$vs_2"
    else
      best="$best$vs_2"
    fi
    cat <<EOF
**Answer.** Buckets keep the overlap and pay the per-call cost fewer
times, so they should beat per-tensor overlap and the flat buffer, best at
a middle size. $answer best 2-GPU step is $best.
EOF
    # the bucket size barely matters in fp32 when one GPU's backward
    # outlasts the whole all-reduce; bf16's shorter backward may not
    if [ -n "$ar_o" ] && [ -n "$kf" ]; then
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
      for x in "$lo" "$hi" "$b1" "$b2"; do num "a bucketed figure" "$x"; done
      arall=$(calc %.1f "$ar_o + $(two "$csv" fp32 grad_comm_mib "$bf") / $ar_w")
      if is_true "$b1 > $arall"; then
        cat <<EOF
In size they do not in fp32: the step moves only between $(f1 "$lo") and $(f1 "$hi") ms,
because one GPU's backward ($(f1 "$b1") ms) outlasts the whole all-reduce ($arall ms by
(b)'s fit), so even $(calc %g "$blo") MiB buckets hide their per-call costs; the second
GPU's cost is backward slowing to $(f1 "$b2") ms beside NCCL's kernels (appendix B).
EOF
        h1=""
        [ -z "$kh" ] || h1=$(one "$csv" bf16 bwd_ms_mean "$bh")
        if [ -n "$h1" ]; then
          cat <<EOF
In bf16 backward ($(f1 "$h1") ms) is $(if is_true "$h1 > 1.1 * $arall"; then printf 'longer than'; elif is_true "$h1 >= 0.9 * $arall"; then printf 'about as long as'; else printf 'shorter than'; fi) the all-reduce, so $(calc %g "$blo") MiB buckets
leave $(f1 "$(two "$csv" bf16 exposed_comm_ms_mean "$blo")") ms exposed and large ones win.
EOF
        fi
      fi
    fi
    echo "A slower link, more ranks or less compute per GPU would show the expected"
    echo "trade-off."
    echo
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
  [ -z "$bf" ] || settings_note "$bf"
  # PyTorch in the precisions both were measured in
  pps=""
  if [ -n "$kps" ] && [ $pt_ok -eq 1 ]; then
    for p in $kps; do [ -z "$(pt "$p" 2)" ] || [ -z "$(pt "$p" 1)" ] || pps="$pps${pps:+ }$p"; done
  fi
  if [ -n "$kps" ] && [ $pt_ok -eq 0 ]; then
    pt_absent
  elif [ -n "$pps" ]; then
    # the sentence's lists, "A and B" with a precision each
    t2="" vs="" t1="" o1="" sp="" allpt=1 one_gpu="" gaps=""
    for p in $pps; do
      a2=$(pt "$p" 2) a1=$(pt "$p" 1)
      num "a PyTorch anchor" "$a2"; num "a PyTorch anchor" "$a1"
      o=$(one "$csv" "$p" step_ms_mean "$(bb "$p")")
      t2="$t2${t2:+ and }$a2 ms ($p)"
      vs="$vs${vs:+ and }$(as_fast "$(bk "$p")" "$a2") in $p"
      sp="$sp${sp:+ and }$(as_fast "$a1" "$o") in $p"
      t1="$t1${t1:+ and }$a1" o1="$o1${o1:+ and }$(f1 "$o")"
      is_true "$a1 < $o" || allpt=""
      one_gpu="$one_gpu${one_gpu:+, and }$(faster_one "$p" "$o" "$a1")"
      gaps="$gaps $p:2:$(bb "$p") $p:1:$(bb "$p")"
    done
    # one GPU: "all scaling" where PyTorch is the faster in each precision
    if [ -n "$allpt" ]; then
      w1="It is all scaling: on one GPU PyTorch is $sp ($t1 ms against our $o1)"
    else
      w1="On one GPU, $one_gpu"
    fi
    # our rows' path: the handout's DDP runs op by op with materialised
    # attention, which PyTorch's compiled step outruns on one GPU
    path=$(tool value "$csv" --agg first --where status=ok --col fusion --default '')
    att=$(tool value "$csv" --agg first --where status=ok --col attention --default '')
    [ "$att" != materialized ] || att=materialised
    [ "$path" != opbyop ] ||
      w1="$w1, its compiled SDPA step against our op-by-op one with $att attention"
    # a form measured only one way may not be PyTorch's strongest there
    [ -z "$pt_only" ] ||
      todo "PyTorch's DDP in both CUDA-graph forms where one is missing: \`NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node=2 reports/anchors/torch_ddp.py reports/anchors/torch_ddp.csv --configs compiled,compiled_cudagraphs --precisions $(printf '%s' "$pt_only" | grep -o 'fp32\|bf16' | sort -u | paste -sd, -) --buckets $(printf '%s' "$pt_bm" | tr -d ' ') --resume\`"
    # ours are means, PyTorch's (pt_stat) medians where it says so (the
    # scripted anchor, the only one to set pt_only)
    gap=""
    # shellcheck disable=SC2086 # one PREC:WS:BUCKET a word
    [ -z "$pt_stat" ] ||
      gap=" (our means, within $(mm_gap "$csv" $gaps) ms of our medians${pt_only:+; not all like for like: appendix B})"
    cat <<EOF
$pt_name, the strongest PyTorch
(appendix B), takes ${pt_stat:+$pt_stat }$t2 on 2 GPUs: the best bucketed step
is $vs$gap.
$w1.

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
  # the model's gradient size comes from a 2-GPU row of this section
  if [ -z "$s_mib" ]; then
    echo "_Needs this section's 2-GPU rows (the gradients' size): run \`./runner experiments/${csv##*/}\` on 2 GPUs._" | sed 's/\.csv`/.cfg`/'
    echo
    return 0
  fi
  num "the gradient size" "$s_mib"
  bstar=$(calc %.0f "sqrt($s_mib * $ar_o * $ar_w)")
  nstar=$(calc %.1f "sqrt($s_mib / ($ar_o * $ar_w))")
  ostar=$(calc %.2f "2 * sqrt($s_mib * $ar_o / $ar_w)")
  # the fit's machine where it is not this section's GPU; a warning where
  # o exceeds the smallest all-reduce (then the fit overstates it)
  ar_on=""
  same_kind "$ar" || ar_on=", $ar_machine"
  ar_warn=""
  is_true "$ar_o <= $ar_t1" ||
    ar_warn="; o is above the $(calc %g "$ar_x1") MiB all-reduce's $(calc %.3f "$ar_t1") ms, so the fit overstates it"
  cat <<EOF
    overhead(n_b) = n_b o + s / (n_b w),     b* = sqrt(s o w)

**Answer.** With s bytes of gradients in n_b equal buckets, each
all-reduce takes o + s / (n_b w) while, by the handout's premise, backward
produces the next bucket in s / (n_b w): communication falls o behind
per bucket, leaving n_b o plus the last bucket's transfer after backward. The derivative o - s / (n_b^2 w) is zero at
n_b* = sqrt(s / (o w)), so b* = s / n_b* = sqrt(s o w), overhead
2 sqrt(s o / w).

Fitting time = o + x / w by least squares on relative error to
allreduce.csv's $npts NCCL 2-rank medians ($ar_x1 to $ar_xn MiB per rank$ar_on) gives
o = $(calc %.4f "$ar_o") ms per call and w = $(f1 "$ar_w") MiB/ms ($(calc %.0f "$ar_w * 1.048576") GB/s), within $(f0 "$ar_err")% at every size$ar_warn.
With s = $(f1 "$s_mib") MiB of fp32 gradients: n_b* = $nstar, **b* = $bstar MiB**, overhead $ostar ms.

EOF
  # Per 2-GPU row: the figure's files (bucket, n_b, 2-GPU - 1-GPU step,
  # left after backward, model), and fit_rows, lines "PREC BUCKET BUSY BWD
  # LEFT MODEL TRANSFER N_B EXTRA" (TRANSFER: the model's s / (n_b w);
  # EXTRA: 2-GPU - 1-GPU step) for the table and the prose under it.
  tmpb="$OUT/ddp_buckets"
  fit_rows=""
  for p in fp32 bf16; do
    t="$tmpb.$p.tmp.csv"
    echo "bucket_mb,n_b,overhead_ms,exposed_ms,model_ms" > "$t"
    for bm in $(tool distinct "$csv" --cols bucket_mb --where status=ok --where precision=$p --sort bucket_mb); do
      s1=$(one "$csv" $p step_ms_mean "$bm")
      s2=$(two "$csv" $p step_ms_mean "$bm")
      nb=$(two "$csv" $p grad_collectives "$bm")
      ex=$(two "$csv" $p exposed_comm_ms_mean "$bm")
      [ -n "$s1" ] && [ -n "$s2" ] && [ -n "$nb" ] && [ -n "$ex" ] && [ "$nb" -gt 0 ] || continue
      md=$(calc %.6f "$nb * $ar_o + $s_mib / ($nb * $ar_w)")
      xt=$(calc %.4f "$s2 - $s1")
      echo "$bm,$nb,$xt,$ex,$md" >> "$t"
      gc=$(two "$csv" $p grad_comm_ms_mean "$bm") bw=$(two "$csv" $p bwd_ms_mean "$bm")
      [ -n "$gc" ] && [ -n "$bw" ] || continue
      fit_rows="$fit_rows$p $bm $gc $bw $ex $md $(calc %.6f "$s_mib / ($nb * $ar_w)") $nb $xt
"
    done
  done
  echo "| precision | bucket (MiB) | buckets n_b (no tensor split) | model (ms) | after backward (ms) | after backward / model | collectives busy (ms) | backward (ms) | 2-GPU - 1-GPU step (ms) |"
  echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
  printf '%s' "$fit_rows" | awk 'NF == 9 { printf "| %s | %g | %d | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f |\n", $1, $2, $8, $6, $5, $5 / $6, $3, $4, $9 }'
  echo
  if [ -n "$GNUPLOT" ]; then
    # a precision without rows as "-" (the script leaves its series out)
    set --
    for p in fp32 bf16; do
      if [ "$(wc -l < "$tmpb.$p.tmp.csv")" -gt 1 ]; then set -- "$@" "$tmpb.$p.tmp.csv"; else set -- "$@" -; fi
    done
    "$GNUPLOT" -c "$REPORTS/ddp_buckets.gp" "$1" "$2" "$OUT/ddp_buckets.svg" "$s_mib" "$ar_o" "$ar_w"
    echo "![Overhead against bucket size: model and runs](ddp_buckets.svg)"
    echo
    # The log axis has no place for zero or less: the figure leaves such
    # points out, and says which here.
    unplotted=$(for p in fp32 bf16; do
        awk -F, -v p=$p 'NR > 1 {
            if ($4 <= 0) printf "%s at %g MiB, communication left after backward %.2f ms\n", p, $1, $4
            if ($3 <= 0) printf "%s at %g MiB, 2-GPU step minus 1-GPU step %.1f ms\n", p, $1, $3 }' "$tmpb.$p.tmp.csv"
      done | awk 'NF { printf "%s%s", (n++ ? "; " : ""), $0 }')
    if [ -n "$unplotted" ]; then
      echo "_Left out of the figure, whose log axis cannot show zero or less: ${unplotted}._"
      echo
    fi
  else
    echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
    echo
  fi
  rm -f "$tmpb.fp32.tmp.csv" "$tmpb.bf16.tmp.csv"
  # The model against each 2-GPU row: its premise (communication as long
  # as backward) holds where the collectives are busy at least as long as
  # backward; elsewhere backward hides the calls. The ms are in the table.
  if [ -n "$fit_rows" ]; then
    printf '%s' "$fit_rows" | awk "$AWK_JOIN"'
      # "bf16 at 1 and 10 MiB", "fp32 and bf16 at 1000 MiB": rows (P[i] B[i])
      # grouped by precision, or by bucket where each precision has the same
      function rows(P, B, n,   i, j, k, np, pr, bl, seen, L, g, same) {
        np = 0
        for (i = 1; i <= n; i++) { if (!(P[i] in seen)) { seen[P[i]] = ++np; pr[np] = P[i]; k[np] = 0 }
                                   j = seen[P[i]]; bl[j, ++k[j]] = B[i] }
        for (i = 1; i <= np; i++) { delete L; for (j = 1; j <= k[i]; j++) L[j] = bl[i, j]; g[i] = join(L, k[i]) }
        same = 1; for (i = 2; i <= np; i++) if (g[i] != g[1]) same = 0
        if (same && np > 1) { for (i = 1; i <= np; i++) L[i] = pr[i]; return join(L, np) " at " g[1] " MiB" }
        for (i = 1; i <= np; i++) L[i] = pr[i] " at " g[i] " MiB"
        return join(L, np)
      }
      NF == 9 { r = $5 / $6
        if ($3 >= $4) { na++; ap[na] = $1; aq[na] = sprintf("%g", $2); ar[na] = sprintf("%.2f", r) }
        else { nh++; if (nh == 1 || r < lo) lo = r; if (nh == 1 || r > hi) hi = r
               if (r >= 0.85 && r <= 1.15) { nc++; cp[nc] = $1; cq[nc] = sprintf("%g", $2); if ($7 < $6 - $7) mixed = 1 } } }
      END {
        if (na) printf "The premise, collectives busy as long as backward, holds for %s, where the runs leave %s of the model'"'"'s backlog", rows(ap, aq, na), join(ar, na)
        if (na && nh) printf ";\nin the other rows"
        else if (nh) printf "In every row"
        if (nh) {
          printf " backward hides the calls"
          if (nc && !mixed) printf ", and of these the model is within 15%% only for %s, where it is mostly one bucket'"'"'s transfer", rows(cp, cq, nc)
          else if (nc) printf ", and of these the model is within 15%% only for %s", rows(cp, cq, nc)
          else printf ", and the runs leave %.2f to %.2f times the model", lo, hi
        }
        if (na || nh) printf ".\n" }'
    echo "Nor does the model count the real cost, backward slowed beside the"
    echo "all-reduces (last column)."
  fi
  echo
}

# ---- ddp_appendix ------------------------------------------------------------
# cost_words RATIO: a 2-GPU / 1-GPU step ratio in words, for the
# appendix's opening ("no more than", "about as much as", "more than").
cost_words() {
  if is_true "$1 <= 1"; then printf 'no more than'
  elif is_true "$1 < 1.02"; then printf 'about as much as'
  else printf 'more than'; fi
}
# ap_row NAME FILE [best]: the first table's row of FILE's strategy (best:
# each precision at its fastest 2-GPU bucket), none where it has no 1- and
# 2-GPU step in either precision.
ap_row() {
  ap_r="" ap_ok=0
  for ap_p in fp32 bf16; do
    ap_b=""
    [ -z "${3:-}" ] || ap_b=$(best_bucket $ap_p "$2")
    ap_2=$(two "$2" $ap_p step_ms_mean "$ap_b") ap_1=$(one "$2" $ap_p step_ms_mean "$ap_b")
    if [ -n "$ap_2" ] && [ -n "$ap_1" ]; then
      ap_ok=1
      ap_r="$ap_r | $(f1 "$ap_2")$( [ -z "$ap_b" ] || printf ' (%g MiB)' "$ap_b") | $(calc %.3f "$ap_2 / $ap_1")"
    else
      ap_r="$ap_r | - | -"
    fi
  done
  ap_print "$1" "$2" gpu_name
}
# ap_print NAME FILE COL: the row of cells ap_r where ap_ok is 1, its GPUs
# the models in FILE's column COL.
ap_print() {
  [ $ap_ok -eq 1 ] || return 0
  ap_g=$(gpu_model "$2" "$3")
  echo "| $1 | 2 x ${ap_g:-?}$ap_r |"
}
appendix() {
  # the appendix's experiments: each one unmeasured drops its paragraph or
  # table, so it is listed as still to measure
  for ap_e in ddp_copy_engine zero1_copy_engine ddp_copy_engine_fused zero1_copy_engine_fused \
              ddp_nccl_ctas ddp_sm_reserve ddp_contention zero1_batch_scaling; do
    has_rows "$DATA/$ap_e.csv" || todo "$ap_e.csv on 2 GPUs (\`./runner experiments/$ap_e.cfg\`)"
  done
  # The scaling the appendix explains, in words, by precision: the
  # copy-engine form op by op and fused (fp32 by its worse, bf16 by its
  # better); the ratios themselves stand in the first table.
  op32=$(ratio21 "$ce" fp32) op16=$(ratio21 "$ce" bf16)
  fu32=$(ratio21 "$cef" fp32) fu16=$(ratio21 "$cef" bf16)
  if [ -n "$op32" ] && [ -n "$op16" ]; then
    w32=$op32 w16=$op16
    [ -z "$fu32" ] || ! is_true "$fu32 > $w32" || w32=$fu32
    [ -z "$fu16" ] || ! is_true "$fu16 < $w16" || w16=$fu16
    cat <<EOF
With the gradients on the copy engines, a 2-GPU data-parallel step of the
xl model costs $(cost_words "$w32") a 1-GPU step in fp32 and $(cost_words "$w16") one in bf16
(the ratios in the first table); this appendix explains how.
Every number is read from the CSV named beside it.

EOF
  else
    cat <<EOF
This appendix explains where the second GPU's time goes while NCCL's
all-reduces overlap backward. Every number is read from the runner's CSV
named beside it.

EOF
  fi
  pt_st=""
  [ -z "$pt_stat" ] || pt_st="; ${pt_stat}s, where ours are means"
  cat <<EOF
#### The strategies against PyTorch

Each form at its fastest bucket size; ratio = 2-GPU step / 1-GPU step at
the same per-GPU batch (1.05 is the project's goal); steps compare only
between rows of the same GPUs, ratios across them. The PyTorch rows:
$pt_name ($pt_src; $pt_how$pt_st), and eager PyTorch DDP (reports/anchors/ddp_pytorch.csv, median steps) for reference.

| strategy | GPUs | fp32 2-GPU step (ms) | fp32 ratio | bf16 2-GPU step (ms) | bf16 ratio |
|---|---|--:|--:|--:|--:|
EOF
  ap_row "naive, per tensor after backward" "$naive"
  ap_row "flat buffer after backward" "$flat"
  ap_row "per tensor from the hook" "$overlap"
  ap_row "bucketed all-reduce (handout)" "$csv" best
  ap_row "bucketed, gradients all-gathered on the copy engines" "$ce" best
  ap_row "ZeRO-1, gradients and weights on the copy engines" "$z1ce" best
  ap_row "bucketed on the copy engines, fused + flash" "$cef" best
  ap_row "ZeRO-1 on the copy engines, fused + flash" "$z1cef" best
  ap_r="" ap_ok=0
  for p in fp32 bf16; do
    a=$(pt $p 2) b=$(pt $p 1)
    [ -z "$a" ] || [ -z "$b" ] || ap_ok=1
    ap_r="$ap_r | $(d "$a") | $(quot "$a" "$b")"
  done
  ap_print "$pt_name" "$pt_csv" "$pt_gcol"
  ap_r="" ap_ok=0
  for p in fp32 bf16; do
    a=$(pe $p)
    [ -z "$a" ] || ap_ok=1
    ap_r="$ap_r | $(d "$a") | -"
  done
  ap_print "PyTorch DDP, eager (older anchor)" "$pe_csv" machine
  echo
  # the claim: the copy-engine form's fastest path in bf16 (fused + flash
  # where measured and faster, as the summary takes it); in fp32 where the
  # fused path has no bf16 rows
  cl=$ce cl_path=""
  if [ -f "$cef" ]; then
    for p in bf16 fp32; do
      fu=$(two "$cef" $p step_ms_mean "$(best_bucket $p "$cef")")
      [ -n "$fu" ] || continue
      op=$(two "$ce" $p step_ms_mean "$(best_bucket $p "$ce")")
      if [ -z "$op" ] || is_true "$fu < $op"; then
        cl=$cef cl_path=", fused + flash"
      fi
      break
    done
  fi
  # the precisions with a fastest 2-GPU bucket, a 1-GPU row there and
  # PyTorch's steps on 1 and 2 GPUs: each clause lists them in that order
  cl_p="" cl_b="" cl_2="" cl_fast="" cl_pt="" cl_pts="" cl_ours="" cl_one=""
  cl_gap="" cl_pk="" cl_ptpk="" cl_over="" cl_under="" cl_first="" cl_nopt=""
  for p in fp32 bf16; do
    b=$(best_bucket $p "$cl")
    [ -n "$b" ] || continue
    s2=$(two "$cl" $p step_ms_mean "$b") s1=$(one "$cl" $p step_ms_mean "$b")
    [ -n "$s1" ] || continue
    if [ $pt_ok -eq 0 ]; then cl_nopt=1; continue; fi
    t2=$(pt $p 2) t1=$(pt $p 1)
    [ -n "$t2" ] && [ -n "$t1" ] || continue
    for x in "$s2" "$s1" "$t2" "$t1"; do num "an appendix figure" "$x"; done
    cl_p="$cl_p${cl_p:+ }$p"
    cl_b="$cl_b${cl_b:+ / }$(calc %g "$b")"
    cl_2="$cl_2$(f1 "$s2") ms ($p)
"
    cl_fast="$cl_fast$(as_fast "$s2" "$t2")
"
    cl_pt="$cl_pt$t2
"
    cl_pts="$cl_pts$(calc %.2f "$t2 / $t1") ($p)
"
    cl_ours="$cl_ours$(calc %.3f "$s2 / $s1")
"
    cl_one="$cl_one$(faster_one $p "$s1" "$t1")
"
    cl_gap="$cl_gap $p:2:$b $p:1:$b"
    # memory of the claim's own rows, against PyTorch's (x: not comparable)
    pk=$(two "$cl" $p engine_peak_mib "$b") pp=$(pt_peak $p)
    if [ -n "$pk" ] && [ -n "$pp" ]; then
      cl_pk="$cl_pk$(gib "$pk") GiB in $p
"
      cl_ptpk="$cl_ptpk$pp
"
      case $pp in
        *-*) cl_over=x ;;
        *) if is_true "$pk / 1024 > $pp"; then cl_over="${cl_over}1"; else cl_under="${cl_under}1"; fi ;;
      esac
    else
      cl_pk="-"
    fi
    # and against the same step on one GPU, in the first precision (like
    # for like: the difference is what the form keeps)
    [ -n "$cl_first" ] ||
      cl_first="$p $pk $(one "$cl" $p engine_peak_mib "$b") $(two "$cl" $p grads_mib "$b") $(one "$cl" $p grads_mib "$b")"
  done
  [ -z "$cl_nopt" ] || pt_absent
  if [ -n "$cl_p" ]; then
    mem=""
    # shellcheck disable=SC2086 # "PREC PEAK PEAK1 GRADS GRADS1"
    set -- $cl_first
    case $cl_pk in
      -*) ;;
      *) if [ $# -ge 3 ]; then
           mdiff=$(calc %.4f "$2 - $3")
           why=""
           [ $# -lt 5 ] || ! is_true "$mdiff > 0.99 * ($4 - $5) && $mdiff < 1.01 * ($4 - $5)" ||
             why=" (one more copy of the gradients)"
           vs="against"
           case $cl_over in
             *x*) ;;
             *) if [ -z "$cl_under" ]; then vs="more than"; elif [ -z "$cl_over" ]; then vs="less than"; fi ;;
           esac
           mem=" The price is memory: the copy-engine form keeps both ranks' fp32
gradients, a peak per GPU of $(printf '%s' "$cl_pk" | and_list) at those buckets,
$(gib "$mdiff") GiB$why above the same step on one GPU ($1), $vs PyTorch's $(printf '%s' "$cl_ptpk" | awk '!seen[$0]++' | and_list) GiB on 2 GPUs."
         fi ;;
    esac
    gap=""
    # shellcheck disable=SC2086 # cl_gap is a list of PREC:GPUS:BUCKET
    [ -z "$pt_stat" ] ||
      gap=" (${pt_stat}s; our means are within $(mm_gap "$cl" $cl_gap) ms of our medians)"
    cat <<EOF
Our DDP claim, against the strongest PyTorch: $(printf '%s' "$cl_2" | and_list)
per 2-GPU step with the gradients on the copy engines ($cl_b MiB buckets,
$(basename "$cl")$cl_path), $(printf '%s' "$cl_fast" | and_list) as its $(printf '%s' "$cl_pt" | and_list) ms$gap. Almost
all of it is scaling: PyTorch's second GPU multiplies its step by $(printf '%s' "$cl_pts" | and_list), ours by $(printf '%s' "$cl_ours" | and_list), while on one GPU, $(printf '%s' "$cl_one" | and_list).$mem

EOF
  fi
  # -- why backward slows ------------------------------------------------------
  bf=$(best_bucket fp32); bh=$(best_bucket bf16)
  # the precisions with a fastest 2-GPU bucket and a 1-GPU row there, and
  # their clauses: what is left after backward, and backward's growth
  wex="" wgr=""
  for p in fp32 bf16; do
    if [ "$p" = fp32 ]; then b=$bf; else b=$bh; fi
    [ -n "$b" ] && [ -n "$(one "$csv" "$p" bwd_ms_mean "$b")" ] || continue
    wex="$wex${wex:+, }$(calc %.2f "$(two "$csv" "$p" exposed_comm_ms_mean "$b")") ms $p"
    wgr="$wgr${wgr:+ and }$(f1 "$(one "$csv" "$p" bwd_ms_mean "$b")") to $(f1 "$(two "$csv" "$p" bwd_ms_mean "$b")") ms ($p)"
  done
  if [ -n "$wex" ]; then
    echo "#### Why backward slows beside the all-reduces"
    echo
    cat <<EOF
With the handout's bucketed all-reduce little communication is left after
backward ($wex); the second GPU's cost is backward
itself growing from $wgr
while NCCL's kernels run beside it.
EOF
    if has_rows "$ctas"; then
      c_n=$(tool value "$ctas" --where status=ok --where precision=fp32 --where nccl_max_ctas!=0 --agg min --default "" --col nccl_max_ctas)
      c_bm=$(tool value "$ctas" --where status=ok --where precision=fp32 --agg max --default "" --col bucket_mb)
      cq() { tool value "$ctas" --where status=ok --where precision=fp32 --where bucket_mb="$c_bm" --where nccl_max_ctas="$1" --sort -utc --agg first --default "" --col "$2"; }
      c1=$(cq "$c_n" grad_comm_ms_mean); gm=$(v "$ctas" fp32 2 grad_comm_mib --where bucket_mb="$c_bm")
      c0=$(cq 0 bwd_ms_mean); c0s=$(cq 0 step_ms_mean)
      # one GPU's backward at the caps' bucket size (2.3.5's run), else at
      # 2.3.5's fastest
      g1=$(one "$csv" fp32 bwd_ms_mean "$c_bm"); [ -n "$g1" ] || g1=$(one "$csv" fp32 bwd_ms_mean "$bf")
      # each cap's latest row: "CAP BACKWARD ALL-REDUCES STEP"
      c_rows=$(tool select "$ctas" --where status=ok --where precision=fp32 --where world_size=2 \
        --where bucket_mb="$c_bm" --where nccl_max_ctas!=0 --sort -utc --first-of nccl_max_ctas \
        --cols nccl_max_ctas,bwd_ms_mean,grad_comm_ms_mean,step_ms_mean | sed 1d | sort -t, -k1,1n)
      if [ -n "$c1" ] && [ -n "$gm" ] && [ -n "$c0" ] && [ -n "$c0s" ] && [ -n "$g1" ] && [ -n "$c_rows" ]; then
        echo "Capping NCCL's thread blocks per collective (ddp_nccl_ctas.csv, fp32,"
        echo "$(calc %g "$c_bm") MiB buckets$(kind_tag "$ctas"); a run of its own, in which backward takes $(f1 "$c0") ms beside"
        echo "uncapped collectives and the step $(f1 "$c0s") ms)"
        # caps that speed backward up (F) and those that slow it (S);
        # "most" where the best cap wins back half the gap to one GPU
        printf '%s\n' "$c_rows" | awk -F, -v c0="$c0" -v g1="$g1" -v rate="$(calc %.0f "$gm / 1024 / $c1 * 1000 / $c_n")" -v cn="$c_n" "$AWK_JOIN"'
          NF == 4 { if ($2 < c0) { nf++; fc[nf] = $1; fb[nf] = sprintf("%.1f", $2); fa[nf] = sprintf("%.1f", $3); fs[nf] = sprintf("%.1f", $4)
                                   if (nf == 1 || $2 < best) best = $2 }
                    else { ns++; sc[ns] = $1; sb[ns] = sprintf("%.1f", $2) } }
          END {
            if (nf) {
              printf "gives backward %s of its speed back %swith %s %s: %s ms, against %.1f ms on one GPU (2.3.5).\n",
                (c0 - best >= (c0 - g1) / 2 ? "most" : "some"), (ns ? "only " : ""), join(fc, nf), (nf == 1 && fc[1] == 1 ? "block" : "blocks"), join(fb, nf), g1
              printf "But a block moves about %d GiB/s (measured with each collective capped at %d block%s), so the all-reduces then take %s ms\nand the step %s ms.", rate, cn, (cn == 1 ? "" : "s"), join(fa, nf), join(fs, nf)
              if (ns) printf " With %s blocks backward is slower than uncapped: %s ms.", join(sc, ns), join(sb, ns)
            } else
              printf "does not give backward its speed back: with %s blocks it takes %s ms, against %.1f ms on one GPU (2.3.5).", join(sc, ns), join(sb, ns), g1
            printf "\n" }'
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
          echo "with none reserved ($(as_fast "$sr_ms" "$sr_base"))."
        fi
      fi
    fi
    [ -z "$bf" ] || settings_detail "$bf"
    if has_rows "$con"; then
      # cn_mm CAP GPUS: the matrix products' ms in a contention row's
      # message (rank 0's extra step with every kernel bracketed by
      # events: "..., ms per step by kernel family: matmul 89.980; ...").
      cn_mm() {
        cn_m=$(tool value "$con" --sort -utc --agg first --default "" --where status=ok --where precision=fp32 \
          --where nccl_max_ctas="$1" --where world_size="$2" --col message) || exit 1
        fam "${cn_m##*kernel family: }" matmul
      }
      clo=$(tool value "$con" --where status=ok --agg min --default "" --col nccl_max_ctas)
      chi=$(tool value "$con" --where status=ok --agg max --default "" --col nccl_max_ctas)
      m1lo=$(cn_mm "$clo" 1); m2lo=$(cn_mm "$clo" 2); m1hi=$(cn_mm "$chi" 1); m2hi=$(cn_mm "$chi" 2)
      if [ -n "$m1lo" ] && [ -n "$m2lo" ] && [ -n "$m1hi" ] && [ -n "$m2hi" ] && [ "$clo" != "$chi" ]; then
        echo "Timing every kernel of one step (ddp_contention.csv$(kind_tag "$con")) shows where: beside the"
        echo "all-reduces the fp32 matrix products run $(as_fast "$m2lo" "$m1lo") as on one GPU with $clo blocks per"
        echo "collective and $(as_fast "$m2hi" "$m1hi") with $chi, so not in proportion to the SMs taken; the"
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
  # at ddp_copy_engine's own fastest buckets (the claim's may be the fused
  # file's)
  ef=$(best_bucket fp32 "$ce"); eh=$(best_bucket bf16 "$ce")
  if [ -n "$ef" ] && [ -n "$eh" ]; then
    echo "#### Gradients on the copy engines (ddp_copy_engine)"
    echo
    ce_o1=$(one "$ce" fp32 opt_ms_mean "$ef")
    num "the 1-GPU AdamW time" "$ce_o1"
    cat <<EOF
Each bucket's raw fp32 gradients are all-gathered in place, on a NCCL
communicator with the zero-CTA policy over a symmetric memory window,
which NCCL $(tool distinct "$ce" --cols nccl_version --where status=ok | head -n 1) moves with the copy engines rather than with kernels;
for two ranks that is the same bytes on NVLink as a ring all-reduce.
AdamW averages the two copies as it reads them, and each bucket's AdamW
is queued, on a low-priority stream, right after that bucket's
all-gather, so the $(f1 "$ce_o1") ms optimizer runs during backward on the
$(two "$ce" fp32 gemm_sm_reserve "$ef") SMs the products leave free. Backward still grows on two GPUs, but it
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
    if [ -n "$ce_lo" ] && [ -n "$ce_hi" ] && [ "$ce_lo" != "$eh" ] && [ "$ce_hi" != "$eh" ]; then
      echo "In bf16 the bucket size matters, as the model of 2.3.5 (b) says it"
      echo "should once backward is short: $(calc %g "$ce_lo") MiB buckets leave $(f1 "$(two "$ce" bf16 exposed_comm_ms_mean "$ce_lo")") ms of transfers after"
      echo "backward, $(calc %g "$eh") MiB $(f1 "$(two "$ce" bf16 exposed_comm_ms_mean "$eh")") ms, and $(calc %g "$ce_hi") MiB leaves the last bucket's AdamW"
      echo "($(f1 "$(two "$ce" bf16 opt_ms_mean "$ce_hi")") ms) after it."
      echo
    fi
  fi

  # -- the copy-engine forms on the fused path --------------------------------------
  # FORM: the op-by-op experiment; FORM_fused: the same form fused + flash,
  # measured (fused_forms) or not (fused_todo)
  fused_forms=""
  for fm in ddp_copy_engine zero1_copy_engine; do
    if has_rows "$DATA/${fm}_fused.csv"; then fused_forms="$fused_forms $fm"; fi
  done
  if [ -n "$fused_forms" ]; then
    echo "#### The copy-engine forms on the fused path ($(for fm in $fused_forms; do printf '%s_fused ' "$fm"; done | sed 's/ $//; s/ /, /g'))"
    echo
    cat <<EOF
The rows above run op by op with materialised attention, like for like.
PyTorch's compiled step fuses, so here the copy-engine forms run our
training step's path (fused kernels, FlashAttention), each precision at
its fastest 2-GPU bucket:

| form | precision | bucket (MiB) | 1-GPU step (ms) | 2-GPU step (ms) | op by op, 2 GPUs (ms) | PyTorch compiled, 1 / 2 GPUs (${pt_stat:+$pt_stat }ms) | 2 GPUs against PyTorch |
|---|---|--:|--:|--:|--:|--:|---|
EOF
    # a row a form and precision, and, said under the table, where the
    # bf16 step's second GPU goes: backward with the transfers beside it,
    # and what is left of them after it
    said=""
    for fm in $fused_forms; do
      fu="$DATA/${fm}_fused.csv" op="$DATA/$fm.csv"
      case $fm in
        ddp_copy_engine) fname="DDP (all-gather)" fwho="DDP's" ;;
        *) fname="ZeRO-1 (all-to-all)" fwho="ZeRO-1's" ;;
      esac
      for p in fp32 bf16; do
        b=$(best_bucket $p "$fu")
        [ -n "$b" ] || continue
        s2=$(two "$fu" $p step_ms_mean "$b"); s1=$(one "$fu" $p step_ms_mean "$b")
        ob=$(best_bucket $p "$op")
        o2=""; [ -z "$ob" ] || o2=$(two "$op" $p step_ms_mean "$ob")
        # PyTorch's steps where measured on our GPU model, a verdict where
        # this form's rows are from that model too
        t1="" t2="" vs=-
        [ $pt_ok -eq 0 ] || { t1=$(pt $p 1); t2=$(pt $p 2); }
        if [ -n "$t2" ] && same_kind "$fu"; then num "PyTorch's 2-GPU step" "$t2"; vs=$(verdict "$s2" "$t2"); fi
        echo "| $fname$(kind_tag "$fu") | $p | $(calc %g "$b") | $(f1 "$s1") | $(f1 "$s2") | $(f1 "$o2") | $(f1 "$t1") / $(f1 "$t2") | $vs |"
        [ $p = bf16 ] || continue
        b1=$(one "$fu" bf16 bwd_ms_mean "$b") b2=$(two "$fu" bf16 bwd_ms_mean "$b")
        ex=$(two "$fu" bf16 exposed_comm_ms_mean "$b")
        [ -n "$b1" ] && [ -n "$b2" ] && [ -n "$ex" ] || continue
        said="$said${said:+; }$fwho backward takes $(f1 "$b1") ms on one GPU and $(f1 "$b2") ms on two, with $(f1 "$ex") ms of transfers left after it at $(calc %g "$b") MiB"
        [ -z "$ob" ] || said="$said (op by op $(f1 "$(one "$op" bf16 bwd_ms_mean "$ob")") -> $(f1 "$(two "$op" bf16 bwd_ms_mean "$ob")") ms, $(f1 "$(two "$op" bf16 exposed_comm_ms_mean "$ob")") ms left)"
      done
    done
    echo
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
holds half its state ($(f0 "$(two "$z1ce" fp32 optstate_mib "$zf")") MiB against $(f0 "$(one "$z1ce" fp32 optstate_mib "$zf")")). Best: $(f1 "$z2") ms fp32 at $(calc %g "$zf") MiB,
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
  [ -n "$cl_p" ] || return 0
  cat <<'EOF'
#### Choices the copy-engine rows are measured with

Settled by diagnostic runs of patched builds outside the runner (git
history keeps the patches and outputs):

- The host issues a bucket's transfer once it sees the bucket's ready
  event complete, and its AdamW once it sees the transfer's end, one bucket
  at a time in the same order on every rank; making the streams wait on
  those events during backward slowed backward even with no byte moved.
- The compute stream runs one priority level above the optimizer's.
- AdamW during backward runs as persistent blocks on the SMs that
  backward's matrix products are shaped to leave free: fewer SMs left part
  of it after backward, more slowed backward.
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
