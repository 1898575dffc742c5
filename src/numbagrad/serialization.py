"""``numbagrad.save`` and ``numbagrad.load``: checkpoints as a zip of one pickle plus one ``.npy`` per storage.

Layout of a numbagrad checkpoint (every record stored uncompressed, each payload's data 64-byte aligned so that
``mmap=True`` can map it in place)::

    archive/.numbagrad_format   b"1"
    archive/data.pkl            the object, pickled; tensors are REDUCE calls on ``_rebuild_tensor`` whose first
                                argument is the persistent id ``("storage", key, location)``
    archive/byteorder           b"little" or b"big"
    archive/data/<key>.npy      one flat array per storage (the outermost numpy array that owns the memory), so
                                views saved together are views of one storage again after ``load``

``load`` also reads the zip checkpoints that ``torch.save`` writes (``archive/data.pkl`` with
``torch._utils._rebuild_tensor_v2`` calls and ``archive/data/<key>`` raw storages), without importing torch.

``weights_only=True`` (the default, as in torch >= 2.6) unpickles with an allow-list: tensors, Parameters,
containers, numbers, strings, dtypes, devices, sizes, plus what ``add_safe_globals`` registered. Anything else is
refused with torch's ``pickle.UnpicklingError`` text. The allow-list works through ``find_class``, which the
unpickler consults for every global it loads (``GLOBAL``, ``STACK_GLOBAL``, ``INST``/``OBJ`` and extension codes),
so no callable outside the list can be reached.
"""

from __future__ import annotations

import _compat_pickle
import collections
import contextlib
import io
import math
import os
import pickle
import stat
import struct
import sys
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from . import _types, cuda
from ._tensor import Tensor
from ._types import Size, device, from_numpy_dtype, to_device
from .nn.parameter import Parameter

if TYPE_CHECKING:
    import zipfile

__all__ = [
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "load",
    "load_file",
    "safe_globals",
    "save",
    "save_file",
]

_FORMAT_RECORD = ".numbagrad_format"
_FORMAT_VERSION = b"1"
_ALIGN = 64  # payload data starts on a 64-byte boundary (what np.memmap needs for aligned arrays, as torch does)
_EXTRA_ID = 0x474E  # "NG": a private zip extra-field id that pads local headers; zip readers skip unknown ids
_DEFAULT_PROTOCOL = 2  # torch.save's default

UNSAFE_MESSAGE = (
    "In PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` "
    "from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will likely succeed, "
    "but it can result in arbitrary code execution. Do it only if you got the file from a "
    "trusted source."
)
_DOCS_MESSAGE = (
    "\n\nCheck the documentation of torch.load to learn more about types accepted by default with "
    "weights_only https://pytorch.org/docs/stable/generated/torch.load.html."
)
_BLOCKED_MODULES = ("sys", "os", "posix", "nt")


# --- saving ---------------------------------------------------------------------------------------------------
class _Storage:
    """One storage being saved: the flat array (in memory order) and the location its tensors live on."""

    __slots__ = ("key", "flat", "location")

    def __init__(self, key: str, flat: np.ndarray, location: str) -> None:
        self.key, self.flat, self.location = key, flat, location


def _owner(a: np.ndarray) -> np.ndarray:
    """The outermost numpy array in ``a``'s ``base`` chain: the one whose memory ``a`` views."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _flat_memory(a: np.ndarray) -> np.ndarray | None:
    """``a``'s memory as a flat view in address order, or None when it is not one contiguous block."""
    if a.flags.c_contiguous:
        return a.reshape(-1)
    if a.flags.f_contiguous:
        return a.T.reshape(-1)
    return None


def _extent(a: np.ndarray) -> tuple[int, int]:
    """The byte range [lo, hi) of ``a``'s elements, relative to its data pointer."""
    lo = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0) + a.itemsize
    return lo, hi


class _Pickler(pickle.Pickler):
    """Pickles tensors as ``_rebuild_tensor(storage_id, ...)`` and collects their storages, deduplicated."""

    def __init__(self, file: IO[bytes], protocol: int) -> None:
        super().__init__(file, protocol)
        self.storages: dict[int, _Storage] = {}  # id(owner array) -> storage
        self._keep: list = []  # owners stay alive while ids are keys

    def persistent_id(self, obj):
        if type(obj) is _Storage:
            return ("storage", obj.key, obj.location)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return _reduce_tensor(self, obj)
        if type(obj) is device:
            return (device, (obj.type, obj.index))
        if type(obj) is Size:
            return (Size, (tuple(obj),))
        return NotImplemented

    def storage_for(self, a: np.ndarray, location: str) -> tuple[_Storage, int]:
        """The storage holding ``a`` and ``a``'s byte offset in it (views of one owner share one storage)."""
        owner = _owner(a)
        flat = _flat_memory(owner)
        if flat is not None and a.size:
            lo, hi = _extent(a)
            offset = _address(a) - _address(flat)
            if not (0 <= offset + lo and offset + hi <= flat.nbytes):
                flat = None  # a foreign buffer wrapper that does not cover the view: save the view alone
        if flat is None or not a.size:
            owner = flat = np.ascontiguousarray(a).reshape(-1)
            offset = 0
        storage = self.storages.get(id(owner))
        if storage is None:
            storage = self.storages[id(owner)] = _Storage(str(len(self.storages)), flat, location)
            self._keep.append(owner)
        return storage, offset


def _reduce_tensor(pickler: _Pickler, t: Tensor):

    if t.is_cuda:  # device memory is copied to the host; each cuda tensor gets its own storage
        a = np.ascontiguousarray(t._host())
        storage, offset = pickler.storage_for(a, str(t.device))
    else:
        a = t._data
        storage, offset = pickler.storage_for(a, "cpu")
    strides = a.strides if a.size else tuple(0 for _ in a.shape)
    args = (storage, _dtype_record(a.dtype), offset, tuple(a.shape), tuple(strides), t.requires_grad)
    state = t._user_attributes() or None
    if type(t) is Tensor and state is None:
        return (_rebuild_tensor, args)
    plain = (_rebuild_tensor, args[:-1] + (False,))
    if type(t) is Parameter:
        return (_rebuild_parameter, (_Reduced(plain), t.requires_grad, state))
    return (_rebuild_from_type, (type(t), _Reduced(plain), t.requires_grad, state))


class _Reduced:
    """A nested (callable, args) that pickles as that call."""

    __slots__ = ("reduced",)

    def __init__(self, reduced) -> None:
        self.reduced = reduced

    def __reduce__(self):
        return self.reduced


def _dtype_record(np_dtype: np.dtype) -> str:
    """How a tensor record names its element type: numpy's type string (``<f4``), or ``bfloat16``, whose numpy
    string (``<V2``, raw 2-byte records) does not say which type it is."""
    return np_dtype.name if np_dtype.kind == "V" else np_dtype.str


def _record_dtype(record: str) -> np.dtype:
    """The numpy dtype a tensor record names (``_dtype_record``)."""
    return _types.bfloat16.numpy if record == "bfloat16" else np.dtype(record)


def _rebuild_tensor(storage, dtype_str: str, offset: int, shape: tuple, strides: tuple, requires_grad: bool):
    """Only ever called with the storage ``persistent_load`` returned (see ``_Reader``)."""
    raise pickle.UnpicklingError("a numbagrad tensor record outside of numbagrad.load")


def _rebuild_parameter(data: Tensor, requires_grad: bool, state: dict | None = None):

    p = Parameter(data, requires_grad)
    if state:
        p.__dict__.update(state)
    return p


def _rebuild_from_type(cls: type, data: Tensor, requires_grad: bool, state: dict | None):
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise pickle.UnpicklingError(f"expected a Tensor subclass, but got {cls!r}")
    t = cls._make(data._data)
    if requires_grad:
        t.requires_grad_(True)
    if state:
        t.__dict__.update(state)
    return t


def _is_path(f) -> bool:
    return isinstance(f, (str, os.PathLike))


def _pad_extra(position: int, name: str, zip64: bool) -> bytes:
    """A zip extra field that makes the record's data start on an ``_ALIGN`` boundary."""
    header = 30 + len(name.encode("utf-8")) + 4 + (20 if zip64 else 0)
    pad = -(position + header) % _ALIGN
    return struct.pack("<HH", _EXTRA_ID, pad) + b"\0" * pad


def _write_record(zf: zipfile.ZipFile, fh: IO[bytes], name: str, chunks: list) -> None:
    """Write ``chunks`` (bytes-like) as one stored record whose data is aligned (when ``fh`` can tell)."""
    import zipfile  # here, not at module level: zipfile's imports cost ``import numbagrad`` ~15 ms

    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # fixed: equal objects give equal files
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = sum(memoryview(c).nbytes for c in chunks)
    info.external_attr = 0o644 << 16
    with contextlib.suppress(OSError, AttributeError, ValueError):
        zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT  # zipfile's own rule for a zip64 local header
        info.extra = _pad_extra(fh.tell(), name, zip64)
    with zf.open(info, "w") as w:
        for c in chunks:
            w.write(c)


def _npy_chunks(flat: np.ndarray) -> list:
    """A flat array as .npy: the header (its length a multiple of 64, per the format) and the raw bytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(flat))
    return [header.getvalue(), flat.view(np.uint8) if flat.size else b""]


def _write_archive(fh: IO[bytes], pickled: bytes, storages: Iterable[_Storage]) -> None:
    import zipfile

    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        _write_record(zf, fh, f"archive/{_FORMAT_RECORD}", [_FORMAT_VERSION])
        _write_record(zf, fh, "archive/data.pkl", [pickled])
        _write_record(zf, fh, "archive/byteorder", [sys.byteorder.encode()])
        for s in storages:
            _write_record(zf, fh, f"archive/data/{s.key}.npy", _npy_chunks(s.flat))


def _write_atomically(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Write to a temporary file in the same directory, then rename it over ``path``: a save that fails midway
    leaves the previous file as it was (and no temporary file behind)."""
    path = os.path.realpath(path) if os.path.islink(path) else path  # write through a symlink, as open() would
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise RuntimeError(f"Parent directory {directory} does not exist.")
    import secrets

    while True:
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileNotFoundError):  # keep the mode of the file being replaced, as open() does
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
        with contextlib.suppress(OSError):
            dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)


def save(obj: Any, f, pickle_module: Any = None, pickle_protocol: int = _DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False) -> None:  # fmt: skip
    """Save ``obj`` (tensors, Parameters, state_dicts, containers) to a path or a binary file object.

    The object is pickled in memory first, so an unpicklable object raises before any file is touched; a path is
    written through a temporary file and ``os.replace``, so a save that fails leaves the previous file intact.
    ``pickle_module`` must be None or the standard ``pickle`` (numbagrad's pickler handles the tensors).
    """
    if pickle_module not in (None, pickle):
        raise ValueError("numbagrad.save pickles with the standard pickle module only")
    if not _use_new_zipfile_serialization:
        raise ValueError("numbagrad.save writes the zip format only (_use_new_zipfile_serialization=True)")
    buffer = io.BytesIO()
    pickler = _Pickler(buffer, pickle_protocol)
    pickler.dump(obj)
    pickled, storages = buffer.getvalue(), list(pickler.storages.values())

    def write(fh: IO[bytes]) -> None:
        _write_archive(fh, pickled, storages)

    if _is_path(f):
        _write_atomically(os.fspath(f), write)
    elif not hasattr(f, "write"):
        raise AttributeError("expected 'f' to be string, path, or a file-like object with a 'write' attribute")
    else:
        write(f)


# --- safe globals ---------------------------------------------------------------------------------------------
_user_globals: dict[str, Any] = {}


def _global_name(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes/functions in ``load(weights_only=True)`` (entries are objects or ``(obj, "name")``)."""
    for g in safe_globals:
        if isinstance(g, tuple):
            obj, name = g
            _user_globals[name] = obj
        else:
            _user_globals[_global_name(g)] = g


def get_safe_globals() -> list:
    """The objects ``add_safe_globals`` registered."""
    return list(_user_globals.values())


def clear_safe_globals() -> None:
    """Forget every global registered with ``add_safe_globals``."""
    _user_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list):
    """Allow these globals for ``weights_only`` loads inside the ``with`` block only."""
    saved = dict(_user_globals)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _user_globals.clear()
        _user_globals.update(saved)


# --- loading ----------------------------------------------------------------------------------------------------
class _StorageType:
    """A torch storage class named in a checkpoint (``torch.FloatStorage``): the numpy type of its elements."""

    def __init__(self, name: str, numpy_dtype: str | None, torch_dtype: str) -> None:
        self.name, self.torch_dtype = name, torch_dtype
        self._spec = numpy_dtype

    @property
    def numpy(self) -> np.dtype | None:
        """The element type, resolved when a storage of this class is read (bfloat16's loads ml_dtypes)."""
        return None if self._spec is None else _record_dtype(self._spec)

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class _TorchDtype:
    """A torch dtype that numbagrad cannot store (complex, float8, ...), kept as a named placeholder."""

    def __init__(self, name: str, numpy_dtype: str | None) -> None:
        self.name = name
        self.numpy = np.dtype(numpy_dtype) if numpy_dtype else None

    def __repr__(self) -> str:
        return f"torch.{self.name}"


# torch storage class -> (numpy dtype or None, torch dtype name)
_TORCH_STORAGES = {
    "FloatStorage": ("<f4", "float32"),
    "DoubleStorage": ("<f8", "float64"),
    "HalfStorage": ("<f2", "float16"),
    "BFloat16Storage": ("bfloat16", "bfloat16"),
    "LongStorage": ("<i8", "int64"),
    "IntStorage": ("<i4", "int32"),
    "ShortStorage": ("<i2", "int16"),
    "CharStorage": ("|i1", "int8"),
    "ByteStorage": ("|u1", "uint8"),
    "BoolStorage": ("|b1", "bool"),
    "ComplexFloatStorage": ("<c8", "complex64"),
    "ComplexDoubleStorage": ("<c16", "complex128"),
    "QInt8Storage": (None, "qint8"),
    "QUInt8Storage": (None, "quint8"),
    "QInt32Storage": (None, "qint32"),
    "QUInt4x2Storage": (None, "quint4x2"),
    "QUInt2x4Storage": (None, "quint2x4"),
}
# torch dtype name -> numpy dtype (None: numpy has no such type)
_TORCH_DTYPES = {
    "float32": "<f4", "float": "<f4", "float64": "<f8", "double": "<f8", "float16": "<f2", "half": "<f2",
    "bfloat16": "bfloat16", "int64": "<i8", "long": "<i8", "int32": "<i4", "int": "<i4", "int16": "<i2",
    "short": "<i2", "int8": "|i1", "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "bool": "|b1", "complex64": "<c8", "cfloat": "<c8", "complex128": "<c16", "cdouble": "<c16",
    "complex32": None, "chalf": None, "float8_e4m3fn": None, "float8_e5m2": None, "float8_e4m3fnuz": None,
    "float8_e5m2fnuz": None, "float8_e8m0fnu": None, "float4_e2m1fn_x2": None, "qint8": None, "quint8": None,
    "qint32": None, "quint4x2": None, "quint2x4": None,
}  # fmt: skip


def _torch_dtype(name: str):
    """``torch.<name>`` as numbagrad's dtype where numbagrad stores it, else a placeholder."""
    np_dtype = _TORCH_DTYPES[name]
    if np_dtype == "bfloat16":  # (without resolving its storage type: that loads ml_dtypes)
        return _types.bfloat16
    if np_dtype is not None:
        with contextlib.suppress(TypeError):
            return from_numpy_dtype(np_dtype)
    return _TorchDtype(name, np_dtype)


def _check_storable(np_dtype: np.dtype | None, torch_name: str) -> np.dtype:
    """The numpy dtype for a tensor of torch dtype ``torch_name``, or a clear error if numbagrad cannot hold it."""

    if np_dtype is not None:
        try:
            from_numpy_dtype(np_dtype)
            return np_dtype
        except TypeError:
            pass
    supported = ", ".join(d.name for d in _types.ALL_DTYPES)
    raise RuntimeError(
        f"numbagrad.load: the checkpoint holds a tensor of dtype torch.{torch_name}, which numbagrad cannot "
        f"store (supported: {supported}). Convert it in torch first, e.g. tensor.float()."
    )


class _Loaded:
    """A storage read from the archive: the flat host array and the device its tensors go to."""

    __slots__ = ("flat", "device")

    def __init__(self, flat: np.ndarray, dev: device) -> None:
        self.flat, self.device = flat, dev


def _view(storage: _Loaded, dtype: np.dtype, offset: int, shape: tuple, strides: tuple) -> Tensor:
    """A tensor viewing ``storage`` (bytes ``offset``/``strides``), moved to the storage's target device."""
    flat = storage.flat
    if any(n == 0 for n in shape):
        array = np.empty(shape, dtype)
    else:
        array = np.ndarray(shape, dtype, buffer=flat, offset=offset, strides=strides)
    t = Tensor._make(array)
    if storage.device.type == "cuda":
        t = t.to(storage.device)
    return t


def _cuda_location_check(location: str) -> None:

    if not cuda.is_available():
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If you are "
            "running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') to map "
            "your storages to the CPU."
        )


def _restore(location: str, what: str) -> device:
    """torch's ``default_restore_location`` for numbagrad's two device types."""
    if location.startswith("cpu"):
        return device("cpu")
    if location.startswith("cuda"):
        _cuda_location_check(location)
        return to_device(location)
    raise RuntimeError(f"don't know how to restore data location of {what} (tagged with {location})")


class _Reader:
    """One opened checkpoint: finds records, reads or maps payloads, applies ``map_location``."""

    def __init__(self, zf: zipfile.ZipFile, path: str | None, map_location, mmap: bool) -> None:
        self.zf, self.path, self.map_location, self.mmap = zf, path, map_location, mmap
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
        if not pkl:
            raise RuntimeError("PytorchStreamReader failed locating file data.pkl: file not found")
        self.prefix = pkl[0][: -len("data.pkl")]
        self.numbagrad = self.prefix + _FORMAT_RECORD in names
        self.byteorder = zf.read(self.prefix + "byteorder").decode() if self.prefix + "byteorder" in names else "little"
        self.storages: dict[str, _Loaded] = {}

    # -- payloads --
    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        """Where a stored record's bytes start in the file (after its local header)."""
        fp = self.zf.fp
        fp.seek(info.header_offset)
        header = fp.read(30)
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        return info.header_offset + 30 + name_len + extra_len

    def _read(self, name: str, dtype: np.dtype, count: int, skip: int = 0) -> np.ndarray:
        """``count`` elements of ``dtype`` from record ``name`` after ``skip`` header bytes: mapped
        copy-on-write when ``mmap`` (the file is not read), else read into a writable buffer."""
        import zipfile

        info = self.zf.getinfo(name)
        nbytes = count * dtype.itemsize
        if info.file_size < skip + nbytes:
            raise RuntimeError(f"numbagrad.load: record {name} is shorter than its storage ({nbytes} bytes)")
        if nbytes == 0:
            return np.empty(0, dtype)
        flat = np.empty(count, dtype)
        view = memoryview(flat.view(np.uint8))
        if info.compress_type == zipfile.ZIP_STORED:
            offset = self._data_offset(info) + skip
            if self.mmap:
                return np.memmap(self.path, dtype=dtype, mode="c", offset=offset, shape=(count,))
            # stored bytes are read straight from the file into the array (no CRC pass: torch skips it too)
            self.zf.fp.seek(offset)
            _read_exactly(self.zf.fp.readinto, view, name)
        else:  # a record someone recompressed: through zipfile
            with self.zf.open(info) as r:
                r.read(skip)
                _read_exactly(r.readinto, view, name)
        return flat

    def _target(self, flat: np.ndarray, location: str, what: str) -> _Loaded:
        """Apply ``map_location`` as torch does: None, a device (string), a dict of locations, or a callable
        ``(storage, location) -> storage or None`` (the storage is a 1-D tensor over the loaded data)."""
        ml = self.map_location
        if ml is None:
            return _Loaded(flat, _restore(location, what))
        if isinstance(ml, (str, device)):
            return _Loaded(flat, _restore(str(ml), what))
        if isinstance(ml, dict):
            return _Loaded(flat, _restore(str(ml.get(location, location)), what))
        if callable(ml):
            result = ml(Tensor._make(flat), location)
            if result is None:
                return _Loaded(flat, _restore(location, what))
            if isinstance(result, Tensor):
                return _Loaded(np.asarray(result._host()).reshape(-1), result.device)
            raise RuntimeError(f"map_location should return a tensor (storage) or None, but got {type(result)}")
        raise ValueError(
            f"Unsupported map_location type. map_location must be a str, device, dict, or callable, but got {type(ml)}"
        )

    def numbagrad_storage(self, key: str, location: str) -> _Loaded:
        if key not in self.storages:
            name = f"{self.prefix}data/{key}.npy"
            with self.zf.open(name) as r:
                version = np.lib.format.read_magic(r)
                read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                shape, _, dtype = read_header[version](r)
                skip = r.tell()
            count = int(np.prod(shape, dtype=np.int64))
            flat = self._read(name, dtype, count, skip)
            self.storages[key] = self._target(flat, location, f"{dtype.name} storage")
        return self.storages[key]

    def torch_storage(self, key: str, np_dtype: np.dtype, numel: int, location: str) -> _Loaded:
        if key not in self.storages:
            dtype = np_dtype.newbyteorder("<" if self.byteorder == "little" else ">")
            flat = self._read(f"{self.prefix}data/{key}", dtype, numel)
            if not dtype.isnative:
                flat = flat.astype(dtype.newbyteorder("="))
            self.storages[key] = self._target(flat, location, f"torch.{np_dtype.name} storage")
        return self.storages[key]


def _read_exactly(readinto, view: memoryview, name: str) -> None:
    got = 0
    while got < len(view):
        n = readinto(view[got:])
        if not n:
            raise RuntimeError(f"numbagrad.load: record {name} ended early")
        got += n


def _torch_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                             metadata=None):  # fmt: skip
    """torch's record of a tensor: ``storage`` is what ``persistent_load`` returned, offsets are in elements."""
    loaded, np_dtype = storage
    itemsize = np_dtype.itemsize
    t = _view(loaded, np_dtype, storage_offset * itemsize, tuple(size), tuple(s * itemsize for s in stride))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _torch_rebuild_tensor(storage, storage_offset, size, stride):
    return _torch_rebuild_tensor_v2(storage, storage_offset, size, stride)


def _torch_rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                             metadata=None):  # fmt: skip
    """torch's record for dtypes without a typed storage class: untyped bytes, plus the dtype."""
    loaded, _ = storage
    np_dtype = dtype.numpy if not isinstance(dtype, _TorchDtype) else _check_storable(dtype.numpy, dtype.name)
    flat = loaded.flat.view(np_dtype) if loaded.flat.size else np.empty(0, np_dtype)
    return _torch_rebuild_tensor_v2((_Loaded(flat, loaded.device), np_dtype), storage_offset, size, stride,
                                    requires_grad)  # fmt: skip


def _torch_rebuild_parameter(data, requires_grad, backward_hooks=None, state=None):
    return _rebuild_parameter(data, requires_grad, state or None)


def _torch_rebuild_from_type_v2(func, new_type, args, state):
    """torch's record of a tensor with attributes (or of a subclass: only Tensor and Parameter are known here)."""
    t = func(*args)
    if new_type is not Tensor and new_type is not _ParameterClass():
        raise pickle.UnpicklingError(f"numbagrad.load cannot rebuild tensors of type {new_type!r}")
    if type(t) is not new_type:
        t = _rebuild_from_type(new_type, t, t.requires_grad, None)
    if state:
        if isinstance(state, tuple):  # (dict state, slot state)
            dict_state, slot_state = state
            state = {**(dict_state or {}), **(slot_state or {})}
        t.__dict__.update(state)
    return t


def _unsupported(what: str):
    def fail(*args, **kwargs):
        raise RuntimeError(f"numbagrad.load cannot read {what} from a torch checkpoint")

    return fail


def _ParameterClass():  # noqa: N802 - returns a class

    return Parameter


def _make_parameter(data=None, requires_grad=True):
    return _ParameterClass()(data, requires_grad)


def _torch_device(*args):
    return device(*args)


class _Unpickler(pickle.Unpickler):
    """Resolves globals through numbagrad's table (and, when ``weights_only``, refuses everything else)."""

    def __init__(self, file: IO[bytes], reader: _Reader, weights_only: bool, **kwargs) -> None:
        super().__init__(file, **kwargs)
        self.reader, self.weights_only = reader, weights_only
        self.globals = self._allowed()

    def _allowed(self) -> dict[str, Any]:
        table: dict[str, Any] = {
            "collections.OrderedDict": collections.OrderedDict,
            "collections.Counter": collections.Counter,
            "builtins.set": set,
            "builtins.frozenset": frozenset,
            "builtins.complex": complex,
            "builtins.bytearray": bytearray,
            "builtins.slice": slice,
            "_codecs.encode": _codecs_encode,
            # numbagrad's own records
            "numbagrad.serialization._rebuild_tensor": self._rebuild_numbagrad_tensor,
            "numbagrad.serialization._rebuild_parameter": _rebuild_parameter,
            "numbagrad.serialization._rebuild_from_type": self._rebuild_numbagrad_subclass,
            "numbagrad._types._dtype_by_name": _dtype_by_name,
            "numbagrad._types.device": device,
            "numbagrad._types.Size": Size,
            "numbagrad._tensor.Tensor": Tensor,
            "numbagrad.nn.parameter.Parameter": _ParameterClass(),
            # torch's records, mapped to numbagrad without importing torch
            "torch._utils._rebuild_tensor": _torch_rebuild_tensor,
            "torch._utils._rebuild_tensor_v2": _torch_rebuild_tensor_v2,
            "torch._utils._rebuild_tensor_v3": _torch_rebuild_tensor_v3,
            "torch._utils._rebuild_parameter": _torch_rebuild_parameter,
            "torch._utils._rebuild_parameter_with_state": _torch_rebuild_parameter,
            "torch._tensor._rebuild_from_type_v2": _torch_rebuild_from_type_v2,
            "torch.nn.parameter.Parameter": _make_parameter,
            "torch.Tensor": Tensor,
            "torch.device": _torch_device,
            "torch.Size": Size,
            "torch.storage.UntypedStorage": _StorageType("UntypedStorage", "|u1", "uint8"),
        }
        for name in ("_rebuild_qtensor", "_rebuild_sparse_tensor", "_rebuild_nested_tensor",
                     "_rebuild_meta_tensor_no_storage", "_rebuild_wrapper_subclass",
                     "_rebuild_device_tensor_from_numpy", "_rebuild_device_tensor_from_cpu_tensor"):  # fmt: skip
            table[f"torch._utils.{name}"] = _unsupported(f"tensors rebuilt by torch._utils.{name}")
        for name, (np_dtype, torch_name) in _TORCH_STORAGES.items():
            table[f"torch.{name}"] = _StorageType(name, np_dtype, torch_name)
        for name in _TORCH_DTYPES:
            table[f"torch.{name}"] = _torch_dtype(name)
        table.update(_user_globals)
        return table

    def find_class(self, module: str, name: str):
        if (module, name) in _compat_pickle.NAME_MAPPING:  # protocol-2 pickles spell builtins the Python 2 way
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        full_path = f"{module}.{name}"
        if full_path in self.globals:
            return self.globals[full_path]
        if not self.weights_only:
            return super().find_class(module, name)
        if module in _BLOCKED_MODULES:
            raise pickle.UnpicklingError(
                f"Trying to load unsupported GLOBAL {full_path} whose module {module} is blocked."
            )
        if full_path.startswith("builtins."):
            full_path = full_path[len("builtins.") :]
        raise pickle.UnpicklingError(
            f"Unsupported global: GLOBAL {full_path} was not an allowed global by default. "
            f"Please use `torch.serialization.add_safe_globals([{full_path}])` or the "
            f"`torch.serialization.safe_globals([{full_path}])` context manager to allowlist this global "
            "if you trust this class/function."
        )

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid or pid[0] not in ("storage", b"storage"):
            raise pickle.UnpicklingError(f"Only persistent_load of storage is allowed, but got {pid!r}")
        if self.reader.numbagrad:
            _, key, location = pid
            return self.reader.numbagrad_storage(str(key), str(location))
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"unknown storage type in a torch checkpoint: {storage_type!r}")
        if storage_type.name == "UntypedStorage":  # bytes; the element type comes with _rebuild_tensor_v3's dtype
            np_dtype = np.dtype(np.uint8)
        else:
            np_dtype = _check_storable(storage_type.numpy, storage_type.torch_dtype)
        return (self.reader.torch_storage(str(key), np_dtype, int(numel), str(location)), np_dtype)

    def _rebuild_numbagrad_tensor(self, storage, dtype_str, offset, shape, strides, requires_grad):
        t = _view(storage, _record_dtype(dtype_str), offset, tuple(shape), tuple(strides))
        if requires_grad:
            t.requires_grad_(True)
        return t

    @staticmethod
    def _rebuild_numbagrad_subclass(cls, data, requires_grad, state):
        if cls is not Tensor and cls is not _ParameterClass() and cls not in _user_globals.values():
            raise pickle.UnpicklingError(
                f"Can only build Tensor, Parameter or types allowlisted via `add_safe_globals`, but got {cls}"
            )
        return _rebuild_from_type(cls, data, requires_grad, state)


def _codecs_encode(obj, encoding="utf-8", errors="strict"):
    """What protocol-2 pickles call to rebuild ``bytes`` (``_codecs.encode(str, "latin1")``)."""
    import codecs

    return codecs.encode(obj, encoding, errors)


def _dtype_by_name(name: str):
    by_name = _types._dtype_by_name

    return by_name(name)


def _weights_only_message(message: str) -> str:
    """torch.load's wrapping of a WeightsUnpickler error (torch/serialization.py, ``_get_wo_message``)."""
    if "was not an allowed global by default." in message:
        return (
            "Weights only load failed. This file can still be loaded, to do so you have two options, "
            "\033[1mdo those steps only if you trust the source of the checkpoint\033[0m. "
            f"\n\t(1) {UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with `weights_only=True` please check "
            "the recommended steps in the following error message.\n\tWeightsUnpickler error: " + message
        ) + _DOCS_MESSAGE
    updated = f"Weights only load failed. {UNSAFE_MESSAGE}\n"
    if " is blocked." not in message:
        updated += (
            "Please file an issue with the following so that we can make "
            "`weights_only=True` compatible with your use case: WeightsUnpickler error: "
        )
    return updated + "\n\n" + message + _DOCS_MESSAGE


def load(f, map_location=None, pickle_module: Any = None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args) -> Any:  # fmt: skip
    """Load what ``save`` (or ``torch.save``) wrote, from a path or a binary file object.

    ``weights_only`` defaults to True (unless a ``pickle_module`` is given), as in torch >= 2.6. ``mmap=True``
    maps the payloads copy-on-write instead of reading them (``f`` must be a path). ``map_location`` is a device,
    a device string, a ``{saved: target}`` dict of location strings, or a callable ``(storage, location)``.
    """
    if weights_only is None:
        weights_only = pickle_module is None
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    pickle_load_args.setdefault("encoding", "utf-8")
    if mmap and not _is_path(f):
        raise ValueError("f must be a file path in order to use the mmap argument")
    import zipfile

    path = os.fspath(f) if _is_path(f) else None
    if path is not None and path.endswith(".safetensors"):  # as torch.load does
        if isinstance(map_location, dict) or callable(map_location):
            kind = "dict" if isinstance(map_location, dict) else "callable"
            raise RuntimeError(
                f"Loading safetensors file with {kind} map_location is not supported. "
                "Use a device string or torch.device instead."
            )
        return load_file(path, device="cpu" if map_location is None else str(map_location))
    with contextlib.ExitStack() as stack:
        fh = stack.enter_context(open(path, "rb")) if path is not None else f
        start = fh.tell()
        if not zipfile.is_zipfile(fh):
            raise RuntimeError(
                "numbagrad.load reads zip checkpoints (written by numbagrad.save, or by torch.save since PyTorch "
                "1.6); this file is not one (torch's legacy format, _use_new_zipfile_serialization=False, is not "
                "supported)"
            )
        fh.seek(start)
        zf = stack.enter_context(zipfile.ZipFile(fh))
        reader = _Reader(zf, path, map_location, bool(mmap))
        data = zf.read(reader.prefix + "data.pkl")
        unpickler = _Unpickler(io.BytesIO(data), reader, weights_only, **pickle_load_args)
        if not weights_only:
            return unpickler.load()
        try:
            return unpickler.load()
        except pickle.UnpicklingError as e:
            raise pickle.UnpicklingError(_weights_only_message(str(e))) from None


# --- safetensors -------------------------------------------------------------------------------------------------
# The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON
# ``{"__metadata__": {str: str}, name: {"dtype": code, "shape": [...], "data_offsets": [begin, end]}}`` (padded
# with spaces), then the tensors' little-endian row-major bytes, back to back. Read and written here directly, so
# no package is needed and bfloat16 (which numpy, hence ``safetensors.numpy``, lacks) is stored as ``BF16``.

# safetensors' dtype code -> (the torch dtype of that name, its size in bytes); numbagrad stores those of its dtypes.
# Listed in the format's own order, which the package writes the tensors in, last first.
_SAFETENSORS_DTYPES = {
    "BOOL": ("bool", 1), "U8": ("uint8", 1), "I8": ("int8", 1), "F8_E5M2": ("float8_e5m2", 1),
    "F8_E4M3": ("float8_e4m3fn", 1), "I16": ("int16", 2), "U16": ("uint16", 2), "F16": ("float16", 2),
    "BF16": ("bfloat16", 2), "I32": ("int32", 4), "U32": ("uint32", 4), "F32": ("float32", 4),
    "C64": ("complex64", 8), "F64": ("float64", 8), "I64": ("int64", 8), "U64": ("uint64", 8),
}  # fmt: skip
_SAFETENSORS_RANK = {code: rank for rank, code in enumerate(_SAFETENSORS_DTYPES)}
_SAFETENSORS_MAX_HEADER = 100_000_000  # safetensors' own limit: a larger length means a file of another kind


def _safetensors_numpy_dtypes() -> dict[str, np.dtype]:
    """safetensors' dtype code -> the numpy dtype numbagrad holds it as."""
    by_name = {d.name: d.numpy for d in _types.ALL_DTYPES}
    return {code: by_name[name] for code, (name, _) in _SAFETENSORS_DTYPES.items() if name in by_name}


def _safetensors_error(what: str) -> RuntimeError:
    return RuntimeError(f"Error while deserializing header: {what}")


def save_file(tensors: dict[str, Tensor], filename, metadata: dict[str, str] | None = None) -> None:
    """Write a flat ``{name: tensor}`` dict as a .safetensors file (readable by ``safetensors.torch.load_file``).

    Laid out byte for byte as the safetensors package lays them out (a header padded to 8 bytes, then the tensors
    by dtype, widest first, and by name, so each is aligned to its item size); written through a temporary file and
    ``os.replace``, like ``save``. Half precision (float16, bfloat16) is stored as ``F16`` and ``BF16``.
    """
    import json

    codes = {d: code for code, d in _safetensors_numpy_dtypes().items()}
    if metadata is not None:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                bad = key if not isinstance(key, str) else value
                raise TypeError(f"argument 'metadata': '{type(bad).__name__}' object is not an instance of 'str'")
    arrays = {}
    for key, t in tensors.items():
        if not isinstance(t, Tensor):
            raise ValueError(f"Key `{key}` is invalid, expected numbagrad.Tensor but received {type(t)}")
        arrays[key] = np.asarray(t._host(), order="C")  # (ascontiguousarray would make a 0-d tensor 1-d)
    header: dict[str, Any] = {} if metadata is None else {"__metadata__": dict(metadata)}
    offset = 0
    order = sorted(arrays, key=lambda k: (-_SAFETENSORS_RANK[codes[arrays[k].dtype]], k))
    for key in order:
        array = arrays[key]
        header[key] = {
            "dtype": codes[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)

    def write(fh: IO[bytes]) -> None:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        for key in order:
            fh.write(arrays[key].tobytes())

    _write_atomically(os.fspath(filename), write)


def _read_safetensors_header(fh: IO[bytes], size: int) -> dict:
    """The tensor entries (in file order) of the header of an open .safetensors file of ``size`` bytes, checked as
    the safetensors package checks them: their byte ranges tile the data section and match dtypes and shapes."""
    import json

    if size < 8:
        raise _safetensors_error("HeaderTooSmall")
    (length,) = struct.unpack("<Q", fh.read(8))
    if length > _SAFETENSORS_MAX_HEADER:
        raise _safetensors_error("HeaderTooLarge")
    if 8 + length > size:
        raise _safetensors_error("InvalidHeaderLength")
    try:
        header = json.loads(fh.read(length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _safetensors_error("InvalidHeaderDeserialization") from None
    if not isinstance(header, dict):
        raise _safetensors_error("InvalidHeaderDeserialization")
    try:
        entries = sorted(
            (v["data_offsets"], k, v["dtype"], v["shape"]) for k, v in header.items() if k != "__metadata__"
        )
        end = 0
        for (begin, stop), key, code, shape in entries:
            if begin != end or stop < begin:
                raise _safetensors_error(f"InvalidOffset({key})")
            if stop - begin != _SAFETENSORS_DTYPES[code][1] * math.prod(shape):
                raise _safetensors_error(f"TensorInvalidInfo({key})")
            end = stop
    except (KeyError, TypeError, ValueError, AttributeError):
        raise _safetensors_error("InvalidHeaderDeserialization") from None
    if 8 + length + end != size:
        raise _safetensors_error("MetadataIncompleteBuffer")
    return {key: header[key] for _, key, _, _ in entries}


def load_file(filename, device: str | device = "cpu") -> dict[str, Tensor]:
    """Read a .safetensors file into ``{name: tensor}`` on ``device`` (any writer: torch, numpy, numbagrad)."""
    target = to_device(device)
    dtypes = _safetensors_numpy_dtypes()
    out = {}
    path = os.fspath(filename)
    with open(path, "rb") as fh:
        header = _read_safetensors_header(fh, os.fstat(fh.fileno()).st_size)
        data_start = fh.tell()
        for key, info in header.items():
            code = info["dtype"]
            if code not in dtypes:
                _check_storable(None, _SAFETENSORS_DTYPES[code][0])
            begin, stop = info["data_offsets"]
            fh.seek(data_start + begin)
            array = np.frombuffer(bytearray(fh.read(stop - begin)), dtype=dtypes[code]).reshape(info["shape"])
            t = Tensor._make(array)
            out[key] = t.to(target) if target.type == "cuda" else t
    return out
