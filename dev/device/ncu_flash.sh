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
# the source page starts with a "Kernel Name" row; the header follows
hi = next((i for i, r in enumerate(rows) if "Source" in r), None)
if hi is None:
    sys.exit("no header row with a Source column in the source page")
head, body = rows[hi], rows[hi + 1:]
col = {h: i for i, h in enumerate(head)}
def num(r, c):
    try:
        return float(r[col[c]].replace(",", ""))
    except (KeyError, IndexError, ValueError):
        return 0.0
stalls = [h for h in head if h.startswith("stall_") and "(Not" not in h]
tot = {s: sum(num(r, s) for r in body) for s in stalls}
T = sum(tot.values()) or 1
print(f"stall reasons ({int(T)} samples):")
for s, v in sorted(tot.items(), key=lambda x: -x[1])[:10]:
    print(f"  {s:26} {100 * v / T:5.1f}%")
mix = {}
for r in body:
    w = r[col["Source"]].split()
    op = (w[1] if w and w[0].startswith("@") and len(w) > 1 else w[0] if w else "").split(".")[0]
    mix[op] = mix.get(op, 0) + num(r, "Instructions Executed")
TI = sum(mix.values()) or 1
print(f"instructions executed by opcode ({int(TI)} warp instructions):")
for op, v in sorted(mix.items(), key=lambda x: -x[1])[:16]:
    print(f"  {op:12} {100 * v / TI:5.1f}%")
key = "Warp Stall Sampling (All Samples)"
print("top stalled SASS lines (share of samples, main reason):")
for r in sorted(body, key=lambda r: -num(r, key))[:25]:
    why = max(stalls, key=lambda c: num(r, c)) if stalls else "?"
    print(f"  {100 * num(r, key) / T:5.1f}%  {why[6:]:16} {r[col['Source']][:80]}")
PY
