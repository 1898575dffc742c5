"""The CUDA backend: the CPU backend's interface (``__all__``, the same names as ``cpu``) on ``numba.cuda`` device
arrays. The only importer of numba.cuda.

Per-element kernels are generated, never written per op: every per-element loop (table-row forward and
gradients, ``where``, strided copies, gradient accumulation, ``foreach`` optimizer updates, ``apply_``/``map_``) is
the grid-stride loop ``codegen.loop_source`` writes from the same scalar functions the CPU loops use, in a module in
the cache directory. Hand-written kernels are named: the shared-memory tree reduction and the register-tiled
``matmul`` (the fallback when CuPy's cuBLAS is not installed) here, and in ``cuda_kernels`` (imported on first use)
convolution columns, pooling, layer norm, cross entropy, the index primitives, arg-reductions, scans, sort/topk and
triangles.

Storage is a subclass of numba's device array (of the simulator's ``FakeCUDAArray`` under
``NUMBA_ENABLE_CUDASIM=1``) that adds the few numpy methods ops call on storage (``copy``, ``astype``,
``reshape``, ``transpose``, basic indexing as views). Under the simulator, every other numpy attribute raises
``AttributeError`` as it would on a real device array, so simulator tests catch accidental host fallbacks.

Copies between host and device are counted in ``transfers``. A training step copies nothing until its loss is
read (tests/test_cuda_round_trips.py); the few primitives that still round-trip through the host (``_host_op``) are
listed in ``cuda_kernels``'s docstring, with the Python fallback of ``apply_``/``map_`` for callables Numba cannot
compile. Index bounds are checked on the device (``check_index``); a failed check raises at the next download.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._types import CUDA0
from ..scalar_math import COMPLEX_ROWS, ROWS, Row, select
from . import codegen, cpu, cuda_memory, layout

DEVICE = CUDA0
_cuda = None  # numba.cuda, imported on first use
_Array = None  # the storage class, built on first use


def _nb():
    global _cuda
    if _cuda is None:
        from numba import cuda

        if not simulator():
            cuda_memory.install(cuda)
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
    """The device view that numpy's ``op`` (a basic index, transpose, broadcast, reshape, a complex array's
    ``.real``) would give of ``a``, in the element type ``op`` gives."""
    if simulator():
        return _Array(op(a._ary))
    base = _dummy(a)
    v = op(base)
    offset = v.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    size = int(np.prod(v.shape, dtype=np.int64))
    gpu_data = a.gpu_data.view(offset) if size and a.size else None
    return _Array(v.shape, v.strides, v.dtype, stream=a.stream, gpu_data=gpu_data)


class _Flags(dict):
    """numpy-style ``flags.c_contiguous`` on a device array (numba's are a plain dict)."""

    __getattr__ = dict.__getitem__


#: Copies between host and device memory so far, by direction: every upload and download of storage passes
#: through ``_upload`` or ``copy_to_host``, which add one here (tests read it to prove a step stays on the device).
transfers = {"to_host": 0, "to_device": 0}
#: The device-side index checks queued since the last download: code -> the callable making its exception
#: (``cuda_kernels.check_index``).
pending_checks: dict = {}


def _upload(a: np.ndarray):
    """A device copy of a host array (C-contiguous) in memory from the caching allocator, counted."""
    transfers["to_device"] += 1
    a = np.asarray(a, order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
    out = empty(a.shape, a.dtype)
    if a.size:
        super(_StorageMethods, out).copy_to_device(a)  # numba's host-to-device copy (ours is a strided assign)
    return out


class _StorageMethods:
    """The numpy methods ops call on storage, with device semantics."""

    def copy_to_host(self, ary=None, stream=0):
        """numba's download, counted; first the error of a failed device-side index check, if any is pending."""
        if pending_checks:
            raise_failed_check()
        transfers["to_host"] += 1
        return super().copy_to_host(ary, stream)

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
        return reshape(self, shape)

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
    return _wrap(_upload(a))


def empty(shape, dtype):
    """Uninitialised device storage from the caching allocator (``cuda_memory``)."""
    require()
    shape, dtype = tuple(shape), np.dtype(dtype)
    _storable(dtype)
    if simulator():
        return _storage_class()(cuda_memory.simulator_array(shape, dtype))
    return _wrap(_nb().device_array(shape, dtype))


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


_constants: dict = {}  # (dtype, shape, bytes) -> device array, least recently used first
_CONSTANT_LIMIT = 256  # tables kept
_CONSTANT_SIZE = 1 << 16  # elements: bigger arrays are uploaded each time, not hashed and kept


def constant(a):
    """A device copy of the host array ``a``, a fixed table an op reads (interpolation weights, window and
    padding positions, host index arrays): uploaded once per distinct content and kept, so later steps copy
    nothing. Callers never write into it."""
    a = np.asarray(a, order="C")
    if a.size > _CONSTANT_SIZE:
        return from_host(a)
    key = (a.dtype.str, a.shape, a.tobytes())
    found = _constants.pop(key, None)
    if found is None:
        found = from_host(a)
    _constants[key] = found
    if len(_constants) > _CONSTANT_LIMIT:
        del _constants[next(iter(_constants))]
    return found


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


def new_stream():
    """A new numba.cuda stream."""
    return _nb().stream()


def default_stream():
    """numba.cuda's default stream (the simulator has none: its streams are all synchronous, so any one serves)."""
    cuda = _nb()
    return cuda.stream() if simulator() else cuda.default_stream()


def new_event(timing: bool):
    """A numba.cuda event (GPU only: the simulator's events keep no time)."""
    return _nb().event(timing=timing)


def event_elapsed_ms(start, end) -> float:
    return _nb().event_elapsed_time(start, end)


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
def _operand(value, dtype: np.dtype):
    """One operand of a map kernel, in its own shape: a number of ``dtype``, or a C-contiguous device array of
    ``dtype``. An expanded (stride-0) view is taken as the array it repeats; the kernel reads it through its
    broadcast pattern, so no operand is ever expanded into a copy of the output's size."""
    if isinstance(value, np.ndarray) and value.size == 1:  # a 0-dim cpu tensor may join a cuda op
        value = value.reshape(-1)[0]
    if not is_device_array(value):
        return dtype.type(value)
    index = layout.compact_index(tuple(value.shape), tuple(value.strides))
    if index is not None:
        value = _basic_view(value, index)
    if value.dtype != dtype or not is_contiguous(value):
        value = _materialize(value, tuple(value.shape), dtype)
    return value


def _run_map(kernel_for, operands: list, params: tuple, dtype: np.dtype, shape, out=None):
    """Run a generated map kernel over ``operands`` broadcast to ``shape``; returns ``out``. The kernel's pattern
    and loop come from ``layout.iteration_space``: broadcast operands are read in place through their masks over
    the collapsed dims, which the kernel takes as arguments after the params."""
    if out is None:
        out = empty(shape, dtype)
    size = out.size
    if size == 0:
        return out
    values = [_operand(value, dtype) for value in operands]
    space = layout.iteration_space(tuple(out.shape), [tuple(v.shape) if is_device_array(v) else None for v in values])
    pattern = space.mask_pattern()
    sizes = space.dims if "_" in pattern else ()
    kernel = kernel_for(pattern)
    target = out if is_contiguous(out) and out.dtype == dtype else empty(out.shape, dtype)
    blocks, threads = _grid(size)
    flat = [_flat(v) if m is not None else v for v, m in zip(values, space.masks)]
    kernel[blocks, threads](_flat(target), *flat, *(dtype.type(p) for p in params), *sizes)
    if target is not out:
        assign(out, target)
    return out


def _shape_of(values) -> tuple:
    shapes = [tuple(v.shape) for v in values if is_device_array(v) or isinstance(v, np.ndarray)]
    return np.broadcast_shapes(*shapes) if shapes else ()


def elementwise(row: Row, inputs: list, params: tuple, dtype: np.dtype, out=None, *, shape=None, out_dtype=None):
    """Forward of one row: ``row(*inputs, *params)`` computed in ``dtype`` with broadcasting, into ``out`` or a new
    array of ``shape`` and ``out_dtype`` (as ``cpu.elementwise``; a complex ``dtype`` computes the row's complex
    twin)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        row = COMPLEX_ROWS[row.name]
    if out is None:
        shape = _shape_of(inputs) if shape is None else tuple(shape)
        if out_dtype is not None:
            out = empty(shape, out_dtype)
    else:
        shape = tuple(out.shape)
    if dtype == _HALF:
        return _in_single(lambda p: codegen.row_kernel(row, "forward", p, "cuda"), inputs, params, shape, out)
    return _run_map(lambda p: codegen.row_kernel(row, "forward", p, "cuda"), inputs, params, dtype, shape, out)


def elementwise_plain(row: Row, operands: list, dtype: np.dtype, shape: tuple, out_dtype=None, pattern=None):
    """``elementwise`` for contiguous operands of one shape and dtype (as ``cpu.elementwise_plain``; the
    launch works out its own ``pattern``)."""
    return elementwise(row, operands, (), dtype, shape=shape, out_dtype=out_dtype)


def elementwise_grad(row: Row, i: int, g, out, inputs: list, params: tuple, dtype: np.dtype, *, result=None):
    """Gradient of one row with respect to input ``i``, in ``g``'s shape (as ``cpu.elementwise_grad``);
    ``result``, when given, is a buffer of ``g``'s shape and ``dtype`` to write into (it may be ``g``)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        row = COMPLEX_ROWS[row.name]
    operands = [g, out, *inputs]
    if dtype == _HALF:
        return _in_single(
            lambda p: codegen.row_kernel(row, f"grad{i}", p, "cuda"), operands, params, tuple(g.shape), None
        )
    return _run_map(
        lambda p: codegen.row_kernel(row, f"grad{i}", p, "cuda"), operands, params, dtype, tuple(g.shape), result
    )


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

    def kernel_for(pattern):
        return codegen.map_kernel("cuda_where", [select], select, ["c", "a", "b"], pattern, [], "cuda")

    return _run_map(kernel_for, [cond, a, b], (), dtype, shape)


# --- strided copies: copy, astype, broadcast, writes through views -----------------------------------------
def _assign_kernel(ndim: int, scalar: bool):
    """The generator's grid-stride loop over ``dst``'s elements in C order, unravelling ``i`` into ``ndim``
    indices so ``dst`` and ``src`` may have any strides (stride-0 broadcasts included)."""
    key = ("assign", ndim, scalar)
    kernel = codegen.KERNELS.get(key)
    if kernel is None:
        lines = ["r = i"]
        for d in range(ndim - 1, 0, -1):
            lines += [f"i{d} = r % dst.shape[{d}]", f"r = r // dst.shape[{d}]"]
        lines.append("i0 = r")
        index = ", ".join(f"i{d}" for d in range(ndim))
        lines.append(f"dst[{index}] = {'src' if scalar else f'src[{index}]'}")
        loop = codegen.loop_source("cuda", "kernel", ["dst", "src"], "\n".join(lines), "dst.size")
        tag = f"cuda_assign_{ndim}{'s' if scalar else 'a'}"
        kernel = codegen.KERNELS[key] = codegen.load_module(tag, codegen.module_source("cuda", loop)).kernel
    return kernel


def assign(dst, src) -> None:
    """``dst[...] = src``: ``dst`` any (strided) device array; ``src`` a scalar or an array broadcastable to it,
    cast to ``dst``'s dtype."""
    if dst.size == 0:
        return
    if isinstance(src, np.ndarray):
        src = src.reshape(-1)[0] if src.size == 1 else _wrap(_upload(src))
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
    kernel = codegen.KERNELS.get(key)
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
        codegen.KERNELS[key] = (kernel, tpb)
        kernel = codegen.KERNELS[key]
    return kernel


def _reduce_rows(src, op: str):
    """Reduce each row of a C-contiguous (M, K) array: (M,)."""
    m, k = src.shape
    kernel, tpb = _reduce_kernel(op, src.dtype)
    parts = 1 if k <= tpb * 16 or simulator() else min((k + tpb * 16 - 1) // (tpb * 16), 1024)
    out = empty((m, parts), src.dtype)
    kernel[(parts, min(m, 1 if simulator() else 65535)), tpb](src, out)
    return out.reshape(m) if parts == 1 else _reduce_rows(out, op)


def divide_by(a, divisor):
    """``a / divisor`` (a number, cast to ``a``'s dtype) as a new array: what a mean or variance divides its sum
    by (the CPU backend's twin)."""
    return elementwise(ROWS["div"], [a, divisor], (), np.dtype(a.dtype))


def _centered(a, axes):
    """``a`` minus its mean over ``axes`` (all when None), on the device."""
    count = a.size if axes is None else math.prod([a.shape[d] for d in axes])
    return elementwise(ROWS["sub"], [a, divide_by(reduce(a, "sum", axes, True, a.dtype), count)], (), np.dtype(a.dtype))


def spread(a, axes, keepdim: bool, denominator: float):
    """The sum of squared deviations from the mean over ``axes`` over ``max(denominator, 0)`` (the CPU backend's
    twin)."""
    centered = _centered(a, axes)
    squares = elementwise(ROWS["mul"], [centered, centered], (), np.dtype(a.dtype))
    return divide_by(reduce(squares, "sum", axes, keepdim, a.dtype), max(denominator, 0))


def spread_grad(g, a, axes, denominator: float):
    """``g * (a - mean) * (2 / denominator)`` (the CPU backend's twin)."""
    dtype = np.dtype(a.dtype)
    product = elementwise(ROWS["mul"], [g, _centered(a, axes)], (), dtype)
    return elementwise(ROWS["mul"], [product, 2.0 / denominator], (), dtype)


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
#: The register-tiled kernel's shape: a block of THREADS x THREADS threads computes a (THREADS * PER_THREAD)²
#: tile of C, each thread PER_THREAD x PER_THREAD outputs held in registers, over K in steps of DEPTH staged in
#: shared memory. 16, 4, 16 give 64 x 64 tiles on a GPU; the simulator runs every thread in Python, so it gets a
#: 4 x 4 tile of 2 x 2 threads that still exercises every loop.
_TILE_GPU = (16, 4, 16)
_TILE_SIMULATOR = (2, 2, 4)


def _matmul_kernel(dtype: np.dtype):
    """Register-tiled (B, M, K) @ (B, K, N) -> (B, M, N): the fallback when CuPy's cuBLAS is not installed."""
    key = ("matmul", dtype.str)
    if key not in codegen.KERNELS:
        threads, per, depth = _TILE_SIMULATOR if simulator() else _TILE_GPU
        tile = threads * per
        loads = tile * depth // (threads * threads)
        dt = _nbtype(dtype)
        body = f"""@cuda.jit(cache=CACHE)
def kernel(a, b, c):
    sa = cuda.shared.array(({tile}, {depth}), {dt})
    sb = cuda.shared.array(({depth}, {tile}), {dt})
    acc = cuda.local.array(({per}, {per}), {dt})
    ra = cuda.local.array({per}, {dt})
    rb = cuda.local.array({per}, {dt})
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tid = ty * {threads} + tx
    row0 = cuda.blockIdx.y * {tile}
    col0 = cuda.blockIdx.x * {tile}
    z = cuda.blockIdx.z
    m = a.shape[1]
    kk = a.shape[2]
    n = b.shape[2]
    for i in range({per}):
        for j in range({per}):
            acc[i, j] = {dt}(0)
    for k0 in range(0, kk, {depth}):
        for step in range({loads}):
            e = tid + step * {threads * threads}
            r = e // {depth}
            q = e % {depth}
            sa[r, q] = a[z, row0 + r, k0 + q] if row0 + r < m and k0 + q < kk else {dt}(0)
            q = e // {tile}
            r = e % {tile}
            sb[q, r] = b[z, k0 + q, col0 + r] if k0 + q < kk and col0 + r < n else {dt}(0)
        cuda.syncthreads()
        for q in range({depth}):
            for i in range({per}):
                ra[i] = sa[ty + i * {threads}, q]
                rb[i] = sb[q, tx + i * {threads}]
            for i in range({per}):
                for j in range({per}):
                    acc[i, j] += ra[i] * rb[j]
        cuda.syncthreads()
    for i in range({per}):
        row = row0 + ty + i * {threads}
        for j in range({per}):
            col = col0 + tx + j * {threads}
            if row < m and col < n:
                c[z, row, col] = acc[i, j]
"""
        source = codegen.module_source("cuda", "from numba import types", body)
        codegen.KERNELS[key] = (codegen.load_module(f"cuda_matmul_{dtype.name}", source).kernel, threads, tile)
    return codegen.KERNELS[key]


_cupy_module: list = []


def _cupy():
    """CuPy (cuBLAS) when installed and on a GPU, else None; imported on the first matmul, never at import."""
    if not _cupy_module:
        module = None
        if not simulator():
            try:
                import cupy as module
            except ImportError:
                module = None
        _cupy_module.append(module)
    return _cupy_module[0]


def _as_batched(x, shape: tuple, dtype: np.dtype):
    """``x`` broadcast to ``shape`` as a C-contiguous array of ``dtype`` (``x`` itself when it already is one)."""
    if x.dtype == dtype and tuple(x.shape) == shape and is_contiguous(x):
        return x
    return _materialize(x, shape, dtype)


def matmul(a, b):
    """``np.matmul`` semantics (1-D promotion, broadcast batch dims): cuBLAS through CuPy, zero-copy over
    ``__cuda_array_interface__``, when CuPy is installed; else the register-tiled kernel."""
    dtype = np.result_type(a.dtype, b.dtype)
    a2 = _view(a, lambda x: x.reshape(1, -1)) if a.ndim == 1 else a
    b2 = _view(b, lambda x: x.reshape(-1, 1)) if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    (m, k), n = a2.shape[-2:], b2.shape[-1]
    nb = int(np.prod(batch, dtype=np.int64))
    a3 = _as_batched(a2, batch + (m, k), dtype).reshape(nb, m, k)
    b3 = _as_batched(b2, batch + (k, n), dtype).reshape(nb, k, n)
    c = empty((nb, m, n), dtype)
    if c.size:
        cupy = _cupy()
        if k == 0:
            assign(c, 0)
        elif cupy is not None:
            cupy.matmul(cupy.asarray(a3), cupy.asarray(b3), out=cupy.asarray(c))
        else:
            kernel, threads, tile = _matmul_kernel(dtype)
            grid = ((n + tile - 1) // tile, (m + tile - 1) // tile, nb)
            kernel[grid, (threads, threads)](a3, b3, c)
    shape = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())
    return c.reshape(shape)


def linear(x, weight, bias):
    """``x @ weight.T + bias`` for a 2-D ``x`` (no bias: None), as ``cpu.linear``: the matmul kernel, then the add
    row's."""
    product = matmul(x, _view(weight, lambda w: w.T))
    if bias is None:
        return product
    return elementwise(ROWS["add"], [product, bias], (), product.dtype)


def repeated_product(w, rows: int):
    """``product(x, bias=None) -> x @ w.T (+ bias)`` for the products of a recurrent layer's steps, as
    ``cpu.repeated_product``: here ``linear`` as it is (the matmul kernel reads ``w`` in place)."""

    def product(x, bias=None):
        return linear(x, w, bias)

    return product


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
    as_double = np.dtype(dtype).kind == "f"  # float elements reach ``fn`` as float64, as on the CPU
    kernel = codegen.apply_kernel(fn, arity, "cuda", as_double)
    if simulator():
        codegen.apply_kernel(fn, arity, "serial", as_double).compile(signature)
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
    """A view when the strides allow it (numpy's rule, as on the CPU), else a reshaped copy."""
    shape = tuple(shape)
    if can_view(a, shape):
        return _view(a, lambda x: x.reshape(shape))
    return _view(copy(a), lambda x: x.reshape(shape))


def can_view(a, shape) -> bool:
    """Whether ``a`` can take ``shape`` without a copy: numpy's answer for an array of ``a``'s strides."""
    return cpu.can_view(_dummy(a), tuple(shape))


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


def scaled_softmax(scores, mask, scale: float, safe: bool):
    """Attention's probabilities ``softmax(mask + scores * scale)`` over the last dim (as ``cpu.scaled_softmax``),
    from device kernels; with ``safe``, rows whose every score is ``-inf`` give zeros."""
    dtype = np.dtype(scores.dtype)
    scaled = elementwise(ROWS["mul"], [scores, scale], (), dtype)
    if mask is not None:
        scaled = elementwise(ROWS["add"], [mask, scaled], (), dtype)
    probs = softmax(scaled, scaled.ndim - 1, False)
    if not safe or probs.size == 0:
        return probs
    blank = elementwise(ROWS["isneginf"], [reduce(scaled, "max", (scaled.ndim - 1,), True)], (), dtype,
                        out_dtype=np.bool_)  # fmt: skip
    return where(blank, 0.0, probs, dtype)


def _swap_last(a):
    """The device view of ``a`` with its last two axes swapped."""
    axes = list(range(a.ndim))
    axes[-2:] = axes[-1], axes[-2]
    return _view(a, lambda x: x.transpose(axes))


def causal_attention(q, k, v, mask, scale: float):
    """Causal attention's output and what its backward needs besides the inputs (as ``cpu.causal_attention``;
    here the probabilities), from the device's whole products and ``scaled_softmax`` with the additive causal
    ``mask``."""
    probs = scaled_softmax(matmul(q, _swap_last(k)), mask, scale, False)
    return matmul(probs, v), probs


def causal_attention_backward(g, q, k, v, kept, scale: float, need_q: bool, need_k: bool, need_v: bool):
    """The gradients of ``causal_attention`` (as ``cpu.causal_attention_backward``) from what it ``kept`` (here the
    probabilities), from device products and softmax's backward."""
    probs = kept
    dtype = np.dtype(q.dtype)
    g_v = matmul(_swap_last(probs), g) if need_v else None
    if not (need_q or need_k):
        return None, None, g_v
    g_s = softmax_backward(probs, matmul(g, _swap_last(v)), probs.ndim - 1, False)
    g_q = elementwise(ROWS["mul"], [matmul(g_s, k), scale], (), dtype) if need_q else None
    g_k = elementwise(ROWS["mul"], [matmul(_swap_last(g_s), q), scale], (), dtype) if need_k else None
    return g_q, g_k, g_v


def softmax_backward(y, g, dim: int, log: bool):
    """The input gradient of ``softmax`` (``log_softmax``) from its output ``y`` and ``g``, from device kernels."""
    dtype = np.dtype(y.dtype)
    if log:
        total = reduce(g, "sum", (dim,), True)
        return elementwise(ROWS["sub"], [g, elementwise(ROWS["mul"], [elementwise(ROWS["exp"], [y], (), dtype), total],
                                                        (), dtype)], (), dtype)  # fmt: skip
    total = reduce(elementwise(ROWS["mul"], [g, y], (), dtype), "sum", (dim,), True)
    return elementwise(ROWS["mul"], [y, elementwise(ROWS["sub"], [g, total], (), dtype)], (), dtype)


_kernels_module = None


def _kern():
    """``cuda_kernels``, the hand-written kernels (imported on first use: importing it imports numba.cuda)."""
    global _kernels_module
    if _kernels_module is None:
        from . import cuda_kernels  # lazy: numba.cuda is imported only once a device is used

        _kernels_module = cuda_kernels
    return _kernels_module


# --- the hand-written kernels' launchers (kernels in ``cuda_kernels``) -----------------------------------------

_SINGLE = np.dtype(np.float32)


def _launch(kernel, n: int, *args) -> None:
    """Run a grid-stride ``kernel`` over ``n`` items (nothing when ``n`` is 0)."""
    if n:
        blocks, threads = _grid(n)
        kernel[blocks, threads](*args)


def _single(a):
    """float16 storage as a float32 copy (others unchanged)."""
    return astype(a, _SINGLE) if a is not None and a.dtype == _HALF else a


def _half_back(result, half: bool):
    """The float32 arrays of ``result`` back to float16 when the inputs were float16."""
    if not half:
        return result
    if isinstance(result, tuple):
        return tuple(astype(r, _HALF) if is_device_array(r) and r.dtype == _SINGLE else r for r in result)
    return astype(result, _HALF)


def _three_d(a, dim: int):
    """A contiguous array as (outer, size along ``dim``, inner)."""
    shape = tuple(a.shape)
    return ascontiguous(a).reshape(math.prod(shape[:dim]), shape[dim] if shape else 1, math.prod(shape[dim + 1 :]))


# --- deferred index checks ------------------------------------------------------------------------------------
_cell = None  # device int64[2]: the first failed check's code and its bad index (code 0: none failed)


_codes: dict = {}  # an error's identity -> its code: one code per check site and parameters, so the pending
# checks stay few however many steps run between downloads


def _error_key(error) -> tuple:
    if isinstance(error, functools.partial):
        return error.func, error.args, tuple(sorted(error.keywords.items()))
    return (error,)


def all_within(a, low, high):
    """Whether every element of ``a`` lies in ``[low, high]`` (a NaN does not), as a 0-dim bool device array (the
    CPU backend's twin)."""
    dtype, flag = np.dtype(a.dtype), np.dtype(np.bool_)
    above = elementwise(ROWS["ge"], [a, low], (), dtype, out_dtype=flag)
    below = elementwise(ROWS["le"], [a, high], (), dtype, out_dtype=flag)
    return reduce(elementwise(ROWS["logical_and"], [above, below], (), flag, out_dtype=flag), "all", None, False)


def check_index(index, low: int, high: int, skip, error) -> None:
    """Check on the device that every entry of the integer array ``index`` other than ``skip`` lies in ``[low,
    high)``. The check is queued, not waited for (as torch's device-side asserts): the next download raises
    ``error(bad_value)`` for the first failed check, before the caller sees any values."""
    global _cell
    if index.size == 0:
        return
    if _cell is None:
        _cell = zeros((2,), np.int64)
    code = _codes.setdefault(_error_key(error), len(_codes) + 1)
    pending_checks[code] = error
    flat = ascontiguous(index).reshape(-1)
    skip = np.iinfo(np.int64).min if skip is None else int(skip)
    _launch(
        _kern()._check_kernel, flat.size, flat, np.int64(low), np.int64(high), np.int64(skip), _cell, np.int64(code)
    )


def raise_failed_check() -> None:
    """Raise the exception of the first failed ``check_index`` since the last call (the checks are then clear).
    Called before each download; reads the device's error cell only while checks are pending."""
    if not pending_checks:
        return
    errors = dict(pending_checks)
    pending_checks.clear()
    code, value = (int(v) for v in _cell.copy_to_host())
    if code:
        assign(_cell, 0)
        raise errors[code](value)


def im2col(x, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """(N, C, H, W) -> (N, C * kh * kw, OH * OW) columns: each output position's receptive field."""
    half = x.dtype == _HALF
    x = ascontiguous(_single(x))
    n, c = x.shape[:2]
    cols = empty((n, c * kernel[0] * kernel[1], out_hw[0] * out_hw[1]), x.dtype)
    _launch(_kern()._im2col_kernel, cols.size, x, *kernel, *stride, *padding, *dilation, *out_hw, cols)
    return _half_back(cols, half)


def col2im(cols, shape: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """The adjoint of ``im2col``: an (N, C, H, W) array of ``shape`` summing each column entry into its source."""
    half = cols.dtype == _HALF
    cols = ascontiguous(_single(cols))
    x = empty(tuple(shape), cols.dtype)
    _launch(_kern()._col2im_kernel, x.size, cols, *kernel, *stride, *padding, *dilation, *out_hw, x)
    return _half_back(x, half)


def _t(a, axes: tuple):
    return _view(a, lambda v: v.transpose(axes))


def conv2d(x, weight, bias, stride: tuple, padding: tuple, dilation: tuple, groups: int, out_hw: tuple) -> tuple:
    """Convolution of (N, C, H, W) by (O, C / groups, kh, kw) as im2col and one batched product (per group):
    (output (N, O, OH, OW), the columns, kept for backward)."""
    n, o = x.shape[0], weight.shape[0]
    cols = im2col(x, tuple(weight.shape[2:]), stride, padding, dilation, out_hw)
    k, length = cols.shape[1], cols.shape[2]
    w = ascontiguous(weight) if weight.dtype == x.dtype else astype(weight, x.dtype)
    if groups == 1:
        out = matmul(w.reshape(o, k), cols)
    else:
        out = matmul(w.reshape(groups, o // groups, k // groups), cols.reshape(n, groups, k // groups, length))
        out = out.reshape(n, o, length)
    if bias is not None:
        out = elementwise(ROWS["add"], [out, bias.reshape(o, 1)], (), np.dtype(x.dtype))
    return out.reshape(n, o, *out_hw), cols


def conv2d_backward(g, kept, x_shape: tuple, weight, stride: tuple, padding: tuple, dilation: tuple, groups: int,
                    need_x: bool, need_w: bool, need_b: bool) -> tuple:  # fmt: skip
    """(grad of x, of weight, of bias), each None where not needed, from the output gradient and what ``conv2d``
    kept: the columns (None where the weight's is not asked for)."""
    n, o = g.shape[:2]
    k, length = int(np.prod(weight.shape[1:])) * groups, int(np.prod(g.shape[2:]))
    g3 = ascontiguous(g).reshape(n, o, length)
    w = ascontiguous(weight) if weight.dtype == g.dtype else astype(weight, g.dtype)
    gx = gw = gb = None
    if need_b:
        gb = reduce(g3, "sum", (0, 2), False)
    kg, og = k // groups, o // groups
    g4 = g3.reshape(n, groups, og, length)
    if need_w:
        c4 = kept.reshape(n, groups, kg, length)
        gw = reduce(matmul(g4, _t(c4, (0, 1, 3, 2))), "sum", (0,), False).reshape(tuple(weight.shape))
    if need_x:
        gcols = matmul(_t(w.reshape(groups, og, kg), (0, 2, 1)), g4).reshape(n, k, length)
        gx = col2im(gcols, tuple(x_shape), tuple(weight.shape[2:]), stride, padding, dilation, tuple(g.shape[2:]))
    return gx, gw, gb


def batch_norm(x, weight, bias, running_mean, running_var, training: bool, momentum: float, eps: float) -> tuple:
    """As ``cpu.batch_norm``, from the device's reductions and rows: (output, mean and rstd (C,), the updated
    running mean and variance or None)."""
    half = x.dtype == _HALF
    x = ascontiguous(_single(x))
    dtype = np.dtype(x.dtype)
    n, c = x.shape[:2]
    x3 = x.reshape(n, c, int(np.prod(x.shape[2:], dtype=np.int64)))

    def row(name, *inputs):
        return elementwise(ROWS[name], list(inputs), (), dtype)

    new_mean = new_var = None
    if training:
        count = x3.shape[0] * x3.shape[2]
        mean = row("div", reduce(x3, "sum", (0, 2), True), count)
        centered = row("sub", x3, mean)
        var = row("div", reduce(row("mul", centered, centered), "sum", (0, 2), True), count)
        rstd = row("rsqrt", row("add", var, eps))
        if running_mean is not None:
            new_mean = _running_update(running_mean, mean, momentum)
        if running_var is not None:
            new_var = _running_update(running_var, row("mul", var, count / max(count - 1, 1)), momentum)
    else:
        mean = astype(running_mean, dtype).reshape(1, c, 1)
        rstd = row("rsqrt", row("add", astype(running_var, dtype).reshape(1, c, 1), eps))
    scale = rstd if weight is None else row("mul", rstd, astype(weight, dtype).reshape(1, c, 1))
    out = row("mul", row("sub", x3, mean), scale)
    if bias is not None:
        out = row("add", out, astype(bias, dtype).reshape(1, c, 1))
    out = out.reshape(tuple(x.shape))
    return (astype(out, _HALF) if half else out), mean.reshape(c), rstd.reshape(c), new_mean, new_var


def _running_update(stat, batch, momentum: float):
    """``stat * (1 - momentum) + batch * momentum`` as a new array of ``stat``'s shape and dtype."""
    dtype = np.dtype(stat.dtype)
    batch = astype(batch, dtype).reshape(tuple(stat.shape))
    kept = elementwise(ROWS["mul"], [stat, 1 - momentum], (), dtype)
    return elementwise(ROWS["add"], [kept, elementwise(ROWS["mul"], [batch, momentum], (), dtype)], (), dtype)


def batch_norm_backward(g, x, mean, rstd, weight, training: bool, need_x: bool, need_w: bool, need_b: bool) -> tuple:
    """As ``cpu.batch_norm_backward``, from the device's reductions and rows."""
    half = x.dtype == _HALF
    param = np.dtype(weight.dtype if weight is not None else x.dtype)
    x = ascontiguous(_single(x))
    dtype = np.dtype(x.dtype)
    n, c = x.shape[:2]
    x3 = x.reshape(n, c, int(np.prod(x.shape[2:], dtype=np.int64)))
    g3 = ascontiguous(astype(g, dtype)).reshape(tuple(x3.shape))

    def row(name, *inputs):
        return elementwise(ROWS[name], list(inputs), (), dtype)

    m3, r3 = astype(mean, dtype).reshape(1, c, 1), astype(rstd, dtype).reshape(1, c, 1)
    xhat = row("mul", row("sub", x3, m3), r3)
    sum_g = reduce(g3, "sum", (0, 2), True)
    dot = reduce(row("mul", g3, xhat), "sum", (0, 2), True)  # the sum of g * xhat
    gx = gw = gb = None
    if need_x:
        scale = r3 if weight is None else row("mul", r3, astype(weight, dtype).reshape(1, c, 1))
        if training:
            count = max(x3.shape[0] * x3.shape[2], 1)
            inner = row("sub", row("sub", g3, row("div", sum_g, count)), row("mul", xhat, row("div", dot, count)))
            gx = row("mul", inner, scale)
        else:
            gx = row("mul", g3, scale)
        gx = gx.reshape(tuple(x.shape))
        gx = astype(gx, _HALF) if half else gx
    if need_w:
        gw = astype(dot.reshape(c), param)
    if need_b:
        gb = astype(sum_g.reshape(c), param)
    return gx, gw, gb


def max_pool2d(x, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """Max over windows of the (P, H, W) planes: (values, int64 indices ``h * W + w`` into each plane)."""
    half = x.dtype == _HALF
    x = ascontiguous(_single(x))
    out = empty((x.shape[0], *out_hw), x.dtype)
    idx = empty((x.shape[0], *out_hw), np.int64)
    _launch(_kern()._max_pool_kernel, out.size, x, *kernel, *stride, *padding, *dilation, out, idx)
    return _half_back((out, idx), half)


def max_pool2d_backward(g, indices, in_hw: tuple):
    half = g.dtype == _HALF
    g = ascontiguous(_single(g))
    gx = zeros((g.shape[0], *in_hw), g.dtype)
    _launch(_kern()._max_pool_backward_kernel, g.size, g, ascontiguous(indices), gx)
    return _half_back(gx, half)


def avg_pool2d(x, kernel: tuple, stride: tuple, padding: tuple, count_include_pad: bool, divisor: int,
               out_hw: tuple):  # fmt: skip
    """Mean over windows of the (P, H, W) planes; ``divisor`` > 0 replaces the window size."""
    half = x.dtype == _HALF
    x = ascontiguous(_single(x))
    out = empty((x.shape[0], *out_hw), x.dtype)
    _launch(
        _kern()._avg_pool_kernel, out.size, x, *kernel, *stride, *padding, bool(count_include_pad), int(divisor), out
    )
    return _half_back(out, half)


def avg_pool2d_backward(g, kernel: tuple, stride: tuple, padding: tuple, count_include_pad: bool, divisor: int,
                        in_hw: tuple):  # fmt: skip
    half = g.dtype == _HALF
    g = ascontiguous(_single(g))
    gx = zeros((g.shape[0], *in_hw), g.dtype)
    _launch(
        _kern()._avg_pool_backward_kernel,
        g.size,
        g,
        *kernel,
        *stride,
        *padding,
        bool(count_include_pad),
        int(divisor),
        gx,
    )
    return _half_back(gx, half)


def adaptive_avg_pool2d(x, out_hw: tuple):
    half = x.dtype == _HALF
    x = ascontiguous(_single(x))
    out = empty((x.shape[0], *out_hw), x.dtype)
    _launch(_kern()._adaptive_avg_kernel, out.size, x, out)
    return _half_back(out, half)


def adaptive_avg_pool2d_backward(g, in_hw: tuple):
    half = g.dtype == _HALF
    g = ascontiguous(_single(g))
    gx = zeros((g.shape[0], *in_hw), g.dtype)
    _launch(_kern()._adaptive_avg_backward_kernel, g.size, g, gx)
    return _half_back(gx, half)


def layer_norm(x, weight, bias, eps: float, n: int) -> tuple:
    """Normalize ``x`` over its trailing ``n`` elements (then ``* weight + bias`` when given): (out in ``x``'s
    shape, mean and rstd per row)."""
    half = x.dtype == _HALF
    x = ascontiguous(_single(x))
    rows = x.size // n if n else 0
    dtype = np.dtype(x.dtype)
    out = empty(tuple(x.shape), dtype)
    mean, rstd = empty((rows,), dtype), empty((rows,), dtype)
    affine = weight is not None or bias is not None
    w = astype(weight, dtype).reshape(n) if weight is not None else full((n,), 1, dtype)
    b = astype(bias, dtype).reshape(n) if bias is not None else zeros((n,), dtype)
    if rows and n:
        _launch(
            _kern()._layer_norm_kernel,
            rows,
            x.reshape(rows, n),
            w,
            b,
            float(eps),
            affine,
            out.reshape(rows, n),
            mean,
            rstd,
        )
    return _half_back((out, mean, rstd), half)


def residual_layer_norm(a, v, c, weight, bias, eps: float, n: int) -> tuple:
    """``s = a + (v + c)`` (``c`` None: ``a + v``) and ``layer_norm(s, ...)``: (s, out, mean, rstd). On the device
    the sum is its own kernel, then the norm's."""
    dtype = np.dtype(a.dtype)
    if c is not None:
        v = elementwise(ROWS["add"], [v, c], (), dtype)
    s = elementwise(ROWS["add"], [a, v], (), dtype)
    return (s, *layer_norm(s, weight, bias, eps, n))


def layer_norm_backward(g, x, mean, rstd, weight, param_shape: tuple, need_x: bool, need_wb: bool, carry=None,
                        need_c: bool = False) -> tuple:  # fmt: skip
    """(grad of x in its shape, or None; the sums over rows of ``g * xhat`` and of ``g`` in ``param_shape``, for
    weight and bias, or None). With ``carry`` the grad of x includes it; ``need_c`` adds a fourth result, that
    total's sums over rows."""
    half = x.dtype == _HALF
    x, mean, rstd = ascontiguous(_single(x)), _single(mean), _single(rstd)
    dtype = np.dtype(x.dtype)
    rows = mean.shape[0]
    n = x.size // rows if rows else 0
    x2 = x.reshape(rows, n)
    g2 = astype(g, dtype).reshape(rows, n)
    gx = gw = gb = None
    if need_x or need_c:
        w = astype(weight, dtype).reshape(n) if weight is not None else full((n,), 1, dtype)
        gx = empty(tuple(x.shape), dtype)
        _launch(_kern()._layer_norm_backward_x_kernel, rows, g2, x2, mean, rstd, w, gx.reshape(rows, n))
        if carry is not None:
            elementwise(ROWS["add"], [gx, astype(carry, dtype)], (), dtype, out=gx)
    if need_wb:
        gw, gb = zeros(tuple(param_shape), dtype), zeros(tuple(param_shape), dtype)
        _launch(_kern()._layer_norm_backward_wb_kernel, n, g2, x2, mean, rstd, gw.reshape(n), gb.reshape(n))
    grads = _half_back((gx if need_x else None, gw, gb), half)
    return (*grads, _half_back(sum_to_shape(gx, (n,)), half)) if need_c else grads


_rnn_kernels_module = None


def _rnn_kern():
    """``cuda_rnn_kernels`` (imported on first use: importing it imports numba.cuda)."""
    global _rnn_kernels_module
    if _rnn_kernels_module is None:
        from . import cuda_rnn_kernels  # lazy: importing it imports numba.cuda

        _rnn_kernels_module = cuda_rnn_kernels
    return _rnn_kernels_module


def _rnn_step(kernel, n: int, inputs: list, outputs: list) -> None:
    """Launch an LSTM or GRU step kernel over ``n`` state elements; float16 arrays run on float32 copies whose
    results are written back into ``outputs``."""
    if outputs[0].dtype != _HALF:
        _launch(kernel, n, *inputs, *outputs)
        return
    wide = [empty(tuple(a.shape), _SINGLE) for a in outputs]
    _launch(kernel, n, *(_single(a) for a in inputs), *wide)
    for out, a in zip(outputs, wide):
        assign(out, a)


def lstm_cell(xi, hh, c, acts, h_out, c_out) -> None:
    """One LSTM step in one kernel (as the CPU backend's ``lstm_cell``)."""
    _rnn_step(_rnn_kern().lstm_cell_kernel, c.size, [xi, hh, c], [acts, h_out, c_out])


def lstm_layer(xi, h0, c0, w_hh, reverse: bool, acts, output, cells):
    """The CPU backend's whole-layer loop has no device twin here: returns None, and the layer runs its steps
    one ``lstm_cell`` kernel each (their launches queue without waiting for each other)."""
    return None


def lstm_cell_backward(g_out, g_rec, g_c, acts, c_prev, c_new, d_gates, g_c_prev) -> None:
    """``lstm_cell``'s gradients in one kernel (as the CPU backend's ``lstm_cell_backward``)."""
    _rnn_step(_rnn_kern().lstm_cell_backward_kernel, c_new.size, [g_out, g_rec, g_c, acts, c_prev, c_new],
              [d_gates, g_c_prev])  # fmt: skip


def gru_cell(xi, gh, h, acts, h_out) -> None:
    """One GRU step in one kernel (as the CPU backend's ``gru_cell``)."""
    _rnn_step(_rnn_kern().gru_cell_kernel, h.size, [xi, gh, h], [acts, h_out])


def gru_cell_backward(g_out, g_rec, acts, h, d_xi, d_gh, g_h) -> None:
    """``gru_cell``'s gradients in one kernel (as the CPU backend's ``gru_cell_backward``)."""
    _rnn_step(_rnn_kern().gru_cell_backward_kernel, h.size, [g_out, g_rec, acts, h], [d_xi, d_gh, g_h])


def cross_entropy(x, target, weight, smoothing: float, ignore_index: int, reduction: str):
    """Cross entropy of (N, C, S) logits with class indices (a device int64 array, one per position ``n * S +
    s``), label smoothing and class weights, reduced: (softmax probabilities (N, C, S), the loss (0-d, or per
    position for ``reduction='none'``), the mean's denominator: a 1-element device array for ``'mean'``, else
    1.0). Nothing is read back to the host."""
    half = x.dtype == _HALF
    x = ascontiguous(_single(x))
    dtype = np.dtype(x.dtype)
    n = x.shape[0] * x.shape[2]
    weighted = weight is not None
    w = astype(weight, dtype) if weighted else full((1,), 1, dtype)
    t = astype(target, np.int64).reshape(n) if is_device_array(target) else from_host(target)
    probs, losses, counts = empty(tuple(x.shape), dtype), empty((n,), dtype), empty((n,), dtype)
    if x.size:
        _launch(
            _kern()._cross_entropy_kernel,
            n,
            x,
            t,
            w,
            weighted,
            float(smoothing),
            int(ignore_index),
            probs,
            losses,
            counts,
        )
    else:
        assign(losses, 0)
        assign(counts, 0)
    if reduction == "none":
        return _half_back((probs, losses, 1.0), half)
    loss = reduce(losses, "sum", None, False, np.float64)
    total = reduce(counts, "sum", None, False, np.float64).reshape(1) if reduction == "mean" else 1.0
    if reduction == "mean":
        loss = elementwise(ROWS["div"], [loss, total.reshape(())], (), np.dtype(np.float64))
    return _half_back((probs, astype(loss, dtype), total), half)


def cross_entropy_backward(probs, target, weight, smoothing: float, ignore_index: int, g, total) -> object:
    """The gradient of ``cross_entropy``'s loss, (N, C, S) as its ``probs``, for the incoming gradient ``g`` (0-d,
    or per position)."""
    half = probs.dtype == _HALF
    probs = ascontiguous(_single(probs))
    dtype = np.dtype(probs.dtype)
    n = probs.shape[0] * probs.shape[2]
    weighted = weight is not None
    w = astype(weight, dtype) if weighted else full((1,), 1, dtype)
    t = astype(target, np.int64).reshape(n) if is_device_array(target) else from_host(target)
    g1 = astype(g, np.float64).reshape(-1) if is_device_array(g) else full((1,), g, np.float64)
    tot = total if is_device_array(total) else full((1,), total, np.float64)
    out = empty(tuple(probs.shape), dtype)
    _launch(
        _kern()._cross_entropy_backward_kernel,
        n,
        probs,
        t,
        w,
        weighted,
        float(smoothing),
        int(ignore_index),
        g1,
        tot,
        out,
    )
    return _half_back(out, half)


def _index_device(index):
    """An index array on the device as contiguous int64 (a host one is uploaded)."""
    if not is_device_array(index):
        index = constant(np.asarray(index, np.int64))
    return ascontiguous(index) if index.dtype == np.int64 else astype(index, np.int64)


def _region(a, shape: tuple, dim: int):
    """The basic view of ``a`` cut to ``shape`` on every dim but ``dim``."""
    return _basic_view(a, tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(shape)))


def gather(a, dim: int, index):
    """``out[i][j] = a[index[i][j]][j]`` (for ``dim = 0``): torch's gather; ``index`` may be smaller than ``a``."""
    index = _index_device(index)
    src = _three_d(copy(_region(a, tuple(index.shape), dim)), dim)
    out = empty(tuple(index.shape), a.dtype)
    _launch(_kern()._gather_kernel, out.size, src, _three_d(index, dim), _three_d(out, dim))
    return out


def take_along_axis(a, idx, dim: int):
    """``np.take_along_axis`` (the index's shape equal to ``a``'s but along ``dim``, or broadcast to it)."""
    idx = _index_device(idx)
    shape = tuple(a.shape[d] if d != dim else idx.shape[d] for d in range(a.ndim))
    if tuple(idx.shape) != shape:
        idx = _materialize(idx, shape, np.int64)
    return gather(a, dim, idx)


def _scatter_into(out, dim: int, index, src, add: bool) -> None:
    """``out`` (contiguous) with ``src`` written or added at ``index`` along ``dim``."""
    index = _index_device(index)
    shape = tuple(index.shape)
    whole = all(shape[d] == out.shape[d] for d in range(out.ndim) if d != dim)
    region = out if whole else copy(_region(out, shape, dim))
    if is_device_array(src):
        src = _materialize(_basic_view(src, tuple(slice(0, s) for s in shape)), shape, out.dtype)
    else:
        src = full(shape, src, out.dtype)
    i3 = _three_d(index, dim)
    _launch(_kern()._scatter_kernel, i3.shape[0] * i3.shape[2], _three_d(region, dim), i3, _three_d(src, dim), add)
    if not whole:
        assign(_region(out, shape, dim), region)


def scatter(a, dim: int, index, src, reduce: str | None = None):
    """A copy of ``a`` with ``src`` written (``reduce=None``) or added (``"add"``) at ``index`` along ``dim``
    (``"multiply"`` on the host)."""
    if reduce not in (None, "add"):
        return _host_op("scatter")(a, dim, index, src, reduce)
    out = copy(a)
    _scatter_into(out, dim, index, src, reduce == "add")
    return out


def put_along_axis_zeros(shape: tuple, idx, values, dim: int):
    """Zeros of ``shape`` with ``values`` added at ``idx`` along ``dim`` (repeated indices add up)."""
    dtype = np.dtype(values.dtype)
    half = dtype == _HALF
    out = zeros(tuple(shape), _SINGLE if half else dtype)
    _scatter_into(out, dim, idx, _single(values), True)
    return _half_back(out, half)


def index_select(a, dim: int, index):
    """The slices of ``a`` at the 1-d ``index`` along ``dim``."""
    index = _index_device(index).reshape(-1)
    shape = tuple(a.shape)
    out = empty(shape[:dim] + (index.size,) + shape[dim + 1 :], a.dtype)
    _launch(_kern()._select_kernel, out.size, _three_d(a, dim), index, _three_d(out, dim))
    return out


def _add_rows_into(out, dim: int, index, src) -> None:
    """``out[..., index, ...] += src`` along ``dim`` (contiguous ``out``; repeated indices add up)."""
    index = _index_device(index).reshape(-1)
    shape = tuple(out.shape)
    block = shape[:dim] + (index.size,) + shape[dim + 1 :]
    src = _materialize(src, block, out.dtype) if is_device_array(src) else full(block, src, out.dtype)
    s3 = _three_d(src, dim)
    _launch(_kern()._put_rows_kernel, s3.shape[0] * s3.shape[2], _three_d(out, dim), index, s3, True)


def index_add(a, dim: int, index, src):
    """A copy of ``a`` with ``src`` added at ``index`` along ``dim`` (repeated indices add up)."""
    out = copy(a)
    _add_rows_into(out, dim, index, src)
    return out


def _leading_rows(shape: tuple, index):
    """For an index of integer arrays on the leading dims (then only full slices): (flat int64 row numbers in the
    arrays' broadcast shape, how many dims they index). None for any other index."""
    items = index if isinstance(index, tuple) else (index,)
    arrays = []
    for item in items:
        if isinstance(item, np.ndarray) or is_device_array(item):
            if np.dtype(item.dtype).kind not in "iu":
                return None
            arrays.append(item)
        elif isinstance(item, list):
            return None
    lead = len(arrays)
    if not lead or lead > len(shape):
        return None
    if any(not (isinstance(i, np.ndarray) or is_device_array(i)) for i in items[:lead]):
        return None
    if any(not (i is Ellipsis or (isinstance(i, slice) and i == slice(None))) for i in items[lead:]):
        return None
    batch = np.broadcast_shapes(*[tuple(a.shape) for a in arrays])
    rows = zeros(batch, np.int64)
    for d, a in enumerate(arrays):
        idx = _index_device(a)
        idx = idx if tuple(idx.shape) == batch else _materialize(idx, batch, np.int64)
        _launch(_kern()._row_of_kernel, rows.size, rows.reshape(-1), idx.reshape(-1), np.int64(shape[d]))
    return rows, lead


def _advanced_getitem(a, index):
    """``a[index]``: a device view for a basic index; integer arrays on the leading dims gather rows on the
    device; any other advanced index round-trips through the host."""
    if not _is_advanced(index):
        return _basic_view(a, index)
    found = _leading_rows(tuple(a.shape), index)
    if found is None:
        return from_host(cpu.getitem(to_host(a), _host_index(index)))
    rows, lead = found
    shape = tuple(a.shape)
    table = ascontiguous(a).reshape(math.prod(shape[:lead]), math.prod(shape[lead:]))
    return index_select(table, 0, rows.reshape(-1)).reshape(tuple(rows.shape) + shape[lead:])


def _put(out, index, values, accumulate: bool) -> bool:
    """``out[index] = values`` (added with ``accumulate``) into contiguous ``out`` on the device when ``index`` is
    integer arrays on the leading dims; False (nothing done) otherwise."""
    found = _leading_rows(tuple(out.shape), index)
    if found is None:
        return False
    rows, lead = found
    shape = tuple(out.shape)
    block = tuple(rows.shape) + shape[lead:]
    if is_device_array(values):
        src = _materialize(values, block, out.dtype)
    else:
        src = full(block, values, out.dtype)
    table = out.reshape(1, math.prod(shape[:lead]), math.prod(shape[lead:]))
    inner = math.prod(shape[lead:])
    _launch(_kern()._put_rows_kernel, inner, table, rows.reshape(-1), src.reshape(1, rows.size, inner), accumulate)
    return True


def _advanced_setitem(dst, index, value) -> None:
    """``dst[index] = value``: basic indices write through a device view, integer arrays on the leading dims by a
    kernel (repeated indices: one of the writes wins, as on torch's GPU); other advanced indices on the host."""
    if is_device_array(value):
        value = copy(value)  # (it may overlap dst)
    if not _is_advanced(index):
        assign(_basic_view(dst, index), value)
        return
    target = dst if is_contiguous(dst) else copy(dst)
    if _put(target, index, value, False):
        if target is not dst:
            assign(dst, target)
        return
    host = dst.copy_to_host()
    host[_host_index(index)] = value.copy_to_host() if is_device_array(value) else value
    assign(dst, from_host(host))


def index_put(a, index: tuple, values, accumulate: bool):
    """A copy of ``a`` with ``values`` written at ``a[index]`` (added, repeated indices included, if
    ``accumulate``)."""
    out = copy(a)
    if _put(out, index, values, accumulate):
        return out
    return _host_op("index_put")(a, index, values, accumulate)


def index_add_zeros(shape: tuple, dtype, index, values):
    """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices add up); a basic index, which
    cannot repeat, is a plain assignment."""
    dtype = np.dtype(dtype)
    if not _is_advanced(index):
        out = zeros(tuple(shape), dtype)
        assign(_basic_view(out, index), values)
        return out
    out = zeros(tuple(shape), dtype)
    if _put(out, index, values, True):
        return out
    host_values = to_host(values) if is_device_array(values) else values
    return from_host(cpu.index_add_zeros(tuple(shape), dtype, _host_index(index), host_values))


def arg_reduce(a, op: str, axis: int | None, keepdim: bool):
    """``argmax``/``argmin`` as int64 (``axis`` None flattens)."""
    if a.ndim == 0:
        return zeros((), np.int64)
    src = ascontiguous(_single(a))
    if axis is None:
        out = empty((1, 1), np.int64)
        _launch(_kern()._arg_kernel, 1, src.reshape(1, src.size, 1), op == "argmax", out)
        return out.reshape((1,) * a.ndim if keepdim else ())
    axis = axis % a.ndim
    shape = tuple(a.shape)
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    out = empty((outer, inner), np.int64)
    _launch(_kern()._arg_kernel, out.size, _three_d(src, axis), op == "argmax", out)
    kept = shape[:axis] + ((1,) if keepdim else ()) + shape[axis + 1 :]
    return out.reshape(kept)


def cumulative(a, op: str, dim: int, dtype):
    """``cumsum`` or ``cumprod`` along ``dim`` in ``dtype``; floats accumulate in float64, as torch's CPU kernel."""
    dtype = np.dtype(dtype)
    if a.ndim == 0:
        return astype(a, dtype)
    work = np.dtype(np.float64) if dtype.kind == "f" else dtype
    src = astype(a, work)
    out = empty(tuple(a.shape), work)
    if a.size:
        s3 = _three_d(src, dim)
        _launch(_kern()._scan_kernel, s3.shape[0] * s3.shape[2], s3, op == "cumprod", _three_d(out, dim))
    return out if work == dtype else astype(out, dtype)


def sort(a, dim: int, descending: bool):
    """Stable sort along ``dim``: (values, int64 indices); NaN sorts as the largest value."""
    if a.ndim == 0:
        return copy(a), zeros((), np.int64)
    half = a.dtype == _HALF
    src = ascontiguous(_single(a))
    values = empty(tuple(a.shape), src.dtype)
    indices = empty(tuple(a.shape), np.int64)
    if a.size:
        s3 = _three_d(src, dim)
        _launch(
            _kern()._sort_kernel,
            s3.shape[0] * s3.shape[2],
            s3,
            bool(descending),
            _three_d(values, dim),
            _three_d(indices, dim),
        )
    return _half_back(values, half), indices


def topk(a, k: int, dim: int, largest: bool):
    """The first ``k`` of a stable sort along ``dim`` (descending for ``largest``): (values, int64 indices)."""
    values, indices = sort(a, dim, largest)
    cut = tuple(slice(0, k) if d == dim else slice(None) for d in range(a.ndim))
    return copy(_basic_view(values, cut)), copy(_basic_view(indices, cut))


def triangle(a, upper: bool, diagonal: int):
    """``triu``/``tril`` of the last two dims: the other triangle zeroed."""
    shape = tuple(a.shape)
    src = ascontiguous(a).reshape(math.prod(shape[:-2]), shape[-2], shape[-1])
    out = empty(shape, a.dtype)
    _launch(_kern()._triangle_kernel, a.size, src, bool(upper), int(diagonal), out.reshape(src.shape))
    return out


def dropout_keep(shape: tuple, p: float, dtype, rng) -> object:
    """Dropout's mask (1 keeps, 0 drops, in ``dtype``) drawn on the device from one seed taken from the host
    generator ``rng`` (so ``manual_seed`` makes it reproducible; the stream differs from the CPU's)."""
    out = empty(tuple(shape), dtype)
    seed = int(rng.integers(0, np.iinfo(np.int64).max, dtype=np.int64))
    _launch(_kern()._keep_kernel, out.size, _flat(out), np.uint64(seed), float(np.float32(p)))
    return out


def flip(a, dims: tuple):
    """A contiguous copy of ``a`` reversed along ``dims``, one kernel pass per dim."""
    out = copy(a)
    for d in sorted({d % a.ndim for d in dims} if a.ndim else ()):
        if a.shape[d] > 1:
            src, out = out, empty(tuple(a.shape), a.dtype)
            _launch(_kern()._reverse_kernel, a.size, _three_d(src, d), _three_d(out, d))
    return out


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


def getitem(a, index):
    """``a[index]``: a device view for a basic index, else ``cuda_kernels.getitem``'s gather."""
    if not _is_advanced(index):
        return _basic_view(a, index)
    return _advanced_getitem(a, index)


def setitem(dst, index, value) -> None:
    """``dst[index] = value``: basic indices write through a device view (a device ``value`` is copied first: it
    may overlap ``dst``), advanced ones by ``cuda_kernels.setitem``."""
    if not _is_advanced(index):
        assign(_basic_view(dst, index), copy(value) if is_device_array(value) else value)
        return
    _advanced_setitem(dst, index, value)


# Backend functions still run by a host round trip through the cpu backend (none is used by a training step; see
# ``cuda_kernels``'s docstring).
tile = _host_op("tile")
coo_matmul = _host_op("coo_matmul")
einsum = _host_op("einsum")
embed_diagonal = _host_op("embed_diagonal")
index_fill = _host_op("index_fill")
masked_scatter = _host_op("masked_scatter")
repeat_index = _host_op("repeat_index")
roll = _host_op("roll")
unique = _host_op("unique")


scatter_reduce = _host_op("scatter_reduce")


def _allocation(a):
    """The device allocation ``a`` views (numba's owner of its memory pointer)."""
    return a.gpu_data.owner


def storage_offset(a) -> int:
    """Elements between the start of ``a``'s allocation and its first element, as ``cpu.storage_offset``."""
    if simulator():
        return cpu.storage_offset(a._ary)
    if a.gpu_data is None:
        return 0
    return (data_ptr(a) - _allocation(a).device_pointer_value) // a.dtype.itemsize


def storage_nbytes(a) -> int:
    """The size in bytes of ``a``'s allocation, as ``cpu.storage_nbytes``."""
    if simulator():
        return cpu.storage_nbytes(a._ary)
    return 0 if a.gpu_data is None else _allocation(a).size


def storage_block(a, dtype):
    """``a``'s allocation as a 1-D array of ``dtype``, as ``cpu.storage_block``."""
    if simulator():
        return _Array(cpu.storage_block(a._ary, dtype))
    dtype = np.dtype(dtype)
    n = storage_nbytes(a) // dtype.itemsize
    gpu_data = _allocation(a) if n else None
    return _Array((n,), (dtype.itemsize,), dtype, stream=a.stream, gpu_data=gpu_data)


def as_strided(a, shape: tuple, strides: tuple, offset: int):
    """A view of ``a``'s allocation, as ``cpu.as_strided`` (the caller checks the bounds)."""
    if simulator():
        return _Array(cpu.as_strided(a._ary, shape, strides, offset))
    item = a.dtype.itemsize
    size = int(np.prod(shape, dtype=np.int64))
    gpu_data = _allocation(a).view(offset * item) if size and a.gpu_data is not None else None
    return _Array(tuple(shape), tuple(s * item for s in strides), a.dtype, stream=a.stream, gpu_data=gpu_data)


# --- complex numbers: views of the parts, and kernels in ``cuda_kernels`` ------------------------------------------
def real_part(a):
    """The real parts of a complex array, as a view sharing its memory (as ``cpu.real_part``)."""
    return _view(a, lambda x: x.real)


def imag_part(a):
    """The imaginary parts of a complex array, as a view sharing its memory."""
    return _view(a, lambda x: x.imag)


def view_as_real(a):
    """A complex array's memory seen as floats with a last dim of 2, as ``cpu.view_as_real``."""
    return _view(a, cpu.view_as_real)


def view_as_complex(a, dtype: np.dtype):
    """Pairs of floats (a last dim of 2, stride 1) seen as complex numbers of ``dtype``, sharing the memory."""
    return _view(a, lambda x: cpu.view_as_complex(x, dtype))


def _flat(a):
    """``a`` as a 1-D contiguous device array (a copy only when it is not contiguous)."""
    return reshape(ascontiguous(a), (a.size,))


def _complex_map(kernel, a, dtype):
    """A new array of ``a``'s shape and ``dtype`` from a one-input grid-stride complex ``kernel``."""
    out = empty(tuple(a.shape), np.dtype(dtype))
    _launch(kernel, a.size, _flat(a), reshape(out, (a.size,)))
    return out


def conj(a):
    """The complex conjugates of ``a`` in a new array (as ``cpu.conj``)."""
    return _complex_map(_kern()._conj_kernel, a, a.dtype)


def make_complex(re, im, dtype):
    """The complex array ``re + im * 1j`` of ``dtype`` (parts of one shape)."""
    out = empty(tuple(re.shape), np.dtype(dtype))
    _launch(_kern()._make_complex_kernel, out.size, _flat(re), _flat(im), reshape(out, (out.size,)))
    return out


def complex_abs(a):
    """``|a|`` of a complex array, in its parts' float dtype."""
    return _complex_map(_kern()._complex_abs_kernel, a, cpu._parts_dtype(a.dtype))


def complex_angle(a):
    """The argument of each complex element, in its parts' float dtype."""
    return _complex_map(_kern()._complex_angle_kernel, a, cpu._parts_dtype(a.dtype))


def complex_sgn(a):
    """``a / |a|`` of a complex array, 0 where ``a`` is 0."""
    return _complex_map(_kern()._complex_sgn_kernel, a, a.dtype)


def diagonal(a, offset: int, dim1: int, dim2: int):
    """A view of the diagonal, as ``cpu.diagonal``."""
    return _view(a, lambda x: cpu.diagonal(x, offset, dim1, dim2))


#: The backend interface: exactly ``cpu.__all__``, listed there once (tests/test_backend.py checks that every name
#: is a function here with the CPU one's parameters).
__all__ = list(cpu.__all__)
