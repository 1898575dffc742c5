"""The CPU backend: numpy storage, Numba kernels generated from the elementwise table.

Arrays are handed to kernels flat: an operand with as many elements as the output is raveled (a view when it
is contiguous), a one-element operand is passed as a scalar, and anything else is broadcast first. Outputs are
allocated here with numpy (huge pages, no page faults inside the kernel) and passed in.
"""

from __future__ import annotations

import os

import numpy as np

from ..scalar_math import Row
from . import codegen

#: Arrays with at least this many elements use the ``prange`` kernels. Measured on the idle 2-core development
#: machine (numba 0.68.1, workqueue threads, numpy's OpenBLAS): for elementwise kernels alone (``compare.py
#: --threshold``) prange/serial time is 2.3-2.7 at 2**12, about 1 at 2**14-2**15 and 0.5-0.74 from 2**16 up; but
#: interleaved with BLAS calls (the 784-128-10 training step of ``benchmarks/bench_training.py``, whose largest
#: arrays have 2**17 elements) a 2**16 threshold made a step take 8.0 ms instead of 0.57-0.77 ms: OpenBLAS's
#: spinning threads and Numba's starve each other on two cores. So only arrays above 2**23 (the 1e7 benchmark) go
#: parallel by default; ``NUMBAGRAD_PARALLEL_THRESHOLD`` lowers it for elementwise-heavy work on more cores.
PARALLEL_THRESHOLD = int(os.environ.get("NUMBAGRAD_PARALLEL_THRESHOLD", 1 << 23))


def _operand(value, shape, size, dtype):
    """Flatten one operand for a kernel: (flat array or scalar, 'a' or 's')."""
    if not isinstance(value, np.ndarray):
        return dtype.type(value), "s"
    if value.dtype != dtype:
        value = value.astype(dtype)
    if value.size == 1 and size != 1:
        return value.reshape(-1)[0], "s"
    if value.size != size:
        value = np.broadcast_to(value, shape)
    return value.reshape(-1), "a"


def _broadcast_shape(inputs) -> tuple:
    """The output shape; the common case (all arrays of one shape) skips numpy's general broadcasting."""
    shape = None
    for v in inputs:
        if isinstance(v, np.ndarray):
            if shape is None:
                shape = v.shape
            elif v.shape != shape:
                return np.broadcast_shapes(*[v.shape for v in inputs if isinstance(v, np.ndarray)])
    return () if shape is None else shape


def elementwise(row: Row, inputs: list, params: tuple, dtype: np.dtype, out: np.ndarray | None = None):
    """Forward of one row: ``out = row(*inputs, *params)`` with broadcasting, in ``dtype``."""
    shape = _broadcast_shape(inputs)
    if out is None:
        out = np.empty(shape, dtype)
    size = out.size
    flat, pattern = [], ""
    for value in inputs:
        v, kind = _operand(value, shape, size, dtype)
        flat.append(v)
        pattern += kind
    kernel = codegen.cpu_kernel(row, "forward", pattern, size >= PARALLEL_THRESHOLD)
    target = out.reshape(-1)
    kernel(target, *flat, *[dtype.type(p) for p in params])
    if target.base is not out and target is not out and not np.shares_memory(target, out):  # out was not contiguous
        out[...] = target.reshape(shape)
    return out


def elementwise_grad(
    row: Row, i: int, g: np.ndarray, out, inputs: list, params: tuple, dtype: np.dtype, *, result=None
):
    """Gradient of one row with respect to input ``i``, in the output's (broadcast) shape.

    ``out`` and unused inputs may be ``0`` placeholders: the kernel then takes them as scalars. ``result``, when
    given, is a contiguous buffer of ``g``'s shape and ``dtype`` to write into (it may be ``g`` itself: each
    element is read before it is written).
    """
    shape = g.shape
    size = g.size
    res = np.empty(shape, dtype) if result is None else result
    flat, pattern = [], ""
    for value in (g, out, *inputs):
        v, kind = _operand(value, shape, size, dtype)
        flat.append(v)
        pattern += kind
    kernel = codegen.cpu_kernel(row, f"grad{i}", pattern, size >= PARALLEL_THRESHOLD)
    kernel(res.reshape(-1), *flat, *[dtype.type(p) for p in params])
    return res


def sum_to_shape(a: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum a broadcast gradient back down to ``shape`` (leading dims, then size-1 dims)."""
    if a.shape == tuple(shape):
        return a
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and a.shape[i + lead] != 1)
    r = a.sum(axis=axes, keepdims=True) if axes else a
    return r.reshape(shape)


# --- accumulation, foreach and apply kernels (backend engineer) ----------------------------------------------
def loop_variant(size: int) -> str:
    """The loop a kernel over ``size`` elements runs: ``"parallel"`` (``prange``) from ``PARALLEL_THRESHOLD`` on,
    else ``"serial"``."""
    return "parallel" if size >= PARALLEL_THRESHOLD else "serial"


def accumulate_(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst += src`` in place through a compiled kernel (the leaf ``.grad`` accumulation)."""
    if dst.flags.c_contiguous and src.shape == dst.shape:
        s = np.ascontiguousarray(src, dtype=dst.dtype)
        codegen.accumulate_kernel(loop_variant(dst.size))(dst.reshape(-1), s.reshape(-1))
    else:
        dst += src


def foreach(update, arrays: list, scalars: tuple = (), static: tuple = ()) -> None:
    """Run the module-level per-element ``update(i, *arrays, *scalars, *static)`` for every ``i`` of the flat,
    contiguous, equal-sized ``arrays``: a serial loop, or ``prange`` from ``PARALLEL_THRESHOLD`` elements on.
    ``static`` flags are compiled into the loop as constants (``codegen.foreach_kernel``)."""
    n = arrays[0].shape[0]
    if n:
        kernel = codegen.foreach_kernel(update, len(arrays), len(scalars), loop_variant(n), static)
        kernel(*arrays, *scalars)


def apply_kernel(fn, dtype, variant: str, arity: int = 1):
    """``run(res, *others)``: ``res[i] = fn(res[i], others[0][i], ...)`` over flat contiguous arrays of
    ``dtype`` with the ``variant`` loop (``loop_variant``), compiled now for that dtype (so an uncompilable
    ``fn`` raises here, a Numba error)."""
    import numba

    kernel = codegen.apply_kernel(fn, arity, variant)
    kernel.compile((numba.typeof(np.empty(1, dtype)),) * arity)
    return kernel


def is_contiguous(a: np.ndarray) -> bool:
    return a.flags.c_contiguous


def zeros(shape: tuple, dtype) -> np.ndarray:
    return np.zeros(shape, dtype)


def copy(a: np.ndarray) -> np.ndarray:
    """A fresh, writable, C-contiguous copy (what a leaf's first ``.grad`` holds)."""
    return np.array(a, order="C", copy=True)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.matmul(a, b))


# --- numpy primitives (lead) ---
# Written by the backend engineer so tests/test_backend.py can compare every backend function on cpu and cuda;
# the lead owns these and may replace them. Every result is an ``np.ndarray`` (never a numpy scalar).
def empty(shape: tuple, dtype) -> np.ndarray:
    return np.empty(shape, dtype)


def full(shape: tuple, value, dtype) -> np.ndarray:
    return np.full(shape, value, dtype)


def from_host(a) -> np.ndarray:
    """The array itself when it already is a C-ordered ndarray (``asarray`` keeps 0-d arrays 0-d)."""
    return np.asarray(a, order="C")


def to_host(a: np.ndarray) -> np.ndarray:
    return a


def astype(a: np.ndarray, dtype) -> np.ndarray:
    """A C-contiguous copy in ``dtype``."""
    return np.array(a, dtype=dtype, order="C", copy=True)


def ascontiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.array(a, order="C", copy=True)


def broadcast_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """A read-only stride-0 view."""
    return np.broadcast_to(a, tuple(shape))


def where(cond, a, b, dtype) -> np.ndarray:
    """``a`` where ``cond`` else ``b``, broadcast, in ``dtype`` (``a`` and ``b`` may be scalars)."""
    return np.asarray(np.where(cond, a, b), dtype=dtype)


_NUMPY_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any, "all": np.all}


def reduce(a: np.ndarray, op: str, axes: tuple | None, keepdim: bool, dtype=None) -> np.ndarray:
    """``sum``/``prod``/``max``/``min``/``any``/``all`` over ``axes`` (all when None), in ``dtype`` (``any`` and
    ``all`` give bool)."""
    axis = None if axes is None else tuple(axes)
    if op in ("sum", "prod"):
        r = _NUMPY_REDUCE[op](a, axis=axis, keepdims=keepdim, dtype=dtype)
    else:
        r = _NUMPY_REDUCE[op](a, axis=axis, keepdims=keepdim)
        if dtype is not None and op in ("max", "min"):
            r = np.asarray(r).astype(dtype, copy=False)
    return np.asarray(r)


def arg_reduce(a: np.ndarray, op: str, axis: int | None, keepdim: bool) -> np.ndarray:
    """``argmax``/``argmin`` (first occurrence; NaN counts as the extreme) as int64; ``axis`` None flattens."""
    fn = np.argmax if op == "argmax" else np.argmin
    if a.ndim == 0:
        return np.zeros((), np.int64)
    return np.asarray(fn(a, axis=axis, keepdims=keepdim), dtype=np.int64)


def concatenate(arrays: list, dim: int, dtype) -> np.ndarray:
    return np.concatenate(arrays, axis=dim, dtype=dtype, casting="unsafe")


def sort(a: np.ndarray, dim: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    """Stable sort along ``dim``: (values, int64 indices). NaN sorts as the largest value, as in torch."""
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    if descending:  # reversed stable ascending sort of the reversed array: equal elements keep their order
        n = a.shape[dim]
        flipped = np.flip(a, axis=dim)
        idx = np.flip(np.argsort(flipped, axis=dim, kind="stable"), axis=dim)
        idx = (n - 1) - idx
    else:
        idx = np.argsort(a, axis=dim, kind="stable")
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    return np.take_along_axis(a, idx, axis=dim), idx


def _is_basic(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return not any(isinstance(i, (np.ndarray, list)) for i in items)


def getitem(a: np.ndarray, index) -> np.ndarray:
    """``a[index]``: a view for a basic index (a full integer index gives a 0-d view), a copy otherwise."""
    if _is_basic(index):
        items = index if isinstance(index, tuple) else (index,)
        if not any(i is Ellipsis for i in items):
            items = items + (Ellipsis,)
        return a[items]
    return np.asarray(a[index])


def setitem(dst: np.ndarray, index, value) -> None:
    """``dst[index] = value``; a ``value`` array that may overlap ``dst`` is copied first."""
    if isinstance(value, np.ndarray) and np.may_share_memory(value, dst):
        value = value.copy()
    dst[index] = value


def index_add_zeros(shape: tuple, dtype, index, values) -> np.ndarray:
    """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices add up, as ``np.add.at``)."""
    out = np.zeros(shape, dtype)
    np.add.at(out, index, values)
    return out


def take_along_axis(a: np.ndarray, idx: np.ndarray, dim: int) -> np.ndarray:
    return np.take_along_axis(a, idx, axis=dim)


def put_along_axis_zeros(shape: tuple, idx: np.ndarray, values, dim: int) -> np.ndarray:
    """Zeros of ``shape`` with ``values`` added at ``idx`` along ``dim`` (repeated indices add up: the backward
    of ``take_along_axis``)."""
    out = np.zeros(shape, np.asarray(values).dtype)
    index = list(np.indices(idx.shape, sparse=True))
    index[dim] = idx
    np.add.at(out, tuple(index), values)
    return out


#: The backend interface: the same names as ``cuda.__all__`` (tests/test_backend.py checks it).
__all__ = [
    "accumulate_",
    "apply_kernel",
    "arg_reduce",
    "ascontiguous",
    "astype",
    "broadcast_to",
    "concatenate",
    "copy",
    "elementwise",
    "elementwise_grad",
    "empty",
    "foreach",
    "from_host",
    "full",
    "getitem",
    "index_add_zeros",
    "is_contiguous",
    "loop_variant",
    "matmul",
    "put_along_axis_zeros",
    "reduce",
    "setitem",
    "sort",
    "sum_to_shape",
    "take_along_axis",
    "to_host",
    "where",
    "zeros",
]
