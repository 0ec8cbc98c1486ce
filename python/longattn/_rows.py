"""Row normalisers (sparsemax, 1.5-entmax, alpha-entmax) and position helpers, on NumPy
arrays, each one call into the C library. The normalisers work along the last axis."""
import numpy as np

from ._core import _check, _cstr, as_spec
from ._native import ffi, lib


def _rows(name, z):
    z = np.asarray(z)
    if z.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got dtype {z.dtype}")
    if z.ndim < 1 or z.shape[-1] < 1:
        raise ValueError(f"{name} must have at least one entry along the last axis, got shape {z.shape}")
    z2 = np.ascontiguousarray(z.reshape(-1, z.shape[-1]))
    return z2, ("float" if z.dtype == np.float32 else "double")


def _ptr(ct, a):
    return ffi.cast(ct + " *", a.ctypes.data)


def _pick(kind, fname, alpha):
    f = {"float": "f32", "double": "f64"}[kind]
    return getattr(lib, f"la_{fname}_{f}")


def entmax(z, alpha=1.5, *, return_tau=False):
    """alpha-entmax of each row of z (last axis): p_i = [(alpha-1) z_i - tau]_+^(1/(alpha-1)),
    sum p = 1 (Peters et al. 2019). alpha = 2 and 1.5 use the exact sort-based solutions,
    any other alpha in (1, 4] the bisection/Newton root find. -inf entries are masked; a row
    with no finite entry gives p = 0 and tau = -inf. float32 or float64 in, the same out.
    return_tau: also return tau (float64, shape z.shape[:-1])."""
    z2, kind = _rows("z", z)
    rows, n = z2.shape
    p = np.empty_like(z2)
    tau = np.empty(rows, np.float64)
    tp = ffi.cast("double *", tau.ctypes.data)
    if alpha == 2:
        st = _pick(kind, "sparsemax_forward", alpha)(_ptr(kind, z2), rows, n, _ptr(kind, p), tp)
    elif alpha == 1.5:
        st = _pick(kind, "entmax15_forward", alpha)(_ptr(kind, z2), rows, n, _ptr(kind, p), tp)
    else:
        st = _pick(kind, "entmax_bisect_forward", alpha)(_ptr(kind, z2), rows, n, float(alpha),
                                                           _ptr(kind, p), tp)
    _check(st, "entmax")
    p = p.reshape(np.shape(z))
    return (p, tau.reshape(np.shape(z)[:-1])) if return_tau else p


def sparsemax(z, *, return_tau=False):
    """sparsemax (alpha = 2; Martins & Astudillo 2016) of each row; see entmax."""
    return entmax(z, 2, return_tau=return_tau)


def entmax15(z, *, return_tau=False):
    """1.5-entmax of each row; see entmax."""
    return entmax(z, 1.5, return_tau=return_tau)


def entmax_backward(p, dp, alpha=1.5, *, return_dalpha=False):
    """Vector-Jacobian product of entmax from its output p and dL/dp (same shape):
    dz = u dp - (sum u dp / sum u) u with u = p^(2-alpha) on the support. return_dalpha:
    also dL/dalpha per row (Correia et al. 2019; general alpha path, float64)."""
    p2, kind = _rows("p", p)
    dp2 = np.ascontiguousarray(np.asarray(dp, dtype=p2.dtype).reshape(p2.shape))
    if np.shape(dp) != np.shape(p):
        raise ValueError(f"dp has shape {np.shape(dp)}; expected the shape of p {np.shape(p)}")
    rows, n = p2.shape
    dz = np.empty_like(p2)
    if return_dalpha or alpha not in (1.5, 2):
        da = np.empty(rows, np.float64)
        st = _pick(kind, "entmax_bisect_backward", alpha)(
            _ptr(kind, p2), _ptr(kind, dp2), rows, n, float(alpha), _ptr(kind, dz),
            ffi.cast("double *", da.ctypes.data))
    else:
        name = "sparsemax_backward" if alpha == 2 else "entmax15_backward"
        st = _pick(kind, name, alpha)(_ptr(kind, p2), _ptr(kind, dp2), rows, n, _ptr(kind, dz))
    _check(st, "entmax_backward")
    dz = dz.reshape(np.shape(p))
    return (dz, da.reshape(np.shape(p)[:-1])) if return_dalpha else dz


def rope_freqs(spec, D, ctx_len=0):
    """Rotation frequencies omega_k (D/2,) float64 of the spec's RoPE-family encoding at
    context length ctx_len (dynamic-ntk); 0 for pairs that do not rotate."""
    s = as_spec(spec)
    om = np.empty(D // 2, np.float64)
    _check(lib.la_rope_freqs(s._c, int(D), int(ctx_len), ffi.cast("double *", om.ctypes.data)),
           "la_rope_freqs")
    return om


def rope_apply(x, pos, spec, *, ctx_len=0, inverse=False):
    """Rotate the rows of x (N, D) float32 by angle pos[r] * omega_k on the half-split pairs
    (x[k], x[k + D/2]) as the kernel does; returns a new array (x is not modified)."""
    s = as_spec(spec)
    x = np.asarray(x)
    if x.dtype != np.float32 or x.ndim != 2:
        raise TypeError(f"x must be a float32 (N, D) array, got {x.dtype} {x.shape}")
    y = np.array(x, dtype=np.float32, order="C", copy=True)
    N, D = y.shape
    p = np.ascontiguousarray(np.asarray(pos, dtype=np.int64).reshape(-1))
    if p.shape != (N,):
        raise ValueError(f"pos must have N = {N} entries, got {p.size}")
    _check(lib.la_rope_apply(s._c, ffi.cast("float *", y.ctypes.data), N, D,
                             ffi.cast("int64_t *", p.ctypes.data), int(ctx_len), int(bool(inverse))),
           "la_rope_apply")
    return y


def alibi_slopes(n_heads):
    """ALiBi slopes m_h (n_heads,) float32 (Press et al.)."""
    m = np.empty(int(n_heads), np.float32)
    lib.la_alibi_slopes(int(n_heads), ffi.cast("float *", m.ctypes.data))
    return m


def sinv_coeffs(t, tau=10.0):
    """(a_t, m_t) of scale-invariant attention at distance t (SPEC 4)."""
    a = ffi.new("double *")
    m = ffi.new("double *")
    lib.la_sinv_coeffs(float(t), float(tau), a, m)
    return a[0], m[0]


def asentmax_params(x, w_beta, b_beta, w_gamma, b_gamma, gamma_range=2.0):
    """ASEntmax beta, gamma (B, H, T) from the layer input x (B, T, C) (Vasylenko et al. 2025
    eq. 9-10): beta = softplus(x w_beta^T + b_beta), gamma = gamma_range tanh(x w_gamma^T +
    b_gamma). w_*: (H, C) float32; b_*: (H) float32 or None."""
    def f(name, a):
        a = np.asarray(a)
        if a.dtype != np.float32:
            raise TypeError(f"{name} must be float32, got {a.dtype}")
        return np.ascontiguousarray(a)
    x = f("x", x)
    B, T, C = x.shape
    wb, wg = f("w_beta", w_beta), f("w_gamma", w_gamma)
    H = wb.shape[0]
    if wb.shape != (H, C) or wg.shape != (H, C):
        raise ValueError(f"w_beta and w_gamma must be (H, C) with C = {C}")
    bb = None if b_beta is None else f("b_beta", b_beta)
    bg = None if b_gamma is None else f("b_gamma", b_gamma)
    beta = np.empty((B, H, T), np.float32)
    gamma = np.empty((B, H, T), np.float32)
    fp = lambda a: ffi.NULL if a is None else ffi.cast("float *", a.ctypes.data)  # noqa: E731
    _check(lib.la_asentmax_params_forward(fp(x), B, T, C, H, fp(wb), fp(bb), fp(wg), fp(bg),
                                          float(gamma_range), fp(beta), fp(gamma)),
           "la_asentmax_params_forward")
    return beta, gamma


def npy_read(path):
    """Read a float32 .npy file with the library's reader (la_npy_read_f32)."""
    data = ffi.new("float **")
    ndim = ffi.new("int *")
    shape = ffi.new("int64_t[8]")
    _check(lib.la_npy_read_f32(_cstr("path", str(path)), data, ndim, shape), "la_npy_read_f32")
    try:
        shp = tuple(shape[i] for i in range(ndim[0]))
        n = int(np.prod(shp, dtype=np.int64))
        out = np.frombuffer(ffi.buffer(data[0], 4 * n), dtype=np.float32).reshape(shp).copy()
    finally:
        lib.free(data[0])
    return out


def npy_write(path, a):
    """Write a float32 array as .npy atomically with the library's writer (la_npy_write_f32)."""
    a = np.asarray(a)
    if a.dtype != np.float32:
        raise TypeError(f"a must be float32, got {a.dtype}")
    a = a if a.flags.c_contiguous else np.ascontiguousarray(a)  # which would make a 0-d array 1-d
    shp = ffi.new("int64_t[]", list(a.shape) or [0])
    _check(lib.la_npy_write_f32(_cstr("path", str(path)), ffi.cast("float *", a.ctypes.data), a.ndim, shp),
           "la_npy_write_f32")
