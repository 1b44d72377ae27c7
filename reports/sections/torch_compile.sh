#!/bin/sh
# Writeup section torch_compile (b): the op-by-op path (one kernel per
# operation, as PyTorch eager) against the fused path, with attention
# materialised or FlashAttention-2, every size, forward, forward+backward
# and the full step, fp32 and bf16, next to PyTorch eager and
# torch.compile's numbers (reports/anchors/lm_pytorch_h100.csv); a figure
# of step time against model size per precision and path; and where the
# time of the fused path goes, by kernel family (each row's message).
# Reads DATA/torch_compile.csv (fused rows), DATA/benchmarking_script.csv
# (op-by-op rows at context 512) and DATA/cuda_graphs.csv (the fused bf16
# step with and without CUDA graphs). Environment as for every section
# (mkreport.sh): DATA, CSV, OUT, CSVTOOL, GNUPLOT.
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
reports=$(dirname "$here")
csv="${CSV:-$DATA/torch_compile.csv}"
ref="$DATA/benchmarking_script.csv"
anchor="$reports/anchors/lm_pytorch_h100.csv"
GNUPLOT=${GNUPLOT:-}
. "$REPORT_LIB"

echo "## 2.2 torch_compile (b): op by op against the fused path"
echo
if [ ! -f "$csv" ] || [ "$(tool count "$csv" --where status=ok)" -eq 0 ]; then
  echo "_Not yet measured: run \`./runner experiments/torch_compile.cfg\` on a GPU._"
  echo
  exit 0
fi
gpus=$(tool distinct "$csv" --cols gpu_name --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
vals() { # FILE COL [where...]: the distinct values of COL in FILE's ok rows, "a or b"
  f=$1 c=$2; shift 2
  tool distinct "$f" --cols "$c" --where status=ok "$@" | tr '\n' ';' | sed 's/;$//; s/;/ or /g'
}
# Batch and steps as the rows have them (the op-by-op rows' if they differ).
tb=$(vals "$csv" batch --where context=512)
tw=$(vals "$csv" warmup --where context=512)
ts=$(vals "$csv" steps --where context=512)
runs="batch $tb, context 512 ($tw warm-up and $ts timed steps)"
if [ -f "$ref" ]; then
  rb=$(vals "$ref" batch --where context=512 --where fusion=opbyop)
  rw=$(vals "$ref" warmup --where context=512 --where fusion=opbyop)
  rs=$(vals "$ref" steps --where context=512 --where fusion=opbyop)
  [ -z "$rb$rw$rs" ] || [ "$rb|$rw|$rs" = "$tb|$tw|$ts" ] ||
    runs="$runs; the op-by-op rows: batch $rb, $rw warm-up and $rs timed steps"
fi
cat <<TEXT
We have no compiler to switch on; the comparison that answers the question
is between our two paths on the same model, $runs. **Op by op** runs one kernel per operation with fp32
activations and materialised attention, as PyTorch eager runs the
reference (rows of benchmarking_script). **Fused** folds the residual add
into the next RMSNorm, runs q, k, v as one product, fuses RoPE with the head
split, SwiGLU and the cross-entropy gradient in one pass each, writes the
16-bit weight copy in the AdamW pass, keeps activations in the products'
input dtype, and recomputes the cheap ones (norm outputs, SwiGLU product) in
backward instead of keeping them; attention either materialised or
FlashAttention-2. Times in ms (mean of the timed steps); peak is the
engine's allocation peak of the run in each table's own mode (forward
alone, forward+backward, or the full train step). GPU: $gpus. PyTorch: eager and
torch.compile on an H100 80GB HBM3 (shared/anchors).

TEXT
vf() { # FMT FILE SIZE PREC MODE COL [extra where...]
  fm=$1 f=$2 s=$3 p=$4 m=$5 c=$6; shift 6
  [ -f "$f" ] || { printf ''; return; }
  tool value "$f" --sort -utc --agg first --default "" --where status=ok \
    --where size="$s" --where context=512 --where precision="$p" --where mode="$m" \
    "$@" --col "$c" --fmt "$fm"
}
v() { vf %.1f "$@"; }
anc() { # SIZE PREC MODE SOURCE
  tool value "$anchor" --agg first --default "" --where size="$1" --where context=512 \
    --where precision="$2" --where mode="$3" --where source="$4" --col time_ms
}
x() { # speed-up a/b
  if [ -n "$1" ] && [ -n "$2" ]; then awk "BEGIN { printf \"%.2f\", $1 / $2 }"; else printf -- '-'; fi
}
gib() { [ -n "$1" ] && awk "BEGIN { printf \"%.1f\", $1 / 1024 }" || printf -- '-'; }
sizes=$(tool distinct "$csv" --cols params,size --where status=ok --sort params --sep '|' | cut -d'|' -f2)
for mode in forward forward_backward train_step; do
  echo "### $mode"
  echo
  echo "| size | precision | op by op | fused, materialised | fused, flash | speed-up (flash) | PyTorch eager | torch.compile | peak GiB op by op / fused flash |"
  echo "|---|---|--:|--:|--:|--:|--:|--:|---|"
  for p in fp32 bf16; do
    for s in $sizes; do
      o=$(v "$ref" "$s" $p $mode step_ms_mean --where fusion=opbyop)
      fm=$(v "$csv" "$s" $p $mode step_ms_mean --where fusion=fused --where attention=materialized)
      ff=$(v "$csv" "$s" $p $mode step_ms_mean --where fusion=fused --where attention=flash)
      [ -n "$o$fm$ff" ] || continue
      pe=$(anc "$s" $p $mode "PyTorch 2.11 eager")
      pc=$(anc "$s" $p $mode "PyTorch 2.11 torch.compile + SDPA")
      po=$(v "$ref" "$s" $p $mode engine_peak_mib --where fusion=opbyop)
      pf=$(v "$csv" "$s" $p $mode engine_peak_mib --where fusion=fused --where attention=flash)
      echo "| $s | $p | $(d "$o") | $(d "$fm") | $(d "$ff") | $(x "$o" "$ff") | $(d "$pe") | $(d "$pc") | $(gib "$po") / $(gib "$pf") |"
    done
  done
  echo
done

failed_jobs "$csv" size,precision,attention,mode,status,message \
  "size,precision,attention,mode,status,message"

# ---- where the time goes ---------------------------------------------------
echo "### Where the fused step's time goes"
echo
# Each row's families summed and set against its timed step (unrounded),
# so that the text says on which side of the step the sums fall.
ktab='' kn=0 kab=0 kbe=0 klo='' khi='' kabs=''
for p in bf16 fp32; do
  for s in $sizes; do
    for a in flash materialized; do
      st=$(v "$csv" "$s" $p train_step step_ms_mean --where attention=$a)
      [ -n "$st" ] || continue
      msg=$(tool value "$csv" --sort -utc --agg first --default "" --where status=ok \
              --where size="$s" --where context=512 --where precision=$p \
              --where mode=train_step --where attention=$a --col message)
      case $msg in
        'ms per step by kernel family: '*) ;;
        *) ktab="$ktab| $s | $p | $a | $st | - | - | $(d "$msg") |
"; continue ;;
      esac
      msg=${msg#ms per step by kernel family: }
      str=$(vf %.4f "$csv" "$s" $p train_step step_ms_mean --where attention=$a)
      sum=$(printf '%s\n' "$msg" | awk -F'; ' '{ for (i = 1; i <= NF; i++) { n = split($i, w, " "); t += w[n] } }
        END { printf "%.4f", t }')
      num "train step (ms)" "$str"; num "sum of the kernel families (ms)" "$sum"
      dp=$(calc "%+.1f" "100 * ($sum - $str) / $str")
      kn=$((kn + 1))
      if is_true "$sum >= $str"; then kab=$((kab + 1)); else kbe=$((kbe + 1)); fi
      if [ -z "$klo" ] || is_true "$dp < $klo"; then klo=$dp; fi
      if [ -z "$khi" ] || is_true "$dp > $khi"; then khi=$dp; fi
      kabs="$kabs$(calc "%.4f" "($sum > $str ? $sum - $str : $str - $sum) / $str * 100")
"
      ktab="$ktab| $s | $p | $a | $st | $(calc "%.1f" "$sum") | $dp% | $msg |
"
    done
  done
done
echo "One extra, untimed training step of each job with every operation"
echo "bracketed by CUDA events (the lm job's message): milliseconds per kernel"
echo "family, largest first, and their sum. That step is not one of the timed"
echo "ones, and its brackets add event records between the kernels, so the sum"
echo "need not match the timed step's mean (column \"sum vs step\")."
if [ "$kn" -gt 0 ]; then
  kmed=$(printf '%s' "$kabs" | sort -n | awk '{ a[NR] = $1 }
    END { printf "%.1f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  if [ "$kbe" -eq 0 ]; then
    side="above the timed step in all $kn rows"
  elif [ "$kab" -eq 0 ]; then
    side="below the timed step in all $kn rows"
  else
    side="above the timed step in $kab of the $kn rows and below it in $kbe"
  fi
  echo "Here the sum is $side, differing from it by $klo% to $khi%"
  echo "(median of the differences, either way: $kmed%)."
fi
echo
echo "| size | precision | attention | step (ms) | sum (ms) | sum vs step | ms by kernel family |"
echo "|---|---|---|--:|--:|--:|---|"
printf '%s' "$ktab"
echo

# ---- CUDA graphs ---------------------------------------------------------------
gcsv="$DATA/cuda_graphs.csv"
echo "### CUDA graphs: where they pay"
echo
if [ ! -f "$gcsv" ] || [ "$(tool count "$gcsv" --where status=ok)" -eq 0 ]; then
  echo "_Not yet measured: run \`./runner experiments/cuda_graphs.cfg\` on a GPU._"
  echo
else
  ggpus=$(tool distinct "$gcsv" --cols gpu_name --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
  gprec=$(vals "$gcsv" precision); gatt=$(vals "$gcsv" attention); gb=$(vals "$gcsv" batch)
  gw=$(vals "$gcsv" warmup); gs=$(vals "$gcsv" steps)
  # model_run_graphed (model/model.c): per phase the first call runs
  # directly, the second records and launches the recording, later calls
  # launch it; graph_replays counts the launches of a recording, so a run of
  # W + S steps has 2 (W + S - 1).
  case $gw$gs in
    '' | *[!0-9]*) rule="two per step from the second step on" ;;
    *)
      rexp=$((2 * (gw + gs - 1)))
      rbad=$(tool count "$gcsv" --where status=ok --where cuda_graphs=true --where graph_replays!="$rexp")
      rule="two per step from the second step on, 2 x ($gw + $gs - 1) = $rexp a run"
      [ "$rbad" -eq 0 ] || rule="$rule ($rbad of the rows below show another count)" ;;
  esac
  cat <<TEXT
The fused $gprec train step ($gatt attention, batch $gb) with its kernels
launched one by one from the host ("direct") and with forward's and
backward's kernels recorded once as CUDA graphs and replayed
(\`cuda_graphs = true\`; the first step runs them directly, the second
records them and launches the recording, later steps launch it again; AdamW
is one kernel either way). Rows of experiments/cuda_graphs.cfg, GPU:
$ggpus; ms, mean of $gs timed steps after $gw warm-up steps; "replays"
counts the forward and backward calls launched from a recording: $rule.

| size | context | forward direct / graphs | backward direct / graphs | step direct | step graphs | saved | replays |
|---|--:|--:|--:|--:|--:|--:|--:|
TEXT
  gv() { # SIZE CTX GRAPHS COL
    tool value "$gcsv" --sort -utc --agg first --default "" --where status=ok \
      --where size="$1" --where context="$2" --where cuda_graphs="$3" --col "$4" --fmt "${5:-%.2f}"
  }
  # The largest relative saving, and the smallest and largest in ms.
  bp='' bs='' bc='' lo='' los='' loc='' hi='' his='' hic=''
  for ctx in $(tool distinct "$gcsv" --cols context --where status=ok --sort context); do
    for s in $(tool distinct "$gcsv" --cols params,size --where status=ok --sort params --sep '|' | cut -d'|' -f2); do
      sd=$(gv "$s" "$ctx" false step_ms_mean); sg=$(gv "$s" "$ctx" true step_ms_mean)
      [ -n "$sd" ] && [ -n "$sg" ] || continue
      sms=$(calc "%.2f" "$sd - $sg"); spc=$(calc "%.1f" "100 * ($sd - $sg) / $sd")
      if [ -z "$bp" ] || is_true "$spc > $bp"; then bp=$spc bs=$s bc=$ctx; fi
      if [ -z "$lo" ] || is_true "$sms < $lo"; then lo=$sms los=$s loc=$ctx; fi
      if [ -z "$hi" ] || is_true "$sms > $hi"; then hi=$sms his=$s hic=$ctx; fi
      echo "| $s | $ctx | $(gv "$s" "$ctx" false fwd_ms_mean) / $(gv "$s" "$ctx" true fwd_ms_mean) | $(gv "$s" "$ctx" false bwd_ms_mean) / $(gv "$s" "$ctx" true bwd_ms_mean) | $sd | $sg | $sms ms ($spc%) | $(gv "$s" "$ctx" true graph_replays %.0f) |"
    done
  done
  echo
  if [ -n "$bp" ]; then
    cat <<TEXT
A replay saves the host's per-kernel work (argument checks, cuBLASLt's
plan lookup, the launch itself). In relative terms it pays most where
kernels are shortest (here the $bs model at context $bc, $bp%); in
milliseconds the saving runs from $lo ms ($los, context $loc) to $hi ms
($his, context $hic): wherever a run of short kernels (norms, RoPE, the
loss, the small models' products) takes the GPU less time than the host
needs to launch it, the GPU waits, and at the start of each phase it waits
for the first launches. Graphs need the step's shapes fixed (a new batch
shape records again) and no host work inside a phase: the data-parallel
strategies, whose gradient hooks start collectives from the host during
backward, run directly.
TEXT
    echo
  fi
fi

# ---- figure -----------------------------------------------------------------
if [ -z "$GNUPLOT" ]; then
  echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
  echo
  exit 0
fi
tmp="$OUT/torch_compile.tmp.csv"
{
  echo "series,params,step_ms"
  for p in fp32 bf16; do
    for path in opbyop fused+materialized fused+flash eager; do
      for s in $sizes; do
        case $path in
          opbyop) t=$(v "$ref" "$s" $p train_step step_ms_mean --where fusion=opbyop); f="$ref" ;;
          fused+materialized) t=$(v "$csv" "$s" $p train_step step_ms_mean --where attention=materialized); f="$csv" ;;
          fused+flash) t=$(v "$csv" "$s" $p train_step step_ms_mean --where attention=flash); f="$csv" ;;
          eager) t=$(anc "$s" $p train_step "PyTorch 2.11 eager"); f="$csv" ;;
        esac
        n=$(tool value "$csv" --agg first --default "" --where size="$s" --col params)
        [ -n "$t" ] && [ -n "$n" ] || continue
        label="$p $path"
        [ "$path" = eager ] && label="$p PyTorch eager"
        echo "$label,$n,$t"
      done
    done
  done
} > "$tmp"
"$GNUPLOT" -c "$reports/lm_paths.gp" "$tmp" "$OUT/torch_compile.svg"
rm -f "$tmp"
echo "![Training step time against model size per precision and path](torch_compile.svg)"
echo
echo "_Training step (batch $tb x 512 tokens) against parameter count, log scales;"
echo "dashed: PyTorch eager on an H100 (shared/anchors)._"
echo
