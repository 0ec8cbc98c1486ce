"""The Python package's API: memory (zero-copy, strided inputs), errors, the GIL, finite
differences, the row normalisers, spec strings, position helpers, .npy I/O, the torch module
and custom op, and the cdef/header agreement."""
import math
import pathlib
import sysconfig
import threading

import numpy as np
import pytest
import torch

import attn_ref
import longattn
import longattn.torch as lt
from longattn import _core

ROOT = pathlib.Path(__file__).resolve().parents[2]
rng = np.random.default_rng(0)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- memory -----------------------------------------------------------------------------

def test_out_argument_is_written_in_place():
    q, k, v = arr(1, 4, 16, 8), arr(1, 2, 16, 8), arr(1, 2, 16, 8)
    out = np.full((1, 4, 16, 8), np.nan, np.float32)
    res = longattn.attention(q, k, v, out=out)
    assert res is out  # the kernel wrote into the caller's array, no copy came back
    np.testing.assert_array_equal(out, longattn.attention(q, k, v))


def test_contiguous_inputs_are_not_copied():
    q = arr(1, 2, 8, 4)
    assert _core._f32("q", q) is q
    # a transposed view is copied (documented), and the copy is contiguous
    qt = q.transpose(0, 2, 1, 3)
    c = _core._f32("q", qt)
    assert c is not qt and c.flags.c_contiguous and not np.shares_memory(c, qt)


def test_out_argument_must_be_writable_contiguous():
    q, k = arr(1, 2, 8, 4), arr(1, 2, 8, 4)
    with pytest.raises(ValueError, match="C-contiguous"):
        longattn.attention(q, k, k, out=np.zeros((1, 8, 2, 4), np.float32).transpose(0, 2, 1, 3))
    with pytest.raises(ValueError, match="shape"):
        longattn.attention(q, k, k, out=np.zeros((1, 2, 8, 5), np.float32))


def test_strided_inputs_give_the_same_answer():
    # (B, T, H, D) memory seen as (B, H, T, D): every input non-contiguous
    qb, kb, vb = arr(2, 12, 4, 8), arr(2, 12, 2, 8), arr(2, 12, 2, 8)
    q, k, v = (a.transpose(0, 2, 1, 3) for a in (qb, kb, vb))
    assert not q.flags.c_contiguous
    spec = "softmax+sinv(tau=10)+prope(p=0.5)+causal"
    want = longattn.attention(*(np.ascontiguousarray(a) for a in (q, k, v)), spec)
    np.testing.assert_array_equal(longattn.attention(q, k, v, spec), want)
    # every-other-element slices too
    big = arr(1, 2, 24, 16)
    sl = big[:, :, ::2, ::2]
    np.testing.assert_array_equal(longattn.attention(sl, sl, sl, "softmax+rope+causal"),
                                  longattn.attention(sl.copy(), sl.copy(), sl.copy(), "softmax+rope+causal"))
    # torch: strided tensors through the autograd path
    tq = torch.from_numpy(qb).transpose(1, 2).requires_grad_(False)
    np.testing.assert_array_equal(lt.attention(tq, torch.from_numpy(kb).transpose(1, 2),
                                               torch.from_numpy(vb).transpose(1, 2), spec).numpy(), want)


# ---- errors -----------------------------------------------------------------------------

def test_errors_name_the_problem():
    q, k = arr(1, 4, 8, 8), arr(1, 2, 8, 8)
    with pytest.raises(TypeError, match=r"float32.*astype"):
        longattn.attention(q.astype(np.float64), k, k)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        longattn.attention(q.tolist(), k, k)
    with pytest.raises(ValueError, match="4 dimensions"):
        longattn.attention(q[0], k, k)
    with pytest.raises(ValueError, match="k and v"):
        longattn.attention(q, k, arr(1, 2, 9, 8))
    with pytest.raises(ValueError, match="B and D"):
        longattn.attention(q, arr(1, 2, 8, 4), arr(1, 2, 8, 4))
    # the library's own message: H not a multiple of Hkv
    with pytest.raises(longattn.Error, match="multiple of Hkv") as e:
        longattn.attention(q, arr(1, 3, 8, 8), arr(1, 3, 8, 8))
    assert e.value.status == "LA_ESHAPE" and isinstance(e.value, ValueError)
    with pytest.raises(ValueError, match="unknown word 'bogus'"):
        longattn.attention(q, k, k, "softmax+bogus")
    with pytest.raises(ValueError, match="odd"):
        longattn.attention(arr(1, 2, 4, 5), arr(1, 2, 4, 5), arr(1, 2, 4, 5), "softmax+rope+causal")
    with pytest.raises(ValueError, match="as_beta"):
        longattn.attention(q, k, k, "asentmax+causal")
    with pytest.raises(ValueError, match="'tau'"):
        longattn.attention(q, k, k, "sparsemax+causal", stats=("lse",))
    with pytest.raises(ValueError, match="unknown statistic"):
        longattn.attention(q, k, k, stats=("lsee",))
    with pytest.raises(ValueError, match=r"doc_ids must have shape \(B, S\)"):
        longattn.attention(q, k, k, doc_ids=np.zeros((1, 7), np.int32))
    with pytest.raises(ValueError, match="one s_h per head"):
        longattn.attention(q, k, k, "softmax+logn(s=0.5)+causal", logn_s=np.ones(3, np.float32))


def test_inputs_the_spec_does_not_read_are_refused():
    """sinks=, as_beta=, as_gamma=, logn_s= for a spec without a learned sink, asentmax or
    logn were silently ignored; doc_ids beyond int32 silently wrapped; threads=-1 said
    'must be >= 1' though 0 is accepted."""
    q, k = arr(1, 2, 8, 8), arr(1, 2, 8, 8)
    for name, a in (("sinks", np.zeros(2, np.float32)), ("logn_s", np.ones(2, np.float32)),
                    ("as_beta", np.ones((1, 2, 8), np.float32)), ("as_gamma", np.ones((1, 2, 8), np.float32))):
        with pytest.raises(ValueError, match=f"{name}= is read only by specs with"):
            longattn.attention(q, k, k, "softmax+causal", **{name: a})
    with pytest.raises(ValueError, match="sinks= .* softmax\\+sink\\(fixed=1\\)"):
        longattn.attention(q, k, k, "softmax+sink(fixed=1)+causal", sinks=np.zeros(2, np.float32))
    docs = np.array([[0, 0, 0, 0, 2**31, 2**31, 2**31, 2**31]])
    with pytest.raises(ValueError, match="beyond int32"):
        longattn.attention(q, k, k, doc_ids=docs)
    with pytest.raises(ValueError, match="or 0 or None"):
        longattn.attention(q, k, k, threads=-1)
    longattn.attention(q, k, k, threads=0)


def test_torch_refuses_wrong_device_dtype_shape():
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match=r"runs on the CPU: q is on meta.*\.cpu\(\)"):
        lt.attention(q.to("meta"), q, q)
    with pytest.raises(TypeError, match=r"q has dtype torch.float64.*float16 or bfloat16.*q.float\(\)"):
        lt.attention(q.double(), q, q)
    with pytest.raises(TypeError, match=r"q, k and v must have one dtype"):  # half q: all three half
        lt.attention(q.half(), q, q)
    with pytest.raises(TypeError, match="k has dtype torch.float64"):
        lt.LongAttention("softmax+causal")(q, q.double(), q)
    with pytest.raises(ValueError, match="4 dimensions"):
        lt.attention(q[0], q, q)
    with pytest.raises(ValueError, match="n_heads"):
        lt.LongAttention("softmax+logn(s=0.5)+causal")
    with pytest.raises(ValueError, match="as_beta and as_gamma"):
        lt.LongAttention("asentmax+causal")(q, q, q)


# ---- GIL --------------------------------------------------------------------------------

def test_gil_is_released_during_a_call():
    """While one thread is inside longattn.attention, another thread runs Python code.

    Proved by what the main thread sees, not by how long the call takes: `out` starts as
    NaN, the kernel writes it head by head (finite values: the expected output, computed
    first, has no NaN), and the main thread polls it. A poll that finds some rows written and
    others still NaN ran while the call was in progress (written: the call had started;
    NaN: it had not finished), which a call holding the GIL would make impossible: the main
    thread could then run only before the call (all NaN) or after it (none). The poll reads
    the written rows before the NaN ones, so the interval between the two reads lies inside
    the call. On a machine so fast that the call ends before the main thread gets to look,
    the work doubles (up to 2^6 times) instead of the test assuming a duration."""
    H = 8
    for attempt in range(7):
        q = arr(1, H, 1024, 32)
        want = longattn.attention(q, q, q, "softmax+causal", threads=1)
        assert np.isfinite(want).all()
        out = np.full_like(want, np.nan)
        last = out[0, :, -1, 0]  # one element per head: the head's last row, written last
        started = threading.Event()
        seen = {"partial": False, "polls": 0}

        def call():
            started.set()
            longattn.attention(q, q, q, "softmax+causal", threads=1, out=out)

        th = threading.Thread(target=call)
        th.start()
        started.wait()
        while th.is_alive():
            written = ~np.isnan(last.copy())  # read first
            pending = np.isnan(last.copy())   # read second
            seen["polls"] += 1
            if written.any() and pending.any():
                seen["partial"] = True
                break
        th.join()
        np.testing.assert_array_equal(out, want)
        if seen["partial"]:
            return
        H *= 2
    pytest.fail(f"the main thread never ran during a call ({seen['polls']} polls at {H // 2} heads): "
                "is the GIL held across la_attn_forward?")


# ---- finite differences -----------------------------------------------------------------

@pytest.mark.parametrize("spec", ["softmax+sinv(tau=10)+prope(p=0.5)+causal",
                                  "entmax(alpha=1.5)+rope+causal",
                                  "softmax+logn(s=0.5)+alibi+window(3)",
                                  "asentmax+nape+causal"])
def test_gradcheck_float32(spec):
    """torch.autograd.gradcheck on float32 (the kernel's precision). Central differences
    with eps = 1e-2 have truncation error eps^2 |f'''| / 6 ~ 2e-5 for these O(1) smooth
    functions and rounding error ~ 2 ulp(|f|) / (2 eps) ~ 1e-5; atol 1e-3 + rtol 1e-2 sits
    two decades above both and far below a wrong gradient. (1.5-entmax is C^1: p = [x -
    tau]_+^2; sparsemax is left out, its kinks make finite differences ill-posed.)"""
    torch.manual_seed(0)
    B, H, Hkv, T, D = 1, 2, 1, 5, 4
    q = torch.randn(B, H, T, D, requires_grad=True)
    k = torch.randn(B, Hkv, T, D, requires_grad=True)
    v = torch.randn(B, Hkv, T, D, requires_grad=True)
    extra = {}
    if "logn" in spec:
        extra["logn_s"] = torch.tensor([0.4, 0.6], requires_grad=True)
    if "asentmax" in spec:
        extra["as_beta"] = torch.rand(B, H, T, requires_grad=True)
        extra["as_gamma"] = torch.rand(B, H, T, requires_grad=True)
    names = list(extra)

    def f(q, k, v, *rest):
        return lt.attention(q, k, v, spec, threads=1, **dict(zip(names, rest)))

    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not double precision": float32 is the point here
        assert torch.autograd.gradcheck(f, (q, k, v, *extra.values()), eps=1e-2, atol=1e-3,
                                        rtol=1e-2)


# ---- row normalisers --------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.25, 3.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_entmax_rows_against_reference(alpha, dtype):
    z = rng.standard_normal((6, 9)) * 2
    z[2, :4] = -np.inf  # masked entries
    z[5, :] = -np.inf   # a row with no finite entry
    p, tau = longattn.entmax(z.astype(dtype), alpha, return_tau=True)
    assert p.dtype == dtype
    zt = torch.tensor(z.astype(dtype).astype(np.float64), requires_grad=True)
    vis = torch.isfinite(zt)
    P, rtau = attn_ref.entmax_rows(torch.where(vis, zt, torch.zeros_like(zt)), vis, alpha)
    tol = 1e-6 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(p, P.detach().numpy(), atol=tol)
    fin = np.isfinite(rtau.detach().numpy())
    np.testing.assert_allclose(tau[fin], rtau.detach().numpy()[fin], atol=tol * 10)
    assert np.isneginf(tau[5]) and np.all(p[5] == 0)
    dp = rng.standard_normal(z.shape)
    (P * torch.tensor(dp)).sum().backward()
    dz = longattn.entmax_backward(p, dp.astype(dtype), alpha)
    want = torch.where(vis, zt.grad, torch.zeros_like(zt)).numpy()
    np.testing.assert_allclose(dz, want, atol=tol * 10)


def test_entmax_shortcuts_and_errors():
    z = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(longattn.sparsemax(z), longattn.entmax(z, 2))
    np.testing.assert_array_equal(longattn.entmax15(z), longattn.entmax(z, 1.5))
    np.testing.assert_allclose(longattn.sparsemax(np.array([0.0, 0.5, 3.0])), [0, 0, 1])
    with pytest.raises(ValueError, match="alpha"):
        longattn.entmax(z, 1.0)
    with pytest.raises(ValueError):
        longattn.entmax(np.array([1.0, np.nan]))
    with pytest.raises(TypeError, match="float32 or float64"):
        longattn.entmax(np.array([1, 2]))


# ---- spec, positions, files -------------------------------------------------------------

def test_spec_parse_format_fields():
    s = longattn.Spec("entmax(alpha=1.5)+nape+window(512)")
    assert s.norm == "entmax" and s.alpha == 1.5 and s.pos == "nape" and s.window == 512
    assert longattn.Spec(str(s)) == s and s.fields()["pattern"] == "window"
    d = longattn.Spec()
    assert str(d) == "softmax+sinv(tau=10)+prope(p=0.5,theta=10000)+causal"
    assert repr(d).startswith("longattn.Spec(") and hash(d) == hash(longattn.Spec(str(d)))
    with pytest.raises(longattn.Error, match="valid normalisers") as e:
        longattn.Spec("softmax+bogus")
    assert e.value.status == "LA_ESPEC"
    with pytest.raises(longattn.Error, match="NUL character") as e:  # C would read 'softmax'
        longattn.Spec("softmax\0garbage")
    assert e.value.status == "LA_ESPEC"


@pytest.mark.parametrize("spec", ["softmax+rope+causal", "softmax+prope(p=0.5)+causal",
                                  "softmax+yarn(s=4,train=64)+causal", "softmax+ntk(s=2)+causal"])
def test_rope_against_reference(spec):
    f = longattn.Spec(spec).fields()
    om = longattn.rope_freqs(spec, 16, 128)
    np.testing.assert_allclose(om, attn_ref.rope_omega(f, 16, 128).numpy(), rtol=1e-12)
    x = arr(5, 16)
    pos = np.array([0, 1, 7, 100, 5000])
    y = longattn.rope_apply(x, pos, spec)
    want = attn_ref.rotate(torch.tensor(x, dtype=torch.float64), torch.tensor(pos),
                           attn_ref.rope_omega(f, 16, 0)).numpy()
    np.testing.assert_allclose(y, want, atol=2e-6)
    np.testing.assert_allclose(longattn.rope_apply(y, pos, spec, inverse=True), x, atol=5e-6)


def test_alibi_and_sinv():
    for n in (1, 4, 6, 8, 12):
        np.testing.assert_allclose(longattn.alibi_slopes(n), attn_ref.alibi_slopes(n), rtol=1e-6)
    a, m = longattn.sinv_coeffs(10, 10)  # SPEC 4 reference values
    assert abs(a - 1.54476) < 1e-5 and abs(m - (-1.3863)) < 1e-4


def test_asentmax_params():
    x, wb, wg = arr(2, 5, 6), arr(3, 6), arr(3, 6)
    bb, bg = arr(3), arr(3)
    beta, gamma = longattn.asentmax_params(x, wb, bb, wg, bg, 2.0)
    xt = torch.tensor(x, dtype=torch.float64)
    want_b = torch.nn.functional.softplus(xt @ torch.tensor(wb, dtype=torch.float64).T + torch.tensor(bb, dtype=torch.float64))
    want_g = 2.0 * torch.tanh(xt @ torch.tensor(wg, dtype=torch.float64).T + torch.tensor(bg, dtype=torch.float64))
    np.testing.assert_allclose(beta, want_b.permute(0, 2, 1).numpy(), atol=1e-5)
    np.testing.assert_allclose(gamma, want_g.permute(0, 2, 1).numpy(), atol=1e-5)


def test_npy_roundtrip(tmp_path):
    a = arr(3, 4, 5)
    longattn.npy_write(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), a)
    np.save(tmp_path / "b.npy", a[::2])
    np.testing.assert_array_equal(longattn.npy_read(tmp_path / "b.npy"), a[::2])
    np.save(tmp_path / "c.npy", a.astype(np.float64))
    with pytest.raises(longattn.Error, match="astype"):
        longattn.npy_read(tmp_path / "c.npy")
    with pytest.raises(OSError):
        longattn.npy_read(tmp_path / "missing.npy")
    # a 0-d array keeps its shape () (it was written as (1,)); a path with NUL is refused
    longattn.npy_write(tmp_path / "s.npy", np.float32(2.5) * np.ones((), np.float32))
    assert np.load(tmp_path / "s.npy").shape == () and longattn.npy_read(tmp_path / "s.npy") == 2.5
    with pytest.raises(ValueError, match="NUL"):
        longattn.npy_write(str(tmp_path / "t.npy") + "\0x", a)


# ---- torch module -----------------------------------------------------------------------

def test_module_matches_functional_and_no_grad():
    torch.manual_seed(1)
    m = lt.LongAttention("softmax+logn(train=16)+rope+causal", n_heads=4)
    assert torch.allclose(m.logn_s, torch.full((4,), 1 / math.log(16)))
    q, k, v = torch.randn(2, 4, 16, 8), torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8)
    with torch.no_grad():
        y0 = m(q, k, v)
    assert not y0.requires_grad
    q.requires_grad_(True)
    y = m(q, k, v)
    y.square().sum().backward()
    assert m.logn_s.grad is not None and torch.all(m.logn_s.grad != 0)
    assert torch.equal(y.detach(), y0)
    assert "logn" in repr(m)


def test_sdpa_layout_matches_torch_math():
    """softmax+nope+full with T == S is scaled_dot_product_attention without a mask; causal
    is its is_causal (top-left = bottom-right alignment when T == S)."""
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 4, 32, 16) for _ in range(3))
    for spec, causal in (("softmax+full", False), ("softmax+causal", True)):
        s = q @ k.transpose(-1, -2) / 4.0
        if causal:
            s = s.masked_fill(torch.ones(32, 32, dtype=torch.bool).triu(1), float("-inf"))
        want = torch.softmax(s.double(), -1).float() @ v
        torch.testing.assert_close(lt.LongAttention(spec)(q, k, v), want, atol=2e-5, rtol=1e-5)


@pytest.mark.skipif(not lt.HAS_CUSTOM_OP, reason="torch.library.custom_op needs PyTorch >= 2.4 "
                    f"(installed: {torch.__version__})")
def test_custom_op_under_torch_compile():
    torch.manual_seed(3)
    attn = lt.LongAttention("softmax+sinv(tau=10)+prope(p=0.5)+causal")
    lin = torch.nn.Linear(16, 16)

    def f(x):
        q = lin(x).view(1, 32, 2, 8).transpose(1, 2)
        return attn(q, q, q).sum()

    x = torch.randn(1, 32, 16, requires_grad=True)
    eager = f(x)
    eager.backward()
    g0 = x.grad.clone()
    x.grad = None
    compiled = torch.compile(f, fullgraph=True)  # fullgraph: the op must not break the graph
    y = compiled(x)
    y.backward()
    torch.testing.assert_close(y, eager)
    torch.testing.assert_close(x.grad, g0)
    torch.library.opcheck(torch.ops.longattn.attention_fwd.default,
                          (torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8),
                           None, None, None, None, "softmax+causal", -2**63, 1))


# ---- the cdef is checked against the real header ----------------------------------------

@pytest.mark.parametrize("good", [True, False])
def test_cdef_must_match_header(tmp_path, good):
    """_build.py's cdef restates declarations of include/longattn.h; cffi's API mode
    compiles them against the header, so a drifting declaration fails to build."""
    import cffi
    from longattn import _build
    ffi = cffi.FFI()
    decl = _build.CDEF
    if not good:
        decl = decl.replace("la_status la_spec_parse(const char *text, la_spec *out);",
                            "la_status la_spec_parse(const char *text, int *out);")
    ffi.cdef(decl)
    ffi.set_source("_chk", '#include <stdlib.h>\n#include "longattn.h"\n',
                   include_dirs=[str(ROOT / "include")])
    c = ffi.emit_c_code(str(tmp_path / "chk.c"))  # noqa: F841
    import subprocess
    r = subprocess.run(["cc", "-c", "-Werror", "-I" + str(ROOT / "include"),
                        "-I" + sysconfig.get_paths()["include"], "-o", str(tmp_path / "chk.o"),
                        str(tmp_path / "chk.c")], capture_output=True, text=True)
    assert (r.returncode == 0) == good, r.stderr[-2000:]
