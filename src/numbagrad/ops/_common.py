"""Helpers the ops share: torch's type promotion, operand conversion and the one device check."""

from __future__ import annotations

import math

import numpy as np

from .. import _types
from .._tensor import Tensor
from .._types import (
    bool_,
    broadcast_shapes,
    dtype,
    from_numpy_dtype,
    get_default_dtype,
    int64,
    shape_str,
    wrap_dim,
    wrap_dims,
)
from ..autograd.grad_mode import state
from ..backend import backend_for
from ._registry import declare

#: ``new_shell(Tensor)``: a Tensor with only its storage left to set, what ``Tensor._make`` does without its call
#: (the fast paths build their results so).
new_shell = object.__new__

__all__ = [
    "as_operand",
    "backend_for",
    "checked_scalar",
    "broadcast_shapes",
    "float_dtype",
    "promote",
    "result_np_dtype",
    "result_type",
    "same_backend",
    "shape_str",
    "wrap_dim",
    "wrap_dims",
]

_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2, "V": 2, "c": 3}  # ("V": ml_dtypes' bfloat16, a float)
_SCALARS = (bool, int, float, complex)


def _np_promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types on numpy dtypes: a float wins over any integer, otherwise the wider one."""
    if a == b:
        return a
    ca, cb = _CATEGORY[a.kind], _CATEGORY[b.kind]
    if ca == 3 or cb == 3:
        return _types.promote_types(from_numpy_dtype(a), from_numpy_dtype(b)).numpy
    if ca != cb:
        return a if ca > cb else b
    return np.promote_types(a, b)


def _scalar_dtype(value) -> np.dtype:
    if type(value) is bool:
        return np.dtype(np.bool_)
    if type(value) is int:
        return np.dtype(np.int64)
    if type(value) is complex:
        return _types.get_default_complex_dtype().numpy
    return get_default_dtype().numpy


def result_np_dtype(inputs) -> np.dtype:
    """torch's result_type over tensors and Python scalars, as a numpy dtype: dimensioned tensors outrank 0-dim
    tensors, which outrank Python scalars, unless a lower tier is of a higher category (bool < int < float)."""
    dim = zero = scalar = None
    for a in inputs:
        if isinstance(a, Tensor):
            d = a._data.dtype
            if a._data.ndim:
                dim = d if dim is None else _np_promote(dim, d)
            else:
                zero = d if zero is None else _np_promote(zero, d)
        else:
            d = _scalar_dtype(a)
            scalar = d if scalar is None else _np_promote(scalar, d)
    return _combine(dim, _combine(zero, scalar))


def _combine(higher, lower):
    """The result of a tier and the tiers below it."""
    if higher is None:
        return lower
    if lower is None or _CATEGORY[lower.kind] <= _CATEGORY[higher.kind]:
        return higher
    if lower.kind == "c" and _CATEGORY[higher.kind] == 2:  # a float tensor keeps its precision: float32 * 1j is cfloat
        return _types.complex_of(from_numpy_dtype(higher)).numpy
    return _np_promote(higher, lower)


@declare(differentiable=False)
def result_type(*args) -> dtype:
    """The dtype an op on these tensors and numbers computes in (torch's promotion rules)."""
    return from_numpy_dtype(result_np_dtype([as_operand(a) for a in args]))


@declare(name="promote_types", differentiable=False)
def promote(a: dtype | None, b: dtype | None) -> dtype | None:
    """The smallest dtype both ``a`` and ``b`` convert to without losing their category."""
    if a is None:
        return b
    if b is None:
        return a
    return from_numpy_dtype(_np_promote(a.numpy, b.numpy))


def float_dtype(d: dtype) -> dtype:
    """The dtype a float-valued op computes ``d`` in: floats and complex keep theirs, others the default float."""
    return d if d.is_floating_point or d.is_complex else get_default_dtype()


def type_name(value) -> str:
    """A value's type as torch's argument errors name it (C's ``tp_name``): built-in types and classes defined in
    Python by their name (``list``, ``Foo``), extension types with their module (``numpy.ndarray``)."""
    kind = type(value)
    if kind.__flags__ & (1 << 9) or kind.__module__ == "builtins":  # Py_TPFLAGS_HEAPTYPE: defined in Python
        return kind.__name__
    return f"{kind.__module__}.{kind.__name__}"


def invalid_arguments(op: str, args: tuple, signatures: tuple, kwargs: dict | None = None) -> TypeError:
    """torch's argument-parser TypeError when no overload of ``op`` takes these arguments: the types given, then each
    overload (``signatures``: the text between its parentheses as torch prints it, ``"Tensor input, Number other,
    *, Tensor out = None"``), each followed, when it has as many entries as arguments were given (torch counts every
    comma-separated entry, ``*`` included), by why it did not match: keywords it has not, or the arguments whose
    type it does not take, marked ``!...!``. torch's check knows Python type names only: ``float`` takes ``int``,
    ``Tensor`` no subclass, ``Number`` nothing."""
    kwargs = dict(reversed((kwargs or {}).items()))  # (torch keeps them in a hash map: a few come latest first)
    got = [type_name(a) for a in args] + [f"{k}={type_name(v)}" for k, v in kwargs.items()]
    text = f"{op}() received an invalid combination of arguments - got {_listed(got, args)}, but expected one of:\n"
    for signature in signatures:
        text += f" * ({signature})\n"
        params = signature.split(", ")
        if len(params) != len(args) + len(kwargs):
            continue
        names = [p.rsplit(" ", 1)[-1] for p in params]
        unknown = [k for k in kwargs if k not in names[len(params) - len(kwargs) :]]
        if unknown:
            text += f"      didn't match because some of the keywords were incorrect: {', '.join(unknown)}\n"
            continue
        marked = []
        for i, param in enumerate(params):
            value = args[i] if i < len(args) else kwargs[names[i]]
            desc = ("" if i < len(args) else f"{names[i]}=") + _described(value)
            kind = param.rsplit(" ", 1)[0]
            marked.append(desc if type_name(value) in _TAKES.get(kind, (kind,)) else f"!{desc}!")
        text += f"      didn't match because some of the arguments have invalid types: {_listed(marked, args)}\n"
    return TypeError(text)


#: The Python type names torch's argument check takes for a parameter type other than the one of its own name.
_TAKES = {"float": ("float", "int")}


def _listed(parts: list, args: tuple) -> str:
    """``(a, b)``, torch's way: with keywords alone, each part keeps its trailing ``", "``."""
    return f"({', '.join(parts)})" if args else f"({''.join(p + ', ' for p in parts)})"


def _described(value) -> str:
    """A value's type as torch's mismatch line describes it: a list or tuple with its items' types."""
    if isinstance(value, list):
        return f"list of [{', '.join(type_name(v) for v in value)}]"
    if isinstance(value, tuple):
        return f"tuple of ({', '.join(type_name(v) for v in value)}{',' if len(value) == 1 else ''})"
    return type_name(value)


def not_a_tensor(op: str, name: str, position: int, value) -> TypeError:
    """torch's error for a non-tensor where ``op`` takes a tensor argument."""
    return TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not {type_name(value)}")


def as_operand(value, op: str = "", position: int = 2, name: str = "other"):
    """A tensor or a Python number for an op: numpy scalars become numbers, numpy arrays tensors; anything else
    is torch's TypeError (``add(): argument 'other' (position 2) must be Tensor, not list``)."""
    if isinstance(value, Tensor):
        return value
    t = type(value)
    if t is float or t is int or t is bool or t is complex:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return Tensor._make(np.array(value, dtype=_storable(value.dtype)))
    if isinstance(value, _SCALARS):  # subclasses of the Python numbers (IntEnum, ...)
        if isinstance(value, complex):
            return complex(value)
        return bool(value) if isinstance(value, bool) else (int(value) if isinstance(value, int) else float(value))
    raise not_a_tensor(op, name, position, value)


def _storable(d: np.dtype) -> np.dtype:
    return d if d.kind != "u" or d.itemsize == 1 else np.dtype(np.int64)


def same_backend(tensors):
    """The backend of tensors one op combines: all on one device, except that 0-dim CPU tensors may join a
    cuda op (as in torch). Mixing devices otherwise is torch's RuntimeError."""
    first = kind = None
    for t in tensors:
        if isinstance(t, Tensor):
            data = t._data
            if first is None:
                first, kind = backend_for(data), type(data)
            elif type(data) is not kind and backend_for(data) is not first:  # (one storage type: one backend)
                return _mixed(tensors)
    return first


def _mixed(tensors):
    backends = {backend_for(t._data) for t in tensors if isinstance(t, Tensor) and t._data.ndim}
    zero_dim = {backend_for(t._data) for t in tensors if isinstance(t, Tensor) and not t._data.ndim}
    if len(backends) > 1:
        names = sorted(str(b.DEVICE) for b in backends)
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {names[1]} and {names[0]}!"
        )
    if backends:
        return backends.pop()
    return next(b for b in zero_dim if b.DEVICE.type != "cpu")


__all__ += ["bool_", "int64", "shape_str"]


def autocast_to(dtype, *tensors) -> tuple:
    """Inside an enabled ``amp.autocast`` region: ``tensors`` whose device is the region's and whose dtype is
    floating, cast to ``dtype`` (None: the region's dtype), as torch's autocast casts the inputs of the ops on its
    lists; anything else unchanged. Callers test ``state.autocast`` first, so ops outside a region pay one attribute
    read."""
    device_type, region_dtype = state.autocast
    target = region_dtype if dtype is None else dtype
    return tuple(
        t.to(target)
        if isinstance(t, Tensor) and t.is_floating_point() and t.device.type == device_type and t.dtype != target
        else t
        for t in tensors
    )


#: The C++ type names of torch's overflow message, for the dtypes whose scalar conversion torch checks.
_CHECKED_CONVERSIONS = {
    "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t", "float32": "float",
}  # fmt: skip
_FLOAT32_MAX = float(np.finfo(np.float32).max)  # (``np.finfo`` per call cost a masked_fill 0.5 us)


def checked_scalar(value, d: dtype):
    """``value`` as torch converts a Python number written into a tensor of dtype ``d`` (by ``fill_``, ``full``, an
    index write, ``masked_fill``, clamp's bounds): an integer dtype takes the numbers in its range, and an unsigned
    one also their negatives, which wrap (``-1`` is 255 in uint8); no NaN or infinity; float32 takes no finite number
    beyond its range. float64, the 16-bit floats and bool take any number, as in torch."""
    name = _CHECKED_CONVERSIONS.get(d.name)
    if name is None or isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return value
    if d.is_floating_point:
        fits = not math.isfinite(value) or abs(value) <= _FLOAT32_MAX
    else:
        info = np.iinfo(d.numpy)
        low = -int(info.max) if info.min == 0 else int(info.min)
        fits = math.isfinite(value) and low <= value <= int(info.max)
    if not fits:
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    if value < 0 and not d.is_floating_point and np.iinfo(d.numpy).min == 0:
        return int(value) + int(np.iinfo(d.numpy).max) + 1
    return value
