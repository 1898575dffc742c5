"""``Tensor.apply_(fn)``: ``fn`` compiled by Numba and run over the storage in place.

Compiled kernels are memoized per (callable, dtype), so the second call compiles nothing. A callable Numba cannot
compile still works, element by element in Python as in torch, after one warning that says why it is slow.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from .._tensor import Tensor

_compiled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_uncompilable: weakref.WeakSet = weakref.WeakSet()


def _make_kernel(fn):
    import numba

    scalar = numba.njit(fn)

    @numba.njit(nogil=True)
    def kernel(flat):
        for i in range(flat.shape[0]):
            flat[i] = scalar(flat[i])

    return kernel


def _python_apply(flat: np.ndarray, fn) -> None:
    for i in range(flat.shape[0]):
        flat[i] = fn(flat[i].item())


def apply_(t: Tensor, fn) -> Tensor:
    """Apply ``fn`` to every element of ``t`` in place; returns ``t``."""
    if t.requires_grad:
        raise RuntimeError("Can't call apply_() on Variable that requires grad. Use var.detach().apply_() instead.")
    if not callable(fn):
        raise TypeError(f"apply_(): argument 'callable' must be callable, not {type(fn).__name__}")
    if t.is_cuda:
        from ..backend import cuda

        cuda.apply_(t._data, fn)
        t._bump_version()
        return t
    data = t._data
    flat = data.reshape(-1) if data.flags.c_contiguous else np.ascontiguousarray(data).reshape(-1)
    if flat.size:
        _run(flat, fn)
    if not data.flags.c_contiguous:
        data[...] = flat.reshape(data.shape)
    t._bump_version()
    return t


def _run(flat: np.ndarray, fn) -> None:
    key = getattr(fn, "__func__", fn)
    try:
        kernels = _compiled.setdefault(key, {})
    except TypeError:  # not weak-referenceable (a builtin): no memo, no compile
        kernels = None
    if kernels is None or key in _uncompilable:
        _python_apply(flat, fn)
        return
    kernel = kernels.get(flat.dtype)
    if kernel is None:
        kernel = _make_kernel(fn)
    try:
        kernel(flat)
    except Exception as err:  # numba.core.errors.TypingError and friends: fall back like torch
        from numba.core.errors import NumbaError

        if not isinstance(err, NumbaError):
            raise
        _uncompilable.add(key)
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        warnings.warn(
            f"apply_: Numba could not compile {getattr(fn, '__name__', fn)!r} ({reason}); running it element by "
            "element in Python instead, which is slow.",
            RuntimeWarning,
            stacklevel=3,
        )
        _python_apply(flat, fn)
        return
    kernels[flat.dtype] = kernel


def map_(t: Tensor, other: Tensor, fn) -> Tensor:
    """``t[i] = fn(t[i], other[i])`` in place (other broadcast to t)."""
    if t.requires_grad:
        raise RuntimeError("Can't call map_() on Variable that requires grad. Use var.detach().map_() instead.")
    data = t._host()
    o = np.broadcast_to(other._host(), data.shape)
    it = np.nditer([data, o], flags=["refs_ok"], op_flags=[["readwrite"], ["readonly"]])
    for a, b in it:
        a[...] = fn(a.item(), b.item())
    t._bump_version()
    return t
