#!/bin/sh
# The toy_dtypes and accumulation kinds through the runner on the CPU:
# - mixed_precision_accumulation (cpu row): the handout's values, checked
#   as values: fp32+fp32 close to 10 but not exactly 10 (0.01 is not a
#   binary fraction: 10.000134, the handout's 10.0001); fp16+fp16 far off (9.953125, the handout's 9.9531);
#   the fp16 value promoted and explicitly cast agree exactly (10.0021...);
#   bf16+bf16 stalls at 4; fp32 + bf16 value is 10.0098 (the bf16 rounding
#   of 0.01, times 1000);
# - toy_dtypes_cpu: every tensor fp32 (bits 32, code 0), words in the
#   message, the loss lower after one AdamW step;
# - a cpu job asking for fp16 is refused before any job starts, with
#   file:line.
. "${top_srcdir:-.}/tests/lib.sh"

out="$scratch/data"
"$RUNNER" --out-dir "$out" --only backend=cpu \
  "$top_srcdir/experiments/mixed_precision_accumulation.cfg" 2> "$scratch/acc.err"
status=$?
cat "$scratch/acc.err"
check "mixed_precision_accumulation (cpu) exits 0" [ $status -eq 0 ]
csv="$out/mixed_precision_accumulation.csv"
check "one ok row" [ "$(rows "$csv"):$(column "$csv" status)" = "1:ok" ]
v() { column "$csv" "$1"; }
# awk holds the comparisons: sh has no floating point.
within() { # within VALUE LOW HIGH
  awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x != "" && x + 0 >= lo && x + 0 <= hi) }'
}
# The CSV keeps 6 significant digits; the errors keep the small ones.
check "fp32+fp32 is not exactly 10 but within 2e-4 (error $(v err_fp32_fp32), 1.335e-4 expected)" \
  within "$(v err_fp32_fp32)" 1.3e-4 1.4e-4
check "fp16+fp16 far off: 9.953125 ($(v sum_fp16_fp16))" within "$(v err_fp16_fp16)" -0.0469 -0.0468
check "fp32 accumulator + fp16 value: 10.0021 ($(v sum_fp32_fp16))" within "$(v sum_fp32_fp16)" 10.0020 10.0022
check "the cast variant equals the promoted one exactly" \
  [ "$(v sum_fp32_fp16):$(v err_fp32_fp16)" = "$(v sum_fp32_fp16_cast):$(v err_fp32_fp16_cast)" ]
check "bf16+bf16 stalls at 4 ($(v sum_bf16_bf16))" [ "$(v sum_bf16_bf16)" = 4 ]
check "fp32 accumulator + bf16 value: 10.0098 ($(v sum_fp32_bf16))" within "$(v sum_fp32_bf16)" 10.0097 10.0098
check "errors are sum - 10" \
  awk -v s="$(v sum_bf16_bf16)" -v e="$(v err_bf16_bf16)" 'BEGIN { exit !(s - 10 == e) }'

"$RUNNER" --out-dir "$out" "$top_srcdir/experiments/toy_dtypes_cpu.cfg" 2> "$scratch/toy.err"
status=$?
cat "$scratch/toy.err"
check "toy_dtypes_cpu exits 0" [ $status -eq 0 ]
csv="$out/toy_dtypes_cpu.csv"
check "one ok row" [ "$(rows "$csv"):$(column "$csv" status)" = "1:ok" ]
allfp32=1
for p in param fc1_out ln_out logits loss grads master; do
  [ "$(v ${p}_bits)" = 32 ] && [ "$(v ${p}_dtype)" = 0 ] || allfp32=0
done
check "every tensor fp32 (bits 32, code 0)" [ $allfp32 -eq 1 ]
check "message in words" [ "$(v message)" = "param=fp32 fc1_out=fp32 ln_out=fp32 logits=fp32 loss=fp32 grads=fp32 master=fp32" ]
check "the loss falls after one AdamW step ($(v loss_first) -> $(v loss_after_step))" \
  awk -v a="$(v loss_first)" -v b="$(v loss_after_step)" 'BEGIN { exit !(a > 0 && b > 0 && b < a) }'

# cpu + fp16: refused at the setting's line, before any job.
sed 's/precision = "fp32";/precision = "fp16";/' "$top_srcdir/experiments/toy_dtypes_cpu.cfg" > "$scratch/cpu16.cfg"
line=$(grep -n 'precision = "fp16"' "$scratch/cpu16.cfg" | cut -d: -f1)
(cd "$scratch" && "$RUNNER" --out-dir "$scratch/none" cpu16.cfg) > "$scratch/cpu16.out" 2>&1
status=$?
check "cpu + fp16 exits 2" [ $status -eq 2 ]
check "cpu + fp16: file:line and what is allowed ($(cat "$scratch/cpu16.out"))" \
  grep -q "^cpu16.cfg:$line: precision = \"fp16\" needs the cuda backend (allowed with backend cpu: fp32)" "$scratch/cpu16.out"
check "no job ran" [ ! -e "$scratch/none/toy_dtypes_cpu.csv" ]
finish
