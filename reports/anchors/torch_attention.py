"""The attention anchors: PyTorch's attention at our experiments' shapes,
measured on the GPU our rows come from.

Implementations (--impls):
  sdpa            F.scaled_dot_product_attention, PyTorch's own choice of
                  backend (on Hopper: cuDNN or FlashAttention-2)
  sdpa_cudnn      the same forced to the cuDNN backend
  sdpa_flash      the same forced to the FlashAttention-2 backend
  materialized    the handout's attention (scores, mask, softmax, product)
                  under torch.compile, which fuses the elementwise work
  eager           the same without torch.compile (torch_compile (a))
Timing: triton.testing.do_bench medians (its warm-up, repetition over
about 100 ms, L2 flushed between runs) of the forward, the backward alone
(retain_graph) and forward + backward. Inputs are random normal, shape
(batch, heads, seq, d_head). An implementation that runs out of memory is
a row with status oom; an SDPA backend that has no kernel for the shape,
unsupported; any other failure, error (its message printed).

    python3 reports/anchors/torch_attention.py OUT.csv --shapes B,H,T,D[;...]
        [--precisions bf16] [--causal 1] [--impls sdpa,sdpa_cudnn,...]
        [--resume]

--resume skips what OUT.csv already answers on this GPU (anchor_csv.py).

Appends rows with columns: source, gpu, impl, batch, heads, seq, d_head,
precision, causal, status, fwd_ms, bwd_ms, fwd_bwd_ms, fwd_bwd_tflops,
fwd_sm_mhz, bwd_sm_mhz, fwd_bwd_sm_mhz (the GPU's mean SM clock over each
do_bench, NVML; empty without it), torch, utc. TFLOP/s counts the matrix products only: 4 B H T^2 D forward
(two products), 2.5 times that backward (five), 3.5 times in all; halved
when causal (FlashAttention's convention).
"""
import argparse
import math

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

from anchor_csv import AnchorCSV, GpuMonitor, bus_id

DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
BACKEND = {"sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
           "sdpa_flash": SDPBackend.FLASH_ATTENTION}


def materialized(q, k, v, causal):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        t = q.shape[-2]
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


MATERIALIZED = torch.compile(materialized)


def attend(impl, q, k, v, causal):
    if impl == "eager":
        return materialized(q, k, v, causal)
    if impl == "materialized":
        return MATERIALIZED(q, k, v, causal)
    if impl in BACKEND:
        with sdpa_kernel(BACKEND[impl]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def measure(impl, b, h, t, d, dt, causal):
    q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=dt, requires_grad=True)
               for _ in range(3))
    g = torch.randn(b, h, t, d, device="cuda", dtype=dt)
    o = attend(impl, q, k, v, causal)
    bus, mhz = bus_id(q.device), []

    def bench(fn, **kw):   # do_bench's time, and the clock over it
        with GpuMonitor(bus) as mon:
            ms = triton.testing.do_bench(fn, **kw)
        mhz.append(mon.cells()[0])
        return ms
    fwd = bench(lambda: attend(impl, q, k, v, causal))
    bwd = bench(lambda: o.backward(g, retain_graph=True), grad_to_none=[q, k, v])

    def both():
        attend(impl, q, k, v, causal).backward(g)
    fb = bench(both, grad_to_none=[q, k, v])
    return fwd, bwd, fb, mhz


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--shapes", default="1,16,16384,64")
    ap.add_argument("--precisions", default="bf16")
    ap.add_argument("--causal", type=int, default=1)
    ap.add_argument("--impls", default="sdpa,sdpa_cudnn,sdpa_flash,materialized")
    ap.add_argument("--resume", action="store_true",
                    help="skip what OUT.csv already answers on this GPU")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False   # fp32 means fp32
    # The backward is timed alone with retain_graph, which compiled
    # graphs with donated buffers refuse.
    torch._functorch.config.donated_buffer = False
    gpu = torch.cuda.get_device_name(0)
    causal = bool(a.causal)
    columns = ["source", "gpu", "impl", "batch", "heads", "seq", "d_head",
               "precision", "causal", "status", "fwd_ms", "bwd_ms",
               "fwd_bwd_ms", "fwd_bwd_tflops", "fwd_sm_mhz", "bwd_sm_mhz",
               "fwd_bwd_sm_mhz"]
    with AnchorCSV(a.out, columns) as out:
        for shape in a.shapes.split(";"):
            b, h, t, d = map(int, shape.split(","))
            for prec in a.precisions.split(","):
                for impl in a.impls.split(","):
                    if a.resume and out.answers(gpu=gpu, impl=impl, batch=b, heads=h, seq=t,
                                                d_head=d, precision=prec,
                                                causal=str(causal).lower()):
                        continue
                    status, cols = "ok", [""] * 7
                    try:
                        fwd, bwd, fb, mhz = measure(impl, b, h, t, d, DT[prec], causal)
                        flops = 3.5 * 4 * b * h * t * t * d / (2 if causal else 1)
                        cols = [f"{fwd:.4f}", f"{bwd:.4f}", f"{fb:.4f}",
                                f"{flops / fb / 1e9:.1f}", *mhz]
                    except torch.OutOfMemoryError:
                        status = "oom"
                    except RuntimeError as e:
                        status = ("unsupported" if "No available kernel" in str(e)
                                  else "error")
                        print(f"# {impl} {shape} {prec}: {str(e).splitlines()[0]}")
                    torch.cuda.empty_cache()
                    out.row("reports/anchors/torch_attention.py", gpu, impl, b, h,
                            t, d, prec, str(causal).lower(), status, *cols)

if __name__ == "__main__":
    main()
