# Does torch_lm.py's LM.loss_chunk give the whole-logits loss and
# gradients? A tiny LM (fresh random weights and tokens, checkpoints of
# two blocks) in fp32 on the CPU, and in bf16 autocast on the GPU where
# there is one: loss and every gradient with loss_chunk = 0 (logits whole,
# torch_lm.py's make_step path) against chunks of 7 tokens (not dividing
# the 2 x 32 tokens, so the last chunk is short). Exits 1 on a mismatch
# beyond fp32 rounding (1e-5 of the largest, relative), or the dtype's in
# bf16 (2e-2). From the repository root, where PyTorch is installed:
#   python3 dev/anchors/chunk_loss_check.py
import sys, torch
import torch.nn.functional as F
sys.path.insert(0, "reports/anchors")
from torch_lm import LM

bad = False
for dev in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
    torch.manual_seed(1)
    with torch.device(dev):
        m = LM(64, 256, 4, 4, vocab=101)
    m.ckpt = 2
    ids = torch.randint(0, 101, (2, 32), device=dev)
    tgt = torch.randint(0, 101, (2, 32), device=dev)
    amp = torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda")
    res = []
    for chunk in (0, 7):
        m.loss_chunk = chunk
        m.zero_grad(set_to_none=True)
        with amp:
            loss = (m(ids, tgt) if chunk else
                    F.cross_entropy(m(ids).float().flatten(0, 1), tgt.view(-1)))
        loss.backward()
        res.append((loss.detach().float(), {n: p.grad.float().clone() for n, p in m.named_parameters()}))
    tol = 2e-2 if dev == "cuda" else 1e-5
    (l0, g0), (l1, g1) = res
    worst = max(((g1[n] - g0[n]).abs().max() / g0[n].abs().max().clamp_min(1e-30)).item() for n in g0)
    dl = abs((l1 - l0) / l0).item()
    print(f"{dev}: loss {l0.item():.6f} whole, {l1.item():.6f} in chunks of 7 "
          f"(relative {dl:.2e}); worst gradient relative {worst:.2e}; tolerance {tol}")
    bad |= not (dl <= tol and worst <= tol)
print("FAIL: chunked loss differs from the whole" if bad else "ok")
sys.exit(1 if bad else 0)
