"""Helpers every op uses: dtype promotion (torch's rules), dim wrapping, operand conversion, device checks."""

from __future__ import annotations

import numbers

import numpy as np

from .._tensor import Tensor
from .._types import (  # noqa: F401 - shape_str is re-exported for the ops
    bool_,
    dtype,
    float32,
    float64,
    from_numpy_dtype,
    get_default_dtype,
    int32,
    int64,
    shape_str,
)


def wrap_dim(dim: int, ndim: int) -> int:
    """Normalise a possibly negative dim, with torch's IndexError."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def wrap_dims(dims, ndim: int) -> tuple:
    if isinstance(dims, int):
        dims = (dims,)
    return tuple(sorted({wrap_dim(d, ndim) for d in dims}))


def _category(d: dtype) -> int:
    return 0 if d is bool_ else (2 if d.is_floating_point else 1)


def promote(a: dtype | None, b: dtype | None) -> dtype | None:
    """torch.promote_types for our dtypes: a float wins over any integer, otherwise the wider one."""
    if a is None:
        return b
    if b is None or a is b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    return a if a.itemsize >= b.itemsize else b


def _combine(higher: dtype | None, lower: dtype | None) -> dtype | None:
    if higher is not None and higher.is_floating_point:
        return higher
    if higher is bool_ or (lower is not None and lower.is_floating_point):
        return promote(higher, lower)
    return higher if higher is not None else lower


def result_type(*args) -> dtype:
    """torch's result_type: dimensioned tensors outrank 0-dim tensors, which outrank Python scalars,
    unless a lower tier is of a higher category (bool < integer < float)."""
    dim_result = zero_result = wrapped = None
    for a in args:
        if isinstance(a, Tensor):
            d = from_numpy_dtype(a._data.dtype)
            if a._data.ndim:
                dim_result = promote(dim_result, d)
            else:
                zero_result = promote(zero_result, d)
        elif isinstance(a, (bool, np.bool_)):
            wrapped = promote(wrapped, bool_)
        elif isinstance(a, numbers.Integral):
            wrapped = promote(wrapped, int64)
        elif isinstance(a, numbers.Real):
            wrapped = promote(wrapped, get_default_dtype())
    return _combine(dim_result, _combine(zero_result, wrapped))


def float_dtype(d: dtype) -> dtype:
    return d if d.is_floating_point else get_default_dtype()


def as_operand(value):
    """Tensors and Python numbers pass through; array-likes become tensors."""
    if isinstance(value, (Tensor, numbers.Number)) and not isinstance(value, np.ndarray):
        if isinstance(value, np.generic):
            return value.item()
        return value
    if value is None:
        raise TypeError("unsupported operand type: 'NoneType'")
    from .creation import tensor

    return tensor(value)


def check_same_device(*args) -> bool:
    """True when the tensors live on cuda; mixing devices (other than 0-dim cpu tensors) is an error."""
    for a in args:
        if isinstance(a, Tensor) and not isinstance(a._data, np.ndarray):
            break
    else:
        return False  # all on the CPU: the common case, decided in one pass
    devices = {not isinstance(a._data, np.ndarray) for a in args if isinstance(a, Tensor) and a._data.ndim}
    zero_dim = {not isinstance(a._data, np.ndarray) for a in args if isinstance(a, Tensor) and not a._data.ndim}
    if len(devices) > 1:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
        )
    if devices:
        return devices.pop()
    return True in zero_dim and False not in zero_dim


def backend_of(is_cuda: bool):
    """The backend module for a device (imported once; cuda only when asked for)."""
    backend = _BACKENDS.get(is_cuda)
    if backend is None:
        import importlib

        backend = _BACKENDS[is_cuda] = importlib.import_module(
            "numbagrad.backend.cuda" if is_cuda else "numbagrad.backend.cpu"
        )
    return backend


_BACKENDS: dict = {}


def broadcast_shapes(*shapes) -> tuple:
    """The broadcast of ``shapes``, with torch's error naming the first two sizes that clash."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for k, size in enumerate(s, start=ndim - len(s)):
            if size != out[k] and 1 not in (size, out[k]):
                raise RuntimeError(
                    f"The size of tensor a ({out[k]}) must match the size of tensor b ({size}) at non-singleton "
                    f"dimension {k}"
                )
            out[k] = size if out[k] == 1 else out[k]
    return tuple(out)


def wrap_like(like: Tensor, data: np.ndarray) -> Tensor:
    """A tensor of the host result ``data`` on the device of ``like`` (for ops computed with numpy)."""
    if isinstance(like._data, np.ndarray):
        return Tensor._make(data)
    from ..backend import cuda

    return Tensor._make(cuda.to_device(np.asarray(data, order="C")))


__all__ = [
    "as_operand",
    "backend_of",
    "bool_",
    "broadcast_shapes",
    "check_same_device",
    "float32",
    "float64",
    "float_dtype",
    "int32",
    "int64",
    "promote",
    "result_type",
    "shape_str",
    "wrap_dim",
    "wrap_dims",
    "wrap_like",
]
