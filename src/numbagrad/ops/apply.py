"""``Tensor.apply_(fn)``: ``fn`` compiled by Numba and run over the storage in place.

torch calls ``fn`` once per element from C++ (about 0.5 µs each); here ``fn`` is compiled with ``numba.njit`` into
one loop per (callable, dtype, serial/parallel/cuda), memoized, so the second call compiles nothing and costs one
kernel call. Results are stored with the tensor's dtype (floats truncate into integer tensors, as torch does).

A callable Numba cannot compile still works, element by element in Python as in torch, after one warning per
callable that says why it is slow. These kernels are compiled per process, never from the disk cache: Numba's
cache cannot serve lambdas and closures (DESIGN.md, principle 6).
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from .._tensor import Tensor
from ._registry import declare

#: (callable key, dtype char, False (serial) / True (parallel) / "cuda") -> compiled kernel
_kernels: dict = {}
#: callable key -> the reason Numba could not compile it (warned once, then run in Python)
_uncompilable: dict = {}


def _key(fn):
    """What a compiled kernel depends on. Numba freezes globals at compile time, so a plain function is fully
    described by its code object: ``t.apply_(lambda v: v * 2 + 1)`` in a loop compiles once, not per lambda."""
    fn = getattr(fn, "py_func", None) or getattr(fn, "__func__", fn)  # a Numba dispatcher, a bound method
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn
    cells = tuple(c.cell_contents for c in fn.__closure__) if fn.__closure__ else ()
    try:
        key = (code, cells, fn.__defaults__)
        hash(key)
    except (TypeError, ValueError):  # unhashable closure values, or an empty cell
        return fn
    return key


def _compile(fn, dtype: np.dtype, variant):
    """``numba.njit`` the callable and a loop over a flat array of ``dtype`` (``variant``: a serial ``False`` or
    ``prange`` ``True`` loop), or the CUDA kernel (``"cuda"``); compiled now, for that dtype only."""
    if variant == "cuda":
        from ..backend import cuda

        return cuda.apply_kernel(fn, dtype)
    import numba

    scalar = fn if hasattr(fn, "py_func") else numba.njit(fn)
    loop = numba.prange if variant else range

    @numba.njit(nogil=True, parallel=variant)
    def kernel(flat):
        for i in loop(flat.shape[0]):
            flat[i] = scalar(flat[i])

    kernel.compile((numba.typeof(np.empty(1, dtype)),))
    kernel.disable_compile()  # a later call with another signature is a bug here, never a silent compile
    return kernel


def _kernel_for(fn, dtype: np.dtype, variant):
    """The memoized kernel, or ``None`` (after one warning) when Numba cannot compile ``fn``."""
    key = _key(fn)
    if key in _uncompilable:
        return None
    try:
        return _kernels[key, dtype.char, variant]
    except (KeyError, TypeError):
        pass
    from numba.core.errors import NumbaError

    try:
        kernel = _compile(fn, dtype, variant)
    except (NumbaError, TypeError, ValueError, NotImplementedError) as err:
        reason = _reason(err)
        _uncompilable[key] = reason
        warnings.warn(
            f"apply_: Numba could not compile {getattr(fn, '__name__', repr(fn))} ({reason}); running it element by "
            "element in Python instead, which is slow (about 1 µs per element).",
            RuntimeWarning,
            stacklevel=4,
        )
        return None
    _kernels[key, dtype.char, variant] = kernel
    return kernel


def _reason(err: Exception) -> str:
    """The informative line of a Numba error (its first line is often just the failing pipeline step)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(err).splitlines()]
    lines = [line for line in lines if line and not line.startswith("Failed in")]
    return lines[0].rstrip(":") if lines else type(err).__name__


def _python_apply(flat: np.ndarray, fn) -> None:
    for i in range(flat.shape[0]):
        flat[i] = fn(flat[i].item())


@declare(methods=("apply_",), name="_apply_")
def apply_(t: Tensor, fn) -> Tensor:
    """Apply ``fn`` to every element of ``t`` in place; returns ``t``."""
    if t.requires_grad:
        raise RuntimeError("Can't call apply_() on Variable that requires grad. Use var.detach().apply_() instead.")
    if not callable(fn):
        raise TypeError(f"'{type(fn).__name__}' object is not callable")
    data = t._data  # a numpy or device array: both answer flags, copy, reshape and item assignment alike
    if data.size:
        from ..backend.cpu import PARALLEL_THRESHOLD

        work = data if data.flags.c_contiguous else data.copy()
        flat = work.reshape(-1)
        kernel = _kernel_for(fn, flat.dtype, "cuda" if t.is_cuda else flat.size >= PARALLEL_THRESHOLD)
        if kernel is not None:
            kernel(flat)
        elif isinstance(flat, np.ndarray):
            _python_apply(flat, fn)
        else:  # on a host copy
            host = flat.copy_to_host()
            _python_apply(host, fn)
            flat.copy_to_device(host)
        if work is not data:
            data[...] = work
    t._bump_version()
    return t


@declare(methods=("map_",), name="_map_")
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
