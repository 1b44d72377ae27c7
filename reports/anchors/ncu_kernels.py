"""Nsight Compute's kernel list of an lm job, the independent check of the
lm kind's kernel profile (kernel_profile: CUPTI's activity records, the
source Nsight Systems reads; Nsight Systems is not on our GPU machines,
Nsight Compute is). reports/anchors/ncu_kernels.sh runs the jobs of
experiments/nsys_profile_check.cfg with the profile off (CUPTI takes one
client) under

    ncu --clock-control none --metrics gpu__time_duration.sum --csv
        --print-units base --print-kernel-base demangled --log-file LOG

and this sums LOG's launches by kernel, the name shortened as ours are
(kernels/cuda/kprof.cu: short_name): no return type, no parameter list.

    python3 reports/anchors/ncu_kernels.py OUT.csv LOG SIZE CONTEXT PRECISION
        WARMUP STEPS GPU COMMIT

Appends one row a kernel: source, gpu, size, context, precision, warmup,
steps, kernel, launches, ms (the launches' GPU time summed, each kernel
alone on the GPU, as ncu serialises them), ncu (its version), commit, utc.
The whole job's launches: set-up, WARMUP + STEPS timed steps, and the
extra step timed op by op (the nsys_profile section divides by the run's
count and says how the names and counts compare with ours).
"""
import csv
import datetime
import os
import re
import subprocess
import sys

COLS = ["source", "gpu", "size", "context", "precision", "warmup", "steps",
        "kernel", "launches", "ms", "ncu", "commit", "utc"]


def short_name(s):
    """kprof.cu's short_name on a demangled name."""
    if s.startswith("void "):
        s = s[5:]
    anon = "(anonymous namespace)"
    start = len(anon) if s.startswith(anon) else 0
    angle = 0
    for i in range(start, len(s)):
        c = s[i]
        if c == "<":
            angle += 1
        elif c == ">":
            angle -= 1
        elif c == "(" and angle == 0:
            return s[:i]
    return s


def main():
    if len(sys.argv) != 10:
        sys.exit(__doc__)
    out, log, size, ctx, prec, warmup, steps, gpu, commit = sys.argv[1:]
    with open(log) as f:   # ==PROF== lines first, then the CSV
        rows = list(csv.DictReader(l for l in f if l.startswith('"')))
    if not rows:
        sys.exit(f"{log}: no kernel rows")
    sums = {}
    for r in rows:
        if r["Metric Name"] != "gpu__time_duration.sum" or r["Metric Unit"] != "ns":
            sys.exit(f"{log}: unexpected metric {r['Metric Name']} ({r['Metric Unit']})")
        k = short_name(r["Kernel Name"])
        n, ns = sums.get(k, (0, 0))
        sums[k] = (n + 1, ns + int(r["Metric Value"].replace(",", "")))
    # NCU_VERSION, NCU_UTC: a LOG brought from the GPU machine, read here
    ver = os.environ.get("NCU_VERSION") or subprocess.run(
        ["ncu", "--version"], capture_output=True, text=True).stdout
    # `ncu --version` says "Copyright (c) 2018-2025" a line before "Version X"
    m = re.search(r"Version (\d[\d.]*)", ver) or re.fullmatch(r"\s*(\d[\d.]*)\s*", ver)
    ver = m.group(1) if m else ""
    utc = os.environ.get("NCU_UTC") or datetime.datetime.now(
        datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    new = not os.path.exists(out)
    if not new:
        with open(out) as f:
            if f.readline().strip() != ",".join(COLS):
                sys.exit(f"{out}: another header (want {','.join(COLS)})")
    with open(out, "a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if new:
            w.writerow(COLS)
        for k in sorted(sums):
            n, ns = sums[k]
            w.writerow(["reports/anchors/ncu_kernels.sh", gpu, size, ctx, prec, warmup,
                        steps, k, n, f"{ns / 1e6:.6f}", ver, commit, utc])


if __name__ == "__main__":
    main()
