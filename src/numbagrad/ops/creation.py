"""Creation functions (tensor, zeros, ones, arange, rand, ...) and numbagrad's random generator."""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from .._tensor import Tensor
from .._types import Size, bool_, from_numpy_dtype, get_default_dtype, int64, to_device, to_dtype
from ..autograd.grad_mode import state
from ..backend import for_device
from ._registry import declare
from .inplace import random_fill_

_rng = [np.random.default_rng()]


@declare
def manual_seed(seed: int):
    """Seed numbagrad's generator (numpy's PCG64: the stream differs from torch's)."""
    _rng[0] = np.random.default_rng(int(seed))
    return _rng[0]


@declare
def seed() -> int:
    s = int(np.random.SeedSequence().entropy % (2**63))
    manual_seed(s)
    return s


def _generator() -> np.random.Generator:
    return _rng[0]


def _finish(data: np.ndarray, device, requires_grad: bool) -> Tensor:
    """A new leaf from host data, moved to ``device``."""
    return _leaf(for_device(to_device(device)).from_host(np.asarray(data)), requires_grad)


def _leaf(data, requires_grad: bool) -> Tensor:
    """A new leaf over device storage (an inference tensor inside ``inference_mode``)."""
    t = Tensor._make(data)
    if state.inference:
        t._is_inference = True
    if requires_grad:
        if not t.is_floating_point():
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad_(True)
    return t


def _infer_dtype(data: np.ndarray):
    kind = data.dtype.kind
    if kind == "b":
        return bool_
    if kind in "iu":
        return int64
    if kind == "f":
        return get_default_dtype()
    raise TypeError(f"Could not infer dtype of {data.dtype}")


@declare
def tensor(data, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor copying ``data`` (nested lists, numbers, numpy arrays, tensors)."""
    if isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use sourceTensor.clone().detach() or "
            "sourceTensor.clone().detach().requires_grad_(True), rather than torch.tensor(sourceTensor).",
            UserWarning,
            stacklevel=2,
        )
        array = np.array(data._host())
        inferred = from_numpy_dtype(array.dtype)
    elif isinstance(data, np.ndarray):
        array = np.array(data)
        inferred = from_numpy_dtype(array.dtype)
    else:
        if isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in _flatten(data)):
            for d in _flatten(data):
                if isinstance(d, Tensor) and d.numel() != 1:
                    raise ValueError("only one element tensors can be converted to Python scalars")
            data = _map(data, lambda d: d.item() if isinstance(d, Tensor) else d)
        try:
            array = np.array(data)
        except ValueError:
            _check_rectangular(data, _first_shape(data))
            raise
        if array.dtype == object:
            raise TypeError(f"Could not infer dtype of {type(data).__name__}")
        inferred = _infer_dtype(array)
    dt = to_dtype(dtype) if dtype is not None else inferred
    return _finish(np.asarray(array, dtype=dt.numpy, order="C"), device, requires_grad)


def _first_shape(data) -> list:
    """The shape torch infers from the first element at each depth of a nested sequence."""
    shape = []
    while isinstance(data, (list, tuple)):
        shape.append(len(data))
        data = data[0] if data else None
    return shape


def _check_rectangular(data, shape: list, dim: int = 0) -> None:
    """Raise torch's error for a ragged nested sequence."""
    if dim >= len(shape) or not isinstance(data, (list, tuple)):
        return
    if len(data) != shape[dim]:
        raise ValueError(f"expected sequence of length {shape[dim]} at dim {dim} (got {len(data)})")
    for item in data:
        _check_rectangular(item, shape, dim + 1)


def _flatten(data):
    for d in data:
        if isinstance(d, (list, tuple)):
            yield from _flatten(d)
        else:
            yield d


def _map(data, fn):
    if isinstance(data, (list, tuple)):
        return [_map(d, fn) for d in data]
    return fn(data)


@declare(aliases=("asarray",))
def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Share memory when possible (a numpy array, a tensor, or a CUDA-array-interface object)."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device) if dtype is not None or device is not None else data
    if hasattr(data, "__cuda_array_interface__") and not isinstance(data, np.ndarray):
        t = Tensor._make(for_device(to_device("cuda")).as_device_array(data))
        return t if dtype is None else t.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or to_dtype(dtype).numpy == data.dtype):
        from_numpy_dtype(data.dtype)
        return _finish(data, device, False)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


@declare
def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing ``array``'s memory."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    from_numpy_dtype(array.dtype)
    return Tensor._make(array)


def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (numbers.Integral, Tensor)):
            raise TypeError(
                f"empty(): argument 'size' must be tuple of ints, but found element of type {type(s).__name__}"
            )
        if int(s) < 0:
            raise RuntimeError(
                f"Trying to create tensor with negative dimension {int(s)}: [{', '.join(map(str, size))}]"
            )
    return tuple(int(s) for s in size)


def _dtype_or_default(dtype):
    return to_dtype(dtype) if dtype is not None else get_default_dtype()


@declare
def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    backend = for_device(to_device(device))
    return _leaf(backend.zeros(_size(size), _dtype_or_default(dtype).numpy), requires_grad)


@declare
def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    backend = for_device(to_device(device))
    return _leaf(backend.full(_size(size), 1, _dtype_or_default(dtype).numpy), requires_grad)


@declare
def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    backend = for_device(to_device(device))
    return _leaf(backend.empty(_size(size), _dtype_or_default(dtype).numpy), requires_grad)


@declare
def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if dtype is None:
        dtype = (
            bool_
            if isinstance(fill_value, bool)
            else (int64 if isinstance(fill_value, numbers.Integral) else get_default_dtype())
        )
    return _finish(np.full(_size((size,)), fill_value, to_dtype(dtype).numpy), device, requires_grad)


def _like(t: Tensor, dtype, device):
    return (to_dtype(dtype) if dtype is not None else t.dtype), (device if device is not None else t.device)


@declare
def zeros_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return zeros(t.shape, dtype=dt, device=dev, requires_grad=requires_grad)


@declare
def ones_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return ones(t.shape, dtype=dt, device=dev, requires_grad=requires_grad)


@declare
def empty_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return empty(t.shape, dtype=dt, device=dev, requires_grad=requires_grad)


@declare
def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return full(t.shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


@declare
def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    values = [start, end, step]
    if dtype is None:
        is_float = any(isinstance(v, float) or (isinstance(v, Tensor) and v.is_floating_point()) for v in values)
        dtype = get_default_dtype() if is_float else int64
    dt = to_dtype(dtype)
    data = np.arange(*(v.item() if isinstance(v, Tensor) else v for v in values), dtype=np.float64)
    return _finish(data.astype(dt.numpy), device, requires_grad)


@declare
def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(np.linspace(start, end, steps).astype(_dtype_or_default(dtype).numpy), device, requires_grad)


@declare
def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(np.eye(n, m, dtype=_dtype_or_default(dtype).numpy), device, requires_grad)


@declare
def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt = _dtype_or_default(dtype)
    return _finish(_generator().random(_size(size), dtype=np.float64).astype(dt.numpy), device, requires_grad)


@declare
def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt = _dtype_or_default(dtype)
    return _finish(_generator().standard_normal(_size(size)).astype(dt.numpy), device, requires_grad)


@declare
def randint(low, high=None, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if size is None:
        low, high, size = 0, low, high
    dt = to_dtype(dtype) if dtype is not None else int64
    return _finish(_generator().integers(low, high, _size((size,))).astype(dt.numpy), device, requires_grad)


@declare
def rand_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return rand(t.shape, dtype=dt, device=dev, requires_grad=requires_grad)


@declare
def randn_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return randn(t.shape, dtype=dt, device=dev, requires_grad=requires_grad)


@declare
def randperm(n: int, dtype=None, device=None) -> Tensor:
    return _finish(_generator().permutation(n).astype((to_dtype(dtype) if dtype else int64).numpy), device, False)


@declare(methods=("normal_",), name="_normal_")
def normal_(input: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with samples of N(mean, std^2) from numbagrad's generator."""
    return random_fill_(input, (generator or _generator()).normal(mean, std, input.shape))


@declare(methods=("uniform_",), name="_uniform_")
def uniform_(input: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with samples of U(a, b) from numbagrad's generator."""
    return random_fill_(input, (generator or _generator()).uniform(a, b, input.shape))
