#!/bin/sh
# The writeup from partial sweeps: a user who cuts an experiment to one
# precision, one mode, a few sizes or one implementation, whose largest
# jobs ran out of memory, or who has measured only some of an appendix's
# experiments, still gets each section, its answers in words over what was
# measured. Each case is the committed CSVs with one file cut (csvtool
# select --where), some of its rows turned into out-of-memory rows, or the
# file removed, and one problem rendered alone (mkreport.sh --only); it
# must render (exit 0) with no awk or shell error, no range of one value
# ("51 to 51 times"), no empty range ("% to %"), no count over nothing
# ("0 of 0") and no ratio of nothing ("0.00x").
#
# Skipped under the sanitizers and in a quick check (report_test, in
# tests/lib.sh).
. "${top_srcdir:-.}/tests/lib.sh"
report_test

# PROBLEM=EXPERIMENT (mkreport.sh --only), the CSVs to cut (several
# joined by +, each cut alike), the rows kept ("-": the files removed), and
# words the section must still say, if any (its answer over the precision
# left)
while read -r only file where says; do
  [ -n "$only" ] || continue
  data="$scratch/data"
  rm -rf "$data" "$scratch/out"
  cp -R "$top_srcdir/reports/data" "$data"
  cut=""
  for f in $(printf '%s' "$file" | tr '+' ' '); do
    if [ "$where" = - ]; then
      rm -f "$data/$f".*
      cut="$cut${cut:+, }$f.csv missing"
    elif [ "${where#oom:}" != "$where" ]; then
      # the rows matching every A=V (joined by &) failed: out of memory on
      # a smaller GPU, their status oom (csvtool writes both lists alike,
      # so the failed rows' lines can be taken out of the whole by grep)
      set --
      for c in $(printf '%s' "${where#oom:}" | tr '&' ' '); do set -- "$@" --where "$c"; done
      "$csvtool" select "$top_srcdir/reports/data/$f.csv" "$@" | tail -n +2 > "$scratch/hit"
      { "$csvtool" select "$top_srcdir/reports/data/$f.csv" | grep -v -x -F -f "$scratch/hit"
        sed 's/,ok,/,oom,/' "$scratch/hit"; } > "$data/$f.csv"
      cut="$cut${cut:+, }$f.csv's $(wc -l < "$scratch/hit") rows at ${where#oom:} out of memory"
    else
      "$csvtool" select "$top_srcdir/reports/data/$f.csv" --where "$where" > "$data/$f.csv"
      cut="$cut${cut:+, }$f.csv cut to $where"
    fi
  done
  sh "$top_srcdir/reports/mkreport.sh" --data "$data" --out "$scratch/out" --csvtool "$csvtool" \
    --gnuplot '' --problems "$list" --only "$only" > "$scratch/log" 2>&1
  rc=$?
  check "${only%%=*} renders with $cut (exit $rc)" [ $rc -eq 0 ]
  if [ $rc -ne 0 ]; then tail -n 5 "$scratch/log"; continue; fi
  md="$scratch/out/writeup.md"
  errs=$(grep -E 'awk:|[Ss]yntax error|not a number|unexpected' "$scratch/log" | head -n 3)
  check "${only%%=*} with $cut: no error on the way${errs:+ ($errs)}" [ -z "$errs" ]
  odd=$(grep -v '^|' "$md" | grep -oE '(^|[ (])(([0-9][0-9.]*[x%]?) to \3([ ,.)]|$)|% to %|0 of 0 | 0\.00x)' | head -n 3 | tr '\n' ';')
  check "${only%%=*} with $cut: no empty or one-value range${odd:+ ($odd)}" [ -z "$odd" ]
  [ -z "$says" ] ||
    check "${only%%=*} with $cut: says \"$says\"" sh -c 'tr "\n" " " < "$1" | grep -qF "$2"' - "$md" "$says"
done <<EOF
nsys_profile=nsys_profile benchmarking_script mode=forward
nsys_profile=nsys_profile benchmarking_script precision=bf16
nsys_profile=nsys_profile benchmarking_script size=medium|large
benchmarking_script=benchmarking_script benchmarking_script context=256
flash_benchmarking=flash_benchmarking flash_benchmarking impl=flash
flash_benchmarking=flash_benchmarking flash_benchmarking d_head=64
fsdp_accounting=fsdp_accounting fsdp_accounting precision=bf16
ddp_appendix=ddp_bucketed_benchmarking ddp_copy_engine -
ddp_appendix=ddp_bucketed_benchmarking zero1_copy_engine -
torch_compile_2024=pytorch_layernorm norm_model -
benchmarking_appendix=benchmarking_script flash_fp32_tensor_cores precision=tf32
communication_accounting=communication_accounting communication_accounting device_gb=80 needs both 80 and 95
benchmarking_script=benchmarking_script benchmarking_script oom:size=2.7B&precision=fp32 a forward pass takes
flash_benchmarking=flash_benchmarking flash_benchmarking oom:impl=materialized&seq=65536 as fast at the longest, seq 32768
training_step=optimizer_in_backward optimizer_in_backward oom:size=2.7B&context=512 None yet: the goal's shape
leaderboard_2026=leaderboard_2026 leaderboard_2026 oom:checkpoint_layers=4 Jobs that failed
fsdp=fsdp_accounting fsdp_accounting oom:world_size=2&precision=fp32 Jobs that failed
naive_ddp_benchmarking=naive_ddp_benchmarking naive_ddp_benchmarking precision=bf16 Naive DDP takes
minimal_ddp_flat_benchmarking=minimal_ddp_flat_benchmarking minimal_ddp_flat_benchmarking precision=fp32 batching saves
ddp_overlap_individual_parameters_benchmarking=ddp_overlap_individual_parameters_benchmarking ddp_overlap_individual_parameters_benchmarking precision=bf16 Overlapping takes the 2-GPU step
ddp_bucketed_benchmarking=ddp_bucketed_benchmarking ddp_bucketed_benchmarking precision=fp32 best 2-GPU step is
ddp_bucketed_benchmarking=ddp_bucketed_benchmarking ddp_bucketed_benchmarking precision=bf16 the best bucketed step is
ddp_appendix=ddp_bucketed_benchmarking ddp_bucketed_benchmarking precision=bf16 the second GPU's cost is backward itself growing
ddp_appendix=ddp_bucketed_benchmarking ddp_copy_engine+ddp_copy_engine_fused precision=bf16 Our DDP claim, against the strongest PyTorch: 40.7 ms (bf16)
ddp_appendix=ddp_bucketed_benchmarking ddp_copy_engine+ddp_copy_engine_fused precision=fp32 Our DDP claim, against the strongest PyTorch: 104.3 ms (fp32)
EOF
finish
