#!/bin/sh
# Writeup section 1.5 (memory_profiling): the 2.7B model's memory at
# context 128 / 256 / 512, a forward pass and a training step, fp32 and
# bf16: the allocation timeline the engine records (figures), the peaks,
# the residual stream's size and the largest activations. The timeline and
# the activations come from the rows' samples (NAME.samples.jsonl: mem_*,
# act_mib.*, written by every lm job; jobs/lm.c says what each holds).
# Environment as for every section (mkreport.sh): DATA, CSV, OUT, CSVTOOL,
# GNUPLOT.
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
reports=$(dirname "$here")
csv="${CSV:-$DATA/memory_profiling.csv}"
jsonl="${csv%.csv}.samples.jsonl"
anchor="$reports/anchors/lm_pytorch_h100.csv"

echo "## 1.5 memory_profiling: where the memory goes"
echo
if [ ! -f "$csv" ] || [ "$("$CSVTOOL" count "$csv" --where status=ok)" -eq 0 ]; then
  echo "_Not yet measured: run \`./runner experiments/memory_profiling.cfg\` on a GPU._"
  echo
  exit 0
fi
. "$REPORT_LIB"
size=$(tool value "$csv" --agg first --where status=ok --col size)
gpus=$(tool distinct "$csv" --cols gpu_name --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
fusion=$(tool value "$csv" --agg first --where status=ok --col fusion)
batch=$(tool value "$csv" --agg first --where status=ok --col batch)
# d_model by model.md's sizes (jobs/lm.c takes the same names)
case $size in
  small) dmodel=768 ;; medium) dmodel=1024 ;; large) dmodel=1280 ;;
  xl) dmodel=1600 ;; 2.7B) dmodel=2560 ;; 10B) dmodel=4608 ;; *) dmodel="" ;;
esac

# The job's latest samples line, and one sample list from it.
sline() {
  [ -f "$jsonl" ] || return 0
  awk -v p="$1" -v c="$2" -v m="$3" '
    index($0, "\"precision\": \"" p "\"") && index($0, "\"context\": \"" c "\"") &&
    index($0, "\"mode\": \"" m "\"") && index($0, "\"mem_t_ms\"") { l = $0 }
    END { print l }' "$jsonl"
}
arr() {
  printf '%s\n' "$1" | awk -v name="$2" '{
    key = "\"" name "\": ["; i = index($0, key); if (!i) exit
    r = substr($0, i + length(key)); r = substr(r, 1, index(r, "]") - 1)
    n = split(r, a, ", "); for (k = 1; k <= n; k++) print a[k] }'
}

cat <<TEXT
The $size model (batch $batch, ${fusion} path) on ${gpus}. Every \`lm\` job records
the engine's allocations and frees from model creation to the end of its
first step (\`eng_memlog\`: the engine's own allocator, so the numbers are
exact, not sampled). Unlike PyTorch's caching allocator, whose memory grows
through forward as activations are saved and drains through backward, our
model allocates its parameters, gradients and every activation (one
allocation, laid out by the activation table) when it is created; a step
allocates nothing except, once, the AdamW moments (at the first optimizer
step, as PyTorch's AdamW does) and a larger shared workspace when a product
first needs one. A forward-only job never allocates optimizer state.

TEXT

# ---- (a) the timelines ----------------------------------------------------------
echo "### (a) Memory timelines"
echo
if [ -z "$GNUPLOT" ]; then
  echo "_The figures need gnuplot 5.4 or later, which configure did not find._"
  echo
else
  nfig=0
  for spec in "fp32 512 forward" "fp32 512 train_step" "bf16 512 train_step"; do
    set -- $spec
    l=$(sline "$1" "$2" "$3")
    [ -n "$l" ] || continue
    tmp="$OUT/memory_$1_$2_$3.tmp.csv"
    {
      echo "event,params,grads,optimizer,activations,workspace,other"
      for g in t params grads optimizer activations workspace other; do
        if [ $g = t ]; then arr "$l" mem_t_ms > "$tmp.$g"; else arr "$l" "mem_${g}_mib" > "$tmp.$g"; fi
      done
      paste -d, "$tmp.params" "$tmp.grads" "$tmp.optimizer" "$tmp.activations" \
                "$tmp.workspace" "$tmp.other" |
        awk -F, '{ s = 0; printf "%d", NR - 1
                   for (i = 1; i <= NF; i++) { s += $i / 1024; printf ",%.4f", s }
                   print ""; last = $0; n = NR }
                 END { split(last, a, ","); s = 0; printf "%d", n
                       for (i = 1; i <= 6; i++) { s += a[i] / 1024; printf ",%.4f", s }
                       print "" }'
    } > "$tmp"
    ph=$(arr "$l" mem_phase_ms | tr '\n' ' ')
    # A phase's line sits between the last event before its clock time and
    # the first after it (row i of the list is event i - 1).
    phases=$(awk -v ph="$ph" -v mode="$3" '
      { t[NR] = $1 }
      END {
        split(ph, p, " ")
        out = "0:create"
        split("2:forward 3:backward 4:optimizer", s, " ")
        for (k = 1; k <= 3; k++) {
          if (mode == "forward" && k > 1) break
          split(s[k], q, ":")
          e = NR - 0.5
          for (i = 1; i <= NR; i++) if (t[i] > p[q[1]]) { e = i - 1.5; break }
          out = out " " e ":" q[2]
        }
        print out
      }' "$tmp.t")
    rm -f "$tmp.t" "$tmp.params" "$tmp.grads" "$tmp.optimizer" "$tmp.activations" "$tmp.workspace" "$tmp.other"
    svg="memory_$1_$2_$3.svg"
    "$GNUPLOT" -c "$reports/memory_timeline.gp" "$tmp" "$OUT/$svg" \
      "$size, $1, context $2, $3: bytes in use by what they hold" "$phases"
    rm -f "$tmp"
    echo "![Memory timeline, $size $1 context $2 $3]($svg)"
    echo
    nfig=$((nfig + 1))
  done
  if [ $nfig -eq 0 ]; then
    echo "_No timeline in the samples yet (rows from before the engine logged allocations)._"
    echo
  else
    echo "_Each step of the stack is one allocation or free, in order; dashed lines"
    echo "mark where model creation, forward, backward and the optimizer step begin._"
    echo
  fi
fi

# ---- (b), (c) peaks -------------------------------------------------------------
echo "### (b), (c) Peak memory: forward pass against training step"
echo
echo "The engine's peak (GiB) per job; PyTorch's is shared/anchors' eager train"
echo "step at context 512 (it gives no forward peaks)."
echo
echo "| precision | context | forward (GiB) | train step (GiB) | train - forward (GiB) | PyTorch train step (GiB) |"
echo "|---|--:|--:|--:|--:|--:|"
for p in fp32 bf16; do
  for c in $(tool distinct "$csv" --cols context --where status=ok --sort context); do
    f=$(tool value "$csv" --sort -utc --agg first --default "" --where status=ok --where precision=$p \
          --where context="$c" --where mode=forward --col engine_peak_mib)
    t=$(tool value "$csv" --sort -utc --agg first --default "" --where status=ok --where precision=$p \
          --where context="$c" --where mode=train_step --col engine_peak_mib)
    [ -n "$f$t" ] || continue
    pt=$(tool value "$anchor" --agg first --default "" --where size="$size" --where context="$c" \
           --where precision=$p --where mode=train_step --where source="PyTorch 2.11 eager" --col peak_gib)
    fg=$( [ -n "$f" ] && awk "BEGIN { printf \"%.1f\", $f / 1024 }" || echo -)
    tg=$( [ -n "$t" ] && awk "BEGIN { printf \"%.1f\", $t / 1024 }" || echo -)
    dg=-
    [ -n "$f" ] && [ -n "$t" ] && dg=$(awk "BEGIN { printf \"%.1f\", ($t - $f) / 1024 }")
    echo "| $p | $c | $fg | $tg | $dg | ${pt:--} |"
  done
done
echo
failed_jobs "$csv" precision,context,mode,status,message \
  "precision,context,mode,status,message"

# ---- (d) the residual stream ----------------------------------------------------
l=$(sline fp32 512 train_step)
nparams=$(tool value "$csv" --agg first --where status=ok --col params)
echo "### (d) One residual-stream activation"
echo
if [ -n "$dmodel" ]; then
  echo "A residual-stream tensor holds batch x context x d_model values, fp32"
  echo "(the residual stream stays fp32 under our mixed-precision policy too):"
  echo "$batch x T x $dmodel x 4 bytes, one such tensor saved per layer input."
  echo
  echo "| context | values | MiB |"
  echo "|--:|--:|--:|"
  for c in $(tool distinct "$csv" --cols context --where status=ok --sort context); do
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
if [ -n "$l" ]; then
  last() { arr "$l" "$1" | tail -n 1; }
  echo "At the end of the first training step (fp32, context 512): parameters"
  echo "$(awk "BEGIN { printf \"%.1f\", $(last mem_params_mib) / 1024 }") GiB ($nparams fp32 values), gradients"
  echo "$(awk "BEGIN { printf \"%.1f\", $(last mem_grads_mib) / 1024 }") GiB, AdamW's two moments"
  echo "$(awk "BEGIN { printf \"%.1f\", $(last mem_optimizer_mib) / 1024 }") GiB, activations"
  echo "$(awk "BEGIN { printf \"%.1f\", $(last mem_activations_mib) / 1024 }") GiB, workspace"
  echo "$(awk "BEGIN { printf \"%.2f\", $(last mem_workspace_mib) / 1024 }") GiB. The largest tensors of the activation table, each"
  echo "name summed over the layers that have one (\`scratch.*\` is one tensor"
  echo "shared by all layers):"
  echo
  echo "| activation | layers | MiB each | MiB in all | what it is |"
  echo "|---|--:|--:|--:|---|"
  printf '%s\n' "$l" | grep -o '"act_mib\.[^"]*": \[[^]]*\]' |
    sed 's/^"act_mib\.//; s/": \[/,/; s/\]$//; s/, /,/' |
    while IFS=, read -r name total count; do
      what=""
      case $name in
        attn.scores) what="attention scores, batch x heads x T x T" ;;
        attn.probs) what="softmax probabilities, batch x heads x T x T" ;;
        scratch.grad_scores) what="gradient of the scores (backward scratch)" ;;
        lm_head.logits) what="logits, batch x T x vocab" ;;
        scratch.grad_logits) what="gradient of the logits" ;;
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
  echo "_No samples for the fp32 context-512 training step yet._"
  echo
fi
