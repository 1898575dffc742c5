"""The CUDA backend: the CPU backend's interface (``__all__``, the same names as ``cpu``) on ``numba.cuda`` device
arrays. The only importer of numba.cuda.

Kernels are generated, never written per op: every per-element loop (table-row forward and gradients, ``where``,
strided copies, gradient accumulation, ``foreach`` optimizer updates, ``apply_``/``map_``) is the grid-stride loop
``codegen.loop_source`` writes from the same scalar functions the CPU loops use, in a module in the cache
directory. Hand-written kernels are few and named: the shared-memory tree reduction and the tiled ``matmul``.

Storage is a subclass of numba's device array (of the simulator's ``FakeCUDAArray`` under
``NUMBA_ENABLE_CUDASIM=1``) that adds the few numpy methods ops call on storage (``copy``, ``astype``,
``reshape``, ``transpose``, basic indexing as views). Under the simulator, every other numpy attribute raises
``AttributeError`` as it would on a real device array, so simulator tests catch accidental host fallbacks.

Host round trips (each copies its inputs to the host, runs ``cpu``'s numpy function and uploads the result):
``sort``, ``arg_reduce``, ``getitem``/``setitem`` with an advanced (integer or boolean array) index,
``index_add_zeros``, ``take_along_axis`` and ``put_along_axis_zeros``; and the Python fallback of ``apply_``/``map_``
for callables Numba cannot compile.
"""

from __future__ import annotations

import functools

import numpy as np

from .._types import CUDA0
from ..scalar_math import ROWS, Row, select
from . import codegen, cpu

DEVICE = CUDA0
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
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return astype(self, dtype)

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
        return getitem(self, index)

    def __setitem__(self, index, value) -> None:
        setitem(self, index, value)


def _is_advanced(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (np.ndarray, list)) or is_device_array(i) for i in items)


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


def _storable(dtype: np.dtype) -> None:
    """bfloat16 (ml_dtypes' numpy kind "V") has no cuda kernels here: a clear error instead of Numba's typing one."""
    if dtype.kind == "V":
        raise RuntimeError(
            "numbagrad's cuda tensors cannot hold bfloat16 yet (it is CPU-only): keep the tensor on the cpu or "
            "convert it first, e.g. tensor.float().cuda()"
        )


def to_device(a: np.ndarray):
    """Copy a numpy array to the device (C-contiguous)."""
    require()
    _storable(np.asarray(a).dtype)
    return _wrap(_nb().to_device(np.asarray(a, order="C")))  # not ascontiguousarray: it makes 0-d arrays 1-d


def empty(shape, dtype):
    require()
    _storable(np.dtype(dtype))
    return _wrap(_nb().device_array(tuple(shape), np.dtype(dtype)))


def full(shape, value, dtype):
    """Device storage of ``shape`` filled with ``value`` (by a kernel: nothing is uploaded)."""
    out = empty(shape, dtype)
    assign(out, value)
    return out


def zeros(shape, dtype):
    return full(shape, 0, dtype)


def from_host(a):
    """Copy a numpy array (or scalar) to the device, C-contiguous."""
    return to_device(a)


def to_host(a) -> np.ndarray:
    """A C-contiguous numpy copy of device storage."""
    return ascontiguous(a).copy_to_host()


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


# --- generated kernels (all from ``codegen``) ---------------------------------------------------------------
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
    target = out if is_contiguous(out) and out.dtype == dtype else empty(out.shape, dtype)
    blocks, threads = _grid(size)
    kernel[blocks, threads](_flat(target), *flat, *(dtype.type(p) for p in params))
    if target is not out:
        assign(out, target)
    return out


def _shape_of(values) -> tuple:
    shapes = [tuple(v.shape) for v in values if is_device_array(v) or isinstance(v, np.ndarray)]
    return np.broadcast_shapes(*shapes) if shapes else ()


def elementwise(row: Row, inputs: list, params: tuple, dtype: np.dtype, out=None, *, shape=None, out_dtype=None):
    """Forward of one row: ``row(*inputs, *params)`` computed in ``dtype`` with broadcasting, into ``out`` or a new
    array of ``shape`` and ``out_dtype`` (as ``cpu.elementwise``)."""
    dtype = np.dtype(dtype)
    if out is None:
        shape = _shape_of(inputs) if shape is None else tuple(shape)
        if out_dtype is not None:
            out = empty(shape, out_dtype)
    else:
        shape = tuple(out.shape)
    if dtype == _HALF:
        return _in_single(lambda p: codegen.cuda_kernel(row, "forward", p), inputs, params, shape, out)
    return _run_map(lambda p: codegen.cuda_kernel(row, "forward", p), inputs, params, dtype, shape, out)


def elementwise_plain(row: Row, operands: list, dtype: np.dtype, shape: tuple, out_dtype=None, pattern=None):
    """``elementwise`` for contiguous operands of one shape and dtype (as ``cpu.elementwise_plain``; the
    launch works out its own ``pattern``)."""
    return elementwise(row, operands, (), dtype, shape=shape, out_dtype=out_dtype)


def elementwise_grad(row: Row, i: int, g, out, inputs: list, params: tuple, dtype: np.dtype, *, result=None):
    """Gradient of one row with respect to input ``i``, in ``g``'s shape (as ``cpu.elementwise_grad``);
    ``result``, when given, is a buffer of ``g``'s shape and ``dtype`` to write into (it may be ``g``)."""
    dtype = np.dtype(dtype)
    operands = [g, out, *inputs]
    if dtype == _HALF:
        return _in_single(lambda p: codegen.cuda_kernel(row, f"grad{i}", p), operands, params, tuple(g.shape), None)
    return _run_map(lambda p: codegen.cuda_kernel(row, f"grad{i}", p), operands, params, dtype, tuple(g.shape), result)


def elementwise_grads(row: Row, which: tuple, g, out, inputs: list, params: tuple, dtype: np.dtype,
                      into_g: bool = False) -> tuple:  # fmt: skip
    """The gradients with respect to the two inputs ``which`` (as ``cpu.elementwise_grads``): one kernel each
    here, the second written into ``g`` when ``into_g`` (the first has read it by then)."""
    first = elementwise_grad(row, which[0], g, out, inputs, params, dtype)
    return first, elementwise_grad(row, which[1], g, out, inputs, params, dtype, result=g if into_g else None)


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


def where(cond, a, b, dtype):
    """``a`` where ``cond`` else ``b``, broadcast, in ``dtype`` (``a`` and ``b`` may be scalars), through the
    table's ``select``."""
    dtype = np.dtype(dtype)
    shape = _shape_of([cond, a, b])
    cond = cond if tuple(cond.shape) == shape and cond.dtype == dtype else _materialize(cond, shape, dtype)

    def kernel_for(pattern):
        return codegen.map_kernel("cuda_where", [select], select, ["c", "a", "b"], pattern, [], "cuda")

    return _run_map(kernel_for, [cond, a, b], (), dtype, shape)


# --- strided copies: copy, astype, broadcast, writes through views -----------------------------------------
_kernels: dict[tuple, object] = {}


def _assign_kernel(ndim: int, scalar: bool):
    """The generator's grid-stride loop over ``dst``'s elements in C order, unravelling ``i`` into ``ndim``
    indices so ``dst`` and ``src`` may have any strides (stride-0 broadcasts included)."""
    key = ("assign", ndim, scalar)
    kernel = _kernels.get(key)
    if kernel is None:
        lines = ["r = i"]
        for d in range(ndim - 1, 0, -1):
            lines += [f"i{d} = r % dst.shape[{d}]", f"r = r // dst.shape[{d}]"]
        lines.append("i0 = r")
        index = ", ".join(f"i{d}" for d in range(ndim))
        lines.append(f"dst[{index}] = {'src' if scalar else f'src[{index}]'}")
        loop = codegen.loop_source("cuda", "kernel", ["dst", "src"], "\n".join(lines), "dst.size")
        tag = f"cuda_assign_{ndim}{'s' if scalar else 'a'}"
        kernel = _kernels[key] = codegen.load_module(tag, codegen.module_source("cuda", loop)).kernel
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


def astype(a, dtype):
    """A C-contiguous copy in ``dtype``."""
    _storable(np.dtype(dtype))
    return _materialize(a, a.shape, np.dtype(dtype))


def ascontiguous(a):
    return a if is_contiguous(a) else copy(a)


def broadcast_to(a, shape):
    """A stride-0 view, as ``np.broadcast_to``."""
    return _view(a, lambda x: np.broadcast_to(x, tuple(shape)))


def expand(a, shape):
    """``Tensor.expand``'s stride-0 view, writable (under the simulator too, whose arrays are numpy's)."""
    return _view(a, lambda x: cpu.expand(x, tuple(shape)))


def concatenate(arrays: list, dim: int, dtype):
    shape = list(arrays[0].shape)
    shape[dim] = sum(a.shape[dim] for a in arrays)
    out = empty(shape, dtype)
    start = 0
    for a in arrays:
        index = (slice(None),) * dim + (slice(start, start + a.shape[dim]),)
        assign(_basic_view(out, index), a)
        start += a.shape[dim]
    return out


# --- indexing -----------------------------------------------------------------------------------------------
def _basic_view(a, index):
    """The view a basic index gives (a full integer index gives a 0-d view, not a scalar)."""
    index = index if isinstance(index, tuple) else (index,)
    if not any(i is Ellipsis for i in index):
        index = index + (Ellipsis,)
    return _view(a, lambda x: x[index])


def _host_index(index):
    """``index`` with every device array in it copied to the host (for the host round trips)."""
    if isinstance(index, tuple):
        return tuple(_host_index(i) for i in index)
    return index.copy_to_host() if is_device_array(index) else index


def getitem(a, index):
    """``a[index]``: a device view for a basic index; an advanced (integer / boolean array) index round-trips
    through the host and gives a new device array."""
    if _is_advanced(index):
        return from_host(cpu.getitem(to_host(a), _host_index(index)))
    return _basic_view(a, index)


def setitem(dst, index, value) -> None:
    """``dst[index] = value``. Basic indices write through a device view; advanced (integer / boolean array)
    indices round-trip through the host. A device ``value`` is copied first (it may overlap ``dst``)."""
    if is_device_array(value):
        value = copy(value)
    if _is_advanced(index):
        host = dst.copy_to_host()
        host[_host_index(index)] = value.copy_to_host() if is_device_array(value) else value
        assign(dst, from_host(host))
        return
    assign(_basic_view(dst, index), value)


def index_add_zeros(shape: tuple, dtype, index, values):
    """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices add up); on the host."""
    host_values = to_host(values) if is_device_array(values) else values
    return from_host(cpu.index_add_zeros(shape, dtype, _host_index(index), host_values))


def take_along_axis(a, idx, dim: int):
    """``np.take_along_axis`` on the host."""
    return from_host(cpu.take_along_axis(to_host(a), to_host(idx), dim))


def put_along_axis_zeros(shape: tuple, idx, values, dim: int):
    """Zeros of ``shape`` with ``values`` added at ``idx`` along ``dim``; on the host."""
    return from_host(cpu.put_along_axis_zeros(shape, to_host(idx), to_host(values), dim))


def sort(a, dim: int, descending: bool):
    """Stable sort along ``dim``: (values, int64 indices), on the host."""
    values, indices = cpu.sort(to_host(a), dim, descending)
    return from_host(values), from_host(indices)


def topk(a, k: int, dim: int, largest: bool):
    """The first ``k`` of a stable sort along ``dim``: (values, int64 indices), on the host."""
    values, indices = cpu.topk(to_host(a), k, dim, largest)
    return from_host(values), from_host(indices)


def arg_reduce(a, op: str, axis: int | None, keepdim: bool):
    """``argmax``/``argmin`` as int64 (``axis`` None flattens), on the host."""
    return from_host(cpu.arg_reduce(to_host(a), op, axis, keepdim))


# --- reductions ---------------------------------------------------------------------------------------------
_COMBINE = {
    "sum": "a + b",
    "prod": "a * b",
    "max": "a if a >= b or a != a else b",
    "min": "a if a <= b or a != a else b",
}
_NUMPY_NAMES = {"max": "maximum", "min": "minimum"}


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
    """Shared-memory tree reduction of each row of a (M, K) array into (M, parts) partial results (a hand-written
    kernel: not a per-element loop)."""
    key = ("reduce", op, dtype.str)
    kernel = _kernels.get(key)
    if kernel is None:
        tpb = 8 if simulator() else 256
        source = codegen.module_source(
            "cuda",
            "from numba import types",
            f"@cuda.jit(device=True, cache=CACHE)\ndef combine(a, b):\n    return {_COMBINE[op]}\n",
            "@cuda.jit(cache=CACHE)\n"
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
            + "        row += cuda.gridDim.y\n",
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
    """``sum``/``prod``/``max``/``min``/``any``/``all`` over ``axes`` (all when None) on the device, in ``dtype``
    (``any``/``all`` give bool: ``max``/``min`` over the values cast to bool)."""
    if op in ("any", "all"):
        a, op, dtype = astype(a, np.bool_), "max" if op == "any" else "min", np.bool_
    dtype = np.dtype(dtype or a.dtype)
    ndim = a.ndim
    axes = tuple(range(ndim)) if axes is None else tuple(d % ndim for d in axes) if ndim else ()
    kept = [d for d in range(ndim) if d not in axes]
    out_shape = tuple(a.shape[d] for d in kept)
    m = int(np.prod(out_shape, dtype=np.int64))
    k = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    if k == 0 or m == 0:
        if k == 0 and m and op in ("max", "min") and dtype.kind != "b":
            raise ValueError(f"zero-size array to reduction operation {_NUMPY_NAMES[op]} which has no identity")
        result = full(out_shape, {"sum": 0, "prod": 1, "max": 0, "min": 1}[op], dtype)
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
    """``dst += src`` in place (the leaf ``.grad`` accumulation): the generator's accumulation kernel when both
    are contiguous of one shape, else the ``add`` row's kernel writing into ``dst``."""
    if dst.size == 0:
        return
    if is_contiguous(dst) and tuple(src.shape) == tuple(dst.shape) and is_device_array(src):
        s = src if src.dtype == dst.dtype and is_contiguous(src) else _materialize(src, dst.shape, dst.dtype)
        blocks, threads = _grid(dst.size)
        codegen.accumulate_kernel("cuda")[blocks, threads](_flat(dst), _flat(s))
    else:
        elementwise(ROWS["add"], [dst, src], (), dst.dtype, out=dst)


# --- matmul -------------------------------------------------------------------------------------------------
def _matmul_kernel(dtype: np.dtype):
    """Tiled shared-memory (B, M, K) @ (B, K, N) -> (B, M, N); one block computes one TILE x TILE output tile."""
    key = ("matmul", dtype.str)
    if key not in _kernels:
        tile = 4 if simulator() else 16
        dt = _nbtype(dtype)
        source = codegen.module_source(
            "cuda",
            "from numba import types",
            "@cuda.jit(cache=CACHE)\n"
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
            + f"    for t in range((kk + {tile - 1}) // {tile}):\n"
            + f"        k = t * {tile} + tx\n"
            + f"        sa[ty, tx] = a[z, row, k] if row < m and k < kk else {dt}(0)\n"
            + f"        k = t * {tile} + ty\n"
            + f"        sb[ty, tx] = b[z, k, col] if k < kk and col < n else {dt}(0)\n"
            + "        cuda.syncthreads()\n"
            + f"        for j in range({tile}):\n"
            + "            acc += sa[ty, j] * sb[j, tx]\n"
            + "        cuda.syncthreads()\n"
            + "    if row < m and col < n:\n"
            + "        c[z, row, col] = acc\n",
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
        if k == 0:
            assign(c, 0)
        else:
            kernel, tile = _matmul_kernel(dtype)
            kernel[((n + tile - 1) // tile, (m + tile - 1) // tile, nb), (tile, tile)](a3, b3, c)
    shape = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())
    return c.reshape(shape)


def linear(x, weight, bias):
    """``x @ weight.T + bias`` for a 2-D ``x``, as ``cpu.linear``: the matmul kernel, then the add row's."""
    product = matmul(x, _view(weight, lambda w: w.T))
    return elementwise(ROWS["add"], [product, bias], (), product.dtype)


def linear_backward(g, x, weight, needs: tuple) -> tuple:
    """The gradients of ``linear``, as ``cpu.linear_backward``."""
    need_x, need_w, need_b = needs
    gx = matmul(g, weight) if need_x else None
    gw = matmul(_view(g, lambda v: v.T), x) if need_w else None
    return gx, gw, reduce(g, "sum", (0,), False) if need_b else None


# --- foreach and apply_: user functions through the generator -----------------------------------------------
def loop_variant(size: int) -> str:
    """Every loop on the device is the grid-stride kernel."""
    return "cuda"


def foreach(update, arrays: list, scalars: tuple = (), static: tuple = ()) -> None:
    """Run the module-level per-element ``update(i, *arrays, *scalars, *static)`` for every ``i`` of the flat,
    contiguous, equal-sized device ``arrays`` as one grid-stride kernel: the fused in-place update of an
    optimizer step (``static`` flags compiled in as constants, as on the CPU)."""
    n = arrays[0].size
    if n == 0:
        return
    kernel = codegen.foreach_kernel(update, len(arrays), len(scalars), "cuda", static)
    blocks, threads = _grid(n)
    kernel[blocks, threads](*[_flat(a) for a in arrays], *scalars)


def apply_kernel(fn, dtype, variant: str = "cuda", arity: int = 1):
    """``run(res, *others)``: ``res[i] = fn(res[i], others[0][i], ...)`` over flat contiguous device arrays of
    ``dtype``, ``fn`` compiled as a CUDA device function now, so a callable numba.cuda cannot compile raises here.
    The simulator runs kernels as Python and compiles nothing, so there ``fn`` is type-checked by compiling the
    CPU loop instead, and the simulator refuses what the device would. ``ops.apply`` memoizes it and owns the
    Python fallback."""
    from numba import from_dtype, types

    signature = (types.Array(from_dtype(np.dtype(dtype)), 1, "C"),) * arity
    kernel = codegen.apply_kernel(fn, arity, "cuda")
    if simulator():
        codegen.apply_kernel(fn, arity, "serial").compile(signature)
    else:
        kernel.compile(signature)

    def run(res, *others) -> None:
        blocks, threads = _grid(res.size)
        kernel[blocks, threads](res, *others)

    return run


#: The backend interface: the same names as ``cpu.__all__`` (tests/test_backend.py checks it). Device
#: management (``available``, ``require``, ``synchronize``, ``to_device``, ``as_device_array``, ``assign``) is
#: cuda's own.
# --- the rest of the interface ------------------------------------------------------------------------------
def data_ptr(a) -> int:
    return a.__cuda_array_interface__["data"][0]


def reshape(a, shape):
    """A view of a contiguous array (a copy first otherwise)."""
    return a.reshape(tuple(shape))


def can_view(a, shape) -> bool:
    """Whether ``a`` can take ``shape`` without a copy (device arrays are viewed only when contiguous)."""
    return is_contiguous(a)


def overlap(a, b) -> str:
    """``"none"``, ``"full"`` (the same elements, the same layout) or ``"partial"``, from the pointers and extents."""
    pa, pb = data_ptr(a), data_ptr(b)
    if pa + a.nbytes <= pb or pb + b.nbytes <= pa:
        return "none"
    if pa == pb and a.strides == b.strides and tuple(a.shape) == tuple(b.shape):
        return "full"
    return "partial"


def softmax(x, dim: int, log: bool):
    """``softmax`` (or ``log_softmax``) along ``dim`` from device kernels: the row maxima, ``exp`` of the shifted
    values, their sums, then a division (or the shifted values less the sums' logs)."""
    if x.ndim == 0:
        return softmax(x.reshape(1), 0, log).reshape(())
    dtype = np.dtype(x.dtype)
    shifted = elementwise(ROWS["sub"], [x, reduce(x, "max", (dim,), True)], (), dtype)
    e = elementwise(ROWS["exp"], [shifted], (), dtype)
    total = reduce(e, "sum", (dim,), True)
    if log:
        return elementwise(ROWS["sub"], [shifted, elementwise(ROWS["log"], [total], (), dtype)], (), dtype)
    return elementwise(ROWS["div"], [e, total], (), dtype)


def softmax_backward(y, g, dim: int, log: bool):
    """The input gradient of ``softmax`` (``log_softmax``) from its output ``y`` and ``g``, from device kernels."""
    dtype = np.dtype(y.dtype)
    if log:
        total = reduce(g, "sum", (dim,), True)
        return elementwise(ROWS["sub"], [g, elementwise(ROWS["mul"], [elementwise(ROWS["exp"], [y], (), dtype), total],
                                                        (), dtype)], (), dtype)  # fmt: skip
    total = reduce(elementwise(ROWS["mul"], [g, y], (), dtype), "sum", (dim,), True)
    return elementwise(ROWS["mul"], [y, elementwise(ROWS["sub"], [g, total], (), dtype)], (), dtype)


def _host_op(name: str):
    """The cpu backend's ``name`` run on host copies of the device arrays, its array results uploaded."""
    fn = getattr(cpu, name)

    @functools.wraps(fn)  # the cpu function's signature: the two backends' parameters stay the same
    def via_host(*args, **kwargs):
        result = fn(*[to_host(a) if is_device_array(a) else a for a in args], **kwargs)
        if isinstance(result, tuple):
            return tuple(from_host(r) if isinstance(r, np.ndarray) else r for r in result)
        return from_host(result) if isinstance(result, np.ndarray) else result

    return via_host


# More backend functions run by a host round trip through the cpu backend: add a line here when a numpy primitive
# added to ``cpu`` has no device kernel yet.
tile = _host_op("tile")
layer_norm = _host_op("layer_norm")
layer_norm_backward = _host_op("layer_norm_backward")
im2col = _host_op("im2col")
col2im = _host_op("col2im")
max_pool2d = _host_op("max_pool2d")
max_pool2d_backward = _host_op("max_pool2d_backward")
avg_pool2d = _host_op("avg_pool2d")
avg_pool2d_backward = _host_op("avg_pool2d_backward")
adaptive_avg_pool2d = _host_op("adaptive_avg_pool2d")
adaptive_avg_pool2d_backward = _host_op("adaptive_avg_pool2d_backward")
cross_entropy = _host_op("cross_entropy")
cross_entropy_backward = _host_op("cross_entropy_backward")
conv2d = _host_op("conv2d")
coo_matmul = _host_op("coo_matmul")
conv2d_backward = _host_op("conv2d_backward")
# op breadth (issue 9)
cumulative = _host_op("cumulative")
einsum = _host_op("einsum")
embed_diagonal = _host_op("embed_diagonal")
flip = _host_op("flip")
gather = _host_op("gather")
index_add = _host_op("index_add")
index_fill = _host_op("index_fill")
index_put = _host_op("index_put")
index_select = _host_op("index_select")
masked_scatter = _host_op("masked_scatter")
repeat_index = _host_op("repeat_index")
roll = _host_op("roll")
scatter = _host_op("scatter")
triangle = _host_op("triangle")
unique = _host_op("unique")


def diagonal(a, offset: int, dim1: int, dim2: int):
    """A view of the diagonal, as ``cpu.diagonal`` (issue 9)."""
    return _view(a, lambda x: cpu.diagonal(x, offset, dim1, dim2))


#: The backend interface: exactly ``cpu.__all__``, listed there once (tests/test_backend.py checks that every name
#: is a function here with the CPU one's parameters).
__all__ = list(cpu.__all__)
