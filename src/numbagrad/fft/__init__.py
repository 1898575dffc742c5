"""``numbagrad.fft``: torch.fft's discrete Fourier transforms (``fft``, ``rfft``, ``irfft``, ``hfft``, their
2-d and n-d forms and inverses), the sample frequencies (``fftfreq``, ``rfftfreq``) and the shifts that center
them (``fftshift``, ``ifftshift``).

The transforms are Functions of ``numbagrad.ops.spectral`` (pocketfft on the host; differentiable, with torch's
gradients); this module re-exports them under torch's names.
"""

from __future__ import annotations

import math

import numpy as np

from .. import ops
from .._tensor import Tensor
from .._types import get_default_dtype, to_dtype, wrap_dim
from ..ops.spectral import (
    fft,
    fft2,
    fftn,
    hfft,
    hfft2,
    hfftn,
    ifft,
    ifft2,
    ifftn,
    ihfft,
    ihfft2,
    ihfftn,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftn,
)

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "hfft2",
    "hfftn",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "ihfft2",
    "ihfftn",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]


def _frequencies(name: str, n, d: float, dtype, device, requires_grad: bool, values) -> Tensor:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"fft_{name}(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    dtype = get_default_dtype() if dtype is None else to_dtype(dtype)
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} requires a floating point or complex dtype")
    scale = 1.0 / (n * d) if n * d != 0 else math.copysign(math.inf, d)  # (C's 1.0 / 0.0)
    # as torch: integer steps in the dtype, times the scale rounded to the dtype
    with np.errstate(invalid="ignore", over="ignore"):  # (0 * inf is NaN, as torch's)
        data = values.astype(dtype.numpy) * dtype.numpy.type(scale)
    return ops.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point FFT with sample spacing ``d``: ``[0, 1, ..., ceil(n/2) - 1,
    -floor(n/2), ..., -1] / (d * n)``."""
    half = (n + 1) // 2 if isinstance(n, int) and n > 0 else 0
    steps = np.concatenate([np.arange(half), np.arange(-(n // 2), 0)]) if half else np.arange(0)
    return _frequencies("fftfreq", n, d, dtype, device, requires_grad, steps)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point real FFT (the non-negative ones): ``[0, 1, ..., n // 2] /
    (d * n)``."""
    steps = np.arange(n // 2 + 1) if isinstance(n, int) and n >= 0 else np.arange(0)
    return _frequencies("rfftfreq", n, d, dtype, device, requires_grad, steps)


def _shift(input: Tensor, dim, forward: bool) -> Tensor:  # noqa: A002
    dims = tuple(range(input.dim())) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(wrap_dim(d, input.dim()) for d in dims)
    shifts = tuple(input.shape[d] // 2 if forward else (input.shape[d] + 1) // 2 for d in dims)
    return ops.roll(input, shifts, dims)


def fftshift(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """``input`` rolled so the zero frequency is at the centre of each of ``dim`` (by default all dims)."""
    return _shift(input, dim, forward=True)


def ifftshift(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """The inverse of ``fftshift``: the centre moved back to index 0 of each of ``dim``."""
    return _shift(input, dim, forward=False)
