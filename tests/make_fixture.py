"""The course's reference model (shared/spec/model.md) in PyTorch, float64,
on small dimensions: writes a safetensors fixture with the weights, a batch,
the logits, the loss and every gradient, for tests/test_fixture.c.

    python3 tests/make_fixture.py tests/data/fixture_tiny.safetensors \
        tests/data/fixture_tiny_state_dict.safetensors

Written from model.md with plain tensor operations (no nn.Module), so each
line can be read against the spec. Norm gains are drawn at random (not
ones) so that their gradients are tested too. CI never runs this: it only
reads the committed output. The second file is the same weights as a
float32 state_dict, written by safetensors.torch.save_file exactly as a
PyTorch user would save a checkpoint.
"""
import math
import sys

import torch
from safetensors.torch import save_file

VOCAB, D_MODEL, D_FF, LAYERS, HEADS = 64, 32, 48, 2, 4
BATCH, SEQ = 2, 12
THETA, EPS = 10000.0, 1e-5
F64 = torch.float64


def trunc_normal(shape, std):
    t = torch.empty(shape, dtype=F64)
    torch.nn.init.trunc_normal_(t, mean=0.0, std=std, a=-3 * std, b=3 * std)
    return t


def linear_init(d_out, d_in):
    return trunc_normal((d_out, d_in), math.sqrt(2.0 / (d_in + d_out)))


def make_params():
    p = {"token_embeddings.weight": trunc_normal((VOCAB, D_MODEL), 1.0)}
    gain = lambda: 1.0 + 0.1 * torch.randn(D_MODEL, dtype=F64)
    for i in range(LAYERS):
        p[f"layers.{i}.ln1.weight"] = gain()
        for name in ("q_proj", "k_proj", "v_proj", "output_proj"):
            p[f"layers.{i}.attn.{name}.weight"] = linear_init(D_MODEL, D_MODEL)
        p[f"layers.{i}.ln2.weight"] = gain()
        p[f"layers.{i}.ffn.w1.weight"] = linear_init(D_FF, D_MODEL)
        p[f"layers.{i}.ffn.w2.weight"] = linear_init(D_MODEL, D_FF)
        p[f"layers.{i}.ffn.w3.weight"] = linear_init(D_FF, D_MODEL)
    p["ln_final.weight"] = gain()
    p["lm_head.weight"] = linear_init(VOCAB, D_MODEL)
    return p


def rmsnorm(x, g):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * g


def rope(x):
    """x [B, H, T, dh]: rotate pairs (x[2j], x[2j+1]) by pos * theta^(-2j/dh)."""
    dh, t = x.shape[-1], x.shape[-2]
    pos = torch.arange(t, dtype=F64)[:, None]
    j = torch.arange(dh // 2, dtype=F64)[None, :]
    angle = pos * THETA ** (-2.0 * j / dh)
    c, s = torch.cos(angle), torch.sin(angle)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


def attention(x, p, i):
    b, t, d = x.shape
    dh = d // HEADS
    heads = lambda w: (x @ w.T).view(b, t, HEADS, dh).transpose(1, 2)
    q = rope(heads(p[f"layers.{i}.attn.q_proj.weight"]))
    k = rope(heads(p[f"layers.{i}.attn.k_proj.weight"]))
    v = heads(p[f"layers.{i}.attn.v_proj.weight"])
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    o = torch.softmax(scores, dim=-1) @ v
    o = o.transpose(1, 2).reshape(b, t, d)
    return o @ p[f"layers.{i}.attn.output_proj.weight"].T


def ffn(x, p, i):
    a = x @ p[f"layers.{i}.ffn.w1.weight"].T
    gate = a * torch.sigmoid(a)
    return (gate * (x @ p[f"layers.{i}.ffn.w3.weight"].T)) @ p[f"layers.{i}.ffn.w2.weight"].T


def forward(p, ids):
    h = p["token_embeddings.weight"][ids]
    for i in range(LAYERS):
        h = h + attention(rmsnorm(h, p[f"layers.{i}.ln1.weight"]), p, i)
        h = h + ffn(rmsnorm(h, p[f"layers.{i}.ln2.weight"]), p, i)
    return rmsnorm(h, p["ln_final.weight"]) @ p["lm_head.weight"].T


def main():
    torch.manual_seed(336)
    params = make_params()
    for t in params.values():
        t.requires_grad_(True)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    targets = torch.randint(0, VOCAB, (BATCH, SEQ))
    logits = forward(params, ids)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    loss.backward()
    out = {name: t.detach().contiguous() for name, t in params.items()}
    out["input_ids"] = ids
    out["targets"] = targets
    out["logits"] = logits.detach().contiguous()
    out["loss"] = loss.detach().reshape(1)
    for name, t in params.items():
        out[f"grad.{name}"] = t.grad.contiguous()
    meta = {"config": f"vocab={VOCAB} d_model={D_MODEL} d_ff={D_FF} layers={LAYERS} "
                      f"heads={HEADS} batch={BATCH} seq={SEQ} theta={THETA} eps={EPS}",
            "torch": torch.__version__, "generator": "tests/make_fixture.py"}
    save_file(out, sys.argv[1], metadata=meta)
    state_dict = {name: t.detach().to(torch.float32).contiguous() for name, t in params.items()}
    save_file(state_dict, sys.argv[2], metadata={"format": "pt"})
    print(f"loss {loss.item():.10f} (ln V = {math.log(VOCAB):.4f}); {len(out)} tensors -> {sys.argv[1]}")


if __name__ == "__main__":
    main()
