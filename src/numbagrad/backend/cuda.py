"""The CUDA backend: the CPU backend's interface on ``numba.cuda`` device arrays. The only importer of numba.cuda.

Kernels are generated, never written per op: elementwise forward and backward kernels come from the same table
rows as the CPU ones (``codegen.scalar_source`` copied into ``cuda.jit(device=True)`` functions, called from a
grid-stride kernel written to the cache directory by ``codegen.load_module``). A few generic kernels are written
here once: a strided N-d copy (``copy``, ``astype``, broadcasting, writes through views), a shared-memory tree
reduction (``sum``/``prod``/``amax``/``amin`` with ``dim``), a tiled shared-memory ``matmul``, ``apply_kernel`` and
``foreach`` (optimizer steps).

Storage is a subclass of numba's device array (of the simulator's ``FakeCUDAArray`` under
``NUMBA_ENABLE_CUDASIM=1``) that adds the few numpy methods ops call on storage (``copy``, ``astype``,
``reshape``, ``transpose``, basic indexing as views). Under the simulator, every other numpy attribute raises
``AttributeError`` as it would on a real device array, so simulator tests catch accidental host fallbacks.

Host round trips (documented where they happen): advanced (integer / boolean tensor) indexing, and the ops in
``ops/`` that read ``_host()`` (sort, argmax, comparisons, var/std, norm, softmax).
"""

from __future__ import annotations

import numpy as np

from .._types import CUDA0
from ..scalar_math import ROWS, Row
from . import codegen, cpu

_cuda = None  # numba.cuda, imported on first use
_Array = None  # the storage class, built on first use


def _nb():
    global _cuda
    if _cuda is None:
        from numba import cuda

        _cuda = cuda
    return _cuda


def simulator() -> bool:
    """True under ``NUMBA_ENABLE_CUDASIM=1`` (kernels run in Python threads)."""
    from numba import config

    return bool(config.ENABLE_CUDASIM)


# --- availability -------------------------------------------------------------------------------------------
def unavailable_reason() -> str | None:
    """Why CUDA cannot be used here, or None when it can."""
    try:
        cuda = _nb()
    except Exception as err:  # numba without its cuda target (or numba-cuda not installed)
        return f"numba.cuda could not be imported ({type(err).__name__}: {err})"
    if simulator():
        return None
    try:
        if cuda.is_available():
            return None
        cuda.current_context()
    except Exception as err:
        return " ".join(str(err).split()).rstrip(":") or type(err).__name__
    return "numba.cuda.is_available() is False"


def available() -> bool:
    return unavailable_reason() is None


def require() -> None:
    """Raise a clear RuntimeError when cuda tensors cannot be created here."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(
            f"CUDA is not available: {reason}. numbagrad's cuda tensors need an NVIDIA GPU with its driver and "
            "numba-cuda (pip install numbagrad[cuda]); without a GPU, set NUMBA_ENABLE_CUDASIM=1 before importing "
            "numbagrad to run them on Numba's CUDA simulator."
        )


# --- storage ------------------------------------------------------------------------------------------------
def _dummy(a) -> np.ndarray:
    """A numpy array with ``a``'s shape and strides over one element: numpy computes views on it, nothing reads it."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, a.dtype), a.shape, a.strides)


def _view(a, op):
    """The device view that numpy's ``op`` (a basic index, transpose, broadcast, reshape) would give of ``a``."""
    if simulator():
        return _Array(op(a._ary))
    base = _dummy(a)
    v = op(base)
    offset = v.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    size = int(np.prod(v.shape, dtype=np.int64))
    gpu_data = a.gpu_data.view(offset) if size and a.size else None
    return _Array(v.shape, v.strides, a.dtype, stream=a.stream, gpu_data=gpu_data)


class _Flags(dict):
    """numpy-style ``flags.c_contiguous`` on a device array (numba's are a plain dict)."""

    __getattr__ = dict.__getitem__


class _StorageMethods:
    """The numpy methods ops call on storage, with device semantics."""

    def copy(self):
        return copy(self)

    def astype(self, dtype, copy: bool = True):
        return astype(self, dtype, copy)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _view(self, lambda a: a.transpose(axes or None))

    @property
    def T(self):  # noqa: N802
        return self.transpose()

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        src = self if is_contiguous(self) else copy(self)
        return _view(src, lambda a: a.reshape(shape))

    def ravel(self):
        return self.reshape(-1)

    @property
    def flags(self) -> _Flags:
        c, f = is_contiguous(self), bool(self.is_f_contiguous())
        return _Flags(c_contiguous=c, f_contiguous=f, C_CONTIGUOUS=c, F_CONTIGUOUS=f)

    def copy_to_device(self, ary, stream=0) -> None:
        """Write a host or device array into this (possibly strided) array, casting and broadcasting."""
        assign(self, ary)

    def __getitem__(self, index):
        if _is_advanced(index):  # host round trip: numpy's advanced indexing, copied back to the device
            return to_device(np.ascontiguousarray(self.copy_to_host()[index]))
        index = index if isinstance(index, tuple) else (index,)
        if not any(i is Ellipsis for i in index):
            index = index + (Ellipsis,)  # a full integer index gives a 0-d view, not a scalar
        return _view(self, lambda a: a[index])

    def __setitem__(self, index, value) -> None:
        setitem(self, index, value)


def _is_advanced(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (np.ndarray, list)) for i in items)


_DEVICE_ATTRIBUTES = frozenset({"dtype", "size", "ndim", "strides", "nbytes", "itemsize", "squeeze", "view"})


def _storage_class():
    """The storage class: numba's DeviceNDArray (or the simulator's FakeCUDAArray) plus ``_StorageMethods``."""
    global _Array
    if _Array is not None:
        return _Array
    cuda = _nb()
    if simulator():
        from numba.cuda.simulator import kernel as _sim_kernel
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        class SimDeviceArray(_StorageMethods, FakeCUDAArray):
            """Simulator storage that only answers what a real device array answers."""

            @property
            def shape(self) -> tuple:  # a plain tuple, as on a real device array (not FakeShape)
                return self._ary.shape

            def __getitem__(self, index):
                if _sim_kernel._kernel_context is not None:  # element access inside a simulated kernel
                    return self._ary[index]
                return _StorageMethods.__getitem__(self, index)

            def __setitem__(self, index, value) -> None:
                if _sim_kernel._kernel_context is not None:
                    self._ary[index] = value
                else:
                    setitem(self, index, value)

            def __getattr__(self, name):
                if name in _DEVICE_ATTRIBUTES:
                    return getattr(self._ary, name)
                raise AttributeError(f"'DeviceNDArray' object has no attribute '{name}'")

            @property
            def __cuda_array_interface__(self) -> dict:
                """The host pointer, standing in for a device pointer: lets the simulator test zero-copy interop."""
                iface = self._ary.__array_interface__
                return {
                    "shape": self._ary.shape,
                    "strides": iface["strides"],
                    "data": (iface["data"][0], False),
                    "typestr": self._ary.dtype.str,
                    "stream": None,
                    "version": 3,
                    "_owner": self,
                }

        _Array = SimDeviceArray
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        class CudaDeviceArray(_StorageMethods, DeviceNDArray):
            pass

        _Array = CudaDeviceArray
        del cuda
    return _Array


def _wrap(a):
    """Our storage class over the same device memory as numba's array ``a``."""
    cls = _storage_class()
    if isinstance(a, cls):
        return a
    if simulator():
        return cls(a._ary)
    return cls(a.shape, a.strides, a.dtype, stream=a.stream, gpu_data=a.gpu_data if a.size else None)


def is_device_array(a) -> bool:
    return _Array is not None and isinstance(a, _Array)


def to_device(a: np.ndarray):
    """Copy a numpy array to the device (C-contiguous)."""
    require()
    return _wrap(_nb().to_device(np.asarray(a, order="C")))  # not ascontiguousarray: it makes 0-d arrays 1-d


def empty(shape, dtype):
    require()
    return _wrap(_nb().device_array(tuple(shape), np.dtype(dtype)))


def zeros(shape, dtype):
    """Zeroed device storage (uploaded once: used for optimizer state, not in hot loops)."""
    return to_device(np.zeros(shape, dtype))


def as_device_array(obj):
    """Zero-copy view of any object exposing ``__cuda_array_interface__`` (CuPy, PyTorch, numbagrad)."""
    require()
    if simulator():
        iface = obj.__cuda_array_interface__

        class _Host:  # the simulator's "device pointer" is a host pointer
            __array_interface__ = {k: v for k, v in iface.items() if k != "_owner" and k != "stream"}
            owner = obj

        return _storage_class()(np.asarray(_Host()))
    return _wrap(_nb().as_cuda_array(obj))


def is_contiguous(a) -> bool:
    return bool(a.is_c_contiguous())


def synchronize() -> None:
    _nb().synchronize()


# --- launching ----------------------------------------------------------------------------------------------
def _grid(n: int) -> tuple[int, int]:
    """(blocks, threads) for a grid-stride loop over ``n`` elements. The simulator runs one Python thread per
    GPU thread, so it gets one small block."""
    if simulator():
        return 1, max(1, min(n, 16))
    threads = 256
    return max(1, min((n + threads - 1) // threads, 1 << 20)), threads


def _flat(a):
    """A contiguous array's 1-D view."""
    return _view(a, lambda x: x.reshape(-1))


def _materialize(value, shape, dtype):
    """``value`` broadcast to ``shape`` as a new C-contiguous array of ``dtype``."""
    out = empty(shape, dtype)
    assign(out, value)
    return out


# --- generated kernels --------------------------------------------------------------------------------------
_HEADER = "import math\nfrom numba import cuda\n\n"
_kernels: dict[tuple, object] = {}


def _device_functions(source: str) -> str:
    """Mark every top-level ``def`` in ``source`` as a CUDA device function."""
    return ("\n" + source).replace("\ndef ", "\n@cuda.jit(device=True, cache=True)\ndef ")


def _element(arg: str, kind: str) -> str:
    return {"a": f"{arg}[i]", "o": f"{arg}[0]", "s": arg}[kind]


def _grid_stride(body: str, n: str = "res.shape[0]") -> str:
    return (
        "    i = cuda.grid(1)\n"
        "    step = cuda.gridsize(1)\n"
        f"    n = {n}\n"
        "    while i < n:\n"
        f"        {body}\n"
        "        i += step\n"
    )


def _map_kernel_text(fn: str, operands: list[str], pattern: str, params: list[str], cache: bool) -> str:
    """A grid-stride kernel ``res[i] = fn(operands..., params...)``; ``pattern`` says per operand whether it is
    an array indexed per element (``a``), a one-element array (``o``) or a scalar (``s``)."""
    args = [_element(a, k) for a, k in zip(operands, pattern)] + params
    return (
        f"@cuda.jit(cache={cache})\n"
        + f"def kernel(res, {', '.join(operands + params)}):\n"
        + _grid_stride(f"res[i] = {fn}({', '.join(args)})")
    )


def map_kernel_source(functions: str, fn: str, operands: list[str], pattern: str, params: list[str]) -> str:
    """A whole generated module: ``functions`` as device functions and one map kernel calling ``fn``."""
    return _HEADER + _device_functions(functions) + "\n\n" + _map_kernel_text(fn, operands, pattern, params, True)


def _exec_kernel(source: str, **names):
    """Compile generated kernel text whose callees are Python objects (lambdas, closures): per process, uncached."""
    scope = {"cuda": _nb(), **{k: _nb().jit(device=True)(v) for k, v in names.items()}}
    exec(source, scope)  # noqa: S102 - our own generated text
    return _nb().jit(scope["kernel"])


def row_kernel(row: Row, which: str, pattern: str):
    """The CUDA kernel for one table row: ``which`` is ``"forward"`` or ``"grad<i>"`` (as on the CPU)."""
    key = ("row", row.name, which, pattern)
    kernel = _kernels.get(key)
    if kernel is None:
        function = row.forward if which == "forward" else row.grads[int(which[4:])]
        operands = [f"x{i}" for i in range(row.arity)]
        if which != "forward":
            operands = ["g", "o", *operands]
        params = [f"p{i}" for i in range(len(row.params))]
        if all(codegen.is_portable(f) for f in (row.forward, *row.grads)):
            source = map_kernel_source(codegen.scalar_source(row), function.__name__, operands, pattern, params)
            kernel = codegen.load_module(f"cuda_{row.name}_{which}_{pattern}", source).kernel
        else:  # a user row made of lambdas or closures
            kernel = _exec_kernel(_map_kernel_text("fn", operands, pattern, params, False), fn=function)
        _kernels[key] = kernel
    return kernel


def _operand(value, shape, size: int, dtype: np.dtype):
    """One operand for a map kernel: (flat device array or scalar, 'a', 'o' or 's')."""
    if isinstance(value, np.ndarray) and value.size == 1:  # a 0-dim cpu tensor may join a cuda op
        value = value.reshape(-1)[0]
    if not is_device_array(value):
        return dtype.type(value), "s"
    if value.size == 1 and size != 1:
        if value.dtype != dtype or not is_contiguous(value):
            value = _materialize(value, value.shape, dtype)
        return _flat(value), "o"
    if value.dtype != dtype or tuple(value.shape) != tuple(shape) or not is_contiguous(value):
        value = _materialize(value, shape, dtype)
    return _flat(value), "a"


def _run_map(kernel_for, operands: list, params: tuple, dtype: np.dtype, shape, out=None):
    """Run a generated map kernel over ``operands`` broadcast to ``shape``; returns ``out``."""
    if out is None:
        out = empty(shape, dtype)
    size = out.size
    if size == 0:
        return out
    flat, pattern = [], ""
    for value in operands:
        v, kind = _operand(value, shape, size, dtype)
        flat.append(v)
        pattern += kind
    kernel = kernel_for(pattern)
    target = out if is_contiguous(out) else empty(out.shape, dtype)
    blocks, threads = _grid(size)
    kernel[blocks, threads](_flat(target), *flat, *(dtype.type(p) for p in params))
    if target is not out:
        assign(out, target)
    return out


def _shape_of(values) -> tuple:
    shapes = [tuple(v.shape) for v in values if is_device_array(v) or isinstance(v, np.ndarray)]
    return np.broadcast_shapes(*shapes) if shapes else ()


def elementwise(row: Row, inputs: list, params: tuple, dtype: np.dtype, out=None, *, shape=None, out_dtype=None):
    """Forward of one row: ``out = row(*inputs, *params)`` with broadcasting, in ``dtype`` (as ``cpu.elementwise``)."""
    dtype = np.dtype(dtype)
    if out is None and out_dtype is not None:
        out = empty(_shape_of(inputs) if shape is None else shape, out_dtype)
    shape = tuple(out.shape) if out is not None else (_shape_of(inputs) if shape is None else tuple(shape))
    if dtype == _HALF:
        return _in_single(lambda p: row_kernel(row, "forward", p), inputs, params, shape, out)
    return _run_map(lambda p: row_kernel(row, "forward", p), inputs, params, dtype, shape, out)


def elementwise_grad(row: Row, i: int, g, out, inputs: list, params: tuple, dtype: np.dtype, *, result=None):
    """Gradient of one row with respect to input ``i``, in ``g``'s shape (as ``cpu.elementwise_grad``)."""
    dtype = np.dtype(dtype)
    if dtype == _HALF:
        return _in_single(lambda p: row_kernel(row, f"grad{i}", p), [g, out, *inputs], params, tuple(g.shape), None)
    return _run_map(lambda p: row_kernel(row, f"grad{i}", p), [g, out, *inputs], params, dtype, tuple(g.shape), result)


_HALF = np.dtype(np.float16)


def _in_single(kernel_for, operands: list, params: tuple, shape: tuple, out):
    """A float16 op computed in float32 and stored as float16 (as ``cpu.elementwise`` does; torch's CPU does the
    same), so no kernel needs half-precision arithmetic."""
    if out is not None and out.dtype != _HALF:  # a comparison: bools straight from the float32 kernel
        return _run_map(kernel_for, operands, params, np.dtype(np.float32), shape, out)
    tmp = _run_map(kernel_for, operands, params, np.dtype(np.float32), shape)
    if out is None:
        return astype(tmp, _HALF)
    assign(out, tmp)
    return out


_WHERE = "def where_(c, a, b):\n    return a if c else b\n"


def where(cond, a, b, dtype):
    """``where(cond, a, b)`` with broadcasting; ``a`` and ``b`` may be scalars."""
    dtype = np.dtype(dtype)
    shape = _shape_of([cond, a, b])
    cond = cond if tuple(cond.shape) == shape and cond.dtype == dtype else _materialize(cond, shape, dtype)

    def kernel_for(pattern):
        key = ("where", pattern)
        if key not in _kernels:
            source = map_kernel_source(_WHERE, "where_", ["c", "a", "b"], pattern, [])
            _kernels[key] = codegen.load_module(f"cuda_where_{pattern}", source).kernel
        return _kernels[key]

    return _run_map(kernel_for, [cond, a, b], (), dtype, shape)


# --- strided copies: copy, astype, broadcast, writes through views -----------------------------------------
def _assign_kernel(ndim: int, scalar: bool):
    key = ("assign", ndim, scalar)
    kernel = _kernels.get(key)
    if kernel is None:
        lines = ["r = i"]
        for d in range(ndim - 1, 0, -1):
            lines += [f"i{d} = r % dst.shape[{d}]", f"r = r // dst.shape[{d}]"]
        lines.append("i0 = r")
        index = ", ".join(f"i{d}" for d in range(ndim))
        lines.append(f"dst[{index}] = {'src' if scalar else f'src[{index}]'}")
        body = "\n        ".join(lines)
        source = _HEADER + "@cuda.jit(cache=True)\ndef kernel(dst, src):\n" + _grid_stride(body, "dst.size")
        kernel = codegen.load_module(f"cuda_assign_{ndim}{'s' if scalar else 'a'}", source).kernel
        _kernels[key] = kernel
    return kernel


def assign(dst, src) -> None:
    """``dst[...] = src``: ``dst`` any (strided) device array; ``src`` a scalar or an array broadcastable to it,
    cast to ``dst``'s dtype."""
    if dst.size == 0:
        return
    if isinstance(src, np.ndarray):
        src = src.reshape(-1)[0] if src.size == 1 else _wrap(_nb().to_device(np.asarray(src, order="C")))
    if dst.ndim == 0:
        dst = _view(dst, lambda a: a.reshape(1))
    scalar = not is_device_array(src)
    if scalar:
        src = dst.dtype.type(src)
    else:
        if tuple(src.shape) != tuple(dst.shape):
            src = _view(src, lambda a: np.broadcast_to(a, dst.shape))
    blocks, threads = _grid(dst.size)
    _assign_kernel(dst.ndim, scalar)[blocks, threads](dst, src)


def copy(a):
    """A fresh C-contiguous copy (what a leaf's first ``.grad`` holds)."""
    return _materialize(a, a.shape, a.dtype)


def astype(a, dtype, copy_: bool = True):
    dtype = np.dtype(dtype)
    if dtype == a.dtype and not copy_:
        return a
    return _materialize(a, a.shape, dtype)


def broadcast_to(a, shape):
    """A stride-0 view, as ``np.broadcast_to``."""
    return _view(a, lambda x: np.broadcast_to(x, tuple(shape)))


def concatenate(arrays: list, dim: int, dtype):
    shape = list(arrays[0].shape)
    shape[dim] = sum(a.shape[dim] for a in arrays)
    out = empty(shape, dtype)
    start = 0
    for a in arrays:
        index = (slice(None),) * dim + (slice(start, start + a.shape[dim]),)
        assign(out[index], a)
        start += a.shape[dim]
    return out


def setitem(dst, index, value) -> None:
    """``dst[index] = value``. Basic indices write through a device view; advanced (integer / boolean array)
    indices round-trip through the host."""
    if is_device_array(value):
        value = copy(value)  # the value may overlap the destination
    if _is_advanced(index):
        host = dst.copy_to_host()
        host[index] = value.copy_to_host() if is_device_array(value) else value
        assign(dst, to_device(host))
        return
    assign(dst[index], value)


# --- reductions ---------------------------------------------------------------------------------------------
_COMBINE = {
    "sum": "a + b",
    "prod": "a * b",
    "max": "a if a >= b or a != a else b",
    "min": "a if a <= b or a != a else b",
}


def _init(op: str, dtype: np.dtype) -> str:
    if op in ("sum", "prod"):
        return "0" if op == "sum" else "1"
    if dtype.kind == "f":
        return "-math.inf" if op == "max" else "math.inf"
    if dtype.kind == "b":
        return "False" if op == "max" else "True"
    info = np.iinfo(dtype)
    return str(info.min if op == "max" else info.max)


def _nbtype(dtype: np.dtype) -> str:
    return "types.boolean" if dtype.kind == "b" else f"types.{dtype.name}"


def _reduce_kernel(op: str, dtype: np.dtype):
    """Shared-memory tree reduction of each row of a (M, K) array into (M, parts) partial results."""
    key = ("reduce", op, dtype.str)
    kernel = _kernels.get(key)
    if kernel is None:
        tpb = 8 if simulator() else 256
        source = (
            _HEADER
            + "from numba import types\n\n"
            + f"@cuda.jit(device=True, cache=True)\ndef combine(a, b):\n    return {_COMBINE[op]}\n\n\n"
            + "@cuda.jit(cache=True)\n"
            + "def kernel(src, out):\n"
            + f"    buf = cuda.shared.array({tpb}, {_nbtype(dtype)})\n"
            + "    tid = cuda.threadIdx.x\n"
            + "    row = cuda.blockIdx.y\n"
            + "    while row < src.shape[0]:\n"
            + f"        acc = {_nbtype(dtype)}({_init(op, dtype)})\n"
            + f"        k = cuda.blockIdx.x * {tpb} + tid\n"
            + "        while k < src.shape[1]:\n"
            + "            acc = combine(acc, src[row, k])\n"
            + f"            k += {tpb} * cuda.gridDim.x\n"
            + "        buf[tid] = acc\n"
            + "        cuda.syncthreads()\n"
            + f"        s = {tpb // 2}\n"
            + "        while s > 0:\n"
            + "            if tid < s:\n"
            + "                buf[tid] = combine(buf[tid], buf[tid + s])\n"
            + "            cuda.syncthreads()\n"
            + "            s //= 2\n"
            + "        if tid == 0:\n"
            + "            out[row, cuda.blockIdx.x] = buf[0]\n"
            + "        cuda.syncthreads()\n"
            + "        row += cuda.gridDim.y\n"
        )
        kernel = codegen.load_module(f"cuda_reduce_{op}_{dtype.name}", source).kernel
        _kernels[key] = (kernel, tpb)
        kernel = _kernels[key]
    return kernel


def _reduce_rows(src, op: str):
    """Reduce each row of a C-contiguous (M, K) array: (M,)."""
    m, k = src.shape
    kernel, tpb = _reduce_kernel(op, src.dtype)
    parts = 1 if k <= tpb * 16 or simulator() else min((k + tpb * 16 - 1) // (tpb * 16), 1024)
    out = empty((m, parts), src.dtype)
    kernel[(parts, min(m, 1 if simulator() else 65535)), tpb](src, out)
    return out.reshape(m) if parts == 1 else _reduce_rows(out, op)


def reduce(a, op: str, axes: tuple | None, keepdim: bool, dtype=None):
    """``sum``/``prod``/``max``/``min`` (and ``any``/``all``) over ``axes`` (all when None) on the device, in
    ``dtype``."""
    if op == "any" or op == "all":  # on bools, any is max and all is min (issue 9: any/all run on cuda)
        a, op, dtype = (a if a.dtype == np.bool_ else astype(a, np.bool_)), ("max" if op == "any" else "min"), None
    dtype = np.dtype(dtype or a.dtype)
    ndim = a.ndim
    axes = tuple(range(ndim)) if axes is None else tuple(axes)
    kept = [d for d in range(ndim) if d not in axes]
    out_shape = tuple(a.shape[d] for d in kept)
    m = int(np.prod(out_shape, dtype=np.int64))
    k = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    if k == 0 or m == 0:
        result = empty(out_shape, dtype)
        if m:
            assign(result, 0 if op == "sum" else 1)
    else:
        moved = _view(a, lambda x: x.transpose(kept + list(axes)))
        rows = _materialize(moved, moved.shape, dtype).reshape(m, k)
        result = _reduce_rows(rows, op).reshape(out_shape)
    if keepdim:
        result = result.reshape(tuple(1 if d in axes else s for d, s in enumerate(a.shape)))
    return result


def sum_to_shape(a, shape: tuple):
    """Sum a broadcast gradient back down to ``shape`` on the device (leading dims, then size-1 dims)."""
    shape = tuple(shape)
    if tuple(a.shape) == shape:
        return a
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and a.shape[i + lead] != 1)
    return reduce(a, "sum", axes, True).reshape(shape) if axes else a.reshape(shape)


def accumulate_(dst, src) -> None:
    """``dst += src`` in place with the ``add`` row's kernel (the leaf ``.grad`` accumulation)."""
    elementwise(ROWS["add"], [dst, src], (), dst.dtype, out=dst)


# --- matmul -------------------------------------------------------------------------------------------------
def _matmul_kernel(dtype: np.dtype):
    """Tiled shared-memory (B, M, K) @ (B, K, N) -> (B, M, N); one block computes one TILE x TILE output tile."""
    key = ("matmul", dtype.str)
    if key not in _kernels:
        tile = 4 if simulator() else 16
        dt = _nbtype(dtype)
        source = (
            _HEADER
            + "from numba import types\n\n"
            + "@cuda.jit(cache=True)\n"
            + "def kernel(a, b, c):\n"
            + f"    sa = cuda.shared.array(({tile}, {tile}), {dt})\n"
            + f"    sb = cuda.shared.array(({tile}, {tile}), {dt})\n"
            + "    tx = cuda.threadIdx.x\n"
            + "    ty = cuda.threadIdx.y\n"
            + f"    col = cuda.blockIdx.x * {tile} + tx\n"
            + f"    row = cuda.blockIdx.y * {tile} + ty\n"
            + "    z = cuda.blockIdx.z\n"
            + "    m = a.shape[1]\n"
            + "    kk = a.shape[2]\n"
            + "    n = b.shape[2]\n"
            + f"    acc = {dt}(0)\n"
            + f"    for t in range(({'kk'} + {tile - 1}) // {tile}):\n"
            + f"        k = t * {tile} + tx\n"
            + f"        sa[ty, tx] = a[z, row, k] if row < m and k < kk else {dt}(0)\n"
            + f"        k = t * {tile} + ty\n"
            + f"        sb[ty, tx] = b[z, k, col] if k < kk and col < n else {dt}(0)\n"
            + "        cuda.syncthreads()\n"
            + f"        for j in range({tile}):\n"
            + "            acc += sa[ty, j] * sb[j, tx]\n"
            + "        cuda.syncthreads()\n"
            + "    if row < m and col < n:\n"
            + "        c[z, row, col] = acc\n"
        )
        _kernels[key] = (codegen.load_module(f"cuda_matmul_{dtype.name}", source).kernel, tile)
    return _kernels[key]


def matmul(a, b):
    """``np.matmul`` semantics (1-D promotion, broadcast batch dims) with a tiled shared-memory kernel."""
    dtype = np.result_type(a.dtype, b.dtype)
    a2 = _view(a, lambda x: x.reshape(1, -1)) if a.ndim == 1 else a
    b2 = _view(b, lambda x: x.reshape(-1, 1)) if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    (m, k), n = a2.shape[-2:], b2.shape[-1]
    nb = int(np.prod(batch, dtype=np.int64))
    a3 = _materialize(a2, batch + (m, k), dtype).reshape(nb, m, k)
    b3 = _materialize(b2, batch + (k, n), dtype).reshape(nb, k, n)
    c = empty((nb, m, n), dtype)
    if c.size:
        kernel, tile = _matmul_kernel(dtype)
        kernel[((n + tile - 1) // tile, (m + tile - 1) // tile, nb), (tile, tile)](a3, b3, c)
    shape = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())
    return c.reshape(shape)


# --- apply_ and foreach: user functions compiled as device functions ----------------------------------------
def apply_kernel(fn, dtype: np.dtype):
    """A function running ``flat[i] = fn(flat[i])`` over a flat contiguous device array of ``dtype``, ``fn``
    compiled as a CUDA device function now, so a callable numba.cuda cannot compile raises here (the simulator
    runs kernels as Python and compiles nothing). ``ops.apply`` memoizes it and owns the Python fallback."""
    kernel = _exec_kernel("def kernel(res):\n" + _grid_stride("res[i] = fn(res[i])"), fn=fn)
    if not simulator():
        from numba import from_dtype, types

        kernel.compile((types.Array(from_dtype(dtype), 1, "C"),))

    def run(flat) -> None:
        blocks, threads = _grid(flat.size)
        kernel[blocks, threads](flat)

    return run


_foreach_kernels: dict[tuple, object] = {}


def foreach(step, arrays: list, scalars: tuple = ()) -> None:
    """Run ``step(i, *arrays, *scalars)`` for every ``i`` of the (equal-sized, flat, contiguous) device arrays:
    the fused in-place update an optimizer step needs (``step`` becomes a CUDA device function)."""
    n = arrays[0].size
    if n == 0:
        return
    key = (getattr(step, "__func__", step), len(arrays), len(scalars))
    kernel = _foreach_kernels.get(key)
    if kernel is None:
        names = [f"a{j}" for j in range(len(arrays))] + [f"s{j}" for j in range(len(scalars))]
        body = _grid_stride(f"update(i, {', '.join(names)})", "a0.shape[0]")
        kernel = _exec_kernel(f"def kernel({', '.join(names)}):\n" + body, update=step)
        _foreach_kernels[key] = kernel
    blocks, threads = _grid(n)
    kernel[blocks, threads](*[_flat(a) for a in arrays], *scalars)


__all__ = [
    "accumulate_",
    "apply_kernel",
    "as_device_array",
    "assign",
    "available",
    "copy",
    "zeros",
    "elementwise",
    "elementwise_grad",
    "foreach",
    "matmul",
    "reduce",
    "require",
    "sum_to_shape",
    "to_device",
    "where",
]


# --- lead: the rest of the interface, until the backend branch lands (host round trips) -----------------------
def _host_op(name):
    fn = getattr(cpu, name)

    def via_host(*args, **kwargs):
        args = [a.copy_to_host() if is_device_array(a) else a for a in args]
        out = fn(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(to_device(o) if isinstance(o, np.ndarray) else o for o in out)
        return to_device(out) if isinstance(out, np.ndarray) else out

    via_host.__name__ = name
    return via_host


DEVICE = CUDA0
from_host = to_device


def to_host(a) -> np.ndarray:
    return a.copy_to_host()


def data_ptr(a) -> int:
    return a.__cuda_array_interface__["data"][0]


def full(shape, value, dtype):
    out = empty(shape, dtype)
    assign(out, value)
    return out


def reshape(a, shape):
    return a.reshape(shape)


def can_view(a, shape) -> bool:
    return is_contiguous(a)


def ascontiguous(a):
    return a if is_contiguous(a) else copy(a)


def getitem(a, index):
    return a[index]


def overlap(a, b) -> str:
    pa, pb = data_ptr(a), data_ptr(b)
    end_a, end_b = pa + a.nbytes, pb + b.nbytes
    if end_a <= pb or end_b <= pa:
        return "none"
    if pa == pb and a.strides == b.strides and tuple(a.shape) == tuple(b.shape):
        return "full"
    return "partial"


#: Backend functions the cuda backend runs by copying to the host, calling the cpu backend, and copying back.
HOST_ROUND_TRIPS = ("arg_reduce", "sort", "index_add_zeros", "take_along_axis", "put_along_axis_zeros", "tile")
# op breadth (issue 9)
HOST_ROUND_TRIPS += ("flip", "roll", "cumulative", "einsum", "triangle", "embed_diagonal", "gather", "scatter")
HOST_ROUND_TRIPS += ("index_select", "index_add", "index_fill", "index_put", "masked_scatter", "repeat_index", "unique")
for _name in HOST_ROUND_TRIPS:
    globals()[_name] = _host_op(_name)


def diagonal(a, offset: int, dim1: int, dim2: int):
    """A view of the diagonal, as ``cpu.diagonal`` (issue 9)."""
    from . import cpu

    return _view(a, lambda x: cpu.diagonal(x, offset, dim1, dim2))
