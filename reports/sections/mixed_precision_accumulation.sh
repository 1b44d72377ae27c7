#!/bin/sh
# Writeup section mixed_precision_accumulation: the handout's four sums of
# 0.01 (plus bf16), per backend, with why each comes out as it does.
# Environment as for every section (mkreport.sh): DATA, CSV, OUT, CSVTOOL.
# Every number comes from the CSV; the text explains the rounding.
# mkreport.sh prints the problem's heading; this prints its body.
set -eu
. "$REPORT_LIB"
csv="${CSV:-$DATA/mixed_precision_accumulation.csv}"

renders mixed_precision_accumulation
require_rows "$csv" mixed_precision_accumulation
n=$(tool value "$csv" --col additions --where status=ok --agg first)
x=$(tool value "$csv" --col value --where status=ok --agg first)

cat <<TEXT
s starts at 0 and \`s += x\` runs $n times with x = $x, one addition after
the other as in the handout's loop: on the GPU in one thread with the
device's own fp16 / bf16 additions (\`backend = cuda\`), and on the CPU with
fp16 / bf16 emulated in software, the exact sum rounded to nearest even after
every addition (\`backend = cpu\`). The exact answer is $n x $x; the error
column is s minus it.

TEXT

echo "| accumulator s | value x | backend | s | error |"
echo "|---|---|---|--:|--:|"
for var in fp32_fp32 fp16_fp16 fp32_fp16 fp32_fp16_cast bf16_bf16 fp32_bf16; do
  case $var in
    fp32_fp32) acc=fp32; val=fp32 ;;
    fp16_fp16) acc=fp16; val=fp16 ;;
    fp32_fp16) acc=fp32; val="fp16 (promoted)" ;;
    fp32_fp16_cast) acc=fp32; val="fp16, cast to fp32" ;;
    bf16_bf16) acc=bf16; val=bf16 ;;
    fp32_bf16) acc=fp32; val="bf16 (promoted)" ;;
  esac
  for b in $(tool distinct "$csv" --cols backend --where status=ok --sort backend); do
    s=$(tool value "$csv" --col "sum_$var" --where status=ok --where backend="$b" \
          --sort -utc --agg first --fmt %.7g)
    e=$(tool value "$csv" --col "err_$var" --where status=ok --where backend="$b" \
          --sort -utc --agg first --fmt %+.3e)
    echo "| $acc | $val | $b | $s | $e |"
  done
done
echo

# Quoted values (the CPU row if there is one, else the GPU's).
q() {
  tool value "$csv" --col "$1" --where status=ok --sort backend,-utc --agg first --fmt "$2"
}
s32=$(q sum_fp32_fp32 %g); e32=$(q err_fp32_fp32 %.2e)
s16=$(q sum_fp16_fp16 %g); s3=$(q sum_fp32_fp16 %g)
sb=$(q sum_bf16_bf16 %g); s6=$(q sum_fp32_bf16 %g)
agree=""
if [ "$(tool distinct "$csv" --cols backend --where status=ok | wc -l)" -gt 1 ]; then
  same=1
  for var in fp32_fp32 fp16_fp16 fp32_fp16 fp32_fp16_cast bf16_bf16 fp32_bf16; do
    d=$(tool distinct "$csv" --cols "sum_$var" --where status=ok | wc -l)
    [ "$d" -eq 1 ] || same=0
  done
  if [ $same -eq 1 ]; then
    agree="The GPU and the software emulation agree on every sum: the
additions are fully determined by the formats and round-to-nearest-even."
  else
    agree="**The GPU and the CPU emulation disagree on some sum (above)**: one of
them does not round as the format says."
  fi
fi

cat <<TEXT
Why: 0.01 has no exact binary form. In fp32 it is stored with a relative
error near 2^-25, and each addition rounds again, so after $n additions s is
$s32 ($e32 off): accurate to about 4 significant digits. In fp16 the
accumulator has 11 significant bits: once s passes 8 its spacing is
2^-7 = 0.0078 (below 8, 2^-8), so each +0.01 (itself stored as 0.010002)
lands on a multiple of that spacing: +0.0078 per step above 8, +0.0117
between 4 and 8; the errors do not cancel, and s ends at $s16. Accumulating in fp32 instead
keeps every addition nearly exact, so what remains is the fp16 rounding of
x itself (0.010002 x $n): $s3. Whether the fp16 value is promoted implicitly
or cast explicitly makes no difference: promotion is that same exact
conversion to fp32, so the two rows are equal. bf16 has only 8 significant
bits: when s reaches 4 its spacing is 2^-5 = 0.031, and 4 + 0.01 rounds back
to 4, so s stalls at $sb for good; with an fp32 accumulator the bf16 value's
own rounding (0.01 becomes 0.010010) is all that is left: $s6. The lesson
for mixed precision: values may be stored in 16 bits, but sums (matrix
product accumulators, reductions, optimizer updates) need fp32. $agree

TEXT
