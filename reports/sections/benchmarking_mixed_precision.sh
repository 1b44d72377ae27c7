#!/bin/sh
# Writeup section benchmarking_mixed_precision (c): per model size, the
# forward, forward+backward and full training step times in fp32, bf16 and
# fp16, the speed-up over fp32, next to PyTorch's eager anchors
# (reports/anchors/lm_pytorch.csv) and the strongest PyTorch's
# (reports/anchors/torch_lm.csv, torch.compile), both on our rows' GPU. mkreport.sh prints the
# problem's heading; toy_dtypes.sh parts (a) and (b), this part (c).
# Reads DATA/benchmarking_mixed_precision.csv
# (rows of kind lm; columns are selected by name, never by position).
# Environment as for every section (mkreport.sh): DATA, CSV, OUT, CSVTOOL.
set -eu
. "$REPORT_LIB"
csv="${CSV:-$DATA/benchmarking_mixed_precision.csv}"

renders benchmarking_mixed_precision
require_rows "$csv" benchmarking_mixed_precision "on a GPU"
echo "### (c) Full against mixed precision: step times"
echo
on_gpu "$csv"
anchor=$(anchor_rows lm_pytorch)
strong=$(anchor_rows torch_lm)
gpus=$(tool distinct "$csv" --cols gpu_name --where status=ok | awk 'NF { printf "%s%s", (n++ ? ", " : ""), $0 }')
cat <<TEXT
Means over the timed steps of \`lm\` jobs (op by op, as benchmarking_script):
forward, forward + backward, and the training step with AdamW. bf16 and
fp16 round every product's inputs and accumulate in fp32; weights,
gradients and optimizer state stay fp32. "x fp32": the fp32 time over this
TEXT
if has_anchor "$anchor"; then
  echo "one (above 1: faster). PyTorch: the course reference in eager mode on the"
  echo "same GPU (reports/anchors/lm_pytorch.csv) where measured."
else
  echo "one (above 1: faster)."
  anchor_missing "eager numbers" are reports/anchors/torch_lm_reference.py reports/anchors/lm_pytorch.csv
fi
echo "GPU: $gpus."
echo
echo "| size | context | precision | forward (ms) | x fp32 | fwd+bwd (ms) | x fp32 | step (ms) | x fp32 | PyTorch fwd / fwd+bwd / step (ms) |"
echo "|---|--:|---|--:|--:|--:|--:|--:|--:|---|"
# time SIZE CONTEXT PRECISION MODE COLUMN: the latest ok row's value
# (%.2f), or "".
memo T "$csv" size,context,precision,mode \
  fwd_ms_mean,step_ms_mean,opt_ms_mean,gpu_name,loss_scale,skipped_steps --where status=ok --sort -utc
time_of() { memo_get T "$@"; memo_fmt %.2f "$MV"; }
# the eager anchor's time_ms, the first row of each job
memo A "$anchor" size,context,precision,mode time_ms --where config=reference
ratio() { # fp32 time / this time
  if [ -n "$1" ] && [ -n "$2" ]; then awk "BEGIN { printf \"%.2f\", $1 / $2 }"; else printf -- '-'; fi
}
pt() {
  v=""
  # an older row of another GPU, left by a partial re-run, meets no anchor
  [ "$(time_of "$1" "$2" "$3" "$4" gpu_name)" = "$GPU" ] &&
    { memo_get A "$1" "$2" "$3" "$4" time_ms; v=$MV; }
  printf '%s' "${v:--}"
}
tool distinct "$csv" --cols params,size,context --where status=ok --sort params,context --sep '|' |
while IFS='|' read -r _ size ctx; do
  [ -n "$size" ] || continue
  f32=$(time_of "$size" "$ctx" fp32 forward fwd_ms_mean)
  b32=$(time_of "$size" "$ctx" fp32 forward_backward step_ms_mean)
  s32=$(time_of "$size" "$ctx" fp32 train_step step_ms_mean)
  for prec in fp32 bf16 fp16; do
    f=$(time_of "$size" "$ctx" $prec forward fwd_ms_mean)
    b=$(time_of "$size" "$ctx" $prec forward_backward step_ms_mean)
    s=$(time_of "$size" "$ctx" $prec train_step step_ms_mean)
    [ -n "$f$b$s" ] || continue
    echo "| $size | $ctx | $prec | ${f:--} | $(ratio "$f32" "$f") | ${b:--} | $(ratio "$b32" "$b") | ${s:--} | $(ratio "$s32" "$s") | $(pt "$size" "$ctx" $prec forward) / $(pt "$size" "$ctx" $prec forward_backward) / $(pt "$size" "$ctx" $prec train_step) |"
  done
done
echo

failed_jobs "$csv" size,context,precision,mode,status,message \
  "size,context,precision,mode,status,message"
# sizes SIZE|CONTEXT, one a line, by parameter count
sizes() {
  tool distinct "$csv" --cols params,size,context --where status=ok --sort params,context --sep '|' |
    cut -d'|' -f2-
}
# spread PREC MODE COL: "n faster lo hi" of PREC against bf16 over the sizes
# with both (the times as the table shows them): n sizes, in how many PREC
# is faster, the lowest and highest bf16 / PREC time (PREC's speed as a
# multiple of bf16's).
spread() {
  sizes | while IFS='|' read -r sz cx; do
    a=$(time_of "$sz" "$cx" bf16 "$2" "$3")
    h=$(time_of "$sz" "$cx" "$1" "$2" "$3")
    if [ -n "$a" ] && [ -n "$h" ]; then printf '%s %s\n' "$a" "$h"; fi
  done | awk '{ r = $1 / $2; n++; if ($2 < $1) f++
                if (n == 1 || r < lo) lo = r; if (n == 1 || r > hi) hi = r }
              END { printf "%d %d %.6f %.6f\n", n, f, lo, hi }'
}
# fp16_vs MODE COL NAME: fp16 against bf16 for one mode, in words
same16=2   # fp16 and bf16 "about the same": within this many % at every size
fp16_vs() {
  read -r vn vf vlo vhi <<SPREAD
$(spread fp16 "$1" "$2")
SPREAD
  if [ "$vn" -eq 0 ]; then return; fi
  if [ "$vn" -eq 1 ]; then every="at the one size measured"; else every="at every size"; fi
  lo=$(factor "$vlo"); hi=$(factor "$vhi")
  if [ "$lo" = "$hi" ]; then vr="${lo}x as fast as bf16"; else vr="${lo}x to ${hi}x as fast as bf16"; fi
  if is_true "$vlo >= 1 / (1 + $same16 / 100) && $vhi <= 1 + $same16 / 100"; then
    printf '%s: about the same, fp16 within %s%% of bf16 %s (%s)' "$3" "$same16" "$every" "$vr"
  elif [ "$vf" -eq 0 ]; then
    printf '%s: fp16 slower %s, %s' "$3" "$every" "$vr"
  elif [ "$vf" -eq "$vn" ]; then
    printf '%s: fp16 faster %s, %s' "$3" "$every" "$vr"
  else
    printf '%s: fp16 %s, faster at %s of %s sizes' "$3" "$vr" "$vf" "$vn"
  fi
}
fwdw=$(fp16_vs forward fwd_ms_mean forward)
fbw=$(fp16_vs forward_backward step_ms_mean "forward + backward")
stw=$(fp16_vs train_step step_ms_mean "training step")
# the step's speed-up over fp32 from the smallest to the largest size
growth() { # growth PREC: "first last rising" of fp32 / PREC train step
  sizes | while IFS='|' read -r sz cx; do
    a=$(time_of "$sz" "$cx" fp32 train_step step_ms_mean)
    h=$(time_of "$sz" "$cx" "$1" train_step step_ms_mean)
    if [ -n "$a" ] && [ -n "$h" ]; then printf '%s %s\n' "$a" "$h"; fi
  done | awk '{ r = sprintf("%.2f", $1 / $2); n++; if (n == 1) f = r; else if (r + 0 <= l + 0) up = 0; l = r }
              END { if (n > 1) printf "%s %s %d\n", f, l, (up != "0") }'
}
gb=$(growth bf16)
gh=$(growth fp16)
gw=$(while read -r gp gfirst glast gup; do
  [ -n "$glast" ] || continue
  if [ "$gup" -eq 1 ]; then w="grows with each size"; else w="does not grow at every size"; fi
  printf ' %s: it %s, %sx to %sx as fast as fp32.' "$gp" "$w" "$gfirst" "$glast"
done <<GROWTH
bf16 $gb
fp16 $gh
GROWTH
)
{ echo "**Answer.** With 16-bit inputs the products, which dominate the larger"
  echo "models, run several times faster than true fp32, while the fp32"
  echo "elementwise work and launches that also bound the small model do not"
  echo "change, so the training step's speed-up over fp32 should grow with size.$gw"
} | fold -s -w 76 | sed 's/ *$//'
echo
if [ -n "$fwdw$fbw$stw" ]; then
  echo "fp16 against bf16, from the times above:"
  echo
  printf '%s\n' "$fwdw" "$fbw" "$stw" | awk 'NF { print "- " $0 "." }'
  echo
  nopt=0 nhalf=0 odlo='' odhi='' scales='' skips=0
  while IFS='|' read -r sz cx; do
    [ -n "$sz" ] || continue
    ob=$(time_of "$sz" "$cx" bf16 train_step opt_ms_mean)
    oh=$(time_of "$sz" "$cx" fp16 train_step opt_ms_mean)
    sb=$(time_of "$sz" "$cx" bf16 train_step step_ms_mean)
    sh16=$(time_of "$sz" "$cx" fp16 train_step step_ms_mean)
    if [ -z "$ob" ] || [ -z "$oh" ] || [ -z "$sb" ] || [ -z "$sh16" ]; then continue; fi
    memo_get T "$sz" "$cx" fp16 train_step loss_scale; ls16=$(memo_fmt %.0f "$MV")
    memo_get T "$sz" "$cx" fp16 train_step skipped_steps; sk16=$(memo_fmt %.0f "$MV")
    od=$(calc %.2f "$oh - $ob")
    sd=$(calc %.2f "$sh16 - $sb")
    nopt=$((nopt + 1))
    if is_true "$sd > 0 && $od >= $sd / 2"; then nhalf=$((nhalf + 1)); fi
    if [ -z "$odlo" ] || is_true "$od < $odlo"; then odlo=$od; fi
    if [ -z "$odhi" ] || is_true "$od > $odhi"; then odhi=$od; fi
    case " $scales " in *" $(d "$ls16") "*) ;; *) scales="${scales:+$scales }$(d "$ls16")" ;; esac
    case $sk16 in '' | *[!0-9]*) ;; *) skips=$((skips + sk16)) ;; esac
  done <<SIZES
$(sizes)
SIZES
  if [ "$nopt" -gt 0 ]; then
    { echo "fp16's narrow range needs dynamic loss scaling: before AdamW one pass"
      echo "over every gradient divides it by the scale and checks it for inf/NaN;"
      echo "bf16 needs none. That pass grows the optimizer"
      echo "phase by $(span_to "$odlo" "$odhi") ms, at least half of fp16's extra step time at"
      echo "$nhalf of $nopt sizes (loss scale $(printf '%s' "$scales" | sed 's/ /, /g'), $skips steps skipped)."
    } | fold -s -w 76 | sed 's/ *$//'
  fi
  echo
fi

# ---- against the strongest PyTorch ----------------------------------------------
# torch.compile + SDPA + fused AdamW, measured side by side
# (torch_lm.csv): its own fp32 -> bf16 gain, and ours, per size.
sc() { # SIZE PREC: torch.compile's train step (ms) at context 512, or ""
  pt_compiled "$strong" "$1" 512 "$2" step_ms_mean
}
lines=""
for sz in small 2.7B; do
  c32=$(sc "$sz" fp32); c16=$(sc "$sz" bf16)
  o32=$(time_of "$sz" 512 fp32 train_step step_ms_mean); o16=$(time_of "$sz" 512 bf16 train_step step_ms_mean)
  [ "$(time_of "$sz" 512 fp32 train_step gpu_name)|$(time_of "$sz" 512 bf16 train_step gpu_name)" = "$GPU|$GPU" ] || o32=""
  [ -n "$c32" ] && [ -n "$c16" ] && [ -n "$o32" ] && [ -n "$o16" ] || continue
  extra=""
  # small bf16: a stronger published step where measured on this GPU
  # (published.csv: torch_lm.py's H100 rows are launch-bound)
  ps=$(published_on torch_compile_small_bf16_step)
  if [ "$sz" = small ] && [ -n "$ps" ] && is_true "$ps < $c16"; then
    extra=" ($(calc %.2f "$o16 / $ps") x the stronger $ps ms of reports/anchors/published.csv)"
  fi
  lines="$lines- $sz: torch.compile $(calc %.2f "$c32 / $c16")x ($(calc %.1f "$c32") -> $(calc %.1f "$c16") ms), ours $(calc %.2f "$o32 / $o16")x ($o32 -> $o16 ms); our bf16 step: $(verdict "$o16" "$c16")$extra.
"
done
if [ -n "$lines" ]; then
  echo "bf16's gain in the train step (context 512), ours op by op against"
  echo "torch.compile + SDPA + fused AdamW's (torch_lm.csv; our fused path: 1.3.1 (b)):"
  echo
  printf '%s' "$lines"
  echo
elif ! has_anchor "$strong"; then
  anchor_missing "torch.compile step" is reports/anchors/torch_lm.py reports/anchors/torch_lm.csv --sizes small,2.7B --precisions bf16,fp32
  echo
fi
