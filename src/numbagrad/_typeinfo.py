"""Type helpers: ``finfo``, ``iinfo`` and the legacy tensor types (``FloatTensor``, ``LongTensor``...).

The legacy types are what older code calls constructors (``torch.LongTensor([1, 2])``, ``torch.FloatTensor(2, 3)``)
and checks against (``isinstance(x, torch.FloatTensor)``, ``x.type(torch.DoubleTensor)``); each stands for one
dtype on the CPU, as in torch. Nothing here imports the ops.
"""

from __future__ import annotations

import numpy as np

from ._tensor import Tensor
from ._types import (
    Size,
    bfloat16,
    bool_,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    real_of,
    uint8,
)

__all__ = [
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "finfo",
    "iinfo",
]


def _g(value: float) -> str:
    """A number as torch's finfo/iinfo reprs print it (C's ``%g``: six significant digits)."""
    return format(value, "g")


class finfo:  # noqa: N801 - torch's name
    """Machine limits of a floating point dtype (the default dtype when none is given)."""

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type: dtype | None = None) -> None:  # noqa: A002 - torch's name
        d = get_default_dtype() if type is None else type
        if not isinstance(d, dtype):
            raise TypeError(f"finfo(): argument 'type' (position 1) must be torch.dtype, not {_type_name(d)}")
        d = real_of(d)  # a complex dtype's limits are those of its parts, as torch's finfo reports them
        if not d.is_floating_point:
            raise TypeError(
                "torch.finfo() requires a floating point input type. Use torch.iinfo to handle 'torch.finfo'"
            )
        info = np.finfo(d.numpy) if d.numpy.kind == "f" else _ml_finfo(d.numpy)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # torch: 10 ** -floor(-log10(eps)), computed in double
        self.dtype = d.name

    def __eq__(self, other) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("finfo", self.dtype))

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={_g(self.resolution)}, min={_g(self.min)}, max={_g(self.max)}, eps={_g(self.eps)}, "
            f"smallest_normal={_g(self.smallest_normal)}, tiny={_g(self.tiny)}, dtype={self.dtype})"
        )

    __str__ = __repr__


class iinfo:  # noqa: N801 - torch's name
    """Limits of an integer dtype."""

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type: dtype) -> None:  # noqa: A002 - torch's name
        if not isinstance(type, dtype):
            raise TypeError(f"iinfo(): argument 'type' (position 1) must be torch.dtype, not {_type_name(type)}")
        if type is bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if type.is_floating_point or type.is_complex:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        info = np.iinfo(type.numpy)
        self.bits = int(info.bits)
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = type.name

    def __eq__(self, other) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("iinfo", self.dtype))

    def __repr__(self) -> str:
        return f"iinfo(min={_g(float(self.min))}, max={_g(float(self.max))}, dtype={self.dtype})"

    __str__ = __repr__


def _ml_finfo(np_dtype: np.dtype):
    """numpy's finfo does not know ml_dtypes' types (bfloat16); ml_dtypes' own finfo has the same fields."""
    import ml_dtypes

    return ml_dtypes.finfo(np_dtype)


def _type_name(value) -> str:
    return type(value).__name__


# --- legacy tensor types -------------------------------------------------------------------------------------
class _TensorType(type):
    """The metaclass of the legacy types: ``isinstance(x, FloatTensor)`` is "a CPU float32 tensor"."""

    dtype: dtype

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj._data.dtype == cls.dtype.numpy and obj.is_cpu

    def __repr__(cls) -> str:
        return f"<class 'numbagrad.{cls.__name__}'>"


class _LegacyTensor(metaclass=_TensorType):
    """``XTensor(*sizes)`` is uninitialised storage of that shape, ``XTensor(data)`` copies a sequence, ``XTensor()``
    is empty, and ``XTensor(t)`` returns ``t`` itself when it already has the type (as torch's legacy ``new``)."""

    dtype = float32

    def __new__(cls, *args, device=None):
        if device is not None and str(device) != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: {device} was passed")
        return legacy_new(cls.dtype, args)


def legacy_new(d: dtype, args: tuple) -> Tensor:
    """torch's legacy constructor of dtype ``d``: sizes, a sequence of data, nothing, or a tensor of that dtype."""
    if len(args) == 1 and isinstance(args[0], Tensor):
        t = args[0]
        if t._data.dtype != d.numpy:
            raise TypeError(f"expected {_options(d)} (got {_options(t.dtype)})")
        return t
    if not args:
        return Tensor._make(np.empty((0,), d.numpy))
    if len(args) == 1 and isinstance(args[0], Size):
        args = tuple(args[0])
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return Tensor._make(np.empty(tuple(int(a) for a in args), d.numpy))
    if len(args) == 1:
        data = np.array(args[0])
        if data.dtype == object:
            raise TypeError(f"new(): data must be a sequence (got {_type_name(args[0])})")
        return Tensor._make(np.asarray(data, dtype=d.numpy, order="C"))
    bad = next(a for a in args if not isinstance(a, (int, np.integer)))
    raise TypeError(
        f"new(): argument 'size' failed to unpack the object at pos {args.index(bad) + 1} with error \"type must be "
        f'tuple of ints,but got {_type_name(bad)}"'
    )


#: dtype name -> the C++ type name torch's messages use
CPP_NAMES = {
    "float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
    "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
    "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}  # fmt: skip


def _options(d: dtype) -> str:
    return (
        f"TensorOptions(dtype={CPP_NAMES[d.name]}, device=cpu, layout=Strided, requires_grad=false (default), "
        "pinned_memory=false (default), memory_format=(nullopt))"
    )


def _legacy(name: str, d: dtype) -> type:
    doc = f"The legacy type of CPU {d.name} tensors: ``{name}(2, 3)`` constructs one, ``isinstance(x, {name})`` tests."
    namespace = {"dtype": d, "__module__": "numbagrad", "__qualname__": name, "__doc__": doc}
    return _TensorType(name, (_LegacyTensor,), namespace)


FloatTensor = _legacy("FloatTensor", float32)
DoubleTensor = _legacy("DoubleTensor", float64)
HalfTensor = _legacy("HalfTensor", float16)
BFloat16Tensor = _legacy("BFloat16Tensor", bfloat16)
LongTensor = _legacy("LongTensor", int64)
IntTensor = _legacy("IntTensor", int32)
ShortTensor = _legacy("ShortTensor", int16)
CharTensor = _legacy("CharTensor", int8)
ByteTensor = _legacy("ByteTensor", uint8)
BoolTensor = _legacy("BoolTensor", bool_)

#: "torch.FloatTensor" (or "numbagrad.FloatTensor", "torch.cuda.FloatTensor") -> (dtype, device type)
LEGACY_NAMES: dict[str, tuple] = {}
for _cls in (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, CharTensor,
             ByteTensor, BoolTensor):  # fmt: skip
    for _prefix in ("torch", "numbagrad"):
        LEGACY_NAMES[f"{_prefix}.{_cls.__name__}"] = (_cls.dtype, "cpu")
        LEGACY_NAMES[f"{_prefix}.cuda.{_cls.__name__}"] = (_cls.dtype, "cuda")
del _cls, _prefix


def type_name(t: Tensor) -> str:
    """``t.type()``: ``"torch.FloatTensor"``, or ``"torch.cuda.FloatTensor"`` for a cuda tensor."""
    device = "" if t.is_cpu else "cuda."
    return f"torch.{device}{t.dtype.scalar_name}Tensor"
