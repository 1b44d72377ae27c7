"""The norm anchors (the 2024 edition's pytorch_layernorm and
rmsnorm_benchmarking): PyTorch's RMSNorm and LayerNorm at the shapes of
experiments/pytorch_layernorm.cfg, measured on the GPU our rows come from.

Implementations (--impls), fp32, normalising over the last dimension:
  rmsnorm           x * rsqrt(mean(x^2) + eps) * g, eager (the handout's)
  rmsnorm_compiled  the same under torch.compile
  rms_norm          torch.nn.functional.rms_norm (PyTorch's own kernel)
  layernorm         torch.nn.functional.layer_norm with weight and bias
Timing: triton.testing.do_bench medians of the forward and of forward +
backward (a random upstream gradient; the inputs' gradients set to None
before each pass, as the handout asks). Inputs are random normal.

    python3 reports/anchors/torch_norm.py OUT.csv [--rows 50000]
        [--cols 1024,2048,4096,8192] [--impls rmsnorm,...]

Appends rows: source, gpu, impl, rows, cols, status, fwd_ms, fwd_bwd_ms,
torch, utc (reports/anchors/anchor_csv.py).
"""
import argparse

import torch
import torch.nn.functional as F
import triton.testing

from anchor_csv import AnchorCSV

EPS = 1e-5


def rmsnorm(x, g):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * g


RMSNORM_COMPILED = torch.compile(rmsnorm)


def norm(impl, x, g, b):
    if impl == "rmsnorm":
        return rmsnorm(x, g)
    if impl == "rmsnorm_compiled":
        return RMSNORM_COMPILED(x, g)
    if impl == "rms_norm":
        return F.rms_norm(x, (x.shape[-1],), g, EPS)
    return F.layer_norm(x, (x.shape[-1],), g, b, EPS)


def measure(impl, rows, cols):
    x = torch.randn(rows, cols, device="cuda", requires_grad=True)
    g = torch.randn(cols, device="cuda", requires_grad=True)
    b = torch.randn(cols, device="cuda", requires_grad=True)
    dy = torch.randn(rows, cols, device="cuda")
    with torch.no_grad():
        fwd = triton.testing.do_bench(lambda: norm(impl, x, g, b))

    def both():
        norm(impl, x, g, b).backward(dy)
    fb = triton.testing.do_bench(both, grad_to_none=[x, g, b])
    return fwd, fb


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=50000)
    ap.add_argument("--cols", default="1024,2048,4096,8192")
    ap.add_argument("--impls", default="rmsnorm,rmsnorm_compiled,rms_norm,layernorm")
    a = ap.parse_args()
    gpu = torch.cuda.get_device_name(0)
    columns = ["source", "gpu", "impl", "rows", "cols", "status", "fwd_ms",
               "fwd_bwd_ms"]
    with AnchorCSV(a.out, columns) as out:
        for cols in map(int, a.cols.split(",")):
            for impl in a.impls.split(","):
                status, fwd, fb = "ok", "", ""
                try:
                    f, both = measure(impl, a.rows, cols)
                    fwd, fb = f"{f:.4f}", f"{both:.4f}"
                except torch.OutOfMemoryError:
                    status = "oom"
                torch.cuda.empty_cache()
                out.row("reports/anchors/torch_norm.py", gpu, impl, a.rows,
                        cols, status, fwd, fb)


if __name__ == "__main__":
    main()
