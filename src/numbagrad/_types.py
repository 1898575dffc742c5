"""dtype, device and Size: the small value types every other module speaks."""

from __future__ import annotations

import numpy as np


class dtype:  # noqa: N801 - torch spells it lowercase
    """A tensor element type; wraps the numpy dtype that stores it."""

    __slots__ = ("name", "scalar_name", "numpy", "is_floating_point", "is_complex", "is_signed", "itemsize")

    def __init__(self, name: str, scalar_name: str, numpy_type: type) -> None:
        self.name = name
        self.scalar_name = scalar_name  # torch's ScalarType name, as its messages spell it ("Float", "Long")
        self.numpy = np.dtype(numpy_type)
        self.is_floating_point = self.numpy.kind == "f"
        self.is_complex = self.numpy.kind == "c"
        self.is_signed = self.numpy.kind in "fic"
        self.itemsize = self.numpy.itemsize

    def __repr__(self) -> str:
        return f"numbagrad.{self.name}"

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


class _MLDtype(dtype):
    """A float type whose numpy storage comes from ``ml_dtypes`` (bfloat16): that package's import costs about as
    much as numbagrad's own, so it is loaded when a tensor of this type is first made, not at ``import numbagrad``.
    numpy files it under kind ``"V"``, so the flags are given here."""

    __slots__ = ("_numpy",)

    def __init__(self, name: str, scalar_name: str, itemsize: int) -> None:
        self.name = name
        self.scalar_name = scalar_name
        self.is_floating_point = True
        self.is_complex = False
        self.is_signed = True
        self.itemsize = itemsize
        self._numpy = None

    @property
    def numpy(self) -> np.dtype:  # type: ignore[override]
        if self._numpy is None:
            import ml_dtypes

            self._numpy = np.dtype(getattr(ml_dtypes, self.name))
            _BY_NUMPY[self._numpy] = self
        return self._numpy


class memory_format:  # noqa: N801 - torch spells it lowercase
    """A memory layout's name, as ``clone``/``contiguous``/``to`` take it: ``channels_last`` stores (N, C, H, W)
    as (N, H, W, C) (``backend/layout.py``), ``preserve_format`` keeps a tensor's own layout."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"numbagrad.{self.name}"


contiguous_format = memory_format("contiguous_format")
legacy_contiguous_format = contiguous_format  # torch's old name for the same format
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

float32 = dtype("float32", "Float", np.float32)
float64 = dtype("float64", "Double", np.float64)
int64 = dtype("int64", "Long", np.int64)
int32 = dtype("int32", "Int", np.int32)
bool_ = dtype("bool", "Bool", np.bool_)
# the narrow types: float16 is stored as numpy's float16; kernels compute it in float32, as torch's CPU does
float16 = dtype("float16", "Half", np.float16)
int16 = dtype("int16", "Short", np.int16)
int8 = dtype("int8", "Char", np.int8)
uint8 = dtype("uint8", "Byte", np.uint8)
# bfloat16 is stored as ml_dtypes' bfloat16 (float32's exponent, 8 significant bits); computed in float32 too
bfloat16 = _MLDtype("bfloat16", "BFloat16", 2)
# complex numbers are numpy's complex64/complex128 (a float32/float64 pair: real, then imaginary)
complex64 = dtype("complex64", "ComplexFloat", np.complex64)
complex128 = dtype("complex128", "ComplexDouble", np.complex128)
cfloat = complex64
cdouble = complex128

ALL_DTYPES = (float32, float64, int64, int32, bool_, float16, int16, int8, uint8, bfloat16, complex64, complex128)
_BY_NUMPY = {d.numpy: d for d in ALL_DTYPES if d is not bfloat16}
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_default_float = [float32]
#: the complex dtype of each float's precision, and the float of each complex's parts
_COMPLEX_OF = {"float16": complex64, "bfloat16": complex64, "float32": complex64, "float64": complex128}
_REAL_OF = {"complex64": float32, "complex128": float64}


def _dtype_by_name(name: str) -> dtype:
    return _BY_NAME[name]


def get_default_dtype() -> dtype:
    """The float dtype used for Python floats and for float results of integer inputs."""
    return _default_float[0]


def get_default_complex_dtype() -> dtype:
    """The complex dtype of Python complex numbers: complex64 when the default float is float32, else complex128."""
    return complex128 if _default_float[0] is float64 else complex64


def complex_of(d: dtype) -> dtype:
    """The complex dtype whose parts have float dtype ``d`` (a complex dtype is its own)."""
    return d if d.is_complex else _COMPLEX_OF[d.name]


def real_of(d: dtype) -> dtype:
    """The float dtype of a complex dtype's parts (a real dtype is its own)."""
    return _REAL_OF.get(d.name, d)


def set_default_dtype(d: dtype) -> None:
    """Set the dtype of Python floats and of float results of integer inputs.

    Only float32 and float64 are accepted (torch also accepts float16/bfloat16: numbagrad refuses them with a
    TypeError).
    """
    if d not in (float32, float64):
        raise TypeError("only floating-point types are supported as the default type")
    _default_float[0] = d


#: torch's device types, in the order its device-string error lists them.
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla",
                "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")  # fmt: skip


def from_numpy_dtype(np_dtype) -> dtype:
    """Map a numpy dtype to ours, with torch's error for types numbagrad does not store."""
    try:
        return _BY_NUMPY[np.dtype(np_dtype)]
    except KeyError:
        if np.dtype(np_dtype).name == "bfloat16" and np.dtype(np_dtype) == bfloat16.numpy:  # made before numbagrad's
            return bfloat16
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{np.dtype(np_dtype).type.__name__}. The only supported types are: "
            "float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint8, and bool."
        ) from None


#: torch's categories for writing a result into a destination tensor (bool < integer < float < complex): a result
#: goes into a destination of its own or a later category. Keyed by numpy's dtype kind ("V": bfloat16, a float).
CAST_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2, "V": 2, "c": 3}


def check_castable(result: np.dtype, destination: np.dtype) -> None:
    """torch's error for a result of numpy dtype ``result`` that may not be written into a ``destination`` (an
    in-place op's tensor, an ``out=``): a float into an integer, a complex into a real, a number into a bool."""
    if CAST_CATEGORY[result.kind] > CAST_CATEGORY[destination.kind]:
        raise RuntimeError(
            f"result type {from_numpy_dtype(result).scalar_name} can't be cast to the desired output type "
            f"{from_numpy_dtype(destination).scalar_name}"
        )


def to_dtype(d) -> dtype:
    """Accept our dtype, a numpy dtype, or a Python type (float, int, bool) as torch does."""
    if isinstance(d, dtype):
        return d
    if d is float:
        return get_default_dtype()
    if d is int:
        return int64
    if d is bool:
        return bool_
    if d is complex:
        return get_default_complex_dtype()
    return from_numpy_dtype(d)


def promote_types(a: dtype, b: dtype) -> dtype:
    """torch's promotion of two dtypes: a float type wins over integers and bool (numpy's would widen bfloat16 to
    float64 against int64), else the smallest type holding both."""
    if a is b:
        return a
    if a.is_complex or b.is_complex:  # complex wins; a float64 part widens complex64 (numpy widens it for ints too)
        parts = promote_types(real_of(a), real_of(b)) if a.is_complex and b.is_complex else None
        if parts is None:
            c, other = (a, b) if a.is_complex else (b, a)
            parts = promote_types(real_of(c), other) if other.is_floating_point else real_of(c)
        return complex_of(parts)
    if a.is_floating_point != b.is_floating_point:
        return a if a.is_floating_point else b
    return from_numpy_dtype(np.promote_types(a.numpy, b.numpy))


class device:  # noqa: N801 - torch spells it lowercase
    """Where a tensor's storage lives: 'cpu' (numpy) or 'cuda[:n]' (numba.cuda)."""

    __slots__ = ("type", "index")

    def __init__(self, type: str | device, index: int | None = None) -> None:  # noqa: A002 - torch's name
        if isinstance(type, device):
            type, index = type.type, type.index
        if ":" in type:
            type, idx = type.split(":", 1)
            index = int(idx)
        if type not in ("cpu", "cuda"):
            if type in DEVICE_TYPES:
                raise RuntimeError(f"numbagrad has no {type} backend: its devices are cpu and cuda")
            raise RuntimeError(
                f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: {type}"
            )
        self.type = type
        self.index = index

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        if self.type != other.type:
            return False
        return self.index == other.index or None in (self.index, other.index) and self.type == "cpu"

    def __hash__(self) -> int:
        return hash((self.type, self.index))


CPU = device("cpu")
CUDA0 = device("cuda", 0)


#: Where factories put a tensor when given no device (``numbagrad.set_default_device``).
default_device = [CPU]


def to_device(d) -> device:
    """Normalise a device argument; 'cuda' means the current device, cuda:0; None means the default device."""
    if d is None:
        return default_device[0]
    d = device(d) if not isinstance(d, device) else d
    if d.type == "cuda" and d.index is None:
        return CUDA0
    return d


def shape_str(shape) -> str:
    """A shape as torch's messages write it: ``[2, 3]``."""
    return "[" + ", ".join(str(s) for s in shape) + "]"


class Size(tuple):
    """A tensor's shape: a tuple that prints like torch's."""

    def __repr__(self) -> str:
        return f"numbagrad.Size([{', '.join(str(s) for s in self)}])"

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds (the product of the sizes)."""
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        r = tuple.__getitem__(self, key)
        return Size(r) if isinstance(key, slice) else r


def wrap_dim(dim: int, ndim: int) -> int:
    """Normalise a possibly negative dim, with torch's IndexError."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def wrap_dims(dims, ndim: int) -> tuple:
    """Sorted, normalised dims (an int or a sequence); a dim named twice is torch's RuntimeError."""
    if isinstance(dims, int):
        dims = (dims,)
    wrapped = [wrap_dim(d, ndim) for d in dims]
    for k, d in enumerate(wrapped):
        if d in wrapped[:k]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return tuple(sorted(wrapped))


#: Recent ``broadcast_shapes`` results by their shapes: a training step broadcasts the same few pairs again and
#: again (a (32, 128) by (128,) product: 0.3 us from here, 2 us worked out). Cleared when it holds
#: ``_BROADCASTS_KEPT``.
_BROADCASTS: dict = {}
_BROADCASTS_KEPT = 1024


def broadcast_shapes(*shapes) -> tuple:
    """The broadcast of ``shapes``, with torch's error naming the first two sizes that clash (torch folds the
    shapes pairwise, comparing each pair from the last dim)."""
    try:
        out = _BROADCASTS.get(shapes)
    except TypeError:  # (a shape given as a list: not a key)
        return _broadcast(shapes)
    if out is None:
        out = _broadcast(shapes)  # (raises for shapes that do not broadcast: those are never kept)
        if len(_BROADCASTS) >= _BROADCASTS_KEPT:
            _BROADCASTS.clear()
        _BROADCASTS[shapes] = out
    return out


def _broadcast(shapes: tuple) -> tuple:
    """``broadcast_shapes`` worked out (its sizes as Python ints)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for k in range(ndim - 1, ndim - len(s) - 1, -1):
            size = s[k - ndim + len(s)]
            if size != out[k] and 1 not in (size, out[k]):
                raise RuntimeError(
                    f"The size of tensor a ({out[k]}) must match the size of tensor b ({size}) at non-singleton "
                    f"dimension {k}"
                )
            out[k] = size if out[k] == 1 else out[k]
    return tuple(int(size) for size in out)


def broadcast_shapes_or_none(*shapes) -> tuple | None:
    """The broadcast of ``shapes``, or None when they do not broadcast."""
    try:
        return broadcast_shapes(*shapes)
    except RuntimeError:
        return None


class layout:  # noqa: N801 - torch's name
    """A tensor layout, printed as torch's are (``numbagrad.strided``, ``numbagrad.sparse_coo``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"numbagrad.{self.name}"


strided = layout("strided")
sparse_coo = layout("sparse_coo")
