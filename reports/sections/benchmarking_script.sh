#!/bin/sh
# Writeup section 1.1.1 (benchmarking_script): forward, backward and
# training step times of the LM per size, context and precision, next to
# PyTorch eager (reports/anchors/lm_pytorch.csv) and the strongest
# PyTorch (torch_lm.csv), both measured on the GPU of our rows. Environment as for every section
# (mkreport.sh): DATA, CSV, OUT, CSVTOOL, PROBLEM. benchmarking_script:
# (a) the script, (b) the timings and their variability, (c) warm-up;
# benchmarking_appendix: what bounds the best rows (all paths) against the
# floors of its GPU (reports/anchors/gpu_floors.csv), and 3xTF32.
set -eu
. "$REPORT_LIB"


csv="${CSV:-$DATA/benchmarking_script.csv}"

# benchmarking_script: (a)-(c); benchmarking_appendix: what bounds the best
# rows against the hardware's floors, and 3xTF32.
PROBLEM=${PROBLEM:-benchmarking_script}
renders benchmarking_script benchmarking_appendix
if [ ! -f "$csv" ] || [ "$("$CSVTOOL" count "$csv")" -eq 0 ]; then
  not_measured benchmarking_script "on a GPU"
  exit 0
fi
on_gpu "$csv"
anchor=$(anchor_rows lm_pytorch)
strong=$(anchor_rows torch_lm)
nok=$(tool count "$csv" --where status=ok)
warmup=$(tool distinct "$csv" --cols warmup --sep / | tr '\n' ' ')
steps=$(tool distinct "$csv" --cols steps --sep / | tr '\n' ' ')
gpus=$(tool distinct "$csv" --cols gpu_name --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
engines=$(tool distinct "$csv" --cols backend --where status=ok | tr '\n' ' ')

if [ "$PROBLEM" = benchmarking_script ]; then
batch=$(tool distinct "$csv" --cols batch --where status=ok | paste -sd/ -)
vocab=$(tool distinct "$csv" --cols vocab --where status=ok | paste -sd/ -)
# The sizes' shapes as the runner builds them (model/config.c's table, the
# handout's Table 1), each shown only where it gives its rows' parameter
# count: the shapes are not in the rows, and nsys_profile (e) counts FLOPs
# from them.
cfgc="$REPORTS/../model/config.c"
shapes=""
if [ -f "$cfgc" ]; then
  for s in $(tool distinct "$csv" --cols params,size --where status=ok --sort params --sep '|' | cut -d'|' -f2); do
    sh=$(sed -n "s/^ *{\"$s\", *\([0-9]*\), *\([0-9]*\), *\([0-9]*\), *\([0-9]*\), *\([0-9]*\)}.*/\1 \2 \3 \4 \5/p" "$cfgc" | head -n 1)
    [ -n "$sh" ] || continue
    # shellcheck disable=SC2086 # one value a word
    set -- $sh
    pr=$(tool value "$csv" --agg first --default "" --where status=ok --where size="$s" --col params)
    rv=$(tool value "$csv" --agg first --default "" --where status=ok --where size="$s" --col vocab)
    if [ -z "$pr" ] || [ -z "$rv" ]; then continue; fi
    [ "$(calc %.0f "2 * $rv * $2 + $4 * (4 * $2 * $2 + 3 * $2 * $3 + 2 * $2) + $2")" = "$(calc %.0f "$pr")" ] || continue
    shapes="$shapes${shapes:+, }$s $2/$3/$4/$5"
  done
fi
echo "### (a) The benchmarking script"
echo
{ cat <<TEXT
The script is the runner: \`./runner experiments/benchmarking_script.cfg\` sweeps size x context x precision x mode, one \`lm\` job (jobs/lm.c) a row: the handout's Transformer LM at its Table 1 sizes, batch $batch, vocabulary $vocab, random tokens, ${warmup}warm-up then ${steps}timed steps (mean ± sample std). Each phase of a step (forward with the loss, backward, AdamW) ends in a device synchronisation before its clock is read. \`fp32\` is true fp32 (no TF32); \`bf16\` rounds each product's inputs to bf16, accumulating in fp32. Engine: ${engines}op by op, one kernel per operation, scores materialised; GPU: ${gpus}.
TEXT
# the shapes shown are those that give their rows' parameter count (above)
[ -z "$shapes" ] || echo "Sizes, d_model/d_ff/layers/heads (model/config.c): $shapes."
} | fold -s -w 76 | sed 's/ *$//'
if has_anchor "$anchor"; then
  echo "PyTorch: the course reference's eager numbers, same GPU"
  echo "(reports/anchors/lm_pytorch.csv; context 512)."
elif [ -n "$GPU" ]; then
  anchor_missing "eager numbers" are reports/anchors/torch_lm_reference.py reports/anchors/lm_pytorch.csv
fi
echo
echo "### (b) Forward and backward times"
echo

echo "| size | context | precision | mode | forward (ms) | backward (ms) | optimizer (ms) | step (ms) | tokens/s | engine peak (GiB) | PyTorch, same mode (ms) | ours / PyTorch |"
echo "|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
# Rows by precision, then model size (parameter count), context and mode,
# each setting's newest ok row; PyTorch's first reference row of the same
# settings beside it (rows of another GPU, left by a partial re-run, meet
# none), at our rows' batch (the file also holds the 2024 shapes' rows,
# batch 16 at context 128). One csvtool call a file (assigned, so that
# set -e sees it fail); awk joins them.
pts=$(tool select "$anchor" --where config=reference --where "batch=$(printf '%s' "$batch" | tr / '|')" \
        --first-of size,context,precision,mode \
        --cols size,context,precision,mode,time_ms --sep '|')
rows=$(tool select "$csv" --where status=ok --sort precision,params,context,mode,-utc \
        --first-of size,context,precision,mode \
        --cols size,context,precision,mode,gpu_name,engine_peak_mib,tokens_per_s,fwd_ms_mean,fwd_ms_std,bwd_ms_mean,bwd_ms_std,opt_ms_mean,opt_ms_std,step_ms_mean,step_ms_std \
        --fmt fwd_ms_mean=%.2f --fmt fwd_ms_std=%.2f --fmt bwd_ms_mean=%.2f \
        --fmt bwd_ms_std=%.2f --fmt opt_ms_mean=%.2f --fmt opt_ms_std=%.2f \
        --fmt step_ms_mean=%.2f --fmt step_ms_std=%.2f --fmt tokens_per_s=%.0f \
        --sep '|')
{ tagged pt "$pts"; tagged row "$rows"; } | awk -F'|' -v gpu="$GPU" '
  function pm(m, s) { return m == "" ? "-" : m " ± " s }
  $1 == "pt" { pt[$2 "|" $3 "|" $4 "|" $5] = $6; next }
  $2 == "" { next }
  {
    k = $2 "|" $3 "|" $4 "|" $5
    p = ($6 == gpu && k in pt) ? pt[k] : ""
    r = p != "" ? sprintf("%.2f", $15 / p) : ""
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %s |\n",
      $2, $3, $4, $5, pm($9, $10), pm($11, $12), pm($13, $14), pm($15, $16),
      $8, $7 / 1024, p == "" ? "-" : p, r == "" ? "-" : r
  }'
echo

failed_jobs "$csv" size,context,precision,mode,status,message \
  "size,context,precision,mode,status,message"

# ---- (b)'s answer, from the rows ----------------------------------------------
fv() { # SIZE PREC MODE COL at context 512: the latest ok row's value, or ""
  tool value "$csv" --sort -utc --agg first --default "" --where status=ok --where size="$1" \
    --where context=512 --where precision="$2" --where mode="$3" --col "$4"
}
# The answer's forward and backward times: fp32 at context 512 where
# measured (else bf16, else the longest context), from the smallest to the
# largest size with both a forward and a forward + backward row there (a
# size may have run out of memory)
ap=fp32
[ "$(tool count "$csv" --where status=ok --where precision=fp32)" -gt 0 ] || ap=bf16
actx=$(tool value "$csv" --where status=ok --where precision=$ap --agg max --default "" --col context)
[ "$(tool count "$csv" --where status=ok --where precision=$ap --where context=512)" -eq 0 ] || actx=512
fva() { # SIZE MODE COL at the answer's precision and context
  tool value "$csv" --sort -utc --agg first --default "" --where status=ok --where size="$1" \
    --where context="$actx" --where precision="$ap" --where mode="$2" --col "$3"
}
both=$(tool select "$csv" --cols params,size,mode --where status=ok --where precision=$ap \
         --where context="$actx" --where 'mode=forward|forward_backward' --sep ' ' |
       sort -u | awk '{ n[$2]++; p[$2] = $1 } END { for (s in n) if (n[s] == 2) print p[s], s }' | sort -g)
sz1=$(printf '%s\n' "$both" | head -n 1 | cut -d' ' -f2)
szn=$(printf '%s\n' "$both" | tail -n 1 | cut -d' ' -f2)
# forward from the forward-only rows, backward from the forward + backward
# ones (whose forward phase differs a little from the forward-only row's)
f1="" fn="" b1="" bn=""
if [ -n "$sz1" ]; then
  f1=$(fva "$sz1" forward fwd_ms_mean); fn=$(fva "$szn" forward fwd_ms_mean)
  b1=$(fva "$sz1" forward_backward bwd_ms_mean); bn=$(fva "$szn" forward_backward bwd_ms_mean)
fi
rat=$(tool select "$csv" --cols fwd_ms_mean,bwd_ms_mean --where status=ok --where mode=forward_backward |
        tail -n +2 | awk -F, '$1 > 0 && $2 > 0 { r = $2 / $1; if (!n++ || r < lo) lo = r; if (r > hi) hi = r }
          END { if (n) printf "%.1f %.1f", lo, hi }')
rel=$(tool select "$csv" --cols size,context,precision,mode,step_ms_mean,step_ms_std --where status=ok |
        tail -n +2 | awk -F, '$5 > 0 { printf "%.4f %s %s context %s %s %.2f %.2f\n", 100 * $6 / $5, $1, $3, $2, $4, $6, $5 }' | sort -g)
var=""
if [ -n "$rel" ]; then
  vmed=$(printf '%s\n' "$rel" | awk '{ a[NR] = $1 } END { printf "%.2f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  var="$(printf '%s\n' "$rel" | awk '{ n++; if ($1 <= 1) k++ } END { printf "%d %d", n, k }') $vmed $(printf '%s\n' "$rel" | tail -n 1 |
         awk '{ printf "%.1f %s %s", $1, $(NF - 1), $NF; for (i = 2; i < NF - 1; i++) printf " %s", $i }')"
fi
if [ -n "$f1" ] && [ -n "$fn" ] && [ -n "$b1" ] && [ -n "$bn" ] && [ -n "$rat" ] && [ -n "$var" ]; then
  set -- $rat; rlo=$1 rhi=$2
  # the worst row's std and mean ($5 $6) are in the table above
  set -- $var; vn=$1 vk=$2 vmed=$3 vmx=$4; shift 6; vw="$*"
  { cat <<TEXT
**Answer.** At context $actx in $ap a forward pass takes $(calc %.1f "$f1") ms ($sz1) to $(calc %.1f "$fn") ms ($szn) and a backward pass $(calc %.1f "$b1") to $(calc %.1f "$bn") ms; over every forward + backward row, backward takes $rlo to $rhi times forward (two products per forward product). Variability is small: the step's std is at most 1% of its mean in $vk of $vn rows (median $vmed%), at worst $vmx% ($vw: a few timed steps ran long).
TEXT
  } | fold -s -w 76 | sed 's/ *$//'
  echo
fi
# The "ours / PyTorch" column is against eager; the strongest PyTorch
# (torch.compile + SDPA + fused AdamW, measured side by side:
# reports/anchors/torch_lm.csv) restated for the op-by-op train step.
if has_anchor "$strong"; then
  sl="" nl=0 ml=0
  for g in "2.7B bf16" "2.7B fp32" "small bf16" "small fp32"; do
    set -- $g
    ct=$(pt_compiled "$strong" "$1" 512 "$2" step_ms_mean)
    cp=$(pt_compiled "$strong" "$1" 512 "$2" peak_gib)
    # small bf16: a stronger published step where measured on this GPU
    # (published.csv: torch_lm.py's H100 rows are launch-bound)
    ps=$(published_on torch_compile_small_bf16_step)
    [ "$1|$2" = "small|bf16" ] && [ -n "$ct" ] && [ -n "$ps" ] && is_true "$ps < $ct" && ct=$ps
    ot=$(fv "$1" "$2" train_step step_ms_mean); op=$(fv "$1" "$2" train_step engine_peak_mib)
    [ "$(fv "$1" "$2" train_step gpu_name)" = "$GPU" ] || ot=""
    [ -n "$ct" ] && [ -n "$ot" ] && [ -n "$cp" ] && [ -n "$op" ] || continue
    nl=$((nl + 1)); mem=""
    if is_true "$op / 1024 > $cp"; then ml=$((ml + 1)); mem=" (**we lose on memory**)"; fi
    sl="$sl- $1 $2: $(calc %.1f "$ot") against $(calc %.1f "$ct") ms ($(verdict "$ot" "$ct")), peak $(calc %.1f "$op / 1024") against $(calc %.1f "$cp") GiB$mem.
"
  done
  if [ -n "$sl" ]; then
    # a memory loss at every point: said once, not on each line
    ma=""
    if [ "$nl" -gt 1 ] && [ "$ml" -eq "$nl" ]; then
      sl=$(printf '%s' "$sl" | sed 's/ (\*\*we lose on memory\*\*)//')
      ma=" **We lose on memory at every point.**"
    fi
    sl=$(printf '%s' "$sl")
    ps=$(published_on torch_compile_small_bf16_step)
    if [ -n "$ps" ]; then
      pw="reports/anchors/torch_lm.csv; small bf16: reports/anchors/published.csv's $ps ms"
    else
      pw="reports/anchors/torch_lm.csv, same GPU"
    fi
    echo "Our op-by-op train step (context 512) against the strongest PyTorch, torch.compile + SDPA + fused AdamW ($pw; the fused path is compared in 1.3.1 (b)).$ma" |
      fold -s -w 76 | sed 's/ *$//'
    echo
    printf '%s\n' "$sl"
    echo
  fi
elif [ -n "$GPU" ]; then
  anchor_missing "torch.compile step" is reports/anchors/torch_lm.py reports/anchors/torch_lm.csv --sizes small,2.7B --precisions bf16,fp32
  echo
fi

fi

# ---- the best rows over both paths ------------------------------------------
# Over every lm CSV: benchmarking_script (op by op), torch_compile (fused, attention materialised or flash, context 512)
# benchmarking_fused (fused + flash, bf16, every context) and cuda_graphs
# (fused + flash, bf16, with and without CUDA graphs).
lmcsvs="$csv"
for f in "$DATA/torch_compile.csv" "$DATA/benchmarking_fused.csv" \
         "$DATA/benchmarking_3xtf32.csv" "$DATA/cuda_graphs.csv"; do
  [ -f "$f" ] && lmcsvs="$lmcsvs $f"
done
# rows SIZE PREC CTX COL: "time,path,attention,graphs,COL" of every ok
# train_step row of that size, precision and context over every lm CSV
# (in the files' order; selected once a COL, into REPORT_TMP: a file
# that lacks a column gives none).
rows() {
  _rf="$REPORT_TMP/bs_rows.$4"
  [ -f "$_rf" ] || for f in $lmcsvs; do
    tool select "$f" --cols size,precision,context,step_ms_mean,fusion,attention,cuda_graphs,"$4" \
      --where status=ok --where mode=train_step 2> /dev/null | tail -n +2
  done > "$_rf"
  awk -F, -v s="$1" -v p="$2" -v c="$3" \
    '$1 == s && $2 == p && $3 == c { print substr($0, length($1 $2 $3) + 4) }' "$_rf"
}
# best SIZE PREC CTX COL: the one of those rows with the smallest step time.
best() { rows "$@" | sort -t, -k1,1g | head -n 1; }
# config_of ROW: a row of rows/best's configuration, in words.
config_of() {
  printf '%s' "$1" | awk -F, '{ print ($2 == "fused" ? "fused path, " $3 " attention" ($4 == "true" ? ", CUDA graphs" : "") : "op by op") }'
}
if [ "$PROBLEM" = benchmarking_appendix ]; then
echo "Where the best training steps' time goes, against its GPU's floors,"
echo "for readers of benchmarking_script and torch_compile who want the why."
echo
echo "What bounds the best rows, measured: one extra, untimed step of each job"
echo "with every operation bracketed by CUDA events (the row's message; ms per"
echo "step by kernel family, largest first):"
echo
for g in "2.7B bf16" "2.7B fp32" "2.7B 3xtf32" "small bf16"; do
  set -- $g
  b=$(best "$1" "$2" 512 message)
  [ -n "$b" ] || continue
  echo "- $1 $2, $(calc %.1f "$(printf '%s' "$b" | cut -d, -f1)") ms: $(printf '%s' "$b" | cut -d, -f5- | sed 's/^ms per step by kernel family: //')."
done
echo

# ---- those rows against the floors --------------------------------------------
# cmpw A B: A against B in words (a time: larger is slower).
cmpw() {
  if is_true "$1 > $2"; then printf 'slower than'
  elif is_true "$1 < $2"; then printf 'faster than'
  else printf 'as fast as'; fi
}
# fused_of PREC ATTENTION GRAPHS COL: the latest ok 2.7B, context 512 fused
# train-step row's COL in CSV $fcsv, or "".
fused_of() {
  tool value "$fcsv" --sort -utc --agg first --default "" --where status=ok --where size=2.7B \
    --where precision="$1" --where context=512 --where mode=train_step --where fusion=fused \
    --where attention="$2" --where cuda_graphs="$3" --col "$4"
}
p27=$(tool value "$csv" --agg first --default "" --where status=ok --where size=2.7B --col params)
tok=$(tool value "$csv" --agg first --default "" --where status=ok --where size=2.7B \
        --where context=512 --col tokens_per_step)
rb=$(best 2.7B bf16 512 message)
rf=$(best 2.7B fp32 512 message)
# The best rows may come from any lm CSV, so from any GPU: they are read
# against the floors measured on the bf16 best row's GPU (reports/anchors/
# gpu_floors.csv), else on an H100, and the text says which when they differ.
bgpu=$(best 2.7B bf16 512 gpu_name | cut -d, -f5)
[ -n "$bgpu" ] || bgpu=$(best 2.7B fp32 512 gpu_name | cut -d, -f5)
floors "$bgpu"
bf16_tflops=$BF16_TFLOPS fp32_tflops=$FP32_TFLOPS hbm_tbs=$COPY_TBS
if [ -n "$p27" ] && [ -n "$tok" ] && [ -n "$rb$rf" ]; then
  bgpus=$(for g in "2.7B bf16" "2.7B fp32"; do
            set -- $g; best "$1" "$2" 512 gpu_name | cut -d, -f5
          done | grep . | sort -u | grep -v -x -F "$FLOORS_GPU" || true)
  if [ -n "$bgpus" ]; then
    bkinds=$(printf '%s\n' "$bgpus" | while IFS= read -r g; do k=$(gpu_kind "$g"); printf '%s\n' "${k:-$g}"; done |
               sort -u | awk '{ printf "%s%s", (NR > 1 ? " and the " : ""), $0 }')
    echo "These rows are from the $bkinds; no floors were measured there"
    echo "(reports/anchors/gpu_floors.py), so what follows reads them against an"
    echo "$FLOORS_KIND's ($FLOORS_GPU)."
    echo
  fi
fi
if [ -n "$p27" ] && [ -n "$tok" ] && [ -n "$rb" ]; then
  num "2.7B params" "$p27"; num "2.7B tokens_per_step" "$tok"
  mb=$(printf '%s' "$rb" | cut -d, -f5-)
  mm=$(fam "$mb" matmul); aw=$(fam "$mb" adamw)
  num "2.7B bf16 matmul ms" "$mm"; num "2.7B bf16 adamw ms" "$aw"
  # matrix-product FLOP of a step: ~6 x parameters x tokens
  flops=$(calc %.4e "6 * $p27 * $tok")
  aw_floor=$(calc %.1f "30 * $p27 / ($hbm_tbs * 1e9)")
  aw_rate=$(calc %.2f "30 * $p27 / ($aw * 1e9)")
  aw_rel=$(calc %.1f "100 * ($aw / (30 * $p27 / ($hbm_tbs * 1e9)) - 1)")
  aw=$(calc %.1f "$aw")
  if is_true "$aw_rel >= 0"; then aw_side="above"; else aw_side="below"; fi
  if is_true "$aw_rel <= 2 && $aw_rel >= -2"; then
    aw_words="is at that floor (${aw_rel#-}% $aw_side it)"
  elif is_true "$aw_rel > 2"; then
    aw_words="is $(calc %.1f "$aw - $aw_floor") ms ($aw_rel%) above that floor"
  else
    aw_words="is under that floor (${aw_rel#-}% below it), i.e. faster than $hbm_tbs TB/s"
  fi
  cat <<TEXT
Reading these against the floors of an $FLOORS_KIND (reports/anchors/gpu_floors.csv:
~$bf16_tflops TFLOP/s bf16 dense, ~$hbm_tbs TB/s of memory bandwidth; $fp32_tflops TFLOP/s fp32 without
tensor cores), with a step's matrix products at ~6 x parameters x tokens =
6 x $p27 x $tok = $(calc %.2e "$flops") FLOP: the 2.7B bf16 best row's products take
$(calc %.1f "$mm") ms against a $(calc %.1f "$flops / ($bf16_tflops * 1e9)") ms floor ($(calc %.0f "$flops / ($mm * 1e9)") TFLOP/s, $(calc %.0f "100 * $flops / ($mm * 1e9 * $bf16_tflops)")% of the
dense bf16 rate; they run through cuBLASLt with each shape's fastest of the
heuristic's candidates, timed on first use).
AdamW takes $aw ms; its floor is $aw_floor ms ($p27 parameters x 30 bytes moved:
p, g, m, v read, p, m, v and the bf16 weight copy written, at $hbm_tbs TB/s), so it
$aw_words, moving $aw_rate TB/s. Those two alone take $(calc %.1f "$mm + $aw") ms of the row's
$(calc %.1f "$(printf '%s' "$rb" | cut -d, -f1)") ms. The rest (attention $(d "$(fam "$mb" attention)"), RMSNorm
$(d "$(fam "$mb" rmsnorm)"), SwiGLU $(d "$(fam "$mb" swiglu)"), RoPE and head layout $(d "$(fam "$mb" rope+heads)") ms in the row) is
4-wide vectorised and near its memory traffic: 16-bit norm outputs kept
for backward, 16-bit gradients into the norms, the q|k|v product written
in bf16, SwiGLU's backward recomputing its product in the pass that reads
its inputs, Hopper's wgmma and TMA in the flash forward. Running AdamW per
layer on a second stream beside backward did not help: the products
slowed beside AdamW's memory traffic (section T measures AdamW in
backward).
TEXT
  # the fused + flash bf16 step without CUDA graphs, one row per CSV of
  # the best bf16 row's GPU (a spread across GPUs would not be run to run)
  runs="" vals=""
  for fcsv in $lmcsvs; do
    r=$(fused_of bf16 flash false step_ms_mean 2> /dev/null) || r=""
    [ -n "$r" ] || continue
    [ "$(fused_of bf16 flash false gpu_name 2> /dev/null)" = "$bgpu" ] || continue
    num "${fcsv##*/} 2.7B bf16 step" "$r"
    r=$(calc %.1f "$r")
    runs="$runs${runs:+, }$r ms (${fcsv##*/})"
    vals="$vals $r"
  done
  if [ -n "$vals" ]; then
    # shellcheck disable=SC2086 # one value a word
    rlo=$(printf '%s\n' $vals | sort -g | head -n 1)
    # shellcheck disable=SC2086
    rhi=$(printf '%s\n' $vals | sort -g | tail -n 1)
    rw="a run-to-run spread of $rlo to $rhi ms"
    # shellcheck disable=SC2086
    [ "$(printf '%s\n' $vals | wc -l)" -gt 1 ] || rw="no other run on this GPU shows the spread yet"
    echo
    echo "The fused + flash bf16 step without CUDA graphs, at context 512, in the"
    echo "latest run of each CSV that has it on the $(gpu_kind "$bgpu"): $runs; $rw."
  fi
  fcsv="$DATA/cuda_graphs.csv"
  if [ -f "$fcsv" ]; then
    g0=$(fused_of bf16 flash false step_ms_mean)
    g1=$(fused_of bf16 flash true step_ms_mean)
    if [ -n "$g0" ] && [ -n "$g1" ]; then
      num "cuda_graphs off" "$g0"; num "cuda_graphs on" "$g1"
      g0=$(calc %.1f "$g0"); g1=$(calc %.1f "$g1")
      bt=$(calc %.1f "$(printf '%s' "$rb" | cut -d, -f1)")
      same=""
      [ "$g1" = "$bt" ] && same=", the best row above"
      if is_true "$g1 < $g0"; then gw="removes the host's launch gaps, $(calc %.1f "$g0 - $g1") ms"
      else gw="gains nothing here"; fi
      echo "Replaying forward's and backward's kernels as CUDA graphs (torch_compile"
      echo "(b)) $gw: $g0 -> $g1 ms in cuda_graphs.csv's pair of runs$same. What is"
      echo "left is AdamW's traffic, which cannot fall while its state stays fp32,"
      echo "and the products."
    fi
  fi
  echo
fi
if [ -n "$p27" ] && [ -n "$tok" ] && [ -n "$rf" ]; then
  mf=$(printf '%s' "$rf" | cut -d, -f5-)
  mmf=$(fam "$mf" matmul)
  num "2.7B fp32 matmul ms" "$mmf"
  flops=$(calc %.4e "6 * $p27 * $tok")
  cat <<TEXT
The fp32 step is bound by true fp32 products on CUDA cores: $(calc %.2e "$flops") FLOP
at $fp32_tflops TFLOP/s is $(calc %.0f "$flops / ($fp32_tflops * 1e9)") ms before anything else; in the 2.7B fp32
best row cuBLAS's products take $(calc %.1f "$mmf") ms ($(calc %.0f "$flops / ($mmf * 1e9)") TFLOP/s).
TEXT
  fcsv="$DATA/torch_compile.csv"
  ob32=$(tool value "$csv" --sort -utc --agg first --default "" --where status=ok \
           --where size=2.7B --where context=512 --where precision=fp32 \
           --where mode=train_step --col step_ms_mean --fmt %.2f)
  fm=""; ff=""
  if [ -f "$fcsv" ]; then
    fm=$(fused_of fp32 materialized false step_ms_mean)
    ff=$(fused_of fp32 flash false step_ms_mean)
  fi
  if [ -n "$ob32" ] && [ -n "$fm" ] && [ -n "$ff" ]; then
    num "2.7B fp32 fused materialized" "$fm"; num "2.7B fp32 fused flash" "$ff"
    fm=$(calc %.1f "$fm"); ff=$(calc %.1f "$ff")
    fma=$(fam "$(fused_of fp32 materialized false message)" attention)
    ffa=$(fam "$(fused_of fp32 flash false message)" attention)
    cat <<TEXT
Of the fp32 paths (train step, context 512): op by op takes $ob32 ms
(section 1.1.1 (b)); torch_compile.csv's fused rows take $fm ms with cuBLAS-materialised
attention (attention $(d "$fma") ms) and $ff ms with flash attention on CUDA
cores (attention $(d "$ffa") ms). The flash row is $(cmpw "$ff" "$fm") the
materialised fused row and $(cmpw "$ff" "$ob32") op by op.
TEXT
  fi
  cat <<'TEXT'
What lifts the fp32 step is TF32 (precision "tf32"), at TF32's precision,
and 3xTF32 (precision "3xtf32", next table) at fp32's.
TEXT
  echo
fi

# ---- 3xTF32 -------------------------------------------------------------------
x3="$DATA/benchmarking_3xtf32.csv"
if has_rows "$x3"; then
  echo "#### fp32-accurate products on TF32 tensor cores (3xTF32)"
  echo
  cat <<'TEXT'
Precision `3xtf32` (experiments/benchmarking_3xtf32.cfg) keeps everything
fp32 and computes each fp32 product on TF32 tensor cores from a hi + lo
split of both operands: hi(A) hi(B) + hi(A) lo(B) + lo(A) hi(B), one cuBLAS
product over a tripled inner dimension with fp32 accumulation, the small
terms first (kernels/cuda/split_tf32.cu). What it drops is ~2^-22 of each
product. Measured on an H100 (test_kernels_cuda, error relative to the
sum of |a||b|): 5.5e-7 to 8.8e-7 on the model's products where cuBLAS's
true fp32 errs by 0.5e-7 to 3.3e-7 and TF32 by 7.7e-5; the model's gradients
agree with the CPU engine to the same 1e-4 as true fp32 (test_model_cuda).
PyTorch has no such mode for its products (its fp32 rows multiply in
true fp32), but its fp32 SDPA, the memory-efficient kernel on this GPU,
computes attention this way (CUTLASS's 3xTF32). Step times, train step,
context 512, each the mean of its row's timed steps (section T's tables
give medians); the ratio against torch.compile + SDPA + fused AdamW:

TEXT
  # this CSV's rows against PyTorch on their own GPU
  on_gpu "$x3"
  anchor=$(anchor_rows lm_pytorch)
  strong3=$(anchor_rows torch_lm) nocomp=""
  # the fused step with flash on TF32 tensor cores, where measured
  x3f="$DATA/benchmarking_3xtf32_flash.csv"
  fcol=""
  has_rows "$x3f" && fcol=" 3xtf32 fused, flash (ms) |"
  echo "| size | true fp32, best path (ms) | 3xtf32 op by op (ms) | 3xtf32 fused, materialised (ms) |$fcol PyTorch fp32 eager (ms) | PyTorch fp32 compiled (ms) | best 3xtf32 / compiled |"
  echo "|---|--:|--:|--:|${fcol:+--:|}--:|--:|--:|"
  memo X3 "$x3" size,fusion step_ms_mean,gpu_name --where status=ok --sort -utc
  memo XA "$anchor" size,context,precision,mode,config time_ms
  [ -z "$fcol" ] || memo XF "$x3f" size,context step_ms_mean,gpu_name --where status=ok --sort -utc
  for size in small medium large xl 2.7B; do
    f32=$(best "$size" fp32 512 step_ms_mean | cut -d, -f1)
    memo_get X3 "$size" opbyop step_ms_mean; ob=$(memo_fmt %.1f "$MV")
    memo_get X3 "$size" fused step_ms_mean; fu=$(memo_fmt %.1f "$MV")
    memo_get X3 "$size" opbyop gpu_name; og=$MV
    memo_get X3 "$size" fused gpu_name; fg=$MV
    memo_get XA "$size" 512 fp32 train_step reference time_ms; pt=$MV
    ct=$(pt_compiled "$strong3" "$size" 512 fp32 step_ms_mean)
    ff="" fg2=""
    if [ -n "$fcol" ]; then
      memo_get XF "$size" 512 step_ms_mean; ff=$(memo_fmt %.1f "$MV")
      memo_get XF "$size" 512 gpu_name; fg2=$MV
    fi
    [ -n "$ob$fu$ff" ] || continue
    [ -n "$ct" ] || nocomp="$nocomp${nocomp:+,}$size"
    # the fastest of them, and its row's GPU
    b=$(printf '%s %s\n%s %s\n%s %s\n' "$ob" "$og" "$fu" "$fg" "$ff" "$fg2" | awk 'NF > 1' | sort -g | head -n 1)
    bg=${b#* }; b=${b%% *}
    r=""
    [ -n "$ct" ] && [ "$bg" = "$GPU" ] && r=$(awk "BEGIN { printf \"%.2f\", $b / $ct }")
    [ -n "$f32" ] && f32=$(awk "BEGIN { printf \"%.1f\", $f32 }")
    [ -n "$ct" ] && ct=$(awk "BEGIN { printf \"%.1f\", $ct }")
    echo "| $size | ${f32:--} | ${ob:--} | ${fu:--} |${fcol:+ ${ff:--} |} ${pt:--} | ${ct:--} | ${r:--} |"
  done
  echo
  if [ -n "$nocomp" ]; then
    anchor_missing "torch.compile steps" are reports/anchors/torch_lm.py reports/anchors/torch_lm.csv --sizes "$nocomp" --precisions fp32
    echo
  fi
  if ! has_anchor "$anchor"; then
    anchor_missing "eager numbers" are reports/anchors/torch_lm_reference.py reports/anchors/lm_pytorch.csv
    echo
  fi
fi

# ---- fp32 attention on TF32 tensor cores (flash_fp32_tensor_cores.csv) ----
ftc="$DATA/flash_fp32_tensor_cores.csv"
if has_rows "$ftc"; then
  echo "#### fp32 attention on TF32 tensor cores"
  echo
  on_gpu "$ftc"
  tanchor=$(anchor_rows torch_attention)
  fb="$DATA/flash_benchmarking.csv"
  cat <<TEXT
Precisions \`3xtf32\` and \`tf32\` run FlashAttention's five products on
TF32 tensor cores (the mma.sync kernels of kernels/cuda/flash_fwd.cu and
flash_bwd.cu on TF32 parts of each operand; the backward in one pass, dQ
added with atomics, walks cut into chunks where a head has few tiles):
3xTF32 from hi + lo parts at fp32's accuracy (test_attention_cuda holds it
to fp32's 1e-4), TF32 from hi parts alone (1e-2); true fp32 stays on CUDA
cores. Forward+backward TFLOP/s (causal counted as half), batch 1, one
head, causal, on $GPU_KIND (experiments/flash_fp32_tensor_cores.cfg); true
fp32 from flash_benchmarking.csv; PyTorch's fp32 SDPA (its
memory-efficient kernel, itself 3xTF32; reports/anchors/torch_attention.py,
same GPU):

| d_head | seq | fp32 flash (CUDA cores) | 3xtf32 flash | 3xtf32 materialised | tf32 flash | tf32 materialised | PyTorch fp32 SDPA |
|--:|--:|--:|--:|--:|--:|--:|--:|
TEXT
  # ftv PRECISION IMPL D SEQ: the latest ok row's fwd_bwd_tflops, or ""
  memo FT "$ftc" precision,impl,d_head,seq fwd_bwd_tflops --where status=ok --sort -utc
  ftv() { memo_get FT "$@" fwd_bwd_tflops; printf '%s\n' "$MV"; }
  [ ! -f "$fb" ] ||
    memo FB "$fb" precision,impl,d_head,seq fwd_bwd_tflops --where status=ok --where gpu_name="$GPU" --sort -utc
  memo FA "$tanchor" impl,batch,heads,seq,d_head,precision,causal fwd_bwd_tflops --where status=ok
  tool distinct "$ftc" --cols d_head,seq --sep , --where status=ok | sort -t, -k1,1n -k2,2n |
    while IFS=, read -r d t; do
      f32=""
      [ ! -f "$fb" ] || { memo_get FB fp32 flash "$d" "$t" fwd_bwd_tflops; f32=$MV; }
      memo_get FA sdpa 1 1 "$t" "$d" fp32 true fwd_bwd_tflops; pt=$MV
      x3=$(ftv 3xtf32 flash "$d" "$t")
      echo "| $d | $t | $(f1 "$f32") | $(f1 "$x3") | $(f1 "$(ftv 3xtf32 materialized "$d" "$t")") | $(f1 "$(ftv tf32 flash "$d" "$t")") | $(f1 "$(ftv tf32 materialized "$d" "$t")") | $(f1 "$pt") |"
      # for the answer: "D T X3 F32 PT" where all three are measured
      [ -z "$x3" ] || printf '%s %s %s %s %s\n' "$d" "$t" "$x3" "${f32:--}" "${pt:--}" >> "$REPORT_TMP/ftc.rows"
    done
  echo
  if [ -s "$REPORT_TMP/ftc.rows" ]; then
    awk '$4 != "-" { n++; r = $3 / $4; if (!lo || r < lo) lo = r; if (r > hi) hi = r }
      $5 != "-" { m++; if ($3 >= $5) w++
                  else { l = l (l ? ", " : "") $1 "/" $2; lr = (!lr || $3 / $5 < lr) ? $3 / $5 : lr } }
      END {
        a = sprintf("%.1f", lo); b = sprintf("%.1f", hi)
        if (n) printf "3xTF32 flash runs at %s times true fp32 flash'"'"'s rate at the same accuracy.", (a == b ? a : a " to " b)
        if (m) printf " Against PyTorch'"'"'s fp32 SDPA it is as fast or faster at %d of %d shapes.", w, m
        if (l) printf " It loses at d_head/seq %s, down to %.2f of SDPA'"'"'s rate.", l, lr
        if (n || m) printf "\n\n"
      }' "$REPORT_TMP/ftc.rows"
    rm -f "$REPORT_TMP/ftc.rows"
  fi
  if ! has_anchor "$tanchor" ||
     [ "$(tool count "$tanchor" --where status=ok --where impl=sdpa --where batch=1 \
          --where heads=1 --where precision=fp32)" -eq 0 ]; then
    shp=$(tool distinct "$ftc" --cols d_head,seq --sep , --where status=ok |
      awk -F, '{ printf "%s1,1,%s,%s", (NR > 1 ? ";" : ""), $2, $1 }')
    anchor_missing "fp32 SDPA numbers at these shapes" are reports/anchors/torch_attention.py \
      reports/anchors/torch_attention.csv --precisions fp32 --impls sdpa --shapes "'$shp'"
    echo
  fi
  failed_jobs "$ftc" precision,impl,d_head,seq,status,message "precision,impl,d_head,seq,status,message"
fi

# ---- the GPU's clock and power (optimizer_in_backward.csv's NVML readings) ----
oib="$DATA/optimizer_in_backward.csv"
if [ -f "$oib" ] && has_col "$oib" gpu_sm_mhz &&
   [ "$(tool count "$oib" --where status=ok --where 'gpu_sm_mhz!=')" -gt 0 ]; then
  pgpu=$(tool value "$oib" --agg first --where status=ok --where 'gpu_sm_mhz!=' --col gpu_name)
  echo "#### The GPU's clock and power"
  echo
  cat <<TEXT
Section T's training steps (experiments/optimizer_in_backward.cfg, fused +
flash, batch 4, on $pgpu) with what NVML read every 5 ms over their timed
steps: the mean SM clock, the mean power, the share of readings throttled
by power ("power-capped": NVML names its software power cap or its
hardware power brake among the reasons it holds the clock down), and the
energy a step (mean power x median step). The power limit itself is not
recorded. Where the cap throttles, a step's time follows its energy
rather than its work's rate, and work overlapped with other work slows
both.

| size | context | precision | optimizer | step (ms) | SM clock (MHz) | power (W) | power-capped | energy a step (J) |
|---|--:|---|---|--:|--:|--:|--:|--:|
TEXT
  tool select "$oib" --cols size,context,precision,optimizer,step_ms_median,gpu_sm_mhz,gpu_power_w,gpu_power_capped \
      --where status=ok --where adamw_blocks=0 --where 'gpu_sm_mhz!=' --latest size,context,precision,optimizer |
    sed 1d |
    awk -F, 'BEGIN { o["small"]=1; o["medium"]=2; o["large"]=3; o["xl"]=4; o["2.7B"]=5 }
      { print (o[$1] ? o[$1] : 9) "," $0 }' | sort -t, -k4,4 -k1,1n -k3,3n -k5,5 | cut -d, -f2- |
    while IFS=, read -r s c p o st mhz w cap; do
      echo "| $s | $c | $p | ${o%_backward} backward | $(calc %.1f "$st") | $(calc %.0f "$mhz") | $(calc %.0f "$w") | $(calc %.0f "$cap * 100")% | $(calc %.1f "$w * $st / 1000") |"
    done
  echo
  # which rows the cap throttles (most readings), against their mean power
  tool select "$oib" --cols gpu_power_w,gpu_power_capped --where status=ok --where adamw_blocks=0 \
      --where 'gpu_sm_mhz!=' --latest size,context,precision,optimizer | sed 1d |
    awk -F, '{ n++; if ($2 >= 0.5) { k++; if (!c || $1 < c) c = $1 } else if ($1 > u) u = $1 }
      END { printf "%d %d %.0f %.0f\n", n, k, c, u }' > "$REPORT_TMP/capped"
  read -r cn ck cmin umax < "$REPORT_TMP/capped"
  {
    printf 'The cap throttles most readings in %s of these %s steps' "$ck" "$cn"
    if [ "$ck" -gt 0 ] && [ "$ck" -lt "$cn" ] && is_true "$umax < $cmin"; then
      printf ': every step averaging %s W or more, none averaging %s W or less' "$cmin" "$umax"
      echo " (NVML's power is an average; the cap acts on the peaks within it)."
    elif [ "$ck" -gt 0 ] && [ "$ck" -lt "$cn" ]; then
      # the means overlap: a throttled row below an unthrottled one reads as
      # a contradiction unless the text says what a mean leaves out
      printf ', yet mean power does not sort them: a throttled step averages as little as %s W, an unthrottled one as much as %s W.' "$cmin" "$umax"
      echo " The cap acts on the draw moment to moment, which a mean hides: each NVML reading is itself an average over time, and the table averages those again."
    else
      echo "."
    fi
  } | fold -s -w 76 | sed 's/ *$//' 
  echo
fi

exit 0
fi

# ---- (c) warm-up --------------------------------------------------------------
wcsv="$DATA/benchmarking_warmup.csv"
echo "### (c) Warm-up steps"
echo
require_rows "$wcsv" benchmarking_warmup "on a GPU"
# "a, b or c" of a list of words
orlist() { printf '%s\n' "$@" | awk 'NF { a[++n] = $1 } END { for (i = 1; i <= n; i++) printf "%s%s", a[i], (i == n ? "" : i == n - 1 ? " or " : ", ") }'; }
# The warm-up and timed step counts as the rows have them.
wws=$(tool distinct "$wcsv" --cols warmup --where status=ok --sort warmup)
wss=$(tool distinct "$wcsv" --cols steps --where status=ok --sort steps)
# shellcheck disable=SC2086 # one value a word
wall=$(orlist $wws)
# shellcheck disable=SC2046,SC2086
wmore=$(orlist $(printf '%s\n' $wws | awk '$1 > 1'))
# shellcheck disable=SC2086
wsteps=$(orlist $wss)
echo "Training steps at context 512, $wsteps timed after $wall untimed"
o=$(from_other_gpu "$wcsv")
if [ -n "$o" ]; then
  echo "(reports/data/benchmarking_warmup.csv; $o, where (b)'s rows are"
  echo "from the $GPU_KIND: the warm-up's cost, not the times, is the answer here):"
else
  echo "(reports/data/benchmarking_warmup.csv):"
fi
echo
tool table "$wcsv" --cols size,precision,warmup,step_ms_mean,step_ms_std,fwd_ms_mean,gpu_name \
  --head "size,precision,warm-up steps,step mean (ms),step std (ms),forward mean (ms),GPU" \
  --where status=ok --fmt step_ms_mean=%.2f --fmt step_ms_std=%.3f --fmt fwd_ms_mean=%.2f
echo
# wv SIZE PREC WARMUP COL FMT: the latest ok row's value, or "".
memo W "$wcsv" size,precision,warmup step_ms_mean,step_ms_std --where status=ok --sort -utc
wv() { memo_get W "$1" "$2" "$3" "$4"; memo_fmt "$5" "$MV"; }
# The first timed step of each warm-up-0 job against the median of the
# rest (the samples: step_ms of every timed step).
wj="${wcsv%.csv}.samples.jsonl"
first=""
if [ -f "$wj" ]; then
  first=$(awk '
    index($0, "\"warmup\": \"0\"") && index($0, "\"step_ms\": [") {
      sz = $0; sub(/.*"size": "/, "", sz); sub(/".*/, "", sz)
      pr = $0; sub(/.*"precision": "/, "", pr); sub(/".*/, "", pr)
      r = $0; sub(/.*"step_ms": \[/, "", r); sub(/\].*/, "", r)
      n = split(r, a, ", "); if (n < 3) next
      for (i = 2; i <= n; i++) b[i - 1] = a[i]
      for (i = 1; i < n; i++) for (j = i + 1; j < n; j++) if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t }
      m = (n - 1) % 2 ? b[n / 2] : (b[(n - 1) / 2] + b[(n + 1) / 2]) / 2
      k[sz " " pr] = sprintf("%s %s %.1f against %.1f ms (+%.0f ms)", sz, pr, a[1], m, a[1] - m)
    }
    END { for (x in k) print k[x] }' "$wj" | sort)
fi
if [ -n "$first" ]; then
  { printf '%s' "**Answer.** Without warm-up the mean and the standard deviation both grow, all from the first timed step, against the others' median: "
    printf '%s\n' "$first" | awk '{ printf "%s%s", (NR > 1 ? "; " : ""), $0 } END { printf ". " }'
    echo "The extra is about the same at every size, so it is first use, not the model's work: cuBLASLt timing each product shape's candidates, the AdamW moments and workspace allocated, fresh memory touched. One warm-up step pays it all; a row noisier after $wmore than after 1 has one slow step."
  } | fold -s -w 76 | sed 's/ *$//'
  echo
fi
[ -n "$first" ] || echo "Without warm-up the first timed step carries one-time costs."
wstd=1    # a row is steady when its std is at most wstd % of its mean
wmean=2   # and its mean within wmean % of the one-warm-up row's
# Per configuration: steady (or not) with more warm-up than one step.
cls=$(tool distinct "$wcsv" --cols size,precision --where status=ok --sep '|' |
while IFS='|' read -r wsize wprec; do
  [ -n "$wsize" ] || continue
  s0=$(wv "$wsize" "$wprec" 0 step_ms_std %.3f)
  s1=$(wv "$wsize" "$wprec" 1 step_ms_std %.3f)
  m1=$(wv "$wsize" "$wprec" 1 step_ms_mean %.2f)
  if [ -z "$s1" ] || [ -z "$m1" ]; then continue; fi
  num "$wsize $wprec warm-up 1 std" "$s1"; num "$wsize $wprec warm-up 1 mean" "$m1"
  flags=""
  if [ -n "$s0" ]; then
    num "$wsize $wprec warm-up 0 std" "$s0"
    is_true "$s0 > $s1" || flags="${flags}L"
  fi
  if is_true "$s1 > $wstd / 100 * $m1"; then flags="${flags}N"; fi
  noisy=0 smax=0 dmax=0 more=0
  for w in $(tool distinct "$wcsv" --cols warmup --where status=ok --where size="$wsize" \
               --where precision="$wprec" --sort warmup); do
    is_true "$w > 1" || continue
    more=1
    sw=$(wv "$wsize" "$wprec" "$w" step_ms_std %.3f)
    mw=$(wv "$wsize" "$wprec" "$w" step_ms_mean %.2f)
    num "$wsize $wprec warm-up $w std" "$sw"; num "$wsize $wprec warm-up $w mean" "$mw"
    sr=$(calc %.1f "100 * $sw / $mw")
    dr=$(calc %.1f "100 * ($mw - $m1) / $m1")
    dr=${dr#-}
    if is_true "$sr > $wstd || $dr > $wmean"; then noisy=1; fi
    if is_true "$sr > $smax"; then smax=$sr; fi
    if is_true "$dr > $dmax"; then dmax=$dr; fi
  done
  [ "$more" -eq 1 ] || continue
  printf '%s %s|%s|%s|%s|%s\n' "$wsize" "$wprec" "$noisy" "$smax" "$dmax" "${flags:--}"
done)
if [ -n "$cls" ]; then
  printf '%s\n' "$cls" | awk -F'|' -v ws="$wstd" -v wm="$wmean" -v wmo="$wmore" '
    # "a, b and c" of a list l of n, its last item z
    function andl(l, n, z) { return n > 1 ? substr(l, 1, length(l) - length(z) - 2) " and " z : l }
    $2 == 0 { st = st (st ? ", " : "") $1; z = $1; nst++
              if ($3 + 0 > sm) sm = $3 + 0; if ($4 + 0 > dm) dm = $4 + 0 }
    $2 == 1 { no = no (no ? "; " : "") $1 " (std up to " $3 "% of the mean, mean up to " $4 "% off)" }
    $5 ~ /L/ { lo = lo (lo ? ", " : "") $1 }
    $5 ~ /N/ { nn = nn (nn ? ", " : "") $1 }
    END {
      # all steady: the worst measured std and mean offset say how steady
      if (st && !no)
        printf "With %s warm-up steps every configuration is steady: the step\x27s std is at most %.1f%% of its mean, and the mean within %.1f%% of the one-warm-up row\x27s", wmo, sm, dm
      else if (st)
        printf "With %s warm-up steps %s %s steady (std at most %s%% of the mean, mean within %s%% of the one-warm-up row\x27s); noisy: %s", wmo, andl(st, nst, z), (nst > 1 ? "are" : "is"), ws, wm, no
      else
        printf "With %s warm-up steps no configuration is steady (std at most %s%% of the mean, mean within %s%% of the one-warm-up row\x27s): %s", wmo, ws, wm, no
      print "."
      if (lo) print "No lower std after one warm-up step than without: " lo "."
      if (nn) print "Noisy even after one warm-up step: " nn "."
    }' | fold -s -w 76 | sed 's/ *$//'
fi
echo
