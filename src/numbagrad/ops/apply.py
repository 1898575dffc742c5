"""``Tensor.apply_(fn)`` and ``Tensor.map_(other, fn)``: ``fn`` compiled by Numba and run over the storage in place,
on the CPU or on CUDA.

torch calls ``fn`` once per element from C++ (about 0.5 µs each); here the backend compiles ``fn`` into one loop
(``backend.apply_kernel``: the generator's serial, ``prange`` or grid-stride loop) per (callable, dtype, variant),
memoized, so the second call compiles nothing and costs one kernel call. A module-level ``def`` is copied into the
kernel cache and later processes load it from disk; lambdas and closures compile once per process. As in torch,
``fn`` gets float elements as float64 (torch's Python floats; float32 math would round ``a * b`` or ``math.sin(v)``
differently) and its results are stored with the tensor's dtype (floats truncate into integer tensors; float16
and bfloat16 round through float32, as torch's do).

A callable Numba cannot compile still works, element by element in Python as in torch (on a host copy for cuda
tensors), after one warning per callable that says why it is slow. A callable returning something that is not a
real number (``None``, a str, a tuple, a complex) raises torch's ``TypeError`` and leaves the tensor unchanged.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from .._tensor import Tensor
from ..backend import backend_for
from ._registry import declare

#: (callable key, dtype char, arity, loop variant: "serial", "parallel" or "cuda") -> compiled kernel
_kernels: dict = {}
#: (callable key, dtype char, arity) -> the reason Numba could not compile it for that dtype (then run in Python)
_uncompilable: dict = {}
#: callable keys already warned about (the warning comes once the Python fallback has succeeded)
_warned: set = set()

_REAL = (bool, int, float, np.bool_, np.integer, np.floating)


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


def _kernel_for(fn, backend, dtype: np.dtype, arity: int, size: int):
    """The memoized kernel ``run(res, *others)``, or ``None`` when Numba cannot compile ``fn``."""
    key = _key(fn)
    if (key, dtype.char, arity) in _uncompilable:
        return None
    variant = backend.loop_variant(size)
    try:
        return _kernels[key, dtype.char, arity, variant]
    except (KeyError, TypeError):
        pass
    from numba.core.errors import NumbaError

    try:
        kernel = backend.apply_kernel(fn, dtype, variant, arity)
    except (NumbaError, TypeError, ValueError, NotImplementedError) as err:
        _uncompilable[key, dtype.char, arity] = _reason(err)
        return None
    _kernels[key, dtype.char, arity, variant] = kernel
    return kernel


def _reason(err: Exception) -> str:
    """The informative line of a Numba error (its first line is often just the failing pipeline step)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(err).splitlines()]
    lines = [line for line in lines if line and not line.startswith("Failed in")]
    return lines[0].rstrip(":") if lines else type(err).__name__


def _python_map(fn, columns: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """``fn`` element by element in Python into a new array; raises before anything is written to the tensor. For a
    2-byte float (float16, bfloat16) the array is float32, so results round through float32 as torch stores them."""
    out = np.empty(columns[0].shape[0], np.float32 if dtype.itemsize == 2 and dtype.kind in "fV" else dtype)
    items = [c.tolist() for c in columns]
    for i, args in enumerate(zip(*items)):
        r = fn(*args)
        if not isinstance(r, _REAL):
            raise TypeError(f"must be real number, not {type(r).__name__}")
        out[i] = r
    return out


def _run(t: Tensor, fn, others: list, name: str) -> None:
    """Run ``fn`` over ``t``'s elements (and ``others``' flat arrays, already of ``t``'s size) in place."""
    data = t._data
    backend = backend_for(data)
    work = data if backend.is_contiguous(data) else backend.copy(data)
    flat = work.reshape(-1)
    kernel = _kernel_for(fn, backend, flat.dtype, 1 + len(others), flat.size)
    if kernel is not None:
        kernel(flat, *others)
    else:
        host = [backend.to_host(a) for a in (flat, *others)]
        result = _python_map(fn, host, flat.dtype)
        key = _key(fn)
        if key not in _warned:
            _warned.add(key)
            warnings.warn(
                f"{name}: Numba could not compile {getattr(fn, '__name__', repr(fn))} "
                f"({_uncompilable[key, flat.dtype.char, 1 + len(others)]}); "
                "running it element by element in Python instead, which is slow (about 1 µs per element).",
                RuntimeWarning,
                stacklevel=4,
            )
        backend.setitem(flat, slice(None), backend.from_host(result))
    if work is not data:
        backend.setitem(data, Ellipsis, work)


@declare(methods=("apply_",), name="_apply_")
def apply_(t: Tensor, fn) -> Tensor:
    """Apply ``fn`` to every element of ``t`` in place; returns ``t``."""
    if t.requires_grad:
        raise RuntimeError("Can't call apply_() on Variable that requires grad. Use var.detach().apply_() instead.")
    if not callable(fn):
        raise TypeError(f"'{type(fn).__name__}' object is not callable")
    if t._data.size:
        _run(t, fn, [], "apply_")
    t._bump_version()
    return t


@declare(methods=("map_",), name="_map_")
def map_(t: Tensor, other: Tensor, fn) -> Tensor:
    """``t[i] = fn(t[i], other[i])`` in place, ``other`` broadcast to ``t``'s shape; returns ``t``."""
    if t.requires_grad:
        raise RuntimeError("Can't call map_() on Variable that requires grad. Use var.detach().map_() instead.")
    if not callable(fn):
        raise TypeError(f"'{type(fn).__name__}' object is not callable")
    if not isinstance(other, Tensor) or other.dtype != t.dtype:
        got = f"torch.{other.dtype.scalar_name}Tensor" if isinstance(other, Tensor) else type(other).__name__
        raise TypeError(f"map_: expected torch.{t.dtype.scalar_name}Tensor for 'other' (got {got})")
    backend = backend_for(t._data)
    if backend_for(other._data) is not backend:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {t.device} and "
            f"{other.device}!"
        )
    if t._data.size:
        o = backend.copy(backend.broadcast_to(other._data, t.shape)).reshape(-1)
        _run(t, fn, [o], "map_")
    t._bump_version()
    return t
