#!/bin/sh
# Writeup section 3.2 (naive_ddp_benchmarking, minimal_ddp_flat_benchmarking,
# ddp_overlap_individual_parameters_benchmarking, ddp_bucketed_benchmarking):
# one table per gradient strategy (fp32 and bf16, the 1-GPU row beside the
# 2-GPU row), a comparison of all strategies with PyTorch DDP, the issue's
# goals, the overlap timeline (OUT/ddp_timeline.svg) and the handout's
# overhead model fitted to the all-reduce rows (OUT/ddp_buckets.svg); then
# one appendix of the experiments that look for the second GPU's cost
# (ddp_nccl_ctas, ddp_sm_reserve, ddp_contention, ddp_copy_engine,
# zero1_copy_engine, zero1_batch_scaling), each subsection skipped while
# its CSV is missing. Every number comes from a runner's row or an anchor,
# but for one published specification, named where it is used.
#
# Environment (mkreport.sh sets it): DATA (folder of the CSVs), CSV (the
# bucketed experiment's CSV; the other three are read from DATA, and the
# all-reduce fit from DATA/allreduce.csv), OUT, CSVTOOL, GNUPLOT (empty: no
# figures). The per-rank timelines come from the runs' samples
# (NAME.samples.jsonl): r0_bwd_ms / r1_bwd_ms = backward's start, then the
# moment each gradient was final; r0_grad_comm_ms / r1_... = start, end of
# each gradient collective (jobs/ddp.c, timeline()).
#
# Scaling efficiency = 1-GPU step / 2-GPU step at the same per-GPU batch
# (weak scaling: 1.00 means the second GPU's batch came for free).
# Overhead model (handout ddp_bucketed_benchmarking (b)), s bytes of
# gradients in n_b buckets, all-reduce time o + x / w for x bytes:
#   overhead = n_b o + s / (n_b w),  n_b* = sqrt(s / (o w)),
#   b* = s / n_b* = sqrt(s o w),     overhead(b*) = 2 sqrt(s o / w).
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
reports=$(dirname "$here")
csv="${CSV:-$DATA/ddp_bucketed_benchmarking.csv}"
naive="$DATA/naive_ddp_benchmarking.csv"
flat="$DATA/minimal_ddp_flat_benchmarking.csv"
overlap="$DATA/ddp_overlap_individual_parameters_benchmarking.csv"
ar="$DATA/allreduce.csv"
GNUPLOT=${GNUPLOT:-}
# PyTorch DDP on the same machine (reports/anchors/ddp_pytorch.csv, copied
# from shared/anchors/README.md).
pt_csv="$(dirname "$(cd "$(dirname "$0")" && pwd)")/anchors/ddp_pytorch.csv"
# pt_col COL: a column of its first row (the source, machine and bucket
# size are the same in every row).
pt_col() { "$CSVTOOL" value "$pt_csv" --agg first --default "?" --col "$1"; }
pt_bm=$(pt_col bucket_mb)
pt_what="$(pt_col source) (bucket $pt_bm MB), median step on $(pt_col machine) (reports/anchors/ddp_pytorch.csv, from shared/anchors/README.md)"
pytorch_step() {
  "$CSVTOOL" value "$pt_csv" --agg first --default "" --where precision="$1" \
    --col step_ms_median
}

. "$REPORT_LIB"
# POSIX sh has no local variables: every name below is global, so a helper
# only assigns names of its own prefix (v_, sr_, har_, bb_, ...), never one
# that a caller or the main script uses (f, p, w, c, ar_o, ar_w, ...).
# v FILE PREC WS COL [where...]: the latest ok row's value.
v() {
  v_f=$1 v_p=$2 v_w=$3 v_c=$4; shift 4
  [ -f "$v_f" ] || return 0
  tool value "$v_f" --sort -utc --agg first --default "" --where status=ok \
    --where precision="$v_p" --where world_size="$v_w" "$@" --col "$v_c"
}
vf() { # as v, formatted %.1f
  v "$@" --fmt %.1f
}

echo "## 3.2 Data-parallel training: naive, flat, overlapped and bucketed DDP"
echo
have=0
for f in "$naive" "$flat" "$overlap" "$csv"; do
  [ -f "$f" ] && [ "$(tool count "$f" --where status=ok)" -gt 0 ] && have=1
done
if [ $have -eq 0 ]; then
  echo "_Not yet measured: run \`./runner experiments/naive_ddp_benchmarking.cfg\`,"
  echo "\`minimal_ddp_flat_benchmarking.cfg\`, \`ddp_overlap_individual_parameters_benchmarking.cfg\`"
  echo "and \`ddp_bucketed_benchmarking.cfg\` on 2 GPUs, then \`make report\`._"
  echo
  exit 0
fi
for f in "$reports/ddp_timeline.gp" "$reports/ddp_buckets.gp"; do
  [ -f "$f" ] || { echo "ddp.sh: $f is missing" >&2; exit 1; }
done

# ---- setup ------------------------------------------------------------------
first=$csv
[ -f "$first" ] || first=$naive
cfg=$(tool distinct "$first" --cols size,context,rank_batch,warmup,steps,vocab --where status=ok --sep ' ' | head -n 1)
# shellcheck disable=SC2086 # split the fields
set -- $cfg
m_size=$1 m_ctx=$2 m_b=$3 m_warm=$4 m_steps=$5 m_vocab=$6
machines=$(tool distinct "$first" --cols machine,gpu_name,nccl_version,git_commit --where status=ok --sep '|' |
  awk -F'|' 'NF { printf "%s%s (%s, NCCL %s, trainlab commit %.10s)", (n++ ? "; " : ""), $1, $2, $3, $4 }')
cat <<EOF
Job kind \`ddp\` (jobs/ddp.c, parallel/ddp.c) trains model.md's $m_size model
(vocabulary $m_vocab, context $m_ctx) on one GPU per rank with the CUDA
engine and NCCL: each rank runs forward and backward on its $m_b sequences
of the step's global batch, the gradients are averaged by the strategy
under test, then every rank runs AdamW. Gradients are communicated in fp32
in every precision (the mixed-precision policy keeps master gradients
fp32), so bf16 changes the compute, not the $(v "$first" fp32 2 grad_comm_mib --fmt %.0f) MiB sent per step.
The world_size 1 row is one GPU at the same per-GPU batch (nothing is
communicated): its step is what a second GPU should add for free, and
scaling efficiency = 1-GPU step / 2-GPU step. A job runs $m_warm untimed and
$m_steps timed steps. Columns (means over the timed steps of the maximum over
ranks, in ms): **step** from the step's start to its last synchronisation;
**backward** from backward's start to the moment finish_gradient_synchronization
is called; **grad comm** the summed durations of the gradient collectives
(CUDA events on the communication stream); **after bwd** the communication
left exposed after backward (last collective's end minus backward's end);
**optimizer** AdamW and any parameter collectives; **share** grad comm /
step. Measured on: $machines.

EOF

# ---- the all-reduce fit: time = o + x / w for x MiB per rank ------------------
# Least squares through the NCCL 2-rank medians; o in ms, w in MiB/ms. Used
# by the flat comparison and the overhead model.
ar_o="" ar_w="" npts=0 sizes=""
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
# The measured 2-rank NCCL all-reduce bus bandwidth at 1 GiB (GB/s; for two
# ranks the bytes each rank sends per second), or empty.
ar_bus=""
[ ! -f "$ar" ] || ar_bus=$(tool value "$ar" --sort -utc --agg first --default "" --where status=ok \
  --where backend=nccl --where world_size=2 --where size_mib=1024 --col busbw_gbps)
[ -z "$ar_bus" ] || num "the 2-rank all-reduce bus bandwidth" "$ar_bus"

# cmp_word A B: how duration A compares with duration B, in words.
cmp_word() {
  if [ -z "$1" ] || [ -z "$2" ]; then printf 'to be set beside'
  elif is_true "$1 < 0.8 * $2"; then printf 'shorter than'
  elif is_true "$1 < $2"; then printf 'nearly as long as'
  elif is_true "$1 <= 1.1 * $2"; then printf 'about as long as'
  else printf 'longer than'
  fi
}
# Bytes of a gradient copy (MiB from the CSVs) in GB (10^9) and GiB.
gb() { calc %.1f "$1 * 1048576 / 1e9"; }
gib() { calc %.2f "$1 / 1024"; }

# ---- one table per strategy ---------------------------------------------------
eff() { [ -n "$1" ] && [ -n "$2" ] && calc "%.2f" "$1 / $2" || printf -- '-'; }
strategy_table() { # FILE LABEL [bucketed]
  st_f=$1 st_label=$2 st_bucketed=${3:-}
  echo "### $st_label"
  echo
  if [ ! -f "$st_f" ] || [ "$(tool count "$st_f" --where status=ok)" -eq 0 ]; then
    echo "_Not yet measured._"
    echo
    return 0
  fi
  if [ -n "$st_bucketed" ]; then
    echo "| precision | bucket (MiB) | GPUs | step | backward | grad comm | after bwd | optimizer | collectives | share | scaling efficiency |"
    echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  else
    echo "| precision | GPUs | step | backward | grad comm | after bwd | optimizer | collectives | share | scaling efficiency |"
    echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  fi
  for st_p in fp32 bf16; do
    st_buckets=0
    [ -n "$st_bucketed" ] && st_buckets=$(tool distinct "$st_f" --cols bucket_mb --where status=ok --where precision=$st_p --sort bucket_mb)
    for st_bm in $st_buckets; do
      st_s1=$(v "$st_f" $st_p 1 step_ms_mean --where bucket_mb="$st_bm")
      for st_w in 1 2; do
        st_st=$(v "$st_f" $st_p $st_w step_ms_mean --where bucket_mb="$st_bm")
        [ -n "$st_st" ] || continue
        st_e="-"
        [ "$st_w" -eq 1 ] || st_e=$(eff "$st_s1" "$st_st")
        st_row="| $st_p |"
        [ -z "$st_bucketed" ] || st_row="$st_row $(calc %g "$st_bm") |"
        st_row="$st_row $st_w | $(calc %.1f "$st_st") | $(d "$(vf "$st_f" $st_p $st_w bwd_ms_mean --where bucket_mb="$st_bm")")"
        st_row="$st_row | $(d "$(vf "$st_f" $st_p $st_w grad_comm_ms_mean --where bucket_mb="$st_bm")")"
        st_row="$st_row | $(d "$(vf "$st_f" $st_p $st_w exposed_comm_ms_mean --where bucket_mb="$st_bm")")"
        st_row="$st_row | $(d "$(vf "$st_f" $st_p $st_w opt_ms_mean --where bucket_mb="$st_bm")")"
        st_row="$st_row | $(d "$(v "$st_f" $st_p $st_w grad_collectives --where bucket_mb="$st_bm")")"
        st_sh=$(v "$st_f" $st_p $st_w comm_share --where bucket_mb="$st_bm")
        st_row="$st_row | $( [ -n "$st_sh" ] && calc '%.0f%%' "100 * $st_sh" || printf -- '-') | $st_e |"
        echo "$st_row"
      done
    done
  done
  echo
  failed_jobs "$st_f" precision,world_size,bucket_mb,status,message \
    "precision,GPUs,bucket (MiB),status,message"
}

# Sentences per strategy, from the rows: 2- and 1-GPU values; has_all_rows
# FILE: both precisions at both world sizes (the sentences quote them all).
two() { v "$1" "$2" 2 "$3" ${4:+--where bucket_mb="$4"}; }
one() { v "$1" "$2" 1 "$3" ${4:+--where bucket_mb="$4"}; }
has_all_rows() {
  for har_p in fp32 bf16; do
    for har_w in 1 2; do
      [ -n "$(v "$1" $har_p $har_w step_ms_mean)" ] || return 1
    done
  done
}

strategy_table "$naive" "naive_ddp_benchmarking: one all-reduce per parameter tensor after backward"
if has_all_rows "$naive"; then
  n=$(two "$naive" fp32 grad_collectives)
  cat <<EOF
Each of the $n parameter tensors is all-reduced on its own once backward is
done, so none of the communication hides behind compute: the 2-GPU step
spends $(calc %.1f "$(two "$naive" fp32 grad_comm_ms_mean)") ms (fp32) and $(calc %.1f "$(two "$naive" bf16 grad_comm_ms_mean)") ms (bf16) in
gradient all-reduces, $(calc %.0f "100 * $(two "$naive" fp32 comm_share)")% and $(calc %.0f "100 * $(two "$naive" bf16 comm_share)")% of the step, and
the last of them ends $(calc %.1f "$(two "$naive" fp32 exposed_comm_ms_mean)") / $(calc %.1f "$(two "$naive" bf16 exposed_comm_ms_mean)") ms after backward (the calls plus the gaps
between them).

EOF
fi

strategy_table "$flat" "minimal_ddp_flat_benchmarking: one all-reduce of the flat gradient buffer"
if has_all_rows "$flat" && has_all_rows "$naive"; then
  fixed=""
  if [ -n "$ar_o" ]; then
    nn=$(two "$naive" fp32 grad_collectives)
    fixed=": $nn calls at o = $(calc %.3f "$ar_o") ms (the all-reduce fit below) come to
$(calc %.1f "$nn * $ar_o") ms, against the $(calc %.1f "$(two "$naive" fp32 grad_comm_ms_mean) - $(two "$flat" fp32 grad_comm_ms_mean)") ms saved"
  fi
  cat <<EOF
One call for all $(calc %.0f "$(two "$flat" fp32 grad_comm_mib)") MiB instead of $(two "$naive" fp32 grad_collectives) calls: gradient
communication drops from $(calc %.1f "$(two "$naive" fp32 grad_comm_ms_mean)") to $(calc %.1f "$(two "$flat" fp32 grad_comm_ms_mean)") ms (fp32) and the step from
$(calc %.1f "$(two "$naive" fp32 step_ms_mean)") to $(calc %.1f "$(two "$flat" fp32 step_ms_mean)") ms (bf16: $(calc %.1f "$(two "$naive" bf16 step_ms_mean)") to $(calc %.1f "$(two "$flat" bf16 step_ms_mean)") ms). Batching removes the fixed cost
of each call$fixed. The buffer still goes out only after backward, so
the whole all-reduce is still exposed.

EOF
fi

strategy_table "$overlap" "ddp_overlap_individual_parameters_benchmarking: per-tensor all-reduce started from the backward hook"
if has_all_rows "$overlap"; then
  cat <<EOF
Starting each tensor's all-reduce from its hook hides the communication
behind the rest of backward: communication left after backward falls to
$(calc %.2f "$(two "$overlap" fp32 exposed_comm_ms_mean)") ms (fp32) and $(calc %.2f "$(two "$overlap" bf16 exposed_comm_ms_mean)") ms (bf16), and the step to $(calc %.1f "$(two "$overlap" fp32 step_ms_mean)") / $(calc %.1f "$(two "$overlap" bf16 step_ms_mean)") ms.
It does not come for free: backward itself grows from $(calc %.1f "$(one "$overlap" fp32 bwd_ms_mean)") ms on one
GPU to $(calc %.1f "$(two "$overlap" fp32 bwd_ms_mean)") ms (fp32; bf16 $(calc %.1f "$(one "$overlap" bf16 bwd_ms_mean)") to $(calc %.1f "$(two "$overlap" bf16 bwd_ms_mean)") ms), because the NCCL
kernels run on the same GPU as backward's and take SMs and memory
bandwidth from them.

EOF
fi

strategy_table "$csv" "ddp_bucketed_benchmarking: buckets in reverse order, each all-reduced when its last gradient is final" bucketed

# ---- comparison ---------------------------------------------------------------
# best_bucket PREC [FILE]: the bucket size with the fastest 2-GPU step
# (default FILE: $csv).
best_bucket() {
  bb_f=${2:-$csv}
  [ -f "$bb_f" ] || return 0
  tool value "$bb_f" --where status=ok --where precision="$1" --where world_size=2 \
    --sort step_ms_mean --agg first --default "" --col bucket_mb
}
# Bucketed with the gradients all-gathered on the copy engines.
ce="$DATA/ddp_copy_engine.csv"
# ZeRO-1 with gradients and weights on the copy engines.
z1ce="$DATA/zero1_copy_engine.csv"
echo "### All strategies, 2 GPUs, next to PyTorch DDP"
echo
echo "Bucketed at its fastest bucket size per precision; PyTorch: $pt_what."
echo
echo "| strategy | precision | 2-GPU step | 1-GPU step | scaling efficiency | backward (1 -> 2 GPUs) | grad comm | after bwd | vs PyTorch DDP |"
echo "|---|---|--:|--:|--:|--:|--:|--:|--:|"
for p in fp32 bf16; do
  bb=$(best_bucket $p)
  for s in naive flat overlap bucketed copyengine zero1ce pytorch; do
    case $s in
      naive) f=$naive; bm=""; name="naive" ;;
      flat) f=$flat; bm=""; name="flat" ;;
      overlap) f=$overlap; bm=""; name="overlap (per tensor)" ;;
      bucketed) f=$csv; bm=$bb; name="bucketed, $(if [ -n "$bb" ]; then calc %g "$bb"; fi) MiB" ;;
      copyengine) f=$ce; bm=$(best_bucket $p "$ce"); name="bucketed, gradients on the copy engines, $(if [ -n "$bm" ]; then calc %g "$bm"; fi) MiB" ;;
      zero1ce) f=$z1ce; bm=$(best_bucket $p "$z1ce"); name="bucketed + ZeRO-1, gradients and weights on the copy engines, $(if [ -n "$bm" ]; then calc %g "$bm"; fi) MiB" ;;
      pytorch)
        pt=$(pytorch_step $p)
        echo "| PyTorch DDP, $pt_bm MB buckets | $p | $pt | - | - | - | - | - | 1.00 |"
        continue ;;
    esac
    [ -f "$f" ] || continue
    s2=$(two "$f" $p step_ms_mean "$bm")
    [ -n "$s2" ] || continue
    s1=$(one "$f" $p step_ms_mean "$bm")
    pt=$(pytorch_step $p)
    echo "| $name | $p | $(calc %.1f "$s2") | $(d "$( [ -n "$s1" ] && calc %.1f "$s1")") | $(eff "$s1" "$s2") | $(calc %.1f "$(one "$f" $p bwd_ms_mean "$bm")") -> $(calc %.1f "$(two "$f" $p bwd_ms_mean "$bm")") | $(calc %.1f "$(two "$f" $p grad_comm_ms_mean "$bm")") | $(calc %.2f "$(two "$f" $p exposed_comm_ms_mean "$bm")") | $(calc '%.2fx faster' "$pt / $s2") |"
  done
done
echo

# ---- goals ----------------------------------------------------------------------
echo "### Goals"
echo
for p in fp32 bf16; do
  bb=$(best_bucket $p)
  if [ -z "$bb" ]; then
    echo "- $p: no bucketed 2-GPU row yet, so neither goal can be judged."
    continue
  fi
  src="all-reduced on the SMs"
  what="all-reduces"
  oncopy=0
  # the copy-engine rows (ddp_copy_engine) when their best ratio is lower
  cb=$(best_bucket $p "$ce")
  if [ -n "$cb" ] && is_true "$(two "$ce" $p step_ms_mean "$cb") / $(one "$ce" $p step_ms_mean "$cb") < $(two "$csv" $p step_ms_mean "$bb") / $(one "$csv" $p step_ms_mean "$bb")"; then
    csv_saved=$csv; csv=$ce; bb=$cb; src="gradients all-gathered on the copy engines: ddp_copy_engine.csv"
    what="all-gathers on the copy engines"
    oncopy=1
  fi
  s2=$(two "$csv" $p step_ms_mean "$bb")
  s1=$(one "$csv" $p step_ms_mean "$bb")
  num "the 2-GPU step" "$s2"
  num "the 1-GPU step" "$s1"
  pt=$(pytorch_step $p)
  ratio=$(calc %.3f "$s2 / $s1")
  allowed=$(calc %.1f "1.05 * $s1")
  b1=$(one "$csv" $p bwd_ms_mean "$bb")
  b2=$(two "$csv" $p bwd_ms_mean "$bb")
  o1=$(one "$csv" $p opt_ms_mean "$bb")
  o2=$(two "$csv" $p opt_ms_mean "$bb")
  gc=$(two "$csv" $p grad_comm_ms_mean "$bb")
  ex=$(two "$csv" $p exposed_comm_ms_mean "$bb")
  gm=$(two "$csv" $p grad_comm_mib "$bb")
  nb=$(two "$csv" $p grad_collectives "$bb")
  for x in "$b1" "$b2" "$o1" "$o2" "$gm"; do num "a $p goal figure" "$x"; done
  if [ $oncopy -eq 1 ]; then
    why="the 2-GPU backward also holds most of AdamW ($(calc %.1f "$o1") ms on one GPU; $(calc %.1f "$o2") ms of it is left after backward on two), which runs beside it; the transfers hold no SMs but share memory bandwidth with backward's kernels and AdamW"
    if [ -n "$ar_bus" ]; then
      t_grad=$(calc %.1f "$gm * 1048576 / 1e9 / $ar_bus * 1000")
      why="$why, and at the 2-rank NCCL all-reduce's measured bus bandwidth ($(calc %.0f "$ar_bus") GB/s at 1 GiB, allreduce.csv) the $(gb "$gm") GB of fp32 gradients take $t_grad ms, $(cmp_word "$t_grad" "$b1") the 1-GPU backward ($(calc %.1f "$b1") ms)"
    fi
  else
    why="NCCL's kernels share the SMs and memory bandwidth with backward's"
  fi
  if is_true "$s2 <= 1.05 * $s1"; then
    g1="**met**: $(calc %.1f "$s2") ms is $ratio x the 1-GPU step ($(calc %.1f "$s1") ms; at most $allowed allowed)."
  else
    # The step's change split into backward, the optimizer after it and the
    # rest (forward, communication left after backward, synchronisation);
    # the three sum to the step's change, each with its sign (the rest is
    # taken from the rounded figures, so the printed ones add up).
    d_st=$(calc %.1f "$s2 - $s1"); d_bw=$(calc %.1f "$b2 - $b1"); d_op=$(calc %.1f "$o2 - $o1")
    g1="**not met**: $(calc %.1f "$s2") ms is $ratio x the 1-GPU step ($(calc %.1f "$s1") ms), $(calc %.1f "$s2 - $allowed") ms over the $allowed ms allowed. The second GPU adds $d_st ms: backward $(calc %+.1f "$d_bw") ms ($(calc %.1f "$b1") -> $(calc %.1f "$b2")), the optimizer after it $(calc %+.1f "$d_op") ms ($(calc %.1f "$o1") -> $(calc %.1f "$o2")) and the rest of the step (forward, communication left after backward, synchronisation) $(calc %+.1f "$d_st - $d_bw - $d_op") ms. Backward grows while its $nb $what ($(calc %.0f "$gm") MiB, $(calc %.1f "$gc") ms of communication) overlap it: $why. Only $(calc %.2f "$ex") ms of communication is left after backward."
  fi
  if is_true "$s2 < $pt"; then
    g2="**met**: $(calc %.1f "$s2") ms against PyTorch DDP's $pt ms, $(calc %.2f "$pt / $s2") x faster."
  else
    g2="**not met**: $(calc %.1f "$s2") ms against PyTorch DDP's $pt ms, $(calc %.1f "100 * ($s2 / $pt - 1)")% slower."
  fi
  echo "- $p, best bucket $(calc %g "$bb") MiB ($src). \"Step time at most 1.05 x the single-GPU step at the same per-GPU batch\": $g1"
  echo "  \"Faster than PyTorch DDP on the same machine\": $g2"
  if [ -n "${csv_saved:-}" ]; then csv=$csv_saved; csv_saved=""; fi
done
echo
bf1=$(best_bucket fp32); bb1=$(best_bucket bf16)
fl_ar=$(two "$flat" fp32 grad_comm_ms_mean)
bw16=$(one "$csv" bf16 bwd_ms_mean "$bb1")
# What the copy-engine rows (ddp_copy_engine) do to the goal, per precision:
# the share of the bucketed rows' 2-GPU excess they remove, and the verdict.
ce_gain="" ce_met="" ce_unmet=""
for p in fp32 bf16; do
  cb=$(best_bucket $p "$ce"); bb=$(best_bucket $p)
  if [ -z "$cb" ] || [ -z "$bb" ]; then continue; fi
  c2=$(two "$ce" $p step_ms_mean "$cb"); c1=$(one "$ce" $p step_ms_mean "$cb")
  k2=$(two "$csv" $p step_ms_mean "$bb"); k1=$(one "$csv" $p step_ms_mean "$bb")
  if [ -z "$c2" ] || [ -z "$c1" ] || [ -z "$k2" ] || [ -z "$k1" ]; then continue; fi
  ce_gain="$ce_gain${ce_gain:+ and }$(calc %.0f "100 * (1 - ($c2 - $c1) / ($k2 - $k1))")% ($p)"
  if is_true "$c2 <= 1.05 * $c1"; then
    ce_met="$ce_met${ce_met:+ and }$p"
  else
    ce_unmet="$ce_unmet${ce_unmet:+ and }$p"
  fi
done
if [ -n "$ce_gain" ]; then
  ce_text="Moving the gradients on the copy engines (ddp_copy_engine,
in the appendix) removes $ce_gain of what the second GPU adds to the bucketed step"
  if [ -n "$ce_met" ]; then
    ce_text="$ce_text and meets the goal in $ce_met"
  else
    ce_text="$ce_text but meets the goal in neither precision"
  fi
  if [ -n "$ce_unmet" ]; then
    ce_text="$ce_text; in $ce_unmet
ZeRO-1 on the copy engines (zero1_copy_engine) comes closest. Communicating bf16 gradients (half
the bytes; our policy keeps them fp32) or a larger per-GPU batch
(zero1_batch_scaling) are the other levers."
  else
    ce_text="$ce_text."
  fi
else
  ce_text="Communicating bf16 gradients (half the bytes; our policy keeps them
fp32) or a larger per-GPU batch (more compute per byte) would be the
changes that bring the ratio towards 1.05."
fi
# The paragraph sets the bucketed rows beside the flat row's all-reduce:
# without both, only what the copy engines did is said.
if [ -z "$fl_ar" ] || [ -z "$bf1" ] || [ -z "$bw16" ]; then
  printf '%s\n\n' "$ce_text"
else
cat <<EOF
The 5% goal asks the $(calc %.0f "$(two "$csv" fp32 grad_comm_mib "$bf1")") MiB all-reduce to vanish behind a backward that
lasts $(calc %.1f "$(one "$csv" fp32 bwd_ms_mean "$bf1")") ms (fp32) or $(calc %.1f "$bw16") ms (bf16) on one GPU, while the all-reduce alone takes
about $(calc %.1f "$fl_ar") ms at full NVLink bandwidth (the flat row): under bf16 the communication
is $(cmp_word "$fl_ar" "$bw16") backward itself, and in both precisions it slows the
backward kernels it runs beside. Two changes are in these rows: the mean's
1/W is taken inside the reduction (ncclAvg) instead of a pass over the
gradients on the compute stream, and the communication stream has the
highest priority, so a bucket's collective starts as soon as it is issued.
The appendix measures where the rest of the second GPU's cost
comes from and what was tried against it. $ce_text

EOF
fi

# ---- the overlap timeline -------------------------------------------------------
echo "### The overlap, seen in one step (ddp_overlap_individual_parameters_benchmarking (b))"
echo
# series JSONL STRATEGY PREC NAME EXPECTED: the values of the last matching
# line's sample NAME, one a line. A series with fewer than EXPECTED values
# was cut short on its way into the samples file; its last value may be cut
# mid-number and its last start may lack an end, so both are dropped.
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
tl_ok=1
tl_note=""
tl_story=""
tmp="$OUT/ddp_timeline.tmp.csv"
echo "panel,lane,kind,t0,t1" > "$tmp"
xmax=0
xmin=1000000
panel=0
for s in naive overlap; do
  panel=$((panel + 1))
  case $s in naive) f=$naive ;; overlap) f=$overlap ;; esac
  j=${f%.csv}.samples.jsonl
  if [ ! -f "$j" ] || [ -z "$(two "$f" fp32 grad_collectives)" ]; then
    tl_ok=0
    continue
  fi
  hooks=$(two "$f" fp32 grad_collectives)
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
  echo "_No fp32 2-GPU timeline of naive and overlap in the samples yet._"
  echo
elif [ -z "$GNUPLOT" ]; then
  echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
  echo
else
  # Room on the right for the "recording cut here" labels.
  xmax=$(awk -v m="$xmax" 'BEGIN { printf "%d", (int((m + 18) / 10) + 1) * 10 }')
  xmin=$(awk -v m="$xmin" 'BEGIN { printf "%d", int(m / 10) * 10 }')
  "$GNUPLOT" -c "$reports/ddp_timeline.gp" "$tmp" "$OUT/ddp_timeline.svg" \
    "naive: $(two "$naive" fp32 grad_collectives) all-reduces after backward (fp32, 2 GPUs, last timed step)" \
    "overlap: each tensor's all-reduce started from its backward hook (fp32, 2 GPUs, last timed step)" \
    "$xmin" "$xmax"
  echo "![Per-rank timeline of backward and gradient all-reduces, naive against overlapped](ddp_timeline.svg)"
  echo
  cat <<EOF
_The last timed step of each run as the ranks recorded it (CUDA events),
from $xmin ms after the step's start (forward comes first): light bars are
backward from its start to the last gradient, each tick a
gradient becoming final, red boxes the gradient all-reduces on the
communication stream._

Rank 0, fp32: $tl_story.

EOF
fi
rm -f "$tmp"
if [ -n "$tl_note" ]; then
  cat <<EOF
**The recorded timelines are incomplete**: $tl_note. A series of more than
about 4 KB of text is cut when the runner reads the worker's result file
(harness/resultfile.c reads it in lines of 4096 bytes), so the figure
shows the all-reduces up to that point and leaves out the rest, including
the cut last value. The rows' summed durations (grad comm, after bwd
above) are computed inside the job and are complete.

EOF
fi

# ---- overhead model -------------------------------------------------------------
overhead_model() {
echo "### The overhead model (ddp_bucketed_benchmarking (b))"
echo
if [ -z "$ar_o" ]; then
  echo "_Needs NCCL all-reduce rows with 2 ranks in reports/data/allreduce.csv._"
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
Suppose backward computes the gradients of n_b equal buckets one after the
other, each in the time its data takes on the wire, s / (n_b w), and each
all-reduce costs o + s / (n_b w) (o the fixed cost of a call, w the
all-reduce's algorithm bandwidth). Bucket k's all-reduce can start when its
gradients are final; each call runs o longer than the computation it hides
behind, so the communication falls o further behind per bucket, and when
backward ends the backlog of n_b o plus the last bucket's own transfer is
left:

    overhead(n_b) = n_b o + s / (n_b w)

Setting its derivative o - s / (n_b^2 w) to zero gives n_b* = sqrt(s / (o w)),
so the optimal bucket size is

    b* = s / n_b* = sqrt(s o w),   with overhead(b*) = 2 sqrt(s o / w).

o and w come from a least-squares line through the $npts NCCL 2-rank
all-reduce medians of reports/data/allreduce.csv (time = o + x / w for x
MiB per rank; sizes $sizes MiB; measured on $ar_machine): o = $(calc %.4f "$ar_o") ms per call and w = $(calc %.1f "$ar_w") MiB/ms
($(calc %.0f "$ar_w * 1.048576") GB/s algorithm bandwidth). With s = $(calc %.1f "$s_mib") MiB of fp32 gradients
(the rows' grad_comm_mib): n_b* = $nstar, **b* = $bstar MiB**, predicted overhead
$ostar ms. The table sets the model at the bucket counts the runs had
(buckets never split a tensor, so 1 MiB buckets still give one bucket per
tensor) next to what was measured: the 2-GPU step minus the 1-GPU step,
and the communication left after backward, which is what the model
describes.

EOF
echo "| bucket (MiB) | buckets n_b | model (ms) | fp32: 2-GPU - 1-GPU step | fp32: after bwd | bf16: 2-GPU - 1-GPU step | bf16: after bwd |"
echo "|--:|--:|--:|--:|--:|--:|--:|"
tmp="$OUT/ddp_buckets.tmp.csv"
echo "precision,bucket_mb,n_b,overhead_ms,exposed_ms,model_ms" > "$tmp"
for p in fp32 bf16; do
  for bm in $(tool distinct "$csv" --cols bucket_mb --where status=ok --where precision=$p --sort bucket_mb); do
    s1=$(one "$csv" $p step_ms_mean "$bm")
    s2=$(two "$csv" $p step_ms_mean "$bm")
    nb=$(two "$csv" $p grad_collectives "$bm")
    ex=$(two "$csv" $p exposed_comm_ms_mean "$bm")
    [ -n "$s1" ] && [ -n "$s2" ] && [ -n "$nb" ] || continue
    echo "$p,$bm,$nb,$(calc %.4f "$s2 - $s1"),$ex,$(calc %.4f "$nb * $ar_o + $s_mib / ($nb * $ar_w)")" >> "$tmp"
  done
done
for bm in $(tool distinct "$csv" --cols bucket_mb --where status=ok --where world_size=2 --sort bucket_mb); do
  nb=$(awk -F, -v b="$bm" 'NR > 1 && $2 == b { print $3; exit }' "$tmp")
  [ -n "$nb" ] || continue
  row="| $(calc %g "$bm") | $nb | $(calc %.2f "$nb * $ar_o + $s_mib / ($nb * $ar_w)")"
  for p in fp32 bf16; do
    line=$(awk -F, -v b="$bm" -v p=$p 'NR > 1 && $1 == p && $2 == b { printf "%.1f | %.2f", $4, $5; exit }' "$tmp")
    row="$row | ${line:-- | -}"
  done
  echo "$row |"
done
echo
if [ -n "$GNUPLOT" ]; then
  "$GNUPLOT" -c "$reports/ddp_buckets.gp" "$tmp" "$OUT/ddp_buckets.svg" "$s_mib" "$ar_o" "$ar_w"
  echo "![DDP overhead against bucket size: model and measurement](ddp_buckets.svg)"
  echo
  echo "_Overhead per step against the bucket size, log scales. Dashed: the model"
  echo "with full buckets (n_b = s / b); open circles: the model at the runs'"
  echo "bucket counts; solid: the measured 2-GPU step minus the 1-GPU step;"
  echo "dotted: the measured communication left after backward._"
  echo
else
  echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
  echo
fi
rm -f "$tmp"
lo=$(tool value "$csv" --where status=ok --where world_size=2 --col bucket_mb --agg min)
hi=$(tool value "$csv" --where status=ok --where world_size=2 --col bucket_mb --agg max)
# The model's after-backward figure against the run's, at the largest and
# the smallest bucket size (fp32).
nhi=$(two "$csv" fp32 grad_collectives "$hi")
nlo=$(two "$csv" fp32 grad_collectives "$lo")
if [ -n "$nhi" ] && [ -n "$nlo" ] && [ "$hi" != "$lo" ]; then
  mhi=$(calc %.2f "$nhi * $ar_o + $s_mib / ($nhi * $ar_w)")
  mlo=$(calc %.2f "$nlo * $ar_o + $s_mib / ($nlo * $ar_w)")
  xhi=$(calc %.2f "$(two "$csv" fp32 exposed_comm_ms_mean "$hi")")
  xlo=$(calc %.2f "$(two "$csv" fp32 exposed_comm_ms_mean "$lo")")
  b1lo=$(calc %.1f "$(one "$csv" fp32 bwd_ms_mean "$lo")")
  echo "Against the communication left after backward (fp32), the quantity the"
  echo "model describes: at $(calc %g "$hi") MiB ($nhi buckets, the last bucket's transfer"
  echo "dominating) the model gives $mhi ms and the run $xhi ms; at $(calc %g "$lo") MiB ($nlo"
  echo "buckets) the model's backlog of fixed costs is $mlo ms and the run leaves $xlo ms."
  if is_true "$xlo < 0.5 * $mlo"; then
    echo "The backlog does not build up because the model's premise, compute per"
    echo "bucket no longer than its transfer, is false here: one GPU's backward"
    echo "($b1lo ms) outlasts the whole all-reduce ($(calc %.1f "$ar_o + $s_mib / $ar_w") ms by the fit), so"
    echo "the calls' fixed costs hide behind compute."
  fi
  echo "What the model leaves out is the cost that shows in the step: the"
  echo "overlapped all-reduces slow backward itself (the backward columns above),"
  echo "so the measured 2-GPU excess stays at $(calc %.1f "$(two "$csv" fp32 step_ms_mean "$hi") - $(one "$csv" fp32 step_ms_mean "$hi")") ms (fp32, $(calc %g "$hi") MiB) even"
  echo "where little communication is left after backward."
  echo
fi
}
overhead_model

# ---- appendix ------------------------------------------------------------------
# The experiments that look for what the second GPU costs, and what was
# tried against it: investigation, not the handout's deliverables.
echo "### Appendix: where the second GPU's cost goes, and what was tried"
echo
cat <<EOF
The goals above are judged against the best rows of every form; this
appendix holds the experiments behind them, in the order they were asked:
how many SMs the collectives should hold (ddp_nccl_ctas), shaping the
products for the SMs left (ddp_sm_reserve), which kernels slow down
(ddp_contention), then moving the bytes on the copy engines
(ddp_copy_engine, zero1_copy_engine, zero1_batch_scaling).

EOF

# ---- NCCL thread blocks -----------------------------------------------------------
ctas="$DATA/ddp_nccl_ctas.csv"
if [ -f "$ctas" ] && [ "$("$CSVTOOL" count "$ctas" --where status=ok)" -gt 0 ]; then
  echo "#### How many SMs should the gradient all-reduces hold? (ddp_nccl_ctas)"
  echo
  cat <<EOF
Each NCCL thread block holds an SM for the whole collective, so an
all-reduce overlapping backward takes those SMs from it. ncclConfig_t's
maxCTAs caps the blocks per collective (the ddp kind's nccl_max_ctas, 0 =
NCCL's default); bucketed DDP of the same model on $(tool distinct "$ctas" --cols machine --where status=ok | head -n 1):

EOF
  tool table "$ctas" --cols precision,bucket_mb,nccl_max_ctas,step_ms_mean,bwd_ms_mean,grad_comm_ms_mean,exposed_comm_ms_mean \
    --head "precision,bucket (MiB),blocks per collective (0: NCCL's default),step (ms),backward (ms),gradient comm (ms),exposed after backward (ms)" \
    --where status=ok --fmt step_ms_mean=%.1f --fmt bwd_ms_mean=%.1f --fmt grad_comm_ms_mean=%.1f --fmt exposed_comm_ms_mean=%.1f
  # The fewest blocks measured, at the largest bucket: what one block moves.
  c_n=$(tool value "$ctas" --where status=ok --where precision=fp32 --where nccl_max_ctas!=0 --agg min --default "" --col nccl_max_ctas)
  c_bm=$(tool value "$ctas" --where status=ok --where precision=fp32 --agg max --default "" --col bucket_mb)
  c1="" gm=""
  if [ -n "$c_n" ] && [ -n "$c_bm" ]; then
    c1=$(tool value "$ctas" --where status=ok --where precision=fp32 --where bucket_mb="$c_bm" --where nccl_max_ctas="$c_n" --agg first --col grad_comm_ms_mean --default "")
    gm=$(v "$ctas" fp32 2 grad_comm_mib --where bucket_mb="$c_bm")
  fi
  if [ -n "$c1" ] && [ -n "$gm" ]; then
    case $c_n in 1) c_what="One block" ;; *) c_what="With $c_n blocks per collective, each" ;; esac
    cat <<EOF

$c_what moves about $(calc %.0f "$gm / 1024 / $c1 * 1000 / $c_n") GiB/s, so a capped all-reduce outlasts backward and is
exposed after it; and backward is not given back its speed in proportion
to the blocks freed (with 4 or 8 blocks it is about as slow as with
NCCL's default, though the collectives then hold a few SMs, not dozens):
so the slowdown is not SMs alone; what else the two contend for (memory
bandwidth, GEMM waves sized for every SM) these rows do not separate.
NCCL's default was the fastest step at both bucket sizes here (before the
products were shaped for fewer SMs: next table).

EOF
  fi
fi

# ---- products shaped for the SMs left ------------------------------------------------
smr="$DATA/ddp_sm_reserve.csv"
if [ -f "$smr" ] && [ "$("$CSVTOOL" count "$smr" --where status=ok)" -gt 0 ]; then
  echo "#### Backward's products shaped for the SMs the collectives leave (ddp_sm_reserve)"
  echo
  sr_bm=$(tool distinct "$smr" --cols bucket_mb --where status=ok | head -n 1)
  cat <<EOF
cuBLAS sizes a product (tiles, split-K) to fill every SM in whole waves;
while a bucket's all-reduce holds some SMs, a product sized for one wave
spills its last blocks into a second. gemm_sm_reserve sets cuBLAS's SM
count target to the SMs minus that many while backward runs (one rank
keeps the whole GPU). Bucketed DDP, $(calc %g "$sr_bm") MiB buckets, on $(tool distinct "$smr" --cols machine --where status=ok | head -n 1):

EOF
  tool table "$smr" --cols precision,nccl_max_ctas,gemm_sm_reserve,step_ms_mean,bwd_ms_mean,grad_comm_ms_mean,exposed_comm_ms_mean \
    --head "precision,blocks per collective (0: NCCL's default),SMs reserved,step (ms),backward (ms),gradient comm (ms),exposed after backward (ms)" \
    --where status=ok --fmt step_ms_mean=%.1f --fmt bwd_ms_mean=%.1f --fmt grad_comm_ms_mean=%.1f --fmt exposed_comm_ms_mean=%.1f
  # sr_gain PREC: "LO HI", the least and the most a reservation saves of
  # the step at the same blocks per collective (%, the best reservation
  # against none, latest row of each setting).
  sr_gain() {
    tool select "$smr" --cols nccl_max_ctas,gemm_sm_reserve,step_ms_mean \
      --where status=ok --where precision="$1" --where world_size=2 --sort -utc |
    awk -F, 'NR > 1 && !seen[$1 "," $2]++ {
        if ($2 == 0) base[$1] = $3
        else if (!($1 in best) || $3 < best[$1]) best[$1] = $3 }
      END { lo = ""; for (c in base) if (c in best) {
              g = 100 * (base[c] - best[c]) / base[c]
              if (lo == "" || g < lo) lo = g; if (hi == "" || g > hi) hi = g }
            if (lo != "") printf "%.1f %.1f", lo, hi }'
  }
  sr_best() { # PREC COL: a column of the fastest 2-GPU row
    tool value "$smr" --where status=ok --where precision="$1" --where world_size=2 \
      --sort step_ms_mean --agg first --default "" --col "$2"
  }
  sr_f=$(sr_gain fp32); sr_b=$(sr_gain bf16)
  sr_c=$(sr_best fp32 nccl_max_ctas); sr_r=$(sr_best fp32 gemm_sm_reserve)
  sr_bwd=$(sr_best fp32 bwd_ms_mean)
  sr_b1=$(one "$csv" fp32 bwd_ms_mean "$sr_bm")
  sr_b16=$(one "$csv" bf16 bwd_ms_mean "$sr_bm")
  # What ddp_bucketed_benchmarking's latest rows ran with.
  k_c=$(two "$csv" fp32 nccl_max_ctas); k_r=$(two "$csv" fp32 gemm_sm_reserve)
  if [ -n "$sr_f" ] && [ -n "$sr_b" ] && [ -n "$sr_c" ] && [ -n "$sr_b1" ] && [ -n "$sr_b16" ] && [ -n "$fl_ar" ]; then
    # shellcheck disable=SC2086 # split "lo hi"
    set -- $sr_f $sr_b
    sr_text="Reserving SMs recovers $1-$2% of the fp32 step at the same blocks per
collective (best: $sr_c blocks per collective with $sr_r SMs reserved)"
    if [ "$k_c" = "$sr_c" ] && [ "$k_r" = "$sr_r" ]; then
      sr_text="$sr_text, so ddp_bucketed_benchmarking runs with
that pair"
    else
      sr_text="$sr_text; ddp_bucketed_benchmarking's latest rows ran with
$k_c blocks and $k_r SMs reserved"
    fi
    sr_fit=""
    [ -z "$ar_o" ] || sr_fit=", $(calc %.1f "$ar_o + $(two "$csv" fp32 grad_comm_mib) / $ar_w") ms by the fit"
    sr_text="$sr_text; backward still runs $(calc %.1f "$sr_bwd - $sr_b1") ms slower than alone ($(calc %.1f "$sr_b1") -> $(calc %.1f "$sr_bwd") ms) while the
all-reduces overlap it. bf16 gains $3-$4%: the fp32 gradients' all-reduce
alone ($(calc %.1f "$fl_ar") ms in the flat row$sr_fit) is $(cmp_word "$fl_ar" "$sr_b16")
its 1-GPU backward ($(calc %.1f "$sr_b16") ms)"
    if ! is_true "$fl_ar < $sr_b16"; then
      sr_text="$sr_text, which cannot hide it."
    elif is_true "$fl_ar >= 0.8 * $sr_b16"; then
      sr_text="$sr_text, only $(calc %.1f "$sr_b16 - $fl_ar") ms less, so there is little compute to hide it behind."
    else
      sr_text="$sr_text, $(calc %.1f "$sr_b16 - $fl_ar") ms less."
    fi
    printf '\n%s\n\n' "$sr_text"
  fi
fi

# ---- which kernels slow down ---------------------------------------------------------
con="$DATA/ddp_contention.csv"
if [ -f "$con" ] && [ "$("$CSVTOOL" count "$con" --where status=ok)" -gt 0 ]; then
  echo "#### Which kernels slow down beside the all-reduces (ddp_contention)"
  echo
  cat <<EOF
Bucketed DDP as in ddp_bucketed_benchmarking ($(tool distinct "$con" --cols bucket_mb --where status=ok | awk 'NF { printf "%s%g", (n++ ? ", " : ""), $1 }') MiB buckets, products
shaped for the SMs minus $(tool distinct "$con" --cols gemm_sm_reserve --where status=ok | awk 'NF { printf "%s%s", (n++ ? ", " : ""), $1 }')) on one GPU and on two, the collectives capped
at $(tool distinct "$con" --cols nccl_max_ctas --where status=ok --sort nccl_max_ctas | awk 'NF { printf "%s%s", (n++ ? " or " : ""), $1 }') blocks. After the timed steps each job runs one more step with
every operation bracketed by events on the compute stream (rank 0): ms per
step by kernel family, forward, backward and AdamW together (only backward
overlaps collectives). "Host" is the host's time to queue backward and its
collectives, against backward's time on the GPU. GPU: $(tool distinct "$con" --cols gpu_name --where status=ok | head -n 1).

| precision | blocks | GPUs | step | backward (GPU / host) | products | AdamW | the rest |
|---|--:|--:|--:|--:|--:|--:|--:|
EOF
  jsonl="${con%.csv}.samples.jsonl"
  # q [csvtool args]: the contention row of cn_p, cn_c, cn_w.
  q() { tool value "$con" --agg first --default "" --where status=ok --where precision="$cn_p" \
          --where nccl_max_ctas="$cn_c" --where world_size="$cn_w" "$@"; }
  # One line per row for the text below: precision blocks GPUs backward
  # host products AdamW rest (ms).
  cn_rows=""
  cn_caps=$(tool distinct "$con" --cols nccl_max_ctas --where status=ok --sort nccl_max_ctas)
  cn_lo=$(printf '%s\n' "$cn_caps" | awk 'NF { print; exit }')
  cn_hi=$(printf '%s\n' "$cn_caps" | awk 'NF { c = $0 } END { print c }')
  for cn_p in fp32 bf16; do
    for cn_c in $cn_caps; do
      for cn_w in 1 2; do
        msg=$(q --col message)
        [ -n "$msg" ] || continue
        host=$(awk -v p="$cn_p" -v c="$cn_c" -v w="$cn_w" '
          index($0, "\"precision\": \"" p "\"") && index($0, "\"nccl_max_ctas\": \"" c "\"") &&
          index($0, "\"world_size\": \"" w "\"") {
            i = index($0, "\"bwd_host_ms\": [")
            if (!i) next
            r = substr($0, i + 16); r = substr(r, 1, index(r, "]") - 1)
            n = split(r, a, ", "); s = 0
            for (k = 1; k <= n; k++) s += a[k]
            if (n) printf "%.1f", s / n
          }' "$jsonl" 2> /dev/null)
        bw=$(q --col bwd_ms_mean --fmt %.1f)
        fams=$(printf '%s\n' "$msg" | sed 's/^.*kernel family: //' | tr ';' '\n' | awk '
          { gsub(/^ +/, ""); split($0, f, " ")
            if (f[1] == "matmul") mm = f[2]; else if (f[1] == "adamw") ad = f[2]; else rest += f[2] }
          END { printf "%.1f %.1f %.1f", mm, ad, rest }')
        # shellcheck disable=SC2086 # split "products AdamW rest"
        set -- $fams
        echo "| $cn_p | $cn_c | $cn_w | $(q --col step_ms_mean --fmt %.1f) | $bw / ${host:--} | $1 | $2 | $3 |"
        cn_rows="$cn_rows$cn_p $cn_c $cn_w $bw ${host:--} $1 $2 $3
"
      done
    done
  done
  # cn P C W FIELD: a field of cn_rows (4 backward, 5 host, 6 products).
  cn() { printf '%s' "$cn_rows" | awk -v p="$1" -v c="$2" -v w="$3" -v k="$4" '$1 == p && $2 == c && $3 == w { print $k; exit }'; }
  cn_ok=1
  [ -n "$cn_lo" ] && [ "$cn_lo" != "$cn_hi" ] || cn_ok=0
  for x in fp32 bf16; do
    for y in 1 2; do
      [ -n "$(cn $x "$cn_lo" $y 6)" ] && [ -n "$(cn $x "$cn_hi" $y 6)" ] || cn_ok=0
    done
  done
  if [ $cn_ok -eq 1 ]; then
    # fp32 products on 1 and 2 GPUs (mean of the fewest- and most-block
    # jobs), and the slowdown with each cap.
    pf1=$(calc %.1f "($(cn fp32 "$cn_lo" 1 6) + $(cn fp32 "$cn_hi" 1 6)) / 2")
    pf2=$(calc %.1f "($(cn fp32 "$cn_lo" 2 6) + $(cn fp32 "$cn_hi" 2 6)) / 2")
    pc_lo=$(calc %.1f "100 * ($(cn fp32 "$cn_lo" 2 6) / $(cn fp32 "$cn_lo" 1 6) - 1)")
    pc_hi=$(calc %.1f "100 * ($(cn fp32 "$cn_hi" 2 6) / $(cn fp32 "$cn_hi" 1 6) - 1)")
    # How long before the GPU the host finished queueing backward (2 GPUs).
    gap() { printf '%s' "$cn_rows" | awk -v p="$1" '$1 == p && $3 == 2 && $5 != "-" {
        g = $4 - $5; if (n++ == 0 || g < lo) lo = g; if (n == 1 || g > hi) hi = g }
      END { if (n) printf (sprintf("%.0f", lo) == sprintf("%.0f", hi)) ? "%.0f" : "%.0f-%.0f", lo, hi }'; }
    gf=$(gap fp32); gb16=$(gap bf16)
    cat <<EOF

Measured on $(tool distinct "$con" --cols machine --where status=ok | head -n 1) (the rows above): beside the all-reduces a step's
fp32 products run $pc_lo% slower with $cn_lo blocks per collective and $pc_hi% with $cn_hi
($pf1 -> $pf2 ms, the mean of the two), so it is not the number of SMs
they take; the clocks were not throttling (nvidia-smi, watched beside
these runs); and the host finishes queueing
backward $gf ms before the GPU finishes it (fp32, 2 GPUs; bf16: $gb16 ms; the GPU is not waiting for
launches). What is left, by elimination (not measured directly), is
sharing SMs: a product's blocks that land on an SM where a collective's
block runs go slower, and each wave of blocks waits for its slowest. In bf16 the products slow by $(calc %.1f "$(cn bf16 "$cn_hi" 2 6) - $(cn bf16 "$cn_hi" 1 6)") ms with $cn_hi blocks
and $(calc %.1f "$(cn bf16 "$cn_lo" 2 6) - $(cn bf16 "$cn_lo" 1 6)") ms with $cn_lo (under which the all-reduces last all of backward).
A stand-alone probe (dev/green_ctx_probe.cu) found that a fixed SM
partition for the collectives (CUDA green contexts) costs the products
about what the sharing does; moving the bytes on the copy engines, which
hold no SMs, is what ddp_copy_engine does (next).

EOF
  fi
fi

# ---- gradients on the copy engines -------------------------------------------------
if [ -f "$ce" ] && [ "$("$CSVTOOL" count "$ce" --where status=ok)" -gt 0 ]; then
  echo "#### Gradients on the copy engines (ddp_copy_engine)"
  echo
  cat <<EOF
\`grad_sync = "allgather"\`: each bucket's raw fp32 gradients are
all-gathered in place into a buffer holding both ranks' copies (the
model's gradients live in it, so nothing is copied locally), on a NCCL
communicator with the zero-CTA policy over a symmetric window, which NCCL
2.28 moves with the copy engines; AdamW averages the two copies as it
reads them. On the GPUs each bucket's AdamW is queued the moment the
bucket is launched, on a stream of its own (lowest priority) after that
bucket's all-gather, so the optimizer runs during backward; the gradient
hook fires only once backward reads the parameter no more (after its dx
product), which makes that safe. For two ranks this puts the same bytes on NVLink as a ring all-reduce.
A stand-alone probe (dev/ce_probe.cu) tried the idea first: SGEMMs of
backward's shapes slow down much less beside copy-engine all-gathers
than beside SM all-reduces, least with the in-place form.

| precision | bucket MiB | 1-GPU step | 2-GPU step | ratio | backward 1 -> 2 GPUs | AdamW 1 -> 2 GPUs | after bwd |
|---|--:|--:|--:|--:|--:|--:|--:|
EOF
  for p in fp32 bf16; do
    for b in $(tool distinct "$ce" --cols bucket_mb --where status=ok --where precision=$p --sort bucket_mb); do
      s2=$(two "$ce" $p step_ms_mean "$b"); s1=$(one "$ce" $p step_ms_mean "$b")
      [ -n "$s2" ] && [ -n "$s1" ] || continue
      echo "| $p | $(calc %g "$b") | $(calc %.1f "$s1") | $(calc %.1f "$s2") | $(calc %.3f "$s2 / $s1") | $(calc %.1f "$(one "$ce" $p bwd_ms_mean "$b")") -> $(calc %.1f "$(two "$ce" $p bwd_ms_mean "$b")") | $(calc %.1f "$(one "$ce" $p opt_ms_mean "$b")") -> $(calc %.1f "$(two "$ce" $p opt_ms_mean "$b")") | $(calc %.2f "$(two "$ce" $p exposed_comm_ms_mean "$b")") |"
    done
  done
  cf=$(best_bucket fp32 "$ce"); cbf=$(best_bucket bf16 "$ce")
  ce_gm=$(two "$ce" fp32 grad_comm_mib "$cf")
  ce_o1=$(one "$ce" fp32 opt_ms_mean "$cf")
  ce_b16=$(one "$ce" bf16 bwd_ms_mean "$cbf")
  for x in "$ce_gm" "$ce_o1" "$ce_b16"; do num "a ddp_copy_engine figure" "$x"; done
  if is_true "$(two "$ce" bf16 step_ms_mean "$cbf") > 1.05 * $(one "$ce" bf16 step_ms_mean "$cbf")"; then
    ce_b16_text="bf16 stays above 1.05: per step"
  else
    ce_b16_text="bf16 is within 1.05 here, though per step"
  fi
  ce_link=""
  if [ -n "$ar_bus" ]; then
    ce_t=$(calc %.1f "$ce_gm * 1048576 / 1e9 / $ar_bus * 1000")
    ce_link=", and at the 2-rank NCCL all-reduce's measured bus bandwidth
($(calc %.0f "$ar_bus") GB/s at 1 GiB, allreduce.csv) the fp32 gradients need $ce_t ms, $(cmp_word "$ce_t" "$ce_b16")
bf16's $(calc %.1f "$ce_b16") ms backward on one GPU"
  fi
  cat <<EOF

The 2-GPU "backward" column now holds most of AdamW too (the AdamW
column is what is left of it after backward): the $(calc %.1f "$ce_o1") ms update runs
beside backward's kernels instead of after them, held to the
$(tool distinct "$ce" --cols gemm_sm_reserve --where status=ok --where world_size=2 | awk 'NF { printf "%s%s", (n++ ? ", " : ""), $0 }') SMs of \`gemm_sm_reserve\` (one persistent block each, fed by bulk
copies into shared memory: kernels/cuda/adamw.cu) while cuBLAS shapes
backward's products for the rest; a bucket whose AdamW is issued after
backward has ended takes the whole GPU. Costs: the gathered buffer
holds W copies of the gradients (W x $(gib "$ce_gm") GiB for $m_size in fp32), and AdamW's
state lives beside it on every rank; only optimizer adamw composes with
it. $ce_b16_text the second GPU adds ~$(calc %.0f "3 * $ce_gm * 1048576 / 1e9") GB of memory
traffic (the two all-gather streams and AdamW's read of the second copy,
each a full $(gb "$ce_gm") GB copy of the fp32 gradients)$ce_link.

EOF
fi

# ---- ZeRO-1 on the copy engines --------------------------------------------------
if [ -f "$z1ce" ] && [ "$("$CSVTOOL" count "$z1ce" --where status=ok)" -gt 0 ]; then
  echo "#### ZeRO-1 with its gradients and weights on the copy engines (zero1_copy_engine)"
  echo
  cat <<EOF
\`grad_sync = "alltoall"\` with \`optimizer = "zero1"\`: each bucket's raw
fp32 gradients go through an all-to-all (ncclAlltoAll, copy engines on a
zero-CTA communicator with symmetric windows), so each rank receives only
its own chunk of the other rank's bucket, as ZeRO-1's reduce-scatter
would, without the reduction; AdamW on the rank's chunk averages the
copies. The weights are placed in a symmetric window of a second
zero-CTA communicator, so the in-place all-gathers of the updated chunks
take the copy engines too, and on the GPUs both (the chunk's AdamW, then
its all-gather) are queued the moment the bucket is launched, on the
optimizer's lowest-priority stream: the whole optimizer step runs during
backward. A rank's all-gather writes into the other's weights only after
that rank took part in the bucket's all-to-all, so after its backward
read them last. The same bytes cross NVLink as in ddp_copy_engine (half
the gradients out, half the weights back), and each GPU does half of
AdamW.

| precision | bucket MiB | 1-GPU step | 2-GPU step | ratio | backward 1 -> 2 GPUs | optimizer 1 -> 2 GPUs | parameter all-gathers | AdamW state MiB, 1 -> 2 GPUs |
|---|--:|--:|--:|--:|--:|--:|--:|--:|
EOF
  for p in fp32 bf16; do
    for b in $(tool distinct "$z1ce" --cols bucket_mb --where status=ok --where precision=$p --sort bucket_mb); do
      s2=$(two "$z1ce" $p step_ms_mean "$b"); s1=$(one "$z1ce" $p step_ms_mean "$b")
      [ -n "$s2" ] && [ -n "$s1" ] || continue
      echo "| $p | $(calc %g "$b") | $(calc %.1f "$s1") | $(calc %.1f "$s2") | $(calc %.3f "$s2 / $s1") | $(calc %.1f "$(one "$z1ce" $p bwd_ms_mean "$b")") -> $(calc %.1f "$(two "$z1ce" $p bwd_ms_mean "$b")") | $(calc %.1f "$(one "$z1ce" $p opt_ms_mean "$b")") -> $(calc %.1f "$(two "$z1ce" $p opt_ms_mean "$b")") | $(calc %.1f "$(two "$z1ce" $p param_comm_ms_mean "$b")") | $(calc %.0f "$(one "$z1ce" $p optstate_mib "$b")") -> $(calc %.0f "$(two "$z1ce" $p optstate_mib "$b")") |"
    done
  done
  cat <<EOF

EOF
  for p in fp32 bf16; do
    zb=$(best_bucket $p "$z1ce"); cb=$(best_bucket $p "$ce")
    [ -n "$zb" ] || continue
    z2=$(two "$z1ce" $p step_ms_mean "$zb"); z1=$(one "$z1ce" $p step_ms_mean "$zb")
    line="- $p: best $(calc %.1f "$z2") ms at $(calc %g "$zb") MiB, $(calc %.3f "$z2 / $z1") x the 1-GPU step ($(calc %.1f "$z1") ms)"
    if [ -n "$cb" ]; then
      c2=$(two "$ce" $p step_ms_mean "$cb"); c1=$(one "$ce" $p step_ms_mean "$cb")
      line="$line; the all-gather form's best is $(calc %.3f "$c2 / $c1") x ($(calc %.1f "$c2") ms)"
    fi
    echo "$line; backward $(calc %.1f "$(one "$z1ce" $p bwd_ms_mean "$zb")") -> $(calc %.1f "$(two "$z1ce" $p bwd_ms_mean "$zb")") ms, $(calc %.1f "$(two "$z1ce" $p opt_ms_mean "$zb")") ms of the optimizer left after it."
  done
  # fp32: backward's growth against the AdamW time that left the step's end.
  zf=$(best_bucket fp32 "$z1ce"); zbf=$(best_bucket bf16 "$z1ce")
  # (from the rounded figures the table shows, so the differences match it)
  zb1=$(calc %.1f "$(one "$z1ce" fp32 bwd_ms_mean "$zf")"); zb2=$(calc %.1f "$(two "$z1ce" fp32 bwd_ms_mean "$zf")")
  zo1=$(calc %.1f "$(one "$z1ce" fp32 opt_ms_mean "$zf")"); zo2=$(calc %.1f "$(two "$z1ce" fp32 opt_ms_mean "$zf")")
  zg=$(calc %.1f "$zb2 - $zb1")
  zd=$(calc %.1f "$zo1 - $zo2")
  if is_true "$zg < $zd"; then
    z_grow="by $zg ms ($zb1 -> $zb2), less than the $zd ms of AdamW that no longer follows
it ($zo1 -> $zo2 ms; its products leave memory bandwidth to spare)"
  else
    z_grow="by $zg ms ($zb1 -> $zb2), no less than the $zd ms of AdamW that no longer
follows it ($zo1 -> $zo2 ms)"
  fi
  # The fastest fp32 2-GPU step of every strategy measured in this section.
  z2f=$(two "$z1ce" fp32 step_ms_mean "$zf")
  zmin=$z2f zmin_f=zero1_copy_engine
  for f in "$naive" "$flat" "$overlap" "$csv" "$ce"; do
    [ -f "$f" ] || continue
    x=$(tool value "$f" --where status=ok --where precision=fp32 --where world_size=2 \
        --sort step_ms_mean --agg first --default "" --col step_ms_mean)
    if [ -n "$x" ] && is_true "$x < $zmin"; then zmin=$x zmin_f=${f##*/}; fi
  done
  if [ "$zmin_f" = zero1_copy_engine ]; then
    z_fast="this is the fastest 2-GPU step
measured here"
  else
    z_fast="the fastest 2-GPU step measured here
is $(calc %.1f "$zmin") ms (${zmin_f%.csv}) against this $(calc %.1f "$z2f") ms"
  fi
  # Memory traffic each GPU adds beside backward in bf16, from the weights'
  # count N (4-byte values; a gradient copy is 4N bytes): AdamW over N/2
  # with two gradient copies, 8 arrays read or written (16N bytes); the
  # all-to-all, its chunk sent and the other's received plus NCCL's local
  # copy of its own chunk (8N); the all-gather (4N).
  zn=$(tool value "$z1ce" --where status=ok --agg first --default "" --col params)
  num "the weights' count" "$zn"
  # The H200's published HBM3e bandwidth (TB/s): a specification, not
  # measured in reports/data.
  hbm_tbs=4.8
  zt=$(calc %.1f "28 * $zn / ($hbm_tbs * 1e12) * 1000")
  zo16=$(one "$z1ce" bf16 opt_ms_mean "$zbf")
  # bf16: ZeRO-1's best ratio against the all-gather form's.
  z1_vs_ce=""
  cbb=$(best_bucket bf16 "$ce")
  if [ -n "$zbf" ] && [ -n "$cbb" ]; then
    zr=$(calc %.3f "$(two "$z1ce" bf16 step_ms_mean "$zbf") / $(one "$z1ce" bf16 step_ms_mean "$zbf")")
    cr=$(calc %.3f "$(two "$ce" bf16 step_ms_mean "$cbb") / $(one "$ce" bf16 step_ms_mean "$cbb")")
    if is_true "$zr < $cr"; then
      z1_vs_ce="ZeRO-1's best bf16 ratio ($zr) is below the all-gather form's ($cr): each
GPU runs half of AdamW, and since the host issues the collectives
(last subsection) its parameter all-gathers no longer wait on the device."
    else
      z1_vs_ce="ZeRO-1's best bf16 ratio ($zr) is no better than the all-gather form's ($cr)."
    fi
  fi
  cat <<EOF

Backward now carries half of AdamW and every transfer. In fp32 it grows
$z_grow, and $z_fast. In bf16, at this per-GPU batch ($((m_b * m_ctx)) tokens), per
step each GPU adds about $(calc %.0f "28 * $zn / 1e9") GB of traffic beside backward: AdamW over its
half of the $(calc %.1f "$zn / 1e9") G weights with two gradient copies (8 arrays of 4 bytes
read or written per element: $(calc %.0f "16 * $zn / 1e9") GB), the all-to-all (its chunk sent, the
other's received, and NCCL's local copy of its own chunk: $(calc %.0f "8 * $zn / 1e9") GB) and the
all-gather ($(calc %.0f "4 * $zn / 1e9") GB). At the H200's published $hbm_tbs TB/s that is $zt ms, $(cmp_word "$zt" "$zo16")
what AdamW alone took on one GPU ($(calc %.1f "$zo16") ms); bandwidth is not all
backward loses, since the waits that order the transfers cost it too
(last subsection). $z1_vs_ce

EOF
fi

# ---- ZeRO-1 at larger per-GPU batches ---------------------------------------------
zbs="$DATA/zero1_batch_scaling.csv"
if [ -f "$zbs" ] && [ "$("$CSVTOOL" count "$zbs" --where status=ok)" -gt 0 ]; then
  echo "#### The same ZeRO-1 at larger per-GPU batches (zero1_batch_scaling)"
  echo
  echo "$(tool distinct "$zbs" --cols bucket_mb --where status=ok | awk 'NF { printf "%s%g", (n++ ? ", " : ""), $1 }') MiB buckets; each 2-GPU row beside the 1-GPU row at the same per-GPU batch."
  echo
  echo "| precision | sequences per GPU | 1-GPU step | 2-GPU step | added by the second GPU | ratio | backward 1 -> 2 GPUs |"
  echo "|---|--:|--:|--:|--:|--:|--:|"
  zs_rows=""
  for p in fp32 bf16; do
    for rb in $(tool distinct "$zbs" --cols rank_batch --where status=ok --where precision=$p --sort rank_batch); do
      s2=$(v "$zbs" $p 2 step_ms_mean --where rank_batch=$rb)
      s1=$(v "$zbs" $p 1 step_ms_mean --where rank_batch=$rb)
      [ -n "$s2" ] && [ -n "$s1" ] || continue
      num "a zero1_batch_scaling step" "$s2"; num "a zero1_batch_scaling step" "$s1"
      zs_rows="$zs_rows$p $rb $s1 $s2
"
      echo "| $p | $rb | $(calc %.1f "$s1") | $(calc %.1f "$s2") | $(calc %.1f "$s2 - $s1") ms | $(calc %.3f "$s2 / $s1") | $(calc %.1f "$(v "$zbs" $p 1 bwd_ms_mean --where rank_batch=$rb)") -> $(calc %.1f "$(v "$zbs" $p 2 bwd_ms_mean --where rank_batch=$rb)") |"
    done
  done
  # the worst ratio over the rows, and where it is
  zs_worst=$(printf '%s' "$zs_rows" | awk 'NF == 4 { r = $4 / $3; if (r > w) { w = r; p = $1; b = $2 } }
    END { if (w > 0) printf "%.3f %s %s", w, p, b }')
  # bf16 above 1.05: the mean time the second GPU adds, the 1-GPU step at
  # which that would be 5%, and the per-GPU batch there by a least-squares
  # line through the 1-GPU steps (an extrapolation).
  zs_x=$(printf '%s' "$zs_rows" | awk '$1 == "bf16" { n++; a += $4 - $3; x += $2; y += $3; xx += $2 * $2; xy += $2 * $3 }
    END { if (n < 2 || n * xx == x * x) exit
          m = (n * xy - x * y) / (n * xx - x * x); c = (y - m * x) / n; a /= n; t = a / 0.05
          if (m > 0 && a > 0 && t > c) printf "%.1f %.0f %.0f", a, t, (t - c) / m }')
  zs_text=""
  if [ -n "$zs_worst" ]; then
    # shellcheck disable=SC2086 # split "ratio precision batch"
    set -- $zs_worst
    if awk -v r="$1" 'BEGIN { exit !(r <= 1.05) }'; then
      zs_text="Every row is within the 5% goal: the worst ratio is $1 ($2, $3
sequences per GPU). Each GPU runs AdamW over half of the weights, which
pays for most of what the transfers and the optimizer running beside
backward add to backward (last column), and the bigger the batch, the
smaller the share of the step that the second GPU adds."
    elif [ -n "$zs_x" ]; then
      # shellcheck disable=SC2086 # split "added step batch"
      set -- $zs_x
      zs_text="In bf16 a constant ~$1 ms (the mean of these rows) would reach 1.05 only against a
1-GPU step of ~$2 ms, about $3 sequences per GPU by these rows' slope
(an extrapolation, not a measurement)."
    fi
  fi
  cat <<EOF

The transfers and the half of AdamW are set by the model's $(calc %.1f "$(tool value "$zbs" --where status=ok --agg first --default 0 --col params) / 1e9") G
weights, not by the tokens, so what the second GPU adds does not grow
with the batch while the step does. $zs_text

EOF
fi

# ---- what the diagnostic runs settled ---------------------------------------
# Conclusions of runs made outside the runner (patched builds with
# diagnostic switches; git history keeps the patches and their outputs):
# words only, since reports/data holds runner rows only.
cat <<'EOF'
#### What the diagnostic runs settled

Runs of patched builds with diagnostic switches, outside the runner (git
history keeps the patches and their outputs), settled choices the rows
above are measured with; only their conclusions are kept here:

- The host issues a bucket's collective once it sees the bucket's ready
  event complete, and its AdamW (and ZeRO-1's all-gather) once it sees
  the collective's end, one bucket at a time in the same order on every
  rank. Making the streams wait on those events during backward instead
  slowed backward even with no byte moved.
- The compute stream runs one priority level above the optimizer's: at
  the same level, AdamW beside backward gained nothing in bf16.
- AdamW during backward is held to \`gemm_sm_reserve\` persistent blocks:
  fewer left part of it after backward, more slowed backward. ZeRO-1's
  AdamW, over half the model, costs more capped than uncapped and stays
  uncapped.
- Gradient views that lie end to end in a bucket are zeroed by one
  memset: one memset per view made forward slower on two GPUs than on one.
- AdamW reading the other GPU's gradients in place over NVLink
  (\`grad_sync = "peer"\`) stayed slower than the copy engines and was
  removed.
- Not the cause of what is left: two one-GPU jobs running at once (each
  as fast as alone), AdamW's grid size, the number of hardware queues, or the host, which
  stays ahead of the GPU.
EOF
echo
