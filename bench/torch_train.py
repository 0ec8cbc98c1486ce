#!/usr/bin/env python3
"""torch_train.py -- the GPT that `longattn bench train` trains, written in plain PyTorch
(eager mode), so the benchmark can time both on the same machine in the same run.

Same model as src/model/gpt.c (SPEC 7) and the same step as la_trainer_step_batch:
  byte embedding wte (V, C), no absolute positions; per block: pre-norm RMSNorm (gain,
  eps 1e-6), q, k, v = x Wq^T, x Wk^T, x Wv^T (no bias), QK-norm (per-head RMSNorm over D
  with one gain shared by the heads), RoPE (theta 10000, half-split pairs (k, k + D/2), as
  src/attn/posenc.c), causal softmax attention with scale 1/sqrt(D)
  (F.scaled_dot_product_attention when it exists, else the math form), out += y Wo^T;
  RMSNorm, ReLU^2 MLP (d_ff = 4 C), out += relu(x Wfc^T)^2 Wproj^T; final RMSNorm and an
  UNTIED LM head; mean cross-entropy; global gradient-norm clipping at 1.0; AdamW
  (lr 3e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the embedding, LM head and
  matrices, none on the gains). Random tokens and targets.

With --autocast bf16 (issue 29) the forward runs under torch.autocast("cpu",
dtype=torch.bfloat16), PyTorch's mixed precision: products in bf16, weights, gradients and
the optimizer in float32 (the backward follows the forward's casts, as the autocast
documentation prescribes: backward() outside the context).

Protocol (driven by `longattn bench train --python PY`): the script builds the model, runs
one untimed step, prints `ready <torch version> <attention> <threads>` and then answers
each line `steps N` on stdin with `seconds s_1 ... s_N cpu C` (wall time of each step, and
the CPU time of the whole process, all threads, over the N steps), so the
benchmark can interleave its own steps with these in one run. Run by hand:
    python bench/torch_train.py --study --steps 5      # prints tokens/s and exits
"""
import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x, g, eps=1e-6):
    if hasattr(F, "rms_norm"):  # PyTorch >= 2.4
        return F.rms_norm(x, (x.shape[-1],), g, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


class Block(nn.Module):
    def __init__(self, C, H, F_, T):
        super().__init__()
        self.H, self.D = H, C // H
        D = self.D
        self.ln1_g = nn.Parameter(torch.ones(C))
        self.wq = nn.Linear(C, C, bias=False)
        self.wk = nn.Linear(C, C, bias=False)
        self.wv = nn.Linear(C, C, bias=False)
        self.qn_g = nn.Parameter(torch.ones(D))
        self.kn_g = nn.Parameter(torch.ones(D))
        self.wo = nn.Linear(C, C, bias=False)
        self.ln2_g = nn.Parameter(torch.ones(C))
        self.w_fc = nn.Linear(C, F_, bias=False)
        self.w_proj = nn.Linear(F_, C, bias=False)
        half = D // 2
        omega = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * omega[None, :]  # (T, D/2)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)

    def rope(self, x):  # (B, H, T, D), pairs (k, k + D/2)
        h = self.D // 2
        x1, x2 = x[..., :h], x[..., h:]
        c, s = self.cos[: x.shape[2]], self.sin[: x.shape[2]]
        return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.H, self.D
        a = rms_norm(x, self.ln1_g)
        q = self.wq(a).view(B, T, H, D)
        k = self.wk(a).view(B, T, H, D)
        v = self.wv(a).view(B, T, H, D).transpose(1, 2)
        q = self.rope(rms_norm(q, self.qn_g).transpose(1, 2))
        k = self.rope(rms_norm(k, self.kn_g).transpose(1, 2))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0: the math form
            s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            y = s.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
        h = F.relu(self.w_fc(rms_norm(x, self.ln2_g))).square()
        return x + self.w_proj(h)


class GPT(nn.Module):
    def __init__(self, L, C, H, V, T):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(Block(C, H, 4 * C, T) for _ in range(L))
        self.lnf_g = nn.Parameter(torch.ones(C))
        self.lm_head = nn.Linear(C, V, bias=False)
        proj = 0.02 / math.sqrt(2 * L)  # as init_params in src/model/gpt.c
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=proj if n.endswith(("wo.weight", "w_proj.weight")) else 0.02)

    def forward(self, idx, tgt):
        x = self.wte(idx)
        for b in self.blocks:
            x = b(x)
        z = self.lm_head(rms_norm(x, self.lnf_g))
        return F.cross_entropy(z.view(-1, z.shape[-1]), tgt.view(-1))


# parameter names of src/model/gpt.c (la_model_get_tensor) -> this module's
_NAMES = {"ln1.g": "ln1_g", "attn.wq": "wq.weight", "attn.wk": "wk.weight", "attn.wv": "wv.weight",
          "attn.q_norm.g": "qn_g", "attn.k_norm.g": "kn_g", "attn.wo": "wo.weight", "ln2.g": "ln2_g",
          "mlp.w_fc": "w_fc.weight", "mlp.w_proj": "w_proj.weight"}


def torch_name(name):
    """the parameter of GPT that holds longattn's tensor `name` (e.g. h.0.attn.wq)"""
    if name.startswith("h."):
        _, layer, rest = name.split(".", 2)
        return f"blocks.{layer}.{_NAMES[rest]}"
    return {"wte": "wte.weight", "lnf.g": "lnf_g", "lm_head": "lm_head.weight"}[name]


def load_longattn(model, path):
    """copy the weights of a longattn model file (la_model_save: safetensors, F32) into model"""
    import json
    import struct

    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    params = dict(model.named_parameters())
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        data = torch.frombuffer(bytearray(blob[8 + n + a:8 + n + b]), dtype=torch.float32)
        with torch.no_grad():
            params[torch_name(name)].copy_(data.view(info["shape"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--autocast", choices=("none", "bf16"), default="none",
                    help="run the forward under torch.autocast('cpu', dtype=torch.bfloat16)")
    ap.add_argument("--study", action="store_true", help="4 layers, d_model 128, 4 heads, T 128, B 16")
    ap.add_argument("--steps", type=int, default=0, help="run this many timed steps, print tokens/s, exit")
    a = ap.parse_args()
    if a.study:
        a.layers, a.d_model, a.heads, a.seq_len, a.batch = 4, 128, 4, 128, 16
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    L, C, H, T, B, V = a.layers, a.d_model, a.heads, a.seq_len, a.batch, a.vocab
    model = GPT(L, C, H, V, T)
    decay = [p for p in model.parameters() if p.dim() == 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))

    def step():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return time.perf_counter() - t0

    step()  # untimed: allocations, first-call dispatch
    attn = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "math"
    if a.autocast == "bf16":
        attn += "+autocast-bf16"
    if a.steps > 0:
        s = [step() for _ in range(a.steps)]
        print(f"torch {torch.__version__} ({attn}, {torch.get_num_threads()} threads): "
              f"{B * T * len(s) / sum(s):.0f} tokens/s, median step {sorted(s)[len(s) // 2]:.3f} s")
        return
    print(f"ready {torch.__version__} {attn} {torch.get_num_threads()}", flush=True)
    for line in sys.stdin:
        w = line.split()
        if len(w) == 2 and w[0] == "steps":
            c0 = time.process_time()
            s = [step() for _ in range(int(w[1]))]
            cpu = time.process_time() - c0
            print("seconds " + " ".join(f"{x:.6f}" for x in s) + f" cpu {cpu:.6f}", flush=True)
        elif w and w[0] == "quit":
            break


if __name__ == "__main__":
    main()
