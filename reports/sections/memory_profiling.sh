#!/bin/sh
# Writeup problem memory_profiling: the 2.7B model's memory at context
# 128 / 256 / 512, a forward pass and a training step, fp32 and bf16: (a)
# the allocation timeline the engine records, against time, with the
# step's phases marked (figures); (b) the peaks, forward against train
# step; (c) bf16 against fp32 (here, on the fused path of
# DATA/torch_compile.csv, and PyTorch's, reports/anchors/); (d) the
# residual stream's size; (e) the largest allocations. The timeline and
# the activations come from the rows' samples (NAME.samples.jsonl: mem_*,
# act_mib.*, written by every lm job; jobs/lm.c says what each holds).
# Environment as for every section (mkreport.sh): DATA, CSV, OUT, CSVTOOL,
# GNUPLOT. mkreport.sh prints the problem's heading; this prints its parts.
set -eu
. "$REPORT_LIB"


csv="${CSV:-$DATA/memory_profiling.csv}"
jsonl="${csv%.csv}.samples.jsonl"
fused="$DATA/torch_compile.csv"

renders memory_profiling
require_rows "$csv" memory_profiling "on a GPU"
on_gpu "$csv"
anchor=$(anchor_rows lm_pytorch)
strong=$(anchor_rows torch_lm)
size=$(tool value "$csv" --agg first --where status=ok --col size)
gpus=$(tool distinct "$csv" --cols gpu_name --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
fusion=$(tool value "$csv" --agg first --where status=ok --col fusion)
batch=$(tool value "$csv" --agg first --where status=ok --col batch)
nparams=$(tool value "$csv" --agg first --where status=ok --col params)
# model.md's sizes (jobs/lm.c takes the same names): d_model and heads
case $size in
  small) dmodel=768 heads=12 ;; medium) dmodel=1024 heads=16 ;;
  large) dmodel=1280 heads=20 ;; xl) dmodel=1600 heads=25 ;;
  2.7B) dmodel=2560 heads=32 ;; *) dmodel="" heads="" ;;
esac

# The job's latest samples line, and one sample list from it.
sline() { sample_line "$jsonl" precision="$1" context="$2" mode="$3"; }
arr() { sample_list "$@"; }
# peak PREC CTX MODE [COL]: the engine's peak of the latest ok row (MiB),
# or that row's COL, or "".
peak() {
  tool value "$csv" --sort -utc --agg first --default "" --where status=ok --where precision="$1" \
    --where context="$2" --where mode="$3" --col "${4:-engine_peak_mib}"
}
contexts=$(tool distinct "$csv" --cols context --where status=ok --sort context)
cmax=$(printf '%s\n' $contexts | tail -n 1)

cat <<TEXT
The $size model (batch $batch, $(case $fusion in opbyop) echo op-by-op ;; *) echo "$fusion" ;; esac) path) on ${gpus}. Every \`lm\` job
logs the engine's allocations and frees from model creation to the end of
its first step (exact, not sampled). Our model allocates
its parameters, gradients and every activation (one allocation) when it is
created; a step allocates only, once, the AdamW moments and a larger
workspace when a product first needs one.

TEXT

# ---- (a) the timelines ----------------------------------------------------------
echo "### (a) Memory timelines"
echo
# timeline PREC CTX MODE: writes OUT/memory_PREC_CTX_MODE.svg and its
# markdown; sets tl_phase_words for the caption. Rows: t_ms since forward
# began, cumulative GiB per group (memory_timeline.gp's input).
nfig=0
figs=""
timeline() {
  l=$(sline "$1" "$2" "$3")
  [ -n "$l" ] || return 0
  tmp="$OUT/memory_$1_$2_$3.tmp.csv"
  for g in t params grads optimizer activations workspace other; do
    if [ $g = t ]; then arr "$l" mem_t_ms > "$tmp.$g"; else arr "$l" "mem_${g}_mib" > "$tmp.$g"; fi
  done
  ph=$(arr "$l" mem_phase_ms | tr '\n' ' ')
  # the window: the step from forward's start to its end, 6% either side
  read -r f0 f1 b1 o1 <<PH
$(printf '%s\n' "$ph" | awk '{ print $2, $3, $4, $5 }')
PH
  num "$1 $2 $3 forward start (ms)" "$f0"; num "$1 $2 $3 step end (ms)" "$o1"
  {
    echo "t_ms,params,grads,optimizer,activations,workspace,other"
    paste -d, "$tmp.t" "$tmp.params" "$tmp.grads" "$tmp.optimizer" "$tmp.activations" \
              "$tmp.workspace" "$tmp.other" |
      awk -F, -v f0="$f0" -v o1="$o1" '
        function row(x,   s, i, out) {
          s = 0; out = sprintf("%.4f", x)
          for (i = 1; i <= 6; i++) { s += g[i] / 1024; out = out sprintf(",%.4f", s) }
          print out
        }
        BEGIN { w = 0.06 * (o1 - f0); lo = -w; hi = o1 - f0 + w; started = 0 }
        { x = $1 - f0
          if (x > lo && !started) { row(lo); started = 1 }
          for (i = 1; i <= 6; i++) g[i] = $(i + 1)
          if (x > lo && x <= hi) row(x) }
        END { if (!started) row(lo); row(hi) }'
  } > "$tmp"
  if [ "$3" = forward ]; then
    phases="0:$(calc %.3f "$f1 - $f0"):forward"
  else
    phases="0:$(calc %.3f "$f1 - $f0"):forward $(calc %.3f "$f1 - $f0"):$(calc %.3f "$b1 - $f0"):backward"
    [ "$3" = train_step ] && phases="$phases $(calc %.3f "$b1 - $f0"):$(calc %.3f "$o1 - $f0"):optimizer"
  fi
  rm -f "$tmp.t" "$tmp.params" "$tmp.grads" "$tmp.optimizer" "$tmp.activations" "$tmp.workspace" "$tmp.other"
  svg="memory_$1_$2_$3.svg"
  case $3 in forward) what="forward pass" ;; train_step) what="training step" ;; *) what=$3 ;; esac
  "$GNUPLOT" -c "$REPORTS/memory_timeline.gp" "$tmp" "$OUT/$svg" \
    "$size, $1, batch $batch x context $2: memory in use during the first $what" "$phases"
  rm -f "$tmp"
  figs="$figs![Memory in use against time, $size $1 context $2, first $what]($svg)

"
  nfig=$((nfig + 1))
}
# delta L FROM TO: the largest change of total memory (MiB, absolute) over
# the events from clock FROM to TO (ms since the log began), and the net
# change; "0 0" when none.
delta() {
  arr "$1" mem_t_ms > "$OUT/.mp.t"
  for g in params grads optimizer activations workspace other; do arr "$1" "mem_${g}_mib" > "$OUT/.mp.$g"; done
  paste -d, "$OUT/.mp.t" "$OUT/.mp.params" "$OUT/.mp.grads" "$OUT/.mp.optimizer" \
      "$OUT/.mp.activations" "$OUT/.mp.workspace" "$OUT/.mp.other" |
    awk -F, -v a="$2" -v b="$3" '
      { s = 0; for (i = 2; i <= 7; i++) s += $i
        if ($1 <= a) base = s
        else if ($1 <= b) { d = s - prev; if (d < 0) d = -d; if (d > mx) mx = d; last = s; seen = 1 }
        prev = s }
      END { printf "%.1f %.1f\n", mx + 0, seen ? last - base : 0 }'
  rm -f "$OUT/.mp.t" "$OUT/.mp.params" "$OUT/.mp.grads" "$OUT/.mp.optimizer" \
        "$OUT/.mp.activations" "$OUT/.mp.workspace" "$OUT/.mp.other"
}
if [ -z "$GNUPLOT" ]; then
  echo "_The figures need gnuplot 5.4 or later, which configure did not find._"
  echo
else
  timeline fp32 "$cmax" forward
  timeline fp32 "$cmax" train_step
  timeline bf16 "$cmax" train_step
  if [ $nfig -eq 0 ]; then
    echo "_No timeline in the samples yet (rows from before the engine logged allocations)._"
    echo
  else
    printf '%s' "$figs"
    echo "_Memory in use, stacked by what it holds, from 6% of the step before it"
    echo "to 6% after; dashed lines mark the phases; the key gives each group's size"
    echo "in the window._"
    echo
  fi
fi
# The answer, from the fp32 training step's log.
l=$(sline fp32 "$cmax" train_step)
if [ -n "$l" ]; then
  ph=$(arr "$l" mem_phase_ms | tr '\n' ' ')
  read -r c0 f0 f1 b1 o1 <<PH
$ph
PH
  read -r fmx _ <<D
$(delta "$l" "$f0" "$f1")
D
  read -r bmx _ <<D
$(delta "$l" "$f1" "$b1")
D
  read -r _ onet <<D
$(delta "$l" "$b1" "$o1")
D
  pk=$(peak fp32 "$cmax" train_step)
  num "fp32 train step peak" "$pk"
  if is_true "$fmx < 0.01 * $pk && $bmx < 0.01 * $pk"; then
    flat="flat through forward and backward: the largest single change in either is $(calc %.0f "($fmx > $bmx ? $fmx : $bmx)") MiB (the products' workspace), under 1% of the $(gib "$pk") GiB peak"
    verdict="No, not from forward to backward"
  else
    flat="changing during forward or backward, by up to $(calc %.0f "$fmx") MiB in forward and $(calc %.0f "$bmx") MiB in backward"
    verdict="Partly"
  fi
  cat <<TEXT
**Can you tell which stage is running from the peaks?** $verdict. The
timeline is $flat, since every activation was allocated with the model.
Only the first optimizer step shows: AdamW's two moments, $(calc %.1f "$onet / 1024") GiB
allocated right after backward, the jump to the peak. PyTorch's timeline
would climb through forward and fall through backward.

TEXT
fi

# ---- (b) peaks --------------------------------------------------------------------
echo "### (b) Peak memory, forward pass and training step"
echo
echo "The engine's peak per job (GiB = 2^30 bytes), fp32, op by op:"
echo
echo "| context | forward (GiB) | training step (GiB) | training step - forward (GiB) |"
echo "|--:|--:|--:|--:|"
for c in $contexts; do
  f=$(peak fp32 "$c" forward); t=$(peak fp32 "$c" train_step)
  [ -n "$f$t" ] || continue
  dg=-
  [ -n "$f" ] && [ -n "$t" ] && dg=$(calc %.1f "($t - $f) / 1024")
  echo "| $c | $(gib "$f") | $(gib "$t") | $dg |"
done
echo
failed_jobs "$csv" precision,context,mode,status,message \
  "precision,context,mode,status,message"
lf=$(sline fp32 "$cmax" forward)
if [ -n "$lf" ]; then
  pm=$(arr "$lf" mem_params_mib | tail -n 1); gm=$(arr "$lf" mem_grads_mib | tail -n 1)
  am=$(arr "$lf" mem_activations_mib | tail -n 1); om=$(arr "$lf" mem_optimizer_mib | tail -n 1)
  num "forward params MiB" "$pm"; num "forward grads MiB" "$gm"; num "forward activations MiB" "$am"
  ft=$(peak fp32 "$cmax" forward); tt=$(peak fp32 "$cmax" train_step)
  a1=$(sline fp32 "$(printf '%s\n' $contexts | head -n 1)" forward)
  amin=$(arr "$a1" mem_activations_mib | tail -n 1)
  cat <<TEXT
At context $cmax the forward pass peaks at $(gib "$ft") GiB: parameters
$(gib "$pm") GiB, gradients $(gib "$gm") GiB (allocated with the model, so a forward-only
job holds them too) and activations $(gib "$am") GiB. The training step adds AdamW's two
moments ($(calc %.1f "2 * $pm / 1024") GiB) for $(gib "$tt") GiB. Only the activations grow with the context,
from $(gib "$amin") GiB at $(printf '%s\n' $contexts | head -n 1) to $(gib "$am") GiB at $cmax, so the last column is constant.

TEXT
fi

# ---- (c) mixed precision ------------------------------------------------------------
echo "### (c) Mixed precision and memory"
echo
echo "The same jobs in bf16 (GiB; bf16 - fp32 in brackets):"
echo
echo "| context | forward fp32 | forward bf16 | training step fp32 | training step bf16 |"
echo "|--:|--:|--:|--:|--:|"
dmax=0
for c in $contexts; do
  f32=$(peak fp32 "$c" forward); f16=$(peak bf16 "$c" forward)
  t32=$(peak fp32 "$c" train_step); t16=$(peak bf16 "$c" train_step)
  [ -n "$f16$t16" ] || continue
  df=""; dt=""
  if [ -n "$f32" ] && [ -n "$f16" ]; then
    df=" ($(calc %+.2f "($f16 - $f32) / 1024"))"
    is_true "($f16 - $f32) > $dmax" && dmax=$(calc %.1f "$f16 - $f32")
  fi
  if [ -n "$t32" ] && [ -n "$t16" ]; then
    dt=" ($(calc %+.2f "($t16 - $t32) / 1024"))"
    is_true "($t16 - $t32) > $dmax" && dmax=$(calc %.1f "$t16 - $t32")
  fi
  echo "| $c | $(gib "$f32") | $(gib "$f16")$df | $(gib "$t32") | $(gib "$t16")$dt |"
done
echo
# the fused path (torch_compile.csv): bf16 keeps 16-bit activations and a
# 16-bit copy of the weights
fv() { # PREC MODE ATTENTION [COL]: the fused row's peak (MiB) at context 512, or its COL, or ""
  [ -f "$fused" ] || return 0
  tool value "$fused" --sort -utc --agg first --default "" --where status=ok --where size="$size" \
    --where context=512 --where precision="$1" --where mode="$2" --where fusion=fused \
    --where attention="$3" --col "${4:-engine_peak_mib}"
}
ff32=$(fv fp32 forward flash); ff16=$(fv bf16 forward flash)
ft32=$(fv fp32 train_step flash); ft16=$(fv bf16 train_step flash)
sp() { # PREC CONFIG: PyTorch's peak (GiB) at context 512, torch_lm.csv, or ""
  if [ "$2" = compiled ]; then pt_compiled "$strong" "$size" 512 "$1" peak_gib; return; fi
  tool value "$strong" --sort -utc --agg first --default "" --where status=ok --where size="$size" \
    --where context=512 --where precision="$1" --where config="$2" --col peak_gib
}
pe32=$(tool value "$anchor" --agg first --default "" --where size="$size" --where context=512 \
         --where precision=fp32 --where mode=train_step --where config=reference --col peak_gib)
pe16=$(tool value "$anchor" --agg first --default "" --where size="$size" --where context=512 \
         --where precision=bf16 --where mode=train_step --where config=reference --col peak_gib)
pc32=$(sp fp32 compiled); pc16=$(sp bf16 compiled)
echo "**Does mixed precision significantly affect memory?** No. Our bf16 keeps"
echo "fp32 weights, gradients, AdamW state and (op by op) activations, rounding"
echo "only the products' inputs: at most $(calc %.0f "$dmax") MiB above fp32 in every job above."
if [ -n "$ff32" ] && [ -n "$ff16" ] && [ -n "$ft32" ] && [ -n "$ft16" ]; then
  # the engine counts its own allocations, which do not depend on the GPU,
  # so another GPU's rows may stand here, named
  fg=$(fv bf16 train_step flash gpu_name)
  where=""
  [ "$fg" = "$GPU" ] || where="; measured on the $(gpu_kind "$fg"): the engine's allocations do not depend on the GPU"
  echo "On the fused path (torch_compile.csv, flash, context 512$where) the bf16"
  echo "activations do not pay for the bf16 weight copy ($(calc %.1f "$nparams * 2 / 2^30") GiB): $(gib "$ff16") against"
  echo "$(gib "$ff32") GiB in forward, $(gib "$ft16") against $(gib "$ft32") GiB in the training step."
fi
if [ -n "$pe32$pe16$pc32$pc16" ]; then
  line="PyTorch on the same GPU (reports/anchors/, context 512) agrees that autocast saves little:"
  [ -n "$pe32" ] && [ -n "$pe16" ] && line="$line eager $pe16 GiB in bf16 against $pe32 in fp32"
  [ -n "$pe32" ] && [ -n "$pe16" ] && [ -n "$pc32" ] && [ -n "$pc16" ] && line="$line,"
  [ -n "$pc32" ] && [ -n "$pc16" ] && line="$line torch.compile $(calc %.1f "$pc16") GiB against $(calc %.1f "$pc32")"
  echo "$line."
  # we lose on memory: our lowest training-step peak at context 512 against
  # PyTorch compiled, of our rows measured on PyTorch's GPU
  ours=$(peak fp32 512 train_step); [ "$(peak fp32 512 train_step gpu_name)" = "$GPU" ] || ours=""
  ours16=$(peak bf16 512 train_step); [ "$(peak bf16 512 train_step gpu_name)" = "$GPU" ] || ours16=""
  [ -n "$ft32" ] && [ "$(fv fp32 train_step flash gpu_name)" = "$GPU" ] &&
    is_true "$ft32 < ${ours:-1e30}" && ours=$ft32
  [ -n "$ft16" ] && [ "$(fv bf16 train_step flash gpu_name)" = "$GPU" ] &&
    is_true "$ft16 < ${ours16:-1e30}" && ours16=$ft16
  if [ -n "$pc32" ] && [ -n "$pc16" ] && [ -n "$ours" ] && [ -n "$ours16" ]; then
    if is_true "$ours / 1024 > $pc32 && $ours16 / 1024 > $pc16"; then
      echo "We lose on memory: $(gib "$ours") / $(gib "$ours16") GiB (fp32 / bf16, our lowest"
      echo "step peaks) against torch.compile's $(calc %.1f "$pc32") / $(calc %.1f "$pc16"). Both hold $(calc %.1f "4 * $nparams * 4 / 2^30") GiB of"
      echo "parameters, gradients and moments; PyTorch frees each saved activation as"
      echo "backward consumes it, ours stay (with bf16's weight copy) through AdamW."
    else
      echo "Our lowest training-step peaks at context 512 are $(gib "$ours") GiB (fp32) and"
      echo "$(gib "$ours16") GiB (bf16), against torch.compile's $(calc %.1f "$pc32") and $(calc %.1f "$pc16") GiB."
    fi
  fi
fi
echo
if [ -z "$pe32" ] || [ -z "$pe16" ]; then
  anchor_missing "eager peaks" are reports/anchors/torch_lm_reference.py reports/anchors/lm_pytorch.csv
  echo
fi
if [ -z "$pc32" ] || [ -z "$pc16" ]; then
  anchor_missing "torch.compile peaks" are reports/anchors/torch_lm.py reports/anchors/torch_lm.csv --sizes "$size" --precisions bf16,fp32
  echo
fi

# ---- (d) the residual stream ----------------------------------------------------
echo "### (d) One residual-stream activation"
echo
if [ -n "$dmodel" ]; then
  n512=$((batch * cmax * dmodel))
  cat <<TEXT
A residual-stream tensor holds batch x context x d_model fp32 values (fp32
under mixed precision too). For the $size model (d_model $dmodel) at batch
$batch and context $cmax: $batch x $cmax x $dmodel = $n512 values x 4 bytes =
$((n512 * 4)) bytes = **$(calc %.1f "$n512 * 4 / 1048576") MB** (MiB, bytes / 1024^2). Per context:

TEXT
  echo "| context | values | MB (bytes / 1024^2) |"
  echo "|--:|--:|--:|"
  for c in $contexts; do
    awk -v b="$batch" -v c="$c" -v d="$dmodel" \
      'BEGIN { n = b * c * d; printf "| %d | %d | %.1f |\n", c, n, n * 4 / 1048576 }'
  done
else
  echo "_Size $size is not one of model.md's; its d_model is not known here._"
fi
echo

# ---- (e) the largest allocations ------------------------------------------------
echo "### (e) The largest allocations"
echo
lf=$(sline fp32 "$cmax" forward)
[ -n "$lf" ] || lf=$(sline fp32 "$cmax" train_step)
if [ -n "$lf" ]; then
  last() { arr "$lf" "$1" | tail -n 1; }
  top=$(printf '%s\n' "$lf" | grep -o '"act_mib\.[^"]*": \[[^]]*\]' |
    sed 's/^"act_mib\.//; s/": \[/,/; s/\]$//; s/, /,/' |
    awk -F, '{ printf "%s,%.1f,%d\n", $1, $2 / $3, $3 }' | sort -t, -k2,2gr | head -n 1)
  tn=$(printf '%s' "$top" | cut -d, -f1); te=$(printf '%s' "$top" | cut -d, -f2)
  tl=$(printf '%s' "$top" | cut -d, -f3)
  cat <<TEXT
Our allocator makes a few large allocations ((b): parameters, gradients,
the activation table, then the moments) and the workspace
($(calc %.0f "$(last mem_workspace_mib)") MiB). Below, the tensors
inside the activation table (fp32 forward, context $cmax), as PyTorch's
per-tensor allocator would show them, each name summed over its layers.
TEXT
  if [ "$tn" = attn.scores ]; then
    cat <<TEXT
**The largest are the attention scores: $te MiB per layer** ($tl layers),
batch x heads x context x context fp32 values$([ -n "$heads" ] && printf ' = %s x %s x %s x %s x 4 bytes' "$batch" "$heads" "$cmax" "$cmax"),
written by Q K^T (model/forward.c, attention_fwd) and kept, softmaxed in
place, for backward.
TEXT
  else
    echo "**The largest is \`$tn\`: $te MiB per layer** ($tl layers)."
  fi
  echo
  echo "| activation | layers | MiB each | MiB in all | what it is |"
  echo "|---|--:|--:|--:|---|"
  printf '%s\n' "$lf" | grep -o '"act_mib\.[^"]*": \[[^]]*\]' |
    sed 's/^"act_mib\.//; s/": \[/,/; s/\]$//; s/, /,/' |
    while IFS=, read -r name total count; do
      what=""
      case $name in
        attn.scores) what="attention scores, then probabilities (softmax in place), batch x heads x T x T" ;;
        attn.probs) what="softmax probabilities, batch x heads x T x T" ;;
        scratch.grad_scores) what="gradient of the scores (backward scratch)" ;;
        lm_head.logits) what="logits, batch x T x vocab" ;;
        scratch.grad_logits) what="gradient of the logits" ;;
        ffn.a) what="SwiGLU's w1 product, batch x T x d_ff" ;;
        ffn.b) what="SwiGLU's w3 product, batch x T x d_ff" ;;
        ffn.h) what="SwiGLU's output, silu(a) * b, batch x T x d_ff" ;;
        ffn.*) what="SwiGLU's d_ff-wide activations, batch x T x d_ff" ;;
        ln*.out|ln_final.out) what="RMSNorm output, batch x T x d_model" ;;
        attn.q|attn.k|attn.v) what="a head-split projection, batch x heads x T x d_head" ;;
        scratch.*) what="backward scratch shared by the layers" ;;
      esac
      awk -v n="$name" -v t="$total" -v c="$count" -v w="$what" \
        'BEGIN { printf "| %s | %d | %.1f | %.1f | %s |\n", n, c, t / c, t, w }'
    done
  echo
else
  echo "_No samples for the fp32 context-$cmax forward pass yet._"
  echo
fi
