"""The DDP and FSDP anchors: PyTorch's DDP and FSDP2 on the course's LM.

PyTorch's DistributedDataParallel and FSDP2 on the course's model at the
shapes of our ddp experiments (experiments/
ddp_bucketed_benchmarking.cfg: xl, context 128, 2 sequences per rank,
vocabulary 10000), run the strongest way a PyTorch user would, on the GPUs
our rows come from (our DDP rows: 2 x H200).

Configurations (--configs), each a full training step:
  compiled   torch.compile(DDP(model)): the model of torch_lm.py (imported,
             SDPA attention), wrapped in DistributedDataParallel with
             bucket_cap_mb from --buckets and gradient_as_bucket_view
             (gradients live in the buckets: no copy in, no copy out),
             then compiled; TorchDynamo's DDPOptimizer splits the graph at
             the bucket boundaries so that each bucket's all-reduce
             overlaps the rest of backward. torch.optim.AdamW(fused=True).
             torch_lm.py's make_step builds the step, as for its own rows.
  compiled_cudagraphs  the same under torch.compile(mode="reduce-overhead"):
             forward and backward replayed as CUDA graphs (between DDP's
             bucket boundaries), what a user picks when the step is
             launch-bound, as it is at this shape (256 tokens a GPU)
  eager      the same without torch.compile (for reference)
  fsdp_compiled  FSDP2 instead of DDP (torch.distributed.fsdp.fully_shard
             on each block, then on the whole model: a block's weights
             all-gathered before it runs, its gradients reduce-scattered
             after, the next block's gather prefetched), the way a PyTorch
             user shards the course's model; in bf16 with
             MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=
             float32): weights gathered in bf16, gradients reduced in fp32,
             as ours (experiments/fsdp_accounting.cfg). Then compiled, and
             torch.optim.AdamW(fused=True) on the shards. One GPU shards
             over one rank (what our fsdp rows at world size 1 run too).
  fsdp_eager, fsdp_compiled_cudagraphs  the same without torch.compile,
             and with mode="reduce-overhead"
  fsdp_keep_compiled, fsdp_keep_eager  the same with
             fully_shard(reshard_after_forward=False): forward's gathered
             weights kept for backward, as our reshard_after_forward = false
  CONFIG_ckptK  any of the above with activation checkpointing, each group
             of K blocks one torch.utils.checkpoint call, as torch_lm.py's;
             under FSDP2 each group is one checkpoint_wrapper, sharded as
             one unit (shard())
  fsdp_..._ckptK_keepattn  FSDP2 checkpoints with a selective policy
             that saves SDPA's outputs (create_selective_checkpoint_
             contexts: MUST_SAVE for the SDPA kernels' ops, the rest
             recomputed), so recomputation skips attention, as our
             checkpoint_keep_attention = true
  fsdp_..._ckptK[_keepattn]_chunkR  the loss R tokens at a time: lm_head
             and cross-entropy a chunk per checkpoint (torch_lm.py's
             LM.loss_chunk, as torchtune's chunked-output loss), so one
             chunk's logits live at a time, as our head_chunk = R
Precision: fp32 is PyTorch's default (no TF32); bf16 is
torch.autocast(bfloat16) over fp32 weights. Gradients, and so their
all-reduce, are fp32 either way, as ours are.

World sizes (--world-sizes, default 1,2): each measured by the first N
ranks of the launch in a process group of their own while the others wait,
so that one launch gives both the 2-GPU rows and the 1-GPU rows that the
writeup divides by (reports/sections/ddp.sh). One GPU runs the model
without DDP (what a PyTorch user runs there: DDP on one rank still splits
the compiled graph at every bucket), once, with bucket_mb 0.

Timing (the anchors' method, shared/anchors/README.md): random token ids
(each rank its own), 5 warm-up steps, then --steps timed steps, each
between torch.cuda.synchronize() calls on every rank; a step's time is its
slowest rank's. The row gives the median and the mean over the timed
steps. Peak: torch.cuda.max_memory_allocated over the timed steps (with
CUDA graphs max_memory_reserved: torch_lm.py's reset_peak), the
largest rank's (GiB = 2^30 bytes). A configuration that runs out of memory
is a row with status oom; another failure, error (its message printed).

On the 2-GPU machine (NCCL_NVLS_ENABLE=0: NVLink multicast stays off):

    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node=2 \\
        reports/anchors/torch_ddp.py reports/anchors/torch_ddp.csv

with [--sizes xl] [--contexts 128] [--rank-batch 2]
[--precisions fp32,bf16] [--configs compiled] [--buckets 25,250,1000]
[--world-sizes 1,2] [--steps 10] [--vocab 10000] [--resume]. Each configuration compiles for about
100 s on an H100. Every row is appended as it is measured,
so a sweep can be split over several launches (one --precisions or
--world-sizes each); --resume skips what OUT.csv already answers on this
GPU (anchor_csv.py), so a launch cut short goes on where it stopped. A dry run without GPUs (gloo, fp32, a small model
given as D/F/L/H):

    torchrun --standalone --nproc_per_node=2 reports/anchors/torch_ddp.py \\
        /tmp/ddp.csv --cpu --sizes 64/256/2/4 --precisions fp32 --steps 2

The 2026 leaderboard's step (experiments/leaderboard_2026.cfg: the ~8B
model, one sequence of 32768 a GPU) the way a PyTorch user would run it:

    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node=2 \\
        reports/anchors/torch_ddp.py reports/anchors/torch_ddp.csv \\
        --sizes 4096/11008/34/32 --vocab 151936 --contexts 32768 \\
        --rank-batch 1 --precisions bf16 --world-sizes 2 --steps 5 \\
        --configs fsdp_compiled_ckpt1,fsdp_keep_compiled_ckpt1,fsdp_compiled_ckpt1_keepattn,fsdp_keep_compiled_ckpt4_keepattn,fsdp_compiled_ckpt1_keepattn_chunk4096,fsdp_keep_compiled_ckpt1_keepattn_chunk4096

Appends rows to OUT.csv (reports/anchors/anchor_csv.py; header written if
new): source, gpu, world_size, size, vocab, context, rank_batch,
precision, config, bucket_mb, status, step_ms_median, step_ms_mean,
peak_gib, torch, utc.
"""
import argparse
import contextlib
import datetime
import gc
import itertools
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from anchor_csv import AnchorCSV
from torch_lm import LM, SIZES, VOCAB, make_step, peak_memory, reset_peak, uses_graphs

SOURCE = "reports/anchors/torch_ddp.py"
WARMUP = 5


def dims(size):
    """model.md's size name, or D/F/L/H (d_model/d_ff/layers/heads)."""
    if size in SIZES:
        return SIZES[size]
    parts = size.split("/")
    if len(parts) != 4:
        raise SystemExit(f"torch_ddp.py: size {size!r}: one of {', '.join(SIZES)} or D/F/L/H")
    return tuple(int(p) for p in parts)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class Group(torch.nn.Module):
    """K consecutive blocks as one module: one FSDP2 unit and one checkpoint."""

    def __init__(self, blocks):
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)

    def forward(self, x, c, s):
        for blk in self.blocks:
            x = blk(x, c, s)
        return x


def keep_attention_context():
    """torch.utils.checkpoint's context_fn for a selective policy that saves
    SDPA's outputs (whichever backend ran) and recomputes the rest."""
    from functools import partial
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    names = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")
    ops = {getattr(torch.ops.aten, n).default for n in names if hasattr(torch.ops.aten, n)}

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in ops else CheckpointPolicy.PREFER_RECOMPUTE
    return partial(create_selective_checkpoint_contexts, policy)


def shard(model, group, dev, precision, reshard, keep_attention=False):
    """FSDP2 over the ranks of `group`: each block, then the root;
    reshard: drop a block's gathered weights after its forward.

    With checkpoints (model.ckpt = K > 0) each group of K blocks becomes one
    module, wrapped in checkpoint_wrapper and then sharded as one unit (as
    our fsdp kind gathers a checkpoint group at once). FSDP2 composes with
    activation checkpointing in that order, the checkpoint inside the
    sharded unit (as torchtitan applies them); torch.utils.checkpoint
    called around FSDP2 units (LM.forward's own checkpointing) fails in
    recompute ("Recomputed values for the following tensors have different
    metadata than during the forward pass"). keep_attention: the
    checkpoints save SDPA's outputs (keep_attention_context)."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mesh = DeviceMesh.from_group(group, dev.type)
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
          if precision == "bf16" else MixedPrecisionPolicy())
    if model.ckpt:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            CheckpointImpl, checkpoint_wrapper)
        k, blocks = model.ckpt, list(model.layers)
        extra = {"context_fn": keep_attention_context()} if keep_attention else {}
        model.layers = torch.nn.ModuleList(
            checkpoint_wrapper(Group(blocks[i:i + k]),
                               checkpoint_impl=CheckpointImpl.NO_REENTRANT, **extra)
            for i in range(0, len(blocks), k))
        model.ckpt = 0   # LM.forward runs the wrapped groups as its blocks
    for blk in model.layers:
        fully_shard(blk, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard)
    return model


def measure(a, dev, group, size, ctx, precision, config, bucket_mb):
    """One configuration on the ranks of `group`: (step times in ms, the
    slowest rank's each; peak GiB, the largest rank's, or None on CPU)."""
    rank = dist.get_rank()
    torch.manual_seed(336)
    with dev:   # built on the device: the 8B model's fp32 weights never pass the host
        model = LM(*dims(size), vocab=a.vocab)
    config, _, k = config.partition("_ckpt")
    k, *sel = k.split("_")
    model.ckpt = int(k) if k else 0
    model.loss_chunk = next((int(x[len("chunk"):]) for x in sel if x.startswith("chunk")), 0)
    if config.startswith("fsdp_"):
        keep = config.startswith("fsdp_keep_")
        ddp = shard(model, group, dev, precision, reshard=not keep,
                    keep_attention="keepattn" in sel)
        config = config[len("fsdp_keep_" if keep else "fsdp_"):]
    elif dist.get_world_size(group) == 1:
        ddp = model
    else:
        ddp = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None,
                  process_group=group, bucket_cap_mb=bucket_mb,
                  gradient_as_bucket_view=True)
    step = make_step(ddp, config, precision)
    g = torch.Generator(device=dev).manual_seed(336 + rank)
    ids = torch.randint(0, a.vocab, (a.rank_batch, ctx), device=dev, generator=g)
    tgt = torch.randint(0, a.vocab, (a.rank_batch, ctx), device=dev, generator=g)
    for _ in range(WARMUP):
        step(ids, tgt)
    sync(dev)
    graphs = uses_graphs(config)
    if dev.type == "cuda":
        reset_peak(dev, graphs)
    times = []
    for _ in range(a.steps):
        sync(dev)
        t0 = time.perf_counter()
        step(ids, tgt)
        sync(dev)
        times.append((time.perf_counter() - t0) * 1e3)
    # the slowest rank's time per step, and the largest rank's peak
    t = torch.tensor(times, dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    peak = None
    if dev.type == "cuda":
        p = torch.tensor([peak_memory(dev, graphs)],
                         dtype=torch.float64, device=dev)
        dist.all_reduce(p, op=dist.ReduceOp.MAX, group=group)
        peak = p.item()
    return t.tolist(), peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--sizes", default="xl")
    ap.add_argument("--contexts", default="128")
    ap.add_argument("--rank-batch", type=int, default=2)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--configs", default="compiled")
    ap.add_argument("--buckets", default="25,250,1000")
    ap.add_argument("--world-sizes", default="1,2")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--resume", action="store_true",
                    help="skip what OUT.csv already answers on this GPU")
    ap.add_argument("--cpu", action="store_true",
                    help="gloo on the CPU: a dry run of the script, not an anchor")
    a = ap.parse_args()
    for c in a.configs.split(","):
        base, ck, k = c.partition("_ckpt")
        k, *sel = k.split("_")
        step = base.removeprefix("fsdp_").removeprefix("keep_")
        chunks = [x[len("chunk"):] for x in sel if x.startswith("chunk")]
        if step not in ("compiled", "compiled_cudagraphs", "eager") or \
                base.startswith("keep_") or (ck and not (k.isdigit() and int(k) > 0)) or \
                (sel and not base.startswith("fsdp_")) or \
                sel not in [[], ["keepattn"]] + [[*p, "chunk" + r] for r in chunks
                                                  for p in ([], ["keepattn"])] or \
                any(not (r.isdigit() and int(r) > 0) for r in chunks):
            raise SystemExit(f"torch_ddp.py: config {c!r}: compiled, "
                             "compiled_cudagraphs or eager, each optionally "
                             "after fsdp_ or fsdp_keep_ and before _ckptK (K > 0), "
                             "which under fsdp_ may end in _keepattn, _chunkR "
                             "or _keepattn_chunkR (R > 0 tokens)")
    if a.vocab < 2:
        raise SystemExit(f"torch_ddp.py: --vocab {a.vocab}: at least 2")
    for p in a.precisions.split(","):
        if p not in ("fp32", "bf16") or (a.cpu and p != "fp32"):
            raise SystemExit(f"torch_ddp.py: precision {p!r}: fp32 or bf16 (--cpu: fp32)")

    if a.cpu:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=30))
    else:
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = False   # fp32 means fp32
        torch.backends.cudnn.allow_tf32 = False
        # Ranks outside a smaller world wait in a barrier while it compiles
        # and measures: longer than NCCL's default 10 minutes may pass.
        dist.init_process_group("nccl", device_id=dev,
                                timeout=datetime.timedelta(minutes=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    sizes = [int(w) for w in a.world_sizes.split(",")]
    for w in sizes:
        if not 1 <= w <= world:
            raise SystemExit(f"torch_ddp.py: world size {w}: this launch has {world} ranks")
    # Every rank creates every group, in the same order (new_group's rule).
    groups = {w: (dist.group.WORLD if w == world else dist.new_group(list(range(w))))
              for w in sizes}
    gpu = "CPU (gloo dry run)" if a.cpu else torch.cuda.get_device_name(dev)
    columns = ["source", "gpu", "world_size", "size", "vocab", "context", "rank_batch",
               "precision", "config", "bucket_mb", "status", "step_ms_median",
               "step_ms_mean", "peak_gib"]
    jobs = itertools.product(sizes, a.sizes.split(","), map(int, a.contexts.split(",")),
                             a.precisions.split(","), a.configs.split(","),
                             map(float, a.buckets.split(",")))
    # Rank 0 writes the rows; the others measure with it.
    with (AnchorCSV(a.out, columns) if rank == 0 else contextlib.nullcontext()) as out:
        done_one = set()
        for w, size, ctx, prec, config, bucket in jobs:
            # no DDP buckets on one GPU or with FSDP: once per configuration
            if w == 1 or config.startswith("fsdp_"):
                if (w, size, ctx, prec, config) in done_one:
                    continue
                done_one.add((w, size, ctx, prec, config))
                bucket = 0.0
            if a.resume:   # rank 0 reads the file; every rank skips with it
                skip = torch.tensor([int(out is not None and out.answers(
                    gpu=gpu, world_size=w, size=size, vocab=a.vocab, context=ctx,
                    rank_batch=a.rank_batch, precision=prec, config=config,
                    bucket_mb=f"{bucket:g}"))], device=dev)
                dist.broadcast(skip, 0)
                if skip.item():
                    continue
            status, cols = "ok", ["", "", ""]
            if rank < w:
                try:
                    times, peak = measure(a, dev, groups[w], size, ctx, prec, config, bucket)
                    cols = [f"{statistics.median(times):.2f}", f"{statistics.fmean(times):.2f}",
                            "" if peak is None else f"{peak:.2f}"]
                except torch.OutOfMemoryError:
                    status = "oom"
                except RuntimeError as e:
                    status = "error"
                    print(f"# rank {rank}: {w} ranks, {size}, context {ctx}, {prec}, {config}, "
                          f"{bucket:g} MB: {(str(e).splitlines() or [''])[0]}", flush=True)
            torch._dynamo.reset()
            gc.collect()
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            if out is not None:
                out.row(SOURCE, gpu, w, size, a.vocab, ctx, a.rank_batch, prec, config,
                        f"{bucket:g}", status, *cols)
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
