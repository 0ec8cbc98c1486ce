#!/usr/bin/env python3
"""torch_attn.py -- PyTorch's attention on the shapes of `longattn bench attn`, for its
--peers rows: F.scaled_dot_product_attention(is_causal=True) and FlexAttention
(torch.compile(flex_attention) with a causal block mask; on the CPU it needs PyTorch >= 2.5
and Inductor's C++ backend), forward and forward+backward, B = 1, H = 8, D = 64, float32.

Protocol (driven by `longattn bench attn --peers --python PY`): prints
`ready <torch version> <threads>`, then answers each line `run KIND T PASS REPS WARM`
(KIND sdpa|flex, PASS fwd|fwdbwd) with `seconds S` (median of REPS timed calls after WARM
untimed calls; flex compiles in its first call) or `error <reason>` (e.g. FlexAttention that does
not compile on this machine), and `quit` ends it. Inputs are uniform like the C benchmark's
(q, k in [-1.7, 1.7), v and dout in [-1, 1)). Run by hand:
    python bench/torch_attn.py --threads 2 --once sdpa 1024 fwdbwd 3
"""
import argparse
import statistics
import sys
import time

import torch

H, D = 8, 64


def inputs(T):
    g = torch.Generator().manual_seed(T)
    u = lambda s: (torch.rand(1, H, T, D, generator=g) * 2 - 1) * s
    return u(1.7), u(1.7), u(1.0), u(1.0)


_flex = {}


def flex_fn(T):
    """compiled flex_attention and a causal block mask for length T (cached per T)"""
    if T not in _flex:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def causal(b, h, qi, ki):
            return qi >= ki

        bm = create_block_mask(causal, None, None, T, T, device="cpu")
        fa = torch.compile(flex_attention)
        _flex[T] = lambda q, k, v: fa(q, k, v, block_mask=bm)
    return _flex[T]


def run(kind, T, pass_, reps, warm=1):
    q, k, v, do = inputs(T)
    bwd = pass_ == "fwdbwd"
    if kind == "sdpa":
        if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
            raise RuntimeError(f"torch {torch.__version__} has no scaled_dot_product_attention")
        f = lambda q_, k_, v_: torch.nn.functional.scaled_dot_product_attention(q_, k_, v_, is_causal=True)
    elif kind == "flex":
        f = flex_fn(T)
    else:
        raise ValueError(f"unknown kind {kind}")
    if bwd:
        q.requires_grad_(), k.requires_grad_(), v.requires_grad_()

    def once():
        t0 = time.perf_counter()
        if bwd:
            q.grad = k.grad = v.grad = None
            o = f(q, k, v)
            o.backward(do)
        else:
            with torch.no_grad():
                f(q, k, v)
        return time.perf_counter() - t0

    for i in range(max(warm, 1 if kind == "flex" else 0)):
        try:
            once()  # untimed: allocation, dispatch, compilation (flex)
        except Exception as e:
            # Inductor probes the vector ISA by compiling and loading a test library, with a
            # 60 s limit: on a busy machine the probe can time out once ("InvalidVecISA");
            # compile again once before reporting the error
            if kind != "flex" or i or "VecISA" not in str(e):
                raise
            _flex.pop(T, None)
            f = flex_fn(T)
            once()
    return statistics.median(once() for _ in range(reps))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--once", nargs=4, metavar=("KIND", "T", "PASS", "REPS"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.once:
        kind, T, p, reps = a.once
        print(f"{kind} T={T} {p}: {run(kind, int(T), p, int(reps)):.4f} s")
        return
    print(f"ready {torch.__version__} {torch.get_num_threads()}", flush=True)
    for line in sys.stdin:
        w = line.split()
        if not w or w[0] == "quit":
            break
        if w[0] != "run" or len(w) != 6:
            print("error bad command", flush=True)
            continue
        try:
            print(f"seconds {run(w[1], int(w[2]), w[3], int(w[4]), int(w[5])):.6f}", flush=True)
        except Exception as e:  # the row shows the reason instead of a number
            msg = " ".join(f"{type(e).__name__}: {e}".split())[:300]
            print(f"error {msg}", flush=True)


if __name__ == "__main__":
    main()
