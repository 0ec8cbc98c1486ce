"""The Python package's attention against the float64 PyTorch reference (attn_ref.py).

Forward (out and every statistic) through the NumPy API, every gradient (q, k, v, logn s_h,
ASEntmax beta/gamma) through longattn.torch (autograd Function -> la_attn_backward) over a
spec grid that covers every normaliser x position encoding and every transform x pattern
(the other two categories rotating), plus GQA, query offsets, document ids and fully
masked rows.

Tolerances. The kernel computes in float32 from float32 inputs; the reference gets the same
float32 values widened to float64, so the only difference is float32 rounding inside the
kernel (unit roundoff 6e-8) accumulated over D = 8 products and S <= 16 keys, amplified by
the transforms' multipliers (log n_q, a_t <= 1.6, yarn mscale^2) and, for the entmax family,
by the 1/(alpha-1) power near the threshold. Measured worst cases on this grid are ~2e-6
for out and row statistics and ~4e-6 (relative to the largest gradient entry) for
gradients; the bounds below (2e-5 absolute for outputs of size O(1), 2e-4 relative for
gradients) leave one decade of margin and still catch any wrong term (those are O(1e-2)
or more).
"""
import itertools
import math

import numpy as np
import pytest
import torch

import attn_ref
import longattn
import longattn.torch as lt

NORMS = ["softmax", "entmax(alpha=1.5)", "sparsemax", "entmax(alpha=1.3)", "asentmax"]
POSS = ["nope", "rope", "prope(p=0.5)", "ntk(s=2)", "dynamic-ntk(s=2,train=8)",
        "yarn(s=4,train=8)", "alibi", "nape"]
XFS = ["", "logn(s=0.4)", "qwen-logn(train=8)", "sinv(tau=10)", "critical(gamma=1.2)",
       "temp(x=0.7)"]
PATS = ["causal", "full", "window(4)", "sinks(2,3)", "global(2)+window(3)"]


def _spec(norm, xf, pos, pat):
    return "+".join(p for p in (norm, xf, pos, pat) if p)


def grid():
    cases = []
    for i, (norm, pos) in enumerate(itertools.product(NORMS, POSS)):
        cases.append(_spec(norm, XFS[i % len(XFS)], pos, PATS[i % len(PATS)]))
    for i, (xf, pat) in enumerate(itertools.product(XFS, PATS)):
        cases.append(_spec(NORMS[i % len(NORMS)], xf, POSS[(3 * i) % len(POSS)], pat))
    return cases


def _inputs(spec, B=2, H=4, Hkv=2, T=10, S=12, D=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    # float32 values widened to float64: the reference sees exactly the kernel's inputs
    r = lambda *s: torch.randn(*s, generator=g).float().double()  # noqa: E731
    x = {"q": r(B, H, T, D), "k": r(B, Hkv, S, D), "v": r(B, Hkv, S, D)}
    f = longattn.Spec(spec).fields()
    if f["xform"] == "logn":
        x["logn_s"] = (0.3 + 0.2 * torch.rand(H, generator=g)).float().double()
    if f["sink"] == "learned":
        x["sinks"] = (4 * torch.rand(H, generator=g) - 2).float().double()
    if f["norm"] == "asentmax":
        x["as_beta"] = torch.rand(B, H, T, generator=g).float().double()
        x["as_gamma"] = (2 * torch.rand(B, H, T, generator=g) - 1).float().double()
    return x


def check(spec, B=2, H=4, Hkv=2, T=10, S=12, D=8, pos0=None, doc_ids=None, seed=0):
    x = _inputs(spec, B, H, Hkv, T, S, D, seed)
    f = longattn.Spec(spec).fields()
    xr = {n: t.clone().requires_grad_(True) for n, t in x.items()}
    ref = attn_ref.attention(xr["q"], xr["k"], xr["v"], f, pos0=pos0, doc_ids=doc_ids,
                             logn_s=xr.get("logn_s"), as_beta=xr.get("as_beta"),
                             as_gamma=xr.get("as_gamma"), sinks=xr.get("sinks"))
    # forward, NumPy API, every statistic
    npx = {n: t.float().numpy() for n, t in x.items()}
    stats = ("row_stat", "row_entropy", "key_mass", "row_support")
    out, st = longattn.attention(npx["q"], npx["k"], npx["v"], spec, pos0=pos0,
                                 doc_ids=None if doc_ids is None else doc_ids.numpy(),
                                 logn_s=npx.get("logn_s"), as_beta=npx.get("as_beta"),
                                 as_gamma=npx.get("as_gamma"), stats=stats, threads=2,
                                 sinks=npx.get("sinks"))
    np.testing.assert_allclose(out, ref["out"].detach().numpy(), atol=2e-5, rtol=0, err_msg=spec)
    rs, rr = st["row_stat"], ref["row_stat"].detach().numpy()
    assert np.array_equal(np.isneginf(rs), np.isneginf(rr)), spec
    fin = np.isfinite(rr)
    np.testing.assert_allclose(rs[fin], rr[fin], atol=2e-5, rtol=2e-5, err_msg=spec)
    np.testing.assert_allclose(st["row_entropy"], ref["row_entropy"].numpy(), atol=5e-5, err_msg=spec)
    np.testing.assert_allclose(st["key_mass"], ref["key_mass"].numpy(), atol=5e-5, err_msg=spec)
    if f["norm"] != "softmax":  # support sizes are counts: exact except ties at the threshold
        assert np.abs(st["row_support"] - ref["row_support"].numpy()).max() <= 1, spec

    # gradients: a fixed random upstream gradient through both graphs
    g = torch.Generator().manual_seed(seed + 1)
    dout = torch.randn(ref["out"].shape, generator=g).float().double()
    (ref["out"] * dout).sum().backward()
    xt = {n: t.float().requires_grad_(True) for n, t in x.items()}
    y = lt.attention(xt["q"], xt["k"], xt["v"], spec, pos0=pos0, doc_ids=doc_ids,
                     logn_s=xt.get("logn_s"), as_beta=xt.get("as_beta"),
                     as_gamma=xt.get("as_gamma"), threads=2, sinks=xt.get("sinks"))
    np.testing.assert_allclose(y.detach().numpy(), out, atol=0, rtol=0)  # same kernel
    (y * dout.float()).sum().backward()
    for n in x:
        want = xr[n].grad.numpy()
        got = xt[n].grad.numpy()
        scale = max(np.abs(want).max(), 1e-3)
        err = np.abs(got - want).max() / scale
        assert err < 2e-4, f"{spec}: d{n} relative error {err:.2e}"
    return ref, out, st, xt


@pytest.mark.parametrize("spec", grid())
def test_grid_forward_and_gradients(spec):
    check(spec)


@pytest.mark.parametrize("spec", ["softmax+sinv(tau=10)+prope(p=0.5)+causal",
                                  "entmax(alpha=1.5)+rope+causal", "asentmax+nape+window(5)"])
@pytest.mark.parametrize("H,Hkv", [(6, 1), (6, 3), (4, 4)])
def test_gqa(spec, H, Hkv):
    check(spec, H=H, Hkv=Hkv)


@pytest.mark.parametrize("spec", ["softmax+rope+causal", "sparsemax+alibi+window(3)",
                                  "softmax+logn(s=0.4)+prope(p=0.5)+full"])
@pytest.mark.parametrize("T,S,pos0", [(6, 12, None), (6, 12, 3), (8, 8, 5), (5, 9, 40)])
def test_offsets(spec, T, S, pos0):
    check(spec, T=T, S=S, pos0=pos0)


@pytest.mark.parametrize("spec", ["softmax+sinv(tau=10)+prope(p=0.5)+causal",
                                  "entmax(alpha=1.5)+nape+causal", "asentmax+rope+window(3)",
                                  "softmax+logn(s=0.4)+alibi+sinks(1,2)",
                                  "softmax+qwen-logn(train=3)+global(2)+window(2)"])
def test_doc_ids(spec):
    docs = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 3, 3],
                         [5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6]], dtype=torch.int32)
    check(spec, T=12, S=12, doc_ids=docs)
    check(spec, T=7, S=12, pos0=5, doc_ids=docs)


@pytest.mark.parametrize("spec", ["softmax+rope+causal", "entmax(alpha=1.5)+sinv(tau=10)+causal",
                                  "sparsemax+logn(s=0.5)+window(2)", "asentmax+alibi+causal"])
def test_fully_masked_rows(spec):
    # queries at negative positions (pos0 = -3) see no key under a causal pattern
    ref, out, st, xt = check(spec, T=8, S=6, pos0=-3)
    assert np.all(out[:, :, :3] == 0) and np.all(np.isneginf(st["row_stat"][:, :, :3]))
    assert np.all(st["row_entropy"][:, :, :3] == 0)
    assert torch.all(xt["q"].grad[:, :, :3] == 0)  # exactly zero gradients
    if "as_beta" in xt:
        assert torch.all(xt["as_beta"].grad[:, :, :3] == 0)


def test_lse_is_logsumexp():
    x = _inputs("softmax+causal")
    out, st = longattn.attention(x["q"].float().numpy(), x["k"].float().numpy(),
                                 x["v"].float().numpy(), "softmax+full", stats=("lse",))
    kx = x["k"].repeat_interleave(2, 1)
    want = torch.logsumexp(x["q"] @ kx.transpose(-1, -2) / math.sqrt(8), -1).numpy()
    np.testing.assert_allclose(st["lse"], want, atol=2e-5)


# issue 31: learned sink, softmax plus one, sigmoid attention (SPEC 10), against the float64
# autograd reference (the sink as an extra softmax column, as gpt-oss's reference has it)
SINK_SPECS = ["softmax+sink+rope+causal", "softmax+sink(fixed=0)+sinv(tau=10)+prope(p=0.25)+causal",
              "softmax+sink+logn(s=0.4)+alibi+window(4)", "softmax+sink(fixed=1.5)+nope+global(2)+window(3)",
              "sigmoid(b=-1)+rope+causal", "sigmoid(train=8)+sinv(tau=10)+prope(p=0.5)+sinks(2,3)",
              "sigmoid-logn+critical(gamma=1.2)+nape+full", "sigmoid-logn+logn(s=0.4)+rope+causal"]


@pytest.mark.parametrize("spec", SINK_SPECS)
def test_sink_sigmoid(spec):
    check(spec)
    check(spec, H=6, Hkv=3, T=7, S=12, pos0=3)


@pytest.mark.parametrize("spec", ["softmax+sink+rope+causal", "sigmoid(b=-2)+alibi+causal"])
def test_sink_sigmoid_doc_ids(spec):
    docs = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 3, 3],
                         [5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6]], dtype=torch.int32)
    check(spec, T=12, S=12, doc_ids=docs)


def test_long_attention_sink_parameter():
    m = lt.LongAttention("softmax+sink+rope+causal", n_heads=4)
    assert isinstance(m.sinks, torch.nn.Parameter) and m.sinks.shape == (4,)
    assert torch.all(m.sinks == 0)  # softmax plus one at init
    assert "sinks" in dict(m.named_parameters())
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 9, 8, generator=g) for _ in range(3))
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    y = m(q, k, v)
    (y ** 2).sum().backward()
    assert m.sinks.grad is not None and torch.all(torch.isfinite(m.sinks.grad))
    assert m.sinks.grad.abs().max() > 0
    opt.step()
    assert torch.any(m.sinks != 0)
    with pytest.raises(ValueError, match="n_heads"):
        lt.LongAttention("softmax+sink+rope")
    assert lt.LongAttention("softmax+sink(fixed=0)+rope").sinks is None
    with pytest.raises(longattn.Error, match="sink"):
        longattn.Spec("entmax(alpha=1.5)+sink")
    with pytest.raises(ValueError, match="row_stat"):
        longattn.attention(q.numpy(), k.numpy(), v.numpy(), "sigmoid(b=-2)", stats=("lse",))


def test_double_backward_raises():
    """The backward is la_attn_backward, which autograd cannot differentiate: a gradient
    penalty (create_graph=True) raises instead of silently dropping the second-order term
    (it returned gradients without requires_grad before 2026-12-05)."""
    torch.manual_seed(0)
    q, k, v = [torch.randn(1, 1, 4, 4, requires_grad=True) for _ in range(3)]
    y = lt.attention(q, k, v, "softmax+full")
    g, = torch.autograd.grad(y.square().sum(), q, create_graph=True)
    with pytest.raises(RuntimeError):
        (y.sum() + g.square().sum()).backward()
