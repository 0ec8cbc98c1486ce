"""f16 / bf16 inputs to the Python package's attention (la_attn_forward_typed /
la_attn_backward_typed, issues 27, 29).

The kernel converts half inputs to float32 exactly and accumulates in float32, so every
result must be bitwise the float32 call on the same values widened to float32 (numpy's
float16 -> float32 and torch's bfloat16 -> float32 are exact); that is what is checked here,
through the NumPy API and through longattn.torch's autograd (gradients: float32 kernel
results from dO rounded to the inputs' type, handed back in that type). The numerical
error against the float64 reference per spec family is tests/test_attn_half.c's subject.
"""
import numpy as np
import pytest
import torch

import longattn
import longattn.torch as lt

SPECS = ["softmax+rope+causal", "entmax(alpha=1.5)+alibi+window(5)", "softmax+sinv(tau=10)+prope(p=0.5)+causal"]


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("spec", SPECS)
def test_numpy_float16_is_the_float32_kernel_on_widened_inputs(spec):
    q, k, v, g = (_rand(s, i) for i, s in enumerate([(1, 4, 70, 16), (1, 2, 70, 16), (1, 2, 70, 16), (1, 4, 70, 16)]))
    h = [x.astype(np.float16) for x in (q, k, v, g)]
    w = [x.astype(np.float32) for x in h]
    out_h, st_h = longattn.attention_forward(h[0], h[1], h[2], spec, threads=2)
    out_w, st_w = longattn.attention_forward(w[0], w[1], w[2], spec, threads=2)
    assert out_h.dtype == np.float32 and np.array_equal(out_h, out_w) and np.array_equal(st_h, st_w)
    gh = longattn.attention_backward(h[0], h[1], h[2], out_h, st_h, h[3], spec, threads=2)
    gw = longattn.attention_backward(w[0], w[1], w[2], out_w, st_w, w[3], spec, threads=2)
    for name in ("dq", "dk", "dv"):
        assert gh[name].dtype == np.float32 and np.array_equal(gh[name], gw[name]), name
    # half inputs differ from the float ones: the rounding is real (f16 u = 2^-11)
    out_f = longattn.attention(q, k, v, spec, threads=2)
    assert 0 < np.abs(out_f - out_h).max() < 2e-2


def test_numpy_bf16_bit_patterns():
    q, k, v = _rand((1, 2, 33, 8), 5), _rand((1, 1, 33, 8), 6), _rand((1, 1, 33, 8), 7)
    tb = [torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v)]
    bits = [t.view(torch.int16).numpy().view(np.uint16) for t in tb]
    out_b = longattn.attention(*bits, "softmax+rope+causal", dtype="bf16", threads=1)
    out_w = longattn.attention(*[t.float().numpy() for t in tb], "softmax+rope+causal", threads=1)
    assert np.array_equal(out_b, out_w)
    with pytest.raises(TypeError, match="dtype='bf16'"):
        longattn.attention(*bits, "softmax+causal")
    with pytest.raises(TypeError, match="bfloat16 bit patterns"):
        longattn.attention(q, k, v, "softmax+causal", dtype="bf16")
    with pytest.raises(ValueError, match="'f32', 'f16' or 'bf16'"):
        longattn.attention(q, k, v, "softmax+causal", dtype="int8")


@pytest.mark.parametrize("tdtype", [torch.bfloat16, torch.float16])
def test_torch_half_tensors(tdtype):
    spec = "softmax+rope+causal"
    torch.manual_seed(3)
    q = torch.randn(2, 4, 40, 16).to(tdtype).requires_grad_()
    k = torch.randn(2, 2, 40, 16).to(tdtype).requires_grad_()
    v = torch.randn(2, 2, 40, 16).to(tdtype).requires_grad_()
    out = lt.attention(q, k, v, spec, threads=2)
    assert out.dtype == torch.float32
    g = torch.randn_like(out)
    out.backward(g)
    # the same through float32 tensors holding the same values, dO rounded to the type
    qf, kf, vf = (x.detach().float().requires_grad_() for x in (q, k, v))
    outf = lt.attention(qf, kf, vf, spec, threads=2)
    assert torch.equal(out.detach(), outf.detach())
    outf.backward(g.to(tdtype).float())
    for a, b in ((q, qf), (k, kf), (v, vf)):
        assert a.grad.dtype == tdtype
        assert torch.equal(a.grad, b.grad.to(tdtype))
    with pytest.raises(TypeError, match="one dtype"):
        lt.attention(q.detach(), k.detach().float(), v.detach(), spec)
