"""torch's storage objects: the memory block a tensor views, as bytes (``UntypedStorage``, what
``Tensor.untyped_storage()`` returns) or as elements of one dtype (``TypedStorage``, ``Tensor.storage()``, which torch
deprecates), and the legacy per-dtype names (``FloatStorage``...).

A storage holds a 1-D tensor over the whole block (``backend.storage_block``), so reading it reads the tensor's
memory and writing through it changes every tensor viewing that block, as in torch. Views of one base share one
block, so they report the same ``data_ptr()``; while a storage object is alive, asking a tensor of its block for its
storage again returns that same object (torch's storages keep one Python object too).
"""

from __future__ import annotations

import collections.abc
import operator
import warnings
import weakref

import numpy as np

from .. import _types
from .._tensor import Tensor, expose
from .._typeinfo import CPP_NAMES
from .._types import to_dtype, uint8
from ..autograd.grad_mode import no_grad
from ._registry import Declaration, register
from .creation import tensor as _make_tensor
from .creation import zeros as _zeros

#: The live storage objects, by (device, first address, size in bytes) of their block.
_LIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

_TYPED_STORAGE_REMOVAL = (
    "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage class. "
    "This should only matter to you if you are using storages directly.  To access UntypedStorage directly, use "
    "tensor.untyped_storage() instead of tensor.storage()"
)


def _warn_typed_storage_removal(stacklevel: int = 3) -> None:
    warnings.warn(_TYPED_STORAGE_REMOVAL, UserWarning, stacklevel=stacklevel)


def _block(data, dtype) -> Tensor:
    """The whole memory block ``data`` views, as a 1-D tensor of ``dtype``."""
    return Tensor._make(Tensor._make(data)._backend.storage_block(data, dtype.numpy))


def _key(block: Tensor) -> tuple:
    """What identifies a whole block: its device, first address and size."""
    return str(block.device), block.data_ptr(), block.numel()


def _index(idx: int, size: int, wrapped_in_message: bool) -> int:
    """``idx`` as a position in ``[0, size)`` (one negative wrap), or torch's IndexError naming ``idx`` (or, as
    ``UntypedStorage`` does, ``idx`` after the wrap)."""
    position = idx + size if idx < 0 else idx
    if not 0 <= position < size:
        raise IndexError(f"index {position if wrapped_in_message else idx} out of range for storage of size {size}")
    return position


def _typename(obj) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _storage_repr(storage, header: str) -> str:
    """torch's layout: each element on its own line after a space, then the header line."""
    values = storage.tolist()
    return " " + "\n ".join(str(v) for v in values) + f"\n[{header} of size {len(values)}]"


class UntypedStorage:
    """The bytes of a memory block: ``UntypedStorage()``, ``UntypedStorage(size)`` (zeros) or
    ``UntypedStorage(sequence_of_ints)``, on ``device``; or a tensor's, from ``Tensor.untyped_storage()``."""

    is_sparse = False

    def __init__(self, *args, device=None) -> None:
        if len(args) > 1:
            raise TypeError(f"UntypedStorage() takes at most 1 positional argument ({len(args)} given)")
        arg = args[0] if args else 0
        if isinstance(arg, (int, np.integer)) and not isinstance(arg, bool):
            data = _zeros(int(arg), dtype=uint8, device=device)
        else:
            data = _make_tensor(np.array([operator.index(v) & 0xFF for v in arg], dtype=np.uint8), device=device)
        self._bytes = data
        _LIVE[_key(data)] = self

    @classmethod
    def _of(cls, data) -> UntypedStorage:
        """The storage object of the block the backend array ``data`` views (the live one, if any)."""
        block = _block(data, uint8)
        storage = _LIVE.get(_key(block))
        if storage is None:
            storage = cls.__new__(cls)
            storage._bytes = block
            _LIVE[_key(block)] = storage
        return storage

    def nbytes(self) -> int:
        """The size of the block in bytes."""
        return self._bytes.numel()

    def size(self) -> int:
        """Bytes, as ``nbytes()``."""
        return self._bytes.numel()

    def __len__(self) -> int:
        return self._bytes.numel()

    def element_size(self) -> int:
        """One: an untyped storage counts bytes."""
        return 1

    @property
    def device(self) -> _types.device:
        """The device the block lives on."""
        return self._bytes.device

    @property
    def is_cuda(self) -> bool:
        """Whether the block lives on a cuda device."""
        return self._bytes.device.type == "cuda"

    def get_device(self):
        """The device's index (None on the CPU, as torch's storages answer)."""
        return self.device.index

    def data_ptr(self) -> int:
        """The block's first address (0 for an empty block)."""
        return self._bytes.data_ptr() if self._bytes.numel() else 0

    def untyped(self) -> UntypedStorage:
        """Itself (what a typed storage answers with its bytes)."""
        return self

    def tolist(self) -> list:
        """The bytes as ints."""
        return self._bytes.tolist()

    def __getitem__(self, idx):
        """A byte as an int, or a slice (step 1) as a storage sharing the bytes."""
        if isinstance(idx, slice):
            start, stop, step = idx.indices(len(self))
            if step != 1:
                raise RuntimeError(f"Trying to slice with a step of {step}, but only a step of 1 is supported")
            part = UntypedStorage.__new__(UntypedStorage)
            part._bytes = self._bytes[start : max(start, stop)]
            return part
        if not isinstance(idx, (int, np.integer)):
            raise TypeError(f"can't index a numbagrad.UntypedStorage with {type(idx).__name__}")
        return int(self._bytes[_index(int(idx), len(self), True)].item())

    def __setitem__(self, idx, value) -> None:
        """Write a byte (an int, kept modulo 256 as torch's cast to uint8 keeps it) at a position in ``[0, size)``, or
        one value over a slice."""
        if isinstance(value, float):
            raise RuntimeError("can only set storage content with a int types, but got float instead")
        byte = operator.index(value) & 0xFF
        if isinstance(idx, slice):
            start, stop, step = idx.indices(len(self))
            target = slice(start, max(start, stop), step)
        else:
            target = operator.index(idx)
            if not 0 <= target < len(self):  # (torch's byte writes take no negative index)
                raise RuntimeError("out of bounds")
        with no_grad():
            self._bytes[target] = byte

    def fill_(self, value) -> UntypedStorage:
        """Set every byte to ``value`` (an int, kept modulo 256)."""
        if not isinstance(value, (int, np.integer)):
            raise RuntimeError(f"fill_ expects int, but got {type(value).__name__}")
        with no_grad():
            self._bytes.fill_(int(value) & 0xFF)
        return self

    def copy_(self, src, non_blocking: bool = False) -> UntypedStorage:
        """Copy ``src``'s bytes (a storage of the same size in bytes, on any device) into this storage."""
        if not isinstance(src, (UntypedStorage, TypedStorage)):
            raise TypeError(f"copy_(): argument 'src' (position 1) must be torch.Storage, not {type(src).__name__}")
        source = src.untyped()._bytes
        if source.numel() != self.nbytes():
            raise RuntimeError(
                f"size does not match, self was {self.nbytes()} bytes but src was {source.numel()} bytes"
            )
        with no_grad():
            self._bytes.copy_(source)
        return self

    def clone(self) -> UntypedStorage:
        """A new block holding a copy of these bytes."""
        copy = UntypedStorage.__new__(UntypedStorage)
        copy._bytes = self._bytes.clone()
        return copy

    def cpu(self) -> UntypedStorage:
        """This storage on the CPU (itself when it is there)."""
        if self._bytes.device.type == "cpu":
            return self
        copy = UntypedStorage.__new__(UntypedStorage)
        copy._bytes = self._bytes.cpu()
        return copy

    def __repr__(self) -> str:
        return _storage_repr(self, f"{_typename(self)}(device={self.device})")


_TYPED_ARGUMENTS = (
    "TypedStorage.__init__ received an invalid combination of arguments. Expected one of:\n"
    " * (*, torch.device device, torch.dtype dtype)\n"
    " * (int size, *, torch.device device, torch.dtype dtype)\n"
    " * (Sequence data, *, torch.device device, torch.dtype dtype)\n"
    " * (*, UntypedStorage wrap_storage, torch.dtype dtype)"
)


class TypedStorage:
    """A memory block read as elements of one dtype (torch deprecates it for ``UntypedStorage``):
    ``TypedStorage(size or sequence, dtype=, device=)`` makes a new block, ``TypedStorage(wrap_storage=untyped,
    dtype=)`` reads an existing one."""

    is_sparse = False

    def __init__(self, *args, wrap_storage=None, dtype=None, device=None, _internal: bool = False) -> None:
        if not _internal:
            _warn_typed_storage_removal()
        if wrap_storage is not None:
            if args:
                raise RuntimeError(
                    _TYPED_ARGUMENTS + "\nNo positional arguments should be given when using 'wrap_storage'"
                )
            if dtype is None:
                raise RuntimeError(_TYPED_ARGUMENTS + "\nArgument 'dtype' must be specified")
            if device is not None:
                raise RuntimeError(
                    _TYPED_ARGUMENTS + "\nArgument 'device' should not be specified when 'wrap_storage' is given"
                )
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError(
                    _TYPED_ARGUMENTS + f"\nArgument 'wrap_storage' must be UntypedStorage, but got {type(wrap_storage)}"
                )
            self.dtype, self._untyped = to_dtype(dtype), wrap_storage
        else:
            self.dtype = _types.get_default_dtype() if dtype is None else to_dtype(dtype)
            if len(args) > 1:
                raise RuntimeError(_TYPED_ARGUMENTS + "\nToo many positional arguments")
            arg = args[0] if args else 0
            if isinstance(arg, (int, np.integer)) and not isinstance(arg, bool):
                elements = _zeros(int(arg), dtype=self.dtype, device=device)
            elif isinstance(arg, collections.abc.Sequence):
                elements = _make_tensor(list(arg), dtype=self.dtype, device=device)
            else:
                raise TypeError(_TYPED_ARGUMENTS + f"\nArgument type not recognized: {type(arg)}")
            self._untyped = UntypedStorage._of(elements._data)
        self._elements = _block(self._untyped._bytes._data, self.dtype)

    def size(self) -> int:
        """The number of elements in the block."""
        return self._elements.numel()

    def __len__(self) -> int:
        return self._elements.numel()

    def nbytes(self) -> int:
        """The size of the block in bytes."""
        return self._untyped.nbytes()

    def element_size(self) -> int:
        """The size of one element in bytes."""
        return self.dtype.itemsize

    @property
    def device(self) -> _types.device:
        """The device the block lives on."""
        return self._untyped.device

    @property
    def is_cuda(self) -> bool:
        """Whether the block lives on a cuda device."""
        return self._untyped.is_cuda

    def get_device(self):
        """The device's index (None on the CPU)."""
        return self._untyped.get_device()

    def cpu(self) -> TypedStorage:
        """This storage's elements on the CPU (the same block when it is there)."""
        return TypedStorage(wrap_storage=self._untyped.cpu(), dtype=self.dtype, _internal=True)

    def data_ptr(self) -> int:
        """The block's first address (0 for an empty block)."""
        return self._untyped.data_ptr()

    def untyped(self) -> UntypedStorage:
        """The bytes of the same block."""
        return self._untyped

    def tolist(self) -> list:
        """The elements as Python numbers."""
        return self._elements.tolist()

    def _position(self, idx) -> int:
        if isinstance(idx, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        if not isinstance(idx, (int, np.integer)):
            raise RuntimeError(f"can't index a {type(self)} with {type(idx)}")
        return _index(int(idx), len(self), False)

    def __getitem__(self, idx):
        return self._elements[self._position(idx)].item()

    def __setitem__(self, idx, value) -> None:
        position = self._position(idx)
        with no_grad():
            self._elements[position] = value

    def fill_(self, value) -> TypedStorage:
        """Set every element to ``value`` (cast to the dtype)."""
        with no_grad():
            self._elements.fill_(value)
        return self

    def copy_(self, src, non_blocking: bool = False) -> TypedStorage:
        """Copy ``src``'s bytes (a storage of the same size in bytes) into this storage."""
        self._untyped.copy_(src, non_blocking)
        return self

    def _get_legacy_storage_class(self):
        """The legacy class of this storage's dtype (``FloatStorage``...), None for a dtype without one."""
        return _LEGACY.get(self.dtype.name)

    def __repr__(self) -> str:
        return _storage_repr(self, f"{_typename(self)}(dtype={self.dtype}, device={self.device})")


class _LegacyStorage(TypedStorage):
    """A per-dtype storage name (``FloatStorage(size or sequence)``, ``FloatStorage(wrap_storage=...)``): calling
    it makes a ``TypedStorage`` of its dtype on the CPU, as in torch."""

    dtype: _types.dtype

    def __new__(cls, *args, wrap_storage=None, **kwargs):
        if kwargs:
            raise RuntimeError(f"{cls.__name__}() takes no keyword argument {next(iter(kwargs))!r}")
        return TypedStorage(*args, wrap_storage=wrap_storage, dtype=cls.dtype)


def _legacy(name: str, dtype: _types.dtype) -> type:
    return type(name, (_LegacyStorage,), {"dtype": dtype, "__doc__": f"The legacy storage name of {dtype}."})


FloatStorage = _legacy("FloatStorage", _types.float32)
DoubleStorage = _legacy("DoubleStorage", _types.float64)
HalfStorage = _legacy("HalfStorage", _types.float16)
BFloat16Storage = _legacy("BFloat16Storage", _types.bfloat16)
LongStorage = _legacy("LongStorage", _types.int64)
IntStorage = _legacy("IntStorage", _types.int32)
ShortStorage = _legacy("ShortStorage", _types.int16)
CharStorage = _legacy("CharStorage", _types.int8)
ByteStorage = _legacy("ByteStorage", _types.uint8)
BoolStorage = _legacy("BoolStorage", _types.bool_)
_LEGACY = {
    c.dtype.name: c
    for c in (FloatStorage, DoubleStorage, HalfStorage, BFloat16Storage, LongStorage, IntStorage, ShortStorage,
              CharStorage, ByteStorage, BoolStorage)
}  # fmt: skip


# --- the Tensor methods ------------------------------------------------------------------------------------------
def untyped_storage(self: Tensor) -> UntypedStorage:
    """The bytes of the memory block this tensor views (shared: writing them changes the tensor)."""
    expose(self)
    return UntypedStorage._of(self._data)


def storage(self: Tensor) -> TypedStorage:
    """The memory block as elements of this tensor's dtype (torch deprecates ``TypedStorage``, and warns)."""
    _warn_typed_storage_removal()
    expose(self)
    return TypedStorage(wrap_storage=UntypedStorage._of(self._data), dtype=self.dtype, _internal=True)


def storage_type(self: Tensor) -> type:
    """The legacy storage class of this tensor's dtype (``FloatStorage``...; torch deprecates it, and warns)."""
    _warn_typed_storage_removal()
    return _LEGACY.get(self.dtype.name)


def block_of(source, dtype: _types.dtype) -> Tensor:
    """``Tensor.set_``'s view of a storage: its whole block as a 1-D tensor of ``dtype`` (a typed storage must hold
    ``dtype``)."""
    if isinstance(source, TypedStorage):
        if source.dtype != dtype:
            raise RuntimeError(
                f"Expected a Storage of type {CPP_NAMES[dtype.name]} or an UntypedStorage, but got type "
                f"{source.dtype.scalar_name} for argument 1 'storage'"
            )
        source = source.untyped()
    return _block(source._bytes._data, dtype)


for _method in (untyped_storage, storage, storage_type):
    register(Declaration(f"_{_method.__name__}", _method, (_method.__name__,), differentiable=False))
