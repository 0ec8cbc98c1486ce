"""NumPy front end of the C library: spec strings, fused attention forward/backward.

Every computation is one call into the C library (longattn._native, built by cffi from
src/); this module only checks arguments, lays out buffers and turns la_status codes into
Python exceptions. cffi releases the GIL for the duration of each C call.
"""
import threading

import numpy as np

from ._native import ffi, lib

DEFAULT_SPEC = "softmax+sinv(tau=10)+prope(p=0.5)+causal"


class Error(ValueError):
    """A call into the library failed (LA_EINVAL, LA_ESHAPE, LA_ESPEC, LA_EFORMAT, ...).

    ``str(e)`` is the library's own message (la_errmsg); ``e.status`` its status name,
    e.g. ``"LA_ESHAPE"``. Subclass of ValueError."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _check(st, what):
    """Raise the Python exception for a la_status (MemoryError, OSError or Error)."""
    if st == lib.LA_OK:
        return
    name = ffi.string(lib.la_status_name(st)).decode()
    msg = ffi.string(lib.la_errmsg()).decode(errors="replace") or f"{what} failed"
    if st == lib.LA_ENOMEM:
        raise MemoryError(msg)
    if st == lib.LA_EIO:
        raise OSError(msg)
    raise Error(name, msg)


def _cstr(what, s, status="LA_EINVAL"):
    """s encoded for C, which would stop reading at an embedded NUL: refused instead."""
    if "\0" in s:
        raise Error(status, f"{what} {s!r} contains a NUL character (C would read only {s.split(chr(0))[0]!r})")
    return s.encode()


# ---------------------------------------------------------------------------------------
# spec strings
# ---------------------------------------------------------------------------------------

_ENUMS = {
    "norm": {lib.LA_NORM_SOFTMAX: "softmax", lib.LA_NORM_ENTMAX: "entmax",
             lib.LA_NORM_SPARSEMAX: "sparsemax", lib.LA_NORM_ASENTMAX: "asentmax",
             lib.LA_NORM_SIGMOID: "sigmoid", lib.LA_NORM_SIGMOID_LOGN: "sigmoid-logn"},
    "sink": {lib.LA_SINK_NONE: "none", lib.LA_SINK_LEARNED: "learned", lib.LA_SINK_FIXED: "fixed"},
    "pos": {lib.LA_POS_NOPE: "nope", lib.LA_POS_ROPE: "rope", lib.LA_POS_PROPE: "prope",
            lib.LA_POS_NTK: "ntk", lib.LA_POS_DYNAMIC_NTK: "dynamic-ntk",
            lib.LA_POS_YARN: "yarn", lib.LA_POS_ALIBI: "alibi", lib.LA_POS_NAPE: "nape",
            lib.LA_POS_PI: "pi"},
    "xform": {lib.LA_XF_NONE: "none", lib.LA_XF_LOGN: "logn", lib.LA_XF_QWEN_LOGN: "qwen-logn",
              lib.LA_XF_SINV: "sinv", lib.LA_XF_CRITICAL: "critical", lib.LA_XF_TEMP: "temp"},
    "pattern": {lib.LA_PAT_CAUSAL: "causal", lib.LA_PAT_WINDOW: "window",
                lib.LA_PAT_SINKS: "sinks", lib.LA_PAT_GLOBAL: "global", lib.LA_PAT_FULL: "full"},
}
_FIELDS = ("norm", "alpha", "as_delta", "as_gamma_range", "pos", "theta", "rope_p",
           "pos_scale", "train_len", "beta_fast", "beta_slow", "xform", "logn_s", "tau",
           "gamma", "temp", "pattern", "window", "sinks", "global", "sink", "sink_fixed", "sig_b",
           "sig_b_set")


class Spec:
    """An attention configuration (SPEC 6), parsed by the library's la_spec_parse.

    ``Spec("entmax(alpha=1.5)+nape+window(512)")``; ``str(spec)`` is the canonical text
    (la_spec_format); ``spec.fields()`` a dict of every field, the enum fields by name
    ("softmax", "rope", "sinv", "causal", ...); single fields read as attributes
    (``spec.alpha``, ``spec.norm``). A bad string raises Error (a ValueError) with the
    library's message naming the offending token and the valid choices."""

    __slots__ = ("_c", "_text", "_fields")

    def __init__(self, text=DEFAULT_SPEC):
        if isinstance(text, Spec):
            c = ffi.new("la_spec *", text._c[0])
        elif isinstance(text, str):
            c = ffi.new("la_spec *")
            _check(lib.la_spec_parse(_cstr("spec", text, "LA_ESPEC"), c), "la_spec_parse")
        else:
            raise TypeError(f"spec must be a str or a longattn.Spec, not {type(text).__name__}")
        self._c = c
        # immutable from here on: the canonical text and the fields are read once, so that
        # traced code (torch.compile) sees plain Python values, not calls into the library
        n = lib.la_spec_format(c, ffi.NULL, 0)
        buf = ffi.new("char[]", n + 1)
        lib.la_spec_format(c, buf, n + 1)
        self._text = ffi.string(buf).decode()
        self._fields = {f: (_ENUMS[f][getattr(c, f)] if f in _ENUMS else getattr(c, f))
                        for f in _FIELDS}

    @classmethod
    def parse(cls, text):
        return cls(text)

    def format(self):
        """Canonical text (la_spec_format)."""
        return self._text

    def fields(self):
        """Every field as a dict; enum fields by name."""
        return dict(self._fields)

    def __getattr__(self, name):
        if name in _FIELDS:
            return self._fields[name]
        raise AttributeError(name)

    def __str__(self):
        return self.format()

    def __repr__(self):
        return f"longattn.Spec({self.format()!r})"

    def __eq__(self, other):
        return isinstance(other, Spec) and self.format() == other.format()

    def __hash__(self):
        return hash(self.format())

    @property
    def sparse(self):
        """True for the entmax family (row statistic tau instead of lse)."""
        return self._fields["norm"] in ("entmax", "sparsemax", "asentmax")

    @property
    def sigmoid(self):
        """True for sigmoid attention (row statistic: the row's mass sum_j p_ij)."""
        return self._fields["norm"] in ("sigmoid", "sigmoid-logn")


def as_spec(spec):
    return spec if isinstance(spec, Spec) else Spec(spec)


# ---------------------------------------------------------------------------------------
# buffers
# ---------------------------------------------------------------------------------------

_tls = threading.local()


def _workspace():
    """One la_workspace per Python thread, reused by every call on it (the kernel grows it
    to the largest request and then stops allocating)."""
    ws = getattr(_tls, "ws", None)
    if ws is None:
        ws = ffi.gc(lib.la_workspace_new(), lib.la_workspace_free)
        if ws == ffi.NULL:
            raise MemoryError("longattn: cannot allocate a workspace")
        _tls.ws = ws
    return ws


def _f32(name, a, ndim=None):
    """a as a C-contiguous float32 ndarray: the same memory when it already is one, a
    contiguous copy when it is a float32 array with other strides. Other dtypes are refused
    (a silent float64 -> float32 conversion would hide a copy and a precision loss)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray of float32, not {type(a).__name__}")
    if a.dtype != np.float32:
        raise TypeError(f"{name} has dtype {a.dtype}; longattn computes in float32: "
                        f"pass {name}.astype(numpy.float32)")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    return np.ascontiguousarray(a)


def _fptr(a):
    return ffi.cast("float *", a.ctypes.data)


# element types of q, k, v (and dout): name -> (la_dtype, numpy storage dtype)
_DTYPES = {"f32": ("LA_DTYPE_F32", np.float32), "f16": ("LA_DTYPE_F16", np.float16),
           "bf16": ("LA_DTYPE_BF16", np.uint16)}


def _input(name, a, dtype, ndim=None):
    """q, k, v or dout of a typed call, C-contiguous, stored as dtype ("f32": float32,
    "f16": float16, "bf16": uint16 bfloat16 bit patterns; numpy has no bfloat16)."""
    if dtype == "f32":
        return _f32(name, a, ndim)
    want = _DTYPES[dtype][1]
    if not isinstance(a, np.ndarray) or a.dtype != want:
        got = a.dtype if isinstance(a, np.ndarray) else type(a).__name__
        raise TypeError(f"{name} has dtype {got}; with dtype={dtype!r} q, k, v (and dout) must be "
                        f"{np.dtype(want).name} arrays" +
                        (" holding bfloat16 bit patterns (e.g. torch_tensor.view(torch.int16).numpy()"
                         ".view(numpy.uint16))" if dtype == "bf16" else ""))
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    return np.ascontiguousarray(a)


def _resolve_dtype(q, dtype):
    """The element type of a call: dtype when given ("f32", "f16", "bf16"), else q's numpy
    dtype (float32 -> "f32", float16 -> "f16"; uint16 needs dtype="bf16" spelled out)."""
    if dtype is not None:
        if dtype not in _DTYPES:
            raise ValueError(f"dtype {dtype!r} is not an attention input type; use 'f32', 'f16' or 'bf16'")
        return dtype
    if isinstance(q, np.ndarray) and q.dtype == np.float16:
        return "f16"
    if isinstance(q, np.ndarray) and q.dtype == np.uint16:
        raise TypeError("q is uint16: pass dtype='bf16' if it holds bfloat16 bit patterns")
    return "f32"


def _vptr(a):
    return ffi.cast("void *", a.ctypes.data)


def _out(name, a, shape):
    """A caller-given output array: float32, C-contiguous, writable, of exactly shape."""
    if a is None:
        return np.empty(shape, dtype=np.float32)
    if not isinstance(a, np.ndarray) or a.dtype != np.float32:
        raise TypeError(f"{name} must be a float32 numpy.ndarray")
    if a.shape != tuple(shape):
        raise ValueError(f"{name} has shape {a.shape}; expected {tuple(shape)}")
    if not a.flags.c_contiguous or not a.flags.writeable:
        raise ValueError(f"{name} must be a writable C-contiguous array (the kernel writes into it)")
    return a


class _Call:
    """Arguments of one la_attn_forward / la_attn_backward call, checked and laid out."""

    def __init__(self, q, k, v, spec, pos0, doc_ids, logn_s, as_beta, as_gamma, threads, dtype=None,
                 sinks=None):
        self.spec = as_spec(spec)
        self.dtype = _resolve_dtype(q, dtype)
        self.la_dtype = getattr(lib, _DTYPES[self.dtype][0])
        self.q = _input("q", q, self.dtype, 4)
        self.k = _input("k", k, self.dtype, 4)
        self.v = _input("v", v, self.dtype, 4)
        B, H, T, D = self.q.shape
        Bk, Hkv, S, Dk = self.k.shape
        if self.k.shape != self.v.shape:
            raise ValueError(f"k and v must have the same shape (B, Hkv, S, D); got {self.k.shape} and {self.v.shape}")
        if Bk != B or Dk != D:
            raise ValueError(f"q is (B, H, T, D) = {self.q.shape} and k, v are (B, Hkv, S, D) = {self.k.shape}: "
                             "B and D must agree")
        self.shape4 = (B, H, T, D)
        self.kshape = (B, Hkv, S, D)
        sh = ffi.new("la_shape *")
        sh.B, sh.H, sh.Hkv, sh.T, sh.S, sh.D = B, H, Hkv, T, S, D
        sh.pos0 = lib.LA_POS0_AUTO if pos0 is None else int(pos0)
        self.sh = sh
        o = ffi.new("la_attn_opts *", lib.la_attn_opts_default())
        self.keep = []  # arrays whose memory opts points into
        if doc_ids is not None:
            d = np.asarray(doc_ids)
            if d.dtype.kind not in "iu":
                raise TypeError(f"doc_ids must be an integer array (B, S), got dtype {d.dtype}")
            if d.shape != (B, S):
                raise ValueError(f"doc_ids must have shape (B, S) = {(B, S)}, got {d.shape}")
            if d.size and (d.min() < -2**31 or d.max() >= 2**31):
                raise ValueError(f"doc_ids hold {d.min()} .. {d.max()}, beyond int32 (the kernel's type): "
                                 "number the documents 0, 1, 2, ...")
            d = np.ascontiguousarray(d, dtype=np.int32)
            self.keep.append(d)
            o.doc_ids = ffi.cast("int32_t *", d.ctypes.data)
        # per-head inputs: logn's s_h and the sink logits (issue 31)
        for name, a, what in (("logn_s", logn_s, "one s_h per head"), ("sinks", sinks, "one sink logit per head")):
            if a is None:
                continue
            a = _f32(name, np.asarray(a, dtype=np.float32).reshape(-1))
            if a.shape != (H,):
                raise ValueError(f"{name} must have H = {H} entries ({what}), got {a.size}")
            self.keep.append(a)
            setattr(o, name, _fptr(a))
        # an input the spec does not read would be ignored silently: refuse it
        for name, a, used, what in (("logn_s", logn_s, self.spec.xform == "logn", "a logn transform"),
                                    ("sinks", sinks, self.spec.sink == "learned", "a learned sink (softmax+sink)"),
                                    ("as_beta", as_beta, self.spec.norm == "asentmax", "asentmax"),
                                    ("as_gamma", as_gamma, self.spec.norm == "asentmax", "asentmax")):
            if a is not None and not used:
                raise ValueError(f"{name}= is read only by specs with {what}, and spec {self.spec} has none: "
                                 f"drop {name}= or change the spec")
        for name, a in (("as_beta", as_beta), ("as_gamma", as_gamma)):
            if a is not None:
                a = _f32(name, a)
                if a.shape != (B, H, T):
                    raise ValueError(f"{name} must have shape (B, H, T) = {(B, H, T)}, got {a.shape}")
                self.keep.append(a)
                setattr(o, name, _fptr(a))
        if threads is not None:
            if int(threads) < 0:
                raise ValueError(f"threads must be >= 1, or 0 or None for the OpenMP default; got {threads}")
            o.n_threads = int(threads)
        o.ws = _workspace()
        self.o = o


def attention(q, k, v, spec=DEFAULT_SPEC, *, pos0=None, doc_ids=None, logn_s=None,
              as_beta=None, as_gamma=None, stats=(), threads=None, out=None, dtype=None, sinks=None):
    """Fused attention forward (la_attn_forward) on NumPy arrays.

    q: (B, H, T, D) float32; k, v: (B, Hkv, S, D) float32 with H % Hkv == 0 (grouped-query
    attention). Query i sits at position pos0 + i (default pos0 = S - T: the last query sees
    the last key); key j at position j. RoPE-family encodings are applied inside the kernel:
    pass q and k unrotated.

    Memory: C-contiguous float32 inputs are read in place (zero-copy); float32 arrays with
    other strides (transposes, slices) are first copied to a contiguous array. Other dtypes
    are refused with TypeError. ``out`` (B, H, T, D), when given, must be a writable
    C-contiguous float32 array and receives the result directly.

    spec: a spec string (SPEC 6) or a Spec. doc_ids: (B, S) integer document ids (contiguous
    runs; attention stays inside each document). logn_s: (H) per-head s_h of the logn
    transform. as_beta, as_gamma: (B, H, T) ASEntmax scale parameters (required for asentmax).
    sinks: (H) sink logits of a "softmax+sink" spec (None: 0 for every head).
    threads: OpenMP threads (None: the OpenMP default).
    dtype: element type of q, k, v -- None: from q (float32 or float16), or "f32", "f16",
    "bf16" (uint16 arrays of bfloat16 bit patterns). f16 / bf16 inputs run
    la_attn_forward_typed: float32 accumulation and statistics, float32 outputs, bitwise the
    float32 kernel on the inputs converted to float32.
    stats: names of extra outputs, any of "lse" (softmax log-sum-exp), "tau" (entmax-family
    threshold), "row_stat" (whichever the normaliser keeps), "row_entropy" (B, H, T),
    "key_mass" (B, H, S), "row_support" (B, H, T). Sigmoid specs keep the row's mass
    sum_j p_ij as "row_stat" (they have no lse or tau).

    Returns out, or (out, {name: array}) when stats is non-empty. Rows with no visible key
    give out = 0 and lse/tau = -inf. The GIL is released during the computation. Errors:
    Error (a ValueError) with the library's message; MemoryError."""
    c = _Call(q, k, v, spec, pos0, doc_ids, logn_s, as_beta, as_gamma, threads, dtype, sinks)
    if isinstance(stats, str):
        stats = (stats,)
    known = ("lse", "tau", "row_stat", "row_entropy", "key_mass", "row_support")
    for s in stats:
        if s not in known:
            raise ValueError(f"unknown statistic {s!r}; choose from {', '.join(known)}")
    if "lse" in stats and c.spec.sparse:
        raise ValueError(f"'lse' is the softmax row statistic; the {c.spec.norm} normaliser keeps "
                         "its threshold: ask for 'tau' (or 'row_stat')")
    if "tau" in stats and not c.spec.sparse:
        raise ValueError("'tau' is the entmax-family row statistic; softmax keeps 'lse'")
    if "lse" in stats and c.spec.sigmoid:
        raise ValueError(f"the {c.spec.norm} normaliser has no log-sum-exp: its row statistic is the "
                         "row's mass sum_j p_ij; ask for 'row_stat'")
    B, H, T, D = c.shape4
    S = c.kshape[2]
    o = _out("out", out, c.shape4)
    row_stat = np.empty((B, H, T), dtype=np.float32)
    extra = {}
    for name, shp in (("row_entropy", (B, H, T)), ("key_mass", (B, H, S)), ("row_support", (B, H, T))):
        if name in stats:
            extra[name] = np.empty(shp, dtype=np.float32)
            setattr(c.o, name, _fptr(extra[name]))
    st = lib.la_attn_forward_typed(c.la_dtype, c.spec._c, c.sh, _vptr(c.q), _vptr(c.k), _vptr(c.v),
                                   _fptr(o), _fptr(row_stat), c.o)
    _check(st, "la_attn_forward")
    if not stats:
        return o
    res = {}
    for s in stats:
        res[s] = row_stat if s in ("lse", "tau", "row_stat") else extra[s]
    return o, res


def attention_forward(q, k, v, spec=DEFAULT_SPEC, *, pos0=None, doc_ids=None, logn_s=None,
                      as_beta=None, as_gamma=None, threads=None, out=None, dtype=None, sinks=None):
    """attention() returning (out, row_stat): the two arrays attention_backward needs."""
    o, st = attention(q, k, v, spec, pos0=pos0, doc_ids=doc_ids, logn_s=logn_s, as_beta=as_beta,
                      as_gamma=as_gamma, stats=("row_stat",), threads=threads, out=out, dtype=dtype,
                      sinks=sinks)
    return o, st["row_stat"]


def attention_backward(q, k, v, out, row_stat, dout, spec=DEFAULT_SPEC, *, pos0=None,
                       doc_ids=None, logn_s=None, as_beta=None, as_gamma=None, threads=None,
                       dtype=None, sinks=None):
    """Backward of attention (la_attn_backward) from the forward's out and row_stat.

    dout: (B, H, T, D). Returns a dict with dq (B, H, T, D), dk, dv (B, Hkv, S, D), and
    dlogn_s (H) for the logn transform, dsinks (H) for a learned sink (softmax+sink),
    das_beta, das_gamma (B, H, T) for asentmax. The
    other arguments must be those of the forward call. Memory and errors as attention().
    With f16 / bf16 inputs (dtype as in attention()) dout has their type too; the gradients
    are float32."""
    c = _Call(q, k, v, spec, pos0, doc_ids, logn_s, as_beta, as_gamma, threads, dtype, sinks)
    B, H, T, D = c.shape4
    out = _f32("out", out)
    row_stat = _f32("row_stat", row_stat)
    dout = _input("dout", dout, c.dtype)
    if out.shape != c.shape4 or dout.shape != c.shape4:
        raise ValueError(f"out and dout must have the shape of q {c.shape4}; got {out.shape}, {dout.shape}")
    if row_stat.shape != (B, H, T):
        raise ValueError(f"row_stat must have shape (B, H, T) = {(B, H, T)}, got {row_stat.shape}")
    res = {"dq": np.empty(c.shape4, np.float32), "dk": np.empty(c.kshape, np.float32),
           "dv": np.empty(c.kshape, np.float32)}
    if c.spec._c.xform == lib.LA_XF_LOGN:
        res["dlogn_s"] = np.zeros(H, np.float32)
        c.o.dlogn_s = _fptr(res["dlogn_s"])
    if c.spec._c.sink == lib.LA_SINK_LEARNED:
        res["dsinks"] = np.zeros(H, np.float32)
        c.o.dsinks = _fptr(res["dsinks"])
    if c.spec._c.norm == lib.LA_NORM_ASENTMAX:
        for name in ("das_beta", "das_gamma"):
            res[name] = np.zeros((B, H, T), np.float32)
            setattr(c.o, name, _fptr(res[name]))
    st = lib.la_attn_backward_typed(c.la_dtype, c.spec._c, c.sh, _vptr(c.q), _vptr(c.k), _vptr(c.v),
                                    _fptr(out), _fptr(row_stat), _vptr(dout), _fptr(res["dq"]),
                                    _fptr(res["dk"]), _fptr(res["dv"]), c.o)
    _check(st, "la_attn_backward")
    return res
