"""longattn: fused CPU attention (forward and backward) from NumPy and PyTorch.

    import numpy as np, longattn
    q = np.random.randn(1, 8, 1024, 64).astype(np.float32)
    k = v = np.random.randn(1, 8, 1024, 64).astype(np.float32)
    out = longattn.attention(q, k, v, "softmax+sinv(tau=10)+prope(p=0.5)+causal")

Every kernel is the C library's (compiled from src/ into longattn._native by cffi).
PyTorch: ``longattn.torch`` (autograd Function, LongAttention module, custom op).
"""
from ._core import (DEFAULT_SPEC, Error, Spec, attention, attention_backward,
                    attention_forward)
from ._rows import (alibi_slopes, asentmax_params, entmax, entmax15, entmax_backward,
                    npy_read, npy_write, rope_apply, rope_freqs, sinv_coeffs, sparsemax)

__version__ = "0.1.0"
__all__ = ["DEFAULT_SPEC", "Error", "Spec", "attention", "attention_forward",
           "attention_backward", "entmax", "entmax15", "sparsemax", "entmax_backward",
           "rope_freqs", "rope_apply", "alibi_slopes", "sinv_coeffs", "asentmax_params",
           "npy_read", "npy_write"]
