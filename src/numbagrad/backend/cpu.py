"""The CPU backend: numpy storage, Numba kernels generated from the elementwise table.

Arrays are handed to kernels in place, never copied: contiguous operands of the output's size flat, a one-element
operand as a scalar, and strided or broadcast ones through their strides over the loop ``layout.strided_loop``
orders and collapses (flat again when every array is contiguous in that order, a loop over rows for a row or
column broadcast, else a loop nest over strided views). Outputs are allocated here with numpy (huge pages, no
page faults inside the kernel) and passed in, laid out as their first full-size operand is (as torch's are).
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np

from .._types import CPU
from ..scalar_math import COMPLEX_ROWS, ROWS, Row
from . import (
    attention_kernels,
    codegen,
    conv_kernels,
    cpu_threads,
    layout,
    malloc,
    rnn_kernels,
    row_products,
    vector_math,
    winograd_kernels,
)

DEVICE = CPU

#: Whether glibc's malloc thresholds were fixed for this process (``malloc.py`` says why and when not).
MALLOC_TUNED = malloc.tune()

#: Arrays with at least this many elements use the ``prange`` kernels. Measured on the idle 2-core development
#: machine (numba 0.68.1, workqueue threads, numpy's OpenBLAS): for elementwise kernels alone (``compare.py
#: --threshold``) prange/serial time is 2.3-2.7 at 2**12, about 1 at 2**14-2**15 and 0.5-0.74 from 2**16 up; but
#: interleaved with BLAS calls (the 784-128-10 training step of ``benchmarks/bench_training.py``, whose largest
#: arrays have 2**17 elements) a 2**16 threshold made a step take 8.0 ms instead of 0.57-0.77 ms: OpenBLAS's
#: spinning threads and Numba's starve each other on two cores. So only arrays above 2**23 (the 1e7 benchmark) go
#: parallel by default; ``NUMBAGRAD_PARALLEL_THRESHOLD`` lowers it for elementwise-heavy work on more cores.
PARALLEL_THRESHOLD = int(os.environ.get("NUMBAGRAD_PARALLEL_THRESHOLD", 1 << 23))

#: Flat serial loops over at least this many elements (and under ``PARALLEL_THRESHOLD``) of a row whose kernels
#: evaluate transcendental functions (``Row.costly``), or of at least ``SHARED_CHEAP_ELEMENTS`` of any other, and
#: row-by-row loops likewise (``_by_rows``), are shared among the free threads (``_run_parts``): where each
#: thread's part outweighs a Python task's hand-off (7-20 us) and the threads' memory traffic. Measured on two
#: threads (1 thread -> 2 threads, float32): GELU of 2**17 elements 77 -> 77 us, 2**18 143 -> 111; an add of 2**18
#: 40 -> 58, 2**19 74 -> 84, 2**20 181 -> 131.
SHARED_ELEMENTS = 1 << 18
SHARED_CHEAP_ELEMENTS = 1 << 20


def _scalar(value, dtype: np.dtype):
    """A number as a scalar of ``dtype`` (a Python int outside a narrow integer type wraps around, as torch casts
    it)."""
    try:
        return dtype.type(value)
    except OverflowError:
        return np.array(value).astype(dtype)[()]


def _broadcast_shape(inputs) -> tuple:
    """The output shape; the common case (all arrays of one shape) skips numpy's general broadcasting."""
    shape = None
    for v in inputs:
        if type(v) is np.ndarray:
            if shape is None:
                shape = v.shape
            elif v.shape != shape:
                return np.broadcast_shapes(*[v.shape for v in inputs if type(v) is np.ndarray])
    return () if shape is None else shape


_ZEROS = {np.dtype(t): np.dtype(t).type(0) for t in (np.float16, np.float32, np.float64)}  # (see _flatten)
_KERNELS = codegen.KERNELS  # the one kernel cache, bound here for the lookup every op makes
_SERIAL_FORWARD = codegen.SERIAL_FORWARD  # (its index of serial forward kernels: ``elementwise_plain``'s lookup)
_GRAD = tuple(f"grad{i}" for i in range(8))  # the kernel names of the gradients (not formatted per call)


def _written_operand(which: str, values, out: np.ndarray, pattern: str) -> str | None:
    """The name of the operand that is ``out`` itself (``x.add_(y)`` reads and writes ``x``), or None. A kernel
    handed the same buffer twice, as result and operand, fails LLVM's run-time overlap check and runs its scalar
    loop (``x.add_(y)`` at 1e5 float32: 57 us against 24 us for ``x + y``, ``sigmoid_`` 467 us against 68 us);
    writing into the operand itself keeps the vectorized loop."""
    for k in range(len(values)):
        if values[k] is out and pattern[k] in "an":
            if which == "forward":
                return f"x{k}"
            return "g" if k == 0 else "o" if k == 1 else f"x{k - 2}"
    return None


def _flatten(values, size: int, dtype: np.dtype, outs: tuple, fresh: bool = False) -> tuple[list, list, str, tuple]:
    """The kernel arguments for ``values`` (arrays and numbers) broadcast to the results ``outs`` (arrays of one
    shape, ``size`` elements; ``fresh``: new row-major arrays, whose flags need no reading): the results
    as the kernel takes them, the operands, their pattern and the trailing size arguments of a row-broadcast
    loop.

    The common case, C-contiguous results and operands of the results' shape and ``dtype`` (or numbers, or
    arrays expanded from one element), is a flat loop (``a``, ``s``); anything else is read and written in place
    through its strides (``_strided``)."""
    flat = []
    pattern = ""
    for v in values:
        if type(v) is np.ndarray:
            if v.size == size and (v.dtype is dtype or v.dtype == dtype):
                if v.flags.c_contiguous:  # the common case: one contiguous operand per element
                    flat.append(v if v.ndim == 1 else v.ravel())
                    pattern += "a"
                    continue
                if size and not any(v.strides):  # expanded from one element (a sum's gradient): a number
                    flat.append(v.flat[0])
                    pattern += "s"
                    continue
            break
        if dtype.kind == "f":  # a number, or the 0 standing for an operand no gradient reads
            zero = _ZEROS.get(dtype) if type(v) is int and v == 0 else None
            flat.append(dtype.type(v) if zero is None else zero)  # (a numpy scalar costs 0.2 us to make)
        else:
            flat.append(_scalar(v, dtype))
        pattern += "s"
    else:
        results = []
        for o in outs:  # (a loop, not ``all()`` over a generator: this runs on every elementwise call)
            if not (fresh or o.flags.c_contiguous):
                break
            results.append(o if o.ndim == 1 else o.reshape(-1))
        else:
            return results, flat, pattern, ()
    return _strided(values, size, dtype, outs)


def _strided(values, size: int, dtype: np.dtype, outs: tuple) -> tuple[list, list, str, tuple]:
    """``_flatten`` for strided, broadcast or converted operands or strided results: every array is read and
    written in place through its strides, in the loop order of ``layout.strided_loop``. Where that finds every
    array contiguous along the loop (a result laid out as its transposed input), or contiguous but for a row or
    column broadcast over a 2-dim loop (``r``/``c``: a bias, a per-row scale), the kernel is the flat or the
    row-broadcast one over 1-d views; otherwise a loop nest over views of the loop's rank
    (``codegen.strided_pattern``). Only an operand of another dtype is copied (converted).

    Contiguous results and operands of which each is a full array, a number or a trailing row or leading column
    broadcast along one split of the loop (a bias, a ``keepdim`` statistic) take the row-broadcast kernel
    directly (``_row_broadcast``), without a loop plan."""
    direct = _row_broadcast(values, size, dtype, outs)
    if direct is not None:
        return direct
    shape = outs[0].shape
    operands: list = []
    kinds = ""
    arrays = list(outs)
    for v in values:
        if type(v) is not np.ndarray:
            operands.append(_scalar(v, dtype))
            kinds += "s"
            continue
        if v.dtype != dtype:
            v = v.astype(dtype)
        if size != 1 and (v.size == 1 or not any(v.strides)):  # one element, maybe expanded: a number (in a
            # one-element loop it stays an array: it may be the operand a kernel writes in place)
            operands.append(v.flat[0])
            kinds += "s"
            continue
        if v.size == size and not v.flags.c_contiguous:
            index = layout.compact_index(v.shape, v.strides)
            if index is not None:  # an expanded view: the array it repeats, broadcast by its strides
                v = v[index]
        operands.append(v)
        kinds += "n"
        arrays.append(v)
    key = (shape, kinds, len(outs), *[(a.shape, a.strides, a.itemsize) for a in arrays])
    plan = _LOOPS.get(key)
    if plan is None:
        if len(_LOOPS) >= _LOOPS_KEPT:
            _LOOPS.clear()
        plan = _LOOPS[key] = _loop_plan(shape, kinds, arrays, len(outs))
    pattern, tail, views = plan
    n_out = len(outs)
    views = [_view(a, *how) for a, how in zip(arrays, views)]
    return views[:n_out], _merge(operands, kinds, views[n_out:]), pattern, tail


def _row_broadcast(values, size: int, dtype: np.dtype, outs: tuple) -> tuple | None:
    """``_strided``'s result for C-contiguous results and operands of ``dtype`` that are full arrays (``a``),
    numbers or one-element arrays (``s``), rows repeated along the loop's leading dims (``r``: shape ``(1, ..., 1,
    *shape[k:])``) or columns repeated along its trailing dims (``c``: ``(*shape[:k], 1, ..., 1)``), all split at
    the same (rows, columns); None for anything else."""
    shape = outs[0].shape
    results = []
    for o in outs:
        if not o.flags.c_contiguous:
            return None
        results.append(o.reshape(-1))
    rank = len(shape)
    flat: list = []
    pattern = ""
    cols = 0
    for v in values:
        if type(v) is not np.ndarray:
            flat.append(_scalar(v, dtype))
            pattern += "s"
            continue
        if v.dtype != dtype or not v.flags.c_contiguous:
            return None
        n = v.size
        if n == size:
            flat.append(v.reshape(-1))
            pattern += "a"
            continue
        if n == 1:
            flat.append(v.reshape(-1)[0])
            pattern += "s"
            continue
        dims = v.shape
        if len(dims) < rank:
            dims = (1,) * (rank - len(dims)) + dims
        first = 0
        while dims[first] == 1:
            first += 1
        last = rank
        while dims[last - 1] == 1:
            last -= 1
        if dims[first:] == shape[first:]:
            kind, split = "r", n
        elif dims[:last] == shape[:last]:
            kind, split = "c", size // n
        else:
            return None
        if cols and split != cols:
            return None
        cols = split
        flat.append(v.reshape(-1))
        pattern += kind
    if not cols:
        return None
    return results, flat, pattern, (size // cols, cols)


#: The loop plans of recent array layouts (``_loop_plan``), by the loop's shape, the operands' kinds and each
#: array's shape, strides and item size: a training step meets the same few layouts again and again (cleared when
#: it holds ``_LOOPS_KEPT``).
_LOOPS: dict = {}
_LOOPS_KEPT = 1024


def _loop_plan(shape: tuple, kinds: str, arrays: list, n_out: int) -> tuple:
    """(pattern, tail, views) of the loop ``layout.strided_loop`` makes over ``arrays`` (the ``n_out`` results
    first, then the operands ``n`` of ``kinds``): the kernel's pattern, the row-broadcast loop's (rows, columns)
    or (), and how each array is viewed (``_view``'s arguments)."""
    dims, steps = layout.strided_loop(shape, [_loop_strides(a, shape) for a in arrays])
    if len(dims) <= 2:
        flat = _flat_kinds(dims, steps)
        if flat is not None and flat[:n_out] == "a" * n_out:  # 1-d views, each of its own contiguous elements
            lengths = {"a": math.prod(dims), "r": dims[-1], "c": dims[0]}
            in_order = iter(flat[n_out:])
            pattern = "".join(k if k == "s" else next(in_order) for k in kinds)
            tail = (dims[0], dims[1]) if "r" in flat or "c" in flat or "w" in flat else ()
            # (a row-walked operand goes as it is, its rows' distance in bytes after the sizes)
            tail += tuple(st[0] * a.itemsize for a, k, st in zip(arrays, flat, steps) if k == "w")
            return (
                pattern,
                tail,
                [_how(a, (lengths[k],), (1,)) if k != "w" else _AS_IT_IS for a, k in zip(arrays, flat)],
            )
    return codegen.strided_pattern(kinds, len(dims)), (), [_how(a, dims, st) for a, st in zip(arrays, steps)]


def _loop_strides(a: np.ndarray, shape: tuple) -> list:
    """``a``'s element strides along the dims of ``shape`` it broadcasts to: 0 along its size-1 dims and the
    leading dims it lacks."""
    item = a.itemsize
    strides = [st // item if n != 1 else 0 for n, st in zip(a.shape, a.strides)]
    rank = len(shape)
    if a.ndim < rank:
        return [0] * (rank - a.ndim) + strides
    return strides[a.ndim - rank :] if a.ndim > rank else strides


def _flat_kinds(dims: tuple, steps: list) -> str | None:
    """Per array, ``a`` if it is contiguous along the loop ``dims``, ``r`` or ``c`` if it is a contiguous row or
    column of a 2-dim loop, ``w`` if the loop has 2 dims and it is contiguous along the inner one (its rows any
    distance apart: a slice of columns, a channel slice); None if some array is none of these."""
    full = layout.contiguous_steps(dims)
    kinds = ""
    for st in steps:
        if st == full:
            kinds += "a"
        elif len(dims) == 2 and st == (0, 1):
            kinds += "r"
        elif len(dims) == 2 and st == (1, 0):
            kinds += "c"
        elif len(dims) == 2 and st[1] == 1:
            kinds += "w"
        else:
            return None
    return kinds


#: ``_how`` for a row-walked operand (``w``): the kernel reads it as it is, row by row from its first element.
_AS_IT_IS = ("self", None, None)


def _how(a: np.ndarray, dims: tuple, steps: tuple) -> tuple:
    """How ``_view`` makes the view of ``a`` with sizes ``dims`` and element strides ``steps`` from its first
    element: over ``a``'s buffer when it is C-contiguous (``a.reshape(-1)`` for its own elements in order: 0.3 us,
    else ``np.ndarray``: 0.9 us), as its memory-order flattening when it is dense and walked in that order (a
    transposed array), as itself when the loop walks it with its own sizes and strides, else through
    ``as_strided`` (8 us: a sliced or flipped array)."""
    byte_steps = tuple(st * a.itemsize for st in steps)
    if a.flags.c_contiguous:
        return (
            ("own", None, None)
            if len(dims) == 1 and dims[0] == a.size and steps == (1,)
            else ("buffer", dims, byte_steps)
        )
    if a.size == math.prod(dims) and steps == layout.contiguous_steps(dims):
        return "dense", dims, None
    if a.shape == dims and a.strides == byte_steps:  # the loop walks the array as it is (a transposed operand)
        return "self", None, None
    return "strided", dims, byte_steps


def _view(a: np.ndarray, how: str, dims: tuple, byte_steps: tuple) -> np.ndarray:
    """The view of ``a`` that ``_how`` planned; never a copy."""
    if how == "own":
        return a.reshape(-1)
    if how == "buffer":
        return np.ndarray(dims, a.dtype, a, 0, byte_steps)
    if how == "dense":
        return a.ravel(order="K").reshape(dims)
    if how == "self":
        return a
    return np.lib.stride_tricks.as_strided(a, dims, byte_steps)


def _merge(operands: list, kinds: str, views: list) -> list:
    """``operands`` with each array (``n`` in ``kinds``) replaced by its view, in order."""
    it = iter(views)
    return [next(it) if k == "n" else v for v, k in zip(operands, kinds)]


def _shares_memory(out: np.ndarray, values) -> bool:
    """Whether an operand other than ``out`` itself may overlap it (then reading it in place while ``out`` is
    written could read elements already written)."""
    return any(type(v) is np.ndarray and v is not out and np.may_share_memory(v, out) for v in values)


def _shares(row: Row, size: int) -> bool:
    """Whether a flat loop of ``row`` over ``size`` elements is shared among the threads (``SHARED_ELEMENTS``);
    callers test ``size >= SHARED_ELEMENTS`` first, so a small loop pays a comparison, not a call."""
    return size < PARALLEL_THRESHOLD and (row.costly or size >= SHARED_CHEAP_ELEMENTS)


def _run_flat(kernel, size: int, args) -> None:
    """``kernel(*args)``, a serial elementwise loop whose arrays in ``args`` are all flat, of ``size`` elements (one
    ``_shares`` chose), and whose other arguments are numbers, in parts (``_run_parts``) whole cache lines apart
    (GELU over (768, 512) float32 on two threads: 132 us against 204)."""
    arrays = tuple(k for k, a in enumerate(args) if type(a) is np.ndarray)
    if any(args[k].shape != (size,) for k in arrays):
        kernel(*args)  # (a row-broadcast or strided loop's operands are not one flat run each: not split)
        return
    _run_parts(kernel, size, args, arrays, 16)  # (16 elements: a 64-byte line of float32, two of float64)


def _run_parts(kernel, count: int, args: tuple, parts: tuple, unit: int = 1) -> None:
    """``kernel(*args)`` over ``count`` items (elements, rows) whose results never meet (elementwise, or row by
    row): with more than one free thread, each thread (``cpu_threads``: OpenBLAS's, which do not compete with
    BLAS's for the cores as Numba's ``prange`` workers do) runs it on its own contiguous part, whole units of
    ``unit`` items, the arrays at the positions ``parts`` sliced along their first axis and the other arguments
    passed whole. The same bits as one call, as no item reads another's result."""
    threads = cpu_threads.free_threads()
    if threads <= 1:
        kernel(*args)
        return
    bounds = cpu_threads.share_bounds(count, threads, unit)

    def part(i: int) -> None:
        start, stop = bounds[i], bounds[i + 1]
        kernel(*[a[start:stop] if k in parts else a for k, a in enumerate(args)])

    cpu_threads.run_tasks(part, threads)


def _run(row: Row, which: str, values, params: tuple, dtype: np.dtype, out: np.ndarray, fresh=False) -> np.ndarray:
    """``out = row.<which>(*values, *params)`` element by element, with ``values`` broadcast to ``out`` (``fresh``:
    ``out`` was just allocated here, so nothing overlaps it)."""
    size = out.size
    if size == 0:
        return out
    res, flat, pattern, tail = _flatten(values, size, dtype, (out,))
    if not fresh and (tail or "@" in pattern) and _shares_memory(out, values):
        target = np.empty(out.shape, out.dtype)  # an operand overlapping the destination: compute, then copy in
        _run(row, which, values, params, dtype, target, True)
        out[...] = target
        return out
    target = "parallel" if size >= PARALLEL_THRESHOLD else "serial"
    scalars = (*[dtype.type(p) for p in params], *tail) if params or tail else ()
    into = None if fresh or out.dtype != dtype else _written_operand(which, values, out, pattern)
    shared = size >= SHARED_ELEMENTS and _shares(row, size)
    if into is not None:  # (out is then one of the operands, viewed as the result would be)
        kernel = codegen.row_kernel(row, which, pattern, target, into)
        _run_flat(kernel, size, (*flat, *scalars)) if shared else kernel(*flat, *scalars)
        return out
    kernel = _KERNELS.get((row.name, which, pattern, target)) or codegen.row_kernel(row, which, pattern, target)
    _run_flat(kernel, size, (res[0], *flat, *scalars)) if shared else kernel(res[0], *flat, *scalars)
    return out


#: (shape, strides, item size) of an operand -> the shape and axis order of a new array laid out as it is, or () for
#: row-major (``layout.preserved_order``), for ``_empty_as``
_ORDERS: dict = {}


def _empty_as(shape: tuple, dtype, values) -> np.ndarray:
    """A new array of ``shape`` laid out as its first operand of that shape is (its own layout when dense,
    channels-last when its strides are channels-last-like), as torch's TensorIterator lays out a result: so a
    kernel walks a transposed input and its result both in memory order."""
    for v in values:
        if type(v) is np.ndarray and v.shape == shape:
            if v.flags.c_contiguous or not any(v.strides):
                break
            key = (shape, v.strides, v.itemsize)
            laid = _ORDERS.get(key)
            if laid is None:
                if len(_ORDERS) >= _LOOPS_KEPT:
                    _ORDERS.clear()
                order = layout.preserved_order(v)
                inverse = tuple(int(d) for d in np.argsort(order))
                laid = _ORDERS[key] = (
                    (tuple(shape[d] for d in order), inverse) if order != tuple(range(len(shape))) else ()
                )
            if not laid:
                break
            try:
                return np.empty(laid[0], dtype).transpose(laid[1])
            except MemoryError:
                raise _out_of_memory(shape, dtype) from None
    return empty(shape, dtype)


def elementwise(row: Row, inputs: list, params: tuple, dtype: np.dtype, out=None, *, shape=None, out_dtype=None):
    """Forward of one row: ``row(*inputs, *params)`` computed in ``dtype``, into ``out`` or a new array of
    ``shape`` (default: the inputs' broadcast) and ``out_dtype`` (default ``dtype``; a comparison writes bools).
    A complex ``dtype`` computes the row's complex twin (``scalar_math.COMPLEX_ROWS``)."""
    if dtype.kind == "c":
        row = COMPLEX_ROWS[row.name]
    if _narrow(dtype):
        if out is None:
            out = empty(_broadcast_shape(inputs) if shape is None else shape, dtype if out_dtype is None else out_dtype)
        return _in_single(row, "forward", inputs, params, out)
    if out is None:
        shape = _broadcast_shape(inputs) if shape is None else shape
        out = _empty_as(shape, dtype if out_dtype is None else out_dtype, inputs)
        return _run(row, "forward", inputs, params, dtype, out, True)
    return _run(row, "forward", inputs, params, dtype, out)


def elementwise_plain(row: Row, operands: list, dtype: np.dtype, shape: tuple, out_dtype=None, pattern=None):
    """``elementwise`` for operands already known to be C-contiguous arrays of ``shape`` and ``dtype`` (or numbers):
    what an op's fast path calls, skipping the per-operand checks. ``pattern``: ``"a"`` per operand when the
    caller knows they are all arrays (else worked out here, and numbers in ``operands`` become numpy scalars)."""
    try:
        out = np.empty(shape, dtype if out_dtype is None else out_dtype)
    except MemoryError:
        raise _out_of_memory(shape, dtype) from None
    size = out.size
    if not 0 < size < PARALLEL_THRESHOLD:
        return _run(row, "forward", operands, (), dtype, out, True)
    result = out
    if len(shape) != 1:  # (row-major operands of one shape: the flat loop over their 1-d views)
        out = out.reshape(size)
        operands = [v.reshape(size) if type(v) is np.ndarray else v for v in operands]
    if pattern is None:
        pattern = ""
        for k in range(len(operands)):
            if type(operands[k]) is np.ndarray:
                pattern += "a"
            else:  # a number becomes a scalar of the computing dtype (in the caller's list: it is the op's own)
                pattern += "s"
                operands[k] = dtype.type(operands[k])
    kernels = _SERIAL_FORWARD.get(row.name)
    kernel = kernels.get(pattern) if kernels is not None else None
    if kernel is None:
        kernel = codegen.row_kernel(row, "forward", pattern, "serial")
    if size >= SHARED_ELEMENTS and _shares(row, size):
        _run_flat(kernel, size, (out, *operands))
    else:
        kernel(out, *operands)
    return result


def elementwise_grad(
    row: Row, i: int, g: np.ndarray, out, inputs: list, params: tuple, dtype: np.dtype, *, result=None
):
    """Gradient of one row with respect to input ``i``, in the output's (broadcast) shape.

    ``out`` and unused inputs may be ``0`` placeholders: the kernel then takes them as scalars. ``result``, when
    given, is a contiguous buffer of ``g``'s shape and ``dtype`` to write into (it may be ``g`` itself: each
    element is read before it is written).
    """
    if dtype.kind in "cV" or dtype is _HALF:  # (complex, or a 2-byte float: ``_narrow``, inline)
        if dtype.kind == "c":
            row = COMPLEX_ROWS[row.name]
        else:
            return _in_single(row, _GRAD[i], (g, out, *inputs), params, empty(g.shape, dtype))
    if result is None:
        return _run(row, _GRAD[i], (g, out, *inputs), params, dtype, empty(g.shape, dtype), True)
    size = g.size
    if (result is g or result is out) and result.dtype is dtype and result.flags.c_contiguous and result.size == size:
        # into the gradient's or the saved output's own buffer: the kernel that writes that operand in place
        if size:
            _, flat, pattern, tail = _flatten((g, out, *inputs), size, dtype, (result,))
            scalars = (*[dtype.type(p) for p in params], *tail) if params or tail else ()
            target = "parallel" if size >= PARALLEL_THRESHOLD else "serial"
            kernel = codegen.row_kernel(row, _GRAD[i], pattern, target, "g" if result is g else "o")
            shared = size >= SHARED_ELEMENTS and _shares(row, size)
            _run_flat(kernel, size, (*flat, *scalars)) if shared else kernel(*flat, *scalars)
        return result
    return _run(row, _GRAD[i], (g, out, *inputs), params, dtype, result)


def elementwise_grads(row: Row, which: tuple, g: np.ndarray, out, inputs: list, params: tuple, dtype: np.dtype,
                      into_g: bool = False) -> tuple:  # fmt: skip
    """The gradients of one row with respect to the two inputs ``which``, in ``g``'s shape, from one pass over
    the operands (a binary op's backward reads ``g`` and its inputs once, not once per gradient). ``into_g``:
    the second may be written into ``g``'s buffer (each element's gradients are computed before either is
    stored)."""
    narrow = False
    if dtype.kind in "cV" or dtype is _HALF:  # (complex, or a 2-byte float: ``_narrow``, inline)
        if dtype.kind == "c":
            row = COMPLEX_ROWS[row.name]
        else:
            narrow = True
    size = g.size
    if size == 0 or narrow:
        first = elementwise_grad(row, which[0], g, out, inputs, params, dtype)
        return first, elementwise_grad(row, which[1], g, out, inputs, params, dtype, result=g if into_g else None)
    first = empty(g.shape, dtype)
    target = "parallel" if size >= PARALLEL_THRESHOLD else "serial"
    if into_g and g.dtype is dtype and g.flags.c_contiguous:
        res, flat, pattern, tail = _flatten((g, out, *inputs), size, dtype, (first,), True)
        scalars = (*[dtype.type(p) for p in params], *tail) if params or tail else ()
        kernel = codegen.row_kernel(row, which, pattern, target, "g")
        shared = size >= SHARED_ELEMENTS and _shares(row, size)
        _run_flat(kernel, size, (res[0], *flat, *scalars)) if shared else kernel(res[0], *flat, *scalars)
        return first, g
    second = empty(g.shape, dtype)
    res, flat, pattern, tail = _flatten((g, out, *inputs), size, dtype, (first, second), True)
    scalars = (*[dtype.type(p) for p in params], *tail) if params or tail else ()
    kernel = _KERNELS.get((row.name, which, pattern, target)) or codegen.row_kernel(row, which, pattern, target)
    shared = size >= SHARED_ELEMENTS and _shares(row, size)
    _run_flat(kernel, size, (*res, *flat, *scalars)) if shared else kernel(*res, *flat, *scalars)
    return first, second


_HALF = np.dtype(np.float16)
_SINGLE = np.dtype(np.float32)


def _narrow(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a 2-byte float: numpy's float16 or ml_dtypes' bfloat16 (the one kind ``"V"`` type
    numbagrad stores). Numba computes in neither, so their ops run in float32 and round once on the write."""
    return dtype is _HALF or dtype.kind == "V"


def _widen(a: np.ndarray) -> np.ndarray:
    """A float32 copy of a float16 or bfloat16 array; a contiguous bfloat16 one through the shift kernel."""
    if a.dtype.kind == "V" and a.size and a.flags.c_contiguous:
        out = np.empty(a.shape, _SINGLE)
        _nn().bfloat16_to_float32(a.reshape(-1).view(np.uint16), out.reshape(-1).view(np.uint32))
        return out
    return a.astype(_SINGLE)


def _store(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """``dst[...] = src`` for a float32 ``src`` of ``dst``'s shape: a contiguous bfloat16 ``dst`` is written by the
    rounding kernel (bit for bit ml_dtypes' cast), anything else by numpy."""
    if (
        dst.dtype.kind == "V"
        and src.dtype is _SINGLE
        and src.shape == dst.shape
        and dst.size
        and dst.flags.c_contiguous
    ):
        src = src if src.flags.c_contiguous else np.ascontiguousarray(src)
        _nn().float32_to_bfloat16(src.reshape(-1).view(np.uint32), dst.reshape(-1).view(np.uint16))
    else:
        dst[...] = src
    return dst


def _narrowed(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A float32 array rounded to the 2-byte float ``dtype``, as a new array."""
    return _store(np.empty(a.shape, dtype), a)


def _in_single(row: Row, which: str, values, params: tuple, out: np.ndarray) -> np.ndarray:
    """A float16 or bfloat16 op: Numba has no such arithmetic, so the kernel computes in float32 and the result is
    stored in the narrow type, rounded to nearest even (torch's CPU computes them in float the same way)."""
    tmp = np.empty(out.shape, _SINGLE if _narrow(out.dtype) else out.dtype)
    _run(row, which, values, params, _SINGLE, tmp, True)
    return _store(out, tmp)


def sum_to_shape(a: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum a broadcast gradient back down to ``shape`` (leading dims, then size-1 dims). A bias's gradient, the
    leading dims of a contiguous float array, is ``sum_rows``' (``_column_sums``)."""
    if a.shape == tuple(shape):
        return a
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and a.shape[i + lead] != 1)
    if len(axes) == lead:
        sums = _column_sums(a, lead)
        if sums is not None:
            return sums.reshape(shape)
    r = a.sum(axis=axes, keepdims=True) if axes else a
    return r.reshape(shape)


def _column_sums(a: np.ndarray, lead: int) -> np.ndarray | None:
    """``a.sum(axis=tuple(range(lead)))`` flattened, the same bits, through ``nn_kernels.sum_rows`` for a
    C-contiguous float32 or float64 ``a`` of at least two columns (numpy sums one column pairwise); None
    otherwise. At (32, 128) float32, 1 thread: 0.8 us, numpy's sum 1.9; at (700, 1000) 38 and 63 us."""
    if a.dtype not in _SUM_ROWS_DTYPES or not a.flags.c_contiguous:
        return None
    columns = math.prod(a.shape[lead:])
    if columns < 2:
        return None
    out = np.empty(columns, a.dtype)
    _nn().sum_rows(a.reshape(-1, columns), out)
    return out


_SUM_ROWS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


# --- accumulation, foreach and apply kernels -----------------------------------------------------------------
def loop_variant(size: int) -> str:
    """The loop a kernel over ``size`` elements runs: ``"parallel"`` (``prange``) from ``PARALLEL_THRESHOLD`` on,
    else ``"serial"``."""
    return "parallel" if size >= PARALLEL_THRESHOLD else "serial"


def accumulate_(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst += src`` in place through a compiled kernel (the leaf ``.grad`` accumulation)."""
    if dst.flags.c_contiguous and src.shape == dst.shape and not _narrow(dst.dtype):
        s = np.ascontiguousarray(src, dtype=dst.dtype)
        codegen.accumulate_kernel(loop_variant(dst.size))(dst.reshape(-1), s.reshape(-1))
    else:
        dst += src


#: Elements per chunk of a 2-byte float ``foreach`` update (256 KiB per float32 copy).
_FOREACH_CHUNK = 1 << 16


def foreach(update, arrays: list, scalars: tuple = (), static: tuple = ()) -> None:
    """Run the module-level per-element ``update(i, *arrays, *scalars, *static)`` for every ``i`` of the flat,
    contiguous, equal-sized ``arrays``: a serial loop, or ``prange`` from ``PARALLEL_THRESHOLD`` elements on.
    ``static`` flags are compiled into the loop as constants (``codegen.foreach_kernel``)."""
    n = arrays[0].shape[0]
    if n and _narrow(arrays[0].dtype):
        # Numba has no 2-byte floats: update float32 copies of one chunk at a time and store them back, so a large
        # parameter's update holds a few chunk-sized copies, not float32 copies of the parameter and its state
        for start in range(0, n, _FOREACH_CHUNK):
            stop = start + _FOREACH_CHUNK
            copies: dict = {}  # one copy per array: an array passed twice (Adam's v as vmax) stays one array
            for a in arrays:
                if _narrow(a.dtype) and id(a) not in copies:
                    copies[id(a)] = (a[start:stop], _widen(a[start:stop]))
            wide = [copies[id(a)][1] if id(a) in copies else a[start:stop] for a in arrays]
            foreach(update, wide, scalars, static)
            for part, copy in copies.values():
                _store(part, copy)
    elif n:
        kernel = codegen.foreach_kernel(update, len(arrays), len(scalars), loop_variant(n), static)
        kernel(*arrays, *scalars)


def apply_kernel(fn, dtype, variant: str, arity: int = 1):
    """``run(res, *others)``: ``res[i] = fn(res[i], others[0][i], ...)`` over flat contiguous arrays of
    ``dtype`` with the ``variant`` loop (``loop_variant``), compiled now for that dtype (so an uncompilable
    ``fn`` raises here, a Numba error). Float elements reach ``fn`` as float64, as torch's Python floats.

    Numba has no 2-byte floats: a float16 or bfloat16 array runs the float32 loop on a float32 copy, and the
    float64 results round to float32 and then to the narrow type, as torch stores a Python float into one."""
    codegen.start_numba()
    import numba

    dtype = np.dtype(dtype)
    if _narrow(dtype):
        single = apply_kernel(fn, _SINGLE, variant, arity)

        def run(res, *others) -> None:
            wide = _widen(res)
            single(wide, *[_widen(o) for o in others])
            _store(res, wide)

        return run
    kernel = codegen.apply_kernel(fn, arity, variant, as_double=dtype.kind == "f")
    kernel.compile((numba.typeof(np.empty(1, dtype)),) * arity)
    return kernel


# --- numpy primitives -----------------------------------------------------------------------------------------
# The rest of the backend interface, on numpy. Results are always ndarrays, never numpy scalars.


def is_contiguous(a: np.ndarray) -> bool:
    return bool(a.flags.c_contiguous)


def _out_of_memory(shape: tuple, dtype) -> RuntimeError:
    """torch's error for an allocation the machine cannot make (numpy raises MemoryError)."""
    nbytes = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    return RuntimeError(
        f"DefaultCPUAllocator: can't allocate memory: you tried to allocate {nbytes} bytes. Error code 12 "
        "(Cannot allocate memory)"
    )


def empty(shape: tuple, dtype) -> np.ndarray:
    try:
        return np.empty(shape, dtype)
    except MemoryError:
        raise _out_of_memory(shape, dtype) from None


def zeros(shape: tuple, dtype) -> np.ndarray:
    try:
        return np.zeros(shape, dtype)
    except MemoryError:
        raise _out_of_memory(shape, dtype) from None


def full(shape: tuple, value, dtype) -> np.ndarray:
    if not shape:
        return np.array(value, dtype)  # a 0-dim fill (the seed of every backward) in 0.2 µs instead of 0.8
    try:
        return np.full(shape, value, dtype)
    except MemoryError:
        raise _out_of_memory(shape, dtype) from None


def from_host(a: np.ndarray) -> np.ndarray:
    """CPU storage from a host array: the array itself when it is C-ordered (no copy), else a copy."""
    return np.asarray(a, order="C")


def dropout_keep(shape: tuple, p: float, dtype, rng) -> np.ndarray:
    """Dropout's mask (1 keeps, 0 drops, in ``dtype``): float32 draws of the generator ``rng`` at least ``p``."""
    return (rng.random(shape, dtype=np.float32) >= np.float32(p)).astype(dtype)


def constant(a: np.ndarray) -> np.ndarray:
    """A fixed table an op reads (the cuda backend keeps one device copy per content): here the array itself."""
    return np.asarray(a)


def to_host(a: np.ndarray) -> np.ndarray:
    return a


def data_ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def copy(a: np.ndarray) -> np.ndarray:
    """A fresh, writable, C-contiguous copy (what a leaf's first ``.grad`` holds). (The method, not ``np.array(a,
    order="C", copy=True)``: 0.1 us less a call, which every user Function's leaf gradient pays.)"""
    return a.copy()


def astype(a: np.ndarray, dtype) -> np.ndarray:
    """A C-contiguous copy in ``dtype``."""
    dtype = np.dtype(dtype)
    if a.dtype.kind == "V" and dtype is _SINGLE:
        return _widen(np.asarray(a, order="C"))  # (ascontiguousarray would make a 0-d array 1-d)
    if dtype.kind == "V" and a.dtype is _SINGLE:
        return _narrowed(a, dtype)
    if a.dtype.kind == "c" and dtype.kind != "c":  # complex to real keeps the real part (as torch's cast)
        a = a.real
    if a.dtype.kind == "f" and (dtype.kind != "f" or dtype.itemsize < a.dtype.itemsize):
        return _narrowing_copy(a, dtype)
    return np.array(a, dtype=dtype, order="C", copy=True)


def real_part(a: np.ndarray) -> np.ndarray:
    """The real parts of a complex array, as a view sharing its memory."""
    return a.real


def imag_part(a: np.ndarray) -> np.ndarray:
    """The imaginary parts of a complex array, as a view sharing its memory."""
    return a.imag


def view_as_real(a: np.ndarray) -> np.ndarray:
    """A complex array's memory seen as floats with a last dim of 2 (real, imaginary), whatever its strides."""
    parts = a.real  # (a float view of the same strides, starting at the real part)
    half = a.dtype.itemsize // 2
    return np.lib.stride_tricks.as_strided(parts, a.shape + (2,), a.strides + (half,), writeable=a.flags.writeable)


def view_as_complex(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Pairs of floats (a last dim of 2, stride 1) seen as complex numbers of ``dtype``, sharing the memory."""
    return a.view(dtype)[..., 0]  # (numpy merges the contiguous last dim of 2 into one complex element)


def _parts_dtype(dtype) -> np.dtype:
    """The float dtype of a complex dtype's parts (complex64 -> float32)."""
    return np.dtype(np.dtype(dtype).char.lower())


def conj(a: np.ndarray) -> np.ndarray:
    """The complex conjugates of ``a`` in a new array."""
    return np.asarray(np.conj(a))  # (a ufunc makes a 0-d array a numpy scalar)


def make_complex(re: np.ndarray, im: np.ndarray, dtype) -> np.ndarray:
    """The complex array ``re + im * 1j`` of ``dtype`` (parts of one shape)."""
    out = np.empty(re.shape, dtype)
    out.real = re
    out.imag = im
    return out


def complex_abs(a: np.ndarray) -> np.ndarray:
    """``|a|`` of a complex array, in its parts' float dtype."""
    return np.asarray(np.abs(a))


def complex_angle(a: np.ndarray) -> np.ndarray:
    """The argument of each complex element, in its parts' float dtype."""
    return np.asarray(np.angle(a), a.real.dtype)


@np.errstate(invalid="ignore", divide="ignore")
def complex_sgn(a: np.ndarray) -> np.ndarray:
    """``a / |a|`` of a complex array, 0 where ``a`` is 0."""
    r = np.abs(a)
    return np.asarray(np.where(r == 0, 0, a / np.where(r == 0, 1, r)), a.dtype)


@np.errstate(all="ignore")  # (0.4 us a call, so only where a cast can warn)
def _narrowing_copy(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``astype`` from floats to integers or narrower floats: a nan or an out-of-range value gives torch's result
    (an undefined integer, or inf) without numpy's RuntimeWarning."""
    return np.array(a, dtype=dtype, order="C", copy=True)


def ascontiguous(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, order="C")


def expand(a: np.ndarray, shape: tuple) -> np.ndarray:
    """``Tensor.expand``'s stride-0 view of ``a``, writable as ``a`` is (torch writes through an expanded tensor
    where the written elements do not overlap: ``x.expand(2, 3)[0].fill_(1)``; ``np.broadcast_to`` is read-only)."""
    shape = tuple(shape)
    lead = len(shape) - a.ndim
    strides = [0] * lead
    i = lead
    for n, st in zip(a.shape, a.strides):  # (a loop: a generator costs a frame per call)
        strides.append(st if n == shape[i] else 0)
        i += 1
    if a.flags.c_contiguous and a.size:  # numpy's constructor over ``a``'s memory: 0.3 us, ``as_strided`` 2.7
        return np.ndarray(shape, a.dtype, a, 0, strides)
    return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=a.flags.writeable)


def broadcast_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """A stride-0 view of ``a`` expanded to ``shape``; a one-element ``a`` takes numpy's constructor directly
    (0.25 µs instead of ``np.broadcast_to``'s 2-4 µs: this is what a sum's backward runs)."""
    shape = tuple(shape)
    if a.size == 1:  # (numpy flags every one-element array C-contiguous, whatever its strides: no flags to read)
        return np.ndarray(shape, a.dtype, a, 0, (0,) * len(shape))
    return np.broadcast_to(a, shape)


def reshape(a: np.ndarray, shape: tuple) -> np.ndarray:
    """A view when the strides allow it, else a copy."""
    return a.reshape(shape)


def can_view(a: np.ndarray, shape: tuple) -> bool:
    """Whether ``a`` can take ``shape`` without a copy (what ``view`` requires)."""
    try:
        a.view().shape = shape  # raises when a copy would be needed
        return True
    except AttributeError:
        return False


def tile(a: np.ndarray, reps: tuple) -> np.ndarray:
    return np.tile(a, reps)


def overlap(a: np.ndarray, b: np.ndarray) -> str:
    """How two arrays' memory relates: ``"none"``, ``"full"`` (the same elements, the same layout) or
    ``"partial"`` (torch refuses an in-place op whose operand partly overlaps its destination)."""
    if not np.may_share_memory(a, b):
        return "none"
    if data_ptr(a) == data_ptr(b) and a.strides == b.strides and a.shape == b.shape:
        return "full"
    return "partial"


@np.errstate(all="ignore")  # BLAS's inf * 0 gives nan without a warning, as in torch
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b``; a stack of matrices times one matrix is folded into one 2-D product, as torch's matmul folds it
    (numpy loops over the stack instead: 5x slower at (32, 4, 48) @ (48, 128)). 2-byte floats multiply in float32
    through BLAS and round once, as torch's CPU accumulates them."""
    if _narrow(a.dtype):
        return _narrowed(matmul(_widen(a), _widen(b)), a.dtype)
    if a.ndim > 2 and b.ndim == 2:
        return _product(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + (b.shape[1],))
    if a.ndim == 2 and b.ndim == 2:
        return _product(a, b)
    return np.asarray(np.matmul(a, b))


def _blocked_product_pays(a: np.ndarray, b: np.ndarray) -> bool:
    """Does ``row_products``' register-blocked kernel beat OpenBLAS on the 2-D product ``a @ b``? On one thread,
    for float32 and float64 products of at least 256 rows, 128 deep and 64 columns, where the last panel of
    columns wastes little (one thread, float32, ``x @ W.T``, ``g @ W`` and ``g.T @ x``: 0.89, 0.91 and 0.91 of
    OpenBLAS's time at (768, 128) x (128, 384); 0.96, 0.86 and 0.86 at (700, 256) x (256, 1000); 0.92, 0.92 and
    0.99 at 1024 cubed; one panel of 64 columns, 0.78-0.94 from (256, 128) x (128, 64) to (1024, 1024) x (1024,
    64), 0.86 at a convolution's weight gradient ``columns @ g.T``, (288, 576) x (576, 64)); and from 128 rows
    where the product is at least 512 deep (0.79-1.02 at 128 and 192 rows, 784 and 9216 deep, 64 to 512 columns;
    a GPT's weight gradients ``g.T @ x``, (128, 768) x (768, 512) and x (768, 128), 89-94 GF/s in its step
    against OpenBLAS's 75-84; 128 deep, up to 1.41). On two threads, which ``row_products.product`` shares the
    panels among, for at least 256 rows, 256 deep and four panels: an LSTM's six products in its step, 27.1 ms
    against 21.9 (160-200 GF/s, OpenBLAS's 116-163 there); a GPT's (128, 768) x (768, 512) took 2.78 ms against
    OpenBLAS's 2.32. Not for a transposed ``a`` deeper than 768: its elements along the shared dimension then
    lie a page apart (1.34x at 1024 cubed in one run, 0.99 in another); nor for small products, where packing
    ``b`` and the kernel's call cost more than BLAS's (3.6x at 32 cubed), nor with more threads (measured on two
    only) or on a host where OpenBLAS's threads were measured faster (``row_products.shares_measured_faster``),
    nor on a host without AVX-512 (``row_products.measured_host``)."""
    rows, depth = a.shape
    columns = b.shape[1]
    if a.dtype not in _SUM_ZEROS or b.dtype != a.dtype or rows < 128 or depth < 128 or columns < 64:
        return False
    if rows < 256 and depth < 512:
        return False
    if a.strides[1] != a.itemsize and depth > 768:
        return False
    if not row_products.measured_host():
        return False
    width = row_products.panel_width(a.dtype)
    threads = cpu_threads.thread_count()
    if threads > 2 or threads == 2 and (rows < 256 or depth < 256 or columns < 4 * width):
        return False
    if threads == 2 and not row_products.shares_measured_faster():
        return False
    return -columns % width <= columns // 10


def _product(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` (``+ bias``, a row of ``b``'s columns) for 2-D operands: ``row_products``' kernel where it beats
    BLAS, adding the bias as it stores each block, else numpy's BLAS and an add."""
    if _blocked_product_pays(a, b) and (bias is None or bias.dtype == a.dtype and bias.shape == (b.shape[1],)):
        return row_products.matmul(a, b, bias)
    out = np.matmul(a, b)
    if bias is not None:
        np.add(out, bias, out=out)
    return out


@np.errstate(all="ignore")
def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """``x @ weight.T + bias`` for a 2-D ``x`` (torch's ``addmm``; without bias, None: ``mm``): in general the
    product is written row-major, the bias added as the blocked kernel stores each block
    (``_product``) or in place after BLAS's product. A float32 batch with fewer rows than output
    features multiplies as ``W @ x.T`` instead: OpenBLAS's sgemm runs that orientation faster (0.92x at (64, 784)
    x (128, 784), 0.6x at (16, 784)), and the bias add that transposes it back costs little while the output stays
    in cache (up to 64K elements: for 512 rows of 1024 features it doubles the time, and for a tiny product its
    fixed cost outweighs the gain). That product goes to ``_product`` too, whose blocked kernel runs (64, 784) x
    (400, 784) and (64, 400) x (784, 400) at 90-100 GF/s against OpenBLAS's 80-85. Without a bias a copy
    transposes it back: 28.5 against 36.9 us at (32, 256) x (128, 256), 53.7 against 56.8 at (64, 256) x (128,
    256). 2-byte floats multiply and add in float32 and round once, as torch's CPU does."""
    if _narrow(x.dtype):
        return _narrowed(linear(_widen(x), _widen(weight), None if bias is None else _widen(bias)), x.dtype)
    rows, features = x.shape[0], weight.shape[0]
    if x.dtype == _SINGLE and rows < features and rows * features <= 65536 and x.size >= 4096:
        out = np.empty((rows, features), _SINGLE)
        if bias is None:
            np.copyto(out, _product(weight, x.T).T)
        else:
            np.add(_product(weight, x.T).T, bias, out=out)
        return out
    return _product(x, weight.T, bias)


@np.errstate(all="ignore")
def linear_backward(g: np.ndarray, x: np.ndarray, weight: np.ndarray, needs: tuple) -> tuple:
    """The gradients of ``linear`` with respect to ``x``, ``weight`` and ``bias`` from the 2-D incoming ``g``, each
    None unless ``needs`` asks for it."""
    need_x, need_w, need_b = needs
    if _narrow(g.dtype):
        wide = linear_backward(_widen(g), _widen(x), _widen(weight), needs)
        return tuple(None if r is None else _narrowed(r, g.dtype) for r in wide)
    gb = sum_to_shape(g, g.shape[1:]) if need_b else None
    return _product(g, weight) if need_x else None, _product(g.T, x) if need_w else None, gb


#: Byte boundary of ``repeated_product``'s operand copy: OpenBLAS's sgemm reads a 64-byte aligned right operand
#: faster (one thread, ``(20, 256) x (256, 1024)``: 150 us aligned, 185 to 204 us 16 to 48 bytes off it, as
#: numpy's allocator may place it).
_ALIGN = 64


def _aligned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of the 2-D ``a`` whose first element sits on an ``_ALIGN``-byte boundary."""
    buf = np.empty(a.size + _ALIGN // a.dtype.itemsize, a.dtype)
    skip = (-buf.ctypes.data % _ALIGN) // a.dtype.itemsize
    out = buf[skip : skip + a.size].reshape(a.shape)
    out[...] = a
    return out


def _row_kernel_pays(rows: int, depth: int, dtype: np.dtype) -> bool:
    """Does ``row_products``' kernel beat BLAS on a product of ``rows`` rows ``depth`` deep? From 128 deep for up
    to 64 rows (one thread, float32, ``(20, k) x (k, n)``: 24 against OpenBLAS's 39 us at k 128, n 512; 94 against
    201 at k 256, n 1024; 92 against 128 at k 1024, n 256; float64 188 against 235 and 249); shallower they are
    even (7.0 against 6.9 us at k 64, n 256), and BLAS's packing pays for many rows. With more threads too: on
    one it beats OpenBLAS's two (94 against 112 us at k 256, n 1024)."""
    return dtype in _SUM_ZEROS and rows <= 64 and depth >= 128 and row_products.measured_host()


def repeated_product(w: np.ndarray, rows: int):
    """``product(x, bias=None) -> x @ w.T (+ bias)`` for the many products with one 2-D ``w`` of a recurrent
    layer's steps (``x`` C-contiguous, at most ``rows`` rows), the operand prepared once for all of them: for
    few rows and a deep product, ``row_products``' kernel on ``w.T`` packed in panels of columns; otherwise BLAS
    on a 64-byte aligned row-major copy of ``w.T`` (OpenBLAS took 1.2x to 1.6x as long on ``w`` as stored, and
    1.2x to 1.35x on an unaligned copy)."""
    if _row_kernel_pays(rows, w.shape[1], w.dtype):
        panels, columns = row_products.pack(w.T), w.shape[0]

        def product(x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
            out = row_products.product(x, panels, columns)
            if bias is not None:
                np.add(out, bias, out=out)
            return out

        return product
    w_t = _aligned_copy(w.T)

    def product(x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        return matmul(x, w_t) if bias is None else linear(x, w_t.T, bias)

    return product


_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def reduce(a: np.ndarray, op: str, axes=None, keepdim: bool = False, dtype=None) -> np.ndarray:
    """``sum``/``prod``/``max``/``min``/``any``/``all`` over ``axes`` (all when None), as an array (never a numpy
    scalar). A float32 or float64 sum runs a compiled loop: over the whole array at every size (0.8 us for 3
    elements, numpy's call 1.1), over some axes from ``_KERNEL_SUM_SIZE`` elements; the rest is ``ufunc.reduce``.
    A bfloat16 sum or product accumulates in float32 (numpy's would in bfloat16), as torch's does."""
    if op == "sum" and (dtype is None or dtype == a.dtype):
        zero = _SUM_ZEROS.get(a.dtype)  # (Numba has no float16: numpy's sum adds float16 in float32)
        if zero is not None:
            if a.flags.c_contiguous:
                if axes is None:  # a whole float array (numpy's float32 pairwise sum takes 3x torch's time)
                    parallel = a.size >= PARALLEL_THRESHOLD
                    kernel = _WHOLE_SUM.get(parallel) or _whole_sum(parallel)
                    out = np.array(kernel(a if a.ndim == 1 else a.reshape(-1), zero), a.dtype)
                    return out.reshape((1,) * a.ndim) if keepdim else out
                if a.size >= _KERNEL_SUM_SIZE and axes and axes[-1] - axes[0] == len(axes) - 1:
                    return _sum_axes(a, axes, keepdim)  # consecutive dims (sorted): a middle axis of a 3-d view
            elif a.size >= _KERNEL_SUM_SIZE:
                summed = _sum_in_memory_order(a, axes, keepdim)
                if summed is not None:
                    return summed
            return _ufunc_reduce(a, op, axes, keepdim, dtype)
    if a.dtype.kind == "V" and op in ("sum", "prod"):
        wide = reduce(_widen(a), op, axes, keepdim, _SINGLE if dtype is None or dtype == a.dtype else dtype)
        return _narrowed(wide, a.dtype) if dtype is None or dtype == a.dtype else wide
    return _ufunc_reduce(a, op, axes, keepdim, dtype)


def divide_by(a: np.ndarray, divisor) -> np.ndarray:
    """``a / divisor`` (a number, cast to ``a``'s dtype) as a new array: what a mean or variance divides its sum
    by. A float32 or float64 array divided by at least 1 (no overflow or 0/0 to warn about) is numpy's division,
    a third of the elementwise kernel's call for the few elements a reduction leaves; the rest is the ``div``
    row's kernel."""
    dtype = a.dtype
    if dtype in _SUM_ZEROS and divisor >= 1:
        return np.true_divide(a, dtype.type(divisor), out=np.empty_like(a))
    return elementwise(_DIV_ROW, [a, divisor], (), dtype)


_SUB_ROW, _MUL_ROW = ROWS["sub"], ROWS["mul"]


def _centered(a: np.ndarray, axes) -> np.ndarray:
    """``a`` minus its mean over ``axes`` (all when None): the mean's sum in ``a``'s dtype, divided by the count."""
    count = a.size if axes is None else math.prod([a.shape[d] for d in axes])
    mean = divide_by(reduce(a, "sum", axes, True, a.dtype), count)
    return elementwise(_SUB_ROW, [a, mean], (), a.dtype)


def spread(a: np.ndarray, axes, keepdim: bool, denominator: float) -> np.ndarray:
    """The sum of squared deviations from the mean over ``axes`` (all when None) over ``max(denominator, 0)``: a
    float32 or float64 variance in two passes, as torch's. A C-contiguous array of fewer than ``_KERNEL_SUM_SIZE``
    elements reduced over given axes, with a denominator of at least 1, runs on numpy's ufuncs (``_small_spread``:
    the same sums, differences and products, bit for bit, without six kernel calls' Python); the rest on
    ``reduce`` and the elementwise kernels."""
    if axes and 0 < a.size < _KERNEL_SUM_SIZE and denominator >= 1 and a.dtype in _SUM_ZEROS and a.flags.c_contiguous:
        return _small_spread(a, axes, keepdim, denominator)
    centered = _centered(a, axes)
    squares = elementwise(_MUL_ROW, [centered, centered], (), a.dtype)
    return divide_by(reduce(squares, "sum", axes, keepdim, a.dtype), max(denominator, 0))


@np.errstate(all="ignore")  # (inf - inf is nan without a warning, as in the kernels and torch)
def _small_spread(a: np.ndarray, axes: tuple, keepdim: bool, denominator: float) -> np.ndarray:
    """``spread`` of a small C-contiguous array over ``axes``: what ``reduce`` (``ufunc.reduce`` below
    ``_KERNEL_SUM_SIZE``), ``divide_by`` and the sub and mul kernels compute, called directly."""
    centered = _small_centered(a, axes)
    np.multiply(centered, centered, out=centered)
    out = np.asarray(np.add.reduce(centered, axis=axes, keepdims=keepdim))  # (a 0-dim result: an array)
    return np.true_divide(out, a.dtype.type(denominator), out=out)


def spread_grad(g: np.ndarray, a: np.ndarray, axes, denominator: float) -> np.ndarray:
    """The gradient of ``spread`` (a denominator above 0) from ``g`` of its keepdim shape: ``g * (a - mean) * (2 /
    denominator)``, products in that order; a small C-contiguous float ``a`` (as ``spread``) on numpy's ufuncs."""
    if axes and 0 < a.size < _KERNEL_SUM_SIZE and a.dtype in _SUM_ZEROS and g.dtype == a.dtype and a.flags.c_contiguous:
        return _small_spread_grad(g, a, axes, denominator)
    product = elementwise(_MUL_ROW, [g, _centered(a, axes)], (), a.dtype)
    return elementwise(_MUL_ROW, [product, 2.0 / denominator], (), a.dtype)


@np.errstate(all="ignore")
def _small_spread_grad(g: np.ndarray, a: np.ndarray, axes: tuple, denominator: float) -> np.ndarray:
    out = _small_centered(a, axes)
    np.multiply(g, out, out=out)
    return np.multiply(out, a.dtype.type(2.0 / denominator), out=out)


def _small_centered(a: np.ndarray, axes: tuple) -> np.ndarray:
    """``_centered`` on numpy's ufuncs for the small spreads: ``a`` minus its mean over ``axes``, a new array."""
    mean = np.add.reduce(a, axis=axes, keepdims=True)
    np.true_divide(mean, a.dtype.type(a.size // mean.size), out=mean)  # (the count: elements per result)
    return np.subtract(a, mean)


def _sum_in_memory_order(a: np.ndarray, axes, keepdim: bool) -> np.ndarray | None:
    """The compiled sum of a dense but permuted ``a`` (a transposed tensor) over ``axes`` (None: all), read in
    place in its memory order, where the summed dims are consecutive there (``x.transpose(1, 2)`` summed over
    (0, 2): a middle axis of its storage); None where they are not."""
    key = (a.shape, a.strides, a.itemsize)
    known = _DENSE.get(key)
    if known is None:
        if len(_DENSE) >= _LOOPS_KEPT:
            _DENSE.clear()
        order = layout.dense_order(a)
        known = _DENSE[key] = () if order is None else (order, tuple(int(d) for d in np.argsort(order)))
    if not known:
        return None
    order, inverse = known
    stored = a.transpose(order)  # C-contiguous: the storage in its own order
    if axes is None:
        return reduce(stored.reshape(-1), "sum", None, False).reshape((1,) * a.ndim if keepdim else ())
    places = sorted(order.index(d) for d in axes)
    if places[-1] - places[0] != len(places) - 1:
        return None
    summed = _sum_axes(stored, tuple(places), True).transpose(inverse)  # a's dims, the summed ones kept as 1
    return summed if keepdim else summed.reshape(tuple(n for d, n in enumerate(a.shape) if d not in axes))


#: (shape, strides, item size) -> ``layout.dense_order`` and its inverse, or () for storage that is not dense
_DENSE: dict = {}


_DIV_ROW = ROWS["div"]
_SUM_ZEROS = {np.dtype(np.float32): np.float32(0), np.dtype(np.float64): np.float64(0)}  # what the sums add from
_WHOLE_SUM: dict = {}  # parallel -> the whole-array sum kernel


def _whole_sum(parallel: bool):
    kernel = _WHOLE_SUM[parallel] = codegen.sum_kernel("parallel" if parallel else "serial")
    return kernel


def _ufunc_reduce(a: np.ndarray, op: str, axes, keepdim: bool, dtype) -> np.ndarray:
    """``reduce`` through numpy: ``ufunc.reduce`` directly (``np.sum`` adds 1.4 us of wrapping per call)."""
    if op == "any" or op == "all":
        return np.asarray(
            np.any(a, axis=axes, keepdims=keepdim) if op == "any" else np.all(a, axis=axes, keepdims=keepdim)
        )
    if op == "sum" or op == "prod":
        return _quiet_reduce(_UFUNCS[op], a, axes, keepdim, dtype)
    if dtype is not None:
        return np.asarray(_UFUNCS[op].reduce(a, axis=axes, keepdims=keepdim), dtype=dtype)
    return np.asarray(_UFUNCS[op].reduce(a, axis=axes, keepdims=keepdim))  # (max and min of nan never warn)


@np.errstate(all="ignore")  # inf - inf or an overflow gives nan or inf without a warning, as in torch (0.4 us)
def _quiet_reduce(ufunc, a: np.ndarray, axes, keepdim: bool, dtype) -> np.ndarray:
    return np.asarray(ufunc.reduce(a, axis=axes, dtype=dtype, keepdims=keepdim))


def _sum_axes(a: np.ndarray, axes: tuple, keepdim: bool) -> np.ndarray:
    """The float sum over the consecutive ``axes`` of a C-contiguous ``a`` through a compiled loop, with float64
    totals (as the whole-array sum). The loop's shapes and kernel are worked out once per shape and axes
    (``_SUM_PLANS``): that work cost more than the loop itself at a few thousand elements."""
    key = (a.shape, axes, keepdim)
    plan = _SUM_PLANS.get(key)
    if plan is None:
        plan = _sum_axes_plan(a.shape, axes, keepdim)
    rows, total_shape, kept, kernel = plan
    total = np.empty(total_shape, np.float64)
    zero = _SUM_ZEROS[a.dtype]
    if len(rows) == 2:
        kernel(a.reshape(rows), total, total, zero)  # (no scratch)
    else:
        kernel(a.reshape(rows), total, np.empty(total_shape, a.dtype), zero)  # (a scratch row per outer index)
    return total.astype(a.dtype).reshape(kept)


def _sum_axes_plan(shape: tuple, axes: tuple, keepdim: bool) -> tuple:
    """``_sum_axes``'s loop for ``shape``: the input's view (``(outer, n)``, or ``(outer, n, inner)`` for a middle
    axis), the float64 totals' shape, the result's shape and the kernel; kept in ``_SUM_PLANS``."""
    outer, inner = math.prod(shape[: axes[0]]), math.prod(shape[axes[-1] + 1 :])
    n = math.prod(shape[axes[0] : axes[-1] + 1])
    variant = loop_variant(outer * n * inner)
    if inner == 1:
        rows, kernel = (outer, n), codegen.sum_axis_kernel("rows", variant)
    else:
        rows, kernel = (outer, n, inner), codegen.sum_axis_kernel("middle", variant)
    if keepdim:
        kept = tuple(1 if d in axes else size for d, size in enumerate(shape))
    else:
        kept = tuple(size for d, size in enumerate(shape) if d not in axes)
    if len(_SUM_PLANS) >= _LOOPS_KEPT:
        _SUM_PLANS.clear()
    plan = _SUM_PLANS[(shape, axes, keepdim)] = (rows, (outer, inner), kept, kernel)
    return plan


_SUM_PLANS: dict = {}  # (shape, axes, keepdim) -> ``_sum_axes_plan``


#: From this many elements, a float sum over some axes runs the compiled loop (below, numpy's call is cheaper).
_KERNEL_SUM_SIZE = 4096


def arg_reduce(a: np.ndarray, op: str, axis=None, keepdim: bool = False) -> np.ndarray:
    """``argmax``/``argmin`` along ``axis`` (over the flattened array when None), as int64."""
    fn = np.argmax if op == "argmax" else np.argmin
    if a.ndim == 0:
        return np.zeros((), np.int64)
    if axis is None:
        out = np.asarray(fn(a), dtype=np.int64)
        return out.reshape((1,) * a.ndim) if keepdim else out
    return np.asarray(fn(a, axis=axis, keepdims=keepdim), dtype=np.int64)


def where(cond: np.ndarray, a, b, dtype) -> np.ndarray:
    """``a`` where ``cond`` holds, else ``b`` (arrays or numbers, broadcast), in ``dtype``. A bool ``cond`` and
    branches of its shape and ``dtype`` (or one a number or 0-d array, as a where's gradient's 0), all
    C-contiguous, take one compiled pass (``nn_kernels.select``): (32, 200) float32 1.6 us against numpy's 8, 640K
    elements 113 us against 2760."""
    dtype = np.dtype(dtype)
    if cond.dtype == np.bool_ and cond.flags.c_contiguous and dtype.kind in "fiu":
        shape = cond.shape
        a_array, b_array = type(a) is np.ndarray and a.ndim > 0, type(b) is np.ndarray and b.ndim > 0
        arrays = [v for v, is_array in ((a, a_array), (b, b_array)) if is_array]
        if arrays and all(v.shape == shape and v.dtype == dtype and v.flags.c_contiguous for v in arrays):
            out = np.empty(shape, dtype)
            flat = cond.reshape(-1)
            if len(arrays) == 2:
                _nn().select(flat, a.reshape(-1), b.reshape(-1), out.reshape(-1))
            else:
                number = dtype.type(b if a_array else a)  # (a 0-d array's value, or the number, in ``dtype``)
                _nn().select_number(flat, arrays[0].reshape(-1), number, b_array, out.reshape(-1))
            return out
    return np.asarray(np.where(cond, a, b), dtype=dtype)


def concatenate(arrays: list, dim: int, dtype) -> np.ndarray:
    return np.concatenate(arrays, axis=dim, dtype=dtype, casting="unsafe")


def sort(a: np.ndarray, dim: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    """Stable sort along ``dim``: (values, int64 indices). Descending sorts the reversed array ascending and
    reverses back, so ties keep their original order and NaN comes first, as in torch (no negation to overflow)."""
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    if not descending:
        idx = np.argsort(a, axis=dim, kind="stable")
    else:
        n = a.shape[dim] if a.ndim else 1
        idx = n - 1 - np.flip(np.argsort(np.flip(a, axis=dim), axis=dim, kind="stable"), axis=dim)
    return np.take_along_axis(a, idx, axis=dim), idx.astype(np.int64)


def topk(a: np.ndarray, k: int, dim: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` of a stable sort along ``dim`` (descending for ``largest``): (values, int64 indices). A small
    ``k`` of a float or integer array runs one selection pass per row (``nn_kernels.topk_rows``); otherwise the
    sort, cut."""
    n = a.shape[dim]
    if a.dtype.kind in "fiu" and a.dtype.itemsize >= 4 and 0 < k <= 16 and k * 8 <= n:
        rows = _rows_along(a, dim)
        values, indices = np.empty((rows.shape[0], k), a.dtype), np.empty((rows.shape[0], k), np.int64)
        _nn().topk_rows(rows, k, largest, values, indices)
        return _from_rows(values, a.shape, dim), _from_rows(indices, a.shape, dim)
    values, indices = sort(a, dim, largest)
    cut = (slice(None),) * dim + (slice(0, k),)
    return values[cut].copy(), indices[cut].copy()


def getitem(a: np.ndarray, index: tuple) -> np.ndarray:
    """``a[index]``: a view for basic indices, a copy for advanced ones; a full integer index gives a 0-d view.
    One integer array picking rows (an embedding lookup) is ``np.take``, the same copy at a fifth of the cost."""
    if (
        type(index) is tuple
        and len(index) == 1
        and type(index[0]) is np.ndarray
        and index[0].dtype.kind in "iu"
        and a.ndim
    ):
        return np.take(a, index[0], axis=0)
    out = a[index]
    if type(out) is not np.ndarray:
        return a[index + (Ellipsis,)]
    return out


def setitem(dst: np.ndarray, index: tuple, value) -> None:
    """``dst[index] = value``; a value sharing memory with ``dst`` is copied first."""
    if type(value) is np.ndarray and np.may_share_memory(value, dst):
        value = value.copy()
    dst[index] = value


def index_add_zeros(shape: tuple, dtype, index, values: np.ndarray) -> np.ndarray:
    """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices add up, as ``np.add.at``; a basic
    index, which cannot repeat, is a plain assignment)."""
    out = np.zeros(shape, dtype)
    items = index if isinstance(index, tuple) else (index,)
    if len(items) == 1:  # an embedding's backward (``x[idx]``'s): whole rows, an index of any rank flattened
        rows = items[0]
        if type(rows) is np.ndarray and rows.ndim > 1 and rows.dtype.kind in "iu" and type(values) is np.ndarray:
            if values.shape == rows.shape + tuple(shape[1:]):
                rows, values = rows.reshape(-1), values.reshape((rows.size, *shape[1:]))
        if _add_rows(out, 0, rows, values):
            return out
    if any(isinstance(i, (np.ndarray, list)) for i in items):
        np.add.at(out, index, values)
    else:
        out[index] = values
    return out


def _add_rows(out: np.ndarray, dim: int, index, values) -> bool:
    """``out[..., index, ...] += values`` along ``dim`` through ``nn_kernels.add_at_rows`` when ``index`` is a
    1-d integer array and ``values`` the matching block in ``out``'s dtype (True when done)."""
    if (
        type(index) is not np.ndarray
        or index.ndim != 1
        or index.dtype.kind not in "iu"
        or type(values) is not np.ndarray
    ):
        return False
    shape = out.shape
    if values.shape != shape[:dim] + (index.shape[0],) + shape[dim + 1 :] or values.dtype != out.dtype:
        return False
    if out.dtype.kind not in "fiu" or out.dtype.itemsize < 4 or not out.flags.c_contiguous or not out.size:
        return False
    outer, inner = math.prod(shape[:dim]), math.prod(shape[dim + 1 :])
    block = np.ascontiguousarray(values).reshape(outer, index.shape[0], inner)
    _nn().add_at_rows(out.reshape(outer, shape[dim], inner), index, block)
    return True


def check_index(index: np.ndarray, low: int, high: int, skip, error) -> None:
    """Raise ``error(bad)`` for the first entry of ``index`` outside ``[low, high)`` other than ``skip`` (None:
    no exception), in one compiled pass. (The cuda backend queues the same check on the device.)"""
    flat = np.asarray(index).reshape(-1)
    if flat.size:
        at = _nn().first_outside(flat, low, high, 0 if skip is None else skip, skip is not None)
        if at >= 0:
            raise error(int(flat[at]))


def all_within(a: np.ndarray, low, high) -> np.ndarray:
    """Whether every element of ``a`` lies in ``[low, high]`` (a NaN does not), as a 0-dim bool array: what
    ``((a >= low) & (a <= high)).all()`` gives, in three numpy calls instead of four tensor ops."""
    return np.asarray(np.logical_and(np.greater_equal(a, low), np.less_equal(a, high)).all())


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


# --- numpy primitives for the breadth of ops ----------------------------------------------------------------
# Each returns a new C-contiguous array (``diagonal`` a writable view); the cuda backend runs them by a host round
# trip (``HOST_ROUND_TRIPS``), except ``diagonal``, a view there too.


def _c(a) -> np.ndarray:
    """A C-contiguous array (0-d stays 0-d, unlike ``np.ascontiguousarray``; numpy scalars become arrays)."""
    return np.asarray(a, order="C")


def flip(a: np.ndarray, dims: tuple) -> np.ndarray:
    return _c(np.flip(a, dims))


def roll(a: np.ndarray, shifts: tuple, dims: tuple) -> np.ndarray:
    return _c(np.roll(a, shifts, dims))


def cumulative(a: np.ndarray, op: str, dim: int, dtype) -> np.ndarray:
    """``cumsum`` or ``cumprod`` along ``dim`` in ``dtype``; floats accumulate in float64, as torch's CPU kernel."""
    fn = np.cumsum if op == "cumsum" else np.cumprod
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize >= 4 and a.size:  # a compiled scan (float16: numpy's, below)
        src = np.ascontiguousarray(a, dtype)
        shape = src.shape
        out = np.empty(shape, dtype)
        view = (math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1 :]))
        _nn().cumulative(src.reshape(view), op == "cumprod", out.reshape(view))
        return out
    if dtype.kind in "fV" and dtype.itemsize < 8:  # (bfloat16 too: numpy's scan would add in bfloat16)
        return _c(fn(a.astype(dtype), axis=dim, dtype=np.float64).astype(dtype))
    return _c(fn(a, axis=dim, dtype=dtype))


@np.errstate(all="ignore")
def einsum(equation: str, *arrays: np.ndarray) -> np.ndarray:
    """``np.einsum``; with more than two operands or large ones it plans the contraction order and calls BLAS
    (``optimize``: 3x faster on a (8, 8, 128, 64) attention product, but ~20 us of planning a tiny one doesn't
    repay)."""
    if any(_narrow(a.dtype) for a in arrays):  # float16 and bfloat16 contract in float32, rounded once
        wide = einsum(equation, *[_widen(a) if _narrow(a.dtype) else a for a in arrays])
        return _narrowed(wide, next(a.dtype for a in arrays if _narrow(a.dtype)))
    big = len(arrays) > 2 or sum(a.size for a in arrays) > 4096
    return _c(np.einsum(equation, *arrays, optimize=big))


def triangle(a: np.ndarray, upper: bool, diagonal: int) -> np.ndarray:
    """``triu``/``tril`` of the last two dims: the other triangle zeroed (``nn_kernels.triangle_rows`` for
    numbers, numpy's for bools)."""
    if a.dtype.kind == "b" or not _movable(a.dtype) or a.size == 0:
        return _c(np.triu(a, diagonal) if upper else np.tril(a, diagonal))
    n, m = a.shape[-2:]
    out = np.empty(a.shape, a.dtype)
    diagonal = min(max(diagonal, -n - 1), m + 1)  # (beyond either corner every row is whole or empty)
    _nn().triangle_rows(np.ascontiguousarray(a).reshape(-1, n, m), upper, diagonal, out.reshape(-1, n, m))
    return out


def diagonal(a: np.ndarray, offset: int, dim1: int, dim2: int) -> np.ndarray:
    """A writable view of the diagonal (its elements along a new last dim), as torch's ``diagonal``."""
    v = np.diagonal(a, offset, dim1, dim2)  # read-only, but its shape and strides are the view's
    start = [slice(None)] * a.ndim
    if v.size:
        start[dim2 if offset >= 0 else dim1] = slice(abs(offset), None)
    else:  # an empty diagonal: any element works as the start
        return np.empty(v.shape, a.dtype)
    return np.lib.stride_tricks.as_strided(a[tuple(start)], v.shape, v.strides)


def embed_diagonal(v: np.ndarray, offset: int) -> np.ndarray:
    """A square matrix with the 1-D ``v`` on diagonal ``offset`` (``torch.diag`` of a vector)."""
    n = v.shape[0] + abs(offset)
    out = np.zeros((n, n), v.dtype)
    rows = np.arange(v.shape[0]) + max(-offset, 0)
    out[rows, rows + offset] = v
    return out


def _along(index: np.ndarray, dim: int) -> tuple:
    """The full advanced index that reads element ``index[i...]`` along ``dim`` at every position ``i...``."""
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


def _movable(dtype: np.dtype) -> bool:
    """Whether Numba's kernels can read and write ``dtype``: bools, integers, and floats and complexes of 4 bytes
    or more (not the 2-byte floats, which ``_narrow`` ops compute in float32)."""
    return dtype.kind in "biuc" or (dtype.kind == "f" and not _narrow(dtype))


def _rows_view(a: np.ndarray, index: np.ndarray, dim: int) -> tuple | None:
    """(outer, inner) of the (outer, n, inner) views of ``a`` and of ``index`` around ``dim`` (``nn_kernels``'
    ``gather_rows`` and ``scatter_rows``), or None when ``index`` is smaller than ``a`` in another dim or either is
    empty (numpy's indexing serves those)."""
    if a.ndim != index.ndim or a.size == 0 or index.size == 0:
        return None
    for k in range(a.ndim):
        if k != dim and index.shape[k] != a.shape[k]:
            return None
    return math.prod(a.shape[:dim]), math.prod(a.shape[dim + 1 :])


def gather(a: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    """``out[i][j] = a[index[i][j]][j]`` (for ``dim = 0``): torch's gather; ``index`` may be smaller than ``a``
    (its entries checked by the caller)."""
    rows = _rows_view(a, index, dim)
    if rows is None or not _movable(a.dtype):
        return _c(a[_along(index.astype(np.intp, copy=False), dim)])
    outer, inner = rows
    out = np.empty(index.shape, a.dtype)
    _nn().gather_rows(
        np.ascontiguousarray(a).reshape(outer, a.shape[dim], inner),
        np.ascontiguousarray(index, np.int64).reshape(outer, index.shape[dim], inner),
        out.reshape(outer, index.shape[dim], inner),
    )
    return out


def scatter(a: np.ndarray, dim: int, index: np.ndarray, src, reduce: str | None = None) -> np.ndarray:
    """A copy of ``a`` with ``src`` written (``reduce=None``) or added (``"add"``) at ``index`` along ``dim``; a
    tensor ``src`` may be larger than ``index``, only its leading part is used (as torch's scatter)."""
    out = np.array(a, order="C", copy=True)
    if type(src) is np.ndarray:
        src = src[tuple(slice(0, s) for s in index.shape)]
    rows = _rows_view(out, index, dim) if reduce in (None, "add") else None
    if rows is not None and type(src) is np.ndarray and src.dtype == out.dtype and _movable(out.dtype):
        outer, inner = rows
        m = index.shape[dim]
        _nn().scatter_rows(
            out.reshape(outer, out.shape[dim], inner),
            np.ascontiguousarray(index, np.int64).reshape(outer, m, inner),
            np.ascontiguousarray(src).reshape(outer, m, inner),
            reduce == "add",
        )
        return out
    where = _along(index.astype(np.intp, copy=False), dim)
    if reduce == "add":
        np.add.at(out, where, src)
    elif reduce == "multiply":
        np.multiply.at(out, where, src)
    else:
        out[where] = src
    return out


_REDUCE_AT = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def scatter_reduce(a: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray, reduce: str, include_self: bool):
    """torch's ``scatter_reduce``: a copy of ``a`` with each ``src`` element reduced into the position ``index``
    names along ``dim``; without ``include_self`` a position that receives elements starts from them alone."""
    out = np.array(a, order="C", copy=True)
    where = _along(index.astype(np.intp, copy=False), dim)
    src = src[tuple(slice(0, s) for s in index.shape)]
    ufunc = _REDUCE_AT[reduce]
    if not include_self:
        hit = np.zeros(out.shape, dtype=bool)
        hit[where] = True
        out[hit] = ufunc.identity if ufunc.identity is not None else _extreme(out.dtype, reduce)
    ufunc.at(out, where, src)
    if reduce == "mean":
        count = np.zeros(out.shape, dtype=np.int64) + (1 if include_self else 0)
        np.add.at(count, where, 1)
        count = np.maximum(count, 1)
        if out.dtype.kind == "f":
            out /= count.astype(out.dtype)
        else:  # (torch divides integers rounding down)
            out[...] = np.floor_divide(out, count.astype(out.dtype))
    return out


def _extreme(dtype: np.dtype, reduce: str):
    """The identity of ``amax`` (the lowest value of ``dtype``) or ``amin`` (the highest)."""
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce != "amax"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def storage_offset(a: np.ndarray) -> int:
    """How many elements of ``a``'s dtype lie between the start of the memory block ``a`` views and ``a``'s first
    element (torch's ``storage_offset``); the block is the array at the end of ``a``'s chain of numpy bases."""
    return (data_ptr(a) - data_ptr(_storage_root(a))) // a.dtype.itemsize


def storage_nbytes(a: np.ndarray) -> int:
    """The size in bytes of the memory block ``a`` views (torch's ``untyped_storage().nbytes()``)."""
    return _storage_root(a).nbytes


def _storage_root(a: np.ndarray) -> np.ndarray:
    while True:
        base = a.base
        if isinstance(base, _Interface):  # (a view ``as_strided`` made)
            base = base.base
        if not isinstance(base, np.ndarray):
            return a
        a = base


def storage_block(a: np.ndarray, dtype) -> np.ndarray:
    """The whole memory block ``a`` views, as a 1-D array of ``dtype`` (as many whole elements as fit) sharing it:
    what torch's storage objects read and write."""
    root, dtype = _storage_root(a), np.dtype(dtype)
    interface = {"data": (data_ptr(root), False), "shape": (root.nbytes,), "typestr": "|u1", "version": 3}
    block = np.asarray(_Interface(interface, a))
    return block[: root.nbytes - root.nbytes % dtype.itemsize].view(dtype)


def as_strided(a: np.ndarray, shape: tuple, strides: tuple, offset: int) -> np.ndarray:
    """A writable view of ``a``'s memory block with ``shape``, element ``strides`` and first element ``offset``
    elements into the block (the caller checks the bounds)."""
    item = a.dtype.itemsize
    interface = dict(a.__array_interface__)
    interface["data"] = (data_ptr(_storage_root(a)) + offset * item, False)
    interface["shape"] = tuple(shape)
    interface["strides"] = tuple(s * item for s in strides)
    interface.pop("mask", None)
    return np.asarray(_Interface(interface, a))


class _Interface:
    """An ``__array_interface__`` holder that keeps the array it describes memory of alive (``as_strided``)."""

    def __init__(self, interface: dict, owner: np.ndarray) -> None:
        self.__array_interface__ = interface
        self.base = owner


def index_select(a: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    return _c(np.take(a, index, axis=dim))


def index_add(a: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    """A copy of ``a`` with ``src`` added at ``index`` along ``dim`` (repeated indices add up)."""
    out = np.array(a, order="C", copy=True)
    if not _add_rows(out, dim, index, src):
        np.add.at(out, (slice(None),) * dim + (index,), src)
    return out


def index_fill(a: np.ndarray, dim: int, index: np.ndarray, value) -> np.ndarray:
    out = np.array(a, order="C", copy=True)
    out[(slice(None),) * dim + (index,)] = value
    return out


def index_put(a: np.ndarray, index: tuple, values, accumulate: bool) -> np.ndarray:
    """A copy of ``a`` with ``values`` written at ``a[index]`` (added, repeated indices included, if
    ``accumulate``)."""
    out = np.array(a, order="C", copy=True)
    if accumulate:
        np.add.at(out, index, values)
    else:
        out[index] = values
    return out


def masked_scatter(a: np.ndarray, mask: np.ndarray, source: np.ndarray) -> np.ndarray:
    """A copy of ``a`` (broadcast with ``mask``) whose masked elements take ``source``'s first elements in order."""
    shape = np.broadcast_shapes(a.shape, mask.shape)
    out = np.array(np.broadcast_to(a, shape), order="C", copy=True)
    m = np.broadcast_to(mask, shape)
    out[m] = source.reshape(-1)[: int(m.sum())]
    return out


def repeat_index(repeats: np.ndarray) -> np.ndarray:
    """``repeat_interleave`` of a repeats tensor alone: index ``i`` repeated ``repeats[i]`` times."""
    return np.repeat(np.arange(repeats.shape[0], dtype=np.int64), repeats)


def unique(a: np.ndarray, return_inverse: bool, return_counts: bool, dim) -> tuple:
    """(sorted unique values, inverse indices or None, counts or None); NaNs stay distinct, as in torch."""
    kwargs = {"return_inverse": True, "return_counts": True, "axis": dim}
    if dim is None:
        kwargs["equal_nan"] = False
    values, inverse, counts = np.unique(a, **kwargs)
    inverse = inverse.reshape(a.shape if dim is None else (a.shape[dim],)).astype(np.int64)
    return (
        _c(values),
        inverse if return_inverse else None,
        counts.astype(np.int64) if return_counts else None,
    )


# --- nn primitives (nn.functional's fused kernels) ------------------------------------------------------------
# Numba loops in ``nn_kernels`` (imported on first use: it starts Numba), numpy/BLAS for the matrix products.
# Shapes are checked by the callers (``ops/nn_ops.py``); arrays go to the kernels C-contiguous, so each kernel
# compiles once per dtype.


_nn_kernels = None


def _nn():
    """The kernels module, imported on first use (a global: an import statement per call costs ~3 µs)."""
    global _nn_kernels
    if _nn_kernels is None:
        codegen.start_numba()
        from . import nn_kernels  # lazy: importing it compiles or loads Numba kernels (import numbagrad must not)

        _nn_kernels = nn_kernels
    return _nn_kernels


def _half_in_single(fn):
    """Numba has no 2-byte floats: a primitive whose first array is float16 or bfloat16 runs on float32 copies of
    its narrow arrays and returns arrays of the first one's type (torch's CPU computes them in float32 too). Other
    dtypes go straight through."""

    @functools.wraps(fn)
    def primitive(*args, **kwargs):
        narrow = args[0].dtype
        if not _narrow(narrow):
            return fn(*args, **kwargs)
        single = [_widen(a) if type(a) is np.ndarray and _narrow(a.dtype) else a for a in args]
        result = fn(*single, **kwargs)
        if type(result) is tuple:
            return tuple(_narrowed(r, narrow) if type(r) is np.ndarray and r.dtype is _SINGLE else r for r in result)
        return _narrowed(result, narrow)

    return primitive


def _rows_along(x: np.ndarray, dim: int) -> np.ndarray:
    """``x`` with ``dim`` moved last, C-contiguous, as rows: what a per-row kernel along ``dim`` reads."""
    a = np.ascontiguousarray(x if dim == x.ndim - 1 else np.moveaxis(x, dim, -1))
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])  # (not -1: rows of length 0 leave it undecided)


def _from_rows(rows: np.ndarray, shape: tuple, dim: int) -> np.ndarray:
    """The inverse of ``_rows_along`` for rows of any length: the array of ``shape`` (``dim`` then sized as the
    rows), C-contiguous."""
    if dim == len(shape) - 1:
        return rows.reshape(*shape[:-1], rows.shape[1])
    moved = rows.reshape(*shape[:dim], *shape[dim + 1 :], rows.shape[1])
    return np.ascontiguousarray(np.moveaxis(moved, -1, dim))


@_half_in_single
def softmax(x: np.ndarray, dim: int, log: bool) -> np.ndarray:
    """``softmax`` (or ``log_softmax`` for ``log``) of a non-empty float ``x`` along ``dim``: each row shifted by its
    maximum, ``exp`` in place (``_exp_in_place``; numpy's into a second array for log_softmax), then one kernel pass
    dividing by the float64 row sum (or subtracting its log). Composed from tensor ops a float32 (256, 400) softmax
    took 264 us, torch 64; a float32 (12, 4, 64, 64) one, 156 us through numpy's exp 195, torch 144."""
    if x.ndim == 0:
        return softmax(x.reshape(1), 0, log).reshape(())
    rows = _rows_along(x, dim)
    shifted, rowmax = np.empty(rows.shape, x.dtype), np.empty(rows.shape[0], x.dtype)
    kernels = _nn()
    _by_rows(kernels.shift_by_row_max, rows, (rows, shifted, rowmax), (0, 1, 2), SHARED_CHEAP_ELEMENTS)
    if log:  # (log_softmax reads the shifted values again)
        e = np.exp(shifted)
    else:
        e = shifted
        _exp_in_place(e)
    _by_rows(kernels.softmax_rows, rows, (shifted, e, log), (0, 1))
    return _from_rows(e, x.shape, dim)


def _by_rows(kernel, rows: np.ndarray, args: tuple, parts: tuple, least: int = SHARED_ELEMENTS) -> None:
    """``kernel(*args)``, a loop over the rows of the 2-D ``rows`` each on its own, the arrays at ``parts`` one row
    per row: in parts (``_run_parts``) from ``least`` elements on, ``SHARED_CHEAP_ELEMENTS`` for one pass of
    arithmetic over memory. Float32 rows of 1000 on two threads (1 thread -> 2): at 524K elements softmax's sums
    and division 205 -> 143 us, its row maxima 99 -> 94, the cross-entropy gradient 69 -> 76; at 1M 407 -> 247,
    199 -> 144 and 135 -> 115."""
    if rows.size < least:
        kernel(*args)
    else:
        _run_parts(kernel, rows.shape[0], args, parts)


#: ``_exp_in_place``'s float32 loop: ``vector_math``'s float32 exp (Cephes' expf, <= 1 ulp), which LLVM vectorizes.
_EXP_F32_SOURCE = """
@njit(cache=CACHE, nogil=True, error_model='numpy')
def kernel(a):
    for i in range(a.shape[0]):
        a[i] = _vexpf(a[i])
"""


def _exp_in_place(a: np.ndarray) -> None:
    """``exp`` of a C-contiguous float array, in place (softmax's exponentials): float32 through a generated loop
    over ``vector_math``'s float32 exp (196608 elements, 1 thread: 56 us, numpy's exp 92 us), other dtypes
    through numpy's."""
    if a.dtype != np.float32:
        np.exp(a, out=a)
        return
    kernel = _KERNELS.get(("exp_f32_in_place",))
    if kernel is None:
        source = codegen.module_source("serial", vector_math.SOURCE, vector_math.SINGLE_SOURCE, _EXP_F32_SOURCE)
        kernel = _KERNELS["exp_f32_in_place",] = codegen.load_module("exp_f32_in_place", source).kernel
    if a.size < SHARED_ELEMENTS:
        kernel(a.reshape(-1))
    else:
        _run_parts(kernel, a.size, (a.reshape(-1),), (0,), 16)


def scaled_softmax(scores: np.ndarray, mask, scale: float, safe: bool) -> np.ndarray:
    """Attention's probabilities ``softmax(mask + scores * scale)`` over the last dim, for float32 or float64
    ``scores`` and an additive ``mask`` of their dtype broadcasting to them (or None): one kernel pass scales, adds
    the mask and shifts each row by its maximum, ``exp`` runs in place (``_exp_in_place``), and one pass divides by the
    row sums, where the ops took five passes and five arrays (the char GPT's (12, 4, 64, 64) causal scores: 260 us
    as mul, add and softmax). With ``safe``, a row whose every score is ``-inf`` gives zeros (``softmax`` alone
    gives nan)."""
    rows = _rows_along(scores, scores.ndim - 1)
    n, c = rows.shape
    out = np.empty((n, c), scores.dtype)
    if n == 0 or c == 0:
        return out.reshape(scores.shape)
    rowmax, empty = np.empty(n, scores.dtype), np.empty(n, np.bool_)
    kernels = _nn()
    kernels.scale_mask_shift_rows(rows, scores.dtype.type(scale), _mask_rows(mask, scores.shape), out, rowmax, empty)
    _exp_in_place(out)
    kernels.softmax_rows(out, out, False)
    if safe and empty.any():
        out[empty] = 0
    return out.reshape(scores.shape)


def _laid_out_as_query(q: np.ndarray, width: int) -> np.ndarray:
    """An empty attention output (``q``'s shape, last dim ``width``) laid out as torch's CPU flash attention lays
    out its output: in the axis order of a 4-d query's strides (a GPT's heads split from one projection give (B,
    T, H, E) memory, so ``out.transpose(1, 2).contiguous()`` copies nothing), row-major for other ranks or where
    the order is ambiguous (a dim of size 1) or the last dim is not innermost."""
    shape = (*q.shape[:-1], width)
    if q.ndim == 4 and 1 not in q.shape and not q.flags.c_contiguous:  # (row-major: its order is row-major)
        order = sorted(range(4), key=lambda d: (-q.strides[d], d))
        if order[-1] == 3 and order != [0, 1, 2, 3]:
            return np.empty(tuple(shape[d] for d in order), q.dtype).transpose(np.argsort(order))
    return np.empty(shape, q.dtype)


def _as_slices(a: np.ndarray | None) -> np.ndarray | None:
    """``a`` (``(..., rows, width)``) as the attention kernels read it: 4-d ``(batch, heads, rows, width)`` with a
    unit last stride and whole-element, non-negative strides; a view where it can be (leading dims added or
    merged), else a copy. An output is made row-major or laid out as its input, so its view is always one."""
    if a is None:
        return None
    if a.ndim != 4:
        a = a.reshape((1,) * (4 - a.ndim) + a.shape) if a.ndim < 4 else a.reshape((-1, *a.shape[-3:]))
    if (a.shape[3] > 1 and a.strides[3] != a.itemsize) or any(s % a.itemsize or s < 0 for s in a.strides):
        a = np.ascontiguousarray(a)
    return a


def _attention_fields(operands: dict, stats: np.ndarray) -> np.ndarray:
    """``attention_kernels``' field row for ``operands`` (by its ``FIELDS`` names, each ``_as_slices``'d) and the
    rows' softmax statistics ``stats``."""
    kernels = attention_kernels
    fields = np.zeros(kernels.SIZE, np.int64)
    for index, name in enumerate(kernels.FIELDS):
        kernels.operand(fields, index, operands.get(name))
    q = operands["q"]
    fields[kernels.STATS] = stats.ctypes.data
    fields[kernels.HEADS], fields[kernels.LENGTH], fields[kernels.WIDTH] = q.shape[1], q.shape[2], q.shape[3]
    fields[kernels.VALUE_WIDTH] = operands["v"].shape[3]
    return fields


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, scale: float) -> tuple:
    """``softmax(mask + q @ k^T * scale) @ v``, and what ``causal_attention_backward`` needs besides the inputs,
    for float32 or float64 ``q``, ``k`` and ``v`` of one batch shape and as many keys as queries, ``mask`` the
    additive causal mask (L, L) (0 where key ``j <= i``, ``-inf`` above; the device backend adds it, this one
    reads the causal structure itself): each (batch, head) slice in one compiled pass (``attention_kernels``), the
    slices shared among the threads. What it keeps is each row's softmax maximum and reciprocal sum, ``(...,
    L, 2)``, not the ``(..., L, L)`` probabilities. The char GPT's (12, 4, 64, 32) float32 causal attention: 570
    us on one thread, 380 on two (numpy's calls per slice: 520 on either; torch's flash attention 513 on one).
    The output is laid out as the query (``_laid_out_as_query``), as torch's."""
    out = _laid_out_as_query(q, v.shape[-1])
    stats = np.empty((*q.shape[:-1], 2), q.dtype)
    slices = {"q": _as_slices(q), "k": _as_slices(k), "v": _as_slices(v), "out": _as_slices(out)}
    fields = _attention_fields(slices, stats)
    count = slices["q"].shape[0] * slices["q"].shape[1]
    length = q.shape[-2]
    work = count * length * length * (q.shape[-1] + v.shape[-1]) // 2
    attention_kernels.run("forward", fields, q.dtype, scale, count, work)
    return out, stats


@np.errstate(all="ignore")  # (``g``'s cast to the inputs' dtype may overflow, silently as in torch)
def causal_attention_backward(g: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, kept: np.ndarray,
                              scale: float, need_q: bool, need_k: bool, need_v: bool) -> tuple:  # fmt: skip
    """The gradients of ``causal_attention`` with respect to ``q``, ``k`` and ``v`` (None where not needed) from
    the output's gradient ``g`` and what the forward ``kept`` (each row's softmax statistics), each (batch, head)
    slice in one compiled pass (``attention_kernels``) that makes the forward's probabilities again, the slices
    shared among the threads: 630 us on one thread and 440 on two at the char GPT's (12, 4, 64, 32) float32
    (numpy's calls per slice: 620 and 600), before the probabilities were made again here. Each gradient is laid
    out as its input (``_laid_out_as_query``): heads split from one projection take their gradients back through
    the transpose and view without a copy, as torch's."""
    g_q = _laid_out_as_query(q, q.shape[-1]) if need_q else None
    g_k = _laid_out_as_query(k, k.shape[-1]) if need_k else None
    g_v = _laid_out_as_query(v, g.shape[-1]) if need_v else None
    if not (need_q or need_k or need_v):
        return g_q, g_k, g_v
    g = g.astype(q.dtype, copy=False)
    slices = {"q": _as_slices(q), "k": _as_slices(k), "v": _as_slices(v), "g": _as_slices(g)}
    slices.update(g_q=_as_slices(g_q), g_k=_as_slices(g_k), g_v=_as_slices(g_v))
    length = q.shape[-2]
    stats = np.ascontiguousarray(kept, q.dtype)  # (held here: the kernel reads it through its address)
    fields = _attention_fields(slices, stats)
    count = slices["q"].shape[0] * slices["q"].shape[1]
    work = count * length * length * (q.shape[-1] + v.shape[-1])
    attention_kernels.run("backward", fields, q.dtype, scale, count, work)
    return g_q, g_k, g_v


def _mask_rows(mask, shape: tuple) -> np.ndarray:
    """An additive mask broadcasting to ``shape`` as rows that repeat down the flattened rows of ``shape``: its own
    rows where its dims (leading ones dropped) are the trailing dims of ``shape`` (a (L, S) mask under (B, H, L,
    S) scores, no copy), else the mask broadcast in full; no rows for None."""
    last = shape[-1]
    if mask is None:
        return np.empty((0, last), np.float64)
    dims = tuple(mask.shape)
    while dims and dims[0] == 1:
        dims = dims[1:]
    if dims and dims == tuple(shape[len(shape) - len(dims) :]):
        return np.ascontiguousarray(mask).reshape(-1, last)
    return np.ascontiguousarray(np.broadcast_to(mask, shape)).reshape(-1, last)


@_half_in_single
def softmax_backward(y: np.ndarray, g: np.ndarray, dim: int, log: bool) -> np.ndarray:
    """The input gradient of ``softmax`` (``log_softmax`` for ``log``) from its output ``y`` and the incoming
    ``g``, along ``dim``: one kernel pass per row, where four tensor ops took two to three times torch's time."""
    if y.ndim == 0:
        return softmax_backward(y.reshape(1), g.reshape(1), 0, log).reshape(())
    rows_y, rows_g = _rows_along(y, dim), _rows_along(g.astype(y.dtype, copy=False), dim)
    gx = np.empty(rows_y.shape, y.dtype)
    _nn().softmax_backward_rows(np.exp(rows_y) if log else rows_y, rows_g, log, gx)  # (numpy's SIMD exp)
    return _from_rows(gx, y.shape, dim)


def _norm_vector(t, n: int, dtype, fill: float) -> np.ndarray:
    """A layer norm's weight, bias or added column vector as its kernels take it: ``n`` contiguous entries of
    ``dtype``, all ``fill`` where absent (so the loops have no branch)."""
    return np.ascontiguousarray(t, dtype).reshape(-1) if t is not None else np.full(n, fill, dtype)


@_half_in_single
def layer_norm(x: np.ndarray, weight, bias, eps: float, n: int) -> tuple:
    """Normalize ``x`` over its trailing ``n`` elements (then ``* weight + bias`` when given): (out in ``x``'s
    shape, mean and rstd per row)."""
    x = np.ascontiguousarray(x)
    rows = x.size // n if n else 0
    out = np.empty(x.shape, x.dtype)
    mean, rstd = np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    w, b = _norm_vector(weight, n, x.dtype, 1.0), _norm_vector(bias, n, x.dtype, 0.0)
    affine = weight is not None or bias is not None  # a bias alone still shifts the result
    _nn().layer_norm_forward(x.reshape(rows, n), w, b, float(eps), out.reshape(rows, n), mean, rstd, affine)
    return out, mean, rstd


@_half_in_single
def residual_layer_norm(a: np.ndarray, v: np.ndarray, c, weight, bias, eps: float, n: int) -> tuple:
    """``s = a + (v + c)`` for ``a`` and ``v`` of one shape (``c``, of ``n`` elements, added to ``v`` first, as the
    linear layer whose bias it is would add it; None: ``a + v``), and ``layer_norm(s, ...)`` in one pass: (s,
    out, mean, rstd)."""
    a, v = np.ascontiguousarray(a), np.ascontiguousarray(v, a.dtype)
    rows = a.size // n if n else 0
    s, out = np.empty(a.shape, a.dtype), np.empty(a.shape, a.dtype)
    mean, rstd = np.empty(rows, a.dtype), np.empty(rows, a.dtype)
    w, b = _norm_vector(weight, n, a.dtype, 1.0), _norm_vector(bias, n, a.dtype, 0.0)
    affine = weight is not None or bias is not None
    column = _norm_vector(c, n, a.dtype, 0.0)  # (unread without ``c``: ``has_c`` is False)
    _nn().residual_layer_norm_forward(
        a.reshape(rows, n), v.reshape(rows, n), column, w, b, float(eps), s.reshape(rows, n), out.reshape(rows, n),
        mean, rstd, affine, c is not None,
    )  # fmt: skip
    return s, out, mean, rstd


@_half_in_single
def layer_norm_backward(g: np.ndarray, x: np.ndarray, mean, rstd, weight, param_shape: tuple, need_x: bool,
                        need_wb: bool, carry=None, need_c: bool = False) -> tuple:  # fmt: skip
    """(grad of x in its shape, or None; the sums over rows of ``g * xhat`` and of ``g`` in ``param_shape``, for
    weight and bias, or None). With ``carry`` (the gradient ``x`` has from its other uses, in its shape) the grad
    of x includes it; ``need_c`` adds a fourth result, that total's sums over rows (the gradient of
    ``residual_layer_norm``'s ``c``). Results are fresh arrays, so the engine keeps them as ``.grad`` without a
    copy."""
    rows = mean.shape[0]
    n = x.size // rows if rows else 0
    x2 = np.ascontiguousarray(x).reshape(rows, n)
    g2 = np.ascontiguousarray(g, x.dtype).reshape(rows, n)
    w = _norm_vector(weight, n, x.dtype, 1.0)
    need_sum = need_x or need_c
    gx = np.empty(x.shape, x.dtype) if need_sum else np.empty((1, 1), x.dtype)
    gw, gb = np.empty(param_shape, x.dtype), np.empty(param_shape, x.dtype)
    _nn().layer_norm_backward(g2, x2, mean, rstd, w, gx.reshape(rows, n) if need_sum else gx, gw.reshape(n),
                              gb.reshape(n), need_sum)  # fmt: skip
    if carry is not None and need_sum:
        np.add(gx, carry, out=gx)
    gc = gx.reshape(rows, n).sum(0) if need_c else None
    grads = (gx if need_x else None), (gw if need_wb else None), (gb if need_wb else None)
    return (*grads, gc) if need_c else grads


def _channel_planes(a: np.ndarray) -> np.ndarray:
    """(N, C, *) as an (N, C, S) array, a view where the trailing axes merge (a strided one is fine: the kernels
    walk its memory order), in float32 for a 2-byte float."""
    a = _widen(a) if _narrow(a.dtype) else a
    return a.reshape(a.shape[0], a.shape[1], math.prod(a.shape[2:]))


def _channel_rows(a3: np.ndarray, always: bool = False) -> np.ndarray:
    """(N, C, S) ``a3`` as row-major (N * S, C) rows for the batch norm kernels to walk, channels innermost (LLVM
    vectorizes them; one thread, float32 (32, 128, 4) through a transpose: forward 23 against 12 us): its view
    where it has one (a transposed (N, S, C) array, a channels-last image, an (N, C) batch), a copy where its
    channels lie closer in memory than its positions (or S is 1) or when ``always``, else an empty array (the
    kernels walk its planes)."""
    rows = a3.transpose(0, 2, 1)
    if rows.flags.c_contiguous:
        return rows.reshape(-1, a3.shape[1])
    if always or a3.shape[2] == 1 or a3.strides[1] < a3.strides[2]:
        return np.ascontiguousarray(rows).reshape(-1, a3.shape[1])
    return np.empty((0, 0), a3.dtype)


def _work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype batch norm computes in: the data's, float32 for a 2-byte float."""
    return _SINGLE if _narrow(dtype) else dtype


def _per_channel(a, dtype) -> np.ndarray:
    """A per-channel parameter or statistic as a 1-d float array of ``dtype``."""
    return (_widen(a) if _narrow(a.dtype) else a).astype(dtype, copy=False).reshape(-1)


_NO_PARAM = np.empty(0)  # the kernels' "no weight" / "no bias"


def batch_norm(x: np.ndarray, weight, bias, running_mean, running_var, training: bool, momentum: float,
               eps: float) -> tuple:  # fmt: skip
    """Batch norm of (N, C, *) over every dim but the channel in one kernel call (Numba): training normalizes by
    the batch's statistics (summed in float64), eval by the running ones. Returns (output (contiguous, ``x``'s
    dtype), the mean and rstd used (C,), for the backward, and the updated running mean and variance (the
    variance unbiased, ``momentum`` the new batch's weight) in the running statistics' dtype, or None where
    nothing is updated). A running statistic of the data's dtype, contiguous, is updated in place by the kernel
    and returned itself; others come back as new arrays."""
    dtype = _work_dtype(x.dtype)
    x3 = _channel_planes(x)
    c = x3.shape[1]
    update = training and x3.size  # (an empty batch, as torch's: no statistics, the running ones stay)
    if training:
        mean64, var64 = np.empty(c), np.empty(c)
    else:
        mean64, var64 = _per_channel(running_mean, np.float64), _per_channel(running_var, np.float64)
    rstd64 = np.empty(c)
    out = np.empty(x3.shape, dtype)
    w = _NO_PARAM if weight is None else _per_channel(weight, dtype)
    b = _NO_PARAM if bias is None else _per_channel(bias, dtype)
    in_place = [
        update and s is not None and s.dtype == dtype and s.flags.c_contiguous for s in (running_mean, running_var)
    ]
    if x3.size or not training:
        kept = [s.reshape(-1) if here else _NO_PARAM for s, here in zip((running_mean, running_var), in_place)]
        rows = _channel_rows(x3)
        _nn().batch_norm_forward(x3, rows, w, b, eps, training, momentum, *kept, mean64, var64, rstd64, out)
    else:
        mean64.fill(np.nan), var64.fill(np.nan), rstd64.fill(np.nan)
    new_mean = new_var = None
    if update:  # (a statistic updated in place by the kernel comes back itself; others are made here)
        if running_mean is not None:
            new_mean = running_mean
            if not in_place[0]:
                new_mean = _per_channel(running_mean, np.float64) * (1 - momentum) + mean64 * momentum
                new_mean = _stat_like(new_mean, running_mean)
        if running_var is not None:
            new_var = running_var
            if not in_place[1]:
                count = x3.shape[0] * x3.shape[2]
                unbiased = var64 * (count / max(count - 1, 1))
                new_var = _stat_like(_per_channel(running_var, np.float64) * (1 - momentum) + unbiased * momentum,
                                     running_var)  # fmt: skip
    out = out.reshape(x.shape)
    mean, rstd = mean64.astype(dtype), rstd64.astype(dtype)
    if dtype is not x.dtype:  # a 2-byte float's statistics are saved in its precision, as torch's
        out = _narrowed(out, x.dtype)
        mean, rstd = _widen(_narrowed(mean, x.dtype)), _widen(_narrowed(rstd, x.dtype))
    return out, mean, rstd, new_mean, new_var


def _stat_like(values: np.ndarray, stat: np.ndarray) -> np.ndarray:
    """float64 ``values`` as a new array of ``stat``'s shape and dtype."""
    return _float64_as(values.reshape(stat.shape), stat.dtype)


def _float64_as(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 ``values`` as a new array of ``dtype`` (a 2-byte float rounded once, from float32)."""
    return _narrowed(values.astype(_SINGLE), dtype) if _narrow(dtype) else values.astype(dtype)


def batch_norm_backward(g: np.ndarray, x: np.ndarray, mean: np.ndarray, rstd: np.ndarray, weight, training: bool,
                        need_x: bool, need_w: bool, need_b: bool) -> tuple:  # fmt: skip
    """(grad of x, of weight, of bias), each None where not needed, from ``batch_norm``'s mean and rstd, in one
    kernel call. Training differentiates through the batch's statistics too; eval's input gradient is
    ``g * rstd * weight``. The per-channel sums are float64; the results are fresh arrays of ``x``'s dtype (the
    parameters', for theirs)."""
    dtype = _work_dtype(x.dtype)
    x3, g3 = _channel_planes(x), _channel_planes(g)
    c = x3.shape[1]
    sum_g, dot = np.zeros(c), np.zeros(c)
    gx = np.empty(x3.shape if need_x else (0, 0, 0), dtype)
    if x3.size:
        w = _NO_PARAM if weight is None else _per_channel(weight, dtype)
        x_rows = _channel_rows(x3)
        g_rows = _channel_rows(g3, always=True) if x_rows.size else x_rows
        _nn().batch_norm_backward(g3, x3, g_rows, x_rows, mean, rstd, w, training, sum_g, dot, gx)
    gw = gb = None
    param = weight.dtype if weight is not None else x.dtype
    if need_x:
        gx = gx.reshape(x.shape)
        if dtype is not x.dtype:
            gx = _narrowed(gx, x.dtype)
    else:
        gx = None
    if need_w:
        dot *= rstd  # (in float64, whatever rstd's dtype)
        gw = _float64_as(dot, param)
    if need_b:
        gb = _float64_as(sum_g, param)
    return gx, gw, gb


@_half_in_single
def im2col(x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """(N, C, H, W) -> (N, C * kh * kw, OH * OW) columns: each output position's receptive field (a copy of
    ``x`` where the columns are the input, ``_identity_columns``)."""
    x = np.ascontiguousarray(x)
    n, c = x.shape[:2]
    if _identity_columns(x.shape, kernel, stride, padding, dilation):
        return x.reshape(n, c * kernel[0] * kernel[1], out_hw[0] * out_hw[1]).copy()
    cols = np.empty((n, c * kernel[0] * kernel[1], out_hw[0] * out_hw[1]), x.dtype)
    _nn().im2col(x, *kernel, *stride, *padding, *dilation, *out_hw, cols)
    return cols


@_half_in_single
def col2im(
    cols: np.ndarray, shape: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple
) -> np.ndarray:
    """The adjoint of ``im2col``: an (N, C, H, W) array of ``shape`` summing each column entry into its source."""
    if _identity_columns(shape, kernel, stride, padding, dilation):
        return np.ascontiguousarray(cols).reshape(shape).copy()
    x = np.empty(shape, cols.dtype)
    _nn().col2im(np.ascontiguousarray(cols), *kernel, *stride, *padding, *dilation, *out_hw, x)
    return x


@_half_in_single
def max_pool2d(x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """Max over windows of the (P, H, W) planes: (values, int64 indices ``h * W + w`` into each plane)."""
    x = np.ascontiguousarray(x)
    out = np.empty((x.shape[0], *out_hw), x.dtype)
    idx = np.empty((x.shape[0], *out_hw), np.int64)
    kernel_ = _nn().max_pool2d_forward
    spans = _plane_spans(x)
    if len(spans) == 1:  # (one task: the kernel called here, without the task closure)
        kernel_(x, *kernel, *stride, *padding, *dilation, out, idx)
        return out, idx

    def task(t: int) -> None:
        a, b = spans[t]
        kernel_(x[a:b], *kernel, *stride, *padding, *dilation, out[a:b], idx[a:b])

    cpu_threads.run_tasks(task, len(spans))
    return out, idx


#: The fewest elements a pool's planes hold for them to be split into tasks on the CPU threads (``cpu_threads``):
#: a smaller pool takes less time than handing tasks to a thread. The cnn's (4096, 24, 24) max pool has 2.4 M.
_PLANE_TASK_ELEMENTS = 1 << 18


def _plane_spans(x: np.ndarray) -> list:
    """(first plane, end) spans of the (P, H, W) ``x`` for a pool's tasks: one where the planes are small or the
    threads one."""
    if x.size < _PLANE_TASK_ELEMENTS or cpu_threads.thread_count() == 1:
        return [(0, x.shape[0])]
    return _spans(x.shape[0], _MAX_TASKS)


@_half_in_single
def max_pool2d_backward(g: np.ndarray, indices: np.ndarray, in_hw: tuple) -> np.ndarray:
    gx = np.empty((g.shape[0], *in_hw), g.dtype)
    g, indices = np.ascontiguousarray(g), np.ascontiguousarray(indices, np.int64)
    kernel = _nn().max_pool2d_backward
    spans = _plane_spans(gx)
    if len(spans) == 1:
        kernel(g, indices, gx)
        return gx

    def task(t: int) -> None:
        a, b = spans[t]
        kernel(g[a:b], indices[a:b], gx[a:b])

    cpu_threads.run_tasks(task, len(spans))
    return gx


@_half_in_single
def avg_pool2d(
    x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, count_include_pad: bool, divisor: int, out_hw: tuple
) -> np.ndarray:
    """Mean over windows of the (P, H, W) planes; ``divisor`` > 0 replaces the window size."""
    x = np.ascontiguousarray(x)
    out = np.empty((x.shape[0], *out_hw), x.dtype)
    _nn().avg_pool2d(x, *kernel, *stride, *padding, count_include_pad, divisor, out, False)
    return out


@_half_in_single
def avg_pool2d_backward(
    g: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, count_include_pad: bool, divisor: int, in_hw: tuple
) -> np.ndarray:
    gx = np.empty((g.shape[0], *in_hw), g.dtype)
    _nn().avg_pool2d(np.ascontiguousarray(g), *kernel, *stride, *padding, count_include_pad, divisor, gx, True)
    return gx


@_half_in_single
def adaptive_avg_pool2d(x: np.ndarray, out_hw: tuple) -> np.ndarray:
    x = np.ascontiguousarray(x)
    out = np.empty((x.shape[0], *out_hw), x.dtype)
    _nn().adaptive_avg_pool2d(x, out, False)
    return out


@_half_in_single
def adaptive_avg_pool2d_backward(g: np.ndarray, in_hw: tuple) -> np.ndarray:
    gx = np.empty((g.shape[0], *in_hw), g.dtype)
    _nn().adaptive_avg_pool2d(np.ascontiguousarray(g), gx, True)
    return gx


#: ``cross_entropy``'s (N, C) rows in one compiled call (``_cross_entropy_rows``): each row's maximum and its
#: logits less it into the probabilities, then ``exp`` over all of them in one flat loop (``vector_math``'s, which
#: LLVM vectorizes; per row, a row of 27 left most of its elements to the scalar remainder), then per row the
#: float64 sum, the division, and the sample's loss and counted weight; the losses' and weights' float64 sums (as
#: stored, in row order) when ``summed``. ``loss_sums`` makes those sums alone, after rows ran in parts on several
#: threads.
_CROSS_ENTROPY_ROWS_SOURCE = """
@njit(cache=CACHE, nogil=True, error_model='numpy', fastmath={'reassoc', 'contract', 'nsz'})
def rows_KIND(x, target, weight, weighted, smoothing, ignore_index, probs, losses, counts, sums, summed):
    n, c = x.shape
    rowmax = np.empty(n, x.dtype)
    wsum = _weight_sum(weight, weighted, c)
    total_loss = total_weight = 0.0
    for i in range(n):
        m = _row_max(x, i, c)
        rowmax[i] = m
        for k in range(c):
            probs[i, k] = x[i, k] - m
    flat = probs.reshape(-1)
    for j in range(flat.shape[0]):  # (one loop over every row: one scalar remainder, not one per row)
        flat[j] = EXP(flat[j])
    for i in range(n):
        total = 0.0
        for k in range(c):
            total += probs[i, k]
        inv = DTYPE(1.0 / total)  # (float32 rows are scaled in float32: vectorized)
        for k in range(c):
            probs[i, k] *= inv
        m = rowmax[i]
        t = target[i]
        if t == ignore_index:
            losses[i] = 0.0
            counts[i] = 0.0
            continue
        lse = m + math.log(total)
        smooth = 0.0
        if smoothing != 0.0:
            xs = 0.0
            if weighted:
                for k in range(c):
                    xs += weight[k] * x[i, k]
            else:
                for k in range(c):
                    xs += x[i, k]
            smooth = wsum * lse - xs
        wt = weight[t] if weighted else 1.0
        counts[i] = wt
        losses[i] = _sample_loss(lse, x[i, t], wt, smoothing, c, smooth)
        total_loss += losses[i]
        total_weight += counts[i]
    if summed:
        sums[0] = total_loss
        sums[1] = total_weight


@njit(cache=CACHE, nogil=True, error_model='numpy')
def loss_sums_KIND(losses, counts, sums):
    total_loss = total_weight = 0.0
    for i in range(losses.shape[0]):
        total_loss += losses[i]
        total_weight += counts[i]
    sums[0] = total_loss
    sums[1] = total_weight
"""


def _cross_entropy_rows():
    """The compiled module of ``_CROSS_ENTROPY_ROWS_SOURCE`` for float32 (``rows_f32``, ``loss_sums_f32``) and
    float64, made once per process. Its rows' maxima, class weights' sum and samples' losses are ``nn_kernels``'
    (``_row_max``, ``_weight_sum``, ``_sample_loss``, as the (N, C, S) kernels there use them), which Numba
    compiles into its loops: its text holds the digest of ``nn_kernels``' text, so that its cache entry changes with
    that too."""
    module = _KERNELS.get(("cross_entropy_rows",))
    if module is None:
        import hashlib
        import inspect

        digest = hashlib.sha1(inspect.getsource(_nn()).encode()).hexdigest()[:16]
        parts = ["import numpy as np\nfrom numba import float32, float64\n"
                 "from numbagrad.backend.nn_kernels import _row_max, _sample_loss, _weight_sum\n"
                 f'NN_KERNELS_CODE = "{digest}"']  # fmt: skip
        parts += [vector_math.SOURCE, vector_math.SINGLE_SOURCE]
        for kind, dtype, exp in (("f32", "float32", "_vexpf"), ("f64", "float64", "_vexp")):
            parts.append(codegen.kind_source(_CROSS_ENTROPY_ROWS_SOURCE, kind, {"DTYPE": dtype, "EXP": exp}))
        source = codegen.module_source("serial", *parts)
        module = _KERNELS["cross_entropy_rows",] = codegen.load_module("cross_entropy_rows", source)
    return module


@_half_in_single
def cross_entropy(x: np.ndarray, target: np.ndarray, weight, smoothing: float, ignore_index: int, reduction: str):
    """Cross entropy of (N, C, S) logits (S positions per sample, 1 for plain (N, C) rows) with class indices
    (one per sample and position, ``n * S + s``), label smoothing and class weights, reduced: (softmax
    probabilities (N, C, S), the loss (0-d, or per position for ``reduction='none'``), the mean's denominator: the
    summed weights ``weight[target]`` of the counted positions, as a Python float). Rows run along the classes,
    in one compiled call (``_CROSS_ENTROPY_ROWS_SOURCE``; at the makemore MLP's (32, 27) float32, 1 thread, this
    function took 4.5 us, and 5.8 as four kernel calls); positions (an image's pixels) along the
    positions, which lie next to each other: at (4, 3, 1024) float32, 1 thread, the moved (4096, 3) rows took 154
    us with their copy."""
    x = np.ascontiguousarray(x)
    n, c, s = x.shape
    weighted = weight is not None
    w = np.ascontiguousarray(weight, x.dtype) if weighted else _no_class_weights(x.dtype)
    losses, counts = np.empty(n * s, x.dtype), np.empty(n * s, x.dtype)
    sums = np.zeros(2)  # (the kernels' float64 sums of the losses and the counted weights: no numpy sums)
    t = np.ascontiguousarray(target, np.int64)
    if s == 1:
        x2 = x.reshape(n, c)
        probs = np.empty((n, c), x.dtype)
        if x.size:
            module = _cross_entropy_rows()
            single = x.dtype == _SINGLE
            rows = module.rows_f32 if single else module.rows_f64
            args = (x2, t, w, weighted, float(smoothing), int(ignore_index), probs, losses, counts, sums)
            if x.size < SHARED_ELEMENTS:
                rows(*args, True)
            else:  # rows in parts on the threads, then the sums in row order: the same bits as one call
                _run_parts(rows, n, (*args, False), (0, 1, 6, 7, 8))
                (module.loss_sums_f32 if single else module.loss_sums_f64)(losses, counts, sums)
        else:  # (no classes: every target was ignore_index, or the range check raised)
            losses.fill(0.0)
            counts.fill(0.0)
        probs = probs.reshape(n, c, 1)
    else:
        kernels = _nn()
        probs, lse = np.empty(x.shape, x.dtype), np.empty((n, s))
        rowmax = np.zeros((n, s), x.dtype)
        if x.size:
            kernels.shift_by_plane_max(x, probs, rowmax)
        _exp_in_place(probs)
        kernels.normalize_planes(probs, lse)
        np.log(lse, out=lse)
        lse += rowmax
        kernels.cross_entropy_planes_losses(x, lse, t, w, weighted, float(smoothing), int(ignore_index), losses,
                                            counts, sums)  # fmt: skip
    if reduction == "none":
        return probs, losses, 1.0
    loss_sum, total = sums.tolist()
    total = total if reduction == "mean" else 1.0
    loss = np.asarray(_divide(loss_sum, total), x.dtype)  # all ignored: nan, as torch
    return probs, loss, total


_NO_WEIGHTS: dict = {}


def _no_class_weights(dtype: np.dtype) -> np.ndarray:
    """The one-element array the cross entropy kernels take for absent class weights (read only when
    ``weighted``): one per dtype, made once (``np.ones`` costs 1 us a call)."""
    w = _NO_WEIGHTS.get(dtype)
    if w is None:
        w = _NO_WEIGHTS[dtype] = np.ones(1, dtype)
    return w


def _divide(a: float, b: float) -> float:
    """``a / b`` with IEEE results for ``b == 0`` (inf, or nan for 0/0), as numpy divides, without the 2-3 us of
    an ``np.errstate`` block."""
    if b:
        return a / b
    if a != a or a == 0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


@_half_in_single
def cross_entropy_backward(probs: np.ndarray, target: np.ndarray, weight, smoothing: float, ignore_index: int,
                           g: np.ndarray, total: float) -> np.ndarray:  # fmt: skip
    """The gradient of ``cross_entropy``'s loss, (N, C, S) as its ``probs``, for the incoming gradient ``g``
    (0-d, or per position)."""
    weighted = weight is not None
    w = np.ascontiguousarray(weight, probs.dtype) if weighted else _no_class_weights(probs.dtype)
    out = np.empty(probs.shape, probs.dtype)
    t = np.ascontiguousarray(target, np.int64)
    n, _, s = probs.shape
    per_sample = g.ndim != 0
    if not per_sample:  # (one scale for every row: ``scale[0]``)
        scale = np.empty(1 if s == 1 else n * s)
        scale.fill(_divide(float(g), total))  # (np.full costs 1 us more)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.ascontiguousarray(g, np.float64).reshape(n * s) / total
    if s == 1:
        rows = probs.reshape(n, -1)
        args = (rows, t, w, weighted, float(smoothing), int(ignore_index), scale, out.reshape(n, -1))
        _by_rows(_nn().cross_entropy_backward, rows, args, (0, 1, 6, 7) if per_sample else (0, 1, 7),
                 SHARED_CHEAP_ELEMENTS)  # fmt: skip
    else:
        _nn().cross_entropy_planes_backward(probs, t, w, weighted, float(smoothing), int(ignore_index), scale, out)
    return out


@_half_in_single
@np.errstate(all="ignore")  # (BLAS products, as matmul)
def conv2d(
    x: np.ndarray, weight: np.ndarray, bias, stride: tuple, padding: tuple, dilation: tuple, groups: int, out_hw: tuple
) -> tuple:
    """Convolution of (N, C, H, W) by (O, C / groups, kh, kw): (output (N, O, OH, OW), what the backward needs: the
    input, whose columns ``conv2d_backward`` makes again). ``padding`` is the (top, left) offset. A stride-1 3x3
    one runs by Winograd's F(2x2, 3x3) (``winograd_kernels``), another stride-1 single-group one on the padded
    input's grid (``conv_kernels``), where each pays; the rest as im2col + one BLAS product per group.

    The columns hold C * kh * kw values per output position, a 3x3 convolution's 9 times its input. Large ones
    (over ``_CHUNK_BYTES``, single group) are made a chunk of samples at a time into one reused buffer and
    multiplied while in cache, spans of samples as tasks on the CPU threads (``cpu_threads``). None outlive the
    call: keeping large ones held the U-Net's step peak at 10.3 MiB (torch's 4.4), and keeping those up to 256 KiB
    the DCGAN's at 2.4 MiB (torch's 0.9), for 0.2 ms of its 3.9 ms step at 1 thread (making short rows' columns
    again is cheap, ``nn_kernels._ROW_WALK``)."""
    n, o = x.shape[0], weight.shape[0]
    x = np.ascontiguousarray(x)
    kernel = tuple(weight.shape[2:])
    k, length = weight.size // o * groups, out_hw[0] * out_hw[1]
    w = np.ascontiguousarray(weight, x.dtype)
    if winograd_kernels.pays(x.dtype, kernel, stride, dilation, groups, x.shape[1], out_hw[1]):
        out = np.empty((n, o, *out_hw), x.dtype)
        winograd_kernels.forward(x, w, bias, tuple(padding), out)
        return out, x
    if (
        groups == 1
        and tuple(stride) == (1, 1)
        and conv_kernels.forward_pays(x.dtype, n, x.shape[1], o, kernel, dilation, out_hw)
    ):
        out = np.empty((n, o, *out_hw), x.dtype)
        conv_kernels.forward(x, w, bias, tuple(padding), tuple(dilation), out)
        return out, x
    bias = None if bias is None else bias.astype(x.dtype, copy=False).reshape(o, 1)
    size = n * k * length * x.itemsize
    if groups == 1 and size > _CHUNK_BYTES:
        w2 = w.reshape(o, k)
        out = np.empty((n, o, length), x.dtype)
        m = _chunk(n, k * length * x.itemsize)
        spans = _spans(n, _span_count(size))

        def task(t: int) -> None:  # (a span's columns, products and bias, on one thread)
            a, b = spans[t]
            for i, j, cols in _column_chunks(x, kernel, stride, padding, dilation, out_hw, a, b, m):
                np.matmul(w2, cols, out=out[i:j])
            if bias is not None:
                out[a:b] += bias

        cpu_threads.run_tasks(task, len(spans))
        return out.reshape(n, o, *out_hw), x
    cols = _columns(x, kernel, stride, padding, dilation, out_hw)
    if groups == 1:
        out = np.matmul(w.reshape(o, k), cols)
    else:
        out = np.matmul(w.reshape(groups, o // groups, k // groups), cols.reshape(n, groups, k // groups, length))
        out = out.reshape(n, o, length)
    if bias is not None:
        out += bias
    return out.reshape(n, o, *out_hw), x


#: The most bytes of columns a single-group convolution makes at once: beyond, a chunk of samples' (one sample's
#: where it holds more) stays in the second-level cache while its products read it, and the step's transient
#: memory stays small. Measured at 1 thread: the cnn's (64, 32, 26, 26) by (64, 32, 3, 3) forward took 16 ms so
#: instead of 23 at once (its backward 39 instead of 43), the U-Net's (4, 24, 32, 32) by (8, 24, 3, 3) forward and
#: backward 1.9 ms instead of 2.2.
_CHUNK_BYTES = 1 << 20


def _identity_columns(shape: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple) -> bool:
    """Whether the columns of an (N, C, H, W) input of ``shape`` are the input itself, each value read once, in
    order: a 1x1 kernel of stride 1, or an undilated kernel as large as the input (one output position, as the
    DCGAN's last discriminator convolution and first generator one), without padding."""
    if any(padding):
        return False
    if tuple(kernel) == (1, 1):
        return tuple(stride) == (1, 1)
    return tuple(kernel) == tuple(shape[2:]) and tuple(dilation) == (1, 1)


def _columns(x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """``im2col`` of a C-contiguous ``x`` (a view of it where the columns are the input)."""
    if _identity_columns(x.shape, kernel, stride, padding, dilation):
        return x.reshape(x.shape[0], x.shape[1] * kernel[0] * kernel[1], out_hw[0] * out_hw[1])
    return im2col(x, kernel, stride, padding, dilation, out_hw)


def _chunk(n: int, per_sample: int, budget: int | None = None) -> int:
    """Samples per chunk of columns: as many as ``budget`` bytes (``_CHUNK_BYTES``) hold (at least one), in chunks
    of equal size."""
    chunks = max(1, min(n, -(-n * per_sample // (budget or _CHUNK_BYTES))))
    return max(1, -(-n // chunks))


#: The most tasks a convolution's samples are split into (``cpu_threads``): enough for an idle thread to find
#: work while another lost its core, few enough that each is worth a thread's start.
_MAX_TASKS = 16


#: The fewest bytes of columns per task of a convolution: smaller ones take less time than handing them to a thread
#: (the cnn's first convolution, (64, 1, 28, 28) by (32, 1, 3, 3), makes 1.5 MiB of columns: 6 tasks).
_SPAN_BYTES = 1 << 18


def _span_count(column_bytes: int) -> int:
    """How many tasks a convolution making ``column_bytes`` of columns is split into: one on one thread (each
    task's own buffer and gradient sums cost the U-Net's step 80 us of its 5.1 ms there)."""
    if cpu_threads.thread_count() == 1:
        return 1
    return max(1, min(_MAX_TASKS, column_bytes // _SPAN_BYTES))


def _spans(n: int, tasks: int) -> list:
    """Up to ``tasks`` (first, end) spans over ``n`` samples or planes, as even as they go: they depend on the
    shapes alone. A span's samples are then made a chunk at a time (``_chunk``)."""
    count = max(1, min(n, tasks))
    bounds = [n * t // count for t in range(count + 1)]
    return [(bounds[t], bounds[t + 1]) for t in range(count)]


def _column_chunks(x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple,
                   start: int, end: int, m: int):  # fmt: skip
    """(first sample, end, their (m, C * kh * kw, L) columns) over samples ``start:end`` of the C-contiguous
    ``x`` in chunks of ``m``; the columns are one reused buffer (or views of ``x``), valid until the next chunk."""
    k, length = x.shape[1] * kernel[0] * kernel[1], out_hw[0] * out_hw[1]
    identity = _identity_columns(x.shape, kernel, stride, padding, dilation)
    buffer = None if identity else np.empty((min(m, end - start), k, length), x.dtype)
    im2col = _nn().im2col
    for i in range(start, end, m):
        j = min(i + m, end)
        if identity:
            yield i, j, x[i:j].reshape(j - i, k, length)
            continue
        cols = buffer[: j - i]
        im2col(x[i:j], *kernel, *stride, *padding, *dilation, *out_hw, cols)
        yield i, j, cols


@_half_in_single
@np.errstate(all="ignore")
def conv2d_backward(
    g: np.ndarray,
    kept,
    x_shape: tuple,
    weight: np.ndarray,
    stride: tuple,
    padding: tuple,
    dilation: tuple,
    groups: int,
    need_x: bool,
    need_w: bool,
    need_b: bool,
) -> tuple:
    """(grad of x, of weight, of bias), each None where not needed, from the output gradient and what ``conv2d``
    kept: its (N, C, H, W) input, whose columns are made again (chunk by chunk, ``_conv2d_backward_chunks``), or
    given (N, C * kh * kw, L) columns (a transposed convolution's backward). ``kept`` may be None where the
    weight's gradient is not asked for (a transposed convolution's forward)."""
    n, o = g.shape[:2]
    out_hw = tuple(g.shape[2:])
    kernel = tuple(weight.shape[2:])
    k, length = weight.size // o * groups, out_hw[0] * out_hw[1]
    g3 = np.ascontiguousarray(g).reshape(n, o, length)
    w = np.ascontiguousarray(weight, g.dtype)
    gx = gw = gb = None
    given = need_w and kept.ndim == 3
    if groups == 1 and tuple(stride) == (1, 1) and not given and (need_x or need_w):
        gx = _flipped_input_gradient(g3.reshape(g.shape), x_shape, w, padding, dilation) if need_x else None
        gw = _tapped_weight_gradient(g3.reshape(g.shape), kept, w, padding, dilation) if need_w else None
        if gx is not None or gw is not None:  # (the rest as before)
            rest = conv2d_backward(g, kept, x_shape, weight, stride, padding, dilation, groups,
                                   need_x and gx is None, need_w and gw is None, need_b)  # fmt: skip
            return (rest[0] if gx is None else gx), (rest[1] if gw is None else gw), rest[2]
    if groups == 1 and not given and length > 1:
        return _conv2d_backward_chunks(g3, kept, x_shape, w, stride, padding, dilation, out_hw, need_x, need_w,
                                       need_b)  # fmt: skip
    if need_b:
        gb = g3.sum(axis=(0, 2))
    cols = kept
    if need_w and not given:
        cols = _columns(np.ascontiguousarray(kept, g.dtype), kernel, stride, padding, dilation, out_hw)
    if groups == 1 and length == 1:  # one output position: one GEMM over the samples, not one product each
        if need_w:  # (DCGAN's 16 samples of (512, 1) columns: 2 us against 22)
            gw = np.matmul(g3.reshape(n, o).T, cols.reshape(n, k)).reshape(weight.shape)
        if need_x:
            gcols = np.matmul(g3.reshape(n, o), w.reshape(o, k)).reshape(n, k, 1)
    elif groups == 1:
        if need_w:  # one small GEMM per sample, transposed (see _conv2d_backward_chunks), summed into the weight
            gw = np.ascontiguousarray(np.matmul(cols, g3.transpose(0, 2, 1)).sum(axis=0).T).reshape(weight.shape)
        if need_x:
            gcols = np.matmul(w.reshape(o, k).T, g3)
    else:
        kg, og = k // groups, o // groups
        g4 = g3.reshape(n, groups, og, length)
        if need_w:
            c4 = cols.reshape(n, groups, kg, length)
            gw = np.matmul(c4, g4.transpose(0, 1, 3, 2)).sum(axis=0).transpose(0, 2, 1)
            gw = np.ascontiguousarray(gw).reshape(weight.shape)
        if need_x:
            gcols = np.matmul(w.reshape(groups, og, kg).transpose(0, 2, 1), g4).reshape(n, k, length)
    if need_x:
        if _identity_columns(x_shape, kernel, stride, padding, dilation):
            gx = gcols.reshape(x_shape)
        else:
            gx = col2im(gcols, tuple(x_shape), kernel, stride, padding, dilation, out_hw)
    return gx, gw, gb


def _flipped_input_gradient(g: np.ndarray, x_shape: tuple, w: np.ndarray, padding: tuple, dilation: tuple):
    """The input's gradient of a stride-1 convolution from its output's gradient ``g`` (N, O, OH, OW), as the
    convolution of ``g`` by the kernel flipped and its channels swapped (padded by ``dilation * (k - 1) -
    padding``), where ``winograd_kernels`` or ``conv_kernels`` runs it faster than the columns' product and col2im;
    else None."""
    kernel = w.shape[2:]
    batch, channels, positions = x_shape[0], x_shape[1], g.shape[2] * g.shape[3]
    winograd = winograd_kernels.pays(g.dtype, kernel, (1, 1), dilation, 1, g.shape[1], x_shape[3])
    if not winograd and not conv_kernels.forward_pays(
        g.dtype, batch, g.shape[1], channels, kernel, dilation, x_shape[2:], positions
    ):
        return None
    flipped = np.ascontiguousarray(w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
    top, left = (d * (size - 1) - p for d, size, p in zip(dilation, kernel, padding))
    gx = np.empty(x_shape, g.dtype)
    g = np.ascontiguousarray(g)
    if winograd:
        winograd_kernels.forward(g, flipped, None, (top, left), gx)
    else:
        conv_kernels.forward(g, flipped, None, (top, left), tuple(dilation), gx)
    return gx


def _tapped_weight_gradient(g: np.ndarray, x, w: np.ndarray, padding: tuple, dilation: tuple):
    """The weight's gradient of a stride-1 convolution of ``x`` from its output's gradient ``g``, by Winograd's
    transform (3x3 kernels, ``winograd_kernels.weight_grad``) or ``conv_kernels.weight_grad``'s product per tap,
    where either runs faster than the columns' products; else None."""
    o, c, *kernel = w.shape
    if winograd_kernels.pays(g.dtype, kernel, (1, 1), dilation, 1, c, g.shape[3], gradient=True):
        return winograd_kernels.weight_grad(np.ascontiguousarray(x, g.dtype), np.ascontiguousarray(g), tuple(padding))
    if not conv_kernels.weight_grad_pays(g.dtype, g.shape[0], c, o, tuple(kernel), dilation, g.shape[2:]):
        return None
    x = np.ascontiguousarray(x, g.dtype)
    return conv_kernels.weight_grad(x, g, tuple(kernel), tuple(padding), tuple(dilation))


#: The most bytes of per-sample weight-gradient products summed at once in a chunk (where the columns are not made
#: as rows): a batched product runs faster than a product per sample, and the bound keeps its (samples, O, K)
#: temporary from growing with the chunk. The DCGAN's (16, 256, 16) columns by (16, 32, 16) gradients, before they
#: were made as rows: 87 us in batches of 4 (128 KiB), 78 all at once (512 KiB, the step's peak), 139 one by one.
_PRODUCTS_BYTES = 1 << 17

#: The most bytes of transposed columns (``im2row``) a chunk makes: their one product per chunk runs as fast on
#: small chunks, which keep the step's peak down. The DCGAN's (16, 16, 8, 8) by (32, 16, 4, 4) convolution's
#: backward in two chunks instead of one: its step's peak 0.83 MiB instead of 0.93, its time alike.
_ROWS_CHUNK_BYTES = 1 << 17

#: The most bytes of weight gradients the tasks of one convolution's backward sum apart (one each, added in
#: order at the end): a gradient larger than this runs as one task, its products large enough for OpenBLAS's
#: own threads.
_PARTIALS_BYTES = 1 << 21


def _conv2d_backward_chunks(g3: np.ndarray, x, x_shape: tuple, w: np.ndarray, stride: tuple, padding: tuple,
                            dilation: tuple, out_hw: tuple, need_x: bool, need_w: bool,
                            need_b: bool) -> tuple:  # fmt: skip
    """(grad of x, of weight, of bias) of a single-group convolution from its input ``x``, a chunk of samples at a
    time (``_chunk``; one chunk where the columns are small): the chunk's columns made again for the weight's
    products, then the chunk's column gradient, in the same buffer, summed back (col2im) while in cache. Spans of
    samples (``_spans``) are tasks on the CPU threads (``cpu_threads``), each with its own buffer, weight gradient
    and bias gradient (its samples' sum of ``g``, read while in cache).

    The weight's gradient is summed from per-sample products ``columns @ g.T`` (K, O), transposed once at the end:
    OpenBLAS runs these up to twice as fast as ``g @ columns.T`` (O, K) at 1 thread (the U-Net's (1024, 216) by
    (8, 1024) products of 4 samples: 0.30 ms against 0.65; the cnn's (288, 576) by (64, 576): 0.23 against 0.28).
    Where ``_product`` runs such a product through ``row_products``' kernel (one panel of 64 output channels, the
    cnn's: 194 against OpenBLAS's 226 us), each sample's is one kernel product (the cnn's step: 64.3-64.8 ms
    against 65.9-66.1 in alternating runs); otherwise a chunk's samples are one batched product, summed.
    Where a chunk holds several samples and its columns come from ``im2col``'s table walk (strided or short output
    rows), they are made transposed instead (``im2row``) and meet the output gradient, transposed too, in one
    product per chunk, with no (samples, K, O) temporary: the DCGAN's (16, 16, 8, 8) by (32, 16, 4, 4) stride-2
    convolution's weight gradient took 94 us instead of 126, and 160 KiB less at the step's peak.

    The input's gradient is ``col2im(w.T @ g)``, or, where ``_full_convolution`` says so, the convolution of ``g``
    by the flipped weight (``_flipped``): one product whose inner size is O * kh * kw rather than O."""
    n, o, length = g3.shape
    kernel = tuple(w.shape[2:])
    k = w.size // o
    w2 = w.reshape(o, k)
    kernels = _nn()
    identity = _identity_columns(x_shape, kernel, stride, padding, dilation)
    if need_w:
        x = np.ascontiguousarray(x, g3.dtype)
    gx = np.empty(tuple(x_shape), g3.dtype) if need_x else None
    m = _chunk(n, k * length * g3.itemsize)
    tasks = _span_count(n * k * length * g3.itemsize)
    if need_w:  # (each task sums its own weight gradient: their number bounds the memory those take)
        tasks = min(tasks, max(1, _PARTIALS_BYTES // (k * o * g3.itemsize)))
    spans = _spans(n, tasks)
    partials = [None] * len(spans)
    bias_partials = [None] * len(spans)
    per = max(1, _PRODUCTS_BYTES // max(1, o * k * g3.itemsize))
    as_rows = need_w and not identity and m > 1 and (stride[1] > 1 or out_hw[1] < kernels._ROW_WALK)
    if as_rows:  # (smaller chunks within the same spans)
        m = _chunk(n, k * length * g3.itemsize, _ROWS_CHUNK_BYTES)
    full = need_x and not identity and _full_convolution(x_shape, o, kernel, stride, padding, dilation)
    g_size = 0
    if full:  # (g's columns share the buffer: a chunk's weight products are done with x's when they are made)
        c, in_hw = x_shape[1], tuple(x_shape[2:])
        flipped = _flipped(w)
        pad_f = tuple(d * (kk - 1) - p for d, kk, p in zip(dilation, kernel, padding))
        g_size = m * o * kernel[0] * kernel[1] * in_hw[0] * in_hw[1]

    def task(t: int) -> None:  # (a span of samples on one thread: its own buffer and weight gradient)
        a, b = spans[t]
        if not identity:
            flat = np.empty(max(min(m, b - a) * k * length, g_size), g3.dtype)
            buffer = flat[: min(m, b - a) * k * length].reshape(-1, k, length)
            g_cols = flat[:g_size].reshape(m, -1, in_hw[0] * in_hw[1]) if full else None
        if need_w:
            gw_t = partials[t] = np.zeros((k, o), g3.dtype)
            part = np.empty((k, o), g3.dtype)
        if need_b:
            bias_partials[t] = g3[a:b].sum(axis=(0, 2))
        for i in range(a, b, m):
            j = min(i + m, b)
            if need_w:
                if as_rows:  # (one product for the chunk: its rows.T @ g as (samples * positions, O))
                    rows = buffer[: j - i].reshape(j - i, length, k)
                    kernels.im2row(x[i:j], *kernel, *stride, *padding, *dilation, *out_hw, rows)
                    g_rows = g3[i:j].transpose(0, 2, 1).reshape((j - i) * length, o)
                    np.matmul(rows.reshape(-1, k).T, g_rows, out=part)
                    gw_t += part
                else:
                    if identity:
                        cols = x[i:j].reshape(j - i, k, length)
                    else:
                        cols = buffer[: j - i]
                        kernels.im2col(x[i:j], *kernel, *stride, *padding, *dilation, *out_hw, cols)
                    pays = _blocked_product_pays(cols[0], g3[i].T)
                    if j - i == 1 or pays:  # (one product a sample)
                        product = row_products.matmul if pays else np.matmul
                        for s in range(j - i):
                            gw_t += product(cols[s], g3[i + s].T)
                    else:
                        for p in range(0, j - i, per):
                            q = min(p + per, j - i)
                            gw_t += np.matmul(cols[p:q], g3[i + p : i + q].transpose(0, 2, 1)).sum(axis=0)
            if need_x:
                if identity:
                    np.matmul(w2.T, g3[i:j], out=gx[i:j].reshape(j - i, k, length))
                elif full:
                    cols = g_cols[: j - i]
                    kernels.im2col(g3[i:j].reshape(j - i, o, *out_hw), *kernel, 1, 1, *pad_f, *dilation, *in_hw,
                                   cols)  # fmt: skip
                    np.matmul(flipped, cols, out=gx[i:j].reshape(j - i, c, in_hw[0] * in_hw[1]))
                else:
                    gcols = buffer[: j - i]
                    np.matmul(w2.T, g3[i:j], out=gcols)
                    kernels.col2im(gcols, *kernel, *stride, *padding, *dilation, *out_hw, gx[i:j])

    cpu_threads.run_tasks(task, len(spans))
    gw = gb = None
    if need_w:
        gw_t = partials[0]
        for partial in partials[1:]:  # (in the spans' order, whichever thread ran them)
            gw_t += partial
        gw = np.ascontiguousarray(gw_t.T).reshape(w.shape)
    if need_b:
        gb = bias_partials[0]
        for partial in bias_partials[1:]:
            gb += partial
    return gx, gw, gb


def _full_convolution(x_shape: tuple, o: int, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple) -> bool:
    """Whether a stride-1 convolution's input gradient is better made as the convolution of its output gradient
    by the flipped weight (padding ``dilation * (kernel - 1) - padding``, which must not be negative) than as
    ``col2im(w.T @ g)``: where the convolution has fewer output channels than input ones, whose small inner size O
    OpenBLAS multiplies slowly. Measured at 1 thread: the U-Net's (4, 24, 32, 32) -> 8 3x3 convolution 0.25 ms
    against 0.71, its (4, 48, 16, 16) -> 16 one 0.19 against 0.28; with more output channels than input ones it
    loses (the cnn's 32 -> 64: 3.1 ms against 2.0 for 8 samples)."""
    if tuple(stride) != (1, 1) or o >= x_shape[1]:
        return False
    return all(d * (k - 1) >= p for d, k, p in zip(dilation, kernel, padding))


def _flipped(w: np.ndarray) -> np.ndarray:
    """(O, C, kh, kw) as the (C, O * kh * kw) weight of the input gradient's convolution: each kernel turned by
    180 degrees, input and output channels exchanged."""
    o, c, kh, kw = w.shape
    return np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)).reshape(c, o * kh * kw)


# --- an LSTM layer's time step (``rnn_kernels``, imported on first use: it starts Numba) ---------------------


def lstm_cell(
    xi: np.ndarray, hh: np.ndarray, c: np.ndarray, acts: np.ndarray, h_out: np.ndarray, c_out: np.ndarray
) -> None:
    """One LSTM step from its gates' two parts ``xi`` and ``hh`` (``(n, 4*H)``, torch's gate order) and the cell
    state ``c`` (``(n, H)``), in one kernel: the gates' activations into ``acts``, the new cell and hidden states
    into ``c_out`` and ``h_out``. Every array C-contiguous, of one dtype, ``acts`` apart from the others."""
    rnn_kernels.run("lstm_cell", [xi, hh, c], [acts, h_out, c_out], _widen, _store)


def lstm_cell_backward(
    g_out: np.ndarray,
    g_rec: np.ndarray,
    g_c: np.ndarray,
    acts: np.ndarray,
    c_prev: np.ndarray,
    c_new: np.ndarray,
    d_gates: np.ndarray,
    g_c_prev: np.ndarray,
) -> None:
    """``lstm_cell``'s gradients in one kernel: from the hidden state's gradient ``g_out + g_rec`` and the cell
    state's ``g_c``, the gates' (pre-activation) gradient into ``d_gates`` and the previous cell state's into
    ``g_c_prev``. Every array C-contiguous, of one dtype, the outputs apart from the inputs."""
    rnn_kernels.run("lstm_cell_backward", [g_out, g_rec, g_c, acts, c_prev, c_new], [d_gates, g_c_prev], _widen,
                    _store)  # fmt: skip


def lstm_layer(
    xi: np.ndarray,
    h0: np.ndarray,
    c0: np.ndarray,
    w_hh: np.ndarray,
    reverse: bool,
    acts: np.ndarray,
    output: np.ndarray,
    cells: np.ndarray,
):
    """All the steps of an LSTM layer that runs its whole batch at every step, in one compiled loop: from ``xi``
    (``(T*B, 4*H)``, the steps' input projections with both biases), the initial states ``h0`` and ``c0``
    (``(B, H)``) and ``W_hh``, each step's ``h @ W_hh.T`` and ``lstm_cell``, writing ``acts``, ``output`` and
    ``cells`` as the steps would one by one, in the same bits. Returns the layer's backward, ``steps_back(g_out,
    g_h, g_c, w_hh, d_gates) -> (g_h0, g_c0)``: from the output's gradient (None: zeros) and the final states',
    back through every step in one compiled loop (each step's ``lstm_cell_backward`` and ``d(gates) @ W_hh``),
    the gates' gradient written into ``d_gates`` (``(T*B, 4*H)``), the initial states' gradients returned.

    Where ``row_products``' kernel runs the recurrent product (``_row_kernel_pays``); elsewhere it does nothing and
    returns None, and the caller runs the steps. With more threads the batch's rows are shared among them, each
    running every step for its rows (``rnn_kernels.run_layer``): batch 20, hidden 256, 35 steps, float32, two
    threads, 2.5 ms against the steps' 4.1 (a shared product per step, its result then in both cores' caches, and
    Python between the steps). Every array C-contiguous, of one dtype."""
    batch, size = c0.shape
    steps = xi.shape[0] // batch if batch else 0
    if not steps or not _row_kernel_pays(batch, size, xi.dtype):
        return None
    panels = row_products.pack(w_hh.T)
    fields = _layer_fields(steps, batch, size, reverse, backward=False)
    operands = {rnn_kernels.XI: xi, rnn_kernels.H0: h0, rnn_kernels.C0: c0, rnn_kernels.PANELS: panels}
    operands.update({rnn_kernels.ACTS: acts, rnn_kernels.OUTPUT: output, rnn_kernels.CELLS: cells})
    _run_layer(fields, operands, steps * batch * 4 * size * size)

    def steps_back(g_out: np.ndarray | None, g_h: np.ndarray, g_c: np.ndarray, w_hh: np.ndarray,
                   d_gates: np.ndarray) -> tuple:  # fmt: skip
        panels = row_products.pack(w_hh)
        g_h0, g_c0 = np.empty_like(c0), np.empty_like(c0)
        fields = _layer_fields(steps, batch, size, reverse, backward=True)
        operands = {rnn_kernels.G_OUT: g_out, rnn_kernels.G_H: g_h, rnn_kernels.G_C: g_c, rnn_kernels.ACTS: acts}
        operands.update({rnn_kernels.CELLS: cells, rnn_kernels.C0: c0, rnn_kernels.PANELS: panels})
        operands.update({rnn_kernels.D_GATES: d_gates, rnn_kernels.G_H0: g_h0, rnn_kernels.G_C0: g_c0})
        _run_layer(fields, operands, steps * batch * 4 * size * size)
        return g_h0, g_c0

    return steps_back


def _layer_fields(steps: int, batch: int, size: int, reverse: bool, backward: bool) -> np.ndarray:
    fields = np.zeros(rnn_kernels.SIZE, np.int64)
    fields[rnn_kernels.STEPS], fields[rnn_kernels.BATCH], fields[rnn_kernels.HIDDEN] = steps, batch, size
    fields[rnn_kernels.REVERSE], fields[rnn_kernels.BACKWARD] = reverse, backward
    return fields


def _run_layer(fields: np.ndarray, operands: dict, work: int) -> None:
    """Fill in the operands' addresses (kept alive here while the loop runs) and run it, shared among the free
    threads where ``work`` (multiply-adds) is worth a hand-off."""
    for index, a in operands.items():
        fields[index] = 0 if a is None else a.ctypes.data
    threads = cpu_threads.free_threads() if work >= row_products.SHARED_WORK else 1
    rnn_kernels.run_layer(fields, operands[rnn_kernels.PANELS].dtype, int(fields[rnn_kernels.BATCH]), threads)


def gru_cell(xi: np.ndarray, gh: np.ndarray, h: np.ndarray, acts: np.ndarray, h_out: np.ndarray) -> None:
    """One GRU step from ``xi = x @ W_ih.T + b_ih`` and ``gh = h @ W_hh.T + b_hh`` (``(n, 3*H)``, torch's gate
    order r, z, n) and the hidden state ``h``, in one kernel: ``(r, z, n, gh's n part)`` into ``acts``
    (``(n, 4*H)``), the new hidden state into ``h_out``. Every array C-contiguous, of one dtype, the outputs apart
    from the inputs."""
    rnn_kernels.run("gru_cell", [xi, gh, h], [acts, h_out], _widen, _store)


def gru_cell_backward(
    g_out: np.ndarray,
    g_rec: np.ndarray,
    acts: np.ndarray,
    h: np.ndarray,
    d_xi: np.ndarray,
    d_gh: np.ndarray,
    g_h: np.ndarray,
) -> None:
    """``gru_cell``'s gradients in one kernel: from the new hidden state's gradient ``g_out + g_rec``, those of
    ``xi`` and ``gh`` into ``d_xi`` and ``d_gh``, and the part of ``h``'s that does not pass through ``gh`` into
    ``g_h``. Every array C-contiguous, of one dtype, the outputs apart from the inputs."""
    rnn_kernels.run("gru_cell_backward", [g_out, g_rec, acts, h], [d_xi, d_gh, g_h], _widen, _store)


#: The backend interface: the same names as ``cuda.__all__`` (tests/test_backend.py checks it).
__all__ = [
    "complex_abs",
    "complex_angle",
    "complex_sgn",
    "conj",
    "imag_part",
    "make_complex",
    "real_part",
    "storage_block",
    "view_as_complex",
    "view_as_real",
    "accumulate_",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
    "all_within",
    "apply_kernel",
    "arg_reduce",
    "ascontiguous",
    "astype",
    "avg_pool2d",
    "avg_pool2d_backward",
    "batch_norm",
    "batch_norm_backward",
    "broadcast_to",
    "expand",
    "can_view",
    "check_index",
    "col2im",
    "concatenate",
    "constant",
    "conv2d",
    "coo_matmul",
    "conv2d_backward",
    "copy",
    "cross_entropy",
    "cross_entropy_backward",
    "data_ptr",
    "divide_by",
    "dropout_keep",
    "elementwise",
    "elementwise_grad",
    "elementwise_grads",
    "elementwise_plain",
    "empty",
    "foreach",
    "from_host",
    "full",
    "getitem",
    "gru_cell",
    "gru_cell_backward",
    "im2col",
    "index_add_zeros",
    "is_contiguous",
    "layer_norm",
    "layer_norm_backward",
    "residual_layer_norm",
    "linear",
    "linear_backward",
    "lstm_cell",
    "lstm_cell_backward",
    "lstm_layer",
    "loop_variant",
    "matmul",
    "max_pool2d",
    "max_pool2d_backward",
    "overlap",
    "put_along_axis_zeros",
    "reduce",
    "repeated_product",
    "reshape",
    "scaled_softmax",
    "causal_attention",
    "causal_attention_backward",
    "setitem",
    "softmax",
    "softmax_backward",
    "sort",
    "spread",
    "spread_grad",
    "sum_to_shape",
    "take_along_axis",
    "tile",
    "to_host",
    "topk",
    "where",
    "zeros",
    # the breadth of ops
    "cumulative",
    "diagonal",
    "einsum",
    "embed_diagonal",
    "flip",
    "gather",
    "index_add",
    "index_fill",
    "index_put",
    "index_select",
    "masked_scatter",
    "repeat_index",
    "roll",
    "scatter",
    "triangle",
    # views of the memory block, reductions into it
    "as_strided",
    "scatter_reduce",
    "storage_nbytes",
    "storage_offset",
    "unique",
]


def coo_matmul(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, dense: np.ndarray, out_rows: int):
    """The (out_rows, n) product of the sparse matrix with entries ``values`` at (``rows``, ``cols``) and the
    (k, n) ``dense`` matrix, accumulated in the result dtype."""
    codegen.start_numba()
    from . import sparse_kernels  # lazy: importing the kernels starts Numba

    dtype = np.result_type(values.dtype, dense.dtype)
    out = np.zeros((out_rows, dense.shape[1]), dtype=dtype)
    sparse_kernels.coo_matmul_add(rows, cols, values.astype(dtype, copy=False),
                                  np.ascontiguousarray(dense, dtype=dtype), out)  # fmt: skip
    return out
