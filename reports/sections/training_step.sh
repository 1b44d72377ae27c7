#!/bin/sh
# Writeup section training_step: AdamW after backward against AdamW in
# backward (experiments/optimizer_in_backward.cfg, kind lm), beside the
# strongest PyTorch on the same GPU (reports/anchors/torch_lm.csv:
# torch.compile + SDPA + fused AdamW, and the same with the optimizer in
# backward), and where the bytes of the peak go (the rows' samples:
# mem_* at the largest total); and AdamW inside the weight-gradient
# products ($DATA/optimizer_in_products.csv, when measured), and with bf16
# weight gradients ($DATA/optimizer_weight_grads.csv). Environment
# as for every section.
set -eu
. "$REPORT_LIB"

csv=$CSV
jsonl="${csv%.csv}.samples.jsonl"
require_rows "$csv" optimizer_in_backward "on a GPU"
on_gpu "$csv"
anchor=$(anchor_rows torch_lm)
# MFU's peak: the dense rates measured on this GPU, else an H100's, which
# also hold for an H200 (the same SMs and clocks); on another GPU without
# its own floors there is no MFU column.
floors "$GPU"
bf16_tflops=$BF16_TFLOPS
fp32_tflops=$FP32_TFLOPS
[ "$FLOORS_GPU" = "$GPU" ] || case $GPU_KIND in H200) ;; *) bf16_tflops='' ;; esac

# ours SIZE CTX PREC OPT COL: the latest ok row's COL, or "".
ours() {
  tool value "$csv" --sort -utc --agg first --default "" --where status=ok --where size="$1" \
    --where context="$2" --where precision="$3" --where optimizer="$4" --where adamw_blocks=0 --col "$5"
}
# theirs SIZE CTX PREC CONFIG COL: the anchor's value, or "".
theirs() {
  if [ "$4" = compiled ]; then pt_compiled "$anchor" "$1" "$2" "$3" "$5"; return; fi
  tool value "$anchor" --agg first --default "" --where status=ok --where size="$1" \
    --where context="$2" --where precision="$3" --where config="$4" --col "$5"
}
if [ -n "$bf16_tflops" ]; then
  mfu_words="MFU: 6 x parameters x tokens a step over the step's time, against an $FLOORS_KIND's
dense product rates (reports/anchors/gpu_floors.csv: $bf16_tflops TFLOP/s bf16,
$fp32_tflops fp32)."
else
  mfu_words="MFU: not given, no product rates were measured on this GPU
(\`python3 reports/anchors/gpu_floors.py reports/anchors/gpu_floors.csv\`)."
fi
gpu=$(tool value "$csv" --agg first --where status=ok --col gpu_name)
batch=$(tool value "$csv" --agg first --where status=ok --col batch)

# shapes: "size,context,precision" of the main rows, by precision, then
# size as the model table orders them, then context
shapes() {
  tool select "$csv" --cols size,context,precision --where status=ok --where adamw_blocks=0 |
    sed 1d | sort -u |
    awk -F, 'BEGIN { o["small"]=1; o["medium"]=2; o["large"]=3; o["xl"]=4; o["2.7B"]=5 }
      { print (o[$1] ? o[$1] : 9) "," $0 }' | sort -t, -k4,4 -k1,1n -k3,3n | cut -d, -f2-
}
# The goal's numbers were set on the team's H100 (README_GPU) against
# PyTorch's compiled step there; the anchor may sit on another GPU than
# ours, so name both and never let 95 ms read as this GPU's PyTorch.
goal_kind=$(gpu_kind "$README_GPU")
h100_anchor="$REPORT_TMP/torch_lm.goal.csv"
tool select "$ANCHORS/torch_lm.csv" --where gpu="$README_GPU" > "$h100_anchor" || exit 1
gh=$(pt_compiled "$h100_anchor" 2.7B 512 bf16 step_ms_median)
ghm=$(pt_compiled "$h100_anchor" 2.7B 512 bf16 peak_gib)
if [ "$GPU" = "$README_GPU" ]; then goal_on="on this GPU"
else goal_on="on an $goal_kind"; fi
if [ -n "$gh" ] && [ -n "$ghm" ]; then
  num gh "$gh"; num ghm "$ghm"
  goal_from=", against PyTorch compiled's $(f1 "$gh") ms and $ghm GiB there"
else goal_from=""; fi
cat <<TEXT
**Goal** (2.7B, bf16, context 512): a step faster than the strongest
PyTorch's and no larger; its numbers, <= 95 ms and <= 50 GiB, were set
$goal_on$goal_from. Ours: the fastest path (fused, FlashAttention-2,
CUDA graphs), batch $batch, $gpu, AdamW after backward or in backward
(\`optimizer = "in_backward"\`: each tensor updated on a side stream once
its gradient is final).
PyTorch (reports/anchors/torch_lm.py, same GPU): torch.compile + SDPA +
fused AdamW, the faster of the default mode and \`reduce-overhead\`; in
backward, updates from register_post_accumulate_grad_hook. $mfu_words
Peaks: our allocator's; PyTorch's max_memory_allocated (reserved with
CUDA graphs).

| size | context | precision | after backward (median ms) | peak (GiB) | in backward (ms) | peak (GiB) | MFU in bwd (%) | SM MHz in bwd (NVML mean) | PyTorch compiled (ms) | peak (GiB) | PyTorch in bwd (ms) | peak (GiB) |
|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|
TEXT
# The table from one csvtool call a file (ours, theirs as `ours` and
# `theirs` read them: the newest ok row; PyTorch compiled the faster of its
# two modes, in backward the file's first), joined by awk; assigned
# first, so that set -e sees a call fail.
ours_rows=$(tool select "$csv" --where status=ok --where adamw_blocks=0 --sort -utc \
  --first-of size,context,precision,optimizer \
  --cols size,context,precision,optimizer,step_ms_median,engine_peak_mib,params,gpu_sm_mhz,tokens_per_step --sep '|')
pt_rows=$(tool select "$anchor" --where status=ok --where 'config=compiled|compiled_cudagraphs' \
  --sort step_ms_median --first-of size,context,precision \
  --cols size,context,precision,step_ms_median,peak_gib --sep '|')
pti_rows=$(tool select "$anchor" --where status=ok --where config=compiled_inbwd \
  --first-of size,context,precision --cols size,context,precision,step_ms_median,peak_gib --sep '|')
shape_list=$(shapes)
{ tagged o "$ours_rows"; tagged c "$pt_rows"; tagged i "$pti_rows"
  tagged s "$(printf '%s\n' "$shape_list" | tr , '|')"; } | awk -F'|' -v bf="$bf16_tflops" -v fp="$fp32_tflops" "$AWK_CELLS"'
  $1 == "o" { k = $2 "|" $3 "|" $4 "|" $5; for (n = 6; n <= 10; n++) o[k, n] = $n; next }
  $1 == "c" || $1 == "i" { k = $1 "|" $2 "|" $3 "|" $4; t[k, 1] = $5; t[k, 2] = $6; next }
  $1 == "s" {
    k = $2 "|" $3 "|" $4; a = k "|after_backward"; b = k "|in_backward"
    # MFU: 6 x params x tokens over the step, against the dense peak, in
    # percent (none without rates measured on this GPU)
    i = o[b, 6]; np = o[b, 8]; tk = o[b, 10]; pk = $4 == "bf16" ? bf : fp
    mfu = i != "" && np != "" && bf != "" ? sprintf("%.0f", 6 * np * tk / (i / 1000) / (pk * 1e12) * 100) : "-"
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, $4,
      fmt("%.1f", o[a, 6]), gib(o[a, 7]), fmt("%.1f", i), gib(o[b, 7]), mfu, fmt("%.0f", o[b, 9]),
      fmt("%.1f", t["c|" k, 1]), d(t["c|" k, 2]), fmt("%.1f", t["i|" k, 1]), d(t["i|" k, 2])
  }'
echo
# From the same rows (and the anchor's reduce-overhead ones), three lists
# of "size context, " or "size context (precision), ": bf16 shapes whose
# compiled cell has only the default mode (without CUDA graphs a step there
# may be launch-bound, a weaker anchor than PyTorch's best), and the shapes
# with our rows whose compiled / in-backward PyTorch cell is empty.
ptg_rows=$(tool select "$anchor" --where status=ok --where config=compiled_cudagraphs \
  --first-of size,context,precision --cols size,context,precision,step_ms_median --sep '|')
gaps=$({ tagged c "$pt_rows"; tagged i "$pti_rows"; tagged g "$ptg_rows"
  tagged s "$(printf '%s\n' "$shape_list" | tr , '|')"; } | awk -F'|' '
  $1 != "s" { k = $2 "|" $3 "|" $4; if ($5 != "") has[$1, k] = 1; next }
  { k = $2 "|" $3 "|" $4
    if ($4 == "bf16" && has["c", k] && !has["g", k]) ng = ng $2 " " $3 ", "
    if (!has["c", k]) gc = gc $2 " " $3 " (" $4 "), "
    if (!has["i", k]) gi = gi $2 " " $3 " (" $4 "), " }
  END { printf "%s\n%s\n%s\n", ng, gc, gi }')
nograph=$(printf '%s\n' "$gaps" | sed -n 1p)
if [ -n "$nograph" ]; then
  echo "PyTorch compiled at ${nograph%, } (bf16) is the default mode only: \`reduce-overhead\` is not yet measured there."
  echo
  todo "PyTorch's reduce-overhead step at ${nograph%, } (bf16) on the $(gpu_kind "$gpu") (reports/anchors/torch_lm.py)"
fi
for cfg in compiled compiled_inbwd; do
  if [ $cfg = compiled ]; then gap=$(printf '%s\n' "$gaps" | sed -n 2p)
  else gap=$(printf '%s\n' "$gaps" | sed -n 3p); fi
  [ -z "$gap" ] || ! has_anchor "$anchor" || {
    [ $cfg = compiled ] && w="PyTorch compiled" || w="PyTorch in backward"
    echo "$w is not yet measured at ${gap%, }."
    echo
    todo "$w at ${gap%, } on the $(gpu_kind "$gpu") (reports/anchors/torch_lm.py)"
  }
done
if ! has_anchor "$anchor"; then
  anchor_missing steps are reports/anchors/torch_lm.py reports/anchors/torch_lm.csv --sizes small,2.7B --precisions bf16,fp32
  echo
fi
failed_jobs "$csv" size,context,precision,optimizer,status,message "size,context,precision,optimizer,status,message"

# sline OPT: the latest samples line of the 2.7B, bf16, context-512 job
# (where the bytes of the peak go: the answer and the table below).
sline() {
  sample_line "$jsonl" size=2.7B precision=bf16 context=512 optimizer="$1" adamw_blocks=0
}
la=$(sline after_backward)
li=$(sline in_backward)
pa='' pi=''
if [ -n "$la" ] && [ -n "$li" ]; then
  pa=$(peak_items "$la")
  pi=$(peak_items "$li")
fi
# item ITEMS NAME: NAME's MiB in peak_items' ITEMS, or "".
item() { printf '%s\n' "$1" | awk -F, -v k="$2" '$1 == k { print $2 }'; }

# The headline: 2.7B, bf16, context 512.
a=$(ours 2.7B 512 bf16 after_backward step_ms_median)
i=$(ours 2.7B 512 bf16 in_backward step_ms_median)
if [ -n "$a" ] && [ -n "$i" ]; then
  am=$(ours 2.7B 512 bf16 after_backward engine_peak_mib)
  im=$(ours 2.7B 512 bf16 in_backward engine_peak_mib)
  ab=$(ours 2.7B 512 bf16 after_backward bwd_ms_mean)
  ao=$(ours 2.7B 512 bf16 after_backward opt_ms_mean)
  ib=$(ours 2.7B 512 bf16 in_backward bwd_ms_mean)
  for x in a i am im ab ao ib; do eval "num $x \"\$$x\""; done
  tc=$(theirs 2.7B 512 bf16 compiled step_ms_median)
  tcm=$(theirs 2.7B 512 bf16 compiled peak_gib)
  hidden=$(calc %.1f "$ab + $ao - $ib")
  echo "**Answer.** At 2.7B, bf16, context 512, AdamW in backward takes the"
  echo "step from $(f1 "$a") to $(f1 "$i") ms and the peak from $(gib "$am") to"
  printf '%s' "$(gib "$im") GiB"
  # the fall by item of the peak (the samples): not all of it is the
  # gradient buffer, part of which stays as slots
  ga=$(item "$pa" grads); gn=$(item "$pi" grads)
  xa=$(item "$pa" activations); xn=$(item "$pi" activations)
  if [ -n "$ga" ] && [ -n "$gn" ] && [ -n "$xa" ] && [ -n "$xn" ]; then
    for x in ga gn xa xn; do eval "num $x \"\$$x\""; done
    echo ": the $(gib "$ga") GiB gradient buffer becomes $(gib "$gn") GiB of slots,"
    dx=$(calc %.1f "($xa - $xn) / 1024")
    if is_true "$dx >= 0.1"; then
      printf '%s' "and the activations fall $dx GiB (backward rebuilds the norms' outputs: below)"
    elif is_true "$dx <= -0.1"; then
      printf '%s' "and the activations grow $(calc %.1f "-($dx)") GiB"
    else printf '%s' "and the activations stay as they were"; fi
    rest=$(calc %.1f "($am - $im - $ga + $gn - $xa + $xn) / 1024")
    is_true "$rest < 0.1 && $rest > -0.1" || printf '%s' "; the other items $rest GiB"
    echo "."
  else
    echo "."
  fi
  if is_true "$hidden > 0"; then
    echo "Only $hidden of AdamW's $(f1 "$ao") ms hide under"
  else   # the updates beside backward cost more than after it
    echo "None of AdamW's $(f1 "$ao") ms hides under"
  fi
  echo "backward ($(f1 "$ab") ms alone, $(f1 "$ib") ms with the updates):"
  # the rows' NVML readings over the timed steps, where measured
  ac=$(ours 2.7B 512 bf16 after_backward gpu_sm_mhz)
  ic=$(ours 2.7B 512 bf16 in_backward gpu_sm_mhz)
  icap=$(ours 2.7B 512 bf16 in_backward gpu_power_capped)
  top=$(tool value "$csv" --col gpu_sm_mhz --agg max --default "" --where status=ok)
  if [ -n "$ac" ] && [ -n "$ic" ] && [ -n "$icap" ] && is_true "$icap >= 0.5 && $top > $ac"; then
    echo "the GPU is at its power cap (NVML), its SM clock $(calc %.0f "$ac") MHz after"
    echo "backward, $(calc %.0f "$ic") in it ($(calc %.0f "$top") on small steps), so the updates slow every kernel."
  else
    echo "the update is a pass over 30 bytes a parameter at the memory's speed,"
    echo "and backward's products, which hold every SM, leave it little room."
  fi
  if [ -n "$tc" ]; then
    num tc "$tc"; num tcm "$tcm"
    echo "Against compiled PyTorch ($(f1 "$tc") ms, $tcm GiB) we are"
    echo "$(as_fast "$i" "$tc") in $(calc %.2f "$im / 1024 / $tcm")x its memory."
    # the goal's judge: the faster in-backward form, with the weight
    # gradients in bf16 (optimizer_weight_grads.csv) where measured here
    gi=$i; gim=$im; gform=""
    best=$(inbwd_best "$gpu")
    if [ -n "$best" ]; then
      set -- $best
      if is_true "$1 < $i"; then
        gi=$1; gim=$2; shift 2; gform=" ($*)"
      fi
    fi
    # the goal's numbers are the H100's; on another GPU also judge it as
    # it reads in words (against this GPU's PyTorch), and at the H100's
    # margin under PyTorch's time
    if is_true "$gi <= 95 && $gim / 1024 <= 50"; then w=met; else w="**not met**"; fi
    printf '%s' "$(f1 "$gi") ms and $(gib "$gim") GiB$gform: the goal's numbers $w"
    if [ "$GPU" != "$README_GPU" ]; then
      if is_true "$gi < $tc && $gim / 1024 <= $tcm"; then w=met; else w="**not met**"; fi
      printf '%s' "; the goal as worded, against this GPU's PyTorch ($(f1 "$tc") ms, $(calc %.1f "$tcm") GiB): $w"
      if [ -n "$gh" ]; then
        # the margin unrounded: the mark is read against a step to 0.1 ms
        mark=$(calc %.1f "95 / $gh * $tc")
        if is_true "$gi <= $mark"; then w=met; else w="**not met**"; fi
        printf '%s' ". At the $goal_kind goal's margin ($(as_fast 95 "$gh") as PyTorch) the mark here would be $mark ms: $w"
      fi
    fi
    echo "."
  fi
  echo
  # Where the time goes: each row's message has its step's time by kernel
  # family (the main stream's kernels timed by events; in backward they run
  # beside the updates, so their times include what the updates take from
  # them).
  amsg=$(ours 2.7B 512 bf16 after_backward message)
  imsg=$(ours 2.7B 512 bf16 in_backward message)
  fams=$(families "$amsg" | awk '$1 != "adamw" && $2 >= 1 { print $1 }')
  if [ -n "$fams" ]; then
    echo "The step's kernels by family, forward and backward (AdamW's left out; ms a step):"
    echo
    echo "| kernel family | AdamW after backward | AdamW in backward | more |"
    echo "|---|--:|--:|--:|"
    more=0
    for f in $fams; do
      x=$(fam "$amsg" "$f"); y=$(fam "$imsg" "$f")
      [ -n "$x" ] && [ -n "$y" ] || continue
      num "$f" "$x"; num "$f" "$y"
      echo "| $f | $(f1 "$x") | $(f1 "$y") | $(calc %+.1f "$y - $x") |"
      more=$(calc %.3f "$more + $y - $x")
    done
    echo
    mx=$(fam "$amsg" matmul); my=$(fam "$imsg" matmul)
    printf '%s' "With the updates beside backward its kernels take $(f1 "$more") ms more"
    if [ -n "$mx" ] && [ -n "$my" ]; then
      num mx "$mx"; num my "$my"
      printf '%s' "; the products slow by $(calc %.0f "($my / $mx - 1) * 100")%, and part of rmsnorm's rise is the rebuild"
    fi
    echo "."
    echo
  fi
else
  # the goal's shape failed (out of memory on a smaller GPU) or is not in
  # the sweep: say so where the answer stands
  echo "**Answer.** None yet: the goal's shape (2.7B, bf16, context 512) has no"
  echo "measured row with AdamW both after and in backward on the $GPU_KIND (failed jobs, if any, above)."
  echo
  todo "the 2.7B, bf16, context-512 step after and in backward (\`./runner experiments/optimizer_in_backward.cfg\`)"
fi
# ---- the SMs split between backward and the updates -------------------------
sms="$DATA/optimizer_in_backward_sms.csv"
echo "#### Sharing the SMs between backward and the updates"
echo
if ! has_rows "$sms"; then
  echo "_No rows yet: run \`./runner experiments/optimizer_in_backward_sms.cfg\` on a GPU._"
  echo
else
  # its 0 / 0 row repeats the table above's only on the same GPU
  o=$(from_other_gpu "$sms")
  if [ -z "$o" ]; then same_row="0 and 0: the answer's row"
  else same_row="$o, the answer's rows from the $GPU_KIND"; fi
  cat <<TEXT
Each split gives the updates \`adamw_blocks\` persistent blocks and shapes
backward's products for the SMs less \`gemm_sm_reserve\`
(experiments/optimizer_in_backward_sms.cfg; $same_row):

| AdamW blocks | SMs reserved | step (median ms) | backward + updates (mean ms) | peak (GiB) |
|--:|--:|--:|--:|--:|
TEXT
  i0=$(ours 2.7B 512 bf16 in_backward step_ms_median)
  if [ -n "$i0" ]; then
    echo "| 0 | 0 | $(f1 "$i0") | $(f1 "$(ours 2.7B 512 bf16 in_backward bwd_ms_mean)") | $(gib "$(ours 2.7B 512 bf16 in_backward engine_peak_mib)") |"
  fi
  tool select "$sms" --cols adamw_blocks,gemm_sm_reserve,step_ms_median,bwd_ms_mean,engine_peak_mib \
    --where status=ok --latest adamw_blocks,gemm_sm_reserve | sed 1d | sort -t, -k1,1n -k2,2n |
    while IFS=, read -r nb nr st bw pk; do
      echo "| $nb | $nr | $(f1 "$st") | $(f1 "$bw") | $(gib "$pk") |"
    done
  echo
  best=$(tool select "$sms" --cols step_ms_median,adamw_blocks,gemm_sm_reserve,engine_peak_mib --where status=ok \
    --latest adamw_blocks,gemm_sm_reserve | sed 1d | sort -t, -k1,1g | head -1)
  bst=${best%%,*}; r=${best#*,}; bnb=${r%%,*}; r=${r#*,}; bnr=${r%%,*}; bpk=${r#*,}
  if [ -z "$i0" ]; then
    echo "The best split, $bnb blocks for the updates and products shaped for"
    echo "$bnr SMs fewer, takes $(f1 "$bst") ms."
  elif is_true "$bst < 0.99 * $i0"; then   # less is within run-to-run noise
    echo "The best split, $bnb blocks for the updates and products shaped for"
    echo "$bnr SMs fewer, takes the step from $(f1 "$i0") to $(f1 "$bst") ms."
  else
    # "by 1%" only where the best is faster at all
    by=''
    ! is_true "$bst < $i0" || by=' by 1%'
    echo "No split beats sharing every SM ($(f1 "$i0") ms)$by: the best,"
    echo "$bnb blocks and $bnr SMs reserved, takes $(f1 "$bst") ms."
  fi
  # the goal again only where a split changes the answer above
  ! is_true "$bst <= 95 && $bpk / 1024 <= 50" ||
    echo "That split meets the goal's numbers, <= 95 ms and <= 50 GiB (set on an $goal_kind)."
  echo
  failed_jobs "$sms" adamw_blocks,gemm_sm_reserve,status,message "AdamW blocks,SMs reserved,status,message"
fi

# Every row with an anchor where PyTorch's compiled step is the faster;
# with 3xtf32 rows, a column of them (and "ours theirs" pairs for the
# sentence after the table in x3.rows).
x3f="$DATA/benchmarking_3xtf32_flash.csv"
x3col=""
has_rows "$x3f" &&
  x3col=" ours, 3xtf32 (every product fp32-accurate on TF32 tensor cores, flash) |"
rm -f "$REPORT_TMP/x3.rows"
# The shapes where PyTorch compiled beats our faster form, from the rows
# above and one select of each other file: our fused step with materialised
# attention (section 1.3.1 (b): fp32 flash runs on CUDA cores, so it may be
# the faster of ours) and, fp32 only, the same step in 3xtf32 (flash on TF32
# tensor cores), each the newest ok row on this GPU.
tcm_rows=""
[ ! -f "$DATA/torch_compile.csv" ] ||
  tcm_rows=$(tool select "$DATA/torch_compile.csv" --where status=ok --where mode=train_step \
    --where attention=materialized --where gpu_name="$gpu" --sort -utc \
    --first-of size,precision,context --cols size,context,precision,step_ms_mean --sep '|')
x3_rows=""
[ -z "$x3col" ] || x3_rows=$(tool select "$x3f" --where status=ok --where gpu_name="$gpu" \
  --sort -utc --first-of size,context --cols size,context,step_ms_median --sep '|')
loses=$({ tagged o "$ours_rows"; tagged c "$pt_rows"; tagged m "$tcm_rows"; tagged x "$x3_rows"
  tagged s "$(printf '%s\n' "$shape_list" | tr , '|')"; } |
  awk -F'|' -v x3="$x3col" -v x3f="$REPORT_TMP/x3.rows" "$AWK_CELLS"'
  $1 == "o" { o[$2 "|" $3 "|" $4 "|" $5] = $6; next }
  $1 == "c" || $1 == "m" { t[$1, $2 "|" $3 "|" $4] = $5; next }
  $1 == "x" { t["x", $2 "|" $3] = $4; next }
  { k = $2 "|" $3 "|" $4; tc = t["c", k]; a = o[k "|after_backward"]; i = o[k "|in_backward"]
    if (tc == "" || a == "" || i == "") next
    best = sprintf("%.1f", (a + 0 < i + 0) ? a : i)
    if (!(tc + 0 < best + 0)) next
    x = $4 == "fp32" && x3 != "" ? t["x", $2 "|" $3] : ""
    if (x != "") print x, tc > x3f
    printf "| %s | %s | %s | %s | %s | %s |%s\n", $2, $4, $3, best, f1(tc), f1(t["m", k]),
      x3 == "" ? "" : " " f1(x) " |" }')
if [ -n "$loses" ]; then
  echo "**Where we lose on time** (PyTorch compiled the faster; step, median ms):"
  echo
  echo "| size | precision | context | ours, flash attention | PyTorch compiled | ours, materialised attention (section 1.3.1 (b); mean) |$x3col"
  echo "|---|---|--:|--:|--:|--:|${x3col:+--:|}"
  echo "$loses"
  echo
  if [ -n "$x3col" ]; then
    printf '%s' "PyTorch's fp32 SDPA multiplies in 3xTF32 (appendix A); so do we in the last column"
    # each pair as as_fast reads it: PyTorch's time over ours
    if [ -s "$REPORT_TMP/x3.rows" ]; then
      awk "$FACTOR_AWK"'{ n++; r = $2 / $1; if (r > 1) w++; if (!lo || r < lo) lo = r; if (r > hi) hi = r }
        END { printf ": faster at %d of %d shapes, %sx to %sx as fast.", w, n, factor(lo), factor(hi) }' \
        "$REPORT_TMP/x3.rows"
    else printf '.'; fi
    printf '\n\n'
  fi
  rm -f "$REPORT_TMP/x3.rows"
fi

# ---- where the bytes of the peak go --------------------------------------------
# (la, li, pa, pi: read above, for the answer)
if [ -n "$la" ] && [ -n "$li" ]; then
  cat <<TEXT
The peak by item (2.7B, bf16, context 512; MiB, from the engine's
allocation log at its largest):

| item | AdamW after backward | AdamW in backward | what it is |
|---|--:|--:|---|
TEXT
  printf '%s\n' "$pa" | while IFS=, read -r k va; do
    vi=$(printf '%s\n' "$pi" | awk -F, -v k="$k" '$1 == k { print $2 }')
    case $k in
      params) w="fp32 weights (4 bytes a parameter) and their bf16 copy the products read (2)" ;;
      grads) w="fp32 gradients: the whole buffer after backward; in backward two slots of a layer's size (one larger where the head or the embedding is), which the head and the embedding use too" ;;
      optimizer) w="AdamW's two fp32 moments (8 bytes a parameter)" ;;
      activations) w="what forward saves for backward (per layer: the input, q, k, v, o, the FFN's two projections and more) and backward's scratch" ;;
      workspace) w="cuBLAS's workspace" ;;
      *) w="everything else" ;;
    esac
    echo "| $k | $va | $(d "$vi") | $w |"
  done
  echo
  echo "The weights' two copies and the moments are fp32 AdamW's floor; the"
  echo "activations remain to cut (model/model.c lists what forward saves)."
  echo
fi
# ---- AdamW inside the products (optimizer_in_products.csv) -------------------
ip="$DATA/optimizer_in_products.csv"
echo "#### AdamW inside the weight-gradient products"
echo
cat <<TEXT
\`optimizer = "in_products"\` (experiments/optimizer_in_products.cfg;
kernels/cuda/NOTES.md) updates each weight matrix inside the product that
makes its gradient, which never reaches memory: 26 bytes of traffic a
parameter, not 34.
TEXT
echo
if has_rows "$ip"; then
  ipgpu=$(tool value "$ip" --agg first --where status=ok --col gpu_name)
  if [ "$ipgpu" = "$gpu" ]; then
    echo "Step (ms) and peak (GiB), bf16:"
    echo
    echo "| size | context | after backward | in backward | in the products |"
    echo "|---|--:|--:|--:|--:|"
  else
    echo "Step (ms) and engine peak (GiB), bf16, on $ipgpu (the other forms' rows"
    echo "are on $gpu: not compared):"
    echo
    echo "| size | context | in the products |"
    echo "|---|--:|--:|"
  fi
  wins="$REPORT_TMP/in_products_wins"
  : > "$wins"
  # each shape's newest ok row (adamw_blocks 0), beside ours (the rows
  # above); $wins: the shapes where updating in the products is the fastest
  ip_rows=$(tool select "$ip" --where status=ok --where adamw_blocks=0 --sort -utc \
    --first-of size,context --cols size,context,step_ms_median,engine_peak_mib --sep '|')
  { tagged o "$ours_rows"; tagged p "$ip_rows"
    tagged s "$(tool distinct "$ip" --cols size,context --sep '|' --where status=ok)"; } |
    awk -F'|' -v same="$([ "$ipgpu" = "$gpu" ] && echo 1 || echo 0)" -v winf="$wins" "$AWK_CELLS"'
    $1 == "o" { k = $2 "|" $3 "|" $4 "|" $5; st[k] = $6; pk[k] = $7; next }
    $1 == "p" { k = $2 "|" $3; ps[k] = $4; pp[k] = $5; next }
    { k = $2 "|" $3; x = ps[k]; ipc = f1(x) ", " gib(pp[k])
      if (!same) { printf "| %s | %s | %s |\n", $2, $3, ipc; next }
      a = k "|bf16|after_backward"; i = k "|bf16|in_backward"
      printf "| %s | %s | %s, %s | %s, %s | %s |\n", $2, $3, f1(st[a]), gib(pk[a]), f1(st[i]), gib(pk[i]), ipc
      if (x != "" && st[a] != "" && st[i] != "" && x + 0 < st[a] + 0 && x + 0 < st[i] + 0) print $2, $3 > winf
    }'
  echo
  if [ "$ipgpu" = "$gpu" ]; then
    # "2.7B at contexts 128 and 256; xl at context 512", sizes in table order
    where=$(awk '{ if (!($1 in c)) o[++n] = $1; c[$1] = c[$1] (c[$1] == "" ? "" : ",") $2; k[$1]++ }
      END { for (i = 1; i <= n; i++) { s = o[i]; m = split(c[s], x, ","); t = x[1]
              for (j = 2; j <= m; j++) t = t (j == m ? " and " : ", ") x[j]
              printf "%s%s at context%s %s", (i > 1 ? "; " : ""), s, (m > 1 ? "s" : ""), t } }' "$wins")
    if [ -z "$where" ]; then
      echo "Updating in the products wins nowhere: its products slow by more"
      echo "than the traffic saves."
    else
      echo "Updating in the products wins only at $where; elsewhere its"
      echo "products slow by more than the traffic saves."
    fi
    echo
  fi
fi
if [ -f "$ip" ]; then
  failed_jobs "$ip" size,context,status,message "size,context,status,message"
else
  echo "_No rows yet: run \`./runner experiments/optimizer_in_products.cfg\` on a GPU._"
  echo
fi
# ---- bf16 weight gradients (optimizer_weight_grads.csv) -----------------------
wg="$DATA/optimizer_weight_grads.csv"
echo "#### Weight gradients in bf16"
echo
cat <<TEXT
\`weight_grads = "compute"\` (experiments/optimizer_weight_grads.cfg)
stores weight gradients in bf16, rounded once as autocast's are: AdamW in
backward moves 28 bytes a parameter, not 30.
TEXT
echo
if has_rows "$wg"; then
  wggpu=$(tool value "$wg" --agg first --where status=ok --col gpu_name)
  echo "In backward, bf16, $wggpu (ms, GiB, SM MHz); last, bf16 gradients"
  echo "updated on backward's stream (\`adamw_overlap = false\`):"
  echo
  echo "| size | context | fp32 gradients | bf16 gradients | change | on backward's stream | change |"
  echo "|---|--:|--:|--:|--:|--:|--:|"
  # Each shape's newest ok row per gradient dtype and updates' stream (rows
  # from before the adamw_overlap column are all beside backward), joined by
  # awk: the table, then how often backward's stream wins (bf16 gradients).
  ovc=""
  ! has_col "$wg" adamw_overlap || ovc=adamw_overlap,
  wg_rows=$(tool select "$wg" --where status=ok --sort -utc --first-of "size,context,weight_grads${ovc:+,adamw_overlap}" \
    --cols "size,context,weight_grads,${ovc}step_ms_median,engine_peak_mib,gpu_sm_mhz" --sep '|')
  { tagged r "$wg_rows"; tagged s "$(tool distinct "$wg" --cols size,context --sep '|' --where status=ok)"; } |
    awk -F'|' -v hasov="${ovc:+1}" "$AWK_CELLS"'
    function wcell(k) { return f1(st[k]) ", " gib(pk[k]) ", " fmt("%.0f", mz[k]) }
    $1 == "r" { if (hasov) { k = $2 "|" $3 "|" $4 "|" $5; c = 6 } else { k = $2 "|" $3 "|" $4 "|true"; c = 5 }
                st[k] = $c; pk[k] = $(c + 1); mz[k] = $(c + 2); next }
    { k = $2 "|" $3; f32 = k "|fp32|true"; b = k "|compute|true"; q = k "|compute|false"
      cq = st[q] == "" ? "-" : wcell(q)
      printf "| %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, wcell(f32), wcell(b), pct(st[b], st[f32]), cq, pct(st[q], st[b])
      if (st[b] != "" && st[q] != "") { n++; w += st[q] + 0 < st[b] + 0 } }
    END { print ""; if (n) printf "On backward'"'"'s stream the step is faster at %d of %d shapes.\n\n", w, n }'
fi
if [ -f "$wg" ]; then
  failed_jobs "$wg" size,context,weight_grads,status,message "size,context,weight_grads,status,message"
else
  echo "_No rows yet: run \`./runner experiments/optimizer_weight_grads.cfg\` on a GPU._"
  echo
fi
# ---- norms kept for backward (optimizer_keep_norms.csv) -----------------------
kn="$DATA/optimizer_keep_norms.csv"
echo "#### Keeping the norms' outputs"
echo
cat <<TEXT
\`keep_norms = true\` (experiments/optimizer_keep_norms.cfg): forward
keeps the norms' outputs and the residual after attention, 8 x d_model
bytes a token a layer, sparing backward two norm passes and a product.
TEXT
echo
if has_rows "$kn"; then
  kngpu=$(tool value "$kn" --agg first --where status=ok --col gpu_name)
  echo "Bf16 weight gradients, $kngpu (ms, GiB):"
  echo
  echo "| size | context | rebuilt | kept | change |"
  echo "|---|--:|--:|--:|--:|"
  # each shape's newest ok row, norms rebuilt and kept, joined by awk: the
  # table, then how often keeping wins
  kn_rows=$(tool select "$kn" --where status=ok --sort -utc --first-of size,context,keep_norms \
    --cols size,context,keep_norms,step_ms_median,engine_peak_mib --sep '|')
  { tagged r "$kn_rows"; tagged s "$(tool distinct "$kn" --cols size,context --sep '|' --where status=ok)"; } |
    awk -F'|' "$AWK_CELLS"'
    $1 == "r" { k = $2 "|" $3 "|" $4; st[k] = $5; pk[k] = $6; next }
    { k = $2 "|" $3; r = st[k "|false"]; kk = st[k "|true"]
      if (r != "" && kk != "") { n++; w += kk + 0 < r + 0 }
      printf "| %s | %s | %s, %s | %s, %s | %s |\n", $2, $3, f1(r), gib(pk[k "|false"]), f1(kk), gib(pk[k "|true"]), pct(kk, r) }
    END { print ""; if (n) printf "Kept, the step is faster at %d of %d shapes.\n\n", w, n }'
fi
if [ -f "$kn" ]; then
  failed_jobs "$kn" size,context,keep_norms,status,message "size,context,keep_norms,status,message"
else   # a variant's table: the section itself is measured
  echo "_No rows yet: run \`./runner experiments/optimizer_keep_norms.cfg\` on a GPU._"
  todo "optimizer_keep_norms.csv (\`./runner experiments/optimizer_keep_norms.cfg\`)"
  echo
fi
