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


def accumulate_(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst += src`` in place through a compiled kernel (the leaf ``.grad`` accumulation)."""
    from . import kernels

    if dst.flags.c_contiguous and src.shape == dst.shape:
        s = np.ascontiguousarray(src, dtype=dst.dtype)
        kernels.accumulate(dst.reshape(-1), s.reshape(-1), dst.size >= PARALLEL_THRESHOLD)
    else:
        dst += src


def is_contiguous(a: np.ndarray) -> bool:
    return a.flags.c_contiguous


def zeros(shape: tuple, dtype) -> np.ndarray:
    return np.zeros(shape, dtype)


def copy(a: np.ndarray) -> np.ndarray:
    """A fresh, writable, C-contiguous copy (what a leaf's first ``.grad`` holds)."""
    return np.array(a, order="C", copy=True)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.matmul(a, b))
