"""Benchmark: longattn's fused attention against PyTorch's own CPU attention.

    python -m longattn.bench                   # T = 1024, 4096, 16384; H = 8, D = 64; 2 threads
    python -m longattn.bench --T 1024 4096 --repeat 3 --flex

For each T: forward and forward+backward of longattn (through longattn.torch, so both
pay the same tensor plumbing) and of torch.nn.functional.scaled_dot_product_attention
(PyTorch >= 2.0) on the same causal softmax problem, then longattn with the scale-invariant
spec, which SDPA cannot express, and -- with --flex, where torch.nn.attention.flex_attention
exists -- FlexAttention's forward with the same sinv score_mod (compiled; its compile time
is excluded). Where SDPA is missing (PyTorch 1.x) the baseline is the math implementation
softmax(QK^T / sqrt(D) + causal mask) V in torch ops, and the table says so. Every timing is
the minimum over --repeat runs, interleaved between the implementations so that a loaded
machine slows them alike; ratios are from this one run.
"""
import argparse
import math
import time

import torch

from . import torch as lt

SINV = "softmax+sinv(tau=10)+causal"


def _time(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _math_attention(q, k, v):
    T = q.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def _fwd(f, q, k, v):
    def run():
        with torch.no_grad():
            f(q, k, v)
    return run


def _fwdbwd(f, q, k, v, dout):
    def run():
        qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
        f(qq, kk, vv).backward(dout)
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description="longattn vs PyTorch CPU attention")
    ap.add_argument("--T", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--D", type=int, default=64)
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--flex", action="store_true", help="also FlexAttention forward (compiles)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    F = torch.nn.functional
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    if has_sdpa:
        base_name = "SDPA"

        def base(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        base_name = "torch math (no SDPA in this PyTorch)"
        base = _math_attention

    flex = None
    if a.flex:
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            tau = 10.0

            def sinv_mod(score, b, h, qi, kj):
                # scores arrive scaled by 1/sqrt(D); sinv: a_t S + m_t, a_t^2 = 1 + 2 log1p(t/tau)
                t = (qi - kj).clamp(min=0).to(torch.float32)
                a2 = 1 + 2 * torch.log1p(t / tau)
                return torch.sqrt(a2) * score + (1 - a2)

            import torch._inductor.config as inductor_config
            # Inductor probes the CPU's vector ISA by loading a test library in a subprocess
            # with a timeout, which a loaded machine misses ("InvalidVecISA"); the CPUs
            # this benchmark runs on have AVX2, so skip the probe
            inductor_config.cpp.vec_isa_ok = True
            flex_c = torch.compile(flex_attention)

            def flex(q, k, v):
                T = q.shape[2]
                bm = create_block_mask(lambda b, h, qi, kj: qi >= kj, None, None, T, T, device="cpu")
                return flex_c(q, k, v, score_mod=sinv_mod, block_mask=bm)
        except Exception as e:  # noqa: BLE001 -- report and go on without it
            print(f"# FlexAttention unavailable: {type(e).__name__}: {e}")
            flex = None

    def ours(spec):
        return lambda q, k, v: lt.attention(q, k, v, spec, threads=a.threads)

    print(f"# torch {torch.__version__}, {a.threads} threads, B={a.B} H={a.H} D={a.D}, causal; "
          f"min of {a.repeat} interleaved runs, seconds")
    cols = ["T", "longattn fwd", f"{base_name} fwd", "ratio", "longattn fwd+bwd",
            f"{base_name} fwd+bwd", "ratio", "longattn sinv fwd", "longattn sinv fwd+bwd"]
    if flex:
        cols.append("flex sinv fwd")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for T in a.T:
        g = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(a.B, a.H, T, a.D, generator=g) for _ in range(3))
        dout = torch.randn(a.B, a.H, T, a.D, generator=g)
        jobs = {"of": _fwd(ours("softmax+causal"), q, k, v),
                "bf": _fwd(base, q, k, v),
                "ob": _fwdbwd(ours("softmax+causal"), q, k, v, dout),
                "bb": _fwdbwd(base, q, k, v, dout),
                "sf": _fwd(ours(SINV), q, k, v),
                "sb": _fwdbwd(ours(SINV), q, k, v, dout)}
        if not has_sdpa and T * T * a.H * a.B * 4 * 3 > 8 << 30:  # scores, probs, grads
            jobs.pop("bf"), jobs.pop("bb")
        if flex:
            jobs["ff"] = _fwd(flex, q, k, v)
            try:
                jobs["ff"]()  # compile outside the timing
            except Exception as e:  # noqa: BLE001 -- Inductor's CPU build can fail; say why
                print(f"# FlexAttention failed to compile: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
                jobs.pop("ff")
        for j in jobs.values():  # warm-up (workspaces, thread pools)
            if T <= 4096:
                j()
        best = {n: float("inf") for n in jobs}
        for _ in range(a.repeat):
            for n, j in jobs.items():
                best[n] = min(best[n], _time(j, 1))
        f = lambda n: f"{best[n]:.3f}" if n in best else "n/a"  # noqa: E731
        r = lambda x, y: f"{best[y] / best[x]:.2f}x" if x in best and y in best else "n/a"  # noqa: E731
        row = [str(T), f("of"), f("bf"), r("of", "bf"), f("ob"), f("bb"), r("ob", "bb"), f("sf"), f("sb")]
        if flex:
            row.append(f("ff"))  # n/a when it failed to compile
        print("| " + " | ".join(row) + " |", flush=True)
    print("# ratio = baseline time / longattn time (> 1: longattn is faster)")


if __name__ == "__main__":
    main()
