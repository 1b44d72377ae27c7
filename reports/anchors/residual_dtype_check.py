# In what precision does torch_ddp.py's FSDP2 anchor (bf16:
# MixedPrecisionPolicy(param_dtype=bfloat16)) carry the residual stream,
# which its checkpoints save? Shards a tiny LM as torch_ddp.shard does
# (one rank, checkpoint groups of one block), records the dtype of every
# block group's input in one training forward, and prints them. Ours
# keeps the residual in fp32 (model/model.c), as the course's autocast
# model does (torch_lm.py without FSDP: checked here too). Exits 1 if the
# unsharded autocast model's residual is not fp32. On a GPU machine:
#   python3 reports/anchors/residual_dtype_check.py
# (the section 2026.9 cites its result: fp32 and bfloat16.)
import os, sys, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch.distributed as dist
from torch_lm import LM
from torch_ddp import shard

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1)
dev = torch.device("cuda", 0)
ids = torch.randint(0, 101, (2, 32), device=dev)
seen = {}
for name in ("autocast", "fsdp2"):
    torch.manual_seed(1)
    with dev:
        m = LM(64, 256, 4, 4, vocab=101)
    m.ckpt = 1
    if name == "fsdp2":
        m = shard(m, dist.group.WORLD, dev, "bf16", True)
    dts = []
    hooks = [blk.register_forward_pre_hook(lambda mod, args: dts.append(args[0].dtype))
             for blk in m.layers]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        m(ids).float().sum().backward()
    for h in hooks:
        h.remove()
    seen[name] = dts
    print(f"{name}: block inputs {sorted(set(str(d) for d in dts))} ({len(dts)} calls)")
dist.destroy_process_group()
sys.exit(0 if set(seen["autocast"]) == {torch.float32} else 1)
