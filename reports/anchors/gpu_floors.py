"""The floors our step times are read against, measured on this GPU with
PyTorch: the dense bf16 matrix-product rate (tensor cores), the fp32 rate
without tensor cores (TF32 off), and the device-to-device copy rate.

  bf16_tflops  the best of square bf16 products n x n x n, n in --sizes,
               2 n^3 FLOP over the do_bench median
  fp32_tflops  the same in fp32 with TF32 disabled (cuBLAS SGEMM)
  copy_tbs     dst.copy_(src) of --copy-gib GiB: bytes read + written over
               the median time, TB/s (1e12 B/s)

    python3 reports/anchors/gpu_floors.py OUT.csv [--sizes 4096,8192,16384]
        [--copy-gib 2]

Appends one row: source, gpu, status, bf16_tflops, fp32_tflops, copy_tbs,
torch, utc (reports/anchors/anchor_csv.py). The writeup reads a GPU's
latest row (reports/section_lib.sh: floors).
"""
import argparse

import torch
import triton.testing

from anchor_csv import AnchorCSV


def product_rate(dtype, sizes):
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        ms = triton.testing.do_bench(lambda: torch.matmul(a, b), rep=200)
        best = max(best, 2 * n ** 3 / (ms * 1e-3) / 1e12)
        del a, b
    return best


def copy_rate(gib):
    n = int(gib * 2 ** 30) // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), rep=200)
    return 2 * n * 4 / (ms * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--sizes", default="4096,8192,16384")
    ap.add_argument("--copy-gib", type=float, default=2.0)
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    bf16 = product_rate(torch.bfloat16, sizes)
    fp32 = product_rate(torch.float32, sizes)
    copy = copy_rate(a.copy_gib)
    columns = ["source", "gpu", "status", "bf16_tflops", "fp32_tflops", "copy_tbs"]
    with AnchorCSV(a.out, columns) as out:
        out.row("reports/anchors/gpu_floors.py", torch.cuda.get_device_name(0),
                "ok", f"{bf16:.0f}", f"{fp32:.1f}", f"{copy:.2f}")


if __name__ == "__main__":
    main()
