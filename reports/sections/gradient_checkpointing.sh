#!/bin/sh
# Writeup section gradient_checkpointing (the 2026 edition's 3.2): (a) the
# memory-optimal arrangement of checkpoints, argued; (b) one level of
# checkpoint groups measured (experiments/gradient_checkpointing.cfg, kind
# lm, run.checkpoint_layers): per group size the peak, the activations'
# bytes (the rows' samples: mem_activations_mib) and the step time, with
# the group size the sizes predict, beside PyTorch's torch.compile with
# torch.utils.checkpoint on the same GPU (reports/anchors/torch_lm.py,
# configs compiled_ckptK). Environment as for every section.
set -eu
. "$REPORT_LIB"

csv=$CSV
jsonl="${csv%.csv}.samples.jsonl"

cat <<'TEXT'
### (a) The lowest peak, whatever the compute

Nest checkpoints as a chain (below): the outer one keeps only the model's
input, and its rerun in backward checkpoints blocks 1 .. N - 1 the same
way, so only block N's residuals are saved; then blocks 1 .. N - 2 rerun
for block N - 1, and so on. The peak is one block's residuals plus a few
boundary tensors, **O(1)**, for **O(N^2) compute**: block k runs
N - k + 2 times (block 1: N + 1). Recursive halving is the usual
middle: O(log N) memory, O(N log N) compute.

```python
def run(blocks, x):                 # blocks 1..k, checkpointed as a chain
    if len(blocks) == 1:
        return blocks[0](x)
    h = checkpoint(run, blocks[:-1], x, use_reentrant=False)
    return blocks[-1](h)

y = checkpoint(run, model.blocks, x, use_reentrant=False)
```

TEXT

echo "### (b) One level of checkpoints on the 2.7B model"
echo
require_rows "$csv" gradient_checkpointing "on a GPU"
on_gpu "$csv"
anchor=$(anchor_rows torch_lm)
one() { tool value "$csv" --agg first --where status=ok --col "$1"; }
size=$(one size) context=$(one context) batch=$(one batch)
case $size in
  2.7B) dmodel=2560 layers=32 ;;
  *) echo "${0##*/}: $csv: size $size (this section reads the 2.7B's rows)" >&2; exit 1 ;;
esac

# row PREC OPT K COL: the latest ok row's COL, or "".
memo R "$csv" precision,optimizer,checkpoint_layers engine_peak_mib,step_ms_mean,fwd_ms_mean \
  --where status=ok --sort -utc
row() { memo_get R "$@"; printf '%s\n' "$MV"; }
# sline PREC OPT K: the job's latest samples line.
sline() { sample_line "$jsonl" precision="$1" optimizer="$2" checkpoint_layers="$3"; }
# acts PREC OPT K: the activations' MiB (one allocation, made with the
# model: the largest mem_activations_mib of the job's samples), or "".
acts() {
  sample_list "$(sline "$@")" mem_activations_mib |
    awk '$1 + 0 > m { m = $1 + 0 } END { if (NR) printf "%.1f\n", m }'
}
# input MiB: one group input, the fp32 residual stream of the batch
in_mib=$(calc %.1f "4 * $batch * $context * $dmodel / 1048576")
ks=$(tool distinct "$csv" --cols checkpoint_layers --where status=ok --sort checkpoint_layers)
has_inbwd=$(tool count "$csv" --where status=ok --where optimizer=in_backward)
# the in-backward steps keeping the norms' outputs (keep_norms), where run
kcsv="$DATA/gradient_checkpointing_keep_norms.csv"
has_keep=0
! has_rows "$kcsv" || has_keep=1
# rowk PREC K COL: that run's latest ok row's COL, or "".
[ $has_keep -eq 0 ] ||
  memo K "$kcsv" precision,checkpoint_layers engine_peak_mib,step_ms_mean --where status=ok --sort -utc
rowk() {
  [ $has_keep -eq 1 ] || return 0
  memo_get K "$@"; printf '%s\n' "$MV"
}

cat <<TEXT
The 2026 handout's xl (d_model $dmodel, $layers layers: our 2.7B), batch $batch,
context $context, fused path, FlashAttention-2, $GPU.
\`checkpoint_layers = k\` keeps one group of k layers' activations at a
time plus each later group's input; backward reruns every group's forward
but the last's, once, never nested, with the same gradients bit for bit.
Groups of k save about k s_layer + ($layers / k) s_input, least at
k = sqrt($layers s_input / s_layer), with s_input the fp32 residual stream
($(calc %.0f "$in_mib") MiB) and s_layer the rest of a layer (activations at k = 0 less
k = 1, over $((layers - 1)) layers). GiB and ms (mean step; the summary quotes medians); AdamW after backward.

TEXT

for prec in $(tool distinct "$csv" --cols precision --where status=ok --sort -precision); do
  o=after_backward
  a0=$(acts "$prec" $o 0) a1=$(acts "$prec" $o 1)
  p0=$(row "$prec" $o 0 engine_peak_mib) s0=$(row "$prec" $o 0 step_ms_mean)
  echo "$prec:"
  echo
  if [ "$has_inbwd" -gt 0 ] && [ $has_keep -eq 1 ]; then
    echo "| k (layers a group) | groups | activations | peak | step | step against none | peak, in backward | step, in backward | peak, in backward, norms kept | step, in backward, norms kept |"
    echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  elif [ "$has_inbwd" -gt 0 ]; then
    echo "| k (layers a group) | groups | activations | peak | step | step against none | peak, in backward | step, in backward |"
    echo "|--:|--:|--:|--:|--:|--:|--:|--:|"
  else
    echo "| k (layers a group) | groups | activations | peak | step | step against none |"
    echo "|--:|--:|--:|--:|--:|--:|"
  fi
  best='' bestp=''
  for k in $ks; do
    pk=$(row "$prec" $o "$k" engine_peak_mib) sm=$(row "$prec" $o "$k" step_ms_mean)
    [ -n "$pk" ] || continue
    num "peak" "$pk"
    num "step" "$sm"
    ac=$(acts "$prec" $o "$k")
    if [ "$k" = 0 ] || [ "$k" -ge "$layers" ]; then g=1; else g=$(( (layers + k - 1) / k )); fi
    rel='-'
    [ -z "$s0" ] || [ "$k" = 0 ] || rel="$(calc %.2f "$sm / $s0")x"
    line="| $k | $g | $(gib "$ac") | $(gib "$pk") | $(f1 "$sm") | $rel |"
    [ "$has_inbwd" -eq 0 ] ||
      line="$line $(gib "$(row "$prec" in_backward "$k" engine_peak_mib)") | $(f1 "$(row "$prec" in_backward "$k" step_ms_mean)") |"
    [ "$has_inbwd" -eq 0 ] || [ $has_keep -eq 0 ] ||
      line="$line $(gib "$(rowk "$prec" "$k" engine_peak_mib)") | $(f1 "$(rowk "$prec" "$k" step_ms_mean)") |"
    echo "$line"
    if [ "$k" != 0 ] && { [ -z "$bestp" ] || is_true "$pk < $bestp"; }; then best=$k bestp=$pk; fi
  done
  echo
  [ -n "$a0" ] && [ -n "$a1" ] && [ -n "$best" ] && [ -n "$p0" ] && [ -n "$s0" ] || continue
  # a layer's tensors but its input: A(0) - A(1) = (L - 1) s_layer
  sl=$(calc %.1f "($a0 - $a1) / ($layers - 1)")
  kstar=$(calc %.1f "sqrt($layers * $in_mib / $sl)")
  lo=$(printf '%s\n' $ks | sort -rn | awk -v b="$best" '$1 > 0 && $1 < b { print; exit }')
  hi=$(printf '%s\n' $ks | sort -n | awk -v b="$best" '$1 > b { print; exit }')
  sb=$(row "$prec" $o "$best" step_ms_mean)
  # with AdamW in backward too: its lowest peak
  ib='' ibp=''
  for k in $ks; do
    pk=$(row "$prec" in_backward "$k" engine_peak_mib)
    [ "$k" != 0 ] && [ -n "$pk" ] || continue
    if [ -z "$ibp" ] || is_true "$pk < $ibp"; then ib=$k ibp=$pk; fi
  done
  printf '%s' "**$prec: k = $best gives the lowest peak, $(gib "$bestp") GiB against $(gib "$p0") without**"
  # the next smaller and larger group, as the handout asks
  nb=''
  [ -z "$lo" ] || nb="k = $lo: $(gib "$(row "$prec" $o "$lo" engine_peak_mib)")"
  [ -z "$hi" ] || nb="${nb:+$nb, }k = $hi: $(gib "$(row "$prec" $o "$hi" engine_peak_mib)")"
  [ -z "$ib" ] || nb="${nb:+$nb; }AdamW in backward: $(gib "$ibp") at k = $ib"
  [ -z "$nb" ] || printf '%s' " ($nb)"
  echo "; the sizes predict k = $kstar (s_layer = $(calc %.0f "$sl") MiB)."
  # why s_layer is small: what our fused layer does not keep
  [ "$prec" != fp32 ] || echo "A layer keeps little: flash attention keeps no scores, and norms, merged heads and SwiGLU's product are rebuilt."
  echo "The rerun adds $(calc %.0f "($sb / $s0 - 1) * 100")% to the step, about one forward ($(calc %.0f "$(row "$prec" $o 0 fwd_ms_mean) / $s0 * 100")% of it)."
  echo
done
if [ "$has_inbwd" -gt 0 ] && [ $has_keep -eq 0 ]; then
  # a variant's columns: the section itself is measured
  echo "_keep_norms in backward: no rows yet (\`./runner experiments/gradient_checkpointing_keep_norms.cfg\`)._"
  todo "gradient_checkpointing_keep_norms.csv (\`./runner experiments/gradient_checkpointing_keep_norms.cfg\`)"
  echo
elif [ -f "$kcsv" ]; then
  failed_jobs "$kcsv" precision,checkpoint_layers,status,message "precision,checkpoint_layers,status,message"
fi

# The tables as a figure: peak and step time against k.
if [ -n "$GNUPLOT" ]; then
  tmp="$REPORT_TMP/checkpointing.csv"
  {
    echo "series,k,peak_gib,step_rel,none_gib"
    for prec in $(tool distinct "$csv" --cols precision --where status=ok --sort -precision); do
      for o in after_backward in_backward; do
        p0=$(row "$prec" $o 0 engine_peak_mib) s0=$(row "$prec" $o 0 step_ms_mean)
        [ -n "$p0" ] && [ -n "$s0" ] || continue
        case $o in after_backward) ow="AdamW after backward" ;; *) ow="AdamW in backward" ;; esac
        for k in $ks; do
          [ "$k" != 0 ] || continue
          pk=$(row "$prec" $o "$k" engine_peak_mib) sm=$(row "$prec" $o "$k" step_ms_mean)
          [ -n "$pk" ] || continue
          echo "$prec; $ow,$k,$(calc %.2f "$pk / 1024"),$(calc %.3f "$sm / $s0"),$(calc %.2f "$p0 / 1024")"
        done
      done
    done
  } > "$tmp"
  "$GNUPLOT" -c "$REPORTS/checkpointing.gp" "$tmp" "$OUT/gradient_checkpointing.svg" \
    "The $size at context $context, batch $batch, on $GPU_KIND: checkpoint groups of k layers"
  echo "![Peak memory and step time against the checkpoint group size](gradient_checkpointing.svg)"
  echo
  echo "_Peak (left; dashed: no checkpoints) and step time against none (right), log k._"
  echo
fi

# Where the bytes of the peak go, bf16 at the best group.
lb=$(sline bf16 after_backward 1)
if [ -n "$lb" ]; then
  items=$(peak_items "$lb")
  it() { printf '%s\n' "$items" | awk -F, -v k="$1" '$1 == k { printf "%.1f", $2 / 1024 }'; }
  echo "What the peak holds (bf16, k = 1, GiB):"
  echo
  echo "| fp32 weights and bf16 copy | fp32 gradients | AdamW's moments | activations |"
  echo "|--:|--:|--:|--:|"
  echo "| $(it params) | $(it grads) | $(it optimizer) | $(it activations) |"
  echo
  echo "Our peak is their sum; PyTorch frees activations as backward makes"
  echo "gradients and keeps no bf16 copy of the weights."
  echo
fi
[ "$has_inbwd" -gt 0 ] || echo "AdamW in backward would drop the gradient buffer too."
failed_jobs "$csv" precision,optimizer,checkpoint_layers,status,message \
  "precision,optimizer,k,status,message"

# PyTorch with torch.utils.checkpoint on the same GPU.
memo P "$anchor" size,context,precision,config step_ms_median,peak_gib --where status=ok
pt() { # CONFIG PREC COL
  memo_get P "$size" "$context" "$2" "$1" "$3"; printf '%s\n' "$MV"
}
ptc=$(tool distinct "$anchor" --cols config --where size="$size" --where context="$context" |
  grep -E '^compiled(_ckpt[0-9]+)?$' || true)
if [ -z "$ptc" ]; then
  anchor_missing "checkpointed steps" are reports/anchors/torch_lm.py reports/anchors/torch_lm.csv \
    --sizes "$size" --contexts "$context" --precisions bf16,fp32 \
    --configs compiled,compiled_ckpt1,compiled_ckpt2,compiled_ckpt4
  echo
  exit 0
fi
echo "PyTorch on the same GPU (reports/anchors/torch_lm.py: torch.compile, SDPA,"
echo "fused AdamW, k blocks a torch.utils.checkpoint call; max_memory_allocated):"
echo
echo "| precision | k | PyTorch step | PyTorch peak | our step | our peak | step |"
echo "|---|--:|--:|--:|--:|--:|---|"
sent=''
for prec in $(tool distinct "$anchor" --cols precision --where size="$size" --where context="$context" --sort -precision); do
  for c in $ptc; do
    k=${c#compiled_ckpt}; [ "$c" = compiled ] && k=0
    ts=$(pt "$c" "$prec" step_ms_median) tp=$(pt "$c" "$prec" peak_gib)
    [ -n "$ts" ] || continue
    num "PyTorch step" "$ts"
    os=$(row "$prec" after_backward "$k" step_ms_mean) op=$(row "$prec" after_backward "$k" engine_peak_mib)
    v='-'
    [ -z "$os" ] || v=$(verdict "$os" "$ts")
    echo "| $prec | $k | $ts | $tp | $(f1 "$os") | $(gib "$op") | $v |"
    if [ "$prec" = bf16 ] && [ "$k" = 1 ] && [ -n "$os" ]; then
      # the row's numbers are in the table: the sentence gives the verdicts
      if is_true "$op / 1024 <= $tp"; then m="$(calc %.2f "$op / 1024 / $tp")x its peak"
      else m="**we lose on memory, $(calc %.2f "$op / 1024 / $tp")x its peak**"; fi
      sent="At k = 1 in bf16: $v; $m"
      ip=$(row "$prec" in_backward 1 engine_peak_mib)
      [ -z "$ip" ] || sent="$sent; with AdamW in backward $(calc %.2f "$ip / 1024 / $tp")x its peak ($(gib "$ip") GiB at $(f1 "$(row "$prec" in_backward 1 step_ms_mean)") ms"
      kp=$(rowk "$prec" 1 engine_peak_mib)
      [ -z "$ip" ] || [ -z "$kp" ] || sent="$sent; keeping the norms, $(gib "$kp") GiB at $(f1 "$(rowk "$prec" 1 step_ms_mean)") ms"
      [ -z "$ip" ] || sent="$sent)"
      sent="$sent."
    fi
  done
done
echo
[ -z "$sent" ] || { echo "$sent"; echo; }
