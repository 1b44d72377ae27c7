"""What every anchor script shares: rows appended to a CSV as they are
measured (header written when the file is new or empty, else checked; a
file from before a column was added gets it, empty), each ending in the
torch version and the UTC time, and echoed to stdout, so a run cut short
keeps every row it finished; for a script's --resume, whether the file
already answers a configuration; and the GPU's clock and power over a
timed stretch (GpuMonitor), as our rows have them."""
import csv
import ctypes
import datetime
import gc
import os
import threading

import torch

# Statuses that answer a configuration: measuring it again would say the
# same (an error may be transient: --resume tries it again).
ANSWERS = ("ok", "oom", "unsupported")


def _older(have, want):
    """The file's columns are ours less some that came later, in our
    order (and it keeps the trailing torch and utc)."""
    it = iter(want)
    return have[-2:] == want[-2:] and all(c in it for c in have)


def _add_columns(path, want):
    """Rewrite an older file with our header, its rows' cells under their
    columns and the ones it lacks empty."""
    with open(path, encoding="ascii", newline="") as f:
        rows = list(csv.DictReader(f))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii", newline="") as f:
        w = csv.DictWriter(f, fieldnames=want, restval="", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


class GpuMonitor:
    """The GPU's SM clock, power and power-cap throttling, read every 5 ms
    by a thread through NVML (the driver's libnvidia-ml.so.1, opened with
    ctypes: no Python package needed) while the `with` block runs, as
    kernels/cuda/gpu_monitor.c does for our rows. After it: sm_mhz and
    power_w, the readings' means, and power_capped, the share throttled by
    the power cap (software cap or hardware power brake); all None where
    NVML or the GPU is not there."""
    POWER_REASONS = 0x4 | 0x80
    NVML_CLOCK_SM = 1

    def __init__(self, bus_id):
        self.bus_id = bus_id
        self.sm_mhz = self.power_w = self.power_capped = None
        self._nvml = self._dev = None
        try:
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
            dev = ctypes.c_void_p()
            if nvml.nvmlInit_v2() == 0 and nvml.nvmlDeviceGetHandleByPciBusId_v2(
                    bus_id.encode(), ctypes.byref(dev)) == 0:
                self._nvml, self._dev = nvml, dev
        except OSError:
            pass

    def _sample(self):
        n, d = self._nvml, self._dev
        mhz, mw, why = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        while not self._stop.wait(0.005):
            if (n.nvmlDeviceGetClockInfo(d, self.NVML_CLOCK_SM, ctypes.byref(mhz)) == 0
                    and n.nvmlDeviceGetPowerUsage(d, ctypes.byref(mw)) == 0
                    and n.nvmlDeviceGetCurrentClocksThrottleReasons(d, ctypes.byref(why)) == 0):
                self._reads.append((mhz.value, mw.value / 1000,
                                    bool(why.value & self.POWER_REASONS)))

    def __enter__(self):
        self._reads, self._stop = [], threading.Event()
        self._thread = None
        if self._nvml:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread:
            self._stop.set()
            self._thread.join()
        r = self._reads
        if r:
            self.sm_mhz = sum(x[0] for x in r) / len(r)
            self.power_w = sum(x[1] for x in r) / len(r)
            self.power_capped = sum(x[2] for x in r) / len(r)

    def cells(self):
        """sm_mhz, power_w and power_capped as CSV cells ("" where unread)."""
        return tuple("" if v is None else f"{v:.{p}f}" for v, p in
                     ((self.sm_mhz, 0), (self.power_w, 1), (self.power_capped, 2)))


def release_gpu():
    """Free what the last configuration measured in this process left:
    its compiled graphs, reference cycles (a gradient hook holding its
    optimizer holds the parameters) and the allocator's cached blocks.
    Returns the bytes still allocated, which would count in the next
    configuration's peak (max_memory_allocated) if measured on top."""
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated()


def bus_id(device=0):
    """The PCI bus id of a CUDA device, as NVML takes it ("" where this
    PyTorch's device properties lack it: GpuMonitor then reads nothing)."""
    p = torch.cuda.get_device_properties(device)
    try:
        return f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    except AttributeError:
        return ""


class AnchorCSV:
    def __init__(self, path, columns):
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        header = ",".join(columns + ["torch", "utc"])
        if not new:
            with open(path, encoding="ascii") as f:
                have = f.readline().rstrip("\n")
            if have != header and not _older(have.split(","), header.split(",")):
                raise SystemExit(f"{path}: its header is\n  {have}\nthis script writes\n"
                                 f"  {header}\n(another script's file: give a new file)")
            if have != header:
                _add_columns(path, header.split(","))
        self.columns = columns
        self.answered = []   # the rows that answer a configuration (ANSWERS)
        if not new:
            with open(path, encoding="ascii", newline="") as f:
                self.answered = [r for r in csv.DictReader(f)
                                 if r.get("status") in ANSWERS]
        self.f = open(path, "a", encoding="ascii")
        if new:
            self.f.write(header + "\n")

    def answers(self, **key):
        """Whether a row of the file (or of this run) with these column
        values has a status in ANSWERS: what --resume skips. Values compare
        as text, as row() writes them."""
        return any(all(r.get(k) == str(v) for k, v in key.items())
                   for r in self.answered)

    def row(self, *cells):
        utc = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        line = ",".join(str(c) for c in cells + (torch.__version__, utc))
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()
        r = dict(zip(self.columns, (str(c) for c in cells)))
        if r.get("status") in ANSWERS:
            self.answered.append(r)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
