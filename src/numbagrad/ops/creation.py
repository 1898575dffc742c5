"""Creation functions (tensor, zeros, ones, arange, rand, ...) and numbagrad's random generator."""

from __future__ import annotations

import functools
import numbers
import warnings

import numpy as np

from .._tensor import Tensor
from .._typeinfo import legacy_new
from .._types import (
    Size,
    bool_,
    from_numpy_dtype,
    get_default_complex_dtype,
    get_default_dtype,
    int64,
    to_device,
    to_dtype,
)
from ..autograd.function import Function
from ..autograd.grad_mode import break_trace, state
from ..backend import for_device, layout
from ._common import _np_promote, checked_scalar
from ._registry import declare
from .inplace import random_fill_

_initial_seed = [int(np.random.SeedSequence().entropy % 2**63)]  # what torch.initial_seed() returns
_rng = [np.random.default_rng(_initial_seed[0])]


def _recorded(fn):
    """A creation function compiled code may call: while a trace runs, the recorder makes the call a plan step, so
    each replay makes its tensor again (random draws fresh, in program order, as eagerly); otherwise it is ``fn``.
    (``tensor``/``as_tensor``/``from_numpy`` are not: what they copy is host data the trace cannot follow.)"""

    @functools.wraps(fn)
    def create(*args, **kwargs):
        tracer = state.tracer
        if tracer is not None:
            return tracer.creation(fn, args, kwargs)
        return fn(*args, **kwargs)

    return create


@declare
def manual_seed(seed: int):
    """Seed numbagrad's generator (numpy's PCG64: the stream differs from torch's)."""
    break_trace("seeds the random number generator")  # (a replay would not reseed)
    _initial_seed[0] = int(seed)
    _rng[0] = np.random.default_rng(int(seed))
    return _rng[0]


@declare
def seed() -> int:
    """Seed numbagrad's global generator from OS entropy and return the seed (see ``manual_seed``)."""
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
        if not (t.is_floating_point() or t.is_complex()):
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
    if kind == "c":
        return get_default_complex_dtype()
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
    elif isinstance(data, (np.ndarray, np.generic)):  # a numpy scalar keeps its dtype too (np.float64(2.0))
        array = np.array(data)
        inferred = from_numpy_dtype(array.dtype)
    else:
        typed = None  # a sequence's elements that carry a dtype (numpy scalars and arrays, tensors)
        if isinstance(data, str):
            raise TypeError("new(): invalid data type 'str'")
        if isinstance(data, (list, tuple)):
            items = list(_flatten(data))
            if any(isinstance(d, str) for d in items):  # (torch's two errors: only strings, or mixed in)
                if all(isinstance(d, str) for d in items):
                    raise ValueError("too many dimensions 'str'")
                raise TypeError("new(): invalid data type 'str'")
            if not set(map(type, items)) <= _PYTHON_NUMBERS:
                typed = items
                if any(isinstance(d, Tensor) for d in items):
                    for d in items:
                        if isinstance(d, Tensor) and d.numel() != 1:
                            raise ValueError("only one element tensors can be converted to Python scalars")
                    data = _map(data, lambda d: d.item() if isinstance(d, Tensor) else d)
        try:
            array = np.array(data)
        except ValueError:
            _check_rectangular(data, _first_shape(data))
            raise
        if array.dtype == object:
            raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")
        inferred = _infer_dtype(array) if typed is None else _sequence_dtype(typed)
    dt = to_dtype(dtype) if dtype is not None else inferred
    _check_fits(array, dt.numpy)
    return _finish(np.asarray(array, dtype=dt.numpy, order="C"), device, requires_grad)


def _check_fits(array: np.ndarray, target: np.dtype) -> None:
    """torch refuses a float value that an integer dtype cannot hold (nan, inf, out of range); a fraction is
    truncated."""
    if target.kind not in "iu" or array.dtype.kind != "f" or not array.size:
        return
    info = np.iinfo(target)
    values = array.astype(np.float64)
    if not np.isfinite(values).all() or values.min() <= info.min - 1 or values.max() >= info.max + 1:
        raise RuntimeError(f"value cannot be converted to type {target.name} without overflow")


_PYTHON_NUMBERS = {bool, int, float, complex}


def _sequence_dtype(items: list):
    """torch's dtype for a sequence with numpy scalars, arrays or tensors among its elements: every element's
    own type (a bool, an int64, the default float; their dtype), promoted as ``promote_types`` does, so
    ``[np.float64(1), 2.0]`` is float64 and ``[np.int32(1), 2]`` int64."""
    found = None
    for d in items:
        if isinstance(d, Tensor):
            d = d._data
        if isinstance(d, (np.generic, np.ndarray)):
            kind = d.dtype
        else:
            kind = _infer_dtype(np.asarray(d)).numpy
        found = kind if found is None else _np_promote(found, kind)
    return from_numpy_dtype(found)


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


def _size(size, negative: str | None = None) -> tuple:
    """The shape of ``size`` (sizes, or one sequence of them); a negative size raises torch's error, or the message
    ``negative`` where the op has its own (``zeros``)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (numbers.Integral, Tensor)):
            raise TypeError(
                f"empty(): argument 'size' must be tuple of ints, but found element of type {type(s).__name__}"
            )
        if int(s) < 0:
            raise RuntimeError(
                negative or f"Trying to create tensor with negative dimension {int(s)}: [{', '.join(map(str, size))}]"
            )
    return tuple(int(s) for s in size)


def _sizes(args: tuple, size, negative: str | None = None) -> tuple:
    """The shape from positional sizes or the ``size=`` keyword (``zeros(2, 3)``, ``zeros((2, 3))``,
    ``zeros(size=(2, 3))``)."""
    if size is not None:
        if args:
            raise TypeError("got multiple values for argument 'size'")
        args = (size,)
    return _size(args, negative)


def _rng_for(generator=None) -> np.random.Generator:
    """The numpy generator a draw uses: numbagrad's global one, or the ``generator=`` given (a
    ``numbagrad.Generator``'s mt19937 engine, or a numpy Generator)."""
    if generator is None:
        return _generator()
    if isinstance(generator, np.random.Generator):
        return generator
    engine = getattr(generator, "_engine", None)
    if engine is None:
        raise TypeError(f"expected a numbagrad.Generator, got {type(generator).__name__}")
    return np.random.Generator(engine)


def _is_mt19937(generator) -> bool:
    """A ``numbagrad.Generator`` (whose integer draws are torch's), without importing ``_generator`` here: it
    imports this module."""
    return generator is not None and hasattr(generator, "_randperm")


def _dtype_or_default(dtype):
    return to_dtype(dtype) if dtype is not None else get_default_dtype()


def _continuous(dtype, kernel: str) -> None:
    """torch's refusal to draw a continuous distribution into an integral or bool ``dtype`` (its message names
    the kernel: ``normal_kernel_cpu`` for normal draws, ``check_uniform_bounds`` for uniform ones)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype.scalar_name}'")


@declare
@_recorded
def zeros(*args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor of the given size filled with 0 (default float dtype)."""
    backend = for_device(to_device(device))
    shape = _sizes(args, size, "zeros: Dimension size must be non-negative.")
    return _leaf(backend.zeros(shape, _dtype_or_default(dtype).numpy), requires_grad)


@declare
@_recorded
def ones(*args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor of the given size filled with 1 (default float dtype)."""
    backend = for_device(to_device(device))
    return _leaf(backend.full(_sizes(args, size), 1, _dtype_or_default(dtype).numpy), requires_grad)


@declare
@_recorded
def empty(*args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor of the given size with uninitialised values."""
    backend = for_device(to_device(device))
    return _leaf(backend.empty(_sizes(args, size), _dtype_or_default(dtype).numpy), requires_grad)


@declare
@_recorded
def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor of the given size filled with ``fill_value``; the dtype follows the value (bool, int64, float)."""
    if dtype is None:
        dtype = (
            bool_
            if isinstance(fill_value, bool)
            else (
                int64
                if isinstance(fill_value, numbers.Integral)
                else (get_default_complex_dtype() if isinstance(fill_value, complex) else get_default_dtype())
            )
        )
    fill_value = checked_scalar(fill_value, to_dtype(dtype))
    return _finish(np.full(_size((size,)), fill_value, to_dtype(dtype).numpy), device, requires_grad)


def _laid_out_like(result: Tensor, t: Tensor, memory_format) -> Tensor:
    """``result`` (new, row-major) laid out as ``memory_format`` says: by default (``preserve_format``) ``t``'s
    own layout when ``t`` is dense, else torch's suggestion for it (channels-last or row-major)."""
    name = "preserve_format" if memory_format is None else memory_format.name
    order = layout.preserved_order(t._data) if name == "preserve_format" else layout.format_order(name, t.dim())
    if order != tuple(range(t.dim())):
        result._data = layout.in_order(result._data, order, result._backend.copy)
    return result


def _like(t: Tensor, dtype, device):
    return (to_dtype(dtype) if dtype is not None else t.dtype), (device if device is not None else t.device)


@declare
@_recorded
def zeros_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    """A tensor of zeros with ``t``'s shape, dtype and device (unless given).

    The tensor is the positional parameter ``t`` (torch: ``input``); the layout is ``t``'s (``memory_format``).
    """
    dt, dev = _like(t, dtype, device)
    return _laid_out_like(zeros(t.shape, dtype=dt, device=dev, requires_grad=requires_grad), t, memory_format)


@declare
@_recorded
def ones_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    """A tensor of ones with ``t``'s shape, dtype and device (unless given).

    The tensor is the positional parameter ``t`` (torch: ``input``); the layout is ``t``'s (``memory_format``).
    """
    dt, dev = _like(t, dtype, device)
    return _laid_out_like(ones(t.shape, dtype=dt, device=dev, requires_grad=requires_grad), t, memory_format)


@declare
@_recorded
def empty_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    """An uninitialised tensor with ``t``'s shape, dtype and device (unless given).

    The tensor is the positional parameter ``t`` (torch: ``input``); the layout is ``t``'s (``memory_format``).
    """
    dt, dev = _like(t, dtype, device)
    return _laid_out_like(empty(t.shape, dtype=dt, device=dev, requires_grad=requires_grad), t, memory_format)


@declare
@_recorded
def full_like(
    t: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False, memory_format=None
) -> Tensor:
    """A tensor filled with ``fill_value`` with ``t``'s shape, dtype and device (unless given).

    The tensor is the positional parameter ``t`` (torch: ``input``); the layout is ``t``'s (``memory_format``).
    """
    dt, dev = _like(t, dtype, device)
    return _laid_out_like(
        full(t.shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad), t, memory_format
    )


@declare
@_recorded
def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The values ``start, start + step, ...`` up to ``end`` (excluded), 1-d; int64 unless an argument is a float."""
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
@_recorded
def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, as a 1-d tensor."""
    return _finish(np.linspace(start, end, steps).astype(_dtype_or_default(dtype).numpy), device, requires_grad)


@declare
@_recorded
def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An ``n`` x ``m`` (default ``n`` x ``n``) matrix with ones on the diagonal."""
    for name, k in (("n", n), ("m", m)):
        if k is not None and k < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {k}")
    return _finish(np.eye(n, m, dtype=_dtype_or_default(dtype).numpy), device, requires_grad)


@declare
@_recorded
def rand(*args, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples from ``[0, 1)`` of the given size.

    The global generator is numpy's PCG64 (``manual_seed``), so the values differ from torch's for the same seed;
    ``generator`` may also be a ``numpy.random.Generator``.
    """
    dt = _dtype_or_default(dtype)
    shape = _sizes(args, size)
    _continuous(dt, "check_uniform_bounds")
    draws = _rng_for(generator).random(shape, dtype=np.float64)
    return _finish(draws.astype(dt.numpy), device, requires_grad)


@declare
@_recorded
def randn(*args, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples of the given size.

    The global generator is numpy's PCG64 (``manual_seed``), so the values differ from torch's for the same seed;
    ``generator`` may also be a ``numpy.random.Generator``. A complex dtype draws its real and imaginary parts
    each from N(0, 1/2), as torch's, so that ``E|z|^2 = 1``.
    """
    dt = _dtype_or_default(dtype)
    shape = _sizes(args, size)
    _continuous(dt, "normal_kernel_cpu")
    if dt.is_complex:
        parts = _rng_for(generator).standard_normal((*shape, 2)) * np.sqrt(0.5)
        values = (parts[..., 0] + 1j * parts[..., 1]).astype(dt.numpy)
        return _finish(values, device, requires_grad)
    return _finish(_rng_for(generator).standard_normal(shape).astype(dt.numpy), device, requires_grad)


@declare
@_recorded
def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad: bool = False):
    """Integers drawn uniformly from ``[low, high)``; with a ``numbagrad.Generator`` the draws are torch's."""
    if size is None:
        low, high, size = 0, low, high
    dt = to_dtype(dtype) if dtype is not None else int64
    shape = _size((size,))
    if _is_mt19937(generator):
        n = int(np.prod(shape, dtype=np.int64))
        data = (low + generator._randint(high - low, n)).reshape(shape)
    else:
        data = _rng_for(generator).integers(low, high, shape)
    return _finish(data.astype(dt.numpy), device, requires_grad)


@declare
@_recorded
def rand_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    """Uniform samples from ``[0, 1)`` with ``t``'s shape, dtype and device (torch names the tensor ``input``)."""
    dt, dev = _like(t, dtype, device)
    return _laid_out_like(rand(t.shape, dtype=dt, device=dev, requires_grad=requires_grad), t, memory_format)


@declare
@_recorded
def randn_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    """Standard normal samples with ``t``'s shape, dtype and device (torch names the tensor ``input``)."""
    dt, dev = _like(t, dtype, device)
    return _laid_out_like(randn(t.shape, dtype=dt, device=dev, requires_grad=requires_grad), t, memory_format)


@declare
@_recorded
def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of ``range(n)``; with a ``numbagrad.Generator`` it is torch's."""
    if _is_mt19937(generator):
        perm = np.asarray(generator._randperm(n), dtype=np.int64)
    else:
        perm = _rng_for(generator).permutation(n)
    return _finish(perm.astype((to_dtype(dtype) if dtype else int64).numpy), device, requires_grad)


@declare(methods=("normal_",), name="_normal_")
def normal_(input: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with samples of N(mean, std^2) from numbagrad's generator."""
    _continuous(input.dtype, "normal_kernel_cpu")
    return random_fill_(input, _rng_for(generator).normal(mean, std, input.shape))


@declare(methods=("uniform_",), name="_uniform_")
def uniform_(input: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with samples of U(a, b) from numbagrad's generator."""
    _continuous(input.dtype, "check_uniform_bounds")
    return random_fill_(input, _rng_for(generator).uniform(a, b, input.shape))


# --- random ops, random fills, new_* ----------------------------------------------------------------------------
class Bernoulli(Function):
    """``bernoulli(p)``: 0/1 draws with probabilities ``p``; no reparametrised gradient (zeros, as torch)."""

    node_name = "BernoulliBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, p, generator):
        host = p._host()
        draws = (_rng_for(generator).random(host.shape) < host).astype(host.dtype)
        return Tensor._make(p._backend.from_host(draws))

    @staticmethod
    def backward(ctx, g):
        return g * 0, None


def _check_probabilities(p: np.ndarray) -> None:
    if p.size and not ((p >= 0) & (p <= 1)).all():
        raise RuntimeError(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be improved?  If "
            "so, please report an enhancement request to PyTorch.)"
        )


@declare(methods=True)
def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:  # noqa: A002
    """0/1 draws (in ``input``'s float dtype) with probability ``input`` elementwise, or ``p`` for every element."""
    if not input.is_floating_point():
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{input.dtype.scalar_name}'")
    if p is not None:
        _check_probabilities(np.asarray(p))
        draws = (_rng_for(generator).random(input.shape) < p).astype(input._data.dtype)
        return Tensor._make(input._backend.from_host(draws))
    _check_probabilities(input._host())
    return Bernoulli.apply(input, generator)


@declare(methods=("bernoulli_",), name="_bernoulli_")
def bernoulli_(input: Tensor, p=0.5, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with 0/1 draws of probability ``p`` (a number, or a tensor broadcast to ``input``)."""
    probs = p._host() if isinstance(p, Tensor) else np.asarray(p, dtype=np.float64)
    _check_probabilities(probs)
    return random_fill_(input, _rng_for(generator).random(input.shape) < np.broadcast_to(probs, input.shape))


@declare(methods=("exponential_",), name="_exponential_")
def exponential_(input: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with draws of the exponential distribution of rate ``lambd``."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(
            "Exponential distribution is a continuous probability distribution. dtype must be a floating point but "
            f"you specified {input.dtype.scalar_name}"
        )
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return random_fill_(input, _rng_for(generator).exponential(1.0 / lambd, input.shape))


_RANDOM_RANGE = {"f": {2: 1 << 11, 4: 1 << 24, 8: 1 << 53}, "b": {1: 2}}


@declare(methods=("random_",), name="_random_")
def random_(input: Tensor, from_=0, to=None, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with integers drawn uniformly from ``[from, to)``: ``random_(to)``, ``random_(from, to)``, or without
    bounds every integer the dtype holds exactly (``[0, 2**24]`` for float32, ``[0, 2**53]`` for float64)."""
    dt = input._data.dtype
    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is None:
        to = _RANDOM_RANGE.get(dt.kind, {}).get(dt.itemsize)
        to = (to + 1) if dt.kind == "f" else (to if to is not None else int(np.iinfo(dt).max))
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    return random_fill_(input, _rng_for(generator).integers(from_, to, input.shape))


class Multinomial(Function):
    @staticmethod
    def forward(ctx, probs, num_samples, replacement, generator):
        p = probs._host().astype(np.float64)
        rows = p.reshape(-1, p.shape[-1])
        rng = _rng_for(generator)
        if replacement:  # inverse CDF of uniform draws
            cdf = np.cumsum(rows, -1)
            u = rng.random((rows.shape[0], num_samples)) * cdf[:, -1:]
            out = np.stack([np.searchsorted(c, v, side="right") for c, v in zip(cdf, u)])
            out = np.minimum(out, rows.shape[1] - 1)
        else:  # torch's: the top ``num_samples`` of p / q with q ~ Exp(1) (zero-weight categories come last)
            keys = rows / rng.exponential(1.0, rows.shape)
            out = np.argsort(-keys, axis=-1, kind="stable")[:, :num_samples]
        out = out.astype(np.int64).reshape(p.shape[:-1] + (num_samples,))
        return Tensor._make(probs._backend.from_host(out))


@declare(methods=True)
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:  # noqa: A002
    """Category indices drawn with probabilities proportional to the rows of ``input`` (1-d or 2-d), with or
    without replacement."""
    if input.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n = input.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    p = input._host()
    if not np.isfinite(p).all() or (p < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (p.reshape(-1, n).sum(-1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    return Multinomial.apply(input, int(num_samples), bool(replacement), generator)


class _Normal(Function):
    """``normal`` with tensor ``mean`` and/or ``std``: draws ``mean + std * N(0, 1)``; the gradients are zeros (no
    reparametrisation), as torch's."""

    _trusted = True

    @staticmethod
    def forward(ctx, mean, std, generator):
        ctx.shapes = [m.shape if isinstance(m, Tensor) else None for m in (mean, std)]
        ref = mean if isinstance(mean, Tensor) else std
        m = mean._host() if isinstance(mean, Tensor) else mean
        s = std._host() if isinstance(std, Tensor) else std
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
        draws = np.asarray(m + s * _rng_for(generator).standard_normal(shape), dtype=ref._data.dtype)
        return Tensor._make(ref._backend.from_host(draws))

    @staticmethod
    def backward(ctx, g):
        return tuple(None if s is None else zeros_of_shape(g, s) for s in ctx.shapes) + (None,)


def zeros_of_shape(like: Tensor, shape) -> Tensor:
    return Tensor._make(like._backend.zeros(tuple(shape), like._data.dtype))


_NORMAL = {
    (True, False): type("NormalTensorFloat", (_Normal,), {"node_name": "NormalBackward1"}),
    (False, True): type("NormalFloatTensor", (_Normal,), {"node_name": "NormalBackward2"}),
    (True, True): type("NormalTensorTensor", (_Normal,), {"node_name": "NormalBackward3"}),
}


@declare
@_recorded
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad: bool = False):
    """Draws of N(mean, std**2): ``mean`` and/or ``std`` tensors (broadcast), or two numbers and a ``size``."""
    tensors = (isinstance(mean, Tensor), isinstance(std, Tensor))
    if not any(tensors):
        if size is None:
            raise TypeError("normal() missing required argument 'size' (pos 3) for float mean and std")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        dt = _dtype_or_default(dtype)
        _continuous(dt, "normal_kernel_cpu")
        draws = mean + std * _rng_for(generator).standard_normal(_sizes((), size))
        return _finish(np.asarray(draws).astype(dt.numpy), device, requires_grad)
    if size is not None:
        raise TypeError("normal(): a size is only taken with float mean and std")
    _continuous((mean if tensors[0] else std).dtype, "normal_kernel_cpu")
    if isinstance(std, Tensor):
        if bool((std < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _NORMAL[tensors].apply(mean, std, generator)


@declare(methods=("new",), name="_new")
def new(input: Tensor, *args, device=None) -> Tensor:  # noqa: A002
    """The legacy ``t.new(...)``: uninitialised storage of a shape, a copy of data, or empty, in ``t``'s dtype."""
    out = legacy_new(input.dtype, args)
    target = input.device if device is None else to_device(device)
    return out if target.type == "cpu" else out.to(target)


def _new_like(input: Tensor, dtype, device) -> tuple:  # noqa: A002
    return (input.dtype if dtype is None else dtype), (input.device if device is None else device)


@declare(methods=("new_zeros",), name="_new_zeros")
def new_zeros(input: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:  # noqa: A002
    """Zeros of ``size`` with this tensor's dtype and device (unless given)."""
    dt, dev = _new_like(input, dtype, device)
    return zeros(*size, dtype=dt, device=dev, requires_grad=requires_grad)


@declare(methods=("new_ones",), name="_new_ones")
def new_ones(input: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:  # noqa: A002
    """Ones of ``size`` with this tensor's dtype and device (unless given)."""
    dt, dev = _new_like(input, dtype, device)
    return ones(*size, dtype=dt, device=dev, requires_grad=requires_grad)


@declare(methods=("new_empty",), name="_new_empty")
def new_empty(input: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:  # noqa: A002
    """Uninitialised storage of ``size`` with this tensor's dtype and device (unless given)."""
    dt, dev = _new_like(input, dtype, device)
    return empty(*size, dtype=dt, device=dev, requires_grad=requires_grad)


@declare(methods=("new_full",), name="_new_full")
def new_full(input: Tensor, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:  # noqa: A002
    """``fill_value`` everywhere in ``size``, with this tensor's dtype and device (unless given)."""
    dt, dev = _new_like(input, dtype, device)
    return full(size, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


@declare(methods=("new_tensor",), name="_new_tensor")
def new_tensor(input: Tensor, data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:  # noqa: A002
    """A copy of ``data`` with this tensor's dtype and device (unless given)."""
    dt, dev = _new_like(input, dtype, device)
    return tensor(data, dtype=dt, device=dev, requires_grad=requires_grad)
