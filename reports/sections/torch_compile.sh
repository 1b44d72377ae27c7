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
cat <<TEXT
We have no compiler to switch on; the comparison that answers the question
is between our two paths on the same model, batch 4, context 512 (5 warm-up
and 10 timed steps). **Op by op** runs one kernel per operation with fp32
activations and materialised attention, as PyTorch eager runs the
reference (rows of benchmarking_script). **Fused** folds the residual add
into the next RMSNorm, runs q, k, v as one product, fuses RoPE with the head
split, SwiGLU and the cross-entropy gradient in one pass each, writes the
16-bit weight copy in the AdamW pass, keeps activations in the products'
input dtype, and recomputes the cheap ones (norm outputs, SwiGLU product) in
backward instead of keeping them; attention either materialised or
FlashAttention-2. Times in ms (mean of the timed steps); peak is the
engine's allocation peak of the train step. GPU: $gpus. PyTorch: eager and
torch.compile on an H100 80GB HBM3 (shared/anchors).

TEXT
v() { # FILE SIZE PREC MODE COL [extra where...]
  f=$1 s=$2 p=$3 m=$4 c=$5; shift 5
  [ -f "$f" ] || { printf ''; return; }
  tool value "$f" --sort -utc --agg first --default "" --where status=ok \
    --where size="$s" --where context=512 --where precision="$p" --where mode="$m" \
    "$@" --col "$c" --fmt %.1f
}
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
echo "One extra, untimed training step of each job with every operation"
echo "bracketed by CUDA events (the lm job's message): milliseconds per kernel"
echo "family, largest first. The brackets add launch time, so the sum is a"
echo "little above the timed step."
echo
echo "| size | precision | attention | step (ms) | ms by kernel family |"
echo "|---|---|---|--:|---|"
for p in bf16 fp32; do
  for s in $sizes; do
    for a in flash materialized; do
      st=$(v "$csv" "$s" $p train_step step_ms_mean --where attention=$a)
      [ -n "$st" ] || continue
      msg=$(tool value "$csv" --sort -utc --agg first --default "" --where status=ok \
              --where size="$s" --where context=512 --where precision=$p \
              --where mode=train_step --where attention=$a --col message |
            sed 's/^ms per step by kernel family: //')
      echo "| $s | $p | $a | $st | $msg |"
    done
  done
done
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
  cat <<TEXT
The fused bf16 train step (flash attention, batch 4) with its kernels
launched one by one from the host ("direct") and with forward's and
backward's kernels recorded once as CUDA graphs and replayed each step
(\`cuda_graphs = true\`; the first step runs directly, the second records,
later steps replay; AdamW is one kernel either way). Rows of
experiments/cuda_graphs.cfg, GPU: $ggpus; ms, mean of 10 timed steps after
5 warm-up steps; "replays" counts the forward and backward calls that were
replays (2 per step after the first two).

| size | context | forward direct / graphs | backward direct / graphs | step direct | step graphs | saved | replays |
|---|--:|--:|--:|--:|--:|--:|--:|
TEXT
  gv() { # SIZE CTX GRAPHS COL
    tool value "$gcsv" --sort -utc --agg first --default "" --where status=ok \
      --where size="$1" --where context="$2" --where cuda_graphs="$3" --col "$4" --fmt "${5:-%.2f}"
  }
  for ctx in $(tool distinct "$gcsv" --cols context --where status=ok --sort context); do
    for s in $(tool distinct "$gcsv" --cols params,size --where status=ok --sort params --sep '|' | cut -d'|' -f2); do
      sd=$(gv "$s" "$ctx" false step_ms_mean); sg=$(gv "$s" "$ctx" true step_ms_mean)
      [ -n "$sd" ] && [ -n "$sg" ] || continue
      saved=$(awk "BEGIN { printf \"%.2f ms (%.1f%%)\", $sd - $sg, 100 * ($sd - $sg) / $sd }")
      echo "| $s | $ctx | $(gv "$s" "$ctx" false fwd_ms_mean) / $(gv "$s" "$ctx" true fwd_ms_mean) | $(gv "$s" "$ctx" false bwd_ms_mean) / $(gv "$s" "$ctx" true bwd_ms_mean) | $sd | $sg | $saved | $(gv "$s" "$ctx" true graph_replays %.0f) |"
    done
  done
  echo
  cat <<'TEXT'
A replay saves the host's per-kernel work (argument checks, cuBLASLt's
plan lookup, the launch itself). In relative terms it pays most where
kernels are shortest (the small model at context 128); in milliseconds the
saving does not shrink with the model: wherever a run of short kernels
(norms, RoPE, the loss, the small models' products) takes the GPU less time
than the host needs to launch it, the GPU waits, and at the start of each
phase it waits for the first launches. Graphs need the step's shapes fixed
(a new batch shape records again) and no host work inside a phase: the
data-parallel strategies, whose gradient hooks start collectives from the
host during backward, run directly.
TEXT
  echo
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
echo "_Training step (batch 4 x 512 tokens) against parameter count, log scales;"
echo "dashed: PyTorch eager on an H100 (shared/anchors)._"
echo
