#!/bin/sh
# Writeup section benchmarking_mixed_precision (a): the dtype of each tensor
# of the handout's ToyModel in one training step, measured by running it
# (kind toy_dtypes: the toy records what each tensor was stored or read in),
# next to PyTorch autocast with fp16, and why they differ.
# Reads every toy_dtypes CSV there is: CSV (what mkreport.sh passes: the
# CPU row's toy_dtypes_cpu.csv under make report), DATA/toy_dtypes.csv (the
# GPU rows) and DATA/toy_dtypes_cpu.csv. Environment as for every section.
# It renders parts (a) and (b) of benchmarking_mixed_precision; mkreport.sh
# prints the problem's heading, benchmarking_mixed_precision.sh part (c).
set -eu
. "$REPORT_LIB"

files=""
for f in "${CSV:-}" "$DATA/toy_dtypes.csv" "$DATA/toy_dtypes_cpu.csv"; do
  [ -n "$f" ] && [ -f "$f" ] || continue
  case " $files " in *" $f "*) continue ;; esac
  files="$files $f"
done

renders benchmarking_mixed_precision
nok=0
for f in $files; do nok=$((nok + $(tool count "$f" --where status=ok))); done
if [ "$nok" -eq 0 ]; then
  echo "_Not yet measured: run \`./runner experiments/toy_dtypes.cfg\` (GPU) and"
  todo "toy_dtypes.csv (\`./runner experiments/toy_dtypes.cfg\`)"
  echo "\`./runner experiments/toy_dtypes_cpu.cfg\`._"
  echo
  exit 0
fi
echo "### (a) The toy model's data types under mixed precision"
echo

cat <<'TEXT'
The handout's ToyModel (fc1 and fc2 without bias, ReLU, LayerNorm(10)),
mean squared error, one training step. Each dtype is what the toy recorded
while it ran: for the weights, the precision the products read them in;
for the rest, the dtype of the buffer written. The PyTorch row is
autocast(float16) by its documented op lists, the handout's expected answer.

TEXT

name() {
  case $1 in
    0) printf 'fp32' ;;
    1) printf 'bf16' ;;
    2) printf 'fp16' ;;
    *) printf 'not recorded' ;;
  esac
}
echo "| run | weights as the products read them | fc1 output | LayerNorm output | logits | loss | gradients | master weights |"
echo "|---|---|---|---|---|---|---|---|"
for f in $files; do
  tool distinct "$f" --cols backend,precision --where status=ok --sort -backend,precision --sep '|' |
  while IFS='|' read -r b p; do
    [ -n "$b" ] || continue
    line="| ours, $b, $p"
    for c in param fc1_out ln_out logits loss grads master; do
      code=$(tool value "$f" --col ${c}_dtype --where status=ok --where backend="$b" \
               --where precision="$p" --sort -utc --agg first --fmt %.0f)
      line="$line | $(name "$code")"
    done
    echo "$line |"
  done
done
echo "| PyTorch autocast(float16), GPU | fp16 (fp32 parameters, cast for each matmul) | fp16 | fp32 | fp16 | fp32 | fp32 | fp32 |"
echo

gpu=""
[ -f "$DATA/toy_dtypes.csv" ] && gpu=$(tool value "$DATA/toy_dtypes.csv" --col fc1_out_dtype \
  --where status=ok --where precision=fp16 --sort -utc --agg first --default "" --fmt %.0f)
if [ -z "$gpu" ]; then
  echo "_The GPU rows (bf16, fp16) are not measured yet: run"
  echo "\`./runner experiments/toy_dtypes.cfg\` on a GPU._"
  echo
fi

cat <<'TEXT'
**Answer.** As autocast, except that fc1's output and the logits stay
fp32: our policy (README, "Reading rows": Precision) rounds only the *inputs* of
each product to 16 bits and writes its fp32 accumulator, where autocast
returns fp16. Master weights, gradients and AdamW state are fp32, and
LayerNorm and the loss compute in fp32, in both.

TEXT
echo "### (b) Layer normalisation and 16-bit formats"
echo
cat <<'TEXT'
**Answer.** The mean and the variance (a sum of squares that can overflow
fp16's 65504 or lose small terms) and the division by sqrt(var + eps) (eps
= 1e-5 is below fp16's smallest normal). bf16 has fp32's range, but its 8
significant bits make those sums coarse, so LayerNorm stays in fp32, as
autocast keeps it for bf16 too.

TEXT
