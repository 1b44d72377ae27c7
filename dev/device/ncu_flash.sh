#!/bin/bash
# There, after refresh.sh: where a flash kernel's warps wait. Profiles one
# launch of KERNEL (a regex on the kernel's name, default the wgmma
# backward) inside the attention job at batch 1 x HEADS x SEQ, d_head DH
# (default the leaderboard's shape: 16 x 16384, 64), bf16, causal, with
# Nsight Compute's full set and source counters, then prints the
# warp-state breakdown and the SASS lines with the most stall samples.
# The CSVs (details, source) return as $OUT/ncu.tgz for a closer look.
#   KERNEL=flash_fwd_wg bash dev/device/ncu_flash.sh
set -u
kernel=${KERNEL:-flash_bwd_wg}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
d=/tmp/ncu_flash
rm -rf "$d" && mkdir -p "$d"
# warm-up passes launch the kernel too: skip them, profile a timed one
"$ncu" --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 \
  --set full --import-source yes -f -o "$d/prof" \
  ./worker --kind attention --result "$d/result" world_size=1 backend=cuda \
  precision=bf16 passes=2 min_loop_ms=0 warmup=1 seed=336 impl=flash \
  batch=1 heads="${HEADS:-16}" seq="${SEQ:-16384}" d_head="${DH:-64}" causal=true \
  > "$d/run.log" 2>&1 || { tail -n 20 "$d/run.log"; exit 1; }
"$ncu" --import "$d/prof.ncu-rep" --page details --csv > "$d/details.csv"
"$ncu" --import "$d/prof.ncu-rep" --page source --csv --print-source sass > "$d/sass.csv"
tar czf "$OUT/ncu.tgz" -C "$d" details.csv sass.csv run.log
python3 - "$d/details.csv" "$d/sass.csv" <<'PY'
import csv, sys
det = list(csv.DictReader(open(sys.argv[1])))
print("kernel:", det[0].get("Kernel Name", "?")[:100] if det else "no rows")
for r in det:   # throughput and warp-state lines
    sec, name = r.get("Section Name", ""), r.get("Metric Name", "")
    if sec in ("GPU Speed Of Light Throughput", "Warp State Statistics",
               "Compute Workload Analysis", "Scheduler Statistics") or "Stall" in name:
        print(f"  {sec[:30]:30} {name[:48]:48} {r.get('Metric Value', '')} {r.get('Metric Unit', '')}")
rows = list(csv.reader(open(sys.argv[2])))
head = rows[0] if rows else []
print("source columns:", head)
try:
    key = next(i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All"))
except StopIteration:
    sys.exit("no stall-sampling column: see the header above")
src = next((i for i, h in enumerate(head) if h == "Source"), 1)
num = lambda v: float(v.replace(",", "") or 0) if v.replace(",", "").replace(".", "").isdigit() else 0.0
body = [r for r in rows[1:] if len(r) > key]
total = sum(num(r[key]) for r in body) or 1
print(f"top stalled SASS lines ({int(total)} samples in all):")
for r in sorted(body, key=lambda r: -num(r[key]))[:40]:
    print(f"  {100 * num(r[key]) / total:5.1f}%  {r[0]:>6}  {r[src][:90]}")
PY
