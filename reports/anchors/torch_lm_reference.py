"""The course reference's eager numbers (lm_pytorch.csv): the model of
shared/spec/model.md as the course's reference runs it, measured on the
GPU our rows come from, for the benchmarking sections' "ours / PyTorch
eager" columns.

The reference: eager nn.Module, attention that materialises the T x T
scores, and torch.optim.AdamW as constructed by default. Modes, each timed
on its own: forward (logits), forward_backward (zero_grad, forward,
cross-entropy, backward), train_step (those and the AdamW step); the peak
(torch.cuda.max_memory_allocated, GiB) is recorded for the train step.
Configurations (--configs): reference, the module as it is; and
reference_compiled, the same module under torch.compile (default mode),
the 2024 handout's "vanilla against compiled" (torch_compile_2024 (c)),
whose warm-up passes hold the compilation.
Precision: fp32 is PyTorch's default (no TF32); bf16 is
torch.autocast(bfloat16) over fp32 weights. Timing as torch_lm.py's: 5
warm-up passes, --steps timed ones with torch.cuda.synchronize() around
each; time_ms is the mean (shared/anchors/README.md reports means for
these). A mode that runs out of memory is a row with status oom.

    python3 reports/anchors/torch_lm_reference.py OUT.csv
        [--sizes small,medium,large,xl,2.7B] [--contexts 512] [--batch 4]
        [--precisions fp32,bf16] [--modes forward,forward_backward,train_step]
        [--configs reference,reference_compiled] [--steps 10]

Appends one row per (size, context, precision, config, mode) to OUT.csv
(header written if new): source, gpu, size, context, batch, precision,
config (as above; the file's typed H100 rows also hold "compiled_sdpa"),
mode, status, time_ms, peak_gib, torch, utc. The 2024 handout's shapes:
--contexts 128 --batch 16 --precisions fp32 --modes forward,train_step
--configs reference,reference_compiled.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

from anchor_csv import AnchorCSV
from torch_lm import LM, SIZES, VOCAB, materialized_attention, timed

MODES = ("forward", "forward_backward", "train_step")
CONFIGS = ("reference", "reference_compiled")


def measure(size, ctx, batch, precision, config, mode, steps):
    torch.manual_seed(336)
    module = LM(*SIZES[size], attention=materialized_attention).cuda()
    opt = torch.optim.AdamW(module.parameters(), lr=1e-4)
    model = torch.compile(module) if config == "reference_compiled" else module
    amp = precision == "bf16"
    ids = torch.randint(0, VOCAB, (batch, ctx), device="cuda")
    tgt = torch.randint(0, VOCAB, (batch, ctx), device="cuda")

    def run():
        if mode != "forward":
            opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            logits = model(ids)
        if mode == "forward":
            return
        F.cross_entropy(logits.float().view(-1, VOCAB), tgt.view(-1)).backward()
        if mode == "train_step":
            opt.step()

    times, gib, _ = timed(run, steps)
    return statistics.fmean(times), gib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--sizes", default="small,medium,large,xl,2.7B")
    ap.add_argument("--contexts", default="512")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--configs", default="reference")
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    for mode in a.modes.split(","):
        if mode not in MODES:
            ap.error(f"--modes: {mode!r} is not one of {', '.join(MODES)}")
    for config in a.configs.split(","):
        if config not in CONFIGS:
            ap.error(f"--configs: {config!r} is not one of {', '.join(CONFIGS)}")
    torch.backends.cuda.matmul.allow_tf32 = False   # fp32 means fp32
    torch.backends.cudnn.allow_tf32 = False
    gpu = torch.cuda.get_device_name(0)
    columns = ["source", "gpu", "size", "context", "batch", "precision",
               "config", "mode", "status", "time_ms", "peak_gib"]
    with AnchorCSV(a.out, columns) as out:
        for size in a.sizes.split(","):
            for ctx in map(int, a.contexts.split(",")):
                for prec in a.precisions.split(","):
                    for config in a.configs.split(","):
                        for mode in a.modes.split(","):
                            status, ms, peak = "ok", "", ""
                            try:
                                mean, gib = measure(size, ctx, a.batch, prec, config,
                                                    mode, a.steps)
                                ms = f"{mean:.1f}"
                                if mode == "train_step":
                                    peak = f"{gib:.1f}"
                            except torch.OutOfMemoryError:
                                status = "oom"
                            torch.cuda.empty_cache()
                            out.row("reports/anchors/torch_lm_reference.py", gpu,
                                    size, ctx, a.batch, prec, config, mode,
                                    status, ms, peak)


if __name__ == "__main__":
    main()
