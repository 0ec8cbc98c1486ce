#!/usr/bin/env python3
"""A small byte-level GPT in PyTorch with longattn's fused CPU attention, trained on the
default corpus and evaluated at 16x its training length -- the study (`longattn study`) in
PyTorch, for any attention spec.

    python examples/torch_gpt.py --spec "softmax+sinv(tau=10)+prope(p=0.5)+causal"
    python examples/torch_gpt.py --spec "asentmax+nape+causal" --steps 300
    python examples/torch_gpt.py --spec "softmax+logn(train=64)+rope+causal"

Model (SPEC 7): byte embedding, no absolute positions, pre-norm RMSNorm, QK-norm, attention
= longattn.torch.LongAttention(spec) (its positions, transform, normaliser and pattern),
residual, ReLU^2 MLP, final RMSNorm, LM head. ASEntmax specs get beta/gamma from two
linear maps of the block input (Vasylenko et al. eq. 9-10); logn specs learn s_h per head.
The loss is printed in bits per byte (nats / ln 2). Needs PyTorch (any version >= 1.13)
and the longattn package (pip install . at the repository root).
"""
import argparse
import math
import os
import pathlib
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

try:
    import longattn.torch as lt
except ImportError:  # running from a checkout with the extension built in place
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
    import longattn.torch as lt


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.g = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.g


class Block(nn.Module):
    def __init__(self, C, H, spec, threads):
        super().__init__()
        self.H, self.D = H, C // H
        self.ln1, self.ln2 = RMSNorm(C), RMSNorm(C)
        self.wq, self.wk, self.wv = (nn.Linear(C, C, bias=False) for _ in range(3))
        self.wo = nn.Linear(C, C, bias=False)
        self.q_norm, self.k_norm = RMSNorm(self.D), RMSNorm(self.D)
        self.attn = lt.LongAttention(spec, n_heads=H, threads=threads)
        self.asentmax = self.attn.spec.norm == "asentmax"
        if self.asentmax:
            self.as_b = nn.Linear(C, H)
            self.as_g = nn.Linear(C, H)
            nn.init.zeros_(self.as_b.weight), nn.init.zeros_(self.as_g.weight)
            self.gamma_range = self.attn.spec.as_gamma_range
        self.fc = nn.Linear(C, 4 * C, bias=False)
        self.proj = nn.Linear(4 * C, C, bias=False)
        nn.init.zeros_(self.proj.weight), nn.init.zeros_(self.wo.weight)

    def forward(self, x):
        B, T, C = x.shape
        h = self.ln1(x)
        split = lambda t: t.view(B, T, self.H, self.D).transpose(1, 2)  # noqa: E731 (B, H, T, D)
        q, k, v = self.q_norm(split(self.wq(h))), self.k_norm(split(self.wk(h))), split(self.wv(h))
        kw = {}
        if self.asentmax:
            kw["as_beta"] = F.softplus(self.as_b(h)).transpose(1, 2).contiguous()       # (B, H, T)
            kw["as_gamma"] = (self.gamma_range * torch.tanh(self.as_g(h))).transpose(1, 2).contiguous()
        y = self.attn(q, k, v, **kw)                                                   # (B, H, T, D)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
        return x + self.proj(F.relu(self.fc(self.ln2(x))).square())


class GPT(nn.Module):
    def __init__(self, spec, n_layer=2, n_head=4, d_model=64, threads=None):
        super().__init__()
        self.wte = nn.Embedding(256, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, spec, threads) for _ in range(n_layer))
        self.lnf = RMSNorm(d_model)
        self.head = nn.Linear(d_model, 256, bias=False)

    def forward(self, idx, targets):
        x = self.wte(idx)
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))


def load_bytes(folder):
    """Every file of a corpus folder, sorted by name, concatenated as bytes."""
    files = sorted(p for p in pathlib.Path(folder).iterdir() if p.is_file())
    if not files:
        raise SystemExit(f"{folder}: no files (run scripts/prepare_corpus.sh, or pass --data)")
    return np.frombuffer(b"".join(p.read_bytes() for p in files), dtype=np.uint8)


def batch(data, B, T, gen):
    ix = torch.randint(len(data) - T - 1, (B,), generator=gen)
    x = torch.stack([torch.from_numpy(data[i:i + T + 1].astype(np.int64)) for i in ix.tolist()])
    return x[:, :-1], x[:, 1:]


@torch.no_grad()
def evaluate(model, data, T, windows, seed=1234):
    """Mean loss (bits per byte) over `windows` windows of length T from fixed offsets."""
    gen = torch.Generator().manual_seed(seed)
    tot = 0.0
    for _ in range(windows):
        x, y = batch(data, 1, T, gen)
        tot += model(x, y).item()
    return tot / windows / math.log(2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = pathlib.Path(__file__).resolve().parents[1]
    ap.add_argument("--spec", default="softmax+sinv(tau=10)+prope(p=0.5)+causal")
    ap.add_argument("--data", default=str(root / "data" / "pydoc"),
                    help="corpus folder with train/ and val/ (default data/pydoc)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seq-len", type=int, default=64, help="training length T")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--eval-mult", type=int, default=16, help="evaluate at T and T * this")
    ap.add_argument("--eval-windows", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0, help="torch and attention threads (0: default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train = load_bytes(os.path.join(a.data, "train"))
    val = load_bytes(os.path.join(a.data, "val"))
    model = GPT(a.spec, a.layers, a.heads, a.d_model, threads=a.threads or None)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(a.seed)
    print(f"spec {model.blocks[0].attn.spec}  params {sum(p.numel() for p in model.parameters())}  "
          f"train T={a.seq_len} B={a.batch} steps={a.steps}", flush=True)
    t0 = time.time()
    for step in range(1, a.steps + 1):
        lr = a.lr * min(1.0, step / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(train, a.batch, a.seq_len, gen)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % a.log_every == 0 or step == 1 or step == a.steps:
            print(f"step {step} train_loss_bpb {loss.item() / math.log(2):.4f} "
                  f"elapsed_s {time.time() - t0:.1f}", flush=True)
    for T in (a.seq_len, a.seq_len * a.eval_mult):
        print(f"eval T={T} val_loss_bpb {evaluate(model, val, T, a.eval_windows):.4f}", flush=True)


if __name__ == "__main__":
    main()
