# Does torch_ddp.py's keep_attention_context stop checkpoint recomputation
# from calling SDPA? Counts aten SDPA calls in forward and in backward of a
# tiny LM in two checkpoint groups, with and without the policy (CPU, and
# the GPU in bf16 where there is one): without it backward calls SDPA
# twice a layer (the rerun's forward, then its backward), with it once.
# Exits 1 if not. From the repository root, where PyTorch is installed:
#   python3 dev/anchors/keep_attention_count.py
import sys, torch
sys.path.insert(0, "reports/anchors")
from torch.utils._python_dispatch import TorchDispatchMode
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch_lm import LM
from torch_ddp import Group, keep_attention_context

class Count(TorchDispatchMode):
    def __init__(self): super().__init__(); self.n = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "scaled_dot_product" in str(func): self.n += 1
        return func(*args, **(kwargs or {}))

bad = False
for dev in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
    for keep in (False, True):
        torch.manual_seed(0)
        with torch.device(dev):
            m = LM(64, 256, 4, 4, vocab=100)
        blocks = list(m.layers)
        extra = {"context_fn": keep_attention_context()} if keep else {}
        m.layers = torch.nn.ModuleList(checkpoint_wrapper(Group(blocks[i:i + 2]),
                   checkpoint_impl=CheckpointImpl.NO_REENTRANT, **extra) for i in range(0, 4, 2))
        ids = torch.randint(0, 100, (2, 32), device=dev)
        ctx = torch.autocast(dev, dtype=torch.bfloat16) if dev == "cuda" else torch.autocast("cpu", enabled=False)
        f, b = Count(), Count()
        with ctx, f:
            loss = m(ids).float().logsumexp(-1).mean()
        with b:
            loss.backward()
        print(dev, "keep" if keep else "rerun", "sdpa calls forward", f.n, "backward", b.n)
        # backward: each layer's attention backward, plus its rerun without
        # the policy (one SDPA forward a layer)
        bad |= f.n == 0 or b.n != f.n * (1 if keep else 2)
print("FAIL: the policy did not stop the reruns' SDPA calls" if bad else "ok")
sys.exit(1 if bad else 0)
