"""The language-model anchors: what a PyTorch user gets for the course's
model (shared/spec/model.md), measured on the GPU our rows come from.

Configurations (--configs), each a full training step unless noted:
  eager           nn.Module, SDPA attention (causal), torch.optim.AdamW
                  with fused=True
  compiled        the same under torch.compile (default mode): the
                  strongest configuration a PyTorch user picks for speed
                  at large sizes
  compiled_cudagraphs  torch.compile(mode="reduce-overhead"): forward and
                  backward replayed as CUDA graphs, what a user picks when
                  the step is launch-bound (small sizes); the report takes
                  the faster of the two as "torch.compile"
  compiled_inbwd  compiled, the optimizer in backward: one fused AdamW per
                  parameter stepped from register_post_accumulate_grad_hook,
                  each gradient freed right after its update
  CONFIG_ckptK    any of the above with activation checkpointing: each
                  group of K blocks one torch.utils.checkpoint call
                  (use_reentrant=False), as the 2026 handout's section 3.2
                  wraps them (experiments/gradient_checkpointing.cfg)
Precision: fp32 is PyTorch's default (no TF32); bf16 is
torch.autocast(bfloat16) over fp32 weights, as the handout asks.

Timing (the anchors' method, shared/anchors/README.md): random token ids,
5 warm-up steps, then --steps timed steps, torch.cuda.synchronize() around
each; the row gives the median and the mean, and the GPU's mean SM clock,
power and power-capped share over the timed steps (NVML; empty where it
is not there), as our lm rows. Peak (GiB = 2^30 bytes):
torch.cuda.max_memory_allocated over the timed steps; with CUDA graphs
(compiled_cudagraphs) max_memory_reserved instead, after emptying the
cache the warm-up left (peak_memory: a replay bypasses the allocator).
A configuration that runs out of memory is a row with status oom.

    python3 reports/anchors/torch_lm.py OUT.csv [--sizes 2.7B,small]
        [--contexts 512] [--batch 4] [--precisions bf16,fp32]
        [--configs eager,compiled,compiled_cudagraphs,compiled_inbwd]
        [--steps 10] [--resume]

--resume skips each configuration OUT.csv already answers on this GPU
(an ok, oom or unsupported row), so a sweep cut short by a time limit
goes on where it stopped.

Appends one row per (size, context, precision, config) to OUT.csv, header
written if new; columns: source, gpu, size, context, batch, precision,
config, status, step_ms_median, step_ms_mean, peak_gib, sm_mhz, power_w,
power_capped, torch, utc.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from anchor_csv import AnchorCSV, GpuMonitor, bus_id, release_gpu

VOCAB, THETA, EPS = 10000, 10000.0, 1e-5
SIZES = {  # d_model, d_ff, layers, heads (model.md)
    "small": (768, 3072, 12, 12),
    "medium": (1024, 4096, 24, 16),
    "large": (1280, 5120, 36, 20),
    "xl": (1600, 6400, 48, 25),
    "2.7B": (2560, 10240, 32, 32),
}


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)).to(dt) * self.weight


def rope_tables(t, dh, device):
    pos = torch.arange(t, device=device, dtype=torch.float32)[:, None]
    j = torch.arange(dh // 2, device=device, dtype=torch.float32)[None, :]
    angle = pos * THETA ** (-2.0 * j / dh)
    return torch.cos(angle), torch.sin(angle)


def rope(x, c, s):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


def materialized_attention(q, k, v):
    """The course reference's attention: the T x T scores in memory."""
    t = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


class Block(nn.Module):
    def __init__(self, d, dff, heads, attention):
        super().__init__()
        self.heads = heads
        self.attention = attention
        self.ln1, self.ln2 = RMSNorm(d), RMSNorm(d)
        self.q_proj, self.k_proj, self.v_proj, self.output_proj = (
            nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1 = nn.Linear(d, dff, bias=False)
        self.w2 = nn.Linear(dff, d, bias=False)
        self.w3 = nn.Linear(d, dff, bias=False)

    def forward(self, x, c, s):
        b, t, d = x.shape
        h = self.ln1(x)
        split = lambda y: y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q = rope(split(self.q_proj(h)), c, s)
        k = rope(split(self.k_proj(h)), c, s)
        v = split(self.v_proj(h))
        o = self.attention(q, k, v)
        x = x + self.output_proj(o.transpose(1, 2).reshape(b, t, d))
        h = self.ln2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class LM(nn.Module):
    def __init__(self, d, dff, layers, heads, attention=sdpa, vocab=VOCAB):
        super().__init__()
        self.dh = d // heads
        self.token_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, dff, heads, attention)
                                    for _ in range(layers))
        self.ln_final = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.ckpt = 0   # blocks a checkpoint group; 0: no checkpointing
        self.loss_chunk = 0   # tokens a chunk of the loss; 0: logits whole

    def forward(self, ids, tgt=None):
        """The logits; given targets and loss_chunk > 0, the mean
        cross-entropy instead, lm_head and the loss a chunk of loss_chunk
        tokens at a time, each chunk one checkpoint (its logits recomputed
        in backward), as torchtune's chunked-output loss: one chunk's
        logits live at a time, not the whole batch's."""
        c, s = rope_tables(ids.shape[1], self.dh, ids.device)
        x = self.token_embeddings(ids)
        k = self.ckpt or len(self.layers)
        for g in range(0, len(self.layers), k):
            if self.ckpt:
                x = checkpoint(self.group, x, c, s, g, k, use_reentrant=False)
            else:
                x = self.group(x, c, s, g, k)
        h = self.ln_final(x)
        if tgt is None or not self.loss_chunk:
            return self.lm_head(h)
        h, t, r = h.flatten(0, 1), tgt.reshape(-1), self.loss_chunk
        total = sum(checkpoint(self.chunk_loss, h[i:i + r], t[i:i + r], use_reentrant=False)
                    for i in range(0, t.numel(), r))
        return total / t.numel()

    def chunk_loss(self, h, t):
        return F.cross_entropy(self.lm_head(h).float(), t, reduction="sum")

    def group(self, x, c, s, first, k):
        for blk in self.layers[first:first + k]:
            x = blk(x, c, s)
        return x


def make_step(model, config, precision):
    amp = precision == "bf16"
    graphs = config == "compiled_cudagraphs"
    if graphs:
        fwd = torch.compile(model, mode="reduce-overhead")
    elif config.startswith("compiled"):
        fwd = torch.compile(model)
    else:
        fwd = model

    chunked = getattr(model, "loss_chunk", 0) > 0   # a DDP wrapper: 0

    def loss_of(ids, tgt):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            if chunked:   # the loss inside forward, in chunks
                return fwd(ids, tgt)
            logits = fwd(ids)
        return F.cross_entropy(logits.float().flatten(0, 1), tgt.view(-1))

    if config == "compiled_inbwd":
        opts = {p: torch.optim.AdamW([p], lr=1e-4, fused=True) for p in model.parameters()}

        def hook(p):
            opts[p].step()
            opts[p].zero_grad(set_to_none=True)

        handles = [p.register_post_accumulate_grad_hook(hook)
                   for p in model.parameters()]

        def step(ids, tgt):
            loss_of(ids, tgt).backward()

        def release():
            """The hooks hold the optimizers, which hold the parameters:
            a cycle only the cyclic collector would free."""
            for h in handles:
                h.remove()
            opts.clear()
        step.release = release
        return step

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step(ids, tgt):
        if graphs:   # a new iteration: the graphs' outputs may be reused
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        loss_of(ids, tgt).backward()
        opt.step()
    return step


def uses_graphs(config):
    """The configuration replays CUDA graphs (mode="reduce-overhead")."""
    return config.partition("_ckpt")[0].endswith("compiled_cudagraphs")


def reset_peak(dev, graphs):
    """Before the timed steps. A graph's replay does not go through the
    caching allocator: its intermediates live in the graphs' private pool,
    in use during every step but counted as allocated by nobody, so
    max_memory_allocated would leave them out. With graphs the peak is
    what stays reserved once the cache the eager warm-up left is emptied
    (the pool's segments stay)."""
    if graphs:
        torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)


def peak_memory(dev, graphs):
    """The peak since reset_peak, in GiB."""
    f = torch.cuda.max_memory_reserved if graphs else torch.cuda.max_memory_allocated
    return f(dev) / 2**30


def timed(run, steps, graphs=False):
    """5 warm-up calls of run(), then `steps` timed ones, each between two
    torch.cuda.synchronize(): the times (ms), the peak over the timed
    calls (GiB; graphs, run() replays CUDA graphs: reset_peak) and the
    GPU's readings over them (GpuMonitor)."""
    dev = torch.cuda.current_device()
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    reset_peak(dev, graphs)
    times = []
    with GpuMonitor(bus_id(dev)) as mon:
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
    return times, peak_memory(dev, graphs), mon


def measure(size, ctx, batch, precision, config, steps):
    torch.manual_seed(336)
    model = LM(*SIZES[size]).cuda()
    config, _, k = config.partition("_ckpt")
    model.ckpt = int(k) if k else 0
    step = make_step(model, config, precision)
    ids = torch.randint(0, VOCAB, (batch, ctx), device="cuda")
    tgt = torch.randint(0, VOCAB, (batch, ctx), device="cuda")
    try:
        return timed(lambda: step(ids, tgt), steps, uses_graphs(config))
    finally:
        getattr(step, "release", lambda: None)()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--sizes", default="2.7B")
    ap.add_argument("--contexts", default="512")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--precisions", default="bf16")
    ap.add_argument("--configs",
                    default="eager,compiled,compiled_cudagraphs,compiled_inbwd")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--resume", action="store_true",
                    help="skip what OUT.csv already answers on this GPU")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False   # fp32 means fp32
    torch.backends.cudnn.allow_tf32 = False
    gpu = torch.cuda.get_device_name(0)
    columns = ["source", "gpu", "size", "context", "batch", "precision",
               "config", "status", "step_ms_median", "step_ms_mean",
               "peak_gib", "sm_mhz", "power_w", "power_capped"]
    with AnchorCSV(a.out, columns) as out:
        for size in a.sizes.split(","):
            for ctx in map(int, a.contexts.split(",")):
                for prec in a.precisions.split(","):
                    for config in a.configs.split(","):
                        if a.resume and out.answers(gpu=gpu, size=size, context=ctx,
                                                    batch=a.batch, precision=prec,
                                                    config=config):
                            continue
                        status, med, mean, peak = "ok", "", "", ""
                        gpu_cells = ("", "", "")
                        left = release_gpu()
                        if left > 2**26:
                            raise SystemExit(
                                f"torch_lm.py: {left / 2**30:.2f} GiB still allocated before "
                                f"{size}, {ctx}, {prec}, {config}: it would count in its peak")
                        try:
                            times, gib, mon = measure(size, ctx, a.batch, prec, config, a.steps)
                            med = f"{statistics.median(times):.2f}"
                            mean = f"{statistics.fmean(times):.2f}"
                            peak = f"{gib:.2f}"
                            gpu_cells = mon.cells()
                        except torch.OutOfMemoryError:
                            status = "oom"
                        out.row("reports/anchors/torch_lm.py", gpu, size, ctx,
                                a.batch, prec, config, status, med, mean, peak,
                                *gpu_cells)

if __name__ == "__main__":
    main()
