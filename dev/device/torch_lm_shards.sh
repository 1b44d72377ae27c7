#!/bin/bash
# There: the PyTorch LM anchors (reports/anchors/torch_lm.py) spread over
# every GPU of the machine, so a 2- or 8-GPU loan measures 2 or 8 times as
# many configurations per second of device time. The configurations
# (size, precision, config, context) form one queue that every GPU pops,
# in the order given; each GPU's runs are pinned to its own slice of the
# physical cores (both hyperthreads of each, from lscpu; inductor's
# compile workers to that slice), so one process's compiling does not
# take cores, or a core's other thread, from another's timed steps. Each
# GPU's process resumes from its shard, a copy of OUT (--resume skips what
# it answers), and after each configuration the shard's new rows are
# appended to OUT, so OUT holds every row measured so far even when the
# loan ends mid-queue (shards and logs: OUT's folder/shards).
#   SIZES=small,xl PRECISIONS=bf16,fp32 CONTEXTS=128,256,512,1024 \
#     CONFIGS=compiled,compiled_inbwd UNIT_S=330 \
#     bash dev/device/torch_lm_shards.sh /tmp/res/torch_lm.csv
# QUEUE=FILE: lines "size precision config context" in place of the
#   product of SIZES, PRECISIONS, CONFIGS and CONTEXTS.
# UNIT_S: the limit for one configuration (SIGINT: rows kept).
# WAIT_FOR="G:FILE ...": GPU G starts on the queue once FILE exists (the
#   caller's own work on that GPU first).
# Launch-bound sizes (small, compiled without CUDA graphs) feel a busy
# neighbour most: measure those on a machine of their own when it matters.
set -u
out=${1:?usage: torch_lm_shards.sh OUT.csv}
: "${SIZES:=}" "${PRECISIONS:=bf16}" "${CONTEXTS:=128,256,512,1024}"
: "${CONFIGS:=compiled,compiled_inbwd}" "${UNIT_S:=330}"
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
dir=$(dirname "$out")/shards   # the queue, the shards and their logs
rm -rf "$dir"; mkdir -p "$dir"
if [ -n "${QUEUE:-}" ]; then
  grep -v '^[[:space:]]*$' "$QUEUE" > "$dir/queue"
else
  [ -n "$SIZES" ] || { echo "torch_lm_shards.sh: SIZES or QUEUE, please" >&2; exit 1; }
  for s in ${SIZES//,/ }; do for p in ${PRECISIONS//,/ }; do
    for c in ${CONFIGS//,/ }; do for x in ${CONTEXTS//,/ }; do
      echo "$s $p $c $x"; done; done; done; done > "$dir/queue"
fi
base=$(wc -l < "$out")
pop() { flock "$dir/queue.lock" sh -c 'head -n 1 "$1"; sed -i 1d "$1"' sh "$dir/queue"; }
# merge G: shard G's rows past those already in OUT, appended to it (a
# shard begun from an empty OUT has a header of its own: OUT keeps one)
merge() {
  flock "$dir/out.lock" sh -c '
    s=$1 m=$2 out=$3
    n=$(wc -l < "$s"); done=$(cat "$m")
    if [ "$done" -eq 0 ] && [ -s "$out" ]; then done=1; fi
    tail -n +$((done + 1)) "$s" >> "$out"
    echo "$n" > "$m"' sh "$dir/shard$1.csv" "$dir/merged$1" "$out"
}
for ((g = 0; g < ngpu; g++)); do
  cp "$out" "$dir/shard$g.csv"
  echo "$base" > "$dir/merged$g"
  (
    for w in ${WAIT_FOR:-}; do
      [ "${w%%:*}" = "$g" ] || continue
      while [ ! -e "${w#*:}" ]; do sleep 5; done
    done
    while item=$(pop) && [ -n "$item" ]; do
      set -- $item
      t0=$SECONDS
      CUDA_VISIBLE_DEVICES=$g TORCHINDUCTOR_COMPILE_THREADS=$per \
        timeout -s INT "$UNIT_S" taskset -c "$(cpus_of $g)" \
        python3 reports/anchors/torch_lm.py "$dir/shard$g.csv" --resume \
        --sizes "$1" --precisions "$2" --configs "$3" --contexts "$4" \
        >> "$dir/gpu$g.log" 2>&1
      echo "gpu $g: $item: rc $?, $((SECONDS - t0)) s"
      merge "$g"
    done
  ) &
done
wait
added=$(($(wc -l < "$out") - base))
[ "$base" -gt 0 ] || [ "$added" -eq 0 ] || added=$((added - 1))   # the header
echo "torch_lm_shards.sh: $added rows added to $out (logs: $dir)"
