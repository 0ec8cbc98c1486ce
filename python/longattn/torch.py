"""PyTorch front end: autograd through the fused kernels, an SDPA-layout module, a custom op.

    from longattn.torch import LongAttention, attention
    attn = LongAttention("softmax+sinv(tau=10)+prope(p=0.5)+causal")
    y = attn(q, k, v)            # q (B, H, T, D), k, v (B, Hkv, S, D): SDPA's layout

Forward is la_attn_forward, backward la_attn_backward (gradients for q, k, v, the per-head
LogN s_h, the per-head sink logits of "softmax+sink" and the ASEntmax beta/gamma); nothing is
recomputed in PyTorch. Tensors must be
float32 on the CPU. Where torch.library.custom_op exists (PyTorch >= 2.4) the kernels are
registered as the ops longattn::attention_fwd / longattn::attention_bwd with fake (meta)
implementations and autograd, so torch.compile keeps them as opaque nodes in its graphs;
on older PyTorch (Debian's 1.13) a torch.autograd.Function does the same without compile
support. HAS_CUSTOM_OP says which.
"""
import math
from typing import Optional, Tuple

import numpy as np
import torch
from torch import Tensor, nn

from . import _core
from ._core import DEFAULT_SPEC, Spec, as_spec
from ._native import lib

HAS_CUSTOM_OP = hasattr(torch, "library") and hasattr(torch.library, "custom_op")

_POS0_AUTO = int(lib.LA_POS0_AUTO)


_HALF = {torch.float16: "f16", torch.bfloat16: "bf16"}


def _check_tensor(name, t, ndim=None, half_ok=False):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"longattn runs on the CPU: {name} is on {t.device}; move it with "
                         f"{name}.cpu() (or use torch's own attention on that device)")
    if t.dtype != torch.float32 and not (half_ok and t.dtype in _HALF):
        raise TypeError(f"{name} has dtype {t.dtype}; longattn takes " +
                        ("float32, float16 or bfloat16" if half_ok else "float32") +
                        f" here: pass {name}.float()")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")


def _np(t):
    """A NumPy view of a tensor (contiguous copy when strided); no autograd. bfloat16 comes
    out as uint16 bit patterns (numpy has no bfloat16), float16 as float16."""
    if t is None:
        return None
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _dt(t):
    return _HALF.get(t.dtype, "f32")


def _fwd_impl(q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec, pos0, threads):
    out, row_stat = _core.attention_forward(
        _np(q), _np(k), _np(v), spec, pos0=None if pos0 == _POS0_AUTO else pos0,
        doc_ids=None if doc_ids is None else doc_ids.detach().contiguous().numpy(),
        logn_s=_np(logn_s), as_beta=_np(as_beta), as_gamma=_np(as_gamma),
        threads=threads or torch.get_num_threads(), dtype=_dt(q), sinks=_np(sinks))
    return torch.from_numpy(out), torch.from_numpy(row_stat)


def _bwd_impl(q, k, v, out, row_stat, dout, logn_s, sinks, as_beta, as_gamma, doc_ids, spec,
              pos0, threads):
    # half inputs: dO is read in their type too (rounded, as autocast stores it), and the
    # float32 gradients are handed back in the inputs' type, as autograd expects
    g = _core.attention_backward(
        _np(q), _np(k), _np(v), _np(out), _np(row_stat), _np(dout.to(q.dtype)), spec,
        pos0=None if pos0 == _POS0_AUTO else pos0,
        doc_ids=None if doc_ids is None else doc_ids.detach().contiguous().numpy(),
        logn_s=_np(logn_s), as_beta=_np(as_beta), as_gamma=_np(as_gamma),
        threads=threads or torch.get_num_threads(), dtype=_dt(q), sinks=_np(sinks))
    H = q.shape[1]
    return (torch.from_numpy(g["dq"]).to(q.dtype), torch.from_numpy(g["dk"]).to(k.dtype),
            torch.from_numpy(g["dv"]).to(v.dtype),
            torch.from_numpy(g["dlogn_s"]) if "dlogn_s" in g else torch.zeros(H),
            torch.from_numpy(g["dsinks"]) if "dsinks" in g else torch.zeros(H),
            torch.from_numpy(g["das_beta"]) if "das_beta" in g else torch.zeros(0),
            torch.from_numpy(g["das_gamma"]) if "das_gamma" in g else torch.zeros(0))


class AttentionFunction(torch.autograd.Function):
    """autograd Function over la_attn_forward / la_attn_backward (any PyTorch version).

    apply(q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec_text, pos0, threads) -> out."""

    @staticmethod
    def forward(ctx, q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec, pos0, threads):
        out, row_stat = _fwd_impl(q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec, pos0,
                                  threads)
        ctx.save_for_backward(q, k, v, out, row_stat, logn_s, sinks, as_beta, as_gamma, doc_ids)
        ctx.args = (spec, pos0, threads)
        return out

    # the C backward is not itself differentiable: a double backward raises instead of
    # returning gradients that silently miss the second-order term
    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        q, k, v, out, row_stat, logn_s, sinks, as_beta, as_gamma, doc_ids = ctx.saved_tensors
        spec, pos0, threads = ctx.args
        dq, dk, dv, dls, dsk, dbeta, dgamma = _bwd_impl(q, k, v, out, row_stat, dout, logn_s, sinks,
                                                        as_beta, as_gamma, doc_ids, spec, pos0,
                                                        threads)
        need = ctx.needs_input_grad
        return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
                dls if (logn_s is not None and need[3]) else None,
                dsk if (sinks is not None and need[4]) else None,
                dbeta if (as_beta is not None and need[5]) else None,
                dgamma if (as_gamma is not None and need[6]) else None,
                None, None, None, None)


if HAS_CUSTOM_OP:  # PyTorch >= 2.4: opaque custom ops that torch.compile can trace around
    @torch.library.custom_op("longattn::attention_fwd", mutates_args=())
    def _op_fwd(q: Tensor, k: Tensor, v: Tensor, logn_s: Optional[Tensor], sinks: Optional[Tensor],
                as_beta: Optional[Tensor], as_gamma: Optional[Tensor], doc_ids: Optional[Tensor],
                spec: str, pos0: int, threads: int) -> Tuple[Tensor, Tensor]:
        return _fwd_impl(q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec, pos0, threads)

    @_op_fwd.register_fake
    def _(q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec, pos0, threads):
        # the kernel's outputs are contiguous whatever the inputs' strides, and float32
        # whatever the inputs' type
        return (q.new_empty(q.shape, dtype=torch.float32),
                q.new_empty(q.shape[:3], dtype=torch.float32))

    @torch.library.custom_op("longattn::attention_bwd", mutates_args=())
    def _op_bwd(q: Tensor, k: Tensor, v: Tensor, out: Tensor, row_stat: Tensor, dout: Tensor,
                logn_s: Optional[Tensor], sinks: Optional[Tensor], as_beta: Optional[Tensor],
                as_gamma: Optional[Tensor], doc_ids: Optional[Tensor], spec: str, pos0: int,
                threads: int) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        return _bwd_impl(q, k, v, out, row_stat, dout.contiguous(), logn_s, sinks, as_beta,
                         as_gamma, doc_ids, spec, pos0, threads)

    @_op_bwd.register_fake
    def _(q, k, v, out, row_stat, dout, logn_s, sinks, as_beta, as_gamma, doc_ids, spec, pos0,
          threads):
        f32 = torch.float32
        return (q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape),
                q.new_empty((q.shape[1],), dtype=f32), q.new_empty((q.shape[1],), dtype=f32),
                q.new_empty(as_beta.shape, dtype=f32) if as_beta is not None else q.new_empty((0,), dtype=f32),
                q.new_empty(as_gamma.shape, dtype=f32) if as_gamma is not None else q.new_empty((0,), dtype=f32))

    def _setup_context(ctx, inputs, output):
        q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec, pos0, threads = inputs
        out, row_stat = output
        ctx.save_for_backward(q, k, v, out, row_stat, logn_s, sinks, as_beta, as_gamma, doc_ids)
        ctx.args = (spec, pos0, threads)

    def _op_backward(ctx, dout, drow_stat):
        q, k, v, out, row_stat, logn_s, sinks, as_beta, as_gamma, doc_ids = ctx.saved_tensors
        spec, pos0, threads = ctx.args
        dq, dk, dv, dls, dsk, dbeta, dgamma = _op_bwd(q, k, v, out, row_stat, dout, logn_s, sinks,
                                                      as_beta, as_gamma, doc_ids, spec, pos0,
                                                      threads)
        return (dq, dk, dv, dls if logn_s is not None else None,
                dsk if sinks is not None else None,
                dbeta if as_beta is not None else None, dgamma if as_gamma is not None else None,
                None, None, None, None)

    _op_fwd.register_autograd(_op_backward, setup_context=_setup_context)


def attention(q, k, v, spec=DEFAULT_SPEC, *, pos0=None, doc_ids=None, logn_s=None,
              as_beta=None, as_gamma=None, threads=None, sinks=None):
    """Differentiable fused attention on CPU float32, float16 or bfloat16 tensors.

    q: (B, H, T, D); k, v: (B, Hkv, S, D) (the layout of scaled_dot_product_attention, with
    grouped-query heads allowed). Query i sits at position pos0 + i (default S - T). logn_s
    (H) and as_beta / as_gamma (B, H, T) receive gradients when they require them. doc_ids:
    (B, S) integer tensor. sinks (H): the sink logits of a "softmax+sink" spec (None: 0), with
    their gradient. threads: OpenMP threads (default torch.get_num_threads()).
    Strided inputs are copied to contiguous memory; contiguous ones are read in place.
    float16 / bfloat16 q, k, v (all three of one type) run la_attn_forward_typed: float32
    accumulation and statistics; the output is float32, the gradients of q, k, v come back
    in their type (computed in float32 from dO rounded to that type)."""
    spec_text = as_spec(spec).format()
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t, 4, half_ok=True)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must have one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    for name, t in (("logn_s", logn_s), ("sinks", sinks), ("as_beta", as_beta), ("as_gamma", as_gamma)):
        if t is not None:
            _check_tensor(name, t)
    if doc_ids is not None:
        if not isinstance(doc_ids, torch.Tensor) or doc_ids.device.type != "cpu" or \
                doc_ids.dtype.is_floating_point:
            raise TypeError("doc_ids must be an integer CPU tensor (B, S)")
        doc_ids = doc_ids.to(torch.int32)
    p0 = _POS0_AUTO if pos0 is None else int(pos0)
    th = int(threads) if threads else 0  # 0: torch.get_num_threads() when the op runs
    if HAS_CUSTOM_OP:
        return _op_fwd(q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec_text, p0, th)[0]
    return AttentionFunction.apply(q, k, v, logn_s, sinks, as_beta, as_gamma, doc_ids, spec_text, p0,
                                   th)


def _logn_init(spec, n_heads):
    s = spec.logn_s
    if s == 0:
        if spec.train_len <= 1:
            raise ValueError(f"spec {spec} uses logn without s or train: give logn(s=...) or "
                             "logn(train=L) so that the initial s_h is known")
        s = 1.0 / math.log(spec.train_len)
    return torch.full((n_heads,), float(s))


class LongAttention(nn.Module):
    """Drop-in for torch.nn.functional.scaled_dot_product_attention on the CPU.

    LongAttention(spec, n_heads=None, threads=None); forward(q, k, v, *, pos0=None,
    doc_ids=None, as_beta=None, as_gamma=None) with q (B, H, T, D) and k, v (B, Hkv, S, D).
    The mask, causality and positions come from the spec (RoPE-family encodings are applied
    inside: pass q and k unrotated). A logn spec needs n_heads: the module then owns the
    learnable per-head s_h (parameter logn_s, initialised from the spec). A "softmax+sink" spec
    needs n_heads too: the module owns the per-head sink logits (parameter sinks, initialised
    to 0 = softmax plus one), trained through autograd. asentmax needs the
    per-query as_beta, as_gamma (B, H, T) (e.g. from Linear layers on the block input; see
    examples/torch_gpt.py), which get gradients. Works under torch.no_grad."""

    def __init__(self, spec=DEFAULT_SPEC, n_heads=None, threads=None):
        super().__init__()
        self.spec = Spec(spec) if not isinstance(spec, Spec) else spec
        self.threads = threads
        if self.spec.xform == "logn":
            if n_heads is None:
                raise ValueError(f"spec {self.spec} has the learnable logn transform: "
                                 "give LongAttention(spec, n_heads=H)")
            self.logn_s = nn.Parameter(_logn_init(self.spec, n_heads))
        else:
            self.register_parameter("logn_s", None)
        if self.spec.sink == "learned":
            if n_heads is None:
                raise ValueError(f"spec {self.spec} has learned sink logits: give LongAttention(spec, n_heads=H)")
            self.sinks = nn.Parameter(torch.zeros(n_heads))
        else:
            self.register_parameter("sinks", None)

    def extra_repr(self):
        return f"spec={str(self.spec)!r}"

    def forward(self, q, k, v, *, pos0=None, doc_ids=None, as_beta=None, as_gamma=None):
        if self.spec.norm == "asentmax" and (as_beta is None or as_gamma is None):
            raise ValueError(f"spec {self.spec} (asentmax) needs as_beta and as_gamma (B, H, T)")
        return attention(q, k, v, self.spec, pos0=pos0, doc_ids=doc_ids, logn_s=self.logn_s,
                         as_beta=as_beta, as_gamma=as_gamma, threads=self.threads, sinks=self.sinks)


__all__ = ["AttentionFunction", "LongAttention", "attention", "HAS_CUSTOM_OP"]
