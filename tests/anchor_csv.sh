#!/bin/sh
# reports/anchors/anchor_csv.py, what every PyTorch anchor script appends
# through, without PyTorch (a stub module gives torch.__version__): a new
# file gets its header, a file of another header is refused, an older file
# (ours less later columns) gets them, empty, keeping its rows, and
# answers() (what --resume skips) holds for ok, oom and unsupported rows,
# from the file and from this run, compared as text the way row() writes
# them, and not for error rows, other values or another GPU. GpuMonitor
# on a machine without NVML (or with no GPU at that bus id) reads nothing
# and says so with empty cells. Skips (77) without python3.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 > /dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
mkdir -p "$scratch/stub/torch"
echo '__version__ = "0.0+stub"' > "$scratch/stub/torch/__init__.py"
cat > "$scratch/t.py" <<'PY'
import os, sys
from anchor_csv import AnchorCSV, GpuMonitor
path, other = sys.argv[1], sys.argv[2]
cols = ["gpu", "size", "context", "status"]
with AnchorCSV(path, cols) as out:
    out.row("G", "xl", 128, "ok")
    out.row("G", "xl", 256, "error")
    out.row("G", "2.7B", 512, "oom")
    assert out.answers(gpu="G", size="xl", context=128), "this run's ok row"
    assert not out.answers(gpu="G", size="xl", context=256), "an error row"
with AnchorCSV(path, cols) as out:
    assert out.answers(gpu="G", size="xl", context=128), "the file's ok row"
    assert out.answers(gpu="G", size="2.7B", context=512), "the file's oom row"
    assert not out.answers(gpu="H", size="xl", context=128), "another GPU"
    assert not out.answers(gpu="G", size="xl", context=1024), "another value"
    out.row("G", "xl", 1024, "unsupported")
    assert out.answers(gpu="G", size="xl", context=1024), "an unsupported row"
with open(path) as f:
    assert f.readline() == "gpu,size,context,status,torch,utc\n", "the header"
with open(other, "w") as f:
    f.write("gpu,size\n")
try:
    AnchorCSV(other, cols)
    raise AssertionError("another header accepted")
except SystemExit as e:
    assert "its header is" in str(e), str(e)
older = other + ".old"
with open(older, "w") as f:
    f.write("gpu,size,status,torch,utc\nG,xl,ok,1.0,2026-01-01T00:00:00Z\n")
with AnchorCSV(older, cols) as out:
    assert out.answers(gpu="G", size="xl"), "the older file's ok row"
    out.row("G", "2.7B", 512, "ok")
with open(older) as f:
    got = f.read()
want = ("gpu,size,context,status,torch,utc\n"
        "G,xl,,ok,1.0,2026-01-01T00:00:00Z\n")
assert got.startswith(want) and got.count("\n") == 3, got
with GpuMonitor("ffff:ff:1f.7") as mon:   # no GPU answers there
    pass
assert mon.cells() == ("", "", ""), mon.cells()
print("ok")
PY
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$scratch/stub:$top_srcdir/reports/anchors" \
  python3 "$scratch/t.py" "$scratch/a.csv" "$scratch/b.csv" > "$scratch/out" 2>&1
check "anchor_csv.py: header, refusal of another, older files, answers(), GpuMonitor" \
  sh -c "grep -qx ok '$scratch/out' || { cat '$scratch/out'; false; }"
finish
