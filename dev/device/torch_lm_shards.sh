#!/bin/bash
# There: the PyTorch LM anchors (reports/anchors/torch_lm.py) spread over
# every GPU of the machine, so a 2- or 8-GPU loan measures 2 or 8 times as
# many configurations per second of device time. Each (size, precision)
# goes to one GPU, round robin, in the order given; each GPU runs its
# share one after another, pinned to its own slice of the physical cores
# (both hyperthreads of each, from lscpu; inductor's compile workers to
# that slice), so one process's compiling does not take cores, or a
# core's other thread, from another's timed steps. Each shard resumes from
# a copy of OUT (--resume skips what it answers); at the end the new rows
# of every shard are appended to OUT (shards and logs: OUT's folder/shards).
#   SIZES=small,xl PRECISIONS=bf16,fp32 CONTEXTS=128,256,512,1024 \
#     CONFIGS=compiled,compiled_inbwd UNIT_S=420 \
#     bash dev/device/torch_lm_shards.sh /tmp/res/torch_lm.csv
# UNIT_S: the limit for one (size, precision) (SIGINT: rows kept).
# Launch-bound sizes (small, compiled without CUDA graphs) feel a busy
# neighbour most: measure those on a machine of their own when it matters.
set -u
out=${1:?usage: torch_lm_shards.sh OUT.csv}
: "${SIZES:?}" "${PRECISIONS:=bf16}" "${CONTEXTS:=128,256,512,1024}"
: "${CONFIGS:=compiled,compiled_inbwd}" "${UNIT_S:=420}"
ngpu=$(nvidia-smi -L | wc -l)
[ "$ngpu" -ge 1 ] || { echo "torch_lm_shards.sh: no GPU" >&2; exit 1; }
# GPU g's logical CPUs: the g-th of ngpu equal runs of physical cores
cpus_of() {
  lscpu -p=CPU,CORE | grep -v '^#' | sort -t, -k2,2n -k1,1n |
    awk -F, -v g="$1" -v n="$ngpu" '
      { cpu[NR] = $1; core[NR] = $2; if (!($2 in seen)) { seen[$2] = nc++ } }
      END { per = int(nc / n); lo = g * per; hi = lo + per
            for (i = 1; i <= NR; i++) { c = seen[core[i]]
              if (c >= lo && c < hi) printf "%s%s", (k++ ? "," : ""), cpu[i] } }'
}
per=$(( $(lscpu -p=CORE | grep -vc '^#') / ngpu ))   # logical CPUs a GPU
[ -f "$out" ] || : > "$out"
units=()
for s in ${SIZES//,/ }; do
  for p in ${PRECISIONS//,/ }; do units+=("$s $p"); done
done
dir=$(dirname "$out")/shards   # the shards and their logs, beside OUT
rm -rf "$dir"; mkdir -p "$dir"
for ((g = 0; g < ngpu; g++)); do
  cp "$out" "$dir/shard$g.csv"
  (
    for ((u = g; u < ${#units[@]}; u += ngpu)); do
      set -- ${units[$u]}
      t0=$SECONDS
      CUDA_VISIBLE_DEVICES=$g TORCHINDUCTOR_COMPILE_THREADS=$per \
        timeout -s INT "$UNIT_S" taskset -c "$(cpus_of $g)" \
        python3 reports/anchors/torch_lm.py "$dir/shard$g.csv" --resume \
        --sizes "$1" --precisions "$2" --contexts "$CONTEXTS" --configs "$CONFIGS" \
        > "$dir/gpu$g.$1.$2.log" 2>&1
      echo "gpu $g: $1 $2: rc $?, $((SECONDS - t0)) s"
    done
  ) &
done
wait
base=$(wc -l < "$out")
for ((g = 0; g < ngpu; g++)); do
  # a shard written to an empty OUT starts with its header: keep one
  if [ "$base" -eq 0 ] && [ ! -s "$out" ]; then cat "$dir/shard$g.csv" >> "$out"
  else tail -n +$((base > 0 ? base + 1 : 2)) "$dir/shard$g.csv" >> "$out"; fi
done
added=$(($(wc -l < "$out") - base))
[ "$base" -gt 0 ] || [ "$added" -eq 0 ] || added=$((added - 1))   # the header
echo "torch_lm_shards.sh: $added rows added to $out (logs: $dir)"
