"""DLPack: ``Tensor.__dlpack__``/``__dlpack_device__`` and ``numbagrad.from_dlpack``, zero-copy.

CPU tensors are numpy arrays, and numpy speaks DLPack (1.0, versioned, and the legacy protocol): export and import
go through it. numba's device arrays do not speak DLPack, so for cuda tensors this module builds and reads the C
structures itself, with ctypes (``DLManagedTensor`` and DLPack 1.0's ``DLManagedTensorVersioned`` in a
``PyCapsule``). An imported cuda buffer becomes a numba device array through ``__cuda_array_interface__`` (what
``numba.cuda.as_cuda_array`` consumes), holding the producer's buffer until the tensor is freed; objects that
already expose ``__cuda_array_interface__`` (CuPy, PyTorch) are taken through it directly.

Streams: numbagrad runs its kernels on CUDA's legacy default stream. On export it synchronizes the device before
handing out the capsule, so the consumer's stream sees finished data whatever stream it passes; on import it asks
the producer for stream 1 (the legacy default stream), as the DLPack Python specification says.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ._tensor import Tensor, expose
from ._types import from_numpy_dtype
from .backend import cuda_backend

__all__ = ["from_dlpack"]

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13  # DLDeviceType values
_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_LEGACY, _VERSIONED = b"dltensor", b"dltensor_versioned"
_STRUCT = {_LEGACY: _DLManagedTensor, _VERSIONED: _DLManagedTensorVersioned}

# The C-API calls we need, with prototypes of our own (ctypes.pythonapi's shared ones stay untouched). The capsule
# destructor gets a raw pointer: during deallocation the capsule must not be turned back into a Python object.
_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _api)
)
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_raw_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(("PyCapsule_GetName", _api))

# --- export ----------------------------------------------------------------------------------------------------
_exported: dict[int, tuple] = {}  # struct address -> (struct, shape, strides, owner): alive until the deleter runs
_exported_lock = threading.Lock()


@_Deleter
def _deleter(address: int) -> None:
    """The DLPack deleter (either struct layout): the consumer is done, or the capsule died unused; release
    what the export kept alive."""
    with _exported_lock:
        _exported.pop(address, None)


_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CapsuleDestructor
def _capsule_destructor(capsule: int) -> None:
    """A capsule freed without being consumed still owns its tensor: run the deleter."""
    name = _raw_get_name(capsule)
    if name in (_LEGACY, _VERSIONED) and _raw_is_valid(capsule, name):
        _deleter(_raw_get_pointer(capsule, name))


_DLPACK_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
_NUMPY_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}


def _make_capsule(ptr: int, shape: tuple, strides: tuple, dtype: np.dtype, device: tuple[int, int], owner,
                  versioned: bool, readonly: bool = False):  # fmt: skip
    """A DLPack capsule describing memory at ``ptr`` (``strides`` in elements) that keeps ``owner`` alive."""
    if dtype.kind not in _DLPACK_CODES:
        raise BufferError(f"DLPack cannot describe dtype {dtype}")
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*strides)
    struct = (_DLManagedTensorVersioned if versioned else _DLManagedTensor)()
    t = struct.dl_tensor
    t.data = ptr
    t.device = _DLDevice(*device)
    t.ndim = ndim
    t.dtype = _DLDataType(_DLPACK_CODES[dtype.kind], dtype.itemsize * 8, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    address = ctypes.addressof(struct)
    struct.manager_ctx = address
    struct.deleter = _deleter
    if versioned:
        struct.version = _DLPackVersion(1, 0)
        struct.flags = _READ_ONLY if readonly else 0
    with _exported_lock:
        _exported[address] = (struct, shape_arr, strides_arr, owner)
    name = _VERSIONED if versioned else _LEGACY
    return _capsule_new(address, name, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def dlpack_device(t: Tensor) -> tuple[int, int]:
    """``Tensor.__dlpack_device__``: (kDLCPU, 0) or (kDLCUDA, device index)."""
    if t.is_cuda:
        return (kDLCUDA, t.device.index or 0)
    return (kDLCPU, 0)


def dlpack(t: Tensor, stream=None, max_version=None, dl_device=None, copy=None):
    """``Tensor.__dlpack__``: a capsule sharing ``t``'s memory (numpy's on CPU, built here for cuda)."""
    if t.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if stream is not None and type(stream) is not int:
        raise TypeError("stream must be ``int`` or ``none``")
    versioned = max_version is not None and max_version[0] >= 1
    if not t.is_cuda:
        if stream is not None and stream != -1:
            raise AssertionError("stream should be None on cpu.")
        if dl_device is not None and tuple(dl_device) != (kDLCPU, 0):
            raise BufferError(f"numbagrad cannot export a cpu tensor to device {tuple(dl_device)}")
        kwargs = {"max_version": max_version} if versioned else {}
        if copy is not None:
            kwargs["copy"] = copy
        if not copy:
            expose(t)
        return t._data.__dlpack__(**kwargs)
    if dl_device is not None and tuple(dl_device) != dlpack_device(t):
        raise BufferError(f"numbagrad cannot export a cuda tensor to device {tuple(dl_device)}")
    if copy:
        t = t.clone()
    if stream == 2:
        raise BufferError("per-thread default stream is not supported.")
    cuda = cuda_backend()

    cuda.synchronize()  # our kernels ran on the legacy default stream: finish them before any stream reads
    a = t._data
    itemsize = a.dtype.itemsize
    return _make_capsule(t.data_ptr(), tuple(a.shape), tuple(s // itemsize for s in a.strides), a.dtype,
                         dlpack_device(t), a, versioned)  # fmt: skip


# --- import ----------------------------------------------------------------------------------------------------
class _Imported:
    """Owns a consumed DLPack tensor: describes it and calls the producer's deleter when collected."""

    def __init__(self, capsule) -> None:
        self.managed = None
        name = _VERSIONED if _capsule_is_valid(capsule, _VERSIONED) else _LEGACY
        if not _capsule_is_valid(capsule, name):
            raise ValueError("from_dlpack expects a DLPack capsule that has not been consumed yet")
        self.address = _capsule_get_pointer(capsule, name)
        self.managed = _STRUCT[name].from_address(self.address)
        if name == _VERSIONED and self.managed.version.major > 1:
            raise BufferError(f"DLPack version {self.managed.version.major} is newer than numbagrad understands (1)")
        _capsule_set_name(capsule, b"used_" + name)  # consumed: its destructor no longer frees the tensor
        t = self.managed.dl_tensor
        self.device = (t.device.device_type, t.device.device_id)
        if t.dtype.lanes != 1 or t.dtype.code not in _NUMPY_KINDS:
            self.release()
            raise BufferError(f"numbagrad cannot import DLPack dtype code {t.dtype.code} with {t.dtype.lanes} lanes")
        self.dtype = np.dtype(f"{_NUMPY_KINDS[t.dtype.code]}{t.dtype.bits // 8}")
        if t.dtype.code == 6:
            self.dtype = np.dtype(np.bool_)
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        itemsize = self.dtype.itemsize
        if t.strides:
            self.strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
        else:  # NULL strides: compact row-major
            self.strides, step = [], itemsize
            for n in reversed(self.shape):
                self.strides.insert(0, step)
                step *= n
            self.strides = tuple(self.strides)
        self.data = (t.data or 0) + t.byte_offset
        self.readonly = name == _VERSIONED and bool(self.managed.flags & _READ_ONLY)

    def interface(self) -> dict:
        """The description as ``__cuda_array_interface__``/``__array_interface__`` (version 3) give it."""
        return {
            "shape": self.shape,
            "strides": self.strides,
            "typestr": self.dtype.str,
            "data": (self.data, self.readonly),
            "version": 3,
        }

    def release(self) -> None:
        if self.managed is not None and self.managed.deleter:
            self.managed.deleter(self.address)
        self.managed = None

    def __del__(self) -> None:
        self.release()


class _CudaBuffer:
    """What numba's ``as_cuda_array`` consumes; it holds the import (and so the producer's buffer) alive."""

    def __init__(self, imported: _Imported) -> None:
        self._imported = imported
        self.__cuda_array_interface__ = {**imported.interface(), "stream": None}


class _HostBuffer:
    """What ``np.asarray`` consumes for an imported CPU capsule; the array keeps it (and the import) alive."""

    def __init__(self, imported: _Imported) -> None:
        self._imported = imported
        self.__array_interface__ = imported.interface()


class _CapsuleHolder:
    """Lets numpy import a bare (legacy) capsule, which carries no ``__dlpack__`` of its own."""

    def __init__(self, capsule, device: tuple[int, int]) -> None:
        self._capsule, self._device = capsule, device

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return self._device


def _capsule_device(capsule) -> tuple[int, int]:
    for name, struct in _STRUCT.items():
        if _capsule_is_valid(capsule, name):
            t = struct.from_address(_capsule_get_pointer(capsule, name)).dl_tensor
            return (t.device.device_type, t.device.device_id)
    raise ValueError("from_dlpack expects a DLPack capsule that has not been consumed yet")


def _wrap_host(array: np.ndarray) -> Tensor:
    from_numpy_dtype(array.dtype)  # torch's error for element types numbagrad does not store
    return Tensor._make(array)


def from_dlpack(ext_tensor) -> Tensor:
    """A tensor sharing the memory of any DLPack producer (numpy, torch, CuPy, JAX, ...) or a DLPack capsule.

    CPU memory arrives as a numpy array (through numpy's importer); CUDA memory as a numba device array, through
    the producer's ``__cuda_array_interface__`` when it has one, else through its DLPack capsule. Objects with only
    ``__cuda_array_interface__`` (numba device arrays) are accepted too.
    """
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if type(ext_tensor).__name__ == "PyCapsule":
        device = _capsule_device(ext_tensor)
        if device[0] in (kDLCPU, kDLCUDAHost):  # read here: numpy makes legacy capsules read-only
            imported = _Imported(ext_tensor)
            return _wrap_host(np.asarray(_HostBuffer(imported)))
        return _from_cuda_capsule(ext_tensor)
    if not hasattr(ext_tensor, "__dlpack__"):
        if hasattr(ext_tensor, "__cuda_array_interface__"):  # a numba device array, or an older CuPy
            cuda = cuda_backend()

            return Tensor._make(cuda.as_device_array(ext_tensor))
        raise TypeError(f"from_dlpack expects an object with __dlpack__ or a DLPack capsule, got {type(ext_tensor)}")
    device_type = ext_tensor.__dlpack_device__()[0]
    if device_type in (kDLCPU, kDLCUDAHost):
        return _wrap_host(np.from_dlpack(ext_tensor))
    if device_type not in (kDLCUDA, kDLCUDAManaged):
        raise BufferError(f"numbagrad cannot import memory of DLPack device type {device_type}")
    cuda = cuda_backend()

    if hasattr(ext_tensor, "__cuda_array_interface__"):
        return Tensor._make(cuda.as_device_array(ext_tensor))
    try:
        capsule = ext_tensor.__dlpack__(stream=1, max_version=(1, 0))
    except TypeError:  # a producer that predates DLPack 1.0's keywords
        capsule = ext_tensor.__dlpack__(stream=1)
    return _from_cuda_capsule(capsule)


def _from_cuda_capsule(capsule) -> Tensor:
    cuda = cuda_backend()

    imported = _Imported(capsule)
    if imported.device[0] not in (kDLCUDA, kDLCUDAManaged):
        imported.release()
        raise BufferError(f"expected a CUDA DLPack tensor, got device type {imported.device[0]}")
    from_numpy_dtype(imported.dtype)
    return Tensor._make(cuda.as_device_array(_CudaBuffer(imported)))


def _tensor_dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule sharing this tensor's memory."""
    return dlpack(self, stream, max_version, dl_device, copy)


def _tensor_dlpack_device(self) -> tuple[int, int]:
    """The (device type, device id) of this tensor's memory, in DLPack's numbering."""
    return dlpack_device(self)


# The protocol lives here, with the capsule code; numbagrad's import loads this module and binds it.
Tensor.__dlpack__ = _tensor_dlpack
Tensor.__dlpack_device__ = _tensor_dlpack_device
