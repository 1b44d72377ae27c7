"""The all-reduce anchor, measured beside our own rows on the same machine.

torch.distributed (NCCL) all-reduce of fp32 tensors, timed the way the
anchors in shared/anchors/README.md were: 5 warm-ups, then 20 iterations of
barrier, all_reduce, torch.cuda.synchronize(); an iteration's time is the
slowest rank's; median over iterations. Run with
    torchrun --nproc_per_node=N reports/anchors/torch_allreduce.py OUT.csv
Rank 0 appends one row per size to OUT.csv (header written if new):
source, machine, world_size, size_mib, time_ms_median, busbw_gbps, utc.
"""
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

SIZES_MIB = [1, 10, 100, 1024]


def main() -> None:
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    machine = f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"
    rows = []
    for mib in SIZES_MIB:
        nbytes = mib * 2**20
        x = torch.ones(nbytes // 4, device="cuda")
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            x.fill_(1.0)  # keep values finite: in-place sums grow by n
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        assert torch.all(x == n), "all-reduce gave a wrong sum"
        slowest = torch.tensor(times, device="cuda")
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        t = statistics.median(slowest.tolist())
        busbw = nbytes / t / 1e9 * 2 * (n - 1) / n
        rows.append(f"torch.distributed {torch.__version__} (NCCL),{machine},"
                    f"{n},{mib},{t * 1e3:.4f},{busbw:.1f}")
    if rank == 0:
        out = sys.argv[1]
        new = not os.path.exists(out)
        utc = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        with open(out, "a", encoding="ascii") as f:
            if new:
                f.write("source,machine,world_size,size_mib,time_ms_median,"
                        "busbw_gbps,utc\n")
            for row in rows:
                f.write(f"{row},{utc}\n")
        print("\n".join(rows))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
