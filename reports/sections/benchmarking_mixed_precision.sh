#!/bin/sh
# Writeup section benchmarking_mixed_precision (c): per model size, the
# forward, forward+backward and full training step times in fp32, bf16 and
# fp16, the speed-up over fp32, next to PyTorch's eager anchors
# (reports/anchors/lm_pytorch_h100.csv). Reads DATA/benchmarking_mixed_precision.csv
# (rows of kind lm; columns are selected by name, never by position).
# Environment as for every section (mkreport.sh): DATA, CSV, OUT, CSVTOOL.
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
csv="${CSV:-$DATA/benchmarking_mixed_precision.csv}"
anchor="$(dirname "$here")/anchors/lm_pytorch_h100.csv"
. "$REPORT_LIB"

echo "## 1.4 benchmarking_mixed_precision (c): fp32, bf16 and fp16 step times"
echo
if [ ! -f "$csv" ] || [ "$(tool count "$csv" --where status=ok)" -eq 0 ]; then
  echo "_Not yet measured: run \`./runner experiments/benchmarking_mixed_precision.cfg\`"
  echo "on a GPU (it writes reports/data/benchmarking_mixed_precision.csv)._"
  echo
  exit 0
fi
gpus=$(tool distinct "$csv" --cols gpu_name --where status=ok | awk 'NF { printf "%s%s", (n++ ? ", " : ""), $0 }')
cat <<TEXT
Each time is the mean over the timed steps of an \`lm\` job (batch and
vocabulary as in the rows, random tokens): forward alone (mode forward),
forward + backward (mode forward_backward, its step time) and the full
training step with AdamW (mode train_step). bf16 and fp16 round the inputs of
every matrix product and accumulate in fp32; weights, gradients and optimizer
state stay fp32. "x fp32" is the fp32 time divided by this one (above 1: faster).
PyTorch: eager, from shared/anchors, where a number exists for the same
size, context and precision. GPU: $gpus.

TEXT
echo "| size | context | precision | forward (ms) | x fp32 | fwd+bwd (ms) | x fp32 | step (ms) | x fp32 | PyTorch fwd / fwd+bwd / step (ms) |"
echo "|---|--:|---|--:|--:|--:|--:|--:|--:|---|"
# time SIZE CONTEXT PRECISION MODE COLUMN: the latest ok row's value, or "".
time_of() {
  tool value "$csv" --sort -utc --agg first --default "" --where status=ok \
    --where size="$1" --where context="$2" --where precision="$3" \
    --where mode="$4" --col "$5" --fmt %.2f
}
ratio() { # fp32 time / this time
  if [ -n "$1" ] && [ -n "$2" ]; then awk "BEGIN { printf \"%.2f\", $1 / $2 }"; else printf -- '-'; fi
}
pt() {
  v=$(tool value "$anchor" --agg first --default "" --where size="$1" --where context="$2" \
        --where precision="$3" --where mode="$4" --where source="PyTorch 2.11 eager" --col time_ms)
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
cat <<'TEXT'
What to expect: the matrix products dominate the larger models, and with
16-bit inputs the tensor cores run several times faster than true fp32 (no
TF32), so the speed-up grows with model size; the small model's step is also
bound by the fp32 elementwise work (norms, softmax, AdamW) and by launches,
which mixed precision does not change. bf16 and fp16 cost the same here: both
are 16-bit inputs to the same fp32-accumulating products.

TEXT
