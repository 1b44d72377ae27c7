"""The collectives' anchor: torch.distributed (NCCL) running the operations
our collective kind times (jobs/collective.c), measured the same way on
the same machine, so the rows of experiments/allreduce.cfg and
experiments/collectives.cfg have PyTorch beside them.

- Sizes as the collective kind counts them (nccl-tests'): size_mib is a
  rank's larger fp32 buffer (all_gather's output, reduce_scatter's input,
  the others' either); all_gather, reduce_scatter and all_to_all round it
  down to whole elements a rank. `bytes` in the row is the size timed.
- Calls: all_reduce (in place: torch has no other form), the out-of-place
  all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single, and
  broadcast from rank 0 (in place, as ours).
- Timing: 5 warm-ups, then 20 iterations of: reset the output (the
  in-place buffer to its input; an out-of-place output to -1, so an
  operation that writes nothing cannot pass the check), barrier,
  synchronize, the operation, synchronize, all but the operation untimed.
  An iteration's time is the slowest rank's; the median over iterations.
- algbw = bytes / median; busbw = algbw x 2(n-1)/n for all_reduce,
  (n-1)/n for all_gather, reduce_scatter and all_to_all, 1 for broadcast;
  0 on one rank (nothing crosses a link), as ours.
- Check, after the timed loop: every rank's last output equals what the
  operation must give. Inputs are small integers from the rank and the
  index (exact in fp32 in any summation order); a mismatch on any rank
  makes the row's status "wrong", an allocation failure "oom".

Run with NVLink SHARP off, as our rows are measured (the shared machines
do not allow it):
    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node=N \
        reports/anchors/torch_collectives.py OUT.csv \
        [--ops all_reduce,all_gather,...] [--sizes 1,10,100,1024] [--resume]
Rank 0 appends one row per operation and size (anchor_csv.py): source,
machine, op, world_size, size_mib, bytes, status, time_ms_median,
algbw_gbps, busbw_gbps, torch, utc. Rows whose source is
reports/anchors/torch_allreduce.py came from this script's all-reduce-only
predecessor, which timed all_reduce the same way.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

from anchor_csv import AnchorCSV

COLUMNS = ["source", "machine", "op", "world_size", "size_mib", "bytes",
           "status", "time_ms_median", "algbw_gbps", "busbw_gbps"]
SOURCE = "reports/anchors/torch_collectives.py"
# Bus factor on n ranks and whether the size splits into one block a rank.
OPS = {
    "all_reduce": (lambda n: 2 * (n - 1) / n, False),
    "all_gather": (lambda n: (n - 1) / n, True),
    "reduce_scatter": (lambda n: (n - 1) / n, True),
    "broadcast": (lambda n: 1.0, False),
    "all_to_all": (lambda n: (n - 1) / n, True),
}
WARMUP, ITERS = 5, 20


def pattern(rank, count, first=0):
    """Rank `rank`'s values at indices first .. first + count - 1."""
    i = torch.arange(first, first + count, device="cuda", dtype=torch.int64)
    return ((i % 97) + 1000 * (rank + 1)).to(torch.float32)


class Bench:
    """One operation's buffers on this rank: reset() before each
    iteration, run() the operation, expected() the output it must give."""

    def __init__(self, op, count, rank, n):
        self.op, self.rank, self.n = op, rank, n
        self.count = count                  # elements of the larger buffer
        self.block = count // n if OPS[op][1] else count
        if op == "all_gather":
            self.send = pattern(rank, self.block)
            self.out = torch.empty(count, device="cuda")
        elif op == "reduce_scatter":
            self.send = pattern(rank, count)
            self.out = torch.empty(self.block, device="cuda")
        elif op == "all_to_all":
            # block j of rank r's input goes to rank j: indices r*count + ..
            self.send = pattern(rank, count, rank * count)
            self.out = torch.empty(count, device="cuda")
        elif op == "all_reduce":
            self.send = pattern(rank, count)
            self.out = torch.empty(count, device="cuda")
        else:  # broadcast: the root's input is the buffer it sends
            self.send = pattern(0, count) if rank == 0 else None
            self.out = torch.empty(count, device="cuda")

    def reset(self):
        if self.op == "all_reduce" or (self.op == "broadcast" and self.rank == 0):
            self.out.copy_(self.send)
        else:
            self.out.fill_(-1.0)

    def run(self):
        op = self.op
        if op == "all_reduce":
            dist.all_reduce(self.out)
        elif op == "all_gather":
            dist.all_gather_into_tensor(self.out, self.send)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(self.out, self.send)
        elif op == "broadcast":
            dist.broadcast(self.out, src=0)
        else:
            dist.all_to_all_single(self.out, self.send)

    def expected(self):
        n, b, r = self.n, self.block, self.rank
        if self.op == "all_reduce":
            return sum(pattern(j, self.count) for j in range(n))
        if self.op == "all_gather":
            return torch.cat([pattern(j, b) for j in range(n)])
        if self.op == "reduce_scatter":
            return sum(pattern(j, b, r * b) for j in range(n))
        if self.op == "broadcast":
            return pattern(0, self.count)
        # block j of the output is block r of rank j's input
        return torch.cat([pattern(j, b, j * self.count + r * b) for j in range(n)])


def agreed(flag):
    """True on every rank when flag is true on every rank."""
    t = torch.tensor([0 if flag else 1], device="cuda")
    dist.all_reduce(t)
    return t.item() == 0


def measure(op, size_mib, rank, n):
    """(status, bytes, median seconds or None) of one operation and size."""
    count = size_mib * 2**20 // 4
    if OPS[op][1]:
        count = count // n * n
    try:
        x = Bench(op, count, rank, n)
        ok = True
    except torch.cuda.OutOfMemoryError:
        x, ok = None, False
    if not agreed(ok):
        return "oom", count * 4, None
    for _ in range(WARMUP):
        x.run()
    torch.cuda.synchronize()
    times = []
    for _ in range(ITERS):
        x.reset()
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x.run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    right = torch.equal(x.out, x.expected())
    slowest = torch.tensor(times, device="cuda", dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    status = "ok" if agreed(right) else "wrong"
    return status, count * 4, statistics.median(slowest.tolist())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the CSV rank 0 appends to")
    ap.add_argument("--ops", default=",".join(OPS),
                    help="operations, comma-separated (default: all)")
    ap.add_argument("--sizes", default="1,10,100,1024",
                    help="a rank's larger buffer in MiB, comma-separated")
    ap.add_argument("--resume", action="store_true",
                    help="skip what OUT already answers on this machine at "
                         "this world size (anchor_csv.py)")
    args = ap.parse_args()
    ops = args.ops.split(",")
    for op in ops:
        if op not in OPS:
            ap.error(f"--ops: unknown operation {op!r} (allowed: {', '.join(OPS)})")
    sizes = [int(s) for s in args.sizes.split(",")]

    # one GPU a rank, as ours: torchrun's local rank picks it
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, n = dist.get_rank(), dist.get_world_size()
    machine = f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"
    out = AnchorCSV(args.out, COLUMNS) if rank == 0 else None
    for op in ops:
        for mib in sizes:
            # rank 0 reads the file; every rank skips what it answers
            skip = torch.tensor([int(bool(out and args.resume and out.answers(
                machine=machine, op=op, world_size=n, size_mib=mib)))], device="cuda")
            dist.broadcast(skip, src=0)
            if skip.item():
                continue
            status, nbytes, t = measure(op, mib, rank, n)
            if out:
                algbw = nbytes / t / 1e9 if t else None
                bus = OPS[op][0](n) if n > 1 else 0.0
                cells = (f"{t * 1e3:.4f}", f"{algbw:.1f}",
                         f"{algbw * bus:.1f}") if t else ("", "", "")
                out.row(SOURCE, machine, op, n, mib, nbytes, status, *cells)
            torch.cuda.empty_cache()
    if out:
        out.f.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
